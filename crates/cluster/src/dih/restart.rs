//! The master DIH's side of node restarts: one node at a time, three phases.
//!
//! 1. Write path: the node becomes `Starting` at every member (it is put at
//!    the tail of every chain of its partitions, so it gets every write from
//!    now on). The phase ends when every member's DIH confirmed, which it
//!    does only once its TC and LQH hold the new distribution.
//! 2. Copy: every partition the node holds is copied from the partition's
//!    primary, one at a time (`CopyFragReq`): the primary scans its rows
//!    under shared locks and sends them to the node, so a row either reaches
//!    the node before a later writer's prepare, or after that writer
//!    committed (see the LQH's copy for why this is enough). A node that
//!    restored its files up to GCI g and kept a table's rows (its
//!    `DihStartReq` says which) gets a delta copy of that table's
//!    partitions (`since_gci: Some(g)`): rows written after g in full, the
//!    others as keys; if it turns out to lack a row a key names, that
//!    partition is copied again in full.
//! 3. Take over: the node becomes `Alive` everywhere: it serves reads and is
//!    primary where the rotation says.
//!
//! A failure of the starting node drops the restart; a failure of another
//! member during phase 1 or 3 sends the phase's update again under the new
//! generation; a failure of a copy's source copies that partition again from
//! the new primary.

use super::{cluster, Dih, VERSION_GEN_SHIFT};
use norr_kernel::{BlockRef, Ctx, NodeId};
use norr_signals::ckpt::Gci;
use norr_signals::cluster::ClusterSignal;
use norr_signals::dist::{Dist, ReplicaState};
use norr_signals::internal::InternalSignal;
use norr_signals::schema::{PartitionId, TableId};
use norr_signals::{block, ErrorClass, ErrorCode, NodeError, Signal};
use std::collections::{BTreeSet, VecDeque};

/// Attempts at copying one partition before the restart is given up.
const MAX_COPY_ATTEMPTS: u32 = 20;
/// Wait before copying a partition again after a temporary failure.
const COPY_RETRY_NS: u64 = 100_000_000;

#[derive(Debug)]
enum Phase {
    /// Waiting for these members to confirm the distribution `dist`;
    /// `later`: members it goes to once they did (see `master_update`).
    Update { dist: Box<Dist>, waiting: BTreeSet<NodeId>, alive: bool, later: BTreeSet<NodeId> },
    Copy {
        todo: VecDeque<(TableId, PartitionId)>,
        /// The copy in flight: request id, partition, source node, attempts.
        current: Option<Copying>,
    },
}

#[derive(Debug, Clone, Copy)]
struct Copying {
    req: u64,
    table: TableId,
    part: PartitionId,
    source: NodeId,
    attempts: u32,
    /// Waiting out a retry delay (no request in flight).
    parked: bool,
}

/// A partition copy's figures (`CopyFragConf`).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct CopyDone {
    pub rows: u64,
    pub keys: u64,
    pub deleted: u64,
    pub bytes: u64,
    pub missing_keys: u64,
}

/// A node's request to start, as the master queues it.
#[derive(Debug, Clone)]
struct StartReq {
    node: NodeId,
    /// Its restored rows hold every commit up to this GCI.
    restored_gci: Option<Gci>,
    /// Tables whose restored rows it kept (copied as a delta).
    kept: BTreeSet<TableId>,
}

#[derive(Debug)]
struct Restart {
    node: NodeId,
    restored_gci: Option<Gci>,
    kept: BTreeSet<TableId>,
    /// Partitions of kept tables to copy in full after all (the node
    /// lacked rows a delta copy named).
    full_only: BTreeSet<(TableId, PartitionId)>,
    phase: Phase,
    phase_since_ns: u64,
    /// Totals of the copies: rows in full, keys, rows deleted at the end,
    /// bytes; partitions copied as a delta and in full.
    copied: CopyDone,
    delta_parts: u64,
    full_parts: u64,
}

#[derive(Debug, Default)]
pub(super) struct MasterState {
    running: Option<Restart>,
    queue: VecDeque<StartReq>,
    /// Update number within the current generation.
    seq: u64,
    next_req: u64,
}

impl Dih {
    /// A new distribution version from the master, within the generation.
    fn next_version(&mut self) -> u64 {
        let generation = self.membership.as_ref().expect("member").generation;
        let base = generation << VERSION_GEN_SHIFT;
        let current = self.latest_dist().version;
        self.master.seq += 1;
        let v = base.max(current) + 1;
        assert!(v >> VERSION_GEN_SHIFT == generation, "2^20 distribution updates in one generation");
        v
    }

    pub(super) fn master_start_req(
        &mut self,
        node: NodeId,
        restored_gci: Option<Gci>,
        kept: Vec<TableId>,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        if !self.is_master() {
            // Sent to a master that has lost the role meanwhile.
            crate::probe!(self.counters, "dih: start request to a non-master");
            let reason = "not the master any more".to_string();
            ctx.send(Self::dih_ref(node), cluster(ClusterSignal::DihStartRef { node, reason, retry: true }));
            return;
        }
        let m = self.membership.as_ref().expect("member");
        if !m.contains(node) || self.latest_dist().state(node) == ReplicaState::Alive {
            crate::probe!(self.counters, "dih: start request from a non-member or alive node");
            let reason = format!("node {node} is not a starting member");
            ctx.send(Self::dih_ref(node), cluster(ClusterSignal::DihStartRef { node, reason, retry: false }));
            return;
        }
        if self.master.running.as_ref().is_some_and(|r| r.node == node)
            || self.master.queue.iter().any(|q| q.node == node)
        {
            return;
        }
        // A delta needs a GCI the node's rows hold; no kept table without.
        let kept = if restored_gci.is_some() { kept.into_iter().collect() } else { BTreeSet::new() };
        self.master.queue.push_back(StartReq { node, restored_gci, kept });
        self.master_next(ctx);
    }

    fn master_next(&mut self, ctx: &mut Ctx<'_, Signal>) {
        if self.master.running.is_some() {
            return;
        }
        let Some(StartReq { node, restored_gci, kept }) = self.master.queue.pop_front() else {
            return;
        };
        self.counters.bump("dih: node restarts started");
        self.master.running = Some(Restart {
            node,
            restored_gci,
            kept,
            full_only: BTreeSet::new(),
            phase: Phase::Copy { todo: VecDeque::new(), current: None },
            phase_since_ns: ctx.now_ns(),
            copied: CopyDone::default(),
            delta_parts: 0,
            full_parts: 0,
        });
        self.master_update(node, ReplicaState::Starting, ctx);
    }

    /// Send every member a distribution with `node` in `state`; the restart
    /// waits for all of them.
    ///
    /// `Alive` goes to the restarted node first and to the others once it
    /// confirmed: from then on TCs route reads (and primary roles) to it,
    /// and a TC that learned it before the node's own LQH did got
    /// WrongReplica (4277) for a read sent there (simulator seed
    /// cluster:495). The node itself holds every row once the copy is
    /// done, so it may serve while the others still count it starting.
    fn master_update(&mut self, node: NodeId, state: ReplicaState, ctx: &mut Ctx<'_, Signal>) {
        let mut dist: Dist = self.latest_dist().clone();
        dist.states.insert(node, state);
        dist.version = self.next_version();
        let members: BTreeSet<NodeId> = self.membership.as_ref().expect("member").members.iter().copied().collect();
        let alive = state == ReplicaState::Alive;
        let (now, later): (BTreeSet<NodeId>, BTreeSet<NodeId>) =
            if alive { members.into_iter().partition(|n| *n == node) } else { (members, BTreeSet::new()) };
        for n in &now {
            ctx.send(Self::dih_ref(*n), cluster(ClusterSignal::DihUpdateReq { dist: Box::new(dist.clone()) }));
        }
        let r = self.master.running.as_mut().expect("a restart runs");
        r.phase = Phase::Update { dist: Box::new(dist), waiting: now, alive, later };
    }

    pub(super) fn master_update_conf(&mut self, from: NodeId, version: u64, ctx: &mut Ctx<'_, Signal>) {
        let Some(r) = self.master.running.as_mut() else {
            return;
        };
        let Phase::Update { dist, waiting, alive, later } = &mut r.phase else {
            return;
        };
        if dist.version != version {
            return; // an answer to an update sent again since
        }
        waiting.remove(&from);
        if !waiting.is_empty() {
            return;
        }
        if !later.is_empty() {
            // The restarted node holds `Alive`: now every other member.
            *waiting = std::mem::take(later);
            for n in waiting.iter() {
                ctx.send(Self::dih_ref(*n), cluster(ClusterSignal::DihUpdateReq { dist: dist.clone() }));
            }
            return;
        }
        let (node, alive) = (r.node, *alive);
        if alive {
            return self.master_finish(ctx);
        }
        let ms = (ctx.now_ns() - r.phase_since_ns) / 1_000_000;
        self.restart_phase(node, "join write path", ms, ctx);
        // Copy every partition the node holds, table by table.
        let dist = self.latest_dist().clone();
        let mut todo = VecDeque::new();
        for def in self.tables.values() {
            for p in 0..def.partitions {
                if dist.holds(def, p, node) {
                    todo.push_back((def.id, p));
                }
            }
        }
        let r = self.master.running.as_mut().expect("running");
        r.phase = Phase::Copy { todo, current: None };
        r.phase_since_ns = ctx.now_ns();
        self.master_step(ctx);
    }

    fn restart_phase(&mut self, node: NodeId, phase: &str, duration_ms: u64, ctx: &mut Ctx<'_, Signal>) {
        let rep = ClusterSignal::DihRestartPhaseRep { node, phase: phase.to_string(), duration_ms };
        ctx.send(Self::dih_ref(node), cluster(rep));
    }

    /// Start (or retry) the next partition copy, or end the copy phase.
    pub(super) fn master_step(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let dist = self.latest_dist().clone();
        let Some(r) = self.master.running.as_mut() else {
            return;
        };
        let node = r.node;
        let Phase::Copy { todo, current } = &mut r.phase else {
            return;
        };
        let next = match current {
            Some(c) if !c.parked => return, // one in flight
            Some(c) => {
                c.parked = false;
                Some((c.table, c.part, c.attempts))
            }
            None => todo.pop_front().map(|(t, p)| (t, p, 0)),
        };
        let Some((table, part, attempts)) = next else {
            let ms = (ctx.now_ns() - r.phase_since_ns) / 1_000_000;
            let CopyDone { rows, keys, deleted, bytes, .. } = r.copied;
            let (delta, full) = (r.delta_parts, r.full_parts);
            self.counters.bump_by("dih: rows copied", rows);
            self.counters.bump_by("dih: keys copied", keys);
            self.counters.bump_by("dih: rows deleted by resyncs", deleted);
            self.counters.bump_by("dih: bytes copied", bytes);
            self.counters.bump_by("dih: partitions copied as a delta", delta);
            self.counters.bump_by("dih: partitions copied in full", full);
            let what = match r.restored_gci {
                Some(g) if delta > 0 => format!(
                    "copy rows changed since GCI {g} ({rows} rows in full, {keys} unchanged rows as keys, \
                     {deleted} rows deleted, {bytes} bytes; {delta} partitions as a delta, {full} in full)"
                ),
                _ => format!("copy rows ({rows} rows, {bytes} bytes; {full} partitions in full)"),
            };
            self.restart_phase(node, &what, ms, ctx);
            let r = self.master.running.as_mut().expect("running");
            r.phase_since_ns = ctx.now_ns();
            return self.master_update(node, ReplicaState::Alive, ctx);
        };
        let Some(def) = self.tables.get(&table).cloned() else {
            // Dropped meanwhile: nothing to copy.
            *current = None;
            let me = ctx.self_ref();
            ctx.send(me, cluster(ClusterSignal::DihRestartStep));
            return;
        };
        let Some(source) = dist.primary(&def, part) else {
            // No alive replica: QMGR stops such a cluster; nothing to copy from.
            *current = None;
            return;
        };
        self.master.next_req += 1;
        let req = self.master.next_req;
        let r = self.master.running.as_mut().expect("running");
        let delta = r.kept.contains(&table) && !r.full_only.contains(&(table, part));
        let since_gci = if delta { r.restored_gci } else { None };
        let Phase::Copy { current, .. } = &mut r.phase else { unreachable!("copy phase") };
        *current = Some(Copying { req, table, part, source, attempts: attempts + 1, parked: false });
        let inst = norr_signals::partition::lqh_instance(part, self.lqh_instances);
        let lqh = BlockRef::new(source, block::LQH, inst);
        let copy = InternalSignal::CopyFragReq { req, table, part, dest: node, since_gci };
        ctx.send(lqh, Signal::Internal(Box::new(copy)));
    }

    pub(super) fn master_copy_done(
        &mut self,
        req: u64,
        table: TableId,
        part: PartitionId,
        result: Result<CopyDone, NodeError>,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        let Some(r) = self.master.running.as_mut() else {
            return;
        };
        let node = r.node;
        let Phase::Copy { current: Some(c), .. } = &mut r.phase else {
            return;
        };
        if c.req != req || c.table != table || c.part != part || c.parked {
            return; // answer to a copy given up on (its source failed)
        }
        match result {
            Ok(done) if done.missing_keys > 0 => {
                // The node lacks rows its restored GCI says it has: never
                // serve a wrong replica; copy this partition in full.
                crate::probe!(self.counters, "dih: delta copy fell back to a full copy");
                debug_assert!(r.kept.contains(&table), "keys sent in a full copy");
                self.counters.bump_by("dih: rows missing at delta copies", done.missing_keys);
                r.full_only.insert((table, part));
                r.copied.bytes += done.bytes;
                c.parked = true;
                let me = ctx.self_ref();
                ctx.send(me, cluster(ClusterSignal::DihRestartStep));
            }
            Ok(done) => {
                let delta = r.kept.contains(&table) && !r.full_only.contains(&(table, part));
                if delta {
                    r.delta_parts += 1;
                } else {
                    r.full_parts += 1;
                }
                let t = &mut r.copied;
                t.rows += done.rows;
                t.keys += done.keys;
                t.deleted += done.deleted;
                t.bytes += done.bytes;
                let Phase::Copy { current, .. } = &mut r.phase else { unreachable!() };
                *current = None;
                self.master_step(ctx);
            }
            Err(e) if e.code == ErrorCode::NoSuchTable => {
                crate::probe!(self.counters, "dih: copied table dropped meanwhile");
                let Phase::Copy { current, .. } = &mut r.phase else { unreachable!() };
                *current = None;
                self.master_step(ctx);
            }
            Err(e) if c.attempts < MAX_COPY_ATTEMPTS && e.code.class() != ErrorClass::Resource => {
                // A lock-wait time-out, a concurrent ALTER, ...: again, later.
                crate::probe!(self.counters, "dih: partition copy retried");
                c.parked = true;
                let me = ctx.self_ref();
                ctx.send_delayed(me, cluster(ClusterSignal::DihRestartStep), COPY_RETRY_NS);
            }
            Err(e) => {
                crate::probe!(self.counters, "dih: node restart failed");
                let reason = format!("copying partition {part} of table {table} failed: {e}");
                ctx.send(Self::dih_ref(node), cluster(ClusterSignal::DihStartRef { node, reason, retry: false }));
                self.master.running = None;
                self.master_next(ctx);
            }
        }
    }

    fn master_finish(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let r = self.master.running.take().expect("running");
        let ms = (ctx.now_ns() - r.phase_since_ns) / 1_000_000;
        self.restart_phase(r.node, "take over primaries", ms, ctx);
        self.counters.bump("dih: node restarts done");
        let dist = Box::new(self.latest_dist().clone());
        ctx.send(Self::dih_ref(r.node), cluster(ClusterSignal::DihStartConf { node: r.node, dist }));
        self.master_next(ctx);
    }

    /// The master's view of a node failure (after the distribution marked
    /// the failed nodes dead).
    pub(super) fn master_node_fail(&mut self, failed: &[NodeId], ctx: &mut Ctx<'_, Signal>) {
        self.master.queue.retain(|q| !failed.contains(&q.node));
        let dist = self.latest_dist().clone();
        let Some(r) = self.master.running.as_mut() else {
            return self.master_next(ctx);
        };
        if failed.contains(&r.node) {
            crate::probe!(self.counters, "dih: starting node failed");
            self.master.running = None;
            return self.master_next(ctx);
        }
        match &mut r.phase {
            Phase::Update { alive, .. } => {
                // Send the phase's update again in the new generation.
                let (node, alive) = (r.node, *alive);
                let state = if alive { ReplicaState::Alive } else { ReplicaState::Starting };
                self.master_update(node, state, ctx);
            }
            Phase::Copy { current: Some(c), .. } if failed.contains(&c.source) => {
                crate::probe!(self.counters, "dih: copy source failed");
                c.parked = true;
                debug_assert!(dist.state(c.source) == ReplicaState::Dead);
                let me = ctx.self_ref();
                ctx.send(me, cluster(ClusterSignal::DihRestartStep));
            }
            Phase::Copy { .. } => {}
        }
    }
}
