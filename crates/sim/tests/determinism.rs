//! Replaying a seed gives the identical event trace; different seeds differ.

use norr_sim::toy::ToyBug;
use norr_sim::{run, NodeKind, SimConfig, WorkloadKind};

#[test]
fn same_seed_same_trace() {
    for w in WorkloadKind::ALL {
        for seed in [3u64, 77, 123_456_789] {
            let cfg = SimConfig::new(seed, w);
            let a = run(&cfg);
            let b = run(&cfg);
            assert_eq!(a.trace_hash, b.trace_hash, "seed {seed} {w:?}: trace differs between replays");
            assert_eq!(a.trace_events, b.trace_events);
            assert_eq!(a.summary, b.summary);
            assert_eq!(a.failure, b.failure);
        }
    }
}

#[test]
fn different_seeds_different_traces() {
    let mut hashes = std::collections::BTreeSet::new();
    for seed in 1..=10u64 {
        let r = run(&SimConfig::new(seed, WorkloadKind::Bank));
        hashes.insert(r.trace_hash);
    }
    assert_eq!(hashes.len(), 10);
}

/// The checkers catch a node that does not lock or does not commit atomically.
#[test]
fn checkers_catch_broken_nodes() {
    for bug in [ToyBug::NoLocking, ToyBug::PartialCommit] {
        for w in WorkloadKind::ALL {
            let caught = (1..=20u64).any(|seed| {
                let mut cfg = SimConfig::new(seed, w);
                cfg.node = NodeKind::Toy(bug);
                run(&cfg).failure.is_some()
            });
            assert!(caught, "{w:?} never caught {bug:?} in 20 seeds");
        }
    }
}

/// The toy node passes every workload (the host and checkers raise no false alarms).
#[test]
fn toy_node_is_clean() {
    for w in WorkloadKind::ALL {
        for seed in 1000..1030u64 {
            let mut cfg = SimConfig::new(seed, w);
            cfg.node = NodeKind::Toy(ToyBug::None);
            let r = run(&cfg);
            assert!(r.failure.is_none(), "toy {w:?} seed {seed}: {:?}", r.failure);
        }
    }
}

/// Two separate processes (fresh hash-map seeds, fresh allocator state) print
/// the same trace hashes for the same seeds.
#[test]
fn same_seed_same_trace_across_processes() {
    let run = || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_norr-sim"))
            .args(["--start", "4242", "--seeds", "3", "--steps", "1500"])
            .output()
            .expect("run norr-sim");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let hashes: Vec<String> = text
            .lines()
            .filter_map(|l| l.split(" trace ").nth(1).map(|r| r.split_whitespace().next().unwrap_or("").to_string()))
            .collect();
        assert_eq!(hashes.len(), 3 * WorkloadKind::ALL.len(), "unexpected output: {text}");
        hashes
    };
    assert_eq!(run(), run());
}
