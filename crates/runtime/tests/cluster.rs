//! Real data nodes in one process on loopback TCP, each with its own event
//! loop, forming a cluster through QMGR (peer connections, heartbeats, an
//! in-process arbitrator with mgmd's rule). A client writes through one
//! node; a node is stopped (its connections close: the survivors see it
//! fail at once) and the survivors serve every acknowledged write; it is
//! started again, rejoins, copies its partitions and serves them alone once
//! its partner is stopped in turn.

use norr_client::blocking::Client;
use norr_client::{table_def, ColumnDef, ColumnType, ExecType, KeyOp, Value};
use norr_cluster::qmgr_testkit::Arbiter;
use norr_kernel::NodeId;
use norr_knobs::Knobs;
use norr_runtime::{start_data_node, Arbitrator, ClusterNet, DataNodeConfig, DataNodeHandle};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One arbitration request: (requester, generation, survivors, failed).
type Asked = (NodeId, u64, Vec<NodeId>, Vec<NodeId>);

/// mgmd's arbitration rule, in process.
#[derive(Default)]
struct LocalArbitrator {
    rule: Mutex<Arbiter>,
    asked: Mutex<Vec<Asked>>,
}

impl Arbitrator for LocalArbitrator {
    fn arbitrate(
        &self,
        requester: NodeId,
        generation: u64,
        survivors: Vec<NodeId>,
        failed: Vec<NodeId>,
        _timeout: Duration,
    ) -> Result<bool, String> {
        self.asked.lock().unwrap().push((requester, generation, survivors.clone(), failed));
        Ok(self.rule.lock().unwrap().decide(requester, generation, &survivors).is_ok())
    }
}

struct TestCluster {
    cfgs: BTreeMap<NodeId, DataNodeConfig>,
    handles: BTreeMap<NodeId, DataNodeHandle>,
}

/// Free loopback ports (the listeners are closed again: the nodes bind
/// them; a node restarted later binds the same one).
fn free_addrs(n: usize) -> Vec<SocketAddr> {
    let ls: Vec<std::net::TcpListener> = (0..n).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap()).collect();
    ls.iter().map(|l| l.local_addr().unwrap()).collect()
}

impl TestCluster {
    fn start(node_groups: Vec<Vec<NodeId>>, arbitrator: Arc<LocalArbitrator>) -> TestCluster {
        let ids: Vec<NodeId> = node_groups.iter().flatten().copied().collect();
        let addrs = free_addrs(ids.len());
        let data_nodes: BTreeMap<NodeId, SocketAddr> = ids.iter().copied().zip(addrs).collect();
        let knobs = Knobs { heartbeat_interval_ms: 100, lock_wait_timeout_ms: 2_000, ..Knobs::default() };
        let arbitrator: Arc<dyn Arbitrator> = arbitrator;
        let net = ClusterNet {
            data_nodes: data_nodes.clone(),
            node_groups,
            config_digest: 0x5eed,
            arbitrator: Some(arbitrator),
        };
        let cfgs: BTreeMap<NodeId, DataNodeConfig> = data_nodes
            .iter()
            .map(|(id, addr)| {
                let cfg =
                    DataNodeConfig { node_id: *id, listen: *addr, knobs: knobs.clone(), cluster: Some(net.clone()) };
                (*id, cfg)
            })
            .collect();
        let mut c = TestCluster { cfgs, handles: BTreeMap::new() };
        for id in ids.clone() {
            c.boot(id);
        }
        for id in ids {
            c.wait_started(id);
        }
        c
    }

    fn boot(&mut self, id: NodeId) {
        let h = start_data_node(self.cfgs[&id].clone()).expect("start data node");
        self.handles.insert(id, h);
    }

    fn stop(&mut self, id: NodeId) {
        let h = self.handles.remove(&id).expect("running");
        h.shutdown();
        h.join().expect("node stopped cleanly");
    }

    fn wait_for(&self, what: &str, mut done: impl FnMut(&TestCluster) -> bool) {
        let t0 = Instant::now();
        while !done(self) {
            assert!(t0.elapsed() < Duration::from_secs(60), "waited a minute for {what}: {:?}", self.statuses());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn statuses(&self) -> Vec<(NodeId, Option<norr_signals::cluster::NodeStatus>)> {
        self.handles.iter().map(|(id, h)| (*id, h.status())).collect()
    }

    /// `id`'s DIH says it is started (a member, replicas up to date).
    fn wait_started(&self, id: NodeId) {
        self.wait_for(&format!("node {id} to start"), |c| c.handles[&id].status().is_some_and(|s| s.started));
    }

    /// Every running node sees exactly `alive` alive.
    fn wait_alive(&self, alive: &[NodeId]) {
        self.wait_for(&format!("alive nodes {alive:?}"), |c| {
            c.handles.values().all(|h| h.status().is_some_and(|s| s.alive_nodes == alive))
        });
    }

    fn client(&self, id: NodeId) -> Client {
        Client::connect(self.handles[&id].local_addr()).expect("connect")
    }
}

/// Commit `k = v` (again while the error is temporary: a failure being
/// handled). Panics on a permanent error or after many tries.
fn put(c: &Client, t: &norr_client::TableDef, k: i64, v: i64) {
    for _ in 0..100 {
        let op = KeyOp::write(t.id, vec![Value::Int(k)], vec![(1, Value::Int(v))]);
        match c.begin().execute(vec![op], ExecType::Commit) {
            Ok(_) => return,
            Err(e) if e.is_temporary() => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("write {k}: {e}"),
        }
    }
    panic!("write {k}: still failing after 100 tries");
}

fn get(c: &Client, t: &norr_client::TableDef, k: i64) -> Option<i64> {
    for _ in 0..100 {
        match c.read(t.id, vec![Value::Int(k)]) {
            Ok(row) => {
                return row.map(|r| match r[1] {
                    Value::Int(v) => v,
                    ref other => panic!("value {other:?}"),
                })
            }
            Err(e) if e.is_temporary() => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("read {k}: {e}"),
        }
    }
    panic!("read {k}: still failing after 100 tries");
}

fn kv_table(c: &Client) -> norr_client::TableDef {
    let cols = vec![
        ColumnDef::new("k", ColumnType::BigInt { unsigned: false }).not_null(),
        ColumnDef::new("v", ColumnType::BigInt { unsigned: false }),
    ];
    c.create_table(table_def("kv", cols, vec![0])).expect("create table")
}

fn check_all(c: &Client, t: &norr_client::TableDef, acked: &BTreeMap<i64, i64>) {
    for (k, v) in acked {
        assert_eq!(get(c, t, *k), Some(*v), "acknowledged write {k} = {v}");
    }
}

/// One node group of 2: stop the partner, the other serves alone (the
/// arbitrator grants it); restart, it rejoins with the data; stop the
/// first, the restarted one serves every row on its own.
#[test]
fn two_nodes_survive_a_stop_and_a_restart() {
    let arb = Arc::new(LocalArbitrator::default());
    let mut c = TestCluster::start(vec![vec![1, 2]], arb.clone());
    let cl = c.client(1);
    let t = kv_table(&cl);
    let mut acked = BTreeMap::new();
    for k in 0..200 {
        put(&cl, &t, k, k);
        acked.insert(k, k);
    }
    c.stop(2);
    c.wait_alive(&[1]);
    assert!(
        arb.asked.lock().unwrap().iter().any(|(n, _, s, f)| *n == 1 && s == &vec![1] && f == &vec![2]),
        "node 1 went on without asking the arbitrator: {:?}",
        arb.asked.lock().unwrap()
    );
    check_all(&cl, &t, &acked);
    for k in (0..200).step_by(3) {
        put(&cl, &t, k, k + 500);
        acked.insert(k, k + 500);
    }
    c.boot(2);
    c.wait_started(2);
    c.wait_alive(&[1, 2]);
    for k in 200..260 {
        put(&cl, &t, k, k);
        acked.insert(k, k);
    }
    drop(cl);
    // Node 1 goes: node 2 alone holds every row.
    c.stop(1);
    c.wait_alive(&[2]);
    let cl2 = c.client(2);
    check_all(&cl2, &t, &acked);
    put(&cl2, &t, 1, 1);
    drop(cl2);
    c.stop(2);
}

/// Two node groups of 2: a stopped node leaves its group's partner to serve
/// (no arbitration: the other group survives whole); it rejoins; then its
/// partner is stopped and it serves its group's rows alone.
#[test]
fn four_nodes_survive_a_stop_and_a_restart() {
    let arb = Arc::new(LocalArbitrator::default());
    let mut c = TestCluster::start(vec![vec![1, 2], vec![3, 4]], arb.clone());
    let cl = c.client(1);
    let t = kv_table(&cl);
    let mut acked = BTreeMap::new();
    for k in 0..300 {
        put(&cl, &t, k, k);
        acked.insert(k, k);
    }
    let asked_before = arb.asked.lock().unwrap().iter().filter(|a| !a.3.is_empty()).count();
    c.stop(3);
    c.wait_alive(&[1, 2, 4]);
    check_all(&cl, &t, &acked);
    for k in (0..300).step_by(2) {
        put(&cl, &t, k, k * 10);
        acked.insert(k, k * 10);
    }
    let asked_after = arb.asked.lock().unwrap().iter().filter(|a| !a.3.is_empty()).count();
    assert_eq!(asked_before, asked_after, "a whole node group survived: no arbitration");
    c.boot(3);
    c.wait_started(3);
    c.wait_alive(&[1, 2, 3, 4]);
    c.stop(4);
    c.wait_alive(&[1, 2, 3]);
    check_all(&cl, &t, &acked);
    for k in 300..340 {
        put(&cl, &t, k, k);
        acked.insert(k, k);
    }
    check_all(&cl, &t, &acked);
    drop(cl);
    for n in [1, 2, 3] {
        c.stop(n);
    }
}
