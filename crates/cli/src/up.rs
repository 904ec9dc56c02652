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
    /// Port of the first data node's native protocol listener (on 127.0.0.1).
    #[arg(long, default_value_t = 2202, value_name = "PORT")]
    pub port_base: u16,
    /// Port of the SQL node's MySQL protocol listener (on 127.0.0.1).
    #[arg(long, default_value_t = 3306, value_name = "PORT")]
    pub sql_port: u16,
    /// Start only the data node, no SQL node.
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

pub fn run(a: UpArgs) -> anyhow::Result<()> {
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
