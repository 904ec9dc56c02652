//! Evaluation of pushed-down filters (`ops::Filter`) against a full row, with SQL
//! three-valued logic: `Ok(None)` is UNKNOWN, and only rows whose filter is
//! `Some(true)` pass a scan.
//!
//! Comparisons use the column's type and collation (`coerce::compare_values`).
//! A literal is first coerced to the column type (so a FLOAT column equals the
//! literal 0.1, and a BINARY(4) column equals a shorter literal padded with 0x00);
//! a literal that cannot be coerced (out of range, too long) is compared by value
//! as it is, so `tinyint_col < 1000` is TRUE for every non-NULL row.
//! Numbers compared with an integer or DECIMAL column compare by exact value
//! without coercion (coercing would round: DECIMAL(5,2) 1.00 = 1.004 is FALSE).
//!
//! `validate_filter` rejects, before a scan starts, filters naming unknown
//! columns, comparing incompatible classes, LIKE on a non-string column, or
//! filters deeper / larger than the limits below.

use crate::coerce::{class_sample, coerce_value, comparable_classes, compare_values};
use crate::error::{ErrorCode, NodeError};
use crate::keycode::fold_case;
use crate::ops::{CmpOp, Filter};
use crate::schema::{ColumnDef, ColumnId, TableDef};
use crate::value::{Collation, ColumnType, Value};
use std::cmp::Ordering;

/// Deepest nesting of And/Or/Not accepted.
pub const MAX_FILTER_DEPTH: usize = 64;
/// Most nodes in one filter.
pub const MAX_FILTER_NODES: usize = 4096;

fn bad(msg: String) -> NodeError {
    NodeError::with(ErrorCode::BadFilter, msg)
}

fn column(def: &TableDef, id: ColumnId) -> Result<&ColumnDef, NodeError> {
    def.column(id).ok_or_else(|| bad(format!("column id {id} not in table {}", def.name)))
}

fn cell(row: &[Value], id: ColumnId) -> Result<&Value, NodeError> {
    row.get(id as usize).ok_or_else(|| bad(format!("row has no column {id}")))
}

fn apply(op: CmpOp, o: Ordering) -> bool {
    match op {
        CmpOp::Eq => o == Ordering::Equal,
        CmpOp::Ne => o != Ordering::Equal,
        CmpOp::Lt => o == Ordering::Less,
        CmpOp::Le => o != Ordering::Greater,
        CmpOp::Gt => o == Ordering::Greater,
        CmpOp::Ge => o != Ordering::Less,
    }
}

/// True if `lit` is already in the storage class a coerced value of `ty` has, so
/// comparing it needs no coercion (the common case; avoids a copy per row).
fn already_canonical(lit: &Value, ty: &ColumnType) -> bool {
    match (lit, ty) {
        (Value::Int(_), t) => t.int_range().is_some() && !t.is_unsigned_int(),
        (Value::UInt(_), t) => t.is_unsigned_int(),
        (Value::Double(_), ColumnType::Double) => true,
        (Value::Bytes(_), ColumnType::Varchar { .. } | ColumnType::Char { .. } | ColumnType::Text { .. }) => true,
        (Value::Bytes(_), ColumnType::Varbinary { .. } | ColumnType::Blob) => true,
        (Value::Date(_), ColumnType::Date) => true,
        (Value::DateTime(_), ColumnType::DateTime | ColumnType::Timestamp) => true,
        (Value::Time(_), ColumnType::Time) => true,
        _ => false,
    }
}

/// A pattern token of LIKE.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Tok {
    Lit(u32),
    One,
    Any,
}

fn units(b: &[u8], text: bool) -> Vec<u32> {
    if text {
        if let Ok(s) = std::str::from_utf8(b) {
            return s.chars().map(|c| c as u32).collect();
        }
    }
    b.iter().map(|&c| c as u32).collect()
}

fn tokens(pattern: &[u32]) -> Vec<Tok> {
    let mut out = Vec::with_capacity(pattern.len());
    let mut i = 0;
    while i < pattern.len() {
        let c = pattern[i];
        if c == '\\' as u32 && i + 1 < pattern.len() {
            out.push(Tok::Lit(pattern[i + 1]));
            i += 2;
            continue;
        }
        match char::from_u32(c) {
            Some('%') => {
                if out.last() != Some(&Tok::Any) {
                    out.push(Tok::Any);
                }
            }
            Some('_') => out.push(Tok::One),
            _ => out.push(Tok::Lit(c)),
        }
        i += 1;
    }
    out
}

/// Greedy matcher with backtracking to the last `%`: O(n*m) worst case, linear
/// for the usual patterns.
fn like_match(s: &[u32], p: &[Tok]) -> bool {
    let (mut si, mut pi) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        match p.get(pi) {
            Some(Tok::Lit(c)) if *c == s[si] => {
                si += 1;
                pi += 1;
            }
            Some(Tok::One) => {
                si += 1;
                pi += 1;
            }
            Some(Tok::Any) => {
                star = Some((pi, si));
                pi += 1;
            }
            _ => match star {
                Some((sp, ss)) => {
                    pi = sp + 1;
                    si = ss + 1;
                    star = Some((sp, ss + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|t| *t == Tok::Any)
}

/// SQL LIKE of `value` against `pattern` under a column type (characters for
/// text columns, bytes otherwise; case-insensitive for CI text columns).
pub fn like(value: &[u8], pattern: &[u8], ty: &ColumnType) -> bool {
    let text = ty.is_text();
    let ci = text && ty.collation() == Collation::CaseInsensitive;
    let (v, p) = if ci { (fold_case(value), fold_case(pattern)) } else { (value.to_vec(), pattern.to_vec()) };
    like_match(&units(&v, text), &tokens(&units(&p, text)))
}

fn and3(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    }
}

/// Evaluate `f` on a full row (table column order). `Ok(None)` is UNKNOWN.
pub fn eval_filter(f: &Filter, row: &[Value], def: &TableDef) -> Result<Option<bool>, NodeError> {
    Ok(match f {
        Filter::True => Some(true),
        Filter::False => Some(false),
        Filter::Cmp { col, op, value } => {
            let c = column(def, *col)?;
            let v = cell(row, *col)?;
            if v.is_null() || value.is_null() {
                return Ok(None);
            }
            let ord = literal_order(v, value, c)?;
            Some(apply(*op, ord))
        }
        Filter::CmpCols { left, op, right } => {
            let lc = column(def, *left)?;
            column(def, *right)?;
            let (a, b) = (cell(row, *left)?, cell(row, *right)?);
            if a.is_null() || b.is_null() {
                return Ok(None);
            }
            let ord = compare_values(a, b, &lc.ty)
                .ok_or_else(|| bad(format!("cannot compare columns {left} and {right}")))?;
            Some(apply(*op, ord))
        }
        Filter::IsNull(c) => {
            column(def, *c)?;
            Some(cell(row, *c)?.is_null())
        }
        Filter::IsNotNull(c) => {
            column(def, *c)?;
            Some(!cell(row, *c)?.is_null())
        }
        Filter::Like { col, pattern } => {
            let c = column(def, *col)?;
            match cell(row, *col)? {
                Value::Null => None,
                Value::Bytes(b) => Some(like(b, pattern, &c.ty)),
                other => return Err(bad(format!("LIKE on non-string value {other:?} of column {}", c.name))),
            }
        }
        Filter::And(fs) => {
            let mut acc = Some(true);
            for f in fs {
                acc = and3(acc, eval_filter(f, row, def)?);
                if acc == Some(false) {
                    break;
                }
            }
            acc
        }
        Filter::Or(fs) => {
            let mut acc = Some(false);
            for f in fs {
                acc = match (acc, eval_filter(f, row, def)?) {
                    (Some(true), _) | (_, Some(true)) => Some(true),
                    (Some(false), Some(false)) => Some(false),
                    _ => None,
                };
                if acc == Some(true) {
                    break;
                }
            }
            acc
        }
        Filter::Not(inner) => eval_filter(inner, row, def)?.map(|b| !b),
    })
}

/// Numbers compared with an integer or DECIMAL column compare by exact value:
/// coercing would round (DECIMAL(5,2) = 1.004 must not match 1.00).
fn exact_numeric(lit: &Value, ty: &ColumnType) -> bool {
    let num = matches!(lit, Value::Int(_) | Value::UInt(_) | Value::Decimal(_) | Value::Float(_) | Value::Double(_));
    num && (ty.int_range().is_some() || matches!(ty, ColumnType::Decimal { .. }))
}

fn literal_order(v: &Value, lit: &Value, col: &ColumnDef) -> Result<Ordering, NodeError> {
    let ord = if already_canonical(lit, &col.ty) || exact_numeric(lit, &col.ty) {
        compare_values(v, lit, &col.ty)
    } else {
        match coerce_value(lit.clone(), &col.ty, true) {
            Ok(c) => compare_values(v, &c, &col.ty),
            Err(_) => compare_values(v, lit, &col.ty),
        }
    };
    ord.ok_or_else(|| bad(format!("cannot compare column {} with {lit:?}", col.name)))
}

fn validate(f: &Filter, def: &TableDef, depth: usize, nodes: &mut usize) -> Result<(), NodeError> {
    *nodes += 1;
    if depth > MAX_FILTER_DEPTH {
        return Err(bad(format!("filter nested deeper than {MAX_FILTER_DEPTH}")));
    }
    if *nodes > MAX_FILTER_NODES {
        return Err(bad(format!("filter has more than {MAX_FILTER_NODES} nodes")));
    }
    match f {
        Filter::True | Filter::False => Ok(()),
        Filter::Cmp { col, value, .. } => {
            let c = column(def, *col)?;
            if !comparable_classes(&class_sample(&c.ty), value) {
                return Err(bad(format!("column {} ({:?}) cannot be compared with {value:?}", c.name, c.ty)));
            }
            Ok(())
        }
        Filter::CmpCols { left, right, .. } => {
            let (l, r) = (column(def, *left)?, column(def, *right)?);
            if !comparable_classes(&class_sample(&l.ty), &class_sample(&r.ty)) {
                return Err(bad(format!("columns {} and {} have incomparable types", l.name, r.name)));
            }
            Ok(())
        }
        Filter::IsNull(c) | Filter::IsNotNull(c) => column(def, *c).map(|_| ()),
        Filter::Like { col, .. } => {
            let c = column(def, *col)?;
            if !c.ty.is_bytes() {
                return Err(bad(format!("LIKE on non-string column {}", c.name)));
            }
            Ok(())
        }
        Filter::And(fs) | Filter::Or(fs) => fs.iter().try_for_each(|f| validate(f, def, depth + 1, nodes)),
        Filter::Not(inner) => validate(inner, def, depth + 1, nodes),
    }
}

/// Reject a filter that `eval_filter` could not evaluate on rows of this table.
pub fn validate_filter(f: &Filter, def: &TableDef) -> Result<(), NodeError> {
    let mut nodes = 0;
    validate(f, def, 0, &mut nodes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::PartitionScheme;
    use crate::value::Decimal;

    fn def() -> TableDef {
        TableDef {
            id: 1,
            version: 1,
            name: "t".into(),
            columns: vec![
                ColumnDef::new("id", ColumnType::Int { unsigned: false }).not_null(),
                ColumnDef::new("tiny", ColumnType::TinyInt { unsigned: false }),
                ColumnDef::new("name", ColumnType::Varchar { len: 20, collation: Collation::CaseInsensitive }),
                ColumnDef::new("bin", ColumnType::Varchar { len: 20, collation: Collation::Binary }),
                ColumnDef::new("f", ColumnType::Float),
                ColumnDef::new("b4", ColumnType::Binary { len: 4 }),
                ColumnDef::new("d", ColumnType::Decimal { precision: 6, scale: 2 }),
            ],
            primary_key: vec![0],
            partitioning: PartitionScheme::Key { columns: vec![] },
            partitions: 1,
            indexes: vec![],
            extra: vec![],
            options: Default::default(),
        }
    }

    fn row() -> Vec<Value> {
        vec![
            Value::Int(1),
            Value::Int(100),
            Value::str("Åsa Berg"),
            Value::str("Abc"),
            Value::Float(0.1),
            Value::Bytes(vec![1, 2, 0, 0]),
            Value::Null,
        ]
    }

    fn cmp(col: ColumnId, op: CmpOp, value: Value) -> Filter {
        Filter::Cmp { col, op, value }
    }

    fn ev(f: &Filter) -> Option<bool> {
        validate_filter(f, &def()).unwrap();
        eval_filter(f, &row(), &def()).unwrap()
    }

    #[test]
    fn comparisons() {
        // DECIMAL compares exactly with a literal of more scale.
        let mut r = row();
        r[6] = Value::Decimal(Decimal { mantissa: 100, scale: 2 });
        let d = def();
        let e = |f: Filter| eval_filter(&f, &r, &d).unwrap();
        let lit = |m, s| Value::Decimal(Decimal { mantissa: m, scale: s });
        assert_eq!(e(cmp(6, CmpOp::Eq, lit(1004, 3))), Some(false));
        assert_eq!(e(cmp(6, CmpOp::Lt, lit(1004, 3))), Some(true));
        assert_eq!(e(cmp(6, CmpOp::Eq, lit(1, 0))), Some(true));
        assert_eq!(e(cmp(6, CmpOp::Eq, Value::Double(1.0))), Some(true));
        assert_eq!(e(cmp(6, CmpOp::Gt, Value::Double(0.999))), Some(true));
        assert_eq!(e(cmp(6, CmpOp::Lt, lit(99_999_999, 0))), Some(true), "beyond the precision");
        // An integer column compared with a fraction.
        assert_eq!(e(cmp(1, CmpOp::Lt, Value::Double(100.5))), Some(true));
        assert_eq!(e(cmp(1, CmpOp::Gt, lit(9995, 2))), Some(true));
        assert_eq!(ev(&cmp(1, CmpOp::Eq, Value::Int(100))), Some(true));
        assert_eq!(ev(&cmp(1, CmpOp::Lt, Value::Int(1000))), Some(true));
        assert_eq!(ev(&cmp(1, CmpOp::Gt, Value::Int(-1000))), Some(true));
        assert_eq!(ev(&cmp(1, CmpOp::Ge, Value::UInt(u64::MAX))), Some(false));
        assert_eq!(ev(&cmp(1, CmpOp::Ne, Value::Double(100.5))), Some(true));
        assert_eq!(ev(&cmp(1, CmpOp::Le, Value::Decimal(Decimal { mantissa: 1000, scale: 1 }))), Some(true));
        assert_eq!(ev(&cmp(2, CmpOp::Eq, Value::str("åsa berg"))), Some(true));
        assert_eq!(ev(&cmp(3, CmpOp::Eq, Value::str("abc"))), Some(false));
        assert_eq!(ev(&cmp(3, CmpOp::Lt, Value::str("abc"))), Some(true));
        // A too-long literal still compares.
        assert_eq!(ev(&cmp(3, CmpOp::Lt, Value::str("Abcdefghijklmnopqrstuvwxyz"))), Some(true));
        // FLOAT column equals the double literal after coercion.
        assert_eq!(ev(&cmp(4, CmpOp::Eq, Value::Double(0.1))), Some(true));
        // BINARY(4) equals a shorter literal padded.
        assert_eq!(ev(&cmp(5, CmpOp::Eq, Value::Bytes(vec![1, 2]))), Some(true));
        assert_eq!(ev(&Filter::CmpCols { left: 0, op: CmpOp::Lt, right: 1 }), Some(true));
    }

    #[test]
    fn three_valued_logic() {
        let unknown = cmp(6, CmpOp::Eq, Value::Int(1));
        assert_eq!(ev(&unknown), None);
        assert_eq!(ev(&cmp(1, CmpOp::Eq, Value::Null)), None);
        assert_eq!(ev(&Filter::Not(Box::new(unknown.clone()))), None);
        assert_eq!(ev(&Filter::And(vec![Filter::False, unknown.clone()])), Some(false));
        assert_eq!(ev(&Filter::And(vec![unknown.clone(), Filter::False])), Some(false));
        assert_eq!(ev(&Filter::And(vec![Filter::True, unknown.clone()])), None);
        assert_eq!(ev(&Filter::Or(vec![Filter::True, unknown.clone()])), Some(true));
        assert_eq!(ev(&Filter::Or(vec![unknown.clone(), Filter::True])), Some(true));
        assert_eq!(ev(&Filter::Or(vec![Filter::False, unknown.clone()])), None);
        assert_eq!(ev(&Filter::And(vec![])), Some(true));
        assert_eq!(ev(&Filter::Or(vec![])), Some(false));
        assert_eq!(ev(&Filter::IsNull(6)), Some(true));
        assert_eq!(ev(&Filter::IsNotNull(6)), Some(false));
        assert_eq!(ev(&Filter::Not(Box::new(Filter::IsNull(1)))), Some(true));
        assert_eq!(ev(&Filter::CmpCols { left: 0, op: CmpOp::Eq, right: 6 }), None);
    }

    #[test]
    fn like_patterns() {
        let l = |col, p: &str| Filter::Like { col, pattern: p.as_bytes().to_vec() };
        assert_eq!(ev(&l(2, "åsa%")), Some(true));
        assert_eq!(ev(&l(2, "ÅSA B_RG")), Some(true));
        assert_eq!(ev(&l(2, "%berg")), Some(true));
        assert_eq!(ev(&l(2, "%b%g%")), Some(true));
        assert_eq!(ev(&l(2, "_sa%")), Some(true), "_ matches one character, not one byte");
        assert_eq!(ev(&l(2, "__sa%")), Some(false));
        assert_eq!(ev(&l(3, "abc")), Some(false), "binary collation is case-sensitive");
        assert_eq!(ev(&l(3, "A%")), Some(true));
        let mut r = row();
        r[2] = Value::Null;
        assert_eq!(eval_filter(&l(2, "%"), &r, &def()).unwrap(), None);
        let ci = ColumnType::Varchar { len: 20, collation: Collation::CaseInsensitive };
        assert!(like(b"50%", b"50\\%", &ci));
        assert!(!like(b"500", b"50\\%", &ci));
        assert!(like(b"a_b", b"a\\_b", &ci));
        assert!(!like(b"axb", b"a\\_b", &ci));
        assert!(like(b"", b"%", &ci));
        assert!(!like(b"", b"_", &ci));
        assert!(like(b"aaa", b"%a", &ci));
        assert!(like(b"mississippi", b"%iss%ppi", &ci));
        assert!(!like(b"mississippi", b"%iss%ppx", &ci));
        assert!(like(b"ab\\", b"ab\\", &ci), "trailing backslash is literal");
    }

    #[test]
    fn validation() {
        let d = def();
        let e = |f: Filter| validate_filter(&f, &d).unwrap_err().code;
        assert_eq!(e(cmp(99, CmpOp::Eq, Value::Int(1))), ErrorCode::BadFilter);
        assert_eq!(e(cmp(1, CmpOp::Eq, Value::str("x"))), ErrorCode::BadFilter);
        assert_eq!(e(Filter::Like { col: 1, pattern: b"1%".to_vec() }), ErrorCode::BadFilter);
        assert_eq!(e(Filter::CmpCols { left: 0, op: CmpOp::Eq, right: 2 }), ErrorCode::BadFilter);
        assert_eq!(e(Filter::IsNull(77)), ErrorCode::BadFilter);
        let mut deep = Filter::True;
        for _ in 0..100 {
            deep = Filter::Not(Box::new(deep));
        }
        assert_eq!(e(deep), ErrorCode::BadFilter);
        assert!(validate_filter(&Filter::And(vec![cmp(1, CmpOp::Eq, Value::Null), Filter::IsNull(2)]), &d).is_ok());
        // Unknown column at evaluation time too.
        assert_eq!(eval_filter(&Filter::IsNull(50), &row(), &d).unwrap_err().code, ErrorCode::BadFilter);
    }
}
