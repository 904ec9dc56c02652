//! A toy data node: one block state shared by a TC and a DICT front, enough of
//! the client protocol (key operations with no-wait row locks, commit/rollback,
//! committed-read and locking scans, CREATE TABLE, node stats, API failure,
//! inactivity time-out) to develop and test the simulator host and its
//! workloads without the real node. `ToyBug` breaks it on purpose so tests can
//! prove the checkers catch a broken node.

use norr_kernel::{Block, BlockRef, Ctx, Envelope, NodeId, Scheduler};
use norr_knobs::Knobs;
use norr_signals::*;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// Deliberate bugs, for checking the checkers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToyBug {
    None,
    /// Every lock request is granted: lost updates, dirty reads.
    NoLocking,
    /// Commit applies only the first write of a transaction.
    PartialCommit,
}

type TxnKey = (NodeId, u64);
type RowKey = (TableId, Vec<u8>);

#[derive(Default)]
struct LockState {
    x: Option<TxnKey>,
    s: BTreeSet<TxnKey>,
}

/// Uncommitted images of a transaction: None = deleted.
type Writes = BTreeMap<RowKey, Option<Vec<Value>>>;

struct Txn {
    /// Uncommitted images: None = deleted.
    writes: BTreeMap<RowKey, Option<Vec<Value>>>,
    locks: BTreeSet<RowKey>,
    last_active_ns: u64,
    /// Savepoints: (number, `writes` when set), oldest first.
    savepoints: Vec<(u32, Writes)>,
}

struct Scan {
    /// The transaction of a non-standalone scan: the scan closes with it.
    txn: Option<TxnKey>,
    rows: Vec<Vec<Value>>,
    pos: usize,
    batch: usize,
}

struct State {
    node: NodeId,
    knobs: Knobs,
    bug: ToyBug,
    tables: BTreeMap<TableId, TableDef>,
    rows: BTreeMap<RowKey, Vec<Value>>,
    locks: BTreeMap<RowKey, LockState>,
    txns: BTreeMap<TxnKey, Txn>,
    timed_out: BTreeSet<TxnKey>,
    scans: BTreeMap<(NodeId, u32), Scan>,
    failed_apis: BTreeSet<NodeId>,
    committed: u64,
    aborted: u64,
    timer_armed: bool,
}

const CHECK_INTERVAL_NS: u64 = 100_000_000;

fn row_key(table: TableId, pk: &[Value]) -> RowKey {
    (table, postcard::to_stdvec(pk).unwrap_or_default())
}

impl State {
    fn lock(&mut self, t: TxnKey, rk: &RowKey, exclusive: bool) -> bool {
        if self.bug == ToyBug::NoLocking {
            return true;
        }
        let l = self.locks.entry(rk.clone()).or_default();
        let ok = if exclusive {
            l.x.is_none_or(|o| o == t) && l.s.iter().all(|&o| o == t)
        } else {
            l.x.is_none_or(|o| o == t)
        };
        if ok {
            if exclusive {
                l.x = Some(t);
            } else if l.x != Some(t) {
                l.s.insert(t);
            }
            if let Some(txn) = self.txns.get_mut(&t) {
                txn.locks.insert(rk.clone());
            }
        } else if l.x.is_none() && l.s.is_empty() {
            self.locks.remove(rk);
        }
        ok
    }

    fn end_txn(&mut self, t: TxnKey, commit: bool) {
        let Some(txn) = self.txns.remove(&t) else {
            return;
        };
        self.scans.retain(|_, s| s.txn != Some(t));
        if commit {
            self.committed += 1;
            for (i, (rk, img)) in txn.writes.into_iter().enumerate() {
                if self.bug == ToyBug::PartialCommit && i > 0 {
                    break;
                }
                match img {
                    Some(r) => {
                        self.rows.insert(rk, r);
                    }
                    None => {
                        self.rows.remove(&rk);
                    }
                }
            }
        } else {
            self.aborted += 1;
        }
        for rk in txn.locks {
            if let Some(l) = self.locks.get_mut(&rk) {
                if l.x == Some(t) {
                    l.x = None;
                }
                l.s.remove(&t);
                if l.x.is_none() && l.s.is_empty() {
                    self.locks.remove(&rk);
                }
            }
        }
    }

    fn current(&self, t: TxnKey, rk: &RowKey, own: bool) -> Option<Vec<Value>> {
        if own {
            if let Some(img) = self.txns.get(&t).and_then(|x| x.writes.get(rk)) {
                return img.clone();
            }
        }
        self.rows.get(rk).cloned()
    }

    /// Execute one op. Err(fatal error) aborts the transaction.
    fn exec_op(&mut self, t: TxnKey, op: &KeyOp) -> Result<OpResult, NodeError> {
        let def = self.tables.get(&op.table).ok_or(NodeError::new(ErrorCode::NoSuchTable))?.clone();
        let KeyAccess::Primary(pk) = &op.key else {
            return Err(NodeError::with(ErrorCode::Internal, "toy: unique access unsupported"));
        };
        let rk = row_key(op.table, pk);
        let locked = op.kind.is_write() || op.lock != LockMode::CommittedRead;
        if locked && !self.lock(t, &rk, op.kind.is_write() || op.lock == LockMode::Exclusive) {
            return Err(NodeError::new(ErrorCode::LockWaitTimeout));
        }
        let cur = self.current(t, &rk, true);
        let soft = |e: ErrorCode| -> Result<OpResult, NodeError> {
            if op.abort_on_error {
                Err(NodeError::new(e))
            } else {
                Ok(OpResult::Err(NodeError::new(e)))
            }
        };
        let build = |base: Option<Vec<Value>>| -> Vec<Value> {
            let mut row = base.unwrap_or_else(|| {
                let mut r = vec![Value::Null; def.columns.len()];
                for (i, c) in def.primary_key.iter().enumerate() {
                    r[*c as usize] = pk[i].clone();
                }
                for (i, c) in def.columns.iter().enumerate() {
                    if let Some(d) = &c.default {
                        if r[i].is_null() {
                            r[i] = d.clone();
                        }
                    }
                }
                r
            });
            for (c, v) in &op.values {
                row[*c as usize] = v.clone();
            }
            for (c, d) in &op.increments {
                if let (Some(a), Some(b)) = (row[*c as usize].as_i64(), d.as_i64()) {
                    row[*c as usize] = Value::Int(a + b);
                }
            }
            row
        };
        let write = |s: &mut State, img: Option<Vec<Value>>| {
            if let Some(txn) = s.txns.get_mut(&t) {
                txn.writes.insert(rk.clone(), img);
            }
        };
        match op.kind {
            OpKind::Read => match cur {
                None => soft(ErrorCode::NoSuchRow),
                Some(r) => {
                    let r = if op.projection.is_empty() {
                        r
                    } else {
                        op.projection.iter().map(|c| r[*c as usize].clone()).collect()
                    };
                    Ok(OpResult::Ok(Some(r)))
                }
            },
            OpKind::Insert => match cur {
                Some(_) => soft(ErrorCode::DuplicateKey),
                None => {
                    write(self, Some(build(None)));
                    Ok(OpResult::Ok(None))
                }
            },
            OpKind::Update => match cur {
                None => soft(ErrorCode::NoSuchRow),
                Some(r) => {
                    write(self, Some(build(Some(r))));
                    Ok(OpResult::Ok(None))
                }
            },
            OpKind::Write => {
                write(self, Some(build(cur)));
                Ok(OpResult::Ok(None))
            }
            OpKind::Delete => match cur {
                None => soft(ErrorCode::NoSuchRow),
                Some(_) => {
                    write(self, None);
                    Ok(OpResult::Ok(None))
                }
            },
        }
    }

    fn on_signal(&mut self, env: Envelope<Signal>, ctx: &mut Ctx<'_, Signal>) {
        let now = ctx.now_ns();
        let me = ctx.self_ref();
        if !self.timer_armed {
            self.timer_armed = true;
            ctx.send_delayed(
                BlockRef::new(self.node, block::TC, 0),
                Signal::Internal(Box::new(InternalSignal::TcTimeoutCheck)),
                CHECK_INTERVAL_NS,
            );
        }
        let from = env.from;
        match env.signal {
            Signal::ApiFailReq { api_node } => {
                if me.block != block::TC {
                    return;
                }
                self.failed_apis.insert(api_node);
                let ts: Vec<TxnKey> = self.txns.keys().filter(|k| k.0 == api_node).copied().collect();
                for t in ts {
                    self.end_txn(t, false);
                }
                self.scans.retain(|k, _| k.0 != api_node);
                self.timed_out.retain(|k| k.0 != api_node);
            }
            Signal::Internal(i) if matches!(*i, InternalSignal::TcTimeoutCheck) => {
                let limit = self.knobs.txn_inactive_timeout_ms * 1_000_000;
                let stale: Vec<TxnKey> = self
                    .txns
                    .iter()
                    .filter(|(_, t)| now.saturating_sub(t.last_active_ns) > limit)
                    .map(|(k, _)| *k)
                    .collect();
                for t in stale {
                    self.end_txn(t, false);
                    self.timed_out.insert(t);
                }
                ctx.send_delayed(me, Signal::Internal(Box::new(InternalSignal::TcTimeoutCheck)), CHECK_INTERVAL_NS);
            }
            Signal::DictReq(req) => {
                let result = match req.op {
                    DictOp::CreateTable(mut def) => {
                        if self.tables.values().any(|t| t.name == def.name) {
                            Err(NodeError::new(ErrorCode::TableExists))
                        } else {
                            def.id = self.tables.len() as u32 + 1;
                            def.version = 1;
                            self.tables.insert(def.id, def.clone());
                            Ok(DictResult::Table(def))
                        }
                    }
                    DictOp::NodeStats => Ok(DictResult::Stats(NodeStats {
                        data_memory_limit_bytes: self.knobs.data_memory_bytes,
                        data_memory_used_bytes: 0,
                        rows: self.rows.len() as u64,
                        tables: self.tables.len() as u32,
                        open_transactions: self.txns.len() as u32,
                        committed_transactions: self.committed,
                        aborted_transactions: self.aborted,
                    })),
                    DictOp::CreateIndex { table, mut index } => {
                        match self.tables.values_mut().find(|t| t.name == table) {
                            None => Err(NodeError::new(ErrorCode::NoSuchTable)),
                            Some(t) if t.index_by_name(&index.name).is_some() => {
                                Err(NodeError::new(ErrorCode::IndexExists))
                            }
                            Some(t) => {
                                index.id = t.indexes.iter().map(|i| i.id).max().unwrap_or(0) + 1;
                                t.indexes.push(index);
                                t.version += 1;
                                Ok(DictResult::Table(t.clone()))
                            }
                        }
                    }
                    DictOp::DropIndex { table, index } => match self.tables.values_mut().find(|t| t.name == table) {
                        None => Err(NodeError::new(ErrorCode::NoSuchTable)),
                        Some(t) if t.index_by_name(&index).is_none() => Err(NodeError::new(ErrorCode::NoSuchIndex)),
                        Some(t) => {
                            t.indexes.retain(|i| !i.name.eq_ignore_ascii_case(&index));
                            t.version += 1;
                            Ok(DictResult::Table(t.clone()))
                        }
                    },
                    _ => Err(NodeError::with(ErrorCode::Internal, "toy: unsupported dict op")),
                };
                let sig = match result {
                    Ok(result) => Signal::DictConf(Box::new(DictConf { req_id: req.req_id, result })),
                    Err(error) => Signal::DictRef(Box::new(DictRef { req_id: req.req_id, error })),
                };
                ctx.send(from, sig);
            }
            Signal::TcKeyReq(req) => {
                let t = (from.node, req.txn);
                if self.failed_apis.contains(&from.node) {
                    return;
                }
                if self.timed_out.remove(&t) {
                    let r =
                        TcKeyRef { txn: req.txn, error: NodeError::new(ErrorCode::TransactionTimeout), op_index: None };
                    ctx.send(from, Signal::TcKeyRef(Box::new(r)));
                    return;
                }
                if req.exec == ExecType::Rollback {
                    self.end_txn(t, false);
                    let c = TcKeyConf { txn: req.txn, outcome: TxnOutcome::RolledBack, results: vec![], gci: 0 };
                    ctx.send(from, Signal::TcKeyConf(Box::new(c)));
                    return;
                }
                self.txns
                    .entry(t)
                    .or_insert_with(|| Txn {
                        writes: BTreeMap::new(),
                        locks: BTreeSet::new(),
                        last_active_ns: now,
                        savepoints: Vec::new(),
                    })
                    .last_active_ns = now;
                let mut results = Vec::new();
                for (i, op) in req.ops.iter().enumerate() {
                    match self.exec_op(t, op) {
                        Ok(r) => results.push(r),
                        Err(error) => {
                            self.end_txn(t, false);
                            let r = TcKeyRef { txn: req.txn, error, op_index: Some(i as u32) };
                            ctx.send(from, Signal::TcKeyRef(Box::new(r)));
                            return;
                        }
                    }
                }
                let outcome = if req.exec == ExecType::Commit {
                    self.end_txn(t, true);
                    TxnOutcome::Committed
                } else {
                    TxnOutcome::Open
                };
                ctx.send(from, Signal::TcKeyConf(Box::new(TcKeyConf { txn: req.txn, outcome, results, gci: 0 })));
            }
            Signal::TcSavepointReq(req) => {
                let t = (from.node, req.txn);
                if self.failed_apis.contains(&from.node) {
                    return;
                }
                if self.timed_out.remove(&t) {
                    let r =
                        TcKeyRef { txn: req.txn, error: NodeError::new(ErrorCode::TransactionTimeout), op_index: None };
                    ctx.send(from, Signal::TcKeyRef(Box::new(r)));
                    return;
                }
                let txn = self.txns.entry(t).or_insert_with(|| Txn {
                    writes: BTreeMap::new(),
                    locks: BTreeSet::new(),
                    last_active_ns: now,
                    savepoints: Vec::new(),
                });
                txn.last_active_ns = now;
                let ok = match req.action {
                    SavepointAction::Set => {
                        let ok = txn.savepoints.last().is_none_or(|(n, _)| *n < req.savepoint);
                        if ok {
                            txn.savepoints.push((req.savepoint, txn.writes.clone()));
                        }
                        ok
                    }
                    SavepointAction::RollbackTo => {
                        // Undo everything since the savepoint set last at or before this number.
                        match txn.savepoints.iter().rposition(|(n, _)| *n <= req.savepoint) {
                            Some(i) => {
                                txn.writes = txn.savepoints[i].1.clone();
                                txn.savepoints.truncate(i + 1);
                                true
                            }
                            None => false,
                        }
                    }
                };
                if ok {
                    let c = TcKeyConf { txn: req.txn, outcome: TxnOutcome::Open, results: vec![], gci: 0 };
                    ctx.send(from, Signal::TcKeyConf(Box::new(c)));
                } else {
                    self.end_txn(t, false);
                    let r =
                        TcKeyRef { txn: req.txn, error: NodeError::new(ErrorCode::MalformedSignal), op_index: None };
                    ctx.send(from, Signal::TcKeyRef(Box::new(r)));
                }
            }
            Signal::ScanTabReq(req) => {
                if self.failed_apis.contains(&from.node) {
                    return;
                }
                let t = (from.node, req.txn);
                let spec = req.spec;
                let fail = |ctx: &mut Ctx<'_, Signal>, code: ErrorCode| {
                    let r = ScanTabRef { txn: req.txn, scan_id: req.scan_id, error: NodeError::new(code) };
                    ctx.send(from, Signal::ScanTabRef(Box::new(r)));
                };
                let Some(def) = self.tables.get(&spec.table).cloned() else {
                    return fail(ctx, ErrorCode::NoSuchTable);
                };
                if !req.standalone && self.timed_out.remove(&t) {
                    return fail(ctx, ErrorCode::TransactionTimeout);
                }
                let locking = !req.standalone && spec.lock != LockMode::CommittedRead;
                if !req.standalone {
                    self.txns
                        .entry(t)
                        .or_insert_with(|| Txn {
                            writes: BTreeMap::new(),
                            locks: BTreeSet::new(),
                            last_active_ns: now,
                            savepoints: Vec::new(),
                        })
                        .last_active_ns = now;
                }
                let keys: Vec<RowKey> = self
                    .rows
                    .range((spec.table, Vec::new())..(spec.table + 1, Vec::new()))
                    .map(|(k, _)| k.clone())
                    .collect();
                let mut rows = Vec::new();
                for rk in keys {
                    if locking && !self.lock(t, &rk, spec.lock == LockMode::Exclusive) {
                        self.end_txn(t, false);
                        return fail(ctx, ErrorCode::LockWaitTimeout);
                    }
                    let Some(r) = self.current(t, &rk, !req.standalone) else {
                        continue;
                    };
                    if let Some(f) = &spec.filter {
                        if norr_signals::filter_eval::eval_filter(f, &r, &def) != Ok(Some(true)) {
                            continue;
                        }
                    }
                    // Ordered index (toy: first index column, integers only).
                    let ix_val = match spec.index.and_then(|i| def.index(i)) {
                        Some(ix) => {
                            let v = r[ix.columns[0] as usize].as_i64().unwrap_or(i64::MIN);
                            let in_range = spec.range.as_ref().is_none_or(|rg| {
                                let lo = rg.low.values.first().and_then(|b| b.as_i64());
                                let hi = rg.high.values.first().and_then(|b| b.as_i64());
                                lo.is_none_or(|b| v > b || (rg.low.inclusive && v == b))
                                    && hi.is_none_or(|b| v < b || (rg.high.inclusive && v == b))
                            });
                            if !in_range {
                                continue;
                            }
                            v
                        }
                        None => 0,
                    };
                    let r = if spec.projection.is_empty() {
                        r
                    } else {
                        spec.projection.iter().map(|c| r[*c as usize].clone()).collect()
                    };
                    rows.push((ix_val, r));
                }
                if spec.index.is_some() {
                    rows.sort_by_key(|(v, _)| *v);
                    if spec.descending {
                        rows.reverse();
                    }
                }
                let rows: Vec<Vec<Value>> = rows.into_iter().map(|(_, r)| r).collect();
                let batch = spec.batch_rows.clamp(1, MAX_SCAN_BATCH_ROWS) as usize;
                self.scans.insert(
                    (from.node, req.scan_id),
                    Scan { txn: if req.standalone { None } else { Some(t) }, rows, pos: 0, batch },
                );
                self.scan_batch(from, req.txn, req.scan_id, false, ctx);
            }
            Signal::ScanNextReq(req) => {
                if self.failed_apis.contains(&from.node) {
                    return;
                }
                if !self.scans.contains_key(&(from.node, req.scan_id)) {
                    let r =
                        ScanTabRef { txn: req.txn, scan_id: req.scan_id, error: NodeError::new(ErrorCode::NoSuchScan) };
                    ctx.send(from, Signal::ScanTabRef(Box::new(r)));
                    return;
                }
                self.scan_batch(from, req.txn, req.scan_id, req.close, ctx);
            }
            _ => {}
        }
    }

    fn scan_batch(&mut self, to: BlockRef, txn: u64, scan_id: u32, close: bool, ctx: &mut Ctx<'_, Signal>) {
        let key = (to.node, scan_id);
        let Some(s) = self.scans.get_mut(&key) else {
            return;
        };
        let end = if close { s.pos } else { (s.pos + s.batch).min(s.rows.len()) };
        let rows = s.rows[s.pos..end].to_vec();
        s.pos = end;
        let done = close || s.pos >= s.rows.len();
        if done {
            self.scans.remove(&key);
        }
        ctx.send(to, Signal::ScanTabConf(Box::new(ScanTabConf { txn, scan_id, rows, done })));
    }
}

struct Front {
    state: Arc<Mutex<State>>,
}

impl Block<Signal> for Front {
    fn on_signal(&mut self, env: Envelope<Signal>, ctx: &mut Ctx<'_, Signal>) {
        // A poisoned lock means a toy panic already failed the run.
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.on_signal(env, ctx);
    }
}

/// Build the toy data node: TC and DICT fronts over one shared state.
pub fn build_toy_node(node: NodeId, knobs: &Knobs, bug: ToyBug) -> Scheduler<Signal> {
    let state = Arc::new(Mutex::new(State {
        node,
        knobs: knobs.clone(),
        bug,
        tables: BTreeMap::new(),
        rows: BTreeMap::new(),
        locks: BTreeMap::new(),
        txns: BTreeMap::new(),
        timed_out: BTreeSet::new(),
        scans: BTreeMap::new(),
        failed_apis: BTreeSet::new(),
        committed: 0,
        aborted: 0,
        timer_armed: false,
    }));
    let mut s = Scheduler::new(node, knobs.job_buffer_bound);
    s.add_block(block::TC, 0, Box::new(Front { state: state.clone() }));
    s.add_block(block::DICT, 0, Box::new(Front { state }));
    s
}
