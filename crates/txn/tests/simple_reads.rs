//! Simple reads: a transaction whose operations at an LQH are all committed
//! reads leaves no record there, and commits or aborts without a round to
//! that LQH (see `norr_signals::internal`). Transactions that hold state at
//! LQH keep the full protocol.

use norr_knobs::Knobs;
use norr_signals::ops::{KeyAccess, KeyOp, LockMode, OpResult};
use norr_signals::schema::{IndexKind, TableDef};
use norr_signals::value::{ColumnType, Value};
use norr_signals::{ErrorCode, ExecType, Signal, TcKeyReq, TxnOutcome};
use norr_txn::testkit::{api_ref, index_def, table_def, Harness};
use std::collections::BTreeMap;

fn int() -> ColumnType {
    ColumnType::BigInt { unsigned: false }
}

fn setup(knobs: Knobs) -> (Harness, TableDef) {
    let mut h = Harness::new(knobs);
    let mut def = table_def("t", 4, &[("a", int()), ("u", int())]);
    def.indexes.push(index_def("u_uniq", &[2], true, IndexKind::UniqueHash));
    let def = h.create_table(def).unwrap();
    let rows = (1..=3)
        .map(|i| KeyOp::insert(def.id, vec![Value::Int(i)], vec![(1, Value::Int(10 * i)), (2, Value::Int(100 + i))]));
    h.autocommit(rows.collect()).unwrap();
    (h, def)
}

fn read(t: u32, id: i64) -> KeyOp {
    let mut op = KeyOp::read(t, vec![Value::Int(id)]);
    op.projection = vec![1];
    op
}

fn row(a: i64) -> OpResult {
    OpResult::Ok(Some(vec![Value::Int(a)]))
}

/// Counters that went up since `before`, by how much (gauges such as
/// "lqh: open transactions" may also go down: those are left out).
fn delta(h: &mut Harness, before: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    h.counters()
        .into_iter()
        .filter_map(|(k, v)| {
            let d = v.saturating_sub(before.get(&k).copied().unwrap_or(0));
            (d > 0).then_some((k, d))
        })
        .collect()
}

/// Nothing of any transaction is left in TC or LQH.
fn assert_no_state(h: &mut Harness) {
    assert_eq!(h.stats().open_transactions, 0, "TC transaction records left");
    let c = h.counters();
    assert_eq!(c.get("lqh: open transactions").copied().unwrap_or(0), 0, "LQH transaction records left");
    assert_eq!(c.get("lqh: locked keys").copied().unwrap_or(0), 0, "row locks left");
}

#[test]
fn point_select_commits_without_an_lqh_round() {
    let (mut h, d) = setup(Knobs::default());
    let before = h.counters();
    let c = h.key(100, 7, ExecType::Commit, vec![read(d.id, 2)]).unwrap();
    assert_eq!(c.outcome, TxnOutcome::Committed);
    assert_eq!(c.results, vec![row(20)]);
    let dl = delta(&mut h, &before);
    assert_eq!(dl.get("lqh: simple reads (no record)"), Some(&1));
    assert_eq!(dl.get("tc: simple reads (no lqh state)"), Some(&1));
    assert_eq!(dl.get("tc: completes"), None, "no complete phase: {dl:?}");
    assert_eq!(dl.get("lqh: commits"), None);
    assert_no_state(&mut h);
    // Several reads in one batch, by primary key and by unique index.
    let mut by_u = KeyOp::read(d.id, vec![]);
    by_u.key = KeyAccess::Unique { index: d.indexes[0].id, values: vec![Value::Int(103)] };
    by_u.projection = vec![0];
    let c = h.key(100, 8, ExecType::Commit, vec![read(d.id, 1), by_u, read(d.id, 3)]).unwrap();
    assert_eq!(c.results, vec![row(10), OpResult::Ok(Some(vec![Value::Int(3)])), row(30)]);
    assert_no_state(&mut h);
}

#[test]
fn missing_rows_in_simple_reads() {
    let (mut h, d) = setup(Knobs::default());
    let mut soft = read(d.id, 9);
    soft.abort_on_error = false;
    let c = h.key(100, 1, ExecType::Commit, vec![soft, read(d.id, 1)]).unwrap();
    assert_eq!(c.outcome, TxnOutcome::Committed);
    assert!(matches!(&c.results[0], OpResult::Err(e) if e.code == ErrorCode::NoSuchRow));
    assert_eq!(c.results[1], row(10));
    let r = h.key(100, 2, ExecType::Commit, vec![read(d.id, 1), read(d.id, 9)]).unwrap_err();
    assert_eq!(r.error.code, ErrorCode::NoSuchRow);
    assert_eq!(r.op_index, Some(1));
    assert_no_state(&mut h);
    // The handle is free again after either answer.
    assert_eq!(h.key(100, 2, ExecType::Commit, vec![read(d.id, 2)]).unwrap().results, vec![row(20)]);
}

#[test]
fn committed_read_after_a_write_of_the_same_transaction_sees_it_and_commits_it() {
    let (mut h, d) = setup(Knobs::default());
    let up = KeyOp::update(d.id, vec![Value::Int(1)], vec![(1, Value::Int(11))]);
    assert_eq!(h.key(100, 1, ExecType::NoCommit, vec![up]).unwrap().outcome, TxnOutcome::Open);
    let before = h.counters();
    let c = h.key(100, 1, ExecType::Commit, vec![read(d.id, 1)]).unwrap();
    assert_eq!(c.results, vec![row(11)], "reads its own write");
    let dl = delta(&mut h, &before);
    assert_eq!(dl.get("lqh: simple reads (no record)"), None);
    assert_eq!(dl.get("lqh: commits"), Some(&1));
    assert_eq!(dl.get("tc: completes"), Some(&1));
    assert_no_state(&mut h);
    assert_eq!(h.get(d.id, vec![Value::Int(1)]).unwrap()[1], Value::Int(11));
}

#[test]
fn write_after_simple_reads_of_the_same_transaction_commits() {
    let (mut h, d) = setup(Knobs::default());
    // A NoCommit batch of committed reads leaves nothing at LQH ...
    assert_eq!(h.key(100, 1, ExecType::NoCommit, vec![read(d.id, 1)]).unwrap().results, vec![row(10)]);
    assert_eq!(h.counters().get("lqh: open transactions").copied().unwrap_or(0), 0);
    assert_eq!(h.stats().open_transactions, 1, "TC keeps the open transaction");
    // ... and a later write makes LQH a participant as usual.
    let up = KeyOp::update(d.id, vec![Value::Int(1)], vec![(1, Value::Int(12))]);
    let c = h.key(100, 1, ExecType::Commit, vec![up, read(d.id, 1)]).unwrap();
    assert_eq!(c.outcome, TxnOutcome::Committed);
    assert_eq!(c.results[1], row(12));
    assert_no_state(&mut h);
    assert_eq!(h.get(d.id, vec![Value::Int(1)]).unwrap()[1], Value::Int(12));
    // Simple reads, then an empty commit; simple reads, then a rollback.
    h.key(100, 2, ExecType::NoCommit, vec![read(d.id, 2)]).unwrap();
    assert_eq!(h.key(100, 2, ExecType::Commit, vec![]).unwrap().outcome, TxnOutcome::Committed);
    h.key(100, 3, ExecType::NoCommit, vec![read(d.id, 2)]).unwrap();
    assert_eq!(h.key(100, 3, ExecType::Rollback, vec![]).unwrap().outcome, TxnOutcome::RolledBack);
    assert_no_state(&mut h);
}

#[test]
fn mixed_batch_keeps_the_commit_protocol() {
    let (mut h, d) = setup(Knobs::default());
    let before = h.counters();
    let ins = KeyOp::insert(d.id, vec![Value::Int(4)], vec![(1, Value::Int(40))]);
    let c = h.key(100, 1, ExecType::Commit, vec![read(d.id, 1), ins, read(d.id, 4)]).unwrap();
    assert_eq!(c.results, vec![row(10), OpResult::Ok(None), row(40)]);
    let dl = delta(&mut h, &before);
    assert_eq!(dl.get("lqh: simple reads (no record)"), None);
    assert_eq!(dl.get("tc: completes"), Some(&1));
    assert_no_state(&mut h);
    assert_eq!(h.get(d.id, vec![Value::Int(4)]).unwrap()[1], Value::Int(40));
}

#[test]
fn committed_read_after_a_row_lock_keeps_the_lock_to_commit() {
    let (mut h, d) = setup(Knobs { lock_wait_timeout_ms: 50, ..Knobs::default() });
    let mut locking = read(d.id, 1);
    locking.lock = LockMode::Shared;
    h.key(100, 1, ExecType::NoCommit, vec![locking]).unwrap();
    // A committed read does not release or skip the held lock ...
    h.key(100, 1, ExecType::NoCommit, vec![read(d.id, 2)]).unwrap();
    let up = KeyOp::update(d.id, vec![Value::Int(1)], vec![(1, Value::Int(13))]);
    assert!(h.try_key(101, 2, ExecType::Commit, vec![up]).is_none(), "writer waits for the shared lock");
    // ... the commit (with more committed reads) does, and the writer goes on.
    assert_eq!(h.key(100, 1, ExecType::Commit, vec![read(d.id, 3)]).unwrap().outcome, TxnOutcome::Committed);
    let w = h.take_key_reply(101, 2).expect("writer answered once the lock is free").unwrap();
    assert_eq!(w.outcome, TxnOutcome::Committed);
    assert_no_state(&mut h);
}

/// The API node fails after TC sent the reads to LQH and before LQH ran
/// them: TC ends the transaction at once (LQH holds nothing of it), and the
/// late LQH answer is dropped.
#[test]
fn api_failure_while_simple_reads_run() {
    let (mut h, d) = setup(Knobs::default());
    h.send(5, Signal::TcKeyReq(Box::new(TcKeyReq { txn: 1, exec: ExecType::Commit, ops: vec![read(d.id, 1)] })));
    assert!(h.sched.run_one(), "TC takes the request and sends LQH_KEYREQ");
    let out = h.api_fail(5);
    assert!(out.iter().all(|e| e.to != api_ref(5)), "nothing is sent to the failed API node: {out:?}");
    assert_no_state(&mut h);
    let c = h.counters();
    assert_eq!(c.get("lqh: simple reads (no record)"), Some(&1), "LQH still ran the read");
    // Another client is unaffected.
    assert_eq!(h.key(100, 1, ExecType::Commit, vec![read(d.id, 1)]).unwrap().results, vec![row(10)]);
}

/// A transaction of simple reads left idle is aborted by TC alone, and its
/// handle answers the next request with TransactionTimeout, as before.
#[test]
fn idle_transaction_of_simple_reads_times_out_with_a_tombstone() {
    let (mut h, d) = setup(Knobs { txn_inactive_timeout_ms: 100, ..Knobs::default() });
    h.key(100, 1, ExecType::NoCommit, vec![read(d.id, 1)]).unwrap();
    let out = h.advance_ms(1_000);
    assert!(out.iter().all(|e| e.to != api_ref(100)), "TC aborts silently: {out:?}");
    assert_eq!(h.stats().open_transactions, 0);
    let r = h.key(100, 1, ExecType::Commit, vec![read(d.id, 1)]).unwrap_err();
    assert_eq!(r.error.code, ErrorCode::TransactionTimeout);
    // The tombstone is gone with that answer: the handle starts afresh.
    assert_eq!(h.key(100, 1, ExecType::Commit, vec![read(d.id, 1)]).unwrap().results, vec![row(10)]);
    assert_no_state(&mut h);
}
