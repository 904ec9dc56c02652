//! Where an operation goes: its partition, and the LQH instance owning it.
//! TC and LQH must agree with storage's `partition_of_pk`: the partition-key
//! columns, coerced to their types, encoded with `keycode`, hashed.

use norr_signals::coerce::coerce_value;
use norr_signals::keycode::{encode_key, partition_of};
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
            format!(
                "{} key values given, table {} has {} key columns",
                pk.len(),
                def.name,
                def.primary_key.len()
            ),
        ));
    }
    let cols = def.partition_key_columns();
    let mut vals = Vec::with_capacity(cols.len());
    let mut types = Vec::with_capacity(cols.len());
    for c in cols {
        let i = def
            .primary_key
            .iter()
            .position(|p| p == c)
            .expect("DICT checked: partition key within the pk");
        let col = &def.columns[*c as usize];
        if pk[i].is_null() {
            return Err(NodeError::with(
                ErrorCode::MissingKeyColumn,
                format!("NULL for key column {}", col.name),
            ));
        }
        vals.push(coerce_value(pk[i].clone(), &col.ty, false)?);
        types.push(&col.ty);
    }
    Ok(partition_of(&encode_key(&vals, &types), def.partitions))
}

/// Partition of a key operation; None for unique-index access (LQH resolves it).
pub fn op_partition(def: &TableDef, op: &KeyOp) -> Result<Option<PartitionId>, NodeError> {
    let user = def.partitioning == PartitionScheme::User;
    match &op.key {
        KeyAccess::Primary(pk) if user => {
            if pk.len() != def.primary_key.len() {
                return Err(NodeError::new(ErrorCode::MissingKeyColumn));
            }
            let p = op
                .partition
                .ok_or_else(|| NodeError::new(ErrorCode::MissingPartition))?;
            if p >= def.partitions {
                return Err(NodeError::with(
                    ErrorCode::BadPartition,
                    format!("partition {p} of {}", def.partitions),
                ));
            }
            Ok(Some(p))
        }
        KeyAccess::Primary(pk) => partition_of_pk(def, pk).map(Some),
        KeyAccess::Unique { .. } => {
            if op.kind.is_write()
                && matches!(
                    op.kind,
                    norr_signals::OpKind::Insert | norr_signals::OpKind::Write
                )
            {
                return Err(NodeError::with(
                    ErrorCode::MalformedSignal,
                    "insert and write address rows by primary key",
                ));
            }
            Ok(None)
        }
    }
}
