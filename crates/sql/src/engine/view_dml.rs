//! INSERT / UPDATE / DELETE through a view.
//!
//! A view is updatable when it is simple (`view_expand::MergeInfo`: one
//! table, no aggregate, DISTINCT, GROUP BY, UNION, LIMIT or subquery). A
//! computed column of it (`v * 2`) cannot be written (1348), and a view with
//! one takes no INSERT (1471), as in MySQL. The statement is rewritten onto the view's table (the
//! view's columns become the table's, the view's WHERE is ANDed to the
//! statement's), down a chain of views over views, and then run as any
//! statement on a table. WITH CHECK OPTION is checked before the write by a
//! query for rows the write would move out of the view (UPDATE) or by
//! evaluating the view's conditions over the inserted values (INSERT): 1369.
//!
//! Not supported: INSERT ... SELECT into a view WITH CHECK OPTION (1235).

use crate::engine::expr::compile::ParamMap;
use crate::engine::view_expand::{self, and, ident_parts, qualified_where, rewrite_columns, LoadedView, ViewSet};
use crate::engine::views::CheckOption;
use crate::engine::{dml, error_map, query, Engine};
use crate::types::{QueryOutput, Session, SqlError};
use norr_signals::Value;
use sqlparser::ast::{self, Expr, Ident, ObjectName, Statement, TableFactor};
use std::sync::Arc;

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Insert,
    Update,
    Delete,
}

fn not_updatable(kind: Kind, name: &str) -> SqlError {
    match kind {
        Kind::Insert => {
            SqlError::new(1471, "HY000", format!("The target table {name} of the INSERT is not insertable-into"))
        }
        Kind::Update => SqlError::new(1288, "HY000", format!("The target table {name} of the UPDATE is not updatable")),
        Kind::Delete => SqlError::new(1288, "HY000", format!("The target table {name} of the DELETE is not updatable")),
    }
}

fn not_updatable_column(name: &str) -> SqlError {
    SqlError::new(1348, "HY000", format!("Column '{name}' is not updatable"))
}

fn key(n: &ObjectName, s: &Session) -> Option<(String, String)> {
    match ident_parts(n).as_slice() {
        [t] => Some((s.current_db.as_deref()?.to_string(), t.clone())),
        [d, t] => Some((d.clone(), t.clone())),
        _ => None,
    }
}

/// The target table of a single-table statement: (name, alias).
fn target(st: &mut Statement) -> Option<(&mut ObjectName, Option<String>)> {
    match st {
        Statement::Insert(i) => match &mut i.table {
            ast::TableObject::TableName(n) => Some((n, None)),
            _ => None,
        },
        Statement::Update(u) if u.table.joins.is_empty() && u.from.is_none() => match &mut u.table.relation {
            TableFactor::Table { name, alias, .. } => {
                let a = alias.as_ref().map(|a| a.name.value.clone());
                Some((name, a))
            }
            _ => None,
        },
        Statement::Delete(d) if d.tables.is_empty() && d.using.is_none() => {
            let from = match &mut d.from {
                ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
            };
            match from.as_mut_slice() {
                [one] if one.joins.is_empty() => match &mut one.relation {
                    TableFactor::Table { name, alias, .. } => {
                        let a = alias.as_ref().map(|a| a.name.value.clone());
                        Some((name, a))
                    }
                    _ => None,
                },
                _ => None,
            }
        }
        _ => None,
    }
}

fn set_alias(st: &mut Statement, alias: &str) {
    let tf = match st {
        Statement::Update(u) => &mut u.table.relation,
        Statement::Delete(d) => match &mut d.from {
            ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => &mut f[0].relation,
        },
        _ => return,
    };
    if let TableFactor::Table { alias: a, .. } = tf {
        *a = Some(ast::TableAlias { explicit: true, name: Ident::new(alias), columns: vec![], at: None });
    }
}

fn unknown_col(c: &str) -> SqlError {
    error_map::unknown_column(c, "field list")
}

/// Rewrite one level: the statement's target `lv` becomes its base. `conds`
/// (check conditions over `alias.<view column>`) follow onto the base.
fn rewrite_level(
    st: &mut Statement,
    lv: &LoadedView,
    alias: &str,
    conds: &mut Vec<Expr>,
    cascade: &mut bool,
    kind: Kind,
) -> Result<(), SqlError> {
    let m = lv.merge.as_ref().ok_or_else(|| not_updatable(kind, &lv.view.name))?;
    // A view with a computed column takes no INSERT (MySQL's rule: every
    // column must be a column of the table); UPDATE and DELETE are fine.
    if kind == Kind::Insert && (0..m.cols.len()).any(|i| m.plain(i).is_none()) {
        return Err(not_updatable(kind, &lv.view.name));
    }
    let view_cols = &lv.view.meta.columns;
    // The base column a written view column is.
    let base_of = |c: &str| -> Result<String, SqlError> {
        let i = view_cols.iter().position(|v| v.eq_ignore_ascii_case(c)).ok_or_else(|| unknown_col(c))?;
        m.plain(i).map(str::to_string).ok_or_else(|| not_updatable_column(&view_cols[i]))
    };
    let rename_target = |t: &mut ast::AssignmentTarget| -> Result<(), SqlError> {
        let names: Vec<&mut ObjectName> = match t {
            ast::AssignmentTarget::ColumnName(n) => vec![n],
            ast::AssignmentTarget::Tuple(v) => v.iter_mut().collect(),
        };
        for n in names {
            let parts = ident_parts(n);
            let col = parts.last().cloned().unwrap_or_default();
            *n = ObjectName::from(vec![Ident::new(base_of(&col)?)]);
        }
        Ok(())
    };
    let fail = || unknown_col("?");
    for c in conds.iter_mut() {
        if !rewrite_columns(c, alias, view_cols, &m.cols) {
            return Err(view_expand::view_error(&lv.view.db, &lv.view.name));
        }
    }
    let c = lv.view.meta.check;
    if c == CheckOption::Cascaded {
        *cascade = true;
    }
    if c != CheckOption::None || *cascade {
        conds.extend(qualified_where(m, alias));
    }
    match st {
        Statement::Insert(i) => {
            let listed: Vec<String> = if i.columns.is_empty() {
                view_cols.clone()
            } else {
                i.columns.iter().map(|n| ident_parts(n).last().cloned().unwrap_or_default()).collect()
            };
            i.columns = listed
                .iter()
                .map(|c| base_of(c).map(|b| ObjectName::from(vec![Ident::new(b)])))
                .collect::<Result<_, _>>()?;
            if let Some(ast::OnInsert::DuplicateKeyUpdate(list)) = &mut i.on {
                for a in list {
                    rename_target(&mut a.target)?;
                }
            }
            for a in &mut i.assignments {
                rename_target(&mut a.target)?;
            }
        }
        Statement::Update(u) => {
            for a in &mut u.assignments {
                if !rewrite_columns(&mut a.value, alias, view_cols, &m.cols) {
                    return Err(fail_col(&a.value));
                }
                rename_target(&mut a.target)?;
            }
            if let Some(w) = &mut u.selection {
                if !rewrite_columns(w, alias, view_cols, &m.cols) {
                    return Err(fail_col(w));
                }
            }
            for o in &mut u.order_by {
                if !rewrite_columns(&mut o.expr, alias, view_cols, &m.cols) {
                    return Err(fail());
                }
            }
            u.selection = and(u.selection.take(), qualified_where(m, alias));
        }
        Statement::Delete(d) => {
            if let Some(w) = &mut d.selection {
                if !rewrite_columns(w, alias, view_cols, &m.cols) {
                    return Err(fail_col(w));
                }
            }
            for o in &mut d.order_by {
                if !rewrite_columns(&mut o.expr, alias, view_cols, &m.cols) {
                    return Err(fail());
                }
            }
            d.selection = and(d.selection.take(), qualified_where(m, alias));
        }
        _ => return Err(SqlError::internal("not a write statement")),
    }
    Ok(())
}

/// 1054 naming the first column reference of `e` that is not a view column.
fn fail_col(e: &Expr) -> SqlError {
    let mut name = String::from("?");
    let _ = ast::visit_expressions(e, |x| {
        match x {
            Expr::Identifier(i) => name = i.value.clone(),
            Expr::CompoundIdentifier(p) => name = p.iter().map(|i| i.value.clone()).collect::<Vec<_>>().join("."),
            _ => return std::ops::ControlFlow::Continue(()),
        }
        std::ops::ControlFlow::Break(())
    });
    error_map::unknown_column(&name, "where clause")
}

/// Run `q` (built from pieces of `orig`, whose placeholders it keeps) and
/// say whether it returned a row.
async fn any_row(
    e: &Engine,
    s: &mut Session,
    orig: &Statement,
    q: &ast::Query,
    params: &[Value],
) -> Result<bool, SqlError> {
    let tables = query::resolve_tables(e, s, q).await?;
    let mut c = query::StmtCompiler::new(&tables, ParamMap::from_statement(orig));
    let root = c.compile_query(q, None, crate::engine::row_lock::RowLock::NONE)?;
    let compiled = c.finish(root);
    match query::execute_prepared_query(e, s, &compiled, params).await? {
        QueryOutput::Rows { rows, .. } => Ok(!rows.is_empty()),
        QueryOutput::Ok { .. } => Ok(false),
        // Not made by `execute_prepared_query`.
        QueryOutput::Streamed { .. } => Err(SqlError::internal("a result streamed inside a statement")),
    }
}

fn template() -> ast::Query {
    match crate::engine::parse_sqlparser("SELECT 1 LIMIT 1") {
        Ok(Statement::Query(q)) => *q,
        _ => unreachable!("a constant query parses"),
    }
}

fn conjunction(conds: &[Expr]) -> Option<Expr> {
    conds.iter().cloned().fold(None, |acc, c| and(acc, Some(c)))
}

/// Replace `alias.col` in `e` by the expression `value_of(col)` gives.
fn substitute(e: &mut Expr, alias: &str, value_of: &dyn Fn(&str) -> Option<Expr>) {
    let _ = ast::visit_expressions_mut(e, |x| {
        if let Expr::CompoundIdentifier(p) = x {
            if p.len() == 2 && p[0].value == alias {
                if let Some(v) = value_of(&p[1].value) {
                    *x = Expr::Nested(Box::new(v));
                }
            }
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
}

fn check_failed(db: &str, name: &str) -> SqlError {
    SqlError::new(1369, "HY000", format!("CHECK OPTION failed '{db}.{name}'"))
}

/// An INSERT / UPDATE / DELETE whose table did not resolve (`first_err`,
/// 1146): run it through the views it names, or give `first_err` back.
pub async fn execute(
    e: &Engine,
    s: &mut Session,
    st: &Statement,
    params: &[Value],
    first_err: SqlError,
) -> Result<QueryOutput, SqlError> {
    let set = view_expand::load(e, s.current_db.as_deref(), st).await?;
    if set.is_empty() {
        return Err(first_err);
    }
    let kind = match st {
        Statement::Insert(_) => Kind::Insert,
        Statement::Update(_) => Kind::Update,
        _ => Kind::Delete,
    };
    let mut st2 = st.clone();
    let (top, conds, alias) = rewrite_target(&mut st2, s, &set, kind)?;
    let db = s.current_db.as_deref().map(str::to_string);
    view_expand::expand(&mut st2, &set, db.as_deref())?;
    if let (Some(top), false) = (&top, conds.is_empty()) {
        enforce_check(e, s, st, &st2, &conds, &alias, top, params).await?;
    }
    let r = match kind {
        Kind::Insert => dml::execute_insert(e, s, &st2, params).await,
        Kind::Update => dml::execute_update(e, s, &st2, params, None).await,
        Kind::Delete => dml::execute_delete(e, s, &st2, params, None).await,
    };
    match r {
        Err(err) if matches!(err.code, 1146) => Err(view_expand::blame(e, s, &set).await.unwrap_or(err)),
        r => r,
    }
}

/// What `rewrite_target` found: the top view (None when the target is a
/// table), the check conditions and the alias the conditions use.
type Rewritten = (Option<Arc<LoadedView>>, Vec<Expr>, String);

/// Rewrite the statement's target down its chain of views.
fn rewrite_target(st: &mut Statement, s: &Session, set: &ViewSet, kind: Kind) -> Result<Rewritten, SqlError> {
    let mut top = None;
    let mut conds = Vec::new();
    let mut cascade = false;
    let mut alias = String::new();
    for _ in 0..crate::engine::views::MAX_VIEW_DEPTH {
        let Some((name, user_alias)) = target(st) else { break };
        let Some(k) = key(name, s) else { break };
        let Some(lv) = set.get(&k).cloned() else { break };
        if top.is_none() {
            alias = match kind {
                // INSERT has no alias: column references (ON DUPLICATE KEY
                // UPDATE) use the table's name.
                Kind::Insert => String::new(),
                _ => user_alias.unwrap_or_else(|| lv.view.name.clone()),
            };
            top = Some(lv.clone());
        }
        if !view_expand::is_updatable(&lv) {
            let top_name = top.as_ref().map(|t| t.view.name.clone()).unwrap_or_default();
            return Err(not_updatable(kind, &top_name));
        }
        let m = lv.merge.as_ref().expect("updatable views merge");
        let cond_alias = if kind == Kind::Insert { "\u{0}new".to_string() } else { alias.clone() };
        rewrite_level(st, &lv, &cond_alias, &mut conds, &mut cascade, kind)?;
        if let Some((name, _)) = target(st) {
            *name = m.base.clone();
        }
        if kind != Kind::Insert {
            set_alias(st, &alias);
        }
    }
    if kind == Kind::Insert {
        alias = "\u{0}new".to_string();
    }
    Ok((top, conds, alias))
}

#[allow(clippy::too_many_arguments)]
async fn enforce_check(
    e: &Engine,
    s: &mut Session,
    orig: &Statement,
    rewritten: &Statement,
    conds: &[Expr],
    alias: &str,
    top: &LoadedView,
    params: &[Value],
) -> Result<(), SqlError> {
    let Some(all) = conjunction(conds) else { return Ok(()) };
    let failed = || check_failed(&top.view.db, &top.view.name);
    match rewritten {
        Statement::Update(u) => {
            // A row the UPDATE changes must still be in the view afterwards:
            // look for one whose new values fail the view's conditions.
            let sets: Vec<(String, Expr)> = u
                .assignments
                .iter()
                .filter_map(|a| match &a.target {
                    ast::AssignmentTarget::ColumnName(n) => ident_parts(n).last().map(|c| (c.clone(), a.value.clone())),
                    _ => None,
                })
                .collect();
            let mut after = all;
            substitute(&mut after, alias, &|c| {
                sets.iter().find(|(n, _)| n.eq_ignore_ascii_case(c)).map(|(_, v)| v.clone())
            });
            let mut q = template();
            let ast::SetExpr::Select(sel) = q.body.as_mut() else { return Err(SqlError::internal("template")) };
            sel.from = vec![u.table.clone()];
            sel.selection = and(u.selection.clone(), Some(Expr::IsNotTrue(Box::new(Expr::Nested(Box::new(after))))));
            if any_row(e, s, orig, &q, params).await? {
                return Err(failed());
            }
        }
        Statement::Insert(i) => {
            let Some(src) = &i.source else { return Ok(()) };
            let ast::SetExpr::Values(values) = src.body.as_ref() else {
                return Err(SqlError::unsupported("INSERT ... SELECT into a view WITH CHECK OPTION"));
            };
            let cols: Vec<String> =
                i.columns.iter().map(|n| ident_parts(n).last().cloned().unwrap_or_default()).collect();
            let mut any_fails: Option<Expr> = None;
            for row in &values.rows {
                let mut c = all.clone();
                substitute(&mut c, alias, &|col| {
                    let v = cols.iter().position(|n| n.eq_ignore_ascii_case(col)).and_then(|p| row.get(p).cloned());
                    Some(v.unwrap_or(Expr::Value(ast::Value::Null.into())))
                });
                let fails = Expr::IsNotTrue(Box::new(Expr::Nested(Box::new(c))));
                any_fails = Some(match any_fails {
                    None => fails,
                    Some(a) => {
                        Expr::BinaryOp { left: Box::new(a), op: ast::BinaryOperator::Or, right: Box::new(fails) }
                    }
                });
            }
            let mut q = template();
            let ast::SetExpr::Select(sel) = q.body.as_mut() else { return Err(SqlError::internal("template")) };
            sel.selection = any_fails;
            if any_row(e, s, orig, &q, params).await? {
                return Err(failed());
            }
        }
        _ => {}
    }
    Ok(())
}
