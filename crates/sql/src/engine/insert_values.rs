//! INSERT's VALUES / SET expressions that name a column of the row being
//! made (`INSERT INTO t(a, b) VALUES (1, a * 2)`).
//!
//! MySQL fills a row left to right over a buffer that starts as the table's
//! defaults, so such a name reads the value already given to that column in
//! this row (as stored: converted to the column's type), or the column's
//! default when it has none yet (a later column, one not listed, or one given
//! DEFAULT). An AUTO_INCREMENT column reads 0 until a value is given, since
//! its value is generated after the others; a NOT NULL column without a
//! DEFAULT clause reads its type's implicit default (0, '').
//!
//! Expressions that read no column are evaluated without a row, as before.

use crate::engine::catalog::SqlTable;
use crate::engine::default_fn;
use crate::engine::expr::compile::ColDefault;
use crate::engine::expr::value::Warnings;
use crate::engine::expr::{eval, is_row_independent, CExpr, EvalCtx};
use crate::engine::store::store_col;
use crate::types::SqlError;
use norr_signals::{ColumnId, ColumnType, Decimal, Value};

/// Whether any of `rows` names a column (and so needs the row buffer).
pub fn reads_row(rows: &[Vec<Option<CExpr>>]) -> bool {
    rows.iter().flatten().flatten().any(|e| !is_row_independent(e))
}

/// Evaluate one VALUES row for columns `target` of `t` (None: DEFAULT),
/// each expression seeing the columns set before it (`rowno` for messages).
pub fn eval_row(
    t: &SqlTable,
    target: &[ColumnId],
    exprs: &[Option<CExpr>],
    rowno: u64,
    ctx: &mut EvalCtx<'_>,
) -> Result<Vec<Option<Value>>, SqlError> {
    let mut row = start_row(t, ctx);
    let mut out = Vec::with_capacity(exprs.len());
    for (c, e) in target.iter().zip(exprs) {
        let Some(e) = e else {
            out.push(None);
            continue;
        };
        let v = eval(e, &row, ctx)?;
        let ci = *c as usize;
        row[ci] = if t.def.columns[ci].auto_increment && (v.is_null() || v.as_i64() == Some(0)) {
            Value::Int(0)
        } else {
            // The buffer holds the stored form; a value that does not
            // convert is refused when the row is built, with its message.
            let mut scratch = Warnings::default();
            store_col(t, ci, v.clone(), rowno, ctx.tz.as_deref(), &mut scratch).unwrap_or_else(|_| v.clone())
        };
        out.push(Some(v));
    }
    Ok(out)
}

/// The row buffer before any value is given: each column's default.
fn start_row(t: &SqlTable, ctx: &EvalCtx<'_>) -> Vec<Value> {
    (0..t.def.columns.len())
        .map(|i| {
            let col = &t.def.columns[i];
            if col.auto_increment {
                return Value::Int(0);
            }
            match default_fn::of_column(t, i) {
                ColDefault::Const(v) => v,
                ColDefault::Now => Value::DateTime(ctx.now_local()),
                ColDefault::Missing => implicit_default(&col.ty),
            }
        })
        .collect()
}

/// MySQL's implicit default of a NOT NULL column without a DEFAULT clause.
fn implicit_default(ty: &ColumnType) -> Value {
    match ty {
        t if t.is_unsigned_int() => Value::UInt(0),
        t if t.int_range().is_some() => Value::Int(0),
        ColumnType::Float | ColumnType::Double => Value::Double(0.0),
        ColumnType::Decimal { .. } => Value::Decimal(Decimal { mantissa: 0, scale: 0 }),
        t if t.is_bytes() => Value::Bytes(Vec::new()),
        _ => Value::Null,
    }
}
