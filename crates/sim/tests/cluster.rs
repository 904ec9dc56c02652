//! The cluster workload (`norr-sim --workload cluster`): a sweep of seeds
//! in the normal run, and replay of a seed giving the same trace.
//! `NORR_SIM_CLUSTER_SEEDS=N` sweeps N seeds instead (the long tier).

use norr_sim::{run, SimConfig, WorkloadKind};

const STEPS: u64 = 300;

fn run_seed(seed: u64) -> Result<u64, String> {
    let mut cfg = SimConfig::new(seed, WorkloadKind::Cluster);
    cfg.steps = STEPS;
    let r = run(&cfg);
    match r.failure {
        None => Ok(r.trace_hash),
        Some(ref f) => Err(format!("seed {seed} FAILED: {f}\n  {}\n  reproduce: {}", r.summary, r.repro())),
    }
}

#[test]
fn cluster_seed_sweep() {
    let n = std::env::var("NORR_SIM_CLUSTER_SEEDS").ok().and_then(|v| v.parse::<u64>().ok()).unwrap_or(60);
    let failures: Vec<String> = (1..=n).filter_map(|s| run_seed(s).err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_cluster_seed_replays_exactly() {
    for seed in [3, 8] {
        let a = run_seed(seed).expect("green seed");
        let b = run_seed(seed).expect("green seed");
        assert_eq!(a, b, "seed {seed} gave two traces");
        assert_ne!(a, 0);
    }
}
