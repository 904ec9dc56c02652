//! Compact joined rows: each table source of a SELECT occupies only the
//! columns it fetches, in fetch order, instead of the table's full width.
//!
//! Expressions are compiled against full-width rows (column offset = table
//! base + column id). Fetched rows hold only the `needed` columns, and
//! spreading every one into a full-width row (NULL where unfetched) cost
//! about a tenth of sqld's CPU on sysbench's range queries. Once the planner
//! knows which columns each table fetches, `compact` rewrites the plan's
//! column offsets to the fetched positions, so rows are used as they arrive.
//!
//! A table's `local` conjuncts keep their column ids (the scan pushes them to
//! the data node and prunes partitions with them); the rewritten copy for
//! evaluating on fetched rows is `TableAccess::compact_local`.

use crate::engine::expr::{collect_cols, map_cols, CExpr};
use crate::engine::query::{SelectPlan, SourceKind};

/// Rewrite `plan` to compact rows. Leaves it unchanged when some expression
/// reads a column that is not fetched (its value would be NULL in a
/// full-width row) or no table drops a column.
pub fn compact(plan: &mut SelectPlan) {
    let old_width = plan.width;
    // Old joined-row offset -> new one (None: not fetched).
    let mut map: Vec<Option<usize>> = vec![None; old_width];
    let mut spans = Vec::with_capacity(plan.sources.len());
    let mut next = 0;
    for s in &plan.sources {
        let base = next;
        if s.base.checked_add(s.width).is_none_or(|end| end > old_width) {
            return;
        }
        match &s.kind {
            SourceKind::Table(t) => {
                if !t.needed.windows(2).all(|w| w[0] < w[1]) || t.needed.last().is_some_and(|&c| c as usize >= s.width)
                {
                    return;
                }
                for &c in &t.needed {
                    map[s.base + c as usize] = Some(next);
                    next += 1;
                }
            }
            SourceKind::Derived(_) | SourceKind::Rows(_) | SourceKind::WorkTable(_) | SourceKind::JsonTable(_) => {
                for slot in &mut map[s.base..s.base + s.width] {
                    *slot = Some(next);
                    next += 1;
                }
            }
        }
        spans.push((base, next - base));
    }
    if next == old_width {
        return;
    }
    // Offsets past the joined row are aggregate values and then window
    // results (post-aggregation rows are the joined row ++ aggregates ++
    // window values): they shift with the width.
    let new_of = |i: usize| if i < old_width { map[i] } else { Some(i - old_width + next) };

    let mut exprs: Vec<&CExpr> = Vec::new();
    exprs.extend(plan.filter.iter());
    exprs.extend(plan.proj.iter());
    exprs.extend(plan.having.iter());
    exprs.extend(plan.order.iter().map(|o| &o.expr));
    if let Some(a) = &plan.agg {
        exprs.extend(a.group_by.iter());
        exprs.extend(a.aggs.iter().flat_map(|x| x.exprs()));
    }
    exprs.extend(plan.windows.iter().flat_map(|w| w.exprs()));
    for s in &plan.sources {
        exprs.extend(s.on.iter());
        if let Some(l) = &s.lookup {
            exprs.extend(l.keys.iter());
        }
        if let SourceKind::JsonTable(jt) = &s.kind {
            exprs.push(&jt.doc);
        }
    }
    exprs.extend(plan.nests.iter().flat_map(|n| n.after.iter()));
    let mut cols = Vec::new();
    for e in exprs {
        collect_cols(e, &mut cols);
    }
    if cols.iter().any(|&i| new_of(i).is_none()) {
        return;
    }
    // Each table's local conjuncts over its fetched columns.
    let mut locals = Vec::with_capacity(plan.sources.len());
    for s in &plan.sources {
        locals.push(match &s.kind {
            SourceKind::Table(t) => {
                let pos = |c: usize| t.needed.iter().position(|&n| n as usize == c);
                let mut lc = Vec::new();
                for e in &t.local {
                    collect_cols(e, &mut lc);
                }
                if lc.iter().any(|&c| pos(c).is_none()) {
                    return;
                }
                let f = |c: usize| pos(c).unwrap_or(c);
                Some(
                    t.local
                        .iter()
                        .map(|e| {
                            let mut e = e.clone();
                            map_cols(&mut e, &f);
                            e
                        })
                        .collect::<Vec<_>>(),
                )
            }
            _ => None,
        });
    }

    // Every offset maps (checked above).
    let f = |i: usize| new_of(i).unwrap_or(i);
    plan.filter.iter_mut().for_each(|e| map_cols(e, &f));
    plan.proj.iter_mut().for_each(|e| map_cols(e, &f));
    plan.having.iter_mut().for_each(|e| map_cols(e, &f));
    plan.order.iter_mut().for_each(|o| map_cols(&mut o.expr, &f));
    if let Some(a) = &mut plan.agg {
        a.group_by.iter_mut().for_each(|e| map_cols(e, &f));
        for x in &mut a.aggs {
            x.arg.iter_mut().for_each(|e| map_cols(e, &f));
            x.order.iter_mut().for_each(|(e, _, _)| map_cols(e, &f));
        }
    }
    for w in &mut plan.windows {
        w.exprs_mut().into_iter().for_each(|e| map_cols(e, &f));
    }
    for n in &mut plan.nests {
        n.after.iter_mut().for_each(|e| map_cols(e, &f));
    }
    for ((s, (base, width)), local) in plan.sources.iter_mut().zip(spans).zip(locals) {
        s.on.iter_mut().for_each(|e| map_cols(e, &f));
        if let Some(l) = &mut s.lookup {
            l.keys.iter_mut().for_each(|e| map_cols(e, &f));
        }
        s.base = base;
        s.width = width;
        match &mut s.kind {
            SourceKind::Table(t) => t.compact_local = local,
            SourceKind::JsonTable(jt) => map_cols(&mut jt.doc, &f),
            _ => {}
        }
    }
    plan.width = next;
}
