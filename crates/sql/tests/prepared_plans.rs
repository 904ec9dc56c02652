//! Prepared statements keep their compiled plans between executions; these
//! check that a kept plan follows DDL and the session's default database
//! (an in-process data node and an `Engine`, no wire protocol).

use norr_signals::Value;
use norr_sql::engine::{Engine, EngineConfig};
use norr_sql::types::{QueryOutput, Session};

async fn run(e: &Engine, s: &mut Session, sql: &str) -> QueryOutput {
    let mut r = e.execute_text(s, sql).await;
    assert_eq!(r.len(), 1, "{sql}");
    r.pop().expect("one result").unwrap_or_else(|err| panic!("{sql}: {err}"))
}

async fn rows(e: &Engine, s: &mut Session, sql: &str) -> Vec<Vec<Value>> {
    match run(e, s, sql).await {
        QueryOutput::Rows { rows, .. } => rows,
        other => panic!("{sql}: not rows: {other:?}"),
    }
}

fn affected(out: QueryOutput) -> u64 {
    match out {
        QueryOutput::Ok { affected_rows, .. } => affected_rows,
        other => panic!("not OK: {other:?}"),
    }
}

#[test]
fn kept_update_and_delete_plans_follow_ddl_and_default_db() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let node = norr_runtime::start_data_node(norr_runtime::DataNodeConfig {
        node_id: 1,
        listen: "127.0.0.1:0".parse().expect("addr"),
        knobs: norr_knobs::Knobs::default(),
    })
    .expect("data node starts");
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let e = Engine::connect(&addr, EngineConfig::default()).await.expect("engine connects");
        let mut s = e.new_session(1, "root");
        for sql in [
            "CREATE DATABASE pp1",
            "CREATE DATABASE pp2",
            "USE pp1",
            "CREATE TABLE t (id INT PRIMARY KEY, b INT, c VARCHAR(10))",
            "INSERT INTO t VALUES (1, 10, 'x'), (2, 20, 'y')",
            "CREATE TABLE pp2.t (id INT PRIMARY KEY, b INT, c VARCHAR(10))",
            "INSERT INTO pp2.t VALUES (1, 100, 'p'), (2, 200, 'q')",
        ] {
            run(&e, &mut s, sql).await;
        }
        let upd = e.prepare(&mut s, "UPDATE t SET b = b + ? WHERE id = ?").await.expect("prepare update");
        let del = e.prepare(&mut s, "DELETE FROM t WHERE id = ?").await.expect("prepare delete");
        let up = |n: i64, id: i64| vec![Value::Int(n), Value::Int(id)];

        // Kept after the first execution, reused by the second.
        assert_eq!(affected(e.execute_prepared(&mut s, &upd, up(1, 1)).await.expect("update")), 1);
        assert_eq!(affected(e.execute_prepared(&mut s, &upd, up(1, 1)).await.expect("update")), 1);
        assert_eq!(rows(&e, &mut s, "SELECT b FROM t WHERE id = 1").await, vec![vec![Value::Int(12)]]);

        // The table is dropped and made again with `b` elsewhere: the kept
        // plan must not write the old column position.
        run(&e, &mut s, "DROP TABLE t").await;
        run(&e, &mut s, "CREATE TABLE t (id INT PRIMARY KEY, c VARCHAR(10), b INT)").await;
        run(&e, &mut s, "INSERT INTO t VALUES (1, 'z', 5), (3, 'w', 7)").await;
        assert_eq!(affected(e.execute_prepared(&mut s, &upd, up(2, 1)).await.expect("update after DDL")), 1);
        assert_eq!(
            rows(&e, &mut s, "SELECT c, b FROM t WHERE id = 1").await,
            vec![vec![Value::Bytes(b"z".to_vec()), Value::Int(7)]]
        );

        // Another default database: unqualified `t` is now pp2.t.
        run(&e, &mut s, "USE pp2").await;
        assert_eq!(affected(e.execute_prepared(&mut s, &upd, up(3, 2)).await.expect("update in pp2")), 1);
        assert_eq!(rows(&e, &mut s, "SELECT b FROM t WHERE id = 2").await, vec![vec![Value::Int(203)]]);
        assert_eq!(affected(e.execute_prepared(&mut s, &del, vec![Value::Int(1)]).await.expect("delete")), 1);
        assert_eq!(rows(&e, &mut s, "SELECT id FROM t").await, vec![vec![Value::Int(2)]]);

        // Back in pp1: the delete's kept plan (for pp2.t) is not used there.
        run(&e, &mut s, "USE pp1").await;
        assert_eq!(affected(e.execute_prepared(&mut s, &del, vec![Value::Int(3)]).await.expect("delete")), 1);
        assert_eq!(rows(&e, &mut s, "SELECT id FROM t").await, vec![vec![Value::Int(1)]]);
        assert_eq!(rows(&e, &mut s, "SELECT id FROM pp2.t").await, vec![vec![Value::Int(2)]]);
    });
    node.shutdown();
}
