//! `norr-client`: the native NorrDB client API.
//!
//! One [`Client`] holds a connection to every data node of a cluster (one
//! data node with [`Client::connect`], several with
//! [`Client::connect_cluster`] or through mgmd with [`Client::connect_mgm`]),
//! each multiplexed by any number of concurrent [`Transaction`]s and
//! [`ScanStream`]s: requests from all of them are coalesced into as few socket
//! writes as possible, and replies are routed back by transaction handle, scan
//! id or dictionary request id.
//!
//! * Each transaction is started on the data node holding the primary
//!   replica of its first operation's partition (from the cluster's
//!   distribution, which the client keeps current) and stays there.
//! * A lost connection is noticed at once and made again in the background
//!   with backoff; a transaction whose coordinator's node fails gets a
//!   temporary error, or for a commit the cluster's definite outcome
//!   ([`Transaction::execute`]).
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
mod cluster;
mod conn;
mod error;
mod routing;
mod scan;
mod takeover;
#[cfg(feature = "testing")]
pub mod testing;
mod transaction;

pub use client::{Client, DataNodeStatus};
pub use error::ClientError;
/// The cluster's distribution (node groups, replica states): see
/// [`Client::distribution`].
pub use norr_signals::dist::{Dist, ReplicaState};
pub use norr_signals::{
    Bound, CmpOp, ColumnDef, ColumnId, ColumnType, ErrorClass, ErrorCode, ExecType, Filter, IndexDef, IndexId,
    IndexKind, KeyAccess, KeyOp, LockMode, LockWait, NodeError, NodeStats, OpKind, OpResult, PartitionId,
    PartitionScheme, ScanRange, ScanSpec, TableDef, TableId, Value, MAX_OPS_PER_BATCH, MAX_SCAN_BATCH_ROWS,
    MAX_SCAN_RANGES,
};
/// The cluster secret of `ConnectOptions::secret` (`norr_transport::auth`).
pub use norr_transport::auth::ClusterSecret;
/// What kind of API node a connection is ([`ConnectOptions::kind`]).
pub use norr_transport::handshake::ApiKind;
/// The API end of an in-process link to a data node in this process
/// ([`Client::connect_local`]).
pub use norr_transport::local_pipe::ApiEnd as LocalLink;
pub use scan::ScanStream;
pub use transaction::{CommitInfo, Savepoint, Transaction};

use std::time::Duration;

/// Options for [`Client::connect_with`].
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// Shown in the data node's log.
    pub client_name: String,
    /// What connects, told to the data node in the handshake: SQL nodes and
    /// management servers may use the connection slots the node reserves
    /// for them (`Knobs::reserved_api_connections`); applications keep the
    /// default, `ApiKind::NativeClient`. With [`Client::connect_mgm`] it
    /// is also the role registered with mgmd: a SQL node takes a
    /// `kind = "sql"` slot of the cluster configuration, others an API slot.
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
    /// The API node id to ask the data nodes (and, with
    /// [`Client::connect_mgm`], mgmd) for. None (the default): mgmd
    /// allocates one, or the first data node that answers chooses it.
    pub api_node_id: Option<u16>,
    /// When a commit's coordinator fails, wait this long for the node that
    /// takes over to report the outcome; after it the commit fails with
    /// `OutcomeUnknown` (4013).
    pub takeover_timeout: Duration,
    /// A lost data node is connected again after this delay, doubling per
    /// failed attempt up to `reconnect_backoff_max`.
    pub reconnect_backoff_min: Duration,
    pub reconnect_backoff_max: Duration,
    /// With several data nodes: the distribution (which node holds which
    /// partition's primary) is fetched again this often, and whenever a
    /// node's connection goes down or comes up.
    pub dist_refresh_interval: Duration,
    /// The cluster secret, proved (never sent) when a data node challenges
    /// the connection (`norr_transport::auth`). None (the default): the
    /// `NORR_CLUSTER_SECRET` environment variable is used if set (`norr up`
    /// sets it for the processes it starts and writes the secret to its
    /// cluster file, `[cluster] secret`).
    pub secret: Option<norr_transport::auth::ClusterSecret>,
    /// A SQL account to log in with when a data node challenges the
    /// connection (a cluster with `api_auth = "account"`): the account's
    /// password is proved (never sent, `norr_transport::account_auth`) and
    /// the node checks it, and the account's host pattern, against the
    /// accounts the SQL nodes keep (`CREATE USER`, `ALTER USER`). Set, it is
    /// used instead of the cluster secret. None (the default): the cluster
    /// secret is proved, as before.
    pub user: Option<String>,
    /// The password of `user` (empty: an account without a password).
    pub password: Password,
}

/// An account's password. Its `Debug` does not show it, so a logged
/// `ConnectOptions` does not leak it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Password(String);

impl Password {
    pub fn new(text: impl Into<String>) -> Password {
        Password(text.into())
    }

    /// The password's text, for making a login's proof. Never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Password(..)")
    }
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
            api_node_id: None,
            takeover_timeout: Duration::from_secs(5),
            reconnect_backoff_min: Duration::from_millis(100),
            reconnect_backoff_max: Duration::from_secs(3),
            dist_refresh_interval: Duration::from_secs(2),
            secret: None,
            user: None,
            password: Password::default(),
        }
    }
}

/// Where a data node listens, for [`Client::connect_cluster`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DataNodeAddr {
    /// `HOST:PORT` (resolved at every connect).
    Tcp(String),
    /// A data node's Unix-domain socket on this host (`norr datad --socket`).
    Unix(std::path::PathBuf),
}

impl DataNodeAddr {
    /// "a,b,c": addresses as [`std::str::FromStr`] reads them, comma separated.
    pub fn parse_list(s: &str) -> Result<Vec<DataNodeAddr>, String> {
        let list: Vec<DataNodeAddr> =
            s.split(',').map(str::trim).filter(|a| !a.is_empty()).map(str::parse).collect::<Result<_, _>>()?;
        if list.is_empty() {
            return Err(format!("no data node address in {s:?} (HOST:PORT or unix:PATH, comma separated)"));
        }
        Ok(list)
    }
}

/// `HOST:PORT` or `unix:PATH`.
impl std::str::FromStr for DataNodeAddr {
    type Err = String;
    fn from_str(s: &str) -> Result<DataNodeAddr, String> {
        if let Some(p) = s.strip_prefix("unix:") {
            if p.is_empty() {
                return Err("unix: needs the socket's path (unix:PATH)".to_string());
            }
            return Ok(DataNodeAddr::Unix(p.into()));
        }
        match s.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
                Ok(DataNodeAddr::Tcp(s.to_string()))
            }
            _ => Err(format!("{s:?} is not a data node address (HOST:PORT or unix:PATH)")),
        }
    }
}

impl From<std::net::SocketAddr> for DataNodeAddr {
    fn from(a: std::net::SocketAddr) -> DataNodeAddr {
        DataNodeAddr::Tcp(a.to_string())
    }
}

impl std::fmt::Display for DataNodeAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DataNodeAddr::Tcp(a) => f.write_str(a),
            DataNodeAddr::Unix(p) => write!(f, "unix:{}", p.display()),
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

#[cfg(test)]
mod tests {
    use super::DataNodeAddr;

    #[test]
    fn data_node_addresses() {
        let l = DataNodeAddr::parse_list("127.0.0.1:2202, db2:2203,unix:/tmp/n.sock,[::1]:7").unwrap();
        assert_eq!(
            l,
            vec![
                DataNodeAddr::Tcp("127.0.0.1:2202".into()),
                DataNodeAddr::Tcp("db2:2203".into()),
                DataNodeAddr::Unix("/tmp/n.sock".into()),
                DataNodeAddr::Tcp("[::1]:7".into()),
            ]
        );
        assert_eq!(l[2].to_string(), "unix:/tmp/n.sock");
        for bad in ["", " , ", "db1", "db1:x", ":22", "unix:", "db1:70000"] {
            assert!(DataNodeAddr::parse_list(bad).is_err(), "{bad:?}");
        }
    }
}
