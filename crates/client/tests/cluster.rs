//! The client against several fake data nodes (common/fake_cluster.rs):
//! routing to the primary, one API node id on every node, reconnects with
//! backoff, distribution refresh, coordinator failure (take-over answers,
//! the unknown-outcome time-out), and the single-node path.

mod common;

use common::fake_cluster::{eventually, node_set, FakeCluster};
use common::kv_def;
use norr_client::*;
use norr_signals::partition::partition_of_pk;
use norr_signals::TxnOutcome;
use std::time::{Duration, Instant};

fn opts() -> ConnectOptions {
    ConnectOptions {
        reconnect_backoff_min: Duration::from_millis(20),
        reconnect_backoff_max: Duration::from_millis(160),
        dist_refresh_interval: Duration::from_millis(50),
        ..Default::default()
    }
}

fn key(k: i64) -> Vec<Value> {
    vec![Value::Int(k)]
}

/// The node holding the primary of `k`'s partition.
fn primary(d: &Dist, def: &TableDef, k: i64) -> u16 {
    d.primary(def, partition_of_pk(def, &key(k)).unwrap()).unwrap()
}

/// The cluster's distribution, a newer one in which the primaries change
/// places (the node group listed the other way round), and a key whose
/// primary moves from node 1 to node 2.
fn swapped_primaries(cl: &FakeCluster, t: &TableDef) -> (Dist, Dist, i64) {
    let before = cl.dist();
    let k = (0..40).find(|k| primary(&before, t, *k) == 1).unwrap();
    let mut after = before.clone();
    after.node_groups = vec![vec![2, 1]];
    after.version = before.version + 1;
    assert_eq!(primary(&after, t, k), 2);
    (before, after, k)
}

fn connected(c: &Client, node: u16) -> bool {
    c.data_node_status().iter().any(|s| s.node_id == Some(node) && s.connected)
}

async fn insert(c: &Client, t: &TableDef, k: i64) -> Transaction {
    let mut txn = c.begin();
    txn.execute(vec![KeyOp::insert(t.id, key(k), vec![(2, Value::Int(k))])], ExecType::NoCommit).await.unwrap();
    txn
}

#[tokio::test]
async fn transactions_start_on_the_primary_and_batches_are_one_message() {
    let cl = FakeCluster::start(2, 2).await;
    let c = Client::connect_cluster(&cl.addrs(), opts()).await.unwrap();
    // One API node id on every node: the second node was asked for the first's.
    assert_eq!(cl.api_ids(1), vec![c.api_node()]);
    assert_eq!(cl.api_ids(2), vec![c.api_node()]);
    assert_eq!(cl.requested_ids(1), vec![None]);
    assert_eq!(cl.requested_ids(2), vec![Some(c.api_node())]);
    assert_eq!(c.distribution(), Some(cl.dist()), "fetched at connect");
    let t = c.create_table(kv_def("kv")).await.unwrap();
    let d = cl.dist();
    let mut used = Vec::new();
    for k in 0..40 {
        let mut txn = c.begin();
        txn.execute(vec![KeyOp::insert(t.id, key(k), vec![])], ExecType::Commit).await.unwrap();
        let want = primary(&d, &t, k);
        assert_eq!(txn.coordinator_node(), Some(want), "key {k}");
        assert!(cl.received(want).iter().any(|r| r.txn == txn.id()), "node {want} got key {k}'s transaction");
        used.push(want);
    }
    assert_eq!(node_set(used), node_set([1, 2]), "both nodes are primaries of some keys");
    assert_eq!(cl.rows(t.id), 40);
    // A batch of 40 reads: one message, to the first key's primary.
    let mut txn = c.begin();
    let res = txn.execute((0..40).map(|k| KeyOp::read(t.id, key(k))).collect(), ExecType::Commit).await.unwrap();
    assert!(res.iter().all(|r| matches!(r, OpResult::Ok(Some(_)))));
    let node = primary(&d, &t, 0);
    let got: Vec<_> = cl.received(node).into_iter().filter(|r| r.txn == txn.id()).collect();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].ops, 40);
    assert!(cl.received(3 - node).iter().all(|r| r.txn != txn.id()));
    // begin_hinted chooses at once.
    let hinted = c.begin_hinted(&t, &key(7));
    assert_eq!(hinted.coordinator_node(), Some(primary(&d, &t, 7)));
}

#[tokio::test]
async fn a_lost_node_is_routed_around_and_reconnected_with_backoff() {
    let cl = FakeCluster::start(2, 2).await;
    let c = Client::connect_cluster(&cl.addrs(), opts()).await.unwrap();
    let t = c.create_table(kv_def("kv")).await.unwrap();
    let d = cl.dist();
    let on2: Vec<i64> = (0..40).filter(|k| primary(&d, &t, *k) == 2).collect();
    assert!(!on2.is_empty());

    cl.kill(2);
    eventually("the client notices node 2 is gone", || !connected(&c, 2)).await;
    assert!(c.is_connected(), "node 1 still is");
    // Transactions whose primary is on node 2 run on node 1 meanwhile.
    for k in &on2 {
        let mut txn = c.begin();
        txn.execute(vec![KeyOp::insert(t.id, key(*k), vec![])], ExecType::Commit).await.unwrap();
        assert_eq!(txn.coordinator_node(), Some(1));
    }
    // Reconnect attempts back off: 20, 40, 80, 160, 160... ms.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let attempts = cl.attempts_while_down(2);
    assert!((2..=15).contains(&attempts), "{attempts} attempts in a second");

    cl.restart(2);
    assert!(c.wait_connected(Duration::from_secs(10)).await);
    // Back with the same API node id, asked for.
    assert_eq!(cl.api_ids(2), vec![c.api_node()]);
    assert_eq!(cl.requested_ids(2).last(), Some(&Some(c.api_node())));
    let k = on2[0];
    let mut txn = c.begin();
    txn.execute(vec![KeyOp::read(t.id, key(k))], ExecType::Commit).await.unwrap();
    assert_eq!(txn.coordinator_node(), Some(2));
}

#[tokio::test]
async fn distribution_refresh_moves_transactions_to_new_primaries() {
    let cl = FakeCluster::start(2, 2).await;
    let c = Client::connect_cluster(&cl.addrs(), opts()).await.unwrap();
    let t = c.create_table(kv_def("kv")).await.unwrap();
    let (before, after, k) = swapped_primaries(&cl, &t);
    cl.set_dist(after.clone());
    eventually("the client has the new distribution", || c.distribution() == Some(after.clone())).await;
    let mut txn = c.begin();
    txn.execute(vec![KeyOp::insert(t.id, key(k), vec![])], ExecType::Commit).await.unwrap();
    assert_eq!(txn.coordinator_node(), Some(2));
    // An older distribution (a node that has not caught up) does not win.
    cl.set_dist(before.clone());
    assert_eq!(c.refresh_distribution().await.unwrap(), after);
    // Unless the client lost every node (a cluster restart starts over).
    cl.kill(1);
    cl.kill(2);
    eventually("the distribution is dropped with the last node", || c.distribution().is_none()).await;
    assert!(!c.is_connected());
    cl.restart(1);
    cl.restart(2);
    assert!(c.wait_connected(Duration::from_secs(10)).await);
    eventually("the restarted cluster's distribution", || c.distribution() == Some(before.clone())).await;
}

/// The distribution is taken from every connected node, the newest kept:
/// the first node in the configuration may be one that just restarted and
/// knows only an old distribution (it refuses transactions until its DIH
/// has the cluster's), and asking only it kept routing there.
#[tokio::test]
async fn the_newest_distribution_of_any_node_wins() {
    let cl = FakeCluster::start(2, 2).await;
    let c = Client::connect_cluster(&cl.addrs(), opts()).await.unwrap();
    let t = c.create_table(kv_def("kv")).await.unwrap();
    let (before, after, k) = swapped_primaries(&cl, &t);
    // Node 1, first in the configuration, still shows the old one.
    cl.set_node_dist(1, Some(before.clone()));
    cl.set_dist(after.clone());
    assert_eq!(c.refresh_distribution().await.unwrap(), after);
    let mut txn = c.begin();
    txn.execute(vec![KeyOp::insert(t.id, key(k), vec![])], ExecType::Commit).await.unwrap();
    assert_eq!(txn.coordinator_node(), Some(2), "routed by the newest distribution");
}

#[tokio::test]
async fn a_commit_whose_coordinator_fails_gets_the_take_over_outcome() {
    let cl = FakeCluster::start(2, 2).await;
    let c = Client::connect_cluster(&cl.addrs(), opts()).await.unwrap();
    let t = c.create_table(kv_def("kv")).await.unwrap();
    let d = cl.dist();
    let on1: Vec<i64> = (0..200).filter(|k| primary(&d, &t, *k) == 1).take(4).collect();

    // Committed, and the answer comes after the client saw the node fail.
    cl.hold_commits(1, true);
    let txn = insert(&c, &t, on1[0]).await;
    let id = txn.id();
    let commit = tokio::spawn(txn.commit_with_info());
    assert_eq!(cl.held(1, 1).await, vec![(c.api_node(), id)]);
    cl.kill(1);
    eventually("the client notices node 1 is gone", || !connected(&c, 1)).await;
    cl.send_fail_conf(2, c.api_node(), id, TxnOutcome::Committed, 77);
    assert_eq!(commit.await.unwrap().unwrap(), CommitInfo { gci: 77 });
    cl.restart(1);
    assert!(c.wait_connected(Duration::from_secs(10)).await);

    // Rolled back, and the answer comes before the client saw the failure
    // (the survivor was quicker than the broken connection's EOF).
    let txn = insert(&c, &t, on1[1]).await;
    let id = txn.id();
    let commit = tokio::spawn(txn.commit());
    cl.held(1, 2).await;
    cl.send_fail_conf(2, c.api_node(), id, TxnOutcome::RolledBack, 0);
    cl.kill(1);
    let e = commit.await.unwrap().unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::AbortedAfterNodeFailure), "{e}");
    assert!(e.is_temporary());
    cl.restart(1);
    assert!(c.wait_connected(Duration::from_secs(10)).await);

    // A commit batch that carried writes: committed, their results stand.
    let mut txn = c.begin();
    let batch = vec![KeyOp::insert(t.id, key(on1[2]), vec![]), KeyOp::insert(t.id, key(on1[3]), vec![])];
    let id = txn.id();
    let exec = tokio::spawn(async move {
        let r = txn.execute(batch, ExecType::Commit).await;
        (r, txn.commit_gci())
    });
    cl.held(1, 3).await;
    cl.kill(1);
    cl.send_fail_conf(2, c.api_node(), id, TxnOutcome::Committed, 78);
    let (r, gci) = exec.await.unwrap();
    assert_eq!(r.unwrap(), vec![OpResult::Ok(None), OpResult::Ok(None)]);
    assert_eq!(gci, Some(78));
}

#[tokio::test]
async fn an_unanswered_commit_fails_as_unknown_after_the_take_over_timeout() {
    let cl = FakeCluster::start(2, 2).await;
    let o = ConnectOptions { takeover_timeout: Duration::from_millis(300), ..opts() };
    let c = Client::connect_cluster(&cl.addrs(), o).await.unwrap();
    let t = c.create_table(kv_def("kv")).await.unwrap();
    let k = (0..40).find(|k| primary(&cl.dist(), &t, *k) == 2).unwrap();
    cl.hold_commits(2, true);
    let txn = insert(&c, &t, k).await;
    let commit = tokio::spawn(txn.commit());
    cl.held(2, 1).await;
    let killed = Instant::now();
    cl.kill(2);
    let e = commit.await.unwrap().unwrap_err();
    assert!(killed.elapsed() >= Duration::from_millis(300), "waited {:?}", killed.elapsed());
    assert_eq!(e.code(), Some(ErrorCode::OutcomeUnknown), "{e}");
    assert_eq!(e.class(), Some(ErrorClass::UnknownResult));
    assert!(!e.is_temporary(), "never 'just retry' a commit that may have happened");
}

#[tokio::test]
async fn a_coordinator_failure_without_a_write_commit_outstanding_fails_at_once() {
    let cl = FakeCluster::start(2, 2).await;
    // Waiting for a take-over answer here would show as a minute's delay.
    let o = ConnectOptions { takeover_timeout: Duration::from_secs(60), ..opts() };
    let c = Client::connect_cluster(&cl.addrs(), o).await.unwrap();
    let t = c.create_table(kv_def("kv")).await.unwrap();
    let d = cl.dist();
    let on1: Vec<i64> = (0..40).filter(|k| primary(&d, &t, *k) == 1).collect();
    let started = Instant::now();

    // A read-only transaction's commit: nothing to commit, no answer to wait for.
    cl.hold_commits(1, true);
    let mut reader = c.begin();
    let mut op = KeyOp::read(t.id, key(on1[0]));
    op.abort_on_error = false; // no such row: an error result, the transaction goes on
    reader.execute(vec![op], ExecType::NoCommit).await.unwrap();
    let commit = tokio::spawn(reader.commit());
    cl.held(1, 1).await;

    // A transaction that wrote, with nothing outstanding at the failure.
    cl.hold_commits(1, false);
    let idle_writer = insert(&c, &t, on1[1]).await;
    cl.kill(1);
    let e = commit.await.unwrap().unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NodeFailure), "{e}");
    assert!(e.is_temporary());
    eventually("the client notices node 1 is gone", || !connected(&c, 1)).await;
    let e = idle_writer.commit().await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NodeFailure), "{e}");
    assert!(started.elapsed() < Duration::from_secs(30), "no take-over wait: {:?}", started.elapsed());

    // The retry runs on the survivor.
    let mut retry = c.begin();
    retry.execute(vec![KeyOp::insert(t.id, key(on1[1]), vec![])], ExecType::Commit).await.unwrap();
    assert_eq!(retry.coordinator_node(), Some(2));
}

#[tokio::test]
async fn calls_on_a_transaction_of_a_failed_node_fail_and_scans_end() {
    let cl = FakeCluster::start(2, 2).await;
    let c = Client::connect_cluster(&cl.addrs(), opts()).await.unwrap();
    let t = c.create_table(kv_def("kv")).await.unwrap();
    c.begin().execute((0..100).map(|k| KeyOp::insert(t.id, key(k), vec![])).collect(), ExecType::Commit).await.unwrap();
    let d = cl.dist();
    let k = (0..40).find(|k| primary(&d, &t, *k) == 2).unwrap();
    let mut txn = insert(&c, &t, 1000 + k).await;
    let node = txn.coordinator_node().unwrap();
    // A scan inside the transaction runs on its coordinator.
    let mut scan = txn.scan(ScanSpec { batch_rows: 10, ..ScanSpec::full(t.id) }).await.unwrap();
    assert_eq!(scan.next_batch().await.unwrap().unwrap().len(), 10);
    cl.kill(node);
    let e = scan.next_batch().await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NodeFailure), "{e}");
    assert!(e.is_temporary());
    let e = txn.execute(vec![KeyOp::read(t.id, key(1))], ExecType::NoCommit).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NodeFailure), "{e}");
    assert!(txn.is_finished());
    txn.rollback().await.unwrap();
    // Standalone scans run on the connected node.
    let rows = c.scan(ScanSpec::full(t.id)).await.unwrap().collect_all().await.unwrap();
    assert_eq!(rows.len(), 100);
}

#[tokio::test]
async fn one_data_node_reconnects_and_a_lost_commit_is_unknown_at_once() {
    let cl = FakeCluster::start(1, 1).await;
    let o = ConnectOptions { takeover_timeout: Duration::from_secs(60), ..opts() };
    let c = Client::connect_with(cl.addr(1), o).await.unwrap();
    assert_eq!(c.distribution(), None, "one node: no distribution fetched");
    let t = c.create_table(kv_def("kv")).await.unwrap();
    cl.hold_commits(1, true);
    let txn = insert(&c, &t, 1).await;
    let commit = tokio::spawn(txn.commit());
    cl.held(1, 1).await;
    let killed = Instant::now();
    cl.kill(1);
    // Nobody else can tell: unknown, without waiting for a take-over.
    let e = commit.await.unwrap().unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::OutcomeUnknown), "{e}");
    assert!(killed.elapsed() < Duration::from_secs(30));
    eventually("the client notices", || !c.is_connected()).await;
    let e = c.list_tables().await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NotConnected));
    cl.hold_commits(1, false);
    cl.restart(1);
    assert!(c.wait_connected(Duration::from_secs(10)).await);
    // A lone node without mgmd chooses the id; the client does not ask.
    assert_eq!(cl.requested_ids(1), vec![None, None]);
    assert_eq!(c.api_node(), cl.api_ids(1)[0]);
    c.begin().execute(vec![KeyOp::insert(t.id, key(2), vec![])], ExecType::Commit).await.unwrap();
    assert_eq!(c.read(t.id, key(2)).await.unwrap().unwrap()[0], Value::Int(2));
}

#[test]
fn the_blocking_client_on_a_cluster() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cl = rt.block_on(FakeCluster::start(2, 2));
    let c = blocking::Client::connect_cluster(&cl.addrs(), opts()).unwrap();
    assert_eq!(c.data_node_status().len(), 2);
    assert!(c.wait_connected(Duration::from_secs(5)));
    let t = c.create_table(kv_def("kv")).unwrap();
    let mut txn = c.begin();
    txn.execute(vec![KeyOp::insert(t.id, key(1), vec![])], ExecType::NoCommit).unwrap();
    assert_eq!(txn.coordinator_node(), Some(primary(&cl.dist(), &t, 1)));
    assert_eq!(txn.commit_with_info().unwrap(), CommitInfo { gci: 0 }, "the fake node reports GCI 0");
    assert_eq!(c.read(t.id, key(1)).unwrap().unwrap()[0], Value::Int(1));
    assert_eq!(c.distribution().unwrap(), cl.dist());
}

#[tokio::test]
async fn addresses_given_twice_or_none_reachable_are_errors() {
    let cl = FakeCluster::start(2, 2).await;
    let mut addrs = cl.addrs();
    addrs.push(addrs[0].clone());
    let e = Client::connect_cluster(&addrs, opts()).await.unwrap_err();
    assert!(e.to_string().contains("given twice"), "{e}");
    cl.kill(1);
    cl.kill(2);
    let e = Client::connect_cluster(&cl.addrs(), opts()).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NotConnected), "{e}");
    assert!(e.to_string().contains("no data node could be reached"), "{e}");
    // One reachable is enough; the other joins when it comes.
    cl.restart(1);
    let c = Client::connect_cluster(&cl.addrs(), opts()).await.unwrap();
    assert!(c.is_connected() && !connected(&c, 2));
    cl.restart(2);
    assert!(c.wait_connected(Duration::from_secs(10)).await);
    assert_eq!(cl.api_ids(2), vec![c.api_node()]);
}
