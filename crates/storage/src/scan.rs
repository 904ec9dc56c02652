//! Partition scans: full scans in slot order and ordered-index range scans.
//!
//! A cursor holds a position, never a reference into storage, so it stays valid
//! across the inserts, updates and deletes LQH commits between batches:
//! * full scan: the next RowId to look at. Rows live in slots that do not move,
//!   so each row is seen at most once; rows inserted into slots behind the
//!   cursor are missed, rows deleted before the cursor reaches them are not
//!   returned.
//! * ordered scan: the last returned entry key (`index key ++ pk`); the next
//!   batch resumes strictly after (ascending) or before (descending) it. Entries
//!   are unique, so no entry is returned twice. (An update that moves a row's
//!   index key past the cursor makes it a new entry, which is then returned
//!   again under its new key, as in any B-tree scan without locks.)

use crate::fixed_pages::RowId;
use crate::ordered_index::{key_range, range_is_empty, IKey};
use crate::row_format::IntKeyCol;
use crate::table_store::TableStore;
use norr_signals::coerce::{class_sample, coerce_value, compare_values, rescale_round};
use norr_signals::filter_eval::eval_filter;
use norr_signals::internal::RowKeys;
use norr_signals::keycode::encode_value;
use norr_signals::ops::{Bound as ScanBound, Filter, ScanRange};
use norr_signals::schema::IndexKind;
use norr_signals::value::Value;
use norr_signals::value::{ColumnType, Decimal};
use norr_signals::{ColumnId, ErrorCode, IndexId, NodeError};
use std::cmp::Ordering;
use std::ops::Bound;

/// Resumable position of a partition scan.
#[derive(Debug, Clone, PartialEq)]
pub enum ScanCursor {
    Full {
        next: u64,
        done: bool,
    },
    Ordered {
        index: IndexId,
        low: Bound<Vec<u8>>,
        high: Bound<Vec<u8>>,
        descending: bool,
        last: Option<Vec<u8>>,
        done: bool,
    },
}

impl ScanCursor {
    pub fn is_done(&self) -> bool {
        match self {
            ScanCursor::Full { done, .. } | ScanCursor::Ordered { done, .. } => *done,
        }
    }

    /// Whether an entry with this ordered key (`index key ++ pk`) lies in the
    /// scan's range (always true for a full scan). Used for rows that are not
    /// in storage yet (a transaction's own uncommitted writes) but must be
    /// returned as if the scan had found them.
    pub fn admits(&self, key: &[u8]) -> bool {
        match self {
            ScanCursor::Full { .. } => true,
            ScanCursor::Ordered { low, high, .. } => {
                let above = match low {
                    Bound::Unbounded => true,
                    Bound::Included(l) => key >= l.as_slice(),
                    Bound::Excluded(l) => key > l.as_slice(),
                };
                let below = match high {
                    Bound::Unbounded => true,
                    Bound::Included(h) => key <= h.as_slice(),
                    Bound::Excluded(h) => key < h.as_slice(),
                };
                above && below
            }
        }
    }
}

fn as_slice_bound(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(v) => Bound::Included(v.as_slice()),
        Bound::Excluded(v) => Bound::Excluded(v.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn bad_bound(msg: String) -> NodeError {
    NodeError::with(ErrorCode::BadScanBound, msg)
}

/// A bound prefix ready for the B-tree: encoded values, whether it ends in an
/// infinite value (`Some(true)` = +inf, `Some(false)` = -inf) and whether it
/// is inclusive.
struct EncodedBound {
    prefix: Vec<u8>,
    inf: Option<bool>,
    inclusive: bool,
}

/// A number between two values of an integer or DECIMAL column (2.5 for an
/// INT, 1.004 for a DECIMAL(5,2)) bounds the range at the nearest column value
/// inside it: the ceiling for a low bound, the floor for a high bound (both
/// then inclusive), returned with `true`. An exact float comes back as the
/// equal decimal with `false`; None if the column or value is not numeric.
fn inside_value(v: &Value, t: &ColumnType, low_side: bool) -> Option<(Value, bool)> {
    let scale = match t {
        ColumnType::Decimal { scale, .. } => *scale,
        _ if t.int_range().is_some() => 0,
        _ => return None,
    };
    let scaled = |f: f64| {
        let x = (f * 10f64.powi(scale as i32)).round();
        (x.is_finite() && x.abs() < 1e37).then_some(x as i128)
    };
    let cand = match v {
        Value::Decimal(d) => rescale_round(d.mantissa, d.scale, scale)?,
        Value::Double(f) => scaled(*f)?,
        Value::Float(f) => scaled(*f as f64)?,
        _ => return None,
    };
    let dec = |m: i128| Value::Decimal(Decimal { mantissa: m, scale });
    let m = match compare_values(&dec(cand), v, t)? {
        // Exact: the same number as a decimal, which integer columns accept.
        Ordering::Equal => return Some((dec(cand), false)),
        Ordering::Less if low_side => cand + 1,
        Ordering::Greater if !low_side => cand - 1,
        _ => cand,
    };
    Some((dec(m), true))
}

/// One batch of an ordered scan, between these entry keys.
struct OrderedStep<'a> {
    index: IndexId,
    lo: Bound<&'a [u8]>,
    hi: Bound<&'a [u8]>,
    descending: bool,
    st: &'a ScanStep<'a>,
    examine_limit: usize,
}

/// What one `scan_next_rows` call reads and how far it may go.
#[derive(Debug, Clone, Copy)]
pub struct ScanStep<'a> {
    /// Only rows this filter accepts are returned.
    pub filter: Option<&'a Filter>,
    /// Columns to decode, by column id (None: all). The others read as NULL;
    /// the filter's and the projection's columns must be among them.
    pub cols: Option<&'a [bool]>,
    /// Some: each row comes back as these columns, in this order (a column
    /// named twice is copied), instead of the whole (masked) row.
    pub projection: Option<&'a [ColumnId]>,
    /// At most this many rows are returned per call.
    pub max_rows: usize,
    /// At most this many rows are looked at per call (at least one).
    pub examine_limit: usize,
    /// Ordered scans: return each row's entry key (`ScanBatch::keys`). Off
    /// when nobody orders or merges by them (the resume position is kept
    /// either way).
    pub keys: bool,
}

/// Rows one `scan_next_rows` call found.
#[derive(Debug, Default)]
pub struct ScanBatch {
    /// Where each row is stored, one per row.
    pub ids: Vec<RowId>,
    pub rows: Vec<Vec<Value>>,
    /// Ordered scans with `ScanStep::keys`: each row's entry key (`index key
    /// ++ pk`, as `Storage::ordered_key` computes it), one per row. Empty
    /// otherwise.
    pub keys: RowKeys,
}

impl ScanBatch {
    /// `push_key` of the primary-key order's entry for this encoded pk
    /// (`pk ++ pk`).
    fn push_entry_of_pk(&mut self, pk: &[u8], rows: usize) {
        if self.keys.is_empty() {
            let rows = rows.min(RESERVE_ROWS);
            self.keys.reserve(rows, rows * 2 * pk.len());
        }
        self.keys.push_parts(pk, pk);
    }

    /// Append the entry key of the row just added; the first key of a batch
    /// makes room for `rows` keys of its size (one allocation, not a growth
    /// per doubling).
    fn push_key(&mut self, key: &[u8], rows: usize) {
        if self.keys.is_empty() {
            let rows = rows.min(RESERVE_ROWS);
            self.keys.reserve(rows, rows * key.len());
        }
        self.keys.push(key);
    }
}

/// Order of the primary-key order's entry `pk ++ pk` relative to `bound`
/// (any byte string), without building the entry.
fn cmp_doubled(pk: &[u8], bound: &[u8]) -> Ordering {
    let n = pk.len();
    let m = n.min(bound.len());
    pk[..m].cmp(&bound[..m]).then_with(|| {
        if bound.len() <= n {
            // The bound is a prefix of the entry.
            (2 * n).cmp(&bound.len())
        } else {
            pk.cmp(&bound[n..])
        }
    })
}

/// One end of a primary-key order scan (an entry key `pk ++ pk`, or none),
/// set against rows. For a pk of one integer column whose bound starts
/// with a whole non-NULL value, a row's entry compares as its integer
/// compares with the bound's, and a row of exactly the bound's integer the
/// same way each time: decided once here, so rows are not encoded.
struct PkBound<'a> {
    bound: Bound<&'a [u8]>,
    int: Option<(IntKeyCol, IntBoundCmp)>,
}

/// How rows of a one-integer pk compare with a bound.
#[derive(Debug, Clone, Copy, PartialEq)]
enum IntBoundCmp {
    /// Every non-NULL row's entry compares so (the bound is empty, or
    /// starts with a NULL or infinity marker).
    All(Ordering),
    /// Rows below `key` are Less, above it Greater; a row of `key` is `at`.
    Key { key: u64, at: Ordering },
}

impl IntBoundCmp {
    /// None if the bound is a partial value (decided per row by bytes).
    fn new(bound: &[u8]) -> Option<IntBoundCmp> {
        match bound {
            [] => Some(IntBoundCmp::All(Ordering::Greater)),
            [m, ..] if *m != 0x01 => Some(IntBoundCmp::All(0x01u8.cmp(m))),
            [_, k @ ..] if k.len() >= 8 => {
                let key = u64::from_be_bytes(k[..8].try_into().expect("8 bytes"));
                let mut enc = [0x01u8; 9];
                enc[1..].copy_from_slice(&key.to_be_bytes());
                Some(IntBoundCmp::Key { key, at: cmp_doubled(&enc, bound) })
            }
            _ => None,
        }
    }

    fn cmp(self, row_key: u64) -> Ordering {
        match self {
            IntBoundCmp::All(o) => o,
            IntBoundCmp::Key { key, at } => row_key.cmp(&key).then(at),
        }
    }
}

impl<'a> PkBound<'a> {
    fn new(bound: Bound<&'a [u8]>, int_pk: Option<IntKeyCol>) -> PkBound<'a> {
        let int = match (int_pk, bound) {
            (Some(c), Bound::Included(b) | Bound::Excluded(b)) => IntBoundCmp::new(b).map(|i| (c, i)),
            _ => None,
        };
        PkBound { bound, int }
    }

    /// Whether an entry ordered `o` relative to the bound lies outside it,
    /// on the side `side` (Less: a low bound, Greater: a high one).
    fn outside(&self, o: Ordering, side: Ordering) -> bool {
        match self.bound {
            Bound::Unbounded => false,
            Bound::Included(_) => o == side,
            Bound::Excluded(_) => o == side || o == Ordering::Equal,
        }
    }

    /// `outside` for the entry of this encoded pk.
    fn key_outside(&self, pk: &[u8], side: Ordering) -> bool {
        match self.bound {
            Bound::Unbounded => false,
            Bound::Included(b) | Bound::Excluded(b) => self.outside(cmp_doubled(pk, b), side),
        }
    }

    /// `outside` for the stored row in `slot`; `key` is scratch for its
    /// encoded pk when the row must be encoded after all.
    fn slot_outside(
        &self,
        slot: &[u8],
        key: &mut Vec<u8>,
        enc_slot: &impl Fn(&[u8], &mut Vec<u8>),
        side: Ordering,
    ) -> bool {
        if let Bound::Unbounded = self.bound {
            return false;
        }
        if let Some((c, i)) = self.int {
            if let Some(k) = c.key(slot) {
                return self.outside(i.cmp(k), side);
            }
        }
        enc_slot(slot, key);
        self.key_outside(key, side)
    }
}

/// Most rows a scan step makes room for at once (a step usually returns far
/// fewer rows than it may).
const RESERVE_ROWS: usize = 16;

impl TableStore {
    /// `scan_next` over the primary-key order (see `pk_order`). Its entries'
    /// keys are not stored: each is encoded from the row as `pk ++ pk` (an
    /// ordered index entry is `index key ++ pk`, and this index's key is the
    /// pk), so bounds, the resume position and TC's merge key work as for any
    /// ordered index.
    fn scan_pk_order(
        &self,
        pi: usize,
        st: &OrderedStep<'_>,
        last: &mut Option<Vec<u8>>,
        done: &mut bool,
        out: &mut ScanBatch,
    ) -> Result<bool, NodeError> {
        let part = &self.parts[pi];
        let (fixed, var, order) = (part.fixed(), &part.var, &part.pk_order);
        // Each row's slot is looked up once and used for the bound check,
        // the row itself and its entry key.
        let enc_slot = |slot: &[u8], b: &mut Vec<u8>| self.pk.encode_slot(&self.layout, slot, var, b);
        // Bounds are entry keys (`pk ++ pk`): compared with the pk alone,
        // without building the entry; for a one-integer pk, with the row's
        // integer alone, without encoding its key.
        let int_pk = self.pk.single_int();
        let (lo, hi) = (PkBound::new(st.lo, int_pk), PkBound::new(st.hi, int_pk));
        let mut key = Vec::new();
        let below_lo = |slot: &[u8], key: &mut Vec<u8>| lo.slot_outside(slot, key, &enc_slot, Ordering::Less);
        let above_hi = |slot: &[u8], key: &mut Vec<u8>| hi.slot_outside(slot, key, &enc_slot, Ordering::Greater);
        let mut cur = if st.descending {
            order.prev(order.seek(|pk| !hi.key_outside(pk, Ordering::Greater), |r| !above_hi(fixed.slot(r), &mut key)))
        } else {
            Some(order.seek(|pk| lo.key_outside(pk, Ordering::Less), |r| below_lo(fixed.slot(r), &mut key)))
        };
        // The entry at `cur` and its slot, if it is still inside the range.
        let at = |cur: Option<crate::pk_order::Pos>, key: &mut Vec<u8>| {
            let r = order.get(cur?)?;
            let slot = fixed.slot(r);
            let outside = if st.descending { below_lo(slot, key) } else { above_hi(slot, key) };
            (!outside).then_some((r, slot))
        };
        let (mut examined, mut returned) = (0usize, 0usize);
        let mut row = Vec::new();
        let mut last_slot = None;
        while returned < st.st.max_rows && examined < st.examine_limit {
            let Some((r, slot)) = at(cur, &mut key) else {
                *done = true;
                return Ok(true);
            };
            examined += 1;
            last_slot = Some(slot);
            if self.scan_slot(pi, r, slot, st.st, &mut row, out)? {
                if st.st.keys {
                    enc_slot(slot, &mut key);
                    out.push_entry_of_pk(&key, st.st.max_rows);
                }
                returned += 1;
            }
            let p = cur.expect("at an entry");
            cur = if st.descending { order.prev(p) } else { Some(order.next(p)) };
        }
        if at(cur, &mut key).is_none() {
            *done = true;
        } else if let Some(slot) = last_slot {
            enc_slot(slot, &mut key);
            key.extend_from_within(..);
            *last = Some(key);
        }
        Ok(*done)
    }

    /// `scan_next` over an ordinary ordered index (a B-tree of entry keys).
    fn scan_btree(
        &self,
        pi: usize,
        st: &OrderedStep<'_>,
        last: &mut Option<Vec<u8>>,
        done: &mut bool,
        out: &mut ScanBatch,
    ) -> Result<bool, NodeError> {
        let index = st.index;
        let ord = self.parts[pi]
            .ordered
            .get(&index)
            .ok_or_else(|| NodeError::with(ErrorCode::NoSuchIndex, format!("index {index} dropped during scan")))?;
        let bounds: (Bound<&[u8]>, Bound<&[u8]>) = (st.lo, st.hi);
        let mut it: Box<dyn Iterator<Item = (&IKey, &RowId)>> = if st.descending {
            Box::new(ord.map.range::<[u8], _>(bounds).rev())
        } else {
            Box::new(ord.map.range::<[u8], _>(bounds))
        };
        let (mut examined, mut returned) = (0usize, 0usize);
        let mut row = Vec::new();
        let mut last_key: Option<&IKey> = None;
        while returned < st.st.max_rows && examined < st.examine_limit {
            let Some((k, &r)) = it.next() else {
                *done = true;
                return Ok(true);
            };
            examined += 1;
            last_key = Some(k);
            if self.scan_row(pi, r, st.st, &mut row, out)? {
                if st.st.keys {
                    out.push_key(k.as_slice(), st.st.max_rows);
                }
                returned += 1;
            }
        }
        if it.next().is_none() {
            *done = true;
        } else if let Some(k) = last_key {
            *last = Some(k.as_slice().to_vec());
        }
        Ok(*done)
    }

    /// Encode a bound prefix. A value the column cannot hold still bounds the
    /// range: a string too long, an invalid date or similar of the column's own
    /// class is encoded as it is (its order is still right); a number out of the
    /// column's range becomes +inf / -inf at its position, so
    /// `tinyint_col < 1000` scans every non-NULL value instead of failing; a
    /// number between two column values becomes the nearest one inside the range.
    fn encode_bound(&self, index: IndexId, b: &ScanBound, low_side: bool) -> Result<EncodedBound, NodeError> {
        let ix = self.index(index)?;
        if b.values.len() > ix.key.cols.len() {
            return Err(bad_bound(format!(
                "bound has {} values, index {} has {} columns",
                b.values.len(),
                ix.def.name,
                ix.key.cols.len()
            )));
        }
        // Room for the usual values (integers: 9 bytes each) up front, not a
        // grow per pushed byte.
        let mut out = Vec::with_capacity(16 * b.values.len() + 1);
        for ((v, t), c) in b.values.iter().zip(&ix.key.types).zip(&ix.key.cols) {
            let name = &self.def.columns[*c].name;
            // An inexact number ends the prefix: nothing after it matters.
            let (v, ends) = inside_value(v, t, low_side).unwrap_or_else(|| (v.clone(), false));
            match coerce_value(v.clone(), t, true) {
                Ok(cv) => {
                    encode_value(&mut out, &cv, t);
                    if ends {
                        return Ok(EncodedBound { prefix: out, inf: None, inclusive: true });
                    }
                }
                Err(e) => {
                    let sample = class_sample(t);
                    let numeric = matches!(
                        sample,
                        Value::Int(_) | Value::UInt(_) | Value::Float(_) | Value::Double(_) | Value::Decimal(_)
                    );
                    if !numeric && std::mem::discriminant(&v) == std::mem::discriminant(&sample) {
                        encode_value(&mut out, &v, t);
                        continue;
                    }
                    if numeric && e.code == ErrorCode::ValueOutOfRange {
                        let inf = match compare_values(&v, &Value::Int(0), t) {
                            Some(Ordering::Greater) => Some(true),
                            Some(Ordering::Less) => Some(false),
                            _ => None,
                        };
                        if inf.is_some() {
                            return Ok(EncodedBound { prefix: out, inf, inclusive: true });
                        }
                    }
                    return Err(bad_bound(format!("bound value for column {name}: {}", e.message)));
                }
            }
        }
        Ok(EncodedBound { prefix: out, inf: None, inclusive: b.inclusive })
    }

    pub fn scan_open(
        &self,
        pi: usize,
        index: Option<IndexId>,
        range: Option<&ScanRange>,
        descending: bool,
    ) -> Result<ScanCursor, NodeError> {
        let _ = pi;
        let Some(index) = index else {
            if range.is_some() {
                return Err(bad_bound("a range needs an ordered index".into()));
            }
            return Ok(ScanCursor::Full { next: 0, done: false });
        };
        let ix = self.index(index)?;
        if ix.def.kind != IndexKind::Ordered {
            return Err(bad_bound(format!("index {} is a hash index and cannot be scanned", ix.def.name)));
        }
        let (low, high) = match range {
            None => (Bound::Unbounded, Bound::Unbounded),
            Some(r) => {
                let lo = self.encode_bound(index, &r.low, true)?;
                let hi = self.encode_bound(index, &r.high, false)?;
                let (mut l, mut h) = key_range(&lo.prefix, lo.inclusive, &hi.prefix, hi.inclusive);
                // An infinite value at some position: the marker byte sorts
                // after NULL (0x00) and before (0x01) or after (0x02) every
                // non-NULL value at that position.
                if let Some(plus) = lo.inf {
                    l = Bound::Included([lo.prefix.as_slice(), &[if plus { 0x02 } else { 0x01 }]].concat());
                }
                if let Some(plus) = hi.inf {
                    h = Bound::Excluded([hi.prefix.as_slice(), &[if plus { 0x02 } else { 0x01 }]].concat());
                }
                (l, h)
            }
        };
        let done = range_is_empty(&low, &high);
        Ok(ScanCursor::Ordered { index, low, high, descending, last: None, done })
    }

    fn passes(&self, filter: Option<&Filter>, row: &[Value]) -> Result<bool, NodeError> {
        match filter {
            None => Ok(true),
            Some(f) => Ok(eval_filter(f, row, &self.def)? == Some(true)),
        }
    }

    /// Read stored row `r` as the step asks and append it to `out` if the
    /// filter accepts it (true then). `scratch` is a reusable row buffer.
    fn scan_row(
        &self,
        pi: usize,
        r: RowId,
        st: &ScanStep<'_>,
        scratch: &mut Vec<Value>,
        out: &mut ScanBatch,
    ) -> Result<bool, NodeError> {
        self.scan_slot(pi, r, self.parts[pi].fixed().slot(r), st, scratch, out)
    }

    /// `scan_row` of row `r` stored in `slot`.
    fn scan_slot(
        &self,
        pi: usize,
        r: RowId,
        slot: &[u8],
        st: &ScanStep<'_>,
        scratch: &mut Vec<Value>,
        out: &mut ScanBatch,
    ) -> Result<bool, NodeError> {
        let part = &self.parts[pi];
        let payload = self.layout.var_ref(slot).map(|v| part.var.get(v)).unwrap_or(&[]);
        let read_masked = |scratch: &mut Vec<Value>| match st.cols {
            Some(mask) => self.layout.read_row_masked(slot, payload, mask, scratch),
            None => self.layout.read_row(slot, payload, scratch),
        };
        match (st.projection, st.filter) {
            // Nothing to check: decode just the projected columns.
            (Some(proj), None) => {
                let mut values = Vec::with_capacity(proj.len());
                values.extend(proj.iter().map(|c| self.layout.read_col(slot, payload, *c as usize)));
                out.rows.push(values);
            }
            (Some(proj), Some(_)) => {
                scratch.clear();
                read_masked(scratch);
                if !self.passes(st.filter, scratch)? {
                    return Ok(false);
                }
                // Move the projected values out of the row buffer.
                let mut values = Vec::with_capacity(proj.len());
                for (i, c) in proj.iter().enumerate() {
                    let v = &mut scratch[*c as usize];
                    values.push(if proj[i + 1..].contains(c) { v.clone() } else { std::mem::replace(v, Value::Null) });
                }
                out.rows.push(values);
            }
            (None, _) => {
                scratch.clear();
                read_masked(scratch);
                if !self.passes(st.filter, scratch)? {
                    return Ok(false);
                }
                out.rows.push(std::mem::take(scratch));
            }
        }
        out.ids.push(r);
        Ok(true)
    }

    pub fn scan_next(
        &self,
        pi: usize,
        cursor: &mut ScanCursor,
        filter: Option<&Filter>,
        max_rows: usize,
        examine_limit: usize,
        out: &mut Vec<(RowId, Vec<Value>)>,
    ) -> Result<bool, NodeError> {
        let step = ScanStep { filter, cols: None, projection: None, max_rows, examine_limit, keys: false };
        let mut batch = ScanBatch::default();
        let r = self.scan_next_rows(pi, cursor, &step, &mut batch);
        out.extend(batch.ids.into_iter().zip(batch.rows));
        r
    }

    /// One step of a scan: append the rows found (and, for ordered scans
    /// asked for them, their entry keys) to `out`; true when the partition is
    /// exhausted.
    pub fn scan_next_rows(
        &self,
        pi: usize,
        cursor: &mut ScanCursor,
        st: &ScanStep<'_>,
        out: &mut ScanBatch,
    ) -> Result<bool, NodeError> {
        let max_rows = st.max_rows;
        // Always make progress, even with silly limits.
        let examine_limit = st.examine_limit.max(1);
        if let Some(c) = st.projection.into_iter().flatten().find(|c| **c as usize >= self.layout.cols.len()) {
            return Err(NodeError::with(ErrorCode::NoSuchColumn, format!("column id {c} in table {}", self.def.name)));
        }
        let room = max_rows.min(RESERVE_ROWS);
        out.rows.reserve(room);
        out.ids.reserve(room);
        let mut examined = 0usize;
        let mut returned = 0usize;
        match cursor {
            ScanCursor::Full { next, done } => {
                if *done {
                    return Ok(true);
                }
                let fixed = self.parts[pi].fixed();
                let mut row = Vec::new();
                while returned < max_rows && examined < examine_limit {
                    let Some(r) = fixed.next_live(*next) else {
                        *done = true;
                        return Ok(true);
                    };
                    *next = r as u64 + 1;
                    examined += 1;
                    if self.scan_row(pi, r, st, &mut row, out)? {
                        returned += 1;
                    }
                }
                // Look ahead so the caller learns about exhaustion in this batch.
                if fixed.next_live(*next).is_none() {
                    *done = true;
                }
                Ok(*done)
            }
            ScanCursor::Ordered { index, low, high, descending, last, done } => {
                if *done {
                    return Ok(true);
                }
                // Resume after the last entry returned (borrowed, not copied:
                // the step sets a new one).
                let prev = last.take();
                let (lo, hi) = match (&prev, *descending) {
                    (None, _) => (as_slice_bound(low), as_slice_bound(high)),
                    (Some(k), false) => (Bound::Excluded(k.as_slice()), as_slice_bound(high)),
                    (Some(k), true) => (as_slice_bound(low), Bound::Excluded(k.as_slice())),
                };
                if range_is_empty(&lo, &hi) {
                    *done = true;
                    return Ok(true);
                }
                let step = OrderedStep { index: *index, lo, hi, descending: *descending, st, examine_limit };
                let r = if self.pk_index.as_ref().is_some_and(|i| i.def.id == *index) {
                    self.scan_pk_order(pi, &step, last, done, out)
                } else {
                    self.scan_btree(pi, &step, last, done, out)
                };
                if last.is_none() && !*done {
                    *last = prev;
                }
                r
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{cmp_doubled, IntBoundCmp};
    use std::cmp::Ordering;

    /// `IntBoundCmp` orders a one-integer pk's entry as `cmp_doubled` does
    /// the encoded entry, against bounds that are empty, NULL and infinity
    /// markers, whole values at and around the row's own key, whole values
    /// followed by more bytes (a doubled entry, a marker, a partial second
    /// value); partial values are left to bytes (None).
    #[test]
    fn integer_bound_comparison_matches_the_encoded_entry() {
        let enc = |k: u64| {
            let mut e = vec![0x01u8];
            e.extend_from_slice(&k.to_be_bytes());
            e
        };
        let keys = [0u64, 1, 2, 0x7fff_ffff_ffff_ffff, 1 << 63, (1 << 63) + 1, u64::MAX - 1, u64::MAX];
        let mut bounds: Vec<Vec<u8>> = vec![vec![], vec![0x00], vec![0x02], vec![0x00, 0x05], vec![0x02, 0x00]];
        for k in keys {
            let e = enc(k);
            bounds.push(e[..1].to_vec());
            bounds.push(e[..5].to_vec());
            bounds.push(e.clone());
            for tail in [&[0x00][..], &[0x01], &[0x02], &[0x01, 0x80], &[0xff; 9]] {
                bounds.push([e.as_slice(), tail].concat());
            }
            bounds.push([e.as_slice(), e.as_slice()].concat());
            bounds.push([e.as_slice(), e.as_slice(), &[0x00]].concat());
        }
        for b in &bounds {
            let fast = IntBoundCmp::new(b);
            assert_eq!(fast.is_none(), matches!(b.as_slice(), [0x01, rest @ ..] if rest.len() < 8), "bound {b:?}");
            for k in keys {
                if let Some(f) = fast {
                    let want = cmp_doubled(&enc(k), b);
                    assert_eq!(f.cmp(k), want, "key {k:#x} bound {b:?}");
                }
            }
        }
        // The row of exactly the bound's key is decided by what follows.
        let b = [enc(5), enc(5)].concat();
        assert_eq!(IntBoundCmp::new(&b), Some(IntBoundCmp::Key { key: 5, at: Ordering::Equal }));
        assert_eq!(IntBoundCmp::new(&enc(5)), Some(IntBoundCmp::Key { key: 5, at: Ordering::Greater }));
    }

    /// `cmp_doubled` orders `pk ++ pk` as the built entry does, against
    /// bounds shorter, longer, equal and sharing every prefix length.
    #[test]
    fn doubled_comparison_matches_the_built_entry() {
        let pks: [&[u8]; 5] = [b"", b"\x01", b"\x01\x02", b"\x01\x02\x03", b"\x02\x00"];
        let mut bounds: Vec<Vec<u8>> = Vec::new();
        for a in pks {
            for b in pks {
                bounds.push([a, b].concat());
                bounds.push([a, b, b"\x00"].concat());
            }
        }
        for pk in pks {
            let entry = [pk, pk].concat();
            for b in &bounds {
                assert_eq!(cmp_doubled(pk, b), entry.as_slice().cmp(b.as_slice()), "pk {pk:?} bound {b:?}");
            }
        }
    }
}
