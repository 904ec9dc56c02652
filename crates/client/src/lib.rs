//! `norr-client`: the native NorrDB client API.
//!
//! One [`Client`] is one TCP connection to a data node, multiplexed by any
//! number of concurrent [`Transaction`]s and [`ScanStream`]s: requests from all
//! of them are coalesced into as few socket writes as possible, and replies are
//! routed back by transaction handle, scan id or dictionary request id.
//!
//! * Key operations ([`KeyOp`]) go in batches: one [`Transaction::execute`] is one
//!   round trip, whatever the batch size (up to [`MAX_OPS_PER_BATCH`]).
//! * Errors carry a stable code; [`ClientError::is_temporary`] says whether to
//!   retry the transaction (lock wait timeout, overload, lost connection).
//! * [`blocking`] has the same API for synchronous code.
//! * [`bench`] is the `norr bench` load generator.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let knobs = norr_knobs::Knobs::default();
//! # let node = norr_runtime::start_data_node_with(
//! #     norr_runtime::DataNodeConfig { node_id: 1, listen: "127.0.0.1:0".parse()?, knobs: knobs.clone(), cluster: None },
//! #     Default::default(),
//! #     norr_txn::build_data_node(1, &knobs),
//! # )?;
//! # let addr = node.local_addr();
//! # tokio::runtime::Runtime::new()?.block_on(async move {
//! use norr_client::{table_def, Client, ColumnDef, ColumnType, ExecType, KeyOp, ScanSpec, Value};
//! let client = Client::connect(addr).await?; // e.g. "127.0.0.1:2202", where `norr datad` listens
//! let t = client
//!     .create_table(table_def("kv", vec![ColumnDef::new("k", ColumnType::Int { unsigned: false }).not_null()], vec![0]))
//!     .await?;
//! let inserts = (0..10).map(|k| KeyOp::insert(t.id, vec![Value::Int(k)], vec![])).collect();
//! client.begin().execute(inserts, ExecType::Commit).await?;
//! let rows = client.scan(ScanSpec::full(t.id)).await?.collect_all().await?;
//! assert_eq!(rows.len(), 10);
//! # Ok::<(), norr_client::ClientError>(())
//! # })?;
//! # Ok(()) }
//! ```

pub mod bench;
pub mod blocking;
mod client;
mod conn;
mod error;
mod partition_map;
#[cfg(feature = "testing")]
pub mod testing;

pub use client::{Client, Savepoint, ScanStream, Transaction};
pub use error::ClientError;
pub use norr_signals::{
    Bound, CmpOp, ColumnDef, ColumnId, ColumnType, ErrorClass, ErrorCode, ExecType, Filter, IndexDef, IndexId,
    IndexKind, KeyAccess, KeyOp, LockMode, LockWait, NodeError, NodeStats, OpKind, OpResult, PartitionId,
    PartitionScheme, ScanRange, ScanSpec, TableDef, TableId, Value, MAX_OPS_PER_BATCH, MAX_SCAN_BATCH_ROWS,
};
/// What kind of API node a connection is ([`ConnectOptions::kind`]).
pub use norr_transport::handshake::ApiKind;
/// The API end of an in-process link to a data node in this process
/// ([`Client::connect_local`]).
pub use norr_transport::local_pipe::ApiEnd as LocalLink;

use std::time::Duration;

/// Options for [`Client::connect_with`].
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// Shown in the data node's log.
    pub client_name: String,
    /// What connects, told to the data node in the handshake: SQL nodes and
    /// management servers may use the connection slots the node reserves
    /// for them (`Knobs::reserved_api_connections`); applications keep the
    /// default, `ApiKind::NativeClient`.
    pub kind: ApiKind,
    /// Longest wait for any reply; `None` waits forever. On timeout the call
    /// fails with [`ClientError::Timeout`] and the transaction is rolled back.
    pub request_timeout: Option<Duration>,
    /// Longest wait for the TCP connect plus handshake.
    pub connect_timeout: Duration,
    /// Largest frame sent or accepted; requests that would exceed it fail
    /// locally without reaching the node.
    pub max_frame_bytes: usize,
    /// Most requests waiting for a reply at once on the connection.
    pub max_pending_requests: usize,
    /// After sending a request, keep checking for its reply (yielding to the
    /// runtime, which polls the socket without blocking) for this long before
    /// the task sleeps: a reply that comes back within it does not pay the
    /// thread's wake-up latency (tens of microseconds on an idle machine).
    /// Costs CPU while waiting; zero (the default) never spins.
    pub reply_spin: Duration,
    /// Write each request to the socket at once, from the task that makes it,
    /// whenever nothing else is queued; otherwise (the default) requests made
    /// in the same scheduler round go out together in one write.
    ///
    /// Batching suits few callers with many requests in flight (`norr bench`:
    /// batched updates ran ~1.3x faster batched than direct). Direct sends suit
    /// many independent callers with one small request each, such as a SQL
    /// node's sessions: batched, the sessions that woke together send
    /// together, the data node answers them together and they wake together
    /// again, so the two processes take turns instead of working at once
    /// (sysbench through sqld ran 1.3-1.8x faster with direct sends).
    pub direct_send: bool,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            client_name: format!("norr-client {}", env!("CARGO_PKG_VERSION")),
            kind: ApiKind::NativeClient,
            request_timeout: Some(Duration::from_secs(60)),
            connect_timeout: Duration::from_secs(10),
            max_frame_bytes: norr_transport::DEFAULT_MAX_FRAME_BYTES,
            max_pending_requests: 1 << 16,
            reply_spin: Duration::ZERO,
            direct_send: false,
        }
    }
}

/// A table definition for [`Client::create_table`]: hash-partitioned on the
/// primary key (`primary_key` lists column positions), no secondary indexes,
/// one partition per LDM (the node decides when `partitions` is 0).
pub fn table_def(name: &str, columns: Vec<ColumnDef>, primary_key: Vec<ColumnId>) -> TableDef {
    TableDef {
        id: 0,
        version: 0,
        name: name.to_string(),
        columns,
        primary_key,
        partitioning: PartitionScheme::Key { columns: Vec::new() },
        partitions: 0,
        indexes: Vec::new(),
        extra: Vec::new(),
        options: Default::default(),
    }
}
