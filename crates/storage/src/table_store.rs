//! One table's committed rows: partitions (fixed pages, var store, hash index,
//! ordered indexes) and the table-wide unique maps. All index maintenance of
//! insert / update / delete happens here.
//!
//! Every mutating operation first does all its checks (coercion, duplicate
//! keys, unique keys, memory) and only then changes anything, so a failed
//! operation leaves the table exactly as it was.

use crate::fixed_pages::{FixedPages, RowId};
use crate::hash_index::{pk_hash, HashIndex};
pub use crate::keys::KeyInfo;
use crate::lcp::LcpState;
use crate::memory::entry_cost;
use crate::ordered_index::{OrderedIndex, UniqueMap};
use crate::pk_order::PkOrder;
use crate::row_format::RowLayout;
use crate::sync::SyncMarks;
use crate::var_storage::VarStore;
use norr_signals::coerce::coerce_value;
use norr_signals::keycode::{encode_value, partition_of};
use norr_signals::schema::{IndexDef, IndexKind, PartitionScheme, MAX_COLUMNS, MAX_KEY_COLUMNS, MAX_PARTITIONS};
use norr_signals::value::{ColumnType, Value, MAX_CHAR_LEN, MAX_DECIMAL_PRECISION, MAX_VARCHAR_LEN};
use norr_signals::{ErrorCode, IndexId, NodeError, PartitionId, TableDef};
use std::collections::BTreeMap;

pub(crate) fn err(code: ErrorCode, msg: impl Into<String>) -> NodeError {
    NodeError::with(code, msg)
}

/// Per index of a row: (unique-map key if the index is unique and no key
/// column is NULL, ordered entry `key ++ pk` if the index is ordered).
pub(crate) type IndexKeys = (Option<Vec<u8>>, Option<Vec<u8>>);

pub struct IndexState {
    pub def: IndexDef,
    pub key: KeyInfo,
    /// Table-wide map of a unique index.
    pub unique: Option<UniqueMap>,
}

impl IndexState {
    pub fn is_ordered(&self) -> bool {
        self.def.kind == IndexKind::Ordered
    }
}

/// Whether an index is kept as a `PkOrder`: a plain (non-unique) ordered
/// index on exactly the primary key, such as the `PRIMARY` ordered index the
/// dictionary creates for every table. Its entries never change on update
/// (the primary key cannot change), so it is not in `TableStore::indexes`.
pub fn is_pk_order(def: &TableDef, ix: &IndexDef) -> bool {
    ix.kind == IndexKind::Ordered && !ix.unique && ix.columns == def.primary_key
}

#[derive(Default)]
pub struct Partition {
    pub fixed: Option<FixedPages>,
    pub var: VarStore,
    pub hash: HashIndex,
    pub ordered: BTreeMap<IndexId, OrderedIndex>,
    /// Rows in primary-key order (empty when the table has no such index).
    pub pk_order: PkOrder,
    /// Local checkpoint state: tombstones, change counters, chain.
    pub lcp: LcpState,
    /// Rows confirmed during a replica resynchronisation (`sync_begin`).
    pub sync: Option<SyncMarks>,
}

impl Partition {
    pub(crate) fn footprint(&self) -> u64 {
        self.fixed.as_ref().map_or(0, |f| f.footprint())
            + self.var.footprint()
            + self.hash.footprint()
            + self.ordered.values().map(|o| o.footprint()).sum::<u64>()
            + self.pk_order.footprint()
            + self.lcp.footprint()
            + self.sync.as_ref().map_or(0, |s| s.footprint())
    }

    /// Book a write of row `rowid` (`bytes` stored bytes) tagged `gci`:
    /// checkpoint change counters and resynchronisation marks.
    pub(crate) fn note_write(&mut self, rowid: RowId, bytes: usize, gci: u32) {
        self.lcp.note_write(bytes, Some(gci));
        if let Some(m) = &mut self.sync {
            m.mark(rowid);
        }
    }

    pub fn fixed(&self) -> &FixedPages {
        self.fixed.as_ref().expect("partition initialised")
    }
}

pub struct TableStore {
    pub def: TableDef,
    pub layout: RowLayout,
    pub pk: KeyInfo,
    /// Partition key (Key scheme) when it differs from the primary key.
    part_key: Option<KeyInfo>,
    /// Indexes maintained on every insert / update / delete.
    pub indexes: Vec<IndexState>,
    /// The ordered index on the primary key, kept as each partition's
    /// `pk_order` (see `is_pk_order`).
    pub pk_index: Option<IndexState>,
    pub parts: Vec<Partition>,
    /// Bytes charged for this table (kept equal to the sum of footprints).
    pub bytes: u64,
    /// Layout of the primary-key columns alone (tombstone keys).
    pub key_layout: RowLayout,
    /// Between `restore_begin` and a successful `restore_finish`: ordered
    /// indexes, unique maps and the primary-key order are empty and not
    /// maintained; inserts and updates are refused.
    pub restoring: bool,
}

fn validate_type(name: &str, ty: &ColumnType) -> Result<(), NodeError> {
    let ok = match ty {
        ColumnType::Decimal { precision, scale } => {
            (1..=MAX_DECIMAL_PRECISION).contains(precision) && scale <= precision
        }
        ColumnType::Char { len, .. } | ColumnType::Binary { len } => *len <= MAX_CHAR_LEN,
        ColumnType::Varchar { len, .. } | ColumnType::Varbinary { len } => *len <= MAX_VARCHAR_LEN,
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(err(ErrorCode::BadSchema, format!("column {name}: invalid type {ty:?}")))
    }
}

fn validate_key_cols(def: &TableDef, what: &str, cols: &[u16]) -> Result<(), NodeError> {
    if cols.is_empty() || cols.len() > MAX_KEY_COLUMNS {
        return Err(err(ErrorCode::BadSchema, format!("{what} must have 1..={MAX_KEY_COLUMNS} columns")));
    }
    for (i, c) in cols.iter().enumerate() {
        if def.column(*c).is_none() {
            return Err(err(ErrorCode::BadSchema, format!("{what} names unknown column id {c}")));
        }
        if cols[..i].contains(c) {
            return Err(err(ErrorCode::BadSchema, format!("{what} names column id {c} twice")));
        }
    }
    Ok(())
}

pub fn validate_index(def: &TableDef, ix: &IndexDef) -> Result<(), NodeError> {
    validate_key_cols(def, &format!("index {}", ix.name), &ix.columns)?;
    if ix.kind == IndexKind::UniqueHash && !ix.unique {
        return Err(err(ErrorCode::BadSchema, format!("hash index {} must be unique", ix.name)));
    }
    Ok(())
}

impl TableStore {
    pub fn new(def: &TableDef) -> Result<TableStore, NodeError> {
        if def.columns.is_empty() || def.columns.len() > MAX_COLUMNS {
            return Err(err(ErrorCode::BadSchema, format!("a table has 1..={MAX_COLUMNS} columns")));
        }
        for c in &def.columns {
            validate_type(&c.name, &c.ty)?;
        }
        if def.partitions == 0 || def.partitions > MAX_PARTITIONS {
            return Err(err(ErrorCode::BadSchema, format!("partitions must be 1..={MAX_PARTITIONS}")));
        }
        validate_key_cols(def, "primary key", &def.primary_key)?;
        let layout = RowLayout::new(def);
        let part_key = match &def.partitioning {
            PartitionScheme::Key { columns } if !columns.is_empty() && columns != &def.primary_key => {
                validate_key_cols(def, "partition key", columns)?;
                if let Some(c) = columns.iter().find(|c| !def.primary_key.contains(c)) {
                    return Err(err(
                        ErrorCode::BadSchema,
                        format!("partition key column {c} is not in the primary key"),
                    ));
                }
                Some(KeyInfo::new(def, columns, &layout))
            }
            _ => None,
        };
        let mut seen: Vec<(&str, IndexId)> = Vec::new();
        for ix in &def.indexes {
            validate_index(def, ix)?;
            if seen.iter().any(|(n, id)| n.eq_ignore_ascii_case(&ix.name) || *id == ix.id) {
                return Err(err(ErrorCode::IndexExists, format!("index {} defined twice", ix.name)));
            }
            seen.push((&ix.name, ix.id));
        }
        // At least 4 rows per page, so a page's slack stays small.
        let max_slot = crate::memory::FIXED_PAGE_BYTES / 4 - crate::fixed_pages::ROW_GCI_BYTES;
        if layout.slot_size > max_slot {
            return Err(err(
                ErrorCode::BadSchema,
                format!("fixed-size part of a row is {} bytes, the limit is {max_slot}", layout.slot_size),
            ));
        }
        let key_layout = {
            let mut kd = def.clone();
            kd.columns = def.primary_key.iter().map(|&c| def.columns[c as usize].clone()).collect();
            RowLayout::new(&kd)
        };
        let mut t = TableStore {
            def: def.clone(),
            pk: KeyInfo::new(def, &def.primary_key, &layout),
            part_key,
            indexes: Vec::new(),
            pk_index: None,
            parts: Vec::new(),
            bytes: 0,
            layout,
            key_layout,
            restoring: false,
        };
        t.def.indexes.clear();
        t.reset_partitions();
        for ix in &def.indexes {
            t.add_index_state(ix.clone());
        }
        Ok(t)
    }

    pub(crate) fn reset_partitions(&mut self) {
        self.parts = (0..self.def.partitions)
            .map(|_| Partition { fixed: Some(FixedPages::new(self.layout.slot_size)), ..Default::default() })
            .collect();
        for ix in &mut self.indexes {
            if let Some(u) = &mut ix.unique {
                *u = UniqueMap::default();
            }
        }
        for ix in &self.indexes {
            if ix.is_ordered() {
                for p in &mut self.parts {
                    p.ordered.insert(ix.def.id, OrderedIndex::default());
                }
            }
        }
        self.bytes = self.compute_footprint();
    }

    pub(crate) fn add_index_state(&mut self, ix: IndexDef) {
        let st = IndexState {
            key: KeyInfo::new(&self.def, &ix.columns, &self.layout),
            unique: ix.unique.then(UniqueMap::default),
            def: ix.clone(),
        };
        if is_pk_order(&self.def, &ix) {
            self.pk_index = Some(st);
        } else {
            if st.is_ordered() {
                for p in &mut self.parts {
                    p.ordered.insert(ix.id, OrderedIndex::default());
                }
            }
            self.indexes.push(st);
        }
        self.def.indexes.push(ix);
    }

    pub fn compute_footprint(&self) -> u64 {
        self.parts.iter().map(|p| p.footprint()).sum::<u64>() + self.unique_footprint()
    }

    pub(crate) fn unique_footprint(&self) -> u64 {
        self.indexes.iter().filter_map(|i| i.unique.as_ref()).map(|u| u.footprint()).sum()
    }

    pub(crate) fn local_footprint(&self, pi: usize) -> u64 {
        self.parts[pi].footprint() + self.unique_footprint()
    }

    pub fn row_count(&self) -> u64 {
        self.parts.iter().map(|p| p.fixed().live_rows()).sum()
    }

    pub fn index(&self, id: IndexId) -> Result<&IndexState, NodeError> {
        self.indexes
            .iter()
            .chain(&self.pk_index)
            .find(|i| i.def.id == id)
            .ok_or_else(|| err(ErrorCode::NoSuchIndex, format!("index id {id} not on table {}", self.def.name)))
    }

    pub fn part_index(&self, p: PartitionId) -> Result<usize, NodeError> {
        if p < self.def.partitions {
            Ok(p as usize)
        } else {
            Err(err(ErrorCode::BadPartition, format!("partition {p} of {} out of range", self.def.partitions)))
        }
    }

    /// Coerce a full row to the table's column types.
    pub fn coerce_full(&self, mut row: Vec<Value>) -> Result<Vec<Value>, NodeError> {
        if row.len() != self.def.columns.len() {
            return Err(err(
                ErrorCode::WrongValueType,
                format!("row has {} values, table {} has {} columns", row.len(), self.def.name, self.def.columns.len()),
            ));
        }
        // In place: no second row vector per insert or update.
        for (v, c) in row.iter_mut().zip(&self.def.columns) {
            let owned = std::mem::replace(v, Value::Null);
            *v = coerce_value(owned, &c.ty, c.nullable)
                .map_err(|e| err(e.code, format!("column {}: {}", c.name, e.message)))?;
        }
        Ok(row)
    }

    /// Coerce the values of a key's columns (no NULLs allowed) and encode them.
    pub fn encode_key_values(&self, key: &KeyInfo, values: &[Value]) -> Result<Vec<u8>, NodeError> {
        if values.len() != key.cols.len() {
            return Err(err(
                ErrorCode::MissingKeyColumn,
                format!("{} key values given, the key has {} columns", values.len(), key.cols.len()),
            ));
        }
        let mut out = Vec::new();
        for ((v, t), c) in values.iter().zip(&key.types).zip(&key.cols) {
            let name = &self.def.columns[*c].name;
            if v.is_null() {
                return Err(err(ErrorCode::MissingKeyColumn, format!("key column {name} is NULL")));
            }
            let cv =
                coerce_value(v.clone(), t, false).map_err(|e| err(e.code, format!("column {name}: {}", e.message)))?;
            encode_value(&mut out, &cv, t);
        }
        Ok(out)
    }

    /// Partition of a row with these primary key values.
    pub fn partition_of_pk(&self, pk_values: &[Value]) -> Result<PartitionId, NodeError> {
        if self.def.partitioning == PartitionScheme::User {
            return Err(err(ErrorCode::MissingPartition, format!("table {} is user-partitioned", self.def.name)));
        }
        let enc = match &self.part_key {
            None => self.encode_key_values(&self.pk, pk_values)?,
            Some(pk) => {
                // Check the whole key, then pick the partition-key columns.
                self.encode_key_values(&self.pk, pk_values)?;
                let vals: Vec<Value> = pk
                    .cols
                    .iter()
                    .map(|c| {
                        let pos = self.pk.cols.iter().position(|p| p == c).expect("validated subset");
                        pk_values[pos].clone()
                    })
                    .collect();
                self.encode_key_values(pk, &vals)?
            }
        };
        Ok(partition_of(&enc, self.def.partitions))
    }

    pub(crate) fn check_placement(&self, p: PartitionId, row: &[Value], pk: &[u8]) -> Result<(), NodeError> {
        if self.def.partitioning == PartitionScheme::User || self.def.partitions == 1 {
            // (One partition: `part_index` checked `p` already.)
            return Ok(());
        }
        let want = match &self.part_key {
            None => partition_of(pk, self.def.partitions),
            Some(k) => partition_of(&k.encoded(row), self.def.partitions),
        };
        if want != p {
            return Err(err(ErrorCode::BadPartition, format!("row belongs in partition {want}, not {p}")));
        }
        Ok(())
    }

    pub fn lookup(&self, pi: usize, pk: &[u8]) -> Option<RowId> {
        let part = &self.parts[pi];
        // Sized for the key at the first candidate: one allocation per
        // lookup that finds one (not a grow per encoded column), none for a
        // key that is not there (an insert, most restored rows).
        let mut buf = Vec::new();
        part.hash.find(pk_hash(pk), |r| {
            if buf.capacity() == 0 {
                buf.reserve_exact(pk.len());
            }
            self.pk.encode_stored(&self.layout, part.fixed(), &part.var, r, &mut buf);
            buf == pk
        })
    }

    pub fn read(&self, pi: usize, row: RowId) -> Vec<Value> {
        let mut out = Vec::new();
        self.read_into(pi, row, &mut out);
        out
    }

    pub fn read_into(&self, pi: usize, row: RowId, out: &mut Vec<Value>) {
        let part = &self.parts[pi];
        let slot = part.fixed().slot(row);
        let payload = self.layout.var_ref(slot).map(|r| part.var.get(r)).unwrap_or(&[]);
        self.layout.read_row(slot, payload, out);
    }

    pub fn read_col(&self, pi: usize, row: RowId, col: usize) -> Value {
        let part = &self.parts[pi];
        let slot = part.fixed().slot(row);
        let payload = self.layout.var_ref(slot).map(|r| part.var.get(r)).unwrap_or(&[]);
        self.layout.read_col(slot, payload, col)
    }

    pub fn is_live(&self, pi: usize, row: RowId) -> bool {
        self.parts[pi].fixed().is_live(row)
    }

    /// `index key ++ pk` entry of an ordered index.
    pub fn ordered_entry(ix: &IndexState, row: &[Value], pk: &[u8]) -> Vec<u8> {
        let mut k = ix.key.encoded(row);
        k.extend_from_slice(pk);
        k
    }

    /// Per index: (unique-map key if the index is unique and the key has no
    /// NULL, ordered entry if the index is ordered).
    pub(crate) fn index_keys(&self, row: &[Value], pk: &[u8]) -> Vec<IndexKeys> {
        self.indexes
            .iter()
            .map(|ix| {
                let mut k = Vec::new();
                let has_null = ix.key.encode_row(row, &mut k);
                let uk = (ix.unique.is_some() && !has_null).then(|| k.clone());
                let ok = ix.is_ordered().then(|| {
                    k.extend_from_slice(pk);
                    k
                });
                (uk, ok)
            })
            .collect()
    }

    pub(crate) fn keys_cost(keys: &[IndexKeys]) -> u64 {
        keys.iter()
            .map(|(u, o)| u.as_ref().map_or(0, |k| entry_cost(k.len())) + o.as_ref().map_or(0, |k| entry_cost(k.len())))
            .sum()
    }

    pub(crate) fn check_unique(&self, keys: &[IndexKeys], me: Option<(PartitionId, RowId)>) -> Result<(), NodeError> {
        for (ix, (uk, _)) in self.indexes.iter().zip(keys) {
            if let (Some(k), Some(map)) = (uk, &ix.unique) {
                if let Some(at) = map.get(k) {
                    if Some(at) != me {
                        return Err(err(
                            ErrorCode::DuplicateUniqueKey,
                            format!("duplicate entry for unique index {}", ix.def.name),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    pub(crate) fn restoring_error(&self) -> NodeError {
        err(
            ErrorCode::Internal,
            format!("table {} is being restored: only restore and redo writes until restore_finish", self.def.name),
        )
    }

    /// The primary key values of a full row.
    pub(crate) fn pk_values(&self, row: &[Value]) -> Vec<Value> {
        self.pk.cols.iter().map(|&c| row[c].clone()).collect()
    }

    pub(crate) fn table_full(&self, need: u64, budget: u64) -> NodeError {
        err(
            ErrorCode::TableFull,
            format!("table {}: operation needs up to {need} bytes of data memory, {budget} free", self.def.name),
        )
    }

    /// Insert a row written by a transaction of GCI `gci`. Returns the row
    /// id and the change of `bytes`.
    pub fn insert(
        &mut self,
        p: PartitionId,
        row: Vec<Value>,
        budget: u64,
        gci: u32,
    ) -> Result<(RowId, i64), NodeError> {
        let pi = self.part_index(p)?;
        if self.restoring {
            return Err(self.restoring_error());
        }
        let row = self.coerce_full(row)?;
        // Sized for the key up front, not grown per encoded byte.
        let mut pk = Vec::with_capacity(16 * self.pk.cols.len());
        if self.pk.encode_row(&row, &mut pk) {
            return Err(err(ErrorCode::MissingKeyColumn, "a primary key column is NULL"));
        }
        self.check_placement(p, &row, &pk)?;
        if self.lookup(pi, &pk).is_some() {
            return Err(err(ErrorCode::DuplicateKey, format!("duplicate primary key in table {}", self.def.name)));
        }
        let keys = self.index_keys(&row, &pk);
        self.check_unique(&keys, None)?;
        let payload = self.layout.var_payload(&row);
        let part = &self.parts[pi];
        let need = part.fixed().alloc_cost()
            + part.var.alloc_cost(payload.len())
            + part.hash.insert_cost()
            + if self.pk_index.is_some() { part.pk_order.insert_cost(pk.len()) } else { 0 }
            + Self::keys_cost(&keys)
            // The row may take a slot of a new page (row ids below one more
            // page's worth).
            + part.sync.as_ref().map_or(0, |s| {
                s.grow_cost(part.fixed().row_id_bound() + u64::from(part.fixed().slots_per_page()))
            });
        if need > budget {
            return Err(self.table_full(need, budget));
        }
        let before = self.local_footprint(pi);
        let layout = &self.layout;
        let pkinfo = &self.pk;
        let Partition { fixed, var, hash, ordered, pk_order, .. } = &mut self.parts[pi];
        let fixed = fixed.as_mut().expect("partition initialised");
        let rowid = fixed.alloc(gci);
        let vref = if layout.var_cols > 0 {
            Some(var.alloc(rowid, &payload, &mut |owner, r| layout.set_var_ref(fixed.slot_mut(owner), r)))
        } else {
            None
        };
        let slot = fixed.slot_mut(rowid);
        layout.write_fixed(&row, slot);
        if let Some(r) = vref {
            layout.set_var_ref(slot, r);
        }
        let buf = std::cell::RefCell::new(Vec::with_capacity(64));
        hash.insert(pk_hash(&pk), rowid, |r| {
            let mut b = buf.borrow_mut();
            pkinfo.encode_stored(layout, fixed, var, r, &mut b);
            pk_hash(&b)
        });
        if self.pk_index.is_some() {
            pk_order.insert(&pk, rowid, &mut |r, b| pkinfo.encode_stored(layout, fixed, var, r, b));
        }
        for (ix, (uk, ok)) in self.indexes.iter_mut().zip(keys) {
            if let Some(k) = ok {
                ordered.get_mut(&ix.def.id).expect("ordered index of partition").insert(&k, rowid);
            }
            if let (Some(k), Some(map)) = (uk, &mut ix.unique) {
                map.insert(&k, (p, rowid));
            }
        }
        self.parts[pi].note_write(rowid, self.layout.slot_size + payload.len(), gci);
        let delta = self.local_footprint(pi) as i64 - before as i64;
        debug_assert!(delta <= need as i64, "insert charged {delta} > estimated {need}");
        self.bytes = (self.bytes as i64 + delta) as u64;
        debug_assert_eq!(self.parts[pi].hash.len() as u64, self.parts[pi].fixed().live_rows());
        Ok((rowid, delta))
    }

    /// Replace a row (same primary key), written by a transaction of GCI
    /// `gci`. Returns the change of `bytes`.
    pub fn update(
        &mut self,
        p: PartitionId,
        rowid: RowId,
        new_row: Vec<Value>,
        budget: u64,
        gci: u32,
    ) -> Result<i64, NodeError> {
        let pi = self.part_index(p)?;
        if !self.is_live(pi, rowid) {
            return Err(err(ErrorCode::NoSuchRow, format!("row {rowid} of partition {p} does not exist")));
        }
        if self.restoring {
            return Err(self.restoring_error());
        }
        let new_row = self.coerce_full(new_row)?;
        // The stored key, encoded straight from the row; the whole old row is
        // decoded only when there are index keys to compare.
        let mut pk = Vec::with_capacity(16 * self.pk.cols.len());
        {
            let part = &self.parts[pi];
            self.pk.encode_stored(&self.layout, part.fixed(), &part.var, rowid, &mut pk);
        }
        let old_row = if self.indexes.is_empty() { Vec::new() } else { self.read(pi, rowid) };
        if self.pk.encoded(&new_row) != pk {
            return Err(err(ErrorCode::KeyUpdateNotAllowed, "update changes the primary key"));
        }
        let old_keys = self.index_keys(&old_row, &pk);
        let new_keys = self.index_keys(&new_row, &pk);
        // Unchanged index keys need no work.
        let changed: Vec<bool> = old_keys.iter().zip(&new_keys).map(|(o, n)| o != n).collect();
        self.check_unique(&new_keys, Some((p, rowid)))?;
        let keys_need: u64 = new_keys
            .iter()
            .zip(&changed)
            .filter(|(_, c)| **c)
            .map(|(k, _)| Self::keys_cost(std::slice::from_ref(k)))
            .sum();
        let payload = self.layout.var_payload(&new_row);
        let part = &self.parts[pi];
        let old_ref = self.layout.var_ref(part.fixed().slot(rowid));
        let old_len = old_ref.map_or(0, |r| part.var.get(r).len());
        let in_place = old_len == payload.len();
        let need = if in_place { 0 } else { part.var.alloc_cost(payload.len()) } + keys_need;
        if need > budget {
            return Err(self.table_full(need, budget));
        }
        let before = self.local_footprint(pi);
        let layout = &self.layout;
        let Partition { fixed, var, ordered, .. } = &mut self.parts[pi];
        let fixed = fixed.as_mut().expect("partition initialised");
        let vref = match old_ref {
            None => None,
            Some(r) if in_place => {
                if !r.is_none() {
                    var.overwrite(r, &payload);
                }
                Some(r)
            }
            Some(r) => {
                var.free(r);
                Some(var.alloc(rowid, &payload, &mut |owner, nr| layout.set_var_ref(fixed.slot_mut(owner), nr)))
            }
        };
        let slot = fixed.slot_mut(rowid);
        layout.write_fixed(&new_row, slot);
        if let Some(r) = vref {
            layout.set_var_ref(slot, r);
        }
        fixed.set_gci(rowid, gci);
        for (i, ix) in self.indexes.iter_mut().enumerate() {
            if !changed[i] {
                continue;
            }
            let (old_u, old_o) = &old_keys[i];
            let (new_u, new_o) = &new_keys[i];
            if let Some(ord) = ordered.get_mut(&ix.def.id) {
                if let Some(k) = old_o {
                    ord.remove(k);
                }
                if let Some(k) = new_o {
                    ord.insert(k, rowid);
                }
            }
            if let Some(map) = &mut ix.unique {
                if let Some(k) = old_u {
                    map.remove(k);
                }
                if let Some(k) = new_u {
                    map.insert(k, (p, rowid));
                }
            }
        }
        self.parts[pi].note_write(rowid, self.layout.slot_size + payload.len(), gci);
        let delta = self.local_footprint(pi) as i64 - before as i64;
        debug_assert!(delta <= need as i64, "update charged {delta} > estimated {need}");
        self.bytes = (self.bytes as i64 + delta) as u64;
        Ok(delta)
    }

    /// Delete a live row, deleted by a transaction of GCI `gci` (the GCI
    /// of its tombstone). Returns the change of `bytes` (a tombstone can
    /// make it positive). While restoring, indexes are not touched (they are
    /// empty until `restore_finish` builds them).
    pub fn delete(&mut self, p: PartitionId, rowid: RowId, gci: u32) -> i64 {
        let pi = self.part_index(p).expect("delete: partition out of range");
        assert!(self.is_live(pi, rowid), "delete of dead row {rowid} in partition {p}");
        let row = self.read(pi, rowid);
        let pk = self.pk.encoded(&row);
        let keys = if self.restoring { Vec::new() } else { self.index_keys(&row, &pk) };
        let before = self.local_footprint(pi);
        self.record_tombstone(pi, rowid, &row, gci);
        let layout = &self.layout;
        let pkinfo = &self.pk;
        let Partition { fixed, var, hash, ordered, pk_order, .. } = &mut self.parts[pi];
        let fixed = fixed.as_mut().expect("partition initialised");
        assert!(hash.remove(pk_hash(&pk), rowid), "row {rowid} missing from the hash index");
        if self.pk_index.is_some() && !self.restoring {
            let found = pk_order.remove(&pk, &mut |r, b| pkinfo.encode_stored(layout, fixed, var, r, b));
            assert!(found, "row {rowid} missing from the primary key order");
        }
        for (ix, (uk, ok)) in self.indexes.iter_mut().zip(keys) {
            if let Some(k) = ok {
                ordered.get_mut(&ix.def.id).expect("ordered index of partition").remove(&k);
            }
            if let (Some(k), Some(map)) = (uk, &mut ix.unique) {
                map.remove(&k);
            }
        }
        if let Some(r) = layout.var_ref(fixed.slot(rowid)) {
            var.free(r);
        }
        fixed.free(rowid);
        let part = &mut self.parts[pi];
        part.lcp.note_write(pk.len(), None);
        if let Some(m) = &mut part.sync {
            m.unmark(rowid);
        }
        let delta = self.local_footprint(pi) as i64 - before as i64;
        self.bytes = (self.bytes as i64 + delta) as u64;
        debug_assert_eq!(self.parts[pi].hash.len() as u64, self.parts[pi].fixed().live_rows());
        delta
    }

    /// If the partition has a checkpoint chain, remember that the row at
    /// `rowid` (whose full image is `row`) leaves its checkpoint part.
    pub(crate) fn record_tombstone(&mut self, pi: usize, rowid: RowId, row: &[Value], gci: u32) {
        if !self.parts[pi].lcp.chain {
            return;
        }
        let key = self.pk_values(row);
        let lcp_part = self.parts[pi].fixed().part_of(rowid);
        let layout = &self.key_layout;
        self.parts[pi].lcp.tombstones.push(layout, lcp_part, gci, &key);
    }

    /// Empty every partition (keeping the definition and its indexes). The
    /// partitions' checkpoint chains end: the next checkpoint writes every
    /// part.
    pub fn truncate(&mut self) {
        self.reset_partitions();
    }
}
