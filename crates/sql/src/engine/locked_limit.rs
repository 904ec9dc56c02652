//! A locking SELECT with LIMIT over one table locks only the rows it returns.
//!
//! A locking scan locks every row it returns, and the rows of
//! `ORDER BY .. LIMIT` are picked after the scan, in the SQL node: run as a
//! locking scan, `SELECT id FROM jobs WHERE state = 'new' ORDER BY id LIMIT 1
//! FOR UPDATE SKIP LOCKED` would lock every new job, and a second worker
//! would find none. InnoDB locks rows as its index scan reaches them and
//! stops at the limit, which is what job queues rely on. So here the
//! candidates are read without locks, the first `offset + limit` of them in
//! the query's order are picked and locked by primary key (with the
//! statement's NOWAIT / SKIP LOCKED), and each is checked again under its
//! lock: a row skipped, gone, or no longer matching the WHERE leaves the
//! candidates; one that changed and still matches stays with its locked
//! image. The pick is made again until every picked row is locked. Each
//! round locks a row or drops one, so it ends; rows stay locked once locked
//! (a row that stops qualifying keeps its lock to the end of the
//! transaction, as a row InnoDB examined does).

use crate::engine::exec::{eval_count, read_keys_with, Reader, Row};
use crate::engine::expr::{eval, eval_pred, EvalCtx};
use crate::engine::query::{SelectPlan, SourceKind, TableAccess};
use crate::engine::sort_keys;
use crate::types::SqlError;
use norr_signals::Value;

/// The table of a plan that picks its locked rows this way: one locking
/// table, a LIMIT, and nothing between the WHERE and the ORDER BY that
/// needs every row (aggregates, DISTINCT, windows, correlated subqueries).
pub fn table(p: &SelectPlan) -> Option<&TableAccess> {
    if p.sources.len() != 1
        || p.limit.is_none()
        || p.agg.is_some()
        || p.having.is_some()
        || p.distinct
        || !p.windows.is_empty()
        || !p.correlated.is_empty()
        || p.sources[0].lookup.is_some()
    {
        return None;
    }
    match &p.sources[0].kind {
        SourceKind::Table(t) if t.lock.is_locking() => Some(t),
        _ => None,
    }
}

/// Position of table column `c` in a fetched row of `t`.
fn pos_of(t: &TableAccess, c: norr_signals::ColumnId) -> Option<usize> {
    if t.compact_local.is_some() {
        t.needed.iter().position(|&n| n == c)
    } else {
        Some(c as usize)
    }
}

/// Lock the rows of `candidates` (read without locks, WHERE applied) that
/// the query returns; returns them (the caller sorts and limits as usual).
pub async fn pick(
    rd: &mut Reader<'_>,
    p: &SelectPlan,
    t: &TableAccess,
    mut candidates: Vec<Row>,
    ctx: &mut EvalCtx<'_>,
) -> Result<Vec<Row>, SqlError> {
    let limit = eval_count(p.limit.as_ref(), ctx, "LIMIT")?.unwrap_or(u64::MAX);
    let offset = eval_count(p.offset.as_ref(), ctx, "OFFSET")?.unwrap_or(0);
    let want = usize::try_from(limit.saturating_add(offset)).unwrap_or(usize::MAX);
    let def = &t.table.def;
    let pk_pos: Vec<usize> = def
        .primary_key
        .iter()
        .map(|&c| pos_of(t, c))
        .collect::<Option<_>>()
        .ok_or_else(|| SqlError::internal("locking read without its primary key columns"))?;
    let mut locked = vec![false; candidates.len()];
    loop {
        let mut order: Vec<(Vec<Value>, usize)> = Vec::with_capacity(candidates.len());
        for (i, r) in candidates.iter().enumerate() {
            let mut keys = Vec::with_capacity(p.order.len());
            for o in &p.order {
                keys.push(eval(&o.expr, r, ctx)?);
            }
            order.push((keys, i));
        }
        sort_keys::sort_by_keys(&mut order, p.order.len(), |e, k| &e.0[k], |k| (p.order[k].desc, p.order[k].coll));
        order.truncate(want);
        let to_lock: Vec<usize> = order.iter().map(|e| e.1).filter(|&i| !locked[i]).collect();
        if to_lock.is_empty() {
            let mut keep = vec![false; candidates.len()];
            order.iter().for_each(|e| keep[e.1] = true);
            let mut k = keep.iter();
            candidates.retain(|_| *k.next().expect("one flag per row"));
            return Ok(candidates);
        }
        let keys: Vec<Vec<Value>> =
            to_lock.iter().map(|&i| pk_pos.iter().map(|&c| candidates[i][c].clone()).collect()).collect();
        let found = read_keys_with(rd, t, t.lock, None, &def.primary_key, keys, ctx.zone()).await?;
        let mut fresh: Vec<Option<Row>> = vec![None; to_lock.len()];
        for (k, row) in found {
            fresh[k] = Some(row);
        }
        let mut gone = vec![false; candidates.len()];
        for (k, &i) in to_lock.iter().enumerate() {
            match fresh[k].take() {
                Some(row) if still_matches(p, t, &row, ctx)? => {
                    candidates[i] = row;
                    locked[i] = true;
                }
                // Skipped (SKIP LOCKED), deleted meanwhile, or changed so
                // that the WHERE no longer holds.
                _ => gone[i] = true,
            }
        }
        let mut g = gone.iter();
        locked.retain(|_| !*g.next().expect("one flag per row"));
        let mut g = gone.iter();
        candidates.retain(|_| !*g.next().expect("one flag per row"));
        debug_assert_eq!(locked.len(), candidates.len());
    }
}

/// The WHERE on a row re-read under its lock.
fn still_matches(p: &SelectPlan, t: &TableAccess, row: &Row, ctx: &mut EvalCtx<'_>) -> Result<bool, SqlError> {
    for c in t.row_local().iter().chain(&p.filter) {
        if !eval_pred(c, row, ctx)? {
            return Ok(false);
        }
    }
    Ok(true)
}
