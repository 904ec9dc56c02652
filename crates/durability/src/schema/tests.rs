use super::*;
use crate::crash::ALL;
use norr_signals::{ColumnDef, ColumnType, PartitionScheme, Value};
use std::collections::BTreeSet;

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

/// Durable files of the test "disk" (every write here is synced).
#[derive(Default, Clone)]
struct Disk {
    files: BTreeMap<String, Vec<u8>>,
}

impl Disk {
    fn append(&mut self, path: &str, a: &LogAppend) {
        let f = self.files.entry(path.into()).or_default();
        f.truncate(a.offset as usize);
        f.extend_from_slice(&a.bytes);
    }
    fn table_files(&self) -> BTreeSet<TableId> {
        self.files.keys().filter_map(|p| p.strip_prefix("lcp/")?.split('/').next()?.parse().ok()).collect()
    }
    fn act(&mut self, a: &DdlAction) {
        match a {
            DdlAction::RemoveTableFiles { table } => self.files.retain(|p, _| !p.starts_with(&format!("lcp/{table}/"))),
        }
    }
}

fn ops() -> Vec<DdlOp> {
    vec![
        DdlOp::CreateTable(table(1, 1, "db/t1")),
        DdlOp::CreateTable(table(2, 1, "db/t2")),
        DdlOp::AlterTable(table(1, 2, "db/t1_renamed")),
        DdlOp::AutoIncReserve { table: 2, up_to: 100 },
        DdlOp::DropTable { table: 1 },
        DdlOp::CreateTable(table(3, 1, "db/t3")),
        DdlOp::DropTable { table: 2 },
    ]
}

/// Run the DDLs from `start`, snapshotting after the 4th. Returns how many
/// DDLs completed and whether the crashing one had committed.
fn run(
    disk: &mut Disk,
    w: &mut DdlLogWriter,
    schema: &mut SchemaSnapshot,
    start: usize,
) -> Result<(), (usize, bool, Crashed)> {
    for (i, op) in ops().into_iter().enumerate().skip(start) {
        let (id, a) = w.begin(op.clone());
        disk.append(DDL_LOG, &a);
        if let DdlOp::CreateTable(def) = &op {
            // The table gets checkpoint files once it exists.
            disk.files.insert(format!("lcp/{}/0/1.data", def.id), vec![0; 10]);
        }
        let a = w.commit(id).map_err(|c| (i, false, c))?;
        disk.append(DDL_LOG, &a);
        schema.apply(&op).unwrap();
        for act in w.post_commit(&op).map_err(|c| (i, true, c))? {
            disk.act(&act);
        }
        let a = w.done(id).map_err(|c| (i, true, c))?;
        disk.append(DDL_LOG, &a);
        if i == 3 {
            let mut s = schema.clone();
            s.last_ddl_id = id;
            disk.files.insert(SCHEMA_TMP.into(), w.snapshot(&s));
            let (from, to) = w.snapshot_rename().map_err(|c| (i + 1, false, c))?;
            let b = disk.files.remove(from).unwrap();
            disk.files.insert(to.into(), b);
            disk.files.insert(DDL_LOG.into(), vec![]);
            w.log_emptied();
        }
    }
    Ok(())
}

fn restart(disk: &mut Disk) -> SchemaRecovery {
    let r = recover(disk.files.get(SCHEMA_FILE).map(|v| v.as_slice()), disk.files.get(DDL_LOG).map(|v| v.as_slice()))
        .unwrap();
    for a in &r.actions {
        disk.act(a);
    }
    let mut w = DdlLogWriter::new(&r.schema);
    for e in &r.log_entries {
        let bytes = e.encode();
        let f = disk.files.entry(DDL_LOG.into()).or_default();
        f.truncate(r.log_valid_len as usize);
        f.extend_from_slice(&bytes);
        let _ = &mut w;
    }
    // New snapshot, empty log.
    disk.files.insert(SCHEMA_FILE.into(), r.schema.encode());
    disk.files.insert(DDL_LOG.into(), vec![]);
    r
}

fn states() -> Vec<SchemaSnapshot> {
    let mut s = SchemaSnapshot::default();
    let mut out = vec![s.clone()];
    for op in ops() {
        s.apply(&op).unwrap();
        out.push(s.clone());
    }
    out
}

fn same(a: &SchemaSnapshot, b: &SchemaSnapshot) -> bool {
    a.tables == b.tables && a.auto_inc == b.auto_inc
}

#[test]
fn ddl_is_all_or_nothing_at_every_crash_point() {
    let all_states = states();
    let mut crashes = 0;
    for &point in ALL.iter().filter(|p| p.starts_with("ddl:") || p.starts_with("schema:")) {
        for skip in 0..8 {
            let mut disk = Disk::default();
            let mut schema = SchemaSnapshot::default();
            let mut w = DdlLogWriter::new(&schema);
            w.crash.arm(point, skip).unwrap();
            let Err((i, committed, crashed)) = run(&mut disk, &mut w, &mut schema, 0) else {
                continue; // the point is passed fewer times than `skip`
            };
            assert_eq!(crashed.0, point);
            crashes += 1;
            let r = restart(&mut disk);
            let expect = if committed { &all_states[i + 1] } else { &all_states[i] };
            assert!(
                same(&r.schema, expect),
                "{point} skip {skip}: DDL {i} committed={committed}: got {:?}",
                r.schema.tables.keys().collect::<Vec<_>>()
            );
            // No files of tables that do not exist.
            let live: BTreeSet<TableId> = r.schema.tables.keys().copied().collect();
            assert!(disk.table_files().is_subset(&live), "{point}: files of dropped or undone tables remain");
            // A restart after the restart finds the same schema, nothing to do.
            let r2 = restart(&mut disk);
            assert!(same(&r2.schema, &r.schema) && r2.actions.is_empty() && r2.log_entries.is_empty());
            // And the remaining DDLs run to the same end state.
            let mut schema = r2.schema.clone();
            let mut w = DdlLogWriter::new(&schema);
            let next = if committed { i + 1 } else { i };
            if next < ops().len() {
                // Re-run from the next DDL; a re-run create of an undone table works.
                run(&mut disk, &mut w, &mut schema, next).unwrap();
                let r3 = restart(&mut disk);
                assert!(same(&r3.schema, all_states.last().unwrap()), "{point} skip {skip}");
            }
        }
    }
    // 7 DDLs x 3 DDL points (all skips) + 1 snapshot.
    assert_eq!(crashes, 7 * 3 + 1);
}

#[test]
fn torn_last_entry_is_ignored_and_damage_in_the_middle_refused() {
    let mut disk = Disk::default();
    let mut schema = SchemaSnapshot::default();
    let mut w = DdlLogWriter::new(&schema);
    let (id, a) = w.begin(DdlOp::CreateTable(table(1, 1, "a")));
    disk.append(DDL_LOG, &a);
    disk.append(DDL_LOG, &w.commit(id).unwrap());
    schema.apply(&DdlOp::CreateTable(table(1, 1, "a"))).unwrap();
    let (id2, a2) = w.begin(DdlOp::CreateTable(table(2, 1, "b")));
    let log = disk.files.get_mut(DDL_LOG).unwrap();
    let full_len = log.len();
    log.extend_from_slice(&a2.bytes[..a2.bytes.len() - 4]);
    let r = recover(None, Some(log)).unwrap();
    assert_eq!(r.schema.tables.len(), 1);
    assert_eq!(r.log_valid_len, full_len as u64);
    assert_eq!(r.finished, vec![id]);
    let _ = id2;
    // Damage the first entry: a valid one follows, so it is corruption.
    let mut bad = log.clone();
    bad[20] ^= 0x40;
    let e = recover(None, Some(&bad)).unwrap_err();
    assert_eq!((e.path.as_str(), e.offset), (DDL_LOG, 0), "{e}");
    assert!(e.what.contains("followed by valid"));
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

    let snap = SchemaSnapshot { pending: Some(norr_signals::internal::SchemaChange::DropTable(3)), ..got };
    let back = SchemaSnapshot::decode(&snap.encode(), SCHEMA_FILE).expect("version 2 reads");
    assert_eq!(back, snap);
    // A file from a newer NorrDB is refused with its version named.
    let mut newer = Vec::new();
    seal(Kind::SchemaFile, SCHEMA_FILE_VERSION + 1, &postcard::to_stdvec(&snap).unwrap(), &mut newer);
    let e = SchemaSnapshot::decode(&newer, SCHEMA_FILE).unwrap_err();
    assert!(e.to_string().contains("format version 3"), "{e}");
}
