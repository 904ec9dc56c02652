//! ONLY_FULL_GROUP_BY: an aggregating query block may read a row column
//! outside an aggregate only when its value is the same on every row of a
//! group: the column is grouped, is equal to a constant or to such a column
//! by a WHERE conjunct, or belongs to a table whose whole primary key is
//! grouped (MySQL 8.0's functional dependence, the common cases of it).
//! Else MySQL refuses the statement (1055; 1140 without GROUP BY), where a
//! lenient engine returns the value of an arbitrary row.
//!
//! The check runs when a query block is compiled, whatever the session's
//! sql_mode, and its outcome stays with the compiled statement
//! (`Compiled::full_group_by`); whether it refuses is decided at each
//! execution from the sql_mode then, so a prepared statement kept across a
//! `SET sql_mode` follows the new mode without being compiled again.

use crate::engine::expr::{for_each_child, CExpr, CmpKind};
use crate::engine::query::{Source, SourceKind};
use crate::types::SqlError;

/// Where in the query block an expression was found (for the message).
#[derive(Debug, Clone, Copy)]
pub enum Clause {
    Select,
    Having,
    OrderBy,
}

/// The query block's aggregation, as the check needs it.
pub struct Block<'a> {
    pub sources: &'a [Source],
    /// Width of the joined row: columns below it are row columns, at or
    /// above it aggregate results.
    pub width: usize,
    pub group_by: &'a [CExpr],
    /// WHERE (and inner-join ON) conjuncts.
    pub filter: &'a [CExpr],
    /// Names of the row columns, `db.table.column` as MySQL prints them.
    pub col_name: &'a dyn Fn(usize) -> String,
}

/// The error ONLY_FULL_GROUP_BY gives for `exprs` (each with its clause and
/// 1-based position there), or None when every one only reads values that
/// are constant within a group.
pub fn violation(b: &Block, exprs: &[(Clause, usize, &CExpr)]) -> Option<SqlError> {
    let fixed = fixed_columns(b);
    for (clause, pos, e) in exprs {
        if let Some(col) = ungrouped_col(e, b, &fixed) {
            let name = (b.col_name)(col);
            return Some(if b.group_by.is_empty() {
                SqlError::new(
                    1140,
                    "42000",
                    format!(
                        "In aggregated query without GROUP BY, expression #{pos} of {} contains nonaggregated column \
                         '{name}'; this is incompatible with sql_mode=only_full_group_by",
                        clause_name(*clause)
                    ),
                )
            } else {
                SqlError::new(
                    1055,
                    "42000",
                    format!(
                        "Expression #{pos} of {} is not in GROUP BY clause and contains nonaggregated column '{name}' \
                         which is not functionally dependent on columns in GROUP BY clause; this is incompatible \
                         with sql_mode=only_full_group_by",
                        clause_name(*clause)
                    ),
                )
            });
        }
    }
    None
}

fn clause_name(c: Clause) -> &'static str {
    match c {
        Clause::Select => "SELECT list",
        Clause::Having => "HAVING clause",
        Clause::OrderBy => "ORDER BY clause",
    }
}

/// Row columns whose value is the same on every row of a group.
fn fixed_columns(b: &Block) -> Vec<bool> {
    let mut fixed = vec![false; b.width];
    for g in b.group_by {
        if let CExpr::Col(i) = g {
            if *i < b.width {
                fixed[*i] = true;
            }
        }
    }
    // Without GROUP BY the whole result is one group: only constants are fixed.
    loop {
        let mut grew = false;
        for c in b.filter {
            if let CExpr::Cmp(CmpKind::Eq, l, r, _) | CExpr::NullSafeEq(l, r, _) = c {
                for (a, other) in [(l, r), (r, l)] {
                    if let CExpr::Col(i) = a.as_ref() {
                        if *i < b.width && !fixed[*i] && is_fixed(other, &fixed, b.width) {
                            fixed[*i] = true;
                            grew = true;
                        }
                    }
                }
            }
        }
        // A table whose whole primary key is fixed has every column fixed.
        for s in b.sources {
            let SourceKind::Table(ta) = &s.kind else { continue };
            let pk = &ta.table.def.primary_key;
            let all = !pk.is_empty() && pk.iter().all(|c| fixed.get(s.base + *c as usize) == Some(&true));
            if all {
                for f in fixed.iter_mut().skip(s.base).take(s.width) {
                    if !*f {
                        *f = true;
                        grew = true;
                    }
                }
            }
        }
        if !grew {
            return fixed;
        }
    }
}

/// Is `e` the same for every row of a group (constants, fixed columns)?
fn is_fixed(e: &CExpr, fixed: &[bool], width: usize) -> bool {
    match e {
        CExpr::Col(i) => *i >= width || fixed[*i],
        CExpr::Lit(_) | CExpr::Param(_) | CExpr::SysVar(_) | CExpr::UserVar(_) | CExpr::Outer(_) => true,
        _ => false,
    }
}

/// The first row column `e` reads that is not constant within a group.
fn ungrouped_col(e: &CExpr, b: &Block, fixed: &[bool]) -> Option<usize> {
    if b.group_by.contains(e) {
        return None;
    }
    match e {
        CExpr::Col(i) => return (*i < b.width && !fixed[*i]).then_some(*i),
        // ANY_VALUE(x) is the way to say any row's value will do.
        CExpr::Func(crate::engine::functions::Func::AnyValue, _) => return None,
        _ => {}
    }
    let mut found = None;
    for_each_child(e, &mut |c| {
        if found.is_none() {
            found = ungrouped_col(c, b, fixed);
        }
    });
    found
}
