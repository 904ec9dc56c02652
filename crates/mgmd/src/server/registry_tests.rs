use super::*;
use std::path::Path;

const CONFIG: &str = r#"
[cluster]
name = "t"
replicas = 2
[[node]]
id = 1
kind = "mgmd"
[[node]]
id = 2
kind = "data"
port = 2202
[[node]]
id = 3
kind = "data"
port = 2203
"#;

fn registry(extra: &str) -> (Registry, Instant) {
    let c = ClusterConfig::parse(&format!("{CONFIG}{extra}"), Path::new("/tmp")).unwrap();
    let now = Instant::now();
    let mut ips = BTreeMap::new();
    for n in c.api_slots() {
        if let Ok(ip) = n.host.parse::<IpAddr>() {
            ips.insert(n.id, vec![ip]);
        }
    }
    (Registry::new(c, 1, ips, now), now)
}

fn peer(last: u8, port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, last], port))
}

fn report(node: NodeId, state: NodeState) -> NodeReport {
    NodeReport {
        node_id: node,
        state,
        node_group: Some(0),
        primary_partitions: 1,
        partitions: 2,
        version: "9.9".into(),
        uptime_ms: 1000,
        phases: vec![("copy rows".into(), 12)],
        president: node == 2,
        last_durable_gci: Some(4),
        files_complete: true,
        address: format!("127.0.0.1:22{node:02}"),
        refusal: None,
    }
}

const S: Duration = Duration::from_secs(1);

#[test]
fn versions_are_checked() {
    assert!(check_version(MGM_MAGIC, MGM_PROTOCOL_VERSION).is_ok());
    assert!(check_version(0x4E4F_5252, MGM_PROTOCOL_VERSION).unwrap_err().contains("bad magic"));
    let e = check_version(MGM_MAGIC, 99).unwrap_err();
    assert!(e.contains("version 99") && e.contains(&format!("speaks version {MGM_PROTOCOL_VERSION}")), "{e}");
}

#[test]
fn data_nodes_are_admitted_by_their_configured_id_once() {
    let (mut r, t) = registry("");
    let a = r.admit(PeerRole::DataNode, Some(2), peer(1, 5000), t).unwrap();
    assert_eq!((a.node_id, a.evicted), (2, None));
    let e = r.admit(PeerRole::DataNode, Some(2), peer(1, 5001), t + S).unwrap_err();
    assert!(e.contains("node 2 is already connected from 127.0.0.1:5000"), "{e}");
    assert!(e.contains("another process running with node id 2"), "{e}");
    let e = r.admit(PeerRole::DataNode, Some(7), peer(1, 5002), t).unwrap_err();
    assert_eq!(e, "node 7 is not in the cluster configuration (data nodes: 2, 3)");
    let e = r.admit(PeerRole::DataNode, Some(1), peer(1, 5002), t).unwrap_err();
    assert!(e.contains("node 1 is configured as a mgmd node, not a data node"), "{e}");
    let e = r.admit(PeerRole::DataNode, None, peer(1, 5002), t).unwrap_err();
    assert!(e.contains("--node-id"), "{e}");
    // Once closed, the id is free again.
    r.closed(2, a.sid);
    let b = r.admit(PeerRole::DataNode, Some(2), peer(1, 5003), t + S).unwrap();
    assert_ne!(b.sid, a.sid);
}

#[test]
fn a_stale_session_is_replaced_and_its_late_close_is_ignored() {
    let (mut r, t) = registry("");
    let a = r.admit(PeerRole::DataNode, Some(3), peer(1, 5000), t).unwrap();
    // Heard from at t+2s: still live at t+4s.
    r.heard(3, a.sid, t + 2 * S);
    assert!(r.admit(PeerRole::DataNode, Some(3), peer(1, 5001), t + 4 * S).is_err());
    // Silent for more than SESSION_STALE_AFTER: replaced.
    let b = r.admit(PeerRole::DataNode, Some(3), peer(1, 5001), t + 6 * S).unwrap();
    assert_eq!(b.evicted, Some(a.sid));
    // The old connection's thread ends later: it must not drop the new session.
    r.closed(3, a.sid);
    assert!(r.admit(PeerRole::DataNode, Some(3), peer(1, 5002), t + 6 * S).is_err());
    assert!(r.report(3, a.sid, report(3, NodeState::Started), t + 6 * S).is_err());
    assert!(r.report(3, b.sid, report(3, NodeState::Started), t + 6 * S).is_ok());
}

#[test]
fn dynamic_api_ids_are_lowest_free_and_freed_on_close() {
    let (mut r, t) = registry("");
    let a = r.admit(PeerRole::Api, None, peer(1, 1), t).unwrap();
    let b = r.admit(PeerRole::SqlNode, None, peer(1, 2), t).unwrap();
    let c = r.admit(PeerRole::Api, None, peer(1, 3), t).unwrap();
    assert_eq!((a.node_id, b.node_id, c.node_id), (100, 101, 102));
    r.closed(101, b.sid);
    assert_eq!(r.admit(PeerRole::Api, None, peer(1, 4), t).unwrap().node_id, 101);
    // A wanted id: granted when free, refused when taken or a data node id.
    assert_eq!(r.admit(PeerRole::Api, Some(500), peer(1, 5), t).unwrap().node_id, 500);
    assert!(r.admit(PeerRole::Api, Some(500), peer(1, 6), t).unwrap_err().contains("already connected"));
    assert!(r.admit(PeerRole::Api, Some(5), peer(1, 6), t).unwrap_err().contains("for data and mgmd nodes"));
    // Mgm clients hold no id.
    assert_eq!(r.admit(PeerRole::Mgm, None, peer(1, 7), t).unwrap().node_id, 0);
    let v = r.view(t);
    let kinds: Vec<(NodeId, NodeKind)> = v.nodes.iter().filter(|n| n.id >= 100).map(|n| (n.id, n.kind)).collect();
    assert_eq!(kinds, vec![(100, NodeKind::Api), (101, NodeKind::Api), (102, NodeKind::Api), (500, NodeKind::Api)]);
}

#[test]
fn configured_slots_are_used_with_their_host_restriction() {
    let (mut r, t) = registry(
        "[[node]]\nid = 100\nkind = \"sql\"\nhost = \"127.0.0.9\"\n[[node]]\nid = 101\nkind = \"sql\"\n[[node]]\nid = 110\nkind = \"api\"\n",
    );
    // The first free slot whose host matches.
    assert_eq!(r.admit(PeerRole::SqlNode, None, peer(1, 1), t).unwrap().node_id, 101);
    assert_eq!(r.admit(PeerRole::SqlNode, None, peer(9, 1), t).unwrap().node_id, 100);
    // Sql slots full: a SQL node may take an api slot.
    assert_eq!(r.admit(PeerRole::SqlNode, None, peer(1, 2), t).unwrap().node_id, 110);
    let e = r.admit(PeerRole::SqlNode, None, peer(1, 3), t).unwrap_err();
    assert!(e.contains("no free sql or api slot") && e.contains("101: taken by 127.0.0.1:1"), "{e}");
    let e = r.admit(PeerRole::Api, None, peer(1, 3), t).unwrap_err();
    assert!(e.contains("no free api slot"), "{e}");

    let (mut r, t) = registry("[[node]]\nid = 100\nkind = \"sql\"\nhost = \"127.0.0.9\"\n");
    let e = r.admit(PeerRole::SqlNode, Some(100), peer(1, 1), t).unwrap_err();
    assert_eq!(e, "node 100 is reserved for host 127.0.0.9, not 127.0.0.1");
    let e = r.admit(PeerRole::SqlNode, Some(120), peer(1, 1), t).unwrap_err();
    assert!(e.contains("node 120 is not a sql or api slot"), "{e}");
    let e = r.admit(PeerRole::SqlNode, None, peer(1, 1), t).unwrap_err();
    assert!(e.contains("100: only for host 127.0.0.9"), "{e}");
    // API clients have no api slot here: they get dynamic ids past the configured ones.
    assert_eq!(r.admit(PeerRole::Api, None, peer(1, 1), t).unwrap().node_id, 101);
    assert!(r
        .admit(PeerRole::Api, Some(100), peer(1, 1), t)
        .unwrap_err()
        .contains("a sql slot, which API clients cannot take"));
}

#[test]
fn reports_show_in_the_view_until_the_node_goes_quiet() {
    let (mut r, t) = registry("");
    let a = r.admit(PeerRole::DataNode, Some(2), peer(1, 9000), t).unwrap();
    r.report(2, a.sid, report(2, NodeState::Started), t).unwrap();
    // A report for another node is refused (the server disconnects).
    assert!(r.report(2, a.sid, report(3, NodeState::Started), t).unwrap_err().contains("report for node 3"));
    let v = r.view(t + S);
    assert_eq!(v.name, "t");
    assert_eq!(v.president, Some(2));
    assert_eq!(v.mgmd_node_id, 1);
    let n2 = v.nodes.iter().find(|n| n.id == 2).unwrap();
    assert!(n2.connected);
    assert_eq!(n2.state, Some(NodeState::Started));
    assert_eq!((n2.primary_partitions, n2.partitions, n2.last_durable_gci), (1, 2, Some(4)));
    assert!(n2.files_complete);
    assert_eq!(n2.uptime_ms, 2000, "reported 1000 ms, one second ago");
    assert_eq!(n2.address, "127.0.0.1:2202", "the configured address");
    assert_eq!(n2.peer.as_deref(), Some("127.0.0.1:9000"));
    let n3 = v.nodes.iter().find(|n| n.id == 3).unwrap();
    assert!(!n3.connected);
    assert_eq!((n3.state.as_ref(), n3.node_group), (None, Some(0)));
    let m = v.nodes.iter().find(|n| n.id == 1).unwrap();
    assert!(m.connected && m.kind == NodeKind::Mgmd && m.address == "127.0.0.1:1186");

    // Quiet for over 3 s: not connected, no president; the last report stays.
    let v = r.view(t + 4 * S);
    let n2 = v.nodes.iter().find(|n| n.id == 2).unwrap();
    assert!(!n2.connected);
    assert_eq!(n2.state, Some(NodeState::Started));
    assert_eq!(v.president, None);
    // Closed: the same.
    r.heard(2, a.sid, t + 4 * S);
    assert!(r.view(t + 4 * S).nodes.iter().find(|n| n.id == 2).unwrap().connected);
    r.closed(2, a.sid);
    assert!(!r.view(t + 4 * S).nodes.iter().find(|n| n.id == 2).unwrap().connected);
}

/// A data node that starts again (a new session) is not shown with its
/// previous life's report: it was shown "started" while it still read its
/// files, and a test waiting for "started" went on too early.
#[test]
fn a_data_node_that_connects_again_is_not_shown_with_its_old_report() {
    let (mut r, t) = registry("");
    let a = r.admit(PeerRole::DataNode, Some(3), peer(1, 9000), t).unwrap();
    r.report(3, a.sid, report(3, NodeState::Started), t).unwrap();
    r.closed(3, a.sid);
    let down = r.view(t);
    let n3 = down.nodes.iter().find(|n| n.id == 3).unwrap();
    assert_eq!(
        (n3.connected, n3.state.clone()),
        (false, Some(NodeState::Started)),
        "the last report stays while it is down"
    );
    let b = r.admit(PeerRole::DataNode, Some(3), peer(1, 9001), t + S).unwrap();
    let n3 = r.view(t + S).nodes.into_iter().find(|n| n.id == 3).unwrap();
    assert!(n3.connected);
    assert_eq!(n3.state, None, "the new life has not reported yet");
    r.report(3, b.sid, report(3, NodeState::Started), t + S).unwrap();
    assert_eq!(r.view(t + S).nodes.into_iter().find(|n| n.id == 3).unwrap().state, Some(NodeState::Started));
}

#[test]
fn commands_go_to_connected_data_nodes_only() {
    let (mut r, t) = registry("");
    let err = |routed: Routed| match routed {
        Routed::Reply(MgmReply::Error { message }) => message,
        other => panic!("{other:?}"),
    };
    let e = err(r.route(&MgmCommand::Stop { node: 3 }, t));
    assert!(e.starts_with("node 3 is not connected to mgmd"), "{e}");
    let e = err(r.route(&MgmCommand::Stop { node: 9 }, t));
    assert_eq!(e, "node 9 is not in the cluster configuration (data nodes: 2, 3)");
    let e = err(r.route(&MgmCommand::Restart { node: 1 }, t));
    assert!(e.starts_with("node 1 is a mgmd node: restart takes a data node"), "{e}");
    assert_eq!(err(r.route(&MgmCommand::StopAll, t)), "no data node is connected: nothing to stop");

    let a = r.admit(PeerRole::DataNode, Some(2), peer(1, 1), t).unwrap();
    r.report(2, a.sid, report(2, NodeState::Started), t).unwrap();
    assert_eq!(
        r.route(&MgmCommand::Stop { node: 2 }, t),
        Routed::Push {
            targets: vec![(2, a.sid, NodeCommand::Stop)],
            message: "node 2: stop sent (it was started)".into()
        }
    );
    assert_eq!(err(r.route(&MgmCommand::Start { node: 2 }, t)), "node 2 is already started");
    r.report(2, a.sid, report(2, NodeState::Stopped), t).unwrap();
    assert_eq!(err(r.route(&MgmCommand::Stop { node: 2 }, t)), "node 2 is already stopped");
    assert!(matches!(r.route(&MgmCommand::Start { node: 2 }, t), Routed::Push { .. }));
    assert_eq!(
        r.route(&MgmCommand::StopAll, t),
        Routed::Push {
            targets: vec![(2, a.sid, NodeCommand::Shutdown)],
            message: "shutdown sent to data nodes 2; not connected: 3".into()
        }
    );
    assert!(matches!(r.route(&MgmCommand::Show, t), Routed::Reply(MgmReply::Show(_))));
}

#[test]
fn arbitration_only_from_the_data_node_itself() {
    let (mut r, _) = registry("");
    let req = ArbitReq { requester: 2, generation: 1, survivors: vec![2], failed: vec![3] };
    let refused = |a: ArbitReply| match a {
        ArbitReply::Refused { reason, generation: 1 } => reason,
        other => panic!("{other:?}"),
    };
    assert!(refused(r.arbitrate(100, PeerRole::Api, &req, Instant::now())).contains("only data nodes"));
    assert!(
        refused(r.arbitrate(3, PeerRole::DataNode, &req, Instant::now())).contains("node 3 asked on behalf of node 2")
    );
    let bogus = ArbitReq { failed: vec![7], ..req.clone() };
    assert!(refused(r.arbitrate(2, PeerRole::DataNode, &bogus, Instant::now())).contains("node 7 is not a data node"));
    assert_eq!(r.arbitrate(2, PeerRole::DataNode, &req, Instant::now()), ArbitReply::Granted { generation: 1 });
    let other = ArbitReq { requester: 3, generation: 1, survivors: vec![3], failed: vec![2] };
    assert!(refused(r.arbitrate(3, PeerRole::DataNode, &other, Instant::now())).contains("won arbitration"));
}

#[test]
fn only_the_first_mgmd_arbitrates() {
    let c = ClusterConfig::parse(&format!("{CONFIG}[[node]]\nid = 4\nkind = \"mgmd\"\nport = 1187\n"), Path::new("/"))
        .unwrap();
    let mut r = Registry::new(c, 4, BTreeMap::new(), Instant::now());
    let req = ArbitReq { requester: 2, generation: 1, survivors: vec![2], failed: vec![3] };
    assert!(
        matches!(r.arbitrate(2, PeerRole::DataNode, &req, Instant::now()), ArbitReply::Refused { reason, .. } if reason.contains("not the arbitrator"))
    );
}

fn arbit(requester: NodeId, generation: u64, survivors: &[NodeId], failed: &[NodeId]) -> ArbitReq {
    ArbitReq { requester, generation, survivors: survivors.to_vec(), failed: failed.to_vec() }
}

/// After a restart of the whole cluster QMGR's generations start over: the
/// record of the cluster's earlier life must not refuse them (with 2 data
/// nodes, the first node failure after a system restart shut the survivor
/// down: "generation 2 is older than the last arbitration (93)").
#[test]
fn a_cluster_that_restarted_as_a_whole_is_arbitrated_again() {
    let (mut r, t) = registry("");
    let granted = |a: ArbitReply| matches!(a, ArbitReply::Granted { .. });
    // The first life reached generation 9, with a failure of node 3.
    assert!(granted(r.arbitrate(2, PeerRole::DataNode, &arbit(2, 1, &[2, 3], &[]), t)));
    assert!(granted(r.arbitrate(2, PeerRole::DataNode, &arbit(2, 9, &[2], &[3]), t)));
    // Same life: an older generation is refused (a node that missed a change).
    assert!(!granted(r.arbitrate(3, PeerRole::DataNode, &arbit(3, 5, &[3], &[2]), t)));
    // Both nodes restart and form the cluster again: generation 1 with every
    // data node starts a new life; its first failure is arbitrated.
    assert!(granted(r.arbitrate(2, PeerRole::DataNode, &arbit(2, 1, &[2, 3], &[]), t)));
    assert!(granted(r.arbitrate(2, PeerRole::DataNode, &arbit(2, 2, &[2], &[3]), t)));
    // And the other half of that split still loses.
    assert!(!granted(r.arbitrate(3, PeerRole::DataNode, &arbit(3, 2, &[3], &[2]), t)));
}

/// A partial start (generation 0) after an earlier life is allowed only if
/// no data node outside it is connected and reports itself started: that
/// node could be a part of the earlier life still running.
#[test]
fn a_partial_start_is_refused_while_a_node_of_the_earlier_life_runs() {
    let (mut r, t) = registry("");
    let granted = |a: ArbitReply| matches!(a, ArbitReply::Granted { .. });
    assert!(granted(r.arbitrate(2, PeerRole::DataNode, &arbit(2, 4, &[2], &[3]), t)));
    let a = r.admit(PeerRole::DataNode, Some(2), peer(1, 5000), t).unwrap();
    r.report(2, a.sid, report(2, NodeState::Started), t).unwrap();
    let partial = arbit(3, 0, &[3], &[2]);
    match r.arbitrate(3, PeerRole::DataNode, &partial, t) {
        ArbitReply::Refused { reason, .. } => assert!(reason.contains("data node(s) 2 still run"), "{reason}"),
        other => panic!("{other:?}"),
    }
    // Node 2 gone (its session closed): the partial start is a new life.
    r.closed(2, a.sid);
    assert!(granted(r.arbitrate(3, PeerRole::DataNode, &partial, t)));
    assert!(granted(r.arbitrate(3, PeerRole::DataNode, &arbit(3, 1, &[3], &[]), t)));
}
