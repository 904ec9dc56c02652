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
mod savepoint;
mod scan;
mod scan_filter;

use crate::counters::Counters;
use crate::fxhash::FxHashMap;
use crate::route::{lqh_instance, op_partition};
use norr_kernel::{Block, BlockRef, Ctx, NodeId, Priority};
use norr_knobs::Knobs;
use norr_signals::dist::Chain;
use norr_signals::internal::{
    BlockStats, InternalSignal, LqhOp, LqhOpError, LqhOpResult, ScanKey, SchemaChange, TxnId,
};
use norr_signals::schema::{TableDef, TableId};
use norr_signals::{
    block, ErrorCode, ExecType, NodeError, OpResult, Signal, TcKeyConf, TcKeyRef, TcKeyReq, TxnOutcome,
    MAX_OPS_PER_BATCH,
};
use std::collections::{BTreeMap, BTreeSet};
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
}

#[derive(Debug)]
enum TxnState {
    /// Waiting for the client.
    Idle,
    Executing,
    Committing {
        waiting: usize,
        error: Option<NodeError>,
    },
    Aborting {
        waiting: usize,
        reply: AbortReply,
    },
    /// Rolling back to a savepoint (see `savepoint.rs`); `error`: the first
    /// LQH refusal, which turns it into an abort.
    RollingBack {
        waiting: usize,
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
    /// LQH instances that hold state of this transaction.
    participants: BTreeSet<u16>,
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

pub struct Tc {
    node: NodeId,
    lqh_instances: u16,
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
    committed: u64,
    aborted: u64,
    /// The global checkpoint commits are tagged with (see `norr_signals::ckpt`).
    gci: u64,
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
        let first_id = ((instance as u64) << 48) + 1;
        Tc {
            node,
            lqh_instances,
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
            committed: 0,
            aborted: 0,
            gci: 1,
            counters: Counters::default(),
        }
    }

    fn lqh_ref(&self, instance: u16) -> BlockRef {
        BlockRef::new(self.node, block::LQH, instance)
    }

    fn check_period_ns(&self) -> u64 {
        (self.txn_inactive_ns / 10).clamp(10_000_000, 1_000_000_000)
    }

    /// Keep the periodic time-out check running while there is something to time out.
    fn arm_timer(&mut self, ctx: &mut Ctx<'_, Signal>) {
        if !self.timer_armed && (!self.txns.is_empty() || !self.scans.is_empty()) {
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

    /// The chain of LQH instance `instance` of this node alone.
    fn own_chain(&self, instance: u16) -> Chain {
        Chain { instance, nodes: [self.node].into_iter().collect() }
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
                participants: BTreeSet::new(),
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
            if req.ops.is_empty() && req.exec == ExecType::Commit && !self.tombstones.contains_key(&(api.node, handle))
            {
                return Self::key_conf(ctx, api, handle, TxnOutcome::Committed, Vec::new());
            }
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
        // The batch's operations per LQH instance: one LQH_KEYREQ each.
        let mut sends: Vec<Vec<LqhOp>> = (0..self.lqh_instances).map(|_| Vec::new()).collect();
        if self.lqh_instances == 1 {
            sends[0].reserve_exact(n);
        }
        for (i, op) in req.ops.into_iter().enumerate() {
            let routed = match self.defs.get(&op.table) {
                None => Err(NodeError::with(ErrorCode::NoSuchTable, format!("table id {}", op.table))),
                Some(d) if op.table_version != 0 && op.table_version != d.version => Err(NodeError::with(
                    ErrorCode::SchemaVersionMismatch,
                    format!("table {} is at version {}", d.name, d.version),
                )),
                Some(d) => op_partition(d, &op),
            };
            match routed {
                Ok(part) => {
                    let inst = part.map_or(0, |p| lqh_instance(p, self.lqh_instances));
                    sends[inst as usize].push(LqhOp { seq: seq_base + i as u32, part, op, savepoint });
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
        if let Some((error, i)) = fail {
            txn.batch = None;
            return self.abort(t, AbortReply::KeyRef { error, op_index: Some(i) }, ctx);
        }
        batch.outstanding = sends.iter().map(Vec::len).sum();
        self.counters.bump_by("tc: operations", batch.outstanding as u64);
        txn.batch = Some(batch);
        for (inst, ops) in sends.into_iter().enumerate() {
            if ops.is_empty() {
                continue;
            }
            let inst = inst as u16;
            // Committed reads sent to an LQH that holds nothing of this
            // transaction leave nothing there either (simple reads, see
            // `norr_signals::internal`): it takes no part in commit or abort.
            if txn.participants.contains(&inst) || !ops.iter().all(|o| o.op.is_committed_read()) {
                txn.participants.insert(inst);
            } else {
                crate::probe!(self.counters, "tc: simple reads (no lqh state)");
            }
            let (api, handle) = (txn.api, txn.handle);
            let req = InternalSignal::LqhKeyReq { txn: t, ops, api, handle };
            ctx.send(BlockRef::new(self.node, block::LQH, inst), internal(req));
        }
        self.maybe_batch_done(t, ctx);
    }

    /// Results of operations of the current batch from one LQH.
    fn on_op_results(&mut self, t: TxnId, results: Vec<LqhOpResult>, ctx: &mut Ctx<'_, Signal>) {
        let Some(txn) = self.txns.get_mut(&t) else {
            return;
        };
        if !matches!(txn.state, TxnState::Executing) {
            return; // an abort overtook this batch
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

    fn maybe_batch_done(&mut self, t: TxnId, ctx: &mut Ctx<'_, Signal>) {
        let txn = self.txns.get_mut(&t).expect("txn");
        let batch = txn.batch.as_ref().expect("batch");
        if batch.outstanding > 0 {
            return;
        }
        if batch.exec == ExecType::Commit {
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

    fn commit(&mut self, t: TxnId, ctx: &mut Ctx<'_, Signal>) {
        self.close_txn_scans(t, Ok(()), ctx);
        let txn = self.txns.get_mut(&t).expect("txn");
        let parts: Vec<u16> = txn.participants.iter().copied().collect();
        txn.state = TxnState::Committing { waiting: parts.len(), error: None };
        let tc = ctx.self_ref();
        for p in &parts {
            let chain = self.own_chain(*p);
            ctx.send(self.lqh_ref(*p), internal(InternalSignal::LqhCommitReq { txn: t, gci: self.gci, chain, tc }));
        }
        if parts.is_empty() {
            self.commit_done(t, ctx);
        }
    }

    fn on_commit_reply(&mut self, t: TxnId, err: Option<NodeError>, ctx: &mut Ctx<'_, Signal>) {
        let Some(txn) = self.txns.get_mut(&t) else {
            return;
        };
        let TxnState::Committing { waiting, error } = &mut txn.state else {
            debug_assert!(false, "commit reply for txn {t} not committing");
            return;
        };
        *waiting -= 1;
        if error.is_none() {
            *error = err;
        }
        if *waiting == 0 {
            self.commit_done(t, ctx);
        }
    }

    fn commit_done(&mut self, t: TxnId, ctx: &mut Ctx<'_, Signal>) {
        let txn = self.txns.get_mut(&t).expect("txn");
        let TxnState::Committing { error, .. } = &mut txn.state else { unreachable!("committing") };
        if let Some(error) = error.take() {
            // An LQH refused (concurrent DDL) and aborted its part. With one LQH
            // nothing committed; abort the others too.
            crate::probe!(self.counters, "tc: commit refused");
            txn.state = TxnState::Idle;
            return self.abort(t, AbortReply::KeyRef { error, op_index: None }, ctx);
        }
        let txn = self.txns.remove(&t).expect("txn");
        self.forget_handle(t, &txn);
        self.committed += 1;
        let results = txn.batch.map_or(Vec::new(), |b| b.results.into_iter().map(|r| r.expect("answered")).collect());
        if !txn.silent {
            let conf = TcKeyConf { txn: txn.handle, outcome: TxnOutcome::Committed, results, gci: self.gci };
            ctx.send(txn.api, Signal::TcKeyConf(Box::new(conf)));
        }
        let tc = ctx.self_ref();
        for p in &txn.participants {
            let chain = self.own_chain(*p);
            ctx.send(self.lqh_ref(*p), internal(InternalSignal::LqhCompleteReq { txn: t, chain, tc }));
        }
    }

    /// Abort `t` at every participant; answer per `reply` once all confirmed.
    fn abort(&mut self, t: TxnId, reply: AbortReply, ctx: &mut Ctx<'_, Signal>) {
        let e = NodeError::with(ErrorCode::TransactionAborted, "the scan's transaction was aborted");
        self.close_txn_scans(t, Err(e), ctx);
        let txn = self.txns.get_mut(&t).expect("txn");
        txn.batch = None;
        let parts: Vec<u16> = txn.participants.iter().copied().collect();
        txn.state = TxnState::Aborting { waiting: parts.len(), reply };
        for p in &parts {
            ctx.send(self.lqh_ref(*p), internal(InternalSignal::LqhAbortReq { txn: t }));
        }
        if parts.is_empty() {
            self.abort_done(t, ctx);
        }
    }

    fn on_abort_conf(&mut self, t: TxnId, ctx: &mut Ctx<'_, Signal>) {
        let Some(txn) = self.txns.get_mut(&t) else {
            return;
        };
        let TxnState::Aborting { waiting, .. } = &mut txn.state else {
            debug_assert!(false, "abort conf for txn {t} not aborting");
            return;
        };
        *waiting -= 1;
        if *waiting == 0 {
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
        }
    }

    /// Free the client's handle if it still names `t` (after an API failure
    /// the handle may already name a newer transaction).
    fn forget_handle(&mut self, t: TxnId, txn: &TcTxn) {
        let k = (txn.api.node, txn.handle);
        if self.by_handle.get(&k) == Some(&t) {
            self.by_handle.remove(&k);
        }
    }

    fn on_schema_change(&mut self, change: SchemaChange) {
        match change {
            SchemaChange::CreateTable(def)
            | SchemaChange::CreateIndex { def, .. }
            | SchemaChange::DropIndex { def, .. } => {
                self.defs.insert(def.id, Arc::new(def));
            }
            SchemaChange::DropTable(t) => {
                self.defs.remove(&t);
            }
            SchemaChange::TruncateTable(_) => {}
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
            Signal::ApiFailReq { api_node } => self.on_api_fail(api_node, ctx),
            Signal::TcSavepointReq(req) => self.on_savepoint_req(from, *req, ctx),
            Signal::Internal(sig) => match *sig {
                InternalSignal::LqhKeyConf { txn, results } => self.on_op_results(txn, results, ctx),
                InternalSignal::LqhCommitConf { txn, .. } => self.on_commit_reply(txn, None, ctx),
                InternalSignal::LqhCommitRef { txn, error } => self.on_commit_reply(txn, Some(error), ctx),
                InternalSignal::LqhCompleteConf { .. } => self.counters.bump("tc: completes"),
                InternalSignal::LqhAbortConf { txn } => self.on_abort_conf(txn, ctx),
                InternalSignal::LqhRollbackToConf { txn, error } => self.on_rollback_to_conf(txn, error, ctx),
                InternalSignal::LqhScanConf { scan, part, rows, done } => {
                    self.on_lqh_scan_conf(scan, part, rows, done, ctx)
                }
                InternalSignal::LqhScanRef { scan, part, error } => self.on_lqh_scan_ref(scan, part, error, ctx),
                InternalSignal::TcTimeoutCheck => self.on_timeout_check(ctx),
                InternalSignal::ApiFailDone { api_node } => {
                    self.failed_apis.remove(&api_node);
                }
                InternalSignal::SchemaChangeReq { req, change } => {
                    self.on_schema_change(*change);
                    ctx.send_prio(from, internal(InternalSignal::SchemaChangeConf { req, error: None }), Priority::B);
                }
                InternalSignal::StatsReq { req } => {
                    ctx.send(from, internal(InternalSignal::StatsConf { req, stats: Box::new(self.stats()) }));
                }
                other => debug_assert!(false, "TC got unexpected {other:?}"),
            },
            other => debug_assert!(false, "TC got unexpected {}", other.name()),
        }
    }
}
