//! The SQL functions GET_LOCK, RELEASE_LOCK, RELEASE_ALL_LOCKS, IS_FREE_LOCK,
//! IS_USED_LOCK and SLEEP, and how a statement waits in them without
//! blocking the SQL node's thread. The lock table is `user_locks` (which
//! also says why the locks are local to this SQL node). Owner: query
//! engineer.
//!
//! Argument rules, as MySQL 8.0 (strict mode, the only mode here):
//! * a lock name is NULL or empty: 3057; more than 64 characters: 4163; a
//!   name is compared without regard to letter case;
//! * GET_LOCK's timeout is whole seconds (rounded; NULL is 0); a negative
//!   one waits without end;
//! * SLEEP takes fractional seconds; NULL or negative: 1210.
//!
//! Waiting. Expressions are evaluated synchronously (`expr::eval`), and a
//! session shares its thread with the others, so a call that must wait can
//! not wait where it is evaluated. Instead it records the wait in the
//! evaluation context and fails the evaluation; the driver
//! (`eval_waiting`, used for the select list and WHERE of a SELECT, and so
//! for DO) awaits the wait (a timer, a lock hand-off or a KILL), then
//! evaluates the row again. In that replay each lock function called before
//! returns the value it returned the first time (they are remembered in
//! call order), and the one that waited returns the wait's outcome, so every
//! side effect happens once and lazy operators (IF, CASE, AND, OR) choose as
//! they did. Elsewhere (INSERT values, UPDATE SET, HAVING, ...) these
//! functions work as long as they need not wait; one that would wait there
//! fails with 1235.
//!
//! KILL QUERY (and KILL CONNECTION) ends a GET_LOCK wait with 1317. A SLEEP
//! it interrupts returns 1, as MySQL's: a statement that reads no table
//! then returns its row; one that reads a table ends with 1317 (MySQL's
//! "SLEEP() is only part of a larger query").

use crate::engine::expr::value::{to_f64, to_i64, to_text};
use crate::engine::expr::EvalCtx;
use crate::engine::functions::Func;
use crate::engine::user_locks::{Released, UserLocks, MAX_NAME_CHARS};
use crate::session_registry::{Kill, SessionEntry, WaitState};
use crate::types::SqlError;
use norr_signals::Value;
use std::time::Duration;

/// A bound on the waits of one row's evaluation (each one is a call of one
/// of these functions in the expressions, evaluated once per row).
const MAX_WAITS_PER_ROW: usize = 10_000;

/// What an evaluation stopped at.
#[derive(Debug, Clone, PartialEq)]
enum Wait {
    /// GET_LOCK for a lock another session holds.
    Lock { name: String, timeout: Option<Duration> },
    /// SLEEP (None: longer than a Duration holds, i.e. without end).
    Sleep(Option<Duration>),
}

/// The lock-function state of one statement's evaluation (`EvalCtx::waits`).
#[derive(Debug, Default)]
pub struct Replay {
    /// Set while `eval_waiting` drives the evaluation: only then are results
    /// remembered and may a call wait.
    active: bool,
    /// Results of the lock functions called so far for the current row.
    memo: Vec<Value>,
    /// Next `memo` entry a replayed call returns.
    cursor: usize,
    /// The wait the last evaluation stopped at.
    pending: Option<Wait>,
    /// A SLEEP of this statement was interrupted by a kill.
    pub sleep_interrupted: bool,
}

/// True for the functions of this module.
pub fn is_lock_fn(f: Func) -> bool {
    matches!(
        f,
        Func::GetLock | Func::ReleaseLock | Func::ReleaseAllLocks | Func::IsFreeLock | Func::IsUsedLock | Func::Sleep
    )
}

/// True for the functions that may wait (the plan tests this once, so that
/// statements without them never go through `eval_waiting`).
pub fn may_wait(f: Func) -> bool {
    matches!(f, Func::GetLock | Func::Sleep)
}

/// True if evaluating `e` may call GET_LOCK or SLEEP.
pub fn expr_may_wait(e: &crate::engine::expr::CExpr) -> bool {
    use crate::engine::expr::CExpr;
    match e {
        CExpr::Func(f, _) if may_wait(*f) => true,
        _ => {
            let mut r = false;
            crate::engine::expr::for_each_child(e, &mut |c| r = r || expr_may_wait(c));
            r
        }
    }
}

/// The first of these functions an expression (as parsed) calls, by its
/// lower-case name: DEFAULT expressions may not call them (3770).
pub fn called_in(e: &sqlparser::ast::Expr) -> Option<&'static str> {
    let mut found = None;
    let _ = sqlparser::ast::visit_expressions(e, |x| {
        if let sqlparser::ast::Expr::Function(f) = x {
            let name = f.name.0.last().map(|p| p.to_string().to_ascii_lowercase()).unwrap_or_default();
            found = ["get_lock", "release_lock", "release_all_locks", "is_free_lock", "is_used_lock", "sleep"]
                .into_iter()
                .find(|n| *n == name);
        }
        if found.is_some() {
            std::ops::ControlFlow::Break(())
        } else {
            std::ops::ControlFlow::Continue(())
        }
    });
    found
}

/// 1235: a wait where no driver can do it.
fn cannot_wait_here() -> SqlError {
    SqlError::unsupported("GET_LOCK() or SLEEP() that has to wait outside the select list, WHERE and DO")
}

/// 3057 ER_USER_LOCK_WRONG_NAME.
fn wrong_name(shown: &str) -> SqlError {
    SqlError::new(
        3057,
        "42000",
        format!(
            "Incorrect user-level lock name '{}'. The name is empty, NULL, or can not be expressed in the current \
             character-set.",
            shown.chars().take(192).collect::<String>()
        ),
    )
}

/// The key a lock name is held under: the name in lower case. 3057 for NULL,
/// empty, or not expressible in utf8mb3 (MySQL's system character set);
/// 4163 ER_USER_LOCK_OVERLONG_NAME over 64 characters.
pub fn lock_name(v: &Value) -> Result<String, SqlError> {
    let Some(bytes) = to_text(v) else { return Err(wrong_name("NULL")) };
    if bytes.is_empty() {
        return Err(wrong_name(""));
    }
    let Ok(s) = std::str::from_utf8(&bytes) else { return Err(wrong_name(&String::from_utf8_lossy(&bytes))) };
    if s.chars().any(|c| c as u32 > 0xFFFF) {
        return Err(wrong_name(s));
    }
    if s.chars().count() > MAX_NAME_CHARS {
        return Err(SqlError::new(
            4163,
            "42000",
            format!(
                "User-level lock name '{}' should not exceed {MAX_NAME_CHARS} characters.",
                s.chars().take(192).collect::<String>()
            ),
        ));
    }
    // One character for one (utf8mb3_general_ci folds that way), so the
    // length limit holds for the key too.
    Ok(s.chars()
        .map(|c| {
            let mut l = c.to_lowercase();
            match (l.next(), l.next()) {
                (Some(x), None) => x,
                _ => c,
            }
        })
        .collect())
}

/// GET_LOCK's timeout: whole seconds, NULL as 0, negative as no end (MySQL
/// caps at INT_MAX32 seconds, which is no end either).
fn lock_timeout(v: &Value, ctx: &mut EvalCtx) -> Option<Duration> {
    let secs = to_i64(v, &mut ctx.warnings).unwrap_or(0);
    if secs < 0 {
        None
    } else {
        Some(Duration::from_secs(secs.min(i32::MAX as i64) as u64))
    }
}

/// The lock table and the session of a context (internal contexts, with no
/// session, have neither).
fn session<'c>(ctx: &'c EvalCtx<'_>) -> Result<(&'c SessionEntry, &'c UserLocks), SqlError> {
    let e = ctx.stop.as_deref().ok_or_else(|| SqlError::internal("named locks outside a session"))?;
    let l = e.user_locks().ok_or_else(|| SqlError::internal("named locks without an engine"))?;
    Ok((e, l))
}

/// Evaluate lock function `f` (called by `functions::call` before its NULL
/// handling: these functions have their own).
pub fn call(f: Func, args: &[Value], ctx: &mut EvalCtx) -> Result<Value, SqlError> {
    let w = &mut ctx.waits;
    if w.active && w.cursor < w.memo.len() {
        w.cursor += 1;
        return Ok(w.memo[w.cursor - 1].clone());
    }
    let v = match run_now(f, args, ctx)? {
        Ok(v) => v,
        Err(wait) => {
            if ctx.waits.active {
                ctx.waits.pending = Some(wait);
            }
            return Err(cannot_wait_here());
        }
    };
    let w = &mut ctx.waits;
    if w.active {
        w.memo.push(v.clone());
        w.cursor += 1;
    }
    Ok(v)
}

/// The function's value now, or the wait it needs.
fn run_now(f: Func, args: &[Value], ctx: &mut EvalCtx) -> Result<Result<Value, Wait>, SqlError> {
    let arg = |i: usize| args.get(i).unwrap_or(&Value::Null);
    Ok(Ok(match f {
        Func::GetLock => {
            let name = lock_name(arg(0))?;
            let timeout = lock_timeout(arg(1), ctx);
            let (e, locks) = session(ctx)?;
            if locks.try_acquire(e.id, &name) {
                Value::Int(1)
            } else if timeout.is_some_and(|t| t.is_zero()) {
                Value::Int(0)
            } else {
                return Ok(Err(Wait::Lock { name, timeout }));
            }
        }
        Func::ReleaseLock => {
            let name = lock_name(arg(0))?;
            let (e, locks) = session(ctx)?;
            match locks.release(e.id, &name) {
                Released::Yes => Value::Int(1),
                Released::NotOwner => Value::Int(0),
                Released::NotHeld => Value::Null,
            }
        }
        Func::ReleaseAllLocks => {
            let (e, locks) = session(ctx)?;
            Value::Int(locks.release_all(e.id).min(i64::MAX as u64) as i64)
        }
        Func::IsFreeLock => {
            let name = lock_name(arg(0))?;
            Value::Int(session(ctx)?.1.owner(&name).is_none() as i64)
        }
        Func::IsUsedLock => {
            let name = lock_name(arg(0))?;
            session(ctx)?.1.owner(&name).map(|id| Value::UInt(id as u64)).unwrap_or(Value::Null)
        }
        Func::Sleep => {
            let secs = match arg(0) {
                Value::Null => None,
                v => to_f64(v, &mut ctx.warnings),
            };
            let secs = match secs {
                Some(s) if s >= 0.0 => s,
                // NULL, negative (or NaN): an error in strict mode.
                _ => return Err(SqlError::new(1210, "HY000", "Incorrect arguments to sleep.")),
            };
            // MySQL returns at once below 10 microseconds.
            if secs < 0.000_01 {
                Value::Int(0)
            } else if ctx.stop.as_deref().is_some_and(|e| e.kill_requested() != Kill::None) {
                // Already killed (an earlier row's SLEEP saw it): no wait.
                ctx.waits.sleep_interrupted = true;
                Value::Int(1)
            } else {
                return Ok(Err(Wait::Sleep(Duration::try_from_secs_f64(secs).ok())));
            }
        }
        _ => return Err(SqlError::internal("not a lock function")),
    }))
}

/// Evaluate one row's expressions with `f`, doing the waits its GET_LOCK and
/// SLEEP calls need (see the module comment). Errors of the waits (1317,
/// 3058) are the evaluation's.
pub async fn eval_waiting<'p, T>(
    ctx: &mut EvalCtx<'p>,
    mut f: impl FnMut(&mut EvalCtx<'p>) -> Result<T, SqlError>,
) -> Result<T, SqlError> {
    let w = &mut ctx.waits;
    w.active = true;
    w.memo.clear();
    w.cursor = 0;
    w.pending = None;
    let warnings_before = ctx.warnings.list.len();
    let r = loop {
        let r = f(ctx);
        let Some(wait) = ctx.waits.pending.take() else { break r };
        debug_assert!(r.is_err(), "a call that waits fails the evaluation");
        if ctx.waits.memo.len() >= MAX_WAITS_PER_ROW {
            break Err(SqlError::internal("too many waits in one row"));
        }
        match wait_for(ctx, wait).await {
            Ok(v) => ctx.waits.memo.push(v),
            Err(e) => break Err(e),
        }
        ctx.waits.cursor = 0;
        // The replay pushes the warnings of the calls before the wait again.
        ctx.warnings.list.truncate(warnings_before);
    };
    ctx.waits.active = false;
    r
}

/// Shows the session's wait in PROCESSLIST while it lasts.
struct Showing<'a>(&'a SessionEntry);

impl Drop for Showing<'_> {
    fn drop(&mut self) {
        self.0.set_wait(WaitState::None);
    }
}

async fn wait_for(ctx: &mut EvalCtx<'_>, w: Wait) -> Result<Value, SqlError> {
    let entry = ctx.stop.clone().ok_or_else(|| SqlError::internal("a wait outside a session"))?;
    match w {
        Wait::Lock { name, timeout } => {
            let locks = entry.user_locks().ok_or_else(|| SqlError::internal("named locks without an engine"))?;
            entry.set_wait(WaitState::UserLock);
            let _showing = Showing(&entry);
            let got = locks.acquire(&entry, &name, timeout).await?;
            Ok(Value::Int(got as i64))
        }
        Wait::Sleep(d) => {
            entry.set_wait(WaitState::UserSleep);
            let _showing = Showing(&entry);
            let timer = async {
                match d {
                    Some(d) => tokio::time::sleep(d).await,
                    None => std::future::pending().await,
                }
            };
            let killed = tokio::select! {
                _ = timer => false,
                _ = entry.wait_kill(Kill::Query) => true,
            };
            if killed {
                ctx.waits.sleep_interrupted = true;
            }
            Ok(Value::Int(killed as i64))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_folded() {
        assert_eq!(lock_name(&Value::str("MyLock")).unwrap(), "mylock");
        assert_eq!(lock_name(&Value::str("ÄÖ x ")).unwrap(), "äö x ", "trailing spaces count");
        assert_eq!(lock_name(&Value::Int(12)).unwrap(), "12");
        assert_eq!(lock_name(&Value::Null).unwrap_err().code, 3057);
        assert_eq!(lock_name(&Value::str("")).unwrap_err().code, 3057);
        assert_eq!(lock_name(&Value::Bytes(vec![0xff, 0xfe])).unwrap_err().code, 3057);
        assert_eq!(lock_name(&Value::str("\u{1F600}")).unwrap_err().code, 3057, "not in utf8mb3");
        assert!(lock_name(&Value::str(&"é".repeat(64))).is_ok(), "64 characters, 128 bytes");
        let e = lock_name(&Value::str(&"x".repeat(65))).unwrap_err();
        assert_eq!((e.code, e.sqlstate), (4163, "42000"));
    }

    #[test]
    fn timeouts_round_and_negative_waits_without_end() {
        let mut ctx = EvalCtx::new(&[]);
        assert_eq!(lock_timeout(&Value::Null, &mut ctx), Some(Duration::ZERO));
        assert_eq!(lock_timeout(&Value::Double(1.6), &mut ctx), Some(Duration::from_secs(2)));
        assert_eq!(lock_timeout(&Value::Int(-1), &mut ctx), None);
        assert_eq!(lock_timeout(&Value::Int(i64::MAX), &mut ctx), Some(Duration::from_secs(i32::MAX as u64)));
    }

    #[test]
    fn without_a_driver_a_wait_is_refused_and_nothing_is_remembered() {
        let mut ctx = EvalCtx::new(&[]);
        let e = crate::session_registry::SessionEntry::new(9, "u");
        e.set_user_locks(std::sync::Arc::new(UserLocks::default()));
        ctx.stop = Some(e.clone());
        assert_eq!(call(Func::Sleep, &[Value::Int(0)], &mut ctx).unwrap(), Value::Int(0));
        assert_eq!(call(Func::Sleep, &[Value::Int(-1)], &mut ctx).unwrap_err().code, 1210);
        assert_eq!(call(Func::Sleep, &[Value::Null], &mut ctx).unwrap_err().code, 1210);
        assert_eq!(call(Func::Sleep, &[Value::Int(5)], &mut ctx).unwrap_err().code, 1235);
        assert_eq!(call(Func::GetLock, &[Value::str("a"), Value::Int(0)], &mut ctx).unwrap(), Value::Int(1));
        assert_eq!(call(Func::IsUsedLock, &[Value::str("A")], &mut ctx).unwrap(), Value::UInt(9));
        assert!(ctx.waits.memo.is_empty() && ctx.waits.pending.is_none());
    }
}
