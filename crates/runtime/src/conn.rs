//! One API connection's state, and the pool of API node ids.

use crate::stream::{Peer, Stream};
use norr_kernel::NodeId;
use norr_signals::Envelope;
use norr_transport::{AdaptiveSend, FrameDecoder, SendBuffer};
use std::collections::VecDeque;

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
pub(crate) struct ApiIdPool {
    free: VecDeque<NodeId>,
    /// (id, executed-count target): ApiFailReq delivered, not yet run.
    failing: Vec<(NodeId, u64)>,
    /// ApiFailReq has run; waiting for idle or the target.
    draining: Vec<(NodeId, u64)>,
    capacity: usize,
}

/// Signals beyond the queue length an id waits for under sustained load.
const DRAIN_SLACK_SIGNALS: u64 = 64;

impl ApiIdPool {
    pub fn new(max_api_connections: u32) -> ApiIdPool {
        let room = (NodeId::MAX - FIRST_API_NODE_ID) as usize + 1;
        let capacity = (max_api_connections as usize).min(room);
        assert!(capacity > 0);
        let free = (0..capacity).map(|i| FIRST_API_NODE_ID + i as NodeId).collect();
        ApiIdPool { free, failing: Vec::new(), draining: Vec::new(), capacity }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn alloc(&mut self) -> Option<NodeId> {
        self.free.pop_front()
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
                self.free.push_back(id);
            } else {
                i += 1;
            }
        }
        debug_assert!(self.free.len() + self.failing.len() + self.draining.len() <= self.capacity);
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
}
