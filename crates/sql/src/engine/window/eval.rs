//! Evaluation of a query block's window functions over its
//! post-aggregation rows: sort by (PARTITION BY, ORDER BY), walk each
//! partition, and append one value per function to every row.

use super::frame::{frame_of, Dir, EBound, Peers, RangeKeys};
use super::{Bound, WinFunc, WinKind, MAX_WINDOW_ROWS};
use crate::engine::exec::{agg_final, agg_init, agg_step, AggState, Row};
use crate::engine::expr::compile::AggKind;
use crate::engine::expr::value::{self as vals, order_cmp, ArithOp, Coll, Num};
use crate::engine::expr::{eval, EvalCtx};
use crate::engine::sort_keys;
use crate::types::SqlError;
use norr_signals::Value;
use std::cmp::Ordering;

/// A sorted row: its PARTITION BY values then its ORDER BY values, and its
/// index in the block's rows.
type Keyed = (Vec<Value>, usize);

/// Append the value of each of `funcs` (in order) to every row.
pub fn apply(rows: &mut [Row], funcs: &[WinFunc], ctx: &mut EvalCtx) -> Result<(), SqlError> {
    let n = rows.len();
    if n > MAX_WINDOW_ROWS {
        return Err(SqlError::new(1104, "42000", "The SELECT would examine too many rows"));
    }
    let mut results: Vec<Vec<Value>> = vec![Vec::new(); funcs.len()];
    let mut done = vec![false; funcs.len()];
    for first in 0..funcs.len() {
        if done[first] {
            continue;
        }
        // Functions over the same PARTITION BY / ORDER BY share one sort.
        let group: Vec<usize> =
            (first..funcs.len()).filter(|&j| !done[j] && funcs[j].same_ordering(&funcs[first])).collect();
        for &j in &group {
            done[j] = true;
            results[j] = vec![Value::Null; n];
        }
        let f = &funcs[first];
        let np = f.partition.len();
        let mut items: Vec<Keyed> = Vec::with_capacity(n);
        for (i, r) in rows.iter().enumerate() {
            let mut k = Vec::with_capacity(np + f.order.len());
            for e in &f.partition {
                k.push(eval(e, r, ctx)?);
            }
            for o in &f.order {
                k.push(eval(&o.expr, r, ctx)?);
            }
            items.push((k, i));
        }
        let dir =
            |k: usize| if k < np { (false, f.part_colls[k]) } else { (f.order[k - np].desc, f.order[k - np].coll) };
        // Stable: rows equal in every key keep their arrival order.
        sort_keys::sort_by_keys(&mut items, np + f.order.len(), |it, k| &it.0[k], dir);
        let order_colls: Vec<Coll> = f.order.iter().map(|o| o.coll).collect();
        let mut s = 0;
        while s < n {
            let mut e = s + 1;
            while e < n && same(&items[s].0[..np], &items[e].0[..np], &f.part_colls) {
                e += 1;
            }
            let part = &items[s..e];
            let peers = peer_groups(part, np, &order_colls);
            for &j in &group {
                partition(&funcs[j], part, np, &peers, rows, ctx, &mut results[j])?;
            }
            s = e;
        }
    }
    for (i, r) in rows.iter_mut().enumerate() {
        for res in results.iter_mut() {
            r.push(std::mem::replace(&mut res[i], Value::Null));
        }
    }
    Ok(())
}

fn same(a: &[Value], b: &[Value], colls: &[Coll]) -> bool {
    a.iter().zip(b).zip(colls).all(|((x, y), c)| order_cmp(x, y, *c) == Ordering::Equal)
}

/// The peer group of each position of a sorted partition.
pub(crate) fn peer_groups(part: &[Keyed], np: usize, colls: &[Coll]) -> Vec<Peers> {
    let m = part.len();
    let mut peers = vec![Peers { start: 0, end: m }; m];
    let mut ps = 0;
    for p in 1..=m {
        if p == m || !same(&part[p].0[np..], &part[ps].0[np..], colls) {
            for q in &mut peers[ps..p] {
                *q = Peers { start: ps, end: p };
            }
            ps = p;
        }
    }
    peers
}

fn bad_arg(name: &str) -> SqlError {
    SqlError::new(1210, "HY000", format!("Incorrect arguments to {name}"))
}

/// A constant integer argument (NTILE's buckets, LAG's offset, NTH_VALUE's
/// N), at least `min`.
fn int_arg(f: &WinFunc, i: usize, min: i64, default: i64, ctx: &mut EvalCtx) -> Result<u64, SqlError> {
    let Some(e) = f.args.get(i) else { return Ok(default as u64) };
    let v = eval(e, &[], ctx)?;
    let x = match v {
        Value::Int(x) => x,
        Value::UInt(u) => i64::try_from(u).unwrap_or(i64::MAX),
        Value::Decimal(d) if d.scale == 0 => i64::try_from(d.mantissa).map_err(|_| bad_arg(&f.name))?,
        _ => return Err(bad_arg(&f.name)),
    };
    if x < min {
        return Err(bad_arg(&f.name));
    }
    Ok(x as u64)
}

/// A frame bound with its offset evaluated once for the execution.
enum Prepared {
    Fixed(EBound),
    /// RANGE N PRECEDING / FOLLOWING: per row, from its ORDER BY value.
    RangeOffset(Dir, Num),
}

fn frame_illegal(f: &WinFunc) -> SqlError {
    SqlError::new(
        3586,
        "HY000",
        format!("Window '{}': frame start or end is negative, NULL or of non-integral type", f.window),
    )
}

fn prepare(f: &WinFunc, b: &Bound, ctx: &mut EvalCtx) -> Result<Prepared, SqlError> {
    let (dir, e) = match b {
        Bound::UnboundedPreceding => return Ok(Prepared::Fixed(EBound::UnboundedPreceding)),
        Bound::CurrentRow => return Ok(Prepared::Fixed(EBound::CurrentRow)),
        Bound::UnboundedFollowing => return Ok(Prepared::Fixed(EBound::UnboundedFollowing)),
        Bound::Preceding(e) => (Dir::Preceding, e),
        Bound::Following(e) => (Dir::Following, e),
    };
    let v = eval(e, &[], ctx)?;
    if f.frame.range {
        let num = vals::to_num(&v, &mut ctx.warnings).ok_or_else(|| frame_illegal(f))?;
        if num.to_f64() < 0.0 {
            return Err(frame_illegal(f));
        }
        return Ok(Prepared::RangeOffset(dir, num));
    }
    let k = match v {
        Value::Int(x) if x >= 0 => x as u64,
        Value::UInt(u) => u,
        Value::Decimal(d) if d.scale == 0 && d.mantissa >= 0 => u64::try_from(d.mantissa).unwrap_or(u64::MAX),
        _ => return Err(frame_illegal(f)),
    };
    Ok(Prepared::Fixed(EBound::Rows(dir, k)))
}

/// The bound for the row whose RANGE key is `key`.
fn bound_at(p: &Prepared, key: Option<&Value>, desc: bool, ctx: &mut EvalCtx) -> Result<EBound, SqlError> {
    let (dir, off) = match p {
        Prepared::Fixed(b) => return Ok(b.clone()),
        Prepared::RangeOffset(d, o) => (*d, *o),
    };
    let Some(cur) = key.and_then(|k| vals::to_num(k, &mut ctx.warnings)) else { return Ok(EBound::Value(None)) };
    // PRECEDING is towards smaller values in an ascending window, larger in
    // a descending one.
    let op = if (dir == Dir::Preceding) != desc { ArithOp::Sub } else { ArithOp::Add };
    Ok(match vals::arith(op, cur, off, &|| "window frame bound".into())? {
        Some(b) => EBound::Value(Some(b.to_value())),
        None => EBound::Value(None),
    })
}

/// Evaluate one function over one sorted partition.
#[allow(clippy::too_many_arguments)]
fn partition(
    f: &WinFunc,
    part: &[Keyed],
    np: usize,
    peers: &[Peers],
    rows: &[Row],
    ctx: &mut EvalCtx,
    out: &mut [Value],
) -> Result<(), SqlError> {
    let m = part.len();
    let arg0 = |ctx: &mut EvalCtx| -> Result<Vec<Value>, SqlError> {
        match f.args.first().or(f.agg.as_ref().and_then(|a| a.arg.as_ref())) {
            Some(e) => part.iter().map(|(_, ri)| eval(e, &rows[*ri], ctx)).collect(),
            None => Ok(vec![Value::Null; m]),
        }
    };
    match f.kind {
        WinKind::RowNumber => {
            for (pos, (_, ri)) in part.iter().enumerate() {
                out[*ri] = Value::Int(pos as i64 + 1);
            }
        }
        WinKind::Rank => {
            for (pos, (_, ri)) in part.iter().enumerate() {
                out[*ri] = Value::Int(peers[pos].start as i64 + 1);
            }
        }
        WinKind::DenseRank => {
            let mut dense = 0i64;
            for (pos, (_, ri)) in part.iter().enumerate() {
                if peers[pos].start == pos {
                    dense += 1;
                }
                out[*ri] = Value::Int(dense);
            }
        }
        WinKind::PercentRank => {
            for (pos, (_, ri)) in part.iter().enumerate() {
                let r = if m <= 1 { 0.0 } else { peers[pos].start as f64 / (m - 1) as f64 };
                out[*ri] = Value::Double(r);
            }
        }
        WinKind::CumeDist => {
            for (pos, (_, ri)) in part.iter().enumerate() {
                out[*ri] = Value::Double(peers[pos].end as f64 / m as f64);
            }
        }
        WinKind::Ntile => {
            let k = int_arg(f, 0, 1, 1, ctx)?;
            for (pos, (_, ri)) in part.iter().enumerate() {
                out[*ri] = Value::Int(ntile_bucket(pos, m, k) as i64);
            }
        }
        WinKind::Lag | WinKind::Lead => {
            let off = int_arg(f, 1, 0, 1, ctx)?;
            let off = usize::try_from(off).unwrap_or(usize::MAX);
            let v = arg0(ctx)?;
            for (pos, (_, ri)) in part.iter().enumerate() {
                let target = if f.kind == WinKind::Lag { pos.checked_sub(off) } else { pos.checked_add(off) };
                out[*ri] = match target.filter(|t| *t < m) {
                    Some(t) => v[t].clone(),
                    None => match f.args.get(2) {
                        Some(d) => eval(d, &rows[*ri], ctx)?,
                        None => Value::Null,
                    },
                };
            }
        }
        WinKind::FirstValue | WinKind::LastValue | WinKind::NthValue | WinKind::Agg => {
            let nth = if f.kind == WinKind::NthValue { int_arg(f, 1, 1, 1, ctx)? } else { 1 };
            let v = arg0(ctx)?;
            let start = prepare(f, &f.frame.start, ctx)?;
            let end = prepare(f, &f.frame.end, ctx)?;
            let range_keys: Vec<Value> = if f.frame.range && f.order.len() == 1 {
                part.iter().map(|(k, _)| k[np].clone()).collect()
            } else {
                Vec::new()
            };
            let keys = (!range_keys.is_empty()).then(|| RangeKeys {
                keys: &range_keys,
                desc: f.order.first().is_some_and(|o| o.desc),
                coll: f.order.first().map(|o| o.coll).unwrap_or(Coll::Ci),
            });
            let desc = keys.as_ref().is_some_and(|k| k.desc);
            let mut frames = Vec::with_capacity(m);
            for (pos, peer) in peers.iter().enumerate() {
                let key = range_keys.get(pos);
                let sb = bound_at(&start, key, desc, ctx)?;
                let eb = bound_at(&end, key, desc, ctx)?;
                frames.push(frame_of(&sb, &eb, pos, m, *peer, f.frame.range, keys.as_ref()));
            }
            if f.kind == WinKind::Agg {
                aggregate(f, &v, &frames, part, ctx, out)?;
            } else {
                for (pos, (_, ri)) in part.iter().enumerate() {
                    let (lo, hi) = frames[pos];
                    let at = match f.kind {
                        WinKind::FirstValue => (lo < hi).then_some(lo),
                        WinKind::LastValue => (lo < hi).then(|| hi - 1),
                        _ => usize::try_from(nth - 1).ok().and_then(|d| lo.checked_add(d)).filter(|i| *i < hi),
                    };
                    out[*ri] = at.map(|i| v[i].clone()).unwrap_or(Value::Null);
                }
            }
        }
    }
    Ok(())
}

/// NTILE(k): the 1-based bucket of position `pos` of `m` rows; the first
/// `m % k` buckets hold one row more than the others.
pub(crate) fn ntile_bucket(pos: usize, m: usize, k: u64) -> u64 {
    let k = usize::try_from(k).unwrap_or(usize::MAX).max(1);
    let q = m / k;
    let r = m % k;
    let big = r * (q + 1);
    if pos < big {
        (pos / (q + 1) + 1) as u64
    } else {
        ((pos - big) / q.max(1) + r + 1) as u64
    }
}

/// An aggregate over each row's frame. Frames that start at the partition's
/// first row only grow as the row moves on, and frames that end at its last
/// row only shrink: both fold each row in once. Other frames fold their rows
/// per row (cost: rows x frame size).
fn aggregate(
    f: &WinFunc,
    v: &[Value],
    frames: &[(usize, usize)],
    part: &[Keyed],
    ctx: &mut EvalCtx,
    out: &mut [Value],
) -> Result<(), SqlError> {
    let Some(spec) = &f.agg else { return Err(SqlError::internal("window aggregate without spec")) };
    let m = part.len();
    let arg = |i: usize| if spec.arg.is_none() { None } else { Some(v[i].clone()) };
    let from_start = frames.iter().all(|(lo, hi)| *lo == 0 || lo >= hi);
    // Folding backwards would reverse a JSON aggregate's elements (and let
    // the first duplicate key win): those take the general path.
    let order_sensitive = matches!(spec.kind, AggKind::JsonArrayAgg | AggKind::JsonObjectAgg);
    let to_end = !order_sensitive && frames.iter().all(|(lo, hi)| *hi == m || lo >= hi);
    let empty = || agg_final(agg_init(spec), spec);
    if from_start {
        let mut st: AggState = agg_init(spec);
        let mut added = 0;
        for (pos, (_, ri)) in part.iter().enumerate() {
            let (lo, hi) = frames[pos];
            if lo >= hi {
                out[*ri] = empty();
                continue;
            }
            while added < hi {
                agg_step(&mut st, spec, arg(added), &[], ctx)?;
                added += 1;
            }
            out[*ri] = agg_final(st.clone(), spec);
        }
    } else if to_end {
        let mut st: AggState = agg_init(spec);
        let mut first_added = m;
        for pos in (0..m).rev() {
            let (lo, hi) = frames[pos];
            let ri = part[pos].1;
            if lo >= hi {
                out[ri] = empty();
                continue;
            }
            while first_added > lo {
                first_added -= 1;
                agg_step(&mut st, spec, arg(first_added), &[], ctx)?;
            }
            out[ri] = agg_final(st.clone(), spec);
        }
    } else {
        for (pos, (_, ri)) in part.iter().enumerate() {
            let (lo, hi) = frames[pos];
            let mut st = agg_init(spec);
            for i in lo..hi {
                agg_step(&mut st, spec, arg(i), &[], ctx)?;
            }
            out[*ri] = agg_final(st, spec);
        }
    }
    Ok(())
}
