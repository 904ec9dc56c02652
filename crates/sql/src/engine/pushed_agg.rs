//! Pushed aggregates (issue 23): a single-table aggregate query whose
//! aggregates the data nodes compute exactly (`ScanSpec::aggregate`) is
//! answered from one partial row per group and partition instead of every
//! row: `SELECT SUM(k) FROM t WHERE id BETWEEN a AND b` ships one row per
//! partition, not the range's rows.
//!
//! What is pushed (`pushable`, decided on the plan; `run`, with the
//! statement's values): one base table read by a scan, no lock, no WHERE
//! left for the SQL node (every conjunct decided by the scan's range, see
//! `plan::range_implied`), COUNT(*) / COUNT(col) / SUM / MIN / MAX without
//! DISTINCT of plain columns, GROUP BY plain columns without ROLLUP, and
//! nothing after the aggregation (HAVING, select list, ORDER BY) that reads
//! a source column other than a GROUP BY one. SUM takes integer and DECIMAL
//! columns, MIN / MAX / GROUP BY also dates and times (`aggregate_summable`,
//! `aggregate_comparable`): no collation, zone or rounding is involved, so
//! the data node's answer is the SQL node's. ENUM, SET, BIT, JSON and YEAR
//! columns (stored as numbers, read as something else) are not pushed.
//!
//! Anything else runs as before. So does a pushed query the data node
//! turns down (more groups per partition than `MAX_GROUPS`, a sum past its
//! accumulator): it is run again the ordinary way, which gives MySQL's
//! answer or error (the refusal ends only the scan, not the transaction).

use crate::engine::exec::{agg_final, agg_init, agg_step, encode_group_key, AggState, Reader, Row};
use crate::engine::expr::compile::AggKind;
use crate::engine::expr::{collect_cols, CExpr, EvalCtx};
use crate::engine::plan::{self, Access};
use crate::engine::query::{AggPlan, SelectPlan, SourceKind, TableAccess};
use crate::types::SqlError;
use norr_signals::{aggregate_comparable, aggregate_summable, AggFn, ColumnId, ErrorCode, ScanAggregate, Value};
use std::collections::HashMap;

/// Most groups a partition may hold for a pushed aggregate before the data
/// node gives up (and the query runs unpushed).
pub const MAX_GROUPS: u32 = 1024;

/// Pushed aggregates run, and those the data node turned down: SHOW GLOBAL
/// STATUS `Norr_pushed_aggregates` / `Norr_pushed_aggregates_refused`.
static PUSHED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static REFUSED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

pub fn pushed() -> u64 {
    PUSHED.load(std::sync::atomic::Ordering::Relaxed)
}

pub fn refused() -> u64 {
    REFUSED.load(std::sync::atomic::Ordering::Relaxed)
}

/// A query's aggregate as the data node computes it.
pub struct Pushable<'p> {
    pub table: &'p TableAccess,
    pub agg: &'p AggPlan,
    pub spec: ScanAggregate,
    /// Position in the source row of each GROUP BY column.
    group_pos: Vec<usize>,
}

/// The table column at position `i` of the source row.
fn column_at(t: &TableAccess, i: usize) -> Option<ColumnId> {
    match &t.compact_local {
        Some(_) => t.needed.get(i).copied(),
        None => (i < t.table.def.columns.len()).then_some(i as ColumnId),
    }
}

/// Whether column `c`'s values are the numbers or dates the data node
/// holds (not an ENUM / SET / BIT / JSON / YEAR read as something else).
fn plain_column(t: &TableAccess, c: ColumnId) -> bool {
    let c = c as usize;
    let tab = &t.table;
    tab.enums.get(c).is_none_or(|e| e.is_none())
        && !tab.json.get(c).copied().unwrap_or(false)
        && tab.bits.get(c).copied().unwrap_or(0) == 0
        && !tab.meta.columns.get(c).is_some_and(|m| m.sql_type.starts_with("year"))
}

/// The pushed aggregate of a select, if its shape allows one (the WHERE
/// and access are checked with the statement's values by `run`).
pub fn pushable(p: &SelectPlan) -> Option<Pushable<'_>> {
    let agg = p.agg.as_ref()?;
    if p.sources.len() != 1
        || !p.nests.is_empty()
        || !p.filter.is_empty()
        || !p.correlated.is_empty()
        || !p.windows.is_empty()
        || p.waits
        || agg.rollup.is_some()
        || p.lock.mode != norr_signals::LockMode::CommittedRead
    {
        return None;
    }
    let s = &p.sources[0];
    let SourceKind::Table(t) = &s.kind else { return None };
    if s.lookup.is_some() || !s.on.is_empty() || t.lock.mode != norr_signals::LockMode::CommittedRead {
        return None;
    }
    if !matches!(t.access, Access::FullScan | Access::IndexRange { .. } | Access::PkRange { .. }) {
        return None;
    }
    let def = &t.table.def;
    let col = |e: &CExpr| match e {
        CExpr::Col(i) => column_at(t, *i).filter(|c| plain_column(t, *c)).map(|c| (*i, c)),
        _ => None,
    };
    let mut group_pos = Vec::with_capacity(agg.group_by.len());
    let mut group_by = Vec::with_capacity(agg.group_by.len());
    for g in &agg.group_by {
        let (i, c) = col(g)?;
        if !aggregate_comparable(&def.columns[c as usize].ty) {
            return None;
        }
        group_pos.push(i);
        group_by.push(c);
    }
    if agg.aggs.is_empty() {
        // GROUP BY alone: the data node computes nothing (it would refuse
        // the request, a round trip for nothing).
        return None;
    }
    let mut aggs = Vec::with_capacity(agg.aggs.len());
    for a in &agg.aggs {
        if a.distinct {
            return None;
        }
        let arg = match &a.arg {
            None => None,
            Some(e) => Some(col(e)?.1),
        };
        let ty = |c: ColumnId| &def.columns[c as usize].ty;
        aggs.push(match (a.kind, arg) {
            (AggKind::CountStar, None) => AggFn::CountStar,
            (AggKind::Count, Some(c)) => AggFn::Count(c),
            (AggKind::Sum, Some(c)) if aggregate_summable(ty(c)) => AggFn::Sum(c),
            (AggKind::Min, Some(c)) if aggregate_comparable(ty(c)) => AggFn::Min(c),
            (AggKind::Max, Some(c)) if aggregate_comparable(ty(c)) => AggFn::Max(c),
            _ => return None,
        });
    }
    // After the aggregation only group columns and aggregate values exist:
    // the rows built here have NULL in every other source column.
    let mut read = Vec::new();
    for e in p.proj.iter().chain(p.having.iter()).chain(p.order.iter().map(|o| &o.expr)) {
        collect_cols(e, &mut read);
    }
    if read.iter().any(|i| *i < p.width && !group_pos.contains(i)) {
        return None;
    }
    let spec = ScanAggregate { group_by, aggs, max_groups: MAX_GROUPS };
    if spec.aggs.len() > norr_signals::MAX_AGG_FNS || spec.group_by.len() > norr_signals::MAX_AGG_GROUP_COLS {
        return None;
    }
    Some(Pushable { table: t, agg, spec, group_pos })
}

/// The access a pushed aggregate scans with (None: not a scan this time,
/// e.g. a narrow primary-key range read as key lookups).
fn scan_access(t: &TableAccess, ctx: &mut EvalCtx) -> Result<Option<Access>, SqlError> {
    Ok(match &t.access {
        Access::PkRange { low, high } => match plan::resolve_pk_range(&t.table.def, low, high, ctx)? {
            plan::PkRangeRun::Scan(a) => Some(a),
            plan::PkRangeRun::Keys(_) => None,
        },
        a @ (Access::FullScan | Access::IndexRange { .. }) => Some(a.clone()),
        _ => None,
    })
}

/// The scan of a pushed aggregate with the statement's values: Some(None)
/// when it provably reads no row; None when it cannot be pushed (a WHERE
/// conjunct the range does not decide, or no scan).
pub(crate) fn scan_spec(
    push: &Pushable<'_>,
    ctx: &mut EvalCtx,
) -> Result<Option<Option<norr_signals::ScanSpec>>, SqlError> {
    let t = push.table;
    let Some(access) = scan_access(t, ctx)? else { return Ok(None) };
    let Some((mut spec, implied)) = crate::engine::exec::scan_spec_via(t, t.lock, &access, ctx, None, false)? else {
        return Ok(Some(None));
    };
    if (0..t.row_local().len()).any(|i| !implied.get(i).copied().unwrap_or(false)) {
        return Ok(None);
    }
    debug_assert!(spec.filter.is_none(), "every conjunct is decided by the range");
    spec.projection = Vec::new();
    spec.aggregate = Some(push.spec.clone());
    Ok(Some(Some(spec)))
}

/// Whether EXPLAIN shows the select's aggregate as pushed.
pub fn explains_pushed(p: &SelectPlan, ctx: &mut EvalCtx) -> Result<bool, SqlError> {
    match pushable(p) {
        None => Ok(false),
        Some(push) => Ok(scan_spec(&push, ctx)?.is_some()),
    }
}

/// The post-aggregation rows of `p` (group columns in place, NULL in the
/// other source columns, then the aggregate values) computed by the data
/// nodes; None: not pushed (run it the ordinary way).
pub(crate) async fn run(
    rd: &mut Reader<'_>,
    p: &SelectPlan,
    lock_pick: bool,
    ctx: &mut EvalCtx<'_>,
) -> Result<Option<Vec<Row>>, SqlError> {
    if lock_pick {
        return Ok(None);
    }
    let Some(push) = pushable(p) else { return Ok(None) };
    let Some(spec) = scan_spec(&push, ctx)? else { return Ok(None) };
    let partials = match spec {
        None => Vec::new(),
        Some(spec) => {
            let def = &push.table.table.def;
            let scan = match rd.scan(spec).await {
                Ok(s) => partials_of(s, ctx).await?,
                Err(e) => Err(e),
            };
            match scan {
                Ok(rows) => rows,
                Err(e)
                    if matches!(
                        e.code(),
                        Some(
                            ErrorCode::AggregateTooManyGroups | ErrorCode::AggregateOverflow | ErrorCode::BadAggregate
                        )
                    ) =>
                {
                    REFUSED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    return Ok(None);
                }
                Err(e) => return Err(crate::engine::error_map::from_client(e, &crate::engine::exec::table_err(def))),
            }
        }
    };
    crate::engine::exec::count_rows_read(partials.len());
    PUSHED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    merge(&push, partials, p.width, ctx).map(Some)
}

/// The partial rows of a pushed aggregate's scan (the outer error: KILL
/// QUERY, a disconnect or max_execution_time stopped the statement; the
/// inner one: the scan's own, which may be a refusal). A partition answers
/// only once it has read all its rows, so the wait can be long: it is cut
/// short as `exec::scan_rows` cuts a scan's (dropping the stream closes the
/// scan on the data node).
async fn partials_of(
    mut scan: norr_client::ScanStream,
    ctx: &EvalCtx<'_>,
) -> Result<Result<Vec<Row>, norr_client::ClientError>, SqlError> {
    let Some(entry) = ctx.stop.as_deref() else { return Ok(scan.collect_all().await) };
    let mut rows = Vec::new();
    loop {
        let batch = tokio::select! {
            biased;
            b = scan.next_batch() => b,
            _ = entry.wait_kill(crate::session_registry::Kill::Query) => {
                return Err(crate::session_registry::interrupted())
            }
        };
        match batch {
            Ok(Some(mut b)) => rows.append(&mut b),
            Ok(None) => return Ok(Ok(rows)),
            Err(e) => return Ok(Err(e)),
        }
    }
}

/// Merge the partitions' partial rows into one post-aggregation row per
/// group.
fn merge(push: &Pushable<'_>, partials: Vec<Row>, width: usize, ctx: &mut EvalCtx) -> Result<Vec<Row>, SqlError> {
    let a = push.agg;
    let n = push.group_pos.len();
    let mut groups: Vec<(Vec<Value>, Vec<AggState>)> = Vec::new();
    let mut index: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut key = Vec::new();
    for mut r in partials {
        if r.len() != n + a.aggs.len() {
            return Err(SqlError::internal(format!("a pushed aggregate's row has {} values", r.len())));
        }
        let parts = r.split_off(n);
        key.clear();
        encode_group_key(&r, &a.group_colls, &mut key);
        let gi = match index.get(&key) {
            Some(i) => *i,
            None => {
                groups.push((r, a.aggs.iter().map(agg_init).collect()));
                index.insert(key.clone(), groups.len() - 1);
                groups.len() - 1
            }
        };
        let states = &mut groups[gi].1;
        for ((st, spec), v) in states.iter_mut().zip(&a.aggs).zip(parts) {
            match (st, v) {
                (AggState::Count(c), Value::Int(k)) => *c += k,
                (AggState::Count(_), other) => {
                    return Err(SqlError::internal(format!("a pushed COUNT gave {other:?}")));
                }
                (st, v) => {
                    agg_step(st, spec, Some(v), &[], ctx)?;
                }
            }
        }
    }
    if groups.is_empty() && n == 0 {
        // No partition answered (none left after pruning): the aggregates
        // of no rows.
        groups.push((Vec::new(), a.aggs.iter().map(agg_init).collect()));
    }
    let mut out = Vec::with_capacity(groups.len());
    for (vals, states) in groups {
        let mut row = vec![Value::Null; width];
        for (pos, v) in push.group_pos.iter().zip(vals) {
            row[*pos] = v;
        }
        for (st, spec) in states.into_iter().zip(&a.aggs) {
            row.push(agg_final(st, spec));
        }
        out.push(row);
    }
    Ok(out)
}
