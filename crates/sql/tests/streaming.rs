//! Issue 22, case 7: results are streamed, not built whole. A SELECT over
//! one table sends its rows batch by batch as the client takes them: a
//! result far larger than the statement's memory limit goes through, a
//! client that does not read holds the SQL node to a few batches, and a
//! client that goes away frees them and ends the statement. Also (issue
//! 23): a client that disconnects during a statement that sends nothing
//! yet stops that statement.
//!
//! One test function: the memory counters are the process's, and no other
//! statement of this binary may run meanwhile.

mod node_support;
mod protocol_support;

use mysql_async::prelude::*;
use node_support::{error_of, sqld_like, PASSWORD};
use norr_sql::engine::{memory, EngineConfig};
use std::time::{Duration, Instant};

/// Rows of the test table and the bytes of each one's string: a result of
/// about 30 MB, batches of about 1 MB (the data node's 1,024 rows).
const ROWS: usize = 30_000;
const PAD: usize = 1000;
/// The statement memory limit: a result built whole could not pass it.
const STATEMENT_LIMIT: u64 = 4 << 20;

fn setup() -> (tokio::runtime::Runtime, norr_runtime::DataNodeHandle, u16) {
    let cfg = EngineConfig { max_statement_memory: STATEMENT_LIMIT, ..EngineConfig::default() };
    sqld_like(norr_knobs::Knobs::default(), cfg)
}

async fn connect(port: u16) -> mysql_async::Conn {
    node_support::connect(port, None).await
}

async fn status(c: &mut mysql_async::Conn, name: &str) -> u64 {
    let row: Option<(String, String)> =
        c.query_first(format!("SHOW GLOBAL STATUS LIKE '{name}'")).await.expect("SHOW STATUS");
    row.unwrap_or_else(|| panic!("no status variable {name}")).1.parse().expect("a number")
}

async fn connections(c: &mut mysql_async::Conn) -> i64 {
    c.query_first("SELECT COUNT(*) FROM information_schema.PROCESSLIST").await.expect("processlist").unwrap_or(0)
}

/// Waits until `cond` holds (the node acts on its own time); fails after
/// `limit`, which is far beyond what the action takes.
macro_rules! until {
    ($what:expr, $limit:expr, $cond:expr) => {{
        let start = Instant::now();
        while !$cond {
            assert!(start.elapsed() < $limit, "{}: not within {:?}", $what, $limit);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }};
}

#[test]
fn results_stream_in_bounded_memory_and_stop_when_the_client_goes() {
    let (rt, _node, port) = setup();
    rt.block_on(async move {
        let mut c = connect(port).await;
        c.query_drop("CREATE DATABASE st").await.unwrap();
        c.query_drop("USE st").await.unwrap();
        c.query_drop(format!("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR({PAD}))")).await.unwrap();
        for chunk in (0..ROWS).collect::<Vec<_>>().chunks(500) {
            let values: Vec<String> = chunk.iter().map(|i| format!("({i}, '{:0>w$}')", i, w = PAD)).collect();
            c.query_drop(format!("INSERT INTO t VALUES {}", values.join(","))).await.unwrap();
        }

        // The whole result, 30 MB under a 4 MiB statement limit: every row
        // (a full scan's order is the partitions'), text and binary protocol.
        let mut all: Vec<(i64, String)> = c.query("SELECT id, v FROM t").await.unwrap();
        all.sort();
        assert_eq!(all.len(), ROWS);
        for (i, (id, v)) in all.iter().enumerate() {
            assert_eq!(*id, i as i64);
            assert_eq!(*v, format!("{:0>w$}", i, w = PAD));
        }
        drop(all);
        let found: Option<i64> = c.query_first("SELECT FOUND_ROWS()").await.unwrap();
        assert_eq!(found, Some(ROWS as i64));
        let bin: Vec<(i64, String)> = c.exec("SELECT id, v FROM t WHERE id >= ?", (100,)).await.unwrap();
        assert_eq!(bin.len(), ROWS - 100);
        assert_eq!(bin.iter().map(|r| r.0).min(), Some(100));
        drop(bin);
        // LIMIT / OFFSET and filters on the stream.
        // A range of the primary key's ordered index comes in key order.
        let ids: Vec<i64> = c.query("SELECT id FROM t WHERE id BETWEEN 2000 AND 3000 LIMIT 3 OFFSET 5").await.unwrap();
        assert_eq!(ids, vec![2005, 2006, 2007]);
        let ids: Vec<i64> = c.query("SELECT id FROM t LIMIT 3 OFFSET 2500").await.unwrap();
        assert_eq!(ids.len(), 3);
        let mut ids: Vec<i64> = c.query("SELECT id FROM t WHERE id % 5000 = 0 AND v LIKE '0%'").await.unwrap();
        ids.sort();
        assert_eq!(ids, vec![0, 5000, 10000, 15000, 20000, 25000]);
        let ids: Vec<i64> = c.query("SELECT id FROM t WHERE id > 29997").await.unwrap();
        assert_eq!(ids, vec![29998, 29999]);
        let none: Vec<i64> = c.query("SELECT id FROM t WHERE id < 0").await.unwrap();
        assert!(none.is_empty());
        // A result that must be built whole (sorted) keeps its limit.
        assert_eq!(error_of(&mut c, "SELECT id, v FROM t ORDER BY v DESC").await, Some(1041));
        // An error after rows went out: the client gets it, the connection
        // goes on (the sum overflows from id 1 on).
        assert_eq!(error_of(&mut c, "SELECT id, 9223372036854775807 + id FROM t").await, Some(1690));
        let one: Option<i64> = c.query_first("SELECT 1").await.unwrap();
        assert_eq!(one, Some(1));
        assert_eq!(status(&mut c, "Norr_statement_memory_bytes").await, 0, "nothing held between statements");

        // A client that sends the query and then reads nothing: the node
        // writes until the socket is full, then holds a few batches.
        use protocol_support::{Raw, CAPS};
        let (mut slow, ok) = Raw::login(port, "root", PASSWORD, CAPS).await;
        assert_eq!(ok[0], 0, "logged in");
        slow.command(b"\x03SELECT id, v FROM st.t").await;
        until!("streaming starts", Duration::from_secs(60), memory::result_bytes_in_flight() > 0);
        // Each sample is what the node holds at that moment; all must stay
        // within four batches of about 1.1 MB while 30 MB are to be sent.
        let bound = 5 << 20;
        let mut most = 0;
        for _ in 0..100 {
            most = most.max(memory::process_used());
            assert!(most <= bound, "the SQL node holds {most} bytes of a result to a client that does not read");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(most > 0);
        let held = status(&mut c, "Norr_result_bytes_in_flight").await;
        assert!(held > 0 && held <= bound, "{held}");
        assert_eq!(connections(&mut c).await, 2, "the statement is still running");

        // The client goes away: the statement ends and its memory is freed.
        drop(slow);
        until!("the statement ends with its client", Duration::from_secs(30), connections(&mut c).await == 1);
        until!("the memory is freed", Duration::from_secs(30), memory::process_used() == 0);
        assert_eq!(memory::result_bytes_in_flight(), 0);

        // A client that reads slowly gets every row.
        let (mut reader, _) = Raw::login(port, "root", PASSWORD, CAPS).await;
        reader.command(b"\x03SELECT id FROM st.t").await;
        let mut rows = 0;
        let mut packets = 0usize;
        loop {
            let p = reader.read().await.expect("the result");
            packets += 1;
            if packets.is_multiple_of(2000) {
                tokio::task::yield_now().await;
            }
            // Column count, definition, EOF, rows, EOF (no DEPRECATE_EOF).
            if packets > 3 && p[0] == 0xfe && p.len() < 9 {
                break;
            }
            assert_ne!(p[0], 0xff, "an error: {:?}", protocol_support::err_of(&p));
            if packets > 3 {
                rows += 1;
            }
        }
        assert_eq!(rows, ROWS);
        drop(reader);

        // Issue 23: a statement that sends nothing for a long time (here a
        // SLEEP) stops when its client disconnects, not at its end.
        let (mut sleeper, _) = Raw::login(port, "root", PASSWORD, CAPS).await;
        sleeper.command(b"\x03SELECT SLEEP(100000)").await;
        let sleeping = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT SLEEP%'";
        until!("the SLEEP runs", Duration::from_secs(30), c.query_first::<i64, _>(sleeping).await.unwrap() == Some(1));
        drop(sleeper);
        until!("the statement ends with its client", Duration::from_secs(60), connections(&mut c).await == 1);
        let one: Option<i64> = c.query_first("SELECT 1").await.unwrap();
        assert_eq!(one, Some(1));
    });
}
