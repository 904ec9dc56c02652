//! DICT: ALTER TABLE (`DictOp::AlterTable`): rows rebuilt in the new layout,
//! all or nothing across LQH instances, writers of the table doomed, and
//! data memory for both copies.

use norr_knobs::Knobs;
use norr_signals::ops::{KeyOp, ScanSpec};
use norr_signals::schema::{ColumnDef, IndexKind, TableDef};
use norr_signals::value::{ColumnType, Value};
use norr_signals::{ColumnSource, DictOp, DictResult, ErrorCode, ExecType};
use norr_txn::route::lqh_instance;
use norr_txn::testkit::{index_def, table_def, Harness};

fn int() -> ColumnType {
    ColumnType::Int { unsigned: false }
}

fn varchar(len: u32) -> ColumnType {
    ColumnType::Varchar { len, collation: Default::default() }
}

/// ALTER made from the table's current version.
fn alter(h: &mut Harness, table: &str, def: TableDef, sources: Vec<ColumnSource>) -> Result<TableDef, ErrorCode> {
    let expect_version = get_table(h, table).version;
    match h.dict(1, DictOp::AlterTable { table: table.into(), def, sources, expect_version }) {
        Ok(DictResult::Table(d)) => Ok(d),
        Ok(other) => panic!("unexpected {other:?}"),
        Err(e) => Err(e.code),
    }
}

fn get_table(h: &mut Harness, name: &str) -> TableDef {
    match h.dict(1, DictOp::GetTable { name: name.into() }).unwrap() {
        DictResult::Table(d) => d,
        other => panic!("unexpected {other:?}"),
    }
}

/// Every row of the table, sorted.
fn rows(h: &mut Harness, table: u32) -> Vec<Vec<Value>> {
    let (mut rows, _) = h.scan_all(1, 1, true, ScanSpec::full(table)).unwrap();
    rows.sort_by_key(|r| format!("{r:?}"));
    rows
}

/// (id BIGINT pk, v INT, s VARCHAR(10)) with an index on v and rows
/// id = 0..n, v = id * 10, s = "s{id}".
fn setup(h: &mut Harness, partitions: u32, n: i64) -> TableDef {
    let mut def = table_def("t", partitions, &[("v", int()), ("s", varchar(10))]);
    def.indexes.push(index_def("by_v", &[1], false, IndexKind::Ordered));
    let d = h.create_table(def).unwrap();
    let ops = (0..n)
        .map(|i| {
            KeyOp::insert(d.id, vec![Value::Int(i)], vec![(1, Value::Int(i * 10)), (2, Value::str(&format!("s{i}")))])
        })
        .collect();
    h.autocommit(ops).unwrap();
    d
}

/// The new layout: (w INT NOT NULL DEFAULT 7, id, v BIGINT, s VARCHAR(len)),
/// the index kept.
fn widened(old: &TableDef, s_len: u32) -> (TableDef, Vec<ColumnSource>) {
    let mut def = old.clone();
    def.columns = vec![
        ColumnDef::new("w", int()).not_null().default_value(Value::Int(7)),
        old.columns[0].clone(),
        ColumnDef::new("v", ColumnType::BigInt { unsigned: false }),
        ColumnDef::new("s", varchar(s_len)),
    ];
    def.primary_key = vec![1];
    for ix in &mut def.indexes {
        ix.columns = ix.columns.iter().map(|c| c + 1).collect();
    }
    let sources =
        vec![ColumnSource::Value(Value::Int(7)), ColumnSource::Old(0), ColumnSource::Old(1), ColumnSource::Old(2)];
    (def, sources)
}

#[test]
fn rows_are_rebuilt_in_the_new_layout() {
    let mut h = Harness::new(Knobs::default());
    let d = setup(&mut h, 3, 20);
    let (def, sources) = widened(&d, 10);
    let new = alter(&mut h, "t", def, sources).unwrap();
    assert_eq!((new.id, new.version), (d.id, d.version + 1));
    // The unchanged index keeps its id (matched by name and columns).
    assert_eq!(new.index_by_name("by_v").unwrap().id, d.index_by_name("by_v").unwrap().id);
    assert_eq!(
        h.get(d.id, vec![Value::Int(3)]),
        Some(vec![Value::Int(7), Value::Int(3), Value::Int(30), Value::str("s3")])
    );
    assert_eq!(rows(&mut h, d.id).len(), 20);
    // The index serves the new layout.
    let ix = new.index_by_name("by_v").unwrap().id;
    let (by_v, _) = h.scan_all(1, 1, true, ScanSpec { index: Some(ix), ..ScanSpec::full(d.id) }).unwrap();
    let vs: Vec<&Value> = by_v.iter().map(|r| &r[2]).collect();
    assert_eq!(vs, (0..20).map(|i| Value::Int(i * 10)).collect::<Vec<_>>().iter().collect::<Vec<_>>());
    // Operations planned for the old version are refused; new ones work.
    let mut op = KeyOp::insert(d.id, vec![Value::Int(100)], vec![(2, Value::Int(1))]);
    op.table_version = d.version;
    assert_eq!(h.autocommit(vec![op.clone()]).unwrap_err().code, ErrorCode::SchemaVersionMismatch);
    op.table_version = new.version;
    op.key = norr_signals::ops::KeyAccess::Primary(vec![Value::Int(100)]);
    h.autocommit(vec![op]).unwrap();
    assert_eq!(h.get(d.id, vec![Value::Int(100)]).unwrap()[0], Value::Int(7));
}

#[test]
fn a_value_that_does_not_convert_leaves_the_table_as_it_was() {
    let mut h = Harness::new(Knobs::default());
    let d = setup(&mut h, 3, 20);
    let before = rows(&mut h, d.id);
    let used = h.stats().data_memory_used_bytes;
    // "s10".."s19" do not fit VARCHAR(2).
    let (def, sources) = widened(&d, 2);
    assert_eq!(alter(&mut h, "t", def, sources), Err(ErrorCode::ValueTooLarge));
    assert_eq!(get_table(&mut h, "t"), d);
    assert_eq!(rows(&mut h, d.id), before);
    assert_eq!(h.stats().data_memory_used_bytes, used, "the copy was freed");
    // NULL into NOT NULL, and an out-of-range value, the same.
    h.autocommit(vec![KeyOp::update(d.id, vec![Value::Int(1)], vec![(1, Value::Null)])]).unwrap();
    let (mut def, sources) = widened(&d, 10);
    def.columns[2].nullable = false;
    assert_eq!(alter(&mut h, "t", def, sources), Err(ErrorCode::NullInNotNullColumn));
    let (mut def, sources) = widened(&d, 10);
    def.columns[2].ty = ColumnType::TinyInt { unsigned: false };
    assert_eq!(alter(&mut h, "t", def, sources), Err(ErrorCode::ValueOutOfRange));
    // A new unique index over duplicate values.
    let (mut def, sources) = widened(&d, 10);
    def.indexes.push(index_def("u", &[0], true, IndexKind::Ordered));
    assert_eq!(alter(&mut h, "t", def, sources), Err(ErrorCode::DuplicateUniqueKey));
    assert_eq!(get_table(&mut h, "t").version, d.version);
    // Then a good change goes through.
    let (def, sources) = widened(&d, 10);
    alter(&mut h, "t", def, sources).unwrap();
}

#[test]
fn key_changes_are_refused() {
    let mut h = Harness::new(Knobs::default());
    let d = setup(&mut h, 2, 3);
    let (mut def, sources) = widened(&d, 10);
    def.columns[1].ty = int();
    assert_eq!(alter(&mut h, "t", def, sources), Err(ErrorCode::BadSchema));
    let (mut def, mut sources) = widened(&d, 10);
    sources[1] = ColumnSource::Old(1);
    sources[2] = ColumnSource::Old(0);
    def.columns[2] = d.columns[0].clone();
    assert_eq!(alter(&mut h, "t", def, sources), Err(ErrorCode::BadSchema));
    let (mut def, sources) = widened(&d, 10);
    def.partitions = 5;
    assert_eq!(alter(&mut h, "t", def, sources), Err(ErrorCode::BadSchema));
    let (mut def, mut sources) = widened(&d, 10);
    def.columns[0].auto_increment = true;
    sources[0] = ColumnSource::Value(Value::Int(0));
    assert_eq!(alter(&mut h, "t", def, sources), Err(ErrorCode::BadSchema));
    assert_eq!(get_table(&mut h, "t"), d);
}

#[test]
fn rename_keeps_the_rows_without_a_copy() {
    let mut h = Harness::new(Knobs::default());
    let d = setup(&mut h, 2, 10);
    h.create_table(table_def("other", 1, &[])).unwrap();
    let used = h.stats().data_memory_used_bytes;
    let sources: Vec<_> = (0..3).map(ColumnSource::Old).collect();
    let mut def = d.clone();
    def.name = "other".into();
    assert_eq!(alter(&mut h, "t", def.clone(), sources.clone()), Err(ErrorCode::TableExists));
    def.name = "renamed".into();
    def.columns[1].default = Some(Value::Int(5));
    let new = alter(&mut h, "t", def, sources).unwrap();
    assert_eq!(h.stats().data_memory_used_bytes, used);
    assert_eq!(h.dict(1, DictOp::GetTable { name: "t".into() }).unwrap_err().code, ErrorCode::NoSuchTable);
    assert_eq!(get_table(&mut h, "renamed"), new);
    assert_eq!(rows(&mut h, d.id).len(), 10);
    // The new default is the node's: an insert without v gets it.
    let mut op = KeyOp::insert(d.id, vec![Value::Int(50)], vec![]);
    op.table_version = new.version;
    h.autocommit(vec![op]).unwrap();
    assert_eq!(h.get(d.id, vec![Value::Int(50)]).unwrap()[1], Value::Int(5));
}

/// Transactions with uncommitted writes on the table are doomed: their
/// images (old layout) are dropped, commit is refused, and an abort writes
/// nothing into the new table.
#[test]
fn writers_are_doomed_and_leave_nothing_behind() {
    let mut h = Harness::new(Knobs::default());
    let d = setup(&mut h, 2, 4);
    // txn 1 inserts, txn 2 updates, neither commits yet.
    h.key(100, 1, ExecType::NoCommit, vec![KeyOp::insert(d.id, vec![Value::Int(10)], vec![(1, Value::Int(1))])])
        .unwrap();
    h.key(101, 2, ExecType::NoCommit, vec![KeyOp::update(d.id, vec![Value::Int(2)], vec![(2, Value::str("new"))])])
        .unwrap();
    let (def, sources) = widened(&d, 10);
    alter(&mut h, "t", def, sources).unwrap();
    let e = h.key(100, 1, ExecType::Commit, vec![]).unwrap_err();
    assert_eq!(e.error.code, ErrorCode::SchemaVersionMismatch);
    h.key(101, 2, ExecType::Rollback, vec![]).unwrap();
    assert_eq!(h.get(d.id, vec![Value::Int(10)]), None);
    let all = rows(&mut h, d.id);
    assert_eq!(all.len(), 4);
    assert!(all.iter().all(|r| r.len() == 4 && r[0] == Value::Int(7)), "{all:?}");
    assert_eq!(h.get(d.id, vec![Value::Int(2)]).unwrap()[3], Value::str("s2"));
    // The locks are gone: the keys can be written.
    let mut op = KeyOp::update(d.id, vec![Value::Int(2)], vec![(3, Value::str("after"))]);
    op.table_version = d.version + 1;
    h.autocommit(vec![op]).unwrap();
}

/// With two LQH instances, a value that fails on one keeps the change from
/// both; the other drops its copy (a later ALTER can run).
#[test]
fn all_or_nothing_across_lqh_instances() {
    let mut h = Harness::with_lqh_instances(Knobs::default(), 2);
    let d = setup(&mut h, 8, 0);
    // Short values everywhere, one long value in a partition of instance 1.
    let mut long_key = None;
    for i in 0..40i64 {
        h.autocommit(vec![KeyOp::insert(d.id, vec![Value::Int(i)], vec![(2, Value::str("ok"))])]).unwrap();
    }
    for i in 0..40i64 {
        let part = norr_signals::partition::partition_of_pk(&d, &[Value::Int(i)]).unwrap();
        if lqh_instance(part, 2) == 1 {
            long_key = Some(i);
            break;
        }
    }
    let long_key = long_key.expect("a row on instance 1");
    h.autocommit(vec![KeyOp::update(d.id, vec![Value::Int(long_key)], vec![(2, Value::str("too long"))])]).unwrap();
    let before = rows(&mut h, d.id);
    let used = h.stats().data_memory_used_bytes;
    let (def, sources) = widened(&d, 3);
    assert_eq!(alter(&mut h, "t", def, sources), Err(ErrorCode::ValueTooLarge));
    assert_eq!(get_table(&mut h, "t"), d);
    assert_eq!(rows(&mut h, d.id), before);
    assert_eq!(h.stats().data_memory_used_bytes, used);
    // Writes work again on both instances, and a good change applies on both.
    h.autocommit(vec![KeyOp::update(d.id, vec![Value::Int(long_key)], vec![(2, Value::str("abc"))])]).unwrap();
    let (def, sources) = widened(&d, 3);
    alter(&mut h, "t", def, sources).unwrap();
    let all = rows(&mut h, d.id);
    assert_eq!(all.len(), 40);
    assert!(all.iter().all(|r| r[0] == Value::Int(7)));
}

/// The rebuild needs data memory for both copies; short of it, TableFull
/// and nothing changes.
#[test]
fn out_of_memory_for_the_copy() {
    let mut h = Harness::new(Knobs { data_memory_bytes: 4 << 20, ..Knobs::default() });
    let d = setup(&mut h, 2, 0);
    let limit = h.stats().data_memory_limit_bytes;
    let mut i = 0i64;
    while h.stats().data_memory_used_bytes < limit * 6 / 10 {
        let ops = (i..i + 500)
            .map(|k| KeyOp::insert(d.id, vec![Value::Int(k)], vec![(1, Value::Int(k)), (2, Value::str("abcdefghij"))]))
            .collect();
        h.autocommit(ops).unwrap();
        i += 500;
    }
    let used = h.stats().data_memory_used_bytes;
    let (def, sources) = widened(&d, 10);
    assert_eq!(alter(&mut h, "t", def, sources), Err(ErrorCode::TableFull));
    assert_eq!(h.stats().data_memory_used_bytes, used);
    assert_eq!(get_table(&mut h, "t"), d);
    assert_eq!(rows(&mut h, d.id).len() as i64, i);
}

/// A write that reaches LQH between the two phases (the rows are being
/// copied) is refused: it would miss the copy.
#[test]
fn writes_during_the_copy_are_refused() {
    let mut h = Harness::new(Knobs::default());
    let d = setup(&mut h, 2, 4);
    let (def, sources) = widened(&d, 10);
    // Both queued before the node runs: DICT's prepare reaches LQH first.
    let req = norr_signals::DictReq {
        req_id: 77,
        op: DictOp::AlterTable { table: "t".into(), def, sources, expect_version: d.version },
    };
    h.send(1, norr_signals::Signal::DictReq(Box::new(req)));
    let ins = KeyOp::insert(d.id, vec![Value::Int(99)], vec![(1, Value::Int(1))]);
    let e = h.key(100, 5, ExecType::Commit, vec![ins]).unwrap_err();
    assert_eq!(e.error.code, ErrorCode::SchemaVersionMismatch);
    assert!(e.error.message.contains("being altered"), "{}", e.error.message);
    assert_eq!(h.counters().get("lqh: write refused during alter table"), Some(&1));
    assert_eq!(get_table(&mut h, "t").version, d.version + 1);
    assert_eq!(h.get(d.id, vec![Value::Int(99)]), None);
    assert_eq!(rows(&mut h, d.id).len(), 4);
}

/// Two ALTERs made from the same version: the second is refused, so it
/// cannot undo the first (its definition lacks the first's change), and the
/// table keeps the first's layout and rows.
#[test]
fn an_alter_made_from_an_old_version_is_refused() {
    let mut h = Harness::new(Knobs::default());
    let d = setup(&mut h, 2, 6);
    let (first, first_sources) = widened(&d, 10);
    let mut second = d.clone();
    second.columns[2] = ColumnDef::new("s", varchar(20));
    let second_sources = (0..d.columns.len() as u16).map(ColumnSource::Old).collect();
    let after_first = match h.dict(
        1,
        DictOp::AlterTable { table: "t".into(), def: first, sources: first_sources, expect_version: d.version },
    ) {
        Ok(DictResult::Table(t)) => t,
        other => panic!("unexpected {other:?}"),
    };
    let e = h
        .dict(
            1,
            DictOp::AlterTable { table: "t".into(), def: second, sources: second_sources, expect_version: d.version },
        )
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::SchemaVersionMismatch);
    assert!(e.message.contains(&format!("made from version {}", d.version)), "{}", e.message);
    let now = get_table(&mut h, "t");
    assert_eq!(now, after_first);
    assert_eq!(now.columns[0].name, "w");
    assert_eq!(rows(&mut h, d.id).len(), 6);
    // Made again from the current version, it goes through.
    let mut again = now.clone();
    again.columns[3] = ColumnDef::new("s", varchar(20));
    let sources = (0..now.columns.len() as u16).map(ColumnSource::Old).collect();
    let done = alter(&mut h, "t", again, sources).unwrap();
    assert_eq!(done.version, now.version + 1);
}
