//! Replica chains while a restarted node joins the write path (simulator
//! seed cluster:933). DIH makes the node `Starting` at every member one by
//! one, so an LQH that already knows builds a chain through it while a TC or
//! another replica still holds a distribution that calls it dead. Every
//! block must still run the chain's phases through that node (it holds the
//! write and its row lock): only nodes QMGR reported down are skipped.
//!
//! One block is driven at a time on its own scheduler; every other node is
//! played by the test (its signals leave through `take_remote`).

use norr_kernel::{BlockRef, Envelope, NodeId, Priority, Scheduler};
use norr_knobs::Knobs;
use norr_signals::cluster::{ClusterSignal, Membership, StartKind};
use norr_signals::dist::{Chain, Dist, ReplicaState};
use norr_signals::internal::{InternalSignal, LqhOpResult, SchemaChange, TxnId};
use norr_signals::ops::KeyOp;
use norr_signals::schema::TableDef;
use norr_signals::value::{ColumnType, Value};
use norr_signals::{block, ExecType, Signal, TcKeyReq, TxnOutcome};
use norr_txn::route::{lqh_instance, op_partition};
use norr_txn::testkit::table_def;

const API: NodeId = 200;
/// A node that plays DIH and DICT towards the block under test.
const PEER: NodeId = 7;
const GROUPS: [[NodeId; 2]; 2] = [[1, 2], [3, 4]];

fn cluster(s: ClusterSignal) -> Signal {
    Signal::Cluster(Box::new(s))
}

fn internal(s: InternalSignal) -> Signal {
    Signal::Internal(Box::new(s))
}

/// The president is node 3: the TC under test (node 1) runs no take-over
/// (it would talk to its node's QMGR, which is not here).
fn membership(generation: u64, members: &[NodeId]) -> Membership {
    Membership { generation, members: members.to_vec(), president: 3 }
}

fn dist(version: u64, dead: &[NodeId]) -> Dist {
    let mut d = Dist::new(GROUPS.iter().map(|g| g.to_vec()).collect(), ReplicaState::Alive);
    for n in dead {
        d.states.insert(*n, ReplicaState::Dead);
    }
    d.version = version;
    d
}

struct Node {
    sched: Scheduler<Signal>,
    to: BlockRef,
}

impl Node {
    fn deliver(&mut self, from: BlockRef, signal: Signal) -> Vec<Envelope<Signal>> {
        let prio = if matches!(signal, Signal::Cluster(_)) { Priority::A } else { Priority::B };
        self.sched.deliver(Envelope { from, to: self.to, prio, signal }).expect("deliver");
        self.sched.run_until_idle(usize::MAX);
        self.sched.take_remote()
    }

    /// Node 4 failed, then joined again; this block heard both from QMGR
    /// and holds DIH's distribution of the failure (node 4 dead), not yet
    /// the one that makes node 4 `Starting`.
    fn stale_after_rejoin(&mut self, def: &TableDef) {
        let dih = BlockRef::new(PEER, block::DIH, 0);
        let started = ClusterSignal::ClusterStartedRep {
            membership: membership(1, &[1, 2, 3, 4]),
            kind: StartKind::Initial,
            joined: false,
        };
        self.deliver(dih, cluster(started));
        self.deliver(dih, cluster(ClusterSignal::DistRep { dist: Box::new(dist(1 << 20, &[])) }));
        let change = SchemaChange::CreateTable(def.clone());
        let dict = BlockRef::new(PEER, block::DICT, 0);
        self.deliver(dict, internal(InternalSignal::SchemaChangeReq { req: 1, change: Box::new(change) }));
        let fail = ClusterSignal::NodeFailRep { failed: vec![4], membership: membership(2, &[1, 2, 3]) };
        self.deliver(dih, cluster(fail));
        self.deliver(dih, cluster(ClusterSignal::DistRep { dist: Box::new(dist(2 << 20, &[4])) }));
        let joined = ClusterSignal::NodeJoinedRep { node: 4, membership: membership(3, &[1, 2, 3, 4]) };
        self.deliver(dih, cluster(joined));
    }

    /// This node restarted and joined (QMGR reported the membership), and
    /// DICT created `def`, but DIH has not given it a distribution yet.
    fn joined_without_distribution(&mut self, def: &TableDef) {
        let dih = BlockRef::new(PEER, block::DIH, 0);
        let started = ClusterSignal::ClusterStartedRep {
            membership: membership(3, &[1, 2, 3, 4]),
            kind: StartKind::Initial,
            joined: true,
        };
        self.deliver(dih, cluster(started));
        let dict = BlockRef::new(PEER, block::DICT, 0);
        let change = SchemaChange::CreateTable(def.clone());
        self.deliver(dict, internal(InternalSignal::SchemaChangeReq { req: 1, change: Box::new(change) }));
    }
}

fn table() -> TableDef {
    let mut def = table_def("t", 4, &[("v", ColumnType::BigInt { unsigned: false })]);
    def.id = 1;
    def.version = 1;
    def
}

/// A key of `def` whose partition lives in node group [3, 4] with node 3 as
/// primary (with every node alive), and its chain through the restarted node 4.
fn key_in_group_of_3(def: &TableDef) -> (i64, Chain) {
    let d = dist(1, &[]);
    for k in 0..1000 {
        let op = KeyOp::write(def.id, vec![Value::Int(k)], vec![(1, Value::Int(1))]);
        let part = op_partition(def, &op).expect("partition").expect("keyed");
        if d.primary(def, part) == Some(3) {
            let instance = lqh_instance(part, norr_txn::LQH_INSTANCES);
            let chain = Chain { instance, nodes: [3, 4].into_iter().collect() };
            return (k, chain);
        }
    }
    panic!("no key with primary 3");
}

fn tc_node() -> Node {
    block_node(1, block::TC, false)
}

fn lqh_node(node: NodeId) -> Node {
    block_node(node, block::LQH, false)
}

/// The TC or LQH (`kind`) of data node `node` on a scheduler of its own;
/// `in_cluster`: built as on a cluster data node, which serves nothing
/// before DIH's distribution (a node just (re)started, before even QMGR's
/// first news).
fn block_node(node: NodeId, kind: norr_kernel::BlockNo, in_cluster: bool) -> Node {
    let knobs = Knobs::default();
    let mut sched = Scheduler::new(node, knobs.job_buffer_bound);
    if kind == block::TC {
        let mut tc = norr_txn::tc::Tc::new(node, 0, norr_txn::LQH_INSTANCES, &knobs);
        if in_cluster {
            tc.in_cluster();
        }
        sched.add_block(block::TC, 0, Box::new(tc));
    } else {
        let mut lqh = norr_txn::lqh::Lqh::new(node, 0, norr_txn::LQH_INSTANCES, &knobs);
        if in_cluster {
            lqh.in_cluster();
        }
        sched.add_block(block::LQH, 0, Box::new(lqh));
    }
    Node { sched, to: BlockRef::new(node, kind, 0) }
}

/// `out` is TC's one answer: refused with 4278, a temporary error (the
/// node awaits DIH's distribution), and nothing ran.
fn assert_refused_until_joined(out: &[Envelope<Signal>]) {
    assert!(internals(out).is_empty(), "nothing may run: {out:?}");
    match out {
        [e] => match &e.signal {
            Signal::TcKeyRef(r) => {
                assert_eq!(r.error.code, norr_signals::ErrorCode::PartitionUnavailable);
                assert_eq!(r.error.code.class(), norr_signals::ErrorClass::Temporary);
            }
            other => panic!("expected TcKeyRef: {other:?}"),
        },
        other => panic!("expected one answer: {other:?}"),
    }
}

fn internals(out: &[Envelope<Signal>]) -> Vec<(BlockRef, InternalSignal)> {
    out.iter()
        .filter_map(|e| match &e.signal {
            Signal::Internal(s) => Some((e.to, (**s).clone())),
            _ => None,
        })
        .collect()
}

/// A TC with a stale distribution writes through node 3, whose LQH already
/// put node 4 in the chain: the write prepared at 3 and 4, so the commit
/// must start at node 4 (the chain's tail), not end at node 3.
#[test]
fn tc_commits_along_a_chain_through_a_node_its_distribution_calls_dead() {
    let def = table();
    let mut tc = tc_node();
    tc.stale_after_rejoin(&def);
    let (k, chain) = key_in_group_of_3(&def);
    let api = BlockRef::new(API, block::API, 0);
    let op = KeyOp::write(def.id, vec![Value::Int(k)], vec![(1, Value::Int(5))]);
    let out = tc.deliver(api, Signal::TcKeyReq(Box::new(TcKeyReq { txn: 1, exec: ExecType::Commit, ops: vec![op] })));
    let (txn, seq) = match &internals(&out)[..] {
        [(to, InternalSignal::LqhKeyReq { txn, ops, .. })] if to.node == 3 => (*txn, ops[0].seq),
        other => panic!("expected one LqhKeyReq to node 3: {other:?}"),
    };
    // The chain's tail (node 4) answers: it holds the write.
    let result = LqhOpResult { seq, outcome: Ok(None), chain: Some(chain.clone()) };
    let out = tc.deliver(
        BlockRef::new(4, block::LQH, chain.instance),
        internal(InternalSignal::LqhKeyConf { txn, results: vec![result] }),
    );
    match &internals(&out)[..] {
        [(to, InternalSignal::LqhCommitReq { chain: c, .. })] => {
            assert_eq!(to.node, 4, "commit starts at the chain's tail");
            assert_eq!(c, &chain);
        }
        other => panic!("expected one LqhCommitReq: {other:?}"),
    }
    let out = tc.deliver(
        BlockRef::new(3, block::LQH, chain.instance),
        internal(InternalSignal::LqhCommitConf { txn, chain: chain.clone() }),
    );
    assert!(
        out.iter().any(|e| matches!(&e.signal, Signal::TcKeyConf(c) if c.outcome == TxnOutcome::Committed)),
        "{out:?}"
    );
    let completes: Vec<_> = internals(&out)
        .into_iter()
        .filter_map(|(to, s)| match s {
            InternalSignal::LqhCompleteReq { chain, .. } => Some((to.node, chain)),
            _ => None,
        })
        .collect();
    assert_eq!(completes, vec![(3, chain)], "complete runs the whole chain from its primary");
}

/// The same TC rolls the transaction back instead: node 4 holds a prepared
/// write and its row lock, so it gets the abort too.
#[test]
fn tc_aborts_at_a_node_its_distribution_calls_dead_when_a_chain_went_through_it() {
    let def = table();
    let mut tc = tc_node();
    tc.stale_after_rejoin(&def);
    let (k, chain) = key_in_group_of_3(&def);
    let api = BlockRef::new(API, block::API, 0);
    let op = KeyOp::write(def.id, vec![Value::Int(k)], vec![(1, Value::Int(5))]);
    let out = tc.deliver(api, Signal::TcKeyReq(Box::new(TcKeyReq { txn: 1, exec: ExecType::NoCommit, ops: vec![op] })));
    let (txn, seq) = match &internals(&out)[..] {
        [(_, InternalSignal::LqhKeyReq { txn, ops, .. })] => (*txn, ops[0].seq),
        other => panic!("expected one LqhKeyReq: {other:?}"),
    };
    let result = LqhOpResult { seq, outcome: Ok(None), chain: Some(chain.clone()) };
    tc.deliver(
        BlockRef::new(4, block::LQH, chain.instance),
        internal(InternalSignal::LqhKeyConf { txn, results: vec![result] }),
    );
    let out = tc.deliver(api, Signal::TcKeyReq(Box::new(TcKeyReq { txn: 1, exec: ExecType::Rollback, ops: vec![] })));
    let mut aborted: Vec<NodeId> = internals(&out)
        .into_iter()
        .filter_map(|(to, s)| matches!(s, InternalSignal::LqhAbortReq { txn: t } if t == txn).then_some(to.node))
        .collect();
    aborted.sort_unstable();
    assert_eq!(aborted, vec![3, 4]);
}

/// An LQH whose distribution calls node 4 dead passes the complete phase on
/// to it anyway (node 4 holds the backup's row lock until complete).
#[test]
fn lqh_passes_complete_on_to_a_node_its_distribution_calls_dead() {
    let def = table();
    let mut lqh = lqh_node(3);
    lqh.stale_after_rejoin(&def);
    let (_, chain) = key_in_group_of_3(&def);
    let tc = BlockRef::new(1, block::TC, 0);
    let txn: TxnId = (1 << 48) | 1;
    let out = lqh.deliver(tc, internal(InternalSignal::LqhCompleteReq { txn, chain: chain.clone(), tc }));
    match &internals(&out)[..] {
        [(to, InternalSignal::LqhCompleteReq { .. })] => assert_eq!(*to, BlockRef::new(4, block::LQH, chain.instance)),
        other => panic!("expected the complete passed on to node 4: {other:?}"),
    }
    // A node QMGR reported failed is skipped: the phase ends here.
    let fail = ClusterSignal::NodeFailRep { failed: vec![4], membership: membership(4, &[1, 2, 3]) };
    lqh.deliver(BlockRef::new(PEER, block::DIH, 0), cluster(fail));
    let out = lqh.deliver(tc, internal(InternalSignal::LqhCompleteReq { txn, chain: chain.clone(), tc }));
    match &internals(&out)[..] {
        [(to, InternalSignal::LqhCompleteConf { .. })] => assert_eq!(*to, tc),
        other => panic!("expected LqhCompleteConf to TC: {other:?}"),
    }
}

/// The restarted node's own LQH, before its DIH handed it any distribution
/// (it knows only itself), passes a commit back to the primary instead of
/// confirming the chain to TC on its own.
#[test]
fn restarted_lqh_passes_commit_back_to_the_primary_before_it_has_a_distribution() {
    let def = table();
    let mut lqh = lqh_node(4);
    lqh.joined_without_distribution(&def);
    let (_, chain) = key_in_group_of_3(&def);
    let tc = BlockRef::new(1, block::TC, 0);
    let txn: TxnId = (1 << 48) | 1;
    let out = lqh.deliver(tc, internal(InternalSignal::LqhCommitReq { txn, gci: 2, chain: chain.clone(), tc }));
    match &internals(&out)[..] {
        [(to, InternalSignal::LqhCommitReq { .. })] => assert_eq!(*to, BlockRef::new(3, block::LQH, chain.instance)),
        other => panic!("expected the commit passed back to node 3: {other:?}"),
    }
}

/// A restarted node's TC, joined (QMGR reported the membership) but not yet
/// given a distribution by DIH, refuses transactions with a temporary error
/// instead of running them on the node's empty replicas as if it held every
/// partition alone (the chaos test saw updates of existing rows fail with
/// 626); once DIH's distribution came, it coordinates again.
#[test]
fn restarted_tc_refuses_transactions_until_dih_gave_it_a_distribution() {
    let def = table();
    let mut tc = tc_node();
    tc.joined_without_distribution(&def);
    let (k, _) = key_in_group_of_3(&def);
    let api = BlockRef::new(API, block::API, 0);
    let write = |v| KeyOp::write(def.id, vec![Value::Int(k)], vec![(1, Value::Int(v))]);
    let req = |h, v| Signal::TcKeyReq(Box::new(TcKeyReq { txn: h, exec: ExecType::Commit, ops: vec![write(v)] }));
    let out = tc.deliver(api, req(1, 5));
    assert_refused_until_joined(&out);
    tc.deliver(
        BlockRef::new(PEER, block::DIH, 0),
        cluster(ClusterSignal::DistRep { dist: Box::new(dist(3 << 20, &[1])) }),
    );
    let out = tc.deliver(api, req(2, 6));
    match &internals(&out)[..] {
        [(to, InternalSignal::LqhKeyReq { .. })] => assert_eq!(to.node, 3, "routed by DIH's distribution"),
        other => panic!("expected one LqhKeyReq to node 3: {other:?}"),
    }
}

/// A restarted data node listens for clients as soon as its files are read,
/// before it even connected to its peers. A client with the distribution of
/// the node's previous life sends it a transaction then: its TC must refuse
/// it (temporary), and its LQH must refuse a write from another node's stale
/// TC, instead of committing alone on the restored replicas (the chaos test
/// lost acknowledged transfers so: they were overwritten by the copy from a
/// live replica).
#[test]
fn a_restarted_cluster_node_serves_nothing_before_it_joined() {
    let def = table();
    let dict = BlockRef::new(PEER, block::DICT, 0);
    let create = || {
        internal(InternalSignal::SchemaChangeReq { req: 1, change: Box::new(SchemaChange::CreateTable(def.clone())) })
    };
    let (k, _) = key_in_group_of_3(&def);
    let write = KeyOp::write(def.id, vec![Value::Int(k)], vec![(1, Value::Int(5))]);

    let mut tc = block_node(3, block::TC, true);
    tc.deliver(dict, create());
    let api = BlockRef::new(API, block::API, 0);
    let req = Signal::TcKeyReq(Box::new(TcKeyReq { txn: 1, exec: ExecType::Commit, ops: vec![write.clone()] }));
    let out = tc.deliver(api, req);
    assert_refused_until_joined(&out);

    let mut lqh = block_node(3, block::LQH, true);
    lqh.deliver(dict, create());
    let part = op_partition(&def, &write).expect("partition").expect("keyed");
    let stale_tc = BlockRef::new(1, block::TC, 0);
    let op = norr_signals::internal::LqhOp { seq: 0, part: Some(part), op: write, savepoint: 0 };
    let req = InternalSignal::LqhKeyReq { txn: (1 << 48) | 1, ops: vec![op], api, handle: 1, failed: vec![] };
    let out = lqh.deliver(stale_tc, internal(req));
    match &internals(&out)[..] {
        [(to, InternalSignal::LqhKeyConf { results, .. })] => {
            assert_eq!(*to, stale_tc);
            match &results[..] {
                [r] => match &r.outcome {
                    Err(e) => assert_eq!(e.error.code, norr_signals::ErrorCode::WrongReplica),
                    Ok(row) => panic!("the write ran on the restored replica: {row:?}"),
                },
                other => panic!("expected one result: {other:?}"),
            }
        }
        other => panic!("expected one LqhKeyConf to the stale TC: {other:?}"),
    }
}

/// QMGR revokes the serve lease when it suspects a member failed
/// (`ServeLeaseRevokedRep`): the TC refuses new transactions with a
/// temporary error naming the suspects until QMGR gives a lease again (the
/// failure round decided), then coordinates as before.
#[test]
fn a_tc_whose_serve_lease_was_revoked_takes_no_transaction_until_a_new_lease() {
    let def = table();
    let mut tc = tc_node();
    tc.stale_after_rejoin(&def);
    let (k, _) = key_in_group_of_3(&def);
    let api = BlockRef::new(API, block::API, 0);
    let qmgr = BlockRef::new(1, block::QMGR, 0);
    let write = |v| KeyOp::write(def.id, vec![Value::Int(k)], vec![(1, Value::Int(v))]);
    let req = |h, v| Signal::TcKeyReq(Box::new(TcKeyReq { txn: h, exec: ExecType::Commit, ops: vec![write(v)] }));
    let lease = ClusterSignal::ServeLeaseRep { until_ns: u64::MAX / 2 };
    tc.deliver(qmgr, cluster(lease.clone()));
    let out = tc.deliver(api, req(1, 5));
    assert!(
        internals(&out).iter().any(|(_, s)| matches!(s, InternalSignal::LqhKeyReq { .. })),
        "served under a lease: {out:?}"
    );
    tc.deliver(qmgr, cluster(ClusterSignal::ServeLeaseRevokedRep { suspected: vec![4] }));
    let out = tc.deliver(api, req(2, 6));
    assert_refused_until_joined(&out);
    let Signal::TcKeyRef(r) = &out[0].signal else { unreachable!() };
    assert!(r.error.message.contains("suspects data node(s) [4]"), "{}", r.error.message);
    tc.deliver(qmgr, cluster(lease));
    let out = tc.deliver(api, req(3, 7));
    assert!(
        internals(&out).iter().any(|(_, s)| matches!(s, InternalSignal::LqhKeyReq { .. })),
        "served again under the new lease: {out:?}"
    );
}
