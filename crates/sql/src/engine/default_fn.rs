//! `DEFAULT(col)` inside expressions (SELECT lists, `INSERT ... VALUES
//! (DEFAULT(c) + 1)`, `UPDATE ... SET c = DEFAULT(c)`) and the row buffer
//! INSERT's VALUES start from (`insert_values`): each base-table
//! column of a scope carries what its default is (`ScopeCol::default`),
//! read here from the table's metadata, so the expression compiler answers
//! without the catalog. The rule is MySQL's: a column declared NOT NULL
//! without a DEFAULT clause has none (1364), except an AUTO_INCREMENT column,
//! whose default is 0; a nullable column without one defaults to NULL.

use crate::engine::catalog::{SqlDefault, SqlTable};
use crate::engine::expr::compile::ColDefault;
use norr_signals::Value;

/// The default of column `i` of `t`.
pub fn of_column(t: &SqlTable, i: usize) -> ColDefault {
    let c = &t.def.columns[i];
    match &t.meta.columns[i].default {
        SqlDefault::CurrentTimestamp { .. } => ColDefault::Now,
        SqlDefault::Null => ColDefault::Const(Value::Null),
        SqlDefault::Literal { .. } => ColDefault::Const(c.default.clone().unwrap_or(Value::Null)),
        SqlDefault::None => match &c.default {
            Some(d) => ColDefault::Const(d.clone()),
            None if c.nullable => ColDefault::Const(Value::Null),
            None if c.auto_increment => ColDefault::Const(Value::Int(0)),
            None => ColDefault::Missing,
        },
    }
}
