//! DICT: create/drop/truncate tables, indexes, validation errors,
//! auto-increment, node stats, DDL under running transactions.

use norr_knobs::Knobs;
use norr_signals::ops::{Bound, KeyOp, ScanRange, ScanSpec};
use norr_signals::schema::{ColumnDef, IndexKind, PartitionScheme, TableDef};
use norr_signals::value::{ColumnType, Value};
use norr_signals::{DictOp, DictResult, ErrorCode, ExecType, TxnOutcome};
use norr_txn::testkit::{index_def, table_def, Harness};

fn int() -> ColumnType {
    ColumnType::BigInt { unsigned: false }
}

#[test]
fn create_get_list_drop() {
    let mut h = Harness::new(Knobs { default_partitions: 3, ..Knobs::default() });
    let d = h.create_table(table_def("a", 0, &[("v", int())])).unwrap();
    assert_eq!((d.version, d.partitions), (1, 3));
    let d2 = h.create_table(table_def("b", 2, &[])).unwrap();
    assert_ne!(d.id, d2.id);
    assert_eq!(h.create_table(table_def("a", 1, &[])).unwrap_err().code, ErrorCode::TableExists);
    assert_eq!(h.dict(1, DictOp::GetTable { name: "a".into() }).unwrap(), DictResult::Table(d.clone()));
    let DictResult::Tables(ts) = h.dict(1, DictOp::ListTables).unwrap() else { panic!() };
    assert_eq!(ts.len(), 2);
    h.autocommit(vec![KeyOp::insert(d.id, vec![Value::Int(1)], vec![])]).unwrap();
    assert_eq!(h.dict(1, DictOp::DropTable { name: "a".into() }).unwrap(), DictResult::Done);
    assert_eq!(h.dict(1, DictOp::GetTable { name: "a".into() }).unwrap_err().code, ErrorCode::NoSuchTable);
    assert_eq!(h.dict(1, DictOp::DropTable { name: "a".into() }).unwrap_err().code, ErrorCode::NoSuchTable);
    // Operations on the dropped table.
    assert_eq!(h.autocommit(vec![KeyOp::read(d.id, vec![Value::Int(1)])]).unwrap_err().code, ErrorCode::NoSuchTable);
    assert_eq!(h.scan_all(1, 1, true, ScanSpec::full(d.id)).unwrap_err().code, ErrorCode::NoSuchTable);
    // Re-created under a new id.
    let d3 = h.create_table(table_def("a", 1, &[])).unwrap();
    assert!(d3.id > d2.id);
    assert_eq!(h.get(d3.id, vec![Value::Int(1)]), None);
}

#[test]
fn bad_schemas_are_rejected_with_a_message() {
    let mut h = Harness::new(Knobs::default());
    let mut bad = Vec::new();
    let mut d = table_def("x", 1, &[]);
    d.primary_key.clear();
    bad.push(d);
    let mut d = table_def("x", 1, &[]);
    d.columns[0].nullable = true;
    bad.push(d);
    bad.push(table_def("x", 5000, &[]));
    bad.push(table_def("x", 1, &[("d", ColumnType::Decimal { precision: 50, scale: 2 })]));
    bad.push(table_def("x", 1, &[("d", ColumnType::Decimal { precision: 5, scale: 6 })]));
    bad.push(table_def("x", 1, &[("c", ColumnType::Char { len: 300, collation: Default::default() })]));
    bad.push(table_def("x", 1, &[("id", int())]));
    let mut d = table_def("x", 1, &[("a", int()), ("b", int())]);
    d.columns[1].auto_increment = true;
    d.columns[2].auto_increment = true;
    bad.push(d);
    let mut d = table_def("x", 1, &[("a", int())]);
    d.columns.push(ColumnDef::new("nn", int()).not_null().default_value(Value::str("zz")));
    bad.push(d);
    let mut d = table_def("x", 1, &[("a", int())]);
    d.partitioning = PartitionScheme::Key { columns: vec![1] };
    bad.push(d);
    let mut d = table_def("x", 1, &[("a", int())]);
    d.indexes.push(index_def("i", &[7], false, IndexKind::Ordered));
    bad.push(d);
    let mut d = table_def("x", 1, &[]);
    d.columns = (0..600).map(|i| ColumnDef::new(&format!("c{i}"), int()).not_null()).collect();
    bad.push(d);
    bad.push(table_def("", 1, &[]));
    for d in bad {
        let e = h.create_table(d.clone()).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadSchema, "{d:?}");
        assert!(!e.message.is_empty());
    }
    // The node still works.
    h.create_table(table_def("x", 1, &[])).unwrap();
}

#[test]
fn indexes_create_and_drop() {
    let mut h = Harness::new(Knobs::default());
    let d = h.create_table(table_def("t", 2, &[("v", int())])).unwrap();
    let t = d.id;
    h.autocommit((0..10).map(|i| KeyOp::insert(t, vec![Value::Int(i)], vec![(1, Value::Int(i % 3))])).collect())
        .unwrap();
    // Unique index over duplicate values cannot be built.
    let op = DictOp::CreateIndex { table: "t".into(), index: index_def("u", &[1], true, IndexKind::UniqueHash) };
    assert_eq!(h.dict(1, op).unwrap_err().code, ErrorCode::DuplicateUniqueKey);
    let op = DictOp::CreateIndex { table: "t".into(), index: index_def("o", &[1], false, IndexKind::Ordered) };
    let DictResult::Table(d2) = h.dict(1, op.clone()).unwrap() else { panic!() };
    assert_eq!(d2.version, 2);
    assert_eq!(h.dict(1, op).unwrap_err().code, ErrorCode::IndexExists);
    let ix = d2.index_by_name("o").unwrap().id;
    let spec = ScanSpec { index: Some(ix), ..ScanSpec::full(t) };
    let (rows, _) = h.scan_all(1, 1, true, spec).unwrap();
    assert_eq!(rows.len(), 10);
    // Old version is refused, 0 and the new one accepted.
    let mut r = KeyOp::read(t, vec![Value::Int(1)]);
    r.table_version = 1;
    assert_eq!(h.autocommit(vec![r.clone()]).unwrap_err().code, ErrorCode::SchemaVersionMismatch);
    r.table_version = 2;
    h.autocommit(vec![r]).unwrap();
    let DictResult::Table(d3) = h.dict(1, DictOp::DropIndex { table: "t".into(), index: "O".into() }).unwrap() else {
        panic!()
    };
    let names: Vec<&str> = d3.indexes.iter().map(|i| i.name.as_str()).collect();
    assert!(names == ["PRIMARY"] && d3.version == 3);
    let e = h.dict(1, DictOp::DropIndex { table: "t".into(), index: "o".into() }).unwrap_err();
    assert_eq!(e.code, ErrorCode::NoSuchIndex);
    let spec = ScanSpec { index: Some(ix), ..ScanSpec::full(t) };
    assert_eq!(h.scan_all(1, 1, true, spec).unwrap_err().code, ErrorCode::NoSuchIndex);
}

#[test]
fn truncate_auto_increment_and_stats() {
    let mut h = Harness::new(Knobs::default());
    let mut def = table_def("t", 2, &[("v", int())]);
    def.columns[0].auto_increment = true;
    let d = h.create_table(def).unwrap();
    let t = d.id;
    assert_eq!(h.dict(1, DictOp::NextAutoInc { table: t, count: 10 }).unwrap(), DictResult::AutoInc { first: 1 });
    assert_eq!(h.dict(1, DictOp::NextAutoInc { table: t, count: 1 }).unwrap(), DictResult::AutoInc { first: 11 });
    // count 0 looks without reserving.
    assert_eq!(h.dict(1, DictOp::NextAutoInc { table: t, count: 0 }).unwrap(), DictResult::AutoInc { first: 12 });
    assert_eq!(h.dict(1, DictOp::NextAutoInc { table: t, count: 0 }).unwrap(), DictResult::AutoInc { first: 12 });
    h.dict(1, DictOp::BumpAutoInc { table: t, used: 100 }).unwrap();
    h.dict(1, DictOp::BumpAutoInc { table: t, used: 50 }).unwrap();
    assert_eq!(h.dict(1, DictOp::NextAutoInc { table: t, count: 1 }).unwrap(), DictResult::AutoInc { first: 101 });
    assert_eq!(h.dict(1, DictOp::NextAutoInc { table: 999, count: 1 }).unwrap_err().code, ErrorCode::NoSuchTable);
    h.autocommit((0..20).map(|i| KeyOp::insert(t, vec![Value::Int(i)], vec![])).collect()).unwrap();
    let s = h.stats();
    assert_eq!((s.rows, s.tables), (20, 1));
    assert!(s.data_memory_used_bytes > 0 && s.committed_transactions >= 1);
    h.dict(1, DictOp::TruncateTable { name: "t".into() }).unwrap();
    assert_eq!(h.stats().rows, 0);
    assert_eq!(h.dict(1, DictOp::NextAutoInc { table: t, count: 1 }).unwrap(), DictResult::AutoInc { first: 1 });
    h.autocommit(vec![KeyOp::insert(t, vec![Value::Int(1)], vec![])]).unwrap();

    // A TRUNCATE is a version change: everything else of the definition
    // stays, and a write planned against the old version (say, with an
    // AUTO_INCREMENT value reserved before the counter went back to 1) is
    // refused by TC and LQH alike, reads and scans too.
    let DictResult::Table(after) = h.dict(1, DictOp::GetTable { name: "t".into() }).unwrap() else { panic!() };
    assert_eq!(after, TableDef { version: d.version + 1, ..d.clone() });
    let mut old = KeyOp::insert(t, vec![Value::Int(11)], vec![]);
    old.table_version = d.version;
    assert_eq!(h.autocommit(vec![old.clone()]).unwrap_err().code, ErrorCode::SchemaVersionMismatch);
    let mut read = KeyOp::read(t, vec![Value::Int(1)]);
    read.table_version = d.version;
    assert_eq!(h.autocommit(vec![read.clone()]).unwrap_err().code, ErrorCode::SchemaVersionMismatch);
    let spec = ScanSpec { table_version: d.version, ..ScanSpec::full(t) };
    assert_eq!(h.scan_all(1, 1, true, spec).unwrap_err().code, ErrorCode::SchemaVersionMismatch);
    old.table_version = after.version;
    h.autocommit(vec![old]).unwrap();
    read.table_version = after.version;
    assert_eq!(h.autocommit(vec![read]).unwrap().len(), 1);
    // Each TRUNCATE raises it again.
    h.dict(1, DictOp::TruncateTable { name: "t".into() }).unwrap();
    let DictResult::Table(again) = h.dict(1, DictOp::GetTable { name: "t".into() }).unwrap() else { panic!() };
    assert_eq!((again.version, h.stats().rows), (after.version + 1, 0));
}

#[test]
fn ddl_under_a_running_transaction_aborts_it_safely() {
    let mut h = Harness::new(Knobs::default());
    let d = h.create_table(table_def("t", 2, &[("v", int())])).unwrap();
    let t = d.id;
    h.autocommit(vec![KeyOp::insert(t, vec![Value::Int(1)], vec![])]).unwrap();
    h.key(1, 1, ExecType::NoCommit, vec![KeyOp::update(t, vec![Value::Int(1)], vec![(1, Value::Int(5))])]).unwrap();
    h.dict(2, DictOp::TruncateTable { name: "t".into() }).unwrap();
    let r = h.key(1, 1, ExecType::Commit, vec![]).unwrap_err();
    assert_eq!(r.error.code, ErrorCode::SchemaVersionMismatch);
    assert_eq!(h.stats().rows, 0);
    // Drop under an open transaction: its next operation fails.
    h.key(1, 2, ExecType::NoCommit, vec![KeyOp::insert(t, vec![Value::Int(2)], vec![])]).unwrap();
    h.dict(2, DictOp::DropTable { name: "t".into() }).unwrap();
    let r = h.key(1, 2, ExecType::NoCommit, vec![KeyOp::insert(t, vec![Value::Int(3)], vec![])]).unwrap_err();
    assert_eq!(r.error.code, ErrorCode::NoSuchTable);
    let c = h.key(1, 3, ExecType::Commit, vec![]).unwrap();
    assert_eq!(c.outcome, TxnOutcome::Committed);
    assert_eq!(h.stats().open_transactions, 0);
}

#[test]
fn user_partitioning_needs_the_partition() {
    let mut h = Harness::new(Knobs::default());
    let mut def = table_def("p", 4, &[("v", int())]);
    def.partitioning = PartitionScheme::User;
    let d = h.create_table(def).unwrap();
    let t = d.id;
    let op = KeyOp::insert(t, vec![Value::Int(1)], vec![]);
    assert_eq!(h.autocommit(vec![op.clone()]).unwrap_err().code, ErrorCode::MissingPartition);
    assert_eq!(
        h.autocommit(vec![KeyOp { partition: Some(9), ..op.clone() }]).unwrap_err().code,
        ErrorCode::BadPartition
    );
    h.autocommit(vec![KeyOp { partition: Some(2), ..op }]).unwrap();
    let spec = ScanSpec { partitions: Some(vec![2]), ..ScanSpec::full(t) };
    assert_eq!(h.scan_all(1, 1, true, spec).unwrap().0.len(), 1);
    let spec = ScanSpec { partitions: Some(vec![1]), ..ScanSpec::full(t) };
    assert_eq!(h.scan_all(1, 1, true, spec).unwrap().0.len(), 0);
}

/// Every table gets an ordered index named PRIMARY on its primary key: key
/// ranges scan it in key order; the name is reserved and the index stays.
#[test]
fn primary_key_ordered_index() {
    let mut h = Harness::new(Knobs::default());
    let d = h.create_table(table_def("t", 4, &[("v", int())])).unwrap();
    let pk_ix = d.index_by_name("PRIMARY").expect("PRIMARY ordered index");
    assert_eq!((pk_ix.kind, pk_ix.unique, pk_ix.columns.clone()), (IndexKind::Ordered, false, d.primary_key.clone()));
    let t = d.id;
    h.autocommit((0..100).map(|i| KeyOp::insert(t, vec![Value::Int(99 - i)], vec![(1, Value::Int(i))])).collect())
        .unwrap();
    let range = ScanRange { low: Bound::inclusive(vec![Value::Int(10)]), high: Bound::exclusive(vec![Value::Int(20)]) };
    for desc in [false, true] {
        let spec = ScanSpec {
            index: Some(pk_ix.id),
            range: Some(range.clone()),
            descending: desc,
            batch_rows: 3,
            ..ScanSpec::full(t)
        };
        let (rows, _) = h.scan_all(1, 1, true, spec).unwrap();
        let ids: Vec<i64> = rows.iter().map(|r| r[0].as_i64().unwrap()).collect();
        let mut want: Vec<i64> = (10..20).collect();
        if desc {
            want.reverse();
        }
        assert_eq!(ids, want);
    }
    let op = DictOp::CreateIndex { table: "t".into(), index: index_def("primary", &[1], false, IndexKind::Ordered) };
    assert!(h.dict(1, op).is_err());
    let e = h.dict(1, DictOp::DropIndex { table: "t".into(), index: "PRIMARY".into() }).unwrap_err();
    assert_eq!(e.code, ErrorCode::BadSchema);
    // A definition read back and created again keeps one PRIMARY index.
    let mut again = d.clone();
    again.name = "t2".into();
    let d2 = h.create_table(again).unwrap();
    assert_eq!(d2.indexes.iter().filter(|i| i.name == "PRIMARY").count(), 1);
}

#[test]
fn the_read_backup_knob_is_the_default_of_new_tables() {
    let mut h = Harness::new(Knobs::default());
    let plain = h.create_table(table_def("plain", 1, &[])).unwrap();
    assert!(!plain.options.read_backup);
    let mut def = table_def("rb", 1, &[]);
    def.options.read_backup = true;
    assert!(h.create_table(def).unwrap().options.read_backup, "a table's own option is kept");

    let mut h = Harness::new(Knobs { read_backup: true, ..Knobs::default() });
    let d = h.create_table(table_def("a", 1, &[])).unwrap();
    assert!(d.options.read_backup);
    assert_eq!(h.dict(1, DictOp::GetTable { name: "a".into() }).unwrap(), DictResult::Table(d));
}
