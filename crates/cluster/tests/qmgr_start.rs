//! QMGR: forming a cluster at the start (whole and partial), and joins.

use norr_cluster::qmgr_testkit::{ArbiterMode, Happening, QmgrCluster};
use norr_knobs::Knobs;
use norr_signals::cluster::{ClusterSignal, Membership};

fn started(c: &QmgrCluster, node: u16) -> Option<(Membership, bool)> {
    // The latest incarnation's.
    c.reports(node).into_iter().rev().find_map(|(_, s)| match s {
        ClusterSignal::ClusterStartedRep { membership, joined, .. } => Some((membership, joined)),
        _ => None,
    })
}

fn m(generation: u64, members: &[u16], president: u16) -> Membership {
    Membership { generation, members: members.to_vec(), president }
}

/// Every node of `nodes` formed generation 1 of exactly `nodes`, the
/// lowest as president, and heard nothing else.
fn assert_formed(c: &QmgrCluster, nodes: &[u16]) {
    for n in nodes {
        let (got, joined) =
            started(c, *n).unwrap_or_else(|| panic!("seed {}: node {n} did not start\n{}", c.seed, c.log_tail(60)));
        assert_eq!(got, m(1, nodes, nodes[0]), "node {n}");
        assert!(!joined, "node {n} formed the cluster, it did not join it");
        assert_eq!(c.reports(*n).len(), 1, "node {n}: {:?}", c.reports(*n));
    }
}

#[test]
fn initial_start_of_one_node() {
    let mut c = QmgrCluster::new(1, vec![vec![1]], Knobs::default());
    c.start_all();
    c.run_for_ms(100);
    assert_formed(&c, &[1]);
    assert!(c.arbit_requests().is_empty());
}

#[test]
fn initial_start_of_two_nodes_in_one_group() {
    let mut c = QmgrCluster::new(2, vec![vec![1, 2]], Knobs::default());
    c.start_all();
    c.run_for_ms(100);
    assert_formed(&c, &[1, 2]);
    assert!(c.arbit_requests().is_empty(), "every node present: no arbitration");
}

#[test]
fn initial_start_of_four_nodes_in_two_groups() {
    for seed in 0..20 {
        let mut c = QmgrCluster::new(seed, vec![vec![1, 2], vec![3, 4]], Knobs::default());
        c.start_all();
        c.run_for_ms(200);
        assert_formed(&c, &[1, 2, 3, 4]);
        assert!(c.arbit_requests().is_empty());
        // Heartbeats keep it so.
        c.run_for_ms(3_000);
        assert_eq!(c.settled().unwrap(), m(1, &[1, 2, 3, 4], 1));
        assert!(c.counter(3, "qmgr: heartbeats sent") >= 3 * 14);
    }
}

#[test]
fn nodes_starting_at_different_times_wait_for_each_other() {
    let mut c = QmgrCluster::new(3, vec![vec![1, 2], vec![3, 4]], Knobs::default());
    c.start(3);
    c.start(4);
    c.run_for_ms(1_000);
    assert!(started(&c, 3).is_none(), "no group [1, 2] node: cannot start");
    c.start(2);
    c.run_for_ms(1_000);
    assert!(started(&c, 2).is_none(), "not all nodes, partial time-out not over");
    c.start(1);
    c.run_for_ms(200);
    assert_formed(&c, &[1, 2, 3, 4]);
}

#[test]
fn partial_start_with_a_whole_group_needs_no_arbitration_and_the_late_node_joins() {
    let knobs = Knobs { start_partial_timeout_ms: 2_000, ..Knobs::default() };
    let mut c = QmgrCluster::new(4, vec![vec![1, 2], vec![3, 4]], knobs);
    for n in [1, 2, 3] {
        c.start(n);
    }
    c.run_for_ms(1_900);
    assert!(started(&c, 1).is_none(), "before the partial start time-out");
    c.run_for_ms(300);
    assert_formed(&c, &[1, 2, 3]);
    assert!(c.arbit_requests().is_empty(), "group [1, 2] whole: no arbitration");

    let t = c.now_ns;
    c.start(4);
    c.run_for_ms(200);
    assert_eq!(started(&c, 4), Some((m(2, &[1, 2, 3, 4], 1), true)));
    for n in [1, 2, 3] {
        assert_eq!(c.join_reports_since(n, t).iter().map(|(_, j)| *j).collect::<Vec<_>>(), vec![4]);
    }
    assert_eq!(c.settled().unwrap(), m(2, &[1, 2, 3, 4], 1));
}

#[test]
fn partial_start_with_one_node_per_group_asks_the_arbitrator() {
    let knobs = Knobs { start_partial_timeout_ms: 1_000, ..Knobs::default() };
    let mut c = QmgrCluster::new(5, vec![vec![1, 2], vec![3, 4]], knobs);
    c.start(1);
    c.start(3);
    c.run_for_ms(1_500);
    assert_formed(&c, &[1, 3]);
    let reqs = c.arbit_requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(
        reqs[0].what,
        Happening::ArbitReq { generation: 0, survivors: vec![1, 3], failed: vec![2, 4] },
        "the start asks with generation 0"
    );
}

#[test]
fn partial_start_without_a_node_of_every_group_never_starts() {
    let knobs = Knobs { start_partial_timeout_ms: 500, ..Knobs::default() };
    let mut c = QmgrCluster::new(6, vec![vec![1, 2], vec![3, 4]], knobs);
    c.start(1);
    c.start(2);
    c.run_for_ms(5_000);
    assert!(started(&c, 1).is_none() && started(&c, 2).is_none());
    assert!(c.counter(1, "qmgr: partial start waits for a node of every node group") > 0);
    c.start(3);
    c.run_for_ms(300);
    assert_formed(&c, &[1, 2, 3]);
}

#[test]
fn a_split_at_the_start_lets_exactly_one_side_form_the_cluster() {
    for seed in 0..20 {
        let knobs = Knobs { start_partial_timeout_ms: 1_000, ..Knobs::default() };
        let mut c = QmgrCluster::new(seed, vec![vec![1, 2], vec![3, 4]], knobs);
        c.split(&[1, 3], &[2, 4]);
        c.start_all();
        c.run_for_ms(3_000);
        let a = started(&c, 1).is_some() && started(&c, 3).is_some();
        let b = started(&c, 2).is_some() && started(&c, 4).is_some();
        assert!(a ^ b, "seed {seed}: exactly one side forms ({a}, {b})");
        let (winners, losers) = if a { ([1, 3], [2, 4]) } else { ([2, 4], [1, 3]) };
        assert_formed(&c, &winners);
        for n in losers {
            assert!(started(&c, n).is_none(), "seed {seed}: node {n}");
        }
        // Healed: the other side joins the running cluster.
        c.heal_split();
        c.run_for_ms(2_000);
        let v = c.settled().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(v.members, vec![1, 2, 3, 4]);
        assert_eq!(v.generation, 3, "seed {seed}: two joins");
        assert_eq!(v.president, winners[0]);
        for n in losers {
            assert_eq!(started(&c, n).map(|(_, j)| j), Some(true), "seed {seed}: node {n} joined");
        }
    }
}

#[test]
fn a_split_at_the_start_without_arbitrator_starts_nothing_until_healed() {
    let knobs = Knobs { start_partial_timeout_ms: 500, ..Knobs::default() };
    let mut c = QmgrCluster::new(7, vec![vec![1, 2], vec![3, 4]], knobs);
    c.arbiter_mode = ArbiterMode::Down;
    c.split(&[1, 3], &[2, 4]);
    c.start_all();
    c.run_for_ms(5_000);
    for n in [1, 2, 3, 4] {
        assert!(started(&c, n).is_none(), "node {n}");
    }
    assert!(c.arbit_requests().len() >= 2);
    c.heal_split();
    c.run_for_ms(1_000);
    assert_formed(&c, &[1, 2, 3, 4]);
}

#[test]
fn a_join_waits_until_the_failed_nodes_transactions_are_taken_over() {
    let mut c = QmgrCluster::new(8, vec![vec![1, 2], vec![3, 4]], Knobs::default());
    c.start_all();
    c.run_for_ms(200);
    // The president's TC is slow to take over node 4's transactions.
    c.hold_nf_complete(1, true);
    c.crash(4);
    c.run_for_ms(200);
    assert_eq!(c.settled().unwrap(), m(2, &[1, 2, 3], 1));
    c.start(4);
    c.run_for_ms(3_000);
    assert!(c.membership(4).is_none(), "node 4 may not join before the take-over finished");
    assert!(c.counter(1, "qmgr: join waits for take-over of the node's transactions") > 3);
    let t = c.now_ns;
    c.release_nf_complete(1);
    c.run_for_ms(1_000);
    assert_eq!(c.settled().unwrap(), m(3, &[1, 2, 3, 4], 1));
    assert_eq!(started(&c, 4).map(|(_, j)| j), Some(true));
    assert_eq!(c.join_reports_since(2, t).len(), 1);
}

#[test]
fn a_node_restarted_at_once_after_a_crash_is_removed_then_joins() {
    // It comes back within milliseconds, while its peers may still be
    // removing its previous life.
    let mut c = QmgrCluster::new(9, vec![vec![1, 2], vec![3, 4]], Knobs::default());
    c.start_all();
    c.run_for_ms(200);
    c.hang(3);
    c.crash(3);
    c.start(3);
    c.run_for_ms(3_000);
    let v = c.settled().unwrap();
    assert_eq!(v.members, vec![1, 2, 3, 4]);
    assert!(v.generation >= 3);
    assert_eq!(started(&c, 3).map(|(_, j)| j), Some(true));
}

#[test]
fn a_president_crash_during_a_join_still_ends_in_one_cluster() {
    for seed in 0..30 {
        let mut c = QmgrCluster::new(seed, vec![vec![1, 2], vec![3, 4]], Knobs::default());
        c.start_all();
        c.run_for_ms(200);
        c.crash(4);
        c.run_for_ms(300);
        c.start(4);
        // Somewhere inside the join's rounds.
        let at = c.rng().range(1, 20);
        c.run_for_ms(at);
        c.crash(1);
        c.run_for_ms(3_000);
        let v = c.settled().unwrap_or_else(|e| panic!("seed {seed}: {e}\n{}", c.log_tail(80)));
        assert_eq!(v.members, vec![2, 3, 4], "seed {seed}");
        assert_eq!(v.president, 2, "seed {seed}");
    }
}

#[test]
fn a_partial_start_is_refused_while_an_unseen_cluster_runs() {
    // The cluster shrinks to node 1 by a graceful leave (no arbitration);
    // node 1 hangs; node 2 starts again and sees nobody. Starting alone
    // would make two clusters: the arbitrator knows generation 2 is running
    // (the president registered it) and refuses the partial start.
    let knobs = Knobs { start_partial_timeout_ms: 1_000, ..Knobs::default() };
    let mut c = QmgrCluster::new(11, vec![vec![1, 2]], knobs);
    c.start_all();
    c.run_for_ms(200);
    c.leave(2);
    c.run_for_ms(200);
    assert_eq!(c.membership(1), Some(&m(2, &[1], 1)));
    assert!(c.registrations().contains(&(1, 2)), "{:?}", c.registrations());
    assert!(c.arbit_requests().is_empty());
    c.hang(1);
    c.start(2);
    c.run_for_ms(5_000);
    assert!(c.membership(2).is_none(), "node 2 must not start a second cluster");
    let asked = c.arbit_requests();
    assert!(!asked.is_empty(), "it asked to start alone");
    assert!(c.log.iter().all(|e| !matches!(e.what, Happening::ArbitAnswer { generation: 0, granted: true })));
    c.resume(1);
    c.run_for_ms(1_000);
    assert_eq!(c.settled().unwrap(), m(3, &[1, 2], 1));
    assert_eq!(started(&c, 2).map(|(_, j)| j), Some(true));
}
