//! A real cluster of processes: `norr mgmd` and data nodes started with
//! `norr datad --mgm`, written to through the native client, one data node
//! killed with SIGKILL: every acknowledged write stays readable and the
//! survivors keep taking writes; the killed node started again rejoins,
//! copies what it missed, and can then carry the cluster alone.

mod support;

use norr_client::blocking::Client;
use norr_client::*;
use norr_mgmd::protocol::{MgmCommand, MgmReply, NodeState};
use norr_mgmd::session::run_command;
use std::path::Path;
use std::time::{Duration, Instant};
use support::proc_cluster::{Cluster, START};

const NORR: &str = env!("CARGO_BIN_EXE_norr");

fn client(c: &Cluster, i: usize) -> Client {
    Client::connect(c.data[i].1.as_str()).unwrap()
}

fn kv_def(name: &str) -> TableDef {
    table_def(
        name,
        vec![
            ColumnDef::new("k", ColumnType::BigInt { unsigned: false }).not_null(),
            ColumnDef::new("v", ColumnType::BigInt { unsigned: false }),
        ],
        vec![0],
    )
}

fn put(c: &Client, t: TableId, k: i64, v: i64) -> Result<(), ClientError> {
    let mut txn = c.begin();
    txn.execute(vec![KeyOp::write(t, vec![Value::Int(k)], vec![(1, Value::Int(v))])], ExecType::Commit)?;
    Ok(())
}

/// Write until it succeeds: right after a node failure a transaction may be
/// aborted with a temporary error (node failure, wrong replica); the
/// application retries, as with NDB. Only temporary errors are retried.
fn put_retrying(c: &Client, t: TableId, k: i64, v: i64) {
    let deadline = Instant::now() + START;
    loop {
        match put(c, t, k, v) {
            Ok(()) => return,
            Err(e) if e.is_temporary() && Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("write of key {k} failed: {e}"),
        }
    }
}

fn read_all(c: &Client, t: TableId) -> Vec<(i64, i64)> {
    let mut rows: Vec<(i64, i64)> = c
        .scan(ScanSpec::full(t))
        .unwrap()
        .collect_all()
        .unwrap()
        .into_iter()
        .map(|r| match (&r[0], &r[1]) {
            (Value::Int(k), Value::Int(v)) => (*k, *v),
            other => panic!("unexpected row {other:?}"),
        })
        .collect();
    rows.sort_unstable();
    rows
}

#[test]
fn a_killed_data_node_loses_no_acknowledged_write_and_rejoins() {
    let mut cluster = Cluster::start(Path::new(NORR), "kill", 2, 2, "heartbeat_interval_ms = 100");
    cluster.wait_started(&[2, 3]);
    let v = cluster.view().unwrap();
    let president = v.president.expect("a president is reported");
    assert!([2, 3].contains(&president), "{president}");
    for id in [2, 3] {
        let n = v.nodes.iter().find(|n| n.id == id).unwrap();
        assert_eq!(n.node_group, Some(0), "both data nodes form node group 0");
    }

    // Node 2 (index 0) serves the client throughout; node 3 is killed.
    let c = client(&cluster, 0);
    let t = c.create_table(kv_def("kv")).unwrap();
    for k in 0..200 {
        put(&c, t.id, k, k).unwrap();
    }
    // Both nodes are primary for a share of the partitions (reports reach
    // mgmd every half second).
    let deadline = Instant::now() + START;
    loop {
        let v = cluster.view().unwrap();
        let shares: Vec<(u32, u32)> = [2, 3]
            .iter()
            .map(|id| v.nodes.iter().find(|n| n.id == *id).map_or((0, 0), |n| (n.primary_partitions, n.partitions)))
            .collect();
        if shares.iter().all(|(p, _)| *p > 0) {
            assert_eq!(shares[0].0 + shares[1].0, shares[0].1, "every partition has one primary: {shares:?}");
            assert_eq!(shares[0].1, shares[1].1, "both nodes hold every partition: {shares:?}");
            break;
        }
        assert!(Instant::now() < deadline, "primaries not balanced: {v:?}");
        std::thread::sleep(Duration::from_millis(100));
    }

    cluster.kill(1);
    // Writes after the failure: retried through the temporary errors of
    // transactions caught by it.
    for k in 200..400 {
        put_retrying(&c, t.id, k, k);
    }
    for k in 0..100 {
        put_retrying(&c, t.id, k, k + 1000);
    }
    let expect: Vec<(i64, i64)> = (0..400).map(|k| (k, if k < 100 { k + 1000 } else { k })).collect();
    assert_eq!(read_all(&c, t.id), expect, "every acknowledged write is there");

    // Node 3 comes back, copies what it missed, and starts.
    let p = cluster.spawn_node(1);
    cluster.nodes[1] = Some(p);
    cluster.wait_started(&[2, 3]);
    for k in 400..450 {
        put_retrying(&c, t.id, k, k);
    }
    drop(c);

    // Now node 2 goes: node 3 alone holds every row.
    cluster.kill(0);
    let c3 = client(&cluster, 1);
    let deadline = Instant::now() + START;
    let rows = loop {
        match c3.scan(ScanSpec::full(t.id)).and_then(|s| s.collect_all()) {
            Ok(rows) if rows.len() == 450 => break rows,
            Ok(_) | Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Ok(rows) => panic!("node 3 alone has {} rows of 450", rows.len()),
            Err(e) => panic!("node 3 alone cannot scan: {e}\n{}", cluster.logs()),
        }
    };
    assert_eq!(rows.len(), 450);
    let mut got = read_all(&c3, t.id);
    got.truncate(400);
    assert_eq!(got, expect, "the restarted node copied every row");
    drop(cluster.mgmd.take());
}

/// The data node `id`'s state as mgmd shows it.
fn state_of(cluster: &Cluster, id: u16) -> Option<NodeState> {
    cluster.view().and_then(|v| v.nodes.into_iter().find(|n| n.id == id)).and_then(|n| n.state)
}

#[test]
fn mgm_stop_leaves_gracefully_and_refuses_to_stop_the_last_node_of_a_group() {
    let cluster = Cluster::start(Path::new(NORR), "leave", 2, 2, "heartbeat_interval_ms = 100");
    cluster.wait_started(&[2, 3]);
    let mgm = |cmd: MgmCommand| match run_command(&cluster.mgm, cmd, Duration::from_secs(10)) {
        Ok(MgmReply::Done { .. }) => {}
        other => panic!("mgm: {other:?}"),
    };
    let c = client(&cluster, 0);
    let t = c.create_table(kv_def("kv")).unwrap();
    for k in 0..100 {
        put(&c, t.id, k, k).unwrap();
    }

    // `stop 3`: the members agree first, then node 3 stops; node 2 serves
    // every write at the first attempt (nothing failed over).
    mgm(MgmCommand::Stop { node: 3 });
    let deadline = Instant::now() + START;
    while state_of(&cluster, 3) != Some(NodeState::Stopped) {
        assert!(Instant::now() < deadline, "node 3 did not stop:\n{}", cluster.logs());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(cluster.logs().contains("data node 3 left the cluster and stopped"), "{}", cluster.logs());
    for k in 100..200 {
        put(&c, t.id, k, k).unwrap();
    }

    // `stop 2` would leave the node group without a live node: refused,
    // node 2 keeps serving. `norr mgm stop 2 --wait` says so and why, and
    // fails (it waited out its time before, with no reason given).
    let started = Instant::now();
    let out = std::process::Command::new(NORR)
        .args(["mgm", "--mgm", &cluster.mgm, "stop", "2", "--wait", "60"])
        .output()
        .expect("norr mgm runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a refused stop fails: {stderr}");
    assert!(stderr.contains("node 2: the cluster refused to stop it"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(60), "the refusal ended the wait");
    assert!(cluster.logs().contains("the cluster refused to let it stop"), "{}", cluster.logs());
    assert_eq!(state_of(&cluster, 2), Some(NodeState::Started));
    for k in 200..250 {
        put(&c, t.id, k, k).unwrap();
    }

    // `start 3`: it rejoins and copies what it missed.
    mgm(MgmCommand::Start { node: 3 });
    cluster.wait_started(&[2, 3]);
    assert_eq!(state_of(&cluster, 2), Some(NodeState::Started));
    let expect: Vec<(i64, i64)> = (0..250).map(|k| (k, k)).collect();
    assert_eq!(read_all(&client(&cluster, 1), t.id), expect);
}
