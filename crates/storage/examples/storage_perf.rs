//! Storage speed and memory figures (a measurement, not a test):
//! `cargo run --release -p norr-storage --example storage_perf [rows]`
//!
//! Prints insert / primary-key lookup / full scan / delete rates for a
//! (BIGINT pk, VARCHAR(40), INT) table with one ordered index, and the per-row
//! memory overhead curve of a (BIGINT pk, BIGINT, CHAR(20)) table.

use norr_signals::schema::{ColumnDef, IndexDef, IndexKind, PartitionScheme, TableDef};
use norr_signals::value::{Collation, ColumnType, Value};
use norr_storage::Storage;
use std::time::Instant;

fn table(with_index: bool) -> TableDef {
    TableDef {
        id: 1,
        version: 1,
        name: "perf".into(),
        columns: vec![
            ColumnDef::new("k", ColumnType::BigInt { unsigned: false }).not_null(),
            ColumnDef::new("u", ColumnType::Varchar { len: 40, collation: Collation::CaseInsensitive }),
            ColumnDef::new("n", ColumnType::Int { unsigned: false }),
        ],
        primary_key: vec![0],
        partitioning: PartitionScheme::Key { columns: vec![] },
        partitions: 1,
        indexes: if with_index {
            vec![IndexDef { id: 2, name: "n".into(), columns: vec![2], unique: false, kind: IndexKind::Ordered }]
        } else {
            vec![]
        },
        extra: vec![],
        options: Default::default(),
    }
}

fn row(k: i64) -> Vec<Value> {
    vec![Value::Int(k), Value::str("some text"), Value::Int(k % 1000)]
}

fn main() {
    let n: i64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let rate = |d: std::time::Duration| n as f64 / d.as_secs_f64() / 1e6;

    let mut s = Storage::new(4 << 30);
    s.create_table(&table(false)).expect("create");
    let t0 = Instant::now();
    for k in 0..n {
        s.insert(1, 0, row(k)).expect("insert");
    }
    println!("insert, no secondary index: {:.2} M rows/s", rate(t0.elapsed()));

    let mut s = Storage::new(4 << 30);
    s.create_table(&table(true)).expect("create");
    let t0 = Instant::now();
    for k in 0..n {
        s.insert(1, 0, row(k)).expect("insert");
    }
    let t1 = Instant::now();
    let mut found = 0;
    for k in 0..n {
        let enc = s.encode_pk(1, &[Value::Int(k)]).expect("pk");
        found += s.lookup(1, 0, &enc).is_some() as i64;
    }
    assert_eq!(found, n);
    let t2 = Instant::now();
    let mut cur = s.scan_open(1, 0, None, None, false).expect("scan");
    let mut out = Vec::new();
    let mut rows = 0usize;
    loop {
        out.clear();
        let done = s.scan_next(1, 0, &mut cur, None, 1000, 1000, &mut out).expect("scan");
        rows += out.len();
        if done {
            break;
        }
    }
    assert_eq!(rows as i64, n);
    let t3 = Instant::now();
    for k in 0..n {
        let enc = s.encode_pk(1, &[Value::Int(k)]).expect("pk");
        let r = s.lookup(1, 0, &enc).expect("row");
        s.delete(1, 0, r);
    }
    let t4 = Instant::now();
    println!(
        "one ordered index: insert {:.2} M/s, pk lookup {:.2} M/s, full scan {:.2} M rows/s, delete {:.2} M/s",
        rate(t1 - t0),
        rate(t2 - t1),
        rate(t3 - t2),
        rate(t4 - t3)
    );

    for rows in [1_000, 10_000, 100_000, 114_689, 200_000, 1_000_000] {
        println!(
            "overhead at {rows:>9} rows: {:.2} bytes/row ({:.2} without the PRIMARY ordered index)",
            norr_storage::memory::measure_row_overhead(rows, true),
            norr_storage::memory::measure_row_overhead(rows, false)
        );
    }
}
