//! Where an operation goes: its partition, and the LQH instance owning it.
//! TC and LQH must agree with storage's `partition_of_pk`: the partition-key
//! columns, coerced to their types, encoded with `keycode`, hashed.

use norr_signals::coerce::coerce_value;
use norr_signals::keycode::{encode_value, partition_of};
use norr_signals::ops::{KeyAccess, KeyOp};
use norr_signals::schema::{PartitionId, PartitionScheme, TableDef};
use norr_signals::value::Value;
use norr_signals::{ErrorCode, NodeError};

/// LQH instance (LDM) that owns partition `part`. One instance today; the
/// modulo spreads partitions when there are more.
pub fn lqh_instance(part: PartitionId, lqh_instances: u16) -> u16 {
    debug_assert!(lqh_instances > 0);
    (part % lqh_instances as u32) as u16
}

/// Partition of a row from its primary-key values (Key scheme).
pub fn partition_of_pk(def: &TableDef, pk: &[Value]) -> Result<PartitionId, NodeError> {
    if pk.len() != def.primary_key.len() {
        return Err(NodeError::with(
            ErrorCode::MissingKeyColumn,
            format!("{} key values given, table {} has {} key columns", pk.len(), def.name, def.primary_key.len()),
        ));
    }
    if let Some(i) = pk.iter().position(|v| v.is_null()) {
        let name = &def.columns[def.primary_key[i] as usize].name;
        return Err(NodeError::with(ErrorCode::MissingKeyColumn, format!("NULL for key column {name}")));
    }
    let cols = def.partition_key_columns();
    // Encoded column by column into one buffer: the same bytes as
    // `keycode::encode_key` over the coerced values, without collecting them.
    let mut encoded = Vec::with_capacity(cols.len() * 10);
    for c in cols {
        let i = def.primary_key.iter().position(|p| p == c).expect("DICT checked: partition key within the pk");
        let col = &def.columns[*c as usize];
        if pk[i].is_null() {
            return Err(NodeError::with(ErrorCode::MissingKeyColumn, format!("NULL for key column {}", col.name)));
        }
        let v = coerce_value(pk[i].clone(), &col.ty, false)?;
        encode_value(&mut encoded, &v, &col.ty);
    }
    Ok(partition_of(&encoded, def.partitions))
}

/// Partition of a key operation; None for unique-index access (LQH resolves it).
pub fn op_partition(def: &TableDef, op: &KeyOp) -> Result<Option<PartitionId>, NodeError> {
    let user = def.partitioning == PartitionScheme::User;
    match &op.key {
        KeyAccess::Primary(pk) if user => {
            if pk.len() != def.primary_key.len() {
                return Err(NodeError::new(ErrorCode::MissingKeyColumn));
            }
            let p = op.partition.ok_or_else(|| NodeError::new(ErrorCode::MissingPartition))?;
            if p >= def.partitions {
                return Err(NodeError::with(ErrorCode::BadPartition, format!("partition {p} of {}", def.partitions)));
            }
            Ok(Some(p))
        }
        KeyAccess::Primary(pk) => partition_of_pk(def, pk).map(Some),
        KeyAccess::Unique { .. } => {
            if op.kind.is_write() && matches!(op.kind, norr_signals::OpKind::Insert | norr_signals::OpKind::Write) {
                return Err(NodeError::with(
                    ErrorCode::MalformedSignal,
                    "insert and write address rows by primary key",
                ));
            }
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Storage;
    use norr_signals::schema::ColumnDef;
    use norr_signals::value::{Collation, ColumnType};

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
