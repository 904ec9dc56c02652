//! Filter conjuncts an ordered scan's range already enforces.
//!
//! A SQL node pushes `id BETWEEN a AND b` down twice: as the range of a
//! PRIMARY-index scan and as the filter `id >= a AND id <= b`, which LQH
//! would then evaluate on every row the range returned (and decode `id` for
//! it). TC drops such conjuncts once per scan, before the partitions open.
//!
//! Only the plainly safe case is recognised: a comparison of the index's
//! first column, an integer column that is NOT NULL, with exactly the value
//! the range bound starts with, where that value is already of the column's
//! type (so the bound's key encoding orders it exactly as the comparison
//! does). Anything else stays in the filter.

use norr_signals::coerce::coerce_value;
use norr_signals::ops::{CmpOp, Filter, ScanRange};
use norr_signals::schema::{IndexId, TableDef};
use norr_signals::value::Value;

/// `filter` without the conjuncts the range on `index` implies (None when
/// nothing is left). The filter comes back as it was if none is dropped.
pub(super) fn drop_range_implied(
    def: &TableDef,
    index: Option<IndexId>,
    range: Option<&ScanRange>,
    filter: Option<Filter>,
) -> Option<Filter> {
    let f = filter?;
    let (Some(ix), Some(range)) = (index.and_then(|i| def.index(i)), range) else {
        return Some(f);
    };
    let Some(&first) = ix.columns.first() else {
        return Some(f);
    };
    let mut conj = Vec::new();
    flatten_and(f.clone(), &mut conj);
    let before = conj.len();
    conj.retain(|c| !implied(def, first, range, c));
    if conj.len() == before {
        return Some(f);
    }
    match conj.len() {
        0 => None,
        1 => conj.pop(),
        _ => Some(Filter::And(conj)),
    }
}

/// The conjuncts of `f`, nested ANDs opened up.
fn flatten_and(f: Filter, out: &mut Vec<Filter>) {
    match f {
        Filter::And(fs) => fs.into_iter().for_each(|x| flatten_and(x, out)),
        other => out.push(other),
    }
}

/// Whether every row inside `range` satisfies the conjunct `c`.
fn implied(def: &TableDef, first: u16, range: &ScanRange, c: &Filter) -> bool {
    let Filter::Cmp { col, op, value } = c else {
        return false;
    };
    let Some(column) = def.column(*col).filter(|_| *col == first) else {
        return false;
    };
    if column.nullable || column.ty.int_range().is_none() || !matches!(value, Value::Int(_) | Value::UInt(_)) {
        return false;
    }
    if coerce_value(value.clone(), &column.ty, false).ok().as_ref() != Some(value) {
        return false;
    }
    let (low, high) = (&range.low, &range.high);
    // A bound on several columns still bounds its first one, inclusively:
    // (a, b) > (x, y) gives a >= x.
    let low_ge = low.values.first() == Some(value);
    let high_le = high.values.first() == Some(value);
    let single = |b: &norr_signals::ops::Bound| b.values.len() == 1 && !b.inclusive;
    match op {
        CmpOp::Ge => low_ge,
        CmpOp::Gt => low_ge && single(low),
        CmpOp::Le => high_le,
        CmpOp::Lt => high_le && single(high),
        CmpOp::Eq => low_ge && high_le,
        CmpOp::Ne => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{index_def, table_def};
    use norr_signals::ops::Bound;
    use norr_signals::schema::IndexKind;
    use norr_signals::value::ColumnType;

    fn def() -> TableDef {
        // id BIGINT pk NOT NULL, k INT (nullable), ordered indexes on pk and k.
        let mut d = table_def("t", 4, &[("k", ColumnType::Int { unsigned: false })]);
        d.indexes.push(index_def("PRIMARY", &[0], false, IndexKind::Ordered));
        d.indexes[0].id = 1;
        d.indexes.push(index_def("by_k", &[1], false, IndexKind::Ordered));
        d.indexes[1].id = 2;
        d
    }

    fn cmp(col: u16, op: CmpOp, v: i64) -> Filter {
        Filter::Cmp { col, op, value: Value::Int(v) }
    }

    fn range(lo: &[i64], lo_incl: bool, hi: &[i64], hi_incl: bool) -> ScanRange {
        let vals = |v: &[i64]| v.iter().map(|x| Value::Int(*x)).collect();
        ScanRange {
            low: Bound { values: vals(lo), inclusive: lo_incl },
            high: Bound { values: vals(hi), inclusive: hi_incl },
        }
    }

    #[test]
    fn between_on_the_pk_range_is_dropped() {
        let d = def();
        let r = range(&[10], true, &[109], true);
        let f = Filter::And(vec![cmp(0, CmpOp::Ge, 10), cmp(0, CmpOp::Le, 109)]);
        assert_eq!(drop_range_implied(&d, Some(1), Some(&r), Some(f.clone())), None);
        // Nested under another AND, next to a conjunct that stays.
        let other = Filter::IsNotNull(1);
        let g = Filter::And(vec![other.clone(), f]);
        assert_eq!(drop_range_implied(&d, Some(1), Some(&r), Some(g)), Some(other.clone()));
        // Exclusive bounds imply strict comparisons, and the inclusive ones.
        let r = range(&[10], false, &[20], false);
        let f = Filter::And(vec![cmp(0, CmpOp::Gt, 10), cmp(0, CmpOp::Lt, 20), cmp(0, CmpOp::Ge, 10), other.clone()]);
        assert_eq!(drop_range_implied(&d, Some(1), Some(&r), Some(f)), Some(other));
        // Equality on a point range.
        let r = range(&[7], true, &[7], true);
        assert_eq!(drop_range_implied(&d, Some(1), Some(&r), Some(cmp(0, CmpOp::Eq, 7))), None);
    }

    #[test]
    fn anything_not_plainly_implied_stays() {
        let d = def();
        let r = range(&[10], true, &[20], true);
        let keep = |ix: Option<u32>, r: Option<&ScanRange>, f: Filter| {
            assert_eq!(drop_range_implied(&d, ix, r, Some(f.clone())), Some(f));
        };
        // Other values, stricter operators than the bound, Ne.
        keep(Some(1), Some(&r), cmp(0, CmpOp::Ge, 11));
        keep(Some(1), Some(&r), cmp(0, CmpOp::Gt, 10));
        keep(Some(1), Some(&r), cmp(0, CmpOp::Lt, 20));
        keep(Some(1), Some(&r), cmp(0, CmpOp::Ne, 10));
        keep(Some(1), Some(&r), cmp(0, CmpOp::Eq, 10));
        // Another column than the index's first; a nullable column (its
        // NULLs sort below every bound, a high bound alone admits them).
        keep(Some(1), Some(&r), cmp(1, CmpOp::Ge, 10));
        keep(Some(2), Some(&r), Filter::And(vec![cmp(1, CmpOp::Ge, 10), cmp(1, CmpOp::Le, 20)]));
        // No range, no index, a full scan.
        keep(Some(1), None, cmp(0, CmpOp::Ge, 10));
        keep(None, Some(&r), cmp(0, CmpOp::Ge, 10));
        // A value not of the column's type (2.5 on an integer column).
        let fr =
            ScanRange { low: Bound { values: vec![Value::Double(2.5)], inclusive: true }, high: Bound::unbounded() };
        keep(Some(1), Some(&fr), Filter::Cmp { col: 0, op: CmpOp::Ge, value: Value::Double(2.5) });
        // A strict comparison against a bound on more than one value: (a, b)
        // > (x, y) does not give a > x.
        let mut d2 = def();
        d2.indexes.push(index_def("pk_k", &[0, 1], false, IndexKind::Ordered));
        d2.indexes[2].id = 3;
        let r2 = range(&[10, 5], false, &[20, 5], false);
        let f = cmp(0, CmpOp::Gt, 10);
        assert_eq!(drop_range_implied(&d2, Some(3), Some(&r2), Some(f.clone())), Some(f));
        assert_eq!(drop_range_implied(&d2, Some(3), Some(&r2), Some(cmp(0, CmpOp::Ge, 10))), None);
        assert_eq!(drop_range_implied(&d2, Some(3), Some(&r2), Some(cmp(0, CmpOp::Le, 20))), None);
        // No filter.
        assert_eq!(drop_range_implied(&d, Some(1), Some(&r), None), None);
    }
}
