//! TC's failure handling: the periodic inactivity check (idle transactions
//! and scans) and API node failure.

use super::{internal, AbortReply, Tc, TxnState};
use norr_kernel::{Ctx, NodeId, Priority};
use norr_signals::internal::{InternalSignal, ScanKey, TxnId};
use norr_signals::{ErrorCode, NodeError, Signal};

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
                TxnState::Committing { .. } => {} // finishes; the reply is dropped
            }
        }
    }
}
