//! Ignored measurement tests: speed and the memory overhead curve.
//! `cargo test --release -p norr-storage perf -- --ignored --nocapture`

use super::tests::{index, kv, kv_table};
use super::*;
use norr_signals::schema::IndexKind;

/// Rough speed figures (run with `cargo test --release -p norr-storage perf -- --ignored --nocapture`).
#[test]
#[ignore]
fn perf_smoke() {
    let n = 1_000_000i64;
    let mut s = Storage::new(4 << 30);
    s.create_table(&kv_table(9, 1)).unwrap();
    let t0 = std::time::Instant::now();
    for k in 0..n {
        s.insert(9, 0, kv(k, Some("some text"), k % 1000)).unwrap();
    }
    println!(
        "insert without secondary index {:.2} M/s",
        n as f64 / t0.elapsed().as_secs_f64() / 1e6
    );
    s.drop_table(9).unwrap();
    let mut def = kv_table(1, 1);
    def.indexes
        .push(index(2, "n", vec![2], false, IndexKind::Ordered));
    s.create_table(&def).unwrap();
    let t0 = std::time::Instant::now();
    for k in 0..n {
        s.insert(1, 0, kv(k, Some("some text"), k % 1000)).unwrap();
    }
    let t1 = std::time::Instant::now();
    let mut found = 0;
    for k in 0..n {
        let enc = s.encode_pk(1, &[Value::Int(k)]).unwrap();
        found += s.lookup(1, 0, &enc).is_some() as i64;
    }
    assert_eq!(found, n);
    let t2 = std::time::Instant::now();
    let mut cur = s.scan_open(1, 0, None, None, false).unwrap();
    let mut out = Vec::new();
    let mut rows = 0;
    loop {
        out.clear();
        let done = s
            .scan_next(1, 0, &mut cur, None, 1000, 1000, &mut out)
            .unwrap();
        rows += out.len();
        if done {
            break;
        }
    }
    assert_eq!(rows as i64, n);
    let t3 = std::time::Instant::now();
    for k in 0..n {
        let enc = s.encode_pk(1, &[Value::Int(k)]).unwrap();
        let r = s.lookup(1, 0, &enc).unwrap();
        s.delete(1, 0, r);
    }
    let t4 = std::time::Instant::now();
    let rate = |d: std::time::Duration| n as f64 / d.as_secs_f64() / 1e6;
    println!(
        "insert {:.2} M/s, pk lookup {:.2} M/s, full scan {:.2} M rows/s, delete {:.2} M/s",
        rate(t1 - t0),
        rate(t2 - t1),
        rate(t3 - t2),
        rate(t4 - t3)
    );
}

#[test]
#[ignore]
fn perf_insert_only() {
    let n = 1_000_000i64;
    let mut s = Storage::new(4 << 30);
    s.create_table(&kv_table(9, 1)).unwrap();
    let t0 = std::time::Instant::now();
    for k in 0..n {
        s.insert(9, 0, kv(k, Some("some text"), k % 1000)).unwrap();
    }
    println!(
        "insert without secondary index {:.2} M/s",
        n as f64 / t0.elapsed().as_secs_f64() / 1e6
    );
}

/// The overhead at several table sizes, including just after the hash index
/// doubled (114_689 rows): `cargo test -p norr-storage overhead_curve -- --ignored --nocapture`.
#[test]
#[ignore]
fn overhead_curve() {
    for rows in [1_000, 10_000, 100_000, 114_689, 200_000, 1_000_000] {
        println!(
            "{rows:>9} rows: {:.2} bytes/row",
            crate::memory::measure_row_overhead(rows)
        );
    }
}
