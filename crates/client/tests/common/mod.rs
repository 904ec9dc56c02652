#![allow(dead_code)]
pub mod fake_node;

use norr_client::{table_def, ColumnDef, ColumnType, TableDef};

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
    let cfg = norr_runtime::DataNodeConfig { node_id: 1, listen: "127.0.0.1:0".parse().unwrap(), knobs: knobs.clone() };
    let sched = norr_txn::build_data_node(1, &knobs);
    norr_runtime::start_data_node_with(cfg, norr_runtime::RuntimeOptions::default(), sched).expect("start data node")
}
