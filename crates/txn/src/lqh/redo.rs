//! LQH's REDO log and restart (durability, see norr-durability and
//! `norr_signals::ckpt`).
//!
//! A node with a data directory gives each LQH instance one REDO log part
//! (`enable_redo`). At commit every replica appends the transaction's
//! changes (whole new row images, keys of deleted rows) tagged with the
//! transaction's GCI: one append per transaction, many transactions per
//! page write (group commit: one IO is in flight at a time, and whatever
//! was appended meanwhile goes in the next). `GcpSaveReq { gci }` closes the
//! open page as a marker and is answered once it is synced.
//!
//! The append at commit cannot be refused (the transaction is decided), so
//! room is checked at prepare, on every replica (primary and backups, whose
//! logs fill at their own pace): a write is refused with the temporary
//! error 410 (log full) or 1221 (buffer full) unless the log has room for
//! it, every other write still uncommitted here, and `DDL_RESET_RESERVE`.
//! That reserve is for the reset record of a TRUNCATE: once some LQHs have
//! emptied the table it cannot be undone, so no LQH may refuse it because
//! writes filled the log (it is refused only when the reserve itself is
//! spent, which takes hundreds of TRUNCATEs while checkpoints free
//! nothing, or the log failed). Should an append still fail,
//! this LQH refuses every later GCP save: the cluster then never calls a
//! GCI complete whose changes are not all in the log.
//!
//! Restart: the host reads the files before the blocks start and feeds
//! `restore_tables`, `restore_record` (REDO records of GCIs up to the
//! restart point, in log order) and `restore_finish`. A cluster node may
//! also get the records of later GCIs its log holds whole
//! (`set_roll_forward`): when the cluster restarts to one of them (every
//! node saved it, some recorded it, this one did not), CKPT's
//! `GcpRestoreToReq` replays them and moves the log's write point past
//! that GCI's marker; otherwise they are dropped.

use super::{Lqh, LqhTxn};
use norr_durability::redo::{self, AppendError, LoggedRecord, RedoIo, RedoOp, RedoPart, RedoRecord, RedoResume};
use norr_kernel::{BlockRef, Ctx, Priority};
use norr_signals::ckpt::{CkptSignal, Gci};
use norr_signals::fs::{FileHandle, FsOp, FsResult, FsSignal};
use norr_signals::schema::TableDef;
use norr_signals::{block, NodeError, Signal};
use std::sync::Arc;

/// Log room writes leave free for DDL reset records (see the module doc).
/// A reset record is a few dozen bytes plus a record header.
const DDL_RESET_RESERVE: usize = 64 * 1024;

/// FS request ids of opens: this plus the file number (REDO IO ids count
/// up from 1 and never get near it).
const OPEN_REQ: u64 = 1 << 62;

/// Records of GCIs above the restored one, and where the log resumes for
/// each GCI they can be rolled forward to (`RedoRecovered::ahead`).
#[derive(Debug, Default)]
pub struct RollForward {
    /// In log order; every one of a GCI above the restored one.
    pub records: Vec<LoggedRecord>,
    pub resumes: std::collections::BTreeMap<Gci, RedoResume>,
}

pub(super) struct LqhRedo {
    part: RedoPart,
    files: Vec<Option<FileHandle>>,
    opening: bool,
    io_busy: bool,
    /// GCP saves waiting for their marker page: (gci, who asked).
    saves: Vec<(Gci, BlockRef)>,
    /// Why this part cannot promise durability any more (an IO failed, or
    /// a committed transaction found no room): every GCP save is refused.
    broken: Option<String>,
    /// Highest GCI appended here since the node started.
    max_gci: Gci,
    /// Highest GCI reported complete (`GcpCompleteRep`).
    complete_gci: Gci,
    /// TRUNCATE / rebuilding ALTER answers held until their reset record's
    /// GCI is complete: (gci, DICT, request).
    ddl_waits: Vec<(Gci, BlockRef, u64)>,
    /// Until CKPT says where the cluster restarts (module doc).
    roll: Option<RollForward>,
}

impl LqhRedo {
    pub(super) fn new(part: RedoPart) -> LqhRedo {
        let files = vec![None; part.geometry().files as usize];
        LqhRedo {
            part,
            files,
            opening: false,
            io_busy: false,
            saves: Vec::new(),
            broken: None,
            max_gci: 0,
            complete_gci: 0,
            roll: None,
            ddl_waits: Vec::new(),
        }
    }

    /// Records of GCI < `gci` are restorable from local checkpoints.
    pub(super) fn release_before(&mut self, gci: Gci) {
        self.part.release_before(gci);
    }
}

fn fs(ctx: &mut Ctx<'_, Signal>, req_id: u64, op: FsOp) {
    let to = BlockRef::new(ctx.self_ref().node, block::FS, 0);
    ctx.send_prio(to, Signal::Fs(Box::new(FsSignal::Req { req_id, op })), Priority::A);
}

impl Lqh {
    /// Log every committed change of this instance to `part` (a node with a
    /// data directory). Before the first signal.
    pub fn enable_redo(&mut self, part: RedoPart) {
        self.redo = Some(LqhRedo::new(part));
    }

    /// Restart: records of later GCIs this part's log holds whole, kept
    /// until `GcpRestoreToReq` (after `enable_redo`).
    pub fn set_roll_forward(&mut self, roll: RollForward) {
        let r = self.redo.as_mut().expect("a REDO part to roll forward");
        debug_assert!(roll.records.iter().all(|x| x.gci > r.part.durable_gci()));
        debug_assert!(roll.resumes.keys().all(|g| *g > r.part.durable_gci()));
        r.roll = (!roll.resumes.is_empty()).then_some(roll);
    }

    /// Records of later GCIs are kept for `GcpRestoreToReq` (a system
    /// restart that has not decided its GCI yet).
    pub(super) fn redo_roll_forward_pending(&self) -> bool {
        self.redo.as_ref().is_some_and(|r| r.roll.is_some())
    }

    /// `GcpRestoreToReq`: the cluster restarts to `gci`. Replay the kept
    /// records up to it if it is above the restored GCI, else drop them.
    fn redo_restore_to(&mut self, gci: Gci) -> Result<u64, NodeError> {
        let Some(r) = self.redo.as_mut() else { return Ok(0) };
        let Some(roll) = r.roll.take() else { return Ok(0) };
        let Some(resume) = roll.resumes.get(&gci).cloned() else {
            crate::probe!(self.counters, "lqh: records past the restart gci dropped");
            return Ok(0);
        };
        // The write point moves past `gci`'s marker before anything is
        // written (nothing is before CKPT's first round reaches LQH).
        r.part = r.part.resumed_at(resume);
        debug_assert_eq!(r.part.durable_gci(), gci);
        let records: Vec<LoggedRecord> = roll.records.into_iter().filter(|x| x.gci <= gci).collect();
        let tables: std::collections::BTreeSet<norr_signals::TableId> =
            records.iter().map(|x| x.record.table).filter(|t| self.defs.contains_key(t)).collect();
        // Replayed as at a restore: in restore mode (no index upkeep, no
        // unique checks on states between the records of one transaction),
        // then the indexes are built again.
        for &t in &tables {
            self.storage.restore_begin(t)?;
        }
        let n = records.len() as u64;
        for rec in records {
            self.restore_record(rec)?;
        }
        for &t in &tables {
            self.storage.restore_finish(t)?;
        }
        self.counters.bump_by("lqh: records rolled forward at a system restart", n);
        Ok(n)
    }

    /// Fill ratio and counters of the REDO part (None: no log).
    pub fn redo_fill_ratio(&self) -> Option<f64> {
        self.redo.as_ref().map(|r| r.part.fill_ratio())
    }

    /// Prepare-time admission of a write (see the module doc).
    pub(super) fn redo_admit(&mut self) -> Result<(), NodeError> {
        let Some(r) = self.redo.as_ref() else { return Ok(()) };
        if let Some(why) = &r.broken {
            // Nothing committed now could become durable (a cluster node
            // leaves; a lone one keeps serving reads until restarted).
            crate::probe!(self.counters, "lqh: write refused, redo log failed");
            return Err(NodeError::with(
                norr_signals::ErrorCode::RedoLogFull,
                format!("the REDO log failed, commits cannot be made durable until the node restarts: {why}"),
            ));
        }
        // The images of uncommitted writes here bound what their commits
        // append; a page of slack covers record headers and keys.
        let want = self.reserved_bytes as usize + 32 * 1024 + DDL_RESET_RESERVE;
        match r.part.check_room(want) {
            Ok(()) => Ok(()),
            Err(e) => {
                match e {
                    AppendError::LogFull => crate::probe!(self.counters, "lqh: write refused, redo log full"),
                    AppendError::BufferFull => crate::probe!(self.counters, "lqh: write refused, redo buffer full"),
                }
                Err(NodeError::with(e.error_code(), format!("{e}")))
            }
        }
    }

    /// Append the changes of a transaction about to be applied at commit.
    pub(super) fn redo_log_commit(&mut self, txn: &LqhTxn, gci: Gci, ctx: &mut Ctx<'_, Signal>) {
        if self.redo.is_none() {
            return;
        }
        let mut records = Vec::with_capacity(txn.pending.len());
        for ((table, _), p) in &txn.pending {
            match (&p.image, p.committed) {
                (Some(img), _) => {
                    records.push(RedoRecord { op: RedoOp::Put, table: *table, partition: p.part, values: img.clone() })
                }
                (None, Some(rid)) => {
                    let row = self.storage.read_row(*table, p.part, rid);
                    let def = self.defs.get(table).expect("a written table is defined");
                    let key = def.primary_key.iter().map(|&c| row[c as usize].clone()).collect();
                    records.push(RedoRecord { op: RedoOp::Delete, table: *table, partition: p.part, values: key });
                }
                // Inserted and deleted again by the transaction: nothing.
                (None, None) => {}
            }
        }
        if records.is_empty() {
            return;
        }
        let r = self.redo.as_mut().expect("checked");
        r.max_gci = r.max_gci.max(gci);
        if let Err(e) = r.part.append(gci, &records) {
            // Admission at prepare should make this impossible; if it
            // happens, no later GCI may be called complete (module doc).
            crate::probe!(self.counters, "lqh: committed changes found no room in the redo log");
            if r.broken.is_none() {
                r.broken = Some(format!("a committed transaction of GCI {gci} could not be logged: {e}"));
            }
        }
        self.redo_pump(ctx);
    }

    /// Room for a rebuilding ALTER's reset record and its `bytes` of
    /// rebuilt rows (`Some`), which writes' `DDL_RESET_RESERVE` stays free
    /// beside (a refused ALTER is undone on every LQH), or for a TRUNCATE's
    /// reset record alone (`None`), which may take the reserve; besides
    /// every uncommitted write here in both cases. Checked before the DDL
    /// changes anything: the append after it cannot be refused.
    pub(super) fn redo_check_ddl_room(&self, rebuilt_bytes: Option<u64>) -> Result<(), NodeError> {
        let Some(r) = self.redo.as_ref() else { return Ok(()) };
        if let Some(why) = &r.broken {
            return Err(NodeError::with(
                norr_signals::ErrorCode::RedoLogFull,
                format!("the REDO log cannot make the change durable: {why}"),
            ));
        }
        let bytes = rebuilt_bytes.unwrap_or(0);
        let reserve = if rebuilt_bytes.is_some() { DDL_RESET_RESERVE } else { 0 };
        let want = (self.reserved_bytes + bytes) as usize + 32 * 1024 + reserve;
        r.part.check_room(want).map_err(|e| {
            NodeError::with(
                e.error_code(),
                format!("{e}: the REDO log has no room for the {bytes} bytes of rows this change rewrites"),
            )
        })
    }

    /// Log the reset of `table` (TRUNCATE, or an ALTER that rebuilt its
    /// rows; `rows` are the rebuilt rows, logged after it as puts). Returns
    /// the GCI the records carry, which must be complete before the DDL is
    /// answered (None: no REDO log, nothing to wait for).
    ///
    /// The GCI: at least every GCI appended here so far (records of the old
    /// rows carry no higher one) and above the last GCP save; every
    /// transaction that writes the table after the reset decides its commit
    /// later than every commit logged before it, so its GCI is at least as
    /// high (GCIs only grow across TCs: a TC's switch to a new GCI waits for
    /// every TC to hold its commits). A restart replays the reset exactly
    /// when it replays any later change of the table, and one to a GCI
    /// below it holds none.
    pub(super) fn redo_log_reset(
        &mut self,
        table: norr_signals::TableId,
        version: u32,
        rows: Vec<RedoRecord>,
        ctx: &mut Ctx<'_, Signal>,
    ) -> Option<Gci> {
        let r = self.redo.as_mut()?;
        let gci = r.max_gci.max(r.part.last_flush_gci() + 1);
        r.max_gci = gci;
        let mut records = Vec::with_capacity(rows.len() + 1);
        records.push(RedoRecord {
            op: RedoOp::Reset,
            table,
            partition: redo::ALL_PARTITIONS,
            values: vec![norr_signals::Value::Int(version as i64)],
        });
        records.extend(rows);
        if let Err(e) = r.part.append(gci, &records) {
            // Checked before the change (`redo_check_ddl_room`); as for a
            // commit, no later GCI may be called complete.
            crate::probe!(self.counters, "lqh: a reset found no room in the redo log");
            if r.broken.is_none() {
                r.broken = Some(format!("the reset of table {table} (GCI {gci}) could not be logged: {e}"));
            }
        }
        self.counters.bump("lqh: table resets logged");
        self.redo_pump(ctx);
        Some(gci)
    }

    /// Every row of `table` this instance holds, as REDO puts (the rows a
    /// rebuilding ALTER TABLE just made).
    pub(super) fn rebuilt_rows_for_redo(&self, table: norr_signals::TableId) -> Vec<RedoRecord> {
        let Some(def) = self.defs.get(&table) else { return Vec::new() };
        let mut records = Vec::new();
        let mut out = Vec::new();
        for part in 0..def.partitions {
            if norr_signals::partition::lqh_instance(part, self.lqh_instances) != self.instance {
                continue;
            }
            // A partition this node does not hold has no storage here.
            let Ok(mut cursor) = self.storage.scan_open(table, part, None, None, false) else { continue };
            loop {
                out.clear();
                let done = match self.storage.scan_next(table, part, &mut cursor, None, 1024, usize::MAX, &mut out) {
                    Ok(d) => d,
                    Err(_) => break,
                };
                for (_, row) in out.drain(..) {
                    records.push(RedoRecord { op: RedoOp::Put, table, partition: part, values: row });
                }
                if done {
                    break;
                }
            }
        }
        records
    }

    /// Answer a schema change once its reset's GCI is complete.
    pub(super) fn redo_hold_schema_conf(&mut self, gci: Gci, to: BlockRef, req: u64, ctx: &mut Ctx<'_, Signal>) {
        let r = self.redo.as_mut().expect("a reset was logged");
        if let Some(why) = r.broken.clone() {
            return Self::schema_conf_after_reset(ctx, to, req, Some(why));
        }
        r.ddl_waits.push((gci, to, req));
        self.redo_answer_ddl(ctx);
    }

    fn schema_conf_after_reset(ctx: &mut Ctx<'_, Signal>, to: BlockRef, req: u64, broken: Option<String>) {
        let error = broken.map(|why| {
            NodeError::with(
                norr_signals::ErrorCode::RedoLogFull,
                format!("the change was made in memory but cannot be made durable: {why}"),
            )
        });
        let s = norr_signals::internal::InternalSignal::SchemaChangeConf { req, error };
        ctx.send(to, Signal::Internal(Box::new(s)));
    }

    fn redo_answer_ddl(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let Some(r) = self.redo.as_mut() else { return };
        let broken = r.broken.clone();
        let complete = r.complete_gci;
        let (done, wait): (Vec<_>, Vec<_>) =
            r.ddl_waits.drain(..).partition(|&(g, _, _)| g <= complete || broken.is_some());
        r.ddl_waits = wait;
        for (_, to, req) in done {
            Self::schema_conf_after_reset(ctx, to, req, broken.clone());
        }
    }

    /// Where the REDO part stands (`StatsReq`: tests, `norrinfo`).
    pub(super) fn redo_stats(&self, counters: &mut Vec<(String, u64)>) {
        let Some(r) = self.redo.as_ref() else { return };
        counters.push(("lqh: redo durable gci".into(), r.part.durable_gci()));
        counters.push(("lqh: redo last flush gci".into(), r.part.last_flush_gci()));
        counters.push(("lqh: redo saves waiting".into(), r.saves.len() as u64));
        counters.push(("lqh: redo files open".into(), r.files.iter().filter(|f| f.is_some()).count() as u64));
        counters.push(("lqh: redo io busy".into(), u64::from(r.io_busy)));
    }

    /// Open the files once, then keep one IO in flight while there is work.
    pub(super) fn redo_pump(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let Some(r) = self.redo.as_mut() else { return };
        if r.files.iter().any(|f| f.is_none()) {
            if !r.opening {
                r.opening = true;
                let part = r.part.part();
                for f in 0..r.files.len() as u32 {
                    let path = redo::file_path(part, f);
                    fs(ctx, OPEN_REQ + f as u64, FsOp::Open { path, create: true, truncate: false });
                }
            }
            return;
        }
        if r.io_busy {
            return;
        }
        match r.part.poll_io() {
            Some(RedoIo::Write { io_id, file_no, offset, data }) => {
                r.io_busy = true;
                let file = r.files[file_no as usize].expect("open");
                fs(ctx, io_id, FsOp::Write { file, offset, data, sync: false });
            }
            Some(RedoIo::Sync { io_id, file_no }) => {
                r.io_busy = true;
                let file = r.files[file_no as usize].expect("open");
                fs(ctx, io_id, FsOp::Sync { file });
            }
            // An armed crash point (tests, the simulator): the node dies here.
            Some(RedoIo::Crash(point)) => panic!("crash point reached: {point}"),
            None => {}
        }
    }

    pub(super) fn on_fs(&mut self, sig: FsSignal, ctx: &mut Ctx<'_, Signal>) {
        if let FsSignal::Conf { req_id, .. } | FsSignal::Ref { req_id, .. } = &sig {
            if (super::lcp::LCP_REQ..OPEN_REQ).contains(req_id) {
                return self.lcp_on_fs(sig, ctx);
            }
        }
        let Some(r) = self.redo.as_mut() else {
            debug_assert!(false, "FS reply to an LQH without a REDO log");
            return;
        };
        match sig {
            FsSignal::Conf { req_id, result: FsResult::Opened { file, .. } } if req_id >= OPEN_REQ => {
                r.files[(req_id - OPEN_REQ) as usize] = Some(file);
            }
            FsSignal::Conf { req_id, .. } => {
                r.io_busy = false;
                match r.part.on_io_done(req_id, Ok(())) {
                    Ok(Some(g)) => self.redo_answer_saves(g, ctx),
                    Ok(None) => {}
                    Err(e) => self.redo_fail(e.to_string(), ctx),
                }
            }
            FsSignal::Ref { req_id, error } => {
                if req_id >= OPEN_REQ {
                    r.opening = false;
                    self.redo_fail(format!("cannot open a REDO log file: {error}"), ctx);
                } else {
                    r.io_busy = false;
                    let e = r.part.on_io_done(req_id, Err(error)).err().map(|e| e.to_string());
                    self.redo_fail(e.unwrap_or_else(|| "REDO IO failed".into()), ctx);
                }
            }
            FsSignal::Req { .. } => debug_assert!(false, "FS request sent to LQH"),
        }
        self.redo_pump(ctx);
    }

    fn redo_fail(&mut self, why: String, ctx: &mut Ctx<'_, Signal>) {
        let r = self.redo.as_mut().expect("redo");
        crate::probe!(self.counters, "lqh: redo log failed");
        if r.broken.is_none() {
            r.broken = Some(why);
        }
        let saves = std::mem::take(&mut r.saves);
        let error = r.broken.clone().expect("set");
        for (gci, to) in saves {
            let s = CkptSignal::GcpSaveRef { gci, error: error.clone() };
            ctx.send_prio(to, Signal::Ckpt(Box::new(s)), Priority::A);
        }
        // GCPs stop: a DDL waiting for one hears why.
        self.redo_answer_ddl(ctx);
    }

    fn redo_answer_saves(&mut self, durable: Gci, ctx: &mut Ctx<'_, Signal>) {
        let r = self.redo.as_mut().expect("redo");
        let (done, wait): (Vec<_>, Vec<_>) = r.saves.drain(..).partition(|&(g, _)| g <= durable);
        r.saves = wait;
        for (gci, to) in done {
            ctx.send_prio(to, Signal::Ckpt(Box::new(CkptSignal::GcpSaveConf { gci })), Priority::A);
        }
    }

    pub(super) fn on_ckpt(&mut self, from: BlockRef, sig: CkptSignal, ctx: &mut Ctx<'_, Signal>) {
        match sig {
            CkptSignal::GcpSaveReq { gci } => {
                let reply = |ctx: &mut Ctx<'_, Signal>, s: CkptSignal| {
                    ctx.send_prio(from, Signal::Ckpt(Box::new(s)), Priority::A)
                };
                let Some(r) = self.redo.as_mut() else {
                    // No data directory: nothing to make durable.
                    return reply(ctx, CkptSignal::GcpSaveConf { gci });
                };
                if let Some(error) = r.broken.clone() {
                    return reply(ctx, CkptSignal::GcpSaveRef { gci, error });
                }
                match r.part.flush_up_to(gci) {
                    Ok(true) => reply(ctx, CkptSignal::GcpSaveConf { gci }),
                    Ok(false) => {
                        r.saves.push((gci, from));
                        self.redo_pump(ctx);
                    }
                    Err(e) => reply(ctx, CkptSignal::GcpSaveRef { gci, error: e.to_string() }),
                }
            }
            CkptSignal::GcpCompleteRep { gci } => {
                if let Some(r) = self.redo.as_mut() {
                    r.complete_gci = r.complete_gci.max(gci);
                    self.redo_answer_ddl(ctx);
                }
            }
            CkptSignal::GcpRestoreToReq { gci } => {
                let error = self.redo_restore_to(gci).err().map(|e| e.to_string());
                let conf = CkptSignal::GcpRestoreToConf { gci, error };
                ctx.send_prio(from, Signal::Ckpt(Box::new(conf)), Priority::A);
                self.schema_changes_after_restore(ctx);
            }
            CkptSignal::LcpStartReq { lcp_id, start_gci } => self.on_lcp_start(from, lcp_id, start_gci, ctx),
            CkptSignal::LcpSlice { lcp_id } => self.on_lcp_slice(lcp_id, ctx),
            CkptSignal::LcpCompleteRep { lcp_id, release_before } => self.on_lcp_complete(lcp_id, release_before, ctx),
            other => {
                crate::probe!(self.counters, "lqh: unexpected checkpoint signal");
                debug_assert!(false, "LQH got unexpected {other:?}");
            }
        }
    }

    /// Restart: create the tables (indexes are built by `restore_finish`).
    pub fn restore_tables(&mut self, defs: &[TableDef]) -> Result<(), NodeError> {
        for def in defs {
            self.storage.create_table(def)?;
            self.storage.restore_begin(def.id)?;
            self.defs.insert(def.id, Arc::new(def.clone()));
        }
        Ok(())
    }

    /// Restart: replay one REDO record (records of dropped tables are skipped).
    pub fn restore_record(&mut self, r: LoggedRecord) -> Result<(), NodeError> {
        let LoggedRecord { gci, record } = r;
        if !self.defs.contains_key(&record.table) {
            crate::probe!(self.counters, "lqh: redo record of a dropped table skipped");
            return Ok(());
        }
        if self.lcp.redo_from.get(&(record.table, record.partition)).is_some_and(|&from| gci < from) {
            // In the partition's checkpoint already (a change of a key is
            // logged in GCI order, so every later change of it is applied).
            return Ok(());
        }
        match record.op {
            RedoOp::Put => self.storage.redo_put(record.table, record.partition, record.values, gci),
            RedoOp::Delete => self.storage.redo_delete(record.table, record.partition, &record.values, gci).map(|_| ()),
            // The host reads the resets before anything is restored and
            // skips what they make obsolete (norr-node's `durable.rs`).
            RedoOp::Reset => Ok(()),
        }
    }

    /// Restart: build the indexes of every restored table.
    pub fn restore_finish(&mut self) -> Result<(), NodeError> {
        self.lcp.redo_from.clear();
        let mut tables: Vec<_> = self.defs.keys().copied().collect();
        tables.sort_unstable();
        for t in tables {
            if self.storage.is_restoring(t) {
                self.storage.restore_finish(t)?;
            }
        }
        Ok(())
    }

    /// Rows of a table (restart reports and tests).
    pub fn row_count(&self, table: norr_signals::TableId) -> u64 {
        self.storage.row_count(table)
    }
}
