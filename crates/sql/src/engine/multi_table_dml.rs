//! Multi-table UPDATE and DELETE (MySQL 8.0 syntax and semantics):
//!
//! * `UPDATE [LOW_PRIORITY] [IGNORE] t1 [AS a] {JOIN | LEFT JOIN | STRAIGHT_JOIN | ,} t2 ...
//!   SET a.c = expr, t2.d = expr [WHERE ...]`
//! * `DELETE [LOW_PRIORITY] [QUICK] [IGNORE] t1, t2 FROM <join> [WHERE ...]` and
//!   `DELETE ... FROM t1, t2 USING <join> [WHERE ...]`
//!
//! The read side is an ordinary SELECT over the join (the join planner with
//! its batched key lookups and pushed conditions), built from the statement:
//! it yields, per joined row, every column of every target table and, for
//! UPDATE, the value of every SET expression. The writes then go by primary
//! key through the single-table machinery of `dml` (`apply_update`,
//! `delete_rows`, foreign keys through `fk_enforce`).
//!
//! Semantics, as MySQL:
//! * a target row matched several times by the join is updated / deleted once
//!   (the first match wins for UPDATE);
//! * every SET expression reads the joined row as read, before any of the
//!   statement's writes: `SET t1.a = t2.b, t2.b = t1.a` swaps the values. This
//!   is what MySQL does when it defers the updates to after the join, which it
//!   does whenever a SET expression reads a column being updated; MySQL's
//!   "update on the fly" of the first table (taken when no SET reads an updated
//!   column) gives the same result then;
//! * ORDER BY / LIMIT are refused (1221) but in a single-table statement
//!   (here for IGNORE or a subquery), a SET target or DELETE target that is
//!   a derived table is not updatable (1288), a DELETE target missing from the
//!   FROM list is 1109, and a target table read in a subquery of the statement
//!   is 1093;
//! * IGNORE: a duplicate key (1062) or a foreign-key error (1451 / 1452) on a
//!   row becomes a warning and that row is left as it was.
//!
//! Locks: the rows of the target tables are read with exclusive locks (they
//! are about to be written). The rows of tables that are only joined are read
//! as committed reads, without locks: our transactions are READ COMMITTED (as
//! NDB's), and InnoDB under READ COMMITTED also reads such rows without
//! shared locks (its REPEATABLE READ shared locks exist to make the statement
//! replay identically from a statement-based binlog, which we do not have).
//! So a concurrent change to a joined-only row may land between our read and
//! our write, exactly as in InnoDB READ COMMITTED.
//!
//! Atomicity: one statement transaction (autocommit) or, inside an explicit
//! transaction, compensation of the statement's own writes (`dml`'s module
//! doc), plus a savepoint when foreign keys cascade.

use crate::engine::catalog::SqlTable;
use crate::engine::check_constraints;
use crate::engine::dml;
use crate::engine::exec::{self, Reader, Row};
use crate::engine::expr::compile::ParamMap;
use crate::engine::expr::value::{self as vals, Coll};
use crate::engine::expr::EvalCtx;
use crate::engine::fk_enforce::{self, Fk, StmtGuard};
use crate::engine::partition::PartFn;
use crate::engine::query::{resolve_tables, Compiled, QueryNode, SourceKind, StmtCompiler, Tables};
use crate::engine::row_lock::RowLock;
use crate::engine::{txn_control, Engine};
use crate::types::{QueryOutput, Session, SqlError};
use norr_client::Transaction;
use norr_signals::{ColumnId, KeyOp, LockMode, Value};
use sqlparser::ast::{self, Expr, Ident, SelectItem, Statement, TableFactor, TableWithJoins};
use std::collections::HashSet;
use std::sync::Arc;

use crate::engine::multi_table_text::has_ignore;
pub use crate::engine::multi_table_text::rewrite;

// ---------------------------------------------------------------- shape

fn delete_from(d: &ast::Delete) -> &[TableWithJoins] {
    match &d.from {
        ast::FromTable::WithFromKeyword(v) | ast::FromTable::WithoutKeyword(v) => v,
    }
}

fn plain(twj: &TableWithJoins) -> bool {
    twj.joins.is_empty() && matches!(twj.relation, TableFactor::Table { .. })
}

/// True if this UPDATE / DELETE goes here rather than to `dml`'s
/// single-table path: joins, several tables, a derived table, the
/// multi-table DELETE syntax, IGNORE, or a subquery (the read side here is
/// a SELECT, which runs subqueries; a single-table statement keeps its
/// ORDER BY and LIMIT there).
pub fn is_multi(st: &Statement) -> bool {
    match st {
        Statement::Update(u) => !plain(&u.table) || has_ignore(&u.optimizer_hints) || has_subquery(st),
        Statement::Delete(d) => {
            let from = delete_from(d);
            !d.tables.is_empty()
                || d.using.is_some()
                || from.len() != 1
                || !from.iter().all(plain)
                || has_ignore(&d.optimizer_hints)
                || has_subquery(st)
        }
        _ => false,
    }
}

/// Does the statement have a subquery in an expression (WHERE, SET, ON)?
fn has_subquery(st: &Statement) -> bool {
    ast::visit_expressions(st, |e| match e {
        Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => std::ops::ControlFlow::Break(()),
        _ => std::ops::ControlFlow::Continue(()),
    })
    .is_break()
}

/// A FROM item: its alias and, for a base table, its name.
struct Factor {
    alias: String,
    table: Option<ast::ObjectName>,
}

fn last_part(name: &ast::ObjectName) -> String {
    name.0.last().map(|p| p.as_ident().map(|i| i.value.clone()).unwrap_or_else(|| p.to_string())).unwrap_or_default()
}

fn collect_factor(f: &TableFactor, out: &mut Vec<Factor>) {
    match f {
        TableFactor::Table { name, alias, .. } => out.push(Factor {
            alias: alias.as_ref().map(|a| a.name.value.clone()).unwrap_or_else(|| last_part(name)),
            table: Some(name.clone()),
        }),
        TableFactor::NestedJoin { table_with_joins, alias } => {
            collect_factors(std::slice::from_ref(table_with_joins.as_ref()), out);
            if let Some(a) = alias {
                out.push(Factor { alias: a.name.value.clone(), table: None });
            }
        }
        // Derived tables and JSON_TABLE: rows made by the statement, which
        // no SET or DELETE may target (1288).
        TableFactor::Derived { alias, .. } | TableFactor::JsonTable { alias, .. } => {
            out.push(Factor { alias: alias.as_ref().map(|a| a.name.value.clone()).unwrap_or_default(), table: None })
        }
        _ => out.push(Factor { alias: String::new(), table: None }),
    }
}

fn collect_factors(from: &[TableWithJoins], out: &mut Vec<Factor>) {
    for twj in from {
        collect_factor(&twj.relation, out);
        for j in &twj.joins {
            collect_factor(&j.relation, out);
        }
    }
}

fn wrong_usage(stmt: &str, clause: &str) -> SqlError {
    SqlError::new(1221, "HY000", format!("Incorrect usage of {stmt} and {clause}"))
}

fn not_updatable(alias: &str, stmt: &str) -> SqlError {
    SqlError::new(1288, "HY000", format!("The target table {alias} of the {stmt} is not updatable"))
}

/// 1093: MySQL cannot read a table it is changing in a subquery of the same
/// statement (a derived table in FROM is materialised first, so it may).
fn check_subqueries<'e>(
    exprs: impl Iterator<Item = &'e Expr>,
    targets: &[(String, Arc<SqlTable>)],
    stmt: &str,
) -> Result<(), SqlError> {
    let mut hit: Option<String> = None;
    for e in exprs {
        let _ = ast::visit_expressions(e, |x| {
            let q = match x {
                Expr::Subquery(q) | Expr::Exists { subquery: q, .. } | Expr::InSubquery { subquery: q, .. } => q,
                _ => return std::ops::ControlFlow::Continue(()),
            };
            let _ = ast::visit_relations(q.as_ref(), |name| {
                let n = last_part(name);
                if let Some((_, t)) = targets.iter().find(|(_, t)| t.name.eq_ignore_ascii_case(&n)) {
                    hit = Some(t.name.clone());
                    return std::ops::ControlFlow::Break(());
                }
                std::ops::ControlFlow::Continue(())
            });
            if hit.is_some() {
                std::ops::ControlFlow::Break(())
            } else {
                std::ops::ControlFlow::Continue(())
            }
        });
        if let Some(t) = hit {
            let _ = stmt;
            return Err(SqlError::new(
                1093,
                "HY000",
                format!("You can't specify target table '{t}' for update in FROM clause"),
            ));
        }
    }
    Ok(())
}

fn join_exprs(from: &[TableWithJoins]) -> Vec<&Expr> {
    let mut out = Vec::new();
    for twj in from {
        for j in &twj.joins {
            let c = match &j.join_operator {
                ast::JoinOperator::Join(c)
                | ast::JoinOperator::Inner(c)
                | ast::JoinOperator::Left(c)
                | ast::JoinOperator::LeftOuter(c)
                | ast::JoinOperator::Right(c)
                | ast::JoinOperator::RightOuter(c)
                | ast::JoinOperator::StraightJoin(c) => Some(c),
                _ => None,
            };
            if let Some(ast::JoinConstraint::On(e)) = c {
                out.push(e);
            }
        }
    }
    out
}

// ---------------------------------------------------------------- compile

/// The statement whose table names `resolve_tables` looks up: for `DELETE
/// FROM a1, a2 USING <join>` the names before USING are aliases of the
/// join, not tables (in `DELETE a1, a2 FROM <join>` sqlparser keeps them
/// apart, in `tables`).
fn resolvable(st: &Statement) -> std::borrow::Cow<'_, Statement> {
    match st {
        Statement::Delete(d) if d.using.is_some() => {
            let mut d = d.clone();
            d.from = ast::FromTable::WithFromKeyword(d.using.take().unwrap_or_default());
            std::borrow::Cow::Owned(Statement::Delete(d))
        }
        _ => std::borrow::Cow::Borrowed(st),
    }
}

/// A table the statement writes.
struct Target {
    alias: String,
    table: Arc<SqlTable>,
    part: Arc<PartFn>,
    /// First column of this table's row in the read rows.
    base: usize,
    /// UPDATE: (column, read-row column holding its new value), SET order.
    sets: Vec<(ColumnId, usize)>,
}

/// A compiled multi-table UPDATE / DELETE.
pub struct MultiStmt {
    read: Compiled,
    targets: Vec<Target>,
    ignore: bool,
    delete: bool,
}

fn select_template() -> Result<ast::Query, SqlError> {
    let dialect = crate::engine::dialect::NorrMySql;
    match sqlparser::parser::Parser::parse_sql(&dialect, "SELECT 1").map_err(|e| SqlError::internal(e.to_string()))? {
        v if v.len() == 1 => match v.into_iter().next() {
            Some(Statement::Query(q)) => Ok(*q),
            _ => Err(SqlError::internal("SELECT template")),
        },
        _ => Err(SqlError::internal("SELECT template")),
    }
}

fn col_ref(alias: &str, col: &str) -> Expr {
    Expr::CompoundIdentifier(vec![Ident::new(alias), Ident::new(col)])
}

/// The factor a SET target `[alias.]col` names (1054 / 1052 as MySQL).
fn set_target<'f>(
    factors: &'f [Factor],
    tables: &Tables,
    target: &ast::AssignmentTarget,
) -> Result<(&'f Factor, String), SqlError> {
    let ast::AssignmentTarget::ColumnName(name) = target else {
        return Err(SqlError::unsupported("tuple assignment in UPDATE"));
    };
    let parts: Vec<String> =
        name.0.iter().map(|p| p.as_ident().map(|i| i.value.clone()).unwrap_or_else(|| p.to_string())).collect();
    let unknown = || SqlError::new(1054, "42S22", format!("Unknown column '{}' in 'field list'", parts.join(".")));
    let (qual, col) = match parts.as_slice() {
        [c] => (None, c.clone()),
        [.., a, c] => (Some(a.clone()), c.clone()),
        [] => return Err(unknown()),
    };
    let has_col = |f: &Factor| -> Result<bool, SqlError> {
        match &f.table {
            Some(n) => Ok(tables.get(n)?.column(&col).is_some()),
            None => Ok(false),
        }
    };
    match qual {
        Some(a) => {
            let f = factors.iter().find(|f| f.alias.eq_ignore_ascii_case(&a)).ok_or_else(unknown)?;
            if f.table.is_none() {
                return Err(not_updatable(&f.alias, "UPDATE"));
            }
            if !has_col(f)? {
                return Err(unknown());
            }
            Ok((f, col))
        }
        None => {
            let mut found = None;
            for f in factors {
                if has_col(f)? {
                    if found.is_some() {
                        return Err(SqlError::new(1052, "23000", format!("Column '{col}' in field list is ambiguous")));
                    }
                    found = Some(f);
                }
            }
            found.map(|f| (f, col)).ok_or_else(unknown)
        }
    }
}

fn compile(tables: &Tables, st: &Statement) -> Result<MultiStmt, SqlError> {
    // ORDER BY / LIMIT: MySQL takes them in single-table statements only
    // (1221 otherwise); a single-table statement comes here for IGNORE or a
    // subquery, and its read then sorts and limits the rows it changes.
    let (from, selection, ignore, delete, order_by, limit) = match st {
        Statement::Update(u) => {
            if u.from.is_some() {
                return Err(SqlError::unsupported("UPDATE ... FROM"));
            }
            let single = plain(&u.table);
            if !u.order_by.is_empty() && !single {
                return Err(wrong_usage("UPDATE", "ORDER BY"));
            }
            if u.limit.is_some() && !single {
                return Err(wrong_usage("UPDATE", "LIMIT"));
            }
            let from: &[TableWithJoins] = std::slice::from_ref(&u.table);
            (from, u.selection.as_ref(), has_ignore(&u.optimizer_hints), false, &u.order_by, u.limit.as_ref())
        }
        Statement::Delete(d) => {
            let single = d.tables.is_empty()
                && d.using.is_none()
                && delete_from(d).len() == 1
                && delete_from(d).iter().all(plain);
            if !d.order_by.is_empty() && !single {
                return Err(wrong_usage("DELETE", "ORDER BY"));
            }
            if d.limit.is_some() && !single {
                return Err(wrong_usage("DELETE", "LIMIT"));
            }
            let from = match &d.using {
                Some(u) => u.as_slice(),
                None => delete_from(d),
            };
            (from, d.selection.as_ref(), has_ignore(&d.optimizer_hints), true, &d.order_by, d.limit.as_ref())
        }
        _ => return Err(SqlError::internal("not an UPDATE / DELETE")),
    };
    let mut factors = Vec::new();
    collect_factors(from, &mut factors);

    // Target aliases, in the order MySQL lists them.
    let mut target_aliases: Vec<String> = Vec::new();
    let mut set_pairs: Vec<(usize, String, &Expr)> = Vec::new(); // (target index, column, value)
    match st {
        Statement::Update(u) => {
            for a in &u.assignments {
                let (f, col) = set_target(&factors, tables, &a.target)?;
                let ti = match target_aliases.iter().position(|x| x.eq_ignore_ascii_case(&f.alias)) {
                    Some(i) => i,
                    None => {
                        target_aliases.push(f.alias.clone());
                        target_aliases.len() - 1
                    }
                };
                set_pairs.push((ti, col, &a.value));
            }
        }
        Statement::Delete(d) => {
            // `DELETE t1, t2 FROM <join>` names them before FROM; `DELETE FROM
            // t1, t2 USING <join>` after FROM; `DELETE IGNORE FROM t` (one
            // table, here for IGNORE) deletes from its only table.
            let names: Vec<&ast::ObjectName> = if d.using.is_some() {
                delete_from(d)
                    .iter()
                    .filter_map(|t| match &t.relation {
                        TableFactor::Table { name, .. } => Some(name),
                        _ => None,
                    })
                    .collect()
            } else if d.tables.is_empty() {
                factors.iter().filter_map(|f| f.table.as_ref()).take(1).collect()
            } else {
                d.tables.iter().collect()
            };
            for n in names {
                let short = last_part(n);
                let f = factors
                    .iter()
                    .find(|f| f.alias.eq_ignore_ascii_case(&short))
                    .ok_or_else(|| SqlError::new(1109, "42S02", format!("Unknown table '{short}' in MULTI DELETE")))?;
                if f.table.is_none() {
                    return Err(not_updatable(&f.alias, "DELETE"));
                }
                if !target_aliases.iter().any(|x| x.eq_ignore_ascii_case(&f.alias)) {
                    target_aliases.push(f.alias.clone());
                }
            }
        }
        _ => {}
    }

    // Resolve the target tables; a table written through two aliases is one
    // target per alias (each writes the columns it sets; the second delete
    // of a row finds it gone).
    let mut resolved: Vec<(String, Arc<SqlTable>)> = Vec::new();
    for a in &target_aliases {
        let f = factors.iter().find(|f| f.alias.eq_ignore_ascii_case(a)).ok_or_else(|| SqlError::internal("alias"))?;
        let name = f.table.as_ref().ok_or_else(|| not_updatable(a, if delete { "DELETE" } else { "UPDATE" }))?;
        let t = tables.get(name)?;
        if t.db.eq_ignore_ascii_case("information_schema") {
            return Err(SqlError::new(1044, "42000", "Access denied for user to database 'information_schema'"));
        }
        resolved.push((a.clone(), t));
    }
    let stmt_name = if delete { "DELETE" } else { "UPDATE" };
    let mut sub_exprs: Vec<&Expr> = selection.into_iter().collect();
    sub_exprs.extend(join_exprs(from));
    sub_exprs.extend(set_pairs.iter().map(|(_, _, e)| *e));
    check_subqueries(sub_exprs.into_iter(), &resolved, stmt_name)?;

    // The read: SELECT <target columns...>, <SET values...> FROM <from> WHERE <selection>.
    let mut q = select_template()?;
    let ast::SetExpr::Select(sel) = q.body.as_mut() else { return Err(SqlError::internal("SELECT template")) };
    sel.projection.clear();
    let mut targets = Vec::with_capacity(resolved.len());
    let mut width = 0usize;
    for (alias, t) in &resolved {
        for c in &t.def.columns {
            sel.projection.push(SelectItem::UnnamedExpr(col_ref(alias, &c.name)));
        }
        targets.push(Target {
            alias: alias.clone(),
            table: t.clone(),
            part: dml::exec_part(t)?,
            base: width,
            sets: Vec::new(),
        });
        width += t.def.columns.len();
    }
    for (ti, col, value) in &set_pairs {
        let t = &targets[*ti].table;
        let (id, _, _) = t.column(col).ok_or_else(|| SqlError::internal("SET column"))?;
        if crate::engine::generated::skip_assignment(t, id, value)? {
            continue;
        }
        sel.projection.push(SelectItem::UnnamedExpr((*value).clone()));
        targets[*ti].sets.push((id, width));
        width += 1;
    }
    // MySQL's 1706: a key written through one alias would move the row under
    // the other.
    for (i, x) in targets.iter().enumerate() {
        let moves_key = x.sets.iter().any(|(c, _)| x.table.def.primary_key.contains(c) || x.part.columns().contains(c));
        let twin = targets
            .iter()
            .enumerate()
            .find(|(j, y)| *j != i && y.table.db == x.table.db && y.table.name == x.table.name);
        if let (true, Some((_, y))) = (moves_key, twin) {
            return Err(SqlError::new(
                1706,
                "HY000",
                format!(
                    "Primary key/partition key update is not allowed since the table is updated both as '{}' and '{}'.",
                    x.alias, y.alias
                ),
            ));
        }
    }
    sel.from = from.to_vec();
    sel.selection = selection.cloned();
    if !order_by.is_empty() {
        q.order_by = Some(ast::OrderBy { kind: ast::OrderByKind::Expressions(order_by.clone()), interpolate: None });
    }
    if let Some(l) = limit {
        q.limit_clause = Some(ast::LimitClause::LimitOffset { limit: Some(l.clone()), offset: None, limit_by: vec![] });
    }
    let mut sc = StmtCompiler::new(tables, ParamMap::from_statement(st));
    let mut root = sc.compile_query(&q, None, RowLock::NONE)?;
    lock_targets(&mut root, &targets);
    Ok(MultiStmt { read: sc.finish(root), targets, ignore, delete })
}

/// Read the target tables' rows with exclusive locks (see the module doc for
/// why the other tables are read without locks).
fn lock_targets(root: &mut QueryNode, targets: &[Target]) {
    let QueryNode::Select(p) = root else { return };
    let mut any = false;
    for src in &mut p.sources {
        if let SourceKind::Table(ta) = &mut src.kind {
            if targets.iter().any(|t| t.alias.eq_ignore_ascii_case(&src.alias)) {
                ta.lock = RowLock::waiting(LockMode::Exclusive);
                any = true;
            }
        }
    }
    if any {
        p.lock = RowLock::waiting(LockMode::Exclusive);
    }
}

// ---------------------------------------------------------------- execute

/// The dispatcher's entry point for a multi-table UPDATE / DELETE.
pub async fn execute(
    engine: &Engine,
    session: &mut Session,
    st: &Statement,
    params: &[Value],
) -> Result<QueryOutput, SqlError> {
    let tables = resolve_tables(engine, session, resolvable(st).as_ref()).await?;
    let ms = compile(&tables, st)?;
    if params.len() < ms.read.param_count {
        return Err(SqlError::new(1210, "HY000", "Incorrect arguments to mysqld_stmt_execute"));
    }
    let mut ctx = exec::make_ctx(session, params, &ms.read.sysvars, &ms.read.uservars)?;
    ctx.div_zero_error = !ms.delete && exec::div_zero_is_error(session, false);
    let fk_on = ms.targets.iter().any(|t| fk_enforce::active(session, &t.table));
    let found_rows = session.client_found_rows;
    txn_control::begin_statement(engine, session);
    let fk = Fk { engine, zone: ctx.tz.clone() };
    let guard = if fk_on { Some(StmtGuard::begin(session).await) } else { None };
    let res = match (session.txn.as_mut(), guard.as_ref()) {
        (_, Some(Err(e))) => Err(e.clone()),
        (Some(txn), _) => run(txn, &ms, &mut ctx, fk_on.then_some(&fk)).await,
        (None, _) => Err(SqlError::internal("no transaction")),
    };
    let res = match guard {
        Some(Ok(g)) => g.finish(session, res).await,
        _ => res,
    };
    let (matched, changed) = txn_control::end_statement(engine, session, res).await?;
    for t in &ms.targets {
        dml::raise_ai_after_update(engine, &t.table, &ctx).await?;
    }
    session.warnings = std::mem::take(&mut ctx.warnings.list);
    let last_insert_id = crate::engine::exec::note_set_last_insert_id(session, &ctx);
    if ms.delete {
        return Ok(QueryOutput::ok(changed));
    }
    let info = dml::update_info(matched, changed, session.warnings.len());
    Ok(QueryOutput::Ok { affected_rows: if found_rows { matched } else { changed }, last_insert_id, info })
}

/// Read, then write; on an error, undo this statement's own writes.
async fn run(
    txn: &mut Transaction,
    ms: &MultiStmt,
    ctx: &mut EvalCtx<'_>,
    fk: Option<&Fk<'_>>,
) -> Result<(u64, u64), SqlError> {
    let rows = {
        let mut rd = Reader::Txn(txn);
        exec::run_with_subs(&mut rd, &ms.read, ctx).await?
    };
    let mut undo = Vec::new();
    let res = if ms.delete {
        delete_targets(txn, ms, &rows, ctx, fk, &mut undo).await.map(|n| (n, n))
    } else {
        update_targets(txn, ms, &rows, ctx, fk, &mut undo).await
    };
    if res.is_err() {
        undo.reverse();
        dml::compensate(txn, undo).await;
    }
    res
}

/// The distinct rows of target `t` among the joined rows, first match first
/// (with the joined row they came from). A target on the NULL side of a LEFT
/// JOIN that found no row has a NULL primary key: not a row.
fn distinct_rows<'r>(t: &Target, rows: &'r [Row]) -> Vec<(Row, &'r Row)> {
    let n = t.table.def.columns.len();
    let pk = &t.table.def.primary_key;
    let mut seen: HashSet<String> = HashSet::new();
    let mut out = Vec::new();
    for r in rows {
        let own = &r[t.base..t.base + n];
        if pk.iter().any(|c| own[*c as usize].is_null()) {
            continue;
        }
        let key = format!("{:?}", pk.iter().map(|c| &own[*c as usize]).collect::<Vec<_>>());
        if seen.insert(key) {
            out.push((own.to_vec(), r));
        }
    }
    out
}

/// IGNORE turns these errors of one row into warnings.
fn ignorable(e: &SqlError) -> bool {
    matches!(e.code, 1062 | 1451 | 1452)
}

async fn update_targets(
    txn: &mut Transaction,
    ms: &MultiStmt,
    rows: &[Row],
    ctx: &mut EvalCtx<'_>,
    fk: Option<&Fk<'_>>,
    undo: &mut Vec<KeyOp>,
) -> Result<(u64, u64), SqlError> {
    // Every new row is computed (and converted, with strict-mode errors)
    // before anything is written, as in the single-table path.
    let mut plans = Vec::new();
    let mut matched = 0u64;
    let mut row_no = 0u64;
    for (ti, t) in ms.targets.iter().enumerate() {
        let on_update: Vec<ColumnId> = t
            .table
            .meta
            .columns
            .iter()
            .enumerate()
            .filter(|(i, m)| m.on_update_now && !t.sets.iter().any(|(c, _)| *c as usize == *i))
            .map(|(i, _)| i as ColumnId)
            .collect();
        for (old, joined) in distinct_rows(t, rows) {
            matched += 1;
            row_no += 1;
            let mut new = old.clone();
            for (c, at) in &t.sets {
                let v = joined[*at].clone();
                new[*c as usize] = crate::engine::store::store_col(
                    &t.table,
                    *c as usize,
                    v,
                    row_no,
                    ctx.tz.as_deref(),
                    &mut ctx.warnings,
                )?;
            }
            // ON UPDATE columns take the time before generated columns and
            // checks read the row.
            if !on_update.is_empty() && dml::assigned_change(&t.table, &old, &new) {
                for c in &on_update {
                    new[*c as usize] = Value::DateTime(ctx.now_local());
                }
            }
            // UPDATE IGNORE leaves a row its CHECK constraints refuse.
            if !check_constraints::complete_row_or_skip(&t.table, &mut new, ctx, row_no, ms.ignore)? {
                continue;
            }
            let changed: Vec<(ColumnId, Value)> = new
                .iter()
                .enumerate()
                .filter(|(i, v)| !vals::group_eq(v, &old[*i], Coll::Bin))
                .map(|(i, v)| (i as ColumnId, v.clone()))
                .collect();
            if changed.is_empty() {
                continue;
            }
            plans.push((ti, old, new, changed));
        }
    }
    let mut n_changed = 0u64;
    for (ti, old, new, changed) in plans {
        let t = &ms.targets[ti];
        let row = RowGuard::begin(txn, ms.ignore, undo).await?;
        let res = dml::apply_update(txn, &t.table, &t.part, &old, &new, &changed, undo, fk, ctx).await;
        if row.skipped(txn, res, undo, ctx).await? {
            n_changed += 1;
        }
    }
    Ok((matched, n_changed))
}

/// IGNORE's unit of undo: one target row with its foreign-key cascades.
/// A savepoint per row (one round trip; only under IGNORE) undoes exactly
/// that row's writes when it fails with an ignorable error.
struct RowGuard {
    sp: Option<norr_client::Savepoint>,
    undo_mark: usize,
}

impl RowGuard {
    async fn begin(txn: &mut Transaction, ignore: bool, undo: &[KeyOp]) -> Result<RowGuard, SqlError> {
        let sp = if ignore {
            Some(txn.savepoint().await.map_err(crate::engine::error_map::from_client_plain)?)
        } else {
            None
        };
        Ok(RowGuard { sp, undo_mark: undo.len() })
    }

    /// Ok(true): the row was written. Ok(false): IGNORE undid it and noted
    /// the error as a warning. Err: the statement fails.
    async fn skipped(
        self,
        txn: &mut Transaction,
        res: Result<(), SqlError>,
        undo: &mut Vec<KeyOp>,
        ctx: &mut EvalCtx<'_>,
    ) -> Result<bool, SqlError> {
        match (res, self.sp) {
            (Ok(()), _) => Ok(true),
            (Err(e), Some(sp)) if ignorable(&e) && !txn.is_finished() => {
                txn.rollback_to(sp).await.map_err(crate::engine::error_map::from_client_plain)?;
                // Rolled back: nothing of this row is left to compensate.
                undo.truncate(self.undo_mark);
                ctx.warnings.push(e.code, e.message);
                Ok(false)
            }
            (Err(e), _) => Err(e),
        }
    }
}

async fn delete_targets(
    txn: &mut Transaction,
    ms: &MultiStmt,
    rows: &[Row],
    ctx: &mut EvalCtx<'_>,
    fk: Option<&Fk<'_>>,
    undo: &mut Vec<KeyOp>,
) -> Result<u64, SqlError> {
    if ms.ignore {
        // Row by row, each with its cascades, so that one can be skipped.
        let mut n = 0u64;
        for t in &ms.targets {
            for (r, _) in distinct_rows(t, rows) {
                let row = RowGuard::begin(txn, true, undo).await?;
                let res = async {
                    let gone =
                        dml::delete_rows(txn, &t.table, &t.part, std::slice::from_ref(&r), undo, &ctx.tz).await?;
                    if let (Some(fx), Some(true)) = (fk, gone.first()) {
                        fx.on_delete(txn, &t.table, &r, ctx, 0).await?;
                    }
                    Ok(gone.first() == Some(&true))
                }
                .await;
                let was_there = matches!(res, Ok(true));
                if row.skipped(txn, res.map(|_| ()), undo, ctx).await? && was_there {
                    n += 1;
                }
            }
        }
        return Ok(n);
    }
    let mut deleted: Vec<(usize, Row)> = Vec::new();
    for (ti, t) in ms.targets.iter().enumerate() {
        let mine: Vec<Row> = distinct_rows(t, rows).into_iter().map(|(r, _)| r).collect();
        let gone = dml::delete_rows(txn, &t.table, &t.part, &mine, undo, &ctx.tz).await?;
        for (r, g) in mine.into_iter().zip(gone) {
            if g {
                deleted.push((ti, r));
            }
        }
    }
    if let Some(fx) = fk {
        // Every target row is gone before any child is looked at, so rows of
        // one statement that reference each other (parent and child both
        // deleted) do not block each other, whatever the table order.
        for (ti, r) in &deleted {
            fx.on_delete(txn, &ms.targets[*ti].table, r, ctx, 0).await?;
        }
    }
    Ok(deleted.len() as u64)
}

// ---------------------------------------------------------------- EXPLAIN

/// The read of a multi-table UPDATE / DELETE and the aliases it writes (EXPLAIN
/// shows the join's access paths, the written tables as select_type UPDATE /
/// DELETE, as MySQL does).
pub async fn explain_plan(
    engine: &Engine,
    session: &Session,
    st: &Statement,
) -> Result<(Compiled, Vec<String>), SqlError> {
    let tables = resolve_tables(engine, session, resolvable(st).as_ref()).await?;
    let ms = compile(&tables, st)?;
    let aliases = ms.targets.iter().map(|t| t.alias.clone()).collect();
    Ok((ms.read, aliases))
}
