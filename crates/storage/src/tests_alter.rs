//! Unit tests of ALTER TABLE in storage: rebuild aside, commit, discard.

use super::*;
use crate::tests::{bigint, get, index, put, table, varchar};
use norr_signals::schema::{ColumnDef, IndexKind};
use norr_signals::value::ColumnType;
use norr_signals::ColumnSource;

/// (id BIGINT pk, v BIGINT, s VARCHAR(10)) with an ordered index on v and
/// rows id = 0..n, v = id, s = "s{id}".
fn setup(n: i64) -> (Storage, TableDef) {
    let mut s = Storage::new(64 << 20);
    let mut def = table(
        1,
        vec![
            ColumnDef::new("id", bigint()).not_null(),
            ColumnDef::new("v", bigint()),
            ColumnDef::new("s", varchar(10)),
        ],
        vec![0],
        4,
    );
    def.indexes.push(index(1, "by_v", vec![1], false, IndexKind::Ordered));
    s.create_table(&def).unwrap();
    for i in 0..n {
        put(&mut s, 1, vec![Value::Int(i), Value::Int(i), Value::str(&format!("s{i}"))]).unwrap();
    }
    (s, def)
}

/// (w INT NOT NULL, id, s VARCHAR(s_len), v INT) with a unique index on v.
fn altered(old: &TableDef, s_len: u32) -> (TableDef, Vec<ColumnSource>) {
    let mut def = old.clone();
    def.version += 1;
    def.columns = vec![
        ColumnDef::new("w", ColumnType::Int { unsigned: false }).not_null(),
        old.columns[0].clone(),
        ColumnDef::new("s", varchar(s_len)),
        ColumnDef::new("v", ColumnType::Int { unsigned: false }),
    ];
    def.primary_key = vec![1];
    def.indexes = vec![index(2, "uv", vec![3], true, IndexKind::Ordered)];
    (def, vec![ColumnSource::Value(Value::Int(9)), ColumnSource::Old(0), ColumnSource::Old(2), ColumnSource::Old(1)])
}

fn read(s: &Storage, id: i64) -> Vec<Value> {
    let (p, r) = get(s, 1, &[Value::Int(id)]).expect("row");
    s.read_row(1, p, r)
}

#[test]
fn rebuild_converts_rows_and_commit_switches() {
    let (mut s, old) = setup(50);
    let used = s.memory().used_bytes;
    let (def, sources) = altered(&old, 10);
    s.alter_prepare(1, &def, &sources).unwrap();
    assert!(s.is_altering(1));
    // Both copies are charged; readers still see the old rows.
    assert!(s.memory().used_bytes > used);
    assert_eq!(read(&s, 7), vec![Value::Int(7), Value::Int(7), Value::str("s7")]);
    s.check_invariants();
    s.alter_commit(1).unwrap();
    assert!(!s.is_altering(1));
    assert_eq!(read(&s, 7), vec![Value::Int(9), Value::Int(7), Value::str("s7"), Value::Int(7)]);
    assert_eq!(s.row_count(1), 50);
    assert_eq!(s.table_def(1).unwrap().version, old.version + 1);
    let (_, r) = s.lookup_unique(1, 2, &[Value::Int(7)]).unwrap().expect("new unique index built");
    assert_eq!(s.read_row(1, get(&s, 1, &[Value::Int(7)]).unwrap().0, r)[1], Value::Int(7));
    // The old index is gone.
    assert_eq!(s.scan_open(1, 0, Some(1), None, false).unwrap_err().code, ErrorCode::NoSuchIndex);
    s.check_invariants();
}

#[test]
fn a_failed_rebuild_keeps_nothing() {
    let (mut s, old) = setup(50);
    let used = s.memory().used_bytes;
    // "s10".."s49" do not fit VARCHAR(2): the error names row and column.
    let (def, sources) = altered(&old, 2);
    let e = s.alter_prepare(1, &def, &sources).unwrap_err();
    assert_eq!(e.code, ErrorCode::ValueTooLarge);
    assert!(e.message.starts_with("row ") && e.message.contains("column s"), "{}", e.message);
    assert!(!s.is_altering(1));
    assert_eq!(s.memory().used_bytes, used);
    // Duplicates for the new unique index.
    put(&mut s, 1, vec![Value::Int(100), Value::Int(3), Value::str("x")]).unwrap();
    let used = s.memory().used_bytes;
    let (def, sources) = altered(&old, 10);
    assert_eq!(s.alter_prepare(1, &def, &sources).unwrap_err().code, ErrorCode::DuplicateUniqueKey);
    assert_eq!(s.memory().used_bytes, used);
    assert_eq!(s.table_def(1).unwrap(), &old);
    s.check_invariants();
}

#[test]
fn discard_frees_the_copy() {
    let (mut s, old) = setup(20);
    let used = s.memory().used_bytes;
    let (def, sources) = altered(&old, 10);
    s.alter_prepare(1, &def, &sources).unwrap();
    assert_eq!(s.alter_prepare(1, &def, &sources).unwrap_err().code, ErrorCode::Internal);
    s.alter_discard(1);
    assert_eq!(s.memory().used_bytes, used);
    assert_eq!(s.table_def(1).unwrap(), &old);
    assert_eq!(s.alter_commit(1).unwrap_err().code, ErrorCode::Internal);
    // Dropping a table being altered frees both.
    s.alter_prepare(1, &def, &sources).unwrap();
    s.drop_table(1).unwrap();
    assert_eq!(s.memory().used_bytes, 0);
    s.check_invariants();
}

#[test]
fn same_layout_needs_no_copy() {
    let (mut s, old) = setup(20);
    let used = s.memory().used_bytes;
    let mut def = old.clone();
    def.version += 1;
    def.name = "renamed".into();
    def.columns[1].default = Some(Value::Int(4));
    def.indexes[0].name = "by_v".into();
    let sources: Vec<_> = (0..3).map(ColumnSource::Old).collect();
    s.alter_prepare(1, &def, &sources).unwrap();
    assert_eq!(s.memory().used_bytes, used);
    s.alter_commit(1).unwrap();
    assert_eq!(s.table_def(1).unwrap().name, "renamed");
    assert_eq!(s.memory().used_bytes, used);
    assert_eq!(read(&s, 3), vec![Value::Int(3), Value::Int(3), Value::str("s3")]);
    s.check_invariants();
}

#[test]
fn no_room_for_both_copies_is_table_full() {
    // Memory for the rows once, not twice.
    let (full, old) = setup(2000);
    let once = full.memory().used_bytes;
    let mut s = Storage::new(once + once / 4);
    s.create_table(&old).unwrap();
    for i in 0..2000 {
        put(&mut s, 1, vec![Value::Int(i), Value::Int(i), Value::str(&format!("s{i}"))]).unwrap();
    }
    let used = s.memory().used_bytes;
    let (def, sources) = altered(&old, 10);
    assert_eq!(s.alter_prepare(1, &def, &sources).unwrap_err().code, ErrorCode::TableFull);
    assert_eq!(s.memory().used_bytes, used);
    s.check_invariants();
}
