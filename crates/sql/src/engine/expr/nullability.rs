//! Whether an expression can be NULL: the NOT NULL flag of a computed
//! result column (protocol metadata) and the nullability of a column that
//! CREATE TABLE ... AS SELECT makes from it, following MySQL's rules for the
//! common cases. Anything not listed here counts as nullable, which is
//! always safe (MySQL itself is conservative in the same way).
//!
//! Covered: literals; columns (their NOT NULL flag, cleared on the optional
//! side of an outer join by the caller); COUNT / COUNT(*); unary minus, and
//! addition, subtraction and multiplication of non-NULL operands (overflow
//! is an error, not NULL, in MySQL; division, DIV and MOD give NULL on a
//! zero divisor); CONCAT of non-NULL arguments; IFNULL / COALESCE with a
//! non-NULL argument; IS [NOT] NULL; comparisons of non-NULL operands.
//! Not covered (nullable here, NOT NULL in MySQL): most other functions of
//! non-NULL arguments (UPPER, LENGTH, ...), CASE with non-NULL branches and
//! an ELSE, window functions such as ROW_NUMBER().

use super::compile::{AggKind, AggSpec};
use super::value::ArithOp;
use super::CExpr;
use crate::engine::functions::Func;

/// What the caller knows about the columns an expression reads.
pub struct Inputs<'a> {
    /// NOT NULL flag of source column i (i < width).
    pub column_not_null: &'a dyn Fn(usize) -> bool,
    /// Columns from `width` on are aggregate results, in this order.
    pub width: usize,
    pub aggs: &'a [AggSpec],
}

/// True if `e` can never be NULL.
pub fn not_null(e: &CExpr, inp: &Inputs) -> bool {
    match e {
        CExpr::Lit(v) => !v.is_null(),
        CExpr::Col(i) if *i < inp.width => (inp.column_not_null)(*i),
        CExpr::Col(i) => {
            inp.aggs.get(*i - inp.width).is_some_and(|a| matches!(a.kind, AggKind::Count | AggKind::CountStar))
        }
        CExpr::Neg(x) => not_null(x, inp),
        CExpr::Arith(ArithOp::Add | ArithOp::Sub | ArithOp::Mul, l, r) => not_null(l, inp) && not_null(r, inp),
        CExpr::Cmp(_, l, r, _) => not_null(l, inp) && not_null(r, inp),
        CExpr::IsNull(..) => true,
        CExpr::Coalesce(args) => args.iter().any(|a| not_null(a, inp)),
        CExpr::Func(Func::Concat, args) => !args.is_empty() && args.iter().all(|a| not_null(a, inp)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::expr::value::Coll;
    use crate::engine::expr::{CmpKind, SqlType, TClass};
    use norr_signals::Value;

    fn b(e: CExpr) -> Box<CExpr> {
        Box::new(e)
    }

    #[test]
    fn follows_mysql_for_the_common_cases() {
        // Column 0 NOT NULL, column 1 nullable; column 2 is COUNT(*), 3 is SUM.
        let agg = |kind| AggSpec {
            kind,
            arg: None,
            distinct: false,
            coll: Coll::Ci,
            ty: SqlType::new(TClass::Int),
            order: vec![],
            separator: vec![],
        };
        let aggs = [agg(AggKind::CountStar), agg(AggKind::Sum)];
        let inp = Inputs { column_not_null: &|i| i == 0, width: 2, aggs: &aggs };
        let one = || CExpr::Lit(Value::Int(1));
        let (nn, null) = (CExpr::Col(0), CExpr::Col(1));
        assert!(not_null(&one(), &inp));
        assert!(!not_null(&CExpr::Lit(Value::Null), &inp));
        assert!(not_null(&nn, &inp));
        assert!(!not_null(&null, &inp));
        assert!(not_null(&CExpr::Col(2), &inp));
        assert!(!not_null(&CExpr::Col(3), &inp));
        assert!(not_null(&CExpr::Arith(ArithOp::Add, b(nn.clone()), b(one())), &inp));
        assert!(!not_null(&CExpr::Arith(ArithOp::Add, b(null.clone()), b(one())), &inp));
        assert!(!not_null(&CExpr::Arith(ArithOp::Div, b(nn.clone()), b(one())), &inp));
        assert!(not_null(&CExpr::Neg(b(nn.clone())), &inp));
        assert!(not_null(&CExpr::Func(Func::Concat, vec![nn.clone(), one()]), &inp));
        assert!(!not_null(&CExpr::Func(Func::Concat, vec![nn.clone(), null.clone()]), &inp));
        assert!(not_null(&CExpr::Coalesce(vec![null.clone(), one()]), &inp));
        assert!(!not_null(&CExpr::Coalesce(vec![null.clone(), CExpr::Lit(Value::Null)]), &inp));
        assert!(not_null(&CExpr::IsNull(b(null.clone()), false), &inp));
        assert!(not_null(&CExpr::Cmp(CmpKind::Eq, b(nn.clone()), b(one()), Coll::Ci), &inp));
        assert!(!not_null(&CExpr::Cmp(CmpKind::Eq, b(null), b(one()), Coll::Ci), &inp));
        assert!(!not_null(&CExpr::Func(Func::Upper, vec![nn]), &inp));
    }
}
