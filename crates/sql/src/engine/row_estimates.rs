//! EXPLAIN's `rows` and `filtered` for one table access, from the table's
//! statistics (`index_stats`). Owner: query engineer.
//!
//! `rows` is what the access reads per execution (per outer row for a join
//! lookup), as MySQL's column:
//! - key lookups read their keys: 1 per key of a whole primary or unique
//!   key (exact, from the statement's values);
//! - a lookup of `k` equal columns of an index (`ref`, IN lists on an index
//!   prefix) reads the index's rows per key of that prefix for each key;
//! - a range reads the rows of its equality prefix (or the whole table),
//!   times a third for each bounded side of the range (no histograms are
//!   kept: MySQL's guess for a range it cannot measure is a third too);
//! - a full scan reads the table's rows.
//!
//! `filtered` is the percentage of those rows expected to pass the table's
//! other conditions (the ones the access does not decide; none for a
//! `const` access, whose row MySQL reads while planning): an equality
//! keeps the rows of one value of the column (from an index that starts
//! with it, else a tenth, as MySQL guesses without statistics), a range
//! comparison a third, BETWEEN and LIKE a ninth; AND multiplies, OR and NOT
//! combine as probabilities; anything else keeps every row.

use crate::engine::expr::{collect_cols, CExpr, CmpKind};
use crate::engine::index_stats::TableEstimate;
use crate::engine::plan::{self, Access};
use crate::engine::query::{JoinLookup, TableAccess};
use norr_signals::{ColumnId, IndexId, TableDef};

/// Share of rows a bounded side of a range keeps.
const RANGE_SIDE: f64 = 1.0 / 3.0;
/// An equality on a column without statistics.
const EQ_GUESS: f64 = 0.1;
/// BETWEEN and LIKE.
const BETWEEN: f64 = 1.0 / 9.0;

/// Rows the access reads, from statistics; None without them (or for an
/// access the caller counts exactly).
pub fn access_rows(ta: &TableAccess, lookup: Option<&JoinLookup>, est: &TableEstimate) -> Option<u64> {
    let def = &ta.table.def;
    let rows = est.rows as f64;
    let pk_index = || plan::pk_ordered_index(def).map(|ix| ix.id);
    let n = match (&ta.access, lookup) {
        (_, Some(l)) if !l.range => 1.0,
        (_, Some(l)) => est.rows_for_key(l.index.or_else(pk_index)?, l.cols.len())?,
        (Access::IndexKeys { index, keys, .. }, _) => {
            keys.iter().map(|k| est.rows_for_key(*index, k.len()).unwrap_or(rows)).sum::<f64>().min(rows)
        }
        (Access::IndexRange { index, eq, low, high, .. }, _) => {
            let base = if eq.is_empty() { rows } else { est.rows_for_key(*index, eq.len())? };
            base * RANGE_SIDE.powi(low.is_some() as i32 + high.is_some() as i32)
        }
        (Access::PkRange { .. }, _) => rows * RANGE_SIDE * RANGE_SIDE,
        (Access::FullScan, _) => rows,
        (Access::PkLookup { .. } | Access::UniqueLookup { .. }, _) => return None,
    };
    // At least one: InnoDB reports an empty table as one row (so that the
    // optimizer never plans on a table staying empty), and MySQL's EXPLAIN
    // shows that.
    Some((n.ceil() as u64).max(1))
}

/// The columns whose conditions the access decides by itself.
fn decided_columns(def: &TableDef, ta: &TableAccess, lookup: Option<&JoinLookup>) -> Vec<ColumnId> {
    let index_cols = |ix: IndexId, n: usize| -> Vec<ColumnId> {
        def.index(ix).map(|i| i.columns.iter().take(n).copied().collect()).unwrap_or_default()
    };
    if let Some(l) = lookup {
        return l.cols.clone();
    }
    match &ta.access {
        Access::PkLookup { .. } | Access::PkRange { .. } => def.primary_key.clone(),
        Access::UniqueLookup { index, .. } => index_cols(*index, usize::MAX),
        Access::IndexKeys { index, keys, .. } => index_cols(*index, keys.iter().map(Vec::len).max().unwrap_or(0)),
        Access::IndexRange { index, eq, low, high, .. } => {
            index_cols(*index, eq.len() + (low.is_some() || high.is_some()) as usize)
        }
        Access::FullScan => Vec::new(),
    }
}

/// EXPLAIN's `filtered` (a percentage, two decimals).
pub fn filtered(ta: &TableAccess, lookup: Option<&JoinLookup>, est: Option<&TableEstimate>) -> f64 {
    if lookup.is_none() && const_access(&ta.access) {
        // MySQL reads a `const` table's one row while it plans, and its
        // other conditions are then constants: nothing is left to filter.
        return 100.0;
    }
    let def = &ta.table.def;
    let decided = decided_columns(def, ta, lookup);
    let mut keep = 1.0;
    for c in &ta.local {
        let mut cols = Vec::new();
        collect_cols(c, &mut cols);
        if !cols.is_empty() && cols.iter().all(|x| decided.contains(&(*x as ColumnId))) {
            continue;
        }
        keep *= selectivity(c, def, est);
    }
    (keep.clamp(0.0, 1.0) * 10_000.0).round() / 100.0
}

/// One whole primary or unique key: EXPLAIN's `const` (see `explain::access_row`).
fn const_access(a: &Access) -> bool {
    matches!(a, Access::PkLookup { keys } | Access::UniqueLookup { keys, .. } if keys.len() == 1)
}

/// Whether `e` is a value fixed for the statement (no column of the row).
fn constant(e: &CExpr) -> bool {
    let mut cols = Vec::new();
    collect_cols(e, &mut cols);
    cols.is_empty()
}

/// The column `x op value` or `value op x` compares.
fn column_vs_value<'a>(a: &'a CExpr, b: &'a CExpr) -> Option<usize> {
    match (a, b) {
        (CExpr::Col(c), v) | (v, CExpr::Col(c)) if constant(v) => Some(*c),
        _ => None,
    }
}

/// Share of rows with one value of column `col`: from an index starting
/// with it, else the guess.
fn equality(col: usize, def: &TableDef, est: Option<&TableEstimate>) -> f64 {
    let Some(est) = est.filter(|e| e.rows > 0) else { return EQ_GUESS };
    def.indexes
        .iter()
        .filter(|ix| ix.columns.first().is_some_and(|c| *c as usize == col))
        .find_map(|ix| est.rows_for_key(ix.id, 1))
        .map_or(EQ_GUESS, |per_key| per_key / est.rows as f64)
}

fn selectivity(e: &CExpr, def: &TableDef, est: Option<&TableEstimate>) -> f64 {
    let p = match e {
        CExpr::And(a, b) => selectivity(a, def, est) * selectivity(b, def, est),
        CExpr::Or(a, b) => {
            let (x, y) = (selectivity(a, def, est), selectivity(b, def, est));
            x + y - x * y
        }
        CExpr::Not(x) => 1.0 - selectivity(x, def, est),
        CExpr::Cmp(op, a, b, _) => match (op, column_vs_value(a, b)) {
            (CmpKind::Eq, Some(c)) => equality(c, def, est),
            (CmpKind::Ne, Some(c)) => 1.0 - equality(c, def, est),
            (_, Some(_)) => RANGE_SIDE,
            (_, None) => 1.0,
        },
        CExpr::NullSafeEq(a, b, _) => column_vs_value(a, b).map_or(1.0, |c| equality(c, def, est)),
        CExpr::InList { expr, list, negated, .. } => match expr.as_ref() {
            CExpr::Col(c) if list.iter().all(constant) => {
                let p = (list.len() as f64 * equality(*c, def, est)).min(1.0);
                if *negated {
                    1.0 - p
                } else {
                    p
                }
            }
            _ => 1.0,
        },
        CExpr::Between { expr, low, high, negated, .. }
            if matches!(expr.as_ref(), CExpr::Col(_)) && constant(low) && constant(high) =>
        {
            if *negated {
                1.0 - BETWEEN
            } else {
                BETWEEN
            }
        }
        CExpr::Like { expr, negated, .. } if matches!(expr.as_ref(), CExpr::Col(_)) => {
            if *negated {
                1.0 - BETWEEN
            } else {
                BETWEEN
            }
        }
        _ => 1.0,
    };
    p.clamp(0.0, 1.0)
}
