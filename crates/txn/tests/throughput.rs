//! Rough throughput of key operations and scans through a whole node (run with
//! `cargo test -p norr-txn --release --test throughput -- --ignored --nocapture`).

use norr_knobs::Knobs;
use norr_signals::ops::{KeyOp, LockMode, ScanSpec};
use norr_signals::value::{ColumnType, Value};
use norr_signals::ExecType;
use norr_txn::testkit::{table_def, Harness};
use std::time::Instant;

#[test]
#[ignore]
fn key_ops_per_second() {
    let mut h = Harness::new(Knobs::default());
    let d = h
        .create_table(table_def(
            "bench",
            8,
            &[
                ("a", ColumnType::BigInt { unsigned: false }),
                (
                    "c",
                    ColumnType::Char {
                        len: 20,
                        collation: Default::default(),
                    },
                ),
            ],
        ))
        .unwrap();
    let t = d.id;
    let n: i64 = 200_000;
    let batch = 100;
    let start = Instant::now();
    for b in 0..n / batch {
        let ops = (0..batch)
            .map(|i| {
                let id = b * batch + i;
                KeyOp::insert(
                    t,
                    vec![Value::Int(id)],
                    vec![(1, Value::Int(id)), (2, Value::str("abcdefghij"))],
                )
            })
            .collect();
        h.key(1, b as u64, ExecType::Commit, ops).unwrap();
    }
    let el = start.elapsed();
    println!("insert: {:.0} rows/s", n as f64 / el.as_secs_f64());
    for (name, lock) in [
        ("committed read", LockMode::CommittedRead),
        ("exclusive read", LockMode::Exclusive),
    ] {
        let start = Instant::now();
        for b in 0..n / batch {
            let ops = (0..batch)
                .map(|i| KeyOp {
                    lock,
                    ..KeyOp::read(t, vec![Value::Int(b * batch + i)])
                })
                .collect();
            h.key(1, b as u64, ExecType::Commit, ops).unwrap();
        }
        println!(
            "{name}: {:.0} ops/s",
            n as f64 / start.elapsed().as_secs_f64()
        );
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
    println!(
        "update: {:.0} ops/s",
        n as f64 / start.elapsed().as_secs_f64()
    );
    let start = Instant::now();
    let (rows, _) = h
        .scan_all(
            1,
            1,
            true,
            ScanSpec {
                batch_rows: 1000,
                ..ScanSpec::full(t)
            },
        )
        .unwrap();
    assert_eq!(rows.len() as i64, n);
    println!(
        "scan: {:.0} rows/s",
        n as f64 / start.elapsed().as_secs_f64()
    );
}
