//! `norr datad --mgm HOST:PORT --node-id N`: a data node of a cluster.
//!
//! The configuration (the other data nodes, node groups, every knob) comes
//! from mgmd, so one file configures the whole cluster. This module is the
//! node's supervisor (NDB's "angel"): it starts the data node, reports its
//! state to mgmd, carries out `norr mgm stop/start/restart N` and `stop
//! --all`, and starts the node again when its blocks ask for a node restart
//! (it was excluded by the cluster, or lost a heartbeat race). The process
//! itself ends only on Ctrl-C, `stop --all` or a failure it cannot restart
//! from.

use anyhow::{bail, Context};
use norr_kernel::NodeId;
use norr_mgmd::config::{ApiAuth, ClusterConfig, NodeKind};
use norr_mgmd::protocol::{ArbitReply, ArbitReq, NodeCommand, NodeReport, NodeState, PeerRole, Refusal};
use norr_mgmd::session::{fetch_config_with, MgmLink};
use norr_runtime::{
    start_data_node_with_options, Arbitrator, ClusterNet, DataNodeConfig, DataNodeHandle, NodeExit, RuntimeOptions,
};
use norr_signals::cluster::{NodeStatus, ShutdownReason};
use std::collections::{BTreeMap, VecDeque};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the node's state goes to mgmd.
const REPORT_PERIOD: Duration = Duration::from_millis(500);
/// How often the supervisor looks at the node between events.
const POLL: Duration = Duration::from_millis(100);
/// More automatic restarts than this within `RESTART_WINDOW` and the
/// supervisor gives up: something is wrong that restarting does not fix.
const MAX_RESTARTS: usize = 5;
const RESTART_WINDOW: Duration = Duration::from_secs(60);

/// mgmd as the data node's arbitrator.
struct MgmArbitrator {
    link: Arc<MgmLink>,
}

impl Arbitrator for MgmArbitrator {
    fn arbitrate(
        &self,
        requester: NodeId,
        generation: u64,
        survivors: Vec<NodeId>,
        failed: Vec<NodeId>,
        timeout: Duration,
    ) -> Result<bool, String> {
        let req = ArbitReq { requester, generation, survivors, failed };
        match self.link.arbitrate(req, timeout) {
            Ok(ArbitReply::Granted { .. }) => Ok(true),
            Ok(ArbitReply::Refused { reason, .. }) => {
                tracing::warn!("mgmd refused arbitration for generation {generation}: {reason}");
                Ok(false)
            }
            Err(e) => Err(e.to_string()),
        }
    }
}

/// What the supervisor last knew, for the reports to mgmd.
struct Reported {
    state: NodeState,
    status: Option<NodeStatus>,
    /// What the node's files restore to (kept while the node is stopped:
    /// the files stay).
    durable: Option<(u64, bool)>,
    address: String,
    /// The last stop or restart the cluster refused (reported to mgmd, so
    /// that `norr mgm stop N --wait` prints why instead of timing out).
    refusal: Option<Refusal>,
}

enum Event {
    Command(NodeCommand),
    Interrupt,
}

/// Resolve "host:port" to one socket address, naming the node on failure.
fn resolve(what: &str, addr: &str) -> anyhow::Result<SocketAddr> {
    addr.to_socket_addrs()
        .with_context(|| format!("{what}: cannot resolve {addr}"))?
        .next()
        .with_context(|| format!("{what}: {addr} resolves to no address"))
}

/// The cluster network of `node` as the configuration describes it.
fn cluster_net(config: &ClusterConfig, digest: u64, arbitrator: Arc<dyn Arbitrator>) -> anyhow::Result<ClusterNet> {
    let mut data_nodes = BTreeMap::new();
    for n in config.data_nodes() {
        data_nodes.insert(n.id, resolve(&format!("data node {}", n.id), &n.address())?);
    }
    Ok(ClusterNet {
        data_nodes,
        node_groups: config.node_groups(),
        config_digest: digest,
        arbitrator: Some(arbitrator),
    })
}

/// Everything needed to (re)start this node.
struct NodePlan {
    node_id: NodeId,
    listen: SocketAddr,
    config: ClusterConfig,
    digest: u64,
    arbitrator: Arc<dyn Arbitrator>,
    /// The cluster secret API connections must prove (None: `api_auth = "off"`).
    secret: Option<norr_transport::auth::ClusterSecret>,
    /// The SQL accounts native clients may log in with (`api_auth =
    /// "account"`), kept current by the `account_reader`; shared by every
    /// restart of the node.
    accounts: Option<Arc<norr_transport::account_book::AccountDirectory>>,
    /// The node's data directory, locked for the life of the process (every
    /// restart of the node by the supervisor recovers from it).
    data_dir: Option<norr_runtime::fs::DataDirLock>,
}

impl NodePlan {
    fn start(&self) -> anyhow::Result<DataNodeHandle> {
        let cluster = cluster_net(&self.config, self.digest, self.arbitrator.clone())?;
        let cfg = DataNodeConfig {
            node_id: self.node_id,
            listen: self.listen,
            knobs: self.config.knobs.clone(),
            cluster: Some(cluster),
        };
        let opts = RuntimeOptions {
            api_secret: self.secret.clone(),
            api_accounts: self.accounts.clone(),
            data_dir: self.data_dir.as_ref().map(|l| l.path().to_path_buf()),
            ..RuntimeOptions::default()
        };
        start_data_node_with_options(cfg, opts)
            .with_context(|| format!("cannot start data node {} on {}", self.node_id, self.listen))
    }
}

/// Run data node `node_id` of the cluster that the mgmd at `mgm` serves,
/// keeping its data in `data_dir` (else the cluster file's `data_dir` of the
/// node; with neither, the node keeps nothing on disk).
pub fn run(
    mgm: &str,
    node_id: u16,
    listen_override: Option<SocketAddr>,
    data_dir: Option<std::path::PathBuf>,
    in_memory: bool,
    secret: Option<norr_transport::auth::ClusterSecret>,
) -> anyhow::Result<()> {
    let name = format!("data node {node_id}");
    let (link, welcome) = fetch_config_with(mgm, PeerRole::DataNode, Some(node_id), &name, secret.clone())
        .with_context(|| format!("cannot get the cluster configuration from mgmd at {mgm}"))?;
    let config = welcome.config.clone();
    let me = config.node(node_id).with_context(|| format!("node {node_id} is not in the cluster configuration"))?;
    if me.kind != NodeKind::Data {
        bail!("node {node_id} is {} in the cluster configuration, not a data node", me.kind.with_article());
    }
    let secret = match config.api_auth {
        ApiAuth::Secret | ApiAuth::Account => {
            Some(secret.with_context(|| crate::secret::missing(&format!("data node {node_id}")))?)
        }
        ApiAuth::Off => {
            if secret.is_some() {
                eprintln!(
                    "norr datad: the cluster file says api_auth = \"off\": the secret given is not checked, and \
                     anyone who reaches the data node's port is served"
                );
            }
            None
        }
    };
    let listen = match listen_override {
        Some(a) => a,
        None => resolve(&format!("data node {node_id}"), &me.address())?,
    };
    let data_dir = match data_dir.or_else(|| me.data_dir.clone()).filter(|_| !in_memory) {
        Some(dir) => {
            let lock = norr_runtime::fs::open_data_dir(&dir, node_id)?;
            eprintln!("norr datad: data node {node_id} keeps its data in {}", lock.path().display());
            Some(lock)
        }
        None => {
            eprintln!(
                "norr datad: data node {node_id} has no data_dir (cluster file or --data-dir): it keeps nothing on \
                 disk, and a restart of every data node loses every row"
            );
            None
        }
    };
    let link = Arc::new(link);
    let accounts =
        (config.api_auth == ApiAuth::Account).then(|| Arc::new(norr_transport::account_book::AccountDirectory::new()));
    let plan = NodePlan {
        accounts,
        secret,
        data_dir,
        node_id,
        listen,
        config,
        digest: welcome.digest,
        arbitrator: Arc::new(MgmArbitrator { link: link.clone() }),
    };

    let started_at = Instant::now();
    let reported = Arc::new(Mutex::new(Reported {
        state: NodeState::Starting { phase: String::new() },
        status: None,
        durable: None,
        address: listen.to_string(),
        refusal: None,
    }));
    let (tx, rx) = channel::<Event>();
    {
        let reported = reported.clone();
        let tx = tx.clone();
        link.start_reporting(
            REPORT_PERIOD,
            Box::new(move || report(node_id, started_at, &reported.lock().unwrap_or_else(|p| p.into_inner()))),
            Box::new(move |c| {
                let _ = tx.send(Event::Command(c));
            }),
        );
    }
    ctrlc::set_handler(move || {
        let _ = tx.send(Event::Interrupt);
    })
    .context("cannot install the Ctrl-C handler")?;

    let node = plan.start()?;
    eprintln!(
        "norr datad: data node {node_id} of cluster \"{}\" listening on {} (node group {}; Ctrl-C stops it)",
        plan.config.name,
        node.local_addr(),
        plan.config.node_group_of(node_id).map_or_else(|| "?".to_string(), |g| g.to_string()),
    );
    // Native logins with SQL accounts: read them through the node itself.
    let _reader = match (&plan.accounts, &plan.secret) {
        (Some(dir), Some(secret)) => {
            let mut at = node.local_addr();
            if at.ip().is_unspecified() {
                at.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
            }
            eprintln!("norr datad: native clients may log in with SQL accounts (api_auth = \"account\")");
            Some(
                crate::account_reader::start(at, secret.clone(), dir.clone())
                    .context("cannot start the account reader")?,
            )
        }
        _ => None,
    };
    let r = supervise(&plan, node, &rx, &reported);
    eprintln!("norr datad: data node {node_id} stopped");
    r
}

fn set_state(reported: &Mutex<Reported>, state: NodeState) {
    reported.lock().unwrap_or_else(|p| p.into_inner()).state = state;
}

/// The supervisor's loop: returns when the process should end.
fn supervise(
    plan: &NodePlan,
    first: DataNodeHandle,
    rx: &Receiver<Event>,
    reported: &Mutex<Reported>,
) -> anyhow::Result<()> {
    let mut node = Some(first);
    let mut restarts: VecDeque<Instant> = VecDeque::new();
    loop {
        // The node ended on its own?
        if node.as_ref().is_some_and(DataNodeHandle::is_finished) {
            let exit = node.take().expect("checked").join_exit();
            match exit {
                Ok(NodeExit::Stopped) => return Ok(()),
                Ok(NodeExit::Shutdown { reason, restart: true }) => {
                    let now = Instant::now();
                    restarts.retain(|t| now.duration_since(*t) < RESTART_WINDOW);
                    if restarts.len() >= MAX_RESTARTS {
                        bail!(
                            "data node {} stopped ({reason:?}) and was restarted {MAX_RESTARTS} times within {} s; \
                             giving up",
                            plan.node_id,
                            RESTART_WINDOW.as_secs()
                        );
                    }
                    restarts.push_back(now);
                    eprintln!("norr datad: data node {} stopped ({reason:?}); starting it again", plan.node_id);
                    set_state(reported, NodeState::Starting { phase: "node restart".into() });
                    node = Some(plan.start()?);
                }
                Ok(NodeExit::Shutdown { reason, restart: false }) => {
                    bail!("data node {} was shut down by the cluster: {reason:?}", plan.node_id)
                }
                Err(e) => return Err(anyhow::Error::new(e).context("data node failed")),
            }
        }
        if let Some(n) = &node {
            let status = n.status();
            let mut r = reported.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(s) = &status {
                r.state = if s.started { NodeState::Started } else { NodeState::Starting { phase: s.phase.clone() } };
            }
            r.status = status;
            r.durable = n.durable_gci().or(r.durable);
        }
        let event = rx.recv_timeout(POLL);
        if let Ok(Event::Command(cmd)) = &event {
            eprintln!("norr datad: mgmd asks data node {} to {cmd:?}", plan.node_id);
        }
        match event {
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) | Ok(Event::Interrupt | Event::Command(NodeCommand::Shutdown)) => {
                set_state(reported, NodeState::Stopping);
                stop(node.take())?;
                return Ok(());
            }
            Ok(Event::Command(NodeCommand::Stop)) => {
                set_state(reported, NodeState::Stopping);
                node = match leave(plan.node_id, node.take())? {
                    Left::Stopped => {
                        set_state(reported, NodeState::Stopped);
                        reported.lock().unwrap_or_else(|p| p.into_inner()).status = None;
                        None
                    }
                    Left::Refused(n, reason) => {
                        // Refused (the last live node of its group): it runs
                        // on, and says so (it reported "stopping" forever
                        // before), with the reason.
                        refused(reported, reason);
                        Some(n)
                    }
                };
            }
            Ok(Event::Command(NodeCommand::Start)) => {
                if node.is_none() {
                    set_state(reported, NodeState::Starting { phase: String::new() });
                    node = Some(plan.start()?);
                }
            }
            Ok(Event::Command(NodeCommand::Restart)) => {
                set_state(reported, NodeState::Stopping);
                node = match leave(plan.node_id, node.take())? {
                    Left::Stopped => {
                        set_state(reported, NodeState::Starting { phase: "node restart".into() });
                        Some(plan.start()?)
                    }
                    Left::Refused(n, reason) => {
                        refused(reported, reason);
                        Some(n)
                    }
                };
            }
        }
    }
}

/// How long a graceful leave may take before the node is stopped outright:
/// the members agree in one membership round (a few heartbeats), and the
/// node's own transactions finish meanwhile.
const LEAVE_WAIT: Duration = Duration::from_secs(30);

/// `norr mgm stop N` / `restart N`: leave the cluster gracefully (the other
/// members agree first, so nothing of this node fails over as after a
/// crash), then stop. Returns the node back if the cluster refused (it is
/// the last live node of its node group: stopping it would stop the
/// cluster; `norr mgm stop --all` does that); None once it stopped.
/// How a request to leave the cluster ended.
enum Left {
    /// The node left (or was not running, or was stopped outright).
    Stopped,
    /// The cluster refused: the node runs on; why.
    Refused(DataNodeHandle, String),
}

/// The node runs on after a refused stop or restart: started again, with
/// the refusal reported.
fn refused(reported: &Mutex<Reported>, reason: String) {
    let mut r = reported.lock().unwrap_or_else(|p| p.into_inner());
    r.state = NodeState::Started;
    let count = r.refusal.as_ref().map_or(0, |f| f.count) + 1;
    r.refusal = Some(Refusal { count, reason });
}

fn leave(node_id: u16, node: Option<DataNodeHandle>) -> anyhow::Result<Left> {
    let Some(n) = node else { return Ok(Left::Stopped) };
    n.leave(node_id);
    let deadline = Instant::now() + LEAVE_WAIT;
    loop {
        if n.is_finished() {
            return match n.join_exit() {
                Ok(NodeExit::Shutdown { reason: ShutdownReason::Requested, .. }) | Ok(NodeExit::Stopped) => {
                    eprintln!("norr datad: data node {node_id} left the cluster and stopped");
                    Ok(Left::Stopped)
                }
                Ok(other) => {
                    eprintln!("norr datad: data node {node_id} stopped while leaving: {other:?}");
                    Ok(Left::Stopped)
                }
                Err(e) => Err(anyhow::Error::new(e).context("data node failed while leaving")),
            };
        }
        if let Some(reason) = n.take_leave_refusal() {
            eprintln!("norr datad: data node {node_id} keeps running: the cluster refused to let it stop: {reason}");
            return Ok(Left::Refused(n, reason));
        }
        if Instant::now() >= deadline {
            eprintln!(
                "norr datad: data node {node_id} did not leave within {} s; stopping it outright",
                LEAVE_WAIT.as_secs()
            );
            stop(Some(n))?;
            return Ok(Left::Stopped);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stop(node: Option<DataNodeHandle>) -> anyhow::Result<()> {
    if let Some(n) = node {
        n.shutdown();
        n.join_exit().context("data node failed while stopping")?;
    }
    Ok(())
}

fn report(node_id: NodeId, started_at: Instant, r: &Reported) -> NodeReport {
    let s = r.status.as_ref();
    NodeReport {
        node_id,
        state: r.state.clone(),
        node_group: s.and_then(|s| s.node_group),
        primary_partitions: s.map_or(0, |s| s.primary_partitions),
        partitions: s.map_or(0, |s| s.partitions),
        version: env!("CARGO_PKG_VERSION").to_string(),
        uptime_ms: u64::try_from(started_at.elapsed().as_millis()).unwrap_or(u64::MAX),
        phases: s.map_or_else(Vec::new, |s| s.phases.clone()),
        president: s.is_some_and(|s| s.president == Some(node_id)),
        last_durable_gci: r.durable.map(|(gci, _)| gci),
        files_complete: r.durable.is_some_and(|(_, complete)| complete),
        address: r.address.clone(),
        refusal: r.refusal.clone(),
    }
}
