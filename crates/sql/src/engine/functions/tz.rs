//! Time zones: CONVERT_TZ and the values SET time_zone accepts.
//!
//! A zone is 'SYSTEM' (the server's zone, `system_time_zone`, which is UTC
//! for `norr sqld`), a UTC offset '[+-]H:MM' within MySQL 8.0's range
//! -13:59..+14:00, or an IANA name ('Europe/Stockholm'). Stock MySQL knows
//! names only once its time-zone tables are loaded; we always know them.
//!
//! Names come from `jiff`: the system's /usr/share/zoneinfo when the machine
//! has it (kept current by the OS's tzdata updates), else the tzdb bundled
//! into the binary, so a fresh machine without tzdata still has them.
//!
//! Local times that a DST change skips or repeats resolve as MySQL's
//! `Time_zone_db::TIME_to_gmt_sec` resolves them: a skipped time is the
//! moment of the change, a repeated time is the earlier of its two moments.

use crate::engine::expr::datetime as dtm;
use norr_signals::DateTime;

/// Longest zone name looked up (MySQL's time_zone_name.Name is CHAR(64)).
const MAX_NAME_BYTES: usize = 64;

/// Range of the UTC moment CONVERT_TZ converts, as MySQL 8.0.28+ on 64-bit
/// platforms: '1970-01-01 00:00:01' .. '3001-01-18 23:59:59.999999' UTC.
const MIN_UTC_SECS: i64 = 1;
const MAX_UTC_SECS: i64 = 32_536_771_199;

/// Offsets MySQL 8.0.19+ accepts: '-13:59' .. '+14:00'.
const MIN_OFFSET_SECS: i32 = -(13 * 3600 + 59 * 60);
const MAX_OFFSET_SECS: i32 = 14 * 3600;

#[derive(Debug, Clone)]
pub enum Zone {
    /// A fixed offset from UTC, in seconds ('SYSTEM' is offset 0 here).
    Offset(i32),
    Named(jiff::tz::TimeZone),
}

/// The zone a time_zone value or CONVERT_TZ argument names; None if unknown
/// or malformed (CONVERT_TZ gives NULL, SET time_zone error 1298).
pub fn parse_zone(text: &[u8]) -> Option<Zone> {
    let s = std::str::from_utf8(text).ok()?.trim();
    if s.eq_ignore_ascii_case("SYSTEM") {
        return Some(Zone::Offset(0));
    }
    if s.starts_with(['+', '-']) {
        return parse_offset(s).map(Zone::Offset);
    }
    if s.is_empty() || s.len() > MAX_NAME_BYTES {
        return None;
    }
    jiff::tz::TimeZone::get(s).ok().map(Zone::Named)
}

/// '[+-]H[H]:MM' in seconds, as MySQL's `str_to_offset` reads it.
fn parse_offset(s: &str) -> Option<i32> {
    let (neg, rest) = match s.as_bytes().first()? {
        b'+' => (false, &s[1..]),
        b'-' => (true, &s[1..]),
        _ => return None,
    };
    let (h, m) = rest.split_once(':')?;
    let digits = |x: &str, max_len: usize| {
        (!x.is_empty() && x.len() <= max_len && x.bytes().all(|b| b.is_ascii_digit())).then(|| x.parse::<i32>().ok())?
    };
    let (h, m) = (digits(h, 2)?, digits(m, 2)?);
    if m > 59 {
        return None;
    }
    let secs = (h * 3600 + m * 60) * if neg { -1 } else { 1 };
    (MIN_OFFSET_SECS..=MAX_OFFSET_SECS).contains(&secs).then_some(secs)
}

/// CONVERT_TZ(dt, from, to). A moment outside MySQL's range is returned
/// unchanged, as MySQL does ("no conversion occurs").
pub fn convert(dt: &DateTime, from: &Zone, to: &Zone) -> DateTime {
    let Some((utc_secs, _, _)) = utc_span(wall_secs(dt), dt, from) else { return *dt };
    if !(MIN_UTC_SECS..=MAX_UTC_SECS).contains(&utc_secs) {
        return *dt;
    }
    dtm::unix_micros_to_datetime(utc_secs * 1_000_000)
        .and_then(|utc| utc_to_local(&DateTime { micro: dt.micro, ..utc }, to))
        .unwrap_or(*dt)
}

/// Wall time `dt` (whole seconds) read as if it were UTC: the seconds since
/// the epoch the zone arithmetic starts from.
fn wall_secs(dt: &DateTime) -> i64 {
    dtm::datetime_to_unix_micros(&DateTime { micro: 0, ..*dt }) / 1_000_000
}

/// The UTC moments (seconds) wall time `dt` names in `zone`: (the moment
/// MySQL takes, the latest moment, whether it names exactly one moment).
/// A repeated wall time names two moments (the earlier is MySQL's); a
/// skipped one names none, and MySQL takes the moment of the change.
fn utc_span(local_secs: i64, dt: &DateTime, zone: &Zone) -> Option<(i64, i64, bool)> {
    use jiff::tz::AmbiguousOffset;
    let tz = match zone {
        Zone::Offset(o) => {
            let utc = local_secs - *o as i64;
            return Some((utc, utc, true));
        }
        Zone::Named(tz) => tz,
    };
    let civil = jiff::civil::DateTime::new(
        i16::try_from(dt.date.year).ok()?,
        dt.date.month as i8,
        dt.date.day as i8,
        dt.hour as i8,
        dt.minute as i8,
        dt.second as i8,
        0,
    )
    .ok()?;
    Some(match tz.to_ambiguous_timestamp(civil).offset() {
        AmbiguousOffset::Unambiguous { offset } => {
            let utc = local_secs - offset.seconds() as i64;
            (utc, utc, true)
        }
        // Repeated wall time: the earlier moment is under the offset in
        // force before the change.
        AmbiguousOffset::Fold { before, after } => {
            (local_secs - before.seconds() as i64, local_secs - after.seconds() as i64, false)
        }
        // Skipped wall time: the moment of the change, which follows the
        // wall time read with the later offset.
        AmbiguousOffset::Gap { before, after } => {
            let ahead = local_secs - after.seconds() as i64;
            let change = jiff::Timestamp::from_second(ahead)
                .ok()
                .and_then(|ts| tz.following(ts).next())
                .map(|t| t.timestamp().as_second())
                .unwrap_or(local_secs - before.seconds() as i64);
            (change, change, false)
        }
        // `AmbiguousOffset` is non-exhaustive.
        #[allow(unreachable_patterns)]
        _ => return None,
    })
}

// ------------------------------------------------------- the session's zone

/// The session's zone as statements apply it (`Session::time_zone`,
/// `EvalCtx::tz`). None is UTC (SYSTEM, '+00:00'), where every conversion
/// is the identity: the default zone costs statements one test of this
/// option, and the zone's text is parsed once, at SET time_zone.
pub type SessionZone = Option<std::sync::Arc<Zone>>;

/// The session zone `time_zone`'s value names (None: UTC; an unknown value,
/// which SET refuses, is UTC too).
pub fn session_zone(text: &[u8]) -> SessionZone {
    match parse_zone(text)? {
        Zone::Offset(0) => None,
        z => Some(std::sync::Arc::new(z)),
    }
}

/// Where a wall time of a zone falls in UTC.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UtcOf {
    /// The moment MySQL takes (`TIME_to_gmt_sec`): for a repeated wall time
    /// the earlier one, for a skipped one the moment of the change.
    pub utc: DateTime,
    /// The latest moment with this wall time (`utc` unless it repeats).
    pub latest: DateTime,
    /// The wall time names exactly one moment (neither repeated nor
    /// skipped): converting back gives `dt` again.
    pub exact: bool,
}

/// A zero date or one with a zero month or day: MySQL keeps it as it is.
fn is_zero_part(dt: &DateTime) -> bool {
    dt.date.month == 0 || dt.date.day == 0
}

/// Wall time `dt` of `zone` in UTC (fractions kept). None for a zero date
/// and outside the years jiff knows (0..=9999 both ways): callers keep such a
/// value as it is.
pub fn local_to_utc(dt: &DateTime, zone: &Zone) -> Option<UtcOf> {
    if is_zero_part(dt) {
        return None;
    }
    let (utc, latest, exact) = utc_span(wall_secs(dt), dt, zone)?;
    let back = |secs: i64| {
        let out = dtm::unix_micros_to_datetime(secs.checked_mul(1_000_000)?)?;
        (1..=9999).contains(&out.date.year).then_some(DateTime { micro: dt.micro, ..out })
    };
    Some(UtcOf { utc: back(utc)?, latest: back(latest)?, exact })
}

/// UTC moment `dt` as wall time of `zone` (fractions kept). None as for
/// `local_to_utc`.
pub fn utc_to_local(dt: &DateTime, zone: &Zone) -> Option<DateTime> {
    if is_zero_part(dt) {
        return None;
    }
    let utc_secs = wall_secs(dt);
    let offset = match zone {
        Zone::Offset(o) => *o as i64,
        Zone::Named(tz) => tz.to_offset(jiff::Timestamp::from_second(utc_secs).ok()?).seconds() as i64,
    };
    let out = dtm::unix_micros_to_datetime((utc_secs + offset).checked_mul(1_000_000)?)?;
    (1..=9999).contains(&out.date.year).then_some(DateTime { micro: dt.micro, ..out })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dt(s: &str) -> DateTime {
        dtm::parse_datetime(s.as_bytes()).expect("datetime").0
    }
    fn conv(s: &str, from: &str, to: &str) -> String {
        let f = parse_zone(from.as_bytes()).expect("from");
        let t = parse_zone(to.as_bytes()).expect("to");
        crate::engine::catalog::value_text(&norr_signals::Value::DateTime(convert(&dt(s), &f, &t)))
    }

    #[test]
    fn offsets() {
        assert!(matches!(parse_zone(b"+05:30"), Some(Zone::Offset(19800))));
        assert!(matches!(parse_zone(b"-8:00"), Some(Zone::Offset(-28800))));
        assert!(matches!(parse_zone(b"+14:00"), Some(Zone::Offset(50400))));
        assert!(matches!(parse_zone(b"-13:59"), Some(Zone::Offset(-50340))));
        assert!(matches!(parse_zone(b"system"), Some(Zone::Offset(0))));
        for bad in ["+14:01", "-14:00", "+5:60", "+05", "05:00", "+05:3x", "+:30", "+123:00", "", "Mars/Olympus"] {
            assert!(parse_zone(bad.as_bytes()).is_none(), "{bad}");
        }
        assert_eq!(conv("2024-01-01 12:00:00", "+00:00", "+05:30"), "2024-01-01 17:30:00");
        assert_eq!(conv("2024-01-01 01:00:00.250000", "+02:00", "-08:00"), "2023-12-31 15:00:00.250000");
    }

    #[test]
    fn named_zones_follow_dst() {
        // Stockholm: CET (+01) in winter, CEST (+02) in summer.
        assert_eq!(conv("2024-01-15 12:00:00", "Europe/Stockholm", "UTC"), "2024-01-15 11:00:00");
        assert_eq!(conv("2024-07-15 12:00:00", "Europe/Stockholm", "UTC"), "2024-07-15 10:00:00");
        assert_eq!(conv("2024-07-15 10:00:00", "UTC", "America/New_York"), "2024-07-15 06:00:00");
        assert_eq!(conv("2024-12-15 10:00:00", "UTC", "America/New_York"), "2024-12-15 05:00:00");
        // Case does not matter, as in MySQL's time-zone tables.
        assert_eq!(conv("2024-12-15 10:00:00", "utc", "america/new_york"), "2024-12-15 05:00:00");
    }

    #[test]
    fn dst_transitions() {
        // 2024-03-31: Stockholm jumps 02:00 CET -> 03:00 CEST (01:00 UTC).
        assert_eq!(conv("2024-03-31 01:59:59", "Europe/Stockholm", "UTC"), "2024-03-31 00:59:59");
        assert_eq!(conv("2024-03-31 03:00:00", "Europe/Stockholm", "UTC"), "2024-03-31 01:00:00");
        // A skipped wall time is the moment of the jump.
        assert_eq!(conv("2024-03-31 02:30:00", "Europe/Stockholm", "UTC"), "2024-03-31 01:00:00");
        assert_eq!(conv("2024-03-31 02:00:00", "Europe/Stockholm", "UTC"), "2024-03-31 01:00:00");
        // 2024-10-27: 03:00 CEST -> 02:00 CET (01:00 UTC); 02:30 happens twice:
        // the earlier (CEST) moment.
        assert_eq!(conv("2024-10-27 02:30:00", "Europe/Stockholm", "UTC"), "2024-10-27 00:30:00");
        assert_eq!(conv("2024-10-27 03:00:00", "Europe/Stockholm", "UTC"), "2024-10-27 02:00:00");
        // UTC -> Stockholm across the fall-back: both moments map to 02:30.
        assert_eq!(conv("2024-10-27 00:30:00", "UTC", "Europe/Stockholm"), "2024-10-27 02:30:00");
        assert_eq!(conv("2024-10-27 01:30:00", "UTC", "Europe/Stockholm"), "2024-10-27 02:30:00");
        // New York 2024-03-10: 02:00 EST -> 03:00 EDT (07:00 UTC).
        assert_eq!(conv("2024-03-10 06:59:59", "UTC", "America/New_York"), "2024-03-10 01:59:59");
        assert_eq!(conv("2024-03-10 07:00:00", "UTC", "America/New_York"), "2024-03-10 03:00:00");
        assert_eq!(conv("2024-03-10 02:15:00", "America/New_York", "UTC"), "2024-03-10 07:00:00");
        // Zone to zone across the Atlantic in the weeks their DST differs.
        assert_eq!(conv("2024-03-20 12:00:00", "America/New_York", "Europe/Stockholm"), "2024-03-20 17:00:00");
        assert_eq!(conv("2024-04-20 12:00:00", "America/New_York", "Europe/Stockholm"), "2024-04-20 18:00:00");
    }

    #[test]
    fn out_of_range_is_unchanged() {
        // Before 1970-01-01 00:00:01 UTC, after 3001-01-18 23:59:59 UTC: no conversion.
        assert_eq!(conv("1969-12-31 23:00:00", "+00:00", "+05:00"), "1969-12-31 23:00:00");
        assert_eq!(conv("1970-01-01 00:00:00", "+00:00", "+05:00"), "1970-01-01 00:00:00");
        assert_eq!(conv("1970-01-01 00:00:01", "+00:00", "+05:00"), "1970-01-01 05:00:01");
        assert_eq!(conv("1970-01-01 04:00:00", "+05:00", "+00:00"), "1970-01-01 04:00:00");
        assert_eq!(conv("3001-01-18 23:59:59", "UTC", "+01:00"), "3001-01-19 00:59:59");
        assert_eq!(conv("3001-01-19 00:00:00", "UTC", "+01:00"), "3001-01-19 00:00:00");
        assert_eq!(conv("9999-12-31 23:59:59", "Europe/Stockholm", "UTC"), "9999-12-31 23:59:59");
    }

    #[test]
    fn session_zone_conversions() {
        assert!(session_zone(b"SYSTEM").is_none());
        assert!(session_zone(b"+00:00").is_none());
        assert!(session_zone(b"-0:00").is_none());
        assert!(session_zone(b"+01:00").is_some());
        assert!(session_zone(b"Europe/Berlin").is_some());
        let text = |d: DateTime| crate::engine::catalog::value_text(&norr_signals::Value::DateTime(d));
        let z = parse_zone(b"+05:30").expect("zone");
        let u = local_to_utc(&dt("2024-01-01 05:30:00.5"), &z).expect("utc");
        assert_eq!(
            (text(u.utc), text(u.latest), u.exact),
            ("2024-01-01 00:00:00.500000".into(), "2024-01-01 00:00:00.500000".into(), true)
        );
        assert_eq!(text(utc_to_local(&u.utc, &z).expect("local")), "2024-01-01 05:30:00.500000");
        // Before the epoch too (a bound of a comparison may be there).
        assert_eq!(text(local_to_utc(&dt("1970-01-01 01:00:00"), &z).expect("utc").utc), "1969-12-31 19:30:00");
        let berlin = parse_zone(b"Europe/Berlin").expect("zone");
        let fold = local_to_utc(&dt("2024-10-27 02:30:00"), &berlin).expect("utc");
        assert_eq!(
            (text(fold.utc), text(fold.latest), fold.exact),
            ("2024-10-27 00:30:00".into(), "2024-10-27 01:30:00".into(), false)
        );
        let gap = local_to_utc(&dt("2024-03-31 02:30:00"), &berlin).expect("utc");
        assert_eq!(
            (text(gap.utc), text(gap.latest), gap.exact),
            ("2024-03-31 01:00:00".into(), "2024-03-31 01:00:00".into(), false)
        );
        assert_eq!(text(utc_to_local(&dt("2024-10-27 01:30:00"), &berlin).expect("local")), "2024-10-27 02:30:00");
        assert_eq!(text(utc_to_local(&dt("2024-07-01 10:00:00"), &berlin).expect("local")), "2024-07-01 12:00:00");
        // Zero dates and the ends of the calendar stay as they are.
        let zero = |year, month, day| DateTime {
            date: norr_signals::Date { year, month, day },
            hour: 0,
            minute: 0,
            second: 0,
            micro: 0,
        };
        assert!(local_to_utc(&zero(0, 0, 0), &z).is_none());
        assert!(utc_to_local(&zero(2024, 0, 10), &z).is_none());
        assert!(utc_to_local(&dt("9999-12-31 23:00:00"), &z).is_none());
        assert!(local_to_utc(&dt("0001-01-01 00:00:00"), &z).is_none());
    }
}
