//! norr-storage: TUP (rows), ACC (primary-key hash index) and TUX (ordered
//! indexes) of one data node.
//!
//! A synchronous, single-threaded library owned by LQH: no threads, IO, clock or
//! randomness. It holds COMMITTED rows only; LQH keeps uncommitted images in its
//! operation records and calls `insert` / `update` / `delete` at commit.
//!
//! Layout (see each module's doc):
//! * `row_format`: fixed slot = null bitmap + fixed-width columns + 6-byte var
//!   ref; var chunk = LEB128-length-prefixed var column values.
//! * `fixed_pages`: 32 KiB pages of fixed slots per partition, free list per
//!   page, live bitmap for scans; RowId = page * slots_per_page + slot. Each
//!   slot ends in the row's GCI (u32), each page keeps the highest GCI
//!   written on it; page p is checkpoint part p % 2048.
//! * `var_storage`: 32 KiB var pages with compaction, big values allocated alone.
//! * `hash_index`: per-partition `HashTable<RowId>`, keys re-read from rows.
//! * `keys`: encoding key columns from full rows or straight from stored rows.
//! * `ordered_index`: per-partition `BTreeMap<index key ++ pk, RowId>` and
//!   table-wide unique maps.
//! * `memory`: accounting against `data_memory_bytes`.
//! * `table_store`: a table's partitions and index maintenance;
//!   `table_ddl`: index build/drop, memory estimates, invariant checks.
//! * `scan`: full and ordered scans with resumable cursors.
//! * `lcp`: partial local checkpoint scans, tombstones, change counters;
//!   `restore`: restore / REDO replay and the index rebuild; `sync`: replica
//!   resynchronisation and partition checksums (see "Durability" below).
//!
//! Memory: for a (BIGINT pk, BIGINT, CHAR(20)) table the overhead per row
//! beyond the column data is about 25 bytes at 100k rows (target <= 32):
//! null bitmap 1, var ref 6, row GCI 4, var chunk header 6 + length 1, hash
//! index ~6.6 (power-of-two bucket count, 5 bytes per bucket; between 5.7 and
//! 11.4 as the table fills and doubles), page slack < 1.
//! `memory::measure_row_overhead` computes it; `cargo test -p norr-storage
//! overhead -- --nocapture` prints it.
//! Ordered-index entries are charged ~64 bytes each (keys up to 30 bytes live
//! inline in the B-tree node), except for a plain ordered index on exactly the
//! primary key (the `PRIMARY` ordered index every table gets from the
//! dictionary), kept as `pk_order`: 4-byte row ids in sorted leaves, about 4.2
//! bytes per row for ascending inserts and ~6 for random ones, which brings
//! the figure above to about 29.4 bytes. Tombstones (below) are charged too.
//!
//! Uniqueness of unique indexes is enforced across the partitions held by this
//! `Storage` (a table-wide map); partitions stored on other nodes are not seen.
//!
//! API changes (relative to the agreed API): none in names or signatures.
//! Semantics worth knowing:
//! * `read_projected` clears `out` first; empty `cols` = every column; an
//!   unknown column id reads as NULL (validate projections in LQH).
//! * `read_row`, `read_projected` and `delete` panic on a RowId that is not
//!   live (a caller bug that would otherwise corrupt data); `delete` on an
//!   unknown table is a no-op; `update` of a dead RowId returns `NoSuchRow`.
//! * `insert` / `update` coerce the row again (a wrong value class is an error,
//!   never silent corruption) and `insert` checks that the row belongs in the
//!   partition (`BadPartition`).
//! * `lookup_unique` with a NULL value returns `Ok(None)` (NULL matches
//!   nothing); on a non-unique index it is `NoSuchIndex`.
//! * `scan_next` appends at most `max_rows` rows per call (counted per call,
//!   not by `out.len()`), looks at no more than `examine_limit` rows (at least
//!   1), and returns true as soon as the partition is known to be exhausted.
//! * Scan bounds out of a numeric column's range act as -inf/+inf (so
//!   `tinyint < 1000` scans every non-NULL value); a fraction on an integer
//!   or DECIMAL index snaps to the nearest column value inside the range
//!   (`int_col > 2.5` scans from 3); strings longer than the column compare as
//!   they are; other uncoercible bounds are `BadScanBound`.
//! * Ordered scans: an update that moves a row's index key past the cursor
//!   makes it a new entry that the scan returns again (no locks); full scans
//!   never return a row twice.
//! * Added: `ScanCursor::is_done`, `Storage::tables`, `Storage::data_bytes_of_row`,
//!   `Storage::check_invariants` (tests), `memory::measure_row_overhead`.
//!
//! ## Durability (added; nothing above changed signature)
//! * Row GCI: `set_commit_gci(gci)` sets the GCI that `insert` / `update` /
//!   `delete` / `put` tag rows and tombstones with (panics above u32::MAX);
//!   `commit_gci()`; `row_gci(t, p, rid) -> Option<u64>`;
//!   `lcp_part_of(t, p, rid) -> Option<u16>`. An ALTER TABLE that rebuilds
//!   rows tags them with the commit GCI.
//! * Partial LCP (module `lcp`, whose doc gives the restore order the files
//!   must allow): `lcp_begin(t, p, full_parts: PartSet, since_gci) ->
//!   (LcpScan, Vec<Tombstone>)`, `lcp_next(&LcpScan, max_rows, &mut
//!   Vec<LcpRow>) -> Result<bool>` (true = done), `lcp_abandon(scan,
//!   tombstones)`, `lcp_reset(t, p)`, `lcp_stats(t, p) -> LcpStats`,
//!   `tombstone_count()`. The first checkpoint of a partition (and the first
//!   after truncate, a rebuilding ALTER or `lcp_reset`) is full whatever was
//!   asked: record `LcpScan::full_parts()`. Deletes leave tombstones only once
//!   a partition has a checkpoint chain; they are charged to data memory and
//!   never refused (a committed delete cannot fail).
//! * Restore (module `restore`): `restore_begin(t)`, `reserve_rows(t, p, n)`,
//!   `restore_put(t, p, lcp_part, row, gci)` and `restore_delete(t, p,
//!   lcp_part, key) -> bool` for checkpoint rows and tombstones, `redo_put(t,
//!   p, row, gci)` and `redo_delete(t, p, key, gci) -> bool` for REDO
//!   records, `restore_finish(t)` (builds ordered and unique indexes; a
//!   duplicate unique value is an `Internal` error naming table and index),
//!   `is_restoring(t)`; and `put(t, p, row) -> RowId` (upsert with full
//!   index maintenance) for the node-restart copy.
//! * Resynchronisation (module `sync`): `sync_begin(t, p)`, `sync_confirm(t,
//!   p, key) -> bool` (false: the row is missing here), `sync_end(t, p) ->
//!   rows deleted`, `is_syncing`; the live side's `copy_scan_next(t, p,
//!   cursor, after_gci, max_rows, &mut Vec<CopyRow>)`; and
//!   `partition_checksum(t, p) -> (rows, checksum)`.

mod fixed_pages;
mod hash_index;
mod keys;
mod lcp;
pub mod memory;
mod ordered_index;
mod pk_order;
mod restore;
mod row_format;
mod scan;
mod sync;
mod table_alter;
mod table_ddl;
mod table_store;
mod var_storage;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_alter;
#[cfg(test)]
mod tests_lcp;
#[cfg(test)]
mod tests_pk_order;
#[cfg(test)]
mod tests_random;
#[cfg(test)]
mod tests_restore;
#[cfg(test)]
mod tests_scan;
#[cfg(test)]
mod tests_sync;

pub use fixed_pages::{RowId, LCP_PARTS};
pub use lcp::{LcpRow, LcpScan, LcpStats, PartSet, Tombstone};
pub use memory::MemoryStats;
pub use scan::{ScanBatch, ScanCursor, ScanStep};
pub use sync::CopyRow;

use norr_signals::ops::{Filter, ScanRange};
use norr_signals::value::Value;
use norr_signals::{ColumnId, ErrorCode, IndexDef, IndexId, NodeError, PartitionId, TableDef, TableId};
use std::collections::BTreeMap;
use table_alter::Staged;
use table_store::TableStore;

/// Most tables one node stores.
pub const MAX_TABLES: usize = 20_000;

/// The committed data of one data node (or one LDM instance).
pub struct Storage {
    tables: BTreeMap<TableId, TableStore>,
    /// ALTER TABLE changes prepared and not yet committed or discarded
    /// (`alter_prepare`); a rebuilt copy's bytes count in `used_bytes`.
    staged: BTreeMap<TableId, Staged>,
    limit_bytes: u64,
    used_bytes: u64,
    /// GCI that writes are tagged with (`set_commit_gci`).
    commit_gci: u32,
    /// Id of the next checkpoint scan (`lcp_begin`), unique in this storage.
    next_lcp_scan: u64,
}

pub(crate) fn no_table(table: TableId) -> NodeError {
    NodeError::with(ErrorCode::NoSuchTable, format!("table id {table} not in storage"))
}

impl Storage {
    pub fn new(data_memory_bytes: u64) -> Storage {
        Storage {
            tables: BTreeMap::new(),
            staged: BTreeMap::new(),
            limit_bytes: data_memory_bytes,
            used_bytes: 0,
            commit_gci: 0,
            next_lcp_scan: 1,
        }
    }

    fn t(&self, table: TableId) -> Result<&TableStore, NodeError> {
        self.tables.get(&table).ok_or_else(|| no_table(table))
    }

    fn budget(&self) -> u64 {
        self.limit_bytes.saturating_sub(self.used_bytes)
    }

    fn apply_delta(&mut self, delta: i64) {
        let used = self.used_bytes as i64 + delta;
        assert!(used >= 0, "memory accounting went negative");
        self.used_bytes = used as u64;
    }

    pub fn create_table(&mut self, def: &TableDef) -> Result<(), NodeError> {
        if self.tables.contains_key(&def.id) {
            return Err(NodeError::with(ErrorCode::TableExists, format!("table id {} exists", def.id)));
        }
        if self.tables.len() >= MAX_TABLES {
            return Err(NodeError::with(ErrorCode::TooManyTables, format!("at most {MAX_TABLES} tables")));
        }
        let t = TableStore::new(def)?;
        if t.bytes > self.budget() {
            return Err(NodeError::with(ErrorCode::TableFull, "no data memory for the table's partitions"));
        }
        self.used_bytes += t.bytes;
        self.tables.insert(def.id, t);
        Ok(())
    }

    pub fn drop_table(&mut self, table: TableId) -> Result<(), NodeError> {
        self.alter_discard(table);
        let t = self.tables.remove(&table).ok_or_else(|| no_table(table))?;
        self.apply_delta(-(t.bytes as i64));
        Ok(())
    }

    pub fn truncate_table(&mut self, table: TableId) -> Result<(), NodeError> {
        let t = self.tables.get_mut(&table).ok_or_else(|| no_table(table))?;
        let before = t.bytes;
        t.truncate();
        let delta = t.bytes as i64 - before as i64;
        self.apply_delta(delta);
        Ok(())
    }

    pub fn create_index(&mut self, table: TableId, index: &IndexDef) -> Result<(), NodeError> {
        let budget = self.budget();
        let t = self.tables.get_mut(&table).ok_or_else(|| no_table(table))?;
        if t.restoring {
            return Err(t.restoring_error());
        }
        let delta = t.create_index(index, budget)?;
        self.apply_delta(delta);
        Ok(())
    }

    pub fn drop_index(&mut self, table: TableId, index: IndexId) -> Result<(), NodeError> {
        let t = self.tables.get_mut(&table).ok_or_else(|| no_table(table))?;
        let delta = t.drop_index(index)?;
        self.apply_delta(delta);
        Ok(())
    }

    /// ALTER TABLE, first phase: build `table`'s rows in the layout of `def`
    /// aside (column i of each row from `sources[i]`, converted with the
    /// checks of `insert`), or note the new definition alone when the layout
    /// does not change. The table itself is not touched: reads see the old
    /// rows until `alter_commit`. The caller must keep writes away from the
    /// table until it commits or discards (a write would miss the copy).
    /// Errors (conversion, unique conflict in a new index, TableFull when
    /// data memory cannot hold both copies) keep nothing.
    pub fn alter_prepare(
        &mut self,
        table: TableId,
        def: &TableDef,
        sources: &[norr_signals::ColumnSource],
    ) -> Result<(), NodeError> {
        if def.id != table {
            return Err(NodeError::with(ErrorCode::BadSchema, "ALTER TABLE cannot change the table id"));
        }
        if self.staged.contains_key(&table) {
            return Err(NodeError::with(ErrorCode::Internal, format!("table id {table} is being altered already")));
        }
        let budget = self.budget();
        let t = self.t(table)?;
        if t.restoring {
            return Err(t.restoring_error());
        }
        let staged = if t.same_layout(def, sources) {
            Staged::Redefine(def.clone())
        } else {
            // Rebuilt rows count as written now (the copy starts a new
            // checkpoint chain anyway).
            let copy = t.rebuild(def, sources, budget, self.commit_gci)?;
            self.used_bytes += copy.bytes;
            debug_assert!(self.used_bytes <= self.limit_bytes);
            Staged::Rebuilt(Box::new(copy))
        };
        self.staged.insert(table, staged);
        Ok(())
    }

    /// ALTER TABLE, second phase: switch `table` to what `alter_prepare`
    /// built (the old rows are freed). Cannot fail once prepared.
    pub fn alter_commit(&mut self, table: TableId) -> Result<(), NodeError> {
        let staged = self.staged.remove(&table).ok_or_else(|| {
            NodeError::with(ErrorCode::Internal, format!("table id {table} has no prepared ALTER TABLE"))
        })?;
        let t = self.tables.get_mut(&table).ok_or_else(|| no_table(table))?;
        match staged {
            Staged::Redefine(def) => {
                for ix in t.indexes.iter_mut().chain(t.pk_index.as_mut()) {
                    if let Some(d) = def.index(ix.def.id) {
                        ix.def = d.clone();
                    }
                }
                t.def = def;
            }
            Staged::Rebuilt(copy) => {
                let old = std::mem::replace(t, *copy);
                self.apply_delta(-(old.bytes as i64));
            }
        }
        Ok(())
    }

    /// Drop what `alter_prepare` built for `table` (nothing if none).
    pub fn alter_discard(&mut self, table: TableId) {
        if let Some(Staged::Rebuilt(copy)) = self.staged.remove(&table) {
            self.apply_delta(-(copy.bytes as i64));
        }
    }

    /// Bytes of the rows `alter_prepare` rebuilt for `table` (None: no ALTER
    /// prepared, or one that keeps the layout and rebuilds nothing).
    pub fn alter_rebuilt_bytes(&self, table: TableId) -> Option<u64> {
        match self.staged.get(&table)? {
            Staged::Rebuilt(copy) => Some(copy.bytes),
            Staged::Redefine(_) => None,
        }
    }

    /// True between `alter_prepare` and `alter_commit` / `alter_discard`.
    pub fn is_altering(&self, table: TableId) -> bool {
        self.staged.contains_key(&table)
    }

    pub fn table_def(&self, table: TableId) -> Option<&TableDef> {
        self.tables.get(&table).map(|t| &t.def)
    }

    /// Ids of the stored tables, ascending.
    pub fn tables(&self) -> Vec<TableId> {
        self.tables.keys().copied().collect()
    }

    /// Encoded primary key (keycode::encode_key over pk columns) of pk values.
    /// Wrong count or NULL -> MissingKeyColumn; values are coerced first.
    pub fn encode_pk(&self, table: TableId, pk_values: &[Value]) -> Result<Vec<u8>, NodeError> {
        let t = self.t(table)?;
        t.encode_key_values(&t.pk, pk_values)
    }

    /// Partition for a row with these pk values (PartitionScheme::Key); User
    /// scheme -> MissingPartition.
    pub fn partition_of_pk(&self, table: TableId, pk_values: &[Value]) -> Result<PartitionId, NodeError> {
        self.t(table)?.partition_of_pk(pk_values)
    }

    pub fn lookup(&self, table: TableId, part: PartitionId, encoded_pk: &[u8]) -> Option<RowId> {
        let t = self.tables.get(&table)?;
        let pi = t.part_index(part).ok()?;
        t.lookup(pi, encoded_pk)
    }

    /// Unique index lookup across all partitions: index values -> (partition, row).
    /// NULL in any value matches nothing.
    pub fn lookup_unique(
        &self,
        table: TableId,
        index: IndexId,
        index_values: &[Value],
    ) -> Result<Option<(PartitionId, RowId)>, NodeError> {
        let t = self.t(table)?;
        if t.restoring {
            return Err(t.restoring_error());
        }
        let ix = t.index(index)?;
        let Some(map) = &ix.unique else {
            return Err(NodeError::with(ErrorCode::NoSuchIndex, format!("index {} is not unique", ix.def.name)));
        };
        if index_values.len() == ix.key.cols.len() && index_values.iter().any(|v| v.is_null()) {
            return Ok(None);
        }
        let key = t.encode_key_values(&ix.key, index_values)?;
        Ok(map.get(&key))
    }

    /// Encoded primary key of a full row (empty for an unknown table).
    pub fn encode_row_pk(&self, table: TableId, row: &[Value]) -> Vec<u8> {
        self.tables.get(&table).map_or_else(Vec::new, |t| t.pk.encoded(row))
    }

    /// Encoded index columns of a full row (empty for an unknown table/index).
    pub fn encode_index_key(&self, table: TableId, index: IndexId, row: &[Value]) -> Vec<u8> {
        match self.tables.get(&table).and_then(|t| t.index(index).ok()) {
            Some(ix) => ix.key.encoded(row),
            None => Vec::new(),
        }
    }

    /// Full row, table column order. Panics if the row is not live.
    pub fn read_row(&self, table: TableId, part: PartitionId, row: RowId) -> Vec<Value> {
        let t = self.tables.get(&table).expect("read_row: unknown table");
        t.read(part as usize, row)
    }

    /// The given columns (empty = all) of a row, into `out` (cleared first).
    pub fn read_projected(
        &self,
        table: TableId,
        part: PartitionId,
        row: RowId,
        cols: &[ColumnId],
        out: &mut Vec<Value>,
    ) {
        out.clear();
        let t = self.tables.get(&table).expect("read_projected: unknown table");
        if cols.is_empty() {
            t.read_into(part as usize, row, out);
        } else {
            // An unknown column id reads as NULL rather than crashing the
            // node (LQH validates projections against the table first).
            out.extend(cols.iter().map(|&c| {
                if (c as usize) < t.def.columns.len() {
                    t.read_col(part as usize, row, c as usize)
                } else {
                    Value::Null
                }
            }));
        }
    }

    /// Insert a full row, tagged with the commit GCI. Maintains all indexes.
    /// DuplicateKey / DuplicateUniqueKey / TableFull leave storage unchanged.
    pub fn insert(&mut self, table: TableId, part: PartitionId, row: Vec<Value>) -> Result<RowId, NodeError> {
        let budget = self.budget();
        let t = self.tables.get_mut(&table).ok_or_else(|| no_table(table))?;
        let (rowid, delta) = t.insert(part, row, budget, self.commit_gci)?;
        self.apply_delta(delta);
        Ok(rowid)
    }

    /// Replace the whole row (same pk), tagged with the commit GCI.
    /// DuplicateUniqueKey / TableFull leave it unchanged.
    pub fn update(
        &mut self,
        table: TableId,
        part: PartitionId,
        row: RowId,
        new_row: Vec<Value>,
    ) -> Result<(), NodeError> {
        let budget = self.budget();
        let t = self.tables.get_mut(&table).ok_or_else(|| no_table(table))?;
        let delta = t.update(part, row, new_row, budget, self.commit_gci)?;
        self.apply_delta(delta);
        Ok(())
    }

    /// Delete a live row (panics if it is not live; no-op for an unknown
    /// table). With a checkpoint chain it leaves a tombstone tagged with the
    /// commit GCI.
    pub fn delete(&mut self, table: TableId, part: PartitionId, row: RowId) {
        if let Some(t) = self.tables.get_mut(&table) {
            let delta = t.delete(part, row, self.commit_gci);
            self.apply_delta(delta);
        }
    }

    /// Would inserting (or updating to) a row like this exceed data memory?
    /// Conservative: assumes the row lands in a partition that needs new pages.
    pub fn reserve_check(&self, table: TableId, row: &[Value]) -> Result<(), NodeError> {
        let t = self.t(table)?;
        let need = t.insert_cost_estimate(row);
        if need > self.budget() {
            return Err(NodeError::with(
                ErrorCode::TableFull,
                format!("row may need {need} bytes of data memory, {} free", self.budget()),
            ));
        }
        Ok(())
    }

    /// (used, limit) bytes of data memory: `memory()` without counting rows
    /// (checked per write operation).
    pub fn used_and_limit_bytes(&self) -> (u64, u64) {
        (self.used_bytes, self.limit_bytes)
    }

    pub fn memory(&self) -> MemoryStats {
        MemoryStats {
            limit_bytes: self.limit_bytes,
            used_bytes: self.used_bytes,
            rows: self.tables.values().map(|t| t.row_count()).sum(),
        }
    }

    pub fn row_count(&self, table: TableId) -> u64 {
        self.tables.get(&table).map_or(0, |t| t.row_count())
    }

    /// Bytes of a row's own column data (fixed widths + var bytes), the base of
    /// the per-row overhead figure.
    pub fn data_bytes_of_row(&self, table: TableId, row: &[Value]) -> usize {
        self.tables.get(&table).map_or(0, |t| t.layout.data_bytes(row))
    }

    pub fn scan_open(
        &self,
        table: TableId,
        part: PartitionId,
        index: Option<IndexId>,
        range: Option<&ScanRange>,
        descending: bool,
    ) -> Result<ScanCursor, NodeError> {
        let t = self.t(table)?;
        let pi = t.part_index(part)?;
        if t.restoring && index.is_some() {
            return Err(t.restoring_error());
        }
        t.scan_open(pi, index, range, descending)
    }

    /// Append up to `max_rows` matching rows to `out`; true when the partition
    /// is exhausted. At most `examine_limit` rows are looked at per call.
    #[allow(clippy::too_many_arguments)]
    pub fn scan_next(
        &self,
        table: TableId,
        part: PartitionId,
        cursor: &mut ScanCursor,
        filter: Option<&Filter>,
        max_rows: usize,
        examine_limit: usize,
        out: &mut Vec<(RowId, Vec<Value>)>,
    ) -> Result<bool, NodeError> {
        let t = self.t(table)?;
        let pi = t.part_index(part)?;
        if t.restoring && matches!(cursor, ScanCursor::Ordered { .. }) {
            return Err(t.restoring_error());
        }
        t.scan_next(pi, cursor, filter, max_rows, examine_limit, out)
    }

    /// `scan_next` decoding only the columns `step.cols` selects, and
    /// returning each row's entry key for ordered scans (see `ScanBatch`).
    pub fn scan_next_rows(
        &self,
        table: TableId,
        part: PartitionId,
        cursor: &mut ScanCursor,
        step: &ScanStep<'_>,
        out: &mut ScanBatch,
    ) -> Result<bool, NodeError> {
        let t = self.t(table)?;
        let pi = t.part_index(part)?;
        if t.restoring && matches!(cursor, ScanCursor::Ordered { .. }) {
            return Err(t.restoring_error());
        }
        t.scan_next_rows(pi, cursor, step, out)
    }

    /// Ordered-index key of a row: encoded index columns followed by the
    /// encoded pk (for merging ordered scans of several partitions in TC).
    pub fn ordered_key(&self, table: TableId, index: IndexId, row: &[Value]) -> Vec<u8> {
        match self.tables.get(&table) {
            Some(t) => match t.index(index) {
                Ok(ix) => TableStore::ordered_entry(ix, row, &t.pk.encoded(row)),
                Err(_) => Vec::new(),
            },
            None => Vec::new(),
        }
    }

    /// Verify every internal invariant (tests). Panics on corruption.
    pub fn check_invariants(&self) {
        let mut total = 0;
        for t in self.tables.values() {
            t.check_invariants();
            total += t.bytes;
        }
        for s in self.staged.values() {
            if let Staged::Rebuilt(copy) = s {
                copy.check_invariants();
                total += copy.bytes;
            }
        }
        assert_eq!(total, self.used_bytes, "node byte count drifted");
    }
}
