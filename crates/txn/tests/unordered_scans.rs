//! Index scans that need not come back in index order (`ScanSpec::ordered`
//! false): TC hands partition batches on unmerged and LQH sends no per-row
//! keys, yet the scan returns exactly the rows the ordered scan returns
//! (ranges, filters, limits, batches smaller than the result, a descending
//! flag that no longer matters), and a locking one locks what it returns.

use norr_knobs::Knobs;
use norr_signals::ops::{Bound, CmpOp, Filter, KeyOp, LockMode, ScanRange, ScanSpec};
use norr_signals::schema::TableDef;
use norr_signals::value::Value;
use norr_signals::{ExecType, TxnOutcome};
use norr_txn::testkit::{k_s_table_def, Harness};

const N: i64 = 300;

/// Table (id, k INT, s VARCHAR) over 8 partitions with an ordered index on
/// k; k = id % 40 (duplicates), s NULL for ids divisible by 5.
fn setup(knobs: Knobs) -> (Harness, TableDef) {
    let mut h = Harness::new(knobs);
    let d = h.create_table(k_s_table_def("u", 8)).unwrap();
    let ops: Vec<KeyOp> = (0..N)
        .map(|i| {
            let s = if i % 5 == 0 { Value::Null } else { Value::str(&format!("v{i}")) };
            KeyOp::insert(d.id, vec![Value::Int(i)], vec![(1, Value::Int(i % 40)), (2, s)])
        })
        .collect();
    h.autocommit(ops).unwrap();
    (h, d)
}

fn sorted(mut rows: Vec<Vec<Value>>) -> Vec<Vec<Value>> {
    rows.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    rows
}

fn range(low: Bound, high: Bound) -> Option<ScanRange> {
    Some(ScanRange { low, high })
}

fn int(v: i64) -> Vec<Value> {
    vec![Value::Int(v)]
}

fn unordered_scans(h: &mut Harness) -> u64 {
    h.counters().get("tc: unordered index scan").copied().unwrap_or(0)
}

#[test]
fn unordered_index_scans_return_the_ordered_scans_rows() {
    let (mut h, d) = setup(Knobs { scan_examine_per_step: 5, ..Knobs::default() });
    let pk = d.index_by_name("PRIMARY").expect("PRIMARY ordered index").id;
    let by_k = d.indexes.iter().find(|i| i.name == "by_k").unwrap().id;
    let ranges = [
        (pk, None),
        (pk, range(Bound::inclusive(int(40)), Bound::inclusive(int(139)))),
        (pk, range(Bound::exclusive(int(7)), Bound::exclusive(int(12)))),
        (pk, range(Bound::inclusive(int(250)), Bound::unbounded())),
        (pk, range(Bound::inclusive(int(500)), Bound::unbounded())),
        (by_k, None),
        (by_k, range(Bound::inclusive(int(3)), Bound::exclusive(int(9)))),
        (by_k, range(Bound::unbounded(), Bound::inclusive(int(0)))),
    ];
    let filters = [
        None,
        Some(Filter::IsNotNull(2)),
        Some(Filter::Cmp { col: 1, op: CmpOp::Lt, value: Value::Int(20) }),
        Some(Filter::False),
    ];
    let mut expected_unordered = 0;
    for (ix, r) in &ranges {
        for f in &filters {
            for projection in [vec![], vec![2, 0]] {
                for desc in [false, true] {
                    let spec = ScanSpec {
                        index: Some(*ix),
                        range: r.clone(),
                        filter: f.clone(),
                        projection: projection.clone(),
                        descending: desc,
                        batch_rows: 1000,
                        ..ScanSpec::full(d.id)
                    };
                    let (want, _) = h.scan_all(1, 1, true, spec.clone()).unwrap();
                    for batch_rows in [1, 3, 16, 1000] {
                        let what = format!("index {ix}, range {r:?}, filter {f:?}, desc {desc}, batch {batch_rows}");
                        let un = ScanSpec { ordered: false, batch_rows, ..spec.clone() };
                        let (got, batches) = h.scan_all(1, 1, true, un.clone()).unwrap();
                        expected_unordered += 1;
                        assert_eq!(sorted(got), sorted(want.clone()), "{what}");
                        assert!(batches >= want.len().div_ceil(batch_rows as usize), "{what}");
                        // A limit: exactly that many rows (or all there are),
                        // no row twice, each one the ordered scan returns.
                        for limit in [1, 7, 40] {
                            let spec = ScanSpec { limit: Some(limit), ..un.clone() };
                            let (got, _) = h.scan_all(1, 1, true, spec).unwrap();
                            expected_unordered += 1;
                            assert_eq!(got.len(), want.len().min(limit as usize), "{what}, limit {limit}");
                            let got = sorted(got);
                            assert!(got.windows(2).all(|w| w[0] != w[1]), "{what}: a row twice");
                            assert!(got.iter().all(|r| want.contains(r)), "{what}, limit {limit}");
                        }
                    }
                }
            }
        }
    }
    assert_eq!(unordered_scans(&mut h), expected_unordered);
}

/// The ordered scan is still merged into index order next to unordered ones.
#[test]
fn ordered_index_scans_stay_ordered() {
    let (mut h, d) = setup(Knobs { scan_examine_per_step: 4, ..Knobs::default() });
    let by_k = d.indexes.iter().find(|i| i.name == "by_k").unwrap().id;
    for desc in [false, true] {
        let spec = ScanSpec {
            index: Some(by_k),
            range: range(Bound::inclusive(int(10)), Bound::inclusive(int(30))),
            descending: desc,
            batch_rows: 7,
            ..ScanSpec::full(d.id)
        };
        let (rows, _) = h.scan_all(1, 1, true, spec).unwrap();
        let keys: Vec<(i64, i64)> = rows.iter().map(|r| (r[1].as_i64().unwrap(), r[0].as_i64().unwrap())).collect();
        let mut want: Vec<(i64, i64)> = (0..N).filter(|i| (10..=30).contains(&(i % 40))).map(|i| (i % 40, i)).collect();
        want.sort();
        if desc {
            want.reverse();
        }
        assert_eq!(keys, want, "descending {desc}");
    }
    assert_eq!(unordered_scans(&mut h), 0);
}

/// A locking unordered index scan locks every row it returns (a writer of one
/// waits until the scan's transaction ends) and none outside its range.
#[test]
fn locking_unordered_index_scan_locks_what_it_returns() {
    let (mut h, d) = setup(Knobs { scan_examine_per_step: 3, ..Knobs::default() });
    let t = d.id;
    let pk = d.index_by_name("PRIMARY").unwrap().id;
    let spec = ScanSpec {
        index: Some(pk),
        range: range(Bound::inclusive(int(100)), Bound::inclusive(int(119))),
        filter: Some(Filter::IsNotNull(2)),
        lock: LockMode::Exclusive,
        ordered: false,
        batch_rows: 3,
        ..ScanSpec::full(t)
    };
    let (rows, _) = h.scan_all(1, 1, false, spec).unwrap();
    let mut ids: Vec<i64> = rows.iter().map(|r| r[0].as_i64().unwrap()).collect();
    ids.sort();
    let want: Vec<i64> = (100..120).filter(|i| i % 5 != 0).collect();
    assert_eq!(ids, want);
    assert_eq!(unordered_scans(&mut h), 1);
    // Rows outside the range, or filtered out, are free.
    for free in [99, 120, 105] {
        let op = KeyOp::update(t, vec![Value::Int(free)], vec![(1, Value::Int(-1))]);
        assert!(h.autocommit(vec![op]).is_ok(), "row {free} is not locked");
    }
    // Every returned row is locked: a writer waits for the scan's transaction.
    for (n, id) in ids.iter().enumerate() {
        let op = KeyOp::update(t, vec![Value::Int(*id)], vec![(2, Value::str("other"))]);
        assert!(h.try_key(2, 10 + n as u64, ExecType::Commit, vec![op]).is_none(), "row {id} is locked");
    }
    let ops = ids.iter().map(|i| KeyOp::update(t, vec![Value::Int(*i)], vec![(2, Value::str("mine"))])).collect();
    assert_eq!(h.key(1, 1, ExecType::Commit, ops).unwrap().outcome, TxnOutcome::Committed);
    for n in 0..ids.len() {
        let c = h.take_key_reply(2, 10 + n as u64).expect("granted after commit").unwrap();
        assert_eq!(c.outcome, TxnOutcome::Committed);
    }
    assert_eq!(h.get(t, int(101)).unwrap()[2], Value::str("other"));
}
