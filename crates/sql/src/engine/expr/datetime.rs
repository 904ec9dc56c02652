//! Dates and times: parsing MySQL literals, day numbers, intervals, Unix time
//! and DATE_FORMAT. All times are UTC (the session time zone is '+00:00').

use norr_signals::coerce::{check_date, check_datetime, days_in_month};
use norr_signals::{Date, DateTime, Value};

/// Days since 0000-03-01-based civil epoch -> (y, m, d) (Howard Hinnant's algorithm).
pub fn days_to_date(z: i64) -> Option<Date> {
    let z = z + 719_468; // shift from 1970-01-01
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    if !(0..=9999).contains(&y) {
        return None;
    }
    Some(Date { year: y as u16, month: m as u8, day: d as u8 })
}

/// Days since 1970-01-01 of a date.
pub fn date_to_days(d: &Date) -> i64 {
    let y = d.year as i64 - if d.month <= 2 { 1 } else { 0 };
    let m = d.month as i64;
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d.day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// MySQL TO_DAYS: days since year 0 (0000-01-01 is day 1).
pub fn to_days(d: &Date) -> i64 {
    date_to_days(d) + 719_528
}

pub fn datetime_to_unix_micros(dt: &DateTime) -> i64 {
    (date_to_days(&dt.date) * 86_400 + dt.hour as i64 * 3600 + dt.minute as i64 * 60 + dt.second as i64) * 1_000_000
        + dt.micro as i64
}

pub fn unix_micros_to_datetime(us: i64) -> Option<DateTime> {
    let secs = us.div_euclid(1_000_000);
    let micro = us.rem_euclid(1_000_000) as u32;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    Some(DateTime {
        date: days_to_date(days)?,
        hour: (rem / 3600) as u8,
        minute: ((rem / 60) % 60) as u8,
        second: (rem % 60) as u8,
        micro,
    })
}

fn digits(s: &[u8]) -> Option<u32> {
    if s.is_empty() || s.len() > 9 || !s.iter().all(|c| c.is_ascii_digit()) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

fn parse_frac(s: &[u8]) -> Option<u32> {
    if s.is_empty() || !s.iter().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let mut v: u32 = 0;
    for i in 0..6 {
        v = v * 10 + s.get(i).map(|c| (c - b'0') as u32).unwrap_or(0);
    }
    Some(v)
}

/// Parse 'YYYY-MM-DD[ hh:mm:ss[.ffffff]]' (also 'T' separator and 'YYYYMMDD[hhmmss]').
/// Returns the datetime and whether a time part was present. Validates ranges.
pub fn parse_datetime(s: &[u8]) -> Option<(DateTime, bool)> {
    let s = trim(s);
    let (date_part, time_part) = match s.iter().position(|&c| c == b' ' || c == b'T') {
        Some(i) => (&s[..i], Some(trim(&s[i + 1..]))),
        None => (s, None),
    };
    let date = if date_part.contains(&b'-') || date_part.contains(&b'/') {
        let parts: Vec<&[u8]> = date_part.split(|&c| c == b'-' || c == b'/').collect();
        if parts.len() != 3 {
            return None;
        }
        let mut y = digits(parts[0])?;
        if parts[0].len() == 2 {
            y += if y < 70 { 2000 } else { 1900 };
        }
        Date { year: u16::try_from(y).ok()?, month: digits(parts[1])? as u8, day: digits(parts[2])? as u8 }
    } else if date_part.len() == 8 || date_part.len() == 14 {
        if !date_part.iter().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let d = Date {
            year: digits(&date_part[0..4])? as u16,
            month: digits(&date_part[4..6])? as u8,
            day: digits(&date_part[6..8])? as u8,
        };
        if date_part.len() == 14 {
            let dt = DateTime {
                date: d,
                hour: digits(&date_part[8..10])? as u8,
                minute: digits(&date_part[10..12])? as u8,
                second: digits(&date_part[12..14])? as u8,
                micro: 0,
            };
            check_datetime(&dt).ok()?;
            return Some((dt, true));
        }
        d
    } else {
        return None;
    };
    let mut dt = DateTime { date, hour: 0, minute: 0, second: 0, micro: 0 };
    let mut has_time = false;
    if let Some(t) = time_part {
        if !t.is_empty() {
            let (hms, frac) = match t.iter().position(|&c| c == b'.') {
                Some(i) => (&t[..i], Some(&t[i + 1..])),
                None => (t, None),
            };
            let parts: Vec<&[u8]> = hms.split(|&c| c == b':').collect();
            if parts.is_empty() || parts.len() > 3 {
                return None;
            }
            dt.hour = digits(parts[0])? as u8;
            dt.minute = parts.get(1).map(|p| digits(p)).unwrap_or(Some(0))? as u8;
            dt.second = parts.get(2).map(|p| digits(p)).unwrap_or(Some(0))? as u8;
            if let Some(f) = frac {
                dt.micro = parse_frac(f)?;
            }
            has_time = true;
        }
    }
    if date.year == 0 && date.month == 0 && date.day == 0 {
        return None;
    }
    check_datetime(&dt).ok()?;
    Some((dt, has_time))
}

fn trim(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|c| !c.is_ascii_whitespace()).unwrap_or(s.len());
    let end = s.iter().rposition(|c| !c.is_ascii_whitespace()).map(|i| i + 1).unwrap_or(start);
    &s[start..end.max(start)]
}

pub fn parse_date(s: &[u8]) -> Option<Date> {
    parse_datetime(s).map(|(dt, _)| dt.date)
}

/// Parse '[-][D ]hh:mm:ss[.ffffff]' or 'hhmmss' into signed microseconds.
pub fn parse_time(s: &[u8]) -> Option<i64> {
    let s = trim(s);
    let (neg, s) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    let (days, s) = match s.iter().position(|&c| c == b' ') {
        Some(i) => (digits(&s[..i])? as i64, &s[i + 1..]),
        None => (0, s),
    };
    let (hms, frac) = match s.iter().position(|&c| c == b'.') {
        Some(i) => (&s[..i], parse_frac(&s[i + 1..])?),
        None => (s, 0),
    };
    let (h, m, sec) = if hms.contains(&b':') {
        let p: Vec<&[u8]> = hms.split(|&c| c == b':').collect();
        if p.len() > 3 {
            return None;
        }
        (
            digits(p[0])? as i64,
            p.get(1).map(|x| digits(x)).unwrap_or(Some(0))? as i64,
            p.get(2).map(|x| digits(x)).unwrap_or(Some(0))? as i64,
        )
    } else {
        let v = digits(hms)? as i64;
        (v / 10000, (v / 100) % 100, v % 100)
    };
    if m > 59 || sec > 59 {
        return None;
    }
    let us = ((days * 24 + h) * 3600 + m * 60 + sec) * 1_000_000 + frac as i64;
    Some(if neg { -us } else { us })
}

/// Parse a string into the same class as `like` (for comparisons).
pub fn parse_like(s: &[u8], like: &Value) -> Option<Value> {
    match like {
        Value::Date(_) => {
            let (dt, has_time) = parse_datetime(s)?;
            Some(if has_time { Value::DateTime(dt) } else { Value::Date(dt.date) })
        }
        Value::DateTime(_) => parse_datetime(s).map(|(dt, _)| Value::DateTime(dt)),
        Value::Time(_) => parse_time(s).map(Value::Time),
        _ => None,
    }
}

/// Interval units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Microsecond,
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Quarter,
    Year,
}

impl Unit {
    pub fn parse(name: &str) -> Option<Unit> {
        Some(match name.to_ascii_uppercase().trim_end_matches('S') {
            "MICROSECOND" => Unit::Microsecond,
            "SECOND" => Unit::Second,
            "MINUTE" => Unit::Minute,
            "HOUR" => Unit::Hour,
            "DAY" => Unit::Day,
            "WEEK" => Unit::Week,
            "MONTH" => Unit::Month,
            "QUARTER" => Unit::Quarter,
            "YEAR" => Unit::Year,
            _ => return None,
        })
    }
}

/// Add `n` units to a datetime. None if the result leaves 0000..9999.
pub fn add_interval(dt: &DateTime, n: i64, unit: Unit) -> Option<DateTime> {
    let months = match unit {
        Unit::Month => Some(n),
        Unit::Quarter => n.checked_mul(3),
        Unit::Year => n.checked_mul(12),
        _ => None,
    };
    if let Some(m) = months {
        let total = dt.date.year as i64 * 12 + (dt.date.month as i64 - 1) + m;
        let y = total.div_euclid(12);
        let mo = total.rem_euclid(12) + 1;
        if !(0..=9999).contains(&y) {
            return None;
        }
        let dim = days_in_month(y as u16, mo as u8);
        let mut r = *dt;
        r.date = Date { year: y as u16, month: mo as u8, day: dt.date.day.min(dim) };
        return Some(r);
    }
    let us = match unit {
        Unit::Microsecond => n,
        Unit::Second => n.checked_mul(1_000_000)?,
        Unit::Minute => n.checked_mul(60_000_000)?,
        Unit::Hour => n.checked_mul(3_600_000_000)?,
        Unit::Day => n.checked_mul(86_400_000_000)?,
        Unit::Week => n.checked_mul(7 * 86_400_000_000)?,
        _ => unreachable!("month units handled above"),
    };
    let r = unix_micros_to_datetime(datetime_to_unix_micros(dt).checked_add(us)?)?;
    check_date(&r.date).ok()?;
    Some(r)
}

/// Month names, January first (DATE_FORMAT %M, STR_TO_DATE).
pub const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
/// Day names, Monday first (DATE_FORMAT %W, STR_TO_DATE).
pub const DAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];

/// Day of week, 0 = Monday.
pub fn weekday(d: &Date) -> u32 {
    (date_to_days(d) + 3).rem_euclid(7) as u32
}

pub fn day_of_year(d: &Date) -> u32 {
    (date_to_days(d) - date_to_days(&Date { year: d.year, month: 1, day: 1 }) + 1) as u32
}

/// Week-numbering rules, as the bits of MySQL's WEEK() modes after mapping.
const WEEK_MONDAY_FIRST: u32 = 1;
const WEEK_YEAR: u32 = 2;
const WEEK_FIRST_WEEKDAY: u32 = 4;

/// The behaviour bits of WEEK(d, mode): in modes with Sunday as the first day
/// the "first week has a Sunday" rule applies, in the others "first week has 4 days".
pub fn week_behaviour(mode: i64) -> u32 {
    let m = (mode & 7) as u32;
    if m & WEEK_MONDAY_FIRST == 0 {
        m ^ WEEK_FIRST_WEEKDAY
    } else {
        m
    }
}

/// Week number and the year it belongs to, for a week behaviour (see `week_behaviour`).
/// Weeks start on Monday or Sunday; week 1 is the first week with a Sunday / Monday
/// in it ("first weekday") or the first with 4 or more days; with `WEEK_YEAR` days
/// before week 1 belong to the last week of the previous year instead of week 0.
pub fn calc_week(d: &Date, behaviour: u32) -> (u32, u16) {
    let monday_first = behaviour & WEEK_MONDAY_FIRST != 0;
    let mut week_year = behaviour & WEEK_YEAR != 0;
    let first_weekday = behaviour & WEEK_FIRST_WEEKDAY != 0;
    let day_nr = date_to_days(d);
    let mut first_nr = date_to_days(&Date { year: d.year, month: 1, day: 1 });
    // Weekday of Jan 1st, counted from the week's first day.
    let first_of_week = |nr: i64| -> i64 {
        let monday0 = (nr + 3).rem_euclid(7);
        if monday_first {
            monday0
        } else {
            (monday0 + 1) % 7
        }
    };
    let mut wd = first_of_week(first_nr);
    let mut year = d.year;
    let starts_late = |wd: i64| (first_weekday && wd != 0) || (!first_weekday && wd >= 4);
    if d.month == 1 && (d.day as i64) <= 7 - wd {
        if !week_year && starts_late(wd) {
            return (0, year);
        }
        week_year = true;
        year = year.saturating_sub(1);
        let days = days_in_year(year);
        first_nr -= days;
        wd = (wd + 53 * 7 - days).rem_euclid(7);
    }
    let days = if starts_late(wd) { day_nr - (first_nr + (7 - wd)) } else { day_nr - (first_nr - wd) };
    if week_year && days >= 52 * 7 {
        let next_wd = (wd + days_in_year(year)).rem_euclid(7);
        if !starts_late(next_wd) {
            return (1, year + 1);
        }
    }
    ((days / 7 + 1) as u32, year)
}

fn days_in_year(y: u16) -> i64 {
    if days_in_month(y, 2) == 29 {
        366
    } else {
        365
    }
}

/// MySQL DATE_FORMAT (the common specifiers).
pub fn date_format(dt: &DateTime, fmt: &[u8]) -> String {
    let mut out = String::with_capacity(fmt.len() + 8);
    let mut i = 0;
    while i < fmt.len() {
        let c = fmt[i];
        if c != b'%' || i + 1 >= fmt.len() {
            out.push(c as char);
            i += 1;
            continue;
        }
        let d = &dt.date;
        let h12 = if dt.hour.is_multiple_of(12) { 12 } else { dt.hour % 12 };
        match fmt[i + 1] {
            b'Y' => out.push_str(&format!("{:04}", d.year)),
            b'y' => out.push_str(&format!("{:02}", d.year % 100)),
            b'm' => out.push_str(&format!("{:02}", d.month)),
            b'c' => out.push_str(&d.month.to_string()),
            b'd' => out.push_str(&format!("{:02}", d.day)),
            b'e' => out.push_str(&d.day.to_string()),
            b'H' => out.push_str(&format!("{:02}", dt.hour)),
            b'k' => out.push_str(&dt.hour.to_string()),
            b'h' | b'I' => out.push_str(&format!("{h12:02}")),
            b'l' => out.push_str(&h12.to_string()),
            b'i' => out.push_str(&format!("{:02}", dt.minute)),
            b's' | b'S' => out.push_str(&format!("{:02}", dt.second)),
            b'f' => out.push_str(&format!("{:06}", dt.micro)),
            b'p' => out.push_str(if dt.hour < 12 { "AM" } else { "PM" }),
            b'M' => out.push_str(MONTHS.get(d.month as usize - 1).unwrap_or(&"")),
            b'b' => out.push_str(&MONTHS.get(d.month as usize - 1).unwrap_or(&"")[..3.min(MONTHS[0].len())]),
            b'W' => out.push_str(DAYS[weekday(d) as usize]),
            b'a' => out.push_str(&DAYS[weekday(d) as usize][..3]),
            b'w' => out.push_str(&((weekday(d) + 1) % 7).to_string()),
            b'j' => out.push_str(&format!("{:03}", day_of_year(d))),
            b'T' => out.push_str(&format!("{:02}:{:02}:{:02}", dt.hour, dt.minute, dt.second)),
            b'r' => out.push_str(&format!(
                "{:02}:{:02}:{:02} {}",
                h12,
                dt.minute,
                dt.second,
                if dt.hour < 12 { "AM" } else { "PM" }
            )),
            b'D' => {
                let suffix = match (d.day % 100, d.day % 10) {
                    (11..=13, _) => "th",
                    (_, 1) => "st",
                    (_, 2) => "nd",
                    (_, 3) => "rd",
                    _ => "th",
                };
                out.push_str(&format!("{}{suffix}", d.day));
            }
            b'U' => out.push_str(&format!("{:02}", calc_week(d, week_behaviour(0)).0)),
            b'u' => out.push_str(&format!("{:02}", calc_week(d, week_behaviour(1)).0)),
            b'V' => out.push_str(&format!("{:02}", calc_week(d, week_behaviour(2)).0)),
            b'v' => out.push_str(&format!("{:02}", calc_week(d, week_behaviour(3)).0)),
            b'X' => out.push_str(&format!("{:04}", calc_week(d, week_behaviour(2)).1)),
            b'x' => out.push_str(&format!("{:04}", calc_week(d, week_behaviour(3)).1)),
            b'%' => out.push('%'),
            other => out.push(other as char),
        }
        i += 2;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn day_numbers_roundtrip() {
        let d = Date { year: 2024, month: 2, day: 29 };
        assert_eq!(days_to_date(date_to_days(&d)), Some(d));
        assert_eq!(date_to_days(&Date { year: 1970, month: 1, day: 1 }), 0);
        assert_eq!(to_days(&Date { year: 2007, month: 10, day: 7 }), 733_321);
        assert_eq!(weekday(&Date { year: 2026, month: 11, day: 22 }), 6); // a Sunday
    }

    #[test]
    fn parse_literals() {
        let (dt, t) = parse_datetime(b"2024-03-01 12:34:56.5").unwrap();
        assert!(t);
        assert_eq!((dt.hour, dt.minute, dt.second, dt.micro), (12, 34, 56, 500_000));
        assert_eq!(parse_date(b"20240301"), Some(Date { year: 2024, month: 3, day: 1 }));
        assert!(parse_date(b"2023-02-29").is_none());
        assert!(parse_date(b"hello").is_none());
        assert_eq!(parse_time(b"-01:02:03"), Some(-3_723_000_000));
    }

    #[test]
    fn intervals() {
        let dt = parse_datetime(b"2024-01-31 00:00:00").unwrap().0;
        let r = add_interval(&dt, 1, Unit::Month).unwrap();
        assert_eq!(r.date, Date { year: 2024, month: 2, day: 29 });
        let r = add_interval(&dt, -1, Unit::Day).unwrap();
        assert_eq!(r.date, Date { year: 2024, month: 1, day: 30 });
        let r = add_interval(&dt, 25, Unit::Hour).unwrap();
        assert_eq!((r.date.day, r.hour), (1, 1));
    }

    #[test]
    fn formats() {
        let dt = parse_datetime(b"2024-03-05 14:07:09").unwrap().0;
        assert_eq!(date_format(&dt, b"%Y/%m/%d %H:%i:%s"), "2024/03/05 14:07:09");
        assert_eq!(date_format(&dt, b"%W %M %e %y %p"), "Tuesday March 5 24 PM");
        assert_eq!(date_format(&dt, b"%D %U %u %V %v %X %x"), "5th 09 10 09 10 2024 2024");
    }

    #[test]
    fn week_numbers_follow_the_mysql_modes() {
        let week = |s: &[u8], mode: i64| calc_week(&parse_date(s).unwrap(), week_behaviour(mode));
        // The manual's examples for WEEK() and YEARWEEK().
        assert_eq!(week(b"2008-02-20", 0).0, 7);
        assert_eq!(week(b"2008-02-20", 1).0, 8);
        assert_eq!(week(b"2008-12-31", 1).0, 53);
        assert_eq!(week(b"2000-01-01", 0).0, 0);
        assert_eq!(week(b"2000-01-01", 2), (52, 1999));
        assert_eq!(week(b"1987-01-01", 2), (52, 1986));
        // ISO 8601 (mode 3): 2021-01-03 is in week 53 of 2020; 2024-12-30 in week 1 of 2025.
        assert_eq!(week(b"2021-01-03", 3), (53, 2020));
        assert_eq!(week(b"2024-12-30", 3), (1, 2025));
        assert_eq!(week(b"2024-12-30", 1).0, 53);
    }
}
