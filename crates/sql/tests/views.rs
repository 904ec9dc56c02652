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
