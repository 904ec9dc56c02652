//! Fuzzing of the wire codec with proptest (issue 22): every frame a data node
//! reads from a client goes through `decode`, and so does every answer a
//! client reads, so no byte string may panic it, overflow its stack or make
//! it reserve memory its input cannot back.
//!
//! Properties, each over generated signals of every kind a client sends or
//! gets (and some internal ones):
//! * encoding: the hand-written TC_KEYREQ / TC_KEYCONF encoder writes
//!   postcard's bytes, and every message decodes back to itself;
//! * damage (bytes set, flipped, inserted, removed, repeated, cut, huge
//!   varints): `decode` never panics, the fast decoder agrees with the
//!   generic one, and whatever decodes re-encodes to a message that decodes
//!   the same;
//! * the checked-in corpus (`corpus/wire/*.bin`: valid messages of each API
//!   signal, and inputs that once broke or nearly broke the decoder) decodes as
//!   its file name says (`ok-*` / `bad-*`) and is a base for the same damage;
//! * random bytes, alone or after a valid message head.
//!
//! Tiers: `cargo test -p norr-signals wire::fuzz` runs 1,000 cases per property
//! (seconds). `NORR_FUZZ_CASES=N` runs N (the long mode, run counts in
//! bench/RESULTS.md): `NORR_FUZZ_CASES=200000 cargo test --release -p
//! norr-signals wire::fuzz`. A failure is shrunk and saved by proptest under
//! `proptest-regressions/` (check the file in: it is replayed first from then
//! on); an input worth keeping goes into the corpus too.
//! `NORR_FUZZ_WRITE_CORPUS=1` writes `corpus_messages()` into the corpus
//! (after a wire version change the `ok-*` files must be rewritten).

use super::{decode, decode_generic, encode, encode_generic, fast, WireError};
use crate::internal::InternalSignal;
use crate::*;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::Config;

/// Cases per property: `NORR_FUZZ_CASES`, else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("NORR_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn config() -> Config {
    Config::with_cases(cases(1000))
}

// ---------- strategies ----------

fn string() -> impl Strategy<Value = String> {
    vec(any::<char>(), 0..12).prop_map(|c| c.into_iter().collect())
}

fn date() -> impl Strategy<Value = Date> {
    (any::<u16>(), any::<u8>(), any::<u8>()).prop_map(|(year, month, day)| Date { year, month, day })
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<i64>().prop_map(Value::Int),
        any::<u64>().prop_map(Value::UInt),
        any::<f32>().prop_map(Value::Float),
        any::<f64>().prop_map(Value::Double),
        (any::<i128>(), any::<u8>()).prop_map(|(mantissa, scale)| Value::Decimal(Decimal { mantissa, scale })),
        vec(any::<u8>(), 0..48).prop_map(Value::Bytes),
        date().prop_map(Value::Date),
        any::<i64>().prop_map(Value::Time),
        (date(), any::<[u8; 3]>(), any::<u32>()).prop_map(|(date, [hour, minute, second], micro)| {
            Value::DateTime(DateTime { date, hour, minute, second, micro })
        }),
    ]
}

fn values() -> impl Strategy<Value = Vec<Value>> {
    vec(value(), 0..5)
}

fn column_values() -> impl Strategy<Value = Vec<(ColumnId, Value)>> {
    vec((any::<ColumnId>(), value()), 0..4)
}

fn lock() -> impl Strategy<Value = LockMode> {
    select(vec![LockMode::CommittedRead, LockMode::Shared, LockMode::Exclusive])
}

fn wait() -> impl Strategy<Value = LockWait> {
    prop_oneof![
        select(vec![LockWait::Wait, LockWait::NoWait, LockWait::SkipLocked]),
        any::<u32>().prop_map(LockWait::WaitMs),
    ]
}

fn key_op() -> impl Strategy<Value = KeyOp> {
    let kind = select(vec![OpKind::Read, OpKind::Insert, OpKind::Update, OpKind::Write, OpKind::Delete]);
    let key = prop_oneof![
        values().prop_map(KeyAccess::Primary),
        (any::<IndexId>(), values()).prop_map(|(index, values)| KeyAccess::Unique { index, values }),
    ];
    (
        (any::<TableId>(), any::<u32>(), kind, lock(), wait(), key),
        (any::<Option<PartitionId>>(), column_values(), column_values(), vec(any::<ColumnId>(), 0..4), any::<bool>()),
    )
        .prop_map(
            |(
                (table, table_version, kind, lock, wait, key),
                (partition, values, increments, projection, abort_on_error),
            )| KeyOp {
                table,
                table_version,
                kind,
                lock,
                wait,
                key,
                partition,
                values,
                increments,
                projection,
                abort_on_error,
            },
        )
}

fn error() -> impl Strategy<Value = NodeError> {
    (select(ErrorCode::ALL.to_vec()), string()).prop_map(|(code, message)| NodeError { code, message })
}

fn op_result() -> impl Strategy<Value = OpResult> {
    prop_oneof![
        4 => proptest::option::of(values()).prop_map(OpResult::Ok),
        1 => error().prop_map(OpResult::Err),
    ]
}

fn cmp() -> impl Strategy<Value = CmpOp> {
    select(vec![CmpOp::Eq, CmpOp::Ne, CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge])
}

fn filter() -> impl Strategy<Value = Filter> {
    let leaf = prop_oneof![
        Just(Filter::True),
        Just(Filter::False),
        (any::<ColumnId>(), cmp(), value()).prop_map(|(col, op, value)| Filter::Cmp { col, op, value }),
        (any::<ColumnId>(), cmp(), any::<ColumnId>()).prop_map(|(left, op, right)| Filter::CmpCols { left, op, right }),
        any::<ColumnId>().prop_map(Filter::IsNull),
        any::<ColumnId>().prop_map(Filter::IsNotNull),
        (any::<ColumnId>(), vec(any::<u8>(), 0..8)).prop_map(|(col, pattern)| Filter::Like { col, pattern }),
    ];
    leaf.prop_recursive(5, 32, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Filter::And),
            vec(inner.clone(), 0..4).prop_map(Filter::Or),
            inner.prop_map(|f| Filter::Not(Box::new(f))),
        ]
    })
}

fn bound() -> impl Strategy<Value = Bound> {
    (values(), any::<bool>()).prop_map(|(values, inclusive)| Bound { values, inclusive })
}

fn scan_spec() -> impl Strategy<Value = ScanSpec> {
    let range = proptest::option::of((bound(), bound()).prop_map(|(low, high)| ScanRange { low, high }));
    (
        (any::<TableId>(), any::<u32>(), any::<Option<IndexId>>(), range, any::<bool>(), any::<bool>()),
        (proptest::option::of(filter()), vec(any::<ColumnId>(), 0..4), lock(), wait(), any::<u32>()),
        (
            any::<Option<u64>>(),
            proptest::option::of(vec(any::<PartitionId>(), 0..4)),
            vec((bound(), bound()).prop_map(|(low, high)| ScanRange { low, high }), 0..3),
            proptest::option::of(scan_aggregate()),
        ),
    )
        .prop_map(
            |(
                (table, table_version, index, range, descending, ordered),
                (filter, projection, lock, wait, batch_rows),
                (limit, partitions, ranges, aggregate),
            )| ScanSpec {
                table,
                table_version,
                index,
                range,
                descending,
                ordered,
                filter,
                projection,
                lock,
                wait,
                batch_rows,
                limit,
                partitions,
                ranges,
                aggregate,
            },
        )
}

fn scan_aggregate() -> impl Strategy<Value = ScanAggregate> {
    let agg = prop_oneof![
        Just(AggFn::CountStar),
        any::<ColumnId>().prop_map(AggFn::Count),
        any::<ColumnId>().prop_map(AggFn::Sum),
        any::<ColumnId>().prop_map(AggFn::Min),
        any::<ColumnId>().prop_map(AggFn::Max),
    ];
    (vec(any::<ColumnId>(), 0..3), vec(agg, 0..4), any::<u32>())
        .prop_map(|(group_by, aggs, max_groups)| ScanAggregate { group_by, aggs, max_groups })
}

fn dict_op() -> impl Strategy<Value = DictOp> {
    prop_oneof![
        string().prop_map(|name| DictOp::DropTable { name }),
        string().prop_map(|name| DictOp::TruncateTable { name }),
        string().prop_map(|name| DictOp::GetTable { name }),
        (string(), string()).prop_map(|(table, index)| DictOp::DropIndex { table, index }),
        Just(DictOp::ListTables),
        Just(DictOp::NodeStats),
        (any::<TableId>(), any::<u64>()).prop_map(|(table, count)| DictOp::NextAutoInc { table, count }),
        (any::<TableId>(), any::<u64>()).prop_map(|(table, used)| DictOp::BumpAutoInc { table, used }),
        (string(), string(), vec(any::<ColumnId>(), 0..3), any::<bool>()).prop_map(|(table, name, columns, unique)| {
            DictOp::CreateIndex { table, index: IndexDef { id: 0, name, columns, unique, kind: IndexKind::Ordered } }
        }),
    ]
}

/// Signals an API node sends or gets.
fn api_signal() -> impl Strategy<Value = Signal> {
    let exec = select(vec![ExecType::NoCommit, ExecType::Commit, ExecType::Rollback]);
    let outcome =
        select(vec![TxnOutcome::Open, TxnOutcome::Committed, TxnOutcome::RolledBack, TxnOutcome::CommittedNotOnDisk]);
    prop_oneof![
        4 => (any::<u64>(), exec, vec(key_op(), 0..4))
            .prop_map(|(txn, exec, ops)| Signal::TcKeyReq(Box::new(TcKeyReq { txn, exec, ops }))),
        4 => (any::<u64>(), outcome, vec(op_result(), 0..4))
            .prop_map(|(txn, outcome, results)| Signal::TcKeyConf(Box::new(TcKeyConf { txn, outcome, results, gci: txn >> 3 }))),
        1 => (any::<u64>(), error(), any::<Option<u32>>())
            .prop_map(|(txn, error, op_index)| Signal::TcKeyRef(Box::new(TcKeyRef { txn, error, op_index }))),
        2 => (any::<u64>(), any::<u32>(), any::<bool>(), scan_spec()).prop_map(|(txn, scan_id, standalone, spec)| {
            Signal::ScanTabReq(Box::new(ScanTabReq { txn, scan_id, standalone, spec }))
        }),
        1 => (any::<u64>(), any::<u32>(), any::<bool>())
            .prop_map(|(txn, scan_id, close)| Signal::ScanNextReq(ScanNextReq { txn, scan_id, close })),
        2 => (any::<u64>(), any::<u32>(), vec(values(), 0..4), any::<bool>()).prop_map(|(txn, scan_id, rows, done)| {
            Signal::ScanTabConf(Box::new(ScanTabConf { txn, scan_id, rows, done }))
        }),
        1 => (any::<u64>(), any::<u32>(), error())
            .prop_map(|(txn, scan_id, error)| Signal::ScanTabRef(Box::new(ScanTabRef { txn, scan_id, error }))),
        1 => (any::<u32>(), dict_op()).prop_map(|(req_id, op)| Signal::DictReq(Box::new(DictReq { req_id, op }))),
        1 => (any::<u64>(), any::<u32>(), select(vec![SavepointAction::Set, SavepointAction::RollbackTo]))
            .prop_map(|(txn, savepoint, action)| Signal::TcSavepointReq(Box::new(TcSavepointReq {
                txn,
                savepoint,
                action
            }))),
        1 => any::<NodeId>().prop_map(|api_node| Signal::ApiFailReq { api_node }),
    ]
}

/// A few internal signals: the data node decodes every message before it
/// checks that a client may send it.
fn internal_signal() -> impl Strategy<Value = Signal> {
    prop_oneof![
        any::<u64>().prop_map(|txn| InternalSignal::LqhCommitReq {
            txn,
            gci: txn >> 7,
            chain: crate::dist::Chain { instance: 0, nodes: [1].into_iter().collect() },
            tc: tc()
        }),
        any::<u64>().prop_map(|tag| InternalSignal::LqhLockTimeout { tag }),
        (any::<u64>(), any::<PartitionId>(), error()).prop_map(|(scan, part, error)| InternalSignal::LqhScanRef {
            scan,
            part,
            error
        }),
    ]
    .prop_map(|s| Signal::Internal(Box::new(s)))
}

fn envelope() -> impl Strategy<Value = Envelope> {
    let block_ref = (any::<NodeId>(), any::<u16>(), any::<u16>()).prop_map(|(n, b, i)| BlockRef::new(n, b, i));
    (block_ref.clone(), block_ref, any::<bool>(), prop_oneof![9 => api_signal(), 1 => internal_signal()]).prop_map(
        |(from, to, a, signal)| Envelope { from, to, prio: if a { Priority::A } else { Priority::B }, signal },
    )
}

// ---------- damage ----------

/// One change to a message's bytes; positions wrap around its length.
#[derive(Debug, Clone)]
enum Damage {
    Set(usize, u8),
    Flip(usize, u8),
    Insert(usize, Vec<u8>),
    Remove(usize, usize),
    Cut(usize),
    /// Repeat `len` bytes at a position `times` times (repeated structure,
    /// deeper nesting).
    Repeat(usize, usize, u8),
    /// A varint of the largest value at a position (huge lengths and counts).
    HugeVarint(usize),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        3 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Damage::Set(i, b)),
        2 => (any::<usize>(), 0u8..8).prop_map(|(i, bit)| Damage::Flip(i, bit)),
        1 => (any::<usize>(), vec(any::<u8>(), 1..6)).prop_map(|(i, b)| Damage::Insert(i, b)),
        1 => (any::<usize>(), 1usize..6).prop_map(|(i, n)| Damage::Remove(i, n)),
        1 => any::<usize>().prop_map(Damage::Cut),
        1 => (any::<usize>(), 1usize..8, 1u8..16).prop_map(|(i, n, t)| Damage::Repeat(i, n, t)),
        1 => any::<usize>().prop_map(Damage::HugeVarint),
    ]
}

fn apply(b: &mut Vec<u8>, d: &Damage) {
    let at = |i: usize, b: &Vec<u8>| if b.is_empty() { 0 } else { i % b.len() };
    match d {
        Damage::Set(i, x) if !b.is_empty() => {
            let i = at(*i, b);
            b[i] = *x;
        }
        Damage::Flip(i, bit) if !b.is_empty() => {
            let i = at(*i, b);
            b[i] ^= 1 << bit;
        }
        Damage::Insert(i, x) => {
            let i = if b.is_empty() { 0 } else { i % (b.len() + 1) };
            b.splice(i..i, x.iter().copied());
        }
        Damage::Remove(i, n) if !b.is_empty() => {
            let i = at(*i, b);
            let end = (i + n).min(b.len());
            b.drain(i..end);
        }
        Damage::Cut(i) => b.truncate(if b.is_empty() { 0 } else { i % (b.len() + 1) }),
        Damage::Repeat(i, n, times) if !b.is_empty() => {
            let i = at(*i, b);
            let piece: Vec<u8> = b[i..(i + n).min(b.len())].to_vec();
            for _ in 0..*times {
                b.splice(i..i, piece.iter().copied());
            }
        }
        Damage::HugeVarint(i) => {
            let i = if b.is_empty() { 0 } else { i % (b.len() + 1) };
            b.splice(i..i, [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        }
        _ => {}
    }
}

// ---------- checks ----------

/// Same message (by encoding: a damaged float may be a NaN), or both refused.
fn same(a: &Result<Envelope, WireError>, b: &Result<Envelope, WireError>) -> bool {
    match (a, b) {
        (Ok(x), Ok(y)) => x.prio == y.prio && encode_generic_vec(x) == encode_generic_vec(y),
        (Err(_), Err(_)) => true,
        _ => false,
    }
}

fn encode_generic_vec(e: &Envelope) -> Vec<u8> {
    let mut v = Vec::new();
    encode_generic(e, &mut v);
    v
}

/// What every byte string must satisfy: no panic, the decoders agree, and a
/// decoded message survives its own round trip.
fn check_bytes(m: &[u8]) -> Result<(), TestCaseError> {
    let generic = decode_generic(m);
    if let Some(f) = fast::try_decode(m) {
        prop_assert!(same(&f, &generic), "fast and generic decoders disagree on {m:?}");
    }
    let full = decode(m);
    prop_assert!(same(&full, &generic), "decode and the generic decoder disagree on {m:?}");
    if let Ok(e) = &full {
        let again = decode(&encode(e));
        prop_assert!(same(&again, &full), "a decoded message does not survive a round trip: {m:?}");
    }
    Ok(())
}

// ---------- corpus ----------

fn corpus_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/wire")
}

/// The checked-in corpus: (file name, bytes), sorted by name.
fn corpus() -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(corpus_dir())
        .expect("corpus/wire exists")
        .map(|e| e.expect("corpus entry").path())
        // Names first: a `.tmp` file being written by `write_corpus_when_asked`
        // (run in parallel with this) is never read.
        .filter(|p| p.extension().is_some_and(|x| x == "bin"))
        .map(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).expect("file name").to_string();
            (name, std::fs::read(&p).expect("corpus file reads"))
        })
        .collect();
    out.sort();
    out
}

fn api(n: NodeId) -> BlockRef {
    BlockRef::new(n, block::API, 0)
}

fn tc() -> BlockRef {
    BlockRef::new(1, block::TC, 0)
}

fn msg(from: BlockRef, to: BlockRef, signal: Signal) -> Vec<u8> {
    encode(&Envelope { from, to, prio: Priority::B, signal })
}

fn every_value() -> Vec<Value> {
    vec![
        Value::Null,
        Value::Int(-5),
        Value::UInt(u64::MAX),
        Value::Float(1.5),
        Value::Double(-0.25),
        Value::Decimal(Decimal { mantissa: -12345, scale: 2 }),
        Value::str("text"),
        Value::Date(Date { year: 2026, month: 11, day: 30 }),
        Value::Time(-3_600_000_000),
        Value::DateTime(DateTime {
            date: Date { year: 1999, month: 12, day: 31 },
            hour: 23,
            minute: 59,
            second: 58,
            micro: 7,
        }),
    ]
}

fn a_table() -> TableDef {
    TableDef {
        id: 0,
        version: 0,
        name: "db/t".into(),
        columns: vec![
            ColumnDef { nullable: false, ..ColumnDef::new("id", ColumnType::BigInt { unsigned: false }) },
            ColumnDef::new("name", ColumnType::Varchar { len: 40, collation: Collation::CaseInsensitive }),
            ColumnDef { default: Some(Value::Int(0)), ..ColumnDef::new("n", ColumnType::Int { unsigned: true }) },
            ColumnDef::new("d", ColumnType::Decimal { precision: 10, scale: 2 }),
        ],
        primary_key: vec![0],
        partitioning: PartitionScheme::Key { columns: vec![] },
        partitions: 0,
        indexes: vec![IndexDef {
            id: 0,
            name: "n_idx".into(),
            columns: vec![2],
            unique: false,
            kind: IndexKind::Ordered,
        }],
        extra: b"opaque".to_vec(),
        options: Default::default(),
    }
}

/// A SCAN_TABREQ whose filter is `depth` nested NOTs around TRUE.
fn deep_filter_scan(depth: usize) -> Vec<u8> {
    let spec = ScanSpec { filter: Some(Filter::True), ..ScanSpec::full(1) };
    let with =
        msg(api(100), tc(), Signal::ScanTabReq(Box::new(ScanTabReq { txn: 1, scan_id: 1, standalone: true, spec })));
    let without = msg(
        api(100),
        tc(),
        Signal::ScanTabReq(Box::new(ScanTabReq { txn: 1, scan_id: 1, standalone: true, spec: ScanSpec::full(1) })),
    );
    // The first difference is the filter's Option tag (0 -> 1); TRUE follows.
    let at = with.iter().zip(&without).position(|(a, b)| a != b).expect("the filter differs") + 1;
    let not = 9u8; // Filter::Not's variant index
    let mut b = with[..at].to_vec();
    b.extend(std::iter::repeat_n(not, depth));
    b.extend_from_slice(&with[at..]);
    b
}

/// What `NORR_FUZZ_WRITE_CORPUS=1` writes into `corpus/wire`.
pub(crate) fn corpus_messages() -> Vec<(&'static str, Vec<u8>)> {
    let mut ops = vec![
        KeyOp::read(1, vec![Value::Int(1)]),
        KeyOp::insert(1, vec![Value::Int(2)], vec![(1, Value::str("x")), (2, Value::UInt(3))]),
        KeyOp::update(1, vec![Value::Int(3)], vec![(3, Value::Decimal(Decimal { mantissa: 150, scale: 2 }))]),
        KeyOp::write(
            1,
            vec![Value::Int(4)],
            every_value().into_iter().enumerate().map(|(i, v)| (i as u16, v)).collect(),
        ),
        KeyOp::delete(1, vec![Value::Int(5)]),
    ];
    ops[0].lock = LockMode::Shared;
    ops[0].wait = LockWait::SkipLocked;
    ops[0].projection = vec![0, 1];
    ops[0].key = KeyAccess::Unique { index: 2, values: vec![Value::str("u")] };
    ops[2].increments = vec![(2, Value::Int(1))];
    ops[4].partition = Some(3);
    let key_req = TcKeyReq { txn: 7, exec: ExecType::Commit, ops };
    let rows = vec![OpResult::Ok(Some(every_value())), OpResult::Ok(None), OpResult::Ok(Some(vec![Value::Int(9)]))];
    let err = NodeError::with(ErrorCode::DuplicateKey, "key 2");
    let filter = Filter::And(vec![
        Filter::Or(vec![
            Filter::Cmp { col: 2, op: CmpOp::Ge, value: Value::Int(10) },
            Filter::Like { col: 1, pattern: b"ab%".to_vec() },
        ]),
        Filter::Not(Box::new(Filter::IsNull(3))),
        Filter::CmpCols { left: 2, op: CmpOp::Ne, right: 0 },
    ]);
    let spec = ScanSpec {
        index: Some(2),
        range: Some(ScanRange {
            low: Bound::inclusive(vec![Value::Int(1)]),
            high: Bound::exclusive(vec![Value::Int(9)]),
        }),
        descending: true,
        filter: Some(filter),
        projection: vec![0, 2],
        lock: LockMode::Exclusive,
        wait: LockWait::NoWait,
        batch_rows: 64,
        limit: Some(10),
        partitions: Some(vec![0, 1]),
        ..ScanSpec::full(1)
    };
    let mut too_many_ops =
        msg(api(100), tc(), Signal::TcKeyReq(Box::new(TcKeyReq { txn: 1, exec: ExecType::Commit, ops: vec![] })));
    too_many_ops.pop();
    too_many_ops.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
    let scan_rows = msg(
        tc(),
        api(100),
        Signal::ScanTabConf(Box::new(ScanTabConf {
            txn: 0,
            scan_id: 4,
            rows: vec![every_value(), vec![]],
            done: false,
        })),
    );
    // The same answer whose row batch claims far more rows than bytes follow.
    let mut rows_claim = msg(
        tc(),
        api(100),
        Signal::ScanTabConf(Box::new(ScanTabConf { txn: 0, scan_id: 4, rows: vec![], done: true })),
    );
    let n = rows_claim.len();
    rows_claim.truncate(n - 3); // the batch's length (1), its row count (0), done
    rows_claim.extend_from_slice(&[3, 0xff, 0xff, 0x03, 1]);
    // Multi-range scans: three ranges, and one range past the limit.
    let point =
        |k: i64| ScanRange { low: Bound::inclusive(vec![Value::Int(k)]), high: Bound::inclusive(vec![Value::Int(k)]) };
    let ranges_spec =
        |n: i64| ScanSpec { index: Some(2), ordered: false, ranges: (0..n).map(point).collect(), ..ScanSpec::full(1) };
    let ranges_req = |n: i64| {
        let spec = ranges_spec(n);
        msg(api(100), tc(), Signal::ScanTabReq(Box::new(ScanTabReq { txn: 8, scan_id: 5, standalone: true, spec })))
    };
    let over = crate::ops::MAX_SCAN_RANGES as i64 + 1;
    // Pushed aggregates: a SUM grouped by a column, and one with an
    // aggregate past the limit.
    let agg_req = |n: usize| {
        let mut aggs = vec![AggFn::CountStar, AggFn::Sum(3), AggFn::Min(2), AggFn::Max(2), AggFn::Count(3)];
        aggs.resize(n, AggFn::CountStar);
        let aggregate = Some(ScanAggregate { group_by: vec![2], aggs, max_groups: 64 });
        let spec = ScanSpec { ordered: false, aggregate, ..ScanSpec::full(1) };
        msg(api(100), tc(), Signal::ScanTabReq(Box::new(ScanTabReq { txn: 8, scan_id: 6, standalone: true, spec })))
    };
    vec![
        ("ok-scan-tabreq-aggregate.bin", agg_req(5)),
        ("bad-scan-tabreq-aggregate-over-limit.bin", agg_req(crate::ops::MAX_AGG_FNS + 1)),
        ("ok-scan-tabreq-ranges.bin", ranges_req(3)),
        ("ok-scan-tabreq-ranges-at-limit.bin", ranges_req(over - 1)),
        ("bad-scan-tabreq-ranges-over-limit.bin", ranges_req(over)),
        ("ok-tc-keyreq-every-op.bin", msg(api(100), tc(), Signal::TcKeyReq(Box::new(key_req)))),
        (
            "ok-tc-keyconf-rows.bin",
            msg(
                tc(),
                api(100),
                Signal::TcKeyConf(Box::new(TcKeyConf {
                    txn: 7,
                    outcome: TxnOutcome::Committed,
                    results: rows,
                    gci: 3,
                })),
            ),
        ),
        (
            "ok-tc-keyconf-error-result.bin",
            msg(
                tc(),
                api(100),
                Signal::TcKeyConf(Box::new(TcKeyConf {
                    txn: 7,
                    outcome: TxnOutcome::Open,
                    results: vec![OpResult::Err(err.clone()), OpResult::Ok(None)],
                    gci: 0,
                })),
            ),
        ),
        (
            "ok-tc-keyref.bin",
            msg(tc(), api(100), Signal::TcKeyRef(Box::new(TcKeyRef { txn: 7, error: err.clone(), op_index: Some(1) }))),
        ),
        (
            "ok-scan-tabreq-index-filter.bin",
            msg(
                api(100),
                tc(),
                Signal::ScanTabReq(Box::new(ScanTabReq { txn: 8, scan_id: 4, standalone: false, spec })),
            ),
        ),
        (
            "ok-scan-nextreq.bin",
            msg(api(100), tc(), Signal::ScanNextReq(ScanNextReq { txn: 8, scan_id: 4, close: true })),
        ),
        ("ok-scan-tabconf-rows.bin", scan_rows),
        (
            "ok-scan-tabref.bin",
            msg(tc(), api(100), Signal::ScanTabRef(Box::new(ScanTabRef { txn: 8, scan_id: 4, error: err }))),
        ),
        (
            "ok-dict-create-table.bin",
            msg(
                api(100),
                BlockRef::new(1, block::DICT, 0),
                Signal::DictReq(Box::new(DictReq { req_id: 1, op: DictOp::CreateTable(a_table()) })),
            ),
        ),
        (
            "ok-dict-conf-tables.bin",
            msg(
                BlockRef::new(1, block::DICT, 0),
                api(100),
                Signal::DictConf(Box::new(DictConf {
                    req_id: 1,
                    result: DictResult::Tables(vec![a_table(), a_table()]),
                })),
            ),
        ),
        (
            "ok-savepoint.bin",
            msg(
                api(100),
                tc(),
                Signal::TcSavepointReq(Box::new(TcSavepointReq {
                    txn: 9,
                    savepoint: 2,
                    action: SavepointAction::RollbackTo,
                })),
            ),
        ),
        ("ok-filter-64-deep.bin", deep_filter_scan(crate::filter_eval::MAX_FILTER_DEPTH)),
        // A client may send anything: an internal signal decodes (and is then
        // refused by the host, not by the codec).
        (
            "ok-internal-commit.bin",
            msg(
                api(100),
                tc(),
                Signal::Internal(Box::new(InternalSignal::LqhCommitReq {
                    txn: 3,
                    gci: 1,
                    chain: crate::dist::Chain { instance: 0, nodes: [1].into_iter().collect() },
                    tc: tc(),
                })),
            ),
        ),
        // Found by this suite: each level of NOT was a level of recursion in
        // the decoder; 10,000 overflowed the stack and aborted the process.
        ("bad-filter-10000-deep.bin", deep_filter_scan(10_000)),
        ("bad-filter-65-deep.bin", deep_filter_scan(crate::filter_eval::MAX_FILTER_DEPTH + 1)),
        ("bad-keyreq-claims-2^64-ops.bin", too_many_ops),
        ("bad-scan-rows-claim-more-than-bytes.bin", rows_claim),
        ("bad-empty.bin", Vec::new()),
    ]
}

#[test]
fn write_corpus_when_asked() {
    if std::env::var_os("NORR_FUZZ_WRITE_CORPUS").is_none() {
        return;
    }
    std::fs::create_dir_all(corpus_dir()).unwrap();
    for (name, bytes) in corpus_messages() {
        // Written aside and renamed: the corpus tests running beside this
        // one never read a half-written file.
        let tmp = corpus_dir().join(format!("{name}.tmp"));
        std::fs::write(&tmp, bytes).unwrap();
        std::fs::rename(&tmp, corpus_dir().join(name)).unwrap();
    }
}

/// Every corpus file decodes as its name says, and what decodes survives a
/// round trip (a corpus file that stops decoding is a wire format change).
#[test]
fn corpus_decodes_as_named() {
    let files = corpus();
    assert!(files.len() >= 15, "corpus/wire has {} files", files.len());
    for (name, bytes) in &files {
        let r = decode(bytes);
        if name.starts_with("ok-") {
            let e = r.unwrap_or_else(|err| panic!("{name}: {err}"));
            assert_eq!(encode(&e), *bytes, "{name}: not the encoding of what it decodes to");
        } else {
            assert!(name.starts_with("bad-"), "{name}: corpus files are ok-* or bad-*");
            assert!(r.is_err(), "{name}: decoded");
        }
        check_bytes(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

proptest! {
    #![proptest_config(config())]

    /// The fast encoder writes postcard's bytes, and every message decodes
    /// back to itself.
    #[test]
    fn messages_encode_as_postcard_and_decode_to_themselves(e in envelope()) {
        let bytes = encode(&e);
        prop_assert_eq!(&bytes, &encode_generic_vec(&e));
        let back = decode(&bytes);
        prop_assert!(back.is_ok(), "{:?}", back);
        prop_assert!(same(&back, &Ok(e)));
        check_bytes(&bytes)?;
    }

    /// Damaged messages: no panic, the decoders agree, round trips hold.
    #[test]
    fn damaged_messages_are_refused_or_decoded_consistently(e in envelope(), ds in vec(damage(), 1..6)) {
        let mut b = encode(&e);
        for d in &ds {
            apply(&mut b, d);
        }
        check_bytes(&b)?;
    }

    /// The corpus, damaged.
    #[test]
    fn damaged_corpus_files_are_refused_or_decoded_consistently(pick in any::<prop::sample::Index>(), ds in vec(damage(), 1..6)) {
        let files = corpus();
        let mut b = files[pick.index(files.len())].1.clone();
        for d in &ds {
            apply(&mut b, d);
        }
        check_bytes(&b)?;
    }

    /// Random bytes, alone or after the head of a valid message.
    #[test]
    fn random_bytes_are_refused_or_decoded_consistently(
        e in envelope(),
        head in any::<prop::sample::Index>(),
        tail in vec(any::<u8>(), 0..96),
    ) {
        check_bytes(&tail)?;
        let mut b = encode(&e);
        b.truncate(head.index(b.len() + 1));
        b.extend_from_slice(&tail);
        check_bytes(&b)?;
    }
}
