//! The client against a real in-process data node (norr-runtime hosting the
//! norr-txn blocks): DDL, CRUD, batches, transactions, scans, error mapping,
//! lock waits, concurrency, and a client that dies mid-transaction.

mod common;

use common::{insert_and_read_back_concurrently, kv_def, start_node};
use norr_client::*;
use norr_knobs::Knobs;
use std::time::Duration;

fn knobs() -> Knobs {
    Knobs { lock_wait_timeout_ms: 300, ..Knobs::default() }
}

fn row(k: i64, v: &str, n: i64) -> Vec<Value> {
    vec![Value::Int(k), Value::str(v), Value::Int(n)]
}

#[tokio::test]
async fn ddl_crud_batches() {
    let node = start_node(knobs());
    let c = Client::connect(node.local_addr()).await.unwrap();
    let t = c.create_table(kv_def("kv")).await.unwrap();
    assert_eq!(c.get_table("kv").await.unwrap().id, t.id);
    assert!(c.list_tables().await.unwrap().iter().any(|d| d.name == "kv"));
    assert_eq!(c.create_table(kv_def("kv")).await.unwrap_err().code(), Some(ErrorCode::TableExists));

    let ops: Vec<_> = (0..200)
        .map(|i| KeyOp::insert(t.id, vec![Value::Int(i)], vec![(1, Value::str("x")), (2, Value::Int(i))]))
        .collect();
    let mut txn = c.begin();
    assert_eq!(txn.execute(ops, ExecType::Commit).await.unwrap().len(), 200);
    assert!(txn.is_finished());

    let ops: Vec<_> = (0..200).rev().map(|i| KeyOp::read(t.id, vec![Value::Int(i)])).collect();
    let res = c.begin().execute(ops, ExecType::Commit).await.unwrap();
    for (j, r) in res.iter().enumerate() {
        let i = 199 - j as i64;
        assert_eq!(r, &OpResult::Ok(Some(row(i, "x", i))));
    }
    // Projection.
    let mut op = KeyOp::read(t.id, vec![Value::Int(3)]);
    op.projection = vec![2, 0];
    let res = c.begin().execute(vec![op], ExecType::Commit).await.unwrap();
    assert_eq!(res[0], OpResult::Ok(Some(vec![Value::Int(3), Value::Int(3)])));

    // Update + delete + interpreted increment in one transaction, then commit.
    let mut txn = c.begin();
    txn.execute(vec![KeyOp::update(t.id, vec![Value::Int(5)], vec![(1, Value::str("y"))])], ExecType::NoCommit)
        .await
        .unwrap();
    let mut inc = KeyOp::update(t.id, vec![Value::Int(8)], vec![]);
    inc.increments = vec![(2, Value::Int(100))];
    txn.execute(vec![KeyOp::delete(t.id, vec![Value::Int(6)]), inc], ExecType::NoCommit).await.unwrap();
    txn.commit().await.unwrap();
    assert_eq!(c.read(t.id, vec![Value::Int(5)]).await.unwrap(), Some(row(5, "y", 5)));
    assert_eq!(c.read(t.id, vec![Value::Int(6)]).await.unwrap(), None);
    assert_eq!(c.read(t.id, vec![Value::Int(8)]).await.unwrap(), Some(row(8, "x", 108)));
    // Upsert.
    c.begin()
        .execute(vec![KeyOp::write(t.id, vec![Value::Int(6)], vec![(1, Value::str("w"))])], ExecType::Commit)
        .await
        .unwrap();
    assert_eq!(
        c.read(t.id, vec![Value::Int(6)]).await.unwrap(),
        Some(vec![Value::Int(6), Value::str("w"), Value::Null])
    );

    // Rollback undoes.
    let mut txn = c.begin();
    txn.execute(vec![KeyOp::delete(t.id, vec![Value::Int(7)])], ExecType::NoCommit).await.unwrap();
    txn.rollback().await.unwrap();
    assert!(c.read(t.id, vec![Value::Int(7)]).await.unwrap().is_some());
    // A dropped open transaction is rolled back in the background.
    let mut txn = c.begin();
    txn.execute(vec![KeyOp::delete(t.id, vec![Value::Int(7)])], ExecType::NoCommit).await.unwrap();
    drop(txn);
    assert!(c.read(t.id, vec![Value::Int(7)]).await.unwrap().is_some());

    let stats = c.node_stats().await.unwrap();
    assert!(stats.rows >= 200 && stats.data_memory_used_bytes > 0, "{stats:?}");
    c.truncate_table("kv").await.unwrap();
    assert_eq!(c.read(t.id, vec![Value::Int(1)]).await.unwrap(), None);
    c.drop_table("kv").await.unwrap();
    assert_eq!(c.get_table("kv").await.unwrap_err().class(), Some(ErrorClass::Schema));
}

#[tokio::test]
async fn error_cases() {
    let node = start_node(knobs());
    let c = Client::connect(node.local_addr()).await.unwrap();
    let t = c.create_table(kv_def("kv")).await.unwrap();
    c.begin().execute(vec![KeyOp::insert(t.id, vec![Value::Int(1)], vec![])], ExecType::Commit).await.unwrap();

    // Unknown table: schema error.
    let e = c.begin().execute(vec![KeyOp::read(t.id + 100, vec![Value::Int(1)])], ExecType::Commit).await.unwrap_err();
    assert_eq!(e.class(), Some(ErrorClass::Schema), "{e:?}");
    assert!(!e.is_temporary());
    // Duplicate key aborts the transaction and undoes its earlier writes.
    let mut txn = c.begin();
    txn.execute(vec![KeyOp::insert(t.id, vec![Value::Int(2)], vec![])], ExecType::NoCommit).await.unwrap();
    let e = txn.execute(vec![KeyOp::insert(t.id, vec![Value::Int(1)], vec![])], ExecType::Commit).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::DuplicateKey));
    assert!(txn.is_finished());
    assert_eq!(c.read(t.id, vec![Value::Int(2)]).await.unwrap(), None);
    // Missing row.
    let e =
        c.begin().execute(vec![KeyOp::update(t.id, vec![Value::Int(9)], vec![])], ExecType::Commit).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NoSuchRow));
    let e = c.begin().execute(vec![KeyOp::delete(t.id, vec![Value::Int(9)])], ExecType::Commit).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NoSuchRow));
    // Per-operation errors with abort_on_error = false.
    let mut miss = KeyOp::read(t.id, vec![Value::Int(9)]);
    miss.abort_on_error = false;
    let res = c.begin().execute(vec![miss, KeyOp::read(t.id, vec![Value::Int(1)])], ExecType::Commit).await.unwrap();
    assert!(matches!(&res[0], OpResult::Err(e) if e.code == ErrorCode::NoSuchRow), "{res:?}");
    assert!(matches!(&res[1], OpResult::Ok(Some(_))));
    // Wrong types.
    let e = c
        .begin()
        .execute(vec![KeyOp::insert(t.id, vec![Value::Int(3)], vec![(2, Value::str("abc"))])], ExecType::Commit)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::WrongValueType), "{e:?}");
    let e = c.begin().execute(vec![KeyOp::read(t.id, vec![Value::str("k")])], ExecType::Commit).await.unwrap_err();
    assert!(!e.is_temporary(), "{e:?}");
    // Oversized value for the column.
    let e = c
        .begin()
        .execute(
            vec![KeyOp::insert(t.id, vec![Value::Int(4)], vec![(1, Value::Bytes(vec![1; 1001]))])],
            ExecType::Commit,
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::ValueTooLarge), "{e:?}");
    // A request beyond the frame limit fails locally; the connection survives.
    let opts = ConnectOptions { max_frame_bytes: 1 << 20, ..Default::default() };
    let small = Client::connect_with(node.local_addr(), opts).await.unwrap();
    let e = small
        .begin()
        .execute(
            vec![KeyOp::insert(t.id, vec![Value::Int(5)], vec![(1, Value::Bytes(vec![1; 2 << 20]))])],
            ExecType::Commit,
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::ValueTooLarge));
    assert_eq!(small.read(t.id, vec![Value::Int(1)]).await.unwrap().map(|r| r.len()), Some(3));
    // Finished transactions refuse further use.
    let mut txn = c.begin();
    txn.execute(vec![KeyOp::read(t.id, vec![Value::Int(1)])], ExecType::Commit).await.unwrap();
    assert!(matches!(txn.execute(vec![], ExecType::Commit).await, Err(ClientError::Protocol(_))));
}

#[tokio::test]
async fn lock_wait_timeout_is_temporary() {
    let node = start_node(knobs());
    let c = Client::connect(node.local_addr()).await.unwrap();
    let t = c.create_table(kv_def("kv")).await.unwrap();
    c.begin().execute(vec![KeyOp::insert(t.id, vec![Value::Int(1)], vec![])], ExecType::Commit).await.unwrap();
    let mut a = c.begin();
    a.execute(vec![KeyOp::update(t.id, vec![Value::Int(1)], vec![(2, Value::Int(1))])], ExecType::NoCommit)
        .await
        .unwrap();
    let t0 = std::time::Instant::now();
    let mut b = c.begin();
    let e = b
        .execute(vec![KeyOp::update(t.id, vec![Value::Int(1)], vec![(2, Value::Int(2))])], ExecType::Commit)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::LockWaitTimeout), "{e:?}");
    assert!(e.is_temporary());
    assert!(t0.elapsed() >= Duration::from_millis(250));
    assert!(b.is_finished());
    // Committed reads do not wait for the lock and see the old value.
    assert_eq!(c.read(t.id, vec![Value::Int(1)]).await.unwrap(), Some(vec![Value::Int(1), Value::Null, Value::Null]));
    a.commit().await.unwrap();
    // The retry succeeds.
    c.begin()
        .execute(vec![KeyOp::update(t.id, vec![Value::Int(1)], vec![(2, Value::Int(2))])], ExecType::Commit)
        .await
        .unwrap();
    assert_eq!(c.read(t.id, vec![Value::Int(1)]).await.unwrap().unwrap()[2], Value::Int(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_transactions_on_one_connection() {
    let node = start_node(knobs());
    let c = Client::connect(node.local_addr()).await.unwrap();
    let t = c.create_table(kv_def("kv")).await.unwrap();
    insert_and_read_back_concurrently(&c, t.id, 100, 20).await;
    let rows = c.scan(ScanSpec::full(t.id)).await.unwrap().collect_all().await.unwrap();
    assert_eq!(rows.len(), 2000);
}

#[tokio::test]
async fn scans_filters_ranges() {
    let node = start_node(knobs());
    let c = Client::connect(node.local_addr()).await.unwrap();
    let t = c.create_table(kv_def("kv")).await.unwrap();
    let ops: Vec<_> = (0..1000)
        .map(|i| {
            KeyOp::insert(t.id, vec![Value::Int(i)], vec![(1, Value::str(&format!("v{i}"))), (2, Value::Int(i % 10))])
        })
        .collect();
    c.begin().execute(ops, ExecType::Commit).await.unwrap();

    let mut spec = ScanSpec::full(t.id);
    spec.batch_rows = 64;
    let mut s = c.scan(spec.clone()).await.unwrap();
    let mut n = 0;
    while let Some(b) = s.next_batch().await.unwrap() {
        assert!(b.len() <= 64);
        n += b.len();
    }
    assert_eq!(n, 1000);

    spec.filter = Some(Filter::And(vec![
        Filter::Cmp { col: 2, op: CmpOp::Eq, value: Value::Int(3) },
        Filter::Cmp { col: 0, op: CmpOp::Lt, value: Value::Int(500) },
    ]));
    spec.projection = vec![0];
    let rows = c.scan(spec.clone()).await.unwrap().collect_all().await.unwrap();
    assert_eq!(rows.len(), 50);
    assert!(rows.iter().all(|r| r.len() == 1 && r[0].as_i64().unwrap() % 10 == 3));
    spec.filter = Some(Filter::Like { col: 1, pattern: b"v99%".to_vec() });
    spec.projection = vec![];
    assert_eq!(c.scan(spec.clone()).await.unwrap().collect_all().await.unwrap().len(), 11);
    // Bad filter.
    spec.filter = Some(Filter::Cmp { col: 42, op: CmpOp::Eq, value: Value::Int(1) });
    let e = match c.scan(spec.clone()).await {
        Ok(s) => s.collect_all().await.unwrap_err(),
        Err(e) => e,
    };
    assert!(!e.is_temporary(), "{e:?}");

    // Ordered index on n, range scan n in [2, 4), descending, limit.
    let t2 = c
        .create_index(
            "kv",
            IndexDef { id: 0, name: "by_n".into(), columns: vec![2], unique: false, kind: IndexKind::Ordered },
        )
        .await
        .unwrap();
    let idx = t2.index_by_name("by_n").unwrap().id;
    let mut spec = ScanSpec::full(t.id);
    spec.table_version = t2.version;
    spec.index = Some(idx);
    spec.range =
        Some(ScanRange { low: Bound::inclusive(vec![Value::Int(2)]), high: Bound::exclusive(vec![Value::Int(4)]) });
    let rows = c.scan(spec.clone()).await.unwrap().collect_all().await.unwrap();
    assert_eq!(rows.len(), 200);
    assert!(rows.windows(2).all(|w| w[0][2].as_i64() <= w[1][2].as_i64()), "index order");
    spec.descending = true;
    spec.limit = Some(10);
    let rows = c.scan(spec.clone()).await.unwrap().collect_all().await.unwrap();
    assert_eq!(rows.len(), 10);
    assert!(rows.iter().all(|r| r[2] == Value::Int(3)));

    // Early close and drop leave the connection usable.
    let mut s = c.scan(ScanSpec { batch_rows: 10, ..ScanSpec::full(t.id) }).await.unwrap();
    assert!(s.next_batch().await.unwrap().is_some());
    s.close().await.unwrap();
    drop(c.scan(ScanSpec { batch_rows: 10, ..ScanSpec::full(t.id) }).await.unwrap());

    // Locking scan inside a transaction, then update the scanned rows by key.
    let mut txn = c.begin();
    let mut spec = ScanSpec::full(t.id);
    spec.lock = LockMode::Exclusive;
    spec.filter = Some(Filter::Cmp { col: 0, op: CmpOp::Lt, value: Value::Int(5) });
    let rows = txn.scan(spec).await.unwrap().collect_all().await.unwrap();
    assert_eq!(rows.len(), 5);
    let ups: Vec<_> = rows.iter().map(|r| KeyOp::update(t.id, vec![r[0].clone()], vec![(2, Value::Int(-1))])).collect();
    txn.execute(ups, ExecType::Commit).await.unwrap();
    assert_eq!(c.read(t.id, vec![Value::Int(4)]).await.unwrap().unwrap()[2], Value::Int(-1));
    c.drop_index("kv", "by_n").await.unwrap();
}

/// A multi-range scan through the client: the rows of every range, tagged,
/// in one round trip (`Client::round_trips`); a range list over the limit
/// is refused before it is sent, and the connection serves on.
#[tokio::test]
async fn multi_range_scans_cost_one_round_trip() {
    let node = start_node(knobs());
    let c = Client::connect(node.local_addr()).await.unwrap();
    c.create_table(kv_def("mr")).await.unwrap();
    let ix = IndexDef { id: 0, name: "by_n".into(), columns: vec![2], unique: false, kind: IndexKind::Ordered };
    let t = c.create_index("mr", ix).await.unwrap();
    let ops: Vec<_> =
        (0..300).map(|i| KeyOp::insert(t.id, vec![Value::Int(i)], vec![(2, Value::Int(i % 30))])).collect();
    c.begin().execute(ops, ExecType::Commit).await.unwrap();
    let point =
        |k: i64| ScanRange { low: Bound::inclusive(vec![Value::Int(k)]), high: Bound::inclusive(vec![Value::Int(k)]) };
    let keys = [7i64, 0, 29, 7, 31];
    let spec = ScanSpec {
        index: t.index_by_name("by_n").map(|i| i.id),
        ordered: false,
        projection: vec![0],
        batch_rows: 256,
        ranges: keys.iter().map(|k| point(*k)).collect(),
        ..ScanSpec::full(t.id)
    };
    let before = c.round_trips();
    let rows = c.scan(spec.clone()).await.unwrap().collect_all().await.unwrap();
    assert_eq!(c.round_trips() - before, 1, "one request for five ranges");
    let mut got: Vec<(i64, i64)> = rows.iter().map(|r| (r[1].as_i64().unwrap(), r[0].as_i64().unwrap())).collect();
    got.sort();
    let mut want: Vec<(i64, i64)> = Vec::new();
    for (no, k) in keys.iter().enumerate() {
        want.extend((0..300).filter(|i| i % 30 == *k).map(|i| (no as i64, i)));
    }
    want.sort();
    assert_eq!(got, want);
    // In a transaction too.
    let mut txn = c.begin();
    let rows = txn.scan(spec.clone()).await.unwrap().collect_all().await.unwrap();
    assert_eq!(rows.len(), want.len());
    txn.commit().await.unwrap();
    // Over the limit: refused here, not by the node (which would close the
    // connection on a message it cannot decode).
    let over = ScanSpec { ranges: (0..=MAX_SCAN_RANGES as i64).map(point).collect(), ..spec.clone() };
    let before = c.round_trips();
    let e = c.scan(over.clone()).await.unwrap_err();
    assert!(e.to_string().contains(&format!("at most {MAX_SCAN_RANGES} ranges")), "{e}");
    assert_eq!(c.round_trips(), before, "nothing sent");
    let mut txn = c.begin();
    assert!(txn.scan(over).await.is_err());
    txn.rollback().await.unwrap();
    assert_eq!(c.scan(spec).await.unwrap().collect_all().await.unwrap().len(), want.len());
}

/// A client that vanishes mid-transaction (connection reset, no rollback sent):
/// the node aborts its transaction and releases its locks.
#[tokio::test]
async fn node_survives_client_killed_mid_transaction() {
    use norr_signals::{block, wire, BlockRef, Envelope, Priority, Signal, TcKeyReq};
    use norr_transport::handshake::{encode_hello, Hello, HelloReply, MAGIC};
    use norr_transport::{encode_frame, encode_frame_with, FrameDecoder};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let node = start_node(knobs());
    let c = Client::connect(node.local_addr()).await.unwrap();
    let t = c.create_table(kv_def("kv")).await.unwrap();
    c.begin().execute(vec![KeyOp::insert(t.id, vec![Value::Int(1)], vec![])], ExecType::Commit).await.unwrap();

    // A raw client: handshake, lock row 1 in an open transaction, then reset.
    let mut s = tokio::net::TcpStream::connect(node.local_addr()).await.unwrap();
    let mut out = Vec::new();
    let hello = Hello {
        magic: MAGIC,
        wire_version: wire::WIRE_VERSION,
        client_name: "killed".into(),
        kind: Default::default(),
        requested_api_node: None,
    };
    encode_frame(&encode_hello(&hello), &mut out);
    s.write_all(&out).await.unwrap();
    let mut dec = FrameDecoder::new(1 << 20);
    let mut buf = vec![0u8; 65536];
    let next = |dec: &mut FrameDecoder| dec.next_frame().unwrap().map(|f| f.to_vec());
    let welcome = loop {
        if let Some(f) = next(&mut dec) {
            break norr_transport::handshake::decode_reply(&f).unwrap();
        }
        let n = s.read(&mut buf).await.unwrap();
        assert!(n > 0);
        dec.push(&buf[..n]);
    };
    let HelloReply::Welcome { api_node, data_node, .. } = welcome else { panic!("refused") };
    let env = Envelope {
        from: BlockRef::new(api_node, block::API, 0),
        to: BlockRef::new(data_node, block::TC, 0),
        prio: Priority::B,
        signal: Signal::TcKeyReq(Box::new(TcKeyReq {
            txn: 1,
            exec: ExecType::NoCommit,
            ops: vec![KeyOp::update(t.id, vec![Value::Int(1)], vec![(2, Value::Int(666))])],
        })),
    };
    let mut out = Vec::new();
    encode_frame_with(&mut out, |o| wire::encode_into(&env, o));
    s.write_all(&out).await.unwrap();
    let conf = loop {
        if let Some(f) = next(&mut dec) {
            break wire::decode(&f).unwrap();
        }
        let n = s.read(&mut buf).await.unwrap();
        assert!(n > 0);
        dec.push(&buf[..n]);
    };
    assert!(matches!(conf.signal, Signal::TcKeyConf(_)), "{:?}", conf.signal);
    // The row is locked now: a writer times out.
    let e = c
        .begin()
        .execute(vec![KeyOp::update(t.id, vec![Value::Int(1)], vec![(2, Value::Int(7))])], ExecType::Commit)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::LockWaitTimeout));
    // Kill the connection: closed with no rollback sent.
    drop(s);
    // Another client can now write the row (retrying while the node notices).
    let mut ok = false;
    for _ in 0..20 {
        match c
            .begin()
            .execute(vec![KeyOp::update(t.id, vec![Value::Int(1)], vec![(2, Value::Int(7))])], ExecType::Commit)
            .await
        {
            Ok(_) => {
                ok = true;
                break;
            }
            Err(e) if e.is_temporary() => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(e) => panic!("{e:?}"),
        }
    }
    assert!(ok, "row still locked after the client died");
    assert_eq!(c.read(t.id, vec![Value::Int(1)]).await.unwrap().unwrap()[2], Value::Int(7));
}

/// `norr bench` against the real node: load (with memory figures), mixed run.
#[test]
fn bench_against_real_node() {
    use norr_client::bench::{run_bench_report, BenchArgs, Mix};
    let node = start_node(knobs());
    let mut args = BenchArgs::new(node.local_addr().to_string());
    args.threads = 2;
    args.inflight = 4;
    args.batch = 32;
    args.keys = 5000;
    args.mix = Mix::parse("read=60,update=30,insert=5,delete=5").unwrap();
    args.duration = Duration::from_millis(500);
    args.warmup = Duration::from_millis(100);
    args.load = true;
    let r = run_bench_report(&args).unwrap();
    println!("{}", r.to_text());
    assert!(r.ops > 0);
    assert_eq!(r.permanent_errors + r.temporary_errors, 0, "{}", r.to_text());
    let m = r.memory.unwrap();
    assert_eq!(m.rows_loaded, 5000);
    assert!(m.used_after_bytes > m.used_before_bytes);
    assert!(m.overhead_per_row_bytes().is_some());
}

#[tokio::test]
async fn auto_increment_and_unique_index() {
    let node = start_node(knobs());
    let c = Client::connect(node.local_addr()).await.unwrap();
    let t = c.create_table(kv_def("kv")).await.unwrap();
    let a = c.next_auto_inc(t.id, 10).await.unwrap();
    let b = c.next_auto_inc(t.id, 1).await.unwrap();
    assert!(b >= a + 10, "{a} {b}");
    c.bump_auto_inc(t.id, 1000).await.unwrap();
    assert!(c.next_auto_inc(t.id, 1).await.unwrap() > 1000);

    // Unique hash index on v: lookups by it, and duplicates refused.
    let t2 = c
        .create_index(
            "kv",
            IndexDef { id: 0, name: "uv".into(), columns: vec![1], unique: true, kind: IndexKind::UniqueHash },
        )
        .await
        .unwrap();
    let idx = t2.index_by_name("uv").unwrap().id;
    c.begin()
        .execute(
            vec![
                KeyOp::insert(t.id, vec![Value::Int(1)], vec![(1, Value::str("one"))]),
                KeyOp::insert(t.id, vec![Value::Int(2)], vec![(1, Value::str("two"))]),
            ],
            ExecType::Commit,
        )
        .await
        .unwrap();
    let mut op = KeyOp::read(t.id, vec![]);
    op.key = KeyAccess::Unique { index: idx, values: vec![Value::str("two")] };
    let r = c.begin().execute(vec![op], ExecType::Commit).await.unwrap();
    assert_eq!(r[0], OpResult::Ok(Some(vec![Value::Int(2), Value::str("two"), Value::Null])));
    let e = c
        .begin()
        .execute(vec![KeyOp::insert(t.id, vec![Value::Int(3)], vec![(1, Value::str("one"))])], ExecType::Commit)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::DuplicateUniqueKey), "{e:?}");
    let e = c.drop_index("kv", "nope").await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NoSuchIndex));
}

/// A transaction's scans see its own uncommitted inserts, updates and
/// deletes, in index order; a standalone scan and other transactions do not.
#[tokio::test]
async fn scans_in_a_transaction_see_its_own_writes() {
    let node = start_node(knobs());
    let c = Client::connect(node.local_addr()).await.unwrap();
    let t = c.create_table(kv_def("own")).await.unwrap();
    let ops: Vec<_> = (0..100).map(|i| KeyOp::insert(t.id, vec![Value::Int(i)], vec![(2, Value::Int(i))])).collect();
    c.begin().execute(ops, ExecType::Commit).await.unwrap();
    let t2 = c
        .create_index(
            "own",
            IndexDef { id: 0, name: "by_n".into(), columns: vec![2], unique: false, kind: IndexKind::Ordered },
        )
        .await
        .unwrap();
    let idx = t2.index_by_name("by_n").unwrap().id;
    let ns = |rows: &[Vec<Value>]| rows.iter().map(|r| r[2].as_i64().unwrap()).collect::<Vec<_>>();

    let mut txn = c.begin();
    let ops = vec![
        KeyOp::insert(t.id, vec![Value::Int(1000)], vec![(2, Value::Int(15))]),
        KeyOp::update(t.id, vec![Value::Int(3)], vec![(2, Value::Int(14))]),
        KeyOp::delete(t.id, vec![Value::Int(12)]),
    ];
    txn.execute(ops, ExecType::NoCommit).await.unwrap();
    let spec = ScanSpec {
        table_version: t2.version,
        index: Some(idx),
        range: Some(ScanRange {
            low: Bound::inclusive(vec![Value::Int(10)]),
            high: Bound::inclusive(vec![Value::Int(16)]),
        }),
        batch_rows: 2,
        ..ScanSpec::full(t.id)
    };
    let rows = txn.scan(spec.clone()).await.unwrap().collect_all().await.unwrap();
    assert_eq!(ns(&rows), vec![10, 11, 13, 14, 14, 15, 15, 16]);
    let full = txn.scan(ScanSpec::full(t.id)).await.unwrap().collect_all().await.unwrap();
    assert_eq!(full.len(), 100);
    assert!(full.iter().any(|r| r[0] == Value::Int(1000)) && !full.iter().any(|r| r[0] == Value::Int(12)));
    // Outside the transaction: committed rows only.
    let rows = c.scan(spec.clone()).await.unwrap().collect_all().await.unwrap();
    assert_eq!(ns(&rows), vec![10, 11, 12, 13, 14, 15, 16]);
    txn.commit().await.unwrap();
    let rows = c.scan(spec).await.unwrap().collect_all().await.unwrap();
    assert_eq!(ns(&rows), vec![10, 11, 13, 14, 14, 15, 15, 16]);
}

/// `reply_spin`: replies within the spin are taken without sleeping, and a
/// reply that takes longer (a lock wait) still arrives after the spin ran out.
#[tokio::test]
async fn reply_spin_serves_quick_and_slow_replies() {
    let node = start_node(knobs());
    let opts = ConnectOptions { reply_spin: Duration::from_millis(2), ..Default::default() };
    let c = Client::connect_with(node.local_addr(), opts).await.unwrap();
    let t = c.create_table(kv_def("spin")).await.unwrap();
    for i in 0..20 {
        let op = KeyOp::insert(t.id, vec![Value::Int(i)], vec![(1, Value::str("s")), (2, Value::Int(i))]);
        c.begin().execute(vec![op], ExecType::Commit).await.unwrap();
    }
    for i in 0..20 {
        assert_eq!(c.read(t.id, vec![Value::Int(i)]).await.unwrap(), Some(row(i, "s", i)));
    }
    let holder = Client::connect(node.local_addr()).await.unwrap();
    let mut h = holder.begin();
    h.execute(vec![KeyOp::update(t.id, vec![Value::Int(1)], vec![(2, Value::Int(100))])], ExecType::NoCommit)
        .await
        .unwrap();
    let waiter = {
        let c = c.clone();
        let op = KeyOp::update(t.id, vec![Value::Int(1)], vec![(2, Value::Int(200))]);
        tokio::spawn(async move { c.begin().execute(vec![op], ExecType::Commit).await })
    };
    // The waiter cannot finish before the holder commits (row lock), however
    // long this takes; 20 ms lets its spin run out first.
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!waiter.is_finished());
    h.execute(vec![], ExecType::Commit).await.unwrap();
    waiter.await.unwrap().unwrap();
    assert_eq!(c.read(t.id, vec![Value::Int(1)]).await.unwrap(), Some(row(1, "s", 200)));
}

/// A data node that also listens on a Unix socket: a client on the same host
/// connects through it and works as over TCP; a stale socket file is
/// replaced, a live node's socket is refused, and the file goes with the node.
#[tokio::test]
async fn unix_socket_connection() {
    let dir = std::env::temp_dir().join(format!("norr-unix-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("datad.sock");
    // A stale socket file: bound, then its listener gone.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists());

    let start = |path: &std::path::Path| {
        let knobs = knobs();
        let cfg = norr_runtime::DataNodeConfig {
            node_id: 1,
            listen: "127.0.0.1:0".parse().unwrap(),
            knobs: knobs.clone(),
            cluster: None,
        };
        let opts = norr_runtime::RuntimeOptions { unix_socket: Some(path.to_path_buf()), ..Default::default() };
        norr_runtime::start_data_node_with(cfg, opts, norr_txn::build_data_node(1, &knobs))
    };
    let node = start(&path).expect("stale socket file is replaced");
    let err = start(&path).err().expect("a live node's socket must not be taken over");
    assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse, "{err}");

    let c = Client::connect_unix(&path, ConnectOptions::default()).await.unwrap();
    let t = c.create_table(kv_def("kv")).await.unwrap();
    insert_and_read_back_concurrently(&c, t.id, 10, 20).await;
    let rows = c.scan(ScanSpec::full(t.id)).await.unwrap().collect_all().await.unwrap();
    assert_eq!(rows.len(), 200);
    // TCP clients still see the same node.
    let tcp = Client::connect(node.local_addr()).await.unwrap();
    assert_eq!(
        tcp.read(t.id, vec![Value::Int(1)]).await.unwrap(),
        Some(vec![Value::Int(1), Value::Null, Value::Int(1)])
    );

    drop((c, tcp));
    node.shutdown();
    node.join().unwrap();
    assert!(!path.exists(), "socket file left behind");
    let err = Client::connect_unix(&path, ConnectOptions::default()).await.err().unwrap();
    assert!(matches!(err, ClientError::NotConnected(_)), "{err:?}");
    let _ = std::fs::remove_dir(&dir);
}

/// A client may ask the data node for its API node id (what a cluster
/// client does, so that every node knows it by one id): a free id is taken,
/// a taken one refused with the reason, and free again once its holder left.
#[tokio::test]
async fn a_requested_api_node_id() {
    let node = start_node(knobs());
    let want = ConnectOptions { api_node_id: Some(4242), ..Default::default() };
    let a = Client::connect_with(node.local_addr(), want.clone()).await.unwrap();
    assert_eq!(a.api_node(), 4242);
    let t = a.create_table(kv_def("kv")).await.unwrap();
    a.begin().execute(vec![KeyOp::insert(t.id, vec![Value::Int(1)], vec![])], ExecType::Commit).await.unwrap();
    let e = Client::connect_with(node.local_addr(), want.clone()).await.unwrap_err();
    assert!(e.to_string().contains("API node id 4242 is in use"), "{e}");
    let low = ConnectOptions { api_node_id: Some(5), ..Default::default() };
    let e = Client::connect_with(node.local_addr(), low).await.unwrap_err();
    assert!(e.to_string().contains("below 100"), "{e}");
    // Not asking: the node chooses, and never the taken id.
    let b = Client::connect(node.local_addr()).await.unwrap();
    assert_ne!(b.api_node(), 4242);
    // The holder goes: the id is released once the node has cleaned up after it.
    drop(a);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let again = loop {
        match Client::connect_with(node.local_addr(), want.clone()).await {
            Ok(c) => break c,
            Err(e) => {
                let m = e.to_string();
                assert!(m.contains("in use") || m.contains("being released"), "{m}");
                assert!(std::time::Instant::now() < deadline, "4242 never came free: {m}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    assert_eq!(again.api_node(), 4242);
    assert_eq!(again.read(t.id, vec![Value::Int(1)]).await.unwrap().unwrap()[0], Value::Int(1));
}

/// A client of a lone data node connects again by itself when the node
/// comes back (a SQL node must not fail every later statement).
#[tokio::test]
async fn the_client_reconnects_to_a_restarted_node() {
    let node = start_node(knobs());
    let addr = node.local_addr();
    let o = ConnectOptions { reconnect_backoff_min: Duration::from_millis(10), ..Default::default() };
    let c = Client::connect_with(addr, o).await.unwrap();
    let t = c.create_table(kv_def("kv")).await.unwrap();
    let mut open = c.begin();
    open.execute(vec![KeyOp::insert(t.id, vec![Value::Int(1)], vec![])], ExecType::NoCommit).await.unwrap();
    node.shutdown();
    drop(node);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while c.is_connected() {
        assert!(std::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let e = c.list_tables().await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NotConnected));
    // The same address, a new (empty: in memory) node.
    let cfg = norr_runtime::DataNodeConfig { node_id: 1, listen: addr, knobs: knobs(), cluster: None };
    let node = norr_runtime::start_data_node_with(cfg, Default::default(), norr_txn::build_data_node(1, &knobs()))
        .expect("the port is free again");
    assert_eq!(c.reconnect_count(), 0);
    assert!(c.wait_connected(Duration::from_secs(10)).await);
    assert_eq!(c.reconnect_count(), 1);
    // The transaction of the old node is gone; new work runs on the new node.
    let e = open.commit().await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NodeFailure), "{e}");
    let t = c.create_table(kv_def("kv")).await.unwrap();
    c.begin().execute(vec![KeyOp::insert(t.id, vec![Value::Int(2)], vec![])], ExecType::Commit).await.unwrap();
    assert_eq!(c.read(t.id, vec![Value::Int(2)]).await.unwrap().unwrap()[0], Value::Int(2));
    drop(node);
}
