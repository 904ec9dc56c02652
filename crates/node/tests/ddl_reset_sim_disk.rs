//! TRUNCATE TABLE and row-rebuilding ALTER TABLE on a durable data node
//! (simulated disk): after a crash and a restart the table's rows are
//! exactly those of its current life: no row of before the TRUNCATE (from
//! the REDO log or a local checkpoint of the old rows), no rebuilt row
//! missing, each in the layout the schema file holds; and a DDL interrupted
//! by the crash leaves the table wholly old or wholly new.

use norr_durability::sysfile::{SysFileStore, PATHS};
use norr_kernel::Scheduler;
use norr_knobs::Knobs;
use norr_node::durable::{build_durable, RestoreReport};
use norr_signals::ops::{KeyOp, ScanSpec};
use norr_signals::schema::{ColumnDef, TableDef};
use norr_signals::value::{ColumnType, Value};
use norr_signals::{block, ColumnSource, DictOp, DictReq, DictResult, ExecType, Signal};
use norr_sim::disk::{CrashMode, DiskFaults, SharedDisk, SimDataDir, SimDisk, SimFsBlock};
use norr_sim::rng::Rng;
use norr_txn::testkit::{table_def, Harness, DATA_NODE};
use std::collections::BTreeMap;

/// Small REDO log and frequent checkpoints: old rows are in checkpoint
/// files as well as in the log when the DDL runs.
fn knobs() -> Knobs {
    Knobs { gcp_interval_ms: 5, lcp_min_gap_ms: 5, redo_files: 2, redo_file_bytes: 4 << 20, ..Knobs::default() }
}

fn boot(disk: &SharedDisk) -> (Harness, RestoreReport) {
    let (mut s, report): (Scheduler<Signal>, _) =
        build_durable(DATA_NODE, None, &knobs(), &SimDataDir(disk.clone())).unwrap_or_else(|e| panic!("restart: {e}"));
    s.add_block(block::FS, 0, Box::new(SimFsBlock::new(disk.clone())));
    (Harness::with_scheduler(s), report)
}

fn recorded(disk: &SharedDisk) -> (u64, u64) {
    let d = disk.lock().unwrap();
    let l = SysFileStore::load(d.durable(PATHS[0]), d.durable(PATHS[1])).expect("a valid copy");
    l.sysfile.map_or((0, 0), |s| (s.last_complete_gci, s.last_lcp_id))
}

fn crashing_disk(seed: u64, rng: &mut Rng) -> SharedDisk {
    let faults = DiskFaults {
        latency_min_ns: 20_000,
        latency_max_ns: 20_000 + rng.range(0, 2_000_000),
        crash_mode: if seed.is_multiple_of(2) { CrashMode::Prefix } else { CrashMode::Subset },
        torn_write_p: 0.5,
        ..DiskFaults::none()
    };
    SimDisk::shared(rng.fork(), faults)
}

/// Send a DICT request; None if it is not answered within `limit_ms`.
fn dict_within(h: &mut Harness, req_id: u32, op: DictOp, limit_ms: u64) -> Option<DictResult> {
    h.send(100, Signal::DictReq(Box::new(DictReq { req_id, op })));
    dict_wait(h, req_id, limit_ms)
}

fn dict_wait(h: &mut Harness, req_id: u32, limit_ms: u64) -> Option<DictResult> {
    for _ in 0..limit_ms {
        for e in h.advance_ms(1) {
            match e.signal {
                Signal::DictConf(c) if c.req_id == req_id => return Some(c.result),
                Signal::DictRef(r) if r.req_id == req_id => panic!("dictionary request {req_id} refused: {r:?}"),
                _ => {}
            }
        }
    }
    None
}

fn dict(h: &mut Harness, req_id: u32, op: DictOp) -> DictResult {
    dict_within(h, req_id, op, 5_000).unwrap_or_else(|| panic!("dictionary request {req_id} not answered"))
}

fn table(h: &mut Harness, req_id: u32, op: DictOp) -> TableDef {
    match dict(h, req_id, op) {
        DictResult::Table(d) => d,
        other => panic!("{other:?}"),
    }
}

/// (k BIGINT pk, v BIGINT) over 4 partitions.
fn create(h: &mut Harness) -> TableDef {
    let def = table_def("kv", 4, &[("v", ColumnType::BigInt { unsigned: false })]);
    table(h, 1, DictOp::CreateTable(def))
}

/// Insert keys `keys` (v = k * 10), one transaction per 2 keys; their GCIs.
fn insert(h: &mut Harness, t: u32, keys: std::ops::Range<i64>, txn: &mut u64, rng: &mut Rng) -> BTreeMap<i64, u64> {
    let mut gcis = BTreeMap::new();
    let ks: Vec<i64> = keys.collect();
    for pair in ks.chunks(2) {
        let ops = pair.iter().map(|&k| KeyOp::insert(t, vec![Value::Int(k)], vec![(1, Value::Int(k * 10))])).collect();
        *txn += 1;
        let c = h.key(100, *txn, ExecType::Commit, ops).expect("commit");
        for &k in pair {
            gcis.insert(k, c.gci);
        }
        h.advance_ms(rng.range(0, 2));
    }
    gcis
}

/// Every row of the table, by key.
fn rows(h: &mut Harness, t: u32, scan: u64) -> BTreeMap<i64, Vec<Value>> {
    let (rows, _) = h.scan_all(100, scan, true, ScanSpec::full(t)).unwrap();
    rows.into_iter()
        .map(|r| {
            // (k, v), or (w, k, v) after the ALTER below.
            let Value::Int(k) = r[r.len() - 2] else { panic!("{r:?}") };
            (k, r)
        })
        .collect()
}

fn keys_upto(gcis: &BTreeMap<i64, u64>, g: u64) -> Vec<i64> {
    gcis.iter().filter(|(_, &x)| x <= g).map(|(&k, _)| k).collect()
}

/// Run until a local checkpoint round is recorded in the system file after
/// the one recorded now (so old rows are in checkpoint files).
fn await_checkpoint(h: &mut Harness, disk: &SharedDisk) {
    let (_, lcp) = recorded(disk);
    for _ in 0..5_000 {
        h.advance_ms(1);
        if recorded(disk).1 > lcp + 1 {
            return;
        }
    }
    panic!("no checkpoint round recorded");
}

/// A TRUNCATE that was answered stays done across a crash: no row of
/// before it comes back (from the REDO log or from a checkpoint of the old
/// rows), and rows written after it are there up to the recovered GCI.
/// Again after a second crash, with checkpoints taken after the TRUNCATE.
#[test]
fn an_answered_truncate_survives_crashes() {
    let (mut checkpoints_replaced, mut skipped) = (0, 0);
    for seed in 0..8u64 {
        let mut rng = Rng::new(seed ^ 0x7A);
        let disk = crashing_disk(seed, &mut rng);
        let (mut h, _) = boot(&disk);
        let t = create(&mut h).id;
        let mut txn = 0;
        insert(&mut h, t, 0..200, &mut txn, &mut rng);
        if seed.is_multiple_of(2) {
            await_checkpoint(&mut h, &disk);
        }
        insert(&mut h, t, 200..260, &mut txn, &mut rng);
        assert_eq!(dict(&mut h, 2, DictOp::TruncateTable { name: "kv".into() }), DictResult::Done);
        assert!(rows(&mut h, t, 1).is_empty());
        let after = insert(&mut h, t, 1000..1000 + rng.range(0, 40) as i64, &mut txn, &mut rng);
        disk.lock().unwrap().crash();
        let (mut h, report) = boot(&disk);
        checkpoints_replaced += report.lcp_reset_partitions;
        skipped += report.redo_skipped;
        let got: Vec<i64> = rows(&mut h, t, 2).into_keys().collect();
        assert_eq!(got, keys_upto(&after, report.gci), "seed {seed}: after the crash ({report:?})");

        // Checkpoints of the new life, more writes, another crash.
        let after2 = insert(&mut h, t, 2000..2050, &mut txn, &mut rng);
        await_checkpoint(&mut h, &disk);
        disk.lock().unwrap().crash();
        let (mut h, report) = boot(&disk);
        let mut want = keys_upto(&after, u64::MAX);
        want.retain(|k| got.contains(k));
        want.extend(keys_upto(&after2, report.gci));
        let got2: Vec<i64> = rows(&mut h, t, 3).into_keys().collect();
        assert_eq!(got2, want, "seed {seed}: after the second crash");
        for (k, r) in rows(&mut h, t, 4) {
            assert_eq!(r, vec![Value::Int(k), Value::Int(k * 10)]);
        }
    }
    // The restarts did meet checkpoints and REDO records of the old rows.
    assert!(checkpoints_replaced > 0 && skipped > 0, "{checkpoints_replaced} {skipped}");
}

/// A crash at a random moment after a TRUNCATE was sent: the table is
/// either as before it (every row committed up to the recovered GCI) or
/// empty, never a mix; once answered, always empty.
#[test]
fn a_truncate_interrupted_by_a_crash_is_all_or_nothing() {
    let (mut old_seen, mut new_seen) = (0, 0);
    for seed in 0..16u64 {
        let mut rng = Rng::new(seed ^ 0x7B);
        let disk = crashing_disk(seed, &mut rng);
        let (mut h, _) = boot(&disk);
        let t = create(&mut h).id;
        let mut txn = 0;
        let before = insert(&mut h, t, 0..120, &mut txn, &mut rng);
        if seed.is_multiple_of(3) {
            await_checkpoint(&mut h, &disk);
        }
        h.send(100, Signal::DictReq(Box::new(DictReq { req_id: 9, op: DictOp::TruncateTable { name: "kv".into() } })));
        let answered = dict_wait(&mut h, 9, rng.range(0, 25)).is_some();
        disk.lock().unwrap().crash();
        let (mut h, report) = boot(&disk);
        let got: Vec<i64> = rows(&mut h, t, 2).into_keys().collect();
        if got.is_empty() {
            new_seen += 1;
        } else {
            assert!(!answered, "seed {seed}: rows from before an answered TRUNCATE");
            assert_eq!(got, keys_upto(&before, report.gci), "seed {seed}: the old table, whole");
            old_seen += 1;
        }
    }
    assert!(old_seen > 0 && new_seen > 0, "both outcomes seen: old {old_seen}, new {new_seen}");
}

/// ALTER TABLE that rebuilds the rows (a column added in front with a
/// default, a type widened): after a crash every row is there in the new
/// layout, with rows written after the ALTER up to the recovered GCI; a
/// crash during the ALTER leaves the old or the new table, whole.
#[test]
fn a_rebuilding_alter_survives_crashes() {
    let (mut old_seen, mut new_seen) = (0, 0);
    for seed in 0..10u64 {
        let mut rng = Rng::new(seed ^ 0x7C);
        let disk = crashing_disk(seed, &mut rng);
        let (mut h, _) = boot(&disk);
        let d = create(&mut h);
        let t = d.id;
        let mut txn = 0;
        let before = insert(&mut h, t, 0..150, &mut txn, &mut rng);
        if seed.is_multiple_of(2) {
            await_checkpoint(&mut h, &disk);
        }
        // (w INT NOT NULL DEFAULT 7, k, v): every column moves one to the
        // right, so every row is rebuilt.
        let mut def = d.clone();
        def.columns = vec![
            ColumnDef::new("w", ColumnType::Int { unsigned: false }).not_null().default_value(Value::Int(7)),
            d.columns[0].clone(),
            d.columns[1].clone(),
        ];
        def.primary_key = vec![1];
        for ix in &mut def.indexes {
            ix.columns = ix.columns.iter().map(|c| c + 1).collect();
        }
        let sources = vec![ColumnSource::Value(Value::Int(7)), ColumnSource::Old(0), ColumnSource::Old(1)];
        let op = DictOp::AlterTable { table: "kv".into(), def, sources, expect_version: d.version };
        let interrupted = seed >= 5;
        let mut after = BTreeMap::new();
        if interrupted {
            h.send(100, Signal::DictReq(Box::new(DictReq { req_id: 9, op })));
            dict_wait(&mut h, 9, rng.range(0, 25));
        } else {
            let new = table(&mut h, 9, op);
            assert_eq!(new.version, d.version + 1);
            let ops =
                |k: i64| vec![KeyOp::insert(t, vec![Value::Int(k)], vec![(0, Value::Int(k)), (2, Value::Int(k * 10))])];
            for k in 500..520 {
                txn += 1;
                let c = h.key(100, txn, ExecType::Commit, ops(k)).expect("commit");
                after.insert(k, c.gci);
                h.advance_ms(1);
            }
        }
        disk.lock().unwrap().crash();
        let (mut h, report) = boot(&disk);
        let got = rows(&mut h, t, 2);
        let new_layout = got.values().next().is_some_and(|r| r.len() == 3);
        let want_old = keys_upto(&before, report.gci);
        if new_layout {
            new_seen += 1;
            // Every row the ALTER rebuilt is there (its reset's GCI is not
            // below any of theirs), and rows written after it up to the
            // recovered GCI.
            let mut want = keys_upto(&before, u64::MAX);
            want.extend(keys_upto(&after, report.gci));
            assert_eq!(got.keys().copied().collect::<Vec<_>>(), want, "seed {seed}: new layout");
            for (k, r) in &got {
                let w = if *k >= 500 { *k } else { 7 };
                assert_eq!(r, &vec![Value::Int(w), Value::Int(*k), Value::Int(k * 10)], "seed {seed}");
            }
        } else {
            assert!(interrupted, "seed {seed}: an answered ALTER undone by a crash");
            old_seen += 1;
            assert_eq!(got.keys().copied().collect::<Vec<_>>(), want_old, "seed {seed}: old layout");
            for (k, r) in &got {
                assert_eq!(r, &vec![Value::Int(*k), Value::Int(k * 10)], "seed {seed}");
            }
        }
    }
    assert!(new_seen > 0, "old {old_seen}, new {new_seen}");
}

/// Writes leave room in the REDO log for a TRUNCATE's reset record: when
/// the log is too full for one more write (410), a TRUNCATE still finds
/// room. (In a cluster an LQH that refused a TRUNCATE others had made
/// would keep rows its replicas dropped: it cannot be undone.)
#[test]
fn a_truncate_finds_room_in_a_redo_log_too_full_for_writes() {
    // Checkpoints rare: the log's room changes only with the writes here.
    let knobs = Knobs { gcp_interval_ms: 2_000, lcp_min_gap_ms: 60_000, ..knobs() };
    let disk = SimDisk::shared(Rng::new(7), DiskFaults::none());
    let (mut s, _) = build_durable(DATA_NODE, None, &knobs, &SimDataDir(disk.clone())).expect("boot");
    s.add_block(block::FS, 0, Box::new(SimFsBlock::new(disk.clone())));
    let mut h = Harness::with_scheduler(s);
    let wide = table(&mut h, 1, DictOp::CreateTable(table_def("wide", 1, &[("v", ColumnType::Blob)])));
    let kv =
        table(&mut h, 2, DictOp::CreateTable(table_def("kv", 1, &[("v", ColumnType::BigInt { unsigned: false })])));
    h.key(100, 1, ExecType::Commit, vec![KeyOp::insert(kv.id, vec![Value::Int(1)], vec![(1, Value::Int(10))])])
        .expect("a row to truncate");
    // One open transaction's writes reserve the log's room, 4 KB at a
    // time, until another transaction's write is refused for want of it.
    let mut refused = None;
    for i in 0..4_000i64 {
        let blob = vec![(KeyOp::insert(wide.id, vec![Value::Int(i)], vec![(1, Value::Bytes(vec![7; 4096]))]))];
        h.key(100, 2, ExecType::NoCommit, blob).unwrap_or_else(|r| panic!("open transaction's write {i}: {r:?}"));
        let probe = vec![KeyOp::insert(kv.id, vec![Value::Int(1_000 + i)], vec![(1, Value::Int(0))])];
        if let Err(r) = h.key(100, 3 + i as u64, ExecType::Commit, probe) {
            refused = Some(r.error);
            break;
        }
    }
    let refused = refused.expect("the REDO log never refused a write");
    assert_eq!(refused.code, norr_signals::ErrorCode::RedoLogFull, "{refused:?}");
    match dict(&mut h, 3, DictOp::TruncateTable { name: "kv".into() }) {
        DictResult::Done | DictResult::Table(_) => {}
        other => panic!("TRUNCATE answered {other:?}"),
    }
    assert!(rows(&mut h, kv.id, 1).is_empty(), "TRUNCATE left rows");
    h.key(100, 2, ExecType::Rollback, vec![]).expect("rollback");
}

fn boot_armed(disk: &SharedDisk, crash: &norr_durability::CrashPoints) -> (Harness, RestoreReport) {
    let (mut s, report) =
        norr_node::durable::build_durable_with(DATA_NODE, None, &knobs(), &SimDataDir(disk.clone()), crash)
            .unwrap_or_else(|e| panic!("restart: {e}"));
    s.add_block(block::FS, 0, Box::new(SimFsBlock::new(disk.clone())));
    (Harness::with_scheduler(s), report)
}

/// The definition of `name`, None if there is no such table.
fn get_def(h: &mut Harness, req_id: u32, name: &str) -> Option<TableDef> {
    h.send(100, Signal::DictReq(Box::new(DictReq { req_id, op: DictOp::GetTable { name: name.into() } })));
    for _ in 0..5_000 {
        for e in h.advance_ms(1) {
            match e.signal {
                Signal::DictConf(c) if c.req_id == req_id => match c.result {
                    DictResult::Table(d) => return Some(d),
                    other => panic!("get table answered {other:?}"),
                },
                Signal::DictRef(r) if r.req_id == req_id => return None,
                _ => {}
            }
        }
    }
    panic!("get table not answered");
}

/// Crash the node at each of DICT's named crash points in turn, in each
/// kind of DDL: after the restart the DDL is wholly done or wholly undone
/// (the table's definition and rows are the old ones or the new ones, never
/// a mix), wholly done if it was answered, and the next DDL works.
#[test]
fn a_crash_at_every_dict_point_leaves_each_ddl_whole() {
    use norr_durability::crash::points;
    use norr_signals::schema::{IndexDef, IndexKind};
    let names = [
        points::DICT_PENDING_BEFORE_STORAGE,
        points::DICT_MADE_BEFORE_SCHEMA_WRITE,
        points::SCHEMA_AFTER_TMP_BEFORE_RENAME,
        points::DICT_WRITTEN_BEFORE_ANSWER,
    ];
    let (mut fired, mut done, mut undone) = (0, 0, 0);
    for (i, name) in names.iter().enumerate() {
        for kind in 0..5u64 {
            let seed = 10 * i as u64 + kind;
            let mut rng = Rng::new(seed ^ 0xD1C7);
            let disk = SimDisk::shared(rng.fork(), DiskFaults { latency_max_ns: 200_000, ..DiskFaults::none() });
            let (mut h, _) = boot(&disk);
            let d = create(&mut h);
            let t = d.id;
            let mut txn = 0;
            let before = insert(&mut h, t, 0..80, &mut txn, &mut rng);
            await_checkpoint(&mut h, &disk);
            let (durable_gci, _) = recorded(&disk);
            drop(h);
            // A restart with the point armed; nothing unsynced is lost.
            let mut crash = norr_durability::CrashPoints::off();
            crash.arm(name, 0).unwrap();
            let (mut h, _) = boot_armed(&disk, &crash);
            let op = match kind {
                0 => DictOp::CreateTable(table_def("t2", 4, &[("v", ColumnType::BigInt { unsigned: false })])),
                1 => DictOp::TruncateTable { name: "kv".into() },
                2 => DictOp::DropTable { name: "kv".into() },
                3 => DictOp::CreateIndex {
                    table: "kv".into(),
                    index: IndexDef {
                        id: 0,
                        name: "iv".into(),
                        columns: vec![1],
                        unique: false,
                        kind: IndexKind::Ordered,
                    },
                },
                _ => {
                    let mut def = d.clone();
                    def.columns.insert(
                        0,
                        ColumnDef::new("w", ColumnType::Int { unsigned: false }).default_value(Value::Int(7)),
                    );
                    def.primary_key = vec![1];
                    for ix in &mut def.indexes {
                        ix.columns = ix.columns.iter().map(|c| c + 1).collect();
                    }
                    let sources = vec![ColumnSource::Value(Value::Int(7)), ColumnSource::Old(0), ColumnSource::Old(1)];
                    DictOp::AlterTable { table: "kv".into(), def, sources, expect_version: d.version }
                }
            };
            let what = format!("{name}, DDL {kind}");
            let answered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| dict_within(&mut h, 9, op, 5_000)));
            let answered = match answered {
                Ok(a) => a.is_some(),
                Err(p) => {
                    let msg = p.downcast_ref::<String>().cloned().unwrap_or_default();
                    assert!(msg.contains("crash point reached"), "{what}: {msg}");
                    fired += 1;
                    false
                }
            };
            drop(h);
            disk.lock().unwrap().crash();
            let (mut h, report) = boot(&disk);
            assert!(report.gci >= durable_gci, "{what}: restarted to GCI {} below {durable_gci}", report.gci);
            let kv = get_def(&mut h, 20, "kv");
            let old_rows: Vec<i64> = keys_upto(&before, u64::MAX);
            let new = match kind {
                0 => get_def(&mut h, 21, "t2").is_some(),
                1 => {
                    let got: Vec<i64> = rows(&mut h, t, 2).into_keys().collect();
                    assert!(got.is_empty() || got == old_rows, "{what}: rows {got:?}");
                    got.is_empty()
                }
                2 => kv.is_none(),
                3 => {
                    let kv = kv.clone().expect("kv kept");
                    let got: Vec<i64> = rows(&mut h, t, 2).into_keys().collect();
                    assert_eq!(got, old_rows, "{what}: rows");
                    kv.indexes.iter().any(|ix| ix.name == "iv")
                }
                _ => {
                    let kv = kv.clone().expect("kv kept");
                    let altered = kv.columns.len() == 3;
                    for (k, r) in rows(&mut h, t, 2) {
                        let want = if altered {
                            vec![Value::Int(7), Value::Int(k), Value::Int(k * 10)]
                        } else {
                            vec![Value::Int(k), Value::Int(k * 10)]
                        };
                        assert_eq!(r, want, "{what}: row {k} (altered: {altered})");
                    }
                    altered
                }
            };
            if kind != 1 && kind != 2 {
                let got: Vec<i64> = rows(&mut h, t, 3).into_keys().collect();
                assert_eq!(got, old_rows, "{what}: rows of kv");
            }
            assert!(new || !answered, "{what}: an answered DDL was undone");
            if new {
                done += 1;
            } else {
                undone += 1;
            }
            // The schema goes on: another table can be made and written.
            let next = table(
                &mut h,
                30,
                DictOp::CreateTable(table_def("after", 2, &[("v", ColumnType::BigInt { unsigned: false })])),
            );
            assert!(next.id > t, "{what}: table id {} handed out again", next.id);
            h.key(
                100,
                99,
                ExecType::Commit,
                vec![KeyOp::insert(next.id, vec![Value::Int(1)], vec![(1, Value::Int(1))])],
            )
            .unwrap_or_else(|r| panic!("{what}: write to a new table: {r:?}"));
        }
    }
    assert_eq!(fired, names.len() * 5, "every point fired in every DDL");
    assert!(done > 0 && undone > 0, "both ends seen: done {done}, undone {undone}");
}
