//! `norr up` with two or more data nodes: a real cluster on loopback.
//!
//! mgmd runs in this process; every data node is its own `norr datad --mgm`
//! process (so a user can kill one and watch the cluster survive); the SQL
//! node runs in this process on its own thread. This process is also the
//! data nodes' keeper: a data node process that dies is started again (a
//! node restart), and Ctrl-C stops everything in order: the data nodes
//! leave together (`stop --all` through mgmd), then mgmd, then this process
//! with its SQL node (which has no stop of its own yet: its clients see
//! errors 1297 during the data nodes' last ~100 ms).

use crate::config::KnobArgs;
use anyhow::{bail, Context};
use norr_mgmd::config::ClusterConfig;
use norr_mgmd::protocol::{ClusterView, MgmCommand, MgmReply, NodeState};
use norr_mgmd::server::Mgmd;
use norr_mgmd::session::{run_command, run_command_with};
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The shape of the local cluster.
pub struct ClusterShape {
    pub data_nodes: u16,
    pub replicas: u8,
    pub mgm_port: u16,
    pub port_base: u16,
    pub data_root: PathBuf,
    /// The data nodes keep nothing on disk (`norr up --in-memory`).
    pub in_memory: bool,
    /// The cluster secret (in the cluster file, and given to every data
    /// node process as NORR_CLUSTER_SECRET) and the file that holds it.
    pub secret: norr_transport::auth::ClusterSecret,
    pub secret_file: PathBuf,
}

/// mgmd is node 1; data nodes are 2, 3, ...
pub const MGMD_ID: u16 = 1;
const FIRST_DATA_ID: u16 = 2;
/// How long `norr up` waits for every data node to report "started".
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// A data node process that died is started again after this pause.
const RESTART_PAUSE: Duration = Duration::from_secs(1);
/// How long the data nodes get to stop after `stop --all` before they are killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// The cluster file `norr up` runs, as text: validated by the same parser
/// as `norr mgmd --config`.
pub fn cluster_file(shape: &ClusterShape, knobs: &norr_knobs::Knobs) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# written by `norr up`\n[cluster]\nname = \"local\"\nreplicas = {}", shape.replicas);
    // Data nodes require it of every API connection (api_auth defaults to
    // "secret" with a secret); mgmd never hands it out.
    let _ = writeln!(s, "secret = \"{}\"", shape.secret.expose());
    let _ = writeln!(s, "\n[data]");
    // Every knob in field order, except the derived `default_partitions`.
    let text = toml::to_string(knobs).expect("knobs serialize to TOML");
    for line in text.lines() {
        if line.split_once(" = ").is_some_and(|(k, _)| k != "default_partitions") {
            let _ = writeln!(s, "{line}");
        }
    }
    let _ = writeln!(s, "\n[[node]]\nid = {MGMD_ID}\nkind = \"mgmd\"\nhost = \"127.0.0.1\"\nport = {}", shape.mgm_port);
    for i in 0..shape.data_nodes {
        let id = FIRST_DATA_ID + i;
        let _ = writeln!(
            s,
            "\n[[node]]\nid = {id}\nkind = \"data\"\nhost = \"127.0.0.1\"\nport = {}\ndata_dir = {:?}",
            shape.port_base + i,
            shape.data_root.join(format!("node-{id}")).display().to_string()
        );
    }
    s
}

/// One data node process and how to start it again.
struct DataProc {
    id: u16,
    addr: String,
    log: PathBuf,
    child: Option<Child>,
    starts: u32,
    in_memory: bool,
    /// Handed to the process in its environment (not its command line,
    /// which every user of the host can read).
    secret: norr_transport::auth::ClusterSecret,
}

impl DataProc {
    fn spawn(&mut self, mgm: &str) -> anyhow::Result<()> {
        let exe = std::env::current_exe().context("cannot find the norr executable")?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("cannot open the log file {}", self.log.display()))?;
        let err = log.try_clone()?;
        let mut cmd = Command::new(exe);
        cmd.args(["datad", "--mgm", mgm, "--node-id", &self.id.to_string()]);
        if self.in_memory {
            cmd.arg("--in-memory");
        }
        cmd.env(norr_transport::auth::SECRET_ENV, self.secret.expose());
        cmd.stdin(Stdio::null()).stdout(log).stderr(err);
        // Its own process group: the terminal's Ctrl-C reaches only `norr
        // up`, which then stops the nodes in order.
        // And it ends with `norr up` however that ends (kill -9 included):
        // the kernel sends it SIGTERM when this thread, the main thread of
        // `norr up`, exits. A data node left behind would hold its ports and
        // files and serve an unmanaged cluster.
        {
            use std::os::unix::process::CommandExt;
            cmd.process_group(0);
            let parent = std::process::id() as libc::pid_t;
            // SAFETY: between fork and exec only async-signal-safe calls:
            // prctl, getppid and _exit.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    if libc::getppid() != parent {
                        libc::_exit(1); // `norr up` died before the call above
                    }
                    Ok(())
                });
            }
        }
        let child = cmd.spawn().with_context(|| format!("cannot start data node {}", self.id))?;
        self.child = Some(child);
        self.starts += 1;
        Ok(())
    }

    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

fn show(mgm: &str) -> anyhow::Result<ClusterView> {
    match run_command(mgm, MgmCommand::Show, Duration::from_secs(5))? {
        MgmReply::Show(v) => Ok(v),
        other => bail!("mgmd answered {other:?} to show"),
    }
}

/// Wait until every data node reports started; a data node process that
/// exits meanwhile fails the start with its log named.
fn wait_started(mgm: &str, procs: &mut [DataProc]) -> anyhow::Result<()> {
    let deadline = Instant::now() + START_TIMEOUT;
    let mut last_note = Instant::now();
    loop {
        for p in procs.iter_mut() {
            if let Some(st) = p.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                bail!("data node {} exited while starting ({st}); see its log {}", p.id, p.log.display());
            }
        }
        if let Ok(v) = show(mgm) {
            let waiting: Vec<String> = procs
                .iter()
                .filter_map(|p| {
                    let n = v.nodes.iter().find(|n| n.id == p.id);
                    match n.and_then(|n| n.state.as_ref()) {
                        Some(NodeState::Started) => None,
                        Some(s) => Some(format!("{} ({s})", p.id)),
                        None => Some(format!("{} (not reported yet)", p.id)),
                    }
                })
                .collect();
            if waiting.is_empty() {
                return Ok(());
            }
            if last_note.elapsed() > Duration::from_secs(5) {
                eprintln!("norr up: waiting for data nodes {}", waiting.join(", "));
                last_note = Instant::now();
            }
        }
        if Instant::now() > deadline {
            bail!(
                "the data nodes did not all start within {} s; see their logs in {}",
                START_TIMEOUT.as_secs(),
                procs.first().and_then(|p| p.log.parent()).unwrap_or(Path::new(".")).display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn print_table(shape: &ClusterShape, mgm: SocketAddr, procs: &[DataProc], sql: Option<SocketAddr>) {
    println!("NorrDB local cluster is up ({} data nodes, replicas = {}):", shape.data_nodes, shape.replicas);
    println!("  {:<4} {:<10} {:<17} {:<8} {:<6} log", "id", "kind", "address", "pid", "group");
    println!("  {:<4} {:<10} {:<17} {:<8} {:<6} -", MGMD_ID, "mgmd", mgm, std::process::id(), "-");
    for (i, p) in procs.iter().enumerate() {
        let group = i / usize::from(shape.replicas.max(1));
        let pid = p.pid().map_or_else(|| "-".into(), |p| p.to_string());
        println!("  {:<4} {:<10} {:<17} {:<8} {:<6} {}", p.id, "data", p.addr, pid, group, p.log.display());
    }
    match sql {
        Some(sql) => println!("  {:<4} {:<10} {:<17} {:<8} {:<6} -", "-", "sql", sql, std::process::id(), "-"),
        None => println!("  SQL node not started (--no-sql)"),
    }
    println!();
    if let Some(sql) = sql {
        println!("Connect with:   mysql -h{} -P{} -uroot", sql.ip(), sql.port());
        println!("{}", crate::up::root_password_hint(sql));
    }
    println!(
        "Native clients: norr bench --addr {} --load\n{}",
        procs.iter().map(|p| p.addr.as_str()).collect::<Vec<_>>().join(","),
        crate::up::native_secret_hint(&shape.secret_file)
    );
    println!("Cluster state:  norr mgm --mgm {mgm} show");
    println!(
        "Stop a node:    norr mgm --mgm {mgm} --secret-file {} stop N   (stop/start/restart prove the secret)",
        shape.secret_file.display()
    );
    if let Some(p) = procs.last() {
        println!(
            "Try a failure:  kill -9 {} (data node {}); the cluster keeps serving and `norr up` starts it again",
            p.pid().unwrap_or(0),
            p.id
        );
    }
    println!("Press Ctrl-C to stop.");
}

/// Run the cluster until Ctrl-C. `start_sql` starts the SQL node given the
/// data nodes' addresses, returning its address.
pub fn run(
    shape: ClusterShape,
    knob_args: &KnobArgs,
    start_sql: Option<&dyn Fn(Vec<String>, SocketAddr) -> anyhow::Result<SocketAddr>>,
) -> anyhow::Result<()> {
    let knobs = knob_args.load()?;
    if shape.replicas == 0 || !shape.data_nodes.is_multiple_of(u16::from(shape.replicas)) {
        bail!(
            "--data-nodes {} --replicas {}: data nodes form node groups of `replicas` nodes, so their number must \
             be a multiple of it",
            shape.data_nodes,
            shape.replicas
        );
    }
    // Every port a process of this cluster will listen on is free, before
    // anything starts (the SQL port is already bound by the caller).
    let mgm_port = crate::ports::Port {
        addr: SocketAddr::from((Ipv4Addr::LOCALHOST, shape.mgm_port)),
        what: "management server",
        flag: "--mgm-port",
    };
    mgm_port.check()?;
    for i in 0..shape.data_nodes {
        let port = shape.port_base.checked_add(i).with_context(|| {
            format!("--port-base {}: {} data nodes need ports past 65535", shape.port_base, shape.data_nodes)
        })?;
        crate::ports::Port {
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            what: "data node, native protocol",
            flag: "--port-base (data nodes take it and the next ports)",
        }
        .check()?;
    }
    std::fs::create_dir_all(&shape.data_root)
        .with_context(|| format!("cannot create the data directory {}", shape.data_root.display()))?;
    let text = cluster_file(&shape, &knobs);
    let file = shape.data_root.join("cluster.toml");
    crate::secret::write_private(&file, &text)?;
    let config = ClusterConfig::parse(&text, Path::new("."))
        .map_err(|e| anyhow::anyhow!("the generated cluster file {} is invalid: {e}", file.display()))?;
    let mgmd = Mgmd::start(config, Some(MGMD_ID), None).map_err(|e| match &e {
        norr_mgmd::server::MgmdError::Listen { source, .. } => mgm_port.error(source),
        _ => anyhow::Error::new(e).context(format!("cannot start mgmd on {}", mgm_port.addr)),
    })?;
    let mgm_addr = mgmd.local_addr();
    let mgm = mgm_addr.to_string();

    let mut procs: Vec<DataProc> = (0..shape.data_nodes)
        .map(|i| {
            let id = FIRST_DATA_ID + i;
            DataProc {
                id,
                addr: SocketAddr::from((Ipv4Addr::LOCALHOST, shape.port_base + i)).to_string(),
                log: shape.data_root.join(format!("node-{id}.log")),
                child: None,
                starts: 0,
                in_memory: shape.in_memory,
                secret: shape.secret.clone(),
            }
        })
        .collect();
    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let flag = interrupted.clone();
        ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst)).context("cannot install the Ctrl-C handler")?;
    }
    let result = (|| -> anyhow::Result<()> {
        for p in procs.iter_mut() {
            p.spawn(&mgm)?;
        }
        wait_started(&mgm, &mut procs)?;
        let sql = match start_sql {
            Some(f) => Some(f(procs.iter().map(|p| p.addr.clone()).collect(), mgm_addr)?),
            None => None,
        };
        print_table(&shape, mgm_addr, &procs, sql);
        keep(&mgm, &mut procs, &interrupted)
    })();

    eprintln!("norr up: stopping the data nodes");
    stop_all(&mgm, &shape.secret, &mut procs);
    mgmd.stop();
    println!("NorrDB local cluster stopped.");
    result
}

/// Until Ctrl-C: start data node processes that died again.
fn keep(mgm: &str, procs: &mut [DataProc], interrupted: &AtomicBool) -> anyhow::Result<()> {
    while !interrupted.load(Ordering::SeqCst) {
        for p in procs.iter_mut() {
            let Some(status) = p.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) else { continue };
            p.child = None;
            eprintln!(
                "norr up: data node {} exited ({status}); the cluster goes on without it; starting it again (node \
                 restart, log {})",
                p.id,
                p.log.display()
            );
            std::thread::sleep(RESTART_PAUSE);
            p.spawn(mgm)?;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// `stop --all` through mgmd, then wait for the processes; kill what is
/// left after `STOP_TIMEOUT`.
fn stop_all(mgm: &str, secret: &norr_transport::auth::ClusterSecret, procs: &mut [DataProc]) {
    // mgmd's refusal (an Error reply) is a failure too: before, a refused
    // stop --all waited out STOP_TIMEOUT and then killed every node.
    let sent = match run_command_with(mgm, MgmCommand::StopAll, Duration::from_secs(5), Some(secret)) {
        Ok(MgmReply::Done { .. }) => Ok(()),
        Ok(MgmReply::Error { message }) => Err(message),
        Ok(MgmReply::Show(_)) => Err("mgmd answered with a cluster view".to_string()),
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = sent {
        eprintln!("norr up: stop --all through mgmd failed ({e}); stopping the processes directly");
        for p in procs.iter() {
            if let Some(pid) = p.pid() {
                let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).status();
            }
        }
    }
    let deadline = Instant::now() + STOP_TIMEOUT;
    for p in procs.iter_mut() {
        let Some(child) = p.child.as_mut() else { continue };
        loop {
            match child.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() > deadline => {
                    eprintln!(
                        "norr up: data node {} did not stop within {} s; killing it",
                        p.id,
                        STOP_TIMEOUT.as_secs()
                    );
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
        p.child = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generated_cluster_file_is_valid_and_has_the_shape_asked_for() {
        let shape = ClusterShape {
            data_nodes: 4,
            replicas: 2,
            mgm_port: 1186,
            port_base: 2202,
            data_root: PathBuf::from("norr-data"),
            in_memory: false,
            secret: norr_transport::auth::ClusterSecret::generate().unwrap(),
            secret_file: PathBuf::from("norr-data/cluster.secret"),
        };
        let knobs = KnobArgs { lock_wait_timeout_ms: Some(777), ..KnobArgs::default() }.load().unwrap();
        let text = cluster_file(&shape, &knobs);
        let c = ClusterConfig::parse(&text, Path::new(".")).unwrap();
        assert_eq!(c.replicas, 2);
        assert_eq!(c.node_groups(), vec![vec![2, 3], vec![4, 5]]);
        assert_eq!(c.knobs.lock_wait_timeout_ms, 777);
        assert_eq!(c.node(5).unwrap().address(), "127.0.0.1:2205");
        assert_eq!(c.mgm_addresses(), "127.0.0.1:1186");
        assert_eq!(c.secret.as_ref(), Some(&shape.secret));
        assert_eq!(c.api_auth, norr_mgmd::config::ApiAuth::Secret);
        assert!(!c.to_toml().contains(shape.secret.expose()), "mgmd never hands the secret out");
    }
}
