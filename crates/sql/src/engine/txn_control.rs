//! Transactions of a SQL session on native transactions. Owner: catalog engineer.
//!
//! # For the query engineer (DML and locking reads)
//!
//! Every statement that touches rows through a transaction does:
//!
//! ```text
//! let out = txn_control::with_txn(engine, session, async |txn: &mut Transaction| {
//!     txn.execute(ops, ExecType::NoCommit).await.map_err(|e| error_map::from_client(e, &ctx))?;
//!     Ok(QueryOutput::ok(n))
//! }).await?;
//! ```
//!
//! or, when the statement needs the session while it runs, the two halves:
//!
//! ```text
//! txn_control::begin_statement(engine, session);          // opens session.txn if needed
//! let res = async { let txn = session.txn.as_mut().unwrap(); ... }.await;
//! let out = txn_control::end_statement(engine, session, res).await?;
//! ```
//!
//! Rules:
//! * Always `ExecType::NoCommit`; `end_statement` commits in autocommit mode
//!   (one native transaction per statement) and leaves the transaction open
//!   inside BEGIN ... COMMIT or with autocommit=0.
//! * If a native call fails, the node has aborted the whole transaction
//!   (NDB semantics). `end_statement` sees `Transaction::is_finished()` and
//!   marks the session's transaction rolled back: later statements start a new
//!   one. A SQL-level error that never reached the node (bad value, unknown
//!   column) keeps an explicit transaction open, as in MySQL.
//! * Plain SELECTs outside a transaction may scan with `engine.client().scan(..)`
//!   (committed read, no transaction). Inside a transaction
//!   (`session.in_transaction` or `session.txn.is_some()`), read through the
//!   session transaction so the statement sees the transaction's own writes;
//!   `FOR UPDATE` / `FOR SHARE` always go through `with_txn`.
//!
//! Savepoints (SAVEPOINT, ROLLBACK TO, RELEASE) are the native transaction's
//! (`Transaction::savepoint` / `rollback_to`): the data node undoes the rows,
//! this layer only keeps the names. Row locks taken after a savepoint stay
//! held after rolling back to it, as in InnoDB.

use crate::engine::error_map;
use crate::engine::Engine;
use crate::types::{Session, SqlError};
use norr_client::Transaction;
use norr_signals::ExecType;

/// True if the session has an open SQL transaction (explicit, or implicit with
/// autocommit=0 after the first statement).
pub fn in_explicit_txn(s: &Session) -> bool {
    s.in_transaction
}

/// Make sure `s.txn` holds a native transaction for the statement about to run.
pub fn begin_statement(e: &Engine, s: &mut Session) {
    if !s.autocommit {
        s.in_transaction = true;
    }
    if s.txn.as_ref().is_some_and(|t| t.is_finished()) {
        s.txn = None;
        s.savepoints.clear();
    }
    if s.txn.is_none() {
        s.txn = Some(new_txn(e, s));
    } else {
        // A SET innodb_lock_wait_timeout inside the transaction counts from
        // the next statement, as MySQL reads it at each wait.
        let wait = row_lock_wait(s);
        if let Some(t) = s.txn.as_mut() {
            t.set_lock_wait_timeout(wait);
        }
    }
}

/// A native transaction for the session's statements, sent with the
/// session's row-lock wait (`row_lock_wait`).
pub fn new_txn(e: &Engine, s: &Session) -> Transaction {
    let mut t = e.client().begin();
    if let Some(d) = row_lock_wait(s) {
        t.set_lock_wait_timeout(Some(d));
    }
    t
}

/// How long the session's row locks wait: `innodb_lock_wait_timeout`
/// seconds once it was SET for the session or globally; before that None,
/// and the data nodes' `lock_wait_timeout_ms` applies (1.2 s by default, as
/// NDB's TransactionDeadlockDetectionTimeout: with no deadlock detector, a
/// deadlock between sessions lasts that long, so MySQL's 50 s default would
/// stall deadlocked sessions 50 s). `lock_wait_timeout` stays the bound of
/// table locks (LOCK TABLES, FLUSH TABLES WITH READ LOCK), as in MySQL.
pub fn row_lock_wait(s: &Session) -> Option<std::time::Duration> {
    s.row_lock_wait
}

/// The session's transaction (begun by `begin_statement`).
pub fn txn_mut(s: &mut Session) -> Result<&mut Transaction, SqlError> {
    s.txn.as_mut().ok_or_else(|| SqlError::internal("no transaction: call begin_statement first"))
}

/// Finish a statement: commit in autocommit mode, or keep the transaction
/// open; after a failure, drop the transaction if the node aborted it.
pub async fn end_statement<T>(e: &Engine, s: &mut Session, res: Result<T, SqlError>) -> Result<T, SqlError> {
    let _ = e;
    let explicit = s.in_transaction;
    match res {
        Ok(v) => {
            if !explicit {
                if let Some(t) = s.txn.take() {
                    commit_txn(s, t).await?;
                }
            }
            Ok(v)
        }
        Err(err) => {
            let aborted = s.txn.as_ref().is_none_or(|t| t.is_finished());
            if !explicit {
                if let Some(t) = s.txn.take() {
                    let _ = t.rollback().await;
                }
            } else if aborted {
                // NDB: the node rolled back the whole transaction.
                s.txn = None;
                s.in_transaction = false;
                s.savepoints.clear();
            }
            Err(err)
        }
    }
}

/// Run `f` with the session's transaction (see the module doc).
pub async fn with_txn<T, F>(e: &Engine, s: &mut Session, f: F) -> Result<T, SqlError>
where
    F: AsyncFnOnce(&mut Transaction) -> Result<T, SqlError>,
{
    begin_statement(e, s);
    let res = match s.txn.as_mut() {
        Some(t) => f(t).await,
        None => Err(SqlError::internal("no transaction")),
    };
    end_statement(e, s, res).await
}

/// COMMIT (also the implicit commit before DDL, BEGIN, SET autocommit=1).
pub async fn commit(s: &mut Session) -> Result<(), SqlError> {
    s.in_transaction = false;
    s.txn_read_only = None;
    s.savepoints.clear();
    if let Some(t) = s.txn.take() {
        commit_txn(s, t).await?;
    }
    Ok(())
}

/// How a commit of the session's writes ends: with `norr_commit_wait =
/// 'disk'`, once the commit's global checkpoint is on disk.
pub fn commit_exec(s: &Session) -> ExecType {
    if crate::engine::vars::commit_waits_for_disk(s) {
        ExecType::CommitDisk
    } else {
        ExecType::Commit
    }
}

/// Keep the GCI of a commit that wrote (`@@norr_last_commit_gci`). Also
/// after a `CommitDiskTimeout` error: the transaction did commit.
pub fn note_commit(s: &mut Session, t: &Transaction) {
    if let Some(gci) = t.commit_gci().filter(|g| *g > 0 && t.wrote()) {
        s.last_commit_gci = gci;
    }
}

/// Commit `t` (the session's transaction) as the session asks.
async fn commit_txn(s: &mut Session, mut t: Transaction) -> Result<(), SqlError> {
    if t.is_finished() {
        return Ok(());
    }
    // A read-only transaction has nothing to put on disk.
    let exec = if t.wrote() { commit_exec(s) } else { ExecType::Commit };
    let res = t.execute(Vec::new(), exec).await;
    note_commit(s, &t);
    res.map(|_| ()).map_err(error_map::from_client_plain)
}

/// ROLLBACK.
pub async fn rollback(s: &mut Session) -> Result<(), SqlError> {
    s.in_transaction = false;
    s.txn_read_only = None;
    s.savepoints.clear();
    if let Some(t) = s.txn.take() {
        t.rollback().await.map_err(error_map::from_client_plain)?;
    }
    Ok(())
}

/// BEGIN / START TRANSACTION: commits an open transaction first, as MySQL.
pub async fn begin(s: &mut Session) -> Result<(), SqlError> {
    commit(s).await?;
    s.in_transaction = true;
    Ok(())
}

/// Whether the statement about to run is in a read-only transaction: the
/// explicit transaction's mode (or the autocommitted statement's, after SET
/// TRANSACTION), else the session's @@transaction_read_only.
pub fn read_only(s: &Session) -> bool {
    match s.txn_read_only {
        Some(ro) if s.in_transaction || s.txn_read_only_stmt => ro,
        _ => session_read_only(s),
    }
}

/// A statement on tables is about to start a transaction while SET
/// TRANSACTION READ ONLY | READ WRITE (no SESSION) waits for the next one.
/// With autocommit off it opens the transaction, which keeps the mode until
/// it ends; with autocommit on the statement is the whole transaction, so
/// the mode is this statement's only (`end_of_statement` drops it), and the
/// next statement is back to the session's @@transaction_read_only.
pub fn start_next_txn_mode(s: &mut Session) {
    let Some(ro) = s.next_txn_read_only.take() else { return };
    s.txn_read_only = Some(ro);
    if s.autocommit {
        s.txn_read_only_stmt = true;
    } else {
        s.in_transaction = true;
    }
}

/// After every statement: an autocommitted statement's own mode ends with it.
pub fn end_of_statement(s: &mut Session) {
    if s.txn_read_only_stmt {
        s.txn_read_only_stmt = false;
        if !s.in_transaction {
            s.txn_read_only = None;
        }
    }
}

/// The session's @@transaction_read_only: what a transaction is after an
/// implicit commit (which ends any READ ONLY / READ WRITE of its own).
pub fn session_read_only(s: &Session) -> bool {
    matches!(s.vars.get("transaction_read_only"), Some(v) if v.as_i64().unwrap_or(0) != 0)
}

/// 1792 ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION.
pub fn read_only_refusal() -> SqlError {
    SqlError::new(1792, "25006", "Cannot execute statement in a READ ONLY transaction.")
}

/// 1305 ER_SP_DOES_NOT_EXIST, as MySQL words it for savepoints.
fn no_such_savepoint(name: &str) -> SqlError {
    SqlError::new(1305, "42000", format!("SAVEPOINT {name} does not exist"))
}

fn savepoint_index(s: &Session, name: &str) -> Option<usize> {
    s.savepoints.iter().position(|(n, _)| n.to_lowercase() == name.to_lowercase())
}

/// SAVEPOINT name. Outside a transaction with autocommit on, MySQL accepts
/// it and keeps nothing (the statement's implicit transaction ends with it).
pub async fn savepoint(e: &Engine, s: &mut Session, name: &str) -> Result<(), SqlError> {
    if !s.in_transaction && s.autocommit {
        return Ok(());
    }
    begin_statement(e, s);
    let res = match s.txn.as_mut() {
        Some(t) => t.savepoint().await.map_err(error_map::from_client_plain),
        None => Err(SqlError::internal("no transaction")),
    };
    let sp = end_statement(e, s, res).await?;
    // A second savepoint of the same name replaces the first.
    if let Some(i) = savepoint_index(s, name) {
        s.savepoints.remove(i);
    }
    s.savepoints.push((name.to_string(), sp));
    Ok(())
}

/// ROLLBACK [WORK] TO [SAVEPOINT] name: undo what the transaction did since,
/// keep it open and keep the savepoint; those set after it are forgotten.
pub async fn rollback_to(e: &Engine, s: &mut Session, name: &str) -> Result<(), SqlError> {
    let Some(i) = savepoint_index(s, name) else {
        return Err(no_such_savepoint(name));
    };
    let sp = s.savepoints[i].1;
    // A savepoint exists only inside a transaction: this keeps it open.
    debug_assert!(s.in_transaction, "savepoints outside a transaction");
    let res = match s.txn.as_mut() {
        Some(t) => t.rollback_to(sp).await.map_err(error_map::from_client_plain),
        None => Err(SqlError::internal("savepoint without a transaction")),
    };
    end_statement(e, s, res).await?;
    s.savepoints.truncate(i + 1);
    Ok(())
}

/// RELEASE SAVEPOINT name: forget it and those set after it (nothing to
/// tell the data node).
pub fn release_savepoint(s: &mut Session, name: &str) -> Result<(), SqlError> {
    let Some(i) = savepoint_index(s, name) else {
        return Err(no_such_savepoint(name));
    };
    s.savepoints.truncate(i);
    Ok(())
}

/// @@transaction_isolation's spelling of an isolation level.
pub fn isolation_name(l: &sqlparser::ast::TransactionIsolationLevel) -> &'static str {
    use sqlparser::ast::TransactionIsolationLevel as L;
    match l {
        L::ReadUncommitted => "READ-UNCOMMITTED",
        L::RepeatableRead => "REPEATABLE-READ",
        L::Serializable => "SERIALIZABLE",
        _ => "READ-COMMITTED",
    }
}

/// `SET TRANSACTION ISOLATION LEVEL <level>` (no SESSION or GLOBAL): the
/// next transaction's level only, which leaves @@transaction_isolation as it
/// is. Every transaction runs at READ-COMMITTED, so there is nothing to keep
/// for it; another level gets the note that it is not provided.
pub fn next_txn_isolation(s: &mut Session, level: &str) {
    if level != "READ-COMMITTED" {
        s.warnings.push(crate::types::Warning {
            level: crate::types::WarningLevel::Note,
            code: 1235,
            message: format!("NorrDB runs every transaction at READ-COMMITTED; {level} is not provided"),
        });
    }
}

/// `SET @@transaction_isolation = value` (no scope word): the value is
/// checked as the variable's (1231), then it is the next transaction's
/// level only, as `SET TRANSACTION ISOLATION LEVEL` (1568 inside a
/// transaction).
pub fn next_txn_isolation_var(s: &mut Session, var: &str, value: &norr_signals::Value) -> Result<(), SqlError> {
    let text = match value {
        norr_signals::Value::Null => None,
        norr_signals::Value::Int(i) => Some(i.to_string()),
        norr_signals::Value::UInt(u) => Some(u.to_string()),
        v => v.as_bytes().map(|b| String::from_utf8_lossy(b).into_owned()),
    };
    let level = text
        .as_deref()
        .and_then(crate::engine::vars::isolation)
        .ok_or_else(|| crate::engine::error_map::wrong_value_for_var(var, text.as_deref().unwrap_or("NULL")))?;
    if s.in_transaction {
        return Err(SqlError::new(
            1568,
            "25001",
            "Transaction characteristics can't be changed while a transaction is in progress",
        ));
    }
    next_txn_isolation(s, level);
    Ok(())
}

/// `SET GLOBAL TRANSACTION <modes>` as the assignments to the global
/// variables it sets (`@@global.transaction_isolation`,
/// `@@global.transaction_read_only`), which new sessions start from.
pub fn global_characteristics(modes: &[sqlparser::ast::TransactionMode]) -> String {
    use sqlparser::ast::{TransactionAccessMode, TransactionMode};
    let sets: Vec<String> = modes
        .iter()
        .map(|m| match m {
            TransactionMode::IsolationLevel(l) => {
                format!("@@global.transaction_isolation = '{}'", isolation_name(l))
            }
            TransactionMode::AccessMode(a) => {
                format!("@@global.transaction_read_only = {}", matches!(a, TransactionAccessMode::ReadOnly) as u8)
            }
        })
        .collect();
    format!("SET {}", sets.join(", "))
}
