//! Simple reads under the simulator: the model workload's point selects
//! (committed reads only, committing in the same batch) run without a commit
//! round to LQH, under client crashes (a point select may crash mid-way) and
//! online DDL; the run's checks find every read right and, at the end, no
//! transaction record or row lock left in TC or LQH.

use norr_sim::{run, SimConfig, WorkloadKind};

#[test]
fn point_selects_leave_nothing_behind() {
    let mut hits = std::collections::BTreeMap::<String, u64>::new();
    for seed in 1..=12u64 {
        let mut cfg = SimConfig::new(seed, WorkloadKind::Model);
        cfg.steps = 3_000;
        let r = run(&cfg);
        assert!(r.failure.is_none(), "seed {seed}: {:?}\n  {}\n  {}", r.failure, r.summary, r.repro());
        for (name, n) in r.probes {
            *hits.entry(name).or_default() += n;
        }
    }
    let hit = |name: &str| hits.get(name).copied().unwrap_or(0);
    assert!(hit("tc: simple reads (no lqh state)") > 0, "{hits:?}");
    assert!(hit("lqh: simple reads (no record)") > 0, "{hits:?}");
    assert!(hit("tc: api failure") > 0, "no client crashed: {hits:?}");
    // Other transactions still commit through LQH.
    assert!(hit("lqh: commits") > 0, "{hits:?}");
}
