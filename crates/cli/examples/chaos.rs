//! Chaos test with real processes (issue 20, item 11): money transfers
//! through SQL and through the native client while data nodes are killed
//! (`kill -9`) and frozen (`SIGSTOP` past the heartbeat time-out), then the
//! invariants of the bank.
//!
//! The cluster: `norr mgmd`, `--data-nodes` data nodes (`norr datad --mgm`,
//! node groups of `--replicas`) and one SQL node (`norr sqld`), each its own
//! process on loopback. Accounts live in `bank.accounts (id, balance)`; a
//! transfer moves an amount between two accounts and inserts its own row
//! into `bank.transfers (id, src, dst, amount)` in the same transaction.
//! SQL workers use `BEGIN; UPDATE; UPDATE; INSERT; COMMIT`; native workers
//! one batch of two interpreted updates (`balance + delta`) and the insert.
//! Every worker records each transfer's id with its outcome: acknowledged
//! (the commit succeeded), failed (an error the transaction was rolled back
//! with) or unknown (the connection broke or timed out during the commit).
//!
//! The chaos loop, until `--duration` is over: `kill -9` a random data node
//! whose node group keeps a started replica, start it again after a pause;
//! `SIGSTOP` another such node for longer than the heartbeat time-out, then
//! `SIGCONT` (the cluster excludes it; its supervisor restarts it); wait
//! until every node is started again; repeat.
//!
//! At the end, with every node back:
//! * the sum of balances is what it was at the start;
//! * every acknowledged transfer's row is there (exactly once: it is the
//!   primary key), no row exists for a transfer that failed;
//! * no transfer is half applied: every account's balance equals its
//!   initial balance plus the transfers rows present;
//! * every data node is started.
//!
//! It prints the counts (kills, stops, transfers per outcome and error
//! code) and the longest window without any acknowledged transfer, and
//! exits non-zero if an invariant failed.
//!
//! Not part of `cargo test`: `bash tests/chaos/run.sh` (or the long tier
//! of `.ci/run`, `NORR_CI_LONG=1`) builds the `norr` binary and this
//! example and runs it. Alone:
//! `cargo run -p norr-cli --example chaos -- --duration 600`.

#[path = "../tests/support/proc_cluster.rs"]
mod proc_cluster;

use mysql_async::prelude::*;
use norr_client::blocking::Client;
use norr_client::{ClientError, ConnectOptions, DataNodeAddr, ErrorCode, ExecType, KeyOp, Value};
use proc_cluster::{free_port, Cluster, Proc, Rng};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Args {
    norr: PathBuf,
    duration: Duration,
    data_nodes: u16,
    replicas: u8,
    accounts: i64,
    sql_workers: usize,
    native_workers: usize,
    seed: u64,
    /// Kill data nodes (kill -9) each round.
    kill: bool,
    /// Freeze a data node (SIGSTOP) each round.
    freeze: bool,
}

const HELP: &str = "chaos [--norr PATH] [--duration SECS (180)] [--data-nodes N (4)] [--replicas R (2)]
      [--accounts N (64)] [--sql-workers N (3)] [--native-workers N (3)] [--seed N]
      [--faults kill|freeze|both (both)]

Money transfers through SQL and the native client against a cluster of real
processes while data nodes are killed (kill -9) and frozen (SIGSTOP), then
checks: total balance unchanged, every acknowledged transfer present, none
half applied, every node back. Exit status 1 if an invariant failed.";

fn parse_args() -> Args {
    let exe = std::env::current_exe().expect("current exe");
    // target/<profile>/examples/chaos -> target/<profile>/norr
    let default_norr = exe.parent().and_then(|p| p.parent()).map(|p| p.join("norr")).unwrap_or_default();
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64);
    let mut a = Args {
        norr: default_norr,
        duration: Duration::from_secs(180),
        data_nodes: 4,
        replicas: 2,
        accounts: 64,
        sql_workers: 3,
        native_workers: 3,
        seed: seed.unwrap_or(1),
        kill: true,
        freeze: true,
    };
    let mut it = std::env::args().skip(1);
    fn num(it: &mut impl Iterator<Item = String>, arg: &str) -> u64 {
        it.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{arg} needs a number (see --help)"))
    }
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--norr" => a.norr = PathBuf::from(it.next().expect("--norr PATH")),
            "--duration" => a.duration = Duration::from_secs(num(&mut it, &arg)),
            "--data-nodes" => a.data_nodes = num(&mut it, &arg) as u16,
            "--replicas" => a.replicas = num(&mut it, &arg) as u8,
            "--accounts" => a.accounts = num(&mut it, &arg) as i64,
            "--sql-workers" => a.sql_workers = num(&mut it, &arg) as usize,
            "--native-workers" => a.native_workers = num(&mut it, &arg) as usize,
            "--seed" => a.seed = num(&mut it, &arg),
            "--faults" => match it.next().as_deref() {
                Some("kill") => a.freeze = false,
                Some("freeze") => a.kill = false,
                Some("both") => {}
                other => panic!("--faults takes kill, freeze or both, not {other:?} (see --help)"),
            },
            "--help" | "-h" => {
                println!("{HELP}");
                std::process::exit(0);
            }
            other => panic!("unknown argument {other} (see --help)"),
        }
    }
    assert!(a.norr.exists(), "no norr binary at {} (build it, or pass --norr PATH)", a.norr.display());
    assert!(a.replicas >= 2, "--replicas must be at least 2: a kill needs a surviving replica");
    assert!(a.data_nodes.is_multiple_of(a.replicas as u16), "--data-nodes must be a multiple of --replicas");
    a
}

const INITIAL_BALANCE: i64 = 1_000;

/// What a worker learned about one transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Acked,
    Failed,
    Unknown,
}

#[derive(Debug, Clone, Copy)]
struct Transfer {
    src: i64,
    dst: i64,
    amount: i64,
}

/// Everything the workers recorded.
#[derive(Default)]
struct Ledger {
    transfers: BTreeMap<i64, (Transfer, Outcome)>,
    /// Error label ("sql 1297/4010", "native 266", ...) -> count.
    errors: BTreeMap<String, u64>,
    /// When each acknowledged transfer's commit returned, by transfer id
    /// (a round's check says when a lost one was acknowledged).
    acked_when: BTreeMap<i64, Instant>,
}

impl Ledger {
    fn record(&mut self, id: i64, t: Transfer, outcome: Outcome, error: Option<String>) {
        self.transfers.insert(id, (t, outcome));
        if let Some(e) = error {
            *self.errors.entry(e).or_default() += 1;
        }
        if outcome == Outcome::Acked {
            self.acked_when.insert(id, Instant::now());
        }
    }
}

struct Shared {
    stop: AtomicBool,
    ledger: Mutex<Ledger>,
    accounts: i64,
}

fn pick_transfer(rng: &mut Rng, accounts: i64) -> Transfer {
    let src = rng.below(accounts as u64) as i64;
    let mut dst = rng.below(accounts as u64 - 1) as i64;
    if dst >= src {
        dst += 1;
    }
    Transfer { src, dst, amount: 1 + rng.below(50) as i64 }
}

fn sql_opts(port: u16) -> mysql_async::Opts {
    mysql_async::OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some("root"))
        .prefer_socket(false)
        .into()
}

/// The NDB error inside a MySQL 1297 message ("Got temporary error N ...").
fn sql_error_label(e: &mysql_async::Error) -> (String, bool) {
    match e {
        mysql_async::Error::Server(s) => {
            let ndb = s
                .message
                .split("error ")
                .nth(1)
                .and_then(|t| t.split_whitespace().next())
                .filter(|n| n.chars().all(|c| c.is_ascii_digit()))
                .map(|n| format!("/{n}"))
                .unwrap_or_default();
            (format!("sql {}{ndb}", s.code), true)
        }
        other => {
            let kind = match other {
                mysql_async::Error::Io(_) => "io",
                mysql_async::Error::Driver(_) => "driver",
                _ => "other",
            };
            (format!("sql {kind}"), false)
        }
    }
}

async fn sql_transfer(conn: &mut mysql_async::Conn, id: i64, t: Transfer) -> Result<(), (mysql_async::Error, bool)> {
    // (error, at commit): an error before COMMIT rolls the transaction back.
    let stmts = [
        "BEGIN".to_string(),
        format!("UPDATE bank.accounts SET balance = balance - {} WHERE id = {}", t.amount, t.src),
        format!("UPDATE bank.accounts SET balance = balance + {} WHERE id = {}", t.amount, t.dst),
        format!("INSERT INTO bank.transfers (id, src, dst, amount) VALUES ({id}, {}, {}, {})", t.src, t.dst, t.amount),
    ];
    for s in &stmts {
        if let Err(e) = conn.query_drop(s.as_str()).await {
            let _ = conn.query_drop("ROLLBACK").await;
            return Err((e, false));
        }
    }
    conn.query_drop("COMMIT").await.map_err(|e| (e, true))
}

async fn sql_worker(shared: Arc<Shared>, port: u16, worker: usize, seed: u64) {
    let mut rng = Rng(seed | 1);
    let mut seq = 0i64;
    let mut conn: Option<mysql_async::Conn> = None;
    while !shared.stop.load(Ordering::Relaxed) {
        if conn.is_none() {
            match mysql_async::Conn::new(sql_opts(port)).await {
                Ok(c) => conn = Some(c),
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            }
        }
        seq += 1;
        let id = (worker as i64) * 1_000_000_000 + seq;
        let t = pick_transfer(&mut rng, shared.accounts);
        let c = conn.as_mut().expect("connected");
        let (outcome, error) = match sql_transfer(c, id, t).await {
            Ok(()) => (Outcome::Acked, None),
            Err((e, at_commit)) => {
                let (label, server) = sql_error_label(&e);
                if !server {
                    conn = None; // the connection is gone
                }
                // An error before COMMIT rolled the transaction back. At
                // COMMIT, a broken connection, a request time-out (1205),
                // "outcome unknown" (1296, NDB 4013) and a lost data node
                // connection (1297, NDB 4009) leave the outcome unknown;
                // other errors (1297 with 4010, 266, ...) aborted it.
                let unknown = at_commit
                    && (!server || label == "sql 1205" || label.starts_with("sql 1296") || label == "sql 1297/4009");
                let outcome = if unknown { Outcome::Unknown } else { Outcome::Failed };
                (outcome, Some(label))
            }
        };
        shared.ledger.lock().unwrap().record(id, t, outcome, error);
    }
}

fn native_worker(shared: Arc<Shared>, client: Client, accounts: u32, transfers: u32, worker: usize, seed: u64) {
    let mut rng = Rng(seed | 1);
    let mut seq = 0i64;
    while !shared.stop.load(Ordering::Relaxed) {
        seq += 1;
        let id = (worker as i64) * 1_000_000_000 + seq;
        let t = pick_transfer(&mut rng, shared.accounts);
        let ops = vec![
            KeyOp {
                increments: vec![(1, Value::Int(-t.amount))],
                ..KeyOp::update(accounts, vec![Value::Int(t.src)], vec![])
            },
            KeyOp {
                increments: vec![(1, Value::Int(t.amount))],
                ..KeyOp::update(accounts, vec![Value::Int(t.dst)], vec![])
            },
            KeyOp::insert(
                transfers,
                vec![Value::Int(id)],
                vec![(1, Value::Int(t.src)), (2, Value::Int(t.dst)), (3, Value::Int(t.amount))],
            ),
        ];
        let mut txn = client.begin();
        let (outcome, error) = match txn.execute(ops, ExecType::Commit) {
            Ok(_) => (Outcome::Acked, None),
            Err(e) => {
                let label = match e.code() {
                    Some(c) => format!("native {}", c.code()),
                    None => {
                        format!("native {}", if matches!(e, ClientError::Timeout) { "timeout" } else { "protocol" })
                    }
                };
                // A node's refusal is definite, except "outcome unknown"
                // (4013); a timeout or a lost connection leaves it unknown.
                let outcome = match &e {
                    ClientError::Node(n) if n.code != ErrorCode::OutcomeUnknown => Outcome::Failed,
                    _ => Outcome::Unknown,
                };
                if outcome == Outcome::Unknown {
                    std::thread::sleep(Duration::from_millis(50));
                }
                (outcome, Some(label))
            }
        };
        shared.ledger.lock().unwrap().record(id, t, outcome, error);
    }
}

/// Data nodes that mgmd reports connected and started (mgmd itself, also
/// "started" in its view, is left out).
fn started(cluster: &Cluster) -> BTreeSet<u16> {
    cluster
        .view()
        .map(|v| {
            v.nodes
                .iter()
                .filter(|n| n.kind == norr_mgmd::config::NodeKind::Data)
                .filter(|n| n.connected && n.state == Some(norr_mgmd::protocol::NodeState::Started))
                .map(|n| n.id)
                .collect()
        })
        .unwrap_or_default()
}

/// Wait until every data node is started; how long it took (None: not
/// within `limit`). Processes that exited are started again.
fn wait_all_started(cluster: &mut Cluster, limit: Duration) -> Option<Duration> {
    let t0 = Instant::now();
    let all: BTreeSet<u16> = cluster.data.iter().map(|d| d.0).collect();
    while t0.elapsed() < limit {
        respawn_exited(cluster);
        if started(cluster) == all {
            return Some(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    None
}

/// A data node process that ended (its supervisor gave up, or the cluster
/// shut it down for good) is started again; its exit status and last log
/// lines say why.
fn respawn_exited(cluster: &mut Cluster) {
    for i in 0..cluster.nodes.len() {
        let exited = match cluster.nodes[i].as_mut() {
            Some(p) => match p.child.try_wait() {
                Ok(Some(status)) => Some((status, p.log_text())),
                _ => None,
            },
            None => None,
        };
        if let Some((status, log)) = exited {
            let lines: Vec<&str> = log.lines().collect();
            // A panic's message comes first, then its backtrace: show the
            // message (from the last "panicked at") and the last lines.
            let from = lines.iter().rposition(|l| l.contains("panicked at")).unwrap_or(lines.len());
            let mut shown: Vec<&str> = lines[from..lines.len().min(from + 4)].to_vec();
            shown.extend(&lines[lines.len().saturating_sub(6).max(from + 4).min(lines.len())..]);
            let tail = shown.join("\n    ");
            eprintln!(
                "chaos: data node {} exited by itself ({status}); starting it again; its last log lines:\n    {tail}",
                cluster.data[i].0
            );
            cluster.nodes[i] = Some(cluster.spawn_node(i));
        }
    }
}

/// Index (into `cluster.data`) of a random node whose node group keeps
/// another started node, leaving out `except`.
fn pick_victim(rng: &mut Rng, cluster: &Cluster, replicas: u8, except: &[usize]) -> Option<usize> {
    let up = started(cluster);
    let candidates: Vec<usize> = (0..cluster.data.len())
        .filter(|i| !except.contains(i) && up.contains(&cluster.data[*i].0))
        .filter(|i| {
            let group = i / replicas as usize;
            (0..cluster.data.len())
                .filter(|j| j / replicas as usize == group && j != i && !except.contains(j))
                .any(|j| up.contains(&cluster.data[j].0))
        })
        .collect();
    (!candidates.is_empty()).then(|| candidates[rng.below(candidates.len() as u64) as usize])
}

fn spawn_sqld(cluster: &Cluster, port: u16) -> Proc {
    let log = cluster.dir.0.join("sqld.log");
    let data: Vec<&str> = cluster.data.iter().map(|d| d.1.as_str()).collect();
    let child = Command::new(&cluster.norr)
        .args(["sqld", "--listen", &format!("127.0.0.1:{port}"), "--data-node", &data.join(",")])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start norr sqld");
    Proc { child, log }
}

async fn sql_setup(port: u16, accounts: i64) -> mysql_async::Conn {
    let deadline = Instant::now() + proc_cluster::START;
    let mut conn = loop {
        match mysql_async::Conn::new(sql_opts(port)).await {
            Ok(c) => break c,
            Err(e) => {
                assert!(Instant::now() < deadline, "norr sqld did not accept a connection: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    for s in [
        "CREATE DATABASE bank",
        "CREATE TABLE bank.accounts (id BIGINT NOT NULL PRIMARY KEY, balance BIGINT NOT NULL)",
        "CREATE TABLE bank.transfers (id BIGINT NOT NULL PRIMARY KEY, src BIGINT NOT NULL, dst BIGINT NOT NULL, amount BIGINT NOT NULL)",
    ] {
        conn.query_drop(s).await.unwrap_or_else(|e| panic!("{s}: {e}"));
    }
    let rows: Vec<String> = (0..accounts).map(|i| format!("({i}, {INITIAL_BALANCE})")).collect();
    conn.query_drop(format!("INSERT INTO bank.accounts (id, balance) VALUES {}", rows.join(", ")))
        .await
        .expect("insert the accounts");
    conn
}

/// Run a final query, retrying temporary errors for a while (the cluster
/// may still settle after the last fault).
async fn final_query<T: FromRow + Send + 'static>(port: u16, q: &str) -> Vec<T> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let res = match mysql_async::Conn::new(sql_opts(port)).await {
            Ok(mut c) => c.query::<T, _>(q).await,
            Err(e) => Err(e),
        };
        match res {
            Ok(rows) => return rows,
            Err(e) => {
                assert!(Instant::now() < deadline, "{q}: {e}");
                eprintln!("chaos: {q}: {e} (retrying)");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

fn main() {
    let a = parse_args();
    println!(
        "chaos: seed {} duration {} s, {} data nodes x {} replicas, {} accounts, {} SQL + {} native workers",
        a.seed,
        a.duration.as_secs(),
        a.data_nodes,
        a.replicas,
        a.accounts,
        a.sql_workers,
        a.native_workers
    );
    let mut rng = Rng(a.seed | 1);
    let mut cluster = Cluster::start(&a.norr, "chaos", a.data_nodes, a.replicas, "");
    let ids: Vec<u16> = cluster.data.iter().map(|d| d.0).collect();
    cluster.wait_started(&ids);
    let sql_port = free_port();
    let mut sqld = Some(spawn_sqld(&cluster, sql_port));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let c = sql_setup(sql_port, a.accounts).await;
        let _ = c.disconnect().await;
    });

    let addrs = DataNodeAddr::parse_list(&cluster.data.iter().map(|d| d.1.clone()).collect::<Vec<_>>().join(","))
        .expect("data node addresses");
    let opts = ConnectOptions { request_timeout: Some(Duration::from_secs(20)), ..ConnectOptions::default() };
    let client = Client::connect_cluster(&addrs, opts.clone()).expect("native client connects");
    let accounts_def = client.get_table("bank/accounts").expect("the SQL table, natively");
    let transfers_def = client.get_table("bank/transfers").expect("the SQL table, natively");
    // Column ids the native workers write (id is the key, column 0).
    let col = |def: &norr_client::TableDef, name: &str| def.columns.iter().position(|c| c.name == name);
    assert_eq!(col(&accounts_def, "balance"), Some(1), "{accounts_def:?}");
    assert_eq!(
        ["src", "dst", "amount"].map(|n| col(&transfers_def, n)),
        [Some(1), Some(2), Some(3)],
        "{transfers_def:?}"
    );

    let shared = Arc::new(Shared { stop: AtomicBool::new(false), ledger: Mutex::default(), accounts: a.accounts });
    let mut workers = Vec::new();
    for w in 0..a.sql_workers {
        let s = shared.clone();
        let seed = rng.next();
        workers.push(rt.spawn(sql_worker(s, sql_port, w + 1, seed)));
    }
    let mut native = Vec::new();
    for w in 0..a.native_workers {
        let s = shared.clone();
        let c = Client::connect_cluster(&addrs, opts.clone()).expect("native client connects");
        let (acc, tr, seed) = (accounts_def.id, transfers_def.id, rng.next());
        let worker = 1000 + w;
        native.push(std::thread::spawn(move || native_worker(s, c, acc, tr, worker, seed)));
    }

    // The chaos loop.
    let started_at = Instant::now();
    let (kills, stops) = (AtomicU64::new(0), AtomicU64::new(0));
    let mut recoveries: Vec<Duration> = Vec::new();
    let mut stuck = None;
    let (mut round, mut reported_lost) = (0u64, BTreeSet::new());
    while started_at.elapsed() < a.duration {
        std::thread::sleep(Duration::from_millis(2_000 + rng.below(4_000)));
        progress(&shared, started_at);
        let Some(victim) = pick_victim(&mut rng, &cluster, a.replicas, &[]) else {
            respawn_exited(&mut cluster);
            continue;
        };
        let id = cluster.data[victim].0;
        // Freeze another node meanwhile, if its group keeps a replica
        // without it (and without the killed one); with --faults freeze,
        // the victim itself. With one node group there is no such node:
        // then every other round freezes the victim instead of killing it.
        let (kill, frozen) = match (a.kill, a.freeze) {
            (true, false) => (true, None),
            (false, _) => (false, Some(victim)),
            (true, true) => match pick_victim(&mut rng, &cluster, a.replicas, &[victim]) {
                Some(other) => (true, Some(other)),
                None if rng.below(2) == 0 => (false, Some(victim)),
                None => (true, None),
            },
        };
        if kill {
            println!("chaos: {:>5.1} s kill -9 data node {id}", started_at.elapsed().as_secs_f64());
            cluster.kill(victim);
            kills.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(f) = frozen {
            println!("chaos: {:>5.1} s SIGSTOP data node {}", started_at.elapsed().as_secs_f64(), cluster.data[f].0);
            cluster.signal(f, "-STOP");
            stops.fetch_add(1, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(1_500 + rng.below(2_500)));
        if let Some(f) = frozen {
            println!("chaos: {:>5.1} s SIGCONT data node {}", started_at.elapsed().as_secs_f64(), cluster.data[f].0);
            cluster.signal(f, "-CONT");
        }
        std::thread::sleep(Duration::from_millis(rng.below(1_000)));
        if kill {
            println!("chaos: {:>5.1} s start data node {id}", started_at.elapsed().as_secs_f64());
            cluster.nodes[victim] = Some(cluster.spawn_node(victim));
        }
        match wait_all_started(&mut cluster, Duration::from_secs(180)) {
            Some(d) => recoveries.push(d),
            None => {
                stuck = Some(format!("data nodes not all started 180 s after a fault: {:?}", started(&cluster)));
                break;
            }
        }
        round += 1;
        rt.block_on(check_round(&shared, sql_port, started_at, round, &mut reported_lost));
    }
    shared.stop.store(true, Ordering::Relaxed);
    for w in native {
        w.join().expect("native worker");
    }
    rt.block_on(async {
        for w in workers {
            w.await.expect("sql worker");
        }
    });
    let back = wait_all_started(&mut cluster, Duration::from_secs(180));

    // The invariants.
    let balances: Vec<(i64, i64)> = rt.block_on(final_query(sql_port, "SELECT id, balance FROM bank.accounts"));
    let rows: Vec<(i64, i64, i64, i64)> =
        rt.block_on(final_query(sql_port, "SELECT id, src, dst, amount FROM bank.transfers"));
    let ledger = std::mem::take(&mut *shared.ledger.lock().unwrap());
    let mut failures: Vec<String> = Vec::new();
    if let Some(s) = stuck {
        failures.push(s);
    }
    if back.is_none() {
        failures.push(format!("not every data node started at the end: {:?}", started(&cluster)));
    }
    if balances.len() as i64 != a.accounts {
        failures.push(format!("{} accounts, expected {}", balances.len(), a.accounts));
    }
    let total: i64 = balances.iter().map(|b| b.1).sum();
    if total != a.accounts * INITIAL_BALANCE {
        failures.push(format!("total balance {total}, expected {}", a.accounts * INITIAL_BALANCE));
    }
    let present: BTreeMap<i64, Transfer> =
        rows.iter().map(|r| (r.0, Transfer { src: r.1, dst: r.2, amount: r.3 })).collect();
    if present.len() != rows.len() {
        failures.push(format!("{} transfer rows with {} distinct ids", rows.len(), present.len()));
    }
    let mut count = BTreeMap::<&str, u64>::new();
    let (mut missing, mut failed_applied, mut unknown_applied, mut stray) = (0, 0, 0, 0);
    for (id, (t, outcome)) in &ledger.transfers {
        let here = present.get(id);
        if let Some(p) = here {
            if (p.src, p.dst, p.amount) != (t.src, t.dst, t.amount) {
                failures.push(format!("transfer {id} stored as {p:?}, sent as {t:?}"));
            }
        }
        match outcome {
            Outcome::Acked => {
                *count.entry("acknowledged").or_default() += 1;
                if here.is_none() {
                    missing += 1;
                }
            }
            Outcome::Failed => {
                *count.entry("failed").or_default() += 1;
                if here.is_some() {
                    failed_applied += 1;
                }
            }
            Outcome::Unknown => {
                *count.entry("unknown").or_default() += 1;
                if here.is_some() {
                    unknown_applied += 1;
                }
            }
        }
    }
    for id in present.keys() {
        if !ledger.transfers.contains_key(id) {
            stray += 1;
        }
    }
    if missing > 0 {
        failures.push(format!("{missing} acknowledged transfers are missing"));
    }
    if failed_applied > 0 {
        failures.push(format!("{failed_applied} transfers that failed with an error were applied"));
    }
    if stray > 0 {
        failures.push(format!("{stray} transfer rows no worker sent"));
    }
    // No half-applied transfer: every balance is the replay of the rows.
    let mut expect: BTreeMap<i64, i64> = (0..a.accounts).map(|i| (i, INITIAL_BALANCE)).collect();
    for t in present.values() {
        *expect.entry(t.src).or_default() -= t.amount;
        *expect.entry(t.dst).or_default() += t.amount;
    }
    let wrong: Vec<String> = balances
        .iter()
        .filter(|(id, b)| expect.get(id) != Some(b))
        .map(|(id, b)| format!("account {id}: {b}, transfers say {:?}", expect.get(id)))
        .collect();
    if !wrong.is_empty() {
        failures.push(format!("half-applied transfers: {}", wrong.join("; ")));
    }
    // The longest window without an acknowledged transfer.
    let mut acked: Vec<Instant> = ledger.acked_when.values().copied().collect();
    acked.sort_unstable();
    let mut longest = Duration::ZERO;
    let mut prev = started_at;
    for t in acked.iter().copied().filter(|t| *t >= started_at) {
        longest = longest.max(t.duration_since(prev));
        prev = t;
    }

    println!("chaos: ran {:.0} s (seed {})", started_at.elapsed().as_secs_f64(), a.seed);
    println!(
        "chaos: faults: {} kill -9, {} SIGSTOP; recovery to all started: median {:.1} s, max {:.1} s",
        kills.load(Ordering::Relaxed),
        stops.load(Ordering::Relaxed),
        median_secs(&mut recoveries),
        recoveries.iter().max().map_or(0.0, |d| d.as_secs_f64())
    );
    println!(
        "chaos: transfers: {} acknowledged, {} failed, {} unknown ({} of those applied); {} rows present",
        count.get("acknowledged").unwrap_or(&0),
        count.get("failed").unwrap_or(&0),
        count.get("unknown").unwrap_or(&0),
        unknown_applied,
        present.len()
    );
    for (e, n) in &ledger.errors {
        println!("chaos:   error {e}: {n}");
    }
    println!("chaos: longest window without an acknowledged transfer: {:.2} s", longest.as_secs_f64());
    println!("chaos: total balance {total} (expected {})", a.accounts * INITIAL_BALANCE);
    drop(client);
    if let Some(mut p) = sqld.take() {
        let _ = p.child.kill();
        let _ = p.child.wait();
    }
    if failures.is_empty() {
        println!("chaos: OK: every invariant holds");
    } else {
        for f in &failures {
            println!("chaos: FAILED: {f}");
        }
        println!("chaos: logs in {} (kept)", cluster.dir.0.display());
        // Keep the logs for a look: the directory is removed on drop.
        let keep = cluster.dir.0.with_extension("kept");
        let _ = std::fs::rename(&cluster.dir.0, &keep);
        println!("chaos: logs moved to {}", keep.display());
        // exit() runs no destructors: stop the cluster's processes first.
        drop(cluster);
        std::process::exit(1);
    }
}

/// After each round's recovery: are the transfers acknowledged so far all
/// there, and is the total balance (read under shared locks, so one
/// consistent state) unchanged? The final check says whether the run lost
/// anything; this says in which round, so that the nodes' logs of that
/// round's faults can be read. Only prints: the final check decides.
async fn check_round(shared: &Shared, port: u16, started_at: Instant, round: u64, reported: &mut BTreeSet<i64>) {
    let acked: BTreeMap<i64, Instant> = shared.ledger.lock().unwrap().acked_when.clone();
    let ids: Vec<i64> = final_query(port, "SELECT id FROM bank.transfers").await;
    let present: BTreeSet<i64> = ids.into_iter().collect();
    let lost: Vec<(i64, Instant)> = acked
        .iter()
        .filter(|(id, _)| !present.contains(id) && !reported.contains(*id))
        .map(|(i, t)| (*i, *t))
        .collect();
    let at = started_at.elapsed().as_secs_f64();
    if !lost.is_empty() {
        let secs = |t: Instant| t.duration_since(started_at).as_secs_f64();
        let first = lost.iter().map(|l| l.1).min().expect("some");
        let last = lost.iter().map(|l| l.1).max().expect("some");
        println!(
            "chaos: {at:>5.1} s round {round}: {} acknowledged transfers LOST since the last check, acknowledged between {:.2} s and {:.2} s (ids {:?}...)",
            lost.len(),
            secs(first),
            secs(last),
            lost.iter().take(5).map(|l| l.0).collect::<Vec<_>>()
        );
        reported.extend(lost.iter().map(|l| l.0));
    }
    let total: Vec<(i64,)> = locked_total(port).await;
    if let Some((t,)) = total.first() {
        if *t != shared.accounts * INITIAL_BALANCE {
            println!(
                "chaos: {at:>5.1} s round {round}: total balance {t}, expected {}",
                shared.accounts * INITIAL_BALANCE
            );
        }
    }
}

/// The total balance read under shared row locks in one transaction (a
/// committed read of 64 rows while transfers run sees no single state).
/// Empty if it keeps failing (the round's check is advisory).
async fn locked_total(port: u16) -> Vec<(i64,)> {
    for _ in 0..20 {
        let Ok(mut c) = mysql_async::Conn::new(sql_opts(port)).await else {
            tokio::time::sleep(Duration::from_millis(250)).await;
            continue;
        };
        let r = async {
            c.query_drop("BEGIN").await?;
            let rows: Vec<(i64,)> =
                c.query("SELECT CAST(SUM(balance) AS SIGNED) FROM bank.accounts LOCK IN SHARE MODE").await?;
            c.query_drop("COMMIT").await?;
            Ok::<_, mysql_async::Error>(rows)
        }
        .await;
        match r {
            Ok(rows) => return rows,
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
    Vec::new()
}

/// One line of counts so far (a run that only fails shows at once).
fn progress(shared: &Shared, started_at: Instant) {
    let l = shared.ledger.lock().unwrap();
    let mut n = [0u64; 3];
    for (_, o) in l.transfers.values() {
        n[*o as usize] += 1;
    }
    let last: Vec<String> = l.errors.iter().map(|(e, c)| format!("{e}: {c}")).collect();
    println!(
        "chaos: {:>5.1} s transfers: {} acknowledged, {} failed, {} unknown; errors {{{}}}",
        started_at.elapsed().as_secs_f64(),
        n[0],
        n[1],
        n[2],
        last.join(", ")
    );
}

fn median_secs(v: &mut [Duration]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable();
    v[v.len() / 2].as_secs_f64()
}
