//! Pushed aggregates (`ScanSpec::aggregate`): each partition folds the rows
//! its scan finds (after range and filter, with the reader's own writes)
//! into one partial row per group. Checked against the same aggregates
//! computed here from the rows: COUNT(*), COUNT(col) skipping NULLs, exact
//! DECIMAL SUM (NULL over no value), MIN / MAX of dates and decimals, NULL
//! as a group, empty ranges, several partitions, batches and steps smaller
//! than the result; bad specs and too many groups refused, the node serving
//! on.

use norr_knobs::Knobs;
use norr_signals::ops::{AggFn, Bound, CmpOp, Filter, KeyOp, LockMode, ScanAggregate, ScanRange, ScanSpec};
use norr_signals::schema::{IndexKind, TableDef};
use norr_signals::value::{ColumnType, Date, Decimal, Value};
use norr_signals::{ErrorCode, ExecType, TxnOutcome};
use norr_txn::testkit::{index_def, table_def, Harness};
use std::collections::BTreeMap;

const N: i64 = 300;

/// (g, d, t) of row `id`: g in 0..12 or NULL, d a DECIMAL(12,2) or NULL,
/// t a date or NULL; spread by a cheap hash.
fn row(id: i64) -> (Value, Value, Value) {
    let h = (id * 7919 + 13) % 1009;
    let g = if h % 11 == 0 { Value::Null } else { Value::Int(h % 12) };
    let d =
        if h % 7 == 0 { Value::Null } else { Value::Decimal(Decimal { mantissa: (h as i128 - 500) * 37, scale: 2 }) };
    let t = if h % 5 == 0 {
        Value::Null
    } else {
        Value::Date(Date { year: 2000 + (h % 20) as u16, month: 1 + (h % 12) as u8, day: 1 + (h % 28) as u8 })
    };
    (g, d, t)
}

/// Table (id, g INT, d DECIMAL(12,2), t DATE, s VARCHAR) over 5 partitions,
/// ordered index on g.
fn setup(knobs: Knobs) -> (Harness, TableDef) {
    let mut h = Harness::new(knobs);
    let mut def = table_def(
        "agg",
        5,
        &[
            ("g", ColumnType::Int { unsigned: false }),
            ("d", ColumnType::Decimal { precision: 12, scale: 2 }),
            ("t", ColumnType::Date),
            ("s", ColumnType::Varchar { len: 10, collation: Default::default() }),
        ],
    );
    def.indexes.push(index_def("by_g", &[1], false, IndexKind::Ordered));
    let d = h.create_table(def).unwrap();
    let ops: Vec<KeyOp> = (0..N)
        .map(|i| {
            let (g, dv, t) = row(i);
            KeyOp::insert(d.id, vec![Value::Int(i)], vec![(1, g), (2, dv), (3, t), (4, Value::str("x"))])
        })
        .collect();
    h.autocommit(ops).unwrap();
    (h, d)
}

/// COUNT(*), COUNT(d), SUM(d), MIN(t), MAX(d), MAX(id), grouped by g.
fn aggs() -> Vec<AggFn> {
    vec![AggFn::CountStar, AggFn::Count(2), AggFn::Sum(2), AggFn::Min(3), AggFn::Max(2), AggFn::Max(0)]
}

/// One group's merged values: the aggregates above.
#[derive(Debug, Clone, PartialEq, Default)]
struct Acc {
    count: i64,
    count_d: i64,
    sum_d: Option<i128>,
    min_t: Option<Date>,
    max_d: Option<i128>,
    max_id: Option<i64>,
}

impl Acc {
    /// Fold a source row in (the reference).
    fn add_row(&mut self, id: i64, d: &Value, t: &Value) {
        self.count += 1;
        if let Value::Decimal(x) = d {
            assert_eq!(x.scale, 2);
            self.count_d += 1;
            self.sum_d = Some(self.sum_d.unwrap_or(0) + x.mantissa);
            self.max_d = Some(self.max_d.map_or(x.mantissa, |m| m.max(x.mantissa)));
        }
        if let Value::Date(x) = t {
            self.min_t = Some(self.min_t.map_or(*x, |m| m.min(*x)));
        }
        self.max_id = Some(self.max_id.map_or(id, |m| m.max(id)));
    }

    /// Merge a partition's partial results in (what a client does).
    fn add_partial(&mut self, p: &[Value]) {
        let int = |v: &Value| match v {
            Value::Int(i) => *i,
            o => panic!("count {o:?}"),
        };
        let dec2 = |v: &Value| match v {
            Value::Null => None,
            Value::Decimal(x) => {
                assert_eq!(x.scale, 2, "a DECIMAL(12,2) sum stays at scale 2");
                Some(x.mantissa)
            }
            o => panic!("decimal {o:?}"),
        };
        self.count += int(&p[0]);
        self.count_d += int(&p[1]);
        if let Some(s) = dec2(&p[2]) {
            self.sum_d = Some(self.sum_d.unwrap_or(0) + s);
        }
        match &p[3] {
            Value::Null => {}
            Value::Date(x) => self.min_t = Some(self.min_t.map_or(*x, |m| m.min(*x))),
            o => panic!("date {o:?}"),
        }
        if let Some(m) = dec2(&p[4]) {
            self.max_d = Some(self.max_d.map_or(m, |x| x.max(m)));
        }
        match &p[5] {
            Value::Null => {}
            Value::Int(i) => self.max_id = Some(self.max_id.map_or(*i, |m| m.max(*i))),
            o => panic!("id {o:?}"),
        }
    }
}

/// Group key: g as Option.
type Groups = BTreeMap<Option<i64>, Acc>;

fn expect(keep: impl Fn(i64, &Value, &Value, &Value) -> bool, grouped: bool) -> Groups {
    let mut m = Groups::new();
    for id in 0..N {
        let (g, d, t) = row(id);
        if keep(id, &g, &d, &t) {
            let k = if grouped { g.as_i64() } else { None };
            m.entry(k).or_default().add_row(id, &d, &t);
        }
    }
    m
}

fn merged(rows: &[Vec<Value>], grouped: bool) -> Groups {
    let mut m = Groups::new();
    for r in rows {
        let (k, p) = if grouped { (r[0].as_i64(), &r[1..]) } else { (None, &r[..]) };
        assert_eq!(p.len(), aggs().len(), "one partial per aggregate");
        m.entry(k).or_default().add_partial(p);
    }
    m
}

fn spec(d: &TableDef, grouped: bool) -> ScanSpec {
    let aggregate = ScanAggregate { group_by: if grouped { vec![1] } else { vec![] }, aggs: aggs(), max_groups: 64 };
    ScanSpec { ordered: false, aggregate: Some(aggregate), ..ScanSpec::full(d.id) }
}

fn g_range(lo: i64, hi: i64) -> ScanRange {
    ScanRange { low: Bound::inclusive(vec![Value::Int(lo)]), high: Bound::inclusive(vec![Value::Int(hi)]) }
}

#[test]
fn partials_merge_to_the_aggregates_of_the_rows() {
    for knobs in [Knobs::default(), Knobs { scan_examine_per_step: 3, ..Knobs::default() }] {
        let (mut h, d) = setup(knobs);
        for grouped in [false, true] {
            for batch_rows in [1, 4, 256] {
                let what = format!("grouped {grouped}, batch {batch_rows}");
                // Whole table.
                let s = ScanSpec { batch_rows, ..spec(&d, grouped) };
                let (rows, _) = h.scan_all(1, 1, true, s).unwrap();
                if grouped {
                    assert!(rows.len() <= 5 * 13, "{what}: at most one row per group and partition");
                } else {
                    assert_eq!(rows.len(), 5, "{what}: one row per partition");
                }
                assert_eq!(merged(&rows, grouped), expect(|_, _, _, _| true, grouped), "{what}");
                // An index range, ordered asked (ignored: partials have no order).
                let s = ScanSpec {
                    index: Some(d.indexes[0].id),
                    range: Some(g_range(3, 6)),
                    ordered: true,
                    batch_rows,
                    ..spec(&d, grouped)
                };
                let (rows, _) = h.scan_all(1, 1, true, s).unwrap();
                let in_range =
                    |_: i64, g: &Value, _: &Value, _: &Value| g.as_i64().is_some_and(|g| (3..=6).contains(&g));
                assert_eq!(merged(&rows, grouped), expect(in_range, grouped), "{what}: range");
                // A filter, and one partition.
                let f = Filter::Cmp { col: 0, op: CmpOp::Lt, value: Value::Int(150) };
                let s = ScanSpec { filter: Some(f), partitions: Some(vec![2]), batch_rows, ..spec(&d, grouped) };
                let (rows, _) = h.scan_all(1, 1, true, s).unwrap();
                let (all, _) = h
                    .scan_all(
                        1,
                        1,
                        true,
                        ScanSpec { partitions: Some(vec![2]), batch_rows: 256, ..ScanSpec::full(d.id) },
                    )
                    .unwrap();
                let in_p2: Vec<i64> = all.iter().map(|r| r[0].as_i64().unwrap()).collect();
                let keep = |id: i64, _: &Value, _: &Value, _: &Value| id < 150 && in_p2.contains(&id);
                assert_eq!(merged(&rows, grouped), expect(keep, grouped), "{what}: filter, partition 2");
            }
        }
    }
}

#[test]
fn no_rows_give_null_sums_and_zero_counts() {
    let (mut h, d) = setup(Knobs::default());
    let empty = ScanSpec { index: Some(d.indexes[0].id), range: Some(g_range(100, 200)), ..spec(&d, false) };
    let (rows, _) = h.scan_all(1, 1, true, empty.clone()).unwrap();
    let none = vec![Value::Int(0), Value::Int(0), Value::Null, Value::Null, Value::Null, Value::Null];
    assert_eq!(rows, vec![none; 5], "one row per partition: counts 0, the rest NULL");
    // Grouped: no group, no row.
    let s = ScanSpec { aggregate: spec(&d, true).aggregate, ..empty };
    assert!(h.scan_all(1, 1, true, s).unwrap().0.is_empty());
    // Only NULL values of d: COUNT(d) 0 and SUM(d) NULL, COUNT(*) not.
    let only_null_d = Filter::IsNull(2);
    let (rows, _) = h.scan_all(1, 1, true, ScanSpec { filter: Some(only_null_d), ..spec(&d, false) }).unwrap();
    let m = merged(&rows, false);
    let acc = &m[&None];
    assert!(acc.count > 0);
    assert_eq!((acc.count_d, acc.sum_d, acc.max_d), (0, None, None));
}

#[test]
fn a_transaction_aggregates_its_own_writes() {
    let (mut h, d) = setup(Knobs::default());
    let t = d.id;
    let nine = Value::Decimal(Decimal { mantissa: 900, scale: 2 });
    let ops = vec![
        KeyOp::insert(t, vec![Value::Int(1000)], vec![(1, Value::Int(5)), (2, nine.clone())]),
        KeyOp::delete(t, vec![Value::Int(0)]),
        KeyOp::update(t, vec![Value::Int(1)], vec![(2, nine.clone())]),
    ];
    assert_eq!(h.key(1, 1, ExecType::NoCommit, ops).unwrap().outcome, TxnOutcome::Open);
    let (rows, _) = h.scan_all(1, 1, false, spec(&d, true)).unwrap();
    let mut want = Groups::new();
    for id in (1..N).chain([1000]) {
        let (mut g, mut dv, mut tv) = row(id);
        if id == 1 {
            dv = nine.clone();
        }
        if id == 1000 {
            (g, dv, tv) = (Value::Int(5), nine.clone(), Value::Null);
        }
        want.entry(g.as_i64()).or_default().add_row(id, &dv, &tv);
    }
    assert_eq!(merged(&rows, true), want);
    // Others see the committed rows.
    let (rows, _) = h.scan_all(2, 1, true, spec(&d, true)).unwrap();
    assert_eq!(merged(&rows, true), expect(|_, _, _, _| true, true));
}

#[test]
fn bad_aggregates_and_too_many_groups_are_refused() {
    let (mut h, d) = setup(Knobs::default());
    let with = |f: &dyn Fn(&mut ScanAggregate)| {
        let mut s = spec(&d, true);
        f(s.aggregate.as_mut().unwrap());
        s
    };
    // 13 groups (12 values and NULL) in every partition.
    let e = h.scan_all(1, 1, true, with(&|a| a.max_groups = 3)).unwrap_err();
    assert_eq!(e.code, ErrorCode::AggregateTooManyGroups, "{e}");
    let cases: Vec<(&str, ScanSpec)> = vec![
        ("SUM of a string", with(&|a| a.aggs = vec![AggFn::Sum(4)])),
        ("MAX of a string", with(&|a| a.aggs = vec![AggFn::Max(4)])),
        ("GROUP BY a string", with(&|a| a.group_by = vec![4])),
        ("unknown column", with(&|a| a.aggs = vec![AggFn::Count(99)])),
        ("no groups allowed", with(&|a| a.max_groups = 0)),
        ("too many groups allowed", with(&|a| a.max_groups = norr_signals::ops::MAX_AGG_GROUPS + 1)),
        ("with a limit", ScanSpec { limit: Some(3), ..spec(&d, false) }),
        (
            "with a list of ranges",
            ScanSpec { index: Some(d.indexes[0].id), ranges: vec![g_range(1, 2)], ..spec(&d, false) },
        ),
    ];
    for (what, s) in cases {
        let e = h.scan_all(1, 1, true, s).expect_err(what);
        assert_eq!(e.code, ErrorCode::BadAggregate, "{what}: {e}");
    }
    // A locking aggregate in a transaction.
    let e = h.scan_all(1, 7, false, ScanSpec { lock: LockMode::Shared, ..spec(&d, false) }).unwrap_err();
    assert_eq!(e.code, ErrorCode::BadAggregate);
    // The node serves on, and COUNT of a string is fine.
    let (rows, _) = h.scan_all(1, 1, true, with(&|a| a.aggs = vec![AggFn::Count(4)])).unwrap();
    let total: i64 = rows.iter().map(|r| r[1].as_i64().unwrap()).sum();
    assert_eq!(total, N);
}
