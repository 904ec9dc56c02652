//! A corrupt control file of a partition's newest recorded checkpoint: the
//! REDO log was released up to that round's start when it was recorded,
//! so the older checkpoint a restore could fall back to misses commits
//! that are nowhere else. A node on its own refuses to start and names the
//! file; a cluster node starts with files that are not a complete copy (it
//! copies everything from a live replica). Never a start with commits
//! silently missing.

use norr_durability::sysfile::{SysFileStore, PATHS};
use norr_kernel::Scheduler;
use norr_knobs::Knobs;
use norr_node::durable::{build_durable, RestoreReport};
use norr_node::Topology;
use norr_signals::ops::KeyOp;
use norr_signals::value::{ColumnType, Value};
use norr_signals::{block, DictConf, DictOp, DictReq, DictResult, ExecType, Signal};
use norr_sim::disk::{DiskFaults, SharedDisk, SimDataDir, SimDisk, SimFsBlock};
use norr_sim::rng::Rng;
use norr_txn::testkit::{table_def, Harness, DATA_NODE};

fn knobs() -> Knobs {
    Knobs {
        gcp_interval_ms: 5,
        redo_files: 2,
        redo_file_bytes: 4 << 20,
        lcp_min_gap_ms: 5,
        lcp_slice_rows: 64,
        lcp_slice_delay_us: 200,
        ..Knobs::default()
    }
}

fn boot(disk: &SharedDisk) -> Result<(Harness, RestoreReport), String> {
    let (mut s, report): (Scheduler<Signal>, _) = build_durable(DATA_NODE, None, &knobs(), &SimDataDir(disk.clone()))?;
    s.add_block(block::FS, 0, Box::new(SimFsBlock::new(disk.clone())));
    Ok((Harness::with_scheduler(s), report))
}

fn recorded_lcp(disk: &SharedDisk) -> u64 {
    let d = disk.lock().unwrap();
    let l = SysFileStore::load(d.durable(PATHS[0]), d.durable(PATHS[1])).expect("a valid copy");
    l.sysfile.map_or(0, |s| s.last_lcp_id)
}

fn create_table(h: &mut Harness) -> u32 {
    let def = table_def("kv", 2, &[("v", ColumnType::Varbinary { len: 2000 })]);
    h.send(100, Signal::DictReq(Box::new(DictReq { req_id: 1, op: DictOp::CreateTable(def) })));
    for _ in 0..1000 {
        for e in h.advance_ms(1) {
            if let Signal::DictConf(c) = e.signal {
                let DictConf { result: DictResult::Table(d), .. } = *c else { panic!("{c:?}") };
                return d.id;
            }
        }
    }
    panic!("CREATE TABLE not answered");
}

/// The newest recorded control file of a partition that has an older one
/// too (the fallback a restore would take), by path.
fn newest_control_with_an_older_one(disk: &SharedDisk, recorded: u64) -> Option<String> {
    let names = disk.lock().unwrap().file_names();
    let mut by_dir: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
    for n in names.iter().filter(|n| n.starts_with("lcp/") && n.ends_with(".ctl")) {
        let (dir, file) = n.rsplit_once('/').expect("a directory");
        let id: u64 = file.trim_end_matches(".ctl").parse().expect("an id");
        if id <= recorded {
            by_dir.entry(dir.to_string()).or_default().push(id);
        }
    }
    by_dir
        .into_iter()
        .find(|(_, ids)| ids.len() >= 2)
        .map(|(dir, ids)| format!("{dir}/{}.ctl", ids.iter().max().unwrap()))
}

/// Write a data node's files: updates over several recorded checkpoint
/// rounds (the REDO log released behind them). Returns the disk after a
/// crash, with the newest recorded control file of a partition corrupted,
/// and that file's path.
fn files_with_a_corrupt_newest_control(seed: u64) -> (SharedDisk, String) {
    let mut rng = Rng::new(seed);
    let disk = SimDisk::shared(rng.fork(), DiskFaults::none());
    let (mut h, _) = boot(&disk).expect("a new node starts");
    let t = create_table(&mut h);
    let pad = Value::Bytes(vec![7u8; 1500]);
    let start = recorded_lcp(&disk);
    let mut txn = 0u64;
    // Keep changing every row until several rounds were recorded.
    while recorded_lcp(&disk) < start + 6 {
        for _ in 0..20 {
            txn += 1;
            let k = rng.range(0, 400) as i64;
            let ops = vec![KeyOp::write(t, vec![Value::Int(k)], vec![(1, pad.clone())])];
            h.key(100, txn, ExecType::Commit, ops).expect("commit");
        }
        h.advance_ms(1);
    }
    // Let the last commits reach a complete GCI, then stop.
    h.advance_ms(20);
    drop(h);
    disk.lock().unwrap().crash();
    let recorded = recorded_lcp(&disk);
    let path = newest_control_with_an_older_one(&disk, recorded).expect("a partition with a chain of checkpoints");
    let mut d = disk.lock().unwrap();
    let mut bytes = d.durable(&path).expect("the control file").to_vec();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    d.put_durable(&path, bytes);
    drop(d);
    (disk, path)
}

#[test]
fn a_lone_node_refuses_to_fall_back_past_released_redo() {
    for seed in 0..3u64 {
        let (disk, path) = files_with_a_corrupt_newest_control(seed);
        let err = match boot(&disk) {
            Ok((_, report)) => panic!("seed {seed}: started with {path} corrupt: {report:?}"),
            Err(e) => e,
        };
        assert!(err.contains(&path), "seed {seed}: the error names {path}: {err}");
        assert!(err.contains("Refusing to start"), "{err}");
    }
}

#[test]
fn a_cluster_node_with_a_corrupt_newest_control_copies_instead() {
    let (disk, path) = files_with_a_corrupt_newest_control(11);
    // The same files, as node 1 of a cluster of two (one node group).
    let topo = Topology { node: DATA_NODE, node_groups: vec![vec![DATA_NODE, DATA_NODE + 1]] };
    let (_, report) = build_durable(DATA_NODE, Some(&topo), &knobs(), &SimDataDir(disk.clone()))
        .unwrap_or_else(|e| panic!("a cluster node starts (to copy): {e}"));
    assert!(!report.restorable, "the files are not a complete copy: {report:?}");
    assert!(report.warnings.iter().any(|w| w.contains(&path) && w.contains("live replica")), "{:?}", report.warnings);
}
