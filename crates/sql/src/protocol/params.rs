//! COM_STMT_EXECUTE parameter decoding (binary protocol). The parameter type
//! list sent with `new_params_bound = 1` is kept in the statement and reused
//! by later executes that send `new_params_bound = 0`. Parameters that got
//! COM_STMT_SEND_LONG_DATA take the accumulated bytes and are absent from the
//! value list (libmysqlclient skips them).

use super::codec::Reader;
use crate::types::SqlError;
use norr_signals::value::{Date, DateTime, Decimal};
use norr_signals::Value;
use std::collections::HashMap;

/// One parameter's declared type: MySQL field type byte and unsigned flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamType {
    pub field_type: u8,
    pub unsigned: bool,
}

/// 1835 ER_MALFORMED_PACKET.
pub fn malformed() -> SqlError {
    SqlError::new(1835, "HY000", "Malformed communication packet.")
}

fn wrong_args(what: &str) -> SqlError {
    SqlError::new(1210, "HY000", format!("Incorrect arguments to {what}"))
}

/// Parses a decimal literal ("-12.340", "+.5", "1e3" is not accepted) into a
/// Decimal; None if it is not one or has more than 38 digits.
pub fn parse_decimal(s: &str) -> Option<Decimal> {
    let s = s.trim();
    let (neg, s) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if frac.len() > 38 || int.trim_start_matches('0').len() + frac.len() > 38 {
        return None;
    }
    let mut m: i128 = 0;
    for b in int.bytes().chain(frac.bytes()) {
        m = m.checked_mul(10)?.checked_add((b - b'0') as i128)?;
    }
    Some(Decimal { mantissa: if neg { -m } else { m }, scale: frac.len() as u8 })
}

fn decode_one(r: &mut Reader<'_>, t: ParamType) -> Result<Value, SqlError> {
    let m = malformed;
    let v = match t.field_type {
        0x06 => Value::Null, // MYSQL_TYPE_NULL
        0x01 => {
            let b = r.u8().ok_or_else(m)?;
            if t.unsigned {
                Value::UInt(b as u64)
            } else {
                Value::Int(b as i8 as i64)
            }
        }
        0x02 | 0x0d => {
            let b = r.u16().ok_or_else(m)?;
            if t.unsigned || t.field_type == 0x0d {
                Value::UInt(b as u64)
            } else {
                Value::Int(b as i16 as i64)
            }
        }
        0x03 | 0x09 => {
            let b = r.u32().ok_or_else(m)?;
            if t.unsigned {
                Value::UInt(b as u64)
            } else {
                Value::Int(b as i32 as i64)
            }
        }
        0x08 => {
            let b = r.u64().ok_or_else(m)?;
            if t.unsigned {
                Value::UInt(b)
            } else {
                Value::Int(b as i64)
            }
        }
        0x04 => Value::Float(f32::from_bits(r.u32().ok_or_else(m)?)),
        0x05 => Value::Double(f64::from_bits(r.u64().ok_or_else(m)?)),
        0x07 | 0x0a | 0x0c | 0x0e => {
            let len = r.u8().ok_or_else(m)?;
            let body = r.take(len as usize).ok_or_else(m)?;
            let mut b = Reader::new(body);
            let (year, month, day) = if len >= 4 {
                (b.u16().ok_or_else(m)?, b.u8().ok_or_else(m)?, b.u8().ok_or_else(m)?)
            } else {
                (0, 0, 0)
            };
            let (hour, minute, second) = if len >= 7 {
                (b.u8().ok_or_else(m)?, b.u8().ok_or_else(m)?, b.u8().ok_or_else(m)?)
            } else {
                (0, 0, 0)
            };
            let micro = if len >= 11 { b.u32().ok_or_else(m)? } else { 0 };
            if !matches!(len, 0 | 4 | 7 | 11) {
                return Err(m());
            }
            let date = Date { year, month, day };
            if t.field_type == 0x0a || t.field_type == 0x0e {
                Value::Date(date)
            } else {
                Value::DateTime(DateTime { date, hour, minute, second, micro })
            }
        }
        0x0b => {
            let len = r.u8().ok_or_else(m)?;
            let body = r.take(len as usize).ok_or_else(m)?;
            if !matches!(len, 0 | 8 | 12) {
                return Err(m());
            }
            let mut b = Reader::new(body);
            if len == 0 {
                Value::Time(0)
            } else {
                let neg = b.u8().ok_or_else(m)? != 0;
                let days = b.u32().ok_or_else(m)? as i64;
                let h = b.u8().ok_or_else(m)? as i64;
                let mi = b.u8().ok_or_else(m)? as i64;
                let s = b.u8().ok_or_else(m)? as i64;
                let micro = if len == 12 { b.u32().ok_or_else(m)? as i64 } else { 0 };
                let us = ((((days * 24 + h) * 60 + mi) * 60 + s) * 1_000_000).saturating_add(micro);
                Value::Time(if neg { -us } else { us })
            }
        }
        0x00 | 0xf6 => {
            // DECIMAL / NEWDECIMAL travel as text.
            let s = r.lenenc_str().ok_or_else(m)?;
            match std::str::from_utf8(s).ok().and_then(parse_decimal) {
                Some(d) => Value::Decimal(d),
                None => Value::Bytes(s.to_vec()),
            }
        }
        0x0f | 0x10 | 0xf5 | 0xf7 | 0xf8 | 0xf9 | 0xfa | 0xfb | 0xfc | 0xfd | 0xfe | 0xff => {
            Value::Bytes(r.lenenc_str().ok_or_else(m)?.to_vec())
        }
        _ => return Err(wrong_args("mysqld_stmt_execute")),
    };
    Ok(v)
}

/// Decodes the parameter block of COM_STMT_EXECUTE (after stmt id, flags and
/// iteration count). `types` is the statement's remembered type list,
/// replaced when the client binds new types.
pub fn decode_params(
    r: &mut Reader<'_>,
    param_count: usize,
    types: &mut Vec<ParamType>,
    long_data: &mut HashMap<u16, Vec<u8>>,
) -> Result<Vec<Value>, SqlError> {
    if param_count == 0 {
        return Ok(Vec::new());
    }
    let bitmap = r.take(param_count.div_ceil(8)).ok_or_else(malformed)?;
    let new_bound = r.u8().ok_or_else(malformed)?;
    if new_bound == 1 {
        let mut t = Vec::with_capacity(param_count);
        for _ in 0..param_count {
            let ft = r.u8().ok_or_else(malformed)?;
            let flags = r.u8().ok_or_else(malformed)?;
            t.push(ParamType { field_type: ft, unsigned: flags & 0x80 != 0 });
        }
        *types = t;
    }
    if types.len() != param_count {
        // Types were never bound: MySQL answers with ER_WRONG_ARGUMENTS.
        return Err(wrong_args("mysqld_stmt_execute"));
    }
    let mut out = Vec::with_capacity(param_count);
    // Long data is rare: an empty map is not searched (hashing the key for
    // each parameter cost ~120 instructions per execute).
    let has_long_data = !long_data.is_empty();
    for (i, t) in types.iter().enumerate() {
        if has_long_data {
            if let Some(data) = long_data.remove(&(i as u16)) {
                out.push(Value::Bytes(data));
                continue;
            }
        }
        if bitmap[i / 8] & (1 << (i % 8)) != 0 {
            out.push(Value::Null);
            continue;
        }
        out.push(decode_one(r, *t)?);
    }
    long_data.clear();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_parse() {
        assert_eq!(parse_decimal("-12.340"), Some(Decimal { mantissa: -12340, scale: 3 }));
        assert_eq!(parse_decimal(".5"), Some(Decimal { mantissa: 5, scale: 1 }));
        assert_eq!(parse_decimal("1e3"), None);
        assert_eq!(parse_decimal("-"), None);
        assert_eq!(parse_decimal(""), None);
    }

    #[test]
    fn params_with_types_kept() {
        // two params: LONGLONG 7, VAR_STRING "ab"; then re-execute without types.
        let mut p = vec![0u8, 1, 0x08, 0, 0xfd, 0];
        p.extend_from_slice(&7u64.to_le_bytes());
        p.extend_from_slice(&[2, b'a', b'b']);
        let mut types = Vec::new();
        let mut ld = HashMap::new();
        let v = decode_params(&mut Reader::new(&p), 2, &mut types, &mut ld).unwrap();
        assert_eq!(v, vec![Value::Int(7), Value::str("ab")]);
        let p2 = vec![0b10u8, 0, 9, 0, 0, 0, 0, 0, 0, 0];
        let v = decode_params(&mut Reader::new(&p2), 2, &mut types, &mut ld).unwrap();
        assert_eq!(v, vec![Value::Int(9), Value::Null]);
        // truncated input is an error, not a panic
        for n in 0..p.len() {
            let mut types = Vec::new();
            let _ = decode_params(&mut Reader::new(&p[..n]), 2, &mut types, &mut ld);
        }
    }
}
