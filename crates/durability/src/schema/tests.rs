use super::*;
use norr_signals::{ColumnDef, ColumnType, PartitionScheme, Value};

fn table(id: TableId, version: u32, name: &str) -> TableDef {
    TableDef {
        id,
        version,
        name: name.into(),
        columns: vec![
            ColumnDef::new("id", ColumnType::BigInt { unsigned: false }).not_null(),
            ColumnDef::new("v", ColumnType::Double).default_value(Value::Double(1.5)),
        ],
        primary_key: vec![0],
        partitioning: PartitionScheme::Key { columns: vec![] },
        partitions: 2,
        indexes: vec![],
        extra: vec![1, 2, 3],
        options: Default::default(),
    }
}

/// A version-1 schema file (before `pending`) is read as having no pending
/// change; a version-2 file keeps its pending change.
#[test]
fn a_version_1_schema_file_reads_with_no_pending_change() {
    let v1 = SchemaSnapshotV1 {
        last_ddl_id: 7,
        next_table_id: 4,
        tables: BTreeMap::from([(3, table(3, 2, "t"))]),
        auto_inc: BTreeMap::from([(3, 100)]),
    };
    let mut bytes = Vec::new();
    seal(Kind::SchemaFile, 1, &postcard::to_stdvec(&v1).unwrap(), &mut bytes);
    let got = SchemaSnapshot::decode(&bytes, SCHEMA_FILE).expect("version 1 reads");
    assert_eq!(got.tables, v1.tables);
    assert_eq!((got.last_ddl_id, got.next_table_id, got.auto_inc.get(&3)), (7, 4, Some(&100)));
    assert_eq!(got.pending, None);

    let snap = SchemaSnapshot { pending: Some(SchemaChange::DropTable(3)), ..got };
    let back = SchemaSnapshot::decode(&snap.encode(), SCHEMA_FILE).expect("the current version reads");
    assert_eq!(back, snap);
    // A file from a newer NorrDB is refused with its version named.
    let mut newer = Vec::new();
    seal(Kind::SchemaFile, SCHEMA_FILE_VERSION + 1, &postcard::to_stdvec(&snap).unwrap(), &mut newer);
    let e = SchemaSnapshot::decode(&newer, SCHEMA_FILE).unwrap_err();
    assert!(e.to_string().contains(&format!("format version {}", SCHEMA_FILE_VERSION + 1)), "{e}");
}

/// A version-2 file wrote a pending TRUNCATE as the table id alone: it reads
/// as a TRUNCATE to the next version of the table's definition (what DICT
/// announces today), and every other pending change as it was.
#[test]
fn a_version_2_schema_file_reads_its_pending_truncate_as_a_version_change() {
    let v2 = |pending| SchemaSnapshotV2 {
        last_ddl_id: 9,
        next_table_id: 5,
        tables: BTreeMap::from([(3, table(3, 2, "t")), (4, table(4, 1, "u"))]),
        auto_inc: BTreeMap::from([(3, 50)]),
        pending,
    };
    let read = |pending| {
        let mut bytes = Vec::new();
        seal(Kind::SchemaFile, 2, &postcard::to_stdvec(&v2(pending)).unwrap(), &mut bytes);
        SchemaSnapshot::decode(&bytes, SCHEMA_FILE).expect("version 2 reads")
    };
    let got = read(Some(PendingV2::TruncateTable(3)));
    assert_eq!((got.last_ddl_id, got.next_table_id, got.auto_inc.get(&3)), (9, 5, Some(&50)));
    assert_eq!(got.tables.get(&3).map(|d| d.version), Some(2), "the committed definition is unchanged");
    assert_eq!(got.pending, Some(SchemaChange::TruncateTable(table(3, 3, "t"))));
    // A TRUNCATE of a table the file does not hold has nothing to make again.
    assert_eq!(read(Some(PendingV2::TruncateTable(8))).pending, None);
    assert_eq!(read(Some(PendingV2::DropTable(4))).pending, Some(SchemaChange::DropTable(4)));
    assert_eq!(read(Some(PendingV2::AlterAbort(4))).pending, Some(SchemaChange::AlterAbort(4)));
    let def = table(4, 2, "u");
    assert_eq!(
        read(Some(PendingV2::CreateIndex { def: def.clone(), index: 7 })).pending,
        Some(SchemaChange::CreateIndex { def: def.clone(), index: 7 })
    );
    assert_eq!(
        read(Some(PendingV2::AlterCommit { def: def.clone() })).pending,
        Some(SchemaChange::AlterCommit { def })
    );
    assert_eq!(read(None).pending, None);
}

/// A damaged schema file is refused with its path and the offset of the
/// damage, never read as an empty or partial schema.
#[test]
fn a_damaged_schema_file_is_refused_with_where() {
    let snap = SchemaSnapshot {
        last_ddl_id: 3,
        next_table_id: 2,
        tables: BTreeMap::from([(1, table(1, 1, "t"))]),
        ..SchemaSnapshot::default()
    };
    let good = snap.encode();
    assert_eq!(SchemaSnapshot::decode(&good, SCHEMA_FILE).unwrap(), snap);
    for at in [0, 7, BLOB_HEADER_BYTES, good.len() - 1] {
        let mut bad = good.clone();
        bad[at] ^= 0x40;
        let e = SchemaSnapshot::decode(&bad, SCHEMA_FILE).unwrap_err();
        assert_eq!(e.path, SCHEMA_FILE, "{e}");
    }
    let e = SchemaSnapshot::decode(&good[..good.len() - 3], SCHEMA_FILE).unwrap_err();
    assert_eq!(e.path, SCHEMA_FILE, "{e}");
}
