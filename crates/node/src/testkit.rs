//! Several data nodes in one thread, for tests of the cluster protocols.
//!
//! Each node is a scheduler from [`build_cluster_node`] plus recorder blocks
//! standing in for the host (`HOST`, `MGM`, and `QMGR`: the kit itself plays
//! the membership protocol's part and tells the nodes' blocks of starts,
//! joins and failures, as QMGR would). Messages between nodes travel on FIFO
//! links, one per ordered pair, delivered in a seeded order; a crashed node
//! loses everything it had (memory, links, queued messages). API nodes are
//! the kit too: requests are sent from `BlockRef(api, block::API, 0)` and
//! their answers collected in an inbox.
//!
//! Deterministic: the same calls with the same seed deliver the same
//! messages in the same order.

use crate::{build_cluster_node, membership_subscribers, Topology};
use norr_kernel::{Block, BlockRef, Ctx, Envelope, NodeId, Priority, Scheduler};
use norr_knobs::Knobs;
use norr_signals::cluster::{ClusterSignal, Membership, StartKind};
use norr_signals::{block, Signal};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};

/// Most signals one `run` may execute before the kit calls it a livelock.
const MAX_SIGNALS_PER_RUN: usize = 5_000_000;

/// Records what a node's blocks send to the host-side blocks.
#[derive(Default)]
struct Recorder {
    seen: Arc<Mutex<Vec<Envelope<Signal>>>>,
}

impl Block<Signal> for Recorder {
    fn on_signal(&mut self, env: Envelope<Signal>, _ctx: &mut Ctx<'_, Signal>) {
        self.seen.lock().expect("recorder lock").push(env);
    }
}

struct Node {
    sched: Scheduler<Signal>,
    /// Signals the node sent to its HOST, MGM and QMGR stand-ins.
    host: Arc<Mutex<Vec<Envelope<Signal>>>>,
}

/// A small xorshift generator: deterministic delivery order.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

pub struct ClusterKit {
    pub knobs: Knobs,
    node_groups: Vec<Vec<NodeId>>,
    nodes: BTreeMap<NodeId, Node>,
    /// Messages in flight between nodes, per (from, to).
    links: BTreeMap<(NodeId, NodeId), VecDeque<Envelope<Signal>>>,
    /// Messages to API nodes, in arrival order.
    pub api_inbox: Vec<Envelope<Signal>>,
    membership: Membership,
    now_ns: u64,
    rng: Rng,
    next_handle: u64,
    /// Links cut: messages on them are dropped.
    cut: BTreeSet<(NodeId, NodeId)>,
}

impl ClusterKit {
    /// Data nodes `node_groups` (all started together as one cluster).
    pub fn start(node_groups: Vec<Vec<NodeId>>, knobs: Knobs, seed: u64) -> ClusterKit {
        let members: Vec<NodeId> = {
            let mut m: Vec<NodeId> = node_groups.iter().flatten().copied().collect();
            m.sort_unstable();
            m
        };
        let membership = Membership { generation: 1, members: members.clone(), president: members[0] };
        let mut kit = ClusterKit {
            knobs,
            node_groups,
            nodes: BTreeMap::new(),
            links: BTreeMap::new(),
            api_inbox: Vec::new(),
            membership: membership.clone(),
            now_ns: 0,
            rng: Rng(seed.max(1)),
            next_handle: 1,
            cut: BTreeSet::new(),
        };
        for n in &members {
            kit.boot(*n);
        }
        for n in &members {
            let rep = ClusterSignal::ClusterStartedRep {
                membership: membership.clone(),
                kind: StartKind::Initial,
                joined: false,
            };
            kit.tell_subscribers(*n, rep);
        }
        kit.run();
        kit
    }

    fn boot(&mut self, n: NodeId) {
        let topo = Topology { node: n, node_groups: self.node_groups.clone() };
        let mut sched = build_cluster_node(&topo, &self.knobs);
        let host = Arc::new(Mutex::new(Vec::new()));
        for b in [block::HOST, block::MGM, block::QMGR] {
            sched.add_block(b, 0, Box::new(Recorder { seen: host.clone() }));
        }
        sched.advance_to(self.now_ns);
        self.nodes.insert(n, Node { sched, host });
    }

    fn tell_subscribers(&mut self, n: NodeId, sig: ClusterSignal) {
        let subs = membership_subscribers(n, &self.knobs);
        let node = self.nodes.get_mut(&n).expect("live node");
        for to in subs {
            let env = Envelope {
                from: BlockRef::new(n, block::QMGR, 0),
                to,
                prio: Priority::A,
                signal: Signal::Cluster(Box::new(sig.clone())),
            };
            node.sched.deliver(env).expect("deliver to a local block");
        }
    }

    pub fn membership(&self) -> &Membership {
        &self.membership
    }

    pub fn is_alive(&self, n: NodeId) -> bool {
        self.nodes.contains_key(&n)
    }

    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// What node `n` sent its host-side blocks (HOST, MGM, QMGR) so far.
    pub fn host_signals(&self, n: NodeId) -> Vec<Envelope<Signal>> {
        self.nodes.get(&n).map(|x| x.host.lock().expect("lock").clone()).unwrap_or_default()
    }

    /// A fresh transaction handle for an API node.
    pub fn handle(&mut self) -> u64 {
        self.next_handle += 1;
        self.next_handle
    }

    /// Send `signal` from API node `api` to `to`.
    pub fn send_from_api(&mut self, api: NodeId, to: BlockRef, signal: Signal) {
        let env = Envelope { from: BlockRef::new(api, block::API, 0), to, prio: Priority::B, signal };
        if let Some(node) = self.nodes.get_mut(&to.node) {
            node.sched.deliver(env).expect("deliver an API request");
        }
    }

    /// Run until nothing is left to do at this moment: every node idle and
    /// every link empty. Delayed signals are not waited for (see `advance`).
    pub fn run(&mut self) {
        let mut budget = MAX_SIGNALS_PER_RUN;
        loop {
            let mut progressed = false;
            let ids: Vec<NodeId> = self.nodes.keys().copied().collect();
            for n in ids {
                let node = self.nodes.get_mut(&n).expect("node");
                let ran = node.sched.run_until_idle(1024);
                budget = budget.checked_sub(ran).expect("livelock: too many signals without quiescence");
                progressed |= ran > 0;
                let remote = node.sched.take_remote();
                for env in remote {
                    self.route(n, env);
                }
            }
            progressed |= self.deliver_some();
            if !progressed {
                return;
            }
        }
    }

    fn route(&mut self, from: NodeId, env: Envelope<Signal>) {
        let to = env.to.node;
        if env.to.block == block::API {
            self.api_inbox.push(env);
            return;
        }
        if self.cut.contains(&(from, to)) || !self.nodes.contains_key(&to) {
            return;
        }
        self.links.entry((from, to)).or_default().push_back(env);
    }

    /// Deliver the heads of some links (in a seeded order, each link FIFO).
    fn deliver_some(&mut self) -> bool {
        let busy: Vec<(NodeId, NodeId)> = self.links.iter().filter(|(_, q)| !q.is_empty()).map(|(k, _)| *k).collect();
        if busy.is_empty() {
            return false;
        }
        let rounds = busy.len();
        for _ in 0..rounds {
            let k = busy[self.rng.below(busy.len())];
            let Some(env) = self.links.get_mut(&k).and_then(|q| q.pop_front()) else {
                continue;
            };
            if let Some(node) = self.nodes.get_mut(&k.1) {
                // Overloaded: put it back at the head and let the node run.
                if let Err(norr_kernel::DeliverError::Overloaded) = node.sched.deliver(env.clone()) {
                    self.links.get_mut(&k).expect("link").push_front(env);
                }
            }
        }
        true
    }

    /// Move the clock forward by `ns` (firing timers on the way), running
    /// the cluster at each timer.
    pub fn advance(&mut self, ns: u64) {
        let end = self.now_ns + ns;
        loop {
            self.run();
            let next = self.nodes.values().filter_map(|n| n.sched.next_timer_ns()).min();
            match next {
                Some(t) if t <= end => {
                    self.now_ns = self.now_ns.max(t);
                    for n in self.nodes.values_mut() {
                        n.sched.advance_to(self.now_ns);
                    }
                }
                _ => break,
            }
        }
        self.now_ns = end;
        for n in self.nodes.values_mut() {
            n.sched.advance_to(end);
        }
        self.run();
    }

    /// Node `n` crashes: its memory, its links and what was on them are
    /// gone. The others are told (as QMGR's node-failure protocol would)
    /// once they have noticed: at the next `fail_nodes`.
    pub fn crash(&mut self, n: NodeId) {
        self.nodes.remove(&n);
        self.links.retain(|(a, b), _| *a != n && *b != n);
    }

    /// Tell the survivors that `failed` failed (QMGR's NODE_FAILREP).
    pub fn fail_nodes(&mut self, failed: &[NodeId]) {
        for f in failed {
            self.crash(*f);
        }
        let mut m = self.membership.clone();
        m.generation += 1;
        m.members.retain(|x| !failed.contains(x));
        if failed.contains(&m.president) {
            m.president = m.members[0];
        }
        self.membership = m.clone();
        for n in m.members.clone() {
            self.tell_subscribers(n, ClusterSignal::NodeFailRep { failed: failed.to_vec(), membership: m.clone() });
        }
        self.run();
    }

    /// Node `n` starts again (empty) and joins the running cluster: a node
    /// restart (DICT syncs the schema, DIH copies its partitions).
    pub fn restart(&mut self, n: NodeId) {
        assert!(!self.nodes.contains_key(&n), "node {n} is running");
        self.boot(n);
        let mut m = self.membership.clone();
        m.generation += 1;
        m.members.push(n);
        m.members.sort_unstable();
        self.membership = m.clone();
        for x in m.members.clone() {
            if x != n {
                self.tell_subscribers(x, ClusterSignal::NodeJoinedRep { node: n, membership: m.clone() });
            }
        }
        let rep = ClusterSignal::ClusterStartedRep { membership: m, kind: StartKind::Initial, joined: true };
        self.tell_subscribers(n, rep);
        self.run();
    }

    /// Cut (or restore) the link from `a` to `b` (one direction).
    pub fn set_cut(&mut self, a: NodeId, b: NodeId, cut: bool) {
        if cut {
            self.cut.insert((a, b));
            self.links.remove(&(a, b));
        } else {
            self.cut.remove(&(a, b));
        }
    }

    /// Ask block `to` something with `signal` from API node 99 and return the
    /// first answer that comes back to it.
    pub fn ask(&mut self, to: BlockRef, signal: Signal) -> Option<Signal> {
        let before = self.api_inbox.len();
        self.send_from_api(99, to, signal);
        self.run();
        let pos = self.api_inbox[before..].iter().position(|e| e.to.node == 99)? + before;
        Some(self.api_inbox.remove(pos).signal)
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
        let (mine, rest): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.api_inbox).into_iter().partition(|e| e.to.node == api);
        self.api_inbox = rest;
        mine.into_iter().map(|e| e.signal).collect()
    }
}
