//! Connections between data nodes.
//!
//! Every pair of data nodes shares one TCP connection, dialled by the node
//! with the higher id (so two nodes never race to connect to each other):
//! it sends `PeerHello`, the other answers `PeerReply`. A dialler that fails
//! or loses its connection tries again with a growing back-off (50 ms up to
//! 1 s, logged). QMGR hears `ConnectRep` when a connection is up and
//! `DisconnectRep` when it breaks; the failure protocol decides the rest.
//!
//! A peer is trusted with every signal, but each message must come from the
//! node the connection belongs to and be addressed to a block of this node.
//! A peer QMGR cut off (`HostDisconnectReq`) is refused until it comes back
//! with a new incarnation (it restarted its blocks).

use super::EventLoop;
use crate::conn::{CloseReason, Conn, PendingPeerAuth};
use crate::stream::{Peer, Stream};
use mio::Interest;
use norr_kernel::{BlockRef, NodeId, Priority};
use norr_signals::cluster::ClusterSignal;
use norr_signals::{block, wire, Envelope, Signal};
use norr_transport::auth;
use norr_transport::peer_handshake::{self, PeerHello, PeerReply, PEER_MAGIC};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use tracing::{debug, info, warn};

/// Back-off between attempts to connect to a peer.
const DIAL_BACKOFF_MIN_MS: u64 = 50;
const DIAL_BACKOFF_MAX_MS: u64 = 1_000;

/// This node's place in the cluster's network.
pub(crate) struct PeerNet {
    /// Every other data node and where it listens.
    pub addrs: BTreeMap<NodeId, SocketAddr>,
    pub config_digest: u64,
    pub incarnation: u64,
    /// Connected peers (handshake done) -> slot.
    pub slots: BTreeMap<NodeId, usize>,
    /// Their incarnations.
    pub incarnations: BTreeMap<NodeId, u64>,
    /// Peers this node dials (those with a lower id).
    pub dial: BTreeMap<NodeId, Dial>,
    /// Peers cut off by QMGR, with the incarnation they had.
    pub excluded: BTreeMap<NodeId, u64>,
}

pub(crate) struct Dial {
    pub next_ns: u64,
    pub backoff_ms: u64,
    /// The connection being set up, if any.
    pub slot: Option<usize>,
    /// Failed attempts in a row (the log says so once in a while).
    pub failures: u64,
}

impl PeerNet {
    pub fn new(node: NodeId, addrs: BTreeMap<NodeId, SocketAddr>, config_digest: u64, incarnation: u64) -> PeerNet {
        let dial = addrs
            .keys()
            .filter(|n| **n < node)
            .map(|n| (*n, Dial { next_ns: 0, backoff_ms: DIAL_BACKOFF_MIN_MS, slot: None, failures: 0 }))
            .collect();
        let mut addrs = addrs;
        addrs.remove(&node);
        PeerNet {
            addrs,
            config_digest,
            incarnation,
            slots: BTreeMap::new(),
            incarnations: BTreeMap::new(),
            dial,
            excluded: BTreeMap::new(),
        }
    }

    /// When the loop must wake to dial: the earliest due time of a peer
    /// neither connected nor being connected. (A connected peer's entry
    /// keeps its past due time; counting it made every node but the lowest
    /// poll with a zero time-out for ever, a core spinning in an idle
    /// cluster.)
    pub fn next_dial_ns(&self) -> Option<u64> {
        self.undialled().map(|(_, d)| d.next_ns).min()
    }

    /// Peers this node dials that are neither connected nor being
    /// connected, with their dial state (due time, back-off).
    fn undialled(&self) -> impl Iterator<Item = (NodeId, &Dial)> {
        self.dial.iter().filter(|(n, d)| d.slot.is_none() && !self.slots.contains_key(n)).map(|(n, d)| (*n, d))
    }
}

impl EventLoop {
    /// Start connections to the peers this node dials whose time has come.
    pub(super) fn dial_peers(&mut self, now: u64) {
        let Some(net) = self.peers.as_ref() else { return };
        let due: Vec<NodeId> = net.undialled().filter(|(_, d)| d.next_ns <= now).map(|(n, _)| n).collect();
        for n in due {
            let net = self.peers.as_ref().expect("peers");
            let addr = net.addrs[&n];
            let hello = PeerHello {
                magic: PEER_MAGIC,
                wire_version: wire::WIRE_VERSION,
                node_id: self.node_id,
                to_node: n,
                config_digest: net.config_digest,
                incarnation: net.incarnation,
            };
            let slot = match mio::net::TcpStream::connect(addr) {
                Ok(stream) => {
                    let _ = stream.set_nodelay(true);
                    self.add_peer_conn(Stream::Tcp(stream), Peer::Tcp(addr), n)
                }
                Err(e) => {
                    debug!(peer = n, %addr, "connect failed: {e}");
                    None
                }
            };
            match slot {
                Some(slot) => {
                    self.peers.as_mut().expect("peers").dial.get_mut(&n).expect("dialled peer").slot = Some(slot);
                    let c = self.conns[slot].as_mut().expect("new connection");
                    let r = c.send.push_frame(&peer_handshake::encode_peer_hello(&hello));
                    debug_assert!(r.is_ok());
                    self.mark_dirty(slot);
                }
                None => self.dial_failed(n, now),
            }
        }
    }

    /// A dial of `n` failed (or its connection ended): try again later.
    fn dial_failed(&mut self, n: NodeId, now: u64) {
        let Some(d) = self.peers.as_mut().and_then(|p| p.dial.get_mut(&n)) else { return };
        d.slot = None;
        d.failures += 1;
        if d.failures == 1 || d.failures % 50 == 0 {
            info!(
                peer = n,
                attempts = d.failures,
                "data node {n} not reachable yet; retrying every {} ms at most",
                DIAL_BACKOFF_MAX_MS
            );
        }
        d.next_ns = now + d.backoff_ms * 1_000_000;
        d.backoff_ms = (d.backoff_ms * 2).min(DIAL_BACKOFF_MAX_MS);
    }

    /// Register an outgoing connection (readable, and writable to learn when
    /// it is connected).
    fn add_peer_conn(&mut self, stream: Stream, peer: Peer, node: NodeId) -> Option<usize> {
        let (slot, mut conn) = self.open_conn_slot(stream, peer, Interest::READABLE | Interest::WRITABLE)?;
        conn.dialed_peer = Some(node);
        conn.write_interest = true;
        self.conns[slot] = Some(conn);
        self.live_conns += 1;
        Some(slot)
    }

    /// The first frame of an accepted connection was a data node's hello.
    pub(super) fn on_peer_hello(&mut self, slot: usize, frame: &[u8]) {
        let peer = self.conns[slot].as_ref().expect("live").peer;
        let refuse = |this: &mut EventLoop, reason: String| {
            warn!(%peer, "data node handshake refused: {reason}");
            let c = this.conns[slot].as_mut().expect("live connection");
            let _ =
                c.send.push_frame(&peer_handshake::encode_peer_reply(&PeerReply::Refused { reason: reason.clone() }));
            this.mark_close(slot, CloseReason::Refused(reason));
        };
        let h = match peer_handshake::decode_peer_hello(frame) {
            Ok(h) => h,
            Err(e) => return refuse(self, e),
        };
        let Some(net) = self.peers.as_ref() else {
            return refuse(self, format!("node {} runs on its own, not in a cluster", self.node_id));
        };
        if h.wire_version != wire::WIRE_VERSION {
            return refuse(self, format!("wire version {} (this node speaks {})", h.wire_version, wire::WIRE_VERSION));
        }
        if h.to_node != self.node_id {
            return refuse(self, format!("this is data node {}, not {}", self.node_id, h.to_node));
        }
        if !net.addrs.contains_key(&h.node_id) {
            return refuse(self, format!("node {} is not a data node of this cluster's configuration", h.node_id));
        }
        if h.node_id < self.node_id {
            return refuse(self, format!("node {} should be dialled by this node (the higher id dials)", h.node_id));
        }
        if h.config_digest != net.config_digest {
            return refuse(
                self,
                format!(
                    "node {} runs with another cluster configuration (digest {:#x}, this node {:#x}): start every node from the same cluster file (norr mgmd)",
                    h.node_id, h.config_digest, net.config_digest
                ),
            );
        }
        if net.excluded.get(&h.node_id) == Some(&h.incarnation) {
            return refuse(self, format!("node {} was declared failed by the cluster: it must restart", h.node_id));
        }
        if self.opts.api_secret.is_some() {
            // It proves the cluster secret before it is a peer.
            let nonce = match auth::new_nonce() {
                Ok(n) => n,
                Err(e) => return refuse(self, e),
            };
            let c = self.conns[slot].as_mut().expect("live connection");
            let _ = c.send.push_frame(&peer_handshake::encode_peer_reply(&PeerReply::Challenge { nonce }));
            c.peer_auth = Some(PendingPeerAuth { nonce, hello: h });
            self.mark_dirty(slot);
            return;
        }
        self.admit_peer(slot, h);
    }

    /// A challenged data node's answer: a peer if it proves the secret,
    /// else refused and closed (logged with its address).
    pub(super) fn on_peer_auth_response(&mut self, slot: usize, frame: &[u8]) {
        let c = self.conns[slot].as_mut().expect("live connection");
        let peer = c.peer;
        let Some(pending) = c.peer_auth.take() else { return };
        let Some(secret) = self.opts.api_secret.as_ref() else { return };
        let h = pending.hello;
        let context = auth::peer_context(h.node_id, self.node_id, h.incarnation);
        let reason = match auth::decode_auth_response(frame) {
            Err(e) => format!("authentication failed: {e}"),
            Ok(r) if !auth::verify(secret, &pending.nonce, &context, &r) => {
                "authentication failed: wrong cluster secret (the proof does not match this data node's secret)"
                    .to_string()
            }
            Ok(_) => return self.admit_peer(slot, h),
        };
        self.stats.auth_refusals += 1;
        warn!(%peer, node = h.node_id, "data node handshake refused: {reason}");
        let c = self.conns[slot].as_mut().expect("live connection");
        let _ = c.send.push_frame(&peer_handshake::encode_peer_reply(&PeerReply::Refused { reason: reason.clone() }));
        self.mark_close(slot, CloseReason::Refused(reason));
    }

    /// Make an accepted (and, with a secret, authenticated) data node's
    /// connection its link to this node.
    fn admit_peer(&mut self, slot: usize, h: PeerHello) {
        let old = self.peers.as_ref().expect("peers").slots.get(&h.node_id).copied();
        if let Some(old) = old {
            // It restarted before we noticed its old connection end.
            info!(peer = h.node_id, "data node {} connects again: the old connection is closed first", h.node_id);
            self.mark_close(old, CloseReason::Io("replaced by a new connection from the same data node".into()));
            self.close_marked();
        }
        let c = self.conns[slot].as_mut().expect("live connection");
        let welcome =
            PeerReply::Welcome { node_id: self.node_id, incarnation: self.peers.as_ref().expect("peers").incarnation };
        let _ = c.send.push_frame(&peer_handshake::encode_peer_reply(&welcome));
        self.mark_dirty(slot);
        self.peer_up(slot, h.node_id, h.incarnation);
    }

    /// The answer to a hello this node sent.
    pub(super) fn on_peer_reply(&mut self, slot: usize, node: NodeId, frame: &[u8]) {
        match peer_handshake::decode_peer_reply(frame) {
            Ok(PeerReply::Welcome { node_id, incarnation }) if node_id == node => {
                if let Some(d) = self.peers.as_mut().and_then(|p| p.dial.get_mut(&node)) {
                    d.slot = None;
                    d.failures = 0;
                    d.backoff_ms = DIAL_BACKOFF_MIN_MS;
                }
                self.peer_up(slot, node, incarnation);
            }
            Ok(PeerReply::Welcome { node_id, .. }) => {
                let e = format!(
                    "dialled data node {node} but node {node_id} answered: check the addresses in the cluster file"
                );
                warn!("{e}");
                self.mark_close(slot, CloseReason::Protocol(e));
            }
            Ok(PeerReply::Refused { reason }) => {
                warn!(peer = node, "data node {node} refused the connection: {reason}");
                self.mark_close(slot, CloseReason::Refused(reason));
            }
            Ok(PeerReply::Challenge { nonce }) => {
                let Some(secret) = self.opts.api_secret.as_ref() else {
                    let e = format!(
                        "data node {node} requires the cluster secret and this node has none (give every data node \
                         the same secret)"
                    );
                    warn!(peer = node, "{e}");
                    return self.mark_close(slot, CloseReason::Protocol(e));
                };
                let incarnation = self.peers.as_ref().expect("peers").incarnation;
                let answer = auth::respond(secret, &nonce, &auth::peer_context(self.node_id, node, incarnation));
                match answer {
                    Ok(r) => {
                        let c = self.conns[slot].as_mut().expect("live connection");
                        let _ = c.send.push_frame(&auth::encode_auth_response(&r));
                        self.mark_dirty(slot);
                    }
                    Err(e) => self.mark_close(slot, CloseReason::Io(e)),
                }
            }
            Err(e) => self.mark_close(slot, CloseReason::Protocol(e)),
        }
    }

    fn peer_up(&mut self, slot: usize, node: NodeId, incarnation: u64) {
        let c = self.conns[slot].as_mut().expect("live connection");
        c.dialed_peer = None;
        c.data_peer = Some(node);
        let peer = c.peer;
        let net = self.peers.as_mut().expect("peers");
        net.slots.insert(node, slot);
        net.incarnations.insert(node, incarnation);
        info!(%peer, node, "connected to data node {node}");
        self.send_to_qmgr(ClusterSignal::ConnectRep { node });
    }

    /// A frame from a connected data node: one signal for a block here.
    pub(super) fn on_peer_frame(&mut self, slot: usize, node: NodeId, frame: &[u8]) -> bool {
        let env = match wire::decode(frame) {
            Ok(env) => env,
            Err(e) => {
                warn!(peer = node, "undecodable message from data node {node}: {e}; closing the connection");
                self.mark_close(slot, CloseReason::Protocol(e.to_string()));
                return false;
            }
        };
        if env.from.node != node || env.to.node != self.node_id || !self.sched.has_block(env.to) {
            warn!(peer = node, from = %env.from, to = %env.to, signal = env.signal.name(), "misaddressed message from data node {node}; closing the connection");
            self.mark_close(
                slot,
                CloseReason::Protocol(format!("misaddressed {} from {} to {}", env.signal.name(), env.from, env.to)),
            );
            return false;
        }
        self.stats.peer_signals_in += 1;
        if let Err(env) = self.try_deliver(slot, env) {
            self.pause(slot, env);
            return false;
        }
        true
    }

    /// A data node connection ended (either kind).
    pub(super) fn peer_closed(&mut self, c: &Conn) {
        let now = self.now_ns();
        if let Some(n) = c.dialed_peer {
            self.dial_failed(n, now);
        }
        if let Some(n) = c.data_peer {
            let Some(net) = self.peers.as_mut() else { return };
            if net.slots.get(&n).is_some_and(|s| self.conns.get(*s).is_none_or(|x| x.is_none())) {
                net.slots.remove(&n);
            }
            if net.dial.contains_key(&n) {
                self.dial_failed(n, now);
            }
            self.send_to_qmgr(ClusterSignal::DisconnectRep { node: n });
        }
    }

    pub(super) fn send_to_qmgr(&mut self, sig: ClusterSignal) {
        let to = BlockRef::new(self.node_id, block::QMGR, 0);
        if !self.sched.has_block(to) {
            return; // a node without membership (tests of other blocks)
        }
        let env = Envelope {
            from: BlockRef::new(self.node_id, block::HOST, 0),
            to,
            prio: Priority::A,
            signal: Signal::Cluster(Box::new(sig)),
        };
        if let Err(e) = self.sched.deliver(env) {
            warn!(?e, "QMGR did not take a connection report");
        }
    }

    /// Cut a peer off (QMGR declared it failed): refuse it until it restarts.
    pub(super) fn exclude_peer(&mut self, node: NodeId) {
        let Some(net) = self.peers.as_mut() else { return };
        let inc = net.incarnations.get(&node).copied().unwrap_or(0);
        net.excluded.insert(node, inc);
        if let Some(&slot) = net.slots.get(&node) {
            info!(peer = node, "data node {node} declared failed: connection cut");
            self.mark_close(slot, CloseReason::Io("declared failed by the cluster".into()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connected_peer_is_not_due_for_a_dial() {
        let addr = |port| SocketAddr::from(([127, 0, 0, 1], port));
        let addrs = BTreeMap::from([(1, addr(1)), (2, addr(2)), (3, addr(3))]);
        let mut net = PeerNet::new(3, addrs, 0, 1);
        assert_eq!(net.next_dial_ns(), Some(0), "both lower peers are due at once");
        // Node 1 is connected (its entry keeps its past due time); node 2
        // failed once and is due later.
        net.slots.insert(1, 7);
        net.dial.get_mut(&2).expect("node 2 is dialled").next_ns = 5_000;
        assert_eq!(net.next_dial_ns(), Some(5_000), "only node 2 is waited for");
        // Node 2 is being connected: nothing to wake for.
        net.dial.get_mut(&2).expect("node 2 is dialled").slot = Some(8);
        assert_eq!(net.next_dial_ns(), None);
        // Connected: still nothing (the loop may sleep until a signal or timer).
        net.dial.get_mut(&2).expect("node 2 is dialled").slot = None;
        net.slots.insert(2, 8);
        assert_eq!(net.next_dial_ns(), None);
    }
}
