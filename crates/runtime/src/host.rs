//! The host's own blocks and what crosses threads into the event loop.
//!
//! Blocks reach their host through signals like everything else: QMGR asks
//! `block::HOST` to cut a failed peer off or to stop the node, and
//! `block::MGM` to ask the arbitrator. The runtime registers a `HostBlock`
//! at those addresses; it only queues what it gets, and the event loop acts
//! on it after each round of the scheduler (blocks never touch sockets).
//!
//! Arbitration asks the management server over the network, which may take
//! a while: it runs on a helper thread, and its answer comes back through
//! the `Inbox` (a queue plus the loop's waker) as an `ArbitConf` signal.

use norr_kernel::{Block, BlockRef, Ctx, Envelope, NodeId, Priority};
use norr_signals::cluster::ClusterSignal;
use norr_signals::{block, Signal};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Asks the cluster's arbitrator (the management server) whether a part of
/// the cluster may go on after a node failure. Implemented by the caller
/// that starts the node (the `norr` binary glues the mgmd session in).
pub trait Arbitrator: Send + Sync {
    /// True: granted. Err: no answer (unreachable, timed out); the caller
    /// then treats it as refused.
    fn arbitrate(
        &self,
        requester: NodeId,
        generation: u64,
        survivors: Vec<NodeId>,
        failed: Vec<NodeId>,
        timeout: Duration,
    ) -> Result<bool, String>;
}

/// What the host learned from its blocks for whoever runs the node (the
/// `norr datad` supervisor reads it through `DataNodeHandle`).
#[derive(Default)]
pub(crate) struct HostReports {
    /// DIH's latest status report.
    pub status: Option<norr_signals::cluster::NodeStatus>,
    /// QMGR refused a graceful leave for good (the reason), until taken.
    pub leave_refused: Option<String>,
    /// CKPT's latest `DurableGciRep`: (GCI the files restore to, complete copy).
    pub durable: Option<(u64, bool)>,
}

/// Signals blocks sent to the host, in order, and whether one asked to
/// shut the node down.
#[derive(Clone, Default)]
pub(crate) struct HostQueue {
    pub queue: Arc<Mutex<Vec<Envelope<Signal>>>>,
    /// Set with a `HostShutdownReq`: the loop runs no further signal of the
    /// blocks (a node that learns it was excluded must not serve even what
    /// is already queued, such as a read that came in while it was hung).
    pub halt: Arc<AtomicBool>,
}

/// The block at `HOST` and `MGM`: queues what it gets for the event loop.
pub(crate) struct HostBlock {
    pub queue: HostQueue,
}

impl Block<Signal> for HostBlock {
    fn on_signal(&mut self, env: Envelope<Signal>, _ctx: &mut Ctx<'_, Signal>) {
        if let Signal::Cluster(c) = &env.signal {
            if matches!(**c, ClusterSignal::HostShutdownReq { .. }) {
                self.queue.halt.store(true, Ordering::SeqCst);
            }
        }
        self.queue.queue.lock().expect("host queue lock").push(env);
    }
}

/// Signals other threads hand to the event loop (arbitration answers, file
/// system completions); the loop delivers them at its next round.
#[derive(Clone)]
pub(crate) struct Inbox {
    queue: Arc<Mutex<Vec<Envelope<Signal>>>>,
    pending: Arc<AtomicBool>,
    waker: Arc<mio::Waker>,
}

impl Inbox {
    pub fn new(waker: Arc<mio::Waker>) -> Inbox {
        Inbox { queue: Arc::default(), pending: Arc::default(), waker }
    }

    /// Queue `env` for the loop and wake it.
    pub fn push(&self, env: Envelope<Signal>) {
        self.queue.lock().expect("inbox lock").push(env);
        self.pending.store(true, Ordering::Release);
        if let Err(e) = self.waker.wake() {
            tracing::warn!("waking the event loop failed: {e}");
        }
    }

    pub fn has_work(&self) -> bool {
        self.pending.load(Ordering::Acquire)
    }

    pub fn take(&self) -> Vec<Envelope<Signal>> {
        self.pending.store(false, Ordering::Release);
        std::mem::take(&mut *self.queue.lock().expect("inbox lock"))
    }
}

/// Ask the arbitrator on a helper thread; the answer arrives as an
/// `ArbitConf` to QMGR through `inbox`. Without an arbitrator the answer is
/// a refusal at once (the survivors then stop: safe, never two halves).
pub(crate) fn arbitrate(
    node: NodeId,
    arbitrator: Option<Arc<dyn Arbitrator>>,
    req: (u64, Vec<NodeId>, Vec<NodeId>),
    timeout: Duration,
    inbox: Inbox,
) {
    let (generation, survivors, failed) = req;
    let reply = move |granted: bool, reason: String| Envelope {
        from: BlockRef::new(node, block::MGM, 0),
        to: BlockRef::new(node, block::QMGR, 0),
        prio: Priority::A,
        signal: Signal::Cluster(Box::new(ClusterSignal::ArbitConf { generation, granted, reason })),
    };
    let Some(a) = arbitrator else {
        inbox.push(reply(false, "no arbitrator: this data node was started without a management server".into()));
        return;
    };
    let spawned = std::thread::Builder::new().name(format!("norr-arbit-{node}")).spawn(move || {
        let (granted, reason) = match a.arbitrate(node, generation, survivors, failed, timeout) {
            Ok(true) => (true, "granted by the arbitrator".to_string()),
            Ok(false) => (false, "the arbitrator granted another part of the cluster".to_string()),
            Err(e) => (false, format!("no answer from the arbitrator: {e}")),
        };
        inbox.push(reply(granted, reason));
    });
    if let Err(e) = spawned {
        tracing::error!("cannot start the arbitration thread: {e}");
    }
}
