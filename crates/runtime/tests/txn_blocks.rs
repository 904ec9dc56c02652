//! The production data node (real TC/LQH/DICT blocks of norr-txn) over loopback
//! TCP: a client that vanishes mid-transaction has its locks released (the host
//! delivers ApiFailReq), and the round-trip latency of a key read.

use norr_kernel::{BlockRef, NodeId, Priority};
use norr_knobs::Knobs;
use norr_runtime::{start_data_node, DataNodeConfig, DataNodeHandle};
use norr_signals::{block, wire, ColumnType, DictConf, DictOp, DictReq, DictResult, Envelope, ExecType};
use norr_signals::{KeyOp, OpResult, Signal, TableId, TcKeyReq, TxnOutcome, Value};
use norr_transport::handshake::{self, Hello, HelloReply, MAGIC};
use norr_transport::{encode_frame, encode_frame_with, FrameDecoder};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

mod support;

const NODE: NodeId = 1;

struct Client {
    s: TcpStream,
    dec: FrameDecoder,
    api_node: NodeId,
}

impl Client {
    fn connect(h: &DataNodeHandle) -> Client {
        let mut s = TcpStream::connect(h.local_addr()).unwrap();
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut w = Vec::new();
        let hello = Hello {
            magic: MAGIC,
            wire_version: wire::WIRE_VERSION,
            client_name: "txn-test".into(),
            kind: Default::default(),
            requested_api_node: None,
        };
        encode_frame(&handshake::encode_hello(&hello), &mut w);
        s.write_all(&w).unwrap();
        let mut c = Client { s, dec: FrameDecoder::new(64 << 20), api_node: 0 };
        let f = c.read_frame().expect("handshake reply");
        match handshake::decode_reply(&f).unwrap() {
            HelloReply::Welcome { api_node, .. } => c.api_node = api_node,
            HelloReply::Refused { reason } => panic!("refused: {reason}"),
            other => panic!("unexpected handshake reply {other:?}"),
        }
        c
    }

    fn read_frame(&mut self) -> Option<Vec<u8>> {
        support::read_frame(&mut self.s, &mut self.dec)
    }

    fn send(&mut self, to_block: u16, signal: Signal) {
        let e = Envelope {
            from: BlockRef::new(self.api_node, block::API, 0),
            to: BlockRef::new(NODE, to_block, 0),
            prio: Priority::B,
            signal,
        };
        let mut w = Vec::new();
        encode_frame_with(&mut w, |o| wire::encode_into(&e, o));
        self.s.write_all(&w).unwrap();
    }

    fn recv(&mut self) -> Signal {
        let f = self.read_frame().expect("reply");
        wire::decode(&f).unwrap().signal
    }

    fn dict(&mut self, op: DictOp) -> DictResult {
        self.send(block::DICT, Signal::DictReq(Box::new(DictReq { req_id: 1, op })));
        match self.recv() {
            Signal::DictConf(c) => {
                let DictConf { result, .. } = *c;
                result
            }
            other => panic!("dict: {other:?}"),
        }
    }

    fn key(&mut self, txn: u64, exec: ExecType, ops: Vec<KeyOp>) {
        self.send(block::TC, Signal::TcKeyReq(Box::new(TcKeyReq { txn, exec, ops })));
    }
}

fn start(knobs: Knobs) -> DataNodeHandle {
    let cfg = DataNodeConfig { node_id: NODE, listen: "127.0.0.1:0".parse().unwrap(), knobs, cluster: None };
    start_data_node(cfg).expect("start data node")
}

fn create_table(c: &mut Client, name: &str) -> TableId {
    let def = norr_txn::testkit::table_def(name, 4, &[("v", ColumnType::BigInt { unsigned: false })]);
    match c.dict(DictOp::CreateTable(def)) {
        DictResult::Table(t) => t.id,
        other => panic!("create table: {other:?}"),
    }
}

#[test]
fn vanished_client_releases_its_locks() {
    // A lock-wait timeout far above the test's patience: only ApiFailReq can
    // release the lock in time.
    let knobs = Knobs { lock_wait_timeout_ms: 60_000, ..Knobs::default() };
    let h = start(knobs);
    let mut setup = Client::connect(&h);
    let t = create_table(&mut setup, "locks");
    setup.key(1, ExecType::Commit, vec![KeyOp::insert(t, vec![Value::Int(1)], vec![(1, Value::Int(10))])]);
    match setup.recv() {
        Signal::TcKeyConf(c) => assert_eq!(c.outcome, TxnOutcome::Committed),
        other => panic!("insert: {other:?}"),
    }

    // A locks row 1 and keeps its transaction open.
    let mut a = Client::connect(&h);
    a.key(7, ExecType::NoCommit, vec![KeyOp::update(t, vec![Value::Int(1)], vec![(1, Value::Int(20))])]);
    match a.recv() {
        Signal::TcKeyConf(c) => assert_eq!(c.outcome, TxnOutcome::Open),
        other => panic!("update A: {other:?}"),
    }

    // B wants the same row: it waits.
    let mut b = Client::connect(&h);
    b.key(7, ExecType::Commit, vec![KeyOp::update(t, vec![Value::Int(1)], vec![(1, Value::Int(30))])]);
    b.s.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    assert!(b.read_frame().is_none(), "B must wait for A's lock");
    b.s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();

    // A vanishes mid-transaction: its transaction is aborted and B gets the lock.
    let started = Instant::now();
    drop(a);
    match b.recv() {
        Signal::TcKeyConf(c) => assert_eq!(c.outcome, TxnOutcome::Committed),
        other => panic!("update B: {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    setup.key(2, ExecType::Commit, vec![KeyOp::read(t, vec![Value::Int(1)])]);
    match setup.recv() {
        Signal::TcKeyConf(c) => {
            assert_eq!(c.results, vec![OpResult::Ok(Some(vec![Value::Int(1), Value::Int(30)]))]);
        }
        other => panic!("read: {other:?}"),
    }
}

#[test]
fn key_read_round_trip_latency() {
    let h = start(Knobs::default());
    let mut c = Client::connect(&h);
    let t = create_table(&mut c, "rtt");
    c.key(1, ExecType::Commit, vec![KeyOp::insert(t, vec![Value::Int(1)], vec![(1, Value::Int(5))])]);
    assert!(matches!(c.recv(), Signal::TcKeyConf(_)));
    let n = 2000u64;
    let start = Instant::now();
    for i in 0..n {
        c.key(100 + i, ExecType::Commit, vec![KeyOp::read(t, vec![Value::Int(1)])]);
        match c.recv() {
            Signal::TcKeyConf(conf) => assert_eq!(conf.results.len(), 1),
            other => panic!("read: {other:?}"),
        }
    }
    let per = start.elapsed() / n as u32;
    eprintln!("loopback key-read round trip (autocommit, this build's profile): {per:?}");
    assert!(per < Duration::from_millis(20));
}

#[test]
fn mutated_requests_never_bring_the_real_node_down() {
    let h = start(Knobs::stress());
    let mut setup = Client::connect(&h);
    let t = create_table(&mut setup, "fuzz");
    let me = BlockRef::new(100, block::API, 0);
    let to_tc = BlockRef::new(NODE, block::TC, 0);
    let to_dict = BlockRef::new(NODE, block::DICT, 0);
    let seeds: Vec<Vec<u8>> = vec![
        wire::encode(&Envelope {
            from: me,
            to: to_tc,
            prio: Priority::B,
            signal: Signal::TcKeyReq(Box::new(TcKeyReq {
                txn: 5,
                exec: ExecType::Commit,
                ops: vec![
                    KeyOp::insert(t, vec![Value::Int(2)], vec![(1, Value::Int(3))]),
                    KeyOp::read(t, vec![Value::Int(2)]),
                ],
            })),
        }),
        wire::encode(&Envelope {
            from: me,
            to: to_dict,
            prio: Priority::B,
            signal: Signal::DictReq(Box::new(DictReq {
                req_id: 9,
                op: DictOp::CreateTable(norr_txn::testkit::table_def(
                    "f2",
                    2,
                    &[("v", ColumnType::Varchar { len: 10, collation: Default::default() })],
                )),
            })),
        }),
    ];
    let mut x: u64 = 0xD1B5_4A32_D192_ED03;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut c = Client::connect(&h);
    for round in 0..400 {
        let mut p = seeds[round % seeds.len()].clone();
        for _ in 0..1 + rnd() % 3 {
            let i = (rnd() as usize) % p.len();
            p[i] = rnd() as u8;
        }
        let mut w = Vec::new();
        encode_frame(&p, &mut w);
        if c.s.write_all(&w).is_err() {
            c = Client::connect(&h);
            continue;
        }
        c.s.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        let mut buf = [0u8; 4096];
        if let Ok(0) | Err(_) = c.s.read(&mut buf) {
            c = Client::connect(&h); // closed (or no reply): start afresh
        }
    }
    // The node is alive and consistent enough to serve.
    setup.key(77, ExecType::Commit, vec![KeyOp::read(t, vec![Value::Int(424242)])]);
    match setup.recv() {
        Signal::TcKeyConf(_) | Signal::TcKeyRef(_) => {}
        other => panic!("read after fuzz: {other:?}"),
    }
}
