//! One QMGR driven signal by signal: what it answers, and that bad input
//! from a peer is counted and ignored, never a panic.

use super::*;
use crate::qmgr_testkit::XorShift;
use norr_kernel::Scheduler;
use norr_signals::cluster::{Ballot, ClusterView};

const ME: NodeId = 2;

fn env(from: BlockRef, to: NodeId, sig: Signal) -> Envelope<Signal> {
    Envelope { from, to: qmgr_ref(to), prio: Priority::A, signal: sig }
}

fn q(msg: QmgrMsg) -> Signal {
    cluster(ClusterSignal::Qmgr(msg))
}

fn host(node: NodeId) -> BlockRef {
    BlockRef::new(node, block::HOST, 0)
}

/// Signals QMGR sent to the host, MGM or the subscriber (TC) of node `ME`.
struct Sink(std::sync::Arc<std::sync::Mutex<Vec<Envelope<Signal>>>>);
impl Block<Signal> for Sink {
    fn on_signal(&mut self, env: Envelope<Signal>, _ctx: &mut Ctx<'_, Signal>) {
        self.0.lock().unwrap().push(env);
    }
}

struct One {
    sched: Scheduler<Signal>,
    local: std::sync::Arc<std::sync::Mutex<Vec<Envelope<Signal>>>>,
}

impl One {
    /// Node 2 of a cluster [1, 2], [3, 4], started and connected to all.
    fn new() -> One {
        let mut sched = Scheduler::new(ME, 1 << 12);
        let knobs = Knobs::default();
        let subs = vec![BlockRef::new(ME, block::TC, 0)];
        sched.add_block(block::QMGR, 0, Box::new(Qmgr::new(ME, vec![vec![1, 2], vec![3, 4]], &knobs, subs)));
        let local = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        for b in [block::TC, block::HOST, block::MGM] {
            sched.add_block(b, 0, Box::new(Sink(local.clone())));
        }
        let mut one = One { sched, local };
        one.host_says(ClusterSignal::QmgrStartReq { kind: StartKind::Initial });
        for n in [1, 3, 4] {
            one.host_says(ClusterSignal::ConnectRep { node: n });
        }
        one
    }

    fn host_says(&mut self, sig: ClusterSignal) {
        self.sched.deliver(env(host(ME), ME, cluster(sig))).unwrap();
        self.sched.run_until_idle(1_000);
    }

    fn peer_sends(&mut self, peer: NodeId, msg: QmgrMsg) -> Vec<Envelope<Signal>> {
        self.sched.deliver(env(qmgr_ref(peer), ME, q(msg))).unwrap();
        self.sched.run_until_idle(1_000);
        self.sched.take_remote()
    }

    fn local(&mut self) -> Vec<ClusterSignal> {
        let v = std::mem::take(&mut *self.local.lock().unwrap());
        v.into_iter()
            .filter_map(|e| match e.signal {
                Signal::Cluster(c) => Some(*c),
                _ => None,
            })
            .collect()
    }

    fn counters(&mut self) -> Vec<(String, u64)> {
        let me = BlockRef::new(ME, block::TC, 0);
        let sig = Signal::Internal(Box::new(InternalSignal::StatsReq { req: 9 }));
        self.sched.deliver(Envelope { from: me, to: qmgr_ref(ME), prio: Priority::B, signal: sig }).unwrap();
        self.sched.run_until_idle(1_000);
        let got = std::mem::take(&mut *self.local.lock().unwrap());
        got.into_iter()
            .find_map(|e| match e.signal {
                Signal::Internal(i) => match *i {
                    InternalSignal::StatsConf { req: 9, stats } => Some(stats.counters),
                    _ => None,
                },
                _ => None,
            })
            .expect("QMGR answers StatsReq")
    }

    fn counter(&mut self, name: &str) -> u64 {
        self.counters().into_iter().find(|(k, _)| k == name).map_or(0, |(_, v)| v)
    }

    /// Make node 2 a member: node 1 forms the cluster of all four.
    fn formed(mut self) -> One {
        self.sched.take_remote();
        let ballot = Ballot { round: 1, node: 1 };
        let out = self.peer_sends(1, QmgrMsg::PrepChangeReq { generation: 0, ballot, failed: vec![], current: None });
        assert!(matches!(&out[..], [e] if matches!(&e.signal, Signal::Cluster(c)
            if matches!(&**c, ClusterSignal::Qmgr(QmgrMsg::PrepChangeConf { generation: 0, accepted: None, .. })))));
        let change = MembershipChange::Form { members: vec![1, 2, 3, 4] };
        let out = self.peer_sends(1, QmgrMsg::AcceptChangeReq { generation: 0, ballot, change: change.clone() });
        assert_eq!(out.len(), 1);
        let out = self.peer_sends(1, QmgrMsg::ChangeDecided { view: view(1, &[1, 2, 3, 4]), change });
        assert!(out.is_empty());
        let got = self.local();
        assert!(
            matches!(&got[..], [ClusterSignal::ClusterStartedRep { membership, joined: false, .. }]
                if membership.generation == 1),
            "{got:?}"
        );
        self
    }
}

fn view(generation: u64, order: &[NodeId]) -> ClusterView {
    let mut members = order.to_vec();
    members.sort_unstable();
    ClusterView { membership: Membership { generation, members, president: order[0] }, order: order.to_vec() }
}

#[test]
fn a_starting_node_answers_presence_and_follows_a_formation() {
    let mut one = One::new();
    let out = one.sched.take_remote();
    // It asked every connected node who they are.
    let asked: Vec<NodeId> = out
        .iter()
        .filter(|e| matches!(&e.signal, Signal::Cluster(c) if matches!(&**c, ClusterSignal::Qmgr(QmgrMsg::PresenceReq { node: ME }))))
        .map(|e| e.to.node)
        .collect();
    assert_eq!(asked, vec![1, 3, 4]);
    let out = one.peer_sends(3, QmgrMsg::PresenceReq { node: 3 });
    assert!(matches!(&out[..], [e] if e.to.node == 3 && matches!(&e.signal, Signal::Cluster(c)
        if **c == ClusterSignal::Qmgr(QmgrMsg::Presence { node: ME, state: PeerState::Starting }))));
    let mut one = one.formed();
    let out = one.peer_sends(3, QmgrMsg::PresenceReq { node: 3 });
    assert!(matches!(&out[..], [e] if matches!(&e.signal, Signal::Cluster(c)
        if matches!(&**c, ClusterSignal::Qmgr(QmgrMsg::Presence { state: PeerState::Member(_), .. })))));
}

#[test]
fn malformed_messages_are_counted_and_ignored() {
    let mut one = One::new().formed();
    let bad = vec![
        (1, QmgrMsg::PresenceReq { node: 4 }),
        (
            3,
            QmgrMsg::Presence {
                node: 3,
                state: PeerState::Member(ClusterView {
                    membership: Membership { generation: 1, members: vec![3, 1], president: 3 },
                    order: vec![3, 1],
                }),
            },
        ),
        (1, QmgrMsg::ChangeDecided { view: view(2, &[1, 9]), change: MembershipChange::Join { node: 9 } }),
        (
            1,
            QmgrMsg::ChangeDecided {
                view: ClusterView {
                    membership: Membership { generation: 2, members: vec![1, 2], president: 2 },
                    order: vec![1, 2],
                },
                change: MembershipChange::Fail { failed: vec![3, 4] },
            },
        ),
        (
            1,
            QmgrMsg::PrepChangeReq {
                generation: 1,
                ballot: Ballot { round: 5, node: 3 },
                failed: vec![],
                current: None,
            },
        ),
        (
            1,
            QmgrMsg::PrepChangeReq {
                generation: 1,
                ballot: Ballot { round: 5, node: 1 },
                failed: vec![77],
                current: None,
            },
        ),
        (
            3,
            QmgrMsg::PrepChangeReq {
                generation: 1,
                ballot: Ballot { round: 5, node: 3 },
                failed: vec![4],
                current: None,
            },
        ),
        (
            1,
            QmgrMsg::AcceptChangeReq {
                generation: 1,
                ballot: Ballot { round: 1, node: 1 },
                change: MembershipChange::Form { members: vec![1] },
            },
        ),
        (
            1,
            QmgrMsg::AcceptChangeReq {
                generation: 1,
                ballot: Ballot { round: 1, node: 1 },
                change: MembershipChange::Leave { node: 9 },
            },
        ),
        (3, QmgrMsg::FailRep { generation: 1, failed: vec![3], reason: "me".into() }),
        (3, QmgrMsg::FailRep { generation: 1, failed: vec![1, 1], reason: "twice".into() }),
        (1, QmgrMsg::CmRegConf { view: view(3, &[1, 3]) }),
        (1, QmgrMsg::Stop { generation: 1, ballot: Ballot { round: 1, node: 1 }, reason: ShutdownReason::Requested }),
        (4, QmgrMsg::CmRegReq { node: 3 }),
        (4, QmgrMsg::LeaveReq { node: 3 }),
        (1, QmgrMsg::Tick),
        (1, QmgrMsg::ArbitTimeout { generation: 1, ballot: Ballot::default() }),
    ];
    let n = bad.len() as u64;
    for (peer, msg) in bad {
        let out = one.peer_sends(peer, msg.clone());
        assert!(out.is_empty(), "{msg:?} got an answer: {out:?}");
    }
    assert_eq!(one.counter("qmgr: malformed message from a peer"), n);
    // Signals from strangers: another block of a data node, a node not in
    // the cluster.
    one.sched.deliver(env(BlockRef::new(1, block::TC, 0), ME, q(QmgrMsg::Heartbeat { generation: 1 }))).unwrap();
    one.sched.deliver(env(qmgr_ref(99), ME, q(QmgrMsg::Heartbeat { generation: 1 }))).unwrap();
    one.sched.deliver(env(qmgr_ref(1), ME, cluster(ClusterSignal::ConnectRep { node: 1 }))).unwrap();
    one.sched.run_until_idle(100);
    assert_eq!(one.counter("qmgr: message from a stranger"), 2);
    assert_eq!(one.counter("qmgr: unexpected cluster signal"), 1);
    // Still a member of generation 1, nothing reported.
    assert_eq!(one.counter("qmgr: generation"), 1);
    assert!(one.local().is_empty());
}

#[test]
fn a_member_declared_failed_shuts_down_and_asks_to_restart() {
    let mut one = One::new().formed();
    let ballot = Ballot { round: 1, node: 1 };
    let out = one.peer_sends(1, QmgrMsg::PrepChangeReq { generation: 1, ballot, failed: vec![2], current: None });
    assert!(out.is_empty());
    let got = one.local();
    assert!(
        matches!(&got[..], [ClusterSignal::HostShutdownReq { reason: ShutdownReason::Excluded(_), restart: true }]),
        "{got:?}"
    );
    // Deaf from now on.
    let out = one.peer_sends(1, QmgrMsg::PresenceReq { node: 1 });
    assert!(out.is_empty());
}

#[test]
fn a_stale_exclusion_is_ignored_a_current_one_obeyed() {
    let mut one = One::new().formed();
    // Generation 2 without node 4 (node 2 got the decision).
    let out = one.peer_sends(
        1,
        QmgrMsg::ChangeDecided { view: view(2, &[1, 2, 3]), change: MembershipChange::Fail { failed: vec![4] } },
    );
    // No member is suspected now: it heartbeats the others at once and
    // renews the serve lease from that moment (not at the next tick).
    let beats: Vec<NodeId> = out
        .iter()
        .filter(|e| matches!(&e.signal, Signal::Cluster(c) if matches!(&**c, ClusterSignal::Qmgr(QmgrMsg::Heartbeat { generation: 2 }))))
        .map(|e| e.to.node)
        .collect();
    assert_eq!(beats, vec![1, 3], "{out:?}");
    assert_eq!(out.len(), 2, "{out:?}");
    let got = one.local();
    assert!(
        matches!(&got[..], [ClusterSignal::NodeFailRep { failed, .. }, ClusterSignal::ServeLeaseRep { .. }] if *failed == vec![4]),
        "{got:?}"
    );
    one.peer_sends(3, QmgrMsg::YouAreExcluded { generation: 1, reason: "old".into() });
    assert!(one.local().is_empty());
    assert_eq!(one.counter("qmgr: stale exclusion ignored"), 1);
    one.peer_sends(3, QmgrMsg::YouAreExcluded { generation: 2, reason: "now".into() });
    assert!(matches!(&one.local()[..], [ClusterSignal::HostShutdownReq { reason: ShutdownReason::Excluded(_), .. }]));
}

#[test]
fn a_removed_node_heartbeating_is_told_it_is_excluded() {
    let mut one = One::new().formed();
    one.peer_sends(
        1,
        QmgrMsg::ChangeDecided { view: view(2, &[1, 2, 3]), change: MembershipChange::Fail { failed: vec![4] } },
    );
    let out = one.peer_sends(4, QmgrMsg::Heartbeat { generation: 1 });
    assert!(matches!(&out[..], [e] if e.to.node == 4 && matches!(&e.signal, Signal::Cluster(c)
        if matches!(&**c, ClusterSignal::Qmgr(QmgrMsg::YouAreExcluded { generation: 2, .. })))));
}

#[test]
fn a_member_behind_catches_up_from_a_round() {
    let mut one = One::new().formed();
    // Node 2 missed generation 2 (node 4 failed); node 1 runs the next round.
    let current = Some(view(2, &[1, 2, 3]));
    let ballot = Ballot { round: 1, node: 1 };
    let out = one.peer_sends(1, QmgrMsg::PrepChangeReq { generation: 2, ballot, failed: vec![3], current });
    let to = |n: NodeId, pred: &dyn Fn(&QmgrMsg) -> bool| {
        out.iter().any(|e| {
            e.to.node == n
                && matches!(&e.signal, Signal::Cluster(c)
            if matches!(&**c, ClusterSignal::Qmgr(m) if pred(m)))
        })
    };
    assert!(
        to(1, &|m| matches!(m, QmgrMsg::PrepChangeConf { generation: 2, failed, .. } if *failed == vec![3])),
        "{out:?}"
    );
    // Node 3 is told before its connection is closed.
    assert!(to(3, &|m| matches!(m, QmgrMsg::YouAreExcluded { generation: 2, .. })), "{out:?}");
    let heartbeat = |e: &&Envelope<Signal>| matches!(&e.signal, Signal::Cluster(c) if matches!(&**c, ClusterSignal::Qmgr(QmgrMsg::Heartbeat { .. })));
    assert_eq!(out.iter().filter(|e| !heartbeat(e)).count(), 2, "{out:?}");
    let got = one.local();
    assert!(
        matches!(&got[0], ClusterSignal::NodeFailRep { failed, membership } if *failed == vec![4] && membership.generation == 2),
        "{got:?}"
    );
    // Node 3 is cut off (it was named failed): told, then disconnected.
    assert!(got.contains(&ClusterSignal::HostDisconnectReq { node: 3 }), "{got:?}");
}

#[test]
fn a_coordinator_behind_is_sent_the_newer_view() {
    let mut one = One::new().formed();
    one.peer_sends(
        1,
        QmgrMsg::ChangeDecided { view: view(2, &[1, 2, 3]), change: MembershipChange::Fail { failed: vec![4] } },
    );
    let ballot = Ballot { round: 1, node: 1 };
    let out = one.peer_sends(1, QmgrMsg::PrepChangeReq { generation: 1, ballot, failed: vec![4], current: None });
    assert!(matches!(&out[..], [e] if matches!(&e.signal, Signal::Cluster(c)
        if matches!(&**c, ClusterSignal::Qmgr(QmgrMsg::Catchup { view }) if view.membership.generation == 2))));
}

#[test]
fn a_refused_join_without_retry_stops_the_node() {
    let mut one = One::new();
    // Node 1 says a cluster is running; node 2 asks to join.
    let running = PeerState::Member(view(3, &[1, 3, 4]));
    let out = one.peer_sends(1, QmgrMsg::Presence { node: 1, state: running });
    assert!(
        out.iter().any(|e| e.to.node == 1
            && matches!(&e.signal, Signal::Cluster(c)
        if **c == ClusterSignal::Qmgr(QmgrMsg::CmRegReq { node: ME }))),
        "{out:?}"
    );
    one.peer_sends(1, QmgrMsg::CmRegRef { node: ME, reason: "no".into(), retry: false });
    let got = one.local();
    assert!(
        matches!(
            &got[..],
            [ClusterSignal::HostShutdownReq { reason: ShutdownReason::ConfigMismatch(_), restart: false }]
        ),
        "{got:?}"
    );
}

#[test]
fn a_join_answer_makes_it_a_member_that_joined() {
    let mut one = One::new();
    one.peer_sends(1, QmgrMsg::Presence { node: 1, state: PeerState::Member(view(3, &[1, 3, 4])) });
    one.peer_sends(1, QmgrMsg::CmRegConf { view: view(4, &[1, 3, 4, 2]) });
    let got = one.local();
    assert!(
        matches!(&got[..], [ClusterSignal::ClusterStartedRep { membership, joined: true, .. }]
            if membership.members == vec![1, 2, 3, 4] && membership.president == 1),
        "{got:?}"
    );
}

/// A random message: mostly well-formed shapes with random node ids,
/// generations and ballots, some nonsense.
fn random_msg(rng: &mut XorShift) -> QmgrMsg {
    let node = |rng: &mut XorShift| rng.range(0, 6) as NodeId;
    let nodes = |rng: &mut XorShift| (0..rng.range(0, 4)).map(|_| rng.range(0, 6) as NodeId).collect::<Vec<_>>();
    let generation = |rng: &mut XorShift| rng.range(0, 4);
    let ballot = |rng: &mut XorShift| Ballot { round: rng.range(0, 3) as u32, node: rng.range(0, 6) as NodeId };
    let a_view = |rng: &mut XorShift| {
        let mut order = nodes(rng);
        if order.is_empty() {
            order.push(1);
        }
        let mut members = order.clone();
        if rng.chance(80) {
            members.sort_unstable();
            members.dedup();
        }
        let president = if rng.chance(80) { order[0] } else { rng.range(0, 6) as NodeId };
        ClusterView { membership: Membership { generation: rng.range(0, 4), members, president }, order }
    };
    let change = |rng: &mut XorShift| match rng.range(0, 3) {
        0 => MembershipChange::Form { members: nodes(rng) },
        1 => MembershipChange::Join { node: rng.range(0, 6) as NodeId },
        2 => MembershipChange::Leave { node: rng.range(0, 6) as NodeId },
        _ => MembershipChange::Fail { failed: nodes(rng) },
    };
    match rng.range(0, 19) {
        0 => QmgrMsg::Heartbeat { generation: generation(rng) },
        1 => QmgrMsg::PresenceReq { node: node(rng) },
        2 => QmgrMsg::Presence {
            node: node(rng),
            state: if rng.chance(50) { PeerState::Starting } else { PeerState::Member(a_view(rng)) },
        },
        3 => QmgrMsg::CmRegReq { node: node(rng) },
        4 => QmgrMsg::CmRegConf { view: a_view(rng) },
        5 => QmgrMsg::CmRegRef { node: node(rng), reason: String::new(), retry: rng.chance(50) },
        6 => QmgrMsg::LeaveReq { node: node(rng) },
        7 => QmgrMsg::LeaveRef { node: node(rng), reason: String::new(), retry: rng.chance(50) },
        8 => QmgrMsg::FailRep { generation: generation(rng), failed: nodes(rng), reason: String::new() },
        9 => QmgrMsg::PrepChangeReq {
            generation: generation(rng),
            ballot: ballot(rng),
            failed: nodes(rng),
            current: if rng.chance(50) { Some(a_view(rng)) } else { None },
        },
        10 => QmgrMsg::PrepChangeConf {
            generation: generation(rng),
            ballot: ballot(rng),
            accepted: if rng.chance(50) { Some((ballot(rng), change(rng))) } else { None },
            failed: nodes(rng),
        },
        11 => QmgrMsg::PrepChangeRef { generation: generation(rng), ballot: ballot(rng), promised: ballot(rng) },
        12 => QmgrMsg::AcceptChangeReq { generation: generation(rng), ballot: ballot(rng), change: change(rng) },
        13 => QmgrMsg::AcceptChangeConf { generation: generation(rng), ballot: ballot(rng) },
        14 => QmgrMsg::AcceptChangeRef { generation: generation(rng), ballot: ballot(rng), promised: ballot(rng) },
        15 => QmgrMsg::ChangeDecided { view: a_view(rng), change: change(rng) },
        16 => QmgrMsg::Catchup { view: a_view(rng) },
        17 => QmgrMsg::YouAreExcluded { generation: generation(rng), reason: String::new() },
        18 => QmgrMsg::Stop { generation: generation(rng), ballot: ballot(rng), reason: ShutdownReason::Requested },
        _ => QmgrMsg::Tick,
    }
}

#[test]
fn random_peer_messages_never_panic() {
    let mut rng = XorShift::new(42);
    for _ in 0..300 {
        let mut one = if rng.chance(50) { One::new() } else { One::new().formed() };
        for _ in 0..60 {
            let from_node = rng.range(0, 6) as NodeId;
            let from = if rng.chance(90) { qmgr_ref(from_node) } else { BlockRef::new(from_node, block::TC, 0) };
            let sig = if rng.chance(90) {
                q(random_msg(&mut rng))
            } else {
                let n = rng.range(0, 6) as NodeId;
                match rng.range(0, 3) {
                    0 => cluster(ClusterSignal::ConnectRep { node: n }),
                    1 => cluster(ClusterSignal::DisconnectRep { node: n }),
                    2 => cluster(ClusterSignal::ArbitConf {
                        generation: rng.range(0, 3),
                        granted: rng.chance(50),
                        reason: String::new(),
                    }),
                    _ => cluster(ClusterSignal::NfCompleteRep { node: n }),
                }
            };
            one.sched.deliver(env(from, ME, sig)).unwrap();
            one.sched.run_until_idle(1_000);
            // Time passes too (heartbeats, time-outs).
            if rng.chance(20) {
                let t = one.sched.now_ns() + rng.range(0, 500_000_000);
                one.sched.advance_to(t);
                one.sched.run_until_idle(1_000);
            }
            one.sched.take_remote();
        }
        // Still answers.
        assert!(!one.counters().is_empty());
    }
}
