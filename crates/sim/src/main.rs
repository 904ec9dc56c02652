//! `norr-sim`: run simulator seeds.
//!
//!   norr-sim --seed N [--workload bank|model|model_sp|locks|cluster|all] [--steps S] [--toy] [-v]
//!   norr-sim --seeds COUNT [--start N] ...    random (or consecutive from N) seeds
//!   norr-sim --seed-file crates/sim/seeds.txt   (a line's `steps=N` overrides --steps)
//!
//! Prints one line per run: seed, workload, trace hash, outcome. Exit code 1 if
//! any run failed, with the reproduction command.

use norr_sim::toy::ToyBug;
use norr_sim::{parse_seeds, run, NodeKind, SimConfig, WorkloadKind};

fn usage() -> ! {
    eprintln!("usage: norr-sim (--seed N | --seeds COUNT [--start N] | --seed-file PATH) [--workload bank|model|model_sp|locks|cluster|all] [--steps S] [--toy | --toy-bug NoLocking|PartialCommit] [-v]");
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // (workload, seed, steps): a seeds-file line may name its own steps.
    let mut seeds: Vec<(Option<WorkloadKind>, u64, Option<u64>)> = Vec::new();
    let mut count: Option<u64> = None;
    let mut start: Option<u64> = None;
    let mut workloads: Vec<WorkloadKind> = WorkloadKind::ALL.to_vec();
    let mut steps = 3_000u64;
    let mut node = norr_sim::sim::default_node();
    let mut verbose = false;
    let mut i = 0;
    let val = |i: &mut usize| -> String {
        *i += 1;
        args.get(*i).cloned().unwrap_or_else(|| usage())
    };
    while i < args.len() {
        match args[i].as_str() {
            "--seed" => seeds.push((None, val(&mut i).parse().unwrap_or_else(|_| usage()), None)),
            "--seeds" => count = Some(val(&mut i).parse().unwrap_or_else(|_| usage())),
            "--start" => start = Some(val(&mut i).parse().unwrap_or_else(|_| usage())),
            "--seed-file" => {
                let p = val(&mut i);
                let text = std::fs::read_to_string(&p).unwrap_or_else(|e| {
                    eprintln!("{p}: {e}");
                    std::process::exit(2)
                });
                let lines = parse_seeds(&text).unwrap_or_else(|e| {
                    eprintln!("{p}: {e}");
                    std::process::exit(2)
                });
                seeds.extend(lines.into_iter().map(|l| (l.workload, l.seed, l.steps)));
            }
            "--workload" => {
                let w = val(&mut i);
                workloads = if w == "all" {
                    WorkloadKind::ALL.to_vec()
                } else {
                    vec![WorkloadKind::parse(&w).unwrap_or_else(|| usage())]
                };
            }
            "--steps" => steps = val(&mut i).parse().unwrap_or_else(|_| usage()),
            "--toy" => node = NodeKind::Toy(ToyBug::None),
            "--real" => node = NodeKind::Real,
            "--toy-bug" => {
                node = NodeKind::Toy(match val(&mut i).as_str() {
                    "NoLocking" => ToyBug::NoLocking,
                    "PartialCommit" => ToyBug::PartialCommit,
                    _ => usage(),
                })
            }
            "-v" | "--verbose" => verbose = true,
            _ => usage(),
        }
        i += 1;
    }
    if let Some(n) = count {
        // Random seeds come from the process id and the clock: the only
        // nondeterminism of the tool, and every seed is printed.
        let base = start.unwrap_or_else(|| {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
            let mut x = t ^ ((std::process::id() as u64) << 32);
            norr_sim::rng::splitmix64(&mut x)
        });
        for k in 0..n {
            seeds.push((
                None,
                if start.is_some() { base + k } else { base.wrapping_add(k.wrapping_mul(0x9E37_79B9_7F4A_7C15)) },
                None,
            ));
        }
    }
    if seeds.is_empty() {
        usage();
    }
    let mut failed = 0u64;
    let mut runs = 0u64;
    // Probe name -> (runs that reached it, total hits).
    let mut probes: std::collections::BTreeMap<String, (u64, u64)> = std::collections::BTreeMap::new();
    for (w, seed, line_steps) in seeds {
        let steps = line_steps.unwrap_or(steps);
        let ws: Vec<WorkloadKind> = match w {
            Some(w) => vec![w],
            None => workloads.clone(),
        };
        for w in ws {
            let cfg = SimConfig { seed, workload: w, steps, node, verbose };
            let r = run(&cfg);
            runs += 1;
            for (name, n) in &r.probes {
                if *n > 0 {
                    let e = probes.entry(name.clone()).or_default();
                    e.0 += 1;
                    e.1 += n;
                }
            }
            match &r.failure {
                None => println!(
                    "seed {seed} workload {} trace {:016x} ok ({} events, {} ms virtual)",
                    w.name(),
                    r.trace_hash,
                    r.trace_events,
                    r.virtual_ns / 1_000_000
                ),
                Some(f) => {
                    failed += 1;
                    println!("seed {seed} workload {} trace {:016x} FAILED: {f}", w.name(), r.trace_hash);
                    println!("  reproduce: {}", r.repro());
                }
            }
            if verbose || r.failure.is_some() {
                println!("  {}", r.summary);
                println!("  {}", r.host);
                println!("  knobs: {:?}", r.knobs);
                if !r.probes.is_empty() {
                    println!("  probes: {:?}", r.probes);
                }
            }
        }
    }
    if runs > 1 && !probes.is_empty() {
        println!("probes reached (runs, hits):");
        for (name, (r, n)) in &probes {
            println!("  {name:<45} {r:>6} {n:>10}");
        }
    }
    println!("{} passed, {} failed", runs - failed, failed);
    if failed > 0 {
        std::process::exit(1);
    }
}
