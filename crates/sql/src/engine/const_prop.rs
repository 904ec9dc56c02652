//! Constant propagation across column equalities (issue 23): from
//! `t.a = w.id AND w.id = 1` the planner derives `t.a = 1`, so that `t` is
//! read by key rather than scanned (TPC-C New-Order's customer / warehouse
//! query); within one table, `a = b AND b = 3` gives `a = 3`.
//!
//! A derived conjunct is only added where it is implied exactly: the
//! equality joins two integer columns (neither BIT, ENUM nor SET), whose
//! values are then the same integer, so either compares with any value in
//! the same way and `b = k` holds exactly when `a = k` does. Equalities of
//! strings (collations, trailing spaces), decimals or floats are left alone.
//! The derived conjuncts are added to WHERE, whose result they cannot
//! change (every row that passes WHERE satisfies them already); they only
//! give the access-path planner keys to look up.

use crate::engine::expr::{CExpr, CmpKind};

/// Most conjuncts derived for one query (a bound on what a pathological
/// WHERE with many equalities can add).
const MAX_DERIVED: usize = 256;

/// A value a column may be set equal to: a literal, a parameter or a
/// column of the enclosing query's row (a correlated subquery's outer value).
fn is_constant(e: &CExpr) -> bool {
    matches!(e, CExpr::Lit(_) | CExpr::Param(_) | CExpr::Outer(_))
}

/// The conjuncts `filter` implies through equalities between integer
/// columns (`is_int_col`, by column offset), for columns not yet equal to a
/// constant. `extra_equalities`: more conjuncts whose column equalities
/// hold for every row of the result (an inner join's ON), not themselves
/// returned.
pub(crate) fn derived_equalities(
    filter: &[CExpr],
    extra_equalities: &[&CExpr],
    is_int_col: &dyn Fn(usize) -> bool,
) -> Vec<CExpr> {
    // Pairs of integer columns set equal, and columns set equal to constants.
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    let mut constants: Vec<(usize, &CExpr, &CExpr)> = Vec::new(); // (col, value, the conjunct)
    for c in filter.iter().chain(extra_equalities.iter().copied()) {
        let CExpr::Cmp(CmpKind::Eq, l, r, _) = c else { continue };
        match (l.as_ref(), r.as_ref()) {
            (CExpr::Col(a), CExpr::Col(b)) if a != b && is_int_col(*a) && is_int_col(*b) => pairs.push((*a, *b)),
            (CExpr::Col(a), v) | (v, CExpr::Col(a)) if is_constant(v) => constants.push((*a, v, c)),
            _ => {}
        }
    }
    if pairs.is_empty() || constants.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<CExpr> = Vec::new();
    // Spread each constant along the pairs until nothing changes (each
    // round gives at least one new column a constant, or ends).
    let mut known: Vec<(usize, CExpr, CExpr)> =
        constants.iter().map(|(c, v, conj)| (*c, (*v).clone(), (*conj).clone())).collect();
    loop {
        let mut grew = false;
        for &(a, b) in &pairs {
            for (from, to) in [(a, b), (b, a)] {
                if known.iter().any(|(c, _, _)| *c == to) {
                    continue;
                }
                let Some((_, v, conj)) = known.iter().find(|(c, _, _)| *c == from && is_int_col(from)) else {
                    continue;
                };
                let CExpr::Cmp(_, _, _, coll) = conj else { continue };
                let derived = CExpr::Cmp(CmpKind::Eq, Box::new(CExpr::Col(to)), Box::new(v.clone()), *coll);
                known.push((to, v.clone(), derived.clone()));
                out.push(derived);
                grew = true;
                if out.len() >= MAX_DERIVED {
                    return out;
                }
            }
        }
        if !grew {
            return out;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::expr::value::Coll;
    use norr_signals::Value;

    fn eq(a: CExpr, b: CExpr) -> CExpr {
        CExpr::Cmp(CmpKind::Eq, Box::new(a), Box::new(b), Coll::Ci)
    }
    fn lit(i: i64) -> CExpr {
        CExpr::Lit(Value::Int(i))
    }

    #[test]
    fn constants_follow_integer_equalities() {
        let ints = |c: usize| c < 10;
        // w.id (0) = 1, t.a (3) = w.id: t.a = 1; and on along t.a = t.b (4).
        let f = [eq(CExpr::Col(0), lit(1)), eq(CExpr::Col(3), CExpr::Col(0)), eq(CExpr::Col(4), CExpr::Col(3))];
        let d = derived_equalities(&f, &[], &ints);
        assert_eq!(d, vec![eq(CExpr::Col(3), lit(1)), eq(CExpr::Col(4), lit(1))]);
        // From an inner join's ON, and with a parameter or an outer value.
        let on = eq(CExpr::Col(3), CExpr::Col(0));
        let d = derived_equalities(&[eq(CExpr::Param(0), CExpr::Col(0))], &[&on], &ints);
        assert_eq!(d, vec![eq(CExpr::Col(3), CExpr::Param(0))]);
        let d = derived_equalities(&[eq(CExpr::Col(0), CExpr::Outer(2))], &[&on], &ints);
        assert_eq!(d, vec![eq(CExpr::Col(3), CExpr::Outer(2))]);
        // A column with a constant already keeps its own.
        let f = [eq(CExpr::Col(0), lit(1)), eq(CExpr::Col(3), lit(2)), eq(CExpr::Col(3), CExpr::Col(0))];
        assert!(derived_equalities(&f, &[], &ints).is_empty());
    }

    #[test]
    fn other_types_and_comparisons_are_left_alone() {
        let ints = |c: usize| c < 10;
        // Column 12 is not an integer column (a string, say).
        let f = [eq(CExpr::Col(0), lit(1)), eq(CExpr::Col(12), CExpr::Col(0))];
        assert!(derived_equalities(&f, &[], &ints).is_empty());
        // Not an equality.
        let lt = CExpr::Cmp(CmpKind::Lt, Box::new(CExpr::Col(3)), Box::new(CExpr::Col(0)), Coll::Ci);
        assert!(derived_equalities(&[eq(CExpr::Col(0), lit(1)), lt], &[], &ints).is_empty());
        // A value that is not a constant (a function of a column).
        let f = [eq(CExpr::Col(0), CExpr::Neg(Box::new(CExpr::Col(5)))), eq(CExpr::Col(3), CExpr::Col(0))];
        assert!(derived_equalities(&f, &[], &ints).is_empty());
    }
}
