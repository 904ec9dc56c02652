//! Node restart from local files copies only what changed (issue 21 item
//! 7): durable nodes on the simulator's disks in the cluster kit. A node is
//! stopped, the live replica inserts, updates and deletes a known few rows,
//! the node restarts from its files: the replicas agree, rows deleted
//! meanwhile are gone from it, and the copy sent only the changed rows in
//! full (the unchanged ones as keys). Tables dropped or changed while the
//! node was down are copied in full; writes during the copy reach it too.

mod common;

use common::*;
use norr_durability::crash::points;
use norr_durability::CrashPoints;
use norr_kernel::{BlockRef, NodeId};
use norr_knobs::Knobs;
use norr_node::durable::build_durable_full;
use norr_node::testkit::ClusterKit;
use norr_signals::internal::InternalSignal;
use norr_signals::schema::IndexKind;
use norr_signals::{
    block, DictOp, DictReq, DictResult, ErrorCode, ExecType, KeyOp, Signal, TableDef, TcKeyReq, TxnOutcome, Value,
};
use norr_sim::disk::{DiskFaults, SharedDisk, SimDataDir, SimDisk, SimFsBlock};
use norr_sim::rng::Rng;
use std::collections::BTreeMap;

fn dknobs() -> Knobs {
    Knobs { gcp_interval_ms: 20, redo_files: 2, redo_file_bytes: 4 << 20, ..knobs() }
}

/// Two durable data nodes (one node group) on simulated disks.
fn start(seed: u64) -> ClusterKit {
    start_armed(seed, CrashPoints::off())
}

/// [`start`], with `first_boot_of_2` armed on node 2's first boot only.
fn start_armed(seed: u64, first_boot_of_2: CrashPoints) -> ClusterKit {
    let mut armed = Some(first_boot_of_2);
    let mut rng = Rng::new(seed ^ 0xDE17A);
    let mut disks: BTreeMap<NodeId, SharedDisk> = BTreeMap::new();
    for n in [1, 2] {
        let faults = DiskFaults { latency_min_ns: 20_000, latency_max_ns: 500_000, ..DiskFaults::none() };
        disks.insert(n, SimDisk::shared(rng.fork(), faults));
    }
    ClusterKit::start_with(vec![vec![1, 2]], dknobs(), seed, move |topo, knobs, observers| {
        let disk = disks[&topo.node].clone();
        let crash = if topo.node == 2 { armed.take().unwrap_or_else(CrashPoints::off) } else { CrashPoints::off() };
        let (mut s, _report) =
            build_durable_full(topo.node, Some(topo), knobs, &SimDataDir(disk.clone()), observers, &crash)
                .unwrap_or_else(|e| panic!("node {} restart: {e}", topo.node));
        s.add_block(block::FS, 0, Box::new(SimFsBlock::new(disk)));
        s
    })
}

fn dict(kit: &mut ClusterKit, op: DictOp) -> DictResult {
    let req = DictReq { req_id: 11, op };
    match kit.ask(BlockRef::new(1, block::DICT, 0), Signal::DictReq(Box::new(req))) {
        Some(Signal::DictConf(c)) => c.result,
        other => panic!("dictionary request answered {other:?}"),
    }
}

/// Commit `ops` through node 1 (temporary errors retried).
fn commit(kit: &mut ClusterKit, ops: Vec<KeyOp>) {
    for _ in 0..20 {
        let h = kit.handle();
        match txn(kit, 1, h, ops.clone(), ExecType::Commit) {
            Signal::TcKeyConf(c) if c.outcome == TxnOutcome::Committed => return,
            Signal::TcKeyRef(r) if r.error.code.is_temporary() => kit.run(),
            other => panic!("transaction answered {other:?}"),
        }
    }
    panic!("transaction kept failing");
}

fn load(kit: &mut ClusterKit, t: &TableDef, ids: std::ops::Range<i64>) {
    let ids: Vec<i64> = ids.collect();
    for chunk in ids.chunks(50) {
        let ops = chunk.iter().map(|i| KeyOp::write(t.id, vec![Value::Int(*i)], vec![(1, Value::Int(*i))])).collect();
        commit(kit, ops);
    }
}

/// A counter of node `n`'s block (LQH instance 0 or DIH).
fn counter(kit: &mut ClusterKit, n: NodeId, blk: u16, name: &str) -> u64 {
    match kit.internal_ask(BlockRef::new(n, blk, 0), InternalSignal::StatsReq { req: 1 }) {
        Some(InternalSignal::StatsConf { stats, .. }) => {
            stats.counters.iter().filter(|(k, _)| k == name).map(|(_, v)| *v).sum()
        }
        other => panic!("stats answered {other:?}"),
    }
}

fn assert_replicas_agree(kit: &mut ClusterKit, t: &TableDef) {
    let a = checksums(kit, 1, t);
    assert_eq!(checksums(kit, 2, t), a, "replicas of {} differ", t.name);
}

/// Let GCPs make everything committed so far durable on both nodes, then
/// kill node 2 and wait until node 1 excluded it.
fn settle_and_kill_2(kit: &mut ClusterKit) {
    kit.advance(200_000_000);
    kit.crash(2);
    kit.wait_for("node 1 to exclude node 2", |k| k.membership().is_some_and(|m| !m.contains(2)));
}

fn restart_2(kit: &mut ClusterKit) {
    kit.boot(2);
    kit.wait_until_started(2);
    kit.run();
}

#[test]
fn a_restart_from_files_copies_only_the_changed_rows() {
    let mut kit = start(31);
    let t = create_table(&mut kit, 1, "t", 4);
    const N: i64 = 400;
    load(&mut kit, &t, 0..N);
    settle_and_kill_2(&mut kit);
    // While node 2 is down: 12 updates, 8 deletes, 6 inserts.
    let updated: Vec<i64> = (0..12).map(|i| i * 31 + 5).collect();
    let deleted: Vec<i64> = (0..8).map(|i| i * 50 + 1).collect();
    assert!(updated.iter().all(|u| !deleted.contains(u)));
    commit(
        &mut kit,
        updated.iter().map(|i| KeyOp::write(t.id, vec![Value::Int(*i)], vec![(1, Value::Int(-i))])).collect(),
    );
    commit(&mut kit, deleted.iter().map(|i| KeyOp::delete(t.id, vec![Value::Int(*i)])).collect());
    load(&mut kit, &t, N..N + 6);
    restart_2(&mut kit);

    assert_replicas_agree(&mut kit, &t);
    for i in &deleted {
        assert_eq!(read(&mut kit, 2, &t, *i), None, "row {i} deleted while node 2 was down came back");
    }
    for i in &updated {
        assert_eq!(read(&mut kit, 2, &t, *i), Some(-i));
    }
    assert_eq!(read(&mut kit, 2, &t, N + 5), Some(N + 5));
    // Only the changed rows went in full, every unchanged one as a key, and
    // the starting node deleted exactly the rows deleted meanwhile.
    let full = (updated.len() + 6) as u64;
    let keys = N as u64 - (updated.len() + deleted.len()) as u64;
    assert_eq!(counter(&mut kit, 1, block::LQH, "lqh: rows copied out"), full);
    assert_eq!(counter(&mut kit, 1, block::LQH, "lqh: keys copied out"), keys);
    assert_eq!(counter(&mut kit, 2, block::LQH, "lqh: rows copied in"), full);
    assert_eq!(counter(&mut kit, 2, block::LQH, "lqh: keys confirmed by a copy"), keys);
    assert_eq!(counter(&mut kit, 2, block::LQH, "lqh: rows deleted by a resync"), deleted.len() as u64);
    assert_eq!(counter(&mut kit, 2, block::LQH, "lqh: restored tables kept at a node restart"), 1);
    assert_eq!(counter(&mut kit, 1, block::DIH, "dih: partitions copied as a delta"), 4);
    assert_eq!(counter(&mut kit, 1, block::DIH, "dih: partitions copied in full"), 0);
    assert_eq!(counter(&mut kit, 1, block::DIH, "dih: rows deleted by resyncs"), deleted.len() as u64);
    let phases = kit.status(2).expect("node 2's status").phases.clone();
    assert!(
        phases.iter().any(|(p, _)| p.contains(&format!("{full} rows in full, {keys} unchanged rows as keys"))),
        "{phases:?}"
    );

    // Node 2 is a full replica: node 1 may now fail and node 2 serves.
    kit.crash(1);
    kit.wait_for("node 2 to exclude node 1", |k| k.membership_of(2).is_some_and(|m| !m.contains(1)));
    assert_eq!(read(&mut kit, 2, &t, 2), Some(2));
    assert_eq!(read(&mut kit, 2, &t, 1), None);
}

#[test]
fn tables_dropped_or_changed_while_down_are_copied_in_full() {
    let mut kit = start(32);
    let kept = create_table(&mut kit, 1, "kept", 2);
    let dropped = create_table(&mut kit, 1, "dropped", 2);
    let indexed = create_table(&mut kit, 1, "indexed", 2);
    let mut uniq = norr_txn::testkit::table_def("uniq", 2, &[("v", int())]);
    uniq.indexes.push(norr_txn::testkit::index_def("uv", &[1], true, IndexKind::Ordered));
    let uniq = match dict(&mut kit, DictOp::CreateTable(uniq)) {
        DictResult::Table(t) => t,
        other => panic!("create answered {other:?}"),
    };
    for t in [&kept, &dropped, &indexed, &uniq] {
        load(&mut kit, t, 0..60);
    }
    settle_and_kill_2(&mut kit);
    dict(&mut kit, DictOp::DropTable { name: dropped.name.clone() });
    let index = norr_txn::testkit::index_def("by_v", &[1], false, IndexKind::Ordered);
    let indexed = match dict(&mut kit, DictOp::CreateIndex { table: indexed.name.clone(), index }) {
        DictResult::Table(t) => t,
        other => panic!("create index answered {other:?}"),
    };
    // A row of the unique table deleted and its value given to another.
    commit(&mut kit, vec![KeyOp::delete(uniq.id, vec![Value::Int(7)])]);
    commit(&mut kit, vec![KeyOp::write(uniq.id, vec![Value::Int(8)], vec![(1, Value::Int(7))])]);
    commit(&mut kit, vec![KeyOp::delete(kept.id, vec![Value::Int(3)])]);
    commit(&mut kit, vec![KeyOp::delete(indexed.id, vec![Value::Int(4)])]);
    restart_2(&mut kit);

    for t in [&kept, &indexed, &uniq] {
        assert_replicas_agree(&mut kit, t);
    }
    assert_eq!(read(&mut kit, 2, &kept, 3), None);
    assert_eq!(read(&mut kit, 2, &indexed, 4), None);
    assert_eq!(read(&mut kit, 2, &uniq, 8), Some(7));
    assert_eq!(checksums(&mut kit, 2, &dropped), vec![(0, 0); 2], "the dropped table's rows stayed");
    // `kept` was the only table kept: the index made `indexed` another
    // version, `uniq` has a unique index, `dropped` is gone.
    assert_eq!(counter(&mut kit, 2, block::LQH, "lqh: restored tables kept at a node restart"), 1);
    assert_eq!(counter(&mut kit, 2, block::LQH, "lqh: restored tables dropped at a node restart"), 3);
    assert_eq!(counter(&mut kit, 1, block::DIH, "dih: partitions copied as a delta"), 2);
    assert_eq!(counter(&mut kit, 1, block::DIH, "dih: partitions copied in full"), 4);
    assert_eq!(counter(&mut kit, 1, block::LQH, "lqh: keys copied out"), 59);
    assert_eq!(counter(&mut kit, 1, block::LQH, "lqh: rows copied out"), 59 + 59);
    assert_eq!(counter(&mut kit, 2, block::LQH, "lqh: rows deleted by a resync"), 1);
}

#[test]
fn writes_during_the_copy_reach_the_restarting_node() {
    const N: i64 = 2000;
    for seed in 0..3u64 {
        let mut rng = Rng::new(400 + seed);
        let mut kit = start(400 + seed);
        let t = create_table(&mut kit, 1, "t", 4);
        load(&mut kit, &t, 0..N);
        let mut model: BTreeMap<i64, i64> = (0..N).map(|i| (i, i)).collect();
        settle_and_kill_2(&mut kit);
        // Down: deletes of 0..10, updates of 10..20.
        commit(&mut kit, (0..10).map(|i| KeyOp::delete(t.id, vec![Value::Int(i)])).collect());
        commit(
            &mut kit,
            (10..20).map(|i| KeyOp::write(t.id, vec![Value::Int(i)], vec![(1, Value::Int(-i))])).collect(),
        );
        for i in 0..20 {
            if i < 10 {
                model.remove(&i);
            } else {
                model.insert(i, -i);
            }
        }
        kit.boot(2);
        // While node 2 restores, joins and copies: deletes, updates and
        // inserts in flight all the time, each of another key (so that the
        // outcome does not depend on the order of commits), including rows
        // deleted or updated while it was down.
        let mut keys: Vec<i64> = (0..N).collect();
        rng.shuffle(&mut keys);
        let mut pending: BTreeMap<u64, (i64, Option<i64>)> = BTreeMap::new();
        let mut steps = 0usize;
        while !kit.started(2) && steps < keys.len() {
            let k = keys[steps];
            let (op, after) = match steps % 3 {
                // A delete of a missing row fails alone; the rest commits.
                0 => (KeyOp { abort_on_error: false, ..KeyOp::delete(t.id, vec![Value::Int(k)]) }, (k, None)),
                1 => (KeyOp::write(t.id, vec![Value::Int(k)], vec![(1, Value::Int(7000 + k))]), (k, Some(7000 + k))),
                _ => {
                    let k = N + steps as i64;
                    (KeyOp::write(t.id, vec![Value::Int(k)], vec![(1, Value::Int(k))]), (k, Some(k)))
                }
            };
            let h = kit.handle();
            let req = TcKeyReq { txn: h, exec: ExecType::Commit, ops: vec![op] };
            kit.send_from_api(API, BlockRef::new(1, block::TC, 0), Signal::TcKeyReq(Box::new(req)));
            pending.insert(h, after);
            kit.advance(rng.range(0, 100_000));
            steps += 1;
        }
        kit.wait_until_started(2);
        kit.run();
        for a in kit.take_inbox(API) {
            match a {
                Signal::TcKeyConf(c) if c.outcome == TxnOutcome::Committed => {
                    match pending.remove(&c.txn).expect("an answer to a request") {
                        (k, None) => model.remove(&k),
                        (k, Some(v)) => model.insert(k, v),
                    };
                }
                Signal::TcKeyRef(r) if r.error.code.is_temporary() => {
                    pending.remove(&r.txn);
                }
                other => panic!("seed {seed}: write answered {other:?}"),
            }
        }
        assert!(pending.is_empty(), "seed {seed}: {} writes unanswered", pending.len());
        assert!(steps > 50, "seed {seed}: only {steps} writes while node 2 restarted");
        assert_replicas_agree(&mut kit, &t);
        let rows: u64 = checksums(&mut kit, 2, &t).iter().map(|c| c.0).sum();
        assert_eq!(rows, model.len() as u64, "seed {seed}");
        for k in keys.iter().take(steps.min(90)).chain(&[0, 5, 10, 15]) {
            assert_eq!(read(&mut kit, 2, &t, *k), model.get(k).copied(), "seed {seed}: row {k}");
        }
        assert_eq!(counter(&mut kit, 1, block::DIH, "dih: partitions copied as a delta"), 4, "seed {seed}");
        assert!(counter(&mut kit, 1, block::LQH, "lqh: keys copied out") > N as u64 / 2, "seed {seed}");
        // Writes reached node 2 through the chain while it was starting.
        assert!(counter(&mut kit, 2, block::LQH, "lqh: replica requests") > 20, "seed {seed}");
    }
}

/// A CREATE INDEX during a node restart: the restarting node's LQH refuses
/// it while the table is being copied to it (it would index rows that may
/// be gone), after the live node's LQH made it. DICT undoes it there: the
/// table stays at the dictionary's version on both nodes (writes planned
/// against it commit), and the index made after the restart works.
#[test]
fn an_index_refused_by_a_restarting_node_is_undone_on_the_live_one() {
    let mut kit = start(57);
    let t = create_table(&mut kit, 1, "t", 4);
    // Enough rows that the copy (which reads every row's key on node 1)
    // is still under way when the CREATE INDEX arrives: with 3,000 it
    // could end first, depending on the simulator's timing.
    load(&mut kit, &t, 0..12000);
    settle_and_kill_2(&mut kit);
    load(&mut kit, &t, 12000..12010);
    kit.boot(2);
    // Node 2 restored the table and keeps it: its rows are being brought
    // up to date from node 1.
    kit.wait_for("node 2 to keep its restored table", |k| {
        k.is_alive(2) && k.membership().is_some_and(|m| m.contains(2))
    });
    let mut tries = 0;
    while counter(&mut kit, 2, block::LQH, "lqh: restored tables kept at a node restart") == 0 {
        assert!(tries < 2000, "node 2 never kept its table");
        kit.advance(100_000);
        tries += 1;
    }
    let index = || DictOp::CreateIndex {
        table: "t".into(),
        index: norr_txn::testkit::index_def("iv", &[1], false, IndexKind::Ordered),
    };
    let req = DictReq { req_id: 12, op: index() };
    match kit.ask(BlockRef::new(1, block::DICT, 0), Signal::DictReq(Box::new(req))) {
        Some(Signal::DictRef(r)) => assert_eq!(r.error.code, ErrorCode::Overloaded, "{:?}", r.error),
        other => panic!("the index during the copy: {other:?}"),
    }
    let undone = kit.cluster().block_counters(1, block::DICT, 0);
    assert!(undone.iter().any(|(k, v)| k == "dict: refused changes undone" && *v == 1), "{undone:?}");
    let now = match dict(&mut kit, DictOp::GetTable { name: "t".into() }) {
        DictResult::Table(d) => d,
        other => panic!("{other:?}"),
    };
    assert_eq!(now.version, t.version, "the refused index left the version as it was");
    // Node 1's LQH is at that version again (it made the index first).
    let versioned = |k: i64, v: i64| KeyOp {
        table_version: t.version,
        ..KeyOp::write(t.id, vec![Value::Int(k)], vec![(1, Value::Int(v))])
    };
    commit(&mut kit, (0..8).map(|k| versioned(k, -k)).collect());
    kit.wait_until_started(2);
    kit.run();
    let made = match dict(&mut kit, index()) {
        DictResult::Table(d) => d,
        other => panic!("the index after the restart: {other:?}"),
    };
    assert_eq!(made.version, t.version + 1);
    commit(
        &mut kit,
        (8..16)
            .map(|k| KeyOp {
                table_version: made.version,
                ..KeyOp::write(t.id, vec![Value::Int(k)], vec![(1, Value::Int(-k))])
            })
            .collect(),
    );
    assert_replicas_agree(&mut kit, &t);
    assert_eq!(read(&mut kit, 2, &t, 5), Some(-5));
}

/// A TRUNCATE that node 2's LQH refuses (no REDO room for its reset record;
/// a fault point stands in for a broken log or a spent reserve) after node
/// 1's LQH emptied the table cannot be undone there. Node 2 leaves and comes
/// back as a node restart that copies the table, and the client hears that
/// the TRUNCATE is done: before, it heard an error while node 1's rows were
/// gone and node 2's stayed (the replicas differed).
#[test]
fn a_truncate_one_node_refuses_after_the_other_made_it_sends_that_node_away() {
    let mut crash = CrashPoints::off();
    crash.arm(points::LQH_TRUNCATE_NO_REDO_ROOM, 0).expect("a fault point");
    let mut kit = start_armed(63, crash);
    let t = create_table(&mut kit, 1, "t", 4);
    load(&mut kit, &t, 0..500);
    match dict(&mut kit, DictOp::TruncateTable { name: "t".into() }) {
        DictResult::Done | DictResult::Table(_) => {}
        other => panic!("TRUNCATE answered {other:?}"),
    }
    let told = kit.cluster().block_counters(1, block::DICT, 0);
    assert!(
        told.iter().any(|(k, v)| k == "dict: nodes told to leave, a change made elsewhere refused" && *v == 1),
        "{told:?}"
    );
    kit.wait_for("node 2 to leave", |k| k.membership().is_some_and(|m| !m.contains(2)));
    let left = kit.shutdowns(2);
    assert!(
        left.iter().any(|(r, restart)| *restart
            && matches!(r, norr_signals::cluster::ShutdownReason::Fatal(why) if why.contains("refused a schema change"))),
        "{left:?}"
    );
    kit.wait_until_started(2);
    kit.run();
    assert_replicas_agree(&mut kit, &t);
    let rows: u64 = checksums(&mut kit, 2, &t).iter().map(|c| c.0).sum();
    assert_eq!(rows, 0, "node 2 kept rows of the truncated table");
    load(&mut kit, &t, 0..20);
    assert_replicas_agree(&mut kit, &t);
    assert_eq!(read(&mut kit, 2, &t, 7), Some(7));
}
