//! `DEFAULT(col)` inside expressions (SELECT lists, `INSERT ... VALUES
//! (DEFAULT(c) + 1)`, `UPDATE ... SET c = DEFAULT(c)`): each base-table
//! column of a scope carries what its default is (`ScopeCol::default`),
//! read here from the table's metadata, so the expression compiler answers
//! without the catalog. The rule is MySQL's: a column declared NOT NULL
//! without a DEFAULT clause has none (1364), except an AUTO_INCREMENT column,
//! whose default is 0; a nullable column without one defaults to NULL.

use crate::engine::catalog::{SqlDefault, SqlTable};
use crate::engine::expr::compile::{column_sqltype, ColDefault, Scope, ScopeCol, DEFAULT_ONLY};
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

/// The scope of INSERT's VALUES and SET expressions: the row is still being
/// made, so no column can be read there (1054 as before), but `DEFAULT(col)`
/// names the table's columns (found under `DEFAULT_ONLY` names).
pub fn defaults_only(t: &SqlTable) -> Scope {
    let cols = t
        .def
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| ScopeCol {
            table: t.name.to_lowercase(),
            name: format!("{DEFAULT_ONLY}{}", c.name),
            ty: column_sqltype(&c.ty),
            enums: None,
            default: Some(of_column(t, i)),
        })
        .collect();
    Scope { cols, merged: vec![] }
}
