//! The data node host over real loopback TCP, with a tiny echo block standing in
//! for TC and DICT: handshake, hostile input, back-pressure, many connections,
//! send-buffer overflow, timers and the ApiFailReq on disconnect.

use norr_kernel::{Block, BlockRef, Ctx, NodeId, Priority, Scheduler};
use norr_knobs::Knobs;
use norr_runtime::{start_data_node_with, DataNodeConfig, DataNodeHandle, RuntimeOptions};
use norr_signals::{block, wire, DictConf, DictOp, DictReq, DictResult, Envelope, ExecType, OpResult, Signal};
use norr_signals::{InternalSignal, TcKeyConf, TcKeyReq, TxnOutcome, Value};
use norr_transport::handshake::{self, Hello, HelloReply, MAGIC};
use norr_transport::{encode_frame, encode_frame_with, FrameDecoder};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod support;
use support::read_frame;

const NODE: NodeId = 1;
/// TcKeyReq with a txn at or above this gets a reply of (txn - BIG) bytes.
const BIG: u64 = 1 << 40;
/// DictReq with req_id at or above this is answered after 50 ms (a delayed signal).
const DELAYED: u32 = 1000;

#[derive(Default)]
struct Log {
    /// (block, api_node) of every ApiFailReq.
    api_fail: Vec<(u16, NodeId)>,
    /// Sender of every TcKeyReq as the block saw it.
    senders: Vec<BlockRef>,
}

struct Echo {
    log: Arc<Mutex<Log>>,
    delayed: Vec<(u32, BlockRef)>,
}

impl Block<Signal> for Echo {
    fn on_signal(&mut self, env: Envelope, ctx: &mut Ctx<'_, Signal>) {
        let me = ctx.self_ref();
        match env.signal {
            Signal::TcKeyReq(req) => {
                self.log.lock().unwrap().senders.push(env.from);
                let results = if req.txn >= BIG {
                    vec![OpResult::Ok(Some(vec![Value::Bytes(vec![0xAB; (req.txn - BIG) as usize])]))]
                } else {
                    vec![]
                };
                let conf = TcKeyConf { txn: req.txn, outcome: TxnOutcome::Open, results, gci: 0 };
                ctx.send(env.from, Signal::TcKeyConf(Box::new(conf)));
            }
            Signal::DictReq(req) if req.req_id >= DELAYED => {
                self.delayed.push((req.req_id, env.from));
                let wake = DictConf { req_id: req.req_id, result: DictResult::Done };
                ctx.send_delayed(me, Signal::DictConf(Box::new(wake)), 50_000_000);
            }
            Signal::DictReq(req) => {
                let conf = DictConf { req_id: req.req_id, result: DictResult::Tables(vec![]) };
                ctx.send(env.from, Signal::DictConf(Box::new(conf)));
            }
            Signal::DictConf(conf) => {
                if let Some(i) = self.delayed.iter().position(|(id, _)| *id == conf.req_id) {
                    let (_, to) = self.delayed.remove(i);
                    ctx.send(to, Signal::DictConf(conf));
                }
            }
            Signal::ApiFailReq { api_node } => {
                self.log.lock().unwrap().api_fail.push((me.block, api_node));
            }
            _ => {}
        }
    }
}

fn start(knobs: Knobs) -> (DataNodeHandle, Arc<Mutex<Log>>) {
    let log = Arc::new(Mutex::new(Log::default()));
    let mut sched = Scheduler::new(NODE, knobs.job_buffer_bound);
    sched.add_block(block::TC, 0, Box::new(Echo { log: log.clone(), delayed: vec![] }));
    sched.add_block(block::DICT, 0, Box::new(Echo { log: log.clone(), delayed: vec![] }));
    let cfg = DataNodeConfig { node_id: NODE, listen: "127.0.0.1:0".parse().unwrap(), knobs, cluster: None };
    let h = start_data_node_with(cfg, RuntimeOptions::default(), sched).expect("start node");
    (h, log)
}

struct Client {
    s: TcpStream,
    dec: FrameDecoder,
    api_node: NodeId,
}

fn raw(h: &DataNodeHandle) -> TcpStream {
    let s = TcpStream::connect(h.local_addr()).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

fn hello_frame(magic: u32, version: u16) -> Vec<u8> {
    let mut w = Vec::new();
    let h = Hello {
        magic,
        wire_version: version,
        client_name: "test".into(),
        kind: Default::default(),
        requested_api_node: None,
    };
    encode_frame(&handshake::encode_hello(&h), &mut w);
    w
}

fn connect(h: &DataNodeHandle) -> Client {
    let mut s = raw(h);
    s.write_all(&hello_frame(MAGIC, wire::WIRE_VERSION)).unwrap();
    let mut dec = FrameDecoder::new(64 << 20);
    let f = read_frame(&mut s, &mut dec).expect("handshake reply");
    match handshake::decode_reply(&f).unwrap() {
        HelloReply::Welcome { api_node, data_node, wire_version, tc_instances } => {
            assert_eq!(data_node, NODE);
            assert_eq!(wire_version, wire::WIRE_VERSION);
            assert_eq!(tc_instances, 1, "the default node runs one TC");
            Client { s, dec, api_node }
        }
        HelloReply::Refused { reason } => panic!("refused: {reason}"),
        other => panic!("unexpected handshake reply {other:?}"),
    }
}

fn env(from: BlockRef, to_block: u16, signal: Signal) -> Envelope {
    Envelope { from, to: BlockRef::new(NODE, to_block, 0), prio: Priority::B, signal }
}

fn keyreq(txn: u64) -> Signal {
    Signal::TcKeyReq(Box::new(TcKeyReq { txn, exec: ExecType::NoCommit, ops: vec![] }))
}

impl Client {
    fn me(&self) -> BlockRef {
        BlockRef::new(self.api_node, block::API, 0)
    }
    fn frame_for(&self, e: &Envelope) -> Vec<u8> {
        let mut w = Vec::new();
        encode_frame_with(&mut w, |o| wire::encode_into(e, o));
        w
    }
    fn send(&mut self, to_block: u16, signal: Signal) {
        let e = env(self.me(), to_block, signal);
        let f = self.frame_for(&e);
        self.s.write_all(&f).unwrap();
    }
    fn recv(&mut self) -> Option<Envelope> {
        read_frame(&mut self.s, &mut self.dec).map(|f| wire::decode(&f).unwrap())
    }
    fn echo(&mut self, txn: u64) {
        self.send(block::TC, keyreq(txn));
        let r = self.recv().expect("reply");
        assert_eq!(r.to, self.me());
        match r.signal {
            Signal::TcKeyConf(c) => assert_eq!(c.txn, txn),
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// True if the node closes the connection (within 5 s); bytes sent before the
/// close (a refusal) are skipped.
fn closed_by_node(s: &mut TcpStream) -> bool {
    // Well below the node's 10 s handshake timeout, so that closing for that
    // reason does not pass for the close under test.
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut => {
                return false
            }
            Err(_) => return true,
        }
    }
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(10), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn handshake_echo_and_round_trip_latency() {
    let (h, log) = start(Knobs::default());
    let mut c = connect(&h);
    assert!(c.api_node >= norr_runtime::FIRST_API_NODE_ID);
    c.echo(1);
    let n = 2000;
    let t = Instant::now();
    for i in 0..n {
        c.echo(i);
    }
    let per = t.elapsed() / n as u32;
    eprintln!("loopback round trip (debug build, echo block): {per:?} per request");
    // Pipelined: many requests in flight, replies coalesced.
    let mut batch = Vec::new();
    for i in 0..n {
        batch.extend(c.frame_for(&env(c.me(), block::TC, keyreq(i))));
    }
    c.s.write_all(&batch).unwrap();
    for i in 0..n {
        match c.recv().unwrap().signal {
            Signal::TcKeyConf(conf) => assert_eq!(conf.txn, i),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(log.lock().unwrap().senders.iter().all(|s| *s == c.me()));
    // The host publishes its counters after the round's flush, so the last
    // reply can reach us before the round that sent it is counted.
    wait_for("the last round's counters", || h.stats().signals_out > 2 * n);
    let st = h.stats();
    eprintln!("{st:?}");
    assert_eq!(st.signals_in, 2 * n + 1);
    assert_eq!(st.signals_out, 2 * n + 1);
    // Pipelined replies leave in far fewer socket writes than signals.
    assert!(st.flushes < 2 * n, "{st:?}");
    h.shutdown();
    h.join().unwrap();
}

/// `idle_spin_us`: an idle loop polls without sleeping for at most that long,
/// then blocks; requests that arrive meanwhile are picked up by the spin. 0
/// turns spinning off.
#[test]
fn idle_spin_is_bounded_and_can_be_turned_off() {
    for spin_us in [0u64, 5_000] {
        let (h, _) = start(Knobs { idle_spin_us: spin_us, ..Knobs::default() });
        let mut c = connect(&h);
        // Back-to-back round trips: each request follows the previous reply
        // within microseconds, while the loop is still spinning.
        for i in 0..50 {
            c.echo(i);
        }
        // Idle far longer than the spin: the loop must give up and block.
        std::thread::sleep(Duration::from_millis(30));
        c.echo(50);
        wait_for("the last round's counters", || h.stats().signals_out >= 51);
        let st = h.stats();
        if spin_us == 0 {
            assert_eq!((st.spin_hits, st.spin_misses), (0, 0), "{st:?}");
        } else {
            assert!(st.spin_hits >= 1, "{st:?}");
            assert!(st.spin_misses >= 1, "the spin is bounded: {st:?}");
        }
        h.shutdown();
        h.join().unwrap();
    }
}

#[test]
fn bad_handshakes_are_refused() {
    let (h, _log) = start(Knobs::default());
    // A newer version, and the one before (a peer that cannot send a wait
    // policy: refused at the handshake, not misread frame by frame).
    for frame in [
        hello_frame(0xDEAD_BEEF, wire::WIRE_VERSION),
        hello_frame(MAGIC, wire::WIRE_VERSION + 7),
        hello_frame(MAGIC, wire::WIRE_VERSION - 1),
    ] {
        let mut s = raw(&h);
        s.write_all(&frame).unwrap();
        let mut dec = FrameDecoder::new(1 << 20);
        let f = read_frame(&mut s, &mut dec).expect("refusal");
        assert!(matches!(handshake::decode_reply(&f).unwrap(), HelloReply::Refused { .. }));
        assert!(closed_by_node(&mut s));
    }
    // A signal instead of a hello.
    let mut s = raw(&h);
    let e = env(BlockRef::new(100, block::API, 0), block::TC, keyreq(1));
    let mut w = Vec::new();
    encode_frame(&wire::encode(&e), &mut w);
    s.write_all(&w).unwrap();
    assert!(closed_by_node(&mut s));
    // A huge (but under max_frame_bytes) first frame is not buffered.
    let mut s = raw(&h);
    let mut w = (32u32 << 20).to_le_bytes().to_vec();
    w.extend_from_slice(&[0; 4]);
    w.extend_from_slice(&vec![0x11; 200 * 1024]);
    let _ = s.write_all(&w);
    assert!(closed_by_node(&mut s));
    // Garbage before any handshake.
    let mut s = raw(&h);
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    assert!(closed_by_node(&mut s));
    connect(&h).echo(5);
}

#[test]
fn hostile_frames_close_the_connection_and_the_node_keeps_serving() {
    let (h, log) = start(Knobs::default());
    type MakeBytes = Box<dyn Fn(&Client) -> Vec<u8>>;
    let cases: Vec<(&str, MakeBytes)> = vec![
        ("garbage bytes", Box::new(|_| b"hello garbage!!! \x00\x01\x02\xff".to_vec())),
        (
            "oversized length prefix",
            Box::new(|_| {
                let mut w = (u32::MAX).to_le_bytes().to_vec();
                w.extend_from_slice(&[0; 12]);
                w
            }),
        ),
        (
            "length just over max_frame_bytes",
            Box::new(|_| {
                let mut w = ((64u32 << 20) + 1).to_le_bytes().to_vec();
                w.extend_from_slice(&[0; 12]);
                w
            }),
        ),
        (
            "bad checksum",
            Box::new(|c: &Client| {
                let mut f = c.frame_for(&env(c.me(), block::TC, keyreq(1)));
                let last = f.len() - 1;
                f[last] ^= 0x55;
                f
            }),
        ),
        (
            "undecodable payload",
            Box::new(|_| {
                let mut w = Vec::new();
                encode_frame(&[0xFF; 40], &mut w);
                w
            }),
        ),
        (
            "forged internal signal",
            Box::new(|c: &Client| {
                c.frame_for(&env(
                    c.me(),
                    block::TC,
                    Signal::Internal(Box::new(InternalSignal::LqhCommitReq {
                        txn: 1,
                        gci: 1,
                        chain: norr_signals::dist::Chain { instance: 0, nodes: [1].into_iter().collect() },
                        tc: c.me(),
                    })),
                ))
            }),
        ),
        (
            "forged ApiFailReq for another client",
            Box::new(|c: &Client| c.frame_for(&env(c.me(), block::TC, Signal::ApiFailReq { api_node: 100 }))),
        ),
        (
            "reply signal from a client",
            Box::new(|c: &Client| {
                let conf = TcKeyConf { txn: 1, outcome: TxnOutcome::Committed, results: vec![], gci: 1 };
                c.frame_for(&env(c.me(), block::TC, Signal::TcKeyConf(Box::new(conf))))
            }),
        ),
        (
            "addressed to another data node",
            Box::new(|c: &Client| {
                let mut e = env(c.me(), block::TC, keyreq(1));
                e.to.node = 2;
                c.frame_for(&e)
            }),
        ),
        ("addressed to a missing block", Box::new(|c: &Client| c.frame_for(&env(c.me(), 77, keyreq(1))))),
    ];
    let mut victims = Vec::new();
    for (name, make) in &cases {
        let mut c = connect(&h);
        c.echo(1);
        let bytes = make(&c);
        c.s.write_all(&bytes).unwrap();
        assert!(closed_by_node(&mut c.s), "{name}: connection not closed");
        victims.push(c.api_node);
        // The node still serves a new client.
        connect(&h).echo(2);
    }
    // Every closed connection was reported to TC and DICT.
    assert!(h.stats().protocol_errors >= cases.len() as u64);
    wait_for("ApiFailReq for every victim", || {
        let l = log.lock().unwrap();
        victims.iter().all(|v| l.api_fail.contains(&(block::TC, *v)) && l.api_fail.contains(&(block::DICT, *v)))
    });
}

#[test]
fn forged_sender_is_overwritten() {
    let (h, log) = start(Knobs::default());
    let mut a = connect(&h);
    let mut b = connect(&h);
    // b claims to be a (and priority A): the node rewrites it to b, priority B.
    let mut e = env(a.me(), block::TC, keyreq(42));
    e.prio = Priority::A;
    let f = b.frame_for(&e);
    b.s.write_all(&f).unwrap();
    let r = b.recv().expect("reply to the real sender");
    assert_eq!(r.to, b.me());
    assert_eq!(log.lock().unwrap().senders, vec![b.me()]);
    a.echo(1);
}

#[test]
fn many_connections_get_distinct_ids() {
    // No slots reserved for SQL nodes: all 300 go to these native clients.
    let knobs = Knobs { max_api_connections: 300, reserved_api_connections: 0, ..Knobs::default() };
    let (h, _log) = start(knobs);
    let mut clients: Vec<Client> = (0..300).map(|_| connect(&h)).collect();
    let mut ids: Vec<NodeId> = clients.iter().map(|c| c.api_node).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 300);
    for (i, c) in clients.iter_mut().enumerate() {
        c.send(block::TC, keyreq(i as u64));
    }
    for (i, c) in clients.iter_mut().enumerate() {
        match c.recv().unwrap().signal {
            Signal::TcKeyConf(conf) => assert_eq!(conf.txn, i as u64),
            other => panic!("unexpected {other:?}"),
        }
    }
    // One more is refused, politely.
    let mut s = raw(&h);
    s.write_all(&hello_frame(MAGIC, wire::WIRE_VERSION)).unwrap();
    let mut dec = FrameDecoder::new(1 << 20);
    let f = read_frame(&mut s, &mut dec).expect("refusal");
    assert!(matches!(handshake::decode_reply(&f).unwrap(), HelloReply::Refused { .. }));
    // After one leaves (and its ApiFailReq ran), its id can be had again.
    let gone = clients.pop().unwrap();
    let gone_id = gone.api_node;
    drop(gone);
    let t = Instant::now();
    let c = loop {
        let mut s = raw(&h);
        s.write_all(&hello_frame(MAGIC, wire::WIRE_VERSION)).unwrap();
        let mut dec = FrameDecoder::new(1 << 20);
        let f = read_frame(&mut s, &mut dec).expect("reply");
        match handshake::decode_reply(&f).unwrap() {
            HelloReply::Welcome { api_node, .. } => break api_node,
            HelloReply::Refused { .. } => {
                assert!(t.elapsed() < Duration::from_secs(10));
                std::thread::sleep(Duration::from_millis(10));
            }
            other => panic!("unexpected handshake reply {other:?}"),
        }
    };
    assert_eq!(c, gone_id);
}

#[test]
fn disconnect_delivers_api_fail_req_to_tc_and_dict() {
    let (h, log) = start(Knobs::default());
    let mut c = connect(&h);
    c.echo(1);
    let id = c.api_node;
    // Mid-"transaction": a request in flight, then the client vanishes.
    c.send(block::TC, keyreq(2));
    drop(c);
    wait_for("ApiFailReq", || {
        let l = log.lock().unwrap();
        l.api_fail.contains(&(block::TC, id)) && l.api_fail.contains(&(block::DICT, id))
    });
    let l = log.lock().unwrap();
    assert_eq!(l.api_fail.iter().filter(|(_, n)| *n == id).count(), 2, "exactly once per block");
}

#[test]
fn full_job_buffer_pushes_back_without_dropping() {
    let knobs = Knobs { job_buffer_bound: 16, ..Knobs::default() };
    let (h, _log) = start(knobs);
    let mut c = connect(&h);
    let n = 5000u64;
    let mut batch = Vec::new();
    for i in 0..n {
        batch.extend(c.frame_for(&env(c.me(), block::TC, keyreq(i))));
    }
    let mut w = c.s.try_clone().unwrap();
    let writer = std::thread::spawn(move || w.write_all(&batch).unwrap());
    for i in 0..n {
        match c.recv().expect("reply").signal {
            Signal::TcKeyConf(conf) => assert_eq!(conf.txn, i),
            other => panic!("unexpected {other:?}"),
        }
    }
    writer.join().unwrap();
    assert!(h.stats().stalls > 0, "the job buffer bound was never hit");
}

#[test]
fn client_that_does_not_read_is_disconnected() {
    // Reading pauses at 16 KiB, but the replies to requests already read
    // (one round's, ~100 MiB here) still overflow the hard bound.
    let knobs = Knobs { max_send_buffer_bytes: 65536, send_buffer_pause_bytes: 16384, ..Knobs::default() };
    let (h, log) = start(knobs);
    let mut c = connect(&h);
    let id = c.api_node;
    // 400 requests for 256 KiB replies each, never read: ~100 MiB, far beyond
    // socket buffers plus the 64 KiB send buffer bound.
    for i in 0..400 {
        let e = env(c.me(), block::TC, keyreq(BIG + 256 * 1024 + i));
        let f = c.frame_for(&e);
        if c.s.write_all(&f).is_err() {
            break; // already disconnected
        }
    }
    wait_for("ApiFailReq after send buffer overflow", || log.lock().unwrap().api_fail.contains(&(block::TC, id)));
    // A client reading a single reply larger than the bound is fine.
    let mut d = connect(&h);
    d.send(block::TC, keyreq(BIG + 1_000_000));
    match d.recv().expect("big reply").signal {
        Signal::TcKeyConf(conf) => assert_eq!(conf.results.len(), 1),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn delayed_signals_fire_on_time() {
    let (h, _log) = start(Knobs::default());
    let mut c = connect(&h);
    let t = Instant::now();
    c.send(block::DICT, Signal::DictReq(Box::new(DictReq { req_id: DELAYED + 1, op: DictOp::ListTables })));
    // Meanwhile the node keeps answering.
    c.send(block::DICT, Signal::DictReq(Box::new(DictReq { req_id: 1, op: DictOp::ListTables })));
    let first = c.recv().unwrap();
    assert!(matches!(&first.signal, Signal::DictConf(d) if d.req_id == 1));
    let second = c.recv().unwrap();
    let el = t.elapsed();
    assert!(matches!(&second.signal, Signal::DictConf(d) if d.req_id == DELAYED + 1));
    assert!(el >= Duration::from_millis(50), "fired early: {el:?}");
    assert!(el < Duration::from_millis(1000), "fired late: {el:?}");
}

#[test]
fn shutdown_closes_connections_and_refuses_bad_config() {
    let (h, _log) = start(Knobs::default());
    let mut c = connect(&h);
    c.echo(1);
    h.shutdown();
    h.join().unwrap();
    assert!(closed_by_node(&mut c.s));

    let bad = Knobs { max_frame_bytes: 1, ..Knobs::default() };
    let sched = Scheduler::new(NODE, 16);
    let cfg = DataNodeConfig { node_id: NODE, listen: "127.0.0.1:0".parse().unwrap(), knobs: bad, cluster: None };
    assert!(start_data_node_with(cfg, RuntimeOptions::default(), sched).is_err());
    let sched = Scheduler::new(NODE, 16);
    let cfg = DataNodeConfig {
        node_id: NODE,
        listen: "127.0.0.1:0".parse().unwrap(),
        knobs: Knobs::default(),
        cluster: None,
    };
    let two = RuntimeOptions { threads: 2, ..RuntimeOptions::default() };
    assert!(start_data_node_with(cfg, two, sched).is_err());
}

#[test]
fn stopper_stops_from_another_thread() {
    let (h, _log) = start(Knobs::default());
    let stopper = h.stopper();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        stopper.stop();
    });
    h.join().unwrap();
    t.join().unwrap();
}

#[test]
fn silent_connections_are_closed_after_the_handshake_timeout() {
    let log = Arc::new(Mutex::new(Log::default()));
    let knobs = Knobs::default();
    let mut sched = Scheduler::new(NODE, knobs.job_buffer_bound);
    sched.add_block(block::TC, 0, Box::new(Echo { log: log.clone(), delayed: vec![] }));
    let cfg = DataNodeConfig { node_id: NODE, listen: "127.0.0.1:0".parse().unwrap(), knobs, cluster: None };
    let opts = RuntimeOptions { handshake_timeout_ms: 200, ..RuntimeOptions::default() };
    let h = start_data_node_with(cfg, opts, sched).unwrap();
    let t = Instant::now();
    let mut silent = raw(&h);
    let mut c = connect(&h);
    assert!(closed_by_node(&mut silent));
    let el = t.elapsed();
    assert!(el >= Duration::from_millis(200) && el < Duration::from_secs(3), "{el:?}");
    // A connection past the handshake is not affected.
    std::thread::sleep(Duration::from_millis(300));
    c.echo(1);
}

#[test]
fn random_input_never_brings_the_node_down() {
    let (h, log) = start(Knobs::stress());
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // A valid message to mutate: well-framed payloads that are almost right
    // reach deep into the decoder.
    let good = wire::encode(&env(BlockRef::new(100, block::API, 0), block::TC, keyreq(3)));
    let mut victims = 0;
    for round in 0..150 {
        let mut c = connect(&h);
        let mut payload = if round % 3 == 0 {
            (0..rnd() % 200).map(|_| rnd() as u8).collect::<Vec<u8>>()
        } else {
            let mut p = good.clone();
            for _ in 0..1 + rnd() % 4 {
                let i = (rnd() as usize) % p.len();
                p[i] = rnd() as u8;
            }
            p
        };
        if round % 7 == 0 {
            payload.truncate((rnd() as usize) % (payload.len() + 1));
        }
        let mut w = Vec::new();
        encode_frame(&payload, &mut w);
        if c.s.write_all(&w).is_err() {
            continue;
        }
        // Either a reply (the mutation kept it valid) or a close; never a hang.
        let mut buf = [0u8; 4096];
        c.s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        match c.s.read(&mut buf) {
            Ok(0) | Err(_) => victims += 1,
            Ok(_) => {}
        }
    }
    assert!(victims > 0);
    // Still serving.
    connect(&h).echo(9);
    drop(log);
}
