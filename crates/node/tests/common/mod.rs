//! Requests the cluster tests make through the kit's API node.
#![allow(dead_code)] // each test file uses its own part

use norr_kernel::{BlockRef, NodeId};
use norr_knobs::Knobs;
use norr_node::testkit::ClusterKit;
use norr_signals::internal::InternalSignal;
use norr_signals::schema::IndexKind;
use norr_signals::{
    block, ColumnSource, ColumnType, DictOp, DictReq, DictResult, ErrorCode, ExecType, KeyOp, OpResult, Signal,
    TableDef, TcKeyConf, TcKeyReq, TxnOutcome, Value,
};
use norr_txn::testkit::{index_def, table_def};

pub const API: NodeId = 100;

pub fn int() -> ColumnType {
    ColumnType::BigInt { unsigned: false }
}

pub fn knobs() -> Knobs {
    Knobs { lock_wait_timeout_ms: 500, ..Knobs::default() }
}

pub fn create_table(kit: &mut ClusterKit, via: NodeId, name: &str, partitions: u32) -> TableDef {
    let def = norr_txn::testkit::table_def(name, partitions, &[("v", int())]);
    let req = DictReq { req_id: 7, op: DictOp::CreateTable(def) };
    match kit.ask(BlockRef::new(via, block::DICT, 0), Signal::DictReq(Box::new(req))) {
        Some(Signal::DictConf(c)) => match c.result {
            DictResult::Table(t) => t,
            other => panic!("create table answered {other:?}"),
        },
        other => panic!("create table answered {other:?}"),
    }
}

/// Run one transaction batch through TC instance 0 of `via`; the answer.
pub fn txn(kit: &mut ClusterKit, via: NodeId, handle: u64, ops: Vec<KeyOp>, exec: ExecType) -> Signal {
    let req = TcKeyReq { txn: handle, exec, ops };
    let mut got = kit.call(API, BlockRef::new(via, block::TC, 0), Signal::TcKeyReq(Box::new(req)));
    // A take-over node may report the outcome of an earlier transaction
    // whose coordinator failed after answering it (the complete phase was
    // still running): clients drop those they do not wait for, as NDB's do,
    // and wait on for their own answer.
    loop {
        got.retain(|s| !matches!(s, Signal::TcKeyFailConf(c) if c.txn != handle));
        if !got.is_empty() {
            break;
        }
        got = kit.next_answers(API);
    }
    assert_eq!(got.len(), 1, "one answer to one request: {got:?}");
    got.pop().expect("answer")
}

pub fn committed(sig: Signal) -> TcKeyConf {
    match sig {
        Signal::TcKeyConf(c) if c.outcome == TxnOutcome::Committed => *c,
        other => panic!("expected a commit, got {other:?}"),
    }
}

pub fn read(kit: &mut ClusterKit, via: NodeId, t: &TableDef, k: i64) -> Option<i64> {
    let h = kit.handle();
    let c = committed(txn(
        kit,
        via,
        h,
        vec![KeyOp { abort_on_error: false, ..KeyOp::read(t.id, vec![Value::Int(k)]) }],
        ExecType::Commit,
    ));
    match &c.results[0] {
        OpResult::Ok(Some(row)) => match row[1] {
            Value::Int(v) => Some(v),
            ref other => panic!("value {other:?}"),
        },
        OpResult::Err(e) if e.code == norr_signals::ErrorCode::NoSuchRow => None,
        other => panic!("read {other:?}"),
    }
}

pub fn put(kit: &mut ClusterKit, via: NodeId, t: &TableDef, k: i64, v: i64) -> TcKeyConf {
    let h = kit.handle();
    committed(txn(
        kit,
        via,
        h,
        vec![KeyOp::write(t.id, vec![Value::Int(k)], vec![(1, Value::Int(v))])],
        ExecType::Commit,
    ))
}

/// Write `k = v` through `via`, again while the answer is a temporary error
/// (a node failure being handled): at most `tries` times. Whether it
/// committed in the end.
pub fn put_retrying(kit: &mut ClusterKit, via: NodeId, t: &TableDef, k: i64, v: i64, tries: u32) -> bool {
    for _ in 0..tries {
        let h = kit.handle();
        let ops = vec![KeyOp::write(t.id, vec![Value::Int(k)], vec![(1, Value::Int(v))])];
        match txn(kit, via, h, ops, ExecType::Commit) {
            Signal::TcKeyConf(c) if c.outcome == TxnOutcome::Committed => return true,
            Signal::TcKeyRef(r) if r.error.code.is_temporary() => kit.run(),
            other => panic!("write of {k} answered {other:?}"),
        }
    }
    false
}

/// (rows, checksum) of every partition of `t` on node `n`.
pub fn checksums(kit: &mut ClusterKit, n: NodeId, t: &TableDef) -> Vec<(u64, u64)> {
    (0..t.partitions)
        .map(|part| {
            let req = InternalSignal::FragChecksumReq { req: part as u64, table: t.id, part };
            match kit.internal_ask(BlockRef::new(n, block::LQH, 0), req) {
                Some(InternalSignal::FragChecksumConf { rows, checksum, .. }) => (rows, checksum),
                other => panic!("checksum answered {other:?}"),
            }
        })
        .collect()
}

/// The dictionary's definition of `name`, asked through `via` (None: no
/// such table).
pub fn get_table(kit: &mut ClusterKit, via: NodeId, name: &str) -> Option<TableDef> {
    let req = DictReq { req_id: 1, op: DictOp::GetTable { name: name.into() } };
    match kit.ask(BlockRef::new(via, block::DICT, 0), Signal::DictReq(Box::new(req))) {
        Some(Signal::DictConf(c)) => match c.result {
            DictResult::Table(t) => Some(t),
            other => panic!("get table answered {other:?}"),
        },
        Some(Signal::DictRef(r)) if r.error.code == ErrorCode::NoSuchTable => None,
        other => panic!("get table {name} answered {other:?}"),
    }
}

pub fn dict(kit: &mut ClusterKit, via: NodeId, op: DictOp) -> Result<DictResult, ErrorCode> {
    match kit.ask(BlockRef::new(via, block::DICT, 0), Signal::DictReq(Box::new(DictReq { req_id: 2, op }))) {
        Some(Signal::DictConf(c)) => Ok(c.result),
        Some(Signal::DictRef(r)) => Err(r.error.code),
        other => panic!("dictionary answered {other:?}"),
    }
}

/// Write `k = v` for `keys` through `via`, planned against `t.version`: the
/// LQHs of every replica must hold that version. Retries temporary errors
/// (a failure being handled).
pub fn put_versioned(kit: &mut ClusterKit, via: NodeId, t: &TableDef, keys: std::ops::Range<i64>, v: i64) {
    for k in keys {
        let mut done = false;
        for _ in 0..20 {
            let h = kit.handle();
            let op =
                KeyOp { table_version: t.version, ..KeyOp::write(t.id, vec![Value::Int(k)], vec![(1, Value::Int(v))]) };
            match txn(kit, via, h, vec![op], ExecType::Commit) {
                Signal::TcKeyConf(c) if c.outcome == TxnOutcome::Committed => {
                    done = true;
                    break;
                }
                Signal::TcKeyRef(r) if r.error.code.is_temporary() => kit.run(),
                other => panic!("write {k} of {} v{} through node {via}: {other:?}", t.name, t.version),
            }
        }
        assert!(done, "write {k} of {} through node {via} kept failing", t.name);
    }
}

/// A DDL of each kind (0 CREATE TABLE t, 1 DROP TABLE base, 2 CREATE
/// INDEX iv ON base, 3 ALTER TABLE base adding a column), for tests that
/// cut one short.
pub fn the_ddl(kind: u64, base: &TableDef) -> DictOp {
    match kind {
        0 => DictOp::CreateTable(table_def("t", 8, &[("v", int())])),
        1 => DictOp::DropTable { name: "base".into() },
        2 => DictOp::CreateIndex { table: "base".into(), index: index_def("iv", &[1], false, IndexKind::Ordered) },
        _ => {
            let def = table_def("base", 8, &[("v", int()), ("w", int())]);
            let sources = vec![ColumnSource::Old(0), ColumnSource::Old(1), ColumnSource::Value(Value::Int(5))];
            DictOp::AlterTable { table: "base".into(), def, sources, expect_version: base.version }
        }
    }
}

/// The table the DDL of `kind` is about, as the dictionary now has it; made
/// again if the DDL's end was to leave it absent (a CREATE undone, a DROP
/// done): creating it must work.
pub fn the_table_after(kit: &mut ClusterKit, via: NodeId, kind: u64) -> TableDef {
    let name = if kind == 0 { "t" } else { "base" };
    if let Some(t) = get_table(kit, via, name) {
        if kind == 2 {
            // The index is there or not; making it must then work.
            if t.index_by_name("iv").is_none() {
                let r = dict(kit, via, the_ddl(2, &t));
                assert!(r.is_ok(), "create index again: {r:?}");
            }
        }
        return get_table(kit, via, name).expect("still there");
    }
    assert!(kind <= 1, "the DDL of kind {kind} cannot remove {name}");
    create_table(kit, via, name, 8)
}
