//! The slow query log, as MySQL keeps it: with `SET GLOBAL slow_query_log
//! = ON` every statement that took at least the session's `long_query_time`
//! seconds is appended to `slow_query_log_file`, in MySQL's format (so
//! mysqldumpslow and pt-query-digest read it). NorrDB does not split lock
//! waits out of a statement's time (they are in Query_time; Lock_time is
//! 0) and does not count examined rows (the field is left out).

use crate::types::{Session, SqlError};
use norr_signals::Value;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// On: statements are timed against long_query_time (read without the
/// lock on every statement).
static ON: AtomicBool = AtomicBool::new(false);
/// The open log file while the log is on.
static FILE: Mutex<Option<std::fs::File>> = Mutex::new(None);

fn lock_file() -> std::sync::MutexGuard<'static, Option<std::fs::File>> {
    FILE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The log file's path (`slow_query_log_file`), if one is set.
pub fn file() -> Option<String> {
    let v = crate::engine::vars::global_value("slow_query_log_file")?;
    let path = crate::engine::catalog::value_text(&v);
    (!path.is_empty()).then_some(path)
}

fn cannot_set(name: &str, value: &str, why: String) -> SqlError {
    SqlError::new(1231, "42000", format!("Variable '{name}' can't be set to the value of '{value}' ({why})"))
}

fn open(path: &str) -> Result<std::fs::File, String> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("cannot open {path}: {e}"))?;
    // MySQL starts a log file with the server's name and a column header.
    if f.metadata().map(|m| m.len() == 0).unwrap_or(false) {
        let _ = writeln!(
            f,
            "norr sqld (NorrDB), slow query log started with:\nTime                 Id Command    Argument"
        );
    }
    Ok(f)
}

/// A SET of `slow_query_log`, `slow_query_log_file` or `long_query_time`
/// (value already normalised), before it is stored: opens or closes the
/// file, refuses what cannot take effect. `global`: SET GLOBAL.
pub fn on_set(name: &str, value: &Value, global: bool) -> Result<(), SqlError> {
    let text = crate::engine::catalog::value_text(value);
    match name {
        "slow_query_log" if global => {
            if text == "0" {
                ON.store(false, Ordering::SeqCst);
                *lock_file() = None;
                return Ok(());
            }
            let path = file().ok_or_else(|| {
                SqlError::unsupported(
                    "SET GLOBAL slow_query_log = ON with no slow_query_log_file: set slow_query_log_file first",
                )
            })?;
            let f = open(&path).map_err(|why| cannot_set(name, "ON", why))?;
            *lock_file() = Some(f);
            ON.store(true, Ordering::SeqCst);
        }
        "slow_query_log_file" if global => {
            if text.is_empty() {
                if ON.load(Ordering::SeqCst) {
                    return Err(cannot_set(name, "", "the slow query log is on".into()));
                }
                return Ok(());
            }
            // As MySQL: the new file is opened at once (and refused if it
            // cannot be) when the log is on.
            let f = open(&text).map_err(|why| cannot_set(name, &text, why))?;
            if ON.load(Ordering::SeqCst) {
                *lock_file() = Some(f);
            }
        }
        "long_query_time" if !text.trim().parse::<f64>().is_ok_and(|t| t.is_finite()) => {
            return Err(crate::engine::error_map::wrong_type_for_var(name));
        }
        _ => {}
    }
    Ok(())
}

/// The session's long_query_time (MySQL: negative counts as 0).
fn long_query_time(s: &Session) -> Duration {
    let v = crate::engine::vars::get_system_var(s, "long_query_time", false);
    let secs = v.map(|v| crate::engine::catalog::value_text(&v)).and_then(|t| t.trim().parse::<f64>().ok());
    Duration::try_from_secs_f64(secs.unwrap_or(10.0).max(0.0)).unwrap_or(Duration::MAX)
}

/// A statement of `s` ended after `took`, having sent `rows_sent` rows:
/// logged if the log is on and it took long_query_time or more.
pub fn record(s: &Session, sql: &str, took: Duration, rows_sent: u64) {
    if !ON.load(Ordering::Relaxed) || took < long_query_time(s) {
        return;
    }
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let host = s.entry.host();
    let mut entry = format!(
        "# Time: {}\n# User@Host: {user}[{user}] @ {host} [{host}]  Id: {id:>7}\n# Query_time: {:.6}  Lock_time: 0.000000 Rows_sent: {rows_sent}\n",
        utc_timestamp(now),
        took.as_secs_f64(),
        user = s.user,
        id = s.connection_id,
    );
    if let Some(db) = &s.current_db {
        entry.push_str(&format!("use {db};\n"));
    }
    let sql = sql.trim_end();
    let end = if sql.ends_with(';') { "" } else { ";" };
    entry.push_str(&format!("SET timestamp={};\n{sql}{end}\n", now.as_secs()));
    if let Some(f) = lock_file().as_mut() {
        if let Err(e) = f.write_all(entry.as_bytes()) {
            tracing::warn!("sqld: cannot write the slow query log: {e}");
        }
    }
}

/// `2026-11-28T21:50:00.123456Z` for a time since the Unix epoch.
fn utc_timestamp(t: Duration) -> String {
    let secs = t.as_secs();
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Civil date from days since 1970-01-01 (proleptic Gregorian), by
    // 400-year eras counted from 0000-03-01.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        t.subsec_micros()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_civil_dates() {
        assert_eq!(utc_timestamp(Duration::ZERO), "1970-01-01T00:00:00.000000Z");
        // 2000-02-29 (a leap day) 12:34:56.789
        assert_eq!(utc_timestamp(Duration::from_millis(951_827_696_789)), "2000-02-29T12:34:56.789000Z");
        assert_eq!(utc_timestamp(Duration::from_secs(1_795_000_000)), "2026-11-18T11:06:40.000000Z");
    }
}
