#![allow(dead_code)]
pub mod fake_cluster;
pub mod fake_node;
pub mod kit_bridge;

use norr_client::{table_def, Client, ColumnDef, ColumnType, ExecType, KeyOp, OpResult, TableDef, TableId, Value};

/// (k BIGINT PRIMARY KEY, v VARBINARY(1000), n BIGINT)
pub fn kv_def(name: &str) -> TableDef {
    table_def(
        name,
        vec![
            ColumnDef::new("k", ColumnType::BigInt { unsigned: false }).not_null(),
            ColumnDef::new("v", ColumnType::Varbinary { len: 1000 }),
            ColumnDef::new("n", ColumnType::BigInt { unsigned: false }),
        ],
        vec![0],
    )
}

/// Start a real in-process data node (runtime event loop + TC/LQH/DICT blocks)
/// on a free loopback port.
pub fn start_node(knobs: norr_knobs::Knobs) -> norr_runtime::DataNodeHandle {
    let cfg = norr_runtime::DataNodeConfig {
        node_id: 1,
        listen: "127.0.0.1:0".parse().unwrap(),
        knobs: knobs.clone(),
        cluster: None,
    };
    let sched = norr_txn::build_data_node(1, &knobs);
    norr_runtime::start_data_node_with(cfg, norr_runtime::RuntimeOptions::default(), sched).expect("start data node")
}

/// `writers` tasks on one connection, each running `per_writer` transactions
/// that insert a row and read it back before committing; the keys are
/// `w * 1000 + j`, so `per_writer` must stay below 1000.
pub async fn insert_and_read_back_concurrently(c: &Client, table: TableId, writers: i64, per_writer: i64) {
    assert!(per_writer < 1000);
    let mut tasks = Vec::new();
    for w in 0..writers {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            for j in 0..per_writer {
                let k = w * 1000 + j;
                let mut txn = c.begin();
                txn.execute(
                    vec![KeyOp::insert(table, vec![Value::Int(k)], vec![(2, Value::Int(k))])],
                    ExecType::NoCommit,
                )
                .await
                .unwrap();
                let r = txn.execute(vec![KeyOp::read(table, vec![Value::Int(k)])], ExecType::Commit).await.unwrap();
                assert_eq!(r[0], OpResult::Ok(Some(vec![Value::Int(k), Value::Null, Value::Int(k)])));
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}
