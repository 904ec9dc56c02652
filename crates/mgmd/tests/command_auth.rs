//! mgmd with a cluster secret: commands that change the cluster need the
//! proof of it (`norr_mgmd::command_auth`), over real loopback sockets.

use norr_mgmd::config::{ClusterConfig, ClusterSecret};
use norr_mgmd::protocol::{
    decode, encode, FromMgmd, MgmCommand, MgmReply, NodeCommand, NodeReport, NodeState, PeerRole, ToMgmd, MGM_MAGIC,
    MGM_PROTOCOL_VERSION,
};
use norr_mgmd::server::Mgmd;
use norr_mgmd::session::{fetch_config, fetch_config_with, run_command, run_command_with, MgmLink};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

const SECRET: &str = "0123456789abcdef0123456789abcdef0123456789";

const CONFIG: &str = r#"
[cluster]
name = "authtest"
replicas = 1
secret = "0123456789abcdef0123456789abcdef0123456789"
[[node]]
id = 1
kind = "mgmd"
[[node]]
id = 2
kind = "data"
port = 2202
"#;

const T: Duration = Duration::from_secs(10);

fn start(config: &str) -> (Mgmd, String) {
    let c = ClusterConfig::parse(config, Path::new("/tmp")).unwrap();
    let m = Mgmd::start(c, None, Some("127.0.0.1:0".parse().unwrap())).unwrap();
    let addr = m.local_addr().to_string();
    (m, addr)
}

fn data_node(addr: &str) -> (MgmLink, Receiver<NodeCommand>) {
    // A node of a cluster with a secret proves it to open its session.
    let secret = ClusterSecret::new(SECRET).unwrap();
    let (link, _) = fetch_config_with(addr, PeerRole::DataNode, Some(2), "fake datad", Some(secret)).unwrap();
    let (tx, rx) = channel();
    let tx = std::sync::Mutex::new(tx);
    link.start_reporting(
        Duration::from_millis(50),
        Box::new(|| NodeReport {
            node_id: 2,
            state: NodeState::Started,
            node_group: Some(0),
            primary_partitions: 1,
            partitions: 1,
            version: "test".into(),
            uptime_ms: 10,
            phases: vec![],
            president: true,
            last_durable_gci: None,
            files_complete: true,
            address: "127.0.0.1:2202".into(),
            refusal: None,
        }),
        Box::new(move |c| tx.lock().unwrap().send(c).unwrap()),
    );
    (link, rx)
}

/// Wait until node 2's report is in (show is open without the secret).
fn wait_reported(addr: &str) {
    let deadline = std::time::Instant::now() + T;
    loop {
        if let MgmReply::Show(v) = run_command(addr, MgmCommand::Show, T).unwrap() {
            if v.nodes.iter().any(|n| n.id == 2 && n.state == Some(NodeState::Started)) {
                return;
            }
        }
        assert!(std::time::Instant::now() < deadline, "node 2 never reported");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn error_of(r: MgmReply) -> String {
    match r {
        MgmReply::Error { message } => message,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn commands_need_the_secret_show_does_not() {
    let (m, addr) = start(CONFIG);
    assert!(m.commands_need_secret());
    let (_link, rx) = data_node(&addr);
    wait_reported(&addr);
    let secret = ClusterSecret::new(SECRET).unwrap();
    let other = ClusterSecret::generate().unwrap();

    // Without the secret: every command that changes the cluster is refused
    // with a reason that says how to give it; nothing reaches the node.
    for cmd in [MgmCommand::Stop { node: 2 }, MgmCommand::Restart { node: 2 }, MgmCommand::StopAll] {
        let e = error_of(run_command(&addr, cmd.clone(), T).unwrap());
        assert!(e.contains("mgmd refused") && e.contains("--secret-file"), "{cmd:?}: {e}");
    }
    // A wrong secret: refused as such.
    let e = error_of(run_command_with(&addr, MgmCommand::StopAll, T, Some(&other)).unwrap());
    assert!(e.contains("wrong cluster secret"), "{e}");
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err(), "a refused command reached the node");

    // Show and status are signed by nobody and answered.
    assert!(matches!(run_command_with(&addr, MgmCommand::Status, T, None).unwrap(), MgmReply::Show(_)));
    // With the secret: done, and the node gets it.
    match run_command_with(&addr, MgmCommand::Stop { node: 2 }, T, Some(&secret)).unwrap() {
        MgmReply::Done { message } => assert_eq!(message, "node 2: stop sent (it was started)"),
        other => panic!("{other:?}"),
    }
    assert_eq!(rx.recv_timeout(T).unwrap(), NodeCommand::Stop);
    // A show with the secret given is not signed (and works the same).
    assert!(matches!(run_command_with(&addr, MgmCommand::Show, T, Some(&secret)).unwrap(), MgmReply::Show(_)));
}

#[test]
fn without_a_secret_commands_stay_open_and_signed_ones_work_too() {
    let open = CONFIG.replace(&format!("secret = \"{SECRET}\""), "");
    let (m, addr) = start(&open);
    assert!(!m.commands_need_secret());
    let (_link, rx) = data_node(&addr);
    wait_reported(&addr);
    assert!(matches!(run_command(&addr, MgmCommand::Stop { node: 2 }, T).unwrap(), MgmReply::Done { .. }));
    assert_eq!(rx.recv_timeout(T).unwrap(), NodeCommand::Stop);
    let any = ClusterSecret::generate().unwrap();
    // (The fake node reports itself started whatever it is told.)
    let signed = run_command_with(&addr, MgmCommand::Restart { node: 2 }, T, Some(&any)).unwrap();
    assert!(matches!(signed, MgmReply::Done { .. }), "{signed:?}");
    assert_eq!(rx.recv_timeout(T).unwrap(), NodeCommand::Restart);
}

#[test]
fn api_auth_secret_without_the_secret_does_not_start() {
    let no_secret = CONFIG.replace(&format!("secret = \"{SECRET}\""), "api_auth = \"secret\"");
    let c = ClusterConfig::parse(&no_secret, Path::new("/tmp")).unwrap();
    let e = Mgmd::start(c, None, Some("127.0.0.1:0".parse().unwrap())).err().expect("started without a secret");
    let e = e.to_string();
    assert!(e.contains("api_auth = \"secret\"") && e.contains("--secret-file"), "{e}");
}

struct Raw(TcpStream);

impl Raw {
    /// A management connection past its Welcome.
    fn connect(addr: &str) -> Raw {
        let mut r = Raw(TcpStream::connect(addr).unwrap());
        r.0.set_read_timeout(Some(T)).unwrap();
        r.send(&ToMgmd::Hello {
            magic: MGM_MAGIC,
            version: MGM_PROTOCOL_VERSION,
            role: PeerRole::Mgm,
            node_id: None,
            name: "raw".into(),
        });
        assert!(matches!(r.recv(), Some(FromMgmd::Welcome { .. })));
        r
    }
    fn send(&mut self, m: &ToMgmd) {
        let mut w = Vec::new();
        encode(m, &mut w);
        self.0.write_all(&w).unwrap();
    }
    fn recv(&mut self) -> Option<FromMgmd> {
        let mut hdr = [0u8; 8];
        self.0.read_exact(&mut hdr).ok()?;
        let len = u32::from_le_bytes(hdr[0..4].try_into().unwrap()) as usize;
        let mut p = vec![0u8; len];
        self.0.read_exact(&mut p).ok()?;
        decode(&p).ok()
    }
    fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.0.read(&mut b), Ok(0) | Err(_))
    }
    fn reply_error(&mut self) -> String {
        match self.recv() {
            Some(FromMgmd::CommandReply { reply: MgmReply::Error { message }, .. }) => message,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
}

/// Forged, replayed, unasked-for and damaged proofs: refused (and the
/// connection closed), never a panic; mgmd serves on.
#[test]
fn bad_proofs_and_frames_are_refused_and_mgmd_serves_on() {
    let (_m, addr) = start(CONFIG);
    let (_link, rx) = data_node(&addr);
    wait_reported(&addr);
    let secret = ClusterSecret::new(SECRET).unwrap();
    let stop = MgmCommand::Stop { node: 2 };

    // A signed command that answers no challenge.
    let mut r = Raw::connect(&addr);
    r.send(&ToMgmd::SignedCommand { req_id: 1, cmd: stop.clone(), client_nonce: [0; 32], proof: [0; 32] });
    assert!(r.reply_error().contains("answers no challenge"));
    assert!(r.closed(), "closed after a refused proof");

    // A right proof, then the same proof again on a new challenge.
    let mut r = Raw::connect(&addr);
    r.send(&ToMgmd::CommandChallengeReq { req_id: 5 });
    let Some(FromMgmd::CommandChallenge { req_id: 5, nonce, mgmd_node: 1 }) = r.recv() else { panic!("no challenge") };
    let signed = norr_mgmd::command_auth::sign(&secret, &nonce, 1, 5, stop.clone()).unwrap();
    r.send(&signed);
    assert!(matches!(r.recv(), Some(FromMgmd::CommandReply { req_id: 5, reply: MgmReply::Done { .. } })));
    assert_eq!(rx.recv_timeout(T).unwrap(), NodeCommand::Stop);
    r.send(&ToMgmd::CommandChallengeReq { req_id: 5 });
    assert!(matches!(r.recv(), Some(FromMgmd::CommandChallenge { .. })));
    r.send(&signed);
    assert!(r.reply_error().contains("wrong cluster secret"), "a replayed proof");
    assert!(r.closed());

    // The proof of `start 2` sent with `stop --all`.
    let mut r = Raw::connect(&addr);
    r.send(&ToMgmd::CommandChallengeReq { req_id: 1 });
    let Some(FromMgmd::CommandChallenge { nonce, .. }) = r.recv() else { panic!("no challenge") };
    let ToMgmd::SignedCommand { client_nonce, proof, .. } =
        norr_mgmd::command_auth::sign(&secret, &nonce, 1, 1, MgmCommand::Start { node: 2 }).unwrap()
    else {
        unreachable!()
    };
    r.send(&ToMgmd::SignedCommand { req_id: 1, cmd: MgmCommand::StopAll, client_nonce, proof });
    assert!(r.reply_error().contains("wrong cluster secret"));

    // Damaged frames of the new messages: cut short or with trailing
    // bytes inside a valid frame; each closes its connection.
    let full = postcard::to_stdvec(&signed).unwrap();
    for bad in [full[..full.len() - 1].to_vec(), [full.clone(), vec![0]].concat(), vec![5, 0xff, 0xff]] {
        let mut r = Raw::connect(&addr);
        let mut w = Vec::new();
        norr_transport::frame::encode_frame(&bad, &mut w);
        r.0.write_all(&w).unwrap();
        assert!(r.closed(), "{bad:?}");
    }
    assert!(rx.try_recv().is_err(), "no refused command reached the node");
    // mgmd still serves, and a proper command still runs.
    match run_command_with(&addr, MgmCommand::Restart { node: 2 }, T, Some(&secret)).unwrap() {
        MgmReply::Done { .. } => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(rx.recv_timeout(T).unwrap(), NodeCommand::Restart);
}

/// The Hello of a data node, SQL node or API client is challenged: without
/// the secret, with a wrong one, or with a proof made for another node id
/// it is refused before any node id is reserved (the real node then gets
/// its id); the right secret opens the session, also after mgmd restarts
/// (the link proves it again at its reconnect). `norr mgm` sessions are not
/// challenged (their commands are).
#[test]
fn node_sessions_must_prove_the_secret() {
    let (m, addr) = start(CONFIG);
    let secret = ClusterSecret::new(SECRET).unwrap();
    let wrong = ClusterSecret::new(&"x".repeat(40)).unwrap();
    let refused = |r: Result<(MgmLink, norr_mgmd::session::Welcome), norr_mgmd::protocol::MgmError>| match r {
        Err(norr_mgmd::protocol::MgmError::Refused { reason, .. }) => reason,
        Err(e) => panic!("not a refusal: {e}"),
        Ok(_) => panic!("a session was opened"),
    };
    let e = refused(fetch_config(&addr, PeerRole::DataNode, Some(2), "no secret"));
    assert!(e.contains("proof of the cluster secret") && e.contains("--secret-file"), "{e}");
    let e = refused(fetch_config_with(&addr, PeerRole::DataNode, Some(2), "wrong", Some(wrong.clone())));
    assert!(e.contains("wrong cluster secret"), "{e}");
    let e = refused(fetch_config_with(&addr, PeerRole::Api, None, "wrong api", Some(wrong)));
    assert!(e.contains("wrong cluster secret"), "{e}");
    let e = refused(fetch_config(&addr, PeerRole::SqlNode, None, "sql without"));
    assert!(e.contains("a SQL node") || e.contains("proof"), "{e}");

    // A raw peer that answers the challenge with a proof for node 3 while
    // its Hello asked for node 2: refused, the connection closed.
    let raw = TcpStream::connect(&addr).unwrap();
    raw.set_read_timeout(Some(T)).unwrap();
    let mut r = Raw(raw);
    r.send(&ToMgmd::Hello {
        magic: MGM_MAGIC,
        version: MGM_PROTOCOL_VERSION,
        role: PeerRole::DataNode,
        node_id: Some(2),
        name: "moved proof".into(),
    });
    let Some(FromMgmd::SessionChallenge { nonce, mgmd_node }) = r.recv() else { panic!("no challenge") };
    assert_eq!(mgmd_node, 1);
    r.send(&norr_mgmd::session_auth::prove(&secret, &nonce, mgmd_node, PeerRole::DataNode, Some(3)).unwrap());
    match r.recv() {
        Some(FromMgmd::Refused { reason }) => assert!(reason.contains("wrong cluster secret"), "{reason}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(r.closed());
    // A peer that sends something else than the proof: refused.
    let mut r = Raw(TcpStream::connect(&addr).unwrap());
    r.0.set_read_timeout(Some(T)).unwrap();
    r.send(&ToMgmd::Hello {
        magic: MGM_MAGIC,
        version: MGM_PROTOCOL_VERSION,
        role: PeerRole::Api,
        node_id: None,
        name: "heartbeat instead".into(),
    });
    assert!(matches!(r.recv(), Some(FromMgmd::SessionChallenge { .. })));
    r.send(&ToMgmd::Heartbeat);
    assert!(matches!(r.recv(), Some(FromMgmd::Refused { .. })));

    // None of that reserved node 2: the real node opens its session.
    let (link, rx) = data_node(&addr);
    wait_reported(&addr);
    assert_eq!(link.node_id(), 2);
    // An API client with the secret gets an id; show stays open (Mgm role).
    let (api, w) = fetch_config_with(&addr, PeerRole::Api, None, "api", Some(secret.clone())).unwrap();
    assert!(w.node_id > 2, "{}", w.node_id);
    assert!(matches!(run_command(&addr, MgmCommand::Show, T).unwrap(), MgmReply::Show(_)));

    // mgmd restarts on the same port: the link proves the secret again and
    // commands reach the node.
    let port = m.local_addr().port();
    drop(api);
    m.stop();
    let c = ClusterConfig::parse(CONFIG, Path::new("/tmp")).unwrap();
    let m2 = Mgmd::start(c, None, Some(format!("127.0.0.1:{port}").parse().unwrap())).unwrap();
    wait_reported(&addr);
    let r = run_command_with(&addr, MgmCommand::Stop { node: 2 }, T, Some(&secret)).unwrap();
    assert!(!matches!(r, MgmReply::Error { .. }), "{r:?}");
    assert_eq!(rx.recv_timeout(T).unwrap(), NodeCommand::Stop);
    drop(link);
    m2.stop();
}
