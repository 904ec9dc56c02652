//! Local checkpoint figures on the simulator's in-memory disk (no latency):
//! checkpoint bytes written per round at 1 % and 10 % of the rows changed
//! (they should follow the change, not the database size), and restore
//! speed from the checkpoint files on one core (wall time of the restart's
//! "read checkpoint" phase).
//!
//! `cargo run --release -p norr-node --example lcp_bench -- [MB] [ROW_BYTES]`
//! (default 256 MB of rows of 1000 bytes). Figures go to bench/RESULTS.md.

use norr_durability::lcp::LcpControl;
use norr_durability::CrashPoints;
use norr_knobs::Knobs;
use norr_node::durable::{build_durable_with, RestoreReport};
use norr_signals::ops::KeyOp;
use norr_signals::value::{ColumnType, Value};
use norr_signals::{block, DictConf, DictOp, DictReq, DictResult, ExecType, Signal};
use norr_sim::disk::{DiskFaults, SharedDisk, SimDataDir, SimDisk, SimFsBlock};
use norr_sim::rng::Rng;
use norr_txn::testkit::{table_def, Harness, DATA_NODE};
use std::time::Instant;

const PARTITIONS: u32 = 4;

fn knobs() -> Knobs {
    Knobs {
        data_memory_bytes: 8 << 30,
        gcp_interval_ms: 10,
        lcp_min_gap_ms: 10,
        lcp_slice_delay_us: 0,
        lcp_slice_rows: 1024,
        ..Knobs::default()
    }
}

fn boot(disk: &SharedDisk) -> (Harness, RestoreReport) {
    let (mut s, report) = build_durable_with(DATA_NODE, None, &knobs(), &SimDataDir(disk.clone()), &CrashPoints::off())
        .unwrap_or_else(|e| panic!("restart: {e}"));
    s.add_block(block::FS, 0, Box::new(SimFsBlock::new(disk.clone())));
    (Harness::with_scheduler(s), report)
}

fn recorded_lcp(disk: &SharedDisk) -> u64 {
    use norr_durability::sysfile::{SysFileStore, PATHS};
    let d = disk.lock().unwrap();
    let l = SysFileStore::load(d.durable(PATHS[0]), d.durable(PATHS[1])).expect("a valid copy");
    l.sysfile.map_or(0, |s| s.last_lcp_id)
}

/// Wait for the next two recorded rounds; the data bytes the checkpoints
/// of those rounds wrote.
fn rounds(h: &mut Harness, disk: &SharedDisk, t: u32) -> u64 {
    let id0 = recorded_lcp(disk);
    while recorded_lcp(disk) < id0 + 2 {
        h.advance_ms(1);
    }
    let d = disk.lock().unwrap();
    let mut bytes = 0;
    for p in 0..PARTITIONS {
        let dir = norr_durability::lcp::partition_dir(t, p);
        for n in d.file_names() {
            if let Some(id) = n.strip_prefix(&format!("{dir}/")).and_then(|r| r.strip_suffix(".ctl")) {
                let id: u64 = id.parse().unwrap();
                if id > id0 {
                    bytes += LcpControl::decode(d.contents(&n).unwrap(), &n).unwrap().data.bytes;
                }
            }
        }
    }
    bytes
}

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).map(|a| a.parse().expect("numbers")).collect();
    let mb = args.first().copied().unwrap_or(256);
    let row_bytes = args.get(1).copied().unwrap_or(1000) as usize;
    let rows = (mb << 20) / row_bytes as u64;
    let disk = SimDisk::shared(Rng::new(1), DiskFaults::none());
    let (mut h, _) = boot(&disk);
    let def = table_def("kv", PARTITIONS, &[("pad", ColumnType::Varbinary { len: row_bytes as u32 })]);
    h.send(100, Signal::DictReq(Box::new(DictReq { req_id: 1, op: DictOp::CreateTable(def) })));
    let mut t = None;
    while t.is_none() {
        for e in h.advance_ms(1) {
            if let Signal::DictConf(c) = e.signal {
                let DictConf { result: DictResult::Table(d), .. } = *c else { panic!("{c:?}") };
                t = Some(d.id);
            }
        }
    }
    let t = t.unwrap();
    let pad = |v: u8| Value::Bytes(vec![v; row_bytes - 8]);
    let mut txn = 0u64;
    let started = Instant::now();
    for chunk in (0..rows).collect::<Vec<_>>().chunks(100) {
        let ops: Vec<KeyOp> =
            chunk.iter().map(|&k| KeyOp::insert(t, vec![Value::Int(k as i64)], vec![(1, pad(1))])).collect();
        // A loader waits out a full REDO log (410) as a client would: the
        // local checkpoints free its tail.
        loop {
            txn += 1;
            match h.key(100, txn, ExecType::Commit, ops.clone()) {
                Ok(_) => break,
                Err(r) if r.error.code.is_temporary() => {
                    h.advance_ms(5);
                }
                Err(r) => panic!("insert: {r:?}"),
            }
        }
        if txn.is_multiple_of(100) {
            h.advance_ms(1);
        }
    }
    let full = rounds(&mut h, &disk, t);
    println!(
        "loaded {rows} rows of {row_bytes} B ({mb} MB) in {:.1} s; first checkpoint wrote {:.1} MB",
        started.elapsed().as_secs_f64(),
        full as f64 / 1e6
    );
    let mut rng = Rng::new(2);
    // Warm-up: the first partial checkpoint after the load also writes the
    // rows of the GCIs its full predecessor's fuzzy scan may have missed
    // (the whole load, here); steady state starts after it.
    for pct in [1u64, 1, 10] {
        let n = rows * pct / 100;
        for i in 0..n.div_ceil(100) {
            let ops = (0..100.min(n - i * 100))
                .map(|_| KeyOp::update(t, vec![Value::Int(rng.below(rows) as i64)], vec![(1, pad(pct as u8))]))
                .collect();
            txn += 1;
            h.key(100, txn, ExecType::Commit, ops).expect("update");
        }
        let wrote = rounds(&mut h, &disk, t);
        println!(
            "{pct:>2} % of rows changed ({:.1} MB): the checkpoint wrote {:.1} MB = {:.1} % of the database",
            (n * row_bytes as u64) as f64 / 1e6,
            wrote as f64 / 1e6,
            100.0 * wrote as f64 / (rows * row_bytes as u64) as f64
        );
    }
    drop(h);
    disk.lock().unwrap().crash();
    let (_h, report) = boot(&disk);
    println!(
        "restart: {} rows, {:.1} MB of checkpoint read in {:.3} s = {:.0} MB/s on one core; REDO {:.3} s, indexes {:.3} s",
        report.lcp_rows,
        report.lcp_bytes as f64 / 1e6,
        report.read_checkpoint.as_secs_f64(),
        report.lcp_bytes as f64 / 1e6 / report.read_checkpoint.as_secs_f64(),
        report.apply_redo.as_secs_f64(),
        report.build_indexes.as_secs_f64()
    );
}
