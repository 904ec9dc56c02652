//! Table DDL on stored data (building and dropping indexes), memory estimates
//! for `reserve_check`, and the consistency check used by tests.

use crate::memory::entry_cost;
use crate::ordered_index::{OrderedIndex, UniqueMap};
use crate::pk_order::PkOrder;
use crate::table_store::{err, is_pk_order, validate_index, KeyInfo, TableStore};
use norr_signals::schema::{IndexDef, IndexKind};
use norr_signals::value::Value;
use norr_signals::{ErrorCode, IndexId, NodeError, PartitionId};

impl TableStore {
    /// Add an index built from the existing rows. Returns the change of `bytes`.
    pub fn create_index(&mut self, ix: &IndexDef, budget: u64) -> Result<i64, NodeError> {
        validate_index(&self.def, ix)?;
        if self
            .indexes
            .iter()
            .chain(&self.pk_index)
            .any(|i| i.def.id == ix.id || i.def.name.eq_ignore_ascii_case(&ix.name))
        {
            return Err(err(ErrorCode::IndexExists, format!("index {} (id {}) exists", ix.name, ix.id)));
        }
        if is_pk_order(&self.def, ix) {
            if self.pk_index.is_some() {
                return Err(err(
                    ErrorCode::IndexExists,
                    format!("an ordered index on the primary key exists ({})", ix.name),
                ));
            }
            return self.create_pk_order(ix, budget);
        }
        let key = KeyInfo::new(&self.def, &ix.columns, &self.layout);
        let ordered_kind = ix.kind == IndexKind::Ordered;
        let mut unique = ix.unique.then(UniqueMap::default);
        let mut per_part: Vec<OrderedIndex> = Vec::new();
        let mut need = 0u64;
        for (pi, part) in self.parts.iter().enumerate() {
            let mut ord = OrderedIndex::default();
            let mut next = 0u64;
            while let Some(r) = part.fixed().next_live(next) {
                next = r as u64 + 1;
                let row = self.read(pi, r);
                let mut k = Vec::new();
                let has_null = key.encode_row(&row, &mut k);
                if let (Some(map), false) = (&mut unique, has_null) {
                    if map.get(&k).is_some() {
                        return Err(err(
                            ErrorCode::DuplicateUniqueKey,
                            format!("existing rows violate unique index {}", ix.name),
                        ));
                    }
                    need += entry_cost(k.len());
                    map.insert(&k, (pi as PartitionId, r));
                }
                if ordered_kind {
                    k.extend_from_slice(&self.pk.encoded(&row));
                    need += entry_cost(k.len());
                    ord.insert(&k, r);
                }
            }
            per_part.push(ord);
        }
        if need > budget {
            return Err(self.table_full(need, budget));
        }
        let before = self.bytes;
        self.add_index_state(ix.clone());
        let st = self.indexes.last_mut().expect("just added");
        st.unique = unique;
        if ordered_kind {
            for (part, ord) in self.parts.iter_mut().zip(per_part) {
                part.ordered.insert(ix.id, ord);
            }
        }
        self.bytes = self.compute_footprint();
        Ok(self.bytes as i64 - before as i64)
    }

    /// Build the primary-key order of every partition from its rows.
    fn create_pk_order(&mut self, ix: &IndexDef, budget: u64) -> Result<i64, NodeError> {
        let mut built = Vec::with_capacity(self.parts.len());
        let mut need = 0u64;
        for part in &self.parts {
            let mut order = PkOrder::default();
            let (fixed, var) = (part.fixed(), &part.var);
            let mut enc = |r, b: &mut Vec<u8>| self.pk.encode_stored(&self.layout, fixed, var, r, b);
            let mut pk = Vec::new();
            let mut next = 0u64;
            while let Some(r) = fixed.next_live(next) {
                next = r as u64 + 1;
                enc(r, &mut pk);
                order.insert(&pk, r, &mut enc);
            }
            need += order.footprint();
            built.push(order);
        }
        if need > budget {
            return Err(self.table_full(need, budget));
        }
        let before = self.bytes;
        self.add_index_state(ix.clone());
        for (part, order) in self.parts.iter_mut().zip(built) {
            part.pk_order = order;
        }
        self.bytes = self.compute_footprint();
        Ok(self.bytes as i64 - before as i64)
    }

    /// Remove an index. Returns the change of `bytes`.
    pub fn drop_index(&mut self, id: IndexId) -> Result<i64, NodeError> {
        if self.pk_index.as_ref().is_some_and(|i| i.def.id == id) {
            self.pk_index = None;
            self.def.indexes.retain(|i| i.id != id);
            for p in &mut self.parts {
                p.pk_order = PkOrder::default();
            }
            let before = self.bytes;
            self.bytes = self.compute_footprint();
            return Ok(self.bytes as i64 - before as i64);
        }
        let pos = self
            .indexes
            .iter()
            .position(|i| i.def.id == id)
            .ok_or_else(|| err(ErrorCode::NoSuchIndex, format!("index id {id} not on table {}", self.def.name)))?;
        self.indexes.remove(pos);
        self.def.indexes.retain(|i| i.id != id);
        for p in &mut self.parts {
            p.ordered.remove(&id);
        }
        let before = self.bytes;
        self.bytes = self.compute_footprint();
        Ok(self.bytes as i64 - before as i64)
    }

    /// Upper bound of the memory inserting `row` into the fullest-looking
    /// partition could take (`reserve_check`).
    pub fn insert_cost_estimate(&self, row: &[Value]) -> u64 {
        let payload_len: usize = self
            .layout
            .var_col_ids
            .iter()
            .map(|&c| row.get(c).and_then(|v| v.as_bytes()).map_or(0, |b| b.len() + 10))
            .sum();
        let worst = self
            .parts
            .iter()
            .map(|p| p.fixed().alloc_cost() + p.var.alloc_cost(payload_len) + p.hash.insert_cost())
            .max()
            .unwrap_or(0);
        let pk_order = match &self.pk_index {
            Some(_) => self.parts.iter().map(|p| p.pk_order.insert_cost(self.pk.types.len() * 16)).max().unwrap_or(0),
            None => 0,
        };
        let keys: u64 = self
            .indexes
            .iter()
            .map(|ix| {
                let k = ix.key.types.len() as u64 * 16
                    + ix.key
                        .cols
                        .iter()
                        .map(|&c| row.get(c).and_then(|v| v.as_bytes()).map_or(0, |b| b.len() as u64))
                        .sum::<u64>();
                let pk = self.pk.types.len() as u64 * 16;
                (if ix.unique.is_some() { entry_cost(k as usize) } else { 0 })
                    + if ix.is_ordered() { entry_cost((k + pk) as usize) } else { 0 }
            })
            .sum();
        worst + pk_order + keys
    }

    /// Check internal consistency (tests; cheap enough for debug runs of small
    /// tables). Panics on corruption.
    pub fn check_invariants(&self) {
        let mut unique_counts = vec![0usize; self.indexes.len()];
        for (pi, part) in self.parts.iter().enumerate() {
            let fixed = part.fixed();
            fixed.check_invariants();
            assert_eq!(part.hash.len() as u64, fixed.live_rows(), "partition {pi}: hash index size != rows");
            let mut chunks = 0;
            let mut next = 0u64;
            while let Some(r) = fixed.next_live(next) {
                next = r as u64 + 1;
                let row = self.read(pi, r);
                let pk = self.pk.encoded(&row);
                assert_eq!(self.lookup(pi, &pk), Some(r), "partition {pi}: row {r} not found by its key");
                if let Some(vr) = self.layout.var_ref(fixed.slot(r)) {
                    chunks += u64::from(!vr.is_none());
                }
                if self.restoring {
                    continue;
                }
                for (i, (ix, (uk, ok))) in self.indexes.iter().zip(self.index_keys(&row, &pk)).enumerate() {
                    if let Some(k) = ok {
                        assert_eq!(
                            part.ordered[&ix.def.id].map.get(k.as_slice()),
                            Some(&r),
                            "ordered index {} entry",
                            ix.def.name
                        );
                    }
                    if let (Some(k), Some(map)) = (uk, &ix.unique) {
                        assert_eq!(map.get(&k), Some((pi as PartitionId, r)), "unique index {} entry", ix.def.name);
                        unique_counts[i] += 1;
                    }
                }
            }
            assert_eq!(chunks, part.var.chunks(), "partition {pi}: var chunk count");
            if self.restoring {
                // Restore mode: secondary structures are empty until
                // restore_finish builds them.
                assert!(part.pk_order.is_empty(), "partition {pi}: primary key order filled while restoring");
                assert!(
                    part.ordered.values().all(|o| o.map.is_empty()),
                    "partition {pi}: ordered index while restoring"
                );
                continue;
            }
            if self.pk_index.is_some() {
                let var = &part.var;
                part.pk_order.check_invariants(&mut |r, b| self.pk.encode_stored(&self.layout, fixed, var, r, b));
                assert_eq!(part.pk_order.len() as u64, fixed.live_rows(), "partition {pi}: primary key order size");
            } else {
                assert!(part.pk_order.is_empty());
            }
            for ix in &self.indexes {
                if ix.is_ordered() {
                    assert_eq!(part.ordered[&ix.def.id].map.len() as u64, fixed.live_rows());
                }
            }
        }
        for (ix, n) in self.indexes.iter().zip(unique_counts) {
            if let Some(map) = &ix.unique {
                assert_eq!(map.map.len(), n, "unique index {} size", ix.def.name);
            }
        }
        self.check_lcp_invariants();
        assert_eq!(self.bytes, self.compute_footprint(), "table byte count drifted");
    }
}
