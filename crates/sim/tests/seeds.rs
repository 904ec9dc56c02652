//! CI runs: the fixed seed list for every workload, a few random seeds (the
//! seed is printed), and `NORR_SIM_SEEDS=N` runs N more (e.g. 5000 for the
//! long tier): `NORR_SIM_SEEDS=5000 cargo test -p norr-sim --release -- --nocapture`.

use norr_sim::{parse_seeds, run, SimConfig, WorkloadKind};

fn check(seed: u64, w: WorkloadKind, steps: u64) {
    let mut cfg = SimConfig::new(seed, w);
    cfg.steps = steps;
    let r = run(&cfg);
    println!("seed {seed} workload {} trace {:016x} {}", w.name(), r.trace_hash, r.summary);
    if let Some(f) = &r.failure {
        panic!("seed {seed} workload {} FAILED: {f}\n  {}\n  {}\n  reproduce: {}", w.name(), r.summary, r.host, r.repro());
    }
}

#[test]
fn fixed_seeds() {
    let text = include_str!("../seeds.txt");
    let seeds = parse_seeds(text);
    assert!(!seeds.is_empty());
    for (w, seed) in seeds {
        match w {
            Some(w) => check(seed, w, 3_000),
            None => {
                for w in WorkloadKind::ALL {
                    check(seed, w, 3_000);
                }
            }
        }
    }
}

#[test]
fn random_seeds() {
    let n: u64 = std::env::var("NORR_SIM_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(4);
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(7);
    let mut x = t ^ ((std::process::id() as u64) << 20);
    for _ in 0..n {
        let seed = norr_sim::rng::splitmix64(&mut x) >> 16;
        println!("random seed {seed}");
        for w in WorkloadKind::ALL {
            check(seed, w, 3_000);
        }
    }
}
