//! Runs every `tests/sqllogic/*.slt` file against an in-process data node and
//! an `Engine` (no wire protocol). Owner: catalog engineer.
//!
//! File format (a subset of sqllogictest, plus MySQL error codes):
//!
//! ```text
//! # comment
//! statement ok
//! CREATE TABLE t (a INT PRIMARY KEY)
//!
//! statement count 2              -- affected rows
//! INSERT INTO t VALUES (1), (2)
//!
//! statement error 1062           -- MySQL error number (message not checked)
//! INSERT INTO t VALUES (1)
//!
//! query IT rowsort               -- column letters (ignored), then nosort|rowsort|valuesort
//! SELECT a, 'x' FROM t
//! ----
//! 1 x
//! 2 x
//!
//! query error 1146
//! SELECT * FROM nope
//!
//! connection c2                  -- run the next record on session "c2"
//! statement ok
//! BEGIN
//!
//! skipif norr                    -- skip the next record (a known gap)
//! ```
//!
//! Values print as: NULL -> `NULL`, empty string -> `(empty)`, newlines inside a
//! value -> `\n`. A result row is its values joined by single spaces; expected
//! lines are compared after collapsing runs of whitespace. SQL may span lines
//! up to the blank line (statements) or the `----` line (queries).
//!
//! Every file runs in a fresh database named `slt_<file stem>` (the default
//! session and every `connection` start in it). `SLT_FILTER=substring` runs
//! only matching files; `SLT_VERBOSE=1` prints each record.

mod node_support;

use norr_signals::Value;
use norr_sql::engine::{Engine, EngineConfig};
use norr_sql::types::{QueryOutput, Session, SqlError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug)]
enum Expect {
    Ok,
    Count(u64),
    Error(u16),
    Rows { sort: Sort, rows: Vec<String> },
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Sort {
    No,
    Row,
    Value,
}

#[derive(Debug)]
struct Record {
    line: usize,
    conn: String,
    sql: String,
    expect: Expect,
}

fn parse_file(text: &str) -> Result<Vec<Record>, String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut conn = "default".to_string();
    let mut skip_next = false;
    while i < lines.len() {
        let l = lines[i].trim_end();
        let t = l.trim();
        if t.is_empty() || t.starts_with('#') {
            i += 1;
            continue;
        }
        let words: Vec<&str> = t.split_whitespace().collect();
        let start = i + 1;
        match words[0] {
            "connection" => {
                conn = words.get(1).ok_or(format!("line {start}: connection needs a name"))?.to_string();
                i += 1;
                continue;
            }
            // `skipif norr` skips the next record (a known gap, say why in a comment);
            // other engines' skipif / onlyif lines are ignored.
            "skipif" if words.get(1) == Some(&"norr") => {
                skip_next = true;
                i += 1;
                continue;
            }
            "skipif" | "onlyif" | "halt" | "hash-threshold" => {
                i += 1;
                continue;
            }
            "statement" | "query" => {}
            other => return Err(format!("line {start}: unknown record type {other:?}")),
        }
        let is_query = words[0] == "query";
        let mut expect = match (words[0], words.get(1).copied()) {
            ("statement", Some("ok")) => Expect::Ok,
            ("statement", Some("count")) => Expect::Count(
                words.get(2).and_then(|w| w.parse().ok()).ok_or(format!("line {start}: statement count N"))?,
            ),
            (_, Some("error")) => Expect::Error(
                words
                    .get(2)
                    .and_then(|w| w.parse().ok())
                    .ok_or(format!("line {start}: error needs a MySQL error code"))?,
            ),
            ("query", _) => {
                let sort = match words.get(2).copied() {
                    Some("rowsort") => Sort::Row,
                    Some("valuesort") => Sort::Value,
                    _ => Sort::No,
                };
                Expect::Rows { sort, rows: Vec::new() }
            }
            _ => return Err(format!("line {start}: bad record header {t:?}")),
        };
        i += 1;
        let mut sql = Vec::new();
        while i < lines.len() && !lines[i].trim().is_empty() && !(is_query && lines[i].trim() == "----") {
            sql.push(lines[i]);
            i += 1;
        }
        if let Expect::Rows { rows, .. } = &mut expect {
            if i < lines.len() && lines[i].trim() == "----" {
                i += 1;
                while i < lines.len() && !lines[i].trim().is_empty() {
                    rows.push(lines[i].split_whitespace().collect::<Vec<_>>().join(" "));
                    i += 1;
                }
            }
        }
        if sql.is_empty() {
            return Err(format!("line {start}: record without SQL"));
        }
        let conn_of_record = std::mem::replace(&mut conn, "default".into());
        if std::mem::take(&mut skip_next) {
            continue;
        }
        out.push(Record { line: start, conn: conn_of_record, sql: sql.join("\n"), expect });
    }
    Ok(out)
}

fn render(v: &Value) -> String {
    let s = match v {
        Value::Null => return "NULL".into(),
        Value::Double(d) => norr_sql::engine::expr::value::fmt_double(*d),
        Value::Float(f) => norr_sql::engine::expr::value::fmt_double(*f as f64),
        Value::Bytes(b) if b.is_empty() => return "(empty)".into(),
        other => norr_sql::engine::catalog::value_text(other),
    };
    s.replace('\n', "\\n").split_whitespace().collect::<Vec<_>>().join(" ")
}

struct Runner {
    engine: Arc<Engine>,
    sessions: BTreeMap<String, Session>,
    db: String,
    next_id: u32,
}

impl Runner {
    async fn session(&mut self, name: &str) -> &mut Session {
        if !self.sessions.contains_key(name) {
            self.next_id += 1;
            let mut s = self.engine.new_session(self.next_id, "root");
            s.multi_statements = true;
            self.engine.init_db(&mut s, &self.db).await.expect("use test db");
            self.sessions.insert(name.to_string(), s);
        }
        self.sessions.get_mut(name).expect("just inserted")
    }

    async fn run(&mut self, r: &Record) -> Result<(), String> {
        let engine = self.engine.clone();
        let s = self.session(&r.conn).await;
        let mut results = engine.execute_text(s, &r.sql).await;
        let last = results.pop().unwrap_or_else(|| Err(SqlError::internal("no result")));
        let show_err = |e: &SqlError| format!("ERROR {} ({}): {}", e.code, e.sqlstate, e.message);
        match (&r.expect, last) {
            (Expect::Error(code), Err(e)) if e.code == *code => Ok(()),
            (Expect::Error(code), Err(e)) => Err(format!("expected error {code}, got {}", show_err(&e))),
            (Expect::Error(code), Ok(_)) => Err(format!("expected error {code}, statement succeeded")),
            (_, Err(e)) => Err(format!("unexpected {}", show_err(&e))),
            (Expect::Ok, Ok(_)) => Ok(()),
            (Expect::Count(n), Ok(QueryOutput::Ok { affected_rows, .. })) if affected_rows == *n => Ok(()),
            (Expect::Count(n), Ok(o)) => Err(format!("expected {n} affected rows, got {o:?}")),
            (Expect::Rows { sort, rows: expected }, Ok(QueryOutput::Rows { rows, .. })) => {
                let mut got: Vec<String> = match sort {
                    Sort::Value => {
                        let mut v: Vec<String> = rows.iter().flat_map(|r| r.iter().map(render)).collect();
                        v.sort();
                        v
                    }
                    _ => rows.iter().map(|r| r.iter().map(render).collect::<Vec<_>>().join(" ")).collect(),
                };
                let mut want = expected.clone();
                if *sort == Sort::Row {
                    got.sort();
                    want.sort();
                }
                if *sort == Sort::Value {
                    want = want.iter().flat_map(|l| l.split(' ').map(String::from)).collect();
                    want.sort();
                }
                if got == want {
                    Ok(())
                } else {
                    Err(format!("result mismatch\n--- expected\n{}\n--- got\n{}", want.join("\n"), got.join("\n")))
                }
            }
            (Expect::Rows { .. }, Ok(o)) => Err(format!("expected rows, got {o:?}")),
        }
    }
}

/// Run one file: (records passed, failures). A file that cannot be read or
/// parsed is one failure.
async fn run_file(engine: Arc<Engine>, path: &Path) -> (usize, Vec<String>) {
    let parsed = std::fs::read_to_string(path).map_err(|e| e.to_string()).and_then(|text| parse_file(&text));
    let records = match parsed {
        Ok(r) => r,
        Err(e) => return (0, vec![format!("{}: {e}", path.display())]),
    };
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("x").replace(['-', '.'], "_");
    let db = format!("slt_{stem}");
    let mut admin = engine.new_session(0, "root");
    for setup in [format!("DROP DATABASE IF EXISTS {db}"), format!("CREATE DATABASE {db}")] {
        if let Some(Err(e)) = engine.execute_text(&mut admin, &setup).await.into_iter().find(|r| r.is_err()) {
            return (0, vec![format!("{}: setup: {e}", path.display())]);
        }
    }
    let mut runner = Runner { engine: engine.clone(), sessions: BTreeMap::new(), db, next_id: 100 };
    let verbose = std::env::var("SLT_VERBOSE").is_ok();
    let mut failures = Vec::new();
    for r in &records {
        if verbose {
            eprintln!("{}:{}: {}", path.display(), r.line, r.sql.lines().next().unwrap_or(""));
        }
        if let Err(e) = runner.run(r).await {
            failures.push(format!("{}:{} [{}]\n{}\n{e}\n", path.display(), r.line, r.conn, r.sql));
        }
    }
    for (_, mut s) in std::mem::take(&mut runner.sessions) {
        engine.end_session(&mut s).await;
    }
    // A failing record counts as one failure, the others as passed (the
    // total over the files says how much of the suite ran green).
    (records.len() - failures.len(), failures)
}

fn slt_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sqllogic");
    let filter = std::env::var("SLT_FILTER").unwrap_or_default();
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(&dir).map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "slt") && p.to_string_lossy().contains(&filter));
    files.sort();
    files
}

#[test]
fn parses_the_format() {
    let recs = parse_file(
        "# c\nstatement ok\nCREATE TABLE t (a INT)\n\nconnection c2\nquery I rowsort\nSELECT a\nFROM t\n----\n1\n2  x\n\nstatement error 1062\nINSERT INTO t VALUES (1)\n",
    )
    .unwrap();
    assert_eq!(recs.len(), 3);
    assert_eq!(recs[1].conn, "c2");
    assert_eq!(recs[1].sql, "SELECT a\nFROM t");
    assert!(
        matches!(&recs[1].expect, Expect::Rows { sort: Sort::Row, rows } if rows == &vec!["1".to_string(), "2 x".to_string()])
    );
    assert_eq!(recs[2].conn, "default");
    assert!(matches!(recs[2].expect, Expect::Error(1062)));
}

#[test]
fn sqllogic() {
    let files = slt_files();
    assert!(!files.is_empty(), "no .slt files found");
    let knobs = norr_knobs::Knobs { lock_wait_timeout_ms: 300, ..Default::default() };
    let (rt, node) = node_support::runtime_and_node(knobs);
    // The engine reaches the node through the in-process link `norr up`
    // uses, so every record here also exercises that link (the socket path
    // is covered by the protocol, coordinator and Python tests).
    let connector = node.local_connector();
    let connect: norr_sql::server::LocalConnect = std::sync::Arc::new(move || connector.connect());
    let (total, failures) = rt.block_on(async move {
        let engine = Engine::connect_local(&connect, EngineConfig::default()).await.expect("engine connects");
        let mut total = 0;
        let mut failures = Vec::new();
        for f in &files {
            let (passed, mut failed) = run_file(engine.clone(), f).await;
            total += passed;
            failures.append(&mut failed);
        }
        (total, failures)
    });
    node.shutdown();
    if !failures.is_empty() {
        panic!("{} sqllogic failures ({} records passed):\n\n{}", failures.len(), total, failures.join("\n"));
    }
    eprintln!("sqllogic: {total} records passed");
}
