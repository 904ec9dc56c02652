//! The `TABLE t` and `VALUES ROW(...), ...` query bodies (MySQL 8.0.19+).
//! Owner: query engineer.
//!
//! `TABLE t` is `SELECT * FROM t` in MySQL, with the same result columns:
//! it is compiled as that SELECT. sqlparser parses it only inside a query
//! body and not reliably there (see `rewrite_statement`), so the statement
//! text says `SELECT * FROM` instead before parsing; `table_select` serves
//! a `SetExpr::Table` that still reaches the compiler.
//!
//! `VALUES ROW(...), ...` is a query of constant-free rows: columns are
//! named `column_0`, `column_1`, ... and typed as a UNION of the rows would
//! type them. Rows of literals become one constant source; otherwise each row
//! is a one-row SELECT and the rows are joined by UNION ALL in a balanced tree
//! (depth log2(rows), so a long VALUES list cannot exhaust the stack).

use crate::engine::expr::compile::{Compiler, Scope};
use crate::engine::expr::{CExpr, SqlType};
use crate::engine::functions::unify;
use crate::engine::query::{empty_select, QueryNode, SetOpPlan, Source, SourceKind, StmtCompiler};
use crate::types::{ColumnMeta, SqlError};
use norr_signals::Value;
use sqlparser::ast;

/// The tables of the `TABLE t` bodies of `body` (a UNION's too), which
/// `ast::visit_relations` does not see: for text sqlparser parses without
/// `rewrite_statement` (a view's definition).
pub fn body_tables(body: &ast::SetExpr, out: &mut Vec<ast::ObjectName>) {
    match body {
        ast::SetExpr::Table(t) => {
            if let Some(table) = &t.table_name {
                let mut name: Vec<ast::Ident> = t.schema_name.iter().map(|s| ast::Ident::new(s.clone())).collect();
                name.push(ast::Ident::new(table.clone()));
                out.push(ast::ObjectName::from(name));
            }
        }
        ast::SetExpr::SetOperation { left, right, .. } => {
            body_tables(left, out);
            body_tables(right, out);
        }
        _ => {}
    }
}

/// `TABLE t` as the SELECT it stands for.
pub fn table_select(t: &ast::Table) -> Result<ast::Select, SqlError> {
    let Some(table) = &t.table_name else { return Err(crate::engine::error_map::parse_error_near("TABLE")) };
    let mut name = Vec::with_capacity(2);
    if let Some(s) = &t.schema_name {
        name.push(ast::Ident::new(s.clone()));
    }
    name.push(ast::Ident::new(table.clone()));
    let template = sqlparser::parser::Parser::parse_sql(&crate::engine::dialect::NorrMySql, "SELECT * FROM t")
        .map_err(|e| SqlError::internal(format!("TABLE template: {e}")))?;
    let Some(ast::Statement::Query(q)) = template.into_iter().next() else {
        return Err(SqlError::internal("TABLE template is not a query"));
    };
    let ast::SetExpr::Select(mut sel) = *q.body else { return Err(SqlError::internal("TABLE template body")) };
    match sel.from.first_mut().map(|f| &mut f.relation) {
        Some(ast::TableFactor::Table { name: n, .. }) => *n = ast::ObjectName::from(name),
        _ => return Err(SqlError::internal("TABLE template FROM")),
    }
    Ok(*sel)
}

/// `TABLE` where a query body starts (the statement's first word, after
/// `(`, after UNION / EXCEPT / INTERSECT [ALL | DISTINCT], an INSERT's
/// source) rewritten to
/// `SELECT * FROM`; None when there is none. sqlparser parses `TABLE t` only
/// inside a query body and reads three tokens for it whatever follows (so
/// `IN (TABLE t)` loses its `)`), hence the text rewrite.
pub fn rewrite_statement(sql: &str) -> Option<String> {
    let words = crate::engine::parse_ext::words_with_pos(sql);
    let is = |k: usize, w: &str| words.get(k).is_some_and(|&(s, e, _)| sql[s..e].eq_ignore_ascii_case(w));
    let set_op = |k: usize| is(k, "UNION") || is(k, "EXCEPT") || is(k, "INTERSECT");
    // `INSERT [INTO] t [(cols)] TABLE u`: the source, at the top level.
    let insert = is(0, "INSERT") || is(0, "REPLACE");
    let mut out = String::new();
    let mut copied = 0;
    for (k, &(s, e, depth)) in words.iter().enumerate() {
        if !sql[s..e].eq_ignore_ascii_case("TABLE") {
            continue;
        }
        let body_start = (k == 0 && sql[..s].trim().is_empty())
            || sql[..s].trim_end().ends_with('(')
            || (k >= 1 && set_op(k - 1))
            || (k >= 2 && (is(k - 1, "ALL") || is(k - 1, "DISTINCT")) && set_op(k - 2))
            || (insert && depth == 0);
        if body_start {
            out.push_str(&sql[copied..s]);
            out.push_str("SELECT * FROM");
            copied = e;
        }
    }
    if copied == 0 {
        return None;
    }
    out.push_str(&sql[copied..]);
    Some(out)
}

/// Compile a VALUES query body.
pub fn compile_values(c: &mut StmtCompiler, v: &ast::Values) -> Result<QueryNode, SqlError> {
    // Outside INSERT, MySQL only has the ROW(...) form.
    if !v.explicit_row {
        return Err(crate::engine::error_map::parse_error_near(&v.to_string()));
    }
    let width = v.rows.first().map_or(0, |r| r.content.len());
    let scope = Scope::default();
    let params = c.params.clone();
    let mut cells: Vec<Vec<(CExpr, SqlType)>> = Vec::with_capacity(v.rows.len());
    for (i, r) in v.rows.iter().enumerate() {
        if r.content.is_empty() {
            return Err(SqlError::new(
                3942,
                "HY000",
                "Each row of a VALUES clause must have at least one column, unless when used as source in an INSERT statement.",
            ));
        }
        if r.content.len() != width {
            return Err(SqlError::new(
                1136,
                "21S01",
                format!("Column count doesn't match value count at row {}", i + 1),
            ));
        }
        let mut row = Vec::with_capacity(width);
        for x in &r.content {
            if matches!(x, ast::Expr::Identifier(id) if id.value.eq_ignore_ascii_case("DEFAULT")) {
                return Err(SqlError::new(
                    3943,
                    "HY000",
                    "A VALUES clause cannot use DEFAULT values, unless used as a source in an INSERT statement.",
                ));
            }
            let mut comp = Compiler::plain(&scope, None, &params, "field list", c);
            row.push(comp.compile(x)?);
        }
        cells.push(row);
    }
    let types: Vec<SqlType> = (0..width).map(|k| unify(&cells.iter().map(|r| r[k].1).collect::<Vec<_>>())).collect();
    let columns: Vec<ColumnMeta> = types
        .iter()
        .enumerate()
        .map(|(k, t)| {
            let mut m = ColumnMeta::expr(&format!("column_{k}"), t.field_type());
            m.decimals = t.decimals;
            m
        })
        .collect();
    if cells.iter().flatten().all(|(e, _)| matches!(e, CExpr::Lit(_))) {
        let rows: Vec<Vec<Value>> = cells
            .into_iter()
            .map(|r| r.into_iter().map(|(e, _)| if let CExpr::Lit(v) = e { v } else { Value::Null }).collect())
            .collect();
        return Ok(QueryNode::Select(Box::new(one_select(SourceKind::Rows(rows), width, &columns, &types))));
    }
    let leaves: Vec<QueryNode> = cells
        .into_iter()
        .map(|r| {
            let mut p = one_select(SourceKind::Rows(vec![vec![]]), 0, &columns, &types);
            p.proj = r.into_iter().map(|(e, _)| e).collect();
            QueryNode::Select(Box::new(p))
        })
        .collect();
    Ok(union_all(leaves, &columns, &types))
}

/// A SELECT of `width` plain columns over one source.
fn one_select(
    kind: SourceKind,
    width: usize,
    columns: &[ColumnMeta],
    types: &[SqlType],
) -> crate::engine::query::SelectPlan {
    let mut p = empty_select(&[], &[]);
    p.sources = vec![Source {
        alias: String::new(),
        kind,
        base: 0,
        width,
        left_join: false,
        nested: false,
        on: vec![],
        lookup: None,
    }];
    p.width = width;
    p.proj = (0..width).map(CExpr::Col).collect();
    p.types = types.to_vec();
    p.columns = columns.to_vec();
    p
}

/// UNION ALL of `nodes` (at least one) as a balanced tree.
fn union_all(mut nodes: Vec<QueryNode>, columns: &[ColumnMeta], types: &[SqlType]) -> QueryNode {
    debug_assert!(!nodes.is_empty());
    if nodes.len() == 1 {
        return nodes.remove(0);
    }
    let right = nodes.split_off(nodes.len() / 2);
    QueryNode::SetOp(Box::new(SetOpPlan {
        left: union_all(nodes, columns, types),
        right: union_all(right, columns, types),
        distinct: false,
        columns: columns.to_vec(),
        types: types.to_vec(),
        order: vec![],
        limit: None,
        offset: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::rewrite_statement;

    #[test]
    fn table_becomes_select_star_only_where_a_query_body_starts() {
        assert_eq!(rewrite_statement("TABLE t ORDER BY a").as_deref(), Some("SELECT * FROM t ORDER BY a"));
        assert_eq!(
            rewrite_statement("select 1 union all table t").as_deref(),
            Some("select 1 union all SELECT * FROM t")
        );
        assert_eq!(
            rewrite_statement("SELECT a FROM u WHERE a IN ( table t)").as_deref(),
            Some("SELECT a FROM u WHERE a IN ( SELECT * FROM t)")
        );
        assert_eq!(rewrite_statement("CREATE TABLE t (a INT)"), None);
        assert_eq!(rewrite_statement("SELECT 'TABLE t' FROM `table`"), None);
        assert_eq!(rewrite_statement("INSERT INTO t SELECT * FROM u"), None);
        assert_eq!(
            rewrite_statement("INSERT INTO t (a) TABLE u").as_deref(),
            Some("INSERT INTO t (a) SELECT * FROM u")
        );
    }
}
