//! Scans inside a transaction see its own uncommitted writes (inserted rows
//! appear, updated rows show their new values and new index position, deleted
//! rows disappear), in order, through filters, ranges, limits and projection;
//! other transactions and standalone scans still see committed rows only.

use norr_knobs::Knobs;
use norr_signals::ops::{Bound, CmpOp, Filter, KeyOp, LockMode, ScanRange, ScanSpec};
use norr_signals::schema::TableDef;
use norr_signals::value::Value;
use norr_signals::{ExecType, TxnOutcome};
use norr_txn::testkit::{k_s_table_def, Harness};
use std::collections::BTreeMap;

/// Rows by id: (k, s).
type Model = BTreeMap<i64, (i64, Option<String>)>;

/// Table (id, k INT, s VARCHAR) over 4 partitions, ordered index on k.
fn setup(knobs: Knobs, rows: i64) -> (Harness, TableDef, Model) {
    let mut h = Harness::new(knobs);
    let d = h.create_table(k_s_table_def("o", 4)).unwrap();
    let mut m = Model::new();
    let ops: Vec<KeyOp> = (0..rows)
        .map(|i| {
            let s = format!("c{i}");
            m.insert(i, (i % 20, Some(s.clone())));
            KeyOp::insert(d.id, vec![Value::Int(i)], vec![(1, Value::Int(i % 20)), (2, Value::str(&s))])
        })
        .collect();
    h.autocommit(ops).unwrap();
    (h, d, m)
}

fn row_of(id: i64, (k, s): &(i64, Option<String>)) -> Vec<Value> {
    vec![Value::Int(id), Value::Int(*k), s.as_deref().map_or(Value::Null, Value::str)]
}

fn sorted(mut rows: Vec<Vec<Value>>) -> Vec<Vec<Value>> {
    rows.sort_by_key(|r| r[0].as_i64().unwrap());
    rows
}

/// Every row of the model, by id.
fn all(m: &Model) -> Vec<Vec<Value>> {
    m.iter().map(|(id, v)| row_of(*id, v)).collect()
}

/// Rows with lo <= k <= hi in (k, id) order.
fn by_k(m: &Model, lo: i64, hi: i64, desc: bool) -> Vec<Vec<Value>> {
    let mut v: Vec<(i64, i64)> =
        m.iter().filter(|(_, (k, _))| (lo..=hi).contains(k)).map(|(id, (k, _))| (*k, *id)).collect();
    v.sort();
    if desc {
        v.reverse();
    }
    v.into_iter().map(|(_, id)| row_of(id, &m[&id])).collect()
}

fn range(lo: i64, hi: i64) -> ScanRange {
    ScanRange { low: Bound::inclusive(vec![Value::Int(lo)]), high: Bound::inclusive(vec![Value::Int(hi)]) }
}

/// A small deterministic generator (xorshift).
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[test]
fn scans_in_a_transaction_see_its_inserts_updates_and_deletes() {
    let (mut h, d, committed) = setup(Knobs { scan_examine_per_step: 3, ..Knobs::default() }, 60);
    let (t, ix) = (d.id, d.indexes[0].id);
    let mut m = committed.clone();
    // Insert 60..70 (k = id % 20), move 0..10 to k = 100 + id, delete 10..20,
    // insert then update 70 and insert then delete 71.
    let mut ops = Vec::new();
    for i in 60..70 {
        ops.push(KeyOp::insert(t, vec![Value::Int(i)], vec![(1, Value::Int(i % 20)), (2, Value::str("new"))]));
        m.insert(i, (i % 20, Some("new".into())));
    }
    for i in 0..10 {
        ops.push(KeyOp::update(t, vec![Value::Int(i)], vec![(1, Value::Int(100 + i))]));
        m.get_mut(&i).unwrap().0 = 100 + i;
    }
    for i in 10..20 {
        ops.push(KeyOp::delete(t, vec![Value::Int(i)]));
        m.remove(&i);
    }
    ops.push(KeyOp::insert(t, vec![Value::Int(70)], vec![(1, Value::Int(5))]));
    ops.push(KeyOp::update(t, vec![Value::Int(70)], vec![(1, Value::Int(-1)), (2, Value::str("moved"))]));
    m.insert(70, (-1, Some("moved".into())));
    ops.push(KeyOp::insert(t, vec![Value::Int(71)], vec![(1, Value::Int(6))]));
    ops.push(KeyOp::delete(t, vec![Value::Int(71)]));
    assert_eq!(h.key(1, 1, ExecType::NoCommit, ops).unwrap().outcome, TxnOutcome::Open);

    for lock in [LockMode::CommittedRead, LockMode::Shared, LockMode::Exclusive] {
        for batch_rows in [1, 4, 64] {
            let what = format!("lock {lock:?}, batch {batch_rows}");
            let base = ScanSpec { lock, batch_rows, ..ScanSpec::full(t) };
            // Full scan.
            let (rows, _) = h.scan_all(1, 1, false, base.clone()).unwrap();
            assert_eq!(sorted(rows), all(&m), "full scan, {what}");
            // Ordered scans, whole index and a range, both directions.
            for desc in [false, true] {
                let spec = ScanSpec { index: Some(ix), descending: desc, ..base.clone() };
                let (rows, _) = h.scan_all(1, 1, false, spec).unwrap();
                assert_eq!(rows, by_k(&m, i64::MIN, i64::MAX, desc), "ordered, desc {desc}, {what}");
                let spec = ScanSpec { index: Some(ix), range: Some(range(3, 104)), descending: desc, ..base.clone() };
                let (rows, _) = h.scan_all(1, 1, false, spec.clone()).unwrap();
                assert_eq!(rows, by_k(&m, 3, 104, desc), "range, desc {desc}, {what}");
                // Unordered: the same rows, own writes included.
                let (rows, _) = h.scan_all(1, 1, false, ScanSpec { ordered: false, ..spec }).unwrap();
                assert_eq!(sorted(rows), sorted(by_k(&m, 3, 104, desc)), "unordered range, desc {desc}, {what}");
            }
            // Filter (matches only new values), limit and projection.
            let spec = ScanSpec {
                index: Some(ix),
                filter: Some(Filter::Cmp { col: 2, op: CmpOp::Eq, value: Value::str("new") }),
                limit: Some(7),
                projection: vec![1, 0],
                ..base.clone()
            };
            let (rows, _) = h.scan_all(1, 1, false, spec).unwrap();
            let want: Vec<Vec<Value>> = by_k(&m, i64::MIN, i64::MAX, false)
                .into_iter()
                .filter(|r| r[2] == Value::str("new"))
                .take(7)
                .map(|r| vec![r[1].clone(), r[0].clone()])
                .collect();
            assert_eq!(rows, want, "filter + limit + projection, {what}");
        }
    }
    // Others see committed rows only: a standalone scan and another transaction.
    let (rows, _) = h.scan_all(2, 1, true, ScanSpec::full(t)).unwrap();
    assert_eq!(sorted(rows), all(&committed));
    let spec = ScanSpec { index: Some(ix), range: Some(range(3, 104)), ..ScanSpec::full(t) };
    let (rows, _) = h.scan_all(2, 2, false, spec).unwrap();
    assert_eq!(rows, by_k(&committed, 3, 104, false));
    // Rollback: the transaction's scan view is gone with it.
    h.key(1, 1, ExecType::Rollback, vec![]).unwrap();
    let (rows, _) = h.scan_all(1, 3, false, ScanSpec::full(t)).unwrap();
    assert_eq!(sorted(rows), all(&committed));
}

#[test]
fn committed_own_writes_are_seen_once() {
    let (mut h, d, mut m) = setup(Knobs::default(), 30);
    let (t, ix) = (d.id, d.indexes[0].id);
    h.key(1, 1, ExecType::NoCommit, vec![KeyOp::update(t, vec![Value::Int(3)], vec![(1, Value::Int(50))])]).unwrap();
    m.get_mut(&3).unwrap().0 = 50;
    // A scan opened before the commit, read after it: row 3 once, new image.
    let spec = ScanSpec { index: Some(ix), batch_rows: 2, ..ScanSpec::full(t) };
    let (id, first) = h.scan_open(1, 1, false, spec);
    let mut rows = first.unwrap().unwrap().rows;
    assert_eq!(h.key(1, 1, ExecType::Commit, vec![]).unwrap().outcome, TxnOutcome::Committed);
    loop {
        let c = h.scan_next(1, 1, id, false).unwrap().unwrap();
        rows.extend(c.rows);
        if c.done {
            break;
        }
    }
    assert_eq!(rows, by_k(&m, i64::MIN, i64::MAX, false));
}

#[test]
fn random_writes_then_scans_match_a_model() {
    for seed in 1..6u64 {
        let (mut h, d, committed) = setup(Knobs { scan_examine_per_step: 5, ..Knobs::default() }, 80);
        let (t, ix) = (d.id, d.indexes[0].id);
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut m = committed.clone();
        for round in 0..4 {
            let mut ops = Vec::new();
            for _ in 0..15 {
                let id = rng.below(120) as i64;
                let k = rng.below(30) as i64 - 5;
                let op = match (m.contains_key(&id), rng.below(3)) {
                    (false, _) => {
                        m.insert(id, (k, None));
                        KeyOp::insert(t, vec![Value::Int(id)], vec![(1, Value::Int(k))])
                    }
                    (true, 0) => {
                        m.remove(&id);
                        KeyOp::delete(t, vec![Value::Int(id)])
                    }
                    (true, _) => {
                        let s = format!("r{round}");
                        m.insert(id, (k, Some(s.clone())));
                        KeyOp::update(t, vec![Value::Int(id)], vec![(1, Value::Int(k)), (2, Value::str(&s))])
                    }
                };
                ops.push(op);
            }
            h.key(1, 1, ExecType::NoCommit, ops).unwrap();
            let lo = rng.below(20) as i64 - 5;
            let hi = lo + rng.below(15) as i64;
            let desc = rng.below(2) == 1;
            let lock = [LockMode::CommittedRead, LockMode::Shared][rng.below(2) as usize];
            let batch_rows = 1 + rng.below(10) as u32;
            let spec = ScanSpec {
                index: Some(ix),
                range: Some(range(lo, hi)),
                descending: desc,
                lock,
                batch_rows,
                ..ScanSpec::full(t)
            };
            let (rows, _) = h.scan_all(1, 1, false, spec).unwrap();
            assert_eq!(rows, by_k(&m, lo, hi, desc), "seed {seed} round {round}");
            let (rows, _) = h.scan_all(1, 1, false, ScanSpec { lock, batch_rows, ..ScanSpec::full(t) }).unwrap();
            assert_eq!(sorted(rows), all(&m), "seed {seed} round {round}: full scan");
        }
        let (rows, _) = h.scan_all(2, 1, true, ScanSpec::full(t)).unwrap();
        assert_eq!(sorted(rows), all(&committed), "seed {seed}: others see committed rows");
        assert_eq!(h.key(1, 1, ExecType::Commit, vec![]).unwrap().outcome, TxnOutcome::Committed);
        let (rows, _) = h.scan_all(2, 2, true, ScanSpec::full(t)).unwrap();
        assert_eq!(sorted(rows), all(&m), "seed {seed}: after commit");
    }
}
