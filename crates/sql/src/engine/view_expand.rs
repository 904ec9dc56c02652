//! Views in statements: every view a statement names is replaced in its AST
//! before compilation, in one of two ways (MySQL's algorithms):
//!
//! * MERGE: a query block whose only source is a simple view (one table; the
//!   view's columns column references or expressions over them, with no
//!   aggregate, window function or subquery; no DISTINCT, GROUP BY or LIMIT)
//!   reads the view's table directly: the block's column references become
//!   the table's columns (or the view column's expression) and the view's
//!   WHERE is ANDed to the block's. The planner then sees `SELECT .. FROM t WHERE
//!   id = 5` and makes a key lookup of it.
//! * Derived table: anywhere else the view becomes `(SELECT ...) AS v (cols)`.
//!
//! Views are looked up only after the statement failed to resolve a name as a
//! table (1146), so statements over tables pay nothing (see `views`).

use crate::engine::catalog::SqlTable;
use crate::engine::dialect::NorrMySql;
use crate::engine::expr::compile::has_aggregate;
use crate::engine::views::{View, ViewStamp, MAX_VIEW_DEPTH};
use crate::engine::{infoschema, Engine};
use crate::types::{Session, SqlError};
use sqlparser::ast::{
    self, Expr, Ident, ObjectName, Query, SelectItem, SetExpr, TableFactor, VisitMut, Visitor, VisitorMut,
};
use sqlparser::parser::Parser;
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;

/// A simple view's reading of its one table (see the module comment).
#[derive(Debug, Clone)]
pub struct MergeInfo {
    /// The table (or view, for a view over a view), qualified.
    pub base: ObjectName,
    /// Per view column: what it is over the base, with base columns as
    /// unqualified identifiers: a plain column (`Expr::Identifier`), or an
    /// expression (`v * 2`), which reads merge too but no write may target.
    pub cols: Vec<Expr>,
    /// The view's WHERE over unqualified base column names.
    pub where_: Option<Expr>,
}

impl MergeInfo {
    /// The base column view column `i` is, if it is a plain column.
    pub fn plain(&self, i: usize) -> Option<&str> {
        match &self.cols[i] {
            Expr::Identifier(id) => Some(&id.value),
            _ => None,
        }
    }
}

/// `e` (over unqualified base columns) with each column qualified by
/// `alias`; an expression is parenthesised, to keep its precedence where it
/// lands.
pub fn qualify(e: &Expr, alias: &str) -> Expr {
    match e {
        Expr::Identifier(i) => Expr::CompoundIdentifier(vec![Ident::new(alias), i.clone()]),
        other => {
            let mut x = other.clone();
            let _ = ast::visit_expressions_mut(&mut x, |y| {
                if let Expr::Identifier(i) = y {
                    *y = Expr::CompoundIdentifier(vec![Ident::new(alias), i.clone()]);
                }
                ControlFlow::<()>::Continue(())
            });
            Expr::Nested(Box::new(x))
        }
    }
}

/// A view named by a statement, ready to put in.
#[derive(Debug, Clone)]
pub struct LoadedView {
    pub view: View,
    pub query: Query,
    pub merge: Option<MergeInfo>,
}

/// The views a statement names, directly or through other views.
#[derive(Default)]
pub struct ViewSet {
    pub map: HashMap<(String, String), Arc<LoadedView>>,
}

impl ViewSet {
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    pub fn get(&self, k: &(String, String)) -> Option<&Arc<LoadedView>> {
        self.map.get(k)
    }
    /// Every view of the set with the definition it was loaded with.
    pub fn stamps(&self) -> Vec<ViewStamp> {
        let mut v: Vec<ViewStamp> = self
            .map
            .values()
            .map(|lv| ViewStamp { db: lv.view.db.clone(), name: lv.view.name.clone(), meta: lv.view.meta.clone() })
            .collect();
        v.sort_by(|a, b| (&a.db, &a.name).cmp(&(&b.db, &b.name)));
        v
    }
}

pub fn view_error(db: &str, name: &str) -> SqlError {
    SqlError::new(
        1356,
        "HY000",
        format!("View '{db}.{name}' references invalid table(s) or column(s) or function(s) or definer/invoker of view lack rights to use them"),
    )
}

/// Parse a stored view's SELECT.
/// A join chain without parentheses reads left to right as in a statement
/// (`join_chain`): the stored text prints such a chain as it was written.
pub fn parse_select(v: &View) -> Result<Query, SqlError> {
    let sql = &v.meta.select_sql;
    let mut p = Parser::new(&NorrMySql).try_with_sql(sql).map_err(|_| view_error(&v.db, &v.name))?;
    let q = p.parse_query().map_err(|_| view_error(&v.db, &v.name))?;
    let mut st = ast::Statement::Query(q);
    crate::engine::join_chain::flatten(sql, &mut st);
    match st {
        ast::Statement::Query(q) => Ok(*q),
        _ => Err(view_error(&v.db, &v.name)),
    }
}

pub fn ident_parts(n: &ObjectName) -> Vec<String> {
    n.0.iter().map(|p| p.as_ident().map(|i| i.value.clone()).unwrap_or_else(|| p.to_string())).collect()
}

/// Names of the CTEs declared anywhere in `stmt` (they shadow tables of the
/// same unqualified name, as `query::resolve_tables` takes them).
pub fn cte_names<V: ast::Visit>(stmt: &V) -> Vec<String> {
    struct Names(Vec<String>);
    impl Visitor for Names {
        type Break = ();
        fn pre_visit_query(&mut self, q: &Query) -> ControlFlow<()> {
            if let Some(w) = &q.with {
                self.0.extend(w.cte_tables.iter().map(|c| c.alias.name.value.clone()));
            }
            ControlFlow::Continue(())
        }
    }
    let mut n = Names(Vec::new());
    let _ = stmt.visit(&mut n);
    n.0
}

/// The (db, name) a relation name means, or None for a CTE name or a name
/// that cannot be a view (information_schema, more than two parts).
fn key_of(n: &ObjectName, default_db: Option<&str>, ctes: &[String]) -> Option<(String, String)> {
    let parts = ident_parts(n);
    match parts.as_slice() {
        [t] if ctes.iter().any(|c| c.eq_ignore_ascii_case(t)) => None,
        [t] => Some((default_db?.to_string(), t.clone())),
        [d, _] if infoschema::is_infoschema(d) => None,
        [d, t] => Some((d.clone(), t.clone())),
        _ => None,
    }
}

fn relations<V: ast::Visit>(stmt: &V) -> Vec<ObjectName> {
    let mut names = Vec::new();
    let _ = ast::visit_relations(stmt, |n| {
        names.push(n.clone());
        ControlFlow::<()>::Continue(())
    });
    names
}

/// Load the views `stmt` names (and the views those name), with `default_db`
/// for unqualified names. Names that are tables are left alone.
pub async fn load<V: ast::Visit>(e: &Engine, default_db: Option<&str>, stmt: &V) -> Result<ViewSet, SqlError> {
    let mut set = ViewSet::default();
    let mut queue: Vec<(ObjectName, Option<String>, Vec<String>, usize)> =
        relations(stmt).into_iter().map(|n| (n, default_db.map(str::to_string), cte_names(stmt), 0)).collect();
    let mut seen_tables: Vec<(String, String)> = Vec::new();
    while let Some((name, db, ctes, depth)) = queue.pop() {
        let Some(k) = key_of(&name, db.as_deref(), &ctes) else { continue };
        if set.map.contains_key(&k) || seen_tables.contains(&k) {
            continue;
        }
        if e.catalog().try_get(&k.0, &k.1).await?.is_some() {
            seen_tables.push(k);
            continue;
        }
        let Some(view) = e.catalog().views()?.get(&k.0, &k.1).await? else {
            // Neither a table nor a view: compiling reports 1146.
            seen_tables.push(k);
            continue;
        };
        if depth >= MAX_VIEW_DEPTH {
            return Err(SqlError::new(1462, "HY000", format!("`{}`.`{}` contains view recursion", view.db, view.name)));
        }
        let query = parse_select(&view)?;
        let base_table = match simple_base(&query) {
            Some(b) => {
                let p = ident_parts(&b);
                match p.as_slice() {
                    [d, t] => e.catalog().try_get(d, t).await?,
                    _ => None,
                }
            }
            None => None,
        };
        let merge = merge_info(&view, &query, base_table.as_deref());
        let body_ctes = cte_names(&query);
        for n in relations(&query) {
            queue.push((n, Some(view.db.clone()), body_ctes.clone(), depth + 1));
        }
        set.map.insert(k, Arc::new(LoadedView { view, query, merge }));
    }
    Ok(set)
}

/// The tables view `db.name` reads, through the views it reads (LOCK
/// TABLES of a view locks them too, as MySQL's). Names that are neither a
/// table nor a view are left out (reading the view reports them).
pub async fn base_tables(e: &Engine, db: &str, name: &str) -> Result<Vec<(String, String)>, SqlError> {
    let top = ObjectName::from(vec![Ident::new(db), Ident::new(name)]);
    let mut q = match crate::engine::parse_sqlparser("SELECT 1") {
        Ok(ast::Statement::Query(q)) => *q,
        _ => return Err(SqlError::internal("a constant query did not parse")),
    };
    if let SetExpr::Select(sel) = q.body.as_mut() {
        sel.from = vec![ast::TableWithJoins { relation: table_factor(top, name), joins: vec![] }];
    }
    let set = load(e, Some(db), &q).await?;
    let mut out: Vec<(String, String)> = Vec::new();
    for lv in set.map.values() {
        let ctes = cte_names(&lv.query);
        for n in relations(&lv.query) {
            let Some(k) = key_of(&n, Some(&lv.view.db), &ctes) else { continue };
            if set.map.contains_key(&k) || out.contains(&k) {
                continue;
            }
            if e.catalog().try_get(&k.0, &k.1).await?.is_some() {
                out.push(k);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The one table of a view body of the simple shape, if it is one.
fn simple_base(q: &Query) -> Option<ObjectName> {
    if q.with.is_some() || q.order_by.is_some() || q.limit_clause.is_some() || q.fetch.is_some() || !q.locks.is_empty()
    {
        return None;
    }
    let SetExpr::Select(s) = q.body.as_ref() else { return None };
    let no_group = matches!(&s.group_by, ast::GroupByExpr::Expressions(v, m) if v.is_empty() && m.is_empty());
    if s.distinct.is_some()
        || !no_group
        || s.having.is_some()
        || !s.named_window.is_empty()
        || s.qualify.is_some()
        || s.from.len() != 1
        || !s.from[0].joins.is_empty()
    {
        return None;
    }
    match &s.from[0].relation {
        TableFactor::Table { name, args: None, .. } => Some(name.clone()),
        _ => None,
    }
}

/// Whether a computed view column can merge as its expression: not if it
/// aggregates (the view is then one row per group), is a window function
/// (it depends on the other rows), or reads a subquery or a variable.
fn mergeable_expr(e: &Expr) -> bool {
    let variable = ast::visit_expressions(e, |x| match x {
        Expr::Identifier(i) if i.value.starts_with('@') => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_break();
    !variable && !has_aggregate(e) && !has_window(e) && !has_subquery(e)
}

fn has_window(e: &Expr) -> bool {
    ast::visit_expressions(e, |x| match x {
        Expr::Function(f) if f.over.is_some() => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

fn has_subquery<V: ast::Visit>(v: &V) -> bool {
    ast::visit_expressions(v, |e| {
        if matches!(e, Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. }) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .is_break()
}

/// The merge reading of a view, when its body is simple and its base is a
/// known table (or another view: the base is then merged in turn).
fn merge_info(v: &View, q: &Query, base_table: Option<&SqlTable>) -> Option<MergeInfo> {
    let base = simple_base(q)?;
    let SetExpr::Select(s) = q.body.as_ref() else { return None };
    let TableFactor::Table { alias, .. } = &s.from[0].relation else { return None };
    let parts = ident_parts(&base);
    // Names that may qualify a base column in the body.
    let mut quals: Vec<Vec<String>> = vec![parts.clone()];
    if let Some(t) = parts.last() {
        quals.push(vec![t.clone()]);
    }
    if let Some(a) = alias {
        quals = vec![vec![a.name.value.clone()]];
    }
    let column = |e: &Expr| -> Option<String> {
        match e {
            Expr::Identifier(i) if !i.value.starts_with('@') => Some(i.value.clone()),
            Expr::CompoundIdentifier(p) if p.len() >= 2 => {
                let q: Vec<String> = p[..p.len() - 1].iter().map(|i| i.value.clone()).collect();
                quals.contains(&q).then(|| p[p.len() - 1].value.clone())
            }
            _ => None,
        }
    };
    // An expression of the body over unqualified base columns; None if it
    // reads anything else (a variable, another table's column, a subquery).
    let unqualified = |e: &Expr| -> Option<Expr> {
        let mut x = e.clone();
        if has_subquery(&x) {
            return None;
        }
        let bad = ast::visit_expressions_mut(&mut x, |y| {
            match y {
                Expr::Identifier(i) if i.value.starts_with('@') => return ControlFlow::Break(()),
                Expr::CompoundIdentifier(_) => match column(y) {
                    Some(c) => *y = Expr::Identifier(Ident::new(c)),
                    None => return ControlFlow::Break(()),
                },
                _ => {}
            }
            ControlFlow::Continue(())
        });
        (!bad.is_break()).then_some(x)
    };
    let mut cols = Vec::new();
    for item in &s.projection {
        match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => match column(e) {
                Some(c) => cols.push(Expr::Identifier(Ident::new(c))),
                None if mergeable_expr(e) => cols.push(unqualified(e)?),
                None => return None,
            },
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => {
                // Only a table's columns are known here; a view over a view
                // with `*` is read as a derived table.
                let t = base_table?;
                cols.extend(t.columns_visible().map(|(_, c, _)| Expr::Identifier(Ident::new(&c.name))));
            }
            _ => return None,
        }
    }
    if cols.len() != v.meta.columns.len() {
        return None;
    }
    let where_ = match &s.selection {
        Some(w) => Some(unqualified(w)?),
        None => None,
    };
    Some(MergeInfo { base, cols, where_ })
}

/// Column references of one query block rewritten onto the merged table:
/// `x` / `a.x` (x a view column) -> `a.base_x` (or the view column's
/// expression over `a.`'s columns). Stops at subqueries (they
/// are not descended into). Any other reference fails the rewrite.
struct ColumnRewrite<'a> {
    alias: &'a str,
    view_cols: &'a [String],
    base_cols: &'a [Expr],
    depth: usize,
    failed: bool,
}

impl ColumnRewrite<'_> {
    fn target(&self, col: &str) -> Option<Expr> {
        let i = self.view_cols.iter().position(|c| c.eq_ignore_ascii_case(col))?;
        Some(qualify(&self.base_cols[i], self.alias))
    }
}

impl VisitorMut for ColumnRewrite<'_> {
    type Break = ();
    fn pre_visit_query(&mut self, _q: &mut Query) -> ControlFlow<()> {
        self.depth += 1;
        ControlFlow::Continue(())
    }
    fn post_visit_query(&mut self, _q: &mut Query) -> ControlFlow<()> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }
    fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        if self.depth > 0 {
            return ControlFlow::Continue(());
        }
        let new = match e {
            Expr::Identifier(i) if i.value.starts_with('@') => return ControlFlow::Continue(()),
            Expr::Identifier(i) => self.target(&i.value),
            Expr::CompoundIdentifier(p) if p.len() == 2 && p[0].value == self.alias => self.target(&p[1].value),
            Expr::CompoundIdentifier(_) => None,
            _ => return ControlFlow::Continue(()),
        };
        match new {
            Some(n) => *e = n,
            None => self.failed = true,
        }
        ControlFlow::Continue(())
    }
}

/// Rewrite column references of `e` (see `ColumnRewrite`); false if one is
/// not a view column.
pub fn rewrite_columns<V: VisitMut>(e: &mut V, alias: &str, view_cols: &[String], base_cols: &[Expr]) -> bool {
    let mut r = ColumnRewrite { alias, view_cols, base_cols, depth: 0, failed: false };
    let _ = e.visit(&mut r);
    !r.failed
}

/// The view's WHERE over `alias.base_col`.
pub fn qualified_where(m: &MergeInfo, alias: &str) -> Option<Expr> {
    let mut w = m.where_.clone()?;
    let _ = ast::visit_expressions_mut(&mut w, |e| {
        if let Expr::Identifier(i) = e {
            *e = Expr::CompoundIdentifier(vec![Ident::new(alias), i.clone()]);
        }
        ControlFlow::<()>::Continue(())
    });
    Some(w)
}

pub fn and(a: Option<Expr>, b: Option<Expr>) -> Option<Expr> {
    match (a, b) {
        (Some(a), Some(b)) => Some(Expr::BinaryOp {
            left: Box::new(Expr::Nested(Box::new(a))),
            op: ast::BinaryOperator::And,
            right: Box::new(Expr::Nested(Box::new(b))),
        }),
        (a, b) => a.or(b),
    }
}

pub fn table_factor(name: ObjectName, alias: &str) -> TableFactor {
    TableFactor::Table {
        name,
        alias: Some(ast::TableAlias { explicit: true, name: Ident::new(alias), columns: vec![], at: None }),
        args: None,
        with_hints: vec![],
        version: None,
        with_ordinality: false,
        partitions: vec![],
        json_path: None,
        sample: None,
        index_hints: vec![],
    }
}

/// Merge the view that is `q`'s only source into `q`, if both sides allow
/// it (see the module comment). On false `q` is unchanged.
fn try_merge(q: &mut Query, set: &ViewSet, default_db: Option<&str>, ctes: &[String]) -> bool {
    let SetExpr::Select(s) = q.body.as_ref() else { return false };
    if s.from.len() != 1 || !s.from[0].joins.is_empty() {
        return false;
    }
    let TableFactor::Table { name, alias, args: None, partitions, .. } = &s.from[0].relation else { return false };
    if !partitions.is_empty() {
        return false;
    }
    let Some(k) = key_of(name, default_db, ctes) else { return false };
    let Some(lv) = set.get(&k) else { return false };
    let Some(m) = &lv.merge else { return false };
    if has_subquery(q) {
        return false;
    }
    let alias = alias.as_ref().map(|a| a.name.value.clone()).unwrap_or_else(|| lv.view.name.clone());
    let view_cols = &lv.view.meta.columns;
    let mut new = q.clone();
    let SetExpr::Select(sel) = new.body.as_mut() else { return false };
    let mut projection = Vec::with_capacity(sel.projection.len());
    for item in std::mem::take(&mut sel.projection) {
        match item {
            SelectItem::Wildcard(_) => push_all(&mut projection, &alias, view_cols, &m.cols),
            SelectItem::QualifiedWildcard(ast::SelectItemQualifiedWildcardKind::ObjectName(n), _)
                if ident_parts(&n) == [alias.clone()] =>
            {
                push_all(&mut projection, &alias, view_cols, &m.cols)
            }
            SelectItem::UnnamedExpr(mut e) => {
                // The column keeps the name it has over the view.
                let name = match &e {
                    Expr::Identifier(i) => i.value.clone(),
                    Expr::CompoundIdentifier(p) => p.last().map(|i| i.value.clone()).unwrap_or_default(),
                    other => other.to_string(),
                };
                if !rewrite_columns(&mut e, &alias, view_cols, &m.cols) {
                    return false;
                }
                projection.push(SelectItem::ExprWithAlias { expr: e, alias: Ident::new(name) });
            }
            SelectItem::ExprWithAlias { mut expr, alias: a } => {
                if !rewrite_columns(&mut expr, &alias, view_cols, &m.cols) {
                    return false;
                }
                projection.push(SelectItem::ExprWithAlias { expr, alias: a });
            }
            _ => return false,
        }
    }
    sel.projection = projection;
    let mut ok = true;
    if let Some(w) = &mut sel.selection {
        ok &= rewrite_columns(w, &alias, view_cols, &m.cols);
    }
    if let Some(h) = &mut sel.having {
        ok &= rewrite_columns(h, &alias, view_cols, &m.cols);
    }
    ok &= rewrite_columns(&mut sel.group_by, &alias, view_cols, &m.cols);
    ok &= sel.named_window.is_empty();
    if !ok {
        return false;
    }
    sel.selection = and(sel.selection.take(), qualified_where(m, &alias));
    sel.from[0].relation = table_factor(m.base.clone(), &alias);
    if let Some(o) = &mut new.order_by {
        if !rewrite_columns(o, &alias, view_cols, &m.cols) {
            return false;
        }
    }
    *q = new;
    true
}

fn push_all(out: &mut Vec<SelectItem>, alias: &str, view_cols: &[String], base_cols: &[Expr]) {
    for (v, b) in view_cols.iter().zip(base_cols) {
        out.push(SelectItem::ExprWithAlias { expr: qualify(b, alias), alias: Ident::new(v) });
    }
}

/// The derived-table form of a view: `(SELECT ...) AS alias (cols)`.
pub fn derived(lv: &LoadedView, alias: Option<&ast::TableAlias>) -> TableFactor {
    let name = alias.map(|a| a.name.clone()).unwrap_or_else(|| Ident::new(&lv.view.name));
    TableFactor::Derived {
        lateral: false,
        subquery: Box::new(lv.query.clone()),
        alias: Some(ast::TableAlias {
            explicit: true,
            name,
            columns: lv.view.meta.columns.iter().map(|c| ast::TableAliasColumnDef::from_name(c.as_str())).collect(),
            at: None,
        }),
        sample: None,
    }
}

struct Expand<'a> {
    set: &'a ViewSet,
    /// Default database per nesting level: a view's body names its
    /// tables qualified, so the session's database applies everywhere.
    default_db: Option<&'a str>,
    ctes: Vec<String>,
    /// Replacements made (bounds the work on a cyclic definition).
    steps: usize,
}

impl VisitorMut for Expand<'_> {
    type Break = SqlError;
    fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<SqlError> {
        self.ctes.extend(cte_names(q));
        while self.steps < MAX_VIEW_DEPTH * 8 && try_merge(q, self.set, self.default_db, &self.ctes) {
            self.steps += 1;
        }
        ControlFlow::Continue(())
    }
    fn pre_visit_table_factor(&mut self, tf: &mut TableFactor) -> ControlFlow<SqlError> {
        let TableFactor::Table { name, alias, .. } = tf else { return ControlFlow::Continue(()) };
        let Some(k) = key_of(name, self.default_db, &self.ctes) else { return ControlFlow::Continue(()) };
        let Some(lv) = self.set.get(&k) else { return ControlFlow::Continue(()) };
        self.steps += 1;
        if self.steps > MAX_VIEW_DEPTH * 8 {
            return ControlFlow::Break(SqlError::new(
                1462,
                "HY000",
                format!("`{}`.`{}` contains view recursion", lv.view.db, lv.view.name),
            ));
        }
        *tf = derived(lv, alias.as_ref());
        ControlFlow::Continue(())
    }
}

/// Replace every view of `stmt` (see the module comment).
pub fn expand<V: VisitMut + ast::Visit>(stmt: &mut V, set: &ViewSet, default_db: Option<&str>) -> Result<(), SqlError> {
    let ctes = cte_names(stmt);
    let mut x = Expand { set, default_db, ctes, steps: 0 };
    match stmt.visit(&mut x) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// Which view a failed compilation is to blame on: the first of `set`
/// whose own SELECT does not compile (its table or a column was dropped
/// since): 1356 for it.
pub async fn blame(e: &Engine, s: &Session, set: &ViewSet) -> Option<SqlError> {
    let mut keys: Vec<&(String, String)> = set.map.keys().collect();
    keys.sort();
    for k in keys {
        let lv = &set.map[k];
        let mut q = lv.query.clone();
        if expand(&mut q, set, Some(&lv.view.db)).is_err() {
            return Some(view_error(&lv.view.db, &lv.view.name));
        }
        let tables = crate::engine::query::resolve_tables(e, s, &q).await;
        let ok = match tables {
            Ok(t) => {
                let mut c = crate::engine::query::StmtCompiler::new(
                    &t,
                    crate::engine::expr::compile::ParamMap::from_statement(&q),
                );
                c.compile_query(&q, None, crate::engine::row_lock::RowLock::NONE).is_ok()
            }
            Err(_) => false,
        };
        if !ok {
            return Some(view_error(&lv.view.db, &lv.view.name));
        }
    }
    None
}

/// Whether a view's definition allows INSERT / UPDATE / DELETE through it.
pub fn is_updatable(lv: &LoadedView) -> bool {
    lv.merge.is_some()
}

/// Compile `q` with the views it names put in: called after `q` failed to
/// resolve a name as a table (`first_err`, 1146).
pub async fn prepare_query(
    e: &Engine,
    s: &Session,
    q: &Query,
    first_err: SqlError,
) -> Result<Arc<crate::engine::query::Compiled>, SqlError> {
    let set = load(e, s.current_db.as_deref(), q).await?;
    if set.is_empty() {
        return Err(first_err);
    }
    let mut expanded = q.clone();
    expand(&mut expanded, &set, s.current_db.as_deref())?;
    // Placeholders are numbered by their place in the text the client sent:
    // a view's body has none, so the statement's own map still holds.
    let params = crate::engine::expr::compile::ParamMap::from_statement(q);
    let r: Result<Arc<crate::engine::query::Compiled>, SqlError> = async {
        let tables = crate::engine::query::resolve_tables(e, s, &expanded).await?;
        let mut c = crate::engine::query::StmtCompiler::new(&tables, params);
        let root = c.compile_query(&expanded, None, crate::engine::row_lock::RowLock::NONE)?;
        let mut compiled = c.finish(root);
        compiled.views = set.stamps();
        compiled.temp_generation = s.temp.generation();
        Ok(Arc::new(compiled))
    }
    .await;
    match r {
        Err(err) if matches!(err.code, 1146 | 1054) => Err(blame(e, s, &set).await.unwrap_or(err)),
        r => r,
    }
}

/// The (db, name) of the one table of a simple view body (qualified).
pub fn base_key(q: &Query) -> Option<(String, String)> {
    match ident_parts(&simple_base(q)?).as_slice() {
        [d, t] => Some((d.clone(), t.clone())),
        _ => None,
    }
}

/// Whether a view's SELECT has the updatable shape (information_schema
/// VIEWS.IS_UPDATABLE): one table, columns that merge (see `merge_info`).
pub fn updatable_shape(q: &Query) -> bool {
    if simple_base(q).is_none() {
        return false;
    }
    let SetExpr::Select(s) = q.body.as_ref() else { return false };
    s.projection.iter().all(|i| match i {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
            matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_)) || mergeable_expr(e)
        }
        SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => true,
        _ => false,
    }) && !s.selection.as_ref().is_some_and(has_subquery)
}
