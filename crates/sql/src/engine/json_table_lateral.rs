//! Which joins a JSON_TABLE's reference to an earlier table may cross.
//!
//! A JSON_TABLE reads its document from the tables before it (a lateral
//! reference). MySQL refuses such a reference to a table on the left of a
//! RIGHT JOIN whose right side holds the JSON_TABLE (3668): the right side's
//! rows are made first and the referenced table is NULL-extended to them, so
//! there is no row of it to read the document from. INNER, LEFT and comma
//! joins carry the reference.
//!
//! Checked on the statement's FROM before it is compiled, so every query
//! block (SELECT, and the read of a multi-table UPDATE / DELETE) gets the
//! same answer whichever join path compiles it. An unqualified column of the
//! document names the left table when that table (a base table, or another
//! JSON_TABLE) has a column of that name.

use crate::engine::query::Tables;
use crate::types::SqlError;
use sqlparser::ast::{self, Expr, JoinOperator, JsonTableColumn, TableFactor, TableWithJoins};
use std::ops::ControlFlow;

/// 3668 when a JSON_TABLE of `from` reads a table across a RIGHT JOIN.
pub fn check(from: &[TableWithJoins], tables: &Tables) -> Result<(), SqlError> {
    from.iter().try_for_each(|twj| check_item(twj, tables))
}

fn check_item(twj: &TableWithJoins, tables: &Tables) -> Result<(), SqlError> {
    check_nested(&twj.relation, tables)?;
    let mut left = Vec::new();
    leaves(&twj.relation, &mut left);
    for j in &twj.joins {
        check_nested(&j.relation, tables)?;
        let mut right = Vec::new();
        leaves(&j.relation, &mut right);
        if matches!(j.join_operator, JoinOperator::Right(_) | JoinOperator::RightOuter(_)) {
            for f in &right {
                if let TableFactor::JsonTable { json_expr, alias, .. } = f {
                    if reads_any(json_expr, &left, tables) {
                        let name = alias.as_ref().map(|a| a.name.value.as_str()).unwrap_or_default();
                        return Err(SqlError::new(
                            3668,
                            "42000",
                            format!("INNER or LEFT JOIN must be used for LATERAL references made by '{name}'"),
                        ));
                    }
                }
            }
        }
        left.extend(right);
    }
    Ok(())
}

fn check_nested(f: &TableFactor, tables: &Tables) -> Result<(), SqlError> {
    match f {
        TableFactor::NestedJoin { table_with_joins, .. } => check_item(table_with_joins, tables),
        _ => Ok(()),
    }
}

/// The tables (leaves) of a FROM item, through parentheses.
fn leaves<'a>(f: &'a TableFactor, out: &mut Vec<&'a TableFactor>) {
    match f {
        TableFactor::NestedJoin { table_with_joins, .. } => {
            leaves(&table_with_joins.relation, out);
            for j in &table_with_joins.joins {
                leaves(&j.relation, out);
            }
        }
        other => out.push(other),
    }
}

/// Whether `doc` names a column of one of `left`.
fn reads_any(doc: &Expr, left: &[&TableFactor], tables: &Tables) -> bool {
    let mut hit = false;
    let _ = ast::visit_expressions(doc, |e| {
        let named = match e {
            Expr::Identifier(id) => left.iter().any(|f| has_column(f, &id.value, tables)),
            Expr::CompoundIdentifier(parts) if parts.len() >= 2 => {
                let q = &parts[parts.len() - 2].value;
                left.iter().any(|f| name_of(f).is_some_and(|n| n.eq_ignore_ascii_case(q)))
            }
            _ => false,
        };
        hit |= named;
        if hit {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    hit
}

/// The name a column of leaf `f` is qualified by.
fn name_of(f: &TableFactor) -> Option<&str> {
    match f {
        TableFactor::Table { alias: Some(a), .. }
        | TableFactor::Derived { alias: Some(a), .. }
        | TableFactor::JsonTable { alias: Some(a), .. } => Some(&a.name.value),
        TableFactor::Table { name, alias: None, .. } => {
            name.0.last().and_then(|p| p.as_ident()).map(|i| i.value.as_str())
        }
        _ => None,
    }
}

fn has_column(f: &TableFactor, col: &str, tables: &Tables) -> bool {
    match f {
        TableFactor::Table { name, .. } => tables.get(name).is_ok_and(|t| {
            t.def.columns.iter().zip(&t.meta.columns).any(|(c, m)| !m.hidden && c.name.eq_ignore_ascii_case(col))
        }),
        TableFactor::JsonTable { columns, .. } => json_columns(columns).any(|n| n.eq_ignore_ascii_case(col)),
        _ => false,
    }
}

fn json_columns(cols: &[JsonTableColumn]) -> Box<dyn Iterator<Item = &str> + '_> {
    Box::new(cols.iter().flat_map(|c| -> Box<dyn Iterator<Item = &str>> {
        match c {
            JsonTableColumn::ForOrdinality(n) => Box::new(std::iter::once(n.value.as_str())),
            JsonTableColumn::Named(n) => Box::new(std::iter::once(n.name.value.as_str())),
            JsonTableColumn::Nested(n) => json_columns(&n.columns),
        }
    }))
}
