//! Where an operation goes: its partition, and the LQH instance owning it.
//! TC and LQH must agree with storage's `partition_of_pk`: the partition-key
//! columns, coerced to their types, encoded with `keycode`, hashed. The
//! partition functions live in `norr_signals::partition`, shared with the
//! client (which chooses a transaction's coordinator with them).

pub use norr_signals::partition::{coordinator_instance, lqh_instance, op_partition, partition_of_pk};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Storage;
    use norr_signals::schema::{ColumnDef, PartitionScheme, TableDef};
    use norr_signals::value::{Collation, ColumnType, Value};
    use norr_signals::ErrorCode;

    /// TC routes by `partition_of_pk`; storage refuses rows in the wrong
    /// partition. Both must agree for every type and partition-key choice.
    #[test]
    fn agrees_with_storage() {
        let mut st = Storage::new(1 << 24);
        let cols = vec![
            ColumnDef::new("a", ColumnType::Int { unsigned: false }).not_null(),
            ColumnDef::new("b", ColumnType::Varchar { len: 10, collation: Collation::CaseInsensitive }).not_null(),
            ColumnDef::new("c", ColumnType::BigInt { unsigned: true }).not_null(),
        ];
        for (id, pcols) in [(1, vec![]), (2, vec![1]), (3, vec![2, 0])] {
            let def = TableDef {
                id,
                version: 1,
                name: format!("t{id}"),
                columns: cols.clone(),
                primary_key: vec![0, 1, 2],
                partitioning: PartitionScheme::Key { columns: pcols },
                partitions: 7,
                indexes: Vec::new(),
                extra: Vec::new(),
                options: Default::default(),
            };
            st.create_table(&def).unwrap();
            for i in 0..200i64 {
                // Values of another class than the column's (Int for UInt) are coerced first.
                let pk = vec![Value::Int(i - 100), Value::str(&format!("K{}", i % 13)), Value::Int(i * 7)];
                assert_eq!(partition_of_pk(&def, &pk).unwrap(), st.partition_of_pk(id, &pk).unwrap());
            }
            let e = partition_of_pk(&def, &[Value::Int(1)]).unwrap_err();
            assert_eq!(e.code, ErrorCode::MissingKeyColumn);
            let e = partition_of_pk(&def, &[Value::Null, Value::str("x"), Value::Int(1)]).unwrap_err();
            assert_eq!(e.code, ErrorCode::MissingKeyColumn);
        }
        assert_eq!(lqh_instance(5, 1), 0);
        assert_eq!(lqh_instance(5, 4), 1);
    }
}
