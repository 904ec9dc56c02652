//! CI runs: the fixed seed list for every workload, a few random seeds (the
//! seed is printed), and `NORR_SIM_SEEDS=N` runs N more (e.g. 5000 for the
//! long tier): `NORR_SIM_SEEDS=5000 cargo test -p norr-sim --release -- --nocapture`.
//! Seeds marked `!` in seeds.txt reproduce open bugs; they are skipped here and
//! replayed one at a time with `cargo run -p norr-sim -- --seed N --workload W`.

use norr_sim::{parse_seeds, run, SimConfig, WorkloadKind};

fn run_one(seed: u64, w: WorkloadKind, steps: u64) -> Result<(), String> {
    let mut cfg = SimConfig::new(seed, w);
    cfg.steps = steps;
    let r = run(&cfg);
    println!("seed {seed} workload {} trace {:016x} {}", w.name(), r.trace_hash, r.summary);
    match &r.failure {
        None => Ok(()),
        Some(f) => Err(format!(
            "seed {seed} workload {} FAILED: {f}\n  {}\n  {}\n  reproduce: {}",
            w.name(),
            r.summary,
            r.host,
            r.repro()
        )),
    }
}

/// (seed, workload) pairs of seeds.txt; a `!` line takes its pairs out of the
/// green list even if a plain line names the same seed.
fn lines(known_bug: bool) -> Vec<(u64, WorkloadKind)> {
    let all = parse_seeds(include_str!("../seeds.txt"));
    let expand = |l: &norr_sim::SeedLine| -> Vec<(u64, WorkloadKind)> {
        match l.workload {
            Some(w) => vec![(l.seed, w)],
            None => WorkloadKind::ALL.iter().map(|&w| (l.seed, w)).collect(),
        }
    };
    let bugs: Vec<(u64, WorkloadKind)> = all.iter().filter(|l| l.known_bug).flat_map(expand).collect();
    if known_bug {
        return bugs;
    }
    let mut out: Vec<(u64, WorkloadKind)> =
        all.iter().filter(|l| !l.known_bug).flat_map(expand).filter(|p| !bugs.contains(p)).collect();
    out.dedup();
    out
}

#[test]
fn fixed_seeds() {
    let seeds = lines(false);
    assert!(!seeds.is_empty());
    let failures: Vec<String> = seeds.into_iter().filter_map(|(s, w)| run_one(s, w, 3_000).err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn random_seeds() {
    let n: u64 = std::env::var("NORR_SIM_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(4);
    let t =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(7);
    let mut x = t ^ ((std::process::id() as u64) << 20);
    // A failing random seed fails the test: add it to seeds.txt with the fix.
    let mut failures = Vec::new();
    for _ in 0..n {
        let seed = norr_sim::rng::splitmix64(&mut x) >> 16;
        println!("random seed {seed}");
        for w in WorkloadKind::ALL {
            if let Err(e) = run_one(seed, w, 3_000) {
                failures.push(e);
            }
        }
    }
    assert!(failures.is_empty(), "random seeds FAILED:\n{}", failures.join("\n"));
}
