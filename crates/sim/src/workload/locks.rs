//! Locks: a few counter rows; transactions read counters with a lock and write
//! back +1 (read-modify-write), or add +1 blindly with an interpreted update.
//! Invariants, checked by the omniscient observer when the node emits a reply:
//! * a locked read returns exactly the number of increments committed so far
//!   (no two transactions hold conflicting locks on a row at the same time);
//! * no two committed read-modify-write transactions read the same value of a
//!   row (that would be a lost update);
//! * at the end, each counter equals its committed increments (plus at most the
//!   in-doubt commits of clients that crashed before hearing the outcome).

use super::*;
use std::collections::{BTreeMap, BTreeSet};

const N: ColumnId = 1;

#[derive(Debug)]
enum St {
    Idle,
    Reading { txn: u64, rows: Vec<i64> },
    Committing { txn: u64 },
}

#[derive(Debug, Default)]
struct Pending {
    rows: Vec<i64>,
    reads: Vec<(i64, i64)>,
    rmw: bool,
    commit_delivered: bool,
    crashed: bool,
}

pub struct Locks {
    table: TableId,
    rows: i64,
    partitions: u32,
    st: Vec<St>,
    next_txn: u64,
    /// Committed increments per row, as the observer saw the commits leave the node.
    committed: Vec<i64>,
    committed_reads: BTreeSet<(i64, i64)>,
    pending: BTreeMap<(NodeId, u64), Pending>,
    /// Which API node a client currently is.
    api_of: Vec<NodeId>,
    pub commits: u64,
    pub aborts: u64,
    pub rollbacks: u64,
    pub reads_checked: u64,
    pub in_doubt_final: u64,
}

impl Locks {
    pub fn new(rng: &mut Rng, clients: usize, _knobs: &norr_knobs::Knobs) -> Locks {
        let rows = rng.range(1, 3) as i64;
        Locks {
            table: 0,
            rows,
            partitions: rng.range(1, 3) as u32,
            st: (0..clients).map(|_| St::Idle).collect(),
            next_txn: 1,
            committed: vec![0; rows as usize],
            committed_reads: BTreeSet::new(),
            pending: BTreeMap::new(),
            api_of: vec![0; clients],
            commits: 0,
            aborts: 0,
            rollbacks: 0,
            reads_checked: 0,
            in_doubt_final: 0,
        }
    }

    fn in_doubt(&self, row: i64) -> i64 {
        self.pending.values().filter(|p| p.commit_delivered && p.rows.contains(&row)).count() as i64
    }

    fn idle(&mut self, c: &mut ClientCtx<'_>) {
        self.st[c.client] = St::Idle;
        let t = c.rng.range(0, 1_000_000);
        c.wake_after(t);
    }

    fn pick_rows(&self, c: &mut ClientCtx<'_>) -> Vec<i64> {
        let mut ids: Vec<i64> = (0..self.rows).collect();
        c.rng.shuffle(&mut ids);
        let k = c.rng.range(1, self.rows as u64) as usize;
        ids.truncate(k);
        ids
    }
}

impl Workload for Locks {
    fn name(&self) -> &'static str {
        "locks"
    }

    fn setup(&mut self, host: &mut Host) -> Result<(), String> {
        let def = create_table(host, int_table("ctr", &["n"], false, self.partitions))?;
        self.table = def.id;
        // One row per transaction: max_ops_per_txn may be tiny.
        for id in 0..self.rows {
            admin_commit(
                host,
                1 + id as u64,
                vec![KeyOp::insert(self.table, vec![Value::Int(id)], vec![(N, Value::Int(0))])],
            )?;
        }
        Ok(())
    }

    fn on_start(&mut self, c: &mut ClientCtx<'_>) {
        self.st[c.client] = St::Idle;
        self.api_of[c.client] = c.api;
        let t = c.rng.range(0, 500_000);
        c.wake_after(t);
    }

    fn on_wake(&mut self, c: &mut ClientCtx<'_>) -> Result<(), String> {
        if !matches!(self.st[c.client], St::Idle) || c.stopping {
            return Ok(());
        }
        self.next_txn += 1;
        let txn = self.next_txn;
        let rows = self.pick_rows(c);
        if c.rng.chance(0.25) {
            let ops = rows
                .iter()
                .map(|&id| {
                    let mut op = KeyOp::update(self.table, vec![Value::Int(id)], vec![]);
                    op.increments = vec![(N, Value::Int(1))];
                    op
                })
                .collect();
            c.send(tc_key(txn, ExecType::Commit, ops));
            self.pending.insert((c.api, txn), Pending { rows, rmw: false, ..Default::default() });
            self.st[c.client] = St::Committing { txn };
        } else {
            let lock = if c.rng.chance(0.3) { LockMode::Shared } else { LockMode::Exclusive };
            let ops = rows
                .iter()
                .map(|&id| {
                    let mut op = KeyOp::read(self.table, vec![Value::Int(id)]);
                    op.lock = lock;
                    op.projection = vec![N];
                    op
                })
                .collect();
            c.send(tc_key(txn, ExecType::NoCommit, ops));
            self.pending.insert((c.api, txn), Pending { rows: rows.clone(), rmw: true, ..Default::default() });
            self.st[c.client] = St::Reading { txn, rows };
        }
        Ok(())
    }

    fn on_reply(&mut self, c: &mut ClientCtx<'_>, sig: Signal) -> Result<(), String> {
        let st = std::mem::replace(&mut self.st[c.client], St::Idle);
        match (st, sig) {
            (St::Reading { txn, .. } | St::Committing { txn }, Signal::TcKeyRef(r)) if r.txn == txn => {
                if !is_temporary(&r.error) {
                    return Err(format!("locks: non-retriable error {}", r.error));
                }
                self.aborts += 1;
                self.idle(c);
            }
            (St::Reading { txn, rows }, Signal::TcKeyConf(conf)) if conf.txn == txn => {
                if conf.outcome != TxnOutcome::Open || conf.results.len() != rows.len() {
                    return Err(format!("locks: NoCommit read answered {conf:?}"));
                }
                if c.rng.chance(0.05) {
                    c.send(tc_key(txn, ExecType::Rollback, vec![]));
                } else {
                    let mut ops = Vec::new();
                    for (i, r) in conf.results.iter().enumerate() {
                        let OpResult::Ok(Some(row)) = r else {
                            return Err(format!("locks: read result {r:?}"));
                        };
                        let v = int_of(&row[0])?;
                        ops.push(KeyOp::update(self.table, vec![Value::Int(rows[i])], vec![(N, Value::Int(v + 1))]));
                    }
                    c.send(tc_key(txn, ExecType::Commit, ops));
                }
                self.st[c.client] = St::Committing { txn };
            }
            (St::Committing { txn }, Signal::TcKeyConf(conf)) if conf.txn == txn => {
                match conf.outcome {
                    TxnOutcome::Committed | TxnOutcome::CommittedNotOnDisk => self.commits += 1,
                    TxnOutcome::RolledBack => self.rollbacks += 1,
                    TxnOutcome::Open => return Err("locks: commit answered Open".into()),
                }
                self.idle(c);
            }
            (st, sig) => return Err(format!("locks: client {} got {sig:?} in {st:?}", c.client)),
        }
        Ok(())
    }

    fn on_crash(&mut self, client: usize, api: NodeId) {
        self.st[client] = St::Idle;
        for ((a, _), p) in self.pending.iter_mut() {
            if *a == api {
                p.crashed = true;
            }
        }
    }

    fn observe_request(&mut self, _step: u64, api: NodeId, sig: &Signal) -> Result<(), String> {
        if let Signal::TcKeyReq(r) = sig {
            if r.exec == ExecType::Commit {
                if let Some(p) = self.pending.get_mut(&(api, r.txn)) {
                    p.commit_delivered = true;
                }
            }
        }
        Ok(())
    }

    fn observe_emitted(&mut self, _step: u64, api: NodeId, sig: &Signal) -> Result<(), String> {
        match sig {
            Signal::TcKeyRef(r) => {
                self.pending.remove(&(api, r.txn));
            }
            Signal::TcKeyConf(conf) => {
                let key = (api, conf.txn);
                match conf.outcome {
                    TxnOutcome::Open => {
                        let rows = match self.pending.get(&key) {
                            Some(p) => p.rows.clone(),
                            None => return Err(format!("locks: TC_KEYCONF for unknown txn {key:?}")),
                        };
                        let mut reads = Vec::new();
                        for (i, r) in conf.results.iter().enumerate() {
                            let (Some(&row), OpResult::Ok(Some(vals))) = (rows.get(i), r) else {
                                return Err(format!("locks: bad read result {r:?}"));
                            };
                            let v = int_of(vals.first().ok_or("locks: empty row")?)?;
                            let lo = self.committed[row as usize];
                            let hi = lo + self.in_doubt(row);
                            if v < lo || v > hi {
                                return Err(format!(
                                    "locks: txn {key:?} read counter {row} = {v} under lock, but {lo} increments are committed (+{} in doubt)",
                                    hi - lo
                                ));
                            }
                            self.reads_checked += 1;
                            reads.push((row, v));
                        }
                        if let Some(p) = self.pending.get_mut(&key) {
                            p.reads = reads;
                        }
                    }
                    TxnOutcome::Committed | TxnOutcome::CommittedNotOnDisk => {
                        let Some(p) = self.pending.remove(&key) else {
                            return Err(format!("locks: commit of unknown txn {key:?}"));
                        };
                        if p.rmw {
                            for &(row, v) in &p.reads {
                                if !self.committed_reads.insert((row, v)) {
                                    return Err(format!(
                                        "locks: lost update: two committed transactions both read counter {row} = {v} under lock (second: {key:?})"
                                    ));
                                }
                            }
                        }
                        for &row in &p.rows {
                            self.committed[row as usize] += 1;
                        }
                    }
                    TxnOutcome::RolledBack => {
                        self.pending.remove(&key);
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
        // Anything still pending belongs to crashed clients.
        if let Some((k, p)) = self.pending.iter().find(|(_, p)| !p.crashed) {
            return Err(format!("locks: transaction {k:?} of a live client never got an outcome: {p:?}"));
        }
        self.in_doubt_final = self.pending.values().filter(|p| p.commit_delivered).count() as u64;
        for row in 0..self.rows {
            let r = admin_read(host, 1_000_000 + row as u64, self.table, row)?;
            let Some(r) = r else {
                return Err(format!("locks: counter {row} missing at the end"));
            };
            let v = int_of(&r[1])?;
            let lo = self.committed[row as usize];
            let hi = lo + self.in_doubt(row);
            if v < lo || v > hi {
                return Err(format!(
                    "locks: counter {row} = {v} at the end, but {lo} increments committed (+{} in doubt)",
                    hi - lo
                ));
            }
        }
        Ok(())
    }

    fn summary(&self) -> String {
        format!(
            "locks: rows={} commits={} rollbacks={} aborts={} reads_checked={} in_doubt={} counters={:?}",
            self.rows,
            self.commits,
            self.rollbacks,
            self.aborts,
            self.reads_checked,
            self.in_doubt_final,
            self.committed
        )
    }
}
