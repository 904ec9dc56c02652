//! A join tree (`join_tree`) as the sources a `SelectPlan` runs, in MySQL's
//! way of running nested outer joins (its "simplify_joins" normal form):
//!
//! * Leaves become sources in execution order (left operand before right;
//!   RIGHT JOIN already swapped), so every source's columns follow those of
//!   the tables its ON reads.
//! * An inner join's ON is a WHERE conjunct of the level it is on: at the top
//!   it joins `filter` (where `plan_access` pushes it down and turns it into
//!   a key lookup or hash join); inside a nest it is one of the nest's
//!   conditions.
//! * `x LEFT JOIN t ON p` with a single table `t` is an ordinary left-joined
//!   source. `x LEFT JOIN (t1 ... tn) ON p` is a `JoinNest`: t1..tn run as
//!   inner joins per row of x, and a row of x with no combination passing the
//!   nest's conditions gets one row of NULLs for all of t1..tn.
//! * A nest's condition is evaluated at the first source where its columns
//!   are all joined; when that is inside a smaller nest (or a left-joined
//!   table) of this one, it waits for that nest's NULL extension
//!   (`JoinNest::after`).
//!
//! Each ON is compiled against only its two operands' columns (others are
//! hidden), which gives MySQL's 1054 "Unknown column 'c.x' in 'on clause'".

use crate::engine::expr::compile::{ParamMap, Scope};
use crate::engine::expr::{cmp_coll, collect_cols, CExpr, CmpKind};
use crate::engine::join_tree::{self, JoinNode};
use crate::engine::query::{JoinNest, Source, StmtCompiler};
use crate::engine::row_lock::RowLock;
use crate::types::SqlError;
use sqlparser::ast::{JoinConstraint, TableWithJoins};
use std::ops::Range;

/// The FROM clause compiled: what `compile_block` goes on with.
pub struct FromPlan {
    pub scope: Scope,
    pub sources: Vec<Source>,
    /// Sources in the order `*` lists their columns (written order).
    pub star_order: Vec<usize>,
    pub nests: Vec<JoinNest>,
    /// Inner-join ON conjuncts of the top level: WHERE conjuncts.
    pub where_conds: Vec<CExpr>,
}

/// `scope` with only the columns in `visible` addressable (the rest keep
/// their offsets but cannot be named).
pub fn restrict(scope: &Scope, visible: Range<usize>) -> Scope {
    let mut s = scope.clone();
    for (i, c) in s.cols.iter_mut().enumerate() {
        if !visible.contains(&i) {
            c.name = String::from("\u{0}outside");
        }
    }
    s
}

/// USING (cols) / NATURAL: equalities between the left operand's column
/// (offsets `left`) and the right operand's (offsets `right`) of each name;
/// the right one is merged away (unqualified names and `*` see the left one).
pub fn using_conds(
    constraint: &JoinConstraint,
    scope: &mut Scope,
    left: Range<usize>,
    right: Range<usize>,
) -> Result<Vec<CExpr>, SqlError> {
    let names: Vec<String> = match constraint {
        JoinConstraint::Using(cols) => cols.iter().map(|c| c.to_string().trim_matches('`').to_string()).collect(),
        // NATURAL: every visible column name both sides have.
        _ => right
            .clone()
            .map(|i| scope.cols[i].name.clone())
            .filter(|n| !n.starts_with('\u{0}'))
            .filter(|n| left.clone().any(|i| !scope.merged.contains(&i) && scope.cols[i].name.eq_ignore_ascii_case(n)))
            .collect(),
    };
    let mut v = Vec::new();
    for n in names {
        let r = right.clone().find(|i| scope.cols[*i].name.eq_ignore_ascii_case(&n));
        let l = left.clone().find(|i| !scope.merged.contains(i) && scope.cols[*i].name.eq_ignore_ascii_case(&n));
        match (l, r) {
            (Some(l), Some(r)) => {
                v.push(CExpr::Cmp(
                    CmpKind::Eq,
                    Box::new(CExpr::Col(l)),
                    Box::new(CExpr::Col(r)),
                    cmp_coll(&scope.cols[l].ty, &scope.cols[r].ty),
                ));
                scope.merged.push(r);
            }
            _ => return Err(crate::engine::expr::compile::unknown_column(&n, "from clause")),
        }
    }
    Ok(v)
}

/// A nest while the tree is walked.
struct NestBuild {
    first: usize,
    last: usize,
    parent: Option<usize>,
    after: Vec<CExpr>,
}

struct Walk<'o> {
    scope: Scope,
    sources: Vec<Source>,
    /// Written position of each source's table.
    ordinals: Vec<usize>,
    nests: Vec<NestBuild>,
    /// (owning nest, None = top level; conjunct).
    conds: Vec<(Option<usize>, CExpr)>,
    outer: Option<&'o Scope>,
    lock: RowLock,
}

impl<'a> StmtCompiler<'a> {
    /// FROM with parenthesized joins or RIGHT JOINs inside a chain.
    pub(crate) fn compile_join_tree(
        &mut self,
        from: &[TableWithJoins],
        outer: Option<&Scope>,
        lock: RowLock,
        params: &ParamMap,
    ) -> Result<FromPlan, SqlError> {
        let tree = join_tree::build(from)?;
        let mut w = Walk {
            scope: Scope::default(),
            sources: Vec::new(),
            ordinals: Vec::new(),
            nests: Vec::new(),
            conds: Vec::new(),
            outer,
            lock,
        };
        self.walk(&tree, None, &mut w, params)?;
        let mut where_conds = Vec::new();
        for (owner, c) in std::mem::take(&mut w.conds) {
            match owner {
                None => where_conds.push(c),
                Some(n) => place(&mut w, n, c),
            }
        }
        let mut star_order: Vec<usize> = (0..w.sources.len()).collect();
        star_order.sort_by_key(|&i| w.ordinals[i]);
        let nests = w
            .nests
            .into_iter()
            .map(|n| {
                debug_assert!(n.first <= n.last && n.last < w.sources.len());
                JoinNest { first: n.first, last: n.last, after: n.after }
            })
            .collect();
        Ok(FromPlan { scope: w.scope, sources: w.sources, star_order, nests, where_conds })
    }

    /// Add the sources of `node` (inside nest `level`); returns their
    /// indices (contiguous: sources are added in walk order).
    fn walk(
        &mut self,
        node: &JoinNode,
        level: Option<usize>,
        w: &mut Walk,
        params: &ParamMap,
    ) -> Result<Range<usize>, SqlError> {
        match node {
            JoinNode::Leaf { factor, ordinal } => {
                let idx = self.add_factor(factor, &mut w.scope, &mut w.sources, w.outer, w.lock)?;
                debug_assert_eq!(idx, w.ordinals.len());
                w.ordinals.push(*ordinal);
                w.sources[idx].nested = level.is_some();
                Ok(idx..idx + 1)
            }
            JoinNode::Join { left, right, outer: false, cond } => {
                let l = self.walk(left, level, w, params)?;
                let r = self.walk(right, level, w, params)?;
                for c in self.join_cond(*cond, w, &l, &r, params)? {
                    w.conds.push((level, c));
                }
                Ok(l.start..r.end)
            }
            JoinNode::Join { left, right, outer: true, cond } => {
                let l = self.walk(left, level, w, params)?;
                if let JoinNode::Leaf { .. } = right.as_ref() {
                    // One table NULL-extended alone: as on the flat path.
                    let r = self.walk(right, level, w, params)?;
                    let on = self.join_cond(*cond, w, &l, &r, params)?;
                    w.sources[r.start].left_join = true;
                    w.sources[r.start].on.extend(on);
                    return Ok(l.start..r.end);
                }
                let nest = w.nests.len();
                w.nests.push(NestBuild { first: w.sources.len(), last: 0, parent: level, after: Vec::new() });
                let r = self.walk(right, Some(nest), w, params)?;
                debug_assert_eq!(r.start, w.nests[nest].first);
                w.nests[nest].last = r.end - 1;
                for c in self.join_cond(*cond, w, &l, &r, params)? {
                    w.conds.push((Some(nest), c));
                }
                Ok(l.start..r.end)
            }
        }
    }

    /// The conjuncts of one join's condition over its operands `l` and `r`
    /// (source ranges).
    fn join_cond(
        &mut self,
        cond: Option<&JoinConstraint>,
        w: &mut Walk,
        l: &Range<usize>,
        r: &Range<usize>,
        params: &ParamMap,
    ) -> Result<Vec<CExpr>, SqlError> {
        let cols = |s: &Range<usize>| {
            let first = &w.sources[s.start];
            let last = &w.sources[s.end - 1];
            first.base..last.base + last.width
        };
        let (lc, rc) = (cols(l), cols(r));
        match cond {
            None | Some(JoinConstraint::None) => Ok(Vec::new()),
            Some(JoinConstraint::On(e)) => {
                let visible = restrict(&w.scope, lc.start..rc.end);
                self.compile_on(e, &visible, w.outer, params)
            }
            Some(c) => using_conds(c, &mut w.scope, lc, rc),
        }
    }
}

/// Put conjunct `c` of nest `n` where its columns are all joined.
fn place(w: &mut Walk, n: usize, c: CExpr) {
    let mut cols = Vec::new();
    collect_cols(&c, &mut cols);
    let first = w.nests[n].first;
    // The last source the conjunct reads (column offsets ascend with sources).
    let m = cols
        .iter()
        .filter_map(|&col| w.sources.iter().position(|s| col >= s.base && col < s.base + s.width))
        .max()
        .unwrap_or(first)
        .max(first);
    // The nest directly inside `n` that holds source m, if any.
    let mut child = w
        .nests
        .iter()
        .enumerate()
        .filter(|(_, x)| x.first <= m && m <= x.last)
        .min_by_key(|(_, x)| x.last - x.first)
        .map(|(i, _)| i);
    while let Some(k) = child {
        if w.nests[k].parent == Some(n) || k == n {
            break;
        }
        child = w.nests[k].parent;
    }
    match child {
        Some(k) if k != n => w.nests[k].after.push(c),
        _ if w.sources[m].left_join => {
            // A table left-joined alone inside this nest: the conjunct must
            // see its NULL extension, so it becomes a nest of one.
            w.sources[m].left_join = false;
            w.sources[m].nested = true;
            w.nests.push(NestBuild { first: m, last: m, parent: Some(n), after: vec![c] });
        }
        _ => w.sources[m].on.push(c),
    }
}
