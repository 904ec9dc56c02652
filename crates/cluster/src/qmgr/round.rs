//! Agreeing on one membership change per generation: the coordinator's
//! round (prepare, split rule, accept, decide) and every member's part in
//! it (see the module doc of `qmgr` for why it is safe).

use super::split::{self, SplitDecision};
use super::{Acceptor, Phase, Qmgr};
use norr_kernel::{Ctx, NodeId};
use norr_signals::cluster::{
    Ballot, ClusterSignal, ClusterView, Membership, MembershipChange, QmgrMsg, ShutdownReason,
};
use norr_signals::Signal;
use std::collections::BTreeSet;

#[derive(Debug)]
pub(super) struct Round {
    pub generation: u64,
    pub ballot: Ballot,
    /// Every one of them must answer each phase (this node included).
    pub quorum: BTreeSet<NodeId>,
    /// The members (generation 0: the data nodes) left out of `quorum`.
    pub failed: BTreeSet<NodeId>,
    /// What this coordinator wants; an earlier ballot's accepted change
    /// goes first.
    pub proposal: MembershipChange,
    pub phase: RoundPhase,
    pub phase_since_ns: u64,
}

#[derive(Debug)]
pub(super) enum RoundPhase {
    Prep {
        waiting: BTreeSet<NodeId>,
        /// The change accepted under the highest ballot any member reported.
        best: Option<(Ballot, MembershipChange)>,
        /// Nodes the members believe failed.
        reported: BTreeSet<NodeId>,
    },
    /// Asking the arbitrator (`sent`: the request went out; it waits while
    /// an earlier request of this node is unanswered).
    Arbitrating {
        value: MembershipChange,
        sent: bool,
    },
    Accept {
        value: MembershipChange,
        waiting: BTreeSet<NodeId>,
    },
}

impl Round {
    pub fn waits_for(&self, node: NodeId) -> bool {
        match &self.phase {
            RoundPhase::Prep { waiting, .. } | RoundPhase::Accept { waiting, .. } => waiting.contains(&node),
            RoundPhase::Arbitrating { .. } => false,
        }
    }
}

fn changed_nodes(change: &MembershipChange) -> Vec<NodeId> {
    match change {
        MembershipChange::Form { members } => members.clone(),
        MembershipChange::Join { node } | MembershipChange::Leave { node } => vec![*node],
        MembershipChange::Fail { failed } => failed.clone(),
    }
}

impl Qmgr {
    /// Coordinate `proposal` as the acting president (generation 0: as the
    /// lowest starting node). A running round is replaced.
    pub(super) fn start_round(&mut self, proposal: MembershipChange, ctx: &mut Ctx<'_, Signal>) {
        let generation = self.generation();
        let (proposal, quorum, failed) = match proposal {
            MembershipChange::Form { members } => {
                assert_eq!(generation, 0, "forming a cluster while a member");
                let quorum: BTreeSet<NodeId> = members.iter().copied().collect();
                let failed = self.data_nodes.difference(&quorum).copied().collect();
                (MembershipChange::Form { members }, quorum, failed)
            }
            other => {
                assert!(generation >= 1 && self.is_member(), "a change of a cluster this node is not in");
                debug_assert_eq!(self.acting_president(), self.node);
                let failed = self.acc.failed.clone();
                let quorum = self.members_now().difference(&failed).copied().collect();
                // A failure round always covers every node believed failed.
                let proposal = match other {
                    MembershipChange::Fail { .. } => {
                        MembershipChange::Fail { failed: failed.iter().copied().collect() }
                    }
                    p => p,
                };
                (proposal, quorum, failed)
            }
        };
        assert!(quorum.contains(&self.node), "the coordinator is in its quorum");
        let round = self.acc.max_round.max(self.acc.promised.round) + 1;
        self.acc.max_round = round;
        let ballot = Ballot { round, node: self.node };
        self.counters.bump("qmgr: rounds started");
        let current = self.view.clone();
        let failed_list: Vec<NodeId> = failed.iter().copied().collect();
        for q in &quorum {
            let msg =
                QmgrMsg::PrepChangeReq { generation, ballot, failed: failed_list.clone(), current: current.clone() };
            self.send_peer(*q, msg, ctx);
        }
        let phase = RoundPhase::Prep { waiting: quorum.clone(), best: None, reported: BTreeSet::new() };
        self.round = Some(Round { generation, ballot, quorum, failed, proposal, phase, phase_since_ns: ctx.now_ns() });
    }

    /// Is `change` a sensible change of generation `generation` (the
    /// current one)? It comes from the network.
    fn valid_change(&self, generation: u64, change: &MembershipChange) -> bool {
        let members = self.members_now();
        match change {
            MembershipChange::Form { members: m } => {
                generation == 0 && !m.is_empty() && self.valid_nodes(m) && m.windows(2).all(|w| w[0] < w[1])
            }
            MembershipChange::Join { node } => {
                generation >= 1 && self.data_nodes.contains(node) && !members.contains(node)
            }
            MembershipChange::Leave { node } => generation >= 1 && members.contains(node),
            MembershipChange::Fail { failed } => {
                generation >= 1
                    && !failed.is_empty()
                    && self.valid_nodes(failed)
                    && failed.iter().all(|n| members.contains(n))
                    && failed.len() < members.len()
            }
        }
    }

    /// Did this (starting) node accept forming exactly `view`?
    fn accepted_form(&self, view: &ClusterView) -> bool {
        view.membership.generation == 1
            && matches!(&self.acc.accepted, Some((_, MembershipChange::Form { members })) if *members == view.membership.members)
    }

    /// A member: a coordinator's phase 1.
    pub(super) fn on_prep_req(
        &mut self,
        peer: NodeId,
        generation: u64,
        ballot: Ballot,
        failed: Vec<NodeId>,
        current: Option<ClusterView>,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        if ballot.node != peer || !self.valid_nodes(&failed) || current.as_ref().is_some_and(|v| !self.valid_view(v)) {
            crate::probe!(self.counters, "qmgr: malformed message from a peer");
            return;
        }
        let failed: BTreeSet<NodeId> = failed.into_iter().collect();
        if peer == self.node && self.round.as_ref().is_none_or(|r| r.ballot != ballot) {
            // This node's own request of a ballot it already replaced.
            return;
        }
        match &self.phase {
            Phase::Idle | Phase::Stopped => return,
            Phase::Starting(_) if generation == 0 => return self.prep_formation(peer, ballot, failed, ctx),
            Phase::Starting(_) => {
                // A round of the cluster this node formed, whose decision did
                // not reach it: the view is the one it accepted.
                match current.clone() {
                    Some(v) if generation == 1 && self.accepted_form(&v) && v.membership.contains(self.node) => {
                        let change = MembershipChange::Form { members: v.membership.members.clone() };
                        self.adopt(v, Some(change), ctx);
                    }
                    _ => {
                        crate::probe!(self.counters, "qmgr: round of a running cluster reached a starting node");
                        return;
                    }
                }
            }
            Phase::Member => {}
        }
        let my_gen = self.generation();
        if generation < my_gen {
            let view = self.view.clone().expect("a member");
            self.send_peer(peer, QmgrMsg::Catchup { view }, ctx);
            return;
        }
        if generation > my_gen {
            match current {
                Some(v) if v.membership.generation == generation => self.catch_up(peer, v, ctx),
                _ => {
                    crate::probe!(self.counters, "qmgr: malformed message from a peer");
                    return;
                }
            }
            if !self.is_member() {
                return;
            }
        }
        debug_assert_eq!(generation, self.generation());
        let members = self.members_now();
        if !members.contains(&peer) || !failed.is_subset(&members) || failed.contains(&peer) {
            crate::probe!(self.counters, "qmgr: malformed message from a peer");
            return;
        }
        if failed.contains(&self.node) {
            return self.excluded(format!("node {peer} declared this node failed (generation {generation})"), ctx);
        }
        if self.acc.failed.contains(&peer) {
            crate::probe!(self.counters, "qmgr: round of a failed node ignored");
            return;
        }
        // The coordinator must be the oldest member it does not call failed.
        let order = self.order_now();
        if order.iter().take_while(|n| **n != peer).any(|n| !failed.contains(n)) {
            crate::probe!(self.counters, "qmgr: malformed message from a peer");
            return;
        }
        if ballot < self.acc.promised {
            let promised = self.acc.promised;
            self.send_peer(peer, QmgrMsg::PrepChangeRef { generation, ballot, promised }, ctx);
            return;
        }
        self.promise(ballot);
        let newly: Vec<NodeId> = failed.difference(&self.acc.failed).copied().collect();
        let learned = !newly.is_empty();
        for n in newly {
            self.acc.failed.insert(n);
            self.cut_off(n, &format!("node {peer}'s membership round declared it failed"), ctx);
        }
        if learned {
            self.revoke_lease(ctx);
        }
        if self.round.as_ref().is_some_and(|r| r.ballot < ballot) {
            crate::probe!(self.counters, "qmgr: own round superseded");
            self.round = None;
        }
        let accepted = self.acc.accepted.clone();
        let failed = self.acc.failed.iter().copied().collect();
        self.send_peer(peer, QmgrMsg::PrepChangeConf { generation, ballot, accepted, failed }, ctx);
    }

    fn promise(&mut self, ballot: Ballot) {
        debug_assert!(ballot >= self.acc.promised, "a promise went back");
        self.acc.promised = ballot;
        self.acc.max_round = self.acc.max_round.max(ballot.round);
    }

    /// A starting node: phase 1 of forming the cluster.
    fn prep_formation(&mut self, peer: NodeId, ballot: Ballot, failed: BTreeSet<NodeId>, ctx: &mut Ctx<'_, Signal>) {
        if self.running_cluster().is_some() {
            crate::probe!(self.counters, "qmgr: formation ignored: a cluster is running");
            return;
        }
        let lowest = self.data_nodes.iter().take_while(|n| **n != peer).all(|n| failed.contains(n));
        if failed.contains(&self.node) || failed.contains(&peer) || !lowest {
            crate::probe!(self.counters, "qmgr: malformed message from a peer");
            return;
        }
        if ballot < self.acc.promised {
            let promised = self.acc.promised;
            self.send_peer(peer, QmgrMsg::PrepChangeRef { generation: 0, ballot, promised }, ctx);
            return;
        }
        self.promise(ballot);
        if self.round.as_ref().is_some_and(|r| r.ballot < ballot) {
            // A lower starting node forms the cluster: leave it to it.
            crate::probe!(self.counters, "qmgr: own formation superseded");
            self.round = None;
        }
        let accepted = self.acc.accepted.clone();
        self.send_peer(peer, QmgrMsg::PrepChangeConf { generation: 0, ballot, accepted, failed: Vec::new() }, ctx);
    }

    /// Coordinator: a member's answer to phase 1.
    pub(super) fn on_prep_conf(
        &mut self,
        peer: NodeId,
        generation: u64,
        ballot: Ballot,
        accepted: Option<(Ballot, MembershipChange)>,
        failed: Vec<NodeId>,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        let ours = self.round.as_ref().is_some_and(|r| r.generation == generation && r.ballot == ballot);
        if !ours {
            crate::probe!(self.counters, "qmgr: stale answer");
            return;
        }
        let accepted_ok = accepted.as_ref().is_none_or(|(b, c)| *b < ballot && self.valid_change(generation, c));
        if !accepted_ok || !self.valid_nodes(&failed) {
            crate::probe!(self.counters, "qmgr: malformed message from a peer");
            return;
        }
        let members = self.members_now();
        let me = self.node;
        let r = self.round.as_mut().expect("checked");
        let RoundPhase::Prep { waiting, best, reported } = &mut r.phase else {
            crate::probe!(self.counters, "qmgr: stale answer");
            return;
        };
        if !waiting.remove(&peer) {
            crate::probe!(self.counters, "qmgr: stale answer");
            return;
        }
        if let Some((b, c)) = accepted {
            if best.as_ref().is_none_or(|(bb, _)| b > *bb) {
                *best = Some((b, c));
            }
        }
        reported.extend(failed.into_iter().filter(|n| members.contains(n) && *n != me));
        if waiting.is_empty() {
            self.prep_done(ctx);
        }
    }

    /// Coordinator: every quorum member promised. Decide whether they may go
    /// on, and which change to accept.
    fn prep_done(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let r = self.round.as_mut().expect("a round");
        let RoundPhase::Prep { best, reported, .. } = &mut r.phase else { unreachable!("prep_done outside prep") };
        let extra: Vec<NodeId> = reported.difference(&r.failed).copied().collect();
        let best = best.take();
        let generation = r.generation;
        if generation >= 1 && !extra.is_empty() {
            // Some survivor believes more nodes failed: start over with them.
            crate::probe!(self.counters, "qmgr: round restarted with more failed nodes");
            self.round = None;
            for n in extra {
                if self.acc.failed.insert(n) {
                    self.cut_off(n, "another member declared it failed", ctx);
                }
            }
            return self.failures_changed("another member declared them failed", ctx);
        }
        if best.is_some() {
            crate::probe!(self.counters, "qmgr: round finishes an earlier ballot's change");
        }
        let value = best.map_or_else(|| r.proposal.clone(), |(_, c)| c);
        match split::decide(&self.node_groups, &r.quorum, &r.failed) {
            SplitDecision::GoOn => self.start_accept(value, ctx),
            SplitDecision::Arbitrate => {
                let ballot = r.ballot;
                r.phase = RoundPhase::Arbitrating { value, sent: false };
                r.phase_since_ns = ctx.now_ns();
                let me = ctx.self_ref();
                let timeout = super::cluster(ClusterSignal::Qmgr(QmgrMsg::ArbitTimeout { generation, ballot }));
                ctx.send_delayed(me, timeout, self.arbitration_timeout_ns);
                self.send_round_arbitration(ctx);
            }
            SplitDecision::GroupLost(groups) => {
                if generation == 0 {
                    // Checked before forming; the nodes present changed.
                    self.round = None;
                    let now = ctx.now_ns();
                    self.start_retry_later(self.heartbeat_ns, now);
                    return;
                }
                let lost: Vec<NodeId> = groups.into_iter().flatten().collect();
                self.stop_quorum(ShutdownReason::NodeGroupLost(lost), ctx);
            }
        }
    }

    /// Coordinator: the survivors may not go on; every one shuts down.
    pub(super) fn stop_quorum(&mut self, reason: ShutdownReason, ctx: &mut Ctx<'_, Signal>) {
        let r = self.round.take().expect("a round");
        for q in r.quorum.iter().filter(|q| **q != self.node) {
            let msg = QmgrMsg::Stop { generation: r.generation, ballot: r.ballot, reason: reason.clone() };
            self.send_peer(*q, msg, ctx);
        }
        self.shut_down(reason, ctx);
    }

    pub(super) fn on_stop(
        &mut self,
        peer: NodeId,
        generation: u64,
        ballot: Ballot,
        reason: ShutdownReason,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        let reason_ok = matches!(reason, ShutdownReason::LostArbitration(_) | ShutdownReason::NodeGroupLost(_));
        if ballot.node != peer || !reason_ok {
            crate::probe!(self.counters, "qmgr: malformed message from a peer");
            return;
        }
        if self.is_member() && generation == self.generation() && self.acc.promised == ballot {
            self.shut_down(reason, ctx);
        } else {
            crate::probe!(self.counters, "qmgr: stale stop ignored");
        }
    }

    pub(super) fn start_accept(&mut self, value: MembershipChange, ctx: &mut Ctx<'_, Signal>) {
        let r = self.round.as_mut().expect("a round");
        r.phase = RoundPhase::Accept { value: value.clone(), waiting: r.quorum.clone() };
        r.phase_since_ns = ctx.now_ns();
        let (generation, ballot) = (r.generation, r.ballot);
        let quorum: Vec<NodeId> = r.quorum.iter().copied().collect();
        for q in quorum {
            self.send_peer(q, QmgrMsg::AcceptChangeReq { generation, ballot, change: value.clone() }, ctx);
        }
    }

    /// A member: phase 2.
    pub(super) fn on_accept_req(
        &mut self,
        peer: NodeId,
        generation: u64,
        ballot: Ballot,
        change: MembershipChange,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        if ballot.node != peer {
            crate::probe!(self.counters, "qmgr: malformed message from a peer");
            return;
        }
        if peer == self.node && self.round.as_ref().is_none_or(|r| r.ballot != ballot) {
            return; // own request of a replaced ballot
        }
        match &self.phase {
            Phase::Idle | Phase::Stopped => return,
            Phase::Starting(_) if generation != 0 => {
                crate::probe!(self.counters, "qmgr: round of a running cluster reached a starting node");
                return;
            }
            Phase::Starting(_) | Phase::Member => {}
        }
        let my_gen = self.generation();
        if generation < my_gen {
            let view = self.view.clone().expect("a member");
            self.send_peer(peer, QmgrMsg::Catchup { view }, ctx);
            return;
        }
        if generation > my_gen {
            crate::probe!(self.counters, "qmgr: accept of a generation not prepared here");
            return;
        }
        if !self.valid_change(generation, &change) {
            crate::probe!(self.counters, "qmgr: malformed message from a peer");
            return;
        }
        if self.is_member() {
            if !self.members_now().contains(&peer) || self.acc.failed.contains(&peer) {
                crate::probe!(self.counters, "qmgr: round of a failed node ignored");
                return;
            }
            if matches!(&change, MembershipChange::Fail { failed } if failed.contains(&self.node)) {
                return self.excluded(format!("node {peer}'s membership round removes this node"), ctx);
            }
        }
        if ballot < self.acc.promised {
            let promised = self.acc.promised;
            self.send_peer(peer, QmgrMsg::AcceptChangeRef { generation, ballot, promised }, ctx);
            return;
        }
        self.promise(ballot);
        self.acc.accepted = Some((ballot, change));
        self.send_peer(peer, QmgrMsg::AcceptChangeConf { generation, ballot }, ctx);
    }

    pub(super) fn on_accept_conf(&mut self, peer: NodeId, generation: u64, ballot: Ballot, ctx: &mut Ctx<'_, Signal>) {
        let Some(r) = self.round.as_mut() else {
            crate::probe!(self.counters, "qmgr: stale answer");
            return;
        };
        let RoundPhase::Accept { waiting, .. } = &mut r.phase else {
            crate::probe!(self.counters, "qmgr: stale answer");
            return;
        };
        if r.generation != generation || r.ballot != ballot || !waiting.remove(&peer) {
            crate::probe!(self.counters, "qmgr: stale answer");
            return;
        }
        if waiting.is_empty() {
            self.decide(ctx);
        }
    }

    /// Coordinator: a member promised a higher ballot. Try again above it.
    pub(super) fn on_change_ref(
        &mut self,
        _peer: NodeId,
        generation: u64,
        ballot: Ballot,
        promised: Ballot,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        let Some(r) = self.round.as_ref() else { return };
        if r.generation != generation || r.ballot != ballot || promised <= ballot {
            crate::probe!(self.counters, "qmgr: stale answer");
            return;
        }
        crate::probe!(self.counters, "qmgr: ballot refused");
        self.acc.max_round = self.acc.max_round.max(promised.round);
        let proposal = r.proposal.clone();
        self.round = None;
        if generation == 0 {
            let now = ctx.now_ns();
            self.start_retry_later(self.heartbeat_ns, now);
        } else {
            self.start_round(proposal, ctx);
        }
    }

    /// The view after `change`.
    fn apply(&self, change: &MembershipChange) -> ClusterView {
        let generation = self.generation() + 1;
        let mut order = self.order_now();
        match change {
            MembershipChange::Form { members } => order = members.clone(),
            MembershipChange::Join { node } => order.push(*node),
            MembershipChange::Leave { node } => order.retain(|n| n != node),
            MembershipChange::Fail { failed } => order.retain(|n| !failed.contains(n)),
        }
        assert!(!order.is_empty(), "a change left no member");
        let mut members = order.clone();
        members.sort_unstable();
        let president = order[0];
        ClusterView { membership: Membership { generation, members, president }, order }
    }

    /// Coordinator: every quorum member accepted: the change is decided.
    fn decide(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let r = self.round.take().expect("a round");
        let RoundPhase::Accept { value, .. } = r.phase else { unreachable!("decide outside accept") };
        let view = self.apply(&value);
        self.counters.bump("qmgr: changes decided");
        for q in r.quorum.iter().filter(|q| **q != self.node) {
            self.send_peer(*q, QmgrMsg::ChangeDecided { view: view.clone(), change: value.clone() }, ctx);
        }
        if let MembershipChange::Join { node } = value {
            self.send_peer(node, QmgrMsg::CmRegConf { view: view.clone() }, ctx);
        }
        self.decided(view, value, ctx);
    }

    pub(super) fn on_decided(
        &mut self,
        peer: NodeId,
        view: ClusterView,
        change: MembershipChange,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        if !self.valid_view(&view) || !self.valid_nodes(&changed_nodes(&change)) {
            crate::probe!(self.counters, "qmgr: malformed message from a peer");
            return;
        }
        if view.membership.generation <= self.generation() {
            crate::probe!(self.counters, "qmgr: stale decision");
            return;
        }
        let _ = peer;
        match &self.phase {
            Phase::Starting(_) => {
                let formed =
                    matches!(&change, MembershipChange::Form { members } if *members == view.membership.members);
                if view.membership.generation == 1 && formed && view.membership.contains(self.node) {
                    self.adopt(view, Some(change), ctx);
                } else {
                    crate::probe!(self.counters, "qmgr: decision reached a starting node");
                }
            }
            Phase::Member => self.decided(view, change, ctx),
            Phase::Idle | Phase::Stopped => {}
        }
    }

    fn decided(&mut self, view: ClusterView, change: MembershipChange, ctx: &mut Ctx<'_, Signal>) {
        if view.membership.contains(self.node) {
            return self.adopt(view, Some(change), ctx);
        }
        if change == (MembershipChange::Leave { node: self.node }) {
            let requester = self.leaving.take().map(|l| l.requester);
            if requester.is_some_and(|r| r.block == norr_signals::block::CKPT) {
                // CKPT asked to leave at a system restart: this node's files
                // are behind the restart GCI. It comes back at once as a node
                // restart (a graceful leave: no arbitration, no failure).
                return self.shut_down(
                    ShutdownReason::Fatal(
                        "left the cluster to copy its partitions again: its files are behind the system restart GCI"
                            .into(),
                    ),
                    ctx,
                );
            }
            return self.shut_down(ShutdownReason::Requested, ctx);
        }
        let g = view.membership.generation;
        self.excluded(format!("the cluster removed this node in generation {g}"), ctx);
    }

    /// A member learns a newer view from `peer` (it missed a decision).
    fn catch_up(&mut self, peer: NodeId, view: ClusterView, ctx: &mut Ctx<'_, Signal>) {
        debug_assert!(view.membership.generation > self.generation());
        crate::probe!(self.counters, "qmgr: caught up with a newer generation");
        if view.membership.contains(self.node) {
            self.adopt(view, None, ctx);
        } else {
            let g = view.membership.generation;
            self.excluded(format!("node {peer} is in generation {g}, which does not include this node"), ctx);
        }
    }

    pub(super) fn on_catchup(&mut self, peer: NodeId, view: ClusterView, ctx: &mut Ctx<'_, Signal>) {
        if !self.valid_view(&view) {
            crate::probe!(self.counters, "qmgr: malformed message from a peer");
            return;
        }
        if view.membership.generation <= self.generation() {
            return;
        }
        let formed_here = self.accepted_form(&view) && view.membership.contains(self.node);
        match &mut self.phase {
            Phase::Member => self.catch_up(peer, view, ctx),
            Phase::Starting(st) => {
                if formed_here {
                    let change = MembershipChange::Form { members: view.membership.members.clone() };
                    return self.adopt(view, Some(change), ctx);
                }
                // A cluster is running: join it instead of forming one.
                st.peers.insert(peer, norr_signals::cluster::PeerState::Member(view));
                if self.round.is_some() {
                    crate::probe!(self.counters, "qmgr: formation found a running cluster");
                    self.round = None;
                }
                self.evaluate_start(ctx);
            }
            Phase::Idle | Phase::Stopped => {}
        }
    }

    pub(super) fn on_you_are_excluded(
        &mut self,
        peer: NodeId,
        generation: u64,
        reason: String,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        if self.is_member() && generation >= self.generation() {
            self.excluded(format!("node {peer} declared this node failed: {reason}"), ctx);
        } else if matches!(self.phase, Phase::Starting(_)) {
            // The cluster counted this incarnation as joined (a president
            // decided the join, then failed before telling it), waited for
            // it in vain and cut it off; members refuse its connections
            // until it is a new incarnation. Waiting on would never end
            // (seen in the simulator: a node running but never a member),
            // so start again.
            crate::probe!(self.counters, "qmgr: cut off while starting");
            self.excluded(
                format!("node {peer} cut this node off while it was starting (it had counted it as joined): {reason}"),
                ctx,
            );
        } else {
            crate::probe!(self.counters, "qmgr: stale exclusion ignored");
        }
    }

    /// Take `view` as this node's membership. `change`: the step that made
    /// it, when known.
    pub(super) fn adopt(&mut self, view: ClusterView, change: Option<MembershipChange>, ctx: &mut Ctx<'_, Signal>) {
        let old = self.view.take();
        let old_gen = old.as_ref().map_or(0, |v| v.membership.generation);
        assert!(view.membership.generation > old_gen, "generation went back from {old_gen} to {view:?}");
        assert!(view.membership.contains(self.node), "adopted a view without this node");
        debug_assert!(self.valid_view(&view));
        let now = ctx.now_ns();
        let was_starting = matches!(self.phase, Phase::Starting(_));
        let members: BTreeSet<NodeId> = view.membership.members.iter().copied().collect();
        let carried: BTreeSet<NodeId> = self.acc.failed.intersection(&members).copied().collect();
        self.acc = Acceptor { failed: carried, ..Acceptor::default() };
        self.round = None;
        self.phase = Phase::Member;
        self.last_join = match &change {
            Some(MembershipChange::Join { node }) => Some(*node),
            _ => None,
        };
        // The incarnations now members are the ones on these connections.
        let failed = &self.acc.failed;
        self.fresh.retain(|n| !members.contains(n) || failed.contains(n));
        self.joined_unheard.retain(|n| members.contains(n));
        if was_starting {
            // The others may still be starting too: their requests for
            // presence can cross the decision.
            self.joined_unheard.extend(members.iter().filter(|m| **m != self.node));
        }
        self.last_heard_ns.retain(|n, _| members.contains(n));
        for m in members.iter().filter(|m| **m != self.node) {
            self.last_heard_ns.entry(*m).or_insert(now);
        }
        self.view = Some(view.clone());
        self.counters.bump("qmgr: generations adopted");
        let membership = view.membership;
        if was_starting {
            self.last_tick_ns = now;
            let joined = matches!(change, Some(MembershipChange::Join { .. }));
            self.notify(ClusterSignal::ClusterStartedRep { membership, kind: self.kind, joined }, ctx);
        } else {
            let old: BTreeSet<NodeId> = old.expect("a member had a view").membership.members.into_iter().collect();
            let removed: Vec<NodeId> = old.difference(&members).copied().collect();
            if !removed.is_empty() {
                self.counters.bump_by("qmgr: nodes removed", removed.len() as u64);
                if !self.nf_confirmers.is_empty() {
                    for n in &removed {
                        self.nf_pending.insert(*n, self.nf_confirmers.clone());
                    }
                }
                self.notify(ClusterSignal::NodeFailRep { failed: removed, membership: membership.clone() }, ctx);
            }
            for node in members.difference(&old) {
                self.joined_unheard.insert(*node);
                self.counters.bump("qmgr: nodes joined");
                self.notify(ClusterSignal::NodeJoinedRep { node: *node, membership: membership.clone() }, ctx);
            }
        }
        self.register_generation(ctx);
        if !self.acc.failed.is_empty() {
            self.failures_changed("still failed after the last change", ctx);
        } else {
            if !was_starting {
                self.heartbeat_and_renew_now(ctx);
            }
            if self.leaving.is_some() {
                self.ask_leave(ctx);
            }
        }
    }

    /// Time-outs of the round this node coordinates (checked each tick).
    pub(super) fn round_tick(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let now = ctx.now_ns();
        let limit = self.protocol_timeout_ns();
        let Some(r) = self.round.as_ref() else { return };
        let waiting: Vec<NodeId> = match &r.phase {
            RoundPhase::Prep { waiting, .. } | RoundPhase::Accept { waiting, .. } => waiting.iter().copied().collect(),
            RoundPhase::Arbitrating { .. } => return, // its own timer
        };
        if now.saturating_sub(r.phase_since_ns) <= limit {
            return;
        }
        if r.generation == 0 {
            crate::probe!(self.counters, "qmgr: formation timed out");
            self.round = None;
            self.start_retry_later(self.heartbeat_ns, now);
            return;
        }
        // A member that keeps heartbeating but does not answer is not
        // following the protocol: it is as good as failed.
        crate::probe!(self.counters, "qmgr: round timed out");
        let me = self.node;
        for n in waiting.into_iter().filter(|n| *n != me) {
            self.suspect(n, "it did not answer the membership protocol", ctx);
        }
    }
}
