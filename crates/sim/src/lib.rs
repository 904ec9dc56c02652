//! norr-sim: the deterministic simulator.
//!
//! Runs the data node's blocks and many simulated clients in one thread with
//! virtual time and a seeded random generator, injecting message delays (and so
//! reordering between connections), long stalls, back-pressure, and client
//! crashes in the middle of transactions. Workloads (bank, model, locks) check
//! invariants after every step. A run prints its seed and its trace hash;
//! replaying the seed gives the identical trace.
//!
//! Determinism rules: every random choice comes from `rng::Rng` seeded by the
//! run's seed; no wall clock; no iteration over hash maps (BTreeMap only).

pub mod host;
pub mod rng;
pub mod sim;
pub mod toy;
pub mod trace;
pub mod workload;

pub use sim::{run, NodeKind, RunReport, SimConfig, WorkloadKind};

use norr_kernel::{NodeId, Scheduler};
use norr_knobs::Knobs;
use norr_signals::Signal;

/// Node used when none is named: the toy until norr-txn builds a data node.
pub const REAL_NODE_DEFAULT: NodeKind = NodeKind::Toy(toy::ToyBug::None);

/// The real data node (falls back to the toy until norr-txn provides one).
pub fn real_node(node: NodeId, knobs: &Knobs) -> Scheduler<Signal> {
    toy::build_toy_node(node, knobs, toy::ToyBug::None)
}

/// Seeds listed in a seeds file: one per line, `#` comments, optional
/// `workload:` prefix (`bank:123`). Returns (workload or None for all, seed).
pub fn parse_seeds(text: &str) -> Vec<(Option<WorkloadKind>, u64)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (w, s) = match line.split_once(':') {
            Some((w, s)) => (WorkloadKind::parse(w.trim()), s.trim()),
            None => (None, line),
        };
        if let Ok(seed) = s.parse::<u64>() {
            out.push((w, seed));
        }
    }
    out
}
