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
//!   pushed filter values are converted by the planner (`zoned_value`),
//!   which knows which side of a comparison a value bounds.
//!
//! Wall times a DST change repeats name two moments: a value written takes
//! the earlier one (MySQL's choice), so a row at the later moment, read back
//! as that wall time, is written back an hour earlier if its TIMESTAMP is
//! written again (MySQL writes the stored moment back unchanged). A lookup of
//! such a wall time scans instead, and range bounds widen to cover both
//! moments (the SQL node checks every conjunct again on the wall times). A
//! wall time a DST change skips names no moment: as a key it finds nothing,
//! as a bound it is the moment of the change.
//!
//! With the session zone UTC (`EvalCtx::tz` None, the default) every function
//! here returns at its first test.

use crate::engine::functions::tz::{self, Zone};
use crate::engine::plan::{key_value, KeyConv};
use norr_client::{ClientError, Transaction};
use norr_signals::coerce::coerce_value;
use norr_signals::ColumnDef;
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

/// What a value converted for a TIMESTAMP column is for, under a session
/// zone that is not UTC (see `zoned_value`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Use {
    /// A key of a keyed operation: it stays the session's wall time, and
    /// `ops_to_utc` converts the operation as it is sent.
    Lookup,
    /// A key of a join's lookup of the inner side: as `Lookup`, but a
    /// repeated wall time looks up its earlier moment (a join cannot fall
    /// back to a scan per outer row), as MySQL's ref access does.
    JoinLookup,
    /// Sent as it is, compared for equality (a range's equality prefix, a
    /// pushed `=`, `<>` or IN): UTC, only for a wall time of one moment.
    Equal,
    /// Sent as a lower / upper bound: the earliest / latest UTC moment of
    /// the wall time.
    Low,
    High,
}

/// `key_value` for a value that is the session zone's wall time (`zone`,
/// None: UTC). Only TIMESTAMP columns differ: a stored value is a UTC moment
/// the SQL node reads as the zone's wall time (the module doc), so a value sent
/// to the data node to compare with stored ones is that wall time's UTC
/// moment (`use_` says which, and whether it stays local). The second result
/// is false where a bound stands for a wall time a DST change repeats or
/// skips: it must then be inclusive (a superset, which the SQL node checks
/// again; see the module doc).
pub fn zoned_value(v: &Value, col: &ColumnDef, zone: Option<&Zone>, use_: Use) -> (KeyConv, bool) {
    let Some(zone) = zone.filter(|_| matches!(col.ty, ColumnType::Timestamp)) else {
        return (key_value(v, col), true);
    };
    // As a DATETIME first: TIMESTAMP's range applies to the UTC moment.
    let as_datetime = ColumnDef { ty: ColumnType::DateTime, ..col.clone() };
    let local = match key_value(v, &as_datetime) {
        KeyConv::Val(Value::DateTime(dt)) => dt,
        KeyConv::Val(_) => return (KeyConv::Fallback, false),
        other => return (other, true),
    };
    let Some(u) = tz::local_to_utc(&local, zone) else { return (KeyConv::Fallback, false) };
    match use_ {
        Use::Lookup | Use::JoinLookup | Use::Equal => {
            if !u.exact && u.utc == u.latest {
                // A skipped wall time: no stored moment reads as it.
                return (KeyConv::NoMatch, true);
            }
            if !u.exact && use_ != Use::JoinLookup {
                // Repeated: two moments, which one key cannot find.
                return (KeyConv::Fallback, false);
            }
            match coerce_value(Value::DateTime(u.utc), &col.ty, true) {
                Ok(_) => (KeyConv::Val(Value::DateTime(if use_ == Use::Equal { u.utc } else { local })), u.exact),
                Err(_) => (KeyConv::NoMatch, true),
            }
        }
        Use::Low => (KeyConv::Val(Value::DateTime(u.utc)), u.exact),
        Use::High => (KeyConv::Val(Value::DateTime(u.latest)), u.exact),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use norr_signals::OpKind;

    fn def() -> TableDef {
        let col =
            |name: &str, ty| ColumnDef { name: name.into(), ty, nullable: true, default: None, auto_increment: false };
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
        let zero = Value::DateTime(norr_signals::DateTime {
            date: norr_signals::Date { year: 0, month: 0, day: 0 },
            hour: 0,
            minute: 0,
            second: 0,
            micro: 0,
        });
        let mut v = zero.clone();
        value_to_utc(&mut v, &zone);
        assert_eq!(v, zero);
        value_to_local(&mut v, &zone);
        assert_eq!(v, zero);
    }

    #[test]
    fn zoned_values_for_lookups_and_bounds() {
        let d = def();
        let ts = &d.columns[0];
        let berlin = tz::parse_zone(b"Europe/Berlin").expect("zone");
        let plus2 = tz::parse_zone(b"+02:00").expect("zone");
        let s = |x: &str| Value::str(x);
        // UTC, or a DATETIME column: as key_value.
        assert_eq!(
            zoned_value(&s("2024-01-01 12:00:00"), ts, None, Use::Equal),
            (KeyConv::Val(dt("2024-01-01 12:00:00")), true)
        );
        assert_eq!(
            zoned_value(&s("2024-01-01 12:00:00"), &d.columns[1], Some(&plus2), Use::Equal),
            (KeyConv::Val(dt("2024-01-01 12:00:00")), true)
        );
        // A lookup key stays local (converted as the op is sent); sent values are UTC.
        assert_eq!(
            zoned_value(&s("2024-01-01 12:00:00"), ts, Some(&plus2), Use::Lookup),
            (KeyConv::Val(dt("2024-01-01 12:00:00")), true)
        );
        assert_eq!(
            zoned_value(&s("2024-01-01 12:00:00"), ts, Some(&plus2), Use::Equal),
            (KeyConv::Val(dt("2024-01-01 10:00:00")), true)
        );
        // TIMESTAMP's range is the UTC moment's.
        assert_eq!(zoned_value(&s("1970-01-01 02:00:00"), ts, Some(&plus2), Use::Lookup).0, KeyConv::NoMatch);
        assert_eq!(
            zoned_value(&s("1970-01-01 02:00:01"), ts, Some(&plus2), Use::Lookup).0,
            KeyConv::Val(dt("1970-01-01 02:00:01"))
        );
        assert_eq!(
            zoned_value(&s("2038-01-19 05:14:07"), ts, Some(&plus2), Use::Lookup).0,
            KeyConv::Val(dt("2038-01-19 05:14:07"))
        );
        assert_eq!(zoned_value(&Value::Null, ts, Some(&plus2), Use::Lookup).0, KeyConv::NoMatch);
        // Berlin 2024-10-27 02:30 happens twice: no single key; bounds span both moments.
        let fold = s("2024-10-27 02:30:00");
        assert_eq!(zoned_value(&fold, ts, Some(&berlin), Use::Lookup).0, KeyConv::Fallback);
        assert_eq!(zoned_value(&fold, ts, Some(&berlin), Use::Equal).0, KeyConv::Fallback);
        assert_eq!(
            zoned_value(&fold, ts, Some(&berlin), Use::JoinLookup),
            (KeyConv::Val(dt("2024-10-27 02:30:00")), false)
        );
        assert_eq!(zoned_value(&fold, ts, Some(&berlin), Use::Low), (KeyConv::Val(dt("2024-10-27 00:30:00")), false));
        assert_eq!(zoned_value(&fold, ts, Some(&berlin), Use::High), (KeyConv::Val(dt("2024-10-27 01:30:00")), false));
        // 2024-03-31 02:30 never happens: no row reads as it; bounds are the change.
        let gap = s("2024-03-31 02:30:00");
        assert_eq!(zoned_value(&gap, ts, Some(&berlin), Use::Lookup).0, KeyConv::NoMatch);
        assert_eq!(zoned_value(&gap, ts, Some(&berlin), Use::Low), (KeyConv::Val(dt("2024-03-31 01:00:00")), false));
        assert_eq!(zoned_value(&gap, ts, Some(&berlin), Use::High), (KeyConv::Val(dt("2024-03-31 01:00:00")), false));
    }
}
