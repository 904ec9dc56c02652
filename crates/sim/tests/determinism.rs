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
            assert_eq!(
                a.trace_hash, b.trace_hash,
                "seed {seed} {w:?}: trace differs between replays"
            );
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
            assert!(
                r.failure.is_none(),
                "toy {w:?} seed {seed}: {:?}",
                r.failure
            );
        }
    }
}
