//! GROUP BY ... WITH ROLLUP and GROUPING(). Owner: query engineer.
//!
//! One mechanism: a ROLLUP over `n` GROUP BY expressions aggregates every
//! row at `n + 1` levels (level `k` keeps the first `k` expressions and
//! rolls up the rest), so a super-aggregate row is an ordinary group whose
//! rolled-up expressions read as NULL. Aggregates are stepped once per level
//! (no merging of partial states), so DISTINCT aggregates and GROUP_CONCAT
//! need nothing special.
//!
//! Row layout. A post-aggregation row is the group's first joined row ++
//! aggregate values; with ROLLUP it also carries `n` *group slots* (the
//! group's value of each GROUP BY expression, NULL where rolled up) and one
//! value per GROUPING() call. At compile time (`resolve`) every select-list,
//! HAVING, ORDER BY and window expression that equals a GROUP BY expression
//! is redirected to its slot, which is how `a + 1` reads NULL on a row that
//! rolled `a` up, as in MySQL.
//!
//! Order. MySQL 8.0 groups for ROLLUP by sorting, so its rows come out
//! ascending by the GROUP BY values (NULL first), each super-aggregate row
//! right after the rows it sums up; `sort_groups` gives that order (ORDER BY,
//! when present, sorts the result again afterwards).
//!
//! GROUPING(e, ...) is compiled as a placeholder column
//! `GROUPING_MARK + k` (the GROUP BY list is compiled after the select list,
//! which may use its aliases) and `resolve` places it in its slot.

use crate::engine::expr::compile::Compiler;
use crate::engine::expr::{for_each_child_mut, map_cols, CExpr, SqlType, TClass};
use crate::engine::window::WIN_MARK;
use crate::types::SqlError;
use norr_signals::Value;
use sqlparser::ast::Expr;

/// Placeholder offset of GROUPING() call k: `Col(GROUPING_MARK + k)` until
/// `resolve` moves it. Below `WIN_MARK`, so `window::place` leaves it alone.
pub const GROUPING_MARK: usize = 1 << 39;
const _: () = assert!(GROUPING_MARK < WIN_MARK);

/// MySQL's limit on GROUPING() arguments (the result is a bit mask in a
/// BIGINT).
const MAX_GROUPING_ARGS: usize = 64;

/// The ROLLUP part of an aggregation plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Rollup {
    /// For each GROUPING() call, the GROUP BY positions of its arguments
    /// (first argument = most significant bit).
    pub calls: Vec<Vec<usize>>,
}

impl Rollup {
    /// Extra values a post-aggregation row carries after the aggregates.
    pub fn extra_width(&self, n_group: usize) -> usize {
        n_group + self.calls.len()
    }
}

/// Compile `GROUPING(args)` in `c`'s clause: a placeholder column (see the
/// module doc). Errors as MySQL 8.0 gives them.
pub fn compile_call(c: &mut Compiler, args: &[Expr]) -> Result<(CExpr, SqlType), SqlError> {
    if c.clause == "group statement" {
        return Err(SqlError::new(1056, "42000", "Can't group on 'GROUPING function'"));
    }
    if args.is_empty() {
        return Err(crate::engine::error_map::parse_error_near(")"));
    }
    if args.len() > MAX_GROUPING_ARGS {
        return Err(SqlError::new(
            3601,
            "HY000",
            format!(
                "Too many arguments for function GROUPING: {}; maximum allowed is {MAX_GROUPING_ARGS}.",
                args.len()
            ),
        ));
    }
    // Outside the select list, HAVING and ORDER BY of an aggregating block
    // (WHERE, ON, UPDATE ... SET, a block without GROUP BY) there is no
    // group to ask about.
    if c.aggs.is_none() {
        return Err(invalid_use());
    }
    if args.iter().any(|a| matches!(a, Expr::Value(_))) {
        return Err(SqlError::new(1210, "HY000", "Incorrect arguments to GROUPING function"));
    }
    let mut compiled = Vec::with_capacity(args.len());
    for a in args {
        compiled.push(c.compile(a)?.0);
    }
    let Some(calls) = c.host.grouping_calls() else { return Err(invalid_use()) };
    calls.push(compiled);
    Ok((CExpr::Col(GROUPING_MARK + calls.len() - 1), SqlType::new(TClass::Int)))
}

fn invalid_use() -> SqlError {
    SqlError::new(1111, "HY000", "Invalid use of group function")
}

/// After a query block is compiled: with ROLLUP, redirect `exprs` (select
/// list, HAVING, ORDER BY, window arguments) to the group slots from `base`
/// on and place the GROUPING() calls after them; without, refuse any
/// GROUPING() call. Returns the plan's `Rollup`.
pub fn resolve(
    rollup: bool,
    group_by: &[CExpr],
    calls: Vec<Vec<CExpr>>,
    base: usize,
    exprs: Vec<&mut CExpr>,
) -> Result<Option<Rollup>, SqlError> {
    if !rollup {
        return match calls.is_empty() {
            true => Ok(None),
            false => Err(invalid_use()),
        };
    }
    let mut positions = Vec::with_capacity(calls.len());
    for args in &calls {
        let mut p = Vec::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            let j = group_by.iter().position(|g| g == a).ok_or_else(|| {
                SqlError::new(3602, "HY000", format!("Argument #{} of GROUPING function is not in GROUP BY", i + 1))
            })?;
            p.push(j);
        }
        positions.push(p);
    }
    let n = group_by.len();
    let place = |i: usize| match i {
        i if (GROUPING_MARK..WIN_MARK).contains(&i) => base + n + (i - GROUPING_MARK),
        i => i,
    };
    for e in exprs {
        to_slots(e, group_by, base);
        map_cols(e, &place);
    }
    Ok(Some(Rollup { calls: positions }))
}

/// Replace each subexpression equal to GROUP BY expression j (the first
/// such j, as MySQL matches) by `Col(base + j)`.
fn to_slots(e: &mut CExpr, group_by: &[CExpr], base: usize) {
    if let Some(j) = group_by.iter().position(|g| g == e) {
        *e = CExpr::Col(base + j);
        return;
    }
    for_each_child_mut(e, &mut |c| to_slots(c, group_by, base));
}

/// Whether `e` reads a group slot (its value is NULL on some rollup rows).
pub fn reads_slot(e: &CExpr, base: usize, n: usize) -> bool {
    let mut cols = Vec::new();
    crate::engine::expr::collect_cols(e, &mut cols);
    cols.iter().any(|&i| i >= base && i < base + n)
}

/// The group levels a row is aggregated at: `n` kept expressions only, or
/// with ROLLUP every level from `n` down to 0 (the grand total).
pub fn levels(n: usize, rollup: bool) -> std::ops::RangeInclusive<usize> {
    if rollup {
        0..=n
    } else {
        n..=n
    }
}

/// Append a rollup group's slots and GROUPING() values to its
/// post-aggregation row: `gvals` are the group's values of the kept
/// expressions (`gvals.len()` = level).
pub fn extend_row(row: &mut Vec<Value>, r: &Rollup, n: usize, gvals: Vec<Value>) {
    let kept = gvals.len();
    debug_assert!(kept <= n);
    row.extend(gvals);
    row.resize(row.len() + (n - kept), Value::Null);
    for args in &r.calls {
        let mut bits: i64 = 0;
        for &j in args {
            bits = (bits << 1) | i64::from(j >= kept);
        }
        row.push(Value::Int(bits));
    }
}

/// Sort key of a rollup group, in MySQL's output order: per GROUP BY
/// position, whether it is rolled up (after every real value, NULL
/// included), then the value.
pub fn sort_key(gvals: &[Value], n: usize) -> Vec<Value> {
    let mut k = Vec::with_capacity(2 * n);
    for j in 0..n {
        match gvals.get(j) {
            Some(v) => {
                k.push(Value::Int(0));
                k.push(v.clone());
            }
            None => {
                k.push(Value::Int(1));
                k.push(Value::Null);
            }
        }
    }
    k
}
