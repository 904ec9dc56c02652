//! `norr`: the NorrDB command-line tool.

mod account_reader;
mod config;
mod datad_cluster;
mod mgm;
mod mgmd;
mod ports;
mod secret;
mod up;
mod up_cluster;

use anyhow::Context;
use clap::{Parser, Subcommand};
use config::KnobArgs;
use norr_runtime::{start_data_node_with_options, DataNodeConfig, RuntimeOptions};
use std::net::SocketAddr;

/// mimalloc (see crates/alloc for why, and why not through the `mimalloc`
/// crate). Redis, the native benchmark's yardstick, ships with jemalloc for
/// the same reason.
#[global_allocator]
static GLOBAL: norr_alloc::Allocator = norr_alloc::Allocator;

/// NorrDB: an in-memory, distributed, transactional database in the style of
/// MySQL NDB Cluster.
///
/// Start here: `norr up` runs a local cluster on loopback. Logging follows
/// RUST_LOG (default "info"), e.g. RUST_LOG=norr_runtime=debug.
#[derive(Debug, Parser)]
#[command(name = "norr", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    cmd: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a data node: holds partitions in memory and executes transactions
    /// for API clients (native protocol).
    Datad(DatadArgs),
    /// Start a local cluster on loopback: mgmd, 2 data nodes (replicas = 2,
    /// each its own process) and a SQL node; print how to connect; run
    /// until Ctrl-C, which stops everything in order.
    Up(up::UpArgs),
    /// Run a SQL node: MySQL protocol front end on the native API of a data
    /// node. Connect with `mysql -h127.0.0.1 -P3306 -uroot`.
    Sqld(norr_sql::server::SqldArgs),
    /// Native-API load generator (flexAsynch style): threads, in-flight
    /// batches, record size and operation mix; prints throughput and latency
    /// percentiles. Run against `norr up` or `norr datad`.
    Bench(norr_client::bench::BenchArgs),
    /// Run the management server: serves one cluster configuration file to
    /// data nodes, SQL nodes and clients, arbitrates network splits, and
    /// takes `norr mgm` commands.
    Mgmd(mgmd::MgmdArgs),
    /// The management client (like ndb_mgm): show the cluster, stop, start
    /// and restart data nodes.
    Mgm(mgm::MgmArgs),
}

#[derive(Debug, clap::Args)]
struct DatadArgs {
    /// This data node's id (1..=99; 100 and up are handed to API clients).
    /// Default 1 for a lone node; required with --mgm.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=99))]
    node_id: Option<u16>,
    /// Join a cluster: fetch the configuration (other data nodes, node
    /// groups, every knob) from the management server at HOST:PORT (several
    /// comma separated are tried in order). Knob flags are then refused: the
    /// cluster file configures every data node.
    #[arg(long, value_name = "HOST:PORT", requires = "node_id")]
    mgm: Option<String>,
    /// Address to accept API connections on (native protocol). Default
    /// 127.0.0.1:2202 for a lone node; with --mgm, the node's host and port
    /// in the cluster file.
    #[arg(long, value_name = "ADDR:PORT")]
    listen: Option<SocketAddr>,
    /// Also accept API connections on this Unix-domain socket, for SQL nodes
    /// and clients on the same host (`norr sqld --data-node unix:PATH`):
    /// cheaper per message than loopback TCP. A stale socket file is
    /// replaced; one a live node listens on is an error.
    #[arg(long, value_name = "PATH")]
    socket: Option<std::path::PathBuf>,
    /// Threads running the node. Only 1 is implemented: one event loop runs
    /// the network and every block (right for 2-core machines).
    #[arg(long, default_value_t = 1, value_name = "N")]
    threads: u32,
    /// Keep the node's data in this directory (created if missing): a REDO
    /// log of every commit, a global checkpoint every gcp_interval_ms, the
    /// schema. At start the node recovers every transaction up to the last
    /// complete global checkpoint (also after kill -9). Without it the
    /// node keeps nothing: a restart starts empty. One process per
    /// directory (norr.lock); a directory of a newer format is refused.
    /// With --mgm it overrides the node's `data_dir` in the cluster file.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<std::path::PathBuf>,
    /// With --mgm: keep nothing on disk, whatever the cluster file's
    /// data_dir says (a restart of every data node loses every row).
    #[arg(long, conflicts_with = "data_dir", requires = "mgm")]
    in_memory: bool,
    /// File holding the cluster secret (one line; NORR_CLUSTER_SECRET
    /// otherwise). With it every API connection (SQL nodes, clients) must
    /// prove the secret before it is served. With --mgm it is needed when
    /// the cluster file says `api_auth = "secret"` (the default when it has
    /// a secret). A lone node without one serves anyone who reaches its port.
    #[arg(long, value_name = "FILE")]
    secret_file: Option<std::path::PathBuf>,
    /// Print the effective configuration (file + flags) as TOML and exit.
    #[arg(long)]
    print_config: bool,
    #[command(flatten)]
    knobs: KnobArgs,
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    init_logging();
    let r = match cli.cmd {
        Command::Datad(a) => datad(a),
        Command::Up(a) => up::run(a),
        Command::Bench(a) => norr_client::bench::run_bench(a),
        Command::Sqld(a) => norr_sql::server::run_sqld(a),
        Command::Mgmd(a) => mgmd::run(a),
        Command::Mgm(a) => mgm::run(a),
    };
    match r {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("norr: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn datad(a: DatadArgs) -> anyhow::Result<()> {
    if let Some(mgm) = &a.mgm {
        if a.knobs.any_set() || a.print_config || a.socket.is_some() {
            anyhow::bail!(
                "with --mgm the cluster file configures the data node: leave out --config, knob flags, --set, \
                 --print-config and --socket (see `norr mgmd --check`)"
            );
        }
        let node_id = a.node_id.context("--mgm needs --node-id N (the data node's id in the cluster file)")?;
        let secret = secret::from_flag_or_env(a.secret_file.as_deref())?;
        return datad_cluster::run(mgm, node_id, a.listen, a.data_dir.clone(), a.in_memory, secret);
    }
    let node_id = a.node_id.unwrap_or(1);
    let listen = a.listen.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 2202)));
    let knobs = a.knobs.load()?;
    if a.print_config {
        print!("{}", config::knobs_to_toml(&knobs));
        return Ok(());
    }
    if a.threads != 1 {
        anyhow::bail!("--threads {}: only the single event-loop layout (--threads 1) is implemented", a.threads);
    }
    let cfg = DataNodeConfig { node_id, listen, knobs, cluster: None };
    // Held until the node stops: a second process on the directory is refused.
    let lock = match &a.data_dir {
        Some(dir) => Some(norr_runtime::fs::open_data_dir(dir, node_id)?),
        None => None,
    };
    if let Some(l) = &lock {
        eprintln!("norr datad: data directory {}", l.path().display());
    }
    let api_secret = secret::from_flag_or_env(a.secret_file.as_deref())?;
    if api_secret.is_none() {
        tracing::warn!(
            "no cluster secret (--secret-file or NORR_CLUSTER_SECRET): anyone who reaches {listen} can read and \
             write every row"
        );
    }
    let opts = RuntimeOptions {
        api_secret,
        unix_socket: a.socket.clone(),
        data_dir: lock.as_ref().map(|l| l.path().to_path_buf()),
        ..RuntimeOptions::default()
    };
    let node =
        start_data_node_with_options(cfg, opts).with_context(|| format!("cannot start data node on {listen}"))?;
    match &a.socket {
        Some(p) => eprintln!(
            "norr datad: data node {} listening on {} and {} (Ctrl-C stops it)",
            node_id,
            node.local_addr(),
            p.display()
        ),
        None => eprintln!("norr datad: data node {node_id} listening on {} (Ctrl-C stops it)", node.local_addr()),
    }
    let stopper = node.stopper();
    ctrlc::set_handler(move || stopper.stop()).context("cannot install the Ctrl-C handler")?;
    node.join().context("data node failed")?;
    eprintln!("norr datad: stopped");
    Ok(())
}
