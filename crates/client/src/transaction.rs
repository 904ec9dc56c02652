//! [`Transaction`]: batches of key operations and scans ended by a commit or
//! a rollback, and what a transaction reports when its coordinator's data
//! node fails.
//!
//! Coordinator failure. A transaction is bound to one connection (its
//! coordinator's node as it was when the first request went out): when that
//! connection breaks, the transaction is gone from that TC, and
//! * with nothing outstanding, or a request that cannot have committed
//!   anything (a NoCommit batch, or a commit of a transaction that never
//!   sent a write), it ended aborted: the call fails at once with NodeFailure
//!   (4010, temporary: retry), as does every later call;
//! * with a commit of a transaction that wrote outstanding, only the node
//!   that takes over the failed coordinator knows whether it committed: the
//!   call waits (up to `ConnectOptions::takeover_timeout`) for its
//!   TC_KEY_FAILCONF, on any connection. Committed: the commit succeeds, with
//!   its GCI; rolled back: AbortedAfterNodeFailure (4025, temporary); no
//!   answer (or a single data node, which nobody else can speak for):
//!   OutcomeUnknown (4013), which never claims success;
//! * a rollback whose coordinator fails succeeds: the cluster aborts it.

use crate::client::Client;
use crate::cluster::ClusterShared;
use crate::conn::{Conn, Reply, ReqKey, Shared};
use crate::error::ClientError;
use crate::scan::ScanStream;
use norr_signals::{
    BlockRef, ErrorCode, ExecType, KeyOp, NodeError, OpResult, SavepointAction, ScanSpec, Signal, TcKeyReq,
    TcSavepointReq, TxnOutcome,
};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

pub(crate) const TXN_IDLE: u8 = 0;
pub(crate) const TXN_OPEN: u8 = 1;
pub(crate) const TXN_COMMITTED: u8 = 2;
pub(crate) const TXN_ABORTED: u8 = 3;
/// The coordinator's connection broke: the cluster aborted the transaction.
pub(crate) const TXN_NODE_FAILED: u8 = 4;
/// A commit whose coordinator failed and whose outcome nobody reported.
pub(crate) const TXN_UNKNOWN: u8 = 5;

fn protocol_mismatch(what: &str, reply: &Reply) -> ClientError {
    ClientError::Protocol(format!("unexpected reply to {what}: {reply:?}"))
}

/// A transaction's coordinator: one connection (a data node as it was when
/// chosen: a new connection to the same node is another coordinator) and a
/// TC instance there.
pub(crate) struct Coord {
    pub conn: Arc<Conn>,
    pub instance: u16,
    pub tc: BlockRef,
}

impl Coord {
    fn new(conn: Arc<Conn>, instance: u16) -> Coord {
        let tc = conn.shared.tc(instance);
        Coord { conn, instance, tc }
    }
}

/// What a commit reports ([`Transaction::commit_with_info`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CommitInfo {
    /// The global checkpoint the commit belongs to: on disk once that GCI is
    /// complete. 0 when nothing was committed (the transaction sent nothing)
    /// or the data node reports no GCI.
    pub gci: u64,
}

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
    /// Chosen at the first request, unless the transaction was begun for a
    /// partition or key.
    coord: Option<Coord>,
    /// Shared with the transaction's scans, which can abort it.
    state: Arc<AtomicU8>,
    /// Number of the latest savepoint handed out (0: none).
    last_savepoint: u32,
    /// A savepoint set while nothing was sent yet: sent just before the
    /// first request, once that request has chosen the coordinator.
    unsent_savepoint: Option<u32>,
    /// A batch with a write went out: only then can a commit whose
    /// coordinator fails have committed anything.
    wrote: bool,
    /// Set when the transaction committed.
    commit_gci: Option<u64>,
    /// `set_lock_wait_timeout`: the bound every waiting operation and scan
    /// of this transaction is sent with (None: the cluster's time-out).
    lock_wait_ms: Option<u32>,
}

/// A savepoint of a [`Transaction`] ([`Transaction::savepoint`]). Releasing
/// one needs no call: drop it (the node keeps nothing per savepoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Savepoint(u32);

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("txn", &self.txn)
            .field("node", &self.coordinator_node())
            .field("tc", &self.coordinator())
            .field("state", &self.state.load(Ordering::Relaxed))
            .finish()
    }
}

impl Transaction {
    pub(crate) fn new(client: Client) -> Transaction {
        let txn = client.inner.alloc_txn();
        Transaction::with_handle(client, txn, None)
    }

    pub(crate) fn with_handle(client: Client, txn: u64, coord: Option<(Arc<Conn>, u16)>) -> Transaction {
        Transaction {
            client,
            txn,
            coord: coord.map(|(conn, instance)| Coord::new(conn, instance)),
            state: Arc::new(AtomicU8::new(TXN_IDLE)),
            last_savepoint: 0,
            unsent_savepoint: None,
            wrote: false,
            commit_gci: None,
            lock_wait_ms: None,
        }
    }

    /// How long this transaction's operations and locking scans wait for a
    /// row lock held by another transaction before the transaction is
    /// aborted with `LockWaitTimeout` (266), instead of the cluster's
    /// `lock_wait_timeout_ms`; None restores the cluster's. Applies to the
    /// requests sent after the call (MySQL's `innodb_lock_wait_timeout` for
    /// one session). Reads with `LockWait::NoWait` / `SkipLocked` keep
    /// their own rule. Times above `u32::MAX` ms are cut to it.
    pub fn set_lock_wait_timeout(&mut self, timeout: Option<std::time::Duration>) {
        self.lock_wait_ms = timeout.map(|d| d.as_millis().min(u128::from(u32::MAX)) as u32);
    }

    /// The transaction's handle (unique for the client's lifetime; in logs,
    /// and how a take-over node names it).
    pub fn id(&self) -> u64 {
        self.txn
    }

    /// The TC instance coordinating the transaction; None before its first
    /// request (unless begun for a partition or key).
    pub fn coordinator(&self) -> Option<u16> {
        self.coord.as_ref().map(|c| c.instance)
    }

    /// The data node of the coordinator; None before the first request
    /// (unless begun for a partition or key).
    pub fn coordinator_node(&self) -> Option<u16> {
        self.coord.as_ref().map(|c| c.conn.shared.data_node)
    }

    /// The GCI of the commit, once the transaction committed (see
    /// [`CommitInfo::gci`]).
    pub fn commit_gci(&self) -> Option<u64> {
        self.commit_gci
    }

    /// The transaction sent a write (insert, update, delete...): its commit
    /// has a GCI worth waiting for (`ExecType::CommitDisk`).
    pub fn wrote(&self) -> bool {
        self.wrote
    }

    /// The coordinator, chosen now if not yet (from the first request).
    fn coord_for(
        &mut self,
        place: impl FnOnce(&ClusterShared, u64) -> Result<(Arc<Conn>, u16), ClientError>,
    ) -> Result<BlockRef, ClientError> {
        // Chosen at begin but nothing sent, and its connection broke since:
        // nothing is lost, choose again.
        if self.coord.as_ref().is_some_and(|c| c.conn.shared.is_closed())
            && self.state.load(Ordering::Acquire) == TXN_IDLE
        {
            self.coord = None;
        }
        match &self.coord {
            Some(c) => Ok(c.tc),
            None => {
                let (conn, instance) = place(&self.client.inner, self.txn)?;
                let c = self.coord.insert(Coord::new(conn, instance));
                Ok(c.tc)
            }
        }
    }

    /// The coordinator of a transaction the node may know (it was chosen
    /// when its first request was sent).
    fn sent_coord(&self) -> &Coord {
        self.coord.as_ref().expect("a transaction that sent a request has a coordinator")
    }

    /// True once committed, rolled back, aborted by the node, or ended by a
    /// node failure.
    pub fn is_finished(&self) -> bool {
        self.state.load(Ordering::Acquire) >= TXN_COMMITTED
    }

    fn node(&self) -> u16 {
        self.coordinator_node().unwrap_or(0)
    }

    fn node_failure(&self, why: &str) -> ClientError {
        ClientError::Node(NodeError::with(
            ErrorCode::NodeFailure,
            format!(
                "the transaction's coordinator on data node {} is gone ({why}); the cluster aborts the \
                 transaction: retry it",
                self.node()
            ),
        ))
    }

    fn check_usable(&self) -> Result<(), ClientError> {
        match self.state.load(Ordering::Acquire) {
            TXN_COMMITTED => Err(ClientError::Protocol("transaction already committed".to_string())),
            TXN_ABORTED => Err(ClientError::Node(NodeError::with(
                ErrorCode::TransactionAborted,
                "the transaction was aborted or rolled back; start a new one",
            ))),
            TXN_NODE_FAILED => Err(self.node_failure("an earlier call found the connection broken")),
            TXN_UNKNOWN => Err(ClientError::Node(NodeError::with(
                ErrorCode::OutcomeUnknown,
                "the outcome of this transaction's commit is unknown; start a new one",
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
    ///
    /// If the coordinator's data node fails, see the module doc: NodeFailure
    /// (4010) or AbortedAfterNodeFailure (4025), both temporary, or for a
    /// commit the cluster's definite outcome; OutcomeUnknown (4013) when
    /// nobody could tell. A commit batch whose outcome came from a take-over
    /// node returns `OpResult::Ok(None)` for each of its writes; if it also
    /// read rows, those are lost: CommittedResultsLost (4115, the
    /// transaction is committed).
    pub async fn execute(&mut self, mut ops: Vec<KeyOp>, exec: ExecType) -> Result<Vec<OpResult>, ClientError> {
        self.check_usable()?;
        if let Some(ms) = self.lock_wait_ms {
            ops.iter_mut().for_each(|op| op.wait = op.wait.bounded(ms));
        }
        if exec == ExecType::Rollback && !ops.is_empty() {
            return Err(ClientError::Protocol("a Rollback batch must be empty".to_string()));
        }
        let idle = self.state.load(Ordering::Acquire) == TXN_IDLE;
        if ops.is_empty() && idle {
            // Nothing was ever sent: nothing to execute, commit or roll back.
            if exec != ExecType::NoCommit {
                self.state.store(if exec.commits() { TXN_COMMITTED } else { TXN_ABORTED }, Ordering::Release);
            }
            return Ok(Vec::new());
        }
        let n_ops = ops.len();
        let tc = self.coord_for(|cluster, spread| cluster.place_ops(&ops, spread))?;
        // The node knows the transaction once a savepoint went out.
        let idle = !self.send_unsent_savepoint(tc).await? && idle;
        if ops.iter().any(|op| op.kind.is_write()) {
            self.wrote = true;
        }
        // Results a take-over node's answer can stand for: writes only.
        let results_known = ops.iter().all(|op| op.kind.is_write() && op.abort_on_error);
        let txn = self.txn;
        let sig = Signal::TcKeyReq(Box::new(TcKeyReq { txn, exec, ops }));
        // From here the node may know the transaction: a drop must roll it back.
        self.state.store(TXN_OPEN, Ordering::Release);
        let sent = {
            let s = &self.sent_coord().conn.shared;
            match s.start_request(ReqKey::Txn(txn), tc, sig) {
                Ok(r) => Ok(r.wait().await),
                Err(e) => Err(e),
            }
        };
        let reply = match sent {
            Ok(Ok(r)) => r,
            Ok(Err(ClientError::NotConnected(why))) => {
                return self.coordinator_lost(exec, n_ops, results_known, &why).await
            }
            Ok(Err(e)) => {
                self.abort_in_background();
                return Err(e);
            }
            Err(ClientError::NotConnected(why)) => {
                // Closed before this request went out: the transaction (if
                // the node knew it) ended with the connection.
                self.state.store(TXN_NODE_FAILED, Ordering::Release);
                return Err(self.node_failure(&why));
            }
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
                    TxnOutcome::Committed => {
                        self.commit_gci = Some(conf.gci);
                        self.state.store(TXN_COMMITTED, Ordering::Release);
                    }
                    TxnOutcome::CommittedNotOnDisk => {
                        // Committed (do not retry), but the disk wait ran out.
                        self.commit_gci = Some(conf.gci);
                        self.state.store(TXN_COMMITTED, Ordering::Release);
                        return Err(ClientError::Node(NodeError::with(
                            ErrorCode::CommitDiskTimeout,
                            format!(
                                "the transaction IS committed (GCI {}) in memory on every replica, but the data \
                                 nodes did not confirm that GCI on disk in time",
                                conf.gci
                            ),
                        )));
                    }
                    TxnOutcome::RolledBack => self.state.store(TXN_ABORTED, Ordering::Release),
                }
                Ok(conf.results)
            }
            Reply::Key(Err(r)) => {
                self.state.store(TXN_ABORTED, Ordering::Release);
                if matches!(r.error.code, ErrorCode::PartitionUnavailable | ErrorCode::WrongReplica) {
                    self.client.inner.routing_refused();
                }
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

    /// The coordinator's connection broke while a request of `exec` was
    /// outstanding (see the module doc).
    async fn coordinator_lost(
        &mut self,
        exec: ExecType,
        n_ops: usize,
        results_known: bool,
        why: &str,
    ) -> Result<Vec<OpResult>, ClientError> {
        let node = self.node();
        match exec {
            ExecType::Rollback => {
                // Rolled back all the same: the cluster aborts it.
                self.state.store(TXN_ABORTED, Ordering::Release);
                return Ok(Vec::new());
            }
            ExecType::NoCommit => {
                self.state.store(TXN_NODE_FAILED, Ordering::Release);
                return Err(self.node_failure(why));
            }
            ExecType::Commit | ExecType::CommitDisk if !self.wrote => {
                // Nothing to commit: the take-over node does not answer for
                // it, and no waiting changes what the caller must do.
                self.state.store(TXN_NODE_FAILED, Ordering::Release);
                return Err(self.node_failure(why));
            }
            ExecType::Commit | ExecType::CommitDisk => {}
        }
        let cluster = self.client.inner.clone();
        if cluster.single_node() {
            self.state.store(TXN_UNKNOWN, Ordering::Release);
            return Err(ClientError::Node(NodeError::with(
                ErrorCode::OutcomeUnknown,
                format!(
                    "the connection to data node {node} broke with the commit outstanding ({why}); no other data \
                     node can tell whether it committed"
                ),
            )));
        }
        let timeout = cluster.opts.takeover_timeout;
        tracing::debug!(txn = self.txn, node, "commit outstanding on a failed coordinator: waiting for the take-over");
        match cluster.answers.wait(self.txn, timeout).await {
            Some(a) if a.committed => {
                self.commit_gci = Some(a.gci);
                self.state.store(TXN_COMMITTED, Ordering::Release);
                if results_known {
                    Ok(vec![OpResult::Ok(None); n_ops])
                } else {
                    Err(ClientError::Node(NodeError::with(
                        ErrorCode::CommittedResultsLost,
                        format!(
                            "data node {node} failed during the commit; the node that took over committed the \
                             transaction (GCI {}), but the results of the last batch were lost",
                            a.gci
                        ),
                    )))
                }
            }
            Some(_) => {
                self.state.store(TXN_ABORTED, Ordering::Release);
                Err(ClientError::Node(NodeError::with(
                    ErrorCode::AbortedAfterNodeFailure,
                    format!("data node {node} failed during the commit; the node that took over rolled it back"),
                )))
            }
            None => {
                self.state.store(TXN_UNKNOWN, Ordering::Release);
                Err(ClientError::Node(NodeError::with(
                    ErrorCode::OutcomeUnknown,
                    format!(
                        "data node {node} failed during the commit ({why}) and no data node reported its outcome \
                         within {} ms",
                        timeout.as_millis()
                    ),
                )))
            }
        }
    }

    /// Commit. Sends an empty Commit batch if anything was sent; a no-op if
    /// nothing was.
    pub async fn commit(mut self) -> Result<(), ClientError> {
        self.execute(Vec::new(), ExecType::Commit).await.map(|_| ())
    }

    /// Commit, and report the commit's GCI ([`CommitInfo`]).
    pub async fn commit_with_info(mut self) -> Result<CommitInfo, ClientError> {
        self.execute(Vec::new(), ExecType::Commit).await?;
        Ok(CommitInfo { gci: self.commit_gci.unwrap_or(0) })
    }

    /// Commit and return only once the commit's global checkpoint is
    /// complete: its changes are on disk on every live data node
    /// (`norr_commit_wait = 'disk'`; a plain commit returns once every
    /// replica holds the change in memory). Takes up to about
    /// `gcp_interval_ms` longer. With a batch, `execute(ops,
    /// ExecType::CommitDisk)` does the same.
    ///
    /// The wait is bounded by the data node's `commit_disk_timeout_ms`: if
    /// global checkpoints stall longer, the answer is
    /// `ErrorCode::CommitDiskTimeout` and the transaction IS committed (do
    /// not retry it): the message names its GCI, and after `execute(ops,
    /// ExecType::CommitDisk)` so does `commit_gci()`.
    pub async fn commit_disk(mut self) -> Result<CommitInfo, ClientError> {
        self.execute(Vec::new(), ExecType::CommitDisk).await?;
        Ok(CommitInfo { gci: self.commit_gci.unwrap_or(0) })
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
    pub async fn scan(&mut self, mut spec: ScanSpec) -> Result<ScanStream, ClientError> {
        self.check_usable()?;
        crate::scan::check_spec(&spec)?;
        if let Some(ms) = self.lock_wait_ms {
            spec.wait = spec.wait.bounded(ms);
        }
        let tc = self.coord_for(|cluster, spread| cluster.place_scan(&spec, spread))?;
        self.send_unsent_savepoint(tc).await?;
        self.state.store(TXN_OPEN, Ordering::Release);
        let conn = self.sent_coord().conn.clone();
        ScanStream::open(conn, tc, self.txn, false, spec, Some(self.state.clone())).await
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
        let tc = self.sent_coord().tc;
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
        let tc = self.sent_coord().tc;
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
        let txn = self.txn;
        let sig = Signal::TcSavepointReq(Box::new(TcSavepointReq { txn, savepoint: n, action }));
        self.state.store(TXN_OPEN, Ordering::Release);
        let sent = {
            let s = &self.sent_coord().conn.shared;
            match s.start_request(ReqKey::Txn(txn), tc, sig) {
                Ok(r) => r.wait().await,
                Err(e) => Err(e),
            }
        };
        let reply = match sent {
            Ok(r) => r,
            Err(ClientError::NotConnected(why)) => {
                self.state.store(TXN_NODE_FAILED, Ordering::Release);
                return Err(self.node_failure(&why));
            }
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
            let c = self.sent_coord();
            send_rollback(&c.conn.shared, c.tc, self.txn);
        }
    }
}

pub(crate) fn send_rollback(s: &Shared, tc: BlockRef, txn: u64) {
    // Best effort: if the connection is gone the node aborts the transaction
    // itself (API_FAILREQ).
    let _ = s.send(tc, Signal::TcKeyReq(Box::new(TcKeyReq { txn, exec: ExecType::Rollback, ops: Vec::new() })));
}

impl Drop for Transaction {
    fn drop(&mut self) {
        if self.state.load(Ordering::Acquire) == TXN_OPEN {
            // An in-flight request of a cancelled `execute` may still be
            // registered; its reply is dropped by the reader.
            let c = self.sent_coord();
            c.conn.shared.unregister(ReqKey::Txn(self.txn));
            send_rollback(&c.conn.shared, c.tc, self.txn);
        }
    }
}
