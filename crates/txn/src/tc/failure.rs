//! TC's failure handling: the periodic inactivity check (idle transactions
//! and scans) and API node failure.

use super::{internal, AbortReply, Tc, TxnState};
use norr_kernel::{BlockRef, Ctx, NodeId, Priority};
use norr_signals::dist::Chain;
use norr_signals::internal::{InternalSignal, ScanKey, TxnId};
use norr_signals::{block, ErrorCode, NodeError, Signal};

impl Tc {
    pub(super) fn on_timeout_check(&mut self, ctx: &mut Ctx<'_, Signal>) {
        self.timer_armed = false;
        let now = ctx.now_ns();
        let idle: Vec<TxnId> = self
            .txns
            .iter()
            .filter(|(_, x)| {
                matches!(x.state, TxnState::Idle)
                    && now.saturating_sub(x.last_active_ns) >= self.txn_inactive_ns
                    // A scan the client waits for is activity (it may be
                    // waiting for row locks, each bounded by the lock time-out).
                    && !x.scans.iter().any(|k| self.scans.get(k).is_some_and(|s| s.client_waiting))
            })
            .map(|(t, _)| *t)
            .collect();
        for t in idle {
            crate::probe!(self.counters, "tc: inactive transaction aborted");
            let scans: Vec<ScanKey> = self.txns[&t].scans.iter().copied().collect();
            for k in scans {
                let e = NodeError::with(ErrorCode::TransactionTimeout, "transaction inactive too long");
                self.tombstone_scan(k, e, true);
            }
            let e = NodeError::with(ErrorCode::TransactionTimeout, "transaction inactive too long");
            self.abort(t, AbortReply::Tombstone(e), ctx);
        }
        self.close_idle_scans(now, ctx);
        self.release_stale_disk_waits(now, ctx);
        self.arm_timer(ctx);
    }

    pub(super) fn on_api_fail(&mut self, api_node: NodeId, ctx: &mut Ctx<'_, Signal>) {
        crate::probe!(self.counters, "tc: api failure");
        if self.failed_apis.insert(api_node) {
            let me = ctx.self_ref();
            ctx.send_prio(me, internal(InternalSignal::ApiFailDone { api_node }), Priority::B);
        }
        self.tombstones.retain(|(n, _), _| *n != api_node);
        self.scan_tombstones.retain(|(n, _), _| *n != api_node);
        let scans: Vec<ScanKey> = self.scans.iter().filter(|(_, s)| s.api.node == api_node).map(|(k, _)| *k).collect();
        for s in scans {
            self.close_scan(s, ctx);
        }
        let mut txns: Vec<TxnId> = self.txns.iter().filter(|(_, x)| x.api.node == api_node).map(|(t, _)| *t).collect();
        // In id order: aborts send signals, and traces must not depend on the map's layout.
        txns.sort_unstable();
        for t in txns {
            let txn = self.txns.get_mut(&t).expect("txn");
            txn.silent = true;
            self.by_handle.remove(&(api_node, txn.handle));
            match &mut txn.state {
                TxnState::Idle | TxnState::Executing | TxnState::RollingBack { .. } => {
                    self.abort(t, AbortReply::Silent, ctx)
                }
                TxnState::Aborting { reply, .. } => *reply = AbortReply::Silent,
                // Finishes; the reply is dropped.
                TxnState::Committing { .. } | TxnState::Completing { .. } => {}
            }
        }
    }

    /// Data nodes failed (QMGR's NODE_FAILREP). Every transaction that may
    /// have state on a failed node and has not decided to commit is aborted
    /// (the client gets the temporary node-failure error, now or at its next
    /// request); so is every one with operations in flight (a reply may never
    /// come if a failed node was in an operation's chain). A commit or
    /// complete phase goes on along the chains without the failed nodes.
    /// Scans reading a failed node fail. The president's TC then takes over
    /// the failed nodes' own transactions (`takeover.rs`).
    pub(super) fn on_node_fail(&mut self, failed: &[NodeId], ctx: &mut Ctx<'_, Signal>) {
        crate::probe!(self.counters, "tc: node failure");
        for f in failed {
            assert_ne!(*f, self.node, "told of its own failure");
            self.takeover_pending.insert(*f);
        }
        let error = || NodeError::with(ErrorCode::TxnNodeFailure, "a data node of the transaction failed");
        let mut ids: Vec<TxnId> = self.txns.keys().copied().collect();
        ids.sort_unstable();
        enum Action {
            Abort(AbortReply),
            Resend { committing: bool },
            PruneAbort,
            Nothing,
        }
        for t in ids {
            let Some(txn) = self.txns.get_mut(&t) else {
                continue;
            };
            let touches = txn.nodes.iter().any(|(n, _)| failed.contains(n))
                || txn.chains.iter().any(|c| c.nodes.iter().any(|n| failed.contains(n)));
            txn.nodes.retain(|(n, _)| !failed.contains(n));
            let chains = std::mem::take(&mut txn.chains);
            txn.chains = chains.into_iter().filter_map(|c| c.without(failed)).collect();
            let in_flight = txn.batch.as_ref().is_some_and(|b| b.outstanding > 0);
            let action = match &txn.state {
                TxnState::Idle if touches => Action::Abort(AbortReply::Tombstone(error())),
                TxnState::Executing if touches || in_flight => {
                    Action::Abort(AbortReply::KeyRef { error: error(), op_index: None })
                }
                TxnState::RollingBack { .. } if touches => {
                    Action::Abort(AbortReply::KeyRef { error: error(), op_index: None })
                }
                TxnState::Committing { .. } => Action::Resend { committing: true },
                TxnState::Completing { .. } => Action::Resend { committing: false },
                TxnState::Aborting { .. } => Action::PruneAbort,
                _ => Action::Nothing,
            };
            match action {
                Action::Abort(reply) => {
                    crate::probe!(self.counters, "tc: transaction aborted by a node failure");
                    self.abort(t, reply, ctx);
                }
                Action::Resend { committing } => self.resend_phase(t, failed, committing, ctx),
                Action::PruneAbort => {
                    let txn = self.txns.get_mut(&t).expect("txn");
                    let TxnState::Aborting { waiting, .. } = &mut txn.state else { unreachable!() };
                    waiting.retain(|(n, _)| !failed.contains(n));
                    if waiting.is_empty() {
                        self.abort_done(t, ctx);
                    }
                }
                Action::Nothing => {}
            }
        }
        self.scans_node_fail(failed, ctx);
        self.maybe_take_over(ctx);
    }

    /// The commit (or complete) phase of `t` lost nodes: send it again
    /// along each waiting chain without them.
    fn resend_phase(&mut self, t: TxnId, failed: &[NodeId], committing: bool, ctx: &mut Ctx<'_, Signal>) {
        let tc = ctx.self_ref();
        let queued = self.commit_queue.contains(&t);
        let txn = self.txns.get_mut(&t).expect("txn");
        let gci = txn.gci;
        let (TxnState::Committing { waiting, .. } | TxnState::Completing { waiting }) = &mut txn.state else {
            unreachable!("a phase to send again")
        };
        let lost: Vec<Chain> = waiting.iter().filter(|c| c.nodes.iter().any(|n| failed.contains(n))).cloned().collect();
        for c in lost {
            waiting.remove(&c);
            let Some(c) = c.without(failed) else {
                continue; // every replica gone: QMGR stops the cluster
            };
            crate::probe!(self.counters, "tc: phase sent again after a node failure");
            let (to, sig) = if committing {
                (c.tail(), InternalSignal::LqhCommitReq { txn: t, gci, chain: c.clone(), tc })
            } else {
                (c.primary(), InternalSignal::LqhCompleteReq { txn: t, chain: c.clone(), tc })
            };
            ctx.send(BlockRef::new(to, block::LQH, c.instance), internal(sig));
            waiting.insert(c);
        }
        if waiting.is_empty() && !queued {
            if committing {
                self.commit_done(t, ctx);
            } else {
                self.complete_done(t, ctx);
            }
        }
    }
}
