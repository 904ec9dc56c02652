//! TC: the transaction coordinator of a data node.
//!
//! One record per open transaction, named by (API node, client handle). A batch
//! (TC_KEYREQ) sends every operation to the LQH owning its partition at once
//! (LQH runs a transaction's operations in arrival order), gathers the answers,
//! and replies when all are in. Commit and abort then run the phases of the
//! internal protocol (see `norr_signals::internal`) over every LQH that took part.
//!
//! Handle semantics (documented for clients in `api.rs`): after TC_KEYREF or
//! SCAN_TABREF the handle is free. If TC aborts a transaction on its own (the
//! inactivity time-out), it remembers the handle and answers the next request
//! naming it with TC_KEYREF TransactionTimeout (a Rollback gets RolledBack),
//! so a client never silently continues in a fresh transaction.

mod failure;
mod gcp;
mod savepoint;
mod scan;
mod scan_filter;
mod takeover;

use crate::counters::Counters;
use crate::dist_view::DistView;
use crate::fxhash::FxHashMap;
use crate::route::{lqh_instance, op_partition};
use norr_kernel::{Block, BlockRef, Ctx, NodeId, Priority};
use norr_knobs::Knobs;
use norr_signals::cluster::{ClusterSignal, Membership};
use norr_signals::dist::{Chain, Dist};
use norr_signals::internal::{
    BlockStats, InternalSignal, LqhOp, LqhOpError, LqhOpResult, ScanKey, SchemaChange, TxnId,
};
use norr_signals::schema::{PartitionId, TableDef, TableId};
use norr_signals::{
    block, ErrorCode, ExecType, NodeError, OpResult, Signal, TcKeyConf, TcKeyRef, TcKeyReq, TxnOutcome,
    MAX_OPS_PER_BATCH,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

pub(crate) use scan::TcScan;

/// Tombstones (handles of transactions and scans TC ended on its own) kept at
/// least this many, even with tiny max_transactions / max_scans: each is a few
/// bytes, and forgetting one turns a retriable error into a confusing one.
const MIN_TOMBSTONES: usize = 1024;

/// What to tell the client once an abort is done.
#[derive(Debug, Clone)]
enum AbortReply {
    KeyRef {
        error: NodeError,
        op_index: Option<u32>,
    },
    ScanRef {
        scan_id: u32,
        error: NodeError,
    },
    RolledBack,
    /// Aborted behind the client's back: remember the handle.
    Tombstone(NodeError),
    /// The API node is gone.
    Silent,
    /// A transaction of a failed coordinator this TC took over: tell its
    /// client the outcome (TC_KEY_FAILCONF RolledBack).
    TakenOver,
}

#[derive(Debug)]
enum TxnState {
    /// Waiting for the client.
    Idle,
    Executing,
    /// Commit decided (or waiting for the GCP barrier, `waiting` empty and
    /// the transaction in `commit_queue`): waiting for the primaries of
    /// these chains to confirm.
    Committing {
        waiting: BTreeSet<Chain>,
        error: Option<NodeError>,
    },
    /// Committed everywhere; waiting for the last replicas of these chains
    /// to confirm the complete phase (backups released their locks).
    Completing {
        waiting: BTreeSet<Chain>,
    },
    Aborting {
        waiting: BTreeSet<(NodeId, u16)>,
        reply: AbortReply,
    },
    /// Rolling back to a savepoint (see `savepoint.rs`); `error`: the first
    /// LQH refusal, which turns it into an abort.
    RollingBack {
        waiting: BTreeSet<(NodeId, u16)>,
        error: Option<NodeError>,
    },
}

struct Batch {
    /// Sequence number of the batch's first operation.
    seq_base: u32,
    results: Vec<Option<OpResult>>,
    abort_on_error: Vec<bool>,
    outstanding: usize,
    exec: ExecType,
}

struct TcTxn {
    api: BlockRef,
    handle: u64,
    state: TxnState,
    /// (node, LQH instance) of every LQH that may hold state of the
    /// transaction: where operations went (other than simple reads), and
    /// every replica of a reported chain. Abort and rollback-to go to all.
    nodes: BTreeSet<(NodeId, u16)>,
    /// Replica chains of the operations that left state (dead nodes left
    /// out): commit runs back along each, complete forward.
    chains: BTreeSet<Chain>,
    /// Wrote something: committed reads of tables that read any replica go
    /// to the primary from then on (a backup may not have the write yet).
    wrote: bool,
    /// Wrote to a table that reads any replica: the commit is acknowledged
    /// only after the complete phase, when every replica released its locks,
    /// so the client reads its own writes wherever it reads.
    ack_after_complete: bool,
    /// The GCI of the commit (once decided).
    gci: u64,
    /// `ExecType::CommitDisk`: the answer waits until `gci` is complete.
    wait_disk: bool,
    /// A transaction of a failed coordinator this TC finishes (take-over):
    /// its client hears TC_KEY_FAILCONF, not TC_KEYCONF.
    taken_over: bool,
    /// The last batch's results, kept for a commit acknowledged only after
    /// the complete phase.
    final_results: Vec<OpResult>,
    /// Operations sent so far (also the next sequence number).
    ops: u32,
    last_active_ns: u64,
    batch: Option<Batch>,
    scans: BTreeSet<ScanKey>,
    /// The API node failed: never answer it again.
    silent: bool,
    /// The latest savepoint the client set (0: none): stamped on every
    /// operation sent to LQH.
    savepoint: u32,
}

/// The commit answer of a `CommitDisk` transaction, held until its GCI is
/// complete (or `commit_disk_timeout_ms` passed).
struct HeldCommit {
    api: BlockRef,
    conf: TcKeyConf,
    since_ns: u64,
}

pub struct Tc {
    node: NodeId,
    instance: u16,
    lqh_instances: u16,
    /// The cluster's distribution as DIH last published it (this node alone
    /// until a DIH runs).
    dist: DistView,
    /// QMGR's serve lease (`ClusterSignal::ServeLeaseRep`): past it, or
    /// while it is revoked (`lease_revoked_for`), this node takes no new
    /// transaction or scan. None: no QMGR (a lone node),
    /// or none heard yet.
    serve_until_ns: Option<u64>,
    /// The members QMGR suspects failed when it revoked the lease
    /// (`ServeLeaseRevokedRep`); empty once a lease came again.
    lease_revoked_for: Vec<NodeId>,
    /// On a data node of a cluster (`in_cluster`): its node runs CKPT,
    /// DIH and QMGR too.
    in_cluster: bool,
    membership: Option<Membership>,
    txn_inactive_ns: u64,
    max_transactions: usize,
    max_ops_per_txn: u32,
    max_scans: usize,
    defs: FxHashMap<TableId, Arc<TableDef>>,
    /// A hash map: one insert and one remove per transaction, and a B-tree
    /// moved the large records around on both. Iterated only where the
    /// visit order cannot matter or after sorting the ids.
    txns: FxHashMap<TxnId, TcTxn>,
    by_handle: FxHashMap<(NodeId, u64), TxnId>,
    next_txn: TxnId,
    /// Handles of transactions TC aborted on its own, with the error to report.
    tombstones: BTreeMap<(NodeId, u64), NodeError>,
    /// Boxed: a B-tree moves its values around as it changes.
    scans: BTreeMap<ScanKey, Box<TcScan>>,
    scan_by_client: FxHashMap<(NodeId, u32), ScanKey>,
    /// Scans TC closed on its own (inactivity), with the error to report.
    /// The transaction handle in the value is forgotten with it: the client
    /// learns from the SCAN_TABREF that its transaction was aborted.
    scan_tombstones: BTreeMap<(NodeId, u32), (NodeError, Option<u64>)>,
    next_scan: ScanKey,
    timer_armed: bool,
    /// API nodes whose failure is being handled: their requests still queued
    /// behind API_FAILREQ are dropped (see `InternalSignal::ApiFailDone`).
    failed_apis: BTreeSet<NodeId>,
    privileges: crate::privileges::Privileges,
    committed: u64,
    aborted: u64,
    /// The global checkpoint commits are tagged with (see `norr_signals::ckpt`).
    gci: u64,
    /// Between GCP_PREPARE and GCP_COMMIT: commit decisions wait.
    gcp_blocked: bool,
    /// Transactions whose commit decision waits for the GCP barrier.
    commit_queue: VecDeque<TxnId>,
    /// Transactions in their commit phase, by GCI.
    committing: BTreeMap<u64, u32>,
    /// The last complete GCI this TC heard of (`GcpCompleteRep`).
    complete_gci: u64,
    /// Commit answers of `CommitDisk` transactions waiting for their GCI to
    /// be complete, by GCI.
    held_for_disk: BTreeMap<u64, Vec<HeldCommit>>,
    /// `commit_disk_timeout_ms`: a held answer older than this goes out as
    /// `TxnOutcome::CommittedNotOnDisk`.
    commit_disk_timeout_ns: u64,
    /// A GCP master waiting to hear that no transaction of this GCI or lower
    /// is committing any more.
    gcp_finish_wanted: Option<(u64, BlockRef)>,
    /// Failed data nodes whose transactions are not yet taken over.
    takeover_pending: BTreeSet<NodeId>,
    /// The take-over this TC runs (the president's TC instance 0 does).
    takeover: Option<takeover::Takeover>,
    counters: Counters,
}

fn internal(s: InternalSignal) -> Signal {
    Signal::Internal(Box::new(s))
}

impl Tc {
    /// TC `instance` of data node `node`. The instance number is the top 16
    /// bits of every transaction and scan number it hands out: LQH keys its
    /// state by them, so the TC instances of a node never collide.
    pub fn new(node: NodeId, instance: u16, lqh_instances: u16, knobs: &Knobs) -> Tc {
        assert!(lqh_instances > 0);
        assert!(instance < 0xFF, "instance bits 0xFF are LQH's (partition copies)");
        let first_id = ((node as u64) << 48) | ((instance as u64) << 40) | 1;
        Tc {
            node,
            instance,
            lqh_instances,
            dist: DistView::new(Dist::single(node)),
            in_cluster: false,
            serve_until_ns: None,
            lease_revoked_for: Vec::new(),
            membership: None,
            txn_inactive_ns: knobs.txn_inactive_timeout_ms * 1_000_000,
            max_transactions: knobs.max_transactions as usize,
            max_ops_per_txn: knobs.max_ops_per_txn,
            max_scans: knobs.max_scans as usize,
            defs: FxHashMap::default(),
            txns: FxHashMap::default(),
            by_handle: FxHashMap::default(),
            next_txn: first_id,
            tombstones: BTreeMap::new(),
            scans: BTreeMap::new(),
            scan_by_client: FxHashMap::default(),
            scan_tombstones: BTreeMap::new(),
            next_scan: first_id,
            timer_armed: false,
            failed_apis: BTreeSet::new(),
            privileges: Default::default(),
            committed: 0,
            aborted: 0,
            gci: 1,
            gcp_blocked: false,
            commit_queue: VecDeque::new(),
            committing: BTreeMap::new(),
            gcp_finish_wanted: None,
            complete_gci: 0,
            held_for_disk: BTreeMap::new(),
            commit_disk_timeout_ns: knobs.commit_disk_timeout_ms * 1_000_000,
            takeover_pending: BTreeSet::new(),
            takeover: None,
            counters: Counters::default(),
        }
    }

    /// This TC is on a data node of a cluster: it coordinates nothing until
    /// DIH sends a distribution (see `DistView::in_cluster`).
    pub fn in_cluster(&mut self) {
        debug_assert!(self.txns.is_empty(), "joined a cluster with transactions running");
        self.in_cluster = true;
        self.dist = DistView::in_cluster(Dist::single(self.node));
        debug_assert!(self.dist.awaiting_dih());
    }

    /// Why this TC takes no new transaction or scan now: it is on a data
    /// node of a cluster that has no distribution from DIH yet (a node
    /// restart before it joined the write path; see
    /// `DistView::awaiting_dih`). With its own view (this node holds
    /// everything) it would run the operations on the node's empty replicas:
    /// an update of an existing row failed with 626 and a scan read nothing
    /// (found by the real-process chaos test).
    ///
    /// Or its QMGR's serve lease ran out: the node did not run for a while
    /// (frozen, stalled) and the others may have excluded it and changed
    /// rows meanwhile; its replicas would answer reads from before (found
    /// by the real-process chaos test's SIGSTOP rounds). Or QMGR revoked
    /// the lease: it suspects a member failed, and until the round decides
    /// this node may be on the side that loses.
    fn not_serving(&self, now_ns: u64) -> Option<NodeError> {
        if self.dist.awaiting_dih() {
            return Some(NodeError::with(
                ErrorCode::PartitionUnavailable,
                format!("data node {} is restarting and has no distribution yet: use another data node", self.node),
            ));
        }
        if !self.lease_revoked_for.is_empty() {
            return Some(NodeError::with(
                ErrorCode::PartitionUnavailable,
                format!(
                    "data node {} suspects data node(s) {:?} failed and waits for the cluster to decide its \
                     membership: retry the transaction",
                    self.node, self.lease_revoked_for
                ),
            ));
        }
        match self.serve_until_ns {
            Some(until) if now_ns > until => Some(NodeError::with(
                ErrorCode::PartitionUnavailable,
                format!(
                    "data node {} did not run for a while and does not know yet whether it is still a member of the \
                     cluster: use another data node",
                    self.node
                ),
            )),
            _ => None,
        }
    }

    fn lqh_at(node: NodeId, instance: u16) -> BlockRef {
        BlockRef::new(node, block::LQH, instance)
    }

    /// Where an operation goes: the primary of its partition, or for a
    /// committed read of a table that reads any replica (and a transaction
    /// that wrote nothing yet) the replica on this node if there is one.
    /// Unique-index operations go to the table's one primary (tables with a
    /// unique index keep every partition on one primary, see `dist`).
    fn route_op(
        &self,
        def: &TableDef,
        part: Option<PartitionId>,
        op: &norr_signals::KeyOp,
        wrote: bool,
    ) -> Result<(NodeId, u16), NodeError> {
        let (node, inst) = match part {
            Some(p) => {
                let any = op.is_committed_read() && def.options.reads_any_replica() && !wrote;
                let node = if any { self.dist.read_node(def, p, self.node) } else { self.dist.primary(def, p) };
                (node, lqh_instance(p, self.lqh_instances))
            }
            None => (self.dist.primary(def, 0), 0),
        };
        match node {
            Some(n) => Ok((n, inst)),
            None => Err(NodeError::with(ErrorCode::PartitionUnavailable, format!("table {}", def.name))),
        }
    }

    /// Record a chain an LQH reported, without the nodes this TC knows are
    /// down. Not without the nodes its distribution calls dead: a node
    /// restarting is put into the write path at every member one by one, and
    /// the LQH that built the chain may have known before this TC; the node
    /// then holds the write and needs the commit or abort (seed
    /// cluster:933, see `DistView::down`).
    fn note_chain(dist: &DistView, txn: &mut TcTxn, chain: Chain) {
        for n in &chain.nodes {
            txn.nodes.insert((*n, chain.instance));
        }
        let down: Vec<NodeId> = chain.nodes.iter().copied().filter(|n| dist.down(*n)).collect();
        if down.is_empty() {
            txn.chains.insert(chain);
        } else if let Some(c) = chain.without(&down) {
            txn.chains.insert(c);
        }
    }

    fn check_period_ns(&self) -> u64 {
        (self.txn_inactive_ns / 10).clamp(10_000_000, 1_000_000_000)
    }

    /// Keep the periodic time-out check running while there is something to time out.
    fn arm_timer(&mut self, ctx: &mut Ctx<'_, Signal>) {
        if !self.timer_armed && (!self.txns.is_empty() || !self.scans.is_empty() || !self.held_for_disk.is_empty()) {
            self.timer_armed = true;
            let me = ctx.self_ref();
            ctx.send_delayed(me, internal(InternalSignal::TcTimeoutCheck), self.check_period_ns());
        }
    }

    fn key_ref(ctx: &mut Ctx<'_, Signal>, to: BlockRef, txn: u64, error: NodeError, op_index: Option<u32>) {
        ctx.send(to, Signal::TcKeyRef(Box::new(TcKeyRef { txn, error, op_index })));
    }

    fn key_conf(ctx: &mut Ctx<'_, Signal>, to: BlockRef, txn: u64, outcome: TxnOutcome, results: Vec<OpResult>) {
        ctx.send(to, Signal::TcKeyConf(Box::new(TcKeyConf { txn, outcome, results, gci: 0 })));
    }

    /// Find or start the transaction a client request names. Err: already
    /// answered (tombstone, limits).
    fn txn_for(&mut self, api: BlockRef, handle: u64, now_ns: u64) -> Result<TxnId, NodeError> {
        if let Some(t) = self.by_handle.get(&(api.node, handle)) {
            return Ok(*t);
        }
        if let Some(e) = self.tombstones.remove(&(api.node, handle)) {
            return Err(e);
        }
        if self.txns.len() >= self.max_transactions {
            crate::probe!(self.counters, "tc: out of transaction records");
            return Err(NodeError::new(ErrorCode::TooManyTransactions));
        }
        let t = self.next_txn;
        self.next_txn += 1;
        self.by_handle.insert((api.node, handle), t);
        self.txns.insert(
            t,
            TcTxn {
                api,
                handle,
                state: TxnState::Idle,
                nodes: BTreeSet::new(),
                chains: BTreeSet::new(),
                wrote: false,
                ack_after_complete: false,
                gci: 0,
                wait_disk: false,
                taken_over: false,
                final_results: Vec::new(),
                ops: 0,
                last_active_ns: now_ns,
                batch: None,
                scans: BTreeSet::new(),
                silent: false,
                savepoint: 0,
            },
        );
        Ok(t)
    }

    fn on_key_req(&mut self, api: BlockRef, req: TcKeyReq, ctx: &mut Ctx<'_, Signal>) {
        let handle = req.txn;
        let known = self.by_handle.contains_key(&(api.node, handle));
        if !known {
            if req.exec == ExecType::Rollback {
                self.tombstones.remove(&(api.node, handle));
                return Self::key_conf(ctx, api, handle, TxnOutcome::RolledBack, Vec::new());
            }
            if req.ops.is_empty() && req.exec.commits() && !self.tombstones.contains_key(&(api.node, handle)) {
                return Self::key_conf(ctx, api, handle, TxnOutcome::Committed, Vec::new());
            }
        }
        if let Some(e) = self.not_serving(ctx.now_ns()) {
            crate::probe!(self.counters, "tc: request refused, not serving");
            return Self::key_ref(ctx, api, handle, e, None);
        }
        let t = match self.txn_for(api, handle, ctx.now_ns()) {
            Ok(t) => t,
            Err(e) => return Self::key_ref(ctx, api, handle, e, None),
        };
        self.arm_timer(ctx);
        let txn = self.txns.get_mut(&t).expect("just found");
        if let TxnState::Aborting { reply: reply @ AbortReply::Tombstone(_), .. } = &mut txn.state {
            // TC is aborting it on its own: this request learns it now (the
            // handle is freed when the abort is done).
            let AbortReply::Tombstone(e) = std::mem::replace(reply, AbortReply::Silent) else { unreachable!() };
            return if req.exec == ExecType::Rollback {
                Self::key_conf(ctx, api, handle, TxnOutcome::RolledBack, Vec::new())
            } else {
                Self::key_ref(ctx, api, handle, e, None)
            };
        }
        if !matches!(txn.state, TxnState::Idle) {
            // A client must wait for the answer to its previous request.
            crate::probe!(self.counters, "tc: request while busy");
            let e = NodeError::with(ErrorCode::MalformedSignal, "transaction busy with a previous request");
            return Self::key_ref(ctx, api, handle, e, None);
        }
        txn.last_active_ns = ctx.now_ns();
        if req.exec == ExecType::Rollback {
            self.counters.bump("tc: rollbacks");
            return self.abort(t, AbortReply::RolledBack, ctx);
        }
        if req.ops.len() > MAX_OPS_PER_BATCH {
            let e = NodeError::with(
                ErrorCode::MalformedSignal,
                format!("more than {MAX_OPS_PER_BATCH} operations in a batch"),
            );
            return self.abort(t, AbortReply::KeyRef { error: e, op_index: None }, ctx);
        }
        if txn.ops as u64 + req.ops.len() as u64 > self.max_ops_per_txn as u64 {
            crate::probe!(self.counters, "tc: too many operations");
            let e = NodeError::new(ErrorCode::TooManyOperations);
            return self.abort(t, AbortReply::KeyRef { error: e, op_index: None }, ctx);
        }
        let n = req.ops.len();
        let seq_base = txn.ops;
        let savepoint = txn.savepoint;
        txn.ops += n as u32;
        txn.state = TxnState::Executing;
        let mut batch = Batch {
            seq_base,
            results: vec![None; n],
            abort_on_error: req.ops.iter().map(|o| o.abort_on_error).collect(),
            outstanding: 0,
            exec: req.exec,
        };
        let mut fail: Option<(NodeError, u32)> = None;
        // The batch's operations per (node, LQH instance): one LQH_KEYREQ each.
        let mut sends: BTreeMap<(NodeId, u16), Vec<LqhOp>> = BTreeMap::new();
        let (mut wrote, mut ack_after_complete) = (txn.wrote, txn.ack_after_complete);
        for (i, op) in req.ops.into_iter().enumerate() {
            let routed = match self.defs.get(&op.table) {
                None => Err(NodeError::with(ErrorCode::NoSuchTable, format!("table id {}", op.table))),
                Some(d) if op.table_version != 0 && op.table_version != d.version => Err(NodeError::with(
                    ErrorCode::SchemaVersionMismatch,
                    format!("table {} is at version {}", d.name, d.version),
                )),
                Some(d) => self.privileges.check_op(api.node, d, op.kind).and_then(|()| op_partition(d, &op)).and_then(
                    |part| {
                        if op.kind.is_write() {
                            wrote = true;
                            ack_after_complete |= d.options.reads_any_replica();
                        }
                        self.route_op(d, part, &op, wrote).map(|to| (part, to))
                    },
                ),
            };
            match routed {
                Ok((part, to)) => {
                    sends.entry(to).or_default().push(LqhOp { seq: seq_base + i as u32, part, op, savepoint });
                }
                Err(e) if op.abort_on_error => {
                    fail = Some((e, i as u32));
                    break;
                }
                Err(e) => batch.results[i] = Some(OpResult::Err(e)),
            }
        }
        self.counters.bump("tc: batches");
        let txn = self.txns.get_mut(&t).expect("txn");
        (txn.wrote, txn.ack_after_complete) = (wrote, ack_after_complete);
        if let Some((error, i)) = fail {
            txn.batch = None;
            return self.abort(t, AbortReply::KeyRef { error, op_index: Some(i) }, ctx);
        }
        batch.outstanding = sends.values().map(Vec::len).sum();
        self.counters.bump_by("tc: operations", batch.outstanding as u64);
        txn.batch = Some(batch);
        for ((node, inst), ops) in sends {
            // Committed reads sent to an LQH that holds nothing of this
            // transaction leave nothing there either (simple reads, see
            // `norr_signals::internal`): it takes no part in commit or abort.
            if txn.nodes.contains(&(node, inst)) || !ops.iter().all(|o| o.op.is_committed_read()) {
                txn.nodes.insert((node, inst));
            } else {
                crate::probe!(self.counters, "tc: simple reads (no lqh state)");
            }
            let (api, handle) = (txn.api, txn.handle);
            let failed = self.dist.failures().to_vec();
            let req = InternalSignal::LqhKeyReq { txn: t, ops, api, handle, failed };
            ctx.send(Self::lqh_at(node, inst), internal(req));
        }
        self.maybe_batch_done(t, ctx);
    }

    /// Results of operations of the current batch from one LQH.
    fn on_op_results(&mut self, t: TxnId, results: Vec<LqhOpResult>, ctx: &mut Ctx<'_, Signal>) {
        let Some(txn) = self.txns.get_mut(&t) else {
            // Aborted and forgotten before this answer came.
            return self.abort_late_chains(t, &results, ctx);
        };
        if !matches!(txn.state, TxnState::Executing) {
            // An abort overtook this batch (a node failure, an API failure,
            // another operation's fatal error).
            return self.abort_late_chains(t, &results, ctx);
        }
        for r in &results {
            if let Some(c) = &r.chain {
                Self::note_chain(&self.dist, txn, c.clone());
            }
        }
        let batch = txn.batch.as_mut().expect("executing txn has a batch");
        for r in results {
            let i = (r.seq - batch.seq_base) as usize;
            assert!(batch.results[i].is_none(), "two answers for op {} of txn {t}", r.seq);
            batch.outstanding -= 1;
            match r.outcome {
                Ok(row) => batch.results[i] = Some(OpResult::Ok(row)),
                Err(LqhOpError { error, fatal }) => {
                    if fatal || batch.abort_on_error[i] {
                        if error.code == ErrorCode::LockWaitTimeout {
                            self.counters.bump("tc: lock wait timeouts");
                        }
                        return self.abort(t, AbortReply::KeyRef { error, op_index: Some(i as u32) }, ctx);
                    }
                    batch.results[i] = Some(OpResult::Err(error));
                }
            }
        }
        self.maybe_batch_done(t, ctx);
    }

    /// Answers of an operation that came after its transaction was aborted.
    /// The replicas of each answering chain may have prepared the write
    /// after TC's abort reached them (the abort and the write travel on
    /// different links: TC -> backup, primary -> backup), and nothing else
    /// would ever release their locks: abort the transaction there again.
    /// An abort of a transaction an LQH does not hold is answered and
    /// changes nothing, so sending it twice is harmless. An aborting
    /// transaction waits for these confirmations too; a forgotten one just
    /// drops them (`on_abort_conf`).
    fn abort_late_chains(&mut self, t: TxnId, results: &[LqhOpResult], ctx: &mut Ctx<'_, Signal>) {
        let mut targets: BTreeSet<(NodeId, u16)> = BTreeSet::new();
        for c in results.iter().filter_map(|r| r.chain.as_ref()) {
            for n in &c.nodes {
                if !self.dist.down(*n) {
                    targets.insert((*n, c.instance));
                }
            }
        }
        if targets.is_empty() {
            crate::probe!(self.counters, "tc: late answer dropped");
            return;
        }
        crate::probe!(self.counters, "tc: late answer's chain aborted again");
        if let Some(txn) = self.txns.get_mut(&t) {
            let TxnState::Aborting { waiting, .. } = &mut txn.state else {
                // Only an aborting transaction has answers still coming
                // that it no longer wants: commit and a batch's end wait for
                // every answer, and a rollback to a savepoint starts idle.
                debug_assert!(false, "late answer of {t} outside an abort");
                return;
            };
            waiting.extend(targets.iter().copied());
        }
        for (n, i) in targets {
            ctx.send(Self::lqh_at(n, i), internal(InternalSignal::LqhAbortReq { txn: t }));
        }
    }

    fn maybe_batch_done(&mut self, t: TxnId, ctx: &mut Ctx<'_, Signal>) {
        let txn = self.txns.get_mut(&t).expect("txn");
        let batch = txn.batch.as_ref().expect("batch");
        if batch.outstanding > 0 {
            return;
        }
        if batch.exec.commits() {
            txn.wait_disk = batch.exec == ExecType::CommitDisk;
            return self.commit(t, ctx);
        }
        let batch = txn.batch.take().expect("batch");
        txn.state = TxnState::Idle;
        txn.last_active_ns = ctx.now_ns();
        let results = batch.results.into_iter().map(|r| r.expect("every op answered")).collect();
        Self::key_conf(ctx, txn.api, txn.handle, TxnOutcome::Open, results);
    }

    /// Close the transaction's scans. A client waiting for one of them is told
    /// (`ended`: the scan ends with the transaction's commit (Ok) or abort (Err)),
    /// unless the API node is gone.
    fn close_txn_scans(&mut self, t: TxnId, ended: Result<(), NodeError>, ctx: &mut Ctx<'_, Signal>) {
        let txn = self.txns.get_mut(&t).expect("txn");
        if txn.scans.is_empty() {
            return; // the common case: nothing to take apart
        }
        let silent = txn.silent;
        let scans = std::mem::take(&mut txn.scans);
        for s in scans {
            if let (Err(e), Some(sc)) = (&ended, self.scans.get(&s)) {
                if !sc.client_waiting && !silent {
                    self.tombstone_scan(s, e.clone(), false);
                }
            }
            if let Some(sc) = self.scans.get(&s).filter(|sc| sc.client_waiting && !silent) {
                let (api, handle, id) = (sc.api, sc.handle, sc.scan_id);
                match &ended {
                    Ok(()) => Self::scan_conf(ctx, api, handle, id, Vec::new(), true),
                    Err(e) => Self::scan_ref(ctx, api, handle, id, e.clone()),
                }
            }
            self.close_scan(s, ctx);
        }
    }

    /// The commit of `t` (its last batch is done). Waits for the GCP
    /// barrier if one is up (`gcp.rs`), then runs the commit phase.
    fn commit(&mut self, t: TxnId, ctx: &mut Ctx<'_, Signal>) {
        self.close_txn_scans(t, Ok(()), ctx);
        let txn = self.txns.get_mut(&t).expect("txn");
        txn.state = TxnState::Committing { waiting: BTreeSet::new(), error: None };
        if self.gcp_blocked {
            crate::probe!(self.counters, "tc: commit waits for the gcp barrier");
            self.commit_queue.push_back(t);
            return;
        }
        self.commit_decided(t, ctx);
    }

    /// The commit decision: tag `t` with the current GCI and send the
    /// commit to the last replica of each of its chains (each replica
    /// passes it on backwards; the primary confirms). A chain of one node
    /// that another chain covers needs no message of its own: an LQH
    /// commits all it holds of the transaction at its first commit.
    fn commit_decided(&mut self, t: TxnId, ctx: &mut Ctx<'_, Signal>) {
        let gci = self.gci;
        *self.committing.entry(gci).or_insert(0) += 1;
        let tc = ctx.self_ref();
        let txn = self.txns.get_mut(&t).expect("txn");
        txn.gci = gci;
        let waiting = commit_chains(&txn.chains);
        for c in &waiting {
            let req = InternalSignal::LqhCommitReq { txn: t, gci, chain: c.clone(), tc };
            ctx.send(Self::lqh_at(c.tail(), c.instance), internal(req));
        }
        let empty = waiting.is_empty();
        txn.state = TxnState::Committing { waiting, error: None };
        if empty {
            self.commit_done(t, ctx);
        }
    }

    fn on_commit_conf(&mut self, t: TxnId, chain: Chain, ctx: &mut Ctx<'_, Signal>) {
        let Some(txn) = self.txns.get_mut(&t) else {
            return;
        };
        let TxnState::Committing { waiting, .. } = &mut txn.state else {
            // A commit sent again after a node failure, answered twice.
            crate::probe!(self.counters, "tc: late commit confirmation");
            return;
        };
        if !waiting.remove(&chain) {
            crate::probe!(self.counters, "tc: commit confirmation of a replaced chain");
            return;
        }
        if waiting.is_empty() {
            self.commit_done(t, ctx);
        }
    }

    fn on_commit_ref(&mut self, t: TxnId, err: NodeError, ctx: &mut Ctx<'_, Signal>) {
        let Some(txn) = self.txns.get_mut(&t) else {
            return;
        };
        let TxnState::Committing { error, .. } = &mut txn.state else {
            return;
        };
        // An LQH refused (a concurrent DDL) and aborted its part: with one
        // LQH nothing committed; abort the others too.
        crate::probe!(self.counters, "tc: commit refused");
        error.get_or_insert(err);
        let e = error.take().expect("just set");
        let gci = txn.gci;
        self.commit_phase_over(gci, ctx);
        let txn = self.txns.get_mut(&t).expect("txn");
        txn.state = TxnState::Idle;
        self.abort(t, AbortReply::KeyRef { error: e, op_index: None }, ctx);
    }

    /// Every chain's primary confirmed: the transaction is committed on
    /// every live replica. Answer the client (unless it waits for the
    /// complete phase) and start the complete phase.
    fn commit_done(&mut self, t: TxnId, ctx: &mut Ctx<'_, Signal>) {
        let gci = self.txns[&t].gci;
        self.commit_phase_over(gci, ctx);
        self.committed += 1;
        let txn = self.txns.get_mut(&t).expect("txn");
        let results =
            txn.batch.take().map_or(Vec::new(), |b| b.results.into_iter().map(|r| r.expect("answered")).collect());
        let waiting: BTreeSet<Chain> = commit_chains(&txn.chains);
        let tc = ctx.self_ref();
        for c in &waiting {
            let req = InternalSignal::LqhCompleteReq { txn: t, chain: c.clone(), tc };
            ctx.send(Self::lqh_at(c.primary(), c.instance), internal(req));
        }
        txn.state = TxnState::Completing { waiting };
        let reply_now = !txn.ack_after_complete || txn.taken_over;
        if reply_now {
            self.reply_committed(t, results, ctx);
        } else {
            self.txns.get_mut(&t).expect("txn").final_results = results;
        }
        if matches!(&self.txns[&t].state, TxnState::Completing { waiting } if waiting.is_empty()) {
            self.complete_done(t, ctx);
        }
    }

    /// Tell the client its transaction committed (and free its handle).
    fn reply_committed(&mut self, t: TxnId, results: Vec<OpResult>, ctx: &mut Ctx<'_, Signal>) {
        let txn = self.txns.get(&t).expect("txn");
        let (api, handle, gci, silent, taken_over, wait_disk) =
            (txn.api, txn.handle, txn.gci, txn.silent, txn.taken_over, txn.wait_disk);
        if taken_over {
            self.takeover_txn_done(ctx);
            let conf = norr_signals::TcKeyFailConf { txn: handle, outcome: TxnOutcome::Committed, gci };
            ctx.send(api, Signal::TcKeyFailConf(Box::new(conf)));
            return;
        }
        self.forget_handle_of(t, api.node, handle);
        if !silent {
            let conf = TcKeyConf { txn: handle, outcome: TxnOutcome::Committed, results, gci };
            if wait_disk && gci > self.complete_gci {
                self.counters.bump("tc: commit answers held for disk");
                let since_ns = ctx.now_ns();
                self.held_for_disk.entry(gci).or_default().push(HeldCommit { api, conf, since_ns });
                self.arm_timer(ctx);
                return;
            }
            ctx.send(api, Signal::TcKeyConf(Box::new(conf)));
        }
    }

    fn on_complete_conf(&mut self, t: TxnId, chain: Chain, ctx: &mut Ctx<'_, Signal>) {
        self.counters.bump("tc: completes");
        let Some(txn) = self.txns.get_mut(&t) else {
            return;
        };
        let TxnState::Completing { waiting } = &mut txn.state else {
            return;
        };
        if !waiting.remove(&chain) {
            crate::probe!(self.counters, "tc: complete confirmation of a replaced chain");
            return;
        }
        if waiting.is_empty() {
            self.complete_done(t, ctx);
        }
    }

    /// Every replica released the transaction: forget it (answering the
    /// client now if it waited for this).
    fn complete_done(&mut self, t: TxnId, ctx: &mut Ctx<'_, Signal>) {
        let txn = self.txns.get(&t).expect("txn");
        if txn.ack_after_complete && !txn.taken_over {
            let results = std::mem::take(&mut self.txns.get_mut(&t).expect("txn").final_results);
            self.reply_committed(t, results, ctx);
        }
        let txn = self.txns.remove(&t).expect("txn");
        self.forget_handle(t, &txn);
    }

    /// Abort `t` at every LQH that may hold something of it; answer per
    /// `reply` once all confirmed.
    fn abort(&mut self, t: TxnId, reply: AbortReply, ctx: &mut Ctx<'_, Signal>) {
        let e = NodeError::with(ErrorCode::TransactionAborted, "the scan's transaction was aborted");
        self.close_txn_scans(t, Err(e), ctx);
        let dist = &self.dist;
        let txn = self.txns.get_mut(&t).expect("txn");
        txn.batch = None;
        let waiting: BTreeSet<(NodeId, u16)> = txn.nodes.iter().copied().filter(|(n, _)| !dist.down(*n)).collect();
        for (n, i) in &waiting {
            ctx.send(Self::lqh_at(*n, *i), internal(InternalSignal::LqhAbortReq { txn: t }));
        }
        let empty = waiting.is_empty();
        txn.state = TxnState::Aborting { waiting, reply };
        if empty {
            self.abort_done(t, ctx);
        }
    }

    fn on_abort_conf(&mut self, from: BlockRef, t: TxnId, ctx: &mut Ctx<'_, Signal>) {
        let Some(txn) = self.txns.get_mut(&t) else {
            return;
        };
        let TxnState::Aborting { waiting, .. } = &mut txn.state else {
            crate::probe!(self.counters, "tc: late abort confirmation");
            return;
        };
        waiting.remove(&(from.node, from.instance));
        if waiting.is_empty() {
            self.abort_done(t, ctx);
        }
    }

    fn abort_done(&mut self, t: TxnId, ctx: &mut Ctx<'_, Signal>) {
        let txn = self.txns.remove(&t).expect("txn");
        self.forget_handle(t, &txn);
        self.aborted += 1;
        let TxnState::Aborting { reply, .. } = txn.state else { unreachable!("aborting") };
        match reply {
            AbortReply::KeyRef { error, op_index } => Self::key_ref(ctx, txn.api, txn.handle, error, op_index),
            AbortReply::ScanRef { scan_id, error } => Self::scan_ref(ctx, txn.api, txn.handle, scan_id, error),
            AbortReply::RolledBack => Self::key_conf(ctx, txn.api, txn.handle, TxnOutcome::RolledBack, Vec::new()),
            AbortReply::Tombstone(e) => {
                if self.tombstones.len() >= self.max_transactions.max(MIN_TOMBSTONES) {
                    // Bounded: forget the oldest-keyed one.
                    let first = *self.tombstones.keys().next().expect("non-empty");
                    self.tombstones.remove(&first);
                }
                self.tombstones.insert((txn.api.node, txn.handle), e);
            }
            AbortReply::Silent => {}
            AbortReply::TakenOver => {
                self.takeover_txn_done(ctx);
                let conf = norr_signals::TcKeyFailConf { txn: txn.handle, outcome: TxnOutcome::RolledBack, gci: 0 };
                ctx.send(txn.api, Signal::TcKeyFailConf(Box::new(conf)));
            }
        }
    }

    /// Free the client's handle if it still names `t` (after an API failure
    /// the handle may already name a newer transaction).
    fn forget_handle(&mut self, t: TxnId, txn: &TcTxn) {
        self.forget_handle_of(t, txn.api.node, txn.handle);
    }

    fn forget_handle_of(&mut self, t: TxnId, api_node: NodeId, handle: u64) {
        let k = (api_node, handle);
        if self.by_handle.get(&k) == Some(&t) {
            self.by_handle.remove(&k);
        }
    }

    fn on_cluster(&mut self, from: BlockRef, sig: ClusterSignal, ctx: &mut Ctx<'_, Signal>) {
        match sig {
            ClusterSignal::DistRep { dist } => {
                self.dist.on_dist(*dist);
                let version = self.dist.version;
                ctx.send_prio(from, Signal::Cluster(Box::new(ClusterSignal::DistConf { version })), Priority::A);
            }
            ClusterSignal::ClusterStartedRep { membership, .. } | ClusterSignal::NodeJoinedRep { membership, .. } => {
                self.dist.on_membership(&[], &membership);
                self.membership = Some(membership);
            }
            ClusterSignal::NodeFailRep { failed, membership } => {
                self.dist.on_membership(&failed, &membership);
                self.membership = Some(membership);
                self.on_node_fail(&failed, ctx);
                self.takeover_node_fail(&failed, ctx);
            }
            ClusterSignal::ServeLeaseRep { until_ns } => {
                debug_assert_eq!(from.node, self.node, "a lease from another node's QMGR");
                self.serve_until_ns = Some(self.serve_until_ns.map_or(until_ns, |u| u.max(until_ns)));
                self.lease_revoked_for.clear();
            }
            ClusterSignal::ServeLeaseRevokedRep { suspected } => {
                debug_assert_eq!(from.node, self.node, "a revocation from another node's QMGR");
                debug_assert!(!suspected.is_empty(), "a revocation without a suspect");
                // Ends now (`not_serving`); the next `ServeLeaseRep` ends
                // the revocation.
                self.lease_revoked_for = suspected;
            }
            ClusterSignal::NfCompleteRep { node } => {
                // The president's TC finished the failed node's transactions.
                if self.in_cluster && self.instance == 0 {
                    // The GCP master holds rounds at the commit step until
                    // then (crates/node/src/ckpt.rs), and every node's CKPT
                    // keeps the set for a master to come. Told here, on the
                    // node, rather than by the president to every CKPT: this
                    // TC and its CKPT then never disagree on what is pending
                    // if the president fails halfway through its sends.
                    let ckpt = BlockRef::new(self.node, block::CKPT, 0);
                    ctx.send_prio(ckpt, Signal::Cluster(Box::new(ClusterSignal::NfCompleteRep { node })), Priority::A);
                }
                if self.takeover_pending.remove(&node) && from.node != self.node {
                    let qmgr = BlockRef::new(self.node, block::QMGR, 0);
                    ctx.send(qmgr, Signal::Cluster(Box::new(ClusterSignal::NfCompleteRep { node })));
                }
            }
            other => {
                crate::probe!(self.counters, "tc: unexpected cluster signal");
                debug_assert!(false, "TC got unexpected {other:?}");
            }
        }
    }

    fn on_schema_change(&mut self, change: SchemaChange) {
        match change {
            SchemaChange::CreateTable(def)
            | SchemaChange::CreateIndex { def, .. }
            | SchemaChange::DropIndex { def, .. }
            | SchemaChange::TruncateTable(def) => {
                self.defs.insert(def.id, Arc::new(def));
            }
            SchemaChange::DropTable(t) => {
                self.defs.remove(&t);
            }
            SchemaChange::AlterCommit { def } => {
                self.defs.insert(def.id, Arc::new(def));
            }
            SchemaChange::AlterTable { .. } | SchemaChange::AlterAbort(_) => {
                debug_assert!(false, "DICT sends TC only the committed ALTER TABLE")
            }
        }
    }

    fn stats(&self) -> BlockStats {
        let mut counters = self.counters.snapshot();
        counters.push(("tc: open scans".into(), self.scans.len() as u64));
        BlockStats {
            open_transactions: self.txns.len() as u32,
            committed_transactions: self.committed,
            aborted_transactions: self.aborted,
            counters,
            ..BlockStats::default()
        }
    }
}

impl Block<Signal> for Tc {
    fn on_signal(&mut self, env: norr_kernel::Envelope<Signal>, ctx: &mut Ctx<'_, Signal>) {
        let from = env.from;
        if from.block == block::API && self.failed_apis.contains(&from.node) {
            // Sent before the API node failed, run after API_FAILREQ: drop.
            crate::probe!(self.counters, "tc: request of a failed api dropped");
            return;
        }
        match env.signal {
            Signal::TcKeyReq(req) => self.on_key_req(from, *req, ctx),
            Signal::ScanTabReq(req) => self.on_scan_tab_req(from, *req, ctx),
            Signal::ScanNextReq(req) => self.on_scan_next_req(from, req, ctx),
            Signal::ApiFailReq { api_node } => {
                self.privileges.forget(api_node);
                self.on_api_fail(api_node, ctx)
            }
            Signal::TcSavepointReq(req) => self.on_savepoint_req(from, *req, ctx),
            Signal::Internal(sig) => match *sig {
                InternalSignal::LqhKeyConf { txn, results } => self.on_op_results(txn, results, ctx),
                InternalSignal::LqhCommitConf { txn, chain } => self.on_commit_conf(txn, chain, ctx),
                InternalSignal::LqhCommitRef { txn, error } => self.on_commit_ref(txn, error, ctx),
                InternalSignal::LqhCompleteConf { txn, chain } => self.on_complete_conf(txn, chain, ctx),
                InternalSignal::LqhAbortConf { txn } => self.on_abort_conf(from, txn, ctx),
                InternalSignal::LqhRollbackToConf { txn, error } => self.on_rollback_to_conf(from, txn, error, ctx),
                InternalSignal::LqhTransConf { failed_tc, txns, done } => {
                    self.on_trans_conf(from, failed_tc, txns, done, ctx)
                }
                InternalSignal::LqhScanConf { scan, part, rows, done } => {
                    self.on_lqh_scan_conf(scan, part, rows, done, ctx)
                }
                InternalSignal::LqhScanRef { scan, part, error } => self.on_lqh_scan_ref(scan, part, error, ctx),
                InternalSignal::TcTimeoutCheck => self.on_timeout_check(ctx),
                InternalSignal::ApiFailDone { api_node } => {
                    self.failed_apis.remove(&api_node);
                }
                InternalSignal::ApiGrants { api_node, grants } => self.privileges.set(api_node, grants.map(|g| *g)),
                InternalSignal::SchemaChangeReq { req, change } => {
                    self.on_schema_change(*change);
                    ctx.send_prio(from, internal(InternalSignal::SchemaChangeConf { req, error: None }), Priority::B);
                }
                InternalSignal::StatsReq { req } => {
                    ctx.send(from, internal(InternalSignal::StatsConf { req, stats: Box::new(self.stats()) }));
                }
                other => {
                    crate::probe!(self.counters, "tc: unexpected internal signal");
                    debug_assert!(false, "TC got unexpected {other:?}")
                }
            },
            Signal::Cluster(sig) => self.on_cluster(from, *sig, ctx),
            Signal::Ckpt(sig) => self.on_ckpt(from, *sig, ctx),
            other => {
                crate::probe!(self.counters, "tc: unexpected signal");
                debug_assert!(false, "TC got unexpected {}", other.name())
            }
        }
    }
}

/// The chains a commit is sent along: every chain, except a one-node chain
/// whose node another chain covers (an LQH commits all it holds of a
/// transaction at its first commit message).
fn commit_chains(chains: &BTreeSet<Chain>) -> BTreeSet<Chain> {
    chains
        .iter()
        .filter(|c| {
            c.nodes.len() > 1
                || !chains.iter().any(|o| o.nodes.len() > 1 && o.instance == c.instance && o.contains(c.nodes[0]))
        })
        .cloned()
        .collect()
}
