//! Failover time of a real cluster (issue 20's target: ≤ 1 s, median of 10).
//!
//! Each run starts mgmd and two data nodes (replicas = 2, default knobs) as
//! processes, has one client thread commit single-row writes back to back
//! through data node 2, then kills data node 3 (`kill -9`) or freezes it
//! (`SIGSTOP`, a hang only heartbeats can detect). With one node group,
//! every write touches partitions of the failed node.
//!
//! Failover time = from the signal to the end of the first successful commit
//! that *started* after the signal. A transaction caught in the failure
//! keeps the writer waiting, so its wait is in the figure too.
//!
//! Run: `cargo run --release -p norr-cli --example failover_bench -- --runs 10`
//! (builds the `norr` binary first: `cargo build --release -p norr-cli`).

#[path = "../tests/support/proc_cluster.rs"]
mod proc_cluster;

use norr_client::blocking::Client;
use norr_client::*;
use proc_cluster::Cluster;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Fault {
    Kill,
    Stop,
}

struct Args {
    norr: PathBuf,
    runs: usize,
    faults: Vec<Fault>,
}

fn parse_args() -> Args {
    let exe = std::env::current_exe().expect("current exe");
    // target/<profile>/examples/failover_bench -> target/<profile>/norr
    let default_norr = exe.parent().and_then(|p| p.parent()).map(|p| p.join("norr")).unwrap_or_default();
    let mut a = Args { norr: default_norr, runs: 10, faults: vec![Fault::Kill, Fault::Stop] };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--norr" => a.norr = PathBuf::from(it.next().expect("--norr PATH")),
            "--runs" => a.runs = it.next().and_then(|v| v.parse().ok()).expect("--runs N"),
            "--fault" => {
                a.faults = match it.next().as_deref() {
                    Some("kill") => vec![Fault::Kill],
                    Some("stop") => vec![Fault::Stop],
                    Some("both") => vec![Fault::Kill, Fault::Stop],
                    other => panic!("--fault kill|stop|both, not {other:?}"),
                }
            }
            "--help" | "-h" => {
                println!("failover_bench [--norr PATH] [--runs N] [--fault kill|stop|both]");
                std::process::exit(0);
            }
            other => panic!("unknown argument {other} (see --help)"),
        }
    }
    assert!(a.norr.exists(), "no norr binary at {} (build it, or pass --norr PATH)", a.norr.display());
    a
}

/// One commit: when it started and ended, and whether it committed.
struct Commit {
    start: Instant,
    end: Instant,
    ok: bool,
}

fn one_run(norr: &std::path::Path, fault: Fault, run: usize) -> Duration {
    let mut cluster = Cluster::start(norr, &format!("failover-{run}"), 2, 2, "");
    cluster.wait_started(&[2, 3]);
    let client = Client::connect(cluster.data[0].1.as_str()).expect("connect to data node 2");
    let def = table_def(
        "failover",
        vec![
            ColumnDef::new("k", ColumnType::BigInt { unsigned: false }).not_null(),
            ColumnDef::new("v", ColumnType::BigInt { unsigned: false }),
        ],
        vec![0],
    );
    let t = client.create_table(def).expect("create table");
    let log: Arc<Mutex<Vec<Commit>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (log, stop) = (log.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut k = 0i64;
            while !stop.load(Ordering::Relaxed) {
                k = (k + 1) % 10_000;
                let start = Instant::now();
                let mut txn = client.begin();
                let ok = txn
                    .execute(vec![KeyOp::write(t.id, vec![Value::Int(k)], vec![(1, Value::Int(k))])], ExecType::Commit)
                    .is_ok();
                log.lock().unwrap().push(Commit { start, end: Instant::now(), ok });
            }
        })
    };
    std::thread::sleep(Duration::from_millis(1500));
    // The clock starts when the fault is in place: SIGKILL is one system
    // call (the process is gone at once); SIGSTOP is sent by a `kill`
    // process, so the node is frozen only once that returned.
    let at = match fault {
        Fault::Kill => {
            let at = Instant::now();
            cluster.kill(1);
            at
        }
        Fault::Stop => {
            cluster.signal(1, "-STOP");
            Instant::now()
        }
    };
    let deadline = at + Duration::from_secs(60);
    let took = loop {
        let first = log.lock().unwrap().iter().find(|c| c.ok && c.start >= at).map(|c| c.end - at);
        if let Some(d) = first {
            break d;
        }
        assert!(Instant::now() < deadline, "no commit within 60 s of the fault; logs:\n{}", cluster.logs());
        std::thread::sleep(Duration::from_millis(5));
    };
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    if fault == Fault::Stop {
        cluster.signal(1, "-CONT");
    }
    let failed = log.lock().unwrap().iter().filter(|c| !c.ok && c.end >= at).count();
    println!(
        "run {run} {fault:?}: {:.0} ms to the first commit ({failed} transactions failed with a retriable error)",
        took.as_secs_f64() * 1e3
    );
    took
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

fn main() {
    let a = parse_args();
    for &fault in &a.faults {
        let mut times: Vec<Duration> = (0..a.runs).map(|r| one_run(&a.norr, fault, r)).collect();
        let med = median(&mut times);
        println!(
            "{fault:?}: median {:.0} ms, min {:.0} ms, max {:.0} ms over {} runs",
            med.as_secs_f64() * 1e3,
            times[0].as_secs_f64() * 1e3,
            times[times.len() - 1].as_secs_f64() * 1e3,
            a.runs
        );
    }
}
