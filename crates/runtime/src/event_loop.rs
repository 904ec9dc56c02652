//! The single event-loop thread of a data node (thread layout `threads: 1`).
//!
//! One round of the loop:
//! 1. poll the sockets (timeout: 0 if work is ready, else the next timer's due
//!    time, else forever; a waker interrupts it for shutdown). Before a poll
//!    that would block, the loop spins on zero-timeout polls for up to
//!    `Knobs::idle_spin_us` (see `poll_events`);
//! 2. accept new connections, read readable ones, decode and validate frames and
//!    deliver their signals into the scheduler;
//! 3. advance the scheduler's clock to the real monotonic clock (queues due
//!    delayed signals) and run at most `max_signals_per_poll` signals;
//! 4. route the signals addressed to API nodes into their connections' send
//!    buffers and write them out as the adaptive send policy says;
//! 5. close connections that ended, delivering `ApiFailReq` to TC and DICT.
//!
//! In-process API nodes (`DataNodeHandle::local_connector`) are connections
//! like the others, with an in-memory pipe for a socket: mio does not see
//! them; their pipes report activity through `LocalReady`, which the loop
//! looks at every round (step 2) and which wakes it only when it is blocked
//! in poll.
//!
//! Before the loop blocks in poll it always writes every pending byte: poll has
//! millisecond resolution, far above the microseconds the send policy may wait,
//! so coalescing only happens while the loop is busy anyway (first a poll with
//! timeout 0 looks for more work to batch with).
//!
//! Connection life cycle: the first frame must be a handshake `Hello` with our
//! magic and wire version, else `Refused` and close. With a cluster secret
//! (`RuntimeOptions::api_secret`) the node answers `Challenge` and the next
//! frame must be the proof (`norr_transport::auth`): anything else, or a
//! wrong proof, is `Refused` and closed, logged with the peer's address.
//! With accounts (`RuntimeOptions::api_accounts`) a native client may answer
//! with a SQL account's login instead (`event_loop::account_login`).
//! Then the node assigns an API node id and replies `Welcome`. Every later frame must be one well-formed
//! wire message carrying a signal an API node may send (`allowed_from_api`),
//! addressed to a block of this node; anything else (malformed, oversized, bad
//! checksum, forged internal signal, another node) is logged and the connection
//! closed. The envelope's sender is overwritten with the connection's own API
//! block reference and its priority forced to B, so a client can neither pose as
//! another client nor jump the queue. When the B job buffer is full the
//! connection is not read until there is room (back-pressure, nothing dropped).
//!
//! Limits per connection (issue 22), so no client can make the node hold
//! unbounded memory or every connection slot:
//! * Slow readers: a connection whose unsent replies reach
//!   `Knobs::send_buffer_pause_bytes` is not read until its peer has read
//!   them down to half of that (`Conn::send_paused`; TCP then stops the
//!   peer's sends). A connection is also read only once every request it sent
//!   earlier has left job buffer B (`Conn::queued_until`), so what a paused
//!   connection still gets is the replies to one round's reading. Its peer is
//!   disconnected only if those replies alone reach `max_send_buffer_bytes`
//!   (a pipelined burst of requests for very large rows).
//! * Pipelining clients: a native client's connection is not read while
//!   `MAX_OUTSTANDING_REQUESTS` of its requests are unanswered (until half
//!   are): each can hold a TC transaction record, and a few clients that
//!   pipeline without reading took every record from the SQL nodes (4006).
//! * Silent connections: past the handshake, a connection must send its
//!   first request within `Knobs::api_first_request_timeout_ms`, else it is
//!   closed (`first_request_deadlines`), so Hello-then-nothing connections
//!   cannot hold API node ids.
//! * Reserved slots: the `Hello` says what connects (`ApiKind`); native
//!   clients get at most `max_api_connections - reserved_api_connections`
//!   API node ids, the rest are kept for SQL nodes and management servers
//!   (`ApiIdPool`).

mod account_login;
mod peers;

/// Requests a native client may have open at once on one connection (see
/// `Conn::outstanding`). SQL nodes and management servers are not bounded:
/// they multiplex many sessions and are trusted.
pub const MAX_OUTSTANDING_REQUESTS: u32 = 1024;

pub(crate) use peers::PeerNet;

use crate::conn::{ApiIdPool, CloseReason, Conn, NoId, PendingAuth};
use crate::fs::FsCompletions;
use crate::host::{Arbitrator, HostQueue, Inbox};
use crate::local_link::LocalReady;
use crate::stream::{Peer, Stream};
use crate::{DataNodeConfig, RuntimeOptions, RuntimeStats};
use mio::net::{TcpListener, UnixListener};
use mio::{Events, Interest, Poll, Token};
use norr_kernel::{BlockRef, DeliverError, NodeId, Priority, Scheduler};
use norr_signals::cluster::{ClusterSignal, ShutdownReason};
use norr_signals::{block, wire, Envelope, Signal};
use norr_transport::auth;
use norr_transport::handshake::ApiKind;
use norr_transport::handshake::{self, HelloReply};
use norr_transport::AdaptiveSendConfig;
use std::collections::{HashMap, VecDeque};
use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::{debug, info, warn};

pub(crate) const LISTENER: Token = Token(0);
pub(crate) const WAKER: Token = Token(1);
const UNIX_LISTENER: Token = Token(2);
const FIRST_CONN: usize = 3;
/// Connections accepted beyond `max_api_connections` (so that a client over the
/// limit gets a `Refused` rather than a reset).
const EXTRA_CONNS: usize = 16;
const READ_CHUNK: usize = 64 * 1024;
/// Most bytes a connection may have buffered before its handshake completes
/// (a `Hello` is tens of bytes): a stranger cannot make the node buffer a
/// maximum-size frame.
const MAX_HELLO_BYTES: usize = 64 * 1024;

/// True if a connection's first frame is a data node's hello.
fn peer_handshake_frame(frame: &[u8]) -> bool {
    norr_transport::peer_handshake::is_peer_hello(frame)
}

/// What the loop shares with the node's handle and other threads.
pub(crate) struct LoopShared {
    pub stop: Arc<AtomicBool>,
    pub stats: Arc<std::sync::Mutex<RuntimeStats>>,
    pub local: Arc<LocalReady>,
    /// Completions of the FS block's IO thread (None: no data directory).
    pub fs: Option<Arc<FsCompletions>>,
    /// What the node's blocks asked of their host (`HostBlock`).
    pub host_queue: HostQueue,
    pub inbox: Inbox,
    /// Cluster nodes: the other data nodes and the arbitrator.
    pub peers: Option<PeerNet>,
    pub arbitrator: Option<Arc<dyn Arbitrator>>,
    /// The node's status as its DIH last reported it, and leave refusals.
    pub status: Arc<std::sync::Mutex<crate::host::HostReports>>,
}

/// Why the event loop ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeExit {
    /// Asked to stop (Ctrl-C, `DataNodeHandle::shutdown`).
    Stopped,
    /// A block asked the host to stop the node (lost arbitration, excluded
    /// by the cluster, ...); `restart`: start it again as a node restart.
    Shutdown { reason: ShutdownReason, restart: bool },
}

pub(crate) struct EventLoop {
    node_id: NodeId,
    knobs: norr_knobs::Knobs,
    opts: RuntimeOptions,
    send_cfg: AdaptiveSendConfig,
    sched: Scheduler<Signal>,
    /// Bound of the scheduler's B buffer as the host believes it (learned down
    /// if the scheduler refuses earlier).
    job_b_bound: usize,
    poll: Poll,
    listener: TcpListener,
    /// Accepts API nodes on this host (`RuntimeOptions::unix_socket`).
    unix_listener: Option<UnixListener>,
    stop: Arc<AtomicBool>,
    start: Instant,
    conns: Vec<Option<Conn>>,
    free_slots: Vec<usize>,
    live_conns: usize,
    /// Of `live_conns`, those through in-process links: with no others, the
    /// loop does not spin when idle (`poll_events`).
    local_conns: usize,
    /// API node id -> connection slot.
    api_slots: HashMap<NodeId, usize>,
    ids: ApiIdPool,
    /// Slots with bytes to send.
    dirty: Vec<usize>,
    /// Slots with something to do without a socket event (stalled or unread).
    pending_read: Vec<usize>,
    /// Slots marked for closing this round.
    closing: Vec<usize>,
    remote: Vec<Envelope>,
    read_buf: Box<[u8]>,
    /// The last poll was a zero-timeout look for more work before blocking.
    probed: bool,
    /// `AccountDirectory::generation` whose grants TC and DICT were last
    /// given (`account_login::refresh_grants`).
    grants_generation: u64,
    next_serial: u64,
    /// (deadline_ns, slot, serial) of connections not yet past the handshake,
    /// in deadline order (deadlines are accept time + a constant).
    handshake_deadlines: VecDeque<(u64, usize, u64)>,
    /// (deadline_ns, slot, serial) of connections past the handshake that
    /// may not have sent a request yet, in deadline order (handshake time +
    /// `api_first_request_timeout_ms`).
    first_request_deadlines: VecDeque<(u64, usize, u64)>,
    /// `Knobs::send_buffer_pause_bytes`: a connection with this many unsent
    /// bytes is not read; it is read again at half of it.
    send_pause_bytes: usize,
    stats: RuntimeStats,
    shared_stats: Arc<std::sync::Mutex<RuntimeStats>>,
    /// In-process API nodes: their activity and new connections.
    local: Arc<LocalReady>,
    local_tokens: Vec<usize>,
    local_accepts: Vec<norr_transport::local_pipe::NodeEnd>,
    /// FS completions (see `deliver_fs_completions`).
    fs: Option<Arc<FsCompletions>>,
    fs_buf: Vec<Envelope>,
    host_queue: HostQueue,
    inbox: Inbox,
    peers: Option<PeerNet>,
    arbitrator: Option<Arc<dyn Arbitrator>>,
    /// Set when a block asked the host to stop the node.
    exit: Option<NodeExit>,
    status: Arc<std::sync::Mutex<crate::host::HostReports>>,
}

impl EventLoop {
    pub fn new(
        cfg: DataNodeConfig,
        opts: RuntimeOptions,
        sched: Scheduler<Signal>,
        poll: Poll,
        (mut listener, mut unix_listener): (TcpListener, Option<UnixListener>),
        LoopShared { stop, stats: shared_stats, local, host_queue, inbox, peers, arbitrator, status, fs }: LoopShared,
    ) -> io::Result<EventLoop> {
        poll.registry().register(&mut listener, LISTENER, Interest::READABLE)?;
        if let Some(l) = unix_listener.as_mut() {
            poll.registry().register(l, UNIX_LISTENER, Interest::READABLE)?;
        }
        Ok(EventLoop {
            node_id: cfg.node_id,
            send_cfg: AdaptiveSendConfig::from_knobs(&cfg.knobs),
            job_b_bound: cfg.knobs.job_buffer_bound,
            ids: ApiIdPool::new(cfg.knobs.max_api_connections, cfg.knobs.reserved_api_connections),
            send_pause_bytes: cfg.knobs.send_buffer_pause_bytes,
            knobs: cfg.knobs,
            opts,
            sched,
            poll,
            listener,
            unix_listener,
            stop,
            start: Instant::now(),
            conns: Vec::new(),
            free_slots: Vec::new(),
            live_conns: 0,
            local_conns: 0,
            api_slots: HashMap::new(),
            dirty: Vec::new(),
            pending_read: Vec::new(),
            closing: Vec::new(),
            remote: Vec::new(),
            read_buf: vec![0u8; READ_CHUNK].into_boxed_slice(),
            probed: false,
            grants_generation: 0,
            next_serial: 0,
            handshake_deadlines: VecDeque::new(),
            first_request_deadlines: VecDeque::new(),
            stats: RuntimeStats::default(),
            shared_stats,
            local,
            local_tokens: Vec::new(),
            local_accepts: Vec::new(),
            fs,
            fs_buf: Vec::new(),
            host_queue,
            inbox,
            peers,
            arbitrator,
            exit: None,
            status,
        })
    }

    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Poll for events. A poll that may block is preceded by a bounded spin
    /// of zero-timeout polls (`idle_spin_us`): on an idle machine the
    /// kernel's wake-up of a sleeping thread costs tens of microseconds, more
    /// than a whole request takes, and the next request of a client in a
    /// request/response loop usually arrives within a round trip.
    ///
    /// The spin is for socket connections only. While every connection is an
    /// in-process link (`norr up`), the loop blocks at once: its SQL node
    /// already spins for replies (`--reply-spin-us`), and a second spinner on
    /// the same few cores takes CPU from the SQL clients. Measured under
    /// `norr up` on 2 vCPUs (bench/RESULTS.md, 2026-11-23 22:42 UTC): no data
    /// node spin gave 69-76k point selects/s at 12.7-14.1 us of server CPU
    /// each, spinning 66-71k at 16.3-17.3 us.
    fn poll_events(&mut self, events: &mut Events, timeout: Option<Duration>) -> io::Result<()> {
        let spin = Duration::from_micros(self.knobs.idle_spin_us);
        if timeout == Some(Duration::ZERO) {
            return self.poll.poll(events, timeout);
        }
        if spin.is_zero() || self.live_conns == self.local_conns {
            return self.poll_blocking(events, timeout);
        }
        let start = Instant::now();
        let spin = timeout.map_or(spin, |t| t.min(spin));
        loop {
            self.stats.spin_socket_polls += 1;
            self.poll.poll(events, Some(Duration::ZERO))?;
            if !events.is_empty() || self.local.has_work() || self.fs_has_work() || self.stop.load(Ordering::Relaxed) {
                self.stats.spin_hits += 1;
                return Ok(());
            }
            let spent = start.elapsed();
            if spent >= spin {
                self.stats.spin_misses += 1;
                return self.poll_blocking(events, timeout.map(|t| t.saturating_sub(spent)));
            }
            std::hint::spin_loop();
        }
    }

    /// A poll that may block: in-process API nodes are told to wake the loop
    /// through the waker for as long as it may be blocked.
    fn poll_blocking(&mut self, events: &mut Events, timeout: Option<Duration>) -> io::Result<()> {
        let may_block = self.local.park();
        let r = self.poll.poll(events, if may_block { timeout } else { Some(Duration::ZERO) });
        self.local.unpark();
        r
    }

    pub fn run(&mut self) -> io::Result<NodeExit> {
        let mut events = Events::with_capacity(1024);
        self.send_to_qmgr(ClusterSignal::QmgrStartReq { kind: norr_signals::cluster::StartKind::Initial });
        while !self.stop.load(Ordering::SeqCst) && self.exit.is_none() {
            let timeout = self.poll_timeout();
            if let Err(e) = self.poll_events(&mut events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            self.refresh_grants();
            if self.probed && events.is_empty() {
                // Nothing more to batch with: send everything before blocking.
                self.flush_all(true);
            }
            self.probed = false;
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept_all()?,
                    UNIX_LISTENER => self.accept_all_unix(),
                    WAKER => {} // stop, or in-process API nodes: looked at below
                    Token(t) => {
                        let slot = t - FIRST_CONN;
                        if ev.is_writable() {
                            self.write_conn(slot);
                        }
                        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                            self.read_conn(slot);
                        }
                    }
                }
            }
            self.service_local();
            self.deliver_fs_completions();
            self.step();
        }
        info!(node = self.node_id, connections = self.live_conns, "data node stopping");
        self.local.stop();
        for slot in 0..self.conns.len() {
            if let Some(mut c) = self.conns[slot].take() {
                let _ = c.send.write_to(&mut c.stream);
                let _ = self.poll.registry().deregister(&mut c.stream);
            }
        }
        Ok(self.exit.take().unwrap_or(NodeExit::Stopped))
    }

    /// One round after the socket events: retry paused connections, run the
    /// blocks, route and send their output, close ended connections.
    fn step(&mut self) {
        let now = self.now_ns();
        self.sched.advance_to(now);
        self.expire_handshakes(now);
        self.expire_first_requests(now);
        // Connections that paused (job buffer full) or have unread bytes.
        if !self.pending_read.is_empty() {
            let pending = std::mem::take(&mut self.pending_read);
            for slot in pending {
                self.read_conn(slot);
            }
        }
        if self.inbox.has_work() {
            for env in self.inbox.take() {
                if let Err(e) = self.sched.deliver(env) {
                    warn!(?e, "a signal from a helper thread was not taken");
                }
            }
        }
        if self.peers.is_some() {
            self.dial_peers(now);
        }
        self.ids.before_run();
        self.run_blocks();
        self.host_requests();
        self.route_remote();
        self.close_marked();
        self.ids.after_run(!self.sched.has_ready(), self.sched.stats().executed);
        self.flush_all(false);
        self.close_marked();
        if let Ok(mut s) = self.shared_stats.lock() {
            if *s != self.stats {
                s.clone_from(&self.stats);
            }
        }
    }

    /// FS completions wait.
    fn fs_has_work(&self) -> bool {
        self.fs.as_ref().is_some_and(|f| f.has_work())
    }

    /// Hand the FS IO thread's completions to the scheduler (FS hook; see
    /// `fs.rs`). The IO thread wakes the loop through the mio waker when a
    /// first completion arrives, so a loop blocked in poll sees it at once.
    /// A completion is never dropped: when the B job buffer is at its bound
    /// it goes on A (never refused) rather than wait, since the block that
    /// asked has already committed to the work.
    fn deliver_fs_completions(&mut self) {
        let Some(fs) = self.fs.as_ref() else { return };
        if !fs.has_work() {
            return;
        }
        fs.take(&mut self.fs_buf);
        let mut buf = std::mem::take(&mut self.fs_buf);
        for mut env in buf.drain(..) {
            if self.sched.job_b_len() + 1 >= self.job_b_bound {
                env.prio = Priority::A;
            }
            match self.sched.deliver(env) {
                Ok(()) => {}
                Err(e) => tracing::error!(
                    ?e,
                    "FS completion not delivered: the scheduler's B bound is below job_buffer_bound, or no such block"
                ),
            }
        }
        self.fs_buf = buf;
    }

    /// Take new in-process connections and read (and write) the ones whose
    /// pipes reported activity.
    fn service_local(&mut self) {
        if !self.local.has_work() {
            return;
        }
        self.local.take(&mut self.local_tokens, &mut self.local_accepts);
        let mut accepts = std::mem::take(&mut self.local_accepts);
        for end in accepts.drain(..) {
            if let Some(slot) = self.add_conn(Stream::Local(end), Peer::Local) {
                if let Some(Stream::Local(e)) = self.conns[slot].as_ref().map(|c| &c.stream) {
                    e.set_token(slot + FIRST_CONN);
                }
                // Bytes written before the token was set woke nobody.
                self.read_conn(slot);
            }
        }
        self.local_accepts = accepts;
        let mut tokens = std::mem::take(&mut self.local_tokens);
        for t in tokens.drain(..) {
            let slot = t - FIRST_CONN;
            let Some(c) = self.conns.get(slot).and_then(|c| c.as_ref()) else { continue };
            // A token may be stale: its connection closed and the slot reused.
            let Stream::Local(e) = &c.stream else { continue };
            e.take_wake();
            if c.write_interest {
                self.write_conn(slot);
            }
            self.read_conn(slot);
        }
        self.local_tokens = tokens;
    }

    fn poll_timeout(&mut self) -> Option<Duration> {
        if self.sched.has_ready()
            || !self.pending_read.is_empty()
            || !self.closing.is_empty()
            || self.local.has_work()
            || self.fs_has_work()
            || self.inbox.has_work()
        {
            return Some(Duration::ZERO);
        }
        if !self.dirty.is_empty() {
            if !self.probed {
                self.probed = true;
                return Some(Duration::ZERO);
            }
            self.flush_all(true);
            self.close_marked();
            if !self.pending_read.is_empty() {
                // The flush let a paused connection be read again
                // (`write_conn`): its bytes are in the socket already, and
                // no event will say so.
                return Some(Duration::ZERO);
            }
        }
        let handshake_due = match (self.handshake_deadlines.front(), self.first_request_deadlines.front()) {
            (Some(a), Some(b)) => Some(a.0.min(b.0)),
            (a, b) => a.or(b).map(|d| d.0),
        };
        let due = match (self.sched.next_timer_ns(), handshake_due) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let dial = self.peers.as_ref().and_then(|p| p.next_dial_ns());
        let due = match (due, dial) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        due.map(|due| Duration::from_nanos(due.saturating_sub(self.now_ns())))
    }

    /// Close connections that did not complete the handshake in time.
    fn expire_handshakes(&mut self, now: u64) {
        while let Some(&(deadline, slot, serial)) = self.handshake_deadlines.front() {
            if deadline > now {
                break;
            }
            self.handshake_deadlines.pop_front();
            let Some(c) = self.conns[slot].as_ref() else { continue };
            if c.serial == serial && c.api_node.is_none() && c.data_peer.is_none() {
                warn!(peer = %c.peer, "no handshake within {} ms; closing connection", self.opts.handshake_timeout_ms);
                self.mark_close(slot, CloseReason::Protocol("handshake timed out".into()));
            }
        }
    }

    /// Close connections that completed the handshake but sent no request
    /// within `api_first_request_timeout_ms`.
    fn expire_first_requests(&mut self, now: u64) {
        while let Some(&(deadline, slot, serial)) = self.first_request_deadlines.front() {
            if deadline > now {
                break;
            }
            self.first_request_deadlines.pop_front();
            let Some(c) = self.conns[slot].as_ref() else { continue };
            if c.serial == serial && !c.sent_request && c.close.is_none() {
                let ms = self.knobs.api_first_request_timeout_ms;
                warn!(peer = %c.peer, api_node = ?c.api_node, "no request within {ms} ms of the handshake; closing connection");
                self.stats.first_request_timeouts += 1;
                self.mark_close(slot, CloseReason::NoFirstRequest(ms));
            }
        }
    }

    /// Signals taken from job buffer B so far. B is FIFO and a signal leaves
    /// it only to be executed, and the scheduler counts what it executes from
    /// A and from the bounded-delay queue apart, so the rest came from B.
    fn b_taken(&self) -> u64 {
        let s = self.sched.stats();
        s.executed - s.executed_a - s.executed_bounded
    }

    fn accept_all(&mut self) -> io::Result<()> {
        loop {
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    if let Err(e) = stream.set_nodelay(true) {
                        warn!(%peer, "set TCP_NODELAY failed: {e}");
                    }
                    let _ = self.add_conn(Stream::Tcp(stream), Peer::Tcp(peer));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // Transient accept errors (EMFILE, ECONNABORTED...) must not stop the node.
                Err(e) => {
                    warn!("accept failed: {e}");
                    return Ok(());
                }
            }
        }
    }

    fn mark_close(&mut self, slot: usize, r: CloseReason) {
        if let Some(c) = self.conns[slot].as_mut() {
            if c.close.is_none() {
                c.mark_close(r);
                self.closing.push(slot);
            }
        }
    }

    fn accept_all_unix(&mut self) {
        loop {
            let Some(l) = self.unix_listener.as_ref() else { return };
            match l.accept() {
                Ok((stream, _)) => {
                    let _ = self.add_conn(Stream::Unix(stream), Peer::Unix);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // Transient accept errors (EMFILE...) must not stop the node.
                Err(e) => {
                    warn!("accept on the unix socket failed: {e}");
                    return;
                }
            }
        }
    }

    /// Take a new connection into a slot, waiting for its handshake. Returns
    /// the slot (`None`: closed at once).
    fn add_conn(&mut self, stream: Stream, peer: Peer) -> Option<usize> {
        if self.live_conns >= self.ids.capacity() + EXTRA_CONNS {
            warn!(%peer, "too many connections: closing new connection at once");
            return None;
        }
        let (slot, conn) = self.open_conn_slot(stream, peer, Interest::READABLE)?;
        debug_assert!(self.conns[slot].is_none());
        self.local_conns += usize::from(matches!(conn.stream, Stream::Local(_)));
        self.conns[slot] = Some(conn);
        self.live_conns += 1;
        self.stats.connections_accepted += 1;
        debug!(%peer, slot, "connection accepted");
        Some(slot)
    }
    /// A free slot for `stream`, registered with the poll for `interest`,
    /// and its connection waiting for the handshake (deadline set). Shared
    /// by accepted API connections and dialed data node connections; the
    /// caller puts the connection into the slot. `None`: registration failed.
    pub(super) fn open_conn_slot(
        &mut self,
        mut stream: Stream,
        peer: Peer,
        interest: Interest,
    ) -> Option<(usize, Conn)> {
        let slot = match self.free_slots.pop() {
            Some(s) => s,
            None => {
                self.conns.push(None);
                self.conns.len() - 1
            }
        };
        if let Err(e) = self.poll.registry().register(&mut stream, Token(slot + FIRST_CONN), interest) {
            warn!(%peer, "registering connection failed: {e}");
            self.free_slots.push(slot);
            return None;
        }
        let now = self.now_ns();
        let policy = norr_transport::AdaptiveSend::new(self.send_cfg, now);
        let serial = self.next_serial;
        self.next_serial += 1;
        let deadline = now.saturating_add(self.opts.handshake_timeout_ms.saturating_mul(1_000_000));
        self.handshake_deadlines.push_back((deadline, slot, serial));
        let conn =
            Conn::new(serial, stream, peer, self.knobs.max_frame_bytes, self.knobs.max_send_buffer_bytes, policy);
        Some((slot, conn))
    }

    /// Read what the socket has (up to the round's budget), handling each
    /// complete frame as it arrives.
    fn read_conn(&mut self, slot: usize) {
        let (b_taken, b_len) = (self.b_taken(), self.sched.job_b_len());
        let Some(c) = self.conns.get_mut(slot).and_then(|c| c.as_mut()) else {
            return;
        };
        // Taken off the pending list (or called for a socket event): a path
        // that leaves bytes unread puts it back (`read_more` says it is on it).
        c.read_more = false;
        if c.send_paused || c.outstanding_paused {
            // Its peer does not read its replies (`write_conn` resumes it), or
            // has too many requests open (`route_remote` resumes it).
            return;
        }
        if b_len > 0 && b_taken < c.queued_until && c.data_peer.is_none() {
            // Its earlier requests still wait in job buffer B (the node is
            // busy): read it once they have left, so a connection never has
            // more than one round's requests queued (which bounds the replies
            // a paused connection can still get). B empty: nothing of it waits.
            c.read_more = true;
            self.pending_read.push(slot);
            return;
        }
        let mut budget = self.opts.max_read_bytes_per_round;
        loop {
            if !self.handle_frames(slot) {
                return; // stalled or closing
            }
            let Some(c) = self.conns.get_mut(slot).and_then(|c| c.as_mut()) else {
                return;
            };
            if c.api_node.is_none() && c.data_peer.is_none() && c.decoder.buffered_len() > MAX_HELLO_BYTES {
                warn!(peer = %c.peer, "handshake frame larger than {MAX_HELLO_BYTES} bytes; closing connection");
                self.mark_close(slot, CloseReason::Protocol("oversized handshake".into()));
                return;
            }
            if budget == 0 {
                if !c.read_more {
                    c.read_more = true;
                    self.pending_read.push(slot);
                }
                return;
            }
            let want = budget.min(self.read_buf.len());
            match c.stream.read(&mut self.read_buf[..want]) {
                Ok(0) => {
                    self.mark_close(slot, CloseReason::Eof);
                    return;
                }
                Ok(n) => {
                    c.decoder.push(&self.read_buf[..n]);
                    budget -= n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.mark_close(slot, CloseReason::Io(e.to_string()));
                    return;
                }
            }
        }
    }

    /// Handle the complete frames buffered on a connection. Returns false if the
    /// connection must not be read now (stalled on a full job buffer, or closing).
    fn handle_frames(&mut self, slot: usize) -> bool {
        let Some(c) = self.conns.get_mut(slot).and_then(|c| c.as_mut()) else {
            return false;
        };
        if c.close.is_some() {
            return false;
        }
        c.read_more = false;
        // A signal refused earlier goes first.
        if let Some(env) = c.stalled.take() {
            if let Err(env) = self.try_deliver(slot, env) {
                self.pause(slot, env);
                return false;
            }
        }
        loop {
            let Some(c) = self.conns[slot].as_mut() else {
                return false;
            };
            if c.close.is_some() {
                return false;
            }
            let frame = match c.decoder.next_frame() {
                Ok(Some(f)) => f,
                Ok(None) => return true,
                Err(e) => {
                    let peer = c.peer;
                    warn!(%peer, api_node = ?c.api_node, "bad frame: {e}; closing connection");
                    self.mark_close(slot, CloseReason::Protocol(e.to_string()));
                    return false;
                }
            };
            if let Some(node) = c.data_peer {
                let frame = frame.to_vec();
                if !self.on_peer_frame(slot, node, &frame) {
                    return false;
                }
                continue;
            }
            if let Some(node) = c.dialed_peer {
                let frame = frame.to_vec();
                self.on_peer_reply(slot, node, &frame);
                continue;
            }
            let Some(api_node) = c.api_node else {
                if c.auth.is_some() {
                    // Challenged: only the answer may come now.
                    let frame = frame.to_vec();
                    self.on_auth_response(slot, &frame);
                    continue;
                }
                if c.peer_auth.is_some() {
                    let frame = frame.to_vec();
                    self.on_peer_auth_response(slot, &frame);
                    continue;
                }
                if peer_handshake_frame(frame) {
                    let frame = frame.to_vec();
                    self.on_peer_hello(slot, &frame);
                    continue;
                }
                let hello = handshake::decode_hello(frame);
                self.on_hello(slot, hello);
                continue;
            };
            let decoded = wire::decode(frame);
            let peer = c.peer;
            let mut env = match decoded {
                Ok(env) => env,
                Err(e) => {
                    warn!(%peer, api_node, "undecodable message: {e}; closing connection");
                    self.mark_close(slot, CloseReason::Protocol(e.to_string()));
                    return false;
                }
            };
            if !env.signal.allowed_from_api() {
                warn!(%peer, api_node, signal = env.signal.name(), "signal not allowed from an API node; closing connection");
                self.mark_close(slot, CloseReason::Protocol(format!("{} not allowed from API", env.signal.name())));
                return false;
            }
            if env.to.node != self.node_id || !self.sched.has_block(env.to) {
                warn!(%peer, api_node, to = %env.to, "message addressed to no block of this node; closing connection");
                self.mark_close(slot, CloseReason::Protocol(format!("bad destination {}", env.to)));
                return false;
            }
            env.from = BlockRef::new(api_node, block::API, 0);
            env.prio = Priority::B;
            c.sent_request = true;
            let bounded = c.kind == ApiKind::NativeClient;
            if let Err(env) = self.try_deliver(slot, env) {
                self.pause(slot, env);
                return false;
            }
            if bounded {
                let Some(c) = self.conns[slot].as_mut() else { return false };
                c.outstanding += 1;
                if c.outstanding >= MAX_OUTSTANDING_REQUESTS {
                    // The rest of what it sent waits in the socket (TCP then
                    // stops it) until replies come out.
                    c.outstanding_paused = true;
                    self.stats.outstanding_pauses += 1;
                    debug!(peer = %c.peer, api_node, "client has {MAX_OUTSTANDING_REQUESTS} requests open: reading from it paused");
                    return false;
                }
            }
        }
    }

    /// Deliver, or hand the signal back if the B job buffer is full.
    fn try_deliver(&mut self, slot: usize, env: Envelope) -> Result<(), Envelope> {
        if self.sched.job_b_len() >= self.job_b_bound {
            return Err(env);
        }
        match self.sched.deliver(env) {
            Ok(()) => {
                self.stats.signals_in += 1;
                // It sits last in B: it has left B once this many were taken.
                let until = self.b_taken() + self.sched.job_b_len() as u64;
                if let Some(c) = self.conns[slot].as_mut() {
                    c.queued_until = until;
                }
                Ok(())
            }
            Err(DeliverError::Overloaded) => {
                // The scheduler's bound is lower than the knob said: learn it. The
                // refused signal is gone, so the client must not go on as if it
                // had been delivered.
                self.job_b_bound = self.sched.job_b_len().max(1);
                warn!(bound = self.job_b_bound, "scheduler refused a signal below the configured job buffer bound");
                self.mark_close(slot, CloseReason::Io("signal lost to an unexpected job buffer bound".into()));
                Ok(())
            }
            Err(DeliverError::UnknownBlock(to)) => {
                self.mark_close(slot, CloseReason::Protocol(format!("unknown block {to}")));
                Ok(())
            }
        }
    }

    fn pause(&mut self, slot: usize, env: Envelope) {
        let Some(c) = self.conns[slot].as_mut() else { return };
        debug_assert!(c.stalled.is_none());
        c.stalled = Some(env);
        self.stats.stalls += 1;
        if !c.read_more {
            c.read_more = true;
            self.pending_read.push(slot);
        }
    }

    /// Answer a connection's handshake with `Refused` and close it.
    fn refuse_hello(&mut self, slot: usize, reason: String) {
        let c = self.conns[slot].as_mut().expect("live connection");
        warn!(peer = %c.peer, "handshake refused: {reason}");
        let reply = handshake::encode_reply(&HelloReply::Refused { reason: reason.clone() });
        let _ = c.send.push_frame(&reply);
        self.mark_close(slot, CloseReason::Refused(reason));
    }

    fn on_hello(&mut self, slot: usize, hello: Result<handshake::Hello, String>) {
        let refuse = |this: &mut EventLoop, reason: String| this.refuse_hello(slot, reason);
        let hello = match hello {
            Ok(h) => h,
            Err(e) => return refuse(self, e),
        };
        if hello.wire_version != wire::WIRE_VERSION {
            return refuse(
                self,
                format!("wire version {} not supported (this node speaks {})", hello.wire_version, wire::WIRE_VERSION),
            );
        }
        if self.opts.api_secret.is_some() {
            // No API node id (nor anything else) before the proof.
            let nonce = match auth::new_nonce() {
                Ok(n) => n,
                Err(e) => return refuse(self, e),
            };
            let now = self.now_ns();
            let reply = HelloReply::Challenge { nonce, data_node: self.node_id };
            let c = self.conns[slot].as_mut().expect("live connection");
            debug!(peer = %c.peer, client = %hello.client_name, kind = %hello.kind, "challenged for the cluster secret");
            c.auth = Some(PendingAuth { nonce, hello });
            let r = c.send.push_frame(&handshake::encode_reply(&reply));
            debug_assert!(r.is_ok(), "a handshake reply fits any send buffer");
            c.policy.on_queued(now);
            self.mark_dirty(slot);
            return;
        }
        self.admit(slot, hello);
    }

    /// A challenged connection's answer: admitted if it proves the cluster
    /// secret (or, with accounts, logs in with one: `account_login`), else
    /// refused (and logged here, with the peer's address).
    fn on_auth_response(&mut self, slot: usize, frame: &[u8]) {
        let c = self.conns[slot].as_mut().expect("live connection");
        let peer = c.peer;
        let Some(pending) = c.auth.take() else { return };
        let Some(secret) = self.opts.api_secret.as_ref() else { return };
        let account = norr_transport::account_auth::is_login(frame);
        let refusal = if account {
            self.account_login_refusal(slot, peer, &pending, frame)
        } else {
            match auth::decode_auth_response(frame) {
                Err(e) => Some(format!("authentication failed: {e}")),
                Ok(r) if !auth::verify(secret, &pending.nonce, &auth::api_context(self.node_id, &pending.hello), &r) => {
                    Some(
                        "authentication failed: wrong cluster secret (the proof does not match this data node's secret)"
                            .to_string(),
                    )
                }
                Ok(_) => None,
            }
        };
        match refusal {
            Some(reason) => {
                self.stats.auth_refusals += 1;
                warn!(
                    %peer,
                    client = %pending.hello.client_name,
                    kind = %pending.hello.kind,
                    "refusing an API connection that did not prove {}",
                    if account { "an account's password" } else { "the cluster secret" }
                );
                self.refuse_hello(slot, reason);
            }
            None => self.admit(slot, pending.hello),
        }
    }

    /// Give a connection whose Hello was accepted (and, with a secret,
    /// whose proof was checked) an API node id, and welcome it.
    fn admit(&mut self, slot: usize, hello: handshake::Hello) {
        let refuse = |this: &mut EventLoop, reason: String| this.refuse_hello(slot, reason);
        let peer = self.conns[slot].as_ref().expect("live connection").peer;
        let api_node = match self.ids.alloc_for(hello.requested_api_node, hello.kind) {
            Ok(id) => id,
            Err(NoId::Full) => {
                return refuse(
                    self,
                    format!("too many API connections (max_api_connections = {})", self.ids.capacity()),
                )
            }
            Err(NoId::NativeLimit) => {
                return refuse(
                    self,
                    format!(
                        "too many native client connections ({} of max_api_connections = {}; reserved_api_connections = {} are kept for SQL nodes and management servers)",
                        self.ids.native_limit(),
                        self.ids.capacity(),
                        self.ids.capacity() - self.ids.native_limit()
                    ),
                )
            }
            Err(NoId::Requested(id, why)) => return refuse(self, format!("API node id {id} {why}")),
        };
        let reply = HelloReply::Welcome {
            api_node,
            data_node: self.node_id,
            wire_version: wire::WIRE_VERSION,
            tc_instances: self.sched.instances(block::TC),
        };
        let now = self.now_ns();
        let c = self.conns[slot].as_mut().expect("live connection");
        c.api_node = Some(api_node);
        c.kind = hello.kind;
        let deadline = now.saturating_add(self.knobs.api_first_request_timeout_ms.saturating_mul(1_000_000));
        self.first_request_deadlines.push_back((deadline, slot, c.serial));
        let r = c.send.push_frame(&handshake::encode_reply(&reply));
        debug_assert!(r.is_ok(), "a handshake reply fits any send buffer");
        c.policy.on_queued(now);
        self.api_slots.insert(api_node, slot);
        self.mark_dirty(slot);
        self.send_grants(slot);
        info!(%peer, api_node, client = %hello.client_name, kind = %hello.kind, "API node connected");
    }

    fn mark_dirty(&mut self, slot: usize) {
        if let Some(c) = self.conns[slot].as_mut() {
            if !c.in_dirty {
                c.in_dirty = true;
                self.dirty.push(slot);
            }
        }
    }

    /// Move the scheduler's outgoing signals into their connections' send buffers.
    fn route_remote(&mut self) {
        self.sched.drain_remote_into(&mut self.remote);
        if self.remote.is_empty() {
            return;
        }
        let now = self.now_ns();
        let mut remote = std::mem::take(&mut self.remote);
        for env in remote.drain(..) {
            let peer_slot = self.peers.as_ref().and_then(|p| p.slots.get(&env.to.node).copied());
            let Some(slot) = peer_slot.or_else(|| self.api_slots.get(&env.to.node).copied()) else {
                // A reply to an API node that has gone, or a signal to a data
                // node not connected (its failure is QMGR's business).
                self.stats.dropped_to_unknown += 1;
                debug!(to = %env.to, signal = env.signal.name(), "dropping signal to an unconnected node");
                continue;
            };
            let Some(c) = self.conns[slot].as_mut() else { continue };
            if c.close.is_some() {
                continue;
            }
            match c.send.push_frame_with(|out| wire::encode_into(&env, out)) {
                Ok(()) => {
                    c.outstanding = c.outstanding.saturating_sub(1);
                    if c.outstanding_paused && c.outstanding <= MAX_OUTSTANDING_REQUESTS / 2 {
                        c.outstanding_paused = false;
                        if !c.read_more {
                            c.read_more = true;
                            self.pending_read.push(slot);
                        }
                    }
                    c.policy.on_queued(now);
                    self.stats.signals_out += 1;
                    let unsent = c.send.len();
                    self.stats.send_buffer_peak_bytes = self.stats.send_buffer_peak_bytes.max(unsent as u64);
                    if !c.send_paused && c.data_peer.is_none() && unsent >= self.send_pause_bytes {
                        // Back-pressure on a slow reader: stop reading its
                        // requests until it reads its replies (`write_conn`).
                        c.send_paused = true;
                        self.stats.send_pauses += 1;
                        self.stats.send_paused_now += 1;
                        debug!(peer = %c.peer, api_node = env.to.node, unsent, "peer not reading its replies: reading from it paused");
                    }
                    self.mark_dirty(slot);
                }
                Err(e) => {
                    warn!(peer = %c.peer, api_node = env.to.node, "{e}; closing connection");
                    self.mark_close(slot, CloseReason::SendOverflow(e.to_string()));
                }
            }
        }
        self.remote = remote;
    }

    /// Write connections' pending bytes: all of them if `force`, else those the
    /// adaptive send policy says are due.
    fn flush_all(&mut self, force: bool) {
        if self.dirty.is_empty() {
            return;
        }
        let now = self.now_ns();
        let dirty = std::mem::take(&mut self.dirty);
        for slot in dirty {
            let Some(c) = self.conns[slot].as_mut() else { continue };
            c.in_dirty = false;
            if c.send.is_empty() {
                continue;
            }
            if c.write_interest {
                continue; // waiting for WRITABLE; the event resumes it
            }
            if force || c.policy.should_send_now(now, c.send.len()) {
                self.write_conn(slot);
            } else {
                self.mark_dirty(slot);
            }
        }
    }

    /// Write as much as the socket takes; register for WRITABLE if it is full.
    fn write_conn(&mut self, slot: usize) {
        let now = self.now_ns();
        let Some(c) = self.conns.get_mut(slot).and_then(|c| c.as_mut()) else {
            return;
        };
        let token = Token(slot + FIRST_CONN);
        match c.send.write_to(&mut c.stream) {
            Ok(n) => {
                if n > 0 {
                    self.stats.flushes += 1;
                    self.stats.bytes_out += n as u64;
                }
                c.policy.on_sent(now);
                if c.send_paused && c.send.len() <= self.send_pause_bytes / 2 {
                    // The peer reads again: so do we.
                    c.send_paused = false;
                    self.stats.send_paused_now -= 1;
                    if !c.read_more {
                        c.read_more = true;
                        self.pending_read.push(slot);
                    }
                }
                let want_write = !c.send.is_empty();
                if want_write != c.write_interest {
                    let interest =
                        if want_write { Interest::READABLE | Interest::WRITABLE } else { Interest::READABLE };
                    if let Err(e) = self.poll.registry().reregister(&mut c.stream, token, interest) {
                        self.mark_close(slot, CloseReason::Io(e.to_string()));
                        return;
                    }
                    c.write_interest = want_write;
                }
            }
            Err(e) => self.mark_close(slot, CloseReason::Io(e.to_string())),
        }
    }

    /// Close the connections marked this round; tell TC and DICT which API nodes
    /// are gone.
    fn close_marked(&mut self) {
        while let Some(slot) = self.closing.pop() {
            let Some(mut c) = self.conns[slot].take() else { continue };
            let reason = c.close.take().unwrap_or(CloseReason::Eof);
            // Best effort: a refusal or the last replies may still get out.
            let _ = c.send.write_to(&mut c.stream);
            let _ = self.poll.registry().deregister(&mut c.stream);
            let _ = c.stream.shutdown(std::net::Shutdown::Both);
            self.free_slots.push(slot);
            self.live_conns -= 1;
            self.stats.send_paused_now -= u64::from(c.send_paused);
            self.local_conns -= usize::from(matches!(c.stream, Stream::Local(_)));
            self.stats.connections_closed += 1;
            if matches!(reason, CloseReason::Protocol(_) | CloseReason::Refused(_)) {
                self.stats.protocol_errors += 1;
            }
            match &reason {
                CloseReason::Eof => info!(peer = %c.peer, api_node = ?c.api_node, "connection closed: {reason}"),
                _ => warn!(peer = %c.peer, api_node = ?c.api_node, "connection closed: {reason}"),
            }
            if let Some(api_node) = c.api_node {
                self.api_slots.remove(&api_node);
                self.api_failed(api_node);
            }
            if c.data_peer.is_some() || c.dialed_peer.is_some() {
                self.peer_closed(&c);
            }
        }
    }

    /// Run the blocks for one round: at most `max_signals_per_poll`
    /// signals, and none after a block asked to shut the node down.
    fn run_blocks(&mut self) {
        let halt = &self.host_queue.halt;
        let mut n = 0;
        while n < self.opts.max_signals_per_poll && !halt.load(Ordering::Relaxed) && self.sched.run_one() {
            n += 1;
        }
    }

    /// Act on what the node's blocks asked of their host this round.
    fn host_requests(&mut self) {
        let reqs = std::mem::take(&mut *self.host_queue.queue.lock().expect("host queue lock"));
        for env in reqs {
            let Signal::Cluster(sig) = env.signal else {
                warn!(signal = env.signal.name(), to = %env.to, "host block got an unexpected signal");
                continue;
            };
            match *sig {
                ClusterSignal::HostDisconnectReq { node } => self.exclude_peer(node),
                ClusterSignal::HostShutdownReq { reason, restart } => {
                    tracing::error!(node = self.node_id, ?reason, restart, "data node shutting down: {reason:?}");
                    self.exit = Some(NodeExit::Shutdown { reason, restart });
                }
                ClusterSignal::ArbitReq { generation, survivors, failed } => {
                    info!(generation, ?survivors, ?failed, "asking the arbitrator");
                    let timeout = Duration::from_millis(self.knobs.arbitration_timeout_ms);
                    let arbitrator = self.arbitrator.clone();
                    let inbox = self.inbox.clone();
                    crate::host::arbitrate(self.node_id, arbitrator, (generation, survivors, failed), timeout, inbox);
                }
                ClusterSignal::NodeStatusRep(st) => {
                    if let Ok(mut s) = self.status.lock() {
                        // Each start or restart phase once in the log as it
                        // ends (a node restart's copy says what it copied).
                        let logged = s.status.as_ref().map_or(0, |o| o.phases.len().min(st.phases.len()));
                        for (phase, ms) in &st.phases[logged..] {
                            info!(node = self.node_id, "start phase done in {ms} ms: {phase}");
                        }
                        s.status = Some(*st);
                    }
                }
                ClusterSignal::DurabilityLostRep { why } => {
                    tracing::error!(
                        node = self.node_id,
                        "global checkpoints stopped: commits are no longer made durable and writes are refused \
                         until this data node is restarted: {why}"
                    );
                }
                ClusterSignal::DurableGciRep { gci, complete_copy } => {
                    if let Ok(mut s) = self.status.lock() {
                        s.durable = Some((gci, complete_copy));
                    }
                }
                ClusterSignal::SystemRestartRep { gci, restored } if gci == restored => {
                    info!(node = self.node_id, "system restart: the cluster restarts to GCI {gci}");
                }
                ClusterSignal::SystemRestartRep { gci, restored } => {
                    info!(
                        node = self.node_id,
                        "system restart: the cluster restarts to GCI {gci} (this node's files restored GCI \
                         {restored}; it rolls forward to {gci} from its REDO log)"
                    );
                }
                // QMGR's answer to a graceful leave the node's owner asked
                // for (`DataNodeHandle::leave`): refused for good.
                ClusterSignal::Qmgr(norr_signals::cluster::QmgrMsg::LeaveRef { reason, .. }) => {
                    warn!(node = self.node_id, "graceful stop refused: {reason}");
                    if let Ok(mut s) = self.status.lock() {
                        s.leave_refused = Some(reason);
                    }
                }
                other => warn!(?other, "host block got an unexpected cluster signal"),
            }
        }
    }

    /// Deliver ApiFailReq (priority A, never refused) to TC and DICT.
    fn api_failed(&mut self, api_node: NodeId) {
        let from = BlockRef::new(self.node_id, 0, 0);
        let tcs = (0..self.sched.instances(block::TC)).map(|i| (block::TC, i));
        for (b, i) in tcs.chain([(block::DICT, 0)]) {
            let to = BlockRef::new(self.node_id, b, i);
            let env = Envelope { from, to, prio: Priority::A, signal: Signal::ApiFailReq { api_node } };
            match self.sched.deliver(env) {
                Ok(()) => {}
                Err(e) => debug!(?e, api_node, "ApiFailReq not delivered"),
            }
        }
        self.ids.failed(api_node, self.sched.stats().executed, self.sched.job_b_len());
    }
}
