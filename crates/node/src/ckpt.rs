//! CKPT: the global checkpoint (GCP) protocol of `norr_signals::ckpt`, run
//! by the master's CKPT (on a data node on its own: itself).
//!
//! Every `gcp_interval_ms`, for a new GCI `g` (one above the GCI commits
//! are tagged with now):
//! 1. `GcpPrepareReq { g }` to every TC: they hold back commit decisions.
//! 2. Once all confirmed, `GcpCommitReq { g }`: commits are tagged `g`
//!    from now on; each TC reports `GcpTcFinishedRep { g - 1 }` once none
//!    of its transactions tagged `g - 1` or lower is still committing.
//! 3. `GcpSaveReq { g - 1 }` to every LQH: each closes its REDO up to it
//!    and answers once that is synced.
//! 4. The system file records `g - 1` as the last complete GCI (written
//!    A/B alternately, synced): a restart recovers to it. Then
//!    `GcpCompleteRep { g - 1 }` goes to every LQH.
//!
//! A refused save (an LQH's log failed) stops GCPs: nothing later can be
//! called complete. Commits go on (they are network durable); the node
//! must be restarted to be disk durable again. Without a data directory
//! the system file step is skipped (GCIs still advance: the TC barrier and
//! GCIs work the same in memory-only nodes).

use norr_durability::sysfile::{NodeInfo, NodeRestartState, SysFile, SysFileStore};
use norr_kernel::counters::Counters;
use norr_kernel::{Block, BlockRef, Ctx, Envelope, NodeId, Priority};
use norr_knobs::Knobs;
use norr_signals::ckpt::{CkptSignal, Gci};
use norr_signals::fs::{FileHandle, FsOp, FsResult, FsSignal};
use norr_signals::{block, Signal};
use std::collections::BTreeSet;

/// Where a GCP is.
#[derive(Debug)]
enum Phase {
    Idle,
    Prepare {
        gci: Gci,
        waiting: BTreeSet<BlockRef>,
    },
    Commit {
        gci: Gci,
        waiting: BTreeSet<BlockRef>,
    },
    Save {
        gci: Gci,
        waiting: BTreeSet<BlockRef>,
    },
    /// Writing the system file: the FS step in flight.
    Record {
        gci: Gci,
        step: SysStep,
    },
    /// A save was refused: no more GCPs.
    Stopped {
        why: String,
    },
}

#[derive(Debug, Clone, Copy)]
enum SysStep {
    Open,
    Write(FileHandle),
    Close,
}

/// The system file of a node with a data directory.
pub struct SysState {
    pub sysfile: SysFile,
    pub store: SysFileStore,
}

pub struct Ckpt {
    node: NodeId,
    /// The data nodes whose TCs and LQHs take part.
    nodes: Vec<NodeId>,
    tc_instances: u16,
    lqh_instances: u16,
    interval_ns: u64,
    /// GCI commits are tagged with now.
    current: Gci,
    complete: Gci,
    phase: Phase,
    sys: Option<SysState>,
    /// The system file bytes to write once the file is open.
    pending_sys: Option<Vec<u8>>,
    next_req: u64,
    counters: Counters,
}

fn ckpt(s: CkptSignal) -> Signal {
    Signal::Ckpt(Box::new(s))
}

impl Ckpt {
    /// `current`: the GCI the node's TCs start tagging commits with;
    /// `complete`: the last complete GCI (the restart point, 0 if none).
    pub fn new(node: NodeId, nodes: Vec<NodeId>, knobs: &Knobs, current: Gci, complete: Gci) -> Ckpt {
        assert!(current > complete, "commits are tagged above the last complete GCI");
        Ckpt {
            node,
            nodes,
            tc_instances: knobs.tc_instances.max(1),
            lqh_instances: norr_txn::LQH_INSTANCES,
            interval_ns: knobs.gcp_interval_ms.max(1) * 1_000_000,
            current,
            complete,
            phase: Phase::Idle,
            sys: None,
            pending_sys: None,
            next_req: 1,
            counters: Counters::default(),
        }
    }

    /// Record each complete GCI in this system file (a data directory).
    pub fn with_sysfile(mut self, sys: SysState) -> Ckpt {
        self.sys = Some(sys);
        self
    }

    pub fn complete_gci(&self) -> Gci {
        self.complete
    }

    /// Why GCPs stopped (a refused save or a failed system file write).
    pub fn stopped(&self) -> Option<&str> {
        match &self.phase {
            Phase::Stopped { why } => Some(why),
            _ => None,
        }
    }

    fn tcs(&self) -> BTreeSet<BlockRef> {
        let mut v = BTreeSet::new();
        for &n in &self.nodes {
            v.extend((0..self.tc_instances).map(|i| BlockRef::new(n, block::TC, i)));
        }
        v
    }

    fn lqhs(&self) -> BTreeSet<BlockRef> {
        let mut v = BTreeSet::new();
        for &n in &self.nodes {
            v.extend((0..self.lqh_instances).map(|i| BlockRef::new(n, block::LQH, i)));
        }
        v
    }

    fn arm_timer(&self, ctx: &mut Ctx<'_, Signal>) {
        let me = ctx.self_ref();
        ctx.send_delayed(me, ckpt(CkptSignal::GcpTimer), self.interval_ns);
    }

    fn start_gcp(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let gci = self.current + 1;
        let waiting = self.tcs();
        for &to in &waiting {
            ctx.send_prio(to, ckpt(CkptSignal::GcpPrepareReq { gci }), Priority::A);
        }
        self.counters.bump("ckpt: gcps started");
        self.phase = Phase::Prepare { gci, waiting };
    }

    fn fs(&mut self, ctx: &mut Ctx<'_, Signal>, op: FsOp) {
        let req_id = self.next_req;
        self.next_req += 1;
        let to = BlockRef::new(self.node, block::FS, 0);
        ctx.send_prio(to, Signal::Fs(Box::new(FsSignal::Req { req_id, op })), Priority::A);
    }

    /// Every LQH saved `gci`: record it, or (no data directory) done.
    fn record(&mut self, gci: Gci, ctx: &mut Ctx<'_, Signal>) {
        let Some(sys) = self.sys.as_mut() else {
            return self.completed(gci, ctx);
        };
        sys.sysfile.last_complete_gci = gci;
        sys.sysfile.nodes =
            self.nodes.iter().map(|&node| NodeInfo { node, state: NodeRestartState::Started, last_gci: gci }).collect();
        match sys.store.write(&mut sys.sysfile) {
            Ok(w) => {
                self.phase = Phase::Record { gci, step: SysStep::Open };
                self.pending_sys = Some(w.bytes);
                self.fs(ctx, FsOp::Open { path: w.path.into(), create: true, truncate: true });
            }
            Err(crashed) => panic!("crash point reached: {}", crashed.0),
        }
    }

    fn completed(&mut self, gci: Gci, ctx: &mut Ctx<'_, Signal>) {
        debug_assert!(gci > self.complete);
        self.complete = gci;
        self.counters.bump("ckpt: gcps completed");
        for to in self.lqhs() {
            ctx.send_prio(to, ckpt(CkptSignal::GcpCompleteRep { gci }), Priority::A);
        }
        self.phase = Phase::Idle;
        self.arm_timer(ctx);
    }

    fn stop(&mut self, why: String) {
        self.counters.bump("ckpt: gcps stopped");
        self.phase = Phase::Stopped { why };
    }

    fn on_ckpt(&mut self, from: BlockRef, sig: CkptSignal, ctx: &mut Ctx<'_, Signal>) {
        match (sig, &mut self.phase) {
            (CkptSignal::GcpTimer, Phase::Idle) => self.start_gcp(ctx),
            (CkptSignal::GcpTimer, _) => {}
            (CkptSignal::GcpPrepareConf { gci }, Phase::Prepare { gci: g, waiting }) if gci == *g => {
                waiting.remove(&from);
                if waiting.is_empty() {
                    let waiting = self.tcs();
                    for &to in &waiting {
                        ctx.send_prio(to, ckpt(CkptSignal::GcpCommitReq { gci }), Priority::A);
                    }
                    self.current = gci;
                    self.phase = Phase::Commit { gci: gci - 1, waiting };
                }
            }
            (CkptSignal::GcpTcFinishedRep { gci }, Phase::Commit { gci: g, waiting }) if gci == *g => {
                waiting.remove(&from);
                if waiting.is_empty() {
                    let waiting = self.lqhs();
                    for &to in &waiting {
                        ctx.send_prio(to, ckpt(CkptSignal::GcpSaveReq { gci }), Priority::A);
                    }
                    self.phase = Phase::Save { gci, waiting };
                }
            }
            (CkptSignal::GcpSaveConf { gci }, Phase::Save { gci: g, waiting }) if gci == *g => {
                waiting.remove(&from);
                if waiting.is_empty() {
                    self.record(gci, ctx);
                }
            }
            (CkptSignal::GcpSaveRef { gci, error }, Phase::Save { gci: g, .. }) if gci == *g => {
                self.stop(format!("LQH {from} could not save GCI {gci}: {error}"));
            }
            // Answers to a GCP that was given up.
            (_, Phase::Stopped { .. }) => {}
            (other, phase) => {
                norr_kernel::probe!(self.counters, "ckpt: unexpected signal");
                debug_assert!(false, "CKPT got {other:?} in {phase:?}");
            }
        }
    }

    fn on_fs(&mut self, sig: FsSignal, ctx: &mut Ctx<'_, Signal>) {
        let Phase::Record { gci, step } = self.phase else {
            debug_assert!(false, "FS reply outside a system file write");
            return;
        };
        match (sig, step) {
            (FsSignal::Conf { result: FsResult::Opened { file, .. }, .. }, SysStep::Open) => {
                let data = self.pending_sys.take().expect("bytes to write");
                self.phase = Phase::Record { gci, step: SysStep::Write(file) };
                self.fs(ctx, FsOp::Write { file, offset: 0, data, sync: true });
            }
            (FsSignal::Conf { result: FsResult::Written, .. }, SysStep::Write(file)) => {
                self.phase = Phase::Record { gci, step: SysStep::Close };
                self.fs(ctx, FsOp::Close { file });
            }
            (FsSignal::Conf { result: FsResult::Closed, .. }, SysStep::Close) => {
                let sys = self.sys.as_mut().expect("a system file");
                if let Err(crashed) = sys.store.on_written() {
                    panic!("crash point reached: {}", crashed.0);
                }
                self.completed(gci, ctx);
            }
            (FsSignal::Ref { error, .. }, _) => {
                self.sys.as_mut().expect("a system file").store.on_failed();
                self.stop(format!("cannot write the system file: {error}"));
            }
            (other, _) => debug_assert!(false, "CKPT got FS reply {other:?}"),
        }
    }
}

impl Block<Signal> for Ckpt {
    fn on_signal(&mut self, env: Envelope<Signal>, ctx: &mut Ctx<'_, Signal>) {
        match env.signal {
            Signal::Ckpt(c) => self.on_ckpt(env.from, *c, ctx),
            Signal::Fs(f) => self.on_fs(*f, ctx),
            other => {
                norr_kernel::probe!(self.counters, "ckpt: unexpected signal");
                debug_assert!(false, "CKPT got {}", other.name());
            }
        }
    }
}

/// The signal that starts a node's CKPT (the host delivers it once).
pub fn start_signal(node: NodeId) -> Envelope<Signal> {
    let me = BlockRef::new(node, block::CKPT, 0);
    Envelope { from: me, to: me, prio: Priority::B, signal: ckpt(CkptSignal::GcpTimer) }
}
