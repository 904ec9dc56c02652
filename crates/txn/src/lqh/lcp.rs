//! LQH's side of partial local checkpoints (seed 003; formats in
//! norr-durability's FORMATS.md, the round in `norr_signals::ckpt`).
//!
//! `LcpStartReq` checkpoints the partitions of this instance one after the
//! other. Per partition:
//! 1. The planner (`lcp::next_lcp`) picks the window of parts written in
//!    full from the previous checkpoint and the rows changed since; storage's
//!    `lcp_begin` hands over the tombstones and a scan cursor.
//! 2. The scan runs in slices of `lcp_slice_rows` rows, one `LcpSlice`
//!    signal each, so transactions run in between. Slices are spaced by
//!    `lcp_slice_delay_us`, halved past 25 % REDO fill, quartered past 40 %,
//!    and past 60 % sent as bounded-delay signals (run after at most a few
//!    other signals, however busy the node is).
//! 3. Pages go to `lcp/<t>/<p>/<id>.data` as they fill (one write in
//!    flight; the scan pauses while 1 MiB waits), then the file is synced,
//!    then the control file is written and synced: only then does the
//!    checkpoint count.
//!
//! A partition with nothing changed since its last checkpoint began keeps
//! that checkpoint (it still holds exactly the partition's rows).
//!
//! `LcpCompleteRep` (the system file records the round) releases the REDO
//! log before the round's start GCI and deletes the files the new control
//! files no longer need.

use super::Lqh;
use norr_durability::crash::points;
use norr_durability::lcp::{
    self as dlcp, next_lcp, obsolete_after, LcpControl, LcpDataWriter, LcpIdent, NextLcp, PartWindow, LCP_PAGE_BYTES,
};
use norr_durability::{crash_point, CrashPoints};
use norr_kernel::{BlockRef, Ctx, Priority};
use norr_signals::ckpt::{CkptSignal, Gci};
use norr_signals::fs::{FileHandle, FsOp, FsResult, FsSignal};
use norr_signals::schema::{PartitionId, TableId};
use norr_signals::{block, Signal};
use norr_storage::{LcpRow, LcpScan, PartSet, Tombstone};
use std::collections::{BTreeMap, VecDeque};

/// FS request ids of checkpoint IO: this plus a counter (below the REDO
/// log's open ids, far above its IO ids).
pub(super) const LCP_REQ: u64 = 1 << 61;
/// Bytes of data pages collected before a write is issued.
const WRITE_CHUNK: usize = 256 * 1024;
/// The scan pauses while this much waits for the disk.
const MAX_BUFFERED: usize = 1 << 20;
/// At full speed a slice runs after at most this many other signals.
const FULL_SPEED_BOUND: u32 = 16;

/// The FS step in flight for the partition being checkpointed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Io {
    Idle,
    OpenData,
    WriteData(usize),
    SyncData,
    CloseData,
    OpenControl,
    WriteControl,
    CloseControl,
}

/// The checkpoint of one partition in progress.
struct FragLcp {
    table: TableId,
    part: PartitionId,
    table_version: u32,
    plan: NextLcp,
    scan: LcpScan,
    /// Given back to storage if the checkpoint is abandoned.
    tombstones: Vec<Tombstone>,
    writer: Option<LcpDataWriter>,
    /// Sealed pages not yet written.
    pending: Vec<u8>,
    offset: u64,
    file: Option<FileHandle>,
    summary: Option<dlcp::LcpDataSummary>,
    control: Option<LcpControl>,
    io: Io,
    io_req: u64,
    scan_done: bool,
    slice_scheduled: bool,
    /// The scan stopped for want of disk progress; the next write resumes it.
    paused: bool,
}

struct Round {
    lcp_id: u64,
    start_gci: Gci,
    coordinator: BlockRef,
    todo: VecDeque<(TableId, PartitionId)>,
    cur: Option<FragLcp>,
    max_gci: Gci,
    partitions: u32,
    rows: u64,
    bytes: u64,
}

#[derive(Default)]
pub(super) struct LqhLcp {
    /// The newest complete checkpoint of each partition (the chain goes on
    /// from it).
    controls: BTreeMap<(TableId, PartitionId), LcpControl>,
    /// Files that become obsolete once the system file records the round
    /// (id) whose control files replaced them.
    obsolete: Vec<(u64, String)>,
    round: Option<Round>,
    next_req: u64,
    pub(super) crash: CrashPoints,
    /// Highest LCP id on disk (a new round must use a higher one).
    pub(super) max_id_seen: u64,
    /// Restart only: REDO records of a partition below this GCI are in its
    /// checkpoint already (absent: apply all).
    pub(super) redo_from: BTreeMap<(TableId, PartitionId), Gci>,
    /// The highest `start_gci` of a round begun here (rows copied at a node
    /// restart are tagged at least this: see `resync.rs`).
    pub(super) max_start_gci: Gci,
    rows_scratch: Vec<LcpRow>,
}

fn fs(ctx: &mut Ctx<'_, Signal>, req_id: u64, op: FsOp) {
    let to = BlockRef::new(ctx.self_ref().node, block::FS, 0);
    ctx.send_prio(to, Signal::Fs(Box::new(FsSignal::Req { req_id, op })), Priority::B);
}

fn ckpt(ctx: &mut Ctx<'_, Signal>, to: BlockRef, s: CkptSignal) {
    ctx.send_prio(to, Signal::Ckpt(Box::new(s)), Priority::A);
}

/// How long until the next slice, by REDO fill (None: as soon as possible,
/// with a bounded delay).
pub(crate) fn slice_delay_ns(base_us: u64, fill: f64) -> Option<u64> {
    let base = base_us.saturating_mul(1_000);
    if fill >= 0.60 || base == 0 {
        None
    } else if fill >= 0.40 {
        Some(base / 4)
    } else if fill >= 0.25 {
        Some(base / 2)
    } else {
        Some(base)
    }
}

/// The part window storage actually used, as the control file records it.
fn used_window(asked: PartWindow, used: &PartSet) -> PartWindow {
    if used.is_all() {
        PartWindow::ALL
    } else {
        debug_assert_eq!(used.len(), asked.count as u32);
        asked
    }
}

/// Whether a partition's next checkpoint may continue the chain of its
/// previous one (`prev`), or must be a whole one. A partial checkpoint takes,
/// outside its whole parts, the rows of GCI `prev.start_gci` and later: the
/// chain must hold every row below that. Not so for another table version,
/// nor when the previous round began after this one (a restart to an older
/// GCI: rows committed again at GCIs below `prev.start_gci` would be missed).
/// A round that begins at the same GCI as the previous one (no GCI completed
/// between them) continues it.
fn continues(prev: &LcpControl, table_version: u32, start_gci: Gci) -> bool {
    prev.table_version == table_version && prev.start_gci <= start_gci
}

impl Lqh {
    /// Restart: the newest checkpoint of a partition restored from (the
    /// next one continues its chain), and the highest LCP id found on disk.
    /// A node restart copies every partition again, in full or as a delta
    /// (`resync.rs`): the checkpoints on disk no longer describe storage (a
    /// row deleted in the cluster meanwhile has no tombstone), so each
    /// partition's next checkpoint is a whole one, with no chain to them.
    pub(super) fn forget_lcp_chains(&mut self) {
        self.lcp.controls.clear();
    }

    pub fn restore_lcp_control(&mut self, control: Option<LcpControl>, max_id_on_disk: u64) {
        let l = &mut self.lcp;
        l.max_id_seen = l.max_id_seen.max(max_id_on_disk);
        if let Some(c) = control {
            l.max_id_seen = l.max_id_seen.max(c.lcp_id);
            l.controls.insert((c.table, c.partition), c);
        }
    }

    /// Restart: apply one entry of a checkpoint data file (the restore plan
    /// says which; tombstones of a file before its rows).
    pub fn restore_lcp_entry(
        &mut self,
        table: TableId,
        part: PartitionId,
        entry: dlcp::LcpEntry,
    ) -> Result<(), norr_signals::NodeError> {
        match entry {
            dlcp::LcpEntry::Row { part: lcp_part, gci, row } => {
                self.storage.restore_put(table, part, lcp_part, row, gci)
            }
            dlcp::LcpEntry::Tombstone { part: lcp_part, key, .. } => {
                self.storage.restore_delete(table, part, lcp_part, &key).map(|_| ())
            }
        }
    }

    /// Restart: make room for about `rows` rows in a partition before its
    /// checkpoint files are read (saves rehashing as the index grows).
    pub fn restore_reserve_rows(
        &mut self,
        table: TableId,
        part: PartitionId,
        rows: u64,
    ) -> Result<(), norr_signals::NodeError> {
        self.storage.reserve_rows(table, part, rows)
    }

    /// Restart: the partition was restored from a checkpoint whose REDO
    /// replay point is `gci` (records below it are in the checkpoint).
    pub fn restore_redo_from(&mut self, table: TableId, part: PartitionId, gci: Gci) {
        self.lcp.redo_from.insert((table, part), gci);
    }

    /// Crash points of the checkpoint steps (tests).
    pub fn lcp_crash_points_mut(&mut self) -> &mut CrashPoints {
        &mut self.lcp.crash
    }

    /// Highest LCP id this instance has seen (on disk or written).
    pub fn lcp_max_id(&self) -> u64 {
        self.lcp.max_id_seen
    }

    /// The partitions this instance checkpoints, in a fixed order.
    fn lcp_partitions(&self) -> VecDeque<(TableId, PartitionId)> {
        let mut tables: Vec<_> = self.defs.values().cloned().collect();
        tables.sort_by_key(|d| d.id);
        let mut v = VecDeque::new();
        for def in tables {
            for p in 0..def.partitions {
                if norr_signals::partition::lqh_instance(p, self.lqh_instances) != self.instance {
                    continue;
                }
                if self.dist.states.len() > 1 && !self.dist.holds(&def, p, self.node) {
                    continue;
                }
                v.push_back((def.id, p));
            }
        }
        v
    }

    fn redo_fill(&self) -> f64 {
        self.redo_fill_ratio().unwrap_or(0.0)
    }

    pub(super) fn on_lcp_start(&mut self, from: BlockRef, lcp_id: u64, start_gci: Gci, ctx: &mut Ctx<'_, Signal>) {
        if self.lcp.round.is_some() || lcp_id <= self.lcp.max_id_seen {
            let error = format!(
                "LCP {lcp_id} refused: {}",
                if self.lcp.round.is_some() { "a round is running" } else { "the id was used already" }
            );
            return ckpt(ctx, from, CkptSignal::LcpInstanceRef { lcp_id, error });
        }
        self.lcp.max_id_seen = lcp_id;
        self.lcp.max_start_gci = self.lcp.max_start_gci.max(start_gci);
        self.counters.bump("lqh: lcp rounds");
        let todo = self.lcp_partitions();
        self.lcp.round = Some(Round {
            lcp_id,
            start_gci,
            coordinator: from,
            todo,
            cur: None,
            max_gci: 0,
            partitions: 0,
            rows: 0,
            bytes: 0,
        });
        self.lcp_next_partition(ctx);
    }

    /// Begin the next partition that needs a checkpoint, or answer.
    fn lcp_next_partition(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let max_chain = self.lcp_max_chain;
        loop {
            let round = self.lcp.round.as_mut().expect("a round");
            debug_assert!(round.cur.is_none());
            let Some((table, part)) = round.todo.pop_front() else {
                let r = self.lcp.round.take().expect("a round");
                let s = CkptSignal::LcpInstanceConf {
                    lcp_id: r.lcp_id,
                    max_gci: r.max_gci,
                    partitions: r.partitions,
                    rows: r.rows,
                    bytes: r.bytes,
                    redo_fill_permille: (self.redo_fill() * 1000.0) as u32,
                };
                return ckpt(ctx, r.coordinator, s);
            };
            let (lcp_id, start_gci) = (round.lcp_id, round.start_gci);
            let (Ok(stats), Some(def)) = (self.storage.lcp_stats(table, part), self.defs.get(&table).cloned()) else {
                continue; // dropped since the round began
            };
            let prev = self.lcp.controls.get(&(table, part));
            if let Some(p) = prev {
                if stats.chain && stats.rows_changed == 0 && stats.tombstones == 0 && p.table_version == def.version {
                    // Its checkpoint still holds exactly its rows.
                    self.counters.bump("lqh: lcp partitions unchanged");
                    round.max_gci = round.max_gci.max(p.max_gci);
                    continue;
                }
            }
            let prev = prev.filter(|p| continues(p, def.version, start_gci));
            let mut plan = next_lcp(prev, lcp_id, stats.rows_changed, stats.rows, max_chain);
            let asked = PartSet::window(plan.full_parts.first as u32, plan.full_parts.count as u32);
            let (scan, tombstones) = match self.storage.lcp_begin(table, part, asked, plan.since_gci) {
                Ok(x) => x,
                Err(e) => {
                    // A table being restored or altered: try next round.
                    crate::probe!(self.counters, "lqh: lcp of a partition could not begin");
                    let r = self.lcp.round.take().expect("a round");
                    let error = format!("checkpoint of table {table} partition {part}: {e}");
                    return ckpt(ctx, r.coordinator, CkptSignal::LcpInstanceRef { lcp_id, error });
                }
            };
            let used = used_window(plan.full_parts, scan.full_parts());
            if used != plan.full_parts {
                // Storage ended the chain (truncate, rebuild): a new one starts.
                plan.full_parts = used;
                plan.chain.clear();
            }
            // Equal when no GCI completed between the two rounds (a copied
            // node left alone in its group records GCIs that never complete:
            // CKPT `record_targets`); the rows of GCI `since_gci` and later
            // are taken either way.
            debug_assert!(plan.since_gci <= start_gci);
            let ident = LcpIdent { table, partition: part, lcp_id };
            let mut writer = LcpDataWriter::new(ident, LCP_PAGE_BYTES);
            for t in &tombstones {
                writer.push_tombstone(t.lcp_part, t.gci, &t.key);
            }
            let pending = writer.take_ready();
            round.cur = Some(FragLcp {
                table,
                part,
                table_version: def.version,
                plan,
                scan,
                tombstones,
                writer: Some(writer),
                pending,
                offset: 0,
                file: None,
                summary: None,
                control: None,
                io: Io::Idle,
                io_req: 0,
                scan_done: false,
                slice_scheduled: false,
                paused: false,
            });
            self.lcp_schedule_slice(ctx);
            self.lcp_pump(ctx);
            return;
        }
    }

    fn lcp_schedule_slice(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let fill = self.redo_fill();
        let base = self.lcp_slice_delay_us;
        let Some(round) = self.lcp.round.as_mut() else { return };
        let lcp_id = round.lcp_id;
        let Some(f) = round.cur.as_mut() else { return };
        if f.slice_scheduled || f.scan_done {
            return;
        }
        f.slice_scheduled = true;
        let me = ctx.self_ref();
        let sig = Signal::Ckpt(Box::new(CkptSignal::LcpSlice { lcp_id }));
        match slice_delay_ns(base, fill) {
            Some(d) => ctx.send_delayed(me, sig, d),
            None => ctx.send_bounded(me, sig, FULL_SPEED_BOUND),
        }
    }

    /// One slice of the running scan.
    pub(super) fn on_lcp_slice(&mut self, lcp_id: u64, ctx: &mut Ctx<'_, Signal>) {
        let rows_per_slice = self.lcp_slice_rows;
        let Some(round) = self.lcp.round.as_mut().filter(|r| r.lcp_id == lcp_id) else {
            return;
        };
        let Some(f) = round.cur.as_mut() else { return };
        if !f.slice_scheduled {
            return;
        }
        f.slice_scheduled = false;
        if f.scan_done {
            return;
        }
        if f.pending.len() >= MAX_BUFFERED {
            crate::probe!(self.counters, "lqh: lcp scan waits for the disk");
            f.paused = true;
            return;
        }
        self.counters.bump("lqh: lcp slices");
        let mut rows = std::mem::take(&mut self.lcp.rows_scratch);
        rows.clear();
        match self.storage.lcp_next(&mut f.scan, rows_per_slice, &mut rows) {
            Ok(done) => {
                let w = f.writer.as_mut().expect("writing");
                for r in rows.drain(..) {
                    w.push_row(r.lcp_part, r.gci, &r.row);
                }
                f.pending.extend(w.take_ready());
                f.scan_done = done;
            }
            Err(e) => {
                // Only a DDL can end a scan (drop, truncate, rebuild): the
                // partition's next checkpoint starts over; this round skips it.
                crate::probe!(self.counters, "lqh: lcp scan ended by ddl");
                let _ = e;
                f.scan_done = true;
                f.writer = None;
            }
        }
        self.lcp.rows_scratch = rows;
        self.lcp_schedule_slice(ctx);
        self.lcp_pump(ctx);
    }

    fn lcp_req(&mut self) -> u64 {
        self.lcp.next_req += 1;
        LCP_REQ + self.lcp.next_req
    }

    /// Issue the next IO of the partition's checkpoint if none is in flight.
    fn lcp_pump(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let req = self.lcp_req();
        let Some(round) = self.lcp.round.as_mut() else { return };
        let Some(f) = round.cur.as_mut() else { return };
        if f.io != Io::Idle {
            return;
        }
        let ident = LcpIdent { table: f.table, partition: f.part, lcp_id: round.lcp_id };
        // The scan was ended by a DDL: drop this checkpoint (its files,
        // never given a control file, are removed by the next one's
        // truncate or as obsolete at a restart).
        if f.writer.is_none() && f.summary.is_none() {
            if let Some(file) = f.file.take() {
                f.io = Io::CloseData;
                f.io_req = req;
                return fs(ctx, req, FsOp::Close { file });
            }
            let f = round.cur.take().expect("cur");
            let _ = self.storage.lcp_abandon(f.scan, f.tombstones);
            return self.lcp_next_partition(ctx);
        }
        let Some(file) = f.file else {
            f.io = Io::OpenData;
            f.io_req = req;
            return fs(ctx, req, FsOp::Open { path: ident.data_path(), create: true, truncate: true });
        };
        if f.scan_done && f.summary.is_none() {
            let (rest, summary) = f.writer.take().expect("writing").finish();
            f.pending.extend(rest);
            f.summary = Some(summary);
        }
        let finished = f.summary.is_some();
        if f.pending.len() >= WRITE_CHUNK || (finished && !f.pending.is_empty()) {
            let data = std::mem::take(&mut f.pending);
            f.io = Io::WriteData(data.len());
            f.io_req = req;
            let offset = f.offset;
            return fs(ctx, req, FsOp::Write { file, offset, data, sync: false });
        }
        if finished && f.control.is_none() {
            if crash_point!(self.lcp.crash, points::LCP_AFTER_DATA_BEFORE_SYNC) {
                panic!("crash point reached: {}", points::LCP_AFTER_DATA_BEFORE_SYNC);
            }
            let summary = f.summary.expect("finished");
            let c = LcpControl {
                table: f.table,
                partition: f.part,
                lcp_id: round.lcp_id,
                table_version: f.table_version,
                start_gci: round.start_gci,
                since_gci: f.plan.since_gci,
                max_gci: summary.max_gci,
                full_parts: f.plan.full_parts,
                data: summary,
                chain: f.plan.chain.clone(),
            };
            f.control = Some(c);
            f.io = Io::SyncData;
            f.io_req = req;
            fs(ctx, req, FsOp::Sync { file });
        }
    }

    pub(super) fn lcp_on_fs(&mut self, sig: FsSignal, ctx: &mut Ctx<'_, Signal>) {
        let (req_id, result) = match sig {
            FsSignal::Conf { req_id, result } => (req_id, Ok(result)),
            FsSignal::Ref { req_id, error } => (req_id, Err(error)),
            FsSignal::Req { .. } => return debug_assert!(false, "FS request sent to LQH"),
        };
        let Some(round) = self.lcp.round.as_mut() else {
            // The reply to an obsolete file's removal.
            if let Err(e) = result {
                crate::probe!(self.counters, "lqh: lcp obsolete file not removed");
                let _ = e;
            }
            return;
        };
        let lcp_id = round.lcp_id;
        let Some(f) = round.cur.as_mut().filter(|f| f.io_req == req_id) else {
            if result.is_err() {
                crate::probe!(self.counters, "lqh: lcp obsolete file not removed");
            }
            return;
        };
        let result = match result {
            Ok(r) => r,
            Err(error) => {
                // Disk full, IO error: the round fails here; the REDO log
                // is not released. The partition's chain goes on from its
                // previous checkpoint (storage gets its tombstones back).
                crate::probe!(self.counters, "lqh: lcp io failed");
                let f = round.cur.take().expect("cur");
                let r = self.lcp.round.take().expect("round");
                let _ = self.storage.lcp_abandon(f.scan, f.tombstones);
                if let Some(file) = f.file {
                    let req = self.lcp_req();
                    fs(ctx, req, FsOp::Close { file });
                }
                let error = format!("checkpoint {lcp_id} of table {} partition {}: {error}", f.table, f.part);
                return ckpt(ctx, r.coordinator, CkptSignal::LcpInstanceRef { lcp_id, error });
            }
        };
        let io = std::mem::replace(&mut f.io, Io::Idle);
        let ident = LcpIdent { table: f.table, partition: f.part, lcp_id };
        match (io, result) {
            (Io::OpenData, FsResult::Opened { file, .. }) | (Io::OpenControl, FsResult::Opened { file, .. }) => {
                f.file = Some(file);
                if io == Io::OpenControl {
                    let data = f.control.as_ref().expect("control").encode();
                    let req = self.lcp_req();
                    let f = self.lcp.round.as_mut().and_then(|r| r.cur.as_mut()).expect("cur");
                    f.io = Io::WriteControl;
                    f.io_req = req;
                    return fs(ctx, req, FsOp::Write { file, offset: 0, data, sync: true });
                }
            }
            (Io::WriteData(n), FsResult::Written) => {
                f.offset += n as u64;
                if f.paused {
                    f.paused = false;
                    self.lcp_schedule_slice(ctx);
                }
            }
            (Io::SyncData, FsResult::Synced) => {
                if crash_point!(self.lcp.crash, points::LCP_AFTER_DATA_SYNC_BEFORE_CONTROL) {
                    panic!("crash point reached: {}", points::LCP_AFTER_DATA_SYNC_BEFORE_CONTROL);
                }
                let file = f.file.take().expect("open");
                let req = self.lcp_req();
                let f = self.lcp.round.as_mut().and_then(|r| r.cur.as_mut()).expect("cur");
                f.io = Io::CloseData;
                f.io_req = req;
                return fs(ctx, req, FsOp::Close { file });
            }
            (Io::CloseData, FsResult::Closed) => {
                if f.control.is_some() {
                    let req = self.lcp_req();
                    let f = self.lcp.round.as_mut().and_then(|r| r.cur.as_mut()).expect("cur");
                    f.io = Io::OpenControl;
                    f.io_req = req;
                    return fs(ctx, req, FsOp::Open { path: ident.control_path(), create: true, truncate: true });
                }
            }
            (Io::WriteControl, FsResult::Written) => {
                let file = f.file.take().expect("open");
                let req = self.lcp_req();
                let f = self.lcp.round.as_mut().and_then(|r| r.cur.as_mut()).expect("cur");
                f.io = Io::CloseControl;
                f.io_req = req;
                return fs(ctx, req, FsOp::Close { file });
            }
            (Io::CloseControl, FsResult::Closed) => return self.lcp_partition_done(ctx),
            (io, result) => {
                debug_assert!(false, "LQH checkpoint step {io:?} got {result:?}");
                crate::probe!(self.counters, "lqh: unexpected lcp fs reply");
            }
        }
        self.lcp_pump(ctx);
    }

    /// The control file is durable: the checkpoint counts.
    fn lcp_partition_done(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let round = self.lcp.round.as_mut().expect("round");
        let f = round.cur.take().expect("cur");
        let c = f.control.expect("control written");
        round.partitions += 1;
        round.rows += c.data.rows;
        round.bytes += c.data.bytes;
        round.max_gci = round.max_gci.max(c.max_gci).max(c.data.max_gci);
        self.counters.bump("lqh: lcp partitions written");
        let key = (c.table, c.partition);
        if let Some(prev) = self.lcp.controls.get(&key) {
            let ids = if prev.table_version == c.table_version && !c.chain.is_empty() {
                obsolete_after(&c, prev)
            } else {
                prev.chain.iter().map(|l| l.lcp_id).chain([prev.lcp_id]).collect()
            };
            for id in ids {
                let ident = LcpIdent { table: c.table, partition: c.partition, lcp_id: id };
                // The control file first: a data file without one is ignored.
                self.lcp.obsolete.push((c.lcp_id, ident.control_path()));
                self.lcp.obsolete.push((c.lcp_id, ident.data_path()));
            }
        }
        self.lcp.controls.insert(key, c);
        self.lcp_next_partition(ctx);
    }

    /// The system file records round `lcp_id`: free the REDO log before its
    /// start GCI and delete the files no restart needs.
    pub(super) fn on_lcp_complete(&mut self, lcp_id: u64, release_before: Gci, ctx: &mut Ctx<'_, Signal>) {
        if let Some(r) = self.redo.as_mut() {
            r.release_before(release_before);
        }
        if crash_point!(self.lcp.crash, points::LCP_AFTER_CONTROL_BEFORE_DELETE) {
            panic!("crash point reached: {}", points::LCP_AFTER_CONTROL_BEFORE_DELETE);
        }
        let (now, later): (Vec<_>, Vec<_>) = self.lcp.obsolete.drain(..).partition(|(id, _)| *id <= lcp_id);
        self.lcp.obsolete = later;
        for (_, path) in now {
            let req = self.lcp_req();
            fs(ctx, req, FsOp::Remove { path });
        }
        self.redo_pump(ctx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_speed_up_as_the_redo_log_fills() {
        assert_eq!(slice_delay_ns(1000, 0.0), Some(1_000_000));
        assert_eq!(slice_delay_ns(1000, 0.24), Some(1_000_000));
        assert_eq!(slice_delay_ns(1000, 0.25), Some(500_000));
        assert_eq!(slice_delay_ns(1000, 0.41), Some(250_000));
        assert_eq!(slice_delay_ns(1000, 0.60), None);
        assert_eq!(slice_delay_ns(0, 0.0), None);
    }

    #[test]
    fn a_round_continues_the_chain_unless_it_began_before_it() {
        let prev = LcpControl {
            table: 1,
            partition: 0,
            lcp_id: 4,
            table_version: 2,
            start_gci: 100,
            since_gci: 90,
            max_gci: 103,
            full_parts: PartWindow::ALL,
            data: dlcp::LcpDataSummary {
                bytes: 0,
                page_bytes: LCP_PAGE_BYTES,
                crc: 0,
                rows: 0,
                tombstones: 0,
                max_gci: 103,
                row_bytes: 0,
            },
            chain: Vec::new(),
        };
        assert!(continues(&prev, 2, 107), "the usual case: a later round");
        // The chaos test's case: a copied node alone in its group, no GCI
        // completed since the previous round began. Continuing is right
        // (the partial parts take the rows of GCI 100 and later); the
        // debug assertion here aborted the node, the group's last one.
        assert!(continues(&prev, 2, 100));
        assert!(next_lcp(Some(&prev), 5, 1, 1000, 8).since_gci <= 100);
        // After a restart to an older GCI: a whole checkpoint.
        assert!(!continues(&prev, 2, 99));
        assert!(!continues(&prev, 3, 107), "another table version");
    }

    #[test]
    fn the_window_recorded_is_the_one_storage_used() {
        let asked = PartWindow::new(2000, 100);
        assert_eq!(used_window(asked, &PartSet::window(2000, 100)), asked);
        assert_eq!(used_window(asked, &PartSet::all()), PartWindow::ALL);
    }
}
