//! Micro-benchmark: a primary-key range of `span` rows read as one batch of
//! key reads (the SQL planner's `PkRange` path) vs one range scan of the
//! `PRIMARY` ordered index, through a whole data node driven in-process by
//! `testkit::Harness` (no network, virtual time). sysbench's range queries
//! (`id BETWEEN ? AND ?+99`) are the case that matters: span 100.
//!
//! ```text
//! cargo run -p norr-txn --release --example pk_range -- [rows] [span] [rounds] [sql]
//! ```
//!
//! With `sql` = 1 the scan asks what sqld asks for sysbench's
//! `SELECT c ... WHERE id BETWEEN ? AND ?`: columns `id, c` (sqld re-checks
//! the condition) and the condition also as a filter.
//!
//! Both paths are timed alternately in the same run, several rounds; the
//! median per path is printed with the ratio.

use norr_knobs::Knobs;
use norr_signals::ops::{Bound, CmpOp, Filter, KeyOp, ScanRange, ScanSpec};
use norr_signals::value::{Collation, ColumnType, Value};
use norr_signals::{ExecType, OpResult};
use norr_txn::testkit::{table_def, Harness};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, d: i64| args.get(i).map_or(d, |s| s.parse().expect("a number"));
    let (n, span, rounds, sql) = (arg(0, 100_000), arg(1, 100), arg(2, 7), arg(3, 0) != 0);
    let mut h = Harness::new(Knobs::default());
    // sysbench's sbtest: id INT pk, k INT, c CHAR(120), pad CHAR(60).
    let d = h
        .create_table(table_def(
            "sbtest",
            8,
            &[
                ("k", ColumnType::Int { unsigned: false }),
                ("c", ColumnType::Char { len: 120, collation: Collation::CaseInsensitive }),
                ("pad", ColumnType::Char { len: 60, collation: Collation::CaseInsensitive }),
            ],
        ))
        .unwrap();
    let (t, pk_ix) = (d.id, d.index_by_name("PRIMARY").expect("PRIMARY ordered index").id);
    for b in 0..(n + 999) / 1000 {
        let ops = (b * 1000..((b + 1) * 1000).min(n))
            .map(|id| {
                let c = Value::str(&format!("{:0120}", id * 7919 % 1_000_003));
                KeyOp::insert(t, vec![Value::Int(id)], vec![(1, Value::Int(id % 1000)), (2, c), (3, Value::str("pad"))])
            })
            .collect();
        h.key(1, b as u64, ExecType::Commit, ops).unwrap();
    }
    let queries = 2000i64;
    let mut txn = 1_000_000u64;
    let mut keys_ns = Vec::new();
    let mut scan_ns = Vec::new();
    for _ in 0..rounds {
        // Key reads: one batch of `span` reads of column c, committed.
        let start = Instant::now();
        let mut rows = 0usize;
        for q in 0..queries {
            let lo = (q * 7919) % (n - span);
            let ops = (lo..lo + span)
                .map(|id| {
                    let mut op = KeyOp::read(t, vec![Value::Int(id)]);
                    op.projection = vec![2];
                    op
                })
                .collect();
            txn += 1;
            let c = h.key(1, txn, ExecType::Commit, ops).unwrap();
            rows += c.results.iter().filter(|r| matches!(r, OpResult::Ok(Some(_)))).count();
        }
        keys_ns.push(start.elapsed().as_nanos() as f64 / queries as f64);
        assert_eq!(rows, (queries * span) as usize);
        // Ordered scan of the PRIMARY index over the same ranges.
        let start = Instant::now();
        let mut rows = 0usize;
        for q in 0..queries {
            let lo = (q * 7919) % (n - span);
            let (a, b) = (Value::Int(lo), Value::Int(lo + span - 1));
            let spec = ScanSpec {
                index: Some(pk_ix),
                range: Some(ScanRange {
                    low: Bound::inclusive(vec![a.clone()]),
                    high: Bound::inclusive(vec![b.clone()]),
                }),
                projection: if sql { vec![0, 2] } else { vec![2] },
                filter: sql.then(|| {
                    Filter::And(vec![
                        Filter::Cmp { col: 0, op: CmpOp::Ge, value: a },
                        Filter::Cmp { col: 0, op: CmpOp::Le, value: b },
                    ])
                }),
                batch_rows: 1024,
                ..ScanSpec::full(t)
            };
            rows += h.scan_all(1, 0, true, spec).unwrap().0.len();
        }
        scan_ns.push(start.elapsed().as_nanos() as f64 / queries as f64);
        assert_eq!(rows, (queries * span) as usize);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    let (k, s) = (median(&mut keys_ns), median(&mut scan_ns));
    println!("rows {n}, span {span}, {queries} queries x {rounds} rounds (median):");
    println!("  batched key reads:         {:8.1} us/query", k / 1000.0);
    println!("  PRIMARY index range scan:  {:8.1} us/query", s / 1000.0);
    println!("  key reads / scan:          {:8.2}x", k / s);
}
