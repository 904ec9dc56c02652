//! The real cluster data node blocks behind TCP ports: a
//! `norr_node::testkit::ClusterKit` (TC, LQH, DICT and DIH of every node,
//! with the kit playing QMGR) driven by one thread in real time, and one
//! listening port per data node that speaks the native protocol (Hello /
//! Welcome, then wire frames) as the runtime does. So the client can be
//! tested against the cluster code on main (routing by the distribution,
//! take-over answers) before real multi-process clusters can start (that
//! needs the membership block).
//!
//! What a connection sends reaches the kit as the runtime would deliver it
//! (`from` = the API node); what the kit's nodes send an API node goes back
//! on that API node's connection to the sending node. Crashing a node fails
//! it in the kit (the survivors are told, as QMGR's node-failure protocol
//! would) and closes its connections; it accepts none afterwards.
#![allow(dead_code)]

use norr_kernel::{BlockRef, Envelope, NodeId};
use norr_knobs::Knobs;
use norr_node::testkit::ClusterKit;
use norr_signals::{block, wire, ExecType, Signal};
use norr_transport::handshake::{decode_hello, encode_reply, HelloReply};
use norr_transport::{encode_frame, encode_frame_with, FrameDecoder};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// A TC_KEYREQ a node received.
#[derive(Debug, Clone)]
pub struct SeenKeyReq {
    pub node: NodeId,
    pub api: NodeId,
    pub txn: u64,
    pub exec: ExecType,
}

enum Cmd {
    Attach { node: NodeId, api: NodeId, conn: u64, writer: TcpStream },
    Detach { node: NodeId, api: NodeId, conn: u64 },
    Frame { node: NodeId, api: NodeId, env: Envelope<Signal> },
    Crash(NodeId, mpsc::Sender<()>),
    Stop,
}

struct Shared {
    down: Mutex<BTreeSet<NodeId>>,
    /// (data node, API node id) of every open connection.
    attached: Mutex<BTreeSet<(NodeId, NodeId)>>,
    next_api: Mutex<NodeId>,
    next_conn: AtomicU64,
    seen: Mutex<Vec<SeenKeyReq>>,
    /// Nodes whose commit requests are held back (never delivered).
    hold_commits: Mutex<BTreeSet<NodeId>>,
    held: Mutex<Vec<(NodeId, u64)>>,
    stopping: AtomicBool,
}

pub struct KitCluster {
    addrs: BTreeMap<NodeId, SocketAddr>,
    shared: Arc<Shared>,
    cmd: mpsc::Sender<Cmd>,
    kit_thread: Option<std::thread::JoinHandle<()>>,
}

impl KitCluster {
    /// Data nodes in `node_groups`, started together as one cluster.
    pub fn start(node_groups: Vec<Vec<NodeId>>, knobs: Knobs) -> KitCluster {
        let shared = Arc::new(Shared {
            down: Mutex::new(BTreeSet::new()),
            attached: Mutex::new(BTreeSet::new()),
            next_api: Mutex::new(100),
            next_conn: AtomicU64::new(1),
            seen: Mutex::new(Vec::new()),
            hold_commits: Mutex::new(BTreeSet::new()),
            held: Mutex::new(Vec::new()),
            stopping: AtomicBool::new(false),
        });
        let (cmd, rx) = mpsc::channel();
        let tc_instances = knobs.tc_instances.max(1);
        let groups = node_groups.clone();
        let s = shared.clone();
        let kit_thread = std::thread::Builder::new()
            .name("kit-bridge".into())
            .spawn(move || run_kit(ClusterKit::start(groups, knobs, 7), rx, s))
            .expect("spawn the kit thread");
        let mut addrs = BTreeMap::new();
        for n in node_groups.into_iter().flatten() {
            let l = TcpListener::bind("127.0.0.1:0").expect("bind");
            addrs.insert(n, l.local_addr().expect("addr"));
            let (s, cmd) = (shared.clone(), cmd.clone());
            std::thread::spawn(move || accept_loop(n, l, s, cmd, tc_instances));
        }
        KitCluster { addrs, shared, cmd, kit_thread: Some(kit_thread) }
    }

    pub fn addrs(&self) -> Vec<norr_client::DataNodeAddr> {
        self.addrs.values().map(|a| (*a).into()).collect()
    }

    /// The TC_KEYREQs the nodes received so far.
    pub fn seen(&self) -> Vec<SeenKeyReq> {
        self.shared.seen.lock().unwrap().clone()
    }

    /// The node that received the first request of API transaction `txn`.
    pub fn coordinator_of(&self, api: NodeId, txn: u64) -> Option<NodeId> {
        self.seen().iter().find(|s| s.api == api && s.txn == txn).map(|s| s.node)
    }

    /// Hold back (never deliver) the commit requests node `n` receives.
    pub fn hold_commits(&self, n: NodeId) {
        self.shared.hold_commits.lock().unwrap().insert(n);
    }

    /// (node, API transaction) of the commits held back so far.
    pub fn held(&self) -> Vec<(NodeId, u64)> {
        self.shared.held.lock().unwrap().clone()
    }

    /// Node `n` crashes: the survivors learn of it and take over its
    /// transactions; its connections close and it accepts none.
    pub fn crash(&self, n: NodeId) {
        self.shared.down.lock().unwrap().insert(n);
        let (tx, rx) = mpsc::channel();
        self.cmd.send(Cmd::Crash(n, tx)).expect("kit thread runs");
        rx.recv_timeout(Duration::from_secs(10)).expect("the kit failed the node");
    }
}

impl Drop for KitCluster {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        let _ = self.cmd.send(Cmd::Stop);
        if let Some(t) = self.kit_thread.take() {
            let _ = t.join();
        }
        // Wake the accept loops so they see `stopping`.
        for a in self.addrs.values() {
            let _ = TcpStream::connect(a);
        }
    }
}

fn run_kit(mut kit: ClusterKit, rx: mpsc::Receiver<Cmd>, shared: Arc<Shared>) {
    let t0 = Instant::now();
    let mut writers: BTreeMap<(NodeId, NodeId), (u64, TcpStream)> = BTreeMap::new();
    let mut out = Vec::new();
    loop {
        let mut cmds = Vec::new();
        match rx.recv_timeout(Duration::from_millis(1)) {
            Ok(c) => cmds.push(c),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
        cmds.extend(rx.try_iter());
        let mut crashed = Vec::new();
        for c in cmds {
            match c {
                Cmd::Stop => return,
                Cmd::Attach { node, api, conn, writer } => {
                    writers.insert((node, api), (conn, writer));
                }
                Cmd::Detach { node, api, conn } => {
                    if writers.get(&(node, api)).is_some_and(|(c, _)| *c == conn) {
                        writers.remove(&(node, api));
                        shared.attached.lock().unwrap().remove(&(node, api));
                    }
                }
                Cmd::Frame { node, api, env } => {
                    if !kit.is_alive(node) {
                        continue;
                    }
                    if let Signal::TcKeyReq(r) = &env.signal {
                        shared.seen.lock().unwrap().push(SeenKeyReq { node, api, txn: r.txn, exec: r.exec });
                        if r.exec == ExecType::Commit && shared.hold_commits.lock().unwrap().contains(&node) {
                            shared.held.lock().unwrap().push((node, r.txn));
                            continue;
                        }
                    }
                    kit.send_from_api(api, env.to, env.signal);
                }
                Cmd::Crash(n, done) => {
                    for ((node, _), (_, w)) in writers.iter() {
                        if *node == n {
                            let _ = w.shutdown(Shutdown::Both);
                        }
                    }
                    writers.retain(|(node, _), _| *node != n);
                    shared.attached.lock().unwrap().retain(|(node, _)| *node != n);
                    kit.fail_nodes(&[n]);
                    crashed.push(done);
                }
            }
        }
        let now = t0.elapsed().as_nanos() as u64;
        if now > kit.now_ns() {
            kit.advance(now - kit.now_ns());
        } else {
            kit.run();
        }
        for env in std::mem::take(&mut kit.cluster().api_inbox) {
            let key = (env.from.node, env.to.node);
            let Some((_, w)) = writers.get_mut(&key) else { continue };
            out.clear();
            encode_frame_with(&mut out, |o| wire::encode_into(&env, o));
            if w.write_all(&out).is_err() {
                let _ = w.shutdown(Shutdown::Both);
            }
        }
        for done in crashed {
            let _ = done.send(());
        }
    }
}

fn accept_loop(node: NodeId, l: TcpListener, shared: Arc<Shared>, cmd: mpsc::Sender<Cmd>, tc_instances: u16) {
    for s in l.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(s) = s else { continue };
        if shared.down.lock().unwrap().contains(&node) {
            drop(s); // a crashed node: nobody answers
            continue;
        }
        let (shared, cmd) = (shared.clone(), cmd.clone());
        std::thread::spawn(move || serve(node, s, shared, cmd, tc_instances));
    }
}

fn serve(node: NodeId, mut s: TcpStream, shared: Arc<Shared>, cmd: mpsc::Sender<Cmd>, tc_instances: u16) {
    s.set_nodelay(true).unwrap();
    let mut dec = FrameDecoder::new(64 << 20);
    let mut buf = vec![0u8; 65536];
    let hello = loop {
        if let Some(f) = dec.next_frame().expect("frame") {
            break decode_hello(f).expect("hello");
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => dec.push(&buf[..n]),
        }
    };
    let api = {
        let mut attached = shared.attached.lock().unwrap();
        let id = match hello.requested_api_node {
            Some(id) if attached.contains(&(node, id)) => Err(format!("API node id {id} is in use")),
            Some(id) => Ok(id),
            None => {
                let mut next = shared.next_api.lock().unwrap();
                *next += 1;
                Ok(*next - 1)
            }
        };
        if let Ok(id) = id {
            attached.insert((node, id));
        }
        id
    };
    let reply = match &api {
        Ok(id) => {
            HelloReply::Welcome { api_node: *id, data_node: node, wire_version: wire::WIRE_VERSION, tc_instances }
        }
        Err(reason) => HelloReply::Refused { reason: reason.clone() },
    };
    let mut out = Vec::new();
    encode_frame(&encode_reply(&reply), &mut out);
    if s.write_all(&out).is_err() {
        return;
    }
    let Ok(api) = api else { return };
    let conn = shared.next_conn.fetch_add(1, Ordering::SeqCst);
    let writer = s.try_clone().expect("clone the stream");
    if cmd.send(Cmd::Attach { node, api, conn, writer }).is_err() {
        return;
    }
    'read: loop {
        let n = match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        dec.push(&buf[..n]);
        loop {
            let f = match dec.next_frame() {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(_) => break 'read,
            };
            let mut env = wire::decode(f).expect("the client sends what the wire decodes");
            assert!(env.signal.allowed_from_api(), "{} from an API node", env.signal.name());
            assert_eq!(env.to.node, node, "addressed to the node of the connection");
            env.from = BlockRef::new(api, block::API, 0);
            if cmd.send(Cmd::Frame { node, api, env }).is_err() {
                return;
            }
        }
    }
    let _ = cmd.send(Cmd::Detach { node, api, conn });
}
