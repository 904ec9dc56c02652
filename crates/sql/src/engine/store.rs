//! Converting a value for storage in a column: MySQL's strict-mode checks
//! and errors (1048, 1264, 1265, 1292, 1366, 1406) for every path that
//! writes a column value or needs one converted as if written: INSERT /
//! UPDATE / LOAD DATA (`dml`, `multi_table_dml`, `load_data`), generated
//! columns, and JSON_TABLE's typed columns (`json_table`). A leaf module: it
//! depends on values, types and the column's catalog entry only, so all of
//! them import it downward.

use crate::engine::catalog::SqlTable;
use crate::engine::expr::value::{self as vals, parse_decimal, str_to_num, Num, Warnings};
use crate::engine::functions::tz::Zone;
use crate::engine::ts_zone;
use crate::types::SqlError;
use norr_signals::coerce::coerce_value;
use norr_signals::{ColumnDef, ColumnType, ErrorCode, Value};

pub(crate) fn col_err(code: u16, state: &'static str, msg: String) -> SqlError {
    SqlError::new(code, state, msg)
}

pub(crate) fn out_of_range(col: &ColumnDef, row: u64) -> SqlError {
    col_err(1264, "22003", format!("Out of range value for column '{}' at row {row}", col.name))
}

fn too_long(col: &ColumnDef, row: u64) -> SqlError {
    col_err(1406, "22001", format!("Data too long for column '{}' at row {row}", col.name))
}

fn incorrect(kind: &str, v: &[u8], col: &ColumnDef, row: u64) -> SqlError {
    col_err(
        1366,
        "HY000",
        format!("Incorrect {kind} value: '{}' for column '{}' at row {row}", String::from_utf8_lossy(v), col.name),
    )
}

fn truncated(col: &ColumnDef, row: u64) -> SqlError {
    col_err(1265, "01000", format!("Data truncated for column '{}' at row {row}", col.name))
}

pub(crate) fn round_to_int(n: Num) -> Option<i128> {
    match n {
        Num::I(i) => Some(i as i128),
        Num::U(u) => Some(u as i128),
        Num::D(d) => norr_signals::coerce::rescale_round(d.mantissa, d.scale, 0),
        Num::F(f) => {
            if !f.is_finite() || f.abs() > 1.8e19 {
                None
            } else {
                Some(f.round() as i128)
            }
        }
    }
}

/// Strictly parse a whole string as a number (for numeric columns).
/// Err(true) = numeric prefix followed by garbage (1265), Err(false) = not a number (1366).
fn parse_number_strict(b: &[u8]) -> Result<Num, bool> {
    let s = String::from_utf8_lossy(b);
    let t = s.trim();
    if t.is_empty() {
        return Err(false);
    }
    if let Ok(i) = t.parse::<i64>() {
        return Ok(Num::I(i));
    }
    if let Ok(u) = t.parse::<u64>() {
        return Ok(Num::U(u));
    }
    if let Some(d) = parse_decimal(t) {
        return Ok(Num::D(d));
    }
    if let Ok(f) = t.parse::<f64>() {
        if f.is_finite() {
            return Ok(Num::F(f));
        }
    }
    let (_, complete) = str_to_num(b);
    let has_digit = t.bytes().take_while(|c| !c.is_ascii_alphabetic() || *c == b'e').any(|c| c.is_ascii_digit());
    if !complete
        && has_digit
        && t.as_bytes().first().is_some_and(|c| c.is_ascii_digit() || *c == b'-' || *c == b'+' || *c == b'.')
    {
        return Err(true);
    }
    Err(false)
}

/// `store_value` for column `c` of `t`: ENUM / SET columns first map the
/// value to a member (or refuse it), then store as their native VARCHAR.
///
/// `zone`: the session zone (None: UTC), whose wall time a TIMESTAMP value
/// is; TIMESTAMP's range applies to its UTC moment, as in MySQL. The value
/// returned is still the wall time (`ts_zone` converts it as it is sent).
pub fn store_col(
    t: &SqlTable,
    c: usize,
    v: Value,
    row: u64,
    zone: Option<&Zone>,
    w: &mut Warnings,
) -> Result<Value, SqlError> {
    let col = &t.def.columns[c];
    match t.enums.get(c) {
        Some(Some(e)) if !v.is_null() => {
            let v = e.store(&v, &col.name, row)?;
            store_value(v, col, row, zone, w)
        }
        _ if t.bits.get(c).is_some_and(|b| *b > 0) && !v.is_null() => {
            let v = crate::engine::bit::store_bit(&v, t.bits[c], &col.name, row)?;
            store_value(v, col, row, zone, w)
        }
        _ if t.json.get(c) == Some(&true) && !v.is_null() => {
            let v = crate::engine::functions::json_fns::store(&v, &t.name, &col.name)?;
            store_value(v, col, row, zone, w)
        }
        _ => store_value(v, col, row, zone, w),
    }
}

/// Convert a value for storage in a column, with MySQL strict-mode errors.
/// `row` is the 1-based row number for messages.
/// `zone` as for `store_col`.
pub fn store_value(
    v: Value,
    col: &ColumnDef,
    row: u64,
    zone: Option<&Zone>,
    w: &mut Warnings,
) -> Result<Value, SqlError> {
    let _ = w;
    if v.is_null() {
        if !col.nullable {
            return Err(col_err(1048, "23000", format!("Column '{}' cannot be null", col.name)));
        }
        return Ok(Value::Null);
    }
    let ty = &col.ty;
    let converted = match ty {
        t if t.int_range().is_some() => {
            let (lo, hi) = t.int_range().unwrap_or((0, 0));
            let n = match &v {
                Value::Bytes(b) => match parse_number_strict(b) {
                    Ok(n) => n,
                    Err(true) => return Err(truncated(col, row)),
                    Err(false) => return Err(incorrect("integer", b, col, row)),
                },
                other => vals::to_num(other, &mut Warnings::default()).unwrap_or(Num::I(0)),
            };
            let i = round_to_int(n).ok_or_else(|| out_of_range(col, row))?;
            if i < lo || i > hi {
                return Err(out_of_range(col, row));
            }
            if t.is_unsigned_int() {
                Value::UInt(i as u64)
            } else {
                Value::Int(i as i64)
            }
        }
        ColumnType::Float | ColumnType::Double | ColumnType::Decimal { .. } => {
            let n = match &v {
                Value::Bytes(b) => match parse_number_strict(b) {
                    Ok(n) => n,
                    Err(true) => return Err(truncated(col, row)),
                    Err(false) => {
                        return Err(incorrect(
                            if matches!(ty, ColumnType::Decimal { .. }) { "decimal" } else { "double" },
                            b,
                            col,
                            row,
                        ))
                    }
                },
                other => vals::to_num(other, &mut Warnings::default()).unwrap_or(Num::I(0)),
            };
            match (ty, n) {
                (ColumnType::Decimal { .. }, Num::F(f)) => match parse_decimal(&format!("{f:.30}")) {
                    Some(d) => Value::Decimal(d),
                    None => return Err(out_of_range(col, row)),
                },
                (ColumnType::Decimal { .. }, Num::U(u)) => {
                    Value::Decimal(norr_signals::Decimal { mantissa: u as i128, scale: 0 })
                }
                (_, n) => n.to_value(),
            }
        }
        t if t.is_bytes() => match v {
            Value::Bytes(b) => Value::Bytes(b),
            other => Value::Bytes(vals::to_text(&other).map(|c| c.into_owned()).unwrap_or_default()),
        },
        ColumnType::Date | ColumnType::DateTime | ColumnType::Timestamp => {
            let kind = if matches!(ty, ColumnType::Date) { "date" } else { "datetime" };
            let dt = match &v {
                Value::Date(d) => norr_signals::DateTime { date: *d, hour: 0, minute: 0, second: 0, micro: 0 },
                Value::DateTime(dt) => *dt,
                other => {
                    let text = vals::to_text(other).map(|c| c.into_owned()).unwrap_or_default();
                    match crate::engine::expr::datetime::parse_datetime(&text) {
                        Some((dt, _)) => dt,
                        None => {
                            return Err(col_err(
                                1292,
                                "22007",
                                format!(
                                    "Incorrect {kind} value: '{}' for column '{}' at row {row}",
                                    String::from_utf8_lossy(&text),
                                    col.name
                                ),
                            ))
                        }
                    }
                }
            };
            if matches!(ty, ColumnType::Date) {
                Value::Date(dt.date)
            } else {
                Value::DateTime(dt)
            }
        }
        ColumnType::Time => match &v {
            Value::Time(_) => v,
            Value::DateTime(dt) => Value::Time(
                (dt.hour as i64 * 3600 + dt.minute as i64 * 60 + dt.second as i64) * 1_000_000 + dt.micro as i64,
            ),
            other => {
                let text = vals::to_text(other).map(|c| c.into_owned()).unwrap_or_default();
                match crate::engine::expr::datetime::parse_time(&text) {
                    Some(t) => Value::Time(t),
                    None => {
                        return Err(col_err(
                            1292,
                            "22007",
                            format!(
                                "Incorrect time value: '{}' for column '{}' at row {row}",
                                String::from_utf8_lossy(&text),
                                col.name
                            ),
                        ))
                    }
                }
            }
        },
        _ => v,
    };
    let checked = match (zone, &converted) {
        (Some(z), Value::DateTime(dt)) if matches!(ty, ColumnType::Timestamp) => {
            // Range and form checked on the UTC moment; the wall time goes on.
            let mut utc = Value::DateTime(*dt);
            ts_zone::value_to_utc(&mut utc, z);
            coerce_value(utc, ty, col.nullable).map(|_| converted.clone())
        }
        _ => coerce_value(converted.clone(), ty, col.nullable),
    };
    checked.map_err(|e| match e.code {
        ErrorCode::ValueOutOfRange => {
            if matches!(ty, ColumnType::Date | ColumnType::DateTime | ColumnType::Timestamp) {
                col_err(
                    1292,
                    "22007",
                    format!(
                        "Incorrect {} value: '{}' for column '{}' at row {row}",
                        if matches!(ty, ColumnType::Date) { "date" } else { "datetime" },
                        vals::to_string_lossy(&converted).unwrap_or_default(),
                        col.name
                    ),
                )
            } else {
                out_of_range(col, row)
            }
        }
        ErrorCode::ValueTooLarge => too_long(col, row),
        ErrorCode::NullInNotNullColumn => col_err(1048, "23000", format!("Column '{}' cannot be null", col.name)),
        _ => {
            let text = vals::to_text(&converted).unwrap_or_default();
            col_err(
                1366,
                "HY000",
                format!("Incorrect string value: '{}' for column '{}' at row {row}", bad_string_text(&text), col.name),
            )
        }
    })
}

/// How MySQL shows a string that is not valid UTF-8 in error 1366: up to six
/// bytes from the first bad one, the non-ASCII ones as `\xHH`.
fn bad_string_text(v: &[u8]) -> String {
    let from = std::str::from_utf8(v).err().map_or(0, |e| e.valid_up_to());
    let mut out = String::new();
    for &b in v.iter().skip(from).take(6) {
        if b.is_ascii_graphic() || b == b' ' {
            out.push(b as char);
        } else {
            out.push_str(&format!("\\x{b:02X}"));
        }
    }
    if v.len() - from > 6 {
        out.push_str("...");
    }
    out
}

#[cfg(test)]
mod bad_string_tests {
    #[test]
    fn bad_strings_show_as_mysql_shows_them() {
        assert_eq!(super::bad_string_text(b"ab\xea"), "\\xEA");
        assert_eq!(super::bad_string_text(b"\xc3\xa9x\xff\x00a bcd"), "\\xFF\\x00a bc...");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(ty: ColumnType) -> ColumnDef {
        ColumnDef::new("c", ty).not_null()
    }

    #[test]
    fn strict_mode_errors() {
        let mut w = Warnings::default();
        let int = col(ColumnType::Int { unsigned: false });
        assert_eq!(store_value(Value::Int(5), &int, 1, None, &mut w).unwrap(), Value::Int(5));
        assert_eq!(store_value(Value::str(" 7 "), &int, 1, None, &mut w).unwrap(), Value::Int(7));
        assert_eq!(store_value(Value::str("2.5"), &int, 1, None, &mut w).unwrap(), Value::Int(3));
        assert_eq!(
            store_value(Value::Int(1 << 40), &int, 2, None, &mut w).unwrap_err().message,
            "Out of range value for column 'c' at row 2"
        );
        let e = store_value(Value::str("abc"), &int, 1, None, &mut w).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (1366, "Incorrect integer value: 'abc' for column 'c' at row 1"));
        assert_eq!(store_value(Value::str("12abc"), &int, 1, None, &mut w).unwrap_err().code, 1265);
        assert_eq!(store_value(Value::Null, &int, 1, None, &mut w).unwrap_err().message, "Column 'c' cannot be null");
        let tiny = col(ColumnType::TinyInt { unsigned: true });
        assert_eq!(store_value(Value::Int(-1), &tiny, 1, None, &mut w).unwrap_err().code, 1264);
        let vc = col(ColumnType::Varchar { len: 3, collation: norr_signals::Collation::CaseInsensitive });
        assert_eq!(
            store_value(Value::str("abcd"), &vc, 1, None, &mut w).unwrap_err().message,
            "Data too long for column 'c' at row 1"
        );
        assert_eq!(store_value(Value::Int(12), &vc, 1, None, &mut w).unwrap(), Value::str("12"));
        let dec = col(ColumnType::Decimal { precision: 5, scale: 2 });
        assert_eq!(
            store_value(Value::str("1.005"), &dec, 1, None, &mut w).unwrap(),
            Value::Decimal(norr_signals::Decimal { mantissa: 101, scale: 2 })
        );
        assert_eq!(store_value(Value::Int(1000), &dec, 1, None, &mut w).unwrap_err().code, 1264);
        let d = col(ColumnType::Date);
        assert_eq!(store_value(Value::str("2024-13-01"), &d, 1, None, &mut w).unwrap_err().code, 1292);
        assert_eq!(
            store_value(Value::str("2024-02-29"), &d, 1, None, &mut w).unwrap(),
            Value::Date(norr_signals::Date { year: 2024, month: 2, day: 29 })
        );
        let dbl = col(ColumnType::Double);
        assert_eq!(store_value(Value::str("1e3"), &dbl, 1, None, &mut w).unwrap(), Value::Double(1000.0));
    }
}
