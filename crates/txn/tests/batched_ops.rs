//! A batch reaches each LQH instance as one LQH_KEYREQ carrying all its
//! operations and comes back in LQH_KEYCONFs carrying their results: per-op
//! outcomes, batches over many partitions, errors part-way through a batch and
//! lock waits that split the answer.

use norr_knobs::Knobs;
use norr_signals::ops::{KeyOp, OpResult};
use norr_signals::schema::TableDef;
use norr_signals::value::{ColumnType, Value};
use norr_signals::{ErrorCode, ExecType, TxnOutcome};
use norr_txn::testkit::{table_def, Harness};

const PARTITIONS: u32 = 8;

fn setup() -> (Harness, TableDef) {
    let mut h = Harness::new(Knobs::default());
    let def = h.create_table(table_def("t", PARTITIONS, &[("a", ColumnType::BigInt { unsigned: false })])).unwrap();
    (h, def)
}

fn upd(t: u32, id: i64, a: i64) -> KeyOp {
    KeyOp::update(t, vec![Value::Int(id)], vec![(1, Value::Int(a))])
}

fn ins(t: u32, id: i64, a: i64) -> KeyOp {
    KeyOp::insert(t, vec![Value::Int(id)], vec![(1, Value::Int(a))])
}

fn soft(mut op: KeyOp) -> KeyOp {
    op.abort_on_error = false;
    op
}

fn a_of(h: &mut Harness, t: u32, id: i64) -> Option<Value> {
    h.get(t, vec![Value::Int(id)]).map(|r| r[1].clone())
}

/// Counter increase over `f`.
fn delta(h: &mut Harness, name: &str, f: impl FnOnce(&mut Harness)) -> u64 {
    let before = h.counters().get(name).copied().unwrap_or(0);
    f(h);
    h.counters().get(name).copied().unwrap_or(0) - before
}

#[test]
fn one_request_per_batch_over_every_partition() {
    let (mut h, d) = setup();
    let t = d.id;
    let ops: Vec<KeyOp> = (0..64).map(|i| ins(t, i, i * 10)).collect();
    let (reqs, confs) = {
        let mut confs = 0;
        let reqs = delta(&mut h, "lqh: key requests", |h| {
            confs = delta(h, "lqh: key confs", |h| {
                h.autocommit(ops).unwrap();
            });
        });
        (reqs, confs)
    };
    assert_eq!((reqs, confs), (1, 1), "64 operations on {PARTITIONS} partitions: one request, one answer");
    // Every row landed in its own partition and reads back.
    let reads: Vec<KeyOp> = (0..64).map(|i| KeyOp::read(t, vec![Value::Int(i)])).collect();
    let res = h.autocommit(reads).unwrap();
    for (i, r) in res.iter().enumerate() {
        assert_eq!(r, &OpResult::Ok(Some(vec![Value::Int(i as i64), Value::Int(i as i64 * 10)])));
    }
    assert_eq!(h.stats().rows, 64);
}

#[test]
fn mixed_success_and_failure_per_operation() {
    let (mut h, d) = setup();
    let t = d.id;
    h.autocommit((0..10).map(|i| ins(t, i, i)).collect()).unwrap();
    let batch = vec![
        upd(t, 1, 100),
        soft(upd(t, 50, 1)), // no such row
        soft(ins(t, 2, 1)),  // duplicate
        ins(t, 20, 200),     // new row
        soft(KeyOp::delete(t, vec![Value::Int(51)])),
        KeyOp::delete(t, vec![Value::Int(3)]),
        soft(KeyOp::read(t, vec![Value::Int(3)])), // deleted earlier in this batch
        KeyOp::read(t, vec![Value::Int(20)]),      // inserted earlier in this batch
        soft(upd(t, 4, 0)),
    ];
    let c = h.key(1, 1, ExecType::Commit, batch).unwrap();
    assert_eq!(c.outcome, TxnOutcome::Committed);
    let codes: Vec<Option<ErrorCode>> = c
        .results
        .iter()
        .map(|r| match r {
            OpResult::Ok(_) => None,
            OpResult::Err(e) => Some(e.code),
        })
        .collect();
    assert_eq!(
        codes,
        vec![
            None,
            Some(ErrorCode::NoSuchRow),
            Some(ErrorCode::DuplicateKey),
            None,
            Some(ErrorCode::NoSuchRow),
            None,
            Some(ErrorCode::NoSuchRow),
            None,
            None
        ]
    );
    assert_eq!(c.results[7], OpResult::Ok(Some(vec![Value::Int(20), Value::Int(200)])));
    assert_eq!(a_of(&mut h, t, 1), Some(Value::Int(100)));
    assert_eq!(a_of(&mut h, t, 2), Some(Value::Int(2)), "the failed insert changed nothing");
    assert_eq!(a_of(&mut h, t, 3), None);
    assert_eq!(a_of(&mut h, t, 4), Some(Value::Int(0)));
    assert_eq!(a_of(&mut h, t, 20), Some(Value::Int(200)));
    assert_eq!(a_of(&mut h, t, 50), None);
}

#[test]
fn error_mid_batch_leaves_nothing_applied() {
    let (mut h, d) = setup();
    let t = d.id;
    h.autocommit((0..20).map(|i| ins(t, i, i)).collect()).unwrap();
    // Writes on several partitions before and after a failing operation that
    // aborts the transaction.
    let mut batch: Vec<KeyOp> = (0..8).map(|i| upd(t, i, 1000 + i)).collect();
    batch.push(ins(t, 30, 30));
    batch.push(KeyOp::delete(t, vec![Value::Int(9)]));
    batch.push(ins(t, 5, 0)); // duplicate key: aborts
    batch.extend((10..16).map(|i| upd(t, i, 1000 + i)));
    let r = h.key(1, 1, ExecType::Commit, batch).unwrap_err();
    assert_eq!(r.error.code, ErrorCode::DuplicateKey);
    assert_eq!(r.op_index, Some(10));
    for i in 0..20 {
        assert_eq!(a_of(&mut h, t, i), Some(Value::Int(i)), "row {i} untouched");
    }
    assert_eq!(a_of(&mut h, t, 30), None);
    assert_eq!(h.stats().rows, 20);
    // Nothing stays locked or open: another transaction writes the same rows.
    h.autocommit((0..16).map(|i| upd(t, i, -i)).collect()).unwrap();
    assert_eq!(a_of(&mut h, t, 9), Some(Value::Int(-9)));
    let c = h.counters();
    assert_eq!(c["lqh: open transactions"], 0);
    assert_eq!(c["lqh: locked keys"], 0);
}

#[test]
fn a_lock_wait_splits_the_answer_but_keeps_the_order() {
    let (mut h, d) = setup();
    let t = d.id;
    h.autocommit((0..6).map(|i| ins(t, i, i)).collect()).unwrap();
    // Client 1 holds row 3.
    h.key(1, 1, ExecType::NoCommit, vec![upd(t, 3, 33)]).unwrap();
    // Client 2's batch runs up to row 3 and waits there.
    let confs = delta(&mut h, "lqh: key confs", |h| {
        let batch =
            vec![upd(t, 0, 10), upd(t, 1, 11), upd(t, 3, 13), KeyOp::read(t, vec![Value::Int(3)]), upd(t, 5, 15)];
        assert!(h.try_key(2, 1, ExecType::NoCommit, batch).is_none(), "waits for row 3");
    });
    assert_eq!(confs, 1, "the operations before the wait are answered at once");
    // Client 1 commits; client 2 resumes where it stopped.
    assert_eq!(h.key(1, 1, ExecType::Commit, vec![]).unwrap().outcome, TxnOutcome::Committed);
    let out = h.run();
    h.inbox.extend(out);
    let c = h.take_key_reply(2, 1).expect("answered after the grant").unwrap();
    assert_eq!(c.outcome, TxnOutcome::Open);
    assert_eq!(c.results.len(), 5);
    // The read saw client 2's own update of row 3, made after client 1's commit.
    assert_eq!(c.results[3], OpResult::Ok(Some(vec![Value::Int(3), Value::Int(13)])));
    assert_eq!(h.key(2, 1, ExecType::Commit, vec![]).unwrap().outcome, TxnOutcome::Committed);
    let got: Vec<Option<Value>> = (0..6).map(|i| a_of(&mut h, t, i)).collect();
    let want = [10, 11, 2, 13, 4, 15].map(|v| Some(Value::Int(v)));
    assert_eq!(got, want);
}
