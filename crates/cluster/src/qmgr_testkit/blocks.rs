//! Stand-in blocks of a simulated data node: a recorder subscribed to QMGR
//! (it plays the TC: answers `NfCompleteRep`), and a host / MGM stub that
//! hands what QMGR asks of them to the harness.

use norr_kernel::{Block, BlockRef, Ctx, Envelope, NodeId, Priority};
use norr_signals::cluster::ClusterSignal;
use norr_signals::internal::InternalSignal;
use norr_signals::{block, Signal};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// What the recorder of one node incarnation saw, shared with the harness.
#[derive(Debug, Default)]
pub struct RecorderShared {
    /// (virtual time, signal) not yet taken by the harness.
    pub entries: Vec<(u64, ClusterSignal)>,
    /// Hold `NfCompleteRep` back (a take-over that takes long).
    pub hold_nf_complete: bool,
    pub held_nf_complete: Vec<NodeId>,
    /// The answer to the last `StatsReq` the harness sent.
    pub stats: Option<Vec<(String, u64)>>,
    /// Serve leases (`ServeLeaseRep`): (virtual time, until).
    pub leases: Vec<(u64, u64)>,
    /// Serve lease revocations (`ServeLeaseRevokedRep`): virtual times.
    pub revocations: Vec<u64>,
}

pub struct Recorder {
    pub shared: Arc<Mutex<RecorderShared>>,
    /// Stand in for TC: answer `NfCompleteRep` (false next to a real TC).
    pub plays_tc: bool,
}

impl Block<Signal> for Recorder {
    fn on_signal(&mut self, env: Envelope<Signal>, ctx: &mut Ctx<'_, Signal>) {
        let qmgr = BlockRef::new(ctx.self_ref().node, block::QMGR, 0);
        match env.signal {
            Signal::Cluster(sig) => {
                let mut sh = self.shared.lock().expect("recorder lock");
                if let (true, ClusterSignal::NodeFailRep { failed, .. }) = (self.plays_tc, &*sig) {
                    // The TC's answer once the failed nodes' transactions are
                    // taken over: here at once, unless held.
                    for f in failed {
                        if sh.hold_nf_complete {
                            sh.held_nf_complete.push(*f);
                        } else {
                            let rep = ClusterSignal::NfCompleteRep { node: *f };
                            ctx.send_prio(qmgr, Signal::Cluster(Box::new(rep)), Priority::A);
                        }
                    }
                }
                if let ClusterSignal::ServeLeaseRep { until_ns } = *sig {
                    sh.leases.push((ctx.now_ns(), until_ns));
                } else if let ClusterSignal::ServeLeaseRevokedRep { .. } = *sig {
                    sh.revocations.push(ctx.now_ns());
                } else {
                    sh.entries.push((ctx.now_ns(), *sig));
                }
            }
            Signal::Internal(sig) => {
                if let InternalSignal::StatsConf { stats, .. } = *sig {
                    self.shared.lock().expect("recorder lock").stats = Some(stats.counters);
                }
            }
            _ => {}
        }
    }
}

/// HOST and MGM of a simulated node: everything sent to them goes to the
/// harness. A shutdown request halts the node at once (`halt`): as a real
/// host, the harness runs none of its blocks' signals after it, so a node
/// that learns it was excluded serves nothing more (not even what was
/// already queued, e.g. a client's read that came in while it was hung).
pub struct HostStub {
    pub out: Arc<Mutex<Vec<Envelope<Signal>>>>,
    pub halt: Arc<AtomicBool>,
}

impl Block<Signal> for HostStub {
    fn on_signal(&mut self, env: Envelope<Signal>, _ctx: &mut Ctx<'_, Signal>) {
        if let Signal::Cluster(c) = &env.signal {
            if matches!(**c, ClusterSignal::HostShutdownReq { .. }) {
                self.halt.store(true, Ordering::SeqCst);
            }
        }
        self.out.lock().expect("host lock").push(env);
    }
}
