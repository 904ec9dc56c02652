//! A system restart of real processes: mgmd and two data nodes (replicas 2)
//! that keep their data in the cluster file's default `data_dir`s; writes
//! through the native client, each commit's GCI recorded; both data nodes
//! killed with SIGKILL under writes; both started again. The cluster comes
//! back with exactly the transactions whose GCI is at most the restart GCI
//! (the highest GCI a node recovered, as its log says), on both replicas.

mod support;

use norr_client::blocking::Client;
use norr_client::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};
use support::proc_cluster::{Cluster, START};

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

/// The GCI a data node's last start recovered ("recovered to GCI g" in its
/// log after `from`; 0 for "starting empty").
fn recovered(log: &str) -> Option<u64> {
    log.lines().rev().find_map(|l| {
        if l.contains("no complete global checkpoint on disk") {
            return Some(0);
        }
        let rest = l.split("recovered to GCI ").nth(1)?;
        rest.split(':').next()?.trim().parse().ok()
    })
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
    let restart = (0..2)
        .filter_map(|i| recovered(&cluster.nodes[i].as_ref().unwrap().log_text()[lens[i]..]))
        .max()
        .unwrap_or_else(|| panic!("no recovered GCI in the logs:\n{}", cluster.logs()));
    assert!(restart >= durable_before, "restart GCI {restart} < {durable_before}, complete before the kill");
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
