//! CREATE TABLE ... LIKE and CREATE TABLE ... [AS] SELECT: new tables made
//! from an existing table's definition or from a query's result.
//!
//! Both go through SHOW CREATE TABLE text and the ordinary CREATE TABLE path,
//! so they get every check and the same stored definition as a table
//! created by hand (ALTER TABLE works the same way, `alter.rs`).
//!
//! * LIKE copies columns, indexes, partitioning and options; not the rows,
//!   the foreign keys or the AUTO_INCREMENT counter, as MySQL.
//! * SELECT runs the query first (committed read), then creates the table and
//!   inserts the rows in one transaction; if any row fails, the table is
//!   dropped again, so the statement leaves nothing behind (MySQL 8 makes it
//!   atomic too). Columns that are plain column references keep their
//!   source column's definition (type, collation, NOT NULL, DEFAULT, COMMENT;
//!   not AUTO_INCREMENT), as MySQL does. Columns computed by expressions get
//!   a type from the result metadata; a string's length is the larger of the
//!   metadata's and the longest value, so every row fits (MySQL computes a
//!   length from the expression instead, so a type may print differently).
//!   Columns declared in the statement come first and give the type of a
//!   result column of the same name. No indexes are made unless declared.

use crate::engine::catalog::quote_ident;
use crate::engine::parse_ext::{parse_partition_clause, split_partition_clause};
use crate::engine::show::{column_definition, show_create_table};
use crate::engine::{ddl, error_map, namespace, query, txn_control, Engine};
use crate::types::{charset, column_flags as cf, ColumnMeta, FieldType, QueryOutput, Session, SqlError};
use norr_signals::Value;
use sqlparser::ast::{self, CreateTable, CreateTableLikeKind, CreateTableOptions, SqlOption};

/// Rows per INSERT statement while filling the new table.
const INSERT_BATCH_ROWS: usize = 100;

fn parse_create(text: &str) -> Result<CreateTable, SqlError> {
    match sqlparser::parser::Parser::parse_sql(&crate::engine::dialect::NorrMySql, text) {
        Ok(mut v) if v.len() == 1 => match v.remove(0) {
            ast::Statement::CreateTable(ct) => Ok(ct),
            _ => Err(SqlError::internal("generated CREATE TABLE did not parse back")),
        },
        _ => Err(SqlError::internal(format!("generated CREATE TABLE did not parse back: {text}"))),
    }
}

fn is_auto_increment_option(o: &SqlOption) -> bool {
    matches!(o, SqlOption::KeyValue { key, .. } if key.value.eq_ignore_ascii_case("AUTO_INCREMENT"))
}

/// CREATE TABLE new LIKE old.
pub async fn create_like(e: &Engine, s: &mut Session, ct: &CreateTable) -> Result<QueryOutput, SqlError> {
    let like = match &ct.like {
        Some(CreateTableLikeKind::Plain(l)) | Some(CreateTableLikeKind::Parenthesized(l)) => l,
        None => return Err(SqlError::internal("create_like without LIKE")),
    };
    let (db, table) = ddl::resolve_name(s, &like.name)?;
    if crate::engine::infoschema::is_infoschema(&db) {
        return Err(SqlError::unsupported("CREATE TABLE ... LIKE an information_schema table"));
    }
    // A temporary table may be the source (and shadows a base table).
    let src = match crate::engine::temp_tables::get(e, s, &db, &table).await {
        Ok(t) => t,
        // MySQL copies only base tables.
        Err(err) if err.code == 1146 && namespace::is_view(e, &db, &table).await? => {
            return Err(SqlError::new(1347, "HY000", format!("'{db}.{table}' is not BASE TABLE")))
        }
        Err(err) => return Err(err),
    };
    let shown = show_create_table(&src);
    let (text, part) = split_partition_clause(&shown);
    let partition = part.map(|p| parse_partition_clause(&p)).transpose()?;
    let mut new = parse_create(&text)?;
    new.name = ct.name.clone();
    new.if_not_exists = ct.if_not_exists;
    new.temporary = ct.temporary;
    // MySQL's LIKE copies no foreign keys (their indexes stay).
    new.constraints.retain(|c| !matches!(c, ast::TableConstraint::ForeignKey(_)));
    // CHECK constraints come along under generated names of the new table
    // (the source's names stay taken in the database).
    for c in new.constraints.iter_mut() {
        if let ast::TableConstraint::Check(chk) = c {
            chk.name = None;
        }
    }
    // The counter is the source's own; the new table starts at 1.
    if let CreateTableOptions::Plain(v) | CreateTableOptions::Options(v) = &mut new.table_options {
        v.retain(|o| !is_auto_increment_option(o));
    }
    Box::pin(ddl::create_table(e, s, &new, partition)).await
}

/// CREATE TABLE t [(columns, keys)] [options] [AS] SELECT ...
pub async fn create_as_select(
    e: &Engine,
    s: &mut Session,
    ct: &CreateTable,
    partition: Option<crate::engine::catalog::PartitionInfo>,
) -> Result<QueryOutput, SqlError> {
    let q = ct.query.as_ref().ok_or_else(|| SqlError::internal("create_as_select without a query"))?;
    let (db, table) = ddl::resolve_name(s, &ct.name)?;
    // A view of the name counts as a table (`namespace`); for a temporary
    // table only the session's other temporary tables do.
    let taken = if ct.temporary {
        crate::engine::temp_tables::lookup(s, &db, &table).is_some()
    } else {
        e.catalog().try_get(&db, &table).await?.is_some() || namespace::is_view(e, &db, &table).await?
    };
    if taken {
        if ct.if_not_exists {
            // MySQL 8: nothing is inserted into an existing table.
            s.warnings.push(crate::types::Warning {
                level: crate::types::WarningLevel::Note,
                code: 1050,
                message: format!("Table '{table}' already exists"),
            });
            return Ok(QueryOutput::ok(0));
        }
        return Err(error_map::table_exists(&table));
    }
    let (columns, rows) = match query::execute_query(e, s, q, &[]).await? {
        QueryOutput::Rows { columns, rows } => (columns, rows),
        QueryOutput::Ok { .. } | QueryOutput::Streamed { .. } => {
            return Err(SqlError::internal("a query gave no result set"))
        }
    };

    // The definition: declared columns first, then the result's other
    // columns, then the declared keys.
    let mut defs: Vec<ast::ColumnDef> = ct.columns.clone();
    let mut targets: Vec<String> = Vec::with_capacity(columns.len());
    let mut derived = Vec::new();
    for (i, m) in columns.iter().enumerate() {
        if targets.iter().any(|t| t.eq_ignore_ascii_case(&m.name)) {
            return Err(error_map::dup_column(&m.name));
        }
        targets.push(m.name.clone());
        if defs.iter().any(|d| d.name.value.eq_ignore_ascii_case(&m.name)) {
            continue;
        }
        derived.push(derived_column(e, s, m, &rows, i).await?);
    }
    if !derived.is_empty() {
        let text = format!("CREATE TABLE t ({})", derived.join(", "));
        defs.extend(parse_create(&text)?.columns);
    }
    let mut new = ct.clone();
    new.query = None;
    new.columns = defs;
    if !Box::pin(ddl::create_table_made(e, s, &new, partition)).await? {
        // Made by someone else since the check above (IF NOT EXISTS): as
        // then, nothing is inserted into it.
        return Ok(QueryOutput::ok(0));
    }

    // A temporary table's rows go into an open transaction (creating it
    // did not end that transaction, as in MySQL); otherwise in their own.
    let own_txn = !(ct.temporary && (s.in_transaction || s.txn.is_some()));
    // The rows go into the new base table even when the session has a
    // temporary table of the name, which would take the INSERT's name: it
    // is set aside meanwhile.
    let shadow = if ct.temporary { None } else { crate::engine::temp_tables::set_aside(s, &db, &table) };
    let r = match fill(e, s, &db, &table, &targets, rows, own_txn).await {
        Ok(n) => Ok(QueryOutput::Ok {
            affected_rows: n,
            last_insert_id: 0,
            info: format!("Records: {n}  Duplicates: 0  Warnings: {}", s.warnings.len()),
        }),
        Err(err) => {
            // Leave no half-made table: drop it, report the row's error.
            let name = ast::ObjectName::from(vec![ast::Ident::new(&db), ast::Ident::new(&table)]);
            let _ = ddl::drop_tables(e, s, &[name], true).await;
            Err(err)
        }
    };
    if let Some(t) = shadow {
        crate::engine::temp_tables::put_back(s, t);
    }
    r
}

/// Insert the query's rows into the new table in one transaction.
async fn fill(
    e: &Engine,
    s: &mut Session,
    db: &str,
    table: &str,
    targets: &[String],
    rows: Vec<Vec<Value>>,
    own_txn: bool,
) -> Result<u64, SqlError> {
    if rows.is_empty() {
        return Ok(0);
    }
    let cols = targets.iter().map(|c| quote_ident(c)).collect::<Vec<_>>().join(", ");
    let one = format!("({})", vec!["?"; targets.len()].join(", "));
    let sql_for = |n: usize| {
        format!(
            "INSERT INTO {}.{} ({cols}) VALUES {}",
            quote_ident(db),
            quote_ident(table),
            vec![one.as_str(); n].join(", ")
        )
    };
    let full = e.prepare(s, &sql_for(INSERT_BATCH_ROWS.min(rows.len()))).await?;
    if own_txn {
        txn_control::begin(s).await?;
    }
    let mut n = 0u64;
    let mut res = Ok(());
    for chunk in rows.chunks(INSERT_BATCH_ROWS) {
        let p = if chunk.len() == INSERT_BATCH_ROWS.min(rows.len()) {
            full.clone()
        } else {
            match e.prepare(s, &sql_for(chunk.len())).await {
                Ok(p) => p,
                Err(err) => {
                    res = Err(err);
                    break;
                }
            }
        };
        let params: Vec<Value> = chunk.iter().flatten().cloned().collect();
        if let Err(err) = Box::pin(e.execute_prepared_inner(s, &p, params)).await {
            res = Err(err);
            break;
        }
        n += chunk.len() as u64;
    }
    match res {
        Ok(()) if !own_txn => Ok(n),
        Ok(()) => {
            txn_control::commit(s).await?;
            Ok(n)
        }
        // The caller drops the new table, rows and all.
        Err(err) if !own_txn => Err(err),
        Err(err) => {
            let _ = txn_control::rollback(s).await;
            Err(err)
        }
    }
}

/// The column definition a result column gets in the new table.
async fn derived_column(
    e: &Engine,
    s: &Session,
    m: &ColumnMeta,
    rows: &[Vec<Value>],
    i: usize,
) -> Result<String, SqlError> {
    // A plain column reference keeps its source column's definition.
    if !m.org_table.is_empty() && !m.org_name.is_empty() && !m.schema.is_empty() {
        let src = match crate::engine::temp_tables::lookup(s, &m.schema, &m.org_table) {
            Some(t) => Some(t),
            None => e.catalog().try_get(&m.schema, &m.org_table).await.ok().flatten(),
        };
        if let Some(t) = src {
            if let Some((_, c, meta)) = t.columns_visible().find(|(_, c, _)| c.name.eq_ignore_ascii_case(&m.org_name)) {
                let mut line = column_definition(&t, c, meta, true);
                // The optional side of an outer join gives NULLs for a NOT
                // NULL column (its result column says so).
                if m.flags & cf::NOT_NULL == 0 || rows.iter().any(|r| r[i].is_null()) {
                    line = line.replacen(" NOT NULL", "", 1);
                }
                let rest = line.strip_prefix(&quote_ident(&c.name)).unwrap_or(&line);
                return Ok(format!("{}{rest}", quote_ident(&m.name)));
            }
        }
    }
    let ty = expression_type(m, rows.iter().map(|r| &r[i]));
    // A NOT NULL computed column gets its type's implicit default, as
    // MySQL's SHOW CREATE TABLE prints it (`int NOT NULL DEFAULT '0'`);
    // temporal, JSON and BLOB/TEXT columns have none.
    let null = match m.field_type {
        _ if m.flags & cf::NOT_NULL == 0 => "",
        FieldType::Tiny
        | FieldType::Short
        | FieldType::Int24
        | FieldType::Long
        | FieldType::LongLong
        | FieldType::Float
        | FieldType::Double
        | FieldType::NewDecimal => " NOT NULL DEFAULT '0'",
        _ if ty.starts_with("varchar")
            || ty.starts_with("char")
            || ty.starts_with("varbinary")
            || ty.starts_with("binary") =>
        {
            " NOT NULL DEFAULT ''"
        }
        _ => " NOT NULL",
    };
    Ok(format!("{} {ty}{null}", quote_ident(&m.name)))
}

/// A type for a computed result column from its metadata, widened so that
/// every value of `values` fits.
fn expression_type<'a>(m: &ColumnMeta, values: impl Iterator<Item = &'a Value>) -> String {
    let unsigned = if m.flags & cf::UNSIGNED != 0 { " unsigned" } else { "" };
    let binary = m.charset == charset::BINARY;
    let fsp = |d: u8| if d > 0 && d <= 6 { format!("({d})") } else { String::new() };
    match m.field_type {
        FieldType::Tiny => format!("tinyint{unsigned}"),
        FieldType::Short => format!("smallint{unsigned}"),
        FieldType::Int24 => format!("mediumint{unsigned}"),
        FieldType::Long => format!("int{unsigned}"),
        FieldType::LongLong => format!("bigint{unsigned}"),
        FieldType::Float => "float".into(),
        FieldType::Double => "double".into(),
        FieldType::Null => "binary(0)".into(),
        FieldType::Json => "json".into(),
        // BIT's display length is its width in bits.
        FieldType::Bit => format!("bit({})", m.column_length.clamp(1, 64)),
        FieldType::Date => "date".into(),
        FieldType::Year => "year".into(),
        FieldType::Time => format!("time{}", fsp(m.decimals)),
        FieldType::DateTime => format!("datetime{}", fsp(m.decimals)),
        FieldType::Timestamp => format!("timestamp{}", fsp(m.decimals)),
        FieldType::NewDecimal => {
            let scale = (m.decimals as u32).min(30);
            debug_assert!(scale <= 38);
            let sign = if unsigned.is_empty() { 1 } else { 0 };
            let point = if scale > 0 { 1 } else { 0 };
            let from_meta = m.column_length.saturating_sub(sign + point);
            let int_digits = values
                .filter_map(crate::engine::expr::value::to_string_lossy)
                .map(|t| t.trim_start_matches('-').split('.').next().map_or(0, |i| i.len()) as u32)
                .max()
                .unwrap_or(0);
            // 38 digits is the most a DECIMAL holds here (README, Limits).
            let precision = from_meta.max(int_digits + scale).clamp(scale.max(1), 38);
            format!("decimal({precision},{scale}){unsigned}")
        }
        FieldType::VarChar
        | FieldType::VarString
        | FieldType::String
        | FieldType::TinyBlob
        | FieldType::Blob
        | FieldType::MediumBlob
        | FieldType::LongBlob => {
            let per_char = if binary { 1 } else { 4 };
            let longest = values
                .filter_map(crate::engine::expr::value::to_text)
                .map(|t| if binary { t.len() } else { String::from_utf8_lossy(&t).chars().count() })
                .max()
                .unwrap_or(0) as u64;
            let is_blob = matches!(
                m.field_type,
                FieldType::TinyBlob | FieldType::Blob | FieldType::MediumBlob | FieldType::LongBlob
            );
            let len = (m.column_length as u64 / per_char).max(longest).max(1);
            // VARCHAR holds at most 65,535 bytes; past that, a TEXT type.
            if is_blob || len * per_char > 65_535 {
                let bytes = len * per_char;
                let (t, b) = match bytes {
                    0..=255 => ("tinytext", "tinyblob"),
                    256..=65_535 => ("text", "blob"),
                    65_536..=16_777_215 => ("mediumtext", "mediumblob"),
                    _ => ("longtext", "longblob"),
                };
                (if binary { b } else { t }).to_string()
            } else if m.field_type == FieldType::String && len <= 255 {
                format!("{}({len})", if binary { "binary" } else { "char" })
            } else {
                format!("{}({len})", if binary { "varbinary" } else { "varchar" })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(ft: FieldType, len: u32, decimals: u8, flags: u16, cs: u16) -> ColumnMeta {
        let mut m = ColumnMeta::expr("x", ft);
        m.column_length = len;
        m.decimals = decimals;
        m.flags = flags;
        m.charset = cs;
        m
    }

    #[test]
    fn expression_types_fit_their_values() {
        let none: Vec<Value> = vec![];
        assert_eq!(
            expression_type(&meta(FieldType::LongLong, 21, 0, cf::UNSIGNED, 63), none.iter()),
            "bigint unsigned"
        );
        assert_eq!(expression_type(&meta(FieldType::Null, 0, 0, 0, 63), none.iter()), "binary(0)");
        // A string expression without a length takes the longest value's.
        let v = [Value::str("abc"), Value::str("åäöü"), Value::Null];
        assert_eq!(expression_type(&meta(FieldType::VarString, 0, 0, 0, 255), v.iter()), "varchar(4)");
        assert_eq!(expression_type(&meta(FieldType::VarString, 40, 0, 0, 255), v.iter()), "varchar(10)");
        assert_eq!(expression_type(&meta(FieldType::VarString, 0, 0, 0, 63), v.iter()), "varbinary(8)");
        assert_eq!(expression_type(&meta(FieldType::String, 8, 0, 0, 255), v.iter()), "char(4)");
        let long = [Value::str(&"x".repeat(20_000))];
        assert_eq!(expression_type(&meta(FieldType::VarString, 0, 0, 0, 255), long.iter()), "mediumtext");
        // DECIMAL: precision from the metadata, widened by the values.
        assert_eq!(expression_type(&meta(FieldType::NewDecimal, 7, 2, 0, 63), none.iter()), "decimal(5,2)");
        let big = [Value::str("-123456789.5")];
        assert_eq!(expression_type(&meta(FieldType::NewDecimal, 0, 1, 0, 63), big.iter()), "decimal(10,1)");
        assert_eq!(expression_type(&meta(FieldType::DateTime, 19, 3, 0, 63), none.iter()), "datetime(3)");
    }
}
