//! Local checkpoints on the simulator's disk, with the smallest REDO log
//! the knobs allow (2 files x 4 MiB per part): sustained inserts and
//! updates write many times the log's size and never get 410 (the
//! checkpoints free the log's tail), and after random crashes, including
//! at every named checkpoint crash point, the node restarts from its
//! checkpoints and REDO to exactly the transactions of GCI <= the
//! recovered GCI.

use norr_durability::crash::points;
use norr_durability::sysfile::{SysFileStore, PATHS};
use norr_durability::CrashPoints;
use norr_kernel::Scheduler;
use norr_knobs::Knobs;
use norr_node::durable::{build_durable_with, DataDir, RestoreReport};
use norr_signals::ops::{KeyOp, ScanSpec};
use norr_signals::value::{ColumnType, Value};
use norr_signals::{block, DictConf, DictOp, DictReq, DictResult, ExecType, Signal};
use norr_sim::disk::{CrashMode, DiskFaults, SharedDisk, SimDisk, SimFsBlock};
use norr_sim::rng::Rng;
use norr_txn::testkit::{table_def, Harness, DATA_NODE};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

struct SimDir(SharedDisk);

impl DataDir for SimDir {
    fn read(&self, path: &str) -> Result<Option<Vec<u8>>, String> {
        Ok(self.0.lock().unwrap().contents(path).map(|b| b.to_vec()))
    }

    fn read_at(&self, path: &str, offset: u64, len: u32) -> Result<Vec<u8>, String> {
        let d = self.0.lock().unwrap();
        let mut out = vec![0u8; len as usize];
        if let Some(b) = d.contents(path) {
            let s = (offset as usize).min(b.len());
            let e = (offset as usize + len as usize).min(b.len());
            out[..e - s].copy_from_slice(&b[s..e]);
        }
        Ok(out)
    }

    fn remove(&self, path: &str) -> Result<(), String> {
        self.0.lock().unwrap().remove_file(path);
        Ok(())
    }

    fn list(&self, dir: &str) -> Result<Vec<String>, String> {
        let prefix = format!("{dir}/");
        let d = self.0.lock().unwrap();
        let mut names: Vec<String> = d
            .file_names()
            .into_iter()
            .filter_map(|n| n.strip_prefix(&prefix).map(|r| r.split('/').next().unwrap_or(r).to_string()))
            .collect();
        names.dedup();
        Ok(names)
    }
}

const LOG_BYTES: u64 = 2 * (4 << 20);

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

fn boot(disk: &SharedDisk, crash: &CrashPoints) -> (Harness, RestoreReport) {
    let (mut s, report): (Scheduler<Signal>, _) =
        build_durable_with(DATA_NODE, None, &knobs(), &SimDir(disk.clone()), crash)
            .unwrap_or_else(|e| panic!("restart: {e}"));
    s.add_block(block::FS, 0, Box::new(SimFsBlock::new(disk.clone())));
    (Harness::with_scheduler(s), report)
}

fn recorded(disk: &SharedDisk) -> (u64, u64) {
    let d = disk.lock().unwrap();
    let l = SysFileStore::load(d.durable(PATHS[0]), d.durable(PATHS[1])).expect("a valid copy");
    l.sysfile.map_or((0, 0), |s| (s.last_complete_gci, s.last_lcp_id))
}

fn create_table(h: &mut Harness) -> u32 {
    let def = table_def(
        "kv",
        4,
        &[("v", ColumnType::BigInt { unsigned: false }), ("pad", ColumnType::Varbinary { len: 4000 })],
    );
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

/// key -> (v, pad length, pad byte)
type State = BTreeMap<i64, (i64, usize, u8)>;

/// A committed transaction: its GCI and the rows it wrote.
struct Txn {
    gci: u64,
    writes: Vec<(i64, i64, usize, u8)>,
}

fn expected(log: &[Txn], gci: u64) -> State {
    let mut s = State::new();
    for t in log.iter().filter(|t| t.gci <= gci) {
        for &(k, v, n, b) in &t.writes {
            s.insert(k, (v, n, b));
        }
    }
    s
}

fn read_state(h: &mut Harness, t: u32, scan_id: u64) -> State {
    let (rows, _) = h.scan_all(100, scan_id, true, ScanSpec::full(t)).unwrap();
    let mut s = State::new();
    for r in rows {
        let (Value::Int(k), Value::Int(v), Value::Bytes(pad)) = (&r[0], &r[1], &r[2]) else { panic!("{r:?}") };
        assert!(pad.iter().all(|&b| b == pad[0]), "a torn row {k}");
        s.insert(*k, (*v, pad.len(), pad[0]));
    }
    s
}

/// The workload: inserts of new keys and updates of old ones, 2 rows per
/// transaction, rows of 1-3 KB. Returns the bytes of row images written.
struct Load {
    log: Vec<Txn>,
    /// The writes of a transaction a crash cut off before its answer.
    inflight: Option<Vec<(i64, i64, usize, u8)>>,
    next_key: i64,
    next_txn: u64,
    bytes: u64,
}

impl Load {
    fn step(&mut self, h: &mut Harness, t: u32, rng: &mut Rng) {
        let mut ops = Vec::new();
        let mut writes = Vec::new();
        for _ in 0..2 {
            let k = if self.next_key < 200 || rng.chance(0.2) {
                self.next_key += 1;
                self.next_key - 1
            } else {
                rng.range(0, self.next_key as u64) as i64
            };
            if writes.iter().any(|w: &(i64, i64, usize, u8)| w.0 == k) {
                continue;
            }
            let v = self.next_txn as i64;
            let n = rng.range(1000, 3000) as usize;
            let b = (v % 251) as u8;
            self.bytes += n as u64 + 16;
            ops.push(KeyOp::write(t, vec![Value::Int(k)], vec![(1, Value::Int(v)), (2, Value::Bytes(vec![b; n]))]));
            writes.push((k, v, n, b));
        }
        self.next_txn += 1;
        self.inflight = Some(writes.clone());
        let r = h.key(100, self.next_txn, ExecType::Commit, ops);
        self.inflight = None;
        match r {
            Ok(c) => self.log.push(Txn { gci: c.gci, writes }),
            Err(e) => panic!("transaction {} refused: {e:?}", self.next_txn),
        }
    }

    /// Forget what a restart lost.
    fn restarted(&mut self, gci: u64) {
        self.log.retain(|t| t.gci <= gci);
    }
}

fn faults(rng: &mut Rng, seed: u64) -> DiskFaults {
    DiskFaults {
        latency_min_ns: 20_000,
        latency_max_ns: 20_000 + rng.range(0, 1_000_000),
        crash_mode: if seed.is_multiple_of(2) { CrashMode::Prefix } else { CrashMode::Subset },
        torn_write_p: 0.5,
        ..DiskFaults::none()
    }
}

fn check_restart(h: &mut Harness, t: u32, load: &mut Load, report: &RestoreReport, reported: u64, what: &str) {
    assert!(report.gci >= reported, "{what}: recovered {} < reported {reported}", report.gci);
    let got = read_state(h, t, 900_000 + load.next_txn);
    let mut want = expected(&load.log, report.gci);
    if let Some(writes) = load.inflight.take() {
        // Cut off by the crash: it committed (and is whole) or it did not.
        let mut with = want.clone();
        for &(k, v, n, b) in &writes {
            with.insert(k, (v, n, b));
        }
        if got == with && got != want {
            load.log.push(Txn { gci: report.gci, writes });
            want = with;
        }
    }
    assert_eq!(got.len(), want.len(), "{what}: row count at GCI {} ({report})", report.gci);
    assert!(got == want, "{what}: rows differ at GCI {} ({report})", report.gci);
}

#[test]
fn sustained_writes_of_many_log_sizes_never_fill_the_log_and_restarts_recover_exactly() {
    let mut lcp_restores = 0;
    for seed in 0..3u64 {
        let mut rng = Rng::new(1000 + seed);
        let disk = SimDisk::shared(rng.fork(), faults(&mut rng, seed));
        let off = CrashPoints::off();
        let (mut h, report) = boot(&disk, &off);
        assert_eq!(report.gci, 0);
        let t = create_table(&mut h);
        let mut load = Load { log: Vec::new(), inflight: None, next_key: 0, next_txn: 0, bytes: 0 };
        let target = 5 * LOG_BYTES;
        let mut crashes = 0;
        while load.bytes < target {
            for _ in 0..rng.range(200, 2000) {
                load.step(&mut h, t, &mut rng);
                if rng.chance(0.3) {
                    h.advance_ms(1);
                }
            }
            let (reported, _) = recorded(&disk);
            drop(h);
            disk.lock().unwrap().crash();
            crashes += 1;
            let (h2, report) = boot(&disk, &off);
            h = h2;
            lcp_restores += usize::from(report.lcp_partitions > 0);
            check_restart(&mut h, t, &mut load, &report, reported, &format!("seed {seed} crash {crashes}"));
            load.restarted(report.gci);
        }
        let (_, lcp_id) = recorded(&disk);
        assert!(lcp_id >= 3, "seed {seed}: only {lcp_id} checkpoint rounds recorded");
        // Old checkpoint files are deleted: a chain is at most lcp_max_chain long.
        let lcp_files = disk.lock().unwrap().file_names().iter().filter(|n| n.starts_with("lcp/")).count();
        assert!(lcp_files <= 4 * 2 * (knobs().lcp_max_chain as usize + 2), "seed {seed}: {lcp_files} LCP files kept");
    }
    assert!(lcp_restores >= 3, "restarts restored from checkpoints {lcp_restores} times");
}

/// Crash at each checkpoint crash point in turn (and at the REDO and
/// system file points between them); every restart recovers exactly.
#[test]
fn crash_at_every_checkpoint_point_recovers_exactly() {
    let names = [
        points::LCP_AFTER_DATA_BEFORE_SYNC,
        points::LCP_AFTER_DATA_SYNC_BEFORE_CONTROL,
        points::LCP_AFTER_CONTROL_BEFORE_DELETE,
        points::LCP_ROUND_BEFORE_SYSFILE,
        points::LCP_RECORDED_BEFORE_RELEASE,
        points::SYSFILE_BEFORE_WRITE,
        points::SYSFILE_AFTER_WRITE,
        points::REDO_AFTER_WRITE_BEFORE_SYNC,
        points::REDO_AFTER_SYNC_BEFORE_CONF,
    ];
    let mut rng = Rng::new(77);
    let disk = SimDisk::shared(rng.fork(), faults(&mut rng, 1));
    let off = CrashPoints::off();
    let (mut h, _) = boot(&disk, &off);
    let t = create_table(&mut h);
    let mut load = Load { log: Vec::new(), inflight: None, next_key: 0, next_txn: 0, bytes: 0 };
    let mut fired = 0;
    for (i, name) in names.iter().cycle().take(2 * names.len()).enumerate() {
        let mut crash = CrashPoints::off();
        crash.arm(name, rng.range(0, 3) as u32).unwrap();
        let (reported_before, _) = recorded(&disk);
        drop(h);
        // A clean restart to arm the point (the unsynced tail is lost too).
        disk.lock().unwrap().crash();
        let (h2, report) = boot(&disk, &crash);
        h = h2;
        check_restart(&mut h, t, &mut load, &report, reported_before, &format!("before arming {name}"));
        load.restarted(report.gci);
        let hit = catch_unwind(AssertUnwindSafe(|| {
            for _ in 0..4000 {
                load.step(&mut h, t, &mut rng);
                if rng.chance(0.5) {
                    h.advance_ms(1);
                }
            }
        }));
        let (reported, _) = recorded(&disk);
        match hit {
            Ok(()) => {}
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                assert!(msg.contains("crash point reached"), "round {i}: {msg}");
                fired += 1;
                // The transaction in flight may or may not have committed:
                // drop it from the model unless the restart shows it.
            }
        }
        // The node died: the harness is gone with its memory.
        let (h2, report) = {
            drop(std::mem::replace(&mut h, Harness::new(knobs())));
            disk.lock().unwrap().crash();
            boot(&disk, &off)
        };
        h = h2;
        // A transaction cut by the crash has no answer: it is in the log
        // only if it committed; it never was in `load.log`.
        check_restart(&mut h, t, &mut load, &report, reported, &format!("after {name}"));
        load.restarted(report.gci);
    }
    assert!(fired >= names.len(), "only {fired} crash points fired");
}
