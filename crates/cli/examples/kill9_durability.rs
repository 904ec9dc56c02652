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
//! `bash bench/kill9_durability.sh` builds and runs it; alone:
//! `cargo run --release -p norr-cli --example kill9_durability -- --rounds 20`.

use norr_client::blocking::Client;
use norr_client::{table_def, ColumnDef, ColumnType, ExecType, KeyOp, ScanSpec, TableId, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const HELP: &str = "kill9_durability [--norr PATH] [--rounds N (20)] [--writers N (4)] [--dir DIR] [--seed N]
      [--keep]

Runs one data node on DIR (default: a new temporary directory, removed at
the end unless --keep), writes with --writers client threads that record the
GCI of every commit, kills the node with SIGKILL at a random moment (2-6 s
into the round), restarts it from DIR and checks that every transaction
acknowledged up to the recovered GCI is present, none of a later GCI is, and
none is half there. Repeats --rounds times on the same directory. Prints one
line per round and a summary; exit status 1 if a check failed.";

struct Args {
    norr: PathBuf,
    rounds: u32,
    writers: usize,
    dir: Option<PathBuf>,
    seed: u64,
    keep: bool,
}

fn parse_args() -> Args {
    let exe = std::env::current_exe().expect("current exe");
    // target/<profile>/examples/kill9_durability -> target/<profile>/norr
    let default_norr = exe.parent().and_then(|p| p.parent()).map(|p| p.join("norr")).unwrap_or_default();
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64);
    let mut a =
        Args { norr: default_norr, rounds: 20, writers: 4, dir: None, seed: seed.unwrap_or(1) | 1, keep: false };
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

/// xorshift64*: the kill moments (the seed is printed).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
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
    println!("kill9_durability: {} rounds, {} writers, dir {}, seed {}", a.rounds, a.writers, dir.display(), a.seed);
    let mut rng = Rng(a.seed);
    // Every transaction ever sent and what is known of it; a transaction
    // acknowledged beyond a recovered GCI is gone for good and leaves this map.
    let mut known: BTreeMap<i64, Outcome> = BTreeMap::new();
    let next = Arc::new(AtomicI64::new(0));
    let mut failures: Vec<String> = Vec::new();
    let (mut restarts, mut total_acked, mut total_beyond) = (Vec::new(), 0u64, 0u64);

    let mut node = start(&a.norr, &dir);
    let table = {
        let c = Client::connect(node.addr.as_str()).unwrap_or_else(|e| fail(&format!("connect: {e}")));
        let cols = vec![
            ColumnDef::new("k", ColumnType::BigInt { unsigned: false }).not_null(),
            ColumnDef::new("v", ColumnType::BigInt { unsigned: false }),
        ];
        match c.get_table("kill9") {
            Ok(t) => t.id,
            Err(_) => c.create_table(table_def("kill9", cols, vec![0])).unwrap_or_else(|e| fail(&format!("{e}"))).id,
        }
    };
    if let Ok(c) = Client::connect(node.addr.as_str()) {
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
                let (addr, next, stop, log) = (node.addr.clone(), next.clone(), stop.clone(), log.clone());
                std::thread::spawn(move || writer(addr, table, next, stop, log))
            })
            .collect();
        let load = Duration::from_millis(2_000 + rng.next() % 4_000);
        std::thread::sleep(load);
        let _ = node.child.kill(); // SIGKILL, writers still running
        let _ = node.child.wait();
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

        node = start(&a.norr, &dir);
        restarts.push(node.start_time);
        let Some(recovered) = node.recovered else {
            failures.push(format!("round {round}: no \"recovered to GCI\" in the restart report"));
            break;
        };
        let c = match Client::connect(node.addr.as_str()) {
            Ok(c) => c,
            Err(e) => {
                failures.push(format!("round {round}: connect after restart: {e}"));
                break;
            }
        };
        let seen = match present(&c, table) {
            Ok(s) => s,
            Err(e) => {
                failures.push(format!("round {round}: {e}"));
                break;
            }
        };
        let (mut lost, mut beyond, mut half, mut stray) = (0u64, 0u64, 0u64, 0u64);
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
                Outcome::Acked(g) if g <= recovered && rows != 2 => lost += 1,
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
            failures.push(format!("round {round}: {lost} acknowledged transactions of GCI <= {recovered} lost"));
        }
        if half > 0 {
            failures.push(format!("round {round}: {half} transactions half present"));
        }
        if stray > 0 {
            failures.push(format!("round {round}: {stray} transactions present that no writer sent"));
        }
        println!(
            "round {round:2}: wrote {:4.1} s, {acked:6} acknowledged (last GCI {}), recovered to GCI {recovered}, \
             {beyond:3} acknowledged beyond it (network durable only), lost {lost}, restart {:5.2} s, {} rows",
            load.as_secs_f64(),
            last_acked_gci.map_or("-".into(), |g| g.to_string()),
            node.start_time.as_secs_f64(),
            seen.len() * 2,
        );
    }
    let _ = node.child.kill();
    let _ = node.child.wait();
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
