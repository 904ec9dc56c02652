//! The client against the real cluster blocks of main (TC, LQH, DICT, DIH of
//! four data nodes in two node groups, norr_node's test kit) behind TCP
//! ports (common/kit_bridge.rs): the distribution comes from the nodes,
//! each transaction starts on its first partition's primary, DDL runs on
//! every node, and a coordinator's crash ends its transactions with the
//! take-over's definite answer; afterwards transactions go to the new
//! primaries. (Real multi-process clusters need the membership block.)

mod common;

use common::fake_cluster::eventually;
use common::kit_bridge::KitCluster;
use common::kv_def;
use norr_client::*;
use norr_signals::partition::partition_of_pk;
use std::time::Duration;

fn opts() -> ConnectOptions {
    ConnectOptions {
        reconnect_backoff_min: Duration::from_millis(20),
        reconnect_backoff_max: Duration::from_millis(160),
        dist_refresh_interval: Duration::from_millis(50),
        takeover_timeout: Duration::from_secs(5),
        ..Default::default()
    }
}

fn key(k: i64) -> Vec<Value> {
    vec![Value::Int(k)]
}

fn primary(d: &Dist, def: &TableDef, k: i64) -> u16 {
    d.primary(def, partition_of_pk(def, &key(k)).unwrap()).unwrap()
}

fn cluster() -> KitCluster {
    KitCluster::start(vec![vec![1, 2], vec![3, 4]], norr_knobs::Knobs::default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_start_on_the_primary_of_the_real_distribution() {
    let cl = cluster();
    let c = Client::connect_cluster(&cl.addrs(), opts()).await.unwrap();
    assert_eq!(c.data_node_status().iter().filter(|s| s.connected).count(), 4);
    // Eight partitions: each node group holds four, primaries alternating
    // between its two nodes (`Dist::replica_order`).
    let mut def = kv_def("kv");
    def.partitions = 8;
    let t = c.create_table(def).await.unwrap();
    assert_eq!(t.partitions, 8);
    // The table's partitions are in the distribution the nodes publish.
    let d = c.refresh_distribution().await.unwrap();
    let mut primaries = std::collections::BTreeSet::new();
    for k in 0..60 {
        let mut txn = c.begin();
        txn.execute(vec![KeyOp::insert(t.id, key(k), vec![(2, Value::Int(k))])], ExecType::Commit).await.unwrap();
        let want = primary(&d, &t, k);
        assert_eq!(txn.coordinator_node(), Some(want), "key {k}");
        assert_eq!(cl.coordinator_of(c.api_node(), txn.id()), Some(want), "key {k}: sent to node {want}");
        assert!(txn.commit_gci().is_some_and(|g| g > 0), "key {k}: a commit has a GCI");
        primaries.insert(want);
    }
    assert_eq!(primaries.len(), 4, "every node is the primary of some keys: {primaries:?}");
    // Every row reads back, by key and by a scan (committed reads).
    for k in 0..60 {
        let row = c.read(t.id, key(k)).await.unwrap().unwrap_or_else(|| panic!("key {k}"));
        assert_eq!(row[2], Value::Int(k));
    }
    let rows = c.scan(ScanSpec::full(t.id)).await.unwrap().collect_all().await.unwrap();
    assert_eq!(rows.len(), 60);
    // A batch of reads is one message, to the first key's primary.
    let before = cl.seen().len();
    let mut txn = c.begin();
    let res = txn.execute((0..60).map(|k| KeyOp::read(t.id, key(k))).collect(), ExecType::Commit).await.unwrap();
    assert!(res.iter().all(|r| matches!(r, OpResult::Ok(Some(_)))));
    let sent: Vec<_> = cl.seen()[before..].iter().filter(|s| s.txn == txn.id()).cloned().collect();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].node, primary(&d, &t, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_coordinator_is_taken_over_and_new_work_goes_to_the_new_primary() {
    let cl = cluster();
    let c = Client::connect_cluster(&cl.addrs(), opts()).await.unwrap();
    let t = c.create_table(kv_def("kv")).await.unwrap();
    let d = c.refresh_distribution().await.unwrap();
    let on1: Vec<i64> = (0..200).filter(|k| primary(&d, &t, *k) == 1).take(3).collect();
    assert_eq!(on1.len(), 3);
    let (committed, open_key, held_key) = (on1[0], on1[1], on1[2]);
    let mut done = c.begin();
    done.execute(vec![KeyOp::insert(t.id, key(committed), vec![(2, Value::Int(1))])], ExecType::Commit).await.unwrap();
    assert_eq!(done.coordinator_node(), Some(1));

    // One transaction with nothing outstanding, one whose commit is on its way.
    let mut open = c.begin();
    open.execute(vec![KeyOp::insert(t.id, key(open_key), vec![])], ExecType::NoCommit).await.unwrap();
    let mut held = c.begin();
    held.execute(vec![KeyOp::insert(t.id, key(held_key), vec![])], ExecType::NoCommit).await.unwrap();
    assert_eq!((open.coordinator_node(), held.coordinator_node()), (Some(1), Some(1)));
    cl.hold_commits(1);
    let held_id = held.id();
    let commit = tokio::spawn(async move { held.commit_with_info().await });
    eventually("node 1 holds the commit", || cl.held().contains(&(1, held_id))).await;

    cl.crash(1);
    // The commit never reached node 1's TC: the node that took over rolls
    // the transaction back and tells this client so (TC_KEY_FAILCONF).
    let e = commit.await.unwrap().unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::AbortedAfterNodeFailure), "{e}");
    assert!(e.is_temporary());
    // The open one is gone with its coordinator.
    let e = open.execute(vec![KeyOp::read(t.id, key(open_key))], ExecType::Commit).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NodeFailure), "{e}");

    // Node 2 is now the primary of node 1's partitions: new transactions go
    // there, and see what committed and nothing of what did not.
    eventually("the client has the distribution without node 1", || {
        c.distribution().is_some_and(|d| primary(&d, &t, committed) == 2)
    })
    .await;
    assert_eq!(c.read(t.id, key(committed)).await.unwrap().map(|r| r[2].clone()), Some(Value::Int(1)));
    assert_eq!(c.read(t.id, key(open_key)).await.unwrap(), None);
    assert_eq!(c.read(t.id, key(held_key)).await.unwrap(), None);
    let mut again = c.begin();
    again.execute(vec![KeyOp::insert(t.id, key(held_key), vec![(2, Value::Int(3))])], ExecType::Commit).await.unwrap();
    assert_eq!(again.coordinator_node(), Some(2));
    assert_eq!(cl.coordinator_of(c.api_node(), again.id()), Some(2));
    assert_eq!(c.read(t.id, key(held_key)).await.unwrap().map(|r| r[2].clone()), Some(Value::Int(3)));
}
