//! Model: small transactions of random Insert / Update / Write / Delete / Read
//! (committed read, shared, exclusive) on random keys, plus committed-read
//! scans, checked against a reference model by an omniscient observer.
//!
//! What READ COMMITTED with row locks guarantees, and what is checked:
//! * an operation that succeeds holds its row lock to commit (writes, locking
//!   reads, inserts), so from then on the transaction's own view of the key is
//!   exact: the result of the first successful locking operation must match the
//!   committed state at the moment the reply leaves the node (nobody can commit
//!   the key between the lock grant and that moment), later ones must match the
//!   transaction's own writes;
//! * a committed read, a failed operation (which may take no lock) and every
//!   row of a committed-read scan must match *some* committed state of the key
//!   between the request reaching the node and the reply leaving it;
//! * commit is atomic and happens when the committed TC_KEYCONF leaves the
//!   node (the host orders committed confs first within a step); aborted
//!   transactions leave no trace (a value written only by an aborted
//!   transaction is never seen: values are unique);
//! * at the end the table equals the model.
//!
//! With savepoints (workload model_sp), a transaction may set savepoints and
//! roll back to them between batches: when the answer leaves the node, its
//! writes go back to those at the savepoint, and its exact view of every key
//! it holds a lock on becomes that write, or the committed state (locks stay
//! held after a rollback to a savepoint, so nobody committed the key since).
//!
//! Clients never crash while a commit is outstanding: the outcome would be in
//! doubt and the model could not be kept exact (bank and locks cover that).

use super::*;
use std::collections::BTreeMap;

const V: ColumnId = 1;

#[derive(Debug)]
enum St {
    Idle,
    /// Waiting for the reply of batch `batch` (of `batches`).
    Batch {
        txn: u64,
        batch: u32,
        batches: u32,
        commit: bool,
        /// A point select: committed reads only, in a fresh transaction that
        /// commits with them. It cannot be in doubt (it changes nothing), so
        /// the client may crash while waiting for it.
        point_select: bool,
    },
    Scan {
        scan_id: u32,
        rows: Vec<(i64, i64)>,
        ix: Option<IxScan>,
    },
    /// A locking scan inside transaction `txn`, in place of batch `batch`.
    TxScan {
        txn: u64,
        scan_id: u32,
        batch: u32,
        batches: u32,
    },
    /// The Rollback that ends a transaction whose scan failed.
    EndAfterScanRef {
        txn: u64,
    },
    /// Waiting for the answer to a TC_SAVEPOINTREQ sent before batch `batch`.
    Savepoint {
        txn: u64,
        batch: u32,
        batches: u32,
    },
    /// Online DDL on the table: create or drop a secondary index.
    Ddl {
        req_id: u32,
        create: bool,
    },
}

/// An ordered-index range scan on `v`: bounds (value, inclusive), direction
/// and whether it asked for index order.
#[derive(Debug, Clone, Copy)]
struct IxScan {
    lo: Option<(i64, bool)>,
    hi: Option<(i64, bool)>,
    desc: bool,
    ordered: bool,
}

impl IxScan {
    fn contains(&self, v: i64) -> bool {
        let lo_ok = match self.lo {
            None => true,
            Some((b, incl)) => v > b || (incl && v == b),
        };
        let hi_ok = match self.hi {
            None => true,
            Some((b, incl)) => v < b || (incl && v == b),
        };
        lo_ok && hi_ok
    }
}

#[derive(Debug, Default)]
struct MTxn {
    /// The batch on its way / executing, and the step it reached the node.
    batch: Vec<KeyOp>,
    delivered_step: Option<u64>,
    /// Keys this transaction holds a lock on: its exact view (None = absent).
    view: BTreeMap<i64, Option<i64>>,
    /// Its writes, applied to the model at commit.
    writes: BTreeMap<i64, Option<i64>>,
    /// Savepoints set: (number, `writes` when it was set), oldest first.
    savepoints: Vec<(u32, BTreeMap<i64, Option<i64>>)>,
    last_savepoint: u32,
    /// The TC_SAVEPOINTREQ on its way; applied when its TC_KEYCONF leaves the node.
    savepoint_req: Option<(u32, SavepointAction)>,
    /// The step in which a reply showed that another transaction committed a
    /// key this one held locked (see `Model::lost_lock_explains`): the node
    /// must have aborted it in that step, after the reply left, so nothing of
    /// it may succeed afterwards.
    lost_locks_at: Option<u64>,
}

pub struct Model {
    table: TableId,
    keys: i64,
    partitions: u32,
    st: Vec<St>,
    next_txn: u64,
    next_scan: u32,
    next_val: i64,
    /// Committed state per key.
    model: BTreeMap<i64, i64>,
    /// Committed states per key over time: (step, state after the commit).
    hist: BTreeMap<i64, Vec<(u64, Option<i64>)>>,
    txns: BTreeMap<(NodeId, u64), MTxn>,
    scans: BTreeMap<(NodeId, u32), u64>,
    /// Locking scans inside transactions: (api, scan_id) -> (txn, filter `v >= min`).
    tx_scans: BTreeMap<(NodeId, u32), (u64, Option<i64>)>,
    /// The ordered index on `v`.
    v_index: IndexId,
    pub index_scans_checked: u64,
    /// DDL requests that reached the node (schema errors are legal after one).
    ddl_delivered: u64,
    next_aux: u32,
    ddl_p: f64,
    pub ddl_done: u64,
    pub schema_aborts: u64,
    now_step: u64,
    pub commits: u64,
    pub aborts: u64,
    pub rollbacks: u64,
    pub ops_checked: u64,
    pub exact_checks: u64,
    pub scans_checked: u64,
    /// Keys a committed-read scan returned twice (deleted and re-inserted during the scan).
    pub scan_dups: u64,
    pub locked_scan_rows: u64,
    /// Replies of transactions that lost their locks in the step the reply
    /// left (see `lost_lock_explains`).
    pub lost_lock_replies: u64,
    pub stray_scan_refs: u64,
    last_scan: Vec<u32>,
    idle_scans: IdleScans,
    /// Chance of a savepoint request before a batch (0: model as it always was).
    savepoint_p: f64,
    pub savepoint_rollbacks: u64,
}

fn op_key(op: &KeyOp) -> i64 {
    match &op.key {
        KeyAccess::Primary(v) => v.first().and_then(|v| v.as_i64()).unwrap_or(-1),
        KeyAccess::Unique { .. } => -1,
    }
}

fn op_val(op: &KeyOp) -> Option<i64> {
    op.values.iter().find(|(c, _)| *c == V).and_then(|(_, v)| v.as_i64())
}

impl Model {
    pub fn new(rng: &mut Rng, clients: usize, knobs: &norr_knobs::Knobs) -> Model {
        Model {
            table: 0,
            keys: rng.range(2, 12) as i64,
            partitions: rng.range(1, 4) as u32,
            st: (0..clients).map(|_| St::Idle).collect(),
            next_txn: 1,
            next_scan: 1,
            next_val: 1000,
            model: BTreeMap::new(),
            hist: BTreeMap::new(),
            txns: BTreeMap::new(),
            scans: BTreeMap::new(),
            tx_scans: BTreeMap::new(),
            v_index: 0,
            index_scans_checked: 0,
            ddl_delivered: 0,
            next_aux: 0,
            ddl_p: *rng.pick(&[0.0, 0.0, 0.005, 0.02]),
            ddl_done: 0,
            schema_aborts: 0,
            now_step: 0,
            commits: 0,
            aborts: 0,
            rollbacks: 0,
            ops_checked: 0,
            exact_checks: 0,
            scans_checked: 0,
            scan_dups: 0,
            locked_scan_rows: 0,
            lost_lock_replies: 0,
            stray_scan_refs: 0,
            last_scan: vec![0; clients],
            idle_scans: IdleScans::new(clients, knobs),
            savepoint_p: 0.0,
            savepoint_rollbacks: 0,
        }
    }

    /// The model workload with savepoints (see the module doc).
    pub fn with_savepoints(rng: &mut Rng, clients: usize, knobs: &norr_knobs::Knobs) -> Model {
        Model { savepoint_p: 0.3, ..Model::new(rng, clients, knobs) }
    }

    /// Apply a savepoint request of `key` whose answer left the node.
    fn apply_savepoint(&mut self, key: (NodeId, u64)) -> Result<(), String> {
        let Model { txns, model, savepoint_rollbacks, .. } = self;
        let Some(t) = txns.get_mut(&key) else {
            return Ok(());
        };
        let Some((n, action)) = t.savepoint_req.take() else {
            return Ok(());
        };
        match action {
            SavepointAction::Set => t.savepoints.push((n, t.writes.clone())),
            SavepointAction::RollbackTo => {
                let i = t
                    .savepoints
                    .iter()
                    .position(|(m, _)| *m == n)
                    .ok_or_else(|| format!("model: txn {key:?} rolled back to unknown savepoint {n}"))?;
                t.savepoints.truncate(i + 1);
                t.writes = t.savepoints[i].1.clone();
                for (k, v) in t.view.iter_mut() {
                    *v = match t.writes.get(k) {
                        Some(w) => *w,
                        None => model.get(k).copied(),
                    };
                }
                *savepoint_rollbacks += 1;
            }
        }
        Ok(())
    }

    fn committed(&self, k: i64) -> Option<i64> {
        self.model.get(&k).copied()
    }

    /// Was `state` the committed state of `k` at some moment of steps `from..=to`?
    fn seen_in_window(&self, k: i64, state: Option<i64>, from: u64) -> bool {
        let Some(h) = self.hist.get(&k) else {
            return state.is_none();
        };
        // State at the start of step `from`: the last change before it.
        let before = h.iter().rev().find(|(s, _)| *s < from).map(|(_, st)| *st).unwrap_or(None);
        before == state || h.iter().any(|(s, st)| *s >= from && *st == state)
    }

    /// A reply that held `k` locked observed a state other than the committed
    /// one: is that explained by the transaction losing its locks in this very
    /// step? The host shows a step's commits before its other replies
    /// (`Host::order_emitted`), which is right for replies that waited for
    /// those commits. But in one step the node may also send a reply under
    /// lock, then abort that transaction (a lock-wait time-out of another of
    /// its partition scans, found with the client not waiting: it learns of the
    /// abort from its next request), and then commit another transaction that
    /// waited for the released lock. So: `k` was committed in this step, and
    /// some state of `k` from just before this step on satisfies `pred`. The
    /// caller then marks the transaction, which must never succeed again
    /// (`MTxn::lost_locks_at`). Seed model:9000820 (30,000 steps) found it.
    fn lost_lock_explains(&self, k: i64, pred: impl Fn(Option<i64>) -> bool) -> bool {
        let changed_now = self.hist.get(&k).and_then(|h| h.last()).is_some_and(|(s, _)| *s == self.now_step);
        changed_now && self.any_in_window(k, self.now_step, pred)
    }

    /// A transaction that lost its locks in an earlier reply's step answered
    /// with success: the node let it go on without its locks.
    fn check_not_lost(key: (NodeId, u64), t: &MTxn, what: &str) -> Result<(), String> {
        match t.lost_locks_at {
            Some(step) => Err(format!(
                "model: txn {key:?} lost its row locks in step {step} (another transaction committed a key it had locked), yet {what} came after"
            )),
            None => Ok(()),
        }
    }

    /// A schema error is legal once a DDL reached the node.
    fn ddl_excuses(&self, e: &NodeError) -> bool {
        self.ddl_delivered > 0 && e.code == ErrorCode::SchemaVersionMismatch
    }

    /// Some committed state of `k` since step `from` satisfies `pred`.
    fn any_in_window(&self, k: i64, from: u64, pred: impl Fn(Option<i64>) -> bool) -> bool {
        let Some(h) = self.hist.get(&k) else {
            return pred(None);
        };
        let before = h.iter().rev().find(|(s, _)| *s < from).map(|(_, st)| *st).unwrap_or(None);
        pred(before) || h.iter().any(|(s, st)| *s >= from && pred(*st))
    }

    /// A committed-read ordered-index range scan: index order (if asked for),
    /// bounds, every returned row a real state in the window, every key not
    /// returned out of the range (or absent) at some moment of the window.
    fn check_index_scan(&mut self, rows: &[(i64, i64)], ix: IxScan, from: u64) -> Result<(), String> {
        for w in rows.windows(2).filter(|_| ix.ordered) {
            let ordered = if ix.desc { w[0].1 >= w[1].1 } else { w[0].1 <= w[1].1 };
            if !ordered {
                return Err(format!(
                    "model: index scan {ix:?} out of order: {:?} then {:?} (rows {rows:?})",
                    w[0], w[1]
                ));
            }
        }
        let mut seen = BTreeMap::new();
        for &(k, v) in rows {
            if !ix.contains(v) {
                return Err(format!("model: index scan {ix:?} returned key {k} with v = {v} outside the range"));
            }
            self.window_err("index scan", k, Some(v), from)?;
            if seen.insert(k, v).is_some() {
                // A row whose value changed during the scan may be met again
                // further along the index.
                let changed = self.hist.get(&k).is_some_and(|h| h.iter().any(|(s, _)| *s >= from));
                if !changed {
                    return Err(format!("model: index scan returned unchanged key {k} twice (rows {rows:?})"));
                }
                self.scan_dups += 1;
            }
        }
        for k in 0..self.keys {
            // A row whose value changed during the scan may have moved from the
            // part of the index not yet scanned to the part already scanned:
            // READ COMMITTED allows missing it. An unchanged row in range must be there.
            let changed = self.hist.get(&k).is_some_and(|h| h.iter().any(|(s, _)| *s >= from));
            if !seen.contains_key(&k)
                && !changed
                && !self.any_in_window(k, from, |st| st.is_none_or(|v| !ix.contains(v)))
            {
                return Err(format!(
                    "model: index scan {ix:?} missed key {k}, in range for the whole scan (from step {from}); history {:?}",
                    self.hist.get(&k)
                ));
            }
        }
        self.index_scans_checked += 1;
        Ok(())
    }

    /// Was the key present at some moment since step `from`?
    fn present_in_window(&self, k: i64, from: u64) -> bool {
        let Some(h) = self.hist.get(&k) else {
            return false;
        };
        let before = h.iter().rev().find(|(s, _)| *s < from).map(|(_, st)| *st).unwrap_or(None);
        before.is_some() || h.iter().any(|(s, st)| *s >= from && st.is_some())
    }

    fn window_err(&self, what: &str, k: i64, state: Option<i64>, from: u64) -> Result<(), String> {
        if self.seen_in_window(k, state, from) {
            Ok(())
        } else {
            Err(format!(
                "model: {what} on key {k} observed {state:?}, never the committed state between step {from} and {}; history {:?}",
                self.now_step,
                self.hist.get(&k)
            ))
        }
    }

    fn idle(&mut self, c: &mut ClientCtx<'_>) {
        self.st[c.client] = St::Idle;
        let t = c.rng.range(0, 1_000_000);
        c.wake_after(t);
    }

    fn random_batch(&mut self, c: &mut ClientCtx<'_>) -> Vec<KeyOp> {
        let n = c.rng.range(1, 3);
        let mut ops = Vec::new();
        for _ in 0..n {
            let k = vec![Value::Int(c.rng.below(self.keys as u64) as i64)];
            self.next_val += 1;
            let val = vec![(V, Value::Int(self.next_val))];
            let roll = c.rng.below(100);
            let mut op = if roll < 30 {
                let mut op = KeyOp::read(self.table, k);
                op.lock = *c.rng.pick(&[LockMode::CommittedRead, LockMode::Shared, LockMode::Exclusive]);
                op.projection = vec![V];
                op
            } else if roll < 50 {
                KeyOp::insert(self.table, k, val)
            } else if roll < 70 {
                KeyOp::update(self.table, k, val)
            } else if roll < 85 {
                KeyOp::write(self.table, k, val)
            } else {
                KeyOp::delete(self.table, k)
            };
            op.abort_on_error = c.rng.chance(0.3);
            ops.push(op);
        }
        ops
    }

    /// Check the results of a batch that executed (TC_KEYCONF) and update the
    /// transaction's view.
    fn check_batch(&mut self, key: (NodeId, u64), results: &[OpResult]) -> Result<(), String> {
        let Some(mut t) = self.txns.remove(&key) else {
            return Err(format!("model: TC_KEYCONF for unknown transaction {key:?}"));
        };
        let from = t
            .delivered_step
            .ok_or_else(|| format!("model: reply to txn {key:?} before its request reached the node"))?;
        if results.len() != t.batch.len() {
            return Err(format!("model: {} results for {} operations", results.len(), t.batch.len()));
        }
        Self::check_not_lost(key, &t, "a TC_KEYCONF")?;
        let batch = std::mem::take(&mut t.batch);
        let mut lost = false;
        for (op, res) in batch.iter().zip(results) {
            self.ops_checked += 1;
            let k = op_key(op);
            let mine = t.view.get(&k).copied();
            // Ok(true): a mismatch the loss of the lock in this step explains.
            let exact = |this: &Model, what: &str, got: Option<i64>| -> Result<bool, String> {
                let expect = match mine {
                    Some(v) => v,
                    None => this.committed(k),
                };
                if got != expect {
                    if mine.is_none() && this.lost_lock_explains(k, |st| st == got) {
                        return Ok(true);
                    }
                    return Err(format!(
                        "model: txn {key:?} {what} on key {k}: observed {got:?}, expected {expect:?} ({}); history {:?}",
                        if mine.is_some() { "own locked view" } else { "committed state, lock held" },
                        this.hist.get(&k)
                    ));
                }
                Ok(false)
            };
            let soft_err = |res: &OpResult| -> Option<ErrorCode> {
                match res {
                    OpResult::Err(e) => Some(e.code),
                    _ => None,
                }
            };
            if let Some(code) = soft_err(res) {
                if op.abort_on_error {
                    return Err(format!("model: op with abort_on_error returned an error in its result: {code:?}"));
                }
                let state = match (op.kind, code) {
                    (OpKind::Insert, ErrorCode::DuplicateKey) => Some(0),
                    (OpKind::Read | OpKind::Update | OpKind::Delete, ErrorCode::NoSuchRow) => None,
                    _ => return Err(format!("model: {:?} on key {k} failed with unexpected {code:?}", op.kind)),
                };
                // Failed ops: exact if the key is locked by us, else some committed state in the window.
                let present = state.is_some();
                match mine {
                    Some(v) => {
                        self.exact_checks += 1;
                        if v.is_some() != present {
                            return Err(format!(
                                "model: txn {key:?} {:?} on locked key {k} failed with {code:?}, own view {v:?}",
                                op.kind
                            ));
                        }
                    }
                    None => {
                        let ok =
                            if present { self.present_in_window(k, from) } else { self.seen_in_window(k, None, from) };
                        if !ok {
                            return Err(format!(
                                "model: {:?} on key {k} failed with {code:?}, but the key was never {} between step {from} and {}; history {:?}",
                                op.kind,
                                if present { "present" } else { "absent" },
                                self.now_step,
                                self.hist.get(&k)
                            ));
                        }
                    }
                }
                continue;
            }
            let OpResult::Ok(row) = res else { unreachable!() };
            match op.kind {
                OpKind::Read => {
                    let Some(row) = row else {
                        return Err(format!("model: read of key {k} returned no row"));
                    };
                    let got = Some(int_of(row.first().ok_or("model: empty row")?)?);
                    if op.lock == LockMode::CommittedRead {
                        // Own uncommitted write or a committed state in the window.
                        if mine != Some(got) {
                            self.window_err("committed read", k, got, from)?;
                        }
                    } else {
                        self.exact_checks += 1;
                        lost |= exact(self, "locking read", got)?;
                        t.view.insert(k, got);
                    }
                }
                OpKind::Insert => {
                    self.exact_checks += 1;
                    lost |= exact(self, "insert (row must be absent)", None)?;
                    t.view.insert(k, op_val(op));
                    t.writes.insert(k, op_val(op));
                }
                OpKind::Update | OpKind::Delete => {
                    let cur = match mine {
                        Some(v) => v,
                        None => self.committed(k),
                    };
                    self.exact_checks += 1;
                    if cur.is_none() && mine.is_none() && self.lost_lock_explains(k, |st| st.is_some()) {
                        lost = true;
                    } else if cur.is_none() {
                        return Err(format!(
                            "model: txn {key:?} {:?} on key {k} succeeded, but the row is absent ({}); history {:?}",
                            op.kind,
                            if mine.is_some() { "own locked view" } else { "committed state, lock held" },
                            self.hist.get(&k)
                        ));
                    }
                    let new = if op.kind == OpKind::Update { op_val(op) } else { None };
                    t.view.insert(k, new);
                    t.writes.insert(k, new);
                }
                OpKind::Write => {
                    t.view.insert(k, op_val(op));
                    t.writes.insert(k, op_val(op));
                }
            }
            if row.is_some() && op.kind != OpKind::Read {
                return Err(format!("model: {:?} returned a row", op.kind));
            }
        }
        if lost {
            self.lost_lock_replies += 1;
            t.lost_locks_at = Some(self.now_step);
        }
        self.txns.insert(key, t);
        Ok(())
    }

    fn apply_commit(&mut self, key: (NodeId, u64)) -> Result<(), String> {
        let t = self.txns.remove(&key).ok_or_else(|| format!("model: commit of unknown txn {key:?}"))?;
        for (k, v) in t.writes {
            match v {
                Some(v) => self.model.insert(k, v),
                None => self.model.remove(&k),
            };
            self.hist.entry(k).or_default().push((self.now_step, v));
        }
        Ok(())
    }
}

impl Workload for Model {
    fn name(&self) -> &'static str {
        "model"
    }

    fn setup(&mut self, host: &mut Host) -> Result<(), String> {
        let mut def = int_table("kv", &["v"], true, self.partitions);
        def.indexes.push(IndexDef {
            id: 0,
            name: "v_idx".into(),
            columns: vec![V],
            unique: false,
            kind: IndexKind::Ordered,
        });
        let def = create_table(host, def)?;
        self.table = def.id;
        self.v_index = def.index_by_name("v_idx").ok_or("model: created table lost its index")?.id;
        let mut ops = Vec::new();
        for k in 0..self.keys {
            if k % 2 == 0 {
                self.next_val += 1;
                ops.push(KeyOp::insert(self.table, vec![Value::Int(k)], vec![(V, Value::Int(self.next_val))]));
                self.model.insert(k, self.next_val);
                self.hist.entry(k).or_default().push((0, Some(self.next_val)));
            }
        }
        for (i, op) in ops.into_iter().enumerate() {
            admin_commit(host, 1 + i as u64, vec![op])?;
        }
        Ok(())
    }

    fn on_start(&mut self, c: &mut ClientCtx<'_>) {
        self.st[c.client] = St::Idle;
        let t = c.rng.range(0, 500_000);
        c.wake_after(t);
    }

    fn can_crash(&self, client: usize) -> bool {
        !matches!(self.st[client], St::Batch { commit: true, point_select: false, .. })
    }

    fn on_wake(&mut self, c: &mut ClientCtx<'_>) -> Result<(), String> {
        if !matches!(self.st[c.client], St::Idle) || c.stopping {
            return Ok(());
        }
        if c.rng.chance(self.ddl_p) {
            // Online DDL under running transactions: add or drop an index on v.
            self.next_aux += 1;
            let req_id = self.next_aux;
            let create = c.rng.chance(0.5);
            let name = format!("aux{}", c.rng.below(2));
            let op = if create {
                DictOp::CreateIndex {
                    table: "kv".into(),
                    index: IndexDef { id: 0, name, columns: vec![V], unique: false, kind: IndexKind::Ordered },
                }
            } else {
                DictOp::DropIndex { table: "kv".into(), index: name }
            };
            c.send(Signal::DictReq(Box::new(DictReq { req_id, op })));
            self.st[c.client] = St::Ddl { req_id, create };
            return Ok(());
        }
        if c.rng.chance(0.12) {
            self.next_scan += 1;
            let scan_id = self.next_scan;
            let mut spec = ScanSpec::full(self.table);
            spec.projection = vec![0, V];
            spec.batch_rows = c.rng.range(1, self.keys as u64 + 1) as u32;
            let ix = if c.rng.chance(0.5) {
                let top = self.next_val.max(1001) as u64;
                let bound = |rng: &mut Rng| {
                    if rng.chance(0.3) {
                        None
                    } else {
                        Some((rng.range(1000, top) as i64, rng.chance(0.5)))
                    }
                };
                let lo = bound(c.rng);
                let hi = bound(c.rng);
                let desc = c.rng.chance(0.5);
                let ix = IxScan { lo, hi, desc, ordered: c.rng.chance(0.7) };
                let b = |x: Option<(i64, bool)>| match x {
                    None => Bound::unbounded(),
                    Some((v, true)) => Bound::inclusive(vec![Value::Int(v)]),
                    Some((v, false)) => Bound::exclusive(vec![Value::Int(v)]),
                };
                spec.index = Some(self.v_index);
                spec.range = Some(ScanRange { low: b(lo), high: b(hi) });
                spec.descending = ix.desc;
                spec.ordered = ix.ordered;
                Some(ix)
            } else {
                None
            };
            c.send(Signal::ScanTabReq(Box::new(ScanTabReq { txn: 0, scan_id, standalone: true, spec })));
            self.st[c.client] = St::Scan { scan_id, rows: Vec::new(), ix };
            self.last_scan[c.client] = scan_id;
            return Ok(());
        }
        self.next_txn += 1;
        let txn = self.next_txn;
        if c.rng.chance(0.15) {
            self.point_select(c, txn);
            return Ok(());
        }
        let batches = if self.savepoint_p > 0.0 { c.rng.range(1, 6) } else { c.rng.range(1, 3) } as u32;
        self.send_batch(c, txn, 1, batches);
        Ok(())
    }

    fn on_reply(&mut self, c: &mut ClientCtx<'_>, sig: Signal) -> Result<(), String> {
        if let Signal::ScanTabRef(r) = &sig {
            // The second answer to a scan the node already failed on its own
            // (its unsolicited SCAN_TABREF crossed our SCAN_NEXTREQ).
            let open = matches!(&self.st[c.client], St::Scan { scan_id, .. } | St::TxScan { scan_id, .. } if *scan_id == r.scan_id);
            if !open && r.scan_id <= self.last_scan[c.client] && r.error.code == ErrorCode::NoSuchScan {
                // The node used to send an unsolicited SCAN_TABREF when a scan
                // failed between batches; the client's SCAN_NEXTREQ then got a
                // second answer (NoSuchScan). TC now answers only when asked.
                self.stray_scan_refs += 1;
                return Err(format!(
                    "model: second answer to scan {} (SCAN_TABREF {}) after the client saw it end: TC answered unasked",
                    r.scan_id, r.error
                ));
            }
        }
        let st = std::mem::replace(&mut self.st[c.client], St::Idle);
        match (st, sig) {
            (St::Batch { txn, .. }, Signal::TcKeyRef(r)) if r.txn == txn => {
                if is_temporary(&r.error) {
                    self.aborts += 1;
                } else {
                    self.rollbacks += 1;
                }
                self.idle(c);
            }
            (St::Savepoint { txn, .. }, Signal::TcKeyRef(r)) if r.txn == txn => {
                if is_temporary(&r.error) {
                    self.aborts += 1;
                } else {
                    self.rollbacks += 1;
                }
                self.idle(c);
            }
            (St::Savepoint { txn, batch, batches }, Signal::TcKeyConf(conf)) if conf.txn == txn => {
                if conf.outcome != TxnOutcome::Open || !conf.results.is_empty() {
                    return Err(format!("model: savepoint request answered {:?}", conf));
                }
                self.send_batch(c, txn, batch, batches);
            }
            (St::Batch { txn, batch, batches, commit, .. }, Signal::TcKeyConf(conf)) if conf.txn == txn => {
                if commit {
                    match conf.outcome {
                        TxnOutcome::Committed | TxnOutcome::CommittedNotOnDisk => self.commits += 1,
                        TxnOutcome::RolledBack => self.rollbacks += 1,
                        TxnOutcome::Open => return Err("model: commit answered Open".into()),
                    }
                    self.idle(c);
                } else {
                    if conf.outcome != TxnOutcome::Open {
                        return Err(format!("model: NoCommit batch answered {:?}", conf.outcome));
                    }
                    self.send_batch(c, txn, batch + 1, batches);
                }
            }
            (St::TxScan { txn, scan_id, batch, batches }, Signal::ScanTabConf(conf)) if conf.scan_id == scan_id => {
                self.idle_scans.replied(c);
                if conf.done {
                    self.send_batch(c, txn, batch + 1, batches);
                } else {
                    let close = c.rng.chance(0.1);
                    c.send(Signal::ScanNextReq(ScanNextReq { txn, scan_id, close }));
                    self.st[c.client] = St::TxScan { txn, scan_id, batch, batches };
                }
            }
            (St::TxScan { txn, scan_id, .. }, Signal::ScanTabRef(r)) if r.scan_id == scan_id => {
                if !is_temporary(&r.error) && !self.ddl_excuses(&r.error) {
                    self.idle_scans.judge(c, &r.error).map_err(|e| format!("model: locking {e}"))?;
                }
                self.aborts += 1;
                // The transaction is aborted (or about to be): make sure.
                let t = self.txns.entry((c.api, txn)).or_default();
                t.batch = Vec::new();
                t.delivered_step = None;
                c.send(tc_key(txn, ExecType::Rollback, vec![]));
                self.st[c.client] = St::EndAfterScanRef { txn };
            }
            (St::EndAfterScanRef { txn }, Signal::TcKeyConf(conf))
                if conf.txn == txn && conf.outcome == TxnOutcome::RolledBack =>
            {
                self.idle(c);
            }
            (St::EndAfterScanRef { txn }, Signal::TcKeyRef(r)) if r.txn == txn && is_temporary(&r.error) => {
                self.idle(c);
            }
            (St::Scan { scan_id, mut rows, ix }, Signal::ScanTabConf(conf)) if conf.scan_id == scan_id => {
                self.idle_scans.replied(c);
                for r in &conf.rows {
                    if r.len() != 2 {
                        return Err(format!("model: scan row {r:?}"));
                    }
                    rows.push((int_of(&r[0])?, int_of(&r[1])?));
                }
                if conf.done {
                    let from = self
                        .scans
                        .remove(&(c.api, scan_id))
                        .ok_or("model: scan reply before its request reached the node")?;
                    if let Some(ix) = ix {
                        self.check_index_scan(&rows, ix, from)?;
                    } else {
                        let mut got = BTreeMap::new();
                        for &(k, v) in &rows {
                            if let Some(prev) = got.insert(k, v) {
                                // Allowed only if the row was deleted and inserted
                                // again while the scan ran (a new row, met again
                                // further on); both versions must be real states.
                                let deleted = self
                                    .hist
                                    .get(&k)
                                    .is_some_and(|h| h.iter().any(|(s, st)| *s >= from && st.is_none()));
                                if !deleted {
                                    return Err(format!(
                                        "model: committed-read scan returned key {k} twice ({prev} and {v}) though it was never deleted during the scan; history {:?}",
                                        self.hist.get(&k)
                                    ));
                                }
                                self.window_err("committed-read scan (first copy)", k, Some(prev), from)?;
                                self.scan_dups += 1;
                            }
                        }
                        for k in 0..self.keys {
                            self.window_err("committed-read scan", k, got.get(&k).copied(), from)?;
                        }
                    }
                    let got: BTreeMap<i64, i64> = rows.iter().copied().collect();
                    if let Some(k) = got.keys().find(|k| **k < 0 || **k >= self.keys) {
                        return Err(format!("model: scan returned key {k} that was never written"));
                    }
                    self.scans_checked += 1;
                    self.idle(c);
                } else {
                    c.send(Signal::ScanNextReq(ScanNextReq { txn: 0, scan_id, close: false }));
                    self.st[c.client] = St::Scan { scan_id, rows, ix };
                }
            }
            (St::Scan { scan_id, .. }, Signal::ScanTabRef(r)) if r.scan_id == scan_id => {
                if !is_temporary(&r.error) && !self.ddl_excuses(&r.error) {
                    self.idle_scans.judge(c, &r.error).map_err(|e| format!("model: committed-read {e}"))?;
                }
                self.scans.remove(&(c.api, scan_id));
                self.idle(c);
            }
            (St::Ddl { req_id, .. }, Signal::DictConf(conf)) if conf.req_id == req_id => {
                self.ddl_done += 1;
                self.idle(c);
            }
            (St::Ddl { req_id, create }, Signal::DictRef(r)) if r.req_id == req_id => {
                let fine = if create {
                    matches!(r.error.code, ErrorCode::IndexExists)
                } else {
                    matches!(r.error.code, ErrorCode::NoSuchIndex)
                };
                if !fine && !is_temporary(&r.error) {
                    return Err(format!(
                        "model: {} index failed with {}",
                        if create { "create" } else { "drop" },
                        r.error
                    ));
                }
                self.idle(c);
            }
            (st, sig) => return Err(format!("model: client {} got {sig:?} in {st:?}", c.client)),
        }
        Ok(())
    }

    fn on_crash(&mut self, client: usize, _api: NodeId) {
        self.st[client] = St::Idle;
    }

    fn observe_request(&mut self, step: u64, api: NodeId, sig: &Signal) -> Result<(), String> {
        self.now_step = step;
        match sig {
            Signal::DictReq(_) => self.ddl_delivered += 1,
            Signal::TcKeyReq(r) => {
                if let Some(t) = self.txns.get_mut(&(api, r.txn)) {
                    t.delivered_step = Some(step);
                }
            }
            Signal::TcSavepointReq(r) => {
                if let Some(t) = self.txns.get_mut(&(api, r.txn)) {
                    t.delivered_step = Some(step);
                }
            }
            Signal::ScanTabReq(r) => {
                self.scans.insert((api, r.scan_id), step);
            }
            _ => {}
        }
        Ok(())
    }

    fn observe_emitted(&mut self, step: u64, api: NodeId, sig: &Signal) -> Result<(), String> {
        self.now_step = step;
        match sig {
            Signal::TcKeyConf(conf) => {
                let key = (api, conf.txn);
                match conf.outcome {
                    TxnOutcome::Open => {
                        self.check_batch(key, &conf.results)?;
                        self.apply_savepoint(key)?;
                    }
                    TxnOutcome::Committed | TxnOutcome::CommittedNotOnDisk => {
                        self.check_batch(key, &conf.results)?;
                        self.apply_commit(key)?;
                    }
                    TxnOutcome::RolledBack => {
                        self.txns.remove(&key);
                    }
                }
            }
            Signal::ScanTabConf(conf) if self.tx_scans.contains_key(&(api, conf.scan_id)) => {
                let (txn, min) = self.tx_scans[&(api, conf.scan_id)];
                if conf.done {
                    self.tx_scans.remove(&(api, conf.scan_id));
                }
                let key = (api, txn);
                let Some(mut t) = self.txns.remove(&key) else {
                    return Err(format!("model: locking scan rows for unknown transaction {key:?}"));
                };
                Self::check_not_lost(key, &t, "a SCAN_TABCONF of its locking scan")?;
                let mut lost = false;
                for r in &conf.rows {
                    let (k, v) = (
                        int_of(r.first().ok_or("model: empty scan row")?)?,
                        int_of(r.get(1).ok_or("model: short scan row")?)?,
                    );
                    if let Some(m) = min {
                        if v < m {
                            return Err(format!(
                                "model: locking scan with filter v >= {m} returned key {k} with v = {v}"
                            ));
                        }
                    }
                    self.locked_scan_rows += 1;
                    match t.view.get(&k).copied() {
                        // Own writes: seeing them or the committed state are both defensible.
                        Some(own) if own == Some(v) || self.committed(k) == Some(v) => {}
                        Some(own) => {
                            return Err(format!(
                            "model: txn {key:?} locking scan returned key {k} = {v}, own view {own:?}, committed {:?}",
                            self.committed(k)
                        ))
                        }
                        None => {
                            self.exact_checks += 1;
                            if self.committed(k) != Some(v) && self.lost_lock_explains(k, |st| st == Some(v)) {
                                lost = true;
                                continue;
                            }
                            if self.committed(k) != Some(v) {
                                return Err(format!(
                                    "model: txn {key:?} locking scan returned key {k} = {v} with the row locked, committed state is {:?}; history {:?}",
                                    self.committed(k),
                                    self.hist.get(&k)
                                ));
                            }
                            t.view.insert(k, Some(v));
                        }
                    }
                }
                if lost {
                    self.lost_lock_replies += 1;
                    t.lost_locks_at = Some(self.now_step);
                }
                self.txns.insert(key, t);
            }
            Signal::ScanTabRef(r) if self.tx_scans.contains_key(&(api, r.scan_id)) => {
                self.tx_scans.remove(&(api, r.scan_id));
            }
            Signal::TcKeyRef(r) => {
                let key = (api, r.txn);
                let Some(t) = self.txns.remove(&key) else {
                    return Err(format!("model: TC_KEYREF for unknown transaction {key:?}"));
                };
                if r.error.code == ErrorCode::SchemaVersionMismatch && self.ddl_delivered > 0 {
                    // Doomed by a concurrent DDL: aborted, no trace.
                    self.schema_aborts += 1;
                } else if !is_temporary(&r.error) {
                    // The failing op must be one that can fail that way.
                    let Some(i) = r.op_index else {
                        return Err(format!("model: non-retriable abort {} without an operation index", r.error));
                    };
                    let Some(op) = t.batch.get(i as usize) else {
                        return Err(format!("model: TC_KEYREF op_index {i} out of range"));
                    };
                    let ok = matches!(
                        (op.kind, r.error.code),
                        (OpKind::Insert, ErrorCode::DuplicateKey)
                            | (OpKind::Read | OpKind::Update | OpKind::Delete, ErrorCode::NoSuchRow)
                    );
                    if !ok || !op.abort_on_error {
                        return Err(format!(
                            "model: {:?} (abort_on_error={}) aborted the txn with {}",
                            op.kind, op.abort_on_error, r.error
                        ));
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn is_idle(&self, client: usize) -> bool {
        matches!(self.st[client], St::Idle)
    }

    fn finish(&mut self, host: &mut Host) -> Result<(), String> {
        let rows = admin_scan(host, self.table, 1)?;
        let mut got = BTreeMap::new();
        for r in rows {
            let (k, v) = (int_of(&r[0])?, int_of(&r[1])?);
            if got.insert(k, v).is_some() {
                return Err(format!("model: final scan returned key {k} twice"));
            }
        }
        if got != self.model {
            return Err(format!("model: final table {got:?} differs from the model {:?}", self.model));
        }
        for k in 0..self.keys {
            let r = admin_read(host, 2_000_000 + k as u64, self.table, k)?;
            let v = match r {
                Some(row) => Some(int_of(&row[1])?),
                None => None,
            };
            if v != self.committed(k) {
                return Err(format!("model: final read of key {k} = {v:?}, model {:?}", self.committed(k)));
            }
        }
        Ok(())
    }

    fn summary(&self) -> String {
        format!(
            "model: keys={} commits={} rollbacks={} aborts={} ops_checked={} exact_checks={} scans_checked={} index_scans_checked={} ddl_done={} schema_aborts={} scan_dups={} locked_scan_rows={} lost_lock_replies={} stray_scan_refs={} idle_scans_closed={} savepoint_rollbacks={}",
            self.keys, self.commits, self.rollbacks, self.aborts, self.ops_checked, self.exact_checks, self.scans_checked, self.index_scans_checked, self.ddl_done, self.schema_aborts, self.scan_dups, self.locked_scan_rows, self.lost_lock_replies, self.stray_scan_refs, self.idle_scans.closed_idle, self.savepoint_rollbacks
        )
    }
}

impl Model {
    /// A transaction of one batch of committed reads that commits (sysbench's
    /// point select): TC and LQH run it as simple reads, without a commit
    /// round to LQH and without leaving state behind.
    fn point_select(&mut self, c: &mut ClientCtx<'_>, txn: u64) {
        let n = c.rng.range(1, 4);
        let ops: Vec<KeyOp> = (0..n)
            .map(|_| {
                let mut op = KeyOp::read(self.table, vec![Value::Int(c.rng.below(self.keys as u64) as i64)]);
                op.projection = vec![V];
                op.abort_on_error = c.rng.chance(0.3);
                op
            })
            .collect();
        let t = self.txns.entry((c.api, txn)).or_default();
        t.batch = ops.clone();
        t.delivered_step = None;
        c.send(tc_key(txn, ExecType::Commit, ops));
        self.st[c.client] = St::Batch { txn, batch: 1, batches: 1, commit: true, point_select: true };
    }

    fn send_batch(&mut self, c: &mut ClientCtx<'_>, txn: u64, batch: u32, batches: u32) {
        let last = batch >= batches || c.stopping;
        if !last && self.savepoint_p > 0.0 && c.rng.chance(self.savepoint_p) {
            // Set a savepoint, or roll back to one, before this batch.
            let t = self.txns.entry((c.api, txn)).or_default();
            let back = !t.savepoints.is_empty() && c.rng.chance(0.5);
            let (n, action) = if back {
                (t.savepoints[c.rng.below(t.savepoints.len() as u64) as usize].0, SavepointAction::RollbackTo)
            } else {
                t.last_savepoint += 1;
                (t.last_savepoint, SavepointAction::Set)
            };
            t.batch = Vec::new();
            t.delivered_step = None;
            t.savepoint_req = Some((n, action));
            c.send(Signal::TcSavepointReq(Box::new(TcSavepointReq { txn, savepoint: n, action })));
            self.st[c.client] = St::Savepoint { txn, batch, batches };
            return;
        }
        if !last && c.rng.chance(0.15) {
            // A locking scan in place of this batch, maybe with a pushed-down filter.
            self.next_scan += 1;
            let scan_id = self.next_scan;
            let mut spec = ScanSpec::full(self.table);
            spec.projection = vec![0, V];
            spec.batch_rows = c.rng.range(1, self.keys as u64 + 1) as u32;
            spec.lock = if c.rng.chance(0.5) { LockMode::Shared } else { LockMode::Exclusive };
            let min =
                if c.rng.chance(0.5) { Some(c.rng.range(1000, self.next_val.max(1001) as u64) as i64) } else { None };
            if c.rng.chance(0.5) {
                // Locking ordered-index scan: the range plays the filter's part.
                spec.index = Some(self.v_index);
                spec.range = Some(ScanRange {
                    low: min.map_or(Bound::unbounded(), |m| Bound::inclusive(vec![Value::Int(m)])),
                    high: Bound::unbounded(),
                });
                spec.descending = c.rng.chance(0.5);
                spec.ordered = c.rng.chance(0.5);
            } else {
                spec.filter = min.map(|m| Filter::Cmp { col: V, op: CmpOp::Ge, value: Value::Int(m) });
            }
            self.txns.entry((c.api, txn)).or_default().batch = Vec::new();
            self.tx_scans.insert((c.api, scan_id), (txn, min));
            c.send(Signal::ScanTabReq(Box::new(ScanTabReq { txn, scan_id, standalone: false, spec })));
            self.st[c.client] = St::TxScan { txn, scan_id, batch, batches };
            self.last_scan[c.client] = scan_id;
            return;
        }
        let (exec, ops) = if !last {
            (ExecType::NoCommit, self.random_batch(c))
        } else if c.rng.chance(0.1) {
            (ExecType::Rollback, vec![])
        } else if c.rng.chance(0.2) {
            (ExecType::Commit, vec![])
        } else {
            (ExecType::Commit, self.random_batch(c))
        };
        let t = self.txns.entry((c.api, txn)).or_default();
        t.batch = ops.clone();
        t.delivered_step = None;
        c.send(tc_key(txn, exec, ops));
        self.st[c.client] = St::Batch { txn, batch, batches, commit: last, point_select: false };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Key 8 is 100; transaction (1, 1) scans it under a shared lock;
    /// transaction (2, 2) updates it to 200 and commits.
    fn model_with_locking_scan() -> Model {
        let mut m = Model::new(&mut Rng::new(1), 2, &norr_knobs::Knobs::default());
        m.keys = 10;
        m.model.insert(8, 100);
        m.hist.insert(8, vec![(0, Some(100))]);
        m.txns.insert((1, 1), MTxn::default());
        m.tx_scans.insert((1, 5), (1, None));
        let update = KeyOp::update(m.table, vec![Value::Int(8)], vec![(V, Value::Int(200))]);
        m.txns.insert((2, 2), MTxn { batch: vec![update], delivered_step: Some(9), ..MTxn::default() });
        m
    }

    fn commit_of_2(m: &mut Model, step: u64) -> Result<(), String> {
        let conf = TcKeyConf { txn: 2, outcome: TxnOutcome::Committed, results: vec![OpResult::Ok(None)], gci: 1 };
        m.observe_emitted(step, 2, &Signal::TcKeyConf(Box::new(conf)))
    }

    fn scan_rows(m: &mut Model, step: u64, rows: Vec<(i64, i64)>, done: bool) -> Result<(), String> {
        let rows = rows.into_iter().map(|(k, v)| vec![Value::Int(k), Value::Int(v)]).collect();
        m.observe_emitted(step, 1, &Signal::ScanTabConf(Box::new(ScanTabConf { txn: 1, scan_id: 5, rows, done })))
    }

    /// Seed model:9000820: in one step the scan's rows leave under lock, its
    /// transaction is aborted, and the update that waited commits; the host
    /// shows the commit first. The old value is accepted, and the scan's
    /// transaction may not succeed afterwards.
    #[test]
    fn rows_of_a_transaction_that_lost_its_locks_in_the_same_step() {
        let mut m = model_with_locking_scan();
        commit_of_2(&mut m, 10).unwrap();
        scan_rows(&mut m, 10, vec![(8, 100)], false).unwrap();
        assert_eq!(m.lost_lock_replies, 1);
        let e = scan_rows(&mut m, 11, vec![], true).unwrap_err();
        assert!(e.contains("lost its row locks in step 10"), "{e}");
    }

    /// The same stale row one step after the commit is a lost lock, not a race.
    #[test]
    fn stale_locked_row_after_the_commit_step_is_an_error() {
        let mut m = model_with_locking_scan();
        commit_of_2(&mut m, 10).unwrap();
        let e = scan_rows(&mut m, 11, vec![(8, 100)], false).unwrap_err();
        assert!(e.contains("with the row locked, committed state is Some(200)"), "{e}");
        // And a value the key never had is wrong in the commit's step too.
        let mut m = model_with_locking_scan();
        commit_of_2(&mut m, 10).unwrap();
        assert!(scan_rows(&mut m, 10, vec![(8, 150)], false).is_err());
    }
}
