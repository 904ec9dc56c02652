//! Locking reads that do not wait (`LockWait::NoWait`, `LockWait::SkipLocked`):
//! key reads and locking scans against rows other transactions lock.

use norr_knobs::Knobs;
use norr_signals::ops::{CmpOp, Filter, KeyOp, LockMode, LockWait, OpResult, ScanSpec};
use norr_signals::schema::TableDef;
use norr_signals::value::Value;
use norr_signals::{ErrorCode, ExecType, TxnOutcome};
use norr_txn::testkit::{k_s_table_def, Harness};

const N: i64 = 200;

/// Table (id, k, s) with k = id % 50, as in `scans.rs`; tiny scan steps so
/// scans cross many step signals.
fn setup() -> (Harness, TableDef) {
    let mut h = Harness::new(Knobs { scan_examine_per_step: 3, ..Knobs::default() });
    let d = h.create_table(k_s_table_def("s", 5)).unwrap();
    let ops: Vec<KeyOp> = (0..N)
        .map(|i| KeyOp::insert(d.id, vec![Value::Int(i)], vec![(1, Value::Int(i % 50)), (2, Value::str("x"))]))
        .collect();
    h.autocommit(ops).unwrap();
    (h, d)
}

fn read(t: u32, id: i64, lock: LockMode, wait: LockWait) -> KeyOp {
    KeyOp { lock, wait, abort_on_error: false, ..KeyOp::read(t, vec![Value::Int(id)]) }
}

fn upd(t: u32, id: i64) -> KeyOp {
    KeyOp::update(t, vec![Value::Int(id)], vec![(2, Value::str("changed"))])
}

fn code(r: &OpResult) -> Option<ErrorCode> {
    match r {
        OpResult::Err(e) => Some(e.code),
        OpResult::Ok(_) => None,
    }
}

fn ids(rows: &[Vec<Value>]) -> Vec<i64> {
    let mut v: Vec<i64> = rows.iter().map(|r| r[0].as_i64().unwrap()).collect();
    v.sort();
    v
}

/// Rows with k = 5: ids 5, 55, 105, 155.
fn k5(lock: LockMode, wait: LockWait) -> ScanSpec {
    ScanSpec {
        lock,
        wait,
        filter: Some(Filter::Cmp { col: 1, op: CmpOp::Eq, value: Value::Int(5) }),
        batch_rows: 2,
        ..ScanSpec::full(0)
    }
}

fn lock_waits(h: &mut Harness) -> u64 {
    h.counters().get("lqh: lock waits").copied().unwrap_or(0)
}

#[test]
fn nowait_key_read_fails_at_once_and_leaves_no_trace() {
    let (mut h, d) = setup();
    let t = d.id;
    h.key(1, 1, ExecType::NoCommit, vec![read(t, 1, LockMode::Exclusive, LockWait::Wait)]).unwrap();
    // Another transaction wrote row 3, then asks for row 1 without waiting.
    let c = h
        .try_key(2, 1, ExecType::NoCommit, vec![upd(t, 3), read(t, 1, LockMode::Shared, LockWait::NoWait)])
        .expect("answered without waiting")
        .unwrap();
    assert_eq!(c.outcome, TxnOutcome::Open, "the transaction stays open");
    assert_eq!(c.results[0], OpResult::Ok(None));
    assert_eq!(code(&c.results[1]), Some(ErrorCode::LockNoWait));
    assert_eq!(lock_waits(&mut h), 0, "nothing was queued");
    assert_eq!(h.stats().open_transactions, 2);
    // The holder commits; a third transaction locks the row without
    // waiting (no waiter of the NOWAIT read is ahead of it).
    h.key(1, 1, ExecType::Commit, vec![]).unwrap();
    let c = h.key(3, 1, ExecType::NoCommit, vec![read(t, 1, LockMode::Exclusive, LockWait::Wait)]).unwrap();
    assert_eq!(c.results[0], OpResult::Ok(Some(vec![Value::Int(1), Value::Int(1), Value::str("x")])));
    h.key(3, 1, ExecType::Commit, vec![]).unwrap();
    // The NOWAIT transaction's earlier write commits.
    assert_eq!(h.key(2, 1, ExecType::Commit, vec![]).unwrap().outcome, TxnOutcome::Committed);
    assert_eq!(h.get(t, vec![Value::Int(3)]).unwrap()[2], Value::str("changed"));
    assert_eq!(lock_waits(&mut h), 0);
    assert_eq!(h.stats().open_transactions, 0);
    // With abort_on_error the refusal aborts the transaction, as any error.
    h.key(1, 2, ExecType::NoCommit, vec![upd(t, 4)]).unwrap();
    let op = KeyOp { abort_on_error: true, ..read(t, 4, LockMode::Exclusive, LockWait::NoWait) };
    let r = h.try_key(2, 2, ExecType::NoCommit, vec![upd(t, 6), op]).expect("at once").unwrap_err();
    assert_eq!((r.error.code, r.op_index), (ErrorCode::LockNoWait, Some(1)));
    h.key(1, 2, ExecType::Commit, vec![]).unwrap();
    assert_eq!(h.get(t, vec![Value::Int(6)]).unwrap()[2], Value::str("x"), "aborted");
}

#[test]
fn skip_locked_key_read_sees_a_row_locked_by_another_as_absent() {
    let (mut h, d) = setup();
    let t = d.id;
    h.key(1, 1, ExecType::NoCommit, vec![upd(t, 1)]).unwrap();
    h.key(2, 1, ExecType::NoCommit, vec![read(t, 2, LockMode::Shared, LockWait::Wait)]).unwrap();
    let c = h
        .try_key(
            3,
            1,
            ExecType::NoCommit,
            vec![
                read(t, 1, LockMode::Shared, LockWait::SkipLocked),
                read(t, 2, LockMode::Shared, LockWait::SkipLocked),
                read(t, 2, LockMode::Shared, LockWait::NoWait),
                read(t, 2, LockMode::Exclusive, LockWait::SkipLocked),
                read(t, 7, LockMode::Exclusive, LockWait::SkipLocked),
            ],
        )
        .expect("answered without waiting")
        .unwrap()
        .results;
    assert_eq!(code(&c[0]), Some(ErrorCode::NoSuchRow), "exclusively locked by 1: skipped");
    assert_eq!(c[1], OpResult::Ok(Some(vec![Value::Int(2), Value::Int(2), Value::str("x")])), "shared with shared");
    assert!(matches!(c[2], OpResult::Ok(Some(_))));
    assert_eq!(code(&c[3]), Some(ErrorCode::NoSuchRow), "upgrade beside another reader: skipped");
    assert!(matches!(c[4], OpResult::Ok(Some(_))), "unlocked");
    // Its own locks are never skipped: its own uncommitted write is read.
    let c = h.key(1, 1, ExecType::NoCommit, vec![read(t, 1, LockMode::Exclusive, LockWait::SkipLocked)]).unwrap();
    assert_eq!(c.results[0], OpResult::Ok(Some(vec![Value::Int(1), Value::Int(1), Value::str("changed")])));
    for api in 1..=3 {
        h.key(api, 1, ExecType::Commit, vec![]).unwrap();
    }
    assert_eq!(lock_waits(&mut h), 0);
    assert_eq!(h.stats().open_transactions, 0);
}

#[test]
fn skip_locked_scan_skips_exactly_the_rows_locked_by_others() {
    let (mut h, d) = setup();
    let t = d.id;
    h.key(2, 1, ExecType::NoCommit, vec![upd(t, 5)]).unwrap();
    h.key(3, 1, ExecType::NoCommit, vec![read(t, 55, LockMode::Shared, LockWait::Wait)]).unwrap();
    // Shared: row 5 (exclusive holder) skipped, 55 (shared holder) read.
    let spec = ScanSpec { table: t, ..k5(LockMode::Shared, LockWait::SkipLocked) };
    let (rows, _) = h.scan_all(1, 1, false, spec).unwrap();
    assert_eq!(ids(&rows), vec![55, 105, 155]);
    // Exclusive: every row is locked by someone else now.
    let spec = ScanSpec { table: t, ..k5(LockMode::Exclusive, LockWait::SkipLocked) };
    let (rows, _) = h.scan_all(4, 1, false, spec).unwrap();
    assert!(rows.is_empty(), "{rows:?}");
    // Transaction 2's own row is not skipped (and shows its write).
    let spec = ScanSpec { table: t, ..k5(LockMode::Exclusive, LockWait::SkipLocked) };
    let (rows, _) = h.scan_all(2, 1, false, spec).unwrap();
    assert_eq!(ids(&rows), vec![5]);
    assert_eq!(rows[0][2], Value::str("changed"));
    assert_eq!(lock_waits(&mut h), 0);
    assert!(h.counters()["lqh: scan skipped a locked row"] >= 5);
    for api in 1..=4 {
        h.key(api, 1, ExecType::Commit, vec![]).unwrap();
    }
    assert_eq!(h.stats().open_transactions, 0);
}

#[test]
fn nowait_scan_fails_without_aborting_the_transaction() {
    let (mut h, d) = setup();
    let t = d.id;
    h.key(2, 1, ExecType::NoCommit, vec![upd(t, 105)]).unwrap();
    h.key(1, 1, ExecType::NoCommit, vec![KeyOp::insert(t, vec![Value::Int(1000)], vec![])]).unwrap();
    let spec = ScanSpec { table: t, ..k5(LockMode::Exclusive, LockWait::NoWait) };
    let (id, r) = h.scan_open(1, 1, false, spec);
    let mut r = r.expect("answered without waiting");
    // Batches of two rows: the refusal may come with a later batch.
    while let Ok(c) = r {
        assert!(!c.done, "the scan must meet row 105");
        r = h.scan_next(1, 1, id, false).expect("answered without waiting");
    }
    assert_eq!(r.unwrap_err().error.code, ErrorCode::LockNoWait);
    assert_eq!(lock_waits(&mut h), 0);
    // The transaction goes on and commits its insert.
    let c = h.key(1, 1, ExecType::NoCommit, vec![read(t, 1000, LockMode::Exclusive, LockWait::NoWait)]).unwrap();
    assert!(matches!(c.results[0], OpResult::Ok(Some(_))));
    assert_eq!(h.key(1, 1, ExecType::Commit, vec![]).unwrap().outcome, TxnOutcome::Committed);
    assert!(h.get(t, vec![Value::Int(1000)]).is_some());
    // Once the holder commits, row 105 locks without waiting.
    h.key(2, 1, ExecType::Commit, vec![]).unwrap();
    let c = h.key(3, 1, ExecType::Commit, vec![read(t, 105, LockMode::Exclusive, LockWait::NoWait)]).unwrap();
    assert_eq!(c.results[0], OpResult::Ok(Some(vec![Value::Int(105), Value::Int(5), Value::str("changed")])));
    assert_eq!(lock_waits(&mut h), 0);
    assert_eq!(h.stats().open_transactions, 0);
}
