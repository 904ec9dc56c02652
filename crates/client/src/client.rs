//! The async API: [`Client`], [`Transaction`], [`ScanStream`].

use crate::conn::{self, Conn, Reply, ReqKey, Shared};
use crate::error::ClientError;
use crate::{ConnectOptions, LocalLink};
use norr_signals::{
    BlockRef, DictOp, DictReq, DictResult, ErrorCode, ExecType, IndexDef, KeyOp, NodeError, NodeStats, OpResult,
    PartitionId, SavepointAction, ScanNextReq, ScanSpec, ScanTabReq, Signal, TableDef, TableId, TcKeyReq,
    TcSavepointReq, TxnOutcome, Value,
};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

/// A connection to one data node, shared by any number of concurrent
/// transactions. Cheap to clone: clones share the connection, which closes when
/// the last clone (and the last transaction or scan made from it) is dropped.
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
    conn: Arc<Conn>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("api_node", &self.conn.shared.api_node)
            .field("data_node", &self.conn.shared.data_node)
            .finish()
    }
}

fn protocol_mismatch(what: &str, reply: &Reply) -> ClientError {
    ClientError::Protocol(format!("unexpected reply to {what}: {reply:?}"))
}

impl Client {
    /// Connect with default options. Must be called inside a tokio runtime
    /// (the connection's IO tasks are spawned on it).
    pub async fn connect(addr: impl tokio::net::ToSocketAddrs) -> Result<Client, ClientError> {
        Self::connect_with(addr, ConnectOptions::default()).await
    }

    pub async fn connect_with(
        addr: impl tokio::net::ToSocketAddrs,
        opts: ConnectOptions,
    ) -> Result<Client, ClientError> {
        let conn = conn::connect(addr, opts).await?;
        Ok(Client { conn: Arc::new(conn) })
    }

    /// Connect through a data node's Unix-domain socket (`norr datad
    /// --socket PATH`): for an API node on the same host, cheaper per message
    /// than loopback TCP.
    pub async fn connect_unix(path: impl AsRef<std::path::Path>, opts: ConnectOptions) -> Result<Client, ClientError> {
        let conn = conn::connect_unix(path.as_ref(), opts).await?;
        Ok(Client { conn: Arc::new(conn) })
    }

    /// Connect through an in-process link (`norr_runtime::DataNodeHandle::
    /// local_connector`) to a data node running in this process: the same
    /// protocol as a socket without its system calls.
    pub async fn connect_local(link: LocalLink, opts: ConnectOptions) -> Result<Client, ClientError> {
        let conn = conn::connect_local(link, opts).await?;
        Ok(Client { conn: Arc::new(conn) })
    }

    fn shared(&self) -> &Shared {
        &self.conn.shared
    }

    /// The API node id the data node gave this connection.
    pub fn api_node(&self) -> u16 {
        self.shared().api_node
    }

    /// The id of the data node this client is connected to.
    pub fn data_node(&self) -> u16 {
        self.shared().data_node
    }

    /// False once the connection has failed; every call then fails with
    /// `NotConnected`.
    pub fn is_connected(&self) -> bool {
        self.shared().closed_reason().is_none()
    }

    async fn dict(&self, op: DictOp) -> Result<DictResult, ClientError> {
        let s = self.shared();
        let req_id = s.alloc_dict();
        let reply =
            s.request(ReqKey::Dict(req_id), s.dict(), Signal::DictReq(Box::new(DictReq { req_id, op }))).await?;
        match reply {
            Reply::Dict(Ok(r)) => Ok(r),
            Reply::Dict(Err(e)) => Err(ClientError::Node(e)),
            other => Err(protocol_mismatch("DICT_REQ", &other)),
        }
    }

    async fn dict_table(&self, op: DictOp) -> Result<TableDef, ClientError> {
        match self.dict(op).await? {
            DictResult::Table(t) => {
                self.shared().map.learn(&t);
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
        self.shared().map.forget(name);
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
                t.iter().for_each(|d| self.shared().map.learn(d));
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

    /// Memory, row and transaction counters of the data node.
    pub async fn node_stats(&self) -> Result<NodeStats, ClientError> {
        match self.dict(DictOp::NodeStats).await? {
            DictResult::Stats(s) => Ok(s),
            other => Err(ClientError::Protocol(format!("expected Stats, got {other:?}"))),
        }
    }

    /// TC instances of the data node: transactions are spread over them by
    /// the partition of their first operation (see [`Client::begin`]).
    pub fn tc_instances(&self) -> u16 {
        self.shared().map.tc_instances()
    }

    /// Start a transaction. Nothing is sent until the first `execute` or `scan`,
    /// which also chooses the transaction's coordinator (TC instance) from the
    /// partition it touches: the first key operation's (hashed as the data
    /// node does, for tables this client created or looked up; the partition
    /// set on the operation for RANGE/LIST tables), or the one partition a
    /// pruned scan reads. Every later request goes to the same coordinator.
    pub fn begin(&self) -> Transaction {
        self.begin_with(None)
    }

    /// Start a transaction coordinated for `key` of `table` (hash-partitioned
    /// tables; for RANGE/LIST tables, use [`Client::begin_on_partition`] or
    /// let the first operation's partition decide, as with [`Client::begin`]).
    pub fn begin_hinted(&self, table: &TableDef, key: &[Value]) -> Transaction {
        self.begin_with(self.shared().map.for_key(table, key))
    }

    /// Start a transaction coordinated for partition `part` (the caller knows
    /// it, e.g. the SQL layer for a RANGE/LIST-partitioned table).
    pub fn begin_on_partition(&self, part: PartitionId) -> Transaction {
        self.begin_with(Some(self.shared().map.for_partition(part)))
    }

    fn begin_with(&self, tc: Option<u16>) -> Transaction {
        let txn = self.shared().alloc_txn();
        Transaction {
            client: self.clone(),
            txn,
            tc,
            state: Arc::new(AtomicU8::new(TXN_IDLE)),
            last_savepoint: 0,
            unsent_savepoint: None,
        }
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

    /// Standalone committed-read scan (no transaction, no locks).
    pub async fn scan(&self, spec: ScanSpec) -> Result<ScanStream, ClientError> {
        let s = self.shared();
        let txn = s.alloc_txn();
        let tc = s.map.tc(s.map.for_scan(&spec, txn));
        ScanStream::open(self.clone(), tc, txn, true, spec, None).await
    }
}

const TXN_IDLE: u8 = 0;
const TXN_OPEN: u8 = 1;
const TXN_COMMITTED: u8 = 2;
const TXN_ABORTED: u8 = 3;

/// A transaction: batches of key operations and scans, each batch one round
/// trip, ended by a commit or rollback. Dropping an unfinished transaction rolls
/// it back in the background.
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
/// # use norr_client::{Client, ColumnDef, ColumnType};
/// use norr_client::{ExecType, KeyOp, LockMode, Value};
/// # let client = Client::connect(addr).await?;
/// # let t = client.create_table(norr_client::table_def("accounts", vec![
/// #     ColumnDef::new("id", ColumnType::BigInt { unsigned: false }).not_null(),
/// #     ColumnDef::new("balance", ColumnType::BigInt { unsigned: false }).not_null()], vec![0])).await?;
/// # let table = t.id;
/// # client.begin().execute(vec![
/// #     KeyOp::insert(table, vec![Value::Int(1)], vec![(1, Value::Int(100))]),
/// #     KeyOp::insert(table, vec![Value::Int(2)], vec![(1, Value::Int(0))])], ExecType::Commit).await?;
/// // Move 10 from account 1 to account 2, retrying on temporary errors.
/// loop {
///     let mut txn = client.begin();
///     let mut read = KeyOp::read(table, vec![Value::Int(1)]);
///     read.lock = LockMode::Exclusive;
///     let r = async {
///         let rows = txn.execute(vec![read], ExecType::NoCommit).await?;
///         let mut debit = KeyOp::update(table, vec![Value::Int(1)], vec![]);
///         debit.increments = vec![(1, Value::Int(-10))];
///         let mut credit = KeyOp::update(table, vec![Value::Int(2)], vec![]);
///         credit.increments = vec![(1, Value::Int(10))];
///         txn.execute(vec![debit, credit], ExecType::Commit).await?;
///         Ok::<_, norr_client::ClientError>(rows)
///     }
///     .await;
///     match r {
///         Ok(_) => break,
///         Err(e) if e.is_temporary() => continue,
///         Err(e) => return Err(e),
///     }
/// }
/// assert_eq!(client.read(table, vec![Value::Int(2)]).await?.unwrap()[1], Value::Int(10));
/// # Ok::<(), norr_client::ClientError>(())
/// # })?;
/// # Ok(()) }
/// ```
pub struct Transaction {
    client: Client,
    txn: u64,
    /// The coordinator (TC instance): chosen at the first request, unless the
    /// transaction was begun for a partition.
    tc: Option<u16>,
    /// Shared with the transaction's scans, which can abort it.
    state: Arc<AtomicU8>,
    /// Number of the latest savepoint handed out (0: none).
    last_savepoint: u32,
    /// A savepoint set while nothing was sent yet: sent just before the
    /// first request, once that request has chosen the coordinator.
    unsent_savepoint: Option<u32>,
}

/// A savepoint of a [`Transaction`] ([`Transaction::savepoint`]). Releasing
/// one needs no call: drop it (the node keeps nothing per savepoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Savepoint(u32);

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("txn", &self.txn)
            .field("tc", &self.tc)
            .field("state", &self.state.load(Ordering::Relaxed))
            .finish()
    }
}

impl Transaction {
    /// The transaction's handle on the connection (for logs).
    pub fn id(&self) -> u64 {
        self.txn
    }

    /// The TC instance coordinating the transaction; None before its first
    /// request (unless begun for a partition).
    pub fn coordinator(&self) -> Option<u16> {
        self.tc
    }

    /// The coordinator, chosen now if not yet (from the first request).
    fn tc_for(&mut self, choose: impl FnOnce(&crate::partition_map::PartitionMap, u64) -> u16) -> BlockRef {
        let map = &self.client.conn.shared.map;
        let i = match self.tc {
            Some(i) => i,
            None => *self.tc.insert(choose(map, self.txn)),
        };
        map.tc(i)
    }

    /// The coordinator of a transaction the node may know (it was chosen
    /// when its first request was sent).
    fn tc_sent(&self) -> BlockRef {
        self.client.conn.shared.map.tc(self.tc.unwrap_or(0))
    }

    /// True once committed, rolled back or aborted by the node.
    pub fn is_finished(&self) -> bool {
        self.state.load(Ordering::Acquire) >= TXN_COMMITTED
    }

    fn check_usable(&self) -> Result<(), ClientError> {
        match self.state.load(Ordering::Acquire) {
            TXN_COMMITTED => Err(ClientError::Protocol("transaction already committed".to_string())),
            TXN_ABORTED => Err(ClientError::Node(NodeError::with(
                ErrorCode::TransactionAborted,
                "the transaction was aborted or rolled back; start a new one",
            ))),
            _ => Ok(()),
        }
    }

    /// Execute one batch of operations in one round trip. Results come in
    /// request order. With `ExecType::Commit` the transaction commits after the
    /// batch. An error aborts the transaction (all its changes undone), except
    /// the per-operation errors of operations with `abort_on_error == false`,
    /// which come back as `OpResult::Err`: among them a locking read's
    /// `LockNoWait` (`LockWait::NoWait`, row locked by another transaction;
    /// nothing of the read is left). A `LockWait::SkipLocked` read of such a
    /// row answers `NoSuchRow`.
    pub async fn execute(&mut self, ops: Vec<KeyOp>, exec: ExecType) -> Result<Vec<OpResult>, ClientError> {
        self.check_usable()?;
        if exec == ExecType::Rollback && !ops.is_empty() {
            return Err(ClientError::Protocol("a Rollback batch must be empty".to_string()));
        }
        let idle = self.state.load(Ordering::Acquire) == TXN_IDLE;
        if ops.is_empty() && idle {
            // Nothing was ever sent: nothing to execute, commit or roll back.
            if exec != ExecType::NoCommit {
                self.state.store(if exec == ExecType::Commit { TXN_COMMITTED } else { TXN_ABORTED }, Ordering::Release);
            }
            return Ok(Vec::new());
        }
        let n_ops = ops.len();
        let tc = self.tc_for(|map, spread| map.for_ops(&ops, spread));
        // The node knows the transaction once a savepoint went out.
        let idle = !self.send_unsent_savepoint(tc).await? && idle;
        let s = &self.client.conn.shared;
        let txn = self.txn;
        let sig = Signal::TcKeyReq(Box::new(TcKeyReq { txn, exec, ops }));
        // From here the node may know the transaction: a drop must roll it back.
        self.state.store(TXN_OPEN, Ordering::Release);
        let reply = match s.request(ReqKey::Txn(txn), tc, sig).await {
            Ok(r) => r,
            Err(e) => {
                // Nothing was sent for a frame-size error of the first batch,
                // but rolling back an unknown transaction is harmless.
                if !matches!(e, ClientError::Node(_)) || !idle {
                    self.abort_in_background();
                } else {
                    self.state.store(TXN_ABORTED, Ordering::Release);
                }
                return Err(e);
            }
        };
        match reply {
            Reply::Key(Ok(conf)) => {
                let conf = *conf;
                if conf.results.len() != n_ops {
                    self.abort_in_background();
                    return Err(ClientError::Protocol(format!(
                        "TC_KEYCONF carries {} results for {n_ops} operations",
                        conf.results.len()
                    )));
                }
                match conf.outcome {
                    TxnOutcome::Open => {}
                    TxnOutcome::Committed => self.state.store(TXN_COMMITTED, Ordering::Release),
                    TxnOutcome::RolledBack => self.state.store(TXN_ABORTED, Ordering::Release),
                }
                Ok(conf.results)
            }
            Reply::Key(Err(r)) => {
                self.state.store(TXN_ABORTED, Ordering::Release);
                let mut e = r.error;
                if let Some(i) = r.op_index {
                    if e.message.is_empty() {
                        e.message = format!("operation {i} of the batch");
                    } else {
                        e.message = format!("{} (operation {i} of the batch)", e.message);
                    }
                }
                Err(ClientError::Node(e))
            }
            other => {
                self.abort_in_background();
                Err(protocol_mismatch("TC_KEYREQ", &other))
            }
        }
    }

    /// Commit. Sends an empty Commit batch if anything was sent; a no-op if
    /// nothing was.
    pub async fn commit(mut self) -> Result<(), ClientError> {
        self.execute(Vec::new(), ExecType::Commit).await.map(|_| ())
    }

    /// Roll back everything the transaction did and release its locks.
    pub async fn rollback(mut self) -> Result<(), ClientError> {
        if self.is_finished() {
            return Ok(());
        }
        match self.execute(Vec::new(), ExecType::Rollback).await {
            Ok(_) => Ok(()),
            // The node forgot it already (aborted it): rolled back all the same.
            Err(ClientError::Node(e)) if e.code == ErrorCode::TransactionAborted => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Scan inside the transaction: with `LockMode::Shared`/`Exclusive` the rows
    /// returned stay locked until the transaction ends. A scan error aborts the
    /// transaction, except `ErrorCode::LockNoWait` (a `LockWait::NoWait` scan
    /// met a row locked by another transaction): that ends the scan only, and
    /// the rows it locked before stay locked. `LockWait::SkipLocked` leaves
    /// such rows out.
    pub async fn scan(&mut self, spec: ScanSpec) -> Result<ScanStream, ClientError> {
        self.check_usable()?;
        let tc = self.tc_for(|map, spread| map.for_scan(&spec, spread));
        self.send_unsent_savepoint(tc).await?;
        self.state.store(TXN_OPEN, Ordering::Release);
        ScanStream::open(self.client.clone(), tc, self.txn, false, spec, Some(self.state.clone())).await
    }

    /// Set a savepoint: [`Transaction::rollback_to`] it later undoes every
    /// change the transaction makes from now on (rows back to their images
    /// at this point, inserted rows gone) and keeps the transaction open.
    /// Row locks taken meanwhile stay held until the transaction ends.
    /// One round trip, except before the transaction's first request (then
    /// it travels with that request, one round trip more).
    pub async fn savepoint(&mut self) -> Result<Savepoint, ClientError> {
        self.check_usable()?;
        let n = self
            .last_savepoint
            .checked_add(1)
            .ok_or_else(|| ClientError::Protocol("out of savepoint numbers".to_string()))?;
        self.last_savepoint = n;
        if self.state.load(Ordering::Acquire) == TXN_IDLE {
            // Nothing sent: the coordinator is not chosen yet, and nothing
            // is there to undo.
            self.unsent_savepoint = Some(n);
            return Ok(Savepoint(n));
        }
        let tc = self.tc_sent();
        self.savepoint_request(tc, n, SavepointAction::Set).await?;
        Ok(Savepoint(n))
    }

    /// Undo every change made since `sp` was set; the transaction stays open,
    /// `sp` stays valid (savepoints set after it may be dropped: rolling
    /// back to one of them later is allowed but undoes nothing more than
    /// rolling back to `sp` did). An error means the node aborted the
    /// transaction (e.g. a concurrent DDL doomed it), as for `execute`.
    /// Wait for every `execute` first; scans open now keep the rows they read.
    pub async fn rollback_to(&mut self, sp: Savepoint) -> Result<(), ClientError> {
        self.check_usable()?;
        if sp.0 == 0 || sp.0 > self.last_savepoint {
            return Err(ClientError::Protocol(format!("savepoint {} is not one of this transaction", sp.0)));
        }
        if self.state.load(Ordering::Acquire) == TXN_IDLE {
            return Ok(()); // nothing was sent since it was set
        }
        let tc = self.tc_sent();
        self.savepoint_request(tc, sp.0, SavepointAction::RollbackTo).await
    }

    /// Send the savepoint set before the first request, if any (true: sent).
    async fn send_unsent_savepoint(&mut self, tc: BlockRef) -> Result<bool, ClientError> {
        match self.unsent_savepoint.take() {
            Some(n) => self.savepoint_request(tc, n, SavepointAction::Set).await.map(|()| true),
            None => Ok(false),
        }
    }

    /// One TC_SAVEPOINTREQ round trip (answered as a TC_KEYREQ is).
    async fn savepoint_request(&mut self, tc: BlockRef, n: u32, action: SavepointAction) -> Result<(), ClientError> {
        let s = &self.client.conn.shared;
        let txn = self.txn;
        let sig = Signal::TcSavepointReq(Box::new(TcSavepointReq { txn, savepoint: n, action }));
        self.state.store(TXN_OPEN, Ordering::Release);
        let reply = match s.request(ReqKey::Txn(txn), tc, sig).await {
            Ok(r) => r,
            Err(e) => {
                self.abort_in_background();
                return Err(e);
            }
        };
        match reply {
            Reply::Key(Ok(conf)) if conf.outcome == TxnOutcome::Open && conf.results.is_empty() => Ok(()),
            Reply::Key(Err(r)) => {
                self.state.store(TXN_ABORTED, Ordering::Release);
                Err(ClientError::Node(r.error))
            }
            other => {
                self.abort_in_background();
                Err(protocol_mismatch("TC_SAVEPOINTREQ", &other))
            }
        }
    }

    /// Mark finished and queue a rollback without waiting for its reply.
    fn abort_in_background(&mut self) {
        let prev = self.state.swap(TXN_ABORTED, Ordering::AcqRel);
        if prev == TXN_OPEN {
            send_rollback(&self.client.conn.shared, self.tc_sent(), self.txn);
        }
    }
}

fn send_rollback(s: &Shared, tc: BlockRef, txn: u64) {
    // Best effort: if the connection is gone the node aborts the transaction
    // itself (API_FAILREQ).
    let _ = s.send(tc, Signal::TcKeyReq(Box::new(TcKeyReq { txn, exec: ExecType::Rollback, ops: Vec::new() })));
}

impl Drop for Transaction {
    fn drop(&mut self) {
        if self.state.load(Ordering::Acquire) == TXN_OPEN {
            // An in-flight request of a cancelled `execute` may still be
            // registered; its reply is dropped by the reader.
            self.client.conn.shared.unregister(ReqKey::Txn(self.txn));
            send_rollback(&self.client.conn.shared, self.tc_sent(), self.txn);
        }
    }
}

/// The rows of a scan, fetched batch by batch (`ScanSpec::batch_rows` rows per
/// round trip): call [`ScanStream::next_batch`], or use it as a
/// `futures_core::Stream` of rows. Dropping an unfinished stream closes the
/// scan in the background.
pub struct ScanStream {
    client: Client,
    /// The TC running the scan (the transaction's coordinator).
    tc: BlockRef,
    txn: u64,
    scan_id: u32,
    /// Rows received and not yet handed out.
    buffered: std::vec::IntoIter<Vec<Value>>,
    /// The node said the scan is finished (or it failed).
    done: bool,
    /// A fetch started by `poll_next` and not finished yet.
    inflight: Option<FetchFuture>,
    /// The owning transaction's state (None for a standalone scan).
    txn_state: Option<Arc<AtomicU8>>,
}

type FetchResult = Result<(Vec<Vec<Value>>, bool), ClientError>;
type FetchFuture = std::pin::Pin<Box<dyn std::future::Future<Output = FetchResult> + Send>>;

/// One scan round trip; owns its client handle so it can live in the stream.
async fn fetch(client: Client, tc: BlockRef, req: Signal, scan_id: u32) -> FetchResult {
    let s = &client.conn.shared;
    match s.request(ReqKey::Scan(scan_id), tc, req).await? {
        Reply::Scan(Ok(conf)) => Ok((conf.rows, conf.done)),
        Reply::Scan(Err(e)) => Err(ClientError::Node(e)),
        other => Err(ClientError::Protocol(format!("unexpected reply to SCAN_TABREQ: {other:?}"))),
    }
}

impl std::fmt::Debug for ScanStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScanStream").field("scan_id", &self.scan_id).field("done", &self.done).finish()
    }
}

impl ScanStream {
    async fn open(
        client: Client,
        tc: BlockRef,
        txn: u64,
        standalone: bool,
        spec: ScanSpec,
        txn_state: Option<Arc<AtomicU8>>,
    ) -> Result<ScanStream, ClientError> {
        let scan_id = client.conn.shared.alloc_scan();
        let req = Signal::ScanTabReq(Box::new(ScanTabReq { txn, scan_id, standalone, spec }));
        let mut st = ScanStream {
            client: client.clone(),
            tc,
            txn,
            scan_id,
            buffered: Vec::new().into_iter(),
            done: false,
            inflight: None,
            txn_state,
        };
        let r = fetch(client, tc, req, scan_id).await;
        st.absorb(r)?;
        Ok(st)
    }

    fn next_req(&self, close: bool) -> Signal {
        Signal::ScanNextReq(ScanNextReq { txn: self.txn, scan_id: self.scan_id, close })
    }

    /// Take in the outcome of a round trip.
    fn absorb(&mut self, r: FetchResult) -> Result<(), ClientError> {
        match r {
            Ok((rows, done)) => {
                self.buffered = rows.into_iter();
                self.done = done;
                Ok(())
            }
            Err(err) => {
                // On SCAN_TABREF the node closed the scan and aborted the
                // transaction (except for a NOWAIT scan that met a locked
                // row: only the scan ends); on a lost reply, roll back to be
                // sure.
                self.done = true;
                let scan_only = matches!(&err, ClientError::Node(e) if e.code == ErrorCode::LockNoWait);
                if let Some(st) = self.txn_state.as_ref().filter(|_| !scan_only) {
                    let prev = st.swap(TXN_ABORTED, Ordering::AcqRel);
                    if prev == TXN_OPEN && !matches!(err, ClientError::Node(_)) {
                        send_rollback(&self.client.conn.shared, self.tc, self.txn);
                    }
                }
                Err(err)
            }
        }
    }

    /// The next batch of rows, or `None` when the scan is finished.
    pub async fn next_batch(&mut self) -> Result<Option<Vec<Vec<Value>>>, ClientError> {
        loop {
            if self.buffered.len() > 0 {
                // Reuses the batch's allocation (in-place collect).
                return Ok(Some(std::mem::take(&mut self.buffered).collect()));
            }
            let fut = match self.inflight.take() {
                Some(f) => f,
                None if self.done => return Ok(None),
                None => Box::pin(fetch(self.client.clone(), self.tc, self.next_req(false), self.scan_id)),
            };
            let r = fut.await;
            self.absorb(r)?;
        }
    }

    /// Every remaining row.
    pub async fn collect_all(mut self) -> Result<Vec<Vec<Value>>, ClientError> {
        let mut all = Vec::new();
        while let Some(mut b) = self.next_batch().await? {
            all.append(&mut b);
        }
        Ok(all)
    }

    /// Close the scan early (waits for the node to confirm).
    pub async fn close(mut self) -> Result<(), ClientError> {
        if let Some(f) = self.inflight.take() {
            let r = f.await;
            self.absorb(r)?;
        }
        self.buffered = Vec::new().into_iter();
        if self.done {
            return Ok(());
        }
        let r = fetch(self.client.clone(), self.tc, self.next_req(true), self.scan_id).await;
        self.absorb(r)?;
        self.done = true;
        Ok(())
    }
}

/// Rows one by one; an error is the last item.
impl futures_core::Stream for ScanStream {
    type Item = Result<Vec<Value>, ClientError>;

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        let this = self.get_mut();
        loop {
            if let Some(row) = this.buffered.next() {
                return Poll::Ready(Some(Ok(row)));
            }
            if this.inflight.is_none() {
                if this.done {
                    return Poll::Ready(None);
                }
                this.inflight = Some(Box::pin(fetch(this.client.clone(), this.tc, this.next_req(false), this.scan_id)));
            }
            let fut = this.inflight.as_mut().expect("set above");
            let r = match fut.as_mut().poll(cx) {
                Poll::Ready(r) => r,
                Poll::Pending => return Poll::Pending,
            };
            this.inflight = None;
            if let Err(e) = this.absorb(r) {
                return Poll::Ready(Some(Err(e)));
            }
        }
    }
}

impl Drop for ScanStream {
    fn drop(&mut self) {
        if !self.done || self.inflight.is_some() {
            let s = &self.client.conn.shared;
            s.unregister(ReqKey::Scan(self.scan_id));
            let _ =
                s.send(self.tc, Signal::ScanNextReq(ScanNextReq { txn: self.txn, scan_id: self.scan_id, close: true }));
        }
    }
}
