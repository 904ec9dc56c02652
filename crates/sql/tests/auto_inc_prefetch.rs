//! AUTO_INCREMENT ranges kept by each SQL node (`ndb_autoincrement_prefetch_sz`)
//! through the real server and a MySQL client: two SQL nodes share one data
//! node. Each hands out consecutive values from its own range; values stay
//! unique across the nodes; a TRUNCATE made through one node makes the other
//! drop the range it kept (the table's version changed), so no generated
//! value collides with one the truncating node hands out afterwards.

mod node_support;

use mysql_async::prelude::*;
use node_support::{connect, sql_node};
use std::collections::BTreeSet;

async fn insert_ids(c: &mut mysql_async::Conn, table: &str, n: usize) -> Vec<u64> {
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        c.query_drop(format!("INSERT INTO {table} (v) VALUES (1)")).await.expect("insert");
        ids.push(c.last_insert_id().expect("an insert id"));
    }
    ids
}

#[test]
fn each_sql_node_hands_out_its_own_range_and_a_truncate_elsewhere_ends_it() {
    let (rt, node) = node_support::runtime_and_node(norr_knobs::Knobs::default());
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let (p1, p2) = (sql_node(&addr).await, sql_node(&addr).await);
        connect(p1, None).await.query_drop("CREATE DATABASE ai").await.unwrap();
        let mut a = connect(p1, Some("ai")).await;
        let mut b = connect(p2, Some("ai")).await;
        a.query_drop("CREATE TABLE t (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT)").await.unwrap();
        let r: Option<u64> = a.query_first("SELECT @@ndb_autoincrement_prefetch_sz").await.unwrap();
        assert_eq!(r, Some(512));

        // Consecutive on one node; the other node's range is elsewhere.
        assert_eq!(insert_ids(&mut a, "t", 3).await, vec![1, 2, 3]);
        let from_b = insert_ids(&mut b, "t", 2).await;
        assert_eq!(from_b, vec![513, 514], "b reserved the range after a's");
        assert_eq!(insert_ids(&mut a, "t", 1).await, vec![4]);
        // A multi-row INSERT takes consecutive values from the kept range.
        a.query_drop("INSERT INTO t (v) VALUES (1), (1), (1)").await.unwrap();
        assert_eq!(a.last_insert_id(), Some(5), "the first of the statement's values");
        // The table's next value, as this node would hand it out.
        let next: Option<u64> = a
            .query_first(
                "SELECT AUTO_INCREMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'ai' AND TABLE_NAME = 't'",
            )
            .await
            .unwrap();
        assert_eq!(next, Some(8));
        // An explicit value inside the kept range moves the next one past it.
        a.query_drop("INSERT INTO t VALUES (100, 1)").await.unwrap();
        assert_eq!(insert_ids(&mut a, "t", 1).await, vec![101]);

        // TRUNCATE through b, then b fills the start of the new life of
        // the table. a still keeps 102..512 of the old one: handing them
        // out would collide with b's 102.. (1062 on a generated value).
        b.query_drop("TRUNCATE TABLE t").await.unwrap();
        let b_ids = insert_ids(&mut b, "t", 150).await;
        assert_eq!(b_ids, (1..=150).collect::<Vec<u64>>());
        let a_ids = insert_ids(&mut a, "t", 150).await;
        assert!(a_ids.iter().all(|&i| i > 512), "a reserved a new range after the TRUNCATE: {a_ids:?}");
        let all: BTreeSet<u64> = b_ids.iter().chain(&a_ids).copied().collect();
        assert_eq!(all.len(), 300, "every generated value is unique");
        let n: Option<u64> = b.query_first("SELECT COUNT(*) FROM t").await.unwrap();
        assert_eq!(n, Some(300));

        // An UPDATE that writes a value past every range moves the counter
        // past it on this node (issue 24's UPDATE rule).
        a.query_drop("UPDATE t SET id = 5000 WHERE id = 1").await.unwrap();
        assert!(insert_ids(&mut a, "t", 1).await[0] > 5000);

        // A prefetch of 1 asks the data node for every statement: the two
        // nodes' values interleave in insertion order, as without ranges.
        a.query_drop("SET ndb_autoincrement_prefetch_sz = 1").await.unwrap();
        b.query_drop("SET SESSION ndb_autoincrement_prefetch_sz = 1").await.unwrap();
        a.query_drop("CREATE TABLE u (id INT AUTO_INCREMENT PRIMARY KEY, v INT)").await.unwrap();
        let mut order = Vec::new();
        for _ in 0..3 {
            order.extend(insert_ids(&mut a, "u", 1).await);
            order.extend(insert_ids(&mut b, "u", 1).await);
        }
        assert_eq!(order, vec![1, 2, 3, 4, 5, 6]);
        // Out of range values are clamped as NDB does (1..65536).
        a.query_drop("SET ndb_autoincrement_prefetch_sz = 0").await.unwrap();
        let r: Option<u64> = a.query_first("SELECT @@ndb_autoincrement_prefetch_sz").await.unwrap();
        assert_eq!(r, Some(1));
    });
}
