//! A data node with a cluster secret (`RuntimeOptions::api_secret`) serves
//! only connections that prove it (`norr_transport::auth`): through the raw
//! protocol (no proof, a wrong one, a replayed one, malformed and oversized
//! answers, a request sent in place of the answer) and through the client
//! library (no secret, a wrong one, the right one).

use norr_client::blocking::Client;
use norr_client::ConnectOptions;
use norr_kernel::{BlockRef, NodeId, Priority};
use norr_knobs::Knobs;
use norr_runtime::{start_data_node_with_options, DataNodeConfig, DataNodeHandle, RuntimeOptions};
use norr_signals::{block, wire, ColumnType, DictOp, DictReq, Envelope, Signal};
use norr_transport::auth::{self, AuthResponse, ClusterSecret};
use norr_transport::handshake::{self, ApiKind, Hello, HelloReply};
use norr_transport::{encode_frame, encode_frame_with, FrameDecoder};
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

mod support;

const NODE: NodeId = 1;

fn secret(c: char) -> ClusterSecret {
    ClusterSecret::new(&c.to_string().repeat(48)).unwrap()
}

fn start(secret: Option<ClusterSecret>) -> DataNodeHandle {
    let cfg = DataNodeConfig {
        node_id: NODE,
        listen: "127.0.0.1:0".parse().unwrap(),
        knobs: Knobs::default(),
        cluster: None,
    };
    let opts = RuntimeOptions { api_secret: secret, handshake_timeout_ms: 2_000, ..RuntimeOptions::default() };
    start_data_node_with_options(cfg, opts).expect("start node")
}

struct Raw {
    s: TcpStream,
    dec: FrameDecoder,
}

impl Raw {
    fn connect(h: &DataNodeHandle) -> Raw {
        let s = TcpStream::connect(h.local_addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Raw { s, dec: FrameDecoder::new(1 << 20) }
    }

    fn send(&mut self, payload: &[u8]) {
        let mut w = Vec::new();
        encode_frame(payload, &mut w);
        self.s.write_all(&w).unwrap();
    }

    /// The next frame; None once the node closed the connection.
    fn frame(&mut self) -> Option<Vec<u8>> {
        support::read_frame(&mut self.s, &mut self.dec)
    }

    fn reply(&mut self) -> HelloReply {
        handshake::decode_reply(&self.frame().expect("a handshake reply")).unwrap()
    }

    /// Hello; returns the challenge's nonce.
    fn hello(&mut self, hello: &Hello) -> [u8; auth::NONCE_BYTES] {
        self.send(&handshake::encode_hello(hello));
        match self.reply() {
            HelloReply::Challenge { nonce, data_node } => {
                assert_eq!(data_node, NODE);
                nonce
            }
            other => panic!("expected a challenge, got {other:?}"),
        }
    }

    /// Expects `Refused` naming `why`, then the connection closed.
    fn refused(&mut self, why: &str) {
        match self.reply() {
            HelloReply::Refused { reason } => assert!(reason.contains(why), "{reason:?} should say {why:?}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert!(self.frame().is_none(), "the node closes a refused connection");
    }
}

fn native_hello() -> Hello {
    Hello::new("auth-test", ApiKind::NativeClient)
}

/// A DICT request creating a table, as an API node would send it.
fn create_table_frame(name: &str) -> Vec<u8> {
    let def = norr_txn::testkit::table_def(name, 4, &[("v", ColumnType::BigInt { unsigned: false })]);
    let e = Envelope {
        from: BlockRef::new(100, block::API, 0),
        to: BlockRef::new(NODE, block::DICT, 0),
        prio: Priority::B,
        signal: Signal::DictReq(Box::new(DictReq { req_id: 1, op: DictOp::CreateTable(def) })),
    };
    let mut w = Vec::new();
    encode_frame_with(&mut w, |o| wire::encode_into(&e, o));
    w
}

fn refusals(h: &DataNodeHandle, at_least: u64) {
    let t = Instant::now();
    while h.stats().auth_refusals < at_least {
        assert!(t.elapsed() < Duration::from_secs(10), "auth_refusals {} < {at_least}", h.stats().auth_refusals);
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn client_with(h: &DataNodeHandle, secret: Option<ClusterSecret>) -> Result<Client, String> {
    let opts = ConnectOptions { secret, connect_timeout: Duration::from_secs(10), ..ConnectOptions::default() };
    Client::connect_with(h.local_addr(), opts).map_err(|e| e.to_string())
}

#[test]
fn raw_connections_are_served_only_with_a_fresh_right_proof() {
    let s = secret('k');
    let h = start(Some(s.clone()));
    let hello = native_hello();

    // A request in place of the answer: refused, and not executed.
    let mut c = Raw::connect(&h);
    c.hello(&hello);
    c.s.write_all(&create_table_frame("sneaky")).unwrap();
    c.refused("requires the cluster secret");

    // A wrong secret.
    let mut c = Raw::connect(&h);
    let nonce = c.hello(&hello);
    c.send(&auth::encode_auth_response(
        &auth::respond(&secret('w'), &nonce, &auth::api_context(NODE, &hello)).unwrap(),
    ));
    c.refused("wrong cluster secret");

    // The right one: welcomed, with an API node id.
    let mut c = Raw::connect(&h);
    let nonce = c.hello(&hello);
    let good = auth::respond(&s, &nonce, &auth::api_context(NODE, &hello)).unwrap();
    c.send(&auth::encode_auth_response(&good));
    assert!(matches!(c.reply(), HelloReply::Welcome { data_node: NODE, .. }));

    // The same proof replayed on a new connection (new nonce): refused.
    let mut r = Raw::connect(&h);
    r.hello(&hello);
    r.send(&auth::encode_auth_response(&good));
    r.refused("wrong cluster secret");

    // Malformed and oversized answers: refused, the node goes on.
    let mut bad_answers: Vec<Vec<u8>> = vec![
        vec![],
        vec![0xFF; 7],
        vec![0xAB; auth::MAX_AUTH_FRAME_BYTES + 1],
        auth::encode_auth_response(&good)[..20].to_vec(),
    ];
    let mut trailing = auth::encode_auth_response(&good);
    trailing.push(1);
    bad_answers.push(trailing);
    let mut other_magic = auth::encode_auth_response(&AuthResponse { magic: 7, ..good.clone() });
    other_magic.truncate(40);
    bad_answers.push(other_magic);
    for bad in &bad_answers {
        let mut c = Raw::connect(&h);
        c.hello(&hello);
        c.send(bad);
        c.refused("authentication failed");
    }
    refusals(&h, 3 + bad_answers.len() as u64);

    // Silence after the challenge: closed at the handshake deadline.
    let mut c = Raw::connect(&h);
    c.hello(&hello);
    let t = Instant::now();
    assert!(c.frame().is_none());
    assert!(t.elapsed() < Duration::from_secs(9), "closed by the handshake timeout");

    // None of it ran anything: the request sent unauthenticated made no table.
    let client = client_with(&h, Some(s)).expect("the right secret is served");
    let names: Vec<String> = client.list_tables().unwrap().into_iter().map(|t| t.name).collect();
    assert!(!names.iter().any(|n| n.contains("sneaky")), "{names:?}");
    h.shutdown();
}

#[test]
fn the_client_library_proves_the_secret_and_says_what_is_wrong() {
    let s = secret('q');
    let h = start(Some(s.clone()));
    // No secret anywhere (the variable is not set in the test environment).
    if std::env::var_os(auth::SECRET_ENV).is_none() {
        let Err(e) = client_with(&h, None) else { panic!("served without a secret") };
        assert!(e.contains("requires the cluster secret") && e.contains(auth::SECRET_ENV), "{e}");
    }
    let Err(e) = client_with(&h, Some(secret('x'))) else { panic!("served with a wrong secret") };
    assert!(e.contains("wrong cluster secret"), "{e}");
    refusals(&h, 1);
    let c = client_with(&h, Some(s)).expect("served with the right secret");
    assert!(c.list_tables().is_ok());
    h.shutdown();
}

#[test]
fn without_a_secret_the_node_welcomes_at_once_and_a_client_with_one_is_served() {
    let h = start(None);
    let mut c = Raw::connect(&h);
    c.send(&handshake::encode_hello(&native_hello()));
    assert!(matches!(c.reply(), HelloReply::Welcome { .. }));
    let client = client_with(&h, Some(secret('z'))).expect("a node without a secret asks for nothing");
    assert!(client.list_tables().is_ok());
    h.shutdown();
}

/// Two data nodes of one node group (the higher id dials the lower), each
/// with its own secret.
fn pair(secrets: [ClusterSecret; 2]) -> Vec<DataNodeHandle> {
    let ls: Vec<std::net::TcpListener> = (0..2).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    let addrs: Vec<std::net::SocketAddr> = ls.iter().map(|l| l.local_addr().unwrap()).collect();
    drop(ls);
    let data_nodes: std::collections::BTreeMap<NodeId, std::net::SocketAddr> = [(2, addrs[0]), (3, addrs[1])].into();
    let net = norr_runtime::ClusterNet {
        data_nodes: data_nodes.clone(),
        node_groups: vec![vec![2, 3]],
        config_digest: 0xA0A0,
        arbitrator: None,
    };
    let knobs = Knobs { heartbeat_interval_ms: 100, ..Knobs::default() };
    data_nodes
        .iter()
        .zip(secrets)
        .map(|((id, addr), secret)| {
            let cfg = DataNodeConfig { node_id: *id, listen: *addr, knobs: knobs.clone(), cluster: Some(net.clone()) };
            let opts = RuntimeOptions { api_secret: Some(secret), ..RuntimeOptions::default() };
            start_data_node_with_options(cfg, opts).expect("start data node")
        })
        .collect()
}

#[test]
fn data_nodes_prove_the_secret_to_each_other() {
    let s = secret('p');
    let nodes = pair([s.clone(), s.clone()]);
    let t = Instant::now();
    while !nodes.iter().all(|h| h.status().is_some_and(|st| st.started && st.alive_nodes == [2, 3])) {
        assert!(t.elapsed() < Duration::from_secs(60), "the pair did not form: {:?}", nodes[0].status());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(nodes[0].stats().auth_refusals, 0);
    for h in nodes {
        h.shutdown();
    }

    // Another secret on node 3: node 2 refuses its every dial.
    let nodes = pair([s, secret('o')]);
    let t = Instant::now();
    while nodes[0].stats().auth_refusals < 2 {
        assert!(t.elapsed() < Duration::from_secs(30), "node 2 never refused node 3");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        nodes[0].status().is_none_or(|st| !st.alive_nodes.contains(&3)),
        "node 3 is never a member: {:?}",
        nodes[0].status()
    );
    for h in nodes {
        h.shutdown();
    }
}
