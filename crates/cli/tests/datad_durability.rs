//! `norr datad --data-dir`: a node killed with SIGKILL under a write load
//! restarts with every transaction up to its last complete global
//! checkpoint, and with whole transactions only; a second process on the
//! same directory is refused.

use norr_client::blocking::Client;
use norr_client::{table_def, ColumnDef, ColumnType, ExecType, KeyOp, ScanSpec, TableId, Value};
use norr_durability::sysfile::{SysFileStore, PATHS};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NORR: &str = env!("CARGO_BIN_EXE_norr");

struct Datad {
    child: Child,
    addr: String,
    /// Lines printed before the address (the restart report among them).
    log: Vec<String>,
}

fn start(dir: &Path) -> Datad {
    let mut child = Command::new(NORR)
        .args(["datad", "--listen", "127.0.0.1:0", "--data-memory", "64M", "--data-dir"])
        .arg(dir)
        .args(["--set", "gcp_interval_ms=30", "--set", "redo_file_bytes=4M"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn norr datad");
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let mut log = Vec::new();
    let addr = loop {
        let line = match lines.next() {
            Some(l) => l.unwrap(),
            None => panic!("datad exited before listening: {log:?}"),
        };
        if let Some(rest) = line.split(" listening on ").nth(1) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
        log.push(line);
    };
    // Keep draining stderr so the node never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Datad { child, addr, log }
}

/// The last complete GCI the node's system file records.
fn complete_gci(dir: &Path) -> u64 {
    let read = |p: &str| std::fs::read(dir.join(p)).ok();
    // A copy may be mid-write: the loader takes the newest valid one.
    match SysFileStore::load(read(PATHS[0]).as_deref(), read(PATHS[1]).as_deref()) {
        Ok(l) => l.sysfile.map_or(0, |s| s.last_complete_gci),
        Err(_) => 0,
    }
}

fn wait_gci(dir: &Path, at_least: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let g = complete_gci(dir);
        if g >= at_least {
            return g;
        }
        assert!(Instant::now() < deadline, "GCI stuck at {g}, want {at_least}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Transaction i writes rows 2i and 2i+1, both with value i.
fn commit(c: &Client, table: TableId, i: i64) {
    let ops = (0..2).map(|j| KeyOp::insert(table, vec![Value::Int(2 * i + j)], vec![(1, Value::Int(i))])).collect();
    c.begin().execute(ops, ExecType::Commit).unwrap_or_else(|e| panic!("transaction {i}: {e}"));
}

/// Transactions present, each checked whole: txn id -> rows seen.
fn present(c: &Client, table: TableId) -> BTreeMap<i64, u32> {
    let rows = c.scan(ScanSpec::full(table)).unwrap().collect_all().unwrap();
    let mut seen = BTreeMap::new();
    for r in rows {
        let (Value::Int(k), Value::Int(v)) = (&r[0], &r[1]) else { panic!("row {r:?}") };
        assert_eq!(k / 2, *v, "row {k} holds {v}");
        *seen.entry(*v).or_insert(0) += 1;
    }
    seen
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("norr-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn kill_9_under_writes_keeps_every_transaction_up_to_the_complete_gci() {
    let dir = temp_dir("datad-durability");
    let mut node = start(&dir);
    assert!(node.log.iter().any(|l| l.contains("starting empty")), "{:?}", node.log);

    // A second process on the same directory is refused, naming the holder.
    let out = Command::new(NORR).args(["datad", "--listen", "127.0.0.1:0", "--data-dir"]).arg(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(msg.contains("in use by another process") && msg.contains(&node.child.id().to_string()), "{msg}");

    let c = Client::connect(node.addr.as_str()).unwrap();
    let cols = vec![
        ColumnDef::new("k", ColumnType::Int { unsigned: false }).not_null(),
        ColumnDef::new("v", ColumnType::Int { unsigned: false }),
    ];
    let t = c.create_table(table_def("kv", cols, vec![0])).unwrap().id;
    // Phase A: made durable for sure before the kill.
    let a = 300;
    for i in 0..a {
        commit(&c, t, i);
    }
    // Commits are tagged at most two GCIs above the complete one; three
    // more completions cover every one of them.
    let g0 = complete_gci(&dir);
    wait_gci(&dir, g0 + 3);
    // Phase B: writes until the kill, which lands at a random point of
    // the GCP cycle.
    let b = 700;
    for i in a..a + b {
        commit(&c, t, i);
    }
    let before_kill = complete_gci(&dir);
    node.child.kill().unwrap(); // SIGKILL
    node.child.wait().unwrap();
    drop(c);

    let mut node = start(&dir);
    let report = node.log.iter().find(|l| l.contains("recovered to GCI")).cloned();
    let report = report.unwrap_or_else(|| panic!("no restart report in {:?}", node.log));
    let recovered: u64 = report.split("recovered to GCI ").nth(1).unwrap().split(':').next().unwrap().parse().unwrap();
    assert!(recovered >= before_kill, "recovered {recovered}, complete before the kill {before_kill}");
    let c = Client::connect(node.addr.as_str()).unwrap();
    let t = c.get_table("kv").unwrap().id;
    let seen = present(&c, t);
    // Whole transactions, a prefix of the commit order (one client commits
    // in order, so GCIs never go down), including all of phase A.
    assert!(seen.values().all(|&n| n == 2), "half-applied transactions: {seen:?}");
    let n = seen.len() as i64;
    assert!(seen.keys().copied().eq(0..n), "not a prefix: {:?}", seen.keys().collect::<Vec<_>>());
    assert!(n >= a && n <= a + b, "{n} transactions after restart");

    // The restarted node logs on: new commits survive a second kill.
    for i in n..n + 50 {
        commit(&c, t, i);
    }
    let g = complete_gci(&dir);
    wait_gci(&dir, g + 3);
    node.child.kill().unwrap();
    node.child.wait().unwrap();
    drop(c);
    let mut node = start(&dir);
    let c = Client::connect(node.addr.as_str()).unwrap();
    let seen = present(&c, t);
    assert_eq!(seen.len() as i64, n + 50, "second restart");
    assert!(seen.values().all(|&n| n == 2));
    node.child.kill().unwrap();
    node.child.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
