//! Several fake data nodes (ids 1..=n) sharing one store, as replicas would:
//! enough to test the client's side of a cluster (routing to the primary,
//! one API node id everywhere, reconnects with backoff, distribution
//! refresh, take-over answers) without the real blocks.
//!
//! Each node answers the handshake (taking a requested API node id if no
//! connection of it holds that id, refusing it otherwise), GetDistribution
//! (with the cluster's `Dist`, which a test may change), and every other
//! request as `fake_node` does. A node can be killed (its connections close;
//! while down it accepts and at once closes every connection, counting the
//! attempts) and started again on the same port; it can hold commits (no
//! reply), and send TC_KEY_FAILCONF to an API node as a take-over would.
#![allow(dead_code)]

use super::fake_node::{handle, Store};
use norr_signals::dist::{Dist, ReplicaState};
use norr_signals::*;
use norr_transport::handshake::{decode_hello, encode_reply, HelloReply};
use norr_transport::{encode_frame, encode_frame_with, FrameDecoder};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Notify};

/// A TC_KEYREQ a node received.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    pub api_node: u16,
    pub txn: u64,
    pub exec: ExecType,
    pub ops: usize,
}

struct Shared {
    store: Mutex<Store>,
    dist: Mutex<Dist>,
    next_conn: AtomicU64,
}

struct Node {
    id: u16,
    addr: SocketAddr,
    cluster: Arc<Shared>,
    /// true while killed: the accept loop closes what it accepts.
    down: AtomicBool,
    /// Connections accepted while down (reconnect attempts).
    attempts_while_down: AtomicU32,
    /// Tells the connections to close (bumped by `kill`).
    stop: watch::Sender<u64>,
    /// API node id -> the connection's queue of unsolicited signals.
    apis: Mutex<BTreeMap<u16, mpsc::UnboundedSender<Signal>>>,
    /// Every requested id seen in a Hello, in order.
    requested: Mutex<Vec<Option<u16>>>,
    received: Mutex<Vec<Received>>,
    hold_commits: AtomicBool,
    held: Mutex<Vec<(u16, u64)>>,
    held_changed: Notify,
    /// This node's own distribution instead of the cluster's (a node that
    /// restarted and has no DIH distribution yet, or lags behind).
    own_dist: Mutex<Option<Dist>>,
}

pub struct FakeCluster {
    shared: Arc<Shared>,
    nodes: Vec<Arc<Node>>,
}

impl FakeCluster {
    /// `n` nodes (ids 1..=n) in node groups of `replicas`, all alive.
    pub async fn start(n: u16, replicas: usize) -> FakeCluster {
        FakeCluster::start_ids((1..=n).collect(), replicas).await
    }

    /// Nodes with these ids, in node groups of `replicas`, all alive.
    pub async fn start_ids(ids: Vec<u16>, replicas: usize) -> FakeCluster {
        let dist = Dist::new(ids.chunks(replicas).map(|c| c.to_vec()).collect(), ReplicaState::Alive);
        let shared =
            Arc::new(Shared { store: Mutex::new(Store::new()), dist: Mutex::new(dist), next_conn: AtomicU64::new(1) });
        let mut nodes = Vec::new();
        for id in ids {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let node = Arc::new(Node {
                id,
                addr: l.local_addr().unwrap(),
                cluster: shared.clone(),
                down: AtomicBool::new(false),
                attempts_while_down: AtomicU32::new(0),
                stop: watch::channel(0).0,
                apis: Mutex::new(BTreeMap::new()),
                requested: Mutex::new(Vec::new()),
                received: Mutex::new(Vec::new()),
                hold_commits: AtomicBool::new(false),
                held: Mutex::new(Vec::new()),
                held_changed: Notify::new(),
                own_dist: Mutex::new(None),
            });
            tokio::spawn(accept_loop(node.clone(), l));
            nodes.push(node);
        }
        FakeCluster { shared, nodes }
    }

    fn node(&self, id: u16) -> &Arc<Node> {
        self.nodes.iter().find(|n| n.id == id).expect("a node of the cluster")
    }

    pub fn addr(&self, id: u16) -> SocketAddr {
        self.node(id).addr
    }

    pub fn addrs(&self) -> Vec<norr_client::DataNodeAddr> {
        self.nodes.iter().map(|n| n.addr.into()).collect()
    }

    pub fn dist(&self) -> Dist {
        self.shared.dist.lock().unwrap().clone()
    }

    pub fn set_dist(&self, d: Dist) {
        *self.shared.dist.lock().unwrap() = d;
    }

    /// Node `id` answers GetDistribution with `d` (None: the cluster's).
    pub fn set_node_dist(&self, id: u16, d: Option<Dist>) {
        *self.node(id).own_dist.lock().unwrap() = d;
    }

    pub fn rows(&self, table: TableId) -> usize {
        self.shared.store.lock().unwrap().rows(table)
    }

    /// API node ids connected to node `id`.
    pub fn api_ids(&self, id: u16) -> Vec<u16> {
        self.node(id).apis.lock().unwrap().keys().copied().collect()
    }

    pub fn requested_ids(&self, id: u16) -> Vec<Option<u16>> {
        self.node(id).requested.lock().unwrap().clone()
    }

    pub fn received(&self, id: u16) -> Vec<Received> {
        self.node(id).received.lock().unwrap().clone()
    }

    /// Node `id` leaves Commit requests unanswered (and unexecuted).
    pub fn hold_commits(&self, id: u16, on: bool) {
        self.node(id).hold_commits.store(on, Ordering::SeqCst);
    }

    /// Wait until node `id` holds `n` commits; returns them (api, txn).
    pub async fn held(&self, id: u16, n: usize) -> Vec<(u16, u64)> {
        let node = self.node(id);
        tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let woken = node.held_changed.notified();
                {
                    let h = node.held.lock().unwrap();
                    if h.len() >= n {
                        return h.clone();
                    }
                }
                woken.await;
            }
        })
        .await
        .expect("the commit reached the node")
    }

    /// Crash node `id`: its connections close (their open transactions roll
    /// back); until `restart` it accepts connections and closes them at once.
    pub fn kill(&self, id: u16) {
        let node = self.node(id);
        node.down.store(true, Ordering::SeqCst);
        node.attempts_while_down.store(0, Ordering::SeqCst);
        node.stop.send_modify(|g| *g += 1);
    }

    pub fn restart(&self, id: u16) {
        self.node(id).down.store(false, Ordering::SeqCst);
    }

    /// Connection attempts node `id` turned away since it was killed.
    pub fn attempts_while_down(&self, id: u16) -> u32 {
        self.node(id).attempts_while_down.load(Ordering::SeqCst)
    }

    /// As a node that took over a failed coordinator: tell API node `api`
    /// the outcome of its transaction `txn`, from node `id`.
    pub fn send_fail_conf(&self, id: u16, api: u16, txn: u64, outcome: TxnOutcome, gci: u64) {
        let tx = self.node(id).apis.lock().unwrap().get(&api).cloned().expect("the API node is connected there");
        tx.send(Signal::TcKeyFailConf(Box::new(TcKeyFailConf { txn, outcome, gci }))).unwrap();
    }
}

async fn accept_loop(node: Arc<Node>, l: TcpListener) {
    loop {
        let Ok((s, _)) = l.accept().await else { return };
        if node.down.load(Ordering::SeqCst) {
            node.attempts_while_down.fetch_add(1, Ordering::SeqCst);
            drop(s);
            continue;
        }
        let conn = node.cluster.next_conn.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(serve(node.clone(), s, conn));
    }
}

fn write_signal(out: &mut Vec<u8>, from: BlockRef, to: BlockRef, signal: Signal) {
    let e = Envelope { from, to, prio: Priority::B, signal };
    encode_frame_with(out, |o| wire::encode_into(&e, o));
}

async fn serve(node: Arc<Node>, mut s: TcpStream, conn: u64) {
    s.set_nodelay(true).unwrap();
    let mut stop = node.stop.subscribe();
    let mut dec = FrameDecoder::new(64 << 20);
    let mut buf = vec![0u8; 65536];
    // Handshake.
    let hello = loop {
        if let Some(f) = dec.next_frame().unwrap() {
            break decode_hello(f).unwrap();
        }
        let n = match s.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        dec.push(&buf[..n]);
    };
    node.requested.lock().unwrap().push(hello.requested_api_node);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let api = {
        let mut apis = node.apis.lock().unwrap();
        let id = match hello.requested_api_node {
            Some(id) if apis.contains_key(&id) => Err(format!("API node id {id} is in use")),
            Some(id) => Ok(id),
            None => Ok((100..).find(|i| !apis.contains_key(i)).unwrap()),
        };
        if let Ok(id) = id {
            apis.insert(id, tx);
        }
        id
    };
    let reply = match &api {
        Ok(id) => {
            HelloReply::Welcome { api_node: *id, data_node: node.id, wire_version: wire::WIRE_VERSION, tc_instances: 1 }
        }
        Err(reason) => HelloReply::Refused { reason: reason.clone() },
    };
    let mut out = Vec::new();
    encode_frame(&encode_reply(&reply), &mut out);
    if s.write_all(&out).await.is_err() {
        return;
    }
    let Ok(api) = api else { return };
    let me = BlockRef::new(node.id, block::TC, 0);
    let them = BlockRef::new(api, block::API, 0);
    loop {
        out.clear();
        tokio::select! {
            _ = stop.changed() => break,
            sig = rx.recv() => match sig {
                Some(sig) => write_signal(&mut out, me, them, sig),
                None => break,
            },
            r = s.read(&mut buf) => {
                let n = match r { Ok(0) | Err(_) => break, Ok(n) => n };
                dec.push(&buf[..n]);
                while let Some(f) = dec.next_frame().unwrap() {
                    let env = wire::decode(f).unwrap();
                    if let Some(reply) = on_request(&node, conn, api, env.signal) {
                        write_signal(&mut out, env.to, env.from, reply);
                    }
                }
            }
        }
        if !out.is_empty() && s.write_all(&out).await.is_err() {
            break;
        }
    }
    node.apis.lock().unwrap().remove(&api);
    node.cluster.store.lock().unwrap().drop_conn(conn);
}

fn on_request(node: &Node, conn: u64, api: u16, sig: Signal) -> Option<Signal> {
    match sig {
        Signal::DictReq(r) if r.op == DictOp::GetDistribution => {
            let own = node.own_dist.lock().unwrap().clone();
            let d = own.unwrap_or_else(|| node.cluster.dist.lock().unwrap().clone());
            Some(Signal::DictConf(Box::new(DictConf {
                req_id: r.req_id,
                result: DictResult::Distribution(Box::new(d)),
            })))
        }
        Signal::TcKeyReq(r) => {
            node.received.lock().unwrap().push(Received { api_node: api, txn: r.txn, exec: r.exec, ops: r.ops.len() });
            if r.exec == ExecType::Commit && node.hold_commits.load(Ordering::SeqCst) {
                node.held.lock().unwrap().push((api, r.txn));
                node.held_changed.notify_waiters();
                return None;
            }
            handle(&node.cluster.store, conn, Signal::TcKeyReq(r))
        }
        other => handle(&node.cluster.store, conn, other),
    }
}

/// Poll `f` until true (state the client changes in the background), for at most 10 s.
pub async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The set of node ids in `v`.
pub fn node_set(v: impl IntoIterator<Item = u16>) -> BTreeSet<u16> {
    v.into_iter().collect()
}
