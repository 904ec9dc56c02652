//! SELECT ... FOR UPDATE / FOR SHARE with NOWAIT and SKIP LOCKED, through
//! real clients and two (or three) connections ordered explicitly: the job
//! queue, 3572 ER_LOCK_NOWAIT (statement fails, transaction stays open with
//! its earlier writes), every access path (key, unique, IN list, join
//! lookup, scans), prepared statements and `FOR UPDATE OF`.

mod node_support;

use mysql_async::prelude::*;
use node_support::{connect, runtime_and_node, sql_node};

/// The server error of `r`: (code, SQLSTATE, message).
fn server_err<T: std::fmt::Debug>(r: Result<T, mysql_async::Error>) -> (u16, String, String) {
    match r {
        Err(mysql_async::Error::Server(e)) => (e.code, e.state, e.message),
        other => panic!("expected a server error, got {other:?}"),
    }
}

const NEXT_JOB: &str = "SELECT id FROM jobs WHERE state = 'new' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED";
const NOWAIT_MSG: &str = "Statement aborted because lock(s) could not be acquired immediately and NOWAIT is set.";

async fn ids(c: &mut mysql_async::Conn, sql: &str) -> Vec<i64> {
    c.query(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"))
}

#[test]
fn job_queue_workers_take_different_rows() {
    let (rt, node) = runtime_and_node(norr_knobs::Knobs::default());
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let port = sql_node(&addr).await;
        let mut setup = connect(port, None).await;
        setup.query_drop("CREATE DATABASE lr").await.expect("db");
        setup.query_drop("CREATE TABLE lr.jobs (id INT PRIMARY KEY, state VARCHAR(10), n INT)").await.expect("t");
        setup
            .query_drop("INSERT INTO lr.jobs VALUES (1,'new',0),(2,'new',0),(3,'done',0),(4,'new',0),(5,'new',0)")
            .await
            .expect("rows");
        let mut a = connect(port, Some("lr")).await;
        let mut b = connect(port, Some("lr")).await;
        let mut c = connect(port, Some("lr")).await;

        a.query_drop("BEGIN").await.expect("begin");
        b.query_drop("BEGIN").await.expect("begin");
        assert_eq!(ids(&mut a, NEXT_JOB).await, vec![1]);
        assert_eq!(ids(&mut b, NEXT_JOB).await, vec![2], "the second worker skips the first one's job");
        // The prepared form (binary protocol), with the state as a parameter.
        let next = c
            .prep("SELECT id FROM jobs WHERE state = ? ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED")
            .await
            .expect("prepare");
        c.query_drop("BEGIN").await.expect("begin");
        let got: Option<i64> = c.exec_first(&next, ("new",)).await.expect("exec");
        assert_eq!(got, Some(4), "job 3 is done; 1 and 2 are taken");
        // Only the picked rows are locked: NOWAIT on job 5 succeeds.
        assert_eq!(ids(&mut a, "SELECT id FROM jobs WHERE id = 5 FOR UPDATE NOWAIT").await, vec![5]);
        a.query_drop("UPDATE jobs SET state = 'done' WHERE id IN (1, 5)").await.expect("finish");
        a.query_drop("COMMIT").await.expect("commit");
        b.query_drop("UPDATE jobs SET state = 'done' WHERE id = 2").await.expect("finish");
        b.query_drop("COMMIT").await.expect("commit");
        // Worker c still holds 4: nothing left for the others.
        assert!(ids(&mut a, NEXT_JOB).await.is_empty());
        let got: Option<i64> = c.exec_first(&next, ("new",)).await.expect("exec");
        assert_eq!(got, Some(4), "its own lock is not skipped");
        c.query_drop("ROLLBACK").await.expect("rollback");
        assert_eq!(ids(&mut a, NEXT_JOB).await, vec![4], "released with the rollback");
        // LIMIT with OFFSET, descending: the rows returned are the ones locked.
        a.query_drop("BEGIN").await.expect("begin");
        assert_eq!(ids(&mut a, "SELECT id FROM jobs ORDER BY id DESC LIMIT 2 OFFSET 1 FOR UPDATE").await, vec![4, 3]);
        // The skipped OFFSET row is locked too (InnoDB locks the rows its
        // scan passes over as well).
        assert_eq!(ids(&mut b, "SELECT id FROM jobs ORDER BY id FOR SHARE SKIP LOCKED").await, vec![1, 2]);
        a.query_drop("COMMIT").await.expect("commit");
    });
}

#[test]
fn nowait_fails_the_statement_only() {
    let (rt, node) = runtime_and_node(norr_knobs::Knobs::default());
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let port = sql_node(&addr).await;
        let mut setup = connect(port, None).await;
        setup.query_drop("CREATE DATABASE lr").await.expect("db");
        setup
            .query_drop("CREATE TABLE lr.acct (id INT PRIMARY KEY, v INT, u INT, UNIQUE KEY (u), KEY (v))")
            .await
            .expect("t");
        setup.query_drop("INSERT INTO lr.acct VALUES (1,10,100),(2,20,200),(3,30,300)").await.expect("rows");
        let mut a = connect(port, Some("lr")).await;
        let mut b = connect(port, Some("lr")).await;

        b.query_drop("BEGIN").await.expect("begin");
        assert_eq!(ids(&mut b, "SELECT id FROM acct WHERE id = 1 FOR UPDATE").await, vec![1]);

        a.query_drop("BEGIN").await.expect("begin");
        a.query_drop("INSERT INTO acct VALUES (4, 40, 400)").await.expect("earlier write");
        for sql in [
            "SELECT * FROM acct WHERE id = 1 FOR UPDATE NOWAIT",
            "SELECT * FROM acct WHERE id = 1 FOR SHARE NOWAIT",
            "SELECT * FROM acct WHERE u = 100 FOR UPDATE NOWAIT",
            "SELECT * FROM acct WHERE id IN (2, 1) FOR UPDATE NOWAIT",
            "SELECT * FROM acct WHERE v BETWEEN 5 AND 25 FOR SHARE NOWAIT",
            "SELECT * FROM acct FOR UPDATE NOWAIT",
            "SELECT * FROM acct ORDER BY id LIMIT 2 FOR UPDATE NOWAIT",
        ] {
            let (code, state, msg) = server_err(a.query_drop(sql).await);
            assert_eq!((code, state.as_str(), msg.as_str()), (3572, "HY000", NOWAIT_MSG), "{sql}");
        }
        // The transaction is still open, with its earlier write.
        assert_eq!(ids(&mut a, "SELECT id FROM acct WHERE id = 4").await, vec![4]);
        a.query_drop("COMMIT").await.expect("commit");
        assert_eq!(ids(&mut b, "SELECT id FROM acct WHERE id = 4").await, vec![4], "committed");

        // Autocommit: the statement is its own transaction.
        let (code, _, _) = server_err(a.query_drop("SELECT * FROM acct WHERE id = 1 FOR UPDATE NOWAIT").await);
        assert_eq!(code, 3572);
        // A locking clause of a derived table locks too (so the statement
        // runs in a transaction even when the outer block does not lock).
        let sql = "SELECT id FROM (SELECT id FROM acct WHERE id = 1 FOR UPDATE NOWAIT) d";
        assert_eq!(server_err(a.query_drop(sql).await).0, 3572, "{sql}");
        let sql = "SELECT id FROM acct WHERE id IN (SELECT id FROM acct WHERE v = 10 FOR SHARE NOWAIT)";
        assert_eq!(server_err(a.query_drop(sql).await).0, 3572, "{sql}");
        assert_eq!(ids(&mut a, "SELECT id FROM acct WHERE id = 2 FOR UPDATE NOWAIT").await, vec![2]);
        // The prepared form.
        let st = a.prep("SELECT id FROM acct WHERE id = ? FOR UPDATE NOWAIT").await.expect("prepare");
        let (code, _, _) = server_err(a.exec_first::<i64, _, _>(&st, (1,)).await);
        assert_eq!(code, 3572);
        assert_eq!(a.exec_first::<i64, _, _>(&st, (3,)).await.expect("exec"), Some(3));
        b.query_drop("COMMIT").await.expect("commit");
        assert_eq!(a.exec_first::<i64, _, _>(&st, (1,)).await.expect("exec"), Some(1), "released");
    });
}

#[test]
fn skip_locked_on_every_access_path() {
    let (rt, node) = runtime_and_node(norr_knobs::Knobs::default());
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let port = sql_node(&addr).await;
        let mut setup = connect(port, None).await;
        setup.query_drop("CREATE DATABASE lr").await.expect("db");
        setup
            .query_drop("CREATE TABLE lr.acct (id INT PRIMARY KEY, v INT, u INT, UNIQUE KEY (u), KEY (v))")
            .await
            .expect("t");
        setup.query_drop("CREATE TABLE lr.jobs (id INT PRIMARY KEY, acct INT)").await.expect("t");
        setup.query_drop("INSERT INTO lr.acct VALUES (1,10,100),(2,20,200),(3,30,300),(4,40,400)").await.expect("r");
        setup.query_drop("INSERT INTO lr.jobs VALUES (1,1),(2,2),(3,3),(4,4)").await.expect("rows");
        // A view MERGE reads as its table, so its rows are locked.
        setup.query_drop("CREATE VIEW lr.big AS SELECT id, v FROM lr.acct WHERE v >= 10").await.expect("view");
        let mut a = connect(port, Some("lr")).await;
        let mut b = connect(port, Some("lr")).await;
        let mut s = connect(port, Some("lr")).await;

        // b holds row 1 exclusively, s holds row 2 shared.
        b.query_drop("BEGIN").await.expect("begin");
        assert_eq!(ids(&mut b, "SELECT id FROM acct WHERE id = 1 FOR UPDATE").await, vec![1]);
        s.query_drop("BEGIN").await.expect("begin");
        assert_eq!(ids(&mut s, "SELECT id FROM acct WHERE id = 2 LOCK IN SHARE MODE").await, vec![2]);

        a.query_drop("BEGIN").await.expect("begin");
        for (sql, want) in [
            ("SELECT id FROM acct WHERE id = 1 FOR SHARE SKIP LOCKED", vec![]),
            ("SELECT id FROM acct WHERE u = 100 FOR UPDATE SKIP LOCKED", vec![]),
            ("SELECT id FROM acct WHERE id IN (1, 2, 3) ORDER BY id FOR SHARE SKIP LOCKED", vec![2, 3]),
            ("SELECT id FROM acct WHERE id IN (1, 2, 3) ORDER BY id FOR UPDATE SKIP LOCKED", vec![3]),
            ("SELECT id FROM acct WHERE v >= 10 ORDER BY id FOR SHARE SKIP LOCKED", vec![2, 3, 4]),
            ("SELECT id FROM acct ORDER BY id FOR UPDATE SKIP LOCKED", vec![3, 4]),
            ("SELECT a.id FROM jobs j JOIN acct a ON a.id = j.acct ORDER BY a.id FOR SHARE SKIP LOCKED", vec![2, 3, 4]),
            ("SELECT id FROM big ORDER BY id FOR UPDATE SKIP LOCKED", vec![3, 4]),
            ("SELECT id FROM big ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED", vec![3]),
        ] {
            assert_eq!(ids(&mut a, sql).await, want, "{sql}");
        }
        a.query_drop("COMMIT").await.expect("commit");

        // FOR UPDATE OF: only the named table is locked.
        assert_eq!(ids(&mut b, "SELECT id FROM jobs WHERE id = 3 FOR UPDATE").await, vec![3]);
        a.query_drop("BEGIN").await.expect("begin");
        let sql = "SELECT a.id FROM jobs j JOIN acct a ON a.id = j.acct WHERE j.id = 3 FOR UPDATE OF a NOWAIT";
        assert_eq!(ids(&mut a, sql).await, vec![3], "jobs is read without a lock");
        let sql = "SELECT a.id FROM jobs j JOIN acct a ON a.id = j.acct WHERE j.id = 3 FOR UPDATE OF j NOWAIT";
        assert_eq!(server_err(a.query_drop(sql).await).0, 3572);
        // MySQL's list after OF: every table named is locked.
        let sql = "SELECT a.id FROM jobs j JOIN acct a ON a.id = j.acct WHERE j.id = 3 FOR UPDATE OF a, j NOWAIT";
        assert_eq!(server_err(a.query_drop(sql).await).0, 3572);
        let sql = "SELECT a.id FROM jobs j JOIN acct a ON a.id = j.acct ORDER BY a.id FOR SHARE OF j, a SKIP LOCKED";
        assert_eq!(ids(&mut a, sql).await, vec![2, 4], "job 3 and account 1 are locked by b");
        let sql = "SELECT a.id FROM jobs j JOIN acct a ON a.id = j.acct FOR UPDATE OF a, j, a";
        assert_eq!(server_err(a.query_drop(sql).await).0, 3569);
        let sql = "SELECT a.id FROM jobs j JOIN acct a ON a.id = j.acct FOR UPDATE OF nope";
        assert_eq!(server_err(a.query_drop(sql).await).0, 3568);
        a.query_drop("COMMIT").await.expect("commit");
        b.query_drop("COMMIT").await.expect("commit");
        s.query_drop("COMMIT").await.expect("commit");
    });
}
