//! QMGR: node failures, hangs, splits, arbitration, graceful leaves.

use norr_cluster::qmgr_testkit::{ArbiterMode, Happening, NodeState, QmgrCluster};
use norr_knobs::Knobs;
use norr_signals::cluster::{ClusterSignal, Membership, ShutdownReason};

const MS: u64 = 1_000_000;

fn m(generation: u64, members: &[u16], president: u16) -> Membership {
    Membership { generation, members: members.to_vec(), president }
}

/// A running cluster of two node groups [1, 2], [3, 4].
fn four(seed: u64, knobs: Knobs) -> QmgrCluster {
    let mut c = QmgrCluster::new(seed, vec![vec![1, 2], vec![3, 4]], knobs);
    c.start_all();
    c.run_for_ms(300);
    assert_eq!(c.settled().unwrap(), m(1, &[1, 2, 3, 4], 1), "seed {seed}");
    c
}

/// Each of `survivors` got exactly one `NodeFailRep` since `t`, naming
/// `failed` with membership `expect`; returns the latest time one came.
fn assert_failed_once(c: &QmgrCluster, t: u64, survivors: &[u16], failed: &[u16], expect: &Membership) -> u64 {
    let mut latest = 0;
    for s in survivors {
        let reps = c.fail_reports_since(*s, t);
        assert_eq!(reps.len(), 1, "seed {}: node {s}: {reps:?}\n{}", c.seed, c.log_tail(50));
        assert_eq!(reps[0].1, failed, "seed {}: node {s}", c.seed);
        assert_eq!(&reps[0].2, expect, "seed {}: node {s}", c.seed);
        latest = latest.max(reps[0].0);
    }
    latest
}

fn shut_down_with(c: &QmgrCluster, node: u16, pred: impl Fn(&ShutdownReason) -> bool) -> bool {
    c.shutdowns(node).iter().any(|(r, _)| pred(r))
}

#[test]
fn crash_of_a_non_president_is_handled_in_milliseconds() {
    for seed in 0..20 {
        let mut c = four(seed, Knobs::default());
        let t = c.now_ns;
        c.crash(3);
        c.run_for_ms(1_000);
        let done = assert_failed_once(&c, t, &[1, 2, 4], &[3], &m(2, &[1, 2, 4], 1));
        // Default knobs: 200 ms heartbeats; the broken connection is what
        // makes it fast (a few network round trips).
        assert!(done - t < 50 * MS, "seed {seed}: {} ms", (done - t) / MS);
        assert!(c.arbit_requests().is_empty(), "group [1, 2] survives whole");
        assert_eq!(c.settled().unwrap(), m(2, &[1, 2, 4], 1));
    }
}

#[test]
fn crash_of_the_president_makes_the_next_oldest_president() {
    for seed in 0..20 {
        let mut c = four(seed, Knobs::default());
        let t = c.now_ns;
        c.crash(1);
        c.run_for_ms(1_000);
        let done = assert_failed_once(&c, t, &[2, 3, 4], &[1], &m(2, &[2, 3, 4], 2));
        assert!(done - t < 50 * MS, "seed {seed}: {} ms", (done - t) / MS);
        // The new president coordinates the next change: a join.
        c.start(1);
        c.run_for_ms(500);
        assert_eq!(c.settled().unwrap(), m(3, &[1, 2, 3, 4], 2), "seed {seed}: joined, last in join order");
        c.crash(2);
        c.run_for_ms(500);
        assert_eq!(c.settled().unwrap(), m(4, &[1, 3, 4], 3), "seed {seed}: the oldest after 2 is 3, not 1");
    }
}

#[test]
fn a_hung_node_is_declared_failed_after_the_missed_heartbeats_then_rejoins() {
    for seed in 0..10 {
        let knobs = Knobs::default();
        let limit = knobs.heartbeat_interval_ms * (knobs.missed_heartbeats as u64 + 1);
        let mut c = four(seed, knobs);
        let t = c.now_ns;
        c.hang(4);
        c.run_for_ms(2_000);
        let done = assert_failed_once(&c, t, &[1, 2, 3], &[4], &m(2, &[1, 2, 3], 1));
        let took_ms = (done - t) / MS;
        // Silent for `missed` intervals since its last heartbeat (sent up
        // to one interval before it hung), checked each interval.
        assert!(took_ms >= 600 && took_ms <= limit + 20, "seed {seed}: {took_ms} ms");
        let noticed: u64 = [1, 2, 3].iter().map(|s| c.counter(*s, "qmgr: missed heartbeats")).sum();
        assert!(noticed >= 1, "seed {seed}: found by heartbeats");
        // It wakes up: it reads that it was excluded, stops, and comes back
        // through a fresh join.
        let t = c.now_ns;
        c.resume(4);
        c.run_for_ms(10);
        assert!(
            shut_down_with(&c, 4, |r| matches!(r, ShutdownReason::Excluded(_))),
            "seed {seed}: {:?}",
            c.shutdowns(4)
        );
        assert_eq!(c.shutdowns(4), vec![(c.shutdowns(4)[0].0.clone(), true)], "restart requested");
        c.run_for_ms(1_000);
        assert_eq!(c.settled().unwrap(), m(3, &[1, 2, 3, 4], 1), "seed {seed}");
        for s in [1, 2, 3] {
            assert_eq!(c.join_reports_since(s, t).iter().map(|(_, n)| *n).collect::<Vec<_>>(), vec![4]);
        }
        let (inc, last) = c.reports(4).last().cloned().unwrap();
        assert_eq!(inc, 2);
        assert!(matches!(last, ClusterSignal::ClusterStartedRep { joined: true, .. }), "{last:?}");
    }
}

#[test]
fn a_hung_president_is_replaced() {
    let mut c = four(1, Knobs::default());
    let t = c.now_ns;
    c.hang(1);
    c.run_for_ms(2_000);
    assert_failed_once(&c, t, &[2, 3, 4], &[1], &m(2, &[2, 3, 4], 2));
    c.resume(1);
    c.run_for_ms(1_500);
    assert_eq!(c.settled().unwrap(), m(3, &[1, 2, 3, 4], 2));
}

#[test]
fn split_two_and_two_across_groups_is_decided_by_the_arbitrator() {
    let mut winners_seen = std::collections::BTreeSet::new();
    for seed in 0..30 {
        let mut c = four(seed, Knobs::default());
        let t = c.now_ns;
        c.split(&[1, 3], &[2, 4]);
        c.run_for_ms(2_000);
        // Both sides asked with the generation before the split.
        let reqs = c.arbit_requests();
        assert_eq!(reqs.len(), 2, "seed {seed}: {reqs:?}");
        for r in &reqs {
            assert!(matches!(r.what, Happening::ArbitReq { generation: 1, .. }), "{r:?}");
        }
        let winners: Vec<u16> = c.checker.generation_membership(2).expect("one side went on").members.clone();
        assert_eq!(winners.len(), 2, "seed {seed}: {winners:?}");
        let losers: Vec<u16> = [1, 2, 3, 4].into_iter().filter(|n| !winners.contains(n)).collect();
        winners_seen.insert(winners.clone());
        let pres = winners[0];
        assert_failed_once(&c, t, &winners, &losers, &m(2, &winners, pres));
        for l in &losers {
            assert!(
                shut_down_with(&c, *l, |r| matches!(r, ShutdownReason::LostArbitration(_))),
                "seed {seed}: node {l}: {:?}\n{}",
                c.shutdowns(*l),
                c.log_tail(80)
            );
            assert!(c.fail_reports_since(*l, t).is_empty(), "the losing side changes nothing");
        }
        // Healed: the losers come back and join.
        c.heal_split();
        c.run_for_ms(2_000);
        let v = c.settled().unwrap_or_else(|e| panic!("seed {seed}: {e}\n{}", c.log_tail(600)));
        assert_eq!(v.members, vec![1, 2, 3, 4], "seed {seed}");
    }
    assert_eq!(winners_seen.len(), 2, "either side can win, depending on timing");
}

#[test]
fn split_with_a_whole_group_on_one_side_needs_no_arbitration() {
    let mut c = four(2, Knobs::default());
    let t = c.now_ns;
    c.split(&[1, 2, 3], &[4]);
    c.run_for_ms(1_000);
    assert!(c.arbit_requests().is_empty());
    assert_failed_once(&c, t, &[1, 2, 3], &[4], &m(2, &[1, 2, 3], 1));
    assert!(shut_down_with(&c, 4, |r| matches!(r, ShutdownReason::NodeGroupLost(_))), "{:?}", c.shutdowns(4));
}

#[test]
fn split_between_the_node_groups_stops_both_sides() {
    // {1,2} | {3,4}: each side holds one group whole and none of the other:
    // neither has all the data, both stop.
    let mut c = four(3, Knobs::default());
    c.split(&[1, 2], &[3, 4]);
    c.run_for_ms(1_000);
    assert!(c.arbit_requests().is_empty());
    for n in [1, 2, 3, 4] {
        let s = c.shutdowns(n);
        assert!(matches!(&s[..], [(ShutdownReason::NodeGroupLost(_), true)]), "node {n}: {s:?}");
        // Back as starting nodes, which cannot form a cluster on their side.
        assert_eq!(c.state(n), NodeState::Up, "node {n}");
        assert!(c.membership(n).is_none(), "node {n}");
    }
    c.heal_split();
    c.run_for_ms(500);
    assert_eq!(c.settled().unwrap(), m(1, &[1, 2, 3, 4], 1), "formed afresh");
}

#[test]
fn losing_every_replica_of_a_group_stops_the_cluster() {
    let mut c = four(4, Knobs::default());
    c.crash(1);
    c.crash(2);
    c.run_for_ms(1_000);
    for n in [3, 4] {
        let s = c.shutdowns(n);
        match &s[..] {
            [(ShutdownReason::NodeGroupLost(lost), true)] => assert_eq!(lost, &vec![1, 2]),
            other => panic!("node {n}: {other:?}"),
        }
    }
}

#[test]
fn two_nodes_failing_at_once_are_one_change() {
    for seed in 0..20 {
        let mut c = four(seed, Knobs::default());
        let t = c.now_ns;
        c.crash(2);
        c.crash(4);
        c.run_for_ms(1_000);
        assert_failed_once(&c, t, &[1, 3], &[2, 4], &m(2, &[1, 3], 1));
        // One node of each group left: the arbitrator decided.
        assert_eq!(c.arbit_requests().len(), 1, "seed {seed}");
    }
}

#[test]
fn six_nodes_three_groups_survive_a_node_of_each_group_failing() {
    let mut c = QmgrCluster::new(5, vec![vec![1, 2], vec![3, 4], vec![5, 6]], Knobs::default());
    c.start_all();
    c.run_for_ms(300);
    assert_eq!(c.settled().unwrap().members, vec![1, 2, 3, 4, 5, 6]);
    c.crash(2);
    c.run_for_ms(300);
    c.crash(3);
    c.run_for_ms(300);
    assert!(c.arbit_requests().is_empty(), "group [5, 6] whole each time");
    c.crash(6);
    c.run_for_ms(300);
    assert_eq!(c.arbit_requests().len(), 1, "now no group is whole");
    assert_eq!(c.settled().unwrap(), m(4, &[1, 4, 5], 1));
}

#[test]
fn the_survivor_of_a_two_node_cluster_asks_the_arbitrator() {
    let mut c = QmgrCluster::new(6, vec![vec![1, 2]], Knobs::default());
    c.start_all();
    c.run_for_ms(300);
    c.crash(1);
    c.run_for_ms(500);
    assert_eq!(c.settled().unwrap(), m(2, &[2], 2));
    assert_eq!(c.arbit_requests().len(), 1);
}

#[test]
fn without_an_arbitrator_both_halves_stop() {
    for mode in [ArbiterMode::Down, ArbiterMode::Silent] {
        let knobs = Knobs::default();
        let timeout = knobs.arbitration_timeout_ms;
        let mut c = four(7, knobs);
        c.arbiter_mode = mode;
        c.net.auto_restart_ns = None;
        let t = c.now_ns;
        c.split(&[1, 3], &[2, 4]);
        c.run_for_ms(timeout + 1_000);
        for n in [1, 2, 3, 4] {
            let s = c.shutdowns(n);
            assert!(matches!(&s[..], [(ShutdownReason::LostArbitration(_), true)]), "{mode:?} node {n}: {s:?}");
            assert!(c.fail_reports_since(n, t).is_empty());
        }
        if mode == ArbiterMode::Silent {
            let why = c.shutdowns(1)[0].0.clone();
            assert!(format!("{why:?}").contains("did not answer within 3000 ms"), "{why:?}");
        }
    }
}

#[test]
fn graceful_leave_needs_no_arbitration() {
    let mut c = QmgrCluster::new(8, vec![vec![1, 2]], Knobs::default());
    c.start_all();
    c.run_for_ms(300);
    let t = c.now_ns;
    c.leave(2);
    c.run_for_ms(100);
    assert_failed_once(&c, t, &[1], &[2], &m(2, &[1], 1));
    assert!(c.arbit_requests().is_empty());
    assert_eq!(c.shutdowns(2), vec![(ShutdownReason::Requested, false)]);
    assert_eq!(c.state(2), NodeState::Down);
    // Leaving the last node of the group would stop the cluster: refused.
    c.leave(1);
    c.run_for_ms(100);
    assert_eq!(c.settled().unwrap(), m(2, &[1], 1));
    let refused: Vec<_> = c.log.iter().filter(|e| matches!(e.what, Happening::LeaveRefused { .. })).collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    // Node 2 comes back.
    c.start(2);
    c.run_for_ms(500);
    assert_eq!(c.settled().unwrap(), m(3, &[1, 2], 1));
}

#[test]
fn the_president_can_leave() {
    let mut c = four(9, Knobs::default());
    let t = c.now_ns;
    c.leave(1);
    c.run_for_ms(100);
    assert_failed_once(&c, t, &[2, 3, 4], &[1], &m(2, &[2, 3, 4], 2));
    assert_eq!(c.shutdowns(1), vec![(ShutdownReason::Requested, false)]);
}

#[test]
fn a_cut_link_between_two_members_removes_one_of_them() {
    for seed in 0..20 {
        let mut c = four(seed, Knobs::default());
        c.cut(2, 3);
        c.run_for_ms(2_000);
        // 1 and 4 reach everyone: they stay. The removed one restarts but
        // cannot join while it does not reach every member.
        let v = c.membership(1).cloned().expect("node 1 is a member");
        assert_eq!(c.membership(4), Some(&v), "seed {seed}");
        assert_eq!(v.members.len(), 3, "seed {seed}: {v:?}");
        assert!(!(v.contains(2) && v.contains(3)), "seed {seed}");
        c.heal(2, 3);
        c.run_for_ms(2_000);
        assert_eq!(c.settled().unwrap().members, vec![1, 2, 3, 4], "seed {seed}");
    }
}

#[test]
fn a_coordinator_crash_during_the_failure_round_is_taken_over() {
    for seed in 0..40 {
        let mut c = four(seed, Knobs::default());
        c.crash(4);
        let at = c.rng().range(0, 6);
        c.run_for_ms(at);
        c.crash(1);
        c.run_for_ms(1_000);
        let v = c.settled().unwrap_or_else(|e| panic!("seed {seed}: {e}\n{}", c.log_tail(40)));
        assert_eq!(v.members, vec![2, 3], "seed {seed}");
        assert_eq!(v.president, 2);
    }
}

/// QMGR's serve lease (`ServeLeaseRep` to the node's TCs): renewed every
/// heartbeat tick, each ending half an interval before the others could
/// declare the node failed for its silence since that tick; none at the
/// tick that finds the node itself was hung, and none after it until every
/// peer was heard from again. So a node woken from SIGSTOP serves no reads
/// from replicas the others may have changed after excluding it.
#[test]
fn a_node_that_was_hung_gets_no_serve_lease_until_it_hears_its_peers_again() {
    let k = Knobs::default();
    let (hb, missed) = (k.heartbeat_interval_ms * MS, k.missed_heartbeats as u64);
    let mut c = four(5, k.clone());
    c.run_for_ms(2_000);
    let steady = c.leases(4);
    assert!(steady.len() >= 5, "{steady:?}");
    for (at, until) in &steady {
        assert_eq!(until - at, missed * hb - hb / 2, "a lease at {at}");
    }
    for w in steady.windows(2) {
        assert!(w[1].0 <= w[0].1, "a gap between the leases {w:?}");
    }
    // Hung for longer than two intervals (a stall) but not long enough to
    // be excluded.
    c.hang(4);
    c.run_for_ms(450);
    let woke = c.now_ns;
    c.resume(4);
    c.run_for_ms(1_000);
    assert_eq!(c.settled().unwrap().members, vec![1, 2, 3, 4], "node 4 stayed a member");
    let after: Vec<(u64, u64)> = c.leases(4).into_iter().filter(|(at, _)| *at >= woke).collect();
    let first = after.first().expect("leases again once the peers were heard");
    assert!(first.0 >= woke + hb, "a lease {} ms after waking, at the stall's own tick", (first.0 - woke) / MS);
    assert!(first.0 <= woke + 3 * hb, "no lease for {} ms after waking", (first.0 - woke) / MS);
    assert!(c.counter(4, "qmgr: serve lease not renewed") >= 1);
}

/// The first revocation of `node`'s serve lease at or after `t`.
fn revoked_since(c: &QmgrCluster, node: u16, t: u64) -> Option<u64> {
    c.revocations(node).into_iter().find(|at| *at >= t)
}

/// A suspicion revokes the serve lease at once, and the round that removes
/// the failed node renews it at the moment it decides, not at the next
/// heartbeat tick: a failover does not wait up to an interval for it.
#[test]
fn a_failure_revokes_the_serve_lease_and_its_round_renews_it_at_once() {
    for seed in 0..20 {
        let mut c = four(seed, Knobs::default());
        c.run_for_ms(1_000);
        let t = c.now_ns;
        c.crash(3);
        c.run_for_ms(1_000);
        for s in [1, 2, 4] {
            let reps = c.fail_reports_since(s, t);
            assert_eq!(reps.len(), 1, "seed {seed}: node {s}: {reps:?}");
            let decided = reps[0].0;
            let revoked = revoked_since(&c, s, t).unwrap_or_else(|| panic!("seed {seed}: node {s} kept its lease"));
            assert!(revoked <= decided, "seed {seed}: node {s} revoked at {revoked}, after the decision at {decided}");
            let renewed = c.leases(s).into_iter().find(|(at, _)| *at >= revoked).expect("a lease after the round");
            assert_eq!(
                renewed.0, decided,
                "seed {seed}: node {s}: no lease between the revocation and the decision, and one at the decision"
            );
        }
    }
}

/// A split that closes the connections (as a reset does): the side that
/// loses arbitration revokes its serve lease before the winners' round
/// decides, and gets no lease again; so it answers no read from rows the
/// winners may change once they took over. (Before the revocation its lease
/// from the last tick ran on for up to `missed_heartbeats` intervals.)
#[test]
fn the_losing_side_of_a_split_stops_serving_before_the_winners_take_over() {
    for seed in 0..30 {
        let mut c = four(seed, Knobs::default());
        c.run_for_ms(1_000);
        let t = c.now_ns;
        c.split(&[1, 3], &[2, 4]);
        // Long enough for the round (milliseconds), short of the losers'
        // restart (a new incarnation has a new recorder).
        c.run_for_ms(150);
        let winners: Vec<u16> = c.checker.generation_membership(2).expect("one side went on").members.clone();
        let losers: Vec<u16> = [1, 2, 3, 4].into_iter().filter(|n| !winners.contains(n)).collect();
        let took_over = winners
            .iter()
            .map(|w| {
                let reps = c.fail_reports_since(*w, t);
                assert!(!reps.is_empty(), "seed {seed}: winner {w} has no report\n{}", c.log_tail(60));
                reps[0].0
            })
            .min()
            .expect("winners");
        for l in &losers {
            let revoked = revoked_since(&c, *l, t).unwrap_or_else(|| {
                panic!("seed {seed}: node {l} kept its lease: {:?}\n{}", c.revocations(*l), c.log_tail(60))
            });
            assert!(
                revoked <= took_over,
                "seed {seed}: node {l} revoked at {revoked}, after the winners took over at {took_over}"
            );
            let later: Vec<(u64, u64)> = c.leases(*l).into_iter().filter(|(at, _)| *at >= revoked).collect();
            assert!(later.is_empty(), "seed {seed}: node {l} got leases after losing: {later:?}");
        }
    }
}
