//! `kill -9` under a sustained write load, then restart, many times (issue
//! 21's durability target): no transaction acknowledged with a GCI up to the
//! recovered GCI may be lost, none of a later GCI may come back, and every
//! transaction is there whole or not at all.
//!
//! One data node (`norr datad --data-dir`, default knobs: GCP every 2 s,
//! local checkpoints, REDO 4 x 64 MB) and `--writers` client threads. Writer
//! transactions insert two rows each, keys 2i and 2i+1 with value i, and the
//! writer records the GCI the commit reply names (`commit_gci`). A round:
//! start the node on the directory the earlier rounds left, write for a
//! random 2..6 s, `kill -9` the node while the writers run, restart it, read
//! the recovered GCI from its restart report and check every transaction
//! ever acknowledged:
//! * acknowledged with GCI <= recovered: both rows present (else lost);
//! * acknowledged with GCI > recovered: absent (it was network durable only;
//!   the restart must not bring back part of a later GCI);
//! * unacknowledged (in flight at the kill): both rows or neither;
//! * no row of a transaction that was never sent.
//!
//! The data stays between rounds, so later restarts restore from local
//! checkpoints plus REDO. Output: one line per round and a summary with the
//! restart times (median, max). Exit status 1 if any check failed.
//!
//! `--data-nodes 2`: a cluster instead (mgmd and two data nodes, replicas =
//! 2, default knobs, each node on its own data directory). A round kills
//! *both* data nodes with SIGKILL, the second 0..500 ms after the first (so
//! some rounds see the survivor take over alone first), and starts both
//! again: a system restart from the nodes' files. The recovered GCI is the
//! highest one the two restart reports name; the rows are read through each
//! node (each is primary for a share of the partitions) and must agree.
//!
//! `bash bench/kill9_durability.sh` builds and runs it; alone:
//! `cargo run --release -p norr-cli --example kill9_durability -- --rounds 20`.

#[path = "../tests/support/proc_cluster.rs"]
mod proc_cluster;

use norr_client::blocking::Client;
use norr_client::{table_def, ColumnDef, ColumnType, ExecType, KeyOp, ScanSpec, TableId, Value};
use proc_cluster::{complete_copy_in_log, recovered_in_log, system_restart_gci, Rng};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const HELP: &str = "kill9_durability [--norr PATH] [--rounds N (20)] [--writers N (4)] [--dir DIR] [--seed N]
      [--keep] [--data-nodes 1|2]

Runs one data node on DIR (default: a new temporary directory, removed at
the end unless --keep), writes with --writers client threads that record the
GCI of every commit, kills the node with SIGKILL at a random moment (2-6 s
into the round), restarts it from DIR and checks that every transaction
acknowledged up to the recovered GCI is present, none of a later GCI is, and
none is half there. Repeats --rounds times on the same directory. Prints one
line per round and a summary; exit status 1 if a check failed.

--data-nodes 2 runs mgmd and two data nodes (replicas = 2) in a temporary
directory instead (--dir and --keep do not apply) and kills both data nodes
each round (the second up to 500 ms after the first): every restart is a
system restart of the cluster.";

struct Args {
    norr: PathBuf,
    rounds: u32,
    writers: usize,
    dir: Option<PathBuf>,
    seed: u64,
    keep: bool,
    data_nodes: u16,
}

fn parse_args() -> Args {
    let exe = std::env::current_exe().expect("current exe");
    // target/<profile>/examples/kill9_durability -> target/<profile>/norr
    let default_norr = exe.parent().and_then(|p| p.parent()).map(|p| p.join("norr")).unwrap_or_default();
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64);
    let mut a = Args {
        norr: default_norr,
        rounds: 20,
        writers: 4,
        dir: None,
        seed: seed.unwrap_or(1) | 1,
        keep: false,
        data_nodes: 1,
    };
    let mut it = std::env::args().skip(1);
    fn num(it: &mut impl Iterator<Item = String>, arg: &str) -> u64 {
        it.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| fail(&format!("{arg} needs a number (see --help)")))
    }
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--norr" => a.norr = PathBuf::from(it.next().unwrap_or_else(|| fail("--norr needs a PATH"))),
            "--rounds" => a.rounds = num(&mut it, &arg) as u32,
            "--writers" => a.writers = num(&mut it, &arg).max(1) as usize,
            "--dir" => a.dir = Some(PathBuf::from(it.next().unwrap_or_else(|| fail("--dir needs a DIR")))),
            "--seed" => a.seed = num(&mut it, &arg) | 1,
            "--keep" => a.keep = true,
            "--data-nodes" => match num(&mut it, &arg) {
                n @ (1 | 2) => a.data_nodes = n as u16,
                n => fail(&format!("--data-nodes {n}: 1 or 2")),
            },
            "--help" | "-h" => {
                println!("{HELP}");
                std::process::exit(0);
            }
            other => fail(&format!("unknown argument {other} (see --help)")),
        }
    }
    if !a.norr.exists() {
        fail(&format!("no norr binary at {} (build it, or pass --norr PATH)", a.norr.display()));
    }
    a
}

fn fail(msg: &str) -> ! {
    eprintln!("kill9_durability: {msg}");
    std::process::exit(2)
}

struct Datad {
    child: Child,
    addr: String,
    /// The restart report's recovered GCI (None on a fresh directory).
    recovered: Option<u64>,
    /// From spawn to listening.
    start_time: Duration,
}

fn start(norr: &Path, dir: &Path) -> Datad {
    let t0 = Instant::now();
    let mut child = Command::new(norr)
        .args(["datad", "--listen", "127.0.0.1:0", "--data-memory", "512M", "--data-dir"])
        .arg(dir)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| fail(&format!("spawn {}: {e}", norr.display())));
    let stderr = child.stderr.take().expect("piped stderr");
    let mut lines = BufReader::new(stderr).lines();
    let mut recovered = None;
    let mut log = Vec::new();
    let addr = loop {
        let line = match lines.next() {
            Some(Ok(l)) => l,
            _ => fail(&format!("datad exited before listening:\n{}", log.join("\n"))),
        };
        if let Some(rest) = line.split("recovered to GCI ").nth(1) {
            recovered = rest.split(|c: char| !c.is_ascii_digit()).next().and_then(|g| g.parse().ok());
        }
        if let Some(rest) = line.split(" listening on ").nth(1) {
            break rest.split_whitespace().next().unwrap_or_default().to_string();
        }
        log.push(line);
    };
    // Keep draining stderr so the node never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Datad { child, addr, recovered, start_time: t0.elapsed() }
}

/// The data nodes under test.
enum Nodes {
    One { norr: PathBuf, dir: PathBuf, node: Datad },
    Cluster(proc_cluster::Cluster),
}

impl Nodes {
    fn start(a: &Args, dir: &Path) -> Nodes {
        if a.data_nodes == 1 {
            return Nodes::One { norr: a.norr.clone(), dir: dir.to_path_buf(), node: start(&a.norr, dir) };
        }
        let c = proc_cluster::Cluster::start(&a.norr, "kill9", a.data_nodes, 2, "");
        let ids: Vec<u16> = c.data.iter().map(|(id, _)| *id).collect();
        c.wait_started(&ids);
        Nodes::Cluster(c)
    }

    /// Where writers connect (a cluster client finds the other nodes).
    fn addr(&self) -> String {
        match self {
            Nodes::One { node, .. } => node.addr.clone(),
            Nodes::Cluster(c) => c.data[0].1.clone(),
        }
    }

    /// Each data node's address: the rows are read through each.
    fn addrs(&self) -> Vec<String> {
        match self {
            Nodes::One { node, .. } => vec![node.addr.clone()],
            Nodes::Cluster(c) => c.data.iter().map(|(_, a)| a.clone()).collect(),
        }
    }

    /// SIGKILL every data node (in a cluster the second 0..500 ms after
    /// the first, while the writers go on).
    /// What was killed, for the round's line.
    fn kill(&mut self, rng: &mut Rng) -> String {
        match self {
            Nodes::One { node, .. } => {
                let _ = node.child.kill();
                let _ = node.child.wait();
                String::new()
            }
            Nodes::Cluster(c) => {
                let first = (rng.next() % 2) as usize;
                let gap = Duration::from_millis(rng.next() % 500);
                c.kill(first);
                std::thread::sleep(gap);
                c.kill(1 - first);
                format!(", killed node {} then {} {} ms later", c.data[first].0, c.data[1 - first].0, gap.as_millis())
            }
        }
    }

    /// Start every data node again from its files: the recovered GCI and
    /// the time until all serve.
    fn restart(&mut self) -> Result<(u64, Duration, String), String> {
        match self {
            Nodes::One { norr, dir, node } => {
                *node = start(norr, dir);
                let gci = node.recovered.ok_or("no \"recovered to GCI\" in the restart report")?;
                Ok((gci, node.start_time, String::new()))
            }
            Nodes::Cluster(c) => {
                let t0 = Instant::now();
                let logs: Vec<usize> = (0..c.data.len())
                    .map(|i| {
                        std::fs::metadata(c.dir.0.join(format!("node-{}.log", c.data[i].0)))
                            .map_or(0, |m| m.len() as usize)
                    })
                    .collect();
                for i in 0..c.data.len() {
                    let p = c.spawn_node(i);
                    c.nodes[i] = Some(p);
                }
                let ids: Vec<u16> = c.data.iter().map(|(id, _)| *id).collect();
                c.wait_started(&ids);
                let took = t0.elapsed();
                let texts: Vec<String> = (0..c.data.len())
                    .map(|i| {
                        let text = c.nodes[i].as_ref().map(|p| p.log_text()).unwrap_or_default();
                        text.get(logs[i]..).unwrap_or_default().to_string()
                    })
                    .collect();
                // Every node that restarted to the cluster's GCI says which;
                // a log without it (an empty cluster's first GCI) falls back
                // to what the files restored.
                let views: Vec<&str> = texts.iter().map(String::as_str).collect();
                let gci = system_restart_gci(&views).map_err(|e| format!("{e}:\n{}", c.logs()))?;
                let restored: Vec<Option<u64>> = texts.iter().map(|t| recovered_in_log(t)).collect();
                let complete: Vec<Option<bool>> = texts.iter().map(|t| complete_copy_in_log(t)).collect();
                let shown: Vec<String> = restored
                    .iter()
                    .zip(&complete)
                    .map(|(r, c)| match (r, c) {
                        (Some(r), Some(false)) => format!("{r} (incomplete copy)"),
                        (Some(r), _) => r.to_string(),
                        (None, _) => "-".to_string(),
                    })
                    .collect();
                Ok((gci, took, format!(", files restored [{}]", shown.join(", "))))
            }
        }
    }

    fn stop(&mut self) {
        match self {
            Nodes::One { node, .. } => {
                let _ = node.child.kill();
                let _ = node.child.wait();
            }
            // Dropping the cluster kills its processes and removes its files.
            Nodes::Cluster(c) => {
                for p in c.nodes.iter_mut().flatten() {
                    let _ = p.child.kill();
                    let _ = p.child.wait();
                }
            }
        }
    }
}

/// The rows present, read through `addr`, retrying temporary errors for a
/// while (a restarted cluster may still be taking over its partitions).
fn present_through(addr: &str, table: TableId) -> Result<BTreeMap<i64, u32>, String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = Client::connect(addr).map_err(|e| format!("connect {addr}: {e}")).and_then(|c| present(&c, table));
        match r {
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            r => return r,
        }
    }
}

/// What a writer knows about one transaction.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Outcome {
    /// The commit was acknowledged with this GCI.
    Acked(u64),
    /// Sent, but no answer (the node died) or an error: may or may not be there.
    Unknown,
}

/// Transaction i inserts rows 2i and 2i+1 with value i.
fn txn_ops(table: TableId, i: i64) -> Vec<KeyOp> {
    (0..2).map(|j| KeyOp::insert(table, vec![Value::Int(2 * i + j)], vec![(1, Value::Int(i))])).collect()
}

/// Writes until `stop`, each transaction's outcome into `log`.
fn writer(
    addr: String,
    table: TableId,
    next: Arc<AtomicI64>,
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<Vec<(i64, Outcome)>>>,
) {
    let Ok(c) = Client::connect(addr.as_str()) else { return };
    let mut mine = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let mut tx = c.begin();
        let outcome = match tx.execute(txn_ops(table, i), ExecType::Commit) {
            Ok(_) => match tx.commit_gci() {
                Some(g) if g > 0 => Outcome::Acked(g),
                _ => Outcome::Unknown,
            },
            Err(_) => Outcome::Unknown,
        };
        mine.push((i, outcome));
        if outcome == Outcome::Unknown {
            // The node is gone (or refused for a moment): nothing acknowledged
            // is lost by stopping here; the next round starts new writers.
            break;
        }
    }
    log.lock().expect("log lock").extend(mine);
}

/// Rows present: transaction id -> how many of its two rows.
fn present(c: &Client, table: TableId) -> Result<BTreeMap<i64, u32>, String> {
    let rows = c.scan(ScanSpec::full(table)).and_then(|s| s.collect_all()).map_err(|e| format!("scan: {e}"))?;
    let mut seen = BTreeMap::new();
    for r in rows {
        let (Some(Value::Int(k)), Some(Value::Int(v))) = (r.first(), r.get(1)) else {
            return Err(format!("row of unexpected shape {r:?}"));
        };
        if k / 2 != *v {
            return Err(format!("row {k} holds {v}, written as {}", k / 2));
        }
        *seen.entry(*v).or_insert(0) += 1;
    }
    Ok(seen)
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn main() {
    let a = parse_args();
    let dir = a.dir.clone().unwrap_or_else(|| std::env::temp_dir().join(format!("norr-kill9-{}", std::process::id())));
    if a.dir.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    println!(
        "kill9_durability: {} rounds, {} writers, {} data node(s), dir {}, seed {}",
        a.rounds,
        a.writers,
        a.data_nodes,
        if a.data_nodes == 1 { dir.display().to_string() } else { "a temporary cluster directory".into() },
        a.seed
    );
    let mut rng = Rng(a.seed);
    // Every transaction ever sent and what is known of it; a transaction
    // acknowledged beyond a recovered GCI is gone for good and leaves this map.
    let mut known: BTreeMap<i64, Outcome> = BTreeMap::new();
    let next = Arc::new(AtomicI64::new(0));
    let mut failures: Vec<String> = Vec::new();
    let (mut restarts, mut total_acked, mut total_beyond) = (Vec::new(), 0u64, 0u64);

    let mut nodes = Nodes::start(&a, &dir);
    let table = {
        let c = Client::connect(nodes.addr().as_str()).unwrap_or_else(|e| fail(&format!("connect: {e}")));
        let cols = vec![
            ColumnDef::new("k", ColumnType::BigInt { unsigned: false }).not_null(),
            ColumnDef::new("v", ColumnType::BigInt { unsigned: false }),
        ];
        match c.get_table("kill9") {
            Ok(t) => t.id,
            Err(_) => c.create_table(table_def("kill9", cols, vec![0])).unwrap_or_else(|e| fail(&format!("{e}"))).id,
        }
    };
    if let Ok(c) = Client::connect(nodes.addr().as_str()) {
        // A kept directory: continue after the transactions already there.
        if let Ok(seen) = present(&c, table) {
            let top = seen.keys().next_back().map_or(0, |k| k + 1);
            next.store(top, Ordering::Relaxed);
            known.extend(seen.keys().map(|&k| (k, Outcome::Acked(0))));
        }
    }

    for round in 1..=a.rounds {
        let stop = Arc::new(AtomicBool::new(false));
        let log = Arc::new(Mutex::new(Vec::new()));
        let writers: Vec<_> = (0..a.writers)
            .map(|_| {
                let (addr, next, stop, log) = (nodes.addr(), next.clone(), stop.clone(), log.clone());
                std::thread::spawn(move || writer(addr, table, next, stop, log))
            })
            .collect();
        let load = Duration::from_millis(2_000 + rng.next() % 4_000);
        std::thread::sleep(load);
        let killed = nodes.kill(&mut rng); // SIGKILL, writers still running
        stop.store(true, Ordering::Relaxed);
        for w in writers {
            let _ = w.join();
        }
        let outcomes = std::mem::take(&mut *log.lock().expect("log lock"));
        let acked = outcomes.iter().filter(|(_, o)| matches!(o, Outcome::Acked(_))).count() as u64;
        let last_acked_gci =
            outcomes.iter().filter_map(|(_, o)| if let Outcome::Acked(g) = o { Some(*g) } else { None }).max();
        known.extend(outcomes);
        total_acked += acked;

        let (recovered, took, restored) = match nodes.restart() {
            Ok(r) => r,
            Err(e) => {
                failures.push(format!("round {round}: {e}"));
                break;
            }
        };
        restarts.push(took);
        // Read through each data node: the replicas must agree.
        let mut reads = Vec::new();
        for addr in nodes.addrs() {
            match present_through(&addr, table) {
                Ok(s) => reads.push((addr, s)),
                Err(e) => failures.push(format!("round {round}: {e}")),
            }
        }
        let Some((first_addr, seen)) = reads.first().cloned() else { break };
        for (addr, other) in &reads[1..] {
            if *other != seen {
                failures.push(format!(
                    "round {round}: the rows read through {addr} ({} transactions) differ from those through \
                     {first_addr} ({})",
                    other.len(),
                    seen.len()
                ));
            }
        }
        let (mut lost, mut beyond, mut half, mut stray) = (0u64, 0u64, 0u64, 0u64);
        let mut lost_gcis = std::collections::BTreeSet::new();
        for (&i, &rows) in &seen {
            if rows != 2 {
                half += 1;
            }
            if !known.contains_key(&i) {
                stray += 1;
            }
        }
        let mut gone = Vec::new();
        for (&i, &o) in &known {
            let rows = seen.get(&i).copied().unwrap_or(0);
            match o {
                Outcome::Acked(g) if g <= recovered && rows != 2 => {
                    lost += 1;
                    lost_gcis.insert(g);
                }
                Outcome::Acked(g) if g > recovered => {
                    beyond += 1;
                    if rows != 0 {
                        failures
                            .push(format!("round {round}: transaction {i} of GCI {g} > recovered {recovered} is back"));
                    }
                    gone.push(i);
                }
                // Whether it committed is known now; rounds after this one
                // check it as acknowledged at the recovered GCI.
                Outcome::Unknown if rows == 2 => gone.push(-1 - i),
                Outcome::Unknown => gone.push(i),
                _ => {}
            }
        }
        for g in gone {
            if g < 0 {
                known.insert(-1 - g, Outcome::Acked(recovered));
            } else {
                known.remove(&g);
            }
        }
        total_beyond += beyond;
        if lost > 0 {
            failures.push(format!(
                "round {round}: {lost} acknowledged transactions of GCI <= {recovered} lost (of GCIs {lost_gcis:?})"
            ));
        }
        if half > 0 {
            failures.push(format!("round {round}: {half} transactions half present"));
        }
        if stray > 0 {
            failures.push(format!("round {round}: {stray} transactions present that no writer sent"));
        }
        println!(
            "round {round:2}: wrote {:4.1} s, {acked:6} acknowledged (last GCI {}), recovered to GCI {recovered}, \
             {beyond:3} acknowledged beyond it (network durable only), lost {lost}, restart {:5.2} s, {} rows\
             {killed}{restored}",
            load.as_secs_f64(),
            last_acked_gci.map_or("-".into(), |g| g.to_string()),
            took.as_secs_f64(),
            seen.len() * 2,
        );
    }
    nodes.stop();
    let max = restarts.iter().max().copied().unwrap_or_default();
    println!(
        "summary: {} rounds, {total_acked} transactions acknowledged, {total_beyond} acknowledged beyond the recovered GCI \
         (not yet disk durable at the kill), 0 allowed lost: {}; restart median {:.2} s, max {:.2} s",
        restarts.len(),
        if failures.is_empty() { "none lost" } else { "FAILED" },
        median(&mut restarts).as_secs_f64(),
        max.as_secs_f64(),
    );
    if !a.keep && a.dir.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    if !failures.is_empty() {
        for f in &failures {
            eprintln!("FAIL {f}");
        }
        std::process::exit(1);
    }
}
