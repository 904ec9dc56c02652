//! Issue 22 (robustness), the SQL node's side: inputs that used to take the
//! process down or grow it without bound. Each probe runs against a real SQL
//! node (engine + MySQL protocol on the session threads `norr sqld` uses)
//! over an in-process data node, and after each one the node must still
//! answer `SELECT 1`, on the probing connection and on a fresh one.

mod node_support;
mod protocol_support;

use mysql_async::prelude::*;
use norr_sql::engine::EngineConfig;

use node_support::{error_of, sqld_like, PASSWORD};

fn setup() -> (tokio::runtime::Runtime, norr_runtime::DataNodeHandle, u16) {
    sqld_like(norr_knobs::Knobs::default(), EngineConfig::default())
}

async fn connect(port: u16) -> mysql_async::Conn {
    node_support::connect(port, None).await
}

/// The node answers `SELECT 1` on `c` and on a new connection.
async fn still_answers(port: u16, c: &mut mysql_async::Conn, after: &str) {
    let one: Option<i64> = c.query_first("SELECT 1").await.unwrap_or_else(|e| panic!("after {after}: {e}"));
    assert_eq!(one, Some(1), "after {after}");
    let mut fresh = connect(port).await;
    let one: Option<i64> = fresh.query_first("SELECT 1").await.unwrap_or_else(|e| panic!("after {after}: {e}"));
    assert_eq!(one, Some(1), "after {after}");
    fresh.disconnect().await.ok();
}

fn chain(first: &str, op: &str, term: &str, n: usize) -> String {
    let mut s = String::with_capacity(n * (op.len() + term.len() + 2));
    s.push_str(first);
    for _ in 1..n {
        s.push(' ');
        s.push_str(op);
        s.push(' ');
        s.push_str(term);
    }
    s
}

/// Terms of the long chains of case 1.
const CHAIN_TERMS: usize = 100_000;

/// Case 1: chains of 100,000 terms of every binary operator, and 10,000
/// levels of every nesting construct. The server answers each with a
/// result or an error, and goes on answering. (Three tests, so that they
/// run side by side: each statement is 100,000 terms to tokenize.)
#[test]
fn long_operator_chains_never_take_the_node_down() {
    let (rt, _node, port) = setup();
    rt.block_on(async move {
        let mut c = connect(port).await;

        // The shapes of the report work: 498 terms of `+`, and an OR chain.
        let sum: Option<i64> = c.query_first(format!("SELECT {}", chain("1", "+", "1", 498))).await.unwrap();
        assert_eq!(sum, Some(498));
        let or: Option<i64> =
            c.query_first(format!("SELECT 1 FROM DUAL WHERE {}", chain("1=0", "OR", "1=1", 498))).await.unwrap();
        assert_eq!(or, Some(1));
        // Long AND / OR / XOR chains run whatever their length (balanced).
        let n = CHAIN_TERMS;
        let or: Option<i64> = c.query_first(format!("SELECT {}", chain("0", "OR", "0", n) + " OR 1")).await.unwrap();
        assert_eq!(or, Some(1));
        let and: Option<i64> = c.query_first(format!("SELECT {}", chain("1", "AND", "1", n))).await.unwrap();
        assert_eq!(and, Some(1));
        let xor: Option<i64> = c.query_first(format!("SELECT {}", chain("1", "XOR", "1", n))).await.unwrap();
        assert_eq!(xor, Some(0), "an even number of ones");
        // An arithmetic chain within the limit keeps its exact left-to-right
        // meaning: the overflow of the first two terms is reported.
        let sql = format!("SELECT 9223372036854775807 + 1 - {}", chain("1", "-", "1", 300));
        assert_eq!(error_of(&mut c, &sql).await, Some(1690));
        // Past the depth limit: 1436, and the statement's connection goes on.
        assert_eq!(error_of(&mut c, &format!("SELECT {}", chain("1", "+", "1", n))).await, Some(1436));

        // Every binary operator, 100,000 terms: a result or an error.
        let ops = [
            "+",
            "-",
            "*",
            "/",
            "DIV",
            "MOD",
            "%",
            "AND",
            "OR",
            "XOR",
            "&&",
            "||",
            "=",
            "<>",
            "!=",
            "<",
            "<=",
            ">",
            ">=",
            "<=>",
            "&",
            "|",
            "^",
            "<<",
            ">>",
            "LIKE",
            "REGEXP",
            "NOT LIKE",
            "SOUNDS LIKE",
        ];
        for op in ops {
            let sql = format!("SELECT {}", chain("1", op, "1", n));
            // A result or any MySQL error (some operators refuse their
            // operands); what matters is that the node goes on.
            error_of(&mut c, &sql).await;
            still_answers(port, &mut c, op).await;
        }
    });
}

/// Case 1, continued: postfix and other left-deep shapes, prepared
/// statements and views.
#[test]
fn long_left_deep_shapes_never_take_the_node_down() {
    let (rt, _node, port) = setup();
    rt.block_on(async move {
        let mut c = connect(port).await;
        let n = CHAIN_TERMS;
        // Postfix and other left-deep shapes.
        for (what, sql) in [
            ("IS NULL", format!("SELECT 1{}", " IS NULL".repeat(n))),
            ("COLLATE", format!("SELECT 'a'{}", " COLLATE utf8mb4_bin".repeat(n))),
            ("UNION", chain("SELECT 1", "UNION", "SELECT 1", n)),
            ("UNION ALL", chain("SELECT 1", "UNION ALL", "SELECT 1", n)),
            ("WHERE OR", format!("SELECT * FROM information_schema.SCHEMATA WHERE {}", chain("1=0", "OR", "1=0", n))),
            ("syntax error at the end", format!("SELECT {} +", chain("1", "+", "1", n))),
            ("IN list", format!("SELECT 1 IN ({})", vec!["2"; n].join(","))),
        ] {
            error_of(&mut c, &sql).await;
            still_answers(port, &mut c, what).await;
        }
        // A prepared statement goes through the same parser.
        let r = c.prep(format!("SELECT {}", chain("?", "+", "1", n))).await;
        assert!(matches!(r, Err(mysql_async::Error::Server(ref e)) if e.code == 1436), "{r:?}");
        still_answers(port, &mut c, "prepare").await;

        // A view's query is parsed with the same bounds.
        c.query_drop("CREATE DATABASE deep").await.unwrap();
        let r = error_of(&mut c, &format!("CREATE VIEW deep.v AS SELECT {}", chain("1", "+", "1", n))).await;
        assert_eq!(r, Some(1436));
        still_answers(port, &mut c, "CREATE VIEW").await;
    });
}

/// Case 1, continued: 10,000 levels of every nesting construct.
#[test]
fn deep_nesting_never_takes_the_node_down() {
    let (rt, _node, port) = setup();
    rt.block_on(async move {
        let mut c = connect(port).await;
        // 10,000 levels of every nesting construct.
        let d = 10_000;
        for (what, open, close) in [
            ("parentheses", "(", ")"),
            ("function calls", "ABS(", ")"),
            ("IF", "IF(1, ", ", 0)"),
            ("CASE", "CASE WHEN 1 THEN ", " END"),
            ("subqueries", "(SELECT ", ")"),
            ("unary minus", "- ", ""),
            ("NOT", "NOT ", ""),
            ("!", "!", ""),
            ("~", "~", ""),
            ("CAST", "CAST(", " AS SIGNED)"),
            ("COALESCE", "COALESCE(NULL, ", ")"),
            ("EXISTS", "EXISTS (SELECT ", ")"),
            ("JSON_ARRAY", "JSON_ARRAY(", ")"),
        ] {
            let sql = format!("SELECT {}1{}", open.repeat(d), close.repeat(d));
            let r = error_of(&mut c, &sql).await;
            assert!(matches!(r, None | Some(1436) | Some(1064)), "{what}: {r:?}");
            still_answers(port, &mut c, what).await;
        }
    });
}

/// Case 1's memory side: parsing costs up to 400 bytes per token, so a
/// 4 MiB statement of `1 + 1 + ...` (which max_allowed_packet lets
/// through) took the process 1.1 GB before it was refused, and a 64 MiB one
/// would have taken some 25 GB. Now a text whose parse would take more than
/// 512 MiB is refused with 1041 before it is tokenized; the node goes on.
#[test]
fn statements_too_costly_to_parse_are_refused_before_parsing() {
    let (rt, _node, port) = setup();
    rt.block_on(async move {
        let mut c = connect(port).await;
        for sql in [
            format!("SELECT {}", chain("1", "+", "1", 1 << 20)),
            format!("INSERT INTO t VALUES (1,'a'){}", ",(1,'a')".repeat(400_000)),
        ] {
            let e = c.query_drop(&sql).await.unwrap_err();
            let mysql_async::Error::Server(e) = e else { panic!("{e:?}") };
            assert_eq!(e.code, 1041, "{}", e.message);
            assert!(e.message.contains("to parse"), "{}", e.message);
            still_answers(port, &mut c, "a text too costly to parse").await;
        }
        // A long literal is few tokens: parsed whatever its size.
        let n: Option<i64> = c.query_first(format!("SELECT LENGTH('{}')", "x".repeat(16 << 20))).await.unwrap();
        assert_eq!(n, Some(16 << 20));
    });
}

/// Case 2: functions that build strings stop at max_allowed_packet: NULL
/// and warning 1301, as MySQL, decided before anything that large is
/// built (LPAD to a terabyte used to grow the process by gigabytes and
/// freeze every session). The limit is the global value a connection
/// started with.
#[test]
fn built_strings_past_max_allowed_packet_are_null_with_warning_1301() {
    let (rt, _node, port) = setup();
    rt.block_on(async move {
        let mut c = connect(port).await;
        async fn null_with_1301(c: &mut mysql_async::Conn, sql: &str) {
            let v: Option<Option<i64>> = c.query_first(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
            assert_eq!(v, Some(None), "{sql}");
            let w: Vec<(String, i64, String)> = c.query("SHOW WARNINGS").await.unwrap();
            assert_eq!(w.len(), 1, "{sql}: {w:?}");
            assert_eq!(w[0].1, 1301, "{sql}: {w:?}");
            assert!(w[0].2.contains("max_allowed_packet"), "{sql}: {w:?}");
        }
        for sql in [
            "SELECT LENGTH(LPAD('x', 1000000000000, 'y'))",
            "SELECT LENGTH(REPEAT(REPEAT('x', 1048576), 1000))",
            "SELECT LENGTH(RPAD('', 9223372036854775807, 'ab'))",
            "SELECT LENGTH(SPACE(100000000))",
        ] {
            null_with_1301(&mut c, sql).await;
            still_answers(port, &mut c, sql).await;
        }
        // A lower global limit applies to the connections that start after.
        c.query_drop("SET GLOBAL max_allowed_packet = 1048576").await.unwrap();
        let mut small = connect(port).await;
        null_with_1301(&mut small, "SELECT LENGTH(REPEAT('ab', 600000))").await;
        null_with_1301(&mut small, "SELECT LENGTH(CONCAT(REPEAT('a', 600000), REPEAT('b', 600000)))").await;
        let n: Option<i64> = small.query_first("SELECT LENGTH(REPEAT('ab', 500000))").await.unwrap();
        assert_eq!(n, Some(1_000_000), "within the limit");
        c.query_drop("SET GLOBAL max_allowed_packet = 67108864").await.unwrap();
        still_answers(port, &mut c, "max_allowed_packet").await;
    });
}

/// Case 3: `SELECT *` without a table is error 1096, as MySQL, never a
/// result set of no columns (which made clients lose packet sync).
#[test]
fn select_star_without_tables_is_error_1096() {
    let (rt, _node, port) = setup();
    rt.block_on(async move {
        let mut c = connect(port).await;
        for sql in ["SELECT *", "SELECT * FROM DUAL", "SELECT * FROM DUAL WHERE 1 = 1"] {
            assert_eq!(error_of(&mut c, sql).await, Some(1096), "{sql}");
            still_answers(port, &mut c, sql).await;
        }
        // Prepared too.
        let r = c.prep("SELECT *").await;
        assert!(matches!(r, Err(mysql_async::Error::Server(ref e)) if e.code == 1096), "{r:?}");
        // A qualified star names a table that is not there (1051, as MySQL).
        assert_eq!(error_of(&mut c, "SELECT t.*").await, Some(1051));
        still_answers(port, &mut c, "SELECT t.*").await;
    });
}

/// Case 4: a connection that sends a packet header and then nothing is
/// closed after net_read_timeout; an idle one after wait_timeout, with
/// error 4031 as MySQL 8.0.24+. (The buffer is not reserved from the
/// header: `protocol::packet`'s unit test.)
#[test]
fn stalled_and_idle_connections_are_closed() {
    use protocol_support::{Raw, CAPS};
    let (rt, _node, port) = setup();
    rt.block_on(async move {
        let mut admin = connect(port).await;
        admin.query_drop("SET GLOBAL net_read_timeout = 1").await.unwrap();
        let (mut raw, ok) = Raw::login(port, "root", PASSWORD, CAPS).await;
        assert_eq!(ok[0], 0, "logged in");
        // A header announcing 16 MiB - 1, then silence.
        use tokio::io::AsyncWriteExt;
        raw.s.write_all(&[0xff, 0xff, 0xff, 0]).await.unwrap();
        let started = std::time::Instant::now();
        let got = tokio::time::timeout(std::time::Duration::from_secs(20), raw.read()).await.expect("closed in time");
        if let Some(p) = got {
            assert_eq!(protocol_support::err_of(&p).0, 1159);
            assert!(raw.read().await.is_none(), "closed after the error");
        }
        assert!(started.elapsed() >= std::time::Duration::from_millis(900), "not before net_read_timeout");
        admin.query_drop("SET GLOBAL net_read_timeout = 30").await.unwrap();
        still_answers(port, &mut admin, "a stalled packet").await;

        admin.query_drop("SET GLOBAL wait_timeout = 1").await.unwrap();
        let (mut idle, _) = Raw::login(port, "root", PASSWORD, CAPS).await;
        let p = tokio::time::timeout(std::time::Duration::from_secs(20), idle.read())
            .await
            .expect("closed in time")
            .expect("an error packet before the close");
        assert_eq!(protocol_support::err_of(&p).0, 4031);
        assert!(idle.read().await.is_none());
        admin.query_drop("SET GLOBAL wait_timeout = 28800").await.unwrap();
        still_answers(port, &mut admin, "an idle connection").await;
    });
}

/// Case 4, the writing side: a client that sends a query and never reads
/// the result holds its statement at most net_write_timeout; then its
/// connection is closed and the statement ends. A client that reads gets
/// the same result whole under the same timeout.
#[test]
fn a_client_that_does_not_read_is_dropped_after_net_write_timeout() {
    use protocol_support::{Raw, CAPS};
    let (rt, _node, port) = setup();
    rt.block_on(async move {
        let mut admin = connect(port).await;
        admin.query_drop("CREATE DATABASE wr").await.unwrap();
        admin.query_drop("CREATE TABLE wr.t (id INT PRIMARY KEY)").await.unwrap();
        let values: Vec<String> = (0..2000).map(|i| format!("({i})")).collect();
        admin.query_drop(format!("INSERT INTO wr.t VALUES {}", values.join(","))).await.unwrap();
        admin.query_drop("SET GLOBAL net_write_timeout = 1").await.unwrap();
        // 20 MB of result: far more than the sockets' buffers take.
        let query = "SELECT id, REPEAT('x', 10000) FROM wr.t";
        let (mut raw, ok) = Raw::login(port, "root", PASSWORD, CAPS).await;
        assert_eq!(ok[0], 0, "logged in");
        raw.command(format!("\x03{query}").as_bytes()).await;
        let connections = "SELECT COUNT(*) FROM information_schema.PROCESSLIST";
        let started = std::time::Instant::now();
        loop {
            let n: Option<i64> = admin.query_first(connections).await.unwrap();
            if n == Some(1) {
                break;
            }
            assert!(started.elapsed() < std::time::Duration::from_secs(60), "the connection that does not read stays");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        drop(raw);
        let mut reader = connect(port).await;
        let rows: Vec<(i64, String)> = reader.query(query).await.unwrap();
        assert_eq!(rows.len(), 2000);
        assert!(rows.iter().all(|r| r.1.len() == 10_000));
        admin.query_drop("SET GLOBAL net_write_timeout = 60").await.unwrap();
        still_answers(port, &mut admin, "a client that does not read").await;
    });
}

/// Database `db`, made the connection's current one, with table `t` filled
/// by `fill`.
async fn fill_db(c: &mut mysql_async::Conn, db: &str, rows: usize, pad: usize) {
    c.query_drop(format!("CREATE DATABASE {db}")).await.unwrap();
    c.query_drop(format!("USE {db}")).await.unwrap();
    fill(c, "t", rows, pad).await;
}

async fn fill(c: &mut mysql_async::Conn, table: &str, rows: usize, pad: usize) {
    c.query_drop(format!("CREATE TABLE {table} (id INT PRIMARY KEY, v VARCHAR(2000))")).await.unwrap();
    let pad = "p".repeat(pad);
    for chunk in (0..rows).collect::<Vec<_>>().chunks(500) {
        let values: Vec<String> = chunk.iter().map(|i| format!("({i}, '{pad}')")).collect();
        c.query_drop(format!("INSERT INTO {table} VALUES {}", values.join(","))).await.unwrap();
    }
}

/// Case 7: a statement that would hold more rows than its memory limit
/// fails with 1041 instead of growing the node; the connection and the
/// node go on, and smaller statements run. (Results that stream hold a few
/// batches whatever their size: tests/streaming.rs.)
#[test]
fn a_statement_past_its_memory_limit_fails_with_1041() {
    let cfg = EngineConfig { max_statement_memory: 1 << 20, ..EngineConfig::default() };
    let (rt, _node, port) = sqld_like(norr_knobs::Knobs::default(), cfg);
    rt.block_on(async move {
        let mut c = connect(port).await;
        fill_db(&mut c, "mem", 3000, 1000).await;
        assert_eq!(error_of(&mut c, "SELECT DISTINCT v FROM t").await, Some(1041));
        assert_eq!(error_of(&mut c, "SELECT v FROM t ORDER BY v").await, Some(1041));
        still_answers(port, &mut c, "1041").await;
        let few: Vec<(i64, String)> = c.query("SELECT id, v FROM t WHERE id < 10").await.unwrap();
        assert_eq!(few.len(), 10);
    });
}

/// Case 7, continued: a correlated subquery's runs give their charge back.
/// Each run below reads the whole table (2,000 rows of 1,000 bytes, ~2 MB)
/// and keeps one number; 100 outer rows read ~200 MB in all, far past an
/// 8 MiB statement limit, while the statement never holds more than one
/// run's rows. The charge used to add up over the runs, so this failed
/// with 1041 (TPC-C's consistency check 3.3.2.10 reads 30,000 history rows
/// per customer and failed after ~400 customers). What one run or the
/// outer query holds at once still counts: a join of 20 MB fails.
#[test]
fn correlated_subquery_runs_give_back_what_they_read() {
    let cfg = EngineConfig { max_statement_memory: 8 << 20, ..EngineConfig::default() };
    let (rt, _node, port) = sqld_like(norr_knobs::Knobs::default(), cfg);
    rt.block_on(async move {
        let mut c = connect(port).await;
        fill_db(&mut c, "corr", 2000, 1000).await;
        let q = "SELECT COUNT(*), SUM(s) FROM (SELECT o.id, \
                 (SELECT SUM(LENGTH(i.v)) FROM t i WHERE i.id <> o.id) AS s FROM t o WHERE o.id < 100) x";
        let r: Option<(i64, i64)> = c.query_first(q).await.unwrap();
        assert_eq!(r, Some((100, 100 * 1999 * 1000)));
        let q =
            "SELECT COUNT(*) FROM t o WHERE o.id < 100 AND (SELECT MAX(LENGTH(i.v)) FROM t i WHERE i.id > o.id) = 1000";
        let n: Option<i64> = c.query_first(q).await.unwrap();
        assert_eq!(n, Some(100));
        assert_eq!(
            error_of(&mut c, "SELECT a.v, b.id FROM t a, t b WHERE a.id < 10 ORDER BY a.v, b.id").await,
            Some(1041)
        );
        still_answers(port, &mut c, "correlated runs").await;
    });
}

/// Case 7, continued: rows a statement builds rather than scans count too.
/// A cross join of a 100-row table with itself three times (a million rows,
/// about 500 MB) and a sorted select list of 1 MB per row were built whole
/// past the limit (only scanned rows were counted); a streamed result of
/// 1 MB rows was charged a whole scan batch at once (1041) and now goes out
/// in batches of a few MB.
#[test]
fn built_rows_count_against_the_statement_memory_limit() {
    let cfg = EngineConfig { max_statement_memory: 32 << 20, ..EngineConfig::default() };
    let (rt, _node, port) = sqld_like(norr_knobs::Knobs::default(), cfg);
    rt.block_on(async move {
        let mut c = connect(port).await;
        fill_db(&mut c, "built", 100, 100).await;
        assert_eq!(error_of(&mut c, "SELECT a.v, b.v, c.v FROM t a, t b, t c").await, Some(1041));
        assert_eq!(error_of(&mut c, "SELECT id, REPEAT(v, 10000) FROM t ORDER BY v, id").await, Some(1041));
        still_answers(port, &mut c, "built rows").await;
        // Within the limit they run.
        let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM t a, t b").await.unwrap();
        assert_eq!(n, Some(10_000));
        let rows: Vec<(i64, String)> = c.query("SELECT id, REPEAT(v, 1000) FROM t ORDER BY v, id").await.unwrap();
        assert_eq!(rows.len(), 100);
        // Streamed: 100 MB of rows of 1 MB each, within a limit of 32 MiB.
        let rows: Vec<(i64, String)> = c.query("SELECT id, REPEAT(v, 10000) FROM t").await.unwrap();
        assert_eq!(rows.len(), 100);
        assert!(rows.iter().all(|r| r.1.len() == 1_000_000));
    });
}

/// Case 7, continued: what grouping and DISTINCT build beside the rows
/// counts too. Each statement below reads 100 rows of 100 bytes but held
/// about 100 MB, uncounted (only rows were): group keys of 1 MB, a
/// COUNT(DISTINCT ...) set of 1 MB values, GROUP_CONCAT ... ORDER BY pieces
/// (all kept until sorted, whatever group_concat_max_len), and a UNION
/// DISTINCT recursive CTE's set of rows seen. Now each fails with 1041 under
/// a 32 MiB statement limit, and their small versions run.
#[test]
fn grouping_state_counts_against_the_statement_memory_limit() {
    let cfg = EngineConfig { max_statement_memory: 32 << 20, ..EngineConfig::default() };
    let (rt, _node, port) = sqld_like(norr_knobs::Knobs::default(), cfg);
    rt.block_on(async move {
        let mut c = connect(port).await;
        fill_db(&mut c, "grp", 100, 100).await;
        let big = [
            "SELECT COUNT(*) FROM t GROUP BY CONCAT(id, REPEAT(v, 10000))",
            "SELECT COUNT(DISTINCT CONCAT(id, REPEAT(v, 10000))) FROM t",
            "SELECT LENGTH(GROUP_CONCAT(REPEAT(v, 10000) ORDER BY id)) FROM t",
            "SELECT id, COUNT(DISTINCT CONCAT(id, REPEAT(v, 10000))) FROM t GROUP BY id WITH ROLLUP",
        ];
        for q in big {
            assert_eq!(error_of(&mut c, q).await, Some(1041), "{q}");
        }
        still_answers(port, &mut c, "grouping state").await;
        let n: Vec<i64> = c.query("SELECT COUNT(*) FROM t GROUP BY CONCAT(id, REPEAT(v, 100))").await.unwrap();
        assert_eq!(n.len(), 100);
        let d: Option<i64> = c.query_first("SELECT COUNT(DISTINCT CONCAT(id, REPEAT(v, 100))) FROM t").await.unwrap();
        assert_eq!(d, Some(100));
        let l: Option<i64> =
            c.query_first("SELECT LENGTH(GROUP_CONCAT(REPEAT(v, 100) ORDER BY id)) FROM t").await.unwrap();
        assert_eq!(l, Some(1024), "cut at group_concat_max_len");
        // A recursive CTE with UNION DISTINCT: 20 rows of 1 MB each, and as
        // much again in its set of rows seen.
        let q = "WITH RECURSIVE r (n, s) AS (SELECT 1, REPEAT('x', 1000000) UNION \
                 SELECT n + 1, s FROM r WHERE n < 20) SELECT COUNT(*) FROM r";
        assert_eq!(error_of(&mut c, q).await, Some(1041), "{q}");
        let q = "WITH RECURSIVE r (n, s) AS (SELECT 1, REPEAT('x', 1000) UNION \
                 SELECT n + 1, s FROM r WHERE n < 40) SELECT COUNT(*) FROM r";
        let n: Option<i64> = c.query_first(q).await.unwrap();
        assert_eq!(n, Some(40));
    });
}

/// connect_timeout is applied to logins (it was shown and fixed at 10 s):
/// a client that opens a connection and sends nothing gets 1043 after the
/// global value.
#[test]
fn a_silent_login_is_dropped_after_connect_timeout() {
    use protocol_support::Raw;
    let (rt, _node, port) = setup();
    rt.block_on(async move {
        let mut admin = connect(port).await;
        admin.query_drop("SET GLOBAL connect_timeout = 2").await.unwrap();
        let v: Option<i64> = admin.query_first("SELECT @@global.connect_timeout").await.unwrap();
        assert_eq!(v, Some(2));
        admin.query_drop("SET GLOBAL connect_timeout = 0").await.unwrap();
        let v: Option<i64> = admin.query_first("SELECT @@global.connect_timeout").await.unwrap();
        assert_eq!(v, Some(2), "clamped to MySQL's minimum");
        let mut raw = Raw::connect(port).await;
        let greeting = raw.read().await.expect("a greeting");
        assert_eq!(greeting[0], 10, "protocol version 10");
        let started = std::time::Instant::now();
        let p = tokio::time::timeout(std::time::Duration::from_secs(9), raw.read())
            .await
            .expect("dropped before the old fixed 10 s")
            .expect("an error packet before the close");
        assert_eq!(protocol_support::err_of(&p).0, 1043);
        assert!(started.elapsed() >= std::time::Duration::from_millis(1500), "not before connect_timeout");
        assert!(raw.read().await.is_none());
        admin.query_drop("SET GLOBAL connect_timeout = 10").await.unwrap();
        still_answers(port, &mut admin, "a silent login").await;
    });
}

/// Like case 2, for LOAD DATA LOCAL: a file whose records never end (no
/// line terminator, or other terminators than the statement says) was kept
/// whole in the SQL node as one partial record, however large. Past
/// max_allowed_packet the statement fails with 1153 (nothing loaded) and
/// the rest of the file is read and dropped; the connection goes on.
#[test]
fn a_load_data_record_without_end_stops_at_max_allowed_packet() {
    use protocol_support::{Raw, CAPS};
    const CLIENT_LOCAL_FILES: u32 = 0x80;
    let (rt, _node, port) = setup();
    rt.block_on(async move {
        let mut admin = connect(port).await;
        admin.query_drop("CREATE DATABASE ld").await.unwrap();
        admin.query_drop("CREATE TABLE ld.t (v VARCHAR(100))").await.unwrap();
        admin.query_drop("SET GLOBAL max_allowed_packet = 1048576").await.unwrap();
        let (mut r, ok) = Raw::login(port, "root", PASSWORD, CAPS | CLIENT_LOCAL_FILES).await;
        assert_eq!(ok[0], 0, "logged in");
        r.command(b"\x03LOAD DATA LOCAL INFILE 'endless.txt' INTO TABLE ld.t").await;
        let ask = r.read().await.expect("the request for the file");
        assert_eq!(ask[0], 0xfb, "{ask:?}");
        // 4 MiB without a line end, in the client's 64 KiB packets.
        let chunk = vec![b'a'; 64 << 10];
        for _ in 0..64 {
            r.write(&chunk).await;
        }
        r.write(&[]).await;
        let reply = r.read().await.expect("the statement's result");
        let (code, _, message) = protocol_support::err_of(&reply);
        assert_eq!(code, 1153, "{message}");
        assert!(message.contains("max_allowed_packet (1048576 bytes)"), "{message}");
        admin.query_drop("SET GLOBAL max_allowed_packet = 67108864").await.unwrap();
        let n: Option<i64> = admin.query_first("SELECT COUNT(*) FROM ld.t").await.unwrap();
        assert_eq!(n, Some(0), "nothing loaded");
        // The same connection goes on.
        r.command(b"\x03SELECT 1").await;
        let first = r.read().await.expect("a result");
        assert_eq!(first[0], 1, "one column: {first:?}");
        still_answers(port, &mut admin, "an endless LOAD DATA record").await;
    });
}

/// Case 9: a DELETE or UPDATE of more rows than a transaction may change
/// fails at once, before changing any row, with 1206 saying how to batch
/// it; batches run. A data node whose own limit is lower answers with the
/// same error instead of a bare temporary error.
#[test]
fn dml_larger_than_a_transaction_fails_at_once_with_1206() {
    let cfg = EngineConfig { max_rows_per_txn: 500, ..EngineConfig::default() };
    let (rt, _node, port) = sqld_like(norr_knobs::Knobs::default(), cfg);
    rt.block_on(async move {
        let mut c = connect(port).await;
        c.query_drop("CREATE DATABASE big").await.unwrap();
        c.query_drop("USE big").await.unwrap();
        fill(&mut c, "t", 600, 1).await;
        for sql in ["DELETE FROM t", "UPDATE t SET v = 'x'", "DELETE FROM t WHERE id >= 0"] {
            let e = c.query_drop(sql).await.unwrap_err();
            let mysql_async::Error::Server(e) = e else { panic!("{sql}: {e:?}") };
            assert_eq!(e.code, 1206, "{sql}");
            assert!(e.message.contains("LIMIT") && e.message.contains("500"), "{}", e.message);
        }
        let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM t WHERE v = 'p'").await.unwrap();
        assert_eq!(n, Some(600), "nothing changed");
        c.query_drop("DELETE FROM t LIMIT 500").await.unwrap();
        assert_eq!(c.affected_rows(), 500);
        c.query_drop("DELETE FROM t").await.unwrap();
        assert_eq!(c.affected_rows(), 100);
    });

    let knobs = norr_knobs::Knobs { max_ops_per_txn: 100, ..Default::default() };
    let (rt, _node, port) = sqld_like(knobs, EngineConfig::default());
    rt.block_on(async move {
        let mut c = connect(port).await;
        c.query_drop("CREATE DATABASE big").await.unwrap();
        c.query_drop("USE big").await.unwrap();
        c.query_drop("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))").await.unwrap();
        for i in 0..3 {
            let values: Vec<String> = (i * 80..i * 80 + 80).map(|k| format!("({k}, 'p')")).collect();
            c.query_drop(format!("INSERT INTO t VALUES {}", values.join(","))).await.unwrap();
        }
        let r = error_of(&mut c, "UPDATE t SET v = 'x'").await;
        assert_eq!(r, Some(1206));
        still_answers(port, &mut c, "the data node's limit").await;
    });
}
