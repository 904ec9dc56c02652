//! Execution of one key operation at LQH (the prepare phase of an operation).

use super::{Lqh, Pending, QueuedOp, RowKey, Step, WaitTarget};
use crate::lock_queue::{LockKey, Mode};
use crate::store::RowId;
use norr_kernel::Ctx;
use norr_signals::coerce::{coerce_row, coerce_value, rescale_round};
use norr_signals::internal::TxnId;
use norr_signals::keycode::encode_value;
use norr_signals::ops::{KeyAccess, LockMode, LockWait, OpKind};
use norr_signals::schema::{ColumnId, IndexDef, PartitionId, TableDef};
use norr_signals::value::{ColumnType, Decimal, Value};
use norr_signals::{ErrorCode, NodeError, Signal};
use std::sync::Arc;

macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return Step::Done(Err(e)),
        }
    };
}

/// A row as a transaction sees it (see `Lqh::current_rk`).
struct Current {
    image: Option<Vec<Value>>,
    /// See `Pending::committed`.
    committed: Option<RowId>,
    /// Bytes reserved for the transaction's own image of the row (0: none).
    pending_est: u64,
}

/// A fixed page and a var page of storage (32 KiB each).
pub(super) const PAGES_EST_BYTES: u64 = 2 * 32 * 1024;

/// Rough bytes a row image takes, on the generous side so that the sum of
/// reservations covers what storage will really use at commit.
pub(super) fn est_bytes(row: &[Value]) -> u64 {
    let mut n = 128u64;
    for v in row {
        n += match v {
            Value::Bytes(b) => 16 + 2 * b.len() as u64,
            _ => 32,
        };
    }
    n
}

/// Columns `cols` of `row` (every column when empty).
pub(super) fn project(def: &TableDef, row: &[Value], cols: &[ColumnId]) -> Result<Vec<Value>, NodeError> {
    if cols.is_empty() {
        return Ok(row.to_vec());
    }
    cols.iter()
        .map(|c| {
            row.get(*c as usize)
                .cloned()
                .ok_or_else(|| NodeError::with(ErrorCode::NoSuchColumn, format!("column id {c} in table {}", def.name)))
        })
        .collect()
}

/// `project` of a row the caller no longer needs: values move out of it
/// instead of being copied (a column asked for twice is copied once).
pub(super) fn project_owned(def: &TableDef, mut row: Vec<Value>, cols: &[ColumnId]) -> Result<Vec<Value>, NodeError> {
    if cols.is_empty() {
        return Ok(row);
    }
    let mut out = Vec::with_capacity(cols.len());
    for (i, c) in cols.iter().enumerate() {
        let v = row
            .get_mut(*c as usize)
            .ok_or_else(|| NodeError::with(ErrorCode::NoSuchColumn, format!("column id {c} in table {}", def.name)))?;
        out.push(if cols[i + 1..].contains(c) { v.clone() } else { std::mem::replace(v, Value::Null) });
    }
    Ok(out)
}

/// A locking read found its row locked by another transaction and may not
/// wait: NOWAIT fails the read (the transaction stays open: nothing of the
/// read is left at LQH); SKIP LOCKED reads it as absent.
pub(super) fn lock_busy(wait: LockWait) -> NodeError {
    match wait {
        LockWait::NoWait => NodeError::with(ErrorCode::LockNoWait, "row locked by another transaction"),
        LockWait::SkipLocked => NodeError::new(ErrorCode::NoSuchRow),
        LockWait::Wait | LockWait::WaitMs(_) => unreachable!("a waiting read queues for the lock"),
    }
}

fn same_key_value(a: &Value, b: &Value, ty: &ColumnType) -> bool {
    let (mut x, mut y) = (Vec::new(), Vec::new());
    encode_value(&mut x, a, ty);
    encode_value(&mut y, b, ty);
    x == y
}

fn num_i128(v: &Value) -> Option<i128> {
    match v {
        Value::Int(i) => Some(*i as i128),
        Value::UInt(u) => Some(*u as i128),
        Value::Decimal(d) if d.scale == 0 => Some(d.mantissa),
        _ => None,
    }
}

fn num_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::UInt(u) => Some(*u as f64),
        Value::Float(f) => Some(*f as f64),
        Value::Double(f) => Some(*f),
        Value::Decimal(d) => Some(d.mantissa as f64 / 10f64.powi(d.scale as i32)),
        _ => None,
    }
}

/// `cur + delta` for an interpreted update (`k = k + delta`). NULL stays NULL.
pub(super) fn add_delta(cur: &Value, delta: &Value, ty: &ColumnType, nullable: bool) -> Result<Value, NodeError> {
    let out_of_range = || NodeError::with(ErrorCode::ValueOutOfRange, "increment overflows the column type");
    let wrong = || NodeError::with(ErrorCode::WrongValueType, format!("cannot add {delta:?} to {cur:?}"));
    if cur.is_null() || delta.is_null() {
        return Ok(Value::Null);
    }
    let v = match cur {
        Value::Int(_) | Value::UInt(_) => {
            let sum =
                num_i128(cur).expect("int").checked_add(num_i128(delta).ok_or_else(wrong)?).ok_or_else(out_of_range)?;
            let (lo, hi) = ty.int_range().ok_or_else(wrong)?;
            if sum < lo || sum > hi {
                return Err(out_of_range());
            }
            if ty.is_unsigned_int() {
                Value::UInt(sum as u64)
            } else {
                Value::Int(sum as i64)
            }
        }
        Value::Double(a) => {
            let s = a + num_f64(delta).ok_or_else(wrong)?;
            if !s.is_finite() {
                return Err(out_of_range());
            }
            Value::Double(s)
        }
        Value::Float(a) => {
            let s = (*a as f64 + num_f64(delta).ok_or_else(wrong)?) as f32;
            if !s.is_finite() {
                return Err(out_of_range());
            }
            Value::Float(s)
        }
        Value::Decimal(a) => {
            let d = match delta {
                Value::Decimal(d) => *d,
                other => Decimal { mantissa: num_i128(other).ok_or_else(wrong)?, scale: 0 },
            };
            let dm = rescale_round(d.mantissa, d.scale, a.scale).ok_or_else(out_of_range)?;
            Value::Decimal(Decimal { mantissa: a.mantissa.checked_add(dm).ok_or_else(out_of_range)?, scale: a.scale })
        }
        _ => return Err(wrong()),
    };
    coerce_value(v, ty, nullable).map_err(|e| if e.code == ErrorCode::ValueOutOfRange { out_of_range() } else { e })
}

/// Values of a unique index in a row; None if any is NULL (NULLs never collide).
fn unique_values(idx: &IndexDef, row: &[Value]) -> Option<Vec<Value>> {
    let v: Vec<Value> = idx.columns.iter().map(|c| row[*c as usize].clone()).collect();
    if v.iter().any(|x| x.is_null()) {
        None
    } else {
        Some(v)
    }
}

impl Lqh {
    pub(super) fn pk_of(&self, def: &TableDef, row: &[Value]) -> Result<Vec<u8>, NodeError> {
        let pk: Vec<Value> = def.primary_key.iter().map(|c| row[*c as usize].clone()).collect();
        self.storage.encode_pk(def.id, &pk)
    }

    fn unique_key(&self, def: &TableDef, idx: &IndexDef, row: &[Value]) -> Option<Vec<u8>> {
        unique_values(idx, row)?;
        Some(self.storage.encode_index_key(def.id, idx.id, row))
    }

    /// Find the row a unique-index access names: the transaction's own images
    /// first, then committed storage. None: no such row.
    fn resolve_unique(
        &self,
        t: TxnId,
        def: &TableDef,
        idx: &IndexDef,
        values: &[Value],
    ) -> Result<Option<(PartitionId, Vec<u8>)>, NodeError> {
        if values.len() != idx.columns.len() {
            return Err(NodeError::with(ErrorCode::MissingKeyColumn, "wrong number of unique index values"));
        }
        let mut probe = vec![Value::Null; def.columns.len()];
        for (c, v) in idx.columns.iter().zip(values) {
            let col = &def.columns[*c as usize];
            if v.is_null() {
                return Err(NodeError::with(ErrorCode::MissingKeyColumn, format!("NULL for {}", col.name)));
            }
            probe[*c as usize] = coerce_value(v.clone(), &col.ty, false)?;
        }
        let want = self.storage.encode_index_key(def.id, idx.id, &probe);
        let txn = self.txns.get(&t);
        if let Some(txn) = txn {
            if let Some(enc) = txn.uniq.get(&(def.id, idx.id, want)) {
                let p = &txn.pending[&(def.id, enc.clone())];
                debug_assert!(p.image.is_some(), "unique value of a deleted image");
                return Ok(Some((p.part, enc.clone())));
            }
        }
        let Some((part, rid)) = self.storage.lookup_unique(def.id, idx.id, values)? else {
            return Ok(None);
        };
        let row = self.storage.read_row(def.id, part, rid);
        let enc = self.pk_of(def, &row)?;
        if txn.is_some_and(|x| x.pending.contains_key(&(def.id, enc.clone()))) {
            // Our own image of that row no longer has the value (checked above).
            return Ok(None);
        }
        Ok(Some((part, enc)))
    }

    /// Image of a row as transaction `t` sees it under its lock.
    pub(super) fn current(&self, t: TxnId, def: &TableDef, part: PartitionId, enc: &[u8]) -> Option<Vec<Value>> {
        if self.txns.get(&t).is_none_or(|x| x.pending.is_empty()) {
            // Nothing of our own: no row key to build for the pending map.
            let rid = self.storage.lookup(def.id, part, enc)?;
            return Some(self.storage.read_row(def.id, part, rid));
        }
        self.current_rk(t, part, &(def.id, enc.to_vec())).image
    }

    /// `current` for a row key already built (no key copy per lookup), with
    /// the committed row's id (see `Pending::committed`).
    fn current_rk(&self, t: TxnId, part: PartitionId, rk: &RowKey) -> Current {
        if let Some(p) = self.txns.get(&t).and_then(|x| x.pending.get(rk)) {
            return Current { image: p.image.clone(), committed: p.committed, pending_est: p.est_bytes };
        }
        let rid = self.storage.lookup(rk.0, part, &rk.1);
        Current { image: rid.map(|r| self.storage.read_row(rk.0, part, r)), committed: rid, pending_est: 0 }
    }

    /// Committed read without an image of our own: the projected columns
    /// straight from storage (no full row decoded and copied).
    fn committed_read(&self, def: &TableDef, part: PartitionId, enc: &[u8], cols: &[ColumnId]) -> Step {
        let Some(rid) = self.storage.lookup(def.id, part, enc) else {
            return Step::Done(Err(NodeError::new(ErrorCode::NoSuchRow)));
        };
        if let Some(c) = cols.iter().find(|c| **c as usize >= def.columns.len()) {
            return Step::Done(Err(NodeError::with(
                ErrorCode::NoSuchColumn,
                format!("column id {c} in table {}", def.name),
            )));
        }
        let mut out = Vec::with_capacity(if cols.is_empty() { def.columns.len() } else { cols.len() });
        self.storage.read_projected(def.id, part, rid, cols, &mut out);
        Step::Done(Ok(Some(out)))
    }

    fn insert_image(&self, def: &TableDef, key: &[Value], q: &QueuedOp) -> Result<Vec<Value>, NodeError> {
        let mut values = q.op.values.clone();
        for (i, c) in def.primary_key.iter().enumerate() {
            let col = &def.columns[*c as usize];
            let kv = coerce_value(key[i].clone(), &col.ty, false)?;
            match values.iter().find(|(vc, _)| vc == c) {
                Some((_, v)) => {
                    let v = coerce_value(v.clone(), &col.ty, false)?;
                    if !same_key_value(&v, &kv, &col.ty) {
                        return Err(NodeError::with(
                            ErrorCode::KeyUpdateNotAllowed,
                            format!("value of key column {} differs from the key", col.name),
                        ));
                    }
                }
                None => values.push((*c, kv)),
            }
        }
        coerce_row(def, &values)
    }

    /// The row with the operation's values and increments applied. With
    /// `take`, the operation's values are moved out (the caller knows the
    /// operation cannot be re-run: nothing after this can wait for a lock).
    fn update_image(
        &self,
        def: &TableDef,
        mut row: Vec<Value>,
        q: &mut QueuedOp,
        take: bool,
    ) -> Result<Vec<Value>, NodeError> {
        let col_of = |c: ColumnId| {
            def.column(c)
                .ok_or_else(|| NodeError::with(ErrorCode::NoSuchColumn, format!("column id {c} in table {}", def.name)))
        };
        for (c, v) in &mut q.op.values {
            let col = col_of(*c)?;
            let v = if take { std::mem::replace(v, Value::Null) } else { v.clone() };
            let v = coerce_value(v, &col.ty, col.nullable)
                .map_err(|e| NodeError::with(e.code, format!("column {}: {}", col.name, e.message)))?;
            if def.primary_key.contains(c) && !same_key_value(&v, &row[*c as usize], &col.ty) {
                return Err(NodeError::with(ErrorCode::KeyUpdateNotAllowed, format!("column {}", col.name)));
            }
            row[*c as usize] = v;
        }
        for (c, d) in &q.op.increments {
            let col = col_of(*c)?;
            if def.primary_key.contains(c) {
                return Err(NodeError::with(ErrorCode::KeyUpdateNotAllowed, format!("column {}", col.name)));
            }
            row[*c as usize] = add_delta(&row[*c as usize], d, &col.ty, col.nullable)
                .map_err(|e| NodeError::with(e.code, format!("column {}: {}", col.name, e.message)))?;
        }
        Ok(row)
    }

    /// Try to run operation `q` of transaction `t`. Changes nothing until every
    /// lock it needs is held.
    pub(super) fn exec_op(&mut self, t: TxnId, q: &mut QueuedOp, ctx: &mut Ctx<'_, Signal>) -> Step {
        let op = &q.op;
        let wait = op.wait;
        let Some(def) = self.defs.get(&op.table).map(Arc::clone) else {
            return Step::Done(Err(NodeError::with(ErrorCode::NoSuchTable, format!("table id {}", op.table))));
        };
        if op.table_version != 0 && op.table_version != def.version {
            return Step::Done(Err(NodeError::with(
                ErrorCode::SchemaVersionMismatch,
                format!("table {} is at version {}, operation planned for {}", def.name, def.version, op.table_version),
            )));
        }
        if op.kind.is_write() && self.storage.is_altering(op.table) {
            // The table's rows are being copied for ALTER TABLE: a write now
            // would miss the copy. The change commits (new version) or is
            // dropped within the DDL's round trip.
            crate::probe!(self.counters, "lqh: write refused during alter table");
            return Step::Done(Err(NodeError::with(
                ErrorCode::SchemaVersionMismatch,
                format!("table {} is being altered", def.name),
            )));
        }
        let (part, enc) = match &op.key {
            KeyAccess::Primary(vals) => {
                let part = q.part.expect("TC routes primary-key operations to a partition");
                if part >= def.partitions {
                    return Step::Done(Err(NodeError::new(ErrorCode::BadPartition)));
                }
                (part, tri!(self.storage.encode_pk(def.id, vals)))
            }
            KeyAccess::Unique { index, values } => {
                let Some(idx) = def.index(*index).filter(|i| i.unique) else {
                    return Step::Done(Err(NodeError::with(
                        ErrorCode::NoSuchIndex,
                        format!("unique index id {index}"),
                    )));
                };
                match tri!(self.resolve_unique(t, &def, idx, values)) {
                    Some(x) => x,
                    None => return Step::Done(Err(NodeError::new(ErrorCode::NoSuchRow))),
                }
            }
        };

        if !self.serves(&def, part) {
            crate::probe!(self.counters, "lqh: operation for a partition this node does not serve");
            return Step::Done(Err(NodeError::with(
                ErrorCode::WrongReplica,
                format!("node {} is not a live replica of partition {part} of {}", self.node, def.name),
            )));
        }
        if op.is_committed_read() {
            // No lock: the latest committed image, or our own uncommitted one.
            if self.txns.get(&t).is_none_or(|x| x.pending.is_empty()) {
                return self.committed_read(&def, part, &enc, &op.projection);
            }
            return Step::Done(match self.current(t, &def, part, &enc) {
                Some(row) => project(&def, &row, &op.projection).map(Some),
                None => Err(NodeError::new(ErrorCode::NoSuchRow)),
            });
        }

        let mode = if op.kind.is_write() || op.lock == LockMode::Exclusive { Mode::Exclusive } else { Mode::Shared };
        let row_lock = LockKey::Row(def.id, enc.clone());
        if op.kind == OpKind::Read && !op.wait.queues() {
            if !self.try_lock_owned(t, row_lock, mode) {
                return Step::Done(Err(lock_busy(op.wait)));
            }
        } else if let Some(tag) = self.lock_owned(t, row_lock, mode, op.wait, WaitTarget::Op(t), ctx) {
            return Step::Wait(tag);
        }
        // The pending-image key, built once for every lookup below.
        let rk: RowKey = (def.id, enc);
        let Current { image: mut cur, committed, pending_est: old_est } = self.current_rk(t, part, &rk);
        // Without a unique index nothing below looks at the old image once the
        // new one is built, so an update may build it in place.
        let has_unique = def.indexes.iter().any(|i| i.unique);
        let key_vals: &[Value] = match &op.key {
            KeyAccess::Primary(v) => v,
            KeyAccess::Unique { .. } => &[],
        };
        let new: Option<Vec<Value>> = match (op.kind, &cur) {
            (OpKind::Read, Some(row)) => return Step::Done(project(&def, row, &op.projection).map(Some)),
            (OpKind::Read | OpKind::Update | OpKind::Delete, None) => {
                return Step::Done(Err(NodeError::new(ErrorCode::NoSuchRow)))
            }
            (OpKind::Insert, Some(_)) => return Step::Done(Err(NodeError::new(ErrorCode::DuplicateKey))),
            (OpKind::Insert | OpKind::Write, None) => Some(tri!(self.insert_image(&def, key_vals, q))),
            (OpKind::Update | OpKind::Write, Some(_)) => {
                let row = if has_unique { cur.clone() } else { cur.take() };
                // Only unique-index locks are taken after this point.
                Some(tri!(self.update_image(&def, row.expect("matched Some"), q, !has_unique)))
            }
            (OpKind::Delete, Some(_)) => None,
        };

        let new_est = new.as_deref().map_or(0, est_bytes);
        // The first write of a transaction into a partition may need fresh
        // fixed and var pages at commit: reserve them once.
        let fresh = !self.txns[&t].page_reserved.contains(&(def.id, part));
        let page_est = if new.is_some() && fresh { PAGES_EST_BYTES } else { 0 };
        if let Some(row) = &new {
            tri!(self.storage.reserve_check(def.id, row));
            let (used, limit) = self.storage.used_and_limit_bytes();
            let need = new_est + page_est;
            if need > old_est && used + self.reserved_bytes + need - old_est > limit {
                crate::probe!(self.counters, "lqh: table full by reservations");
                return Step::Done(Err(NodeError::with(
                    ErrorCode::TableFull,
                    "data memory is reserved by uncommitted changes",
                )));
            }
        }

        // Unique indexes: lock the old and new values of every changed unique
        // key, then check the new one against committed rows and our own images.
        for idx in def.indexes.iter().filter(|i| i.unique) {
            let old_k = cur.as_deref().and_then(|r| self.unique_key(&def, idx, r));
            let new_k = new.as_deref().and_then(|r| self.unique_key(&def, idx, r));
            if old_k == new_k {
                continue;
            }
            for k in [&old_k, &new_k].into_iter().flatten() {
                let key = LockKey::Unique(def.id, idx.id, k.clone());
                if let Some(tag) = self.lock(t, &key, Mode::Exclusive, wait, WaitTarget::Op(t), ctx) {
                    return Step::Wait(tag);
                }
            }
            if let (Some(nk), Some(row)) = (&new_k, &new) {
                tri!(self.check_unique(t, &def, idx, &rk.1, nk, row));
            }
        }

        // Index the unique values of the new image (and forget the old image's).
        let mut uniq_old = Vec::new();
        let mut uniq_new = Vec::new();
        let prev = if has_unique { self.txns[&t].pending.get(&rk).and_then(|p| p.image.as_ref()) } else { None };
        for idx in def.indexes.iter().filter(|i| i.unique) {
            if let Some(k) = prev.and_then(|r| self.unique_key(&def, idx, r)) {
                uniq_old.push((def.id, idx.id, k));
            }
            if let Some(k) = new.as_deref().and_then(|r| self.unique_key(&def, idx, r)) {
                uniq_new.push((def.id, idx.id, k));
            }
        }
        let txn = self.txns.get_mut(&t).expect("running op has a transaction");
        for k in uniq_old {
            if txn.uniq.get(&k) == Some(&rk.1) {
                txn.uniq.remove(&k);
            }
        }
        for k in uniq_new {
            let other = txn.uniq.insert(k, rk.1.clone());
            debug_assert!(other.is_none_or(|o| o == rk.1), "unique value held by two pending images");
        }
        txn.reserved_bytes = txn.reserved_bytes + new_est + page_est - old_est;
        self.reserved_bytes = self.reserved_bytes + new_est + page_est - old_est;
        if page_est > 0 {
            txn.page_reserved.insert((def.id, part));
        }
        let savepoint = q.savepoint;
        let pending = Pending { part, image: new, est_bytes: new_est, committed, savepoint, backup: false };
        txn.last_write = Some((part, rk.clone()));
        if savepoint == 0 {
            txn.pending.insert(rk, pending);
        } else {
            txn.keep_for_savepoint(rk, pending);
        }
        Step::Done(Ok(None))
    }

    fn check_unique(
        &self,
        t: TxnId,
        def: &TableDef,
        idx: &IndexDef,
        enc: &[u8],
        nk: &[u8],
        row: &[Value],
    ) -> Result<(), NodeError> {
        let dup =
            || NodeError::with(ErrorCode::DuplicateUniqueKey, format!("index {} of table {}", idx.name, def.name));
        let txn = &self.txns[&t];
        if txn.uniq.get(&(def.id, idx.id, nk.to_vec())).is_some_and(|e| e.as_slice() != enc) {
            return Err(dup());
        }
        let vals = unique_values(idx, row).expect("non-null unique key");
        if let Some((p, rid)) = self.storage.lookup_unique(def.id, idx.id, &vals)? {
            let other = self.pk_of(def, &self.storage.read_row(def.id, p, rid))?;
            if other.as_slice() == enc {
                return Ok(());
            }
            match txn.pending.get(&(def.id, other)) {
                // We deleted that row or moved its value away: no collision.
                Some(pend) if pend.image.as_ref().and_then(|r| self.unique_key(def, idx, r)).as_deref() != Some(nk) => {
                }
                _ => return Err(dup()),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas() {
        let i8t = ColumnType::TinyInt { unsigned: false };
        assert_eq!(add_delta(&Value::Int(120), &Value::Int(7), &i8t, true).unwrap(), Value::Int(127));
        assert_eq!(
            add_delta(&Value::Int(120), &Value::Int(8), &i8t, true).unwrap_err().code,
            ErrorCode::ValueOutOfRange
        );
        let u64t = ColumnType::BigInt { unsigned: true };
        assert_eq!(add_delta(&Value::UInt(u64::MAX - 1), &Value::Int(1), &u64t, true).unwrap(), Value::UInt(u64::MAX));
        assert_eq!(
            add_delta(&Value::UInt(u64::MAX), &Value::Int(1), &u64t, true).unwrap_err().code,
            ErrorCode::ValueOutOfRange
        );
        assert_eq!(
            add_delta(&Value::UInt(0), &Value::Int(-1), &u64t, true).unwrap_err().code,
            ErrorCode::ValueOutOfRange
        );
        let i64t = ColumnType::BigInt { unsigned: false };
        assert_eq!(
            add_delta(&Value::Int(i64::MAX), &Value::Int(1), &i64t, true).unwrap_err().code,
            ErrorCode::ValueOutOfRange
        );
        assert_eq!(add_delta(&Value::Null, &Value::Int(1), &i64t, true).unwrap(), Value::Null);
        assert_eq!(
            add_delta(&Value::Int(1), &Value::str("x"), &i64t, true).unwrap_err().code,
            ErrorCode::WrongValueType
        );
        let dt = ColumnType::Decimal { precision: 4, scale: 2 };
        let d = |m| Value::Decimal(Decimal { mantissa: m, scale: 2 });
        assert_eq!(add_delta(&d(9900), &Value::Int(-1), &dt, true).unwrap(), d(9800));
        assert_eq!(add_delta(&d(9900), &Value::Int(1), &dt, true).unwrap_err().code, ErrorCode::ValueOutOfRange);
        assert_eq!(
            add_delta(&Value::Double(1.5), &Value::Int(2), &ColumnType::Double, true).unwrap(),
            Value::Double(3.5)
        );
        assert_eq!(
            add_delta(&Value::Double(f64::MAX), &Value::Double(f64::MAX), &ColumnType::Double, true).unwrap_err().code,
            ErrorCode::ValueOutOfRange
        );
    }
}
