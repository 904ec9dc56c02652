//! A system restart of real processes: mgmd and two data nodes (replicas 2)
//! that keep their data in the cluster file's default `data_dir`s; writes
//! through the native client, each commit's GCI recorded; both data nodes
//! killed with SIGKILL under writes; both started again. The cluster comes
//! back with exactly the transactions whose GCI is at most the restart GCI
//! (the highest GCI a node recovered, as its log says), on both replicas.
//! A node restart from the node's files: rows deleted while it was down are
//! gone from it, and it copied only the changed rows.

mod support;

use norr_client::blocking::Client;
use norr_client::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};
use support::proc_cluster::{system_restart_gci, Cluster, START};

const NORR: &str = env!("CARGO_BIN_EXE_norr");

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

/// Write the pair (2i, 2i + 1) = i in one transaction; its GCI.
fn put_pair(c: &Client, t: TableId, i: i64) -> Result<u64, ClientError> {
    let mut txn = c.begin();
    let ops = (0..2).map(|j| KeyOp::write(t, vec![Value::Int(2 * i + j)], vec![(1, Value::Int(i))])).collect();
    txn.execute(ops, ExecType::Commit)?;
    Ok(txn.commit_gci().expect("a committed transaction has a GCI"))
}

fn rows(c: &Client, t: TableId) -> Result<Vec<(i64, i64)>, ClientError> {
    let mut v: Vec<(i64, i64)> = c
        .scan(ScanSpec::full(t))?
        .collect_all()?
        .into_iter()
        .map(|r| match (&r[0], &r[1]) {
            (Value::Int(k), Value::Int(v)) => (*k, *v),
            other => panic!("unexpected row {other:?}"),
        })
        .collect();
    v.sort_unstable();
    Ok(v)
}

/// Wait until `norr mgm show` says of data nodes 2 and 3 that their files
/// restore to a GCI of at least `gci`, as complete copies.
fn wait_restart_gci_at_least(cluster: &Cluster, gci: u64) {
    let deadline = Instant::now() + START;
    loop {
        let v = cluster.view();
        let ok = v.as_ref().is_some_and(|v| {
            [2, 3].iter().all(|id| {
                v.nodes.iter().any(|n| n.id == *id && n.files_complete && n.last_durable_gci.is_some_and(|g| g >= gci))
            })
        });
        if ok {
            return;
        }
        assert!(Instant::now() < deadline, "restart GCIs below {gci}: {v:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn killing_both_data_nodes_keeps_every_transaction_up_to_the_restart_gci() {
    let mut cluster =
        Cluster::start(Path::new(NORR), "sysrestart", 2, 2, "heartbeat_interval_ms = 100\ngcp_interval_ms = 100");
    cluster.wait_started(&[2, 3]);
    let c = Client::connect(cluster.data[0].1.as_str()).unwrap();
    let t = c.create_table(kv_def("kv")).unwrap();
    let mut committed: BTreeMap<i64, u64> = BTreeMap::new();
    for i in 0..200 {
        committed.insert(i, put_pair(&c, t.id, i).unwrap());
    }
    // Checkpoints run: these are on disk everywhere well before the kill.
    std::thread::sleep(Duration::from_millis(600));
    let durable_before = *committed.values().max().unwrap();
    // `norr mgm show`: each node's files restore to at least that GCI.
    wait_restart_gci_at_least(&cluster, durable_before);
    let show = std::process::Command::new(NORR).args(["mgm", "--mgm", &cluster.mgm, "show"]).output().unwrap();
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(show.status.success() && text.contains("restart gci"), "{text}");
    // More writes right up to the kill: some will not be complete.
    for i in 200..400 {
        committed.insert(i, put_pair(&c, t.id, i).unwrap());
    }
    drop(c);
    let lens: Vec<usize> = (0..2).map(|i| cluster.nodes[i].as_ref().unwrap().log_text().len()).collect();
    cluster.kill(0);
    cluster.kill(1);

    for i in 0..2 {
        let p = cluster.spawn_node(i);
        cluster.nodes[i] = Some(p);
    }
    cluster.wait_started(&[2, 3]);
    let texts: Vec<String> =
        (0..2).map(|i| cluster.nodes[i].as_ref().unwrap().log_text()[lens[i]..].to_string()).collect();
    // The cluster restarts to the GCI the nodes name (a node may roll
    // forward past what either's files restored), never below a complete
    // copy's (`system_restart_gci`).
    let views: Vec<&str> = texts.iter().map(String::as_str).collect();
    let restart = system_restart_gci(&views).unwrap_or_else(|e| panic!("{e}:\n{}", cluster.logs()));
    assert!(restart >= durable_before, "restart GCI {restart} < {durable_before}, complete before the kill");
    // What the restarted nodes' files hold is shown again, from the restart GCI on.
    wait_restart_gci_at_least(&cluster, restart);
    let want: Vec<(i64, i64)> =
        committed.iter().filter(|(_, g)| **g <= restart).flat_map(|(i, _)| [(2 * i, *i), (2 * i + 1, *i)]).collect();
    // Both replicas: read through each node (each is primary for a share of
    // the partitions; a scan reads every partition at its primary), and
    // once more through node 3 alone after node 2 is gone.
    for i in 0..2 {
        let c = Client::connect(cluster.data[i].1.as_str()).unwrap();
        let deadline = Instant::now() + START;
        let got = loop {
            match rows(&c, t.id) {
                Ok(r) => break r,
                Err(e) if e.is_temporary() && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(e) => panic!("scan through node {}: {e}\n{}", cluster.data[i].0, cluster.logs()),
            }
        };
        assert_eq!(got.len(), want.len(), "restart GCI {restart}: rows through node {}", cluster.data[i].0);
        assert_eq!(got, want, "restart GCI {restart}");
    }
    cluster.kill(0);
    let c3 = Client::connect(cluster.data[1].1.as_str()).unwrap();
    let deadline = Instant::now() + START;
    let got = loop {
        match rows(&c3, t.id) {
            Ok(r) if r == want => break r,
            Ok(_) | Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Ok(r) => panic!("node 3 alone has {} rows of {}", r.len(), want.len()),
            Err(e) => panic!("node 3 alone cannot scan: {e}\n{}", cluster.logs()),
        }
    };
    assert_eq!(got, want);
    drop(cluster.mgmd.take());
}

/// Commit `ops` through `c`, again while the error is temporary (a node
/// failure being handled).
fn commit_retrying(c: &Client, ops: Vec<KeyOp>) {
    let deadline = Instant::now() + START;
    loop {
        let mut txn = c.begin();
        match txn.execute(ops.clone(), ExecType::Commit) {
            Ok(_) => return,
            Err(e) if e.is_temporary() && Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("transaction failed: {e}"),
        }
    }
}

#[test]
fn a_node_restarted_from_its_files_drops_the_rows_deleted_while_it_was_down() {
    let mut cluster =
        Cluster::start(Path::new(NORR), "nrdelta", 2, 2, "heartbeat_interval_ms = 100\ngcp_interval_ms = 100");
    cluster.wait_started(&[2, 3]);
    let c = Client::connect(cluster.data[0].1.as_str()).unwrap();
    let t = c.create_table(kv_def("kv")).unwrap();
    let mut want: BTreeMap<i64, i64> = BTreeMap::new();
    for i in 0..200 {
        put_pair(&c, t.id, i).unwrap();
        want.extend([(2 * i, i), (2 * i + 1, i)]);
    }
    // On disk at node 3 well before it goes.
    std::thread::sleep(Duration::from_millis(600));
    cluster.kill(1);
    // While node 3 is down: deletes, updates and new rows.
    for k in 0..60 {
        commit_retrying(&c, vec![KeyOp::delete(t.id, vec![Value::Int(k)])]);
        want.remove(&k);
    }
    for k in 100..120 {
        commit_retrying(&c, vec![KeyOp::write(t.id, vec![Value::Int(k)], vec![(1, Value::Int(-k))])]);
        want.insert(k, -k);
    }
    for k in 1000..1010 {
        commit_retrying(&c, vec![KeyOp::write(t.id, vec![Value::Int(k)], vec![(1, Value::Int(k))])]);
        want.insert(k, k);
    }
    let p = cluster.spawn_node(1);
    cluster.nodes[1] = Some(p);
    cluster.wait_started(&[2, 3]);
    drop(c);
    // Node 3 logged what its copy sent: the changed rows in full, the
    // others as keys.
    let log = cluster.nodes[1].as_ref().unwrap().log_text();
    assert!(log.contains("recovered to GCI"), "node 3 did not restart from its files:\n{log}");
    assert!(log.contains("unchanged rows as keys"), "node 3's restart copied everything:\n{log}");
    // Node 2 goes: node 3 alone must not hold a deleted row.
    cluster.kill(0);
    let want: Vec<(i64, i64)> = want.into_iter().collect();
    let c3 = Client::connect(cluster.data[1].1.as_str()).unwrap();
    let deadline = Instant::now() + START;
    loop {
        match rows(&c3, t.id) {
            Ok(r) if r == want => break,
            Ok(_) | Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Ok(r) => {
                let back: Vec<i64> = r.iter().map(|(k, _)| *k).filter(|k| *k < 60).collect();
                panic!("node 3 alone has {} rows of {}; deleted rows back: {back:?}", r.len(), want.len())
            }
            Err(e) => panic!("node 3 alone cannot scan: {e}\n{}", cluster.logs()),
        }
    }
    drop(cluster.mgmd.take());
}
