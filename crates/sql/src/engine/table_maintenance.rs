//! ANALYZE / OPTIMIZE / CHECK / REPAIR TABLE and CHECKSUM TABLE: the table
//! maintenance statements that tools (mysqlcheck, backup scripts, admin
//! GUIs) send. Each table of the list gets its own result rows, and a missing
//! table is reported in its rows, not as a statement error, as MySQL does.
//!
//! What each does here, and why:
//! * ANALYZE: the figures SHOW TABLE STATUS shows (rows, row length) are
//!   computed when asked (`table_stats`), so nothing is stale there; the
//!   statistics EXPLAIN's estimates come from (row count, rows per key of
//!   each index prefix: `index_stats`) are made again from the table.
//! * OPTIMIZE, CHECK, REPAIR: rows live in the data nodes' memory, where no
//!   fragmentation accumulates that a rebuild would reclaim, and the data node
//!   has no structure check to run on request. They answer as MySQL does for
//!   an engine without the operation: a note, "The storage engine for the
//!   table doesn't support <op>".
//! * CHECKSUM: a real checksum of the table's committed rows (a full scan):
//!   the wrapping sum of a CRC-32 of each row's values, so it does not depend
//!   on the order the partitions return rows in. Equal tables give equal
//!   checksums across SQL nodes, restarts, and dump-and-restore (the hidden
//!   row id of a table without a primary key is left out). The figures differ
//!   from MySQL's, whose row format differs. `QUICK` gives NULL, as MySQL does
//!   for tables without a live checksum.

use crate::engine::infoschema::{col_i, col_s};
use crate::engine::parse_ext::Cursor;
use crate::engine::{ddl, error_map, exec, Engine};
use crate::types::{QueryOutput, Session, SqlError, Warning, WarningLevel};
use norr_signals::{ScanSpec, Value, MAX_SCAN_BATCH_ROWS};
use sqlparser::tokenizer::Token;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Analyze,
    Optimize,
    Check,
    Repair,
    Checksum,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Analyze => "analyze",
            Op::Optimize => "optimize",
            Op::Check => "check",
            Op::Repair => "repair",
            Op::Checksum => "checksum",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaintenanceStmt {
    pub op: Op,
    /// (database, table) as written.
    pub tables: Vec<(Option<String>, String)>,
    /// CHECKSUM TABLE ... QUICK.
    pub quick: bool,
}

/// Parse the statement if it is one of ours (`None`: someone else's).
/// `words` are its first words, upper-cased.
pub fn parse(sql: &str, words: &[String]) -> Option<Result<MaintenanceStmt, SqlError>> {
    let w = |i: usize| words.get(i).map(|s| s.as_str()).unwrap_or("");
    let table_word = |i: usize| matches!(w(i), "TABLE" | "TABLES");
    let ours = match w(0) {
        "ANALYZE" | "OPTIMIZE" | "REPAIR" => {
            table_word(1) || (matches!(w(1), "NO_WRITE_TO_BINLOG" | "LOCAL") && table_word(2))
        }
        "CHECK" | "CHECKSUM" => table_word(1),
        _ => false,
    };
    ours.then(|| parse_ours(sql))
}

fn parse_ours(sql: &str) -> Result<MaintenanceStmt, SqlError> {
    let mut c = Cursor::new(sql)?;
    let op = if c.eat_word("ANALYZE") {
        Op::Analyze
    } else if c.eat_word("OPTIMIZE") {
        Op::Optimize
    } else if c.eat_word("REPAIR") {
        Op::Repair
    } else if c.eat_word("CHECKSUM") {
        Op::Checksum
    } else {
        c.expect_word("CHECK")?;
        Op::Check
    };
    if matches!(op, Op::Analyze | Op::Optimize | Op::Repair) {
        let _ = c.eat_word("NO_WRITE_TO_BINLOG") || c.eat_word("LOCAL");
    }
    if !(c.eat_word("TABLE") || c.eat_word("TABLES")) {
        return Err(c.err());
    }
    let mut tables = Vec::new();
    loop {
        tables.push(c.object_name()?);
        if !c.eat(&Token::Comma) {
            break;
        }
    }
    let mut quick = false;
    // The options each statement takes; none changes what we do except
    // CHECKSUM's QUICK.
    loop {
        let ok = match op {
            Op::Check => {
                if c.eat_word("FOR") {
                    c.expect_word("UPGRADE")?;
                    true
                } else {
                    ["QUICK", "FAST", "MEDIUM", "EXTENDED", "CHANGED"].iter().any(|w| c.eat_word(w))
                }
            }
            Op::Repair => ["QUICK", "EXTENDED", "USE_FRM"].iter().any(|w| c.eat_word(w)),
            Op::Checksum => {
                if c.eat_word("QUICK") {
                    quick = true;
                    true
                } else {
                    c.eat_word("EXTENDED")
                }
            }
            Op::Analyze => {
                if c.is_word("UPDATE") || c.is_word("DROP") {
                    return Err(SqlError::unsupported("ANALYZE TABLE ... HISTOGRAM"));
                }
                false
            }
            Op::Optimize => false,
        };
        if !ok {
            break;
        }
    }
    c.eat(&Token::SemiColon);
    if !c.at_end() {
        return Err(c.err());
    }
    Ok(MaintenanceStmt { op, tables, quick })
}

/// Run the statement over its tables.
pub async fn run(e: &Engine, s: &mut Session, st: &MaintenanceStmt) -> Result<QueryOutput, SqlError> {
    // Names first: an unqualified name without a current database fails the
    // whole statement (1046), as in MySQL.
    let mut names = Vec::with_capacity(st.tables.len());
    for (db, t) in &st.tables {
        let db = match db {
            Some(d) => d.clone(),
            None => s.current_db.as_deref().ok_or_else(error_map::no_db)?.to_string(),
        };
        names.push((db, t.clone()));
    }
    if st.op == Op::Checksum {
        return checksum_rows(e, s, &names, st.quick).await;
    }
    let columns = ["Table", "Op", "Msg_type", "Msg_text"].map(|n| col_s("", n)).to_vec();
    let mut rows = Vec::new();
    let row = |db: &str, t: &str, kind: &str, text: &str| {
        vec![Value::str(&format!("{db}.{t}")), Value::str(st.op.name()), Value::str(kind), Value::str(text)]
    };
    for (db, t) in &names {
        let table = match open(e, s, db, t).await {
            Ok(table) => table,
            Err(err) => {
                rows.push(row(db, t, "Error", &err.message));
                rows.push(row(db, t, "status", "Operation failed"));
                continue;
            }
        };
        match st.op {
            Op::Analyze => match crate::engine::index_stats::analyze(e, &table).await {
                Ok(_) => rows.push(row(db, t, "status", "OK")),
                Err(err) => {
                    rows.push(row(db, t, "Error", &err.message));
                    rows.push(row(db, t, "status", "Operation failed"));
                }
            },
            Op::Optimize | Op::Check | Op::Repair => rows.push(row(
                db,
                t,
                "note",
                &format!("The storage engine for the table doesn't support {}", st.op.name()),
            )),
            Op::Checksum => unreachable!("handled above"),
        }
    }
    Ok(QueryOutput::Rows { columns: columns.into(), rows })
}

async fn open(
    e: &Engine,
    s: &Session,
    db: &str,
    t: &str,
) -> Result<std::sync::Arc<crate::engine::catalog::SqlTable>, SqlError> {
    if crate::engine::infoschema::is_infoschema(db) {
        // Views of the SQL node's own state: nothing stored to maintain.
        return Err(SqlError::new(
            1044,
            "42000",
            format!("Access denied for user '{}'@'%' to database '{}'", s.user, crate::engine::infoschema::DB),
        ));
    }
    ddl::check_name(t, "table")?;
    if let Some(tmp) = crate::engine::temp_tables::lookup(s, db, t) {
        return Ok(tmp);
    }
    e.catalog().try_get(db, t).await?.ok_or_else(|| error_map::no_such_table(db, t))
}

/// CHECKSUM TABLE: one row (Table, Checksum) per table; a missing table gets
/// NULL and warning 1146.
async fn checksum_rows(
    e: &Engine,
    s: &mut Session,
    names: &[(String, String)],
    quick: bool,
) -> Result<QueryOutput, SqlError> {
    let mut columns = vec![col_s("", "Table"), col_i("", "Checksum")];
    columns[1].flags &= !crate::types::column_flags::UNSIGNED;
    let mut rows = Vec::with_capacity(names.len());
    for (db, t) in names {
        let sum = match open(e, s, db, t).await {
            Ok(_) if quick => Value::Null,
            Ok(table) => Value::Int(table_checksum(e, &table).await? as i64),
            Err(err) => {
                s.warnings.push(Warning { level: WarningLevel::Error, code: err.code, message: err.message });
                Value::Null
            }
        };
        rows.push(vec![Value::str(&format!("{db}.{t}")), sum]);
    }
    Ok(QueryOutput::Rows { columns: columns.into(), rows })
}

/// The wrapping sum of `row_checksum` over the table's committed rows.
async fn table_checksum(e: &Engine, t: &crate::engine::catalog::SqlTable) -> Result<u32, SqlError> {
    let err = |x| error_map::from_client(x, &exec::table_err(&t.def));
    let mut spec = ScanSpec::full(t.def.id);
    spec.table_version = t.def.version;
    spec.ordered = false;
    spec.batch_rows = MAX_SCAN_BATCH_ROWS;
    spec.projection = t.columns_visible().map(|(id, _, _)| id).collect();
    let mut scan = e.client().scan(spec).await.map_err(err)?;
    let mut sum = 0u32;
    let mut buf = Vec::new();
    while let Some(batch) = scan.next_batch().await.map_err(err)? {
        for r in &batch {
            sum = sum.wrapping_add(row_checksum(r, &mut buf));
        }
    }
    Ok(sum)
}

/// CRC-32 of a row's values as text, each preceded by its length (a NULL
/// by a marker), so that ("ab", "c") and ("a", "bc") differ.
fn row_checksum(values: &[Value], buf: &mut Vec<u8>) -> u32 {
    buf.clear();
    for v in values {
        match crate::engine::expr::value::to_text(v) {
            None => buf.push(0),
            Some(text) => {
                buf.push(1);
                buf.extend_from_slice(&(text.len() as u32).to_le_bytes());
                buf.extend_from_slice(&text);
            }
        }
    }
    crc32fast::hash(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(sql: &str) -> Option<Result<MaintenanceStmt, SqlError>> {
        let words = crate::engine::parse_ext::first_words(sql, 3).unwrap();
        parse(sql, &words)
    }

    #[test]
    fn parses_each_statement_with_its_options() {
        let st = p("ANALYZE NO_WRITE_TO_BINLOG TABLE a, d.b").unwrap().unwrap();
        assert_eq!(st.op, Op::Analyze);
        assert_eq!(st.tables, vec![(None, "a".into()), (Some("d".into()), "b".into())]);
        assert_eq!(p("optimize local table t").unwrap().unwrap().op, Op::Optimize);
        assert_eq!(p("CHECK TABLE t FOR UPGRADE QUICK").unwrap().unwrap().op, Op::Check);
        assert_eq!(p("REPAIR TABLE t QUICK EXTENDED USE_FRM").unwrap().unwrap().op, Op::Repair);
        let st = p("CHECKSUM TABLE t1, t2 QUICK").unwrap().unwrap();
        assert!(st.quick && st.tables.len() == 2);
        assert!(!p("checksum table t extended").unwrap().unwrap().quick);
        assert!(p("CHECK (1)").is_none());
        assert!(p("SELECT 1").is_none());
        assert!(p("ANALYZE").is_none());
    }

    #[test]
    fn malformed_forms_are_errors() {
        for sql in ["CHECK TABLE", "CHECK TABLE t BOGUS", "CHECKSUM TABLE t,", "OPTIMIZE TABLE t QUICK"] {
            assert_eq!(p(sql).unwrap().unwrap_err().code, 1064, "{sql}");
        }
        assert_eq!(p("ANALYZE TABLE t UPDATE HISTOGRAM ON c").unwrap().unwrap_err().code, 1235);
    }

    #[test]
    fn row_checksum_separates_values_and_nulls() {
        let mut buf = Vec::new();
        let a = row_checksum(&[Value::str("ab"), Value::str("c")], &mut buf);
        let b = row_checksum(&[Value::str("a"), Value::str("bc")], &mut buf);
        let c = row_checksum(&[Value::Null, Value::str("abc")], &mut buf);
        let d = row_checksum(&[Value::str(""), Value::str("abc")], &mut buf);
        assert!(a != b && c != d);
        assert_eq!(a, row_checksum(&[Value::str("ab"), Value::str("c")], &mut buf));
    }
}
