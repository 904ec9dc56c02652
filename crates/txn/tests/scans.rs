//! Full-table and ordered-index scans: batches, order, bounds, filters,
//! projection, limit, locking scans.

use norr_knobs::Knobs;
use norr_signals::ops::{Bound, CmpOp, Filter, KeyOp, LockMode, ScanRange, ScanSpec};
use norr_signals::schema::{IndexKind, TableDef};
use norr_signals::value::{ColumnType, Value};
use norr_signals::{ErrorCode, ExecType, TxnOutcome};
use norr_txn::testkit::{index_def, k_s_table_def, table_def, Harness};

const N: i64 = 200;

/// Table (id, k INT, s VARCHAR) with an ordered index on k; k = id % 50 (so
/// duplicates), s NULL for ids divisible by 7, else "name<id>".
fn setup(knobs: Knobs) -> (Harness, TableDef) {
    let mut h = Harness::new(knobs);
    let d = h.create_table(k_s_table_def("s", 5)).unwrap();
    let ops: Vec<KeyOp> = (0..N)
        .map(|i| {
            let s = if i % 7 == 0 { Value::Null } else { Value::str(&format!("name{i}")) };
            KeyOp::insert(d.id, vec![Value::Int(i)], vec![(1, Value::Int(i % 50)), (2, s)])
        })
        .collect();
    h.autocommit(ops).unwrap();
    (h, d)
}

fn ids(rows: &[Vec<Value>]) -> Vec<i64> {
    let mut v: Vec<i64> = rows.iter().map(|r| r[0].as_i64().unwrap()).collect();
    v.sort();
    v
}

#[test]
fn full_scan_in_batches() {
    let (mut h, d) = setup(small_steps());
    let spec = ScanSpec { batch_rows: 7, ..ScanSpec::full(d.id) };
    let (rows, batches) = h.scan_all(1, 1, true, spec).unwrap();
    assert_eq!(ids(&rows), (0..N).collect::<Vec<_>>());
    assert!(batches >= (N as usize).div_ceil(7));
    // Limit and projection.
    let spec = ScanSpec { batch_rows: 16, limit: Some(25), projection: vec![2, 0], ..ScanSpec::full(d.id) };
    let (rows, _) = h.scan_all(1, 1, true, spec).unwrap();
    assert_eq!(rows.len(), 25);
    assert!(rows.iter().all(|r| r.len() == 2 && r[1].as_i64().is_some()));
    // Partition pruning.
    let spec = ScanSpec { partitions: Some(vec![0]), ..ScanSpec::full(d.id) };
    let (some, _) = h.scan_all(1, 1, true, spec).unwrap();
    assert!(!some.is_empty() && some.len() < N as usize);
    // Empty table.
    let e = h.create_table(table_def("empty", 3, &[])).unwrap();
    let (rows, batches) = h.scan_all(1, 1, true, ScanSpec::full(e.id)).unwrap();
    assert!(rows.is_empty());
    assert_eq!(batches, 1);
}

#[test]
fn filters_are_pushed_down() {
    let (mut h, d) = setup(Knobs::default());
    let scan = |h: &mut Harness, f: Filter| {
        let spec = ScanSpec { filter: Some(f), ..ScanSpec::full(d.id) };
        ids(&h.scan_all(1, 1, true, spec).unwrap().0)
    };
    let want = |p: &dyn Fn(i64) -> bool| (0..N).filter(|i| p(*i)).collect::<Vec<_>>();
    assert_eq!(scan(&mut h, Filter::Cmp { col: 1, op: CmpOp::Lt, value: Value::Int(3) }), want(&|i| i % 50 < 3));
    assert_eq!(scan(&mut h, Filter::IsNull(2)), want(&|i| i % 7 == 0));
    assert_eq!(
        scan(
            &mut h,
            Filter::And(vec![
                Filter::Cmp { col: 1, op: CmpOp::Ge, value: Value::Int(10) },
                Filter::Not(Box::new(Filter::Or(vec![
                    Filter::Cmp { col: 1, op: CmpOp::Gt, value: Value::Int(11) },
                    Filter::IsNull(2),
                ]))),
            ])
        ),
        want(&|i| (10..=11).contains(&(i % 50)) && i % 7 != 0)
    );
    assert_eq!(
        scan(&mut h, Filter::Like { col: 2, pattern: b"NAME1_".to_vec() }),
        want(&|i| (10..20).contains(&i) && i % 7 != 0)
    );
    // Bad filter: unknown column.
    let spec = ScanSpec { filter: Some(Filter::IsNull(9)), ..ScanSpec::full(d.id) };
    assert_eq!(h.scan_all(1, 1, true, spec).unwrap_err().code, ErrorCode::BadFilter);
}

#[test]
fn ordered_scans_merge_partitions_in_index_order() {
    let (mut h, d) = setup(small_steps());
    let ix = d.indexes[0].id;
    let k_of = |r: &Vec<Value>| r[1].as_i64().unwrap();
    for desc in [false, true] {
        let spec = ScanSpec { index: Some(ix), descending: desc, batch_rows: 9, ..ScanSpec::full(d.id) };
        let (rows, _) = h.scan_all(1, 1, true, spec).unwrap();
        assert_eq!(rows.len(), N as usize);
        let ks: Vec<i64> = rows.iter().map(k_of).collect();
        let mut sorted = ks.clone();
        sorted.sort();
        if desc {
            sorted.reverse();
        }
        assert_eq!(ks, sorted, "index order, descending={desc}");
        // Ties are ordered by primary key.
        let key = |r: &Vec<Value>| (k_of(r), r[0].as_i64().unwrap());
        for w in rows.windows(2) {
            assert!(if desc { key(&w[0]) > key(&w[1]) } else { key(&w[0]) < key(&w[1]) });
        }
    }
    // Bounds: 10 <= k < 13, ascending; then 10 < k <= 13 descending with limit.
    let range = ScanRange { low: Bound::inclusive(vec![Value::Int(10)]), high: Bound::exclusive(vec![Value::Int(13)]) };
    let spec = ScanSpec { index: Some(ix), range: Some(range), batch_rows: 4, ..ScanSpec::full(d.id) };
    let (rows, _) = h.scan_all(1, 1, true, spec).unwrap();
    assert_eq!(rows.iter().map(k_of).collect::<Vec<_>>(), [10, 10, 10, 10, 11, 11, 11, 11, 12, 12, 12, 12]);
    let range = ScanRange { low: Bound::exclusive(vec![Value::Int(10)]), high: Bound::inclusive(vec![Value::Int(13)]) };
    let spec =
        ScanSpec { index: Some(ix), range: Some(range), descending: true, limit: Some(6), ..ScanSpec::full(d.id) };
    let (rows, _) = h.scan_all(1, 1, true, spec).unwrap();
    assert_eq!(rows.iter().map(k_of).collect::<Vec<_>>(), [13, 13, 13, 13, 12, 12]);
    // Filter and projection on an ordered scan.
    let range = ScanRange { low: Bound::inclusive(vec![Value::Int(40)]), high: Bound::unbounded() };
    let spec = ScanSpec {
        index: Some(ix),
        range: Some(range),
        filter: Some(Filter::IsNotNull(2)),
        projection: vec![1],
        ..ScanSpec::full(d.id)
    };
    let (rows, _) = h.scan_all(1, 1, true, spec).unwrap();
    let expect: Vec<Vec<Value>> = {
        let mut v: Vec<(i64, i64)> = (0..N).filter(|i| i % 50 >= 40 && i % 7 != 0).map(|i| (i % 50, i)).collect();
        v.sort();
        v.into_iter().map(|(k, _)| vec![Value::Int(k)]).collect()
    };
    assert_eq!(rows, expect);
    // A column projected twice comes back twice (values move out of the
    // row read, the repeat is a copy).
    let range = ScanRange { low: Bound::inclusive(vec![Value::Int(40)]), high: Bound::unbounded() };
    let spec = ScanSpec {
        index: Some(ix),
        range: Some(range),
        filter: Some(Filter::IsNotNull(2)),
        projection: vec![1, 0, 1],
        ..ScanSpec::full(d.id)
    };
    let (rows, _) = h.scan_all(1, 1, true, spec).unwrap();
    assert_eq!(rows.len(), expect.len());
    for (r, e) in rows.iter().zip(&expect) {
        assert_eq!((&r[0], &r[2]), (&e[0], &e[0]));
        assert_eq!(r[0].as_i64().unwrap(), r[1].as_i64().unwrap() % 50);
    }
    // Bad bounds.
    let range = ScanRange { low: Bound::inclusive(vec![Value::Int(1), Value::Int(2)]), high: Bound::unbounded() };
    let spec = ScanSpec { index: Some(ix), range: Some(range), ..ScanSpec::full(d.id) };
    assert_eq!(h.scan_all(1, 1, true, spec).unwrap_err().code, ErrorCode::BadScanBound);
    let range = ScanRange { low: Bound::inclusive(vec![Value::str("x")]), high: Bound::unbounded() };
    let spec = ScanSpec { index: Some(ix), range: Some(range), ..ScanSpec::full(d.id) };
    assert_eq!(h.scan_all(1, 1, true, spec).unwrap_err().code, ErrorCode::BadScanBound);
    let range = ScanRange { low: Bound::unbounded(), high: Bound::unbounded() };
    let spec = ScanSpec { range: Some(range), ..ScanSpec::full(d.id) };
    assert_eq!(h.scan_all(1, 1, true, spec).unwrap_err().code, ErrorCode::BadScanBound);
}

#[test]
fn scan_errors_and_close() {
    let (mut h, d) = setup(Knobs::default());
    assert_eq!(h.scan_all(1, 1, true, ScanSpec::full(999)).unwrap_err().code, ErrorCode::NoSuchTable);
    let spec = ScanSpec { index: Some(999), ..ScanSpec::full(d.id) };
    assert_eq!(h.scan_all(1, 1, true, spec).unwrap_err().code, ErrorCode::NoSuchIndex);
    let spec = ScanSpec { batch_rows: 10, ..ScanSpec::full(d.id) };
    let (id, r) = h.scan_open(1, 1, true, spec);
    let c = r.unwrap().unwrap();
    assert_eq!((c.rows.len(), c.done), (10, false));
    let c = h.scan_next(1, 1, id, true).unwrap().unwrap();
    assert!(c.done && c.rows.is_empty());
    let e = h.scan_next(1, 1, id, false).unwrap().unwrap_err();
    assert_eq!(e.error.code, ErrorCode::NoSuchScan);
    // Nothing left open anywhere.
    let _ = h.advance_ms(10);
    assert_eq!(h.stats().open_transactions, 0);
}

#[test]
fn locking_scan_then_update_found_rows() {
    let (mut h, d) = setup(small_steps());
    let t = d.id;
    let spec = ScanSpec {
        lock: LockMode::Exclusive,
        filter: Some(Filter::Cmp { col: 1, op: CmpOp::Eq, value: Value::Int(5) }),
        batch_rows: 2,
        ..ScanSpec::full(t)
    };
    let (rows, _) = h.scan_all(1, 1, false, spec).unwrap();
    assert_eq!(ids(&rows), vec![5, 55, 105, 155]);
    // Locked: another writer waits.
    assert!(h
        .try_key(2, 1, ExecType::Commit, vec![KeyOp::update(t, vec![Value::Int(55)], vec![(2, Value::str("other"))])])
        .is_none());
    // Committed reads are not blocked.
    assert_eq!(h.get(t, vec![Value::Int(55)]).unwrap()[2], Value::str("name55"));
    let ops = ids(&rows)
        .into_iter()
        .map(|i| KeyOp::update(t, vec![Value::Int(i)], vec![(2, Value::str("locked"))]))
        .collect();
    let c = h.key(1, 1, ExecType::Commit, ops).unwrap();
    assert_eq!(c.outcome, TxnOutcome::Committed);
    let c = h.take_key_reply(2, 1).expect("granted after commit").unwrap();
    assert_eq!(c.outcome, TxnOutcome::Committed);
    assert_eq!(h.get(t, vec![Value::Int(5)]).unwrap()[2], Value::str("locked"));
    assert_eq!(h.get(t, vec![Value::Int(55)]).unwrap()[2], Value::str("other"));
}

#[test]
fn locking_scan_waits_and_rereads_under_the_lock() {
    let (mut h, d) = setup(Knobs::default());
    let t = d.id;
    // Another transaction changes row 5 so it no longer matches, and deletes 55.
    h.key(
        2,
        1,
        ExecType::NoCommit,
        vec![KeyOp::update(t, vec![Value::Int(5)], vec![(1, Value::Int(6))]), KeyOp::delete(t, vec![Value::Int(55)])],
    )
    .unwrap();
    let spec = ScanSpec {
        lock: LockMode::Shared,
        filter: Some(Filter::Cmp { col: 1, op: CmpOp::Eq, value: Value::Int(5) }),
        ..ScanSpec::full(t)
    };
    let (id, r) = h.scan_open(1, 1, false, spec);
    assert!(r.is_none(), "the scan waits for the row locks");
    h.key(2, 1, ExecType::Commit, vec![]).unwrap();
    let out = h.run();
    h.inbox.extend(out);
    let c = h.take_scan_reply(1, id).expect("scan resumed").unwrap();
    assert!(c.done);
    assert_eq!(ids(&c.rows), vec![105, 155]);
    // Rows that did not qualify after the wait are not kept locked; the
    // returned ones are.
    h.autocommit(vec![KeyOp::update(t, vec![Value::Int(5)], vec![(2, Value::str("free"))])]).unwrap();
    assert!(h.try_key(3, 1, ExecType::Commit, vec![KeyOp::update(t, vec![Value::Int(105)], vec![])]).is_none());
    h.key(1, 1, ExecType::Commit, vec![]).unwrap();
    assert_eq!(h.take_key_reply(3, 1).unwrap().unwrap().outcome, TxnOutcome::Committed);
}

#[test]
fn locking_scan_lock_timeout_aborts_the_transaction() {
    let knobs = Knobs { lock_wait_timeout_ms: 100, ..Knobs::default() };
    let (mut h, d) = setup(knobs);
    let t = d.id;
    h.key(2, 1, ExecType::NoCommit, vec![KeyOp::update(t, vec![Value::Int(3)], vec![(2, Value::str("x"))])]).unwrap();
    h.key(1, 1, ExecType::NoCommit, vec![KeyOp::insert(t, vec![Value::Int(1000)], vec![])]).unwrap();
    let (id, r) = h.scan_open(1, 1, false, ScanSpec { lock: LockMode::Exclusive, ..ScanSpec::full(t) });
    assert!(r.is_none());
    let out = h.advance_ms(150);
    h.inbox.extend(out);
    let e = h.take_scan_reply(1, id).expect("scan failed").unwrap_err();
    assert_eq!(e.error.code, ErrorCode::LockWaitTimeout);
    // The transaction was aborted with it: its insert is gone, its locks released.
    assert_eq!(h.get(t, vec![Value::Int(1000)]), None);
    h.key(2, 1, ExecType::Commit, vec![]).unwrap();
    h.autocommit(vec![KeyOp::update(t, vec![Value::Int(4)], vec![(2, Value::str("y"))])]).unwrap();
    assert_eq!(h.stats().open_transactions, 0);
}

/// Tiny scan steps so every scan crosses many step signals.
fn small_steps() -> Knobs {
    Knobs { scan_examine_per_step: 3, ..Knobs::default() }
}

#[test]
fn locking_ordered_scan_skips_rows_that_moved_while_waiting() {
    let (mut h, d) = setup(Knobs::default());
    let (t, ix) = (d.id, d.indexes[0].id);
    // Row 10 (k = 10) is moved to k = 45 by a transaction the scan waits for.
    h.key(2, 1, ExecType::NoCommit, vec![KeyOp::update(t, vec![Value::Int(10)], vec![(1, Value::Int(45))])]).unwrap();
    let range = ScanRange { low: Bound::inclusive(vec![Value::Int(10)]), high: Bound::inclusive(vec![Value::Int(11)]) };
    let spec = ScanSpec { index: Some(ix), range: Some(range), lock: LockMode::Exclusive, ..ScanSpec::full(t) };
    let (id, r) = h.scan_open(1, 1, false, spec);
    assert!(r.is_none());
    h.key(2, 1, ExecType::Commit, vec![]).unwrap();
    let out = h.run();
    h.inbox.extend(out);
    let c = h.take_scan_reply(1, id).unwrap().unwrap();
    let got: Vec<(i64, i64)> = c.rows.iter().map(|r| (r[1].as_i64().unwrap(), r[0].as_i64().unwrap())).collect();
    assert_eq!(got, vec![(10, 60), (10, 110), (10, 160), (11, 11), (11, 61), (11, 111), (11, 161)]);
    h.key(1, 1, ExecType::Commit, vec![]).unwrap();
    assert_eq!(h.counters()["lqh: locked scan row moved in the index"], 1);
}

#[test]
fn scan_failing_between_batches_is_reported_on_the_next_request() {
    let knobs = Knobs { lock_wait_timeout_ms: 100, ..Knobs::default() };
    let mut h = Harness::new(knobs);
    let d = h.create_table(table_def("two", 2, &[("v", ColumnType::Int { unsigned: false })])).unwrap();
    let t = d.id;
    h.autocommit((0..20).map(|i| KeyOp::insert(t, vec![Value::Int(i)], vec![])).collect()).unwrap();
    // Lock one row of each partition... but only one partition's row is locked:
    // the other partition's scan delivers, the locked one times out later.
    let spec = ScanSpec { partitions: Some(vec![0]), ..ScanSpec::full(t) };
    let (p0, _) = h.scan_all(1, 1, true, spec).unwrap();
    let victim = p0[0][0].as_i64().unwrap();
    h.key(2, 1, ExecType::NoCommit, vec![KeyOp::update(t, vec![Value::Int(victim)], vec![(1, Value::Int(1))])])
        .unwrap();
    let spec = ScanSpec { lock: LockMode::Shared, batch_rows: 1, ..ScanSpec::full(t) };
    let (id, r) = h.scan_open(1, 7, false, spec);
    let c = r.expect("partition 1 delivers at once").unwrap();
    assert!(!c.done);
    // The client thinks; meanwhile the other partition's lock wait times out.
    let out = h.advance_ms(200);
    assert!(out.iter().all(|e| e.to.node != 1), "nothing unasked: {out:?}");
    // The transaction is already aborted: its locks are free.
    h.autocommit(vec![KeyOp::update(t, vec![Value::Int(c.rows[0][0].as_i64().unwrap())], vec![(1, Value::Int(2))])])
        .unwrap();
    let e = h.scan_next(1, 7, id, false).unwrap().unwrap_err();
    assert_eq!(e.error.code, ErrorCode::LockWaitTimeout);
    // The handle is free again (the SCAN_TABREF told the client).
    assert_eq!(h.key(1, 7, ExecType::Commit, vec![]).unwrap().outcome, TxnOutcome::Committed);
    h.key(2, 1, ExecType::Commit, vec![]).unwrap();
    assert_eq!(h.stats().open_transactions, 0);
}

#[test]
fn descending_scan_with_only_a_low_bound() {
    let (mut h, d) = setup(small_steps());
    let ix = d.indexes[0].id;
    for (inclusive, batch) in [(false, 3), (true, 1), (false, 100)] {
        let low = Bound { values: vec![Value::Int(40)], inclusive };
        let range = ScanRange { low, high: Bound::unbounded() };
        let spec = ScanSpec {
            index: Some(ix),
            range: Some(range),
            descending: true,
            batch_rows: batch,
            ..ScanSpec::full(d.id)
        };
        let (rows, _) = h.scan_all(1, 1, true, spec).unwrap();
        let ks: Vec<i64> = rows.iter().map(|r| r[1].as_i64().unwrap()).collect();
        let mut want: Vec<i64> =
            (0..N).map(|i| i % 50).filter(|k| if inclusive { *k >= 40 } else { *k > 40 }).collect();
        want.sort();
        want.reverse();
        assert_eq!(ks, want, "inclusive={inclusive} batch={batch}");
    }
}

#[test]
fn scan_keeps_a_lock_an_operation_of_its_transaction_relies_on() {
    let (mut h, d) = setup(Knobs::default());
    let t = d.id;
    // U holds row 5.
    h.key(2, 1, ExecType::NoCommit, vec![KeyOp::update(t, vec![Value::Int(5)], vec![(2, Value::str("u"))])]).unwrap();
    // T: an update of row 5 (moving it out of the scan's filter) and a locking
    // scan that also needs row 5, both waiting.
    assert!(h
        .try_key(1, 1, ExecType::NoCommit, vec![KeyOp::update(t, vec![Value::Int(5)], vec![(1, Value::Int(6))])])
        .is_none());
    let spec = ScanSpec {
        lock: LockMode::Exclusive,
        filter: Some(Filter::Cmp { col: 1, op: CmpOp::Eq, value: Value::Int(5) }),
        ..ScanSpec::full(t)
    };
    let (id, r) = h.scan_open(1, 1, false, spec);
    assert!(r.is_none());
    h.key(2, 1, ExecType::Commit, vec![]).unwrap();
    let out = h.run();
    h.inbox.extend(out);
    assert_eq!(h.take_key_reply(1, 1).unwrap().unwrap().outcome, TxnOutcome::Open);
    let c = h.take_scan_reply(1, id).unwrap().unwrap();
    assert_eq!(ids(&c.rows), vec![55, 105, 155], "row 5 no longer matches (own update)");
    // T's update of row 5 still holds its lock.
    assert!(h.try_key(3, 1, ExecType::Commit, vec![KeyOp::update(t, vec![Value::Int(5)], vec![])]).is_none());
    h.key(1, 1, ExecType::Commit, vec![]).unwrap();
    assert_eq!(h.take_key_reply(3, 1).unwrap().unwrap().outcome, TxnOutcome::Committed);
    assert_eq!(h.get(t, vec![Value::Int(5)]).unwrap()[1], Value::Int(6));
}

/// Ordered-index keys longer than the 16-byte prefix TC's merge compares
/// first, of different lengths and sharing long prefixes: the merged stream
/// is still in (key, pk) order both ways, and a range over them returns the
/// rows inside it.
#[test]
fn ordered_merge_of_long_keys_sharing_prefixes() {
    let mut h = Harness::new(small_steps());
    let mut def = table_def("long", 7, &[("s", ColumnType::Varchar { len: 60, collation: Default::default() })]);
    def.indexes.push(index_def("by_s", &[1], false, IndexKind::Ordered));
    let d = h.create_table(def).unwrap();
    let ix = d.indexes[0].id;
    let s_of = |i: i64| {
        let stem = "common-prefix-longer-than-sixteen-bytes";
        match i % 4 {
            0 => stem.to_string(),
            1 => format!("{stem}{}", i % 13),
            2 => stem[..(i % 20) as usize].to_string(),
            _ => format!("{stem}-{:03}", i),
        }
    };
    let n = 300i64;
    let ops: Vec<KeyOp> =
        (0..n).map(|i| KeyOp::insert(d.id, vec![Value::Int(i)], vec![(1, Value::str(&s_of(i)))])).collect();
    h.autocommit(ops).unwrap();
    let mut want: Vec<(String, i64)> = (0..n).map(|i| (s_of(i), i)).collect();
    want.sort();
    let got = |rows: Vec<Vec<Value>>| -> Vec<(String, i64)> {
        rows.iter()
            .map(|r| (String::from_utf8(r[1].as_bytes().unwrap().to_vec()).unwrap(), r[0].as_i64().unwrap()))
            .collect()
    };
    for desc in [false, true] {
        let spec = ScanSpec { index: Some(ix), descending: desc, batch_rows: 11, ..ScanSpec::full(d.id) };
        let rows = got(h.scan_all(1, 1, true, spec).unwrap().0);
        let mut w = want.clone();
        if desc {
            w.reverse();
        }
        assert_eq!(rows, w, "descending={desc}");
    }
    let (lo, hi) = ("common-prefix-longer-than-sixteen-bytes1", "common-prefix-longer-than-sixteen-bytes5");
    let range = ScanRange { low: Bound::inclusive(vec![Value::str(lo)]), high: Bound::exclusive(vec![Value::str(hi)]) };
    let spec = ScanSpec { index: Some(ix), range: Some(range), batch_rows: 5, ..ScanSpec::full(d.id) };
    let rows = got(h.scan_all(1, 1, true, spec).unwrap().0);
    let w: Vec<(String, i64)> = want.into_iter().filter(|(s, _)| s.as_str() >= lo && s.as_str() < hi).collect();
    assert!(w.len() > 10);
    assert_eq!(rows, w);
}

/// A PRIMARY-index range whose filter restates it (`id BETWEEN a AND b`
/// sent as range and filter, as SQL does): TC drops the restated conjuncts,
/// the rows are the same, and a conjunct the range does not imply still
/// filters.
#[test]
fn filter_restating_the_range_is_dropped() {
    let (mut h, d) = setup(Knobs::default());
    let ix = d.index_by_name("PRIMARY").expect("every table has a PRIMARY ordered index").id;
    let (a, b) = (40i64, 139i64);
    let range = ScanRange { low: Bound::inclusive(vec![Value::Int(a)]), high: Bound::inclusive(vec![Value::Int(b)]) };
    let between = Filter::And(vec![
        Filter::Cmp { col: 0, op: CmpOp::Ge, value: Value::Int(a) },
        Filter::Cmp { col: 0, op: CmpOp::Le, value: Value::Int(b) },
    ]);
    let dropped = |h: &mut Harness| h.counters().get("tc: scan filter implied by the range").copied().unwrap_or(0);
    let spec = ScanSpec {
        index: Some(ix),
        range: Some(range.clone()),
        filter: Some(between.clone()),
        projection: vec![2],
        ..ScanSpec::full(d.id)
    };
    let (rows, _) = h.scan_all(1, 1, true, spec).unwrap();
    let want: Vec<Vec<Value>> =
        (a..=b).map(|i| vec![if i % 7 == 0 { Value::Null } else { Value::str(&format!("name{i}")) }]).collect();
    assert_eq!(rows, want);
    assert_eq!(dropped(&mut h), 1);
    // With a conjunct the range does not imply: it still applies.
    let spec = ScanSpec {
        index: Some(ix),
        range: Some(range),
        filter: Some(Filter::And(vec![between, Filter::Cmp { col: 1, op: CmpOp::Lt, value: Value::Int(10) }])),
        projection: vec![0],
        ..ScanSpec::full(d.id)
    };
    let (rows, _) = h.scan_all(1, 1, true, spec).unwrap();
    let want: Vec<Vec<Value>> = (a..=b).filter(|i| i % 50 < 10).map(|i| vec![Value::Int(i)]).collect();
    assert_eq!(rows, want);
    assert_eq!(dropped(&mut h), 1, "a filter with a conjunct left is not counted");
}
