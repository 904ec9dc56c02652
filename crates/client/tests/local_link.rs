//! The client through the in-process link (`Client::connect_local`, what
//! `norr up` gives its SQL node): the same protocol as a socket, so the same
//! operations work, across threads, with large replies that fill the link,
//! and both ends see the other close.

mod common;

use common::{insert_and_read_back_concurrently, kv_def, start_node};
use norr_client::*;
use std::time::{Duration, Instant};

fn knobs() -> norr_knobs::Knobs {
    norr_knobs::Knobs { lock_wait_timeout_ms: 300, ..Default::default() }
}

async fn connect(node: &norr_runtime::DataNodeHandle) -> Client {
    let link = node.local_connector().connect().expect("node is running");
    Client::connect_local(link, ConnectOptions::default()).await.expect("handshake over the link")
}

/// Wait (bounded) until the node's counters satisfy `cond`: the node updates
/// them on its own thread after it has seen the event.
fn wait_for_stats(node: &norr_runtime::DataNodeHandle, what: &str, cond: impl Fn(&norr_runtime::RuntimeStats) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond(&node.stats()) {
        assert!(Instant::now() < deadline, "node never saw: {what} (stats {:?})", node.stats());
        std::thread::yield_now();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crud_transactions_and_concurrency_over_the_link() {
    let node = start_node(knobs());
    let c = connect(&node).await;
    assert!(c.api_node() >= norr_runtime::FIRST_API_NODE_ID);
    let t = c.create_table(kv_def("kv")).await.unwrap();
    // Reads its own writes within a transaction, from 8 tasks on 2 threads at
    // once: every reply must reach the right waiter, with no lost wake-up.
    insert_and_read_back_concurrently(&c, t.id, 8, 200).await;
    let rows = c.scan(ScanSpec::full(t.id)).await.unwrap().collect_all().await.unwrap();
    assert_eq!(rows.len(), 1600);

    // A second connection is a different API node; both see committed rows.
    let c2 = connect(&node).await;
    assert_ne!(c2.api_node(), c.api_node());
    assert_eq!(
        c2.read(t.id, vec![Value::Int(7005)]).await.unwrap(),
        Some(vec![Value::Int(7005), Value::Null, Value::Int(7005)])
    );
    let mut txn = c2.begin();
    txn.execute(vec![KeyOp::delete(t.id, vec![Value::Int(5)])], ExecType::NoCommit).await.unwrap();
    txn.rollback().await.unwrap();
    assert!(c.read(t.id, vec![Value::Int(5)]).await.unwrap().is_some());
    // Errors travel back like any reply.
    assert_eq!(c.create_table(kv_def("kv")).await.unwrap_err().code(), Some(ErrorCode::TableExists));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_larger_than_the_link_buffer_arrive_whole() {
    // 2000 rows of ~1 KB in one scan and one batch: more than the link's
    // buffer in each direction, so both sides wait for room at some point.
    let node = start_node(knobs());
    let c = connect(&node).await;
    let t = c.create_table(kv_def("big")).await.unwrap();
    let pad = "p".repeat(1000);
    for chunk in (0..2000i64).collect::<Vec<_>>().chunks(500) {
        let ops = chunk
            .iter()
            .map(|&i| KeyOp::insert(t.id, vec![Value::Int(i)], vec![(1, Value::str(&pad)), (2, Value::Int(i))]))
            .collect();
        c.begin().execute(ops, ExecType::Commit).await.unwrap();
    }
    let rows = c.scan(ScanSpec::full(t.id)).await.unwrap().collect_all().await.unwrap();
    assert_eq!(rows.len(), 2000);
    let mut keys: Vec<i64> = rows
        .iter()
        .map(|r| {
            assert_eq!(r[1], Value::str(&pad));
            match r[0] {
                Value::Int(k) => k,
                ref v => panic!("key {v:?}"),
            }
        })
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, (0..2000).collect::<Vec<_>>());
    let ops: Vec<_> = (0..2000).map(|i| KeyOp::read(t.id, vec![Value::Int(i)])).collect();
    let res = c.begin().execute(ops, ExecType::Commit).await.unwrap();
    assert_eq!(res.len(), 2000);
    assert!(res.iter().all(|r| matches!(r, OpResult::Ok(Some(_)))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_end_sees_the_other_close() {
    let node = start_node(knobs());
    let c = connect(&node).await;
    let t = c.create_table(kv_def("kv")).await.unwrap();
    c.begin().execute(vec![KeyOp::insert(t.id, vec![Value::Int(1)], vec![])], ExecType::Commit).await.unwrap();
    // The client goes away: the node sees the link close, as a socket's EOF.
    let before = node.stats().connections_closed;
    drop(c);
    wait_for_stats(&node, "the link closed", |s| s.connections_closed > before);

    // The node stops: requests fail with NotConnected, and so do new links.
    let c2 = connect(&node).await;
    assert!(c2.read(t.id, vec![Value::Int(1)]).await.unwrap().is_some());
    let connector = node.local_connector();
    node.shutdown();
    let err = loop {
        match c2.read(t.id, vec![Value::Int(1)]).await {
            Err(e) => break e,
            // The request raced the shutdown and was answered.
            Ok(_) => tokio::task::yield_now().await,
        }
    };
    // Refused before it went out (NotConnected), or lost with the link
    // (its coordinator's node is gone: NodeFailure); temporary either way.
    assert!(matches!(err, ClientError::NotConnected(_)) || err.code() == Some(ErrorCode::NodeFailure), "{err:?}");
    assert!(err.is_temporary());
    assert!(!c2.is_connected());
    drop(node); // joins the event loop
    assert!(connector.connect().is_err(), "a stopped node accepts no link");
}

/// Read from a raw link until `n` bytes or end-of-file.
async fn read_raw(link: &LocalLink, want: usize) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = vec![0u8; 4096];
    while got.len() < want {
        let n = std::future::poll_fn(|cx| link.poll_read(cx, &mut buf)).await.unwrap();
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_checks_what_comes_over_the_link() {
    use norr_transport::handshake::{decode_reply, encode_hello, Hello, HelloReply, MAGIC};
    use norr_transport::{encode_frame, FrameDecoder};
    let node = start_node(knobs());

    // A proper handshake gets a Welcome, as over a socket.
    let link = node.local_connector().connect().unwrap();
    let mut out = Vec::new();
    let hello = Hello {
        magic: MAGIC,
        wire_version: norr_signals::wire::WIRE_VERSION,
        client_name: "raw".into(),
        kind: Default::default(),
        requested_api_node: None,
    };
    encode_frame(&encode_hello(&hello), &mut out);
    assert_eq!(link.try_write(&out).unwrap(), out.len());
    let mut dec = FrameDecoder::new(1 << 20);
    let reply = loop {
        if let Some(f) = dec.next_frame().unwrap() {
            break decode_reply(f).unwrap();
        }
        let bytes = read_raw(&link, 1).await;
        assert!(!bytes.is_empty(), "link closed before the Welcome");
        dec.push(&bytes);
    };
    assert!(matches!(reply, HelloReply::Welcome { .. }), "{reply:?}");

    // Garbage after it: the node closes the link (the reader sees EOF) and
    // counts a protocol error; the node itself goes on.
    let errors = node.stats().protocol_errors;
    link.try_write(&[0xff; 64]).unwrap();
    while !read_raw(&link, 1 << 20).await.is_empty() {}
    wait_for_stats(&node, "the protocol error", |s| s.protocol_errors > errors);
    assert_eq!(link.try_write(b"x").unwrap_err().kind(), std::io::ErrorKind::BrokenPipe);
    let c = connect(&node).await;
    c.create_table(kv_def("after")).await.unwrap();
}

/// While every connection is an in-process link, the node does not spin when
/// idle (the SQL node on the other end spins for its replies; two spinners
/// starve the clients of a small machine): requests over the link are served
/// with no spin and no socket poll. Once a client connects through a socket,
/// the node spins for socket traffic again, and both clients are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_spin_only_while_a_socket_client_is_connected() {
    let node = start_node(norr_knobs::Knobs { idle_spin_us: 5_000, ..knobs() });
    let c = connect(&node).await;
    let t = c.create_table(kv_def("kv")).await.unwrap();
    // One writer, keys 0..50, each written and read back in turn.
    insert_and_read_back_concurrently(&c, t.id, 1, 50).await;
    wait_for_stats(&node, "the link's requests", |s| s.signals_in >= 101);
    let st = node.stats();
    assert_eq!((st.spin_hits, st.spin_misses, st.spin_socket_polls), (0, 0, 0), "link-only traffic spun: {st:?}");

    let tcp = Client::connect(node.local_addr()).await.expect("TCP client");
    for i in 0..50 {
        assert!(tcp.read(t.id, vec![Value::Int(i)]).await.unwrap().is_some());
    }
    wait_for_stats(&node, "spins for socket traffic", |s| s.spin_hits >= 1 && s.spin_socket_polls >= 1);
    // The link client is still served alongside.
    assert!(c.read(t.id, vec![Value::Int(49)]).await.unwrap().is_some());
    drop(tcp);
}
