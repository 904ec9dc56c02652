//! Restore speed of the storage engine (a measurement, not a test):
//! `cargo run --release -p norr-storage --example restore_perf -- [MB of row data] [runs] [sbtest|kv]`
//!
//! Restores a sysbench-shaped table (`sbtest`: id INT pk, k INT with an
//! ordered index, c CHAR(120), pad CHAR(60), plus the PRIMARY ordered index
//! every table gets; 188 bytes of row data per row) from checkpoint rows, as a
//! system restart does: `restore_begin`, one `restore_put` per row (with its
//! checkpoint part and GCI), `restore_finish` (builds the two ordered
//! indexes). The rows are made before each batch is timed, as a checkpoint
//! reader would hand them over decoded; file reading and decoding are not in
//! the figure. Also: a (BIGINT pk, BIGINT, CHAR(20)) table (36 bytes a row),
//! and the speed of the checkpoint scan (`lcp_next`) of the restored table.
//!
//! Prints, per run and as the median of the runs, MB/s of row data
//! (`data_bytes_of_row`, 1 MB = 10^6 bytes) for the puts alone and for the
//! whole restore including the index build, on one thread.

use norr_signals::schema::{ColumnDef, IndexDef, IndexKind, PartitionScheme, TableDef};
use norr_signals::value::{Collation, ColumnType, Value};
use norr_storage::{LcpRow, PartSet, Storage};
use std::time::{Duration, Instant};

/// The data node's allocator, so the figure is the node's.
#[global_allocator]
static GLOBAL: norr_alloc::Allocator = norr_alloc::Allocator;

const BATCH: usize = 1000;

fn sbtest() -> TableDef {
    let ci = Collation::CaseInsensitive;
    TableDef {
        id: 1,
        version: 1,
        name: "sbtest1".into(),
        columns: vec![
            ColumnDef::new("id", ColumnType::Int { unsigned: false }).not_null(),
            ColumnDef::new("k", ColumnType::Int { unsigned: false }).not_null(),
            ColumnDef::new("c", ColumnType::Char { len: 120, collation: ci }).not_null(),
            ColumnDef::new("pad", ColumnType::Char { len: 60, collation: ci }).not_null(),
        ],
        primary_key: vec![0],
        partitioning: PartitionScheme::Key { columns: vec![] },
        partitions: 1,
        indexes: vec![
            IndexDef { id: 1, name: "PRIMARY".into(), columns: vec![0], unique: false, kind: IndexKind::Ordered },
            IndexDef { id: 2, name: "k_1".into(), columns: vec![1], unique: false, kind: IndexKind::Ordered },
        ],
        extra: vec![],
        options: Default::default(),
    }
}

fn kv() -> TableDef {
    TableDef {
        id: 2,
        version: 1,
        name: "kv".into(),
        columns: vec![
            ColumnDef::new("id", ColumnType::BigInt { unsigned: false }).not_null(),
            ColumnDef::new("v", ColumnType::BigInt { unsigned: false }),
            ColumnDef::new("c", ColumnType::Char { len: 20, collation: Collation::CaseInsensitive }),
        ],
        primary_key: vec![0],
        partitioning: PartitionScheme::Key { columns: vec![] },
        partitions: 1,
        indexes: vec![IndexDef {
            id: 1,
            name: "PRIMARY".into(),
            columns: vec![0],
            unique: false,
            kind: IndexKind::Ordered,
        }],
        extra: vec![],
        options: Default::default(),
    }
}

/// sysbench's `c` / `pad` strings: groups of 11 digits joined by '-'.
fn digits(seed: u64, groups: usize) -> String {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut s = String::with_capacity(groups * 12);
    for g in 0..groups {
        if g > 0 {
            s.push('-');
        }
        for _ in 0..11 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            s.push((b'0' + (x % 10) as u8) as char);
        }
    }
    s
}

fn sbtest_row(i: u64) -> Vec<Value> {
    vec![
        Value::Int(i as i64 + 1),
        Value::Int((i.wrapping_mul(2_654_435_761) % 1_000_000) as i64),
        Value::str(&digits(i, 10)),
        Value::str(&digits(i + 7, 5)),
    ]
}

fn kv_row(i: u64) -> Vec<Value> {
    vec![Value::Int(i as i64), Value::Int(i.wrapping_mul(7) as i64), Value::str(&format!("{:020}", i))]
}

struct Run {
    put: Spent,
    finish: Spent,
    scan: Spent,
    data_bytes: u64,
}

/// Restore `rows` rows made by `make` into a fresh storage; time the puts,
/// the index build and a full checkpoint scan of the result.
fn run(def: &TableDef, rows: u64, make: fn(u64) -> Vec<Value>) -> Run {
    let mut s = Storage::new(64 << 30);
    s.create_table(def).expect("create");
    s.restore_begin(def.id).expect("restore_begin");
    // The checkpoint files say how many rows are coming.
    s.reserve_rows(def.id, 0, rows).expect("reserve_rows");
    // Rows arrive as a checkpoint of the source wrote them: in page order,
    // each page's rows in one part (~120 sbtest rows per 32 KiB page).
    let rows_per_page = (32 * 1024 / (s.data_bytes_of_row(def.id, &make(0)) + 16)).max(1) as u64;
    let mut put = Spent::default();
    let mut data_bytes = 0u64;
    let mut batch: Vec<LcpRow> = Vec::with_capacity(BATCH);
    let mut i = 0;
    while i < rows {
        batch.clear();
        while batch.len() < BATCH && i < rows {
            let row = make(i);
            data_bytes += s.data_bytes_of_row(def.id, &row) as u64;
            batch.push(LcpRow { lcp_part: ((i / rows_per_page) % 2048) as u16, gci: 1 + i / 100_000, row });
            i += 1;
        }
        let ((), spent) = timed(|| {
            for r in batch.drain(..) {
                s.restore_put(def.id, 0, r.lcp_part, r.row, r.gci).expect("restore_put");
            }
        });
        put += spent;
    }
    let ((), finish) = timed(|| s.restore_finish(def.id).expect("restore_finish"));
    assert_eq!(s.row_count(def.id), rows);
    let (seen, scan_time) = timed(|| {
        let (mut scan, _) = s.lcp_begin(def.id, 0, PartSet::all(), 0).expect("lcp_begin");
        let mut out = Vec::with_capacity(BATCH);
        let mut seen = 0;
        loop {
            out.clear();
            let done = s.lcp_next(&mut scan, BATCH, &mut out).expect("lcp_next");
            seen += out.len() as u64;
            if done {
                break seen;
            }
        }
    });
    assert_eq!(seen, rows);
    Run { put, finish, scan: scan_time, data_bytes }
}

/// CPU time this thread has run (Linux `/proc/thread-self/schedstat`): on a
/// shared machine the wall clock also counts time spent waiting for a core.
fn cpu_time() -> Duration {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    Duration::from_nanos(s.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(0))
}

/// Wall-clock and CPU time of a piece of work.
#[derive(Default, Clone, Copy)]
struct Spent {
    wall: Duration,
    cpu: Duration,
}

impl std::ops::AddAssign for Spent {
    fn add_assign(&mut self, o: Spent) {
        self.wall += o.wall;
        self.cpu += o.cpu;
    }
}

impl std::ops::Add for Spent {
    type Output = Spent;
    fn add(mut self, o: Spent) -> Spent {
        self += o;
        self
    }
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, Spent) {
    let (w, c) = (Instant::now(), cpu_time());
    let out = f();
    (out, Spent { wall: w.elapsed(), cpu: cpu_time() - c })
}

fn mbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e6
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn measure(name: &str, def: &TableDef, rows: u64, runs: usize, make: fn(u64) -> Vec<Value>) {
    // Per run: (puts, restore with index build, checkpoint scan) in MB/s,
    // by CPU time and by wall-clock time.
    let (mut cpu, mut wall): (Vec<[f64; 3]>, Vec<[f64; 3]>) = (Vec::new(), Vec::new());
    for n in 0..runs {
        let r = run(def, rows, make);
        let rate =
            |f: fn(&Spent) -> Duration| [f(&r.put), f(&(r.put + r.finish)), f(&r.scan)].map(|d| mbps(r.data_bytes, d));
        let (c, w) = (rate(|s| s.cpu), rate(|s| s.wall));
        println!(
            "{name} run {}: {rows} rows, {:.0} MB of row data; CPU: puts {:.2} s, index build {:.2} s; \
             MB/s by CPU (wall): puts {:.0} ({:.0}), restore {:.0} ({:.0}), checkpoint scan {:.0} ({:.0})",
            n + 1,
            r.data_bytes as f64 / 1e6,
            r.put.cpu.as_secs_f64(),
            r.finish.cpu.as_secs_f64(),
            c[0],
            w[0],
            c[1],
            w[1],
            c[2],
            w[2]
        );
        cpu.push(c);
        wall.push(w);
    }
    let med = |v: &[[f64; 3]], i: usize| median(v.iter().map(|x| x[i]).collect());
    println!(
        "{name} median of {runs}, MB/s of row data by CPU time (wall clock): puts {:.0} ({:.0}), \
         restore with index build {:.0} ({:.0}), checkpoint scan {:.0} ({:.0})",
        med(&cpu, 0),
        med(&wall, 0),
        med(&cpu, 1),
        med(&wall, 1),
        med(&cpu, 2),
        med(&wall, 2)
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mb: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5).max(1);
    let only = args.next();
    if only.as_deref().is_none_or(|o| o == "sbtest") {
        measure("sbtest", &sbtest(), mb * 1_000_000 / 188, runs, sbtest_row);
    }
    if only.as_deref().is_none_or(|o| o == "kv") {
        measure("kv", &kv(), mb * 1_000_000 / 36, runs, kv_row);
    }
}
