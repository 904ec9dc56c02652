//! Generated columns (MySQL 8.0): `col type [GENERATED ALWAYS] AS (expr)
//! [VIRTUAL | STORED]`. Owner: query engineer.
//!
//! Both kinds are stored in the row: every write computes them from the
//! row's other columns (`GenCols::fill`), so reads, indexes and the planner
//! see an ordinary column. VIRTUAL differs from STORED only in what SHOW
//! CREATE TABLE and information_schema print; a VIRTUAL column costs row
//! space here, which MySQL does not pay. The observable rule is MySQL's: the
//! value always equals the expression over the row's current values.
//!
//! The writers: INSERT / REPLACE / INSERT ... SELECT / ON DUPLICATE KEY UPDATE
//! (`dml::execute_insert`, `dml::upsert_row`), UPDATE (`dml::update_general`;
//! the pk fast path is off for such tables), multi-table UPDATE
//! (`multi_table_dml::update_targets`), foreign-key cascades
//! (`fk_enforce`), views through them (`view_dml` rewrites to the base
//! table), and ALTER TABLE (`alter_generated`, through an UPDATE). Each computes the new row, then calls `fill` before diffing and
//! writing it. A table without generated columns has `SqlTable::generated`
//! None, and those paths test only that.
//!
//! The metadata (expression text, STORED) is `catalog::GeneratedColumn`,
//! encoded as format 3 of `SqlTableMeta`.

use crate::engine::catalog::{GeneratedColumn, SqlColumnMeta, SqlTable};
use crate::engine::enumset::EnumSet;
use crate::engine::expr::compile::{column_sqltype, Compiler, ParamMap, Scope, ScopeCol, SubKind, SubqueryHost};
use crate::engine::expr::{collect_cols, eval, CExpr, EvalCtx, SqlType};
use crate::types::SqlError;
use norr_signals::{Collation, ColumnDef, ColumnId, Value};
use sqlparser::ast::{self, Expr};
use std::ops::ControlFlow;
use std::sync::Arc;

/// Error-message place of an unknown column in a generation expression.
const CLAUSE: &str = "generated column function";

/// One generated column, compiled over the table's row.
#[derive(Debug)]
pub struct GenCol {
    pub id: ColumnId,
    /// Compiled when the table is loaded. The DDL checked it, so an error
    /// here means metadata written by another version; DML reports it.
    pub expr: Result<CExpr, SqlError>,
}

/// The generated columns of a table, in column order (a generated column
/// reads only earlier generated columns, so this order computes each after
/// the ones it reads).
#[derive(Debug)]
pub struct GenCols {
    cols: Vec<GenCol>,
    /// Parallel to the table's columns.
    is_generated: Vec<bool>,
}

impl GenCols {
    /// Compile the generated columns of a table (`columns` / `metas`: the
    /// table's, in order).
    pub fn build(columns: &[ColumnDef], metas: &[SqlColumnMeta], gens: &[GeneratedColumn]) -> GenCols {
        let scope = row_scope(columns, metas);
        let mut is_generated = vec![false; columns.len()];
        let mut cols = Vec::with_capacity(gens.len());
        for (i, c) in columns.iter().enumerate() {
            let Some(g) = gens.iter().find(|g| g.column.eq_ignore_ascii_case(&c.name)) else { continue };
            is_generated[i] = true;
            let expr = parse(&g.expr).and_then(|e| compile(&e, &scope, RowExprOwner::Generated(&c.name)));
            cols.push(GenCol { id: i as ColumnId, expr });
        }
        GenCols { cols, is_generated }
    }

    pub fn is_generated(&self, id: ColumnId) -> bool {
        self.is_generated.get(id as usize).copied().unwrap_or(false)
    }

    /// Ids of the generated columns, in column order.
    pub fn ids(&self) -> impl Iterator<Item = ColumnId> + '_ {
        self.cols.iter().map(|g| g.id)
    }

    /// Compute every generated column of `row` (a full row of `t`, its
    /// other columns already converted) and store it with the strict-mode
    /// checks of a written value (`row_no` for messages).
    pub fn fill(&self, t: &SqlTable, row: &mut [Value], ctx: &mut EvalCtx<'_>, row_no: u64) -> Result<(), SqlError> {
        debug_assert_eq!(row.len(), t.def.columns.len());
        for g in &self.cols {
            let e = g.expr.as_ref().map_err(|e| e.clone())?;
            let v = eval(e, row, ctx)?;
            row[g.id as usize] =
                crate::engine::store::store_col(t, g.id as usize, v, row_no, ctx.tz.as_deref(), &mut ctx.warnings)?;
        }
        Ok(())
    }
}

/// `fill` for a table that may have generated columns.
pub fn fill(t: &SqlTable, row: &mut [Value], ctx: &mut EvalCtx<'_>, row_no: u64) -> Result<(), SqlError> {
    match &t.generated {
        Some(g) => g.fill(t, row, ctx, row_no),
        None => Ok(()),
    }
}

/// True if column `id` of `t` is generated.
pub fn is_generated(t: &SqlTable, id: ColumnId) -> bool {
    t.generated.as_ref().is_some_and(|g| g.is_generated(id))
}

/// 3105 ER_NON_DEFAULT_VALUE_FOR_GENERATED_COLUMN.
pub fn value_not_allowed(column: &str, table: &str) -> SqlError {
    SqlError::new(
        3105,
        "HY000",
        format!("The value specified for generated column '{column}' in table '{table}' is not allowed."),
    )
}

/// The `DEFAULT` keyword as a value (INSERT VALUES, SET col = DEFAULT).
pub fn is_default_keyword(e: &Expr) -> bool {
    matches!(e, Expr::Identifier(id) if id.quote_style.is_none() && id.value.eq_ignore_ascii_case("default"))
}

/// An assignment `SET col = e` (UPDATE, ON DUPLICATE KEY UPDATE, multi-table
/// UPDATE): Ok(true) to drop it (`col` is generated and `e` is DEFAULT: the
/// column is computed anyway), Ok(false) to keep it, 3105 for any other
/// value of a generated column.
pub fn skip_assignment(t: &SqlTable, col: ColumnId, e: &Expr) -> Result<bool, SqlError> {
    if !is_generated(t, col) {
        return Ok(false);
    }
    if is_default_keyword(e) {
        return Ok(true);
    }
    Err(value_not_allowed(&t.def.columns[col as usize].name, &t.name))
}

// ---------------------------------------------------------------- DDL

/// The generation clause of a column definition: (expression, STORED).
pub fn generation_of(def: &ast::ColumnDef) -> Result<Option<(&Expr, bool)>, SqlError> {
    for o in &def.options {
        if let ast::ColumnOption::Generated {
            generated_as,
            sequence_options,
            generation_expr,
            generation_expr_mode,
            ..
        } = &o.option
        {
            let Some(e) = generation_expr else {
                // GENERATED ... AS IDENTITY (not MySQL).
                return Err(crate::engine::error_map::parse_error_near("AS IDENTITY"));
            };
            if sequence_options.is_some() || matches!(generated_as, ast::GeneratedAs::ByDefault) {
                return Err(crate::engine::error_map::parse_error_near("BY DEFAULT"));
            }
            return Ok(Some((e, matches!(generation_expr_mode, Some(ast::GeneratedExpressionMode::Stored)))));
        }
    }
    Ok(None)
}

/// The canonical text of a generation expression, as MySQL prints it in
/// GENERATION_EXPRESSION: identifiers in backticks (without table
/// qualifiers), each binary operation in parentheses. Canonical text parses
/// back to the same canonical text, so SHOW CREATE TABLE re-executes to an
/// identical table.
pub fn canonical(e: &Expr) -> String {
    let mut e = e.clone();
    let _ = ast::visit_expressions_mut(&mut e, |x| {
        match x {
            Expr::Identifier(id) => id.quote_style = Some('`'),
            Expr::CompoundIdentifier(parts) => {
                if let Some(last) = parts.last() {
                    let mut id = last.clone();
                    id.quote_style = Some('`');
                    *x = Expr::Identifier(id);
                }
            }
            Expr::BinaryOp { .. } => *x = Expr::Nested(Box::new(x.clone())),
            // `((a + b))`: the inner parentheses came from the rule above.
            Expr::Nested(inner) if matches!(inner.as_ref(), Expr::Nested(_)) => *x = inner.as_ref().clone(),
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
    e.to_string()
}

/// MySQL's checks of generated column `i` of a table being defined
/// (`columns` / `metas` / `generated`: its columns so far, without the
/// hidden primary key; `generated[j]` tells whether column j is generated):
/// disallowed functions (3763), subqueries (3102), variables (3765), unknown
/// columns (1054), columns that are generated and not earlier (3107),
/// AUTO_INCREMENT columns (3109). Returns the canonical text.
pub fn check_definition(
    i: usize,
    e: &Expr,
    columns: &[ColumnDef],
    metas: &[SqlColumnMeta],
    generated: &[bool],
) -> Result<String, SqlError> {
    let name = &columns[i].name;
    disallowed_functions(e, RowExprOwner::Generated(name))?;
    let text = canonical(e);
    // What is stored is the canonical text: compile that, as a load does.
    let compiled = compile(&parse(&text)?, &row_scope(columns, metas), RowExprOwner::Generated(name))?;
    let mut used = Vec::new();
    collect_cols(&compiled, &mut used);
    used.sort_unstable();
    for j in used {
        if generated.get(j).copied().unwrap_or(false) && j >= i {
            return Err(SqlError::new(
                3107,
                "HY000",
                "Generated column can refer only to generated columns defined prior to it.",
            ));
        }
        if columns.get(j).is_some_and(|c| c.auto_increment) {
            return Err(SqlError::new(
                3109,
                "HY000",
                format!("Generated column '{name}' cannot refer to auto-increment column."),
            ));
        }
    }
    Ok(text)
}

/// Names of the columns a canonical generation expression reads (as written).
pub fn referenced_columns(text: &str) -> Vec<String> {
    crate::engine::catalog::expr_columns(text)
}

/// MySQL's name for a function a generated column may not call, if `name`
/// is one (the value would depend on more than the row).
fn banned_function(name: &str, argc: usize) -> Option<&'static str> {
    Some(match name.to_ascii_lowercase().as_str() {
        "rand" => "rand",
        "now" | "current_timestamp" | "localtime" | "localtimestamp" => "now",
        "sysdate" => "sysdate",
        "curdate" | "current_date" => "curdate",
        "curtime" | "current_time" => "curtime",
        "utc_date" => "utc_date",
        "utc_time" => "utc_time",
        "utc_timestamp" => "utc_timestamp",
        "unix_timestamp" if argc == 0 => "unix_timestamp",
        "uuid" => "uuid",
        "uuid_short" => "uuid_short",
        "connection_id" => "connection_id",
        "last_insert_id" => "last_insert_id",
        "user" | "session_user" | "system_user" => "user",
        "current_user" => "current_user",
        "current_role" => "current_role",
        "database" | "schema" => "database",
        "version" => "version",
        "found_rows" => "found_rows",
        "row_count" => "row_count",
        "sleep" => "sleep",
        "benchmark" => "benchmark",
        "get_lock" => "get_lock",
        "release_lock" => "release_lock",
        "release_all_locks" => "release_all_locks",
        "is_free_lock" => "is_free_lock",
        "is_used_lock" => "is_used_lock",
        "load_file" => "load_file",
        _ => return None,
    })
}

/// What a row expression belongs to: it words the errors, which MySQL
/// words differently for generated columns and for CHECK constraints.
#[derive(Clone, Copy)]
pub enum RowExprOwner<'a> {
    /// A generated column, by name.
    Generated(&'a str),
    /// A CHECK constraint, by name.
    Check(&'a str),
}

impl RowExprOwner<'_> {
    /// 3763 / 3814: a function whose value depends on more than the row.
    fn disallowed_function(self, f: &str) -> SqlError {
        match self {
            RowExprOwner::Generated(c) => SqlError::new(
                3763,
                "HY000",
                format!("Expression of generated column '{c}' contains a disallowed function: {f}."),
            ),
            RowExprOwner::Check(n) => SqlError::new(
                3814,
                "HY000",
                format!("An expression of a check constraint '{n}' contains disallowed function: {f}."),
            ),
        }
    }
    /// 3102 / 3815: a subquery (or another unnamed disallowed construct).
    fn function_not_allowed(self) -> SqlError {
        match self {
            RowExprOwner::Generated(c) => function_not_allowed(c),
            RowExprOwner::Check(n) => SqlError::new(
                3815,
                "HY000",
                format!("An expression of a check constraint '{n}' contains disallowed function."),
            ),
        }
    }
    /// 3765 / 3816: a user or system variable.
    fn variables(self) -> SqlError {
        match self {
            RowExprOwner::Generated(c) => SqlError::new(
                3765,
                "HY000",
                format!("Expression of generated column '{c}' cannot refer user or system variables."),
            ),
            RowExprOwner::Check(n) => SqlError::new(
                3816,
                "HY000",
                format!("An expression of a check constraint '{n}' cannot refer to a user or system variable."),
            ),
        }
    }
}

/// Refuse functions whose value depends on more than the row, and subqueries.
pub fn disallowed_functions(e: &Expr, owner: RowExprOwner<'_>) -> Result<(), SqlError> {
    let mut err: Option<SqlError> = None;
    let _ = ast::visit_expressions(e, |x| {
        let banned = match x {
            Expr::Function(f) => {
                let name = f.name.0.last().map(|p| p.to_string()).unwrap_or_default();
                let argc = match &f.args {
                    ast::FunctionArguments::List(l) => l.args.len(),
                    _ => 0,
                };
                banned_function(&name, argc)
            }
            // CURRENT_DATE and friends without parentheses.
            Expr::Identifier(id) if id.quote_style.is_none() => banned_function(&id.value, 0)
                .filter(|_| id.value.to_ascii_lowercase().starts_with("current_") || id.value.starts_with("local")),
            Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => {
                err = Some(owner.function_not_allowed());
                return ControlFlow::Break(());
            }
            _ => None,
        };
        match banned {
            Some(f) => {
                err = Some(owner.disallowed_function(f));
                ControlFlow::Break(())
            }
            None => ControlFlow::Continue(()),
        }
    });
    err.map_or(Ok(()), Err)
}

/// 3102 ER_GENERATED_COLUMN_FUNCTION_IS_NOT_ALLOWED.
fn function_not_allowed(column: &str) -> SqlError {
    SqlError::new(3102, "HY000", format!("Expression of generated column '{column}' contains a disallowed function."))
}

// ---------------------------------------------------------------- compiling

pub fn parse(text: &str) -> Result<Expr, SqlError> {
    sqlparser::parser::Parser::new(&crate::engine::dialect::NorrMySql)
        .try_with_sql(text)
        .and_then(|mut p| p.parse_expr())
        .map_err(|e| SqlError::parse(e.to_string()))
}

/// The scope of a table's row: column i is `CExpr::Col(i)`.
pub fn row_scope(columns: &[ColumnDef], metas: &[SqlColumnMeta]) -> Scope {
    Scope {
        cols: columns
            .iter()
            .zip(metas)
            .map(|(c, m)| ScopeCol {
                table: String::new(),
                name: if m.hidden { "\u{0}hidden".into() } else { c.name.clone() },
                ty: SqlType { json: m.sql_type == "json", ..column_sqltype(&c.ty) },
                enums: EnumSet::parse_sql_type(
                    &m.sql_type,
                    c.ty.is_text() && c.ty.collation() == Collation::CaseInsensitive,
                )
                .map(Arc::new),
                default: None,
            })
            .collect(),
        merged: vec![],
    }
}

/// Refuses subqueries and variables while compiling.
#[derive(Default)]
struct GenHost {
    variables: bool,
}

impl SubqueryHost for GenHost {
    fn add_subquery(&mut self, _q: &ast::Query, _k: SubKind, _o: &Scope) -> Result<(usize, SqlType), SqlError> {
        Err(SqlError::new(3102, "HY000", "subquery"))
    }
    fn sysvar(&mut self, _n: &str, _g: bool) -> usize {
        self.variables = true;
        0
    }
    fn uservar(&mut self, _n: &str) -> usize {
        self.variables = true;
        0
    }
}

/// Compile a row expression over `scope` (see `row_scope`), refusing
/// subqueries and variables with `owner`'s errors.
pub fn compile(e: &Expr, scope: &Scope, owner: RowExprOwner<'_>) -> Result<CExpr, SqlError> {
    let pm = ParamMap::default();
    let mut host = GenHost::default();
    let mut c = Compiler {
        scope,
        outer: None,
        params: &pm,
        clause: CLAUSE,
        aggs: None,
        agg_base: 0,
        aliases: &[],
        host: &mut host,
    };
    let compiled = c.compile(e).map_err(|err| if err.code == 3102 { owner.function_not_allowed() } else { err })?;
    if host.variables {
        return Err(owner.variables());
    }
    Ok(compiled.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(text: &str) -> String {
        canonical(&parse(text).expect("parses"))
    }

    #[test]
    fn canonical_text_is_mysqls_and_a_fixed_point() {
        assert_eq!(canon("a+b"), "(`a` + `b`)");
        assert_eq!(canon("(a + b) * 2"), "((`a` + `b`) * 2)");
        assert_eq!(canon("t.a"), "`a`");
        for text in ["a+b", "(a + b) * 2", "concat(a, '-', b)", "doc->>'$.name'", "-(a)", "a IS NULL", "`a``b` + 1"] {
            let once = canon(text);
            assert_eq!(canon(&once), once, "{text}");
        }
    }

    #[test]
    fn disallowed_functions_name_mysqls_function() {
        let e = |t: &str| {
            disallowed_functions(&parse(t).expect("parses"), RowExprOwner::Generated("c"))
                .map_err(|e| (e.code, e.message))
        };
        assert_eq!(e("RAND()").unwrap_err().0, 3763);
        assert!(e("NOW()").unwrap_err().1.ends_with("disallowed function: now."));
        assert!(e("CURRENT_TIMESTAMP").unwrap_err().1.ends_with("disallowed function: now."));
        assert_eq!(e("a + (SELECT 1)").unwrap_err().0, 3102);
        assert!(e("UNIX_TIMESTAMP(d) + a").is_ok());
        assert_eq!(e("UNIX_TIMESTAMP()").unwrap_err().0, 3763);
        assert!(e("current + 1").is_ok());
    }
}
