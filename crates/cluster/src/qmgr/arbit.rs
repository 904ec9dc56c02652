//! Talking to the arbitrator (through the host's MGM block).
//!
//! Two kinds of `ArbitReq`:
//! * a round's: "may these survivors go on?", with the generation before the
//!   failure (both halves of a split share it);
//! * a registration: the president of each new generation tells the
//!   arbitrator the cluster reached it (`failed` empty). The arbitrator
//!   refuses generations older than the newest it saw, so a cluster that
//!   never needed arbitration (it shrank by graceful leaves, say) is still
//!   known, and a partial start elsewhere (generation 0) cannot be granted
//!   while it runs.
//!
//! Answers echo only the generation, and a registration of generation g and
//! a round of generation g share it: so this node keeps at most one request
//! unanswered, and a round waits for an earlier registration's answer (the
//! host answers every request exactly once: `granted: false` when it has no
//! arbitrator or it timed out).

use super::round::RoundPhase;
use super::{cluster, Qmgr};
use norr_kernel::{BlockRef, Ctx, NodeId, Priority};
use norr_signals::cluster::{Ballot, ClusterSignal, ShutdownReason};
use norr_signals::{block, Signal};

/// What the unanswered request was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ArbitPurpose {
    Register,
    Round(Ballot),
}

impl Qmgr {
    fn send_arbit_req(
        &mut self,
        generation: u64,
        survivors: Vec<NodeId>,
        failed: Vec<NodeId>,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        let mgm = BlockRef::new(self.node, block::MGM, 0);
        ctx.send_prio(mgm, cluster(ClusterSignal::ArbitReq { generation, survivors, failed }), Priority::A);
    }

    /// The president registers the generation it just adopted.
    pub(super) fn register_generation(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let Some(view) = self.view.as_ref() else { return };
        let generation = view.membership.generation;
        if view.membership.president != self.node {
            return;
        }
        // An older generation's request will not be confused with this
        // one's; one of this generation is a round's: it leads on anyway.
        if self.arbit_pending.is_some_and(|(g, _)| g >= generation) {
            return;
        }
        let survivors = view.membership.members.clone();
        self.counters.bump("qmgr: generation registered with arbitrator");
        self.arbit_pending = Some((generation, ArbitPurpose::Register));
        self.send_arbit_req(generation, survivors, Vec::new(), ctx);
    }

    /// Send the arbitration request of the round, unless an earlier request
    /// of the same generation is unanswered.
    pub(super) fn send_round_arbitration(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let Some(r) = self.round.as_mut() else { return };
        let RoundPhase::Arbitrating { sent, .. } = &mut r.phase else { return };
        if *sent {
            return;
        }
        if self.arbit_pending.is_some_and(|(g, _)| g == r.generation) {
            crate::probe!(self.counters, "qmgr: arbitration waits for an earlier answer");
            return;
        }
        *sent = true;
        let (generation, ballot) = (r.generation, r.ballot);
        let survivors: Vec<NodeId> = r.quorum.iter().copied().collect();
        let failed: Vec<NodeId> = r.failed.iter().copied().collect();
        self.counters.bump("qmgr: arbitration asked");
        self.arbit_pending = Some((generation, ArbitPurpose::Round(ballot)));
        self.send_arbit_req(generation, survivors, failed, ctx);
    }

    pub(super) fn on_arbit_conf(&mut self, generation: u64, granted: bool, reason: String, ctx: &mut Ctx<'_, Signal>) {
        let purpose = match self.arbit_pending {
            Some((g, p)) if g == generation => {
                self.arbit_pending = None;
                p
            }
            _ => {
                crate::probe!(self.counters, "qmgr: stale arbitration answer");
                return;
            }
        };
        match purpose {
            ArbitPurpose::Register => {
                if !granted {
                    // Registration only informs; a refusal means the
                    // arbitrator saw newer generations (an earlier life of
                    // the cluster) or has none: nothing to do.
                    crate::probe!(self.counters, "qmgr: arbitrator refused a registration");
                }
                self.send_round_arbitration(ctx);
            }
            ArbitPurpose::Round(ballot) => {
                let ours = self.round.as_ref().is_some_and(|r| {
                    r.generation == generation
                        && r.ballot == ballot
                        && matches!(r.phase, RoundPhase::Arbitrating { sent: true, .. })
                });
                if !ours {
                    // The answer for a ballot since replaced: the new one
                    // asks for itself.
                    crate::probe!(self.counters, "qmgr: stale arbitration answer");
                    return self.send_round_arbitration(ctx);
                }
                if granted {
                    self.counters.bump("qmgr: arbitration granted");
                    let r = self.round.as_mut().expect("checked");
                    let RoundPhase::Arbitrating { value, .. } = &r.phase else { unreachable!("checked") };
                    let value = value.clone();
                    self.start_accept(value, ctx);
                } else {
                    self.arbitration_lost(reason, ctx);
                }
            }
        }
    }

    pub(super) fn on_arbit_timeout(&mut self, generation: u64, ballot: Ballot, ctx: &mut Ctx<'_, Signal>) {
        let waiting = self.round.as_ref().is_some_and(|r| {
            r.generation == generation && r.ballot == ballot && matches!(r.phase, RoundPhase::Arbitrating { .. })
        });
        if waiting {
            crate::probe!(self.counters, "qmgr: arbitrator did not answer");
            let ms = self.arbitration_timeout_ns / 1_000_000;
            self.arbitration_lost(format!("the arbitrator did not answer within {ms} ms"), ctx);
        }
    }

    fn arbitration_lost(&mut self, reason: String, ctx: &mut Ctx<'_, Signal>) {
        crate::probe!(self.counters, "qmgr: arbitration lost");
        let generation = self.round.as_ref().expect("a round").generation;
        if generation == 0 {
            // Another part of the cluster may have started: wait to see it.
            self.round = None;
            let now = ctx.now_ns();
            self.start_retry_later(self.protocol_timeout_ns(), now);
            return;
        }
        self.stop_quorum(ShutdownReason::LostArbitration(reason), ctx);
    }
}
