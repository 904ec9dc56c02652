//! Replica resynchronisation (node restart from local files) and replica
//! comparison.
//!
//! A restarting node restored an old state (its last checkpoint plus REDO, up
//! to GCI g). A live replica of each partition then scans it
//! (`copy_scan_next`): rows written after g come in full (the restarting node
//! `put`s them), the others as keys only (the restarting node
//! `sync_confirm`s them). Between `sync_begin` and `sync_end` every row of the
//! restarting node's partition is unconfirmed until a key confirms it or a
//! write (insert, update, put, restore or redo put) touches it; `sync_end`
//! deletes the rows still unconfirmed: they were deleted on the live replica
//! while this node was down. The marks are a bitmap over row ids (1 bit per
//! slot, charged to data memory).
//!
//! `partition_checksum` is an order-independent digest of a partition's rows
//! (the simulator compares replicas with it).

use crate::fixed_pages::RowId;
use crate::scan::ScanCursor;
use crate::table_store::err;
use crate::Storage;
use norr_signals::value::Value;
use norr_signals::{ErrorCode, NodeError, PartitionId, TableId};

/// Rows of a partition confirmed during a resynchronisation, by row id.
#[derive(Default)]
pub(crate) struct SyncMarks {
    bits: Vec<u64>,
}

impl SyncMarks {
    pub fn mark(&mut self, row: RowId) {
        let w = row as usize / 64;
        if w >= self.bits.len() {
            self.bits.resize(w + 1, 0);
        }
        self.bits[w] |= 1 << (row % 64);
    }

    pub fn unmark(&mut self, row: RowId) {
        if let Some(w) = self.bits.get_mut(row as usize / 64) {
            *w &= !(1 << (row % 64));
        }
    }

    pub fn is_marked(&self, row: RowId) -> bool {
        self.bits.get(row as usize / 64).is_some_and(|w| w & (1 << (row % 64)) != 0)
    }

    pub fn footprint(&self) -> u64 {
        (self.bits.capacity() * 8) as u64
    }

    /// Bytes `mark` of a row id below `bound` may add: nothing while the
    /// capacity covers it, else a `Vec` growth (to at least twice the
    /// capacity). An insert adds it to its estimate: a resynchronising
    /// partition's first row on a new page grows the bitmap.
    pub fn grow_cost(&self, bound: u64) -> u64 {
        let need = bound.div_ceil(64) as usize;
        let cap = self.bits.capacity();
        if need <= cap {
            return 0;
        }
        ((need.max(cap * 2).max(4) - cap) * 8) as u64
    }
}

/// One row of a copy scan (`copy_scan_next`).
#[derive(Debug, Clone, PartialEq)]
pub enum CopyRow {
    /// Written after the restarting node's GCI: the whole row and its GCI
    /// (the receiver `put`s it under that GCI).
    Full { gci: u64, row: Vec<Value> },
    /// Unchanged since: its primary-key values only (the receiver
    /// `sync_confirm`s it).
    Key { key: Vec<Value> },
}

/// 64-bit hash of bytes (word at a time, then a strong finaliser), for the
/// partition checksum.
fn hash_bytes(mut h: u64, b: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut chunks = b.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        h = (h ^ w).wrapping_mul(K).rotate_left(29);
    }
    let mut last = [0u8; 8];
    let rest = chunks.remainder();
    last[..rest.len()].copy_from_slice(rest);
    h = (h ^ u64::from_le_bytes(last) ^ ((rest.len() as u64) << 56)).wrapping_mul(K).rotate_left(29);
    h
}

fn finish(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

impl Storage {
    /// Start tracking which rows of the partition are confirmed (all
    /// unconfirmed; a tracking already running starts over).
    pub fn sync_begin(&mut self, table: TableId, part: PartitionId) -> Result<(), NodeError> {
        let t = self.tables.get_mut(&table).ok_or_else(|| crate::no_table(table))?;
        let pi = t.part_index(part)?;
        let before = t.parts[pi].footprint();
        let bound = t.parts[pi].fixed().row_id_bound();
        let mut marks = SyncMarks::default();
        marks.bits.reserve_exact(bound.div_ceil(64) as usize);
        t.parts[pi].sync = Some(marks);
        let delta = t.parts[pi].footprint() as i64 - before as i64;
        t.bytes = (t.bytes as i64 + delta) as u64;
        self.apply_delta(delta);
        Ok(())
    }

    /// Confirm the row with these primary-key values; Ok(false) if there is
    /// none (the receiver then lacks a row the live replica has: ask for it in
    /// full). Errors: not tracking, bad key values.
    pub fn sync_confirm(&mut self, table: TableId, part: PartitionId, key: &[Value]) -> Result<bool, NodeError> {
        let t = self.tables.get_mut(&table).ok_or_else(|| crate::no_table(table))?;
        let pi = t.part_index(part)?;
        if t.parts[pi].sync.is_none() {
            return Err(not_syncing(&t.def.name, part));
        }
        let enc = t.encode_key_values(&t.pk, key)?;
        let Some(r) = t.lookup(pi, &enc) else {
            return Ok(false);
        };
        let before = t.parts[pi].footprint();
        t.parts[pi].sync.as_mut().expect("checked").mark(r);
        let delta = t.parts[pi].footprint() as i64 - before as i64;
        t.bytes = (t.bytes as i64 + delta) as u64;
        self.apply_delta(delta);
        Ok(true)
    }

    /// True while `sync_begin` tracks the partition.
    pub fn is_syncing(&self, table: TableId, part: PartitionId) -> bool {
        self.tables.get(&table).and_then(|t| t.parts.get(part as usize)).is_some_and(|p| p.sync.is_some())
    }

    /// Delete every row not confirmed since `sync_begin` (as `delete` does:
    /// indexes, tombstones, the commit GCI), stop tracking, and return how
    /// many rows were deleted.
    pub fn sync_end(&mut self, table: TableId, part: PartitionId) -> Result<u64, NodeError> {
        let t = self.tables.get_mut(&table).ok_or_else(|| crate::no_table(table))?;
        let pi = t.part_index(part)?;
        let Some(marks) = t.parts[pi].sync.take() else {
            return Err(not_syncing(&t.def.name, part));
        };
        let fixed = t.parts[pi].fixed();
        let mut doomed = Vec::new();
        let mut next = 0u64;
        while let Some(r) = fixed.next_live(next) {
            next = r as u64 + 1;
            if !marks.is_marked(r) {
                doomed.push(r);
            }
        }
        let mut delta = -(marks.footprint() as i64);
        let gci = self.commit_gci;
        for &r in &doomed {
            delta += t.delete(part, r, gci);
        }
        // `delete` moved `t.bytes` by its own deltas; the marks' bytes left
        // with `take`.
        t.bytes = (t.bytes as i64 - marks.footprint() as i64) as u64;
        self.apply_delta(delta);
        Ok(doomed.len() as u64)
    }

    /// The live replica's side of a resynchronisation: a full scan (a cursor
    /// from `scan_open(table, part, None, None, false)`) that appends up to
    /// `max_rows` rows to `out`, rows with a GCI above `after_gci` in full and
    /// the others as keys. True when the partition is done. Fuzzy as a full
    /// scan: rows written meanwhile reach the restarting node by replication.
    pub fn copy_scan_next(
        &self,
        table: TableId,
        part: PartitionId,
        cursor: &mut ScanCursor,
        after_gci: u64,
        max_rows: usize,
        out: &mut Vec<CopyRow>,
    ) -> Result<bool, NodeError> {
        let t = self.t(table)?;
        let pi = t.part_index(part)?;
        let ScanCursor::Full { next, done } = cursor else {
            return Err(err(ErrorCode::Internal, "copy_scan_next needs a full-scan cursor"));
        };
        let fixed = t.parts[pi].fixed();
        let mut n = 0;
        while n < max_rows.max(1) {
            let Some(r) = fixed.next_live(*next) else {
                *done = true;
                break;
            };
            *next = r as u64 + 1;
            let gci = fixed.gci(r) as u64;
            if gci > after_gci {
                out.push(CopyRow::Full { gci, row: t.read(pi, r) });
            } else {
                let key = t.pk.cols.iter().map(|&c| t.read_col(pi, r, c)).collect();
                out.push(CopyRow::Key { key });
            }
            n += 1;
        }
        if !*done && fixed.next_live(*next).is_none() {
            *done = true;
        }
        Ok(*done)
    }

    /// (rows, checksum) of a partition's rows: the wrapping sum of a 64-bit
    /// hash of each row's stored bytes (fixed slot without its var reference,
    /// and var payload). Equal on two storages holding the same rows with
    /// the same table definition whatever the insertion order, row ids or
    /// row GCIs (the GCI is not part of it); different, with overwhelming
    /// probability, when any value differs.
    pub fn partition_checksum(&self, table: TableId, part: PartitionId) -> Result<(u64, u64), NodeError> {
        let t = self.t(table)?;
        let pi = t.part_index(part)?;
        let p = &t.parts[pi];
        let fixed = p.fixed();
        let (mut rows, mut sum) = (0u64, 0u64);
        let mut next = 0u64;
        while let Some(r) = fixed.next_live(next) {
            next = r as u64 + 1;
            let slot = fixed.slot(r);
            let h = match t.layout.var_ref_off {
                None => hash_bytes(0x5eed, slot),
                Some(o) => {
                    let h = hash_bytes(0x5eed, &slot[..o]);
                    let h = hash_bytes(h, &slot[o + crate::row_format::VAR_REF_BYTES..]);
                    let payload = t.layout.var_ref(slot).map(|vr| p.var.get(vr)).unwrap_or(&[]);
                    hash_bytes(h, payload)
                }
            };
            sum = sum.wrapping_add(finish(h));
            rows += 1;
        }
        Ok((rows, sum))
    }
}

fn not_syncing(table: &str, part: PartitionId) -> NodeError {
    err(ErrorCode::Internal, format!("table {table} partition {part}: no resynchronisation running (sync_begin)"))
}
