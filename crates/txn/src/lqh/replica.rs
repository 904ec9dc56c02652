//! A backup replica's side of a write (`LqhReplicaReq`): the primary
//! prepared the write under its locks and sends the row's new image (or its
//! deletion); the backup locks the row too (so that a take-over or a new
//! primary after a failure never lets another writer in before this
//! transaction ends), keeps the image like any uncommitted write, and the
//! queue runner passes it on or answers TC.
//!
//! No check of the primary's is repeated: the primary saw every committed
//! row and every lock first, and replicas apply in the same order (a later
//! writer of the row waits for this transaction's locks on every replica).
//! Applying the image at commit is an upsert or a delete-if-present, which
//! is also what a starting replica needs: it may not have the row yet (its
//! copy comes later) or have it already.

use super::exec::est_bytes;
use super::{Lqh, LqhTxn, Pending, Queued, RowKey, Step, WaitTarget};
use crate::lock_queue::{LockKey, Mode};
use norr_kernel::Ctx;
use norr_signals::internal::{LqhReplicaReq, ReplicaOp, TxnId};
use norr_signals::ops::LockWait;
use norr_signals::{ErrorCode, NodeError, Signal};

impl Lqh {
    pub(super) fn on_replica_req(&mut self, req: LqhReplicaReq, ctx: &mut Ctx<'_, Signal>) {
        let t = req.txn;
        self.counters.bump("lqh: replica requests");
        let txn = self.txns.entry(t).or_insert_with(|| LqhTxn::new(req.tc));
        assert!(!txn.committed, "replica write for committed transaction {t}");
        (txn.api, txn.handle) = (req.api, req.handle);
        if txn.halted {
            return;
        }
        debug_assert!(
            req.ops.iter().all(|r| r.chain.contains(self.node)),
            "replica write for a chain without this node"
        );
        txn.queue.extend(req.ops.into_iter().map(Queued::Replica));
        if txn.waiting.is_none() {
            self.run_queue(t, ctx);
        }
    }

    /// Keep a primary's write of transaction `t` here as a backup: lock the
    /// row (possibly waiting), reserve memory for the image, store it.
    /// `pass_on`: the write goes on to another replica, which needs the
    /// image too (otherwise it is moved out of `r`).
    pub(super) fn exec_replica(
        &mut self,
        t: TxnId,
        r: &mut ReplicaOp,
        pass_on: bool,
        ctx: &mut Ctx<'_, Signal>,
    ) -> Step {
        let Some(def) = self.defs.get(&r.table).cloned() else {
            return Step::Done(Err(NodeError::with(ErrorCode::NoSuchTable, format!("table id {}", r.table))));
        };
        if self.storage.is_altering(r.table) {
            return Step::Done(Err(NodeError::with(
                ErrorCode::SchemaVersionMismatch,
                format!("table {} is being altered", def.name),
            )));
        }
        let row_lock = LockKey::Row(r.table, r.key.clone());
        // A backup waits the cluster's time: the primary took the row's lock
        // first, with the client's own bound.
        if let Some(tag) = self.lock_owned(t, row_lock, Mode::Exclusive, LockWait::Wait, WaitTarget::Op(t), ctx) {
            return Step::Wait(tag);
        }
        let rk: RowKey = (r.table, r.key.clone());
        let (committed, old_est) = match self.txns[&t].pending.get(&rk) {
            Some(p) => (p.committed, p.est_bytes),
            None => (self.storage.lookup(r.table, r.part, &r.key), 0),
        };
        let image = if pass_on { r.image.clone() } else { r.image.take() };
        let new_est = image.as_deref().map_or(0, est_bytes);
        let fresh = !self.txns[&t].page_reserved.contains(&(r.table, r.part));
        let page_est = if image.is_some() && fresh { super::exec::PAGES_EST_BYTES } else { 0 };
        // The primary admitted the write against its own REDO log; this
        // replica appends it too at commit, when it can no longer be
        // refused, and its log may be the fuller one (a slower disk, a
        // later checkpoint). A failed append there would break its log and
        // stop every later global checkpoint.
        if let Err(e) = self.redo_admit() {
            return Step::Done(Err(e));
        }
        if let Some(row) = &image {
            if let Err(e) = self.storage.reserve_check(r.table, row) {
                return Step::Done(Err(e));
            }
            let (used, limit) = self.storage.used_and_limit_bytes();
            let need = new_est + page_est;
            if need > old_est && used + self.reserved_bytes + need - old_est > limit {
                crate::probe!(self.counters, "lqh: backup table full");
                return Step::Done(Err(NodeError::with(ErrorCode::TableFull, "data memory full at a backup replica")));
            }
        }
        let txn = self.txns.get_mut(&t).expect("replica write has a transaction");
        txn.reserved_bytes = txn.reserved_bytes + new_est + page_est - old_est;
        self.reserved_bytes = self.reserved_bytes + new_est + page_est - old_est;
        if page_est > 0 {
            txn.page_reserved.insert((r.table, r.part));
        }
        let pending =
            Pending { part: r.part, image, est_bytes: new_est, committed, savepoint: r.savepoint, backup: true };
        if r.savepoint == 0 {
            txn.pending.insert(rk, pending);
        } else {
            txn.keep_for_savepoint(rk, pending);
        }
        Step::Done(Ok(None))
    }
}
