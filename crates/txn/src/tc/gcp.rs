//! TC's part of the global checkpoint (see `norr_signals::ckpt`): the
//! commit barrier and the report that a GCI's transactions are all
//! committed.
//!
//! GCP_PREPARE raises the barrier: commit decisions wait in `commit_queue`
//! (the transaction is in Committing with nothing sent). GCP_COMMIT switches
//! to the new GCI and lets them through, tagged with it. Then, as soon as no
//! transaction tagged with the old GCI or lower is still in its commit phase
//! (waiting for a primary's confirmation), TC tells the master; the REDO of
//! that GCI is then complete in every LQH's log buffer.

use super::{Tc, TxnState};
use norr_kernel::{BlockRef, Ctx, Priority};
use norr_signals::ckpt::CkptSignal;
use norr_signals::Signal;
use norr_signals::TxnOutcome;

impl Tc {
    /// A restarted node, before the first signal: tag commits with `gci`
    /// (above every GCI its logs hold) until the first GCP switches it.
    pub fn set_start_gci(&mut self, gci: u64) {
        assert!(self.txns.is_empty() && gci >= 1, "start GCI set on a running TC");
        self.gci = gci;
    }

    /// A restarted node, before the first signal: `gci` is complete (a
    /// `CommitDisk` answer of a GCI up to it goes at once).
    pub fn set_complete_gci(&mut self, gci: u64) {
        self.complete_gci = gci;
    }

    /// A restarted node's table definitions, before the first signal.
    pub fn restore_tables(&mut self, defs: &[norr_signals::schema::TableDef]) {
        for d in defs {
            self.defs.insert(d.id, std::sync::Arc::new(d.clone()));
        }
    }

    pub(super) fn on_ckpt(&mut self, from: BlockRef, sig: CkptSignal, ctx: &mut Ctx<'_, Signal>) {
        match sig {
            CkptSignal::GcpPrepareReq { gci } => {
                assert!(gci > self.gci, "GCP prepare of {gci} while at {}", self.gci);
                self.gcp_blocked = true;
                let conf = CkptSignal::GcpPrepareConf { gci };
                ctx.send_prio(from, Signal::Ckpt(Box::new(conf)), Priority::A);
            }
            CkptSignal::GcpCommitReq { gci } => {
                assert!(gci > self.gci, "GCP commit of {gci} while at {}", self.gci);
                let old = self.gci;
                self.gci = gci;
                self.gcp_blocked = false;
                self.counters.bump("tc: gcp switches");
                // Answered once nothing of `old` or lower is committing.
                self.gcp_finish_wanted = Some((old, from));
                let queued: Vec<_> = self.commit_queue.drain(..).collect();
                for t in queued {
                    let waiting = matches!(&self.txns.get(&t).map(|x| &x.state),
                        Some(TxnState::Committing { waiting, .. }) if waiting.is_empty());
                    if waiting {
                        self.commit_decided(t, ctx);
                    }
                }
                self.check_gcp_finished(ctx);
            }
            CkptSignal::GcpCompleteRep { gci } => {
                // `CommitDisk` answers of GCIs up to `gci` may go now.
                self.complete_gci = self.complete_gci.max(gci);
                while let Some(e) = self.held_for_disk.first_entry() {
                    if *e.key() > gci {
                        break;
                    }
                    for h in e.remove() {
                        debug_assert_eq!(h.conf.outcome, TxnOutcome::Committed);
                        ctx.send(h.api, Signal::TcKeyConf(Box::new(h.conf)));
                    }
                }
            }
            other => {
                crate::probe!(self.counters, "tc: unexpected checkpoint signal");
                debug_assert!(false, "TC got unexpected {other:?}");
            }
        }
    }

    /// A transaction tagged `gci` left its commit phase.
    pub(super) fn commit_phase_over(&mut self, gci: u64, ctx: &mut Ctx<'_, Signal>) {
        let n = self.committing.get_mut(&gci).expect("a committing transaction is counted");
        *n -= 1;
        if *n == 0 {
            self.committing.remove(&gci);
        }
        self.check_gcp_finished(ctx);
    }

    fn check_gcp_finished(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let Some((gci, master)) = self.gcp_finish_wanted else {
            return;
        };
        if self.committing.range(..=gci).next().is_some() {
            return;
        }
        self.gcp_finish_wanted = None;
        ctx.send_prio(master, Signal::Ckpt(Box::new(CkptSignal::GcpTcFinishedRep { gci })), Priority::A);
    }

    /// The periodic check: answer `CommitDisk` transactions held longer
    /// than `commit_disk_timeout_ms` (global checkpoints stalled: a disk
    /// that hangs, a node that cannot write). They are committed in memory,
    /// so the answer says so, and that disk durability is unconfirmed,
    /// rather than keeping the client waiting without bound.
    pub(super) fn release_stale_disk_waits(&mut self, now_ns: u64, ctx: &mut Ctx<'_, Signal>) {
        let timeout = self.commit_disk_timeout_ns;
        let mut emptied = Vec::new();
        for (gci, held) in self.held_for_disk.iter_mut() {
            debug_assert!(*gci > self.complete_gci, "an answer held for a complete GCI {gci}");
            let (stale, keep): (Vec<_>, Vec<_>) =
                held.drain(..).partition(|h| now_ns.saturating_sub(h.since_ns) >= timeout);
            *held = keep;
            for mut h in stale {
                crate::probe!(self.counters, "tc: commit disk wait timed out");
                h.conf.outcome = TxnOutcome::CommittedNotOnDisk;
                ctx.send(h.api, Signal::TcKeyConf(Box::new(h.conf)));
            }
            if held.is_empty() {
                emptied.push(*gci);
            }
        }
        for gci in emptied {
            self.held_for_disk.remove(&gci);
        }
    }
}
