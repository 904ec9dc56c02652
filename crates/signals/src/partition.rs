//! Where a keyed operation goes: its partition, and which transaction
//! coordinator (TC instance) a transaction is started on.
//!
//! Shared by the data node and the client so both derive the same partition
//! from the same bytes: TC routes operations with [`op_partition`] (and must
//! agree with storage's own `partition_of_pk`), the client picks a
//! transaction's coordinator from its first operation's partition with
//! [`coordinator_instance`] (partition-aware transactions).
//!
//! The coordinator choice is a placement decision, never a correctness one:
//! every TC instance can coordinate any transaction, because each routes every
//! operation to the LQH owning its partition. Choosing from the first
//! operation's partition only matters for where the work lands: with several
//! data nodes it is what starts the TC on the node holding the partition (no
//! extra hop for the first, often only, operation); on one data node with
//! several TC instances it spreads transactions over the instances by the data
//! they touch, so the same keys meet the same coordinator.

use crate::coerce::coerce_value;
use crate::keycode::{encode_value, partition_of};
use crate::ops::{KeyAccess, KeyOp};
use crate::schema::{PartitionId, PartitionScheme, TableDef};
use crate::value::Value;
use crate::{ErrorCode, NodeError};

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
            if op.kind.is_write() && matches!(op.kind, crate::ops::OpKind::Insert | crate::ops::OpKind::Write) {
                return Err(NodeError::with(
                    ErrorCode::MalformedSignal,
                    "insert and write address rows by primary key",
                ));
            }
            Ok(None)
        }
    }
}

/// LQH instance (LDM) that owns partition `part` on every node holding it.
pub fn lqh_instance(part: PartitionId, lqh_instances: u16) -> u16 {
    debug_assert!(lqh_instances > 0);
    (part % lqh_instances.max(1) as u32) as u16
}

/// TC instance that coordinates a transaction whose first operation is on
/// partition `part`, on a data node running `tc_instances` TC instances. The
/// same modulo as the LQH instance of a partition, so with as many TC as LQH
/// instances a partition's TC and LDM share an index (one thread, later).
pub fn coordinator_instance(part: PartitionId, tc_instances: u16) -> u16 {
    debug_assert!(tc_instances > 0);
    (part % tc_instances.max(1) as u32) as u16
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::ColumnDef;
    use crate::value::ColumnType;

    #[test]
    fn coordinator_follows_partition() {
        assert_eq!(coordinator_instance(0, 1), 0);
        assert_eq!(coordinator_instance(7, 1), 0);
        assert_eq!(coordinator_instance(5, 4), 1);
        assert_eq!(coordinator_instance(3, 4), 3);
        assert_eq!(coordinator_instance(4, 4), 0);
        // Every instance is used once there are at least as many partitions.
        let used: std::collections::BTreeSet<u16> = (0..8).map(|p| coordinator_instance(p, 3)).collect();
        assert_eq!(used.into_iter().collect::<Vec<_>>(), vec![0, 1, 2]);
    }

    fn def(scheme: PartitionScheme) -> TableDef {
        TableDef {
            id: 1,
            version: 1,
            name: "t".to_string(),
            columns: vec![
                ColumnDef::new("a", ColumnType::Int { unsigned: false }).not_null(),
                ColumnDef::new("b", ColumnType::BigInt { unsigned: false }).not_null(),
            ],
            primary_key: vec![0, 1],
            partitioning: scheme,
            partitions: 8,
            indexes: Vec::new(),
            extra: Vec::new(),
            options: Default::default(),
        }
    }

    #[test]
    fn op_partition_by_scheme() {
        // Key scheme: the hash of the partition-key columns; a partition key of
        // column a alone ignores b.
        let d = def(PartitionScheme::Key { columns: vec![0] });
        let p = |a: i64, b: i64| op_partition(&d, &KeyOp::read(1, vec![Value::Int(a), Value::Int(b)])).unwrap();
        assert_eq!(p(3, 1), p(3, 2));
        assert!(p(3, 1).unwrap() < 8);
        let spread: std::collections::BTreeSet<_> = (0..64).map(|a| p(a, 0)).collect();
        assert!(spread.len() > 1, "64 keys all hashed to one partition");
        // User scheme (RANGE / LIST): the partition the client computed.
        let d = def(PartitionScheme::User);
        let mut op = KeyOp::read(1, vec![Value::Int(1), Value::Int(2)]);
        assert_eq!(op_partition(&d, &op).unwrap_err().code, ErrorCode::MissingPartition);
        op.partition = Some(5);
        assert_eq!(op_partition(&d, &op).unwrap(), Some(5));
        op.partition = Some(8);
        assert_eq!(op_partition(&d, &op).unwrap_err().code, ErrorCode::BadPartition);
        // Unique-index access: LQH resolves it.
        let op = KeyOp { key: KeyAccess::Unique { index: 1, values: vec![Value::Int(1)] }, ..KeyOp::read(1, vec![]) };
        assert_eq!(op_partition(&d, &op).unwrap(), None);
    }
}
