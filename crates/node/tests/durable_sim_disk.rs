//! A durable single data node (`durable::build_durable`) on the simulator's
//! disk: transactions with their GCIs, global checkpoints, crashes at
//! random moments (unsynced writes lost, kept in part or torn), restarts
//! from the disk. After every restart exactly the transactions whose GCI
//! is at most the recovered GCI are there, whole; and the recovered GCI is
//! at least the last one the node recorded as complete before the crash.

use norr_durability::sysfile::{SysFileStore, PATHS};
use norr_kernel::Scheduler;
use norr_knobs::Knobs;
use norr_node::durable::build_durable;
use norr_signals::ops::{KeyOp, ScanSpec};
use norr_signals::value::{ColumnType, Value};
use norr_signals::{block, DictConf, DictOp, DictReq, DictResult, ExecType, Signal, TcKeyReq, TxnOutcome};
use norr_sim::disk::{CrashMode, DiskFaults, SharedDisk, SimDataDir, SimDisk, SimFsBlock};
use norr_sim::rng::Rng;
use norr_txn::testkit::{table_def, Harness, DATA_NODE};
use std::collections::BTreeMap;

fn knobs() -> Knobs {
    Knobs { gcp_interval_ms: 5, redo_files: 2, redo_file_bytes: 4 << 20, ..Knobs::default() }
}

fn boot(disk: &SharedDisk) -> (Harness, u64) {
    let (mut s, report): (Scheduler<Signal>, _) =
        build_durable(DATA_NODE, None, &knobs(), &SimDataDir(disk.clone())).unwrap_or_else(|e| panic!("restart: {e}"));
    s.add_block(block::FS, 0, Box::new(SimFsBlock::new(disk.clone())));
    (Harness::with_scheduler(s), report.gci)
}

/// The last complete GCI in the system file's durable copies.
fn recorded_gci(disk: &SharedDisk) -> u64 {
    let d = disk.lock().unwrap();
    let l = SysFileStore::load(d.durable(PATHS[0]), d.durable(PATHS[1])).expect("a valid copy");
    l.sysfile.map_or(0, |s| s.last_complete_gci)
}

fn create_table(h: &mut Harness) -> u32 {
    let def = table_def("kv", 4, &[("v", ColumnType::BigInt { unsigned: false })]);
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

/// A disk with random latency, torn writes and, at a crash, a lost suffix
/// (even seeds) or a lost subset (odd seeds) of the unsynced writes.
fn crashing_disk(seed: u64, rng: &mut Rng) -> SharedDisk {
    let faults = DiskFaults {
        latency_min_ns: 20_000,
        latency_max_ns: 20_000 + rng.range(0, 3_000_000),
        crash_mode: if seed.is_multiple_of(2) { CrashMode::Prefix } else { CrashMode::Subset },
        torn_write_p: 0.5,
        ..DiskFaults::none()
    };
    SimDisk::shared(rng.fork(), faults)
}

#[test]
fn crashes_keep_exactly_the_transactions_of_complete_gcis() {
    let (mut restarts, mut lost_some, mut kept) = (0, 0, 0u64);
    for seed in 0..12u64 {
        let mut rng = Rng::new(seed);
        let disk = crashing_disk(seed, &mut rng);
        let (mut h, g) = boot(&disk);
        assert_eq!(g, 0);
        let t = create_table(&mut h);
        // txn id -> its GCI, for every committed transaction.
        let mut committed: BTreeMap<i64, u64> = BTreeMap::new();
        let mut next = 0i64;
        for round in 0..3 {
            for _ in 0..rng.range(20, 300) {
                let ops = (0..2)
                    .map(|j| KeyOp::insert(t, vec![Value::Int(2 * next + j)], vec![(1, Value::Int(next))]))
                    .collect();
                let c = h.key(100, 1 + next as u64, ExecType::Commit, ops).expect("commit");
                committed.insert(next, c.gci);
                next += 1;
                h.advance_ms(rng.range(0, 3));
            }
            // Crash with the disk mid-flight.
            let reported = recorded_gci(&disk);
            drop(h);
            disk.lock().unwrap().crash();
            let (h2, recovered) = boot(&disk);
            h = h2;
            restarts += 1;
            assert!(recovered >= reported, "seed {seed} round {round}: recovered {recovered} < reported {reported}");
            let (rows, _) = h.scan_all(100, 900_000 + round, true, ScanSpec::full(t)).unwrap();
            let mut seen: BTreeMap<i64, u32> = BTreeMap::new();
            for r in rows {
                let (Value::Int(k), Value::Int(v)) = (&r[0], &r[1]) else { panic!("{r:?}") };
                assert_eq!(k / 2, *v);
                *seen.entry(*v).or_default() += 1;
            }
            assert!(seen.values().all(|&n| n == 2), "seed {seed}: half a transaction");
            let want: Vec<i64> = committed.iter().filter(|(_, &g)| g <= recovered).map(|(&i, _)| i).collect();
            let got: Vec<i64> = seen.keys().copied().collect();
            assert_eq!(got, want, "seed {seed} round {round}: recovered GCI {recovered}");
            lost_some += usize::from(want.len() < committed.len());
            kept += want.len() as u64;
            // What was lost is gone for good: forget it, go on writing with
            // new keys, so that a lost transaction coming back at a later
            // restart (its REDO records replayed then) shows.
            committed.retain(|_, g| *g <= recovered);
        }
    }
    // The test saw real work: restarts kept rows and lost undurable ones.
    assert!(kept > 500, "{kept}");
    assert!(lost_some > 3, "{lost_some} of {restarts} restarts lost a non-durable tail");
}

/// Advance in 1 ms steps up to `limit_ms`; the answer to `txn` of API 100
/// and when it came (ms after the call), if it came.
fn answer_within(h: &mut Harness, txn: u64, limit_ms: u64) -> Option<(Signal, u64)> {
    for ms in 0..limit_ms {
        for e in h.advance_ms(1) {
            let ours = matches!(&e.signal, Signal::TcKeyConf(c) if c.txn == txn)
                || matches!(&e.signal, Signal::TcKeyRef(r) if r.txn == txn);
            if ours {
                return Some((e.signal, ms + 1));
            }
        }
    }
    None
}

/// A disk-wait commit while global checkpoints run is answered once its GCI
/// is recorded; when they stall (the disk stops answering), it is answered
/// after `commit_disk_timeout_ms` all the same: committed in memory, disk
/// durability unconfirmed (never a wait without end).
#[test]
fn commit_disk_wait_is_bounded_when_global_checkpoints_stall() {
    let disk = SimDisk::shared(Rng::new(7), DiskFaults::none());
    let (mut h, _) = boot(&disk);
    let timeout_ms = knobs().commit_disk_timeout_ms;
    assert!(timeout_ms >= 1_000, "the default leaves several GCP intervals: {timeout_ms}");
    let t = create_table(&mut h);
    let insert = |k: i64| vec![KeyOp::insert(t, vec![Value::Int(k)], vec![(1, Value::Int(k))])];

    h.send(100, Signal::TcKeyReq(Box::new(TcKeyReq { txn: 1, exec: ExecType::CommitDisk, ops: insert(1) })));
    let (answer, _) = answer_within(&mut h, 1, 1_000).expect("a disk commit with GCPs running is answered");
    let Signal::TcKeyConf(c) = answer else { panic!("{answer:?}") };
    assert_eq!(c.outcome, TxnOutcome::Committed);
    assert!(recorded_gci(&disk) >= c.gci, "answered before GCI {} was recorded", c.gci);

    // Every disk operation from now on takes an hour: no GCP completes.
    {
        let mut d = disk.lock().unwrap();
        d.faults.latency_min_ns = 3_600 * 1_000_000_000;
        d.faults.latency_max_ns = 3_600 * 1_000_000_000;
    }
    h.advance_ms(50);
    let stalled_at = recorded_gci(&disk);
    h.send(100, Signal::TcKeyReq(Box::new(TcKeyReq { txn: 2, exec: ExecType::CommitDisk, ops: insert(2) })));
    // Up to the timeout plus TC's check period (1 s with the default
    // `txn_inactive_timeout_ms`).
    let (answer, after_ms) = answer_within(&mut h, 2, timeout_ms + 1_500).expect("the disk wait is bounded");
    assert!(after_ms >= timeout_ms, "answered after {after_ms} ms, before the {timeout_ms} ms time-out");
    let Signal::TcKeyConf(c) = answer else { panic!("{answer:?}") };
    assert_eq!(c.outcome, TxnOutcome::CommittedNotOnDisk);
    assert_eq!(recorded_gci(&disk), stalled_at, "the GCPs did stall");
    assert!(c.gci > stalled_at, "GCI {} was recorded ({stalled_at})", c.gci);
    // Committed: readable (in memory).
    assert_eq!(h.get(t, vec![Value::Int(2)]), Some(vec![Value::Int(2), Value::Int(2)]));
}

/// A DICT request answered with DictConf (panics on a DictRef or silence).
fn dict(h: &mut Harness, req_id: u32, op: DictOp) -> DictResult {
    h.send(100, Signal::DictReq(Box::new(DictReq { req_id, op })));
    for _ in 0..1000 {
        for e in h.advance_ms(1) {
            match e.signal {
                Signal::DictConf(c) if c.req_id == req_id => return c.result,
                Signal::DictRef(r) if r.req_id == req_id => panic!("dictionary request {req_id} refused: {r:?}"),
                _ => {}
            }
        }
    }
    panic!("dictionary request {req_id} not answered");
}

fn next_auto_inc(h: &mut Harness, req_id: u32, table: u32, count: u64) -> u64 {
    match dict(h, req_id, DictOp::NextAutoInc { table, count }) {
        DictResult::AutoInc { first } => first,
        other => panic!("{other:?}"),
    }
}

/// AUTO_INCREMENT values handed out are never handed out again after a
/// crash, though no DDL ran after them (gaps are allowed); so for values
/// above an explicit one (`BumpAutoInc`). A TRUNCATE starts again at 1.
#[test]
fn auto_increment_counters_survive_a_crash_without_ddl() {
    for seed in 0..6u64 {
        let mut rng = Rng::new(seed ^ 0xA1);
        let disk = crashing_disk(seed, &mut rng);
        let (mut h, _) = boot(&disk);
        let t = create_table(&mut h);
        let mut req = 10;
        let mut highest = 0;
        for _ in 0..rng.range(1, 30) {
            req += 1;
            if rng.chance(0.2) {
                // An insert with an explicit value above the counter.
                highest += rng.range(1, 10_000);
                assert_eq!(dict(&mut h, req, DictOp::BumpAutoInc { table: t, used: highest }), DictResult::Done);
            } else {
                let count = rng.range(1, 700);
                let first = next_auto_inc(&mut h, req, t, count);
                assert!(first > highest, "seed {seed}: {first} after {highest}");
                highest = first + count - 1;
            }
            h.advance_ms(rng.range(0, 3));
        }
        // Kill -9: unsynced writes lost (or kept in part, or torn).
        disk.lock().unwrap().crash();
        let (mut h, _) = boot(&disk);
        let first = next_auto_inc(&mut h, 1, t, 1);
        assert!(first > highest, "seed {seed}: {first} handed out again (up to {highest} before the crash)");
        // TRUNCATE resets the counter, also across a crash.
        let truncate = DictOp::TruncateTable { name: "kv".into() };
        assert_eq!(dict(&mut h, 2, truncate), DictResult::Done);
        assert_eq!(next_auto_inc(&mut h, 3, t, 5), 1);
        disk.lock().unwrap().crash();
        let (mut h, _) = boot(&disk);
        let first = next_auto_inc(&mut h, 1, t, 1);
        assert!((6..=6 + 8192).contains(&first), "seed {seed}: after TRUNCATE and a crash: {first}");
    }
}

/// A lone data node whose disk fails: global checkpoints stop, the host
/// hears it (and logs it), writes are refused with a message that says the
/// REDO log failed (nothing committed now could become durable), and
/// committed rows can still be read.
#[test]
fn a_lone_node_whose_disk_fails_says_so_and_refuses_writes() {
    use std::sync::{Arc, Mutex};
    /// The host's side: what the node's blocks tell it.
    struct HostRecorder(Arc<Mutex<Vec<Signal>>>);
    impl norr_kernel::Block<Signal> for HostRecorder {
        fn on_signal(&mut self, env: norr_kernel::Envelope<Signal>, _ctx: &mut norr_kernel::Ctx<'_, Signal>) {
            self.0.lock().unwrap().push(env.signal);
        }
    }
    let disk = SimDisk::shared(Rng::new(5), DiskFaults::none());
    let (mut s, _): (Scheduler<Signal>, _) =
        build_durable(DATA_NODE, None, &knobs(), &SimDataDir(disk.clone())).expect("boot");
    s.add_block(block::FS, 0, Box::new(SimFsBlock::new(disk.clone())));
    let host = Arc::new(Mutex::new(Vec::new()));
    s.add_block(block::HOST, 0, Box::new(HostRecorder(host.clone())));
    let mut h = Harness::with_scheduler(s);
    let t = create_table(&mut h);
    let ops = vec![KeyOp::insert(t, vec![Value::Int(1)], vec![(1, Value::Int(10))])];
    h.key(100, 1, ExecType::Commit, ops).expect("commit before the failure");
    disk.lock().unwrap().faults.write_error_p = 1.0;
    let mut told = None;
    for _ in 0..200 {
        h.advance_ms(1);
        for sig in host.lock().unwrap().drain(..) {
            if let Signal::Cluster(c) = sig {
                if let norr_signals::cluster::ClusterSignal::DurabilityLostRep { why } = *c {
                    told = Some(why);
                }
            }
        }
        if told.is_some() {
            break;
        }
    }
    let why = told.expect("the host was not told that durability was lost");
    assert!(!why.is_empty());
    let ops = vec![KeyOp::insert(t, vec![Value::Int(2)], vec![(1, Value::Int(20))])];
    let refused = h.key(100, 2, ExecType::Commit, ops).expect_err("a write after the failure");
    assert!(refused.error.message.contains("REDO log failed"), "{refused:?}");
    assert_eq!(h.get(t, vec![Value::Int(1)]), Some(vec![Value::Int(1), Value::Int(10)]));
}
