//! REDO record bodies: `op:u8 gci:u64 table:u32 partition:u32 row`, where
//! `row` is `norr_signals::row_codec::encode_row` (a whole new row image for
//! a put, the primary-key values for a delete, `[Int(version)]` for a reset).

use norr_signals::ckpt::Gci;
use norr_signals::row_codec;
use norr_signals::{PartitionId, TableId, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedoOp {
    /// Insert or overwrite the row with this key (idempotent on replay).
    Put = 1,
    /// Delete the row with this key if present.
    Delete = 2,
    /// TRUNCATE TABLE or a row-rebuilding ALTER TABLE: every earlier record
    /// of the table in this log part belongs to an older life of its rows
    /// (and maybe to an older row layout). `partition` is [`ALL_PARTITIONS`]
    /// (every partition of the table this part logs), `values` is
    /// `[Int(table version after the change)]`. A rebuild's rows follow it
    /// as puts.
    Reset = 3,
}

/// `RedoRecord::partition` of a reset: every partition of the log part.
pub const ALL_PARTITIONS: PartitionId = PartitionId::MAX;

/// One logged change.
#[derive(Debug, Clone, PartialEq)]
pub struct RedoRecord {
    pub op: RedoOp,
    pub table: TableId,
    pub partition: PartitionId,
    /// Put: the whole new row. Delete: the primary-key values.
    pub values: Vec<Value>,
}

/// A record read back, with the GCI of its transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedRecord {
    pub gci: Gci,
    pub record: RedoRecord,
}

pub(crate) const FIXED_BYTES: usize = 1 + 8 + 4 + 4;

pub(crate) fn encode(gci: Gci, r: &RedoRecord, out: &mut Vec<u8>) {
    out.push(r.op as u8);
    out.extend_from_slice(&gci.to_le_bytes());
    out.extend_from_slice(&r.table.to_le_bytes());
    out.extend_from_slice(&r.partition.to_le_bytes());
    row_codec::encode_row(&r.values, out);
}

/// The GCI of an encoded record (the writer needs it without decoding).
pub(crate) fn decode(body: &[u8]) -> Result<LoggedRecord, String> {
    if body.len() < FIXED_BYTES {
        return Err(format!("REDO record of {} bytes is shorter than its fixed part", body.len()));
    }
    let op = match body[0] {
        1 => RedoOp::Put,
        2 => RedoOp::Delete,
        3 => RedoOp::Reset,
        x => return Err(format!("unknown REDO record kind {x}")),
    };
    let gci = u64::from_le_bytes(body[1..9].try_into().expect("8"));
    let table = u32::from_le_bytes(body[9..13].try_into().expect("4"));
    let partition = u32::from_le_bytes(body[13..17].try_into().expect("4"));
    let values = row_codec::decode_row(&body[FIXED_BYTES..])?;
    Ok(LoggedRecord { gci, record: RedoRecord { op, table, partition, values } })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_pinned_bytes() {
        let r = RedoRecord { op: RedoOp::Put, table: 7, partition: 2, values: vec![Value::Int(-1), Value::str("ab")] };
        let mut b = Vec::new();
        encode(9, &r, &mut b);
        // Pinned: a change of the row codec changes the REDO format (bump REDO_VERSION).
        assert_eq!(b, [1, 9, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 2, 0, 0, 0, 2, 1, 1, 6, 2, b'a', b'b']);
        assert_eq!(decode(&b).unwrap(), LoggedRecord { gci: 9, record: r });
        assert!(decode(&b[..10]).is_err());
        let reset = RedoRecord { op: RedoOp::Reset, table: 7, partition: ALL_PARTITIONS, values: vec![Value::Int(3)] };
        let mut rb = Vec::new();
        encode(12, &reset, &mut rb);
        assert_eq!(rb[0], 3, "a reset is kind 3");
        assert_eq!(decode(&rb).unwrap(), LoggedRecord { gci: 12, record: reset });
        let mut bad = b.clone();
        bad[0] = 4;
        assert!(decode(&bad).is_err());
    }
}
