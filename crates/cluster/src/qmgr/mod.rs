//! QMGR: membership of the data nodes, heartbeats, the node-failure
//! protocol, arbitration and joins.
//!
//! ## What QMGR agrees on
//! A *view* per generation: the members and their join order (oldest first;
//! the oldest is the president). Generation 0 is "no cluster yet"; every
//! change (the start, a join, a graceful leave, a failure) makes the next
//! generation, one change at a time. Every live member of a generation has
//! the same view: the test harness checks it after every step.
//!
//! ## How a change is agreed (`round.rs`)
//! The acting president (the oldest member it does not believe failed; at
//! the start, the lowest starting node) coordinates. A change is a small
//! Paxos among the *quorum* (the members not believed failed), needing every
//! one of them:
//! 1. `PrepChangeReq(ballot, failed)`: each promises the ballot, cuts the
//!    failed nodes off (`YouAreExcluded`, then `HostDisconnectReq`) and
//!    answers with the change it accepted under an earlier ballot, if any,
//!    and every node it believes failed. New suspicions restart the round
//!    with the larger set;
//! 2. the split rule (`split.rs`): go on, stop (a node group lost) or ask the
//!    arbitrator (`ArbitReq` with the generation before the failure, which
//!    both halves of a split share; no answer within
//!    `arbitration_timeout_ms` counts as lost);
//! 3. `AcceptChangeReq(ballot, change)`: the change is the one accepted under
//!    the highest earlier ballot if any member reported one (a coordinator
//!    that took over finishes what its predecessor may have decided), else
//!    its own proposal;
//! 4. `ChangeDecided(view)`: every quorum member adopts the new generation.
//!
//! Why it is safe: two rounds of one generation whose quorums overlap decide
//! the same change (phase 1 learns what phase 3 may have decided: a member
//! that accepted answers with it, and one that promised a higher ballot
//! refuses the lower one's accept). Two whose quorums are disjoint are two
//! halves of a split: the split rule lets at most one of them reach phase 3
//! (a whole node group can only be on one side; the arbitrator grants one
//! side per generation). A node never adopts an undecided view, so the
//! losing half never moves to a newer generation; a member that learns a
//! newer view without itself (`ChangeDecided`, `Catchup`, `YouAreExcluded`,
//! a `PrepChangeReq` that names it failed) shuts down and must join afresh.
//!
//! ## Start (`start.rs`)
//! After `QmgrStartReq` a node asks every connected data node what it is
//! (`PresenceReq` / `Presence`, again each heartbeat interval). If one is a
//! member, it joins through the president (`CmRegReq`; the president runs a
//! `Join` change, then answers `CmRegConf`). Else the lowest starting node
//! forms the cluster (a `Form` change, generation 0 -> 1): at once when every
//! configured data node is starting, after `start_partial_timeout_ms` with
//! the nodes present if they hold a node of every node group (the split rule
//! then asks for a whole node group or the arbitrator's grant).
//!
//! ## Failure detection (`heartbeat.rs`)
//! Members heartbeat each other every `heartbeat_interval_ms`; a member silent
//! for `missed_heartbeats` intervals, or whose connection broke
//! (`DisconnectRep`), or that starts again, is suspected at once and reported
//! to the acting president (`FailRep`). A node that finds its own clock
//! jumped (it was stalled) skips one check instead of suspecting everyone.
//!
//! ## Interface
//! From the host: `QmgrStartReq`, `ConnectRep`, `DisconnectRep` (priority A),
//! `Qmgr(LeaveReq { node: own })` for a graceful stop, `ArbitConf` (from MGM).
//! To the host: `HostDisconnectReq`, `HostShutdownReq`; to MGM: `ArbitReq`
//! (a round's, and the president's registration of each new generation,
//! see `arbit.rs`).
//! To the subscribers (priority A): `ClusterStartedRep` once, then
//! `NodeFailRep` / `NodeJoinedRep` per change. From the node's TC:
//! `NfCompleteRep { node }`: the president lets a removed node join again
//! only after it.

mod arbit;
mod heartbeat;
mod round;
pub mod split;
mod start;

use norr_kernel::counters::Counters;
use norr_kernel::{Block, BlockRef, Ctx, Envelope, NodeId, Priority};
use norr_knobs::Knobs;
use norr_signals::cluster::{
    Ballot, ClusterSignal, ClusterView, Membership, MembershipChange, PeerState, QmgrMsg, ShutdownReason, StartKind,
};
use norr_signals::internal::{BlockStats, InternalSignal};
use norr_signals::{block, Signal};
use std::collections::{BTreeMap, BTreeSet};

use round::Round;
use start::Start;

fn cluster(s: ClusterSignal) -> Signal {
    Signal::Cluster(Box::new(s))
}

fn qmgr_ref(node: NodeId) -> BlockRef {
    BlockRef::new(node, block::QMGR, 0)
}

#[derive(Debug)]
enum Phase {
    /// Waiting for `QmgrStartReq`.
    Idle,
    Starting(Start),
    Member,
    /// Asked the host to shut down: deaf to everything.
    Stopped,
}

/// The acceptor's side of the change of the current generation.
#[derive(Debug, Default)]
struct Acceptor {
    promised: Ballot,
    accepted: Option<(Ballot, MembershipChange)>,
    /// Highest ballot round seen in this generation (a new ballot exceeds it).
    max_round: u32,
    /// Members this node believes failed (generation >= 1). Only grows
    /// within a generation: a suspicion is never withdrawn.
    failed: BTreeSet<NodeId>,
}

/// A graceful leave this node asked for.
#[derive(Debug)]
struct Leaving {
    /// Who asked (the host): told if the leave is refused.
    requester: BlockRef,
    /// Ask the president (again) at the next tick at or after this.
    ask_at_ns: u64,
}

pub struct Qmgr {
    node: NodeId,
    node_groups: Vec<Vec<NodeId>>,
    /// Every configured data node; ascending, it is generation 0's order.
    data_nodes: BTreeSet<NodeId>,
    subscribers: Vec<BlockRef>,
    heartbeat_ns: u64,
    missed_heartbeats: u32,
    arbitration_timeout_ns: u64,
    start_partial_timeout_ns: u64,
    kind: StartKind,
    phase: Phase,
    /// The adopted view (generation >= 1), while a member.
    view: Option<ClusterView>,
    acc: Acceptor,
    /// The change this node coordinates.
    round: Option<Round>,
    /// Data nodes the host reports connected.
    connected: BTreeSet<NodeId>,
    /// Connected nodes that showed they are starting (a new incarnation):
    /// never cut off as a failed member, whose connection is already gone.
    fresh: BTreeSet<NodeId>,
    /// Members that joined and have not yet sent a member's message: a
    /// starting node's request from them crossed their join's answer.
    joined_unheard: BTreeSet<NodeId>,
    last_heard_ns: BTreeMap<NodeId, u64>,
    /// Peers not heard from since this node's last own stall (the serve
    /// lease waits for them, see `heartbeat.rs`).
    unheard_since_stall: BTreeSet<NodeId>,
    last_tick_ns: u64,
    tick_armed: bool,
    /// The local blocks that report `NfCompleteRep` for every removed node
    /// (by default every subscriber; see `with_nf_confirmers`).
    nf_confirmers: BTreeSet<BlockRef>,
    /// Removed nodes -> the confirmers that have not yet reported them
    /// finished (`NfCompleteRep`): they may not join again before.
    nf_pending: BTreeMap<NodeId, BTreeSet<BlockRef>>,
    /// The node whose join made the current generation (its `CmRegConf` is
    /// sent again if it asks again).
    last_join: Option<NodeId>,
    leaving: Option<Leaving>,
    /// The arbitration request this node waits an answer for (its
    /// generation): at most one at a time (see `arbit.rs`).
    arbit_pending: Option<(u64, arbit::ArbitPurpose)>,
    counters: Counters,
}

impl Qmgr {
    /// QMGR of data node `node` in a cluster of `node_groups` (every data
    /// node, in configuration order), telling `subscribers` (blocks of this
    /// node) of every membership change.
    pub fn new(node: NodeId, node_groups: Vec<Vec<NodeId>>, knobs: &Knobs, subscribers: Vec<BlockRef>) -> Qmgr {
        let mut data_nodes = BTreeSet::new();
        for n in node_groups.iter().flatten() {
            assert!(data_nodes.insert(*n), "data node {n} is in two node groups");
        }
        assert!(node_groups.iter().all(|g| !g.is_empty()), "an empty node group");
        assert!(data_nodes.contains(&node), "node {node} is not a data node of the cluster");
        assert!(subscribers.iter().all(|s| s.node == node), "QMGR reports to its own node only");
        assert!(knobs.heartbeat_interval_ms > 0 && knobs.missed_heartbeats > 0);
        Qmgr {
            node,
            node_groups,
            data_nodes,
            subscribers: subscribers.clone(),
            heartbeat_ns: knobs.heartbeat_interval_ms * 1_000_000,
            missed_heartbeats: knobs.missed_heartbeats,
            arbitration_timeout_ns: knobs.arbitration_timeout_ms * 1_000_000,
            start_partial_timeout_ns: knobs.start_partial_timeout_ms * 1_000_000,
            kind: StartKind::Initial,
            phase: Phase::Idle,
            view: None,
            acc: Acceptor::default(),
            round: None,
            connected: BTreeSet::new(),
            fresh: BTreeSet::new(),
            joined_unheard: BTreeSet::new(),
            last_heard_ns: BTreeMap::new(),
            unheard_since_stall: BTreeSet::new(),
            last_tick_ns: 0,
            tick_armed: false,
            nf_confirmers: subscribers.iter().copied().collect(),
            nf_pending: BTreeMap::new(),
            last_join: None,
            leaving: None,
            arbit_pending: None,
            counters: Counters::default(),
        }
    }

    /// The local blocks whose `NfCompleteRep { node }` a removed node waits
    /// for before it may join again (default: every subscriber). A data
    /// node lists the blocks that keep work of a failed node after its
    /// `NodeFailRep` (TC instance 0: the take-over of its transactions).
    pub fn with_nf_confirmers(mut self, confirmers: Vec<BlockRef>) -> Qmgr {
        assert!(confirmers.iter().all(|s| s.node == self.node), "confirmers are blocks of this node");
        self.nf_confirmers = confirmers.into_iter().collect();
        self
    }

    /// The adopted membership, while a member.
    pub fn membership(&self) -> Option<&Membership> {
        self.view.as_ref().map(|v| &v.membership)
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    fn generation(&self) -> u64 {
        self.view.as_ref().map_or(0, |v| v.membership.generation)
    }

    fn is_member(&self) -> bool {
        matches!(self.phase, Phase::Member)
    }

    /// Members of the current generation (generation 0: every data node).
    fn members_now(&self) -> BTreeSet<NodeId> {
        match &self.view {
            Some(v) => v.membership.members.iter().copied().collect(),
            None => self.data_nodes.clone(),
        }
    }

    /// The current generation's order, oldest first.
    fn order_now(&self) -> Vec<NodeId> {
        match &self.view {
            Some(v) => v.order.clone(),
            None => self.data_nodes.iter().copied().collect(),
        }
    }

    /// The oldest member this node does not believe failed: it coordinates
    /// changes. Never a failed node, so every survivor that believes the
    /// same nodes failed picks the same one.
    fn acting_president(&self) -> NodeId {
        let v = self.view.as_ref().expect("a member");
        let p = v.order.iter().copied().find(|n| !self.acc.failed.contains(n));
        p.expect("this node is never in its own failed set")
    }

    fn send_peer(&self, to: NodeId, msg: QmgrMsg, ctx: &mut Ctx<'_, Signal>) {
        ctx.send_prio(qmgr_ref(to), cluster(ClusterSignal::Qmgr(msg)), Priority::A);
    }

    fn to_host(&self, sig: ClusterSignal, ctx: &mut Ctx<'_, Signal>) {
        ctx.send_prio(BlockRef::new(self.node, block::HOST, 0), cluster(sig), Priority::A);
    }

    fn notify(&self, sig: ClusterSignal, ctx: &mut Ctx<'_, Signal>) {
        for s in &self.subscribers {
            ctx.send_prio(*s, cluster(sig.clone()), Priority::A);
        }
    }

    fn arm_tick(&mut self, ctx: &mut Ctx<'_, Signal>) {
        if !self.tick_armed {
            self.tick_armed = true;
            let me = ctx.self_ref();
            ctx.send_delayed(me, cluster(ClusterSignal::Qmgr(QmgrMsg::Tick)), self.heartbeat_ns);
        }
    }

    /// Stop this node: the host tears the blocks down (and starts them again
    /// as a node restart if `restart`).
    fn shut_down(&mut self, reason: ShutdownReason, ctx: &mut Ctx<'_, Signal>) {
        if matches!(self.phase, Phase::Stopped) {
            return;
        }
        // Come back as a starting node unless asked to stop or refused:
        // another part of the cluster may be running (a node group looks
        // lost from the small side of a split too), and a starting node
        // never serves before it is a member again.
        let restart = match &reason {
            ShutdownReason::Requested | ShutdownReason::ConfigMismatch(_) => false,
            ShutdownReason::NodeGroupLost(_)
            | ShutdownReason::LostArbitration(_)
            | ShutdownReason::Excluded(_)
            | ShutdownReason::Fatal(_) => true,
        };
        match &reason {
            ShutdownReason::NodeGroupLost(_) => crate::probe!(self.counters, "qmgr: shut down: node group lost"),
            ShutdownReason::LostArbitration(_) => crate::probe!(self.counters, "qmgr: shut down: lost arbitration"),
            ShutdownReason::Excluded(_) => crate::probe!(self.counters, "qmgr: shut down: excluded"),
            ShutdownReason::Requested => crate::probe!(self.counters, "qmgr: shut down: graceful leave"),
            ShutdownReason::ConfigMismatch(_) => crate::probe!(self.counters, "qmgr: shut down: refused by cluster"),
            ShutdownReason::Fatal(_) => crate::probe!(self.counters, "qmgr: shut down: fatal"),
        }
        self.phase = Phase::Stopped;
        self.round = None;
        self.to_host(ClusterSignal::HostShutdownReq { reason, restart }, ctx);
    }

    fn excluded(&mut self, why: String, ctx: &mut Ctx<'_, Signal>) {
        self.shut_down(ShutdownReason::Excluded(why), ctx);
    }

    /// Is `view` well formed for this cluster? (It comes from the network.)
    fn valid_view(&self, view: &ClusterView) -> bool {
        let m = &view.membership;
        let sorted = m.members.windows(2).all(|w| w[0] < w[1]);
        let known = m.members.iter().all(|n| self.data_nodes.contains(n));
        let mut order_sorted = view.order.clone();
        order_sorted.sort_unstable();
        m.generation >= 1
            && !m.members.is_empty()
            && sorted
            && known
            && order_sorted == m.members
            && view.order.first() == Some(&m.president)
    }

    /// A list of distinct configured data nodes?
    fn valid_nodes(&self, nodes: &[NodeId]) -> bool {
        let set: BTreeSet<NodeId> = nodes.iter().copied().collect();
        set.len() == nodes.len() && set.iter().all(|n| self.data_nodes.contains(n))
    }

    fn peer_state(&self) -> PeerState {
        match (&self.phase, &self.view) {
            (Phase::Member, Some(v)) => PeerState::Member(v.clone()),
            (Phase::Starting(_), _) => PeerState::Starting,
            _ => PeerState::Idle,
        }
    }

    fn stats(&self) -> BlockStats {
        let mut counters = self.counters.snapshot();
        counters.push(("qmgr: generation".into(), self.generation()));
        let members = self.view.as_ref().map_or(0, |v| v.membership.members.len());
        counters.push(("qmgr: members".into(), members as u64));
        let president = self.view.as_ref().map_or(0, |v| v.membership.president);
        counters.push(("qmgr: president".into(), president as u64));
        BlockStats { counters, ..BlockStats::default() }
    }

    fn on_cluster(&mut self, from: BlockRef, sig: ClusterSignal, ctx: &mut Ctx<'_, Signal>) {
        let local = from.node == self.node;
        match sig {
            ClusterSignal::Qmgr(msg) => self.on_qmgr(from, msg, ctx),
            ClusterSignal::QmgrStartReq { kind } if local => self.on_start_req(kind, ctx),
            ClusterSignal::ConnectRep { node } if local => self.on_connect(node, ctx),
            ClusterSignal::DisconnectRep { node } if local => self.on_disconnect(node, ctx),
            ClusterSignal::ArbitConf { generation, granted, reason } if local => {
                self.on_arbit_conf(generation, granted, reason, ctx)
            }
            ClusterSignal::NfCompleteRep { node } if local => {
                let Some(waiting) = self.nf_pending.get_mut(&node) else {
                    crate::probe!(self.counters, "qmgr: node-failure report for no pending failure");
                    return;
                };
                if !waiting.remove(&from) {
                    crate::probe!(self.counters, "qmgr: node-failure report from a block not waited for");
                    return;
                }
                if waiting.is_empty() {
                    self.nf_pending.remove(&node);
                    self.counters.bump("qmgr: failed node taken over");
                }
            }
            other => {
                crate::probe!(self.counters, "qmgr: unexpected cluster signal");
                let _ = other;
            }
        }
    }

    fn on_qmgr(&mut self, from: BlockRef, msg: QmgrMsg, ctx: &mut Ctx<'_, Signal>) {
        if matches!(self.phase, Phase::Stopped) {
            return;
        }
        let me = ctx.self_ref();
        // Timers: only from this block itself.
        match msg {
            QmgrMsg::Tick if from == me => return self.on_tick(ctx),
            QmgrMsg::ArbitTimeout { generation, ballot } if from == me => {
                return self.on_arbit_timeout(generation, ballot, ctx)
            }
            QmgrMsg::LeaveReq { node } if from.node == self.node && from.block != block::QMGR => {
                return self.on_local_leave_req(from, node, ctx)
            }
            QmgrMsg::Tick | QmgrMsg::ArbitTimeout { .. } => {
                crate::probe!(self.counters, "qmgr: malformed message from a peer");
                return;
            }
            _ => {}
        }
        // Everything else comes from a data node's QMGR (this node's own for
        // its part in the rounds it coordinates).
        let peer = from.node;
        if from.block != block::QMGR || !self.data_nodes.contains(&peer) {
            crate::probe!(self.counters, "qmgr: message from a stranger");
            return;
        }
        if !matches!(msg, QmgrMsg::PresenceReq { .. } | QmgrMsg::CmRegReq { .. } | QmgrMsg::Presence { .. }) {
            self.heard_from(peer, ctx);
        }
        match msg {
            QmgrMsg::Heartbeat { generation } => self.on_heartbeat(peer, generation, ctx),
            QmgrMsg::PresenceReq { node } => self.on_presence_req(peer, node, ctx),
            QmgrMsg::Presence { node, state } => self.on_presence(peer, node, state, ctx),
            QmgrMsg::CmRegReq { node } => self.on_cm_reg_req(peer, node, ctx),
            QmgrMsg::CmRegConf { view } => self.on_cm_reg_conf(peer, view, ctx),
            QmgrMsg::CmRegRef { node, reason, retry } => self.on_cm_reg_ref(peer, node, reason, retry, ctx),
            QmgrMsg::LeaveReq { node } => self.on_leave_req(peer, node, ctx),
            QmgrMsg::LeaveRef { node, reason, retry } => self.on_leave_ref(peer, node, reason, retry, ctx),
            QmgrMsg::FailRep { generation, failed, reason } => self.on_fail_rep(peer, generation, failed, reason, ctx),
            QmgrMsg::PrepChangeReq { generation, ballot, failed, current } => {
                self.on_prep_req(peer, generation, ballot, failed, current, ctx)
            }
            QmgrMsg::PrepChangeConf { generation, ballot, accepted, failed } => {
                self.on_prep_conf(peer, generation, ballot, accepted, failed, ctx)
            }
            QmgrMsg::PrepChangeRef { generation, ballot, promised }
            | QmgrMsg::AcceptChangeRef { generation, ballot, promised } => {
                self.on_change_ref(peer, generation, ballot, promised, ctx)
            }
            QmgrMsg::AcceptChangeReq { generation, ballot, change } => {
                self.on_accept_req(peer, generation, ballot, change, ctx)
            }
            QmgrMsg::AcceptChangeConf { generation, ballot } => self.on_accept_conf(peer, generation, ballot, ctx),
            QmgrMsg::ChangeDecided { view, change } => self.on_decided(peer, view, change, ctx),
            QmgrMsg::Catchup { view } => self.on_catchup(peer, view, ctx),
            QmgrMsg::YouAreExcluded { generation, reason } => self.on_you_are_excluded(peer, generation, reason, ctx),
            QmgrMsg::Stop { generation, ballot, reason } => self.on_stop(peer, generation, ballot, reason, ctx),
            QmgrMsg::Tick | QmgrMsg::ArbitTimeout { .. } => unreachable!("handled above"),
        }
    }
}

impl Block<Signal> for Qmgr {
    fn on_signal(&mut self, env: Envelope<Signal>, ctx: &mut Ctx<'_, Signal>) {
        let from = env.from;
        match env.signal {
            Signal::Cluster(sig) => self.on_cluster(from, *sig, ctx),
            Signal::Internal(sig) => match *sig {
                InternalSignal::StatsReq { req } => {
                    let stats = Box::new(self.stats());
                    ctx.send(from, Signal::Internal(Box::new(InternalSignal::StatsConf { req, stats })));
                }
                _ => crate::probe!(self.counters, "qmgr: unexpected internal signal"),
            },
            _ => crate::probe!(self.counters, "qmgr: unexpected signal"),
        }
    }
}

#[cfg(test)]
mod tests;
