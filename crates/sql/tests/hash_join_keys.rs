//! Issue 23: a hash join keys on every equality of ON, not the first only.
//! `o` has N orders of one warehouse, `ol` ten lines per order: with a key
//! of `w` alone every order is compared with every line (N * 10N pairs);
//! with the key (w, id) each line meets its own order. The count of pairs
//! compared (`Norr_join_rows_compared`) shows which, in either order of the
//! equalities, and the results are right (NULLs and LEFT JOIN included).
//!
//! One test function: the counter is the process's.

mod node_support;

use mysql_async::prelude::*;

const ORDERS: i64 = 1_600;
const LINES_PER_ORDER: i64 = 10;

async fn compared(c: &mut mysql_async::Conn) -> u64 {
    let row: Option<(String, String)> =
        c.query_first("SHOW GLOBAL STATUS LIKE 'Norr_join_rows_compared'").await.expect("SHOW STATUS");
    row.expect("the counter").1.parse().expect("a number")
}

#[test]
fn hash_join_keys_on_every_equality() {
    let (rt, node) = node_support::runtime_and_node(norr_knobs::Knobs::default());
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let port = node_support::sql_node(&addr).await;
        let mut c = node_support::connect(port, None).await;
        c.query_drop("CREATE DATABASE hj").await.unwrap();
        c.query_drop("USE hj").await.unwrap();
        // No index on the joined columns: the join is a hash join.
        c.query_drop("CREATE TABLE o (pk INT PRIMARY KEY, w INT, id INT)").await.unwrap();
        c.query_drop("CREATE TABLE ol (pk INT PRIMARY KEY, w INT, oid INT, amt INT)").await.unwrap();
        let orders: Vec<String> = (1..=ORDERS).map(|i| format!("({i}, 1, {i})")).collect();
        c.query_drop(format!("INSERT INTO o VALUES {}", orders.join(","))).await.unwrap();
        for chunk in (0..ORDERS * LINES_PER_ORDER).collect::<Vec<_>>().chunks(2000) {
            let lines: Vec<String> =
                chunk.iter().map(|i| format!("({i}, 1, {}, {})", i / LINES_PER_ORDER + 1, i % 7)).collect();
            c.query_drop(format!("INSERT INTO ol VALUES {}", lines.join(","))).await.unwrap();
        }
        // A line of no order and one with a NULL key part.
        c.query_drop("INSERT INTO ol VALUES (1000000, 1, 999999, 1), (1000001, NULL, 5, 1)").await.unwrap();
        let lines = ORDERS * LINES_PER_ORDER;

        for sql in [
            "SELECT COUNT(*) FROM o JOIN ol ON o.w = ol.w AND o.id = ol.oid",
            "SELECT COUNT(*) FROM o JOIN ol ON o.id = ol.oid AND o.w = ol.w",
            "SELECT COUNT(*) FROM ol JOIN o ON ol.w = o.w AND ol.oid = o.id",
        ] {
            let before = compared(&mut c).await;
            let n: Option<i64> = c.query_first(sql).await.unwrap();
            let pairs = compared(&mut c).await - before;
            assert_eq!(n, Some(lines), "{sql}");
            // Each line meets its own order once (a key of `w` alone: 25.6
            // million pairs).
            assert!(pairs <= lines as u64, "{sql}: {pairs} row pairs compared");
            assert!(pairs >= lines as u64 / 2, "{sql}: {pairs} row pairs compared: not a hash join?");
        }
        // LEFT JOIN keeps the lines without an order; sums are right.
        let (n, s): (i64, i64) = c
            .query_first(
                "SELECT COUNT(*), SUM(ol.amt) FROM ol LEFT JOIN o ON ol.w = o.w AND ol.oid = o.id WHERE o.pk IS NULL",
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!((n, s), (2, 2));
        let per_order: Vec<(i64, i64)> = c
            .query(
                "SELECT o.id, SUM(ol.amt) FROM o JOIN ol ON o.w = ol.w AND o.id = ol.oid \
                 WHERE o.id IN (1, 2, 1600) GROUP BY o.id ORDER BY o.id",
            )
            .await
            .unwrap();
        let want = |id: i64| ((id - 1) * LINES_PER_ORDER..id * LINES_PER_ORDER).map(|i| i % 7).sum::<i64>();
        assert_eq!(per_order, vec![(1, want(1)), (2, want(2)), (1600, want(1600))]);
    });
}
