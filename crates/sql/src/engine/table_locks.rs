//! LOCK TABLES, UNLOCK TABLES and FLUSH TABLES ... WITH READ LOCK: table
//! locks held by the sessions of this SQL node.
//!
//! As in NDB Cluster, where table locks are local to the mysqld that took
//! them, only sessions of this SQL node see these locks: other SQL nodes and
//! native clients go on reading and writing. Row locks in the data node are
//! independent of them; a write under LOCK TABLES takes its row locks as
//! usual. A session that waits here keeps the row locks of its own open
//! transaction, so a session holding a table lock can in turn wait for one of
//! those row locks; the data node's lock-wait time-out (1205) ends such a
//! cycle, where MySQL's metadata locks would have kept it from forming.
//!
//! Statements check their tables against the locks before they run
//! (`Engine::check_table_locks`). While no session holds a lock that check is
//! one atomic load, so the point-select path does not pay for this module.

use crate::session_registry::{interrupted, Kill, SessionEntry};
use crate::types::SqlError;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    Read,
    Write,
}

/// One table a statement reads or writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    pub db: String,
    pub table: String,
    pub mode: Mode,
}

/// The locks one session holds (`Session::table_locks`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    /// LOCK TABLES: (db, table, mode), one entry per table.
    pub tables: Vec<(String, String, Mode)>,
    /// FLUSH TABLES WITH READ LOCK (the global read lock).
    pub global_read: bool,
}

impl Held {
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty() && !self.global_read
    }
}

/// The sessions holding one table.
#[derive(Default)]
struct Holders {
    readers: Vec<u32>,
    writer: Option<u32>,
}

#[derive(Default)]
struct State {
    tables: HashMap<(String, String), Holders>,
    /// Sessions holding the global read lock.
    global_readers: Vec<u32>,
}

impl State {
    /// True if session `me` may `mode` the table now, given the others' locks.
    fn allows(&self, me: u32, db: &str, table: &str, mode: Mode) -> bool {
        if mode == Mode::Write && self.global_readers.iter().any(|&c| c != me) {
            return false;
        }
        let Some(h) = self.tables.get(&(db.to_string(), table.to_string())) else {
            return true;
        };
        if h.writer.is_some_and(|c| c != me) {
            return false;
        }
        mode == Mode::Read || h.readers.iter().all(|&c| c == me)
    }

    /// True if another session holds a WRITE table lock (the global read lock
    /// waits for those, as MySQL's does).
    fn other_writer(&self, me: u32) -> bool {
        self.tables.values().any(|h| h.writer.is_some_and(|c| c != me))
    }

    fn remove(&mut self, me: u32, held: &Held) {
        for (db, table, _) in &held.tables {
            let key = (db.clone(), table.clone());
            if let Some(h) = self.tables.get_mut(&key) {
                h.readers.retain(|&c| c != me);
                if h.writer == Some(me) {
                    h.writer = None;
                }
                if h.readers.is_empty() && h.writer.is_none() {
                    self.tables.remove(&key);
                }
            }
        }
        if held.global_read {
            self.global_readers.retain(|&c| c != me);
        }
    }
}

/// The table locks of one SQL node (one per `Engine`).
#[derive(Default)]
pub struct TableLocks {
    /// Sessions holding any lock: zero means no statement needs a check.
    holders: AtomicUsize,
    state: Mutex<State>,
    /// Woken whenever a session releases locks.
    released: Notify,
}

fn lock_wait_timeout() -> SqlError {
    SqlError::new(1205, "HY000", "Lock wait timeout exceeded; try restarting transaction")
}

impl TableLocks {
    /// True while some session of this node holds a table or global lock.
    #[inline]
    pub fn any_held(&self) -> bool {
        self.holders.load(Ordering::Acquire) != 0
    }

    /// Wait until `pred` holds for the state, then run `then` under the same
    /// lock. Gives up with 1205 after `timeout`, and with 1317 when session
    /// `me` is killed.
    async fn wait_until<T>(
        &self,
        me: &SessionEntry,
        timeout: Duration,
        mut pred: impl FnMut(&State) -> bool,
        then: impl FnOnce(&mut State) -> T,
    ) -> Result<T, SqlError> {
        let deadline = Instant::now().checked_add(timeout);
        let mut then = Some(then);
        loop {
            // Registered before the check, so a release between the check and
            // the await still wakes this waiter.
            let notified = self.released.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut st = self.state.lock().expect("table lock state");
                if pred(&st) {
                    return Ok((then.take().expect("runs once"))(&mut st));
                }
            }
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if left.is_some_and(|l| l.is_zero()) {
                return Err(lock_wait_timeout());
            }
            let timer = async {
                match left {
                    Some(l) => tokio::time::sleep(l).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = notified => {}
                _ = me.wait_kill(Kill::Query) => return Err(interrupted()),
                _ = timer => return Err(lock_wait_timeout()),
            }
        }
    }

    /// Wait until session `me` may run a statement with these table accesses
    /// (it holds no locks itself: see `check_own`).
    pub async fn wait_for_access(
        &self,
        entry: &SessionEntry,
        accesses: &[Access],
        timeout: Duration,
    ) -> Result<(), SqlError> {
        let me = entry.id;
        self.wait_until(entry, timeout, |st| accesses.iter().all(|a| st.allows(me, &a.db, &a.table, a.mode)), |_| ())
            .await
    }

    /// LOCK TABLES for session `me`, which holds nothing now (its earlier
    /// locks were released first). Either every table is locked or none.
    pub async fn lock_tables(
        &self,
        entry: &SessionEntry,
        tables: Vec<(String, String, Mode)>,
        timeout: Duration,
    ) -> Result<Held, SqlError> {
        let held = Held { tables, global_read: false };
        let want = held.tables.clone();
        let me = entry.id;
        self.wait_until(
            entry,
            timeout,
            |st| want.iter().all(|(db, t, m)| st.allows(me, db, t, *m)),
            |st| {
                for (db, t, m) in &want {
                    let h = st.tables.entry((db.clone(), t.clone())).or_default();
                    match m {
                        Mode::Read => h.readers.push(me),
                        Mode::Write => h.writer = Some(me),
                    }
                }
            },
        )
        .await?;
        self.holders.fetch_add(1, Ordering::AcqRel);
        Ok(held)
    }

    /// FLUSH TABLES WITH READ LOCK for session `me`, which holds nothing now.
    pub async fn lock_global_read(&self, entry: &SessionEntry, timeout: Duration) -> Result<Held, SqlError> {
        let me = entry.id;
        self.wait_until(entry, timeout, |st| !st.other_writer(me), |st| st.global_readers.push(me)).await?;
        self.holders.fetch_add(1, Ordering::AcqRel);
        Ok(Held { tables: Vec::new(), global_read: true })
    }

    /// Wait until no other session holds the global read lock (a COMMIT of a
    /// transaction that wrote waits for it, as MySQL's does).
    pub async fn wait_no_global_read(&self, entry: &SessionEntry, timeout: Duration) -> Result<(), SqlError> {
        let me = entry.id;
        self.wait_until(entry, timeout, |st| st.global_readers.iter().all(|&c| c == me), |_| ()).await
    }

    /// Release everything `held` says session `me` holds.
    pub fn release(&self, me: u32, held: Held) {
        if held.is_empty() {
            return;
        }
        self.state.lock().expect("table lock state").remove(me, &held);
        let before = self.holders.fetch_sub(1, Ordering::AcqRel);
        debug_assert!(before > 0, "released more lock holders than registered");
        self.released.notify_waiters();
    }
}

/// The rules for a session that holds locks itself: under LOCK TABLES it may
/// use only the tables it locked, and write only those it locked for WRITE;
/// under the global read lock it may not write.
pub fn check_own(held: &Held, accesses: &[Access]) -> Result<(), SqlError> {
    for a in accesses {
        if !held.tables.is_empty() {
            match held.tables.iter().find(|(db, t, _)| *db == a.db && *t == a.table) {
                None => {
                    return Err(SqlError::new(
                        1100,
                        "HY000",
                        format!("Table '{}' was not locked with LOCK TABLES", a.table),
                    ))
                }
                Some((_, _, Mode::Read)) if a.mode == Mode::Write => {
                    return Err(SqlError::new(
                        1099,
                        "HY000",
                        format!("Table '{}' was locked with a READ lock and can't be updated", a.table),
                    ))
                }
                Some(_) => {}
            }
        }
        if held.global_read && a.mode == Mode::Write {
            return Err(SqlError::new(
                1223,
                "HY000",
                "Can't execute the query because you have a conflicting read lock",
            ));
        }
    }
    Ok(())
}

/// Merge a LOCK TABLES list: a table named twice gets the stronger mode.
pub fn merge(list: Vec<(String, String, Mode)>) -> Vec<(String, String, Mode)> {
    let mut out: Vec<(String, String, Mode)> = Vec::with_capacity(list.len());
    for (db, t, m) in list {
        match out.iter_mut().find(|(d, x, _)| *d == db && *x == t) {
            Some(e) => e.2 = e.2.max(m),
            None => out.push((db, t, m)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(t: &str, mode: Mode) -> Access {
        Access { db: "d".into(), table: t.into(), mode }
    }

    fn tl(t: &str, m: Mode) -> (String, String, Mode) {
        ("d".into(), t.into(), m)
    }

    const SHORT: Duration = Duration::from_millis(30);

    fn sess(id: u32) -> std::sync::Arc<SessionEntry> {
        SessionEntry::new(id, "u")
    }

    #[tokio::test]
    async fn read_locks_share_and_block_writers_until_released() {
        let locks = TableLocks::default();
        assert!(!locks.any_held());
        let a = locks.lock_tables(&sess(1), vec![tl("t", Mode::Read)], SHORT).await.unwrap();
        let b = locks.lock_tables(&sess(2), vec![tl("t", Mode::Read)], SHORT).await.unwrap();
        assert!(locks.any_held());
        locks.wait_for_access(&sess(3), &[acc("t", Mode::Read)], SHORT).await.unwrap();
        let e = locks.wait_for_access(&sess(3), &[acc("t", Mode::Write)], SHORT).await.unwrap_err();
        assert_eq!(e.code, 1205);
        locks.wait_for_access(&sess(3), &[acc("u", Mode::Write)], SHORT).await.unwrap();
        locks.release(1, a);
        assert!(locks.wait_for_access(&sess(3), &[acc("t", Mode::Write)], SHORT).await.is_err());
        locks.release(2, b);
        assert!(!locks.any_held());
        locks.wait_for_access(&sess(3), &[acc("t", Mode::Write)], SHORT).await.unwrap();
    }

    #[tokio::test]
    async fn a_write_lock_excludes_everyone_else_and_a_waiter_wakes_on_release() {
        let locks = std::sync::Arc::new(TableLocks::default());
        let w = locks.lock_tables(&sess(1), vec![tl("t", Mode::Write)], SHORT).await.unwrap();
        assert_eq!(locks.wait_for_access(&sess(2), &[acc("t", Mode::Read)], SHORT).await.unwrap_err().code, 1205);
        assert!(locks.lock_tables(&sess(2), vec![tl("t", Mode::Read)], SHORT).await.is_err());
        let l2 = locks.clone();
        let waiter =
            tokio::spawn(async move { l2.lock_tables(&sess(2), vec![tl("t", Mode::Read)], Duration::MAX).await });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        locks.release(1, w);
        let held = waiter.await.unwrap().unwrap();
        assert_eq!(held.tables, vec![tl("t", Mode::Read)]);
    }

    #[tokio::test]
    async fn lock_tables_is_all_or_nothing() {
        let locks = TableLocks::default();
        let a = locks.lock_tables(&sess(1), vec![tl("b", Mode::Write)], SHORT).await.unwrap();
        assert!(locks.lock_tables(&sess(2), vec![tl("a", Mode::Write), tl("b", Mode::Read)], SHORT).await.is_err());
        // Nothing of the failed request stayed behind: `a` is free.
        locks.wait_for_access(&sess(3), &[acc("a", Mode::Write)], SHORT).await.unwrap();
        locks.release(1, a);
    }

    #[tokio::test]
    async fn global_read_lock_blocks_writes_and_commits_and_waits_for_write_locks() {
        let locks = TableLocks::default();
        let w = locks.lock_tables(&sess(1), vec![tl("t", Mode::Write)], SHORT).await.unwrap();
        assert_eq!(locks.lock_global_read(&sess(2), SHORT).await.unwrap_err().code, 1205);
        locks.release(1, w);
        let g = locks.lock_global_read(&sess(2), SHORT).await.unwrap();
        locks.wait_for_access(&sess(3), &[acc("t", Mode::Read)], SHORT).await.unwrap();
        assert!(locks.wait_for_access(&sess(3), &[acc("t", Mode::Write)], SHORT).await.is_err());
        assert!(locks.wait_no_global_read(&sess(3), SHORT).await.is_err());
        locks.wait_no_global_read(&sess(2), SHORT).await.unwrap();
        assert!(locks.lock_tables(&sess(3), vec![tl("t", Mode::Write)], SHORT).await.is_err());
        locks.lock_tables(&sess(3), vec![tl("t", Mode::Read)], SHORT).await.map(|h| locks.release(3, h)).unwrap();
        locks.release(2, g);
        locks.wait_no_global_read(&sess(3), SHORT).await.unwrap();
        assert!(!locks.any_held());
    }

    #[tokio::test]
    async fn a_killed_session_stops_waiting() {
        let locks = std::sync::Arc::new(TableLocks::default());
        let w = locks.lock_tables(&sess(1), vec![tl("t", Mode::Write)], SHORT).await.unwrap();
        let victim = sess(2);
        let (l2, v2) = (locks.clone(), victim.clone());
        let waiter = tokio::spawn(async move { l2.wait_for_access(&v2, &[acc("t", Mode::Read)], Duration::MAX).await });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        victim.request_kill(Kill::Query);
        assert_eq!(waiter.await.unwrap().unwrap_err().code, 1317);
        locks.release(1, w);
    }

    #[test]
    fn own_locks_limit_what_the_session_touches() {
        let held = Held { tables: vec![tl("r", Mode::Read), tl("w", Mode::Write)], global_read: false };
        check_own(&held, &[acc("r", Mode::Read), acc("w", Mode::Write)]).unwrap();
        assert_eq!(check_own(&held, &[acc("x", Mode::Read)]).unwrap_err().code, 1100);
        assert_eq!(check_own(&held, &[acc("r", Mode::Write)]).unwrap_err().code, 1099);
        let g = Held { tables: Vec::new(), global_read: true };
        check_own(&g, &[acc("x", Mode::Read)]).unwrap();
        assert_eq!(check_own(&g, &[acc("x", Mode::Write)]).unwrap_err().code, 1223);
    }

    #[test]
    fn merge_keeps_the_stronger_mode() {
        let m = merge(vec![tl("a", Mode::Read), tl("b", Mode::Read), tl("a", Mode::Write)]);
        assert_eq!(m, vec![tl("a", Mode::Write), tl("b", Mode::Read)]);
    }
}
