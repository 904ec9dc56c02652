//! Shared by the tests that run the engine against a real data node.

/// A 2-thread runtime for the engine and an in-process data node with
/// `knobs` on a free loopback port.
pub fn runtime_and_node(knobs: norr_knobs::Knobs) -> (tokio::runtime::Runtime, norr_runtime::DataNodeHandle) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let node = norr_runtime::start_data_node(norr_runtime::DataNodeConfig {
        node_id: 1,
        listen: "127.0.0.1:0".parse().expect("addr"),
        knobs,
    })
    .expect("data node starts");
    (rt, node)
}
