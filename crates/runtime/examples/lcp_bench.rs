//! Local checkpoint figures: checkpoint bytes written per round at 1 % and
//! 10 % of the rows changed (they should follow the change, not the
//! database size), and restore speed from the checkpoint files on one core
//! (wall time of the restart's phases).
//!
//! `cargo run --release -p norr-runtime --example lcp_bench -- [MB] [ROW_BYTES] [--dir DIR]`
//! (default 256 MB of rows of 1000 bytes). Without `--dir` the files live on
//! the simulator's in-memory disk (no latency, but every file is held in
//! memory: a 4 GB database needs ~20 GB of RAM). With `--dir DIR` they are
//! real files under DIR (which must be empty or absent), written by the
//! production host's file executor with its fdatasyncs, and the restart
//! reads them as `norr datad --data-dir` does. Figures go to bench/RESULTS.md.
//!
//! This lives in norr-runtime, not norr-node, because the real-disk mode
//! needs the runtime's file executor (norr-runtime depends on norr-node).

use norr_durability::lcp::LcpControl;
use norr_durability::CrashPoints;
use norr_kernel::{Block, Ctx, Envelope};
use norr_knobs::Knobs;
use norr_node::durable::StdDataDir;
use norr_node::durable::{build_durable_with, RestoreReport};
use norr_runtime::fs::FsExecutor;
use norr_signals::fs::FsSignal;
use norr_signals::ops::KeyOp;
use norr_signals::value::{ColumnType, Value};
use norr_signals::{block, DictConf, DictOp, DictReq, DictResult, ExecType, Signal};
use norr_sim::disk::{DiskFaults, SharedDisk, SimDataDir, SimDisk, SimFsBlock};
use norr_sim::rng::Rng;
use norr_txn::testkit::{table_def, Harness, DATA_NODE};
use std::path::PathBuf;
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

/// Where the bench's data directory lives.
enum Disk {
    Sim(SharedDisk),
    Real(PathBuf),
}

/// The FS block of the real-disk mode: the production file executor, run
/// synchronously inside the block. The bench's harness has no event loop
/// to deliver an IO thread's completions; doing the IO inline makes every
/// request take its real time on the bench's one thread, which is what a
/// restore-speed figure should include.
struct InlineFsBlock(FsExecutor);

impl Block<Signal> for InlineFsBlock {
    fn on_signal(&mut self, env: Envelope<Signal>, ctx: &mut Ctx<'_, Signal>) {
        let Signal::Fs(fs) = env.signal else { panic!("FS block got {}", env.signal.name()) };
        let FsSignal::Req { req_id, op } = *fs else { panic!("FS block got a reply") };
        let reply = match self.0.execute(op) {
            Ok(result) => FsSignal::Conf { req_id, result },
            Err(error) => FsSignal::Ref { req_id, error },
        };
        ctx.send(env.from, Signal::Fs(Box::new(reply)));
    }
}

impl Disk {
    /// Names of the files of the data directory, relative to it.
    fn file_names(&self) -> Vec<String> {
        match self {
            Disk::Sim(d) => d.lock().unwrap().file_names(),
            Disk::Real(root) => {
                let mut out = Vec::new();
                let mut todo = vec![root.clone()];
                while let Some(dir) = todo.pop() {
                    for e in std::fs::read_dir(&dir).expect("list the data directory") {
                        let p = e.expect("list the data directory").path();
                        if p.is_dir() {
                            todo.push(p);
                        } else {
                            out.push(p.strip_prefix(root).unwrap().to_string_lossy().into_owned());
                        }
                    }
                }
                out
            }
        }
    }

    fn contents(&self, path: &str) -> Option<Vec<u8>> {
        match self {
            Disk::Sim(d) => d.lock().unwrap().contents(path).map(<[u8]>::to_vec),
            Disk::Real(root) => std::fs::read(root.join(path)).ok(),
        }
    }

    /// The copy of `path` a crash would keep (on a real disk every
    /// completed checkpoint's files were synced: what is there is it).
    fn durable(&self, path: &str) -> Option<Vec<u8>> {
        match self {
            Disk::Sim(d) => d.lock().unwrap().durable(path).map(<[u8]>::to_vec),
            Disk::Real(_) => self.contents(path),
        }
    }
}

fn boot(disk: &Disk) -> (Harness, RestoreReport) {
    let built = match disk {
        Disk::Sim(d) => build_durable_with(DATA_NODE, None, &knobs(), &SimDataDir(d.clone()), &CrashPoints::off()),
        Disk::Real(p) => build_durable_with(DATA_NODE, None, &knobs(), &StdDataDir(p.clone()), &CrashPoints::off()),
    };
    let (mut s, report) = built.unwrap_or_else(|e| panic!("restart: {e}"));
    let fs: Box<dyn Block<Signal> + Send> = match disk {
        Disk::Sim(d) => Box::new(SimFsBlock::new(d.clone())),
        Disk::Real(p) => Box::new(InlineFsBlock(FsExecutor::new(p.clone()).expect("open the data directory"))),
    };
    s.add_block(block::FS, 0, fs);
    (Harness::with_scheduler(s), report)
}

fn recorded_lcp(disk: &Disk) -> u64 {
    use norr_durability::sysfile::{SysFileStore, PATHS};
    let (a, b) = (disk.durable(PATHS[0]), disk.durable(PATHS[1]));
    let l = SysFileStore::load(a.as_deref(), b.as_deref()).expect("a valid copy");
    l.sysfile.map_or(0, |s| s.last_lcp_id)
}

/// Wait for the next two recorded rounds; the data bytes the checkpoints
/// of those rounds wrote.
fn rounds(h: &mut Harness, disk: &Disk, t: u32) -> u64 {
    let id0 = recorded_lcp(disk);
    while recorded_lcp(disk) < id0 + 2 {
        h.advance_ms(1);
    }
    let mut bytes = 0;
    let names = disk.file_names();
    for p in 0..PARTITIONS {
        let dir = norr_durability::lcp::partition_dir(t, p);
        for n in &names {
            if let Some(id) = n.strip_prefix(&format!("{dir}/")).and_then(|r| r.strip_suffix(".ctl")) {
                let id: u64 = id.parse().unwrap();
                if id > id0 {
                    bytes += LcpControl::decode(&disk.contents(n).unwrap(), n).unwrap().data.bytes;
                }
            }
        }
    }
    bytes
}

/// Commit `ops`, waiting out a full REDO log (410) as a client would: the
/// local checkpoints free its tail (10 % of a 4 GB database is more than
/// the default log holds).
fn commit_retrying(h: &mut Harness, txn: &mut u64, ops: Vec<KeyOp>) {
    loop {
        *txn += 1;
        match h.key(100, *txn, ExecType::Commit, ops.clone()) {
            Ok(_) => return,
            Err(r) if r.error.code.is_temporary() => {
                h.advance_ms(5);
            }
            Err(r) => panic!("write: {r:?}"),
        }
    }
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let dir = args.iter().position(|a| a == "--dir").map(|i| {
        let d = PathBuf::from(args.get(i + 1).expect("--dir DIR"));
        args.drain(i..i + 2);
        d
    });
    let args: Vec<u64> = args.iter().map(|a| a.parse().expect("numbers: [MB] [ROW_BYTES] [--dir DIR]")).collect();
    let mb = args.first().copied().unwrap_or(256);
    let row_bytes = args.get(1).copied().unwrap_or(1000) as usize;
    let rows = (mb << 20) / row_bytes as u64;
    let disk = match dir {
        None => Disk::Sim(SimDisk::shared(Rng::new(1), DiskFaults::none())),
        Some(d) => {
            std::fs::create_dir_all(&d).expect("create --dir");
            assert!(std::fs::read_dir(&d).unwrap().next().is_none(), "--dir {} is not empty", d.display());
            Disk::Real(d)
        }
    };
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
        commit_retrying(&mut h, &mut txn, ops);
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
    // LCP_BENCH_PCTS: the rounds' change percentages (default 1,1,10).
    let pcts: Vec<u64> = std::env::var("LCP_BENCH_PCTS")
        .unwrap_or_else(|_| "1,1,10".into())
        .split(',')
        .map(|p| p.trim().parse().expect("LCP_BENCH_PCTS: numbers, e.g. 1,1,10"))
        .collect();
    for pct in pcts {
        let n = rows * pct / 100;
        for i in 0..n.div_ceil(100) {
            let ops = (0..100.min(n - i * 100))
                .map(|_| KeyOp::update(t, vec![Value::Int(rng.below(rows) as i64)], vec![(1, pad(pct as u8))]))
                .collect();
            commit_retrying(&mut h, &mut txn, ops);
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
    let cache = match &disk {
        Disk::Sim(d) => {
            d.lock().unwrap().crash();
            "simulator disk"
        }
        // A restart after a machine reboot reads from the device, not the
        // page cache: drop it where we may (root), and say which it was.
        Disk::Real(_) => match std::process::Command::new("sync")
            .status()
            .map_err(|e| e.to_string())
            .and_then(|_| std::fs::write("/proc/sys/vm/drop_caches", "1").map_err(|e| e.to_string()))
        {
            Ok(()) => "real disk, page cache dropped first",
            Err(_) => "real disk, page cache NOT dropped (not root): the files may be read from memory",
        },
    };
    let (_h, report) = boot(&disk);
    println!(
        "restart ({cache}): {} rows, {:.1} MB of checkpoint read in {:.3} s = {:.0} MB/s on one core; REDO {:.3} s, indexes {:.3} s",
        report.lcp_rows,
        report.lcp_bytes as f64 / 1e6,
        report.read_checkpoint.as_secs_f64(),
        report.lcp_bytes as f64 / 1e6 / report.read_checkpoint.as_secs_f64(),
        report.apply_redo.as_secs_f64(),
        report.build_indexes.as_secs_f64()
    );
}
