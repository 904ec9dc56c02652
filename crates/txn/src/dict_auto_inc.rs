//! AUTO_INCREMENT marks across the cluster's DICTs.
//!
//! The master DICT hands out AUTO_INCREMENT values; any other DICT may
//! become master when it dies, and continues from the highest mark it
//! heard (`auto_inc_high`). So the master answers a reservation only once
//! every other live DICT holds a mark at or above the values it hands out,
//! in its schema file (a node with a data directory) as well as in memory:
//! the next master, after a failover or a restart of the whole cluster,
//! never hands out a value twice. Gaps are allowed (NDB's semantics).
//!
//! A mark is set `AUTO_INC_AHEAD` above the counter when the counter passes
//! the last one: one round of acknowledgements per `AUTO_INC_AHEAD` values
//! a table uses. Reservations that arrive while a mark is on its way wait
//! for it with the one that set it.
//!
//! The master's own schema file holds its marks before it answers too
//! (`dict_persist.rs`).

use super::persist::too_many_reservations;
use super::{Dict, DictState};
use norr_kernel::{BlockRef, Ctx, NodeId};
use norr_signals::cluster::ClusterSignal;
use norr_signals::schema::TableId;
use norr_signals::{DictResult, Signal};
use std::collections::{BTreeMap, BTreeSet};

/// How far above the counter a new cluster-wide mark goes.
pub(super) const AUTO_INC_AHEAD: u64 = 4096;

/// Most reservations waiting for a mark's acknowledgements (then
/// Overloaded).
const MAX_MARK_WAITS: usize = 4096;

/// The master's side.
#[derive(Default)]
pub(super) struct Marks {
    /// Sequence number of the last mark broadcast.
    seq: u64,
    /// Marks on their way: the DICTs that have not acknowledged each yet.
    unacked: BTreeMap<u64, (BTreeSet<NodeId>, TableId, u64)>,
    /// Per table: every other live DICT holds a mark at least this high.
    acked: BTreeMap<TableId, u64>,
    /// Reservations answered once `acked[table] >= next`.
    waits: Vec<MarkWait>,
}

struct MarkWait {
    from: BlockRef,
    req_id: u32,
    table: TableId,
    next: u64,
    result: DictResult,
}

impl Dict {
    /// The master's counter of `table` reached `next` (values below it are
    /// handed out): answer `result` once the other DICTs hold a mark at or
    /// above `next`, setting a new one if it passes the last.
    pub(super) fn answer_auto_inc_marked(
        &mut self,
        from: BlockRef,
        req_id: u32,
        table: TableId,
        next: u64,
        result: DictResult,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        debug_assert!(self.is_master(), "only the master hands out values");
        if self.membership.is_none() {
            // A data node on its own: no other DICT.
            return self.answer_auto_inc(from, req_id, table, next, result, ctx);
        }
        if self.auto_inc_high.get(&table).is_none_or(|h| *h < next) {
            let high = next.saturating_add(AUTO_INC_AHEAD);
            self.auto_inc_high.insert(table, high);
            self.marks.seq += 1;
            let seq = self.marks.seq;
            let state = DictState {
                auto_inc_high: vec![(table, high)],
                next_table_id: self.next_table_id,
                next_index_id: self.next_index_id,
                mark_seq: seq,
                ..DictState::default()
            };
            self.broadcast_state(state, ctx);
            self.marks.unacked.insert(seq, (self.others(), table, high));
            self.counters.bump("dict: auto-increment marks sent to the other nodes");
        }
        if self.marks.waits.len() >= MAX_MARK_WAITS {
            let e = too_many_reservations();
            return Self::dref(ctx, from, req_id, e);
        }
        self.marks.waits.push(MarkWait { from, req_id, table, next, result });
        self.marks_progress(ctx);
    }

    /// Master: `node`'s DICT holds mark `seq` in its schema file.
    pub(super) fn on_mark_ack(&mut self, node: NodeId, seq: u64, ctx: &mut Ctx<'_, Signal>) {
        if let Some((waiting, _, _)) = self.marks.unacked.get_mut(&seq) {
            waiting.remove(&node);
            self.marks_progress(ctx);
        }
    }

    /// Master: these nodes failed; no mark waits for them.
    pub(super) fn marks_on_node_fail(&mut self, failed: &[NodeId], ctx: &mut Ctx<'_, Signal>) {
        for (waiting, _, _) in self.marks.unacked.values_mut() {
            waiting.retain(|n| !failed.contains(n));
        }
        self.marks_progress(ctx);
    }

    /// This DICT became master: its counters continue from the highest
    /// marks it heard (`apply_state`), which no other DICT is known to
    /// hold: the first reservation of each table sets a new mark.
    pub(super) fn marks_take_over(&mut self) {
        debug_assert!(self.marks.waits.is_empty(), "a DICT that was not master answered no reservation");
        for (t, h) in std::mem::take(&mut self.auto_inc_high) {
            let n = self.auto_inc.entry(t).or_insert(1);
            *n = (*n).max(h);
        }
        self.marks = Marks::default();
    }

    /// A mark's acknowledgements are complete: answer what waited for it.
    fn marks_progress(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let done: Vec<u64> = self.marks.unacked.iter().filter(|(_, (w, _, _))| w.is_empty()).map(|(s, _)| *s).collect();
        for seq in done {
            let (_, table, high) = self.marks.unacked.remove(&seq).expect("listed");
            let acked = self.marks.acked.entry(table).or_insert(0);
            *acked = (*acked).max(high);
        }
        let acked = &self.marks.acked;
        let (ready, wait): (Vec<MarkWait>, Vec<MarkWait>) = std::mem::take(&mut self.marks.waits)
            .into_iter()
            .partition(|w| acked.get(&w.table).is_some_and(|a| *a >= w.next));
        self.marks.waits = wait;
        for w in ready {
            self.answer_auto_inc(w.from, w.req_id, w.table, w.next, w.result, ctx);
        }
    }

    /// Not master: mark `seq` of a `DictStateRep` is held here (in the
    /// schema file written after it, `write`; in memory if None).
    pub(super) fn ack_mark_after(&mut self, write: Option<u64>, seq: u64, master: BlockRef, ctx: &mut Ctx<'_, Signal>) {
        let ack = ClusterSignal::DictMarkAck { node: self.node, seq };
        self.send_after_write(write, master, ack, ctx);
    }
}
