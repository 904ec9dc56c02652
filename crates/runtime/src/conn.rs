//! One API connection's state, and the pool of API node ids.

use crate::stream::{Peer, Stream};
use norr_kernel::NodeId;
use norr_signals::Envelope;
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
}

impl std::fmt::Display for CloseReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CloseReason::Eof => write!(f, "peer closed the connection"),
            CloseReason::Io(e) => write!(f, "io error: {e}"),
            CloseReason::Protocol(e) => write!(f, "protocol violation: {e}"),
            CloseReason::SendOverflow(e) => write!(f, "{e}"),
            CloseReason::Refused(e) => write!(f, "refused: {e}"),
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
            stalled: None,
            read_more: false,
            write_interest: false,
            in_dirty: false,
            close: None,
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
/// A client may ask for a given id (`Hello::requested_api_node`: in a
/// cluster, every data node must know an API node by the id mgmd gave it). A
/// free id is taken; one in use, or still being released, is refused with the
/// reason. Asked-for ids may lie beyond the numbered range (mgmd hands out
/// ids up to 65535): they count against the same capacity.
pub(crate) struct ApiIdPool {
    free: VecDeque<NodeId>,
    /// (id, executed-count target): ApiFailReq delivered, not yet run.
    failing: Vec<(NodeId, u64)>,
    /// ApiFailReq has run; waiting for idle or the target.
    draining: Vec<(NodeId, u64)>,
    capacity: usize,
    /// Asked-for ids outside `FIRST_API_NODE_ID..FIRST_API_NODE_ID + capacity`,
    /// from the handshake until released (they never enter `free`).
    outside: BTreeSet<NodeId>,
}

/// Signals beyond the queue length an id waits for under sustained load.
const DRAIN_SLACK_SIGNALS: u64 = 64;

impl ApiIdPool {
    pub fn new(max_api_connections: u32) -> ApiIdPool {
        let room = (NodeId::MAX - FIRST_API_NODE_ID) as usize + 1;
        let capacity = (max_api_connections as usize).min(room);
        assert!(capacity > 0);
        let free = (0..capacity).map(|i| FIRST_API_NODE_ID + i as NodeId).collect();
        ApiIdPool { free, failing: Vec::new(), draining: Vec::new(), capacity, outside: BTreeSet::new() }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    fn in_range(&self, id: NodeId) -> bool {
        id >= FIRST_API_NODE_ID && ((id - FIRST_API_NODE_ID) as usize) < self.capacity
    }

    /// Ids held or being released.
    fn used(&self) -> usize {
        self.capacity - self.free.len() + self.outside.len()
    }

    pub fn alloc(&mut self) -> Option<NodeId> {
        if self.used() >= self.capacity {
            return None;
        }
        self.free.pop_front()
    }

    /// The id a new connection gets: `requested` if the client asked for
    /// one (see [`ApiIdPool::take`]), else the next free one. Err: why the
    /// handshake is refused.
    pub fn alloc_for(&mut self, requested: Option<NodeId>) -> Result<NodeId, String> {
        match requested {
            Some(id) => self.take(id),
            None => self
                .alloc()
                .ok_or_else(|| format!("too many API connections (max_api_connections = {})", self.capacity)),
        }
    }

    /// Take the id a client asked for, if it is free.
    pub fn take(&mut self, id: NodeId) -> Result<NodeId, String> {
        if id < FIRST_API_NODE_ID {
            return Err(format!(
                "API node id {id} asked for: ids below {FIRST_API_NODE_ID} are for data nodes and management servers"
            ));
        }
        if self.failing.iter().chain(&self.draining).any(|(f, _)| *f == id) {
            return Err(format!(
                "API node id {id} is still being released after its previous connection closed: retry in a moment"
            ));
        }
        if self.in_range(id) {
            let Some(i) = self.free.iter().position(|f| *f == id) else {
                return Err(format!("API node id {id} is in use by another connection to this data node"));
            };
            if self.used() >= self.capacity {
                return Err(format!("too many API connections (max_api_connections = {})", self.capacity));
            }
            self.free.remove(i);
        } else {
            if self.outside.contains(&id) {
                return Err(format!("API node id {id} is in use by another connection to this data node"));
            }
            if self.used() >= self.capacity {
                return Err(format!("too many API connections (max_api_connections = {})", self.capacity));
            }
            self.outside.insert(id);
        }
        Ok(id)
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_reused_only_after_the_node_was_idle() {
        let mut p = ApiIdPool::new(2);
        assert_eq!(p.alloc(), Some(100));
        assert_eq!(p.alloc(), Some(101));
        assert_eq!(p.alloc(), None);
        p.failed(100, 1000, 10);
        p.after_run(true, 1000); // ApiFailReq not run yet
        assert_eq!(p.alloc(), None);
        p.before_run();
        p.after_run(false, 1010);
        assert_eq!(p.alloc(), None);
        p.after_run(true, 1011);
        assert_eq!(p.alloc(), Some(100));
        // Under sustained load (never idle) the id comes back once the queue
        // that existed at the failure has surely drained.
        p.failed(101, 5000, 100);
        p.before_run();
        p.after_run(false, 5100);
        assert_eq!(p.alloc(), None);
        p.after_run(false, 5000 + 200 + DRAIN_SLACK_SIGNALS);
        assert_eq!(p.alloc(), Some(101));
        let big = ApiIdPool::new(1 << 16);
        assert_eq!(big.capacity(), (NodeId::MAX - FIRST_API_NODE_ID) as usize + 1);
    }

    /// Asked-for ids: a free one is taken, a taken or releasing one refused
    /// with the reason; ids beyond the numbered range count against the
    /// capacity and are never handed out to clients that ask for none.
    #[test]
    fn requested_ids() {
        let mut p = ApiIdPool::new(3);
        assert_eq!(p.alloc_for(Some(101)), Ok(101));
        assert!(p.alloc_for(Some(101)).unwrap_err().contains("in use"), "taken");
        assert!(p.alloc_for(Some(7)).unwrap_err().contains("below 100"));
        assert_eq!(p.alloc_for(None), Ok(100), "the pool skips the taken one");
        assert_eq!(p.alloc_for(Some(500)), Ok(500), "beyond the numbered range");
        assert!(p.alloc_for(Some(500)).unwrap_err().contains("in use"));
        // Three held: full, whichever way one asks.
        assert!(p.alloc_for(None).unwrap_err().contains("too many"));
        assert!(p.alloc_for(Some(102)).unwrap_err().contains("too many"));
        assert!(p.alloc_for(Some(600)).unwrap_err().contains("too many"));
        // 500 goes: refused while it is released, free (for an asker) after.
        p.failed(500, 10, 0);
        assert!(p.alloc_for(Some(500)).unwrap_err().contains("being released"));
        p.before_run();
        assert!(p.alloc_for(Some(500)).unwrap_err().contains("being released"));
        p.after_run(true, 11);
        assert_eq!(p.alloc_for(None), Ok(102), "an outside id never enters the free list");
        assert!(p.alloc_for(Some(500)).unwrap_err().contains("too many"));
        p.failed(101, 20, 0);
        p.before_run();
        p.after_run(true, 21);
        assert_eq!(p.alloc_for(Some(500)), Ok(500));
        assert_eq!(p.alloc_for(None), Err("too many API connections (max_api_connections = 3)".to_string()));
    }
}
