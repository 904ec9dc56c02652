//! `norr sqld`: command-line arguments, configuration, the TCP listener and
//! the `Backend` seam between the MySQL protocol and the SQL engine.
//!
//! One tokio task per connection (`protocol::conn`). The listener never dies
//! of a client: accept errors are logged and retried, a connection task that
//! fails only ends that connection.

use crate::protocol::auth::{AuthPlugin, LoginAccount};
use crate::protocol::conn;
use crate::types::{ColumnMeta, QueryOutput, Session, SqlError};
use norr_signals::Value;
use serde::Deserialize;
use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;

/// MySQL's default max_allowed_packet (64 MiB).
pub const DEFAULT_MAX_ALLOWED_PACKET: usize = 64 * 1024 * 1024;
/// Upper bound for max_allowed_packet, as MySQL (1 GiB).
pub const MAX_MAX_ALLOWED_PACKET: usize = 1024 * 1024 * 1024;
pub const DEFAULT_MAX_CONNECTIONS: usize = 151;

/// `norr sqld`: the MySQL-protocol SQL front end.
#[derive(Debug, Clone, clap::Args)]
pub struct SqldArgs {
    /// Address to accept MySQL clients on.
    #[arg(long, default_value = "127.0.0.1:3306")]
    pub listen: String,
    /// Also accept clients on this Unix socket (as MySQL's `--socket`; the
    /// `mysql` client uses one when given `-h localhost` or `-S PATH`). A
    /// stale socket file left by a dead server is replaced; one a live
    /// server answers on is an error.
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// Data node(s) to connect to (native protocol): `HOST:PORT`, or
    /// `unix:PATH` for the Unix socket of a data node on this host (`norr
    /// datad --socket PATH`; cheaper per request than loopback TCP), or
    /// every data node of a cluster, comma separated
    /// (`--data-node 10.0.0.1:2202,10.0.0.2:2202`). A data node whose
    /// connection breaks (it restarted, say) is connected again in the
    /// background, with backoff; meanwhile statements fail with a temporary
    /// error (MySQL error 1297, "Got temporary error 4009 ...").
    #[arg(long, default_value = "127.0.0.1:2202")]
    pub data_node: String,
    /// Management server(s) (`HOST:PORT`, comma separated): the data nodes
    /// and this SQL node's node id come from the cluster's configuration
    /// there (`norr mgmd`; the SQL node takes a `kind = "sql"` slot),
    /// instead of --data-node.
    #[arg(long, conflicts_with = "data_node")]
    pub mgm: Option<String>,
    /// File holding the cluster secret (one line), proved (never sent) to
    /// data nodes that require it (`[cluster] api_auth = "secret"`).
    /// Without it the NORR_CLUSTER_SECRET environment variable is used.
    /// `norr up` passes its own (`<data-dir>/cluster.secret`).
    #[arg(long, value_name = "FILE")]
    pub secret_file: Option<PathBuf>,
    /// TOML configuration file: `[[users]]` entries (`name`, `password`,
    /// optional `auth_plugin` = "mysql_native_password" |
    /// "caching_sha2_password"), `default_auth_plugin` (the plugin the
    /// greeting names; default caching_sha2_password) and `[limits]`
    /// (`max_connections`, `max_allowed_packet`). Command-line flags win
    /// over the file.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Password of the `root` account. Defaults to the empty password, which
    /// is meant for local development only: set it (or NORR_ROOT_PASSWORD, or
    /// a `root` entry in --config) anywhere else. When this flag is absent the
    /// environment variable NORR_ROOT_PASSWORD is used if set (preferred: it
    /// keeps the password out of `ps`).
    #[arg(long)]
    pub root_password: Option<String>,
    /// Serve on a non-loopback --listen address even though a `root`
    /// account has an empty password. Without it such a start is refused:
    /// anyone who can reach the port could then log in as root from this
    /// host's loopback or, for root@'%', from anywhere.
    #[arg(long)]
    pub allow_empty_root_password: bool,
    /// The server's TLS certificate (PEM; a chain may follow it). With
    /// --ssl-key. Without both, a self-signed certificate is made on the
    /// first start and kept (server-cert.pem / server-key.pem in `norr
    /// up`'s data directory, or beside --config; otherwise made anew at
    /// every start), as MySQL does. Clients ask for TLS (`mysql
    /// --ssl-mode=REQUIRED`); accounts made with REQUIRE SSL must.
    #[arg(long, value_name = "PEM")]
    pub ssl_cert: Option<PathBuf>,
    /// The private key of --ssl-cert (PEM).
    #[arg(long, value_name = "PEM")]
    pub ssl_key: Option<PathBuf>,
    /// Certificate authorities (PEM) that client certificates are checked
    /// against, when a client presents one (a client without one is still
    /// admitted).
    #[arg(long, value_name = "PEM")]
    pub ssl_ca: Option<PathBuf>,
    /// Offer no TLS at all (as MySQL's --skip-ssl).
    #[arg(long, conflicts_with_all = ["ssl_cert", "ssl_key", "ssl_ca"])]
    pub skip_ssl: bool,
    /// Maximum number of concurrent client connections (further clients get
    /// error 1040 "Too many connections"), plus one kept for `root`, as
    /// MySQL keeps one for an admin account. Default 151, as MySQL.
    #[arg(long)]
    pub max_connections: Option<usize>,
    /// Largest client packet in bytes (error 1153 and disconnect beyond it).
    /// Default 64 MiB, at most 1 GiB.
    #[arg(long)]
    pub max_allowed_packet: Option<usize>,
    /// Threads that run client sessions (default: one per core). Sessions
    /// are not tied to a thread: an idle thread takes ready work from a busy
    /// one, and a long statement yields its thread every few milliseconds,
    /// so one heavy statement does not hold up the others. Fewer threads
    /// than cores leave cores to a data node or clients on the same machine
    /// (on 2 cores shared with both, 1 gave the most point selects:
    /// bench/RESULTS.md).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: Option<u16>,
    /// Microseconds a session polls for the data node's reply before it
    /// sleeps: trades CPU for latency, and only while a request is
    /// outstanding (an idle server does not spin). 0 never spins.
    #[arg(long, default_value_t = 100)]
    pub reply_spin_us: u64,
    /// Microseconds the session threads keep polling their sockets after the
    /// last client packet before they sleep (0 never spins). Costs idle CPU;
    /// saves a wakeup per statement under steady load.
    #[arg(long, default_value_t = 0)]
    pub idle_spin_us: u64,
    /// This SQL node's name, kept across restarts (default: `sqld@` and the
    /// --listen address). Temporary tables' rows live in data-node tables
    /// tagged with it, and a start drops those a crashed earlier run left:
    /// give every SQL node of a cluster its own name.
    #[arg(long)]
    pub node_name: Option<String>,
    /// Most rows one DELETE or UPDATE may change: set it to the data nodes'
    /// max_ops_per_txn. A statement that would change more fails at once,
    /// before changing anything, with error 1206 saying how to batch it.
    #[arg(long, default_value_t = crate::engine::DEFAULT_MAX_ROWS_PER_TXN)]
    pub max_rows_per_transaction: u64,
    /// Bytes of rows all statements together may hold in this SQL node's
    /// memory (0: no limit). A statement that would pass it fails with
    /// error 1041; the process never grows past it for rows.
    #[arg(long, default_value_t = crate::engine::memory::DEFAULT_MAX_MEMORY_BYTES)]
    pub max_memory: u64,
    /// Bytes of rows one statement may hold (0: no limit); past it, 1041.
    #[arg(long, default_value_t = crate::engine::memory::DEFAULT_MAX_STATEMENT_MEMORY_BYTES)]
    pub max_statement_memory: u64,
}

/// The configuration file (`--config`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(default)]
    pub users: Vec<UserConfig>,
    #[serde(default)]
    pub limits: LimitsConfig,
    /// Plugin named in the greeting ("caching_sha2_password" by default, as MySQL 8).
    pub default_auth_plugin: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    pub max_connections: Option<usize>,
    pub max_allowed_packet: Option<usize>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    pub name: String,
    #[serde(default)]
    pub password: String,
    /// Plugin this account must use; a client starting with the other one is
    /// switched. Unset: either plugin is accepted as the client starts.
    pub auth_plugin: Option<String>,
}

/// An account as the protocol layer checks it.
#[derive(Debug, Clone)]
pub struct User {
    pub password: String,
    pub plugin: Option<AuthPlugin>,
}

/// Resolved server configuration shared by all connections.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub users: HashMap<String, User>,
    pub max_connections: usize,
    pub max_allowed_packet: usize,
    pub default_auth_plugin: AuthPlugin,
    /// See `IdleSpin`; zero never spins.
    pub idle_spin: std::time::Duration,
    /// TLS offered to clients (None: CLIENT_SSL is not announced).
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

impl ServerConfig {
    /// A config with only `root` (given password), default limits.
    pub fn with_root(password: &str) -> ServerConfig {
        let mut users = HashMap::new();
        users.insert("root".to_string(), User { password: password.to_string(), plugin: None });
        ServerConfig {
            users,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_allowed_packet: DEFAULT_MAX_ALLOWED_PACKET,
            default_auth_plugin: AuthPlugin::CachingSha2,
            idle_spin: std::time::Duration::ZERO,
            tls: None,
        }
    }

    /// Builds the config from the arguments and the optional file.
    pub fn from_args(args: &SqldArgs) -> anyhow::Result<ServerConfig> {
        let file: FileConfig = match &args.config {
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .map_err(|e| anyhow::anyhow!("cannot read config {}: {e}", p.display()))?;
                toml::from_str(&text).map_err(|e| anyhow::anyhow!("bad config {}: {e}", p.display()))?
            }
            None => FileConfig::default(),
        };
        let mut cfg = ServerConfig::with_root("");
        for u in &file.users {
            let plugin = match &u.auth_plugin {
                None => None,
                Some(n) => Some(AuthPlugin::from_name(n).ok_or_else(|| {
                    anyhow::anyhow!(
                        "user {}: unknown auth_plugin {n:?} (use mysql_native_password or caching_sha2_password)",
                        u.name
                    )
                })?),
            };
            cfg.users.insert(u.name.clone(), User { password: u.password.clone(), plugin });
        }
        let env_pw = std::env::var("NORR_ROOT_PASSWORD").ok();
        if let Some(pw) = args.root_password.as_ref().or(env_pw.as_ref()) {
            let root = cfg.users.entry("root".into()).or_insert(User { password: String::new(), plugin: None });
            root.password = pw.clone();
        }
        if let Some(n) = &file.default_auth_plugin {
            cfg.default_auth_plugin =
                AuthPlugin::from_name(n).ok_or_else(|| anyhow::anyhow!("unknown default_auth_plugin {n:?}"))?;
        }
        cfg.max_connections =
            args.max_connections.or(file.limits.max_connections).unwrap_or(DEFAULT_MAX_CONNECTIONS).max(1);
        let map = args.max_allowed_packet.or(file.limits.max_allowed_packet).unwrap_or(DEFAULT_MAX_ALLOWED_PACKET);
        anyhow::ensure!(
            (1024..=MAX_MAX_ALLOWED_PACKET).contains(&map),
            "max_allowed_packet must be between 1024 and {MAX_MAX_ALLOWED_PACKET} bytes, got {map}"
        );
        cfg.max_allowed_packet = map;
        cfg.idle_spin = std::time::Duration::from_micros(args.idle_spin_us);
        Ok(cfg)
    }
}

/// A prepared statement as the protocol layer sees it.
pub struct PreparedInfo<S> {
    pub stmt: Arc<S>,
    pub param_count: u16,
    pub columns: Arc<[ColumnMeta]>,
}

/// What the protocol layer needs from the SQL engine (see DESIGN.md). The
/// real `engine::Engine` implements it; tests use a fake.
pub trait Backend: Send + Sync + 'static {
    type Stmt: Send + Sync + 'static;
    /// Version string for the greeting, e.g. "8.0.36-NorrDB-0.1".
    fn server_version(&self) -> String;
    fn new_session(&self, connection_id: u32, user: &str) -> Session;
    fn execute_text<'a>(
        &'a self,
        s: &'a mut Session,
        sql: &'a str,
    ) -> impl Future<Output = Vec<Result<QueryOutput, SqlError>>> + Send + 'a;
    fn prepare<'a>(
        &'a self,
        s: &'a mut Session,
        sql: &'a str,
    ) -> impl Future<Output = Result<PreparedInfo<Self::Stmt>, SqlError>> + Send + 'a;
    fn execute_prepared<'a>(
        &'a self,
        s: &'a mut Session,
        stmt: &'a Self::Stmt,
        params: Vec<Value>,
    ) -> impl Future<Output = Result<QueryOutput, SqlError>> + Send + 'a;
    fn field_list<'a>(
        &'a self,
        s: &'a mut Session,
        table: &'a str,
    ) -> impl Future<Output = Result<Vec<ColumnMeta>, SqlError>> + Send + 'a;
    fn init_db<'a>(&'a self, s: &'a mut Session, db: &'a str)
        -> impl Future<Output = Result<(), SqlError>> + Send + 'a;
    fn end_session<'a>(&'a self, s: &'a mut Session) -> impl Future<Output = ()> + Send + 'a;
    /// The file a LOAD DATA LOCAL INFILE statement just asked for, which
    /// the protocol layer is to request from the client (None: no such
    /// statement is waiting).
    fn local_infile(&self, _s: &Session) -> Option<String> {
        None
    }
    /// One packet of the client's file.
    fn local_infile_data<'a>(&'a self, _s: &'a mut Session, _data: &'a [u8]) -> impl Future<Output = ()> + Send + 'a {
        std::future::ready(())
    }
    /// The end of the client's file (`failed`: the client refused or could
    /// not read it): the statement's result.
    fn local_infile_end<'a>(
        &'a self,
        _s: &'a mut Session,
        _failed: Option<SqlError>,
    ) -> impl Future<Output = Result<QueryOutput, SqlError>> + Send + 'a {
        std::future::ready(Err(SqlError::internal("no LOAD DATA in progress")))
    }
    /// The connection limit in force now, if the backend holds a live one
    /// (`SET GLOBAL max_connections`); None: `ServerConfig::max_connections`.
    fn max_connections(&self) -> Option<usize> {
        None
    }
    /// The packet limit for connections starting now, if the backend holds a
    /// live one (`SET GLOBAL max_allowed_packet`); None:
    /// `ServerConfig::max_allowed_packet`.
    fn max_allowed_packet(&self) -> Option<usize> {
        None
    }
    /// How long a login may take (`SET GLOBAL connect_timeout`), if the
    /// backend holds a live value; None: 10 s.
    fn connect_timeout(&self) -> Option<std::time::Duration> {
        None
    }
    /// The account a client `user` connecting from `peer` (an IP address,
    /// or `localhost` for the Unix socket) logs in as, if any. The default
    /// reads `ServerConfig::users` (fake backends of tests); the engine
    /// reads the accounts stored in the cluster.
    fn login_account<'a>(
        &'a self,
        cfg: &'a ServerConfig,
        user: &'a str,
        _peer: &'a str,
    ) -> impl Future<Output = Result<Option<LoginAccount>, SqlError>> + Send + 'a {
        std::future::ready(Ok(cfg.users.get(user).map(|u| LoginAccount::from_password("%", &u.password, u.plugin))))
    }
    /// Create the first accounts of a fresh cluster from the configuration
    /// (the engine; nothing for backends that read `ServerConfig::users`).
    fn seed_accounts<'a>(&'a self, _cfg: &'a ServerConfig) -> impl Future<Output = Result<(), SqlError>> + Send + 'a {
        std::future::ready(Ok(()))
    }
    /// A client's statement text ran (and its results were sent) in
    /// `took`: for the slow query log.
    fn statement_done(&self, _s: &Session, _sql: &str, _took: std::time::Duration, _rows_sent: u64) {}
}

/// Connection bookkeeping shared by the accept loop and connection tasks.
pub struct ServerState {
    pub config: ServerConfig,
    pub active_connections: AtomicUsize,
    next_connection_id: AtomicU32,
    pub started: std::time::Instant,
    pub idle_spin: crate::idle_spin::IdleSpin,
    /// The last TCP clients accepted and the connection id each was given:
    /// lets the process that started this server tell its own server's
    /// greeting from another's on the same address (`greeted`).
    recent_accepts: std::sync::Mutex<std::collections::VecDeque<(std::net::SocketAddr, u32)>>,
    /// caching_sha2_password's cache: the accounts (with the verifier they
    /// logged in with) that passed a full authentication on this SQL node.
    /// A TLS login of one not in it gets the full authentication.
    sha2_cache: std::sync::Mutex<std::collections::HashSet<(String, String, [u8; 32])>>,
}

/// How many accepts `ServerState::greeted` remembers.
const RECENT_ACCEPTS: usize = 16;

impl ServerState {
    pub fn new(config: ServerConfig) -> Arc<ServerState> {
        Arc::new(ServerState {
            idle_spin: crate::idle_spin::IdleSpin::new(config.idle_spin),
            config,
            active_connections: AtomicUsize::new(0),
            next_connection_id: AtomicU32::new(1),
            started: std::time::Instant::now(),
            recent_accepts: std::sync::Mutex::new(std::collections::VecDeque::with_capacity(RECENT_ACCEPTS)),
            sha2_cache: Default::default(),
        })
    }

    /// Whether `user` of account `a` passed a full authentication here
    /// with `a`'s current password.
    pub fn sha2_cache_has(&self, user: &str, a: &LoginAccount) -> bool {
        let Some(h) = a.sha2 else { return false };
        let key = (user.to_string(), a.host.clone(), h);
        self.sha2_cache.lock().unwrap_or_else(|e| e.into_inner()).contains(&key)
    }

    pub fn sha2_cache_add(&self, user: &str, a: &LoginAccount) {
        if let Some(h) = a.sha2 {
            let mut c = self.sha2_cache.lock().unwrap_or_else(|e| e.into_inner());
            // A stale entry (an old password) never matches; bound the set
            // against churn all the same.
            if c.len() > 100_000 {
                c.clear();
            }
            c.insert((user.to_string(), a.host.clone(), h));
        }
    }

    /// Whether this server recently accepted a TCP client from `peer` and
    /// greeted it with connection id `id`: a caller that connected from
    /// `peer` and read `id` in the greeting reached this server, not
    /// another process on the same port.
    pub fn greeted(&self, peer: std::net::SocketAddr, id: u32) -> bool {
        self.recent_accepts.lock().unwrap_or_else(|e| e.into_inner()).contains(&(peer, id))
    }

    fn note_accept(&self, peer: std::net::SocketAddr, id: u32) {
        let mut q = self.recent_accepts.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() == RECENT_ACCEPTS {
            q.pop_front();
        }
        q.push_back((peer, id));
    }
    fn next_id(&self) -> u32 {
        let id = self.next_connection_id.fetch_add(1, Ordering::Relaxed);
        if id == 0 {
            self.next_connection_id.fetch_add(1, Ordering::Relaxed)
        } else {
            id
        }
    }
}

/// Accepts clients on `listener` forever, one task per connection.
pub async fn serve_listener<B: Backend>(listener: tokio::net::TcpListener, backend: Arc<B>, state: Arc<ServerState>) {
    // Before the first accept: a client waits in the backlog meanwhile.
    // A no-op when the cluster has accounts already (`run_sqld_here` did it).
    if let Err(e) = backend.seed_accounts(&state.config).await {
        tracing::error!("sqld: the first accounts were not created: {e}");
    }
    if state.idle_spin.enabled() {
        let state = state.clone();
        tokio::spawn(async move { state.idle_spin.run().await });
    }
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                accept_failed("", e).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
        let (r, w) = stream.into_split();
        // Noted before the greeting can be sent.
        let id = state.next_id();
        state.note_accept(peer, id);
        spawn_session(Box::new(r), Box::new(w), peer.ip().to_string(), Some(fd), &backend, &state, id);
    }
}

/// One task per client connection, whatever the transport.
fn spawn_session<B: Backend>(
    r: conn::ClientRead,
    w: conn::ClientWrite,
    host: String,
    socket: Option<std::os::fd::RawFd>,
    backend: &Arc<B>,
    state: &Arc<ServerState>,
    id: u32,
) {
    let backend = backend.clone();
    let state = state.clone();
    tokio::spawn(async move {
        tracing::debug!("sqld: connection {id} from {host}");
        conn::run_connection(r, w, host, socket, backend, state, id).await;
    });
}

/// EMFILE and friends: log and back off instead of spinning on accept.
async fn accept_failed(on: &str, e: std::io::Error) {
    tracing::warn!("sqld: accept{on} failed: {e}");
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
}

/// Accepts clients on a Unix socket forever (the host is `localhost`, as
/// MySQL names socket clients). Shares `state` (connection limit, ids) with
/// the TCP listener.
pub async fn serve_unix<B: Backend>(listener: tokio::net::UnixListener, backend: Arc<B>, state: Arc<ServerState>) {
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                accept_failed(" on the Unix socket", e).await;
                continue;
            }
        };
        let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
        let (r, w) = stream.into_split();
        spawn_session(Box::new(r), Box::new(w), "localhost".to_string(), Some(fd), &backend, &state, state.next_id());
    }
}

/// Binds a Unix socket at `path`. A file there that no server answers on is
/// a leftover of a crashed server and is replaced.
pub fn bind_unix(path: &std::path::Path) -> anyhow::Result<tokio::net::UnixListener> {
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            anyhow::bail!("another server is listening on the socket {}", path.display());
        }
        std::fs::remove_file(path)
            .map_err(|e| anyhow::anyhow!("cannot remove the stale socket {}: {e}", path.display()))?;
    }
    tokio::net::UnixListener::bind(path)
        .map_err(|e| anyhow::anyhow!("cannot listen on the socket {}: {e}", path.display()))
}

/// Binds `args.listen` and serves forever.
pub async fn serve<B: Backend>(args: SqldArgs, backend: Arc<B>) -> anyhow::Result<()> {
    let config = ServerConfig::from_args(&args)?;
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", args.listen))?;
    tracing::info!("sqld: listening on {}", args.listen);
    serve_listener(listener, backend, ServerState::new(config)).await;
    Ok(())
}

impl crate::engine::Engine {
    /// A fresh cluster's first accounts: `root@localhost` only, and
    /// the users of the --config file at `%` with every privilege, as they
    /// had before accounts were stored in the cluster. Later starts keep
    /// the cluster's accounts (a --root-password that differs is reported).
    pub async fn seed_accounts_from(&self, cfg: &ServerConfig) -> Result<(), SqlError> {
        use crate::engine::acl::{
            privs::{Level, Privs},
            store::Seed,
        };
        let all = Privs::all_at(Level::Global);
        let mut seeds = Vec::new();
        let mut names: Vec<&String> = cfg.users.keys().collect();
        names.sort();
        for name in names {
            let u = &cfg.users[name];
            let plugin = u.plugin.map(|p| p.name().to_string());
            let seed = |host: &str, privs| Seed {
                user: name.clone(),
                host: host.into(),
                password: u.password.clone(),
                plugin: plugin.clone(),
                privs,
            };
            if name == "root" {
                // root@localhost only, as a fresh MySQL: a remote root is
                // something the operator creates on purpose.
                seeds.push(seed("localhost", all | Privs::GRANT_OPTION));
            } else {
                seeds.push(seed("%", all));
            }
        }
        if !self.seed_accounts(&seeds).await? {
            if let Some(root) = cfg.users.get("root").filter(|r| !r.password.is_empty()) {
                let snap = self.acl().current(self).await?;
                let stored = snap.user("root", "localhost").map(|u| u.sha2_hash.clone());
                if stored.as_deref() != Some(crate::engine::acl::store::sha2_hash(&root.password).as_str()) {
                    tracing::warn!(
                        "sqld: the cluster already has accounts: the root password given to this SQL node is not \
                         root@localhost's (change it with ALTER USER root@localhost IDENTIFIED BY '...')"
                    );
                }
            }
        }
        Ok(())
    }

    /// The `root` accounts (any host) that log in with an empty password,
    /// quoted as MySQL shows them.
    pub async fn root_accounts_without_password(&self) -> Result<Vec<String>, SqlError> {
        let snap = self.acl().current(self).await?;
        Ok(snap
            .users
            .iter()
            .filter(|u| u.user == "root" && !u.is_role && u.native_hash.is_empty() && u.sha2_hash.is_empty())
            .map(|u| crate::engine::acl::quoted(&u.user, &u.host))
            .collect())
    }
}

impl Backend for crate::engine::Engine {
    type Stmt = crate::engine::Prepared;

    async fn login_account(
        &self,
        _cfg: &ServerConfig,
        user: &str,
        peer: &str,
    ) -> Result<Option<LoginAccount>, SqlError> {
        let snap = self.acl().current(self).await?;
        let Some(u) = snap.login_account(user, peer) else { return Ok(None) };
        let plugin = AuthPlugin::from_name(&u.plugin);
        let Some(mut a) = LoginAccount::from_hex(&u.host, &u.native_hash, &u.sha2_hash, plugin) else {
            tracing::warn!("sqld: account '{}'@'{}' has a malformed password hash", u.user, u.host);
            return Ok(None);
        };
        a.locked = u.locked;
        a.password_expired = u.password_expired;
        a.require_ssl = u.require_ssl;
        Ok(Some(a))
    }

    fn seed_accounts<'a>(&'a self, cfg: &'a ServerConfig) -> impl Future<Output = Result<(), SqlError>> + Send + 'a {
        self.seed_accounts_from(cfg)
    }

    fn server_version(&self) -> String {
        self.config().version.clone()
    }

    fn new_session(&self, connection_id: u32, user: &str) -> Session {
        crate::engine::Engine::new_session(self, connection_id, user)
    }

    async fn execute_text(&self, s: &mut Session, sql: &str) -> Vec<Result<QueryOutput, SqlError>> {
        if crate::off_thread::wanted(sql) {
            // Its result is built whole: the protocol layer, which would
            // send streamed batches, waits for this call.
            let sink = s.result_sink.take();
            let out = crate::off_thread::run(crate::engine::Engine::execute_text(self, s, sql));
            s.result_sink = sink;
            return out;
        }
        crate::engine::Engine::execute_text(self, s, sql).await
    }

    async fn prepare(&self, s: &mut Session, sql: &str) -> Result<PreparedInfo<Self::Stmt>, SqlError> {
        let p = if crate::off_thread::wanted(sql) {
            crate::off_thread::run(crate::engine::Engine::prepare(self, s, sql))?
        } else {
            crate::engine::Engine::prepare(self, s, sql).await?
        };
        Ok(PreparedInfo { param_count: p.param_count, columns: p.columns.clone(), stmt: p })
    }

    fn execute_prepared<'a>(
        &'a self,
        s: &'a mut Session,
        stmt: &'a Self::Stmt,
        params: Vec<Value>,
    ) -> impl Future<Output = Result<QueryOutput, SqlError>> + Send + 'a {
        crate::engine::Engine::execute_prepared(self, s, stmt, params)
    }

    fn field_list<'a>(
        &'a self,
        s: &'a mut Session,
        table: &'a str,
    ) -> impl Future<Output = Result<Vec<ColumnMeta>, SqlError>> + Send + 'a {
        crate::engine::Engine::field_list(self, s, table)
    }

    fn init_db<'a>(
        &'a self,
        s: &'a mut Session,
        db: &'a str,
    ) -> impl Future<Output = Result<(), SqlError>> + Send + 'a {
        crate::engine::Engine::init_db(self, s, db)
    }

    fn end_session<'a>(&'a self, s: &'a mut Session) -> impl Future<Output = ()> + Send + 'a {
        crate::engine::Engine::end_session(self, s)
    }

    fn local_infile(&self, s: &Session) -> Option<String> {
        crate::engine::load_data::pending_file(s)
    }

    fn local_infile_data<'a>(&'a self, s: &'a mut Session, data: &'a [u8]) -> impl Future<Output = ()> + Send + 'a {
        crate::engine::load_data::feed(self, s, data)
    }

    fn local_infile_end<'a>(
        &'a self,
        s: &'a mut Session,
        failed: Option<SqlError>,
    ) -> impl Future<Output = Result<QueryOutput, SqlError>> + Send + 'a {
        crate::engine::load_data::finish(self, s, failed)
    }

    fn max_connections(&self) -> Option<usize> {
        crate::engine::vars::global_value("max_connections")
            .and_then(|v| v.as_i64())
            .map(|n| usize::try_from(n).unwrap_or(1).max(1))
    }

    fn max_allowed_packet(&self) -> Option<usize> {
        crate::engine::vars::global_value("max_allowed_packet")
            .and_then(|v| v.as_i64())
            .and_then(|n| usize::try_from(n).ok())
            .map(|n| n.clamp(1024, MAX_MAX_ALLOWED_PACKET))
    }

    fn statement_done(&self, s: &Session, sql: &str, took: std::time::Duration, rows_sent: u64) {
        crate::engine::slow_log::record(s, sql, took, rows_sent)
    }

    fn connect_timeout(&self) -> Option<std::time::Duration> {
        let (lo, hi) = crate::engine::vars::int_bounds("connect_timeout")?;
        crate::engine::vars::global_value("connect_timeout")
            .and_then(|v| v.as_i64())
            .map(|n| std::time::Duration::from_secs(n.clamp(lo, hi) as u64))
    }
}

/// How long sqld keeps retrying the data node at start (it may still be starting).
const CONNECT_RETRY_SECS: u64 = 60;

/// Opens in-process links to a data node running in this process (see
/// [`run_sqld_local`]).
pub type LocalConnect = std::sync::Arc<dyn Fn() -> std::io::Result<norr_client::LocalLink> + Send + Sync>;

/// `norr sqld`: connects to the data node, then serves MySQL clients until
/// killed. Runs its own tokio runtime with `--threads` session threads.
pub fn run_sqld(args: SqldArgs) -> anyhow::Result<()> {
    run_sqld_inner(args, None, None)
}

/// What a process that runs a SQL node inside itself (`norr up`) hands it.
pub struct Embedded {
    /// The MySQL port, already bound by the caller (used instead of
    /// `--listen`): the caller knows the port is its own before anything
    /// reports success.
    pub listener: std::net::TcpListener,
    /// Sent the server's state once it serves clients; with
    /// [`ServerState::greeted`] the caller checks that a connection it makes
    /// reached this server.
    pub ready: std::sync::mpsc::Sender<Arc<ServerState>>,
    /// Where the embedding process keeps its files: @@datadir.
    pub datadir: Option<PathBuf>,
}

/// [`run_sqld`] for a SQL node inside another process (`norr up`) on a port
/// that process bound. With `connect`, it reaches a data node of the same
/// process through in-process links instead of `--data-node`.
pub fn run_sqld_embedded(args: SqldArgs, connect: Option<LocalConnect>, embedded: Embedded) -> anyhow::Result<()> {
    run_sqld_inner(args, connect, Some(embedded))
}

fn run_sqld_inner(args: SqldArgs, local: Option<LocalConnect>, embedded: Option<Embedded>) -> anyhow::Result<()> {
    // Sessions run on threads with a stack of known size, whatever thread
    // called us (`norr up` starts us on one of 2 MiB): the depth limits of
    // `engine::depth` are set for it.
    std::thread::Builder::new()
        .name("sqld".into())
        .stack_size(crate::engine::depth::SESSION_STACK_BYTES)
        .spawn(move || run_sqld_here(args, local, embedded))
        .map_err(|e| anyhow::anyhow!("cannot start the SQL node's thread: {e}"))?
        .join()
        .map_err(|_| anyhow::anyhow!("the SQL node's thread panicked"))?
}

/// The session threads `norr sqld` runs by default: one per core.
pub fn default_threads() -> u16 {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(256) as u16)
}

/// The session runtime of `norr sqld`: `threads` threads, each with the
/// stack `engine::depth` counts on.
///
/// Always tokio's work-stealing runtime, even for one thread: sessions move
/// to whichever thread is free, and a statement that must run long without
/// yielding (the parse of a huge text) is moved off the threads with
/// `block_in_place` (see `engine::off_thread`), which needs this runtime. A
/// current-thread runtime had one more weakness: with one thread busy in a
/// statement, no socket was read at all (tokio polls sockets between tasks).
pub fn session_runtime(threads: u16) -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1) as usize)
        .thread_name("sqld")
        .thread_stack_size(crate::engine::depth::SESSION_STACK_BYTES)
        .enable_all()
        .build()
}

/// The TLS configuration `args` ask for (None: --skip-ssl). A generated
/// certificate is kept in `datadir` (norr up's), else beside --config.
fn tls_of(args: &SqldArgs, datadir: Option<&std::path::Path>) -> anyhow::Result<Option<Arc<rustls::ServerConfig>>> {
    if args.skip_ssl {
        return Ok(None);
    }
    let generated_dir = datadir
        .map(|d| d.to_path_buf())
        .or_else(|| args.config.as_ref().map(|c| c.parent().map(|p| p.to_path_buf()).unwrap_or_default()));
    if args.ssl_cert.is_none() && generated_dir.is_none() {
        tracing::info!(
            "sqld: TLS with a self-signed certificate made for this run (give --ssl-cert and --ssl-key to keep one)"
        );
    }
    let src = crate::protocol::tls::TlsSource {
        cert: args.ssl_cert.clone(),
        key: args.ssl_key.clone(),
        ca: args.ssl_ca.clone(),
        generated_dir,
    };
    Ok(Some(crate::protocol::tls::server_config(&src)?))
}

fn run_sqld_here(args: SqldArgs, local: Option<LocalConnect>, embedded: Option<Embedded>) -> anyhow::Result<()> {
    let mut config = ServerConfig::from_args(&args)?;
    config.tls = tls_of(&args, embedded.as_ref().and_then(|e| e.datadir.as_deref()))?;
    crate::engine::memory::set_process_limit(args.max_memory);
    let secret = args
        .secret_file
        .as_deref()
        .map(norr_client::ClusterSecret::from_file)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let rt = session_runtime(args.threads.unwrap_or_else(default_threads))?;
    rt.block_on(async move {
        let (listener, ready, datadir) = match embedded {
            Some(Embedded { listener, ready, datadir }) => {
                listener.set_nonblocking(true)?;
                (tokio::net::TcpListener::from_std(listener)?, Some(ready), datadir)
            }
            None => {
                let l = tokio::net::TcpListener::bind(&args.listen)
                    .await
                    .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", args.listen))?;
                (l, None, None)
            }
        };
        // As MySQL's, with a trailing slash.
        let datadir = datadir
            .map(|d| std::path::absolute(&d).unwrap_or(d).display().to_string())
            .map(|d| if d.ends_with('/') { d } else { d + "/" })
            .unwrap_or_default();
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(3306);
        let unix = args.socket.as_deref().map(bind_unix).transpose()?;
        let cfg = crate::engine::EngineConfig {
            socket: args.socket.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
            max_allowed_packet: config.max_allowed_packet as u64,
            port,
            hostname: std::env::var("HOSTNAME").unwrap_or_else(|_| "localhost".into()),
            reply_spin: std::time::Duration::from_micros(args.reply_spin_us),
            max_connections: config.max_connections as u64,
            node_name: args.node_name.clone().unwrap_or_else(|| format!("sqld@{}", args.listen)),
            max_rows_per_txn: args.max_rows_per_transaction.max(1),
            max_statement_memory: args.max_statement_memory,
            datadir,
            secret,
            ..Default::default()
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(CONNECT_RETRY_SECS);
        let engine = loop {
            let engine = match (&local, &args.mgm) {
                (Some(connect), _) => crate::engine::Engine::connect_local(connect, cfg.clone()).await,
                (None, Some(mgm)) => crate::engine::Engine::connect_mgm(mgm, cfg.clone()).await,
                (None, None) => crate::engine::Engine::connect(&args.data_node, cfg.clone()).await,
            };
            let target = match &args.mgm {
                Some(mgm) => format!("the cluster of mgmd {mgm}"),
                None => format!("data node {}", args.data_node),
            };
            match engine {
                Ok(e) => break e,
                Err(e) if std::time::Instant::now() < deadline => {
                    tracing::warn!("sqld: {target} not ready ({e}); retrying");
                    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                }
                Err(e) => anyhow::bail!("cannot connect to {target}: {e}"),
            }
        };
        let data_node = match (&local, &args.mgm) {
            (Some(_), _) => "in-process link".to_string(),
            (None, Some(mgm)) => format!("{} data node(s) from mgmd {mgm}", engine.client().data_node_status().len()),
            (None, None) => args.data_node.clone(),
        };
        tracing::info!("sqld: listening on {} (data node: {data_node})", args.listen);
        let state = ServerState::new(config);
        engine
            .seed_accounts_from(&state.config)
            .await
            .map_err(|e| anyhow::anyhow!("cannot create the first accounts: {e}"))?;
        let bound = listener.local_addr()?;
        if !bound.ip().is_loopback() && !args.allow_empty_root_password {
            let open = engine.root_accounts_without_password().await?;
            if !open.is_empty() {
                anyhow::bail!(
                    "refusing to listen on {bound}, which is not a loopback address, while {} {} an empty \
                     password: set one first (ALTER USER ... IDENTIFIED BY '...' from a client on 127.0.0.1, or \
                     --root-password / NORR_ROOT_PASSWORD on a fresh cluster), or pass \
                     --allow-empty-root-password to serve anyway",
                    open.join(", "),
                    if open.len() == 1 { "has" } else { "have" }
                );
            }
        }
        if let Some(unix) = unix {
            tracing::info!("sqld: listening on the Unix socket {}", cfg.socket);
            tokio::spawn(serve_unix(unix, engine.clone(), state.clone()));
        }
        if let Some(ready) = ready {
            let _ = ready.send(state.clone());
        }
        serve_listener(listener, engine, state).await;
        Ok(())
    })
}

#[cfg(test)]
mod unix_socket_tests {
    use super::bind_unix;

    #[tokio::test(flavor = "current_thread")]
    async fn stale_socket_is_replaced_live_one_is_refused() {
        let dir = std::env::temp_dir().join(format!("norr-sock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        // A socket file nobody listens on (its server died without cleaning up).
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        let live = bind_unix(&path).expect("stale socket replaced");
        // Now a server answers there: a second one must not steal the path.
        let err = bind_unix(&path).expect_err("live socket refused").to_string();
        assert!(err.contains("another server"), "{err}");
        drop(live);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
