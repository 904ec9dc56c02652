//! The async API: [`Client`] (see `transaction` for [`Transaction`] and
//! `scan` for [`ScanStream`]).

use crate::cluster::{self, ClusterShared, Endpoint, Plan};
use crate::error::ClientError;
use crate::routing::{key_partition, FirstPart};
use crate::scan::ScanStream;
use crate::transaction::Transaction;
use crate::{ConnectOptions, DataNodeAddr, LocalLink};
use norr_signals::dist::Dist;
use norr_signals::{
    DictOp, DictResult, ErrorCode, ExecType, IndexDef, KeyOp, NodeStats, OpResult, PartitionId, ScanSpec, TableDef,
    TableId, Value,
};
use std::sync::Arc;
use std::time::Duration;

/// A client of a cluster: a connection to every data node (one, or several
/// with [`Client::connect_cluster`] / [`Client::connect_mgm`]), shared by any
/// number of concurrent transactions. Cheap to clone: clones share the
/// connections, which close when the last clone (and the last transaction or
/// scan made from it) is dropped.
///
/// A broken connection is noticed at once and made again in the background
/// with backoff (logged); meanwhile new transactions go to the connected
/// nodes, and with none connected calls fail with `NotConnected` (4009,
/// temporary). A transaction whose coordinator's node fails ends with a
/// temporary error (4010 / 4025) or, for a commit whose fate the cluster
/// reports, its definite outcome; see [`Transaction::execute`].
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let knobs = norr_knobs::Knobs::default();
/// # let node = norr_runtime::start_data_node_with(
/// #     norr_runtime::DataNodeConfig { node_id: 1, listen: "127.0.0.1:0".parse()?, knobs: knobs.clone(), cluster: None },
/// #     Default::default(),
/// #     norr_txn::build_data_node(1, &knobs),
/// # )?;
/// # let addr = node.local_addr();
/// # tokio::runtime::Runtime::new()?.block_on(async move {
/// use norr_client::{Client, ColumnDef, ColumnType, ExecType, KeyOp, Value};
/// let client = Client::connect(addr).await?;
/// let t = client
///     .create_table(norr_client::table_def(
///         "kv",
///         vec![
///             ColumnDef::new("k", ColumnType::BigInt { unsigned: false }).not_null(),
///             ColumnDef::new("v", ColumnType::Varbinary { len: 100 }),
///         ],
///         vec![0],
///     ))
///     .await?;
/// let mut txn = client.begin();
/// txn.execute(vec![KeyOp::insert(t.id, vec![Value::Int(1)], vec![(1, Value::str("one"))])], ExecType::Commit)
///     .await?;
/// let row = client.read(t.id, vec![Value::Int(1)]).await?;
/// assert_eq!(row, Some(vec![Value::Int(1), Value::str("one")]));
/// # Ok::<(), norr_client::ClientError>(())
/// # })?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<ClusterShared>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("api_node", &self.inner.api_node())
            .field("data_nodes", &self.inner.link_status())
            .finish()
    }
}

/// One data node as the client sees it ([`Client::data_node_status`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataNodeStatus {
    /// None until the node answered a handshake (addresses given without mgmd).
    pub node_id: Option<u16>,
    /// Where it is reached ("host:port", "unix:PATH").
    pub address: String,
    pub connected: bool,
}

impl Client {
    /// Connect with default options. Must be called inside a tokio runtime
    /// (the connection's IO tasks are spawned on it).
    pub async fn connect(addr: impl tokio::net::ToSocketAddrs) -> Result<Client, ClientError> {
        Self::connect_with(addr, ConnectOptions::default()).await
    }

    /// Connect to one data node (the addresses `addr` resolves to are tried
    /// in order, now and at every reconnect).
    pub async fn connect_with(
        addr: impl tokio::net::ToSocketAddrs,
        opts: ConnectOptions,
    ) -> Result<Client, ClientError> {
        let addrs = match tokio::time::timeout(opts.connect_timeout, tokio::net::lookup_host(addr)).await {
            Ok(Ok(a)) => a.collect::<Vec<_>>(),
            Ok(Err(e)) => return Err(ClientError::NotConnected(format!("connect failed: {e}"))),
            Err(_) => return Err(ClientError::NotConnected("connect timed out (resolving the address)".to_string())),
        };
        if addrs.is_empty() {
            return Err(ClientError::NotConnected("connect failed: the address resolves to nothing".to_string()));
        }
        Self::with_plan(
            Plan { endpoints: vec![(Endpoint::Tcp(addrs), None)], api_node: None, mgm: None, local: None },
            opts,
        )
        .await
    }

    /// Connect through a data node's Unix-domain socket (`norr datad
    /// --socket PATH`): for an API node on the same host, cheaper per message
    /// than loopback TCP.
    pub async fn connect_unix(path: impl AsRef<std::path::Path>, opts: ConnectOptions) -> Result<Client, ClientError> {
        let ep = Endpoint::Unix(path.as_ref().to_path_buf());
        Self::with_plan(Plan { endpoints: vec![(ep, None)], api_node: None, mgm: None, local: None }, opts).await
    }

    /// Connect through an in-process link (`norr_runtime::DataNodeHandle::
    /// local_connector`) to a data node running in this process: the same
    /// protocol as a socket without its system calls. The link is made once:
    /// it ends with the node.
    pub async fn connect_local(link: LocalLink, opts: ConnectOptions) -> Result<Client, ClientError> {
        let plan = Plan { endpoints: vec![(Endpoint::Local, None)], api_node: None, mgm: None, local: Some(link) };
        Self::with_plan(plan, opts).await
    }

    /// Connect to every data node of a cluster, given by address
    /// ([`DataNodeAddr::parse_list`] reads "host:port,unix:PATH,..."). The
    /// first node that answers assigns this client's API node id (unless
    /// `opts.api_node_id` names one) and every other node is asked for the
    /// same id. Succeeds once one node is connected; the others are
    /// connected in the background. With mgmd running, prefer
    /// [`Client::connect_mgm`]: it allocates the id cluster-wide.
    pub async fn connect_cluster(addrs: &[DataNodeAddr], opts: ConnectOptions) -> Result<Client, ClientError> {
        if addrs.is_empty() {
            return Err(ClientError::Protocol("no data node address given".to_string()));
        }
        let endpoints = addrs
            .iter()
            .map(|a| match a {
                DataNodeAddr::Tcp(h) => (Endpoint::Host(h.clone()), None),
                DataNodeAddr::Unix(p) => (Endpoint::Unix(p.clone()), None),
            })
            .collect();
        Self::with_plan(Plan { endpoints, api_node: opts.api_node_id, mgm: None, local: None }, opts).await
    }

    /// Connect through the management server: fetch the cluster's
    /// configuration and this client's API node id from mgmd at `mgm`
    /// ("host:port", several comma separated), then connect to every data
    /// node with that id. The session with mgmd stays open while the client
    /// lives (mgmd going away later does not affect the client). Registers
    /// as an API node, or as a SQL node with `opts.kind` =
    /// `ApiKind::SqlNode` (management tools as the management client); asks mgmd for
    /// `opts.api_node_id` if set.
    pub async fn connect_mgm(mgm: &str, opts: ConnectOptions) -> Result<Client, ClientError> {
        use norr_mgmd::protocol::{MgmError, PeerRole};
        let role = match opts.kind {
            crate::ApiKind::NativeClient => PeerRole::Api,
            crate::ApiKind::SqlNode => PeerRole::SqlNode,
            crate::ApiKind::Management => PeerRole::Mgm,
        };
        let (m, name, want) = (mgm.to_string(), opts.client_name.clone(), opts.api_node_id);
        // The secret the data nodes' challenges get (`ConnectOptions::secret`,
        // else the environment) also opens the mgmd session of a cluster
        // that has one.
        let secret = match &opts.secret {
            Some(s) => Some(s.clone()),
            None => norr_transport::auth::ClusterSecret::from_env().map_err(ClientError::Protocol)?,
        };
        let fetched =
            tokio::task::spawn_blocking(move || norr_mgmd::session::fetch_config_with(&m, role, want, &name, secret))
                .await;
        let (link, welcome) = match fetched {
            Ok(Ok(r)) => r,
            Ok(Err(e @ MgmError::Refused { .. })) => return Err(ClientError::Protocol(e.to_string())),
            Ok(Err(e)) => return Err(ClientError::NotConnected(e.to_string())),
            Err(e) => return Err(ClientError::Protocol(format!("mgmd session task failed: {e}"))),
        };
        let endpoints: Vec<_> =
            welcome.config.data_nodes().map(|n| (Endpoint::Host(n.address()), Some(n.id))).collect();
        if endpoints.is_empty() {
            return Err(ClientError::Protocol(format!("the cluster \"{}\" has no data node", welcome.config.name)));
        }
        let plan = Plan { endpoints, api_node: Some(welcome.node_id), mgm: Some(link), local: None };
        Self::with_plan(plan, opts).await
    }

    async fn with_plan(mut plan: Plan, opts: ConnectOptions) -> Result<Client, ClientError> {
        plan.api_node = plan.api_node.or(opts.api_node_id);
        Ok(Client { inner: cluster::connect(plan, opts).await? })
    }

    /// This client's API node id (the same on every data node of a cluster;
    /// a lone data node without mgmd may give another one at a reconnect).
    pub fn api_node(&self) -> u16 {
        self.inner.api_node()
    }

    /// The id of the data node dictionary requests go to (the first
    /// connected one; 0 if none ever answered).
    pub fn data_node(&self) -> u16 {
        match self.inner.first_live() {
            Ok(c) => c.shared.data_node,
            Err(_) => self.inner.links.iter().find_map(|l| l.node_id()).unwrap_or(0),
        }
    }

    /// True while at least one data node is connected. False once every
    /// connection has failed (calls then fail with `NotConnected` until a
    /// reconnect succeeds).
    pub fn is_connected(&self) -> bool {
        self.inner.any_connected()
    }

    /// How many times a lost data node connection was made again (any
    /// node). A caller that caches what the data nodes hold (a SQL node's
    /// table definitions) checks it: a node that came back may have
    /// restarted with other contents.
    pub fn reconnect_count(&self) -> u64 {
        self.inner.reconnects()
    }

    /// Requests this client sent to data nodes and waited for a reply to
    /// (key operation batches, commits, scan batches, dictionary requests),
    /// over all its connections: how many round trips its callers cost.
    pub fn round_trips(&self) -> u64 {
        self.inner.round_trips.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Every data node of the cluster, in configuration order.
    pub fn data_node_status(&self) -> Vec<DataNodeStatus> {
        self.inner
            .link_status()
            .into_iter()
            .map(|(node_id, address, connected)| DataNodeStatus { node_id, address, connected })
            .collect()
    }

    /// Wait until every data node is connected (NDB's `wait_until_ready`):
    /// true if so within `timeout`.
    pub async fn wait_connected(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.inner.all_connected() {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            // Connections come and go on the supervisors' schedule (backoff
            // of tens of milliseconds and up): a short poll costs nothing.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The cluster's distribution as last fetched (several data nodes only;
    /// None before the first fetch).
    pub fn distribution(&self) -> Option<Dist> {
        self.inner.distribution().map(|d| (*d).clone())
    }

    /// Fetch the distribution now (it is also refreshed in the background).
    pub async fn refresh_distribution(&self) -> Result<Dist, ClientError> {
        self.inner.refresh_dist().await.map(|d| (*d).clone())
    }

    async fn dict(&self, op: DictOp) -> Result<DictResult, ClientError> {
        self.inner.dict(op).await
    }

    async fn dict_table(&self, op: DictOp) -> Result<TableDef, ClientError> {
        match self.dict(op).await? {
            DictResult::Table(t) => {
                self.inner.defs.learn(&t);
                Ok(t)
            }
            other => Err(ClientError::Protocol(format!("expected a table definition, got {other:?}"))),
        }
    }

    async fn dict_done(&self, op: DictOp) -> Result<(), ClientError> {
        match self.dict(op).await? {
            DictResult::Done => Ok(()),
            other => Err(ClientError::Protocol(format!("expected Done, got {other:?}"))),
        }
    }

    /// Create a table; returns the definition with the ids DICT assigned.
    pub async fn create_table(&self, def: TableDef) -> Result<TableDef, ClientError> {
        self.dict_table(DictOp::CreateTable(def)).await
    }

    pub async fn drop_table(&self, name: &str) -> Result<(), ClientError> {
        self.dict_done(DictOp::DropTable { name: name.to_string() }).await?;
        self.inner.defs.forget(name);
        Ok(())
    }

    /// Remove every row, keep the definition.
    pub async fn truncate_table(&self, name: &str) -> Result<(), ClientError> {
        self.dict_done(DictOp::TruncateTable { name: name.to_string() }).await
    }

    /// Build an index over the existing rows; returns the new table version.
    pub async fn create_index(&self, table: &str, index: IndexDef) -> Result<TableDef, ClientError> {
        self.dict_table(DictOp::CreateIndex { table: table.to_string(), index }).await
    }

    pub async fn drop_index(&self, table: &str, index: &str) -> Result<TableDef, ClientError> {
        self.dict_table(DictOp::DropIndex { table: table.to_string(), index: index.to_string() }).await
    }

    /// Replace `table`'s definition with `def` (ALTER TABLE, all or
    /// nothing): existing rows are rebuilt with column i taken from
    /// `sources[i]` (see `DictOp::AlterTable`); `def.name` may rename the
    /// table. `expect_version` is the version of the definition the change
    /// was made from; if another change got there first the call fails with
    /// `SchemaVersionMismatch` (re-read the table and make the change again).
    /// Returns the new definition (new version).
    pub async fn alter_table(
        &self,
        table: &str,
        def: TableDef,
        sources: Vec<norr_signals::ColumnSource>,
        expect_version: u32,
    ) -> Result<TableDef, ClientError> {
        self.dict_table(DictOp::AlterTable { table: table.to_string(), def, sources, expect_version }).await
    }

    pub async fn get_table(&self, name: &str) -> Result<TableDef, ClientError> {
        self.dict_table(DictOp::GetTable { name: name.to_string() }).await
    }

    pub async fn list_tables(&self) -> Result<Vec<TableDef>, ClientError> {
        match self.dict(DictOp::ListTables).await? {
            DictResult::Tables(t) => {
                t.iter().for_each(|d| self.inner.defs.learn(d));
                Ok(t)
            }
            other => Err(ClientError::Protocol(format!("expected a table list, got {other:?}"))),
        }
    }

    /// Reserve `count` consecutive AUTO_INCREMENT values; returns the first.
    /// `count` 0 reserves nothing and returns the value the next reservation
    /// would start at.
    pub async fn next_auto_inc(&self, table: TableId, count: u64) -> Result<u64, ClientError> {
        match self.dict(DictOp::NextAutoInc { table, count }).await? {
            DictResult::AutoInc { first } => Ok(first),
            other => Err(ClientError::Protocol(format!("expected AutoInc, got {other:?}"))),
        }
    }

    /// Make later AUTO_INCREMENT values greater than `used`.
    pub async fn bump_auto_inc(&self, table: TableId, used: u64) -> Result<(), ClientError> {
        self.dict_done(DictOp::BumpAutoInc { table, used }).await
    }

    /// Memory, row and transaction counters of the data node [`Client::data_node`].
    pub async fn node_stats(&self) -> Result<NodeStats, ClientError> {
        match self.dict(DictOp::NodeStats).await? {
            DictResult::Stats(s) => Ok(s),
            other => Err(ClientError::Protocol(format!("expected Stats, got {other:?}"))),
        }
    }

    /// TC instances of the data node [`Client::data_node`]: transactions are
    /// spread over them by the partition of their first operation (see
    /// [`Client::begin`]).
    pub fn tc_instances(&self) -> u16 {
        self.inner.first_live().map_or(1, |c| c.shared.tc_instances)
    }

    /// Start a transaction. Nothing is sent until the first `execute` or `scan`,
    /// which also chooses the transaction's coordinator (data node and TC
    /// instance) from the partition it touches: the first key operation's
    /// (hashed as the data node does, for tables this client created or
    /// looked up; the partition set on the operation for RANGE/LIST tables),
    /// or the one partition a pruned scan reads. The coordinator is on the
    /// node of that partition's primary replica. Every later request goes to
    /// the same coordinator.
    pub fn begin(&self) -> Transaction {
        Transaction::new(self.clone())
    }

    /// Start a transaction coordinated for `key` of `table` (hash-partitioned
    /// tables; for RANGE/LIST tables, use [`Client::begin_on_partition`] or
    /// let the first operation's partition decide, as with [`Client::begin`]).
    pub fn begin_hinted(&self, table: &TableDef, key: &[Value]) -> Transaction {
        self.inner.defs.learn(table);
        let fp = FirstPart { part: key_partition(table, key), def: Some(Arc::new(table.clone())) };
        self.begin_placed(fp)
    }

    /// Start a transaction coordinated for partition `part` (the caller knows
    /// it, e.g. the SQL layer for a RANGE/LIST-partitioned table). With
    /// several data nodes the node is chosen from the partition alone (any
    /// connected node: the partition's primary needs the table).
    pub fn begin_on_partition(&self, part: PartitionId) -> Transaction {
        self.begin_placed(FirstPart { part: Some(part), def: None })
    }

    fn begin_placed(&self, fp: FirstPart) -> Transaction {
        let txn = self.inner.alloc_txn();
        // With no node connected the choice is made again at the first request.
        let coord = self.inner.place(fp, txn).ok();
        Transaction::with_handle(self.clone(), txn, coord)
    }

    /// Committed read of one row by primary key (a one-operation transaction):
    /// `None` if there is no such row.
    pub async fn read(&self, table: TableId, key: Vec<Value>) -> Result<Option<Vec<Value>>, ClientError> {
        let mut op = KeyOp::read(table, key);
        op.abort_on_error = false;
        let mut txn = self.begin();
        let mut res = txn.execute(vec![op], ExecType::Commit).await?;
        match res.pop() {
            Some(OpResult::Ok(row)) => Ok(row),
            Some(OpResult::Err(e)) if e.code == ErrorCode::NoSuchRow => Ok(None),
            Some(OpResult::Err(e)) => Err(ClientError::Node(e)),
            None => Err(ClientError::Protocol("no result for the read".to_string())),
        }
    }

    /// Standalone committed-read scan (no transaction, no locks): on the
    /// node of the partition's primary if the scan is pruned to one
    /// partition, else on any connected node.
    pub async fn scan(&self, spec: ScanSpec) -> Result<ScanStream, ClientError> {
        crate::scan::check_spec(&spec)?;
        let txn = self.inner.alloc_txn();
        let (conn, instance) = self.inner.place_scan(&spec, txn)?;
        let tc = conn.shared.tc(instance);
        ScanStream::open(conn, tc, txn, true, spec, None).await
    }
}
