//! Issue 23, items 1 and 2: no statement stalls the others, and statements
//! stop.
//!
//! The SQL node runs on ONE session thread here (`norr sqld --threads 1`):
//! while one session runs statements that keep a thread busy (huge texts,
//! whose parse cannot yield; a join in memory, which yields every few
//! milliseconds), other sessions' point selects still answer at once. Then
//! max_execution_time (session variable, the statement hint, a prepared
//! statement) stops a long SELECT with 3024, a client that disconnects has
//! its statement stopped, and a killed INSERT ... SELECT leaves nothing; the
//! session goes on after each.
//!
//! One test function: its timings must not share the machine with another
//! test of this binary.

mod node_support;
mod protocol_support;

use mysql_async::prelude::*;
use node_support::{code, PASSWORD};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Rows of the test table. The unkeyed self-join below looks at ROWS^2
/// (400 million) row pairs: minutes of work, so a statement that ends before
/// it is stopped is a failure, not a race.
const ROWS: i64 = 20_000;
const JOIN: &str = "SELECT COUNT(*) FROM t x LEFT JOIN t y ON x.v + y.v < 0";

async fn connect(port: u16) -> mysql_async::Conn {
    node_support::connect(port, Some("ss")).await
}

/// Waits until `cond` holds; fails after `limit`.
macro_rules! until {
    ($what:expr, $limit:expr, $cond:expr) => {{
        let start = Instant::now();
        while !$cond {
            assert!(start.elapsed() < $limit, "{}: not within {:?}", $what, $limit);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }};
}

/// How many sessions run `sql`.
async fn running(c: &mut mysql_async::Conn, sql: &str) -> usize {
    let infos: Vec<Option<String>> =
        c.query("SELECT INFO FROM information_schema.PROCESSLIST").await.expect("processlist");
    infos.iter().filter(|i| i.as_deref() == Some(sql)).count()
}

fn percentile(v: &mut [Duration], p: usize) -> Duration {
    v.sort();
    v[(v.len() * p / 100).min(v.len() - 1)]
}

#[test]
fn busy_statements_do_not_stall_others_and_statements_stop() {
    let rt = norr_sql::server::session_runtime(1).expect("runtime");
    let node = norr_runtime::start_data_node(norr_runtime::DataNodeConfig {
        node_id: 1,
        listen: "127.0.0.1:0".parse().expect("addr"),
        knobs: norr_knobs::Knobs::default(),
        cluster: None,
    })
    .expect("data node starts");
    let addr = node.local_addr().to_string();
    let port = rt.block_on(async move { node_support::sql_node(&addr).await });
    // The clients run on a runtime of their own, not on the SQL node's thread.
    let clients = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    clients.block_on(async move {
        let mut setup = node_support::connect(port, None).await;
        setup.query_drop("CREATE DATABASE ss").await.unwrap();
        setup.query_drop("CREATE TABLE ss.t (id INT PRIMARY KEY, v INT)").await.unwrap();
        for chunk in 0..ROWS / 1000 {
            let values: Vec<String> = (chunk * 1000 + 1..=chunk * 1000 + 1000).map(|i| format!("({i}, {i})")).collect();
            setup.query_drop(format!("INSERT INTO ss.t VALUES {}", values.join(","))).await.unwrap();
        }
        let sum = ROWS * (ROWS + 1) / 2;

        // ---- 1. One session keeps the only session thread busy: a join in
        // memory, then texts of 100,000 terms one after another.
        let stop = Arc::new(AtomicBool::new(false));
        let mut busy = connect(port).await;
        let busy_id = busy.id();
        let heavy = tokio::spawn({
            let stop = stop.clone();
            async move {
                let joined = busy.query_first::<i64, _>(JOIN).await;
                let or_chain = format!("SELECT 1 FROM DUAL WHERE 1=0{}", " OR 1=0".repeat(99_999));
                let mut texts = 0;
                while !stop.load(Ordering::Relaxed) {
                    let none: Option<i64> = busy.query_first(or_chain.as_str()).await.expect("the long text");
                    assert_eq!(none, None);
                    texts += 1;
                }
                (busy, joined, texts)
            }
        });
        let mut one = connect(port).await;
        let mut pk = connect(port).await;
        until!("the join runs", Duration::from_secs(30), running(&mut one, JOIN).await == 1);
        let mut killer = connect(port).await;
        let (mut ones, mut reads) = (Vec::new(), Vec::new());
        let measure_until = Instant::now() + Duration::from_secs(8);
        let mut killed_join = false;
        let mut i = 0;
        while Instant::now() < measure_until {
            let t = Instant::now();
            let v: Option<i64> = one.query_first("SELECT 1").await.expect("SELECT 1 beside a busy session");
            ones.push(t.elapsed());
            assert_eq!(v, Some(1));
            let t = Instant::now();
            let v: Option<i64> = pk.exec_first("SELECT v FROM t WHERE id = ?", (i % ROWS + 1,)).await.expect("pk read");
            reads.push(t.elapsed());
            assert_eq!(v, Some(i % ROWS + 1));
            i += 7;
            if !killed_join && ones.len() == 100 {
                // Half way: the join has run alone so far; the long texts
                // come next.
                killer.query_drop(format!("KILL QUERY {busy_id}")).await.unwrap();
                killed_join = true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        stop.store(true, Ordering::Relaxed);
        let (mut busy, joined, texts) = heavy.await.expect("the busy session");
        assert_eq!(code(joined.unwrap_err()), 1317, "the join was killed");
        assert!(texts >= 1, "the long texts ran meanwhile");
        let (one_p50, one_p90) = (percentile(&mut ones, 50), percentile(&mut ones, 90));
        let (read_p50, read_p90) = (percentile(&mut reads, 50), percentile(&mut reads, 90));
        eprintln!(
            "beside a busy session on the only session thread ({texts} long texts): SELECT 1 x{} median {one_p50:?} \
             p90 {one_p90:?} max {:?}; pk read median {read_p50:?} p90 {read_p90:?} max {:?}",
            ones.len(),
            ones.last().unwrap(),
            reads.last().unwrap()
        );
        assert!(ones.len() >= 100, "{} samples", ones.len());
        assert!(one_p50 < Duration::from_millis(10), "SELECT 1: median {one_p50:?}");
        assert!(read_p50 < Duration::from_millis(10), "pk read: median {read_p50:?}");
        assert!(one_p90 < Duration::from_millis(50), "SELECT 1: p90 {one_p90:?}");
        assert!(read_p90 < Duration::from_millis(50), "pk read: p90 {read_p90:?}");

        // ---- 2. max_execution_time stops a SELECT with 3024; the session goes on.
        busy.query_drop("SET SESSION max_execution_time = 300").await.unwrap();
        let n: Option<i64> = busy.query_first("SELECT COUNT(*) FROM t").await.unwrap();
        assert_eq!(n, Some(ROWS), "a SELECT within the limit");
        let t = Instant::now();
        assert_eq!(code(busy.query_drop(JOIN).await.unwrap_err()), 3024);
        let took = t.elapsed();
        assert!(took >= Duration::from_millis(300) && took < Duration::from_secs(10), "{took:?}");
        let n: Option<i64> = busy.query_first("SELECT SUM(v) FROM t").await.expect("the session goes on");
        assert_eq!(n, Some(sum));
        busy.query_drop("SET SESSION max_execution_time = 0").await.unwrap();
        // The hint, in a text and in a prepared statement.
        let hinted = JOIN.replacen("SELECT", "SELECT /*+ MAX_EXECUTION_TIME(200) */", 1);
        assert_eq!(code(busy.query_drop(hinted.as_str()).await.unwrap_err()), 3024);
        let prepared = format!("{hinted} AND x.id > ?");
        assert_eq!(code(busy.exec_drop(prepared.as_str(), (0,)).await.unwrap_err()), 3024);
        let n: Option<i64> = busy.query_first("SELECT /*+ MAX_EXECUTION_TIME(5000) */ COUNT(*) FROM t").await.unwrap();
        assert_eq!(n, Some(ROWS));

        // ---- 3. A client that disconnects has its statement stopped.
        {
            use protocol_support::{Raw, CAPS};
            let (mut gone, ok) = Raw::login(port, "root", PASSWORD, CAPS).await;
            assert_eq!(ok[0], 0, "logged in");
            let join = JOIN.replace(" t ", " ss.t ");
            gone.command(format!("\x03{join}").as_bytes()).await;
            until!("the join runs", Duration::from_secs(30), running(&mut one, &join).await == 1);
            drop(gone);
            until!("the statement stops with its client", Duration::from_secs(5), running(&mut one, &join).await == 0);
        }

        // ---- 4. A killed INSERT ... SELECT leaves nothing, in autocommit
        // and inside a transaction (whose earlier write stays).
        busy.query_drop("CREATE TABLE u (id INT PRIMARY KEY, n INT)").await.unwrap();
        let slow_insert = "INSERT INTO u SELECT x.id, COUNT(*) FROM t x LEFT JOIN t y ON x.v + y.v < 0 GROUP BY x.id";
        for in_txn in [false, true] {
            if in_txn {
                busy.query_drop("BEGIN").await.unwrap();
                busy.query_drop("INSERT INTO t VALUES (100000, 0)").await.unwrap();
            }
            let running_insert = tokio::spawn(async move {
                let r = busy.query_drop(slow_insert).await;
                (busy, r)
            });
            until!("the INSERT runs", Duration::from_secs(30), running(&mut one, slow_insert).await == 1);
            tokio::time::sleep(Duration::from_millis(300)).await;
            killer.query_drop(format!("KILL QUERY {busy_id}")).await.unwrap();
            let (b, r) = running_insert.await.unwrap();
            busy = b;
            assert_eq!(code(r.unwrap_err()), 1317, "in a transaction: {in_txn}");
            let n: Option<i64> = busy.query_first("SELECT COUNT(*) FROM u").await.unwrap();
            assert_eq!(n, Some(0), "nothing of the killed INSERT is left (in a transaction: {in_txn})");
            if in_txn {
                let mine: Option<i64> = busy.query_first("SELECT v FROM t WHERE id = 100000").await.unwrap();
                assert_eq!(mine, Some(0), "the transaction's earlier write stays");
                busy.query_drop("ROLLBACK").await.unwrap();
            }
        }
        let n: Option<i64> = one.query_first("SELECT COUNT(*) FROM t").await.unwrap();
        assert_eq!(n, Some(ROWS));
    });
    drop(rt);
}
