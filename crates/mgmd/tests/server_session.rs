//! mgmd and the session library over real loopback sockets, in one process.

use norr_mgmd::config::ClusterConfig;
use norr_mgmd::protocol::{
    encode, ArbitReply, ArbitReq, ClusterView, FromMgmd, MgmCommand, MgmError, MgmReply, NodeCommand, NodeReport,
    NodeState, PeerRole, ToMgmd, MGM_MAGIC, MGM_PROTOCOL_VERSION,
};
use norr_mgmd::server::Mgmd;
use norr_mgmd::session::{fetch_config, run_command, MgmLink};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

const CONFIG: &str = r#"
[cluster]
name = "itest"
replicas = 2
[data]
lock_wait_timeout_ms = 700
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

const T: Duration = Duration::from_secs(10);

fn start() -> (Mgmd, String) {
    let c = ClusterConfig::parse(CONFIG, Path::new("/tmp")).unwrap();
    let m = Mgmd::start(c, None, Some("127.0.0.1:0".parse().unwrap())).unwrap();
    let addr = m.local_addr().to_string();
    (m, addr)
}

fn report(node: u16, state: NodeState) -> NodeReport {
    NodeReport {
        node_id: node,
        state,
        node_group: Some(0),
        primary_partitions: 2,
        partitions: 4,
        version: "test".into(),
        uptime_ms: 10,
        phases: vec![("copy rows".into(), 5)],
        president: node == 2,
        last_durable_gci: Some(3),
        files_complete: true,
        address: format!("127.0.0.1:22{node:02}"),
        refusal: None,
    }
}

/// A data node session that reports `state` and forwards commands to the receiver.
fn data_node(addr: &str, id: u16, state: NodeState) -> (MgmLink, Receiver<NodeCommand>) {
    let (link, w) = fetch_config(addr, PeerRole::DataNode, Some(id), "fake datad").unwrap();
    assert_eq!(w.node_id, id);
    let (tx, rx) = channel();
    let tx = std::sync::Mutex::new(tx);
    link.start_reporting(
        Duration::from_millis(50),
        Box::new(move || report(id, state.clone())),
        Box::new(move |c| tx.lock().unwrap().send(c).unwrap()),
    );
    (link, rx)
}

fn show(addr: &str) -> ClusterView {
    match run_command(addr, MgmCommand::Show, T).unwrap() {
        MgmReply::Show(v) => v,
        other => panic!("{other:?}"),
    }
}

/// Poll mgmd until `f` holds for its view (reports arrive asynchronously).
fn wait_view(addr: &str, what: &str, f: impl Fn(&ClusterView) -> bool) -> ClusterView {
    let deadline = Instant::now() + T;
    loop {
        let v = show(addr);
        if f(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}: {v:#?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn config_is_served_and_reports_show_up() {
    let (m, addr) = start();
    let (link, w) = fetch_config(&addr, PeerRole::DataNode, Some(2), "fake datad").unwrap();
    assert_eq!(w.config.name, "itest");
    assert_eq!(w.config.knobs.lock_wait_timeout_ms, 700);
    assert_eq!(w.digest, m.config_digest());
    assert_eq!(w.config.to_toml(), w.config_toml);
    assert_eq!(link.connected_to().as_deref(), Some(addr.as_str()));
    // A node with a file of its own checks it against the cluster's.
    let same = ClusterConfig::parse(CONFIG, Path::new("/tmp")).unwrap();
    w.check_same_as(&same).unwrap();
    let other = ClusterConfig::parse(&CONFIG.replace("= 700", "= 500"), Path::new("/tmp")).unwrap();
    let e = w.check_same_as(&other).unwrap_err().to_string();
    assert_eq!(
        e,
        "this node's configuration differs from the cluster's: data.lock_wait_timeout_ms: 500 here, 700 in the cluster"
    );
    // Before any report: connected, state unknown.
    let v = show(&addr);
    let n2 = v.nodes.iter().find(|n| n.id == 2).unwrap();
    assert!(n2.connected);
    assert_eq!(n2.state, None);
    link.start_reporting(Duration::from_millis(50), Box::new(|| report(2, NodeState::Started)), Box::new(|_| {}));
    let v = wait_view(&addr, "node 2 started", |v| {
        v.nodes.iter().any(|n| n.id == 2 && n.state == Some(NodeState::Started))
    });
    assert_eq!(v.president, Some(2));
    assert_eq!(v.name, "itest");
    assert!(!v.nodes.iter().find(|n| n.id == 3).unwrap().connected);
    drop(link);
    wait_view(&addr, "node 2 gone", |v| !v.nodes.iter().find(|n| n.id == 2).unwrap().connected);
}

#[test]
fn a_second_process_with_the_same_id_is_refused() {
    let (_m, addr) = start();
    let (_a, _) = data_node(&addr, 2, NodeState::Started);
    match fetch_config(&addr, PeerRole::DataNode, Some(2), "second") {
        Err(MgmError::Refused { reason, .. }) => assert!(reason.contains("node 2 is already connected"), "{reason}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("admitted twice"),
    }
    match fetch_config(&addr, PeerRole::DataNode, Some(9), "unknown") {
        Err(e) => assert!(e.to_string().contains("node 9 is not in the cluster configuration"), "{e}"),
        Ok(_) => panic!("admitted"),
    }
}

#[test]
fn commands_reach_the_node() {
    let (_m, addr) = start();
    let (_a, rx2) = data_node(&addr, 2, NodeState::Started);
    let (_b, rx3) = data_node(&addr, 3, NodeState::Stopped);
    wait_view(&addr, "both reported", |v| v.nodes.iter().filter(|n| n.state.is_some()).count() == 3);
    match run_command(&addr, MgmCommand::Stop { node: 2 }, T).unwrap() {
        MgmReply::Done { message } => assert_eq!(message, "node 2: stop sent (it was started)"),
        other => panic!("{other:?}"),
    }
    assert_eq!(rx2.recv_timeout(T).unwrap(), NodeCommand::Stop);
    match run_command(&addr, MgmCommand::Stop { node: 3 }, T).unwrap() {
        MgmReply::Error { message } => assert_eq!(message, "node 3 is already stopped"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(run_command(&addr, MgmCommand::Start { node: 3 }, T).unwrap(), MgmReply::Done { .. }));
    assert_eq!(rx3.recv_timeout(T).unwrap(), NodeCommand::Start);
    assert!(matches!(run_command(&addr, MgmCommand::Restart { node: 2 }, T).unwrap(), MgmReply::Done { .. }));
    assert_eq!(rx2.recv_timeout(T).unwrap(), NodeCommand::Restart);
    match run_command(&addr, MgmCommand::StopAll, T).unwrap() {
        MgmReply::Done { message } => assert_eq!(message, "shutdown sent to data nodes 2, 3"),
        other => panic!("{other:?}"),
    }
    assert_eq!(rx2.recv_timeout(T).unwrap(), NodeCommand::Shutdown);
    assert_eq!(rx3.recv_timeout(T).unwrap(), NodeCommand::Shutdown);
    assert!(rx2.try_recv().is_err(), "each command once");
}

#[test]
fn commands_before_start_reporting_are_delivered_later() {
    let (_m, addr) = start();
    let (link, _) = fetch_config(&addr, PeerRole::DataNode, Some(3), "slow starter").unwrap();
    assert!(matches!(run_command(&addr, MgmCommand::Restart { node: 3 }, T).unwrap(), MgmReply::Done { .. }));
    // Queued by the link thread if it arrived first, else handed over
    // directly: either way it is delivered exactly once.
    let (tx, rx) = channel();
    let deadline = Instant::now() + T;
    let tx = std::sync::Mutex::new(tx);
    link.start_reporting(
        Duration::from_millis(50),
        Box::new(|| report(3, NodeState::Started)),
        Box::new(move |c| tx.lock().unwrap().send(c).unwrap()),
    );
    assert_eq!(rx.recv_timeout(deadline.saturating_duration_since(Instant::now())).unwrap(), NodeCommand::Restart);
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err(), "delivered once");
}

#[test]
fn api_ids_are_allocated_and_freed() {
    let (_m, addr) = start();
    let (a, wa) = fetch_config(&addr, PeerRole::Api, None, "client").unwrap();
    let (b, wb) = fetch_config(&addr, PeerRole::SqlNode, None, "sqld").unwrap();
    assert_eq!((wa.node_id, wb.node_id), (100, 101));
    assert_eq!(a.node_id(), 100);
    drop(a);
    // Freed once mgmd sees the session close.
    let deadline = Instant::now() + T;
    loop {
        let (c, wc) = fetch_config(&addr, PeerRole::Api, None, "client 2").unwrap();
        if wc.node_id == 100 {
            break;
        }
        assert!(wc.node_id >= 102, "101 is still taken, got {}", wc.node_id);
        drop(c);
        assert!(Instant::now() < deadline, "id 100 never freed");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(b);
}

#[test]
fn arbitration_over_the_wire() {
    let (_m, addr) = start();
    let (a, _) = data_node(&addr, 2, NodeState::Started);
    let (b, _) = data_node(&addr, 3, NodeState::Started);
    let won = a.arbitrate(ArbitReq { requester: 2, generation: 7, survivors: vec![2], failed: vec![3] }, T).unwrap();
    assert_eq!(won, ArbitReply::Granted { generation: 7 });
    let lost = b.arbitrate(ArbitReq { requester: 3, generation: 7, survivors: vec![3], failed: vec![2] }, T).unwrap();
    assert!(
        matches!(&lost, ArbitReply::Refused { generation: 7, reason } if reason.contains("won arbitration")),
        "{lost:?}"
    );
}

#[test]
fn sessions_survive_an_mgmd_restart_and_arbitration_fails_fast_without_it() {
    let (m, addr) = start();
    let sock: SocketAddr = addr.parse().unwrap();
    let (a, rx) = data_node(&addr, 2, NodeState::Started);
    wait_view(&addr, "node 2", |v| v.nodes.iter().any(|n| n.id == 2 && n.state.is_some()));
    m.stop();
    // No mgmd: arbitration is an error within its time-out, not a hang.
    let t0 = Instant::now();
    let r = a.arbitrate(
        ArbitReq { requester: 2, generation: 1, survivors: vec![2], failed: vec![3] },
        Duration::from_millis(300),
    );
    assert!(matches!(r, Err(MgmError::NotConnected)), "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(3));
    // mgmd back on the same port: the session reconnects by itself and reports again.
    let c = ClusterConfig::parse(CONFIG, Path::new("/tmp")).unwrap();
    let _m2 = Mgmd::start(c, None, Some(sock)).unwrap();
    wait_view(&addr, "node 2 back", |v| v.nodes.iter().any(|n| n.id == 2 && n.connected && n.state.is_some()));
    assert!(matches!(run_command(&addr, MgmCommand::Stop { node: 2 }, T).unwrap(), MgmReply::Done { .. }));
    assert_eq!(rx.recv_timeout(T).unwrap(), NodeCommand::Stop);
}

/// Raw frames: garbage and protocol violations cost the sender its
/// connection, never mgmd its life.
#[test]
fn malformed_peers_are_disconnected() {
    let (_m, addr) = start();
    let read_frame = |s: &mut TcpStream| -> Option<FromMgmd> {
        let mut hdr = [0u8; 8];
        s.read_exact(&mut hdr).ok()?;
        let len = u32::from_le_bytes(hdr[0..4].try_into().unwrap()) as usize;
        let mut p = vec![0u8; len];
        s.read_exact(&mut p).ok()?;
        norr_mgmd::protocol::decode(&p).ok()
    };
    let closed = |s: &mut TcpStream| {
        s.set_read_timeout(Some(T)).unwrap();
        let mut b = [0u8; 1];
        matches!(s.read(&mut b), Ok(0) | Err(_))
    };
    // Not a frame at all (a huge length).
    let mut s = TcpStream::connect(&addr).unwrap();
    s.write_all(&[0xff; 64]).unwrap();
    assert!(closed(&mut s));
    // A frame with a bad checksum.
    let mut s = TcpStream::connect(&addr).unwrap();
    let mut w = Vec::new();
    encode(&ToMgmd::Heartbeat, &mut w);
    w[5] ^= 0xff;
    s.write_all(&w).unwrap();
    assert!(closed(&mut s));
    // A valid message that is not a hello first.
    let mut s = TcpStream::connect(&addr).unwrap();
    let mut w = Vec::new();
    encode(&ToMgmd::Heartbeat, &mut w);
    s.write_all(&w).unwrap();
    assert!(closed(&mut s));
    // A foreign magic: refused with a reason.
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(T)).unwrap();
    let mut w = Vec::new();
    let hello = ToMgmd::Hello {
        magic: MGM_MAGIC ^ 1,
        version: MGM_PROTOCOL_VERSION,
        role: PeerRole::Mgm,
        node_id: None,
        name: "x".into(),
    };
    encode(&hello, &mut w);
    s.write_all(&w).unwrap();
    assert!(matches!(read_frame(&mut s), Some(FromMgmd::Refused { reason }) if reason.contains("bad magic")));
    // A report for another node on a data node's session.
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(T)).unwrap();
    let mut w = Vec::new();
    let hello = ToMgmd::Hello {
        magic: MGM_MAGIC,
        version: MGM_PROTOCOL_VERSION,
        role: PeerRole::DataNode,
        node_id: Some(3),
        name: "x".into(),
    };
    encode(&hello, &mut w);
    encode(&ToMgmd::Report(report(2, NodeState::Started)), &mut w);
    s.write_all(&w).unwrap();
    assert!(matches!(read_frame(&mut s), Some(FromMgmd::Welcome { node_id: 3, .. })));
    assert!(closed(&mut s));
    // mgmd still serves, and node 3's id was freed with its session.
    let (_l, w) = fetch_config(&addr, PeerRole::DataNode, Some(3), "after").unwrap();
    assert_eq!(w.node_id, 3);
}
