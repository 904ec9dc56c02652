//! Compiled expressions and their evaluation.
//!
//! `compile` turns a sqlparser `Expr` into a `CExpr` whose column references
//! are offsets into the row being evaluated and whose `?` placeholders are
//! parameter numbers, so a compiled expression is independent of parameter
//! values (prepared statements compile once). `eval` computes a value with
//! MySQL semantics (see `value`).

pub mod compile;
pub mod datetime;
pub mod nullability;
pub mod value;

use crate::engine::functions::{self, Func};
use crate::types::{FieldType, SqlError};
use norr_signals::Value;
use std::cmp::Ordering;
use std::sync::Arc;
use value::{arith, bool_value, sql_cmp, to_bool, to_num, ArithOp, Coll, Warnings};

/// Evaluation class of an expression (decides comparison rules and metadata).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TClass {
    Int,
    UInt,
    Decimal,
    Double,
    /// Character string.
    Str,
    /// Binary string.
    Bin,
    Date,
    DateTime,
    Time,
    Null,
}

/// Static type of an expression: enough for result metadata and collation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqlType {
    pub class: TClass,
    pub coll: Coll,
    pub decimals: u8,
    /// Display length in characters (0 = unknown).
    pub len: u32,
    /// A JSON value (a JSON column or JSON function result): sent as
    /// MYSQL_TYPE_JSON, and embedded as JSON (not as a string) by JSON functions.
    pub json: bool,
    /// A truth value (a comparison, AND / OR / NOT, IS, IN, LIKE, TRUE):
    /// an integer 0 / 1 everywhere except in JSON functions, which embed it
    /// as JSON true / false, as MySQL does.
    pub boolean: bool,
}

impl SqlType {
    pub const fn new(class: TClass) -> SqlType {
        SqlType { class, coll: Coll::Ci, decimals: 0, len: 0, json: false, boolean: false }
    }

    /// The type of a truth value.
    pub const BOOL: SqlType = SqlType { boolean: true, ..SqlType::new(TClass::Int) };
    pub fn is_numeric(&self) -> bool {
        matches!(self.class, TClass::Int | TClass::UInt | TClass::Decimal | TClass::Double)
    }
    pub fn is_string(&self) -> bool {
        matches!(self.class, TClass::Str | TClass::Bin)
    }
    pub fn field_type(&self) -> FieldType {
        if self.json {
            return FieldType::Json;
        }
        match self.class {
            TClass::Int | TClass::UInt => FieldType::LongLong,
            TClass::Decimal => FieldType::NewDecimal,
            TClass::Double => FieldType::Double,
            TClass::Str | TClass::Bin => FieldType::VarString,
            TClass::Date => FieldType::Date,
            TClass::DateTime => FieldType::DateTime,
            TClass::Time => FieldType::Time,
            TClass::Null => FieldType::Null,
        }
    }
}

/// Collation for comparing two operands: binary if either side is binary.
pub fn cmp_coll(a: &SqlType, b: &SqlType) -> Coll {
    let bin = |t: &SqlType| t.class == TClass::Bin || (t.class == TClass::Str && t.coll == Coll::Bin);
    if bin(a) || bin(b) {
        Coll::Bin
    } else {
        Coll::Ci
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpKind {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpKind {
    pub fn test(self, o: Ordering) -> bool {
        match self {
            CmpKind::Eq => o == Ordering::Equal,
            CmpKind::Ne => o != Ordering::Equal,
            CmpKind::Lt => o == Ordering::Less,
            CmpKind::Le => o != Ordering::Greater,
            CmpKind::Gt => o == Ordering::Greater,
            CmpKind::Ge => o != Ordering::Less,
        }
    }
    /// The operator with its operands swapped (a < b  <=>  b > a).
    pub fn flip(self) -> CmpKind {
        match self {
            CmpKind::Lt => CmpKind::Gt,
            CmpKind::Le => CmpKind::Ge,
            CmpKind::Gt => CmpKind::Lt,
            CmpKind::Ge => CmpKind::Le,
            o => o,
        }
    }
}

/// Which kind of subquery result an expression reads.
#[derive(Debug, Clone, PartialEq)]
pub enum SubResult {
    Scalar(Value),
    Exists(bool),
    /// Values of the subquery's single column (for IN).
    Set {
        values: Vec<Value>,
        has_null: bool,
    },
    /// The subquery's rows (for `CExpr::Quantified`).
    Rows(Vec<Vec<Value>>),
    NotRun,
}

#[derive(Debug, Clone, PartialEq)]
pub enum CExpr {
    Lit(Value),
    Param(usize),
    Col(usize),
    /// Column of an enclosing query's current row (correlated subquery).
    Outer(usize),
    Neg(Box<CExpr>),
    Not(Box<CExpr>),
    Arith(ArithOp, Box<CExpr>, Box<CExpr>),
    Cmp(CmpKind, Box<CExpr>, Box<CExpr>, Coll),
    NullSafeEq(Box<CExpr>, Box<CExpr>, Coll),
    And(Box<CExpr>, Box<CExpr>),
    Or(Box<CExpr>, Box<CExpr>),
    Xor(Box<CExpr>, Box<CExpr>),
    IsNull(Box<CExpr>, bool),
    /// IS [NOT] TRUE / FALSE: (expr, want_true, negated).
    IsBool(Box<CExpr>, bool, bool),
    InList {
        expr: Box<CExpr>,
        list: Vec<CExpr>,
        negated: bool,
        coll: Coll,
    },
    InSub {
        expr: Box<CExpr>,
        sub: usize,
        negated: bool,
        coll: Coll,
    },
    Exists {
        sub: usize,
        negated: bool,
    },
    ScalarSub(usize),
    /// `exprs op ANY / ALL (subquery)` over the subquery's rows
    /// (`SubResult::Rows`), with SQL's three-valued logic: ANY is true if
    /// some row compares true, ALL if none compares false (so true over no
    /// rows), NULL where an unknown comparison leaves it open. Row `IN` is
    /// `= ANY`, `NOT IN` its negation.
    Quantified {
        exprs: Vec<CExpr>,
        sub: usize,
        op: CmpKind,
        all: bool,
        colls: Vec<Coll>,
    },
    Between {
        expr: Box<CExpr>,
        low: Box<CExpr>,
        high: Box<CExpr>,
        negated: bool,
        coll: Coll,
    },
    Like {
        expr: Box<CExpr>,
        pattern: Box<CExpr>,
        escape: u8,
        negated: bool,
        coll: Coll,
    },
    Case {
        operand: Option<Box<CExpr>>,
        whens: Vec<(CExpr, CExpr)>,
        else_: Option<Box<CExpr>>,
        coll: Coll,
    },
    Coalesce(Vec<CExpr>),
    Func(Func, Vec<CExpr>),
    /// Session / global system variable, resolved before execution (index into ctx.sysvals).
    SysVar(usize),
    /// User variable @x (index into ctx.uservals).
    UserVar(usize),
    /// An ENUM / SET column read in numeric context: its member index / bit
    /// mask (MySQL's `col+0`, ORDER BY, comparison with a number).
    EnumIndex(Box<CExpr>, Arc<crate::engine::enumset::EnumSet>),
}

/// Per-statement evaluation context.
pub struct EvalCtx<'a> {
    pub params: &'a [Value],
    pub warnings: Warnings,
    /// The statement's NOW(), read from the clock on first use (most
    /// statements never ask, and a clock read per statement showed up in
    /// point-select profiles); then fixed for the rest of the statement, as
    /// MySQL keeps NOW() constant within one statement. Read with `now()`.
    now: std::sync::OnceLock<norr_signals::DateTime>,
    /// `now` in the session zone, computed on first use.
    now_local: std::sync::OnceLock<norr_signals::DateTime>,
    /// The session's time zone (None: UTC): NOW() and its kin answer in it,
    /// and TIMESTAMP columns are read in it and written from it.
    pub tz: crate::engine::functions::tz::SessionZone,
    pub current_db: Option<Arc<str>>,
    pub connection_id: u32,
    /// USER() and CURRENT_USER() (None: an in-process session, which acts
    /// as root@localhost).
    pub login: Option<Arc<crate::types::LoginNames>>,
    pub last_insert_id: u64,
    pub sysvals: Vec<Value>,
    pub uservals: Vec<Value>,
    pub subs: Vec<SubResult>,
    /// The enclosing query's current row, for correlated subqueries.
    pub outer_row: Vec<Value>,
    /// Set by LAST_INSERT_ID(expr).
    pub set_last_insert_id: Option<u64>,
    /// A division by zero fails the statement (1365) instead of giving NULL
    /// with a warning: set for the values INSERT and UPDATE write when
    /// sql_mode is strict with ERROR_FOR_DIVISION_BY_ZERO (and not IGNORE).
    pub div_zero_error: bool,
    /// Highest value an UPDATE (or ON DUPLICATE KEY UPDATE) wrote to a
    /// table's AUTO_INCREMENT column, by table id: the statement then raises
    /// the table's counter past it, as MySQL 8.0 does.
    pub ai_written: Vec<(u32, u64)>,
    /// Working sets of the recursive CTEs being evaluated, by slot.
    pub work_tables: Vec<Vec<Vec<Value>>>,
    /// The session running the statement, so that long work can stop at a
    /// KILL QUERY (see `exec::Turn`). None for internal statements.
    pub stop: Option<Arc<crate::session_registry::SessionEntry>>,
    /// GET_LOCK / SLEEP calls of the row being evaluated and the wait one
    /// stopped at (`user_lock_fns`).
    pub waits: crate::engine::user_lock_fns::Replay,
    /// The session's max_allowed_packet: no function builds a string or
    /// JSON value larger (NULL and warning 1301, `functions::over_packet`).
    pub max_packet: u64,
    /// The session's group_concat_max_len (GROUP_CONCAT's results are cut
    /// there, warning 1260).
    pub group_concat_max_len: u64,
    /// Most rows one DELETE / UPDATE may change (`EngineConfig`).
    pub max_rows_per_txn: u64,
    /// Rows this statement holds in memory (`memory`).
    pub mem: crate::engine::memory::StatementMemory,
    /// @@ndb_autoincrement_prefetch_sz: AUTO_INCREMENT values an INSERT
    /// reserves at least (`auto_inc_cache`).
    pub ai_prefetch: u64,
}

impl<'a> EvalCtx<'a> {
    /// The value of `x / 0`, `x DIV 0`, `x % 0`: NULL with warning 1365, or
    /// error 1365 where the statement makes it one (`div_zero_error`).
    pub fn division_by_zero(&mut self) -> Result<Value, SqlError> {
        if self.div_zero_error {
            return Err(SqlError::new(1365, "22012", "Division by 0"));
        }
        self.warnings.push(1365, "Division by 0".into());
        Ok(Value::Null)
    }

    pub fn new(params: &'a [Value]) -> EvalCtx<'a> {
        EvalCtx {
            params,
            warnings: Warnings::default(),
            now: std::sync::OnceLock::new(),
            now_local: std::sync::OnceLock::new(),
            tz: None,
            current_db: None,
            connection_id: 0,
            login: None,
            last_insert_id: 0,
            sysvals: Vec::new(),
            uservals: Vec::new(),
            subs: Vec::new(),
            outer_row: Vec::new(),
            set_last_insert_id: None,
            div_zero_error: false,
            ai_written: Vec::new(),
            work_tables: Vec::new(),
            stop: None,
            waits: Default::default(),
            max_packet: crate::server::DEFAULT_MAX_ALLOWED_PACKET as u64,
            group_concat_max_len: 1024,
            max_rows_per_txn: crate::engine::DEFAULT_MAX_ROWS_PER_TXN,
            mem: crate::engine::memory::StatementMemory::new(0),
            ai_prefetch: crate::engine::auto_inc_cache::DEFAULT_PREFETCH,
        }
    }

    /// Error 1317 if KILL QUERY (or KILL CONNECTION) hit the session.
    pub fn check_killed(&self) -> Result<(), SqlError> {
        match &self.stop {
            Some(e) if e.kill_requested() != crate::session_registry::Kill::None => {
                Err(crate::session_registry::interrupted())
            }
            _ => Ok(()),
        }
    }
}

impl EvalCtx<'_> {
    /// The session zone, if it is not UTC.
    pub fn zone(&self) -> Option<&crate::engine::functions::tz::Zone> {
        self.tz.as_deref()
    }

    /// The statement's current time in the session zone, whole seconds
    /// (NOW(), CURRENT_TIMESTAMP, CURDATE(), a DEFAULT CURRENT_TIMESTAMP):
    /// the instant of `now()`, read as the zone's wall time.
    pub fn now_local(&self) -> norr_signals::DateTime {
        let Some(zone) = self.zone() else { return self.now() };
        *self.now_local.get_or_init(|| {
            let utc = self.now();
            crate::engine::functions::tz::utc_to_local(&utc, zone).unwrap_or(utc)
        })
    }

    /// The statement's current time in UTC, whole seconds (UTC_TIMESTAMP(),
    /// UNIX_TIMESTAMP()).
    pub fn now(&self) -> norr_signals::DateTime {
        *self.now.get_or_init(|| {
            datetime::unix_micros_to_datetime(now_unix_micros() / 1_000_000 * 1_000_000).unwrap_or(
                norr_signals::DateTime {
                    date: norr_signals::Date { year: 1970, month: 1, day: 1 },
                    hour: 0,
                    minute: 0,
                    second: 0,
                    micro: 0,
                },
            )
        })
    }
}

/// Wall clock (the SQL node is a host process: it may read the clock).
pub fn now_unix_micros() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}

fn b(e: &CExpr, row: &[Value], ctx: &mut EvalCtx) -> Result<Option<bool>, SqlError> {
    let v = eval(e, row, ctx)?;
    Ok(to_bool(&v, &mut ctx.warnings))
}

/// Evaluate a predicate: true only if the expression is TRUE (not NULL/false).
pub fn eval_pred(e: &CExpr, row: &[Value], ctx: &mut EvalCtx) -> Result<bool, SqlError> {
    Ok(b(e, row, ctx)? == Some(true))
}

/// A comparison operand: a literal, parameter or column by reference (no
/// copy of its bytes), anything else evaluated.
fn operand<'v>(
    e: &'v CExpr,
    row: &'v [Value],
    params: &'v [Value],
    ctx: &mut EvalCtx,
) -> Result<std::borrow::Cow<'v, Value>, SqlError> {
    use std::borrow::Cow;
    static NULL: Value = Value::Null;
    Ok(match e {
        CExpr::Lit(v) => Cow::Borrowed(v),
        CExpr::Col(i) => Cow::Borrowed(row.get(*i).unwrap_or(&NULL)),
        CExpr::Param(i) if *i < params.len() => Cow::Borrowed(&params[*i]),
        _ => Cow::Owned(eval(e, row, ctx)?),
    })
}

pub fn eval(e: &CExpr, row: &[Value], ctx: &mut EvalCtx) -> Result<Value, SqlError> {
    // 1436 instead of a stack overflow (`depth`): a few instructions.
    crate::engine::depth::check_stack()?;
    Ok(match e {
        CExpr::Lit(v) => v.clone(),
        CExpr::Param(i) => ctx
            .params
            .get(*i)
            .cloned()
            .ok_or_else(|| SqlError::new(1210, "HY000", "Incorrect arguments to mysqld_stmt_execute"))?,
        CExpr::Col(i) => row.get(*i).cloned().unwrap_or(Value::Null),
        CExpr::Outer(i) => ctx.outer_row.get(*i).cloned().unwrap_or(Value::Null),
        CExpr::EnumIndex(x, e) => e.number(&eval(x, row, ctx)?),
        CExpr::Neg(x) => {
            let v = eval(x, row, ctx)?;
            match to_num(&v, &mut ctx.warnings) {
                None => Value::Null,
                Some(n) => {
                    match arith(ArithOp::Sub, value::Num::I(0), n, &|| {
                        format!("-({})", value::to_string_lossy(&v).unwrap_or_default())
                    })? {
                        Some(r) => r.to_value(),
                        None => Value::Null,
                    }
                }
            }
        }
        CExpr::Not(x) => bool_value(b(x, row, ctx)?.map(|v| !v)),
        CExpr::Arith(op, l, r) => {
            let lv = eval(l, row, ctx)?;
            let rv = eval(r, row, ctx)?;
            let (Some(a), Some(c)) = (to_num(&lv, &mut ctx.warnings), to_num(&rv, &mut ctx.warnings)) else {
                return Ok(Value::Null);
            };
            let res = arith(*op, a, c, &|| {
                format!(
                    "({} {} {})",
                    value::to_string_lossy(&lv).unwrap_or_default(),
                    op.symbol(),
                    value::to_string_lossy(&rv).unwrap_or_default()
                )
            })?;
            match res {
                Some(n) => n.to_value(),
                None => ctx.division_by_zero()?,
            }
        }
        CExpr::Cmp(k, l, r, coll) => {
            let params = ctx.params;
            let lv = operand(l, row, params, ctx)?;
            let rv = operand(r, row, params, ctx)?;
            bool_value(sql_cmp(&lv, &rv, *coll, &mut ctx.warnings).map(|o| k.test(o)))
        }
        CExpr::NullSafeEq(l, r, coll) => {
            let lv = eval(l, row, ctx)?;
            let rv = eval(r, row, ctx)?;
            let eq = match (lv.is_null(), rv.is_null()) {
                (true, true) => true,
                (true, false) | (false, true) => false,
                _ => sql_cmp(&lv, &rv, *coll, &mut ctx.warnings) == Some(Ordering::Equal),
            };
            Value::Int(eq as i64)
        }
        CExpr::And(l, r) => {
            let a = b(l, row, ctx)?;
            if a == Some(false) {
                return Ok(Value::Int(0));
            }
            let c = b(r, row, ctx)?;
            bool_value(match (a, c) {
                (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            })
        }
        CExpr::Or(l, r) => {
            let a = b(l, row, ctx)?;
            if a == Some(true) {
                return Ok(Value::Int(1));
            }
            let c = b(r, row, ctx)?;
            bool_value(match (a, c) {
                (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            })
        }
        CExpr::Xor(l, r) => {
            let a = b(l, row, ctx)?;
            let c = b(r, row, ctx)?;
            bool_value(match (a, c) {
                (Some(x), Some(y)) => Some(x != y),
                _ => None,
            })
        }
        CExpr::IsNull(x, neg) => Value::Int((eval(x, row, ctx)?.is_null() != *neg) as i64),
        CExpr::IsBool(x, want, neg) => {
            let v = b(x, row, ctx)?;
            Value::Int(((v == Some(*want)) != *neg) as i64)
        }
        CExpr::InList { expr, list, negated, coll } => {
            let v = eval(expr, row, ctx)?;
            if v.is_null() {
                return Ok(Value::Null);
            }
            let mut saw_null = false;
            for item in list {
                let iv = eval(item, row, ctx)?;
                match sql_cmp(&v, &iv, *coll, &mut ctx.warnings) {
                    None => saw_null = true,
                    Some(Ordering::Equal) => return Ok(Value::Int(!*negated as i64)),
                    _ => {}
                }
            }
            if saw_null {
                Value::Null
            } else {
                Value::Int(*negated as i64)
            }
        }
        CExpr::InSub { expr, sub, negated, coll } => {
            let v = eval(expr, row, ctx)?;
            let (found, has_null) = match ctx.subs.get(*sub) {
                Some(SubResult::Set { values, has_null }) => {
                    if v.is_null() {
                        if values.is_empty() && !*has_null {
                            return Ok(Value::Int(*negated as i64));
                        }
                        return Ok(Value::Null);
                    }
                    let mut w = Warnings::default();
                    (values.iter().any(|x| sql_cmp(&v, x, *coll, &mut w) == Some(Ordering::Equal)), *has_null)
                }
                _ => return Err(SqlError::internal("subquery result missing")),
            };
            if found {
                Value::Int(!*negated as i64)
            } else if has_null {
                Value::Null
            } else {
                Value::Int(*negated as i64)
            }
        }
        CExpr::Quantified { exprs, sub, op, all, colls } => {
            let mut vals = Vec::with_capacity(exprs.len());
            for x in exprs {
                vals.push(eval(x, row, ctx)?);
            }
            let Some(SubResult::Rows(rows)) = ctx.subs.get(*sub) else {
                return Err(SqlError::internal("subquery result missing"));
            };
            let mut w = Warnings::default();
            let mut unknown = false;
            for r in rows {
                // A row comparison (only = / <> have rows): false if some
                // column differs, unknown if none does but one is NULL.
                let mut res = Some(true);
                for ((v, x), coll) in vals.iter().zip(r).zip(colls) {
                    match sql_cmp(v, x, *coll, &mut w) {
                        None => res = None,
                        Some(o) if vals.len() == 1 => res = res.map(|_| op.test(o)),
                        Some(o) if o != Ordering::Equal => {
                            res = Some(false);
                            break;
                        }
                        Some(_) => {}
                    }
                }
                if vals.len() > 1 && *op == CmpKind::Ne {
                    res = res.map(|b| !b);
                }
                match res {
                    Some(b) if b != *all => return Ok(Value::Int(b as i64)),
                    None => unknown = true,
                    _ => {}
                }
            }
            if unknown {
                Value::Null
            } else {
                Value::Int(*all as i64)
            }
        }
        CExpr::Exists { sub, negated } => match ctx.subs.get(*sub) {
            Some(SubResult::Exists(e)) => Value::Int((*e != *negated) as i64),
            _ => return Err(SqlError::internal("subquery result missing")),
        },
        CExpr::ScalarSub(sub) => match ctx.subs.get(*sub) {
            Some(SubResult::Scalar(v)) => v.clone(),
            _ => return Err(SqlError::internal("subquery result missing")),
        },
        CExpr::Between { expr, low, high, negated, coll } => {
            let params = ctx.params;
            let v = operand(expr, row, params, ctx)?;
            let lo = operand(low, row, params, ctx)?;
            let hi = operand(high, row, params, ctx)?;
            let a = sql_cmp(&v, &lo, *coll, &mut ctx.warnings).map(|o| o != Ordering::Less);
            let c = sql_cmp(&v, &hi, *coll, &mut ctx.warnings).map(|o| o != Ordering::Greater);
            let r = match (a, c) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            };
            bool_value(r.map(|x| x != *negated))
        }
        CExpr::Like { expr, pattern, escape, negated, coll } => {
            let v = eval(expr, row, ctx)?;
            let p = eval(pattern, row, ctx)?;
            let (Some(s), Some(p)) = (value::to_text(&v), value::to_text(&p)) else {
                return Ok(Value::Null);
            };
            Value::Int((like_match(&s, &p, *escape, *coll) != *negated) as i64)
        }
        CExpr::Case { operand, whens, else_, coll } => {
            let op = match operand {
                Some(o) => Some(eval(o, row, ctx)?),
                None => None,
            };
            for (w, r) in whens {
                let hit = match &op {
                    Some(ov) => {
                        let wv = eval(w, row, ctx)?;
                        sql_cmp(ov, &wv, *coll, &mut ctx.warnings) == Some(Ordering::Equal)
                    }
                    None => b(w, row, ctx)? == Some(true),
                };
                if hit {
                    return eval(r, row, ctx);
                }
            }
            match else_ {
                Some(e) => eval(e, row, ctx)?,
                None => Value::Null,
            }
        }
        CExpr::Coalesce(list) => {
            for x in list {
                let v = eval(x, row, ctx)?;
                if !v.is_null() {
                    return Ok(v);
                }
            }
            Value::Null
        }
        CExpr::Func(f, args) => {
            let mut vals = Vec::with_capacity(args.len());
            // The functions that join their arguments: stop at arguments
            // already too large together (each one is bounded; a hundred of
            // them need not be held at once to know the result is NULL).
            let joins = functions::joins_args(*f);
            let mut bytes = 0u64;
            for a in args {
                let v = eval(a, row, ctx)?;
                if joins {
                    bytes = bytes.saturating_add(v.as_bytes().map_or(0, |b| b.len() as u64));
                    if functions::over_packet(ctx, functions::name_of(*f), bytes as u128) {
                        return Ok(Value::Null);
                    }
                }
                vals.push(v);
            }
            functions::call(*f, vals, ctx)?
        }
        CExpr::SysVar(i) => ctx.sysvals.get(*i).cloned().unwrap_or(Value::Null),
        CExpr::UserVar(i) => ctx.uservals.get(*i).cloned().unwrap_or(Value::Null),
    })
}

/// SQL LIKE with `%`, `_` and an escape character, under a collation.
pub fn like_match(s: &[u8], p: &[u8], escape: u8, coll: Coll) -> bool {
    let s: Vec<char> = String::from_utf8_lossy(s).chars().collect();
    let p: Vec<char> = String::from_utf8_lossy(p).chars().collect();
    let eq = |a: char, b: char| match coll {
        Coll::Bin => a == b,
        Coll::Ci => a == b || a.to_lowercase().eq(b.to_lowercase()),
    };
    // Iterative matcher with backtracking on the last '%'.
    let (mut si, mut pi) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    let esc = escape as char;
    while si < s.len() {
        if pi < p.len() {
            let pc = p[pi];
            if pc == '%' {
                star = Some((pi, si));
                pi += 1;
                continue;
            }
            if pc == '_' {
                si += 1;
                pi += 1;
                continue;
            }
            let (lit, adv) = if pc == esc && pi + 1 < p.len() { (p[pi + 1], 2) } else { (pc, 1) };
            if eq(s[si], lit) {
                si += 1;
                pi += adv;
                continue;
            }
        }
        match star {
            Some((sp, ss)) => {
                pi = sp + 1;
                si = ss + 1;
                star = Some((sp, ss + 1));
            }
            None => return false,
        }
    }
    while pi < p.len() && p[pi] == '%' {
        pi += 1;
    }
    pi == p.len()
}

/// True if the expression reads no column, parameter-free or not (constant per execution).
pub fn is_row_independent(e: &CExpr) -> bool {
    match e {
        CExpr::Col(_) | CExpr::Outer(_) => false,
        CExpr::Lit(_) | CExpr::Param(_) | CExpr::SysVar(_) | CExpr::UserVar(_) | CExpr::ScalarSub(_) => true,
        CExpr::Exists { .. } => true,
        CExpr::Func(f, args) => !functions::is_nondeterministic(*f) && args.iter().all(is_row_independent),
        other => {
            let mut ok = true;
            for_each_child(other, &mut |c| ok &= is_row_independent(c));
            ok
        }
    }
}

/// The body of `for_each_child` and `for_each_child_mut`: one match, which
/// binds by reference or by mutable reference as the scrutinee is (`$iter`
/// walks the lists), so the two visitors cannot disagree on a variant.
macro_rules! visit_children {
    ($e:expr, $f:expr, $iter:ident) => {
        match $e {
            CExpr::Lit(_)
            | CExpr::Param(_)
            | CExpr::Col(_)
            | CExpr::Outer(_)
            | CExpr::SysVar(_)
            | CExpr::UserVar(_) => {}
            CExpr::Exists { .. } | CExpr::ScalarSub(_) => {}
            CExpr::Neg(x) | CExpr::Not(x) | CExpr::IsNull(x, _) | CExpr::IsBool(x, _, _) | CExpr::EnumIndex(x, _) => {
                $f(x)
            }
            CExpr::Arith(_, l, r)
            | CExpr::Cmp(_, l, r, _)
            | CExpr::NullSafeEq(l, r, _)
            | CExpr::And(l, r)
            | CExpr::Or(l, r)
            | CExpr::Xor(l, r) => {
                $f(l);
                $f(r)
            }
            CExpr::InList { expr, list, .. } => {
                $f(expr);
                list.$iter().for_each(&mut *$f);
            }
            CExpr::InSub { expr, .. } => $f(expr),
            CExpr::Quantified { exprs, .. } => exprs.$iter().for_each(&mut *$f),
            CExpr::Between { expr, low, high, .. } => {
                $f(expr);
                $f(low);
                $f(high)
            }
            CExpr::Like { expr, pattern, .. } => {
                $f(expr);
                $f(pattern)
            }
            CExpr::Case { operand, whens, else_, .. } => {
                if let Some(o) = operand {
                    $f(o);
                }
                for (w, r) in whens {
                    $f(w);
                    $f(r);
                }
                if let Some(e) = else_ {
                    $f(e);
                }
            }
            CExpr::Coalesce(list) | CExpr::Func(_, list) => list.$iter().for_each(&mut *$f),
        }
    };
}

/// Visit the direct children of an expression.
pub fn for_each_child(e: &CExpr, f: &mut dyn FnMut(&CExpr)) {
    visit_children!(e, f, iter)
}

/// Visit the direct children of an expression, mutably (for rewrites that
/// replace whole subexpressions, e.g. ROLLUP's grouped expressions).
pub fn for_each_child_mut(e: &mut CExpr, f: &mut dyn FnMut(&mut CExpr)) {
    visit_children!(e, f, iter_mut)
}

/// Rewrite column offsets (used when a row layout changes, e.g. joins).
pub fn map_cols(e: &mut CExpr, f: &dyn Fn(usize) -> usize) {
    match e {
        CExpr::Col(i) => *i = f(*i),
        CExpr::Neg(x) | CExpr::Not(x) | CExpr::IsNull(x, _) | CExpr::IsBool(x, _, _) | CExpr::EnumIndex(x, _) => {
            map_cols(x, f)
        }
        CExpr::Arith(_, l, r)
        | CExpr::Cmp(_, l, r, _)
        | CExpr::NullSafeEq(l, r, _)
        | CExpr::And(l, r)
        | CExpr::Or(l, r)
        | CExpr::Xor(l, r) => {
            map_cols(l, f);
            map_cols(r, f)
        }
        CExpr::InList { expr, list, .. } => {
            map_cols(expr, f);
            list.iter_mut().for_each(|x| map_cols(x, f));
        }
        CExpr::InSub { expr, .. } => map_cols(expr, f),
        CExpr::Quantified { exprs, .. } => exprs.iter_mut().for_each(|x| map_cols(x, f)),
        CExpr::Between { expr, low, high, .. } => {
            map_cols(expr, f);
            map_cols(low, f);
            map_cols(high, f)
        }
        CExpr::Like { expr, pattern, .. } => {
            map_cols(expr, f);
            map_cols(pattern, f)
        }
        CExpr::Case { operand, whens, else_, .. } => {
            if let Some(o) = operand {
                map_cols(o, f);
            }
            for (w, r) in whens {
                map_cols(w, f);
                map_cols(r, f);
            }
            if let Some(e) = else_ {
                map_cols(e, f);
            }
        }
        CExpr::Coalesce(list) | CExpr::Func(_, list) => list.iter_mut().for_each(|x| map_cols(x, f)),
        _ => {}
    }
}

/// Highest column offset read by the expression, if any.
pub fn max_col(e: &CExpr) -> Option<usize> {
    match e {
        CExpr::Col(i) => Some(*i),
        _ => {
            let mut m: Option<usize> = None;
            for_each_child(e, &mut |c| {
                if let Some(x) = max_col(c) {
                    m = Some(m.map_or(x, |y: usize| y.max(x)));
                }
            });
            m
        }
    }
}

/// Columns read by the expression.
pub fn collect_cols(e: &CExpr, out: &mut Vec<usize>) {
    match e {
        CExpr::Col(i) => {
            if !out.contains(i) {
                out.push(*i)
            }
        }
        _ => for_each_child(e, &mut |c| collect_cols(c, out)),
    }
}

/// Split a predicate into its AND-ed conjuncts.
pub fn conjuncts(e: CExpr, out: &mut Vec<CExpr>) {
    match e {
        CExpr::And(l, r) => {
            conjuncts(*l, out);
            conjuncts(*r, out);
        }
        other => out.push(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NOW() is the clock at first use, in whole seconds, and every later
    /// use in the same statement's context returns that same value.
    #[test]
    fn now_is_read_lazily_and_fixed_within_a_statement() {
        let ctx = EvalCtx::new(&[]);
        let before_s = now_unix_micros() / 1_000_000;
        let first = ctx.now();
        let after_s = now_unix_micros() / 1_000_000;
        let first_s = datetime::datetime_to_unix_micros(&first) / 1_000_000;
        assert!((before_s..=after_s).contains(&first_s), "{before_s} <= {first_s} <= {after_s}");
        assert_eq!(first.micro, 0, "whole seconds");
        assert_eq!(ctx.now(), first);
    }

    #[test]
    fn like_patterns() {
        assert!(like_match(b"abc", b"a%", b'\\', Coll::Ci));
        assert!(like_match(b"ABC", b"a_c", b'\\', Coll::Ci));
        assert!(!like_match(b"ABC", b"a_c", b'\\', Coll::Bin));
        assert!(like_match(b"a%c", b"a\\%c", b'\\', Coll::Bin));
        assert!(!like_match(b"abc", b"a\\%c", b'\\', Coll::Bin));
        assert!(like_match(b"xxabyyab", b"%ab", b'\\', Coll::Bin));
        assert!(like_match(b"", b"%", b'\\', Coll::Bin));
        assert!(!like_match(b"", b"_", b'\\', Coll::Bin));
    }

    #[test]
    fn three_valued_logic() {
        let mut ctx = EvalCtx::new(&[]);
        let null = || Box::new(CExpr::Lit(Value::Null));
        let t = || Box::new(CExpr::Lit(Value::Int(1)));
        let f = || Box::new(CExpr::Lit(Value::Int(0)));
        assert_eq!(eval(&CExpr::And(null(), f()), &[], &mut ctx).unwrap(), Value::Int(0));
        assert_eq!(eval(&CExpr::And(null(), t()), &[], &mut ctx).unwrap(), Value::Null);
        assert_eq!(eval(&CExpr::Or(null(), t()), &[], &mut ctx).unwrap(), Value::Int(1));
        assert_eq!(eval(&CExpr::Not(null()), &[], &mut ctx).unwrap(), Value::Null);
        let inl = CExpr::InList {
            expr: t(),
            list: vec![CExpr::Lit(Value::Int(2)), CExpr::Lit(Value::Null)],
            negated: false,
            coll: Coll::Ci,
        };
        assert_eq!(eval(&inl, &[], &mut ctx).unwrap(), Value::Null);
        let div = CExpr::Arith(ArithOp::Div, t(), f());
        assert_eq!(eval(&div, &[], &mut ctx).unwrap(), Value::Null);
        assert_eq!(ctx.warnings.list[0].code, 1365);
    }
}
