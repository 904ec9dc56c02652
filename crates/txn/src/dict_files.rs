//! Deleting a dropped table's local checkpoint files (`lcp/<table>/...`).
//!
//! No restart needs them once the schema file without the table is on
//! disk: a restart knows only the tables of its schema file (and skips
//! REDO records of others). So DICT queues the table with the id of the
//! schema write that drops it and, once that write is durable, removes the
//! files through FS: it lists `lcp/<table>`, then each partition
//! directory, removes every file, then the directories. A crash before (or
//! during) the removal leaves files of a table the schema does not know:
//! the next start removes those (`norr_node::durable`). A checkpoint write
//! of the table that was in flight when the table was dropped may still
//! create a file after the listing; the next start removes it too.

use super::Dict;
use norr_kernel::{BlockRef, Ctx, Priority};
use norr_signals::fs::{FsOp, FsResult, FsSignal};
use norr_signals::schema::TableId;
use norr_signals::{block, Signal};
use std::collections::VecDeque;

/// FS request ids of the removal (schema writes use small ids).
pub(super) const REMOVE_REQ: u64 = 1 << 62;

/// One FS step of a removal.
#[derive(Debug, Clone, PartialEq, Eq)]
enum RmStep {
    /// List `lcp/<table>`: its partition directories.
    ListTable(String),
    /// List a partition directory: its checkpoint files.
    ListPartition(String),
    /// Remove a file or an (emptied) directory.
    Remove(String),
}

#[derive(Default)]
pub(super) struct DroppedFiles {
    /// Dropped tables and the schema write that must be durable first.
    waiting: Vec<(TableId, u64)>,
    /// Steps to run, one FS request at a time.
    todo: VecDeque<RmStep>,
    /// The step whose FS reply is awaited.
    in_flight: Option<RmStep>,
    next_req: u64,
}

impl DroppedFiles {
    /// `table` is dropped by schema write `write` (not yet durable).
    pub(super) fn dropped(&mut self, table: TableId, write: u64) {
        self.waiting.push((table, write));
    }

    /// Schema write `write` is durable: its dropped tables' files go.
    fn write_durable(&mut self, write: u64) {
        let (ready, wait): (Vec<_>, Vec<_>) = self.waiting.drain(..).partition(|(_, w)| *w <= write);
        self.waiting = wait;
        for (t, _) in ready {
            self.todo.push_back(RmStep::ListTable(norr_durability::lcp::table_dir(t)));
        }
    }
}

impl Dict {
    /// A schema write ended durably: start removing the files of tables it
    /// dropped.
    pub(super) fn dropped_files_write_durable(&mut self, write: u64, ctx: &mut Ctx<'_, Signal>) {
        self.dropped_files.write_durable(write);
        self.dropped_files_pump(ctx);
    }

    fn dropped_files_pump(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let d = &mut self.dropped_files;
        if d.in_flight.is_some() {
            return;
        }
        let Some(step) = d.todo.pop_front() else { return };
        d.next_req += 1;
        let req_id = REMOVE_REQ + d.next_req;
        let op = match &step {
            RmStep::ListTable(dir) | RmStep::ListPartition(dir) => FsOp::List { dir: dir.clone() },
            RmStep::Remove(path) => FsOp::Remove { path: path.clone() },
        };
        d.in_flight = Some(step);
        let to = BlockRef::new(ctx.self_ref().node, block::FS, 0);
        // Priority B: housekeeping, behind the node's traffic.
        ctx.send_prio(to, Signal::Fs(Box::new(FsSignal::Req { req_id, op })), Priority::B);
    }

    /// An FS reply to a removal step.
    pub(super) fn on_dropped_files_fs(&mut self, sig: FsSignal, ctx: &mut Ctx<'_, Signal>) {
        let d = &mut self.dropped_files;
        let Some(step) = d.in_flight.take() else {
            debug_assert!(false, "FS reply with no file removal in flight");
            return;
        };
        match (sig, step) {
            (FsSignal::Conf { result: FsResult::Listed { names }, .. }, RmStep::ListTable(dir)) => {
                // Partitions first, then the table's directory.
                d.todo.push_front(RmStep::Remove(dir.clone()));
                for n in names.iter().rev() {
                    d.todo.push_front(RmStep::ListPartition(format!("{dir}/{n}")));
                }
            }
            (FsSignal::Conf { result: FsResult::Listed { names }, .. }, RmStep::ListPartition(dir)) => {
                d.todo.push_front(RmStep::Remove(dir.clone()));
                for n in names.iter().rev() {
                    d.todo.push_front(RmStep::Remove(format!("{dir}/{n}")));
                }
            }
            (FsSignal::Conf { result: FsResult::Done, .. }, RmStep::Remove(_)) => {
                self.counters.bump("dict: dropped table files removed");
            }
            (FsSignal::Ref { .. }, _) => {
                // A file created after the listing (a directory then not
                // empty), a disk error: the next start removes what is left.
                crate::probe!(self.counters, "dict: removing a dropped table's files failed");
            }
            (other, step) => debug_assert!(false, "unexpected FS reply {other:?} to {step:?}"),
        }
        self.dropped_files_pump(ctx);
    }
}
