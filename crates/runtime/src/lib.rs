//! The production host of a data node: sockets, the real clock and the thread
//! that runs the blocks.
//!
//! The blocks are deterministic state machines (see `norr-kernel`); this crate
//! feeds them: it accepts API connections, decodes frames into signals, delivers
//! them into the node's [`Scheduler`], runs the scheduler, advances its clock
//! from a monotonic real clock, fires delayed signals on time, and sends the
//! signals addressed to API nodes back over their connections under the adaptive
//! send policy of `norr-transport`.
//!
//! # Thread layout
//!
//! [`RuntimeOptions::threads`] is the thread layout. Only `threads: 1` is
//! implemented: ONE event-loop thread (mio, like Redis) does network receive,
//! runs every block and sends. That is the right layout on this project's
//! 2-core machines; layouts with separate receive/send/LDM threads will be
//! further values of the same option, not code changes in the blocks.
//!
//! # Connection protocol
//!
//! See `event_loop` for the connection life cycle: handshake, API node ids,
//! validation of every frame, back-pressure and the `ApiFailReq` sent to TC and
//! DICT when a connection ends.

mod conn;
mod event_loop;
pub mod fs;
mod host;
mod local_link;
mod stream;

use norr_kernel::{BlockRef, NodeId, Scheduler};
use norr_knobs::Knobs;
use norr_signals::{block, Signal};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

pub use conn::FIRST_API_NODE_ID;
pub use event_loop::{NodeExit, MAX_OUTSTANDING_REQUESTS};
pub use host::Arbitrator;

/// What a data node needs to start.
#[derive(Debug, Clone)]
pub struct DataNodeConfig {
    pub node_id: NodeId,
    /// Address for API connections (port 0: any free port, see
    /// [`DataNodeHandle::local_addr`]), and in a cluster for the other data
    /// nodes too.
    pub listen: SocketAddr,
    pub knobs: Knobs,
    /// A data node of a cluster: its peers; None: a data node on its own.
    pub cluster: Option<ClusterNet>,
}

/// A data node's cluster: the other data nodes and how to reach them.
///
/// With `DataNodeConfig::cluster: Some(..)`, [`start_data_node`] builds the
/// node with `norr_node::build_cluster_node` (TC, LQH, DICT, DIH and QMGR):
/// it connects to the other data nodes, forms or joins the cluster through
/// QMGR, heartbeats them and takes part in the node-failure protocol. Every
/// data node must be given the same `data_nodes`, `node_groups` and
/// `config_digest` (the cluster file's), and its own entry of `data_nodes`
/// as `DataNodeConfig::listen`. The node ends on its own when QMGR or DIH
/// asks (excluded by the others, lost arbitration, a node group lost):
/// [`DataNodeHandle::join_exit`] returns `NodeExit::Shutdown { reason,
/// restart }`; with `restart: true` the process starts the node again with
/// the same configuration (a new incarnation with empty memory: it joins the
/// running cluster and copies its partitions, or forms a new one), with
/// `restart: false` it stops with the reason.
#[derive(Clone)]
pub struct ClusterNet {
    /// Every data node of the cluster (this one too) and where it listens.
    pub data_nodes: std::collections::BTreeMap<NodeId, SocketAddr>,
    /// Data nodes in node groups of `replicas` (the configuration's order).
    pub node_groups: Vec<Vec<NodeId>>,
    /// Digest of the cluster configuration: peers must run the same one.
    pub config_digest: u64,
    /// The arbitrator (the management server); None: none, a failure that
    /// needs arbitration stops the survivors.
    pub arbitrator: Option<Arc<dyn Arbitrator>>,
}

impl std::fmt::Debug for ClusterNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterNet")
            .field("data_nodes", &self.data_nodes)
            .field("node_groups", &self.node_groups)
            .field("config_digest", &self.config_digest)
            .field("arbitrator", &self.arbitrator.is_some())
            .finish()
    }
}

/// How the host runs the node: thread layout and loop bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeOptions {
    /// Threads running the node. Only 1 is implemented: one event-loop thread
    /// receives, runs every block and sends (the default on 2-core machines).
    /// Other values are refused by [`start_data_node_with`] until the
    /// multi-threaded layouts exist.
    pub threads: u32,
    /// Most signals executed between two looks at the network, so a busy node
    /// still reads new requests and sends replies.
    pub max_signals_per_poll: usize,
    /// Most bytes read from one connection before the loop turns to the others
    /// (fairness between clients).
    pub max_read_bytes_per_round: usize,
    /// A connection that has not completed the handshake this long after it was
    /// accepted is closed (idle sockets must not hold connection slots).
    pub handshake_timeout_ms: u64,
    /// Also accept API nodes on this Unix-domain socket (same host only;
    /// cheaper per message than loopback TCP). A stale socket file is
    /// replaced; the file is removed when the node stops.
    pub unix_socket: Option<std::path::PathBuf>,
    /// The node's data directory: when set, the host registers the FS block
    /// (`block::FS`, real files under this directory, see `fs`). The caller
    /// opens and locks it first with [`fs::open_data_dir`].
    pub data_dir: Option<std::path::PathBuf>,
    /// The cluster secret: when set, every API connection (native clients,
    /// SQL nodes, management) must prove it knows it before it gets an API
    /// node id (`norr_transport::auth`); None: anyone who reaches the port
    /// is served (`api_auth = "off"`).
    pub api_secret: Option<norr_transport::auth::ClusterSecret>,
    /// The SQL accounts (`[cluster] api_auth = "account"`): with
    /// `api_secret` also set, a native client may answer the challenge with
    /// an account's login (`norr_transport::account_auth`) instead of the
    /// secret, checked against the newest table published here. None: only
    /// the secret is accepted. Ignored without `api_secret` (nothing is
    /// challenged then).
    pub api_accounts: Option<std::sync::Arc<norr_transport::account_book::AccountDirectory>>,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            threads: 1,
            max_signals_per_poll: 4096,
            max_read_bytes_per_round: 256 * 1024,
            handshake_timeout_ms: 10_000,
            unix_socket: None,
            data_dir: None,
            api_secret: None,
            api_accounts: None,
        }
    }
}

/// Counters of the host (network side, not the blocks'), published once per
/// loop round.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimeStats {
    pub connections_accepted: u64,
    pub connections_closed: u64,
    /// Connections closed for a protocol violation or a refused handshake.
    pub protocol_errors: u64,
    /// Of those, connections refused because they did not prove the cluster
    /// secret (no answer to the challenge, a wrong proof, another message).
    pub auth_refusals: u64,
    /// Signals from other data nodes delivered into the scheduler.
    pub peer_signals_in: u64,
    /// Signals from API nodes delivered into the scheduler.
    pub signals_in: u64,
    /// Signals queued for API nodes.
    pub signals_out: u64,
    /// Flushes of a send buffer to its socket (each may carry many signals).
    pub flushes: u64,
    pub bytes_out: u64,
    /// Times a connection was paused because the job buffer was full.
    pub stalls: u64,
    /// Signals for API nodes no longer connected.
    pub dropped_to_unknown: u64,
    /// Idle spins (`Knobs::idle_spin_us`) that found work before the bound,
    /// and those that ran out and blocked.
    pub spin_hits: u64,
    pub spin_misses: u64,
    /// Zero-timeout socket polls made while spinning (there is no spin while
    /// every connection is an in-process link).
    pub spin_socket_polls: u64,
    /// Times a connection's reading was paused because its peer did not read
    /// its replies (`Knobs::send_buffer_pause_bytes`), and connections paused now.
    pub send_pauses: u64,
    pub send_paused_now: u64,
    /// Times a native client's connection was not read because it had
    /// `MAX_OUTSTANDING_REQUESTS` requests open.
    pub outstanding_pauses: u64,
    /// Most unsent bytes any one connection had at once since the node started.
    pub send_buffer_peak_bytes: u64,
    /// Connections closed for sending no request within
    /// `Knobs::api_first_request_timeout_ms` of their handshake.
    pub first_request_timeouts: u64,
}

/// Stops a data node from any thread (a Ctrl-C handler, a test).
#[derive(Clone)]
pub struct NodeStopper {
    stop: Arc<AtomicBool>,
    waker: Arc<mio::Waker>,
}

impl NodeStopper {
    /// Ask the node to stop; returns at once.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Err(e) = self.waker.wake() {
            tracing::warn!("data node shutdown: waking the event loop failed: {e}");
        }
    }
}

/// Opens in-process connections to a running data node (see
/// [`DataNodeHandle::local_connector`]). Cheap to clone; usable from any thread.
#[derive(Clone)]
pub struct LocalConnector {
    local: Arc<local_link::LocalReady>,
}

impl LocalConnector {
    /// A new connection to the node, for an API node in this process
    /// (`norr_client::Client::connect_local`). Fails once the node stopped.
    pub fn connect(&self) -> io::Result<norr_transport::local_pipe::ApiEnd> {
        self.local.connect()
    }
}

impl std::fmt::Debug for LocalConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LocalConnector")
    }
}

/// A running data node.
pub struct DataNodeHandle {
    local_addr: SocketAddr,
    local: Arc<local_link::LocalReady>,
    stats: Arc<std::sync::Mutex<RuntimeStats>>,
    stop: Arc<AtomicBool>,
    waker: Arc<mio::Waker>,
    thread: Option<JoinHandle<io::Result<NodeExit>>>,
    status: Arc<std::sync::Mutex<host::HostReports>>,
    inbox: host::Inbox,
}

impl DataNodeHandle {
    /// Where the node listens for API connections.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Opens connections for API nodes in this process: the same protocol as
    /// a socket (handshake, frames, checks), through an in-memory pipe
    /// instead of system calls (`norr up` runs its SQL node this way).
    pub fn local_connector(&self) -> LocalConnector {
        LocalConnector { local: self.local.clone() }
    }

    /// The node's status as its DIH last reported it (cluster nodes).
    pub fn status(&self) -> Option<norr_signals::cluster::NodeStatus> {
        self.status.lock().ok().and_then(|s| s.status.clone())
    }

    /// What the node's files can restore to, as its CKPT last reported:
    /// (the GCI a restart recovers to, whether the files are a complete copy
    /// of its partitions). None: no data directory, or not reported yet.
    pub fn durable_gci(&self) -> Option<(u64, bool)> {
        self.status.lock().ok().and_then(|s| s.durable)
    }

    /// Ask the cluster to let data node `node_id` (this one) leave
    /// gracefully: QMGR asks the president, the members agree, and the node
    /// then stops with `NodeExit::Shutdown { reason: Requested, .. }`
    /// without any of its transactions failing over as after a crash. A
    /// refusal (the last live node of a node group) is reported by
    /// `take_leave_refusal`. Returns at once.
    pub fn leave(&self, node_id: norr_kernel::NodeId) {
        use norr_signals::cluster::{ClusterSignal, QmgrMsg};
        let msg = ClusterSignal::Qmgr(QmgrMsg::LeaveReq { node: node_id });
        self.deliver(norr_signals::Envelope {
            from: norr_kernel::BlockRef::new(node_id, norr_signals::block::HOST, 0),
            to: norr_kernel::BlockRef::new(node_id, norr_signals::block::QMGR, 0),
            prio: norr_kernel::Priority::B,
            signal: norr_signals::Signal::Cluster(Box::new(msg)),
        });
    }

    /// Why the cluster refused the last graceful leave, once.
    pub fn take_leave_refusal(&self) -> Option<String> {
        self.status.lock().ok().and_then(|mut s| s.leave_refused.take())
    }

    /// Hand a signal to one of the node's blocks from another thread (e.g.
    /// a graceful leave to QMGR); it runs at the loop's next round.
    pub fn deliver(&self, env: norr_signals::Envelope) {
        self.inbox.push(env);
    }

    /// The host's counters as of the last loop round.
    pub fn stats(&self) -> RuntimeStats {
        self.stats.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Ask the node to stop (returns at once; `join` waits for it). Open
    /// connections are closed.
    pub fn shutdown(&self) {
        self.stopper().stop();
    }

    /// A handle that can stop the node from another thread while this one waits
    /// in `join`.
    pub fn stopper(&self) -> NodeStopper {
        NodeStopper { stop: self.stop.clone(), waker: self.waker.clone() }
    }

    /// Wait until the node has stopped (after `shutdown`, or a fatal error).
    pub fn join(mut self) -> io::Result<()> {
        self.join_inner().map(|_| ())
    }

    /// The node's event loop has ended (`join_exit` then returns at once).
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// `join`, saying why the node stopped (asked to, or by its blocks).
    pub fn join_exit(mut self) -> io::Result<NodeExit> {
        self.join_inner()
    }

    fn join_inner(&mut self) -> io::Result<NodeExit> {
        match self.thread.take() {
            None => Ok(NodeExit::Stopped),
            Some(t) => match t.join() {
                Ok(r) => r,
                Err(_) => Err(io::Error::other("data node event loop panicked")),
            },
        }
    }
}

impl Drop for DataNodeHandle {
    /// Dropping the handle stops the node.
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.shutdown();
            let _ = self.join_inner();
        }
    }
}

/// Start a data node running the blocks of `norr_txn::build_data_node` (TC,
/// LQH, DICT) with the default [`RuntimeOptions`] (`threads: 1`). Returns once
/// the node listens.
pub fn start_data_node(cfg: DataNodeConfig) -> io::Result<DataNodeHandle> {
    let sched = default_blocks(&cfg)?;
    start_data_node_with(cfg, RuntimeOptions::default(), sched)
}

/// [`start_data_node`] with host options (a Unix socket, loop bounds).
pub fn start_data_node_with_options(cfg: DataNodeConfig, opts: RuntimeOptions) -> io::Result<DataNodeHandle> {
    let sched = match &opts.data_dir {
        Some(dir) => durable_blocks(&cfg, dir)?,
        None => default_blocks(&cfg)?,
    };
    start_data_node_with(cfg, opts, sched)
}

/// Run a data node on the calling thread's behalf until it stops (the
/// `norr datad` command).
pub fn run_data_node(cfg: DataNodeConfig) -> io::Result<()> {
    start_data_node(cfg)?.join()
}

/// The blocks a production data node runs: on its own, TC, LQH and DICT; in
/// a cluster, those with DIH and QMGR (`norr_node::build_cluster_node`).
fn default_blocks(cfg: &DataNodeConfig) -> io::Result<Scheduler<Signal>> {
    cfg.knobs.validate().map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    Ok(match &cfg.cluster {
        None => norr_txn::build_data_node(cfg.node_id, &cfg.knobs),
        Some(c) => {
            let topo = norr_node::Topology { node: cfg.node_id, node_groups: c.node_groups.clone() };
            norr_node::build_cluster_node(&topo, &cfg.knobs)
        }
    })
}

/// The blocks of a data node with a data directory (`opts.data_dir`):
/// restarted from its files (norr_node::durable), with REDO logging, the
/// schema file and global checkpoints. The caller holds the directory's
/// lock (`fs::open_data_dir`). A restart that cannot recover everything up
/// to the last complete GCI is an error: the node does not start.
fn durable_blocks(cfg: &DataNodeConfig, dir: &std::path::Path) -> io::Result<Scheduler<Signal>> {
    cfg.knobs.validate().map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let topo =
        cfg.cluster.as_ref().map(|c| norr_node::Topology { node: cfg.node_id, node_groups: c.node_groups.clone() });
    let data_dir = norr_node::durable::StdDataDir(dir.to_path_buf());
    let (sched, report) = norr_node::durable::build_durable(cfg.node_id, topo.as_ref(), &cfg.knobs, &data_dir)
        .map_err(|e| io::Error::other(format!("restart from {} failed: {e}", dir.display())))?;
    tracing::info!("data node {}: {report}", cfg.node_id);
    Ok(sched)
}

/// Start a data node running the blocks registered in `sched` (tests use their
/// own blocks). `sched` must belong to `cfg.node_id`, and its B job buffer bound
/// should be `cfg.knobs.job_buffer_bound` (the host checks that bound before it
/// delivers, so a refused signal is kept, never dropped).
pub fn start_data_node_with(
    cfg: DataNodeConfig,
    opts: RuntimeOptions,
    mut sched: Scheduler<Signal>,
) -> io::Result<DataNodeHandle> {
    cfg.knobs.validate().map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    if opts.threads != 1 {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "threads = {}: only the single event-loop thread layout (threads = 1) is implemented",
                opts.threads
            ),
        ));
    }
    if sched.node() != cfg.node_id {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("scheduler belongs to node {}, config says node {}", sched.node(), cfg.node_id),
        ));
    }
    let std_listener = std::net::TcpListener::bind(cfg.listen)?;
    std_listener.set_nonblocking(true)?;
    let local_addr = std_listener.local_addr()?;
    let listener = mio::net::TcpListener::from_std(std_listener);
    let unix_path = opts.unix_socket.clone();
    let unix_listener = unix_path.as_deref().map(stream::bind_unix).transpose()?.map(mio::net::UnixListener::from_std);
    let poll = mio::Poll::new()?;
    let waker = Arc::new(mio::Waker::new(poll.registry(), event_loop::WAKER)?);
    let stop = Arc::new(AtomicBool::new(false));
    let stats = Arc::new(std::sync::Mutex::new(RuntimeStats::default()));
    let local = Arc::new(local_link::LocalReady::new(waker.clone()));
    let fs = match &opts.data_dir {
        Some(dir) => {
            if sched.has_block(norr_kernel::BlockRef::new(cfg.node_id, norr_signals::block::FS, 0)) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "data_dir is set but the scheduler has its own FS block",
                ));
            }
            let c = fs::FsCompletions::new(waker.clone());
            fs::register(&mut sched, dir, c.clone())?;
            Some(c)
        }
        None => None,
    };
    let host_queue = host::HostQueue::default();
    for b in [block::HOST, block::MGM] {
        let r = BlockRef::new(cfg.node_id, b, 0);
        if !sched.has_block(r) {
            sched.add_block(b, 0, Box::new(host::HostBlock { queue: host_queue.clone() }));
        }
    }
    let inbox = host::Inbox::new(waker.clone());
    let inbox_for_handle = inbox.clone();
    let status = Arc::new(std::sync::Mutex::new(host::HostReports::default()));
    let (peers, arbitrator) = match &cfg.cluster {
        None => (None, None),
        Some(c) => {
            let addrs = c.data_nodes.clone();
            if !addrs.contains_key(&cfg.node_id) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("node {} is not a data node of the cluster configuration", cfg.node_id),
                ));
            }
            // Changes at every start of the blocks, so that a node the
            // cluster declared failed can come back only as a new one.
            let incarnation = {
                let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
                (t.as_nanos() as u64) ^ ((std::process::id() as u64) << 32)
            };
            let net = event_loop::PeerNet::new(cfg.node_id, addrs, c.config_digest, incarnation);
            (Some(net), c.arbitrator.clone())
        }
    };
    let mut el = event_loop::EventLoop::new(
        cfg.clone(),
        opts,
        sched,
        poll,
        (listener, unix_listener),
        event_loop::LoopShared {
            stop: stop.clone(),
            stats: stats.clone(),
            local: local.clone(),
            host_queue,
            inbox,
            peers,
            arbitrator,
            status: status.clone(),
            fs,
        },
    )?;
    let socket_file = unix_path.clone();
    let thread = std::thread::Builder::new().name(format!("norr-node-{}", cfg.node_id)).spawn(move || {
        let r = el.run();
        drop(el);
        if let Some(p) = &socket_file {
            let _ = std::fs::remove_file(p);
        }
        if let Err(e) = &r {
            tracing::error!("data node event loop failed: {e}");
        }
        r
    })?;
    tracing::info!(node = cfg.node_id, %local_addr, unix_socket = ?unix_path, "data node listening");
    Ok(DataNodeHandle { local_addr, local, stats, stop, waker, thread: Some(thread), status, inbox: inbox_for_handle })
}
