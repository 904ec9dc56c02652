//! The deterministic host: one data node's scheduler, simulated clients, a
//! simulated network with per-connection FIFO links and random delays, client
//! crashes and restarts, virtual time, and the trace hash.
//!
//! One *step* = one host event (a message delivered to the node or to a client,
//! a client wake-up, crash or restart, or a due node timer), then the node runs
//! until idle, then every signal the node emitted is observed by the workload's
//! checker (committed TC_KEYCONFs first, see `order_emitted`) and put on its
//! link, then the workload's invariants are checked.

use crate::rng::Rng;
use crate::trace::TraceHasher;
use crate::workload::{ClientCtx, Workload};
use norr_kernel::{BlockRef, DeliverError, Envelope, NodeId, Priority, Scheduler};
use norr_knobs::Knobs;
use norr_signals::{block, Signal, TxnOutcome};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

/// The data node's id in the simulation.
pub const DATA_NODE: NodeId = 1;
/// API node id of the simulator's own admin connection (setup, final checks).
pub const ADMIN_API: NodeId = 99;
/// First API node id handed to simulated clients.
pub const FIRST_API: NodeId = 100;
/// Most signals the node may run in one step before the host calls it a livelock.
pub const MAX_SIGNALS_PER_STEP: usize = 2_000_000;

const NS_PER_US: u64 = 1_000;
const NS_PER_MS: u64 = 1_000_000;

/// Trace event kinds.
mod kind {
    pub const TIMER: u8 = 1;
    pub const TO_NODE: u8 = 2;
    pub const TO_CLIENT: u8 = 3;
    pub const WAKE: u8 = 4;
    pub const CRASH: u8 = 5;
    pub const RESTART: u8 = 6;
    pub const API_FAIL: u8 = 7;
    pub const EMIT: u8 = 8;
    pub const OVERLOAD: u8 = 9;
    pub const NODE_RAN: u8 = 10;
    pub const ADMIN: u8 = 11;
}

/// Network and fault parameters, randomised per seed.
#[derive(Debug, Clone)]
pub struct NetParams {
    pub clients: usize,
    pub min_delay_ns: u64,
    pub max_delay_ns: u64,
    /// Probability that a message takes a long detour (stalls its connection).
    pub long_delay_p: f64,
    pub long_delay_max_ns: u64,
    /// Probability that a client crashes when it is about to handle an event.
    pub crash_p: f64,
    /// Probability that a client life gets a crash timer at a random moment.
    pub crash_timer_p: f64,
    pub crash_horizon_ns: u64,
    /// Time from a crash to the node's API_FAILREQ (connection loss detected).
    pub fail_detect_max_ns: u64,
    /// Probability that API_FAILREQ overtakes the last in-flight request (it
    /// runs on job buffer A, the request waits in B).
    pub api_fail_race_p: f64,
    pub restart_max_ns: u64,
    /// Longest think time between a client's transactions.
    pub think_max_ns: u64,
    /// Probability that a client stalls (GC pause, slow application) before
    /// sending a request, for up to `stall_max_ns`: drives inactivity time-outs.
    pub stall_p: f64,
    pub stall_max_ns: u64,
}

impl NetParams {
    pub fn random(rng: &mut Rng) -> NetParams {
        let min_delay_ns = rng.range(1, 50) * NS_PER_US;
        NetParams {
            clients: rng.range(2, 8) as usize,
            min_delay_ns,
            max_delay_ns: min_delay_ns + rng.range(1, 2_000) * NS_PER_US,
            long_delay_p: *rng.pick(&[0.0, 0.001, 0.005, 0.02]),
            long_delay_max_ns: rng.range(5, 500) * NS_PER_MS,
            crash_p: *rng.pick(&[0.0, 0.002, 0.01, 0.03]),
            crash_timer_p: *rng.pick(&[0.0, 0.1, 0.3]),
            crash_horizon_ns: rng.range(10, 2_000) * NS_PER_MS,
            fail_detect_max_ns: rng.range(1, 200) * NS_PER_MS,
            api_fail_race_p: *rng.pick(&[0.0, 0.3, 0.8]),
            restart_max_ns: rng.range(1, 300) * NS_PER_MS,
            think_max_ns: rng.range(0, 3_000) * NS_PER_US,
            stall_p: *rng.pick(&[0.0, 0.0, 0.005, 0.02]),
            stall_max_ns: rng.range(100, 10_000) * NS_PER_MS,
        }
    }
}

/// Knobs between default and stress, chosen per knob by the seed.
pub fn random_knobs(rng: &mut Rng) -> Knobs {
    let d = Knobs::default();
    let s = Knobs::stress();
    fn mix(rng: &mut Rng, d: u64, s: u64) -> u64 {
        match rng.below(3) {
            0 => d,
            1 => s,
            _ => {
                // Log-uniform between the two.
                let (lo, hi) = (d.min(s).max(1), d.max(s).max(1));
                let (llo, lhi) = ((lo as f64).ln(), (hi as f64).ln());
                let x = llo + (lhi - llo) * (rng.below(1 << 20) as f64 / (1u64 << 20) as f64);
                (x.exp() as u64).clamp(lo, hi)
            }
        }
    }
    let k = Knobs {
        data_memory_bytes: mix(rng, d.data_memory_bytes, s.data_memory_bytes),
        lock_wait_timeout_ms: mix(rng, d.lock_wait_timeout_ms, s.lock_wait_timeout_ms),
        txn_inactive_timeout_ms: mix(rng, d.txn_inactive_timeout_ms, s.txn_inactive_timeout_ms),
        max_transactions: mix(rng, d.max_transactions as u64, s.max_transactions as u64) as u32,
        max_ops_per_txn: mix(rng, d.max_ops_per_txn as u64, s.max_ops_per_txn as u64) as u32,
        max_scans: mix(rng, d.max_scans as u64, s.max_scans as u64) as u32,
        scan_examine_per_step: mix(rng, d.scan_examine_per_step as u64, s.scan_examine_per_step as u64) as u32,
        default_partitions: mix(rng, d.default_partitions as u64, s.default_partitions as u64) as u32,
        job_buffer_bound: mix(rng, d.job_buffer_bound as u64, s.job_buffer_bound as u64) as usize,
        max_frame_bytes: d.max_frame_bytes,
        max_send_buffer_bytes: d.max_send_buffer_bytes,
        max_send_delay_us: mix(rng, d.max_send_delay_us, s.max_send_delay_us),
        max_api_connections: d.max_api_connections,
        // The simulator has no event loop to spin (and draws no number for it,
        // so the knobs of a seed stay as they were).
        idle_spin_us: d.idle_spin_us,
        // Simulated clients send to TC instance 0; more instances would only
        // sit idle (and drawing a number would change every seed's run).
        tc_instances: d.tc_instances,
        // Cluster and durability knobs: the one-node host has no peers and no
        // disk; they are drawn by the cluster host (drawing them here would
        // change every existing seed's run).
        heartbeat_interval_ms: d.heartbeat_interval_ms,
        missed_heartbeats: d.missed_heartbeats,
        arbitration_timeout_ms: d.arbitration_timeout_ms,
        start_partial_timeout_ms: d.start_partial_timeout_ms,
        read_backup: d.read_backup,
        gcp_interval_ms: d.gcp_interval_ms,
        commit_disk_timeout_ms: d.commit_disk_timeout_ms,
        redo_files: d.redo_files,
        redo_file_bytes: d.redo_file_bytes,
        redo_buffer_bytes: d.redo_buffer_bytes,
        lcp_max_chain: d.lcp_max_chain,
        lcp_min_gap_ms: d.lcp_min_gap_ms,
        lcp_slice_rows: d.lcp_slice_rows,
        lcp_slice_delay_us: d.lcp_slice_delay_us,
        // Host-side network limits: the simulator has no sockets (and draws
        // no number for them, so the knobs of a seed stay as they were).
        send_buffer_pause_bytes: d.send_buffer_pause_bytes,
        api_first_request_timeout_ms: d.api_first_request_timeout_ms,
        reserved_api_connections: d.reserved_api_connections,
    };
    let mut k = k;
    // Now and then far below the stress values, to reach the "out of records" paths.
    if rng.chance(0.1) {
        k.max_transactions = rng.range(1, 6) as u32;
    }
    if rng.chance(0.1) {
        k.max_ops_per_txn = rng.range(1, 8) as u32;
    }
    if rng.chance(0.1) {
        k.max_scans = rng.range(1, 3) as u32;
    }
    debug_assert!(k.validate().is_ok(), "{:?}", k.validate());
    k
}

#[derive(Debug)]
enum Ev {
    /// Deliver the head of the client -> node link of this API node.
    Up(NodeId),
    /// Deliver the head of the node -> client link of this API node.
    Down(NodeId),
    Wake {
        client: usize,
        token: u64,
    },
    Crash {
        client: usize,
        life: u32,
    },
    Restart {
        client: usize,
    },
}

struct QItem {
    t: u64,
    seq: u64,
    ev: Ev,
}
impl PartialEq for QItem {
    fn eq(&self, o: &Self) -> bool {
        (self.t, self.seq) == (o.t, o.seq)
    }
}
impl Eq for QItem {}
impl PartialOrd for QItem {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for QItem {
    // Reversed: BinaryHeap is a max-heap, we want the earliest (time, seq).
    fn cmp(&self, o: &Self) -> Ordering {
        (o.t, o.seq).cmp(&(self.t, self.seq))
    }
}

enum UpItem {
    Sig(Envelope<Signal>),
    /// The connection is gone: the host tells TC and DICT.
    ApiFail {
        race: bool,
    },
}

#[derive(Default)]
struct UpLink {
    q: VecDeque<(u64, UpItem)>,
    last_due: u64,
    closed: bool,
}

#[derive(Default)]
struct DownLink {
    q: VecDeque<(u64, Envelope<Signal>)>,
    last_due: u64,
}

struct ClientSlot {
    api: NodeId,
    alive: bool,
    life: u32,
    wake_token: u64,
}

/// Counters of what happened in a run.
#[derive(Debug, Clone, Default)]
pub struct HostStats {
    pub steps: u64,
    pub to_node: u64,
    pub to_client: u64,
    pub crashes: u64,
    pub api_fail_races: u64,
    pub dropped_inflight: u64,
    pub dropped_to_dead: u64,
    pub overloaded_retries: u64,
    pub long_delays: u64,
    pub stalls: u64,
    pub node_signals: u64,
    pub timers: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Load,
    Drain,
}

pub struct Host {
    pub rng: Rng,
    pub now_ns: u64,
    pub node: Scheduler<Signal>,
    pub knobs: Knobs,
    pub net: NetParams,
    pub trace: TraceHasher,
    pub stats: HostStats,
    pub phase: Phase,
    queue: BinaryHeap<QItem>,
    seq: u64,
    up: BTreeMap<NodeId, UpLink>,
    down: BTreeMap<NodeId, DownLink>,
    clients: Vec<ClientSlot>,
    api_to_client: BTreeMap<NodeId, usize>,
    next_api: NodeId,
    admin_replies: Vec<Envelope<Signal>>,
    pub verbose: bool,
}

impl Host {
    pub fn new(rng: Rng, node: Scheduler<Signal>, knobs: Knobs, net: NetParams) -> Host {
        Host {
            rng,
            now_ns: 0,
            node,
            knobs,
            net,
            trace: TraceHasher::default(),
            stats: HostStats::default(),
            phase: Phase::Load,
            queue: BinaryHeap::new(),
            seq: 0,
            up: BTreeMap::new(),
            down: BTreeMap::new(),
            clients: Vec::new(),
            api_to_client: BTreeMap::new(),
            next_api: FIRST_API,
            admin_replies: Vec::new(),
            verbose: false,
        }
    }

    fn push(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        self.queue.push(QItem { t, seq: self.seq, ev });
    }

    fn net_delay(&mut self) -> u64 {
        let mut d = self.rng.range(self.net.min_delay_ns, self.net.max_delay_ns);
        if self.rng.chance(self.net.long_delay_p) {
            self.stats.long_delays += 1;
            d += self.rng.range(1, self.net.long_delay_max_ns);
        }
        d
    }

    pub fn client_api(&self, client: usize) -> NodeId {
        self.clients[client].api
    }

    pub fn client_alive(&self, client: usize) -> bool {
        self.clients[client].alive
    }

    pub fn clients(&self) -> usize {
        self.clients.len()
    }

    /// Create the clients and start their first lives.
    pub fn start_clients<W: Workload + ?Sized>(&mut self, w: &mut W) -> Result<(), String> {
        for c in 0..self.net.clients {
            self.clients.push(ClientSlot { api: 0, alive: false, life: 0, wake_token: 0 });
            self.start_life(c, w)?;
        }
        Ok(())
    }

    fn start_life<W: Workload + ?Sized>(&mut self, c: usize, w: &mut W) -> Result<(), String> {
        let api = self.next_api;
        self.next_api = self.next_api.checked_add(1).ok_or("out of API node ids")?;
        let slot = &mut self.clients[c];
        slot.api = api;
        slot.alive = true;
        slot.life += 1;
        let life = slot.life;
        self.api_to_client.insert(api, c);
        self.up.insert(api, UpLink::default());
        self.down.insert(api, DownLink::default());
        if self.phase == Phase::Load && self.rng.chance(self.net.crash_timer_p) {
            let at = self.now_ns + self.rng.range(1, self.net.crash_horizon_ns);
            self.push(at, Ev::Crash { client: c, life });
        }
        self.with_client(c, w, |w, ctx| {
            w.on_start(ctx);
            Ok(())
        })
    }

    /// Run a workload callback for client `c` and carry out what it asked.
    fn with_client<W: Workload + ?Sized>(
        &mut self,
        c: usize,
        w: &mut W,
        f: impl FnOnce(&mut W, &mut ClientCtx<'_>) -> Result<(), String>,
    ) -> Result<(), String> {
        let api = self.clients[c].api;
        let mut ctx = ClientCtx::new(c, api, self.now_ns, self.stats.steps, self.phase == Phase::Drain, &mut self.rng);
        f(w, &mut ctx)?;
        let (sends, wake) = ctx.into_parts();
        for sig in sends {
            let to_block = match &sig {
                Signal::DictReq(_) => block::DICT,
                _ => block::TC,
            };
            let env = Envelope {
                from: BlockRef::new(api, block::API, 0),
                to: BlockRef::new(DATA_NODE, to_block, 0),
                prio: Priority::B,
                signal: sig,
            };
            let mut d = self.net_delay();
            if self.phase == Phase::Load && self.rng.chance(self.net.stall_p) {
                self.stats.stalls += 1;
                d += self.rng.range(1, self.net.stall_max_ns);
            }
            let link = self.up.get_mut(&api).ok_or("client without link")?;
            assert!(!link.closed, "send on a closed link");
            let due = (self.now_ns + d).max(link.last_due);
            link.last_due = due;
            link.q.push_back((due, UpItem::Sig(env)));
            self.push(due, Ev::Up(api));
        }
        if let Some(after) = wake {
            self.clients[c].wake_token += 1;
            let token = self.clients[c].wake_token;
            self.push(self.now_ns + after, Ev::Wake { client: c, token });
        }
        Ok(())
    }

    fn crash<W: Workload + ?Sized>(&mut self, c: usize, w: &mut W) {
        let api = self.clients[c].api;
        self.clients[c].alive = false;
        self.clients[c].wake_token += 1;
        self.stats.crashes += 1;
        self.trace.mark(self.now_ns, kind::CRASH, api as u64);
        if self.verbose {
            eprintln!("[{:>12}] crash client {c} (api {api})", self.now_ns);
        }
        w.on_crash(c, api);
        // In-flight requests: a prefix of them made it into the node's socket
        // buffer, the rest is lost with the connection (TCP keeps order).
        let keep_p = self.rng.below(101) as f64 / 100.0;
        let detect = self.rng.range(1, self.net.fail_detect_max_ns);
        let race = self.rng.chance(self.net.api_fail_race_p);
        let now = self.now_ns;
        let link = self.up.get_mut(&api).expect("live client has a link");
        let total = link.q.len();
        let mut kept = 0;
        while kept < total && self.rng.chance(keep_p) {
            kept += 1;
        }
        let link = self.up.get_mut(&api).expect("link");
        link.q.truncate(kept);
        self.stats.dropped_inflight += (total - kept) as u64;
        let last = link.q.back().map(|(d, _)| *d).unwrap_or(now);
        let due = if race && kept > 0 { last } else { last.max(now + detect) };
        link.q.push_back((due, UpItem::ApiFail { race: race && kept > 0 }));
        link.last_due = due;
        link.closed = true;
        self.push(due, Ev::Up(api));
        // Replies on their way to the dead client are lost.
        if let Some(d) = self.down.get_mut(&api) {
            self.stats.dropped_to_dead += d.q.len() as u64;
            d.q.clear();
        }
        let at = now + self.rng.range(1, self.net.restart_max_ns);
        self.push(at, Ev::Restart { client: c });
    }

    fn deliver_api_fail(&mut self, api: NodeId) {
        self.trace.mark(self.now_ns, kind::API_FAIL, api as u64);
        let tcs = (0..self.node.instances(block::TC)).map(|i| (block::TC, i));
        for (b, i) in tcs.chain([(block::DICT, 0)]) {
            let env = Envelope {
                from: BlockRef::new(DATA_NODE, 0, 0),
                to: BlockRef::new(DATA_NODE, b, i),
                prio: Priority::A,
                signal: Signal::ApiFailReq { api_node: api },
            };
            // Priority A is never refused; an unknown block is a wiring bug.
            if let Err(e) = self.node.deliver(env) {
                panic!("API_FAILREQ refused by block {b}: {e:?}");
            }
        }
    }

    /// Deliver the head of an up link. Returns Err on a broken invariant.
    fn on_up<W: Workload + ?Sized>(&mut self, api: NodeId, w: &mut W) -> Result<(), String> {
        let now = self.now_ns;
        let Some(link) = self.up.get_mut(&api) else {
            return Ok(());
        };
        let Some((due, _)) = link.q.front() else {
            return Ok(());
        };
        if *due > now {
            let due = *due;
            self.push(due, Ev::Up(api));
            return Ok(());
        }
        let (due, item) = link.q.pop_front().expect("front");
        match item {
            UpItem::ApiFail { .. } => {
                self.up.remove(&api);
                if self.verbose {
                    eprintln!("[{now:>12}] step {} API_FAILREQ {api}", self.stats.steps);
                }
                self.deliver_api_fail(api);
            }
            UpItem::Sig(env) => {
                let sig_copy = env.signal.clone();
                let (from, to) = (env.from, env.to);
                match self.node.deliver(env) {
                    Ok(()) => {
                        self.stats.to_node += 1;
                        self.trace.event(now, kind::TO_NODE, from, to, &sig_copy);
                        if self.verbose {
                            eprintln!("[{now:>12}] step {} node <- {from}: {sig_copy:?}", self.stats.steps);
                        }
                        w.observe_request(self.stats.steps, api, &sig_copy)?;
                        // The race: API_FAILREQ (job buffer A) overtakes this request.
                        let link = self.up.get_mut(&api).expect("link");
                        if let Some((d, UpItem::ApiFail { race: true })) = link.q.front() {
                            if *d <= now || link.q.len() == 1 {
                                link.q.pop_front();
                                self.up.remove(&api);
                                self.stats.api_fail_races += 1;
                                self.deliver_api_fail(api);
                            }
                        }
                    }
                    Err(DeliverError::Overloaded) => {
                        self.stats.overloaded_retries += 1;
                        self.trace.mark(now, kind::OVERLOAD, api as u64);
                        let env = Envelope { from, to, prio: Priority::B, signal: sig_copy };
                        let link = self.up.get_mut(&api).expect("link");
                        link.q.push_front((due, UpItem::Sig(env)));
                        self.push(now + 20 * NS_PER_US, Ev::Up(api));
                    }
                    Err(DeliverError::UnknownBlock(b)) => return Err(format!("host bug: no block at {b}")),
                }
            }
        }
        Ok(())
    }

    fn on_down<W: Workload + ?Sized>(&mut self, api: NodeId, w: &mut W) -> Result<(), String> {
        let now = self.now_ns;
        let Some(link) = self.down.get_mut(&api) else {
            return Ok(());
        };
        let Some((due, _)) = link.q.front() else {
            return Ok(());
        };
        if *due > now {
            let due = *due;
            self.push(due, Ev::Down(api));
            return Ok(());
        }
        let (_, env) = link.q.pop_front().expect("front");
        let Some(&c) = self.api_to_client.get(&api) else {
            return Ok(());
        };
        if !self.clients[c].alive || self.clients[c].api != api {
            self.stats.dropped_to_dead += 1;
            return Ok(());
        }
        self.stats.to_client += 1;
        self.trace.event(now, kind::TO_CLIENT, env.from, env.to, &env.signal);
        if self.phase == Phase::Load && w.can_crash(c) && self.rng.chance(self.net.crash_p) {
            // Crash with the reply in hand, before acting on it.
            self.crash(c, w);
            return Ok(());
        }
        self.with_client(c, w, |w, ctx| w.on_reply(ctx, env.signal))
    }

    /// Order the node's output of one step for the checker: committed
    /// TC_KEYCONFs first (commits happen before the replies of lock holders
    /// that waited for them), everything else in send order.
    fn order_emitted(out: Vec<Envelope<Signal>>) -> Vec<Envelope<Signal>> {
        let is_commit =
            |e: &Envelope<Signal>| matches!(&e.signal, Signal::TcKeyConf(c) if c.outcome == TxnOutcome::Committed);
        let (mut a, b): (Vec<_>, Vec<_>) = out.into_iter().partition(is_commit);
        a.extend(b);
        a
    }

    /// Run the node until idle and route what it emitted.
    fn run_node<W: Workload + ?Sized>(&mut self, w: &mut W) -> Result<(), String> {
        let ran = self.node.run_until_idle(MAX_SIGNALS_PER_STEP);
        self.stats.node_signals += ran as u64;
        if self.node.has_ready() {
            return Err(format!("node livelock: still busy after {MAX_SIGNALS_PER_STEP} signals in one step"));
        }
        self.trace.mark(self.now_ns, kind::NODE_RAN, ran as u64);
        let out = Self::order_emitted(self.node.take_remote());
        for env in out {
            let api = env.to.node;
            self.trace.event(self.now_ns, kind::EMIT, env.from, env.to, &env.signal);
            if self.verbose {
                eprintln!("[{:>12}] step {} node -> {}: {:?}", self.now_ns, self.stats.steps, env.to, env.signal);
            }
            if api == ADMIN_API {
                self.admin_replies.push(env);
                continue;
            }
            if !self.api_to_client.contains_key(&api) {
                return Err(format!("node sent {} to unknown node {} (from {})", env.signal.name(), api, env.from));
            }
            if env.to.block != block::API {
                return Err(format!("node sent {} to {} which is not an API block", env.signal.name(), env.to));
            }
            w.observe_emitted(self.stats.steps, api, &env.signal)?;
            let d = self.net_delay();
            let Some(link) = self.down.get_mut(&api) else {
                continue;
            };
            let c = self.api_to_client[&api];
            if !self.clients[c].alive || self.clients[c].api != api {
                self.stats.dropped_to_dead += 1;
                continue;
            }
            let due = (self.now_ns + d).max(link.last_due);
            link.last_due = due;
            link.q.push_back((due, env));
            self.push(due, Ev::Down(api));
        }
        Ok(())
    }

    /// Time of the next thing to do, if any.
    pub fn next_time(&self) -> Option<u64> {
        let tq = self.queue.peek().map(|q| q.t);
        match (tq, self.node.next_timer_ns()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// True if host events (not only node timers) are pending.
    pub fn has_host_events(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Execute one step. Ok(false): nothing left to do.
    pub fn step<W: Workload + ?Sized>(&mut self, w: &mut W) -> Result<bool, String> {
        let tq = self.queue.peek().map(|q| q.t);
        let tn = self.node.next_timer_ns();
        let timer_first = match (tq, tn) {
            (None, None) => return Ok(false),
            (Some(a), Some(b)) => b < a,
            (None, Some(_)) => true,
            (Some(_), None) => false,
        };
        self.stats.steps += 1;
        if timer_first {
            let t = tn.expect("timer");
            debug_assert!(t >= self.now_ns);
            self.now_ns = self.now_ns.max(t);
            self.node.advance_to(self.now_ns);
            self.stats.timers += 1;
            self.trace.mark(self.now_ns, kind::TIMER, 0);
        } else {
            let item = self.queue.pop().expect("peeked");
            debug_assert!(item.t >= self.now_ns, "time went backwards");
            self.now_ns = self.now_ns.max(item.t);
            self.node.advance_to(self.now_ns);
            match item.ev {
                Ev::Up(api) => self.on_up(api, w)?,
                Ev::Down(api) => self.on_down(api, w)?,
                Ev::Wake { client, token } => {
                    let slot = &self.clients[client];
                    if slot.alive && slot.wake_token == token {
                        self.trace.mark(self.now_ns, kind::WAKE, slot.api as u64);
                        if self.phase == Phase::Load && w.can_crash(client) && self.rng.chance(self.net.crash_p) {
                            self.crash(client, w);
                        } else {
                            self.with_client(client, w, |w, ctx| w.on_wake(ctx))?;
                        }
                    }
                }
                Ev::Crash { client, life } => {
                    let slot = &self.clients[client];
                    if slot.alive && slot.life == life && self.phase == Phase::Load && w.can_crash(client) {
                        self.crash(client, w);
                    }
                }
                Ev::Restart { client } => {
                    self.trace.mark(self.now_ns, kind::RESTART, client as u64);
                    self.start_life(client, w)?;
                }
            }
        }
        self.run_node(w)?;
        w.check()?;
        Ok(true)
    }

    /// Send a request as the admin client straight into the node (no network)
    /// and run the node (advancing virtual time through its timers) until the
    /// reply comes. Used for setup and final checks, when clients are quiet.
    pub fn admin_request<W: Workload + ?Sized>(&mut self, sig: Signal, w: &mut W) -> Result<Signal, String> {
        let to_block = match &sig {
            Signal::DictReq(_) => block::DICT,
            _ => block::TC,
        };
        self.admin_request_to(to_block, 0, sig, w)
    }

    /// `admin_request` to a named block instance (probes ask TC and LQH for
    /// their counters with an internal STATS_REQ).
    pub fn admin_request_to<W: Workload + ?Sized>(
        &mut self,
        to_block: u16,
        instance: u16,
        sig: Signal,
        w: &mut W,
    ) -> Result<Signal, String> {
        let env = Envelope {
            from: BlockRef::new(ADMIN_API, block::API, 0),
            to: BlockRef::new(DATA_NODE, to_block, instance),
            prio: Priority::B,
            signal: sig,
        };
        self.trace.event(self.now_ns, kind::ADMIN, env.from, env.to, &env.signal);
        let name = env.signal.name();
        let mut pending = Some(env);
        let deadline = self.now_ns + 600_000 * NS_PER_MS;
        loop {
            if let Some(env) = pending.take() {
                match self.node.deliver(env) {
                    Ok(()) => {}
                    Err(DeliverError::Overloaded) => {
                        return Err("admin request refused: node overloaded while idle".into())
                    }
                    Err(e) => return Err(format!("admin request: {e:?}")),
                }
            }
            self.run_node(w)?;
            if !self.admin_replies.is_empty() {
                let env = self.admin_replies.remove(0);
                if !self.admin_replies.is_empty() {
                    return Err(format!("admin {name}: more than one reply: {:?}", self.admin_replies));
                }
                return Ok(env.signal);
            }
            match self.node.next_timer_ns() {
                Some(t) if t <= deadline => {
                    self.now_ns = self.now_ns.max(t);
                    self.node.advance_to(self.now_ns);
                }
                _ => return Err(format!("admin {name}: no reply from the node (hang)")),
            }
        }
    }

    /// Let virtual time pass (node timers fire) without host events.
    pub fn idle_for<W: Workload + ?Sized>(&mut self, ns: u64, w: &mut W) -> Result<(), String> {
        let until = self.now_ns + ns;
        while let Some(t) = self.node.next_timer_ns() {
            if t > until {
                break;
            }
            self.now_ns = self.now_ns.max(t);
            self.node.advance_to(self.now_ns);
            self.run_node(w)?;
        }
        self.now_ns = until;
        self.node.advance_to(until);
        Ok(())
    }
}
