//! `SET norr_commit_wait = 'disk'`: COMMIT and autocommitted statements
//! return only once their global checkpoint is on disk. Checked against a
//! data node with a data directory: the GCI a commit reports
//! (`@@norr_last_commit_gci`) is at most the last complete GCI its system
//! file holds when the commit returns; with 'network' commits return before
//! that, most of the time.

mod node_support;

use norr_durability::sysfile::{SysFileStore, PATHS};
use norr_signals::Value;
use norr_sql::engine::{Engine, EngineConfig};
use norr_sql::types::{QueryOutput, Session, SqlError};
use std::path::Path;

async fn run(e: &Engine, s: &mut Session, sql: &str) -> Result<QueryOutput, SqlError> {
    e.execute_text(s, sql).await.pop().expect("one result")
}

async fn ok(e: &Engine, s: &mut Session, sql: &str) {
    if let Err(err) = run(e, s, sql).await {
        panic!("{sql}: {} {}", err.code, err.message);
    }
}

/// The one value of a one-row, one-column SELECT.
async fn scalar(e: &Engine, s: &mut Session, sql: &str) -> Value {
    match run(e, s, sql).await {
        Ok(QueryOutput::Rows { rows, .. }) if rows.len() == 1 && rows[0].len() == 1 => rows[0][0].clone(),
        other => panic!("{sql}: {other:?}"),
    }
}

async fn last_commit_gci(e: &Engine, s: &mut Session) -> u64 {
    match scalar(e, s, "SELECT @@norr_last_commit_gci").await {
        Value::UInt(g) => g,
        Value::Int(g) => u64::try_from(g).expect("a GCI"),
        other => panic!("@@norr_last_commit_gci = {other:?}"),
    }
}

/// The last complete GCI the data node's system file holds (written before
/// the node answers a disk-wait commit).
fn recorded_gci(dir: &Path) -> u64 {
    let read = |p: &str| std::fs::read(dir.join(p)).ok();
    let (a, b) = (read(PATHS[0]), read(PATHS[1]));
    let l = SysFileStore::load(a.as_deref(), b.as_deref()).expect("a valid system file");
    l.sysfile.map_or(0, |s| s.last_complete_gci)
}

#[test]
fn disk_commits_return_once_their_gci_is_on_disk() {
    let dir = std::env::temp_dir().join(format!("norr-commit-wait-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let lock = norr_runtime::fs::open_data_dir(&dir, 1).expect("data directory");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    // A GCP every 300 ms: a network commit returns well before its GCI is
    // complete, a disk commit waits up to one interval.
    let knobs = norr_knobs::Knobs { gcp_interval_ms: 300, ..Default::default() };
    let cfg =
        norr_runtime::DataNodeConfig { node_id: 1, listen: "127.0.0.1:0".parse().expect("addr"), knobs, cluster: None };
    let opts = norr_runtime::RuntimeOptions { data_dir: Some(lock.path().to_path_buf()), ..Default::default() };
    let node = norr_runtime::start_data_node_with_options(cfg, opts).expect("data node starts");
    let addr = node.local_addr().to_string();
    let data = lock.path().to_path_buf();
    rt.block_on(async move {
        let e = Engine::connect(&addr, EngineConfig::default()).await.expect("engine connects");
        let mut s = e.new_session(1, "root");
        ok(&e, &mut s, "CREATE DATABASE d").await;
        ok(&e, &mut s, "USE d").await;
        ok(&e, &mut s, "CREATE TABLE t (k INT PRIMARY KEY, v INT)").await;
        assert_eq!(scalar(&e, &mut s, "SELECT @@norr_commit_wait").await, Value::str("network"));
        assert_eq!(last_commit_gci(&e, &mut s).await, 0, "no commit yet");

        // A bad value is refused (1231) and changes nothing.
        let err = run(&e, &mut s, "SET norr_commit_wait = 'sometimes'").await.expect_err("refused");
        assert_eq!(err.code, 1231, "{}", err.message);
        assert_eq!(scalar(&e, &mut s, "SELECT @@session.norr_commit_wait").await, Value::str("network"));

        // 'network': commits return at once, mostly before their GCI is complete.
        let mut ahead = 0;
        for k in 0..5 {
            ok(&e, &mut s, &format!("INSERT INTO t VALUES ({k}, {k})")).await;
            let g = last_commit_gci(&e, &mut s).await;
            assert!(g > 0, "a commit that wrote reports its GCI");
            ahead += usize::from(recorded_gci(&data) < g);
        }
        assert!(ahead >= 3, "network commits waited for disk: only {ahead} of 5 were ahead of it");

        // 'disk': every kind of commit returns with its GCI on disk.
        ok(&e, &mut s, "SET SESSION norr_commit_wait = 'DISK'").await;
        assert_eq!(scalar(&e, &mut s, "SELECT @@norr_commit_wait").await, Value::str("disk"));
        let statements = [
            "INSERT INTO t VALUES (10, 10)",
            "INSERT INTO t VALUES (11, 11), (12, 12)",
            "UPDATE t SET v = v + 1 WHERE k = 10",
            "UPDATE t SET v = v + 1 WHERE k >= 11",
            "DELETE FROM t WHERE k = 12",
            "DELETE FROM t WHERE k > 3 AND k < 5",
        ];
        let mut prev = 0;
        for sql in statements {
            ok(&e, &mut s, sql).await;
            let g = last_commit_gci(&e, &mut s).await;
            let on_disk = recorded_gci(&data);
            assert!(g >= prev && g > 0, "{sql}: GCI {g} after {prev}");
            assert!(g <= on_disk, "{sql}: returned with GCI {g}, last complete GCI on disk {on_disk}");
            prev = g;
        }
        // An explicit transaction: COMMIT waits.
        ok(&e, &mut s, "BEGIN").await;
        ok(&e, &mut s, "INSERT INTO t VALUES (20, 20)").await;
        ok(&e, &mut s, "UPDATE t SET v = 21 WHERE k = 20").await;
        ok(&e, &mut s, "COMMIT").await;
        let g = last_commit_gci(&e, &mut s).await;
        assert!(g >= prev && g <= recorded_gci(&data), "COMMIT returned with GCI {g} not on disk");

        // SET GLOBAL: the value new sessions start with (as in MySQL).
        ok(&e, &mut s, "SET GLOBAL norr_commit_wait = 'disk'").await;
        let mut other = e.new_session(2, "root");
        ok(&e, &mut other, "USE d").await;
        assert_eq!(scalar(&e, &mut other, "SELECT @@norr_commit_wait").await, Value::str("disk"));
        ok(&e, &mut other, "INSERT INTO t VALUES (30, 30)").await;
        let g = last_commit_gci(&e, &mut other).await;
        assert!(g > 0 && g <= recorded_gci(&data), "GCI {g} of a global 'disk' session not on disk");
        ok(&e, &mut s, "SET GLOBAL norr_commit_wait = DEFAULT").await;
        assert_eq!(scalar(&e, &mut s, "SELECT @@global.norr_commit_wait").await, Value::str("network"));
        assert_eq!(scalar(&e, &mut other, "SELECT @@norr_commit_wait").await, Value::str("disk"), "its own value");
        let mut third = e.new_session(3, "root");
        assert_eq!(scalar(&e, &mut third, "SELECT @@norr_commit_wait").await, Value::str("network"));
        let n = scalar(&e, &mut s, "SELECT COUNT(*) FROM t").await;
        assert!(matches!(n, Value::Int(8) | Value::UInt(8)), "{n:?}");
    });
    node.shutdown();
    node.join().expect("data node stops");
    drop(lock);
    let _ = std::fs::remove_dir_all(&dir);
}
