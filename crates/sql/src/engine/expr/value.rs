//! MySQL value semantics on native `Value`s: numeric promotion (int -> decimal
//! -> double), string -> number conversion with warnings, comparisons under a
//! collation, arithmetic with BIGINT overflow errors (1690), and rendering of
//! values as strings.

use crate::types::{SqlError, Warning, WarningLevel};
use norr_signals::coerce::rescale_round;
use norr_signals::keycode::fold_case;
use norr_signals::{Date, DateTime, Decimal, Value};
use std::cmp::Ordering;

/// Most decimal digits we keep in a computed DECIMAL (fits i128 comfortably).
pub const MAX_DECIMAL_DIGITS: u32 = 38;
/// MySQL's div_precision_increment default: scale added by `/`.
pub const DIV_PRECISION_INCREMENT: u8 = 4;

/// Collects warnings while evaluating one statement (bounded).
#[derive(Debug, Default)]
pub struct Warnings {
    pub list: Vec<Warning>,
}

/// Most warnings kept per statement (MySQL's max_error_count default).
pub const MAX_WARNINGS: usize = 1024;

impl Warnings {
    pub fn push(&mut self, code: u16, message: String) {
        if self.list.len() < MAX_WARNINGS {
            self.list.push(Warning { level: WarningLevel::Warning, code, message });
        }
    }
}

pub fn err_out_of_range(ty: &str, expr: &str) -> SqlError {
    SqlError::new(1690, "22003", format!("{ty} value is out of range in '{expr}'"))
}

/// A number in one of MySQL's numeric evaluation classes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Num {
    I(i64),
    U(u64),
    D(Decimal),
    F(f64),
}

impl Num {
    pub fn to_value(self) -> Value {
        match self {
            Num::I(i) => Value::Int(i),
            Num::U(u) => Value::UInt(u),
            Num::D(d) => Value::Decimal(d),
            Num::F(f) => Value::Double(f),
        }
    }
    pub fn to_f64(self) -> f64 {
        match self {
            Num::I(i) => i as f64,
            Num::U(u) => u as f64,
            Num::D(d) => dec_to_f64(d),
            Num::F(f) => f,
        }
    }
    pub fn is_zero(self) -> bool {
        match self {
            Num::I(i) => i == 0,
            Num::U(u) => u == 0,
            Num::D(d) => d.mantissa == 0,
            Num::F(f) => f == 0.0,
        }
    }
}

pub fn dec_to_f64(d: Decimal) -> f64 {
    d.mantissa as f64 / 10f64.powi(d.scale as i32)
}

pub fn dec_to_string(d: Decimal) -> String {
    let neg = d.mantissa < 0;
    let digits = d.mantissa.unsigned_abs().to_string();
    let s = d.scale as usize;
    let mut out = String::with_capacity(digits.len() + 3);
    if neg {
        out.push('-');
    }
    if s == 0 {
        out.push_str(&digits);
    } else if digits.len() > s {
        out.push_str(&digits[..digits.len() - s]);
        out.push('.');
        out.push_str(&digits[digits.len() - s..]);
    } else {
        out.push_str("0.");
        for _ in 0..(s - digits.len()) {
            out.push('0');
        }
        out.push_str(&digits);
    }
    out
}

/// Parse a decimal literal like "-12.340" exactly. None if not a plain decimal.
pub fn parse_decimal(s: &str) -> Option<Decimal> {
    let s = s.trim();
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if body.is_empty() {
        return None;
    }
    let mut mantissa: i128 = 0;
    let mut scale: u8 = 0;
    let mut seen_dot = false;
    let mut digits = 0u32;
    for c in body.bytes() {
        match c {
            b'0'..=b'9' => {
                if digits >= MAX_DECIMAL_DIGITS {
                    // Drop excess fraction digits (truncate), overflow of the integer part fails.
                    if seen_dot {
                        continue;
                    }
                    return None;
                }
                mantissa = mantissa * 10 + (c - b'0') as i128;
                if mantissa != 0 || seen_dot {
                    digits += 1;
                }
                if seen_dot {
                    scale += 1;
                }
            }
            b'.' if !seen_dot => seen_dot = true,
            _ => return None,
        }
    }
    Some(Decimal { mantissa: if neg { -mantissa } else { mantissa }, scale })
}

/// The length of the longest numeric prefix of `b` (sign, digits, fraction,
/// exponent), or None when it has no digit.
pub fn numeric_prefix_len(b: &[u8]) -> Option<usize> {
    let digits_from = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    let mut i = usize::from(matches!(b.first(), Some(b'-' | b'+')));
    let int_end = digits_from(i);
    let mut has_digits = int_end > i;
    i = int_end;
    if b.get(i) == Some(&b'.') {
        let k = digits_from(i + 1);
        if k > i + 1 || has_digits {
            has_digits = true;
            i = k;
        }
    }
    if !has_digits {
        return None;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(b.get(i + 1), Some(b'-' | b'+')));
        let k = digits_from(i + 1 + sign);
        if k > i + 1 + sign {
            i = k;
        }
    }
    Some(i)
}

/// MySQL string -> number: the longest numeric prefix (after leading spaces).
/// Returns the number and whether the whole string was used (else a warning).
pub fn str_to_num(b: &[u8]) -> (Num, bool) {
    let s = String::from_utf8_lossy(b);
    let t = s.trim_start_matches([' ', '\t', '\n', '\r']);
    let Some(i) = numeric_prefix_len(t.as_bytes()) else {
        // No digits is never a complete number: even '' converts to 0 with a
        // truncation warning, as in MySQL.
        return (Num::F(0.0), false);
    };
    let num_str = &t[..i];
    let is_float = num_str.contains(['.', 'e', 'E']);
    let complete = t[i..].trim_end_matches([' ', '\t', '\n', '\r']).is_empty();
    let f: f64 = num_str.parse().unwrap_or(0.0);
    if is_float {
        (Num::F(f), complete)
    } else {
        match num_str.parse::<i64>() {
            Ok(v) => (Num::I(v), complete),
            Err(_) => (Num::F(f), complete),
        }
    }
}

/// Convert a value to a number for arithmetic / numeric comparison.
/// Strings convert by prefix, with warning 1292 when not entirely numeric.
pub fn to_num(v: &Value, w: &mut Warnings) -> Option<Num> {
    Some(match v {
        Value::Null => return None,
        Value::Int(i) => Num::I(*i),
        Value::UInt(u) => Num::U(*u),
        Value::Float(f) => Num::F(*f as f64),
        Value::Double(f) => Num::F(*f),
        Value::Decimal(d) => Num::D(*d),
        Value::Bytes(b) => {
            let (n, complete) = str_to_num(b);
            if !complete {
                w.push(1292, format!("Truncated incorrect DOUBLE value: '{}'", String::from_utf8_lossy(b)));
            }
            // Strings evaluate as DOUBLE in numeric context, as MySQL.
            Num::F(n.to_f64())
        }
        Value::Date(d) => Num::I(d.year as i64 * 10000 + d.month as i64 * 100 + d.day as i64),
        Value::DateTime(dt) => {
            let i = (dt.date.year as i64 * 10000 + dt.date.month as i64 * 100 + dt.date.day as i64) * 1_000_000
                + dt.hour as i64 * 10000
                + dt.minute as i64 * 100
                + dt.second as i64;
            if dt.micro == 0 {
                Num::I(i)
            } else {
                Num::D(Decimal { mantissa: i as i128 * 1_000_000 + dt.micro as i128, scale: 6 })
            }
        }
        Value::Time(t) => {
            let neg = *t < 0;
            let a = t.unsigned_abs();
            let secs = a / 1_000_000;
            let v = ((secs / 3600) * 10000 + ((secs / 60) % 60) * 100 + secs % 60) as i64;
            Num::I(if neg { -v } else { v })
        }
    })
}

pub fn to_f64(v: &Value, w: &mut Warnings) -> Option<f64> {
    to_num(v, w).map(|n| n.to_f64())
}

/// Integer value (rounding decimals/doubles half away from zero), saturating.
pub fn to_i64(v: &Value, w: &mut Warnings) -> Option<i64> {
    Some(match to_num(v, w)? {
        Num::I(i) => i,
        Num::U(u) => i64::try_from(u).unwrap_or(i64::MAX),
        Num::D(d) => {
            let m = rescale_round(d.mantissa, d.scale, 0).unwrap_or(0);
            m.clamp(i64::MIN as i128, i64::MAX as i128) as i64
        }
        Num::F(f) => {
            let r = f.round();
            if r >= i64::MAX as f64 {
                i64::MAX
            } else if r <= i64::MIN as f64 {
                i64::MIN
            } else {
                r as i64
            }
        }
    })
}

/// Truthiness of a value in a boolean context: None for NULL.
pub fn to_bool(v: &Value, w: &mut Warnings) -> Option<bool> {
    match v {
        Value::Null => None,
        Value::Int(i) => Some(*i != 0),
        Value::UInt(u) => Some(*u != 0),
        _ => to_num(v, w).map(|n| !n.is_zero()),
    }
}

pub fn bool_value(b: Option<bool>) -> Value {
    match b {
        None => Value::Null,
        Some(b) => Value::Int(b as i64),
    }
}

/// Render a double as MySQL does (shortest representation, no trailing ".0",
/// exponent form for very large/small magnitudes).
pub fn fmt_double(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if f == 0.0 {
        return "0".into();
    }
    let a = f.abs();
    if (1e-15..1e15).contains(&a) {
        let s = format!("{f}");
        s
    } else {
        // Rust prints e.g. "1e20"; MySQL prints "1e20" as well.
        let s = format!("{f:e}");
        match s.split_once('e') {
            Some((m, e)) => {
                let e: i32 = e.parse().unwrap_or(0);
                if e >= 0 {
                    format!("{m}e{e}")
                } else {
                    format!("{m}e-{}", -e)
                }
            }
            None => s,
        }
    }
}

pub fn fmt_date(d: &Date) -> String {
    format!("{:04}-{:02}-{:02}", d.year, d.month, d.day)
}

pub fn fmt_datetime(dt: &DateTime, decimals: u8) -> String {
    let mut s = format!(
        "{}-{:02}-{:02} {:02}:{:02}:{:02}",
        format_args!("{:04}", dt.date.year),
        dt.date.month,
        dt.date.day,
        dt.hour,
        dt.minute,
        dt.second
    );
    if decimals > 0 {
        let frac = format!("{:06}", dt.micro);
        s.push('.');
        s.push_str(&frac[..decimals.min(6) as usize]);
    }
    s
}

pub fn fmt_time(t: i64, decimals: u8) -> String {
    let neg = t < 0;
    let a = t.unsigned_abs();
    let secs = a / 1_000_000;
    let micro = a % 1_000_000;
    let mut s = format!("{}{:02}:{:02}:{:02}", if neg { "-" } else { "" }, secs / 3600, (secs / 60) % 60, secs % 60);
    if decimals > 0 {
        let frac = format!("{micro:06}");
        s.push('.');
        s.push_str(&frac[..decimals.min(6) as usize]);
    }
    s
}

/// The value as text (string context), e.g. for CONCAT or storing a number in
/// a CHAR column. NULL gives None.
pub fn to_text(v: &Value) -> Option<std::borrow::Cow<'_, [u8]>> {
    use std::borrow::Cow;
    Some(match v {
        Value::Null => return None,
        Value::Bytes(b) => Cow::Borrowed(b.as_slice()),
        Value::Int(i) => Cow::Owned(i.to_string().into_bytes()),
        Value::UInt(u) => Cow::Owned(u.to_string().into_bytes()),
        Value::Float(f) => Cow::Owned(fmt_double(*f as f64).into_bytes()),
        Value::Double(f) => Cow::Owned(fmt_double(*f).into_bytes()),
        Value::Decimal(d) => Cow::Owned(dec_to_string(*d).into_bytes()),
        Value::Date(d) => Cow::Owned(fmt_date(d).into_bytes()),
        Value::DateTime(dt) => Cow::Owned(fmt_datetime(dt, if dt.micro != 0 { 6 } else { 0 }).into_bytes()),
        Value::Time(t) => Cow::Owned(fmt_time(*t, if t % 1_000_000 != 0 { 6 } else { 0 }).into_bytes()),
    })
}

pub fn to_string_lossy(v: &Value) -> Option<String> {
    to_text(v).map(|c| String::from_utf8_lossy(&c).into_owned())
}

fn dec_align(a: Decimal, b: Decimal) -> Option<(i128, i128, u8)> {
    let s = a.scale.max(b.scale);
    Some((rescale_round(a.mantissa, a.scale, s)?, rescale_round(b.mantissa, b.scale, s)?, s))
}

fn as_dec(n: Num) -> Option<Decimal> {
    match n {
        Num::I(i) => Some(Decimal { mantissa: i as i128, scale: 0 }),
        Num::U(u) => Some(Decimal { mantissa: u as i128, scale: 0 }),
        Num::D(d) => Some(d),
        Num::F(_) => None,
    }
}

pub fn cmp_num(a: Num, b: Num) -> Ordering {
    match (a, b) {
        (Num::I(x), Num::I(y)) => x.cmp(&y),
        (Num::U(x), Num::U(y)) => x.cmp(&y),
        (Num::I(x), Num::U(y)) => (x as i128).cmp(&(y as i128)),
        (Num::U(x), Num::I(y)) => (x as i128).cmp(&(y as i128)),
        (Num::F(_), _) | (_, Num::F(_)) => a.to_f64().partial_cmp(&b.to_f64()).unwrap_or(Ordering::Equal),
        _ => match (as_dec(a), as_dec(b)) {
            (Some(x), Some(y)) => match dec_align(x, y) {
                Some((p, q, _)) => p.cmp(&q),
                None => a.to_f64().partial_cmp(&b.to_f64()).unwrap_or(Ordering::Equal),
            },
            _ => Ordering::Equal,
        },
    }
}

/// How two strings compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coll {
    /// utf8mb4_0900_ai_ci-like: case-insensitive.
    Ci,
    /// Byte order (utf8mb4_bin, BINARY, BLOB).
    Bin,
}

pub fn cmp_bytes(a: &[u8], b: &[u8], coll: Coll) -> Ordering {
    match coll {
        Coll::Bin => a.cmp(b),
        Coll::Ci => {
            // ASCII prefix byte by byte; the first non-ASCII byte on either
            // side hands over to full case folding. This agrees with folding
            // both sides: an equal ASCII prefix folds to the same bytes, and
            // any character folds to at least one byte (so a longer string
            // stays longer). Identical ASCII runs are skipped 8 bytes at a
            // time first (they fold alike).
            let mut i = 0;
            while let (Some(x), Some(y)) = (a.get(i..i + 8), b.get(i..i + 8)) {
                let x = u64::from_ne_bytes(x.try_into().unwrap_or([0x80; 8]));
                let y = u64::from_ne_bytes(y.try_into().unwrap_or([0x80; 8]));
                if x != y || x & 0x8080_8080_8080_8080 != 0 {
                    break;
                }
                i += 8;
            }
            for (&x, &y) in a[i..].iter().zip(&b[i..]) {
                if x >= 0x80 || y >= 0x80 {
                    return fold_case(a).cmp(&fold_case(b));
                }
                let (x, y) = (x.to_ascii_lowercase(), y.to_ascii_lowercase());
                if x != y {
                    return x.cmp(&y);
                }
            }
            a.len().cmp(&b.len())
        }
    }
}

fn is_num(v: &Value) -> bool {
    matches!(v, Value::Int(_) | Value::UInt(_) | Value::Float(_) | Value::Double(_) | Value::Decimal(_))
}

fn is_temporal(v: &Value) -> bool {
    matches!(v, Value::Date(_) | Value::DateTime(_) | Value::Time(_))
}

fn midnight(d: Date) -> DateTime {
    DateTime { date: d, hour: 0, minute: 0, second: 0, micro: 0 }
}

/// SQL comparison of two values; None if either is NULL. Mixed classes follow
/// MySQL: string vs number compares as DOUBLE, string vs date parses the string
/// as a date/datetime.
pub fn sql_cmp(a: &Value, b: &Value, coll: Coll, w: &mut Warnings) -> Option<Ordering> {
    use Value::*;
    match (a, b) {
        (Null, _) | (_, Null) => None,
        (Bytes(x), Bytes(y)) => Some(cmp_bytes(x, y, coll)),
        (Int(x), Int(y)) => Some(x.cmp(y)),
        (Date(x), Date(y)) => Some(x.cmp(y)),
        (DateTime(x), DateTime(y)) => Some(x.cmp(y)),
        (Date(x), DateTime(y)) => Some(midnight(*x).cmp(y)),
        (DateTime(x), Date(y)) => Some(x.cmp(&midnight(*y))),
        (Time(x), Time(y)) => Some(x.cmp(y)),
        (Bytes(s), t) if is_temporal(t) => match super::datetime::parse_like(s, t) {
            Some(v) => sql_cmp(&v, t, coll, w),
            None => Some(cmp_bytes(s, &to_text(t).unwrap_or_default(), Coll::Bin)),
        },
        (t, Bytes(s)) if is_temporal(t) => match super::datetime::parse_like(s, t) {
            Some(v) => sql_cmp(t, &v, coll, w),
            None => Some(cmp_bytes(&to_text(t).unwrap_or_default(), s, Coll::Bin)),
        },
        _ => {
            if is_num(a) && is_num(b) {
                return Some(cmp_num(to_num(a, w)?, to_num(b, w)?));
            }
            Some(cmp_num(to_num(a, w)?, to_num(b, w)?))
        }
    }
}

/// Equality used by DISTINCT / GROUP BY / IN: NULLs are equal to each other here.
pub fn group_eq(a: &Value, b: &Value, coll: Coll) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Null, _) | (_, Value::Null) => false,
        _ => sql_cmp(a, b, coll, &mut Warnings::default()) == Some(Ordering::Equal),
    }
}

/// Total order for ORDER BY: NULLs first (ascending), then SQL order.
pub fn order_cmp(a: &Value, b: &Value, coll: Coll) -> Ordering {
    match (a, b) {
        (Value::Null, Value::Null) => Ordering::Equal,
        (Value::Null, _) => Ordering::Less,
        (_, Value::Null) => Ordering::Greater,
        // What sql_cmp does for these, without its dispatch.
        (Value::Bytes(x), Value::Bytes(y)) => cmp_bytes(x, y, coll),
        (Value::Int(x), Value::Int(y)) => x.cmp(y),
        _ => sql_cmp(a, b, coll, &mut Warnings::default()).unwrap_or(Ordering::Equal),
    }
}

/// Arithmetic operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
    IntDiv,
    Mod,
}

impl ArithOp {
    pub fn symbol(self) -> &'static str {
        match self {
            ArithOp::Add => "+",
            ArithOp::Sub => "-",
            ArithOp::Mul => "*",
            ArithOp::Div => "/",
            ArithOp::IntDiv => "DIV",
            ArithOp::Mod => "%",
        }
    }
}

fn dec_result(m: Option<i128>, scale: u8, expr: &str) -> Result<Num, SqlError> {
    match m {
        Some(m) if m.unsigned_abs() < 10u128.pow(MAX_DECIMAL_DIGITS) => Ok(Num::D(Decimal { mantissa: m, scale })),
        _ => Err(err_out_of_range("DECIMAL", expr)),
    }
}

/// Reduce a decimal's scale to at most 30 digits (MySQL's max scale).
fn cap_scale(d: Decimal) -> Decimal {
    if d.scale > 30 {
        Decimal { mantissa: rescale_round(d.mantissa, d.scale, 30).unwrap_or(0), scale: 30 }
    } else {
        d
    }
}

/// `a op b` on numbers. Division by zero returns Ok(None) (caller warns).
pub fn arith(op: ArithOp, a: Num, b: Num, expr: &dyn Fn() -> String) -> Result<Option<Num>, SqlError> {
    use Num::*;
    let unsigned = matches!(a, U(_)) || matches!(b, U(_));
    match (a, b) {
        (F(_), _) | (_, F(_)) => {
            let (x, y) = (a.to_f64(), b.to_f64());
            let r = match op {
                ArithOp::Add => x + y,
                ArithOp::Sub => x - y,
                ArithOp::Mul => x * y,
                ArithOp::Div => {
                    if y == 0.0 {
                        return Ok(None);
                    }
                    x / y
                }
                ArithOp::IntDiv => {
                    if y == 0.0 {
                        return Ok(None);
                    }
                    let q = (x / y).trunc();
                    if q.abs() > 9.2e18 {
                        return Err(err_out_of_range("BIGINT", &expr()));
                    }
                    return Ok(Some(I(q as i64)));
                }
                ArithOp::Mod => {
                    if y == 0.0 {
                        return Ok(None);
                    }
                    x % y
                }
            };
            if !r.is_finite() {
                return Err(err_out_of_range("DOUBLE", &expr()));
            }
            Ok(Some(F(r)))
        }
        (D(_), _) | (_, D(_)) => {
            let (x, y) = (
                as_dec(a).unwrap_or(Decimal { mantissa: 0, scale: 0 }),
                as_dec(b).unwrap_or(Decimal { mantissa: 0, scale: 0 }),
            );
            let r = match op {
                ArithOp::Add | ArithOp::Sub => {
                    let (p, q, s) = dec_align(x, y).ok_or_else(|| err_out_of_range("DECIMAL", &expr()))?;
                    dec_result(if op == ArithOp::Add { p.checked_add(q) } else { p.checked_sub(q) }, s, &expr())?
                }
                ArithOp::Mul => {
                    dec_result(x.mantissa.checked_mul(y.mantissa), x.scale + y.scale, &expr()).map(|n| match n {
                        D(d) => D(cap_scale(d)),
                        o => o,
                    })?
                }
                ArithOp::Div => {
                    if y.mantissa == 0 {
                        return Ok(None);
                    }
                    let scale = (x.scale + DIV_PRECISION_INCREMENT).min(30);
                    // result mantissa = x * 10^(scale - x.scale + y.scale) / y, rounded.
                    let shift = scale as i32 - x.scale as i32 + y.scale as i32;
                    let num = if shift >= 0 {
                        x.mantissa.checked_mul(10i128.pow(shift as u32))
                    } else {
                        Some(x.mantissa / 10i128.pow((-shift) as u32))
                    };
                    match num {
                        Some(n) => {
                            let q = n / y.mantissa;
                            let r = n % y.mantissa;
                            let q = if (r.abs() * 2) >= y.mantissa.abs() {
                                q + n.signum() * y.mantissa.signum()
                            } else {
                                q
                            };
                            dec_result(Some(q), scale, &expr())?
                        }
                        None => F(dec_to_f64(x) / dec_to_f64(y)),
                    }
                }
                ArithOp::IntDiv => {
                    if y.mantissa == 0 {
                        return Ok(None);
                    }
                    let (p, q, _) = dec_align(x, y).ok_or_else(|| err_out_of_range("DECIMAL", &expr()))?;
                    let d = p / q;
                    if d > i64::MAX as i128 || d < i64::MIN as i128 {
                        return Err(err_out_of_range("BIGINT", &expr()));
                    }
                    I(d as i64)
                }
                ArithOp::Mod => {
                    if y.mantissa == 0 {
                        return Ok(None);
                    }
                    let (p, q, s) = dec_align(x, y).ok_or_else(|| err_out_of_range("DECIMAL", &expr()))?;
                    D(Decimal { mantissa: p % q, scale: s })
                }
            };
            Ok(Some(r))
        }
        _ => {
            // Integers.
            let x = match a {
                I(i) => i as i128,
                U(u) => u as i128,
                _ => 0,
            };
            let y = match b {
                I(i) => i as i128,
                U(u) => u as i128,
                _ => 0,
            };
            let r: i128 = match op {
                ArithOp::Add => x + y,
                ArithOp::Sub => x - y,
                ArithOp::Mul => x
                    .checked_mul(y)
                    .ok_or_else(|| err_out_of_range(if unsigned { "BIGINT UNSIGNED" } else { "BIGINT" }, &expr()))?,
                ArithOp::Div => {
                    if y == 0 {
                        return Ok(None);
                    }
                    return arith(op, D(Decimal { mantissa: x, scale: 0 }), D(Decimal { mantissa: y, scale: 0 }), expr);
                }
                ArithOp::IntDiv => {
                    if y == 0 {
                        return Ok(None);
                    }
                    x / y
                }
                ArithOp::Mod => {
                    if y == 0 {
                        return Ok(None);
                    }
                    x % y
                }
            };
            if unsigned && op != ArithOp::Mod {
                if r < 0 || r > u64::MAX as i128 {
                    return Err(err_out_of_range("BIGINT UNSIGNED", &expr()));
                }
                Ok(Some(U(r as u64)))
            } else if op == ArithOp::Mod && matches!(a, U(_)) {
                Ok(Some(U(r as u64)))
            } else {
                if r < i64::MIN as i128 || r > i64::MAX as i128 {
                    return Err(err_out_of_range("BIGINT", &expr()));
                }
                Ok(Some(I(r as i64)))
            }
        }
    }
}

/// Group / distinct key: values encoded so that SQL-equal values are equal bytes.
pub fn encode_group_key(vals_: &[Value], colls: &[Coll], out: &mut Vec<u8>) {
    for (i, v) in vals_.iter().enumerate() {
        match v {
            Value::Null => out.push(0),
            Value::Int(x) => {
                out.push(1);
                out.extend_from_slice(&(*x as i128).to_be_bytes());
            }
            Value::UInt(x) => {
                out.push(1);
                out.extend_from_slice(&(*x as i128).to_be_bytes());
            }
            Value::Decimal(d) => {
                let (mut m, mut s) = (d.mantissa, d.scale);
                while s > 0 && m % 10 == 0 {
                    m /= 10;
                    s -= 1;
                }
                if s == 0 {
                    out.push(1);
                    out.extend_from_slice(&m.to_be_bytes());
                } else {
                    out.push(2);
                    out.extend_from_slice(&m.to_be_bytes());
                    out.push(s);
                }
            }
            Value::Float(f) => {
                out.push(3);
                out.extend_from_slice(&(*f as f64).to_bits().to_be_bytes());
            }
            Value::Double(f) => {
                out.push(3);
                out.extend_from_slice(&(if *f == 0.0 { 0.0f64 } else { *f }).to_bits().to_be_bytes());
            }
            Value::Bytes(b) => {
                out.push(4);
                if colls.get(i).copied().unwrap_or(Coll::Ci) == Coll::Bin {
                    out.extend_from_slice(&(b.len() as u32).to_be_bytes());
                    out.extend_from_slice(b);
                } else if b.is_ascii() {
                    // ASCII folds byte by byte (what fold_case does), without a copy.
                    out.extend_from_slice(&(b.len() as u32).to_be_bytes());
                    out.extend(b.iter().map(|c| c.to_ascii_lowercase()));
                } else {
                    let folded = norr_signals::keycode::fold_case(b);
                    out.extend_from_slice(&(folded.len() as u32).to_be_bytes());
                    out.extend_from_slice(&folded);
                }
            }
            other => {
                out.push(5);
                out.extend_from_slice(format!("{other:?}").as_bytes());
                out.push(0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w() -> Warnings {
        Warnings::default()
    }
    fn e() -> String {
        "x".into()
    }

    #[test]
    fn case_insensitive_compare_agrees_with_folding_both_sides() {
        let words: [&[u8]; 14] = [
            b"",
            b"a",
            b"A",
            b"ab",
            b"aB_",
            b"ab_",
            b"abc",
            "ab\u{212A}".as_bytes(), // KELVIN SIGN folds to ASCII 'k'
            b"abk",
            b"abK",
            "ab\u{e9}".as_bytes(),
            "AB\u{c9}x".as_bytes(),
            b"ab\xff",
            b"AB\xfe",
        ];
        for a in words {
            for b in words {
                let want = fold_case(a).cmp(&fold_case(b));
                assert_eq!(
                    cmp_bytes(a, b, Coll::Ci),
                    want,
                    "{:?} vs {:?}",
                    String::from_utf8_lossy(a),
                    String::from_utf8_lossy(b)
                );
            }
        }
    }

    #[test]
    fn decimal_parse_and_print() {
        let d = parse_decimal("-12.340").unwrap();
        assert_eq!(d, Decimal { mantissa: -12340, scale: 3 });
        assert_eq!(dec_to_string(d), "-12.340");
        assert_eq!(dec_to_string(Decimal { mantissa: 5, scale: 3 }), "0.005");
        assert_eq!(dec_to_string(Decimal { mantissa: -5, scale: 1 }), "-0.5");
        assert!(parse_decimal("1e3").is_none());
    }

    #[test]
    fn string_to_number_prefix() {
        assert_eq!(str_to_num(b"12abc"), (Num::I(12), false));
        assert_eq!(str_to_num(b" 3.5 "), (Num::F(3.5), true));
        assert!(!str_to_num(b"abc").1);
        assert_eq!(str_to_num(b"1e3"), (Num::F(1000.0), true));
        let mut ws = w();
        assert_eq!(to_f64(&Value::str("7x"), &mut ws), Some(7.0));
        assert_eq!(ws.list.len(), 1);
        assert_eq!(ws.list[0].code, 1292);
    }

    #[test]
    fn int_arith_and_overflow() {
        assert_eq!(arith(ArithOp::Add, Num::I(2), Num::I(3), &e).unwrap(), Some(Num::I(5)));
        let err = arith(ArithOp::Add, Num::I(i64::MAX), Num::I(1), &e).unwrap_err();
        assert_eq!(err.code, 1690);
        let err = arith(ArithOp::Sub, Num::U(0), Num::I(1), &e).unwrap_err();
        assert!(err.message.contains("BIGINT UNSIGNED"));
        assert_eq!(arith(ArithOp::Div, Num::I(1), Num::I(0), &e).unwrap(), None);
        assert_eq!(arith(ArithOp::IntDiv, Num::I(7), Num::I(2), &e).unwrap(), Some(Num::I(3)));
        assert_eq!(arith(ArithOp::Mod, Num::I(-7), Num::I(2), &e).unwrap(), Some(Num::I(-1)));
    }

    #[test]
    fn division_is_decimal_with_four_more_digits() {
        let r = arith(ArithOp::Div, Num::I(1), Num::I(3), &e).unwrap().unwrap();
        assert_eq!(r, Num::D(Decimal { mantissa: 3333, scale: 4 }));
        let r = arith(ArithOp::Div, Num::I(2), Num::I(3), &e).unwrap().unwrap();
        assert_eq!(r, Num::D(Decimal { mantissa: 6667, scale: 4 }));
        let r = arith(ArithOp::Div, Num::D(Decimal { mantissa: 15, scale: 1 }), Num::I(2), &e).unwrap().unwrap();
        assert_eq!(
            dec_to_string(match r {
                Num::D(d) => d,
                _ => panic!(),
            }),
            "0.75000"
        );
    }

    #[test]
    fn decimal_and_double_promotion() {
        let r = arith(ArithOp::Add, Num::D(Decimal { mantissa: 15, scale: 1 }), Num::I(1), &e).unwrap().unwrap();
        assert_eq!(r, Num::D(Decimal { mantissa: 25, scale: 1 }));
        let r = arith(ArithOp::Mul, Num::F(1.5), Num::I(2), &e).unwrap().unwrap();
        assert_eq!(r, Num::F(3.0));
    }

    #[test]
    fn comparisons_mixed() {
        let mut ws = w();
        assert_eq!(sql_cmp(&Value::str("abc"), &Value::str("ABC"), Coll::Ci, &mut ws), Some(Ordering::Equal));
        assert_ne!(sql_cmp(&Value::str("abc"), &Value::str("ABC"), Coll::Bin, &mut ws), Some(Ordering::Equal));
        assert_eq!(sql_cmp(&Value::str("10"), &Value::Int(9), Coll::Ci, &mut ws), Some(Ordering::Greater));
        assert_eq!(sql_cmp(&Value::Int(1), &Value::Null, Coll::Ci, &mut ws), None);
        assert_eq!(sql_cmp(&Value::UInt(u64::MAX), &Value::Int(-1), Coll::Ci, &mut ws), Some(Ordering::Greater));
        let d = Value::Date(Date { year: 2024, month: 3, day: 1 });
        assert_eq!(sql_cmp(&d, &Value::str("2024-03-01"), Coll::Ci, &mut ws), Some(Ordering::Equal));
        assert_eq!(sql_cmp(&d, &Value::str("2024-02-29"), Coll::Ci, &mut ws), Some(Ordering::Greater));
        assert_eq!(
            sql_cmp(&Value::Decimal(Decimal { mantissa: 150, scale: 2 }), &Value::Double(1.5), Coll::Ci, &mut ws),
            Some(Ordering::Equal)
        );
    }

    #[test]
    fn doubles_print_like_mysql() {
        assert_eq!(fmt_double(1.5), "1.5");
        assert_eq!(fmt_double(3.0), "3");
        assert_eq!(fmt_double(1e20), "1e20");
        assert_eq!(fmt_double(-2.5e-20), "-2.5e-20");
    }
}
