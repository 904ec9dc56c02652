//! Date and time functions beyond the basic set in `mod.rs`: STR_TO_DATE,
//! TIMESTAMPDIFF, week numbers, TIME arithmetic and conversions.

use super::{to_date, to_datetime, unit_from_code, Func};
use crate::engine::expr::datetime::{self as dtm, Unit, DAYS, MONTHS};
use crate::engine::expr::value::{to_i64, to_text};
use crate::engine::expr::{EvalCtx, TClass};
use crate::types::SqlError;
use norr_signals::{Date, DateTime, Value};

const MICROS_PER_DAY: i64 = 86_400_000_000;
/// MySQL's TIME range: -838:59:59 .. 838:59:59.
const TIME_MAX_MICROS: i64 = (838 * 3600 + 59 * 60 + 59) * 1_000_000;

pub(super) fn call(f: Func, args: &[Value], ctx: &mut EvalCtx) -> Result<Value, SqlError> {
    let a0 = &args[0];
    Ok(match f {
        Func::StrToDate => {
            let s = to_text(a0).unwrap_or_default();
            let fmt = to_text(&args[1]).unwrap_or_default();
            match str_to_date(&s, &fmt) {
                Some(v) => v,
                None => {
                    ctx.warnings.push(
                        1411,
                        format!("Incorrect datetime value: '{}' for function str_to_date", String::from_utf8_lossy(&s)),
                    );
                    Value::Null
                }
            }
        }
        Func::TimestampDiff => {
            let unit = unit_from_code(to_i64(a0, &mut ctx.warnings).unwrap_or(4));
            let (Some(a), Some(b)) = (to_datetime(&args[1], ctx), to_datetime(&args[2], ctx)) else {
                return Ok(Value::Null);
            };
            Value::Int(timestamp_diff(unit, &a, &b))
        }
        Func::Quarter => match to_date(a0, ctx) {
            Some(d) => Value::Int((d.month as i64 - 1) / 3 + 1),
            None => Value::Null,
        },
        Func::Week | Func::WeekOfYear | Func::YearWeek => {
            let Some(d) = to_date(a0, ctx) else { return Ok(Value::Null) };
            let mode = match (f, args.get(1)) {
                (Func::WeekOfYear, _) => 3,
                (_, Some(m)) => to_i64(m, &mut ctx.warnings).unwrap_or(0),
                _ => 0,
            };
            let mut behaviour = dtm::week_behaviour(mode);
            if f == Func::YearWeek {
                behaviour |= 2;
            }
            let (week, year) = dtm::calc_week(&d, behaviour);
            Value::Int(if f == Func::YearWeek { year as i64 * 100 + week as i64 } else { week as i64 })
        }
        Func::TimeToSec => match time_micros(a0, ctx) {
            Some(t) => Value::Int(t / 1_000_000),
            None => Value::Null,
        },
        Func::SecToTime => {
            let secs = to_i64(a0, &mut ctx.warnings).unwrap_or(0);
            Value::Time(clamp_time(secs.saturating_mul(1_000_000), ctx))
        }
        Func::MakeDate => {
            let (Some(y), Some(n)) = (to_i64(a0, &mut ctx.warnings), to_i64(&args[1], &mut ctx.warnings)) else {
                return Ok(Value::Null);
            };
            let y = if (0..70).contains(&y) {
                y + 2000
            } else if (70..100).contains(&y) {
                y + 1900
            } else {
                y
            };
            if n <= 0 || !(0..=9999).contains(&y) {
                return Ok(Value::Null);
            }
            let jan1 = dtm::date_to_days(&Date { year: y as u16, month: 1, day: 1 });
            match dtm::days_to_date(jan1 + n - 1) {
                Some(d) => Value::Date(d),
                None => Value::Null,
            }
        }
        Func::MakeTime => {
            let h = to_i64(a0, &mut ctx.warnings).unwrap_or(0);
            let m = to_i64(&args[1], &mut ctx.warnings).unwrap_or(0);
            let s = to_i64(&args[2], &mut ctx.warnings).unwrap_or(0);
            if !(0..60).contains(&m) || !(0..60).contains(&s) {
                return Ok(Value::Null);
            }
            let abs = (h.unsigned_abs() as i64).saturating_mul(3600).saturating_add(m * 60 + s);
            Value::Time(clamp_time(abs.saturating_mul(1_000_000) * if h < 0 { -1 } else { 1 }, ctx))
        }
        Func::TimeDiff => {
            // Two DATETIMEs (or DATETIME literals) subtract as such, anything else as TIMEs.
            let is_datetime = |v: &Value| match v {
                Value::DateTime(_) | Value::Date(_) => true,
                Value::Time(_) => false,
                other => {
                    to_text(other).is_some_and(|t| dtm::parse_time(&t).is_none() && dtm::parse_datetime(&t).is_some())
                }
            };
            let both_times = !(is_datetime(a0) && is_datetime(&args[1]));
            let diff = if both_times {
                time_micros(a0, ctx).zip(time_micros(&args[1], ctx)).map(|(a, b)| a - b)
            } else {
                to_datetime(a0, ctx)
                    .zip(to_datetime(&args[1], ctx))
                    .map(|(a, b)| dtm::datetime_to_unix_micros(&a) - dtm::datetime_to_unix_micros(&b))
            };
            match diff {
                Some(d) => Value::Time(clamp_time(d, ctx)),
                None => Value::Null,
            }
        }
        Func::FromDays => {
            let n = to_i64(a0, &mut ctx.warnings).unwrap_or(0);
            if n < 366 {
                // MySQL answers the zero date; without zero dates, NULL.
                return Ok(Value::Null);
            }
            match dtm::days_to_date(n - 719_528) {
                Some(d) => Value::Date(d),
                None => Value::Null,
            }
        }
        Func::Microsecond => match time_micros(a0, ctx) {
            Some(t) => Value::Int(t.rem_euclid(1_000_000)),
            None => Value::Null,
        },
        Func::TimeFormat => {
            let Some(t) = time_micros(a0, ctx) else { return Ok(Value::Null) };
            let fmt = to_text(&args[1]).unwrap_or_default();
            time_format(t, &fmt).map(|s| Value::Bytes(s.into_bytes())).unwrap_or(Value::Null)
        }
        _ => return Err(SqlError::internal(format!("{f:?} is not a date function"))),
    })
}

/// The result type STR_TO_DATE has for a given format: DATE without time
/// specifiers, TIME without date specifiers, DATETIME with both.
pub fn str_to_date_class(fmt: &[u8]) -> TClass {
    let (mut date, mut time) = (false, false);
    let mut i = 0;
    while i + 1 < fmt.len() {
        if fmt[i] == b'%' {
            match fmt[i + 1] {
                b'Y' | b'y' | b'm' | b'c' | b'd' | b'e' | b'D' | b'M' | b'b' | b'j' | b'a' | b'W' => date = true,
                b'H' | b'k' | b'h' | b'I' | b'l' | b'i' | b's' | b'S' | b'f' | b'p' | b'T' | b'r' => time = true,
                _ => {}
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    match (date, time) {
        (true, false) => TClass::Date,
        (false, true) => TClass::Time,
        _ => TClass::DateTime,
    }
}

/// Parse `s` by a DATE_FORMAT-style format. None if it does not match or the
/// result is not a valid date.
fn str_to_date(s: &[u8], fmt: &[u8]) -> Option<Value> {
    let (mut year, mut month, mut day) = (0i64, 0i64, 0i64);
    let (mut hour, mut minute, mut second, mut micro) = (0i64, 0i64, 0i64, 0i64);
    let mut pm: Option<bool> = None;
    let mut yday: Option<i64> = None;
    let mut pos = 0usize;
    let mut i = 0usize;
    let skip_ws = |pos: &mut usize| {
        while *pos < s.len() && s[*pos].is_ascii_whitespace() {
            *pos += 1;
        }
    };
    let num = |pos: &mut usize, max_digits: usize| -> Option<i64> {
        let start = *pos;
        while *pos < s.len() && *pos - start < max_digits && s[*pos].is_ascii_digit() {
            *pos += 1;
        }
        if *pos == start {
            return None;
        }
        std::str::from_utf8(&s[start..*pos]).ok()?.parse().ok()
    };
    let word = |pos: &mut usize, names: &[&str], prefix_len: Option<usize>| -> Option<i64> {
        let rest = &s[*pos..];
        for (k, name) in names.iter().enumerate() {
            let n = prefix_len.unwrap_or(name.len()).min(name.len());
            if rest.len() >= n && rest[..n].eq_ignore_ascii_case(&name.as_bytes()[..n]) {
                *pos += n;
                return Some(k as i64);
            }
        }
        None
    };
    while i < fmt.len() {
        let c = fmt[i];
        if c.is_ascii_whitespace() {
            skip_ws(&mut pos);
            i += 1;
            continue;
        }
        if c != b'%' || i + 1 >= fmt.len() {
            if pos >= s.len() || s[pos] != c {
                return None;
            }
            pos += 1;
            i += 1;
            continue;
        }
        let spec = fmt[i + 1];
        i += 2;
        if spec != b'%' {
            skip_ws(&mut pos);
        }
        match spec {
            b'Y' => {
                let start = pos;
                year = num(&mut pos, 4)?;
                if pos - start <= 2 {
                    year += if year < 70 { 2000 } else { 1900 };
                }
            }
            b'y' => {
                year = num(&mut pos, 2)?;
                year += if year < 70 { 2000 } else { 1900 };
            }
            b'm' | b'c' => month = num(&mut pos, 2)?,
            b'd' | b'e' => day = num(&mut pos, 2)?,
            b'D' => {
                day = num(&mut pos, 2)?;
                pos = (pos + 2).min(s.len());
            }
            b'H' | b'k' | b'h' | b'I' | b'l' => hour = num(&mut pos, 2)?,
            b'i' => minute = num(&mut pos, 2)?,
            b's' | b'S' => second = num(&mut pos, 2)?,
            b'f' => {
                let start = pos;
                let v = num(&mut pos, 6)?;
                micro = v * 10i64.pow((6 - (pos - start)) as u32);
            }
            b'p' => pm = Some(word(&mut pos, &["AM", "PM"], None)? == 1),
            b'M' => month = word(&mut pos, &MONTHS, None)? + 1,
            b'b' => month = word(&mut pos, &MONTHS, Some(3))? + 1,
            b'W' => {
                word(&mut pos, &DAYS, None)?;
            }
            b'a' => {
                word(&mut pos, &DAYS, Some(3))?;
            }
            b'j' => yday = Some(num(&mut pos, 3)?),
            b'T' | b'r' => {
                hour = num(&mut pos, 2)?;
                (pos < s.len() && s[pos] == b':').then_some(())?;
                pos += 1;
                minute = num(&mut pos, 2)?;
                (pos < s.len() && s[pos] == b':').then_some(())?;
                pos += 1;
                second = num(&mut pos, 2)?;
                if spec == b'r' {
                    skip_ws(&mut pos);
                    pm = Some(word(&mut pos, &["AM", "PM"], None)? == 1);
                }
            }
            b'%' => {
                (pos < s.len() && s[pos] == b'%').then_some(())?;
                pos += 1;
            }
            _ => return None,
        }
    }
    if let Some(p) = pm {
        if !(1..=12).contains(&hour) {
            return None;
        }
        hour = hour % 12 + if p { 12 } else { 0 };
    }
    if let Some(n) = yday {
        let jan1 = dtm::date_to_days(&Date { year: u16::try_from(year).ok()?, month: 1, day: 1 });
        let d = dtm::days_to_date(jan1 + n - 1)?;
        month = d.month as i64;
        day = d.day as i64;
    }
    let class = str_to_date_class(fmt);
    if !(0..24).contains(&hour) || !(0..60).contains(&minute) || !(0..60).contains(&second) {
        return None;
    }
    let time = ((hour * 60 + minute) * 60 + second) * 1_000_000 + micro;
    if class == TClass::Time {
        return Some(Value::Time(time));
    }
    let date = Date { year: u16::try_from(year).ok()?, month: u8::try_from(month).ok()?, day: u8::try_from(day).ok()? };
    norr_signals::coerce::check_date(&date).ok()?;
    Some(if class == TClass::Date {
        Value::Date(date)
    } else {
        Value::DateTime(DateTime {
            date,
            hour: hour as u8,
            minute: minute as u8,
            second: second as u8,
            micro: micro as u32,
        })
    })
}

/// TIMESTAMPDIFF: whole units from `a` to `b` (negative if `b` is earlier).
/// Months count only when the day-and-time part has been reached, as in MySQL.
fn timestamp_diff(unit: Unit, a: &DateTime, b: &DateTime) -> i64 {
    let (ua, ub) = (dtm::datetime_to_unix_micros(a), dtm::datetime_to_unix_micros(b));
    let per = match unit {
        Unit::Microsecond => 1,
        Unit::Second => 1_000_000,
        Unit::Minute => 60_000_000,
        Unit::Hour => 3_600_000_000,
        Unit::Day => MICROS_PER_DAY,
        Unit::Week => 7 * MICROS_PER_DAY,
        Unit::Month | Unit::Quarter | Unit::Year => {
            let (lo, hi, sign) = if ub >= ua { (a, b, 1) } else { (b, a, -1) };
            let mut months =
                (hi.date.year as i64 * 12 + hi.date.month as i64) - (lo.date.year as i64 * 12 + lo.date.month as i64);
            let rest = |d: &DateTime| (d.date.day, d.hour, d.minute, d.second, d.micro);
            if rest(hi) < rest(lo) {
                months -= 1;
            }
            let per_unit = match unit {
                Unit::Quarter => 3,
                Unit::Year => 12,
                _ => 1,
            };
            return sign * (months / per_unit);
        }
    };
    (ub - ua) / per
}

/// The time-of-day (or TIME value) of a value, in microseconds.
fn time_micros(v: &Value, ctx: &mut EvalCtx) -> Option<i64> {
    match v {
        Value::Time(t) => Some(*t),
        Value::DateTime(dt) => {
            Some(((dt.hour as i64 * 60 + dt.minute as i64) * 60 + dt.second as i64) * 1_000_000 + dt.micro as i64)
        }
        Value::Date(_) => Some(0),
        Value::Null => None,
        other => {
            let t = to_text(other)?;
            match dtm::parse_time(&t) {
                Some(x) => Some(x),
                None => match dtm::parse_datetime(&t) {
                    Some((dt, _)) => time_micros(&Value::DateTime(dt), ctx),
                    None => {
                        ctx.warnings
                            .push(1292, format!("Truncated incorrect time value: '{}'", String::from_utf8_lossy(&t)));
                        None
                    }
                },
            }
        }
    }
}

fn clamp_time(us: i64, ctx: &mut EvalCtx) -> i64 {
    if us.abs() > TIME_MAX_MICROS {
        ctx.warnings.push(1292, "Truncated incorrect time value".into());
        TIME_MAX_MICROS * us.signum()
    } else {
        us
    }
}

/// TIME_FORMAT: DATE_FORMAT's time specifiers on a TIME (hours may exceed 23).
/// None (NULL) if the format asks for a date part, which a TIME does not have.
fn time_format(t: i64, fmt: &[u8]) -> Option<String> {
    let neg = t < 0;
    let t = t.unsigned_abs();
    let (h, m, s, us) = (t / 3_600_000_000, (t / 60_000_000) % 60, (t / 1_000_000) % 60, t % 1_000_000);
    let h12 = if h % 12 == 0 { 12 } else { h % 12 };
    let ampm = if h % 24 < 12 { "AM" } else { "PM" };
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    let mut i = 0;
    while i < fmt.len() {
        if fmt[i] != b'%' || i + 1 >= fmt.len() {
            out.push(fmt[i] as char);
            i += 1;
            continue;
        }
        match fmt[i + 1] {
            b'H' => out.push_str(&format!("{h:02}")),
            b'k' => out.push_str(&h.to_string()),
            b'h' | b'I' => out.push_str(&format!("{h12:02}")),
            b'l' => out.push_str(&h12.to_string()),
            b'i' => out.push_str(&format!("{m:02}")),
            b's' | b'S' => out.push_str(&format!("{s:02}")),
            b'f' => out.push_str(&format!("{us:06}")),
            b'p' => out.push_str(ampm),
            b'T' => out.push_str(&format!("{h:02}:{m:02}:{s:02}")),
            b'r' => out.push_str(&format!("{h12:02}:{m:02}:{s:02} {ampm}")),
            b'%' => out.push('%'),
            _ => return None,
        }
        i += 2;
    }
    Some(out)
}
