//! CREATE TEMPORARY TABLE through the real server and MySQL clients, against
//! a real data node:
//! * two sessions each have their own temporary table of one name, and a
//!   base table of that name stays visible to a third session;
//! * a temporary table's hidden data-node table goes away when its session
//!   ends: disconnect, KILL, COM_RESET_CONNECTION;
//! * prepared statements follow a temporary table created or dropped under
//!   them (shadowing a base table and back);
//! * a SQL node that starts drops the hidden tables an earlier run of the
//!   same node name left (a crash), and not those of other node names.

mod node_support;

use mysql_async::prelude::*;
use node_support::{code, connect, sql_node};
use norr_sql::engine::{Engine, EngineConfig};

/// The hidden tables of temporary tables now in the data node.
async fn hidden_tables(addr: &str) -> Vec<String> {
    let c = norr_client::Client::connect(addr).await.expect("native client");
    let mut v: Vec<String> = c
        .list_tables()
        .await
        .expect("list")
        .into_iter()
        .map(|d| d.name)
        .filter(|n| n.starts_with("norr_sys/tmp#"))
        .collect();
    v.sort();
    v
}

/// Wait until session `id` is no longer listed. The engine drops a
/// session's temporary tables before it takes the session off the list, so
/// from then on they are gone.
async fn wait_session_gone(observer: &mut mysql_async::Conn, id: u32) {
    loop {
        let n: Option<u64> = observer
            .query_first(format!("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = {id}"))
            .await
            .expect("processlist");
        if n == Some(0) {
            return;
        }
        tokio::task::yield_now().await;
    }
}

#[test]
fn sessions_see_only_their_own_temporary_tables_which_go_with_the_session() {
    let (rt, node) = node_support::runtime_and_node(norr_knobs::Knobs::default());
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let port = sql_node(&addr).await;
        connect(port, None).await.query_drop("CREATE DATABASE tt").await.unwrap();
        let mut a = connect(port, Some("tt")).await;
        let mut b = connect(port, Some("tt")).await;
        let mut c = connect(port, Some("tt")).await;
        c.query_drop("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))").await.unwrap();
        c.query_drop("INSERT INTO t VALUES (1, 'base')").await.unwrap();

        // a and b each shadow t with their own temporary table.
        a.query_drop("CREATE TEMPORARY TABLE t (id INT PRIMARY KEY, v VARCHAR(10))").await.unwrap();
        b.query_drop("CREATE TEMPORARY TABLE t (id INT PRIMARY KEY, v VARCHAR(10))").await.unwrap();
        a.query_drop("INSERT INTO t VALUES (1, 'a1'), (2, 'a2')").await.unwrap();
        b.query_drop("INSERT INTO t VALUES (1, 'b1')").await.unwrap();
        let ra: Vec<(i32, String)> = a.query("SELECT id, v FROM t ORDER BY id").await.unwrap();
        let rb: Vec<(i32, String)> = b.query("SELECT id, v FROM t ORDER BY id").await.unwrap();
        let rc: Vec<(i32, String)> = c.query("SELECT id, v FROM t ORDER BY id").await.unwrap();
        assert_eq!(ra, vec![(1, "a1".into()), (2, "a2".into())]);
        assert_eq!(rb, vec![(1, "b1".into())]);
        assert_eq!(rc, vec![(1, "base".into())]);
        // a's other temporary table is not b's to read or drop.
        a.query_drop("CREATE TEMPORARY TABLE only_a (x INT)").await.unwrap();
        assert_eq!(code(b.query_drop("SELECT * FROM only_a").await.unwrap_err()), 1146);
        assert_eq!(code(b.query_drop("DROP TEMPORARY TABLE only_a").await.unwrap_err()), 1051);
        // Nowhere in the lists.
        let tables: Vec<String> = c.query("SHOW TABLES").await.unwrap();
        assert_eq!(tables, vec!["t".to_string()]);
        let dbs: Vec<String> = c.query("SHOW DATABASES").await.unwrap();
        assert!(!dbs.iter().any(|d| d == "norr_sys"), "{dbs:?}");
        assert_eq!(hidden_tables(&addr).await.len(), 3);

        // a disconnects: its two tables go.
        let ida = a.id();
        a.disconnect().await.unwrap();
        wait_session_gone(&mut c, ida).await;
        assert_eq!(hidden_tables(&addr).await.len(), 1, "only b's is left");

        // b is killed: its table goes.
        let idb = b.id();
        c.query_drop(format!("KILL {idb}")).await.unwrap();
        wait_session_gone(&mut c, idb).await;
        assert_eq!(hidden_tables(&addr).await, Vec::<String>::new());
        let rc: Vec<(i32, String)> = c.query("SELECT id, v FROM t ORDER BY id").await.unwrap();
        assert_eq!(rc, vec![(1, "base".into())], "the base table is untouched");

        // COM_RESET_CONNECTION ends the session too (answered after the drop).
        c.query_drop("CREATE TEMPORARY TABLE r (x INT)").await.unwrap();
        assert_eq!(hidden_tables(&addr).await.len(), 1);
        c.reset().await.unwrap();
        assert_eq!(hidden_tables(&addr).await, Vec::<String>::new());
        c.query_drop("USE tt").await.unwrap();
        assert_eq!(code(c.query_drop("SELECT * FROM r").await.unwrap_err()), 1146);
    });
}

#[test]
fn prepared_statements_follow_temporary_tables_created_and_dropped() {
    let (rt, node) = node_support::runtime_and_node(norr_knobs::Knobs::default());
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let port = sql_node(&addr).await;
        connect(port, None).await.query_drop("CREATE DATABASE tp").await.unwrap();
        let mut a = connect(port, Some("tp")).await;
        a.query_drop("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))").await.unwrap();
        a.query_drop("INSERT INTO t VALUES (1, 'base')").await.unwrap();
        let sel = a.prep("SELECT v FROM t WHERE id = ?").await.unwrap();
        let upd = a.prep("UPDATE t SET v = ? WHERE id = ?").await.unwrap();
        let ins = a.prep("INSERT INTO t VALUES (?, ?)").await.unwrap();
        let v: Option<String> = a.exec_first(&sel, (1,)).await.unwrap();
        assert_eq!(v.as_deref(), Some("base"));
        a.exec_drop(&upd, ("base!", 1)).await.unwrap();

        // A temporary t now shadows the base table for every statement.
        a.query_drop("CREATE TEMPORARY TABLE t (id INT PRIMARY KEY, v VARCHAR(10))").await.unwrap();
        let v: Option<String> = a.exec_first(&sel, (1,)).await.unwrap();
        assert_eq!(v, None, "the temporary table is empty");
        a.exec_drop(&ins, (1, "tmp")).await.unwrap();
        a.exec_drop(&upd, ("tmp!", 1)).await.unwrap();
        let v: Option<String> = a.exec_first(&sel, (1,)).await.unwrap();
        assert_eq!(v.as_deref(), Some("tmp!"));

        // ALTER TABLE changes the temporary table under the prepared
        // statements: a longer VARCHAR takes a longer value, and the
        // prepared INSERT now lacks a column (1136).
        a.exec_drop(&upd, ("a longer value", 1)).await.unwrap_err();
        a.query_drop("ALTER TABLE t ADD COLUMN n INT DEFAULT 3, MODIFY v VARCHAR(20)").await.unwrap();
        a.exec_drop(&upd, ("a longer value", 1)).await.unwrap();
        let v: Option<String> = a.exec_first(&sel, (1,)).await.unwrap();
        assert_eq!(v.as_deref(), Some("a longer value"));
        assert_eq!(code(a.exec_drop(&ins, (2, "x")).await.unwrap_err()), 1136);
        let n: Option<i32> = a.query_first("SELECT n FROM t WHERE id = 1").await.unwrap();
        assert_eq!(n, Some(3));

        // Dropped: back to the base table, which none of that touched.
        a.query_drop("DROP TEMPORARY TABLE t").await.unwrap();
        let v: Option<String> = a.exec_first(&sel, (1,)).await.unwrap();
        assert_eq!(v.as_deref(), Some("base!"));
        a.exec_drop(&upd, ("base2", 1)).await.unwrap();
        let v: Option<String> = a.exec_first(&sel, (1,)).await.unwrap();
        assert_eq!(v.as_deref(), Some("base2"));

        // A statement prepared over a temporary table that has no base
        // table behind it: 1146 once it is dropped.
        a.query_drop("CREATE TEMPORARY TABLE only_tmp (id INT PRIMARY KEY)").await.unwrap();
        a.query_drop("INSERT INTO only_tmp VALUES (5)").await.unwrap();
        let q = a.prep("SELECT id FROM only_tmp WHERE id = ?").await.unwrap();
        let v: Option<i32> = a.exec_first(&q, (5,)).await.unwrap();
        assert_eq!(v, Some(5));
        a.query_drop("DROP TABLE only_tmp").await.unwrap();
        assert_eq!(code(a.exec_first::<i32, _, _>(&q, (5,)).await.unwrap_err()), 1146);
    });
}

#[test]
fn a_starting_sql_node_drops_the_temporary_tables_its_earlier_run_left() {
    let (rt, node) = node_support::runtime_and_node(norr_knobs::Knobs::default());
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let named = |name: &str| EngineConfig { node_name: name.to_string(), ..Default::default() };
        let first = Engine::connect(&addr, named("sql-1")).await.expect("engine");
        let other = Engine::connect(&addr, named("sql-2")).await.expect("engine");
        let mut admin = first.new_session(1, "root");
        for r in first.execute_text(&mut admin, "CREATE DATABASE sw").await {
            r.expect("create database");
        }
        // Sessions of both nodes make temporary tables, then their
        // processes "die": the sessions never end.
        for (engine, id) in [(&first, 2), (&first, 3), (&other, 2)] {
            let mut s = engine.new_session(id, "root");
            for r in engine.execute_text(&mut s, "CREATE TEMPORARY TABLE sw.x (a INT PRIMARY KEY)").await {
                r.expect("create temporary");
            }
            std::mem::forget(s);
        }
        let left = hidden_tables(&addr).await;
        assert_eq!(left.len(), 3, "{left:?}");
        assert_eq!(left.iter().filter(|n| n.starts_with("norr_sys/tmp#sql-1#")).count(), 2, "{left:?}");

        // sql-1 starts again: its two are swept, sql-2's stays.
        let _restarted = Engine::connect(&addr, named("sql-1")).await.expect("engine");
        let left = hidden_tables(&addr).await;
        assert_eq!(left.len(), 1, "{left:?}");
        assert!(left[0].starts_with("norr_sys/tmp#sql-2#"), "{left:?}");
    });
}
