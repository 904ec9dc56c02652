//! `norr up`: a local cluster on loopback, in this process. The SQL node
//! reaches the data node through an in-process link (no system calls between
//! them) unless `--sql-link tcp` asks for the native protocol's TCP port.

use crate::config::KnobArgs;
use crate::ports::Port;
use anyhow::Context;
use norr_runtime::{start_data_node_with_options, DataNodeConfig, LocalConnector};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
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
    /// Where the cluster keeps its files: the generated cluster.toml, the
    /// cluster secret (cluster.secret: data nodes serve only connections
    /// that prove it; native clients read it from NORR_CLUSTER_SECRET; kept
    /// by --fresh), each data node's directory (node-N: REDO log, schema,
    /// system file) and log. The data survives restarts: the next `norr up` with the same
    /// directory recovers every transaction up to the last complete global
    /// checkpoint.
    #[arg(long, default_value = "norr-data", value_name = "DIR")]
    pub data_dir: std::path::PathBuf,
    /// Start empty: delete the data nodes' directories under --data-dir
    /// first (asks for confirmation on a terminal; see --yes).
    #[arg(long)]
    pub fresh: bool,
    /// Do not ask before --fresh deletes the data (needed when stdin is not
    /// a terminal).
    #[arg(long, requires = "fresh")]
    pub yes: bool,
    /// Keep no rows on disk (no REDO log, no checkpoints): a restart starts
    /// empty. For measurements of what durability costs; --data-dir still
    /// holds the cluster file and logs.
    #[arg(long, conflicts_with = "fresh")]
    pub in_memory: bool,
    /// Port of the first data node's native protocol listener (on
    /// 127.0.0.1); the others take the next ports.
    #[arg(long, default_value_t = 2202, value_name = "PORT")]
    pub port_base: u16,
    /// Port of the SQL node's MySQL protocol listener (on 127.0.0.1). Every
    /// port is bound or checked before anything starts: one in use is
    /// refused, naming the process that holds it.
    #[arg(long, default_value_t = 3306, value_name = "PORT")]
    pub sql_port: u16,
    /// Start only the data node(s), no SQL node.
    #[arg(long)]
    pub no_sql: bool,
    /// With --data-nodes 1, how the SQL node reaches the data node: `local`,
    /// an in-process link (the same protocol without socket system calls),
    /// or `tcp`, the native protocol's TCP port as a separate SQL node
    /// would. With more data nodes (other processes) it is always `tcp`.
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
        if name == "secret-file" {
            anyhow::bail!(
                "--sql-arg={a}: norr up gives the SQL node its cluster secret itself (--data-dir/cluster.secret)"
            );
        }
    }
    argv.extend(extra.iter().cloned());
    SqldCommand::try_parse_from(argv).map(|c| c.args).map_err(|e| anyhow::anyhow!("in --sql-arg: {e}"))
}

/// Start the SQL node on its own thread on `listener`, the MySQL port this
/// process already bound; returns once it serves clients, checked through
/// the port: a connection made there must be one the started server
/// greeted. With `local`, it reaches the data node through in-process
/// links, else through `args.data_node`'s TCP ports.
fn start_sqld(
    listener: TcpListener,
    mut args: norr_sql::server::SqldArgs,
    local: Option<LocalConnector>,
    datadir: &std::path::Path,
) -> anyhow::Result<SocketAddr> {
    let sql = listener.local_addr().context("the SQL port's address")?;
    args.listen = sql.to_string();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let embedded = norr_sql::server::Embedded { listener, ready: ready_tx, datadir: Some(datadir.to_path_buf()) };
    std::thread::Builder::new()
        .name("norr-sqld".into())
        .spawn(move || {
            let connect = local.map(|c| -> norr_sql::server::LocalConnect { std::sync::Arc::new(move || c.connect()) });
            let _ = done_tx.send(norr_sql::server::run_sqld_embedded(args, connect, embedded));
        })
        .context("cannot start the SQL node thread")?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let state = loop {
        match ready_rx.recv_timeout(Duration::from_millis(50)) {
            Ok(state) => break state,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(match done_rx.recv_timeout(Duration::from_secs(5)) {
                    Ok(Err(e)) => e.context("the SQL node failed to start"),
                    _ => anyhow::anyhow!("the SQL node stopped while starting"),
                })
            }
        }
        if Instant::now() > deadline {
            anyhow::bail!("the SQL node on {sql} did not connect to the data nodes within 60 s");
        }
    };
    // The listener is ours, so this cannot reach another server; the check
    // makes sure of it rather than trusting it.
    let (peer, id) = greeting_from(sql).with_context(|| format!("the SQL node does not answer on {sql}"))?;
    anyhow::ensure!(
        state.greeted(peer, id),
        "a server answered on {sql}, but not the SQL node this `norr up` started; choose another port with --sql-port"
    );
    Ok(sql)
}

/// Connect to `sql` and read the MySQL greeting: this end's address and
/// the connection id the server gave.
fn greeting_from(sql: SocketAddr) -> anyhow::Result<(SocketAddr, u32)> {
    use std::io::Read;
    let mut s = TcpStream::connect_timeout(&sql, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut head = [0u8; 4];
    s.read_exact(&mut head)?;
    let len = usize::from(head[0]) | usize::from(head[1]) << 8 | usize::from(head[2]) << 16;
    let mut body = vec![0u8; len];
    s.read_exact(&mut body)?;
    // Protocol 10: version byte, NUL-terminated server version, then the
    // connection id (4 bytes, little-endian).
    anyhow::ensure!(body.first() == Some(&10), "not a MySQL protocol 10 greeting");
    let end = body[1..].iter().position(|&b| b == 0).context("greeting without a version string")? + 2;
    let id = body.get(end..end + 4).context("greeting without a connection id")?;
    Ok((s.local_addr()?, u32::from_le_bytes([id[0], id[1], id[2], id[3]])))
}

/// What `norr up` says about the root account: a fresh cluster has only
/// root@localhost, with an empty password, and this is how to set one.
/// How native clients get the cluster secret the data nodes ask for.
pub(crate) fn native_secret_hint(secret_file: &std::path::Path) -> String {
    format!(
        "{:16}(the data nodes serve only clients that prove the cluster secret: run them with\n\
         {:16}{}=\"$(cat {})\")",
        "",
        "",
        norr_transport::auth::SECRET_ENV,
        secret_file.display()
    )
}

pub(crate) fn root_password_hint(sql: SocketAddr) -> String {
    format!(
        "Root account:   a fresh cluster has only 'root'@'localhost', with an empty password; set one with\n\
         {:16}mysql -h{} -P{} -uroot -e \"ALTER USER 'root'@'localhost' IDENTIFIED BY 'new-password'\"\n\
         {:16}(then connect with -p; on a cluster that has one already, use it)",
        "",
        sql.ip(),
        sql.port(),
        ""
    )
}

fn print_banner(native: SocketAddr, sql: Option<SocketAddr>, link: &str, secret_file: &std::path::Path) {
    println!("NorrDB local cluster is up:");
    println!("  data node 1   native protocol  {native}");
    match sql {
        Some(sql) => println!("  SQL node      MySQL protocol   {sql} (reaches the data node through {link})"),
        None => println!("  SQL node      not started (--no-sql)"),
    }
    println!();
    if let Some(sql) = sql {
        println!("Connect with:   mysql -h{} -P{} -uroot", sql.ip(), sql.port());
        println!("{}", crate::up::root_password_hint(sql));
    }
    println!(
        "Native clients: norr_client::Client::connect(\"{native}\"); load test: norr bench --addr {native} --load"
    );
    println!("{}", native_secret_hint(secret_file));
    println!("Press Ctrl-C to stop.");
}

impl UpArgs {
    /// `--replicas`, or its default for the shape: a lone data node keeps
    /// one copy, a cluster two.
    fn replicas(&self) -> u8 {
        self.replicas.unwrap_or(if self.data_nodes == 1 { 1 } else { 2 })
    }
}

/// The entries of a `norr up` data directory that hold the cluster's data
/// and set-up (data node directories and logs, cluster.toml): what
/// `--fresh` deletes. Anything else in the directory is left alone.
fn owned_entries(root: &std::path::Path) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let mut v = Vec::new();
    let rd = match std::fs::read_dir(root) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(v),
        Err(e) => return Err(anyhow::Error::new(e).context(format!("cannot read {}", root.display()))),
    };
    for e in rd {
        let e = e.with_context(|| format!("cannot read {}", root.display()))?;
        let name = e.file_name().to_string_lossy().into_owned();
        let node = name.strip_prefix("node-").map(|r| r.strip_suffix(".log").unwrap_or(r));
        if name == "cluster.toml" || node.is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) {
            v.push(e.path());
        }
    }
    v.sort();
    Ok(v)
}

/// `--fresh`: delete the data under `root` after asking (or `--yes`).
fn start_fresh(root: &std::path::Path, yes: bool) -> anyhow::Result<()> {
    let doomed = owned_entries(root)?;
    if doomed.is_empty() {
        return Ok(());
    }
    if !yes {
        use std::io::{BufRead, IsTerminal, Write};
        if !std::io::stdin().is_terminal() {
            anyhow::bail!(
                "--fresh would delete every row kept in {}: add --yes to confirm (stdin is not a terminal)",
                root.display()
            );
        }
        eprint!("norr up --fresh: delete every row kept in {} ({} entries)? [y/N] ", root.display(), doomed.len());
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).context("cannot read the answer")?;
        if !matches!(line.trim(), "y" | "Y" | "yes" | "YES") {
            anyhow::bail!("not confirmed: nothing deleted, nothing started");
        }
    }
    for p in doomed {
        let r = if p.is_dir() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
        r.with_context(|| format!("cannot delete {}", p.display()))?;
    }
    eprintln!("norr up: deleted the data in {}", root.display());
    Ok(())
}

pub fn run(a: UpArgs) -> anyhow::Result<()> {
    if a.fresh {
        start_fresh(&a.data_dir, a.yes)?;
    }
    if a.data_nodes > 1 || a.replicas() > 1 {
        return run_cluster(a);
    }
    let knobs = a.knobs.load()?;
    let native = SocketAddr::from((Ipv4Addr::LOCALHOST, a.port_base));
    let sql = SocketAddr::from((Ipv4Addr::LOCALHOST, a.sql_port));
    let mut sqld_args =
        (!a.no_sql).then(|| sqld_args(sql, a.sql_socket.as_deref(), native, &a.sql_args)).transpose()?;
    // The data node's port (and in-process link) serves only who proves it.
    let (secret, secret_file) = crate::secret::load_or_create(&a.data_dir)?;
    if let Some(args) = sqld_args.as_mut() {
        args.secret_file = Some(secret_file.clone());
    }
    // Every port before anything starts: the SQL port is bound and kept.
    let native_port = Port { addr: native, what: "data node, native protocol", flag: "--port-base" };
    native_port.check()?;
    let sql_listener = (!a.no_sql).then(|| sql_port(sql).bind()).transpose()?;
    let cfg = DataNodeConfig { node_id: 1, listen: native, knobs, cluster: None };
    // Held until the node stops: a second `norr up` on the directory is refused.
    let lock = if a.in_memory {
        eprintln!("norr up: --in-memory: no rows are kept on disk");
        None
    } else {
        let l = norr_runtime::fs::open_data_dir(&a.data_dir.join("node-1"), 1)?;
        eprintln!("norr up: data kept in {}", l.path().display());
        Some(l)
    };
    let opts = norr_runtime::RuntimeOptions {
        api_secret: Some(secret),
        data_dir: lock.as_ref().map(|l| l.path().to_path_buf()),
        ..norr_runtime::RuntimeOptions::default()
    };
    let node = start_data_node_with_options(cfg, opts).map_err(|e| match e.kind() {
        std::io::ErrorKind::AddrInUse => native_port.error(&e),
        _ => anyhow::Error::new(e).context(format!("cannot start the data node on {native}")),
    })?;

    match (sqld_args, sql_listener) {
        (Some(mut args), Some(listener)) => {
            // The port actually bound (--port-base 0 picks one).
            args.data_node = node.local_addr().to_string();
            let local = (a.sql_link == SqlLink::Local).then(|| node.local_connector());
            let sql = start_sqld(listener, args, local, &a.data_dir)?;
            print_banner(node.local_addr(), Some(sql), a.sql_link.describe(), &secret_file);
        }
        _ => print_banner(node.local_addr(), None, "", &secret_file),
    }

    let stopper = node.stopper();
    ctrlc::set_handler(move || stopper.stop()).context("cannot install the Ctrl-C handler")?;
    node.join().context("data node failed")?;
    println!("NorrDB local cluster stopped.");
    Ok(())
}

/// The SQL node's MySQL port (127.0.0.1).
fn sql_port(addr: SocketAddr) -> Port {
    Port { addr, what: "SQL node, MySQL protocol", flag: "--sql-port" }
}

/// Two or more data nodes: mgmd, data node processes and the SQL node.
fn run_cluster(a: UpArgs) -> anyhow::Result<()> {
    // The data nodes are other processes: the SQL node reaches them over
    // TCP whatever --sql-link says (it only chooses for --data-nodes 1).
    let sql = SocketAddr::from((Ipv4Addr::LOCALHOST, a.sql_port));
    // Refuse bad --sql-arg flags before anything starts.
    let placeholder = SocketAddr::from((Ipv4Addr::LOCALHOST, a.port_base));
    let mut sql_args =
        (!a.no_sql).then(|| sqld_args(sql, a.sql_socket.as_deref(), placeholder, &a.sql_args)).transpose()?;
    let (secret, secret_file) = crate::secret::load_or_create(&a.data_dir)?;
    if let Some(args) = sql_args.as_mut() {
        args.secret_file = Some(secret_file.clone());
    }
    let shape = crate::up_cluster::ClusterShape {
        secret,
        secret_file,
        data_nodes: a.data_nodes,
        replicas: a.replicas(),
        mgm_port: a.mgm_port,
        port_base: a.port_base,
        data_root: a.data_dir.clone(),
        in_memory: a.in_memory,
    };
    // Bound now and kept (the other ports are checked in up_cluster::run
    // before mgmd starts): nothing else can take it while the data nodes start.
    let sql_listener = std::cell::Cell::new((!a.no_sql).then(|| sql_port(sql).bind()).transpose()?);
    let data_dir = a.data_dir.clone();
    let start = move |data_nodes: Vec<String>, _mgm: SocketAddr| -> anyhow::Result<SocketAddr> {
        let mut args = sql_args.clone().expect("only called with a SQL node");
        let listener = sql_listener.take().context("the SQL node is started once")?;
        // The SQL node connects to every data node: it sends each operation
        // to its partition's primary and goes on through the others when one
        // of them stops.
        anyhow::ensure!(!data_nodes.is_empty(), "no data node");
        args.data_node = data_nodes.join(",");
        start_sqld(listener, args, None, &data_dir)
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
