//! Operation descriptions carried by client requests (TC_KEYREQ, SCAN_TABREQ) and
//! forwarded to LQH: key operations, lock modes, pushed-down filters and scan ranges.

use crate::error::NodeError;
use crate::schema::{ColumnId, IndexId, PartitionId, TableId};
use crate::value::Value;
use serde::{Deserialize, Serialize};

/// Most operations in one TC_KEYREQ batch.
pub const MAX_OPS_PER_BATCH: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum OpKind {
    Read,
    /// Fails with DuplicateKey if the row exists.
    Insert,
    /// Fails with NoSuchRow if the row does not exist.
    Update,
    /// Upsert: insert, or overwrite the given columns if the row exists.
    Write,
    /// Fails with NoSuchRow if the row does not exist.
    Delete,
}

impl OpKind {
    pub fn is_write(self) -> bool {
        !matches!(self, OpKind::Read)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LockMode {
    /// Latest committed version, no lock (READ COMMITTED).
    CommittedRead,
    /// Shared row lock held to commit (LOCK IN SHARE MODE).
    Shared,
    /// Exclusive row lock held to commit (FOR UPDATE). Writes always lock exclusively.
    Exclusive,
}

/// What a locking read (`LockMode::Shared` / `Exclusive`) does when its row
/// lock is held, or waited for, by another transaction (MySQL's `NOWAIT` and
/// `SKIP LOCKED`). A lock the transaction holds itself is never "held by
/// another". Writes and committed reads ignore it: writes always wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum LockWait {
    /// Queue for the lock, bounded by the lock-wait time-out (which aborts
    /// the transaction).
    #[default]
    Wait,
    /// Fail the read at once with `ErrorCode::LockNoWait`; nothing is queued
    /// and the transaction stays open.
    NoWait,
    /// Leave the row out: a key read answers `NoSuchRow`, a scan goes on
    /// with the next row.
    SkipLocked,
    /// Queue for the lock as `Wait`, bounded by this many milliseconds
    /// instead of the cluster's lock-wait time-out (MySQL's
    /// `innodb_lock_wait_timeout` for one session). Unlike the other
    /// variants it applies to writes too: a write that must wait for its row
    /// (or unique key) waits at most this long.
    WaitMs(u32),
}

impl LockWait {
    /// True if a read meeting a lock held by another transaction queues
    /// for it (`Wait`, `WaitMs`); false if it gives up at once.
    pub fn queues(self) -> bool {
        matches!(self, LockWait::Wait | LockWait::WaitMs(_))
    }

    /// `Wait` made `WaitMs(ms)`; the other variants unchanged (a client
    /// sets its lock-wait time this way on every operation it sends).
    pub fn bounded(self, ms: u32) -> LockWait {
        match self {
            LockWait::Wait => LockWait::WaitMs(ms),
            other => other,
        }
    }
}

/// How a key operation finds its row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum KeyAccess {
    /// Primary key values in primary-key column order.
    Primary(Vec<Value>),
    /// Values of a unique index's columns, in index column order. Read, update
    /// and delete only (insert/write address rows by primary key).
    Unique { index: IndexId, values: Vec<Value> },
}

/// One keyed operation inside a transaction batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyOp {
    pub table: TableId,
    /// Table version the client planned against (0 = do not check).
    pub table_version: u32,
    pub kind: OpKind,
    /// Lock mode for reads; writes always lock exclusively.
    pub lock: LockMode,
    /// Locking reads: what to do about a row locked by another transaction.
    pub wait: LockWait,
    pub key: KeyAccess,
    /// Required for tables with `PartitionScheme::User`; ignored otherwise.
    pub partition: Option<PartitionId>,
    /// Insert / Write / Update: column values to set. Insert and Write fill columns
    /// not given from defaults (NULL, DEFAULT or AUTO_INCREMENT is the client's job).
    pub values: Vec<(ColumnId, Value)>,
    /// Update / Write of an existing row: add these deltas to the current
    /// numeric values (interpreted update, e.g. `k = k + 1`); NULL stays NULL.
    pub increments: Vec<(ColumnId, Value)>,
    /// Read: columns to return, in this order (empty = every column in table order).
    pub projection: Vec<ColumnId>,
    /// If false, an error of this operation (e.g. NoSuchRow, DuplicateKey) is
    /// returned in its result and the transaction goes on (NDB's AO_IgnoreError).
    /// If true, any error aborts the transaction.
    pub abort_on_error: bool,
}

impl KeyOp {
    /// A read that takes no lock (READ COMMITTED). Alone in a transaction it
    /// leaves no state at LQH (see the simple reads in `crate::internal`).
    pub fn is_committed_read(&self) -> bool {
        self.kind == OpKind::Read && self.lock == LockMode::CommittedRead
    }

    fn base(table: TableId, kind: OpKind, key: Vec<Value>) -> KeyOp {
        KeyOp {
            table,
            table_version: 0,
            kind,
            lock: if kind.is_write() { LockMode::Exclusive } else { LockMode::CommittedRead },
            wait: LockWait::Wait,
            key: KeyAccess::Primary(key),
            partition: None,
            values: Vec::new(),
            increments: Vec::new(),
            projection: Vec::new(),
            abort_on_error: true,
        }
    }
    pub fn read(table: TableId, key: Vec<Value>) -> KeyOp {
        Self::base(table, OpKind::Read, key)
    }
    pub fn insert(table: TableId, key: Vec<Value>, values: Vec<(ColumnId, Value)>) -> KeyOp {
        KeyOp { values, ..Self::base(table, OpKind::Insert, key) }
    }
    pub fn update(table: TableId, key: Vec<Value>, values: Vec<(ColumnId, Value)>) -> KeyOp {
        KeyOp { values, ..Self::base(table, OpKind::Update, key) }
    }
    pub fn write(table: TableId, key: Vec<Value>, values: Vec<(ColumnId, Value)>) -> KeyOp {
        KeyOp { values, ..Self::base(table, OpKind::Write, key) }
    }
    pub fn delete(table: TableId, key: Vec<Value>) -> KeyOp {
        Self::base(table, OpKind::Delete, key)
    }
}

/// Result of one operation of a batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum OpResult {
    /// Read: the projected row. Writes: `None`.
    Ok(Option<Vec<Value>>),
    /// Only for operations with `abort_on_error == false`.
    Err(NodeError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A filter evaluated inside the data node, with SQL three-valued logic: a
/// comparison with NULL is UNKNOWN, and only rows whose filter is TRUE pass.
/// Values are compared under the column's type and collation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Filter {
    True,
    False,
    Cmp {
        col: ColumnId,
        op: CmpOp,
        value: Value,
    },
    /// Compare two columns of the same row.
    CmpCols {
        left: ColumnId,
        op: CmpOp,
        right: ColumnId,
    },
    IsNull(ColumnId),
    IsNotNull(ColumnId),
    /// SQL LIKE: `%` any run, `_` one character, `\` escapes; under the column's
    /// collation. Patterns with a literal prefix are the common case.
    Like {
        col: ColumnId,
        pattern: Vec<u8>,
    },
    // Nested filters are read from the wire through `nested`, which refuses
    // nesting deeper than `MAX_FILTER_DEPTH` (the validator's limit): the
    // derived decoder recurses once per level, and a frame of a million
    // `Not`s overflowed the data node's stack (found by the wire fuzz suite).
    And(#[serde(deserialize_with = "nested::filters")] Vec<Filter>),
    Or(#[serde(deserialize_with = "nested::filters")] Vec<Filter>),
    Not(#[serde(deserialize_with = "nested::filter")] Box<Filter>),
}

/// Depth-bounded decoding of a `Filter`'s children (same bytes as the derived
/// code: only the recursion is counted).
mod nested {
    use super::Filter;
    use crate::filter_eval::MAX_FILTER_DEPTH;
    use serde::de::Error;
    use serde::{Deserialize, Deserializer};
    use std::cell::Cell;

    thread_local! {
        /// And/Or/Not levels around the filter being decoded on this thread.
        static DEPTH: Cell<usize> = const { Cell::new(0) };
    }

    /// One level deeper for as long as it lives (restored on every exit).
    struct Level(usize);

    impl Level {
        fn enter<E: Error>() -> Result<Level, E> {
            let outer = DEPTH.with(Cell::get);
            if outer >= MAX_FILTER_DEPTH {
                return Err(E::custom(format!("filter nested deeper than {MAX_FILTER_DEPTH}")));
            }
            DEPTH.with(|d| d.set(outer + 1));
            Ok(Level(outer))
        }
    }

    impl Drop for Level {
        fn drop(&mut self) {
            DEPTH.with(|d| d.set(self.0));
        }
    }

    pub fn filters<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Filter>, D::Error> {
        let _level = Level::enter()?;
        Vec::<Filter>::deserialize(d)
    }

    pub fn filter<'de, D: Deserializer<'de>>(d: D) -> Result<Box<Filter>, D::Error> {
        let _level = Level::enter()?;
        Box::<Filter>::deserialize(d)
    }
}

impl Filter {
    /// Call `f` with every column the filter reads (repeats possible).
    pub fn for_each_column(&self, f: &mut impl FnMut(ColumnId)) {
        match self {
            Filter::True | Filter::False => {}
            Filter::Cmp { col, .. } | Filter::IsNull(col) | Filter::IsNotNull(col) | Filter::Like { col, .. } => {
                f(*col)
            }
            Filter::CmpCols { left, right, .. } => {
                f(*left);
                f(*right);
            }
            Filter::And(fs) | Filter::Or(fs) => fs.iter().for_each(|x| x.for_each_column(f)),
            Filter::Not(x) => x.for_each_column(f),
        }
    }
}

/// One end of an ordered-index range: a prefix of the index columns.
/// Empty `values` means unbounded on that side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bound {
    pub values: Vec<Value>,
    pub inclusive: bool,
}

impl Bound {
    pub fn unbounded() -> Bound {
        Bound { values: Vec::new(), inclusive: true }
    }
    pub fn inclusive(values: Vec<Value>) -> Bound {
        Bound { values, inclusive: true }
    }
    pub fn exclusive(values: Vec<Value>) -> Bound {
        Bound { values, inclusive: false }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScanRange {
    pub low: Bound,
    pub high: Bound,
}

/// A scan request as the client states it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScanSpec {
    pub table: TableId,
    pub table_version: u32,
    /// None: full table scan (order unspecified). Some: ordered-index scan, rows
    /// returned in index order (merged across partitions) when `ordered`.
    pub index: Option<IndexId>,
    /// Only with `index`; None = whole index.
    pub range: Option<ScanRange>,
    /// Only for an ordered index scan with `ordered`.
    pub descending: bool,
    /// Index scans: whether rows must come back in index order. false: the
    /// rows of the range in any order (no merge of the partitions' streams,
    /// as for a full-table scan), for a caller that sorts or aggregates them
    /// anyway. Ignored for full-table scans.
    pub ordered: bool,
    pub filter: Option<Filter>,
    /// Columns to return (empty = all, in table order).
    pub projection: Vec<ColumnId>,
    /// CommittedRead takes no locks; Shared/Exclusive lock every returned row
    /// until the transaction ends, so it can be updated/deleted by key in the
    /// same transaction.
    pub lock: LockMode,
    /// Locking scans: what to do about a row locked by another transaction
    /// (`NoWait` fails the scan, not the transaction).
    pub wait: LockWait,
    /// Rows per batch returned to the client (1..=MAX_SCAN_BATCH_ROWS).
    pub batch_rows: u32,
    /// Stop after this many rows (None: no limit).
    pub limit: Option<u64>,
    /// Restrict to these partitions (pruning); None = all partitions.
    pub partitions: Option<Vec<PartitionId>>,
    /// A multi-range scan of `index` (`range` then None): the rows of every
    /// range in one scan, so that a caller looking up many keys at once (a
    /// join's batch of outer rows) pays one round trip, not one per key.
    /// Each returned row has its range's position in this list appended as
    /// a last `Value::Int`; a row in two overlapping ranges comes once for
    /// each. Each partition reads the ranges in list order, so with
    /// `ordered` the rows come in index order if the ranges are ascending
    /// (descending: descending) and disjoint. At most `MAX_SCAN_RANGES`,
    /// refused past it already by the decoder. Empty: a scan of `range`.
    #[serde(deserialize_with = "bounded_ranges")]
    pub ranges: Vec<ScanRange>,
    /// Aggregate the rows in the data node (see `ScanAggregate`): each
    /// partition returns one partial row per group instead of its rows.
    pub aggregate: Option<ScanAggregate>,
}

/// One aggregate a data node computes per group of a partition's rows
/// (after the scan's filter). Partial results, merged by the client:
/// `CountStar` and `Count` give `Value::Int` (COUNT(col) skips NULLs);
/// `Sum` gives the exact sum as `Value::Decimal` at the column's scale
/// (integers: scale 0), NULL when no non-NULL value was seen; `Min` and
/// `Max` give the least / greatest non-NULL value (NULL if none). Only
/// integer and DECIMAL columns are summed, and only numeric and temporal
/// columns are compared (no collation is involved), so every result is
/// exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AggFn {
    CountStar,
    Count(ColumnId),
    Sum(ColumnId),
    Min(ColumnId),
    Max(ColumnId),
}

impl AggFn {
    /// The column the aggregate reads (None: COUNT(*)).
    pub fn column(self) -> Option<ColumnId> {
        match self {
            AggFn::CountStar => None,
            AggFn::Count(c) | AggFn::Sum(c) | AggFn::Min(c) | AggFn::Max(c) => Some(c),
        }
    }
}

/// A pushed aggregate (`ScanSpec::aggregate`). Every partition groups its
/// rows by `group_by` (numeric or temporal columns, NULL a group of its
/// own) and returns one row per group: the group's values, then one
/// partial result per `aggs` entry. With no `group_by`, exactly one row,
/// also for no rows. A partition that meets more than `max_groups` groups
/// fails the scan with `AggregateTooManyGroups`; a sum that leaves the
/// accumulator's range fails it with `AggregateOverflow`. The scan takes
/// no lock, limit or list of ranges; rows come in no order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScanAggregate {
    #[serde(deserialize_with = "bounded_group_by")]
    pub group_by: Vec<ColumnId>,
    #[serde(deserialize_with = "bounded_aggs")]
    pub aggs: Vec<AggFn>,
    /// 1..=MAX_AGG_GROUPS.
    pub max_groups: u32,
}

impl ScanAggregate {
    /// Refuse what a data node does not aggregate exactly: unknown columns,
    /// SUM of a non-integer non-DECIMAL column, grouping or comparing a
    /// column that is not numeric or temporal (strings would need their
    /// collation; floating point and TIMESTAMP are left to the client),
    /// more aggregates or groups than the limits.
    pub fn validate(&self, def: &crate::schema::TableDef) -> Result<(), NodeError> {
        use crate::error::ErrorCode;
        let bad = |m: String| Err(NodeError::with(ErrorCode::BadAggregate, m));
        if self.max_groups == 0 || self.max_groups > MAX_AGG_GROUPS {
            return bad(format!("max_groups must be 1..={MAX_AGG_GROUPS}, not {}", self.max_groups));
        }
        if self.aggs.is_empty() && self.group_by.is_empty() {
            return bad("an aggregate with neither aggregates nor GROUP BY columns".into());
        }
        if self.aggs.len() > MAX_AGG_FNS || self.group_by.len() > MAX_AGG_GROUP_COLS {
            return bad(format!("at most {MAX_AGG_FNS} aggregates and {MAX_AGG_GROUP_COLS} GROUP BY columns"));
        }
        let ty = |c: ColumnId| def.column(c).map(|col| &col.ty);
        for c in &self.group_by {
            match ty(*c) {
                Some(t) if aggregate_comparable(t) => {}
                Some(_) => return bad(format!("GROUP BY column {c} is not numeric or temporal")),
                None => return bad(format!("no column {c} in table {}", def.name)),
            }
        }
        for a in &self.aggs {
            let Some(c) = a.column() else { continue };
            let ok = match (a, ty(c)) {
                (_, None) => return bad(format!("no column {c} in table {}", def.name)),
                (AggFn::Count(_), Some(_)) => true,
                (AggFn::Sum(_), Some(t)) => aggregate_summable(t),
                (_, Some(t)) => aggregate_comparable(t),
            };
            if !ok {
                return bad(format!("{a:?}: the data node does not aggregate this column's type"));
            }
        }
        Ok(())
    }
}

/// Whether a pushed SUM takes a column of this type (summed exactly).
pub fn aggregate_summable(ty: &crate::value::ColumnType) -> bool {
    ty.int_range().is_some() || matches!(ty, crate::value::ColumnType::Decimal { .. })
}

/// Whether a pushed MIN / MAX / GROUP BY takes a column of this type
/// (values ordered and equal without a collation or time zone).
pub fn aggregate_comparable(ty: &crate::value::ColumnType) -> bool {
    use crate::value::ColumnType as T;
    aggregate_summable(ty) || matches!(ty, T::Date | T::Time | T::DateTime)
}

/// Most GROUP BY columns of a pushed aggregate.
pub const MAX_AGG_GROUP_COLS: usize = 16;
/// Most aggregates of a pushed aggregate.
pub const MAX_AGG_FNS: usize = 64;
/// Most groups a partition holds for one pushed aggregate.
pub const MAX_AGG_GROUPS: u32 = 4096;

fn bounded_group_by<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<ColumnId>, D::Error> {
    d.deserialize_seq(BoundedSeq::<ColumnId>::new(MAX_AGG_GROUP_COLS, "GROUP BY columns"))
}

fn bounded_aggs<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<AggFn>, D::Error> {
    d.deserialize_seq(BoundedSeq::<AggFn>::new(MAX_AGG_FNS, "aggregates"))
}

/// A sequence refused past `max` elements as soon as its length is read.
struct BoundedSeq<T> {
    max: usize,
    what: &'static str,
    _t: std::marker::PhantomData<T>,
}

impl<T> BoundedSeq<T> {
    fn new(max: usize, what: &'static str) -> Self {
        BoundedSeq { max, what, _t: std::marker::PhantomData }
    }
}

impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for BoundedSeq<T> {
    type Value = Vec<T>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at most {} {}", self.max, self.what)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        if let Some(n) = seq.size_hint().filter(|n| *n > self.max) {
            return Err(serde::de::Error::invalid_length(n, &self));
        }
        let mut out = Vec::new();
        while let Some(x) = seq.next_element()? {
            if out.len() == self.max {
                return Err(serde::de::Error::invalid_length(self.max + 1, &self));
            }
            out.push(x);
        }
        Ok(out)
    }
}

pub const MAX_SCAN_BATCH_ROWS: u32 = 4096;

/// Most ranges of one multi-range scan (`ScanSpec::ranges`): bounds the
/// request's size and what a data node holds per scan.
pub const MAX_SCAN_RANGES: usize = 256;

/// Decodes a range list, refusing one longer than `MAX_SCAN_RANGES` as soon
/// as its length is read (before decoding or allocating any of it).
pub(crate) fn bounded_ranges<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<ScanRange>, D::Error> {
    struct Ranges;
    impl<'de> serde::de::Visitor<'de> for Ranges {
        type Value = Vec<ScanRange>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "at most {MAX_SCAN_RANGES} scan ranges")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            if let Some(n) = seq.size_hint().filter(|n| *n > MAX_SCAN_RANGES) {
                return Err(serde::de::Error::invalid_length(n, &self));
            }
            let mut out = Vec::new();
            while let Some(r) = seq.next_element()? {
                if out.len() == MAX_SCAN_RANGES {
                    return Err(serde::de::Error::invalid_length(MAX_SCAN_RANGES + 1, &self));
                }
                out.push(r);
            }
            Ok(out)
        }
    }
    d.deserialize_seq(Ranges)
}

impl ScanSpec {
    /// A committed-read full-table scan of every column.
    pub fn full(table: TableId) -> ScanSpec {
        ScanSpec {
            table,
            table_version: 0,
            index: None,
            range: None,
            descending: false,
            ordered: true,
            filter: None,
            projection: Vec::new(),
            lock: LockMode::CommittedRead,
            wait: LockWait::Wait,
            batch_rows: 256,
            limit: None,
            partitions: None,
            ranges: Vec::new(),
            aggregate: None,
        }
    }
}
