//! Partition scans at LQH.
//!
//! Each signal examines at most `scan_examine_per_step` rows, then either
//! replies (batch full or partition exhausted) or sends itself `LqhScanStep` to
//! go on, so a big scan shares the thread with everything else.
//!
//! Locking scans: storage returns candidates that pass the filter on their
//! committed image; each is then locked (possibly waiting), re-read under the
//! lock (it may have changed or gone) and filtered again before it is returned.
//!
//! A scan inside a transaction also returns the transaction's own uncommitted
//! writes in place of the committed rows (see `scan_own`).
//!
//! A multi-range scan (`LqhScanReq::ranges`) reads its ranges one after the
//! other with one cursor at a time, as if each were a scan of its own, and
//! appends each row's range position to it. It moves to the next range only
//! once everything of the current one is returned or queued in `out`, so
//! every row in `out` past `tagged` belongs to the current range.

use super::exec::{lock_busy, project, project_owned};
use super::scan_aggregate::ScanAgg;
use super::scan_own::{own_scan_row, OwnScanSpec, OwnWrites};
use super::{Lqh, WaitTarget};
use crate::lock_queue::{Grant, LockKey, Mode};
use crate::store::{ScanBatch, ScanCursor, ScanStep};
use norr_kernel::{BlockRef, Ctx};
use norr_signals::filter_eval::eval_filter;
use norr_signals::internal::{InternalSignal, LqhScanReq, ScanKey, ScanRow, ScanRows, TxnId};
use norr_signals::ops::{Filter, LockMode, LockWait, ScanRange};
use norr_signals::schema::{ColumnId, IndexId, PartitionId, TableDef, TableId};
use norr_signals::value::Value;
use norr_signals::{ErrorCode, NodeError, Signal};
use std::collections::VecDeque;
use std::sync::Arc;

pub(crate) struct LqhScan {
    pub(super) tc: BlockRef,
    pub(super) txn: Option<TxnId>,
    pub(super) table: TableId,
    pub(super) index: Option<IndexId>,
    /// An index scan TC merges: every returned row carries its ordered key.
    row_keys: bool,
    part: PartitionId,
    def: Arc<TableDef>,
    cursor: ScanCursor,
    filter: Option<Filter>,
    projection: Vec<ColumnId>,
    /// Committed-read scans with a projection: the columns storage decodes
    /// (projection, filter, and the pk when own writes hide rows by it).
    read_cols: Option<Vec<bool>>,
    lock: LockMode,
    /// Locking scans: NOWAIT fails the scan at a row locked by another
    /// transaction, SKIP LOCKED leaves such rows out.
    wait: LockWait,
    batch_rows: usize,
    out: ScanRows,
    /// Locking scans: rows found, not yet locked, in scan order.
    candidates: VecDeque<Candidate>,
    /// The reading transaction's own writes in this partition, if any.
    own: Option<OwnWrites>,
    /// Whether the transaction held the front candidate's row lock before
    /// this scan asked for it, and how many of its operations had run then
    /// (decided at the first attempt, kept across the wait). If it did not
    /// hold it, no operation of it ran meanwhile (one may have locked the row
    /// too, through a second wait), and the row turns out not to qualify, the
    /// lock is let go.
    front_had_lock: Option<(bool, u64)>,
    exhausted: bool,
    /// Waiting for TC's next request.
    idle: bool,
    pub(super) waiting: Option<u64>,
    pub(super) step_scheduled: bool,
    /// Multi-range scans: the ranges after the current one, the current
    /// one's position (None: a plain scan, rows untagged), and how many rows
    /// of `out` carry their tag already.
    next_ranges: std::vec::IntoIter<ScanRange>,
    range_no: Option<usize>,
    tagged: usize,
    /// For opening the next range: the reading transaction, the direction.
    reader: Option<TxnId>,
    descending: bool,
    /// A pushed aggregate (`scan_aggregate`): rows are folded into it and
    /// only its partial rows are returned, when the partition is done.
    agg: Option<Box<ScanAgg>>,
}

type Key = (ScanKey, PartitionId);

/// A row a locking scan is about to return.
enum Candidate {
    /// A committed row: locked, re-read and re-checked before it is returned.
    Committed(Vec<Value>),
    /// The transaction's own write: it holds the row's lock already.
    Own(ScanRow),
}

impl Lqh {
    pub(super) fn on_scan_req(&mut self, tc: BlockRef, req: LqhScanReq, ctx: &mut Ctx<'_, Signal>) {
        let key = (req.scan, req.part);
        let fail = |ctx: &mut Ctx<'_, Signal>, error: NodeError| {
            Self::reply(ctx, tc, InternalSignal::LqhScanRef { scan: req.scan, part: req.part, error })
        };
        let Some(def) = self.defs.get(&req.table).map(Arc::clone) else {
            return fail(ctx, NodeError::with(ErrorCode::NoSuchTable, format!("table id {}", req.table)));
        };
        if req.table_version != 0 && req.table_version != def.version {
            return fail(ctx, NodeError::new(ErrorCode::SchemaVersionMismatch));
        }
        assert!(!self.scans.contains_key(&key), "scan {key:?} opened twice");
        // A pushed aggregate reads just the columns it aggregates.
        let mut projection = req.projection;
        let agg = match req.aggregate {
            None => None,
            Some(_) if !req.ranges.is_empty() || (req.txn.is_some() && req.lock != LockMode::CommittedRead) => {
                let e = NodeError::with(ErrorCode::BadAggregate, "a pushed aggregate takes no list of ranges or lock");
                return fail(ctx, e);
            }
            Some(a) => match ScanAgg::new(a, &def) {
                Ok((agg, cols)) => {
                    projection = cols;
                    Some(Box::new(agg))
                }
                Err(e) => return fail(ctx, e),
            },
        };
        let range_no = (!req.ranges.is_empty()).then_some(0);
        let mut next_ranges = req.ranges.into_iter();
        let first = if range_no.is_some() { next_ranges.next() } else { req.range };
        let cursor = match self.storage.scan_open(req.table, req.part, req.index, first.as_ref(), req.descending) {
            Ok(c) => c,
            Err(e) => return fail(ctx, e),
        };
        let own = match req.reader {
            None => None,
            Some(reader) => {
                let spec = OwnScanSpec {
                    reader,
                    def: &def,
                    part: req.part,
                    index: req.index,
                    cursor: &cursor,
                    filter: req.filter.as_ref(),
                    descending: req.descending,
                };
                match self.own_writes(&spec) {
                    Ok(o) => o,
                    Err(e) => return fail(ctx, e),
                }
            }
        };
        if own.is_some() {
            self.counters.bump("lqh: scans over own writes");
        }
        let lock = if req.txn.is_some() { req.lock } else { LockMode::CommittedRead };
        if lock != LockMode::CommittedRead {
            let t = req.txn.expect("locking scan has a transaction");
            let txn = self.txns.entry(t).or_insert_with(|| super::LqhTxn::new(tc));
            assert!(!txn.committed);
        }
        self.counters.bump("lqh: scans");
        let read_cols = (lock == LockMode::CommittedRead && !projection.is_empty()).then(|| {
            let mut m = vec![false; def.columns.len()];
            let mut mark = |c: ColumnId| {
                if let Some(x) = m.get_mut(c as usize) {
                    *x = true;
                }
            };
            projection.iter().for_each(|c| mark(*c));
            if let Some(f) = &req.filter {
                f.for_each_column(&mut mark);
            }
            if own.is_some() {
                def.primary_key.iter().for_each(|c| mark(*c));
            }
            m
        });
        self.scans.insert(
            key,
            Box::new(LqhScan {
                tc,
                txn: req.txn,
                table: req.table,
                index: req.index,
                row_keys: req.row_keys && req.index.is_some() && agg.is_none(),
                part: req.part,
                def,
                cursor,
                filter: req.filter,
                projection,
                read_cols,
                lock,
                wait: req.wait,
                batch_rows: req.batch_rows.max(1) as usize,
                out: ScanRows::default(),
                candidates: VecDeque::new(),
                own,
                front_had_lock: None,
                exhausted: false,
                idle: false,
                waiting: None,
                step_scheduled: false,
                next_ranges,
                range_no,
                tagged: 0,
                reader: req.reader,
                descending: req.descending,
                agg,
            }),
        );
        self.scan_step(key, ctx);
    }

    pub(super) fn on_scan_next(&mut self, tc: BlockRef, scan: ScanKey, part: PartitionId, ctx: &mut Ctx<'_, Signal>) {
        match self.scans.get_mut(&(scan, part)) {
            Some(s) if s.idle => {
                s.idle = false;
                self.scan_step((scan, part), ctx);
            }
            Some(_) => debug_assert!(false, "next request for a running scan"),
            None => {
                let error = NodeError::new(ErrorCode::NoSuchScan);
                Self::reply(ctx, tc, InternalSignal::LqhScanRef { scan, part, error });
            }
        }
    }

    /// Remove a scan, cancelling its lock wait.
    pub(super) fn drop_scan(&mut self, key: Key, grants: &mut Vec<Grant>) {
        let Some(s) = self.scans.remove(&key) else {
            return;
        };
        if let Some(tag) = s.waiting {
            if let Some(w) = self.waits.remove(&tag) {
                self.locks.cancel_wait(&w.key, w.owner, tag, grants);
            }
        }
    }

    /// Lock, re-read and re-filter the pending candidates. Returns false if
    /// the scan is now waiting for a lock.
    fn scan_lock_candidates(
        &mut self,
        key: Key,
        ctx: &mut Ctx<'_, Signal>,
        grants: &mut Vec<Grant>,
    ) -> Result<bool, NodeError> {
        loop {
            let s = self.scans.get(&key).expect("scan");
            if s.out.len() >= s.batch_rows {
                return Ok(true);
            }
            let row = match s.candidates.front() {
                None => return Ok(true),
                Some(Candidate::Committed(row)) => row,
                Some(Candidate::Own(_)) => {
                    let s = self.scans.get_mut(&key).expect("scan");
                    let Some(Candidate::Own(r)) = s.candidates.pop_front() else { unreachable!("front") };
                    s.out.push(s.row_keys.then_some(r.key.as_slice()), r.values);
                    continue;
                }
            };
            let (def, t, part) = (Arc::clone(&s.def), s.txn.expect("locking scan has a txn"), s.part);
            let mode = if s.lock == LockMode::Exclusive { Mode::Exclusive } else { Mode::Shared };
            let pk: Vec<Value> = def.primary_key.iter().map(|c| row[*c as usize].clone()).collect();
            let enc = self.storage.encode_pk(def.id, &pk)?;
            let lk = LockKey::Row(def.id, enc.clone());
            let s = self.scans.get_mut(&key).expect("scan");
            if s.front_had_lock.is_none() {
                let ops_run = self.txns.get(&t).map_or(0, |x| x.ops_run);
                s.front_had_lock = Some((self.locks.holds(&lk, t, Mode::Shared), ops_run));
            }
            let wait = s.wait;
            if !wait.queues() {
                if !self.try_lock_owned(t, lk.clone(), mode) {
                    let s = self.scans.get_mut(&key).expect("scan");
                    if s.wait == LockWait::NoWait {
                        // The caller drops the scan and tells TC.
                        return Err(lock_busy(LockWait::NoWait));
                    }
                    s.candidates.pop_front();
                    s.front_had_lock = None;
                    self.counters.bump("lqh: scan skipped a locked row");
                    continue;
                }
            } else if let Some(tag) = self.lock(t, &lk, mode, wait, WaitTarget::Scan(key.0, key.1), ctx) {
                self.scans.get_mut(&key).expect("scan").waiting = Some(tag);
                return Ok(false);
            }
            let now = self.current(t, &def, part, &enc);
            // (Partitions of this same scan never see this row.)
            let sibling_scans = self.scans.iter().any(|(k, o)| o.txn == Some(t) && k.0 != key.0);
            let s = self.scans.get_mut(&key).expect("scan");
            let Some(Candidate::Committed(found)) = s.candidates.pop_front() else { unreachable!("front") };
            let (had, ops_then) = s.front_had_lock.take().expect("decided before locking");
            // Someone else of the transaction may rely on the lock if an
            // operation ran meanwhile or another scan of it is open here.
            let shared = self.txns.get(&t).map_or(0, |x| x.ops_run) != ops_then || sibling_scans;
            let had = had || shared;
            let skip = match &now {
                None => Some("lqh: locked scan row vanished"),
                Some(now) => match &s.filter {
                    Some(f) if eval_filter(f, now, &def)? != Some(true) => {
                        Some("lqh: locked scan row no longer matches")
                    }
                    // Its index key changed while we waited: it no longer sits
                    // at this position of the ordered stream (and may be out of
                    // range); returning it would break the order TC merges on.
                    _ if s.index.is_some_and(|ix| {
                        self.storage.ordered_key(def.id, ix, now) != self.storage.ordered_key(def.id, ix, &found)
                    }) =>
                    {
                        Some("lqh: locked scan row moved in the index")
                    }
                    _ => None,
                },
            };
            if let Some(why) = skip {
                self.counters.bump(why);
                if !had {
                    // Nothing of it is returned: let it go (the lock stays in
                    // the transaction's key set; releasing it again is a no-op).
                    self.locks.unlock(&lk, t, grants);
                }
                continue;
            }
            let now = now.expect("checked");
            let k = s.index.filter(|_| s.row_keys).map(|ix| self.storage.ordered_key(def.id, ix, &now));
            let values = project(&def, &now, &s.projection)?;
            s.out.push(k.as_deref(), values);
        }
    }

    /// One step of a partition scan.
    pub(super) fn scan_step(&mut self, key: Key, ctx: &mut Ctx<'_, Signal>) {
        let mut grants = Vec::new();
        let r = self.scan_step_inner(key, ctx, &mut grants);
        // Locks let go during the step may wake others: only now, with this
        // scan's state settled.
        self.on_grants(std::mem::take(&mut grants), ctx);
        if let Err(error) = r {
            if let Some(s) = self.scans.get(&key) {
                let tc = s.tc;
                self.drop_scan(key, &mut grants);
                Self::reply(ctx, tc, InternalSignal::LqhScanRef { scan: key.0, part: key.1, error });
            }
            self.on_grants(grants, ctx);
        }
    }

    fn scan_step_inner(
        &mut self,
        key: Key,
        ctx: &mut Ctx<'_, Signal>,
        grants: &mut Vec<Grant>,
    ) -> Result<(), NodeError> {
        let mut examined = false;
        loop {
            let Some(s) = self.scans.get(&key) else {
                return Ok(());
            };
            if s.idle || s.waiting.is_some() {
                return Ok(());
            }
            if !s.candidates.is_empty() && !self.scan_lock_candidates(key, ctx, grants)? {
                return Ok(());
            }
            let s = self.scans.get_mut(&key).expect("scan");
            let range_done = s.exhausted && s.candidates.is_empty() && s.own.as_ref().is_none_or(|o| o.is_empty());
            let more_ranges = s.next_ranges.len() > 0;
            if range_done && more_ranges && s.out.len() < s.batch_rows {
                self.next_range(key)?;
            }
            let finished = range_done && !more_ranges;
            let s = self.scans.get_mut(&key).expect("scan");
            if let Some(agg) = s.agg.as_mut() {
                // Fold what was found; only the partial rows go to TC.
                agg.fold(&mut s.out)?;
                if finished {
                    s.out = agg.take_partials();
                }
            }
            if s.out.len() >= s.batch_rows || finished {
                s.tag_rows();
                s.tagged = 0;
                let rows = std::mem::take(&mut s.out);
                let tc = s.tc;
                if finished {
                    self.scans.remove(&key);
                } else {
                    s.idle = true;
                }
                Self::reply(ctx, tc, InternalSignal::LqhScanConf { scan: key.0, part: key.1, rows, done: finished });
                return Ok(());
            }
            if examined {
                // Yield: continue in a later signal.
                s.step_scheduled = true;
                let me = ctx.self_ref();
                Self::reply(ctx, me, InternalSignal::LqhScanStep { scan: key.0, part: key.1 });
                return Ok(());
            }
            examined = true;
            let want = s.batch_rows.saturating_sub(s.out.len() + s.candidates.len());
            let locking = s.lock != LockMode::CommittedRead;
            // A committed-read scan without own writes returns what storage
            // finds as it is: storage projects the rows itself.
            let plain = !locking && s.own.is_none();
            // Entry keys: for TC's merge, and to slot the transaction's own
            // rows into index order (kept for that even when TC does not
            // merge: it is rare and keeps one way of placing them).
            let keys = s.index.is_some() && (s.row_keys || s.own.is_some());
            let step = ScanStep {
                filter: s.filter.as_ref(),
                cols: s.read_cols.as_deref(),
                projection: (plain && !s.projection.is_empty()).then_some(s.projection.as_slice()),
                max_rows: want.max(1),
                examine_limit: self.examine_per_step,
                keys,
            };
            let mut found = ScanBatch::default();
            s.exhausted = self.storage.scan_next_rows(s.table, s.part, &mut s.cursor, &step, &mut found)?;
            if plain {
                s.out.append(ScanRows { keys: found.keys, rows: found.rows });
                continue;
            }
            let mut own = s.own.take();
            // Index scans: storage hands out each row's ordered key, which
            // orders the stream (locking scans compute it again after the lock).
            let found_keys = found.keys;
            for (i, row) in found.rows.into_iter().enumerate() {
                let k = keys.then(|| found_keys.get(i));
                if let Some(own) = &mut own {
                    if own.hides(&self.storage.encode_row_pk(s.table, &row)) {
                        continue;
                    }
                    if let Some(k) = k {
                        while let Some(o) = own.pop_before(Some(k)) {
                            push_own(s, o)?;
                        }
                    }
                }
                if locking {
                    s.candidates.push_back(Candidate::Committed(row));
                } else {
                    let values = project_owned(&s.def, row, &s.projection)?;
                    s.out.push(k.filter(|_| s.row_keys), values);
                }
            }
            if s.exhausted {
                // Committed rows done: the own rows left come last, a batch
                // at a time.
                while s.out.len() + s.candidates.len() < s.batch_rows {
                    let Some(o) = own.as_mut().and_then(|own| own.pop_before(None)) else { break };
                    push_own(s, o)?;
                }
            }
            s.own = own;
        }
    }
}

impl LqhScan {
    /// Multi-range scans: append the current range's position to the rows
    /// of `out` that have none yet.
    fn tag_rows(&mut self) {
        let Some(no) = self.range_no else { return };
        for r in &mut self.out.rows[self.tagged..] {
            r.push(Value::Int(no as i64));
        }
        self.tagged = self.out.rows.len();
    }
}

impl Lqh {
    /// Multi-range scans: the current range is done (everything of it is in
    /// `out`); open the next one, with the reader's own writes in it.
    fn next_range(&mut self, key: Key) -> Result<(), NodeError> {
        let s = self.scans.get_mut(&key).expect("scan");
        s.tag_rows();
        let range = s.next_ranges.next().expect("a next range");
        s.range_no = s.range_no.map(|n| n + 1);
        s.cursor = self.storage.scan_open(s.table, s.part, s.index, Some(&range), s.descending)?;
        s.exhausted = false;
        let s = self.scans.get(&key).expect("scan");
        let own = match s.reader {
            None => None,
            Some(reader) => self.own_writes(&OwnScanSpec {
                reader,
                def: &s.def,
                part: s.part,
                index: s.index,
                cursor: &s.cursor,
                filter: s.filter.as_ref(),
                descending: s.descending,
            })?,
        };
        self.scans.get_mut(&key).expect("scan").own = own;
        Ok(())
    }
}

/// Queue one of the transaction's own rows for return.
fn push_own(s: &mut LqhScan, row: (Vec<u8>, Vec<Value>)) -> Result<(), NodeError> {
    let r = own_scan_row(&s.def, row, &s.projection)?;
    if s.lock == LockMode::CommittedRead {
        s.out.push(s.row_keys.then_some(r.key.as_slice()), r.values);
    } else {
        s.candidates.push_back(Candidate::Own(r));
    }
    Ok(())
}
