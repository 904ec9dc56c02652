//! Partition-aware coordinator choice against a real data node running two TC
//! instances (`tc_instances = 2`).
//!
//! Why this set-up: a cluster has one data node today, so the coordinators a
//! client can choose between are the TC instances of that node (the
//! `tc_instances` knob runs several on the node's one thread, each with its own
//! transaction records). The node gives each instance room for ONE open
//! transaction (`max_transactions = 1`), which makes the node's own answer show
//! where a transaction went: with a transaction held open on TC 0, a new
//! transaction whose first key lies in an even partition must be refused
//! (TooManyTransactions), one in an odd partition must be accepted. A client
//! that placed transactions any other way (always TC 0, by handle, round
//! robin) fails these tests.

mod common;

use common::{kv_def, start_node};
use norr_client::*;
use norr_knobs::Knobs;
use norr_signals::partition::partition_of_pk;

/// Eight partitions, so that partitions map to both TCs.
fn knobs() -> Knobs {
    Knobs { tc_instances: 2, max_transactions: 1, lock_wait_timeout_ms: 300, default_partitions: 8, ..Knobs::default() }
}

fn ins(t: TableId, k: i64) -> KeyOp {
    KeyOp::insert(t, vec![Value::Int(k)], vec![(2, Value::Int(k))])
}

/// Keys 0.. split by the TC instance their partition maps to.
fn keys_by_tc(def: &TableDef, n: i64) -> [Vec<i64>; 2] {
    let mut out = [Vec::new(), Vec::new()];
    for k in 0..n {
        let p = partition_of_pk(def, &[Value::Int(k)]).unwrap();
        out[(p % 2) as usize].push(k);
    }
    out
}

#[tokio::test]
async fn first_operation_partition_chooses_the_tc() {
    let node = start_node(knobs());
    let c = Client::connect(node.local_addr()).await.unwrap();
    assert_eq!(c.tc_instances(), 2);
    let t = c.create_table(kv_def("kv")).await.unwrap();
    assert!(t.partitions >= 2);
    let [even, odd] = keys_by_tc(&t, 40);
    assert!(even.len() >= 4 && odd.len() >= 4, "{even:?} {odd:?}");

    // Hold TC 0's one transaction record.
    let mut held = c.begin();
    assert_eq!(held.coordinator(), None, "chosen at the first request");
    held.execute(vec![ins(t.id, even[0])], ExecType::NoCommit).await.unwrap();
    assert_eq!(held.coordinator(), Some(0));

    for &k in even[1..].iter().chain(&odd) {
        let mut txn = c.begin();
        let r = txn.execute(vec![ins(t.id, k)], ExecType::NoCommit).await;
        if even.contains(&k) {
            let e = r.expect_err("TC 0 is full");
            assert_eq!(e.code(), Some(ErrorCode::TooManyTransactions), "key {k}: {e}");
        } else {
            r.unwrap_or_else(|e| panic!("key {k} (odd partition) must start on TC 1: {e}"));
            assert_eq!(txn.coordinator(), Some(1));
            // The rollback goes to TC 1 and frees it for the next key.
            txn.rollback().await.unwrap();
        }
    }

    // Later batches of the held transaction stay on TC 0, wherever their keys
    // lie: the commit covers both inserts.
    held.execute(vec![ins(t.id, odd[0])], ExecType::NoCommit).await.unwrap();
    held.commit().await.unwrap();
    for k in [even[0], odd[0]] {
        assert_eq!(c.read(t.id, vec![Value::Int(k)]).await.unwrap().unwrap()[2], Value::Int(k));
    }
    // Odd keys rolled back, even keys refused: nothing else is there.
    let rows = c.scan(ScanSpec::full(t.id)).await.unwrap().collect_all().await.unwrap();
    assert_eq!(rows.len(), 2);
}

#[tokio::test]
async fn hints_and_user_partitions() {
    let node = start_node(knobs());
    let c = Client::connect(node.local_addr()).await.unwrap();
    let kv = c.create_table(kv_def("kv")).await.unwrap();
    let [even, odd] = keys_by_tc(&kv, 40);
    // RANGE/LIST-style table: the caller computes each row's partition.
    let mut def = kv_def("ranged");
    def.partitioning = PartitionScheme::User;
    def.partitions = 4;
    let u = c.create_table(def).await.unwrap();

    // begin_hinted: chosen before anything is sent.
    let mut held = c.begin_hinted(&kv, &[Value::Int(odd[0])]);
    assert_eq!(held.coordinator(), Some(1));
    // Its first operation is on an even partition: the hint still decides.
    held.execute(vec![ins(kv.id, even[0])], ExecType::NoCommit).await.unwrap();
    let e = c.begin().execute(vec![ins(kv.id, odd[1])], ExecType::NoCommit).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::TooManyTransactions), "TC 1 holds the hinted transaction");

    // User partitioning: the partition on the first operation decides.
    for part in 0..4u32 {
        let mut op = ins(u.id, 100 + part as i64);
        op.partition = Some(part);
        let mut txn = c.begin();
        let r = txn.execute(vec![op], ExecType::Commit).await;
        if part % 2 == 1 {
            assert_eq!(r.unwrap_err().code(), Some(ErrorCode::TooManyTransactions), "partition {part}");
        } else {
            r.unwrap();
            assert_eq!(txn.coordinator(), Some(0));
        }
    }
    // begin_on_partition names the partition up front.
    let mut txn = c.begin_on_partition(3);
    assert_eq!(txn.coordinator(), Some(1));
    let e = txn.execute(vec![ins(kv.id, even[1])], ExecType::Commit).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::TooManyTransactions));
    held.rollback().await.unwrap();
    let mut txn = c.begin_on_partition(3);
    txn.execute(vec![ins(kv.id, even[1])], ExecType::Commit).await.unwrap();
    assert!(txn.is_finished());
}

#[tokio::test]
async fn scans_follow_their_partition_and_stay_on_their_tc() {
    let node = start_node(Knobs { max_transactions: 16, max_scans: 16, ..knobs() });
    let c = Client::connect(node.local_addr()).await.unwrap();
    let t = c.create_table(kv_def("kv")).await.unwrap();
    let ops: Vec<_> = (0..300).map(|k| ins(t.id, k)).collect();
    c.begin().execute(ops, ExecType::Commit).await.unwrap();

    // A transaction whose first request is a scan pruned to partition 3 runs on TC 1.
    let mut spec = ScanSpec::full(t.id);
    spec.partitions = Some(vec![3]);
    spec.batch_rows = 5;
    spec.lock = LockMode::Exclusive;
    let mut txn = c.begin();
    let rows = txn.scan(spec).await.unwrap().collect_all().await.unwrap();
    assert_eq!(txn.coordinator(), Some(1));
    let want = (0..300).filter(|k| partition_of_pk(&t, &[Value::Int(*k)]).unwrap() == 3).count();
    assert_eq!(rows.len(), want);
    // Its next batch (a delete of a locked row) and commit go to the same TC.
    let k = rows[0][0].clone();
    txn.execute(vec![KeyOp::delete(t.id, vec![k.clone()])], ExecType::Commit).await.unwrap();
    assert_eq!(c.read(t.id, vec![k]).await.unwrap(), None);

    // Standalone scans over several batches, on both TCs (spread by handle).
    for _ in 0..4 {
        let mut spec = ScanSpec::full(t.id);
        spec.batch_rows = 7;
        assert_eq!(c.scan(spec).await.unwrap().collect_all().await.unwrap().len(), 299);
    }
    // Node statistics add up every TC instance.
    let st = c.node_stats().await.unwrap();
    assert_eq!(st.open_transactions, 0);
    assert!(st.committed_transactions >= 2, "{st:?}");
}

/// A client that vanishes with a transaction open on each TC: the node tells
/// every TC instance (API_FAILREQ), so both transactions abort and free their
/// locks. No retry: the writers below wait for the locks (a long lock-wait
/// time-out), which only the aborts release.
#[tokio::test]
async fn a_lost_client_is_cleaned_up_on_every_tc() {
    use norr_signals::{block, wire, BlockRef, Envelope, Priority, Signal, TcKeyReq};
    use norr_transport::handshake::{encode_hello, Hello, HelloReply, MAGIC};
    use norr_transport::{encode_frame, encode_frame_with, FrameDecoder};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let node = start_node(Knobs { max_transactions: 4, lock_wait_timeout_ms: 30_000, ..knobs() });
    let c = Client::connect(node.local_addr()).await.unwrap();
    let t = c.create_table(kv_def("kv")).await.unwrap();
    c.begin().execute(vec![ins(t.id, 1), ins(t.id, 2)], ExecType::Commit).await.unwrap();

    // A raw client: handshake, then lock row 1 through TC 0 and row 2 through TC 1.
    let mut s = tokio::net::TcpStream::connect(node.local_addr()).await.unwrap();
    let mut out = Vec::new();
    let hello = Hello {
        magic: MAGIC,
        wire_version: wire::WIRE_VERSION,
        client_name: "lost".into(),
        kind: Default::default(),
        requested_api_node: None,
    };
    encode_frame(&encode_hello(&hello), &mut out);
    s.write_all(&out).await.unwrap();
    let mut dec = FrameDecoder::new(1 << 20);
    let mut buf = vec![0u8; 65536];
    let mut frames = Vec::new();
    while frames.len() < 4 {
        while let Some(f) = dec.next_frame().unwrap() {
            frames.push(f.to_vec());
        }
        if frames.is_empty() {
            let n = s.read(&mut buf).await.unwrap();
            assert!(n > 0);
            dec.push(&buf[..n]);
            continue;
        }
        if frames.len() == 1 {
            let HelloReply::Welcome { api_node, data_node, tc_instances, .. } =
                norr_transport::handshake::decode_reply(&frames[0]).unwrap()
            else {
                panic!("refused")
            };
            assert_eq!(tc_instances, 2);
            let mut out = Vec::new();
            for (handle, instance, k) in [(1u64, 0u16, 1i64), (2, 1, 2)] {
                let env = Envelope {
                    from: BlockRef::new(api_node, block::API, 0),
                    to: BlockRef::new(data_node, block::TC, instance),
                    prio: Priority::B,
                    signal: Signal::TcKeyReq(Box::new(TcKeyReq {
                        txn: handle,
                        exec: ExecType::NoCommit,
                        ops: vec![KeyOp::update(t.id, vec![Value::Int(k)], vec![(2, Value::Int(666))])],
                    })),
                };
                encode_frame_with(&mut out, |o| wire::encode_into(&env, o));
            }
            s.write_all(&out).await.unwrap();
            frames.push(Vec::new()); // placeholder: the handshake is handled
            continue;
        }
        if frames.len() == 4 {
            break; // the handshake, its placeholder, two replies
        }
        let n = s.read(&mut buf).await.unwrap();
        assert!(n > 0);
        dec.push(&buf[..n]);
    }
    for f in &frames[2..] {
        let env = wire::decode(f).unwrap();
        assert!(matches!(env.signal, Signal::TcKeyConf(_)), "{:?}", env.signal);
    }
    // One transaction on each TC instance.
    assert_eq!(c.node_stats().await.unwrap().open_transactions, 2);
    // Lose the connection with both open; then write both rows.
    drop(s);
    let upd = |k: i64| KeyOp::update(t.id, vec![Value::Int(k)], vec![(2, Value::Int(7))]);
    c.begin().execute(vec![upd(1), upd(2)], ExecType::Commit).await.unwrap();
    assert_eq!(c.read(t.id, vec![Value::Int(2)]).await.unwrap().unwrap()[2], Value::Int(7));
    assert_eq!(c.node_stats().await.unwrap().open_transactions, 0);
}
