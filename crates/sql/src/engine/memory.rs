//! Memory bounds of the SQL node (issue 22, case 7): rows a statement holds
//! in the SQL node's memory (scanned rows, and the rows built from them:
//! joined rows and computed select lists, which sorts, groups and results
//! are made of) are charged to the statement and to the process.
//! Past either limit the statement fails with 1041 ("Out of memory", as
//! MySQL's ER_OUTOFMEMORY, SQLSTATE HY001) instead of the process growing
//! until the kernel kills it; every other session goes on. A statement's
//! charge is returned when it ends, whether it finished, failed or its
//! client went away.
//!
//! The estimate counts each value's slot and its bytes (`row_bytes`), not
//! allocator overhead: the limits are meant with a margin, not to the byte.

use crate::types::SqlError;
use norr_signals::Value;
use std::sync::atomic::{AtomicU64, Ordering};

/// Default of `norr sqld --max-memory`: rows held by all statements at once.
pub const DEFAULT_MAX_MEMORY_BYTES: u64 = 4 << 30;
/// Default of `norr sqld --max-statement-memory`: rows one statement holds.
pub const DEFAULT_MAX_STATEMENT_MEMORY_BYTES: u64 = 1 << 30;

/// The process-wide limit (0: none) and what statements hold now.
static PROCESS_LIMIT_BYTES: AtomicU64 = AtomicU64::new(DEFAULT_MAX_MEMORY_BYTES);
static PROCESS_USED_BYTES: AtomicU64 = AtomicU64::new(0);

/// Sets the process-wide limit (`--max-memory`; 0: none).
pub fn set_process_limit(bytes: u64) {
    PROCESS_LIMIT_BYTES.store(bytes, Ordering::Relaxed);
}

/// Bytes charged by all running statements now.
pub fn process_used() -> u64 {
    PROCESS_USED_BYTES.load(Ordering::Relaxed)
}

/// What one statement holds; returns its charge to the process when dropped.
#[derive(Debug)]
pub struct StatementMemory {
    used: AtomicU64,
    /// 0: no limit of its own (internal statements).
    limit: u64,
}

impl StatementMemory {
    pub fn new(limit_bytes: u64) -> StatementMemory {
        StatementMemory { used: AtomicU64::new(0), limit: limit_bytes }
    }

    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Charges `bytes` about to be held; error 1041 (nothing charged) if
    /// that would pass the statement's or the process's limit.
    pub fn charge(&self, bytes: u64) -> Result<(), SqlError> {
        let mine = self.used.load(Ordering::Relaxed).saturating_add(bytes);
        if self.limit > 0 && mine > self.limit {
            return Err(out_of_memory(&format!(
                "the statement would hold {mine} bytes of rows, more than --max-statement-memory ({} bytes)",
                self.limit
            )));
        }
        charge_process(bytes)?;
        self.used.store(mine, Ordering::Relaxed);
        Ok(())
    }
}

/// Charges `bytes` to the process's statements (`--max-memory`), or error
/// 1041 without charging anything.
fn charge_process(bytes: u64) -> Result<(), SqlError> {
    let before = PROCESS_USED_BYTES.fetch_add(bytes, Ordering::Relaxed);
    let limit = PROCESS_LIMIT_BYTES.load(Ordering::Relaxed);
    if limit > 0 && before.saturating_add(bytes) > limit {
        PROCESS_USED_BYTES.fetch_sub(bytes, Ordering::Relaxed);
        return Err(out_of_memory(&format!(
            "the SQL node's statements would hold {} bytes (rows, and texts being parsed), more than --max-memory \
             ({limit} bytes)",
            before.saturating_add(bytes)
        )));
    }
    Ok(())
}

/// Bytes reserved against `--max-memory` for a while (the parse of a long
/// statement: `depth::parse`); given back when dropped.
#[derive(Debug)]
pub struct Reserved {
    bytes: u64,
}

/// Reserves `bytes` against the process's limit, or error 1041.
pub fn reserve_process(bytes: u64) -> Result<Reserved, SqlError> {
    charge_process(bytes)?;
    Ok(Reserved { bytes })
}

/// Counts `bytes` the process already holds against `--max-memory`, past
/// the limit or not, until the guard is dropped: a result built whole is
/// still in memory while its connection writes it to a slow client, after
/// its statement (and its charge) ended. Statements that start meanwhile
/// see it and fail with 1041 rather than growing the process further.
pub fn hold_process(bytes: u64) -> Reserved {
    PROCESS_USED_BYTES.fetch_add(bytes, Ordering::Relaxed);
    Reserved { bytes }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        PROCESS_USED_BYTES.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

impl StatementMemory {
    /// Gives back what was charged since `mark` (a `used()` taken before):
    /// a part of the statement that has ended and dropped every row it
    /// read and built (one run of a correlated subquery) returns its
    /// charge, so that a statement's charge is what it holds, not what it
    /// has read. Only for a part that ran alone: nothing else of the
    /// statement may have charged since `mark`.
    pub fn release_to(&self, mark: u64) {
        let now = self.used.load(Ordering::Relaxed);
        debug_assert!(now >= mark, "a mark above what the statement holds");
        if now > mark {
            self.used.store(mark, Ordering::Relaxed);
            PROCESS_USED_BYTES.fetch_sub(now - mark, Ordering::Relaxed);
        }
    }
}

impl Drop for StatementMemory {
    fn drop(&mut self) {
        let n = *self.used.get_mut();
        if n > 0 {
            PROCESS_USED_BYTES.fetch_sub(n, Ordering::Relaxed);
        }
    }
}

impl StatementMemory {
    /// Charges a batch of result rows on its way to the client (a streamed
    /// result, `engine::stream`): held until the batch is written, then
    /// returned by the guard's drop, wherever that happens (the connection's
    /// writer, or a channel dropped with its connection). Counted against
    /// the statement's limit together with what the statement holds, and
    /// against the process's; error 1041 when either would be passed.
    pub fn in_flight(&self, bytes: u64) -> Result<InFlight, SqlError> {
        let mine = self.used.load(Ordering::Relaxed).saturating_add(bytes);
        if self.limit > 0 && mine > self.limit {
            return Err(out_of_memory(&format!(
                "a batch of the result would take the statement to {mine} bytes of rows, more than \
                 --max-statement-memory ({} bytes)",
                self.limit
            )));
        }
        charge_process(bytes)?;
        RESULT_IN_FLIGHT_BYTES.fetch_add(bytes, Ordering::Relaxed);
        Ok(InFlight { bytes })
    }
}

/// Bytes of streamed result rows between the data nodes and the clients'
/// sockets now (SHOW GLOBAL STATUS: Norr_result_bytes_in_flight).
static RESULT_IN_FLIGHT_BYTES: AtomicU64 = AtomicU64::new(0);

/// Bytes of streamed result rows not yet written to their clients.
pub fn result_bytes_in_flight() -> u64 {
    RESULT_IN_FLIGHT_BYTES.load(Ordering::Relaxed)
}

/// A batch of result rows charged to the process (`StatementMemory::in_flight`);
/// the charge is returned when this is dropped.
#[derive(Debug)]
pub struct InFlight {
    bytes: u64,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        PROCESS_USED_BYTES.fetch_sub(self.bytes, Ordering::Relaxed);
        RESULT_IN_FLIGHT_BYTES.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// MySQL's ER_OUTOFMEMORY (1041, HY001), saying which limit and what to do.
pub fn out_of_memory(what: &str) -> SqlError {
    SqlError::new(
        1041,
        "HY001",
        format!(
            "Out of memory: {what}. Read fewer rows at once (a narrower WHERE, LIMIT, or fewer columns), or raise \
             the limit"
        ),
    )
}

/// Rows a statement builds from others (joined rows, computed select
/// lists), counted as they are made and charged to the statement in steps
/// of `Built::STEP` bytes: a statement that builds millions of rows pays
/// one charge per step, not an atomic operation on the process's counter
/// per row. What has not reached a step yet is charged by `flush`.
#[derive(Debug, Default)]
pub struct Built {
    pending: u64,
}

impl Built {
    const STEP: u64 = 256 << 10;

    /// Counts `row`; once a step has accumulated, charges it (1041 when a
    /// limit would be passed).
    pub fn add(&mut self, mem: &StatementMemory, row: &[Value]) -> Result<(), SqlError> {
        self.add_bytes(mem, row_bytes(row))
    }

    /// Counts `bytes` of other state a statement builds (hash tables of
    /// joins, groups and DISTINCT, aggregate states), as `add` counts rows.
    pub fn add_bytes(&mut self, mem: &StatementMemory, bytes: u64) -> Result<(), SqlError> {
        self.pending += bytes;
        if self.pending >= Self::STEP {
            self.flush(mem)?;
        }
        Ok(())
    }

    /// Charges what has been counted and not charged yet.
    pub fn flush(&mut self, mem: &StatementMemory) -> Result<(), SqlError> {
        let n = std::mem::take(&mut self.pending);
        if n > 0 {
            mem.charge(n)?;
        }
        Ok(())
    }
}

/// Estimated bytes a row holds in the SQL node.
pub fn row_bytes(r: &[Value]) -> u64 {
    let slots = (std::mem::size_of_val(r) + std::mem::size_of::<Vec<Value>>()) as u64;
    slots + r.iter().map(|v| v.as_bytes().map_or(0, |b| b.len() as u64)).sum::<u64>()
}

/// Estimated bytes of one entry of a hash table beside its key's bytes:
/// the key's vector header, the value, and the table's slot and control
/// byte at its load factor (hashbrown keeps at most 7/8 of slots full).
pub const HASH_ENTRY_BYTES: u64 = 48;

/// Estimated bytes of `rows`.
pub fn rows_bytes(rows: &[Vec<Value>]) -> u64 {
    rows.iter().map(|r| row_bytes(r)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statement_limit_refuses_and_drop_returns_the_charge() {
        let before = process_used();
        let m = StatementMemory::new(1000);
        m.charge(600).unwrap();
        let e = m.charge(600).unwrap_err();
        assert_eq!(e.code, 1041);
        assert_eq!(m.used(), 600, "a refused charge is not kept");
        assert!(process_used() >= before + 600);
        drop(m);
        // Other tests charge concurrently: only ours is known to be gone.
        let m2 = StatementMemory::new(0);
        m2.charge(1).unwrap();
        drop(m2);
        let row = vec![Value::Int(1), Value::str("abcd")];
        assert!(row_bytes(&row) >= 4 + 2 * std::mem::size_of::<Value>() as u64);
    }
}
