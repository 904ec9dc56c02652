//! Key operations, batches, commit and rollback on one data node.

use norr_knobs::Knobs;
use norr_signals::ops::{KeyAccess, KeyOp, LockMode, OpResult};
use norr_signals::schema::{IndexKind, TableDef};
use norr_signals::value::{ColumnType, Decimal, Value};
use norr_signals::{ErrorClass, ErrorCode, ExecType, TxnOutcome};
use norr_txn::testkit::{index_def, table_def, Harness};

fn int() -> ColumnType {
    ColumnType::BigInt { unsigned: false }
}

fn setup() -> (Harness, TableDef) {
    let mut h = Harness::new(Knobs::default());
    let def = h
        .create_table(table_def(
            "t",
            4,
            &[("a", int()), ("s", ColumnType::Varchar { len: 20, collation: Default::default() })],
        ))
        .unwrap();
    (h, def)
}

fn ins(t: u32, id: i64, a: i64) -> KeyOp {
    KeyOp::insert(t, vec![Value::Int(id)], vec![(1, Value::Int(a))])
}

#[test]
fn insert_read_update_write_delete() {
    let (mut h, d) = setup();
    let t = d.id;
    h.autocommit(vec![ins(t, 1, 10), ins(t, 2, 20)]).unwrap();
    assert_eq!(h.get(t, vec![Value::Int(1)]), Some(vec![Value::Int(1), Value::Int(10), Value::Null]));
    h.autocommit(vec![KeyOp::update(t, vec![Value::Int(1)], vec![(2, Value::str("x"))])]).unwrap();
    assert_eq!(h.get(t, vec![Value::Int(1)]), Some(vec![Value::Int(1), Value::Int(10), Value::str("x")]));
    // Write = upsert: existing row keeps other columns, new row gets defaults.
    h.autocommit(vec![
        KeyOp::write(t, vec![Value::Int(1)], vec![(1, Value::Int(11))]),
        KeyOp::write(t, vec![Value::Int(3)], vec![(1, Value::Int(30))]),
    ])
    .unwrap();
    assert_eq!(h.get(t, vec![Value::Int(1)]), Some(vec![Value::Int(1), Value::Int(11), Value::str("x")]));
    assert_eq!(h.get(t, vec![Value::Int(3)]), Some(vec![Value::Int(3), Value::Int(30), Value::Null]));
    h.autocommit(vec![KeyOp::delete(t, vec![Value::Int(2)])]).unwrap();
    assert_eq!(h.get(t, vec![Value::Int(2)]), None);
    // Projection.
    let mut r = KeyOp::read(t, vec![Value::Int(3)]);
    r.projection = vec![1, 0];
    assert_eq!(h.autocommit(vec![r]).unwrap(), vec![OpResult::Ok(Some(vec![Value::Int(30), Value::Int(3)]))]);
    // Errors abort the transaction by default.
    let e = h.autocommit(vec![ins(t, 1, 0)]).unwrap_err();
    assert_eq!(e.code, ErrorCode::DuplicateKey);
    let e = h.autocommit(vec![KeyOp::update(t, vec![Value::Int(9)], vec![])]).unwrap_err();
    assert_eq!(e.code, ErrorCode::NoSuchRow);
    let e = h.autocommit(vec![KeyOp::delete(t, vec![Value::Int(9)])]).unwrap_err();
    assert_eq!(e.code, ErrorCode::NoSuchRow);
    let e = h.autocommit(vec![KeyOp::update(t, vec![Value::Int(1)], vec![(0, Value::Int(5))])]).unwrap_err();
    assert_eq!(e.code, ErrorCode::KeyUpdateNotAllowed);
    let e = h.autocommit(vec![KeyOp::read(999, vec![Value::Int(1)])]).unwrap_err();
    assert_eq!(e.code, ErrorCode::NoSuchTable);
    let mut bad = KeyOp::read(t, vec![Value::Int(1)]);
    bad.table_version = 77;
    assert_eq!(h.autocommit(vec![bad]).unwrap_err().code, ErrorCode::SchemaVersionMismatch);
    assert_eq!(h.autocommit(vec![KeyOp::read(t, vec![])]).unwrap_err().code, ErrorCode::MissingKeyColumn);
}

#[test]
fn same_row_twice_in_one_batch_applies_in_order() {
    let (mut h, d) = setup();
    let t = d.id;
    let mut read = KeyOp::read(t, vec![Value::Int(5)]);
    read.lock = LockMode::Exclusive;
    let c = h
        .key(
            1,
            7,
            ExecType::Commit,
            vec![
                ins(t, 5, 1),
                KeyOp::update(t, vec![Value::Int(5)], vec![(1, Value::Int(2))]),
                read,
                KeyOp::delete(t, vec![Value::Int(5)]),
                ins(t, 5, 3),
            ],
        )
        .unwrap();
    assert_eq!(c.outcome, TxnOutcome::Committed);
    assert_eq!(c.results[2], OpResult::Ok(Some(vec![Value::Int(5), Value::Int(2), Value::Null])));
    assert_eq!(h.get(t, vec![Value::Int(5)]), Some(vec![Value::Int(5), Value::Int(3), Value::Null]));
    // Insert of a key the transaction inserted itself: DuplicateKey.
    let e = h.autocommit(vec![ins(t, 6, 1), ins(t, 6, 1)]).unwrap_err();
    assert_eq!(e.code, ErrorCode::DuplicateKey);
    assert_eq!(h.get(t, vec![Value::Int(6)]), None, "aborted as a whole");
}

#[test]
fn many_ops_across_tables_and_partitions() {
    let (mut h, d) = setup();
    let d2 = h.create_table(table_def("u", 3, &[("v", int())])).unwrap();
    let mut ops = Vec::new();
    for i in 0..300 {
        ops.push(ins(d.id, i, i * 2));
        ops.push(KeyOp::insert(d2.id, vec![Value::Int(i)], vec![(1, Value::Int(-i))]));
    }
    let c = h.key(1, 1, ExecType::NoCommit, ops).unwrap();
    assert_eq!(c.outcome, TxnOutcome::Open);
    assert_eq!(c.results.len(), 600);
    let reads: Vec<KeyOp> = (0..300).map(|i| KeyOp::read(d2.id, vec![Value::Int(i)])).collect();
    let c = h.key(1, 1, ExecType::Commit, reads).unwrap();
    assert_eq!(c.outcome, TxnOutcome::Committed);
    for (i, r) in c.results.iter().enumerate() {
        assert_eq!(*r, OpResult::Ok(Some(vec![Value::Int(i as i64), Value::Int(-(i as i64))])));
    }
    let s = h.stats();
    assert_eq!(s.rows, 600);
    assert_eq!(s.open_transactions, 0);
}

#[test]
fn abort_on_error_false_keeps_the_transaction() {
    let (mut h, d) = setup();
    let t = d.id;
    h.autocommit(vec![ins(t, 1, 1)]).unwrap();
    let mut dup = ins(t, 1, 9);
    dup.abort_on_error = false;
    let mut miss = KeyOp::read(t, vec![Value::Int(42)]);
    miss.abort_on_error = false;
    let c = h.key(1, 3, ExecType::Commit, vec![dup, ins(t, 2, 2), miss]).unwrap();
    assert_eq!(c.outcome, TxnOutcome::Committed);
    assert!(matches!(&c.results[0], OpResult::Err(e) if e.code == ErrorCode::DuplicateKey));
    assert_eq!(c.results[1], OpResult::Ok(None));
    assert!(matches!(&c.results[2], OpResult::Err(e) if e.code == ErrorCode::NoSuchRow));
    assert_eq!(h.get(t, vec![Value::Int(1)]).unwrap()[1], Value::Int(1));
    assert_eq!(h.get(t, vec![Value::Int(2)]).unwrap()[1], Value::Int(2));
}

#[test]
fn rollback_undoes_everything_and_commit_makes_visible() {
    let (mut h, d) = setup();
    let t = d.id;
    h.autocommit(vec![ins(t, 1, 1), ins(t, 2, 2)]).unwrap();
    let c = h
        .key(
            1,
            9,
            ExecType::NoCommit,
            vec![
                ins(t, 3, 3),
                KeyOp::delete(t, vec![Value::Int(1)]),
                KeyOp::update(t, vec![Value::Int(2)], vec![(1, Value::Int(22))]),
            ],
        )
        .unwrap();
    assert_eq!(c.outcome, TxnOutcome::Open);
    // Not visible to others before commit (committed read, no blocking).
    assert_eq!(h.get(t, vec![Value::Int(3)]), None);
    assert_eq!(h.get(t, vec![Value::Int(1)]).unwrap()[1], Value::Int(1));
    assert_eq!(h.get(t, vec![Value::Int(2)]).unwrap()[1], Value::Int(2));
    // The transaction itself sees its own changes.
    let c = h.key(1, 9, ExecType::NoCommit, vec![KeyOp::read(t, vec![Value::Int(2)])]).unwrap();
    assert_eq!(c.results[0], OpResult::Ok(Some(vec![Value::Int(2), Value::Int(22), Value::Null])));
    let c = h.key(1, 9, ExecType::Rollback, vec![]).unwrap();
    assert_eq!(c.outcome, TxnOutcome::RolledBack);
    assert_eq!(h.get(t, vec![Value::Int(3)]), None);
    assert_eq!(h.get(t, vec![Value::Int(1)]).unwrap()[1], Value::Int(1));
    // Locks were released: a writer goes through at once.
    h.autocommit(vec![KeyOp::update(t, vec![Value::Int(1)], vec![(1, Value::Int(100))])]).unwrap();
    // Same again with commit.
    h.key(1, 9, ExecType::NoCommit, vec![ins(t, 3, 3), KeyOp::delete(t, vec![Value::Int(1)])]).unwrap();
    let c = h.key(1, 9, ExecType::Commit, vec![]).unwrap();
    assert_eq!(c.outcome, TxnOutcome::Committed);
    assert_eq!(h.get(t, vec![Value::Int(3)]).unwrap()[1], Value::Int(3));
    assert_eq!(h.get(t, vec![Value::Int(1)]), None);
    // Rollback / empty commit of an unknown handle are answered.
    assert_eq!(h.key(1, 12345, ExecType::Rollback, vec![]).unwrap().outcome, TxnOutcome::RolledBack);
    assert_eq!(h.key(1, 12346, ExecType::Commit, vec![]).unwrap().outcome, TxnOutcome::Committed);
}

#[test]
fn increments_and_overflow() {
    let mut h = Harness::new(Knobs::default());
    let d = h
        .create_table(table_def(
            "n",
            2,
            &[
                ("i", ColumnType::TinyInt { unsigned: false }),
                ("u", ColumnType::Int { unsigned: true }),
                ("f", ColumnType::Double),
                ("m", ColumnType::Decimal { precision: 5, scale: 2 }),
                ("z", int()),
            ],
        ))
        .unwrap();
    let t = d.id;
    h.autocommit(vec![KeyOp::insert(
        t,
        vec![Value::Int(1)],
        vec![
            (1, Value::Int(100)),
            (2, Value::UInt(5)),
            (3, Value::Double(1.5)),
            (4, Value::Decimal(Decimal { mantissa: 150, scale: 2 })),
        ],
    )])
    .unwrap();
    let mut up = KeyOp::update(t, vec![Value::Int(1)], vec![]);
    up.increments = vec![
        (1, Value::Int(27)),
        (2, Value::Int(-5)),
        (3, Value::Double(1.0)),
        (4, Value::Decimal(Decimal { mantissa: 25, scale: 1 })),
        (5, Value::Int(1)),
    ];
    h.autocommit(vec![up]).unwrap();
    assert_eq!(
        h.get(t, vec![Value::Int(1)]).unwrap(),
        vec![
            Value::Int(1),
            Value::Int(127),
            Value::UInt(0),
            Value::Double(2.5),
            Value::Decimal(Decimal { mantissa: 400, scale: 2 }),
            Value::Null
        ]
    );
    let mut over = KeyOp::update(t, vec![Value::Int(1)], vec![]);
    over.increments = vec![(1, Value::Int(1))];
    assert_eq!(h.autocommit(vec![over]).unwrap_err().code, ErrorCode::ValueOutOfRange);
    let mut under = KeyOp::update(t, vec![Value::Int(1)], vec![]);
    under.increments = vec![(2, Value::Int(-1))];
    assert_eq!(h.autocommit(vec![under]).unwrap_err().code, ErrorCode::ValueOutOfRange);
    // Write on an existing row applies increments too.
    let mut w = KeyOp::write(t, vec![Value::Int(1)], vec![]);
    w.increments = vec![(1, Value::Int(-27))];
    h.autocommit(vec![w]).unwrap();
    assert_eq!(h.get(t, vec![Value::Int(1)]).unwrap()[1], Value::Int(100));
}

#[test]
fn unique_index_read_and_conflicts() {
    let mut h = Harness::new(Knobs::default());
    let mut def =
        table_def("u", 4, &[("email", ColumnType::Varchar { len: 40, collation: Default::default() }), ("n", int())]);
    def.indexes.push(index_def("by_email", &[1], true, IndexKind::UniqueHash));
    let d = h.create_table(def).unwrap();
    let (t, ix) = (d.id, d.indexes[0].id);
    let row = |id: i64, e: &str| KeyOp::insert(t, vec![Value::Int(id)], vec![(1, Value::str(e)), (2, Value::Int(id))]);
    h.autocommit(vec![row(1, "a@x"), row(2, "b@x")]).unwrap();
    // Read through the unique index (case-insensitive collation).
    let ur =
        |v: &str| KeyOp { key: KeyAccess::Unique { index: ix, values: vec![Value::str(v)] }, ..KeyOp::read(t, vec![]) };
    let r = h.autocommit(vec![ur("B@X")]).unwrap();
    assert_eq!(r[0], OpResult::Ok(Some(vec![Value::Int(2), Value::str("b@x"), Value::Int(2)])));
    assert_eq!(h.autocommit(vec![ur("zz")]).unwrap_err().code, ErrorCode::NoSuchRow);
    // Duplicate against committed data.
    assert_eq!(h.autocommit(vec![row(3, "a@x")]).unwrap_err().code, ErrorCode::DuplicateUniqueKey);
    // Duplicate inside one transaction.
    assert_eq!(h.autocommit(vec![row(3, "c@x"), row(4, "c@x")]).unwrap_err().code, ErrorCode::DuplicateUniqueKey);
    // Moving a value: delete the holder then insert it elsewhere in one txn.
    h.autocommit(vec![KeyOp::delete(t, vec![Value::Int(1)]), row(5, "a@x")]).unwrap();
    assert_eq!(
        h.autocommit(vec![ur("a@x")]).unwrap()[0],
        OpResult::Ok(Some(vec![Value::Int(5), Value::str("a@x"), Value::Int(5)]))
    );
    // Update and delete through the unique index.
    let mut uu = KeyOp::update(t, vec![], vec![(2, Value::Int(55))]);
    uu.key = KeyAccess::Unique { index: ix, values: vec![Value::str("a@x")] };
    h.autocommit(vec![uu]).unwrap();
    assert_eq!(h.get(t, vec![Value::Int(5)]).unwrap()[2], Value::Int(55));
    let mut ud = KeyOp::delete(t, vec![]);
    ud.key = KeyAccess::Unique { index: ix, values: vec![Value::str("b@x")] };
    h.autocommit(vec![ud]).unwrap();
    assert_eq!(h.get(t, vec![Value::Int(2)]), None);
    // Two uncommitted inserts of the same unique value serialize: the second
    // waits, then fails once the first commits.
    h.key(1, 1, ExecType::NoCommit, vec![row(10, "q@x")]).unwrap();
    assert!(h.try_key(2, 1, ExecType::NoCommit, vec![row(11, "q@x")]).is_none(), "second writer waits");
    h.key(1, 1, ExecType::Commit, vec![]).unwrap();
    let r = h.take_key_reply(2, 1).expect("waiter answered after commit").unwrap_err();
    assert_eq!(r.error.code, ErrorCode::DuplicateUniqueKey);
    // ... and succeeds if the first rolls back.
    h.key(1, 2, ExecType::NoCommit, vec![row(20, "r@x")]).unwrap();
    assert!(h.try_key(2, 2, ExecType::NoCommit, vec![row(21, "r@x")]).is_none());
    h.key(1, 2, ExecType::Rollback, vec![]).unwrap();
    assert_eq!(h.take_key_reply(2, 2).unwrap().unwrap().outcome, TxnOutcome::Open);
    h.key(2, 2, ExecType::Commit, vec![]).unwrap();
    assert_eq!(h.get(t, vec![Value::Int(21)]).unwrap()[1], Value::str("r@x"));
    // Insert through a unique index is refused.
    let mut bad = row(30, "s@x");
    bad.key = KeyAccess::Unique { index: ix, values: vec![Value::str("s@x")] };
    assert_eq!(h.autocommit(vec![bad]).unwrap_err().code, ErrorCode::MalformedSignal);
}

#[test]
fn limits_on_transactions_and_operations() {
    let knobs = Knobs { max_transactions: 2, max_ops_per_txn: 3, ..Knobs::default() };
    let mut h = Harness::new(knobs);
    let d = h.create_table(table_def("t", 2, &[("a", int())])).unwrap();
    let t = d.id;
    h.key(1, 1, ExecType::NoCommit, vec![ins(t, 1, 1)]).unwrap();
    h.key(1, 2, ExecType::NoCommit, vec![ins(t, 2, 1)]).unwrap();
    let e = h.key(1, 3, ExecType::NoCommit, vec![ins(t, 3, 1)]).unwrap_err();
    assert_eq!(e.error.code, ErrorCode::TooManyTransactions);
    assert_eq!(e.error.code.class(), ErrorClass::Temporary);
    let e = h.key(1, 1, ExecType::NoCommit, vec![ins(t, 4, 1), ins(t, 5, 1), ins(t, 6, 1)]).unwrap_err();
    assert_eq!(e.error.code, ErrorCode::TooManyOperations);
    // txn 1 is gone (aborted), so a new one fits.
    h.key(1, 3, ExecType::Commit, vec![ins(t, 3, 1)]).unwrap();
    assert_eq!(h.get(t, vec![Value::Int(1)]), None);
    h.key(1, 2, ExecType::Commit, vec![]).unwrap();
    assert!(h.get(t, vec![Value::Int(2)]).is_some());
}

#[test]
fn table_full_then_node_keeps_working() {
    let knobs = Knobs { data_memory_bytes: 1 << 20, ..Knobs::default() };
    let mut h = Harness::new(knobs);
    let d = h.create_table(table_def("big", 2, &[("b", ColumnType::Blob)])).unwrap();
    let t = d.id;
    let blob = Value::Bytes(vec![7u8; 20_000]);
    let mut full = None;
    for i in 0..200 {
        match h.autocommit(vec![KeyOp::insert(t, vec![Value::Int(i)], vec![(1, blob.clone())])]) {
            Ok(_) => {}
            Err(e) => {
                full = Some((i, e));
                break;
            }
        }
    }
    let (n, e) = full.expect("memory runs out");
    assert_eq!(e.code, ErrorCode::TableFull);
    assert!(n > 5, "only {n} rows fit");
    // Deleting makes room again; reads keep working.
    assert!(h.get(t, vec![Value::Int(0)]).is_some());
    let dels: Vec<KeyOp> = (0..n / 2).map(|i| KeyOp::delete(t, vec![Value::Int(i)])).collect();
    h.autocommit(dels).unwrap();
    h.autocommit(vec![KeyOp::insert(t, vec![Value::Int(1000)], vec![(1, blob)])]).unwrap();
    // A big uncommitted transaction is also bounded (reservations).
    let mut ops = Vec::new();
    for i in 2000..2200 {
        ops.push(KeyOp::insert(t, vec![Value::Int(i)], vec![(1, Value::Bytes(vec![1u8; 20_000]))]));
    }
    assert_eq!(h.autocommit(ops).unwrap_err().code, ErrorCode::TableFull);
    assert_eq!(h.stats().open_transactions, 0);
}

#[test]
fn unique_values_inside_one_transaction() {
    let mut h = Harness::new(Knobs::default());
    let mut def = table_def("u", 3, &[("email", ColumnType::Varchar { len: 40, collation: Default::default() })]);
    def.indexes.push(index_def("by_email", &[1], true, IndexKind::UniqueHash));
    let d = h.create_table(def).unwrap();
    let (t, ix) = (d.id, d.indexes[0].id);
    let row = |id: i64, e: &str| KeyOp::insert(t, vec![Value::Int(id)], vec![(1, Value::str(e))]);
    let ur = |v: &str| {
        let mut op =
            KeyOp { key: KeyAccess::Unique { index: ix, values: vec![Value::str(v)] }, ..KeyOp::read(t, vec![]) };
        op.abort_on_error = false;
        op.lock = LockMode::Shared;
        op
    };
    h.autocommit(vec![row(1, "a")]).unwrap();
    // Own uncommitted insert is found through the index; a moved value is not.
    let c = h
        .key(
            1,
            1,
            ExecType::NoCommit,
            vec![
                row(2, "b"),
                ur("b"),
                KeyOp::update(t, vec![Value::Int(1)], vec![(1, Value::str("z"))]),
                ur("a"),
                ur("z"),
                row(3, "a"),
                ur("a"),
            ],
        )
        .unwrap();
    assert_eq!(c.results[1], OpResult::Ok(Some(vec![Value::Int(2), Value::str("b")])));
    assert!(matches!(&c.results[3], OpResult::Err(e) if e.code == ErrorCode::NoSuchRow));
    assert_eq!(c.results[4], OpResult::Ok(Some(vec![Value::Int(1), Value::str("z")])));
    assert_eq!(c.results[5], OpResult::Ok(None), "value freed by the update earlier in the txn");
    assert_eq!(c.results[6], OpResult::Ok(Some(vec![Value::Int(3), Value::str("a")])));
    // Others do not see it yet: a committed read through the index finds row 1.
    let mut cr = ur("a");
    cr.lock = LockMode::CommittedRead;
    assert_eq!(h.autocommit(vec![cr.clone()]).unwrap()[0], OpResult::Ok(Some(vec![Value::Int(1), Value::str("a")])));
    h.key(1, 1, ExecType::Commit, vec![]).unwrap();
    assert_eq!(h.autocommit(vec![cr]).unwrap()[0], OpResult::Ok(Some(vec![Value::Int(3), Value::str("a")])));
    // Deleting an own insert frees its value inside the transaction.
    h.key(1, 2, ExecType::NoCommit, vec![row(4, "q"), KeyOp::delete(t, vec![Value::Int(4)]), row(5, "q")]).unwrap();
    h.key(1, 2, ExecType::Commit, vec![]).unwrap();
    assert_eq!(h.get(t, vec![Value::Int(5)]).unwrap()[1], Value::str("q"));
    assert_eq!(h.get(t, vec![Value::Int(4)]), None);
}

#[test]
fn swapping_unique_values_in_one_transaction_commits() {
    let mut h = Harness::new(Knobs::default());
    let mut def = table_def("sw", 2, &[("u", int())]);
    def.indexes.push(index_def("by_u", &[1], true, IndexKind::UniqueHash));
    let d = h.create_table(def).unwrap();
    let t = d.id;
    let set = |id: i64, u: i64| KeyOp::update(t, vec![Value::Int(id)], vec![(1, Value::Int(u))]);
    h.autocommit((0..6).map(|i| KeyOp::insert(t, vec![Value::Int(i)], vec![(1, Value::Int(i))])).collect()).unwrap();
    // Rotate values 0 -> 1 -> 2 -> 0 through a temporary value.
    h.autocommit(vec![set(0, 100), set(2, 0), set(1, 2), set(0, 1)]).unwrap();
    let u = |h: &mut Harness, id: i64| h.get(t, vec![Value::Int(id)]).unwrap()[1].clone();
    assert_eq!((u(&mut h, 0), u(&mut h, 1), u(&mut h, 2)), (Value::Int(1), Value::Int(2), Value::Int(0)));
    // Lookups through the index agree after the swap.
    let ur = |v: i64| KeyOp {
        key: KeyAccess::Unique { index: d.indexes[0].id, values: vec![Value::Int(v)] },
        ..KeyOp::read(t, vec![])
    };
    assert_eq!(h.autocommit(vec![ur(2)]).unwrap()[0], OpResult::Ok(Some(vec![Value::Int(1), Value::Int(2)])));
    assert_eq!(h.stats().rows, 6);
    assert!(h.counters()["lqh: unique swap applied as delete+insert"] > 0);
}
