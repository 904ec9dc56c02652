//! DICT's schema on disk (a node with a data directory): after every
//! committed schema change, and before the client hears of it, DICT writes
//! the whole schema as a new `schema/schema.dat` (norr-durability's
//! `SchemaSnapshot`): to `schema/schema.tmp`, synced, then renamed over the
//! old one (the FS block makes the rename durable). A crash at any point
//! leaves the old or the new schema, never a mix; a DDL whose reply was
//! sent is on disk. At start the host reads the file and hands it to
//! `Dict::restore_schema`.
//!
//! AUTO_INCREMENT reservations are written with each snapshot only (a
//! restart may hand out values again that were reserved but not yet
//! written with a DDL: a known gap).

use super::{Dict, DictResult};
use norr_durability::schema::{SchemaSnapshot, SCHEMA_FILE, SCHEMA_TMP};
use norr_kernel::{BlockRef, Ctx, Priority};
use norr_signals::fs::{FileHandle, FsOp, FsResult, FsSignal};
use norr_signals::{block, ErrorCode, NodeError, Signal};

enum Step {
    Open,
    Write(FileHandle),
    Close,
    Rename,
}

pub(super) struct Persist {
    /// The write in progress and the answer held back until it is done.
    writing: Option<(Step, DictResult, Vec<u8>)>,
    /// Snapshots written (the id of the last DDL included).
    written: u64,
}

impl Persist {
    pub(super) fn new() -> Persist {
        Persist { writing: None, written: 0 }
    }
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
        if let Some(p) = self.persist.as_mut() {
            p.written = snap.last_ddl_id;
        }
    }

    fn snapshot(&self, id: u64) -> SchemaSnapshot {
        SchemaSnapshot {
            last_ddl_id: id,
            next_table_id: self.next_table_id,
            tables: self.tables.clone(),
            auto_inc: self.auto_inc.clone(),
        }
    }

    /// A committed change: write the schema, then answer with `r`. Gives
    /// `r` back if there is no data directory (answer now).
    pub(super) fn persist_then_finish(&mut self, r: DictResult, ctx: &mut Ctx<'_, Signal>) -> Option<DictResult> {
        let Some(p) = self.persist.as_ref() else { return Some(r) };
        let id = p.written + 1;
        let bytes = self.snapshot(id).encode();
        let p = self.persist.as_mut().expect("checked");
        assert!(p.writing.is_none(), "one schema write at a time");
        p.written = id;
        p.writing = Some((Step::Open, r, bytes));
        fs(ctx, id, FsOp::Open { path: SCHEMA_TMP.into(), create: true, truncate: true });
        None
    }

    pub(super) fn on_fs(&mut self, sig: FsSignal, ctx: &mut Ctx<'_, Signal>) {
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
                fs(ctx, id, FsOp::Rename { from: SCHEMA_TMP.into(), to: SCHEMA_FILE.into() });
                Step::Rename
            }
            (FsSignal::Conf { result: FsResult::Done, .. }, Step::Rename) => {
                self.counters.bump("dict: schema files written");
                self.finish(ctx, Ok(r));
                return;
            }
            (FsSignal::Ref { error, .. }, _) => {
                // The change is applied in memory but not on disk: the client
                // hears so (a restart may undo it); the node goes on.
                crate::probe!(self.counters, "dict: schema file write failed");
                let e = NodeError::with(
                    ErrorCode::Internal,
                    format!("the schema change was applied but could not be written to the data directory: {error}"),
                );
                self.finish(ctx, Err(e));
                return;
            }
            (other, _) => {
                debug_assert!(false, "unexpected FS reply {other:?}");
                return;
            }
        };
        self.persist.as_mut().expect("persisting").writing = Some((next, r, bytes));
    }
}
