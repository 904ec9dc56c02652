//! Key columns of a table (primary key, index keys): encoding them from a full
//! row or straight from a stored row.

use crate::fixed_pages::{FixedPages, RowId};
use crate::row_format::{IntKeyCol, RowLayout};
use crate::var_storage::VarStore;
use norr_signals::keycode::encode_value;
use norr_signals::value::{ColumnType, Value};
use norr_signals::TableDef;

/// Columns and types of a key (primary key or index).
#[derive(Debug, Clone)]
pub struct KeyInfo {
    pub cols: Vec<usize>,
    pub types: Vec<ColumnType>,
    /// Some key column lives in the var part.
    needs_var: bool,
    /// Some when every key column is a fixed-width integer (the usual
    /// primary key): `encode_stored` then builds the key from slot bytes
    /// without dispatching on column types.
    ints: Option<Vec<IntKeyCol>>,
}

impl KeyInfo {
    /// `layout` is the table's row layout (the one `encode_stored` is later
    /// given).
    pub(crate) fn new(def: &TableDef, cols: &[u16], layout: &RowLayout) -> KeyInfo {
        let types: Vec<ColumnType> = cols.iter().map(|&c| def.columns[c as usize].ty.clone()).collect();
        KeyInfo {
            cols: cols.iter().map(|&c| c as usize).collect(),
            needs_var: types.iter().any(|t| t.is_bytes() && !matches!(t, ColumnType::Binary { .. })),
            types,
            ints: cols.iter().map(|&c| layout.int_key_col(c as usize)).collect(),
        }
    }

    /// The key's column if it is a single fixed-width integer column.
    pub(crate) fn single_int(&self) -> Option<IntKeyCol> {
        match self.ints.as_deref() {
            Some([c]) => Some(*c),
            _ => None,
        }
    }

    /// Encode the key columns of a full row; also tells whether one was NULL.
    pub fn encode_row(&self, row: &[Value], out: &mut Vec<u8>) -> bool {
        let mut has_null = false;
        for (c, t) in self.cols.iter().zip(&self.types) {
            has_null |= row[*c].is_null();
            encode_value(out, &row[*c], t);
        }
        has_null
    }

    pub fn encoded(&self, row: &[Value]) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 * self.cols.len());
        self.encode_row(row, &mut out);
        out
    }

    /// Encode the key columns of a stored row into `out` (cleared first),
    /// reading only those columns (the var part only if a key column is there).
    /// Hot: the hash index calls it for every row it rehashes when it grows.
    pub(crate) fn encode_stored(
        &self,
        layout: &RowLayout,
        fixed: &FixedPages,
        var: &VarStore,
        row: RowId,
        out: &mut Vec<u8>,
    ) {
        self.encode_slot(layout, fixed.slot(row), var, out);
    }

    /// `encode_stored` of a row whose slot the caller has at hand already
    /// (a scan that reads the row too: one slot lookup per row, not two).
    pub(crate) fn encode_slot(&self, layout: &RowLayout, slot: &[u8], var: &VarStore, out: &mut Vec<u8>) {
        out.clear();
        if let Some(ints) = &self.ints {
            for c in ints {
                c.put(slot, out);
            }
            return;
        }
        let payload = if self.needs_var { layout.var_ref(slot).map(|r| var.get(r)).unwrap_or(&[]) } else { &[] };
        for (c, t) in self.cols.iter().zip(&self.types) {
            layout.encode_key_col(slot, payload, *c, t, out);
        }
    }
}
