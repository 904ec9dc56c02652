//! Whole data nodes under the real membership protocol (QMGR) in the
//! deterministic kit: a hung node excluded by missed heartbeats, a network
//! split decided by the arbitrator, the president crashing, and the nodes
//! coming back with their data.

mod common;

use common::*;
use norr_kernel::BlockRef;
use norr_node::testkit::ClusterKit;
use norr_signals::cluster::ShutdownReason;
use norr_signals::{block, ExecType, KeyOp, OpResult, Signal, TcKeyReq, Value};

fn excluded(reasons: &[(ShutdownReason, bool)]) -> bool {
    reasons.iter().any(|(r, restart)| matches!(r, ShutdownReason::Excluded(_)) && *restart)
}

#[test]
fn a_hung_node_is_excluded_by_missed_heartbeats_and_the_survivors_keep_committing() {
    let k = knobs();
    let mut kit = ClusterKit::start(vec![vec![1, 2], vec![3, 4]], k.clone(), 21);
    let t = create_table(&mut kit, 1, "t", 8);
    for key in 0..100 {
        put(&mut kit, 1 + (key % 4) as u16, &t, key, key);
    }
    let t0 = kit.now_ns();
    kit.hang(2);
    // Writes to every partition, node 2's too: those wait for its exclusion
    // (or get a temporary error and are retried), none is lost.
    for key in 0..100 {
        assert!(put_retrying(&mut kit, [1, 3, 4][(key % 3) as usize], &t, key, key + 1000, 5), "write {key}");
    }
    // (Node 2, still hung, holds the old membership.)
    let m = kit.membership_of(1).cloned().expect("a member");
    assert_eq!(m.members, vec![1, 3, 4]);
    assert_eq!(kit.membership_of(3), Some(&m));
    assert_eq!(kit.membership_of(4), Some(&m));
    let fails = kit.cluster().fail_reports_since(1, t0);
    assert_eq!(fails.len(), 1, "{fails:?}");
    assert_eq!(fails[0].1, vec![2]);
    let hb = k.heartbeat_interval_ms * 1_000_000;
    let detect = fails[0].0 - t0;
    assert!(
        detect >= hb * (k.missed_heartbeats as u64 - 1) && detect <= hb * (k.missed_heartbeats as u64 + 2),
        "excluded after {} ms (heartbeat {} ms x {})",
        detect / 1_000_000,
        k.heartbeat_interval_ms,
        k.missed_heartbeats
    );
    // A whole node group survived: no arbitration was needed.
    assert!(kit.cluster().arbit_requests().is_empty());
    for key in (0..100).step_by(9) {
        assert_eq!(read(&mut kit, 3, &t, key), Some(key + 1000));
    }
    // It wakes up, learns it was excluded, stops, starts again by itself,
    // joins as a new node and copies what it missed.
    kit.resume(2);
    kit.wait_until_started(2);
    assert!(excluded(&kit.shutdowns(2)), "{:?}", kit.shutdowns(2));
    assert_eq!(kit.cluster().incarnation(2), 2);
    assert_eq!(checksums(&mut kit, 1, &t), checksums(&mut kit, 2, &t), "node 2's replica differs");
    for key in [0, 1, 50, 99] {
        assert_eq!(read(&mut kit, 2, &t, key), Some(key + 1000));
    }
}

#[test]
fn a_split_goes_on_only_on_the_side_the_arbitrator_grants() {
    for seed in [1, 2, 3, 4] {
        let mut kit = ClusterKit::start(vec![vec![1, 2], vec![3, 4]], knobs(), seed);
        let t = create_table(&mut kit, 1, "t", 8);
        for key in 0..64 {
            put(&mut kit, 1 + (key % 4) as u16, &t, key, key);
        }
        // Each side holds one node of each node group: only the arbitrator
        // can tell which one may go on.
        let (a, b) = ([1, 3], [2, 4]);
        kit.split(&a, &b);
        kit.wait_for("one side to be the cluster", |k| {
            k.membership().is_some_and(|m| m.members == a || m.members == b)
        });
        let m = kit.membership().expect("settled");
        let (won, lost) = if m.members == a { (a, b) } else { (b, a) };
        for n in lost {
            let shut = kit.shutdowns(n);
            assert!(
                shut.iter().any(|(r, _)| matches!(r, ShutdownReason::LostArbitration(_))),
                "seed {seed}: node {n} of the losing side: {shut:?}"
            );
        }
        let asked: Vec<u16> = kit.cluster().arbit_requests().iter().map(|e| e.node).collect();
        assert!(asked.iter().any(|n| won.contains(n)), "seed {seed}: the winners never asked: {asked:?}");
        // The winners serve every row and take writes.
        for key in 0..64 {
            assert_eq!(read(&mut kit, won[0], &t, key), Some(key), "seed {seed}");
            assert!(put_retrying(&mut kit, won[(key % 2) as usize], &t, key, key * 2, 5));
        }
        // While split, the losers keep trying to start: never as a cluster
        // of their own (the arbitrator refuses them).
        kit.advance(3_000_000_000);
        for n in lost {
            assert!(kit.membership_of(n).is_none(), "seed {seed}: node {n} is a member on the losing side");
        }
        kit.heal_split();
        for n in lost {
            kit.wait_until_started(n);
        }
        assert_eq!(kit.membership().expect("settled").members, vec![1, 2, 3, 4]);
        assert_eq!(checksums(&mut kit, 1, &t), checksums(&mut kit, 2, &t), "seed {seed}");
        assert_eq!(checksums(&mut kit, 3, &t), checksums(&mut kit, 4, &t), "seed {seed}");
        for key in (0..64).step_by(5) {
            assert_eq!(read(&mut kit, lost[0], &t, key), Some(key * 2), "seed {seed}");
        }
    }
}

#[test]
fn the_president_crashes_and_comes_back_with_its_data() {
    let mut kit = ClusterKit::start(vec![vec![1, 2]], knobs(), 8);
    let t = create_table(&mut kit, 1, "t", 4);
    for key in 0..50 {
        put(&mut kit, 1 + (key % 2) as u16, &t, key, key);
    }
    assert_eq!(kit.membership().expect("settled").president, 1);
    let t0 = kit.now_ns();
    kit.crash(1);
    for key in 0..50 {
        assert!(put_retrying(&mut kit, 2, &t, key, key + 7, 5), "write {key}");
    }
    let m = kit.membership().expect("settled");
    assert_eq!((m.members.clone(), m.president), (vec![2], 2));
    // A broken connection is noticed at once: well under a second.
    let fails = kit.cluster().fail_reports_since(2, t0);
    assert!(fails[0].0 - t0 < 100_000_000, "failover took {} ms", (fails[0].0 - t0) / 1_000_000);
    // DDL goes on with the new master.
    let u = create_table(&mut kit, 2, "u", 2);
    put(&mut kit, 2, &u, 1, 1);
    kit.restart(1);
    assert_eq!(kit.membership().expect("settled").president, 2, "the oldest member stays president");
    assert_eq!(checksums(&mut kit, 1, &t), checksums(&mut kit, 2, &t));
    assert_eq!(checksums(&mut kit, 1, &u), checksums(&mut kit, 2, &u));
    for key in [0, 25, 49] {
        assert_eq!(read(&mut kit, 1, &t, key), Some(key + 7));
    }
    put(&mut kit, 1, &t, 3, 33);
    assert_eq!(read(&mut kit, 2, &t, 3), Some(33));
}

/// A node frozen (SIGSTOP) for longer than its serve lease but not long
/// enough to be excluded refuses requests when it wakes (a temporary error:
/// the client goes to another node) until it heard from its peers again,
/// then serves as before. Past the lease the others may have excluded it
/// and changed rows its replicas would answer reads with (seen in the
/// real-process chaos test's SIGSTOP rounds): it cannot know until it hears
/// from them.
#[test]
fn a_node_woken_from_a_freeze_refuses_requests_until_it_heard_its_peers() {
    let k = norr_knobs::Knobs::default();
    let hb = k.heartbeat_interval_ms * 1_000_000;
    let mut refused = 0;
    for seed in [31, 32, 33] {
        let mut kit = ClusterKit::start(vec![vec![1, 2]], k.clone(), seed);
        let t = create_table(&mut kit, 1, "t", 4);
        for key in 0..8 {
            put(&mut kit, 1, &t, key, 1);
        }
        assert_eq!(read(&mut kit, 2, &t, 5), Some(1), "seed {seed}");
        kit.advance(3 * hb);
        // Frozen past the lease (missed - 1/2 intervals after its last tick),
        // short of the others' limit (missed intervals of silence).
        kit.hang(2);
        kit.advance(k.missed_heartbeats as u64 * hb - hb / 4);
        kit.resume(2);
        let h = kit.handle();
        let req = TcKeyReq {
            txn: h,
            exec: ExecType::Commit,
            ops: vec![KeyOp { abort_on_error: false, ..KeyOp::read(t.id, vec![Value::Int(5)]) }],
        };
        kit.send_from_api(API, BlockRef::new(2, block::TC, 0), Signal::TcKeyReq(Box::new(req)));
        for answer in kit.next_answers(API) {
            match answer {
                Signal::TcKeyConf(c) if c.txn == h => match &c.results[0] {
                    OpResult::Ok(Some(row)) => assert_eq!(row[1], Value::Int(1), "seed {seed}"),
                    other => panic!("seed {seed}: read answered {other:?}"),
                },
                Signal::TcKeyRef(r) if r.txn == h => {
                    assert!(r.error.code.is_temporary(), "seed {seed}: {r:?}");
                    refused += 1;
                }
                other => panic!("seed {seed}: {other:?}"),
            }
        }
        // Once it heard its peers, it serves again.
        kit.advance(3 * hb);
        if kit.membership_of(2).is_some_and(|m| m.contains(2)) {
            assert_eq!(read(&mut kit, 2, &t, 5), Some(1), "seed {seed}: node 2 serves again");
        }
    }
    assert!(refused >= 2, "only {refused} of 3 woken nodes refused the read");
}
