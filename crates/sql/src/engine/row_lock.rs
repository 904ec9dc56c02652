//! SELECT's locking clauses: `FOR UPDATE` / `FOR SHARE` (`LOCK IN SHARE MODE`
//! is rewritten to `FOR SHARE` before parsing), each with `NOWAIT` or
//! `SKIP LOCKED` and an optional `OF` list naming the tables it locks, as
//! MySQL 8.0 has them.
//!
//! A query block's lock reaches every table access of the block (key and
//! unique lookups, IN-list batches, join lookups, range and full scans) as
//! `TableAccess::lock`; the data node applies the wait policy per row.

use crate::engine::query::{SelectPlan, SourceKind};
use crate::types::SqlError;
use norr_signals::{LockMode, LockWait};
use sqlparser::ast::{self, LockClause, NonBlock, Query};

/// The row lock a table access takes, and what it does about a row another
/// transaction has locked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowLock {
    pub mode: LockMode,
    pub wait: LockWait,
}

impl RowLock {
    /// No lock: READ COMMITTED.
    pub const NONE: RowLock = RowLock { mode: LockMode::CommittedRead, wait: LockWait::Wait };

    /// `mode`, waiting for locks held by others.
    pub const fn waiting(mode: LockMode) -> RowLock {
        RowLock { mode, wait: LockWait::Wait }
    }

    pub fn is_locking(self) -> bool {
        self.mode != LockMode::CommittedRead
    }
}

fn of_clause(c: &LockClause) -> RowLock {
    let mode = match c.lock_type {
        ast::LockType::Update => LockMode::Exclusive,
        ast::LockType::Share => LockMode::Shared,
    };
    let wait = match c.nonblock {
        None => LockWait::Wait,
        Some(NonBlock::Nowait) => LockWait::NoWait,
        Some(NonBlock::SkipLocked) => LockWait::SkipLocked,
    };
    RowLock { mode, wait }
}

/// The locking clauses of one query block.
#[derive(Debug)]
pub struct Clauses {
    /// For tables no `OF` names (NONE when every clause names its tables).
    default: RowLock,
    /// `OF` tables (lower-cased names or aliases) with their locks.
    named: Vec<(String, RowLock)>,
}

impl Clauses {
    /// The lock the block is compiled with: the strongest of the clauses
    /// (every table fetches its primary key, see `query`; `apply` then
    /// narrows the tables `OF` leaves out).
    pub fn strongest(&self) -> RowLock {
        let all = std::iter::once(self.default).chain(self.named.iter().map(|(_, l)| *l));
        all.max_by_key(|l| match l.mode {
            LockMode::CommittedRead => 0,
            LockMode::Shared => 1,
            LockMode::Exclusive => 2,
        })
        .unwrap_or(RowLock::NONE)
    }

    pub fn has_of(&self) -> bool {
        !self.named.is_empty()
    }

    /// Give each table of a compiled block the lock its clause names
    /// (3568 ER_UNRESOLVED_TABLE_LOCK for a name that is no table of the block).
    pub fn apply(&self, plan: &mut SelectPlan) -> Result<(), SqlError> {
        if !self.has_of() {
            return Ok(());
        }
        for (name, _) in &self.named {
            let found = plan
                .sources
                .iter()
                .any(|s| matches!(s.kind, SourceKind::Table(_)) && s.alias.eq_ignore_ascii_case(name));
            if !found {
                return Err(SqlError::new(3568, "HY000", format!("Unresolved name '{name}' for locking clause.")));
            }
        }
        let mut any = RowLock::NONE;
        for s in &mut plan.sources {
            if let SourceKind::Table(t) = &mut s.kind {
                let lock =
                    self.named.iter().find(|(n, _)| s.alias.eq_ignore_ascii_case(n)).map_or(self.default, |(_, l)| *l);
                t.lock = lock;
                if lock.is_locking() {
                    any = lock;
                }
            }
        }
        plan.lock = any;
        Ok(())
    }
}

/// The locking clauses of `q` (None: it has none).
pub fn clauses(q: &Query) -> Result<Option<Clauses>, SqlError> {
    if q.locks.is_empty() {
        return Ok(None);
    }
    let mut default = None;
    let mut named: Vec<(String, RowLock)> = Vec::new();
    for c in &q.locks {
        let lock = of_clause(c);
        let Some(of) = &c.of else {
            if default.replace(lock).is_some() {
                return Err(SqlError::unsupported("more than one locking clause without OF"));
            }
            continue;
        };
        // One name per clause: MySQL's list `OF a, b` reaches here as one
        // clause per name (`lock_of_text`). A qualified name counts by its
        // table part, as the sources are matched by alias.
        let name = of.0.last().and_then(|p| p.as_ident()).map(|i| i.value.to_lowercase()).unwrap_or_default();
        if named.iter().any(|(n, _)| *n == name) {
            return Err(SqlError::new(3569, "HY000", format!("Table '{name}' appears in multiple locking clauses.")));
        }
        named.push((name, lock));
    }
    Ok(Some(Clauses { default: default.unwrap_or(RowLock::NONE), named }))
}
