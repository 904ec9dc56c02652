//! SQL metadata on top of the native dictionary. Owner: catalog engineer.
//!
//! A SQL table `db.t` is the native table `"db/t"`. Everything SQL needs that
//! the native `TableDef` does not hold (original type names, DEFAULT
//! expressions, ON UPDATE, comments, index names and kinds, partitioning) is a
//! `SqlTableMeta`, postcard-encoded in `TableDef::extra`.
//!
//! For the query engineer:
//! * `engine.catalog().get(db, table).await -> Arc<SqlTable>`; after a
//!   `SchemaVersionMismatch` / `NoSuchTable` from the node call
//!   `catalog.invalidate(db, table)` and retry once.
//! * `SqlTable::columns_visible()` are the columns of `SELECT *`; a table
//!   created without a PRIMARY KEY has a hidden last column `$PK`
//!   (BIGINT UNSIGNED AUTO_INCREMENT, the native primary key): INSERT must fill
//!   it with `client.next_auto_inc(table.def.id, n)`, and it is never shown.
//! * `SqlColumnMeta::default` tells how to fill a column an INSERT omits:
//!   `Literal` values are also in the native `ColumnDef::default` (the node fills
//!   them), `CurrentTimestamp` must be evaluated by the SQL layer (now(), with
//!   `fsp` digits); `on_update_now` columns get now() on every UPDATE that does
//!   not set them.
//! * `PartitionInfo` (RANGE/LIST/HASH/... ) for tables with
//!   `PartitionScheme::User`: partition definitions in order; partition id =
//!   index of the definition (HASH: `expr mod count`).
//! * Databases live in the native table `norr_sys/schemata`.

use crate::engine::enumset::{EnumSet, Kind as EnumKind};
use crate::engine::error_map::{self, from_client, ErrCtx};
use crate::types::{charset, column_flags as cf, ColumnMeta, FieldType, SqlError};
use norr_client::{Client, ClientError};
use norr_signals::{
    Collation, ColumnDef, ColumnId, ColumnType, ErrorCode, ExecType, KeyOp, PartitionScheme, ScanSpec, TableDef, Value,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// Version of the `SqlTableMeta` encoding in `TableDef::extra`:
///
/// ```text
/// format 1: [1][postcard SqlTableMeta]
/// format 2: [2][postcard SqlTableMeta][postcard FkMeta]
/// format 3: [3][postcard SqlTableMeta][postcard FkMeta][postcard Vec<GeneratedColumn>]
/// format 4: [4][postcard SqlTableMeta][postcard FkMeta][postcard Vec<GeneratedColumn>]
///           [postcard Vec<CheckConstraint>]
/// ```
///
/// Format 3 is written only for tables with generated columns and format 4
/// only for tables with CHECK constraints, so every other table stays
/// readable by a binary that knows fewer formats. All four are read. The
/// bytes sit inside the dictionary's own checksummed file and wire frames, so
/// they carry no checksum of their own.
pub const META_FORMAT: u8 = 2;
/// The format written before foreign keys existed.
const META_FORMAT_V1: u8 = 1;
/// The format of a table with generated columns (see `META_FORMAT`).
pub const META_FORMAT_GENERATED: u8 = 3;
/// The format of a table with CHECK constraints (see `META_FORMAT`).
pub const META_FORMAT_CHECKS: u8 = 4;
/// Native name of the databases table.
pub const SCHEMATA_TABLE: &str = "norr_sys/schemata";
/// Name of the hidden primary-key column of a table without a PRIMARY KEY.
pub const HIDDEN_PK: &str = "$PK";
/// The default collation (and the only case-insensitive one).
pub const DEFAULT_COLLATION: &str = "utf8mb4_0900_ai_ci";
pub const DEFAULT_CHARSET: &str = "utf8mb4";
/// Databases that exist without being in `norr_sys/schemata`.
pub const VIRTUAL_DBS: &[&str] = &["information_schema"];

/// How a column gets a value an INSERT does not give.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SqlDefault {
    /// No DEFAULT clause: NULL if nullable, else error 1364 (strict mode).
    None,
    /// DEFAULT NULL.
    Null,
    /// A constant; `sql` is the text SHOW CREATE TABLE prints (e.g. `'abc'`, `'0'`).
    /// The coerced value is also the native `ColumnDef::default`.
    Literal { sql: String },
    /// DEFAULT CURRENT_TIMESTAMP[(fsp)] / NOW() for DATETIME and TIMESTAMP.
    CurrentTimestamp { fsp: u8 },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SqlColumnMeta {
    /// Type as SHOW CREATE TABLE prints it: `int`, `int unsigned`, `tinyint(1)`,
    /// `varchar(20)`, `decimal(10,2)`, `mediumtext`, `datetime(3)`, ...
    pub sql_type: String,
    /// Fractional seconds digits of TIME / DATETIME / TIMESTAMP (0..=6).
    pub fsp: u8,
    pub default: SqlDefault,
    /// ON UPDATE CURRENT_TIMESTAMP.
    pub on_update_now: bool,
    pub comment: String,
    /// Collation name of a character column (`utf8mb4_bin`, ...), None otherwise.
    pub collation: Option<String>,
    /// The hidden `$PK` column.
    pub hidden: bool,
}

/// A generated column: `col type [GENERATED ALWAYS] AS (expr) [VIRTUAL | STORED]`.
/// VIRTUAL ones are stored too (computed on write, see `generated`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GeneratedColumn {
    /// The column's name, as in `TableDef::columns`.
    pub column: String,
    /// The expression in canonical form (`` (`a` + `b`) ``): what
    /// information_schema.COLUMNS.GENERATION_EXPRESSION shows.
    pub expr: String,
    /// STORED as declared (else VIRTUAL).
    pub stored: bool,
}

/// A CHECK constraint (MySQL 8.0.16+), table- or column-level alike.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckConstraint {
    /// Unique in the database (case-insensitively); `<table>_chk_<n>` when
    /// the definition gave none.
    pub name: String,
    /// The condition in canonical form (`` (`a` > 0) ``), as
    /// information_schema.CHECK_CONSTRAINTS.CHECK_CLAUSE shows it.
    pub expr: String,
    /// False for NOT ENFORCED: kept and shown, never evaluated.
    pub enforced: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SqlIndexKind {
    Primary,
    Unique,
    Index,
}

/// An index as declared in SQL. `Primary` is the native primary key (no native
/// index); the others are native ordered indexes of the same name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SqlIndexMeta {
    pub name: String,
    pub kind: SqlIndexKind,
    pub columns: Vec<String>,
    pub comment: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum PartitionKind {
    /// Native `PartitionScheme::Key`; empty columns = the primary key.
    Key {
        columns: Vec<String>,
        linear: bool,
    },
    /// `PartitionScheme::User`: partition = expr MOD count (LINEAR: power-of-two variant).
    Hash {
        expr: String,
        linear: bool,
    },
    Range {
        expr: String,
    },
    List {
        expr: String,
    },
    RangeColumns {
        columns: Vec<String>,
    },
    ListColumns {
        columns: Vec<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum PartitionValues {
    /// KEY / HASH partitions.
    None,
    /// VALUES LESS THAN (v, ...): SQL text per column, None = MAXVALUE.
    LessThan(Vec<Option<String>>),
    /// VALUES IN (...): one entry per listed value; each entry has one text per
    /// column (one for LIST(expr)).
    In(Vec<Vec<String>>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartitionDef {
    pub name: String,
    pub values: PartitionValues,
    pub comment: String,
}

impl PartitionDef {
    /// The values as literals (None where a value is MAXVALUE or not a plain
    /// literal). LessThan gives one row; In gives one row per listed value.
    pub fn literal_values(&self) -> Vec<Vec<Option<Value>>> {
        match &self.values {
            PartitionValues::None => Vec::new(),
            PartitionValues::LessThan(v) => {
                vec![v.iter().map(|t| t.as_deref().and_then(crate::engine::parse_ext::literal_value)).collect()]
            }
            PartitionValues::In(lists) => {
                lists.iter().map(|l| l.iter().map(|t| crate::engine::parse_ext::literal_value(t)).collect()).collect()
            }
        }
    }
}

/// The `PARTITION BY` clause of a table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartitionInfo {
    pub kind: PartitionKind,
    /// `PARTITIONS n`, if given.
    pub count: Option<u32>,
    /// Partition definitions in order (required for RANGE / LIST).
    pub defs: Vec<PartitionDef>,
}

impl PartitionInfo {
    /// Number of partitions of the table.
    pub fn partition_count(&self) -> u32 {
        if self.defs.is_empty() {
            self.count.unwrap_or(1)
        } else {
            self.defs.len() as u32
        }
    }

    /// True for the native KEY scheme (the node computes partitions).
    pub fn is_native_key(&self) -> bool {
        matches!(self.kind, PartitionKind::Key { .. })
    }

    pub fn validate(&self) -> Result<(), SqlError> {
        let needs_defs = matches!(
            self.kind,
            PartitionKind::Range { .. }
                | PartitionKind::List { .. }
                | PartitionKind::RangeColumns { .. }
                | PartitionKind::ListColumns { .. }
        );
        if needs_defs && self.defs.is_empty() {
            let what = if matches!(self.kind, PartitionKind::Range { .. } | PartitionKind::RangeColumns { .. }) {
                "RANGE"
            } else {
                "LIST"
            };
            return Err(SqlError::new(1492, "HY000", format!("For {what} partitions each partition must be defined")));
        }
        if let (Some(n), false) = (self.count, self.defs.is_empty()) {
            if n as usize != self.defs.len() {
                return Err(SqlError::new(
                    1064,
                    "42000",
                    "Wrong number of partitions defined, mismatch with previous setting",
                ));
            }
        }
        if self.partition_count() > norr_signals::MAX_PARTITIONS {
            return Err(SqlError::new(1499, "HY000", "Too many partitions (including subpartitions) were defined"));
        }
        let mut names: Vec<String> = Vec::new();
        for d in &self.defs {
            let l = d.name.to_lowercase();
            if names.contains(&l) {
                return Err(SqlError::new(1517, "HY000", "Duplicate partition name ".to_string() + &d.name));
            }
            names.push(l);
            let ncols = match &self.kind {
                PartitionKind::RangeColumns { columns } | PartitionKind::ListColumns { columns } => columns.len(),
                _ => 1,
            };
            let ok = match &d.values {
                PartitionValues::None => false,
                PartitionValues::LessThan(v) => v.len() == ncols,
                PartitionValues::In(l) => l.iter().all(|x| x.len() == ncols),
            };
            if !ok {
                return Err(SqlError::new(1653, "HY000", "Inconsistency in usage of column lists for partitioning"));
            }
        }
        if matches!(self.kind, PartitionKind::Range { .. } | PartitionKind::RangeColumns { .. }) {
            // VALUES LESS THAN must be strictly increasing (literal values only).
            let mut prev: Option<Vec<Option<Value>>> = None;
            for d in &self.defs {
                let cur = d.literal_values().into_iter().next().unwrap_or_default();
                if let Some(p) = &prev {
                    if !strictly_increasing(p, &cur) {
                        return Err(SqlError::new(
                            1493,
                            "HY000",
                            "VALUES LESS THAN value must be strictly increasing for each partition",
                        ));
                    }
                }
                prev = Some(cur);
            }
        }
        Ok(())
    }

    /// Column names the partitioning function reads. `pk` is the primary key
    /// (for `KEY()` with no columns).
    pub fn columns(&self, pk: &[String]) -> Vec<String> {
        match &self.kind {
            PartitionKind::Key { columns, .. } if columns.is_empty() => pk.to_vec(),
            PartitionKind::Key { columns, .. }
            | PartitionKind::RangeColumns { columns }
            | PartitionKind::ListColumns { columns } => columns.clone(),
            PartitionKind::Hash { expr, .. } | PartitionKind::Range { expr } | PartitionKind::List { expr } => {
                expr_columns(expr)
            }
        }
    }

    /// The clause as SHOW CREATE TABLE prints it (re-parses to the same info).
    pub fn to_sql(&self) -> String {
        let q = |cols: &[String]| cols.iter().map(|c| quote_ident(c)).collect::<Vec<_>>().join(",");
        let mut s = match &self.kind {
            PartitionKind::Key { columns, linear } => {
                format!("PARTITION BY {}KEY ({})", if *linear { "LINEAR " } else { "" }, q(columns))
            }
            PartitionKind::Hash { expr, linear } => {
                format!("PARTITION BY {}HASH ({expr})", if *linear { "LINEAR " } else { "" })
            }
            PartitionKind::Range { expr } => format!("PARTITION BY RANGE ({expr})"),
            PartitionKind::List { expr } => format!("PARTITION BY LIST ({expr})"),
            PartitionKind::RangeColumns { columns } => {
                format!("PARTITION BY RANGE  COLUMNS({})", q(columns))
            }
            PartitionKind::ListColumns { columns } => {
                format!("PARTITION BY LIST  COLUMNS({})", q(columns))
            }
        };
        if self.defs.is_empty() {
            if let Some(n) = self.count {
                s.push_str(&format!("\nPARTITIONS {n}"));
            }
            return s;
        }
        s.push_str("\n(");
        let parts: Vec<String> = self
            .defs
            .iter()
            .map(|d| {
                let mut p = format!("PARTITION {}", quote_ident(&d.name));
                match &d.values {
                    PartitionValues::None => {}
                    PartitionValues::LessThan(v) => {
                        let vals: Vec<String> =
                            v.iter().map(|x| x.clone().unwrap_or_else(|| "MAXVALUE".to_string())).collect();
                        if v.len() == 1 && v[0].is_none() && !matches!(self.kind, PartitionKind::RangeColumns { .. }) {
                            p.push_str(" VALUES LESS THAN MAXVALUE");
                        } else {
                            p.push_str(&format!(" VALUES LESS THAN ({})", vals.join(",")));
                        }
                    }
                    PartitionValues::In(lists) => {
                        let items: Vec<String> = lists
                            .iter()
                            .map(|l| if l.len() == 1 { l[0].clone() } else { format!("({})", l.join(",")) })
                            .collect();
                        p.push_str(&format!(" VALUES IN ({})", items.join(",")));
                    }
                }
                if !d.comment.is_empty() {
                    p.push_str(&format!(" COMMENT = {}", quote_string(&d.comment)));
                }
                p.push_str(" ENGINE = ndbcluster");
                p
            })
            .collect();
        s.push_str(&parts.join(",\n "));
        s.push(')');
        s
    }
}

fn strictly_increasing(a: &[Option<Value>], b: &[Option<Value>]) -> bool {
    for (x, y) in a.iter().zip(b) {
        match (x, y) {
            (None, None) => continue,
            (None, Some(_)) => return false,
            (Some(_), None) => return true,
            (Some(x), Some(y)) => match cmp_literal(x, y) {
                Some(std::cmp::Ordering::Less) => return true,
                Some(std::cmp::Ordering::Greater) => return false,
                Some(std::cmp::Ordering::Equal) => continue,
                None => return true, // not comparable here: let it pass
            },
        }
    }
    false
}

fn cmp_literal(a: &Value, b: &Value) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Value::Bytes(x), Value::Bytes(y)) => Some(x.cmp(y)),
        _ => {
            let f = |v: &Value| match v {
                Value::Int(i) => Some(*i as f64),
                Value::UInt(u) => Some(*u as f64),
                Value::Double(d) => Some(*d),
                Value::Decimal(d) => Some(d.mantissa as f64 / 10f64.powi(d.scale as i32)),
                _ => None,
            };
            f(a)?.partial_cmp(&f(b)?)
        }
    }
}

/// Identifiers an expression reads (lower-cased is not applied; as written).
pub fn expr_columns(expr: &str) -> Vec<String> {
    use crate::engine::dialect::NorrMySql;
    use sqlparser::ast::{visit_expressions, Expr};
    use sqlparser::parser::Parser;
    let mut out: Vec<String> = Vec::new();
    let Ok(e) = Parser::new(&NorrMySql).try_with_sql(expr).and_then(|mut p| p.parse_expr()) else {
        return out;
    };
    let _ = visit_expressions(&e, |x| {
        match x {
            Expr::Identifier(i) => out.push(i.value.clone()),
            Expr::CompoundIdentifier(v) => {
                if let Some(i) = v.last() {
                    out.push(i.value.clone())
                }
            }
            _ => {}
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    out.dedup();
    out
}

/// Everything SQL keeps about a table beyond the native definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SqlTableMeta {
    pub format: u8,
    /// Parallel to `TableDef::columns`.
    pub columns: Vec<SqlColumnMeta>,
    /// Declared indexes in declaration order, PRIMARY first if any.
    pub indexes: Vec<SqlIndexMeta>,
    pub partition: Option<PartitionInfo>,
    pub engine: String,
    pub charset: String,
    pub collation: String,
    pub comment: String,
    /// `AUTO_INCREMENT = n` table option (first value handed out).
    pub auto_increment_start: Option<u64>,
    /// Foreign keys (encoded after the fields above, see `META_FORMAT`).
    #[serde(skip)]
    pub fk: crate::engine::fk::FkMeta,
    /// Generated columns in column order (encoded after the foreign keys,
    /// format 3 only, see `META_FORMAT`).
    #[serde(skip)]
    pub generated: Vec<GeneratedColumn>,
    /// CHECK constraints, sorted by name as SHOW CREATE TABLE lists them
    /// (encoded after the generated columns, format 4 only).
    #[serde(skip)]
    pub checks: Vec<CheckConstraint>,
}

impl SqlTableMeta {
    pub fn encode(&self) -> Vec<u8> {
        let format = if !self.checks.is_empty() {
            META_FORMAT_CHECKS
        } else if !self.generated.is_empty() {
            META_FORMAT_GENERATED
        } else {
            META_FORMAT
        };
        let mut v = vec![format];
        v.extend(postcard::to_allocvec(self).expect("meta encodes"));
        v.extend(postcard::to_allocvec(&self.fk).expect("foreign keys encode"));
        if format >= META_FORMAT_GENERATED {
            v.extend(postcard::to_allocvec(&self.generated).expect("generated columns encode"));
        }
        if format == META_FORMAT_CHECKS {
            v.extend(postcard::to_allocvec(&self.checks).expect("check constraints encode"));
        }
        v
    }
    pub fn decode(b: &[u8]) -> Option<SqlTableMeta> {
        match b.split_first() {
            Some((&META_FORMAT_V1, rest)) => postcard::from_bytes(rest).ok(),
            Some((&META_FORMAT, rest)) => {
                let (mut m, fk_bytes): (SqlTableMeta, &[u8]) = postcard::take_from_bytes(rest).ok()?;
                m.fk = postcard::from_bytes(fk_bytes).ok()?;
                Some(m)
            }
            Some((&META_FORMAT_GENERATED, rest)) => {
                let (mut m, rest): (SqlTableMeta, &[u8]) = postcard::take_from_bytes(rest).ok()?;
                let (fk, gen_bytes) = postcard::take_from_bytes(rest).ok()?;
                m.fk = fk;
                m.generated = postcard::from_bytes(gen_bytes).ok()?;
                Some(m)
            }
            Some((&META_FORMAT_CHECKS, rest)) => {
                let (mut m, rest): (SqlTableMeta, &[u8]) = postcard::take_from_bytes(rest).ok()?;
                let (fk, rest) = postcard::take_from_bytes(rest).ok()?;
                let (generated, check_bytes) = postcard::take_from_bytes(rest).ok()?;
                m.fk = fk;
                m.generated = generated;
                m.checks = postcard::from_bytes(check_bytes).ok()?;
                Some(m)
            }
            _ => None,
        }
    }

    /// The generated column named `name`, if it is one.
    pub fn generation(&self, name: &str) -> Option<&GeneratedColumn> {
        self.generated.iter().find(|g| g.column.eq_ignore_ascii_case(name))
    }
    /// Metadata for a table created through the native API (no `extra`).
    pub fn for_native(def: &TableDef) -> SqlTableMeta {
        SqlTableMeta {
            format: META_FORMAT,
            columns: def
                .columns
                .iter()
                .map(|c| SqlColumnMeta {
                    sql_type: native_type_sql(&c.ty),
                    fsp: 0,
                    default: if c.default.is_some() {
                        SqlDefault::Literal { sql: c.default.as_ref().map(literal_sql).unwrap_or_default() }
                    } else {
                        SqlDefault::None
                    },
                    on_update_now: false,
                    comment: String::new(),
                    collation: c.ty.is_text().then(|| collation_name(c.ty.collation()).to_string()),
                    hidden: false,
                })
                .collect(),
            indexes: std::iter::once(SqlIndexMeta {
                name: "PRIMARY".into(),
                kind: SqlIndexKind::Primary,
                columns: def.primary_key.iter().map(|&i| def.columns[i as usize].name.clone()).collect(),
                comment: String::new(),
            })
            .chain(def.indexes.iter().filter(|ix| !is_pk_ordered_index(ix)).map(|ix| SqlIndexMeta {
                name: ix.name.clone(),
                kind: if ix.unique { SqlIndexKind::Unique } else { SqlIndexKind::Index },
                columns: ix.columns.iter().map(|&i| def.columns[i as usize].name.clone()).collect(),
                comment: String::new(),
            }))
            .collect(),
            partition: None,
            engine: "ndbcluster".into(),
            charset: DEFAULT_CHARSET.into(),
            collation: DEFAULT_COLLATION.into(),
            comment: String::new(),
            auto_increment_start: None,
            fk: Default::default(),
            generated: Vec::new(),
            checks: Vec::new(),
        }
    }
}

/// The ordered index on the primary key the data node gives every table: an
/// access path for key ranges, shown to SQL as the PRIMARY key only.
pub fn is_pk_ordered_index(ix: &norr_signals::IndexDef) -> bool {
    ix.name.eq_ignore_ascii_case(norr_signals::schema::PK_ORDERED_INDEX)
}

/// The member lists of a table's ENUM / SET columns, parallel to its columns.
pub fn enum_lists(def: &TableDef, meta: &SqlTableMeta) -> Vec<Option<Arc<EnumSet>>> {
    def.columns
        .iter()
        .zip(&meta.columns)
        .map(|(c, m)| {
            let ci = c.ty.is_text() && c.ty.collation() == Collation::CaseInsensitive;
            EnumSet::parse_sql_type(&m.sql_type, ci).map(Arc::new)
        })
        .collect()
}

/// A resolved SQL table.
#[derive(Debug, Clone)]
pub struct SqlTable {
    pub db: String,
    pub name: String,
    pub def: TableDef,
    pub meta: SqlTableMeta,
    /// Parallel to `def.columns`: the member list of each ENUM / SET column,
    /// parsed once from its `sql_type` (see `enumset`).
    pub enums: Vec<Option<Arc<EnumSet>>>,
    /// Parallel to `def.columns`: true for JSON columns (`sql_type` "json").
    pub json: Vec<bool>,
    /// Parallel to `def.columns`: n of a BIT(n) column, 0 for other columns.
    pub bits: Vec<u8>,
    /// The compiled generated columns; None for a table without any (the
    /// write paths then do nothing more than test this).
    pub generated: Option<Arc<crate::engine::generated::GenCols>>,
    /// The compiled enforced CHECK constraints; None for a table without
    /// any (the write paths then test only this).
    pub checks: Option<Arc<crate::engine::check_constraints::Checks>>,
}

impl SqlTable {
    pub fn from_def(def: TableDef) -> Option<SqlTable> {
        let (db, name) = def.name.split_once('/')?;
        let mut meta = SqlTableMeta::decode(&def.extra).unwrap_or_else(|| SqlTableMeta::for_native(&def));
        if meta.columns.len() != def.columns.len() {
            meta = SqlTableMeta::for_native(&def);
        }
        // Indexes created or dropped after CREATE TABLE are only in the native
        // definition: keep declared ones that still exist, append new ones.
        // (The primary key's ordered index is the PRIMARY key itself to SQL.)
        let native: Vec<&norr_signals::IndexDef> = def.indexes.iter().filter(|i| !is_pk_ordered_index(i)).collect();
        meta.indexes
            .retain(|i| i.kind == SqlIndexKind::Primary || native.iter().any(|n| n.name.eq_ignore_ascii_case(&i.name)));
        for n in native {
            if !meta.indexes.iter().any(|i| i.kind != SqlIndexKind::Primary && i.name.eq_ignore_ascii_case(&n.name)) {
                meta.indexes.push(SqlIndexMeta {
                    name: n.name.clone(),
                    kind: if n.unique { SqlIndexKind::Unique } else { SqlIndexKind::Index },
                    columns: n
                        .columns
                        .iter()
                        .filter_map(|&c| def.columns.get(c as usize))
                        .map(|c| c.name.clone())
                        .collect(),
                    comment: String::new(),
                });
            }
        }
        let enums = enum_lists(&def, &meta);
        let json = meta.columns.iter().map(|m| m.sql_type == "json").collect();
        let bits = meta.columns.iter().map(|m| crate::engine::bit::bit_width(&m.sql_type).unwrap_or(0)).collect();
        let generated = (!meta.generated.is_empty())
            .then(|| Arc::new(crate::engine::generated::GenCols::build(&def.columns, &meta.columns, &meta.generated)));
        let checks =
            crate::engine::check_constraints::Checks::build(&def.columns, &meta.columns, &meta.checks).map(Arc::new);
        Some(SqlTable { db: db.to_string(), name: name.to_string(), def, meta, enums, json, bits, generated, checks })
    }

    /// The data node's name of the table: `db/name`, or the hidden name of
    /// a temporary table (whose `db` / `name` are the user's, `temp_tables`).
    pub fn native_name(&self) -> String {
        self.def.name.clone()
    }

    /// True for the hidden `$PK` column.
    pub fn is_hidden(&self, id: ColumnId) -> bool {
        self.meta.columns.get(id as usize).is_some_and(|c| c.hidden)
    }

    /// The hidden primary-key column, if the table has one.
    pub fn hidden_pk(&self) -> Option<ColumnId> {
        self.meta.columns.iter().position(|c| c.hidden).map(|i| i as ColumnId)
    }

    /// Columns of `SELECT *`, in order: (id, native def, SQL meta).
    pub fn columns_visible(&self) -> impl Iterator<Item = (ColumnId, &ColumnDef, &SqlColumnMeta)> {
        self.def
            .columns
            .iter()
            .zip(&self.meta.columns)
            .enumerate()
            .filter(|(_, (_, m))| !m.hidden)
            .map(|(i, (c, m))| (i as ColumnId, c, m))
    }

    /// A visible column by name (case-insensitive).
    pub fn column(&self, name: &str) -> Option<(ColumnId, &ColumnDef, &SqlColumnMeta)> {
        self.columns_visible().find(|(_, c, _)| c.name.eq_ignore_ascii_case(name))
    }

    /// Result-set metadata of a column, as MySQL sends it for `SELECT col FROM t`.
    pub fn column_meta(&self, id: ColumnId) -> ColumnMeta {
        let c = &self.def.columns[id as usize];
        let m = &self.meta.columns[id as usize];
        let (mut field_type, mut column_length, decimals, cs) = type_wire_info(&c.ty, &m.sql_type, m.fsp);
        let mut flags = 0u16;
        // MySQL sends ENUM and SET as MYSQL_TYPE_STRING with ENUM_FLAG /
        // SET_FLAG: drivers decode them as strings (SET: some as Python sets).
        if let Some(Some(e)) = self.enums.get(id as usize) {
            field_type = FieldType::String;
            column_length = e.max_chars() * 4;
            flags |= if e.kind == EnumKind::Enum { cf::ENUM } else { cf::SET };
        }
        // JSON: MYSQL_TYPE_JSON, binary charset, BLOB flag, as MySQL sends it.
        let is_json = self.json.get(id as usize).copied().unwrap_or(false);
        if is_json {
            field_type = FieldType::Json;
            column_length = u32::MAX;
        }
        let cs = if is_json { charset::BINARY } else { cs };
        // BIT(n): MYSQL_TYPE_BIT, length n; the value goes out as bytes.
        let bit_n = self.bits.get(id as usize).copied().unwrap_or(0);
        if bit_n > 0 {
            field_type = FieldType::Bit;
            column_length = bit_n as u32;
        }
        if !c.nullable {
            flags |= cf::NOT_NULL;
        }
        if self.def.primary_key.contains(&id) && !self.meta.indexes.iter().all(|i| i.kind != SqlIndexKind::Primary) {
            flags |= cf::PRI_KEY;
        }
        for ix in &self.meta.indexes {
            let first = ix.columns.first().is_some_and(|f| f.eq_ignore_ascii_case(&c.name));
            match ix.kind {
                SqlIndexKind::Unique if ix.columns.len() == 1 && first => flags |= cf::UNIQUE_KEY,
                SqlIndexKind::Index | SqlIndexKind::Unique if first => flags |= cf::MULTIPLE_KEY,
                _ => {}
            }
        }
        if c.ty.is_unsigned_int() {
            flags |= cf::UNSIGNED;
        }
        if matches!(c.ty, ColumnType::Blob | ColumnType::Text { .. }) {
            flags |= cf::BLOB;
        }
        if cs == charset::BINARY
            && !is_numeric(&c.ty)
            && !matches!(c.ty, ColumnType::Date | ColumnType::Time | ColumnType::DateTime | ColumnType::Timestamp)
        {
            flags |= cf::BINARY;
        }
        if c.auto_increment {
            flags |= cf::AUTO_INCREMENT;
        }
        if matches!(c.ty, ColumnType::Timestamp) {
            flags |= cf::TIMESTAMP;
        }
        if !c.nullable && !c.auto_increment && m.default == SqlDefault::None {
            flags |= cf::NO_DEFAULT_VALUE;
        }
        if is_numeric(&c.ty) && bit_n == 0 {
            flags |= cf::NUM;
        }
        ColumnMeta {
            schema: self.db.clone(),
            table: self.name.clone(),
            org_table: self.name.clone(),
            name: c.name.clone(),
            org_name: c.name.clone(),
            field_type,
            column_length,
            decimals,
            flags,
            charset: cs,
        }
    }

    /// Metadata of every visible column (`SELECT *`, COM_FIELD_LIST).
    pub fn result_columns(&self) -> Vec<ColumnMeta> {
        self.columns_visible().map(|(id, _, _)| self.column_meta(id)).collect()
    }

    /// Names of the primary-key columns (hidden `$PK` included).
    pub fn pk_names(&self) -> Vec<String> {
        self.def.primary_key.iter().map(|&i| self.def.columns[i as usize].name.clone()).collect()
    }

    /// True if the table has a declared PRIMARY KEY.
    pub fn has_declared_pk(&self) -> bool {
        self.meta.indexes.iter().any(|i| i.kind == SqlIndexKind::Primary)
    }
}

pub fn is_numeric(t: &ColumnType) -> bool {
    t.int_range().is_some() || matches!(t, ColumnType::Float | ColumnType::Double | ColumnType::Decimal { .. })
}

/// (field type, display length, decimals, charset id) of a column type.
pub fn type_wire_info(ty: &ColumnType, sql_type: &str, fsp: u8) -> (FieldType, u32, u8, u16) {
    let cs_of = |c: Collation| {
        if c == Collation::Binary {
            charset::UTF8MB4_BIN
        } else {
            charset::UTF8MB4_CI
        }
    };
    let base = sql_type.split('(').next().unwrap_or("");
    let fsp_len = if fsp > 0 { fsp as u32 + 1 } else { 0 };
    match ty {
        ColumnType::TinyInt { unsigned } => {
            let w = if sql_type.starts_with("tinyint(1)") {
                1
            } else if *unsigned {
                3
            } else {
                4
            };
            (FieldType::Tiny, w, 0, charset::BINARY)
        }
        ColumnType::SmallInt { unsigned } => (FieldType::Short, if *unsigned { 5 } else { 6 }, 0, charset::BINARY),
        ColumnType::MediumInt { unsigned } => (FieldType::Int24, if *unsigned { 8 } else { 9 }, 0, charset::BINARY),
        ColumnType::Int { unsigned } => (FieldType::Long, if *unsigned { 10 } else { 11 }, 0, charset::BINARY),
        ColumnType::BigInt { .. } => (FieldType::LongLong, 20, 0, charset::BINARY),
        ColumnType::Float => (FieldType::Float, 12, 31, charset::BINARY),
        ColumnType::Double => (FieldType::Double, 22, 31, charset::BINARY),
        ColumnType::Decimal { precision, scale } => {
            (FieldType::NewDecimal, *precision as u32 + (*scale > 0) as u32 + 1, *scale, charset::BINARY)
        }
        ColumnType::Char { len, collation } => (FieldType::String, len * 4, 0, cs_of(*collation)),
        ColumnType::Varchar { len, collation } => (FieldType::VarString, len * 4, 0, cs_of(*collation)),
        ColumnType::Binary { len } => (FieldType::String, *len, 0, charset::BINARY),
        ColumnType::Varbinary { len } => (FieldType::VarString, *len, 0, charset::BINARY),
        ColumnType::Text { collation } => {
            let chars: u32 = match base {
                "tinytext" => 255,
                "mediumtext" => 16_777_215,
                "longtext" => u32::MAX / 4,
                _ => 65_535,
            };
            (FieldType::Blob, chars.saturating_mul(4), 0, cs_of(*collation))
        }
        ColumnType::Blob => {
            let len: u32 = match base {
                "tinyblob" => 255,
                "mediumblob" => 16_777_215,
                "longblob" => u32::MAX,
                _ => 65_535,
            };
            (FieldType::Blob, len, 0, charset::BINARY)
        }
        ColumnType::Date => (FieldType::Date, 10, 0, charset::BINARY),
        ColumnType::Time => (FieldType::Time, 10 + fsp_len, fsp, charset::BINARY),
        ColumnType::DateTime => (FieldType::DateTime, 19 + fsp_len, fsp, charset::BINARY),
        ColumnType::Timestamp => (FieldType::Timestamp, 19 + fsp_len, fsp, charset::BINARY),
    }
}

/// SQL type text for a native type (tables created through the native API).
pub fn native_type_sql(t: &ColumnType) -> String {
    let u = |s: &str, unsigned: bool| {
        if unsigned {
            format!("{s} unsigned")
        } else {
            s.to_string()
        }
    };
    match t {
        ColumnType::TinyInt { unsigned } => u("tinyint", *unsigned),
        ColumnType::SmallInt { unsigned } => u("smallint", *unsigned),
        ColumnType::MediumInt { unsigned } => u("mediumint", *unsigned),
        ColumnType::Int { unsigned } => u("int", *unsigned),
        ColumnType::BigInt { unsigned } => u("bigint", *unsigned),
        ColumnType::Float => "float".into(),
        ColumnType::Double => "double".into(),
        ColumnType::Decimal { precision, scale } => format!("decimal({precision},{scale})"),
        ColumnType::Char { len, .. } => format!("char({len})"),
        ColumnType::Varchar { len, .. } => format!("varchar({len})"),
        ColumnType::Binary { len } => format!("binary({len})"),
        ColumnType::Varbinary { len } => format!("varbinary({len})"),
        ColumnType::Text { .. } => "text".into(),
        ColumnType::Blob => "blob".into(),
        ColumnType::Date => "date".into(),
        ColumnType::Time => "time".into(),
        ColumnType::DateTime => "datetime".into(),
        ColumnType::Timestamp => "timestamp".into(),
    }
}

/// A collation NorrDB accepts under its MySQL name, as SHOW COLLATION lists
/// it. Several names share one native collation (CHARSETS.md).
pub struct CollationInfo {
    pub name: &'static str,
    pub charset: &'static str,
    /// MySQL's collation id (what the protocol's column definitions carry).
    pub id: u64,
    /// The charset's default collation.
    pub is_default: bool,
    pub sortlen: u64,
    pub native: Collation,
}

const fn coll(
    name: &'static str,
    charset: &'static str,
    id: u64,
    is_default: bool,
    sortlen: u64,
    native: Collation,
) -> CollationInfo {
    CollationInfo { name, charset, id, is_default, sortlen, native }
}

/// Every collation listed and accepted, in name order.
pub const COLLATIONS: &[CollationInfo] = &[
    coll("binary", "binary", 63, true, 1, Collation::Binary),
    coll("utf8mb3_bin", "utf8mb3", 83, false, 1, Collation::Binary),
    coll("utf8mb3_general_ci", "utf8mb3", 33, true, 1, Collation::CaseInsensitive),
    coll("utf8mb3_unicode_ci", "utf8mb3", 192, false, 8, Collation::CaseInsensitive),
    coll("utf8mb4_0900_ai_ci", "utf8mb4", 255, true, 0, Collation::CaseInsensitive),
    coll("utf8mb4_0900_as_ci", "utf8mb4", 305, false, 0, Collation::CaseInsensitive),
    coll("utf8mb4_0900_bin", "utf8mb4", 309, false, 1, Collation::Binary),
    coll("utf8mb4_bin", "utf8mb4", 46, false, 1, Collation::Binary),
    coll("utf8mb4_general_ci", "utf8mb4", 45, false, 1, Collation::CaseInsensitive),
    coll("utf8mb4_unicode_520_ci", "utf8mb4", 246, false, 8, Collation::CaseInsensitive),
    coll("utf8mb4_unicode_ci", "utf8mb4", 224, false, 8, Collation::CaseInsensitive),
];

/// Collation name -> native collation. None if unknown. `utf8_*` names are
/// MySQL's old aliases of `utf8mb3_*` and are accepted, not listed; so are
/// the `latin1_*` and `ascii_*` collations of the charsets stored as utf8mb4
/// (`stored_collation_name`).
pub fn collation_from_name(name: &str) -> Option<Collation> {
    let lower = name.to_ascii_lowercase();
    let name = match lower.strip_prefix("utf8_") {
        Some(rest) => format!("utf8mb3_{rest}"),
        None => lower,
    };
    COLLATIONS.iter().find(|c| c.name == name).map(|c| c.native).or_else(|| subset_collation(&name))
}

/// MySQL's collations of latin1 and ascii, the two charsets NorrDB stores as
/// utf8mb4 (a superset of both): the case-insensitive ones compare as
/// `CaseInsensitive`, `_bin` and the case-sensitive `latin1_general_cs` as
/// `Binary` (byte order of latin1 and of UTF-8 agree on latin1's letters only
/// for ASCII, so `_bin` order differs above U+007F; CHARSETS.md says so).
fn subset_collation(lower: &str) -> Option<Collation> {
    match lower {
        "latin1_swedish_ci" | "latin1_general_ci" | "latin1_german1_ci" | "latin1_german2_ci" | "latin1_danish_ci"
        | "latin1_spanish_ci" | "ascii_general_ci" => Some(Collation::CaseInsensitive),
        "latin1_bin" | "latin1_general_cs" | "ascii_bin" => Some(Collation::Binary),
        _ => None,
    }
}

/// The collation name a table or column keeps for a declared one: the
/// declared name (lower case), except that a latin1 / ascii collation becomes
/// the utf8mb4 collation it is stored as, so SHOW CREATE TABLE's output
/// (which says utf8mb4) re-executes here and on MySQL. None if unknown.
pub fn stored_collation_name(name: &str) -> Option<String> {
    let lower = name.to_ascii_lowercase();
    match subset_collation(&lower) {
        Some(native) => Some(collation_name(native).to_string()),
        None => collation_from_name(&lower).map(|_| lower),
    }
}

/// Canonical collation name of a native collation.
pub fn collation_name(c: Collation) -> &'static str {
    match c {
        Collation::CaseInsensitive => DEFAULT_COLLATION,
        Collation::Binary => "utf8mb4_bin",
    }
}

/// Charset name -> canonical name: utf8, utf8mb3, ascii and latin1 are
/// stored as utf8mb4, which holds every value they can (CHARSETS.md).
pub fn charset_canonical(name: &str) -> Option<&'static str> {
    match name.to_ascii_lowercase().as_str() {
        "utf8mb4" | "utf8" | "utf8mb3" | "ascii" | "latin1" => Some("utf8mb4"),
        "binary" => Some("binary"),
        _ => None,
    }
}

/// A charset a connection may name (SET NAMES, character_set_client /
/// _connection / _results): the canonical name, or the error. The server
/// sends and reads UTF-8 only, which is what utf8mb3 and ascii clients read
/// too; latin1 would need transcoding every query and row, so it is refused
/// as a connection charset though tables may declare it (CHARSETS.md).
pub fn connection_charset(name: &str) -> Result<&'static str, SqlError> {
    if name.eq_ignore_ascii_case("latin1") {
        return Err(SqlError::unsupported(
            "latin1 as a connection character set (the server sends and reads utf8mb4; latin1 tables are stored as utf8mb4)",
        ));
    }
    charset_canonical(name).ok_or_else(|| crate::engine::error_map::unknown_charset(name))
}

/// Default collation of a charset.
pub fn default_collation_of(cs: &str) -> &'static str {
    if cs == "binary" {
        "binary"
    } else {
        DEFAULT_COLLATION
    }
}

/// `'text'` with quotes doubled, as MySQL prints string literals.
pub fn quote_string(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

/// `` `name` `` with backticks doubled.
pub fn quote_ident(s: &str) -> String {
    format!("`{}`", s.replace('`', "``"))
}

/// A value as SHOW CREATE TABLE prints a DEFAULT (always quoted, like MySQL).
pub fn literal_sql(v: &Value) -> String {
    match v {
        Value::Null => "NULL".into(),
        Value::Bytes(b) => quote_string(&String::from_utf8_lossy(b)),
        other => quote_string(&value_text(other)),
    }
}

/// A value as text (for SHOW output and defaults).
pub fn value_text(v: &Value) -> String {
    match v {
        Value::Null => "NULL".into(),
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Double(d) => d.to_string(),
        Value::Decimal(d) => {
            let neg = d.mantissa < 0;
            let digits = d.mantissa.unsigned_abs().to_string();
            let s = d.scale as usize;
            let body = if s == 0 {
                digits
            } else if digits.len() > s {
                format!("{}.{}", &digits[..digits.len() - s], &digits[digits.len() - s..])
            } else {
                format!("0.{}{}", "0".repeat(s - digits.len()), digits)
            };
            if neg {
                format!("-{body}")
            } else {
                body
            }
        }
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Date(d) => format!("{:04}-{:02}-{:02}", d.year, d.month, d.day),
        Value::DateTime(dt) => {
            let mut s = format!(
                "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
                dt.date.year, dt.date.month, dt.date.day, dt.hour, dt.minute, dt.second
            );
            if dt.micro > 0 {
                s.push_str(&format!(".{:06}", dt.micro));
            }
            s
        }
        Value::Time(us) => {
            let neg = *us < 0;
            let a = us.unsigned_abs();
            let secs = a / 1_000_000;
            let mut s =
                format!("{}{:02}:{:02}:{:02}", if neg { "-" } else { "" }, secs / 3600, (secs / 60) % 60, secs % 60);
            if a % 1_000_000 > 0 {
                s.push_str(&format!(".{:06}", a % 1_000_000));
            }
            s
        }
    }
}

/// Native name of SQL table `db.t`.
pub fn native_name(db: &str, table: &str) -> String {
    format!("{db}/{table}")
}

/// A database as stored in `norr_sys/schemata`.
#[derive(Debug, Clone, PartialEq)]
pub struct DbInfo {
    pub name: String,
    pub charset: String,
    pub collation: String,
}

/// Cache of table and database metadata. Never held locked across an await.
pub struct Catalog {
    client: Client,
    tables: Mutex<HashMap<String, Arc<SqlTable>>>,
    dbs: Mutex<Option<BTreeMap<String, DbInfo>>>,
    schemata: Mutex<Option<TableDef>>,
    /// `norr_sys/views` (see `views`).
    views: Mutex<Option<TableDef>>,
}

impl Catalog {
    pub fn new(client: Client) -> Catalog {
        Catalog {
            client,
            tables: Mutex::new(HashMap::new()),
            dbs: Mutex::new(None),
            schemata: Mutex::new(None),
            views: Mutex::new(None),
        }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Create `norr_sys/schemata` if missing (at engine start).
    pub async fn bootstrap(&self) -> Result<(), SqlError> {
        let def = match self.client.get_table(SCHEMATA_TABLE).await {
            Ok(d) => d,
            Err(e) if e.code() == Some(ErrorCode::NoSuchTable) => {
                let t = norr_client::table_def(
                    SCHEMATA_TABLE,
                    vec![
                        ColumnDef::new("name", ColumnType::Varchar { len: 64, collation: Collation::Binary })
                            .not_null(),
                        ColumnDef::new("charset", ColumnType::Varchar { len: 32, collation: Collation::Binary }),
                        ColumnDef::new("collation", ColumnType::Varchar { len: 64, collation: Collation::Binary }),
                    ],
                    vec![0],
                );
                match self.client.create_table(t).await {
                    Ok(d) => d,
                    Err(e) if e.code() == Some(ErrorCode::TableExists) => {
                        self.client.get_table(SCHEMATA_TABLE).await.map_err(error_map::from_client_plain)?
                    }
                    Err(e) => return Err(error_map::from_client_plain(e)),
                }
            }
            Err(e) => return Err(error_map::from_client_plain(e)),
        };
        *self.schemata.lock().expect("lock") = Some(def);
        let views = crate::engine::views::bootstrap(&self.client).await?;
        *self.views.lock().expect("lock") = Some(views);
        Ok(())
    }

    /// The stored views (`norr_sys/views`).
    pub fn views(&self) -> Result<crate::engine::views::ViewStore<'_>, SqlError> {
        let def =
            self.views.lock().expect("lock").clone().ok_or_else(|| SqlError::internal("catalog not bootstrapped"))?;
        Ok(crate::engine::views::ViewStore { client: &self.client, def })
    }

    fn schemata_def(&self) -> Result<TableDef, SqlError> {
        self.schemata.lock().expect("lock").clone().ok_or_else(|| SqlError::internal("catalog not bootstrapped"))
    }

    /// Resolve `db.table` (cached).
    pub async fn get(&self, db: &str, table: &str) -> Result<Arc<SqlTable>, SqlError> {
        let key = native_name(db, table);
        if let Some(t) = self.tables.lock().expect("lock").get(&key) {
            return Ok(t.clone());
        }
        let def = match self.client.get_table(&key).await {
            Ok(d) => d,
            Err(e) if e.code() == Some(ErrorCode::NoSuchTable) => return Err(error_map::no_such_table(db, table)),
            Err(e) => return Err(from_client(e, &ErrCtx::table(db, table))),
        };
        let t = Arc::new(SqlTable::from_def(def).ok_or_else(|| error_map::no_such_table(db, table))?);
        self.tables.lock().expect("lock").insert(key, t.clone());
        Ok(t)
    }

    /// Like `get`, but `Ok(None)` for a missing table.
    pub async fn try_get(&self, db: &str, table: &str) -> Result<Option<Arc<SqlTable>>, SqlError> {
        match self.get(db, table).await {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.code == 1146 => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Forget a cached table (after DDL or a schema-version error).
    pub fn invalidate(&self, db: &str, table: &str) {
        self.tables.lock().expect("lock").remove(&native_name(db, table));
    }

    pub fn put(&self, def: TableDef) -> Option<Arc<SqlTable>> {
        let t = Arc::new(SqlTable::from_def(def)?);
        self.tables.lock().expect("lock").insert(t.native_name(), t.clone());
        Some(t)
    }

    /// Every SQL table of `db` (fresh from the dictionary), sorted by name.
    pub async fn list(&self, db: &str) -> Result<Vec<Arc<SqlTable>>, SqlError> {
        let all = self.client.list_tables().await.map_err(error_map::from_client_plain)?;
        let prefix = format!("{db}/");
        let mut out: Vec<Arc<SqlTable>> = all
            .into_iter()
            .filter(|d| d.name.starts_with(&prefix) && !d.name[prefix.len()..].contains('/'))
            .filter_map(SqlTable::from_def)
            .map(Arc::new)
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        let mut cache = self.tables.lock().expect("lock");
        for t in &out {
            cache.insert(t.native_name(), t.clone());
        }
        Ok(out)
    }

    /// Every SQL table of every user database.
    pub async fn list_all(&self) -> Result<Vec<Arc<SqlTable>>, SqlError> {
        let dbs = self.databases().await?;
        let all = self.client.list_tables().await.map_err(error_map::from_client_plain)?;
        let mut out: Vec<Arc<SqlTable>> = all
            .into_iter()
            .filter(|d| d.name.split_once('/').is_some_and(|(db, t)| dbs.contains_key(db) && !t.contains('/')))
            .filter_map(SqlTable::from_def)
            .map(Arc::new)
            .collect();
        out.sort_by(|a, b| (&a.db, &a.name).cmp(&(&b.db, &b.name)));
        Ok(out)
    }

    /// User databases (fresh from the node).
    pub async fn databases(&self) -> Result<BTreeMap<String, DbInfo>, SqlError> {
        let def = self.schemata_def()?;
        let rows = self
            .client
            .scan(ScanSpec::full(def.id))
            .await
            .map_err(error_map::from_client_plain)?
            .collect_all()
            .await
            .map_err(error_map::from_client_plain)?;
        let s = |v: &Value| v.as_bytes().map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default();
        let map: BTreeMap<String, DbInfo> = rows
            .iter()
            .filter(|r| r.len() >= 3)
            .map(|r| (s(&r[0]), DbInfo { name: s(&r[0]), charset: s(&r[1]), collation: s(&r[2]) }))
            .collect();
        *self.dbs.lock().expect("lock") = Some(map.clone());
        Ok(map)
    }

    /// Does `db` exist (virtual databases included)? Checks the cache first.
    pub async fn db_exists(&self, db: &str) -> Result<bool, SqlError> {
        if VIRTUAL_DBS.iter().any(|v| v.eq_ignore_ascii_case(db)) {
            return Ok(true);
        }
        if let Some(m) = self.dbs.lock().expect("lock").as_ref() {
            if m.contains_key(db) {
                return Ok(true);
            }
        }
        Ok(self.databases().await?.contains_key(db))
    }

    pub async fn db_info(&self, db: &str) -> Result<Option<DbInfo>, SqlError> {
        if let Some(m) = self.dbs.lock().expect("lock").as_ref() {
            if let Some(i) = m.get(db) {
                return Ok(Some(i.clone()));
            }
        }
        Ok(self.databases().await?.get(db).cloned())
    }

    /// Insert a database row; false if it already existed.
    pub async fn create_db(&self, info: &DbInfo) -> Result<bool, SqlError> {
        let def = self.schemata_def()?;
        let mut txn = self.client.begin();
        let op = KeyOp::insert(
            def.id,
            vec![Value::str(&info.name)],
            vec![(1, Value::str(&info.charset)), (2, Value::str(&info.collation))],
        );
        let r = txn.execute(vec![op], ExecType::Commit).await;
        *self.dbs.lock().expect("lock") = None;
        match r {
            Ok(_) => Ok(true),
            Err(ClientError::Node(e)) if e.code == ErrorCode::DuplicateKey => Ok(false),
            Err(e) => Err(error_map::from_client_plain(e)),
        }
    }

    /// Delete a database row; false if it did not exist.
    pub async fn drop_db_row(&self, db: &str) -> Result<bool, SqlError> {
        let def = self.schemata_def()?;
        let mut txn = self.client.begin();
        let r = txn.execute(vec![KeyOp::delete(def.id, vec![Value::str(db)])], ExecType::Commit).await;
        *self.dbs.lock().expect("lock") = None;
        match r {
            Ok(_) => Ok(true),
            Err(ClientError::Node(e)) if e.code == ErrorCode::NoSuchRow => Ok(false),
            Err(e) => Err(error_map::from_client_plain(e)),
        }
    }

    /// Forget every cached table: FLUSH TABLES, or a data node refused a
    /// definition this SQL node had cached (1412, DDL through another SQL
    /// node; which table is not known to the caller, and such errors are rare).
    pub fn invalidate_all(&self) {
        self.tables.lock().expect("lock").clear();
    }

    /// The data nodes may hold other contents than cached (a data node
    /// restarted): forget every cached definition and make sure the
    /// catalog's own tables exist again.
    pub async fn after_reconnect(&self) -> Result<(), SqlError> {
        self.invalidate_all();
        *self.dbs.lock().expect("lock") = None;
        self.bootstrap().await
    }

    /// Forget every cached table of `db`.
    pub fn invalidate_db(&self, db: &str) {
        let prefix = format!("{db}/");
        self.tables.lock().expect("lock").retain(|k, _| !k.starts_with(&prefix));
    }
}

/// Partition scheme for the native definition.
pub fn native_scheme(info: Option<&PartitionInfo>, key_ids: Vec<ColumnId>) -> (PartitionScheme, u32) {
    match info {
        None => (PartitionScheme::Key { columns: Vec::new() }, 0),
        Some(p) if p.is_native_key() => (PartitionScheme::Key { columns: key_ids }, p.count.unwrap_or(0)),
        Some(p) => (PartitionScheme::User, p.partition_count()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_roundtrips_through_extra() {
        let m = SqlTableMeta {
            format: META_FORMAT,
            columns: vec![SqlColumnMeta {
                sql_type: "int".into(),
                fsp: 0,
                default: SqlDefault::Literal { sql: "'1'".into() },
                on_update_now: false,
                comment: "c".into(),
                collation: None,
                hidden: false,
            }],
            indexes: vec![],
            partition: Some(PartitionInfo {
                kind: PartitionKind::Range { expr: "a".into() },
                count: None,
                defs: vec![PartitionDef {
                    name: "p0".into(),
                    values: PartitionValues::LessThan(vec![None]),
                    comment: String::new(),
                }],
            }),
            engine: "ndbcluster".into(),
            charset: "utf8mb4".into(),
            collation: DEFAULT_COLLATION.into(),
            comment: String::new(),
            auto_increment_start: None,
            fk: Default::default(),
            generated: Vec::new(),
            checks: Vec::new(),
        };
        assert_eq!(SqlTableMeta::decode(&m.encode()), Some(m.clone()));
        assert_eq!(SqlTableMeta::decode(b"garbage"), None);
        // Format 1 (before foreign keys) is still read: no foreign keys.
        let mut v1 = vec![1u8];
        v1.extend(postcard::to_allocvec(&m).unwrap());
        assert_eq!(SqlTableMeta::decode(&v1), Some(m.clone()));
        let mut with_fk = m.clone();
        with_fk.fk.foreign_keys.push(crate::engine::fk::ForeignKey {
            name: "c_ibfk_1".into(),
            columns: vec!["pid".into()],
            ref_db: "d".into(),
            ref_table: "p".into(),
            ref_columns: vec!["id".into()],
            on_delete: crate::engine::fk::FkAction::Cascade,
            on_update: crate::engine::fk::FkAction::NoAction,
        });
        with_fk.fk.referenced_by.push(crate::engine::fk::FkRef {
            db: "d".into(),
            table: "c".into(),
            name: "c_ibfk_1".into(),
        });
        assert_eq!(SqlTableMeta::decode(&with_fk.encode()), Some(with_fk.clone()));
        // A truncated foreign-key section is refused, not half read.
        let enc = with_fk.encode();
        assert_eq!(SqlTableMeta::decode(&enc[..enc.len() - 3]), None);
    }

    #[test]
    fn generated_columns_use_format_3_and_others_keep_format_2() {
        let mut m = SqlTableMeta::for_native(&TableDef {
            id: 1,
            version: 1,
            name: "d/t".into(),
            columns: vec![ColumnDef::new("a", ColumnType::Int { unsigned: false })],
            primary_key: vec![0],
            partitioning: PartitionScheme::Key { columns: vec![] },
            partitions: 0,
            indexes: vec![],
            extra: vec![],
            options: Default::default(),
        });
        // Without generated columns the bytes are exactly format 2's, so a
        // binary that knows only formats 1 and 2 still reads the table.
        let v2 = m.encode();
        assert_eq!(v2[0], META_FORMAT);
        let mut by_hand = vec![2u8];
        by_hand.extend(postcard::to_allocvec(&m).unwrap());
        by_hand.extend(postcard::to_allocvec(&m.fk).unwrap());
        assert_eq!(v2, by_hand);
        m.generated.push(GeneratedColumn { column: "a".into(), expr: "(`b` + 1)".into(), stored: true });
        let v3 = m.encode();
        assert_eq!(v3[0], META_FORMAT_GENERATED);
        assert_eq!(SqlTableMeta::decode(&v3), Some(m.clone()));
        // A truncated generated-column section is refused, not half read.
        assert_eq!(SqlTableMeta::decode(&v3[..v3.len() - 2]), None);
        // CHECK constraints: format 4, with or without generated columns.
        m.checks.push(CheckConstraint { name: "t_chk_1".into(), expr: "(`a` > 0)".into(), enforced: false });
        let v4 = m.encode();
        assert_eq!(v4[0], META_FORMAT_CHECKS);
        assert_eq!(SqlTableMeta::decode(&v4), Some(m.clone()));
        assert_eq!(SqlTableMeta::decode(&v4[..v4.len() - 2]), None);
        m.generated.clear();
        assert_eq!(SqlTableMeta::decode(&m.encode()), Some(m.clone()));
    }

    #[test]
    fn expr_columns_finds_identifiers() {
        assert_eq!(expr_columns("YEAR(d) + a * 2"), vec!["d".to_string(), "a".to_string()]);
    }

    #[test]
    fn value_text_formats() {
        assert_eq!(value_text(&Value::Decimal(norr_signals::Decimal { mantissa: -5, scale: 2 })), "-0.05");
        assert_eq!(value_text(&Value::Time(-3_600_000_000)), "-01:00:00");
    }
}
