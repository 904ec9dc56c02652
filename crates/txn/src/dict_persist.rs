//! DICT's schema on disk (a node with a data directory): after every
//! committed schema change, and before the client hears of it, DICT writes
//! the whole schema as a new `schema/schema.dat` (norr-durability's
//! `SchemaSnapshot`): to `schema/schema.tmp`, synced, then renamed over the
//! old one (the FS block makes the rename durable). A crash at any point
//! leaves the old or the new schema, never a mix; a DDL whose reply was
//! sent is on disk. At start the host reads the file and hands it to
//! `Dict::restore_schema`.
//!
//! AUTO_INCREMENT counters survive restarts without any DDL: before DICT
//! answers a reservation whose values pass a table's mark on disk, it
//! writes a new mark `AUTO_INC_MARK_AHEAD` above them (a snapshot, as for
//! a DDL) and answers once that write is done. A restart continues at the
//! mark: gaps are allowed (NDB's semantics), handing out a value twice
//! never. One schema write per `AUTO_INC_MARK_AHEAD` values a table uses.

use super::{Dict, DictResult};
use norr_durability::crash::points;
use norr_durability::crash_point;
use norr_durability::schema::{SchemaSnapshot, SCHEMA_FILE, SCHEMA_TMP};
use norr_kernel::{BlockRef, Ctx, Priority};
use norr_signals::cluster::ClusterSignal;
use norr_signals::fs::{FileHandle, FsOp, FsResult, FsSignal};
use norr_signals::schema::TableId;
use norr_signals::{block, ErrorCode, NodeError, Signal};
use std::collections::BTreeMap;

enum Step {
    Open,
    Write(FileHandle),
    Close,
    Rename,
}

pub(super) struct Persist {
    /// The write in progress and the answer held back until it is done
    /// (None: a write of a change another DICT committed).
    writing: Option<(Step, Option<DictResult>, Vec<u8>)>,
    /// Snapshots written (the id of the last DDL included).
    written: u64,
    /// A committed change's answer waiting for the write in progress to end
    /// (then its own write starts).
    held: Option<DictResult>,
    /// The schema changed again during a background write: write again.
    again: bool,
    /// The last snapshot whose write completed (its id).
    durable: u64,
    /// Per table: the AUTO_INCREMENT mark snapshots hold (values below it
    /// may be handed out) and the id of the first write that holds it.
    auto_inc_marks: BTreeMap<TableId, (u64, u64)>,
    /// Reservations answered once snapshot `needs` is durable.
    auto_inc_waiting: Vec<AutoIncWait>,
    /// Non-master: acknowledgements the master waits for (a DDL's change,
    /// an AUTO_INCREMENT mark) once the write that holds them is durable.
    state_acks: Vec<(u64, BlockRef, ClusterSignal)>,
}

struct AutoIncWait {
    from: BlockRef,
    req_id: u32,
    result: DictResult,
    needs: u64,
}

/// How far above the values handed out a new AUTO_INCREMENT mark goes.
const AUTO_INC_MARK_AHEAD: u64 = 4096;

/// Most reservations waiting for a mark's write (then Overloaded).
const MAX_AUTO_INC_WAITING: usize = 4096;

impl Persist {
    pub(super) fn new() -> Persist {
        Persist {
            writing: None,
            written: 0,
            held: None,
            again: false,
            durable: 0,
            auto_inc_marks: BTreeMap::new(),
            auto_inc_waiting: Vec::new(),
            state_acks: Vec::new(),
        }
    }
}

/// A reservation refused because too many wait already (for a mark's
/// write here or for the other DICTs' acknowledgements).
pub(super) fn too_many_reservations() -> NodeError {
    NodeError::with(ErrorCode::Overloaded, "too many AUTO_INCREMENT reservations in flight")
}

fn fs(ctx: &mut Ctx<'_, Signal>, req_id: u64, op: FsOp) {
    let to = BlockRef::new(ctx.self_ref().node, block::FS, 0);
    ctx.send_prio(to, Signal::Fs(Box::new(FsSignal::Req { req_id, op })), Priority::A);
}

impl Dict {
    /// Keep the schema in the data directory (see the module doc).
    pub fn enable_persistence(&mut self) {
        self.persist = Some(Persist::new());
    }

    /// A restarted node's schema, before the first signal.
    pub fn restore_schema(&mut self, snap: &SchemaSnapshot) {
        self.tables = snap.tables.clone();
        self.next_table_id = self.next_table_id.max(snap.next_table_id);
        let max_index = snap.tables.values().flat_map(|t| t.indexes.iter().map(|i| i.id)).max().unwrap_or(0);
        self.next_index_id = self.next_index_id.max(max_index + 1);
        self.auto_inc = snap.tables.keys().map(|&t| (t, snap.auto_inc.get(&t).copied().unwrap_or(1))).collect();
        // A change the master announced before every node stopped: the
        // master after the restart makes it again (no client waits for it).
        let nobody = BlockRef::new(0, block::API, 0);
        self.pending = snap.pending.clone().map(|c| (c, (nobody, 0)));
        self.unsettled = true;
        if let Some(p) = self.persist.as_mut() {
            p.written = snap.last_ddl_id;
            p.durable = snap.last_ddl_id;
        }
    }

    fn snapshot(&self, id: u64) -> SchemaSnapshot {
        let marks = self.persist.as_ref().map(|p| &p.auto_inc_marks);
        let auto_inc = self
            .auto_inc
            .iter()
            .map(|(t, n)| (*t, marks.and_then(|m| m.get(t)).map_or(*n, |(mark, _)| (*mark).max(*n))))
            .collect();
        // A change announced and not ended: this node's or, at the master,
        // the one it is making (see `Dict::take_over`).
        let pending = self
            .pending
            .as_ref()
            .map(|(c, _)| c.clone())
            .or_else(|| self.active.as_ref().and_then(|a| a.announced_change.clone()));
        SchemaSnapshot {
            last_ddl_id: id,
            next_table_id: self.next_table_id,
            tables: self.tables.clone(),
            auto_inc,
            pending,
        }
    }

    /// Answer an AUTO_INCREMENT reservation of `table` whose counter is now
    /// `next`: at once if a durable mark covers it, else once a snapshot
    /// with a new mark is written (see the module doc).
    pub(super) fn answer_auto_inc(
        &mut self,
        from: BlockRef,
        req_id: u32,
        table: TableId,
        next: u64,
        result: DictResult,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        let Some(p) = self.persist.as_mut() else { return Self::conf(ctx, from, req_id, result) };
        let needs = match p.auto_inc_marks.get(&table) {
            Some((mark, write)) if *mark >= next => *write,
            _ => {
                if p.auto_inc_waiting.len() >= MAX_AUTO_INC_WAITING {
                    let e = too_many_reservations();
                    return Self::dref(ctx, from, req_id, e);
                }
                // The next write started holds the mark: one in progress
                // was encoded before it.
                let write = p.written + 1;
                p.auto_inc_marks.insert(table, (next.saturating_add(AUTO_INC_MARK_AHEAD), write));
                self.counters.bump("dict: auto-increment marks written");
                self.persist_in_background(ctx);
                write
            }
        };
        let p = self.persist.as_mut().expect("persisting");
        if p.durable >= needs {
            return Self::conf(ctx, from, req_id, result);
        }
        if p.auto_inc_waiting.len() >= MAX_AUTO_INC_WAITING {
            let e = too_many_reservations();
            return Self::dref(ctx, from, req_id, e);
        }
        p.auto_inc_waiting.push(AutoIncWait { from, req_id, result, needs });
    }

    /// `table` was dropped or truncated: its counter starts afresh.
    pub(super) fn forget_auto_inc_mark(&mut self, table: TableId) {
        if let Some(p) = self.persist.as_mut() {
            p.auto_inc_marks.remove(&table);
        }
    }

    /// Snapshot `id` is durable (`ok`) or failed: answer the reservations
    /// that waited for it.
    fn auto_inc_write_ended(&mut self, id: u64, ok: bool, ctx: &mut Ctx<'_, Signal>) {
        let p = self.persist.as_mut().expect("persisting");
        if ok {
            debug_assert!(id > p.durable, "snapshot {id} after {}", p.durable);
            p.durable = id;
        } else {
            // Marks of this write are not on disk: the next reservation of
            // those tables writes again.
            p.auto_inc_marks.retain(|_, (_, w)| *w > id);
        }
        let (ready, wait): (Vec<_>, Vec<_>) =
            std::mem::take(&mut p.auto_inc_waiting).into_iter().partition(|w| w.needs <= id);
        p.auto_inc_waiting = wait;
        for w in ready {
            if ok {
                Self::conf(ctx, w.from, w.req_id, w.result);
            } else {
                let e = NodeError::with(
                    ErrorCode::Internal,
                    "the AUTO_INCREMENT counter could not be written to the data directory",
                );
                Self::dref(ctx, w.from, w.req_id, e);
            }
        }
    }

    /// A committed change: write the schema, then answer with `r`. Gives
    /// `r` back if there is no data directory (answer now).
    pub(super) fn persist_then_finish(&mut self, r: DictResult, ctx: &mut Ctx<'_, Signal>) -> Option<DictResult> {
        let Some(p) = self.persist.as_mut() else { return Some(r) };
        if p.writing.is_some() {
            assert!(p.held.is_none(), "one schema change at a time");
            p.held = Some(r);
            return None;
        }
        self.start_write(Some(r), ctx);
        None
    }

    /// A schema change committed by the master DICT (or the whole schema at
    /// a node restart) reached this node: write it too, with no one waiting,
    /// so that every node's files hold the tables its REDO log refers to.
    pub(super) fn persist_in_background(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let Some(p) = self.persist.as_mut() else { return };
        if p.writing.is_some() {
            p.again = true;
            return;
        }
        self.start_write(None, ctx);
    }

    fn start_write(&mut self, r: Option<DictResult>, ctx: &mut Ctx<'_, Signal>) {
        let p = self.persist.as_ref().expect("persisting");
        let id = p.written + 1;
        let bytes = self.snapshot(id).encode();
        let p = self.persist.as_mut().expect("checked");
        assert!(p.writing.is_none(), "one schema write at a time");
        p.written = id;
        p.writing = Some((Step::Open, r, bytes));
        fs(ctx, id, FsOp::Open { path: SCHEMA_TMP.into(), create: true, truncate: true });
    }

    /// The id of the next schema write started (it holds every change made
    /// so far); None without a data directory.
    pub(super) fn next_schema_write(&self) -> Option<u64> {
        self.persist.as_ref().map(|p| p.written + 1)
    }

    /// Non-master: tell `master` that the DDL change just applied is in the
    /// schema file, once schema write `write` ended (now if None).
    pub(super) fn ack_state_after(&mut self, write: Option<u64>, master: BlockRef, ctx: &mut Ctx<'_, Signal>) {
        let ack = ClusterSignal::DictStateAck { node: self.node };
        self.send_after_write(write, master, ack, ctx);
    }

    /// Send `sig` to `to` once schema write `write` ended (now if None or
    /// ended already).
    pub(super) fn send_after_write(
        &mut self,
        write: Option<u64>,
        to: BlockRef,
        sig: ClusterSignal,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        match (self.persist.as_mut(), write) {
            (Some(p), Some(w)) if p.durable < w => p.state_acks.push((w, to, sig)),
            _ => ctx.send(to, Signal::Cluster(Box::new(sig))),
        }
    }

    /// Schema write `id` ended: confirm the changes it holds. Also after a
    /// failed write on a lone node (the change is applied in memory; the
    /// probe counts it); a cluster node whose write failed leaves instead.
    fn state_acks_write_ended(&mut self, id: u64, ctx: &mut Ctx<'_, Signal>) {
        let p = self.persist.as_mut().expect("persisting");
        let (ready, wait): (Vec<_>, Vec<_>) =
            std::mem::take(&mut p.state_acks).into_iter().partition(|(w, _, _)| *w <= id);
        p.state_acks = wait;
        for (_, to, sig) in ready {
            ctx.send(to, Signal::Cluster(Box::new(sig)));
        }
    }

    /// Table `t` is dropped: its checkpoint files go once the next schema
    /// write (the first without it) is durable (see `dict_files.rs`).
    pub(super) fn dropped_files_after_next_write(&mut self, t: TableId) {
        if let Some(p) = self.persist.as_ref() {
            self.dropped_files.dropped(t, p.written + 1);
        }
    }

    pub(super) fn on_fs(&mut self, sig: FsSignal, ctx: &mut Ctx<'_, Signal>) {
        let (FsSignal::Req { req_id, .. } | FsSignal::Conf { req_id, .. } | FsSignal::Ref { req_id, .. }) = &sig;
        if *req_id >= super::files::REMOVE_REQ {
            return self.on_dropped_files_fs(sig, ctx);
        }
        let Some(p) = self.persist.as_mut() else {
            debug_assert!(false, "FS reply to a DICT without a data directory");
            return;
        };
        let Some((step, r, bytes)) = p.writing.take() else {
            debug_assert!(false, "FS reply with no schema write in progress");
            return;
        };
        let id = p.written;
        let next = match (sig, step) {
            (FsSignal::Conf { result: FsResult::Opened { file, .. }, .. }, Step::Open) => {
                let data = bytes.clone();
                fs(ctx, id, FsOp::Write { file, offset: 0, data, sync: true });
                Step::Write(file)
            }
            (FsSignal::Conf { result: FsResult::Written, .. }, Step::Write(file)) => {
                fs(ctx, id, FsOp::Close { file });
                Step::Close
            }
            (FsSignal::Conf { result: FsResult::Closed, .. }, Step::Close) => {
                if crash_point!(self.crash, points::SCHEMA_AFTER_TMP_BEFORE_RENAME) {
                    panic!("crash point reached: {}", points::SCHEMA_AFTER_TMP_BEFORE_RENAME);
                }
                fs(ctx, id, FsOp::Rename { from: SCHEMA_TMP.into(), to: SCHEMA_FILE.into() });
                Step::Rename
            }
            (FsSignal::Conf { result: FsResult::Done, .. }, Step::Rename) => {
                if r.is_some() && crash_point!(self.crash, points::DICT_WRITTEN_BEFORE_ANSWER) {
                    panic!("crash point reached: {}", points::DICT_WRITTEN_BEFORE_ANSWER);
                }
                self.counters.bump("dict: schema files written");
                self.auto_inc_write_ended(id, true, ctx);
                self.dropped_files_write_durable(id, ctx);
                self.state_acks_write_ended(id, ctx);
                self.write_ended(r.map(Ok), ctx);
                return;
            }
            (FsSignal::Ref { error, .. }, _) if !self.others().is_empty() => {
                // A cluster node whose schema file cannot be written would
                // confirm changes its files lack (and a restart of every
                // node could bring its old schema back): it leaves, and the
                // master's DDL goes on without it (its failure ends the
                // waits for it). Its restart takes the schema from the
                // master. Nothing is confirmed or answered from here.
                crate::probe!(self.counters, "dict: left the cluster, its schema file cannot be written");
                let why = format!("this node cannot write its schema file: {error}");
                let (host, req) = norr_signals::cluster::leave_and_restart(self.node, why);
                ctx.send_prio(host, req, Priority::A);
                return;
            }
            (FsSignal::Ref { error, .. }, _) => {
                // A lone node: the change is applied in memory but not on
                // disk: the client hears so (a restart may undo it); the
                // node goes on.
                crate::probe!(self.counters, "dict: schema file write failed");
                let e = NodeError::with(
                    ErrorCode::Internal,
                    format!("the schema change was applied but could not be written to the data directory: {error}"),
                );
                self.auto_inc_write_ended(id, false, ctx);
                self.state_acks_write_ended(id, ctx);
                self.write_ended(r.map(|_| Err(e)), ctx);
                return;
            }
            (other, _) => {
                debug_assert!(false, "unexpected FS reply {other:?}");
                return;
            }
        };
        self.persist.as_mut().expect("persisting").writing = Some((next, r, bytes));
    }

    /// A write ended: start the next one (a held change's, or a background
    /// one), then answer the change just written, if any.
    fn write_ended(&mut self, answer: Option<Result<DictResult, NodeError>>, ctx: &mut Ctx<'_, Signal>) {
        let p = self.persist.as_mut().expect("persisting");
        let held = p.held.take();
        let again = std::mem::take(&mut p.again);
        if held.is_some() || again {
            self.start_write(held, ctx);
        }
        if let Some(a) = answer {
            self.own_persisted(a, ctx);
        }
    }
}
