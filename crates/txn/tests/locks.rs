//! Row locks: compatibility, waits, lock-wait time-out, deadlock, API failure,
//! inactivity time-out.

use norr_knobs::Knobs;
use norr_signals::ops::{KeyOp, LockMode, LockWait, OpResult};
use norr_signals::schema::TableDef;
use norr_signals::value::{ColumnType, Value};
use norr_signals::{ErrorCode, ExecType, TxnOutcome};
use norr_txn::testkit::{table_def, Harness};

fn setup(knobs: Knobs) -> (Harness, TableDef) {
    let mut h = Harness::new(knobs);
    let d = h.create_table(table_def("t", 4, &[("a", ColumnType::BigInt { unsigned: false })])).unwrap();
    let t = d.id;
    let ops = (1..=4).map(|i| KeyOp::insert(t, vec![Value::Int(i)], vec![(1, Value::Int(i * 10))])).collect();
    h.autocommit(ops).unwrap();
    (h, d)
}

fn read(t: u32, id: i64, lock: LockMode) -> KeyOp {
    KeyOp { lock, ..KeyOp::read(t, vec![Value::Int(id)]) }
}

fn upd(t: u32, id: i64, a: i64) -> KeyOp {
    KeyOp::update(t, vec![Value::Int(id)], vec![(1, Value::Int(a))])
}

#[test]
fn shared_locks_are_compatible_exclusive_waits_until_commit() {
    let (mut h, d) = setup(Knobs::default());
    let t = d.id;
    h.key(1, 1, ExecType::NoCommit, vec![read(t, 1, LockMode::Shared)]).unwrap();
    h.key(2, 1, ExecType::NoCommit, vec![read(t, 1, LockMode::Shared)]).unwrap();
    // A writer waits behind both readers.
    assert!(h.try_key(3, 1, ExecType::Commit, vec![upd(t, 1, 99)]).is_none());
    // Committed read neither blocks nor sees anything uncommitted.
    assert_eq!(h.get(t, vec![Value::Int(1)]).unwrap()[1], Value::Int(10));
    h.key(1, 1, ExecType::Commit, vec![]).unwrap();
    assert!(h.take_key_reply(3, 1).is_none(), "one reader still holds it");
    h.key(2, 1, ExecType::Commit, vec![]).unwrap();
    let c = h.take_key_reply(3, 1).expect("granted after the readers committed").unwrap();
    assert_eq!(c.outcome, TxnOutcome::Committed);
    assert_eq!(h.get(t, vec![Value::Int(1)]).unwrap()[1], Value::Int(99));
}

#[test]
fn exclusive_read_blocks_and_upgrade_works() {
    let (mut h, d) = setup(Knobs::default());
    let t = d.id;
    h.key(1, 1, ExecType::NoCommit, vec![read(t, 2, LockMode::Exclusive)]).unwrap();
    assert!(h.try_key(2, 1, ExecType::NoCommit, vec![read(t, 2, LockMode::Shared)]).is_none());
    // Uncommitted write is invisible to committed reads.
    h.key(1, 1, ExecType::NoCommit, vec![upd(t, 2, 7)]).unwrap();
    assert_eq!(h.get(t, vec![Value::Int(2)]).unwrap()[1], Value::Int(20));
    h.key(1, 1, ExecType::Commit, vec![]).unwrap();
    let c = h.take_key_reply(2, 1).unwrap().unwrap();
    assert_eq!(c.results[0], OpResult::Ok(Some(vec![Value::Int(2), Value::Int(7)])), "re-read after the grant");
    // Shared -> exclusive upgrade by the only holder.
    h.key(2, 1, ExecType::Commit, vec![upd(t, 2, 8)]).unwrap();
    assert_eq!(h.get(t, vec![Value::Int(2)]).unwrap()[1], Value::Int(8));
}

#[test]
fn lock_wait_timeout_aborts_the_waiter_only() {
    let knobs = Knobs { lock_wait_timeout_ms: 100, ..Knobs::default() };
    let (mut h, d) = setup(knobs);
    let t = d.id;
    h.key(1, 1, ExecType::NoCommit, vec![upd(t, 1, 11)]).unwrap();
    // The waiter has done other work first: all of it is undone.
    assert!(h.try_key(2, 5, ExecType::NoCommit, vec![upd(t, 3, 33), upd(t, 1, 12)]).is_none());
    let out = h.advance_ms(99);
    h.inbox.extend(out);
    assert!(h.take_key_reply(2, 5).is_none(), "not before the time-out");
    let out = h.advance_ms(2);
    h.inbox.extend(out);
    let r = h.take_key_reply(2, 5).expect("timed out").unwrap_err();
    assert_eq!(r.error.code, ErrorCode::LockWaitTimeout);
    assert!(r.error.code.is_temporary());
    assert_eq!(r.op_index, Some(1));
    // Its lock on row 3 is gone; the holder goes on and commits.
    h.autocommit(vec![upd(t, 3, 34)]).unwrap();
    let c = h.key(1, 1, ExecType::Commit, vec![upd(t, 2, 22)]).unwrap();
    assert_eq!(c.outcome, TxnOutcome::Committed);
    assert_eq!(h.get(t, vec![Value::Int(1)]).unwrap()[1], Value::Int(11));
    // The aborted handle is free again.
    h.key(2, 5, ExecType::Commit, vec![upd(t, 1, 13)]).unwrap();
    assert_eq!(h.get(t, vec![Value::Int(1)]).unwrap()[1], Value::Int(13));
}

#[test]
fn an_operation_sent_with_its_own_lock_wait_waits_that_long_instead_of_the_clusters() {
    // Cluster time-out 100 ms; a session asked for 300 ms (a write) and for
    // 30 ms (a locking read): each times out at its own bound.
    let knobs = Knobs { lock_wait_timeout_ms: 100, ..Knobs::default() };
    let (mut h, d) = setup(knobs);
    let t = d.id;
    h.key(1, 1, ExecType::NoCommit, vec![upd(t, 1, 11)]).unwrap();
    let long = KeyOp { wait: LockWait::WaitMs(300), ..upd(t, 1, 12) };
    assert!(h.try_key(2, 1, ExecType::NoCommit, vec![long]).is_none());
    let short = KeyOp { wait: LockWait::Wait.bounded(30), ..read(t, 1, LockMode::Shared) };
    assert!(h.try_key(3, 1, ExecType::NoCommit, vec![short]).is_none());
    let out = h.advance_ms(29);
    h.inbox.extend(out);
    assert!(h.take_key_reply(3, 1).is_none(), "the read waits its 30 ms");
    let out = h.advance_ms(2);
    h.inbox.extend(out);
    let r = h.take_key_reply(3, 1).expect("the read timed out at 30 ms").unwrap_err();
    assert_eq!(r.error.code, ErrorCode::LockWaitTimeout);
    let out = h.advance_ms(170);
    h.inbox.extend(out);
    assert!(h.take_key_reply(2, 1).is_none(), "past the cluster's 100 ms, the write still waits");
    let out = h.advance_ms(100);
    h.inbox.extend(out);
    let r = h.take_key_reply(2, 1).expect("the write timed out at 300 ms").unwrap_err();
    assert_eq!(r.error.code, ErrorCode::LockWaitTimeout);
    // A waiter granted within its bound goes on as usual.
    let long = KeyOp { wait: LockWait::WaitMs(5_000), ..upd(t, 1, 13) };
    assert!(h.try_key(4, 1, ExecType::Commit, vec![long]).is_none());
    let out = h.advance_ms(1_000);
    h.inbox.extend(out);
    assert!(h.take_key_reply(4, 1).is_none());
    h.key(1, 1, ExecType::Commit, vec![]).unwrap();
    let c = h.take_key_reply(4, 1).expect("granted at the holder's commit").unwrap();
    assert_eq!(c.outcome, TxnOutcome::Committed);
    assert_eq!(h.get(t, vec![Value::Int(1)]).unwrap()[1], Value::Int(13));
}

#[test]
fn deadlock_is_broken_by_the_timeout() {
    let knobs = Knobs { lock_wait_timeout_ms: 50, ..Knobs::default() };
    let (mut h, d) = setup(knobs);
    let t = d.id;
    h.key(1, 1, ExecType::NoCommit, vec![upd(t, 1, 100)]).unwrap();
    h.key(2, 1, ExecType::NoCommit, vec![upd(t, 2, 200)]).unwrap();
    assert!(h.try_key(1, 1, ExecType::NoCommit, vec![upd(t, 2, 101)]).is_none());
    let _ = h.advance_ms(10);
    assert!(h.try_key(2, 1, ExecType::NoCommit, vec![upd(t, 1, 201)]).is_none());
    let out = h.advance_ms(45);
    h.inbox.extend(out);
    // The first waiter times out; its abort releases row 1, so the second is granted.
    let r1 = h.take_key_reply(1, 1).unwrap().unwrap_err();
    assert_eq!(r1.error.code, ErrorCode::LockWaitTimeout);
    let r2 = h.take_key_reply(2, 1).unwrap().unwrap();
    assert_eq!(r2.outcome, TxnOutcome::Open);
    h.key(2, 1, ExecType::Commit, vec![]).unwrap();
    assert_eq!(h.get(t, vec![Value::Int(1)]).unwrap()[1], Value::Int(201));
    assert_eq!(h.get(t, vec![Value::Int(2)]).unwrap()[1], Value::Int(200));
}

#[test]
fn api_failure_releases_locks_and_silences_replies() {
    let (mut h, d) = setup(Knobs::default());
    let t = d.id;
    h.key(1, 1, ExecType::NoCommit, vec![upd(t, 1, 5), KeyOp::insert(t, vec![Value::Int(50)], vec![])]).unwrap();
    // Another client of the same API node waits on a lock: also dropped.
    assert!(h.try_key(1, 2, ExecType::NoCommit, vec![upd(t, 1, 6)]).is_none());
    assert!(h.try_key(2, 1, ExecType::Commit, vec![upd(t, 1, 7)]).is_none());
    let out = h.api_fail(1);
    assert!(out.iter().all(|e| e.to.node != 1), "nothing sent to the failed API node: {out:?}");
    h.inbox.extend(out);
    assert_eq!(h.take_key_reply(2, 1).unwrap().unwrap().outcome, TxnOutcome::Committed);
    assert_eq!(h.get(t, vec![Value::Int(1)]).unwrap()[1], Value::Int(7));
    assert_eq!(h.get(t, vec![Value::Int(50)]), None);
    assert_eq!(h.stats().open_transactions, 0);
    // The node id may reconnect and start afresh.
    h.key(1, 1, ExecType::Commit, vec![upd(t, 1, 8)]).unwrap();
}

#[test]
fn inactive_transaction_is_aborted_and_its_handle_reports_it() {
    let knobs = Knobs { txn_inactive_timeout_ms: 1_000, ..Knobs::default() };
    let (mut h, d) = setup(knobs);
    let t = d.id;
    h.key(1, 1, ExecType::NoCommit, vec![upd(t, 1, 5)]).unwrap();
    h.key(1, 2, ExecType::NoCommit, vec![upd(t, 2, 5)]).unwrap();
    // Txn 2 stays active, txn 1 goes quiet.
    for _ in 0..6 {
        let out = h.advance_ms(300);
        h.inbox.extend(out);
        h.key(1, 2, ExecType::NoCommit, vec![read(t, 2, LockMode::Shared)]).unwrap();
    }
    // Row 1 is free again.
    h.autocommit(vec![upd(t, 1, 9)]).unwrap();
    let r = h.key(1, 1, ExecType::Commit, vec![upd(t, 3, 1)]).unwrap_err();
    assert_eq!(r.error.code, ErrorCode::TransactionTimeout);
    // Reported once; then the handle starts a new transaction.
    h.key(1, 1, ExecType::Commit, vec![upd(t, 3, 1)]).unwrap();
    h.key(1, 2, ExecType::Commit, vec![]).unwrap();
    assert_eq!(h.get(t, vec![Value::Int(2)]).unwrap()[1], Value::Int(5));
    // With nothing open the timer stops (no signals pending forever).
    let _ = h.advance_ms(5_000);
    assert_eq!(h.sched.next_timer_ns(), None);
}

#[test]
fn request_while_busy_is_refused() {
    let (mut h, d) = setup(Knobs::default());
    let t = d.id;
    h.key(1, 1, ExecType::NoCommit, vec![upd(t, 1, 1)]).unwrap();
    assert!(h.try_key(2, 1, ExecType::NoCommit, vec![upd(t, 1, 2)]).is_none());
    let r = h.key(2, 1, ExecType::NoCommit, vec![upd(t, 2, 2)]).unwrap_err();
    assert_eq!(r.error.code, ErrorCode::MalformedSignal);
    h.key(1, 1, ExecType::Commit, vec![]).unwrap();
    assert_eq!(h.take_key_reply(2, 1).unwrap().unwrap().outcome, TxnOutcome::Open);
    h.key(2, 1, ExecType::Commit, vec![]).unwrap();
}

#[test]
fn requests_queued_behind_api_failure_are_dropped() {
    use norr_kernel::{BlockRef, Envelope, Priority};
    use norr_signals::{block, Signal, TcKeyReq};
    let (mut h, d) = setup(Knobs::default());
    let t = d.id;
    // The request is in job buffer B when API_FAILREQ (priority A) arrives.
    h.send(1, Signal::TcKeyReq(Box::new(TcKeyReq { txn: 1, exec: ExecType::NoCommit, ops: vec![upd(t, 1, 5)] })));
    for b in [block::TC, block::DICT] {
        let env = Envelope {
            from: BlockRef::new(0, 0, 0),
            to: BlockRef::new(h.node, b, 0),
            prio: Priority::A,
            signal: Signal::ApiFailReq { api_node: 1 },
        };
        h.sched.deliver(env).unwrap();
    }
    let out = h.run();
    assert!(out.iter().all(|e| e.to.node != 1), "{out:?}");
    assert_eq!(h.stats().open_transactions, 0);
    h.autocommit(vec![upd(t, 1, 6)]).unwrap();
    // Once handled, the node id may connect again.
    h.key(1, 1, ExecType::Commit, vec![upd(t, 1, 7)]).unwrap();
}

#[test]
fn api_failure_closes_scans() {
    use norr_signals::ops::ScanSpec;
    let (mut h, d) = setup(Knobs::default());
    let spec = ScanSpec { batch_rows: 1, ..ScanSpec::full(d.id) };
    let (_, r) = h.scan_open(1, 1, true, spec.clone());
    assert!(!r.unwrap().unwrap().done);
    let (_, r) = h.scan_open(1, 2, false, ScanSpec { lock: LockMode::Exclusive, ..spec });
    assert!(!r.unwrap().unwrap().done);
    let out = h.api_fail(1);
    assert!(out.iter().all(|e| e.to.node != 1));
    // Locks of the locking scan are gone.
    h.autocommit((1..=4).map(|i| upd(d.id, i, 0)).collect()).unwrap();
    assert_eq!(h.stats().open_transactions, 0);
}

#[test]
fn long_lock_waits_of_a_scan_do_not_count_as_inactivity() {
    use norr_signals::ops::ScanSpec;
    let knobs = Knobs { txn_inactive_timeout_ms: 100, lock_wait_timeout_ms: 80, ..Knobs::default() };
    let (mut h, _) = setup(knobs);
    // One partition, so the scan meets the rows one after the other.
    let d = h.create_table(table_def("one", 1, &[("a", ColumnType::BigInt { unsigned: false })])).unwrap();
    let t = d.id;
    h.autocommit((1..=4).map(|i| KeyOp::insert(t, vec![Value::Int(i)], vec![])).collect()).unwrap();
    // Rows 1..=3 are locked one after the other by other transactions; each
    // is released just before the scan's wait would time out.
    for i in 1..=3 {
        h.key(2, i as u64, ExecType::NoCommit, vec![upd(t, i, 0)]).unwrap();
    }
    let (id, r) = h.scan_open(1, 9, false, ScanSpec { lock: LockMode::Shared, ..ScanSpec::full(t) });
    assert!(r.is_none());
    for i in 1..=3 {
        let out = h.advance_ms(70);
        h.inbox.extend(out);
        h.key(2, i as u64, ExecType::Commit, vec![]).unwrap();
        // Keep the holders alive.
        for j in i + 1..=3 {
            h.key(2, j as u64, ExecType::NoCommit, vec![]).unwrap();
        }
    }
    let c = h.take_scan_reply(1, id).expect("scan answered");
    let c = c.unwrap();
    assert!(c.done);
    assert_eq!(c.rows.len(), 4);
    assert_eq!(h.key(1, 9, ExecType::Commit, vec![]).unwrap().outcome, TxnOutcome::Committed);
}

#[test]
fn idle_standalone_scan_is_closed() {
    use norr_signals::ops::ScanSpec;
    let knobs = Knobs { txn_inactive_timeout_ms: 100, ..Knobs::default() };
    let (mut h, d) = setup(knobs);
    let (id, r) = h.scan_open(1, 0, true, ScanSpec { batch_rows: 1, ..ScanSpec::full(d.id) });
    assert!(!r.unwrap().unwrap().done);
    let _ = h.advance_ms(300);
    let e = h.scan_next(1, 0, id, false).unwrap().unwrap_err();
    assert_eq!(e.error.code, ErrorCode::TransactionTimeout, "retriable, reported once");
    let e = h.scan_next(1, 0, id, false).unwrap().unwrap_err();
    assert_eq!(e.error.code, ErrorCode::NoSuchScan);
}

#[test]
fn inactive_locking_scan_reports_the_timeout_once() {
    use norr_signals::ops::ScanSpec;
    let knobs = Knobs { txn_inactive_timeout_ms: 100, ..Knobs::default() };
    let (mut h, d) = setup(knobs);
    let (id, r) =
        h.scan_open(1, 3, false, ScanSpec { lock: LockMode::Exclusive, batch_rows: 1, ..ScanSpec::full(d.id) });
    assert!(!r.unwrap().unwrap().done);
    let out = h.advance_ms(300);
    assert!(out.iter().all(|e| e.to.node != 1));
    // Locks are released.
    h.autocommit((1..=4).map(|i| upd(d.id, i, 0)).collect()).unwrap();
    let e = h.scan_next(1, 3, id, false).unwrap().unwrap_err();
    assert_eq!(e.error.code, ErrorCode::TransactionTimeout);
    // That answer freed the handle.
    assert_eq!(h.key(1, 3, ExecType::Commit, vec![upd(d.id, 1, 1)]).unwrap().outcome, TxnOutcome::Committed);
}
