//! Bank: N accounts, transfers between random pairs in multi-operation
//! transactions (read both with a lock, write both, commit), readers that read
//! every balance in one locking transaction (the total must be exactly
//! conserved: row locks held to commit make the read set serializable),
//! committed-read readers and scans (each balance non-negative, every account
//! present), and client crashes anywhere. Final check: the total is conserved.

use super::*;

const BAL: ColumnId = 1;

#[derive(Debug)]
enum St {
    Idle,
    /// Sent: read a and b with locks (NoCommit).
    Transfer1 {
        txn: u64,
        a: i64,
        b: i64,
        amount: i64,
        use_increments: bool,
    },
    /// Sent: the writes with Commit, or a Rollback.
    Transfer2 {
        txn: u64,
    },
    /// Sent: read every account in one Commit batch.
    Reader {
        txn: u64,
        locked: bool,
    },
    /// A scan is open.
    Scan {
        txn: u64,
        scan_id: u32,
        standalone: bool,
        locked: bool,
        rows: Vec<i64>,
        closing: bool,
    },
    /// Sent: the empty Commit that ends a locking scan's transaction.
    EndScanTxn {
        txn: u64,
        commit: bool,
    },
}

pub struct Bank {
    table: TableId,
    accounts: i64,
    initial: i64,
    total: i64,
    partitions: u32,
    st: Vec<St>,
    next_txn: u64,
    next_scan: u32,
    pub commits: u64,
    pub rollbacks: u64,
    pub aborts: u64,
    pub locked_reads_checked: u64,
    pub scans_checked: u64,
    /// Second answers to a scan the node had already failed on its own
    /// (an unsolicited SCAN_TABREF crossed the client's SCAN_NEXTREQ).
    pub stray_scan_refs: u64,
    last_scan: Vec<u32>,
    idle_scans: IdleScans,
}

impl Bank {
    pub fn new(rng: &mut Rng, clients: usize, knobs: &norr_knobs::Knobs) -> Bank {
        let accounts = rng.range(2, 10) as i64;
        let initial = rng.range(1, 100) as i64;
        Bank {
            table: 0,
            accounts,
            initial,
            total: accounts * initial,
            partitions: rng.range(1, 4) as u32,
            st: (0..clients).map(|_| St::Idle).collect(),
            next_txn: 1,
            next_scan: 1,
            commits: 0,
            rollbacks: 0,
            aborts: 0,
            locked_reads_checked: 0,
            scans_checked: 0,
            stray_scan_refs: 0,
            last_scan: vec![0; clients],
            idle_scans: IdleScans::new(clients, knobs),
        }
    }

    fn txn(&mut self) -> u64 {
        self.next_txn += 1;
        self.next_txn
    }

    fn read_op(&self, id: i64, lock: LockMode) -> KeyOp {
        let mut op = KeyOp::read(self.table, vec![Value::Int(id)]);
        op.lock = lock;
        op.projection = vec![0, BAL];
        op
    }

    fn idle(&mut self, c: &mut ClientCtx<'_>) {
        self.st[c.client] = St::Idle;
        let think = c.rng.range(0, 2_000_000);
        c.wake_after(think);
    }

    /// Rows [id, bal] of a locking read of every account: exact total.
    fn check_rows(&self, what: &str, rows: &[(i64, i64)], exact: bool) -> Result<(), String> {
        for &(id, bal) in rows {
            if bal < 0 {
                return Err(format!("bank: {what} saw account {id} with negative balance {bal}"));
            }
        }
        if exact {
            let mut ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
            ids.sort();
            ids.dedup();
            if ids.len() as i64 != self.accounts || rows.len() as i64 != self.accounts {
                return Err(format!(
                    "bank: {what} saw {} rows ({} distinct), expected {}",
                    rows.len(),
                    ids.len(),
                    self.accounts
                ));
            }
            let sum: i64 = rows.iter().map(|r| r.1).sum();
            if sum != self.total {
                return Err(format!("bank: {what} saw total {sum}, expected {} (rows {rows:?})", self.total));
            }
        }
        Ok(())
    }

    fn parse_row(r: &[Value]) -> Result<(i64, i64), String> {
        if r.len() != 2 {
            return Err(format!("bank: expected [id, bal], got {r:?}"));
        }
        Ok((int_of(&r[0])?, int_of(&r[1])?))
    }

    fn results_rows(results: &[OpResult]) -> Result<Vec<(i64, i64)>, String> {
        results
            .iter()
            .map(|r| match r {
                OpResult::Ok(Some(row)) => Self::parse_row(row),
                other => Err(format!("bank: read result {other:?}")),
            })
            .collect()
    }

    fn start(&mut self, c: &mut ClientCtx<'_>) {
        let roll = c.rng.below(100);
        let txn = self.txn();
        if roll < 60 {
            let a = c.rng.below(self.accounts as u64) as i64;
            let mut b = c.rng.below(self.accounts as u64 - 1) as i64;
            if b >= a {
                b += 1;
            }
            let amount = c.rng.range(1, (self.initial as u64 * 2).max(1)) as i64;
            // Mostly exclusive locks; sometimes shared (upgraded by the write:
            // deadlock-prone, exercises lock-wait time-outs).
            let lock = if c.rng.chance(0.15) { LockMode::Shared } else { LockMode::Exclusive };
            let mut ops = vec![self.read_op(a, lock), self.read_op(b, lock)];
            if c.rng.chance(0.5) {
                ops.swap(0, 1);
            }
            let (first, second) = if ops[0].key == KeyAccess::Primary(vec![Value::Int(a)]) { (a, b) } else { (b, a) };
            let _ = (first, second);
            c.send(tc_key(txn, ExecType::NoCommit, ops));
            self.st[c.client] = St::Transfer1 { txn, a, b, amount, use_increments: c.rng.chance(0.3) };
        } else if roll < 80 {
            let locked = roll < 72;
            let lock = if !locked {
                LockMode::CommittedRead
            } else if c.rng.chance(0.5) {
                LockMode::Shared
            } else {
                LockMode::Exclusive
            };
            let mut ids: Vec<i64> = (0..self.accounts).collect();
            c.rng.shuffle(&mut ids);
            let ops = ids.iter().map(|&id| self.read_op(id, lock)).collect();
            c.send(tc_key(txn, ExecType::Commit, ops));
            self.st[c.client] = St::Reader { txn, locked };
        } else {
            let standalone = roll >= 92;
            let locked = !standalone && c.rng.chance(0.8);
            self.next_scan += 1;
            let scan_id = self.next_scan;
            let mut spec = ScanSpec::full(self.table);
            spec.projection = vec![0, BAL];
            spec.batch_rows = c.rng.range(1, self.accounts as u64 + 1) as u32;
            spec.lock = if !locked {
                LockMode::CommittedRead
            } else if c.rng.chance(0.5) {
                LockMode::Shared
            } else {
                LockMode::Exclusive
            };
            c.send(Signal::ScanTabReq(Box::new(ScanTabReq { txn, scan_id, standalone, spec })));
            self.st[c.client] = St::Scan { txn, scan_id, standalone, locked, rows: Vec::new(), closing: false };
            self.last_scan[c.client] = scan_id;
        }
    }
}

impl Workload for Bank {
    fn name(&self) -> &'static str {
        "bank"
    }

    fn setup(&mut self, host: &mut Host) -> Result<(), String> {
        let def = create_table(host, int_table("bank", &["bal"], false, self.partitions))?;
        self.table = def.id;
        let ops = (0..self.accounts)
            .map(|id| KeyOp::insert(self.table, vec![Value::Int(id)], vec![(BAL, Value::Int(self.initial))]))
            .collect::<Vec<_>>();
        // One row per transaction: max_ops_per_txn may be tiny.
        for (i, op) in ops.into_iter().enumerate() {
            admin_commit(host, 1 + i as u64, vec![op])?;
        }
        Ok(())
    }

    fn on_start(&mut self, c: &mut ClientCtx<'_>) {
        self.st[c.client] = St::Idle;
        let t = c.rng.range(0, 1_000_000);
        c.wake_after(t);
    }

    fn on_wake(&mut self, c: &mut ClientCtx<'_>) -> Result<(), String> {
        if matches!(self.st[c.client], St::Idle) && !c.stopping {
            self.start(c);
        }
        Ok(())
    }

    fn on_reply(&mut self, c: &mut ClientCtx<'_>, sig: Signal) -> Result<(), String> {
        if let Signal::ScanTabRef(r) = &sig {
            let open = matches!(&self.st[c.client], St::Scan { scan_id, .. } if *scan_id == r.scan_id);
            if !open && r.scan_id <= self.last_scan[c.client] && r.error.code == ErrorCode::NoSuchScan {
                // The node used to send an unsolicited SCAN_TABREF when a scan
                // failed between batches; the client's SCAN_NEXTREQ then got a
                // second answer (NoSuchScan). TC now answers only when asked.
                self.stray_scan_refs += 1;
                return Err(format!(
                    "bank: second answer to scan {} (SCAN_TABREF {}) after the client saw it end: TC answered unasked",
                    r.scan_id, r.error
                ));
            }
        }
        let st = std::mem::replace(&mut self.st[c.client], St::Idle);
        let cur_txn = match &st {
            St::Idle => return Err(format!("bank: client {} got {} while idle: {sig:?}", c.client, sig.name())),
            St::Transfer1 { txn, .. } | St::Transfer2 { txn } | St::Reader { txn, .. } | St::EndScanTxn { txn, .. } => {
                *txn
            }
            St::Scan { txn, .. } => *txn,
        };
        match sig {
            Signal::TcKeyRef(r) => {
                if r.txn != cur_txn {
                    return Err(format!("bank: TC_KEYREF for txn {} while in {st:?}", r.txn));
                }
                if !is_temporary(&r.error) {
                    return Err(format!("bank: transaction failed with a non-retriable error {} in {st:?}", r.error));
                }
                self.aborts += 1;
                self.idle(c);
            }
            Signal::TcKeyConf(conf) => {
                if conf.txn != cur_txn {
                    return Err(format!("bank: TC_KEYCONF for txn {} while in {st:?}", conf.txn));
                }
                match st {
                    St::Transfer1 { txn, a, b, amount, use_increments } => {
                        if conf.outcome != TxnOutcome::Open {
                            return Err(format!("bank: NoCommit batch answered {:?}", conf.outcome));
                        }
                        let rows = Self::results_rows(&conf.results)?;
                        self.check_rows("transfer read", &rows, false)?;
                        let bal = |id: i64| rows.iter().find(|r| r.0 == id).map(|r| r.1);
                        let (Some(ba), Some(bb)) = (bal(a), bal(b)) else {
                            return Err(format!("bank: transfer read returned {rows:?} for accounts {a},{b}"));
                        };
                        if ba < amount || c.rng.chance(0.05) || c.stopping && c.rng.chance(0.5) {
                            c.send(tc_key(txn, ExecType::Rollback, vec![]));
                        } else {
                            let upd = |id: i64, new: i64, delta: i64| {
                                if use_increments {
                                    let mut op = KeyOp::update(self.table, vec![Value::Int(id)], vec![]);
                                    op.increments = vec![(BAL, Value::Int(delta))];
                                    op
                                } else {
                                    KeyOp::update(self.table, vec![Value::Int(id)], vec![(BAL, Value::Int(new))])
                                }
                            };
                            let mut ops = vec![upd(a, ba - amount, -amount), upd(b, bb + amount, amount)];
                            if c.rng.chance(0.5) {
                                ops.swap(0, 1);
                            }
                            c.send(tc_key(txn, ExecType::Commit, ops));
                        }
                        self.st[c.client] = St::Transfer2 { txn };
                    }
                    St::Transfer2 { .. } => {
                        match conf.outcome {
                            TxnOutcome::Committed | TxnOutcome::CommittedNotOnDisk => self.commits += 1,
                            TxnOutcome::RolledBack => self.rollbacks += 1,
                            TxnOutcome::Open => return Err("bank: Commit/Rollback answered Open".into()),
                        }
                        self.idle(c);
                    }
                    St::Reader { locked, .. } => {
                        if conf.outcome != TxnOutcome::Committed {
                            return Err(format!("bank: reader Commit answered {:?}", conf.outcome));
                        }
                        let rows = Self::results_rows(&conf.results)?;
                        if locked {
                            self.locked_reads_checked += 1;
                        }
                        self.check_rows(if locked { "locking reader" } else { "committed reader" }, &rows, locked)?;
                        self.idle(c);
                    }
                    St::EndScanTxn { commit, .. } => {
                        let want = if commit { TxnOutcome::Committed } else { TxnOutcome::RolledBack };
                        if conf.outcome != want {
                            return Err(format!("bank: scan txn commit answered {:?}", conf.outcome));
                        }
                        self.idle(c);
                    }
                    St::Scan { .. } | St::Idle => return Err(format!("bank: TC_KEYCONF in {st:?}")),
                }
            }
            Signal::ScanTabConf(conf) => {
                let St::Scan { txn, scan_id, standalone, locked, mut rows, closing } = st else {
                    return Err(format!("bank: SCAN_TABCONF in {st:?}"));
                };
                if conf.scan_id != scan_id {
                    return Err(format!("bank: SCAN_TABCONF for scan {} while in scan {scan_id}", conf.scan_id));
                }
                self.idle_scans.replied(c);
                if closing && !conf.done {
                    return Err("bank: close request answered without done".into());
                }
                for r in &conf.rows {
                    let (id, bal) = Self::parse_row(r)?;
                    if bal < 0 {
                        return Err(format!("bank: scan saw account {id} with negative balance {bal}"));
                    }
                    rows.push(id);
                    rows.push(bal);
                }
                if conf.done {
                    let pairs: Vec<(i64, i64)> = rows.chunks(2).map(|p| (p[0], p[1])).collect();
                    if !closing {
                        self.scans_checked += 1;
                        // Committed-read scans: every account exactly once (no
                        // inserts/deletes happen), totals may be torn.
                        let mut ids: Vec<i64> = pairs.iter().map(|p| p.0).collect();
                        ids.sort();
                        let expect: Vec<i64> = (0..self.accounts).collect();
                        if ids != expect {
                            return Err(format!(
                                "bank: scan (locked={locked}) returned accounts {ids:?}, expected {expect:?}"
                            ));
                        }
                        self.check_rows(if locked { "locking scan" } else { "committed scan" }, &pairs, locked)?;
                    }
                    if standalone {
                        self.idle(c);
                    } else {
                        let commit = c.rng.chance(0.5);
                        let exec = if commit { ExecType::Commit } else { ExecType::Rollback };
                        c.send(tc_key(txn, exec, vec![]));
                        self.st[c.client] = St::EndScanTxn { txn, commit };
                    }
                } else {
                    let close = c.rng.chance(0.05);
                    c.send(Signal::ScanNextReq(ScanNextReq { txn, scan_id, close }));
                    self.st[c.client] = St::Scan { txn, scan_id, standalone, locked, rows, closing: close };
                }
            }
            Signal::ScanTabRef(r) => {
                let St::Scan { scan_id, txn, standalone, .. } = st else {
                    return Err(format!("bank: SCAN_TABREF in {st:?}"));
                };
                if r.scan_id != scan_id {
                    return Err(format!("bank: SCAN_TABREF for scan {} while in scan {scan_id}", r.scan_id));
                }
                if is_temporary(&r.error) {
                    self.aborts += 1;
                    self.idle(c);
                } else {
                    self.idle_scans.judge(c, &r.error).map_err(|e| format!("bank: {e}"))?;
                    if standalone {
                        self.idle(c);
                    } else {
                        // The transaction may still be open: end it.
                        c.send(tc_key(txn, ExecType::Rollback, vec![]));
                        self.st[c.client] = St::EndScanTxn { txn, commit: false };
                    }
                }
            }
            other => return Err(format!("bank: unexpected {}", other.name())),
        }
        Ok(())
    }

    fn on_crash(&mut self, client: usize, _api: NodeId) {
        self.st[client] = St::Idle;
    }

    fn is_idle(&self, client: usize) -> bool {
        matches!(self.st[client], St::Idle)
    }

    fn finish(&mut self, host: &mut Host) -> Result<(), String> {
        let rows = admin_scan(host, self.table, 1)?;
        let pairs = rows.iter().map(|r| Self::parse_row(r)).collect::<Result<Vec<_>, _>>()?;
        self.check_rows("final scan", &pairs, true)?;
        for id in 0..self.accounts {
            let r = admin_read(host, 1_000_000 + id as u64, self.table, id)?;
            let Some(r) = r else {
                return Err(format!("bank: account {id} missing at the end"));
            };
            let (_, bal) = Self::parse_row(&r)?;
            let in_scan = pairs.iter().find(|p| p.0 == id).map(|p| p.1);
            if in_scan != Some(bal) {
                return Err(format!("bank: account {id}: key read {bal}, scan {in_scan:?}"));
            }
        }
        Ok(())
    }

    fn summary(&self) -> String {
        format!(
            "bank: accounts={} total={} commits={} rollbacks={} aborts={} locked_reads_checked={} scans_checked={} stray_scan_refs={} idle_scans_closed={}",
            self.accounts, self.total, self.commits, self.rollbacks, self.aborts, self.locked_reads_checked, self.scans_checked, self.stray_scan_refs, self.idle_scans.closed_idle
        )
    }
}
