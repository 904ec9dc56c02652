//! ALTER TABLE that changes columns (ADD / DROP / MODIFY / CHANGE / RENAME
//! COLUMN, ALTER COLUMN SET / DROP DEFAULT), indexes and the table's name,
//! and RENAME TABLE. Owner: catalog engineer.
//!
//! A statement is one all-or-nothing DICT request (`Client::alter_table`):
//! the complete new definition plus, for each of its columns, where existing
//! rows take the value from (an old column, converted by the data node with
//! the checks of an insert, or a constant for an added column).
//!
//! The new definition is made the way CREATE TABLE makes one: the table's
//! SHOW CREATE TABLE text is parsed back (it round-trips, see show.rs's
//! tests), the operations are applied to that statement in order, and
//! `build_table` checks and builds the result. Each column of the draft
//! remembers the old column it came from.
//!
//! Refused (1235): changes to the primary key or to the columns the
//! partitioning reads, other than renames and changes that keep their type
//! (rows keep their partition and key encoding); AUTO_INCREMENT on an added
//! or existing column; type changes across value classes (number <-> string,
//! date <-> string, ...), which need MySQL's cast rules at the data node.
//! Generated columns whose values change are computed by the SQL node
//! around the DICT request (`alter_generated`).

use crate::engine::alter_text::{EnforcementOp, TableOptions};
use crate::engine::catalog::*;
use crate::engine::ddl::{build_table, check_engine, check_name, resolve_name, table_charset};
use crate::engine::enumset::{EnumSet, Kind as EnumKind};
use crate::engine::error_map::{self, from_client, ErrCtx};
use crate::engine::parse_ext::{parse_partition_clause, split_partition_clause};
use crate::engine::show::show_create_table;
use crate::engine::{alter_generated, check_constraints, namespace, temp_tables, Engine};
use crate::types::{QueryOutput, Session, SqlError, Warning, WarningLevel};
use norr_client::ClientError;
use norr_signals::{ColumnSource, ColumnType, Decimal, ErrorCode, TableDef, Value};
use sqlparser::ast::{
    self, AlterColumnOperation, AlterTableOperation as Op, ColumnOption, ColumnOptionDef, Expr, Ident, IndexColumn,
    MySQLColumnPosition, ObjectName, RenameTableNameKind, TableConstraint,
};
use std::sync::Arc;

/// A column of the new table and the old column it came from (None: added).
struct Col {
    def: ast::ColumnDef,
    origin: Option<String>,
}

/// The new table as the operations shape it.
struct Draft {
    table: String,
    cols: Vec<Col>,
    constraints: Vec<TableConstraint>,
    partition: Option<PartitionInfo>,
    /// Old names of the columns the primary key and the partitioning read
    /// (their type must stay, they cannot be dropped).
    key_cols: Vec<String>,
    /// Table options of the statement, in order.
    options: Vec<TableOptions>,
}

fn unsupported(what: impl Into<String>) -> SqlError {
    SqlError::unsupported(what)
}

fn same(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

fn key_columns_mut(c: &mut TableConstraint) -> Option<&mut Vec<IndexColumn>> {
    match c {
        TableConstraint::Index(ix) => Some(&mut ix.columns),
        TableConstraint::Unique(u) => Some(&mut u.columns),
        TableConstraint::PrimaryKey(p) => Some(&mut p.columns),
        _ => None,
    }
}

fn constraint_name(c: &TableConstraint) -> Option<String> {
    match c {
        TableConstraint::Index(ix) => ix.name.as_ref().map(|i| i.value.clone()),
        TableConstraint::Unique(u) => u.index_name.as_ref().or(u.name.as_ref()).map(|i| i.value.clone()),
        TableConstraint::PrimaryKey(_) => Some("PRIMARY".into()),
        _ => None,
    }
}

fn column_ident(ic: &IndexColumn) -> Option<&str> {
    match &ic.column.expr {
        Expr::Identifier(i) => Some(&i.value),
        Expr::Function(f) => f.name.0.last().and_then(|p| p.as_ident()).map(|i| i.value.as_str()),
        _ => None,
    }
}

impl Draft {
    fn find(&self, name: &str) -> Option<usize> {
        self.cols.iter().position(|c| same(&c.def.name.value, name))
    }

    fn find_or_1054(&self, name: &str) -> Result<usize, SqlError> {
        self.find(name).ok_or_else(|| error_map::unknown_column(name, &self.table))
    }

    fn is_key_col(&self, i: usize) -> bool {
        self.cols[i].origin.as_deref().is_some_and(|o| self.key_cols.iter().any(|k| same(k, o)))
    }

    /// Put `col` where `pos` says (None: at `default_at`).
    fn place(&mut self, col: Col, pos: Option<&MySQLColumnPosition>, default_at: usize) -> Result<(), SqlError> {
        let at = match pos {
            None => default_at,
            Some(MySQLColumnPosition::First) => 0,
            Some(MySQLColumnPosition::After(id)) => self.find_or_1054(&id.value)? + 1,
        };
        self.cols.insert(at.min(self.cols.len()), col);
        Ok(())
    }

    fn rename_refs(&mut self, old: &str, new: &str) {
        for c in &mut self.constraints {
            for ic in key_columns_mut(c).into_iter().flatten() {
                if column_ident(ic).is_some_and(|n| same(n, old)) {
                    ic.column.expr = Expr::Identifier(Ident::new(new));
                }
            }
        }
        if let Some(p) = &mut self.partition {
            rename_in_partition(p, old, new);
        }
    }

    /// Drop a column from every index; an index left without columns goes.
    fn drop_refs(&mut self, name: &str) {
        for c in &mut self.constraints {
            if let Some(cols) = key_columns_mut(c) {
                cols.retain(|ic| !column_ident(ic).is_some_and(|n| same(n, name)));
            }
        }
        self.constraints.retain_mut(|c| key_columns_mut(c).is_none_or(|cols| !cols.is_empty()));
    }

    fn check_inline_keys(&self, def: &ast::ColumnDef) -> Result<(), SqlError> {
        for o in &def.options {
            match &o.option {
                ColumnOption::PrimaryKey(_) => return Err(unsupported("ALTER TABLE adding a PRIMARY KEY")),
                ColumnOption::DialectSpecific(t)
                    if t.iter().any(|t| t.to_string().eq_ignore_ascii_case("AUTO_INCREMENT")) =>
                {
                    return Err(unsupported("ALTER TABLE making a column AUTO_INCREMENT"))
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// MODIFY / CHANGE: the column at `i` gets a new definition.
    fn redefine(
        &mut self,
        i: usize,
        new_name: &Ident,
        data_type: &ast::DataType,
        options: &[ColumnOption],
        pos: Option<&MySQLColumnPosition>,
    ) -> Result<(), SqlError> {
        let old_name = self.cols[i].def.name.value.clone();
        if !same(&old_name, &new_name.value) && self.find(&new_name.value).is_some() {
            return Err(error_map::dup_column(&new_name.value));
        }
        let was_ai = self.cols[i].def.options.iter().any(|o| is_auto_increment(&o.option));
        let def = ast::ColumnDef {
            name: new_name.clone(),
            data_type: data_type.clone(),
            options: options.iter().map(|o| ColumnOptionDef { name: None, option: o.clone() }).collect(),
        };
        if !was_ai {
            self.check_inline_keys(&def)?;
        } else if def.options.iter().any(|o| matches!(o.option, ColumnOption::PrimaryKey(_))) {
            return Err(unsupported("ALTER TABLE adding a PRIMARY KEY"));
        }
        let col = Col { def, origin: self.cols.remove(i).origin };
        self.place(col, pos, i)?;
        if old_name != new_name.value {
            self.rename_refs(&old_name, &new_name.value);
        }
        Ok(())
    }
}

fn is_auto_increment(o: &ColumnOption) -> bool {
    matches!(o, ColumnOption::DialectSpecific(t) if t.iter().any(|t| t.to_string().eq_ignore_ascii_case("AUTO_INCREMENT")))
}

/// Rename a column the partitioning names (column lists and expressions).
fn rename_in_partition(p: &mut PartitionInfo, old: &str, new: &str) {
    let fix = |cols: &mut Vec<String>| {
        for c in cols.iter_mut().filter(|c| same(c, old)) {
            *c = new.to_string();
        }
    };
    match &mut p.kind {
        PartitionKind::Key { columns, .. }
        | PartitionKind::RangeColumns { columns }
        | PartitionKind::ListColumns { columns } => fix(columns),
        PartitionKind::Hash { expr, .. } | PartitionKind::Range { expr } | PartitionKind::List { expr } => {
            if let Some(e) = rename_in_expr(expr, old, new) {
                *expr = e;
            }
        }
    }
}

fn rename_in_expr(expr: &str, old: &str, new: &str) -> Option<String> {
    use crate::engine::dialect::NorrMySql;
    use sqlparser::parser::Parser;
    let mut e = Parser::new(&NorrMySql).try_with_sql(expr).and_then(|mut p| p.parse_expr()).ok()?;
    let _ = ast::visit_expressions_mut(&mut e, |x| {
        if let Expr::Identifier(i) = x {
            if same(&i.value, old) {
                *i = Ident::with_quote('`', new);
            }
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    Some(e.to_string())
}

/// Can the data node convert every value of `old` to `new` with an insert's
/// checks (`coerce_value`)? Those take values of the new type's class; a
/// number, a string and a date are different classes (except DATE into
/// DATETIME / TIMESTAMP), and their casts are MySQL's, which only the SQL
/// node knows today.
fn node_converts(old: &ColumnType, new: &ColumnType) -> bool {
    use ColumnType as T;
    let numeric = |t: &T| t.int_range().is_some() || matches!(t, T::Float | T::Double | T::Decimal { .. });
    let bytes = |t: &T| {
        matches!(
            t,
            T::Char { .. } | T::Varchar { .. } | T::Text { .. } | T::Binary { .. } | T::Varbinary { .. } | T::Blob
        )
    };
    let datetime = |t: &T| matches!(t, T::DateTime | T::Timestamp);
    (numeric(old) && numeric(new))
        || (bytes(old) && bytes(new))
        || (datetime(old) && datetime(new))
        || (matches!(old, T::Date) && (datetime(new) || matches!(new, T::Date)))
        || (matches!(old, T::Time) && matches!(new, T::Time))
}

/// The value an added column gets in existing rows when it has no DEFAULT:
/// NULL if nullable, else the type's implicit default, as MySQL (0, '').
/// Dates have none in strict mode: NULL then fails the rows (1292).
fn implicit_default(ty: &ColumnType) -> Value {
    use ColumnType as T;
    match ty {
        t if t.int_range().is_some() => {
            if t.is_unsigned_int() {
                Value::UInt(0)
            } else {
                Value::Int(0)
            }
        }
        T::Float => Value::Float(0.0),
        T::Double => Value::Double(0.0),
        T::Decimal { scale, .. } => Value::Decimal(Decimal { mantissa: 0, scale: *scale }),
        T::Char { .. } | T::Varchar { .. } | T::Text { .. } | T::Binary { .. } | T::Varbinary { .. } | T::Blob => {
            Value::Bytes(Vec::new())
        }
        T::Time => Value::Time(0),
        _ => Value::Null,
    }
}

/// The time a column added with DEFAULT CURRENT_TIMESTAMP takes in the
/// rows there are, as stored: a TIMESTAMP the UTC moment, a DATETIME the
/// wall time of the session's zone (`zone`, None: UTC), as MySQL fills them.
fn now_value(ty: &ColumnType, zone: Option<&crate::engine::functions::tz::Zone>) -> Value {
    let us = crate::engine::expr::now_unix_micros() / 1_000_000 * 1_000_000;
    let mut v = crate::engine::expr::datetime::unix_micros_to_datetime(us).map_or(Value::Null, Value::DateTime);
    if let (Some(z), false) = (zone, matches!(ty, ColumnType::Timestamp)) {
        crate::engine::ts_zone::value_to_local(&mut v, z);
    }
    v
}

/// Split a conversion error of the data node, "row N: column C: detail",
/// into (C, N).
fn row_and_column(message: &str) -> (String, u64) {
    let rest = message.strip_prefix("row ").unwrap_or("");
    let (n, rest) = rest.split_once(": ").unwrap_or(("1", rest));
    let col = rest.strip_prefix("column ").and_then(|r| r.split_once(':')).map_or("?", |(c, _)| c);
    (col.to_string(), n.parse().unwrap_or(1))
}

/// A refused ALTER TABLE, as MySQL reports a row that does not convert.
fn alter_error(err: ClientError, new: &TableDef, added: &[String], db: &str, table: &str) -> SqlError {
    let ClientError::Node(e) = &err else {
        return from_client(err, &ErrCtx::table(db, table));
    };
    let (col, row) = row_and_column(&e.message);
    match e.code {
        ErrorCode::NullInNotNullColumn if added.iter().any(|a| same(a, &col)) => {
            let ty = new.columns.iter().find(|c| same(&c.name, &col)).map(|c| c.ty.clone());
            let (kind, zero) = match ty {
                Some(ColumnType::Date) => ("date", "0000-00-00"),
                _ => ("datetime", "0000-00-00 00:00:00"),
            };
            SqlError::new(1292, "22007", format!("Incorrect {kind} value: '{zero}' for column '{col}' at row {row}"))
        }
        ErrorCode::NullInNotNullColumn => SqlError::new(1138, "22004", "Invalid use of NULL value"),
        ErrorCode::ValueOutOfRange => {
            SqlError::new(1264, "22003", format!("Out of range value for column '{col}' at row {row}"))
        }
        ErrorCode::ValueTooLarge | ErrorCode::WrongValueType => {
            SqlError::new(1265, "01000", format!("Data truncated for column '{col}' at row {row}"))
        }
        ErrorCode::InvalidUtf8 => {
            SqlError::new(1366, "HY000", format!("Incorrect string value for column '{col}' at row {row}"))
        }
        ErrorCode::DuplicateUniqueKey => {
            SqlError::new(1062, "23000", format!("Duplicate entry for a unique key of '{table}' ({})", e.message))
        }
        _ => from_client(err, &ErrCtx::table(db, table)),
    }
}

/// True when the statement is only index changes and AUTO_INCREMENT = n,
/// with at most one index change: the incremental index build of
/// `ddl::alter_table` does those without copying the rows.
pub fn is_index_only(at: &ast::AlterTable) -> bool {
    let index_ops = at
        .operations
        .iter()
        .filter(|op| {
            matches!(
                op,
                Op::AddConstraint { constraint: TableConstraint::Index(_) | TableConstraint::Unique(_), .. }
                    | Op::DropIndex { .. }
            )
        })
        .count();
    index_ops <= 1
        && at.operations.iter().all(|op| {
            matches!(
                op,
                Op::AddConstraint { constraint: TableConstraint::Index(_) | TableConstraint::Unique(_), .. }
                    | Op::DropIndex { .. }
                    | Op::AutoIncrement { .. }
                    | Op::Algorithm { .. }
                    | Op::Lock { .. }
            )
        })
}

/// ALTER TABLE with any operations: one all-or-nothing change.
pub async fn alter_table(e: &Engine, s: &mut Session, at: &ast::AlterTable) -> Result<QueryOutput, SqlError> {
    let warnings = s.warnings.len();
    let mut attempt = 1;
    loop {
        match alter_table_once(e, s, at).await? {
            Some(out) => return Ok(out),
            // Another SQL node's schema change got to DICT between our read
            // of the definition and our change: make the change again from
            // the new definition, as if the two had run one after the other
            // (MySQL's metadata lock would have ordered them). Every lost
            // race means some other change went through, so this ends.
            None if attempt < MAX_SCHEMA_RACES => {
                s.warnings.truncate(warnings);
                attempt += 1;
            }
            None => return Err(schema_race_error()),
        }
    }
}

/// Times a DDL statement is made again after losing a race with another
/// schema change on the same table.
pub(crate) const MAX_SCHEMA_RACES: u32 = 16;

/// Losing `MAX_SCHEMA_RACES` races in a row: the table's definition is
/// changing faster than we can follow.
pub(crate) fn schema_race_error() -> SqlError {
    SqlError::new(1412, "HY000", "Table definition has changed, please retry transaction")
}

/// The failure of a DICT ALTER that was made from an old version.
pub(crate) fn lost_schema_race(err: &ClientError) -> bool {
    err.code() == Some(ErrorCode::SchemaVersionMismatch)
}

/// One try of ALTER TABLE from the current definition; None: another schema
/// change on the table won the race (nothing was changed).
async fn alter_table_once(e: &Engine, s: &mut Session, at: &ast::AlterTable) -> Result<Option<QueryOutput>, SqlError> {
    let (db, table) = resolve_name(s, &at.name)?;
    // Fresh from DICT: the new definition is made from the current one.
    let t = temp_tables::for_ddl(e, s, &db, &table, true).await?;
    let shown = show_create_table(&t);
    let (text, part) = split_partition_clause(&shown);
    let partition = part.map(|p| parse_partition_clause(&p)).transpose()?;
    let mut ct = match sqlparser::parser::Parser::parse_sql(&crate::engine::dialect::NorrMySql, &text) {
        Ok(mut v) if v.len() == 1 => match v.remove(0) {
            ast::Statement::CreateTable(ct) => ct,
            _ => return Err(SqlError::internal("SHOW CREATE TABLE did not parse back")),
        },
        _ => return Err(SqlError::internal(format!("SHOW CREATE TABLE did not parse back: {text}"))),
    };
    let pk_names = if t.has_declared_pk() { t.pk_names() } else { Vec::new() };
    let mut key_cols = pk_names.clone();
    if let Some(p) = &partition {
        key_cols.extend(p.columns(&pk_names));
    }
    let mut d = Draft {
        table: table.clone(),
        cols: std::mem::take(&mut ct.columns)
            .into_iter()
            .map(|c| Col { origin: Some(c.name.value.clone()), def: c })
            .collect(),
        constraints: std::mem::take(&mut ct.constraints),
        partition,
        key_cols,
        options: Vec::new(),
    };
    let mut new_name: Option<(String, String)> = None;
    let mut auto_inc: Option<u64> = None;
    for op in &at.operations {
        apply(&mut d, s, op, &mut new_name, &mut auto_inc)?;
    }
    apply_table_options(s, &mut ct, &mut d, &t.meta.collation)?;
    alter_generated::check_dependencies(d.cols.iter().map(|c| &c.def), &t)?;
    draft_checks(&mut d, &t, new_name.as_ref().map(|(_, n)| n.as_str()))?;
    if d.cols.is_empty() {
        return Err(SqlError::new(
            1090,
            "42000",
            "You can't delete all columns with ALTER TABLE; use DROP TABLE instead",
        ));
    }
    let (new_db, new_table) = new_name.clone().unwrap_or_else(|| (db.clone(), table.clone()));
    check_name(&new_table, "table")?;
    if new_db != db {
        e.catalog().db_info(&new_db).await?.ok_or_else(|| error_map::unknown_db(&new_db))?;
    }
    let renamed = new_db != db || new_table != table;
    if renamed && temp_tables::is_temporary(&t) {
        return Err(unsupported("renaming a temporary table"));
    }
    if renamed {
        namespace::refuse_view(e, &new_db, &new_table).await?;
    }
    ct.name = ObjectName::from(vec![Ident::new(new_table.clone())]);
    let added: Vec<String> = d.cols.iter().filter(|c| c.origin.is_none()).map(|c| c.def.name.value.clone()).collect();
    let origins: Vec<(String, Option<String>)> =
        d.cols.iter().map(|c| (c.def.name.value.clone(), c.origin.clone())).collect();
    ct.columns = d.cols.into_iter().map(|c| c.def).collect();
    ct.constraints = d.constraints;
    let mut def = build_table(&new_db, &t.meta.collation, &ct, d.partition, e.config().default_partitions)?;
    def.partitions = t.def.partitions;
    if temp_tables::is_temporary(&t) {
        // The hidden table keeps its hidden name (it is not renamed).
        def.name = t.def.name.clone();
    }
    if let Some(n) = auto_inc {
        set_auto_increment_start(&mut def, n);
    }
    if !t.meta.fk.is_empty() {
        if new_name.is_some() {
            return Err(unsupported("renaming a table that has or is referenced by foreign keys"));
        }
        // Who references this table is not in SHOW CREATE TABLE: keep it.
        if let Some(mut m) = SqlTableMeta::decode(&def.extra) {
            m.fk.referenced_by = t.meta.fk.referenced_by.clone();
            def.extra = m.encode();
        }
    }
    let meta = SqlTableMeta::decode(&def.extra).ok_or_else(|| SqlError::internal("new table has no SQL metadata"))?;
    // Only names new to the database need the catalog: the table's own
    // names were unique when they were given.
    let new_names: Vec<CheckConstraint> = meta
        .checks
        .iter()
        .filter(|c| new_db != db || !t.meta.checks.iter().any(|o| o.name.eq_ignore_ascii_case(&c.name)))
        .cloned()
        .collect();
    check_constraints::check_unique_in_db(e, &new_db, if new_db == db { &table } else { &new_table }, &new_names)
        .await?;
    let compute = alter_generated::to_compute(&t, &def, &meta, &origins, &d.key_cols)?;
    let sources = column_sources(&t, &def, &meta, &origins, &d.key_cols, &compute, s.time_zone.as_deref())?;
    if def.primary_key.len() != t.def.primary_key.len()
        || def.primary_key.iter().zip(&t.def.primary_key).any(|(n, o)| sources[*n as usize] != ColumnSource::Old(*o))
    {
        return Err(unsupported("ALTER TABLE changing the PRIMARY KEY"));
    }
    if !compute.is_empty() || checks_need_rows(&t, &def, &meta) {
        alter_generated::check_computable(e, s, &t, &def, &origins).await?;
    }
    e.catalog().invalidate(&db, &table);
    e.catalog().invalidate(&new_db, &new_table);
    let altered = match e.client().alter_table(&t.native_name(), def.clone(), sources, t.def.version).await {
        Ok(d) => d,
        Err(err) if lost_schema_race(&err) => return Ok(None),
        Err(err) if err.code() == Some(ErrorCode::TableExists) => return Err(error_map::table_exists(&new_table)),
        Err(err) => return Err(alter_error(err, &def, &added, &db, &table)),
    };
    let id = altered.id;
    temp_tables::store(e, s, &t, altered)?;
    if renamed && namespace::is_view(e, &new_db, &new_table).await? {
        // A view of the new name was made meanwhile (see `namespace`): the
        // table goes back to its name; the statement's other changes, made
        // in the same dictionary step, stay (the race needs a concurrent
        // CREATE VIEW of the very name this ALTER moves the table to).
        let _ = rename_to(e, &new_db, &new_table, &db, &table).await;
        return Err(error_map::table_exists(&new_table));
    }
    if let Some(n) = auto_inc.filter(|&n| n > 1) {
        e.client().bump_auto_inc(id, n - 1).await.map_err(|err| from_client(err, &ErrCtx::table(&db, &table)))?;
        e.auto_inc_cache().forget(id);
    }
    if !compute.is_empty() {
        alter_generated::recompute(e, s, &new_db, &new_table).await?;
    }
    Ok(Some(QueryOutput::ok(0)))
}

/// ALTER TABLE's table options, applied to the table's re-parsed definition
/// `ct` and the draft's columns. A new default charset / collation applies
/// to columns added later, so every character column that took the old
/// default keeps it explicitly (as in MySQL); CONVERT TO gives every
/// character column the new one. ENGINE is checked (`check_engine`) and
/// kept (every table is ndbcluster), COMMENT replaced.
fn apply_table_options(
    s: &mut Session,
    ct: &mut ast::CreateTable,
    d: &mut Draft,
    old_collation: &str,
) -> Result<(), SqlError> {
    use sqlparser::ast::{CommentDef, SqlOption};
    for o in std::mem::take(&mut d.options) {
        if let Some(e) = &o.engine {
            check_engine(s, e, &d.table, false)?;
        }
        if o.charset.is_some() || o.collate.is_some() {
            let (cs, coll) = table_charset(o.charset.as_deref(), o.collate.as_deref())?;
            for c in d.cols.iter_mut().filter(|c| is_character_type(&c.def.data_type)) {
                let declared = c
                    .def
                    .options
                    .iter()
                    .any(|x| matches!(x.option, ColumnOption::CharacterSet(_) | ColumnOption::Collation(_)));
                if o.convert {
                    c.def
                        .options
                        .retain(|x| !matches!(x.option, ColumnOption::CharacterSet(_) | ColumnOption::Collation(_)));
                } else if !declared && c.origin.is_some() {
                    c.def.options.push(ColumnOptionDef {
                        name: None,
                        option: ColumnOption::Collation(ObjectName::from(vec![Ident::new(old_collation)])),
                    });
                }
            }
            set_table_option(ct, &["DEFAULT CHARSET", "CHARSET", "CHARACTER SET", "DEFAULT CHARACTER SET"], &cs);
            set_table_option(ct, &["COLLATE", "DEFAULT COLLATE"], &coll);
        }
        if let Some(text) = o.comment {
            ct.comment = None;
            let opts = plain_options(ct);
            opts.retain(|x| {
                !matches!(x, SqlOption::Comment(_))
                    && !matches!(x, SqlOption::KeyValue { key, .. } if key.value.eq_ignore_ascii_case("COMMENT"))
            });
            opts.push(SqlOption::Comment(CommentDef::WithEq(text)));
        }
    }
    Ok(())
}

/// The table options of `ct`, as the space-separated list MySQL writes.
fn plain_options(ct: &mut ast::CreateTable) -> &mut Vec<ast::SqlOption> {
    use sqlparser::ast::CreateTableOptions as O;
    let list = match std::mem::take(&mut ct.table_options) {
        O::None => Vec::new(),
        O::With(v) | O::Options(v) | O::Plain(v) | O::TableProperties(v) => v,
    };
    ct.table_options = O::Plain(list);
    match &mut ct.table_options {
        O::Plain(v) => v,
        _ => unreachable!("just set"),
    }
}

/// Replace the table option of any of the names `keys` by `keys[0] = value`.
fn set_table_option(ct: &mut ast::CreateTable, keys: &[&str], value: &str) {
    use sqlparser::ast::SqlOption;
    let opts = plain_options(ct);
    opts.retain(
        |x| !matches!(x, SqlOption::KeyValue { key, .. } if keys.iter().any(|k| key.value.eq_ignore_ascii_case(k))),
    );
    opts.push(SqlOption::KeyValue { key: Ident::new(keys[0]), value: Expr::Identifier(Ident::new(value)) });
}

/// A type whose values have a collation (CHARSET / COLLATE apply to it).
fn is_character_type(dt: &ast::DataType) -> bool {
    use sqlparser::ast::DataType as T;
    matches!(
        dt,
        T::Char(_)
            | T::Character(_)
            | T::Varchar(_)
            | T::CharacterVarying(_)
            | T::Nvarchar(_)
            | T::Text
            | T::TinyText
            | T::MediumText
            | T::LongText
            | T::String(_)
            | T::Enum(..)
            | T::Set(_)
    )
}

/// The CHECK constraints the draft keeps: refuse one that reads a column
/// the ALTER drops or renames (3959), and give generated names the table's
/// new name (`t_chk_1` -> `u_chk_1`) when it is renamed.
fn draft_checks(d: &mut Draft, t: &SqlTable, renamed_to: Option<&str>) -> Result<(), SqlError> {
    let kept: Vec<CheckConstraint> = d
        .constraints
        .iter()
        .filter_map(|c| match c {
            TableConstraint::Check(chk) => Some(CheckConstraint {
                name: chk.name.as_ref().map(|n| n.value.clone()).unwrap_or_default(),
                expr: chk.expr.to_string(),
                enforced: true,
            }),
            _ => None,
        })
        .collect();
    let old_cols: Vec<String> = t.columns_visible().map(|(_, c, _)| c.name.clone()).collect();
    let new_cols: Vec<String> = d.cols.iter().map(|c| c.def.name.value.clone()).collect();
    check_constraints::check_dependencies(&kept, &old_cols, &new_cols)?;
    if let Some(new) = renamed_to {
        for c in d.constraints.iter_mut() {
            if let TableConstraint::Check(chk) = c {
                if let Some(n) = chk.name.as_mut() {
                    if let Some(renamed) = check_constraints::renamed_generated(&n.value, &d.table, new) {
                        n.value = renamed;
                    }
                }
            }
        }
    }
    Ok(())
}

/// Existing rows must be read and checked before the DICT request when the
/// new table enforces a constraint the old one did not, or converts a
/// column's values.
fn checks_need_rows(t: &SqlTable, new: &TableDef, meta: &SqlTableMeta) -> bool {
    let enforced = |m: &SqlTableMeta| -> Vec<(String, String)> {
        m.checks.iter().filter(|c| c.enforced).map(|c| (c.name.to_lowercase(), c.expr.clone())).collect()
    };
    let now = enforced(meta);
    if now.is_empty() {
        return false;
    }
    let was = enforced(&t.meta);
    let types_changed = new
        .columns
        .iter()
        .any(|c| t.def.columns.iter().find(|o| o.name.eq_ignore_ascii_case(&c.name)).is_none_or(|o| o.ty != c.ty));
    now.iter().any(|c| !was.contains(c)) || types_changed
}

fn set_auto_increment_start(def: &mut TableDef, n: u64) {
    if let Some(mut m) = SqlTableMeta::decode(&def.extra) {
        m.auto_increment_start = Some(n);
        def.extra = m.encode();
    }
}

/// Apply one operation to the draft.
fn apply(
    d: &mut Draft,
    s: &mut Session,
    op: &Op,
    new_name: &mut Option<(String, String)>,
    auto_inc: &mut Option<u64>,
) -> Result<(), SqlError> {
    match op {
        Op::AddColumn { if_not_exists, column_def, column_position, .. } => {
            if d.find(&column_def.name.value).is_some() {
                let e = error_map::dup_column(&column_def.name.value);
                if *if_not_exists {
                    note(s, e.code, e.message);
                    return Ok(());
                }
                return Err(e);
            }
            if column_def.options.iter().any(|o| is_auto_increment(&o.option)) {
                return Err(unsupported("ALTER TABLE adding an AUTO_INCREMENT column"));
            }
            d.check_inline_keys(column_def)?;
            let at = d.cols.len();
            d.place(Col { def: column_def.clone(), origin: None }, column_position.as_ref(), at)?;
        }
        Op::DropColumn { column_names, if_exists, .. } => {
            for name in column_names {
                let Some(i) = d.find(&name.value) else {
                    let e = SqlError::new(
                        1091,
                        "42000",
                        format!("Can't DROP '{}'; check that column/key exists", name.value),
                    );
                    if *if_exists {
                        note(s, e.code, e.message);
                        continue;
                    }
                    return Err(e);
                };
                if d.is_key_col(i) {
                    return Err(unsupported(format!(
                        "ALTER TABLE dropping column '{}' of the primary key or the partitioning",
                        name.value
                    )));
                }
                let c = d.cols.remove(i);
                d.drop_refs(&c.def.name.value);
            }
        }
        Op::ModifyColumn { col_name, data_type, options, column_position } => {
            let i = d.find_or_1054(&col_name.value)?;
            let name = d.cols[i].def.name.clone();
            d.redefine(i, &name, data_type, options, column_position.as_ref())?;
        }
        Op::ChangeColumn { old_name, new_name, data_type, options, column_position } => {
            let i = d.find_or_1054(&old_name.value)?;
            check_name(&new_name.value, "column")?;
            d.redefine(i, new_name, data_type, options, column_position.as_ref())?;
        }
        Op::RenameColumn { old_column_name, new_column_name } => {
            let i = d.find_or_1054(&old_column_name.value)?;
            check_name(&new_column_name.value, "column")?;
            let old = d.cols[i].def.name.value.clone();
            if !same(&old, &new_column_name.value) && d.find(&new_column_name.value).is_some() {
                return Err(error_map::dup_column(&new_column_name.value));
            }
            d.cols[i].def.name = new_column_name.clone();
            d.rename_refs(&old, &new_column_name.value);
        }
        Op::AlterColumn { column_name, op } => {
            let i = d.find_or_1054(&column_name.value)?;
            let opts = &mut d.cols[i].def.options;
            match op {
                AlterColumnOperation::SetDefault { value } => {
                    opts.retain(|o| !matches!(o.option, ColumnOption::Default(_)));
                    opts.push(ColumnOptionDef { name: None, option: ColumnOption::Default(value.clone()) });
                }
                AlterColumnOperation::DropDefault => {
                    opts.retain(|o| !matches!(o.option, ColumnOption::Default(_)));
                }
                other => return Err(unsupported(format!("ALTER TABLE ALTER COLUMN {other}"))),
            }
        }
        Op::AddConstraint { constraint, .. } => match constraint {
            TableConstraint::Index(_) | TableConstraint::Unique(_) | TableConstraint::Check(_) => {
                d.constraints.push(constraint.clone())
            }
            TableConstraint::PrimaryKey(_) if !d.key_cols.is_empty() => return Err(error_map::multiple_pk()),
            TableConstraint::PrimaryKey(_) => return Err(unsupported("ALTER TABLE adding a PRIMARY KEY")),
            other => return Err(unsupported(format!("ALTER TABLE ADD {other}"))),
        },
        Op::DropIndex { name } => {
            if same(&name.value, "PRIMARY") {
                return Err(unsupported("dropping the PRIMARY KEY"));
            }
            let before = d.constraints.len();
            d.constraints.retain(|c| {
                matches!(c, TableConstraint::PrimaryKey(_))
                    || !constraint_name(c).is_some_and(|n| same(&n, &name.value))
            });
            if d.constraints.len() == before {
                return Err(error_map::cant_drop_key(&name.value));
            }
        }
        Op::DropConstraint { name, if_exists, .. } => {
            // MySQL 8.0.19+: a CHECK constraint or a UNIQUE index by name.
            let before = d.constraints.len();
            d.constraints.retain(|c| match c {
                TableConstraint::Check(chk) => !chk.name.as_ref().is_some_and(|n| same(&n.value, &name.value)),
                TableConstraint::Unique(_) => !constraint_name(c).is_some_and(|n| same(&n, &name.value)),
                _ => true,
            });
            if d.constraints.len() == before {
                let e = SqlError::new(3940, "HY000", format!("Constraint '{}' does not exist.", name.value));
                if *if_exists {
                    note(s, e.code, e.message);
                } else {
                    return Err(e);
                }
            }
        }
        // Only our rewrite makes this operation (MySQL has no VALIDATE
        // CONSTRAINT): table options or a CHECK enforcement change.
        Op::ValidateConstraint { name } => {
            if let Some(o) = TableOptions::from_marker(&name.value) {
                if let Some(n) = o.auto_increment {
                    *auto_inc = Some(n);
                }
                d.options.push(o);
            } else {
                let Some((what, enforced, name)) = EnforcementOp::from_marker(&name.value) else {
                    return Err(error_map::parse_error_near("VALIDATE"));
                };
                set_check_enforcement(d, name, what, enforced)?;
            }
        }
        Op::DropPrimaryKey { .. } => return Err(unsupported("dropping the PRIMARY KEY")),
        Op::RenameTable { table_name: RenameTableNameKind::To(n) | RenameTableNameKind::As(n) } => {
            *new_name = Some(resolve_name(s, n)?);
        }
        Op::AutoIncrement { value, .. } => {
            let text = value.to_string();
            *auto_inc = Some(text.parse().map_err(|_| error_map::parse_error_near(&text))?);
        }
        Op::Algorithm { .. } | Op::Lock { .. } => {}
        other => return Err(unsupported(format!("ALTER TABLE {other}"))),
    }
    Ok(())
}

/// ALTER {CHECK | CONSTRAINT} c [NOT] ENFORCED and DROP CHECK c on the
/// draft. Turning a constraint on makes `checks_need_rows` check the
/// existing rows before the change (3819 if one violates it).
fn set_check_enforcement(d: &mut Draft, name: &str, what: EnforcementOp, enforced: bool) -> Result<(), SqlError> {
    let is_named = |c: &TableConstraint| match c {
        TableConstraint::Check(chk) => chk.name.as_ref().is_some_and(|n| same(&n.value, name)),
        _ => false,
    };
    let Some(i) = d.constraints.iter().position(is_named) else {
        // Another kind of constraint by that name: MySQL cannot alter its
        // enforcement (3941); a missing name is 3821 for the CHECK forms and
        // 3940 for ALTER CONSTRAINT.
        if what == EnforcementOp::AlterConstraint {
            if d.constraints.iter().any(|c| constraint_name(c).is_some_and(|n| same(&n, name))) {
                return Err(SqlError::new(
                    3941,
                    "HY000",
                    format!("Altering constraint enforcement is not supported for the constraint '{name}'. Enforcement state alter is not supported for the PRIMARY, UNIQUE and FOREIGN KEY type constraints."),
                ));
            }
            return Err(SqlError::new(3940, "HY000", format!("Constraint '{name}' does not exist.")));
        }
        return Err(SqlError::new(3821, "HY000", format!("Check constraint '{name}' is not found in the table.")));
    };
    match (what, &mut d.constraints[i]) {
        (EnforcementOp::DropCheck, _) => {
            d.constraints.remove(i);
        }
        (_, TableConstraint::Check(chk)) => chk.enforced = Some(enforced),
        _ => return Err(SqlError::internal("constraint kind changed")),
    }
    Ok(())
}

/// Where each column of `new` takes existing rows' values from; refuses
/// type changes the data node cannot convert or that would move rows.
/// Where each column of `new` takes existing rows' values from. `compute`:
/// generated columns the SQL node computes after the DICT request (they
/// take a placeholder, as an added column takes its default).
fn column_sources(
    t: &SqlTable,
    new: &TableDef,
    meta: &SqlTableMeta,
    origins: &[(String, Option<String>)],
    key_cols: &[String],
    compute: &[String],
    zone: Option<&crate::engine::functions::tz::Zone>,
) -> Result<Vec<ColumnSource>, SqlError> {
    let mut out = Vec::with_capacity(new.columns.len());
    for (i, c) in new.columns.iter().enumerate() {
        if c.name == HIDDEN_PK {
            let old = t.hidden_pk().ok_or_else(|| unsupported("ALTER TABLE dropping the PRIMARY KEY"))?;
            out.push(ColumnSource::Old(old));
            continue;
        }
        let origin = origins
            .iter()
            .find(|(n, _)| *n == c.name)
            .and_then(|(_, o)| o.as_deref())
            .filter(|_| !compute.iter().any(|g| same(g, &c.name)));
        let Some(origin) = origin else {
            let v = match meta.columns.get(i).map(|m| &m.default) {
                Some(SqlDefault::CurrentTimestamp { .. }) => now_value(&c.ty, zone),
                _ => match (&c.default, c.nullable) {
                    (Some(v), _) => v.clone(),
                    (None, true) => Value::Null,
                    // A NOT NULL ENUM's implicit default is its first member (MySQL).
                    (None, false) => match meta.columns.get(i).and_then(|m| EnumSet::parse_sql_type(&m.sql_type, true))
                    {
                        Some(e) if e.kind == EnumKind::Enum => {
                            e.members.first().map_or(Value::Bytes(Vec::new()), |m| Value::str(m))
                        }
                        _ => implicit_default(&c.ty),
                    },
                },
            };
            out.push(ColumnSource::Value(v));
            continue;
        };
        let (old_id, old) = t
            .def
            .columns
            .iter()
            .enumerate()
            .find(|(_, o)| o.name == origin)
            .ok_or_else(|| SqlError::internal(format!("column {origin} vanished")))?;
        // Stored ENUM / SET values are member texts: a changed member list (or
        // a change from or to another type) would need every row checked and
        // rewritten by the SQL node, which this ALTER does not do yet.
        let old_sql = t.meta.columns.get(old_id).map_or("", |m| m.sql_type.as_str());
        let new_sql = meta.columns.get(i).map_or("", |m| m.sql_type.as_str());
        let is_enum = |s: &str| s.starts_with("enum(") || s.starts_with("set(");
        if (is_enum(old_sql) || is_enum(new_sql)) && old_sql != new_sql {
            return Err(unsupported(format!("ALTER TABLE changing column '{origin}' from {old_sql} to {new_sql}")));
        }
        if old.ty != c.ty {
            if key_cols.iter().any(|k| same(k, origin)) {
                return Err(unsupported(format!(
                    "ALTER TABLE changing the type of column '{origin}' of the primary key or the partitioning"
                )));
            }
            if !node_converts(&old.ty, &c.ty) {
                let from = t.meta.columns.get(old_id).map_or("?", |m| m.sql_type.as_str());
                let to = meta.columns.get(i).map_or("?", |m| m.sql_type.as_str());
                return Err(unsupported(format!("ALTER TABLE changing column '{origin}' from {from} to {to}")));
            }
        }
        if c.auto_increment && !old.auto_increment {
            return Err(unsupported("ALTER TABLE making a column AUTO_INCREMENT"));
        }
        out.push(ColumnSource::Old(old_id as u16));
    }
    Ok(out)
}

/// RENAME TABLE a TO b [, c TO d ...], in order. A failing step undoes the
/// renames before it (MySQL's RENAME TABLE is all or nothing too).
pub async fn rename_tables(e: &Engine, s: &mut Session, pairs: &[ast::RenameTable]) -> Result<QueryOutput, SqlError> {
    let mut done: Vec<(Arc<SqlTable>, String, String)> = Vec::new();
    let mut result = Ok(());
    for p in pairs {
        match rename_one(e, s, &p.old_name, &p.new_name).await {
            Ok(step) => done.push(step),
            Err(err) => {
                result = Err(err);
                break;
            }
        }
    }
    if let Err(err) = result {
        for (old, db, table) in done.into_iter().rev() {
            // The undo renames back to a name that was free a moment ago.
            let _ = rename_to(e, &db, &table, &old.db, &old.name).await;
        }
        return Err(err);
    }
    Ok(QueryOutput::ok(0))
}

async fn rename_one(
    e: &Engine,
    s: &mut Session,
    from: &ObjectName,
    to: &ObjectName,
) -> Result<(Arc<SqlTable>, String, String), SqlError> {
    let (db, table) = resolve_name(s, from)?;
    let (new_db, new_table) = resolve_name(s, to)?;
    check_name(&new_table, "table")?;
    e.catalog().invalidate(&db, &table);
    let t = e.catalog().get(&db, &table).await?;
    if !t.meta.fk.is_empty() {
        // Constraints name their tables; following a rename is not done.
        return Err(unsupported("renaming a table that has or is referenced by foreign keys"));
    }
    if new_db != db {
        e.catalog().db_info(&new_db).await?.ok_or_else(|| error_map::unknown_db(&new_db))?;
    }
    // One namespace with views (see `namespace`: checked before and after).
    namespace::refuse_view(e, &new_db, &new_table).await?;
    rename_to(e, &db, &table, &new_db, &new_table).await?;
    if namespace::is_view(e, &new_db, &new_table).await? {
        let _ = rename_to(e, &new_db, &new_table, &db, &table).await;
        return Err(error_map::table_exists(&new_table));
    }
    Ok((t, new_db, new_table))
}

/// Rename `db.table` (same definition, new version): no row is copied.
async fn rename_to(e: &Engine, db: &str, table: &str, new_db: &str, new_table: &str) -> Result<(), SqlError> {
    for _ in 0..MAX_SCHEMA_RACES {
        e.catalog().invalidate(db, table);
        e.catalog().invalidate(new_db, new_table);
        let t = e.catalog().get(db, table).await?;
        let mut def = t.def.clone();
        def.name = native_name(new_db, new_table);
        if !t.meta.checks.is_empty() {
            let mut meta = t.meta.clone();
            check_constraints::rename_generated(&mut meta.checks, table, new_table);
            check_constraints::check_unique_in_db(e, new_db, new_table, &meta.checks).await?;
            def.extra = meta.encode();
        }
        let sources = (0..def.columns.len() as u16).map(ColumnSource::Old).collect();
        match e.client().alter_table(&t.native_name(), def, sources, t.def.version).await {
            Ok(d) => {
                e.catalog().invalidate(db, table);
                e.auto_inc_cache().carry(d.id, t.def.version, d.version);
                e.catalog().put(d);
                return Ok(());
            }
            // Renamed from a definition that changed meanwhile: rename the
            // current one (see `alter_table`).
            Err(err) if lost_schema_race(&err) => continue,
            Err(err) if err.code() == Some(ErrorCode::TableExists) => return Err(error_map::table_exists(new_table)),
            Err(err) => return Err(from_client(err, &ErrCtx::table(db, table))),
        }
    }
    Err(schema_race_error())
}

fn note(s: &mut Session, code: u16, message: String) {
    s.warnings.push(Warning { level: WarningLevel::Note, code, message });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_errors_name_the_row_and_column() {
        assert_eq!(row_and_column("row 3: column s: 5 characters exceed"), ("s".to_string(), 3));
        assert_eq!(row_and_column("garbage"), ("?".to_string(), 1));
    }

    #[test]
    fn node_conversions_stay_inside_a_value_class() {
        let int = ColumnType::Int { unsigned: false };
        let vc = ColumnType::Varchar { len: 3, collation: Default::default() };
        assert!(node_converts(&int, &ColumnType::BigInt { unsigned: true }));
        assert!(node_converts(&int, &ColumnType::Decimal { precision: 5, scale: 2 }));
        assert!(node_converts(&vc, &ColumnType::Blob));
        assert!(node_converts(&ColumnType::Date, &ColumnType::DateTime));
        assert!(!node_converts(&int, &vc));
        assert!(!node_converts(&vc, &int));
        assert!(!node_converts(&ColumnType::DateTime, &ColumnType::Date));
    }
}
