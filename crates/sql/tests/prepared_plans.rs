//! Prepared statements keep their compiled plans between executions; these
//! check that a kept plan follows DDL and the session's default database, and
//! that the sysbench range statements give the right rows for parameters of
//! every type (a range scan drops the conjuncts it decides exactly only for
//! integer values). An in-process data node and an `Engine`, no wire protocol.

mod node_support;

use norr_signals::Value;
use norr_sql::engine::{Engine, EngineConfig};
use norr_sql::types::{QueryOutput, Session};

async fn run(e: &Engine, s: &mut Session, sql: &str) -> QueryOutput {
    let mut r = e.execute_text(s, sql).await;
    assert_eq!(r.len(), 1, "{sql}");
    r.pop().expect("one result").unwrap_or_else(|err| panic!("{sql}: {err}"))
}

async fn rows(e: &Engine, s: &mut Session, sql: &str) -> Vec<Vec<Value>> {
    match run(e, s, sql).await {
        QueryOutput::Rows { rows, .. } => rows,
        other => panic!("{sql}: not rows: {other:?}"),
    }
}

fn runtime_and_node() -> (tokio::runtime::Runtime, norr_runtime::DataNodeHandle) {
    node_support::runtime_and_node(norr_knobs::Knobs::default())
}

fn affected(out: QueryOutput) -> u64 {
    match out {
        QueryOutput::Ok { affected_rows, .. } => affected_rows,
        other => panic!("not OK: {other:?}"),
    }
}

#[test]
fn kept_update_and_delete_plans_follow_ddl_and_default_db() {
    let (rt, node) = runtime_and_node();
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let e = Engine::connect(&addr, EngineConfig::default()).await.expect("engine connects");
        let mut s = e.new_session(1, "root");
        for sql in [
            "CREATE DATABASE pp1",
            "CREATE DATABASE pp2",
            "USE pp1",
            "CREATE TABLE t (id INT PRIMARY KEY, b INT, c VARCHAR(10))",
            "INSERT INTO t VALUES (1, 10, 'x'), (2, 20, 'y')",
            "CREATE TABLE pp2.t (id INT PRIMARY KEY, b INT, c VARCHAR(10))",
            "INSERT INTO pp2.t VALUES (1, 100, 'p'), (2, 200, 'q')",
        ] {
            run(&e, &mut s, sql).await;
        }
        let upd = e.prepare(&mut s, "UPDATE t SET b = b + ? WHERE id = ?").await.expect("prepare update");
        let del = e.prepare(&mut s, "DELETE FROM t WHERE id = ?").await.expect("prepare delete");
        let up = |n: i64, id: i64| vec![Value::Int(n), Value::Int(id)];

        // Kept after the first execution, reused by the second.
        assert_eq!(affected(e.execute_prepared(&mut s, &upd, up(1, 1)).await.expect("update")), 1);
        assert_eq!(affected(e.execute_prepared(&mut s, &upd, up(1, 1)).await.expect("update")), 1);
        assert_eq!(rows(&e, &mut s, "SELECT b FROM t WHERE id = 1").await, vec![vec![Value::Int(12)]]);

        // The table is dropped and made again with `b` elsewhere: the kept
        // plan must not write the old column position.
        run(&e, &mut s, "DROP TABLE t").await;
        run(&e, &mut s, "CREATE TABLE t (id INT PRIMARY KEY, c VARCHAR(10), b INT)").await;
        run(&e, &mut s, "INSERT INTO t VALUES (1, 'z', 5), (3, 'w', 7)").await;
        assert_eq!(affected(e.execute_prepared(&mut s, &upd, up(2, 1)).await.expect("update after DDL")), 1);
        assert_eq!(
            rows(&e, &mut s, "SELECT c, b FROM t WHERE id = 1").await,
            vec![vec![Value::Bytes(b"z".to_vec()), Value::Int(7)]]
        );

        // Another default database: unqualified `t` is now pp2.t.
        run(&e, &mut s, "USE pp2").await;
        assert_eq!(affected(e.execute_prepared(&mut s, &upd, up(3, 2)).await.expect("update in pp2")), 1);
        assert_eq!(rows(&e, &mut s, "SELECT b FROM t WHERE id = 2").await, vec![vec![Value::Int(203)]]);
        assert_eq!(affected(e.execute_prepared(&mut s, &del, vec![Value::Int(1)]).await.expect("delete")), 1);
        assert_eq!(rows(&e, &mut s, "SELECT id FROM t").await, vec![vec![Value::Int(2)]]);

        // Back in pp1: the delete's kept plan (for pp2.t) is not used there.
        run(&e, &mut s, "USE pp1").await;
        assert_eq!(affected(e.execute_prepared(&mut s, &del, vec![Value::Int(3)]).await.expect("delete")), 1);
        assert_eq!(rows(&e, &mut s, "SELECT id FROM t").await, vec![vec![Value::Int(1)]]);
        assert_eq!(rows(&e, &mut s, "SELECT id FROM pp2.t").await, vec![vec![Value::Int(2)]]);
    });
    node.shutdown();
}

fn ids(rows: &[Vec<Value>]) -> Vec<i64> {
    rows.iter()
        .map(|r| match &r[0] {
            Value::Int(i) => *i,
            other => panic!("not an int: {other:?}"),
        })
        .collect()
}

fn text(v: &Value) -> String {
    match v {
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("not a string: {other:?}"),
    }
}

#[test]
fn range_statements_with_parameters_of_every_type() {
    let (rt, node) = runtime_and_node();
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let e = Engine::connect(&addr, EngineConfig::default()).await.expect("engine connects");
        let mut s = e.new_session(1, "root");
        run(&e, &mut s, "CREATE DATABASE pr").await;
        run(&e, &mut s, "USE pr").await;
        run(
            &e,
            &mut s,
            "CREATE TABLE sb (id INT NOT NULL AUTO_INCREMENT, k INT NOT NULL DEFAULT '0', \
             c CHAR(20) NOT NULL DEFAULT '', PRIMARY KEY (id), KEY k_1 (k))",
        )
        .await;
        // ids 1..=150; c repeats case-insensitively every 3 ids, one of the
        // three with a trailing space.
        let mut sql = String::from("INSERT INTO sb (id, k, c) VALUES ");
        for i in 1..=150 {
            let c = ["abc", "ABC ", "Abd"][i % 3];
            sql.push_str(&format!("{}({i}, {}, '{c}')", if i > 1 { "," } else { "" }, i % 5));
        }
        run(&e, &mut s, &sql).await;

        let range = e.prepare(&mut s, "SELECT id FROM sb WHERE id BETWEEN ? AND ? ORDER BY id").await.expect("prepare");
        let sum = e.prepare(&mut s, "SELECT SUM(k) FROM sb WHERE id BETWEEN ? AND ?").await.expect("prepare");
        let order = e.prepare(&mut s, "SELECT c FROM sb WHERE id BETWEEN ? AND ? ORDER BY c").await.expect("prepare");
        let distinct =
            e.prepare(&mut s, "SELECT DISTINCT c FROM sb WHERE id BETWEEN ? AND ? ORDER BY c").await.expect("prepare");
        let half_open =
            e.prepare(&mut s, "SELECT id FROM sb WHERE id > ? AND ? > id ORDER BY id").await.expect("prepare");
        let exec = |p: &std::sync::Arc<norr_sql::engine::Prepared>, params: Vec<Value>| {
            let p = p.clone();
            let e = e.clone();
            async move {
                let mut s = e.new_session(2, "root");
                run(&e, &mut s, "USE pr").await;
                match e.execute_prepared(&mut s, &p, params).await.expect("execute") {
                    QueryOutput::Rows { rows, .. } => rows,
                    other => panic!("not rows: {other:?}"),
                }
            }
        };
        let span = |a: i64, b: i64| (a..=b).collect::<Vec<i64>>();
        let bytes = |x: &str| Value::Bytes(x.as_bytes().to_vec());

        // Integers (the range decides the conjunct), then strings, decimals
        // and doubles (checked by value, with MySQL's conversions).
        assert_eq!(ids(&exec(&range, vec![Value::Int(11), Value::Int(110)]).await), span(11, 110));
        assert_eq!(ids(&exec(&range, vec![Value::UInt(11), Value::UInt(110)]).await), span(11, 110));
        assert_eq!(ids(&exec(&range, vec![bytes("11"), bytes("110")]).await), span(11, 110));
        assert_eq!(ids(&exec(&range, vec![bytes(" 10.5"), bytes("110.5x")]).await), span(11, 110));
        assert_eq!(ids(&exec(&range, vec![bytes("abc"), bytes("40")]).await), span(1, 40));
        assert_eq!(
            ids(&exec(
                &range,
                vec![Value::Decimal(norr_signals::Decimal { mantissa: 105, scale: 1 }), Value::Int(110)]
            )
            .await),
            span(11, 110)
        );
        assert_eq!(ids(&exec(&range, vec![Value::Double(10.0), Value::Double(109.9)]).await), span(10, 109));
        // Out of INT's range: that side of the range is open, the check stays.
        assert_eq!(ids(&exec(&range, vec![Value::Int(-5_000_000_000), Value::Int(5_000_000_000)]).await), span(1, 150));
        assert_eq!(ids(&exec(&range, vec![Value::Int(100), Value::Int(i64::MAX)]).await), span(100, 150));
        // NULL and empty ranges.
        assert!(exec(&range, vec![Value::Null, Value::Int(100)]).await.is_empty());
        assert!(exec(&range, vec![Value::Int(100), Value::Int(50)]).await.is_empty());
        // Exclusive bounds, the column on either side.
        assert_eq!(ids(&exec(&half_open, vec![Value::Int(10), Value::Int(110)]).await), span(11, 109));
        assert_eq!(ids(&exec(&half_open, vec![bytes("10"), Value::Double(110.5)]).await), span(11, 110));

        // SUM over integers (the integral fast path) and its NULL for no rows.
        let want: i64 = (11..=110).map(|i| i % 5).sum();
        assert_eq!(
            exec(&sum, vec![Value::Int(11), Value::Int(110)]).await,
            vec![vec![Value::Decimal(norr_signals::Decimal { mantissa: want as i128, scale: 0 })]]
        );
        assert_eq!(exec(&sum, vec![Value::Int(500), Value::Int(600)]).await, vec![vec![Value::Null]]);

        // ORDER BY c under the case-insensitive default collation: 'abc',
        // 'ABC' and 'ABC ' tie (CHAR drops trailing spaces, as MySQL).
        let sorted = exec(&order, vec![Value::Int(11), Value::Int(110)]).await;
        let lower: Vec<String> = sorted.iter().map(|r| text(&r[0]).to_lowercase()).collect();
        let mut want: Vec<String> = (11..=110).map(|i| ["abc", "abc", "abd"][i % 3].to_string()).collect();
        want.sort();
        assert_eq!(lower, want);
        // DISTINCT: one row per case-insensitive value, in order.
        let d = exec(&distinct, vec![Value::Int(11), Value::Int(110)]).await;
        let d: Vec<String> = d.iter().map(|r| text(&r[0])).collect();
        assert_eq!(d.len(), 2, "{d:?}");
        assert_eq!(d[0].to_lowercase(), "abc");
        assert_eq!(d[1], "Abd");
        // The same with string parameters (no conjunct dropped).
        let d2 = exec(&distinct, vec![bytes("11"), bytes("110")]).await;
        assert_eq!(d2.len(), 2);
    });
    node.shutdown();
}

#[test]
fn window_functions_and_recursive_ctes_as_prepared_statements() {
    let (rt, node) = runtime_and_node();
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let e = Engine::connect(&addr, EngineConfig::default()).await.expect("engine connects");
        let mut s = e.new_session(1, "root");
        for sql in [
            "CREATE DATABASE pw",
            "USE pw",
            "CREATE TABLE t (id INT PRIMARY KEY, g INT, v INT)",
            "INSERT INTO t VALUES (1, 1, 10), (2, 1, 20), (3, 2, 30), (4, 2, 40), (5, 2, 50)",
        ] {
            run(&e, &mut s, sql).await;
        }
        // Parameters as the frame offset, NTILE's buckets and LAG's offset,
        // and in WHERE; the kept plan serves every execution.
        let w = e
            .prepare(
                &mut s,
                "SELECT id, SUM(v) OVER (ORDER BY id ROWS ? PRECEDING), NTILE(?) OVER (ORDER BY id), \
                 LAG(v, ?) OVER (PARTITION BY g ORDER BY id), ROW_NUMBER() OVER (ORDER BY id DESC), \
                 PERCENT_RANK() OVER (ORDER BY id) FROM t WHERE id >= ? ORDER BY id",
            )
            .await
            .expect("prepare window query");
        for _ in 0..2 {
            let out = e
                .execute_prepared(&mut s, &w, vec![Value::Int(1), Value::Int(2), Value::Int(1), Value::Int(2)])
                .await
                .expect("execute window query");
            let QueryOutput::Rows { columns, rows } = out else { panic!("not rows") };
            use norr_sql::types::FieldType;
            let types: Vec<FieldType> = columns.iter().map(|c| c.field_type).collect();
            assert_eq!(
                types,
                vec![
                    FieldType::Long,
                    FieldType::NewDecimal,
                    FieldType::LongLong,
                    FieldType::LongLong,
                    FieldType::LongLong,
                    FieldType::Double
                ]
            );
            let d = |m: i128| Value::Decimal(norr_signals::Decimal { mantissa: m, scale: 0 });
            assert_eq!(
                rows,
                vec![
                    vec![Value::Int(2), d(20), Value::Int(1), Value::Null, Value::Int(4), Value::Double(0.0)],
                    vec![Value::Int(3), d(50), Value::Int(1), Value::Null, Value::Int(3), Value::Double(1.0 / 3.0)],
                    vec![Value::Int(4), d(70), Value::Int(2), Value::Int(30), Value::Int(2), Value::Double(2.0 / 3.0)],
                    vec![Value::Int(5), d(90), Value::Int(2), Value::Int(40), Value::Int(1), Value::Double(1.0)],
                ]
            );
        }
        // A negative offset from a parameter is MySQL's error, not a panic.
        let err = e
            .execute_prepared(&mut s, &w, vec![Value::Int(-1), Value::Int(2), Value::Int(1), Value::Int(1)])
            .await
            .expect_err("negative frame offset");
        assert_eq!(err.code, 3586);
        let err = e
            .execute_prepared(&mut s, &w, vec![Value::Int(1), Value::Int(0), Value::Int(1), Value::Int(1)])
            .await
            .expect_err("zero buckets");
        assert_eq!(err.code, 1210);

        let r = e
            .prepare(
                &mut s,
                "WITH RECURSIVE r(n) AS (SELECT ? UNION ALL SELECT n + 1 FROM r WHERE n < ?) SELECT COUNT(*), MAX(n) FROM r",
            )
            .await
            .expect("prepare recursive query");
        let out = e.execute_prepared(&mut s, &r, vec![Value::Int(1), Value::Int(10)]).await.expect("recursive");
        let QueryOutput::Rows { rows: got, .. } = out else { panic!("not rows") };
        assert_eq!(got, vec![vec![Value::Int(10), Value::Int(10)]]);
        let err = e
            .execute_prepared(&mut s, &r, vec![Value::Int(1), Value::Int(5000)])
            .await
            .expect_err("too deep");
        assert_eq!(err.code, 3636);

        // EXPLAIN shows both without running them.
        for sql in [
            "EXPLAIN SELECT id, RANK() OVER (PARTITION BY g ORDER BY v) FROM t",
            "EXPLAIN WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r",
        ] {
            assert!(!rows(&e, &mut s, sql).await.is_empty(), "{sql}");
        }
    });
    node.shutdown();
}

/// As MySQL, a SELECT that cannot be compiled fails its prepare (with the
/// error its execution would give), not its first execution.
#[test]
fn a_select_that_does_not_compile_fails_the_prepare() {
    let (rt, node) = runtime_and_node();
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let e = Engine::connect(&addr, EngineConfig::default()).await.expect("engine connects");
        let mut s = e.new_session(1, "root");
        for sql in ["CREATE DATABASE pe", "USE pe", "CREATE TABLE t (id INT PRIMARY KEY, b INT)"] {
            run(&e, &mut s, sql).await;
        }
        for (sql, code) in [
            ("SELECT * FROM nope WHERE id = ?", 1146),
            ("SELECT nocol FROM t WHERE id = ?", 1054),
            ("SELECT b FROM t JOIN t AS u ON t.id = u.id WHERE id = ?", 1052),
            ("SELECT id FROM t UNION SELECT id, b FROM t", 1222),
        ] {
            let err = e.prepare(&mut s, sql).await.err().unwrap_or_else(|| panic!("{sql}: prepared"));
            assert_eq!(err.code, code, "{sql}: {err}");
        }
        // A good one still prepares, with its result columns known.
        let p = e.prepare(&mut s, "SELECT b, id FROM t WHERE id = ?").await.expect("prepare");
        assert_eq!(p.columns.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["b", "id"]);
    });
}

/// GROUP BY ... WITH ROLLUP, GROUPING(), TABLE and VALUES through the
/// prepared-statement path (COM_STMT_PREPARE's `Engine::prepare`): the plan
/// kept at prepare time gives MySQL's rows for each execution, and the
/// result metadata is MySQL's (a rolled-up NOT NULL column is nullable;
/// VALUES columns are column_0, column_1, ... typed as a UNION would).
#[test]
fn rollup_table_and_values_prepared() {
    let (rt, node) = runtime_and_node();
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let e = Engine::connect(&addr, EngineConfig::default()).await.expect("engine connects");
        let mut s = e.new_session(1, "root");
        for sql in [
            "CREATE DATABASE pr",
            "USE pr",
            "CREATE TABLE t (id INT PRIMARY KEY, g INT NOT NULL, v INT)",
            "INSERT INTO t VALUES (1, 1, 10), (2, 1, 20), (3, 2, 30), (4, 3, 40)",
        ] {
            run(&e, &mut s, sql).await;
        }
        use norr_sql::types::{column_flags, FieldType};
        let int = Value::Int;

        let p = e
            .prepare(&mut s, "SELECT g, COUNT(*), GROUPING(g) FROM t WHERE v > ? GROUP BY g WITH ROLLUP")
            .await
            .expect("prepare rollup");
        assert_eq!(p.columns.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["g", "COUNT(*)", "GROUPING(g)"]);
        assert_eq!(p.columns[0].flags & column_flags::NOT_NULL, 0, "a rolled-up column can be NULL");
        let got = |out: QueryOutput| match out {
            QueryOutput::Rows { rows, .. } => rows,
            other => panic!("not rows: {other:?}"),
        };
        let r1 = got(e.execute_prepared(&mut s, &p, vec![int(10)]).await.expect("execute"));
        assert_eq!(
            r1,
            vec![
                vec![int(1), int(1), int(0)],
                vec![int(2), int(1), int(0)],
                vec![int(3), int(1), int(0)],
                vec![Value::Null, int(3), int(1)],
            ]
        );
        let r2 = got(e.execute_prepared(&mut s, &p, vec![int(25)]).await.expect("execute again"));
        assert_eq!(
            r2,
            vec![vec![int(2), int(1), int(0)], vec![int(3), int(1), int(0)], vec![Value::Null, int(2), int(1)]]
        );

        let p =
            e.prepare(&mut s, "VALUES ROW(?, 'a'), ROW(2, 'bc') ORDER BY column_0 DESC").await.expect("prepare VALUES");
        assert_eq!(p.columns.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["column_0", "column_1"]);
        assert_eq!(p.columns[1].field_type, FieldType::VarString);
        let r = got(e.execute_prepared(&mut s, &p, vec![int(7)]).await.expect("execute VALUES"));
        assert_eq!(r, vec![vec![int(7), Value::str("a")], vec![int(2), Value::str("bc")]]);
        let r = rows(&e, &mut s, "VALUES ROW(1, 'a')").await;
        assert_eq!(r, vec![vec![int(1), Value::str("a")]]);
        match run(&e, &mut s, "VALUES ROW(1, 'a')").await {
            QueryOutput::Rows { columns, .. } => assert_eq!(columns[0].field_type, FieldType::LongLong),
            other => panic!("not rows: {other:?}"),
        }

        let p = e.prepare(&mut s, "TABLE t ORDER BY id DESC LIMIT ?").await.expect("prepare TABLE");
        assert_eq!(p.columns.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["id", "g", "v"]);
        assert_eq!(p.columns[0].table, "t", "TABLE t's columns are t's, as SELECT * FROM t's");
        let r = got(e.execute_prepared(&mut s, &p, vec![int(1)]).await.expect("execute TABLE"));
        assert_eq!(r, vec![vec![int(4), int(3), int(40)]]);
    });
    node.shutdown();
}

async fn prep_rows(e: &Engine, s: &mut Session, p: &norr_sql::engine::Prepared, params: Vec<Value>) -> Vec<Vec<Value>> {
    match e.execute_prepared(s, p, params).await.expect("execute") {
        QueryOutput::Rows { rows, .. } => rows,
        other => panic!("not rows: {other:?}"),
    }
}

fn datetime(s: &str) -> Value {
    let (d, t) = s.split_once(' ').expect("date and time");
    let n: Vec<u32> = d.split('-').chain(t.split(':')).map(|x| x.parse().expect("number")).collect();
    Value::DateTime(norr_signals::DateTime {
        date: norr_signals::Date { year: n[0] as u16, month: n[1] as u8, day: n[2] as u8 },
        hour: n[3] as u8,
        minute: n[4] as u8,
        second: n[5] as u8,
        micro: 0,
    })
}

/// Binary-protocol DATETIME parameters (as `Value::DateTime`) written to and
/// compared with TIMESTAMP columns are the session zone's wall time, and a
/// kept plan follows a change of the zone between executions.
#[test]
fn timestamp_parameters_follow_the_session_time_zone() {
    let (rt, node) = runtime_and_node();
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let e = Engine::connect(&addr, EngineConfig::default()).await.expect("engine connects");
        let mut s = e.new_session(1, "root");
        for sql in [
            "CREATE DATABASE ptz",
            "USE ptz",
            "CREATE TABLE t (ts TIMESTAMP NOT NULL PRIMARY KEY, id INT NOT NULL, at TIMESTAMP NULL, KEY k_at (at))",
            "SET time_zone = '+05:30'",
        ] {
            run(&e, &mut s, sql).await;
        }
        let ins = e.prepare(&mut s, "INSERT INTO t VALUES (?, ?, ?)").await.expect("prepare");
        let by_key = e.prepare(&mut s, "SELECT id, at FROM t WHERE ts = ?").await.expect("prepare");
        let range = e.prepare(&mut s, "SELECT id FROM t WHERE at BETWEEN ? AND ? ORDER BY id").await.expect("prepare");
        let upd = e.prepare(&mut s, "UPDATE t SET at = ? WHERE ts = ?").await.expect("prepare");
        for (i, ts) in ["2024-01-01 05:30:00", "2024-01-01 06:30:00", "2024-01-01 07:30:00"].iter().enumerate() {
            let params = vec![datetime(ts), Value::Int(i as i64 + 1), datetime(ts)];
            assert_eq!(affected(e.execute_prepared(&mut s, &ins, params).await.expect("insert")), 1);
        }
        let r = prep_rows(&e, &mut s, &by_key, vec![datetime("2024-01-01 06:30:00")]).await;
        assert_eq!(r, vec![vec![Value::Int(2), datetime("2024-01-01 06:30:00")]]);
        let r =
            prep_rows(&e, &mut s, &range, vec![datetime("2024-01-01 06:00:00"), datetime("2024-01-01 08:00:00")]).await;
        assert_eq!(ids(&r), vec![2, 3]);

        // The same plans in UTC: the stored moments are 00:00, 01:00, 02:00.
        run(&e, &mut s, "SET time_zone = '+00:00'").await;
        let r = prep_rows(&e, &mut s, &by_key, vec![datetime("2024-01-01 06:30:00")]).await;
        assert!(r.is_empty(), "{r:?}");
        let r = prep_rows(&e, &mut s, &by_key, vec![datetime("2024-01-01 01:00:00")]).await;
        assert_eq!(r, vec![vec![Value::Int(2), datetime("2024-01-01 01:00:00")]]);
        let r =
            prep_rows(&e, &mut s, &range, vec![datetime("2024-01-01 00:30:00"), datetime("2024-01-01 02:00:00")]).await;
        assert_eq!(ids(&r), vec![2, 3]);

        // An UPDATE by key in a third zone.
        run(&e, &mut s, "SET time_zone = '-01:00'").await;
        let params = vec![datetime("2023-12-31 12:00:00"), datetime("2023-12-31 23:00:00")];
        assert_eq!(affected(e.execute_prepared(&mut s, &upd, params).await.expect("update")), 1);
        run(&e, &mut s, "SET time_zone = 'SYSTEM'").await;
        assert_eq!(
            rows(&e, &mut s, "SELECT id, at FROM t WHERE at < '2024-01-01 00:00:00'").await,
            vec![vec![Value::Int(1), datetime("2023-12-31 13:00:00")]]
        );
    });
    node.shutdown();
}
