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

pub mod cluster;
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
    /// `steps=N` after the seed: the run needs that many steps to reach what
    /// it found (None: the default of the runner, 3,000 in CI).
    pub steps: Option<u64>,
    /// `!` prefix: the seed still fails on an open bug; CI skips it, the
    /// ignored test `known_bug_seeds` runs it. Remove the `!` once fixed.
    pub known_bug: bool,
}

/// Steps CI gives a seed of the seeds file that names none.
pub const DEFAULT_SEED_STEPS: u64 = 3_000;

impl SeedLine {
    /// Steps to run this seed for.
    pub fn steps_or_default(&self) -> u64 {
        self.steps.unwrap_or(DEFAULT_SEED_STEPS)
    }
}

/// Seeds listed in a seeds file: one per line, `#` comments, optional
/// `workload:` prefix (`bank:123`), optional `!` prefix for open bugs,
/// optional `steps=N` after the seed (`model:9000820 steps=30000`). A line
/// that does not parse is an error naming it, so a typo never drops a seed.
pub fn parse_seeds(text: &str) -> Result<Vec<SeedLine>, String> {
    let mut out = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad = |why: &str| format!("seeds file line {}: {why}: {raw:?}", n + 1);
        let (known_bug, line) = match line.strip_prefix('!') {
            Some(rest) => (true, rest.trim()),
            None => (false, line),
        };
        let mut words = line.split_whitespace();
        let first = words.next().ok_or_else(|| bad("no seed"))?;
        let (workload, s) = match first.split_once(':') {
            Some((w, s)) => (Some(WorkloadKind::parse(w.trim()).ok_or_else(|| bad("unknown workload"))?), s.trim()),
            None => (None, first),
        };
        let seed = s.parse::<u64>().map_err(|_| bad("seed is not a number"))?;
        let mut steps = None;
        for w in words {
            let v = w.strip_prefix("steps=").ok_or_else(|| bad("expected steps=N after the seed"))?;
            steps = Some(v.parse::<u64>().map_err(|_| bad("steps is not a number"))?);
        }
        out.push(SeedLine { workload, seed, steps, known_bug });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_lines_parse_with_workload_steps_and_bug_marks() {
        let text = "# c\n7\nbank:5 # why\n!locks:9\nmodel:9000820 steps=30000\n\n";
        let l = parse_seeds(text).unwrap();
        assert_eq!(l.len(), 4);
        assert_eq!(l[0], SeedLine { workload: None, seed: 7, steps: None, known_bug: false });
        assert_eq!(l[1].workload, Some(WorkloadKind::Bank));
        assert!(l[2].known_bug && l[2].seed == 9);
        assert_eq!(l[3].steps, Some(30_000));
        assert_eq!(l[3].steps_or_default(), 30_000);
        assert_eq!(l[0].steps_or_default(), DEFAULT_SEED_STEPS);
        for bad in ["x", "bank:x", "nope:5", "5 steps=x", "5 stepz=3"] {
            assert!(parse_seeds(bad).is_err(), "{bad:?} parsed");
        }
    }
}
