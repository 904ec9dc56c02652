//! `norr mgmd`: the management server.
//!
//! One thread accepts, one thread per connection reads (peers are few and
//! long-lived: data nodes, SQL nodes, clients, `norr mgm`). Every decision
//! is made by the deterministic `Registry` under one mutex; this module only
//! moves bytes. With the cluster secret (`[cluster] api_auth = "secret"`),
//! each connection's `CommandGate` refuses a command that changes the
//! cluster unless it carries the proof of the secret; every refusal is
//! logged with the peer's address. A peer that sends a malformed or unexpected message is
//! disconnected with a logged error; nothing a peer sends can panic mgmd.

pub mod arbitrator;
pub mod registry;

pub use registry::{check_version, Registry, Routed, SessionId, SESSION_STALE_AFTER};

use crate::command_auth::CommandGate;
use crate::config::{ApiAuth, ClusterConfig, ClusterSecret, NodeKind};
use crate::protocol::{
    bounded_text, send_on, FramedConn, FromMgmd, MgmCommand, MgmError, MgmReply, PeerRole, Recv, ToMgmd,
};
use norr_kernel::NodeId;
use std::collections::BTreeMap;
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Most open connections; more are refused (bounded threads and memory).
pub const MAX_CONNECTIONS: usize = 1024;
/// A new connection must say Hello within this.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// A peer that does not take a pushed message within this is disconnected.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a connection thread checks for shutdown while idle.
const POLL: Duration = Duration::from_millis(500);

#[derive(Debug, thiserror::Error)]
pub enum MgmdError {
    #[error("{0}")]
    Config(String),
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: String, source: std::io::Error },
}

/// Which `[[node]]` entry this mgmd is: `wanted`, or the only/first mgmd.
pub fn choose_mgmd(config: &ClusterConfig, wanted: Option<NodeId>) -> Result<NodeId, MgmdError> {
    let mgmds: Vec<NodeId> = config.mgmd_nodes().map(|n| n.id).collect();
    let list = || mgmds.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(", ");
    match wanted {
        None => mgmds.first().copied().ok_or_else(|| {
            MgmdError::Config("the configuration has no [[node]] with kind = \"mgmd\": add one for this mgmd".into())
        }),
        Some(id) => match config.node(id) {
            Some(n) if n.kind == NodeKind::Mgmd => Ok(id),
            Some(n) => Err(MgmdError::Config(format!(
                "--node-id {id}: node {id} is {} node, not a mgmd (mgmd nodes: {})",
                n.kind.with_article(),
                list()
            ))),
            None => Err(MgmdError::Config(format!("--node-id {id}: no such node (mgmd nodes: {})", list()))),
        },
    }
}

/// Addresses each host-restricted SQL/API slot's host resolves to. A host
/// that does not resolve matches only a peer whose address is spelled the same.
fn resolve_slot_hosts(config: &ClusterConfig) -> BTreeMap<NodeId, Vec<IpAddr>> {
    let mut out = BTreeMap::new();
    for n in config.api_slots() {
        let Some(host) = n.host_restriction() else { continue };
        match (host, 0u16).to_socket_addrs() {
            Ok(addrs) => {
                out.insert(n.id, addrs.map(|a| a.ip()).collect());
            }
            Err(e) => tracing::warn!(
                "mgmd: host {host} of slot {} does not resolve ({e}); only that exact address may take it",
                n.id
            ),
        }
    }
    out
}

struct Shared {
    registry: Mutex<Registry>,
    /// Write halves of the open sessions, for pushed messages; a session's
    /// own thread writes through the same mutex so frames never interleave.
    writers: Mutex<BTreeMap<SessionId, Arc<Mutex<TcpStream>>>>,
    stopping: AtomicBool,
    connections: AtomicUsize,
    /// The secret commands that change the cluster must prove (None:
    /// `api_auth = "off"`, commands are open).
    command_secret: Option<ClusterSecret>,
    node_id: NodeId,
}

impl Shared {
    fn registry(&self) -> MutexGuard<'_, Registry> {
        // A panic while holding it is a bug; the state is still the last
        // consistent one (every Registry method completes or does nothing).
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn writers(&self) -> MutexGuard<'_, BTreeMap<SessionId, Arc<Mutex<TcpStream>>>> {
        self.writers.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A running mgmd.
pub struct Mgmd {
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    node_id: NodeId,
    accept: Option<JoinHandle<()>>,
}

/// Stops a running mgmd from another thread (Ctrl-C).
#[derive(Clone)]
pub struct MgmdStopper {
    shared: Arc<Shared>,
    local_addr: SocketAddr,
}

impl MgmdStopper {
    pub fn stop(&self) {
        if self.shared.stopping.swap(true, Ordering::SeqCst) {
            return;
        }
        // Wake the accept loop with a connection of our own.
        let mut wake = self.local_addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(if wake.is_ipv4() {
                IpAddr::from([127, 0, 0, 1])
            } else {
                IpAddr::from([0u16, 0, 0, 0, 0, 0, 0, 1])
            });
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        for w in self.shared.writers().values() {
            let _ = w.lock().unwrap_or_else(|p| p.into_inner()).shutdown(Shutdown::Both);
        }
    }
}

impl Mgmd {
    /// Listen as mgmd `node_id` (None: the only/first mgmd entry), on its
    /// configured host:port unless `listen` overrides it (tests use port 0).
    /// With `api_auth = "secret"` the configuration must hold the secret
    /// (`norr mgmd` puts the one of `--secret-file` / `NORR_CLUSTER_SECRET`
    /// there): commands that change the cluster must prove it.
    pub fn start(
        config: ClusterConfig,
        node_id: Option<NodeId>,
        listen: Option<SocketAddr>,
    ) -> Result<Mgmd, MgmdError> {
        let node_id = choose_mgmd(&config, node_id)?;
        let command_secret = match config.api_auth {
            ApiAuth::Off => None,
            ApiAuth::Secret | ApiAuth::Account => Some(config.secret.clone().ok_or_else(|| {
                MgmdError::Config(format!(
                    "the cluster requires the cluster secret ([cluster] api_auth = \"{}\") and this mgmd has none \
                     to check management commands with: put it in the file's [cluster] secret, or pass \
                     --secret-file FILE or set {}",
                    config.api_auth.as_str(),
                    norr_transport::auth::SECRET_ENV
                ))
            })?),
        };
        let entry = config.node(node_id).expect("chosen from the config");
        let addr_text = listen.map_or_else(|| entry.address(), |a| a.to_string());
        let listener = match listen {
            Some(a) => TcpListener::bind(a),
            None => TcpListener::bind((entry.host.as_str(), entry.port)),
        }
        .map_err(|source| MgmdError::Listen { addr: addr_text.clone(), source })?;
        let local_addr = listener.local_addr().map_err(|source| MgmdError::Listen { addr: addr_text, source })?;
        let slot_ips = resolve_slot_hosts(&config);
        let shared = Arc::new(Shared {
            registry: Mutex::new(Registry::new(config, node_id, slot_ips, Instant::now())),
            writers: Mutex::new(BTreeMap::new()),
            stopping: AtomicBool::new(false),
            connections: AtomicUsize::new(0),
            command_secret,
            node_id,
        });
        let s2 = shared.clone();
        let accept = std::thread::Builder::new()
            .name("mgmd-accept".into())
            .spawn(move || accept_loop(listener, s2))
            .map_err(|source| MgmdError::Listen { addr: local_addr.to_string(), source })?;
        Ok(Mgmd { shared, local_addr, node_id, accept: Some(accept) })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn node_id(&self) -> NodeId {
        self.node_id
    }

    /// The configuration served and its digest.
    pub fn config_digest(&self) -> u64 {
        self.shared.registry().digest()
    }

    /// Whether commands that change the cluster need the cluster secret.
    pub fn commands_need_secret(&self) -> bool {
        self.shared.command_secret.is_some()
    }

    pub fn stopper(&self) -> MgmdStopper {
        MgmdStopper { shared: self.shared.clone(), local_addr: self.local_addr }
    }

    /// Wait until stopped (by a `MgmdStopper`).
    pub fn join(mut self) {
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }

    /// Stop and wait for the accept loop.
    pub fn stop(self) {
        self.stopper().stop();
        self.join();
    }
}

impl Drop for Mgmd {
    fn drop(&mut self) {
        if self.accept.is_some() {
            self.stopper().stop();
            if let Some(h) = self.accept.take() {
                let _ = h.join();
            }
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut threads: Vec<JoinHandle<()>> = Vec::new();
    for stream in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            break;
        }
        threads.retain(|t| !t.is_finished());
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                // EMFILE and the like: back off instead of spinning.
                tracing::warn!("mgmd: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        if shared.connections.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
            let reason = format!("mgmd has {MAX_CONNECTIONS} connections open: try again later");
            let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
            let _ = send_on(&stream, "peer", &FromMgmd::Refused { reason });
            continue;
        }
        shared.connections.fetch_add(1, Ordering::SeqCst);
        let s2 = shared.clone();
        match std::thread::Builder::new().name("mgmd-conn".into()).spawn(move || {
            serve(stream, &s2);
            s2.connections.fetch_sub(1, Ordering::SeqCst);
        }) {
            Ok(t) => threads.push(t),
            Err(e) => {
                shared.connections.fetch_sub(1, Ordering::SeqCst);
                tracing::warn!("mgmd: cannot start a connection thread: {e}");
            }
        }
    }
    for t in threads {
        let _ = t.join();
    }
    tracing::info!("mgmd: stopped");
}

/// One connection, from Hello to close.
fn serve(stream: TcpStream, shared: &Shared) {
    let peer_addr = match stream.peer_addr() {
        Ok(a) => a,
        Err(_) => return,
    };
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let writer = match stream.try_clone() {
        Ok(w) => Arc::new(Mutex::new(w)),
        Err(e) => {
            tracing::warn!("mgmd: {peer_addr}: {e}");
            return;
        }
    };
    let mut conn = FramedConn::new(stream);
    let hello = match conn.recv_within::<ToMgmd>(HELLO_TIMEOUT) {
        Ok(h) => h,
        Err(e) => {
            if !shared.stopping.load(Ordering::SeqCst) {
                tracing::warn!("mgmd: disconnecting {peer_addr} before its hello: {e}");
            }
            return;
        }
    };
    let ToMgmd::Hello { magic, version, role, node_id, name } = hello else {
        tracing::warn!("mgmd: disconnecting {peer_addr}: its first message is not a hello");
        return;
    };
    let name = bounded_text(&name);
    let proven = check_version(magic, version).and_then(|()| {
        let accounts = shared.registry().config().api_auth == ApiAuth::Account;
        if !crate::session_auth::challenged(shared.command_secret.as_ref(), role, accounts) {
            return Ok(());
        }
        // Before anything is reserved or handed out (session_auth).
        let secret = shared.command_secret.as_ref().expect("challenged only with a secret");
        prove_session(&mut conn, secret, shared.node_id, role, node_id)
    });
    let admitted = proven.and_then(|()| shared.registry().admit(role, node_id, peer_addr, Instant::now()));
    let admitted = match admitted {
        Ok(a) => a,
        Err(reason) => {
            tracing::warn!("mgmd: refused {} \"{name}\" from {peer_addr}: {reason}", role.with_article());
            let _ = conn.send(&FromMgmd::Refused { reason });
            return;
        }
    };
    let Admitted { node_id, sid, evicted } = admitted;
    if let Some(old) = evicted {
        tracing::warn!(
            "mgmd: node {node_id}: replacing its silent session (no message for over {} s)",
            SESSION_STALE_AFTER.as_secs()
        );
        if let Some(w) = shared.writers().remove(&old) {
            let _ = w.lock().unwrap_or_else(|p| p.into_inner()).shutdown(Shutdown::Both);
        }
    }
    shared.writers().insert(sid, writer.clone());
    let welcome = {
        let r = shared.registry();
        FromMgmd::Welcome { node_id, config_toml: r.config().to_toml(), digest: r.digest() }
    };
    let result = send_locked(&writer, peer_addr, &welcome).and_then(|()| {
        if role == PeerRole::Mgm {
            tracing::debug!("mgmd: management client connected from {peer_addr}");
        } else {
            tracing::info!("mgmd: node {node_id} ({role}, \"{name}\") connected from {peer_addr}");
        }
        session_loop(&mut conn, shared, &writer, node_id, sid, role)
    });
    match result {
        Ok(()) if role != PeerRole::Mgm => tracing::info!("mgmd: node {node_id} disconnected"),
        Ok(()) => {}
        Err(e) => tracing::warn!("mgmd: disconnecting node {node_id} ({role}) at {peer_addr}: {e}"),
    }
    shared.writers().remove(&sid);
    if role != PeerRole::Mgm {
        shared.registry().closed(node_id, sid);
    }
    let _ = conn.stream().shutdown(Shutdown::Both);
}

use registry::Admitted;

/// Challenge a node's Hello and check its `SessionProof` (session_auth).
/// Err: the refusal's text (the caller logs it and sends it).
fn prove_session(
    conn: &mut FramedConn,
    secret: &ClusterSecret,
    mgmd: NodeId,
    role: PeerRole,
    requested: Option<NodeId>,
) -> Result<(), String> {
    let nonce = norr_transport::auth::new_nonce()?;
    conn.send(&FromMgmd::SessionChallenge { nonce, mgmd_node: mgmd }).map_err(|e| e.to_string())?;
    match conn.recv_within::<ToMgmd>(HELLO_TIMEOUT) {
        Ok(ToMgmd::SessionProof { client_nonce, proof }) => {
            crate::session_auth::check(secret, &nonce, mgmd, role, requested, &client_nonce, &proof)
        }
        Ok(_) => Err(crate::session_auth::missing_secret_reason(role)),
        Err(e) => Err(format!("no proof of the cluster secret: {e}")),
    }
}

fn send_locked(writer: &Mutex<TcpStream>, peer: SocketAddr, msg: &FromMgmd) -> Result<(), MgmError> {
    let w = writer.lock().unwrap_or_else(|p| p.into_inner());
    send_on(&w, &peer.to_string(), msg)
}

/// Messages after the hello until the peer closes (Ok) or misbehaves (Err).
fn session_loop(
    conn: &mut FramedConn,
    shared: &Shared,
    writer: &Mutex<TcpStream>,
    node_id: NodeId,
    sid: SessionId,
    role: PeerRole,
) -> Result<(), MgmError> {
    let peer: SocketAddr = conn.stream().peer_addr().map_err(|source| MgmError::Io { peer: "?".into(), source })?;
    let _ = conn.stream().set_read_timeout(Some(POLL));
    let unexpected = |what: &str| MgmError::Protocol { peer: peer.to_string(), detail: format!("unexpected {what}") };
    let mut gate = CommandGate::new(shared.command_secret.clone(), shared.node_id);
    loop {
        if shared.stopping.load(Ordering::SeqCst) {
            return Ok(());
        }
        let msg = match conn.recv::<ToMgmd>()? {
            Recv::Closed => return Ok(()),
            Recv::Idle => continue,
            Recv::Msg(m) => m,
        };
        let now = Instant::now();
        if role != PeerRole::Mgm {
            shared.registry().heard(node_id, sid, now);
        }
        match msg {
            ToMgmd::Hello { .. } => return Err(unexpected("second hello")),
            ToMgmd::SessionProof { .. } => return Err(unexpected("session proof after the hello")),
            ToMgmd::Heartbeat => {}
            ToMgmd::Report(r) if role != PeerRole::Mgm => {
                shared.registry().report(node_id, sid, r, now).map_err(|e| unexpected(&e))?;
            }
            ToMgmd::Report(_) => return Err(unexpected("report from a management client")),
            ToMgmd::Arbitrate(req) => {
                let reply = shared.registry().arbitrate(node_id, role, &req, now);
                if req.failed.is_empty() {
                    // A president registering a new membership generation: routine.
                    tracing::info!(
                        "mgmd: generation {} registered by node {node_id} (members {:?}): {reply:?}",
                        req.generation,
                        req.survivors
                    );
                } else {
                    tracing::warn!("mgmd: arbitration for generation {} asked by node {node_id} (survivors {:?}, failed {:?}): {reply:?}", req.generation, req.survivors, req.failed);
                }
                send_locked(writer, peer, &FromMgmd::ArbitReply(reply))?;
            }
            ToMgmd::Command { req_id, cmd } => {
                let reply = match gate.check_plain(&cmd) {
                    Ok(()) => execute(shared, peer, &cmd, now),
                    Err(reason) => {
                        tracing::warn!("mgmd: refused {cmd:?} from {peer} ({role}): no proof of the cluster secret");
                        MgmReply::Error { message: reason }
                    }
                };
                send_locked(writer, peer, &FromMgmd::CommandReply { req_id, reply })?;
            }
            ToMgmd::CommandChallengeReq { req_id } => {
                let nonce =
                    gate.challenge(req_id).map_err(|detail| MgmError::Protocol { peer: peer.to_string(), detail })?;
                send_locked(writer, peer, &FromMgmd::CommandChallenge { req_id, nonce, mgmd_node: gate.mgmd() })?;
            }
            ToMgmd::SignedCommand { req_id, cmd, client_nonce, proof } => {
                match gate.check_signed(req_id, &cmd, &client_nonce, &proof) {
                    Ok(()) => {
                        let reply = execute(shared, peer, &cmd, now);
                        send_locked(writer, peer, &FromMgmd::CommandReply { req_id, reply })?;
                    }
                    Err(reason) => {
                        // Answered, then closed: a guesser gets one try per
                        // connection.
                        tracing::warn!("mgmd: refused {cmd:?} from {peer} ({role}): {reason}; closing the connection");
                        send_locked(
                            writer,
                            peer,
                            &FromMgmd::CommandReply { req_id, reply: MgmReply::Error { message: reason } },
                        )?;
                        return Ok(());
                    }
                }
            }
        }
    }
}

/// Run a command that passed the gate.
fn execute(shared: &Shared, peer: SocketAddr, cmd: &MgmCommand, now: Instant) -> MgmReply {
    let routed = shared.registry().route(cmd, now);
    let reply = match routed {
        Routed::Reply(r) => r,
        Routed::Push { targets, message } => push(shared, targets, message),
    };
    if let MgmReply::Done { message } = &reply {
        tracing::info!("mgmd: {cmd:?} from {peer}: {message}");
    }
    reply
}

/// Send each node its command; the reply says which sends failed.
fn push(shared: &Shared, targets: Vec<(NodeId, SessionId, crate::protocol::NodeCommand)>, message: String) -> MgmReply {
    let mut failed = Vec::new();
    for (node, sid, cmd) in targets {
        let writer = shared.writers().get(&sid).cloned();
        let sent = match writer {
            None => Err("its session just closed".to_string()),
            Some(w) => {
                let w = w.lock().unwrap_or_else(|p| p.into_inner());
                let peer = w.peer_addr().map_or_else(|_| "?".to_string(), |p| p.to_string());
                send_on(&w, &peer, &FromMgmd::NodeCommand(cmd)).map_err(|e| e.to_string())
            }
        };
        if let Err(e) = sent {
            failed.push(format!("node {node}: {e}"));
        }
    }
    if failed.is_empty() {
        MgmReply::Done { message }
    } else {
        MgmReply::Error { message: format!("{message}, but sending failed for {}", failed.join("; ")) }
    }
}
