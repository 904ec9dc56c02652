//! Issue 23: statements whose keys are spelled in ways other than
//! `col = value` read their rows by key, not by scanning the table. Each
//! case counts the rows the SQL node received from the data node
//! (`Norr_rows_read`): a scan of `t` reads all of its `ROWS` rows, key
//! lookups only the rows they find, so a case that scans fails.
//!
//! One test function: the counter is the process's.

mod node_support;
mod read_counts;

use mysql_async::prelude::*;
use mysql_async::Conn;
use read_counts::{counted, counted_drop, explain, SLACK};

/// `t` holds A x B rows, (a, b) in 1..=A x 1..=B.
const A: i64 = 20;
const B: i64 = 100;
const ROWS: i64 = A * B;

async fn fill(c: &mut Conn, table: &str) {
    for a in 1..=A {
        let rows: Vec<String> = (1..=B).map(|b| format!("({a}, {b}, {})", a * 1000 + b)).collect();
        c.query_drop(format!("INSERT INTO {table} VALUES {}", rows.join(","))).await.unwrap();
    }
}

#[test]
fn keys_in_every_spelling_are_lookups() {
    let (rt, node) = node_support::runtime_and_node(norr_knobs::Knobs::default());
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let port = node_support::sql_node(&addr).await;
        let mut c = node_support::connect(port, None).await;
        c.query_drop("CREATE DATABASE lk").await.unwrap();
        c.query_drop("USE lk").await.unwrap();
        c.query_drop("CREATE TABLE t (a INT, b INT, v INT, PRIMARY KEY (a, b))").await.unwrap();
        c.query_drop("CREATE TABLE u (id INT PRIMARY KEY AUTO_INCREMENT, x INT, y INT, v INT, UNIQUE KEY xy (x, y))")
            .await
            .unwrap();
        fill(&mut c, "t").await;
        for a in 1..=A {
            let rows: Vec<String> = (1..=B).map(|b| format!("({a}, {b}, {})", a * 1000 + b)).collect();
            c.query_drop(format!("INSERT INTO u (x, y, v) VALUES {}", rows.join(","))).await.unwrap();
        }
        // The baseline: a scan reads every row (so the counter counts scans).
        let (n, read) = counted::<i64>(&mut c, "SELECT COUNT(*) FROM t WHERE v > 0").await;
        assert_eq!(n, vec![ROWS]);
        assert!(read.rows >= ROWS as u64 && read.full == 1, "a full scan: {read:?}");

        row_in_and_or_of_ands(&mut c).await;
        row_in_on_index_prefixes(&mut c).await;
    });
}

/// Item 1: `(a, b) IN ((1, 5), (1, 77))` and `(a = 1 AND b = 5) OR (a = 1
/// AND b = 77)` on the primary key (a, b) and on a unique index (x, y) are
/// batched key lookups for SELECT, SELECT ... FOR UPDATE, UPDATE and DELETE.
async fn row_in_and_or_of_ands(c: &mut Conn) {
    for (table, key, (ka, kb)) in [("t", "PRIMARY", ("a", "b")), ("u", "xy", ("x", "y"))] {
        let wheres = [
            format!("({ka}, {kb}) IN ((1, 5), (1, 77))"),
            format!("({ka} = 1 AND {kb} = 5) OR ({ka} = 1 AND {kb} = 77)"),
            // Mixed with a plain conjunct and an IN inside an alternative.
            format!("{ka} = 1 AND ({kb} = 5 OR {kb} IN (77, 1000))"),
            format!("({kb} = 5 AND {ka} = 1) OR ({ka}, {kb}) = (1, 77)"),
        ];
        for w in &wheres {
            let sql = format!("SELECT v FROM {table} WHERE {w} ORDER BY v");
            let (v, read) = counted::<i64>(c, &sql).await;
            assert_eq!(v, vec![1005, 1077], "{sql}");
            assert!(read.rows <= 2 + SLACK && read.full + read.ranges == 0, "{sql}: {read:?} (a scan?)");
            let plan = explain(c, &sql).await;
            assert_eq!(plan.len(), 1, "{sql}: {plan:?}");
            assert_eq!(plan[0].1, "range", "{sql}: {plan:?}");
            assert_eq!(plan[0].2.as_deref(), Some(key), "{sql}: {plan:?}");
            let keys = plan[0].3.expect("rows of a key lookup");
            assert!((2..=3).contains(&keys), "{sql}: {plan:?}");
        }
        // A disjunction that does not give every alternative a key scans
        // (and is still right).
        let sql = format!("SELECT v FROM {table} WHERE ({ka} = 1 AND {kb} = 5) OR v = 2077 ORDER BY v");
        let (v, read) = counted::<i64>(c, &sql).await;
        assert_eq!(v, vec![1005, 2077]);
        assert_eq!(read.full, 1, "{sql}: {read:?}");
        assert_eq!(explain(c, &sql).await[0].1, "ALL");
        // Alternatives that match nothing, or a NULL key part.
        let sql = format!("SELECT v FROM {table} WHERE ({ka}, {kb}) IN ((99, 1), (1, NULL), (2, 3)) ORDER BY v");
        let (v, read) = counted::<i64>(c, &sql).await;
        assert_eq!(v, vec![2003], "{sql}");
        assert!(read.rows <= 1 + SLACK && read.full + read.ranges == 0, "{sql}: {read:?}");

        // Locking read, UPDATE and DELETE in one transaction.
        c.query_drop("BEGIN").await.unwrap();
        let sql = format!("SELECT v FROM {table} WHERE ({ka}, {kb}) IN ((3, 7), (3, 8), (4, 9)) FOR UPDATE");
        let (mut v, read) = counted::<i64>(c, &sql).await;
        v.sort();
        assert_eq!(v, vec![3007, 3008, 4009]);
        assert!(read.rows <= 3 + SLACK && read.full + read.ranges == 0, "{sql}: {read:?}");
        let sql = format!("UPDATE {table} SET v = v + 1 WHERE ({ka} = 3 AND {kb} = 7) OR ({ka} = 4 AND {kb} = 9)");
        let (affected, read) = counted_drop(c, &sql).await;
        assert_eq!(affected, 2, "{sql}");
        assert!(read.rows <= 2 + SLACK && read.full + read.ranges == 0, "{sql}: {read:?}");
        let sql = format!("DELETE FROM {table} WHERE ({ka}, {kb}) IN ((3, 8), (4, 9), (5, 5000))");
        let (affected, read) = counted_drop(c, &sql).await;
        assert_eq!(affected, 2, "{sql}");
        // At most a read per key; no scan.
        assert!(read.rows <= 3 + SLACK && read.full + read.ranges == 0, "{sql}: {read:?}");
        c.query_drop("COMMIT").await.unwrap();
        let sql = format!("SELECT {ka}, {kb}, v FROM {table} WHERE {ka} IN (3, 4) AND {kb} IN (7, 8, 9) ORDER BY 1, 2");
        let rows: Vec<(i64, i64, i64)> = c.query(&sql).await.unwrap();
        assert_eq!(rows, vec![(3, 7, 3008), (3, 9, 3009), (4, 7, 4007), (4, 8, 4008)], "{table}");
        let plan = explain(c, &format!("DELETE FROM {table} WHERE ({ka}, {kb}) IN ((3, 8), (4, 9))")).await;
        assert_eq!((plan[0].1.as_str(), plan[0].3), ("range", Some(2)), "{plan:?}");
    }
}

/// Item 1 on ordered indexes: a row IN list on a prefix of the primary key
/// (TPC-C's Delivery: `(ol_w_id, ol_d_id, ol_o_id) IN (...)` on order_line,
/// whose key is (w, d, o, number)) and on a non-unique index reads one
/// index range per key.
async fn row_in_on_index_prefixes(c: &mut Conn) {
    c.query_drop("CREATE TABLE ol (w INT, d INT, o INT, n INT, amt INT, PRIMARY KEY (w, d, o, n))").await.unwrap();
    for d in 1..=10 {
        let rows: Vec<String> =
            (1..=20).flat_map(|o| (1..=10).map(move |n| format!("(1, {d}, {o}, {n}, {})", o * 10 + n))).collect();
        c.query_drop(format!("INSERT INTO ol VALUES {}", rows.join(","))).await.unwrap();
    }
    let sql = "SELECT COUNT(*), SUM(amt) FROM ol WHERE (w, d, o) IN ((1, 1, 5), (1, 2, 7), (1, 2, 99))";
    let (got, read) = counted::<(i64, i64)>(c, sql).await;
    assert_eq!(got, vec![(20, (51..=60).sum::<i64>() + (71..=80).sum::<i64>())]);
    // Two ranges (the third key's is empty), no scan of the 2000 rows.
    assert!(read.rows <= 20 + SLACK && read.full == 0 && read.ranges == 3, "{sql}: {read:?}");
    let plan = explain(c, sql).await;
    assert_eq!((plan[0].1.as_str(), plan[0].2.as_deref()), ("range", Some("PRIMARY")), "{plan:?}");
    let sql = "UPDATE ol SET amt = 0 WHERE w = 1 AND (d, o) IN ((3, 3), (4, 4))";
    let (affected, read) = counted_drop(c, sql).await;
    assert_eq!(affected, 20);
    assert!(read.rows <= 20 + SLACK && read.full == 0 && read.ranges == 2, "{sql}: {read:?}");
    let zeroed: Vec<(i64, i64)> =
        c.query("SELECT d, o FROM ol WHERE amt = 0 GROUP BY d, o ORDER BY d, o").await.unwrap();
    assert_eq!(zeroed, vec![(3, 3), (4, 4)]);

    c.query_drop("CREATE TABLE s (id INT PRIMARY KEY, a INT, b INT, KEY ab (a, b))").await.unwrap();
    let rows: Vec<String> = (1..=2000).map(|i| format!("({i}, {}, {})", i % 20, i % 100)).collect();
    c.query_drop(format!("INSERT INTO s VALUES {}", rows.join(","))).await.unwrap();
    for sql in [
        "SELECT id FROM s WHERE (a, b) IN ((1, 1), (2, 2)) ORDER BY id",
        "SELECT id FROM s WHERE (a = 1 AND b = 1) OR (b = 2 AND a = 2) ORDER BY id",
    ] {
        let (ids, read) = counted::<i64>(c, sql).await;
        let want: Vec<i64> = (1..=2000).filter(|i| i % 100 == 1 || i % 100 == 2).collect();
        assert_eq!(ids, want, "{sql}");
        assert!(read.rows <= 40 + SLACK && read.full == 0 && read.ranges == 2, "{sql}: {read:?}");
        let plan = explain(c, sql).await;
        assert_eq!((plan[0].1.as_str(), plan[0].2.as_deref()), ("range", Some("ab")), "{plan:?}");
    }
}
