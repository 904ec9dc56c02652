//! The local checkpoint (LCP) coordinator of a node with a data directory,
//! hosted by the CKPT block (signals and the round in `norr_signals::ckpt`).
//!
//! A round:
//! 1. `LcpTimer`: round `id` starts with `start_gci` = the last complete
//!    GCI + 1 (every change of a lower GCI is in storage by now, so it is in
//!    the fuzzy scan or in the REDO log after it). `LcpStartReq` to every
//!    LQH of this node.
//! 2. Every LQH confirmed: once the last complete GCI reaches the round's
//!    highest row GCI (a restart to an earlier GCI could not use these
//!    files), the system file's `last_lcp_id` is set; the next GCP writes
//!    it.
//! 3. That GCP completed (the system file with the round is durable):
//!    `LcpCompleteRep` to every LQH: each releases its REDO log before
//!    `start_gci` and deletes the checkpoint files no restart needs.
//! 4. The next round starts `lcp_min_gap_ms` later, at once if an LQH's
//!    REDO log was 25 % full or more.
//!
//! A refused round (an LQH's disk failed) is given up: nothing is released,
//! and the next round tries again after the gap.

use norr_durability::crash::points;
use norr_durability::sysfile::SysFile;
use norr_durability::{crash_point, CrashPoints};
use norr_kernel::counters::Counters;
use norr_kernel::{BlockRef, Ctx, NodeId, Priority};
use norr_knobs::Knobs;
use norr_signals::ckpt::{CkptSignal, Gci};
use norr_signals::{block, Signal};
use std::collections::BTreeSet;

#[derive(Debug)]
enum State {
    /// Waiting for the timer (armed or not yet).
    Idle {
        armed: bool,
    },
    Running {
        lcp_id: u64,
        start_gci: Gci,
        waiting: BTreeSet<BlockRef>,
        max_gci: Gci,
    },
    /// Every LQH is done; waiting until `max_gci` is complete.
    AwaitGci {
        lcp_id: u64,
        start_gci: Gci,
        max_gci: Gci,
    },
    /// The system file holds the round from the first write after
    /// generation `after` (one may have been in flight when it was set).
    Recording {
        lcp_id: u64,
        start_gci: Gci,
        after: u64,
    },
}

pub struct LcpCoordinator {
    node: NodeId,
    lqh_instances: u16,
    min_gap_ns: u64,
    /// Newest round recorded in the system file (or seen on disk).
    last_lcp_id: u64,
    state: State,
    /// Highest REDO fill (per mille) the last round's LQHs reported.
    redo_fill_permille: u32,
    pub crash: CrashPoints,
    counters: Counters,
    last_error: Option<String>,
}

fn ckpt(s: CkptSignal) -> Signal {
    Signal::Ckpt(Box::new(s))
}

impl LcpCoordinator {
    /// `last_lcp_id`: the highest LCP id in the system file or on disk
    /// (new rounds count on from it).
    pub fn new(node: NodeId, knobs: &Knobs, last_lcp_id: u64) -> LcpCoordinator {
        LcpCoordinator {
            node,
            lqh_instances: norr_txn::LQH_INSTANCES,
            min_gap_ns: knobs.lcp_min_gap_ms.saturating_mul(1_000_000),
            last_lcp_id,
            state: State::Idle { armed: false },
            redo_fill_permille: 0,
            crash: CrashPoints::off(),
            counters: Counters::default(),
            last_error: None,
        }
    }

    /// Newest round recorded in the system file.
    pub fn last_lcp_id(&self) -> u64 {
        self.last_lcp_id
    }

    /// The coordinator's counters (rounds started, completed, failed).
    pub fn counters(&self) -> Vec<(String, u64)> {
        self.counters.snapshot()
    }

    /// Why the last round failed, if it did.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    fn lqhs(&self) -> BTreeSet<BlockRef> {
        (0..self.lqh_instances).map(|i| BlockRef::new(self.node, block::LQH, i)).collect()
    }

    fn arm(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let gap = if self.redo_fill_permille >= 250 { 0 } else { self.min_gap_ns };
        let me = ctx.self_ref();
        ctx.send_delayed(me, ckpt(CkptSignal::LcpTimer), gap);
        self.state = State::Idle { armed: true };
    }

    /// An LCP signal for CKPT. `complete`: the last complete GCI;
    /// `sysfile`: the system file CKPT writes at every GCP.
    pub fn on_signal(
        &mut self,
        from: BlockRef,
        sig: CkptSignal,
        complete: Gci,
        sysfile: &mut SysFile,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        match (sig, &mut self.state) {
            (CkptSignal::LcpTimer, State::Idle { .. }) => {
                let lcp_id = self.last_lcp_id + 1;
                let start_gci = complete + 1;
                let waiting = self.lqhs();
                for &to in &waiting {
                    ctx.send_prio(to, ckpt(CkptSignal::LcpStartReq { lcp_id, start_gci }), Priority::A);
                }
                self.counters.bump("ckpt: lcp rounds started");
                self.redo_fill_permille = 0;
                self.state = State::Running { lcp_id, start_gci, waiting, max_gci: 0 };
            }
            (CkptSignal::LcpTimer, _) => {}
            (
                CkptSignal::LcpInstanceConf { lcp_id, max_gci: g, redo_fill_permille, .. },
                State::Running { lcp_id: id, start_gci, waiting, max_gci },
            ) if lcp_id == *id => {
                waiting.remove(&from);
                *max_gci = (*max_gci).max(g);
                self.redo_fill_permille = self.redo_fill_permille.max(redo_fill_permille);
                if waiting.is_empty() {
                    let (start_gci, max_gci) = (*start_gci, *max_gci);
                    self.state = State::AwaitGci { lcp_id, start_gci, max_gci };
                    self.on_gcp_completed(complete, sysfile, ctx);
                }
            }
            (CkptSignal::LcpInstanceRef { lcp_id, error }, State::Running { lcp_id: id, .. }) if lcp_id == *id => {
                self.counters.bump("ckpt: lcp rounds failed");
                self.last_error = Some(format!("LCP {lcp_id} failed at {from}: {error}"));
                // The ids of this round are used: count on from it.
                self.last_lcp_id = lcp_id;
                self.arm(ctx);
            }
            // Answers of a given-up round.
            (CkptSignal::LcpInstanceConf { .. } | CkptSignal::LcpInstanceRef { .. }, _) => {
                norr_kernel::probe!(self.counters, "ckpt: late lcp answer");
            }
            (other, state) => {
                norr_kernel::probe!(self.counters, "ckpt: unexpected lcp signal");
                debug_assert!(false, "LCP coordinator got {other:?} in {state:?}");
            }
        }
    }

    /// GCI `gci` is complete and the system file holding it is durable.
    pub fn on_gcp_completed(&mut self, gci: Gci, sysfile: &mut SysFile, ctx: &mut Ctx<'_, Signal>) {
        match self.state {
            State::Idle { armed: false } => self.arm(ctx),
            State::AwaitGci { lcp_id, start_gci, max_gci } if gci >= max_gci => {
                if crash_point!(self.crash, points::LCP_ROUND_BEFORE_SYSFILE) {
                    panic!("crash point reached: {}", points::LCP_ROUND_BEFORE_SYSFILE);
                }
                sysfile.last_lcp_id = lcp_id;
                self.state = State::Recording { lcp_id, start_gci, after: sysfile.generation };
            }
            State::Recording { lcp_id, start_gci, after } if sysfile.generation > after => {
                debug_assert_eq!(sysfile.last_lcp_id, lcp_id);
                if crash_point!(self.crash, points::LCP_RECORDED_BEFORE_RELEASE) {
                    panic!("crash point reached: {}", points::LCP_RECORDED_BEFORE_RELEASE);
                }
                self.last_lcp_id = lcp_id;
                for to in self.lqhs() {
                    let s = CkptSignal::LcpCompleteRep { lcp_id, release_before: start_gci };
                    ctx.send_prio(to, ckpt(s), Priority::A);
                }
                self.counters.bump("ckpt: lcp rounds completed");
                self.last_error = None;
                self.arm(ctx);
            }
            _ => {}
        }
    }
}
