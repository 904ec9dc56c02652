//! `JSON_TABLE(expr, path COLUMNS (...)) AS alias` as a FROM item (MySQL
//! 8.0's only table function).
//!
//! The document expression is compiled against the columns of the FROM
//! items before it, so `FROM t, JSON_TABLE(t.doc, ...)` reads each row's
//! document: the table's rows are made per row of the sources joined so far
//! (`join`), never once for all (`SourceKind::JsonTable`).
//!
//! Rows: each value the row path selects in the document is a row; a
//! column's path is applied to that value. A `NESTED PATH` level is an outer
//! join to its parent: one row per value of its path (or one row of NULLs
//! when there is none), and sibling NESTED levels take turns (the rows of the
//! first with the second's columns NULL, then those of the second) rather
//! than multiplying. `FOR ORDINALITY` counts the rows of its level from 1 per
//! parent value.
//!
//! Values are converted as when stored in a column of the declared type
//! (`store::store_value`, strict): a path that selects nothing takes the ON
//! EMPTY response, one that selects several values, an array or object for a
//! non-JSON column, or a value that does not convert takes the ON ERROR
//! response. Each response is NULL by default, a DEFAULT (a JSON text,
//! converted when the statement is compiled: 1067 if it does not fit), or an
//! error: 3665 (missing value), 3666 (array or object), 3669 (out of range),
//! 3156 (another conversion).

use crate::engine::expr::compile::{column_sqltype, Compiler, Scope, ScopeCol, SubqueryHost};
use crate::engine::expr::value::Warnings;
use crate::engine::expr::{eval, CExpr, EvalCtx, SqlType, TClass};
use crate::engine::json::{self, Path};
use crate::engine::query::Source;
use crate::types::SqlError;
use norr_signals::{ColumnDef, Value};
use serde_json::Value as J;
use sqlparser::ast::{self, JsonTableColumn, JsonTableColumnErrorHandling as OnResp, JsonTableNamedColumn};

/// MySQL's limit on NESTED PATH clauses in one JSON_TABLE (3670).
const MAX_NESTED: usize = 16;

/// A compiled JSON_TABLE.
#[derive(Debug)]
pub struct JsonTable {
    /// The document, over the joined row of the sources before this one.
    pub doc: CExpr,
    root: Level,
    width: usize,
}

#[derive(Debug)]
struct Level {
    path: Path,
    cols: Vec<Col>,
    nested: Vec<Level>,
    /// Output positions of this level's columns and of all levels below it.
    all: Vec<usize>,
}

#[derive(Debug)]
struct Col {
    pos: usize,
    kind: ColKind,
}

#[derive(Debug)]
enum ColKind {
    Ordinality,
    Exists { path: Path, target: Target },
    Path { path: Path, target: Target, on_empty: Response, on_error: Response },
}

/// A column's declared type.
#[derive(Debug)]
struct Target {
    def: ColumnDef,
    json: bool,
}

/// What an empty or erroneous path gives.
#[derive(Debug)]
enum Response {
    Null,
    Error,
    Default(Value),
}

/// Why a selected value does not fit its column.
enum Misfit {
    ArrayOrObject,
    Other(SqlError),
}

/// Compile `JSON_TABLE(...) alias`: its columns join `scope` (under
/// `alias`); `doc` may read the columns `scope` already has.
#[allow(clippy::too_many_arguments)]
pub fn compile(
    host: &mut dyn SubqueryHost,
    params: &crate::engine::expr::compile::ParamMap,
    outer: Option<&Scope>,
    json_expr: &ast::Expr,
    json_path: &ast::ValueWithSpan,
    columns: &[JsonTableColumn],
    alias: Option<&ast::TableAlias>,
    scope: &mut Scope,
) -> Result<(String, JsonTable), SqlError> {
    let Some(alias) = alias else {
        return Err(SqlError::new(3667, "42000", "Every table function must have an alias"));
    };
    let alias = alias.name.value.clone();
    let doc = {
        let mut c = Compiler::plain(scope, outer, params, "a table function argument", host);
        c.compile(json_expr)?.0
    };
    let mut b = Builder { names: Vec::new(), nested: 0, alias: &alias };
    let root = b.level(literal_path(json_path)?, columns)?;
    let width = b.names.len();
    for (name, ty) in b.names {
        scope.cols.push(ScopeCol { table: alias.to_lowercase(), name, ty, enums: None, default: None });
    }
    Ok((alias, JsonTable { doc, root, width }))
}

struct Builder<'a> {
    /// Column names and types in output order.
    names: Vec<(String, SqlType)>,
    nested: usize,
    alias: &'a str,
}

impl Builder<'_> {
    fn level(&mut self, path: Path, columns: &[JsonTableColumn]) -> Result<Level, SqlError> {
        let first = self.names.len();
        let mut cols = Vec::new();
        let mut nested = Vec::new();
        for c in columns {
            match c {
                JsonTableColumn::ForOrdinality(name) => {
                    let pos = self.add(&name.value, SqlType::new(TClass::Int))?;
                    cols.push(Col { pos, kind: ColKind::Ordinality });
                }
                JsonTableColumn::Named(n) => {
                    let target = target(n)?;
                    let pos = self.add(&n.name.value, sql_type(&target))?;
                    let path = literal_path(&n.path)?;
                    let kind = if n.exists {
                        ColKind::Exists { path, target }
                    } else {
                        let on_empty = response(n.on_empty.as_ref(), &target)?;
                        let on_error = response(n.on_error.as_ref(), &target)?;
                        ColKind::Path { path, target, on_empty, on_error }
                    };
                    cols.push(Col { pos, kind });
                }
                JsonTableColumn::Nested(n) => {
                    self.nested += 1;
                    if self.nested > MAX_NESTED {
                        return Err(SqlError::new(
                            3670,
                            "42000",
                            format!(
                                "More than supported {MAX_NESTED} NESTED PATHs were found in JSON_TABLE '{}'",
                                self.alias
                            ),
                        ));
                    }
                    nested.push(self.level(literal_path(&n.path)?, &n.columns)?);
                }
            }
        }
        let all = (first..self.names.len()).collect();
        Ok(Level { path, cols, nested, all })
    }

    fn add(&mut self, name: &str, ty: SqlType) -> Result<usize, SqlError> {
        if self.names.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
            return Err(SqlError::new(1060, "42S21", format!("Duplicate column name '{name}'")));
        }
        self.names.push((name.to_string(), ty));
        Ok(self.names.len() - 1)
    }
}

/// A path given as a string literal (the grammar takes nothing else).
fn literal_path(v: &ast::ValueWithSpan) -> Result<Path, SqlError> {
    match &v.value {
        ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => json::parse_path(s),
        other => Err(crate::engine::error_map::parse_error_near(&other.to_string())),
    }
}

fn target(n: &JsonTableNamedColumn) -> Result<Target, SqlError> {
    let (ty, sql_type, _) = crate::engine::ddl::map_type(&n.name.value, &n.r#type, "utf8mb4_0900_ai_ci")?;
    Ok(Target { def: ColumnDef::new(&n.name.value, ty), json: sql_type == "json" })
}

fn sql_type(t: &Target) -> SqlType {
    SqlType { json: t.json, ..column_sqltype(&t.def.ty) }
}

/// An ON EMPTY / ON ERROR response; a DEFAULT is converted now (1067 when it
/// does not fit the column, as MySQL).
fn response(r: Option<&OnResp>, t: &Target) -> Result<Response, SqlError> {
    Ok(match r {
        None | Some(OnResp::Null) => Response::Null,
        Some(OnResp::Error) => Response::Error,
        Some(OnResp::Default(v)) => {
            let invalid = || SqlError::new(1067, "42000", format!("Invalid default value for '{}'", t.def.name));
            let text = match &v.value {
                ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => s.clone(),
                ast::Value::Number(n, _) => n.to_string(),
                _ => return Err(invalid()),
            };
            let j = json::parse(text.as_bytes()).map_err(|_| invalid())?;
            match convert(&j, t, 1) {
                Ok(v) => Response::Default(v),
                Err(_) => return Err(invalid()),
            }
        }
    })
}

/// A selected JSON value as a value of column `t`.
fn convert(v: &J, t: &Target, row: u64) -> Result<Value, Misfit> {
    if t.json {
        return Ok(Value::Bytes(json::to_text(v).into_bytes()));
    }
    let sql = match v {
        J::Array(_) | J::Object(_) => return Err(Misfit::ArrayOrObject),
        J::Null => return Ok(Value::Null),
        J::String(s) => Value::Bytes(s.clone().into_bytes()),
        // A character column takes a number or a truth value as JSON
        // prints it; a numeric one takes its value.
        J::Number(_) | J::Bool(_) if t.def.ty.is_text() => Value::Bytes(json::to_text(v).into_bytes()),
        J::Bool(b) => Value::Int(*b as i64),
        J::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => Value::Int(i),
            (None, Some(u), _) => Value::UInt(u),
            (None, None, Some(f)) if t.def.ty.int_range().is_some() => Value::Double(f),
            // DECIMAL and the rest parse the number's text exactly.
            _ => Value::Bytes(json::to_text(v).into_bytes()),
        },
    };
    let mut w = Warnings::default();
    crate::engine::store::store_value(sql, &t.def, row, None, &mut w).map_err(Misfit::Other)
}

impl JsonTable {
    /// The table's rows for the joined row `prefix` (which `doc` reads).
    pub fn rows(&self, prefix: &[Value], ctx: &mut EvalCtx) -> Result<Vec<Vec<Value>>, SqlError> {
        let doc = match eval(&self.doc, prefix, ctx)? {
            Value::Null => return Ok(Vec::new()),
            Value::Bytes(b) => parse_doc(&b)?,
            other => parse_doc(crate::engine::expr::value::to_string_lossy(&other).unwrap_or_default().as_bytes())?,
        };
        let mut row = vec![Value::Null; self.width];
        let mut out = Vec::new();
        expand(&self.root, &doc, &mut row, &mut out)?;
        Ok(out)
    }
}

fn parse_doc(b: &[u8]) -> Result<J, SqlError> {
    json::parse(b).map_err(|e| {
        SqlError::new(
            3141,
            "22032",
            format!("Invalid JSON text in argument 1 to function json_table: \"{}\" at position {}.", e.message, e.pos),
        )
    })
}

/// The rows of `level` within context value `v`, with the columns of the
/// levels above already set in `row`.
fn expand(level: &Level, v: &J, row: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) -> Result<(), SqlError> {
    let mut matches = Vec::new();
    json::select(v, &level.path.legs, &mut matches);
    for (i, m) in matches.into_iter().enumerate() {
        let rowno = out.len() as u64 + 1;
        for c in &level.cols {
            row[c.pos] = column_value(c, m, i as u64 + 1, rowno)?;
        }
        if level.nested.is_empty() {
            out.push(row.clone());
            continue;
        }
        let before = out.len();
        for n in &level.nested {
            expand(n, m, row, out)?;
            for &p in &n.all {
                row[p] = Value::Null;
            }
        }
        if out.len() == before {
            out.push(row.clone());
        }
    }
    Ok(())
}

fn column_value(c: &Col, m: &J, ordinal: u64, rowno: u64) -> Result<Value, SqlError> {
    let (path, target, on_empty, on_error) = match &c.kind {
        ColKind::Ordinality => return Ok(Value::UInt(ordinal)),
        ColKind::Exists { path, target } => {
            let mut found = Vec::new();
            json::select(m, &path.legs, &mut found);
            let v = Value::Int(!found.is_empty() as i64);
            let mut w = Warnings::default();
            return crate::engine::store::store_value(v, &target.def, rowno, None, &mut w);
        }
        ColKind::Path { path, target, on_empty, on_error } => (path, target, on_empty, on_error),
    };
    let mut found = Vec::new();
    json::select(m, &path.legs, &mut found);
    let got = match found.as_slice() {
        [] => {
            return match on_empty {
                Response::Null => Ok(Value::Null),
                Response::Default(v) => Ok(v.clone()),
                Response::Error => Err(SqlError::new(
                    3665,
                    "22035",
                    format!("Missing value for JSON_TABLE column '{}'", target.def.name),
                )),
            }
        }
        [one] => convert(one, target, rowno),
        // Several values: a JSON column takes them as an array.
        many if target.json => convert(&J::Array(many.iter().map(|x| (*x).clone()).collect()), target, rowno),
        _ => Err(Misfit::ArrayOrObject),
    };
    match got {
        Ok(v) => Ok(v),
        Err(why) => match on_error {
            Response::Null => Ok(Value::Null),
            Response::Default(v) => Ok(v.clone()),
            Response::Error => Err(match why {
                Misfit::ArrayOrObject => SqlError::new(
                    3666,
                    "2203F",
                    format!("Can't store an array or an object in the scalar JSON_TABLE column '{}'", target.def.name),
                ),
                Misfit::Other(e) if e.code == 1264 => SqlError::new(
                    3669,
                    "22003",
                    format!("Value is out of range for JSON_TABLE's column '{}'", target.def.name),
                ),
                Misfit::Other(_) => SqlError::new(
                    3156,
                    "22018",
                    format!(
                        "Invalid JSON value for CAST to {} from column {} at row {rowno}",
                        cast_name(target),
                        target.def.name
                    ),
                ),
            }),
        },
    }
}

/// The type word MySQL's 3156 message names.
fn cast_name(t: &Target) -> &'static str {
    use norr_signals::ColumnType as T;
    match t.def.ty {
        _ if t.def.ty.int_range().is_some() => "INTEGER",
        T::Float | T::Double => "DOUBLE",
        T::Decimal { .. } => "DECIMAL",
        T::Date => "DATE",
        T::Time => "TIME",
        T::DateTime | T::Timestamp => "DATETIME",
        _ => "CHAR",
    }
}

/// `source` (a JSON_TABLE) joined to `rows`: its rows are made for each
/// prefix row; a left-joined one NULL-extends a prefix row without rows
/// passing its ON. `from` as for `exec::join_source`.
pub fn join(
    jt: &JsonTable,
    source: &Source,
    rows: &[Vec<Value>],
    ctx: &mut EvalCtx<'_>,
    mut from: Option<&mut Vec<usize>>,
) -> Result<Vec<Vec<Value>>, SqlError> {
    let mut next = Vec::new();
    let mut built = crate::engine::memory::Built::default();
    for (from_row, r) in rows.iter().enumerate() {
        ctx.check_killed()?;
        let mut matched = false;
        for jr in jt.rows(r, ctx)? {
            let mut joined = Vec::with_capacity(r.len() + jr.len());
            joined.extend_from_slice(r);
            joined.extend(jr);
            if crate::engine::exec::all_pass(&source.on, &joined, ctx)? {
                matched = true;
                built.add(&ctx.mem, &joined)?;
                next.push(joined);
                if let Some(f) = from.as_deref_mut() {
                    f.push(from_row);
                }
            }
        }
        if !matched && source.left_join {
            let mut joined = r.clone();
            joined.extend(std::iter::repeat_n(Value::Null, jt.width));
            built.add(&ctx.mem, &joined)?;
            next.push(joined);
            if let Some(f) = from.as_deref_mut() {
                f.push(from_row);
            }
        }
    }
    built.flush(&ctx.mem)?;
    Ok(next)
}
