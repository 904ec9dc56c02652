//! Partition of a row and partition pruning.
//!
//! A table's `PartitionInfo` (catalog) is compiled once into a `PartFn` over
//! the table's columns. `partition_of_row` gives the partition a row must be
//! written to (user-defined partitioning: RANGE / LIST / HASH(expr) /
//! RANGE COLUMNS / LIST COLUMNS). `prune` takes per-column constraints derived
//! from a WHERE clause and returns the partitions that can hold matching rows,
//! including pruning on several columns for RANGE COLUMNS (as seed 000
//! describes: `a = 99 AND b = 998` against `LESS THAN (99,99), (99,999)` leaves
//! only the second partition, `a = 99` alone leaves both) and LIST COLUMNS.

use crate::engine::catalog::{PartitionInfo, PartitionKind, PartitionValues};
use crate::engine::expr::compile::{Compiler, ParamMap, Scope, SubKind, SubqueryHost};
use crate::engine::expr::value::{order_cmp, sql_cmp, to_i64, Coll, Warnings};
use crate::engine::expr::{eval, CExpr, EvalCtx, SqlType};
use crate::types::SqlError;
use norr_signals::keycode;
use norr_signals::{ColumnId, PartitionScheme, TableDef, Value};
use std::cmp::Ordering;

/// Most key combinations pruning enumerates (cross product of IN lists).
pub const MAX_PRUNE_COMBINATIONS: usize = 256;

/// A compiled partitioning function.
#[derive(Debug, Clone)]
pub enum PartFn {
    /// The data node hashes the partition-key columns (`keycode::partition_of`).
    NativeKey {
        cols: Vec<ColumnId>,
        partitions: u32,
    },
    Hash {
        expr: CExpr,
        cols: Vec<ColumnId>,
        count: u32,
        linear: bool,
    },
    /// `bounds[i]` = VALUES LESS THAN of partition i (None = MAXVALUE).
    Range {
        expr: CExpr,
        cols: Vec<ColumnId>,
        bounds: Vec<Option<Value>>,
    },
    List {
        expr: CExpr,
        cols: Vec<ColumnId>,
        lists: Vec<Vec<Value>>,
    },
    RangeColumns {
        cols: Vec<ColumnId>,
        colls: Vec<Coll>,
        bounds: Vec<Vec<Option<Value>>>,
    },
    ListColumns {
        cols: Vec<ColumnId>,
        colls: Vec<Coll>,
        lists: Vec<Vec<Vec<Value>>>,
    },
}

/// What a WHERE clause says about one column (values already evaluated).
#[derive(Debug, Clone, PartialEq)]
pub enum ColRange {
    /// The column equals one of these values.
    In(Vec<Value>),
    /// low / high bounds (value, inclusive); None = unbounded.
    Between(Option<(Value, bool)>, Option<(Value, bool)>),
}

struct ConstHost;
impl SubqueryHost for ConstHost {
    fn add_subquery(
        &mut self,
        _q: &sqlparser::ast::Query,
        _k: SubKind,
        _o: &Scope,
    ) -> Result<(usize, SqlType), SqlError> {
        Err(SqlError::unsupported("subquery in a partitioning function"))
    }
    fn sysvar(&mut self, _n: &str, _g: bool) -> usize {
        0
    }
    fn uservar(&mut self, _n: &str) -> usize {
        0
    }
}

/// `a MOD b` -> `a % b` (sqlparser's MySQL dialect lacks the MOD operator), outside quotes.
fn rewrite_mod(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut quote: Option<char> = None;
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if let Some(q) = quote {
            if c == q {
                quote = None;
            }
            out.push(c);
            i += 1;
            continue;
        }
        if c == '\'' || c == '"' || c == '`' {
            quote = Some(c);
        }
        let word_start = i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if word_start && i + 3 <= chars.len() && chars[i..i + 3].iter().collect::<String>().eq_ignore_ascii_case("mod")
        {
            let after = chars.get(i + 3).copied();
            let word_end = after.is_none_or(|a| !(a.is_alphanumeric() || a == '_'));
            let next_non_space = chars[i + 3..].iter().find(|c| !c.is_whitespace()).copied();
            if word_end && next_non_space != Some('(') {
                out.push('%');
                i += 3;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

fn parse_expr(text: &str) -> Result<sqlparser::ast::Expr, SqlError> {
    let text = rewrite_mod(text);
    sqlparser::parser::Parser::new(&crate::engine::dialect::NorrMySql)
        .try_with_sql(&text)
        .and_then(|mut p| p.parse_expr())
        .map_err(|e| SqlError::parse(e.to_string()))
}

/// Compile an expression over the table's columns (row = columns in table order).
pub fn compile_table_expr(text: &str, scope: &Scope) -> Result<CExpr, SqlError> {
    let e = parse_expr(text)?;
    let pm = ParamMap::default();
    let mut host = ConstHost;
    let mut c = Compiler {
        scope,
        outer: None,
        params: &pm,
        clause: "partition function",
        aggs: None,
        agg_base: 0,
        aliases: &[],
        host: &mut host,
    };
    Ok(c.compile(&e)?.0)
}

fn const_value(text: &str) -> Result<Value, SqlError> {
    let scope = Scope::default();
    let e = compile_table_expr(text, &scope)?;
    let mut ctx = EvalCtx::new(&[]);
    eval(&e, &[], &mut ctx)
}

fn col_ids(def: &TableDef, names: &[String]) -> Result<Vec<ColumnId>, SqlError> {
    names
        .iter()
        .map(|n| {
            def.column_id(n)
                .ok_or_else(|| SqlError::new(1054, "42S22", format!("Unknown column '{n}' in 'partition function'")))
        })
        .collect()
}

fn expr_cols(e: &CExpr) -> Vec<ColumnId> {
    let mut v = Vec::new();
    crate::engine::expr::collect_cols(e, &mut v);
    v.into_iter().map(|c| c as ColumnId).collect()
}

impl PartFn {
    /// Compile the partitioning of a table. `scope` holds the table's columns in table order.
    pub fn build(def: &TableDef, info: Option<&PartitionInfo>, scope: &Scope) -> Result<PartFn, SqlError> {
        let Some(info) = info.filter(|_| def.partitioning == PartitionScheme::User) else {
            return Ok(PartFn::NativeKey { cols: def.partition_key_columns().to_vec(), partitions: def.partitions });
        };
        let colls = |cols: &[ColumnId]| -> Vec<Coll> {
            cols.iter()
                .map(|c| crate::engine::expr::compile::column_sqltype(&def.columns[*c as usize].ty).coll)
                .collect()
        };
        Ok(match &info.kind {
            PartitionKind::Key { .. } => {
                PartFn::NativeKey { cols: def.partition_key_columns().to_vec(), partitions: def.partitions }
            }
            PartitionKind::Hash { expr, linear } => {
                let e = compile_table_expr(expr, scope)?;
                PartFn::Hash { cols: expr_cols(&e), expr: e, count: info.partition_count().max(1), linear: *linear }
            }
            PartitionKind::Range { expr } => {
                let e = compile_table_expr(expr, scope)?;
                let mut bounds = Vec::new();
                for d in &info.defs {
                    match &d.values {
                        PartitionValues::LessThan(v) => bounds.push(match v.first().cloned().flatten() {
                            Some(t) => Some(const_value(&t)?),
                            None => None,
                        }),
                        _ => return Err(SqlError::internal("RANGE partition without VALUES LESS THAN")),
                    }
                }
                PartFn::Range { cols: expr_cols(&e), expr: e, bounds }
            }
            PartitionKind::List { expr } => {
                let e = compile_table_expr(expr, scope)?;
                let mut lists = Vec::new();
                for d in &info.defs {
                    match &d.values {
                        PartitionValues::In(l) => lists.push(
                            l.iter()
                                .map(|t| const_value(t.first().map(|s| s.as_str()).unwrap_or("NULL")))
                                .collect::<Result<_, _>>()?,
                        ),
                        _ => return Err(SqlError::internal("LIST partition without VALUES IN")),
                    }
                }
                PartFn::List { cols: expr_cols(&e), expr: e, lists }
            }
            PartitionKind::RangeColumns { columns } => {
                let cols = col_ids(def, columns)?;
                let mut bounds = Vec::new();
                for d in &info.defs {
                    match &d.values {
                        PartitionValues::LessThan(v) => bounds.push(
                            v.iter()
                                .map(|t| match t {
                                    Some(t) => const_value(t).map(Some),
                                    None => Ok(None),
                                })
                                .collect::<Result<_, _>>()?,
                        ),
                        _ => return Err(SqlError::internal("RANGE COLUMNS partition without VALUES LESS THAN")),
                    }
                }
                PartFn::RangeColumns { colls: colls(&cols), cols, bounds }
            }
            PartitionKind::ListColumns { columns } => {
                let cols = col_ids(def, columns)?;
                let mut lists = Vec::new();
                for d in &info.defs {
                    match &d.values {
                        PartitionValues::In(l) => lists.push(
                            l.iter()
                                .map(|tuple| tuple.iter().map(|t| const_value(t)).collect::<Result<Vec<_>, _>>())
                                .collect::<Result<_, _>>()?,
                        ),
                        _ => return Err(SqlError::internal("LIST COLUMNS partition without VALUES IN")),
                    }
                }
                PartFn::ListColumns { colls: colls(&cols), cols, lists }
            }
        })
    }

    /// True if the client must name the partition of every keyed operation.
    pub fn is_user(&self) -> bool {
        !matches!(self, PartFn::NativeKey { .. })
    }

    pub fn partition_count(&self) -> u32 {
        match self {
            PartFn::NativeKey { partitions, .. } => *partitions,
            PartFn::Hash { count, .. } => *count,
            PartFn::Range { bounds, .. } => bounds.len() as u32,
            PartFn::List { lists, .. } => lists.len() as u32,
            PartFn::RangeColumns { bounds, .. } => bounds.len() as u32,
            PartFn::ListColumns { lists, .. } => lists.len() as u32,
        }
    }

    /// Columns the function reads.
    pub fn columns(&self) -> &[ColumnId] {
        match self {
            PartFn::NativeKey { cols, .. }
            | PartFn::Hash { cols, .. }
            | PartFn::Range { cols, .. }
            | PartFn::List { cols, .. }
            | PartFn::RangeColumns { cols, .. }
            | PartFn::ListColumns { cols, .. } => cols,
        }
    }

    /// `partition_of_row` for a row of the SQL node, whose TIMESTAMP values
    /// are wall times of the session zone (`zone`, None: UTC): the
    /// partition is that of the UTC moments stored (`ts_zone`), whatever
    /// the zone of the session that writes or reads the row.
    pub fn partition_of_local_row(
        &self,
        def: &TableDef,
        row: &[Value],
        zone: Option<&crate::engine::functions::tz::Zone>,
    ) -> Result<Option<u32>, SqlError> {
        let is_ts = |c: &ColumnId| {
            def.columns.get(*c as usize).is_some_and(|d| matches!(d.ty, norr_signals::ColumnType::Timestamp))
        };
        if let Some(z) = zone.filter(|_| self.columns().iter().any(is_ts)) {
            let mut utc = row.to_vec();
            for c in self.columns().iter().filter(|c| is_ts(c)) {
                if let Some(v) = utc.get_mut(*c as usize) {
                    crate::engine::ts_zone::value_to_utc(v, z);
                }
            }
            return self.partition_of_row(def, &utc);
        }
        self.partition_of_row(def, row)
    }

    /// Partition of a full row (values in table column order, coerced).
    /// Error 1526 if no RANGE / LIST partition takes the value.
    pub fn partition_of_row(&self, def: &TableDef, row: &[Value]) -> Result<Option<u32>, SqlError> {
        let no_partition = |v: &str| SqlError::new(1526, "HY000", format!("Table has no partition for value {v}"));
        match self {
            PartFn::NativeKey { cols, partitions } => {
                if *partitions == 0 {
                    return Ok(None);
                }
                let vals: Vec<Value> = cols.iter().map(|c| row[*c as usize].clone()).collect();
                let types: Vec<_> = cols.iter().map(|c| &def.columns[*c as usize].ty).collect();
                Ok(Some(keycode::partition_of(&keycode::encode_key(&vals, &types), *partitions)))
            }
            PartFn::Hash { expr, count, linear, .. } => {
                let mut ctx = EvalCtx::new(&[]);
                let v = eval(expr, row, &mut ctx)?;
                let n = to_i64(&v, &mut Warnings::default()).unwrap_or(0);
                Ok(Some(hash_partition(n, *count, *linear)))
            }
            PartFn::Range { expr, bounds, .. } => {
                let mut ctx = EvalCtx::new(&[]);
                let v = eval(expr, row, &mut ctx)?;
                if v.is_null() {
                    return Ok(Some(0));
                }
                for (i, b) in bounds.iter().enumerate() {
                    match b {
                        None => return Ok(Some(i as u32)),
                        Some(b) => {
                            if sql_cmp(&v, b, Coll::Ci, &mut ctx.warnings) == Some(Ordering::Less) {
                                return Ok(Some(i as u32));
                            }
                        }
                    }
                }
                Err(no_partition(&crate::engine::expr::value::to_string_lossy(&v).unwrap_or_default()))
            }
            PartFn::List { expr, lists, .. } => {
                let mut ctx = EvalCtx::new(&[]);
                let v = eval(expr, row, &mut ctx)?;
                for (i, l) in lists.iter().enumerate() {
                    if l.iter().any(|x| group_eq_ci(&v, x)) {
                        return Ok(Some(i as u32));
                    }
                }
                Err(no_partition(&crate::engine::expr::value::to_string_lossy(&v).unwrap_or_else(|| "NULL".into())))
            }
            PartFn::RangeColumns { cols, colls, bounds } => {
                let t: Vec<Ext> = cols.iter().map(|c| Ext::Val(row[*c as usize].clone())).collect();
                for (i, b) in bounds.iter().enumerate() {
                    if cmp_tuple(&t, b, colls) == Ordering::Less {
                        return Ok(Some(i as u32));
                    }
                }
                Err(SqlError::new(1526, "HY000", "Table has no partition for value from column_list"))
            }
            PartFn::ListColumns { cols, colls, lists } => {
                for (i, l) in lists.iter().enumerate() {
                    if l.iter().any(|tuple| {
                        tuple
                            .iter()
                            .zip(cols)
                            .zip(colls)
                            .all(|((x, c), coll)| crate::engine::expr::value::group_eq(&row[*c as usize], x, *coll))
                    }) {
                        return Ok(Some(i as u32));
                    }
                }
                Err(SqlError::new(1526, "HY000", "Table has no partition for value from column_list"))
            }
        }
    }

    /// Partitions that can hold rows satisfying `constraints` (column id ->
    /// range). None = every partition (no pruning possible).
    pub fn prune(&self, def: &TableDef, constraints: &[(ColumnId, ColRange)]) -> Option<Vec<u32>> {
        let get = |c: ColumnId| constraints.iter().find(|(id, _)| *id == c).map(|(_, r)| r);
        match self {
            PartFn::NativeKey { .. } | PartFn::Hash { .. } | PartFn::List { .. } => {
                // Equality on every column of the function: evaluate each combination.
                let cols = self.columns();
                if cols.is_empty() || self.partition_count() == 0 {
                    return None;
                }
                let mut lists = Vec::new();
                for c in cols {
                    match get(*c) {
                        Some(ColRange::In(v)) => lists.push(v.clone()),
                        _ => return self.prune_range_expr(get),
                    }
                }
                let mut out = Vec::new();
                for combo in cross(&lists)? {
                    let mut row = vec![Value::Null; def.columns.len()];
                    for (c, v) in cols.iter().zip(combo) {
                        row[*c as usize] = v;
                    }
                    match self.partition_of_row(def, &row) {
                        Ok(Some(p)) => push_unique(&mut out, p),
                        Ok(None) => return None,
                        Err(_) => {} // no partition holds this value: no rows
                    }
                }
                out.sort_unstable();
                Some(out)
            }
            PartFn::Range { .. } => {
                let cols = self.columns();
                if cols.len() == 1 {
                    if let Some(ColRange::In(v)) = get(cols[0]) {
                        let mut out = Vec::new();
                        for x in v.iter().take(MAX_PRUNE_COMBINATIONS) {
                            let mut row = vec![Value::Null; def.columns.len()];
                            row[cols[0] as usize] = x.clone();
                            if let Ok(Some(p)) = self.partition_of_row(def, &row) {
                                push_unique(&mut out, p);
                            }
                        }
                        out.sort_unstable();
                        return Some(out);
                    }
                }
                self.prune_range_expr(get)
            }
            PartFn::RangeColumns { cols, colls, bounds } => {
                // Build the lowest and highest tuples: equality prefix, then one range.
                let mut lo: Vec<Ext> = Vec::new();
                let mut hi: Vec<Ext> = Vec::new();
                let mut in_sets: Vec<Vec<Value>> = Vec::new();
                for c in cols {
                    match get(*c) {
                        Some(ColRange::In(v)) if v.len() == 1 => {
                            lo.push(Ext::Val(v[0].clone()));
                            hi.push(Ext::Val(v[0].clone()));
                        }
                        Some(ColRange::In(v)) if !v.is_empty() && lo.is_empty() => {
                            in_sets.push(v.clone());
                            break;
                        }
                        Some(ColRange::Between(l, h)) => {
                            lo.push(l.as_ref().map(|(v, _)| Ext::Val(v.clone())).unwrap_or(Ext::NegInf));
                            hi.push(h.as_ref().map(|(v, _)| Ext::Val(v.clone())).unwrap_or(Ext::PosInf));
                            break;
                        }
                        _ => break,
                    }
                }
                if let Some(first) = in_sets.first() {
                    // IN on the first column: union of each value's partitions.
                    let mut out = Vec::new();
                    for v in first.iter().take(MAX_PRUNE_COMBINATIONS) {
                        let t = vec![Ext::Val(v.clone())];
                        let mut t_hi = t.clone();
                        t_hi.push(Ext::PosInf);
                        let mut t_lo = t;
                        t_lo.push(Ext::NegInf);
                        for p in range_partitions(&t_lo, &t_hi, bounds, colls) {
                            push_unique(&mut out, p);
                        }
                    }
                    out.sort_unstable();
                    return Some(out);
                }
                if lo.is_empty() {
                    return None;
                }
                lo.push(Ext::NegInf);
                hi.push(Ext::PosInf);
                Some(range_partitions(&lo, &hi, bounds, colls))
            }
            PartFn::ListColumns { cols, colls, lists } => {
                let cons: Vec<Option<&Vec<Value>>> = cols
                    .iter()
                    .map(|c| match get(*c) {
                        Some(ColRange::In(v)) => Some(v),
                        _ => None,
                    })
                    .collect();
                if cons.iter().all(|c| c.is_none()) {
                    return None;
                }
                let mut out = Vec::new();
                for (i, l) in lists.iter().enumerate() {
                    let hit = l.iter().any(|tuple| {
                        tuple.iter().zip(&cons).zip(colls).all(|((x, con), coll)| match con {
                            None => true,
                            Some(vals) => vals.iter().any(|v| crate::engine::expr::value::group_eq(v, x, *coll)),
                        })
                    });
                    if hit {
                        out.push(i as u32);
                    }
                }
                Some(out)
            }
        }
    }

    /// RANGE(expr) where expr is a bare column with a BETWEEN constraint.
    fn prune_range_expr<'a>(&self, get: impl Fn(ColumnId) -> Option<&'a ColRange>) -> Option<Vec<u32>> {
        let PartFn::Range { expr: CExpr::Col(c), bounds, .. } = self else { return None };
        let Some(ColRange::Between(l, h)) = get(*c as ColumnId) else { return None };
        let lo = vec![l.as_ref().map(|(v, _)| Ext::Val(v.clone())).unwrap_or(Ext::NegInf)];
        let hi = vec![h.as_ref().map(|(v, _)| Ext::Val(v.clone())).unwrap_or(Ext::PosInf)];
        let b: Vec<Vec<Option<Value>>> = bounds.iter().map(|x| vec![x.clone()]).collect();
        Some(range_partitions(&lo, &hi, &b, &[Coll::Ci]))
    }
}

fn group_eq_ci(a: &Value, b: &Value) -> bool {
    crate::engine::expr::value::group_eq(a, b, Coll::Ci)
}

fn push_unique(v: &mut Vec<u32>, p: u32) {
    if !v.contains(&p) {
        v.push(p);
    }
}

fn cross(lists: &[Vec<Value>]) -> Option<Vec<Vec<Value>>> {
    let mut out: Vec<Vec<Value>> = vec![Vec::new()];
    for l in lists {
        if out.len() * l.len().max(1) > MAX_PRUNE_COMBINATIONS {
            return None;
        }
        let mut next = Vec::with_capacity(out.len() * l.len());
        for prefix in &out {
            for v in l {
                let mut p = prefix.clone();
                p.push(v.clone());
                next.push(p);
            }
        }
        out = next;
    }
    Some(out)
}

/// MySQL HASH / LINEAR HASH partition of an integer.
pub fn hash_partition(n: i64, count: u32, linear: bool) -> u32 {
    let count = count.max(1) as u64;
    let n = n.unsigned_abs();
    if !linear {
        return (n % count) as u32;
    }
    let mut v = count.next_power_of_two();
    let mut r = n & (v - 1);
    while r >= count {
        v /= 2;
        r &= v - 1;
    }
    r as u32
}

/// A tuple element with infinities for open bounds.
#[derive(Debug, Clone)]
enum Ext {
    NegInf,
    Val(Value),
    PosInf,
}

/// Compare a (possibly shorter, infinity-terminated) tuple with a partition bound (None = MAXVALUE).
fn cmp_tuple(t: &[Ext], bound: &[Option<Value>], colls: &[Coll]) -> Ordering {
    for (i, b) in bound.iter().enumerate() {
        let Some(x) = t.get(i) else { return Ordering::Less };
        let o = match (x, b) {
            (Ext::NegInf, _) => Ordering::Less,
            (Ext::PosInf, None) => Ordering::Equal,
            (Ext::PosInf, Some(_)) => Ordering::Greater,
            (Ext::Val(_), None) => Ordering::Less,
            (Ext::Val(v), Some(bv)) => order_cmp(v, bv, colls.get(i).copied().unwrap_or(Coll::Ci)),
        };
        if o != Ordering::Equal {
            return o;
        }
        if matches!(x, Ext::PosInf) {
            // +inf equals MAXVALUE: everything after is irrelevant, not less.
            return Ordering::Equal;
        }
    }
    Ordering::Equal
}

/// Partitions whose [previous bound, bound) interval meets [lo, hi].
fn range_partitions(lo: &[Ext], hi: &[Ext], bounds: &[Vec<Option<Value>>], colls: &[Coll]) -> Vec<u32> {
    let n = bounds.len();
    let first = (0..n).find(|&i| cmp_tuple(lo, &bounds[i], colls) == Ordering::Less);
    let Some(first) = first else { return Vec::new() };
    let last = (0..n).find(|&i| cmp_tuple(hi, &bounds[i], colls) == Ordering::Less).unwrap_or(n - 1);
    if last < first {
        return Vec::new();
    }
    (first as u32..=last as u32).collect()
}

/// Derive per-column constraints from conjuncts `col op value` (values evaluated).
pub fn constraints_from(
    conj: &[(ColumnId, crate::engine::expr::CmpKind, Value)],
    ins: &[(ColumnId, Vec<Value>)],
) -> Vec<(ColumnId, ColRange)> {
    use crate::engine::expr::CmpKind as K;
    let mut out: Vec<(ColumnId, ColRange)> = Vec::new();
    for (c, vals) in ins {
        if vals.iter().all(|v| !v.is_null()) {
            out.push((*c, ColRange::In(vals.clone())));
        }
    }
    for (c, k, v) in conj {
        if v.is_null() {
            continue;
        }
        let new = match k {
            K::Eq => ColRange::In(vec![v.clone()]),
            K::Lt | K::Le => ColRange::Between(None, Some((v.clone(), *k == K::Le))),
            K::Gt | K::Ge => ColRange::Between(Some((v.clone(), *k == K::Ge)), None),
            K::Ne => continue,
        };
        match out.iter_mut().find(|(id, _)| id == c) {
            None => out.push((*c, new)),
            Some((_, existing)) => {
                let merged = match (existing.clone(), new) {
                    (ColRange::In(a), _) => ColRange::In(a),
                    (_, ColRange::In(b)) => ColRange::In(b),
                    (ColRange::Between(l1, h1), ColRange::Between(l2, h2)) => ColRange::Between(l1.or(l2), h1.or(h2)),
                };
                *existing = merged;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::catalog::PartitionDef;
    use crate::engine::expr::compile::{column_sqltype, ScopeCol};
    use norr_signals::{ColumnDef, ColumnType};

    fn table(cols: &[(&str, ColumnType)]) -> (TableDef, Scope) {
        let def = TableDef {
            id: 1,
            version: 1,
            name: "db/t1".into(),
            columns: cols.iter().map(|(n, t)| ColumnDef::new(n, t.clone())).collect(),
            primary_key: vec![0],
            partitioning: PartitionScheme::User,
            partitions: 2,
            indexes: vec![],
            extra: vec![],
            options: Default::default(),
        };
        let scope = Scope {
            cols: def
                .columns
                .iter()
                .map(|c| ScopeCol {
                    table: "t1".into(),
                    name: c.name.clone(),
                    ty: column_sqltype(&c.ty),
                    enums: None,
                    default: None,
                })
                .collect(),
            merged: vec![],
        };
        (def, scope)
    }

    fn lt(name: &str, v: &[Option<&str>]) -> PartitionDef {
        PartitionDef {
            name: name.into(),
            values: PartitionValues::LessThan(v.iter().map(|x| x.map(|s| s.to_string())).collect()),
            comment: String::new(),
        }
    }

    fn int() -> ColumnType {
        ColumnType::Int { unsigned: false }
    }

    #[test]
    fn range_columns_on_two_columns_as_in_seed_000() {
        // partition by range columns(a,b) (p2 < (99,99), p1 < (99,999))
        let (def, scope) = table(&[("a", int()), ("b", int())]);
        let info = PartitionInfo {
            kind: PartitionKind::RangeColumns { columns: vec!["a".into(), "b".into()] },
            count: None,
            defs: vec![lt("p2", &[Some("99"), Some("99")]), lt("p1", &[Some("99"), Some("999")])],
        };
        let f = PartFn::build(&def, Some(&info), &scope).unwrap();
        assert_eq!(f.partition_of_row(&def, &[Value::Int(99), Value::Int(998)]).unwrap(), Some(1));
        assert_eq!(f.partition_of_row(&def, &[Value::Int(98), Value::Int(5000)]).unwrap(), Some(0));
        assert_eq!(f.partition_of_row(&def, &[Value::Int(99), Value::Int(999)]).unwrap_err().code, 1526);
        // a = 99 AND b = 998 -> only p1
        let c = vec![(0, ColRange::In(vec![Value::Int(99)])), (1, ColRange::In(vec![Value::Int(998)]))];
        assert_eq!(f.prune(&def, &c), Some(vec![1]));
        // a = 99 alone -> both
        let c = vec![(0, ColRange::In(vec![Value::Int(99)]))];
        assert_eq!(f.prune(&def, &c), Some(vec![0, 1]));
        // a = 99 AND b < 50 -> p2 only
        let c =
            vec![(0, ColRange::In(vec![Value::Int(99)])), (1, ColRange::Between(None, Some((Value::Int(50), false))))];
        assert_eq!(f.prune(&def, &c), Some(vec![0]));
        // a < 10 -> p2 only
        let c = vec![(0, ColRange::Between(None, Some((Value::Int(10), false))))];
        assert_eq!(f.prune(&def, &c), Some(vec![0]));
        // a > 100 -> nothing
        let c = vec![(0, ColRange::Between(Some((Value::Int(100), false)), None))];
        assert_eq!(f.prune(&def, &c), Some(vec![]));
        // only b -> no pruning
        let c = vec![(1, ColRange::In(vec![Value::Int(1)]))];
        assert_eq!(f.prune(&def, &c), None);
    }

    #[test]
    fn range_columns_dates_and_maxvalue() {
        let (def, scope) = table(&[("d", ColumnType::Date), ("x", int())]);
        let info = PartitionInfo {
            kind: PartitionKind::RangeColumns { columns: vec!["d".into()] },
            count: None,
            defs: vec![lt("p0", &[Some("'1999-01-01'")]), lt("p1", &[Some("'2000-01-01'")]), lt("p2", &[None])],
        };
        let f = PartFn::build(&def, Some(&info), &scope).unwrap();
        let d = |s: &str| Value::Date(crate::engine::expr::datetime::parse_date(s.as_bytes()).unwrap());
        assert_eq!(f.partition_of_row(&def, &[d("1998-05-05"), Value::Null]).unwrap(), Some(0));
        assert_eq!(f.partition_of_row(&def, &[d("2030-05-05"), Value::Null]).unwrap(), Some(2));
        let c = vec![(0, ColRange::Between(None, Some((d("1998-12-31"), true))))];
        assert_eq!(f.prune(&def, &c), Some(vec![0]));
    }

    #[test]
    fn range_and_list_on_expressions() {
        let (def, scope) = table(&[("id", int()), ("y", int())]);
        let info = PartitionInfo {
            kind: PartitionKind::Range { expr: "y".into() },
            count: None,
            defs: vec![lt("p0", &[Some("2000")]), lt("p1", &[Some("2010")]), lt("p2", &[None])],
        };
        let f = PartFn::build(&def, Some(&info), &scope).unwrap();
        assert_eq!(f.partition_of_row(&def, &[Value::Int(1), Value::Int(2005)]).unwrap(), Some(1));
        let c = vec![(1, ColRange::Between(Some((Value::Int(2001), true)), Some((Value::Int(2003), true))))];
        assert_eq!(f.prune(&def, &c), Some(vec![1]));
        let c = vec![(1, ColRange::In(vec![Value::Int(1999), Value::Int(2020)]))];
        assert_eq!(f.prune(&def, &c), Some(vec![0, 2]));

        let info = PartitionInfo {
            kind: PartitionKind::List { expr: "y % 3".into() },
            count: None,
            defs: vec![
                PartitionDef {
                    name: "a".into(),
                    values: PartitionValues::In(vec![vec!["0".into()], vec!["1".into()]]),
                    comment: String::new(),
                },
                PartitionDef {
                    name: "b".into(),
                    values: PartitionValues::In(vec![vec!["2".into()]]),
                    comment: String::new(),
                },
            ],
        };
        let f = PartFn::build(&def, Some(&info), &scope).unwrap();
        assert_eq!(f.partition_of_row(&def, &[Value::Int(1), Value::Int(5)]).unwrap(), Some(1));
        let c = vec![(1, ColRange::In(vec![Value::Int(3)]))];
        assert_eq!(f.prune(&def, &c), Some(vec![0]));
    }

    #[test]
    fn list_columns_partial_pruning() {
        let (def, scope) = table(&[
            ("a", ColumnType::Varchar { len: 10, collation: norr_signals::Collation::CaseInsensitive }),
            ("b", int()),
        ]);
        let info = PartitionInfo {
            kind: PartitionKind::ListColumns { columns: vec!["a".into(), "b".into()] },
            count: None,
            defs: vec![
                PartitionDef {
                    name: "p0".into(),
                    values: PartitionValues::In(vec![vec!["'a'".into(), "1".into()], vec!["'a'".into(), "2".into()]]),
                    comment: String::new(),
                },
                PartitionDef {
                    name: "p1".into(),
                    values: PartitionValues::In(vec![vec!["'b'".into(), "2".into()]]),
                    comment: String::new(),
                },
            ],
        };
        let f = PartFn::build(&def, Some(&info), &scope).unwrap();
        assert_eq!(f.partition_of_row(&def, &[Value::str("B"), Value::Int(2)]).unwrap(), Some(1));
        assert_eq!(f.prune(&def, &[(0, ColRange::In(vec![Value::str("a")]))]), Some(vec![0]));
        assert_eq!(f.prune(&def, &[(1, ColRange::In(vec![Value::Int(2)]))]), Some(vec![0, 1]));
        assert_eq!(
            f.prune(&def, &[(0, ColRange::In(vec![Value::str("b")])), (1, ColRange::In(vec![Value::Int(2)]))]),
            Some(vec![1])
        );
    }

    #[test]
    fn mod_operator_in_partition_expressions() {
        assert_eq!(rewrite_mod("id MOD 7"), "id % 7");
        assert_eq!(rewrite_mod("MOD(id, 7)"), "MOD(id, 7)");
        assert_eq!(rewrite_mod("model mod 2"), "model % 2");
        let (def, scope) = table(&[("id", int()), ("v", int())]);
        let info = PartitionInfo {
            kind: PartitionKind::Hash { expr: "id MOD 7".into(), linear: false },
            count: Some(3),
            defs: vec![],
        };
        let f = PartFn::build(&def, Some(&info), &scope).unwrap();
        assert_eq!(f.partition_of_row(&def, &[Value::Int(10), Value::Null]).unwrap(), Some(0));
    }

    #[test]
    fn hash_and_key() {
        assert_eq!(hash_partition(7, 4, false), 3);
        assert_eq!(hash_partition(-7, 4, false), 3);
        // LINEAR HASH with 6 partitions: V = 8; 7 & 7 = 7 >= 6 -> V = 4, 7 & 3 = 3
        assert_eq!(hash_partition(7, 6, true), 3);
        let (mut def, scope) = table(&[("id", int()), ("y", int())]);
        let info = PartitionInfo {
            kind: PartitionKind::Hash { expr: "id".into(), linear: false },
            count: Some(4),
            defs: vec![],
        };
        let f = PartFn::build(&def, Some(&info), &scope).unwrap();
        assert_eq!(f.prune(&def, &[(0, ColRange::In(vec![Value::Int(5), Value::Int(9)]))]), Some(vec![1]));
        assert_eq!(f.prune(&def, &[(1, ColRange::In(vec![Value::Int(5)]))]), None);
        def.partitioning = PartitionScheme::Key { columns: vec![] };
        def.partitions = 8;
        let f = PartFn::build(&def, None, &scope).unwrap();
        let p = f.prune(&def, &[(0, ColRange::In(vec![Value::Int(5)]))]).unwrap();
        let t = ColumnType::Int { unsigned: false };
        assert_eq!(p, vec![keycode::partition_of(&keycode::encode_key(&[Value::Int(5)], &[&t]), 8)]);
    }
}
