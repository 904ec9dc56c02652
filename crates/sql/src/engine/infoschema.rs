//! `information_schema` as virtual tables. Owner: catalog engineer.
//!
//! For the query engineer: when a FROM item names `information_schema.X`
//! (or `X` while the current database is information_schema), call
//! `virtual_table(engine, session, "X").await?` and scan the returned rows like
//! a real table (WHERE / ORDER BY / projections apply as usual). `Ok(None)`:
//! no such table (1109 "Unknown table 'X' in information_schema", see
//! `unknown_table_error`).

use crate::engine::catalog::*;
use crate::engine::Engine;
use crate::types::{charset, ColumnMeta, FieldType, Session, SqlError};
use norr_signals::{ColumnType, Value};
use std::sync::Arc;

pub const DB: &str = "information_schema";

/// Names of every information_schema table we provide.
pub const TABLES: &[&str] = &[
    "CHARACTER_SETS",
    "CHECK_CONSTRAINTS",
    "COLLATIONS",
    "COLUMNS",
    "ENGINES",
    "EVENTS",
    "KEY_COLUMN_USAGE",
    "PARTITIONS",
    "PROCESSLIST",
    "REFERENTIAL_CONSTRAINTS",
    "ROUTINES",
    "SCHEMATA",
    "STATISTICS",
    "TABLES",
    "TABLE_CONSTRAINTS",
    "TRIGGERS",
    "USER_PRIVILEGES",
    "SCHEMA_PRIVILEGES",
    "TABLE_PRIVILEGES",
    "COLUMN_PRIVILEGES",
    "VIEWS",
];

pub fn is_infoschema(db: &str) -> bool {
    db.eq_ignore_ascii_case(DB)
}

pub fn unknown_table_error(name: &str) -> SqlError {
    SqlError::new(1109, "42S02", format!("Unknown table '{}' in information_schema", name.to_ascii_uppercase()))
}

/// A text column of a virtual table.
pub fn col_s(table: &str, name: &str) -> ColumnMeta {
    ColumnMeta {
        schema: DB.to_string(),
        table: table.to_string(),
        org_table: table.to_string(),
        name: name.to_string(),
        org_name: name.to_string(),
        field_type: FieldType::VarString,
        column_length: 256,
        decimals: 0,
        flags: 0,
        charset: charset::UTF8MB4_CI,
    }
}

/// An integer column of a virtual table.
pub fn col_i(table: &str, name: &str) -> ColumnMeta {
    ColumnMeta {
        field_type: FieldType::LongLong,
        column_length: 21,
        charset: charset::BINARY,
        flags: crate::types::column_flags::UNSIGNED | crate::types::column_flags::NUM,
        ..col_s(table, name)
    }
}

fn s(x: &str) -> Value {
    Value::str(x)
}
fn u(x: u64) -> Value {
    Value::UInt(x)
}
fn opt_u(x: Option<u64>) -> Value {
    x.map(Value::UInt).unwrap_or(Value::Null)
}

/// `data_type` of information_schema.COLUMNS ("int", "varchar", ...).
pub fn data_type(sql_type: &str) -> String {
    sql_type.split(['(', ' ']).next().unwrap_or("").to_string()
}

/// DEFAULT as SHOW COLUMNS / COLUMN_DEFAULT print it (unquoted); None = NULL.
pub fn default_display(m: &SqlColumnMeta) -> Option<String> {
    match &m.default {
        SqlDefault::None | SqlDefault::Null => None,
        SqlDefault::Literal { sql } => Some(unquote(sql)),
        SqlDefault::CurrentTimestamp { fsp } => {
            Some(if *fsp > 0 { format!("CURRENT_TIMESTAMP({fsp})") } else { "CURRENT_TIMESTAMP".to_string() })
        }
    }
}

fn unquote(sql: &str) -> String {
    if sql.len() >= 2 && sql.starts_with('\'') && sql.ends_with('\'') {
        sql[1..sql.len() - 1].replace("''", "'").replace("\\\\", "\\")
    } else {
        sql.to_string()
    }
}

/// EXTRA of SHOW COLUMNS.
pub fn extra(c: &norr_signals::ColumnDef, m: &SqlColumnMeta, g: Option<&GeneratedColumn>) -> String {
    if let Some(g) = g {
        return if g.stored { "STORED GENERATED" } else { "VIRTUAL GENERATED" }.into();
    }
    let mut parts: Vec<String> = Vec::new();
    if c.auto_increment {
        parts.push("auto_increment".into());
    }
    if matches!(m.default, SqlDefault::CurrentTimestamp { .. }) {
        parts.push("DEFAULT_GENERATED".into());
    }
    if m.on_update_now {
        parts.push(if m.fsp > 0 {
            format!("on update CURRENT_TIMESTAMP({})", m.fsp)
        } else {
            "on update CURRENT_TIMESTAMP".to_string()
        });
    }
    parts.join(" ")
}

/// COLUMN_KEY of SHOW COLUMNS: PRI, UNI or MUL.
pub fn column_key(t: &SqlTable, name: &str) -> &'static str {
    let eq = |x: &String| x.eq_ignore_ascii_case(name);
    let idx = all_indexes(t);
    if idx.iter().any(|i| i.kind == SqlIndexKind::Primary && i.columns.iter().any(eq)) {
        return "PRI";
    }
    if idx.iter().any(|i| i.kind == SqlIndexKind::Unique && i.columns.len() == 1 && eq(&i.columns[0])) {
        return "UNI";
    }
    if idx.iter().any(|i| i.columns.first().is_some_and(eq)) {
        return "MUL";
    }
    ""
}

/// The table's indexes as SHOW INDEX / SHOW CREATE TABLE list them: PRIMARY,
/// then unique ones, then the others, each group in creation order.
pub fn all_indexes(t: &SqlTable) -> Vec<SqlIndexMeta> {
    let mut v: Vec<SqlIndexMeta> = t.meta.indexes.iter().filter(|i| i.kind == SqlIndexKind::Primary).cloned().collect();
    v.extend(t.meta.indexes.iter().filter(|i| i.kind == SqlIndexKind::Unique).cloned());
    v.extend(t.meta.indexes.iter().filter(|i| i.kind == SqlIndexKind::Index).cloned());
    v
}

/// Where a column of information_schema.COLUMNS sits: its table (or view)
/// and position.
struct ColumnAt<'a> {
    db: &'a str,
    table: &'a str,
    name: &'a str,
    pos: usize,
    nullable: bool,
}

/// One row of information_schema.COLUMNS (a table's or a view's column).
fn columns_row(
    at: ColumnAt<'_>,
    ty: &ColumnType,
    m: &SqlColumnMeta,
    key: &str,
    extra: &str,
    generation_expression: &str,
) -> Vec<Value> {
    let l = lengths(ty, &m.sql_type, m.fsp);
    vec![
        s("def"),
        s(at.db),
        s(at.table),
        s(at.name),
        u(at.pos as u64 + 1),
        default_display(m).map(|d| s(&d)).unwrap_or(Value::Null),
        s(if at.nullable { "YES" } else { "NO" }),
        s(&data_type(&m.sql_type)),
        opt_u(l[0]),
        opt_u(l[1]),
        opt_u(l[2]),
        opt_u(l[3]),
        opt_u(l[4]),
        m.collation.as_ref().map(|_| s("utf8mb4")).unwrap_or(Value::Null),
        m.collation.as_ref().map(|c| s(c)).unwrap_or(Value::Null),
        s(&m.sql_type),
        s(key),
        s(extra),
        s("select,insert,update,references"),
        s(&m.comment),
        s(generation_expression),
        Value::Null,
    ]
}

/// (CHARACTER_MAXIMUM_LENGTH, CHARACTER_OCTET_LENGTH, NUMERIC_PRECISION,
/// NUMERIC_SCALE, DATETIME_PRECISION)
fn lengths(ty: &ColumnType, sql_type: &str, fsp: u8) -> [Option<u64>; 5] {
    let base = data_type(sql_type);
    match ty {
        ColumnType::TinyInt { .. } => [None, None, Some(3), Some(0), None],
        ColumnType::SmallInt { .. } => [None, None, Some(5), Some(0), None],
        ColumnType::MediumInt { .. } => [None, None, Some(7), Some(0), None],
        ColumnType::Int { .. } => [None, None, Some(10), Some(0), None],
        ColumnType::BigInt { unsigned } => [None, None, Some(if *unsigned { 20 } else { 19 }), Some(0), None],
        ColumnType::Float => [None, None, Some(12), None, None],
        ColumnType::Double => [None, None, Some(22), None, None],
        ColumnType::Decimal { precision, scale } => [None, None, Some(*precision as u64), Some(*scale as u64), None],
        ColumnType::Char { len, .. } | ColumnType::Varchar { len, .. } => {
            [Some(*len as u64), Some(*len as u64 * 4), None, None, None]
        }
        ColumnType::Binary { len } | ColumnType::Varbinary { len } => {
            [Some(*len as u64), Some(*len as u64), None, None, None]
        }
        ColumnType::Text { .. } => {
            let n: u64 = match base.as_str() {
                "tinytext" => 255,
                "mediumtext" => 16_777_215,
                "longtext" => 4_294_967_295,
                _ => 65_535,
            };
            [Some(n / 4), Some(n), None, None, None]
        }
        ColumnType::Blob => {
            let n: u64 = match base.as_str() {
                "tinyblob" => 255,
                "mediumblob" => 16_777_215,
                "longblob" => 4_294_967_295,
                _ => 65_535,
            };
            [Some(n), Some(n), None, None, None]
        }
        ColumnType::Date => [None; 5],
        ColumnType::Time | ColumnType::DateTime | ColumnType::Timestamp => [None, None, None, None, Some(fsp as u64)],
    }
}

async fn tables_in_scope(e: &Engine, scope: &NameScope) -> Result<Vec<Arc<SqlTable>>, SqlError> {
    let mut all = e.catalog().list_all().await?;
    all.retain(|t| scope.admits(&t.db, &t.name));
    Ok(all)
}

/// The schemas and table names a statement's WHERE restricts an
/// information_schema table to (`TABLE_SCHEMA = 'x'`, `TABLE_NAME IN (...)`
/// among its top-level conjuncts), so that rows, and TABLES' counting scans,
/// are made only for those. The WHERE is still applied to what is made:
/// this only has to admit every row it would keep, so names compare by
/// folding case as the default collation does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NameScope {
    /// None: any schema.
    pub schemas: Option<Vec<String>>,
    /// None: any table.
    pub tables: Option<Vec<String>>,
}

impl NameScope {
    pub fn admits(&self, db: &str, table: &str) -> bool {
        let any = |names: &Option<Vec<String>>, name: &str| {
            names.as_ref().is_none_or(|ns| {
                let folded = norr_signals::keycode::fold_case(name.as_bytes());
                ns.iter().any(|n| norr_signals::keycode::fold_case(n.as_bytes()) == folded)
            })
        };
        any(&self.schemas, db) && any(&self.tables, table)
    }
}

/// What a statement reading a virtual table can see of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wanted {
    /// Every column, TABLES' row counts, lengths and AUTO_INCREMENT included
    /// (a scan per table).
    TableStats,
    /// None of `TABLE_STATS_COLUMNS` is referenced: TABLES leaves them 0 (NULL
    /// for AUTO_INCREMENT) instead of asking the data node.
    NoTableStats,
}

/// Columns of information_schema.TABLES that cost a scan of the table (or a
/// round trip to the data node, AUTO_INCREMENT).
pub const TABLE_STATS_COLUMNS: &[&str] = &["TABLE_ROWS", "AVG_ROW_LENGTH", "DATA_LENGTH", "AUTO_INCREMENT"];

/// The rows of `information_schema.<name>`, or None if there is no such table.
pub async fn virtual_table(
    e: &Engine,
    session: &Session,
    name: &str,
    wanted: Wanted,
    scope: &NameScope,
) -> Result<Option<(Vec<ColumnMeta>, Vec<Vec<Value>>)>, SqlError> {
    let up = name.to_ascii_uppercase();
    let cols = |names: &[&str], ints: &[&str]| -> Vec<ColumnMeta> {
        names.iter().map(|n| if ints.contains(n) { col_i(&up, n) } else { col_s(&up, n) }).collect()
    };
    let out = match up.as_str() {
        "SCHEMATA" => {
            let c = cols(
                &[
                    "CATALOG_NAME",
                    "SCHEMA_NAME",
                    "DEFAULT_CHARACTER_SET_NAME",
                    "DEFAULT_COLLATION_NAME",
                    "SQL_PATH",
                    "DEFAULT_ENCRYPTION",
                ],
                &[],
            );
            let mut rows = vec![vec![s("def"), s(DB), s("utf8mb3"), s("utf8mb3_general_ci"), Value::Null, s("NO")]];
            for (_, d) in e.catalog().databases().await? {
                rows.push(vec![s("def"), s(&d.name), s(&d.charset), s(&d.collation), Value::Null, s("NO")]);
            }
            rows.sort_by(|a, b| {
                crate::engine::catalog::value_text(&a[1]).cmp(&crate::engine::catalog::value_text(&b[1]))
            });
            (c, rows)
        }
        "TABLES" => {
            let c = cols(
                &[
                    "TABLE_CATALOG",
                    "TABLE_SCHEMA",
                    "TABLE_NAME",
                    "TABLE_TYPE",
                    "ENGINE",
                    "VERSION",
                    "ROW_FORMAT",
                    "TABLE_ROWS",
                    "AVG_ROW_LENGTH",
                    "DATA_LENGTH",
                    "MAX_DATA_LENGTH",
                    "INDEX_LENGTH",
                    "DATA_FREE",
                    "AUTO_INCREMENT",
                    "CREATE_TIME",
                    "UPDATE_TIME",
                    "CHECK_TIME",
                    "TABLE_COLLATION",
                    "CHECKSUM",
                    "CREATE_OPTIONS",
                    "TABLE_COMMENT",
                ],
                &[
                    "VERSION",
                    "TABLE_ROWS",
                    "AVG_ROW_LENGTH",
                    "DATA_LENGTH",
                    "MAX_DATA_LENGTH",
                    "INDEX_LENGTH",
                    "DATA_FREE",
                    "AUTO_INCREMENT",
                    "CHECKSUM",
                ],
            );
            let mut rows = Vec::new();
            for t in TABLES {
                rows.push(vec![
                    s("def"),
                    s(DB),
                    s(t),
                    s("SYSTEM VIEW"),
                    Value::Null,
                    u(10),
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    s(""),
                    s(""),
                ]);
            }
            for t in tables_in_scope(e, scope).await? {
                // Counting rows costs a scan per table: only when the
                // statement can see the figures.
                let mut row = vec![s("def"), s(&t.db), s(&t.name), s("BASE TABLE")];
                row.extend(crate::engine::table_stats::status_cells(e, &t, wanted == Wanted::TableStats).await);
                rows.push(row);
            }
            for v in crate::engine::view_ddl::views_in_scope(e, scope).await? {
                let mut row = vec![s("def"), s(&v.db), s(&v.name), s("VIEW")];
                row.extend(std::iter::repeat_n(Value::Null, 16));
                row.push(s("VIEW"));
                rows.push(row);
            }
            (c, rows)
        }
        "COLUMNS" => {
            let c = cols(
                &[
                    "TABLE_CATALOG",
                    "TABLE_SCHEMA",
                    "TABLE_NAME",
                    "COLUMN_NAME",
                    "ORDINAL_POSITION",
                    "COLUMN_DEFAULT",
                    "IS_NULLABLE",
                    "DATA_TYPE",
                    "CHARACTER_MAXIMUM_LENGTH",
                    "CHARACTER_OCTET_LENGTH",
                    "NUMERIC_PRECISION",
                    "NUMERIC_SCALE",
                    "DATETIME_PRECISION",
                    "CHARACTER_SET_NAME",
                    "COLLATION_NAME",
                    "COLUMN_TYPE",
                    "COLUMN_KEY",
                    "EXTRA",
                    "PRIVILEGES",
                    "COLUMN_COMMENT",
                    "GENERATION_EXPRESSION",
                    "SRS_ID",
                ],
                &[
                    "ORDINAL_POSITION",
                    "CHARACTER_MAXIMUM_LENGTH",
                    "CHARACTER_OCTET_LENGTH",
                    "NUMERIC_PRECISION",
                    "NUMERIC_SCALE",
                    "DATETIME_PRECISION",
                    "SRS_ID",
                ],
            );
            let mut rows = Vec::new();
            for t in tables_in_scope(e, scope).await? {
                for (pos, (_, cd, m)) in t.columns_visible().enumerate() {
                    let generation = t.meta.generation(&cd.name);
                    let (key, extra) = (column_key(&t, &cd.name), extra(cd, m, generation));
                    let at = ColumnAt { db: &t.db, table: &t.name, name: &cd.name, pos, nullable: cd.nullable };
                    let expr = generation.map_or("", |g| g.expr.as_str());
                    rows.push(columns_row(at, &cd.ty, m, key, &extra, expr));
                }
            }
            for v in crate::engine::view_ddl::views_in_scope(e, scope).await? {
                // A view whose tables are gone has no columns to show.
                let Ok(cols) = Box::pin(crate::engine::view_ddl::columns(e, session, &v)).await else { continue };
                for (pos, c) in cols.iter().enumerate() {
                    let at = ColumnAt { db: &v.db, table: &v.name, name: &c.name, pos, nullable: c.nullable };
                    rows.push(columns_row(at, &c.ty, &c.meta, "", "", ""));
                }
            }
            (c, rows)
        }
        "STATISTICS" => {
            let c = cols(
                &[
                    "TABLE_CATALOG",
                    "TABLE_SCHEMA",
                    "TABLE_NAME",
                    "NON_UNIQUE",
                    "INDEX_SCHEMA",
                    "INDEX_NAME",
                    "SEQ_IN_INDEX",
                    "COLUMN_NAME",
                    "COLLATION",
                    "CARDINALITY",
                    "SUB_PART",
                    "PACKED",
                    "NULLABLE",
                    "INDEX_TYPE",
                    "COMMENT",
                    "INDEX_COMMENT",
                    "IS_VISIBLE",
                    "EXPRESSION",
                ],
                &["NON_UNIQUE", "SEQ_IN_INDEX", "CARDINALITY", "SUB_PART"],
            );
            let mut rows = Vec::new();
            for t in tables_in_scope(e, scope).await? {
                for r in index_rows(&t) {
                    rows.push(vec![
                        s("def"),
                        s(&t.db),
                        s(&t.name),
                        u(r.non_unique as u64),
                        s(&t.db),
                        s(&r.index),
                        u(r.seq as u64),
                        s(&r.column),
                        s("A"),
                        u(0),
                        Value::Null,
                        Value::Null,
                        s(if r.nullable { "YES" } else { "" }),
                        s("BTREE"),
                        s(""),
                        s(""),
                        s("YES"),
                        Value::Null,
                    ]);
                }
            }
            (c, rows)
        }
        "KEY_COLUMN_USAGE" => {
            let c = cols(
                &[
                    "CONSTRAINT_CATALOG",
                    "CONSTRAINT_SCHEMA",
                    "CONSTRAINT_NAME",
                    "TABLE_CATALOG",
                    "TABLE_SCHEMA",
                    "TABLE_NAME",
                    "COLUMN_NAME",
                    "ORDINAL_POSITION",
                    "POSITION_IN_UNIQUE_CONSTRAINT",
                    "REFERENCED_TABLE_SCHEMA",
                    "REFERENCED_TABLE_NAME",
                    "REFERENCED_COLUMN_NAME",
                ],
                &["ORDINAL_POSITION", "POSITION_IN_UNIQUE_CONSTRAINT"],
            );
            let mut rows = Vec::new();
            for t in tables_in_scope(e, scope).await? {
                for ix in all_indexes(&t).iter().filter(|i| i.kind != SqlIndexKind::Index) {
                    for (k, col) in ix.columns.iter().enumerate() {
                        rows.push(vec![
                            s("def"),
                            s(&t.db),
                            s(&ix.name),
                            s("def"),
                            s(&t.db),
                            s(&t.name),
                            s(col),
                            u(k as u64 + 1),
                            Value::Null,
                            Value::Null,
                            Value::Null,
                            Value::Null,
                        ]);
                    }
                }
                for f in &t.meta.fk.foreign_keys {
                    for (k, (col, rcol)) in f.columns.iter().zip(&f.ref_columns).enumerate() {
                        rows.push(vec![
                            s("def"),
                            s(&t.db),
                            s(&f.name),
                            s("def"),
                            s(&t.db),
                            s(&t.name),
                            s(col),
                            u(k as u64 + 1),
                            u(k as u64 + 1),
                            s(&f.ref_db),
                            s(&f.ref_table),
                            s(rcol),
                        ]);
                    }
                }
            }
            (c, rows)
        }
        "TABLE_CONSTRAINTS" => {
            let c = cols(
                &[
                    "CONSTRAINT_CATALOG",
                    "CONSTRAINT_SCHEMA",
                    "CONSTRAINT_NAME",
                    "TABLE_SCHEMA",
                    "TABLE_NAME",
                    "CONSTRAINT_TYPE",
                    "ENFORCED",
                ],
                &[],
            );
            let mut rows = Vec::new();
            for t in tables_in_scope(e, scope).await? {
                for ix in all_indexes(&t).iter().filter(|i| i.kind != SqlIndexKind::Index) {
                    let ty = if ix.kind == SqlIndexKind::Primary { "PRIMARY KEY" } else { "UNIQUE" };
                    rows.push(vec![s("def"), s(&t.db), s(&ix.name), s(&t.db), s(&t.name), s(ty), s("YES")]);
                }
                for f in &t.meta.fk.foreign_keys {
                    rows.push(vec![s("def"), s(&t.db), s(&f.name), s(&t.db), s(&t.name), s("FOREIGN KEY"), s("YES")]);
                }
                for k in &t.meta.checks {
                    let enforced = if k.enforced { "YES" } else { "NO" };
                    rows.push(vec![s("def"), s(&t.db), s(&k.name), s(&t.db), s(&t.name), s("CHECK"), s(enforced)]);
                }
            }
            (c, rows)
        }
        "PARTITIONS" => {
            let c = cols(
                &[
                    "TABLE_CATALOG",
                    "TABLE_SCHEMA",
                    "TABLE_NAME",
                    "PARTITION_NAME",
                    "SUBPARTITION_NAME",
                    "PARTITION_ORDINAL_POSITION",
                    "SUBPARTITION_ORDINAL_POSITION",
                    "PARTITION_METHOD",
                    "SUBPARTITION_METHOD",
                    "PARTITION_EXPRESSION",
                    "SUBPARTITION_EXPRESSION",
                    "PARTITION_DESCRIPTION",
                    "TABLE_ROWS",
                    "PARTITION_COMMENT",
                ],
                &["PARTITION_ORDINAL_POSITION", "SUBPARTITION_ORDINAL_POSITION", "TABLE_ROWS"],
            );
            let mut rows = Vec::new();
            for t in tables_in_scope(e, scope).await? {
                let Some(p) = &t.meta.partition else {
                    rows.push(vec![
                        s("def"),
                        s(&t.db),
                        s(&t.name),
                        Value::Null,
                        Value::Null,
                        Value::Null,
                        Value::Null,
                        Value::Null,
                        Value::Null,
                        Value::Null,
                        Value::Null,
                        Value::Null,
                        u(0),
                        s(""),
                    ]);
                    continue;
                };
                let (method, expr) = match &p.kind {
                    PartitionKind::Key { columns, linear } => (
                        if *linear { "LINEAR KEY" } else { "KEY" },
                        columns.iter().map(|c| quote_ident(c)).collect::<Vec<_>>().join(","),
                    ),
                    PartitionKind::Hash { expr, linear } => {
                        (if *linear { "LINEAR HASH" } else { "HASH" }, expr.clone())
                    }
                    PartitionKind::Range { expr } => ("RANGE", expr.clone()),
                    PartitionKind::List { expr } => ("LIST", expr.clone()),
                    PartitionKind::RangeColumns { columns } => {
                        ("RANGE COLUMNS", columns.iter().map(|c| quote_ident(c)).collect::<Vec<_>>().join(","))
                    }
                    PartitionKind::ListColumns { columns } => {
                        ("LIST COLUMNS", columns.iter().map(|c| quote_ident(c)).collect::<Vec<_>>().join(","))
                    }
                };
                for i in 0..p.partition_count() {
                    let d = p.defs.get(i as usize);
                    let desc = d.map(|d| match &d.values {
                        PartitionValues::None => String::new(),
                        PartitionValues::LessThan(v) => v
                            .iter()
                            .map(|x| x.clone().unwrap_or_else(|| "MAXVALUE".into()))
                            .collect::<Vec<_>>()
                            .join(","),
                        PartitionValues::In(l) => l
                            .iter()
                            .map(|x| if x.len() == 1 { x[0].clone() } else { format!("({})", x.join(",")) })
                            .collect::<Vec<_>>()
                            .join(","),
                    });
                    rows.push(vec![
                        s("def"),
                        s(&t.db),
                        s(&t.name),
                        s(&d.map(|d| d.name.clone()).unwrap_or_else(|| format!("p{i}"))),
                        Value::Null,
                        u(i as u64 + 1),
                        Value::Null,
                        s(method),
                        Value::Null,
                        s(&expr),
                        Value::Null,
                        desc.filter(|x| !x.is_empty()).map(|x| s(&x)).unwrap_or(Value::Null),
                        u(0),
                        s(&d.map(|d| d.comment.clone()).unwrap_or_default()),
                    ]);
                }
            }
            (c, rows)
        }
        "PROCESSLIST" => {
            let c = cols(&["ID", "USER", "HOST", "DB", "COMMAND", "TIME", "STATE", "INFO"], &["ID", "TIME"]);
            (c, e.processlist_rows(session, true))
        }
        "ENGINES" => {
            let c = cols(&["ENGINE", "SUPPORT", "COMMENT", "TRANSACTIONS", "XA", "SAVEPOINTS"], &[]);
            (c, engines_rows())
        }
        "CHARACTER_SETS" => {
            let c = cols(&["CHARACTER_SET_NAME", "DEFAULT_COLLATE_NAME", "DESCRIPTION", "MAXLEN"], &["MAXLEN"]);
            (
                c,
                charset_rows()
                    .into_iter()
                    .map(|r| vec![r[0].clone(), r[2].clone(), r[1].clone(), r[3].clone()])
                    .collect(),
            )
        }
        "COLLATIONS" => {
            let c = cols(
                &[
                    "COLLATION_NAME",
                    "CHARACTER_SET_NAME",
                    "ID",
                    "IS_DEFAULT",
                    "IS_COMPILED",
                    "SORTLEN",
                    "PAD_ATTRIBUTE",
                ],
                &["ID", "SORTLEN"],
            );
            (c, collation_rows())
        }
        "REFERENTIAL_CONSTRAINTS" => (
            cols(
                &[
                    "CONSTRAINT_CATALOG",
                    "CONSTRAINT_SCHEMA",
                    "CONSTRAINT_NAME",
                    "UNIQUE_CONSTRAINT_CATALOG",
                    "UNIQUE_CONSTRAINT_SCHEMA",
                    "UNIQUE_CONSTRAINT_NAME",
                    "MATCH_OPTION",
                    "UPDATE_RULE",
                    "DELETE_RULE",
                    "TABLE_NAME",
                    "REFERENCED_TABLE_NAME",
                ],
                &[],
            ),
            {
                let mut rows = Vec::new();
                for t in tables_in_scope(e, scope).await? {
                    for f in &t.meta.fk.foreign_keys {
                        // The parent's key the constraint uses, by name, as MySQL.
                        let key = match e.catalog().try_get(&f.ref_db, &f.ref_table).await? {
                            Some(p) => match crate::engine::fk::parent_key(f, &p) {
                                Some(crate::engine::fk::ParentKey::Primary) => s("PRIMARY"),
                                Some(crate::engine::fk::ParentKey::Unique(id)) => {
                                    p.def.indexes.iter().find(|i| i.id == id).map(|i| s(&i.name)).unwrap_or(Value::Null)
                                }
                                None => Value::Null,
                            },
                            None => Value::Null,
                        };
                        rows.push(vec![
                            s("def"),
                            s(&t.db),
                            s(&f.name),
                            s("def"),
                            s(&f.ref_db),
                            key,
                            s("NONE"),
                            s(f.on_update.rule_name()),
                            s(f.on_delete.rule_name()),
                            s(&t.name),
                            s(&f.ref_table),
                        ]);
                    }
                }
                rows
            },
        ),
        "CHECK_CONSTRAINTS" => {
            let mut rows = Vec::new();
            for t in tables_in_scope(e, scope).await? {
                for k in &t.meta.checks {
                    rows.push(vec![s("def"), s(&t.db), s(&k.name), s(&k.expr)]);
                }
            }
            (cols(&["CONSTRAINT_CATALOG", "CONSTRAINT_SCHEMA", "CONSTRAINT_NAME", "CHECK_CLAUSE"], &[]), rows)
        }
        "VIEWS" => (
            cols(
                &[
                    "TABLE_CATALOG",
                    "TABLE_SCHEMA",
                    "TABLE_NAME",
                    "VIEW_DEFINITION",
                    "CHECK_OPTION",
                    "IS_UPDATABLE",
                    "DEFINER",
                    "SECURITY_TYPE",
                    "CHARACTER_SET_CLIENT",
                    "COLLATION_CONNECTION",
                ],
                &[],
            ),
            crate::engine::view_ddl::infoschema_views(e, scope).await?,
        ),
        "ROUTINES" => (
            cols(
                &[
                    "SPECIFIC_NAME",
                    "ROUTINE_CATALOG",
                    "ROUTINE_SCHEMA",
                    "ROUTINE_NAME",
                    "ROUTINE_TYPE",
                    "DATA_TYPE",
                    "ROUTINE_DEFINITION",
                ],
                &[],
            ),
            Vec::new(),
        ),
        "TRIGGERS" => (
            cols(
                &[
                    "TRIGGER_CATALOG",
                    "TRIGGER_SCHEMA",
                    "TRIGGER_NAME",
                    "EVENT_MANIPULATION",
                    "EVENT_OBJECT_SCHEMA",
                    "EVENT_OBJECT_TABLE",
                    "ACTION_STATEMENT",
                ],
                &[],
            ),
            Vec::new(),
        ),
        "EVENTS" => (cols(&["EVENT_CATALOG", "EVENT_SCHEMA", "EVENT_NAME", "DEFINER", "STATUS"], &[]), Vec::new()),
        "USER_PRIVILEGES" | "SCHEMA_PRIVILEGES" | "TABLE_PRIVILEGES" | "COLUMN_PRIVILEGES" => {
            let names: &[&str] = match up.as_str() {
                "USER_PRIVILEGES" => &["GRANTEE", "TABLE_CATALOG", "PRIVILEGE_TYPE", "IS_GRANTABLE"],
                "SCHEMA_PRIVILEGES" => &["GRANTEE", "TABLE_CATALOG", "TABLE_SCHEMA", "PRIVILEGE_TYPE", "IS_GRANTABLE"],
                "TABLE_PRIVILEGES" => {
                    &["GRANTEE", "TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "PRIVILEGE_TYPE", "IS_GRANTABLE"]
                }
                _ => &[
                    "GRANTEE",
                    "TABLE_CATALOG",
                    "TABLE_SCHEMA",
                    "TABLE_NAME",
                    "COLUMN_NAME",
                    "PRIVILEGE_TYPE",
                    "IS_GRANTABLE",
                ],
            };
            (cols(names, &[]), crate::engine::acl::views::rows(e, session, &up).await?)
        }
        _ => return Ok(None),
    };
    // A logged-in account sees only the databases and tables it has some
    // privilege on (as MySQL).
    let out = match crate::engine::acl::Visibility::of(e, session).await? {
        Some(v) => v.filter_rows(out),
        None => out,
    };
    Ok(Some(out))
}

/// One row of SHOW INDEX / STATISTICS.
pub struct IndexRow {
    pub index: String,
    pub non_unique: bool,
    pub seq: u32,
    pub column: String,
    pub nullable: bool,
}

pub fn index_rows(t: &SqlTable) -> Vec<IndexRow> {
    let mut out = Vec::new();
    for ix in all_indexes(t) {
        for (k, c) in ix.columns.iter().enumerate() {
            let nullable = t.column(c).is_some_and(|(_, cd, _)| cd.nullable);
            out.push(IndexRow {
                index: ix.name.clone(),
                non_unique: ix.kind == SqlIndexKind::Index,
                seq: k as u32 + 1,
                column: c.clone(),
                nullable,
            });
        }
    }
    out
}

pub fn engines_rows() -> Vec<Vec<Value>> {
    vec![
        vec![
            s("ndbcluster"),
            s("DEFAULT"),
            s("Clustered, fault-tolerant tables (NorrDB)"),
            s("YES"),
            s("NO"),
            s("YES"),
        ],
        vec![
            s("ndbinfo"),
            s("NO"),
            s("NorrDB cluster information storage engine"),
            Value::Null,
            Value::Null,
            Value::Null,
        ],
        vec![
            s("InnoDB"),
            s("NO"),
            s("Not available: tables are created in ndbcluster"),
            Value::Null,
            Value::Null,
            Value::Null,
        ],
    ]
}

/// Charset, Description, Default collation, Maxlen.
pub fn charset_rows() -> Vec<Vec<Value>> {
    vec![
        vec![s("binary"), s("Binary pseudo charset"), s("binary"), u(1)],
        // Accepted and stored as utf8mb4, a superset (CHARSETS.md).
        vec![s("utf8mb3"), s("UTF-8 Unicode"), s("utf8mb3_general_ci"), u(3)],
        vec![s("utf8mb4"), s("UTF-8 Unicode"), s(DEFAULT_COLLATION), u(4)],
    ]
}

/// Collation, Charset, Id, Default, Compiled, Sortlen, Pad_attribute.
/// Rows of SHOW COLLATION / information_schema.COLLATIONS.
///
/// PAD_ATTRIBUTE says what NorrDB does, not what MySQL's collation of the same
/// name does: every collation compares NO PAD (trailing spaces significant) in
/// sqld's expressions, sorting, grouping and in the data node's index keys
/// (see CHARSETS.md), so `utf8mb4_bin`, `utf8mb4_general_ci` and
/// `utf8mb4_unicode_ci`, PAD SPACE in MySQL, are reported NO PAD here.
pub fn collation_rows() -> Vec<Vec<Value>> {
    COLLATIONS
        .iter()
        .map(|c| {
            let default = if c.is_default { "Yes" } else { "" };
            vec![s(c.name), s(c.charset), u(c.id), s(default), s("Yes"), u(c.sortlen), s(NO_PAD)]
        })
        .collect()
}

/// The one pad attribute NorrDB implements (`Coll::Ci` and `Coll::Bin` both
/// compare the bytes after the last character too).
const NO_PAD: &str = "NO PAD";
