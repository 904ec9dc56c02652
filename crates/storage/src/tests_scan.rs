//! Scan tests: ordered ranges with every bound shape, cursors across changes,
//! filters and examine limits.

use super::tests::{bigint, get, index, put, table, varchar};
use super::*;
use norr_signals::keycode::encode_value;
use norr_signals::ops::{Bound, CmpOp};
use norr_signals::schema::{ColumnDef, IndexKind};
use norr_signals::value::ColumnType;
use std::collections::BTreeSet;

const T: TableId = 1;
const IX: IndexId = 7;

fn setup(partitions: u32, rows: i64) -> Storage {
    let mut s = Storage::new(64 << 20);
    let mut def = table(
        T,
        vec![
            ColumnDef::new("id", bigint()).not_null(),
            ColumnDef::new("a", ColumnType::Int { unsigned: false }),
            ColumnDef::new("b", varchar(10)),
        ],
        vec![0],
        partitions,
    );
    def.indexes.push(index(IX, "ab", vec![1, 2], false, IndexKind::Ordered));
    def.indexes.push(index(8, "h", vec![0, 1], true, IndexKind::UniqueHash));
    s.create_table(&def).unwrap();
    for id in 0..rows {
        put(&mut s, T, row(id)).unwrap();
    }
    s
}

fn row(id: i64) -> Vec<Value> {
    let a = if id % 11 == 0 { Value::Null } else { Value::Int(id % 7) };
    let b = match id % 5 {
        0 => Value::Null,
        1 => Value::str("a"),
        2 => Value::str("B"),
        3 => Value::str("bb"),
        _ => Value::str(&format!("c{}", id % 3)),
    };
    vec![Value::Int(id), a, b]
}

fn prefix_key(r: &[Value], n: usize) -> Vec<u8> {
    let types = [ColumnType::Int { unsigned: false }, varchar(10)];
    let mut out = Vec::new();
    for (i, t) in types.iter().enumerate().take(n) {
        encode_value(&mut out, &r[i + 1], t);
    }
    out
}

fn bound_key(vals: &[Value]) -> Vec<u8> {
    let mut r = vec![Value::Int(0)];
    r.extend(vals.iter().cloned());
    r.resize(3, Value::Null);
    prefix_key(&r, vals.len())
}

fn in_range(r: &[Value], low: &Bound, high: &Bound) -> bool {
    let lo_ok = low.values.is_empty() || {
        let k = prefix_key(r, low.values.len());
        let b = bound_key(&low.values);
        if low.inclusive {
            k >= b
        } else {
            k > b
        }
    };
    let hi_ok = high.values.is_empty() || {
        let k = prefix_key(r, high.values.len());
        let b = bound_key(&high.values);
        if high.inclusive {
            k <= b
        } else {
            k < b
        }
    };
    lo_ok && hi_ok
}

/// Run a scan to the end in batches; returns the ids in order.
fn drain(s: &Storage, part: PartitionId, cur: &mut ScanCursor, filter: Option<&Filter>, batch: usize) -> Vec<i64> {
    let mut out = Vec::new();
    let mut ids = Vec::new();
    for _ in 0..100_000 {
        out.clear();
        let done = s.scan_next(T, part, cur, filter, batch, batch * 4, &mut out).unwrap();
        assert!(out.len() <= batch);
        ids.extend(out.iter().map(|(_, r)| r[0].as_i64().unwrap()));
        if done {
            return ids;
        }
    }
    panic!("scan did not finish");
}

fn bounds() -> Vec<Bound> {
    let vals: Vec<Vec<Value>> = vec![
        vec![Value::Int(2)],
        vec![Value::Int(5)],
        vec![Value::Int(9)],
        vec![Value::Null],
        vec![Value::Int(2), Value::str("b")],
        vec![Value::Int(4), Value::Null],
        vec![Value::Int(3), Value::str("zz")],
        vec![Value::Null, Value::str("a")],
    ];
    let mut out = vec![Bound::unbounded()];
    for v in vals {
        out.push(Bound::inclusive(v.clone()));
        out.push(Bound::exclusive(v));
    }
    out
}

#[test]
fn ordered_scans_every_bound_combination() {
    let s = setup(1, 300);
    let rows: Vec<Vec<Value>> = (0..300).map(row).collect();
    let mut sorted: Vec<&Vec<Value>> = rows.iter().collect();
    sorted.sort_by_key(|r| s.ordered_key(T, IX, r));
    let mut scans = 0;
    let mut sizes = BTreeSet::new();
    for low in bounds() {
        for high in bounds() {
            let range = ScanRange { low: low.clone(), high: high.clone() };
            let mut want: Vec<i64> =
                sorted.iter().filter(|r| in_range(r, &low, &high)).map(|r| r[0].as_i64().unwrap()).collect();
            sizes.insert(want.len());
            for desc in [false, true] {
                if desc {
                    want.reverse();
                }
                for batch in [1usize, 7, 1000] {
                    let mut cur = s.scan_open(T, 0, Some(IX), Some(&range), desc).unwrap();
                    let got = drain(&s, 0, &mut cur, None, batch);
                    assert_eq!(got, want, "low {low:?} high {high:?} desc {desc} batch {batch}");
                    scans += 1;
                }
                if desc {
                    want.reverse();
                }
            }
        }
    }
    assert!(scans > 1000);
    assert!(sizes.len() > 20, "bounds too uniform: {sizes:?}");
    // Whole index, no range.
    let mut cur = s.scan_open(T, 0, Some(IX), None, false).unwrap();
    assert_eq!(drain(&s, 0, &mut cur, None, 50).len(), 300);
}

#[test]
fn ordered_scans_merge_across_partitions() {
    let s = setup(4, 400);
    let range = ScanRange { low: Bound::inclusive(vec![Value::Int(1)]), high: Bound::exclusive(vec![Value::Int(4)]) };
    let mut merged: Vec<(Vec<u8>, i64)> = Vec::new();
    for p in 0..4 {
        let mut cur = s.scan_open(T, p, Some(IX), Some(&range), false).unwrap();
        let mut out = Vec::new();
        while !s.scan_next(T, p, &mut cur, None, 16, 64, &mut out).unwrap() {}
        let keys: Vec<Vec<u8>> = out.iter().map(|(_, r)| s.ordered_key(T, IX, r)).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "partition {p} not in index order");
        merged.extend(out.iter().map(|(_, r)| (s.ordered_key(T, IX, r), r[0].as_i64().unwrap())));
    }
    merged.sort();
    let want: Vec<i64> = {
        let mut v: Vec<Vec<Value>> =
            (0..400).map(row).filter(|r| matches!(r[1], Value::Int(a) if (1..4).contains(&a))).collect();
        v.sort_by_key(|r| s.ordered_key(T, IX, r));
        v.iter().map(|r| r[0].as_i64().unwrap()).collect()
    };
    assert_eq!(merged.into_iter().map(|(_, id)| id).collect::<Vec<_>>(), want);
}

#[test]
fn bad_scans_are_rejected() {
    let s = setup(1, 10);
    let three = ScanRange {
        low: Bound::inclusive(vec![Value::Int(1), Value::str("a"), Value::Int(3)]),
        high: Bound::unbounded(),
    };
    assert_eq!(s.scan_open(T, 0, Some(IX), Some(&three), false).unwrap_err().code, ErrorCode::BadScanBound);
    let r = ScanRange { low: Bound::inclusive(vec![Value::Int(1)]), high: Bound::unbounded() };
    assert_eq!(s.scan_open(T, 0, None, Some(&r), false).unwrap_err().code, ErrorCode::BadScanBound);
    assert_eq!(s.scan_open(T, 0, Some(8), None, false).unwrap_err().code, ErrorCode::BadScanBound);
    assert_eq!(s.scan_open(T, 0, Some(99), None, false).unwrap_err().code, ErrorCode::NoSuchIndex);
    assert_eq!(s.scan_open(T, 5, None, None, false).unwrap_err().code, ErrorCode::BadPartition);
    let wrong = ScanRange { low: Bound::inclusive(vec![Value::str("x")]), high: Bound::unbounded() };
    assert_eq!(s.scan_open(T, 0, Some(IX), Some(&wrong), false).unwrap_err().code, ErrorCode::BadScanBound);
    // An empty range (low above high) is fine and returns nothing.
    let empty = ScanRange { low: Bound::inclusive(vec![Value::Int(5)]), high: Bound::exclusive(vec![Value::Int(2)]) };
    let mut cur = s.scan_open(T, 0, Some(IX), Some(&empty), true).unwrap();
    assert!(drain(&s, 0, &mut cur, None, 10).is_empty());
}

#[test]
fn out_of_range_bounds_still_bound() {
    let mut s = Storage::new(16 << 20);
    let mut def = table(
        T,
        vec![
            ColumnDef::new("id", bigint()).not_null(),
            ColumnDef::new("t", ColumnType::TinyInt { unsigned: true }),
            ColumnDef::new("v", ColumnType::Varchar { len: 3, collation: norr_signals::value::Collation::Binary }),
        ],
        vec![0],
        1,
    );
    def.indexes.push(index(IX, "tv", vec![1, 2], false, IndexKind::Ordered));
    s.create_table(&def).unwrap();
    let vals = [(0, "a"), (5, "abc"), (5, "abd"), (255, "zzz")];
    for (i, (t, v)) in vals.iter().enumerate() {
        s.insert(T, 0, vec![Value::Int(i as i64), Value::Int(*t), Value::str(v)]).unwrap();
    }
    s.insert(T, 0, vec![Value::Int(9), Value::Null, Value::Null]).unwrap();
    let ids = |s: &Storage, low: Bound, high: Bound, desc: bool| -> Vec<i64> {
        let mut cur = s.scan_open(T, 0, Some(IX), Some(&ScanRange { low, high }), desc).unwrap();
        drain(s, 0, &mut cur, None, 2)
    };
    let un = Bound::unbounded;
    // t < 1000: every non-NULL t, plus NULL as for any range without a low bound.
    assert_eq!(ids(&s, un(), Bound::exclusive(vec![Value::Int(1000)]), false), vec![9, 0, 1, 2, 3]);
    // t > -5: every non-NULL t.
    assert_eq!(ids(&s, Bound::exclusive(vec![Value::Int(-5)]), un(), false), vec![0, 1, 2, 3]);
    // t >= 1000 and t <= -1: nothing.
    assert!(ids(&s, Bound::inclusive(vec![Value::Int(1000)]), un(), true).is_empty());
    assert_eq!(ids(&s, un(), Bound::inclusive(vec![Value::Int(-1)]), false), vec![9]);
    // (5, v) with v beyond the column length: compared as the longer string.
    assert_eq!(ids(&s, Bound::inclusive(vec![Value::Int(5), Value::str("abcd")]), un(), false), vec![2, 3]);
    assert_eq!(ids(&s, un(), Bound::exclusive(vec![Value::Int(5), Value::str("abcd")]), true), vec![1, 0, 9]);
    // A number for a string column is no bound.
    let r = ScanRange { low: un(), high: Bound::inclusive(vec![Value::Int(5), Value::Int(7)]) };
    assert_eq!(s.scan_open(T, 0, Some(IX), Some(&r), false).unwrap_err().code, ErrorCode::BadScanBound);
    // (300, ..) on the composite: beyond every t, whatever follows.
    assert_eq!(ids(&s, un(), Bound::inclusive(vec![Value::Int(300), Value::str("a")]), false), vec![9, 0, 1, 2, 3]);
    assert!(ids(&s, Bound::exclusive(vec![Value::Int(300), Value::str("a")]), un(), false).is_empty());
}

#[test]
fn full_scan_with_filters_and_examine_limit() {
    let s = setup(2, 500);
    let def = s.table_def(T).unwrap().clone();
    let filters = vec![
        Filter::Cmp { col: 1, op: CmpOp::Gt, value: Value::Int(3) },
        Filter::And(vec![Filter::IsNotNull(2), Filter::Like { col: 2, pattern: b"B%".to_vec() }]),
        Filter::Or(vec![Filter::IsNull(1), Filter::Cmp { col: 0, op: CmpOp::Lt, value: Value::Int(10) }]),
        Filter::Not(Box::new(Filter::Cmp { col: 1, op: CmpOp::Eq, value: Value::Int(2) })),
    ];
    for f in &filters {
        norr_signals::filter_eval::validate_filter(f, &def).unwrap();
        let mut want: Vec<i64> = (0..500)
            .filter(|&id| norr_signals::filter_eval::eval_filter(f, &row(id), &def).unwrap() == Some(true))
            .collect();
        let mut got = Vec::new();
        for p in 0..2 {
            let mut cur = s.scan_open(T, p, None, None, false).unwrap();
            got.extend(drain(&s, p, &mut cur, Some(f), 13));
        }
        got.sort();
        want.sort();
        assert_eq!(got, want, "filter {f:?}");
        assert!(!got.is_empty());
    }
    // A filter rejecting everything: each call looks at <= examine_limit rows.
    let mut cur = s.scan_open(T, 0, None, None, false).unwrap();
    let rows0 = {
        let mut c = s.scan_open(T, 0, None, None, false).unwrap();
        drain(&s, 0, &mut c, None, 1000).len()
    };
    let mut calls = 0;
    let mut out = Vec::new();
    while !s.scan_next(T, 0, &mut cur, Some(&Filter::False), 10, 5, &mut out).unwrap() {
        calls += 1;
        assert!(out.is_empty());
    }
    assert!(calls >= rows0 / 5 - 1 && calls <= rows0 / 5 + 1, "calls {calls} rows {rows0}");
    // Ordered scans honour the examine limit too.
    let mut cur = s.scan_open(T, 0, Some(IX), None, true).unwrap();
    let mut calls = 0;
    while !s.scan_next(T, 0, &mut cur, Some(&Filter::False), 10, 5, &mut out).unwrap() {
        calls += 1;
    }
    assert!(calls >= rows0 / 5 - 1, "calls {calls}");
}

fn cursor_survives_changes(index: Option<IndexId>, desc: bool) {
    let mut s = setup(1, 1000);
    let mut cur = s.scan_open(T, 0, index, None, desc).unwrap();
    let mut seen = BTreeSet::new();
    let mut deleted = BTreeSet::new();
    let mut out = Vec::new();
    let mut next_id = 1000;
    let mut round = 0;
    loop {
        out.clear();
        let done = s.scan_next(T, 0, &mut cur, None, 37, 100, &mut out).unwrap();
        for (rid, r) in &out {
            let id = r[0].as_i64().unwrap();
            assert!(seen.insert(id), "row {id} returned twice");
            assert!(!deleted.contains(&id), "deleted row {id} returned");
            assert_eq!(s.read_row(T, 0, *rid), *r);
        }
        if done {
            break;
        }
        round += 1;
        // Between batches: delete some rows (seen or not), insert new ones,
        // update some in place.
        for k in 0..20 {
            let id = (round * 131 + k * 17) % 1000;
            if let Some((p, r)) = get(&s, T, &[Value::Int(id)]) {
                s.delete(T, p, r);
                deleted.insert(id);
            }
        }
        for _ in 0..15 {
            put(&mut s, T, row(next_id)).unwrap();
            next_id += 1;
        }
        // (Ordered scans: an update moving a row's index key past the cursor
        // returns it again under the new key; documented, not tested here.)
        for k in 0..if index.is_none() { 5 } else { 0 } {
            let id = (round * 7 + k * 101) % 1000;
            if let Some((p, r)) = get(&s, T, &[Value::Int(id)]) {
                let mut nr = s.read_row(T, p, r);
                nr[2] = Value::str("upd");
                s.update(T, p, r, nr).unwrap();
            }
        }
    }
    // Every original row that was never deleted was returned.
    for id in 0..1000 {
        if !deleted.contains(&id) {
            assert!(seen.contains(&id), "surviving row {id} missed");
        }
    }
    s.check_invariants();
}

#[test]
fn full_scan_cursor_survives_changes() {
    cursor_survives_changes(None, false);
}

#[test]
fn ordered_scan_cursor_survives_changes() {
    cursor_survives_changes(Some(IX), false);
    cursor_survives_changes(Some(IX), true);
}

#[test]
fn empty_partitions_and_tables() {
    let s = setup(4, 0);
    for p in 0..4 {
        for ix in [None, Some(IX)] {
            for desc in [false, true] {
                let mut cur = s.scan_open(T, p, ix, None, desc).unwrap();
                let mut out = Vec::new();
                assert!(s.scan_next(T, p, &mut cur, None, 10, 10, &mut out).unwrap());
                assert!(out.is_empty());
                assert!(cur.is_done());
                // Calling again after the end is harmless.
                assert!(s.scan_next(T, p, &mut cur, None, 10, 10, &mut out).unwrap());
            }
        }
    }
    // Exhaustion is reported with the last batch, not one call later.
    let s = setup(1, 10);
    let mut cur = s.scan_open(T, 0, None, None, false).unwrap();
    let mut out = Vec::new();
    assert!(s.scan_next(T, 0, &mut cur, None, 10, 10, &mut out).unwrap());
    assert_eq!(out.len(), 10);
    let mut cur = s.scan_open(T, 0, Some(IX), None, true).unwrap();
    out.clear();
    assert!(!s.scan_next(T, 0, &mut cur, None, 9, 100, &mut out).unwrap());
    assert!(s.scan_next(T, 0, &mut cur, None, 9, 100, &mut out).unwrap());
    assert_eq!(out.len(), 10);
}

#[test]
fn fractional_bounds_on_integer_and_decimal_indexes() {
    use norr_signals::coerce::compare_values;
    use norr_signals::value::Decimal;
    use std::cmp::Ordering;
    let dec_ty = ColumnType::Decimal { precision: 5, scale: 2 };
    let int_ty = ColumnType::TinyInt { unsigned: false };
    for (ty, vals) in [
        (
            dec_ty.clone(),
            (-12..=12).map(|i| Value::Decimal(Decimal { mantissa: i * 25, scale: 2 })).collect::<Vec<_>>(),
        ),
        (int_ty.clone(), (-5..=5).map(Value::Int).collect::<Vec<_>>()),
    ] {
        let mut s = Storage::new(16 << 20);
        let mut def =
            table(T, vec![ColumnDef::new("id", bigint()).not_null(), ColumnDef::new("v", ty.clone())], vec![0], 1);
        def.indexes.push(index(IX, "v", vec![1], false, IndexKind::Ordered));
        s.create_table(&def).unwrap();
        for (i, v) in vals.iter().enumerate() {
            s.insert(T, 0, vec![Value::Int(i as i64), v.clone()]).unwrap();
        }
        let lits = [
            Value::Double(0.5),
            Value::Double(-0.3),
            Value::Double(1.004),
            Value::Decimal(Decimal { mantissa: 1004, scale: 3 }),
            Value::Decimal(Decimal { mantissa: -2501, scale: 3 }),
            Value::Decimal(Decimal { mantissa: 25, scale: 1 }),
            Value::Int(2),
            Value::Double(1e10),
            Value::Decimal(Decimal { mantissa: -99_999_999, scale: 3 }),
        ];
        for lo in &lits {
            for hi in &lits {
                for (li, hi_incl) in [(true, true), (true, false), (false, true), (false, false)] {
                    let want: Vec<i64> = vals
                        .iter()
                        .enumerate()
                        .filter(|(_, v)| {
                            let a = compare_values(v, lo, &ty).unwrap();
                            let b = compare_values(v, hi, &ty).unwrap();
                            (a == Ordering::Greater || (li && a == Ordering::Equal))
                                && (b == Ordering::Less || (hi_incl && b == Ordering::Equal))
                        })
                        .map(|(i, _)| i as i64)
                        .collect();
                    let range = ScanRange {
                        low: Bound { values: vec![lo.clone()], inclusive: li },
                        high: Bound { values: vec![hi.clone()], inclusive: hi_incl },
                    };
                    let mut cur = s.scan_open(T, 0, Some(IX), Some(&range), false).unwrap();
                    let got = drain(&s, 0, &mut cur, None, 4);
                    assert_eq!(got, want, "{ty:?} {lo:?}..{hi:?} incl {li}/{hi_incl}");
                }
            }
        }
    }
}

/// `scan_next_rows` with a column mask: the filter still sees its columns,
/// the other masked-out columns read as NULL, and ordered scans hand out each
/// row's ordered key.
#[test]
fn masked_scans_decode_only_the_chosen_columns() {
    let s = setup(2, 300);
    let filter = Filter::Cmp { col: 1, op: CmpOp::Ge, value: Value::Int(2) };
    let def = s.table_def(T).unwrap().clone();
    let mask = [true, true, false];
    for index in [None, Some(IX)] {
        for p in 0..2 {
            let mut cur = s.scan_open(T, p, index, None, false).unwrap();
            let step = ScanStep {
                filter: Some(&filter),
                cols: Some(&mask),
                projection: None,
                max_rows: 9,
                examine_limit: 20,
                keys: true,
            };
            let mut n = 0;
            loop {
                let mut out = ScanBatch::default();
                let done = s.scan_next_rows(T, p, &mut cur, &step, &mut out).unwrap();
                assert_eq!(out.keys.len(), if index.is_some() { out.rows.len() } else { 0 });
                assert_eq!(out.ids.len(), out.rows.len());
                for (i, r) in out.rows.iter().enumerate() {
                    let full = row(r[0].as_i64().unwrap());
                    assert_eq!(norr_signals::filter_eval::eval_filter(&filter, &full, &def).unwrap(), Some(true));
                    assert_eq!(*r, vec![full[0].clone(), full[1].clone(), Value::Null]);
                    if index.is_some() {
                        assert_eq!(out.keys.get(i), s.ordered_key(T, IX, &full));
                    }
                    n += 1;
                }
                if done {
                    break;
                }
            }
            assert!(n > 0);
        }
    }
}

/// `scan_next_rows` with a projection: each row comes back as the projected
/// columns in their order (a repeated column twice), with or without a filter
/// (whose columns need not be projected), with the same keys and rows as an
/// unprojected scan; a projected column the table lacks is an error. Without
/// `keys` a scan returns the same rows in the same order (it resumes where
/// the keyed one does) and no key.
#[test]
fn projected_scans_return_the_projected_columns() {
    let s = setup(2, 300);
    let filter = Filter::Cmp { col: 1, op: CmpOp::Ge, value: Value::Int(2) };
    let mask = [true, true, true];
    let proj = [2u16, 0, 2];
    let want_projected = |full: &[Vec<Value>]| -> Vec<Vec<Value>> {
        full.iter().map(|r| proj.iter().map(|c| r[*c as usize].clone()).collect()).collect()
    };
    for index in [None, Some(IX)] {
        for filter in [None, Some(&filter)] {
            for p in 0..2 {
                let drain = |projection: Option<&[u16]>, keys: bool| {
                    let mut cur = s.scan_open(T, p, index, None, false).unwrap();
                    let step = ScanStep { filter, cols: Some(&mask), projection, max_rows: 9, examine_limit: 20, keys };
                    let (mut rows, mut keys, mut ids) = (Vec::new(), Vec::new(), Vec::new());
                    loop {
                        let mut out = ScanBatch::default();
                        let done = s.scan_next_rows(T, p, &mut cur, &step, &mut out).unwrap();
                        keys.extend(out.keys.iter().map(|k| k.to_vec()));
                        ids.extend(out.ids);
                        rows.extend(out.rows);
                        if done {
                            return (rows, keys, ids);
                        }
                    }
                };
                let (full, full_keys, full_ids) = drain(None, true);
                let (got, keys, ids) = drain(Some(&proj), true);
                assert!(!full.is_empty());
                assert_eq!(full_keys.len(), if index.is_some() { full.len() } else { 0 });
                for projection in [None, Some(&proj[..])] {
                    let (rows, no_keys, unkeyed_ids) = drain(projection, false);
                    assert!(no_keys.is_empty(), "no key asked for");
                    assert_eq!(unkeyed_ids, full_ids, "index {index:?}, filter {filter:?}, partition {p}");
                    assert_eq!(rows, if projection.is_some() { want_projected(&full) } else { full.clone() });
                }
                assert_eq!(got, want_projected(&full), "index {index:?}, filter {filter:?}, partition {p}");
                assert_eq!(keys, full_keys);
                assert_eq!(ids, full_ids);
            }
        }
    }
    let mut cur = s.scan_open(T, 0, None, None, false).unwrap();
    let bad = [1u16, 3];
    let step =
        ScanStep { filter: None, cols: None, projection: Some(&bad), max_rows: 9, examine_limit: 20, keys: false };
    let e = s.scan_next_rows(T, 0, &mut cur, &step, &mut ScanBatch::default()).unwrap_err();
    assert_eq!(e.code, ErrorCode::NoSuchColumn);
}
