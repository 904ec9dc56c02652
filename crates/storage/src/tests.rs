//! Unit tests of the Storage API: round trips, keys, unique indexes, memory.

use super::*;
use norr_signals::schema::{ColumnDef, IndexKind, PartitionScheme};
use norr_signals::value::{Collation, ColumnType, Date, DateTime, Decimal};

pub(crate) fn table(id: TableId, columns: Vec<ColumnDef>, pk: Vec<ColumnId>, partitions: u32) -> TableDef {
    TableDef {
        id,
        version: 1,
        name: format!("t{id}"),
        columns,
        primary_key: pk,
        partitioning: PartitionScheme::Key { columns: vec![] },
        partitions,
        indexes: vec![],
        extra: vec![],
        options: Default::default(),
    }
}

pub(crate) fn index(id: IndexId, name: &str, columns: Vec<ColumnId>, unique: bool, kind: IndexKind) -> IndexDef {
    IndexDef { id, name: name.into(), columns, unique, kind }
}

pub(crate) fn bigint() -> ColumnType {
    ColumnType::BigInt { unsigned: false }
}

pub(crate) fn varchar(len: u32) -> ColumnType {
    ColumnType::Varchar { len, collation: Collation::CaseInsensitive }
}

/// Insert into the partition the row's key hashes to.
pub(crate) fn put(s: &mut Storage, t: TableId, row: Vec<Value>) -> Result<(PartitionId, RowId), NodeError> {
    let def = s.table_def(t).expect("table").clone();
    let pk: Vec<Value> = def.primary_key.iter().map(|&c| row[c as usize].clone()).collect();
    let p = s.partition_of_pk(t, &pk)?;
    s.insert(t, p, row).map(|r| (p, r))
}

/// Find a row by primary key values.
pub(crate) fn get(s: &Storage, t: TableId, pk: &[Value]) -> Option<(PartitionId, RowId)> {
    let p = s.partition_of_pk(t, pk).ok()?;
    let enc = s.encode_pk(t, pk).ok()?;
    s.lookup(t, p, &enc).map(|r| (p, r))
}

fn all_types_table() -> TableDef {
    let ci = Collation::CaseInsensitive;
    table(
        1,
        vec![
            ColumnDef::new("id", ColumnType::Int { unsigned: false }).not_null(),
            ColumnDef::new("ti", ColumnType::TinyInt { unsigned: false }),
            ColumnDef::new("tu", ColumnType::TinyInt { unsigned: true }),
            ColumnDef::new("si", ColumnType::SmallInt { unsigned: false }),
            ColumnDef::new("mi", ColumnType::MediumInt { unsigned: false }),
            ColumnDef::new("mu", ColumnType::MediumInt { unsigned: true }),
            ColumnDef::new("iu", ColumnType::Int { unsigned: true }),
            ColumnDef::new("bi", bigint()),
            ColumnDef::new("bu", ColumnType::BigInt { unsigned: true }),
            ColumnDef::new("f", ColumnType::Float),
            ColumnDef::new("d", ColumnType::Double),
            ColumnDef::new("dec", ColumnType::Decimal { precision: 10, scale: 2 }),
            ColumnDef::new("bigdec", ColumnType::Decimal { precision: 38, scale: 5 }),
            ColumnDef::new("ch", ColumnType::Char { len: 5, collation: ci }),
            ColumnDef::new("vc", varchar(300)),
            ColumnDef::new("bin", ColumnType::Binary { len: 3 }),
            ColumnDef::new("vb", ColumnType::Varbinary { len: 10 }),
            ColumnDef::new("tx", ColumnType::Text { collation: ci }),
            ColumnDef::new("bl", ColumnType::Blob),
            ColumnDef::new("dt", ColumnType::Date),
            ColumnDef::new("tm", ColumnType::Time),
            ColumnDef::new("dtm", ColumnType::DateTime),
            ColumnDef::new("ts", ColumnType::Timestamp),
        ],
        vec![0],
        3,
    )
}

fn full_row(id: i64, big: bool) -> Vec<Value> {
    let date = Date { year: 2024, month: 2, day: 29 };
    let dt = DateTime { date, hour: 23, minute: 59, second: 58, micro: 123_456 };
    vec![
        Value::Int(id),
        Value::Int(-128),
        Value::UInt(255),
        Value::Int(-32768),
        Value::Int(-(1 << 23)),
        Value::UInt((1 << 24) - 1),
        Value::UInt(u32::MAX as u64),
        Value::Int(i64::MIN + id),
        Value::UInt(u64::MAX),
        Value::Float(1.5),
        Value::Double(-2.25e100),
        Value::Decimal(Decimal { mantissa: -12345678, scale: 2 }),
        Value::Decimal(Decimal { mantissa: -(10i128.pow(37)) + 7, scale: 5 }),
        Value::str("åäö"),
        Value::str(&"x".repeat(if big { 300 } else { 3 })),
        Value::Bytes(vec![0, 1, 2]),
        Value::Bytes(vec![0xff, 0]),
        Value::Bytes(vec![b't'; if big { 200_000 } else { 10 }]),
        Value::Bytes(vec![0; if big { 5000 } else { 0 }]),
        Value::Date(date),
        Value::Time(-(838 * 3600 + 59 * 60 + 59) * 1_000_000),
        Value::DateTime(dt),
        Value::DateTime(DateTime {
            date: Date { year: 2038, month: 1, day: 19 },
            hour: 3,
            minute: 14,
            second: 7,
            micro: 0,
        }),
    ]
}

#[test]
fn round_trip_every_type_with_nulls() {
    let mut s = Storage::new(64 << 20);
    let def = all_types_table();
    s.create_table(&def).unwrap();
    let mut nulls = full_row(2, false);
    for v in nulls.iter_mut().skip(1) {
        *v = Value::Null;
    }
    let rows = [full_row(1, false), nulls.clone(), full_row(3, true)];
    for r in &rows {
        put(&mut s, 1, r.clone()).unwrap();
    }
    s.check_invariants();
    for r in &rows {
        let (p, rid) = get(&s, 1, &r[..1]).expect("row found");
        assert_eq!(&s.read_row(1, p, rid), r);
        let mut out = vec![Value::Int(99)];
        s.read_projected(1, p, rid, &[17, 0, 14], &mut out);
        assert_eq!(out, vec![r[17].clone(), r[0].clone(), r[14].clone()]);
        s.read_projected(1, p, rid, &[], &mut out);
        assert_eq!(&out, r);
    }
    // Update: NULLs -> values, values -> NULLs, small -> big var parts.
    let (p, rid) = get(&s, 1, &[Value::Int(2)]).unwrap();
    let mut up = full_row(2, true);
    up[5] = Value::Null;
    s.update(1, p, rid, up.clone()).unwrap();
    assert_eq!(s.read_row(1, p, rid), up);
    let (p1, rid1) = get(&s, 1, &[Value::Int(1)]).unwrap();
    let mut up1 = nulls.clone();
    up1[0] = Value::Int(1);
    s.update(1, p1, rid1, up1.clone()).unwrap();
    assert_eq!(s.read_row(1, p1, rid1), up1);
    s.check_invariants();
    // Values are coerced on the way in: BINARY is padded, Int -> UInt.
    let mut r = full_row(4, false);
    r[15] = Value::Bytes(vec![9]);
    r[2] = Value::Int(7);
    let (p4, rid4) = put(&mut s, 1, r).unwrap();
    let back = s.read_row(1, p4, rid4);
    assert_eq!(back[15], Value::Bytes(vec![9, 0, 0]));
    assert_eq!(back[2], Value::UInt(7));
    for id in 1..=4 {
        let (p, rid) = get(&s, 1, &[Value::Int(id)]).unwrap();
        s.delete(1, p, rid);
        assert!(get(&s, 1, &[Value::Int(id)]).is_none());
    }
    assert_eq!(s.row_count(1), 0);
    s.check_invariants();
}

#[test]
fn bad_rows_are_rejected_without_change() {
    let mut s = Storage::new(16 << 20);
    s.create_table(&all_types_table()).unwrap();
    let mut r = full_row(1, false);
    r[1] = Value::Int(1000);
    assert_eq!(put(&mut s, 1, r).unwrap_err().code, ErrorCode::ValueOutOfRange);
    let mut r = full_row(1, false);
    r[14] = Value::Int(3);
    assert_eq!(put(&mut s, 1, r).unwrap_err().code, ErrorCode::WrongValueType);
    let r = full_row(1, false);
    assert_eq!(s.insert(1, 0, r[..5].to_vec()).unwrap_err().code, ErrorCode::WrongValueType);
    let (p, _) = put(&mut s, 1, full_row(1, false)).unwrap();
    let wrong = (p + 1) % 3;
    let mut r = full_row(1, false);
    r[0] = Value::Int(1);
    assert_eq!(s.insert(1, wrong, r).unwrap_err().code, ErrorCode::BadPartition);
    assert_eq!(s.insert(1, 7, full_row(9, false)).unwrap_err().code, ErrorCode::BadPartition);
    assert_eq!(s.insert(99, 0, full_row(9, false)).unwrap_err().code, ErrorCode::NoSuchTable);
    assert_eq!(s.row_count(1), 1);
    s.check_invariants();
}

pub(crate) fn kv_table(id: TableId, partitions: u32) -> TableDef {
    table(
        id,
        vec![
            ColumnDef::new("k", bigint()).not_null(),
            ColumnDef::new("u", varchar(40)),
            ColumnDef::new("n", ColumnType::Int { unsigned: false }),
        ],
        vec![0],
        partitions,
    )
}

pub(crate) fn kv(k: i64, u: Option<&str>, n: i64) -> Vec<Value> {
    vec![Value::Int(k), u.map(Value::str).unwrap_or(Value::Null), Value::Int(n)]
}

#[test]
fn keys_and_partitions() {
    let mut s = Storage::new(16 << 20);
    s.create_table(&kv_table(5, 4)).unwrap();
    assert_eq!(s.create_table(&kv_table(5, 4)).unwrap_err().code, ErrorCode::TableExists);
    put(&mut s, 5, kv(1, Some("a"), 1)).unwrap();
    assert_eq!(put(&mut s, 5, kv(1, Some("b"), 2)).unwrap_err().code, ErrorCode::DuplicateKey);
    assert_eq!(s.encode_pk(5, &[]).unwrap_err().code, ErrorCode::MissingKeyColumn);
    assert_eq!(s.encode_pk(5, &[Value::Null]).unwrap_err().code, ErrorCode::MissingKeyColumn);
    assert_eq!(s.encode_pk(5, &[Value::UInt(1)]).unwrap(), s.encode_pk(5, &[Value::Int(1)]).unwrap());
    assert_eq!(s.encode_pk(6, &[Value::Int(1)]).unwrap_err().code, ErrorCode::NoSuchTable);
    let p = s.partition_of_pk(5, &[Value::Int(1)]).unwrap();
    assert!(p < 4);
    assert_eq!(s.lookup(5, 99, &s.encode_pk(5, &[Value::Int(1)]).unwrap()), None);
    let (p, rid) = get(&s, 5, &[Value::Int(1)]).unwrap();
    assert_eq!(s.update(5, p, rid, kv(2, None, 0)).unwrap_err().code, ErrorCode::KeyUpdateNotAllowed);
    let mut user = kv_table(6, 2);
    user.partitioning = PartitionScheme::User;
    s.create_table(&user).unwrap();
    assert_eq!(s.partition_of_pk(6, &[Value::Int(1)]).unwrap_err().code, ErrorCode::MissingPartition);
    s.insert(6, 1, kv(1, None, 0)).unwrap();
    s.insert(6, 0, kv(2, None, 0)).unwrap();
    assert_eq!(s.row_count(6), 2);
    // Partition key a subset of a composite pk.
    let mut comp = table(
        7,
        vec![ColumnDef::new("a", bigint()).not_null(), ColumnDef::new("b", bigint()).not_null()],
        vec![0, 1],
        8,
    );
    comp.partitioning = PartitionScheme::Key { columns: vec![0] };
    s.create_table(&comp).unwrap();
    let p1 = s.partition_of_pk(7, &[Value::Int(10), Value::Int(1)]).unwrap();
    let p2 = s.partition_of_pk(7, &[Value::Int(10), Value::Int(2)]).unwrap();
    assert_eq!(p1, p2, "rows with the same partition key share a partition");
    put(&mut s, 7, vec![Value::Int(10), Value::Int(1)]).unwrap();
    put(&mut s, 7, vec![Value::Int(10), Value::Int(2)]).unwrap();
    s.check_invariants();
    s.drop_table(7).unwrap();
    assert_eq!(s.drop_table(7).unwrap_err().code, ErrorCode::NoSuchTable);
    let mut bad = kv_table(8, 0);
    assert_eq!(s.create_table(&bad).unwrap_err().code, ErrorCode::BadSchema);
    bad.partitions = 1;
    bad.primary_key = vec![9];
    assert_eq!(s.create_table(&bad).unwrap_err().code, ErrorCode::BadSchema);
    bad.primary_key = vec![0];
    for i in 0..40 {
        bad.columns.push(ColumnDef::new(&format!("wide{i}"), ColumnType::Binary { len: 255 }));
    }
    assert_eq!(s.create_table(&bad).unwrap_err().code, ErrorCode::BadSchema, "row too wide");
    bad.columns.truncate(3 + 20);
    s.create_table(&bad).unwrap();
    let mut row = kv(1, None, 1);
    row.extend((0..20).map(|_| Value::Bytes(vec![1; 255])));
    put(&mut s, 8, row.clone()).unwrap();
    let (p8, r8) = get(&s, 8, &[Value::Int(1)]).unwrap();
    assert_eq!(s.read_row(8, p8, r8), row);
}

#[test]
fn unique_indexes() {
    for kind in [IndexKind::Ordered, IndexKind::UniqueHash] {
        let mut s = Storage::new(16 << 20);
        let mut def = kv_table(1, 4);
        def.indexes.push(index(10, "u_idx", vec![1], true, kind));
        s.create_table(&def).unwrap();
        put(&mut s, 1, kv(1, Some("Alpha"), 1)).unwrap();
        put(&mut s, 1, kv(2, Some("beta"), 2)).unwrap();
        put(&mut s, 1, kv(3, None, 3)).unwrap();
        put(&mut s, 1, kv(4, None, 4)).unwrap(); // NULLs never conflict
        let used = s.memory().used_bytes;
        // Case-insensitive: "ALPHA" equals "Alpha"; across partitions.
        for k in 5..40 {
            assert_eq!(put(&mut s, 1, kv(k, Some("ALPHA"), 0)).unwrap_err().code, ErrorCode::DuplicateUniqueKey);
        }
        assert_eq!(s.memory().used_bytes, used);
        assert_eq!(s.row_count(1), 4);
        let at = s.lookup_unique(1, 10, &[Value::str("alpha")]).unwrap().unwrap();
        assert_eq!(s.read_row(1, at.0, at.1)[0], Value::Int(1));
        assert_eq!(s.lookup_unique(1, 10, &[Value::Null]).unwrap(), None);
        assert_eq!(s.lookup_unique(1, 10, &[Value::str("gamma")]).unwrap(), None);
        assert_eq!(s.lookup_unique(1, 11, &[Value::str("gamma")]).unwrap_err().code, ErrorCode::NoSuchIndex);
        // Update into a conflict fails and changes nothing; to itself is fine.
        let (p2, r2) = get(&s, 1, &[Value::Int(2)]).unwrap();
        assert_eq!(s.update(1, p2, r2, kv(2, Some("alpha"), 9)).unwrap_err().code, ErrorCode::DuplicateUniqueKey);
        assert_eq!(s.read_row(1, p2, r2), kv(2, Some("beta"), 2));
        s.update(1, p2, r2, kv(2, Some("BETA"), 9)).unwrap();
        s.update(1, p2, r2, kv(2, Some("gamma"), 9)).unwrap();
        assert_eq!(s.lookup_unique(1, 10, &[Value::str("beta")]).unwrap(), None);
        put(&mut s, 1, kv(5, Some("beta"), 5)).unwrap();
        let (p1, r1) = get(&s, 1, &[Value::Int(1)]).unwrap();
        s.delete(1, p1, r1);
        put(&mut s, 1, kv(6, Some("alpha"), 6)).unwrap();
        s.check_invariants();
    }
}

#[test]
fn create_index_on_existing_rows() {
    let mut s = Storage::new(16 << 20);
    s.create_table(&kv_table(1, 3)).unwrap();
    for k in 0..100 {
        put(&mut s, 1, kv(k, Some(&format!("v{}", k % 50)), k)).unwrap();
    }
    put(&mut s, 1, kv(100, None, 100)).unwrap();
    put(&mut s, 1, kv(101, None, 101)).unwrap();
    let used = s.memory().used_bytes;
    let e = s.create_index(1, &index(3, "u", vec![1], true, IndexKind::Ordered)).unwrap_err();
    assert_eq!(e.code, ErrorCode::DuplicateUniqueKey);
    assert_eq!(s.memory().used_bytes, used);
    assert!(s.table_def(1).unwrap().indexes.is_empty());
    s.create_index(1, &index(3, "u", vec![2], true, IndexKind::Ordered)).unwrap();
    s.create_index(1, &index(4, "o", vec![1], false, IndexKind::Ordered)).unwrap();
    assert_eq!(
        s.create_index(1, &index(4, "x", vec![1], false, IndexKind::Ordered)).unwrap_err().code,
        ErrorCode::IndexExists
    );
    assert_eq!(
        s.create_index(1, &index(5, "bad", vec![9], false, IndexKind::Ordered)).unwrap_err().code,
        ErrorCode::BadSchema
    );
    assert!(s.memory().used_bytes > used);
    assert_eq!(s.table_def(1).unwrap().indexes.len(), 2);
    assert_eq!(put(&mut s, 1, kv(200, None, 5)).unwrap_err().code, ErrorCode::DuplicateUniqueKey);
    s.check_invariants();
    s.drop_index(1, 3).unwrap();
    put(&mut s, 1, kv(200, None, 5)).unwrap();
    assert_eq!(s.drop_index(1, 3).unwrap_err().code, ErrorCode::NoSuchIndex);
    s.check_invariants();
    s.truncate_table(1).unwrap();
    assert_eq!(s.row_count(1), 0);
    put(&mut s, 1, kv(1, Some("v1"), 1)).unwrap();
    s.check_invariants();
}

#[test]
fn memory_limit_table_full_then_recovers() {
    let mut s = Storage::new(1 << 20);
    let mut def = kv_table(1, 2);
    def.indexes.push(index(2, "o", vec![2], false, IndexKind::Ordered));
    s.create_table(&def).unwrap();
    let mut k = 0;
    let err = loop {
        match put(&mut s, 1, kv(k, Some(&"z".repeat(40)), k)) {
            Ok(_) => k += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(err.code, ErrorCode::TableFull);
    assert!(k > 1000, "only {k} rows fit in 1 MiB");
    let mem = s.memory();
    assert!(mem.used_bytes <= mem.limit_bytes);
    assert_eq!(mem.rows, k as u64);
    assert!(get(&s, 1, &[Value::Int(k)]).is_none());
    assert_eq!(s.reserve_check(1, &kv(k, Some("z"), 0)).unwrap_err().code, ErrorCode::TableFull);
    s.check_invariants();
    // Delete a third of the rows: inserts work again without new pages.
    for i in (0..k).step_by(3) {
        let (p, r) = get(&s, 1, &[Value::Int(i)]).unwrap();
        s.delete(1, p, r);
    }
    let used = s.memory().used_bytes;
    for i in 0..50 {
        put(&mut s, 1, kv(k + i, Some(&"z".repeat(40)), i)).unwrap();
    }
    assert!(s.memory().used_bytes <= s.memory().limit_bytes);
    assert!(s.memory().used_bytes - used < 64 * 1024);
    s.check_invariants();
    s.drop_table(1).unwrap();
    assert_eq!(s.memory().used_bytes, 0);
}

#[test]
fn overhead_per_row_at_most_32_bytes() {
    let bare = crate::memory::measure_row_overhead(100_000, false);
    let o = crate::memory::measure_row_overhead(100_000, true);
    println!("per-row overhead (BIGINT pk, BIGINT, CHAR(20)), 100k rows: {o:.2} bytes ({bare:.2} without the PRIMARY ordered index)");
    assert!(o <= 32.0, "overhead {o} bytes/row");
    assert!(o > bare, "the ordered index is charged");
}

#[test]
fn growing_update_beyond_memory_fails_unchanged() {
    let mut s = Storage::new(2 << 20);
    let def =
        table(2, vec![ColumnDef::new("k", bigint()).not_null(), ColumnDef::new("t", ColumnType::Blob)], vec![0], 1);
    s.create_table(&def).unwrap();
    let (p, r) = put(&mut s, 2, vec![Value::Int(1), Value::Bytes(vec![1; 100])]).unwrap();
    put(&mut s, 2, vec![Value::Int(2), Value::Bytes(vec![2; 1 << 20])]).unwrap();
    let used = s.memory().used_bytes;
    let e = s.update(2, p, r, vec![Value::Int(1), Value::Bytes(vec![3; 1 << 20])]).unwrap_err();
    assert_eq!(e.code, ErrorCode::TableFull);
    assert_eq!(s.read_row(2, p, r), vec![Value::Int(1), Value::Bytes(vec![1; 100])]);
    assert_eq!(s.memory().used_bytes, used);
    assert_eq!(
        s.reserve_check(2, &[Value::Int(3), Value::Bytes(vec![3; 1 << 20])]).unwrap_err().code,
        ErrorCode::TableFull
    );
    s.reserve_check(2, &[Value::Int(3), Value::Bytes(vec![3; 1000])]).unwrap();
    s.update(2, p, r, vec![Value::Int(1), Value::Bytes(vec![3; 500_000])]).unwrap();
    s.check_invariants();
}

#[test]
fn big_values_and_var_page_churn() {
    let mut s = Storage::new(256 << 20);
    s.create_table(&kv_table(1, 1)).unwrap();
    let mut def =
        table(2, vec![ColumnDef::new("k", bigint()).not_null(), ColumnDef::new("t", ColumnType::Blob)], vec![0], 1);
    def.name = "blobs".into();
    s.create_table(&def).unwrap();
    let big = vec![7u8; 4 << 20];
    let (p, r) = put(&mut s, 2, vec![Value::Int(1), Value::Bytes(big.clone())]).unwrap();
    assert_eq!(s.read_row(2, p, r)[1], Value::Bytes(big));
    let too_big = vec![7u8; (4 << 20) + 1];
    assert_eq!(put(&mut s, 2, vec![Value::Int(2), Value::Bytes(too_big)]).unwrap_err().code, ErrorCode::ValueTooLarge);
    // Churn: values of changing sizes force compaction of var pages.
    for round in 0..20i64 {
        for k in 0..300i64 {
            let len = ((k * 7 + round * 13) % 40) as usize;
            let v = kv(k, Some(&"ab".repeat(len / 2)), round);
            match get(&s, 1, &[Value::Int(k)]) {
                Some((p, r)) if (k + round) % 5 == 0 => s.delete(1, p, r),
                Some((p, r)) => s.update(1, p, r, v).unwrap(),
                None => {
                    put(&mut s, 1, v).unwrap();
                }
            }
        }
        s.check_invariants();
    }
    for k in 0..300i64 {
        if let Some((p, r)) = get(&s, 1, &[Value::Int(k)]) {
            assert_eq!(s.read_row(1, p, r)[0], Value::Int(k));
        }
    }
}

#[test]
fn composite_var_primary_key_case_insensitive() {
    let mut s = Storage::new(64 << 20);
    let def = table(
        4,
        vec![
            ColumnDef::new("name", varchar(30)).not_null(),
            ColumnDef::new("n", ColumnType::Int { unsigned: false }).not_null(),
            ColumnDef::new("note", ColumnType::Text { collation: Collation::Binary }),
        ],
        vec![0, 1],
        2,
    );
    s.create_table(&def).unwrap();
    let row = |name: &str, n: i64, note: &str| vec![Value::str(name), Value::Int(n), Value::str(note)];
    // Enough rows to grow the hash tables several times (rehash reads var pks).
    for i in 0..5000 {
        put(&mut s, 4, row(&format!("Name{i}"), i % 3, &"x".repeat(i as usize % 50))).unwrap();
    }
    assert_eq!(put(&mut s, 4, row("NAME7", 1, "dup")).unwrap_err().code, ErrorCode::DuplicateKey);
    put(&mut s, 4, row("NAME7", 2, "other n")).unwrap();
    let (p, r) = get(&s, 4, &[Value::str("name7"), Value::Int(1)]).expect("case-insensitive pk");
    assert_eq!(s.read_row(4, p, r)[0], Value::str("Name7"));
    // Churn the var parts (notes change size) and delete half.
    for i in 0..5000 {
        let (p, r) = get(&s, 4, &[Value::str(&format!("name{i}")), Value::Int(i % 3)]).unwrap();
        if i % 2 == 0 {
            s.delete(4, p, r);
        } else {
            s.update(4, p, r, row(&format!("Name{i}"), i % 3, &"y".repeat(i as usize % 97))).unwrap();
        }
    }
    s.check_invariants();
    assert_eq!(s.row_count(4), 2501);
    for i in (1..5000).step_by(2) {
        let (p, r) = get(&s, 4, &[Value::str(&format!("NAME{i}")), Value::Int(i % 3)]).unwrap();
        assert_eq!(s.read_row(4, p, r)[2], Value::str(&"y".repeat(i as usize % 97)));
    }
}

#[test]
fn tables_share_the_memory_limit() {
    let mut s = Storage::new(2 << 20);
    s.create_table(&kv_table(1, 1)).unwrap();
    s.create_table(&kv_table(2, 1)).unwrap();
    let mut k = 0;
    while put(&mut s, 1, kv(k, Some("filler filler filler"), k)).is_ok() {
        k += 1;
    }
    assert_eq!(put(&mut s, 2, kv(0, Some("x"), 0)).unwrap_err().code, ErrorCode::TableFull);
    assert_eq!(s.reserve_check(2, &kv(0, Some("x"), 0)).unwrap_err().code, ErrorCode::TableFull);
    s.truncate_table(1).unwrap();
    put(&mut s, 2, kv(0, Some("x"), 0)).unwrap();
    s.reserve_check(2, &kv(1, Some("x"), 0)).unwrap();
    s.check_invariants();
    s.drop_table(1).unwrap();
    s.drop_table(2).unwrap();
    assert_eq!(s.memory(), MemoryStats { limit_bytes: 2 << 20, used_bytes: 0, rows: 0 });
}
