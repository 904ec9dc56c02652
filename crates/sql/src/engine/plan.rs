//! Access-path planning for one table: primary-key lookup (batched for IN
//! lists), unique-index lookup, ordered-index range scan, or full scan; the
//! pushed-down filter; the key conversions that make lookups exact.
//!
//! The planner works on the conjuncts of a predicate compiled over the
//! table's own row (column offset = column id). Every conjunct is still
//! evaluated on the SQL node after the access, so an access path or a pushed
//! filter may return a superset of the rows (never a subset): that keeps MySQL
//! comparison semantics exact even where the data node compares differently.
//! The exceptions are conjuncts that a range scan or key lookups decide
//! exactly with the statement's values (`range_implied`, `keys_implied`):
//! they are not re-checked (nor pushed).

use crate::engine::expr::value::{sql_cmp, Coll, Warnings};
use crate::engine::expr::{eval, is_row_independent, CExpr, CmpKind, EvalCtx};
use crate::engine::functions::tz::Zone;
use crate::engine::ts_zone::{zoned_value, Use};
use crate::types::SqlError;
use norr_signals::coerce::{class_sample, coerce_value, comparable_classes};
use norr_signals::{
    Bound, CmpOp, ColumnDef, ColumnId, ColumnType, Filter, IndexId, IndexKind, ScanRange, TableDef, Value,
};
use std::cmp::Ordering;

/// Most keys one lookup plan may produce (IN lists x columns); beyond it we scan.
pub const MAX_LOOKUP_KEYS: usize = 4096;

#[derive(Debug, Clone, PartialEq)]
pub enum Access {
    /// Primary-key lookups: each key is one expression per pk column (IN lists expanded).
    PkLookup {
        keys: Vec<Vec<CExpr>>,
    },
    /// Unique-index lookups (ordered unique or unique hash index).
    UniqueLookup {
        index: IndexId,
        name: String,
        keys: Vec<Vec<CExpr>>,
    },
    /// Ordered-index range: equality prefix, then an optional range on the next column.
    IndexRange {
        index: IndexId,
        name: String,
        eq: Vec<CExpr>,
        low: Option<(CExpr, bool)>,
        high: Option<(CExpr, bool)>,
    },
    /// Equality keys on the first `keys[i].len()` columns of an ordered
    /// index (IN lists, row IN lists, OR of ANDs on a prefix of the index,
    /// or on a non-unique one): one range of the index per key, in key order.
    IndexKeys {
        index: IndexId,
        name: String,
        keys: Vec<Vec<CExpr>>,
    },
    /// Bounded range on a single integer primary-key column, read as a batch
    /// of key lookups when the span is at most `MAX_RANGE_AS_KEYS`, else as a
    /// range scan of the table's `PRIMARY` ordered index (see
    /// `resolve_pk_range`; the span is known only with the parameters).
    PkRange {
        low: (CExpr, bool),
        high: (CExpr, bool),
    },
    FullScan,
}

/// Widest integer pk range read as key lookups instead of a range scan of the
/// `PRIMARY` ordered index. Measured in-process on the data node
/// (`cargo run -p norr-txn --release --example pk_range`, 100k rows, 8
/// partitions): key reads win below ~40 rows (span 10: 22 vs 42 us), the scan
/// above (span 100, sysbench's range: 170 vs 138 us; the scan's fixed cost is
/// one partition scan per partition). A table without that index scans in
/// full instead, so it keeps key reads up to `MAX_RANGE_AS_KEYS_NO_INDEX`.
pub const MAX_RANGE_AS_KEYS: i128 = 32;
/// `MAX_RANGE_AS_KEYS` for a table without a `PRIMARY` ordered index.
pub const MAX_RANGE_AS_KEYS_NO_INDEX: i128 = 4096;

impl Access {
    pub fn describe(&self) -> &'static str {
        match self {
            Access::PkLookup { keys } if keys.len() > 1 => "primary key batch lookup",
            Access::PkLookup { .. } => "primary key lookup",
            Access::UniqueLookup { .. } => "unique index lookup",
            Access::IndexRange { .. } => "index range scan",
            Access::IndexKeys { .. } => "index ranges, one scan per batch of keys",
            Access::PkRange { .. } => "primary key range (key lookups, or a PRIMARY index range scan when wide)",
            Access::FullScan => "full table scan",
        }
    }
}

/// The ordered index on the primary key the data node gives every table
/// (named `PRIMARY`; a table created before it existed has none).
pub fn pk_ordered_index(def: &TableDef) -> Option<&norr_signals::IndexDef> {
    def.indexes.iter().find(|i| {
        i.name.eq_ignore_ascii_case(norr_signals::schema::PK_ORDERED_INDEX)
            && i.kind == IndexKind::Ordered
            && i.columns == def.primary_key
    })
}

/// How a `PkRange` runs with the statement's values.
#[derive(Debug)]
pub enum PkRangeRun {
    /// As key lookups.
    Keys(Vec<Vec<Value>>),
    /// As this access (a range scan of the `PRIMARY` index, or a full scan).
    Scan(Access),
}

/// Decide how a `PkRange` runs: key lookups for a narrow integral range,
/// else a range scan of the `PRIMARY` ordered index (full scan without one).
pub fn resolve_pk_range(
    def: &TableDef,
    low: &(CExpr, bool),
    high: &(CExpr, bool),
    ctx: &mut EvalCtx,
) -> Result<PkRangeRun, SqlError> {
    let pk_ix = pk_ordered_index(def);
    let max = if pk_ix.is_some() { MAX_RANGE_AS_KEYS } else { MAX_RANGE_AS_KEYS_NO_INDEX };
    if let Some(keys) = eval_pk_range(def, low, high, max, ctx)? {
        return Ok(PkRangeRun::Keys(keys));
    }
    Ok(PkRangeRun::Scan(match pk_ix {
        Some(ix) => Access::IndexRange {
            index: ix.id,
            name: ix.name.clone(),
            eq: Vec::new(),
            low: Some(low.clone()),
            high: Some(high.clone()),
        },
        None => Access::FullScan,
    }))
}

/// A simple shape of a conjunct over one table's row.
#[derive(Debug, Clone)]
enum Atom<'a> {
    /// col op expr (expr row-independent)
    Cmp(ColumnId, CmpKind, &'a CExpr),
    In(ColumnId, &'a [CExpr]),
}

/// A value fixed for one run of the statement, usable as a key: a
/// row-independent expression, or a column of the enclosing query's current
/// row (a correlated subquery runs once per outer row, with that row in
/// `EvalCtx::outer_row`, which is where the keys are evaluated too), so
/// that `o.c = cu.id` in a subquery looks `o` up by the outer row's value
/// instead of reading all of `o` for every outer row (issue 23).
fn is_fixed(e: &CExpr) -> bool {
    matches!(e, CExpr::Outer(_)) || is_row_independent(e)
}

fn atom(e: &CExpr) -> Option<Atom<'_>> {
    match e {
        CExpr::Cmp(k, l, r, _) => match (l.as_ref(), r.as_ref()) {
            (CExpr::Col(c), x) if is_fixed(x) => Some(Atom::Cmp(*c as ColumnId, *k, x)),
            (x, CExpr::Col(c)) if is_fixed(x) => Some(Atom::Cmp(*c as ColumnId, k.flip(), x)),
            _ => None,
        },
        CExpr::InList { expr, list, negated: false, .. } => match expr.as_ref() {
            CExpr::Col(c) if list.iter().all(is_fixed) => Some(Atom::In(*c as ColumnId, list)),
            _ => None,
        },
        _ => None,
    }
}

/// Value lists per column from equality / IN conjuncts.
fn eq_lists(conj: &[CExpr]) -> Vec<(ColumnId, Vec<&CExpr>)> {
    eq_lists_of(conj.iter())
}

/// `eq_lists` over conjuncts given by reference (an alternative of a disjunction).
fn eq_lists_of<'a>(conj: impl Iterator<Item = &'a CExpr>) -> Vec<(ColumnId, Vec<&'a CExpr>)> {
    let mut out: Vec<(ColumnId, Vec<&CExpr>)> = Vec::new();
    for c in conj {
        let (col, vals): (ColumnId, Vec<&CExpr>) = match atom(c) {
            Some(Atom::Cmp(col, CmpKind::Eq, x)) => (col, vec![x]),
            Some(Atom::In(col, list)) => (col, list.iter().collect()),
            _ => continue,
        };
        match out.iter_mut().find(|(c2, _)| *c2 == col) {
            // Several equalities on one column: keep the shortest list (all are checked later anyway).
            Some((_, v)) => {
                if vals.len() < v.len() {
                    *v = vals;
                }
            }
            None => out.push((col, vals)),
        }
    }
    out
}

fn key_product(cols: &[ColumnId], lists: &[(ColumnId, Vec<&CExpr>)]) -> Option<Vec<Vec<CExpr>>> {
    let mut keys: Vec<Vec<CExpr>> = vec![Vec::new()];
    for c in cols {
        let (_, vals) = lists.iter().find(|(x, _)| x == c)?;
        if keys.len() * vals.len() > MAX_LOOKUP_KEYS {
            return None;
        }
        let mut next = Vec::with_capacity(keys.len() * vals.len());
        for k in &keys {
            for v in vals {
                let mut k2 = k.clone();
                k2.push((*v).clone());
                next.push(k2);
            }
        }
        keys = next;
    }
    Some(keys)
}

/// Equality lists of one alternative of a disjunction.
type Alternative<'a> = Vec<(ColumnId, Vec<&'a CExpr>)>;

/// The alternatives of a conjunct that is a disjunction of conjunctions,
/// `(a = 1 AND b = 5) OR (a = 1 AND b = 77)`, which is also what a row IN
/// list `(a, b) IN ((1, 5), (1, 77))` compiles to (issue 23: TPC-C's stock
/// and Delivery statements): per alternative, its equality lists. None for
/// anything else, or for more alternatives than `MAX_LOOKUP_KEYS`.
fn or_alternatives(e: &CExpr) -> Option<Vec<Alternative<'_>>> {
    if !matches!(e, CExpr::Or(..)) {
        return None;
    }
    // Flattened without recursion: a long IN list is a deep left-leaning chain.
    let mut disjuncts: Vec<&CExpr> = Vec::new();
    let mut stack = vec![e];
    while let Some(x) = stack.pop() {
        match x {
            CExpr::Or(a, b) => {
                stack.push(b);
                stack.push(a);
            }
            other => disjuncts.push(other),
        }
        if disjuncts.len() > MAX_LOOKUP_KEYS {
            return None;
        }
    }
    let mut alts = Vec::with_capacity(disjuncts.len());
    for d in disjuncts {
        let mut conj: Vec<&CExpr> = Vec::new();
        let mut stack = vec![d];
        while let Some(x) = stack.pop() {
            match x {
                CExpr::And(a, b) => {
                    stack.push(b);
                    stack.push(a);
                }
                other => conj.push(other),
            }
        }
        alts.push(eq_lists_of(conj.into_iter()));
    }
    Some(alts)
}

/// Keys over `cols` from the equality lists, or else from one disjunctive
/// conjunct: the union, over its alternatives, of the keys each gives with
/// the other conjuncts' lists. A row that satisfies the whole predicate
/// satisfies one alternative, so one of these keys finds it (every
/// conjunct is checked again on the rows found).
fn keys_for(
    cols: &[ColumnId],
    lists: &[(ColumnId, Vec<&CExpr>)],
    alternatives: &[Vec<Alternative<'_>>],
) -> Option<Vec<Vec<CExpr>>> {
    if let Some(keys) = key_product(cols, lists) {
        return Some(keys);
    }
    'disjunctions: for alts in alternatives {
        let mut keys: Vec<Vec<CExpr>> = Vec::new();
        for alt in alts {
            // The alternative's own lists first: its values are the ones found first.
            let mut merged: Vec<(ColumnId, Vec<&CExpr>)> = alt.clone();
            merged.extend(lists.iter().filter(|(c, _)| !alt.iter().any(|(a, _)| a == c)).cloned());
            match key_product(cols, &merged) {
                // Duplicates go when the keys are evaluated (`eval_keys`).
                Some(k) if keys.len() + k.len() <= MAX_LOOKUP_KEYS => keys.extend(k),
                _ => continue 'disjunctions,
            }
        }
        return Some(keys);
    }
    None
}

/// A range bound: the bounding expression and whether it is inclusive.
type RangeBound = Option<(CExpr, bool)>;

/// Lower and upper bounds on `col` from the conjuncts (`BETWEEN`, `>`, `>=`,
/// `<`, `<=` against row-independent expressions); the first bound found on
/// each side wins.
fn range_bounds(conj: &[CExpr], col: ColumnId) -> (RangeBound, RangeBound) {
    let (mut low, mut high) = (None, None);
    for c in conj {
        match c {
            CExpr::Between { expr, low: l, high: h, negated: false, .. }
                if matches!(expr.as_ref(), CExpr::Col(x) if *x as ColumnId == col)
                    && is_row_independent(l)
                    && is_row_independent(h) =>
            {
                low.get_or_insert(((**l).clone(), true));
                high.get_or_insert(((**h).clone(), true));
            }
            _ => match atom(c) {
                Some(Atom::Cmp(c2, k, x)) if c2 == col => match k {
                    CmpKind::Gt | CmpKind::Ge => {
                        low.get_or_insert((x.clone(), k == CmpKind::Ge));
                    }
                    CmpKind::Lt | CmpKind::Le => {
                        high.get_or_insert((x.clone(), k == CmpKind::Le));
                    }
                    _ => {}
                },
                _ => {}
            },
        }
    }
    (low, high)
}

/// Choose the access path for a table given the conjuncts over its row.
pub fn choose_access(def: &TableDef, conj: &[CExpr]) -> Access {
    let lists = eq_lists(conj);
    let alternatives: Vec<Vec<Alternative<'_>>> = conj.iter().filter_map(or_alternatives).collect();
    if let Some(keys) = keys_for(&def.primary_key, &lists, &alternatives) {
        return Access::PkLookup { keys };
    }
    for ix in &def.indexes {
        if ix.unique {
            if let Some(keys) = keys_for(&ix.columns, &lists, &alternatives) {
                return Access::UniqueLookup { index: ix.id, name: ix.name.clone(), keys };
            }
        }
    }
    // Single integer pk column with both bounds: key lookups over the range.
    if let [pkc] = def.primary_key.as_slice() {
        if def.columns[*pkc as usize].ty.int_range().is_some() {
            let (low, high) = range_bounds(conj, *pkc);
            if let (Some(low), Some(high)) = (low, high) {
                return Access::PkRange { low, high };
            }
        }
    }
    // Ordered index with the longest equality prefix, plus a range on the next column.
    let mut best: Option<(usize, Access)> = None;
    for ix in def.indexes.iter().filter(|i| i.kind == IndexKind::Ordered) {
        let mut eq = Vec::new();
        for c in &ix.columns {
            match lists.iter().find(|(x, v)| x == c && v.len() == 1) {
                Some((_, v)) => eq.push(v[0].clone()),
                None => break,
            }
        }
        let (low, high) = match ix.columns.get(eq.len()) {
            Some(next) => range_bounds(conj, *next),
            None => (None, None),
        };
        let score = eq.len() * 2 + low.is_some() as usize + high.is_some() as usize;
        if score == 0 {
            continue;
        }
        if best.as_ref().is_none_or(|(s, _)| score > *s) {
            best = Some((score, Access::IndexRange { index: ix.id, name: ix.name.clone(), eq, low, high }));
        }
    }
    // Several keys on a longer prefix of an ordered index than any single
    // equality prefix: one range per key.
    let mut best_keys: Option<(usize, Access)> = None;
    for ix in def.indexes.iter().filter(|i| i.kind == IndexKind::Ordered) {
        // TIMESTAMP bounds compare in UTC; lookup keys are wall times.
        let usable = ix.columns.iter().take_while(|c| !matches!(def.columns[**c as usize].ty, ColumnType::Timestamp));
        let usable = usable.count();
        for len in (1..=usable).rev() {
            if best_keys.as_ref().is_some_and(|(l, _)| *l >= len) {
                break;
            }
            if let Some(keys) = keys_for(&ix.columns[..len], &lists, &alternatives) {
                if keys.len() > 1 && keys.len() <= MAX_INDEX_KEYS {
                    best_keys = Some((len, Access::IndexKeys { index: ix.id, name: ix.name.clone(), keys }));
                }
                break;
            }
        }
    }
    match (best, best_keys) {
        (Some((score, _)), Some((len, a))) if len * 2 > score => a,
        (None, Some((_, a))) => a,
        (Some((_, a)), _) => a,
        (None, None) => Access::FullScan,
    }
}

/// Most ranges an `IndexKeys` access reads (each is a round trip to the
/// data nodes; more keys than that scan one range or the table instead).
pub const MAX_INDEX_KEYS: usize = 256;

/// How a value converts to a key of a column.
#[derive(Debug, Clone, PartialEq)]
pub enum KeyConv {
    Val(Value),
    /// No stored value can equal it (NULL, out of range, fraction for an int column).
    NoMatch,
    /// Compared differently in SQL (e.g. a number against a string column): scan instead.
    Fallback,
}

/// Exact conversion of a lookup value to a column's key value.
pub fn key_value(v: &Value, col: &ColumnDef) -> KeyConv {
    if v.is_null() {
        return KeyConv::NoMatch;
    }
    let ty = &col.ty;
    // An integer for an integer column (a point select's `id = ?`): the
    // general path below gives the same answer through coerce_value and a
    // SQL comparison, ~150 instructions more per key.
    if let (Some((min, max)), Value::Int(_) | Value::UInt(_)) = (ty.int_range(), v) {
        let n = match v {
            Value::Int(i) => *i as i128,
            Value::UInt(u) => *u as i128,
            _ => return KeyConv::Fallback, // not reached (matched above)
        };
        return if n < min || n > max {
            KeyConv::NoMatch
        } else if ty.is_unsigned_int() {
            KeyConv::Val(Value::UInt(n as u64))
        } else {
            KeyConv::Val(Value::Int(n as i64))
        };
    }
    let candidate = match (ty, v) {
        (t, Value::Bytes(b)) if t.int_range().is_some() => {
            let s = String::from_utf8_lossy(b);
            match s.trim().parse::<i64>() {
                Ok(i) => Value::Int(i),
                Err(_) => match s.trim().parse::<u64>() {
                    Ok(u) => Value::UInt(u),
                    Err(_) => return KeyConv::Fallback,
                },
            }
        }
        (t, Value::Double(f)) if t.int_range().is_some() => {
            if f.fract() != 0.0 {
                return KeyConv::NoMatch;
            }
            if f.abs() > 9.2e18 {
                return KeyConv::Fallback;
            }
            Value::Int(*f as i64)
        }
        (t, Value::Bytes(_))
            if !t.is_bytes()
                && !matches!(t, ColumnType::Date | ColumnType::DateTime | ColumnType::Timestamp | ColumnType::Time) =>
        {
            return KeyConv::Fallback
        }
        (ColumnType::Date, Value::Bytes(b)) => match crate::engine::expr::datetime::parse_datetime(b) {
            Some((dt, _)) if (dt.hour, dt.minute, dt.second, dt.micro) == (0, 0, 0, 0) => Value::Date(dt.date),
            Some(_) => return KeyConv::NoMatch,
            None => return KeyConv::Fallback,
        },
        (ColumnType::DateTime | ColumnType::Timestamp, Value::Bytes(b)) => {
            match crate::engine::expr::datetime::parse_datetime(b) {
                Some((dt, _)) => Value::DateTime(dt),
                None => return KeyConv::Fallback,
            }
        }
        (ColumnType::Time, Value::Bytes(b)) => match crate::engine::expr::datetime::parse_time(b) {
            Some(t) => Value::Time(t),
            None => return KeyConv::Fallback,
        },
        (t, x) if t.is_bytes() && !matches!(x, Value::Bytes(_)) => return KeyConv::Fallback,
        (_, x) => x.clone(),
    };
    if !comparable_classes(&candidate, &class_sample(ty)) {
        return KeyConv::Fallback;
    }
    match coerce_value(candidate.clone(), ty, true) {
        Ok(c) => {
            // Exact only if the coerced value still equals the original.
            let mut w = Warnings::default();
            let coll = if ty.is_text() && ty.collation() == norr_signals::Collation::CaseInsensitive {
                Coll::Ci
            } else {
                Coll::Bin
            };
            // BINARY pads (its stored values are padded too); CHAR strips
            // trailing spaces and VARCHAR cuts excess ones, which stored values
            // then never have: under the NO PAD collations nothing stored
            // equals such a value.
            let exact = if ty.is_bytes() {
                matches!(ty, ColumnType::Binary { .. }) || c == candidate
            } else {
                sql_cmp(&c, &candidate, coll, &mut w) == Some(Ordering::Equal)
            };
            if exact {
                KeyConv::Val(c)
            } else {
                KeyConv::NoMatch
            }
        }
        Err(_) => KeyConv::NoMatch,
    }
}

/// Evaluate lookup keys. Ok(None) = fall back to a scan.
pub fn eval_keys(
    keys: &[Vec<CExpr>],
    cols: &[ColumnId],
    def: &TableDef,
    ctx: &mut EvalCtx,
) -> Result<Option<Vec<Vec<Value>>>, SqlError> {
    let mut out = Vec::with_capacity(keys.len());
    let tz = ctx.tz.clone();
    'keys: for k in keys {
        let mut vals = Vec::with_capacity(k.len());
        for (e, c) in k.iter().zip(cols) {
            let v = eval(e, &[], ctx)?;
            match zoned_value(&v, &def.columns[*c as usize], tz.as_deref(), Use::Lookup).0 {
                KeyConv::Val(x) => vals.push(x),
                KeyConv::NoMatch => continue 'keys,
                KeyConv::Fallback => return Ok(None),
            }
        }
        if !out.contains(&vals) {
            out.push(vals);
        }
    }
    Ok(Some(out))
}

/// Keys of an integer pk range, or None if it spans more than `max_keys`
/// values or is not integral (scan instead).
pub fn eval_pk_range(
    def: &TableDef,
    low: &(CExpr, bool),
    high: &(CExpr, bool),
    max_keys: i128,
    ctx: &mut EvalCtx,
) -> Result<Option<Vec<Vec<Value>>>, SqlError> {
    let col = &def.columns[def.primary_key[0] as usize];
    let (lo_v, hi_v) = (eval(&low.0, &[], ctx)?, eval(&high.0, &[], ctx)?);
    if lo_v.is_null() || hi_v.is_null() {
        return Ok(Some(Vec::new()));
    }
    let num = |v: &Value, w: &mut Warnings| -> Option<f64> {
        match v {
            Value::Bytes(_) => None,
            other => crate::engine::expr::value::to_f64(other, w),
        }
    };
    let mut w = Warnings::default();
    let (Some(lo), Some(hi)) = (num(&lo_v, &mut w), num(&hi_v, &mut w)) else { return Ok(None) };
    // Smallest / largest integers inside the bounds.
    let lo_i = if low.1 { lo.ceil() } else { lo.floor() + 1.0 };
    let hi_i = if high.1 { hi.floor() } else { hi.ceil() - 1.0 };
    let Some((min, max)) = col.ty.int_range() else { return Ok(None) };
    let lo_i = (lo_i.max(min as f64)) as i128;
    let hi_i = (hi_i.min(max as f64)) as i128;
    if hi_i < lo_i {
        return Ok(Some(Vec::new()));
    }
    if hi_i - lo_i + 1 > max_keys || lo.abs() > 9.0e15 || hi.abs() > 9.0e15 {
        return Ok(None);
    }
    let unsigned = col.ty.is_unsigned_int();
    Ok(Some((lo_i..=hi_i).map(|i| vec![if unsigned { Value::UInt(i as u64) } else { Value::Int(i as i64) }]).collect()))
}

/// Evaluate an index range into native bounds (widening where a bound does not convert exactly).
pub fn eval_range(
    def: &TableDef,
    index_cols: &[ColumnId],
    eq: &[CExpr],
    low: &Option<(CExpr, bool)>,
    high: &Option<(CExpr, bool)>,
    ctx: &mut EvalCtx,
) -> Result<Option<ScanRange>, SqlError> {
    let mut prefix = Vec::new();
    let tz = ctx.tz.clone();
    let zone = tz.as_deref();
    for (e, c) in eq.iter().zip(index_cols) {
        let v = eval(e, &[], ctx)?;
        match zoned_value(&v, &def.columns[*c as usize], zone, Use::Equal).0 {
            KeyConv::Val(x) => prefix.push(x),
            KeyConv::NoMatch => return Ok(None),
            KeyConv::Fallback => break,
        }
    }
    let mut lo = Bound::inclusive(prefix.clone());
    let mut hi = Bound::inclusive(prefix.clone());
    if prefix.len() == eq.len() {
        if let Some(next) = index_cols.get(prefix.len()) {
            let col = &def.columns[*next as usize];
            for (side, b) in [(true, low), (false, high)] {
                if let Some((e, incl)) = b {
                    let v = eval(e, &[], ctx)?;
                    if v.is_null() {
                        return Ok(None); // col < NULL is never true
                    }
                    let use_ = if side { Use::Low } else { Use::High };
                    if let (KeyConv::Val(x), exact) = zoned_value(&v, col, zone, use_) {
                        let mut vals = prefix.clone();
                        vals.push(x);
                        let bd = Bound { values: vals, inclusive: *incl || !exact };
                        if side {
                            lo = bd;
                        } else {
                            hi = bd;
                        }
                    }
                }
            }
        }
    }
    if lo.values.is_empty() && hi.values.is_empty() {
        return Ok(Some(ScanRange { low: Bound::unbounded(), high: Bound::unbounded() }));
    }
    Ok(Some(ScanRange { low: lo, high: hi }))
}

/// Which conjuncts a range scan of an ordered index already decides exactly
/// (true at their position): a row comes back from the range if and only if
/// the conjunct holds for it, so neither the pushed filter nor the SQL node
/// need to check it again (sysbench's `id BETWEEN ? AND ?` was checked three
/// times per row). Only proven cases count: the range is on the index's first
/// column, an integer column that is NOT NULL, and the conjunct is
/// `col BETWEEN a AND b`, `col >= a`, `col > a`, `col <= b` or `col < b`
/// (either side) whose values are integers (not strings, decimals or
/// doubles, which compare with conversions) that converted exactly into the
/// very bound of the range, inclusiveness included.
pub fn range_implied(
    def: &TableDef,
    index_cols: &[ColumnId],
    eq_len: usize,
    range: &ScanRange,
    conj: &[CExpr],
    ctx: &mut EvalCtx,
) -> Result<Vec<bool>, SqlError> {
    let mut out = vec![false; conj.len()];
    let Some(&col) = index_cols.first() else { return Ok(out) };
    let Some(cdef) = def.columns.get(col as usize) else { return Ok(out) };
    if eq_len != 0 || cdef.nullable || cdef.ty.int_range().is_none() {
        return Ok(out);
    }
    // The value `e` gives is an integer whose exact key is bound `b`'s only value.
    let is_bound = |e: &CExpr, b: &Bound, inclusive: bool, ctx: &mut EvalCtx| -> Result<bool, SqlError> {
        if b.inclusive != inclusive || b.values.len() != 1 || !is_row_independent(e) {
            return Ok(false);
        }
        let v = eval(e, &[], ctx)?;
        if !matches!(v, Value::Int(_) | Value::UInt(_)) {
            return Ok(false);
        }
        Ok(key_value(&v, cdef) == KeyConv::Val(b.values[0].clone()))
    };
    let is_col = |e: &CExpr| matches!(e, CExpr::Col(c) if *c == col as usize);
    for (i, c) in conj.iter().enumerate() {
        out[i] = match c {
            CExpr::Between { expr, low, high, negated: false, .. } if is_col(expr) => {
                is_bound(low, &range.low, true, ctx)? && is_bound(high, &range.high, true, ctx)?
            }
            CExpr::Cmp(k, l, r, _) => {
                let (k, x) = match (l.as_ref(), r.as_ref()) {
                    (l, x) if is_col(l) => (*k, x),
                    (x, r) if is_col(r) => (k.flip(), x),
                    _ => continue,
                };
                match k {
                    CmpKind::Ge | CmpKind::Gt => is_bound(x, &range.low, k == CmpKind::Ge, ctx)?,
                    CmpKind::Le | CmpKind::Lt => is_bound(x, &range.high, k == CmpKind::Le, ctx)?,
                    _ => false,
                }
            }
            _ => false,
        };
    }
    Ok(out)
}

/// Which conjuncts key lookups decide exactly, as bits (bit i for conjunct
/// i; conjuncts past the 64th are not reported): every row a lookup returns
/// satisfies them, so the SQL node need not check them again (sysbench's
/// point select checked `id = ?` on the row that key `id` had just found).
/// Only proven cases count: `col = x` (either side) on an integer key column,
/// where `x` is a parameter or literal holding an integer (not a string,
/// decimal or double, which compare with conversions) and is that column's
/// expression in every key. Call it only when `eval_keys` converted the keys
/// (`Some`): a key it kept holds `x`'s integer exactly, so a row found by it
/// has that column equal to `x`; a key it dropped finds no row.
pub fn keys_implied(
    def: &TableDef,
    key_cols: &[ColumnId],
    keys: &[Vec<CExpr>],
    conj: &[CExpr],
    params: &[Value],
) -> u64 {
    let mut out = 0;
    for (i, c) in conj.iter().enumerate().take(64) {
        let CExpr::Cmp(CmpKind::Eq, l, r, _) = c else { continue };
        let (col, x) = match (l.as_ref(), r.as_ref()) {
            (CExpr::Col(col), x) | (x, CExpr::Col(col)) => (*col, x),
            _ => continue,
        };
        let v = match x {
            CExpr::Param(n) => params.get(*n),
            CExpr::Lit(v) => Some(v),
            _ => None,
        };
        if !matches!(v, Some(Value::Int(_) | Value::UInt(_))) {
            continue;
        }
        let Some(j) = key_cols.iter().position(|k| *k as usize == col) else { continue };
        if def.columns.get(col).is_none_or(|d| d.ty.int_range().is_none()) {
            continue;
        }
        if !keys.is_empty() && keys.iter().all(|k| k.get(j) == Some(x)) {
            out |= 1 << i;
        }
    }
    out
}

fn cmp_op(k: CmpKind) -> CmpOp {
    match k {
        CmpKind::Eq => CmpOp::Eq,
        CmpKind::Ne => CmpOp::Ne,
        CmpKind::Lt => CmpOp::Lt,
        CmpKind::Le => CmpOp::Le,
        CmpKind::Gt => CmpOp::Gt,
        CmpKind::Ge => CmpOp::Ge,
    }
}

/// Most nodes of a pushed filter we build.
const MAX_PUSHED_NODES: usize = 1024;

/// Translate conjuncts into a data-node filter (those that translate exactly;
/// the rest stay SQL-side only), leaving out those marked in `skip` (decided
/// by the scan's range already). None = nothing to push.
pub fn build_filter(
    def: &TableDef,
    conj: &[CExpr],
    skip: &[bool],
    ctx: &mut EvalCtx,
) -> Result<Option<Filter>, SqlError> {
    let mut parts = Vec::new();
    let mut budget = MAX_PUSHED_NODES;
    for (i, c) in conj.iter().enumerate() {
        if skip.get(i).copied().unwrap_or(false) {
            continue;
        }
        if let Some(f) = push(def, c, ctx, &mut budget)? {
            parts.push(f);
        }
    }
    Ok(match parts.len() {
        0 => None,
        1 => parts.pop(),
        _ => Some(Filter::And(parts)),
    })
}

/// A value to push compared with column `col` (see `zoned_value` for
/// `zone` and `use_`), and whether it is exact (else a bound must be
/// inclusive).
fn filter_value(def: &TableDef, col: ColumnId, v: Value, zone: Option<&Zone>, use_: Use) -> Option<(Value, bool)> {
    let c = def.columns.get(col as usize)?;
    if zone.is_some() && matches!(c.ty, ColumnType::Timestamp) {
        return match zoned_value(&v, c, zone, use_) {
            (KeyConv::Val(x), exact) => Some((x, exact)),
            _ => None,
        };
    }
    filter_value_utc(c, v).map(|x| (x, true))
}

fn filter_value_utc(c: &ColumnDef, v: Value) -> Option<Value> {
    match key_value(&v, c) {
        KeyConv::Val(x) => Some(x),
        _ => {
            // Same class but out of range is still comparable by value.
            if comparable_classes(&v, &class_sample(&c.ty)) && !matches!(v, Value::Bytes(_)) && !c.ty.is_bytes() {
                Some(v)
            } else {
                None
            }
        }
    }
}

fn push(def: &TableDef, e: &CExpr, ctx: &mut EvalCtx, budget: &mut usize) -> Result<Option<Filter>, SqlError> {
    if *budget == 0 {
        return Ok(None);
    }
    *budget -= 1;
    let col_ok = |c: usize| c < def.columns.len();
    let tz = ctx.tz.clone();
    let zone = tz.as_deref();
    Ok(match e {
        CExpr::IsNull(x, neg) => match x.as_ref() {
            CExpr::Col(c) if col_ok(*c) => {
                Some(if *neg { Filter::IsNotNull(*c as ColumnId) } else { Filter::IsNull(*c as ColumnId) })
            }
            _ => None,
        },
        CExpr::Cmp(k, l, r, coll) => {
            let (c, k, x) = match (l.as_ref(), r.as_ref()) {
                (CExpr::Col(c), x) if is_row_independent(x) => (*c, *k, x),
                (x, CExpr::Col(c)) if is_row_independent(x) => (*c, k.flip(), x),
                (CExpr::Col(a), CExpr::Col(b)) if col_ok(*a) && col_ok(*b) => {
                    let (ta, tb) = (&def.columns[*a].ty, &def.columns[*b].ty);
                    // Two TIMESTAMPs: UTC moments order as their wall times
                    // do, except across a DST change that repeats an hour.
                    let dst = matches!(zone, Some(Zone::Named(_))) && matches!(ta, ColumnType::Timestamp);
                    if ta == tb && (!ta.is_text() || *coll == coll_of(ta)) && !dst {
                        return Ok(Some(Filter::CmpCols {
                            left: *a as ColumnId,
                            op: cmp_op(*k),
                            right: *b as ColumnId,
                        }));
                    }
                    return Ok(None);
                }
                _ => return Ok(None),
            };
            if !col_ok(c) {
                return Ok(None);
            }
            let ty = &def.columns[c].ty;
            if ty.is_text() && *coll != coll_of(ty) {
                return Ok(None);
            }
            let v = eval(x, &[], ctx)?;
            if v.is_null() {
                return Ok(Some(Filter::False));
            }
            let use_ = match k {
                CmpKind::Eq | CmpKind::Ne => Use::Equal,
                CmpKind::Gt | CmpKind::Ge => Use::Low,
                CmpKind::Lt | CmpKind::Le => Use::High,
            };
            filter_value(def, c as ColumnId, v, zone, use_).map(|(value, exact)| {
                // An inexact bound (a wall time DST repeats or skips) includes itself.
                let k = match k {
                    CmpKind::Gt if !exact => CmpKind::Ge,
                    CmpKind::Lt if !exact => CmpKind::Le,
                    k => k,
                };
                Filter::Cmp { col: c as ColumnId, op: cmp_op(k), value }
            })
        }
        CExpr::Between { expr, low, high, negated: false, coll } => match expr.as_ref() {
            CExpr::Col(c) if col_ok(*c) && is_row_independent(low) && is_row_independent(high) => {
                let ty = &def.columns[*c].ty;
                if ty.is_text() && *coll != coll_of(ty) {
                    return Ok(None);
                }
                let (lv, hv) = (eval(low, &[], ctx)?, eval(high, &[], ctx)?);
                match (
                    filter_value(def, *c as ColumnId, lv, zone, Use::Low),
                    filter_value(def, *c as ColumnId, hv, zone, Use::High),
                ) {
                    (Some((a, _)), Some((b, _))) => Some(Filter::And(vec![
                        Filter::Cmp { col: *c as ColumnId, op: CmpOp::Ge, value: a },
                        Filter::Cmp { col: *c as ColumnId, op: CmpOp::Le, value: b },
                    ])),
                    _ => None,
                }
            }
            _ => None,
        },
        CExpr::InList { expr, list, negated: false, coll } => match expr.as_ref() {
            CExpr::Col(c) if col_ok(*c) && list.iter().all(is_row_independent) && list.len() <= 256 => {
                let ty = &def.columns[*c].ty;
                if ty.is_text() && *coll != coll_of(ty) {
                    return Ok(None);
                }
                let mut alts = Vec::new();
                for x in list {
                    let v = eval(x, &[], ctx)?;
                    if v.is_null() {
                        continue;
                    }
                    match filter_value(def, *c as ColumnId, v, zone, Use::Equal) {
                        Some((value, _)) => alts.push(Filter::Cmp { col: *c as ColumnId, op: CmpOp::Eq, value }),
                        None => return Ok(None),
                    }
                }
                Some(if alts.is_empty() { Filter::False } else { Filter::Or(alts) })
            }
            _ => None,
        },
        CExpr::Like { expr, pattern, escape: b'\\', negated, coll } => match (expr.as_ref(), pattern.as_ref()) {
            (CExpr::Col(c), p) if col_ok(*c) && is_row_independent(p) && def.columns[*c].ty.is_bytes() => {
                let ty = &def.columns[*c].ty;
                if ty.is_text() && *coll != coll_of(ty) {
                    return Ok(None);
                }
                match eval(p, &[], ctx)? {
                    Value::Bytes(pat) => {
                        let f = Filter::Like { col: *c as ColumnId, pattern: pat };
                        Some(if *negated {
                            Filter::And(vec![Filter::IsNotNull(*c as ColumnId), Filter::Not(Box::new(f))])
                        } else {
                            f
                        })
                    }
                    _ => None,
                }
            }
            _ => None,
        },
        CExpr::And(a, b) => {
            let fa = push(def, a, ctx, budget)?;
            let fb = push(def, b, ctx, budget)?;
            match (fa, fb) {
                (Some(x), Some(y)) => Some(Filter::And(vec![x, y])),
                (Some(x), None) | (None, Some(x)) => Some(x),
                (None, None) => None,
            }
        }
        CExpr::Or(a, b) => match (push(def, a, ctx, budget)?, push(def, b, ctx, budget)?) {
            (Some(x), Some(y)) => Some(Filter::Or(vec![x, y])),
            _ => None,
        },
        _ => None,
    })
}

pub fn coll_of(ty: &ColumnType) -> Coll {
    if ty.is_text() && ty.collation() == norr_signals::Collation::CaseInsensitive {
        Coll::Ci
    } else {
        Coll::Bin
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::expr::value::Coll;
    use norr_signals::{IndexDef, PartitionScheme};

    fn def() -> TableDef {
        TableDef {
            id: 7,
            version: 1,
            name: "db/t".into(),
            columns: vec![
                ColumnDef::new("id", ColumnType::Int { unsigned: false }).not_null(),
                ColumnDef::new("k", ColumnType::Int { unsigned: false }),
                ColumnDef::new("c", ColumnType::Char { len: 10, collation: norr_signals::Collation::CaseInsensitive }),
                ColumnDef::new(
                    "u",
                    ColumnType::Varchar { len: 10, collation: norr_signals::Collation::CaseInsensitive },
                ),
            ],
            primary_key: vec![0],
            partitioning: PartitionScheme::Key { columns: vec![] },
            partitions: 4,
            indexes: vec![
                IndexDef { id: 1, name: "k_1".into(), columns: vec![1], unique: false, kind: IndexKind::Ordered },
                IndexDef { id: 2, name: "u_1".into(), columns: vec![3], unique: true, kind: IndexKind::Ordered },
                IndexDef {
                    id: 3,
                    name: "PRIMARY$ordered".into(),
                    columns: vec![0],
                    unique: true,
                    kind: IndexKind::Ordered,
                },
            ],
            extra: vec![],
            options: Default::default(),
        }
    }
    fn col(i: usize) -> Box<CExpr> {
        Box::new(CExpr::Col(i))
    }
    fn lit(v: i64) -> Box<CExpr> {
        Box::new(CExpr::Lit(Value::Int(v)))
    }
    fn cmp(k: CmpKind, c: usize, v: i64) -> CExpr {
        CExpr::Cmp(k, col(c), lit(v), Coll::Ci)
    }

    #[test]
    fn pk_equality_is_a_lookup() {
        let a = choose_access(&def(), &[cmp(CmpKind::Eq, 0, 5)]);
        assert_eq!(a, Access::PkLookup { keys: vec![vec![CExpr::Lit(Value::Int(5))]] });
        // reversed operands and a parameter
        let a = choose_access(&def(), &[CExpr::Cmp(CmpKind::Eq, Box::new(CExpr::Param(0)), col(0), Coll::Ci)]);
        assert_eq!(a, Access::PkLookup { keys: vec![vec![CExpr::Param(0)]] });
    }

    #[test]
    fn pk_in_list_is_a_batch() {
        let e = CExpr::InList {
            expr: col(0),
            list: vec![CExpr::Lit(Value::Int(1)), CExpr::Lit(Value::Int(2))],
            negated: false,
            coll: Coll::Ci,
        };
        match choose_access(&def(), &[e]) {
            Access::PkLookup { keys } => assert_eq!(keys.len(), 2),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unique_and_range_and_full() {
        let e = CExpr::Cmp(CmpKind::Eq, col(3), Box::new(CExpr::Lit(Value::str("x"))), Coll::Ci);
        assert!(matches!(choose_access(&def(), &[e]), Access::UniqueLookup { index: 2, .. }));
        let a = choose_access(&def(), &[cmp(CmpKind::Ge, 1, 3), cmp(CmpKind::Lt, 1, 9)]);
        match a {
            Access::IndexRange { index: 1, eq, low: Some((_, true)), high: Some((_, false)), .. } => {
                assert!(eq.is_empty())
            }
            other => panic!("{other:?}"),
        }
        let b = CExpr::Between { expr: col(0), low: lit(1), high: lit(10), negated: false, coll: Coll::Ci };
        assert!(matches!(choose_access(&def(), std::slice::from_ref(&b)), Access::PkRange { .. }));
        let Access::PkRange { low, high } = choose_access(&def(), &[b]) else { panic!() };
        let mut ctx = EvalCtx::new(&[]);
        assert_eq!(eval_pk_range(&def(), &low, &high, MAX_RANGE_AS_KEYS, &mut ctx).unwrap().unwrap().len(), 10);
        // one-sided pk range: ordered index on the pk
        assert!(matches!(choose_access(&def(), &[cmp(CmpKind::Gt, 0, 5)]), Access::IndexRange { index: 3, .. }));
        let wide = CExpr::Between { expr: col(0), low: lit(1), high: lit(1_000_000), negated: false, coll: Coll::Ci };
        let Access::PkRange { low, high } = choose_access(&def(), &[wide]) else { panic!() };
        assert_eq!(eval_pk_range(&def(), &low, &high, MAX_RANGE_AS_KEYS_NO_INDEX, &mut ctx).unwrap(), None);
        // Too wide for key lookups: a range scan of the PRIMARY ordered index,
        // or a full scan for a table without one.
        let mut d = def();
        d.indexes[2].name = "PRIMARY".into();
        d.indexes[2].unique = false;
        match resolve_pk_range(&d, &low, &high, &mut ctx).unwrap() {
            PkRangeRun::Scan(Access::IndexRange { index: 3, low: Some(_), high: Some(_), .. }) => {}
            other => panic!("{other:?}"),
        }
        let between =
            |hi: i64| CExpr::Between { expr: col(0), low: lit(1), high: lit(hi), negated: false, coll: Coll::Ci };
        let Access::PkRange { low: l33, high: h33 } = choose_access(&d, &[between(33)]) else { panic!() };
        assert!(matches!(resolve_pk_range(&d, &l33, &h33, &mut ctx).unwrap(), PkRangeRun::Scan(_)));
        let Access::PkRange { low: l32, high: h32 } = choose_access(&d, &[between(32)]) else { panic!() };
        assert!(matches!(resolve_pk_range(&d, &l32, &h32, &mut ctx).unwrap(), PkRangeRun::Keys(k) if k.len() == 32));
        assert!(
            matches!(resolve_pk_range(&def(), &l33, &h33, &mut ctx).unwrap(), PkRangeRun::Keys(k) if k.len() == 33)
        );
        assert!(matches!(resolve_pk_range(&def(), &low, &high, &mut ctx).unwrap(), PkRangeRun::Scan(Access::FullScan)));
        assert_eq!(choose_access(&def(), &[cmp(CmpKind::Ne, 0, 1)]), Access::FullScan);
        // column compared to another column: not a key
        assert_eq!(choose_access(&def(), &[CExpr::Cmp(CmpKind::Eq, col(0), col(1), Coll::Ci)]), Access::FullScan);
        assert_eq!(choose_access(&def(), &[]), Access::FullScan);
    }

    #[test]
    fn key_conversion_is_exact() {
        let d = def();
        assert_eq!(key_value(&Value::str("12"), &d.columns[0]), KeyConv::Val(Value::Int(12)));
        assert_eq!(key_value(&Value::str("abc"), &d.columns[0]), KeyConv::Fallback);
        assert_eq!(key_value(&Value::Double(1.5), &d.columns[0]), KeyConv::NoMatch);
        assert_eq!(key_value(&Value::Int(1 << 40), &d.columns[0]), KeyConv::NoMatch);
        assert_eq!(key_value(&Value::Null, &d.columns[0]), KeyConv::NoMatch);
        assert_eq!(key_value(&Value::Int(5), &d.columns[2]), KeyConv::Fallback);
        assert_eq!(key_value(&Value::str("01234567890"), &d.columns[2]), KeyConv::NoMatch);
    }

    #[test]
    fn integer_keys_convert_to_the_column_signedness() {
        let int = ColumnDef::new("i", ColumnType::Int { unsigned: false });
        let uint = ColumnDef::new("u", ColumnType::Int { unsigned: true });
        let big = ColumnDef::new("b", ColumnType::BigInt { unsigned: false });
        let ubig = ColumnDef::new("ub", ColumnType::BigInt { unsigned: true });
        assert_eq!(key_value(&Value::Int(-5), &int), KeyConv::Val(Value::Int(-5)));
        assert_eq!(key_value(&Value::UInt(5), &int), KeyConv::Val(Value::Int(5)));
        assert_eq!(key_value(&Value::Int(i32::MAX as i64), &int), KeyConv::Val(Value::Int(i32::MAX as i64)));
        assert_eq!(key_value(&Value::Int(i32::MAX as i64 + 1), &int), KeyConv::NoMatch);
        assert_eq!(key_value(&Value::Int(i32::MIN as i64 - 1), &int), KeyConv::NoMatch);
        assert_eq!(key_value(&Value::Int(5), &uint), KeyConv::Val(Value::UInt(5)));
        assert_eq!(key_value(&Value::Int(-1), &uint), KeyConv::NoMatch);
        assert_eq!(key_value(&Value::UInt(u32::MAX as u64 + 1), &uint), KeyConv::NoMatch);
        assert_eq!(key_value(&Value::UInt(u64::MAX), &big), KeyConv::NoMatch);
        assert_eq!(key_value(&Value::Int(i64::MIN), &big), KeyConv::Val(Value::Int(i64::MIN)));
        assert_eq!(key_value(&Value::UInt(u64::MAX), &ubig), KeyConv::Val(Value::UInt(u64::MAX)));
        assert_eq!(key_value(&Value::Int(i64::MIN), &ubig), KeyConv::NoMatch);
    }

    #[test]
    fn integer_key_equalities_are_implied() {
        let d = def();
        let param_eq = CExpr::Cmp(CmpKind::Eq, Box::new(CExpr::Param(0)), col(0), Coll::Ci);
        let keys = vec![vec![CExpr::Param(0)]];
        let conj = [param_eq.clone(), cmp(CmpKind::Gt, 1, 3)];
        assert_eq!(keys_implied(&d, &d.primary_key, &keys, &conj, &[Value::Int(5)]), 0b01);
        assert_eq!(keys_implied(&d, &d.primary_key, &keys, &conj, &[Value::UInt(5)]), 0b01);
        // A string, double or decimal compares with conversions: checked again.
        for v in [Value::str("5"), Value::Double(5.0), Value::Decimal(norr_signals::Decimal { mantissa: 5, scale: 0 })]
        {
            assert_eq!(keys_implied(&d, &d.primary_key, &keys, &conj, &[v]), 0);
        }
        // A literal key; an equality whose value is not the key's expression.
        let lit_keys = vec![vec![CExpr::Lit(Value::Int(5))]];
        assert_eq!(keys_implied(&d, &d.primary_key, &lit_keys, &[cmp(CmpKind::Eq, 0, 5)], &[]), 1);
        assert_eq!(keys_implied(&d, &d.primary_key, &lit_keys, &[cmp(CmpKind::Eq, 0, 6)], &[]), 0);
        // Equality on a column that is not a key column.
        assert_eq!(keys_implied(&d, &d.primary_key, &lit_keys, &[cmp(CmpKind::Eq, 1, 5)], &[]), 0);
        // IN lists are checked again (several keys, no single equality).
        let two = vec![vec![CExpr::Lit(Value::Int(1))], vec![CExpr::Lit(Value::Int(2))]];
        assert_eq!(keys_implied(&d, &d.primary_key, &two, &[cmp(CmpKind::Eq, 0, 1)], &[]), 0);
    }

    #[test]
    fn filters_push_down() {
        let d = def();
        let mut ctx = EvalCtx::new(&[]);
        let f = build_filter(&d, &[cmp(CmpKind::Gt, 1, 3), CExpr::IsNull(col(2), true)], &[], &mut ctx).unwrap();
        assert_eq!(
            f,
            Some(Filter::And(vec![Filter::Cmp { col: 1, op: CmpOp::Gt, value: Value::Int(3) }, Filter::IsNotNull(2)]))
        );
        // string literal vs int column is not pushed (MySQL compares as double)
        let e = CExpr::Cmp(CmpKind::Eq, col(1), Box::new(CExpr::Lit(Value::str("3x"))), Coll::Ci);
        assert_eq!(build_filter(&d, &[e], &[], &mut ctx).unwrap(), None);
        let like = CExpr::Like {
            expr: col(2),
            pattern: Box::new(CExpr::Lit(Value::str("ab%"))),
            escape: b'\\',
            negated: false,
            coll: Coll::Ci,
        };
        assert_eq!(
            build_filter(&d, &[like], &[], &mut ctx).unwrap(),
            Some(Filter::Like { col: 2, pattern: b"ab%".to_vec() })
        );
    }
}
