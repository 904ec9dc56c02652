//! Issue 23 item 3: EXPLAIN's `rows` from statistics (`index_stats`) on a
//! table larger than the statistics' sample (4096 rows), where the row
//! count is exact (a count scan) and rows per key are estimated from the
//! sample: each estimate must lie within the bounds stated with it. (Tables
//! the sample reads whole, whose figures are exact, are in
//! `sqllogic/explain_rows.slt`.)

mod node_support;
#[allow(dead_code)] // only its EXPLAIN reader is used here
mod read_counts;

use mysql_async::prelude::*;
use mysql_async::Conn;
use read_counts::explain;

const ROWS: i64 = 6000;

/// The one EXPLAIN row of a single-table statement: (type, key, rows).
async fn plan1(c: &mut Conn, sql: &str) -> (String, Option<String>, i64) {
    let plan = explain(c, sql).await;
    assert_eq!(plan.len(), 1, "{sql}: {plan:?}");
    let (_, ty, key, rows) = plan.into_iter().next().unwrap();
    (ty, key, rows.unwrap_or_else(|| panic!("{sql}: no rows estimate")))
}

#[test]
fn explain_rows_come_from_sampled_statistics() {
    let (rt, node) = node_support::runtime_and_node(norr_knobs::Knobs::default());
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let port = node_support::sql_node(&addr).await;
        let mut c = node_support::connect(port, None).await;
        c.query_drop("CREATE DATABASE ee").await.unwrap();
        c.query_drop("USE ee").await.unwrap();
        // g: 50 values of 120 rows; t: 2000 values of 3 rows; u unique.
        c.query_drop(
            "CREATE TABLE big (id INT PRIMARY KEY, g INT, t INT, u INT, KEY ig (g), KEY it (t), UNIQUE KEY iu (u))",
        )
        .await
        .unwrap();
        let rows: Vec<String> = (1..=ROWS).map(|i| format!("({i}, {}, {}, {})", i % 50, i % 2000, ROWS - i)).collect();
        for chunk in rows.chunks(1000) {
            c.query_drop(format!("INSERT INTO big VALUES {}", chunk.join(","))).await.unwrap();
        }

        // The row count is exact: a full scan reads every row.
        assert_eq!(plan1(&mut c, "SELECT * FROM big").await, ("ALL".into(), None, ROWS));
        // Whole keys read one row each.
        assert_eq!(plan1(&mut c, "SELECT * FROM big WHERE id = 17").await.2, 1);
        assert_eq!(plan1(&mut c, "SELECT * FROM big WHERE u = 17").await.2, 1);
        // Every one of g's 50 values repeats in a 4096-row sample, so its
        // 120 rows per key are found exactly.
        let (ty, key, n) = plan1(&mut c, "SELECT * FROM big WHERE g = 7").await;
        assert_eq!((ty.as_str(), key.as_deref()), ("range", Some("ig")));
        assert!((110..=130).contains(&n), "g = 7: {n} rows, 120 expected");
        // t's 3 rows per key from a sample that sees most values once or
        // twice: the estimator scales the sample's distinct values up.
        let (_, key, n) = plan1(&mut c, "SELECT * FROM big WHERE t = 7").await;
        assert_eq!(key.as_deref(), Some("it"));
        assert!((2..=6).contains(&n), "t = 7: {n} rows, 3 expected");
        // An IN list on an index: rows per key for each value.
        let n = plan1(&mut c, "SELECT * FROM big WHERE g IN (1, 2, 3)").await.2;
        assert!((330..=390).contains(&n), "g IN (3 values): {n} rows, 360 expected");

        // A join: the inner side read by index per outer row.
        let plan = explain(&mut c, "SELECT * FROM big a JOIN big b ON b.g = a.t WHERE a.id = 5").await;
        assert_eq!(plan.len(), 2, "{plan:?}");
        assert_eq!((plan[0].1.as_str(), plan[0].3), ("const", Some(1)), "{plan:?}");
        assert_eq!((plan[1].1.as_str(), plan[1].2.as_deref()), ("ref", Some("ig")), "{plan:?}");
        assert!(plan[1].3.is_some_and(|n| (110..=130).contains(&n)), "{plan:?}");

        // This SQL node's deletes move the count; ANALYZE TABLE counts again.
        c.query_drop("DELETE FROM big WHERE id > 5700").await.unwrap();
        assert_eq!(plan1(&mut c, "SELECT * FROM big").await.2, 5700);
        c.query_drop("ANALYZE TABLE big").await.unwrap();
        assert_eq!(plan1(&mut c, "SELECT * FROM big").await.2, 5700);
        let n = plan1(&mut c, "SELECT * FROM big WHERE g = 7").await.2;
        assert!((105..=125).contains(&n), "g = 7 after the delete: {n} rows, 114 expected");
    });
}
