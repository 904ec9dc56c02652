//! Recursive common table expressions (`WITH RECURSIVE`).
//!
//! A recursive CTE is a UNION of non-recursive query blocks (the anchor)
//! followed by recursive blocks that read the CTE itself once in their FROM.
//! Evaluation is iterative, as in MySQL: the anchor's rows are the first
//! working set; each iteration runs the recursive blocks over the working
//! set only (the CTE reference reads `EvalCtx::work_tables[slot]`), and its
//! new rows become the next working set, until an iteration adds none. With
//! UNION DISTINCT a row already produced is not added again, which is what
//! makes cycles terminate.
//!
//! The anchor fixes the column types; recursive rows are converted to them
//! (a string longer than the anchor's column is error 1406, strict mode).
//! More iterations than `@@cte_max_recursion_depth` is error 3636; a LIMIT
//! on the CTE's own UNION stops the iteration once it has enough rows.

use crate::engine::exec::{encode_group_key, run_node, Reader, Row, MAX_RESULT_ROWS};
use crate::engine::expr::compile::{has_aggregate, SubqueryHost};
use crate::engine::expr::value::Coll;
use crate::engine::expr::{eval, CExpr, EvalCtx, SqlType, TClass};
use crate::engine::functions::unify;
use crate::engine::query::{Compiled, QueryNode};
use crate::types::{ColumnMeta, SqlError};
use norr_signals::Value;
use sqlparser::ast::{self, Expr, JoinOperator, Query, SetExpr, TableFactor};
use std::collections::HashSet;
use std::ops::ControlFlow;

#[derive(Debug)]
pub struct RecPlan {
    pub name: String,
    /// The non-recursive blocks, run once.
    pub anchors: Vec<QueryNode>,
    /// The recursive blocks, run per iteration over the working set.
    pub steps: Vec<QueryNode>,
    /// The working set's slot in `EvalCtx::work_tables`.
    pub slot: usize,
    /// UNION DISTINCT somewhere: no row twice.
    pub distinct: bool,
    pub columns: Vec<ColumnMeta>,
    pub types: Vec<SqlType>,
    /// `@@cte_max_recursion_depth`, as a statement system variable.
    pub depth_var: usize,
    /// LIMIT / OFFSET of the CTE's own UNION.
    pub limit: Option<CExpr>,
    pub offset: Option<CExpr>,
}

/// How often the CTE `name` is read in `e` (unqualified table names; a
/// nested WITH that redefines the name is not told apart).
pub fn references<V: ast::Visit>(e: &V, name: &str) -> usize {
    let mut n = 0;
    let _ = ast::visit_relations(e, |r| {
        if let [only] = r.0.as_slice() {
            if only.as_ident().is_some_and(|i| i.value.eq_ignore_ascii_case(name)) {
                n += 1;
            }
        }
        ControlFlow::<()>::Continue(())
    });
    n
}

/// The blocks of a UNION chain, left to right, with whether each union is
/// DISTINCT.
fn flatten<'q>(e: &'q SetExpr, out: &mut Vec<&'q SetExpr>, distinct: &mut bool) -> Result<(), SqlError> {
    match e {
        SetExpr::SetOperation { left, op: ast::SetOperator::Union, set_quantifier, right } => {
            flatten(left, out, distinct)?;
            *distinct |= !matches!(set_quantifier, ast::SetQuantifier::All);
            out.push(right);
            Ok(())
        }
        SetExpr::SetOperation { op, .. } => Err(SqlError::unsupported(format!("{op} in a recursive CTE"))),
        other => {
            out.push(other);
            Ok(())
        }
    }
}

fn not_yet_in_recursive() -> SqlError {
    SqlError::new(
        1235,
        "42000",
        "This version of NorrDB doesn't yet support 'ORDER BY / LIMIT / SELECT DISTINCT in recursive query block of Common Table Expression'",
    )
}

/// MySQL's restrictions on a recursive block.
fn check_step(block: &SetExpr, name: &str) -> Result<(), SqlError> {
    let sel = match block {
        SetExpr::Select(s) => s,
        SetExpr::Query(q) if q.order_by.is_some() || q.limit_clause.is_some() => return Err(not_yet_in_recursive()),
        SetExpr::Query(q) => return check_step(&q.body, name),
        _ => return Err(SqlError::unsupported("this kind of recursive query block")),
    };
    let grouped = !matches!(&sel.group_by, ast::GroupByExpr::Expressions(v, _) if v.is_empty());
    let exprs = sel.projection.iter().filter_map(|p| match p {
        ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => Some(e),
        _ => None,
    });
    let mut aggregated = grouped || sel.having.as_ref().is_some_and(has_aggregate);
    let mut windowed = !sel.named_window.is_empty();
    for e in exprs {
        aggregated |= has_aggregate(e);
        windowed |= has_window(e);
    }
    if aggregated || windowed {
        return Err(SqlError::new(
            3575,
            "HY000",
            format!("Recursive Common Table Expression '{name}' can contain neither aggregation nor window functions in recursive query block"),
        ));
    }
    if matches!(sel.distinct, Some(ast::Distinct::Distinct)) {
        return Err(not_yet_in_recursive());
    }
    // The one reference must be a table of this block's own FROM.
    let is_me = |f: &TableFactor| match f {
        TableFactor::Table { name: n, .. } => {
            matches!(n.0.as_slice(), [only] if only.as_ident().is_some_and(|i| i.value.eq_ignore_ascii_case(name)))
        }
        _ => false,
    };
    let mut direct = 0;
    for twj in &sel.from {
        direct += usize::from(is_me(&twj.relation));
        for j in &twj.joins {
            if is_me(&j.relation) {
                direct += 1;
                if matches!(j.join_operator, JoinOperator::Left(_) | JoinOperator::LeftOuter(_)) {
                    return Err(SqlError::new(
                        3576,
                        "HY000",
                        format!("In recursive query block of Recursive Common Table Expression '{name}', the recursive table must neither be in the right argument of a LEFT JOIN, nor be forced to be non-first with join order hints"),
                    ));
                }
            }
        }
    }
    if direct != 1 || references(block, name) != 1 {
        return Err(SqlError::new(
            3577,
            "HY000",
            format!("In recursive query block of Recursive Common Table Expression '{name}', the recursive table must be referenced only once, and not in any subquery"),
        ));
    }
    Ok(())
}

fn has_window(e: &Expr) -> bool {
    let mut found = false;
    let _ = ast::visit_expressions(e, |x| {
        if matches!(x, Expr::Function(f) if f.over.is_some()) {
            found = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    found
}

/// The parts of a recursive CTE's query, checked: anchor blocks, recursive
/// blocks, DISTINCT.
pub struct Split<'q> {
    pub anchors: Vec<&'q SetExpr>,
    pub steps: Vec<&'q SetExpr>,
    pub distinct: bool,
}

pub fn split<'q>(q: &'q Query, name: &str) -> Result<Split<'q>, SqlError> {
    if q.order_by.is_some() {
        return Err(SqlError::unsupported("ORDER BY over UNION in recursive Common Table Expression"));
    }
    if !matches!(q.body.as_ref(), SetExpr::SetOperation { .. }) {
        return Err(SqlError::new(
            3573,
            "HY000",
            format!("Recursive Common Table Expression '{name}' should contain a UNION"),
        ));
    }
    let mut blocks = Vec::new();
    let mut distinct = false;
    flatten(&q.body, &mut blocks, &mut distinct)?;
    let first_recursive = blocks.iter().position(|b| references(*b, name) > 0).unwrap_or(blocks.len());
    if first_recursive == 0 || blocks[first_recursive..].iter().any(|b| references(*b, name) == 0) {
        return Err(SqlError::new(
            3574,
            "HY000",
            format!("Recursive Common Table Expression '{name}' should have one or more non-recursive query blocks followed by one or more recursive ones"),
        ));
    }
    for b in &blocks[first_recursive..] {
        check_step(b, name)?;
    }
    let steps = blocks.split_off(first_recursive);
    Ok(Split { anchors: blocks, steps, distinct })
}

/// The result columns of the anchor blocks (types unified over them).
pub fn anchor_columns(anchors: &[QueryNode]) -> Result<(Vec<ColumnMeta>, Vec<SqlType>), SqlError> {
    let Some(first) = anchors.first() else { return Err(SqlError::internal("recursive CTE without anchor")) };
    let width = first.columns().len();
    let mut types = first.types().to_vec();
    for a in &anchors[1..] {
        if a.columns().len() != width {
            return Err(different_columns());
        }
        types = types.iter().zip(a.types()).map(|(x, y)| unify(&[*x, *y])).collect();
    }
    let columns = first
        .columns()
        .iter()
        .zip(&types)
        .map(|(c, t)| {
            let mut m = ColumnMeta::expr(&c.name, t.field_type());
            m.decimals = t.decimals;
            m.column_length = c.column_length;
            m
        })
        .collect();
    Ok((columns, types))
}

pub fn different_columns() -> SqlError {
    SqlError::new(1222, "21000", "The used SELECT statements have a different number of columns")
}

/// The depth system variable's slot (registered with the statement).
pub fn depth_var(host: &mut dyn SubqueryHost) -> usize {
    host.sysvar("cte_max_recursion_depth", false)
}

/// Convert a row to the CTE's column types (as MySQL stores it in the CTE's
/// temporary table). `row_no`: 1-based row of this iteration, for messages.
fn fit(mut row: Row, p: &RecPlan, row_no: usize) -> Result<Row, SqlError> {
    for (i, (v, t)) in row.iter_mut().zip(&p.types).enumerate() {
        match (t.class, &*v) {
            (TClass::Str | TClass::Bin, Value::Bytes(b)) if t.len > 0 => {
                let len = if t.class == TClass::Str { String::from_utf8_lossy(b).chars().count() } else { b.len() };
                if len > t.len as usize {
                    let col = p.columns.get(i).map(|c| c.name.as_str()).unwrap_or("");
                    return Err(SqlError::new(
                        1406,
                        "22001",
                        format!("Data too long for column '{col}' at row {row_no}"),
                    ));
                }
            }
            (TClass::Int, Value::Double(f)) if f.is_finite() && f.abs() < 9.2e18 => *v = Value::Int(f.round() as i64),
            (TClass::Int, Value::Decimal(d)) => {
                let f = d.mantissa as f64 / 10f64.powi(d.scale as i32);
                if f.is_finite() && f.abs() < 9.2e18 {
                    *v = Value::Int(f.round() as i64);
                }
            }
            _ => {}
        }
    }
    Ok(row)
}

fn count(e: Option<&CExpr>, ctx: &mut EvalCtx, what: &str) -> Result<Option<u64>, SqlError> {
    let Some(e) = e else { return Ok(None) };
    match eval(e, &[], ctx)? {
        Value::Null => Ok(None),
        Value::Int(i) if i >= 0 => Ok(Some(i as u64)),
        Value::UInt(u) => Ok(Some(u)),
        _ => Err(SqlError::new(1210, "HY000", format!("Incorrect arguments to {what}"))),
    }
}

/// Run a recursive CTE to completion.
pub async fn run(rd: &mut Reader<'_>, c: &Compiled, p: &RecPlan, ctx: &mut EvalCtx<'_>) -> Result<Vec<Row>, SqlError> {
    let max_depth = match ctx.sysvals.get(p.depth_var) {
        Some(Value::Int(i)) => u64::try_from(*i).unwrap_or(0),
        Some(Value::UInt(u)) => *u,
        _ => 1000,
    };
    let offset = count(p.offset.as_ref(), ctx, "OFFSET")?.unwrap_or(0);
    let limit = count(p.limit.as_ref(), ctx, "LIMIT")?;
    let wanted = limit.map(|l| l.saturating_add(offset));
    let colls: Vec<Coll> = p.types.iter().map(|t| t.coll).collect();
    let mut seen: HashSet<Vec<u8>> = HashSet::new();
    let mut all: Vec<Row> = Vec::new();
    // Keep a row if it is new (UNION DISTINCT) and the LIMIT still wants it.
    let mut admit = |r: &Row, all_len: usize| -> bool {
        if wanted.is_some_and(|w| all_len as u64 >= w) {
            return false;
        }
        if p.distinct {
            let mut k = Vec::new();
            encode_group_key(r, &colls, &mut k);
            return seen.insert(k);
        }
        true
    };
    // UNION DISTINCT's set of rows seen is new memory beside the rows
    // (which were charged as they were built): counted as built.
    let mut built = crate::engine::memory::Built::default();
    let seen_bytes = |r: &Row| {
        if p.distinct {
            crate::engine::memory::row_bytes(r) + crate::engine::memory::HASH_ENTRY_BYTES
        } else {
            0
        }
    };
    let mut work: Vec<Row> = Vec::new();
    for a in &p.anchors {
        for (i, r) in run_node(rd, c, a, ctx).await?.into_iter().enumerate() {
            let r = fit(r, p, i + 1)?;
            if admit(&r, all.len() + work.len()) {
                built.add_bytes(&ctx.mem, seen_bytes(&r))?;
                work.push(r);
            }
        }
    }
    let mut iteration: u64 = 0;
    while !work.is_empty() {
        all.extend(work.iter().cloned());
        if all.len() > MAX_RESULT_ROWS {
            return Err(SqlError::new(1104, "42000", "The SELECT would examine too many rows"));
        }
        if wanted.is_some_and(|w| all.len() as u64 >= w) {
            break;
        }
        iteration += 1;
        if iteration > max_depth {
            return Err(SqlError::new(
                3636,
                "HY000",
                format!("Recursive query aborted after {iteration} iterations. Try increasing @@cte_max_recursion_depth to a larger value."),
            ));
        }
        if ctx.work_tables.len() <= p.slot {
            ctx.work_tables.resize(p.slot + 1, Vec::new());
        }
        ctx.work_tables[p.slot] = std::mem::take(&mut work);
        let mut next = Vec::new();
        for s in &p.steps {
            for (i, r) in run_node(rd, c, s, ctx).await?.into_iter().enumerate() {
                let r = fit(r, p, i + 1)?;
                if admit(&r, all.len() + next.len()) {
                    built.add_bytes(&ctx.mem, seen_bytes(&r))?;
                    next.push(r);
                }
            }
        }
        ctx.work_tables[p.slot] = Vec::new();
        work = next;
    }
    built.flush(&ctx.mem)?;
    let off = usize::try_from(offset).unwrap_or(usize::MAX).min(all.len());
    all.drain(..off);
    Ok(all)
}

/// Rows of the working table (the CTE as its recursive blocks read it).
pub fn work_rows(ctx: &EvalCtx, slot: usize) -> Vec<Row> {
    ctx.work_tables.get(slot).cloned().unwrap_or_default()
}
