//! max_execution_time: a SELECT that runs longer than its limit is stopped
//! with 3024, as in MySQL. The limit is the statement's
//! `/*+ MAX_EXECUTION_TIME(n) */` hint, else the session's
//! @@max_execution_time (milliseconds; 0: none). It applies to top-level
//! SELECTs only (MySQL: read-only SELECTs; statements that change rows run
//! to their end).
//!
//! The stop is KILL QUERY's (`SessionEntry::time_out`): the statement ends
//! at its next check (`exec::Turn`, a scan's next batch, a lock wait) and is
//! rolled back as a killed one is; this module turns its 1317 into 3024.

use crate::engine::vars;
use crate::types::{Session, SqlError};
use norr_signals::Value;
use std::future::Future;
use std::time::Duration;

/// MySQL's ER_QUERY_TIMEOUT.
pub fn timed_out() -> SqlError {
    SqlError::new(3024, "HY000", "Query execution was interrupted, maximum statement execution time exceeded")
}

/// The value of a `MAX_EXECUTION_TIME(n)` optimizer hint right after the
/// leading SELECT of `sql`, if it has one (MySQL reads hints only there).
pub fn hint(sql: &str) -> Option<u64> {
    let rest = sql.trim_start();
    let kw = rest.get(..6)?;
    if !kw.eq_ignore_ascii_case("select") {
        return None;
    }
    let rest = rest[6..].trim_start().strip_prefix("/*+")?;
    let body = &rest[..rest.find("*/")?];
    let upper = body.to_ascii_uppercase();
    let at = upper.find("MAX_EXECUTION_TIME")?;
    let args = body[at + "MAX_EXECUTION_TIME".len()..].trim_start().strip_prefix('(')?;
    let digits = args[..args.find(')')?].trim();
    digits.parse::<u64>().ok()
}

/// The limit of the statement about to run, if it is a SELECT and has one.
pub fn limit(s: &mut Session, select: bool) -> Option<Duration> {
    let hinted = s.exec_time_hint.take();
    if !select {
        return None;
    }
    let ms = match hinted {
        Some(ms) => ms,
        None => match vars::get_system_var(s, "max_execution_time", false) {
            Some(Value::Int(n)) => n.max(0) as u64,
            Some(Value::UInt(n)) => n,
            _ => 0,
        },
    };
    (ms > 0).then_some(Duration::from_millis(ms))
}

/// Runs `run` (the statement of session `entry`) with the time limit `d`.
pub async fn bounded<T>(
    entry: &crate::session_registry::SessionEntry,
    d: Duration,
    run: impl Future<Output = Result<T, SqlError>>,
) -> Result<T, SqlError> {
    let mut run = std::pin::pin!(run);
    let r = tokio::select! {
        biased;
        r = run.as_mut() => r,
        _ = tokio::time::sleep(d) => {
            entry.time_out();
            run.await
        }
    };
    // A statement that ended on its own just as the limit passed keeps its
    // result; one the stop ended reports the limit.
    match (entry.take_time_out(), r) {
        (true, Err(e)) if e.code == 1317 => Err(timed_out()),
        (_, r) => r,
    }
}

#[cfg(test)]
mod tests {
    use super::hint;

    #[test]
    fn reads_the_hint_after_select_only() {
        assert_eq!(hint("SELECT /*+ MAX_EXECUTION_TIME(1000) */ * FROM t"), Some(1000));
        assert_eq!(hint("  select /*+ BKA(t) max_execution_time ( 5 ) */ 1"), Some(5));
        assert_eq!(hint("SELECT 1 /*+ MAX_EXECUTION_TIME(1000) */"), None);
        assert_eq!(hint("UPDATE /*+ MAX_EXECUTION_TIME(1000) */ t SET a = 1"), None);
        assert_eq!(hint("SELECT /*+ MAX_EXECUTION_TIME(x) */ 1"), None);
        assert_eq!(hint("SELECT /*+ MAX_EXECUTION_TIME(10"), None);
        assert_eq!(hint("SELECT"), None);
        assert_eq!(hint("SÉLECT 1"), None);
    }
}
