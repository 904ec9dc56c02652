//! The node side of mgmd: data nodes, SQL nodes and clients fetch the
//! cluster configuration, then keep a session that reports, takes commands
//! and asks for arbitration.
//!
//! Blocking std TCP on one background thread per link (no async runtime),
//! so it fits the data node's event loop, the SQL node and clients alike.
//! mgmd going away never blocks or fails the node: the link reconnects in
//! the background with backoff (logged), says Hello again with the same node
//! id, and carries on. Only arbitration needs mgmd at the moment it is asked.

use crate::command_auth;
use crate::config::{ClusterConfig, ClusterSecret};
use crate::protocol::{
    bounded_text, send_on, ArbitReply, ArbitReq, FramedConn, FromMgmd, MgmCommand, MgmError, MgmReply, NodeCommand,
    NodeReport, PeerRole, Recv, ToMgmd, MGM_MAGIC, MGM_PROTOCOL_VERSION,
};
use norr_kernel::NodeId;
use std::collections::{BTreeMap, VecDeque};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Per address tried.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Longest wait for mgmd's answer to a Hello.
pub const WELCOME_TIMEOUT: Duration = Duration::from_secs(10);
/// Something is sent at least this often (a heartbeat when no report is
/// due), well inside mgmd's `SESSION_STALE_AFTER` of 3 s.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(1000);
/// Reconnect backoff: doubles from the first to the last value.
pub const RECONNECT_BACKOFF_MIN: Duration = Duration::from_millis(100);
pub const RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Commands that arrive before `start_reporting` are kept, up to this many.
const MAX_QUEUED_COMMANDS: usize = 16;
/// The link thread's longest sleep: bounds how late it notices `Drop`.
const TICK: Duration = Duration::from_millis(100);

/// What mgmd answered to our Hello.
#[derive(Debug, Clone)]
pub struct Welcome {
    /// Ours: the configured one (data nodes) or the one mgmd allocated.
    pub node_id: NodeId,
    pub config: ClusterConfig,
    /// The canonical text as received (`config.to_toml()`).
    pub config_toml: String,
    pub digest: u64,
}

impl Welcome {
    /// For a node started with a configuration file of its own as well as
    /// `--mgm`: Err naming every difference ("data.lock_wait_timeout_ms: 500
    /// here, 1200 in the cluster") unless the two are the same. The node
    /// must then not start.
    pub fn check_same_as(&self, local: &ClusterConfig) -> Result<(), MgmError> {
        let diff = local.diff(&self.config);
        if diff.is_empty() {
            Ok(())
        } else {
            Err(MgmError::ConfigDiffers(diff))
        }
    }
}

/// Connect to the first reachable mgmd of `mgm` ("host:port", several comma
/// separated: tried in order), say Hello, and get the configuration.
/// Errors name every address tried; a refusal (e.g. the node id is in use)
/// is returned at once with mgmd's reason.
pub fn fetch_config(
    mgm: &str,
    role: PeerRole,
    node_id: Option<NodeId>,
    name: &str,
) -> Result<(MgmLink, Welcome), MgmError> {
    fetch_config_with(mgm, role, node_id, name, None)
}

/// [`fetch_config`] for a node that holds the cluster secret: it proves it
/// when mgmd challenges the Hello (`session_auth`), here and at every
/// reconnect. Without the secret a mgmd that has one refuses the session.
pub fn fetch_config_with(
    mgm: &str,
    role: PeerRole,
    node_id: Option<NodeId>,
    name: &str,
    secret: Option<ClusterSecret>,
) -> Result<(MgmLink, Welcome), MgmError> {
    let addrs = split_addrs(mgm)?;
    let name = bounded_text(name);
    let (conn, addr, welcome) = connect_and_hello(&addrs, role, node_id, &name, secret.as_ref())?;
    tracing::info!("connected to mgmd at {addr} as node {} of cluster \"{}\"", welcome.node_id, welcome.config.name);
    let link = MgmLink::spawn(addrs, role, welcome.node_id, name, welcome.digest, conn, addr, secret);
    Ok((link, welcome))
}

/// One command to mgmd on a short connection, without the cluster secret:
/// a mgmd that has one answers a command that changes the cluster with an
/// error (see `run_command_with`).
pub fn run_command(mgm: &str, cmd: MgmCommand, timeout: Duration) -> Result<MgmReply, MgmError> {
    run_command_with(mgm, cmd, timeout, None)
}

/// One command to mgmd on a short connection (what `norr mgm` does). With
/// `secret`, a command that changes the cluster is signed
/// (`command_auth`): ask for a challenge, answer it with the command and
/// the proof. `show` and `status` are never signed.
pub fn run_command_with(
    mgm: &str,
    cmd: MgmCommand,
    timeout: Duration,
    secret: Option<&ClusterSecret>,
) -> Result<MgmReply, MgmError> {
    let addrs = split_addrs(mgm)?;
    // A management client's session is never challenged (session_auth):
    // its commands carry their own proofs.
    let (mut conn, _, _) = connect_and_hello(&addrs, PeerRole::Mgm, None, "norr mgm", None)?;
    const REQ: u32 = 1;
    match secret.filter(|_| cmd.changes_state()) {
        None => conn.send(&ToMgmd::Command { req_id: REQ, cmd })?,
        Some(secret) => {
            conn.send(&ToMgmd::CommandChallengeReq { req_id: REQ })?;
            let (nonce, mgmd_node) = loop {
                match conn.recv_within::<FromMgmd>(timeout)? {
                    FromMgmd::CommandChallenge { req_id: REQ, nonce, mgmd_node } => break (nonce, mgmd_node),
                    other => tracing::debug!("norr mgm: ignoring {other:?} while waiting for the challenge"),
                }
            };
            let signed = command_auth::sign(secret, &nonce, mgmd_node, REQ, cmd)
                .map_err(|detail| MgmError::Protocol { peer: conn.peer().to_string(), detail })?;
            conn.send(&signed)?;
        }
    }
    loop {
        match conn.recv_within::<FromMgmd>(timeout)? {
            FromMgmd::CommandReply { req_id: REQ, reply } => return Ok(reply),
            other => tracing::debug!("norr mgm: ignoring {other:?} while waiting for the reply"),
        }
    }
}

fn split_addrs(mgm: &str) -> Result<Vec<String>, MgmError> {
    let addrs: Vec<String> = mgm.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
    if addrs.is_empty() {
        return Err(MgmError::Connect { addrs: format!("{mgm:?}"), detail: "no address given (HOST:PORT)".into() });
    }
    Ok(addrs)
}

fn connect_one(addr: &str) -> Result<TcpStream, String> {
    let resolved = addr.to_socket_addrs().map_err(|e| format!("{addr}: {e}"))?;
    let mut last = format!("{addr}: resolves to no address");
    for a in resolved {
        match TcpStream::connect_timeout(&a, CONNECT_TIMEOUT) {
            Ok(s) => return Ok(s),
            Err(e) => last = format!("{addr}: {e}"),
        }
    }
    Err(last)
}

/// The first mgmd that answers, its address and its Welcome.
fn connect_and_hello(
    addrs: &[String],
    role: PeerRole,
    node_id: Option<NodeId>,
    name: &str,
    secret: Option<&ClusterSecret>,
) -> Result<(FramedConn, String, Welcome), MgmError> {
    let mut failures = Vec::new();
    for addr in addrs {
        let stream = match connect_one(addr) {
            Ok(s) => s,
            Err(e) => {
                failures.push(e);
                continue;
            }
        };
        let mut conn = FramedConn::new(stream);
        let hello =
            ToMgmd::Hello { magic: MGM_MAGIC, version: MGM_PROTOCOL_VERSION, role, node_id, name: name.to_string() };
        let mut answer = conn.send(&hello).and_then(|()| conn.recv_within::<FromMgmd>(WELCOME_TIMEOUT));
        if let Ok(FromMgmd::SessionChallenge { nonce, mgmd_node }) = answer {
            let Some(secret) = secret else {
                return Err(MgmError::Refused {
                    addr: addr.clone(),
                    reason: crate::session_auth::missing_secret_reason(role),
                });
            };
            let proof = crate::session_auth::prove(secret, &nonce, mgmd_node, role, node_id)
                .map_err(|detail| MgmError::Protocol { peer: addr.clone(), detail })?;
            answer = conn.send(&proof).and_then(|()| conn.recv_within::<FromMgmd>(WELCOME_TIMEOUT));
        }
        match answer {
            Ok(FromMgmd::Welcome { node_id: got, config_toml, digest }) => {
                let config = ClusterConfig::parse(&config_toml, Path::new("."))
                    .map_err(|source| MgmError::BadConfig { addr: addr.clone(), source })?;
                if config.digest() != digest {
                    return Err(MgmError::Protocol {
                        peer: addr.clone(),
                        detail: format!(
                            "configuration digest {digest:#018x} does not match its text ({:#018x}): \
                             mgmd runs another NorrDB version?",
                            config.digest()
                        ),
                    });
                }
                if role != PeerRole::Mgm && (got == 0 || node_id.is_some_and(|want| want != got)) {
                    return Err(MgmError::Protocol {
                        peer: addr.clone(),
                        detail: format!("asked for node id {node_id:?}, was given {got}"),
                    });
                }
                let welcome = Welcome { node_id: got, config, config_toml, digest };
                return Ok((conn, addr.clone(), welcome));
            }
            Ok(FromMgmd::Refused { reason }) => return Err(MgmError::Refused { addr: addr.clone(), reason }),
            Ok(other) => failures.push(format!("{addr}: answered the hello with {other:?}")),
            Err(e) => failures.push(format!("{addr}: {e}")),
        }
    }
    Err(MgmError::Connect { addrs: addrs.join(","), detail: failures.join("; ") })
}

/// Builds this node's report (called on the link thread).
pub type ReportFn = Box<dyn Fn() -> NodeReport + Send>;
/// Takes a command pushed by mgmd (called on the link thread: hand it over, do not run it there).
pub type CommandFn = Box<dyn Fn(NodeCommand) + Send>;

struct Reporter {
    period: Duration,
    report: ReportFn,
    on_command: CommandFn,
}

/// An arbitration request waiting for mgmd's answer.
struct PendingArbit {
    req: ArbitReq,
    sent: bool,
    reply: Sender<ArbitReply>,
}

#[derive(Default)]
struct LinkState {
    /// Write half of the current connection (None while reconnecting).
    writer: Option<TcpStream>,
    connected_to: Option<String>,
    arbit: Option<PendingArbit>,
    commands: BTreeMap<u32, Sender<MgmReply>>,
    queued: VecDeque<NodeCommand>,
    /// Reconnect now, not at the end of the backoff (arbitration is waiting).
    urgent: bool,
}

struct LinkShared {
    addrs: Vec<String>,
    /// Proved again at every reconnect (session_auth).
    secret: Option<ClusterSecret>,
    role: PeerRole,
    node_id: NodeId,
    name: String,
    digest: u64,
    state: Mutex<LinkState>,
    wake: Condvar,
    reporter: Mutex<Option<Reporter>>,
    stop: AtomicBool,
    next_req_id: AtomicU32,
    /// One arbitration at a time.
    arbit_lock: Mutex<()>,
}

impl LinkShared {
    fn state(&self) -> MutexGuard<'_, LinkState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Send on the current connection; false when there is none or it failed
    /// (the link thread notices the broken connection and reconnects).
    fn send(&self, st: &mut LinkState, msg: &ToMgmd) -> bool {
        let Some(w) = &st.writer else { return false };
        let peer = st.connected_to.clone().unwrap_or_default();
        match send_on(w, &peer, msg) {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!("mgmd link: send failed: {e}");
                let _ = w.shutdown(Shutdown::Both);
                false
            }
        }
    }
}

/// A node's session with mgmd. Dropping it closes the session (an API node's
/// dynamic id is then free again).
pub struct MgmLink {
    shared: Arc<LinkShared>,
    thread: Option<JoinHandle<()>>,
}

impl MgmLink {
    #[allow(clippy::too_many_arguments)] // one call site, each argument named there
    fn spawn(
        addrs: Vec<String>,
        role: PeerRole,
        node_id: NodeId,
        name: String,
        digest: u64,
        conn: FramedConn,
        addr: String,
        secret: Option<ClusterSecret>,
    ) -> MgmLink {
        let writer = conn.stream().try_clone().ok();
        let shared = Arc::new(LinkShared {
            addrs,
            secret,
            role,
            node_id,
            name,
            digest,
            state: Mutex::new(LinkState {
                connected_to: writer.as_ref().map(|_| addr),
                writer,
                ..LinkState::default()
            }),
            wake: Condvar::new(),
            reporter: Mutex::new(None),
            stop: AtomicBool::new(false),
            next_req_id: AtomicU32::new(1),
            arbit_lock: Mutex::new(()),
        });
        let s2 = shared.clone();
        let thread = std::thread::Builder::new()
            .name("mgmd-link".into())
            .spawn(move || link_thread(&s2, Some(conn)))
            .expect("spawn the mgmd link thread");
        MgmLink { shared, thread: Some(thread) }
    }

    /// Our node id (kept across reconnects).
    pub fn node_id(&self) -> NodeId {
        self.shared.node_id
    }

    /// The mgmd we are connected to now, if any.
    pub fn connected_to(&self) -> Option<String> {
        self.shared.state().connected_to.clone()
    }

    /// Report every `period` with what `report()` returns; hand commands to
    /// `on_command`. Both run on the link's thread: keep them short (hand a
    /// command to the node's own thread rather than executing it there). A
    /// second call replaces the first. Commands received before the first
    /// call are delivered now. Never blocks on the network.
    pub fn start_reporting(&self, period: Duration, report: ReportFn, on_command: CommandFn) {
        let period = period.max(Duration::from_millis(10));
        let queued: Vec<NodeCommand> = self.shared.state().queued.drain(..).collect();
        for c in queued {
            on_command(c);
        }
        *self.shared.reporter.lock().unwrap_or_else(|p| p.into_inner()) = Some(Reporter { period, report, on_command });
        self.shared.wake.notify_all();
    }

    /// Ask mgmd to arbitrate. Err on timeout or when mgmd cannot be reached
    /// in time (the caller then loses: it must not go on as the cluster).
    /// Sent again after a reconnect within the time-out (a repeated request
    /// from the same side is granted again).
    pub fn arbitrate(&self, req: ArbitReq, timeout: Duration) -> Result<ArbitReply, MgmError> {
        let _one = self.shared.arbit_lock.lock().unwrap_or_else(|p| p.into_inner());
        let deadline = Instant::now() + timeout;
        let generation = req.generation;
        let (tx, rx) = channel();
        {
            let mut st = self.shared.state();
            let msg = ToMgmd::Arbitrate(req.clone());
            let sent = self.shared.send(&mut st, &msg);
            st.arbit = Some(PendingArbit { req, sent, reply: tx });
            if !sent {
                st.urgent = true;
            }
        }
        self.shared.wake.notify_all();
        let result = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(reply @ (ArbitReply::Granted { generation: g } | ArbitReply::Refused { generation: g, .. }))
                    if g == generation =>
                {
                    break Ok(reply)
                }
                Ok(stale) => tracing::debug!("mgmd link: dropping a late arbitration reply {stale:?}"),
                Err(_) => {
                    let connected = self.shared.state().writer.is_some();
                    break Err(if connected { MgmError::Timeout(timeout) } else { MgmError::NotConnected });
                }
            }
        };
        self.shared.state().arbit = None;
        result
    }

    /// A management command over this session (what `norr mgm` sends),
    /// unsigned: a mgmd with the cluster secret answers one that changes the
    /// cluster with an error (`run_command_with` signs).
    pub fn command(&self, cmd: MgmCommand, timeout: Duration) -> Result<MgmReply, MgmError> {
        let req_id = self.shared.next_req_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = channel();
        {
            let mut st = self.shared.state();
            st.commands.insert(req_id, tx);
            if !self.shared.send(&mut st, &ToMgmd::Command { req_id, cmd }) {
                st.commands.remove(&req_id);
                return Err(MgmError::NotConnected);
            }
        }
        let r = rx.recv_timeout(timeout).map_err(|_| MgmError::Timeout(timeout));
        self.shared.state().commands.remove(&req_id);
        r
    }
}

impl Drop for MgmLink {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(w) = &self.shared.state().writer {
            let _ = w.shutdown(Shutdown::Both);
        }
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The link's thread: read what mgmd sends, send reports and heartbeats on
/// time, reconnect when the connection breaks.
fn link_thread(shared: &LinkShared, mut conn: Option<FramedConn>) {
    let mut backoff = RECONNECT_BACKOFF_MIN;
    let mut failures: u32 = 0;
    let mut next_report = Instant::now();
    let mut next_heartbeat = Instant::now() + HEARTBEAT_INTERVAL;
    while !shared.stop.load(Ordering::SeqCst) {
        let Some(c) = conn.as_mut() else {
            match reconnect(shared) {
                Ok(c) => {
                    tracing::info!("mgmd link: node {} reconnected to mgmd at {}", shared.node_id, c.peer());
                    backoff = RECONNECT_BACKOFF_MIN;
                    failures = 0;
                    conn = Some(c);
                    next_report = Instant::now();
                }
                Err(e) => {
                    failures += 1;
                    // Every failure at first, then about once a minute.
                    if failures <= 3 || failures.is_multiple_of(12) {
                        tracing::warn!(
                            "mgmd link: node {}: cannot reach mgmd ({e}); retrying in {} ms (attempt {failures})",
                            shared.node_id,
                            backoff.as_millis()
                        );
                    }
                    // Checked under the lock that Drop and arbitrate take
                    // before they notify: no wake-up is missed.
                    let st = shared.state();
                    let mut st = if st.urgent || shared.stop.load(Ordering::SeqCst) {
                        st
                    } else {
                        shared.wake.wait_timeout(st, backoff).map_or_else(|p| p.into_inner().0, |(g, _)| g)
                    };
                    st.urgent = false;
                    backoff = (backoff * 2).min(RECONNECT_BACKOFF_MAX);
                }
            }
            continue;
        };
        let now = Instant::now();
        let ok = {
            let reporter = shared.reporter.lock().unwrap_or_else(|p| p.into_inner());
            match reporter.as_ref() {
                Some(r) if now >= next_report => {
                    let report = (r.report)();
                    next_report = now + r.period;
                    next_heartbeat = now + HEARTBEAT_INTERVAL;
                    shared.send(&mut shared.state(), &ToMgmd::Report(report))
                }
                _ if now >= next_heartbeat => {
                    next_heartbeat = now + HEARTBEAT_INTERVAL;
                    shared.send(&mut shared.state(), &ToMgmd::Heartbeat)
                }
                _ => true,
            }
        };
        let wait = next_heartbeat
            .min(next_report)
            .saturating_duration_since(Instant::now())
            .clamp(Duration::from_millis(1), TICK);
        let _ = c.stream().set_read_timeout(Some(wait));
        let received = if ok { c.recv::<FromMgmd>() } else { Ok(Recv::Closed) };
        let lost = match received {
            Ok(Recv::Idle) => None,
            Ok(Recv::Msg(m)) => handle(shared, m).err(),
            Ok(Recv::Closed) => Some("connection closed".to_string()),
            Err(e) => Some(e.to_string()),
        };
        if let Some(why) = lost {
            if !shared.stop.load(Ordering::SeqCst) {
                tracing::warn!(
                    "mgmd link: node {}: lost mgmd at {} ({why}); reconnecting in the background",
                    shared.node_id,
                    c.peer()
                );
            }
            let _ = c.stream().shutdown(Shutdown::Both);
            conn = None;
            let mut st = shared.state();
            st.writer = None;
            st.connected_to = None;
            if let Some(a) = st.arbit.as_mut() {
                a.sent = false;
            }
            st.commands.clear();
        }
    }
}

/// One message from mgmd; Err drops the connection.
fn handle(shared: &LinkShared, m: FromMgmd) -> Result<(), String> {
    match m {
        FromMgmd::NodeCommand(cmd) => {
            let reporter = shared.reporter.lock().unwrap_or_else(|p| p.into_inner());
            match reporter.as_ref() {
                Some(r) => (r.on_command)(cmd),
                None => {
                    let mut st = shared.state();
                    if st.queued.len() < MAX_QUEUED_COMMANDS {
                        st.queued.push_back(cmd);
                    } else {
                        tracing::warn!(
                            "mgmd link: dropping command {cmd:?}: {MAX_QUEUED_COMMANDS} wait for start_reporting"
                        );
                    }
                }
            }
        }
        FromMgmd::ArbitReply(reply) => {
            if let Some(a) = shared.state().arbit.as_ref() {
                let _ = a.reply.send(reply);
            }
        }
        FromMgmd::CommandReply { req_id, reply } => {
            if let Some(tx) = shared.state().commands.remove(&req_id) {
                let _ = tx.send(reply);
            }
        }
        // A link never asks for a challenge (it sends no signed commands).
        other @ (FromMgmd::Welcome { .. }
        | FromMgmd::Refused { .. }
        | FromMgmd::CommandChallenge { .. }
        | FromMgmd::SessionChallenge { .. }) => {
            return Err(format!("unexpected {other:?} after the welcome"));
        }
    }
    Ok(())
}

/// Hello again with our node id; on success the connection is installed.
fn reconnect(shared: &LinkShared) -> Result<FramedConn, MgmError> {
    let want = (shared.role != PeerRole::Mgm).then_some(shared.node_id);
    let (conn, addr, welcome) =
        connect_and_hello(&shared.addrs, shared.role, want, &shared.name, shared.secret.as_ref())?;
    if welcome.digest != shared.digest {
        tracing::warn!(
            "mgmd at {addr} now serves another configuration (digest {:#018x}, this node started with {:#018x}): \
             this node keeps the one it started with until it restarts",
            welcome.digest,
            shared.digest
        );
    }
    let writer = conn.stream().try_clone().map_err(|source| MgmError::Io { peer: addr.clone(), source })?;
    let mut st = shared.state();
    st.writer = Some(writer);
    st.connected_to = Some(addr);
    // An arbitration asked while we were away.
    if let Some(req) = st.arbit.as_ref().filter(|a| !a.sent).map(|a| a.req.clone()) {
        let sent = shared.send(&mut st, &ToMgmd::Arbitrate(req));
        if let Some(a) = st.arbit.as_mut() {
            a.sent = sent;
        }
    }
    Ok(conn)
}
