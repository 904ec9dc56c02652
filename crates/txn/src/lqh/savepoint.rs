//! LQH's side of savepoints: partial rollback of a transaction's uncommitted
//! images (see `norr_signals::internal`, "savepoints").
//!
//! Every operation arrives stamped with the transaction's savepoint number at
//! the time TC sent it (0: none set yet). The first time an operation stamped
//! s > 0 writes a row key (its `Pending::savepoint` is below s, or it has no
//! image yet), the key's previous state moves, without a copy, onto the
//! transaction's undo list as `(s, key, previous image or none)`; later writes
//! of the key at the same stamp just replace the image. Rolling back to
//! savepoint s pops the entries stamped s or later, newest first, and puts
//! each previous state back: the row is as it was when the savepoint was set
//! (inserted rows vanish, updated and deleted ones come back), the unique
//! values the transaction's images hold (`LqhTxn::uniq`) follow, and the
//! memory reserved for the dropped images is returned.
//!
//! What stays: row and unique-value locks taken after the savepoint (as
//! InnoDB keeps them), the fresh-page reservation of a partition first
//! written after it (a coarse, per-partition estimate that commit or abort
//! returns), and AUTO_INCREMENT values (DICT hands them out; never given back).
//!
//! Stamps never decrease (TC numbers savepoints upwards and keeps its latest
//! one after a rollback), so the list is ordered by stamp and a rollback is a
//! pop of its tail. A transaction that never sets a savepoint pays one
//! comparison per write.

use super::{Lqh, LqhTxn, Pending, RowKey};
use crate::store::Storage;
use norr_signals::internal::TxnId;
use norr_signals::schema::TableDef;
use norr_signals::{ErrorCode, NodeError};

/// The state a row key had before the first write stamped `savepoint`.
pub(super) struct Undo {
    savepoint: u32,
    key: RowKey,
    /// None: the transaction had no image of the key.
    prev: Option<Pending>,
}

impl LqhTxn {
    /// Store the new image of `rk` written by an operation stamped
    /// `new.savepoint` (> 0), moving the key's previous state onto the undo
    /// list if this is the first write of the key at that stamp.
    pub(super) fn keep_for_savepoint(&mut self, rk: RowKey, new: Pending) {
        let sp = new.savepoint;
        assert!(sp > 0, "stamp 0 writes keep no undo");
        let first = match self.pending.get(&rk) {
            None => true,
            Some(p) => {
                assert!(p.savepoint <= sp, "operation stamped {sp} after one stamped {}", p.savepoint);
                p.savepoint < sp
            }
        };
        if !first {
            self.pending.insert(rk, new);
            return;
        }
        assert!(self.undo.last().is_none_or(|u| u.savepoint <= sp), "savepoint stamps went down");
        let prev = self.pending.insert(rk.clone(), new);
        self.undo.push(Undo { savepoint: sp, key: rk, prev });
    }
}

/// Encoded values of the unique indexes of `def` an image holds (NULLs hold none).
fn unique_keys(storage: &Storage, def: &TableDef, row: &[super::Value]) -> Vec<(norr_signals::IndexId, Vec<u8>)> {
    def.indexes
        .iter()
        .filter(|i| i.unique && i.columns.iter().all(|c| !row[*c as usize].is_null()))
        .map(|i| (i.id, storage.encode_index_key(def.id, i.id, row)))
        .collect()
}

impl Lqh {
    /// Undo transaction `t`'s writes stamped `savepoint` or later. Err: the
    /// transaction cannot go on (TC aborts it).
    pub(super) fn rollback_to(&mut self, t: TxnId, savepoint: u32) -> Option<NodeError> {
        assert!(savepoint > 0, "rollback to savepoint 0 of {t}");
        let Lqh { txns, storage, defs, reserved_bytes, counters, .. } = self;
        // No record: only simple reads or nothing ran here.
        let txn = txns.get_mut(&t)?;
        assert!(!txn.committed, "rollback to a savepoint of committed {t}");
        if let Some(e) = &txn.doomed {
            // Its images of the changed table are gone already (see
            // `doom_writers`); the transaction can only abort.
            crate::probe!(counters, "lqh: rollback to savepoint of a doomed transaction");
            return Some(e.clone());
        }
        if txn.halted {
            return Some(NodeError::with(ErrorCode::LockWaitTimeout, "lock wait timed out"));
        }
        // TC sends it only between the client's requests (see `tc/savepoint.rs`).
        assert!(
            txn.queue.is_empty() && txn.waiting.is_none(),
            "rollback to a savepoint of {t} with operations in flight"
        );
        counters.bump("lqh: rollbacks to savepoint");
        while txn.undo.last().is_some_and(|u| u.savepoint >= savepoint) {
            let u = txn.undo.pop().expect("checked");
            let cur = txn.pending.remove(&u.key).expect("a key on the undo list has an image");
            if let Some(def) = defs.get(&u.key.0).filter(|d| d.indexes.iter().any(|i| i.unique)) {
                for (ix, k) in cur.image.as_deref().map(|r| unique_keys(storage, def, r)).unwrap_or_default() {
                    let k = (def.id, ix, k);
                    if txn.uniq.get(&k) == Some(&u.key.1) {
                        txn.uniq.remove(&k);
                    }
                }
                // At the savepoint no other image held these values: an
                // entry another restored key left for them is stale.
                let prev = u.prev.as_ref().and_then(|p| p.image.as_deref());
                for (ix, k) in prev.map(|r| unique_keys(storage, def, r)).unwrap_or_default() {
                    txn.uniq.insert((def.id, ix, k), u.key.1.clone());
                }
            }
            txn.reserved_bytes -= cur.est_bytes;
            *reserved_bytes -= cur.est_bytes;
            if let Some(prev) = u.prev {
                txn.reserved_bytes += prev.est_bytes;
                *reserved_bytes += prev.est_bytes;
                txn.pending.insert(u.key, prev);
            }
        }
        // A locking scan waiting for a row lock treats this as a change of
        // the transaction's images (see `scan.rs`).
        txn.ops_run += 1;
        debug_assert!(Self::uniq_consistent(storage, defs, txn), "unique map of {t} out of step after rollback");
        None
    }

    /// The incremental unique map equals one rebuilt from the images.
    fn uniq_consistent(
        storage: &Storage,
        defs: &crate::fxhash::FxHashMap<norr_signals::TableId, std::sync::Arc<TableDef>>,
        txn: &LqhTxn,
    ) -> bool {
        let mut n = 0;
        for ((table, enc), p) in &txn.pending {
            let (Some(def), Some(row)) = (defs.get(table), p.image.as_deref()) else {
                continue;
            };
            for (ix, k) in unique_keys(storage, def, row) {
                n += 1;
                if txn.uniq.get(&(*table, ix, k)) != Some(enc) {
                    return false;
                }
            }
        }
        n == txn.uniq.len()
    }
}
