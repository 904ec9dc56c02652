//! FOUND_ROWS(), SQL_CALC_FOUND_ROWS and ROW_COUNT(), as MySQL 8.0:
//!
//! * after a SELECT, FOUND_ROWS() is the number of rows it returned, or, with
//!   `SQL_CALC_FOUND_ROWS`, the number it would have returned without its
//!   LIMIT;
//! * ROW_COUNT() is -1 after a statement that returned rows (or failed), the
//!   affected rows after INSERT / UPDATE / DELETE (as the client was told,
//!   so CLIENT_FOUND_ROWS counts matched rows), 0 after DDL and SET.
//!
//! Both are session state, set after every statement (`record`), read by the
//! next. The functions compile to reads of pseudo system variables whose
//! names cannot be written as `@@name` (they contain parentheses), so they
//! ride on the per-statement sysvar snapshot (`exec::make_ctx`): nothing is
//! added to the evaluation of statements that do not call them.
//! SQL_CALC_FOUND_ROWS and FOUND_ROWS() are deprecated in MySQL 8.0.17 and
//! answer warning 1287, as there.

use crate::engine::expr::value::Warnings;
use crate::engine::{query, Engine};
use crate::types::{QueryOutput, Session, SqlError, Warning, WarningLevel};
use norr_signals::Value;
use sqlparser::ast::{self, SetExpr};

/// The pseudo system variable FOUND_ROWS() reads.
pub const FOUND_ROWS_VAR: &str = "found_rows()";
/// The pseudo system variable ROW_COUNT() reads.
pub const ROW_COUNT_VAR: &str = "row_count()";

const CALC_DEPRECATED: &str = "'SQL_CALC_FOUND_ROWS' is deprecated and will be removed in a future release. \
                               Consider using two separate queries instead.";
const FOUND_ROWS_DEPRECATED: &str = "'FOUND_ROWS()' is deprecated and will be removed in a future release. \
                                     Consider using COUNT(*) instead.";

/// The pseudo variable a function call of `name` (lower case) reads, if any.
pub fn function_var(name: &str) -> Option<&'static str> {
    match name {
        "found_rows" => Some(FOUND_ROWS_VAR),
        "row_count" => Some(ROW_COUNT_VAR),
        _ => None,
    }
}

/// The value of a pseudo variable for `get_system_var` (None: not one).
pub fn pseudo_value(s: &Session, name: &str) -> Option<Value> {
    match name {
        FOUND_ROWS_VAR => Some(Value::Int(i64::try_from(s.found_rows).unwrap_or(i64::MAX))),
        ROW_COUNT_VAR => Some(Value::Int(s.row_count)),
        _ => None,
    }
}

/// A statement reads pseudo variable `name`: MySQL's deprecation warning.
pub fn note_read(name: &str, w: &mut Warnings) {
    if name == FOUND_ROWS_VAR {
        w.push(1287, FOUND_ROWS_DEPRECATED.to_string());
    }
}

/// After every statement: what the next one's FOUND_ROWS() / ROW_COUNT() see.
/// Only a SELECT (`select`) sets FOUND_ROWS(), not SHOW (as MySQL).
pub fn record(s: &mut Session, r: &Result<QueryOutput, SqlError>, select: bool) {
    match r {
        Ok(QueryOutput::Rows { rows, .. }) => {
            let calc = s.calc_found_rows.take();
            if select {
                s.found_rows = calc.unwrap_or(rows.len() as u64);
            }
            s.row_count = -1;
        }
        Ok(QueryOutput::Streamed { rows }) => {
            let calc = s.calc_found_rows.take();
            if select {
                s.found_rows = calc.unwrap_or(*rows);
            }
            s.row_count = -1;
        }
        Ok(QueryOutput::Ok { affected_rows, .. }) => {
            s.calc_found_rows = None;
            s.row_count = i64::try_from(*affected_rows).unwrap_or(i64::MAX);
        }
        Err(_) => {
            s.calc_found_rows = None;
            s.row_count = -1;
        }
    }
}

fn first_select(e: &SetExpr) -> Option<&ast::Select> {
    match e {
        SetExpr::Select(s) => Some(s),
        SetExpr::Query(q) => first_select(&q.body),
        SetExpr::SetOperation { left, .. } => first_select(left),
        _ => None,
    }
}

/// `SELECT SQL_CALC_FOUND_ROWS ...` (for a UNION: in its first SELECT, as MySQL).
pub fn calc_requested(q: &ast::Query) -> bool {
    first_select(&q.body).and_then(|s| s.select_modifiers.as_ref()).is_some_and(|m| m.sql_calc_found_rows)
}

fn first_select_mut(e: &mut SetExpr) -> Option<&mut ast::Select> {
    match e {
        SetExpr::Select(s) => Some(s),
        SetExpr::Query(q) => first_select_mut(&mut q.body),
        SetExpr::SetOperation { left, .. } => first_select_mut(left),
        _ => None,
    }
}

/// The query without its SQL_CALC_FOUND_ROWS (which the query compiler
/// refuses with 1234: anywhere else it is misplaced).
pub fn without_calc(q: &ast::Query) -> ast::Query {
    let mut q = q.clone();
    if let Some(m) = first_select_mut(&mut q.body).and_then(|s| s.select_modifiers.as_mut()) {
        m.sql_calc_found_rows = false;
    }
    q
}

/// Run a `SELECT SQL_CALC_FOUND_ROWS ...`: the rows as asked, and the count
/// without LIMIT for the next FOUND_ROWS(). The count comes from a second
/// run of the query without its LIMIT / OFFSET (MySQL also reads every row).
pub async fn execute_calc(
    engine: &Engine,
    s: &mut Session,
    q: &ast::Query,
    params: &[Value],
) -> Result<QueryOutput, SqlError> {
    let q = &without_calc(q);
    let out = query::execute_query(engine, s, q, params).await?;
    let mut warnings = std::mem::take(&mut s.warnings);
    let total = match (&out, &q.limit_clause) {
        (QueryOutput::Rows { rows, .. }, None) => rows.len() as u64,
        (_, _) => {
            let mut all = q.clone();
            all.limit_clause = None;
            match query::execute_query(engine, s, &all, params).await? {
                QueryOutput::Rows { rows, .. } => rows.len() as u64,
                QueryOutput::Ok { .. } | QueryOutput::Streamed { .. } => 0,
            }
        }
    };
    warnings.insert(0, Warning { level: WarningLevel::Warning, code: 1287, message: CALC_DEPRECATED.to_string() });
    s.warnings = warnings;
    s.calc_found_rows = Some(total);
    Ok(out)
}
