//! SELECT: compilation of a `sqlparser::ast::Query` into a plan (`Compiled`),
//! and the entry points the dispatcher calls.
//!
//! Compilation is independent of parameter values, so a prepared statement
//! compiles once (`prepare_query`) and executes many times
//! (`execute_prepared_query`); `execute_query` does both.

use crate::engine::catalog::SqlTable;
use crate::engine::error_map;
use crate::engine::exec;
use crate::engine::expr::compile::{
    column_sqltype, expr_display_name, has_aggregate, AggSpec, Compiler, ParamMap, Scope, ScopeCol, SubKind,
    SubqueryHost,
};
use crate::engine::expr::value::Coll;
use crate::engine::expr::{collect_cols, conjuncts, for_each_child, map_cols, CExpr, CmpKind, SqlType};
use crate::engine::functions::unify;
use crate::engine::infoschema::{NameScope, Wanted, TABLE_STATS_COLUMNS};
use crate::engine::partition::PartFn;
use crate::engine::plan::{choose_access, Access};
use crate::engine::recursive::{self, RecPlan};
use crate::engine::row_lock::{self, RowLock};
use crate::engine::window::{self, WinFunc, WindowSink};
use crate::engine::Engine;
use crate::types::{ColumnMeta, QueryOutput, Session, SqlError};
use norr_signals::{ColumnId, IndexId, Value};
use sqlparser::ast::{self, Expr, JoinConstraint, JoinOperator, Query, SelectItem, SetExpr, TableFactor};
use std::collections::HashMap;
use std::sync::Arc;

/// A compiled statement (SELECT, or the SELECT part of INSERT ... SELECT).
#[derive(Debug)]
pub struct Compiled {
    pub root: QueryNode,
    pub subs: Vec<SubPlan>,
    pub sysvars: Vec<(String, bool)>,
    pub uservars: Vec<String>,
    pub param_count: usize,
    /// The root's result columns, shared with every result of this plan.
    columns: Arc<[ColumnMeta]>,
    /// The views the statement read, directly or through other views, as
    /// they were when it was compiled (empty for a statement over tables
    /// only, the common case, which then checks nothing).
    pub views: Vec<crate::engine::views::ViewStamp>,
    /// The session's `TempTables::generation` when compiled: a prepared
    /// plan is compiled again once a temporary table was created or dropped
    /// (either can change what a name resolves to).
    pub temp_generation: u64,
    /// What ONLY_FULL_GROUP_BY refuses in the statement (`full_group_by`).
    pub full_group_by: Option<SqlError>,
}

impl Compiled {
    pub fn columns(&self) -> &[ColumnMeta] {
        &self.columns
    }

    /// The result columns as each execution hands them out (no copy).
    pub fn shared_columns(&self) -> Arc<[ColumnMeta]> {
        self.columns.clone()
    }
}

#[derive(Debug)]
pub struct SubPlan {
    pub node: QueryNode,
    pub kind: SubKind,
    /// Reads columns of the enclosing query's row: run once per outer row.
    pub correlated: bool,
}

#[derive(Debug)]
pub enum QueryNode {
    Select(Box<SelectPlan>),
    SetOp(Box<SetOpPlan>),
    Recursive(Box<RecPlan>),
}

impl QueryNode {
    pub fn columns(&self) -> &[ColumnMeta] {
        match self {
            QueryNode::Select(s) => &s.columns,
            QueryNode::SetOp(s) => &s.columns,
            QueryNode::Recursive(r) => &r.columns,
        }
    }
    pub fn types(&self) -> &[SqlType] {
        match self {
            QueryNode::Select(s) => &s.types,
            QueryNode::SetOp(s) => &s.types,
            QueryNode::Recursive(r) => &r.types,
        }
    }
}

#[derive(Debug)]
pub struct SetOpPlan {
    pub left: QueryNode,
    pub right: QueryNode,
    pub distinct: bool,
    pub columns: Vec<ColumnMeta>,
    pub types: Vec<SqlType>,
    /// Over the output row.
    pub order: Vec<OrderKey>,
    pub limit: Option<CExpr>,
    pub offset: Option<CExpr>,
}

#[derive(Debug, Clone)]
pub struct OrderKey {
    pub expr: CExpr,
    pub desc: bool,
    pub coll: Coll,
}

#[derive(Debug)]
pub struct AggPlan {
    /// Over the joined row.
    pub group_by: Vec<CExpr>,
    pub group_colls: Vec<Coll>,
    pub aggs: Vec<AggSpec>,
    /// GROUP BY ... WITH ROLLUP (see `rollup`).
    pub rollup: Option<crate::engine::rollup::Rollup>,
}

#[derive(Debug)]
pub struct SelectPlan {
    pub sources: Vec<Source>,
    /// Width of the joined row.
    pub width: usize,
    /// WHERE conjuncts still to evaluate on joined rows.
    pub filter: Vec<CExpr>,
    pub agg: Option<AggPlan>,
    /// Over the post-aggregation row (joined row ++ aggregate values).
    pub having: Option<CExpr>,
    pub proj: Vec<CExpr>,
    pub columns: Vec<ColumnMeta>,
    pub types: Vec<SqlType>,
    pub distinct: bool,
    pub order: Vec<OrderKey>,
    pub limit: Option<CExpr>,
    pub offset: Option<CExpr>,
    pub lock: RowLock,
    /// Correlated subqueries read in `filter` / `proj` (run per row).
    pub correlated: Vec<usize>,
    /// Window functions, computed after HAVING: function k's value is
    /// column `win_base() + k` of the rows `proj` and `order` read.
    pub windows: Vec<WinFunc>,
    /// Parenthesized joins on the inner side of an outer join (`join_plan`);
    /// empty for a flat left-deep FROM.
    pub nests: Vec<JoinNest>,
    /// `filter` or `proj` calls GET_LOCK or SLEEP: evaluated through
    /// `user_lock_fns::eval_waiting` (one flag test for every other plan).
    pub waits: bool,
}

/// Sources `first..=last` on the inner side of an outer join: per row of the
/// sources before `first`, either the joined rows that pass the sources' ON
/// conjuncts or one row with NULLs for all of them (`join_nests`).
#[derive(Debug)]
pub struct JoinNest {
    pub first: usize,
    pub last: usize,
    /// Conjuncts of the enclosing nest (or ON) that read this nest's columns:
    /// evaluated on the rows after the NULL extension.
    pub after: Vec<CExpr>,
}

#[derive(Debug)]
pub struct Source {
    pub alias: String,
    pub kind: SourceKind,
    pub base: usize,
    pub width: usize,
    pub left_join: bool,
    /// Inside a `JoinNest`: NULL-extended with it (so WHERE conjuncts do
    /// not move into it, and its columns are nullable).
    pub nested: bool,
    /// ON conjuncts over the joined row prefix (up to this source).
    pub on: Vec<CExpr>,
    /// Per outer row key lookups (batched) instead of a scan of this source.
    pub lookup: Option<JoinLookup>,
}

// One per FROM item of a compiled plan, read on every row: a boxed table
// access would cost an indirection where the plan is hottest.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum SourceKind {
    Table(TableAccess),
    Derived(Box<QueryNode>),
    /// Constant rows (no FROM: one empty row; information_schema tables).
    Rows(Vec<Vec<Value>>),
    /// A recursive CTE read by its own recursive block: the working set of
    /// the current iteration (`EvalCtx::work_tables[slot]`).
    WorkTable(usize),
    /// JSON_TABLE: rows made per joined prefix row (`json_table`).
    JsonTable(Box<crate::engine::json_table::JsonTable>),
}

#[derive(Debug)]
pub struct TableAccess {
    pub table: Arc<SqlTable>,
    pub part: Arc<PartFn>,
    pub access: Access,
    /// Conjuncts over the table's own row (offset = column id).
    pub local: Vec<CExpr>,
    /// Columns to fetch, ascending.
    pub needed: Vec<ColumnId>,
    pub lock: RowLock,
    /// Set when the plan uses this table's rows as fetched (just the
    /// `needed` columns, in order; see `row_layout`): `local` rewritten to
    /// those positions. None: rows are spread to the table's full width.
    pub compact_local: Option<Vec<CExpr>>,
    /// `FROM t PARTITION (p, ...)`: only these partitions are read (a full
    /// scan of them: key lookups would reach rows of the others).
    pub only: Option<Vec<u32>>,
}

impl TableAccess {
    /// The local conjuncts over the rows the table's reads yield.
    pub fn row_local(&self) -> &[CExpr] {
        self.compact_local.as_deref().unwrap_or(&self.local)
    }
}

#[derive(Debug)]
pub struct JoinLookup {
    /// None = primary key.
    pub index: Option<IndexId>,
    pub cols: Vec<ColumnId>,
    /// Over the joined row prefix before this source.
    pub keys: Vec<CExpr>,
    /// `cols` are an equality prefix of the ordered index `index` (MySQL's
    /// `ref`): each key reads a range of the index, any number of rows.
    /// false: each key is a whole primary or unique key (`eq_ref`).
    pub range: bool,
}

/// The columns and rows of a table the SQL node makes itself
/// (information_schema and kin), by (db, table) in `Tables::virtual_rows`.
pub type VirtualRows = (Vec<ScopeCol>, Vec<Vec<Value>>);

/// Tables of a statement, resolved (async) before compilation.
pub struct Tables {
    pub map: HashMap<(String, String), Arc<SqlTable>>,
    pub default_db: Option<Arc<str>>,
    pub virtual_rows: HashMap<(String, String), VirtualRows>,
}

impl Tables {
    pub fn key(&self, name: &ast::ObjectName) -> Result<(String, String), SqlError> {
        let parts: Vec<String> =
            name.0.iter().map(|p| p.as_ident().map(|i| i.value.clone()).unwrap_or_else(|| p.to_string())).collect();
        match parts.as_slice() {
            [t] => match &self.default_db {
                Some(db) => Ok((db.to_string(), t.clone())),
                None => Err(error_map::no_db()),
            },
            [db, t] => Ok((db.clone(), t.clone())),
            _ => Err(SqlError::parse(format!("bad table name {name}"))),
        }
    }
    pub fn get(&self, name: &ast::ObjectName) -> Result<Arc<SqlTable>, SqlError> {
        let k = self.key(name)?;
        self.map.get(&k).cloned().ok_or_else(|| error_map::no_such_table(&k.0, &k.1))
    }
}

/// Resolve every table the statement names.
pub async fn resolve_tables<V: ast::Visit>(engine: &Engine, session: &Session, stmt: &V) -> Result<Tables, SqlError> {
    let mut names = Vec::new();
    let _ = ast::visit_relations(stmt, |n| {
        names.push(n.clone());
        std::ops::ControlFlow::<()>::Continue(())
    });
    struct TableBodies<'a>(&'a mut Vec<ast::ObjectName>);
    impl ast::Visitor for TableBodies<'_> {
        type Break = ();
        fn pre_visit_query(&mut self, q: &Query) -> std::ops::ControlFlow<()> {
            crate::engine::table_values::body_tables(&q.body, self.0);
            std::ops::ControlFlow::Continue(())
        }
    }
    let _ = stmt.visit(&mut TableBodies(&mut names));
    // Names of common table expressions are not tables (unqualified, they shadow them).
    let ctes = cte_names(stmt);
    let mut t = Tables { map: HashMap::new(), default_db: session.current_db.clone(), virtual_rows: HashMap::new() };
    for n in names {
        if let [only] = n.0.as_slice() {
            if only.as_ident().is_some_and(|i| ctes.iter().any(|c| c.eq_ignore_ascii_case(&i.value))) {
                continue;
            }
        }
        let k = t.key(&n)?;
        if t.map.contains_key(&k) || t.virtual_rows.contains_key(&k) {
            continue;
        }
        if k.0.eq_ignore_ascii_case("information_schema") {
            let wanted = if sees_table_stats(stmt) { Wanted::TableStats } else { Wanted::NoTableStats };
            let rows = exec::virtual_table(engine, session, &k.1, wanted, &name_scope(stmt)).await?;
            t.virtual_rows.insert(k, rows);
            continue;
        }
        // A temporary table shadows the base table (an emptiness test when
        // the session has none).
        let tbl = match crate::engine::temp_tables::lookup(session, &k.0, &k.1) {
            Some(tbl) => tbl,
            None => engine.catalog().get(&k.0, &k.1).await?,
        };
        t.map.insert(k, tbl);
    }
    Ok(t)
}

/// Whether the statement can see information_schema.TABLES' counted columns
/// (`infoschema::TABLE_STATS_COLUMNS`): it names one of them or selects `*`
/// somewhere. Erring towards true only costs the scans.
fn sees_table_stats<V: ast::Visit>(stmt: &V) -> bool {
    struct Sees(bool);
    fn star(body: &SetExpr) -> bool {
        match body {
            SetExpr::Select(s) => {
                s.projection.iter().any(|i| matches!(i, SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)))
            }
            SetExpr::SetOperation { left, right, .. } => star(left) || star(right),
            _ => false,
        }
    }
    impl ast::Visitor for Sees {
        type Break = ();
        fn pre_visit_query(&mut self, q: &Query) -> std::ops::ControlFlow<()> {
            self.0 |= star(&q.body);
            std::ops::ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, e: &Expr) -> std::ops::ControlFlow<()> {
            let name = match e {
                Expr::Identifier(i) => Some(&i.value),
                Expr::CompoundIdentifier(parts) => parts.last().map(|i| &i.value),
                _ => None,
            };
            self.0 |= name.is_some_and(|n| TABLE_STATS_COLUMNS.iter().any(|c| c.eq_ignore_ascii_case(n)));
            std::ops::ControlFlow::Continue(())
        }
    }
    let mut v = Sees(false);
    let _ = stmt.visit(&mut v);
    v.0
}

/// The schemas and tables an information_schema read is restricted to
/// (`NameScope`). Only for the simplest shape, where the restriction is sure
/// to hold for every reference: one query block (no subquery, derived table,
/// CTE or UNION) reading one table with no join, whose WHERE has
/// `[t.]TABLE_SCHEMA` / `TABLE_NAME` `= 'lit'` or `IN ('lit', ...)` among its
/// top-level ANDs. Anything else reads everything, which is only slower.
fn name_scope<V: ast::Visit>(stmt: &V) -> NameScope {
    struct Find {
        queries: usize,
        scope: NameScope,
    }
    fn literals(e: &Expr) -> Option<Vec<String>> {
        let lit = |e: &Expr| match e {
            Expr::Value(v) => match &v.value {
                ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => Some(s.clone()),
                _ => None,
            },
            _ => None,
        };
        match e {
            Expr::InList { list, negated: false, .. } => list.iter().map(lit).collect(),
            Expr::BinaryOp { left, op: ast::BinaryOperator::Eq, right } => {
                lit(left).or_else(|| lit(right)).map(|l| vec![l])
            }
            _ => None,
        }
    }
    fn side(e: &Expr) -> Option<&str> {
        match e {
            Expr::Identifier(i) => Some(i.value.as_str()),
            Expr::CompoundIdentifier(parts) => parts.last().map(|i| i.value.as_str()),
            _ => None,
        }
    }
    fn column(e: &Expr) -> Option<&str> {
        match e {
            Expr::InList { expr, .. } => side(expr),
            Expr::BinaryOp { left, op: ast::BinaryOperator::Eq, right } => side(left).or_else(|| side(right)),
            _ => None,
        }
    }
    fn conjuncts_of(e: &Expr, scope: &mut NameScope) {
        match e {
            Expr::BinaryOp { left, op: ast::BinaryOperator::And, right } => {
                conjuncts_of(left, scope);
                conjuncts_of(right, scope);
            }
            Expr::Nested(inner) => conjuncts_of(inner, scope),
            _ => {
                let (Some(col), Some(names)) = (column(e), literals(e)) else { return };
                let slot = if col.eq_ignore_ascii_case("TABLE_SCHEMA") {
                    &mut scope.schemas
                } else if col.eq_ignore_ascii_case("TABLE_NAME") {
                    &mut scope.tables
                } else {
                    return;
                };
                // Two restrictions on one column: a row must pass both, so
                // keep the names in both (none, if they disagree).
                let fold = |n: &String| norr_signals::keycode::fold_case(n.as_bytes());
                *slot = Some(match slot.take() {
                    None => names,
                    Some(old) => old.into_iter().filter(|o| names.iter().any(|n| fold(n) == fold(o))).collect(),
                });
            }
        }
    }
    impl ast::Visitor for Find {
        type Break = ();
        fn pre_visit_query(&mut self, q: &Query) -> std::ops::ControlFlow<()> {
            // A CTE's, subquery's or derived table's query is visited too.
            self.queries += 1;
            if let SetExpr::Select(sel) = q.body.as_ref() {
                if let ([only], Some(w)) = (sel.from.as_slice(), &sel.selection) {
                    if only.joins.is_empty() && matches!(only.relation, TableFactor::Table { .. }) {
                        conjuncts_of(w, &mut self.scope);
                    }
                }
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let mut f = Find { queries: 0, scope: NameScope::default() };
    let _ = stmt.visit(&mut f);
    if f.queries == 1 {
        f.scope
    } else {
        NameScope::default()
    }
}

/// Every CTE name the statement declares, at any depth.
fn cte_names<V: ast::Visit>(stmt: &V) -> Vec<String> {
    struct Names(Vec<String>);
    impl ast::Visitor for Names {
        type Break = ();
        fn pre_visit_query(&mut self, q: &Query) -> std::ops::ControlFlow<()> {
            if let Some(w) = &q.with {
                self.0.extend(w.cte_tables.iter().map(|c| c.alias.name.value.clone()));
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let mut n = Names(Vec::new());
    let _ = stmt.visit(&mut n);
    n.0
}

/// A common table expression in scope: compiled where it is referenced, as a
/// derived table (non-recursive CTEs are exactly that).
#[derive(Clone)]
struct CteDef {
    name: String,
    columns: Vec<String>,
    query: Query,
    /// Declared in a WITH RECURSIVE (recursive if its query reads itself).
    recursive: bool,
    /// Inside the CTE's own recursive block: its working table's slot and
    /// column types.
    work: Option<(usize, Vec<SqlType>)>,
}

/// Statement-wide compile state (subqueries, variables, parameters).
pub struct StmtCompiler<'a> {
    pub tables: &'a Tables,
    pub params: ParamMap,
    pub subs: Vec<SubPlan>,
    pub sysvars: Vec<(String, bool)>,
    pub uservars: Vec<String>,
    /// CTEs visible at this point of the compile, innermost last.
    ctes: Vec<CteDef>,
    /// Window functions of the query block being compiled.
    win: Option<WindowSink>,
    /// GROUPING() calls of the query block being compiled (`rollup`).
    grouping: Option<Vec<Vec<CExpr>>>,
    /// Working tables of recursive CTEs handed out so far (see `recursive`).
    pub work_tables: usize,
    /// The first query block that reads a column ONLY_FULL_GROUP_BY refuses
    /// (see `full_group_by`): the error, given at execution if the mode is on.
    pub full_group_by: Option<SqlError>,
}

impl SubqueryHost for StmtCompiler<'_> {
    fn add_subquery(&mut self, q: &Query, kind: SubKind, outer: &Scope) -> Result<(usize, SqlType), SqlError> {
        let node = self.compile_query(q, Some(outer), RowLock::NONE)?;
        let want = match kind {
            SubKind::Rows(n) => n,
            _ => 1,
        };
        if kind != SubKind::Exists && node.columns().len() != want {
            return Err(SqlError::new(1241, "21000", format!("Operand should contain {want} column(s)")));
        }
        let ty = node.types().first().copied().unwrap_or(SqlType::new(crate::engine::expr::TClass::Null));
        let correlated = node_reads_outer(&node);
        self.subs.push(SubPlan { node, kind, correlated });
        Ok((self.subs.len() - 1, ty))
    }
    fn sysvar(&mut self, name: &str, global: bool) -> usize {
        let n = name.to_ascii_lowercase();
        if let Some(i) = self.sysvars.iter().position(|(x, g)| *x == n && *g == global) {
            return i;
        }
        self.sysvars.push((n, global));
        self.sysvars.len() - 1
    }
    fn windows(&mut self) -> Option<&mut WindowSink> {
        self.win.as_mut()
    }
    fn grouping_calls(&mut self) -> Option<&mut Vec<Vec<CExpr>>> {
        self.grouping.as_mut()
    }
    fn uservar(&mut self, name: &str) -> usize {
        let n = name.trim_matches('`').to_ascii_lowercase();
        if let Some(i) = self.uservars.iter().position(|x| *x == n) {
            return i;
        }
        self.uservars.push(n);
        self.uservars.len() - 1
    }
}

fn reads_outer(e: &CExpr) -> bool {
    match e {
        CExpr::Outer(_) => true,
        _ => {
            let mut r = false;
            for_each_child(e, &mut |c| r |= reads_outer(c));
            r
        }
    }
}

fn node_reads_outer(n: &QueryNode) -> bool {
    match n {
        QueryNode::SetOp(s) => node_reads_outer(&s.left) || node_reads_outer(&s.right),
        QueryNode::Recursive(r) => r.anchors.iter().chain(&r.steps).any(node_reads_outer),
        QueryNode::Select(p) => {
            let mut all: Vec<&CExpr> = Vec::new();
            all.extend(p.filter.iter());
            all.extend(p.proj.iter());
            all.extend(p.having.iter());
            all.extend(p.order.iter().map(|o| &o.expr));
            for s in &p.sources {
                all.extend(s.on.iter());
                match &s.kind {
                    SourceKind::Table(t) => all.extend(t.local.iter()),
                    SourceKind::JsonTable(jt) => all.push(&jt.doc),
                    _ => {}
                }
                if let Some(l) = &s.lookup {
                    all.extend(l.keys.iter());
                }
            }
            if let Some(a) = &p.agg {
                all.extend(a.group_by.iter());
                all.extend(a.aggs.iter().flat_map(|x| x.exprs()));
            }
            all.extend(p.windows.iter().flat_map(|w| w.exprs()));
            all.into_iter().any(reads_outer)
        }
    }
}

fn const_expr(c: &mut StmtCompiler, e: &Expr) -> Result<CExpr, SqlError> {
    let scope = Scope::default();
    let params = c.params.clone();
    let mut comp = Compiler::plain(&scope, None, &params, "LIMIT", c);
    Ok(comp.compile(e)?.0)
}

fn limit_offset(c: &mut StmtCompiler, q: &Query) -> Result<(Option<CExpr>, Option<CExpr>), SqlError> {
    Ok(match &q.limit_clause {
        None => (None, None),
        Some(ast::LimitClause::LimitOffset { limit, offset, .. }) => (
            match limit {
                Some(l) => Some(const_expr(c, l)?),
                None => None,
            },
            match offset {
                Some(o) => Some(const_expr(c, &o.value)?),
                None => None,
            },
        ),
        Some(ast::LimitClause::OffsetCommaLimit { offset, limit }) => {
            (Some(const_expr(c, limit)?), Some(const_expr(c, offset)?))
        }
    })
}

fn order_exprs(q: &Query) -> &[ast::OrderByExpr] {
    match q.order_by.as_ref().map(|o| &o.kind) {
        Some(ast::OrderByKind::Expressions(v)) => v,
        _ => &[],
    }
}

fn is_desc(o: &ast::OrderByExpr) -> bool {
    matches!(o.options.sort, Some(ast::OrderBySort::Desc))
}

/// Whether GROUP BY has WITH ROLLUP. MySQL 8.0 has no other modifier (WITH
/// CUBE, GROUPING SETS, ROLLUP(...) are syntax errors there).
fn rollup_modifier(exprs: &[Expr], mods: &[ast::GroupByWithModifier]) -> Result<bool, SqlError> {
    if let Some(e) = exprs.iter().find(|e| matches!(e, Expr::Rollup(_) | Expr::Cube(_) | Expr::GroupingSets(_))) {
        return Err(crate::engine::error_map::parse_error_near(&e.to_string()));
    }
    let mut rollup = false;
    for m in mods {
        match m {
            ast::GroupByWithModifier::Rollup if !rollup => rollup = true,
            other => return Err(crate::engine::error_map::parse_error_near(&other.to_string())),
        }
    }
    Ok(rollup)
}

fn position_of(e: &Expr) -> Option<usize> {
    match e {
        Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => n.parse::<usize>().ok(),
            _ => None,
        },
        _ => None,
    }
}

impl<'a> StmtCompiler<'a> {
    pub fn new(tables: &'a Tables, params: ParamMap) -> StmtCompiler<'a> {
        StmtCompiler {
            tables,
            params,
            subs: Vec::new(),
            sysvars: Vec::new(),
            uservars: Vec::new(),
            ctes: Vec::new(),
            win: None,
            grouping: None,
            work_tables: 0,
            full_group_by: None,
        }
    }

    pub fn finish(self, root: QueryNode) -> Compiled {
        let param_count = self.params.count();
        let columns = root.columns().into();
        Compiled {
            root,
            subs: self.subs,
            sysvars: self.sysvars,
            uservars: self.uservars,
            param_count,
            columns,
            views: Vec::new(),
            temp_generation: 0,
            full_group_by: self.full_group_by,
        }
    }

    pub fn compile_query(&mut self, q: &Query, outer: Option<&Scope>, lock: RowLock) -> Result<QueryNode, SqlError> {
        if let Some(with) = &q.with {
            let mark = self.ctes.len();
            for c in &with.cte_tables {
                let name = c.alias.name.value.clone();
                if self.ctes[mark..].iter().any(|d| d.name.eq_ignore_ascii_case(&name)) {
                    self.ctes.truncate(mark);
                    return Err(SqlError::new(1066, "42000", format!("Not unique table/alias: '{name}'")));
                }
                let columns = c.alias.columns.iter().map(|col| col.name.value.clone()).collect();
                self.ctes.push(CteDef {
                    name,
                    columns,
                    query: (*c.query).clone(),
                    recursive: with.recursive,
                    work: None,
                });
            }
            let mut body = q.clone();
            body.with = None;
            let r = self.compile_query(&body, outer, lock);
            self.ctes.truncate(mark);
            return r;
        }
        let clauses = row_lock::clauses(q)?;
        let lock = clauses.as_ref().map_or(lock, |c| c.strongest());
        if clauses.as_ref().is_some_and(|c| c.has_of()) && !matches!(q.body.as_ref(), SetExpr::Select(_)) {
            return Err(SqlError::unsupported("a locking clause with OF over a set operation"));
        }
        if let SetExpr::Table(t) = q.body.as_ref() {
            // `TABLE t ORDER BY ... LIMIT ...` is that SELECT * FROM t's.
            let mut as_select = q.clone();
            *as_select.body = SetExpr::Select(Box::new(crate::engine::table_values::table_select(t)?));
            return self.compile_query(&as_select, outer, lock);
        }
        match q.body.as_ref() {
            SetExpr::Select(s) => {
                let (lim, off) = limit_offset(self, q)?;
                let mut plan = self.compile_select(s, order_exprs(q), lim, off, outer, lock)?;
                if let Some(c) = &clauses {
                    c.apply(&mut plan)?;
                }
                Ok(QueryNode::Select(Box::new(plan)))
            }
            SetExpr::Query(inner) if q.order_by.is_none() && q.limit_clause.is_none() => {
                self.compile_query(inner, outer, lock)
            }
            _ => {
                let body = self.compile_setexpr(&q.body, outer, lock)?;
                let (limit, offset) = limit_offset(self, q)?;
                let order = order_exprs(q);
                if order.is_empty() && limit.is_none() && offset.is_none() {
                    return Ok(body);
                }
                // ORDER BY / LIMIT over a set operation (or parenthesized query): by output column.
                let columns = body.columns().to_vec();
                let types = body.types().to_vec();
                let mut keys = Vec::new();
                for o in order {
                    let idx = match &o.expr {
                        e if position_of(e).is_some() => position_of(e).map(|p| p.saturating_sub(1)),
                        Expr::Identifier(i) => columns.iter().position(|c| c.name.eq_ignore_ascii_case(&i.value)),
                        Expr::CompoundIdentifier(p) => {
                            p.last().and_then(|i| columns.iter().position(|c| c.name.eq_ignore_ascii_case(&i.value)))
                        }
                        _ => None,
                    };
                    let Some(idx) = idx.filter(|i| *i < columns.len()) else {
                        return Err(crate::engine::expr::compile::unknown_column(&o.expr.to_string(), "order clause"));
                    };
                    keys.push(OrderKey { expr: CExpr::Col(idx), desc: is_desc(o), coll: types[idx].coll });
                }
                Ok(QueryNode::SetOp(Box::new(SetOpPlan {
                    left: body,
                    right: QueryNode::Select(Box::new(empty_select(&columns, &types))),
                    distinct: false,
                    columns,
                    types,
                    order: keys,
                    limit,
                    offset,
                })))
            }
        }
    }

    fn compile_setexpr(&mut self, e: &SetExpr, outer: Option<&Scope>, lock: RowLock) -> Result<QueryNode, SqlError> {
        match e {
            SetExpr::Select(s) => {
                Ok(QueryNode::Select(Box::new(self.compile_select(s, &[], None, None, outer, lock)?)))
            }
            SetExpr::Query(q) => self.compile_query(q, outer, lock),
            SetExpr::SetOperation { left, op, set_quantifier, right } => {
                if *op != ast::SetOperator::Union {
                    return Err(SqlError::unsupported(format!("{op}")));
                }
                let l = self.compile_setexpr(left, outer, lock)?;
                let r = self.compile_setexpr(right, outer, lock)?;
                if l.columns().len() != r.columns().len() {
                    return Err(SqlError::new(
                        1222,
                        "21000",
                        "The used SELECT statements have a different number of columns",
                    ));
                }
                let types: Vec<SqlType> = l.types().iter().zip(r.types()).map(|(a, b)| unify(&[*a, *b])).collect();
                let columns: Vec<ColumnMeta> = l
                    .columns()
                    .iter()
                    .zip(&types)
                    .map(|(c, t)| {
                        let mut m = ColumnMeta::expr(&c.name, t.field_type());
                        m.decimals = t.decimals;
                        m
                    })
                    .collect();
                let distinct = !matches!(set_quantifier, ast::SetQuantifier::All);
                Ok(QueryNode::SetOp(Box::new(SetOpPlan {
                    left: l,
                    right: r,
                    distinct,
                    columns,
                    types,
                    order: vec![],
                    limit: None,
                    offset: None,
                })))
            }
            SetExpr::Values(v) => crate::engine::table_values::compile_values(self, v),
            SetExpr::Table(t) => {
                let sel = crate::engine::table_values::table_select(t)?;
                Ok(QueryNode::Select(Box::new(self.compile_select(&sel, &[], None, None, outer, lock)?)))
            }
            other => Err(SqlError::unsupported(format!("{other}"))),
        }
    }

    /// Add a FROM item to the scope and sources.
    pub(crate) fn add_factor(
        &mut self,
        f: &TableFactor,
        scope: &mut Scope,
        sources: &mut Vec<Source>,
        outer: Option<&Scope>,
        lock: RowLock,
    ) -> Result<usize, SqlError> {
        let base = scope.cols.len();
        match f {
            TableFactor::Table { name, alias, .. } if self.cte_index(name).is_some() => {
                let k = self.cte_index(name).unwrap_or_default();
                let def = self.ctes[k].clone();
                let alias_name = alias.as_ref().map(|a| a.name.value.clone()).unwrap_or(def.name.clone());
                if sources.iter().any(|s| s.alias.eq_ignore_ascii_case(&alias_name)) {
                    return Err(SqlError::new(1066, "42000", format!("Not unique table/alias: '{alias_name}'")));
                }
                if let Some((slot, types)) = &def.work {
                    // The recursive CTE inside its own recursive block.
                    for (name, ty) in def.columns.iter().zip(types) {
                        scope.cols.push(ScopeCol {
                            table: alias_name.to_lowercase(),
                            name: name.clone(),
                            ty: *ty,
                            enums: None,
                            default: None,
                        });
                    }
                    sources.push(Source {
                        alias: alias_name,
                        kind: SourceKind::WorkTable(*slot),
                        base,
                        width: types.len(),
                        left_join: false,
                        nested: false,
                        on: vec![],
                        lookup: None,
                    });
                    return Ok(sources.len() - 1);
                }
                // A CTE sees only the CTEs declared before it (and itself,
                // when recursive).
                let earlier = self.ctes[..k].to_vec();
                let saved = std::mem::replace(&mut self.ctes, earlier);
                let node = if def.recursive && recursive::references(&def.query, &def.name) > 0 {
                    self.compile_recursive(&def, outer)
                } else {
                    self.compile_query(&def.query, outer, RowLock::NONE)
                };
                self.ctes = saved;
                self.add_derived(node?, alias_name, &def.columns, base, scope, sources)?;
            }
            TableFactor::Table { name, alias, partitions, .. } => {
                let key = self.tables.key(name)?;
                let alias_name = alias.as_ref().map(|a| a.name.value.clone()).unwrap_or_else(|| key.1.clone());
                if sources.iter().any(|s| s.alias.eq_ignore_ascii_case(&alias_name)) {
                    return Err(SqlError::new(1066, "42000", format!("Not unique table/alias: '{alias_name}'")));
                }
                if let Some((cols, rows)) = self.tables.virtual_rows.get(&key) {
                    for c in cols {
                        scope.cols.push(ScopeCol {
                            table: alias_name.to_lowercase(),
                            name: c.name.clone(),
                            ty: c.ty,
                            enums: None,
                            default: None,
                        });
                    }
                    sources.push(Source {
                        alias: alias_name,
                        kind: SourceKind::Rows(rows.clone()),
                        base,
                        width: cols.len(),
                        left_join: false,
                        nested: false,
                        on: vec![],
                        lookup: None,
                    });
                    return Ok(sources.len() - 1);
                }
                let table = self.tables.get(name)?;
                let mut local_scope = Scope::default();
                for (i, ((c, e), json)) in table.def.columns.iter().zip(&table.enums).zip(&table.json).enumerate() {
                    let sc = ScopeCol {
                        table: alias_name.to_lowercase(),
                        name: c.name.clone(),
                        ty: SqlType { json: *json, ..column_sqltype(&c.ty) },
                        enums: e.clone(),
                        default: Some(crate::engine::default_fn::of_column(&table, i)),
                    };
                    local_scope.cols.push(sc.clone());
                    scope.cols.push(sc);
                }
                // Hidden columns are not addressable by name.
                for (i, m) in table.meta.columns.iter().enumerate() {
                    if m.hidden {
                        scope.cols[base + i].name = String::from("\u{0}hidden");
                    }
                }
                let part = Arc::new(PartFn::build(&table.def, table.meta.partition.as_ref(), &local_scope)?);
                let only = selected_partitions(&table, &part, partitions)?;
                let width = table.def.columns.len();
                sources.push(Source {
                    alias: alias_name,
                    kind: SourceKind::Table(TableAccess {
                        table,
                        part,
                        access: Access::FullScan,
                        local: vec![],
                        needed: vec![],
                        lock,
                        compact_local: None,
                        only,
                    }),
                    base,
                    width,
                    left_join: false,
                    nested: false,
                    on: vec![],
                    lookup: None,
                });
            }
            TableFactor::Derived { subquery, alias, lateral: false, .. } => {
                let Some(alias) = alias else {
                    return Err(SqlError::new(1248, "42000", "Every derived table must have its own alias"));
                };
                let node = self.compile_query(subquery, outer, RowLock::NONE)?;
                let names: Vec<String> = alias.columns.iter().map(|c| c.name.value.clone()).collect();
                self.add_derived(node, alias.name.value.clone(), &names, base, scope, sources)?;
            }
            TableFactor::JsonTable { json_expr, json_path, columns, alias } => {
                let params = self.params.clone();
                let (alias, jt) = crate::engine::json_table::compile(
                    self,
                    &params,
                    outer,
                    json_expr,
                    json_path,
                    columns,
                    alias.as_ref(),
                    scope,
                )?;
                if sources.iter().any(|s| s.alias.eq_ignore_ascii_case(&alias)) {
                    return Err(SqlError::new(1066, "42000", format!("Not unique table/alias: '{alias}'")));
                }
                sources.push(Source {
                    alias,
                    kind: SourceKind::JsonTable(Box::new(jt)),
                    base,
                    width: scope.cols.len() - base,
                    left_join: false,
                    nested: false,
                    on: vec![],
                    lookup: None,
                });
            }
            TableFactor::NestedJoin { table_with_joins, alias: None } if table_with_joins.joins.is_empty() => {
                return self.add_factor(&table_with_joins.relation, scope, sources, outer, lock);
            }
            other => return Err(SqlError::unsupported(format!("FROM {other}"))),
        }
        Ok(sources.len() - 1)
    }

    /// A recursive CTE (see `recursive`); `self.ctes` holds the CTEs
    /// declared before it.
    fn compile_recursive(&mut self, def: &CteDef, outer: Option<&Scope>) -> Result<QueryNode, SqlError> {
        let parts = recursive::split(&def.query, &def.name)?;
        let mut anchors = Vec::with_capacity(parts.anchors.len());
        for a in &parts.anchors {
            anchors.push(self.compile_setexpr(a, outer, RowLock::NONE)?);
        }
        let (columns, types) = recursive::anchor_columns(&anchors)?;
        let names: Vec<String> = if def.columns.is_empty() {
            columns.iter().map(|c| c.name.clone()).collect()
        } else if def.columns.len() == columns.len() {
            def.columns.clone()
        } else {
            return Err(SqlError::new(
                1353,
                "HY000",
                format!("In definition of view, derived table or common table expression, SELECT list and column names list have different column counts ({})", def.name),
            ));
        };
        let slot = self.work_tables;
        self.work_tables += 1;
        self.ctes.push(CteDef {
            name: def.name.clone(),
            columns: names,
            query: def.query.clone(),
            recursive: false,
            work: Some((slot, types.clone())),
        });
        let mut steps = Vec::with_capacity(parts.steps.len());
        let mut r = Ok(());
        for s in &parts.steps {
            match self.compile_setexpr(s, outer, RowLock::NONE) {
                Ok(n) if n.columns().len() != columns.len() => {
                    r = Err(recursive::different_columns());
                    break;
                }
                Ok(n) => steps.push(n),
                Err(e) => {
                    r = Err(e);
                    break;
                }
            }
        }
        self.ctes.pop();
        r?;
        let (limit, offset) = limit_offset(self, &def.query)?;
        let depth_var = recursive::depth_var(self);
        Ok(QueryNode::Recursive(Box::new(RecPlan {
            name: def.name.clone(),
            anchors,
            steps,
            slot,
            distinct: parts.distinct,
            columns,
            types,
            depth_var,
            limit,
            offset,
        })))
    }

    /// The innermost visible CTE an unqualified table name refers to.
    fn cte_index(&self, name: &ast::ObjectName) -> Option<usize> {
        let [only] = name.0.as_slice() else { return None };
        let id = only.as_ident()?;
        self.ctes.iter().rposition(|c| c.name.eq_ignore_ascii_case(&id.value))
    }

    /// A derived table (subquery in FROM, or a CTE) as a source; `names`, if
    /// given, rename its columns.
    fn add_derived(
        &mut self,
        node: QueryNode,
        alias: String,
        names: &[String],
        base: usize,
        scope: &mut Scope,
        sources: &mut Vec<Source>,
    ) -> Result<(), SqlError> {
        let cols = node.columns().to_vec();
        let types = node.types().to_vec();
        if !names.is_empty() && names.len() != cols.len() {
            return Err(SqlError::new(
                1353,
                "HY000",
                format!("In definition of view, derived table or common table expression, SELECT list and column names list have different column counts ({alias})"),
            ));
        }
        for (i, (c, t)) in cols.iter().zip(&types).enumerate() {
            let name = names.get(i).cloned().unwrap_or_else(|| c.name.clone());
            scope.cols.push(ScopeCol { table: alias.to_lowercase(), name, ty: *t, enums: None, default: None });
        }
        sources.push(Source {
            alias,
            kind: SourceKind::Derived(Box::new(node)),
            base,
            width: cols.len(),
            left_join: false,
            nested: false,
            on: vec![],
            lookup: None,
        });
        Ok(())
    }

    /// A join's ON condition, as conjuncts over the sources added so far.
    pub(crate) fn compile_on(
        &mut self,
        e: &Expr,
        scope: &Scope,
        outer: Option<&Scope>,
        params: &ParamMap,
    ) -> Result<Vec<CExpr>, SqlError> {
        let mut c =
            Compiler { scope, outer, params, clause: "on clause", aggs: None, agg_base: 0, aliases: &[], host: self };
        let (ce, _) = c.compile(e)?;
        let mut v = Vec::new();
        conjuncts(ce, &mut v);
        Ok(v)
    }

    /// FROM as a left-deep chain of sources (no parenthesized joins; a
    /// RIGHT JOIN only as the first join of a comma item). Sources run in
    /// `sources` order; `star_order` is the order `*` lists them in, which
    /// differs only for RIGHT JOIN.
    fn compile_flat_from(
        &mut self,
        from: &[ast::TableWithJoins],
        outer: Option<&Scope>,
        lock: RowLock,
        params: &ParamMap,
    ) -> Result<crate::engine::join_plan::FromPlan, SqlError> {
        crate::engine::join_tree::check_table_count(from.iter().map(|t| 1 + t.joins.len()).sum())?;
        let mut scope = Scope::default();
        let mut sources: Vec<Source> = Vec::new();
        let mut star_order: Vec<usize> = Vec::new();
        for twj in from {
            // An ON sees only the tables of its own comma item (commas bind
            // weaker than JOIN): columns of earlier items are hidden.
            let item_start = scope.cols.len();
            let mut joins = &twj.joins[..];
            match joins.first().map(|j| &j.join_operator) {
                // `a RIGHT JOIN b ON c` runs as `b LEFT JOIN a ON c` (as MySQL
                // rewrites it); `*` still lists a's columns first.
                Some(JoinOperator::Right(c) | JoinOperator::RightOuter(c)) => {
                    let JoinConstraint::On(e) = c else {
                        return Err(SqlError::unsupported(
                            "RIGHT JOIN with USING or NATURAL (write it as a LEFT JOIN with the tables swapped)",
                        ));
                    };
                    let kept = self.add_factor(&joins[0].relation, &mut scope, &mut sources, outer, lock)?;
                    let optional = self.add_factor(&twj.relation, &mut scope, &mut sources, outer, lock)?;
                    sources[optional].left_join = true;
                    let visible = crate::engine::join_plan::restrict(&scope, item_start..scope.cols.len());
                    sources[optional].on = self.compile_on(e, &visible, outer, params)?;
                    star_order.extend([optional, kept]);
                    joins = &joins[1..];
                }
                _ => star_order.push(self.add_factor(&twj.relation, &mut scope, &mut sources, outer, lock)?),
            }
            for j in joins {
                let (left, constraint) = match &j.join_operator {
                    JoinOperator::Join(c)
                    | JoinOperator::Inner(c)
                    | JoinOperator::CrossJoin(c)
                    | JoinOperator::StraightJoin(c) => (false, c),
                    JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => (true, c),
                    other => {
                        let what = format!("{other:?}");
                        let kind = what.split('(').next().unwrap_or("this kind of");
                        return Err(SqlError::unsupported(format!("{kind} join")));
                    }
                };
                let idx = self.add_factor(&j.relation, &mut scope, &mut sources, outer, lock)?;
                star_order.push(idx);
                sources[idx].left_join = left;
                let right = sources[idx].base..sources[idx].base + sources[idx].width;
                let on = match constraint {
                    JoinConstraint::On(e) => {
                        let visible = if item_start == 0 {
                            None
                        } else {
                            Some(crate::engine::join_plan::restrict(&scope, item_start..scope.cols.len()))
                        };
                        self.compile_on(e, visible.as_ref().unwrap_or(&scope), outer, params)?
                    }
                    JoinConstraint::Using(_) | JoinConstraint::Natural => {
                        crate::engine::join_plan::using_conds(constraint, &mut scope, item_start..right.start, right)?
                    }
                    JoinConstraint::None => vec![],
                };
                sources[idx].on = on;
            }
        }
        Ok(crate::engine::join_plan::FromPlan {
            scope,
            sources,
            star_order,
            nests: Vec::new(),
            where_conds: Vec::new(),
        })
    }

    pub fn compile_select(
        &mut self,
        s: &ast::Select,
        order_by: &[ast::OrderByExpr],
        limit: Option<CExpr>,
        offset: Option<CExpr>,
        outer: Option<&Scope>,
        lock: RowLock,
    ) -> Result<SelectPlan, SqlError> {
        if s.select_modifiers.as_ref().is_some_and(|m| m.sql_calc_found_rows) {
            // Only the statement's first SELECT may have it, and
            // `found_rows::execute_calc` takes it off that one.
            return Err(SqlError::new(1234, "42000", "Incorrect usage/placement of 'SQL_CALC_FOUND_ROWS'"));
        }
        // Each query block collects its own window functions (a subquery
        // in the select list has its own).
        let saved = self.win.replace(WindowSink::new(&s.named_window)?);
        let saved_grouping = self.grouping.replace(Vec::new());
        let r = self.compile_block(s, order_by, limit, offset, outer, lock);
        self.win = saved;
        self.grouping = saved_grouping;
        r
    }

    fn compile_block(
        &mut self,
        s: &ast::Select,
        order_by: &[ast::OrderByExpr],
        limit: Option<CExpr>,
        offset: Option<CExpr>,
        outer: Option<&Scope>,
        lock: RowLock,
    ) -> Result<SelectPlan, SqlError> {
        let params = self.params.clone();
        crate::engine::json_table_lateral::check(&s.from, self.tables)?;
        let from = if crate::engine::join_tree::needs_tree(&s.from) {
            self.compile_join_tree(&s.from, outer, lock, &params)?
        } else {
            self.compile_flat_from(&s.from, outer, lock, &params)?
        };
        let crate::engine::join_plan::FromPlan { scope, mut sources, star_order, nests, where_conds } = from;
        if sources.is_empty() {
            sources.push(Source {
                alias: String::new(),
                kind: SourceKind::Rows(vec![vec![]]),
                base: 0,
                width: 0,
                left_join: false,
                nested: false,
                on: vec![],
                lookup: None,
            });
        }
        let width = scope.cols.len();

        // WHERE.
        let mut filter = Vec::new();
        if let Some(w) = &s.selection {
            if has_aggregate(w) {
                return Err(SqlError::new(1111, "HY000", "Invalid use of group function"));
            }
            let mut c = Compiler {
                scope: &scope,
                outer,
                params: &params,
                clause: "where clause",
                aggs: None,
                agg_base: 0,
                aliases: &[],
                host: self,
            };
            let (ce, _) = c.compile(w)?;
            conjuncts(ce, &mut filter);
        }
        // Inner-join ON conjuncts of a join tree act as WHERE conjuncts.
        filter.extend(where_conds);

        // Aggregation?
        let (group_exprs, rollup): (&[Expr], bool) = match &s.group_by {
            ast::GroupByExpr::Expressions(v, mods) => (v, rollup_modifier(v, mods)?),
            ast::GroupByExpr::All(_) => return Err(SqlError::unsupported("GROUP BY ALL")),
        };
        let aggregating = !group_exprs.is_empty()
            || s.projection.iter().any(|p| match p {
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => has_aggregate(e),
                _ => false,
            })
            || s.having.as_ref().is_some_and(has_aggregate)
            || order_by.iter().any(|o| has_aggregate(&o.expr));
        let mut aggs: Vec<AggSpec> = Vec::new();

        // Projection.
        let mut proj = Vec::new();
        let mut columns = Vec::new();
        let mut types = Vec::new();
        let mut aliases: Vec<(String, CExpr, SqlType)> = Vec::new();
        for item in &s.projection {
            match item {
                SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => {
                    let qual = match item {
                        SelectItem::QualifiedWildcard(ast::SelectItemQualifiedWildcardKind::ObjectName(n), _) => {
                            Some(n.0.last().map(|p| p.to_string()).unwrap_or_default())
                        }
                        _ => None,
                    };
                    if qual.is_none() && s.from.is_empty() {
                        // As MySQL (also `FROM DUAL`): never a result of no
                        // columns, which clients cannot read.
                        return Err(SqlError::new(1096, "HY000", "No tables used"));
                    }
                    let mut any = false;
                    let order: Vec<usize> =
                        if star_order.is_empty() { (0..sources.len()).collect() } else { star_order.clone() };
                    for src in order.iter().map(|&k| &sources[k]) {
                        if let Some(q) = &qual {
                            if !src.alias.eq_ignore_ascii_case(q.trim_matches('`')) {
                                continue;
                            }
                        }
                        any = true;
                        for i in src.base..src.base + src.width {
                            if scope.cols[i].name.starts_with('\u{0}') || (qual.is_none() && scope.merged.contains(&i))
                            {
                                continue;
                            }
                            proj.push(CExpr::Col(i));
                            types.push(scope.cols[i].ty);
                            columns.push(column_meta_for(&sources, &scope, i, None));
                        }
                    }
                    if !any {
                        return Err(SqlError::new(
                            1051,
                            "42S02",
                            format!("Unknown table '{}'", qual.unwrap_or_default()),
                        ));
                    }
                }
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                    let alias = match item {
                        SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.clone()),
                        _ => None,
                    };
                    let mut c = Compiler {
                        scope: &scope,
                        outer,
                        params: &params,
                        clause: "field list",
                        aggs: if aggregating { Some(&mut aggs) } else { None },
                        agg_base: width,
                        aliases: &[],
                        host: self,
                    };
                    let (ce, t) = c.compile(e)?;
                    let name = alias.clone().unwrap_or_else(|| expr_display_name(e));
                    let meta = match &ce {
                        CExpr::Col(i) if *i < width => column_meta_for(&sources, &scope, *i, Some(&name)),
                        _ => {
                            let mut m = ColumnMeta::expr(&name, t.field_type());
                            m.decimals = t.decimals;
                            let column_not_null = |i: usize| {
                                column_meta_for(&sources, &scope, i, None).flags & crate::types::column_flags::NOT_NULL
                                    != 0
                            };
                            let inputs = crate::engine::expr::nullability::Inputs {
                                column_not_null: &column_not_null,
                                width,
                                aggs: &aggs,
                            };
                            if crate::engine::expr::nullability::not_null(&ce, &inputs) {
                                m.flags |= crate::types::column_flags::NOT_NULL;
                            }
                            if t.class == crate::engine::expr::TClass::UInt {
                                m.flags |= crate::types::column_flags::UNSIGNED;
                            }
                            if t.is_string() && t.coll == Coll::Bin && t.class == crate::engine::expr::TClass::Bin {
                                m.charset = crate::types::charset::BINARY;
                            }
                            m.column_length =
                                t.len.max(match t.class {
                                    crate::engine::expr::TClass::Int | crate::engine::expr::TClass::UInt => 21,
                                    crate::engine::expr::TClass::Double => 23,
                                    crate::engine::expr::TClass::Decimal => 20,
                                    crate::engine::expr::TClass::Date => 10,
                                    crate::engine::expr::TClass::DateTime => 19,
                                    crate::engine::expr::TClass::Time => 10,
                                    _ => 0,
                                }) * if t.is_string() && t.class == crate::engine::expr::TClass::Str { 4 } else { 1 };
                            m
                        }
                    };
                    aliases.push((name, ce.clone(), t));
                    proj.push(ce);
                    types.push(t);
                    columns.push(meta);
                }
                other => return Err(SqlError::unsupported(format!("select item {other}"))),
            }
        }

        // GROUP BY.
        let mut group_by = Vec::new();
        let mut group_colls = Vec::new();
        for g in group_exprs {
            if let Some(p) = position_of(g) {
                let i = p.checked_sub(1).filter(|i| *i < proj.len()).ok_or_else(|| {
                    SqlError::new(1054, "42S22", format!("Unknown column '{p}' in 'group statement'"))
                })?;
                if max_col_at_least(&proj[i], width) {
                    return Err(SqlError::new(1056, "42000", format!("Can't group on '{}'", columns[i].name)));
                }
                group_by.push(proj[i].clone());
                group_colls.push(types[i].coll);
                continue;
            }
            // A bare name that is not a column but a select alias groups by that expression.
            let mut c = Compiler {
                scope: &scope,
                outer,
                params: &params,
                clause: "group statement",
                aggs: None,
                agg_base: 0,
                aliases: &aliases,
                host: self,
            };
            let (ce, t) = c.compile(g)?;
            group_by.push(ce);
            group_colls.push(t.coll);
        }

        // HAVING.
        let mut having = match &s.having {
            Some(h) => {
                let mut c = Compiler {
                    scope: &scope,
                    outer,
                    params: &params,
                    clause: "having clause",
                    aggs: if aggregating { Some(&mut aggs) } else { None },
                    agg_base: width,
                    aliases: &aliases,
                    host: self,
                };
                Some(c.compile(h)?.0)
            }
            None => None,
        };

        // ORDER BY.
        let mut order = Vec::new();
        for o in order_by {
            let (expr, t) = if let Some(p) = position_of(&o.expr) {
                let i = p
                    .checked_sub(1)
                    .filter(|i| *i < proj.len())
                    .ok_or_else(|| SqlError::new(1054, "42S22", format!("Unknown column '{p}' in 'order clause'")))?;
                (proj[i].clone(), types[i])
            } else if let Some((_, e, t)) = match &o.expr {
                Expr::Identifier(id) => aliases.iter().find(|(a, _, _)| a.eq_ignore_ascii_case(&id.value)),
                _ => None,
            } {
                (e.clone(), *t)
            } else {
                let mut c = Compiler {
                    scope: &scope,
                    outer,
                    params: &params,
                    clause: "order clause",
                    aggs: if aggregating { Some(&mut aggs) } else { None },
                    agg_base: width,
                    aliases: &aliases,
                    host: self,
                };
                c.compile(&o.expr)?
            };
            // ENUM / SET sort by member index / bit mask, as in MySQL.
            let (expr, t) = crate::engine::expr::compile::enum_number(&scope, outer, expr, t);
            order.push(OrderKey { expr, desc: is_desc(o), coll: t.coll });
        }

        if aggregating && self.full_group_by.is_none() {
            let col_name = |i: usize| {
                let src = sources.iter().find(|s| (s.base..s.base + s.width).contains(&i));
                let db = match src.map(|s| &s.kind) {
                    Some(SourceKind::Table(ta)) => ta.table.def.name.split_once('/').map(|(d, _)| d.to_string()),
                    _ => None,
                };
                let table = src.map(|s| s.alias.as_str()).unwrap_or("");
                let col = &scope.cols[i].name;
                match db {
                    Some(db) => format!("{db}.{table}.{col}"),
                    None => format!("{table}.{col}"),
                }
            };
            let block = crate::engine::full_group_by::Block {
                sources: &sources,
                width,
                group_by: &group_by,
                filter: &filter,
                col_name: &col_name,
            };
            use crate::engine::full_group_by::Clause;
            let mut exprs: Vec<(Clause, usize, &CExpr)> =
                proj.iter().enumerate().map(|(i, e)| (Clause::Select, i + 1, e)).collect();
            exprs.extend(having.iter().map(|e| (Clause::Having, 1, e)));
            exprs.extend(order.iter().enumerate().map(|(i, o)| (Clause::OrderBy, i + 1, &o.expr)));
            self.full_group_by = crate::engine::full_group_by::violation(&block, &exprs);
        }
        let distinct = match &s.distinct {
            None | Some(ast::Distinct::All) => false,
            Some(ast::Distinct::Distinct) => true,
            Some(ast::Distinct::On(_)) => return Err(SqlError::unsupported("DISTINCT ON")),
        };
        // Window results follow the post-aggregation row.
        let mut windows = self.win.as_mut().map(|w| std::mem::take(&mut w.funcs)).unwrap_or_default();
        // ROLLUP: grouped expressions read their group slots (after the
        // aggregates), GROUPING() calls their values after those.
        let calls = self.grouping.as_mut().map(std::mem::take).unwrap_or_default();
        let slots_base = width + aggs.len();
        let rollup = {
            let mut exprs: Vec<&mut CExpr> = proj.iter_mut().collect();
            exprs.extend(having.iter_mut());
            exprs.extend(order.iter_mut().map(|o| &mut o.expr));
            exprs.extend(windows.iter_mut().flat_map(|w| w.exprs_mut()));
            crate::engine::rollup::resolve(rollup, &group_by, calls, slots_base, exprs)?
        };
        if rollup.is_some() {
            // A rolled-up value is NULL whatever the column's definition.
            for (e, m) in proj.iter().zip(columns.iter_mut()) {
                if crate::engine::rollup::reads_slot(e, slots_base, group_by.len()) {
                    m.flags &= !crate::types::column_flags::NOT_NULL;
                }
            }
        }
        let rollup_width = rollup.as_ref().map_or(0, |r| r.extra_width(group_by.len()));
        if !windows.is_empty() {
            // Window values are computed in one pass over all rows, where a
            // correlated subquery would not be re-run per row.
            let mut subs = Vec::new();
            windows.iter().flat_map(|w| w.exprs()).for_each(|e| collect_subs(e, &mut subs));
            if subs.iter().any(|i| self.subs.get(*i).is_some_and(|s| s.correlated)) {
                return Err(SqlError::unsupported("a correlated subquery in a window function"));
            }
            let base = width + if aggregating { aggs.len() + rollup_width } else { 0 };
            proj.iter_mut().for_each(|e| window::place(e, base));
            order.iter_mut().for_each(|o| window::place(&mut o.expr, base));
        }
        let agg = if aggregating { Some(AggPlan { group_by, group_colls, aggs, rollup }) } else { None };

        let mut plan = SelectPlan {
            sources,
            width,
            filter,
            agg,
            having,
            proj,
            columns,
            types,
            distinct,
            order,
            limit,
            offset,
            lock,
            correlated: vec![],
            windows,
            nests,
            waits: false,
        };
        self.plan_access(&mut plan);
        plan.correlated = self.correlated_in(&plan);
        plan.waits = plan.filter.iter().chain(&plan.proj).any(crate::engine::user_lock_fns::expr_may_wait);
        Ok(plan)
    }

    fn correlated_in(&self, plan: &SelectPlan) -> Vec<usize> {
        let mut out = Vec::new();
        let mut visit = |e: &CExpr| collect_subs(e, &mut out);
        plan.filter.iter().for_each(&mut visit);
        plan.proj.iter().for_each(&mut visit);
        out.retain(|i| self.subs.get(*i).is_some_and(|s| s.correlated));
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Choose access paths, push single-table conjuncts, set up join lookups.
    fn plan_access(&self, plan: &mut SelectPlan) {
        let n = plan.sources.len();
        let mut remaining = std::mem::take(&mut plan.filter);
        let derived = derived_constants(&plan.sources, &remaining);
        remaining.extend(derived);
        for si in 0..n {
            // A source NULL-extended alone or in a nest: WHERE conjuncts stay out.
            let left_join = plan.sources[si].left_join || plan.sources[si].nested;
            let (base, width) = (plan.sources[si].base, plan.sources[si].width);
            let in_range = |e: &CExpr| {
                let mut cols = Vec::new();
                collect_cols(e, &mut cols);
                // A conjunct that may wait stays in WHERE, where it can.
                // One that reads the enclosing query's row (a correlated
                // subquery's `o.c = cu.id`) is local: the subquery's tables
                // are read with that row set, so it can pick the keys
                // (issue 23), and it is checked on the same row as in WHERE.
                let mut subs = Vec::new();
                collect_subs(e, &mut subs);
                !cols.is_empty()
                    && cols.iter().all(|c| *c >= base && *c < base + width)
                    && subs.is_empty()
                    && !crate::engine::user_lock_fns::expr_may_wait(e)
            };
            let mut local: Vec<CExpr> = Vec::new();
            // WHERE conjuncts move into the first/inner-joined sources.
            if !left_join {
                let mut keep = Vec::new();
                for c in remaining.drain(..) {
                    if in_range(&c) {
                        local.push(c);
                    } else {
                        keep.push(c);
                    }
                }
                remaining = keep;
            }
            // ON conjuncts on this source alone are applied when fetching it.
            let mut on_keep = Vec::new();
            for c in std::mem::take(&mut plan.sources[si].on) {
                if in_range(&c) {
                    local.push(c);
                } else {
                    on_keep.push(c);
                }
            }
            plan.sources[si].on = on_keep;
            // Inner join: WHERE conjuncts over this and earlier sources join here
            // (hash join / key lookup instead of a cross product).
            if si > 0 && !left_join {
                let mut keep = Vec::new();
                for c in remaining.drain(..) {
                    let mut cols = Vec::new();
                    collect_cols(&c, &mut cols);
                    let mine = cols.iter().any(|x| *x >= base && *x < base + width);
                    if mine && cols.iter().all(|x| *x < base + width) && !has_sub(&c) {
                        plan.sources[si].on.push(c);
                    } else {
                        keep.push(c);
                    }
                }
                remaining = keep;
            }
            let mut local_rel: Vec<CExpr> = local
                .iter()
                .cloned()
                .map(|mut e| {
                    map_cols(&mut e, &|i| i - base);
                    e
                })
                .collect();
            let src = &mut plan.sources[si];
            match &mut src.kind {
                SourceKind::Table(t) => {
                    t.access =
                        if t.only.is_some() { Access::FullScan } else { choose_access(&t.table.def, &local_rel) };
                    t.local = std::mem::take(&mut local_rel);
                    // Join lookup: key columns equal to expressions over earlier sources.
                    if si > 0 && t.only.is_none() {
                        let mut conds: Vec<&CExpr> = src.on.iter().collect();
                        if !left_join {
                            conds.extend(remaining.iter());
                        }
                        // A table read by its own constant keys is read once,
                        // not once per outer key through an index range.
                        let own_keys = matches!(
                            t.access,
                            Access::PkLookup { .. } | Access::UniqueLookup { .. } | Access::IndexKeys { .. }
                        );
                        src.lookup = join_lookup(&t.table, base, width, &conds).filter(|l| !(l.range && own_keys));
                    }
                }
                _ => {
                    // Non-table sources keep their conjuncts as ON/WHERE filters.
                    if left_join {
                        src.on.extend(local);
                    } else {
                        remaining.extend(local);
                    }
                }
            }
        }
        plan.filter = remaining;
        // Needed columns per table source.
        let mut used: Vec<usize> = Vec::new();
        let mut all: Vec<&CExpr> = Vec::new();
        all.extend(plan.filter.iter());
        all.extend(plan.proj.iter());
        all.extend(plan.having.iter());
        all.extend(plan.order.iter().map(|o| &o.expr));
        if let Some(a) = &plan.agg {
            all.extend(a.group_by.iter());
            all.extend(a.aggs.iter().flat_map(|x| x.exprs()));
        }
        all.extend(plan.windows.iter().flat_map(|w| w.exprs()));
        for s in &plan.sources {
            all.extend(s.on.iter());
            if let Some(l) = &s.lookup {
                all.extend(l.keys.iter());
            }
            if let SourceKind::JsonTable(jt) = &s.kind {
                all.push(&jt.doc);
            }
        }
        all.extend(plan.nests.iter().flat_map(|n| n.after.iter()));
        for e in all {
            collect_cols(e, &mut used);
        }
        let fetch_all = self.subs.iter().any(|s| s.correlated);
        for s in &mut plan.sources {
            let (base, width) = (s.base, s.width);
            if let SourceKind::Table(t) = &mut s.kind {
                let mut needed: Vec<ColumnId> = if fetch_all {
                    (0..width as ColumnId).collect()
                } else {
                    used.iter().filter(|c| **c >= base && **c < base + width).map(|c| (*c - base) as ColumnId).collect()
                };
                let mut lc = Vec::new();
                for e in &t.local {
                    collect_cols(e, &mut lc);
                }
                needed.extend(lc.into_iter().map(|c| c as ColumnId));
                if let Some(l) = &s.lookup {
                    needed.extend(l.cols.iter().copied());
                }
                if t.lock.is_locking() {
                    // A locking read with LIMIT locks the rows it picks by
                    // primary key (`locked_limit`).
                    needed.extend(t.table.def.primary_key.iter().copied());
                }
                needed.sort_unstable();
                needed.dedup();
                if needed.is_empty() {
                    // Fetch the first key column so a row still arrives.
                    needed.push(t.table.def.primary_key[0]);
                }
                t.needed = needed;
            }
        }
        if !fetch_all {
            // Correlated subqueries read outer rows at full-width offsets.
            crate::engine::row_layout::compact(plan);
        }
    }
}

fn has_sub(e: &CExpr) -> bool {
    let mut v = Vec::new();
    collect_subs(e, &mut v);
    !v.is_empty() || reads_outer(e)
}

fn collect_subs(e: &CExpr, out: &mut Vec<usize>) {
    match e {
        CExpr::InSub { sub, expr, .. } => {
            out.push(*sub);
            collect_subs(expr, out);
        }
        CExpr::Exists { sub, .. } | CExpr::ScalarSub(sub) => out.push(*sub),
        CExpr::Quantified { sub, exprs, .. } => {
            out.push(*sub);
            exprs.iter().for_each(|x| collect_subs(x, out));
        }
        _ => for_each_child(e, &mut |c| collect_subs(c, out)),
    }
}

fn max_col_at_least(e: &CExpr, width: usize) -> bool {
    crate::engine::expr::max_col(e).is_some_and(|m| m >= width)
}

/// The partitions `PARTITION (names)` selects (None without the clause):
/// 1747 on a table that is not partitioned, 1735 for a name it does not
/// have, as MySQL.
pub fn selected_partitions(t: &SqlTable, part: &PartFn, names: &[ast::Ident]) -> Result<Option<Vec<u32>>, SqlError> {
    if names.is_empty() {
        return Ok(None);
    }
    if t.meta.partition.is_none() {
        return Err(SqlError::new(1747, "HY000", "PARTITION () clause on non partitioned table"));
    }
    let all = crate::engine::explain::partition_names(t, part);
    let mut ids = Vec::new();
    for n in names {
        let id = all.iter().position(|p| p.eq_ignore_ascii_case(&n.value)).ok_or_else(|| {
            SqlError::new(1735, "HY000", format!("Unknown partition '{}' in table '{}'", n.value, t.name))
        })?;
        if !ids.contains(&(id as u32)) {
            ids.push(id as u32);
        }
    }
    ids.sort_unstable();
    Ok(Some(ids))
}

/// Equalities with constants that WHERE implies through equalities of
/// integer columns (`const_prop`), so that `t.a = w.id AND w.id = 1` reads
/// `t` by the key `a = 1`. An inner join's ON counts as WHERE, unless the
/// query has outer joins (whose ON only decides NULL-extension).
fn derived_constants(sources: &[Source], filter: &[CExpr]) -> Vec<CExpr> {
    let outer = sources.iter().any(|s| s.left_join || s.nested);
    let ons: Vec<&CExpr> = if outer { Vec::new() } else { sources.iter().flat_map(|s| s.on.iter()).collect() };
    let is_int_col = |i: usize| {
        sources.iter().any(|s| {
            let SourceKind::Table(t) = &s.kind else { return false };
            if i < s.base || i >= s.base + s.width {
                return false;
            }
            let c = i - s.base;
            let tbl = &t.table;
            tbl.def.columns.get(c).is_some_and(|d| {
                matches!(
                    d.ty,
                    norr_signals::ColumnType::TinyInt { .. }
                        | norr_signals::ColumnType::SmallInt { .. }
                        | norr_signals::ColumnType::MediumInt { .. }
                        | norr_signals::ColumnType::Int { .. }
                        | norr_signals::ColumnType::BigInt { .. }
                )
            }) && tbl.bits.get(c).is_none_or(|b| *b == 0)
                && tbl.enums.get(c).is_none_or(|e| e.is_none())
                && !tbl.json.get(c).copied().unwrap_or(false)
        })
    };
    crate::engine::const_prop::derived_equalities(filter, &ons, &is_int_col)
}

fn join_lookup(table: &SqlTable, base: usize, width: usize, conds: &[&CExpr]) -> Option<JoinLookup> {
    // inner_col -> expression over columns before `base`
    let mut eqs: Vec<(ColumnId, CExpr)> = Vec::new();
    for c in conds {
        if let CExpr::Cmp(CmpKind::Eq, l, r, _) = c {
            for (a, b) in [(l, r), (r, l)] {
                if let CExpr::Col(i) = a.as_ref() {
                    if *i >= base && *i < base + width {
                        let mut cols = Vec::new();
                        collect_cols(b, &mut cols);
                        if cols.iter().all(|x| *x < base) && !has_sub(b) {
                            eqs.push(((*i - base) as ColumnId, (**b).clone()));
                        }
                    }
                }
            }
        }
    }
    let find = |cols: &[ColumnId]| -> Option<Vec<CExpr>> {
        cols.iter().map(|c| eqs.iter().find(|(x, _)| x == c).map(|(_, e)| e.clone())).collect()
    };
    if let Some(keys) = find(&table.def.primary_key) {
        return Some(JoinLookup { index: None, cols: table.def.primary_key.clone(), keys, range: false });
    }
    for ix in table.def.indexes.iter().filter(|i| i.unique) {
        if let Some(keys) = find(&ix.columns) {
            return Some(JoinLookup { index: Some(ix.id), cols: ix.columns.clone(), keys, range: false });
        }
    }
    // An ordered index (the primary key's included) whose leading columns
    // the join sets equal: read as one range of the index per distinct key,
    // the longest prefix winning. TIMESTAMP columns are left out: a range's
    // bounds are compared in UTC, a join key is the session's wall time.
    let mut best: Option<(usize, &norr_signals::IndexDef)> = None;
    for ix in table.def.indexes.iter().filter(|i| i.kind == norr_signals::IndexKind::Ordered) {
        let len = ix
            .columns
            .iter()
            .take_while(|c| {
                eqs.iter().any(|(x, _)| x == *c)
                    && !matches!(table.def.columns[**c as usize].ty, norr_signals::ColumnType::Timestamp)
            })
            .count();
        if len > 0 && best.is_none_or(|(l, _)| len > l) {
            best = Some((len, ix));
        }
    }
    let (len, ix) = best?;
    let cols: Vec<ColumnId> = ix.columns[..len].to_vec();
    let keys = find(&cols)?;
    Some(JoinLookup { index: Some(ix.id), cols, keys, range: true })
}

fn column_meta_for(sources: &[Source], scope: &Scope, i: usize, alias: Option<&str>) -> ColumnMeta {
    for s in sources {
        if i >= s.base && i < s.base + s.width {
            if let SourceKind::Table(t) = &s.kind {
                let mut m = t.table.column_meta((i - s.base) as ColumnId);
                m.table = s.alias.clone();
                // The optional side of an outer join gives NULLs for a NOT
                // NULL column (MySQL clears the flag too).
                if s.left_join || s.nested {
                    m.flags &= !crate::types::column_flags::NOT_NULL;
                }
                if let Some(a) = alias {
                    m.name = a.to_string();
                }
                return m;
            }
            // A table column read through a derived table (a view read as
            // one, say) keeps its table column's metadata: type, NOT NULL,
            // origin. Other derived columns (computed, or of a UNION whose
            // sides may differ) get their type from the scope below.
            if let SourceKind::Derived(node) = &s.kind {
                let inner = match node.as_ref() {
                    QueryNode::Select(_) => node.columns().get(i - s.base).filter(|m| !m.org_table.is_empty()),
                    _ => None,
                };
                if let Some(inner) = inner {
                    let mut m = inner.clone();
                    m.table = s.alias.clone();
                    m.name = alias.unwrap_or(&scope.cols[i].name).to_string();
                    if s.left_join || s.nested {
                        m.flags &= !crate::types::column_flags::NOT_NULL;
                    }
                    return m;
                }
            }
        }
    }
    let c = &scope.cols[i];
    let mut m = ColumnMeta::expr(alias.unwrap_or(&c.name), c.ty.field_type());
    m.decimals = c.ty.decimals;
    m
}

pub(crate) fn empty_select(columns: &[ColumnMeta], types: &[SqlType]) -> SelectPlan {
    SelectPlan {
        sources: vec![Source {
            alias: String::new(),
            kind: SourceKind::Rows(vec![]),
            base: 0,
            width: 0,
            left_join: false,
            nested: false,
            on: vec![],
            lookup: None,
        }],
        width: 0,
        filter: vec![],
        agg: None,
        having: None,
        proj: vec![],
        columns: columns.to_vec(),
        types: types.to_vec(),
        distinct: false,
        order: vec![],
        limit: None,
        offset: None,
        lock: RowLock::NONE,
        correlated: vec![],
        windows: vec![],
        nests: Vec::new(),
        waits: false,
    }
}

/// Compile a query statement (tables resolved first).
pub async fn prepare_query(engine: &Engine, session: &Session, q: &Query) -> Result<Arc<Compiled>, SqlError> {
    let tables = match resolve_tables(engine, session, q).await {
        Ok(t) => t,
        // Views are looked for only when a name is not a table.
        Err(e) if e.code == 1146 => {
            return Box::pin(crate::engine::view_expand::prepare_query(engine, session, q, e)).await
        }
        Err(e) => return Err(e),
    };
    let mut c = StmtCompiler::new(&tables, ParamMap::from_statement(q));
    let root = c.compile_query(q, None, RowLock::NONE)?;
    let mut compiled = c.finish(root);
    compiled.temp_generation = session.temp.generation();
    Ok(Arc::new(compiled))
}

/// Result columns of a SELECT without running it (for COM_STMT_PREPARE).
pub async fn result_columns(engine: &Engine, session: &Session, q: &Query) -> Result<Vec<ColumnMeta>, SqlError> {
    Ok(prepare_query(engine, session, q).await?.columns().to_vec())
}

/// Run a compiled query.
pub async fn execute_prepared_query(
    engine: &Engine,
    session: &mut Session,
    c: &Compiled,
    params: &[Value],
) -> Result<QueryOutput, SqlError> {
    let rows = exec::run_compiled(engine, session, c, params).await?;
    Ok(QueryOutput::Rows { columns: c.shared_columns(), rows })
}

/// `execute_prepared_query` for a statement whose result goes to the
/// client: streamed through the session's result sink when the plan allows
/// (`stream`), which leaves `QueryOutput::Streamed`.
pub async fn execute_prepared_query_to_client(
    engine: &Engine,
    session: &mut Session,
    c: &Compiled,
    params: &[Value],
) -> Result<QueryOutput, SqlError> {
    // Taken for the statement: nothing it runs inside may use it.
    let Some(sink) = session.result_sink.take() else {
        return execute_prepared_query(engine, session, c, params).await;
    };
    let r = exec::run_compiled_to(engine, session, c, params, Some(&sink)).await;
    session.result_sink = Some(sink);
    Ok(match r? {
        exec::Produced::Rows(rows) => QueryOutput::Rows { columns: c.shared_columns(), rows },
        exec::Produced::Streamed(rows) => QueryOutput::Streamed { rows },
    })
}

/// `execute_query` for a statement whose result goes to the client.
pub async fn execute_query_to_client(
    engine: &Engine,
    session: &mut Session,
    q: &Query,
    params: &[Value],
) -> Result<QueryOutput, SqlError> {
    let c = prepare_query(engine, session, q).await?;
    execute_prepared_query_to_client(engine, session, &c, params).await
}

/// The dispatcher's entry point for SELECT / UNION / VALUES queries.
pub async fn execute_query(
    engine: &Engine,
    session: &mut Session,
    q: &Query,
    params: &[Value],
) -> Result<QueryOutput, SqlError> {
    let c = prepare_query(engine, session, q).await?;
    execute_prepared_query(engine, session, &c, params).await
}

#[cfg(test)]
mod name_scope_tests {
    use super::name_scope;
    use crate::engine::infoschema::NameScope;

    fn scope_of(sql: &str) -> NameScope {
        let dialect = crate::engine::dialect::NorrMySql;
        let stmts = sqlparser::parser::Parser::parse_sql(&dialect, sql).unwrap();
        name_scope(&stmts[0])
    }

    fn names(v: &[&str]) -> Option<Vec<String>> {
        Some(v.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn equalities_and_in_lists_among_top_level_ands_restrict() {
        let s = scope_of("SELECT * FROM information_schema.TABLES WHERE table_schema = 'a' AND 'T1' = TABLE_NAME");
        assert_eq!(s, NameScope { schemas: names(&["a"]), tables: names(&["T1"]) });
        let s = scope_of("SELECT 1 FROM information_schema.COLUMNS c WHERE (c.TABLE_SCHEMA IN ('a', 'b')) AND x > 1");
        assert_eq!(s, NameScope { schemas: names(&["a", "b"]), tables: None });
        // Both must hold: the names in both, compared as the collation does.
        let s =
            scope_of("SELECT 1 FROM information_schema.TABLES WHERE table_schema IN ('a', 'b') AND table_schema = 'B'");
        assert_eq!(s.schemas, names(&["b"]));
        assert!(s.admits("B", "t") && !s.admits("a", "t"));
    }

    #[test]
    fn other_shapes_read_everything() {
        for sql in [
            "SELECT * FROM information_schema.TABLES WHERE table_schema = 'a' OR table_name = 'x'",
            "SELECT * FROM information_schema.TABLES WHERE table_schema <> 'a'",
            "SELECT * FROM information_schema.TABLES WHERE table_schema NOT IN ('a')",
            "SELECT * FROM information_schema.TABLES WHERE table_schema = other_column",
            "SELECT * FROM information_schema.TABLES t JOIN information_schema.COLUMNS c ON 1 WHERE t.table_schema = 'a'",
            "SELECT * FROM information_schema.TABLES WHERE table_schema = 'a' UNION SELECT * FROM information_schema.TABLES",
            "SELECT * FROM information_schema.TABLES WHERE table_schema = 'a' AND EXISTS (SELECT 1 FROM information_schema.TABLES)",
            "WITH x AS (SELECT 1) SELECT * FROM information_schema.TABLES WHERE table_schema = 'a'",
        ] {
            assert_eq!(scope_of(sql), NameScope::default(), "{sql}");
            assert!(scope_of(sql).admits("any", "thing"));
        }
    }
}
