//! A deterministic multi-node harness for QMGR: N data nodes, each a
//! scheduler with a QMGR, a recorder subscribed to it (standing in for TC:
//! it answers `NfCompleteRep`) and HOST / MGM stand-ins; a simulated network
//! with per-pair FIFO links and random delays; an arbitrator shared by all.
//! Faults: node crash and restart, hang and resume, link cuts, network
//! splits, an arbitrator that is down or silent. Virtual time; one seeded
//! xorshift for every random choice, so a seed replays exactly.
//!
//! The harness checks the membership invariants (`check.rs`) after every
//! step and panics with the seed on a violation. Public so the cluster
//! simulator can reuse it: whole data nodes plug in through `builder`
//! (a `NodeBuilder` registers its blocks plus the recorder and host
//! stand-ins from `NodeParts`; every signal between nodes then goes through
//! the simulated network and its faults), or it can take the pieces:
//! `Arbiter` (mgmd's rule), `Checker` (the invariants, fed with the
//! subscriber reports), `XorShift`, the stand-in blocks.
//!
//! Network model: a message sent on an up link arrives after a random delay,
//! in order per direction. A cut (fault, crash, shutdown) drops what is in
//! flight both ways and tells both hosts (`DisconnectRep`). A host asked by
//! QMGR to disconnect a node (`HostDisconnectReq`) closes gracefully: what it
//! sent before still arrives, then the peer sees the connection close; it
//! then refuses that incarnation of the node until it restarts (and forgets
//! the refusal when its own node restarts). A host stopping its node
//! (`HostShutdownReq`) also closes gracefully. A hung node
//! keeps its connections; what reaches it waits until it resumes.

mod arbiter;
mod blocks;
mod check;

pub use arbiter::{Arbiter, ArbiterMode};
pub use blocks::{HostStub, Recorder, RecorderShared};
pub use check::Checker;

use crate::Qmgr;
use norr_kernel::{BlockRef, Envelope, NodeId, Priority, Scheduler};
use norr_knobs::Knobs;
use norr_signals::cluster::{ClusterSignal, Membership, NodeStatus, QmgrMsg, ShutdownReason, StartKind};
use norr_signals::internal::InternalSignal;
use norr_signals::{block, Signal};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A small deterministic random source (xorshift64*).
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> XorShift {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        assert!(lo <= hi);
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.range(0, 99) < percent
    }
}

/// Something that happened, for test assertions and failure reports.
#[derive(Debug, Clone, PartialEq)]
pub enum Happening {
    /// A subscriber signal from QMGR (`ClusterStartedRep`, `NodeJoinedRep`,
    /// `NodeFailRep`).
    Report(ClusterSignal),
    Shutdown {
        reason: ShutdownReason,
        restart: bool,
    },
    /// QMGR asked its host to cut `node` off.
    CutOff {
        node: NodeId,
    },
    ArbitReq {
        generation: u64,
        survivors: Vec<NodeId>,
        failed: Vec<NodeId>,
    },
    ArbitAnswer {
        generation: u64,
        granted: bool,
    },
    /// QMGR refused a leave the host asked for.
    LeaveRefused {
        reason: String,
    },
    /// With `trace` on: a signal delivered to the node.
    Trace(String),
    Crashed,
    Restarted,
    Hung,
    Resumed,
}

#[derive(Debug, Clone)]
pub struct LogEntry {
    pub at_ns: u64,
    pub node: NodeId,
    pub incarnation: u32,
    pub what: Happening,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeState {
    /// Not running (never started, crashed, or shut down).
    Down,
    Up,
    Hung,
}

struct SimNode {
    state: NodeState,
    incarnation: u32,
    sched: Option<Scheduler<Signal>>,
    recorder: Arc<Mutex<RecorderShared>>,
    host_out: Arc<Mutex<Vec<Envelope<Signal>>>>,
    /// Set by the host stub when a block asks to shut the node down: the
    /// harness runs no more of its signals.
    halt: Arc<AtomicBool>,
    /// Signals that reached the node while it was hung.
    held: Vec<Envelope<Signal>>,
    resumed_ns: u64,
    /// The last shutdown asked, if the node is down because of it.
    stopped: Option<(ShutdownReason, bool)>,
}

enum Ev {
    /// A network message, valid while its direction's epoch holds.
    Deliver { from: NodeId, to: NodeId, epoch: u64, env: Envelope<Signal> },
    /// The host (or MGM) of `node` tells its QMGR.
    Host { node: NodeId, incarnation: u32, from_block: u16, sig: ClusterSignal },
    /// Try to connect `a` and `b`.
    Connect { a: NodeId, b: NodeId },
    /// `from` closed its connection to `to` gracefully: `to` sees it now.
    CloseArrives { from: NodeId, to: NodeId, to_incarnation: u32 },
    /// A node whose QMGR asked to be restarted starts again.
    Restart { node: NodeId, incarnation: u32 },
}

struct Timed {
    at_ns: u64,
    seq: u64,
    ev: Ev,
}
impl PartialEq for Timed {
    fn eq(&self, o: &Self) -> bool {
        (self.at_ns, self.seq) == (o.at_ns, o.seq)
    }
}
impl Eq for Timed {}
impl PartialOrd for Timed {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Timed {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at_ns, self.seq).cmp(&(o.at_ns, o.seq))
    }
}

/// Timing of the simulated network and hosts.
#[derive(Debug, Clone)]
pub struct NetConfig {
    /// One-way message delay range (ns).
    pub min_delay_ns: u64,
    pub max_delay_ns: u64,
    /// Time to (re)establish a connection.
    pub connect_delay_ns: (u64, u64),
    /// Delay before a node whose QMGR asked for a restart starts again;
    /// `None`: it stays down.
    pub auto_restart_ns: Option<u64>,
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            min_delay_ns: 50_000,
            max_delay_ns: 2_000_000,
            connect_delay_ns: (1_000_000, 5_000_000),
            auto_restart_ns: Some(200_000_000),
        }
    }
}

fn key(a: NodeId, b: NodeId) -> (NodeId, NodeId) {
    (a.min(b), a.max(b))
}

fn cluster_sig(s: ClusterSignal) -> Signal {
    Signal::Cluster(Box::new(s))
}

/// The subscriber block every simulated node's QMGR reports to (the
/// stand-in TC; a builder of whole nodes puts the recorder at
/// `RECORDER_BLOCK` instead, see `NodeParts`).
pub fn recorder_ref(node: NodeId) -> BlockRef {
    BlockRef::new(node, block::TC, 0)
}

/// Where a builder of whole data nodes (with a real TC) registers the
/// recorder: a block number no data node block uses.
pub const RECORDER_BLOCK: u16 = 63;

/// What a node builder gets to build one incarnation of a simulated node.
pub struct NodeParts<'a> {
    pub node: NodeId,
    pub incarnation: u32,
    pub node_groups: &'a [Vec<NodeId>],
    pub knobs: &'a Knobs,
    recorder: Arc<Mutex<RecorderShared>>,
    host_out: Arc<Mutex<Vec<Envelope<Signal>>>>,
    halt: Arc<AtomicBool>,
}

impl NodeParts<'_> {
    /// The recorder: register it (at `recorder_ref(node)`, or at
    /// `RECORDER_BLOCK` next to a real TC) and list it among QMGR's
    /// subscribers: the harness checks the membership invariants on what it
    /// records.
    pub fn recorder(&self) -> Recorder {
        Recorder { shared: self.recorder.clone(), plays_tc: true }
    }

    /// A recorder next to a real TC (it does not answer `NfCompleteRep`):
    /// register it at `RECORDER_BLOCK` and set `QmgrCluster::recorder_block`.
    pub fn observer(&self) -> Recorder {
        Recorder { shared: self.recorder.clone(), plays_tc: false }
    }

    /// The host / MGM stand-in: register it at `block::HOST` and
    /// `block::MGM`.
    pub fn host_stub(&self) -> HostStub {
        HostStub { out: self.host_out.clone(), halt: self.halt.clone() }
    }
}

/// Builds one incarnation of a simulated node (`QmgrCluster::builder`).
pub type NodeBuilder = Box<dyn FnMut(&NodeParts<'_>) -> Scheduler<Signal> + Send>;

/// The default node: QMGR, the recorder as its only subscriber (standing in
/// for TC), the host and MGM stand-ins.
pub fn qmgr_only_node(parts: &NodeParts<'_>) -> Scheduler<Signal> {
    let node = parts.node;
    let mut sched = Scheduler::new(node, 1 << 16);
    let qmgr = Qmgr::new(node, parts.node_groups.to_vec(), parts.knobs, vec![recorder_ref(node)]);
    sched.add_block(block::QMGR, 0, Box::new(qmgr));
    sched.add_block(block::TC, 0, Box::new(parts.recorder()));
    sched.add_block(block::HOST, 0, Box::new(parts.host_stub()));
    sched.add_block(block::MGM, 0, Box::new(parts.host_stub()));
    sched
}

pub struct QmgrCluster {
    pub seed: u64,
    pub now_ns: u64,
    pub knobs: Knobs,
    pub node_groups: Vec<Vec<NodeId>>,
    pub net: NetConfig,
    pub arbiter: Arbiter,
    pub arbiter_mode: ArbiterMode,
    pub log: Vec<LogEntry>,
    pub checker: Checker,
    rng: XorShift,
    nodes: BTreeMap<NodeId, SimNode>,
    events: BinaryHeap<Reverse<Timed>>,
    seq: u64,
    links_up: BTreeSet<(NodeId, NodeId)>,
    connecting: BTreeSet<(NodeId, NodeId)>,
    /// Per direction: bumped when what is in flight becomes void.
    epochs: BTreeMap<(NodeId, NodeId), u64>,
    /// Per direction: when the last message sent is due (FIFO).
    last_due: BTreeMap<(NodeId, NodeId), u64>,
    cuts: BTreeSet<(NodeId, NodeId)>,
    split: Option<(BTreeSet<NodeId>, BTreeSet<NodeId>)>,
    /// (closer, closed) -> the incarnation of `closed` refused.
    bans: BTreeMap<(NodeId, NodeId), u32>,
    /// Messages dropped because their link was down or cut.
    pub dropped: u64,
    /// Log every signal delivered to a QMGR (for debugging a seed).
    pub trace: bool,
    /// Builds each node incarnation; `None`: `qmgr_only_node`.
    pub builder: Option<NodeBuilder>,
    /// Where the recorder block is (`block::TC` in `qmgr_only_node`).
    pub recorder_block: u16,
    /// Signals the nodes sent to API nodes (any node id that is not a data
    /// node of the cluster), in the order sent.
    pub api_inbox: Vec<Envelope<Signal>>,
    /// The last `NodeStatusRep` each node's DIH sent its host (a builder
    /// with DIH), for its current incarnation.
    status: BTreeMap<NodeId, NodeStatus>,
    /// The GCI each node's CKPT said the cluster restarts to
    /// (`SystemRestartRep`), at its last system restart.
    pub system_restart_gci: BTreeMap<NodeId, u64>,
    /// The last `DurableGciRep` each node's CKPT sent its host.
    durable: BTreeMap<NodeId, (u64, bool)>,
    /// Directions (from, to) that lose every message while the connection
    /// stays up (no `DisconnectRep`): a one-way fault for tests.
    drops: BTreeSet<(NodeId, NodeId)>,
}

impl QmgrCluster {
    /// A cluster of `node_groups` (its nodes not started yet).
    pub fn new(seed: u64, node_groups: Vec<Vec<NodeId>>, knobs: Knobs) -> QmgrCluster {
        let window = stale_window_ns(&knobs);
        let mut nodes = BTreeMap::new();
        for n in node_groups.iter().flatten() {
            nodes.insert(
                *n,
                SimNode {
                    state: NodeState::Down,
                    incarnation: 0,
                    sched: None,
                    recorder: Arc::default(),
                    host_out: Arc::default(),
                    halt: Arc::default(),
                    held: Vec::new(),
                    resumed_ns: 0,
                    stopped: None,
                },
            );
        }
        QmgrCluster {
            seed,
            now_ns: 0,
            knobs,
            node_groups,
            net: NetConfig::default(),
            arbiter: Arbiter::default(),
            arbiter_mode: ArbiterMode::Up,
            log: Vec::new(),
            checker: Checker::new(window),
            rng: XorShift::new(seed),
            nodes,
            events: BinaryHeap::new(),
            seq: 0,
            links_up: BTreeSet::new(),
            connecting: BTreeSet::new(),
            epochs: BTreeMap::new(),
            last_due: BTreeMap::new(),
            cuts: BTreeSet::new(),
            split: None,
            bans: BTreeMap::new(),
            dropped: 0,
            trace: std::env::var("NORR_QMGR_TRACE").is_ok(),
            builder: None,
            recorder_block: block::TC,
            api_inbox: Vec::new(),
            status: BTreeMap::new(),
            durable: BTreeMap::new(),
            system_restart_gci: BTreeMap::new(),
            drops: BTreeSet::new(),
        }
    }

    pub fn node_ids(&self) -> Vec<NodeId> {
        self.nodes.keys().copied().collect()
    }

    pub fn rng(&mut self) -> &mut XorShift {
        &mut self.rng
    }

    fn push(&mut self, at_ns: u64, ev: Ev) {
        self.seq += 1;
        self.events.push(Reverse(Timed { at_ns, seq: self.seq, ev }));
    }

    fn note(&mut self, node: NodeId, what: Happening) {
        let incarnation = self.nodes[&node].incarnation;
        self.log.push(LogEntry { at_ns: self.now_ns, node, incarnation, what });
    }

    fn fail(&self, msg: String) -> ! {
        // NORR_QMGR_TAIL=n shows more of the log.
        let n = std::env::var("NORR_QMGR_TAIL").ok().and_then(|s| s.parse().ok()).unwrap_or(40);
        panic!("seed {}: at {:.3} ms: {msg}\nlast events:\n{}", self.seed, self.now_ns as f64 / 1e6, self.log_tail(n));
    }

    /// The last `n` log entries, one a line (for failure messages).
    pub fn log_tail(&self, n: usize) -> String {
        let skip = self.log.len().saturating_sub(n);
        let lines: Vec<String> = self.log[skip..]
            .iter()
            .map(|e| format!("  {:>9.3} ms  node {} #{}: {:?}", e.at_ns as f64 / 1e6, e.node, e.incarnation, e.what))
            .collect();
        lines.join("\n")
    }

    // ------------------------------------------------------------ nodes

    /// Start (or restart) `node` as a new incarnation: its links connect and
    /// its host sends `QmgrStartReq` soon after.
    pub fn start(&mut self, node: NodeId) {
        let now = self.now_ns;
        let n = self.nodes.get_mut(&node).expect("a node of the cluster");
        assert_eq!(n.state, NodeState::Down, "node {node} is running");
        n.incarnation += 1;
        n.recorder = Arc::default();
        n.host_out = Arc::default();
        n.halt = Arc::default();
        n.held.clear();
        n.stopped = None;
        n.resumed_ns = now;
        // Its refusals were its previous life's: a new QMGR judges afresh.
        self.bans.retain(|(closer, _), _| *closer != node);
        let parts = NodeParts {
            node,
            incarnation: n.incarnation,
            node_groups: &self.node_groups,
            knobs: &self.knobs,
            recorder: n.recorder.clone(),
            host_out: n.host_out.clone(),
            halt: n.halt.clone(),
        };
        let mut sched = match self.builder.as_mut() {
            Some(build) => build(&parts),
            None => qmgr_only_node(&parts),
        };
        sched.advance_to(now);
        n.sched = Some(sched);
        n.state = NodeState::Up;
        let incarnation = n.incarnation;
        if incarnation > 1 {
            self.note(node, Happening::Restarted);
        }
        let delay = self.rng.range(0, 3_000_000);
        let sig = ClusterSignal::QmgrStartReq { kind: StartKind::Initial };
        self.push(now + delay, Ev::Host { node, incarnation, from_block: block::HOST, sig });
        self.refresh_links();
    }

    pub fn start_all(&mut self) {
        for n in self.node_ids() {
            self.start(n);
        }
    }

    /// kill -9: the node's connections break at once.
    pub fn crash(&mut self, node: NodeId) {
        if self.nodes[&node].state == NodeState::Down {
            return;
        }
        self.note(node, Happening::Crashed);
        self.take_down(node);
    }

    fn take_down(&mut self, node: NodeId) {
        self.status.remove(&node);
        let n = self.nodes.get_mut(&node).expect("node");
        n.state = NodeState::Down;
        n.sched = None;
        n.held.clear();
        self.checker.node_down(node);
        self.refresh_links();
    }

    /// A host stopping its node on request closes its connections after
    /// what the node sent (as `graceful_close`, without refusing it later).
    fn shut_down(&mut self, node: NodeId) {
        let peers: Vec<NodeId> = self.node_ids().into_iter().filter(|p| self.link_up(node, *p)).collect();
        let now = self.now_ns;
        for p in peers {
            self.links_up.remove(&key(node, p));
            self.bump(p, node);
            let at = (*self.last_due.get(&(node, p)).unwrap_or(&0)).max(now) + 1;
            let to_incarnation = self.nodes[&p].incarnation;
            self.push(at, Ev::CloseArrives { from: node, to: p, to_incarnation });
        }
        self.take_down(node);
    }

    /// The node stops running (SIGSTOP); its connections stay.
    pub fn hang(&mut self, node: NodeId) {
        if self.nodes[&node].state != NodeState::Up {
            return;
        }
        self.note(node, Happening::Hung);
        self.nodes.get_mut(&node).expect("node").state = NodeState::Hung;
    }

    /// SIGCONT: it runs again and reads what reached it meanwhile.
    pub fn resume(&mut self, node: NodeId) {
        if self.nodes[&node].state != NodeState::Hung {
            return;
        }
        self.note(node, Happening::Resumed);
        let now = self.now_ns;
        let n = self.nodes.get_mut(&node).expect("node");
        n.state = NodeState::Up;
        n.resumed_ns = now;
        let held = std::mem::take(&mut n.held);
        let sched = n.sched.as_mut().expect("a running node");
        sched.advance_to(now);
        for env in held {
            // QMGR's signals are priority A: never refused.
            let _ = sched.deliver(env);
        }
    }

    pub fn state(&self, node: NodeId) -> NodeState {
        self.nodes[&node].state
    }

    pub fn incarnation(&self, node: NodeId) -> u32 {
        self.nodes[&node].incarnation
    }

    /// The node's host asks it to leave the cluster (`norr mgm stop`).
    pub fn leave(&mut self, node: NodeId) {
        let from = BlockRef::new(node, block::HOST, 0);
        let env = Envelope {
            from,
            to: BlockRef::new(node, block::QMGR, 0),
            prio: Priority::A,
            signal: cluster_sig(ClusterSignal::Qmgr(QmgrMsg::LeaveReq { node })),
        };
        self.deliver_local(node, env);
    }

    /// Hold (or stop holding) the `NfCompleteRep` answers of `node`'s
    /// stand-in TC.
    pub fn hold_nf_complete(&mut self, node: NodeId, hold: bool) {
        self.nodes[&node].recorder.lock().expect("lock").hold_nf_complete = hold;
    }

    /// Send the held `NfCompleteRep`s of `node`'s stand-in TC.
    pub fn release_nf_complete(&mut self, node: NodeId) {
        let held = std::mem::take(&mut self.nodes[&node].recorder.lock().expect("lock").held_nf_complete);
        for f in held {
            let env = Envelope {
                from: BlockRef::new(node, self.recorder_block, 0),
                to: BlockRef::new(node, block::QMGR, 0),
                prio: Priority::A,
                signal: cluster_sig(ClusterSignal::NfCompleteRep { node: f }),
            };
            self.deliver_local(node, env);
        }
    }

    /// The named counters of `node`'s QMGR (through `StatsReq`).
    pub fn counters(&mut self, node: NodeId) -> Vec<(String, u64)> {
        self.block_counters(node, block::QMGR, 0)
    }

    /// The counters of block `b` instance `instance` on `node` (empty if
    /// the node is down or the block does not answer `StatsReq`).
    pub fn block_counters(&mut self, node: NodeId, b: u16, instance: u16) -> Vec<(String, u64)> {
        let env = Envelope {
            from: BlockRef::new(node, self.recorder_block, 0),
            to: BlockRef::new(node, b, instance),
            prio: Priority::B,
            signal: Signal::Internal(Box::new(InternalSignal::StatsReq { req: 1 })),
        };
        self.deliver_local(node, env);
        self.run_ready();
        self.nodes[&node].recorder.lock().expect("lock").stats.take().unwrap_or_default()
    }

    pub fn counter(&mut self, node: NodeId, name: &str) -> u64 {
        self.counters(node).into_iter().find(|(k, _)| k == name).map_or(0, |(_, v)| v)
    }

    fn deliver_local(&mut self, node: NodeId, env: Envelope<Signal>) {
        if self.trace && env.to.block == block::QMGR && self.nodes[&node].state != NodeState::Down {
            let what = match &env.signal {
                Signal::Cluster(c) => format!("{} -> {:?}", env.from, c),
                other => format!("{} -> {}", env.from, other.name()),
            };
            self.note(node, Happening::Trace(what));
        }
        let n = self.nodes.get_mut(&node).expect("node");
        match n.state {
            NodeState::Up => {
                let _ = n.sched.as_mut().expect("running").deliver(env);
            }
            NodeState::Hung => n.held.push(env),
            NodeState::Down => {}
        }
    }

    // ------------------------------------------------------------ network

    pub fn cut(&mut self, a: NodeId, b: NodeId) {
        self.cuts.insert(key(a, b));
        self.refresh_links();
    }

    pub fn heal(&mut self, a: NodeId, b: NodeId) {
        self.cuts.remove(&key(a, b));
        self.refresh_links();
    }

    /// Cut every link between `side_a` and `side_b`.
    pub fn split(&mut self, side_a: &[NodeId], side_b: &[NodeId]) {
        self.split = Some((side_a.iter().copied().collect(), side_b.iter().copied().collect()));
        self.refresh_links();
    }

    pub fn heal_split(&mut self) {
        self.split = None;
        self.refresh_links();
    }

    pub fn heal_all(&mut self) {
        self.split = None;
        self.cuts.clear();
        self.refresh_links();
    }

    /// Lose (or stop losing) every message from `from` to `to` while the
    /// connection stays up: the peers notice only by missed heartbeats.
    pub fn set_drop(&mut self, from: NodeId, to: NodeId, drop: bool) {
        if drop {
            self.drops.insert((from, to));
            // What is in flight is lost too.
            self.bump(from, to);
        } else {
            self.drops.remove(&(from, to));
        }
    }

    /// An API node `from` (a node id that is no data node) sends `signal`
    /// to `to` (delivered now; a node that is down loses it).
    pub fn send_from_api(&mut self, from: BlockRef, to: BlockRef, signal: Signal, prio: Priority) {
        assert!(!self.nodes.contains_key(&from.node), "API node {} is a data node's id", from.node);
        self.deliver_local(to.node, Envelope { from, to, prio, signal });
    }

    /// Take what was sent to API node `api` so far, in order.
    pub fn take_api(&mut self, api: NodeId) -> Vec<Envelope<Signal>> {
        let (mine, rest): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.api_inbox).into_iter().partition(|e| e.to.node == api);
        self.api_inbox = rest;
        mine
    }

    /// How `node` stands, as its DIH last told its host.
    /// What `node`'s files can restore to, as its CKPT last told its host:
    /// (GCI, complete copy).
    pub fn durable_gci(&self, node: NodeId) -> Option<(u64, bool)> {
        self.durable.get(&node).copied()
    }

    pub fn node_status(&self, node: NodeId) -> Option<&NodeStatus> {
        self.status.get(&node)
    }

    pub fn link_up(&self, a: NodeId, b: NodeId) -> bool {
        self.links_up.contains(&key(a, b))
    }

    fn alive(&self, n: NodeId) -> bool {
        self.nodes[&n].state != NodeState::Down
    }

    fn may_connect(&self, a: NodeId, b: NodeId) -> bool {
        let split = self
            .split
            .as_ref()
            .is_some_and(|(x, y)| (x.contains(&a) && y.contains(&b)) || (x.contains(&b) && y.contains(&a)));
        let banned = self.bans.get(&(a, b)) == Some(&self.nodes[&b].incarnation)
            || self.bans.get(&(b, a)) == Some(&self.nodes[&a].incarnation);
        self.alive(a) && self.alive(b) && !split && !banned && !self.cuts.contains(&key(a, b))
    }

    fn bump(&mut self, from: NodeId, to: NodeId) {
        *self.epochs.entry((from, to)).or_insert(0) += 1;
    }

    fn host_event(&mut self, node: NodeId, at_ns: u64, sig: ClusterSignal) {
        if !self.alive(node) {
            return;
        }
        let incarnation = self.nodes[&node].incarnation;
        self.push(at_ns, Ev::Host { node, incarnation, from_block: block::HOST, sig });
    }

    /// Bring every link in line with the faults and node states.
    fn refresh_links(&mut self) {
        let ids = self.node_ids();
        for (i, a) in ids.iter().enumerate() {
            for b in &ids[i + 1..] {
                let (a, b) = (*a, *b);
                let k = key(a, b);
                let may = self.may_connect(a, b);
                if self.links_up.contains(&k) && !may {
                    // Abrupt: what is in flight is lost.
                    self.links_up.remove(&k);
                    self.bump(a, b);
                    self.bump(b, a);
                    let now = self.now_ns;
                    let d = self.rng.range(0, 1_000_000);
                    self.host_event(a, now + d, ClusterSignal::DisconnectRep { node: b });
                    let d = self.rng.range(0, 1_000_000);
                    self.host_event(b, now + d, ClusterSignal::DisconnectRep { node: a });
                } else if !self.links_up.contains(&k) && may && !self.connecting.contains(&k) {
                    self.connecting.insert(k);
                    let (lo, hi) = self.net.connect_delay_ns;
                    let at = self.now_ns + self.rng.range(lo, hi);
                    self.push(at, Ev::Connect { a, b });
                }
            }
        }
    }

    fn send(&mut self, from: NodeId, env: Envelope<Signal>) {
        let to = env.to.node;
        if !self.nodes.contains_key(&to) {
            // An API node: the kit's caller collects it.
            self.api_inbox.push(env);
            return;
        }
        if !self.links_up.contains(&key(from, to)) || self.drops.contains(&(from, to)) {
            self.dropped += 1;
            return;
        }
        let delay = self.rng.range(self.net.min_delay_ns, self.net.max_delay_ns);
        let due = (self.now_ns + delay).max(*self.last_due.get(&(from, to)).unwrap_or(&0));
        self.last_due.insert((from, to), due);
        let epoch = *self.epochs.get(&(from, to)).unwrap_or(&0);
        self.push(due, Ev::Deliver { from, to, epoch, env });
    }

    /// `closer`'s host closes its connection to `closed` and refuses this
    /// incarnation of it from now on.
    fn graceful_close(&mut self, closer: NodeId, closed: NodeId) {
        let incarnation = self.nodes[&closed].incarnation;
        self.bans.insert((closer, closed), incarnation);
        let k = key(closer, closed);
        if !self.links_up.remove(&k) {
            return;
        }
        self.bump(closed, closer);
        let now = self.now_ns;
        self.host_event(closer, now, ClusterSignal::DisconnectRep { node: closed });
        let at = (*self.last_due.get(&(closer, closed)).unwrap_or(&0)).max(now) + 1;
        self.push(at, Ev::CloseArrives { from: closer, to: closed, to_incarnation: incarnation });
    }

    // ------------------------------------------------------------ running

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Deliver { from, to, epoch, env } => {
                if *self.epochs.get(&(from, to)).unwrap_or(&0) != epoch {
                    self.dropped += 1;
                    return;
                }
                self.deliver_local(to, env);
            }
            Ev::Host { node, incarnation, from_block, sig } => {
                if self.nodes[&node].incarnation != incarnation {
                    return;
                }
                let env = Envelope {
                    from: BlockRef::new(node, from_block, 0),
                    to: BlockRef::new(node, block::QMGR, 0),
                    prio: Priority::A,
                    signal: cluster_sig(sig),
                };
                self.deliver_local(node, env);
            }
            Ev::Connect { a, b } => {
                let k = key(a, b);
                self.connecting.remove(&k);
                if self.links_up.contains(&k) || !self.may_connect(a, b) {
                    return;
                }
                self.links_up.insert(k);
                self.bump(a, b);
                self.bump(b, a);
                let now = self.now_ns;
                self.host_event(a, now, ClusterSignal::ConnectRep { node: b });
                self.host_event(b, now, ClusterSignal::ConnectRep { node: a });
            }
            Ev::CloseArrives { from, to, to_incarnation } => {
                if self.nodes[&to].incarnation != to_incarnation {
                    return;
                }
                self.bump(from, to);
                let now = self.now_ns;
                self.host_event(to, now, ClusterSignal::DisconnectRep { node: from });
            }
            Ev::Restart { node, incarnation } => {
                if self.nodes[&node].incarnation == incarnation && self.nodes[&node].state == NodeState::Down {
                    self.start(node);
                }
            }
        }
    }

    /// Run every running node until none has work; route what they send.
    pub fn run_ready(&mut self) {
        loop {
            let mut ran = false;
            for id in self.node_ids() {
                let n = self.nodes.get_mut(&id).expect("node");
                if n.state != NodeState::Up {
                    continue;
                }
                let sched = n.sched.as_mut().expect("running");
                sched.advance_to(self.now_ns);
                let mut budget = 100_000;
                while budget > 0 && !n.halt.load(Ordering::SeqCst) && sched.run_one() {
                    budget -= 1;
                    ran = true;
                }
                let remote = sched.take_remote();
                for env in remote {
                    self.send(id, env);
                }
                self.collect(id);
            }
            if !ran {
                break;
            }
        }
        let running: BTreeMap<NodeId, u64> =
            self.nodes.iter().filter(|(_, n)| n.state == NodeState::Up).map(|(id, n)| (*id, n.resumed_ns)).collect();
        if let Err(e) = self.checker.check_stale(self.now_ns, &running) {
            self.fail(e);
        }
    }

    /// Take what a node's QMGR told its recorder and its host.
    fn collect(&mut self, id: NodeId) {
        let (entries, host_out) = {
            let n = &self.nodes[&id];
            let entries = std::mem::take(&mut n.recorder.lock().expect("lock").entries);
            let host_out = std::mem::take(&mut *n.host_out.lock().expect("lock"));
            (entries, host_out)
        };
        for (_, sig) in entries {
            if let Err(e) = self.checker.record(self.now_ns, id, &sig) {
                self.fail(e);
            }
            self.note(id, Happening::Report(sig));
        }
        for env in host_out {
            let Signal::Cluster(sig) = env.signal else { continue };
            match *sig {
                ClusterSignal::HostDisconnectReq { node } => {
                    self.note(id, Happening::CutOff { node });
                    self.graceful_close(id, node);
                }
                ClusterSignal::HostShutdownReq { reason, restart } => {
                    self.note(id, Happening::Shutdown { reason: reason.clone(), restart });
                    if self.nodes[&id].state == NodeState::Down {
                        continue;
                    }
                    self.shut_down(id);
                    self.nodes.get_mut(&id).expect("node").stopped = Some((reason, restart));
                    if let (true, Some(delay)) = (restart, self.net.auto_restart_ns) {
                        let incarnation = self.nodes[&id].incarnation;
                        self.push(self.now_ns + delay, Ev::Restart { node: id, incarnation });
                    }
                    return;
                }
                ClusterSignal::ArbitReq { generation, survivors, failed } => {
                    self.note(id, Happening::ArbitReq { generation, survivors: survivors.clone(), failed });
                    self.arbitrate(id, generation, &survivors);
                }
                ClusterSignal::Qmgr(QmgrMsg::LeaveRef { reason, .. }) => {
                    self.note(id, Happening::LeaveRefused { reason });
                }
                ClusterSignal::NodeStatusRep(status) => {
                    self.status.insert(id, *status);
                }
                ClusterSignal::DurableGciRep { gci, complete_copy } => {
                    self.durable.insert(id, (gci, complete_copy));
                }
                ClusterSignal::SystemRestartRep { gci, restored } => {
                    if restored > gci {
                        self.fail(format!("node {id} restarts to GCI {gci}, below the {restored} it restored"));
                    }
                    self.system_restart_gci.insert(id, gci);
                }
                other => self.fail(format!("node {id}'s QMGR sent its host {other:?}")),
            }
        }
    }

    fn arbitrate(&mut self, node: NodeId, generation: u64, survivors: &[NodeId]) {
        let (granted, reason, delay) = match self.arbiter_mode {
            ArbiterMode::Silent => return,
            ArbiterMode::Down => (false, "no arbitrator connected".to_string(), 0),
            ArbiterMode::Up => {
                let d = 2 * self.rng.range(self.net.min_delay_ns, self.net.max_delay_ns);
                match self.arbiter.decide(node, generation, survivors) {
                    Ok(()) => (true, String::new(), d),
                    Err(e) => (false, e, d),
                }
            }
        };
        self.note(node, Happening::ArbitAnswer { generation, granted });
        let incarnation = self.nodes[&node].incarnation;
        let sig = ClusterSignal::ArbitConf { generation, granted, reason };
        self.push(self.now_ns + delay, Ev::Host { node, incarnation, from_block: block::MGM, sig });
    }

    /// Run until virtual time `until_ns`.
    pub fn run_until(&mut self, until_ns: u64) {
        loop {
            self.run_ready();
            let next_ev = self.events.peek().map(|Reverse(t)| t.at_ns);
            let next_timer = self
                .nodes
                .values()
                .filter(|n| n.state == NodeState::Up)
                .filter_map(|n| n.sched.as_ref().and_then(|s| s.next_timer_ns()))
                .min();
            let next = match (next_ev, next_timer) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => a.or(b).unwrap_or(u64::MAX),
            };
            if next > until_ns {
                self.now_ns = self.now_ns.max(until_ns);
                self.run_ready();
                return;
            }
            self.now_ns = self.now_ns.max(next);
            while self.events.peek().is_some_and(|Reverse(t)| t.at_ns <= self.now_ns) {
                let Reverse(t) = self.events.pop().expect("peeked");
                self.handle(t.ev);
            }
        }
    }

    pub fn run_for_ms(&mut self, ms: u64) {
        let until = self.now_ns + ms * 1_000_000;
        self.run_until(until);
    }

    /// Run until `done` holds (checked after each step), at most `max_ms`.
    /// Returns whether it held.
    pub fn run_until_cond(&mut self, max_ms: u64, mut done: impl FnMut(&QmgrCluster) -> bool) -> bool {
        let until = self.now_ns + max_ms * 1_000_000;
        loop {
            if done(self) {
                return true;
            }
            if self.now_ns >= until {
                return false;
            }
            let step = (self.now_ns + 1_000_000).min(until);
            self.run_until(step);
        }
    }

    // ------------------------------------------------------------ views

    /// The membership `node`'s current incarnation holds, if a member.
    pub fn membership(&self, node: NodeId) -> Option<&Membership> {
        self.checker.view(node)
    }

    /// The reports `node` (any incarnation) got, in order.
    /// The serve leases `node`'s QMGR gave its TCs: (virtual time, until).
    pub fn leases(&self, node: NodeId) -> Vec<(u64, u64)> {
        self.nodes[&node].recorder.lock().expect("lock").leases.clone()
    }

    /// When `node`'s QMGR revoked its TCs' serve lease (virtual times).
    pub fn revocations(&self, node: NodeId) -> Vec<u64> {
        self.nodes[&node].recorder.lock().expect("lock").revocations.clone()
    }

    pub fn reports(&self, node: NodeId) -> Vec<(u32, ClusterSignal)> {
        self.log
            .iter()
            .filter(|e| e.node == node)
            .filter_map(|e| match &e.what {
                Happening::Report(s) => Some((e.incarnation, s.clone())),
                _ => None,
            })
            .collect()
    }

    /// `NodeFailRep`s `node` got at or after `since_ns`: (time, failed,
    /// membership).
    pub fn fail_reports_since(&self, node: NodeId, since_ns: u64) -> Vec<(u64, Vec<NodeId>, Membership)> {
        self.log
            .iter()
            .filter(|e| e.node == node && e.at_ns >= since_ns)
            .filter_map(|e| match &e.what {
                Happening::Report(ClusterSignal::NodeFailRep { failed, membership }) => {
                    Some((e.at_ns, failed.clone(), membership.clone()))
                }
                _ => None,
            })
            .collect()
    }

    /// `NodeJoinedRep`s `node` got at or after `since_ns`: (time, joined node).
    pub fn join_reports_since(&self, node: NodeId, since_ns: u64) -> Vec<(u64, NodeId)> {
        self.log
            .iter()
            .filter(|e| e.node == node && e.at_ns >= since_ns)
            .filter_map(|e| match &e.what {
                Happening::Report(ClusterSignal::NodeJoinedRep { node, .. }) => Some((e.at_ns, *node)),
                _ => None,
            })
            .collect()
    }

    pub fn shutdowns(&self, node: NodeId) -> Vec<(ShutdownReason, bool)> {
        self.log
            .iter()
            .filter(|e| e.node == node)
            .filter_map(|e| match &e.what {
                Happening::Shutdown { reason, restart } => Some((reason.clone(), *restart)),
                _ => None,
            })
            .collect()
    }

    /// Arbitration requests of membership rounds (not registrations).
    pub fn arbit_requests(&self) -> Vec<&LogEntry> {
        self.log
            .iter()
            .filter(|e| matches!(&e.what, Happening::ArbitReq { failed, .. } if !failed.is_empty()))
            .collect()
    }

    /// Generations presidents registered with the arbitrator.
    pub fn registrations(&self) -> Vec<(NodeId, u64)> {
        self.log
            .iter()
            .filter_map(|e| match &e.what {
                Happening::ArbitReq { generation, failed, .. } if failed.is_empty() => Some((e.node, *generation)),
                _ => None,
            })
            .collect()
    }

    /// Why `node` is down, if it shut down.
    pub fn stopped(&self, node: NodeId) -> Option<&(ShutdownReason, bool)> {
        self.nodes[&node].stopped.as_ref()
    }

    /// Nodes up (or hung) that are members, by generation.
    pub fn members_by_generation(&self) -> BTreeMap<u64, Vec<NodeId>> {
        let mut out: BTreeMap<u64, Vec<NodeId>> = BTreeMap::new();
        for id in self.node_ids() {
            if let Some(m) = self.membership(id) {
                out.entry(m.generation).or_default().push(id);
            }
        }
        out
    }

    /// Every running node is a member of one and the same generation, whose
    /// members are exactly the running nodes. `Err` says what is not so.
    pub fn settled(&self) -> Result<Membership, String> {
        let running: Vec<NodeId> = self.node_ids().into_iter().filter(|n| self.alive(*n)).collect();
        let mut view: Option<&Membership> = None;
        for n in &running {
            let Some(m) = self.membership(*n) else { return Err(format!("node {n} is running but no member")) };
            if view.is_some_and(|v| v != m) {
                return Err(format!("node {n} has {m:?}, another node {view:?}"));
            }
            view = Some(m);
        }
        let Some(v) = view else { return Err("no node is running".into()) };
        if v.members != running {
            return Err(format!("members {:?} but running {running:?}", v.members));
        }
        Ok(v.clone())
    }
}

/// How long a member left out by a newer generation may keep running
/// (hearing of it, or its own failure round with an arbitration, must
/// end it sooner).
pub fn stale_window_ns(knobs: &Knobs) -> u64 {
    let hb = knobs.heartbeat_interval_ms * 1_000_000;
    let missed = knobs.missed_heartbeats as u64;
    let protocol = hb * (missed + 1) * 2;
    hb * (missed + 2) + knobs.arbitration_timeout_ms * 1_000_000 + 3 * protocol + 100_000_000
}
