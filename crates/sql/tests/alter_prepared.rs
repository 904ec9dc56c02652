//! ALTER TABLE under prepared statements and cached definitions, through the
//! real server and a MySQL client: two SQL nodes share one data node; one
//! alters a table the other has cached and prepared statements over. A
//! statement over a dropped column fails with 1054 (never reads another
//! column's data); the others follow the new definition.

mod node_support;

use mysql_async::prelude::*;
use mysql_async::Row;
use node_support::{code, connect, sql_node};

#[test]
fn prepared_statements_follow_an_alter_made_elsewhere() {
    let (rt, node) = node_support::runtime_and_node(norr_knobs::Knobs::default());
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let (p1, p2) = (sql_node(&addr).await, sql_node(&addr).await);
        connect(p1, None).await.query_drop("CREATE DATABASE ap").await.expect("create db");
        let mut a = connect(p1, Some("ap")).await;
        let mut b = connect(p2, Some("ap")).await;
        a.query_drop("CREATE TABLE t (id INT PRIMARY KEY, n INT, s VARCHAR(10))").await.unwrap();
        a.query_drop("INSERT INTO t VALUES (1, 10, 'one'), (2, 20, 'two')").await.unwrap();

        // Node b caches t and prepares over it, on both SQL nodes.
        let sel_s = b.prep("SELECT id, s FROM t WHERE id = ?").await.unwrap();
        let sel_star = b.prep("SELECT * FROM t WHERE id = ?").await.unwrap();
        let ins = b.prep("INSERT INTO t (id, n, s) VALUES (?, ?, ?)").await.unwrap();
        let upd = b.prep("UPDATE t SET n = n + 1 WHERE id = ?").await.unwrap();
        let a_sel = a.prep("SELECT id, s FROM t WHERE id = ?").await.unwrap();
        let r: Option<(i64, String)> = b.exec_first(&sel_s, (1,)).await.unwrap();
        assert_eq!(r, Some((1, "one".into())));
        b.exec_drop(&upd, (1,)).await.unwrap();
        let r: Option<(i64, String)> = a.exec_first(&a_sel, (2,)).await.unwrap();
        assert_eq!(r, Some((2, "two".into())));

        // Node a drops s and adds c in front of everything.
        a.query_drop("ALTER TABLE t DROP COLUMN s, ADD COLUMN c INT NOT NULL DEFAULT 5 FIRST").await.unwrap();

        // Statements over s fail, on both nodes, and read nothing.
        assert_eq!(code(b.exec_first::<Row, _, _>(&sel_s, (1,)).await.unwrap_err()), 1054);
        assert_eq!(code(a.exec_first::<Row, _, _>(&a_sel, (1,)).await.unwrap_err()), 1054);
        assert_eq!(code(b.exec_drop(&ins, (3, 30, "three")).await.unwrap_err()), 1054);
        // The others run against the new definition.
        b.exec_drop(&upd, (1,)).await.unwrap();
        let r: Vec<Row> = b.exec(&sel_star, (1,)).await.unwrap();
        assert_eq!(r.len(), 1);
        let cols: Vec<String> = r[0].columns_ref().iter().map(|c| c.name_str().into_owned()).collect();
        assert_eq!(cols, vec!["c", "id", "n"]);
        let vals: (i64, i64, i64) = mysql_async::from_row(r[0].clone());
        assert_eq!(vals, (5, 1, 12));
        let r: Vec<(i64, i64, i64)> = b.query("SELECT c, id, n FROM t ORDER BY id").await.unwrap();
        assert_eq!(r, vec![(5, 1, 12), (5, 2, 20)]);
        // A statement prepared after the change sees it.
        let r: Option<(i64, i64)> = b.exec_first("SELECT c, n FROM t WHERE id = ?", (2,)).await.unwrap();
        assert_eq!(r, Some((5, 20)));
        // SHOW CREATE TABLE on the node that did not alter.
        let (_, ddl): (String, String) = b.query_first("SHOW CREATE TABLE t").await.unwrap().unwrap();
        assert!(
            ddl.contains("`c` int NOT NULL DEFAULT '5',\n  `id` int NOT NULL,\n  `n` int DEFAULT NULL,\n"),
            "{ddl}"
        );
    });
}

/// ALTERs of one table from two SQL nodes at once: each is made from the
/// definition it read, so without a check the second would write back a
/// definition without the first's change (a lost column). Every change must
/// be in the final table, as if the ALTERs had run one after the other.
#[test]
fn concurrent_alters_from_two_nodes_lose_no_change() {
    const PER_NODE: usize = 6;
    let (rt, node) = node_support::runtime_and_node(norr_knobs::Knobs::default());
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let (p1, p2) = (sql_node(&addr).await, sql_node(&addr).await);
        connect(p1, None).await.query_drop("CREATE DATABASE race").await.unwrap();
        let mut a = connect(p1, Some("race")).await;
        let mut b = connect(p2, Some("race")).await;
        a.query_drop("CREATE TABLE t (id INT PRIMARY KEY)").await.unwrap();
        a.query_drop("INSERT INTO t VALUES (1), (2)").await.unwrap();
        let add = |conn: &'static str| async move {
            let mut c = if conn == "a" { connect(p1, Some("race")).await } else { connect(p2, Some("race")).await };
            for i in 0..PER_NODE {
                c.query_drop(format!("ALTER TABLE t ADD COLUMN {conn}{i} INT NOT NULL DEFAULT {i}")).await.unwrap();
            }
        };
        tokio::join!(add("a"), add("b"));
        let cols: Vec<String> = b
            .query(
                "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'race' AND TABLE_NAME = 't'",
            )
            .await
            .unwrap();
        assert_eq!(cols.len(), 1 + 2 * PER_NODE, "{cols:?}");
        for i in 0..PER_NODE {
            for conn in ["a", "b"] {
                let name = format!("{conn}{i}");
                assert!(cols.contains(&name), "{name} lost: {cols:?}");
                // The rows kept their values through every rebuild.
                let sum: Option<i64> = a.query_first(format!("SELECT SUM({name}) FROM t")).await.unwrap();
                assert_eq!(sum, Some(2 * i as i64));
            }
        }
    });
}
