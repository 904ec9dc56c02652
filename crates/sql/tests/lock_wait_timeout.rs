//! `innodb_lock_wait_timeout` sets how long a session's row locks wait in
//! the data node (issue 23): until a session sets it, the data nodes'
//! `lock_wait_timeout_ms` applies (here 200 ms); a session that sets it
//! waits that many seconds instead, for writes, key reads and locking scans,
//! and in an open transaction from its next statement on.

mod node_support;

use mysql_async::prelude::*;
use node_support::{connect, error_of, runtime_and_node, sql_node};
use std::time::{Duration, Instant};

/// The data nodes' lock-wait time-out in this test.
const CLUSTER_MS: u64 = 200;

#[test]
fn a_sessions_innodb_lock_wait_timeout_bounds_its_row_lock_waits() {
    let knobs = norr_knobs::Knobs { lock_wait_timeout_ms: CLUSTER_MS, ..Default::default() };
    let (rt, node) = runtime_and_node(knobs);
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let port = sql_node(&addr).await;
        let mut setup = connect(port, None).await;
        setup
            .query_drop("CREATE DATABASE lw; CREATE TABLE lw.t (id INT PRIMARY KEY, v INT); INSERT INTO lw.t VALUES (1, 10), (2, 20)")
            .await
            .expect("schema");
        let mut holder = connect(port, Some("lw")).await;
        holder.query_drop("BEGIN").await.unwrap();
        holder.query_drop("SELECT v FROM t WHERE id = 1 FOR UPDATE").await.expect("lock row 1");

        // Not set: the cluster's 200 ms, reported as MySQL's lock-wait
        // time-out.
        let mut waiter = connect(port, Some("lw")).await;
        let t0 = Instant::now();
        assert_eq!(error_of(&mut waiter, "UPDATE t SET v = 11 WHERE id = 1").await, Some(1205));
        // (MySQL's compiled-in 50 s, which @@innodb_lock_wait_timeout shows,
        // would take 50 s.)
        assert!(t0.elapsed() < Duration::from_secs(20), "waited {:?}, not the cluster's time-out", t0.elapsed());

        // Set to 1 s: the wait lasts that long, five times the cluster's.
        waiter.query_drop("SET SESSION innodb_lock_wait_timeout = 1").await.unwrap();
        let v: Option<i64> = waiter.query_first("SELECT @@innodb_lock_wait_timeout").await.unwrap();
        assert_eq!(v, Some(1));
        let t0 = Instant::now();
        assert_eq!(error_of(&mut waiter, "UPDATE t SET v = 11 WHERE id = 1").await, Some(1205));
        let waited = t0.elapsed();
        assert!(waited >= Duration::from_millis(950), "waited {waited:?}, not the session's 1 s");
        // The same bound for a locking key read and a locking scan.
        let t0 = Instant::now();
        assert_eq!(error_of(&mut waiter, "SELECT v FROM t WHERE id = 1 FOR UPDATE").await, Some(1205));
        assert!(t0.elapsed() >= Duration::from_millis(950), "key read waited {:?}", t0.elapsed());
        let t0 = Instant::now();
        assert_eq!(error_of(&mut waiter, "SELECT id FROM t WHERE v > 0 FOR UPDATE").await, Some(1205));
        assert!(t0.elapsed() >= Duration::from_millis(950), "scan waited {:?}", t0.elapsed());

        // Set long: a holder that commits after 3x the cluster's time-out
        // hands the row to the waiter, whose UPDATE then succeeds.
        waiter.query_drop("SET SESSION innodb_lock_wait_timeout = 30").await.unwrap();
        let running = tokio::spawn(async move {
            let r = waiter.query_drop("UPDATE t SET v = 12 WHERE id = 1").await;
            (waiter, r)
        });
        tokio::time::sleep(Duration::from_millis(3 * CLUSTER_MS)).await;
        holder.query_drop("COMMIT").await.unwrap();
        let (mut waiter, r) = running.await.expect("waiter task");
        r.expect("the update waited past the cluster's time-out and got the row");
        let v: Option<i64> = waiter.query_first("SELECT v FROM t WHERE id = 1").await.unwrap();
        assert_eq!(v, Some(12));

        // Inside an open transaction, a SET counts from the next statement.
        holder.query_drop("BEGIN").await.unwrap();
        holder.query_drop("UPDATE t SET v = 21 WHERE id = 2").await.expect("lock row 2");
        waiter.query_drop("SET SESSION innodb_lock_wait_timeout = DEFAULT").await.unwrap();
        waiter.query_drop("BEGIN").await.unwrap();
        waiter.query_drop("SET SESSION innodb_lock_wait_timeout = 1").await.unwrap();
        let t0 = Instant::now();
        assert_eq!(error_of(&mut waiter, "UPDATE t SET v = 22 WHERE id = 2").await, Some(1205));
        assert!(t0.elapsed() >= Duration::from_millis(950), "waited {:?} in the transaction", t0.elapsed());
        waiter.query_drop("ROLLBACK").await.unwrap();

        // SET GLOBAL: sessions that start afterwards wait that long; SET
        // GLOBAL ... = DEFAULT gives later sessions the cluster's again.
        setup.query_drop("SET GLOBAL innodb_lock_wait_timeout = 1").await.unwrap();
        let mut later = connect(port, Some("lw")).await;
        let t0 = Instant::now();
        assert_eq!(error_of(&mut later, "UPDATE t SET v = 23 WHERE id = 2").await, Some(1205));
        assert!(t0.elapsed() >= Duration::from_millis(950), "a later session waited {:?}", t0.elapsed());
        setup.query_drop("SET GLOBAL innodb_lock_wait_timeout = DEFAULT").await.unwrap();
        let mut last = connect(port, Some("lw")).await;
        let t0 = Instant::now();
        assert_eq!(error_of(&mut last, "UPDATE t SET v = 24 WHERE id = 2").await, Some(1205));
        assert!(t0.elapsed() < Duration::from_secs(20), "waited {:?}, not the cluster's 200 ms", t0.elapsed());

        holder.query_drop("ROLLBACK").await.unwrap();
        let v: Option<i64> = waiter.query_first("SELECT v FROM t WHERE id = 2").await.unwrap();
        assert_eq!(v, Some(20));
    });
}
