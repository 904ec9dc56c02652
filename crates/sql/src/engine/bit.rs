//! BIT(n) columns. Stored as a native BIGINT UNSIGNED; `bit(n)` in
//! `SqlColumnMeta::sql_type` carries the width (no new format). Values are
//! numbers inside the SQL layer (`b+0`, BIN(b), comparisons with `b'1010'`
//! literals) and travel to clients as MySQL sends them: MYSQL_TYPE_BIT with
//! the value as a big-endian binary string of (n+7)/8 bytes.

use crate::types::SqlError;
use norr_signals::Value;

/// The width of a `bit(n)` SQL type, None for other types.
pub fn bit_width(sql_type: &str) -> Option<u8> {
    let n = sql_type.strip_prefix("bit(")?.strip_suffix(')')?;
    n.parse::<u8>().ok().filter(|n| (1..=64).contains(n))
}

/// Convert a written value for a BIT(bits) column. Numbers are taken as
/// they are; strings are their bytes read big-endian, as in MySQL ('1' is
/// 0x31). Too wide a value is error 1406, as MySQL's strict mode.
pub fn store_bit(v: &Value, bits: u8, col: &str, row: u64) -> Result<Value, SqlError> {
    let too_long = || SqlError::new(1406, "22001", format!("Data too long for column '{col}' at row {row}"));
    let n: u64 = match v {
        Value::Null => return Ok(Value::Null),
        Value::UInt(u) => *u,
        Value::Int(i) => u64::try_from(*i).map_err(|_| too_long())?,
        Value::Bytes(b) => {
            if b.len() > 8 {
                return Err(too_long());
            }
            b.iter().fold(0u64, |acc, x| (acc << 8) | *x as u64)
        }
        Value::Decimal(d) => {
            let r = norr_signals::coerce::rescale_round(d.mantissa, d.scale, 0).ok_or_else(too_long)?;
            u64::try_from(r).map_err(|_| too_long())?
        }
        Value::Double(f) if *f >= 0.0 && *f < 1.8e19 => f.round() as u64,
        Value::Float(f) if *f >= 0.0 => (*f as f64).round() as u64,
        _ => return Err(too_long()),
    };
    if bits < 64 && n >> bits != 0 {
        return Err(too_long());
    }
    Ok(Value::UInt(n))
}

/// A BIT default as SHOW CREATE TABLE prints it: `b'101'`.
pub fn bit_default_sql(v: &Value, _bits: u8) -> String {
    match v {
        Value::UInt(u) => format!("b'{u:b}'"),
        _ => "NULL".into(),
    }
}

/// The wire form of a BIT(bits) value: big-endian, (bits+7)/8 bytes.
pub fn bit_bytes(v: u64, bits: u32) -> Vec<u8> {
    let len = bits.clamp(1, 64).div_ceil(8) as usize;
    v.to_be_bytes()[8 - len..].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_values_and_wire_form() {
        assert_eq!(bit_width("bit(8)"), Some(8));
        assert_eq!(bit_width("bit(65)"), None);
        assert_eq!(bit_width("bigint"), None);
        assert_eq!(store_bit(&Value::UInt(255), 8, "b", 1).unwrap(), Value::UInt(255));
        assert_eq!(store_bit(&Value::UInt(256), 8, "b", 1).unwrap_err().code, 1406);
        assert_eq!(store_bit(&Value::str("1"), 8, "b", 1).unwrap(), Value::UInt(0x31));
        assert_eq!(store_bit(&Value::Int(-1), 8, "b", 1).unwrap_err().code, 1406);
        assert_eq!(store_bit(&Value::UInt(u64::MAX), 64, "b", 1).unwrap(), Value::UInt(u64::MAX));
        assert_eq!(bit_default_sql(&Value::UInt(5), 8), "b'101'");
        assert_eq!(bit_bytes(0x0102, 10), vec![1, 2]);
        assert_eq!(bit_bytes(5, 1), vec![5]);
    }
}
