//! Restore (system restart, node restart from local files) and the upsert of
//! the node-restart copy.
//!
//! Between `restore_begin` and `restore_finish` a table takes rows by primary
//! key from checkpoint files (`restore_put` / `restore_delete`, which know the
//! checkpoint part of each row) and from the REDO log (`redo_put` /
//! `redo_delete`). Ordered indexes, unique maps and the primary-key order are
//! emptied and not maintained meanwhile (no unique checks: the data was
//! consistent when it was written); the pk hash index stays, since restore
//! overwrites and deletes by key. `restore_finish` builds the indexes from the
//! rows in one sorted pass each, and fails (naming the table and index) if a
//! unique index finds two rows with one value: restored data that is corrupt.
//!
//! Every row is checked as `insert` checks it (column types, NOT NULL, its
//! partition), so a bad row from a file is an error, never a panic.
//!
//! Rows from a checkpoint go back into a page of the checkpoint part they
//! were written from, so that the restored node's later tombstones name the
//! parts the files hold them in and it can continue the checkpoint chain (a
//! key put into another part than the one it sits in moves there, and the
//! move is recorded as a tombstone of the part it left). REDO rows keep the
//! part of the row they overwrite; new ones go anywhere.

use crate::fixed_pages::{RowId, LCP_PARTS};
use crate::hash_index::pk_hash;
use crate::lcp::check_gci;
use crate::ordered_index::{sort_by_key, IKey, OrderedIndex, UniqueMap};
use crate::pk_order::PkOrder;
use crate::table_store::{err, Partition, TableStore};
use crate::Storage;
use norr_signals::value::Value;
use norr_signals::{ErrorCode, IndexId, NodeError, PartitionId, TableId};

/// Where a restored row goes if its key is not stored yet.
#[derive(Clone, Copy)]
enum Place {
    /// A page of this checkpoint part (a row from a checkpoint file).
    Part(u16),
    /// Anywhere (a REDO row).
    Any,
}

impl TableStore {
    fn check_restoring(&self) -> Result<(), NodeError> {
        if self.restoring {
            Ok(())
        } else {
            Err(err(
                ErrorCode::Internal,
                format!("table {} is not being restored (call restore_begin first)", self.def.name),
            ))
        }
    }

    /// Empty the secondary structures (ordered indexes, unique maps, pk
    /// order) and enter restore mode.
    fn enter_restore(&mut self) {
        self.restoring = true;
        for ix in &mut self.indexes {
            if let Some(u) = &mut ix.unique {
                *u = UniqueMap::default();
            }
        }
        for p in &mut self.parts {
            for o in p.ordered.values_mut() {
                *o = OrderedIndex::default();
            }
            p.pk_order = PkOrder::default();
            // Restored rows come from a chain: deletes leave tombstones. A
            // running checkpoint scan is void.
            p.lcp.chain = true;
            p.lcp.active_scan = None;
            // Changes not yet checkpointed stay changes (a roll forward
            // restores a table that was restored and finished before).
            p.lcp.replayed = std::mem::take(&mut p.lcp.changes);
        }
        self.bytes = self.compute_footprint();
    }

    /// Insert or overwrite a row by primary key, tagged `gci`, without
    /// touching indexes. Returns the change of `bytes`.
    fn restore_row(
        &mut self,
        p: PartitionId,
        row: Vec<Value>,
        gci: u64,
        place: Place,
        budget: u64,
    ) -> Result<i64, NodeError> {
        self.check_restoring()?;
        let gci = check_gci(gci)?;
        if let Place::Part(q) = place {
            if q as u32 >= LCP_PARTS {
                return Err(err(ErrorCode::Internal, format!("checkpoint part {q} out of range (0..{LCP_PARTS})")));
            }
        }
        let pi = self.part_index(p)?;
        let row = self.coerce_full(row)?;
        let mut pk = Vec::with_capacity(16 * self.pk.cols.len());
        if self.pk.encode_row(&row, &mut pk) {
            return Err(err(ErrorCode::MissingKeyColumn, "a primary key column is NULL"));
        }
        self.check_placement(p, &row, &pk)?;
        let payload = self.layout.var_payload(&row);
        let stored_bytes = self.layout.slot_size + payload.len();
        let before = self.local_footprint(pi);
        let existing = self.lookup(pi, &pk);
        let moving = match (existing, place) {
            (Some(r), Place::Part(q)) => self.parts[pi].fixed().part_of(r) != q,
            _ => false,
        };
        let rowid = match existing {
            Some(r) if !moving => {
                // Overwrite in place: a new var chunk only if its length changes.
                let part = &self.parts[pi];
                let old_ref = self.layout.var_ref(part.fixed().slot(r));
                let old_len = old_ref.map_or(0, |vr| part.var.get(vr).len());
                let need = if old_len == payload.len() { 0 } else { part.var.alloc_cost(payload.len()) };
                if need > budget {
                    return Err(self.table_full(need, budget));
                }
                let layout = &self.layout;
                let Partition { fixed, var, .. } = &mut self.parts[pi];
                let fixed = fixed.as_mut().expect("partition initialised");
                let vref = match old_ref {
                    None => None,
                    Some(vr) if old_len == payload.len() => {
                        if !vr.is_none() {
                            var.overwrite(vr, &payload);
                        }
                        Some(vr)
                    }
                    Some(vr) => {
                        var.free(vr);
                        Some(var.alloc(r, &payload, &mut |owner, nr| layout.set_var_ref(fixed.slot_mut(owner), nr)))
                    }
                };
                let slot = fixed.slot_mut(r);
                layout.write_fixed(&row, slot);
                if let Some(vr) = vref {
                    layout.set_var_ref(slot, vr);
                }
                fixed.set_gci(r, gci);
                r
            }
            _ => {
                let part = &self.parts[pi];
                let fixed_need = match place {
                    Place::Part(q) => part.fixed().alloc_in_part_cost(q),
                    Place::Any => part.fixed().alloc_cost(),
                };
                let need = fixed_need + part.var.alloc_cost(payload.len()) + part.hash.insert_cost();
                if need > budget {
                    return Err(self.table_full(need, budget));
                }
                if let Some(old) = existing {
                    // The key moves to another checkpoint part: the part it
                    // leaves gets a tombstone, as a delete would leave.
                    let old_row = self.read(pi, old);
                    self.record_tombstone(pi, old, &old_row, gci);
                    self.remove_stored(pi, old, &pk);
                }
                self.insert_stored(pi, &row, &pk, &payload, gci, place)
            }
        };
        self.parts[pi].note_write(rowid, stored_bytes, gci);
        if let Place::Any = place {
            self.parts[pi].lcp.note_replayed(stored_bytes, Some(gci));
        }
        let delta = self.local_footprint(pi) as i64 - before as i64;
        self.bytes = (self.bytes as i64 + delta) as u64;
        Ok(delta)
    }

    /// Store a row whose key is not stored (fixed slot, var chunk, hash
    /// entry; no other index). The caller checked memory.
    fn insert_stored(&mut self, pi: usize, row: &[Value], pk: &[u8], payload: &[u8], gci: u32, place: Place) -> RowId {
        let layout = &self.layout;
        let pkinfo = &self.pk;
        let Partition { fixed, var, hash, .. } = &mut self.parts[pi];
        let fixed = fixed.as_mut().expect("partition initialised");
        let rowid = match place {
            Place::Part(q) => fixed.alloc_in_part(q, gci),
            Place::Any => fixed.alloc(gci),
        };
        let vref = if layout.var_cols > 0 {
            Some(var.alloc(rowid, payload, &mut |owner, r| layout.set_var_ref(fixed.slot_mut(owner), r)))
        } else {
            None
        };
        let slot = fixed.slot_mut(rowid);
        layout.write_fixed(row, slot);
        if let Some(r) = vref {
            layout.set_var_ref(slot, r);
        }
        let buf = std::cell::RefCell::new(Vec::with_capacity(pk.len()));
        hash.insert(pk_hash(pk), rowid, |r| {
            let mut b = buf.borrow_mut();
            pkinfo.encode_stored(layout, fixed, var, r, &mut b);
            pk_hash(&b)
        });
        rowid
    }

    /// Remove a stored row from its slot, var chunk and hash entry (restore
    /// mode: no other index holds it).
    fn remove_stored(&mut self, pi: usize, rowid: RowId, pk: &[u8]) {
        debug_assert!(self.restoring);
        let layout = &self.layout;
        let Partition { fixed, var, hash, sync, .. } = &mut self.parts[pi];
        let fixed = fixed.as_mut().expect("partition initialised");
        assert!(hash.remove(pk_hash(pk), rowid), "row {rowid} missing from the hash index");
        if let Some(r) = layout.var_ref(fixed.slot(rowid)) {
            var.free(r);
        }
        fixed.free(rowid);
        if let Some(m) = sync {
            m.unmark(rowid);
        }
    }

    /// Delete by key. `from_part`: only if the row sits in this checkpoint
    /// part (a checkpoint tombstone), leaving no new tombstone; None: a REDO
    /// delete, which leaves one tagged `gci`. Returns (deleted, change of
    /// `bytes`).
    fn restore_remove(
        &mut self,
        p: PartitionId,
        key: &[Value],
        from_part: Option<u16>,
        gci: u64,
    ) -> Result<(bool, i64), NodeError> {
        self.check_restoring()?;
        let gci = check_gci(gci)?;
        let pi = self.part_index(p)?;
        let pk = self.encode_key_values(&self.pk, key)?;
        let Some(r) = self.lookup(pi, &pk) else {
            return Ok((false, 0));
        };
        let before = self.local_footprint(pi);
        match from_part {
            Some(q) => {
                if self.parts[pi].fixed().part_of(r) != q {
                    // The key lives in another part now (it moved there in a
                    // later image): this tombstone is about the part it left.
                    return Ok((false, 0));
                }
            }
            None => {
                let row = self.read(pi, r);
                self.record_tombstone(pi, r, &row, gci);
            }
        }
        self.remove_stored(pi, r, &pk);
        self.parts[pi].lcp.note_write(pk.len(), None);
        if from_part.is_none() {
            self.parts[pi].lcp.note_replayed(pk.len(), None);
        }
        let delta = self.local_footprint(pi) as i64 - before as i64;
        self.bytes = (self.bytes as i64 + delta) as u64;
        Ok((true, delta))
    }

    /// Build the ordered indexes, unique maps and primary-key order from the
    /// rows and leave restore mode. Nothing changes on error (duplicate in a
    /// unique index, not enough memory).
    fn finish_restore(&mut self, budget: u64) -> Result<i64, NodeError> {
        self.check_restoring()?;
        let mut need = 0u64;
        let n_ix = self.indexes.len();
        let layout = &self.layout;
        // Unique keys are table-wide: collected over every partition, then
        // sorted; two equal neighbours are corruption. Keys are encoded
        // straight from the stored rows (no decoded values).
        let mut ukeys: Vec<Vec<(IKey, (PartitionId, RowId))>> = (0..n_ix).map(|_| Vec::new()).collect();
        let mut ordered: Vec<Vec<(IndexId, OrderedIndex)>> = Vec::with_capacity(self.parts.len());
        let (mut pk, mut k) = (Vec::new(), Vec::new());
        for (pi, part) in self.parts.iter().enumerate() {
            let (fixed, var) = (part.fixed(), &part.var);
            let live = fixed.live_rows() as usize;
            let mut entries: Vec<Vec<(IKey, RowId)>> =
                self.indexes.iter().map(|ix| Vec::with_capacity(if ix.is_ordered() { live } else { 0 })).collect();
            let mut next = 0u64;
            while let Some(r) = fixed.next_live(next).filter(|_| n_ix > 0) {
                next = r as u64 + 1;
                let slot = fixed.slot(r);
                self.pk.encode_slot(layout, slot, var, &mut pk);
                for (i, ix) in self.indexes.iter().enumerate() {
                    ix.key.encode_slot(layout, slot, var, &mut k);
                    if ix.unique.is_some() && !ix.key.cols.iter().any(|&c| layout.is_null(slot, c)) {
                        ukeys[i].push((IKey::new(&k), (pi as PartitionId, r)));
                    }
                    if ix.is_ordered() {
                        k.extend_from_slice(&pk);
                        entries[i].push((IKey::new(&k), r));
                    }
                }
            }
            let mut built = Vec::new();
            for (ix, e) in self.indexes.iter().zip(entries) {
                if ix.is_ordered() {
                    let o = OrderedIndex::from_sorted(sort_by_key(e));
                    need += o.footprint();
                    built.push((ix.def.id, o));
                }
            }
            ordered.push(built);
        }
        let mut uniques: Vec<Option<UniqueMap>> = Vec::with_capacity(n_ix);
        for (ix, keys) in self.indexes.iter().zip(ukeys) {
            if ix.unique.is_none() {
                uniques.push(None);
                continue;
            }
            let keys = sort_by_key(keys);
            if keys.windows(2).any(|w| w[0].0 == w[1].0) {
                return Err(err(
                    ErrorCode::Internal,
                    format!(
                        "restored data is corrupt: two rows of table {} have the same value in unique index {}",
                        self.def.name, ix.def.name
                    ),
                ));
            }
            let u = UniqueMap::from_sorted(keys);
            need += u.footprint();
            uniques.push(Some(u));
        }
        let mut pk_orders = Vec::new();
        if self.pk_index.is_some() {
            for part in &self.parts {
                let (fixed, var) = (part.fixed(), &part.var);
                let mut enc = |r, b: &mut Vec<u8>| self.pk.encode_stored(layout, fixed, var, r, b);
                let mut rows: Vec<RowId> = Vec::with_capacity(fixed.live_rows() as usize);
                let mut next = 0u64;
                while let Some(r) = fixed.next_live(next) {
                    next = r as u64 + 1;
                    rows.push(r);
                }
                match self.pk.single_int() {
                    // The usual key: sort by the integer, no key bytes.
                    Some(c) => {
                        let mut keyed: Vec<(Option<u64>, RowId)> =
                            rows.iter().map(|&r| (c.key(fixed.slot(r)), r)).collect();
                        keyed.sort_unstable();
                        rows = keyed.into_iter().map(|(_, r)| r).collect();
                    }
                    None => {
                        let keyed: Vec<(IKey, RowId)> = rows
                            .iter()
                            .map(|&r| {
                                enc(r, &mut pk);
                                (IKey::new(&pk), r)
                            })
                            .collect();
                        rows = sort_by_key(keyed).into_iter().map(|(_, r)| r).collect();
                    }
                }
                let o = PkOrder::from_sorted(&rows, &mut enc);
                need += o.footprint();
                pk_orders.push(o);
            }
        }
        if need > budget {
            return Err(self.table_full(need, budget));
        }
        let before = self.bytes;
        for (ix, u) in self.indexes.iter_mut().zip(uniques) {
            if u.is_some() {
                ix.unique = u;
            }
        }
        for (part, built) in self.parts.iter_mut().zip(ordered) {
            for (id, o) in built {
                part.ordered.insert(id, o);
            }
        }
        for (part, o) in self.parts.iter_mut().zip(pk_orders) {
            part.pk_order = o;
        }
        for part in &mut self.parts {
            // Rows from checkpoint files are in those files; rows replayed
            // from the REDO log are only in the log, which the next
            // recorded round releases: they are changes for it.
            part.lcp.changes = std::mem::take(&mut part.lcp.replayed);
        }
        self.restoring = false;
        self.bytes = self.compute_footprint();
        Ok(self.bytes as i64 - before as i64)
    }
}

impl Storage {
    /// Start restoring a table: its ordered indexes, unique maps and
    /// primary-key order are emptied and not maintained until
    /// `restore_finish`; `insert` / `update` / `put`, unique lookups, index
    /// scans, checkpoints and index DDL are refused meanwhile (`delete` and
    /// full scans work). The table may hold rows already (restore overlays
    /// them by key). Its partitions get a checkpoint chain.
    pub fn restore_begin(&mut self, table: TableId) -> Result<(), NodeError> {
        if self.is_altering(table) {
            return Err(err(ErrorCode::Internal, format!("table id {table} is being altered")));
        }
        let t = self.tables.get_mut(&table).ok_or_else(|| crate::no_table(table))?;
        if t.restoring {
            return Err(err(ErrorCode::Internal, format!("table {} is being restored already", t.def.name)));
        }
        let before = t.bytes;
        t.enter_restore();
        let delta = t.bytes as i64 - before as i64;
        self.apply_delta(delta);
        Ok(())
    }

    /// Make room for `rows` more rows in a partition's primary-key hash
    /// index at once (charged to data memory; `TableFull` if it does not
    /// fit). A restore or copy that knows how many rows are coming (the
    /// checkpoint files' row counts) saves the rehashing as the index grows,
    /// which re-reads every stored key.
    pub fn reserve_rows(&mut self, table: TableId, part: PartitionId, rows: u64) -> Result<(), NodeError> {
        let budget = self.budget();
        let t = self.tables.get_mut(&table).ok_or_else(|| crate::no_table(table))?;
        let pi = t.part_index(part)?;
        let need = t.parts[pi].hash.reserve_cost(rows);
        if need > budget {
            return Err(t.table_full(need, budget));
        }
        let before = t.parts[pi].footprint();
        let TableStore { layout, pk, parts, .. } = &mut *t;
        let Partition { fixed, var, hash, .. } = &mut parts[pi];
        let fixed = fixed.as_ref().expect("partition initialised");
        let buf = std::cell::RefCell::new(Vec::new());
        hash.reserve(usize::try_from(rows).unwrap_or(usize::MAX), |r| {
            let mut b = buf.borrow_mut();
            pk.encode_stored(layout, fixed, var, r, &mut b);
            pk_hash(&b)
        });
        let delta = t.parts[pi].footprint() as i64 - before as i64;
        debug_assert!(delta <= need as i64, "reserve charged {delta} > estimated {need}");
        t.bytes = (t.bytes as i64 + delta) as u64;
        self.apply_delta(delta);
        Ok(())
    }

    pub fn is_restoring(&self, table: TableId) -> bool {
        self.tables.get(&table).is_some_and(|t| t.restoring)
    }

    /// A row from a checkpoint file: insert, or overwrite by primary key,
    /// with its row GCI, into a page of checkpoint part `lcp_part` (a stored
    /// row of this key in another part moves, leaving a tombstone there). No
    /// unique checks. Errors: not restoring, a bad row (types, NULL key,
    /// wrong partition), a GCI above u32::MAX, a part >= 2048, `TableFull`.
    pub fn restore_put(
        &mut self,
        table: TableId,
        part: PartitionId,
        lcp_part: u16,
        row: Vec<Value>,
        gci: u64,
    ) -> Result<(), NodeError> {
        let budget = self.budget();
        let t = self.tables.get_mut(&table).ok_or_else(|| crate::no_table(table))?;
        let delta = t.restore_row(part, row, gci, Place::Part(lcp_part), budget)?;
        self.apply_delta(delta);
        Ok(())
    }

    /// A tombstone from a checkpoint file: delete the row with these
    /// primary-key values if it sits in checkpoint part `lcp_part` (a key
    /// that moved to another part in a later image stays). Leaves no new
    /// tombstone. Returns whether a row was deleted.
    pub fn restore_delete(
        &mut self,
        table: TableId,
        part: PartitionId,
        lcp_part: u16,
        key: &[Value],
    ) -> Result<bool, NodeError> {
        let t = self.tables.get_mut(&table).ok_or_else(|| crate::no_table(table))?;
        let (deleted, delta) = t.restore_remove(part, key, Some(lcp_part), 0)?;
        self.apply_delta(delta);
        Ok(deleted)
    }

    /// An insert or update replayed from the REDO log: insert, or overwrite
    /// by primary key in place, with the record's GCI. Restore mode only
    /// (no unique checks); the same checks as `restore_put`.
    pub fn redo_put(&mut self, table: TableId, part: PartitionId, row: Vec<Value>, gci: u64) -> Result<(), NodeError> {
        let budget = self.budget();
        let t = self.tables.get_mut(&table).ok_or_else(|| crate::no_table(table))?;
        let delta = t.restore_row(part, row, gci, Place::Any, budget)?;
        self.apply_delta(delta);
        Ok(())
    }

    /// A delete replayed from the REDO log: delete by primary key if present,
    /// leaving a tombstone tagged `gci` for the next checkpoint (the files may
    /// still hold the row). Returns whether a row was deleted.
    pub fn redo_delete(
        &mut self,
        table: TableId,
        part: PartitionId,
        key: &[Value],
        gci: u64,
    ) -> Result<bool, NodeError> {
        let t = self.tables.get_mut(&table).ok_or_else(|| crate::no_table(table))?;
        let (deleted, delta) = t.restore_remove(part, key, None, gci)?;
        self.apply_delta(delta);
        Ok(deleted)
    }

    /// Build the table's ordered indexes, unique maps and primary-key order
    /// from its rows and end restore mode; the change counters start from
    /// zero. A unique index with two rows of one value is an `Internal`
    /// error naming the table and index (the restored data is corrupt); it
    /// and `TableFull` leave the table in restore mode, unchanged.
    pub fn restore_finish(&mut self, table: TableId) -> Result<(), NodeError> {
        let budget = self.budget();
        let t = self.tables.get_mut(&table).ok_or_else(|| crate::no_table(table))?;
        let delta = t.finish_restore(budget)?;
        self.apply_delta(delta);
        Ok(())
    }

    /// Upsert for the node-restart copy: insert the row, or update it in
    /// place if its primary key is stored, with full index maintenance and
    /// unique checks, tagged with the commit GCI (`set_commit_gci`). Returns
    /// the row id.
    pub fn put(&mut self, table: TableId, part: PartitionId, row: Vec<Value>) -> Result<RowId, NodeError> {
        let t = self.t(table)?;
        let pi = t.part_index(part)?;
        // A row of the wrong width is `insert`'s error to give.
        let existing = if row.len() == t.def.columns.len() {
            let enc = t.encode_key_values(&t.pk, &t.pk_values(&row))?;
            t.lookup(pi, &enc)
        } else {
            None
        };
        match existing {
            Some(r) => self.update(table, part, r, row).map(|()| r),
            None => self.insert(table, part, row),
        }
    }
}
