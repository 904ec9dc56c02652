//! Replication, failure handling, take-over and node restart across data
//! nodes, with the deterministic multi-node kit (membership by the real
//! QMGR: failures are noticed through broken connections or missed
//! heartbeats).

mod common;

use common::*;
use norr_kernel::{BlockRef, NodeId};
use norr_node::testkit::ClusterKit;
use norr_signals::{
    block, DictConf, DictOp, DictReq, DictResult, ExecType, KeyOp, Signal, TcKeyReq, TxnOutcome, Value,
};

#[test]
fn every_write_reaches_every_replica() {
    let mut kit = ClusterKit::start(vec![vec![1, 2]], knobs(), 11);
    // DDL through the non-master node is passed on to the master.
    let t = create_table(&mut kit, 2, "t", 4);
    for k in 0..100 {
        put(&mut kit, 1 + (k % 2) as NodeId, &t, k, k * 10);
    }
    let a = checksums(&mut kit, 1, &t);
    let b = checksums(&mut kit, 2, &t);
    assert_eq!(a, b, "replicas differ");
    assert_eq!(a.iter().map(|x| x.0).sum::<u64>(), 100);
    // Every partition's primary holds it, and so does its backup: both
    // nodes are primary for half the partitions (balanced).
    for k in [0, 17, 99] {
        assert_eq!(read(&mut kit, 2, &t, k), Some(k * 10));
        assert_eq!(read(&mut kit, 1, &t, k), Some(k * 10));
    }
    // Commits carry the GCI of the cluster's global checkpoints (the
    // master's first round moved every TC past 1), and it advances.
    let g1 = put(&mut kit, 1, &t, 5, 1).gci;
    let g2 = put(&mut kit, 2, &t, 6, 1).gci;
    assert!(g1 >= 2 && g2 >= g1, "{g1} {g2}");
    kit.advance(5 * kit.knobs.gcp_interval_ms * 1_000_000);
    assert!(put(&mut kit, 1, &t, 5, 2).gci > g2);
}

#[test]
fn writes_go_on_when_a_node_fails() {
    let mut kit = ClusterKit::start(vec![vec![1, 2], vec![3, 4]], knobs(), 5);
    let t = create_table(&mut kit, 1, "t", 8);
    for k in 0..200 {
        put(&mut kit, 1 + (k % 4) as NodeId, &t, k, k);
    }
    kit.fail_nodes(&[2]);
    for k in 0..200 {
        assert_eq!(read(&mut kit, 1, &t, k), Some(k), "row {k} after node 2 failed");
        put(&mut kit, [1, 3, 4][(k % 3) as usize], &t, k, k + 1000);
    }
    // Nodes 3 and 4 hold the same; node 1 holds what node 2 held.
    assert_eq!(checksums(&mut kit, 3, &t), checksums(&mut kit, 4, &t));
    let total: u64 = [1, 3].iter().map(|n| checksums(&mut kit, *n, &t).iter().map(|x| x.0).sum::<u64>()).sum();
    assert_eq!(total, 200, "node 1 and node 3 together hold every row once (each partition in one node group)");
}

#[test]
fn a_committed_transaction_of_a_failed_coordinator_is_finished_by_the_takeover() {
    let mut kit = ClusterKit::start(vec![vec![1, 2]], knobs(), 3);
    let t = create_table(&mut kit, 1, "t", 4);
    put(&mut kit, 1, &t, 7, 70);
    // Prepared on both replicas, then nothing from node 1 reaches node 2
    // any more: the commit's confirmation to TC on node 2 (or node 1's
    // forward of the commit) is lost; then node 2 dies.
    let h = kit.handle();
    let ops = vec![KeyOp::write(t.id, vec![Value::Int(7)], vec![(1, Value::Int(71))])];
    match txn(&mut kit, 2, h, ops, ExecType::NoCommit) {
        Signal::TcKeyConf(c) => assert_eq!(c.outcome, TxnOutcome::Open),
        other => panic!("{other:?}"),
    }
    kit.set_cut(1, 2, true);
    let req = TcKeyReq { txn: h, exec: ExecType::Commit, ops: vec![] };
    kit.send_from_api(API, BlockRef::new(2, block::TC, 0), Signal::TcKeyReq(Box::new(req)));
    kit.run();
    assert!(kit.take_inbox(API).is_empty(), "the coordinator cannot have answered");
    kit.fail_nodes(&[2]);
    let got = kit.take_inbox(API);
    assert_eq!(got.len(), 1, "{got:?}");
    match &got[0] {
        Signal::TcKeyFailConf(c) => {
            assert_eq!(c.txn, h);
            assert_eq!(c.outcome, TxnOutcome::Committed, "a replica committed it");
        }
        other => panic!("expected TC_KEY_FAILCONF, got {other:?}"),
    }
    assert_eq!(read(&mut kit, 1, &t, 7), Some(71));
    // The take-over told QMGR the failed node may join again.
    assert_eq!(kit.qmgr_counter(1, "qmgr: failed node taken over"), 1, "no NF_COMPLETEREP for node 2");
}

#[test]
fn an_uncommitted_transaction_of_a_failed_coordinator_is_rolled_back() {
    let mut kit = ClusterKit::start(vec![vec![1, 2]], knobs(), 4);
    let t = create_table(&mut kit, 1, "t", 4);
    put(&mut kit, 1, &t, 9, 90);
    // The prepared transaction stays open (NoCommit); its coordinator dies.
    let h = kit.handle();
    let ops = vec![KeyOp::write(t.id, vec![Value::Int(9)], vec![(1, Value::Int(91))])];
    match txn(&mut kit, 2, h, ops, ExecType::NoCommit) {
        Signal::TcKeyConf(c) => assert_eq!(c.outcome, TxnOutcome::Open),
        other => panic!("{other:?}"),
    }
    kit.fail_nodes(&[2]);
    let got = kit.take_inbox(API);
    match &got[..] {
        [Signal::TcKeyFailConf(c)] => assert_eq!(c.outcome, TxnOutcome::RolledBack),
        other => panic!("expected one TC_KEY_FAILCONF, got {other:?}"),
    }
    // Its locks are gone: the row can be written and reads the old value.
    assert_eq!(read(&mut kit, 1, &t, 9), Some(90));
    put(&mut kit, 1, &t, 9, 92);
    assert_eq!(read(&mut kit, 1, &t, 9), Some(92));
}

#[test]
fn a_restarted_node_copies_its_partitions_and_takes_writes_meanwhile() {
    let mut kit = ClusterKit::start(vec![vec![1, 2]], knobs(), 9);
    let t = create_table(&mut kit, 1, "t", 4);
    for k in 0..300 {
        put(&mut kit, 1 + (k % 2) as NodeId, &t, k, k);
    }
    kit.fail_nodes(&[2]);
    for k in 0..300 {
        put(&mut kit, 1, &t, k, k * 2);
    }
    kit.boot(2);
    // More writes while it joins, syncs the schema and copies.
    let mut during_restart = 0;
    for k in (0..300).step_by(7) {
        put(&mut kit, 1, &t, k, k * 3);
        if kit.membership_of(2).is_some() && !kit.started(2) {
            during_restart += 1;
        }
    }
    assert!(during_restart > 0, "no write ran while node 2 was joined but not yet started");
    kit.wait_until_started(2);
    kit.advance(2_000_000_000);
    assert_eq!(checksums(&mut kit, 1, &t), checksums(&mut kit, 2, &t), "the restarted replica differs");
    for k in [0, 7, 8, 299] {
        let want = if k % 7 == 0 { k * 3 } else { k * 2 };
        assert_eq!(read(&mut kit, 2, &t, k), Some(want));
    }
    // Node 2 is primary for its share again.
    let put_via_2 = put(&mut kit, 2, &t, 1, 5);
    assert_eq!(put_via_2.outcome, TxnOutcome::Committed);
    assert_eq!(checksums(&mut kit, 1, &t), checksums(&mut kit, 2, &t));
}

#[test]
fn ddl_reaches_every_node_and_a_joining_node_gets_the_schema() {
    let mut kit = ClusterKit::start(vec![vec![1, 2]], knobs(), 1);
    let t = create_table(&mut kit, 2, "a", 2);
    kit.fail_nodes(&[2]);
    let u = create_table(&mut kit, 1, "b", 2);
    kit.restart(2);
    kit.advance(1_000_000_000);
    put(&mut kit, 2, &t, 1, 1);
    put(&mut kit, 2, &u, 1, 1);
    assert_eq!(checksums(&mut kit, 1, &u), checksums(&mut kit, 2, &u));
    let req = DictReq { req_id: 3, op: DictOp::ListTables };
    match kit.ask(BlockRef::new(2, block::DICT, 0), Signal::DictReq(Box::new(req))) {
        Some(Signal::DictConf(c)) => {
            let DictConf { result: DictResult::Tables(ts), .. } = *c else { panic!("tables") };
            assert_eq!(ts.len(), 2);
        }
        other => panic!("{other:?}"),
    }
}

/// A restarted node becomes `Alive` at itself before any other member
/// (simulator seed cluster:495): a TC that learned it first routed a read
/// there, and the node, not knowing yet, answered WrongReplica (4277).
#[test]
fn a_restarted_node_knows_it_is_alive_before_any_other_member_does() {
    let mut kit = ClusterKit::start(vec![vec![1, 2], vec![3, 4]], knobs(), 17);
    let t = create_table(&mut kit, 1, "t", 8);
    for k in 0..100 {
        put(&mut kit, 1, &t, k, k);
    }
    kit.fail_nodes(&[2]);
    let alive_at = |kit: &ClusterKit, n: NodeId| kit.status(n).is_some_and(|s| s.alive_nodes.contains(&2));
    kit.wait_for("node 2 dead at every other node", |k| [1, 3, 4].iter().all(|n| !alive_at(k, *n)));
    kit.boot(2);
    let (mut steps, mut seen_elsewhere) = (0u64, false);
    while !(kit.started(2) && [1, 3, 4].iter().all(|n| alive_at(&kit, *n))) {
        // 10 µs steps: a network hop takes 20-500 µs in the kit.
        kit.advance(10_000);
        steps += 1;
        assert!(steps < 3_000_000, "node 2 did not restart within 30 s");
        let elsewhere: Vec<NodeId> = [1, 3, 4].into_iter().filter(|n| alive_at(&kit, *n)).collect();
        if !elsewhere.is_empty() {
            seen_elsewhere = true;
            assert!(alive_at(&kit, 2), "nodes {elsewhere:?} hold node 2 alive before node 2 does");
        }
    }
    assert!(seen_elsewhere);
    assert_eq!(read(&mut kit, 4, &t, 7), Some(7));
}

/// A schema change that would move a table's partitions to other node
/// groups (placement depends on having a unique index, and on
/// FULLY_REPLICATED) is refused on a cluster with several node groups: the
/// rows would stay on nodes that no longer serve them and vanish from
/// reads. With one node group every placement is the same nodes: allowed.
#[test]
fn a_unique_index_that_would_move_rows_between_node_groups_is_refused() {
    use norr_signals::schema::{IndexDef, IndexKind};
    let unique = IndexDef { id: 0, name: "u".into(), columns: vec![1], unique: true, kind: IndexKind::UniqueHash };
    let create_index = |kit: &mut ClusterKit| {
        let op = DictOp::CreateIndex { table: "t".into(), index: unique.clone() };
        let req = DictReq { req_id: 9, op };
        kit.ask(BlockRef::new(1, block::DICT, 0), Signal::DictReq(Box::new(req)))
    };
    let mut kit = ClusterKit::start(vec![vec![1, 2], vec![3, 4]], knobs(), 21);
    let t = create_table(&mut kit, 1, "t", 8);
    for k in 0..40 {
        put(&mut kit, 1, &t, k, k);
    }
    match create_index(&mut kit) {
        Some(Signal::DictRef(r)) => {
            assert_eq!(r.error.code, norr_signals::ErrorCode::BadSchema);
            assert!(r.error.message.contains("between node groups"), "{}", r.error.message);
        }
        other => panic!("expected the index refused: {other:?}"),
    }
    for k in 0..40 {
        assert_eq!(read(&mut kit, 3, &t, k), Some(k), "row {k} after the refused index");
    }

    let mut one = ClusterKit::start(vec![vec![1, 2]], knobs(), 22);
    let t = create_table(&mut one, 1, "t", 8);
    for k in 0..40 {
        put(&mut one, 1, &t, k, k);
    }
    match create_index(&mut one) {
        Some(Signal::DictConf(_)) => {}
        other => panic!("expected the index created with one node group: {other:?}"),
    }
    for k in 0..40 {
        assert_eq!(read(&mut one, 2, &t, k), Some(k), "row {k} after the index");
    }
}
