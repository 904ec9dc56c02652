//! Running the sources of a SELECT whose FROM has `JoinNest`s (parenthesized
//! joins on the inner side of an outer join, see `join_plan`).
//!
//! Sources join breadth-first as on the flat path (`exec::join_source`, so
//! key lookups stay batched). For each open nest we remember the rows it
//! started from and, per current row, which of them it extends. When the
//! nest's last source is joined, each starting row with no surviving
//! extension gets one row of NULLs for all the nest's columns; then the
//! enclosing level's conjuncts that waited for the nest (`after`) filter.
//!
//! Output order is kept: a join emits each prefix row's extensions together
//! and in prefix order, so the rows extending one starting row are adjacent.

use crate::engine::exec::{self, all_pass, concat, Reader, Row};
use crate::engine::expr::EvalCtx;
use crate::engine::query::{Compiled, SelectPlan};
use crate::types::SqlError;
use norr_signals::Value;

/// A nest being joined.
struct Open {
    nest: usize,
    /// The rows before the nest's first source.
    start_rows: Vec<Row>,
    /// For each start row, its position in each enclosing nest's start rows.
    outer_origins: Vec<Vec<usize>>,
}

pub(crate) async fn run(
    rd: &mut Reader<'_>,
    c: &Compiled,
    p: &SelectPlan,
    ctx: &mut EvalCtx<'_>,
    lock_pick: bool,
    push_limit: Option<u64>,
) -> Result<Vec<Row>, SqlError> {
    let mut rows: Vec<Row> = vec![Vec::new()];
    let mut open: Vec<Open> = Vec::new();
    // origins[k][i]: which start row of open nest k row i extends.
    let mut origins: Vec<Vec<usize>> = Vec::new();
    for (si, s) in p.sources.iter().enumerate() {
        // Nests starting here, outermost (longest) first.
        let mut starting: Vec<usize> = (0..p.nests.len()).filter(|&n| p.nests[n].first == si).collect();
        starting.sort_by_key(|&n| std::cmp::Reverse(p.nests[n].last));
        for n in starting {
            open.push(Open { nest: n, start_rows: rows.clone(), outer_origins: origins.clone() });
            origins.push((0..rows.len()).collect());
        }
        let mut from = Vec::with_capacity(rows.len());
        rows = exec::join_source(rd, c, p, s, &rows, ctx, lock_pick, push_limit, Some(&mut from)).await?;
        for o in &mut origins {
            *o = from.iter().map(|&i| o[i]).collect();
        }
        while open.last().is_some_and(|o| p.nests[o.nest].last == si) {
            let Some(done) = open.pop() else { break };
            let mine = origins.pop().unwrap_or_default();
            let n = &p.nests[done.nest];
            let first = &p.sources[n.first];
            let width = s.base + s.width - first.base;
            let (merged, merged_origins) = null_extend(rows, &mine, &origins, done, width);
            rows = merged;
            origins = merged_origins;
            if !n.after.is_empty() {
                let mut keep = Vec::with_capacity(rows.len());
                let mut keep_origins: Vec<Vec<usize>> = vec![Vec::with_capacity(rows.len()); origins.len()];
                for (i, r) in rows.into_iter().enumerate() {
                    if all_pass(&n.after, &r, ctx)? {
                        keep.push(r);
                        for (k, o) in origins.iter().enumerate() {
                            keep_origins[k].push(o[i]);
                        }
                    }
                }
                rows = keep;
                origins = keep_origins;
            }
        }
    }
    debug_assert!(open.is_empty() && origins.is_empty());
    Ok(rows)
}

/// The rows of a finished nest, plus one NULL-extended row for each start
/// row that none of them extends, in start row order. `mine[i]`: start row
/// of `rows[i]` (non-decreasing); `outer[k][i]`: row i's origin in
/// enclosing nest k.
fn null_extend(
    rows: Vec<Row>,
    mine: &[usize],
    outer: &[Vec<usize>],
    done: Open,
    width: usize,
) -> (Vec<Row>, Vec<Vec<usize>>) {
    debug_assert!(mine.windows(2).all(|w| w[0] <= w[1]), "join output follows prefix order");
    let nulls = vec![Value::Null; width];
    let mut out = Vec::with_capacity(rows.len().max(done.start_rows.len()));
    let mut out_origins: Vec<Vec<usize>> = vec![Vec::with_capacity(out.capacity()); outer.len()];
    let mut rows = rows.into_iter().enumerate().peekable();
    for (j, start) in done.start_rows.iter().enumerate() {
        let mut any = false;
        while let Some((i, r)) = rows.next_if(|(i, _)| mine[*i] == j) {
            any = true;
            out.push(r);
            for (k, o) in outer.iter().enumerate() {
                out_origins[k].push(o[i]);
            }
        }
        if !any {
            out.push(concat(start, &nulls));
            for (k, o) in done.outer_origins.iter().enumerate() {
                out_origins[k].push(o[j]);
            }
        }
    }
    debug_assert!(rows.next().is_none());
    (out, out_origins)
}
