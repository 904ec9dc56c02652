//! Views across SQL nodes, through the real server and a MySQL client: two
//! SQL nodes share one data node.
//! * A view created on one SQL node is read, written through, replaced and
//!   dropped on the other (definitions live in the data node's dictionary
//!   table `norr_sys/views`; no SQL node caches them).
//! * A SQL node started later (nothing cached, as after a sqld restart)
//!   reads the view from the data node. (The data node keeps no files yet,
//!   so there is no data-node restart to test.)
//! * Prepared statements (COM_STMT_PREPARE) over a view.

mod node_support;

use mysql_async::prelude::*;
use node_support::{code, connect, sql_node};

#[test]
fn a_view_created_on_one_sql_node_is_seen_by_the_others() {
    let (rt, node) = node_support::runtime_and_node(norr_knobs::Knobs::default());
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let (p1, p2) = (sql_node(&addr).await, sql_node(&addr).await);
        connect(p1, None).await.query_drop("CREATE DATABASE vw").await.unwrap();
        let mut a = connect(p1, Some("vw")).await;
        let mut b = connect(p2, Some("vw")).await;
        a.query_drop("CREATE TABLE t (id INT PRIMARY KEY, v INT)").await.unwrap();
        a.query_drop("INSERT INTO t VALUES (1, 10), (2, 20), (3, 30)").await.unwrap();
        // b has seen t before the view exists.
        let n: Option<i64> = b.query_first("SELECT COUNT(*) FROM t").await.unwrap();
        assert_eq!(n, Some(3));
        assert_eq!(code(b.query_drop("SELECT * FROM big").await.unwrap_err()), 1146);

        a.query_drop("CREATE VIEW big AS SELECT id, v FROM t WHERE v >= 20 WITH CHECK OPTION").await.unwrap();
        let rows: Vec<(i32, i32)> = b.query("SELECT id, v FROM big ORDER BY id").await.unwrap();
        assert_eq!(rows, vec![(2, 20), (3, 30)]);
        // b writes through it, CHECK OPTION included.
        b.query_drop("UPDATE big SET v = 25 WHERE id = 2").await.unwrap();
        assert_eq!(code(b.query_drop("UPDATE big SET v = 5 WHERE id = 2").await.unwrap_err()), 1369);
        let v: Option<i32> = a.query_first("SELECT v FROM t WHERE id = 2").await.unwrap();
        assert_eq!(v, Some(25));

        // Prepared over the view, on b.
        let stmt = b.prep("SELECT v FROM big WHERE id = ?").await.unwrap();
        let v: Option<i32> = b.exec_first(&stmt, (3,)).await.unwrap();
        assert_eq!(v, Some(30));
        let v: Option<i32> = b.exec_first(&stmt, (1,)).await.unwrap();
        assert_eq!(v, None, "row 1 is not in the view");

        // Replaced on a, read on b.
        a.query_drop("CREATE OR REPLACE VIEW big AS SELECT id, v FROM t WHERE v < 20").await.unwrap();
        let rows: Vec<(i32, i32)> = b.query("SELECT id, v FROM big ORDER BY id").await.unwrap();
        assert_eq!(rows, vec![(1, 10)]);

        // A SQL node started now reads the view from the data node.
        let p3 = sql_node(&addr).await;
        let mut fresh = connect(p3, Some("vw")).await;
        let (name, ddl, _, _): (String, String, String, String) =
            fresh.query_first("SHOW CREATE VIEW big").await.unwrap().unwrap();
        assert_eq!(name, "big");
        assert!(
            ddl.starts_with("CREATE ALGORITHM=UNDEFINED DEFINER=`root`@`%` SQL SECURITY DEFINER VIEW `big` AS "),
            "{ddl}"
        );
        let tables: Vec<(String, String)> = fresh.query("SHOW FULL TABLES").await.unwrap();
        assert_eq!(tables, vec![("big".into(), "VIEW".into()), ("t".into(), "BASE TABLE".into())]);

        // Dropped on b: gone on a, and the name is free for a table.
        b.query_drop("DROP VIEW big").await.unwrap();
        assert_eq!(code(a.query_drop("SELECT * FROM big").await.unwrap_err()), 1146);
        a.query_drop("CREATE TABLE big (x INT PRIMARY KEY)").await.unwrap();
        assert_eq!(code(b.query_drop("CREATE VIEW big AS SELECT 1").await.unwrap_err()), 1050);
    });
}

/// A statement prepared on one SQL node over a view follows CREATE OR
/// REPLACE / ALTER / DROP VIEW made on another: the kept plan is checked
/// against the stored definition before each execution.
#[test]
fn a_prepared_statement_follows_view_changes_made_on_another_sql_node() {
    let (rt, node) = node_support::runtime_and_node(norr_knobs::Knobs::default());
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let (p1, p2) = (sql_node(&addr).await, sql_node(&addr).await);
        connect(p1, None).await.query_drop("CREATE DATABASE vp").await.unwrap();
        let mut a = connect(p1, Some("vp")).await;
        let mut b = connect(p2, Some("vp")).await;
        a.query_drop("CREATE TABLE t (id INT PRIMARY KEY, v INT)").await.unwrap();
        a.query_drop("INSERT INTO t VALUES (1, 10), (2, 20), (3, 30)").await.unwrap();
        a.query_drop("CREATE VIEW w AS SELECT id, v FROM t WHERE v >= 20").await.unwrap();

        let point = b.prep("SELECT v FROM w WHERE id = ?").await.unwrap();
        let all = b.prep("SELECT id, v FROM w ORDER BY id").await.unwrap();
        let v: Option<i32> = b.exec_first(&point, (1,)).await.unwrap();
        assert_eq!(v, None);
        let rows: Vec<(i32, i32)> = b.exec(&all, ()).await.unwrap();
        assert_eq!(rows, vec![(2, 20), (3, 30)]);

        a.query_drop("CREATE OR REPLACE VIEW w AS SELECT id, v FROM t WHERE v < 20").await.unwrap();
        let v: Option<i32> = b.exec_first(&point, (1,)).await.unwrap();
        assert_eq!(v, Some(10), "the replaced view's rows");
        let rows: Vec<(i32, i32)> = b.exec(&all, ()).await.unwrap();
        assert_eq!(rows, vec![(1, 10)]);

        // A view over a view: the inner one changes.
        a.query_drop("CREATE VIEW outer_w AS SELECT id, v FROM w").await.unwrap();
        let outer = b.prep("SELECT COUNT(*) FROM outer_w").await.unwrap();
        let n: Option<i64> = b.exec_first(&outer, ()).await.unwrap();
        assert_eq!(n, Some(1));
        a.query_drop("ALTER VIEW w AS SELECT id, v * 2 AS v FROM t").await.unwrap();
        let n: Option<i64> = b.exec_first(&outer, ()).await.unwrap();
        assert_eq!(n, Some(3));
        let v: Option<i32> = b.exec_first(&point, (3,)).await.unwrap();
        assert_eq!(v, Some(60));

        // Dropped: 1146 (1356 through the outer view), then a table of the name.
        a.query_drop("DROP VIEW w").await.unwrap();
        assert_eq!(code(b.exec_drop(&point, (1,)).await.unwrap_err()), 1146);
        assert_eq!(code(b.exec_drop(&outer, ()).await.unwrap_err()), 1356);
        a.query_drop("CREATE TABLE w (id INT PRIMARY KEY, v INT)").await.unwrap();
        a.query_drop("INSERT INTO w VALUES (1, 111)").await.unwrap();
        let v: Option<i32> = b.exec_first(&point, (1,)).await.unwrap();
        assert_eq!(v, Some(111));
    });
}

/// CREATE TABLE on one SQL node and CREATE VIEW of the same name on another,
/// at the same moment: never both (one namespace; see `engine::namespace`).
#[test]
fn a_name_raced_as_table_and_view_on_two_sql_nodes_is_one_of_them() {
    let (rt, node) = node_support::runtime_and_node(norr_knobs::Knobs::default());
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let (p1, p2) = (sql_node(&addr).await, sql_node(&addr).await);
        connect(p1, None).await.query_drop("CREATE DATABASE vr").await.unwrap();
        let mut a = connect(p1, Some("vr")).await;
        let mut b = connect(p2, Some("vr")).await;
        a.query_drop("CREATE TABLE base (id INT PRIMARY KEY)").await.unwrap();
        const ROUNDS: usize = 24;
        for i in 0..ROUNDS {
            let (t, v) = tokio::join!(
                a.query_drop(format!("CREATE TABLE n{i} (x INT PRIMARY KEY)")),
                b.query_drop(format!("CREATE VIEW n{i} AS SELECT id FROM base")),
            );
            assert!(!(t.is_ok() && v.is_ok()), "round {i}: both a table and a view n{i} were made");
            for r in [t, v] {
                if let Err(e) = r {
                    assert_eq!(code(e), 1050, "round {i}");
                }
            }
        }
        let listed: Vec<(String, String)> = connect(p1, Some("vr")).await.query("SHOW FULL TABLES").await.unwrap();
        let mut names: Vec<&str> = listed.iter().map(|(n, _)| n.as_str()).collect();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before, "a name listed twice: {listed:?}");
    });
}

/// The result columns of the optional side of an outer join carry no
/// NOT_NULL flag, read directly or through a view, as MySQL sends them
/// (drivers and ORMs decide nullability from it).
#[test]
fn outer_join_columns_are_sent_as_nullable() {
    use mysql_async::consts::ColumnFlags;
    let (rt, node) = node_support::runtime_and_node(norr_knobs::Knobs::default());
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let p = sql_node(&addr).await;
        connect(p, None).await.query_drop("CREATE DATABASE oj").await.unwrap();
        let mut a = connect(p, Some("oj")).await;
        a.query_drop(
            "CREATE TABLE l (id INT PRIMARY KEY, x INT NOT NULL); CREATE TABLE r (id INT PRIMARY KEY, y INT NOT NULL); \
             INSERT INTO l VALUES (1, 10); INSERT INTO r VALUES (1, 100); \
             CREATE VIEW lv AS SELECT l.x, r.y FROM l LEFT JOIN r ON l.id = r.id",
        )
        .await
        .unwrap();
        for sql in [
            "SELECT l.x, r.y FROM l LEFT JOIN r ON l.id = r.id",
            "SELECT l.x, r.y FROM r RIGHT JOIN l ON l.id = r.id",
            "SELECT x, y FROM lv",
        ] {
            let rows: Vec<mysql_async::Row> = a.query(sql).await.unwrap();
            let cols = rows[0].columns_ref();
            let not_null: Vec<bool> = cols.iter().map(|c| c.flags().contains(ColumnFlags::NOT_NULL_FLAG)).collect();
            assert_eq!(not_null, vec![true, false], "{sql}");
        }
        let rows: Vec<mysql_async::Row> = a.query("SELECT l.x, r.y FROM l JOIN r ON l.id = r.id").await.unwrap();
        assert!(rows[0].columns_ref().iter().all(|c| c.flags().contains(ColumnFlags::NOT_NULL_FLAG)));
    });
}
