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
