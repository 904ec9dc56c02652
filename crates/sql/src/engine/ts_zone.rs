//! TIMESTAMP columns and the session time zone. Owner: query engineer.
//!
//! As in MySQL, a TIMESTAMP value is stored as its UTC moment and a session
//! sees it as wall time of its @@time_zone. The SQL node does both
//! conversions at its edge with the data node, so every value of a TIMESTAMP
//! column inside the SQL node (rows, keys, expressions, CHECK constraints,
//! generated columns, FOREIGN KEY values) is the session's wall time:
//!
//! * keyed operations (`KeyOp`: reads, inserts, updates, deletes, their key
//!   values and column values) go through `execute`, or `ops_to_utc` and
//!   `row_to_local` around the call where the caller sends them itself;
//! * scans: their rows go through `row_to_local`; their range bounds and
//!   pushed filter values are converted by the planner (`plan::bound_value`),
//!   which knows which side of a comparison a value bounds.
//!
//! Wall times a DST change repeats name two moments: a key or a value sent
//! takes the earlier one (MySQL's choice), so a row at the later moment,
//! read back as that wall time, is written back an hour earlier if its
//! TIMESTAMP is written again (MySQL writes the stored moment back
//! unchanged). Planner bounds widen to cover both moments.
//!
//! With the session zone UTC (`EvalCtx::tz` None, the default) every function
//! here returns at its first test.

use crate::engine::functions::tz::{self, Zone};
use norr_client::{ClientError, Transaction};
use norr_signals::{ColumnId, ColumnType, ExecType, KeyAccess, KeyOp, OpResult, TableDef, Value};

/// Does the table have a TIMESTAMP column?
pub fn has_timestamp(def: &TableDef) -> bool {
    def.columns.iter().any(|c| matches!(c.ty, ColumnType::Timestamp))
}

fn is_ts(def: &TableDef, col: ColumnId) -> bool {
    def.columns.get(col as usize).is_some_and(|c| matches!(c.ty, ColumnType::Timestamp))
}

/// A TIMESTAMP value from the session zone's wall time to UTC (the earlier
/// moment of a repeated wall time, the moment of the change for a skipped
/// one). Zero dates and values no zone can convert stay as they are.
pub fn value_to_utc(v: &mut Value, zone: &Zone) {
    if let Value::DateTime(dt) = v {
        if let Some(u) = tz::local_to_utc(dt, zone) {
            *dt = u.utc;
        }
    }
}

/// A TIMESTAMP value from UTC to the session zone's wall time.
pub fn value_to_local(v: &mut Value, zone: &Zone) {
    if let Value::DateTime(dt) = v {
        if let Some(l) = tz::utc_to_local(dt, zone) {
            *dt = l;
        }
    }
}

/// Convert the TIMESTAMP key values and column values of `ops` (all on
/// table `def`) from the session zone to UTC.
pub fn ops_to_utc(ops: &mut [KeyOp], def: &TableDef, zone: Option<&Zone>) {
    let Some(zone) = zone else { return };
    if !has_timestamp(def) {
        return;
    }
    for op in ops {
        debug_assert_eq!(op.table, def.id, "ops_to_utc: an op of another table");
        let (cols, key): (&[ColumnId], &mut Vec<Value>) = match &mut op.key {
            KeyAccess::Primary(k) => (&def.primary_key, k),
            KeyAccess::Unique { index, values } => match def.index(*index) {
                Some(ix) => (&ix.columns, values),
                None => continue,
            },
        };
        for (c, v) in cols.iter().zip(key.iter_mut()) {
            if is_ts(def, *c) {
                value_to_utc(v, zone);
            }
        }
        for (c, v) in op.values.iter_mut() {
            if is_ts(def, *c) {
                value_to_utc(v, zone);
            }
        }
    }
}

/// Convert the TIMESTAMP values of a row read from table `def` from UTC to
/// the session zone. `projection`: the columns the row holds, in order
/// (empty: every column in table order).
pub fn row_to_local(row: &mut [Value], def: &TableDef, projection: &[ColumnId], zone: Option<&Zone>) {
    let Some(zone) = zone else { return };
    if projection.is_empty() {
        for (c, v) in def.columns.iter().zip(row.iter_mut()) {
            if matches!(c.ty, ColumnType::Timestamp) {
                value_to_local(v, zone);
            }
        }
        return;
    }
    for (c, v) in projection.iter().zip(row.iter_mut()) {
        if is_ts(def, *c) {
            value_to_local(v, zone);
        }
    }
}

/// `txn.execute(ops, exec)` for ops on table `def`, with TIMESTAMP values
/// sent in UTC and read rows returned in the session zone.
pub async fn execute(
    txn: &mut Transaction,
    mut ops: Vec<KeyOp>,
    exec: ExecType,
    def: &TableDef,
    zone: Option<&Zone>,
) -> Result<Vec<OpResult>, ClientError> {
    let Some(z) = zone.filter(|_| has_timestamp(def)) else { return txn.execute(ops, exec).await };
    ops_to_utc(&mut ops, def, Some(z));
    let projections: Vec<Vec<ColumnId>> = ops.iter().map(|o| o.projection.clone()).collect();
    let mut res = txn.execute(ops, exec).await?;
    results_to_local(&mut res, &projections, def, Some(z));
    Ok(res)
}

/// Convert the rows of read results (`projections`: the projection of each
/// result's op) to the session zone.
pub fn results_to_local(res: &mut [OpResult], projections: &[Vec<ColumnId>], def: &TableDef, zone: Option<&Zone>) {
    if zone.is_none() {
        return;
    }
    for (r, p) in res.iter_mut().zip(projections) {
        if let OpResult::Ok(Some(row)) = r {
            row_to_local(row, def, p, zone);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use norr_signals::{ColumnDef, OpKind};

    fn def() -> TableDef {
        let col = |name: &str, ty| ColumnDef { name: name.into(), ty, nullable: true, default: None, auto_increment: false };
        norr_client::table_def(
            "d/t",
            vec![col("ts", ColumnType::Timestamp), col("dt", ColumnType::DateTime), col("t2", ColumnType::Timestamp)],
            vec![0],
        )
    }
    fn dt(s: &str) -> Value {
        Value::DateTime(crate::engine::expr::datetime::parse_datetime(s.as_bytes()).expect("datetime").0)
    }

    #[test]
    fn ops_and_rows_convert_only_timestamp_columns() {
        let d = def();
        let zone = tz::parse_zone(b"+02:00").expect("zone");
        let mut ops = vec![KeyOp::insert(
            d.id,
            vec![dt("2024-01-01 12:00:00")],
            vec![(0, dt("2024-01-01 12:00:00")), (1, dt("2024-01-01 12:00:00")), (2, dt("2024-01-01 01:00:00.5"))],
        )];
        ops_to_utc(&mut ops, &d, Some(&zone));
        assert_eq!(ops[0].key, KeyAccess::Primary(vec![dt("2024-01-01 10:00:00")]));
        assert_eq!(ops[0].values[0].1, dt("2024-01-01 10:00:00"));
        assert_eq!(ops[0].values[1].1, dt("2024-01-01 12:00:00"), "DATETIME is never converted");
        assert_eq!(ops[0].values[2].1, dt("2023-12-31 23:00:00.5"));
        assert_eq!(ops[0].kind, OpKind::Insert);
        // UTC: untouched.
        let mut same = ops.clone();
        ops_to_utc(&mut same, &d, None);
        assert_eq!(same, ops);

        let mut row = vec![dt("2024-01-01 10:00:00"), dt("2024-01-01 10:00:00"), Value::Null];
        row_to_local(&mut row, &d, &[], Some(&zone));
        assert_eq!(row, vec![dt("2024-01-01 12:00:00"), dt("2024-01-01 10:00:00"), Value::Null]);
        // A projected row: (t2, dt).
        let mut row = vec![dt("2024-01-01 10:00:00"), dt("2024-01-01 10:00:00")];
        row_to_local(&mut row, &d, &[2, 1], Some(&zone));
        assert_eq!(row, vec![dt("2024-01-01 12:00:00"), dt("2024-01-01 10:00:00")]);
    }

    #[test]
    fn zero_dates_stay() {
        let zone = tz::parse_zone(b"Europe/Berlin").expect("zone");
        let mut v = dt("0000-00-00 00:00:00");
        value_to_utc(&mut v, &zone);
        assert_eq!(v, dt("0000-00-00 00:00:00"));
        value_to_local(&mut v, &zone);
        assert_eq!(v, dt("0000-00-00 00:00:00"));
    }
}
