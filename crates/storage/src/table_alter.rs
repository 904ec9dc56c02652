//! ALTER TABLE on stored data: the new definition's rows are built aside
//! (`TableStore::rebuild`) while the old ones stay readable, so a conversion
//! error or a memory shortage leaves the table exactly as it was; the caller
//! then switches to the copy or drops it (`Storage::alter_commit` /
//! `alter_discard`). A change that keeps the stored layout (renames, new
//! defaults) needs no copy (`TableStore::same_layout`).
//!
//! Rows keep their partition: the primary key and the partitioning must keep
//! their encoding (the dictionary checks that; `insert`'s placement check
//! would refuse a row that moved).

use crate::table_store::{err, TableStore};
use norr_signals::value::Value;
use norr_signals::{ColumnSource, ErrorCode, NodeError, PartitionId, TableDef};

/// A change prepared for one table.
pub(crate) enum Staged {
    /// Same layout: only the definition changes.
    Redefine(TableDef),
    /// The rows in the new layout (its `bytes` are charged already).
    Rebuilt(Box<TableStore>),
}

impl TableStore {
    /// True if `def` stores rows exactly as the current definition does:
    /// every column comes from the same position with the same type and
    /// nullability, and the key, partitioning and indexes are the same.
    pub(crate) fn same_layout(&self, def: &TableDef, sources: &[ColumnSource]) -> bool {
        let old = &self.def;
        let columns_same = def.columns.len() == old.columns.len()
            && sources.len() == def.columns.len()
            && sources.iter().enumerate().all(|(i, s)| *s == ColumnSource::Old(i as u16))
            && def.columns.iter().zip(&old.columns).all(|(n, o)| n.ty == o.ty && n.nullable == o.nullable);
        let key = |i: &norr_signals::IndexDef| (i.id, i.columns.clone(), i.unique, i.kind);
        let mut a: Vec<_> = def.indexes.iter().map(key).collect();
        let mut b: Vec<_> = old.indexes.iter().map(key).collect();
        a.sort_by_key(|k| k.0);
        b.sort_by_key(|k| k.0);
        columns_same
            && a == b
            && def.primary_key == old.primary_key
            && def.partitioning == old.partitioning
            && def.partitions == old.partitions
    }

    /// The rows of this table in the layout of `def`: column i of each new
    /// row comes from `sources[i]`, converted by `insert`'s checks. `budget`:
    /// free data memory for the copy. Errors name the row (its ordinal in
    /// this store's scan order, from 1) and the column.
    pub(crate) fn rebuild(
        &self,
        def: &TableDef,
        sources: &[ColumnSource],
        budget: u64,
        gci: u32,
    ) -> Result<TableStore, NodeError> {
        if sources.len() != def.columns.len() {
            return Err(err(
                ErrorCode::BadSchema,
                format!("{} column sources for {} columns", sources.len(), def.columns.len()),
            ));
        }
        if let Some(ColumnSource::Old(c)) =
            sources.iter().find(|s| matches!(s, ColumnSource::Old(c) if *c as usize >= self.def.columns.len()))
        {
            return Err(err(ErrorCode::BadSchema, format!("column source {c} is not a column of the table")));
        }
        if def.partitions != self.def.partitions {
            return Err(err(ErrorCode::BadSchema, "ALTER TABLE cannot change the number of partitions"));
        }
        let mut new = TableStore::new(def)?;
        if new.bytes > budget {
            return Err(new.table_full(new.bytes, budget));
        }
        let mut row_no = 0u64;
        let mut old_row = Vec::new();
        for (pi, part) in self.parts.iter().enumerate() {
            let mut next = 0u64;
            while let Some(r) = part.fixed().next_live(next) {
                next = r as u64 + 1;
                row_no += 1;
                old_row.clear();
                self.read_into(pi, r, &mut old_row);
                let row: Vec<Value> = sources
                    .iter()
                    .map(|s| match s {
                        ColumnSource::Old(c) => std::mem::replace(&mut old_row[*c as usize], Value::Null),
                        ColumnSource::Value(v) => v.clone(),
                    })
                    .collect();
                let left = budget.saturating_sub(new.bytes);
                new.insert(pi as PartitionId, row, left, gci)
                    .map_err(|e| err(e.code, format!("row {row_no}: {}", e.message)))?;
            }
        }
        debug_assert_eq!(new.row_count(), self.row_count());
        Ok(new)
    }
}
