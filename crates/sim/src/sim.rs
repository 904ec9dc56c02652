//! One simulation run: seed -> knobs, network parameters, node, workload;
//! load phase, drain phase, final checks; a report with the trace hash.

use crate::host::{random_knobs, Host, NetParams, Phase};
use crate::rng::Rng;
use crate::toy::{build_toy_node, ToyBug};
use crate::workload::{bank::Bank, locks::Locks, model::Model, open_transactions, Workload};
use norr_kernel::Scheduler;
use norr_knobs::Knobs;
use norr_signals::Signal;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadKind {
    Bank,
    Model,
    Locks,
    /// Model with savepoints set and rolled back to between batches (a
    /// separate kind so that model's seeds keep replaying what they did).
    ModelSavepoints,
    /// Several whole data nodes with QMGR and DIH under crashes, hangs and
    /// splits (`crate::cluster`); `steps` are client requests. Not in `ALL`:
    /// it runs its own cluster, not the single node of the other kinds.
    Cluster,
}

impl WorkloadKind {
    pub const ALL: [WorkloadKind; 4] =
        [WorkloadKind::Bank, WorkloadKind::Model, WorkloadKind::Locks, WorkloadKind::ModelSavepoints];
    pub fn parse(s: &str) -> Option<WorkloadKind> {
        match s {
            "bank" => Some(WorkloadKind::Bank),
            "model" => Some(WorkloadKind::Model),
            "locks" => Some(WorkloadKind::Locks),
            "model_sp" => Some(WorkloadKind::ModelSavepoints),
            "cluster" => Some(WorkloadKind::Cluster),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Bank => "bank",
            WorkloadKind::Model => "model",
            WorkloadKind::Locks => "locks",
            WorkloadKind::ModelSavepoints => "model_sp",
            WorkloadKind::Cluster => "cluster",
        }
    }
}

/// Which data node the simulator hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// The real blocks from norr-txn.
    Real,
    /// The toy node of this crate (host development, checker self-tests).
    Toy(ToyBug),
}

#[derive(Debug, Clone)]
pub struct SimConfig {
    pub seed: u64,
    pub workload: WorkloadKind,
    /// Steps (host events) of the load phase.
    pub steps: u64,
    pub node: NodeKind,
    pub verbose: bool,
}

impl SimConfig {
    pub fn new(seed: u64, workload: WorkloadKind) -> SimConfig {
        SimConfig { seed, workload, steps: 3_000, node: default_node(), verbose: false }
    }
}

/// The real node once norr-txn provides it, else the toy.
pub fn default_node() -> NodeKind {
    crate::REAL_NODE_DEFAULT
}

#[derive(Debug, Clone)]
pub struct RunReport {
    pub seed: u64,
    pub workload: WorkloadKind,
    pub node: NodeKind,
    pub trace_hash: u64,
    pub trace_events: u64,
    pub steps: u64,
    pub virtual_ns: u64,
    pub failure: Option<String>,
    pub summary: String,
    pub host: String,
    pub knobs: Knobs,
    /// Rare-path counters (`probe!` markers) of the node's blocks at the end.
    pub probes: Vec<(String, u64)>,
}

impl RunReport {
    pub fn repro(&self) -> String {
        let node = match self.node {
            NodeKind::Real => String::new(),
            NodeKind::Toy(ToyBug::None) => " --toy".to_string(),
            NodeKind::Toy(b) => format!(" --toy-bug {b:?}"),
        };
        format!(
            "cargo run -p norr-sim -- --seed {} --workload {} --steps {}{node}",
            self.seed,
            self.workload.name(),
            self.steps_cfg()
        )
    }
    fn steps_cfg(&self) -> u64 {
        self.steps
    }
}

fn build_node(kind: NodeKind, knobs: &Knobs) -> Scheduler<Signal> {
    match kind {
        NodeKind::Toy(bug) => build_toy_node(crate::host::DATA_NODE, knobs, bug),
        NodeKind::Real => crate::real_node(crate::host::DATA_NODE, knobs),
    }
}

/// Most steps of the drain phase and the longest virtual time it may take.
const DRAIN_MAX_STEPS: u64 = 200_000;
const DRAIN_MAX_NS: u64 = 300_000_000_000;

pub fn run(cfg: &SimConfig) -> RunReport {
    if cfg.workload == WorkloadKind::Cluster {
        return crate::cluster::run(cfg);
    }
    let mut rng = Rng::new(cfg.seed);
    let knobs = random_knobs(&mut rng.fork());
    let net = NetParams::random(&mut rng.fork());
    let mut wrng = rng.fork();
    let mut w: Box<dyn Workload> = match cfg.workload {
        WorkloadKind::Bank => Box::new(Bank::new(&mut wrng, net.clients, &knobs)),
        WorkloadKind::Model => Box::new(Model::new(&mut wrng, net.clients, &knobs)),
        WorkloadKind::Locks => Box::new(Locks::new(&mut wrng, net.clients, &knobs)),
        WorkloadKind::ModelSavepoints => Box::new(Model::with_savepoints(&mut wrng, net.clients, &knobs)),
        WorkloadKind::Cluster => unreachable!("run by crate::cluster"),
    };
    let node = build_node(cfg.node, &knobs);
    let mut host = Host::new(rng.fork(), node, knobs.clone(), net);
    host.verbose = cfg.verbose;
    host.trace.write_u64(cfg.seed);
    let failure = drive(cfg, &mut host, w.as_mut()).err();
    let probes = if failure.is_none() { probes(&mut host).unwrap_or_default() } else { Vec::new() };
    let s = &host.stats;
    RunReport {
        seed: cfg.seed,
        workload: cfg.workload,
        node: cfg.node,
        trace_hash: host.trace.finish(),
        trace_events: host.trace.events(),
        steps: cfg.steps,
        virtual_ns: host.now_ns,
        failure,
        summary: w.summary(),
        host: format!(
            "clients={} steps={} to_node={} to_client={} node_signals={} timers={} crashes={} api_fail_races={} dropped_inflight={} dropped_to_dead={} overloaded_retries={} long_delays={} stalls={}",
            host.net.clients,
            s.steps,
            s.to_node,
            s.to_client,
            s.node_signals,
            s.timers,
            s.crashes,
            s.api_fail_races,
            s.dropped_inflight,
            s.dropped_to_dead,
            s.overloaded_retries,
            s.long_delays,
            s.stalls
        ),
        knobs,
        probes,
    }
}

/// Ask TC and every LQH for their named counters (real node only; the toy
/// does not answer STATS_REQ and gets no entry).
pub fn probes(host: &mut Host) -> Result<Vec<(String, u64)>, String> {
    use norr_signals::{block, InternalSignal};
    let mut out = Vec::new();
    if !host.node.has_block(norr_kernel::BlockRef::new(crate::host::DATA_NODE, block::LQH, 0)) {
        return Ok(out);
    }
    let mut targets = vec![(block::TC, 0u16)];
    for i in 0..norr_txn::LQH_INSTANCES {
        targets.push((block::LQH, i));
    }
    for (b, i) in targets {
        let req = Signal::Internal(Box::new(InternalSignal::StatsReq { req: 7 }));
        if let Signal::Internal(reply) = host.admin_request_to(b, i, req, &mut crate::workload::NoObserver)? {
            if let InternalSignal::StatsConf { stats, .. } = *reply {
                out.extend(stats.counters);
            }
        }
    }
    out.sort();
    Ok(out)
}

fn drive(cfg: &SimConfig, host: &mut Host, w: &mut dyn Workload) -> Result<(), String> {
    w.setup(host)?;
    host.start_clients(w)?;
    // Load.
    while host.stats.steps < cfg.steps {
        if !host.step(w)? {
            break;
        }
    }
    // Drain: no new transactions, no crashes; every outstanding request must
    // get its answer.
    host.phase = Phase::Drain;
    let start_steps = host.stats.steps;
    let start_ns = host.now_ns;
    loop {
        let all_idle = (0..host.clients()).all(|c| !host.client_alive(c) || w.is_idle(c));
        if all_idle && !host.has_host_events() {
            break;
        }
        if host.stats.steps - start_steps > DRAIN_MAX_STEPS || host.now_ns - start_ns > DRAIN_MAX_NS {
            let stuck: Vec<usize> = (0..host.clients()).filter(|&c| host.client_alive(c) && !w.is_idle(c)).collect();
            return Err(format!("hang: clients {stuck:?} still wait for an answer after the drain phase"));
        }
        if !host.step(w)? {
            let stuck: Vec<usize> = (0..host.clients()).filter(|&c| host.client_alive(c) && !w.is_idle(c)).collect();
            return Err(format!("hang: clients {stuck:?} wait for an answer, nothing left to happen"));
        }
    }
    // Let inactivity time-outs and API failure handling settle, then check.
    w.finish(host)?;
    if let Some(open) = open_transactions(host)? {
        if open != 0 {
            return Err(format!("leak: node reports {open} open transactions after every client finished or failed"));
        }
    }
    // LQH too: no operation record or row lock outlives its transaction
    // (simple reads never leave one; see `norr_signals::internal`).
    for (name, n) in probes(host)? {
        if n != 0 && (name == "lqh: open transactions" || name == "lqh: locked keys") {
            return Err(format!("leak: {name} = {n} after every client finished or failed"));
        }
    }
    Ok(())
}
