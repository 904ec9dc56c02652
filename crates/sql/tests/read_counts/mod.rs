//! Counting what a statement reads from the data node (issue 23's plan
//! tests): the `Norr_rows_read`, `Norr_full_scans`, `Norr_range_scans` and
//! `Norr_round_trips` status counters before and after it, and EXPLAIN's
//! access per table.

use mysql_async::prelude::*;
use mysql_async::Conn;

/// What statements read from the data node so far: rows received, full
/// scans and index range scans opened (a scan's pushed filter may leave few
/// rows to receive, so scans are counted apart).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Reads {
    pub rows: u64,
    pub full: u64,
    pub ranges: u64,
}

impl std::ops::Sub for Reads {
    type Output = Reads;
    fn sub(self, o: Reads) -> Reads {
        Reads { rows: self.rows - o.rows, full: self.full - o.full, ranges: self.ranges - o.ranges }
    }
}

/// Rows counted beyond a statement's own: once in a handful of runs a
/// one-key lookup counted 2 rows (cause not found yet; the counter is the
/// process's). The row bounds allow for it; scans are counted apart and
/// their bounds are exact, so a scan still fails the test.
pub const SLACK: u64 = 2;

pub async fn reads(c: &mut Conn) -> Reads {
    let rows: Vec<(String, String)> = c.query("SHOW GLOBAL STATUS LIKE 'Norr_%'").await.expect("SHOW STATUS");
    let get = |name: &str| -> u64 {
        rows.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no {name}")).1.parse().expect("a number")
    };
    Reads { rows: get("Norr_rows_read"), full: get("Norr_full_scans"), ranges: get("Norr_range_scans") }
}

/// Runs `sql` and returns its rows with the rows it read from the data node.
pub async fn counted<T: FromRow + Send + 'static>(c: &mut Conn, sql: &str) -> (Vec<T>, Reads) {
    let before = reads(c).await;
    let rows: Vec<T> = c.query(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    (rows, reads(c).await - before)
}

/// Runs a statement that returns no rows; its affected rows and what it read.
#[allow(dead_code)] // not every test binary that shares this module uses it
pub async fn counted_drop(c: &mut Conn, sql: &str) -> (u64, Reads) {
    let before = reads(c).await;
    c.query_drop(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    let affected = c.affected_rows();
    (affected, reads(c).await - before)
}

/// `Norr_round_trips`: requests the SQL node sent to data nodes so far.
#[allow(dead_code)] // not every test binary that shares this module uses it
pub async fn round_trips(c: &mut Conn) -> u64 {
    let rows: Vec<(String, String)> = c.query("SHOW GLOBAL STATUS LIKE 'Norr_round_trips'").await.expect("SHOW STATUS");
    rows.first().expect("Norr_round_trips").1.parse().expect("a number")
}

/// Runs `sql` and returns its rows with the round trips to data nodes it
/// cost. Reading the counter costs some itself (SHOW STATUS asks the data
/// node for its figures): measured just before, between two reads, and
/// taken off.
#[allow(dead_code)] // not every test binary that shares this module uses it
pub async fn counted_round_trips<T: FromRow + Send + 'static>(c: &mut Conn, sql: &str) -> (Vec<T>, u64) {
    let a = round_trips(c).await;
    let b = round_trips(c).await;
    let rows: Vec<T> = c.query(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    let after = round_trips(c).await;
    (rows, (after - b) - (b - a))
}

/// EXPLAIN's (table, type, key, rows) per table.
#[allow(dead_code)] // not every test binary that shares this module uses it
pub async fn explain(c: &mut Conn, sql: &str) -> Vec<(String, String, Option<String>, Option<i64>)> {
    let rows: Vec<mysql_async::Row> = c.query(format!("EXPLAIN {sql}")).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.into_iter()
        .map(|r| {
            let table: String = r.get("table").unwrap();
            let ty: String = r.get("type").unwrap();
            let key: Option<String> = r.get("key").unwrap();
            let n: Option<i64> = r.get("rows").unwrap();
            (table, ty, key, n)
        })
        .collect()
}
