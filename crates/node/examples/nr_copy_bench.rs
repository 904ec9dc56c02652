//! Node-restart copy figures: a restart from local files (delta copy: only
//! the rows changed since the node's restored GCI go in full, the others as
//! keys) against a restart with an empty data directory (every row in
//! full), for 1 % and 10 % of the rows changed while the node was down.
//!
//! Two durable data nodes (one node group) in the cluster kit, on the
//! simulator's in-memory disks: the whole cluster runs on one thread, so
//! the wall time is the CPU both ends of the copy spend (scan, lock, send,
//! store), without a real network. Per restart it prints the copy's wall
//! time (the restart's wall time minus the restore from files), rows
//! scanned per second, the estimated bytes sent and MB/s, and the copy
//! phase in virtual time (which adds the simulated network's round trips:
//! one batch in flight per partition copy).
//!
//! `cargo run --release -p norr-node --example nr_copy_bench -- [ROWS] [ROW_BYTES] [RUNS]`
//! (default 1,000,000 rows of 100 bytes, 3 runs; medians printed last).
//! Figures go to bench/RESULTS.md.

use norr_durability::sysfile::{NodeRestartState, SysFileStore, PATHS};
use norr_kernel::{BlockRef, NodeId};
use norr_knobs::Knobs;
use norr_node::durable::{build_durable_observed, RestoreReport};
use norr_node::testkit::ClusterKit;
use norr_signals::internal::InternalSignal;
use norr_signals::value::{ColumnType, Value};
use norr_signals::{block, DictOp, DictReq, DictResult, ExecType, KeyOp, Signal, TcKeyReq, TxnOutcome};
use norr_sim::disk::{DiskFaults, SharedDisk, SimDataDir, SimDisk, SimFsBlock};
use norr_sim::rng::Rng;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PARTITIONS: u32 = 8;
const API: NodeId = 100;

fn knobs() -> Knobs {
    Knobs { data_memory_bytes: 8 << 30, lock_wait_timeout_ms: 2_000, gcp_interval_ms: 100, ..Knobs::default() }
}

struct Bench {
    kit: ClusterKit,
    disks: Arc<Mutex<BTreeMap<NodeId, SharedDisk>>>,
    reports: Arc<Mutex<BTreeMap<NodeId, RestoreReport>>>,
    table: u32,
    rows: i64,
    row_bytes: usize,
    rng: Rng,
    next_key: i64,
}

/// One restart's figures.
#[derive(Debug, Clone, Copy)]
struct Copy {
    wall: Duration,
    restore: Duration,
    virtual_ms: u64,
    rows: u64,
    keys: u64,
    deleted: u64,
    bytes: u64,
}

impl Copy {
    fn copy_wall(&self) -> f64 {
        (self.wall.saturating_sub(self.restore)).as_secs_f64().max(1e-9)
    }
}

impl Bench {
    fn start(rows: i64, row_bytes: usize) -> Bench {
        let disks: Arc<Mutex<BTreeMap<NodeId, SharedDisk>>> = Arc::new(Mutex::new(BTreeMap::new()));
        let reports: Arc<Mutex<BTreeMap<NodeId, RestoreReport>>> = Arc::new(Mutex::new(BTreeMap::new()));
        let mut rng = Rng::new(7);
        for n in [1, 2] {
            disks.lock().unwrap().insert(n, SimDisk::shared(rng.fork(), DiskFaults::none()));
        }
        let (d, r) = (disks.clone(), reports.clone());
        let kit = ClusterKit::start_with(vec![vec![1, 2]], knobs(), 7, move |topo, knobs, observers| {
            let disk = d.lock().unwrap()[&topo.node].clone();
            let (mut s, report) =
                build_durable_observed(topo.node, Some(topo), knobs, &SimDataDir(disk.clone()), observers)
                    .unwrap_or_else(|e| panic!("node {} restart: {e}", topo.node));
            r.lock().unwrap().insert(topo.node, report);
            s.add_block(block::FS, 0, Box::new(SimFsBlock::new(disk)));
            s
        });
        let mut b = Bench { kit, disks, reports, table: 0, rows, row_bytes, rng, next_key: rows };
        let pad = ColumnType::Varbinary { len: row_bytes as u32 };
        let def = norr_txn::testkit::table_def(
            "kv",
            PARTITIONS,
            &[("v", ColumnType::BigInt { unsigned: false }), ("pad", pad)],
        );
        let req = DictReq { req_id: 1, op: DictOp::CreateTable(def) };
        b.table = match b.kit.ask(BlockRef::new(1, block::DICT, 0), Signal::DictReq(Box::new(req))) {
            Some(Signal::DictConf(c)) => match c.result {
                DictResult::Table(t) => t.id,
                other => panic!("create table answered {other:?}"),
            },
            other => panic!("create table answered {other:?}"),
        };
        b
    }

    fn row(&self, k: i64, v: i64) -> Vec<(norr_signals::schema::ColumnId, Value)> {
        // id and v take 16 bytes of the row.
        let pad = vec![(k as u8).wrapping_add(v as u8); self.row_bytes.saturating_sub(16)];
        vec![(1, Value::Int(v)), (2, Value::Bytes(pad))]
    }

    fn commit(&mut self, ops: Vec<KeyOp>) {
        for _ in 0..50 {
            let h = self.kit.handle();
            let req = TcKeyReq { txn: h, exec: ExecType::Commit, ops: ops.clone() };
            let got = self.kit.call(API, BlockRef::new(1, block::TC, 0), Signal::TcKeyReq(Box::new(req))).pop();
            match got {
                Some(Signal::TcKeyConf(c)) if c.outcome == TxnOutcome::Committed => return,
                Some(Signal::TcKeyRef(r)) if r.error.code.is_temporary() => self.kit.advance(50_000_000),
                other => panic!("transaction answered {other:?}"),
            }
        }
        panic!("a transaction kept failing");
    }

    fn load(&mut self) {
        let t0 = Instant::now();
        let keys: Vec<i64> = (0..self.rows).collect();
        for chunk in keys.chunks(200) {
            let ops = chunk.iter().map(|k| KeyOp::insert(self.table, vec![Value::Int(*k)], self.row(*k, *k))).collect();
            self.commit(ops);
        }
        println!(
            "loaded {} rows of {} B ({:.0} MB) in {:.1} s",
            self.rows,
            self.row_bytes,
            (self.rows as f64 * self.row_bytes as f64) / 1e6,
            t0.elapsed().as_secs_f64()
        );
    }

    /// `pct` % of the rows change: 80 % of them updated, 10 % deleted, and
    /// as many new rows inserted as deleted.
    fn change(&mut self, pct: u64) {
        let n = (self.rows as u64 * pct / 100) as i64;
        let mut ops = Vec::new();
        for i in 0..n {
            let k = self.rng.below(self.rows as u64) as i64;
            let op = match i % 10 {
                0 => KeyOp { abort_on_error: false, ..KeyOp::delete(self.table, vec![Value::Int(k)]) },
                1 => {
                    self.next_key += 1;
                    KeyOp::write(self.table, vec![Value::Int(self.next_key)], self.row(self.next_key, i))
                }
                _ => KeyOp::write(self.table, vec![Value::Int(k)], self.row(k, -i)),
            };
            ops.push(op);
            if ops.len() == 200 {
                self.commit(std::mem::take(&mut ops));
            }
        }
        if !ops.is_empty() {
            self.commit(ops);
        }
    }

    /// Node 2's files hold a complete copy (a restart from them may copy a
    /// delta): after a node restart, once a checkpoint covers the copy.
    fn restorable_2(&self) -> bool {
        let d = self.disks.lock().unwrap()[&2].clone();
        let d = d.lock().unwrap();
        let l = SysFileStore::load(d.durable(PATHS[0]), d.durable(PATHS[1])).expect("a valid system file");
        l.sysfile.is_some_and(|s| s.nodes.iter().any(|i| i.node == 2 && i.state == NodeRestartState::Started))
    }

    fn wait_restorable_2(&mut self) {
        let mut waited = 0;
        while !self.restorable_2() {
            self.kit.advance(100_000_000);
            waited += 1;
            assert!(waited < 6_000, "node 2's files never became a complete copy");
        }
        // And everything committed so far is in a complete GCI.
        self.kit.advance(500_000_000);
    }

    fn kill_2(&mut self) {
        self.kit.crash(2);
        self.disks.lock().unwrap()[&2].lock().unwrap().crash();
        self.kit.wait_for("node 1 to exclude node 2", |k| k.membership().is_some_and(|m| !m.contains(2)));
    }

    fn dih_counter(&mut self, name: &str) -> u64 {
        match self.kit.internal_ask(BlockRef::new(1, block::DIH, 0), InternalSignal::StatsReq { req: 1 }) {
            Some(InternalSignal::StatsConf { stats, .. }) => {
                stats.counters.iter().filter(|(k, _)| k == name).map(|(_, v)| *v).sum()
            }
            other => panic!("stats answered {other:?}"),
        }
    }

    fn restart_2(&mut self) -> Copy {
        let names = ["dih: rows copied", "dih: keys copied", "dih: rows deleted by resyncs", "dih: bytes copied"];
        let before: Vec<u64> = names.iter().map(|n| self.dih_counter(n)).collect();
        let t0 = Instant::now();
        self.kit.boot(2);
        self.kit.wait_until_started(2);
        let wall = t0.elapsed();
        let after: Vec<u64> = names.iter().map(|n| self.dih_counter(n)).collect();
        let r = self.reports.lock().unwrap()[&2].clone();
        let phases = self.kit.status(2).map(|s| s.phases.clone()).unwrap_or_default();
        let virtual_ms =
            phases.iter().filter(|(p, _)| p.starts_with("copy rows")).map(|(_, ms)| *ms).next_back().unwrap_or(0);
        let d = |i: usize| after[i] - before[i];
        Copy {
            wall,
            restore: r.read_schema + r.read_checkpoint + r.apply_redo + r.build_indexes,
            virtual_ms,
            rows: d(0),
            keys: d(1),
            deleted: d(2),
            bytes: d(3),
        }
    }

    /// Node 2 restarts with an empty data directory: every row is copied.
    fn restart_2_empty(&mut self) -> Copy {
        self.disks.lock().unwrap().insert(2, SimDisk::shared(self.rng.fork(), DiskFaults::none()));
        self.restart_2()
    }
}

fn print(what: &str, c: &Copy) {
    let scanned = c.rows + c.keys;
    println!(
        "{what}: copy {:.3} s wall (restart {:.3} s, restore from files {:.3} s), {:.0} ms virtual; \
         {} rows in full, {} keys, {} deleted; {:.1} MB sent; {:.0} k rows/s scanned, {:.1} MB/s",
        c.copy_wall(),
        c.wall.as_secs_f64(),
        c.restore.as_secs_f64(),
        c.virtual_ms,
        c.rows,
        c.keys,
        c.deleted,
        c.bytes as f64 / 1e6,
        scanned as f64 / c.copy_wall() / 1e3,
        c.bytes as f64 / 1e6 / c.copy_wall()
    );
}

fn median(mut v: Vec<Copy>) -> Copy {
    v.sort_by(|a, b| a.copy_wall().total_cmp(&b.copy_wall()));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).map(|a| a.parse().expect("numbers")).collect();
    let rows = args.first().copied().unwrap_or(1_000_000) as i64;
    let row_bytes = args.get(1).copied().unwrap_or(100).max(17) as usize;
    let runs = args.get(2).copied().unwrap_or(3).max(1) as usize;
    let mut b = Bench::start(rows, row_bytes);
    b.load();
    b.wait_restorable_2();
    let mut results: BTreeMap<String, Vec<Copy>> = BTreeMap::new();
    for run in 0..runs {
        for pct in [1u64, 10] {
            b.kill_2();
            b.change(pct);
            let c = b.restart_2();
            print(&format!("run {run}, {pct:>2} % changed, delta copy"), &c);
            results.entry(format!("{pct:>2} % changed, delta copy")).or_default().push(c);
            b.wait_restorable_2();
        }
        b.kill_2();
        b.change(1);
        let c = b.restart_2_empty();
        print(&format!("run {run}, empty data directory, full copy"), &c);
        results.entry("full copy (empty data directory)".to_string()).or_default().push(c);
        b.wait_restorable_2();
    }
    println!("medians of {runs} runs:");
    for (what, v) in results {
        print(&what, &median(v));
    }
}
