//! A deterministic cost probe for sqld's share of the sysbench range queries:
//! drives the SQL engine (prepared statements, binary result rows encoded as
//! `norr sqld` would send them) against a data node in another process, so
//! that `valgrind --tool=callgrind` counts sqld's instructions only.
//!
//! ```text
//! norr datad --listen 127.0.0.1:2299 &
//! cargo run --release -p norr-sql --example range_queries -- --addr 127.0.0.1:2299 --load
//! valgrind --tool=callgrind --callgrind-out-file=cg.out \
//!     target/release/examples/range_queries --addr 127.0.0.1:2299 --iters 200
//! callgrind_annotate --inclusive=yes cg.out | grep range_queries::run_
//! ```
//!
//! Each statement kind runs in its own `run_*` function, so its inclusive
//! instruction count divided by `--iters` is that statement's cost per
//! execution. `--load` (re)creates `rq.sbtest1` with `--rows` rows shaped like
//! sysbench's (c: 11-digit groups joined by '-', 119 characters; pad: 59).

use norr_signals::Value;
use norr_sql::engine::{Engine, EngineConfig, Prepared};
use norr_sql::protocol::value::binary_row;
use norr_sql::types::{QueryOutput, Session};
use std::sync::Arc;

// The allocator `norr sqld` runs with (crates/cli/src/main.rs): allocation
// costs differ a lot between allocators.
#[global_allocator]
static GLOBAL: norr_alloc::Allocator = norr_alloc::Allocator;

struct Args {
    addr: String,
    load: bool,
    rows: i64,
    iters: u32,
}

fn parse_args() -> Args {
    let mut a = Args { addr: "127.0.0.1:2299".into(), load: false, rows: 10_000, iters: 200 };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        match arg.as_str() {
            "--addr" => a.addr = val(),
            "--load" => a.load = true,
            "--rows" => a.rows = val().parse().expect("--rows N"),
            "--iters" => a.iters = val().parse().expect("--iters N"),
            other => panic!("unknown argument {other}"),
        }
    }
    a
}

/// A fixed pseudo-random sequence (the same on every run).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn digits(&mut self, groups: usize) -> String {
        let mut s = String::new();
        for g in 0..groups {
            if g > 0 {
                s.push('-');
            }
            for _ in 0..11 {
                s.push((b'0' + (self.next() % 10) as u8) as char);
            }
        }
        s
    }
}

async fn run(e: &Engine, s: &mut Session, sql: &str) {
    for r in e.execute_text(s, sql).await {
        r.unwrap_or_else(|err| panic!("{sql}: {err}"));
    }
}

async fn load(e: &Engine, s: &mut Session, rows: i64) {
    run(e, s, "DROP DATABASE IF EXISTS rq").await;
    run(e, s, "CREATE DATABASE rq").await;
    run(e, s, "USE rq").await;
    run(
        e,
        s,
        "CREATE TABLE sbtest1 (id INT NOT NULL AUTO_INCREMENT, k INT NOT NULL DEFAULT '0', \
         c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '', PRIMARY KEY (id), KEY k_1 (k))",
    )
    .await;
    let mut rng = Lcg(42);
    let mut id = 1;
    while id <= rows {
        let mut sql = String::from("INSERT INTO sbtest1 (id, k, c, pad) VALUES ");
        for i in 0..500.min(rows - id + 1) {
            if i > 0 {
                sql.push(',');
            }
            let k = 1 + rng.next() % rows as u64;
            sql.push_str(&format!("({}, {k}, '{}', '{}')", id + i, rng.digits(10), rng.digits(5)));
        }
        run(e, s, &sql).await;
        id += 500;
    }
}

/// Executes `p` with each parameter list and encodes every result row as a
/// binary-protocol row; returns the rows sent (so nothing is optimized away).
async fn exec_all(e: &Engine, s: &mut Session, p: &Prepared, params: &[Vec<Value>]) -> usize {
    let mut sent = 0;
    let mut buf = Vec::with_capacity(1 << 16);
    for ps in params {
        let out = e.execute_prepared(s, p, ps.clone()).await.unwrap_or_else(|err| panic!("{}: {err}", p.sql));
        let QueryOutput::Rows { columns, rows } = out else { panic!("{}: not rows", p.sql) };
        buf.clear();
        for r in &rows {
            binary_row(&mut buf, r, &columns);
        }
        sent += rows.len();
    }
    sent
}

macro_rules! measured {
    ($name:ident) => {
        #[inline(never)]
        fn $name(
            rt: &tokio::runtime::Runtime,
            e: &Engine,
            s: &mut Session,
            p: &Prepared,
            params: &[Vec<Value>],
        ) -> usize {
            rt.block_on(exec_all(e, s, p, params))
        }
    };
}

measured!(run_simple_range);
measured!(run_sum_range);
measured!(run_order_range);
measured!(run_distinct_range);
measured!(run_point_select);

fn main() {
    let a = parse_args();
    // One thread: the client's IO tasks run inside `block_on`, as in sqld's
    // default single session thread.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let (e, mut s): (Arc<Engine>, Session) = rt.block_on(async {
        let e = Engine::connect(&a.addr, EngineConfig::default()).await.expect("engine connects");
        let s = e.new_session(1, "root");
        (e, s)
    });
    if a.load {
        rt.block_on(load(&e, &mut s, a.rows));
        eprintln!("loaded {} rows into rq.sbtest1", a.rows);
        return;
    }
    let prep = |sql: &str| {
        let mut s2 = e.new_session(2, "root");
        rt.block_on(async {
            run(&e, &mut s2, "USE rq").await;
            e.prepare(&mut s2, sql).await.unwrap_or_else(|err| panic!("{sql}: {err}"))
        })
    };
    rt.block_on(run(&e, &mut s, "USE rq"));
    let simple = prep("SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ?");
    let sum = prep("SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN ? AND ?");
    let order = prep("SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c");
    let distinct = prep("SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c");
    let point = prep("SELECT c FROM sbtest1 WHERE id=?");

    let mut rng = Lcg(7);
    let ranges: Vec<Vec<Value>> = (0..a.iters)
        .map(|_| {
            let lo = 1 + (rng.next() % (a.rows as u64 - 99)) as i64;
            vec![Value::Int(lo), Value::Int(lo + 99)]
        })
        .collect();
    let points: Vec<Vec<Value>> =
        (0..a.iters).map(|_| vec![Value::Int(1 + (rng.next() % a.rows as u64) as i64)]).collect();

    // Warm-up (plans, buffers, the catalog), not measured.
    exec_all_blocking(&rt, &e, &mut s, &[&simple, &sum, &order, &distinct, &point], &ranges[..1], &points[..1]);

    let n1 = run_simple_range(&rt, &e, &mut s, &simple, &ranges);
    let n2 = run_sum_range(&rt, &e, &mut s, &sum, &ranges);
    let n3 = run_order_range(&rt, &e, &mut s, &order, &ranges);
    let n4 = run_distinct_range(&rt, &e, &mut s, &distinct, &ranges);
    let n5 = run_point_select(&rt, &e, &mut s, &point, &points);
    println!("iters {}: rows simple {n1}, sum {n2}, order {n3}, distinct {n4}, point {n5}", a.iters);
}

fn exec_all_blocking(
    rt: &tokio::runtime::Runtime,
    e: &Engine,
    s: &mut Session,
    ps: &[&Arc<Prepared>],
    ranges: &[Vec<Value>],
    points: &[Vec<Value>],
) {
    for (i, p) in ps.iter().enumerate() {
        let params = if i == ps.len() - 1 { points } else { ranges };
        rt.block_on(exec_all(e, s, p, params));
    }
}
