//! One client connection: greeting, authentication, then the command loop
//! (COM_QUERY, COM_STMT_*, COM_PING, COM_INIT_DB, COM_FIELD_LIST, ...).
//!
//! Error policy, as MySQL: a statement error or a malformed command packet
//! gets an ERR packet and the connection goes on; a bad handshake, a failed
//! login or a packet over max_allowed_packet gets an ERR packet and the
//! connection is closed. Nothing a client sends can panic the server: every
//! read from a packet is bounds-checked (`codec::Reader`).

use super::auth::{self, AuthPlugin};
use super::codec::{self, status, Reader};
use super::packet::{PacketError, PacketReader, PacketWriter};
use super::params::{self, ParamType};
use super::value;
use crate::engine::stream::{ResultPart, ResultReceiver, ResultSink};
use crate::server::{Backend, PreparedInfo, ServerState};
use crate::session_registry::Kill;
use crate::session_registry::SessionEntry;
use crate::types::{ColumnMeta, QueryOutput, Session, SqlError};
use mysql_common::constants::CapabilityFlags as C;
use mysql_common::io::ParseBuf;
use mysql_common::packets::HandshakeResponse;
use mysql_common::proto::MyDeserialize;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::BufReader;
use tokio::io::{AsyncRead, AsyncWrite};

/// Capabilities we offer (CLIENT_SSL is added when the server has a TLS
/// configuration: `Conn::login`). Not offered: compression,
/// session tracking, query attributes, optional metadata.
/// CLIENT_LONG_PASSWORD (bit 0) is left out as MariaDB leaves it out: there it
/// means CLIENT_MYSQL, and its absence tells MariaDB clients that the greeting
/// carries extended capabilities (`server_mariadb_capabilities`). Clients of
/// 4.1 and later do not depend on it.
pub fn server_capabilities() -> u32 {
    (C::CLIENT_FOUND_ROWS
        | C::CLIENT_LONG_FLAG
        | C::CLIENT_CONNECT_WITH_DB
        | C::CLIENT_NO_SCHEMA
        | C::CLIENT_ODBC
        | C::CLIENT_LOCAL_FILES
        | C::CLIENT_IGNORE_SPACE
        | C::CLIENT_PROTOCOL_41
        | C::CLIENT_INTERACTIVE
        | C::CLIENT_IGNORE_SIGPIPE
        | C::CLIENT_TRANSACTIONS
        | C::CLIENT_RESERVED
        | C::CLIENT_SECURE_CONNECTION
        | C::CLIENT_MULTI_STATEMENTS
        | C::CLIENT_MULTI_RESULTS
        | C::CLIENT_PS_MULTI_RESULTS
        | C::CLIENT_PLUGIN_AUTH
        | C::CLIENT_CONNECT_ATTRS
        | C::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
        | C::CLIENT_DEPRECATE_EOF)
        .bits()
}

/// MariaDB's MARIADB_CLIENT_CACHE_METADATA (bit 36 of its 64-bit flags, so bit
/// 4 of the extended half): every column count packet carries a "metadata
/// follows" byte, and a prepared statement's execute leaves out the column
/// definitions the client already holds from the prepare or the last execute.
/// libmariadb (sysbench, the mariadb CLI) asks for it; without it every execute
/// makes the client parse and allocate each column definition again.
pub const MARIADB_CACHE_METADATA: u32 = 1 << 4;

/// MariaDB extended capabilities we offer (the upper 32 of its 64 flag bits).
pub fn server_mariadb_capabilities() -> u32 {
    MARIADB_CACHE_METADATA
}

/// The server version the greeting carries. libmariadb takes the extended
/// capabilities only from a server whose greeting version contains "MariaDB",
/// so the greeting says which protocol extensions it speaks. The suffix
/// follows a space: parsers that read the leading "x.y.z" (PyMySQL,
/// mysql-connector) still see the MySQL version, and mysql_common's MariaDB
/// test ("x.y.z-MariaDB" at the start) does not match. @@version and VERSION()
/// (what SQLAlchemy reads) stay unchanged, as MariaDB's "5.5.5-" greeting
/// prefix is absent from its @@version.
pub fn greeting_version(server_version: &str) -> String {
    format!("{server_version} (MariaDB protocol extensions)")
}

/// Largest handshake response we read before authentication (MySQL uses a
/// small fixed buffer too; connect attributes are at most 64 KiB).
const MAX_HANDSHAKE_BYTES: usize = 256 * 1024;
/// Per-connection cap on open prepared statements (MySQL's global default
/// max_prepared_stmt_count is 16382).
const MAX_PREPARED_STATEMENTS: usize = 16382;
/// Capacity of the command packet buffer kept between packets (most
/// commands are far smaller; a bigger one is dropped after use).
const PAYLOAD_BUF_KEEP_BYTES: usize = 16 * 1024;
/// Results built whole with more rows than this are held against
/// `--max-memory` while they are written (`write_output`).
const HELD_RESULT_MIN_ROWS: usize = 64;
/// How long a login may take before the server gives up, unless the backend
/// holds a live `connect_timeout`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

const COM_QUIT: u8 = 0x01;
const COM_INIT_DB: u8 = 0x02;
const COM_QUERY: u8 = 0x03;
const COM_FIELD_LIST: u8 = 0x04;
const COM_STATISTICS: u8 = 0x09;
const COM_PING: u8 = 0x0e;
const COM_STMT_PREPARE: u8 = 0x16;
const COM_STMT_EXECUTE: u8 = 0x17;
const COM_STMT_SEND_LONG_DATA: u8 = 0x18;
const COM_STMT_CLOSE: u8 = 0x19;
const COM_STMT_RESET: u8 = 0x1a;
const COM_SET_OPTION: u8 = 0x1b;
const COM_STMT_FETCH: u8 = 0x1c;
const COM_RESET_CONNECTION: u8 = 0x1f;

fn too_large() -> SqlError {
    SqlError::new(1153, "08S01", "Got a packet bigger than 'max_allowed_packet' bytes")
}

/// Hasher of the prepared statement map. We hand the ids out in sequence and
/// a client can only look them up, so a multiplicative hash spreads them well
/// enough and nobody can pick colliding keys; SipHash cost about 100
/// instructions per COM_STMT_EXECUTE.
#[derive(Default)]
struct StmtIdHasher(u64);

impl std::hash::Hasher for StmtIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u32(b as u32 ^ (self.0 as u32).rotate_left(8));
        }
    }
    fn write_u32(&mut self, v: u32) {
        // Fibonacci hashing: the product's high bits (which hashbrown uses
        // for its control bytes) depend on every bit of the id.
        self.0 = u64::from(v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type StmtMap<S> = HashMap<u32, Stmt<S>, std::hash::BuildHasherDefault<StmtIdHasher>>;

struct Stmt<S> {
    info: PreparedInfo<S>,
    /// The column definitions the client holds for this statement: sent with
    /// the prepare, replaced by an execute whose result columns differed.
    client_columns: Arc<[ColumnMeta]>,
    param_types: Vec<ParamType>,
    long_data: HashMap<u16, Vec<u8>>,
    /// Set when SEND_LONG_DATA overflowed: reported by the next execute.
    long_data_error: Option<SqlError>,
}

struct Conn<B: Backend> {
    backend: Arc<B>,
    state: Arc<ServerState>,
    rd: PacketReader<BufReader<ClientRead>>,
    wr: PacketWriter<ClientWrite>,
    caps: u32,
    /// Negotiated MariaDB extended capabilities (0 for MySQL clients).
    mariadb_caps: u32,
    session: Option<Session>,
    stmts: StmtMap<B::Stmt>,
    next_stmt_id: u32,
    connection_id: u32,
    /// The client's host as error messages name it: its IP over TCP,
    /// `localhost` over a Unix socket (as MySQL).
    peer_host: String,
    /// The connection's socket, which KILL CONNECTION shuts down.
    socket: Option<std::os::fd::RawFd>,
    /// The channel a statement streams its result through (`engine::stream`):
    /// the sender goes into the session, this end is written out by
    /// `run_streaming`.
    results_tx: ResultSink,
    results_rx: ResultReceiver,
    /// Rows the current COM_QUERY has sent (for the slow query log).
    rows_sent: u64,
    /// Set once the client upgraded the connection to TLS.
    tls: Option<crate::types::TlsInfo>,
}

/// The read half of a client's stream (TCP or Unix socket).
pub type ClientRead = Box<dyn AsyncRead + Send + Unpin>;
/// The write half of a client's stream.
pub type ClientWrite = Box<dyn AsyncWrite + Send + Unpin>;

/// Runs one connection to its end. Never panics on client input.
/// The accounts with admin rights, which may take the connection kept past
/// max_connections (MySQL: CONNECTION_ADMIN or SUPER). Accounts have no
/// privileges yet, so only `root` (see the README).
fn is_admin_account(user: &str) -> bool {
    user == "root"
}

pub async fn run_connection<B: Backend>(
    r: ClientRead,
    w: ClientWrite,
    peer_host: String,
    socket: Option<std::os::fd::RawFd>,
    backend: Arc<B>,
    state: Arc<ServerState>,
    connection_id: u32,
) {
    let max = state.config.max_allowed_packet;
    let (results_tx, results_rx) = crate::engine::stream::channel();
    let mut conn = Conn {
        backend,
        state: state.clone(),
        rd: PacketReader::new(BufReader::with_capacity(64 * 1024, r), max),
        wr: PacketWriter::new(w),
        caps: 0,
        mariadb_caps: 0,
        session: None,
        stmts: StmtMap::default(),
        next_stmt_id: 1,
        connection_id,
        peer_host,
        socket,
        results_tx,
        results_rx,
        rows_sent: 0,
        tls: None,
    };
    let active = state.active_connections.fetch_add(1, Ordering::SeqCst) + 1;
    // Read per connection: SET GLOBAL max_connections applies to new
    // connections only; those already in are never dropped (as MySQL).
    let limit = conn.backend.max_connections().unwrap_or(state.config.max_connections);
    // As MySQL, one connection past the limit is kept for an admin account
    // (checked once the client has logged in, in `login`): an operator can
    // always get in to see what holds the others, and KILL them.
    if active > limit.saturating_add(1) {
        conn.wr.seq = 0;
        let e = SqlError::new(1040, "08004", "Too many connections");
        conn.wr.push(&codec::err_packet_pre41(&e));
        let _ = conn.wr.flush().await;
        conn.wr.shutdown().await;
    } else {
        let login_limit = conn.backend.connect_timeout().unwrap_or(CONNECT_TIMEOUT);
        match tokio::time::timeout(login_limit, conn.login(active > limit)).await {
            Ok(Ok(true)) => conn.command_loop().await,
            Ok(Ok(false)) | Ok(Err(_)) => {}
            Err(_) => {
                let _ = conn.send_err(&SqlError::new(1043, "08S01", "Bad handshake")).await;
            }
        }
        if let Some(mut s) = conn.session.take() {
            // After a panic the session may be half-updated: its clean-up
            // must not take the process down either.
            if let Err(msg) = CatchPanic(std::pin::pin!(conn.backend.end_session(&mut s))).await {
                tracing::error!("sqld: connection {connection_id}: session clean-up panicked: {msg}");
            }
            // Before the socket closes: a KILL must not shut down whatever
            // connection gets its descriptor next.
            s.entry.forget_socket();
        }
        conn.wr.shutdown().await;
    }
    state.active_connections.fetch_sub(1, Ordering::SeqCst);
}

/// An SSLRequest packet: capabilities, max packet, charset, 23 filler bytes.
const SSL_REQUEST_BYTES: usize = 32;

fn first_u32(b: &[u8]) -> u32 {
    match b {
        [a, b, c, d, ..] => u32::from_le_bytes([*a, *b, *c, *d]),
        _ => 0,
    }
}

impl<B: Backend> Conn<B> {
    /// A packet of the login; None (and the connection ends) when the
    /// client went away or sent one over the handshake's size limit (1043).
    async fn read_handshake_packet(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        match self.rd.read_packet().await {
            Ok(p) => Ok(Some(p)),
            Err(PacketError::TooLarge { .. }) => {
                self.wr.seq = self.rd.next_seq;
                self.send_err(&SqlError::new(1043, "08S01", "Bad handshake")).await?;
                Ok(None)
            }
            Err(_) => Ok(None),
        }
    }

    /// The TLS handshake after an SSLRequest; from then on every packet
    /// goes through the TLS stream. False: it failed (the client gets no
    /// MySQL error, as it speaks TLS now; the reason is logged).
    async fn start_tls(&mut self, cfg: Arc<rustls::ServerConfig>) -> bool {
        let empty: ClientRead = Box::new(tokio::io::empty());
        let r = self.rd.replace_inner(BufReader::new(empty));
        let w = self.wr.replace_inner(Box::new(tokio::io::sink()));
        match super::tls::accept(cfg, super::tls::Joined { r, w }).await {
            Ok((stream, info)) => {
                let (r, w) = tokio::io::split(stream);
                let r: ClientRead = Box::new(r);
                self.rd.replace_inner(BufReader::with_capacity(64 * 1024, r));
                self.wr.replace_inner(Box::new(w));
                self.tls = Some(info);
                true
            }
            Err(e) => {
                tracing::debug!("sqld: connection {}: TLS handshake failed: {e}", self.connection_id);
                false
            }
        }
    }

    /// @@session.max_allowed_packet is the limit this connection enforces
    /// (read-only for the session, as in MySQL).
    fn pin_max_allowed_packet(&self, s: &mut Session) {
        s.vars.insert("max_allowed_packet".into(), norr_signals::Value::UInt(self.rd.max_allowed_packet as u64));
    }

    fn has(&self, cap: C) -> bool {
        self.caps & cap.bits() != 0
    }

    fn status_flags(&self) -> u16 {
        let mut f = 0;
        if let Some(s) = &self.session {
            if s.autocommit {
                f |= status::AUTOCOMMIT;
            }
            if s.in_transaction {
                f |= status::IN_TRANS;
            }
        } else {
            f |= status::AUTOCOMMIT;
        }
        f
    }

    fn warnings(&self) -> u16 {
        self.session.as_ref().map(|s| s.warnings.len().min(u16::MAX as usize) as u16).unwrap_or(0)
    }

    async fn send_err(&mut self, e: &SqlError) -> std::io::Result<()> {
        self.wr.push(&codec::err_packet(e));
        self.wr.flush().await
    }

    async fn send_ok(&mut self, affected: u64, last_id: u64, extra_status: u16, info: &str) -> std::io::Result<()> {
        let p = codec::ok_packet(0, affected, last_id, self.status_flags() | extra_status, self.warnings(), info);
        self.wr.push(&p);
        Ok(())
    }

    /// EOF, or nothing when CLIENT_DEPRECATE_EOF (between metadata and rows).
    fn push_mid_eof(&mut self) {
        if !self.has(C::CLIENT_DEPRECATE_EOF) {
            let p = codec::eof_packet(self.status_flags(), self.warnings());
            self.wr.push(&p);
        }
    }

    /// The packet that ends a result set: EOF, or OK with 0xFE header.
    fn push_end_of_rows(&mut self, extra_status: u16) {
        let st = self.status_flags() | extra_status;
        let w = self.warnings();
        if self.has(C::CLIENT_DEPRECATE_EOF) {
            self.wr.push(&codec::ok_packet(0xfe, 0, 0, st, w, ""));
        } else {
            self.wr.push(&codec::eof_packet(st, w));
        }
    }

    /// Greeting + authentication + optional initial database. Ok(true) when
    /// the client is logged in. `admin_slot`: this connection is the one
    /// past max_connections, kept for an admin account.
    async fn login(&mut self, admin_slot: bool) -> std::io::Result<bool> {
        let state = self.state.clone();
        let cfg = &state.config;
        let nonce = auth::new_nonce();
        let version = greeting_version(&self.backend.server_version());
        let offered = server_capabilities() | if cfg.tls.is_some() { C::CLIENT_SSL.bits() } else { 0 };
        let greeting = auth::handshake_packet(
            &version,
            self.connection_id,
            &nonce,
            offered,
            server_mariadb_capabilities(),
            status::AUTOCOMMIT,
            cfg.default_auth_plugin,
        );
        self.wr.seq = 0;
        self.wr.push(&greeting);
        self.wr.flush().await?;

        self.rd.max_allowed_packet = MAX_HANDSHAKE_BYTES.min(cfg.max_allowed_packet.max(4096));
        let Some(mut payload) = self.read_handshake_packet().await? else { return Ok(false) };
        // SSLRequest: the response's first 32 bytes alone, with CLIENT_SSL;
        // TLS starts right after it, and the whole response follows inside.
        if payload.len() == SSL_REQUEST_BYTES && first_u32(&payload) & C::CLIENT_SSL.bits() != 0 {
            let Some(tls) = cfg.tls.clone() else {
                self.wr.seq = self.rd.next_seq;
                self.send_err(&SqlError::new(1043, "08S01", "Bad handshake")).await?;
                return Ok(false);
            };
            if !self.start_tls(tls).await {
                return Ok(false);
            }
            let Some(p) = self.read_handshake_packet().await? else { return Ok(false) };
            payload = p;
        }
        // The connection's limit for its lifetime: the global value now
        // (`SET GLOBAL max_allowed_packet` applies to new connections, as in
        // MySQL), also what its @@session.max_allowed_packet shows.
        self.rd.max_allowed_packet = self.backend.max_allowed_packet().unwrap_or(cfg.max_allowed_packet);
        self.wr.seq = self.rd.next_seq;
        let bad_handshake = SqlError::new(1043, "08S01", "Bad handshake");
        // Parsing with mysql_common; the length checks below make sure a
        // short packet can't reach a code path that assumes more bytes.
        let parsed =
            if payload.len() < 32 { None } else { HandshakeResponse::deserialize((), &mut ParseBuf(&payload)).ok() };
        let Some(resp) = parsed else {
            self.send_err(&bad_handshake).await?;
            return Ok(false);
        };
        let client_caps = resp.capabilities().bits();
        if client_caps & C::CLIENT_PROTOCOL_41.bits() == 0
            || (client_caps & C::CLIENT_SSL.bits() != 0 && self.tls.is_none())
        {
            // Pre-4.1 clients, or a client claiming TLS it did not start.
            self.send_err(&bad_handshake).await?;
            return Ok(false);
        }
        self.caps = client_caps & offered;
        // A MariaDB client that saw CLIENT_MYSQL clear drops it too and puts
        // its extended capabilities in the last 4 of the 23 filler bytes.
        if client_caps & C::CLIENT_LONG_PASSWORD.bits() == 0 {
            if let Some(ext) = payload.get(28..32) {
                let ext = u32::from_le_bytes([ext[0], ext[1], ext[2], ext[3]]);
                self.mariadb_caps = ext & server_mariadb_capabilities();
            }
        }
        let user = String::from_utf8_lossy(resp.user()).into_owned();
        let db = resp.db_name().filter(|d| !d.is_empty()).map(|d| String::from_utf8_lossy(d).into_owned());
        let client_plugin_name = resp.auth_plugin().map(|p| String::from_utf8_lossy(p.as_bytes()).into_owned());
        let mut response = resp.scramble_buf().to_vec();
        drop(resp);

        let account = match self.backend.login_account(cfg, &user, &self.peer_host).await {
            Ok(a) => a,
            Err(e) => {
                // The accounts could not be read (no data node): say so
                // rather than "access denied".
                self.send_err(&e).await?;
                return Ok(false);
            }
        };
        let peer_ip = self.peer_host.clone();
        let denied = |using_password: bool| {
            SqlError::new(
                1045,
                "28000",
                format!(
                    "Access denied for user '{}'@'{}' (using password: {})",
                    user,
                    peer_ip,
                    if using_password { "YES" } else { "NO" }
                ),
            )
        };
        // The plugin the client used: PLUGIN_AUTH names it; without it a
        // 4.1 client speaks mysql_native_password.
        let client_plugin = match &client_plugin_name {
            Some(n) if client_caps & C::CLIENT_PLUGIN_AUTH.bits() != 0 => AuthPlugin::from_name(n),
            _ => Some(AuthPlugin::Native),
        };
        // The plugin we verify with: the account's own if it has one, else
        // whatever known plugin the client started with.
        let wanted = account.as_ref().and_then(|a| a.plugin).or(client_plugin).unwrap_or(cfg.default_auth_plugin);
        let mut nonce_used = nonce;
        if client_plugin != Some(wanted) {
            if client_caps & C::CLIENT_PLUGIN_AUTH.bits() == 0 {
                self.send_err(&denied(!response.is_empty())).await?;
                return Ok(false);
            }
            nonce_used = auth::new_nonce();
            self.wr.push(&auth::auth_switch_packet(wanted, &nonce_used));
            self.wr.flush().await?;
            response = match self.rd.read_packet().await {
                Ok(p) => p,
                Err(_) => return Ok(false),
            };
            self.wr.seq = self.rd.next_seq;
        }
        // caching_sha2_password over TLS, for an account this SQL node has
        // not seen log in since it started (or since its password changed):
        // the full authentication, as MySQL with an empty cache. The
        // client sends its password in clear inside the TLS channel.
        let full_auth = match &account {
            Some(a) if wanted == AuthPlugin::CachingSha2 && self.tls.is_some() && a.sha2.is_some() => {
                !state.sha2_cache_has(&user, a)
            }
            _ => false,
        };
        let ok = match &account {
            Some(a) if full_auth => {
                self.wr.push(&auth::PERFORM_FULL_AUTH);
                self.wr.flush().await?;
                let password = match self.rd.read_packet().await {
                    Ok(p) => p,
                    Err(_) => return Ok(false),
                };
                self.wr.seq = self.rd.next_seq;
                let ok = auth::verify_cleartext_sha2(a, &password);
                if ok {
                    state.sha2_cache_add(&user, a);
                }
                ok
            }
            Some(a) => auth::verify_account(wanted, &nonce_used, a, &response),
            None => false,
        };
        if !ok {
            // MySQL's message reports whether a password was sent at all.
            let e = denied(!response.is_empty());
            self.send_err(&e).await?;
            return Ok(false);
        }
        let Some(account) = account else { return Ok(false) };
        // A Unix socket (peer `localhost`; TCP peers are addresses) is a
        // secure transport, as in MySQL.
        if account.require_ssl && self.tls.is_none() && self.peer_host != "localhost" {
            // REQUIRE SSL: as MySQL, the same "access denied" as a wrong
            // password (the reason goes to the log only).
            tracing::info!("sqld: '{user}'@'{}' requires SSL; refused a login without TLS", account.host);
            self.send_err(&denied(true)).await?;
            return Ok(false);
        }
        if account.locked {
            let e = SqlError::new(
                3118,
                "HY000",
                format!("Access denied for user '{user}'@'{}'. Account is locked.", account.host),
            );
            self.send_err(&e).await?;
            return Ok(false);
        }
        if account.password_expired && client_caps & C::CLIENT_CAN_HANDLE_EXPIRED_PASSWORDS.bits() == 0 {
            // As MySQL with disconnect_on_expired_password: a client that
            // cannot run in the sandbox (only ALTER USER allowed) is refused.
            let e = SqlError::new(
                1862,
                "HY000",
                "Your password has expired. To log in you must change it using a client that supports expired passwords.",
            );
            self.send_err(&e).await?;
            return Ok(false);
        }
        if wanted == AuthPlugin::CachingSha2 && !response.is_empty() && !full_auth {
            self.wr.push(&auth::FAST_AUTH_SUCCESS);
        }
        if admin_slot && !is_admin_account(&user) {
            self.send_err(&SqlError::new(1040, "08004", "Too many connections")).await?;
            return Ok(false);
        }
        let mut session = self.backend.new_session(self.connection_id, &user);
        session.account = Some(crate::types::SessionAccount {
            user: user.clone(),
            host: account.host.clone(),
            peer: self.peer_host.clone(),
            active_roles: None,
            password_expired: account.password_expired,
            names: std::sync::Arc::new(crate::types::LoginNames::new(&user, &account.host, &self.peer_host)),
        });
        session.tls = self.tls.clone();
        session.entry.set_host(&self.peer_host);
        if let Some(fd) = self.socket {
            session.entry.set_socket(fd);
        }
        self.pin_max_allowed_packet(&mut session);
        session.client_found_rows = self.has(C::CLIENT_FOUND_ROWS);
        session.multi_statements = self.has(C::CLIENT_MULTI_STATEMENTS);
        if self.has(C::CLIENT_INTERACTIVE) {
            // As MySQL: an interactive client's idle limit is
            // interactive_timeout.
            if let Some(v) = session.vars.get("interactive_timeout").cloned() {
                session.vars.insert("wait_timeout".into(), v);
            }
        }
        if client_caps & C::CLIENT_CONNECT_WITH_DB.bits() != 0 {
            if let Some(db) = db {
                if let Err(e) = self.backend.init_db(&mut session, &db).await {
                    self.session = Some(session);
                    self.send_err(&e).await?;
                    return Ok(false);
                }
            }
        }
        self.session = Some(session);
        self.send_ok(0, 0, 0, "").await?;
        self.wr.flush().await?;
        Ok(true)
    }

    async fn command_loop(&mut self) {
        // One buffer for every command packet of the connection (an
        // allocation per packet cost ~10% of a point select here); dropped
        // after a large packet so an idle connection does not pin its memory.
        let mut payload = Vec::new();
        let Some(entry) = self.session.as_ref().map(|s| s.entry.clone()) else { return };
        loop {
            if payload.capacity() > PAYLOAD_BUF_KEEP_BYTES {
                payload = Vec::new();
            }
            // KILL CONNECTION shuts the socket down, which ends this read
            // (see `SessionEntry::request_kill`); a command read before the
            // kill is not run.
            self.apply_timeouts();
            match self.rd.read_packet_into(&mut payload).await {
                Ok(()) => {}
                Err(PacketError::TimedOut { idle }) => {
                    // As MySQL 8.0.24+: the client learns why (4031), then
                    // the connection closes; a packet stalled half-way is
                    // 1159 (the client is not listening in the middle of
                    // sending, but a log of it helps).
                    self.wr.seq = 0;
                    let e = if idle {
                        SqlError::new(
                            4031,
                            "HY000",
                            "The client was disconnected by the server because of inactivity. See wait_timeout and interactive_timeout for configuring this behavior.",
                        )
                    } else {
                        SqlError::new(1159, "08S01", "Got timeout reading communication packets")
                    };
                    tracing::debug!("sqld: connection {}: {}", self.connection_id, e.message);
                    let _ = self.send_err(&e).await;
                    return;
                }
                Err(PacketError::TooLarge { .. }) => {
                    self.wr.seq = self.rd.next_seq;
                    let _ = self.send_err(&too_large()).await;
                    self.wr.shutdown().await;
                    self.rd.drain(self.rd.max_allowed_packet.saturating_mul(2), Duration::from_secs(2)).await;
                    return;
                }
                Err(_) => return,
            };
            if entry.kill_requested() == Kill::Connection {
                return;
            }
            self.state.idle_spin.touch();
            self.wr.seq = self.rd.next_seq;
            let r = {
                let cmd = std::pin::pin!(self.dispatch(&payload));
                CatchPanic(cmd).await
            };
            match r {
                Ok(Ok(true)) => {}
                Ok(Ok(false)) => return,
                Ok(Err(_)) => return, // socket error
                Err(msg) => {
                    // A bug, not the client's doing: this connection ends
                    // with an error, every other one goes on.
                    tracing::error!("sqld: connection {}: statement panicked: {msg}", self.connection_id);
                    self.wr.discard();
                    let e = SqlError::new(1105, "HY000", format!("Internal error: {msg}; the connection is closed"));
                    let _ = self.send_err(&e).await;
                    return;
                }
            }
            if self.wr.flush().await.is_err() || entry.kill_requested() == Kill::Connection {
                return;
            }
        }
    }

    /// The session's wait_timeout, net_read_timeout and net_write_timeout
    /// (seconds; SET changes them) onto the connection's reads and writes.
    fn apply_timeouts(&mut self) {
        let Some(s) = self.session.as_ref() else { return };
        let secs = |name: &str| {
            s.vars.get(name).and_then(|v| v.as_i64()).filter(|n| *n > 0).map(|n| Duration::from_secs(n as u64))
        };
        self.rd.idle_timeout = secs("wait_timeout");
        self.rd.read_timeout = secs("net_read_timeout");
        self.wr.write_timeout = secs("net_write_timeout");
    }

    fn session(&mut self) -> &mut Session {
        // Only called after a successful login, which always sets it.
        self.session.get_or_insert_with(|| Session::new(0, ""))
    }

    /// Handles one command. Ok(false) ends the connection.
    async fn dispatch(&mut self, payload: &[u8]) -> std::io::Result<bool> {
        let mut r = Reader::new(payload);
        let Some(cmd) = r.u8() else {
            self.send_err(&params::malformed()).await?;
            return Ok(true);
        };
        match cmd {
            COM_QUIT => return Ok(false),
            COM_PING => self.send_ok(0, 0, 0, "").await?,
            COM_INIT_DB => {
                let db = String::from_utf8_lossy(r.rest()).into_owned();
                let backend = self.backend.clone();
                match backend.init_db(self.session(), &db).await {
                    Ok(()) => self.send_ok(0, 0, 0, "").await?,
                    Err(e) => self.send_err(&e).await?,
                }
            }
            COM_QUERY => {
                let sql = crate::engine::parse_ext::query_text(r.rest());
                self.com_query(&sql).await?;
            }
            COM_FIELD_LIST => {
                let table = String::from_utf8_lossy(r.null_str()).into_owned();
                let backend = self.backend.clone();
                match backend.field_list(self.session(), &table).await {
                    Ok(cols) => {
                        for c in &cols {
                            self.wr.send(&codec::column_def(c, true)).await?;
                        }
                        self.push_end_of_rows(0);
                    }
                    Err(e) => self.send_err(&e).await?,
                }
            }
            COM_STATISTICS => {
                let up = self.state.started.elapsed().as_secs();
                let n = self.state.active_connections.load(Ordering::Relaxed);
                let s = format!("Uptime: {up}  Threads: {n}  Questions: 0  Slow queries: 0  Opens: 0  Flush tables: 0  Open tables: 0  Queries per second avg: 0.000");
                self.wr.push(s.as_bytes());
            }
            COM_STMT_PREPARE => {
                let sql = crate::engine::parse_ext::query_text(r.rest());
                self.com_stmt_prepare(&sql).await?;
            }
            COM_STMT_EXECUTE => self.com_stmt_execute(&mut r).await?,
            COM_STMT_SEND_LONG_DATA => {
                // No reply, ever (even on error).
                let (Some(id), Some(param)) = (r.u32(), r.u16()) else {
                    return Ok(true);
                };
                let data = r.rest();
                let max = self.rd.max_allowed_packet;
                if let Some(st) = self.stmts.get_mut(&id) {
                    if param >= st.info.param_count {
                        st.long_data_error =
                            Some(SqlError::new(1210, "HY000", "Incorrect arguments to mysqld_stmt_send_long_data"));
                    } else {
                        let buf = st.long_data.entry(param).or_default();
                        if buf.len() + data.len() > max {
                            st.long_data_error = Some(too_large());
                        } else {
                            buf.extend_from_slice(data);
                        }
                    }
                }
            }
            COM_STMT_CLOSE => {
                if let Some(id) = r.u32() {
                    self.stmts.remove(&id);
                }
            }
            COM_STMT_RESET => {
                let Some(id) = r.u32() else {
                    self.send_err(&params::malformed()).await?;
                    return Ok(true);
                };
                match self.stmts.get_mut(&id) {
                    Some(st) => {
                        st.long_data.clear();
                        st.long_data_error = None;
                        self.send_ok(0, 0, 0, "").await?;
                    }
                    None => self.send_err(&unknown_stmt(id, "mysqld_stmt_reset")).await?,
                }
            }
            COM_SET_OPTION => match r.u16() {
                Some(0) => {
                    self.session().multi_statements = true;
                    self.push_end_of_rows(0);
                }
                Some(1) => {
                    self.session().multi_statements = false;
                    self.push_end_of_rows(0);
                }
                Some(_) => self.send_err(&SqlError::new(1047, "08S01", "Unknown command")).await?,
                None => self.send_err(&params::malformed()).await?,
            },
            COM_STMT_FETCH => {
                // We never open cursors (execute always sends the whole result).
                let id = r.u32().unwrap_or(0);
                self.send_err(&unknown_stmt(id, "mysqld_stmt_fetch")).await?
            }
            COM_RESET_CONNECTION => {
                let backend = self.backend.clone();
                if let Some(mut s) = self.session.take() {
                    backend.end_session(&mut s).await;
                    let mut n = backend.new_session(self.connection_id, &s.user);
                    self.pin_max_allowed_packet(&mut n);
                    n.client_found_rows = s.client_found_rows;
                    n.multi_statements = self.has(C::CLIENT_MULTI_STATEMENTS);
                    self.session = Some(n);
                }
                self.stmts.clear();
                self.send_ok(0, 0, 0, "").await?;
            }
            _ => self.send_err(&SqlError::new(1047, "08S01", "Unknown command")).await?,
        }
        Ok(true)
    }

    /// Writes one statement result (result set or OK). `send_defs` false
    /// leaves out the column definitions (only with MARIADB_CACHE_METADATA).
    async fn write_output(
        &mut self,
        out: &QueryOutput,
        more: bool,
        binary: bool,
        send_defs: bool,
    ) -> std::io::Result<()> {
        let extra = if more { status::MORE_RESULTS_EXISTS } else { 0 };
        match out {
            QueryOutput::Ok { affected_rows, last_insert_id, info } => {
                self.send_ok(*affected_rows, *last_insert_id, extra, info).await?;
            }
            QueryOutput::Rows { columns, rows } => {
                // A result built whole stays in memory while a slow client
                // reads it, after its statement's charge ended: held against
                // --max-memory meanwhile. Small results (most) are left to the
                // limit's margin rather than summed.
                let _held = (rows.len() > HELD_RESULT_MIN_ROWS)
                    .then(|| crate::engine::memory::hold_process(crate::engine::memory::rows_bytes(rows)));
                // Everything is written straight into the output buffer.
                let cache_metadata = self.mariadb_caps & MARIADB_CACHE_METADATA != 0;
                let send_defs = send_defs || !cache_metadata;
                self.wr.push_with(|b| {
                    codec::put_lenenc_int(b, columns.len() as u64);
                    if cache_metadata {
                        b.push(send_defs as u8);
                    }
                });
                if send_defs {
                    for c in columns.iter() {
                        self.wr.send_with(|b| codec::put_column_def(b, c, false)).await?;
                    }
                }
                self.push_mid_eof();
                for row in rows {
                    if binary {
                        self.wr.send_with(|b| value::binary_row(b, row, columns)).await?;
                    } else {
                        self.wr.send_with(|b| value::text_row(b, row, columns)).await?;
                    }
                }
                self.push_end_of_rows(extra);
            }
            // Columns and rows went out while the statement ran.
            QueryOutput::Streamed { .. } => self.push_end_of_rows(extra),
        }
        Ok(())
    }

    /// How a streamed result of this connection is written.
    fn stream_format(&self, binary: bool) -> StreamFormat {
        StreamFormat {
            binary,
            deprecate_eof: self.has(C::CLIENT_DEPRECATE_EOF),
            cache_metadata: self.mariadb_caps & MARIADB_CACHE_METADATA != 0,
            status: self.status_flags(),
        }
    }

    async fn com_query(&mut self, sql: &str) -> std::io::Result<()> {
        let started = std::time::Instant::now();
        let r = self.com_query_inner(sql).await;
        if let Some(s) = self.session.as_ref() {
            self.backend.statement_done(s, sql, started.elapsed(), std::mem::take(&mut self.rows_sent));
        }
        r
    }

    async fn com_query_inner(&mut self, sql: &str) -> std::io::Result<()> {
        let backend = self.backend.clone();
        let fmt = self.stream_format(false);
        let (results, written) = {
            let Some(session) = self.session.as_mut() else { return Ok(()) };
            if session.result_sink.is_none() {
                session.result_sink = Some(self.results_tx.clone());
            }
            let entry = session.entry.clone();
            // Pinned here and lent: moved into `run_streaming` by value, the
            // statement's future (kilobytes) was copied once more per statement.
            let exec = std::pin::pin!(backend.execute_text(session, sql));
            run_streaming(exec, &mut self.wr, &mut self.rd, &mut self.results_rx, fmt, None, &entry).await
        };
        written?;
        if results.is_empty() {
            // An empty query: MySQL answers ER_EMPTY_QUERY.
            return self.send_err(&SqlError::new(1065, "42000", "Query was empty")).await;
        }
        let n = results.len();
        let multi_results = self.has(C::CLIENT_MULTI_RESULTS);
        for (i, r) in results.iter().enumerate() {
            let more = i + 1 < n && multi_results;
            // A LOAD DATA LOCAL is always the last statement (the engine
            // sees to it): its reply is the request for the file.
            if i + 1 == n && r.is_ok() {
                if let Some(file) = backend.local_infile(self.session()) {
                    return self.local_infile(&file).await;
                }
            }
            match r {
                Ok(out) => {
                    self.rows_sent += match out {
                        QueryOutput::Rows { rows, .. } => rows.len() as u64,
                        QueryOutput::Streamed { rows } => *rows,
                        QueryOutput::Ok { .. } => 0,
                    };
                    self.write_output(out, more, false, true).await?
                }
                Err(e) => {
                    self.send_err(e).await?;
                    break;
                }
            }
            if i + 1 < n && !multi_results {
                break; // the client can't take more than one result
            }
        }
        Ok(())
    }

    /// LOAD DATA LOCAL INFILE: ask the client for `file` (0xFB and the
    /// name), pass its packets to the engine up to the empty one that ends
    /// the file, then send the statement's result.
    async fn local_infile(&mut self, file: &str) -> std::io::Result<()> {
        let backend = self.backend.clone();
        if !self.has(C::CLIENT_LOCAL_FILES) {
            let e = SqlError::new(1148, "42000", "The used command is not allowed with this MySQL version");
            let _ = backend.local_infile_end(self.session(), Some(e.clone())).await;
            return self.send_err(&e).await;
        }
        self.wr.push_with(|b| {
            b.push(0xfb);
            b.extend_from_slice(file.as_bytes());
        });
        self.wr.flush().await?;
        let mut data = Vec::new();
        loop {
            match self.rd.read_packet_into(&mut data).await {
                Ok(()) if data.is_empty() => break,
                Ok(()) => backend.local_infile_data(self.session(), &data).await,
                Err(PacketError::TooLarge { .. }) => {
                    // The file's packets are the client's net buffer size;
                    // one over the limit is not a file we can read on.
                    self.wr.seq = self.rd.next_seq;
                    let _ = backend.local_infile_end(self.session(), Some(too_large())).await;
                    let _ = self.send_err(&too_large()).await;
                    return Err(std::io::Error::other("packet too large"));
                }
                // The connection is gone: the session's end undoes the load.
                Err(_) => return Err(std::io::Error::other("connection lost during LOAD DATA LOCAL")),
            }
        }
        self.wr.seq = self.rd.next_seq;
        match backend.local_infile_end(self.session(), None).await {
            Ok(out) => self.write_output(&out, false, false, true).await,
            Err(e) => self.send_err(&e).await,
        }
    }

    async fn com_stmt_prepare(&mut self, sql: &str) -> std::io::Result<()> {
        if self.stmts.len() >= MAX_PREPARED_STATEMENTS {
            return self
                .send_err(&SqlError::new(
                    1461,
                    "42000",
                    format!("Can't create more than max_prepared_stmt_count statements (current value: {MAX_PREPARED_STATEMENTS})"),
                ))
                .await;
        }
        let backend = self.backend.clone();
        let info = match backend.prepare(self.session(), sql).await {
            Ok(i) => i,
            Err(e) => return self.send_err(&e).await,
        };
        let id = self.next_stmt_id;
        self.next_stmt_id = self.next_stmt_id.wrapping_add(1).max(1);
        let mut b = vec![0x00];
        b.extend_from_slice(&id.to_le_bytes());
        b.extend_from_slice(&(info.columns.len().min(u16::MAX as usize) as u16).to_le_bytes());
        b.extend_from_slice(&info.param_count.to_le_bytes());
        b.push(0);
        b.extend_from_slice(&self.warnings().to_le_bytes());
        self.wr.push(&b);
        if info.param_count > 0 {
            let mut p = ColumnMeta::expr("?", crate::types::FieldType::VarString);
            p.charset = crate::types::charset::BINARY;
            p.flags = crate::types::column_flags::BINARY;
            let def = codec::column_def(&p, false);
            for _ in 0..info.param_count {
                self.wr.send(&def).await?;
            }
            self.push_mid_eof();
        }
        if !info.columns.is_empty() {
            for c in info.columns.iter() {
                self.wr.send(&codec::column_def(c, false)).await?;
            }
            self.push_mid_eof();
        }
        let client_columns = info.columns.clone();
        self.stmts.insert(
            id,
            Stmt { info, client_columns, param_types: Vec::new(), long_data: HashMap::new(), long_data_error: None },
        );
        Ok(())
    }

    async fn com_stmt_execute(&mut self, r: &mut Reader<'_>) -> std::io::Result<()> {
        let (Some(id), Some(_flags), Some(_iterations)) = (r.u32(), r.u8(), r.u32()) else {
            return self.send_err(&params::malformed()).await;
        };
        let Some(st) = self.stmts.get_mut(&id) else {
            return self.send_err(&unknown_stmt(id, "mysqld_stmt_execute")).await;
        };
        if let Some(e) = st.long_data_error.take() {
            st.long_data.clear();
            return self.send_err(&e).await;
        }
        let decoded = params::decode_params(r, st.info.param_count as usize, &mut st.param_types, &mut st.long_data);
        let params = match decoded {
            Ok(p) => p,
            Err(e) => {
                st.long_data.clear();
                return self.send_err(&e).await;
            }
        };
        let stmt = st.info.stmt.clone();
        let backend = self.backend.clone();
        let fmt = self.stream_format(true);
        let (res, written) = {
            let Some(session) = self.session.as_mut() else { return Ok(()) };
            if session.result_sink.is_none() {
                session.result_sink = Some(self.results_tx.clone());
            }
            let entry = session.entry.clone();
            // A streamed result's columns: compared with those the client
            // holds, as `write_output` does for one built whole.
            let client_cols = self.stmts.get_mut(&id).map(|st| &mut st.client_columns);
            let exec = std::pin::pin!(backend.execute_prepared(session, &stmt, params));
            run_streaming(exec, &mut self.wr, &mut self.rd, &mut self.results_rx, fmt, client_cols, &entry).await
        };
        written?;
        match res {
            Ok(out) => {
                let mut send_defs = true;
                let cache_metadata = self.mariadb_caps & MARIADB_CACHE_METADATA != 0;
                if let (true, QueryOutput::Rows { columns, .. }, Some(st)) =
                    (cache_metadata, &out, self.stmts.get_mut(&id))
                {
                    // The columns can differ from the prepare's (a `?` whose
                    // type comes from the bound value, a table altered since):
                    // then they are sent, and the client keeps the new ones.
                    // Usually they are the very list the client holds (the
                    // plan shares it), which the pointer test finds at once.
                    if Arc::ptr_eq(&st.client_columns, columns) {
                        send_defs = false;
                    } else {
                        send_defs = *st.client_columns != **columns;
                        st.client_columns = columns.clone();
                    }
                }
                self.write_output(&out, false, true, send_defs).await
            }
            Err(e) => self.send_err(&e).await,
        }
    }
}

/// How the parts of a streamed result are written.
#[derive(Debug, Clone, Copy)]
struct StreamFormat {
    /// Prepared statement (binary rows) or text.
    binary: bool,
    deprecate_eof: bool,
    /// MariaDB's metadata cache: the column count is followed by whether
    /// the definitions follow.
    cache_metadata: bool,
    /// Server status for the EOF after the column definitions.
    status: u16,
}

/// Runs a statement (`exec`) while writing out the result it streams
/// (`engine::stream`) as it comes, and while watching for the client going
/// away. The writer takes one part at a time: a client that reads slowly
/// keeps the statement waiting for the channel's one slot (bounded
/// memory). A failed write closes the channel (the statement fails at its
/// next part, its scan closes and its rows are freed); a client that closes
/// its side while the statement runs has the session killed (KILL
/// CONNECTION), which stops any statement at its next check, streamed or
/// not. Returns the statement's output, and the error of a failed write.
async fn run_streaming<T>(
    mut exec: std::pin::Pin<&mut impl std::future::Future<Output = T>>,
    wr: &mut PacketWriter<ClientWrite>,
    rd: &mut PacketReader<BufReader<ClientRead>>,
    rx: &mut ResultReceiver,
    fmt: StreamFormat,
    mut client_cols: Option<&mut Arc<[ColumnMeta]>>,
    entry: &SessionEntry,
) -> (T, std::io::Result<()>) {
    let mut cols: Option<Arc<[ColumnMeta]>> = None;
    let mut written = Ok(());
    let mut watch = true;
    let out = loop {
        tokio::select! {
            biased;
            r = exec.as_mut() => break r,
            Some(part) = rx.recv(), if written.is_ok() => {
                if let Err(e) = write_part(wr, part, &mut cols, fmt, client_cols.as_deref_mut()).await {
                    rx.close();
                    written = Err(e);
                }
            }
            closed = rd.peer_closed(), if watch => {
                watch = false;
                if closed {
                    tracing::debug!("sqld: connection {}: the client went away during a statement", entry.id);
                    entry.request_kill(Kill::Connection);
                }
            }
        }
    };
    // Parts sent just before the statement ended.
    while let Ok(part) = rx.try_recv() {
        if written.is_ok() {
            if let Err(e) = write_part(wr, part, &mut cols, fmt, client_cols.as_deref_mut()).await {
                written = Err(e);
            }
        }
    }
    (out, written)
}

/// Writes one part of a streamed result; a batch's memory charge is
/// returned once its rows are in the output buffer (which flushes to the
/// socket as it fills, waiting for the client).
async fn write_part(
    wr: &mut PacketWriter<ClientWrite>,
    part: ResultPart,
    cols: &mut Option<Arc<[ColumnMeta]>>,
    fmt: StreamFormat,
    client_cols: Option<&mut Arc<[ColumnMeta]>>,
) -> std::io::Result<()> {
    match part {
        ResultPart::Columns(columns) => {
            let send_defs = match client_cols {
                Some(held) if fmt.cache_metadata => {
                    let same = Arc::ptr_eq(held, &columns) || **held == *columns;
                    *held = columns.clone();
                    !same
                }
                _ => true,
            };
            wr.push_with(|b| {
                codec::put_lenenc_int(b, columns.len() as u64);
                if fmt.cache_metadata {
                    b.push(send_defs as u8);
                }
            });
            if send_defs {
                for c in columns.iter() {
                    wr.send_with(|b| codec::put_column_def(b, c, false)).await?;
                }
            }
            if !fmt.deprecate_eof {
                wr.push(&codec::eof_packet(fmt.status, 0));
            }
            *cols = Some(columns);
        }
        ResultPart::Rows(rows, charge) => {
            let Some(columns) = cols.as_ref() else {
                return Err(std::io::Error::other("result rows before their columns"));
            };
            for row in &rows {
                if fmt.binary {
                    wr.send_with(|b| value::binary_row(b, row, columns)).await?;
                } else {
                    wr.send_with(|b| value::text_row(b, row, columns)).await?;
                }
            }
            drop(rows);
            drop(charge);
        }
    }
    Ok(())
}

fn unknown_stmt(id: u32, what: &str) -> SqlError {
    SqlError::new(1243, "HY000", format!("Unknown prepared statement handler ({id}) given to {what}"))
}

/// Runs a future, turning a panic in one of its polls into `Err(message)`:
/// the last line of defence of a session (see `engine::depth`), so that a
/// bug hit by one statement ends that connection, never the process. The
/// future is not polled again after it panicked.
pub struct CatchPanic<'a, F>(pub std::pin::Pin<&'a mut F>);

impl<F: std::future::Future> std::future::Future for CatchPanic<'_, F> {
    type Output = Result<F::Output, String>;
    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        let inner = self.get_mut().0.as_mut();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Ok(std::task::Poll::Ready(v)) => std::task::Poll::Ready(Ok(v)),
            Err(p) => std::task::Poll::Ready(Err(panic_message(p.as_ref()))),
        }
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_string()
    }
}

#[cfg(test)]
mod catch_panic_tests {
    use super::CatchPanic;

    #[tokio::test(flavor = "current_thread")]
    async fn a_panic_becomes_an_error_and_results_pass_through() {
        let ok = CatchPanic(std::pin::pin!(async {
            tokio::task::yield_now().await;
            7
        }))
        .await;
        assert_eq!(ok, Ok(7));
        let boom = CatchPanic(std::pin::pin!(async {
            tokio::task::yield_now().await;
            if std::hint::black_box(true) {
                panic!("boom {}", 1);
            }
            7
        }))
        .await;
        assert_eq!(boom, Err("boom 1".to_string()));
    }
}
