//! Issue 22's "done when": under the probes, all at once, the SQL
//! node and the data node keep answering quickly and the process stays
//! within the memory it is configured for.
//!
//! One process (this test binary: its own, so its RSS is only this test's)
//! runs a data node and a SQL node as `norr sqld` runs them (session
//! threads, the same allocator), the data node listening on loopback TCP.
//! While the probes below run, a client on a thread of its own times
//! `SELECT 1` (the SQL node) and a primary-key read (`SELECT v FROM p.t
//! WHERE id = ?`: the SQL node and the data node) every 20 ms, and the
//! process's resident memory is sampled. Probes (the cases):
//! 1. 100,000-term operator chains and 10,000-deep nesting, one after another;
//! 2. strings built past max_allowed_packet (LPAD to a terabyte, REPEAT of 1 GB);
//! 3. `SELECT *` without a table;
//! 4. 100 MySQL connections that send a packet header announcing 16 MiB and
//!    then nothing (half before logging in, half after);
//! 5. 4 native connections pipelining 20,000 reads of 1.5 KB rows each and
//!    never reading a reply;
//! 6. native connections that say Hello and then nothing, until no slot for
//!    native clients is left;
//! 7. a 12 MB result sent to a client that never reads it;
//! 9. a DELETE of more rows than a transaction may change.
//!
//! Then: the median of each timed statement is under 10 ms (the issue's
//! bound; the median, so that a 2-core machine shared with other builds
//! does not make the test flaky), none of them failed, and the peak RSS
//! during the probes stayed within what the nodes are configured to hold
//! (see `memory_bound`). Afterwards the process limit (`--max-memory`)
//! refuses a sort larger than it with 1041, and a new SQL node still gets
//! a reserved slot on the data node although native clients hold all
//! theirs.

mod node_support;
mod protocol_support;

#[global_allocator]
static GLOBAL: norr_alloc::Allocator = norr_alloc::Allocator;

use mysql_async::prelude::*;
use norr_signals::{block, wire, BlockRef, Envelope, ExecType, KeyOp, NodeId, Priority, Signal, TcKeyReq, Value};
use norr_sql::engine::EngineConfig;
use norr_transport::handshake::{self, ApiKind, Hello, HelloReply};
use norr_transport::{encode_frame, encode_frame_with, FrameDecoder};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use node_support::{error_of, sqld_like, PASSWORD};
use protocol_support::{Raw, CAPS};

/// Rows of the big table and the bytes of each one's string.
const ROWS: usize = 8_000;
const ROW_BYTES: usize = 1_500;
/// `--max-memory` of the SQL node under the probes: room for one
/// 100,000-term statement's parse (`depth::MAX_PARSE_BYTES`) at a time.
const SQL_MAX_MEMORY: u64 = 256 << 20;
/// `--max-memory` afterwards: less than the big table, so a sort of it must
/// be refused (the statement limit is higher).
const SQL_SMALL_MAX_MEMORY: u64 = 10 << 20;
const SQL_MAX_STATEMENT_MEMORY: u64 = 64 << 20;
/// The data node's pause point for connections that do not read replies,
/// and the unsent bytes at which it closes one.
const SEND_PAUSE: usize = 1 << 20;
const MAX_SEND_BUFFER: usize = 64 << 20;
const SLOW_READERS: usize = 4;
const SLOW_READS: u64 = 20_000;
/// How long the timed client runs once every probe is in place.
const PROBE_SECS: u64 = 12;

/// Resident and peak resident memory of this process (bytes).
fn rss() -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb = |key: &str| {
        s.lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .expect("a memory line")
            * 1024
    };
    (kb("VmRSS:"), kb("VmHWM:"))
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// A native connection to the data node after its handshake, and its API
/// node id; Err: the node's refusal.
fn native(addr: std::net::SocketAddr) -> Result<(TcpStream, NodeId), String> {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    let mut w = Vec::new();
    encode_frame(&handshake::encode_hello(&Hello::new("under-probes", ApiKind::NativeClient)), &mut w);
    s.write_all(&w).expect("hello");
    let mut dec = FrameDecoder::new(1 << 20);
    let mut buf = [0u8; 4096];
    loop {
        if let Some(f) = dec.next_frame().expect("frame") {
            return match handshake::decode_reply(f).expect("reply") {
                HelloReply::Welcome { api_node, .. } => Ok((s, api_node)),
                HelloReply::Refused { reason } => Err(reason),
                other => panic!("unexpected handshake reply {other:?}"),
            };
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return Err("closed during the handshake".into()),
            Ok(n) => dec.push(&buf[..n]),
        }
    }
}

/// Committed reads of the big table's rows, one transaction each, as frames.
fn pipelined_reads(api_node: NodeId, table: norr_signals::TableId) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..SLOW_READS {
        let e = Envelope {
            from: BlockRef::new(api_node, block::API, 0),
            to: BlockRef::new(1, block::TC, 0),
            prio: Priority::B,
            signal: Signal::TcKeyReq(Box::new(TcKeyReq {
                txn: i + 1,
                exec: ExecType::Commit,
                ops: vec![KeyOp::read(table, vec![Value::Int((i % ROWS as u64) as i64)])],
            })),
        };
        encode_frame_with(&mut out, |o| wire::encode_into(&e, o));
    }
    out
}

/// What the process may hold above its resident memory before the probes:
/// the SQL node's statements and parses (`--max-memory`), each slow native
/// reader's unsent replies (`max_send_buffer_bytes`: reading pauses at
/// `send_buffer_pause_bytes`, but the replies to requests already read,
/// which a real TC answers over several rounds, still come), and 96 MiB
/// for the rest: the probes' statements in flight
/// buffers of the 150 connections, the data node's job buffer and
/// transaction records, allocator slack. Before issue 22's fixes these probes took the process
/// gigabytes past it (16 MiB per stalled packet header, 256 MiB of send
/// buffer per slow native reader, whole results, LPAD to a terabyte).
fn memory_bound(before: u64) -> u64 {
    before + SQL_MAX_MEMORY + (SLOW_READERS * MAX_SEND_BUFFER) as u64 + (96 << 20)
}

#[test]
fn sql_and_data_node_answer_fast_and_stay_in_memory_under_the_probes() {
    norr_sql::engine::memory::set_process_limit(SQL_MAX_MEMORY);
    let knobs = norr_knobs::Knobs {
        data_memory_bytes: 128 << 20,
        max_api_connections: 64,
        reserved_api_connections: 8,
        send_buffer_pause_bytes: SEND_PAUSE,
        max_send_buffer_bytes: MAX_SEND_BUFFER,
        // The default transaction records (16,384). Before native clients'
        // open requests were bounded (`norr_runtime::MAX_OUTSTANDING_REQUESTS`)
        // the node read about 14,000 of a slow reader's requests before it
        // paused, each a transaction until answered, and four slow readers
        // took every record: everyone else's transactions failed with 4006.
        ..norr_knobs::Knobs::default()
    };
    let cfg = EngineConfig {
        max_statement_memory: SQL_MAX_STATEMENT_MEMORY,
        max_rows_per_txn: 1_000,
        ..EngineConfig::default()
    };
    let (rt, node, port) = sqld_like(knobs, cfg.clone());
    let node_addr = node.local_addr();
    // The probes' clients run on a runtime of their own, not on the SQL
    // node's session threads.
    let clients = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();

    // The data: a table of 12 MB (more than --max-memory) and a small one of
    // more rows than a transaction may change.
    clients.block_on(async {
        let mut c = node_support::connect(port, None).await;
        c.query_drop("CREATE DATABASE p").await.unwrap();
        c.query_drop("CREATE TABLE p.t (id INT PRIMARY KEY, v VARCHAR(2000))").await.unwrap();
        let pad = "p".repeat(ROW_BYTES);
        for chunk in (0..ROWS).collect::<Vec<_>>().chunks(200) {
            let values: Vec<String> = chunk.iter().map(|i| format!("({i}, '{pad}')")).collect();
            c.query_drop(format!("INSERT INTO p.t VALUES {}", values.join(","))).await.unwrap();
        }
        c.query_drop("CREATE TABLE p.s (id INT PRIMARY KEY)").await.unwrap();
        for half in [0, 750] {
            let values: Vec<String> = (half..half + 750).map(|i| format!("({i})")).collect();
            c.query_drop(format!("INSERT INTO p.s VALUES {}", values.join(","))).await.unwrap();
        }
        c.disconnect().await.ok();
    });
    let table = clients.block_on(async {
        let nc = norr_client::Client::connect(node_addr).await.expect("native client");
        nc.get_table("p/t").await.expect("p/t").id
    });

    let stop = Arc::new(AtomicBool::new(false));
    // The timed client, on a thread and runtime of its own.
    let timer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let mut one = node_support::connect(port, None).await;
                let mut pk = node_support::connect(port, None).await;
                let (mut ones, mut reads, mut rss_max) = (Vec::new(), Vec::new(), 0u64);
                let mut i = 0i64;
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    let v: Option<i64> = one.query_first("SELECT 1").await.expect("SELECT 1 under the probes");
                    ones.push(t.elapsed());
                    assert_eq!(v, Some(1));
                    let t = Instant::now();
                    let v: Option<String> = pk
                        .exec_first("SELECT v FROM p.t WHERE id = ?", (i % ROWS as i64,))
                        .await
                        .expect("a primary-key read under the probes");
                    reads.push(t.elapsed());
                    assert_eq!(v.map(|s| s.len()), Some(ROW_BYTES));
                    i += 7;
                    rss_max = rss_max.max(rss().0);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                (ones, reads, rss_max)
            })
        })
    };

    // Only what the probes add from here on is measured.
    std::thread::sleep(Duration::from_millis(500));
    let before = rss().0;
    let hwm_reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();

    // 4: stalled packet headers, before and after login.
    let stalled = clients.block_on(async {
        use tokio::io::AsyncWriteExt;
        let mut held = Vec::new();
        for _ in 0..50 {
            let mut r = Raw::connect(port).await;
            r.read().await.expect("greeting");
            r.s.write_all(&[0xff, 0xff, 0xff, 1]).await.unwrap();
            held.push(r);
            let (mut r, ok) = Raw::login(port, "root", PASSWORD, CAPS).await;
            assert_eq!(ok[0], 0, "logged in");
            r.s.write_all(&[0xff, 0xff, 0xff, 0]).await.unwrap();
            held.push(r);
        }
        held
    });
    // 7: a 12 MB result that nobody reads.
    let non_reader = clients.block_on(async {
        let (mut r, ok) = Raw::login(port, "root", PASSWORD, CAPS).await;
        assert_eq!(ok[0], 0, "logged in");
        r.command(b"\x03SELECT id, v FROM p.t").await;
        r
    });
    // 5: native slow readers, each writing from a thread (the node stops
    // reading them, so the writes block).
    let mut slow = Vec::new();
    for _ in 0..SLOW_READERS {
        let (s, api_node) = native(node_addr).expect("a slow reader connects");
        let mut w = s.try_clone().unwrap();
        let frames = pipelined_reads(api_node, table);
        slow.push((s, std::thread::spawn(move || w.write_all(&frames).is_ok())));
    }
    // 6: native Hellos and then nothing, until the node refuses natives.
    let mut silent = Vec::new();
    let refusal = loop {
        match native(node_addr) {
            Ok((s, _)) => silent.push(s),
            Err(reason) => break reason,
        }
        assert!(silent.len() <= 64, "more native connections than max_api_connections");
    };
    assert!(refusal.contains("reserved_api_connections"), "{refusal}");

    // 1, 2, 3, 9 over and over on one connection while the timer runs.
    let probing_until = Instant::now() + Duration::from_secs(PROBE_SECS);
    let probes = clients.block_on(async move {
        let mut c = node_support::connect(port, None).await;
        let chain = |first: &str, op: &str, n: usize| format!("{first}{}", format!(" {op} 1").repeat(n - 1));
        let statements = [
            // (Texts longer than `depth::MAX_PARSE_BYTES` allows are 1041.)
            (format!("SELECT {}", chain("1", "+", 100_000)), &[Some(1436)][..]),
            (format!("SELECT 1 FROM DUAL WHERE {}", chain("1=0", "OR", 100_000)), &[None]),
            (format!("SELECT {}1{}", "(".repeat(10_000), ")".repeat(10_000)), &[Some(1064), Some(1436)]),
            (format!("SELECT {}1{}", "ABS(".repeat(10_000), ")".repeat(10_000)), &[Some(1064), Some(1436)]),
            ("SELECT LENGTH(LPAD('x', 1000000000000, 'y'))".to_string(), &[None]),
            ("SELECT LENGTH(REPEAT(REPEAT('x', 1048576), 1000))".to_string(), &[None]),
            ("SELECT *".to_string(), &[Some(1096)]),
            ("DELETE FROM p.s".to_string(), &[Some(1206)]),
        ];
        let mut rounds = 0;
        while Instant::now() < probing_until {
            for (sql, want) in &statements {
                let got = error_of(&mut c, sql).await;
                assert!(want.contains(&got), "{}: {got:?}", &sql[..sql.len().min(60)]);
            }
            rounds += 1;
        }
        rounds
    });
    stop.store(true, Ordering::Relaxed);
    let (mut ones, mut reads, rss_sampled) = timer.join().expect("the timed client");
    let (_, hwm) = rss();
    let st = node.stats();

    let (one_p50, read_p50) = (median(&mut ones), median(&mut reads));
    eprintln!(
        "under the probes ({probes} rounds of the statement probes): SELECT 1 x{} median {one_p50:?} max {:?}; \
         primary-key read x{} median {read_p50:?} max {:?}; RSS before {} MiB, sampled max {} MiB, peak {} MiB \
         (peak reset: {hwm_reset}), bound {} MiB; native: {} paused, send buffer peak {} KiB",
        ones.len(),
        ones.last().unwrap(),
        reads.len(),
        reads.last().unwrap(),
        before >> 20,
        rss_sampled >> 20,
        hwm >> 20,
        memory_bound(before) >> 20,
        st.send_paused_now,
        st.send_buffer_peak_bytes >> 10,
    );
    assert!(probes >= 1, "every statement probe ran");
    assert!(ones.len() >= 50, "the timed client ran throughout: {} samples", ones.len());
    assert!(one_p50 < Duration::from_millis(10), "SELECT 1: median {one_p50:?}");
    assert!(read_p50 < Duration::from_millis(10), "primary-key read: median {read_p50:?}");
    let peak = if hwm_reset { hwm } else { rss_sampled };
    assert!(peak <= memory_bound(before), "peak RSS {} MiB above {} MiB", peak >> 20, memory_bound(before) >> 20);
    // The slow readers were paused, within their bound.
    assert!(st.send_pauses >= SLOW_READERS as u64, "{st:?}");
    assert!(st.send_buffer_peak_bytes <= (MAX_SEND_BUFFER + (1 << 20)) as u64, "{st:?}");

    // The process limit: a sort of the 12 MB table passes --max-memory (not
    // the statement limit) and fails with 1041, before the process grows.
    drop(non_reader);
    drop(stalled);
    norr_sql::engine::memory::set_process_limit(SQL_SMALL_MAX_MEMORY);
    clients.block_on(async {
        let mut c = node_support::connect(port, None).await;
        let e = c.query_drop("SELECT v FROM p.t ORDER BY v DESC").await.unwrap_err();
        let mysql_async::Error::Server(e) = e else { panic!("{e:?}") };
        assert_eq!(e.code, 1041, "{}", e.message);
        assert!(e.message.contains("--max-memory"), "{}", e.message);
        let one: Option<i64> = c.query_first("SELECT 1").await.unwrap();
        assert_eq!(one, Some(1));
    });
    // 6, continued: with every native slot held by silent clients, a new SQL
    // node still connects (a reserved slot) and works.
    let node_str = node_addr.to_string();
    let port2 = rt.block_on(async move { node_support::sql_node_with(&node_str, cfg).await });
    clients.block_on(async {
        let mut c = node_support::connect(port2, None).await;
        let v: Option<String> = c.query_first("SELECT v FROM p.t WHERE id = 3").await.unwrap();
        assert_eq!(v.map(|s| s.len()), Some(ROW_BYTES));
    });
    for (s, writer) in slow {
        s.shutdown(std::net::Shutdown::Both).ok();
        writer.join().expect("writer thread");
    }
    drop(silent);
}
