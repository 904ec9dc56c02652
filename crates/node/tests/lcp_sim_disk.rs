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
use norr_node::durable::{build_durable_with, RestoreReport};
use norr_signals::ops::{KeyOp, ScanSpec};
use norr_signals::value::{ColumnType, Value};
use norr_signals::{block, DictConf, DictOp, DictReq, DictResult, ExecType, Signal};
use norr_sim::disk::{CrashMode, DiskFaults, SharedDisk, SimDataDir, SimDisk, SimFsBlock};
use norr_sim::rng::Rng;
use norr_txn::testkit::{table_def, Harness, DATA_NODE};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

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
    boot_with(disk, crash, &knobs())
}

fn boot_with(disk: &SharedDisk, crash: &CrashPoints, knobs: &Knobs) -> (Harness, RestoreReport) {
    let (mut s, report): (Scheduler<Signal>, _) =
        build_durable_with(DATA_NODE, None, knobs, &SimDataDir(disk.clone()), crash)
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
    create_table_with(h, ColumnType::Varbinary { len: 4000 })
}

fn create_table_with(h: &mut Harness, pad: ColumnType) -> u32 {
    let def = table_def("kv", 4, &[("v", ColumnType::BigInt { unsigned: false }), ("pad", pad)]);
    h.send(100, Signal::DictReq(Box::new(DictReq { req_id: 1, op: DictOp::CreateTable(def) })));
    for _ in 0..1000 {
        for e in h.advance_ms(1) {
            match e.signal {
                Signal::DictConf(c) => {
                    let DictConf { result: DictResult::Table(d), .. } = *c else { panic!("{c:?}") };
                    return d.id;
                }
                Signal::DictRef(r) => panic!("CREATE TABLE refused: {r:?}"),
                _ => {}
            }
        }
    }
    panic!("CREATE TABLE not answered");
}

/// key -> (v, pad length, pad byte)
type State = BTreeMap<i64, (i64, usize, u8)>;

/// A row write: the key and its new value (None: deleted).
type Write = (i64, Option<(i64, usize, u8)>);

/// A committed transaction: its GCI and the rows it wrote.
struct Txn {
    gci: u64,
    writes: Vec<Write>,
}

fn apply(s: &mut State, writes: &[Write]) {
    for &(k, w) in writes {
        match w {
            Some(row) => s.insert(k, row),
            None => s.remove(&k),
        };
    }
}

fn expected(log: &[Txn], gci: u64) -> State {
    let mut s = State::new();
    for t in log.iter().filter(|t| t.gci <= gci) {
        apply(&mut s, &t.writes);
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

/// The workload: inserts of new keys, updates and deletes of old ones, 2
/// rows per transaction, rows of 1-3 KB.
struct Load {
    log: Vec<Txn>,
    /// The writes of a transaction a crash cut off before its answer.
    inflight: Option<Vec<Write>>,
    /// Keys that exist (committed).
    live: BTreeMap<i64, ()>,
    next_key: i64,
    next_txn: u64,
    /// Bytes of row images written.
    bytes: u64,
}

impl Load {
    fn new() -> Load {
        Load { log: Vec::new(), inflight: None, live: BTreeMap::new(), next_key: 0, next_txn: 0, bytes: 0 }
    }

    fn step(&mut self, h: &mut Harness, t: u32, rng: &mut Rng) {
        let mut ops = Vec::new();
        let mut writes: Vec<Write> = Vec::new();
        for _ in 0..2 {
            let old = (self.live.len() >= 200 && !rng.chance(0.2))
                .then(|| *self.live.keys().nth(rng.below(self.live.len() as u64) as usize).unwrap());
            let k = old.unwrap_or_else(|| {
                self.next_key += 1;
                self.next_key - 1
            });
            if writes.iter().any(|w| w.0 == k) {
                continue;
            }
            if old.is_some() && rng.chance(0.15) {
                ops.push(KeyOp::delete(t, vec![Value::Int(k)]));
                writes.push((k, None));
                continue;
            }
            let v = self.next_txn as i64;
            let n = rng.range(1000, 3000) as usize;
            let b = (v % 251) as u8;
            self.bytes += n as u64 + 16;
            ops.push(KeyOp::write(t, vec![Value::Int(k)], vec![(1, Value::Int(v)), (2, Value::Bytes(vec![b; n]))]));
            writes.push((k, Some((v, n, b))));
        }
        self.next_txn += 1;
        self.inflight = Some(writes.clone());
        let r = h.key(100, self.next_txn, ExecType::Commit, ops);
        self.inflight = None;
        match r {
            Ok(c) => {
                for &(k, w) in &writes {
                    match w {
                        Some(_) => self.live.insert(k, ()),
                        None => self.live.remove(&k),
                    };
                }
                self.log.push(Txn { gci: c.gci, writes })
            }
            Err(e) => panic!("transaction {} refused: {e:?}", self.next_txn),
        }
    }

    /// Forget what a restart lost.
    fn restarted(&mut self, gci: u64) {
        self.log.retain(|t| t.gci <= gci);
        self.live = expected(&self.log, gci).keys().map(|&k| (k, ())).collect();
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
        apply(&mut with, &writes);
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
        let mut load = Load::new();
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
    let mut load = Load::new();
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

/// The newest control file of a partition on disk.
fn newest_control(disk: &SharedDisk, t: u32, p: u32) -> Option<norr_durability::lcp::LcpControl> {
    let d = disk.lock().unwrap();
    let dir = norr_durability::lcp::partition_dir(t, p);
    let id = d
        .file_names()
        .iter()
        .filter_map(|n| n.strip_prefix(&format!("{dir}/"))?.strip_suffix(".ctl")?.parse::<u64>().ok())
        .max()?;
    let path = format!("{dir}/{id}.ctl");
    Some(norr_durability::lcp::LcpControl::decode(d.contents(&path).unwrap(), &path).unwrap())
}

/// What one partition's checkpoints look like as the load changes: a first
/// full one, none while nothing changes, then partial ones (a window of
/// parts in full plus the changed rows) chained to the earlier ones, with
/// tombstones for deletes; the scan runs in slices between transactions.
#[test]
fn checkpoints_follow_the_changes() {
    let mut rng = Rng::new(5);
    let disk = SimDisk::shared(rng.fork(), DiskFaults::none());
    // Wide fixed-size rows (~110 a page), enough of them, and the longest
    // chain, so that a partition spans more pages (parts) than the
    // smallest window.
    const PAD: usize = 255;
    let knobs = Knobs { lcp_max_chain: 64, ..knobs() };
    let (mut h, _) = boot_with(&disk, &CrashPoints::off(), &knobs);
    let t = create_table_with(&mut h, ColumnType::Binary { len: PAD as u32 });
    let rows = 20_000i64;
    for i in 0..rows / 10 {
        let ops = (0..10)
            .map(|j| {
                KeyOp::insert(
                    t,
                    vec![Value::Int(10 * i + j)],
                    vec![(1, Value::Int(0)), (2, Value::Bytes(vec![1; PAD]))],
                )
            })
            .collect();
        h.key(100, 1 + i as u64, ExecType::Commit, ops).unwrap();
    }
    let settle = |h: &mut Harness| {
        let (_, id0) = recorded(&disk);
        for _ in 0..2000 {
            h.advance_ms(1);
            if recorded(&disk).1 >= id0 + 2 {
                return;
            }
        }
        panic!("checkpoint rounds stopped at {}", recorded(&disk).1);
    };
    settle(&mut h);
    // The first checkpoint of each partition is full: every row.
    let firsts: Vec<_> = (0..4).map(|p| newest_control(&disk, t, p).expect("a checkpoint")).collect();
    assert_eq!(firsts.iter().map(|c| c.data.rows).sum::<u64>(), rows as u64);
    assert!(firsts.iter().all(|c| c.full_parts.count == 2048 && c.chain.is_empty()));
    // Nothing changes: rounds go on, the partitions keep their checkpoints.
    let before = h.counters().get("lqh: lcp partitions unchanged").copied().unwrap_or(0);
    settle(&mut h);
    let after = h.counters().get("lqh: lcp partitions unchanged").copied().unwrap_or(0);
    assert!(after >= before + 4, "unchanged partitions {before} -> {after}");
    for (p, c) in firsts.iter().enumerate() {
        assert_eq!(newest_control(&disk, t, p as u32).as_ref(), Some(c), "partition {p} rewritten");
    }
    // A few updates and deletes: partial checkpoints chained to the first.
    // The first partial one also writes every row of a GCI at or above the
    // full one's start GCI (the loaded rows: its fuzzy scan may have missed
    // them); the second writes the window and the changed rows only.
    let mut txn = 10_000;
    let mut change = |h: &mut Harness, rng: &mut Rng| {
        for n in 0..20 {
            let k = rng.below(rows as u64) as i64;
            let op = if n % 4 == 0 {
                KeyOp::delete(t, vec![Value::Int(k)])
            } else {
                KeyOp::write(t, vec![Value::Int(k)], vec![(1, Value::Int(1)), (2, Value::Bytes(vec![2; PAD]))])
            };
            txn += 1;
            let _ = h.key(100, txn, ExecType::Commit, vec![op]);
        }
        settle(h);
    };
    change(&mut h, &mut rng);
    let mids: Vec<_> = (0..4).map(|p| newest_control(&disk, t, p).unwrap()).collect();
    change(&mut h, &mut rng);
    let mut partial = 0;
    for p in 0..4u32 {
        let c = newest_control(&disk, t, p).unwrap();
        if c.lcp_id == mids[p as usize].lcp_id || mids[p as usize].lcp_id == firsts[p as usize].lcp_id {
            continue;
        }
        partial += 1;
        assert!(c.full_parts.count < 2048, "partition {p}: {:?}", c.full_parts);
        assert_eq!(c.chain.first().map(|l| l.lcp_id), Some(firsts[p as usize].lcp_id), "partition {p}: {:?}", c.chain);
        assert!(c.data.rows < firsts[p as usize].data.rows / 2, "partition {p} wrote {} rows", c.data.rows);
        assert!(c.since_gci > 0 && c.since_gci <= c.start_gci);
    }
    assert!(partial >= 2, "{partial} partitions checkpointed partially");
    let tombs: u64 =
        (0..4).map(|p| newest_control(&disk, t, p).unwrap().data.tombstones + mids[p as usize].data.tombstones).sum();
    assert!(tombs >= 1, "deletes left no tombstones");
    // The scans ran in slices of at most lcp_slice_rows rows.
    let slices = h.counters().get("lqh: lcp slices").copied().unwrap_or(0);
    assert!(slices >= rows as u64 / knobs.lcp_slice_rows as u64, "{slices} slices");
    // And a restart reads them back: every row as written.
    let want = read_state(&mut h, t, 77);
    drop(h);
    disk.lock().unwrap().crash();
    let (mut h, report) = boot_with(&disk, &CrashPoints::off(), &knobs);
    assert_eq!(report.lcp_partitions, 4, "{report}");
    assert_eq!(read_state(&mut h, t, 78), want);
}

/// Checkpoint files under `lcp/<table>/` (durable or not).
fn table_files(disk: &SharedDisk, t: u32) -> Vec<String> {
    let prefix = format!("lcp/{t}/");
    disk.lock().unwrap().file_names().into_iter().filter(|n| n.starts_with(&prefix)).collect()
}

/// A dropped table's checkpoint files are deleted once the schema file
/// without it is on disk (no restart needs them then); another table's stay.
/// Files of a table the schema does not know (the node stopped before it
/// deleted them) are deleted at the next start.
#[test]
fn dropped_tables_checkpoint_files_are_deleted() {
    let mut rng = Rng::new(21);
    let disk = SimDisk::shared(rng.fork(), faults(&mut rng, 21));
    let (mut h, _) = boot(&disk, &CrashPoints::off());
    let kept = create_table(&mut h);
    let def = table_def("gone", 4, &[("v", ColumnType::BigInt { unsigned: false })]);
    h.send(100, Signal::DictReq(Box::new(DictReq { req_id: 2, op: DictOp::CreateTable(def) })));
    let mut dropped = None;
    for _ in 0..1000 {
        for e in h.advance_ms(1) {
            if let Signal::DictConf(c) = e.signal {
                let DictResult::Table(d) = c.result else { panic!("{c:?}") };
                dropped = Some(d.id);
            }
        }
        if dropped.is_some() {
            break;
        }
    }
    let dropped = dropped.expect("CREATE TABLE answered");
    let mut load = Load::new();
    for i in 0..300 {
        load.step(&mut h, kept, &mut rng);
        let ops = vec![KeyOp::write(dropped, vec![Value::Int(i)], vec![(1, Value::Int(i))])];
        h.key(100, 1_000_000 + i as u64, ExecType::Commit, ops).expect("commit");
        h.advance_ms(1);
    }
    // Until both tables have checkpoint files.
    for _ in 0..2000 {
        if !table_files(&disk, dropped).is_empty() && !table_files(&disk, kept).is_empty() {
            break;
        }
        h.advance_ms(1);
    }
    assert!(!table_files(&disk, dropped).is_empty(), "no checkpoint of the table to drop");
    h.send(100, Signal::DictReq(Box::new(DictReq { req_id: 3, op: DictOp::DropTable { name: "gone".into() } })));
    let mut answered = false;
    for _ in 0..200 {
        answered |= h.advance_ms(1).iter().any(|e| matches!(&e.signal, Signal::DictConf(c) if c.req_id == 3));
    }
    assert!(answered, "DROP TABLE answered");
    assert_eq!(table_files(&disk, dropped), Vec::<String>::new(), "a dropped table's checkpoint files remain");
    assert!(!table_files(&disk, kept).is_empty(), "the other table's checkpoint files went too");

    // A file of a table the schema does not know (a drop the node did not
    // finish deleting): gone after the next start, which restores the rest.
    let stray = format!("lcp/{}/0/7.data", dropped + 100);
    disk.lock().unwrap().put_durable(&stray, b"left over".to_vec());
    disk.lock().unwrap().crash();
    let (mut h, report) = boot(&disk, &CrashPoints::off());
    assert!(disk.lock().unwrap().contents(&stray).is_none(), "a stray table's checkpoint file survived a start");
    assert!(report.gci > 0);
    let got = read_state(&mut h, kept, 1);
    assert_eq!(got, expected(&load.log, report.gci));
}
