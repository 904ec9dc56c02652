//! Protocol-level tests of the client against a fake data node (see
//! common/fake_node.rs): multiplexing, reply routing, error mapping, timeouts,
//! disconnects, the blocking wrapper.

mod common;

use common::fake_node::FakeNode;
use common::{insert_and_read_back_concurrently, kv_def};
use norr_client::*;
use std::time::Duration;

fn row(k: i64, v: &str, n: i64) -> Vec<Value> {
    vec![Value::Int(k), Value::str(v), Value::Int(n)]
}

#[tokio::test]
async fn dictionary_calls() {
    let node = FakeNode::start().await;
    let c = Client::connect(node.addr).await.unwrap();
    let t = c.create_table(kv_def("t1")).await.unwrap();
    assert!(t.id > 0);
    assert_eq!(c.get_table("t1").await.unwrap(), t);
    let e = c.create_table(kv_def("t1")).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::TableExists));
    assert_eq!(c.list_tables().await.unwrap().len(), 1);
    let e = c.get_table("nope").await.unwrap_err();
    assert_eq!(e.class(), Some(ErrorClass::Schema));
    assert!(!e.is_temporary());
    c.truncate_table("t1").await.unwrap();
    c.drop_table("t1").await.unwrap();
    assert!(c.list_tables().await.unwrap().is_empty());
    let s = c.node_stats().await.unwrap();
    assert_eq!(s.rows, 0);
}

#[tokio::test]
async fn crud_and_batches() {
    let node = FakeNode::start().await;
    let c = Client::connect(node.addr).await.unwrap();
    let t = c.create_table(kv_def("kv")).await.unwrap();
    // A batch of 100 inserts in one round trip, committed.
    let ops: Vec<_> = (0..100)
        .map(|i| KeyOp::insert(t.id, vec![Value::Int(i)], vec![(1, Value::str("x")), (2, Value::Int(i))]))
        .collect();
    let mut txn = c.begin();
    let res = txn.execute(ops, ExecType::Commit).await.unwrap();
    assert_eq!(res.len(), 100);
    assert!(txn.is_finished());
    // Batched reads return rows in request order.
    let ops: Vec<_> = (0..100).rev().map(|i| KeyOp::read(t.id, vec![Value::Int(i)])).collect();
    let res = c.begin().execute(ops, ExecType::Commit).await.unwrap();
    for (j, r) in res.iter().enumerate() {
        let i = 99 - j as i64;
        assert_eq!(r, &OpResult::Ok(Some(row(i, "x", i))));
    }
    // Update, then delete, then read a missing row.
    let mut txn = c.begin();
    txn.execute(vec![KeyOp::update(t.id, vec![Value::Int(5)], vec![(1, Value::str("y"))])], ExecType::NoCommit)
        .await
        .unwrap();
    txn.execute(vec![KeyOp::delete(t.id, vec![Value::Int(6)])], ExecType::NoCommit).await.unwrap();
    txn.commit().await.unwrap();
    assert_eq!(c.read(t.id, vec![Value::Int(5)]).await.unwrap(), Some(row(5, "y", 5)));
    assert_eq!(c.read(t.id, vec![Value::Int(6)]).await.unwrap(), None);
    // Rollback undoes.
    let mut txn = c.begin();
    txn.execute(vec![KeyOp::delete(t.id, vec![Value::Int(7)])], ExecType::NoCommit).await.unwrap();
    txn.rollback().await.unwrap();
    assert!(c.read(t.id, vec![Value::Int(7)]).await.unwrap().is_some());
    // Commit/rollback of a transaction that sent nothing is a no-op.
    c.begin().commit().await.unwrap();
    c.begin().rollback().await.unwrap();
}

#[tokio::test]
async fn errors_abort_and_map() {
    let node = FakeNode::start().await;
    let c = Client::connect(node.addr).await.unwrap();
    let t = c.create_table(kv_def("kv")).await.unwrap();
    c.begin().execute(vec![KeyOp::insert(t.id, vec![Value::Int(1)], vec![])], ExecType::Commit).await.unwrap();
    // Duplicate key aborts the transaction, with the failing op's index.
    let mut txn = c.begin();
    let e = txn
        .execute(
            vec![KeyOp::insert(t.id, vec![Value::Int(2)], vec![]), KeyOp::insert(t.id, vec![Value::Int(1)], vec![])],
            ExecType::NoCommit,
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::DuplicateKey));
    assert!(e.to_string().contains("operation 1"), "{e}");
    assert!(txn.is_finished());
    let e2 = txn.execute(vec![KeyOp::read(t.id, vec![Value::Int(1)])], ExecType::Commit).await.unwrap_err();
    assert_eq!(e2.code(), Some(ErrorCode::TransactionAborted));
    assert_eq!(c.read(t.id, vec![Value::Int(2)]).await.unwrap(), None, "aborted insert undone");
    // Missing row on update.
    let e =
        c.begin().execute(vec![KeyOp::update(t.id, vec![Value::Int(99)], vec![])], ExecType::Commit).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NoSuchRow));
    // abort_on_error = false: per-op error, transaction goes on.
    let mut op = KeyOp::read(t.id, vec![Value::Int(99)]);
    op.abort_on_error = false;
    let res = c.begin().execute(vec![op, KeyOp::read(t.id, vec![Value::Int(1)])], ExecType::Commit).await.unwrap();
    assert!(matches!(&res[0], OpResult::Err(e) if e.code == ErrorCode::NoSuchRow));
    assert!(matches!(&res[1], OpResult::Ok(Some(_))));
    // Wrong type.
    let e = c
        .begin()
        .execute(vec![KeyOp::insert(t.id, vec![Value::Int(3)], vec![(2, Value::str("nan"))])], ExecType::Commit)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::WrongValueType));
    // Unknown table.
    let e = c.begin().execute(vec![KeyOp::read(999, vec![Value::Int(1)])], ExecType::Commit).await.unwrap_err();
    assert_eq!(e.class(), Some(ErrorClass::Schema));
    // Rollback batch must be empty.
    let e = c.begin().execute(vec![KeyOp::read(t.id, vec![Value::Int(1)])], ExecType::Rollback).await.unwrap_err();
    assert!(matches!(e, ClientError::Protocol(_)));
}

#[tokio::test]
async fn oversized_request_fails_locally_and_connection_survives() {
    let node = FakeNode::start().await;
    let opts = ConnectOptions { max_frame_bytes: 64 * 1024, ..Default::default() };
    let c = Client::connect_with(node.addr, opts).await.unwrap();
    let t = c.create_table(kv_def("kv")).await.unwrap();
    let big = Value::Bytes(vec![7u8; 100 * 1024]);
    let e = c
        .begin()
        .execute(vec![KeyOp::insert(t.id, vec![Value::Int(1)], vec![(1, big)])], ExecType::Commit)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::ValueTooLarge));
    assert!(c.is_connected());
    c.begin().execute(vec![KeyOp::insert(t.id, vec![Value::Int(1)], vec![])], ExecType::Commit).await.unwrap();
}

#[tokio::test]
async fn lock_conflict_is_temporary_and_dropped_txn_releases() {
    let node = FakeNode::start().await;
    let c = Client::connect(node.addr).await.unwrap();
    let t = c.create_table(kv_def("kv")).await.unwrap();
    let mut a = c.begin();
    a.execute(vec![KeyOp::insert(t.id, vec![Value::Int(1)], vec![])], ExecType::NoCommit).await.unwrap();
    let e =
        c.begin().execute(vec![KeyOp::write(t.id, vec![Value::Int(1)], vec![])], ExecType::Commit).await.unwrap_err();
    assert!(e.is_temporary(), "{e:?}");
    drop(a); // background rollback
    for _ in 0..100 {
        if node.open_locks() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(node.open_locks(), 0);
    assert_eq!(c.read(t.id, vec![Value::Int(1)]).await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_transactions_on_one_connection() {
    let node = FakeNode::start().await;
    let c = Client::connect(node.addr).await.unwrap();
    let t = c.create_table(kv_def("kv")).await.unwrap();
    insert_and_read_back_concurrently(&c, t.id, 200, 20).await;
    assert_eq!(c.node_stats().await.unwrap().rows, 4000);
}

#[tokio::test]
async fn scans_batches_filters_and_close() {
    let node = FakeNode::start().await;
    let c = Client::connect(node.addr).await.unwrap();
    let t = c.create_table(kv_def("kv")).await.unwrap();
    let ops: Vec<_> =
        (0..1000).map(|i| KeyOp::insert(t.id, vec![Value::Int(i)], vec![(2, Value::Int(i % 10))])).collect();
    c.begin().execute(ops, ExecType::Commit).await.unwrap();
    let mut spec = ScanSpec::full(t.id);
    spec.batch_rows = 64;
    let mut s = c.scan(spec.clone()).await.unwrap();
    let mut n = 0;
    let mut batches = 0;
    while let Some(b) = s.next_batch().await.unwrap() {
        assert!(b.len() <= 64);
        n += b.len();
        batches += 1;
    }
    assert_eq!((n, batches), (1000, 16));
    spec.filter = Some(Filter::Cmp { col: 2, op: CmpOp::Eq, value: Value::Int(3) });
    spec.projection = vec![0];
    let rows = c.scan(spec.clone()).await.unwrap().collect_all().await.unwrap();
    assert_eq!(rows.len(), 100);
    assert!(rows.iter().all(|r| r.len() == 1 && r[0].as_i64().unwrap() % 10 == 3));
    // Close early, and drop early: the connection stays usable.
    let mut s = c.scan(ScanSpec { batch_rows: 10, ..ScanSpec::full(t.id) }).await.unwrap();
    assert_eq!(s.next_batch().await.unwrap().unwrap().len(), 10);
    s.close().await.unwrap();
    drop(c.scan(ScanSpec { batch_rows: 10, ..ScanSpec::full(t.id) }).await.unwrap());
    // Scan in a transaction sees its own writes.
    let mut txn = c.begin();
    txn.execute(vec![KeyOp::delete(t.id, vec![Value::Int(0)])], ExecType::NoCommit).await.unwrap();
    let rows = txn.scan(ScanSpec::full(t.id)).await.unwrap().collect_all().await.unwrap();
    assert_eq!(rows.len(), 999);
    txn.rollback().await.unwrap();
    // Scan error.
    let e = c.scan(ScanSpec::full(4242)).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NoSuchTable));
}

#[tokio::test]
async fn timeout_then_connection_still_usable() {
    let node = FakeNode::start().await;
    let opts = ConnectOptions { request_timeout: Some(Duration::from_millis(200)), ..Default::default() };
    let c = Client::connect_with(node.addr, opts).await.unwrap();
    let bh = c.create_table(kv_def("blackhole")).await.unwrap();
    let t = c.create_table(kv_def("kv")).await.unwrap();
    let mut txn = c.begin();
    let asked = std::time::Instant::now();
    let e = txn.execute(vec![KeyOp::read(bh.id, vec![Value::Int(1)])], ExecType::Commit).await.unwrap_err();
    assert_eq!(e, ClientError::Timeout);
    // The sweeper never fails a request before its timeout has passed.
    assert!(asked.elapsed() >= Duration::from_millis(200), "timed out after {:?}", asked.elapsed());
    assert!(e.is_temporary());
    assert!(txn.is_finished());
    assert_eq!(c.read(t.id, vec![Value::Int(1)]).await.unwrap(), None);
}

#[tokio::test]
async fn connection_loss_fails_pending_and_later_calls() {
    // A server that accepts the handshake, then closes after the first request.
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut s, _) = l.accept().await.unwrap();
        let mut dec = norr_transport::FrameDecoder::new(1 << 20);
        let mut buf = vec![0u8; 4096];
        let mut frames = 0;
        loop {
            let n = s.read(&mut buf).await.unwrap();
            dec.push(&buf[..n]);
            while dec.next_frame().unwrap().is_some() {
                frames += 1;
                if frames == 1 {
                    let r = norr_transport::handshake::HelloReply::Welcome {
                        api_node: 200,
                        data_node: 1,
                        wire_version: norr_signals::wire::WIRE_VERSION,
                        tc_instances: 1,
                    };
                    let mut out = Vec::new();
                    norr_transport::encode_frame(&norr_transport::handshake::encode_reply(&r), &mut out);
                    s.write_all(&out).await.unwrap();
                } else {
                    return; // drop the socket
                }
            }
        }
    });
    let c = Client::connect(addr).await.unwrap();
    // The coordinator's connection broke under a read: the transaction is
    // gone with it (node failure, temporary).
    let e = c.begin().execute(vec![KeyOp::read(1, vec![Value::Int(1)])], ExecType::Commit).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NodeFailure), "{e:?}");
    assert!(e.is_temporary());
    assert!(!c.is_connected());
    // Nothing is connected now (the node does not come back): NotConnected.
    let e = c.list_tables().await.unwrap_err();
    assert!(matches!(e, ClientError::NotConnected(_)));
    let e = c.begin().execute(vec![KeyOp::read(1, vec![Value::Int(1)])], ExecType::Commit).await.unwrap_err();
    assert!(matches!(e, ClientError::NotConnected(_)), "{e:?}");
}

#[tokio::test]
async fn connect_refused_is_not_connected() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    let e = Client::connect(addr).await.unwrap_err();
    assert!(matches!(e, ClientError::NotConnected(_)));
}

#[test]
fn blocking_api() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let node = rt.block_on(FakeNode::start());
    let c = norr_client::blocking::Client::connect(node.addr).unwrap();
    let t = c.create_table(kv_def("kv")).unwrap();
    let mut txn = c.begin();
    txn.execute(vec![KeyOp::insert(t.id, vec![Value::Int(1)], vec![(1, Value::str("a"))])], ExecType::NoCommit)
        .unwrap();
    txn.commit().unwrap();
    assert_eq!(c.read(t.id, vec![Value::Int(1)]).unwrap(), Some(vec![Value::Int(1), Value::str("a"), Value::Null]));
    let rows = c.scan(ScanSpec::full(t.id)).unwrap().collect_all().unwrap();
    assert_eq!(rows.len(), 1);
    // Threads sharing one blocking client.
    std::thread::scope(|s| {
        for w in 0..4i64 {
            let c = c.clone();
            s.spawn(move || {
                for j in 0..50i64 {
                    let mut txn = c.begin();
                    txn.execute(
                        vec![KeyOp::insert(t.id, vec![Value::Int(100 + w * 100 + j)], vec![])],
                        ExecType::Commit,
                    )
                    .unwrap();
                }
            });
        }
    });
    assert_eq!(c.node_stats().unwrap().rows, 201);
    // Row iterator across batches; mixing iteration and next_batch loses nothing.
    let mut it = c.scan(ScanSpec { batch_rows: 7, ..ScanSpec::full(t.id) }).unwrap();
    let first: Vec<_> = it.by_ref().take(3).map(|r| r.unwrap()).collect();
    let rest = it.next_batch().unwrap().unwrap();
    assert_eq!(first.len() + rest.len(), 7, "the rest of the first batch");
    let tail: Vec<_> = it.map(|r| r.unwrap()).collect();
    assert_eq!(first.len() + rest.len() + tail.len(), 201);
    // Drop of an open transaction rolls back.
    let mut txn = c.begin();
    txn.execute(vec![KeyOp::delete(t.id, vec![Value::Int(1)])], ExecType::NoCommit).unwrap();
    drop(txn);
    assert!(c.read(t.id, vec![Value::Int(1)]).unwrap().is_some());
}

#[tokio::test]
async fn scan_stream_of_rows() {
    use futures_core::Stream;
    use std::pin::Pin;
    async fn next_row(s: &mut ScanStream) -> Option<Result<Vec<Value>, ClientError>> {
        std::future::poll_fn(|cx| Pin::new(&mut *s).poll_next(cx)).await
    }
    let node = FakeNode::start().await;
    let c = Client::connect(node.addr).await.unwrap();
    let t = c.create_table(kv_def("kv")).await.unwrap();
    let ops: Vec<_> = (0..100).map(|i| KeyOp::insert(t.id, vec![Value::Int(i)], vec![])).collect();
    c.begin().execute(ops, ExecType::Commit).await.unwrap();
    let spec = ScanSpec { batch_rows: 9, ..ScanSpec::full(t.id) };
    let mut s = c.scan(spec.clone()).await.unwrap();
    let mut n = 0;
    while let Some(r) = next_row(&mut s).await {
        r.unwrap();
        n += 1;
        if n == 40 {
            // Mixing rows and batches loses nothing: the rest of the current batch.
            let b = s.next_batch().await.unwrap().unwrap();
            assert_eq!(b.len(), 5, "45 = 5 batches of 9");
            n += b.len();
        }
    }
    assert_eq!(n, 100);
    assert!(next_row(&mut s).await.is_none());
    // Dropping a stream with a fetch in flight closes the scan; the connection goes on.
    let mut s = c.scan(spec.clone()).await.unwrap();
    for _ in 0..9 {
        next_row(&mut s).await.unwrap().unwrap();
    }
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    assert!(Pin::new(&mut s).poll_next(&mut cx).is_pending());
    drop(s);
    let s = c.scan(spec).await.unwrap();
    s.close().await.unwrap();
    assert_eq!(c.read(t.id, vec![Value::Int(1)]).await.unwrap().unwrap()[0], Value::Int(1));
}

/// Requests far larger than the socket buffer, sent to a slow reader while
/// small ones keep coming: a sender writes to the socket itself only while
/// nothing else is queued or being written, the writer task finishes partial
/// writes, and no frame is ever cut into by another (the node would drop the
/// connection on a corrupt frame and every call below would fail).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_and_small_requests_to_a_slow_reader_stay_intact() {
    let node = FakeNode::start_with_read_pause(Some(Duration::from_micros(300))).await;
    let c = Client::connect_with(node.addr, ConnectOptions { direct_send: true, ..Default::default() }).await.unwrap();
    let t = c.create_table(kv_def("kv")).await.unwrap();
    let mut tasks = Vec::new();
    for w in 0..4i64 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            // 6000 rows x ~1000 bytes: a ~6 MB frame, more than a loopback
            // socket buffers.
            let ops: Vec<_> = (0..6000i64)
                .map(|i| {
                    let k = w * 10_000 + i;
                    KeyOp::insert(
                        t.id,
                        vec![Value::Int(k)],
                        vec![(1, Value::Bytes(vec![(k % 251) as u8; 1000])), (2, Value::Int(k))],
                    )
                })
                .collect();
            c.begin().execute(ops, ExecType::Commit).await.unwrap();
        }));
    }
    // Small requests, each its own task, so they are made while the large
    // ones are still being written rather than one after another.
    for j in 0..400i64 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_micros(50 * (j as u64 % 40))).await;
            let k = 1_000_000 + j;
            c.begin()
                .execute(vec![KeyOp::insert(t.id, vec![Value::Int(k)], vec![(2, Value::Int(k))])], ExecType::Commit)
                .await
                .unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let rows = c.scan(ScanSpec::full(t.id)).await.unwrap().collect_all().await.unwrap();
    assert_eq!(rows.len(), 4 * 6000 + 400);
    for r in rows {
        let Value::Int(k) = r[0] else { panic!("key {:?}", r[0]) };
        assert_eq!(r[2], Value::Int(k));
        if k < 1_000_000 {
            assert_eq!(r[1], Value::Bytes(vec![(k % 251) as u8; 1000]));
        }
    }
}
