//! Savepoints: TC_SAVEPOINTREQ Set / RollbackTo and LQH's partial rollback of
//! a transaction's uncommitted images.

use norr_kernel::{NodeId, Scheduler};
use norr_knobs::Knobs;
use norr_signals::ops::{KeyAccess, KeyOp, LockMode, OpResult, ScanSpec};
use norr_signals::schema::{IndexKind, TableDef};
use norr_signals::value::{ColumnType, Value};
use norr_signals::{block, DictOp, ErrorCode, ExecType, OpKind, SavepointAction, TxnOutcome};
use norr_txn::testkit::{index_def, table_def, Harness, DATA_NODE};
use std::collections::BTreeMap;

const SET: SavepointAction = SavepointAction::Set;
const BACK: SavepointAction = SavepointAction::RollbackTo;

fn int() -> ColumnType {
    ColumnType::BigInt { unsigned: false }
}

/// Table `t` (id, a BIGINT) over `partitions` partitions.
fn setup(knobs: Knobs, partitions: u32) -> (Harness, TableDef) {
    let mut h = Harness::new(knobs);
    let d = h.create_table(table_def("t", partitions, &[("a", int())])).unwrap();
    (h, d)
}

fn ins(t: u32, id: i64, a: i64) -> KeyOp {
    KeyOp::insert(t, vec![Value::Int(id)], vec![(1, Value::Int(a))])
}

fn upd(t: u32, id: i64, a: i64) -> KeyOp {
    KeyOp::update(t, vec![Value::Int(id)], vec![(1, Value::Int(a))])
}

fn del(t: u32, id: i64) -> KeyOp {
    KeyOp::delete(t, vec![Value::Int(id)])
}

/// Run a NoCommit batch of `api`'s transaction `txn` that must succeed.
fn run(h: &mut Harness, api: NodeId, txn: u64, ops: Vec<KeyOp>) {
    let c = h.key(api, txn, ExecType::NoCommit, ops).unwrap();
    assert_eq!(c.outcome, TxnOutcome::Open);
    for r in c.results {
        assert!(matches!(r, OpResult::Ok(_)), "{r:?}");
    }
}

fn sp(h: &mut Harness, api: NodeId, txn: u64, n: u32, action: SavepointAction) {
    let c = h.savepoint(api, txn, n, action).unwrap();
    assert_eq!((c.outcome, c.results.len()), (TxnOutcome::Open, 0));
}

/// Column `a` of row `id` as transaction `txn` sees it (None: no row).
fn seen(h: &mut Harness, api: NodeId, txn: u64, t: u32, id: i64) -> Option<i64> {
    let mut op = KeyOp::read(t, vec![Value::Int(id)]);
    op.abort_on_error = false;
    op.projection = vec![1];
    match h.key(api, txn, ExecType::NoCommit, vec![op]).unwrap().results.remove(0) {
        OpResult::Ok(Some(r)) => match r[0] {
            Value::Int(a) => Some(a),
            ref v => panic!("a = {v:?}"),
        },
        OpResult::Err(e) if e.code == ErrorCode::NoSuchRow => None,
        other => panic!("read: {other:?}"),
    }
}

fn committed(h: &mut Harness, t: u32, id: i64) -> Option<i64> {
    h.get(t, vec![Value::Int(id)]).map(|r| match r[1] {
        Value::Int(a) => a,
        ref v => panic!("a = {v:?}"),
    })
}

/// Every row of `t` committed, as id -> a.
fn all_rows(h: &mut Harness, t: u32) -> BTreeMap<i64, i64> {
    let (rows, _) = h.scan_all(100, 0, true, ScanSpec::full(t)).unwrap();
    rows.into_iter()
        .map(|r| match (&r[0], &r[1]) {
            (Value::Int(id), Value::Int(a)) => (*id, *a),
            other => panic!("row {other:?}"),
        })
        .collect()
}

/// Nothing of any transaction is left in TC or LQH: records, locks, memory
/// reservations.
fn assert_no_state(h: &mut Harness) {
    assert_eq!(h.stats().open_transactions, 0, "TC transaction records left");
    let c = h.counters();
    assert_eq!(c.get("lqh: open transactions").copied().unwrap_or(0), 0, "LQH transaction records left");
    assert_eq!(c.get("lqh: locked keys").copied().unwrap_or(0), 0, "row locks left");
    assert_eq!(c.get("lqh: reserved bytes").copied().unwrap_or(0), 0, "memory reservations left");
}

fn reserved(h: &mut Harness) -> u64 {
    h.counters().get("lqh: reserved bytes").copied().unwrap_or(0)
}

#[test]
fn insert_update_delete_after_a_savepoint_are_undone() {
    // One partition: its page reservation is taken before the savepoint, so
    // the reservations after the rollback are exactly those before it.
    let (mut h, d) = setup(Knobs::default(), 1);
    let t = d.id;
    h.autocommit(vec![ins(t, 1, 10), ins(t, 2, 20), ins(t, 3, 30)]).unwrap();
    run(&mut h, 1, 1, vec![upd(t, 1, 11), ins(t, 4, 40)]);
    let before = reserved(&mut h);
    assert!(before > 0);
    sp(&mut h, 1, 1, 1, SET);
    run(&mut h, 1, 1, vec![ins(t, 10, 100), upd(t, 2, 21), del(t, 3), upd(t, 1, 12), del(t, 4)]);
    run(&mut h, 1, 1, vec![ins(t, 3, 31), upd(t, 10, 101)]);
    assert_eq!([1, 2, 3, 4, 10].map(|id| seen(&mut h, 1, 1, t, id)), [Some(12), Some(21), Some(31), None, Some(101)]);
    assert!(reserved(&mut h) > before);
    sp(&mut h, 1, 1, 1, BACK);
    // Back to the images at the savepoint, written before it or committed.
    assert_eq!([1, 2, 3, 4, 10].map(|id| seen(&mut h, 1, 1, t, id)), [Some(11), Some(20), Some(30), Some(40), None]);
    assert_eq!(reserved(&mut h), before, "the dropped images' reservations are returned");
    // Still the same open transaction: the savepoint stays usable.
    run(&mut h, 1, 1, vec![del(t, 2)]);
    sp(&mut h, 1, 1, 1, BACK);
    assert_eq!(seen(&mut h, 1, 1, t, 2), Some(20));
    let c = h.key(1, 1, ExecType::Commit, vec![]).unwrap();
    assert_eq!(c.outcome, TxnOutcome::Committed);
    assert_eq!(all_rows(&mut h, t), BTreeMap::from([(1, 11), (2, 20), (3, 30), (4, 40)]));
    assert_no_state(&mut h);
    let c = h.counters();
    assert_eq!(c["tc: rollbacks to savepoint"], 2);
    assert_eq!(c["lqh: rollbacks to savepoint"], 2);
}

#[test]
fn repeated_updates_across_several_savepoints() {
    let (mut h, d) = setup(Knobs::default(), 4);
    let t = d.id;
    h.autocommit(vec![ins(t, 1, 0)]).unwrap();
    run(&mut h, 1, 1, vec![upd(t, 1, 1)]);
    sp(&mut h, 1, 1, 1, SET);
    run(&mut h, 1, 1, vec![upd(t, 1, 2)]);
    run(&mut h, 1, 1, vec![upd(t, 1, 3)]);
    sp(&mut h, 1, 1, 2, SET);
    run(&mut h, 1, 1, vec![upd(t, 1, 4)]);
    sp(&mut h, 1, 1, 3, SET);
    run(&mut h, 1, 1, vec![del(t, 1), ins(t, 1, 5)]);
    assert_eq!(seen(&mut h, 1, 1, t, 1), Some(5));
    sp(&mut h, 1, 1, 3, BACK);
    assert_eq!(seen(&mut h, 1, 1, t, 1), Some(4));
    sp(&mut h, 1, 1, 2, BACK);
    assert_eq!(seen(&mut h, 1, 1, t, 1), Some(3));
    // Written again after rolling back (TC still stamps 3), then back to 2.
    run(&mut h, 1, 1, vec![upd(t, 1, 6)]);
    sp(&mut h, 1, 1, 2, BACK);
    assert_eq!(seen(&mut h, 1, 1, t, 1), Some(3));
    sp(&mut h, 1, 1, 1, BACK);
    assert_eq!(seen(&mut h, 1, 1, t, 1), Some(1));
    run(&mut h, 1, 1, vec![upd(t, 1, 7)]);
    sp(&mut h, 1, 1, 4, SET);
    run(&mut h, 1, 1, vec![upd(t, 1, 8)]);
    sp(&mut h, 1, 1, 4, BACK);
    assert_eq!(seen(&mut h, 1, 1, t, 1), Some(7));
    h.key(1, 1, ExecType::Commit, vec![]).unwrap();
    assert_eq!(committed(&mut h, t, 1), Some(7));
    assert_no_state(&mut h);
}

#[test]
fn rollback_to_a_savepoint_set_before_any_write_undoes_everything_but_keeps_the_transaction() {
    let (mut h, d) = setup(Knobs::default(), 4);
    let t = d.id;
    h.autocommit(vec![ins(t, 1, 10)]).unwrap();
    sp(&mut h, 1, 1, 1, SET);
    run(&mut h, 1, 1, vec![upd(t, 1, 11), ins(t, 2, 20)]);
    sp(&mut h, 1, 1, 1, BACK);
    assert_eq!(h.stats().open_transactions, 1, "still open");
    run(&mut h, 1, 1, vec![ins(t, 3, 30)]);
    h.key(1, 1, ExecType::Commit, vec![]).unwrap();
    assert_eq!(all_rows(&mut h, t), BTreeMap::from([(1, 10), (3, 30)]));
    assert_no_state(&mut h);
}

#[test]
fn unique_conflicts_are_resolved_by_a_rollback_to() {
    let mut h = Harness::new(Knobs::default());
    let mut def = table_def("u", 4, &[("u", int())]);
    def.indexes.push(index_def("by_u", &[1], true, IndexKind::UniqueHash));
    let d = h.create_table(def).unwrap();
    let (t, ix) = (d.id, d.indexes[0].id);
    let by_u =
        |v: i64| KeyOp { key: KeyAccess::Unique { index: ix, values: vec![Value::Int(v)] }, ..KeyOp::read(t, vec![]) };
    let lenient = |mut op: KeyOp| {
        op.abort_on_error = false;
        op
    };
    let code = |h: &mut Harness, op: KeyOp| match h
        .key(1, 1, ExecType::NoCommit, vec![lenient(op)])
        .unwrap()
        .results
        .remove(0)
    {
        OpResult::Ok(_) => None,
        OpResult::Err(e) => Some(e.code),
    };
    h.autocommit(vec![ins(t, 1, 100)]).unwrap();
    sp(&mut h, 1, 1, 1, SET);
    run(&mut h, 1, 1, vec![ins(t, 2, 200), upd(t, 1, 300), ins(t, 3, 100)]);
    assert_eq!(code(&mut h, ins(t, 4, 200)), Some(ErrorCode::DuplicateUniqueKey));
    sp(&mut h, 1, 1, 1, BACK);
    // Row 2 is gone with its value; row 1 holds 100 again, not 300.
    assert_eq!(code(&mut h, ins(t, 4, 200)), None);
    assert_eq!(code(&mut h, ins(t, 5, 100)), Some(ErrorCode::DuplicateUniqueKey));
    assert_eq!(code(&mut h, by_u(300)), Some(ErrorCode::NoSuchRow));
    let r = h.key(1, 1, ExecType::NoCommit, vec![by_u(100)]).unwrap().results.remove(0);
    assert_eq!(r, OpResult::Ok(Some(vec![Value::Int(1), Value::Int(100)])));

    // A swap of two rows' values after a savepoint, undone.
    run(&mut h, 1, 1, vec![ins(t, 6, 600)]);
    sp(&mut h, 1, 1, 2, SET);
    run(&mut h, 1, 1, vec![upd(t, 1, 999), upd(t, 6, 100), upd(t, 1, 600)]);
    sp(&mut h, 1, 1, 2, BACK);
    for (v, id) in [(100, 1), (600, 6), (200, 4)] {
        let r = h.key(1, 1, ExecType::NoCommit, vec![by_u(v)]).unwrap().results.remove(0);
        assert_eq!(r, OpResult::Ok(Some(vec![Value::Int(id), Value::Int(v)])), "value {v}");
    }
    assert_eq!(code(&mut h, by_u(999)), Some(ErrorCode::NoSuchRow));
    h.key(1, 1, ExecType::Commit, vec![]).unwrap();
    assert_eq!(all_rows(&mut h, t), BTreeMap::from([(1, 100), (4, 200), (6, 600)]));
    // Committed unique state is exact too.
    assert_eq!(h.autocommit(vec![ins(t, 7, 200)]).unwrap_err().code, ErrorCode::DuplicateUniqueKey);
    h.autocommit(vec![ins(t, 7, 300)]).unwrap();
    assert_no_state(&mut h);
}

#[test]
fn locks_taken_after_the_savepoint_stay_held() {
    let knobs = Knobs { lock_wait_timeout_ms: 100, ..Knobs::default() };
    let (mut h, d) = setup(knobs, 4);
    let t = d.id;
    h.autocommit(vec![ins(t, 1, 10), ins(t, 2, 20)]).unwrap();
    sp(&mut h, 1, 1, 1, SET);
    run(&mut h, 1, 1, vec![upd(t, 1, 11)]);
    sp(&mut h, 1, 1, 1, BACK);
    // Row 1 is back to 10 but still locked by transaction 1 (as InnoDB).
    assert!(h.try_key(2, 1, ExecType::NoCommit, vec![upd(t, 1, 12)]).is_none(), "waits for the kept lock");
    let out = h.advance_ms(101);
    h.inbox.extend(out);
    let r = h.take_key_reply(2, 1).expect("timed out").unwrap_err();
    assert_eq!(r.error.code, ErrorCode::LockWaitTimeout);
    // A committed read does not wait and sees the committed image.
    assert_eq!(committed(&mut h, t, 1), Some(10));
    h.key(1, 1, ExecType::Commit, vec![]).unwrap();
    assert_eq!(all_rows(&mut h, t), BTreeMap::from([(1, 10), (2, 20)]));
    assert_no_state(&mut h);
}

#[test]
fn lock_wait_timeout_and_rollback_after_a_rollback_to_undo_everything() {
    let knobs = Knobs { lock_wait_timeout_ms: 100, ..Knobs::default() };
    let (mut h, d) = setup(knobs, 4);
    let t = d.id;
    h.autocommit(vec![ins(t, 1, 10), ins(t, 2, 20), ins(t, 3, 30)]).unwrap();
    // Transaction 2 holds row 3.
    run(&mut h, 2, 1, vec![upd(t, 3, 33)]);
    run(&mut h, 1, 1, vec![upd(t, 1, 11)]);
    sp(&mut h, 1, 1, 1, SET);
    run(&mut h, 1, 1, vec![upd(t, 2, 21), ins(t, 4, 40)]);
    sp(&mut h, 1, 1, 1, BACK);
    run(&mut h, 1, 1, vec![ins(t, 5, 50)]);
    assert!(h.try_key(1, 1, ExecType::NoCommit, vec![upd(t, 3, 31)]).is_none());
    // A savepoint request while a batch waits is refused; the transaction goes on.
    let r = h.savepoint(1, 1, 2, SET).unwrap_err();
    assert_eq!(r.error.code, ErrorCode::MalformedSignal);
    let out = h.advance_ms(101);
    h.inbox.extend(out);
    let r = h.take_key_reply(1, 1).expect("timed out").unwrap_err();
    assert_eq!(r.error.code, ErrorCode::LockWaitTimeout);
    h.key(2, 1, ExecType::Commit, vec![]).unwrap();
    assert_eq!(all_rows(&mut h, t), BTreeMap::from([(1, 10), (2, 20), (3, 33)]));
    assert_no_state(&mut h);

    // A plain rollback after a rollback-to.
    run(&mut h, 1, 2, vec![upd(t, 1, 11)]);
    sp(&mut h, 1, 2, 1, SET);
    run(&mut h, 1, 2, vec![ins(t, 9, 90)]);
    sp(&mut h, 1, 2, 1, BACK);
    run(&mut h, 1, 2, vec![ins(t, 8, 80)]);
    assert_eq!(h.key(1, 2, ExecType::Rollback, vec![]).unwrap().outcome, TxnOutcome::RolledBack);
    assert_eq!(all_rows(&mut h, t), BTreeMap::from([(1, 10), (2, 20), (3, 33)]));
    assert_no_state(&mut h);
}

#[test]
fn bad_savepoint_numbers_abort_the_transaction() {
    let (mut h, d) = setup(Knobs::default(), 4);
    let t = d.id;
    // Rolling back to a savepoint never set.
    run(&mut h, 1, 1, vec![ins(t, 1, 10)]);
    sp(&mut h, 1, 1, 1, SET);
    let r = h.savepoint(1, 1, 2, BACK).unwrap_err();
    assert_eq!(r.error.code, ErrorCode::MalformedSignal);
    assert_eq!(committed(&mut h, t, 1), None);
    assert_no_state(&mut h);
    // Numbers must go up.
    sp(&mut h, 1, 2, 5, SET);
    let r = h.savepoint(1, 2, 5, SET).unwrap_err();
    assert_eq!(r.error.code, ErrorCode::MalformedSignal);
    // 0 names no savepoint.
    let r = h.savepoint(1, 3, 0, BACK).unwrap_err();
    assert_eq!(r.error.code, ErrorCode::MalformedSignal);
    assert_no_state(&mut h);
}

#[test]
fn doomed_and_timed_out_transactions_keep_their_behaviour() {
    let knobs = Knobs { txn_inactive_timeout_ms: 1000, ..Knobs::default() };
    let (mut h, d) = setup(knobs, 2);
    let t = d.id;
    h.autocommit(vec![ins(t, 1, 10)]).unwrap();
    // A DDL dooms a transaction with writes on the table: the rollback-to
    // fails as its next operation would, and the transaction is aborted.
    sp(&mut h, 1, 1, 1, SET);
    run(&mut h, 1, 1, vec![upd(t, 1, 11)]);
    h.dict(2, DictOp::TruncateTable { name: "t".into() }).unwrap();
    let r = h.savepoint(1, 1, 1, BACK).unwrap_err();
    assert_eq!(r.error.code, ErrorCode::SchemaVersionMismatch);
    assert_no_state(&mut h);
    // An inactive transaction is aborted; the next request learns it.
    h.autocommit(vec![ins(t, 1, 10)]).unwrap();
    sp(&mut h, 1, 2, 1, SET);
    run(&mut h, 1, 2, vec![upd(t, 1, 12)]);
    let _ = h.advance_ms(2000);
    let r = h.savepoint(1, 2, 1, BACK).unwrap_err();
    assert_eq!(r.error.code, ErrorCode::TransactionTimeout);
    assert_eq!(committed(&mut h, t, 1), Some(10));
    assert_no_state(&mut h);
}

/// ALTER TABLE (a rebuild) dooms a transaction that wrote the table and drops
/// its images, including those a savepoint keeps for undo: a rollback-to then
/// fails, the transaction aborts, and nothing of it reaches the new table.
#[test]
fn an_alter_table_dooms_a_transaction_with_savepoints() {
    let (mut h, d) = setup(Knobs::default(), 2);
    let t = d.id;
    h.autocommit(vec![ins(t, 1, 10), ins(t, 2, 20)]).unwrap();
    run(&mut h, 1, 1, vec![upd(t, 1, 11)]);
    sp(&mut h, 1, 1, 1, SET);
    run(&mut h, 1, 1, vec![upd(t, 1, 12), del(t, 2), ins(t, 3, 30)]);
    // The new layout: a column added in front, the old ones after it.
    let mut def = d.clone();
    def.columns.insert(0, norr_signals::ColumnDef::new("w", int()).not_null().default_value(Value::Int(7)));
    def.primary_key = vec![1];
    for ix in &mut def.indexes {
        ix.columns = ix.columns.iter().map(|c| c + 1).collect();
    }
    let sources = vec![
        norr_signals::ColumnSource::Value(Value::Int(7)),
        norr_signals::ColumnSource::Old(0),
        norr_signals::ColumnSource::Old(1),
    ];
    h.dict(2, DictOp::AlterTable { table: "t".into(), def, sources, expect_version: d.version }).unwrap();
    let r = h.savepoint(1, 1, 1, BACK).unwrap_err();
    assert_eq!(r.error.code, ErrorCode::SchemaVersionMismatch);
    assert_no_state(&mut h);
    let (rows, _) = h.scan_all(100, 0, true, ScanSpec::full(t)).unwrap();
    let mut rows: Vec<Vec<Value>> = rows;
    rows.sort_by_key(|r| format!("{r:?}"));
    assert_eq!(
        rows,
        vec![vec![Value::Int(7), Value::Int(1), Value::Int(10)], vec![Value::Int(7), Value::Int(2), Value::Int(20)],],
        "the committed rows, in the new layout, and nothing of the doomed transaction"
    );
}

#[test]
fn simple_reads_and_scans_around_a_rollback_to() {
    let (mut h, d) = setup(Knobs::default(), 4);
    let t = d.id;
    h.autocommit((1..=6).map(|i| ins(t, i, i * 10)).collect()).unwrap();
    // Only committed reads so far: no LQH state, the rollback is TC's alone.
    sp(&mut h, 1, 1, 1, SET);
    assert_eq!(seen(&mut h, 1, 1, t, 1), Some(10));
    let before = h.counters().get("lqh: rollbacks to savepoint").copied().unwrap_or(0);
    sp(&mut h, 1, 1, 1, BACK);
    assert_eq!(h.counters().get("lqh: rollbacks to savepoint").copied().unwrap_or(0), before);
    // A locking scan after the savepoint: its locks stay, the writes go.
    let mut spec = ScanSpec::full(t);
    spec.lock = LockMode::Exclusive;
    let (rows, _) = h.scan_all(1, 1, false, spec.clone()).unwrap();
    assert_eq!(rows.len(), 6);
    run(&mut h, 1, 1, vec![del(t, 2), upd(t, 3, 33), ins(t, 7, 70)]);
    sp(&mut h, 1, 1, 1, BACK);
    // Scans in the transaction (committed-read and locking) see the images
    // as they are after the rollback.
    let expect: BTreeMap<i64, i64> = (1..=6).map(|i| (i, i * 10)).collect();
    for lock in [LockMode::CommittedRead, LockMode::Shared] {
        let mut s = ScanSpec::full(t);
        s.lock = lock;
        let (rows, _) = h.scan_all(1, 1, false, s).unwrap();
        let got: BTreeMap<i64, i64> = rows
            .into_iter()
            .map(|r| match (&r[0], &r[1]) {
                (Value::Int(id), Value::Int(a)) => (*id, *a),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(got, expect, "{lock:?} scan");
    }
    h.key(1, 1, ExecType::Commit, vec![]).unwrap();
    assert_eq!(all_rows(&mut h, t), expect);
    assert_no_state(&mut h);
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Random writes, savepoints, releases and rollbacks in one transaction
/// against a model (id -> unique value), checked by reads along the way and
/// by the committed table at the end.
fn model_run(h: &mut Harness, t: u32, seed: u64, steps: usize, unique: bool) {
    let mut rng = Rng(seed);
    let mut model: BTreeMap<i64, i64> = (0..8).map(|i| (i, 1000 + i)).collect();
    h.autocommit(model.iter().map(|(k, v)| ins(t, *k, *v)).collect()).unwrap();
    let txn = seed;
    // The client's savepoints: (number, the model when it was set).
    let mut stack: Vec<(u32, BTreeMap<i64, i64>)> = Vec::new();
    let mut next_sp = 1;
    for _ in 0..steps {
        match rng.below(10) {
            0 => {
                stack.push((next_sp, model.clone()));
                sp(h, 1, txn, next_sp, SET);
                next_sp += 1;
            }
            1 if !stack.is_empty() => {
                let i = rng.below(stack.len() as u64) as usize;
                stack.truncate(i + 1);
                sp(h, 1, txn, stack[i].0, BACK);
                model = stack[i].1.clone();
            }
            2 if !stack.is_empty() => {
                // RELEASE: the client forgets it and those after it.
                let i = rng.below(stack.len() as u64) as usize;
                stack.truncate(i);
            }
            _ => {
                let id = rng.below(16) as i64;
                let v = rng.below(24) as i64;
                let exists = model.contains_key(&id);
                let mut op = match rng.below(3) {
                    0 if exists => del(t, id),
                    _ if exists => upd(t, id, v),
                    _ => ins(t, id, v),
                };
                op.abort_on_error = false;
                let dup = unique
                    && op.kind.is_write()
                    && op.kind != OpKind::Delete
                    && model.iter().any(|(k, x)| *k != id && *x == v);
                let r = h.key(1, txn, ExecType::NoCommit, vec![op.clone()]).unwrap().results.remove(0);
                if dup {
                    assert!(matches!(&r, OpResult::Err(e) if e.code == ErrorCode::DuplicateUniqueKey), "{op:?}: {r:?}");
                } else {
                    assert!(matches!(r, OpResult::Ok(_)), "{op:?}: {r:?}");
                    if op.kind == OpKind::Delete {
                        model.remove(&id);
                    } else {
                        model.insert(id, v);
                    }
                }
            }
        }
        if rng.below(4) == 0 {
            let id = rng.below(16) as i64;
            assert_eq!(seen(h, 1, txn, t, id), model.get(&id).copied(), "row {id}");
        }
    }
    h.key(1, txn, ExecType::Commit, vec![]).unwrap();
    assert_eq!(all_rows(h, t), model);
    assert_no_state(h);
}

#[test]
fn random_savepoint_histories_match_a_model() {
    for seed in 1..=12u64 {
        let (mut h, d) = setup(Knobs::default(), 4);
        model_run(&mut h, d.id, seed * 0x9e37_79b9, 300, false);
    }
}

#[test]
fn random_savepoint_histories_with_a_unique_index_match_a_model() {
    for seed in 1..=12u64 {
        let mut h = Harness::new(Knobs::default());
        let mut def = table_def("u", 4, &[("u", int())]);
        def.indexes.push(index_def("by_u", &[1], true, IndexKind::UniqueHash));
        let d = h.create_table(def).unwrap();
        model_run(&mut h, d.id, seed * 0x85eb_ca6b, 300, true);
    }
}

/// TC coordinating two LQH instances (partitions spread over both): the
/// rollback-to goes to each and TC answers once both confirmed.
#[test]
fn rollback_to_reaches_every_lqh_instance() {
    let knobs = Knobs::default();
    let mut s = Scheduler::new(DATA_NODE, knobs.job_buffer_bound);
    s.add_block(block::TC, 0, Box::new(norr_txn::tc::Tc::new(DATA_NODE, 0, 2, &knobs)));
    for i in 0..2 {
        s.add_block(block::LQH, i, Box::new(norr_txn::lqh::Lqh::new(DATA_NODE, i, 2, &knobs)));
    }
    s.add_block(block::DICT, 0, Box::new(norr_txn::dict::Dict::new(DATA_NODE, 2, &knobs)));
    let mut h = Harness::with_scheduler(s);
    let d = h.create_table(table_def("t", 8, &[("a", int())])).unwrap();
    let t = d.id;
    model_run(&mut h, t, 77, 200, false);
    // Rollbacks reached both instances (each counts its own).
    let c = h.counters();
    assert!(c["lqh: rollbacks to savepoint"] > c["tc: rollbacks to savepoint"], "{c:?}");
}
