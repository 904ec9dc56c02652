//! Multi-range scans (`ScanSpec::ranges`): one scan reads many ranges of an
//! ordered index and tags each row with the position of its range, so a
//! join's batch of lookup keys costs one round trip. Rows of every range
//! exactly (overlapping ranges return a row once per range, empty ranges
//! nothing), across partitions, in small batches and steps, unordered and
//! ordered, committed-read and locking, with the transaction's own writes;
//! a range list over the limit or with a plain range besides is refused.

use norr_knobs::Knobs;
use norr_signals::ops::{Bound, CmpOp, Filter, KeyOp, LockMode, ScanRange, ScanSpec, MAX_SCAN_RANGES};
use norr_signals::schema::TableDef;
use norr_signals::value::Value;
use norr_signals::{ErrorCode, ExecType, TxnOutcome};
use norr_txn::testkit::{k_s_table_def, Harness};
use std::collections::BTreeMap;

const N: i64 = 200;

/// Table (id, k INT, s VARCHAR) over 5 partitions, ordered index on k;
/// k = id % 50 (four rows per k, in different partitions).
fn setup(knobs: Knobs) -> (Harness, TableDef) {
    let mut h = Harness::new(knobs);
    let d = h.create_table(k_s_table_def("m", 5)).unwrap();
    let ops: Vec<KeyOp> = (0..N)
        .map(|i| KeyOp::insert(d.id, vec![Value::Int(i)], vec![(1, Value::Int(i % 50)), (2, Value::str("x"))]))
        .collect();
    h.autocommit(ops).unwrap();
    (h, d)
}

/// Few rows examined per step, so ranges span steps and batches.
fn small_steps() -> Knobs {
    Knobs { scan_examine_per_step: 3, ..Knobs::default() }
}

fn between(lo: i64, hi: i64) -> ScanRange {
    ScanRange { low: Bound::inclusive(vec![Value::Int(lo)]), high: Bound::inclusive(vec![Value::Int(hi)]) }
}

/// Ids by range position, from rows whose last value is the position.
fn by_range(rows: &[Vec<Value>]) -> BTreeMap<i64, Vec<i64>> {
    let mut m: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for r in rows {
        let tag = r.last().and_then(|v| v.as_i64()).expect("a range tag");
        m.entry(tag).or_default().push(r[0].as_i64().unwrap());
    }
    m.values_mut().for_each(|v| v.sort());
    m
}

/// What each range should return: ids with k in [lo, hi], by position
/// (empty ranges absent).
fn expect(ranges: &[(i64, i64)], ids: impl Fn(i64) -> bool + Copy) -> BTreeMap<i64, Vec<i64>> {
    ranges
        .iter()
        .enumerate()
        .map(|(i, (lo, hi))| (i as i64, (0..N).filter(|id| (lo..=hi).contains(&&(id % 50)) && ids(*id)).collect()))
        .filter(|(_, v): &(i64, Vec<i64>)| !v.is_empty())
        .collect()
}

fn spec_of(d: &TableDef, ranges: &[(i64, i64)]) -> ScanSpec {
    ScanSpec {
        index: Some(d.indexes[0].id),
        ordered: false,
        ranges: ranges.iter().map(|(lo, hi)| between(*lo, *hi)).collect(),
        ..ScanSpec::full(d.id)
    }
}

#[test]
fn every_range_returns_exactly_its_rows_tagged() {
    // A point, a span, the point again, a span overlapping the first, a key
    // with no rows, an inverted (empty) range, the last key.
    let ranges = [(3, 3), (10, 12), (3, 3), (11, 13), (99, 99), (20, 19), (49, 49)];
    for (knobs, batch_rows) in [(Knobs::default(), 256), (small_steps(), 5), (small_steps(), 1)] {
        let (mut h, d) = setup(knobs);
        let spec = ScanSpec { batch_rows, ..spec_of(&d, &ranges) };
        let (rows, batches) = h.scan_all(1, 1, true, spec).unwrap();
        assert_eq!(by_range(&rows), expect(&ranges, |_| true), "batch_rows {batch_rows}");
        assert!(rows.iter().all(|r| r.len() == 4), "every column and the tag");
        if batch_rows == 256 {
            assert_eq!(batches, 1, "one round trip for all ranges");
        }
        // Pushed filter and projection: the tag follows the projected columns.
        let spec = ScanSpec {
            batch_rows,
            filter: Some(Filter::Cmp { col: 0, op: CmpOp::Lt, value: Value::Int(100) }),
            projection: vec![0],
            ..spec_of(&d, &ranges)
        };
        let (rows, _) = h.scan_all(1, 1, true, spec).unwrap();
        assert!(rows.iter().all(|r| r.len() == 2));
        assert_eq!(by_range(&rows), expect(&ranges, |id| id < 100), "filtered, batch_rows {batch_rows}");
        // Pruned to one partition: that partition's rows of each range.
        let spec = ScanSpec { batch_rows, partitions: Some(vec![2]), ..spec_of(&d, &ranges) };
        let (some, _) = h.scan_all(1, 1, true, spec).unwrap();
        let all = by_range(&rows_all(&mut h, &d, &ranges));
        for (tag, ids) in by_range(&some) {
            assert!(ids.iter().all(|id| all[&tag].contains(id)), "range {tag}: {ids:?}");
        }
        assert!(!some.is_empty() && some.len() < all.values().map(Vec::len).sum::<usize>());
        // A limit counts rows over all ranges.
        let spec = ScanSpec { batch_rows, limit: Some(6), ..spec_of(&d, &ranges) };
        assert_eq!(h.scan_all(1, 1, true, spec).unwrap().0.len(), 6);
    }
}

fn rows_all(h: &mut Harness, d: &TableDef, ranges: &[(i64, i64)]) -> Vec<Vec<Value>> {
    h.scan_all(1, 1, true, spec_of(d, ranges)).unwrap().0
}

#[test]
fn ordered_multi_range_scans_keep_index_order() {
    let (mut h, d) = setup(small_steps());
    let k_tag = |r: &Vec<Value>| (r[1].as_i64().unwrap(), r[3].as_i64().unwrap());
    let ranges = [(2, 2), (5, 7), (30, 30), (48, 60)];
    let spec = ScanSpec { ordered: true, batch_rows: 7, ..spec_of(&d, &ranges) };
    let (rows, _) = h.scan_all(1, 1, true, spec).unwrap();
    let mut want: Vec<(i64, i64)> = Vec::new();
    for (tag, (lo, hi)) in ranges.iter().enumerate() {
        for k in *lo..=(*hi).min(49) {
            want.extend(std::iter::repeat_n((k, tag as i64), 4));
        }
    }
    assert_eq!(rows.iter().map(k_tag).collect::<Vec<_>>(), want);
    // Descending, the ranges listed from the top.
    let rev: Vec<(i64, i64)> = ranges.iter().rev().copied().collect();
    let spec = ScanSpec { ordered: true, descending: true, batch_rows: 7, ..spec_of(&d, &rev) };
    let (rows, _) = h.scan_all(1, 1, true, spec).unwrap();
    let ks: Vec<i64> = rows.iter().map(|r| r[1].as_i64().unwrap()).collect();
    let mut sorted = ks.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(ks, sorted);
    assert_eq!(by_range(&rows), expect(&rev, |_| true));
}

#[test]
fn locking_multi_range_scans_see_own_writes() {
    let (mut h, d) = setup(Knobs::default());
    let t = d.id;
    // In transaction 1: row 200 joins k = 3, row 3 (k = 3) moves to k = 11,
    // row 53 (k = 3) is deleted.
    let ops = vec![
        KeyOp::insert(t, vec![Value::Int(200)], vec![(1, Value::Int(3))]),
        KeyOp::update(t, vec![Value::Int(3)], vec![(1, Value::Int(11))]),
        KeyOp::delete(t, vec![Value::Int(53)]),
    ];
    assert_eq!(h.key(1, 1, ExecType::NoCommit, ops).unwrap().outcome, TxnOutcome::Open);
    let ranges = [(3, 3), (11, 11), (40, 40)];
    let want: BTreeMap<i64, Vec<i64>> =
        [(0, vec![103, 153, 200]), (1, vec![3, 11, 61, 111, 161]), (2, vec![40, 90, 140, 190])].into_iter().collect();
    for lock in [LockMode::CommittedRead, LockMode::Shared, LockMode::Exclusive] {
        for batch_rows in [1, 3, 256] {
            let spec = ScanSpec { lock, batch_rows, ..spec_of(&d, &ranges) };
            let (rows, _) = h.scan_all(1, 1, false, spec).unwrap();
            assert_eq!(by_range(&rows), want, "lock {lock:?}, batch {batch_rows}");
        }
    }
    // Others still see the committed rows.
    let (rows, _) = h.scan_all(2, 1, true, spec_of(&d, &ranges)).unwrap();
    assert_eq!(by_range(&rows), expect(&ranges, |_| true));
}

#[test]
fn bad_range_lists_are_refused() {
    let (mut h, d) = setup(Knobs::default());
    let many: Vec<(i64, i64)> = (0..=MAX_SCAN_RANGES as i64).map(|k| (k, k)).collect();
    // At the limit: fine.
    let (rows, _) = h.scan_all(1, 1, true, spec_of(&d, &many[..MAX_SCAN_RANGES])).unwrap();
    assert_eq!(rows.len(), N as usize);
    // One past it.
    let e = h.scan_all(1, 1, true, spec_of(&d, &many)).unwrap_err();
    assert_eq!(e.code, ErrorCode::BadScanBound);
    assert!(e.to_string().contains(&format!("at most {MAX_SCAN_RANGES} ranges")), "{e}");
    // A range besides the list.
    let spec = ScanSpec { range: Some(between(1, 2)), ..spec_of(&d, &[(3, 3)]) };
    assert_eq!(h.scan_all(1, 1, true, spec).unwrap_err().code, ErrorCode::BadScanBound);
    // No index.
    let spec = ScanSpec { index: None, ..spec_of(&d, &[(3, 3)]) };
    assert_eq!(h.scan_all(1, 1, true, spec).unwrap_err().code, ErrorCode::BadScanBound);
    // A bound of the wrong type in a later range.
    let mut spec = spec_of(&d, &[(3, 3), (4, 4)]);
    spec.ranges[1].low = Bound::inclusive(vec![Value::str("four")]);
    assert_eq!(h.scan_all(1, 1, true, spec).unwrap_err().code, ErrorCode::BadScanBound);
    // The node serves on.
    assert_eq!(by_range(&rows_all(&mut h, &d, &[(7, 7)])), expect(&[(7, 7)], |_| true));
}
