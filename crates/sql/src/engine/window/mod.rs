//! Window functions (`f(...) OVER (...)`): compilation here, evaluation in
//! `eval`, frame bounds in `frame`.
//!
//! A window function is computed after WHERE, GROUP BY and HAVING, over the
//! post-aggregation rows, and before the final ORDER BY / DISTINCT / LIMIT
//! (MySQL's order). Each window function k of a query block appends one
//! value to every row; the select list and ORDER BY read it as a column past
//! the aggregates. While the block compiles, the function's column number is
//! not known yet (ORDER BY may still add aggregates), so the compiler hands
//! out `Col(WIN_MARK + k)` and the query compiler moves those to their real
//! offset once the block is complete (`place`).

pub mod eval;
pub mod frame;
#[cfg(test)]
mod tests;

use crate::engine::expr::compile::{agg_kind, agg_result_type, wrong_args, AggKind, AggSpec, Compiler};
use crate::engine::expr::value::Coll;
use crate::engine::expr::{collect_cols, map_cols, CExpr, SqlType, TClass};
use crate::engine::functions::unify;
use crate::engine::query::OrderKey;
use crate::types::SqlError;
use sqlparser::ast::{self, Expr, FunctionArgExpr, NamedWindowExpr, WindowFrameBound, WindowType};

/// Placeholder column base of window results while a block compiles.
pub const WIN_MARK: usize = 1 << 40;

/// Most rows one window computation holds (the rows of the query block it
/// runs over): the statement-wide bound on materialised rows.
pub const MAX_WINDOW_ROWS: usize = crate::engine::exec::MAX_RESULT_ROWS;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WinKind {
    RowNumber,
    Rank,
    DenseRank,
    PercentRank,
    CumeDist,
    Ntile,
    Lag,
    Lead,
    FirstValue,
    LastValue,
    NthValue,
    /// An aggregate over the frame (`agg` of the `WinFunc`).
    Agg,
}

/// One frame bound; offsets are constant expressions (literals or `?`),
/// evaluated once per execution.
#[derive(Debug, Clone, PartialEq)]
pub enum Bound {
    UnboundedPreceding,
    Preceding(CExpr),
    CurrentRow,
    Following(CExpr),
    UnboundedFollowing,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// RANGE (by ORDER BY value, peers included) rather than ROWS.
    pub range: bool,
    pub start: Bound,
    pub end: Bound,
}

impl Frame {
    /// MySQL's default: RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW,
    /// which is the whole partition when there is no ORDER BY (every row is
    /// a peer of every other).
    pub fn default_frame() -> Frame {
        Frame { range: true, start: Bound::UnboundedPreceding, end: Bound::CurrentRow }
    }
}

/// A window function call, compiled. Expressions are over the
/// post-aggregation row.
#[derive(Debug, Clone)]
pub struct WinFunc {
    pub kind: WinKind,
    /// For error messages: the function's name.
    pub name: String,
    /// The window's name for error messages (`<unnamed window>` if inline).
    pub window: String,
    pub args: Vec<CExpr>,
    pub agg: Option<AggSpec>,
    pub partition: Vec<CExpr>,
    pub part_colls: Vec<Coll>,
    pub order: Vec<OrderKey>,
    pub frame: Frame,
}

impl WinFunc {
    /// Every expression evaluated on rows (for column pruning and layout).
    pub fn exprs(&self) -> impl Iterator<Item = &CExpr> {
        self.args
            .iter()
            .chain(self.agg.iter().flat_map(|a| a.exprs()))
            .chain(self.partition.iter())
            .chain(self.order.iter().map(|o| &o.expr))
    }

    pub fn exprs_mut(&mut self) -> Vec<&mut CExpr> {
        let mut v: Vec<&mut CExpr> = self.args.iter_mut().collect();
        if let Some(a) = &mut self.agg {
            v.extend(a.arg.iter_mut());
        }
        v.extend(self.partition.iter_mut());
        v.extend(self.order.iter_mut().map(|o| &mut o.expr));
        v
    }

    /// Same PARTITION BY and ORDER BY: one sort serves both.
    pub fn same_ordering(&self, o: &WinFunc) -> bool {
        self.partition == o.partition
            && self.part_colls == o.part_colls
            && self.order.len() == o.order.len()
            && self.order.iter().zip(&o.order).all(|(a, b)| a.expr == b.expr && a.desc == b.desc && a.coll == b.coll)
    }
}

/// Window state of the query block being compiled.
#[derive(Debug, Default)]
pub struct WindowSink {
    /// The block's `WINDOW name AS (...)` definitions.
    pub named: Vec<(String, NamedWindowExpr)>,
    pub funcs: Vec<WinFunc>,
    /// Inside a window function's arguments or window: no further window
    /// function may appear there.
    pub nested: bool,
}

impl WindowSink {
    pub fn new(defs: &[ast::NamedWindowDefinition]) -> Result<WindowSink, SqlError> {
        let mut named: Vec<(String, NamedWindowExpr)> = Vec::with_capacity(defs.len());
        for d in defs {
            if named.iter().any(|(n, _)| n.eq_ignore_ascii_case(&d.0.value)) {
                return Err(SqlError::new(3591, "HY000", format!("Window '{}' is defined twice.", d.0.value)));
            }
            named.push((d.0.value.clone(), d.1.clone()));
        }
        Ok(WindowSink { named, funcs: Vec::new(), nested: false })
    }
}

/// Move window results from their placeholder columns to `base + k`.
pub fn place(e: &mut CExpr, base: usize) {
    map_cols(e, &|i| if i >= WIN_MARK { base + (i - WIN_MARK) } else { i });
}

pub fn invalid_use(name: &str) -> SqlError {
    // MySQL's message has the stray quote at the end too.
    SqlError::new(3593, "HY000", format!("You cannot use the window function '{name}' in this context.'"))
}

/// A window definition with names resolved.
struct Resolved {
    name: String,
    partition: Vec<Expr>,
    order: Vec<ast::OrderByExpr>,
    frame: Option<ast::WindowFrame>,
}

const UNNAMED: &str = "<unnamed window>";

fn lookup(named: &[(String, NamedWindowExpr)], name: &str, depth: usize) -> Result<Resolved, SqlError> {
    if depth > named.len() {
        return Err(SqlError::new(3580, "HY000", "There is a circularity in the window dependency graph."));
    }
    let Some((n, def)) = named.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) else {
        return Err(SqlError::new(3579, "HY000", format!("Window name '{name}' is not defined.")));
    };
    let mut r = match def {
        NamedWindowExpr::NamedWindow(other) => lookup(named, &other.value, depth + 1)?,
        NamedWindowExpr::WindowSpec(spec) => resolve_spec(named, spec, depth + 1)?,
    };
    r.name = n.clone();
    Ok(r)
}

fn resolve_spec(
    named: &[(String, NamedWindowExpr)],
    spec: &ast::WindowSpec,
    depth: usize,
) -> Result<Resolved, SqlError> {
    let own = Resolved {
        name: UNNAMED.to_string(),
        partition: spec.partition_by.clone(),
        order: spec.order_by.clone(),
        frame: spec.window_frame.clone(),
    };
    let Some(base_name) = &spec.window_name else { return Ok(own) };
    let base = lookup(named, &base_name.value, depth)?;
    if base.frame.is_some() {
        return Err(SqlError::new(
            3582,
            "HY000",
            format!("Window '{}' has a frame definition, so cannot be referenced by another window.", base.name),
        ));
    }
    if !own.partition.is_empty() {
        return Err(SqlError::new(3581, "HY000", "A window which depends on another cannot define partitioning."));
    }
    if !own.order.is_empty() && !base.order.is_empty() {
        return Err(SqlError::new(
            3583,
            "HY000",
            format!("Window '{UNNAMED}' cannot inherit '{}' since both contain an ORDER BY clause.", base.name),
        ));
    }
    Ok(Resolved {
        name: own.name,
        partition: base.partition,
        order: if own.order.is_empty() { base.order } else { own.order },
        frame: own.frame,
    })
}

fn win_kind(name: &str) -> Option<WinKind> {
    Some(match name {
        "row_number" => WinKind::RowNumber,
        "rank" => WinKind::Rank,
        "dense_rank" => WinKind::DenseRank,
        "percent_rank" => WinKind::PercentRank,
        "cume_dist" => WinKind::CumeDist,
        "ntile" => WinKind::Ntile,
        "lag" => WinKind::Lag,
        "lead" => WinKind::Lead,
        "first_value" => WinKind::FirstValue,
        "last_value" => WinKind::LastValue,
        "nth_value" => WinKind::NthValue,
        _ => return None,
    })
}

fn is_constant(e: &CExpr) -> bool {
    let mut cols = Vec::new();
    collect_cols(e, &mut cols);
    cols.is_empty() && crate::engine::expr::is_row_independent(e)
}

/// Compile `name(args) OVER (...)` (called by the expression compiler).
pub fn compile_call(
    c: &mut Compiler,
    f: &ast::Function,
    name: &str,
    args: &[&FunctionArgExpr],
    distinct: bool,
    clauses: &[ast::FunctionArgumentClause],
) -> Result<(CExpr, SqlType), SqlError> {
    let allowed = matches!(c.clause, "field list" | "order clause");
    let named = match c.host.windows() {
        Some(sink) if allowed && !sink.nested => sink.named.clone(),
        _ => return Err(invalid_use(name)),
    };
    let kind = match (win_kind(name), agg_kind(name)) {
        (Some(k), _) => k,
        (None, Some(AggKind::GroupConcat)) | (None, None) => {
            return Err(SqlError::parse(format!(
                "You have an error in your SQL syntax; {name}() is not a window function (near 'OVER')"
            )))
        }
        (None, Some(_)) => WinKind::Agg,
    };
    if distinct && matches!(agg_kind(name), Some(AggKind::JsonArrayAgg | AggKind::JsonObjectAgg)) {
        return Err(SqlError::parse(format!(
            "You have an error in your SQL syntax; DISTINCT is not allowed in {name}()"
        )));
    }
    if distinct {
        return Err(SqlError::unsupported("<window function>(DISTINCT ..)"));
    }
    if f.filter.is_some() || f.null_treatment.is_some() || !clauses.is_empty() {
        return Err(SqlError::unsupported(format!("this clause in window function {name}()")));
    }
    let spec = match f.over.as_ref() {
        Some(WindowType::NamedWindow(id)) => lookup(&named, &id.value, 0)?,
        Some(WindowType::WindowSpec(s)) => resolve_spec(&named, s, 0)?,
        None => return Err(SqlError::internal("window function without OVER")),
    };
    if let Some(sink) = c.host.windows() {
        sink.nested = true;
    }
    let r = compile_parts(c, kind, name, args, spec);
    if let Some(sink) = c.host.windows() {
        sink.nested = false;
    }
    let (func, ty) = r?;
    let sink = c.host.windows().ok_or_else(|| SqlError::internal("window sink"))?;
    sink.funcs.push(func);
    Ok((CExpr::Col(WIN_MARK + sink.funcs.len() - 1), ty))
}

fn compile_parts(
    c: &mut Compiler,
    kind: WinKind,
    name: &str,
    args: &[&FunctionArgExpr],
    spec: Resolved,
) -> Result<(WinFunc, SqlType), SqlError> {
    for o in &spec.order {
        if matches!(&o.expr, Expr::Value(v) if matches!(v.value, ast::Value::Number(..))) {
            return Err(SqlError::new(
                3592,
                "HY000",
                format!("Window '{}': ORDER BY or PARTITION BY uses legacy position indication which is not supported, use expression.", spec.name),
            ));
        }
    }
    let mut partition = Vec::with_capacity(spec.partition.len());
    let mut part_colls = Vec::with_capacity(spec.partition.len());
    for p in &spec.partition {
        let (e, t) = c.compile(p)?;
        partition.push(e);
        part_colls.push(t.coll);
    }
    let mut order = Vec::with_capacity(spec.order.len());
    let mut order_types = Vec::with_capacity(spec.order.len());
    for o in &spec.order {
        let (e, t) = c.compile(&o.expr)?;
        order.push(OrderKey { expr: e, desc: matches!(o.options.sort, Some(ast::OrderBySort::Desc)), coll: t.coll });
        order_types.push(t);
    }
    let frame = match &spec.frame {
        None => Frame::default_frame(),
        Some(fr) => compile_frame(c, fr, &spec.name, &order_types)?,
    };
    let count_star = kind == WinKind::Agg && name == "count" && matches!(args, [FunctionArgExpr::Wildcard]);
    let exprs: Vec<&Expr> = if count_star {
        Vec::new()
    } else {
        args.iter()
            .map(|a| match a {
                FunctionArgExpr::Expr(e) => Ok(e),
                _ => Err(SqlError::parse(format!("'*' is not allowed in {name}()"))),
            })
            .collect::<Result<_, _>>()?
    };
    let mut cargs = Vec::with_capacity(exprs.len());
    let mut types = Vec::with_capacity(exprs.len());
    for e in &exprs {
        let (ce, t) = c.compile(e)?;
        cargs.push(ce);
        types.push(t);
    }
    let int = SqlType::new(TClass::Int);
    let arity = |lo: usize, hi: usize| {
        if exprs.len() < lo || exprs.len() > hi {
            Err(wrong_args(name))
        } else {
            Ok(())
        }
    };
    // Offsets and bucket counts must be constant (checked for range per
    // execution, as a `?` may supply them).
    let constant_arg = |i: usize, cargs: &[CExpr]| {
        if cargs.get(i).is_some_and(|e| !is_constant(e)) {
            Err(SqlError::new(1210, "HY000", format!("Incorrect arguments to {name}")))
        } else {
            Ok(())
        }
    };
    let mut agg = None;
    let ty = match kind {
        WinKind::RowNumber | WinKind::Rank | WinKind::DenseRank => {
            arity(0, 0)?;
            int
        }
        WinKind::PercentRank | WinKind::CumeDist => {
            arity(0, 0)?;
            SqlType { decimals: 31, ..SqlType::new(TClass::Double) }
        }
        WinKind::Ntile => {
            arity(1, 1)?;
            constant_arg(0, &cargs)?;
            int
        }
        WinKind::Lag | WinKind::Lead => {
            arity(1, 3)?;
            constant_arg(1, &cargs)?;
            if types.len() == 3 {
                unify(&[types[0], types[2]])
            } else {
                types[0]
            }
        }
        WinKind::FirstValue | WinKind::LastValue => {
            arity(1, 1)?;
            types[0]
        }
        WinKind::NthValue => {
            arity(2, 2)?;
            constant_arg(1, &cargs)?;
            types[0]
        }
        WinKind::Agg => {
            let ak = agg_kind(name).ok_or_else(|| SqlError::internal("window aggregate"))?;
            if count_star {
                agg = Some(AggSpec {
                    kind: AggKind::CountStar,
                    arg: None,
                    distinct: false,
                    coll: Coll::Ci,
                    ty: int,
                    order: vec![],
                    separator: vec![],
                });
                int
            } else if matches!(ak, AggKind::JsonArrayAgg | AggKind::JsonObjectAgg) {
                let ty = agg_result_type(ak, SqlType::new(TClass::Str));
                agg = Some(AggSpec {
                    kind: ak,
                    arg: Some(crate::engine::expr::compile::json_agg_wrap(
                        ak,
                        std::mem::take(&mut cargs),
                        &types,
                        name,
                    )?),
                    distinct: false,
                    coll: Coll::Bin,
                    ty,
                    order: vec![],
                    separator: vec![],
                });
                ty
            } else {
                arity(1, 1)?;
                let t = types[0];
                let ty = agg_result_type(ak, t);
                agg = Some(AggSpec {
                    kind: ak,
                    arg: cargs.pop(),
                    distinct: false,
                    coll: crate::engine::expr::cmp_coll(&t, &t),
                    ty,
                    order: vec![],
                    separator: vec![],
                });
                ty
            }
        }
    };
    let func = WinFunc {
        kind,
        name: name.to_string(),
        window: spec.name,
        args: cargs,
        agg,
        partition,
        part_colls,
        order,
        frame,
    };
    Ok((func, ty))
}

fn compile_frame(
    c: &mut Compiler,
    fr: &ast::WindowFrame,
    window: &str,
    order_types: &[SqlType],
) -> Result<Frame, SqlError> {
    let range = match fr.units {
        ast::WindowFrameUnits::Rows => false,
        ast::WindowFrameUnits::Range => true,
        ast::WindowFrameUnits::Groups => return Err(SqlError::unsupported("GROUPS frames")),
    };
    let mut bound = |b: &WindowFrameBound| -> Result<Bound, SqlError> {
        let offset = |c: &mut Compiler, e: &Expr| -> Result<CExpr, SqlError> {
            if matches!(e, Expr::Interval(_)) {
                return Err(if !range {
                    SqlError::new(
                        3596,
                        "HY000",
                        format!("Window '{window}': INTERVAL can only be used with RANGE frames."),
                    )
                } else if order_types.len() == 1 && order_types[0].is_numeric() {
                    SqlError::new(3589, "HY000", format!("Window '{window}' with RANGE frame has ORDER BY expression of numeric type, INTERVAL bound value not allowed."))
                } else {
                    SqlError::unsupported("RANGE frames with INTERVAL bounds")
                });
            }
            if range {
                let numeric = order_types.len() == 1 && order_types[0].is_numeric();
                if !numeric {
                    let temporal = order_types.len() == 1
                        && matches!(order_types[0].class, TClass::Date | TClass::DateTime | TClass::Time);
                    return Err(if temporal {
                        SqlError::new(3588, "HY000", format!("Window '{window}' with RANGE frame has ORDER BY expression of datetime type. Only INTERVAL bound value allowed."))
                    } else {
                        SqlError::new(3587, "HY000", format!("Window '{window}' with RANGE N PRECEDING/FOLLOWING frame requires exactly one ORDER BY expression, of numeric or temporal type"))
                    });
                }
            }
            let (ce, _) = c.compile(e)?;
            if !is_constant(&ce) {
                return Err(SqlError::new(3590, "HY000", format!("Window '{window}' has a non-constant frame bound.")));
            }
            Ok(ce)
        };
        Ok(match b {
            WindowFrameBound::CurrentRow => Bound::CurrentRow,
            WindowFrameBound::Preceding(None) => Bound::UnboundedPreceding,
            WindowFrameBound::Following(None) => Bound::UnboundedFollowing,
            WindowFrameBound::Preceding(Some(e)) => Bound::Preceding(offset(c, e)?),
            WindowFrameBound::Following(Some(e)) => Bound::Following(offset(c, e)?),
        })
    };
    let start = bound(&fr.start_bound)?;
    let end = match &fr.end_bound {
        Some(b) => bound(b)?,
        None => Bound::CurrentRow,
    };
    if start == Bound::UnboundedFollowing {
        return Err(SqlError::new(
            3584,
            "HY000",
            format!("Window '{window}': frame start cannot be UNBOUNDED FOLLOWING."),
        ));
    }
    if end == Bound::UnboundedPreceding {
        return Err(SqlError::new(
            3585,
            "HY000",
            format!("Window '{window}': frame end cannot be UNBOUNDED PRECEDING."),
        ));
    }
    Ok(Frame { range, start, end })
}
