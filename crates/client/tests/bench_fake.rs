//! `norr bench` end to end against the fake node.

mod common;

use common::fake_node::FakeNode;
use norr_client::bench::{run_bench_report, BenchArgs, Mix};
use std::time::Duration;

#[test]
fn bench_loads_runs_and_reports() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let node = rt.block_on(FakeNode::start());
    let mut args = BenchArgs::new(node.addr.to_string());
    args.threads = 2;
    args.inflight = 4;
    args.batch = 16;
    args.keys = 2000;
    args.record_size = 50;
    args.mix = Mix::parse("read=70,update=20,insert=5,delete=5").unwrap();
    args.duration = Duration::from_millis(400);
    args.warmup = Duration::from_millis(100);
    args.load = true;
    let r = run_bench_report(&args).unwrap();
    assert!(r.ops > 0, "{}", r.to_text());
    assert_eq!(r.permanent_errors, 0, "{}", r.to_text());
    assert!(r.latency.p50_us > 0 && r.latency.p50_us <= r.latency.p99_us);
    assert_eq!(r.memory.as_ref().unwrap().rows_loaded, 2000);
    assert!(r.per_kind.len() >= 2);
    let j = r.to_json();
    assert!(j.starts_with('{') && j.ends_with('}') && j.contains("\"ops_per_s\""));
    println!("{}", r.to_text());
    // Without --load the table must exist; a second run reuses it.
    args.load = false;
    args.mix = Mix::parse("read").unwrap();
    let r = run_bench_report(&args).unwrap();
    assert!(r.memory.is_none() && r.ops > 0);
    args.table = "missing".into();
    assert!(run_bench_report(&args).is_err());
}

/// `--addr a,b`: every bench connection reaches both data nodes of a
/// cluster, so transactions start on the node of their first key's primary
/// (each node coordinates some), not all on the first address.
#[test]
fn bench_reaches_every_node_of_a_cluster() {
    use common::fake_cluster::FakeCluster;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cl = rt.block_on(FakeCluster::start(2, 2));
    let mut args = BenchArgs::new(format!("{},{}", cl.addr(1), cl.addr(2)));
    args.threads = 2;
    args.inflight = 4;
    args.batch = 8;
    args.keys = 2000;
    args.mix = Mix::parse("read=50,update=50").unwrap();
    args.duration = Duration::from_millis(400);
    args.warmup = Duration::from_millis(100);
    args.load = true;
    let r = run_bench_report(&args).unwrap();
    assert!(r.ops > 0, "{}", r.to_text());
    assert_eq!((r.permanent_errors, r.temporary_errors), (0, 0), "{}", r.to_text());
    for node in [1, 2] {
        let commits = cl.received(node).iter().filter(|x| x.exec == norr_client::ExecType::Commit).count();
        assert!(commits > 10, "node {node} coordinated {commits} transactions");
    }
    // A malformed address list is refused before connecting.
    args.addr = "127.0.0.1:1,nonsense".into();
    assert!(run_bench_report(&args).is_err());
}
