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

/// Start the SQL node on its own thread; returns once it accepts connections.
/// With `local`, it reaches the data node through in-process links, else
/// through `data_node`'s TCP port.
fn start_sqld(
    sql: SocketAddr,
    socket: Option<&std::path::Path>,
    data_node: SocketAddr,
    local: Option<LocalConnector>,
) -> anyhow::Result<()> {
    use clap::Parser;
    let mut argv =
        vec!["sqld".to_string(), "--listen".into(), sql.to_string(), "--data-node".into(), data_node.to_string()];
    if let Some(p) = socket {
        argv.extend(["--socket".to_string(), p.display().to_string()]);
    }
    let cmd = SqldCommand::try_parse_from(argv).context("building the SQL node's arguments")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("norr-sqld".into())
        .spawn(move || {
            let r = match local {
                Some(c) => norr_sql::server::run_sqld_local(cmd.args, std::sync::Arc::new(move || c.connect())),
                None => norr_sql::server::run_sqld(cmd.args),
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
    let cfg = DataNodeConfig { node_id: 1, listen: native, knobs };
    let node = start_data_node(cfg).with_context(|| {
        format!("cannot start the data node on {native} (port taken? choose another with --port-base)")
    })?;

    let sql = SocketAddr::from((Ipv4Addr::LOCALHOST, a.sql_port));
    if a.no_sql {
        print_banner(node.local_addr(), None, "");
    } else {
        let local = (a.sql_link == SqlLink::Local).then(|| node.local_connector());
        start_sqld(sql, a.sql_socket.as_deref(), node.local_addr(), local)?;
        print_banner(node.local_addr(), Some(sql), a.sql_link.describe());
    }

    let stopper = node.stopper();
    ctrlc::set_handler(move || stopper.stop()).context("cannot install the Ctrl-C handler")?;
    node.join().context("data node failed")?;
    println!("NorrDB local cluster stopped.");
    Ok(())
}
