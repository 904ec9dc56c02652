//! Throughput of key operations and scans through a whole data node driven
//! in-process by `testkit::Harness` (no network, virtual time).
//!
//! ```text
//! cargo run -p norr-txn --release --example txn_throughput            # all figures
//! cargo run -p norr-txn --release --example txn_throughput -- 200000  # rows
//! cargo run -p norr-txn --release --example txn_throughput -- 20000 update 500
//! ```
//!
//! The `update` mode mirrors `norr bench --mix update` (a `k BIGINT, v
//! VARBINARY(100)` table, transactions of 64 updates that replace `v`): it
//! loads the rows, then runs the given number of batches. It is the fixed
//! workload to profile with `valgrind --tool=callgrind` (instruction counts do
//! not depend on the machine load); run it with 0 batches too and subtract to
//! get the cost of the updates alone, or collect only inside `run_updates`:
//!
//! ```text
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*run_updates*' \
//!     target/release/examples/txn_throughput 20000 update 1000
//! ```

use norr_knobs::Knobs;
use norr_signals::ops::{KeyOp, LockMode, ScanSpec};
use norr_signals::value::{ColumnType, Value};
use norr_signals::ExecType;
use norr_txn::testkit::{table_def, Harness};
use std::time::Instant;

const UPDATE_BATCH: i64 = 64;
const VALUE_BYTES: usize = 100;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: i64 = args.first().map_or(200_000, |s| s.parse().expect("rows: a number"));
    match args.get(1).map(String::as_str) {
        None | Some("all") => all(n),
        Some("update") => {
            let batches: i64 = args.get(2).map_or(1000, |s| s.parse().expect("batches: a number"));
            update_only(n, batches)
        }
        Some(other) => panic!("unknown mode {other:?}: all | update"),
    }
}

/// `k BIGINT, v VARBINARY(100)`, `n` rows, then `batches` transactions of 64 updates.
fn update_only(n: i64, batches: i64) {
    let mut h = Harness::new(Knobs::default());
    let d =
        h.create_table(table_def("bench_kv", 8, &[("v", ColumnType::Varbinary { len: VALUE_BYTES as u32 })])).unwrap();
    let t = d.id;
    let batch = 100;
    for b in 0..(n + batch - 1) / batch {
        let ops = (b * batch..((b + 1) * batch).min(n))
            .map(|id| KeyOp::insert(t, vec![Value::Int(id)], vec![(1, value(0))]))
            .collect();
        h.key(1, b as u64, ExecType::Commit, ops).unwrap();
    }
    let start = Instant::now();
    run_updates(&mut h, t, n, batches);
    let el = start.elapsed();
    println!(
        "update (batch {UPDATE_BATCH}, {n} rows): {:.0} ops/s",
        (batches * UPDATE_BATCH) as f64 / el.as_secs_f64().max(1e-9)
    );
}

fn value(seed: i64) -> Value {
    Value::Bytes((0..VALUE_BYTES).map(|i| (i as i64 + seed) as u8).collect())
}

/// The measured part of `update` mode (callgrind:
/// `--collect-atstart=no --toggle-collect='*run_updates*'`).
#[inline(never)]
fn run_updates(h: &mut Harness, t: u32, n: i64, batches: i64) {
    let mut key: i64 = 0;
    for b in 0..batches {
        let v = value(b + 1);
        let ops = (0..UPDATE_BATCH)
            .map(|_| {
                // A stride coprime with most row counts spreads the keys.
                key = (key + 7919) % n;
                KeyOp::update(t, vec![Value::Int(key)], vec![(1, v.clone())])
            })
            .collect();
        let c = h.key(1, (1 << 32) + b as u64, ExecType::Commit, ops).unwrap();
        assert_eq!(c.results.len(), UPDATE_BATCH as usize);
    }
}

fn all(n: i64) {
    let mut h = Harness::new(Knobs::default());
    let d = h
        .create_table(table_def(
            "bench",
            8,
            &[
                ("a", ColumnType::BigInt { unsigned: false }),
                ("c", ColumnType::Char { len: 20, collation: Default::default() }),
            ],
        ))
        .unwrap();
    let t = d.id;
    let batch = 100;
    let start = Instant::now();
    for b in 0..n / batch {
        let ops = (0..batch)
            .map(|i| {
                let id = b * batch + i;
                KeyOp::insert(t, vec![Value::Int(id)], vec![(1, Value::Int(id)), (2, Value::str("abcdefghij"))])
            })
            .collect();
        h.key(1, b as u64, ExecType::Commit, ops).unwrap();
    }
    let el = start.elapsed();
    println!("insert: {:.0} rows/s", n as f64 / el.as_secs_f64());
    for (name, lock) in [("committed read", LockMode::CommittedRead), ("exclusive read", LockMode::Exclusive)] {
        let start = Instant::now();
        for b in 0..n / batch {
            let ops = (0..batch).map(|i| KeyOp { lock, ..KeyOp::read(t, vec![Value::Int(b * batch + i)]) }).collect();
            h.key(1, b as u64, ExecType::Commit, ops).unwrap();
        }
        println!("{name}: {:.0} ops/s", n as f64 / start.elapsed().as_secs_f64());
    }
    let start = Instant::now();
    for b in 0..n / batch {
        let ops = (0..batch)
            .map(|i| {
                let mut op = KeyOp::update(t, vec![Value::Int(b * batch + i)], vec![]);
                op.increments = vec![(1, Value::Int(1))];
                op
            })
            .collect();
        h.key(1, b as u64, ExecType::Commit, ops).unwrap();
    }
    println!("update: {:.0} ops/s", n as f64 / start.elapsed().as_secs_f64());
    let start = Instant::now();
    let (rows, _) = h.scan_all(1, 1, true, ScanSpec { batch_rows: 1000, ..ScanSpec::full(t) }).unwrap();
    assert_eq!(rows.len() as i64, n);
    println!("scan: {:.0} rows/s", n as f64 / start.elapsed().as_secs_f64());
}
