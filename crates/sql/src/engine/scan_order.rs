//! Whether a statement needs its index range scans in index order.
//!
//! The data node merges the partitions' streams of an index scan into index
//! order only when asked (`ScanSpec::ordered`); an unordered scan is cheaper
//! (no merge at TC, no key per row at LQH). A SELECT without ORDER BY shows
//! its rows in scan order, which users expect to be index order (InnoDB
//! gives pk order for `WHERE id BETWEEN`), so such scans stay ordered. A
//! statement whose result does not depend on the order its rows arrive in
//! scans unordered. Rows that are equal under the ordering collation may
//! still come out in another order (as in MySQL, where their order is
//! unspecified); values never differ. When unsure, keep the order.

use crate::engine::expr::collect_cols;
use crate::engine::expr::compile::{AggKind, AggSpec};
use crate::engine::expr::{CExpr, TClass};
use crate::engine::query::{AggPlan, SelectPlan};

/// Whether the scans of this SELECT's own tables must return rows in index
/// order.
pub fn select_needs_scan_order(p: &SelectPlan) -> bool {
    // ROW_NUMBER and friends number peers in arrival order.
    if !p.windows.is_empty() {
        return true;
    }
    match &p.agg {
        // The output is sorted afterwards (DISTINCT keeps the first of equal
        // rows, equal under the sort too).
        None => p.order.is_empty(),
        Some(a) => !aggregate_is_order_free(p, a),
    }
}

/// UPDATE / DELETE: the rows to change in index order unless every matching
/// row is deleted. A LIMIT picks the first rows (in ORDER BY order, ties in
/// index order); an UPDATE applies row by row, so which row fails first (its
/// error names it) or meets a duplicate key first depends on the order.
pub fn row_stmt_needs_scan_order(has_limit: bool, is_update: bool) -> bool {
    has_limit || is_update
}

/// An aggregating SELECT whose result is the same whatever order its rows
/// arrive in: groups come out sorted (or there is one), every aggregate is
/// insensitive to input order, and nothing reads a group's first row except
/// through a GROUP BY column (equal for the whole group).
fn aggregate_is_order_free(p: &SelectPlan, a: &AggPlan) -> bool {
    // Groups come out in the order they are first met.
    if !a.group_by.is_empty() && p.order.is_empty() {
        return false;
    }
    if !a.aggs.iter().all(aggregate_ignores_order) {
        return false;
    }
    let grouped = |i: usize| a.group_by.iter().any(|g| matches!(g, CExpr::Col(j) if *j == i));
    let exprs = p.proj.iter().chain(&p.having).chain(p.order.iter().map(|o| &o.expr));
    let mut cols = Vec::new();
    for e in exprs {
        collect_cols(e, &mut cols);
    }
    // Offsets below the joined row's width read the group's first row;
    // aggregate values come after it.
    cols.iter().all(|&i| i >= p.width || grouped(i))
}

/// Whether an aggregate's value does not depend on the order of its input.
fn aggregate_ignores_order(a: &AggSpec) -> bool {
    match a.kind {
        AggKind::CountStar
        | AggKind::Count
        | AggKind::BitAnd
        | AggKind::BitOr
        | AggKind::BitXor
        | AggKind::Min
        | AggKind::Max => true,
        // Exact sums; a floating-point sum rounds differently in another order.
        AggKind::Sum | AggKind::Avg => a.ty.class != TClass::Double,
        // Pieces in input order (ties of its ORDER BY too).
        AggKind::GroupConcat => false,
        // Elements in input order; the last duplicate key wins.
        AggKind::JsonArrayAgg | AggKind::JsonObjectAgg => false,
        // Running floating-point figures.
        AggKind::StdPop | AggKind::StdSamp | AggKind::VarPop | AggKind::VarSamp => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::expr::value::Coll;
    use crate::engine::expr::SqlType;
    use crate::engine::query::OrderKey;

    /// A one-table SELECT over a joined row of width 3; aggregate values
    /// follow at offsets 3, 4, ...
    fn plan(agg: Option<AggPlan>, proj: Vec<CExpr>, order: Vec<usize>, distinct: bool) -> SelectPlan {
        SelectPlan {
            sources: Vec::new(),
            width: 3,
            filter: Vec::new(),
            agg,
            having: None,
            proj,
            columns: Vec::new(),
            types: Vec::new(),
            distinct,
            order: order.into_iter().map(|i| OrderKey { expr: CExpr::Col(i), desc: false, coll: Coll::Ci }).collect(),
            limit: None,
            offset: None,
            lock: crate::engine::row_lock::RowLock::NONE,
            correlated: Vec::new(),
            windows: Vec::new(),
            nests: Vec::new(),
            waits: false,
        }
    }

    fn agg(kind: AggKind, class: TClass) -> AggSpec {
        AggSpec {
            kind,
            arg: Some(CExpr::Col(1)),
            distinct: false,
            coll: Coll::Ci,
            ty: SqlType::new(class),
            order: Vec::new(),
            separator: b",".to_vec(),
        }
    }

    fn aggs(group_by: Vec<usize>, aggs: Vec<AggSpec>) -> Option<AggPlan> {
        let n = group_by.len();
        Some(AggPlan {
            group_by: group_by.into_iter().map(CExpr::Col).collect(),
            group_colls: vec![Coll::Ci; n],
            aggs,
            rollup: None,
        })
    }

    #[test]
    fn plain_selects_keep_index_order_unless_sorted() {
        assert!(select_needs_scan_order(&plan(None, vec![CExpr::Col(2)], vec![], false)));
        assert!(
            select_needs_scan_order(&plan(None, vec![CExpr::Col(2)], vec![], true)),
            "DISTINCT keeps first-met order"
        );
        assert!(!select_needs_scan_order(&plan(None, vec![CExpr::Col(2)], vec![2], false)));
        assert!(!select_needs_scan_order(&plan(None, vec![CExpr::Col(2)], vec![2], true)));
    }

    #[test]
    fn aggregates_need_no_order_unless_they_see_it() {
        // SELECT SUM(k): one group, an exact sum.
        let sum = plan(aggs(vec![], vec![agg(AggKind::Sum, TClass::Decimal)]), vec![CExpr::Col(3)], vec![], false);
        assert!(!select_needs_scan_order(&sum));
        for (kind, class) in [
            (AggKind::CountStar, TClass::Int),
            (AggKind::Min, TClass::Str),
            (AggKind::Max, TClass::Double),
            (AggKind::Avg, TClass::Decimal),
            (AggKind::BitOr, TClass::UInt),
        ] {
            let p = plan(aggs(vec![], vec![agg(kind, class)]), vec![CExpr::Col(3)], vec![], false);
            assert!(!select_needs_scan_order(&p), "{kind:?}");
        }
        // Order-sensitive aggregates.
        for (kind, class) in [
            (AggKind::Sum, TClass::Double),
            (AggKind::Avg, TClass::Double),
            (AggKind::GroupConcat, TClass::Str),
            (AggKind::VarPop, TClass::Double),
            (AggKind::StdSamp, TClass::Double),
        ] {
            let p = plan(aggs(vec![], vec![agg(kind, class)]), vec![CExpr::Col(3)], vec![], false);
            assert!(select_needs_scan_order(&p), "{kind:?} {class:?}");
        }
        // A column of the group's first row.
        let first = plan(
            aggs(vec![], vec![agg(AggKind::Sum, TClass::Decimal)]),
            vec![CExpr::Col(2), CExpr::Col(3)],
            vec![],
            false,
        );
        assert!(select_needs_scan_order(&first));
        // Groups: in first-met order unless sorted; a grouped column is the
        // same for the whole group, another one is not.
        let count = || vec![agg(AggKind::Count, TClass::Int)];
        let unsorted = plan(aggs(vec![2], count()), vec![CExpr::Col(2), CExpr::Col(3)], vec![], false);
        assert!(select_needs_scan_order(&unsorted));
        let sorted = plan(aggs(vec![2], count()), vec![CExpr::Col(2), CExpr::Col(3)], vec![2], false);
        assert!(!select_needs_scan_order(&sorted));
        let other_col = plan(aggs(vec![2], count()), vec![CExpr::Col(1), CExpr::Col(3)], vec![2], false);
        assert!(select_needs_scan_order(&other_col));
        let mut having = plan(aggs(vec![2], count()), vec![CExpr::Col(3)], vec![2], false);
        having.having = Some(CExpr::IsNull(Box::new(CExpr::Col(0)), false));
        assert!(select_needs_scan_order(&having));
    }

    #[test]
    fn row_statements_keep_order_for_limits_and_updates() {
        assert!(!row_stmt_needs_scan_order(false, false), "DELETE of every matching row");
        assert!(row_stmt_needs_scan_order(true, false));
        assert!(row_stmt_needs_scan_order(false, true));
        assert!(row_stmt_needs_scan_order(true, true));
    }
}
