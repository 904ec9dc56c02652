//! Rendering of `Value`s for result rows: the text protocol (every value as a
//! length-encoded string, formatted as MySQL prints it) and the binary
//! protocol (COM_STMT_EXECUTE results, encoded by the column's field type,
//! which is what the client decodes by).

use super::codec::put_lenenc_str;
use crate::types::{ColumnMeta, FieldType};
use norr_signals::value::{Date, DateTime, Decimal};
use norr_signals::Value;

/// MySQL's "decimals not fixed" marker for FLOAT/DOUBLE columns.
const NOT_FIXED_DEC: u8 = 31;

/// Shortest round-trip digits of a finite float, as (digits, decimal point
/// position): 1.5 -> ("15", 1), 1e20 -> ("1", 21), 0.001 -> ("1", -2).
fn shortest_digits(sci: &str) -> (String, i32, bool) {
    // `sci` is Rust's `{:e}` output: "-1.2345e-7", shortest round trip.
    let (neg, s) = match sci.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, sci),
    };
    let (mant, exp) = s.split_once('e').unwrap_or((s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let digits = digits.trim_end_matches('0').to_string();
    let digits = if digits.is_empty() { "0".to_string() } else { digits };
    (digits, exp + 1, neg)
}

/// Formats a float as MySQL 8 does for FLOAT/DOUBLE values without fixed
/// decimals: the shortest representation that reads back to the same value,
/// in plain notation unless the exponent is large (>= 15 integer digits ->
/// "1e15", "1.2345678901234568e17") or the value is tiny (< 1e-4 -> "1e-5").
/// This follows `my_gcvt` with the text-protocol width closely enough for
/// every value clients compare on; exotic widths are not emulated.
fn format_float_sci(sci: String, is_zero: bool) -> String {
    if is_zero {
        return "0".to_string(); // MySQL prints -0 as 0 too
    }
    let (digits, decpt, neg) = shortest_digits(&sci);
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    let len = digits.len() as i32;
    if !(-3..=15).contains(&decpt) {
        out.push_str(&digits[..1]);
        if len > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push_str(&(decpt - 1).to_string());
    } else if decpt <= 0 {
        out.push_str("0.");
        for _ in 0..(-decpt) {
            out.push('0');
        }
        out.push_str(&digits);
    } else if decpt >= len {
        out.push_str(&digits);
        for _ in 0..(decpt - len) {
            out.push('0');
        }
    } else {
        out.push_str(&digits[..decpt as usize]);
        out.push('.');
        out.push_str(&digits[decpt as usize..]);
    }
    out
}

pub fn format_double(v: f64, decimals: u8) -> String {
    if !v.is_finite() {
        return if v.is_nan() {
            "NaN".into()
        } else if v > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    if decimals > 0 && decimals < NOT_FIXED_DEC {
        return format!("{:.*}", decimals as usize, v);
    }
    format_float_sci(format!("{:e}", v), v == 0.0)
}

pub fn format_float(v: f32, decimals: u8) -> String {
    if !v.is_finite() {
        return format_double(v as f64, 0);
    }
    if decimals > 0 && decimals < NOT_FIXED_DEC {
        return format!("{:.*}", decimals as usize, v);
    }
    format_float_sci(format!("{:e}", v), v == 0.0)
}

/// Decimal as text with exactly its scale: mantissa 12345, scale 2 -> "123.45".
pub fn format_decimal(d: &Decimal) -> String {
    let neg = d.mantissa < 0;
    let digits = d.mantissa.unsigned_abs().to_string();
    let scale = d.scale as usize;
    let mut out = String::with_capacity(digits.len() + 3);
    if neg {
        out.push('-');
    }
    if scale == 0 {
        out.push_str(&digits);
    } else if digits.len() > scale {
        out.push_str(&digits[..digits.len() - scale]);
        out.push('.');
        out.push_str(&digits[digits.len() - scale..]);
    } else {
        out.push_str("0.");
        for _ in 0..(scale - digits.len()) {
            out.push('0');
        }
        out.push_str(&digits);
    }
    out
}

/// Changes a decimal's scale, rounding half away from zero when reducing.
pub fn rescale(d: &Decimal, scale: u8) -> Decimal {
    if scale == d.scale {
        return *d;
    }
    if scale > d.scale {
        let f = 10i128.checked_pow((scale - d.scale) as u32);
        return match f.and_then(|f| d.mantissa.checked_mul(f)) {
            Some(m) => Decimal { mantissa: m, scale },
            None => *d,
        };
    }
    let f = 10i128.pow(((d.scale - scale) as u32).min(38));
    let q = d.mantissa / f;
    let r = d.mantissa % f;
    let q = if r.abs() * 2 >= f { q + d.mantissa.signum() } else { q };
    Decimal { mantissa: q, scale }
}

fn fraction(micro: u32, decimals: u8) -> String {
    let dec = decimals.min(6) as usize;
    if dec == 0 {
        return String::new();
    }
    let s = format!("{:06}", micro.min(999_999));
    format!(".{}", &s[..dec])
}

pub fn format_date(d: &Date) -> String {
    format!("{:04}-{:02}-{:02}", d.year, d.month, d.day)
}

pub fn format_datetime(dt: &DateTime, decimals: u8) -> String {
    format!(
        "{} {:02}:{:02}:{:02}{}",
        format_date(&dt.date),
        dt.hour,
        dt.minute,
        dt.second,
        fraction(dt.micro, decimals)
    )
}

pub fn format_time(us: i64, decimals: u8) -> String {
    let neg = us < 0;
    let a = us.unsigned_abs();
    let micro = (a % 1_000_000) as u32;
    let secs = a / 1_000_000;
    format!(
        "{}{:02}:{:02}:{:02}{}",
        if neg { "-" } else { "" },
        secs / 3600,
        (secs / 60) % 60,
        secs % 60,
        fraction(micro, decimals)
    )
}

/// The text form of a value in a column (None for NULL).
pub fn text_value(v: &Value, col: &ColumnMeta) -> Option<Vec<u8>> {
    let s = match v {
        Value::Null => return None,
        Value::Bytes(b) => return Some(b.clone()),
        Value::Int(i) => i.to_string(),
        // BIT(n): the value's (n+7)/8 bytes, big-endian, as MySQL sends them.
        Value::UInt(u) if col.field_type == FieldType::Bit => {
            return Some(crate::engine::bit::bit_bytes(*u, col.column_length))
        }
        Value::UInt(u) => u.to_string(),
        Value::Float(f) => format_float(*f, col.decimals),
        Value::Double(f) => {
            if col.field_type == FieldType::Float {
                format_float(*f as f32, col.decimals)
            } else {
                format_double(*f, col.decimals)
            }
        }
        Value::Decimal(d) => {
            if col.field_type == FieldType::NewDecimal && col.decimals <= 30 {
                format_decimal(&rescale(d, col.decimals))
            } else {
                format_decimal(d)
            }
        }
        Value::Date(d) => format_date(d),
        Value::DateTime(dt) => {
            if col.field_type == FieldType::Date {
                format_date(&dt.date)
            } else {
                format_datetime(dt, col.decimals)
            }
        }
        Value::Time(us) => format_time(*us, col.decimals),
    };
    Some(s.into_bytes())
}

/// Appends a text-protocol row (`ProtocolText::ResultsetRow`).
pub fn text_row(buf: &mut Vec<u8>, row: &[Value], cols: &[ColumnMeta]) {
    for (i, col) in cols.iter().enumerate() {
        match row.get(i) {
            // Bytes are their own text form: no copy.
            Some(Value::Bytes(b)) => put_lenenc_str(buf, b),
            v => match v.and_then(|v| text_value(v, col)) {
                None => buf.push(0xfb),
                Some(b) => put_lenenc_str(buf, &b),
            },
        }
    }
}

fn as_i64(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        Value::UInt(u) => *u as i64,
        Value::Float(f) => f.round() as i64,
        Value::Double(f) => f.round() as i64,
        Value::Decimal(d) => rescale(d, 0).mantissa as i64,
        Value::Bytes(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .map(|f| f.round() as i64)
            .unwrap_or(0),
        Value::Date(d) => d.year as i64 * 10000 + d.month as i64 * 100 + d.day as i64,
        Value::DateTime(dt) => dt.date.year as i64,
        Value::Time(us) => us / 1_000_000,
        Value::Null => 0,
    }
}

fn as_f64(v: &Value) -> f64 {
    match v {
        Value::Int(i) => *i as f64,
        Value::UInt(u) => *u as f64,
        Value::Float(f) => *f as f64,
        Value::Double(f) => *f,
        Value::Decimal(d) => d.mantissa as f64 / 10f64.powi(d.scale as i32),
        Value::Bytes(b) => std::str::from_utf8(b).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0.0),
        other => as_i64(other) as f64,
    }
}

fn bin_datetime(buf: &mut Vec<u8>, d: &Date, h: u8, mi: u8, s: u8, micro: u32, date_only: bool) {
    if date_only || (h == 0 && mi == 0 && s == 0 && micro == 0) {
        if d.year == 0 && d.month == 0 && d.day == 0 {
            buf.push(0);
            return;
        }
        buf.push(4);
    } else if micro == 0 {
        buf.push(7);
    } else {
        buf.push(11);
    }
    let n = buf.len();
    buf.extend_from_slice(&d.year.to_le_bytes());
    buf.push(d.month);
    buf.push(d.day);
    if buf[n - 1] >= 7 {
        buf.extend_from_slice(&[h, mi, s]);
    }
    if buf[n - 1] == 11 {
        buf.extend_from_slice(&micro.to_le_bytes());
    }
}

fn bin_time(buf: &mut Vec<u8>, us: i64) {
    if us == 0 {
        buf.push(0);
        return;
    }
    let neg = us < 0;
    let a = us.unsigned_abs();
    let micro = (a % 1_000_000) as u32;
    let secs = a / 1_000_000;
    let days = (secs / 86400) as u32;
    let h = ((secs / 3600) % 24) as u8;
    let m = ((secs / 60) % 60) as u8;
    let s = (secs % 60) as u8;
    buf.push(if micro == 0 { 8 } else { 12 });
    buf.push(neg as u8);
    buf.extend_from_slice(&days.to_le_bytes());
    buf.extend_from_slice(&[h, m, s]);
    if micro != 0 {
        buf.extend_from_slice(&micro.to_le_bytes());
    }
}

/// Appends one non-NULL value in the binary protocol, encoded for the
/// column's field type (the client decodes by that type, not by the value).
pub fn bin_value(buf: &mut Vec<u8>, v: &Value, col: &ColumnMeta) {
    match col.field_type {
        FieldType::Tiny => buf.push(as_i64(v) as u8),
        FieldType::Short | FieldType::Year => buf.extend_from_slice(&(as_i64(v) as u16).to_le_bytes()),
        FieldType::Long | FieldType::Int24 => buf.extend_from_slice(&(as_i64(v) as u32).to_le_bytes()),
        FieldType::LongLong => {
            let x = match v {
                Value::UInt(u) => *u,
                other => as_i64(other) as u64,
            };
            buf.extend_from_slice(&x.to_le_bytes())
        }
        FieldType::Float => buf.extend_from_slice(&(as_f64(v) as f32).to_le_bytes()),
        FieldType::Double => buf.extend_from_slice(&as_f64(v).to_le_bytes()),
        FieldType::Date | FieldType::DateTime | FieldType::Timestamp => {
            let date_only = col.field_type == FieldType::Date;
            match v {
                Value::Date(d) => bin_datetime(buf, d, 0, 0, 0, 0, true),
                Value::DateTime(dt) => bin_datetime(buf, &dt.date, dt.hour, dt.minute, dt.second, dt.micro, date_only),
                _ => buf.push(0),
            }
        }
        FieldType::Time => match v {
            Value::Time(us) => bin_time(buf, *us),
            _ => buf.push(0),
        },
        // NULL-typed columns only ever hold NULL (the bitmap says so); strings,
        // blobs and decimals travel as length-encoded text.
        _ => match v {
            // Bytes are their own text form: no copy.
            Value::Bytes(b) => put_lenenc_str(buf, b),
            _ => put_lenenc_str(buf, &text_value(v, col).unwrap_or_default()),
        },
    }
}

/// Appends a binary-protocol row (`ProtocolBinary::ResultsetRow`): 0x00,
/// NULL bitmap with a 2-bit offset, then the non-NULL values.
pub fn binary_row(buf: &mut Vec<u8>, row: &[Value], cols: &[ColumnMeta]) {
    buf.push(0x00);
    let bitmap_len = (cols.len() + 7 + 2) / 8;
    let start = buf.len();
    buf.resize(start + bitmap_len, 0);
    for (i, col) in cols.iter().enumerate() {
        let v = row.get(i).unwrap_or(&Value::Null);
        if v.is_null() || col.field_type == FieldType::Null {
            let bit = i + 2;
            buf[start + bit / 8] |= 1 << (bit % 8);
        } else {
            bin_value(buf, v, col);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_like_mysql() {
        assert_eq!(format_double(1.5, 31), "1.5");
        assert_eq!(format_double(1e20, 31), "1e20");
        assert_eq!(format_double(0.1 + 0.2, 31), "0.30000000000000004");
        assert_eq!(format_double(100.0, 31), "100");
        assert_eq!(format_double(-2.5e-7, 31), "-2.5e-7");
        assert_eq!(format_double(0.001, 31), "0.001");
        assert_eq!(format_double(123456789012345.0, 31), "123456789012345");
        assert_eq!(format_double(1.2345678901234568e17, 31), "1.2345678901234568e17");
        assert_eq!(format_double(0.0, 31), "0");
        assert_eq!(format_double(-0.0, 0), "0");
        assert_eq!(format_double(2.0, 2), "2.00");
        assert_eq!(format_float(1.1, 31), "1.1");
        assert_eq!(format_float(3.4028235e38, 31), "3.4028235e38");
    }

    #[test]
    fn decimals_with_scale() {
        assert_eq!(format_decimal(&Decimal { mantissa: 12345, scale: 2 }), "123.45");
        assert_eq!(format_decimal(&Decimal { mantissa: -5, scale: 3 }), "-0.005");
        assert_eq!(format_decimal(&Decimal { mantissa: 7, scale: 0 }), "7");
        assert_eq!(rescale(&Decimal { mantissa: 125, scale: 2 }, 1).mantissa, 13);
        assert_eq!(rescale(&Decimal { mantissa: -125, scale: 2 }, 1).mantissa, -13);
        assert_eq!(rescale(&Decimal { mantissa: 1, scale: 0 }, 2).mantissa, 100);
    }

    #[test]
    fn temporal_text() {
        let dt =
            DateTime { date: Date { year: 2024, month: 2, day: 29 }, hour: 13, minute: 5, second: 9, micro: 123456 };
        assert_eq!(format_datetime(&dt, 0), "2024-02-29 13:05:09");
        assert_eq!(format_datetime(&dt, 3), "2024-02-29 13:05:09.123");
        assert_eq!(format_datetime(&dt, 6), "2024-02-29 13:05:09.123456");
        assert_eq!(format_time(-((838 * 3600 + 59 * 60 + 59) * 1_000_000), 0), "-838:59:59");
        assert_eq!(format_time(1_500_000, 1), "00:00:01.5");
    }
}
