//! TC's side of savepoints (TC_SAVEPOINTREQ, see `norr_signals::api`).
//!
//! Setting a savepoint only changes the number TC stamps on the operations
//! it sends from then on; LQH keeps what those operations replace. Rolling
//! back asks every participating LQH to undo the operations stamped with the
//! savepoint or later and answers the client once all confirmed. The client
//! waits for each answer before its next request, so no key operation of the
//! transaction is in flight at LQH when the rollback arrives (LQH asserts it).

use super::{internal, AbortReply, Tc, TxnState};
use norr_kernel::{BlockRef, Ctx};
use norr_signals::internal::{InternalSignal, TxnId};
use norr_signals::{ErrorCode, NodeError, SavepointAction, Signal, TcSavepointReq, TxnOutcome};

impl Tc {
    pub(super) fn on_savepoint_req(&mut self, api: BlockRef, req: TcSavepointReq, ctx: &mut Ctx<'_, Signal>) {
        let handle = req.txn;
        let t = match self.txn_for(api, handle, ctx.now_ns()) {
            Ok(t) => t,
            Err(e) => return Self::key_ref(ctx, api, handle, e, None),
        };
        self.arm_timer(ctx);
        let txn = self.txns.get_mut(&t).expect("just found");
        if let TxnState::Aborting { reply: reply @ AbortReply::Tombstone(_), .. } = &mut txn.state {
            // Aborted on TC's own account: this request learns it.
            let AbortReply::Tombstone(e) = std::mem::replace(reply, AbortReply::Silent) else { unreachable!() };
            return Self::key_ref(ctx, api, handle, e, None);
        }
        if !matches!(txn.state, TxnState::Idle) {
            crate::probe!(self.counters, "tc: request while busy");
            let e = NodeError::with(ErrorCode::MalformedSignal, "transaction busy with a previous request");
            return Self::key_ref(ctx, api, handle, e, None);
        }
        txn.last_active_ns = ctx.now_ns();
        let bad =
            |why: &str| NodeError::with(ErrorCode::MalformedSignal, format!("savepoint {}: {why}", req.savepoint));
        match req.action {
            SavepointAction::Set => {
                if req.savepoint <= txn.savepoint {
                    let error = bad("not above the transaction's latest savepoint");
                    return self.abort(t, AbortReply::KeyRef { error, op_index: None }, ctx);
                }
                self.counters.bump("tc: savepoints set");
                txn.savepoint = req.savepoint;
                Self::key_conf(ctx, api, handle, TxnOutcome::Open, Vec::new());
            }
            SavepointAction::RollbackTo => {
                if req.savepoint == 0 || req.savepoint > txn.savepoint {
                    let error = bad("never set in this transaction");
                    return self.abort(t, AbortReply::KeyRef { error, op_index: None }, ctx);
                }
                self.counters.bump("tc: rollbacks to savepoint");
                // Every replica holding images of the transaction (backups too).
                let dist = &self.dist;
                let waiting: std::collections::BTreeSet<(norr_kernel::NodeId, u16)> =
                    txn.nodes.iter().copied().filter(|(n, _)| !dist.down(*n)).collect();
                if waiting.is_empty() {
                    return Self::key_conf(ctx, api, handle, TxnOutcome::Open, Vec::new());
                }
                for (n, i) in &waiting {
                    let sig = InternalSignal::LqhRollbackToReq { txn: t, savepoint: req.savepoint };
                    ctx.send(Self::lqh_at(*n, *i), internal(sig));
                }
                txn.state = TxnState::RollingBack { waiting, error: None };
            }
        }
    }

    pub(super) fn on_rollback_to_conf(
        &mut self,
        from: BlockRef,
        t: TxnId,
        err: Option<NodeError>,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        let Some(txn) = self.txns.get_mut(&t) else {
            return;
        };
        let TxnState::RollingBack { waiting, error } = &mut txn.state else {
            // An abort overtook the rollback (a failed scan, the API node's
            // failure): the abort's own replies finish the transaction.
            return;
        };
        waiting.remove(&(from.node, from.instance));
        if error.is_none() {
            *error = err;
        }
        if !waiting.is_empty() {
            return;
        }
        if let Some(error) = error.take() {
            crate::probe!(self.counters, "tc: rollback to savepoint refused");
            return self.abort(t, AbortReply::KeyRef { error, op_index: None }, ctx);
        }
        txn.state = TxnState::Idle;
        txn.last_active_ns = ctx.now_ns();
        if !txn.silent {
            Self::key_conf(ctx, txn.api, txn.handle, TxnOutcome::Open, Vec::new());
        }
    }
}
