//! Test support (feature `testing`): an in-process data node on a free
//! loopback port, for tests of crates built on the client (SQL front end, tools).
//!
//! ```
//! let node = norr_client::testing::spawn_local_node().unwrap();
//! let client = norr_client::blocking::Client::connect(node.local_addr()).unwrap();
//! assert!(client.list_tables().unwrap().is_empty());
//! ```

pub use norr_runtime::DataNodeHandle;

/// Start a data node (node id 1) with default knobs on `127.0.0.1:0`. The node
/// stops when the handle is dropped.
pub fn spawn_local_node() -> std::io::Result<DataNodeHandle> {
    spawn_local_node_with(norr_knobs::Knobs::default())
}

/// Same, with the given knobs (e.g. a short `lock_wait_timeout_ms`).
pub fn spawn_local_node_with(knobs: norr_knobs::Knobs) -> std::io::Result<DataNodeHandle> {
    norr_runtime::start_data_node(norr_runtime::DataNodeConfig {
        node_id: 1,
        listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        knobs,
        cluster: None,
    })
}
