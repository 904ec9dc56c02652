//! Instructions per replicated update: the workload of `norr bench --mix
//! update` (a `k BIGINT, v VARBINARY(100)` table, transactions of 64
//! updates that replace `v`) through a cluster of in-memory data nodes in
//! the cluster kit, all on one thread (no network, no disk, virtual time).
//! Run it with one data node and with two (one node group, replicas = 2)
//! under callgrind and compare what the blocks execute per update, which
//! the machine's load does not change:
//!
//! ```text
//! cargo build -p norr-node --example replicated_update
//! for nodes in 1 2; do
//!   valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*run_updates*' \
//!     target/debug/examples/replicated_update $nodes 20000 500
//! done
//! ```
//!
//! (The dev profile is optimized.) Arguments: data nodes (1 or 2), rows,
//! batches. Without callgrind it prints updates per second of this one
//! thread, which carries every node.

use norr_kernel::{BlockRef, NodeId};
use norr_knobs::Knobs;
use norr_node::testkit::ClusterKit;
use norr_signals::value::{ColumnType, Value};
use norr_signals::{block, DictOp, DictReq, DictResult, ExecType, KeyOp, Signal, TcKeyReq, TxnOutcome};
use std::time::Instant;

/// The data node's allocator, so the figures are the node's.
#[global_allocator]
static GLOBAL: norr_alloc::Allocator = norr_alloc::Allocator;

const API: NodeId = 100;
const BATCH: i64 = 64;
const VALUE_BYTES: usize = 100;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: i64| args.get(i).map_or(default, |s| s.parse().expect("a number"));
    let (nodes, rows, batches) = (arg(0, 2), arg(1, 20_000), arg(2, 500));
    let groups = match nodes {
        1 => vec![vec![1]],
        2 => vec![vec![1, 2]],
        other => panic!("data nodes: 1 or 2, not {other}"),
    };
    let knobs = Knobs { data_memory_bytes: 1 << 30, ..Knobs::default() };
    let mut kit = ClusterKit::start(groups, knobs, 1);
    let def = norr_txn::testkit::table_def("bench_kv", 4, &[("v", ColumnType::Varbinary { len: VALUE_BYTES as u32 })]);
    let req = DictReq { req_id: 1, op: DictOp::CreateTable(def) };
    let t = match kit.ask(BlockRef::new(1, block::DICT, 0), Signal::DictReq(Box::new(req))) {
        Some(Signal::DictConf(c)) => match c.result {
            DictResult::Table(t) => t.id,
            other => panic!("create table answered {other:?}"),
        },
        other => panic!("create table answered {other:?}"),
    };
    for b in 0..(rows + 99) / 100 {
        let ops = (b * 100..((b + 1) * 100).min(rows))
            .map(|id| KeyOp::insert(t, vec![Value::Int(id)], vec![(1, value(0))]))
            .collect();
        commit(&mut kit, ops);
    }
    let start = Instant::now();
    run_updates(&mut kit, t, rows, batches);
    let el = start.elapsed();
    println!(
        "{nodes} data node(s): {:.0} updates/s on one thread ({batches} batches of {BATCH})",
        (batches * BATCH) as f64 / el.as_secs_f64().max(1e-9)
    );
}

fn value(seed: i64) -> Value {
    Value::Bytes((0..VALUE_BYTES).map(|i| (i as i64 + seed) as u8).collect())
}

fn commit(kit: &mut ClusterKit, ops: Vec<KeyOp>) {
    let txn = kit.handle();
    let req = TcKeyReq { txn, exec: ExecType::Commit, ops };
    let got = kit.call(API, BlockRef::new(1, block::TC, 0), Signal::TcKeyReq(Box::new(req)));
    match got.first() {
        Some(Signal::TcKeyConf(c)) if c.outcome == TxnOutcome::Committed => {}
        other => panic!("batch answered {other:?}"),
    }
}

/// The measured part (callgrind: `--toggle-collect='*run_updates*'`).
#[inline(never)]
fn run_updates(kit: &mut ClusterKit, t: u32, rows: i64, batches: i64) {
    let mut key: i64 = 0;
    for b in 0..batches {
        let v = value(b + 1);
        let ops = (0..BATCH)
            .map(|_| {
                // A stride coprime with most row counts spreads the keys.
                key = (key + 7919) % rows;
                KeyOp::update(t, vec![Value::Int(key)], vec![(1, v.clone())])
            })
            .collect();
        commit(kit, ops);
    }
}
