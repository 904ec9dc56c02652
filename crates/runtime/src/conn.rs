//! One API connection's state, and the pool of API node ids.

use crate::stream::{Peer, Stream};
use norr_kernel::NodeId;
use norr_signals::Envelope;
use norr_transport::handshake::ApiKind;
use norr_transport::{AdaptiveSend, FrameDecoder, SendBuffer};
use std::collections::{BTreeSet, VecDeque};

/// API node ids are handed out from here upwards (1..100 are for data nodes and
/// management servers).
pub const FIRST_API_NODE_ID: NodeId = 100;

/// Why a connection ends (for the log).
#[derive(Debug, Clone)]
pub(crate) enum CloseReason {
    Eof,
    Io(String),
    Protocol(String),
    SendOverflow(String),
    Refused(String),
    /// Handshake done, but no request within `api_first_request_timeout_ms`.
    NoFirstRequest(u64),
}

impl std::fmt::Display for CloseReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CloseReason::Eof => write!(f, "peer closed the connection"),
            CloseReason::Io(e) => write!(f, "io error: {e}"),
            CloseReason::Protocol(e) => write!(f, "protocol violation: {e}"),
            CloseReason::SendOverflow(e) => write!(f, "{e}"),
            CloseReason::Refused(e) => write!(f, "refused: {e}"),
            CloseReason::NoFirstRequest(ms) => {
                write!(f, "no request within {ms} ms of the handshake (api_first_request_timeout_ms)")
            }
        }
    }
}

pub(crate) struct Conn {
    /// Unique per accepted connection (slots are reused; serials are not).
    pub serial: u64,
    pub stream: Stream,
    pub peer: Peer,
    pub decoder: FrameDecoder,
    pub send: SendBuffer,
    pub policy: AdaptiveSend,
    /// Assigned at the handshake; `None` until then.
    pub api_node: Option<NodeId>,
    /// Declared in the handshake (meaningful once `api_node` is set).
    pub kind: ApiKind,
    /// A request (a valid signal) arrived after the handshake: the
    /// first-request time-out no longer applies.
    pub sent_request: bool,
    /// Reading is paused because the peer does not read its replies: unsent
    /// bytes reached `Knobs::send_buffer_pause_bytes`; resumed when they fall
    /// to half of that (see `EventLoop::route_remote` and `write_conn`).
    pub send_paused: bool,
    /// A native client's requests delivered and not yet answered (requests
    /// in, signals out, never below 0: a scan's batches count as answers
    /// too). Past `MAX_OUTSTANDING_REQUESTS` the connection is not read
    /// until half of them are answered: every open request can hold a TC
    /// transaction record, and a client that pipelines without reading its
    /// replies (or without waiting for them) must not take them all from
    /// the SQL nodes and other clients.
    pub outstanding: u32,
    pub outstanding_paused: bool,
    /// Position in job buffer B (counted in signals taken from it, see
    /// `EventLoop::b_taken`) by which the last request delivered from this
    /// connection has left B. The connection is read again only after that,
    /// so at most one round's requests of it wait in B: the replies a paused
    /// connection still gets are bounded by one round's reading.
    pub queued_until: u64,
    /// A signal the scheduler could not take (job buffer full): delivered first
    /// when there is room; meanwhile the connection is not read (back-pressure).
    pub stalled: Option<Envelope>,
    /// The socket may hold unread bytes (reading was paused or its budget used).
    pub read_more: bool,
    /// Registered for WRITABLE: a write would have blocked.
    pub write_interest: bool,
    /// In the loop's list of connections with bytes to send.
    pub in_dirty: bool,
    /// Marked for closing at the end of this loop round.
    pub close: Option<CloseReason>,
    /// A connection to this data node (handshake done): trusted with every
    /// signal, never paused for back-pressure (see `event_loop::peers`).
    pub data_peer: Option<NodeId>,
    /// A connection this node dialled to this data node, waiting for its
    /// answer to the hello.
    pub dialed_peer: Option<NodeId>,
    /// Challenged for the cluster secret, waiting for the answer (the
    /// connection has no API node id until it proves it).
    pub auth: Option<PendingAuth>,
    /// The same for a data node's hello (see `event_loop::peers`).
    pub peer_auth: Option<PendingPeerAuth>,
    /// The SQL account (user, host pattern) the connection logged in with
    /// (`event_loop::account_login`); None: it proved the cluster secret, or
    /// the node asks for nothing.
    pub account: Option<(String, String)>,
}

/// A data node's hello that this node answered with a challenge.
pub(crate) struct PendingPeerAuth {
    pub nonce: [u8; norr_transport::auth::NONCE_BYTES],
    pub hello: norr_transport::peer_handshake::PeerHello,
}

/// A client's Hello that the node answered with a challenge.
pub(crate) struct PendingAuth {
    pub nonce: [u8; norr_transport::auth::NONCE_BYTES],
    pub hello: norr_transport::handshake::Hello,
}

impl Conn {
    pub fn new(
        serial: u64,
        stream: Stream,
        peer: Peer,
        max_frame_bytes: usize,
        max_send_buffer_bytes: usize,
        policy: AdaptiveSend,
    ) -> Conn {
        Conn {
            serial,
            stream,
            peer,
            decoder: FrameDecoder::new(max_frame_bytes),
            send: SendBuffer::new(max_send_buffer_bytes),
            policy,
            api_node: None,
            kind: ApiKind::NativeClient,
            sent_request: false,
            send_paused: false,
            outstanding: 0,
            outstanding_paused: false,
            queued_until: 0,
            stalled: None,
            read_more: false,
            write_interest: false,
            in_dirty: false,
            close: None,
            data_peer: None,
            dialed_peer: None,
            auth: None,
            peer_auth: None,
            account: None,
        }
    }

    /// Mark for closing; the first reason wins.
    pub fn mark_close(&mut self, r: CloseReason) {
        if self.close.is_none() {
            self.close = Some(r);
        }
    }
}

/// API node ids: handed out lowest-first at start, then in FIFO order of their
/// release, so an id is reused as late as possible. An id is released only after
/// the `ApiFailReq` of its previous holder has been delivered *and* every signal
/// queued before it has run: either the node was idle after the ApiFailReq ran,
/// or (under sustained load, where it never idles) the scheduler executed
/// enough signals to drain everything that was queued when the holder failed
/// (twice the B queue then, plus slack for the A signals and the blocks'
/// own follow-ups such as `ApiFailDone`). So no signal of the old holder can be
/// mistaken for one of the new holder.
///
/// Reserved slots: native clients (`ApiKind::NativeClient`) may hold at most
/// `capacity - reserved` ids, counted from allocation until the id is free
/// again (an id still draining counts), so `reserved` ids are always left
/// for SQL nodes and management servers.
///
/// A client may ask for a given id (`Hello::requested_api_node`: in a
/// cluster, every data node must know an API node by the id mgmd gave it). A
/// free id is taken; one in use, or still being released, is refused with the
/// reason. Asked-for ids may lie beyond the numbered range (mgmd hands out
/// ids up to 65535): they count against the same capacity (and, for native
/// clients, the same native limit).
pub(crate) struct ApiIdPool {
    free: VecDeque<NodeId>,
    /// (id, executed-count target): ApiFailReq delivered, not yet run.
    failing: Vec<(NodeId, u64)>,
    /// ApiFailReq has run; waiting for idle or the target.
    draining: Vec<(NodeId, u64)>,
    capacity: usize,
    reserved: usize,
    /// Ids held by a native client (until free again).
    native: BTreeSet<NodeId>,
    /// Asked-for ids outside `FIRST_API_NODE_ID..FIRST_API_NODE_ID + capacity`,
    /// from the handshake until released (they never enter `free`).
    outside: BTreeSet<NodeId>,
}

/// Signals beyond the queue length an id waits for under sustained load.
const DRAIN_SLACK_SIGNALS: u64 = 64;

/// Why no id was handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoId {
    /// Every id is in use (or draining).
    Full,
    /// Native clients hold all the ids they may; the rest are reserved.
    NativeLimit,
    /// The asked-for id cannot be given (in use, being released, or not an
    /// API node id).
    Requested(NodeId, Taken),
}

/// Why an asked-for id cannot be given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Taken {
    /// Below `FIRST_API_NODE_ID`: data nodes' and management servers' ids.
    NotAnApiId,
    /// Another connection holds it.
    InUse,
    /// Its previous holder is gone but its signals may still be queued.
    Releasing,
}

impl std::fmt::Display for Taken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Taken::NotAnApiId => "is not an API node id (ids below 100 are for data nodes and management servers)",
            Taken::InUse => "is in use by another connection to this data node",
            Taken::Releasing => "is still being released after its previous connection closed: retry in a moment",
        })
    }
}

impl ApiIdPool {
    pub fn new(max_api_connections: u32, reserved: u32) -> ApiIdPool {
        let room = (NodeId::MAX - FIRST_API_NODE_ID) as usize + 1;
        let capacity = (max_api_connections as usize).min(room);
        assert!(capacity > 0);
        let reserved = (reserved as usize).min(capacity - 1);
        let free = (0..capacity).map(|i| FIRST_API_NODE_ID + i as NodeId).collect();
        ApiIdPool {
            free,
            failing: Vec::new(),
            draining: Vec::new(),
            capacity,
            reserved,
            native: BTreeSet::new(),
            outside: BTreeSet::new(),
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Ids native clients may hold at once.
    pub fn native_limit(&self) -> usize {
        self.capacity - self.reserved
    }

    fn in_range(&self, id: NodeId) -> bool {
        id >= FIRST_API_NODE_ID && ((id - FIRST_API_NODE_ID) as usize) < self.capacity
    }

    /// Ids held or being released.
    fn used(&self) -> usize {
        self.capacity - self.free.len() + self.outside.len()
    }

    /// The next free id, for a client that asks for none.
    pub fn alloc(&mut self, kind: ApiKind) -> Result<NodeId, NoId> {
        self.check_room(kind)?;
        let id = self.free.pop_front().expect("room checked");
        self.hold(id, kind);
        Ok(id)
    }

    /// The id a new connection gets: `requested` if the client asked for
    /// one (see [`ApiIdPool::take`]), else the next free one.
    pub fn alloc_for(&mut self, requested: Option<NodeId>, kind: ApiKind) -> Result<NodeId, NoId> {
        match requested {
            Some(id) => self.take(id, kind),
            None => self.alloc(kind),
        }
    }

    /// Take the id a client asked for, if it is free.
    pub fn take(&mut self, id: NodeId, kind: ApiKind) -> Result<NodeId, NoId> {
        if id < FIRST_API_NODE_ID {
            return Err(NoId::Requested(id, Taken::NotAnApiId));
        }
        if self.failing.iter().chain(&self.draining).any(|(f, _)| *f == id) {
            return Err(NoId::Requested(id, Taken::Releasing));
        }
        let free_at = if self.in_range(id) {
            match self.free.iter().position(|f| *f == id) {
                Some(i) => Some(i),
                None => return Err(NoId::Requested(id, Taken::InUse)),
            }
        } else if self.outside.contains(&id) {
            return Err(NoId::Requested(id, Taken::InUse));
        } else {
            None
        };
        self.check_room(kind)?;
        match free_at {
            Some(i) => {
                self.free.remove(i);
            }
            None => {
                self.outside.insert(id);
            }
        }
        self.hold(id, kind);
        Ok(id)
    }

    fn check_room(&self, kind: ApiKind) -> Result<(), NoId> {
        if self.used() >= self.capacity {
            return Err(NoId::Full);
        }
        if !kind.may_use_reserved_slots() && self.native.len() >= self.native_limit() {
            return Err(NoId::NativeLimit);
        }
        Ok(())
    }

    fn hold(&mut self, id: NodeId, kind: ApiKind) {
        if !kind.may_use_reserved_slots() {
            let fresh = self.native.insert(id);
            debug_assert!(fresh, "api node {id} handed out twice");
        }
    }

    /// The holder of `id` is gone and its ApiFailReq was delivered when the
    /// scheduler had executed `executed` signals and held `queued` in job buffer B.
    pub fn failed(&mut self, id: NodeId, executed: u64, queued: usize) {
        debug_assert!(!self.free.contains(&id), "api node {id} released twice");
        let target = executed.saturating_add(2 * queued as u64 + DRAIN_SLACK_SIGNALS);
        self.failing.push((id, target));
    }

    /// Called before the scheduler runs: ids failed so far will have their
    /// ApiFailReq executed in this run (priority A runs first).
    pub fn before_run(&mut self) {
        self.draining.append(&mut self.failing);
    }

    /// Called after the scheduler ran, with its executed-signal count.
    pub fn after_run(&mut self, node_idle: bool, executed: u64) {
        let mut i = 0;
        while i < self.draining.len() {
            if node_idle || executed >= self.draining[i].1 {
                let (id, _) = self.draining.remove(i);
                self.native.remove(&id);
                if self.in_range(id) {
                    self.free.push_back(id);
                } else {
                    let held = self.outside.remove(&id);
                    debug_assert!(held, "api node {id} released but never taken");
                }
            } else {
                i += 1;
            }
        }
        debug_assert!(self.used() <= self.capacity);
        debug_assert!(self.native.len() <= self.native_limit());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_reused_only_after_the_node_was_idle() {
        let mut p = ApiIdPool::new(2, 0);
        let n = ApiKind::NativeClient;
        assert_eq!(p.alloc(n), Ok(100));
        assert_eq!(p.alloc(n), Ok(101));
        assert_eq!(p.alloc(n), Err(NoId::Full));
        p.failed(100, 1000, 10);
        p.after_run(true, 1000); // ApiFailReq not run yet
        assert_eq!(p.alloc(n), Err(NoId::Full));
        p.before_run();
        p.after_run(false, 1010);
        assert_eq!(p.alloc(n), Err(NoId::Full));
        p.after_run(true, 1011);
        assert_eq!(p.alloc(n), Ok(100));
        // Under sustained load (never idle) the id comes back once the queue
        // that existed at the failure has surely drained.
        p.failed(101, 5000, 100);
        p.before_run();
        p.after_run(false, 5100);
        assert_eq!(p.alloc(n), Err(NoId::Full));
        p.after_run(false, 5000 + 200 + DRAIN_SLACK_SIGNALS);
        assert_eq!(p.alloc(n), Ok(101));
        let big = ApiIdPool::new(1 << 16, 32);
        assert_eq!(big.capacity(), (NodeId::MAX - FIRST_API_NODE_ID) as usize + 1);
    }

    #[test]
    fn native_clients_leave_the_reserved_ids_to_sql_nodes() {
        let mut p = ApiIdPool::new(4, 2);
        let (n, sql, mgm) = (ApiKind::NativeClient, ApiKind::SqlNode, ApiKind::Management);
        assert_eq!(p.alloc(n), Ok(100));
        assert_eq!(p.alloc(n), Ok(101));
        assert_eq!(p.alloc(n), Err(NoId::NativeLimit));
        assert_eq!(p.alloc(sql), Ok(102));
        // A native client that leaves still counts until its id is free again.
        p.failed(100, 0, 0);
        p.before_run();
        assert_eq!(p.alloc(n), Err(NoId::NativeLimit));
        p.after_run(true, 1);
        assert_eq!(p.alloc(mgm), Ok(103));
        assert_eq!(p.alloc(n), Ok(100));
        assert_eq!(p.alloc(sql), Err(NoId::Full));
        // Reserved ids freed by a SQL node are not native ones afterwards.
        p.failed(102, 0, 0);
        p.before_run();
        p.after_run(true, 1);
        assert_eq!(p.alloc(n), Err(NoId::NativeLimit));
        assert_eq!(p.alloc(sql), Ok(102));
        // Reserving every id is clamped: native clients keep one.
        let mut all = ApiIdPool::new(3, 3);
        assert_eq!(all.native_limit(), 1);
        assert_eq!(all.alloc(n), Ok(100));
    }

    /// Asked-for ids: a free one is taken, a taken or releasing one refused
    /// with the reason; ids beyond the numbered range count against the
    /// capacity and are never handed out to clients that ask for none.
    #[test]
    fn requested_ids() {
        let mut p = ApiIdPool::new(3, 0);
        let n = ApiKind::NativeClient;
        let req = |id, t| Err(NoId::Requested(id, t));
        assert_eq!(p.alloc_for(Some(101), n), Ok(101));
        assert_eq!(p.alloc_for(Some(101), n), req(101, Taken::InUse));
        assert_eq!(p.alloc_for(Some(7), n), req(7, Taken::NotAnApiId));
        assert_eq!(p.alloc_for(None, n), Ok(100), "the pool skips the taken one");
        assert_eq!(p.alloc_for(Some(500), n), Ok(500), "beyond the numbered range");
        assert_eq!(p.alloc_for(Some(500), n), req(500, Taken::InUse));
        // Three held: full, whichever way one asks.
        assert_eq!(p.alloc_for(None, n), Err(NoId::Full));
        assert_eq!(p.alloc_for(Some(102), n), Err(NoId::Full));
        assert_eq!(p.alloc_for(Some(600), n), Err(NoId::Full));
        // 500 goes: refused while it is released, free (for an asker) after.
        p.failed(500, 10, 0);
        assert_eq!(p.alloc_for(Some(500), n), req(500, Taken::Releasing));
        p.before_run();
        assert_eq!(p.alloc_for(Some(500), n), req(500, Taken::Releasing));
        p.after_run(true, 11);
        assert_eq!(p.alloc_for(None, n), Ok(102), "an outside id never enters the free list");
        assert_eq!(p.alloc_for(Some(500), n), Err(NoId::Full));
        p.failed(101, 20, 0);
        p.before_run();
        p.after_run(true, 21);
        assert_eq!(p.alloc_for(Some(500), n), Ok(500));
        assert_eq!(p.alloc_for(None, n), Err(NoId::Full));
    }

    /// Asked-for ids of native clients count against the native limit, in
    /// the numbered range or beyond it; SQL nodes may take the reserved rest.
    #[test]
    fn requested_ids_respect_the_reserved_slots() {
        let mut p = ApiIdPool::new(3, 1);
        let (n, sql) = (ApiKind::NativeClient, ApiKind::SqlNode);
        assert_eq!(p.alloc_for(Some(900), n), Ok(900));
        assert_eq!(p.alloc_for(Some(102), n), Ok(102));
        assert_eq!(p.alloc_for(Some(101), n), Err(NoId::NativeLimit));
        assert_eq!(p.alloc_for(Some(101), sql), Ok(101));
        assert_eq!(p.alloc_for(None, sql), Err(NoId::Full));
        // The native client of 900 goes: its slot is a native one again.
        p.failed(900, 0, 0);
        p.before_run();
        p.after_run(true, 1);
        assert_eq!(p.alloc_for(None, n), Ok(100));
    }
}
