//! Value coercion: check a value against a column type and convert it to the
//! column's storage class (see `value::Value` for the class of each type).
//!
//! Everything that stores or compares values goes through here first, so that
//! the key encoding (`keycode`) and the row format can assume coerced values.
//!
//! Rules (MySQL strict mode where it has one):
//! * integers: `Int` and `UInt` are accepted for either signedness when the value
//!   is in range; signed columns store `Int`, unsigned ones `UInt`. DECIMAL values
//!   with no fractional part are accepted too. Floats are rejected (`WrongValueType`):
//!   the SQL layer rounds them explicitly.
//! * FLOAT / DOUBLE: integers, decimals and floats convert; NaN, infinities and
//!   values beyond the f32 range of a FLOAT are `ValueOutOfRange`.
//! * DECIMAL(p, s): integers, decimals and finite floats convert, rounded half away
//!   from zero to scale `s`; more than `p - s` integer digits is `ValueOutOfRange`.
//! * CHAR / VARCHAR / TEXT: valid UTF-8 (`InvalidUtf8`), length in characters at
//!   most the declared length, TEXT at most `MAX_VALUE_BYTES` bytes (`ValueTooLarge`).
//!   CHAR values lose their trailing spaces (MySQL strips CHAR's padding when it
//!   reads a value back); a VARCHAR value too long only by trailing spaces is cut
//!   to the column length, as MySQL does in strict mode too.
//! * BINARY(n): right-padded with 0x00 to n bytes; longer is `ValueTooLarge`.
//! * VARBINARY(n) at most n bytes; BLOB at most `MAX_VALUE_BYTES`.
//! * DATE / DATETIME / TIMESTAMP: month 1..=12, day valid for the month (leap years
//!   included), year 0..=9999, time fields in range; TIMESTAMP within
//!   1970-01-01 00:00:01 ..= 2038-01-19 03:14:07. A DATE given for a DATETIME or
//!   TIMESTAMP column means midnight. TIME within ±838:59:59.
//! * NULL in a NOT NULL column is `NullInNotNullColumn`; any other class mismatch
//!   is `WrongValueType`.

use crate::error::{ErrorCode, NodeError};
use crate::keycode;
use crate::schema::{ColumnId, TableDef};
use crate::value::{ColumnType, Date, DateTime, Decimal, Value, MAX_DECIMAL_PRECISION, MAX_VALUE_BYTES};
use std::cmp::Ordering;

/// Largest TIME magnitude in microseconds (838:59:59.000000).
pub const MAX_TIME_MICROS: i64 = (838 * 3600 + 59 * 60 + 59) * 1_000_000;

/// Smallest TIMESTAMP (1970-01-01 00:00:01 UTC).
pub const MIN_TIMESTAMP: DateTime =
    DateTime { date: Date { year: 1970, month: 1, day: 1 }, hour: 0, minute: 0, second: 1, micro: 0 };

/// Largest TIMESTAMP (2038-01-19 03:14:07.999999 UTC).
pub const MAX_TIMESTAMP: DateTime =
    DateTime { date: Date { year: 2038, month: 1, day: 19 }, hour: 3, minute: 14, second: 7, micro: 999_999 };

fn err(code: ErrorCode, msg: String) -> NodeError {
    NodeError::with(code, msg)
}

fn type_name(ty: &ColumnType) -> String {
    format!("{ty:?}")
}

fn class_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "NULL",
        Value::Int(_) => "integer",
        Value::UInt(_) => "unsigned integer",
        Value::Float(_) => "float",
        Value::Double(_) => "double",
        Value::Decimal(_) => "decimal",
        Value::Bytes(_) => "string/bytes",
        Value::Date(_) => "date",
        Value::Time(_) => "time",
        Value::DateTime(_) => "datetime",
    }
}

fn wrong_type(v: &Value, ty: &ColumnType) -> NodeError {
    err(ErrorCode::WrongValueType, format!("a {} value cannot be stored in a {} column", class_name(v), type_name(ty)))
}

/// True if `y` is a leap year in the proleptic Gregorian calendar.
#[allow(clippy::manual_is_multiple_of)] // is_multiple_of needs Rust 1.87; MSRV is 1.85
pub fn is_leap_year(y: u16) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

/// Days in month `m` (1..=12) of year `y`; 0 for an invalid month.
pub fn days_in_month(y: u16, m: u8) -> u8 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap_year(y) => 29,
        2 => 28,
        _ => 0,
    }
}

/// Check a calendar date.
pub fn check_date(d: &Date) -> Result<(), NodeError> {
    if d.year > 9999 {
        return Err(err(ErrorCode::ValueOutOfRange, format!("year {} out of range 0..=9999", d.year)));
    }
    if !(1..=12).contains(&d.month) {
        return Err(err(ErrorCode::ValueOutOfRange, format!("month {} out of range 1..=12", d.month)));
    }
    let dim = days_in_month(d.year, d.month);
    if d.day < 1 || d.day > dim {
        return Err(err(
            ErrorCode::ValueOutOfRange,
            format!("day {} out of range 1..={} for {:04}-{:02}", d.day, dim, d.year, d.month),
        ));
    }
    Ok(())
}

/// Check a date and time of day.
pub fn check_datetime(dt: &DateTime) -> Result<(), NodeError> {
    check_date(&dt.date)?;
    if dt.hour > 23 || dt.minute > 59 || dt.second > 59 || dt.micro > 999_999 {
        return Err(err(
            ErrorCode::ValueOutOfRange,
            format!("time of day {:02}:{:02}:{:02}.{:06} out of range", dt.hour, dt.minute, dt.second, dt.micro),
        ));
    }
    Ok(())
}

fn pow10(n: u8) -> i128 {
    10i128.pow(n as u32)
}

/// Rescale a decimal mantissa from scale `from` to `to`, rounding half away from
/// zero when digits are dropped. None on overflow.
pub fn rescale_round(m: i128, from: u8, to: u8) -> Option<i128> {
    match to.cmp(&from) {
        Ordering::Equal => Some(m),
        Ordering::Greater => {
            let d = to - from;
            if d > 38 {
                return if m == 0 { Some(0) } else { None };
            }
            m.checked_mul(pow10(d))
        }
        Ordering::Less => {
            let d = from - to;
            if d > 38 {
                return Some(0);
            }
            let p = pow10(d);
            let q = m / p;
            let r = (m % p).abs();
            // Half away from zero: compare the dropped part with p/2.
            if r * 2 >= p {
                Some(if m < 0 { q - 1 } else { q + 1 })
            } else {
                Some(q)
            }
        }
    }
}

fn f64_to_decimal(f: f64, scale: u8) -> Option<i128> {
    if !f.is_finite() {
        return None;
    }
    let scaled = f * 10f64.powi(scale as i32);
    if scaled.abs() >= 1e38 {
        return None;
    }
    // f64::round rounds half away from zero.
    Some(scaled.round() as i128)
}

fn decimal_to_f64(d: &Decimal) -> f64 {
    d.mantissa as f64 / 10f64.powi(d.scale as i32)
}

fn coerce_int(v: Value, ty: &ColumnType) -> Result<Value, NodeError> {
    let (min, max) = ty.int_range().expect("integer type");
    let n: i128 = match &v {
        Value::Int(i) => *i as i128,
        Value::UInt(u) => *u as i128,
        Value::Decimal(d) if d.scale <= 38 && d.mantissa % pow10(d.scale) == 0 => d.mantissa / pow10(d.scale),
        Value::Decimal(_) => {
            return Err(err(
                ErrorCode::WrongValueType,
                format!("decimal with a fractional part cannot be stored in a {} column", type_name(ty)),
            ))
        }
        _ => return Err(wrong_type(&v, ty)),
    };
    if n < min || n > max {
        return Err(err(
            ErrorCode::ValueOutOfRange,
            format!("{n} out of range {min}..={max} for a {} column", type_name(ty)),
        ));
    }
    if ty.is_unsigned_int() {
        Ok(Value::UInt(n as u64))
    } else {
        Ok(Value::Int(n as i64))
    }
}

fn to_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::UInt(u) => Some(*u as f64),
        Value::Float(f) => Some(*f as f64),
        Value::Double(f) => Some(*f),
        Value::Decimal(d) => Some(decimal_to_f64(d)),
        _ => None,
    }
}

fn coerce_float(v: Value, ty: &ColumnType) -> Result<Value, NodeError> {
    let is_float = matches!(ty, ColumnType::Float);
    if let (true, Value::Float(f)) = (is_float, &v) {
        if f.is_finite() {
            return Ok(v);
        }
    }
    let f = to_f64(&v).ok_or_else(|| wrong_type(&v, ty))?;
    if !f.is_finite() {
        return Err(err(ErrorCode::ValueOutOfRange, format!("{f} is not a finite number")));
    }
    if is_float {
        if f.abs() > f32::MAX as f64 {
            return Err(err(ErrorCode::ValueOutOfRange, format!("{f} out of range for FLOAT")));
        }
        Ok(Value::Float(f as f32))
    } else {
        Ok(Value::Double(f))
    }
}

fn coerce_decimal(v: Value, precision: u8, scale: u8, ty: &ColumnType) -> Result<Value, NodeError> {
    if precision == 0 || precision > MAX_DECIMAL_PRECISION || scale > precision {
        return Err(err(ErrorCode::BadSchema, format!("invalid column type {}", type_name(ty))));
    }
    let m = match &v {
        Value::Int(i) => rescale_round(*i as i128, 0, scale),
        Value::UInt(u) => rescale_round(*u as i128, 0, scale),
        Value::Decimal(d) => rescale_round(d.mantissa, d.scale, scale),
        Value::Float(f) => f64_to_decimal(*f as f64, scale),
        Value::Double(f) => f64_to_decimal(*f, scale),
        _ => return Err(wrong_type(&v, ty)),
    };
    let limit = pow10(precision);
    match m {
        Some(m) if m.abs() < limit => Ok(Value::Decimal(Decimal { mantissa: m, scale })),
        _ => Err(err(ErrorCode::ValueOutOfRange, format!("{v:?} out of range for DECIMAL({precision},{scale})"))),
    }
}

fn check_text(b: &[u8], max_chars: Option<u32>, ty: &ColumnType) -> Result<(), NodeError> {
    let s = std::str::from_utf8(b).map_err(|e| {
        err(ErrorCode::InvalidUtf8, format!("invalid UTF-8 at byte {} for a {} column", e.valid_up_to(), type_name(ty)))
    })?;
    if b.len() > MAX_VALUE_BYTES {
        return Err(err(
            ErrorCode::ValueTooLarge,
            format!("{} bytes exceed the limit of {MAX_VALUE_BYTES} bytes", b.len()),
        ));
    }
    if let Some(max) = max_chars {
        // Bytes bound the characters: skip counting when it cannot exceed.
        if b.len() > max as usize {
            let n = s.chars().count();
            if n > max as usize {
                return Err(err(
                    ErrorCode::ValueTooLarge,
                    format!("{n} characters exceed the column length {max} of {}", type_name(ty)),
                ));
            }
        }
    }
    Ok(())
}

/// A VARCHAR value longer than its column only by trailing spaces is cut to
/// the column's length, as MySQL does in every SQL mode (with a note, not an
/// error); anything else too long is left for `check_text` to refuse.
fn drop_excess_spaces(b: &mut Vec<u8>, max_chars: usize) {
    let Ok(s) = std::str::from_utf8(b) else { return };
    let Some((cut, _)) = s.char_indices().nth(max_chars) else { return };
    if b[cut..].iter().all(|&c| c == b' ') {
        b.truncate(cut);
    }
}

fn check_bytes_len(len: usize, max: usize, ty: &ColumnType) -> Result<(), NodeError> {
    if len > max {
        return Err(err(
            ErrorCode::ValueTooLarge,
            format!("{len} bytes exceed the column length {max} of {}", type_name(ty)),
        ));
    }
    Ok(())
}

/// Check and convert `v` to the storage class of a column of type `ty`.
pub fn coerce_value(v: Value, ty: &ColumnType, nullable: bool) -> Result<Value, NodeError> {
    if v.is_null() {
        return if nullable {
            Ok(Value::Null)
        } else {
            Err(err(ErrorCode::NullInNotNullColumn, format!("NULL given for a NOT NULL {} column", type_name(ty))))
        };
    }
    match ty {
        ColumnType::TinyInt { .. }
        | ColumnType::SmallInt { .. }
        | ColumnType::MediumInt { .. }
        | ColumnType::Int { .. }
        | ColumnType::BigInt { .. } => coerce_int(v, ty),
        ColumnType::Float | ColumnType::Double => coerce_float(v, ty),
        ColumnType::Decimal { precision, scale } => coerce_decimal(v, *precision, *scale, ty),
        ColumnType::Char { len, .. } => match v {
            Value::Bytes(mut b) => {
                // MySQL pads CHAR values when it stores them and strips the
                // padding when it reads them back, so a CHAR value never ends in
                // a space; stripping on the way in gives the same values (and
                // keys) without storing the padding.
                b.truncate(b.iter().rposition(|&c| c != b' ').map_or(0, |i| i + 1));
                check_text(&b, Some(*len), ty)?;
                Ok(Value::Bytes(b))
            }
            _ => Err(wrong_type(&v, ty)),
        },
        ColumnType::Varchar { len, .. } => match v {
            Value::Bytes(mut b) => {
                if b.len() > *len as usize {
                    drop_excess_spaces(&mut b, *len as usize);
                }
                check_text(&b, Some(*len), ty)?;
                Ok(Value::Bytes(b))
            }
            _ => Err(wrong_type(&v, ty)),
        },
        ColumnType::Text { .. } => match v {
            Value::Bytes(b) => {
                check_text(&b, None, ty)?;
                Ok(Value::Bytes(b))
            }
            _ => Err(wrong_type(&v, ty)),
        },
        ColumnType::Binary { len } => match v {
            Value::Bytes(mut b) => {
                check_bytes_len(b.len(), *len as usize, ty)?;
                b.resize(*len as usize, 0);
                Ok(Value::Bytes(b))
            }
            _ => Err(wrong_type(&v, ty)),
        },
        ColumnType::Varbinary { len } => match v {
            Value::Bytes(b) => {
                check_bytes_len(b.len(), (*len as usize).min(MAX_VALUE_BYTES), ty)?;
                Ok(Value::Bytes(b))
            }
            _ => Err(wrong_type(&v, ty)),
        },
        ColumnType::Blob => match v {
            Value::Bytes(b) => {
                check_bytes_len(b.len(), MAX_VALUE_BYTES, ty)?;
                Ok(Value::Bytes(b))
            }
            _ => Err(wrong_type(&v, ty)),
        },
        ColumnType::Date => match v {
            Value::Date(d) => {
                check_date(&d)?;
                Ok(v)
            }
            _ => Err(wrong_type(&v, ty)),
        },
        ColumnType::DateTime | ColumnType::Timestamp => {
            let dt = match v {
                Value::DateTime(dt) => dt,
                Value::Date(d) => DateTime { date: d, hour: 0, minute: 0, second: 0, micro: 0 },
                _ => return Err(wrong_type(&v, ty)),
            };
            check_datetime(&dt)?;
            if matches!(ty, ColumnType::Timestamp) && (dt < MIN_TIMESTAMP || dt > MAX_TIMESTAMP) {
                return Err(err(
                    ErrorCode::ValueOutOfRange,
                    "TIMESTAMP out of range 1970-01-01 00:00:01 ..= 2038-01-19 03:14:07".to_string(),
                ));
            }
            Ok(Value::DateTime(dt))
        }
        ColumnType::Time => match v {
            Value::Time(t) => {
                if t.unsigned_abs() > MAX_TIME_MICROS as u64 {
                    return Err(err(ErrorCode::ValueOutOfRange, format!("TIME {t} us out of range ±838:59:59")));
                }
                Ok(v)
            }
            _ => Err(wrong_type(&v, ty)),
        },
    }
}

/// Build a full row (table column order) for an insert from the given columns.
/// Columns not given take their default, or NULL if nullable.
pub fn coerce_row(def: &TableDef, values: &[(ColumnId, Value)]) -> Result<Vec<Value>, NodeError> {
    let n = def.columns.len();
    let mut row: Vec<Option<Value>> = vec![None; n];
    for (id, v) in values {
        let col = def
            .column(*id)
            .ok_or_else(|| err(ErrorCode::NoSuchColumn, format!("column id {id} not in table {}", def.name)))?;
        let slot = &mut row[*id as usize];
        if slot.is_some() {
            return Err(err(ErrorCode::WrongValueType, format!("column {} given twice", col.name)));
        }
        let cv = coerce_value(v.clone(), &col.ty, col.nullable)
            .map_err(|e| NodeError::with(e.code, format!("column {}: {}", col.name, e.message)))?;
        *slot = Some(cv);
    }
    let mut out = Vec::with_capacity(n);
    for (i, slot) in row.into_iter().enumerate() {
        let col = &def.columns[i];
        let v = match slot {
            Some(v) => v,
            None => match &col.default {
                Some(d) => coerce_value(d.clone(), &col.ty, col.nullable)
                    .map_err(|e| NodeError::with(e.code, format!("default of column {}: {}", col.name, e.message)))?,
                None if col.nullable => Value::Null,
                None => {
                    return Err(err(
                        ErrorCode::NoDefault,
                        format!("column {} is NOT NULL, has no default and was not given", col.name),
                    ))
                }
            },
        };
        out.push(v);
    }
    Ok(out)
}

fn f64_key(f: f64) -> u64 {
    // Same total order as keycode::encode_f64.
    let f = if f == 0.0 { 0.0 } else { f };
    let bits = f.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

fn int_of(v: &Value) -> Option<i128> {
    match v {
        Value::Int(i) => Some(*i as i128),
        Value::UInt(u) => Some(*u as i128),
        _ => None,
    }
}

fn as_decimal(v: &Value) -> Option<Decimal> {
    match v {
        Value::Int(i) => Some(Decimal { mantissa: *i as i128, scale: 0 }),
        Value::UInt(u) => Some(Decimal { mantissa: *u as i128, scale: 0 }),
        Value::Decimal(d) => Some(*d),
        _ => None,
    }
}

fn cmp_decimal(a: Decimal, b: Decimal) -> Ordering {
    let s = a.scale.max(b.scale);
    match (rescale_round(a.mantissa, a.scale, s), rescale_round(b.mantissa, b.scale, s)) {
        (Some(x), Some(y)) => x.cmp(&y),
        // Overflow on rescale: fall back to floating point.
        _ => decimal_to_f64(&a).total_cmp(&decimal_to_f64(&b)),
    }
}

fn midnight(d: Date) -> DateTime {
    DateTime { date: d, hour: 0, minute: 0, second: 0, micro: 0 }
}

/// Compare two non-NULL values of a column of type `ty` in SQL order (the order
/// of their `keycode` encodings when both are coerced to `ty`). Numbers of
/// different classes compare by numeric value, a DATE with a DATETIME as
/// midnight. None if either is NULL or the classes are not comparable.
pub fn compare_values(a: &Value, b: &Value, ty: &ColumnType) -> Option<Ordering> {
    use Value::*;
    match (a, b) {
        (Null, _) | (_, Null) => None,
        (Int(_) | UInt(_), Int(_) | UInt(_)) => Some(int_of(a)?.cmp(&int_of(b)?)),
        (Float(_) | Double(_), _) | (_, Float(_) | Double(_)) => {
            let (x, y) = (to_f64(a)?, to_f64(b)?);
            Some(f64_key(x).cmp(&f64_key(y)))
        }
        (Decimal(_) | Int(_) | UInt(_), Decimal(_) | Int(_) | UInt(_)) => {
            Some(cmp_decimal(as_decimal(a)?, as_decimal(b)?))
        }
        (Bytes(x), Bytes(y)) => {
            if ty.is_text() && ty.collation() == crate::value::Collation::CaseInsensitive {
                Some(keycode::fold_case(x).cmp(&keycode::fold_case(y)))
            } else {
                Some(x.as_slice().cmp(y.as_slice()))
            }
        }
        (Date(x), Date(y)) => Some(x.cmp(y)),
        (DateTime(x), DateTime(y)) => Some(x.cmp(y)),
        (Date(x), DateTime(y)) => Some(midnight(*x).cmp(y)),
        (DateTime(x), Date(y)) => Some(x.cmp(&midnight(*y))),
        (Time(x), Time(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

/// True if values of these classes can be compared by `compare_values`.
pub fn comparable_classes(a: &Value, b: &Value) -> bool {
    use Value::*;
    let num = |v: &Value| matches!(v, Int(_) | UInt(_) | Float(_) | Double(_) | Decimal(_));
    let date = |v: &Value| matches!(v, Date(_) | DateTime(_));
    matches!((a, b), (Null, _) | (_, Null))
        || (num(a) && num(b))
        || (date(a) && date(b))
        || matches!((a, b), (Bytes(_), Bytes(_)) | (Time(_), Time(_)))
}

/// A representative non-NULL value of a column type's storage class (used to
/// check that a literal is comparable with a column).
pub fn class_sample(ty: &ColumnType) -> Value {
    match ty {
        ColumnType::TinyInt { unsigned: false }
        | ColumnType::SmallInt { unsigned: false }
        | ColumnType::MediumInt { unsigned: false }
        | ColumnType::Int { unsigned: false }
        | ColumnType::BigInt { unsigned: false } => Value::Int(0),
        ColumnType::TinyInt { .. }
        | ColumnType::SmallInt { .. }
        | ColumnType::MediumInt { .. }
        | ColumnType::Int { .. }
        | ColumnType::BigInt { .. } => Value::UInt(0),
        ColumnType::Float => Value::Float(0.0),
        ColumnType::Double => Value::Double(0.0),
        ColumnType::Decimal { scale, .. } => Value::Decimal(Decimal { mantissa: 0, scale: *scale }),
        ColumnType::Date => Value::Date(Date { year: 2000, month: 1, day: 1 }),
        ColumnType::DateTime | ColumnType::Timestamp => {
            Value::DateTime(midnight(Date { year: 2000, month: 1, day: 1 }))
        }
        ColumnType::Time => Value::Time(0),
        _ => Value::Bytes(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{ColumnDef, PartitionScheme};
    use crate::value::Collation;

    fn code(r: Result<Value, NodeError>) -> ErrorCode {
        r.expect_err("expected an error").code
    }

    #[test]
    fn integers() {
        let t = ColumnType::TinyInt { unsigned: false };
        assert_eq!(coerce_value(Value::Int(127), &t, false).unwrap(), Value::Int(127));
        assert_eq!(coerce_value(Value::UInt(5), &t, false).unwrap(), Value::Int(5));
        assert_eq!(code(coerce_value(Value::Int(128), &t, false)), ErrorCode::ValueOutOfRange);
        assert_eq!(code(coerce_value(Value::Int(-129), &t, false)), ErrorCode::ValueOutOfRange);
        let u = ColumnType::TinyInt { unsigned: true };
        assert_eq!(coerce_value(Value::Int(255), &u, false).unwrap(), Value::UInt(255));
        assert_eq!(code(coerce_value(Value::Int(-1), &u, false)), ErrorCode::ValueOutOfRange);
        let m = ColumnType::MediumInt { unsigned: false };
        assert!(coerce_value(Value::Int(-(1 << 23)), &m, false).is_ok());
        assert_eq!(code(coerce_value(Value::Int(1 << 23), &m, false)), ErrorCode::ValueOutOfRange);
        let b = ColumnType::BigInt { unsigned: false };
        assert_eq!(code(coerce_value(Value::UInt(u64::MAX), &b, false)), ErrorCode::ValueOutOfRange);
        let bu = ColumnType::BigInt { unsigned: true };
        assert_eq!(coerce_value(Value::UInt(u64::MAX), &bu, false).unwrap(), Value::UInt(u64::MAX));
        assert_eq!(code(coerce_value(Value::Double(1.0), &b, false)), ErrorCode::WrongValueType);
        assert_eq!(code(coerce_value(Value::str("1"), &b, false)), ErrorCode::WrongValueType);
        let d = Value::Decimal(Decimal { mantissa: 1200, scale: 2 });
        assert_eq!(coerce_value(d, &b, false).unwrap(), Value::Int(12));
        let d = Value::Decimal(Decimal { mantissa: 1201, scale: 2 });
        assert_eq!(code(coerce_value(d, &b, false)), ErrorCode::WrongValueType);
    }

    #[test]
    fn nulls() {
        let t = ColumnType::Int { unsigned: false };
        assert_eq!(coerce_value(Value::Null, &t, true).unwrap(), Value::Null);
        let e = coerce_value(Value::Null, &t, false).unwrap_err();
        assert_eq!(e.code, ErrorCode::NullInNotNullColumn);
        assert!(e.message.contains("NOT NULL"));
    }

    #[test]
    fn floats() {
        assert_eq!(coerce_value(Value::Int(3), &ColumnType::Float, false).unwrap(), Value::Float(3.0));
        assert_eq!(coerce_value(Value::Double(0.5), &ColumnType::Float, false).unwrap(), Value::Float(0.5));
        assert_eq!(code(coerce_value(Value::Double(1e300), &ColumnType::Float, false)), ErrorCode::ValueOutOfRange);
        assert_eq!(code(coerce_value(Value::Double(f64::NAN), &ColumnType::Double, false)), ErrorCode::ValueOutOfRange);
        let d = Value::Decimal(Decimal { mantissa: 25, scale: 1 });
        assert_eq!(coerce_value(d, &ColumnType::Double, false).unwrap(), Value::Double(2.5));
        assert_eq!(code(coerce_value(Value::str("x"), &ColumnType::Double, false)), ErrorCode::WrongValueType);
    }

    #[test]
    fn decimals() {
        let t = ColumnType::Decimal { precision: 5, scale: 2 };
        let dec = |m, s| Value::Decimal(Decimal { mantissa: m, scale: s });
        assert_eq!(coerce_value(dec(12345, 3), &t, false).unwrap(), dec(1235, 2));
        assert_eq!(coerce_value(dec(-12345, 3), &t, false).unwrap(), dec(-1235, 2));
        assert_eq!(coerce_value(dec(-12344, 3), &t, false).unwrap(), dec(-1234, 2));
        assert_eq!(coerce_value(Value::Int(999), &t, false).unwrap(), dec(99900, 2));
        assert_eq!(code(coerce_value(Value::Int(1000), &t, false)), ErrorCode::ValueOutOfRange);
        // 999.995 rounds to 1000.00: out of range.
        assert_eq!(code(coerce_value(dec(999995, 3), &t, false)), ErrorCode::ValueOutOfRange);
        assert_eq!(coerce_value(Value::Double(0.125), &t, false).unwrap(), dec(13, 2));
        assert_eq!(coerce_value(Value::Double(-2.5), &t, false).unwrap(), dec(-250, 2));
        assert_eq!(code(coerce_value(Value::Double(f64::INFINITY), &t, false)), ErrorCode::ValueOutOfRange);
    }

    #[test]
    fn strings() {
        let c = ColumnType::Char { len: 3, collation: Collation::CaseInsensitive };
        assert!(coerce_value(Value::str("åäö"), &c, false).is_ok());
        assert_eq!(code(coerce_value(Value::str("abcd"), &c, false)), ErrorCode::ValueTooLarge);
        assert_eq!(code(coerce_value(Value::Bytes(vec![0xff, 0xfe]), &c, false)), ErrorCode::InvalidUtf8);
        assert_eq!(code(coerce_value(Value::Int(1), &c, false)), ErrorCode::WrongValueType);
        let v = ColumnType::Varchar { len: 2, collation: Collation::Binary };
        assert_eq!(code(coerce_value(Value::str("abc"), &v, false)), ErrorCode::ValueTooLarge);
        // CHAR loses trailing spaces (only spaces, only trailing), before the
        // length check; VARCHAR keeps them unless they are all that is too long.
        assert_eq!(coerce_value(Value::str("ab  "), &c, false).unwrap(), Value::str("ab"));
        assert_eq!(coerce_value(Value::str("abc      "), &c, false).unwrap(), Value::str("abc"));
        assert_eq!(coerce_value(Value::str(" a\t "), &c, false).unwrap(), Value::str(" a\t"));
        assert_eq!(coerce_value(Value::str("   "), &c, false).unwrap(), Value::str(""));
        assert_eq!(code(coerce_value(Value::str("abcd "), &c, false)), ErrorCode::ValueTooLarge);
        assert_eq!(coerce_value(Value::str("å "), &v, false).unwrap(), Value::str("å "));
        assert_eq!(coerce_value(Value::str("åä   "), &v, false).unwrap(), Value::str("åä"));
        assert_eq!(code(coerce_value(Value::str("a b "), &v, false)), ErrorCode::ValueTooLarge);
        assert_eq!(code(coerce_value(Value::Bytes(vec![b'a', b'b', 0xff]), &v, false)), ErrorCode::InvalidUtf8);
        let t = ColumnType::Text { collation: Collation::Binary };
        assert_eq!(coerce_value(Value::str("a  "), &t, false).unwrap(), Value::str("a  "));
        assert!(coerce_value(Value::Bytes(vec![b'a'; 100_000]), &t, false).is_ok());
        assert_eq!(
            code(coerce_value(Value::Bytes(vec![b'a'; MAX_VALUE_BYTES + 1]), &t, false)),
            ErrorCode::ValueTooLarge
        );
        let bl = ColumnType::Blob;
        assert!(coerce_value(Value::Bytes(vec![0xff; 10]), &bl, false).is_ok());
        assert_eq!(
            code(coerce_value(Value::Bytes(vec![0; MAX_VALUE_BYTES + 1]), &bl, false)),
            ErrorCode::ValueTooLarge
        );
    }

    #[test]
    fn binaries() {
        let b = ColumnType::Binary { len: 4 };
        assert_eq!(coerce_value(Value::Bytes(vec![1, 2]), &b, false).unwrap(), Value::Bytes(vec![1, 2, 0, 0]));
        assert_eq!(code(coerce_value(Value::Bytes(vec![1; 5]), &b, false)), ErrorCode::ValueTooLarge);
        let vb = ColumnType::Varbinary { len: 3 };
        assert_eq!(coerce_value(Value::Bytes(vec![0xff]), &vb, false).unwrap(), Value::Bytes(vec![0xff]));
        assert_eq!(code(coerce_value(Value::Bytes(vec![1; 4]), &vb, false)), ErrorCode::ValueTooLarge);
    }

    #[test]
    fn dates_and_times() {
        let d = |y, m, dd| Date { year: y, month: m, day: dd };
        assert!(coerce_value(Value::Date(d(2024, 2, 29)), &ColumnType::Date, false).is_ok());
        assert!(coerce_value(Value::Date(d(2000, 2, 29)), &ColumnType::Date, false).is_ok());
        assert_eq!(
            code(coerce_value(Value::Date(d(1900, 2, 29)), &ColumnType::Date, false)),
            ErrorCode::ValueOutOfRange
        );
        assert_eq!(
            code(coerce_value(Value::Date(d(2023, 2, 29)), &ColumnType::Date, false)),
            ErrorCode::ValueOutOfRange
        );
        assert_eq!(
            code(coerce_value(Value::Date(d(2023, 13, 1)), &ColumnType::Date, false)),
            ErrorCode::ValueOutOfRange
        );
        assert_eq!(
            code(coerce_value(Value::Date(d(2023, 4, 31)), &ColumnType::Date, false)),
            ErrorCode::ValueOutOfRange
        );
        assert_eq!(
            code(coerce_value(Value::Date(d(2023, 0, 1)), &ColumnType::Date, false)),
            ErrorCode::ValueOutOfRange
        );
        let dt = |date, h, mi, s| DateTime { date, hour: h, minute: mi, second: s, micro: 0 };
        assert!(coerce_value(Value::DateTime(dt(d(2023, 1, 1), 23, 59, 59)), &ColumnType::DateTime, false).is_ok());
        assert_eq!(
            code(coerce_value(Value::DateTime(dt(d(2023, 1, 1), 24, 0, 0)), &ColumnType::DateTime, false)),
            ErrorCode::ValueOutOfRange
        );
        assert_eq!(
            coerce_value(Value::Date(d(2023, 1, 2)), &ColumnType::DateTime, false).unwrap(),
            Value::DateTime(dt(d(2023, 1, 2), 0, 0, 0))
        );
        let ts = ColumnType::Timestamp;
        assert!(coerce_value(Value::DateTime(dt(d(1970, 1, 1), 0, 0, 1)), &ts, false).is_ok());
        assert!(coerce_value(Value::DateTime(dt(d(2038, 1, 19), 3, 14, 7)), &ts, false).is_ok());
        assert_eq!(
            code(coerce_value(Value::DateTime(dt(d(1970, 1, 1), 0, 0, 0)), &ts, false)),
            ErrorCode::ValueOutOfRange
        );
        assert_eq!(
            code(coerce_value(Value::DateTime(dt(d(2038, 1, 19), 3, 14, 8)), &ts, false)),
            ErrorCode::ValueOutOfRange
        );
        assert!(coerce_value(Value::Time(-MAX_TIME_MICROS), &ColumnType::Time, false).is_ok());
        assert_eq!(
            code(coerce_value(Value::Time(MAX_TIME_MICROS + 1), &ColumnType::Time, false)),
            ErrorCode::ValueOutOfRange
        );
        assert_eq!(code(coerce_value(Value::Int(0), &ColumnType::Date, false)), ErrorCode::WrongValueType);
    }

    fn table() -> TableDef {
        TableDef {
            id: 1,
            version: 1,
            name: "t".into(),
            columns: vec![
                ColumnDef::new("id", ColumnType::Int { unsigned: false }).not_null(),
                ColumnDef::new("a", ColumnType::Varchar { len: 5, collation: Collation::CaseInsensitive }),
                ColumnDef::new("b", ColumnType::SmallInt { unsigned: true }).not_null().default_value(Value::Int(7)),
                ColumnDef::new("c", ColumnType::Double).not_null(),
            ],
            primary_key: vec![0],
            partitioning: PartitionScheme::Key { columns: vec![] },
            partitions: 1,
            indexes: vec![],
            extra: vec![],
            options: Default::default(),
        }
    }

    #[test]
    fn rows() {
        let t = table();
        let r = coerce_row(&t, &[(0, Value::UInt(1)), (3, Value::Int(2))]).unwrap();
        assert_eq!(r, vec![Value::Int(1), Value::Null, Value::UInt(7), Value::Double(2.0)]);
        assert_eq!(coerce_row(&t, &[(0, Value::Int(1))]).unwrap_err().code, ErrorCode::NoDefault);
        assert_eq!(coerce_row(&t, &[(9, Value::Int(1))]).unwrap_err().code, ErrorCode::NoSuchColumn);
        let dup = [(0, Value::Int(1)), (0, Value::Int(2)), (3, Value::Int(2))];
        assert_eq!(coerce_row(&t, &dup).unwrap_err().code, ErrorCode::WrongValueType);
        let e = coerce_row(&t, &[(0, Value::Int(1)), (3, Value::Int(2)), (1, Value::str("toolong"))]).unwrap_err();
        assert_eq!(e.code, ErrorCode::ValueTooLarge);
        assert!(e.message.contains("column a"), "{}", e.message);
    }

    #[test]
    fn compare_agrees_with_keycode() {
        let cases: Vec<(ColumnType, Vec<Value>)> = vec![
            (
                ColumnType::BigInt { unsigned: false },
                vec![Value::Int(-5), Value::Int(0), Value::UInt(3), Value::Int(i64::MAX)],
            ),
            (ColumnType::Int { unsigned: true }, vec![Value::UInt(0), Value::Int(4), Value::UInt(9)]),
            (
                ColumnType::Double,
                vec![Value::Double(-1.5), Value::Double(-0.0), Value::Double(0.0), Value::Double(2.0)],
            ),
            (
                ColumnType::Decimal { precision: 10, scale: 2 },
                vec![
                    Value::Decimal(Decimal { mantissa: -100, scale: 2 }),
                    Value::Decimal(Decimal { mantissa: 5, scale: 2 }),
                    Value::Decimal(Decimal { mantissa: 50, scale: 2 }),
                ],
            ),
            (
                ColumnType::Varchar { len: 10, collation: Collation::CaseInsensitive },
                vec![Value::str("a"), Value::str("AB"), Value::str("ab"), Value::str("b"), Value::str("Ä")],
            ),
            (
                ColumnType::Varbinary { len: 10 },
                vec![
                    Value::Bytes(vec![1]),
                    Value::Bytes(vec![1, 0]),
                    Value::Bytes(vec![1, 0, 0]),
                    Value::Bytes(vec![2]),
                ],
            ),
            (ColumnType::Time, vec![Value::Time(-5), Value::Time(0), Value::Time(7)]),
        ];
        for (ty, vals) in cases {
            for a in &vals {
                for b in &vals {
                    let (ca, cb) =
                        (coerce_value(a.clone(), &ty, true).unwrap(), coerce_value(b.clone(), &ty, true).unwrap());
                    let mut ka = Vec::new();
                    let mut kb = Vec::new();
                    keycode::encode_value(&mut ka, &ca, &ty);
                    keycode::encode_value(&mut kb, &cb, &ty);
                    assert_eq!(compare_values(&ca, &cb, &ty), Some(ka.cmp(&kb)), "{ty:?} {a:?} {b:?}");
                }
            }
        }
        let t = ColumnType::Int { unsigned: false };
        assert_eq!(compare_values(&Value::Null, &Value::Int(1), &t), None);
        assert_eq!(compare_values(&Value::Int(1), &Value::Null, &t), None);
        // Mixed classes compare by value.
        assert_eq!(compare_values(&Value::Int(100), &Value::Int(1000), &t), Some(Ordering::Less));
        assert_eq!(compare_values(&Value::Int(3), &Value::Double(2.5), &t), Some(Ordering::Greater));
        let half = Value::Decimal(Decimal { mantissa: 5, scale: 1 });
        assert_eq!(compare_values(&Value::Int(0), &half, &t), Some(Ordering::Less));
        assert_eq!(compare_values(&Value::Int(1), &Value::str("1"), &t), None);
    }

    /// Random values of every type: wherever coercion succeeds, compare_values
    /// agrees with the keycode byte order (seeded, replays exactly).
    #[test]
    fn random_compare_matches_keycode() {
        let mut seed = 0x1234_5678_9abc_def1u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let types = [
            ColumnType::TinyInt { unsigned: false },
            ColumnType::SmallInt { unsigned: true },
            ColumnType::BigInt { unsigned: false },
            ColumnType::BigInt { unsigned: true },
            ColumnType::Float,
            ColumnType::Double,
            ColumnType::Decimal { precision: 12, scale: 3 },
            ColumnType::Varchar { len: 6, collation: Collation::CaseInsensitive },
            ColumnType::Varchar { len: 6, collation: Collation::Binary },
            ColumnType::Binary { len: 3 },
            ColumnType::Date,
            ColumnType::DateTime,
            ColumnType::Time,
        ];
        let alphabet = ["a", "A", "b", "B", "ä", "Ä", "\u{0}", " ", "z"];
        let random_value = |next: &mut dyn FnMut() -> u64| -> Value {
            match next() % 9 {
                0 => Value::Int((next() % 600) as i64 - 300),
                1 => Value::UInt(next() % 70_000),
                2 => Value::Int(next() as i64),
                3 => Value::Double(((next() % 20_000) as f64 - 10_000.0) / 7.0),
                4 => Value::Decimal(Decimal {
                    mantissa: (next() % 2_000_000) as i128 - 1_000_000,
                    scale: (next() % 5) as u8,
                }),
                5 => {
                    let n = next() % 5;
                    let s: String = (0..n).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]).collect();
                    Value::str(&s)
                }
                6 => Value::Date(Date {
                    year: 1990 + (next() % 40) as u16,
                    month: 1 + (next() % 12) as u8,
                    day: 1 + (next() % 28) as u8,
                }),
                7 => Value::DateTime(DateTime {
                    date: Date { year: 2000, month: 1 + (next() % 2) as u8, day: 1 + (next() % 3) as u8 },
                    hour: (next() % 24) as u8,
                    minute: (next() % 60) as u8,
                    second: 0,
                    micro: (next() % 3) as u32,
                }),
                _ => Value::Time((next() % 1_000_000) as i64 - 500_000),
            }
        };
        let mut checked = 0;
        for _ in 0..100_000 {
            let ty = &types[(next() % types.len() as u64) as usize];
            let (a, b) = (random_value(&mut next), random_value(&mut next));
            let (Ok(ca), Ok(cb)) = (coerce_value(a, ty, false), coerce_value(b, ty, false)) else {
                continue;
            };
            let (mut ka, mut kb) = (Vec::new(), Vec::new());
            keycode::encode_value(&mut ka, &ca, ty);
            keycode::encode_value(&mut kb, &cb, ty);
            assert_eq!(compare_values(&ca, &cb, ty), Some(ka.cmp(&kb)), "{ty:?} {ca:?} {cb:?}");
            checked += 1;
        }
        assert!(checked > 5_000, "only {checked} pairs coerced");
    }
}
