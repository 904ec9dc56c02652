//! norr-sim: the deterministic simulator.
//!
//! Runs the data node's blocks and many simulated clients in one thread with
//! virtual time and a seeded random generator, injecting message delays (and so
//! reordering between connections), long stalls, back-pressure, and client
//! crashes in the middle of transactions. Workloads (bank, model, model_sp, locks) check
//! invariants after every step. A run prints its seed and its trace hash;
//! replaying the seed gives the identical trace.
//!
//! Determinism rules: every random choice comes from `rng::Rng` seeded by the
//! run's seed; no wall clock; no iteration over hash maps (BTreeMap only).

pub mod disk;
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

/// Node used when none is named: the real blocks of norr-txn.
pub const REAL_NODE_DEFAULT: NodeKind = NodeKind::Real;

/// The real data node: TC, LQH and DICT blocks of norr-txn.
pub fn real_node(node: NodeId, knobs: &Knobs) -> Scheduler<Signal> {
    norr_txn::build_data_node(node, knobs)
}

/// One line of a seeds file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeedLine {
    /// None: run every workload.
    pub workload: Option<WorkloadKind>,
    pub seed: u64,
    /// `!` prefix: the seed still fails on an open bug; CI skips it, the
    /// ignored test `known_bug_seeds` runs it. Remove the `!` once fixed.
    pub known_bug: bool,
}

/// Seeds listed in a seeds file: one per line, `#` comments, optional
/// `workload:` prefix (`bank:123`), optional `!` prefix for open bugs.
pub fn parse_seeds(text: &str) -> Vec<SeedLine> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (known_bug, line) = match line.strip_prefix('!') {
            Some(rest) => (true, rest.trim()),
            None => (false, line),
        };
        let (workload, s) = match line.split_once(':') {
            Some((w, s)) => (WorkloadKind::parse(w.trim()), s.trim()),
            None => (None, line),
        };
        if let Ok(seed) = s.parse::<u64>() {
            out.push(SeedLine { workload, seed, known_bug });
        }
    }
    out
}
