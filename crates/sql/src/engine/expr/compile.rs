//! sqlparser `Expr` -> `CExpr`: name resolution against a `Scope`, parameter
//! numbering, aggregate extraction and subquery registration.

use super::value::{parse_decimal, ArithOp, Coll};
use super::{cmp_coll, CExpr, CmpKind, SqlType, TClass};
use crate::engine::expr::datetime::Unit;
use crate::engine::functions::{self, unify, Func};
use crate::types::SqlError;
use norr_signals::{ColumnType, Value};
use sqlparser::ast::{
    self, BinaryOperator, DuplicateTreatment, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Query,
    UnaryOperator,
};

/// One column visible to expressions.
#[derive(Debug, Clone)]
pub struct ScopeCol {
    /// Table alias (or name) the column belongs to, lower-case; empty for derived columns.
    pub table: String,
    /// Column name as declared.
    pub name: String,
    pub ty: SqlType,
    /// Member list of an ENUM / SET table column: in numeric context the
    /// column is its index / bit mask (`CExpr::EnumIndex`).
    pub enums: Option<std::sync::Arc<crate::engine::enumset::EnumSet>>,
    /// What `DEFAULT(col)` gives for a base-table column; None for a column
    /// that is not one (derived tables, CTEs, ...), where it is error 1364.
    pub default: Option<ColDefault>,
}

/// The default of a base-table column, as `DEFAULT(col)` reads it
/// (filled from the catalog by `engine::default_fn`).
#[derive(Debug, Clone)]
pub enum ColDefault {
    /// A constant (NULL for a nullable column without a DEFAULT clause).
    Const(Value),
    /// DEFAULT CURRENT_TIMESTAMP: the statement's time.
    Now,
    /// NOT NULL without a DEFAULT clause: error 1364.
    Missing,
}

/// The columns of the row an expression is evaluated against, in row order.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    pub cols: Vec<ScopeCol>,
    /// Right-hand columns of JOIN ... USING / NATURAL JOIN: merged into the
    /// left-hand column of the same name, so unqualified names and `*` see one column.
    pub merged: Vec<usize>,
}

impl Scope {
    /// Find a column by optional qualifier and name. Err(()) = ambiguous
    /// (each caller words its own 1052).
    #[allow(clippy::result_unit_err)]
    pub fn find(&self, table: Option<&str>, name: &str) -> Result<Option<usize>, ()> {
        let mut hit = None;
        for (i, c) in self.cols.iter().enumerate() {
            if !c.name.eq_ignore_ascii_case(name) {
                continue;
            }
            match table {
                Some(t) if !c.table.eq_ignore_ascii_case(t) => continue,
                None if self.merged.contains(&i) => continue,
                _ => {}
            }
            if hit.is_some() {
                return Err(());
            }
            hit = Some(i);
        }
        Ok(hit)
    }
}

/// An ENUM / SET column reference in numeric context becomes its index /
/// bit mask; any other expression is returned as is.
pub fn enum_number(scope: &Scope, outer: Option<&Scope>, e: CExpr, t: SqlType) -> (CExpr, SqlType) {
    let es = match &e {
        CExpr::Col(i) => scope.cols.get(*i).and_then(|c| c.enums.clone()),
        CExpr::Outer(i) => outer.and_then(|o| o.cols.get(*i)).and_then(|c| c.enums.clone()),
        _ => None,
    };
    match es {
        Some(es) => (CExpr::EnumIndex(Box::new(e), es), SqlType { len: 20, ..SqlType::new(TClass::Int) }),
        None => (e, t),
    }
}

/// SqlType of a stored column.
pub fn column_sqltype(ty: &ColumnType) -> SqlType {
    use ColumnType as C;
    let (class, len, dec) = match ty {
        C::TinyInt { unsigned }
        | C::SmallInt { unsigned }
        | C::MediumInt { unsigned }
        | C::Int { unsigned }
        | C::BigInt { unsigned } => (if *unsigned { TClass::UInt } else { TClass::Int }, 20, 0),
        C::Float | C::Double => (TClass::Double, 22, 31),
        C::Decimal { precision, scale } => (TClass::Decimal, *precision as u32 + 2, *scale),
        C::Char { len, .. } | C::Varchar { len, .. } => (TClass::Str, *len, 0),
        C::Text { .. } => (TClass::Str, 65535, 0),
        C::Binary { len } | C::Varbinary { len } => (TClass::Bin, *len, 0),
        C::Blob => (TClass::Bin, 65535, 0),
        C::Date => (TClass::Date, 10, 0),
        C::DateTime | C::Timestamp => (TClass::DateTime, 19, 0),
        C::Time => (TClass::Time, 10, 0),
    };
    let coll = if ty.is_text() && ty.collation() == norr_signals::Collation::CaseInsensitive {
        Coll::Ci
    } else if ty.is_bytes() {
        Coll::Bin
    } else {
        Coll::Ci
    };
    SqlType { class, coll, decimals: dec, len, json: false, boolean: false }
}

/// Positions of `?` placeholders in text order (line, column), so that each
/// placeholder gets its parameter number no matter the order of compilation.
#[derive(Debug, Clone, Default)]
pub struct ParamMap {
    locs: Vec<(u64, u64)>,
}

impl ParamMap {
    pub fn from_statement<V: ast::Visit>(stmt: &V) -> ParamMap {
        let mut locs = Vec::new();
        let _ = ast::visit_expressions(stmt, |e| {
            if let Expr::Value(v) = e {
                if matches!(v.value, ast::Value::Placeholder(_)) {
                    locs.push((v.span.start.line, v.span.start.column));
                }
            }
            std::ops::ControlFlow::<()>::Continue(())
        });
        locs.sort_unstable();
        locs.dedup();
        ParamMap { locs }
    }
    pub fn count(&self) -> usize {
        self.locs.len()
    }
    fn index(&self, span: &sqlparser::tokenizer::Span) -> Option<usize> {
        self.locs.binary_search(&(span.start.line, span.start.column)).ok()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggKind {
    CountStar,
    Count,
    Sum,
    Avg,
    Min,
    Max,
    GroupConcat,
    BitAnd,
    BitOr,
    BitXor,
    /// STD / STDDEV / STDDEV_POP.
    StdPop,
    StdSamp,
    /// VARIANCE / VAR_POP.
    VarPop,
    VarSamp,
    /// JSON_ARRAYAGG(x): the argument is compiled as `JSON_ARRAY(x)`, a
    /// one-element array, so it converts to JSON exactly as JSON_ARRAY's
    /// arguments do (and NULL becomes `null` instead of being skipped).
    JsonArrayAgg,
    /// JSON_OBJECTAGG(k, v): the argument is compiled as `JSON_OBJECT(k, v)`,
    /// which also raises 3158 for a NULL key, as MySQL does.
    JsonObjectAgg,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AggSpec {
    pub kind: AggKind,
    pub arg: Option<CExpr>,
    pub distinct: bool,
    pub coll: Coll,
    pub ty: SqlType,
    /// GROUP_CONCAT's ORDER BY: (key, descending, collation).
    pub order: Vec<(CExpr, bool, Coll)>,
    /// GROUP_CONCAT's SEPARATOR (',' by default).
    pub separator: Vec<u8>,
}

impl AggSpec {
    /// Every expression evaluated on source rows: the argument and the ORDER BY keys.
    pub fn exprs(&self) -> impl Iterator<Item = &CExpr> {
        self.arg.iter().chain(self.order.iter().map(|(e, _, _)| e))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubKind {
    Scalar,
    Exists,
    In,
    /// Whole rows of this many columns (quantified comparisons, row IN).
    Rows(usize),
}

/// Callback into the query compiler for subqueries.
pub trait SubqueryHost {
    /// Compile `q` (with `outer` as the enclosing scope) and return its number
    /// and the type of its first column.
    fn add_subquery(&mut self, q: &Query, kind: SubKind, outer: &Scope) -> Result<(usize, SqlType), SqlError>;
    /// The window functions of the query block being compiled; None where
    /// window functions are not allowed (outside a SELECT's list and ORDER BY).
    fn windows(&mut self) -> Option<&mut crate::engine::window::WindowSink> {
        None
    }
    /// The GROUPING() calls of the query block being compiled (see
    /// `rollup`); None where a query block is not being compiled.
    fn grouping_calls(&mut self) -> Option<&mut Vec<Vec<CExpr>>> {
        None
    }
    /// Name of a system variable -> index into EvalCtx::sysvals.
    fn sysvar(&mut self, name: &str, global: bool) -> usize;
    fn uservar(&mut self, name: &str) -> usize;
}

pub struct Compiler<'a> {
    pub scope: &'a Scope,
    /// Enclosing query's scope (columns become `CExpr::Outer`).
    pub outer: Option<&'a Scope>,
    pub params: &'a ParamMap,
    /// Clause name for error messages ("field list", "where clause", ...).
    pub clause: &'static str,
    /// If set, aggregate calls are allowed and collected here; an aggregate k is
    /// read as `Col(agg_base + k)`.
    pub aggs: Option<&'a mut Vec<AggSpec>>,
    pub agg_base: usize,
    /// Select-list aliases usable in this clause (ORDER BY / HAVING).
    pub aliases: &'a [(String, CExpr, SqlType)],
    pub host: &'a mut dyn SubqueryHost,
}

pub fn unknown_column(name: &str, clause: &str) -> SqlError {
    SqlError::new(1054, "42S22", format!("Unknown column '{name}' in '{clause}'"))
}

fn ident_name(e: &Expr) -> Option<String> {
    match e {
        Expr::Identifier(i) => Some(i.value.clone()),
        _ => None,
    }
}

fn num_literal(s: &str) -> Result<Value, SqlError> {
    let lower = s.to_ascii_lowercase();
    if lower.contains('e') {
        return lower.parse::<f64>().map(Value::Double).map_err(|_| SqlError::parse(format!("bad number {s}")));
    }
    if lower.contains('.') {
        return parse_decimal(s)
            .map(Value::Decimal)
            .or_else(|| lower.parse::<f64>().ok().map(Value::Double))
            .ok_or_else(|| SqlError::parse(format!("bad number {s}")));
    }
    if let Ok(i) = s.parse::<i64>() {
        return Ok(Value::Int(i));
    }
    if let Ok(u) = s.parse::<u64>() {
        return Ok(Value::UInt(u));
    }
    parse_decimal(s).map(Value::Decimal).ok_or_else(|| SqlError::parse(format!("bad number {s}")))
}

fn lit_type(v: &Value) -> SqlType {
    match v {
        Value::Null => SqlType::new(TClass::Null),
        Value::Int(_) => SqlType::new(TClass::Int),
        Value::UInt(_) => SqlType::new(TClass::UInt),
        Value::Float(_) | Value::Double(_) => SqlType { decimals: 31, ..SqlType::new(TClass::Double) },
        Value::Decimal(d) => SqlType { decimals: d.scale, ..SqlType::new(TClass::Decimal) },
        Value::Bytes(b) => SqlType { len: b.len() as u32, ..SqlType::new(TClass::Str) },
        Value::Date(_) => SqlType::new(TClass::Date),
        Value::DateTime(_) => SqlType::new(TClass::DateTime),
        Value::Time(_) => SqlType::new(TClass::Time),
    }
}

fn hex_decode(s: &str) -> Option<Vec<u8>> {
    let s = if s.len() % 2 == 1 { format!("0{s}") } else { s.to_string() };
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok()).collect()
}

fn unit_of(f: &ast::DateTimeField) -> Result<Unit, SqlError> {
    Unit::parse(&f.to_string()).ok_or_else(|| SqlError::unsupported(format!("INTERVAL unit {f}")))
}

pub(crate) fn agg_kind(name: &str) -> Option<AggKind> {
    Some(match name {
        "count" => AggKind::Count,
        "sum" => AggKind::Sum,
        "avg" => AggKind::Avg,
        "min" => AggKind::Min,
        "max" => AggKind::Max,
        "group_concat" => AggKind::GroupConcat,
        "bit_and" => AggKind::BitAnd,
        "bit_or" => AggKind::BitOr,
        "bit_xor" => AggKind::BitXor,
        "std" | "stddev" | "stddev_pop" => AggKind::StdPop,
        "stddev_samp" => AggKind::StdSamp,
        "variance" | "var_pop" => AggKind::VarPop,
        "var_samp" => AggKind::VarSamp,
        "json_arrayagg" => AggKind::JsonArrayAgg,
        "json_objectagg" => AggKind::JsonObjectAgg,
        _ => return None,
    })
}

/// True if the expression contains an aggregate call (not inside a subquery).
pub fn has_aggregate(e: &Expr) -> bool {
    struct Finder {
        depth: usize,
        found: bool,
    }
    impl ast::Visitor for Finder {
        type Break = ();
        fn pre_visit_query(&mut self, _q: &Query) -> std::ops::ControlFlow<()> {
            self.depth += 1;
            std::ops::ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _q: &Query) -> std::ops::ControlFlow<()> {
            self.depth -= 1;
            std::ops::ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, x: &Expr) -> std::ops::ControlFlow<()> {
            if self.depth == 0 {
                if let Expr::Function(f) = x {
                    let n = f.name.to_string().to_ascii_lowercase();
                    // `SUM(x) OVER (...)` is a window function, not an
                    // aggregate (its argument may still hold one).
                    // GROUPING() too: it asks about the group, so it is
                    // refused where an aggregate is (WHERE: 1111).
                    if f.over.is_none() && (agg_kind(&n).is_some() || n == "grouping") {
                        self.found = true;
                        return std::ops::ControlFlow::Break(());
                    }
                }
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let mut f = Finder { depth: 0, found: false };
    let _ = ast::Visit::visit(e, &mut f);
    f.found
}

impl<'a> Compiler<'a> {
    /// A compiler for a clause without aggregates or select-list aliases
    /// (WHERE, ON, SET, VALUES, ...).
    pub fn plain(
        scope: &'a Scope,
        outer: Option<&'a Scope>,
        params: &'a ParamMap,
        clause: &'static str,
        host: &'a mut dyn SubqueryHost,
    ) -> Compiler<'a> {
        Compiler { scope, outer, params, clause, aggs: None, agg_base: 0, aliases: &[], host }
    }

    fn resolve(&self, table: Option<&str>, name: &str, display: &str) -> Result<(CExpr, SqlType), SqlError> {
        match self.scope.find(table, name) {
            Ok(Some(i)) => return Ok((CExpr::Col(i), self.scope.cols[i].ty)),
            Err(()) => {
                return Err(SqlError::new(1052, "23000", format!("Column '{display}' in {} is ambiguous", self.clause)))
            }
            Ok(None) => {}
        }
        if table.is_none() {
            if let Some((_, e, t)) = self.aliases.iter().find(|(a, _, _)| a.eq_ignore_ascii_case(name)) {
                return Ok((e.clone(), *t));
            }
        }
        if let Some(outer) = self.outer {
            if let Ok(Some(i)) = outer.find(table, name) {
                return Ok((CExpr::Outer(i), outer.cols[i].ty));
            }
        }
        Err(unknown_column(display, self.clause))
    }

    pub fn compile(&mut self, e: &Expr) -> Result<(CExpr, SqlType), SqlError> {
        use CExpr as C;
        // 1436 instead of a stack overflow on a tree deeper than this
        // thread can take (`depth`).
        crate::engine::depth::check_stack()?;
        Ok(match e {
            Expr::Identifier(id) => {
                let v = &id.value;
                if let Some(name) = v.strip_prefix("@@") {
                    let (global, n) = split_scope(name);
                    (C::SysVar(self.host.sysvar(n, global)), SqlType::new(TClass::Str))
                } else if let Some(name) = v.strip_prefix('@') {
                    (C::UserVar(self.host.uservar(name)), SqlType::new(TClass::Str))
                } else if let (None, Some(f)) = (id.quote_style, utc_niladic(v)) {
                    // UTC_DATE, UTC_TIME and UTC_TIMESTAMP are reserved
                    // words MySQL also takes without parentheses.
                    self.call_fn(f, &[])?
                } else {
                    self.resolve(None, v, v)?
                }
            }
            Expr::CompoundIdentifier(parts) => {
                let names: Vec<&str> = parts.iter().map(|p| p.value.as_str()).collect();
                if let Some(first) = names.first() {
                    if let Some(scope) = first.strip_prefix("@@") {
                        let global = scope.eq_ignore_ascii_case("global");
                        let n = names[1..].join(".");
                        return Ok((C::SysVar(self.host.sysvar(&n, global)), SqlType::new(TClass::Str)));
                    }
                }
                let display = names.join(".");
                match names.len() {
                    2 => self.resolve(Some(names[0]), names[1], &display)?,
                    3 => self.resolve(Some(names[1]), names[2], &display)?,
                    _ => return Err(unknown_column(&display, self.clause)),
                }
            }
            Expr::Value(v) => match &v.value {
                ast::Value::Placeholder(_) => {
                    let i = self.params.index(&v.span).ok_or_else(|| SqlError::internal("unnumbered placeholder"))?;
                    (C::Param(i), SqlType::new(TClass::Str))
                }
                other => {
                    let val = literal(other)?;
                    let t = if matches!(other, ast::Value::Boolean(_)) { SqlType::BOOL } else { lit_type(&val) };
                    (C::Lit(val), t)
                }
            },
            // A charset introducer: `_binary 'x'` is a binary string (byte
            // comparisons); the utf8 ones are the default's strings.
            Expr::Prefixed { prefix, value } if prefix.value.starts_with('_') => {
                let binary = crate::engine::parse_ext::introducer_is_binary(&prefix.value)?;
                let Expr::Value(v) = value.as_ref() else {
                    return Err(SqlError::unsupported(format!("expression {e}")));
                };
                let val = literal(&v.value)?;
                let mut t = lit_type(&val);
                if binary {
                    // A binary string, as CAST(... AS BINARY) makes.
                    t.coll = Coll::Bin;
                    if t.class == TClass::Str {
                        t.class = TClass::Bin;
                    }
                }
                (C::Lit(val), t)
            }
            Expr::TypedString(ts) => {
                let s = match &ts.value.value {
                    ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => s.clone(),
                    other => other.to_string(),
                };
                let f = match ts.data_type.to_string().to_ascii_uppercase().as_str() {
                    "DATE" => Func::CastDate,
                    "TIME" => Func::CastTime,
                    _ => Func::CastDateTime,
                };
                let t = functions::ret_type(f, &[]);
                (C::Func(f, vec![C::Lit(Value::Bytes(s.into_bytes()))]), t)
            }
            Expr::Nested(x) => self.compile(x)?,
            // expr COLLATE name: the string's collation from here on (its
            // comparisons, LIKE, ORDER BY, GROUP BY, DISTINCT).
            Expr::Collate { expr, collation } => {
                let (x, mut t) = self.compile(expr)?;
                let coll = collation_of(&collation.to_string())?;
                if t.class == TClass::Str {
                    t.coll = coll;
                }
                (x, t)
            }
            Expr::UnaryOp { op, expr } => {
                let (x, t) = self.compile(expr)?;
                let (x, t) =
                    if matches!(op, UnaryOperator::Minus) { enum_number(self.scope, self.outer, x, t) } else { (x, t) };
                match op {
                    UnaryOperator::Minus => match x {
                        C::Lit(Value::Int(i)) => (C::Lit(Value::Int(-i)), t),
                        C::Lit(Value::UInt(u)) if u == 1u64 << 63 => {
                            (C::Lit(Value::Int(i64::MIN)), SqlType::new(TClass::Int))
                        }
                        C::Lit(Value::Decimal(d)) => {
                            (C::Lit(Value::Decimal(norr_signals::Decimal { mantissa: -d.mantissa, scale: d.scale })), t)
                        }
                        C::Lit(Value::Double(f)) => (C::Lit(Value::Double(-f)), t),
                        x => (C::Neg(Box::new(x)), if t.is_numeric() { t } else { SqlType::new(TClass::Double) }),
                    },
                    UnaryOperator::Plus => (x, t),
                    UnaryOperator::BitwiseNot => (C::Func(Func::BitNotOp, vec![x]), SqlType::new(TClass::UInt)),
                    UnaryOperator::Not | UnaryOperator::BangNot => (C::Not(Box::new(x)), SqlType::BOOL),
                    other => return Err(SqlError::unsupported(format!("operator {other}"))),
                }
            }
            Expr::BinaryOp { left, op, right } if is_row(left) || is_row(right) => {
                self.compile(&row_comparison(left, op, right)?)?
            }
            Expr::InList { expr, list, negated } if is_row(expr) => {
                // (a, b) IN ((1, 2), (3, 4)): a disjunction of row equalities.
                let mut any: Option<Expr> = None;
                for item in list {
                    let eq = row_comparison(expr, &ast::BinaryOperator::Eq, item)?;
                    any = Some(match any {
                        None => eq,
                        Some(prev) => or(prev, eq),
                    });
                }
                let any = any.ok_or_else(|| SqlError::parse("empty IN list"))?;
                let e =
                    if *negated { Expr::UnaryOp { op: UnaryOperator::Not, expr: Box::new(nested(any)) } } else { any };
                self.compile(&e)?
            }
            Expr::BinaryOp { left, op, right } => self.binary(left, op, right)?,
            Expr::IsNull(x) => (C::IsNull(Box::new(self.compile(x)?.0), false), SqlType::BOOL),
            Expr::IsNotNull(x) => (C::IsNull(Box::new(self.compile(x)?.0), true), SqlType::BOOL),
            Expr::MemberOf(m) => self.call_fn(Func::JsonMemberOf, &[(*m.value).clone(), (*m.array).clone()])?,
            Expr::IsTrue(x) => (C::IsBool(Box::new(self.compile(x)?.0), true, false), SqlType::BOOL),
            Expr::IsNotTrue(x) => (C::IsBool(Box::new(self.compile(x)?.0), true, true), SqlType::BOOL),
            Expr::IsFalse(x) => (C::IsBool(Box::new(self.compile(x)?.0), false, false), SqlType::BOOL),
            Expr::IsNotFalse(x) => (C::IsBool(Box::new(self.compile(x)?.0), false, true), SqlType::BOOL),
            Expr::IsDistinctFrom(a, b2) | Expr::IsNotDistinctFrom(a, b2) => {
                let (x, tx) = self.compile(a)?;
                let (y, ty) = self.compile(b2)?;
                let eq = C::NullSafeEq(Box::new(x), Box::new(y), cmp_coll(&tx, &ty));
                let r = if matches!(e, Expr::IsDistinctFrom(..)) { C::Not(Box::new(eq)) } else { eq };
                (r, SqlType::BOOL)
            }
            Expr::InList { expr, list, negated } => {
                let (x, tx) = self.compile(expr)?;
                let mut items = Vec::with_capacity(list.len());
                let mut coll = if tx.is_string() { cmp_coll(&tx, &tx) } else { Coll::Ci };
                for it in list {
                    let (c, t) = self.compile(it)?;
                    if cmp_coll(&tx, &t) == Coll::Bin {
                        coll = Coll::Bin;
                    }
                    items.push(c);
                }
                (C::InList { expr: Box::new(x), list: items, negated: *negated, coll }, SqlType::BOOL)
            }
            // (a, b) IN (SELECT x, y ...): a row equal to some row of the subquery.
            Expr::InSubquery { expr, subquery, negated } if is_row(expr) => {
                let any = self.quantified(expr, CmpKind::Eq, false, subquery)?;
                (if *negated { C::Not(Box::new(any)) } else { any }, SqlType::BOOL)
            }
            // x op ANY / SOME / ALL (SELECT ...).
            Expr::AnyOp { left, compare_op, right, .. } | Expr::AllOp { left, compare_op, right } => {
                let Expr::Subquery(q) = right.as_ref() else {
                    return Err(SqlError::unsupported(format!("ANY / ALL over {right}")));
                };
                let op = match compare_op {
                    BinaryOperator::Eq => CmpKind::Eq,
                    BinaryOperator::NotEq => CmpKind::Ne,
                    BinaryOperator::Lt => CmpKind::Lt,
                    BinaryOperator::LtEq => CmpKind::Le,
                    BinaryOperator::Gt => CmpKind::Gt,
                    BinaryOperator::GtEq => CmpKind::Ge,
                    other => return Err(SqlError::parse(format!("operator {other} before ANY / ALL"))),
                };
                (self.quantified(left, op, matches!(e, Expr::AllOp { .. }), q)?, SqlType::BOOL)
            }
            Expr::InSubquery { expr, subquery, negated } => {
                let (x, tx) = self.compile(expr)?;
                let (sub, ts) = self.host.add_subquery(subquery, SubKind::In, self.scope)?;
                (C::InSub { expr: Box::new(x), sub, negated: *negated, coll: cmp_coll(&tx, &ts) }, SqlType::BOOL)
            }
            Expr::Exists { subquery, negated } => {
                let (sub, _) = self.host.add_subquery(subquery, SubKind::Exists, self.scope)?;
                (C::Exists { sub, negated: *negated }, SqlType::BOOL)
            }
            Expr::Subquery(q) => {
                let (sub, t) = self.host.add_subquery(q, SubKind::Scalar, self.scope)?;
                (C::ScalarSub(sub), t)
            }
            Expr::Between { expr, negated, low, high } => {
                let (x, tx) = self.compile(expr)?;
                let (l, tl) = self.compile(low)?;
                let (h, th) = self.compile(high)?;
                let coll = if cmp_coll(&tx, &tl) == Coll::Bin || cmp_coll(&tx, &th) == Coll::Bin {
                    Coll::Bin
                } else {
                    Coll::Ci
                };
                (
                    C::Between { expr: Box::new(x), low: Box::new(l), high: Box::new(h), negated: *negated, coll },
                    SqlType::BOOL,
                )
            }
            Expr::Like { negated, expr, pattern, escape_char, any: false }
            | Expr::ILike { negated, expr, pattern, escape_char, any: false } => {
                let (x, tx) = self.compile(expr)?;
                let (p, tp) = self.compile(pattern)?;
                let escape = match escape_char.as_deref() {
                    Some(Expr::Value(v)) => match &v.value {
                        ast::Value::SingleQuotedString(s) => s.bytes().next().unwrap_or(b'\\'),
                        _ => b'\\',
                    },
                    _ => b'\\',
                };
                let coll = if matches!(e, Expr::ILike { .. }) { Coll::Ci } else { cmp_coll(&tx, &tp) };
                (C::Like { expr: Box::new(x), pattern: Box::new(p), escape, negated: *negated, coll }, SqlType::BOOL)
            }
            Expr::RLike { negated, expr, pattern, .. } => {
                let (x, tx) = self.compile(expr)?;
                let (p, tp) = self.compile(pattern)?;
                let m = C::Func(Func::RegexpLike, regexp_args(Func::RegexpLike, vec![x, p], &[tx, tp])?);
                (if *negated { C::Not(Box::new(m)) } else { m }, SqlType::BOOL)
            }
            Expr::Case { operand, conditions, else_result, .. } => {
                let mut types = Vec::new();
                let (op, top) = match operand {
                    Some(o) => {
                        let (c, t) = self.compile(o)?;
                        (Some(Box::new(c)), Some(t))
                    }
                    None => (None, None),
                };
                let mut coll = Coll::Ci;
                let mut whens = Vec::with_capacity(conditions.len());
                for cw in conditions {
                    let (w, tw) = self.compile(&cw.condition)?;
                    if let Some(t) = &top {
                        if cmp_coll(t, &tw) == Coll::Bin {
                            coll = Coll::Bin;
                        }
                    }
                    let (r, tr) = self.compile(&cw.result)?;
                    types.push(tr);
                    whens.push((w, r));
                }
                let else_ = match else_result {
                    Some(x) => {
                        let (c, t) = self.compile(x)?;
                        types.push(t);
                        Some(Box::new(c))
                    }
                    None => None,
                };
                (C::Case { operand: op, whens, else_, coll }, unify(&types))
            }
            Expr::Cast { expr, data_type, .. } | Expr::Convert { expr, data_type: Some(data_type), .. } => {
                let (x, tx) = self.compile(expr)?;
                let numeric = !matches!(
                    data_type,
                    ast::DataType::Char(_)
                        | ast::DataType::Varchar(_)
                        | ast::DataType::Binary(_)
                        | ast::DataType::Varbinary(_)
                        | ast::DataType::Text
                        | ast::DataType::Nvarchar(_)
                        | ast::DataType::Character(_)
                        | ast::DataType::Date
                        | ast::DataType::Datetime(_)
                        | ast::DataType::Time(..)
                        | ast::DataType::Timestamp(..)
                        | ast::DataType::JSON
                );
                let (x, tx) = if numeric { enum_number(self.scope, self.outer, x, tx) } else { (x, tx) };
                self.cast(x, tx, data_type)?
            }
            // CONVERT(x USING cs): strings are utf8mb4 throughout, so only
            // the string / binary distinction is left to make.
            Expr::Convert { expr, data_type: None, charset: Some(cs), .. }
                if matches!(
                    cs.to_string().to_ascii_lowercase().as_str(),
                    "utf8mb4" | "utf8" | "utf8mb3" | "binary"
                ) =>
            {
                let (x, tx) = self.compile(expr)?;
                let target = if cs.to_string().eq_ignore_ascii_case("binary") {
                    ast::DataType::Binary(None)
                } else {
                    ast::DataType::Char(None)
                };
                self.cast(x, tx, &target)?
            }
            Expr::Ceil { expr, .. } => self.call_fn(Func::Ceil, &[expr.as_ref().clone()])?,
            Expr::Floor { expr, .. } => self.call_fn(Func::Floor, &[expr.as_ref().clone()])?,
            Expr::Position { expr, r#in } => {
                self.call_fn(Func::Locate, &[expr.as_ref().clone(), r#in.as_ref().clone()])?
            }
            Expr::Substring { expr, substring_from, substring_for, .. } => {
                let mut args = vec![expr.as_ref().clone()];
                args.push(substring_from.as_deref().cloned().unwrap_or_else(|| num_expr(1)));
                if let Some(f) = substring_for {
                    args.push(f.as_ref().clone());
                }
                self.call_fn(Func::Substring, &args)?
            }
            Expr::Trim { trim_where, trim_what, expr, .. } => {
                let (x, t) = self.compile(expr)?;
                match trim_what {
                    None => {
                        let f = match trim_where {
                            Some(ast::TrimWhereField::Leading) => Func::LTrim,
                            Some(ast::TrimWhereField::Trailing) => Func::RTrim,
                            _ => Func::Trim,
                        };
                        (C::Func(f, vec![x]), t)
                    }
                    // TRIM([BOTH | LEADING | TRAILING] remstr FROM s): whole
                    // occurrences of remstr (a string, not a set of characters).
                    Some(what) => {
                        let (w, _) = self.compile(what)?;
                        let side = match trim_where {
                            Some(ast::TrimWhereField::Leading) => 1,
                            Some(ast::TrimWhereField::Trailing) => 2,
                            _ => 3,
                        };
                        (C::Func(Func::TrimStr, vec![x, w, C::Lit(Value::Int(side))]), t)
                    }
                }
            }
            // Compound units (YEAR_MONTH, DAY_SECOND, ...), MICROSECOND and
            // QUARTER: the parts as digits of one number, as MySQL.
            // A name the dialect let through that is no MySQL unit (or a
            // quoted one): MySQL's grammar refuses it.
            Expr::Extract { field: ast::DateTimeField::Custom(unit), .. }
                if unit.quote_style.is_some()
                    || (functions::extract_parts(&unit.value).is_none() && Unit::parse(&unit.value).is_none()) =>
            {
                return Err(crate::engine::error_map::parse_error_near(&format!("{unit} FROM")));
            }
            Expr::Extract { field, expr, .. } if functions::extract_parts(&field.to_string()).is_some() => {
                let (x, _) = self.compile(expr)?;
                let unit = C::Lit(Value::str(&field.to_string().to_ascii_uppercase()));
                (C::Func(Func::ExtractParts, vec![x, unit]), SqlType::new(TClass::Int))
            }
            Expr::Extract { field, expr, .. } => {
                let f = match unit_of(field)? {
                    Unit::Year => Func::Year,
                    Unit::Month => Func::Month,
                    Unit::Day => Func::Day,
                    Unit::Hour => Func::Hour,
                    Unit::Minute => Func::Minute,
                    Unit::Second => Func::Second,
                    _ => return Err(SqlError::unsupported(format!("EXTRACT({field})"))),
                };
                self.call_fn(f, &[expr.as_ref().clone()])?
            }
            Expr::Function(f) => self.function(f)?,
            Expr::Tuple(_) => return Err(SqlError::new(1241, "21000", "Operand should contain 1 column(s)")),
            Expr::Interval(_) => return Err(SqlError::parse("INTERVAL is only allowed with DATE_ADD/DATE_SUB or +/-")),
            other => return Err(SqlError::unsupported(format!("expression {other}"))),
        })
    }

    /// `DEFAULT(col)`: the column's default value. MySQL's grammar takes a
    /// column name only (anything else is a syntax error); a column without
    /// a default, or one that is not a table's column, is 1364 at compile
    /// time as in MySQL, whatever the rows.
    fn default_of(&mut self, args: &[&FunctionArgExpr]) -> Result<(CExpr, SqlType), SqlError> {
        let col = match args {
            [FunctionArgExpr::Expr(e @ (Expr::Identifier(_) | Expr::CompoundIdentifier(_)))] => e,
            _ => return Err(crate::engine::error_map::parse_error_near("DEFAULT(")),
        };
        let names: Vec<&str> = match col {
            Expr::Identifier(id) => vec![id.value.as_str()],
            Expr::CompoundIdentifier(p) => p.iter().map(|i| i.value.as_str()).collect(),
            _ => vec![],
        };
        let display = names.join(".");
        let (table, name) = match names.as_slice() {
            [n] => (None, *n),
            [t, n] | [_, t, n] => (Some(*t), *n),
            _ => return Err(unknown_column(&display, self.clause)),
        };
        // A correlated subquery may name an outer column: its default is a
        // constant like any other.
        let c = match self.scope.find(table, name) {
            Ok(Some(i)) => &self.scope.cols[i],
            Err(()) => {
                return Err(SqlError::new(1052, "23000", format!("Column '{display}' in {} is ambiguous", self.clause)))
            }
            Ok(None) => match self.outer.map(|o| (o, o.find(table, name))) {
                Some((o, Ok(Some(i)))) => &o.cols[i],
                _ => return Err(unknown_column(&display, self.clause)),
            },
        };
        match &c.default {
            Some(ColDefault::Const(v)) => Ok((CExpr::Lit(v.clone()), c.ty)),
            Some(ColDefault::Now) => Ok((CExpr::Func(Func::Now, vec![]), c.ty)),
            Some(ColDefault::Missing) | None => {
                Err(SqlError::new(1364, "HY000", format!("Field '{}' doesn't have a default value", c.name)))
            }
        }
    }

    fn call_fn(&mut self, f: Func, args: &[Expr]) -> Result<(CExpr, SqlType), SqlError> {
        let mut cs = Vec::with_capacity(args.len());
        let mut ts = Vec::with_capacity(args.len());
        for a in args {
            let (c, t) = self.compile(a)?;
            cs.push(c);
            ts.push(t);
        }
        let t = functions::ret_type(f, &ts);
        if matches!(f, Func::RegexpLike | Func::RegexpInstr | Func::RegexpSubstr | Func::RegexpReplace) {
            return Ok((CExpr::Func(f, regexp_args(f, cs, &ts)?), t));
        }
        if functions::is_json_fn(f) {
            push_json_args(&mut cs, &ts, functions::json_fns::embeds_values(f));
            if f == Func::JsonSearch && args.get(2).zip(ts.get(2)).is_some_and(|(a, t)| brings_ci_collation(a, t)) {
                if let Some(CExpr::Lit(Value::UInt(mask))) = cs.last_mut() {
                    *mask |= functions::json_fns::SEARCH_CI;
                }
            }
        }
        Ok((CExpr::Func(f, cs), t))
    }

    /// `left op ANY (q)` (or ALL): `left` is a value or a row (rows only
    /// with `=` / `<>`), compared with every row of the subquery.
    fn quantified(&mut self, left: &Expr, op: CmpKind, all: bool, q: &Query) -> Result<CExpr, SqlError> {
        let items: Vec<&Expr> = if is_row(left) { row_items(left).iter().collect() } else { vec![left] };
        if items.len() > 1 && !matches!(op, CmpKind::Eq | CmpKind::Ne) {
            return Err(SqlError::new(1241, "21000", "Operand should contain 1 column(s)"));
        }
        let mut exprs = Vec::with_capacity(items.len());
        let mut types = Vec::with_capacity(items.len());
        for it in items {
            let (x, t) = self.compile(it)?;
            exprs.push(x);
            types.push(t);
        }
        let (sub, col_types) = self.host.add_subquery(q, SubKind::Rows(exprs.len()), self.scope)?;
        // The subquery's first column's type is known here; a string
        // compared with it in binary if either side is binary.
        let colls = types
            .iter()
            .enumerate()
            .map(|(i, t)| if i == 0 { cmp_coll(t, &col_types) } else { cmp_coll(t, t) })
            .collect();
        Ok(CExpr::Quantified { exprs, sub, op, all, colls })
    }

    fn cast(&mut self, x: CExpr, tx: SqlType, dt: &ast::DataType) -> Result<(CExpr, SqlType), SqlError> {
        let name = dt.to_string().to_ascii_uppercase();
        let base = name.split('(').next().unwrap_or("").trim().to_string();
        let f = match base.as_str() {
            "SIGNED" | "SIGNED INTEGER" | "INT" | "INTEGER" | "BIGINT" => Func::CastSigned,
            "UNSIGNED" | "UNSIGNED INTEGER" | "INT UNSIGNED" | "BIGINT UNSIGNED" => Func::CastUnsigned,
            "CHAR" | "VARCHAR" | "NCHAR" | "TEXT" | "CHARACTER" => Func::CastChar,
            "BINARY" | "VARBINARY" | "BLOB" => Func::CastBinary,
            "DATE" => Func::CastDate,
            "DATETIME" | "TIMESTAMP" => Func::CastDateTime,
            "TIME" => Func::CastTime,
            "JSON" => {
                let t = functions::ret_type(Func::CastJson, &[tx]);
                return Ok((CExpr::Func(Func::CastJson, vec![x, CExpr::Lit(Value::UInt(tx.json as u64))]), t));
            }
            "DOUBLE" | "FLOAT" | "REAL" | "DOUBLE PRECISION" => Func::CastDouble,
            "DECIMAL" | "NUMERIC" | "DEC" => {
                let nums: Vec<i64> =
                    name.split(['(', ')', ',']).skip(1).filter_map(|s| s.trim().parse().ok()).collect();
                let p = nums.first().copied().unwrap_or(10);
                let s = nums.get(1).copied().unwrap_or(0);
                let t = SqlType { decimals: s as u8, len: p as u32 + 2, ..SqlType::new(TClass::Decimal) };
                return Ok((
                    CExpr::Func(Func::CastDecimal, vec![x, CExpr::Lit(Value::Int(p)), CExpr::Lit(Value::Int(s))]),
                    t,
                ));
            }
            _ => return Err(SqlError::unsupported(format!("CAST AS {name}"))),
        };
        let mut t = functions::ret_type(f, &[tx]);
        // CHAR(n) / BINARY(n): the value is cut to (or, binary, padded to) n.
        let length = match dt {
            ast::DataType::Char(Some(ast::CharacterLength::IntegerLength { length, .. }))
            | ast::DataType::Character(Some(ast::CharacterLength::IntegerLength { length, .. })) => Some(*length),
            ast::DataType::Binary(Some(n)) => Some(*n),
            _ => None,
        };
        if let (Some(n), Func::CastChar | Func::CastBinary) = (length, f) {
            let n = u32::try_from(n).map_err(|_| {
                SqlError::new(1074, "42000", "Column length too big for column 'cast' (max = 4294967295)")
            })?;
            t.len = n;
            return Ok((CExpr::Func(f, vec![x, CExpr::Lit(Value::Int(n as i64))]), t));
        }
        Ok((CExpr::Func(f, vec![x]), t))
    }

    fn binary(&mut self, left: &Expr, op: &BinaryOperator, right: &Expr) -> Result<(CExpr, SqlType), SqlError> {
        use BinaryOperator as B;
        // date +/- INTERVAL
        if matches!(op, B::Plus | B::Minus) {
            if let Expr::Interval(iv) = right {
                return self.date_add(left, iv, *op == B::Minus);
            }
            if let (Expr::Interval(iv), B::Plus) = (left, op) {
                return self.date_add(right, iv, false);
            }
        }
        let (mut l, mut tl) = self.compile(left)?;
        let (mut r, mut tr) = self.compile(right)?;
        // ENUM / SET: numbers in arithmetic and against numbers, strings otherwise.
        let arith = matches!(
            op,
            B::Plus | B::Minus | B::Multiply | B::Divide | B::Modulo | B::MyIntegerDivide | B::DuckIntegerDivide
        );
        if arith || tr.is_numeric() {
            (l, tl) = enum_number(self.scope, self.outer, l, tl);
        }
        if arith || tl.is_numeric() {
            (r, tr) = enum_number(self.scope, self.outer, r, tr);
        }
        let int = SqlType::BOOL;
        let cmp = |k: CmpKind| (CExpr::Cmp(k, Box::new(l.clone()), Box::new(r.clone()), cmp_coll(&tl, &tr)), int);
        Ok(match op {
            B::Eq => cmp(CmpKind::Eq),
            B::NotEq => cmp(CmpKind::Ne),
            B::Lt => cmp(CmpKind::Lt),
            B::LtEq => cmp(CmpKind::Le),
            B::Gt => cmp(CmpKind::Gt),
            B::GtEq => cmp(CmpKind::Ge),
            B::Spaceship => (CExpr::NullSafeEq(Box::new(l), Box::new(r), cmp_coll(&tl, &tr)), int),
            B::And => (CExpr::And(Box::new(l), Box::new(r)), int),
            B::Or => (CExpr::Or(Box::new(l), Box::new(r)), int),
            B::Xor => (CExpr::Xor(Box::new(l), Box::new(r)), int),
            B::Plus | B::Minus | B::Multiply | B::Divide | B::Modulo | B::MyIntegerDivide | B::DuckIntegerDivide => {
                let aop = match op {
                    B::Plus => ArithOp::Add,
                    B::Minus => ArithOp::Sub,
                    B::Multiply => ArithOp::Mul,
                    B::Divide => ArithOp::Div,
                    B::Modulo => ArithOp::Mod,
                    _ => ArithOp::IntDiv,
                };
                let t = arith_type(aop, &tl, &tr);
                (CExpr::Arith(aop, Box::new(l), Box::new(r)), t)
            }
            B::StringConcat => (CExpr::Or(Box::new(l), Box::new(r)), int),
            // Bitwise operators work on 64-bit unsigned integers, as MySQL's.
            B::BitwiseAnd | B::BitwiseOr | B::BitwiseXor | B::PGBitwiseShiftLeft | B::PGBitwiseShiftRight => {
                let f = match op {
                    B::BitwiseAnd => Func::BitAndOp,
                    B::BitwiseOr => Func::BitOrOp,
                    B::BitwiseXor => Func::BitXorOp,
                    B::PGBitwiseShiftLeft => Func::ShiftLeftOp,
                    _ => Func::ShiftRightOp,
                };
                (CExpr::Func(f, vec![l, r]), SqlType::new(TClass::UInt))
            }
            // col->'$.path' is JSON_EXTRACT, col->>'$.path' JSON_UNQUOTE(JSON_EXTRACT(..)).
            B::Arrow | B::LongArrow => {
                let mask = CExpr::Lit(Value::UInt(tl.json as u64));
                let ex = CExpr::Func(Func::JsonExtract, vec![l, r, mask]);
                let jt = functions::ret_type(Func::JsonExtract, &[]);
                if *op == B::Arrow {
                    (ex, jt)
                } else {
                    let ut = functions::ret_type(Func::JsonUnquote, &[]);
                    (CExpr::Func(Func::JsonUnquote, vec![ex, CExpr::Lit(Value::UInt(1))]), ut)
                }
            }
            other => return Err(SqlError::unsupported(format!("operator {other}"))),
        })
    }

    fn date_add(&mut self, date: &Expr, iv: &ast::Interval, sub: bool) -> Result<(CExpr, SqlType), SqlError> {
        let (d, td) = self.compile(date)?;
        let (n, _) = self.compile(&iv.value)?;
        let unit = match &iv.leading_field {
            Some(f) => unit_of(f)?,
            None => Unit::Day,
        };
        let f = if sub { Func::DateSub } else { Func::DateAdd };
        let t = functions::ret_type(f, &[td]);
        Ok((CExpr::Func(f, vec![d, n, CExpr::Lit(Value::Int(functions::unit_code(unit)))]), t))
    }

    fn function(&mut self, f: &ast::Function) -> Result<(CExpr, SqlType), SqlError> {
        let name = f.name.0.last().map(|p| p.to_string()).unwrap_or_default().to_ascii_lowercase();
        let clauses: &[ast::FunctionArgumentClause] = match &f.args {
            FunctionArguments::List(l) => &l.clauses,
            _ => &[],
        };
        let (args, distinct): (Vec<&FunctionArgExpr>, bool) = match &f.args {
            FunctionArguments::None => (Vec::new(), false),
            FunctionArguments::Subquery(_) => return Err(SqlError::unsupported("subquery as a function argument")),
            FunctionArguments::List(l) => (
                l.args
                    .iter()
                    .map(|a| match a {
                        FunctionArg::Unnamed(x)
                        | FunctionArg::Named { arg: x, .. }
                        | FunctionArg::ExprNamed { arg: x, .. } => x,
                    })
                    .collect(),
                matches!(l.duplicate_treatment, Some(DuplicateTreatment::Distinct)),
            ),
        };
        if f.over.is_some() {
            return crate::engine::window::compile_call(self, f, &name, &args, distinct, clauses);
        }
        if let Some(kind) = agg_kind(&name) {
            return self.aggregate(kind, &args, distinct, clauses, &name);
        }
        if name == "grouping" && clauses.is_empty() && !distinct {
            let exprs: Vec<Expr> = args
                .iter()
                .map(|a| match a {
                    FunctionArgExpr::Expr(e) => Ok(e.clone()),
                    _ => Err(crate::engine::error_map::parse_error_near("*")),
                })
                .collect::<Result<_, _>>()?;
            return crate::engine::rollup::compile_call(self, &exprs);
        }
        if let Some(var) = crate::engine::found_rows::function_var(&name) {
            if !args.is_empty() {
                return Err(SqlError::new(
                    1582,
                    "42000",
                    format!("Incorrect parameter count in the call to native function '{name}'"),
                ));
            }
            return Ok((CExpr::SysVar(self.host.sysvar(var, false)), SqlType::new(TClass::Int)));
        }
        if let Some(c) = clauses.first() {
            return Err(SqlError::parse(format!("'{c}' is not allowed in {name}()")));
        }
        if name == "default" && !distinct {
            return self.default_of(&args);
        }
        let exprs: Vec<Expr> = args
            .iter()
            .map(|a| match a {
                FunctionArgExpr::Expr(e) => Ok(e.clone()),
                _ => Err(SqlError::parse(format!("'*' is not allowed in {name}()"))),
            })
            .collect::<Result<_, _>>()?;
        // Lazy control functions.
        match name.as_str() {
            "ifnull" | "coalesce" => {
                if (name == "ifnull" && exprs.len() != 2) || exprs.is_empty() {
                    return Err(wrong_args(&name));
                }
                let mut cs = Vec::new();
                let mut ts = Vec::new();
                for x in &exprs {
                    let (c, t) = self.compile(x)?;
                    cs.push(c);
                    ts.push(t);
                }
                return Ok((CExpr::Coalesce(cs), unify(&ts)));
            }
            "if" => {
                if exprs.len() != 3 {
                    return Err(wrong_args(&name));
                }
                let (c, _) = self.compile(&exprs[0])?;
                let (a, ta) = self.compile(&exprs[1])?;
                let (b, tb) = self.compile(&exprs[2])?;
                return Ok((
                    CExpr::Case { operand: None, whens: vec![(c, a)], else_: Some(Box::new(b)), coll: Coll::Ci },
                    unify(&[ta, tb]),
                ));
            }
            "timestampdiff" | "timestampadd" => {
                // The first argument is a unit keyword, not an expression.
                let unit = match exprs.first() {
                    Some(Expr::Identifier(id)) => Unit::parse(&id.value),
                    _ => None,
                };
                let (Some(unit), 3) = (unit, exprs.len()) else { return Err(wrong_args(&name)) };
                let code = CExpr::Lit(Value::Int(functions::unit_code(unit)));
                let (a, _) = self.compile(&exprs[1])?;
                let (b, tb) = self.compile(&exprs[2])?;
                if name == "timestampdiff" {
                    return Ok((CExpr::Func(Func::TimestampDiff, vec![code, a, b]), SqlType::new(TClass::Int)));
                }
                // TIMESTAMPADD(unit, n, d) is DATE_ADD(d, INTERVAL n unit).
                let t = functions::ret_type(Func::DateAdd, &[tb]);
                return Ok((CExpr::Func(Func::DateAdd, vec![b, a, code]), t));
            }
            "str_to_date" if exprs.len() == 2 => {
                let (r, mut t) = self.call_fn(Func::StrToDate, &exprs)?;
                if let CExpr::Func(_, args) = &r {
                    if let Some(CExpr::Lit(Value::Bytes(fmt))) = args.get(1) {
                        t = SqlType::new(functions::str_to_date_class(fmt));
                    }
                }
                return Ok((r, t));
            }
            "date_add" | "date_sub" | "adddate" | "subdate" if exprs.len() == 2 => {
                let sub = name == "date_sub" || name == "subdate";
                if let Expr::Interval(iv) = &exprs[1] {
                    return self.date_add(&exprs[0], iv, sub);
                }
                // ADDDATE(d, n): days.
                let (d, td) = self.compile(&exprs[0])?;
                let (n, _) = self.compile(&exprs[1])?;
                let fx = if sub { Func::DateSub } else { Func::DateAdd };
                let t = functions::ret_type(fx, &[td]);
                return Ok((CExpr::Func(fx, vec![d, n, CExpr::Lit(Value::Int(4))]), t));
            }
            _ => {}
        }
        let Some((func, min, max)) = functions::lookup(&name) else {
            return Err(SqlError::new(1305, "42000", format!("FUNCTION {name} does not exist")));
        };
        if exprs.len() < min || exprs.len() > max {
            return Err(wrong_args(&name));
        }
        self.call_fn(func, &exprs)
    }

    fn aggregate(
        &mut self,
        kind: AggKind,
        args: &[&FunctionArgExpr],
        distinct: bool,
        clauses: &[ast::FunctionArgumentClause],
        name: &str,
    ) -> Result<(CExpr, SqlType), SqlError> {
        if self.aggs.is_none() {
            return Err(SqlError::new(1111, "HY000", "Invalid use of group function"));
        }
        if distinct && matches!(kind, AggKind::JsonArrayAgg | AggKind::JsonObjectAgg) {
            // MySQL's grammar takes only [ALL] here: DISTINCT is a syntax error.
            return Err(SqlError::parse(format!(
                "You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near 'DISTINCT' in {name}()"
            )));
        }
        let mut order = Vec::new();
        let mut separator = b",".to_vec();
        for c in clauses {
            match (kind, c) {
                (AggKind::GroupConcat, ast::FunctionArgumentClause::OrderBy(keys)) => {
                    // Keys are evaluated on source rows, like the argument.
                    let saved = self.aggs.take();
                    let r: Result<Vec<_>, SqlError> = keys
                        .iter()
                        .map(|k| {
                            let (e, t) = self.compile(&k.expr)?;
                            Ok((e, matches!(k.options.sort, Some(ast::OrderBySort::Desc)), t.coll))
                        })
                        .collect();
                    self.aggs = saved;
                    order = r?;
                }
                (AggKind::GroupConcat, ast::FunctionArgumentClause::Separator(v)) => match &v.value {
                    ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => {
                        separator = s.as_bytes().to_vec()
                    }
                    other => return Err(SqlError::parse(format!("SEPARATOR must be a string, not {other}"))),
                },
                (_, other) => return Err(SqlError::parse(format!("'{other}' is not allowed in {name}()"))),
            }
        }
        let (kind, arg, ty, coll) = match (kind, args) {
            (AggKind::Count, [FunctionArgExpr::Wildcard]) => {
                (AggKind::CountStar, None, SqlType::new(TClass::Int), Coll::Ci)
            }
            (AggKind::JsonArrayAgg | AggKind::JsonObjectAgg, _) => {
                let exprs = args
                    .iter()
                    .map(|a| match a {
                        FunctionArgExpr::Expr(e) => Ok(e.clone()),
                        _ => Err(wrong_args(name)),
                    })
                    .collect::<Result<Vec<Expr>, SqlError>>()?;
                let saved = self.aggs.take();
                let r = self.json_agg_arg(kind, &exprs, name);
                self.aggs = saved;
                (kind, Some(r?), agg_result_type(kind, SqlType::new(TClass::Str)), Coll::Bin)
            }
            (_, [FunctionArgExpr::Expr(x)]) => {
                // An aggregate's argument is evaluated on source rows: no nested aggregates.
                let saved = self.aggs.take();
                let r = self.compile(x);
                self.aggs = saved;
                let (c, t) = r?;
                let ty = agg_result_type(kind, t);
                (kind, Some(c), ty, cmp_coll(&t, &t))
            }
            (AggKind::Count, many) if distinct && many.len() > 1 => {
                // COUNT(DISTINCT a, b): distinct tuples without a NULL, counted
                // by one key value per row (see `Func::DistinctKey`).
                let saved = self.aggs.take();
                let r: Result<Vec<(CExpr, SqlType)>, SqlError> = many
                    .iter()
                    .map(|a| match a {
                        FunctionArgExpr::Expr(e) => self.compile(e),
                        _ => Err(wrong_args(name)),
                    })
                    .collect();
                self.aggs = saved;
                let parts = r?;
                let kinds: Vec<u8> = parts.iter().map(|(_, t)| if t.coll == Coll::Bin { b'b' } else { b'c' }).collect();
                let mut key: Vec<CExpr> = parts.into_iter().map(|(c, _)| c).collect();
                key.push(CExpr::Lit(Value::Bytes(kinds)));
                (AggKind::Count, Some(CExpr::Func(Func::DistinctKey, key)), SqlType::new(TClass::Int), Coll::Bin)
            }
            (AggKind::GroupConcat, many) if !many.is_empty() => {
                // GROUP_CONCAT(a, b, ...) concatenates its arguments.
                let exprs: Vec<Expr> = many
                    .iter()
                    .filter_map(|a| match a {
                        FunctionArgExpr::Expr(e) => Some(e.clone()),
                        _ => None,
                    })
                    .collect();
                let saved = self.aggs.take();
                let r = self.call_fn(Func::Concat, &exprs);
                self.aggs = saved;
                (kind, Some(r?.0), SqlType::new(TClass::Str), Coll::Ci)
            }
            _ => return Err(wrong_args(name)),
        };
        let aggs = self.aggs.as_mut().ok_or_else(|| SqlError::internal("aggregates"))?;
        let spec = AggSpec { kind, arg, distinct, coll, ty, order, separator };
        let k = match aggs.iter().position(|a| *a == spec) {
            Some(k) => k,
            None => {
                aggs.push(spec);
                aggs.len() - 1
            }
        };
        Ok((CExpr::Col(self.agg_base + k), ty))
    }

    /// The per-row argument of JSON_ARRAYAGG / JSON_OBJECTAGG (see `AggKind`).
    pub(crate) fn json_agg_arg(&mut self, kind: AggKind, exprs: &[Expr], name: &str) -> Result<CExpr, SqlError> {
        let mut cs = Vec::with_capacity(exprs.len());
        let mut ts = Vec::with_capacity(exprs.len());
        for e in exprs {
            let (c, t) = self.compile(e)?;
            cs.push(c);
            ts.push(t);
        }
        json_agg_wrap(kind, cs, &ts, name)
    }
}

/// A JSON aggregate's compiled arguments as one expression: a one-element
/// JSON_ARRAY or JSON_OBJECT, with the JSON-type mask JSON functions take.
pub(crate) fn json_agg_wrap(
    kind: AggKind,
    mut args: Vec<CExpr>,
    types: &[SqlType],
    name: &str,
) -> Result<CExpr, SqlError> {
    let (f, n) = match kind {
        AggKind::JsonArrayAgg => (Func::JsonArray, 1),
        _ => (Func::JsonObject, 2),
    };
    if args.len() != n {
        // A fixed arity in MySQL's grammar, so a syntax error (not 1582).
        return Err(SqlError::parse(format!("You have an error in your SQL syntax; {name}() takes {n} argument(s)")));
    }
    push_json_args(&mut args, types, true);
    Ok(CExpr::Func(f, args))
}

/// A JSON function's compiled arguments as it takes them: with the mask of
/// the ones that are JSON values (embedded as JSON, not as strings) pushed
/// last. Where the function embeds values (`embeds`), a truth value becomes
/// the JSON literal `true` / `false` (NULL stays NULL) and counts as JSON:
/// `JSON_OBJECT('ok', a > 0)` is `{"ok": true}` in MySQL, not 1.
fn push_json_args(args: &mut Vec<CExpr>, types: &[SqlType], embeds: bool) {
    let mut mask = 0u64;
    for (i, (c, t)) in args.iter_mut().zip(types).enumerate().take(64) {
        if embeds && t.boolean {
            let x = std::mem::replace(c, CExpr::Lit(Value::Null));
            *c = CExpr::Case {
                operand: Some(Box::new(x)),
                whens: vec![
                    (CExpr::Lit(Value::Int(0)), CExpr::Lit(Value::str("false"))),
                    (CExpr::Lit(Value::Int(1)), CExpr::Lit(Value::str("true"))),
                ],
                else_: None,
                coll: Coll::Bin,
            };
        }
        if t.json || (embeds && t.boolean) {
            mask |= 1 << i;
        }
    }
    args.push(CExpr::Lit(Value::UInt(mask)));
}

/// The result type of aggregate `kind` over an argument of type `t` (also
/// the type of the aggregate used as a window function).
pub(crate) fn agg_result_type(kind: AggKind, t: SqlType) -> SqlType {
    match kind {
        AggKind::Count => SqlType::new(TClass::Int),
        AggKind::Sum => match t.class {
            TClass::Int | TClass::UInt | TClass::Decimal => {
                SqlType { decimals: t.decimals, ..SqlType::new(TClass::Decimal) }
            }
            _ => SqlType { decimals: 31, ..SqlType::new(TClass::Double) },
        },
        AggKind::Avg => match t.class {
            TClass::Int | TClass::UInt | TClass::Decimal => {
                SqlType { decimals: t.decimals + 4, ..SqlType::new(TClass::Decimal) }
            }
            _ => SqlType { decimals: 31, ..SqlType::new(TClass::Double) },
        },
        AggKind::Min | AggKind::Max => t,
        AggKind::GroupConcat => SqlType::new(TClass::Str),
        AggKind::BitAnd | AggKind::BitOr | AggKind::BitXor => SqlType::new(TClass::UInt),
        AggKind::CountStar => SqlType::new(TClass::Int),
        AggKind::StdPop | AggKind::StdSamp | AggKind::VarPop | AggKind::VarSamp => {
            SqlType { decimals: 31, ..SqlType::new(TClass::Double) }
        }
        AggKind::JsonArrayAgg | AggKind::JsonObjectAgg => {
            SqlType { json: true, coll: Coll::Bin, ..SqlType::new(TClass::Str) }
        }
    }
}

/// The comparison a collation name stands for: case-insensitive for the
/// `_ci` ones, byte order for `_bin`, `_cs` (the nearest we have) and
/// `binary`. Strings are utf8mb4: another character set's collation is
/// 1253, a name of none 1273, as in MySQL.
fn collation_of(name: &str) -> Result<Coll, SqlError> {
    let n = name.trim_matches('`').trim_matches('\'').to_ascii_lowercase();
    let utf8 = n.starts_with("utf8mb4_") || n.starts_with("utf8mb3_") || n.starts_with("utf8_");
    if n == "binary" {
        return Ok(Coll::Bin);
    }
    if !utf8 {
        const OTHER: [&str; 8] = ["latin1_", "ascii_", "latin2_", "cp1250_", "cp1251_", "ucs2_", "utf16_", "utf32_"];
        if OTHER.iter().any(|p| n.starts_with(p)) {
            return Err(SqlError::new(
                1253,
                "42000",
                format!("COLLATION '{n}' is not valid for CHARACTER SET 'utf8mb4'"),
            ));
        }
        return Err(SqlError::new(1273, "HY000", format!("Unknown collation: '{n}'")));
    }
    if n.ends_with("_ci") {
        Ok(Coll::Ci)
    } else if n.ends_with("_bin") || n.ends_with("_cs") {
        Ok(Coll::Bin)
    } else {
        Err(SqlError::new(1273, "HY000", format!("Unknown collation: '{n}'")))
    }
}

/// Whether `e` (of type `t`) imposes a case-insensitive collation on a
/// comparison with a literal: a character column, a user variable or a
/// `COLLATE ..._ci` does (MySQL's implicit and explicit derivations); a
/// literal, a parameter or a function of them does not (`json_fns::SEARCH_CI`).
fn brings_ci_collation(e: &Expr, t: &SqlType) -> bool {
    match e {
        Expr::Nested(x) => brings_ci_collation(x, t),
        Expr::Collate { .. } => t.coll == Coll::Ci,
        Expr::Identifier(id) if id.value.starts_with("@@") => false,
        Expr::Identifier(id) if id.value.starts_with('@') => true,
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) => t.is_string() && !t.json && t.coll == Coll::Ci,
        _ => false,
    }
}

fn is_row(e: &Expr) -> bool {
    match e {
        Expr::Tuple(_) => true,
        Expr::Nested(x) => is_row(x),
        _ => false,
    }
}

fn row_items(e: &Expr) -> &[Expr] {
    match e {
        Expr::Tuple(items) => items,
        Expr::Nested(x) => row_items(x),
        other => std::slice::from_ref(other),
    }
}

fn nested(e: Expr) -> Expr {
    Expr::Nested(Box::new(e))
}

fn and(a: Expr, b: Expr) -> Expr {
    Expr::BinaryOp { left: Box::new(nested(a)), op: ast::BinaryOperator::And, right: Box::new(nested(b)) }
}

fn or(a: Expr, b: Expr) -> Expr {
    Expr::BinaryOp { left: Box::new(nested(a)), op: ast::BinaryOperator::Or, right: Box::new(nested(b)) }
}

/// A comparison of row constructors, as scalar comparisons: `=` and `<=>` hold
/// when every pair does, `<>` when one pair differs, and `<`, `<=`, `>`, `>=`
/// compare lexicographically (the first unequal pair decides), as in MySQL.
fn row_comparison(left: &Expr, op: &ast::BinaryOperator, right: &Expr) -> Result<Expr, SqlError> {
    use ast::BinaryOperator as B;
    let (l, r) = (row_items(left), row_items(right));
    if l.len() != r.len() {
        return Err(SqlError::new(1241, "21000", format!("Operand should contain {} column(s)", l.len())));
    }
    let pair = |i: usize, op: B| Expr::BinaryOp { left: Box::new(l[i].clone()), op, right: Box::new(r[i].clone()) };
    let all = |op: B| (1..l.len()).fold(pair(0, op.clone()), |acc, i| and(acc, pair(i, op.clone())));
    Ok(match op {
        B::Eq | B::Spaceship => all(op.clone()),
        B::NotEq => Expr::UnaryOp { op: UnaryOperator::Not, expr: Box::new(nested(all(B::Eq))) },
        B::Lt | B::LtEq | B::Gt | B::GtEq => {
            let strict = if matches!(op, B::Lt | B::LtEq) { B::Lt } else { B::Gt };
            // From the last pair backwards: last uses `op`, earlier ones
            // `strict OR (equal AND rest)`.
            let last = l.len() - 1;
            let mut acc = pair(last, op.clone());
            for i in (0..last).rev() {
                acc = or(pair(i, strict.clone()), and(pair(i, B::Eq), acc));
            }
            acc
        }
        other => return Err(SqlError::new(1241, "21000", format!("Operand should contain 1 column(s) (row {other})"))),
    })
}

fn split_scope(name: &str) -> (bool, &str) {
    let lower = name.to_ascii_lowercase();
    if lower.starts_with("global.") {
        (true, &name[7..])
    } else if lower.starts_with("session.") {
        (false, &name[8..])
    } else if lower.starts_with("local.") {
        (false, &name[6..])
    } else {
        (false, name)
    }
}

/// The REGEXP_* functions' arguments in the one layout `functions::regexp`
/// reads: the optional ones the call left out filled with their defaults
/// (position 1, occurrence 1, or 0 = all for REGEXP_REPLACE, return option
/// 0, no match type), then the subject's and pattern's case sensitivity:
/// "c" when a binary string takes part, as in MySQL, else "i".
fn regexp_args(f: Func, mut args: Vec<CExpr>, types: &[SqlType]) -> Result<Vec<CExpr>, SqlError> {
    if let (Some(a), Some(b)) = (types.first(), types.get(1)) {
        functions::regexp::check_charsets(f, a, b)?;
    }
    let lit = |v: Value| CExpr::Lit(v);
    let coll = match (types.first(), types.get(1)) {
        (Some(a), Some(b)) if cmp_coll(a, b) == Coll::Bin => "c",
        _ => "i",
    };
    // Defaults of the arguments after the required ones, in order.
    let defaults: Vec<Value> = match f {
        Func::RegexpInstr => vec![Value::Int(1), Value::Int(1), Value::Int(0), Value::str("")],
        Func::RegexpSubstr => vec![Value::Int(1), Value::Int(1), Value::str("")],
        Func::RegexpReplace => vec![Value::Int(1), Value::Int(0), Value::str("")],
        _ => vec![Value::str("")],
    };
    let required = if f == Func::RegexpReplace { 3 } else { 2 };
    let given = args.len().saturating_sub(required);
    args.extend(defaults.into_iter().skip(given).map(lit));
    args.push(lit(Value::str(coll)));
    Ok(args)
}

pub(crate) fn wrong_args(name: &str) -> SqlError {
    SqlError::new(1582, "42000", format!("Incorrect parameter count in the call to native function '{name}'"))
}

fn num_expr(n: i64) -> Expr {
    Expr::value(ast::Value::Number(n.to_string(), false))
}

pub fn arith_type(op: ArithOp, a: &SqlType, b: &SqlType) -> SqlType {
    use TClass::*;
    let class = match (a.class, b.class) {
        (Double, _) | (_, Double) | (Str, _) | (_, Str) | (Bin, _) | (_, Bin) => Double,
        _ if op == ArithOp::IntDiv => Int,
        _ if op == ArithOp::Div => Decimal,
        (Decimal, _) | (_, Decimal) => Decimal,
        (UInt, _) | (_, UInt) => UInt,
        (Null, _) | (_, Null) => Int,
        _ => Int,
    };
    let decimals = match (class, op) {
        (Decimal, ArithOp::Div) => a.decimals + super::value::DIV_PRECISION_INCREMENT,
        (Decimal, ArithOp::Mul) => a.decimals + b.decimals,
        (Decimal, _) => a.decimals.max(b.decimals),
        (Double, _) => 31,
        _ => 0,
    };
    SqlType { class, coll: Coll::Ci, decimals, len: 0, json: false, boolean: false }
}

/// A literal value of the AST.
pub fn literal(v: &ast::Value) -> Result<Value, SqlError> {
    Ok(match v {
        ast::Value::Number(s, _) => num_literal(s)?,
        ast::Value::SingleQuotedString(s)
        | ast::Value::DoubleQuotedString(s)
        | ast::Value::NationalStringLiteral(s)
        | ast::Value::EscapedStringLiteral(s)
        | ast::Value::DoubleQuotedByteStringLiteral(s) => Value::Bytes(s.as_bytes().to_vec()),
        ast::Value::SingleQuotedByteStringLiteral(s) => match crate::engine::parse_ext::bit_literal(s) {
            Some(v) => v,
            None => Value::Bytes(s.as_bytes().to_vec()),
        },
        ast::Value::HexStringLiteral(h) => {
            Value::Bytes(hex_decode(h).ok_or_else(|| SqlError::parse(format!("bad hex literal X'{h}'")))?)
        }
        ast::Value::Boolean(b) => Value::Int(*b as i64),
        ast::Value::Null => Value::Null,
        other => return Err(SqlError::unsupported(format!("literal {other}"))),
    })
}

/// Name MySQL gives an unaliased select expression: its text.
pub fn expr_display_name(e: &Expr) -> String {
    match e {
        // `SELECT (a)` is named `a` as MySQL does (a column, a string or
        // NULL keeps its own name inside parentheses).
        Expr::Nested(x) if named_by_value(x) => expr_display_name(x),
        Expr::Identifier(i) => i.value.clone(),
        Expr::CompoundIdentifier(p) => p.last().map(|i| i.value.clone()).unwrap_or_default(),
        Expr::Value(v) => match &v.value {
            ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => s.clone(),
            _ => e.to_string(),
        },
        _ => e.to_string(),
    }
}

/// Whether a select item `e` is named after what it is (a column's name, a
/// string's value, `NULL`) rather than after its text, as MySQL names items.
pub fn named_by_value(e: &Expr) -> bool {
    match e {
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) => true,
        Expr::Nested(x) => named_by_value(x),
        Expr::Value(v) => matches!(
            v.value,
            ast::Value::SingleQuotedString(_)
                | ast::Value::DoubleQuotedString(_)
                | ast::Value::NationalStringLiteral(_)
                | ast::Value::Null
        ),
        _ => false,
    }
}

pub fn ident_of(e: &Expr) -> Option<String> {
    ident_name(e)
}

/// The UTC_* function an unquoted identifier names, if any.
fn utc_niladic(name: &str) -> Option<Func> {
    if name.eq_ignore_ascii_case("utc_timestamp") {
        Some(Func::UtcTimestamp)
    } else if name.eq_ignore_ascii_case("utc_date") {
        Some(Func::UtcDate)
    } else if name.eq_ignore_ascii_case("utc_time") {
        Some(Func::UtcTime)
    } else if name.eq_ignore_ascii_case("current_user") {
        // Also a reserved word MySQL takes without parentheses.
        Some(Func::CurrentUser)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::dialect::NorrMySql;
    use crate::engine::expr::{eval, EvalCtx};
    use sqlparser::parser::Parser;

    struct NoSubs;
    impl SubqueryHost for NoSubs {
        fn add_subquery(&mut self, _q: &Query, _k: SubKind, _o: &Scope) -> Result<(usize, SqlType), SqlError> {
            Err(SqlError::unsupported("subquery"))
        }
        fn sysvar(&mut self, _n: &str, _g: bool) -> usize {
            0
        }
        fn uservar(&mut self, _n: &str) -> usize {
            0
        }
    }

    /// Compile and evaluate `expr` against row (a INT, b VARCHAR ci, c VARBINARY).
    pub fn ev_params(sql: &str, row: &[Value], params: &[Value]) -> Result<Value, SqlError> {
        let e = Parser::new(&NorrMySql).try_with_sql(sql).unwrap().parse_expr().unwrap();
        let scope = Scope {
            cols: vec![
                ScopeCol {
                    table: "t".into(),
                    name: "a".into(),
                    ty: SqlType::new(TClass::Int),
                    enums: None,
                    default: None,
                },
                ScopeCol {
                    table: "t".into(),
                    name: "b".into(),
                    ty: SqlType::new(TClass::Str),
                    enums: None,
                    default: None,
                },
                ScopeCol {
                    table: "t".into(),
                    name: "c".into(),
                    ty: SqlType { coll: Coll::Bin, ..SqlType::new(TClass::Bin) },
                    enums: None,
                    default: None,
                },
            ],
            merged: vec![],
        };
        let pm = ParamMap::from_statement(&e);
        let mut host = NoSubs;
        let mut c = Compiler::plain(&scope, None, &pm, "field list", &mut host);
        let (ce, _) = c.compile(&e)?;
        let mut ctx = EvalCtx::new(params);
        eval(&ce, row, &mut ctx)
    }

    fn ev(sql: &str) -> Value {
        ev_params(sql, &[Value::Int(5), Value::str("Hello"), Value::str("Hello")], &[]).unwrap()
    }

    #[test]
    fn arithmetic_and_comparison() {
        assert_eq!(ev("1 + 2 * 3"), Value::Int(7));
        assert_eq!(ev("a * 2"), Value::Int(10));
        assert_eq!(ev("7 / 2"), Value::Decimal(norr_signals::Decimal { mantissa: 35000, scale: 4 }));
        assert_eq!(ev("7 DIV 2"), Value::Int(3));
        assert_eq!(ev("7 % 3"), Value::Int(1));
        assert_eq!(ev("1.5 + 1"), Value::Decimal(norr_signals::Decimal { mantissa: 25, scale: 1 }));
        assert_eq!(ev("1e1 + 1"), Value::Double(11.0));
        assert_eq!(ev("'3' + 4"), Value::Double(7.0));
        assert_eq!(ev("-a"), Value::Int(-5));
        assert_eq!(ev("b = 'hello'"), Value::Int(1));
        assert_eq!(ev("c = 'hello'"), Value::Int(0));
        assert_eq!(ev("a BETWEEN 1 AND 5"), Value::Int(1));
        assert_eq!(ev("a IN (1, 2, 5)"), Value::Int(1));
        assert_eq!(ev("a NOT IN (1, 2)"), Value::Int(1));
        assert_eq!(ev("NULL = NULL"), Value::Null);
        assert_eq!(ev("NULL <=> NULL"), Value::Int(1));
        assert_eq!(ev("b LIKE 'h%'"), Value::Int(1));
        assert_eq!(ev("b IS NOT NULL"), Value::Int(1));
        assert_eq!(ev("9223372036854775807 + 0"), Value::Int(i64::MAX));
        let e = ev_params("9223372036854775807 + 1", &[], &[]).unwrap_err();
        assert_eq!(e.code, 1690);
        assert_eq!(e.message, "BIGINT value is out of range in '(9223372036854775807 + 1)'");
        assert_eq!(ev("-9223372036854775808"), Value::Int(i64::MIN));
    }

    #[test]
    fn functions_and_case() {
        assert_eq!(ev("CASE WHEN a > 3 THEN 'big' ELSE 'small' END"), Value::str("big"));
        assert_eq!(ev("CASE a WHEN 1 THEN 'one' WHEN 5 THEN 'five' END"), Value::str("five"));
        assert_eq!(ev("IFNULL(NULL, 3)"), Value::Int(3));
        assert_eq!(ev("COALESCE(NULL, NULL, 'x')"), Value::str("x"));
        assert_eq!(ev("IF(a = 5, 'y', 'n')"), Value::str("y"));
        assert_eq!(ev("NULLIF(1, 1)"), Value::Null);
        assert_eq!(ev("CONCAT(b, '-', a)"), Value::str("Hello-5"));
        assert_eq!(ev("UPPER(b)"), Value::str("HELLO"));
        assert_eq!(ev("SUBSTRING(b, 2, 3)"), Value::str("ell"));
        assert_eq!(ev("SUBSTRING(b FROM 2 FOR 3)"), Value::str("ell"));
        assert_eq!(ev("CAST('42' AS SIGNED)"), Value::Int(42));
        assert_eq!(ev("CAST(a AS CHAR)"), Value::str("5"));
        assert_eq!(
            ev("DATE_ADD('2024-01-31', INTERVAL 1 MONTH)"),
            Value::Date(norr_signals::Date { year: 2024, month: 2, day: 29 })
        );
        assert_eq!(ev("YEAR(DATE '2020-05-06')"), Value::Int(2020));
        assert_eq!(
            ev("DATE '2020-05-06' + INTERVAL 1 DAY"),
            Value::Date(norr_signals::Date { year: 2020, month: 5, day: 7 })
        );
        assert_eq!(ev("ABS(-3) + FLOOR(2.7) + CEIL(2.1)"), Value::Int(8));
        assert_eq!(ev("ROUND(2.567, 2)"), Value::Decimal(norr_signals::Decimal { mantissa: 257, scale: 2 }));
        assert_eq!(ev("GREATEST(1, 5, 3)"), Value::Int(5));
    }

    #[test]
    fn params_are_numbered_in_text_order() {
        let v = ev_params("? - ?", &[], &[Value::Int(10), Value::Int(3)]).unwrap();
        assert_eq!(v, Value::Int(7));
    }

    #[test]
    fn errors() {
        assert_eq!(ev_params("zz + 1", &[], &[]).unwrap_err().code, 1054);
        assert_eq!(ev_params("NOSUCHFN(1)", &[], &[]).unwrap_err().code, 1305);
        assert_eq!(ev_params("COUNT(*)", &[], &[]).unwrap_err().code, 1111);
    }
}
