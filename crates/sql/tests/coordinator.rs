//! sqld starts each transaction on the TC its first statement's partition maps
//! to, for RANGE partitioning (the SQL layer maps rows to partitions by value)
//! and for hash partitioning (the client hashes the key as the data node does).
//!
//! The data node runs two TC instances with room for ONE open transaction each
//! (`tc_instances = 2`, `max_transactions = 1`), so the node's answer shows where
//! a transaction went: while a session holds a transaction on TC 0, another
//! transaction whose first row lies in an even partition is refused (temporary
//! error 4006, out of transaction records), one in an odd partition is accepted. See
//! crates/client/tests/coordinator.rs for why this set-up.

use norr_signals::partition::partition_of_pk;
use norr_signals::Value;
use norr_sql::engine::{Engine, EngineConfig};
use norr_sql::types::{QueryOutput, Session, SqlError};

async fn run(e: &Engine, s: &mut Session, sql: &str) -> Result<QueryOutput, SqlError> {
    e.execute_text(s, sql).await.pop().expect("one result")
}

async fn ok(e: &Engine, s: &mut Session, sql: &str) {
    if let Err(err) = run(e, s, sql).await {
        panic!("{sql}: {} {}", err.code, err.message);
    }
}

async fn refused(e: &Engine, s: &mut Session, sql: &str) {
    match run(e, s, sql).await {
        Err(err) => assert!(err.code == 1297 && err.message.contains("4006"), "{sql}: {} {}", err.code, err.message),
        Ok(o) => panic!("{sql}: expected the full TC to refuse it, got {o:?}"),
    }
}

#[test]
fn first_statement_partition_chooses_the_tc() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let knobs = norr_knobs::Knobs { tc_instances: 2, max_transactions: 1, ..Default::default() };
    let node = norr_runtime::start_data_node(norr_runtime::DataNodeConfig {
        node_id: 1,
        listen: "127.0.0.1:0".parse().expect("addr"),
        knobs,
        cluster: None,
    })
    .expect("data node starts");
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let e = Engine::connect(&addr, EngineConfig::default()).await.expect("engine connects");
        assert_eq!(e.client().tc_instances(), 2);
        let mut admin = e.new_session(1, "root");
        ok(&e, &mut admin, "CREATE DATABASE d").await;
        ok(&e, &mut admin, "USE d").await;
        ok(
            &e,
            &mut admin,
            "CREATE TABLE r (k INT PRIMARY KEY, v INT) PARTITION BY RANGE (k) (PARTITION p0 VALUES LESS THAN (10), \
             PARTITION p1 VALUES LESS THAN (20), PARTITION p2 VALUES LESS THAN (30), PARTITION p3 VALUES LESS THAN MAXVALUE)",
        )
        .await;
        let mut sess: Vec<Session> = (0..3).map(|i| e.new_session(10 + i, "root")).collect();
        for s in sess.iter_mut() {
            ok(&e, s, "USE d").await;
        }
        let [a, b, c] = &mut sess[..] else { unreachable!() };

        // RANGE: k=5 is in p0 (TC 0), 15 in p1 (TC 1), 25 in p2 (TC 0), 35 in p3 (TC 1).
        ok(&e, a, "BEGIN").await;
        ok(&e, a, "INSERT INTO r VALUES (5, 0)").await;
        ok(&e, b, "BEGIN").await;
        ok(&e, b, "INSERT INTO r VALUES (15, 0)").await;
        ok(&e, c, "BEGIN").await;
        refused(&e, c, "INSERT INTO r VALUES (25, 0)").await;
        ok(&e, b, "COMMIT").await;
        ok(&e, c, "BEGIN").await;
        ok(&e, c, "INSERT INTO r VALUES (35, 0)").await;
        ok(&e, c, "COMMIT").await;
        // Later statements stay with the transaction's TC, whatever they touch.
        ok(&e, a, "INSERT INTO r VALUES (16, 0)").await;
        ok(&e, a, "COMMIT").await;
        match run(&e, &mut admin, "SELECT k FROM r ORDER BY k").await {
            Ok(QueryOutput::Rows { rows, .. }) => {
                let ks: Vec<_> = rows.iter().map(|r| r[0].clone()).collect();
                assert_eq!(ks, [5, 15, 16, 35].map(Value::Int).to_vec());
            }
            other => panic!("{other:?}"),
        }

        // Hash partitioning: the partition of the key, as the data node hashes it.
        ok(&e, &mut admin, "CREATE TABLE h (k INT PRIMARY KEY, v INT) PARTITION BY KEY (k) PARTITIONS 4").await;
        let def = e.client().get_table("d/h").await.expect("native table d/h");
        let tc_of = |k: i64| partition_of_pk(&def, &[Value::Int(k)]).expect("partition") % 2;
        let even: Vec<i64> = (0..40).filter(|k| tc_of(*k) == 0).collect();
        let odd: Vec<i64> = (0..40).filter(|k| tc_of(*k) == 1).collect();
        assert!(even.len() >= 2 && odd.len() >= 2, "{even:?} {odd:?}");
        ok(&e, a, "BEGIN").await;
        ok(&e, a, &format!("INSERT INTO h VALUES ({}, 0)", odd[0])).await;
        ok(&e, b, "BEGIN").await;
        refused(&e, b, &format!("INSERT INTO h VALUES ({}, 0)", odd[1])).await;
        ok(&e, b, "BEGIN").await;
        ok(&e, b, &format!("INSERT INTO h VALUES ({}, 0)", even[0])).await;
        ok(&e, b, "ROLLBACK").await;
        ok(&e, a, "ROLLBACK").await;
        for mut s in sess {
            e.end_session(&mut s).await;
        }
    });
    node.shutdown();
}
