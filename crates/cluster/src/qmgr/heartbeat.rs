//! Heartbeats, suspicion and failure reports.

use super::{Phase, Qmgr};
use norr_kernel::{Ctx, NodeId};
use norr_signals::cluster::{ClusterSignal, MembershipChange, QmgrMsg};
use norr_signals::Signal;

impl Qmgr {
    /// How long a protocol step may take before its silent participants
    /// count as failed (a starting node gives up the attempt instead).
    pub(super) fn protocol_timeout_ns(&self) -> u64 {
        self.heartbeat_ns * (self.missed_heartbeats as u64 + 1) * 2
    }

    pub(super) fn on_tick(&mut self, ctx: &mut Ctx<'_, Signal>) {
        self.tick_armed = false;
        match self.phase {
            Phase::Idle | Phase::Stopped => return,
            Phase::Starting(_) => self.start_tick(ctx),
            Phase::Member => self.member_tick(ctx),
        }
        if !matches!(self.phase, Phase::Stopped) {
            self.arm_tick(ctx);
        }
    }

    fn member_tick(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let now = ctx.now_ns();
        let elapsed = now.saturating_sub(self.last_tick_ns);
        self.last_tick_ns = now;
        let peers = self.send_heartbeats(ctx);
        let stalled = elapsed > 2 * self.heartbeat_ns;
        if stalled {
            // This node itself did not run for a while (a stall, SIGSTOP):
            // its peers' silence says nothing. Give them a fresh window; if
            // they declared this node failed meanwhile, it hears so.
            crate::probe!(self.counters, "qmgr: own stall, heartbeat check skipped");
            for p in &peers {
                self.last_heard_ns.insert(*p, now);
            }
            // No lease until every peer was heard from again.
            self.unheard_since_stall = peers.iter().copied().collect();
        } else {
            let limit = self.heartbeat_ns * self.missed_heartbeats as u64;
            let silent: Vec<NodeId> = peers
                .iter()
                .copied()
                .filter(|p| now.saturating_sub(self.last_heard_ns.get(p).copied().unwrap_or(now)) > limit)
                .collect();
            for p in silent {
                crate::probe!(self.counters, "qmgr: missed heartbeats");
                let reason = format!("it missed {} heartbeats", self.missed_heartbeats);
                self.suspect(p, &reason, ctx);
            }
        }
        if !self.is_member() {
            return;
        }
        self.renew_lease(now, elapsed, stalled, ctx);
        self.round_tick(ctx);
        if self.leaving.as_ref().is_some_and(|l| now >= l.ask_at_ns) && self.is_member() {
            self.ask_leave(ctx);
        }
    }

    /// Tell the node's TCs how long they may serve (`ServeLeaseRep`): until
    /// the others could declare this node failed for its silence, counted
    /// from this tick's heartbeats, less half an interval. Not after a tick
    /// that came late (the others may be excluding it now), nor after a
    /// stall until every peer was heard from again, nor while any member is
    /// suspected (a failure round decides who stays).
    fn renew_lease(&mut self, now: u64, elapsed: u64, stalled: bool, ctx: &mut Ctx<'_, Signal>) {
        let hb = self.heartbeat_ns;
        let late = 2 * elapsed > (2 * self.missed_heartbeats as u64 - 1) * hb;
        if stalled || late || !self.unheard_since_stall.is_empty() || !self.acc.failed.is_empty() {
            crate::probe!(self.counters, "qmgr: serve lease not renewed");
            return;
        }
        let until_ns = now + self.missed_heartbeats as u64 * hb - hb / 2;
        for s in self.subscribers.iter().filter(|s| s.block == norr_signals::block::TC) {
            ctx.send_prio(
                *s,
                Signal::Cluster(Box::new(ClusterSignal::ServeLeaseRep { until_ns })),
                norr_kernel::Priority::A,
            );
        }
    }

    /// A member is suspected: the serve lease ends now (see
    /// `ClusterSignal::ServeLeaseRevokedRep`). `adopt` renews it as soon as
    /// a round leaves no member suspected.
    pub(super) fn revoke_lease(&mut self, ctx: &mut Ctx<'_, Signal>) {
        debug_assert!(!self.acc.failed.is_empty(), "a revocation without a suspect");
        crate::probe!(self.counters, "qmgr: serve lease revoked");
        let suspected: Vec<NodeId> = self.acc.failed.iter().copied().collect();
        for s in self.subscribers.iter().filter(|s| s.block == norr_signals::block::TC) {
            let rep = ClusterSignal::ServeLeaseRevokedRep { suspected: suspected.clone() };
            ctx.send_prio(*s, Signal::Cluster(Box::new(rep)), norr_kernel::Priority::A);
        }
    }

    /// A membership change left no member suspected: heartbeat every peer
    /// now and renew the lease from this moment, rather than at the next
    /// tick. The lease was revoked when the failure was suspected; waiting
    /// up to an interval for the tick would add that to every failover.
    /// The bound holds as at a tick: the peers hear this heartbeat no
    /// earlier than it is sent, and declare this node failed only after
    /// `missed_heartbeats` intervals of silence from then.
    pub(super) fn heartbeat_and_renew_now(&mut self, ctx: &mut Ctx<'_, Signal>) {
        debug_assert!(self.is_member() && self.acc.failed.is_empty());
        let now = ctx.now_ns();
        self.send_heartbeats(ctx);
        self.renew_lease(now, 0, false, ctx);
    }

    /// Heartbeat every member but this node and those it holds failed;
    /// returns them.
    fn send_heartbeats(&mut self, ctx: &mut Ctx<'_, Signal>) -> Vec<NodeId> {
        let generation = self.generation();
        let peers: Vec<NodeId> =
            self.members_now().into_iter().filter(|m| *m != self.node && !self.acc.failed.contains(m)).collect();
        for p in &peers {
            self.send_peer(*p, QmgrMsg::Heartbeat { generation }, ctx);
        }
        self.counters.bump_by("qmgr: heartbeats sent", peers.len() as u64);
        peers
    }

    /// Any message of a member (but a starting one's) counts as a heartbeat.
    pub(super) fn heard_from(&mut self, peer: NodeId, ctx: &mut Ctx<'_, Signal>) {
        self.joined_unheard.remove(&peer);
        self.unheard_since_stall.remove(&peer);
        if peer != self.node && self.is_member() && !self.acc.failed.contains(&peer) {
            if let Some(t) = self.last_heard_ns.get_mut(&peer) {
                *t = ctx.now_ns();
            }
        }
    }

    pub(super) fn on_heartbeat(&mut self, peer: NodeId, generation: u64, ctx: &mut Ctx<'_, Signal>) {
        if !self.is_member() {
            return;
        }
        let my_gen = self.generation();
        if generation >= 1 && generation <= my_gen && !self.members_now().contains(&peer) {
            // A removed node that did not notice (a hang, a healed cut).
            crate::probe!(self.counters, "qmgr: heartbeat from a removed node");
            let reason = format!("node {} no longer counts it as a member (generation {my_gen})", self.node);
            self.send_peer(peer, QmgrMsg::YouAreExcluded { generation: my_gen, reason }, ctx);
        }
    }

    /// This member believes `node` failed: cut it off and have it removed.
    pub(super) fn suspect(&mut self, node: NodeId, reason: &str, ctx: &mut Ctx<'_, Signal>) {
        if !self.is_member() || node == self.node || !self.members_now().contains(&node) {
            return;
        }
        if !self.acc.failed.insert(node) {
            return;
        }
        self.counters.bump("qmgr: nodes suspected");
        self.cut_off(node, reason, ctx);
        self.failures_changed(reason, ctx);
    }

    /// Cut a failed member off. A hung node reads `YouAreExcluded` when it
    /// wakes up (the host closes the connection after what was sent), and a
    /// connection that already broke, or belongs to a new incarnation of the
    /// node, is left alone.
    pub(super) fn cut_off(&mut self, node: NodeId, reason: &str, ctx: &mut Ctx<'_, Signal>) {
        debug_assert!(self.acc.failed.contains(&node));
        self.last_heard_ns.remove(&node);
        if self.connected.contains(&node) && !self.fresh.contains(&node) {
            let generation = self.generation();
            self.send_peer(node, QmgrMsg::YouAreExcluded { generation, reason: reason.to_string() }, ctx);
            self.to_host(ClusterSignal::HostDisconnectReq { node }, ctx);
        }
    }

    /// The set of failed members grew: coordinate their removal, or report
    /// them to the acting president.
    pub(super) fn failures_changed(&mut self, reason: &str, ctx: &mut Ctx<'_, Signal>) {
        debug_assert!(!self.acc.failed.is_empty());
        self.revoke_lease(ctx);
        let president = self.acting_president();
        let generation = self.generation();
        if president == self.node {
            let running = self.round.as_ref().is_some_and(|r| {
                r.generation == generation
                    && matches!(r.proposal, MembershipChange::Fail { .. })
                    && r.failed == self.acc.failed
            });
            if !running {
                self.start_round(MembershipChange::Fail { failed: Vec::new() }, ctx);
            }
        } else {
            let failed = self.acc.failed.iter().copied().collect();
            let msg = QmgrMsg::FailRep { generation, failed, reason: reason.to_string() };
            self.send_peer(president, msg, ctx);
        }
    }

    pub(super) fn on_fail_rep(
        &mut self,
        peer: NodeId,
        generation: u64,
        failed: Vec<NodeId>,
        reason: String,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        if !self.valid_nodes(&failed) || failed.contains(&peer) {
            crate::probe!(self.counters, "qmgr: malformed message from a peer");
            return;
        }
        if !self.is_member() {
            return;
        }
        let members = self.members_now();
        if !members.contains(&peer) || self.acc.failed.contains(&peer) {
            crate::probe!(self.counters, "qmgr: fail report from a non-member ignored");
            return;
        }
        let _ = generation; // reports name nodes; the current members decide what counts
        let new: Vec<NodeId> = failed
            .into_iter()
            .filter(|n| *n != self.node && members.contains(n) && !self.acc.failed.contains(n))
            .collect();
        if new.is_empty() {
            return;
        }
        self.counters.bump("qmgr: fail reports");
        let reason = format!("node {peer} reports: {reason}");
        for n in &new {
            self.acc.failed.insert(*n);
            self.cut_off(*n, &reason, ctx);
        }
        self.failures_changed(&reason, ctx);
    }
}
