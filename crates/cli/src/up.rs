//! `norr up`: a local cluster on loopback, in this process. The SQL node
//! reaches the data node through an in-process link (no system calls between
//! them) unless `--sql-link tcp` asks for the native protocol's TCP port.

use crate::config::KnobArgs;
use anyhow::Context;
use norr_runtime::{start_data_node, DataNodeConfig, LocalConnector};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SqlLink {
    Local,
    Tcp,
}

impl SqlLink {
    fn describe(self) -> &'static str {
        match self {
            SqlLink::Local => "an in-process link",
            SqlLink::Tcp => "native protocol TCP",
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// Data nodes to start, each its own `norr datad` process (kill one and
    /// the cluster goes on). 1 keeps everything in this process: one data
    /// node, no replication, no mgmd.
    #[arg(long, default_value_t = 2, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=48))]
    pub data_nodes: u16,
    /// Copies of every partition (1..=4); data nodes form node groups of this
    /// many, so --data-nodes must be a multiple of it. Default: 2, or 1 with
    /// --data-nodes 1.
    #[arg(long, value_name = "R", value_parser = clap::value_parser!(u8).range(1..=4))]
    pub replicas: Option<u8>,
    /// Port of the management server (mgmd) on 127.0.0.1 (`norr mgm --mgm`).
    #[arg(long, default_value_t = 1186, value_name = "PORT")]
    pub mgm_port: u16,
    /// Where the cluster keeps its files: the generated cluster.toml, each
    /// data node's directory and log.
    #[arg(long, default_value = "norr-data", value_name = "DIR")]
    pub data_dir: std::path::PathBuf,
    /// Port of the first data node's native protocol listener (on
    /// 127.0.0.1); the others take the next ports.
    #[arg(long, default_value_t = 2202, value_name = "PORT")]
    pub port_base: u16,
    /// Port of the SQL node's MySQL protocol listener (on 127.0.0.1).
    #[arg(long, default_value_t = 3306, value_name = "PORT")]
    pub sql_port: u16,
    /// Start only the data node(s), no SQL node.
    #[arg(long)]
    pub no_sql: bool,
    /// How the SQL node reaches the data node: `local`, an in-process link
    /// (the same protocol without socket system calls), or `tcp`, the native
    /// protocol's TCP port as a separate SQL node would.
    #[arg(long, value_enum, default_value_t = SqlLink::Local)]
    pub sql_link: SqlLink,
    /// Also accept MySQL clients on this Unix socket (`mysql -S PATH`).
    #[arg(long, value_name = "PATH")]
    pub sql_socket: Option<std::path::PathBuf>,
    /// Pass a `norr sqld` flag to the SQL node (see `norr sqld --help`), e.g.
    /// `--sql-arg=--config=users.toml` or `--sql-arg=--max-connections=500`.
    /// May be repeated. The listen address, socket and data node are set by
    /// `norr up` itself.
    #[arg(long = "sql-arg", value_name = "FLAG", allow_hyphen_values = true)]
    pub sql_args: Vec<String>,
    #[command(flatten)]
    pub knobs: KnobArgs,
}

/// Parses `SqldArgs` like the command line would, so fields added later get
/// their defaults.
#[derive(clap::Parser)]
struct SqldCommand {
    #[command(flatten)]
    args: norr_sql::server::SqldArgs,
}

/// The SQL node's arguments: `norr up`'s addresses, then the `--sql-arg`
/// flags. Errors name the offending flag before anything is started.
fn sqld_args(
    sql: SocketAddr,
    socket: Option<&std::path::Path>,
    data_node: SocketAddr,
    extra: &[String],
) -> anyhow::Result<norr_sql::server::SqldArgs> {
    use clap::Parser;
    let mut argv =
        vec!["sqld".to_string(), "--listen".into(), sql.to_string(), "--data-node".into(), data_node.to_string()];
    if let Some(p) = socket {
        argv.extend(["--socket".to_string(), p.display().to_string()]);
    }
    for a in extra {
        let name = a.trim_start_matches('-').split('=').next().unwrap_or_default();
        if matches!(name, "listen" | "socket" | "data-node") {
            anyhow::bail!("--sql-arg={a}: norr up sets --{name} itself (use --sql-port, --sql-socket or --port-base)");
        }
    }
    argv.extend(extra.iter().cloned());
    SqldCommand::try_parse_from(argv).map(|c| c.args).map_err(|e| anyhow::anyhow!("in --sql-arg: {e}"))
}

/// Start the SQL node on its own thread; returns once it accepts connections.
/// With `local`, it reaches the data node through in-process links, else
/// through `data_node`'s TCP port.
fn start_sqld(sql: SocketAddr, args: norr_sql::server::SqldArgs, local: Option<LocalConnector>) -> anyhow::Result<()> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("norr-sqld".into())
        .spawn(move || {
            let r = match local {
                Some(c) => norr_sql::server::run_sqld_local(args, std::sync::Arc::new(move || c.connect())),
                None => norr_sql::server::run_sqld(args),
            };
            let _ = tx.send(r);
        })
        .context("cannot start the SQL node thread")?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match rx.try_recv() {
            Ok(Err(e)) => {
                return Err(
                    e.context(format!("SQL node failed (port {} taken? choose another with --sql-port)", sql.port()))
                )
            }
            Ok(Ok(())) => anyhow::bail!("SQL node stopped at once"),
            Err(_) => {}
        }
        if TcpStream::connect_timeout(&sql, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        if Instant::now() > deadline {
            anyhow::bail!("SQL node did not start listening on {sql} within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn print_banner(native: SocketAddr, sql: Option<SocketAddr>, link: &str) {
    println!("NorrDB local cluster is up:");
    println!("  data node 1   native protocol  {native}");
    match sql {
        Some(sql) => println!("  SQL node      MySQL protocol   {sql} (reaches the data node through {link})"),
        None => println!("  SQL node      not started (--no-sql)"),
    }
    println!();
    if let Some(sql) = sql {
        println!("Connect with:   mysql -h{} -P{} -uroot", sql.ip(), sql.port());
    }
    println!(
        "Native clients: norr_client::Client::connect(\"{native}\"); load test: norr bench --addr {native} --load"
    );
    println!("Press Ctrl-C to stop.");
}

impl UpArgs {
    /// `--replicas`, or its default for the shape: a lone data node keeps
    /// one copy, a cluster two.
    fn replicas(&self) -> u8 {
        self.replicas.unwrap_or(if self.data_nodes == 1 { 1 } else { 2 })
    }
}

pub fn run(a: UpArgs) -> anyhow::Result<()> {
    if a.data_nodes > 1 || a.replicas() > 1 {
        return run_cluster(a);
    }
    let knobs = a.knobs.load()?;
    let native = SocketAddr::from((Ipv4Addr::LOCALHOST, a.port_base));
    let sql = SocketAddr::from((Ipv4Addr::LOCALHOST, a.sql_port));
    let sqld_args = (!a.no_sql).then(|| sqld_args(sql, a.sql_socket.as_deref(), native, &a.sql_args)).transpose()?;
    let cfg = DataNodeConfig { node_id: 1, listen: native, knobs, cluster: None };
    let node = start_data_node(cfg).with_context(|| {
        format!("cannot start the data node on {native} (port taken? choose another with --port-base)")
    })?;

    match sqld_args {
        None => print_banner(node.local_addr(), None, ""),
        Some(mut args) => {
            // The port actually bound (--port-base 0 picks one).
            args.data_node = node.local_addr().to_string();
            let local = (a.sql_link == SqlLink::Local).then(|| node.local_connector());
            start_sqld(sql, args, local)?;
            print_banner(node.local_addr(), Some(sql), a.sql_link.describe());
        }
    }

    let stopper = node.stopper();
    ctrlc::set_handler(move || stopper.stop()).context("cannot install the Ctrl-C handler")?;
    node.join().context("data node failed")?;
    println!("NorrDB local cluster stopped.");
    Ok(())
}

/// Two or more data nodes: mgmd, data node processes and the SQL node.
fn run_cluster(a: UpArgs) -> anyhow::Result<()> {
    // The data nodes are other processes: the SQL node reaches them over
    // TCP whatever --sql-link says (it only chooses for --data-nodes 1).
    let sql = SocketAddr::from((Ipv4Addr::LOCALHOST, a.sql_port));
    // Refuse bad --sql-arg flags before anything starts.
    let placeholder = SocketAddr::from((Ipv4Addr::LOCALHOST, a.port_base));
    let sql_args =
        (!a.no_sql).then(|| sqld_args(sql, a.sql_socket.as_deref(), placeholder, &a.sql_args)).transpose()?;
    let shape = crate::up_cluster::ClusterShape {
        data_nodes: a.data_nodes,
        replicas: a.replicas(),
        mgm_port: a.mgm_port,
        port_base: a.port_base,
        data_root: a.data_dir.clone(),
    };
    let start = move |data_nodes: Vec<String>, _mgm: SocketAddr| -> anyhow::Result<SocketAddr> {
        let mut args = sql_args.clone().expect("only called with a SQL node");
        // The SQL node connects to every data node: it sends each operation
        // to its partition's primary and goes on through the others when one
        // of them stops.
        anyhow::ensure!(!data_nodes.is_empty(), "no data node");
        args.data_node = data_nodes.join(",");
        start_sqld(sql, args, None)?;
        Ok(sql)
    };
    let start_ref: Option<&dyn Fn(Vec<String>, SocketAddr) -> anyhow::Result<SocketAddr>> =
        if a.no_sql { None } else { Some(&start) };
    crate::up_cluster::run(shape, &a.knobs, start_ref)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(extra: &[&str]) -> anyhow::Result<norr_sql::server::SqldArgs> {
        let a = |p| SocketAddr::from((Ipv4Addr::LOCALHOST, p));
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        sqld_args(a(3306), None, a(2202), &extra)
    }

    #[test]
    fn sql_args_reach_the_sql_node() {
        let args = parse(&["--reply-spin-us=0", "--max-connections", "500"]).unwrap();
        assert_eq!(args.reply_spin_us, 0);
        assert_eq!(args.max_connections, Some(500));
        assert_eq!(args.listen, "127.0.0.1:3306");
        // Defaults stay when nothing is passed.
        assert_eq!(parse(&[]).unwrap().reply_spin_us, 100);
    }

    #[test]
    fn bad_or_conflicting_sql_args_are_refused_with_the_flag_named() {
        let e = parse(&["--no-such-flag"]).unwrap_err().to_string();
        assert!(e.contains("--no-such-flag"), "{e}");
        let e = parse(&["--listen=0.0.0.0:1"]).unwrap_err().to_string();
        assert!(e.contains("--sql-port"), "{e}");
        let e = parse(&["--reply-spin-us=many"]).unwrap_err().to_string();
        assert!(e.contains("many"), "{e}");
    }
}
