//! Starting: finding a running cluster and joining it through the president,
//! or forming one with the other starting nodes; the president's side of
//! joins and graceful leaves; connections.

use super::split::covers_every_group;
use super::{Leaving, Phase, Qmgr};
use norr_kernel::{BlockRef, Ctx, NodeId};
use norr_signals::cluster::{ClusterView, MembershipChange, PeerState, QmgrMsg, ShutdownReason, StartKind};
use norr_signals::Signal;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug)]
pub(super) struct Start {
    pub since_ns: u64,
    /// The latest `Presence` of each connected peer.
    pub peers: BTreeMap<NodeId, PeerState>,
    /// A join request in flight: to whom, since when.
    pub joining: Option<(NodeId, u64)>,
    /// No new formation or join attempt before this.
    pub retry_at_ns: u64,
}

impl Qmgr {
    pub(super) fn on_start_req(&mut self, kind: StartKind, ctx: &mut Ctx<'_, Signal>) {
        if !matches!(self.phase, Phase::Idle) {
            crate::probe!(self.counters, "qmgr: start request when started");
            return;
        }
        self.kind = kind;
        let now = ctx.now_ns();
        self.phase = Phase::Starting(Start { since_ns: now, peers: BTreeMap::new(), joining: None, retry_at_ns: 0 });
        self.last_tick_ns = now;
        for p in self.connected.clone() {
            self.send_peer(p, QmgrMsg::PresenceReq { node: self.node }, ctx);
        }
        self.arm_tick(ctx);
        self.evaluate_start(ctx);
    }

    pub(super) fn on_connect(&mut self, node: NodeId, ctx: &mut Ctx<'_, Signal>) {
        if node == self.node || !self.data_nodes.contains(&node) {
            crate::probe!(self.counters, "qmgr: connect report of a stranger");
            return;
        }
        self.connected.insert(node);
        self.fresh.remove(&node);
        self.counters.bump("qmgr: connections up");
        if matches!(self.phase, Phase::Starting(_)) {
            self.send_peer(node, QmgrMsg::PresenceReq { node: self.node }, ctx);
        }
    }

    pub(super) fn on_disconnect(&mut self, node: NodeId, ctx: &mut Ctx<'_, Signal>) {
        if !self.data_nodes.contains(&node) {
            crate::probe!(self.counters, "qmgr: disconnect report of a stranger");
            return;
        }
        self.connected.remove(&node);
        self.fresh.remove(&node);
        self.joined_unheard.remove(&node);
        self.counters.bump("qmgr: connections down");
        match &mut self.phase {
            Phase::Starting(st) => {
                st.peers.remove(&node);
                if st.joining.is_some_and(|(p, _)| p == node) {
                    crate::probe!(self.counters, "qmgr: join lost the president's connection");
                    st.joining = None;
                }
                // A formation waiting for this node's answer cannot finish.
                if self.round.as_ref().is_some_and(|r| r.waits_for(node)) {
                    crate::probe!(self.counters, "qmgr: formation lost a node");
                    self.round = None;
                }
            }
            Phase::Member => {
                if self.members_now().contains(&node) {
                    // kill -9 breaks the connection: suspect at once.
                    self.suspect(node, "its connection broke", ctx);
                }
            }
            Phase::Idle | Phase::Stopped => {}
        }
    }

    pub(super) fn on_presence_req(&mut self, peer: NodeId, node: NodeId, ctx: &mut Ctx<'_, Signal>) {
        if node != peer {
            crate::probe!(self.counters, "qmgr: malformed message from a peer");
            return;
        }
        if self.joined_unheard.contains(&peer) {
            // Sent before it learned it joined.
            crate::probe!(self.counters, "qmgr: presence request crossed a join");
        } else {
            // Only a starting node asks: on this connection is a new incarnation.
            self.fresh.insert(peer);
            if self.is_member() && self.members_now().contains(&peer) {
                self.suspect(peer, "it is starting again (it restarted)", ctx);
            }
        }
        let state = self.peer_state();
        self.send_peer(peer, QmgrMsg::Presence { node: self.node, state }, ctx);
        if let Phase::Starting(st) = &mut self.phase {
            // It is starting too: no need to wait for its next answer.
            if self.connected.contains(&peer) {
                st.peers.insert(peer, PeerState::Starting);
                self.evaluate_start(ctx);
            }
        }
    }

    pub(super) fn on_presence(&mut self, peer: NodeId, node: NodeId, state: PeerState, ctx: &mut Ctx<'_, Signal>) {
        if node != peer || matches!(&state, PeerState::Member(v) if !self.valid_view(v)) {
            crate::probe!(self.counters, "qmgr: malformed message from a peer");
            return;
        }
        let Phase::Starting(st) = &mut self.phase else { return };
        if !self.connected.contains(&peer) {
            return;
        }
        st.peers.insert(peer, state);
        self.evaluate_start(ctx);
    }

    /// The newest view a connected peer reported, if a cluster is running.
    pub(super) fn running_cluster(&self) -> Option<ClusterView> {
        let Phase::Starting(st) = &self.phase else { return None };
        st.peers
            .iter()
            .filter(|(p, _)| self.connected.contains(p))
            .filter_map(|(_, s)| match s {
                PeerState::Member(v) => Some(v),
                _ => None,
            })
            .max_by_key(|v| v.membership.generation)
            .cloned()
    }

    /// Join a running cluster, or form one, if the time has come.
    pub(super) fn evaluate_start(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let now = ctx.now_ns();
        let Phase::Starting(st) = &self.phase else { return };
        if st.joining.is_some() || self.round.is_some() {
            return;
        }
        let (since_ns, waiting) = (st.since_ns, now < st.retry_at_ns);
        if let Some(view) = self.running_cluster() {
            if waiting {
                return;
            }
            let president = view.membership.president;
            if president == self.node {
                // The cluster still counts an earlier life of this node as its
                // president: it will notice the restart (broken connections,
                // silence) and choose another.
                crate::probe!(self.counters, "qmgr: join waits: cluster still has this node as president");
                return;
            }
            let missing = view.membership.members.iter().any(|m| *m != self.node && !self.connected.contains(m));
            if missing {
                crate::probe!(self.counters, "qmgr: join waits for connections to every member");
                return;
            }
            self.counters.bump("qmgr: join requests sent");
            self.send_peer(president, QmgrMsg::CmRegReq { node: self.node }, ctx);
            if let Phase::Starting(st) = &mut self.phase {
                st.joining = Some((president, now));
            }
            return;
        }
        let Phase::Starting(st) = &self.phase else { return };
        let mut present: BTreeSet<NodeId> = st
            .peers
            .iter()
            .filter(|(p, s)| self.connected.contains(p) && matches!(s, PeerState::Starting))
            .map(|(p, _)| *p)
            .collect();
        present.insert(self.node);
        if present.first() != Some(&self.node) {
            return; // the lowest starting node forms the cluster
        }
        // Every data node starting: form at once (no arbitration to wait
        // for, so no back-off either).
        if present != self.data_nodes {
            if waiting || now.saturating_sub(since_ns) < self.start_partial_timeout_ns {
                return;
            }
            if !covers_every_group(&self.node_groups, &present) {
                crate::probe!(self.counters, "qmgr: partial start waits for a node of every node group");
                return;
            }
            crate::probe!(self.counters, "qmgr: partial start");
        }
        let members: Vec<NodeId> = present.iter().copied().collect();
        self.start_round(MembershipChange::Form { members }, ctx);
    }

    /// Back off before the next attempt to form or join.
    pub(super) fn start_retry_later(&mut self, delay_ns: u64, now: u64) {
        if let Phase::Starting(st) = &mut self.phase {
            st.retry_at_ns = now + delay_ns;
            st.joining = None;
        }
    }

    /// Tick of a starting node: ask again, give up stale attempts, try.
    pub(super) fn start_tick(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let now = ctx.now_ns();
        for p in self.connected.clone() {
            self.send_peer(p, QmgrMsg::PresenceReq { node: self.node }, ctx);
        }
        let join_timeout_ns = self.protocol_timeout_ns() * 2 + self.arbitration_timeout_ns;
        if let Phase::Starting(st) = &mut self.phase {
            if st.joining.is_some_and(|(_, since)| now.saturating_sub(since) > join_timeout_ns) {
                crate::probe!(self.counters, "qmgr: join request unanswered");
                st.joining = None;
            }
        }
        self.round_tick(ctx);
        self.evaluate_start(ctx);
    }

    pub(super) fn on_cm_reg_conf(&mut self, peer: NodeId, view: ClusterView, ctx: &mut Ctx<'_, Signal>) {
        if !self.valid_view(&view) || !view.membership.contains(self.node) || !view.membership.contains(peer) {
            crate::probe!(self.counters, "qmgr: malformed message from a peer");
            return;
        }
        let Phase::Starting(_) = &self.phase else {
            // A repeated answer after this node joined.
            return;
        };
        self.counters.bump("qmgr: joined a running cluster");
        self.adopt(view, Some(MembershipChange::Join { node: self.node }), ctx);
    }

    pub(super) fn on_cm_reg_ref(
        &mut self,
        peer: NodeId,
        node: NodeId,
        reason: String,
        retry: bool,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        if node != self.node {
            crate::probe!(self.counters, "qmgr: malformed message from a peer");
            return;
        }
        let Phase::Starting(st) = &mut self.phase else { return };
        if st.joining.is_some_and(|(p, _)| p != peer) {
            return; // an answer to an earlier request
        }
        st.joining = None;
        if retry {
            crate::probe!(self.counters, "qmgr: join refused for now");
            let now = ctx.now_ns();
            self.start_retry_later(self.heartbeat_ns, now);
        } else {
            let why = format!("node {peer} refused this node's join: {reason}");
            self.shut_down(ShutdownReason::ConfigMismatch(why), ctx);
        }
    }

    /// President: a starting node asks to join.
    pub(super) fn on_cm_reg_req(&mut self, peer: NodeId, node: NodeId, ctx: &mut Ctx<'_, Signal>) {
        if node != peer {
            crate::probe!(self.counters, "qmgr: malformed message from a peer");
            return;
        }
        if !self.joined_unheard.contains(&peer) {
            self.fresh.insert(peer);
        }
        let refuse = |q: &mut Qmgr, reason: String, retry: bool, ctx: &mut Ctx<'_, Signal>| {
            q.send_peer(peer, QmgrMsg::CmRegRef { node, reason, retry }, ctx);
        };
        if !self.is_member() {
            return refuse(self, format!("node {} is not a member of a running cluster", self.node), true, ctx);
        }
        if self.acting_president() != self.node {
            let p = self.acting_president();
            return refuse(self, format!("node {} is not the president (node {p} is)", self.node), true, ctx);
        }
        if self.members_now().contains(&node) {
            if (self.last_join == Some(node) || self.joined_unheard.contains(&node)) && !self.acc.failed.contains(&node)
            {
                // It joined in this generation and asks again: its answer
                // crossed the request.
                let view = self.view.clone().expect("a member");
                self.send_peer(node, QmgrMsg::CmRegConf { view }, ctx);
                return;
            }
            self.suspect(node, "it asked to join again (it restarted)", ctx);
            return refuse(
                self,
                format!("node {node}'s previous life is still a member; it is being removed"),
                true,
                ctx,
            );
        }
        if self.round.is_some() || !self.acc.failed.is_empty() {
            crate::probe!(self.counters, "qmgr: join waits for a membership change");
            return refuse(self, "a membership change is in progress".into(), true, ctx);
        }
        if self.nf_pending.contains_key(&node) {
            crate::probe!(self.counters, "qmgr: join waits for take-over of the node's transactions");
            return refuse(
                self,
                format!("the transactions of node {node}'s previous life are still being taken over"),
                true,
                ctx,
            );
        }
        self.counters.bump("qmgr: joins started");
        self.start_round(MembershipChange::Join { node }, ctx);
    }

    /// The host asks this node to leave the cluster (`norr mgm stop`).
    pub(super) fn on_local_leave_req(&mut self, from: BlockRef, node: NodeId, ctx: &mut Ctx<'_, Signal>) {
        if node != self.node || !self.is_member() {
            let reason = format!("node {} is not a member of a running cluster", self.node);
            let msg = QmgrMsg::LeaveRef { node, reason, retry: false };
            ctx.send(from, super::cluster(norr_signals::cluster::ClusterSignal::Qmgr(msg)));
            return;
        }
        self.counters.bump("qmgr: leave requested");
        self.leaving = Some(Leaving { requester: from, ask_at_ns: 0 });
        self.ask_leave(ctx);
    }

    /// Ask the president (perhaps this node) to let this node leave.
    pub(super) fn ask_leave(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let again_ns = ctx.now_ns() + self.protocol_timeout_ns();
        let Some(l) = self.leaving.as_mut() else { return };
        // Asked again each few heartbeats until it happens (a president
        // that fails loses the request).
        l.ask_at_ns = again_ns;
        let p = self.acting_president();
        if p == self.node {
            self.on_leave_req(self.node, self.node, ctx);
        } else {
            self.send_peer(p, QmgrMsg::LeaveReq { node: self.node }, ctx);
        }
    }

    /// President: `node` asks to leave.
    pub(super) fn on_leave_req(&mut self, peer: NodeId, node: NodeId, ctx: &mut Ctx<'_, Signal>) {
        if node != peer {
            crate::probe!(self.counters, "qmgr: malformed message from a peer");
            return;
        }
        let answer = |q: &mut Qmgr, reason: String, retry: bool, ctx: &mut Ctx<'_, Signal>| {
            if node == q.node {
                q.on_leave_ref(node, node, reason, retry, ctx);
            } else {
                q.send_peer(node, QmgrMsg::LeaveRef { node, reason, retry }, ctx);
            }
        };
        if !self.is_member() || self.acting_president() != self.node {
            return answer(self, format!("node {} is not the president", self.node), true, ctx);
        }
        let mut rest = self.members_now();
        if !rest.remove(&node) {
            return answer(self, format!("node {node} is not a member"), false, ctx);
        }
        if matches!(self.round.as_ref().map(|r| &r.proposal), Some(MembershipChange::Leave { node: n }) if *n == node) {
            return; // already at it
        }
        if self.round.is_some() || !self.acc.failed.is_empty() {
            return answer(self, "a membership change is in progress".into(), true, ctx);
        }
        if !covers_every_group(&self.node_groups, &rest) {
            crate::probe!(self.counters, "qmgr: leave refused: last node of its group");
            let reason = format!(
                "node {node} is the last member of its node group: stopping it would stop the cluster \
                 (stop the whole cluster instead)"
            );
            return answer(self, reason, false, ctx);
        }
        self.counters.bump("qmgr: leaves started");
        self.start_round(MembershipChange::Leave { node }, ctx);
    }

    /// The leaving node: the president refused, for now or for good.
    pub(super) fn on_leave_ref(
        &mut self,
        peer: NodeId,
        node: NodeId,
        reason: String,
        retry: bool,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        if node != self.node {
            crate::probe!(self.counters, "qmgr: malformed message from a peer");
            return;
        }
        let Some(l) = self.leaving.as_mut() else { return };
        if retry {
            crate::probe!(self.counters, "qmgr: leave refused for now");
            l.ask_at_ns = ctx.now_ns() + self.heartbeat_ns;
            return;
        }
        let requester = l.requester;
        self.leaving = None;
        let reason = format!("node {peer} refused: {reason}");
        let msg = QmgrMsg::LeaveRef { node, reason, retry: false };
        ctx.send(requester, super::cluster(norr_signals::cluster::ClusterSignal::Qmgr(msg)));
    }
}
