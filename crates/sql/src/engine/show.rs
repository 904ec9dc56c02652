//! SHOW ... and DESCRIBE. Owner: catalog engineer.

use crate::engine::catalog::*;
use crate::engine::error_map;
use crate::engine::infoschema::{self, col_i, col_s, column_key, default_display, extra, index_rows};
use crate::engine::parse_ext::{ShowFilter, ShowStmt};
use crate::engine::{table_stats, vars, Engine};
use crate::types::{ColumnMeta, QueryOutput, Session, SqlError, WarningLevel};
use norr_signals::{ColumnDef, ColumnType, Value};
use sqlparser::ast::{BinaryOperator, Expr, UnaryOperator};

fn s(x: &str) -> Value {
    Value::str(x)
}

fn cols(names: &[&str], ints: &[&str]) -> Vec<ColumnMeta> {
    names.iter().map(|n| if ints.contains(n) { col_i("", n) } else { col_s("", n) }).collect()
}

/// SQL LIKE with `%`, `_` and `\` escapes, case-insensitive (the default collation).
pub fn like(value: &str, pattern: &str) -> bool {
    fn go(v: &[char], p: &[char]) -> bool {
        match p.first() {
            None => v.is_empty(),
            Some('%') => (0..=v.len()).any(|i| go(&v[i..], &p[1..])),
            Some('_') => !v.is_empty() && go(&v[1..], &p[1..]),
            Some('\\') if p.len() > 1 => !v.is_empty() && v[0] == p[1] && go(&v[1..], &p[2..]),
            Some(c) => !v.is_empty() && v[0] == *c && go(&v[1..], &p[1..]),
        }
    }
    let v: Vec<char> = value.to_lowercase().chars().collect();
    let p: Vec<char> = pattern.to_lowercase().chars().collect();
    go(&v, &p)
}

fn text(v: &Value) -> Option<String> {
    if v.is_null() {
        None
    } else {
        Some(value_text(v))
    }
}

/// Evaluate a SHOW ... WHERE expression on a row (columns by name). Supports
/// comparisons, LIKE, IN, IS [NOT] NULL, AND / OR / NOT, literals and columns.
fn eval_where(e: &Expr, cols: &[ColumnMeta], row: &[Value]) -> Result<Option<bool>, SqlError> {
    fn val(e: &Expr, cols: &[ColumnMeta], row: &[Value]) -> Result<Option<String>, SqlError> {
        match e {
            Expr::Identifier(i) => cols
                .iter()
                .position(|c| c.name.eq_ignore_ascii_case(&i.value))
                .map(|k| text(&row[k]))
                .ok_or_else(|| error_map::unknown_column(&i.value, "where clause")),
            Expr::Nested(x) => val(x, cols, row),
            other => match crate::engine::parse_ext::literal_expr_value(other) {
                Some(v) => Ok(text(&v)),
                None => Err(SqlError::unsupported(format!("this expression in SHOW ... WHERE: {other}"))),
            },
        }
    }
    fn cmp(a: &str, b: &str) -> std::cmp::Ordering {
        match (a.parse::<f64>(), b.parse::<f64>()) {
            (Ok(x), Ok(y)) => x.partial_cmp(&y).unwrap_or(std::cmp::Ordering::Equal),
            _ => a.to_lowercase().cmp(&b.to_lowercase()),
        }
    }
    Ok(match e {
        Expr::Nested(x) => eval_where(x, cols, row)?,
        Expr::BinaryOp { left, op: BinaryOperator::And, right } => {
            match (eval_where(left, cols, row)?, eval_where(right, cols, row)?) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            }
        }
        Expr::BinaryOp { left, op: BinaryOperator::Or, right } => {
            match (eval_where(left, cols, row)?, eval_where(right, cols, row)?) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            }
        }
        Expr::UnaryOp { op: UnaryOperator::Not, expr } => eval_where(expr, cols, row)?.map(|b| !b),
        Expr::BinaryOp { left, op, right } => {
            let (Some(a), Some(b)) = (val(left, cols, row)?, val(right, cols, row)?) else {
                return Ok(None);
            };
            let o = cmp(&a, &b);
            use std::cmp::Ordering::*;
            Some(match op {
                BinaryOperator::Eq => o == Equal,
                BinaryOperator::NotEq => o != Equal,
                BinaryOperator::Lt => o == Less,
                BinaryOperator::LtEq => o != Greater,
                BinaryOperator::Gt => o == Greater,
                BinaryOperator::GtEq => o != Less,
                other => return Err(SqlError::unsupported(format!("operator {other} in SHOW ... WHERE"))),
            })
        }
        Expr::Like { negated, expr, pattern, .. } => {
            let (Some(a), Some(p)) = (val(expr, cols, row)?, val(pattern, cols, row)?) else {
                return Ok(None);
            };
            Some(like(&a, &p) != *negated)
        }
        Expr::InList { expr, list, negated } => {
            let Some(a) = val(expr, cols, row)? else {
                return Ok(None);
            };
            let mut found = false;
            for x in list {
                if let Some(b) = val(x, cols, row)? {
                    if cmp(&a, &b) == std::cmp::Ordering::Equal {
                        found = true;
                    }
                }
            }
            Some(found != *negated)
        }
        Expr::IsNull(x) => Some(val(x, cols, row)?.is_none()),
        Expr::IsNotNull(x) => Some(val(x, cols, row)?.is_some()),
        other => return Err(SqlError::unsupported(format!("this expression in SHOW ... WHERE: {other}"))),
    })
}

fn filtered(columns: Vec<ColumnMeta>, rows: Vec<Vec<Value>>, f: &ShowFilter) -> Result<QueryOutput, SqlError> {
    let rows = match f {
        ShowFilter::None => rows,
        ShowFilter::Like(p) => rows.into_iter().filter(|r| text(&r[0]).is_some_and(|v| like(&v, p))).collect(),
        ShowFilter::Where(e) => {
            let mut out = Vec::new();
            for r in rows {
                if eval_where(e, &columns, &r)? == Some(true) {
                    out.push(r);
                }
            }
            out
        }
    };
    Ok(QueryOutput::Rows { columns: columns.into(), rows })
}

fn db_or_current(s: &Session, db: &Option<String>) -> Result<String, SqlError> {
    match db {
        Some(d) => Ok(d.clone()),
        None => s.current_db.as_deref().map(str::to_string).ok_or_else(error_map::no_db),
    }
}

async fn check_db(e: &Engine, db: &str) -> Result<(), SqlError> {
    if e.catalog().db_exists(db).await? {
        Ok(())
    } else {
        Err(error_map::unknown_db(db))
    }
}

/// SHOW CREATE TABLE text, with the AUTO_INCREMENT the table was declared
/// with (what ALTER TABLE and CREATE TABLE ... LIKE re-create from; the data
/// node's counter carries over by itself).
pub fn show_create_table(t: &SqlTable) -> String {
    show_create_table_at(t, t.meta.auto_increment_start)
}

/// SHOW CREATE TABLE text with `AUTO_INCREMENT=next` when next > 1: what the
/// statement shows is the value the next insert would get, as MySQL does, so
/// a table re-created from it (mysqldump) goes on counting from there.
pub fn show_create_table_at(t: &SqlTable, next_auto_inc: Option<u64>) -> String {
    let mut lines: Vec<String> = Vec::new();
    for (_, c, m) in t.columns_visible() {
        lines.push(format!("  {}", column_definition(t, c, m, false)));
    }
    for ix in infoschema::all_indexes(t) {
        let cols = ix.columns.iter().map(|c| quote_ident(c)).collect::<Vec<_>>().join(",");
        lines.push(match ix.kind {
            SqlIndexKind::Primary => format!("  PRIMARY KEY ({cols})"),
            SqlIndexKind::Unique => format!("  UNIQUE KEY {} ({cols})", quote_ident(&ix.name)),
            SqlIndexKind::Index => format!("  KEY {} ({cols})", quote_ident(&ix.name)),
        });
    }
    for f in &t.meta.fk.foreign_keys {
        lines.push(format!("  {}", f.to_sql(&t.db)));
    }
    for c in &t.meta.checks {
        lines.push(format!("  {}", crate::engine::check_constraints::to_sql(c)));
    }
    let mut out = format!("CREATE TABLE {} (\n{}\n) ENGINE=ndbcluster", quote_ident(&t.name), lines.join(",\n"));
    if let Some(n) = next_auto_inc.filter(|&n| n > 1) {
        out.push_str(&format!(" AUTO_INCREMENT={n}"));
    }
    if t.meta.charset == "binary" {
        out.push_str(" DEFAULT CHARSET=binary");
    } else {
        out.push_str(&format!(" DEFAULT CHARSET={} COLLATE={}", t.meta.charset, t.meta.collation));
    }
    if !t.meta.comment.is_empty() {
        out.push_str(&format!(" COMMENT={}", quote_string(&t.meta.comment)));
    }
    if let Some(p) = &t.meta.partition {
        out.push('\n');
        out.push_str(&p.to_sql());
    }
    out
}

/// A column's definition as SHOW CREATE TABLE prints it (name, type,
/// collation, NULL, DEFAULT, ...). `copy`: the definition another table
/// takes over (CREATE TABLE ... SELECT): the collation always spelled out,
/// since the new table's default may differ, and no AUTO_INCREMENT, which
/// MySQL does not carry over.
pub fn column_definition(t: &SqlTable, c: &ColumnDef, m: &SqlColumnMeta, copy: bool) -> String {
    let mut l = format!("{} {}", quote_ident(&c.name), m.sql_type);
    if let Some(coll) = &m.collation {
        if copy || *coll != t.meta.collation {
            if copy || t.meta.charset != "utf8mb4" {
                l.push_str(" CHARACTER SET utf8mb4");
            }
            l.push_str(&format!(" COLLATE {coll}"));
        }
    }
    // A copy (CREATE TABLE ... SELECT) takes the values, not the generation.
    if let Some(g) = t.meta.generation(&c.name).filter(|_| !copy) {
        l.push_str(&format!(" GENERATED ALWAYS AS ({}) {}", g.expr, if g.stored { "STORED" } else { "VIRTUAL" }));
        if !c.nullable {
            l.push_str(" NOT NULL");
        }
        if !m.comment.is_empty() {
            l.push_str(&format!(" COMMENT {}", quote_string(&m.comment)));
        }
        return l;
    }
    if !c.nullable {
        l.push_str(" NOT NULL");
    } else if matches!(c.ty, ColumnType::Timestamp) {
        l.push_str(" NULL");
    }
    match &m.default {
        SqlDefault::Literal { sql } => l.push_str(&format!(" DEFAULT {sql}")),
        SqlDefault::CurrentTimestamp { fsp } => {
            if *fsp > 0 {
                l.push_str(&format!(" DEFAULT CURRENT_TIMESTAMP({fsp})"))
            } else {
                l.push_str(" DEFAULT CURRENT_TIMESTAMP")
            }
        }
        SqlDefault::None | SqlDefault::Null => {
            // MySQL omits DEFAULT NULL for TEXT / BLOB, not for JSON.
            if c.nullable && (!matches!(c.ty, ColumnType::Text { .. } | ColumnType::Blob) || m.sql_type == "json") {
                l.push_str(" DEFAULT NULL");
            }
        }
    }
    if c.auto_increment && !copy {
        l.push_str(" AUTO_INCREMENT");
    }
    if m.on_update_now {
        if m.fsp > 0 {
            l.push_str(&format!(" ON UPDATE CURRENT_TIMESTAMP({})", m.fsp));
        } else {
            l.push_str(" ON UPDATE CURRENT_TIMESTAMP");
        }
    }
    if !m.comment.is_empty() {
        l.push_str(&format!(" COMMENT {}", quote_string(&m.comment)));
    }
    l
}

fn columns_rows(t: &SqlTable, full: bool) -> Vec<Vec<Value>> {
    t.columns_visible()
        .map(|(_, c, m)| {
            let mut r = vec![s(&c.name), s(&m.sql_type)];
            if full {
                r.push(m.collation.as_ref().map(|c| s(c)).unwrap_or(Value::Null));
            }
            r.push(s(if c.nullable { "YES" } else { "NO" }));
            r.push(s(column_key(t, &c.name)));
            r.push(default_display(m).map(|d| s(&d)).unwrap_or(Value::Null));
            r.push(s(&extra(c, m, t.meta.generation(&c.name))));
            if full {
                r.push(s("select,insert,update,references"));
                r.push(s(&m.comment));
            }
            r
        })
        .collect()
}

fn columns_header(full: bool) -> Vec<ColumnMeta> {
    if full {
        cols(&["Field", "Type", "Collation", "Null", "Key", "Default", "Extra", "Privileges", "Comment"], &[])
    } else {
        cols(&["Field", "Type", "Null", "Key", "Default", "Extra"], &[])
    }
}

/// DESCRIBE t / SHOW COLUMNS FROM t.
pub async fn describe(
    e: &Engine,
    s: &mut Session,
    db: &str,
    table: &str,
    full: bool,
    f: &ShowFilter,
) -> Result<QueryOutput, SqlError> {
    let t = match crate::engine::temp_tables::get(e, s, db, table).await {
        Ok(t) => t,
        Err(err) if err.code == 1146 => {
            let v = crate::engine::view_ddl::view_or(e, db, table, err).await?;
            let cols = crate::engine::view_ddl::columns(e, s, &v).await?;
            return filtered(columns_header(full), crate::engine::view_ddl::describe_rows(&cols, full), f);
        }
        Err(err) => return Err(err),
    };
    filtered(columns_header(full), columns_rows(&t, full), f)
}

/// The name column of SHOW DATABASES / SHOW TABLES: with LIKE, MySQL adds
/// the pattern (`Tables_in_db (p%)`); with WHERE it stays the bare name the
/// condition refers to.
fn like_header(name: &str, filter: &ShowFilter) -> String {
    match filter {
        ShowFilter::Like(p) => format!("{name} ({p})"),
        _ => name.to_string(),
    }
}

pub async fn execute_show(e: &Engine, sess: &mut Session, st: &ShowStmt) -> Result<QueryOutput, SqlError> {
    match st {
        ShowStmt::Databases { filter } => {
            let mut names: Vec<String> = e.catalog().databases().await?.into_keys().collect();
            // Only the databases the account has some privilege in (or all
            // with SHOW DATABASES), as MySQL.
            if let Some(v) = crate::engine::acl::Visibility::of(e, sess).await? {
                if !v.global.contains(crate::engine::acl::privs::Privs::SHOW_DATABASES) {
                    names.retain(|d| v.snap.any_in_db(&v.who, d));
                }
            }
            names.push(infoschema::DB.to_string());
            names.sort();
            let rows = names.iter().map(|n| vec![s(n)]).collect();
            filtered(cols(&[&like_header("Database", filter)], &[]), rows, filter)
        }
        ShowStmt::Tables { full, db, filter } => {
            let db = db_or_current(sess, db)?;
            check_db(e, &db).await?;
            let header = like_header(&format!("Tables_in_{db}"), filter);
            let mut c = vec![col_s("", &header)];
            if *full {
                c.push(col_s("", "Table_type"));
            }
            let rows: Vec<Vec<Value>> = if infoschema::is_infoschema(&db) {
                infoschema::TABLES
                    .iter()
                    .map(|t| if *full { vec![s(t), s("SYSTEM VIEW")] } else { vec![s(t)] })
                    .collect()
            } else {
                let mut named: Vec<(String, &str)> =
                    e.catalog().list(&db).await?.iter().map(|t| (t.name.clone(), "BASE TABLE")).collect();
                named.extend(e.catalog().views()?.list_db(&db).await?.into_iter().map(|v| (v.name, "VIEW")));
                // Only the tables the account has some privilege on.
                if let (Some(v), Some(a)) = (crate::engine::acl::Visibility::of(e, sess).await?, &sess.account) {
                    if !v.snap.any_in_db(&v.who, &db) {
                        return Err(crate::engine::acl::db_denied(a, &db));
                    }
                    named.retain(|(t, _)| v.snap.any_on_table(&v.who, &db, t));
                }
                named.sort();
                named.iter().map(|(n, k)| if *full { vec![s(n), s(k)] } else { vec![s(n)] }).collect()
            };
            filtered(c, rows, filter)
        }
        ShowStmt::Columns { full, db, table, filter } => {
            let db = db_or_current(sess, db)?;
            describe(e, sess, &db, table, *full, filter).await
        }
        ShowStmt::Index { db, table, filter } => {
            let db = db_or_current(sess, db)?;
            let t = crate::engine::temp_tables::get(e, sess, &db, table).await?;
            let c = cols(
                &[
                    "Table",
                    "Non_unique",
                    "Key_name",
                    "Seq_in_index",
                    "Column_name",
                    "Collation",
                    "Cardinality",
                    "Sub_part",
                    "Packed",
                    "Null",
                    "Index_type",
                    "Comment",
                    "Index_comment",
                    "Visible",
                    "Expression",
                ],
                &["Non_unique", "Seq_in_index", "Cardinality", "Sub_part"],
            );
            let rows = index_rows(&t)
                .into_iter()
                .map(|r| {
                    vec![
                        s(&t.name),
                        Value::UInt(r.non_unique as u64),
                        s(&r.index),
                        Value::UInt(r.seq as u64),
                        s(&r.column),
                        s("A"),
                        Value::UInt(0),
                        Value::Null,
                        Value::Null,
                        s(if r.nullable { "YES" } else { "" }),
                        s("BTREE"),
                        s(""),
                        s(""),
                        s("YES"),
                        Value::Null,
                    ]
                })
                .collect();
            filtered(c, rows, filter)
        }
        ShowStmt::CreateTable { db, table } => {
            let db = db_or_current(sess, db)?;
            if let Some(t) = crate::engine::temp_tables::lookup(sess, &db, table) {
                return Ok(QueryOutput::Rows {
                    columns: cols(&["Table", "Create Table"], &[]).into(),
                    rows: vec![vec![s(&t.name), s(&crate::engine::temp_tables::show_create(&t))]],
                });
            }
            let t = match e.catalog().get(&db, table).await {
                Ok(t) => t,
                // SHOW CREATE TABLE of a view answers as SHOW CREATE VIEW (mysqldump relies on it).
                Err(err) if err.code == 1146 => {
                    let v = crate::engine::view_ddl::view_or(e, &db, table, err).await?;
                    return Ok(crate::engine::view_ddl::show_create(&v, sess.current_db.as_deref()));
                }
                Err(err) => return Err(err),
            };
            let next = match table_stats::auto_increment_cell(e, &t).await {
                Value::UInt(n) => Some(n),
                _ => t.meta.auto_increment_start,
            };
            Ok(QueryOutput::Rows {
                columns: cols(&["Table", "Create Table"], &[]).into(),
                rows: vec![vec![s(&t.name), s(&show_create_table_at(&t, next))]],
            })
        }
        ShowStmt::CreateView { db, table } => {
            let db = db_or_current(sess, db)?;
            crate::engine::view_ddl::show_create_view(e, sess, &db, table).await
        }
        ShowStmt::CreateDatabase { db, if_not_exists } => {
            let text = if infoschema::is_infoschema(db) {
                format!(
                    "CREATE DATABASE `{}` /*!40100 DEFAULT CHARACTER SET utf8mb3 */ /*!80016 DEFAULT ENCRYPTION='N' */",
                    infoschema::DB
                )
            } else {
                let info = e.catalog().db_info(db).await?.ok_or_else(|| error_map::unknown_db(db))?;
                format!(
                    "CREATE DATABASE {}{} /*!40100 DEFAULT CHARACTER SET {} COLLATE {} */ /*!80016 DEFAULT ENCRYPTION='N' */",
                    if *if_not_exists { "/*!32312 IF NOT EXISTS*/ " } else { "" },
                    quote_ident(&info.name),
                    info.charset,
                    info.collation
                )
            };
            Ok(QueryOutput::Rows {
                columns: cols(&["Database", "Create Database"], &[]).into(),
                rows: vec![vec![s(db), s(&text)]],
            })
        }
        ShowStmt::Variables { global, filter } => {
            let rows = vars::all_vars(sess, *global)
                .into_iter()
                .map(|(n, v)| {
                    let t = vars::show_text(&n, &v);
                    vec![s(&n), s(&t)]
                })
                .collect();
            filtered(cols(&["Variable_name", "Value"], &[]), rows, filter)
        }
        ShowStmt::Status { global, filter } => {
            let rows = e.status_rows(sess, *global).await;
            filtered(cols(&["Variable_name", "Value"], &[]), rows, filter)
        }
        ShowStmt::Warnings { count_only, limit } | ShowStmt::Errors { count_only, limit } => {
            let errors_only = matches!(st, ShowStmt::Errors { .. });
            let list: Vec<&crate::types::Warning> =
                sess.warnings.iter().filter(|w| !errors_only || w.level == WarningLevel::Error).collect();
            if *count_only {
                let name = if errors_only { "@@session.error_count" } else { "@@session.warning_count" };
                let mut c = col_i("", name);
                c.flags = crate::types::column_flags::NUM;
                return Ok(QueryOutput::Rows {
                    columns: vec![c].into(),
                    rows: vec![vec![Value::UInt(list.len() as u64)]],
                });
            }
            let rows = list
                .iter()
                .take(limit.unwrap_or(u64::MAX) as usize)
                .map(|w| {
                    let level = match w.level {
                        WarningLevel::Note => "Note",
                        WarningLevel::Warning => "Warning",
                        WarningLevel::Error => "Error",
                    };
                    vec![s(level), Value::UInt(w.code as u64), s(&w.message)]
                })
                .collect();
            Ok(QueryOutput::Rows { columns: cols(&["Level", "Code", "Message"], &["Code"]).into(), rows })
        }
        ShowStmt::Engines => Ok(QueryOutput::Rows {
            columns: cols(&["Engine", "Support", "Comment", "Transactions", "XA", "Savepoints"], &[]).into(),
            rows: infoschema::engines_rows(),
        }),
        ShowStmt::EngineStatus { engine, mutex } => crate::engine::engine_status::show(e, engine, *mutex),
        ShowStmt::Collation { filter } => filtered(
            cols(
                &["Collation", "Charset", "Id", "Default", "Compiled", "Sortlen", "Pad_attribute"],
                &["Id", "Sortlen"],
            ),
            infoschema::collation_rows(),
            filter,
        ),
        ShowStmt::CharacterSet { filter } => filtered(
            cols(&["Charset", "Description", "Default collation", "Maxlen"], &["Maxlen"]),
            infoschema::charset_rows(),
            filter,
        ),
        ShowStmt::TableStatus { db, filter } => {
            let db = db_or_current(sess, db)?;
            check_db(e, &db).await?;
            let c = cols(
                &[
                    "Name",
                    "Engine",
                    "Version",
                    "Row_format",
                    "Rows",
                    "Avg_row_length",
                    "Data_length",
                    "Max_data_length",
                    "Index_length",
                    "Data_free",
                    "Auto_increment",
                    "Create_time",
                    "Update_time",
                    "Check_time",
                    "Collation",
                    "Checksum",
                    "Create_options",
                    "Comment",
                ],
                &[
                    "Version",
                    "Rows",
                    "Avg_row_length",
                    "Data_length",
                    "Max_data_length",
                    "Index_length",
                    "Data_free",
                    "Auto_increment",
                    "Checksum",
                ],
            );
            let mut rows = Vec::new();
            let tables = if infoschema::is_infoschema(&db) { Vec::new() } else { e.catalog().list(&db).await? };
            for t in tables {
                // Rows and lengths cost a scan: count only the tables LIKE names.
                if let ShowFilter::Like(p) = filter {
                    if !like(&t.name, p) {
                        continue;
                    }
                }
                let mut row = vec![s(&t.name)];
                row.extend(table_stats::status_cells(e, &t, true).await);
                rows.push(row);
            }
            if !infoschema::is_infoschema(&db) {
                // A view: every figure NULL and Comment VIEW, as MySQL (mysqldump
                // tells views by the NULL Engine).
                for v in e.catalog().views()?.list_db(&db).await? {
                    let mut row = vec![s(&v.name)];
                    row.extend(std::iter::repeat_n(Value::Null, 16));
                    row.push(s("VIEW"));
                    rows.push(row);
                }
                rows.sort_by(|a, b| value_text(&a[0]).cmp(&value_text(&b[0])));
            }
            filtered(c, rows, filter)
        }
        ShowStmt::Processlist { full } => {
            let c = cols(&["Id", "User", "Host", "db", "Command", "Time", "State", "Info"], &["Id", "Time"]);
            Ok(QueryOutput::Rows { columns: c.into(), rows: e.processlist_rows(sess, *full) })
        }
        ShowStmt::Plugins => Ok(QueryOutput::Rows {
            columns: cols(&["Name", "Status", "Type", "Library", "License"], &[]).into(),
            rows: vec![
                vec![s("mysql_native_password"), s("ACTIVE"), s("AUTHENTICATION"), Value::Null, s("GPL")],
                vec![s("caching_sha2_password"), s("ACTIVE"), s("AUTHENTICATION"), Value::Null, s("GPL")],
                vec![s("ndbcluster"), s("ACTIVE"), s("STORAGE ENGINE"), Value::Null, s("GPL")],
            ],
        }),
        ShowStmt::Grants => Ok(QueryOutput::Rows {
            columns: vec![col_s("", &format!("Grants for {}@%", sess.user))].into(),
            rows: vec![vec![s(&format!("GRANT ALL PRIVILEGES ON *.* TO `{}`@`%` WITH GRANT OPTION", sess.user))]],
        }),
        ShowStmt::Privileges => {
            Ok(QueryOutput::Rows { columns: cols(&["Privilege", "Context", "Comment"], &[]).into(), rows: Vec::new() })
        }
        ShowStmt::Empty(_) => Ok(QueryOutput::Rows { columns: cols(&["Value"], &[]).into(), rows: Vec::new() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_matches_mysql() {
        assert!(like("auto_increment_offset", "auto%"));
        assert!(like("Autocommit", "AUTO%"));
        assert!(!like("xauto", "auto%"));
        assert!(like("a_b", "a\\_b"));
        assert!(!like("axb", "a\\_b"));
        assert!(like("abc", "a_c"));
    }

    fn table(sql: &str) -> SqlTable {
        let (text, part) = crate::engine::parse_ext::split_partition_clause(sql);
        let p = part.map(|p| crate::engine::parse_ext::parse_partition_clause(&p).unwrap());
        let ct =
            match sqlparser::parser::Parser::parse_sql(&crate::engine::dialect::NorrMySql, &text).unwrap().remove(0) {
                sqlparser::ast::Statement::CreateTable(c) => c,
                _ => unreachable!(),
            };
        let mut def = crate::engine::ddl::build_table("d", DEFAULT_COLLATION, &ct, p, 0).unwrap();
        def.indexes.iter_mut().enumerate().for_each(|(i, ix)| ix.id = i as u32 + 1);
        SqlTable::from_def(def).unwrap()
    }

    /// SHOW CREATE TABLE output re-parses to a table with the same SHOW CREATE TABLE.
    #[test]
    fn show_create_table_round_trips() {
        for sql in [
            "CREATE TABLE t1 (id INT UNSIGNED NOT NULL AUTO_INCREMENT, b VARCHAR(20) COLLATE utf8mb4_bin DEFAULT 'x''y' COMMENT 'hi',
              c DATETIME(3) DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3), d DECIMAL(10,2) NOT NULL DEFAULT '1.5', e BOOL,
              f TEXT, g TIMESTAMP NULL, h DATE DEFAULT '2020-01-01', PRIMARY KEY (id), UNIQUE KEY uk (b), KEY k2 (c, d), INDEX (e))
              ENGINE=InnoDB AUTO_INCREMENT=7 DEFAULT CHARSET=utf8mb4 COMMENT='table c'",
            "CREATE TABLE t2 (a INT, b VARCHAR(5)) PARTITION BY KEY (a) PARTITIONS 3",
            "CREATE TABLE t3 (a INT NOT NULL, d DATE NOT NULL, PRIMARY KEY (a, d)) PARTITION BY RANGE (YEAR(d)) (PARTITION p0 VALUES LESS THAN (1990) COMMENT = 'old', PARTITION p1 VALUES LESS THAN MAXVALUE)",
            "CREATE TABLE t4 (a INT PRIMARY KEY, c CHAR(2)) PARTITION BY LIST COLUMNS (a) (PARTITION p0 VALUES IN (1, 2), PARTITION p1 VALUES IN (3))",
            "CREATE TABLE t5 (a INT PRIMARY KEY, b INT) PARTITION BY RANGE COLUMNS (a) (PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN (MAXVALUE))",
            "CREATE TABLE t6 (a INT PRIMARY KEY, b INT) PARTITION BY LINEAR HASH (a * 3) PARTITIONS 4",
            "CREATE TABLE t7 (a VARBINARY(10) PRIMARY KEY, b BLOB, c TEXT COLLATE utf8mb4_bin) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
        ] {
            let t = table(sql);
            let shown = show_create_table(&t);
            let t2 = table(&shown);
            assert_eq!(show_create_table(&t2), shown, "round trip of {sql}");
            assert_eq!(t2.def.columns, t.def.columns, "{shown}");
            assert_eq!(t2.def.primary_key, t.def.primary_key);
            assert_eq!(t2.def.partitioning, t.def.partitioning);
            assert_eq!(t2.def.partitions, t.def.partitions);
            assert_eq!(t2.meta, t.meta, "{shown}");
        }
        let shown = show_create_table(&table(
            "CREATE TABLE t1 (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, b VARCHAR(20) DEFAULT NULL, KEY (b))",
        ));
        assert_eq!(
            shown,
            "CREATE TABLE `t1` (\n  `id` int NOT NULL AUTO_INCREMENT,\n  `b` varchar(20) DEFAULT NULL,\n  PRIMARY KEY (`id`),\n  KEY `b` (`b`)\n) ENGINE=ndbcluster DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci"
        );
    }

    /// Every accepted collation name is listed under its MySQL id, each
    /// charset has one default, and the old `utf8_*` aliases resolve.
    #[test]
    fn listed_collations_are_the_accepted_ones() {
        use crate::engine::catalog::COLLATIONS;
        let mut names: Vec<_> = COLLATIONS.iter().map(|c| c.name).collect();
        let sorted = {
            let mut v = names.clone();
            v.sort();
            v
        };
        assert_eq!(names, sorted, "COLLATIONS is in name order (SHOW COLLATION's order)");
        names.dedup();
        assert_eq!(names.len(), COLLATIONS.len());
        let mut ids: Vec<_> = COLLATIONS.iter().map(|c| c.id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), COLLATIONS.len(), "ids are unique");
        for cs in infoschema::charset_rows() {
            let (name, default) = (value_text(&cs[0]), value_text(&cs[2]));
            let defaults: Vec<_> =
                COLLATIONS.iter().filter(|c| c.charset == name && c.is_default).map(|c| c.name).collect();
            assert_eq!(defaults, vec![default.as_str()], "{name}");
        }
        for alias in ["utf8_general_ci", "UTF8_BIN", "utf8_unicode_ci"] {
            assert!(collation_from_name(alias).is_some(), "{alias}");
        }
        assert!(collation_from_name("utf8_0900_ai_ci").is_none());
        assert!(collation_from_name("cp1251_general_ci").is_none());
        // latin1 and ascii collations are accepted, unlisted, and kept as the
        // utf8mb4 collation the values are stored with.
        assert_eq!(collation_from_name("LATIN1_SWEDISH_CI"), Some(norr_signals::Collation::CaseInsensitive));
        assert_eq!(stored_collation_name("latin1_swedish_ci").as_deref(), Some("utf8mb4_0900_ai_ci"));
        assert_eq!(stored_collation_name("latin1_general_cs").as_deref(), Some("utf8mb4_bin"));
        assert_eq!(stored_collation_name("ascii_bin").as_deref(), Some("utf8mb4_bin"));
        assert_eq!(stored_collation_name("utf8mb4_unicode_ci").as_deref(), Some("utf8mb4_unicode_ci"));
        assert!(COLLATIONS.iter().all(|c| !c.name.starts_with("latin1")));
    }

    /// SHOW COLLATION's PAD_ATTRIBUTE matches what sqld's comparisons and the
    /// data node's key encoding (unique indexes, primary keys) do with
    /// trailing spaces, for every collation listed.
    #[test]
    fn reported_pad_attribute_is_what_comparisons_do() {
        use crate::engine::expr::value::{cmp_bytes, Coll};
        use norr_signals::keycode::encode_key;
        use norr_signals::Collation;
        for row in infoschema::collation_rows() {
            let (name, pad) = (value_text(&row[0]), value_text(&row[6]));
            let native = collation_from_name(&name).unwrap_or_else(|| panic!("{name} is listed but not accepted"));
            let coll = match native {
                Collation::CaseInsensitive => Coll::Ci,
                Collation::Binary => Coll::Bin,
            };
            let ty = ColumnType::Varchar { len: 10, collation: native };
            let key = |v: &str| encode_key(&[Value::str(v)], &[&ty]);
            let sqld_pads = cmp_bytes(b"a", b"a ", coll) == std::cmp::Ordering::Equal;
            let keys_pad = key("a") == key("a ");
            assert_eq!(sqld_pads, keys_pad, "{name}: sqld and the data node disagree");
            assert_eq!(pad == "PAD SPACE", sqld_pads, "{name} is reported {pad}");
        }
    }

    #[test]
    fn describe_rows() {
        let t = table("CREATE TABLE t (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, u INT UNIQUE, k INT, ts TIMESTAMP DEFAULT CURRENT_TIMESTAMP, KEY (k))");
        let rows = columns_rows(&t, false);
        assert_eq!(rows.len(), 4);
        assert_eq!(rows[0], vec![s("id"), s("int"), s("NO"), s("PRI"), Value::Null, s("auto_increment")]);
        assert_eq!(rows[1][3], s("UNI"));
        assert_eq!(rows[2][3], s("MUL"));
        assert_eq!(rows[3][4], s("CURRENT_TIMESTAMP"));
        assert_eq!(rows[3][5], s("DEFAULT_GENERATED"));
        // hidden primary key is invisible
        let t = table("CREATE TABLE t (a INT)");
        assert_eq!(columns_rows(&t, false).len(), 1);
        assert!(!show_create_table(&t).contains("$PK"));
    }
}
