//! `Client::connect_mgm`: the cluster's data nodes and this client's API
//! node id come from a real mgmd (in this process); the data nodes are fake
//! (common/fake_cluster.rs).

mod common;

use common::fake_cluster::FakeCluster;
use common::kv_def;
use norr_client::*;
use norr_mgmd::config::ClusterConfig;
use norr_mgmd::server::Mgmd;
use std::path::Path;

fn mgmd_for(cl: &FakeCluster) -> Mgmd {
    let text = format!(
        r#"
[cluster]
name = "fake"
replicas = 2
[[node]]
id = 1
kind = "mgmd"
[[node]]
id = 2
kind = "data"
port = {}
[[node]]
id = 3
kind = "data"
port = {}
"#,
        cl.addr(2).port(),
        cl.addr(3).port()
    );
    let config = ClusterConfig::parse(&text, Path::new("/tmp")).expect("a valid cluster file");
    Mgmd::start(config, None, Some("127.0.0.1:0".parse().unwrap())).expect("mgmd starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_node_id_and_the_data_nodes_come_from_mgmd() {
    let cl = FakeCluster::start_ids(vec![2, 3], 2).await;
    let mgmd = mgmd_for(&cl);
    let mgm = mgmd.local_addr().to_string();
    let c = Client::connect_mgm(&mgm, ConnectOptions::default()).await.unwrap();
    let id = c.api_node();
    assert!(id >= 100, "an API node id from mgmd: {id}");
    // Every data node of the configuration, each asked for mgmd's id.
    let status = c.data_node_status();
    assert_eq!(status.iter().map(|s| s.node_id).collect::<Vec<_>>(), vec![Some(2), Some(3)]);
    assert!(status.iter().all(|s| s.connected));
    assert_eq!(cl.requested_ids(2), vec![Some(id)]);
    assert_eq!(cl.requested_ids(3), vec![Some(id)]);
    let t = c.create_table(kv_def("kv")).await.unwrap();
    c.begin().execute(vec![KeyOp::insert(t.id, vec![Value::Int(1)], vec![])], ExecType::Commit).await.unwrap();
    assert_eq!(c.read(t.id, vec![Value::Int(1)]).await.unwrap().unwrap()[0], Value::Int(1));

    // A second client (as a SQL node) gets another id; an id asked for that
    // mgmd has given away is refused with mgmd's reason.
    let sql = ConnectOptions { kind: norr_client::ApiKind::SqlNode, ..Default::default() };
    let c2 = Client::connect_mgm(&mgm, sql).await.unwrap();
    assert_ne!(c2.api_node(), id);
    let taken = ConnectOptions { api_node_id: Some(id), ..Default::default() };
    let e = Client::connect_mgm(&mgm, taken).await.unwrap_err();
    assert!(matches!(e, ClientError::Protocol(_)), "{e:?}");
    assert!(e.to_string().contains("refused"), "{e}");

    // No mgmd there: a clear NotConnected.
    drop((c, c2));
    mgmd.stop();
    let e = Client::connect_mgm(&mgm, ConnectOptions::default()).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NotConnected), "{e}");
    assert!(e.to_string().contains("mgmd"), "{e}");
}
