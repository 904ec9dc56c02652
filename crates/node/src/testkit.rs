//! Several data nodes in one thread, for tests of the cluster protocols.
//!
//! Each node is a scheduler from [`build_cluster_node_observed`] (TC, LQH,
//! DICT, DIH and the real QMGR) plus stand-ins for the host's blocks, run in
//! `norr_cluster::qmgr_testkit::QmgrCluster`: virtual time, a simulated
//! network with per-pair FIFO links and seeded random delays, connections
//! that the hosts report to QMGR, heartbeats, an arbitrator with mgmd's
//! rule, and the faults a cluster meets (crash, hang, network split,
//! one-way message loss). Membership is QMGR's own: a crashed node is
//! noticed by its broken connections, a hung one by missed heartbeats. The
//! harness checks QMGR's invariants after every step.
//!
//! API nodes are the kit too: requests are sent from `BlockRef(api,
//! block::API, 0)` and their answers collected in an inbox.
//!
//! Deterministic: the same calls with the same seed deliver the same
//! messages in the same order.

use crate::{build_cluster_node_observed, Topology};
use norr_cluster::qmgr_testkit::{NetConfig, NodeParts, NodeState, QmgrCluster, RECORDER_BLOCK};
use norr_kernel::{BlockRef, Envelope, NodeId, Priority};
use norr_knobs::Knobs;
use norr_signals::cluster::{Membership, NodeStatus, ShutdownReason};
use norr_signals::{block, Signal};

/// Virtual time `run` gives the cluster: far more than any exchange of a
/// request takes on the kit's network (delays up to 0.5 ms a hop).
const RUN_SLICE_MS: u64 = 50;

/// Longest a request may wait for its answer (`call`): past every time-out
/// of the protocols (failure detection, arbitration, lock waits).
const CALL_LIMIT_MS: u64 = 30_000;

/// The API node `ask` and `internal_ask` use.
const ASK_API: NodeId = 99;

pub struct ClusterKit {
    pub knobs: Knobs,
    cluster: QmgrCluster,
    next_handle: u64,
}

impl ClusterKit {
    /// Data nodes `node_groups`, all started together: returns once they
    /// formed the cluster and every node's DIH reports it started.
    pub fn start(node_groups: Vec<Vec<NodeId>>, knobs: Knobs, seed: u64) -> ClusterKit {
        ClusterKit::start_with(node_groups, knobs, seed, build_cluster_node_observed)
    }

    /// [`ClusterKit::start`] with nodes built by `build(topology, knobs,
    /// observers)` (e.g. `norr_node::durable::build_durable_observed` on a
    /// simulated disk): every incarnation of every node is built by it.
    pub fn start_with(
        node_groups: Vec<Vec<NodeId>>,
        knobs: Knobs,
        seed: u64,
        mut build: impl FnMut(&Topology, &Knobs, &[BlockRef]) -> norr_kernel::Scheduler<Signal> + Send + 'static,
    ) -> ClusterKit {
        let mut cluster = QmgrCluster::new(seed, node_groups, knobs.clone());
        cluster.net = NetConfig {
            min_delay_ns: 20_000,
            max_delay_ns: 500_000,
            connect_delay_ns: (200_000, 2_000_000),
            // A node that shut down (excluded, lost arbitration) starts
            // again by itself, as `norr datad` does.
            auto_restart_ns: Some(100_000_000),
        };
        cluster.recorder_block = RECORDER_BLOCK;
        cluster.builder = Some(Box::new(move |parts: &NodeParts<'_>| {
            let topo = Topology { node: parts.node, node_groups: parts.node_groups.to_vec() };
            let observer = BlockRef::new(parts.node, RECORDER_BLOCK, 0);
            let mut sched = build(&topo, parts.knobs, &[observer]);
            sched.add_block(RECORDER_BLOCK, 0, Box::new(parts.observer()));
            sched.add_block(block::HOST, 0, Box::new(parts.host_stub()));
            sched.add_block(block::MGM, 0, Box::new(parts.host_stub()));
            sched
        }));
        cluster.start_all();
        let mut kit = ClusterKit { knobs, cluster, next_handle: 1 };
        let all = kit.cluster.node_ids();
        kit.wait_for(&format!("nodes {all:?} to start the cluster"), |k| {
            k.cluster.settled().is_ok_and(|m| m.members == all) && all.iter().all(|n| k.started(*n))
        });
        kit
    }

    /// The QMGR harness underneath (faults, logs, the arbitrator).
    pub fn cluster(&mut self) -> &mut QmgrCluster {
        &mut self.cluster
    }

    /// Run until `done` holds; panics (with the harness's log) if it does
    /// not within `CALL_LIMIT_MS` of virtual time.
    pub fn wait_for(&mut self, what: &str, mut done: impl FnMut(&ClusterKit) -> bool) {
        let until = self.cluster.now_ns + CALL_LIMIT_MS * 1_000_000;
        loop {
            if done(self) {
                return;
            }
            if self.cluster.now_ns >= until {
                let status: Vec<String> =
                    self.cluster.node_ids().iter().map(|n| format!("  node {n}: {:?}", self.status(*n))).collect();
                let mut counters = Vec::new();
                for n in self.cluster.node_ids() {
                    for (b, name) in [(block::CKPT, "CKPT"), (block::TC, "TC 0"), (block::LQH, "LQH 0")] {
                        let c = self.cluster.block_counters(n, b, 0);
                        counters.push(format!("  node {n} {name}: {c:?}"));
                    }
                }
                panic!(
                    "seed {}: waited {CALL_LIMIT_MS} ms of virtual time for {what}\nlast events:\n{}\nstatus:\n{}\ncounters:\n{}",
                    self.cluster.seed,
                    self.cluster.log_tail(40),
                    status.join("\n"),
                    counters.join("\n")
                );
            }
            let step = self.cluster.now_ns + 1_000_000;
            self.cluster.run_until(step);
        }
    }

    /// The membership the running members agree on (None while they do
    /// not: a change in progress).
    pub fn membership(&self) -> Option<Membership> {
        self.cluster.settled().ok()
    }

    /// The membership `n` holds, if it is a member.
    pub fn membership_of(&self, n: NodeId) -> Option<&Membership> {
        self.cluster.membership(n)
    }

    /// Whether `n` is up, hung or down.
    pub fn node_state(&self, n: NodeId) -> NodeState {
        self.cluster.state(n)
    }

    /// Is `n` running (up or hung)?
    pub fn is_alive(&self, n: NodeId) -> bool {
        self.cluster.state(n) != NodeState::Down
    }

    /// Has `n`'s DIH reported it started (a member with its replicas up to
    /// date)?
    pub fn started(&self, n: NodeId) -> bool {
        self.cluster.state(n) == NodeState::Up && self.cluster.node_status(n).is_some_and(|s| s.started)
    }

    pub fn status(&self, n: NodeId) -> Option<&NodeStatus> {
        self.cluster.node_status(n)
    }

    /// What `n`'s files restore to, as its CKPT last told its host (GCI,
    /// complete copy): what `norr mgm show` shows.
    pub fn durable_gci(&self, n: NodeId) -> Option<(u64, bool)> {
        self.cluster.durable_gci(n)
    }

    pub fn now_ns(&self) -> u64 {
        self.cluster.now_ns
    }

    /// Why `n` shut down, every time it did (any incarnation).
    pub fn shutdowns(&self, n: NodeId) -> Vec<(ShutdownReason, bool)> {
        self.cluster.shutdowns(n)
    }

    /// A named counter of `n`'s QMGR.
    pub fn qmgr_counter(&mut self, n: NodeId, name: &str) -> u64 {
        self.cluster.counter(n, name)
    }

    /// A fresh transaction handle for an API node.
    pub fn handle(&mut self) -> u64 {
        self.next_handle += 1;
        self.next_handle
    }

    /// Send `signal` from API node `api` to `to`.
    pub fn send_from_api(&mut self, api: NodeId, to: BlockRef, signal: Signal) {
        self.cluster.send_from_api(BlockRef::new(api, block::API, 0), to, signal, Priority::B);
    }

    /// Let the cluster run for a moment of virtual time (every exchange in
    /// progress completes unless a fault holds it up).
    pub fn run(&mut self) {
        self.cluster.run_for_ms(RUN_SLICE_MS);
    }

    /// Move the clock forward by `ns`, running the cluster all along.
    pub fn advance(&mut self, ns: u64) {
        let until = self.cluster.now_ns + ns;
        self.cluster.run_until(until);
    }

    /// Send `signal` from API node `api` to `to` and run until the first
    /// answer to `api` arrives; it is returned with every other answer
    /// `api` got meanwhile (in order). Panics after `CALL_LIMIT_MS`.
    pub fn call(&mut self, api: NodeId, to: BlockRef, signal: Signal) -> Vec<Signal> {
        self.send_from_api(api, to, signal);
        self.next_answers(api)
    }

    /// Run until `api` is sent something; everything it got (in order).
    /// Panics after `CALL_LIMIT_MS`.
    pub fn next_answers(&mut self, api: NodeId) -> Vec<Signal> {
        self.wait_for("an answer", |k| k.cluster.api_inbox.iter().any(|e| e.to.node == api));
        self.take_inbox(api)
    }

    /// Node `n` crashes (kill -9): its memory, its links and what was on
    /// them are gone; the others see its connections break.
    pub fn crash(&mut self, n: NodeId) {
        self.cluster.crash(n);
    }

    /// Crash `failed` and run until the survivors' QMGRs agreed on a
    /// membership without them (and its `NodeFailRep`s were handled).
    pub fn fail_nodes(&mut self, failed: &[NodeId]) {
        for f in failed {
            self.crash(*f);
        }
        self.wait_for(&format!("the survivors to exclude {failed:?}"), |k| {
            k.membership().is_some_and(|m| failed.iter().all(|f| !m.contains(*f)))
        });
        self.run();
    }

    /// Node `n` (SIGSTOP) stops running; its connections stay up.
    pub fn hang(&mut self, n: NodeId) {
        self.cluster.hang(n);
    }

    /// SIGCONT: `n` runs again.
    pub fn resume(&mut self, n: NodeId) {
        self.cluster.resume(n);
    }

    /// Node `n` starts again (empty) and joins the running cluster through
    /// QMGR: a node restart (DICT syncs the schema, DIH copies its
    /// partitions). Returns once it is started.
    pub fn restart(&mut self, n: NodeId) {
        self.boot(n);
        self.wait_until_started(n);
    }

    /// Node `n` starts again (empty), without waiting: it joins and copies
    /// while the caller goes on (`wait_until_started`).
    pub fn boot(&mut self, n: NodeId) {
        assert!(!self.is_alive(n), "node {n} is running");
        self.cluster.start(n);
    }

    /// Run until `n` is a member and started (e.g. after it restarted by
    /// itself following a shutdown).
    pub fn wait_until_started(&mut self, n: NodeId) {
        self.wait_for(&format!("node {n} to be started"), |k| {
            k.started(n) && k.membership().is_some_and(|m| m.contains(n))
        });
    }

    /// Cut every link between `a` and `b` (both sides see it break).
    pub fn split(&mut self, a: &[NodeId], b: &[NodeId]) {
        self.cluster.split(a, b);
    }

    pub fn heal_split(&mut self) {
        self.cluster.heal_split();
    }

    /// Lose (or stop losing) every message from `a` to `b`, the connection
    /// staying up (heartbeats from `a` are lost too: `b` excludes `a` after
    /// the missed heartbeats).
    pub fn set_cut(&mut self, a: NodeId, b: NodeId, cut: bool) {
        self.cluster.set_drop(a, b, cut);
    }

    /// Ask block `to` something with `signal` from API node 99 and return the
    /// first answer that comes back to it.
    pub fn ask(&mut self, to: BlockRef, signal: Signal) -> Option<Signal> {
        self.call(ASK_API, to, signal).into_iter().next()
    }

    /// Run block `to` directly with an internal request (from the API side)
    /// and return what it answered, e.g. `FragChecksumReq` to an LQH.
    pub fn internal_ask(
        &mut self,
        to: BlockRef,
        sig: norr_signals::InternalSignal,
    ) -> Option<norr_signals::InternalSignal> {
        match self.ask(to, Signal::Internal(Box::new(sig)))? {
            Signal::Internal(s) => Some(*s),
            _ => None,
        }
    }

    /// Take the answers API node `api` got so far.
    pub fn take_inbox(&mut self, api: NodeId) -> Vec<Signal> {
        self.cluster.take_api(api).into_iter().map(|e: Envelope<Signal>| e.signal).collect()
    }
}
