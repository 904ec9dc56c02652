//! `norr datad --data-dir`: a node killed with SIGKILL under a write load
//! restarts with every transaction up to its last complete global
//! checkpoint, and with whole transactions only; a second process on the
//! same directory is refused. With the smallest REDO log, writes of many
//! times its size go on (local checkpoints free it) and a restart restores
//! from the checkpoints plus the REDO after them.

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
    start_with(dir, &[])
}

fn start_with(dir: &Path, extra: &[&str]) -> Datad {
    let mut child = Command::new(NORR)
        .args(["datad", "--listen", "127.0.0.1:0", "--data-memory", "64M", "--data-dir"])
        .arg(dir)
        .args(["--set", "gcp_interval_ms=30", "--set", "redo_file_bytes=4M"])
        .args(extra)
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

/// Transaction i of the update load writes keys 2(i mod 500) and
/// 2(i mod 500) + 1 with value i and 1-3 KB of padding.
fn pad_of(i: i64) -> Vec<u8> {
    vec![(i % 251) as u8; 1000 + (i as usize * 7919) % 2000]
}

#[test]
fn writes_of_many_log_sizes_are_checkpointed_and_survive_kill_9() {
    // The smallest log the knobs allow (2 x 4 MiB). One client here writes
    // tens of MB/s while a checkpoint round (scan, data and control file
    // syncs, then two GCPs until the system file records it) takes 100 ms
    // or more on a shared disk: the log can fill before a round frees it.
    // Then commits get the temporary error 410 and are retried, as a
    // client of NDB does; the test counts them.
    const LOG_BYTES: u64 = 2 * (4 << 20);
    let dir = temp_dir("datad-lcp");
    let knobs = ["--set", "redo_files=2", "--set", "lcp_min_gap_ms=20"];
    let mut node = start_with(&dir, &knobs);
    let c = Client::connect(node.addr.as_str()).unwrap();
    let cols = vec![
        ColumnDef::new("k", ColumnType::BigInt { unsigned: false }).not_null(),
        ColumnDef::new("v", ColumnType::BigInt { unsigned: false }),
        ColumnDef::new("pad", ColumnType::Varbinary { len: 4000 }),
    ];
    let t = c.create_table(table_def("kv", cols, vec![0])).unwrap().id;
    let mut refused_410 = 0u64;
    let mut gcis: Vec<u64> = Vec::new();
    let mut bytes = 0u64;
    let mut i = 0i64;
    while bytes < 5 * LOG_BYTES {
        let slot = i % 500;
        let ops = (0..2)
            .map(|j| {
                KeyOp::write(t, vec![Value::Int(2 * slot + j)], vec![(1, Value::Int(i)), (2, Value::Bytes(pad_of(i)))])
            })
            .collect();
        let ops: Vec<KeyOp> = ops;
        let deadline = Instant::now() + Duration::from_secs(30);
        let info = loop {
            let mut tx = c.begin();
            let r = tx.execute(ops.clone(), ExecType::NoCommit).and_then(|_| tx.commit_with_info());
            match r {
                Ok(info) => break info,
                Err(e) if e.is_temporary() && Instant::now() < deadline => {
                    // 410: the log waits for a checkpoint; nothing was committed.
                    refused_410 += 1;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) => panic!("transaction {i}: {e}"),
            }
        };
        gcis.push(info.gci);
        bytes += 2 * pad_of(i).len() as u64;
        i += 1;
    }
    eprintln!("{i} transactions, {bytes} bytes of rows, {refused_410} temporary refusals (410) retried");
    let before_kill = complete_gci(&dir);
    node.child.kill().unwrap(); // SIGKILL
    node.child.wait().unwrap();
    drop(c);
    let lcp_files = walk(&dir.join("lcp"));
    assert!(lcp_files > 0, "no checkpoint files");

    let mut node = start_with(&dir, &knobs);
    let report = node.log.iter().find(|l| l.contains("recovered to GCI")).cloned();
    let report = report.unwrap_or_else(|| panic!("no restart report in {:?}", node.log));
    let recovered: u64 = report.split("recovered to GCI ").nth(1).unwrap().split(':').next().unwrap().parse().unwrap();
    assert!(recovered >= before_kill, "recovered {recovered}, complete before the kill {before_kill}");
    let from_lcp: u64 =
        report.split(" partitions from local checkpoints").next().unwrap().rsplit(' ').next().unwrap().parse().unwrap();
    assert!(from_lcp > 0, "no partition restored from a checkpoint: {report}");
    // Exactly the transactions of GCI <= recovered: a prefix.
    let n = gcis.iter().take_while(|&&g| g <= recovered).count() as i64;
    let mut want: BTreeMap<i64, i64> = BTreeMap::new();
    for i in 0..n {
        let slot = i % 500;
        want.insert(2 * slot, i);
        want.insert(2 * slot + 1, i);
    }
    let c = Client::connect(node.addr.as_str()).unwrap();
    let rows = c.scan(ScanSpec::full(t)).unwrap().collect_all().unwrap();
    let mut got: BTreeMap<i64, i64> = BTreeMap::new();
    for r in rows {
        let (Value::Int(k), Value::Int(v), Value::Bytes(pad)) = (&r[0], &r[1], &r[2]) else { panic!("row {r:?}") };
        assert_eq!(*pad, pad_of(*v), "row {k}: padding of another version");
        got.insert(*k, *v);
    }
    assert!(got == want, "{} rows, want {} (transactions 0..{n} of {i}; {report})", got.len(), want.len());
    node.child.kill().unwrap();
    node.child.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Files under a directory, recursively.
fn walk(dir: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else { return 0 };
    rd.map(|e| {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(&p)
        } else {
            1
        }
    })
    .sum()
}

/// TRUNCATE TABLE through a real process, then kill -9: the truncated rows
/// do not come back (from the REDO log nor from checkpoints of them), the
/// rows written after it are there up to the recovered GCI.
#[test]
fn an_answered_truncate_survives_kill_9() {
    let dir = temp_dir("datad-truncate");
    let mut node = start_with(&dir, &["--set", "lcp_min_gap_ms=20"]);
    let c = Client::connect(node.addr.as_str()).unwrap();
    let cols = vec![
        ColumnDef::new("k", ColumnType::Int { unsigned: false }).not_null(),
        ColumnDef::new("v", ColumnType::Int { unsigned: false }),
    ];
    let t = c.create_table(table_def("kv", cols, vec![0])).unwrap().id;
    for i in 0..300 {
        commit(&c, t, i);
    }
    // Durable, and in checkpoints.
    let g = complete_gci(&dir);
    wait_gci(&dir, g + 10);
    c.truncate_table("kv").unwrap();
    assert!(present(&c, t).is_empty());
    for i in 1000..1020 {
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
    assert_eq!(seen.keys().copied().collect::<Vec<_>>(), (1000..1020).collect::<Vec<_>>(), "after the restart");
    node.child.kill().unwrap();
    node.child.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
