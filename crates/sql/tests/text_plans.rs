//! Text INSERTs that run from a session's kept parse (`engine::text_cache`)
//! must do exactly what the parsed text does: the same rows, warnings,
//! errors and insert ids. Each statement goes once as written into `a`
//! (its shape is kept after the first run, and later runs take their
//! literals as parameters) and once behind a leading comment into `b` (a
//! text the cache never takes: parsed every time); then the tables and the
//! answers are compared. Values are random, many out of range or invalid
//! for their column, in strict and in non-strict sql_mode.

mod node_support;

use mysql_async::prelude::*;
use mysql_async::{Conn, Row};
use node_support::{connect, sql_node};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a>(&mut self, v: &[&'a str]) -> &'a str {
        v[(self.next() % v.len() as u64) as usize]
    }
}

const INTS: &[&str] = &["0", "1", "7", "2147483647", "2147483648", "4294967296", "99999999999999999999", "'12'", "'x'"];
const DECS: &[&str] = &["0", "1.5", "1.005", "12345678.999", "123456789012", "'3.25'", "2.50"];
const STRS: &[&str] = &["'a'", "''", "'hello world'", "'this is longer than twenty'", "'ünï'", "5"];
const DATES: &[&str] = &["'2020-01-31'", "'2020-13-45'", "'1999-12-31 10:11:12'", "20200101", "'x'"];
const ENUMS: &[&str] = &["'a'", "'b'", "'c'", "1", "2", "3", "''"];
const UNS: &[&str] = &["0", "18446744073709551615", "18446744073709551616", "'5'"];

/// What a statement answered: the error code, or the affected rows, the
/// insert id and the warnings.
async fn run(c: &mut Conn, sql: &str) -> String {
    match c.query_drop(sql).await {
        Err(e) => format!("error {}", node_support::code(e)),
        Ok(()) => {
            let (rows, id) = (c.affected_rows(), c.last_insert_id());
            let w: Vec<Row> = c.query("SHOW WARNINGS").await.expect("warnings");
            let w: Vec<String> = w
                .into_iter()
                .map(|r| {
                    let (level, code, msg): (String, u32, String) = mysql_async::from_row(r);
                    format!("{level} {code} {msg}")
                })
                .collect();
            format!("ok {rows} {id:?} {w:?}")
        }
    }
}

async fn text_plan_hits(c: &mut Conn) -> u64 {
    let r: Option<(String, String)> =
        c.query_first("SHOW GLOBAL STATUS LIKE 'Norr_text_plan_hits'").await.expect("status");
    r.expect("the counter is shown").1.parse().expect("a number")
}

#[test]
fn kept_parses_of_text_inserts_do_what_the_text_does() {
    let (rt, node) = node_support::runtime_and_node(norr_knobs::Knobs::default());
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let p = sql_node(&addr).await;
        connect(p, None).await.query_drop("CREATE DATABASE tp").await.unwrap();
        let mut c = connect(p, Some("tp")).await;
        for t in ["a", "b"] {
            c.query_drop(format!(
                "CREATE TABLE {t} (id BIGINT AUTO_INCREMENT PRIMARY KEY, i INT, d DECIMAL(10,2), \
                 s VARCHAR(20), dt DATE, e ENUM('a','b'), u BIGINT UNSIGNED, UNIQUE KEY (i))"
            ))
            .await
            .unwrap();
        }
        let before = text_plan_hits(&mut c).await;
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut statements = 0u64;
        for mode in ["STRICT_TRANS_TABLES", ""] {
            c.query_drop(format!("SET sql_mode = '{mode}'")).await.unwrap();
            for _ in 0..150 {
                let shape = rng.next() % 3;
                let row = |rng: &mut Rng| {
                    format!(
                        "({}, {}, {}, {}, {}, {})",
                        rng.pick(INTS),
                        rng.pick(DECS),
                        rng.pick(STRS),
                        rng.pick(DATES),
                        rng.pick(ENUMS),
                        rng.pick(UNS)
                    )
                };
                let body = match shape {
                    0 => format!("INTO {{}} (i, d, s, dt, e, u) VALUES {}", row(&mut rng)),
                    1 => format!("INTO {{}} (i, d, s, dt, e, u) VALUES {}, {}", row(&mut rng), row(&mut rng)),
                    _ => format!(
                        "INTO {{}} (id, i, d, s, dt, e, u) VALUES ({}, {}, {}, {}, {}, {}, {})",
                        rng.next() % 400,
                        rng.pick(INTS),
                        rng.pick(DECS),
                        rng.pick(STRS),
                        rng.pick(DATES),
                        rng.pick(ENUMS),
                        rng.pick(UNS)
                    ),
                };
                let verb = if rng.next().is_multiple_of(4) { "INSERT IGNORE" } else { "INSERT" };
                let kept = format!("{verb} {}", body.replace("{}", "a"));
                let parsed = format!("/* parsed */ {verb} {}", body.replace("{}", "b"));
                let (x, y) = (run(&mut c, &kept).await, run(&mut c, &parsed).await);
                // Messages name the table (`'b.i'` for a duplicate in b).
                assert_eq!(x, y.replace("'b.", "'a."), "{kept}");
                statements += 1;
            }
        }
        let rows = |t: &str| format!("SELECT id, i, d, s, dt, e, u FROM {t} ORDER BY id");
        let a: Vec<Row> = c.query(rows("a")).await.unwrap();
        let b: Vec<Row> = c.query(rows("b")).await.unwrap();
        let show = |v: Vec<Row>| v.into_iter().map(|r| format!("{:?}", r.unwrap())).collect::<Vec<_>>();
        let (a, b) = (show(a), show(b));
        // UNIQUE (i) over nine candidate values and strict mode keep most
        // statements out (that is what their answers above compare); some
        // rows still went in.
        assert!(a.len() >= 3, "rows went in to compare: {}", a.len());
        assert_eq!(a, b);
        // Three shapes x two verbs x two modes at most were parsed; every
        // other kept-side statement ran from its kept parse.
        let hits = text_plan_hits(&mut c).await - before;
        assert!(hits + 12 >= statements && hits < statements, "{hits} hits of {statements} statements");
        // Switched off, every text is parsed.
        c.query_drop("SET norr_text_plan_cache = OFF").await.unwrap();
        let before = text_plan_hits(&mut c).await;
        c.query_drop("INSERT INTO a (i) VALUES (123456)").await.unwrap();
        c.query_drop("INSERT INTO a (i) VALUES (123457)").await.unwrap();
        assert_eq!(text_plan_hits(&mut c).await, before);
        let on: Option<i64> = c.query_first("SELECT @@global.norr_text_plan_cache").await.unwrap();
        assert_eq!(on, Some(1), "the global default stays on");
    });
}

#[test]
fn a_kept_parse_follows_schema_changes_and_other_sessions_keep_their_own() {
    let (rt, node) = node_support::runtime_and_node(norr_knobs::Knobs::default());
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let p = sql_node(&addr).await;
        connect(p, None).await.query_drop("CREATE DATABASE tq").await.unwrap();
        let mut c = connect(p, Some("tq")).await;
        let mut other = connect(p, Some("tq")).await;
        c.query_drop("CREATE TABLE t (k INT PRIMARY KEY, v VARCHAR(10))").await.unwrap();
        c.query_drop("INSERT INTO t (k, v) VALUES (1, 'one')").await.unwrap();
        // The table changes under the kept parse: the next run sees the new one.
        c.query_drop("ALTER TABLE t MODIFY v VARCHAR(3)").await.unwrap();
        c.query_drop("SET sql_mode = 'STRICT_TRANS_TABLES'").await.unwrap();
        let e = c.query_drop("INSERT INTO t (k, v) VALUES (2, 'four')").await.unwrap_err();
        assert_eq!(node_support::code(e), 1406, "the new column length applies");
        other.query_drop("DROP TABLE t").await.unwrap();
        let e = c.query_drop("INSERT INTO t (k, v) VALUES (3, 'x')").await.unwrap_err();
        assert_eq!(node_support::code(e), 1146, "a dropped table is not written through a kept parse");
        other.query_drop("CREATE TABLE t (k INT PRIMARY KEY, v VARCHAR(10), w INT DEFAULT 9)").await.unwrap();
        c.query_drop("INSERT INTO t (k, v) VALUES (4, 'four')").await.unwrap();
        other.query_drop("INSERT INTO t (k, v) VALUES (5, 'five')").await.unwrap();
        let r: Vec<(i32, String, i32)> = c.query("SELECT k, v, w FROM t ORDER BY k").await.unwrap();
        assert_eq!(r, vec![(4, "four".into(), 9), (5, "five".into(), 9)]);
        // A duplicate through the kept parse names the value, as the text does.
        let e = c.query_drop("INSERT INTO t (k, v) VALUES (4, 'again')").await.unwrap_err();
        assert_eq!(node_support::code(e), 1062);
        let w: Vec<Row> = c.query("SHOW WARNINGS").await.unwrap();
        let (_, _, msg): (String, u32, String) = mysql_async::from_row(w.into_iter().next().expect("the error"));
        assert!(msg.contains("'4'"), "{msg}");
    });
}
