//! Issue 23: joins and correlated subqueries read their inner tables by key.
//! Each case counts the rows the SQL node received from the data node
//! (`Norr_rows_read`): reading a whole table would exceed the bounds, so a
//! plan that scans fails the test, as does a wrong result.
//!
//! - constants carried across equalities (`t.a = w.id AND w.id = 1`);
//! - correlated subqueries that look up by the outer row's values, in
//!   linear rather than quadratic rows read;
//! - index nested-loop joins through secondary indexes (EXPLAIN `ref` /
//!   `eq_ref`);
//! - the inner side of such a join read in batches of keys, one round trip
//!   per batch (`Norr_round_trips`).
//!
//! One test function: the counter is the process's.

mod node_support;
mod read_counts;

use mysql_async::prelude::*;
use mysql_async::Conn;
use read_counts::{counted, counted_round_trips, explain, reads, SLACK};

async fn insert(c: &mut Conn, table: &str, rows: Vec<String>) {
    for chunk in rows.chunks(1000) {
        c.query_drop(format!("INSERT INTO {table} VALUES {}", chunk.join(","))).await.unwrap();
    }
}

#[test]
fn joins_and_subqueries_follow_keys() {
    let (rt, node) = node_support::runtime_and_node(norr_knobs::Knobs::default());
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let port = node_support::sql_node(&addr).await;
        let mut c = node_support::connect(port, None).await;
        c.query_drop("CREATE DATABASE ij").await.unwrap();
        c.query_drop("USE ij").await.unwrap();
        constants_cross_equalities(&mut c).await;
        correlated_subquery_keys(&mut c).await;
        secondary_index_joins(&mut c).await;
        batched_key_join_round_trips(&mut c).await;
    });
}

/// Item 2: New-Order's `FROM customer, warehouse WHERE w_id = ? AND c_w_id =
/// w_id AND ...` reads the customer by key.
async fn constants_cross_equalities(c: &mut Conn) {
    c.query_drop("CREATE TABLE t (a INT, b INT, v INT, PRIMARY KEY (a, b))").await.unwrap();
    c.query_drop("CREATE TABLE w (id INT PRIMARY KEY, tax INT)").await.unwrap();
    let rows: Vec<String> =
        (1..=20).flat_map(|a| (1..=100).map(move |b| format!("({a}, {b}, {})", a * 1000 + b))).collect();
    insert(c, "t", rows).await;
    insert(c, "w", (1..=5).map(|i| format!("({i}, {})", i * 10)).collect()).await;
    let sql = "SELECT t.v, w.tax FROM t, w WHERE w.id = 1 AND t.a = w.id AND t.b = 5";
    let (got, read) = counted::<(i64, i64)>(c, sql).await;
    assert_eq!(got, vec![(1005, 10)]);
    assert!(read.rows <= 2 + SLACK && read.full + read.ranges == 0, "{sql}: {read:?} (a scan of t?)");
    let plan = explain(c, sql).await;
    let t = plan.iter().find(|p| p.0 == "t").unwrap();
    assert_eq!((t.1.as_str(), t.2.as_deref(), t.3), ("const", Some("PRIMARY"), Some(1)), "{plan:?}");
    // JOIN ... ON, the equality the other way round, a prepared statement.
    let sql = "SELECT t.v FROM w JOIN t ON w.id = t.a WHERE t.b = 7 AND 3 = w.id";
    let (got, read) = counted::<i64>(c, sql).await;
    assert_eq!(got, vec![3007]);
    assert!(read.rows <= 2 + SLACK && read.full + read.ranges == 0, "{sql}: {read:?}");
    let before = reads(c).await;
    let got: Vec<i64> = c.exec("SELECT t.v FROM t, w WHERE w.id = ? AND t.a = w.id AND t.b = ?", (4, 9)).await.unwrap();
    assert_eq!(got, vec![4009]);
    let read = reads(c).await - before;
    assert!(read.rows <= 2 + SLACK && read.full + read.ranges == 0, "prepared: {read:?}");
    // Within one table.
    let sql = "SELECT v FROM t WHERE a = b AND b = 3";
    let (got, read) = counted::<i64>(c, sql).await;
    assert_eq!(got, vec![3003]);
    assert!(read.rows <= 1 + SLACK && read.full + read.ranges == 0, "{sql}: {read:?}");
    // An outer join's ON does not carry a constant into WHERE: w 5 has no t
    // row with b = 200, and stays with NULLs.
    let sql = "SELECT w.id, t.v FROM w LEFT JOIN t ON t.a = w.id AND t.b = 200 WHERE w.id = 5";
    let (got, _) = counted::<(i64, Option<i64>)>(c, sql).await;
    assert_eq!(got, vec![(5, None)]);
    // A string equality is not carried (collations, trailing spaces): still right.
    c.query_drop("CREATE TABLE sv (s VARCHAR(10) PRIMARY KEY, n INT)").await.unwrap();
    c.query_drop("INSERT INTO sv VALUES ('a', 1), ('b', 2)").await.unwrap();
    let got: Vec<i64> = c.query("SELECT sv.n FROM sv, w WHERE sv.s = 'A' AND sv.n = w.id").await.unwrap();
    assert_eq!(got, vec![1]);
}

/// Item 3: a join inside a correlated subquery takes the outer row's values
/// as key prefixes (TPC-C's consistency check 12, issue 23's minimal case).
async fn correlated_subquery_keys(c: &mut Conn) {
    const CUSTOMERS: i64 = 40;
    const ORDERS: i64 = 400;
    c.query_drop("CREATE TABLE cu (w INT, d INT, id INT, PRIMARY KEY (w, d, id))").await.unwrap();
    c.query_drop("CREATE TABLE o (w INT, d INT, id INT, c INT, PRIMARY KEY (w, d, id), KEY o_c (w, d, c, id))")
        .await
        .unwrap();
    c.query_drop("CREATE TABLE ol (w INT, d INT, oid INT, n INT, amt INT, PRIMARY KEY (w, d, oid, n))").await.unwrap();
    insert(c, "cu", (1..=CUSTOMERS).map(|i| format!("(1, 1, {i})")).collect()).await;
    let cust_of = |o: i64| o % CUSTOMERS + 1;
    insert(c, "o", (1..=ORDERS).map(|o| format!("(1, 1, {o}, {})", cust_of(o))).collect()).await;
    let amt = |o: i64, n: i64| (o * 7 + n) % 13;
    let lines: Vec<String> =
        (1..=ORDERS).flat_map(|o| (1..=10).map(move |n| format!("(1, 1, {o}, {n}, {})", amt(o, n)))).collect();
    insert(c, "ol", lines).await;
    let want = |cu: i64| -> i64 {
        (1..=ORDERS).filter(|o| cust_of(*o) == cu).flat_map(|o| (1..=10).map(move |n| amt(o, n))).sum()
    };
    let sub = "(SELECT SUM(ol.amt) FROM o JOIN ol ON ol.w = o.w AND ol.d = o.d AND ol.oid = o.id \
               WHERE o.w = 1 AND o.d = cu.d AND o.c = cu.id)";
    // One customer: its 10 orders and their 100 lines (a scan: 4,400 rows).
    let sql = format!("SELECT cu.id, CAST({sub} AS SIGNED) FROM cu WHERE cu.w = 1 AND cu.d = 1 AND cu.id = 1");
    let (got, read) = counted::<(i64, i64)>(c, &sql).await;
    assert_eq!(got, vec![(1, want(1))]);
    // The customer by key, its orders by one range of o_c, their lines by
    // one range of ol's key per order.
    assert!(read.rows <= 1 + 10 + 100 + SLACK && read.full == 0 && read.ranges <= 1 + 10, "{sql}: {read:?}");
    // Every customer: linear in the data (quadratic: 40 * 4,400 rows).
    let sql = format!("SELECT cu.id, CAST({sub} AS SIGNED) FROM cu WHERE cu.w = 1 AND cu.d = 1 ORDER BY cu.id");
    let (got, read) = counted::<(i64, i64)>(c, &sql).await;
    assert_eq!(got, (1..=CUSTOMERS).map(|i| (i, want(i))).collect::<Vec<_>>());
    let linear = (CUSTOMERS + ORDERS + ORDERS * 10) as u64;
    assert!(read.rows <= linear + SLACK, "{sql}: {read:?}, more rows than the {linear} of all three tables");
    assert_eq!(read.full, 0, "{sql}: {read:?}");
    assert!(read.ranges <= (1 + CUSTOMERS + ORDERS) as u64, "{sql}: {read:?}");
    // EXISTS with an outer key, and an outer value that matches nothing.
    let sql =
        "SELECT COUNT(*) FROM cu WHERE EXISTS (SELECT 1 FROM o WHERE o.w = cu.w AND o.d = cu.d AND o.c = cu.id + 0)";
    let got: Vec<i64> = c.query(sql).await.unwrap();
    assert_eq!(got, vec![CUSTOMERS]);
    let sql = format!("SELECT COUNT({sub}) FROM cu WHERE cu.w = 1 AND cu.d = 1 AND cu.id > 1000");
    let got: Vec<i64> = c.query(&sql).await.unwrap();
    assert_eq!(got, vec![0]);
}

/// Item 4: `customers c JOIN orders o ON o.customer_id = c.id WHERE c.id = 5`
/// with an index on orders.customer_id reads the orders by index, for a
/// non-unique (`ref`) and a unique (`eq_ref`) secondary index.
async fn secondary_index_joins(c: &mut Conn) {
    c.query_drop("CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(20))").await.unwrap();
    c.query_drop("CREATE TABLE orders (id INT PRIMARY KEY, customer_id INT, amt INT, KEY cust (customer_id))")
        .await
        .unwrap();
    c.query_drop("CREATE TABLE profiles (id INT PRIMARY KEY, customer_id INT, UNIQUE KEY one (customer_id))")
        .await
        .unwrap();
    insert(c, "customers", (1..=50).map(|i| format!("({i}, 'c{i}')")).collect()).await;
    insert(c, "orders", (1..=2000).map(|i| format!("({i}, {}, {})", i % 50 + 1, i % 9)).collect()).await;
    insert(c, "profiles", (1..=50).map(|i| format!("({}, {i})", i + 100)).collect()).await;
    let want: Vec<i64> = (1..=2000).filter(|i| i % 50 + 1 == 5).collect();
    for sql in [
        "SELECT o.id FROM customers c JOIN orders o ON o.customer_id = c.id WHERE c.id = 5 ORDER BY o.id",
        "SELECT o.id FROM customers c JOIN orders o ON o.customer_id = c.id WHERE c.name = 'c5' ORDER BY o.id",
        "SELECT o.id FROM customers c LEFT JOIN orders o ON o.customer_id = c.id WHERE c.id = 5 ORDER BY o.id",
    ] {
        let (got, read) = counted::<i64>(c, sql).await;
        assert_eq!(got, want, "{sql}");
        // c.name is no key: customers is scanned (50 rows), orders is not.
        assert!(read.rows <= 50 + want.len() as u64 + SLACK, "{sql}: {read:?}");
        // At most customers is scanned (c.name is no key), never orders.
        assert!(read.full <= 1 && read.ranges <= 1, "{sql}: {read:?}");
        let plan = explain(c, sql).await;
        let o = plan.iter().find(|p| p.0 == "o").unwrap();
        assert_ne!(o.1, "ALL", "{sql}: {plan:?}");
        assert_eq!(o.2.as_deref(), Some("cust"), "{sql}: {plan:?}");
    }
    // The join key comes from the outer rows only (no constant to carry).
    let sql = "SELECT o.id FROM customers c JOIN orders o ON o.customer_id = c.id WHERE c.name = 'c5' ORDER BY o.id";
    let plan = explain(c, sql).await;
    assert_eq!(plan[1].0, "o");
    assert_eq!((plan[1].1.as_str(), plan[1].2.as_deref()), ("ref", Some("cust")), "{plan:?}");
    // A unique secondary index: eq_ref, one row per outer row.
    let sql = "SELECT c.id, p.id FROM customers c JOIN profiles p ON p.customer_id = c.id WHERE c.name IN ('c3', 'c4') ORDER BY c.id";
    let (got, read) = counted::<(i64, i64)>(c, sql).await;
    assert_eq!(got, vec![(3, 103), (4, 104)]);
    assert!(read.rows <= 50 + 2 + SLACK && read.full == 1 && read.ranges == 0, "{sql}: {read:?}");
    let plan = explain(c, sql).await;
    assert_eq!((plan[1].1.as_str(), plan[1].2.as_deref(), plan[1].3), ("eq_ref", Some("one"), Some(1)), "{plan:?}");
    // LEFT JOIN keeps a customer without orders; every order is found once
    // over all customers.
    c.query_drop("INSERT INTO customers VALUES (51, 'none')").await.unwrap();
    let got: Vec<(i64, Option<i64>)> = c
        .query("SELECT c.id, o.id FROM customers c LEFT JOIN orders o ON o.customer_id = c.id WHERE c.id = 51")
        .await
        .unwrap();
    assert_eq!(got, vec![(51, None)]);
    let got: Vec<(i64, i64)> =
        c.query("SELECT COUNT(*), SUM(o.amt) FROM customers c JOIN orders o ON o.customer_id = c.id").await.unwrap();
    assert_eq!(got, vec![(2000, (1..=2000).map(|i| i % 9).sum::<i64>())]);
}

/// Issue 23's target: a 3-table key join (customer -> orders -> order
/// lines, 10 rows per level, through secondary ordered indexes) costs at
/// most 2 round trips per outer batch: one multi-range scan per join level,
/// whatever the number of keys in the batch (before: one per key, 1 + 10 +
/// 100 here), beside the read of the outer table itself.
async fn batched_key_join_round_trips(c: &mut Conn) {
    c.query_drop("CREATE TABLE cst (id INT PRIMARY KEY, region INT)").await.unwrap();
    c.query_drop("CREATE TABLE ords (id INT PRIMARY KEY, cst_id INT, KEY by_cst (cst_id))").await.unwrap();
    c.query_drop("CREATE TABLE lns (id INT PRIMARY KEY, ord_id INT, amt INT, KEY by_ord (ord_id))").await.unwrap();
    insert(c, "cst", (1..=10).map(|i| format!("({i}, {})", i % 2)).collect()).await;
    insert(c, "ords", (1..=100).map(|o| format!("({o}, {})", (o - 1) / 10 + 1)).collect()).await;
    insert(c, "lns", (1..=1000).map(|l| format!("({l}, {}, {})", (l - 1) / 10 + 1, l % 7)).collect()).await;
    let amt = |cst: i64| -> i64 { (1..=1000).filter(|l| ((l - 1) / 10) / 10 + 1 == cst).map(|l| l % 7).sum() };
    let sql = "SELECT c.id, COUNT(*), CAST(SUM(l.amt) AS SIGNED) FROM cst c \
               JOIN ords o ON o.cst_id = c.id JOIN lns l ON l.ord_id = o.id GROUP BY c.id ORDER BY c.id";
    let plan = explain(c, sql).await;
    let access: Vec<(&str, &str, Option<&str>)> =
        plan.iter().map(|p| (p.0.as_str(), p.1.as_str(), p.2.as_deref())).collect();
    assert_eq!(access, [("c", "ALL", None), ("o", "ref", Some("by_cst")), ("l", "ref", Some("by_ord"))]);
    let want: Vec<(i64, i64, i64)> = (1..=10).map(|i| (i, 100, amt(i))).collect();
    // Once to warm the table cache (definitions come from the data node).
    let _: Vec<(i64, i64, i64)> = c.query(sql).await.unwrap();
    let (got, trips) = counted_round_trips::<(i64, i64, i64)>(c, sql).await;
    assert_eq!(got, want);
    // The customers (one batch), then one multi-range scan per join level.
    assert_eq!(trips, 1 + 2, "{sql}");
    let (_, read) = counted::<(i64, i64, i64)>(c, sql).await;
    assert!(read.rows <= 10 + 100 + 1000 + SLACK && read.full == 1, "{sql}: {read:?}");
    // One customer by key: its orders and their lines, a round trip each.
    let sql = "SELECT COUNT(*), CAST(SUM(l.amt) AS SIGNED) FROM cst c \
               JOIN ords o ON o.cst_id = c.id JOIN lns l ON l.ord_id = o.id WHERE c.id = 4";
    let (got, trips) = counted_round_trips::<(i64, i64)>(c, sql).await;
    assert_eq!(got, vec![(100, amt(4))]);
    assert_eq!(trips, 1 + 2, "{sql}");
    // A filter on the outer table and a LEFT JOIN: still by batches.
    c.query_drop("INSERT INTO cst VALUES (11, 1)").await.unwrap();
    let sql = "SELECT c.id, COUNT(l.id) FROM cst c LEFT JOIN ords o ON o.cst_id = c.id \
               LEFT JOIN lns l ON l.ord_id = o.id WHERE c.region = 1 GROUP BY c.id ORDER BY c.id";
    let (got, trips) = counted_round_trips::<(i64, i64)>(c, sql).await;
    let want: Vec<(i64, i64)> = [1, 3, 5, 7, 9].iter().map(|i| (*i, 100)).chain([(11, 0)]).collect();
    assert_eq!(got, want);
    assert_eq!(trips, 1 + 2, "{sql}");
}
