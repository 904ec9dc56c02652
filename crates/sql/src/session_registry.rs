//! The sessions of this SQL node as SHOW PROCESSLIST and KILL see them: what
//! each is doing, and a kill request each one watches for.
//!
//! A kill is cooperative. `KILL CONNECTION` closes an idle connection at once
//! (its reader watches for it) and a busy one when its statement ends; both
//! kinds end a wait for a table lock at once with 1317. A statement that is
//! reading or writing rows runs to its end (its row-lock waits end with the
//! data node's lock-wait time-out): stopping it half way would leave a
//! statement half applied.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;
use tokio::sync::Notify;

/// What KILL asked of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kill {
    None = 0,
    /// KILL QUERY: end the running statement.
    Query = 1,
    /// KILL [CONNECTION]: end the connection.
    Connection = 2,
}

/// What a session is doing (a PROCESSLIST row).
#[derive(Debug, Clone)]
pub struct Activity {
    /// "Sleep", "Query" or "Execute".
    pub command: &'static str,
    pub since: Instant,
    /// The statement's text while one runs.
    pub info: Option<Arc<str>>,
    /// The session's default database.
    pub db: Option<Arc<str>>,
}

/// One session's entry.
#[derive(Debug)]
pub struct SessionEntry {
    pub id: u32,
    pub user: String,
    host: OnceLock<String>,
    activity: Mutex<Activity>,
    kill: AtomicU8,
    killed: Notify,
}

pub fn interrupted() -> crate::types::SqlError {
    crate::types::SqlError::new(1317, "70100", "Query execution was interrupted")
}

impl SessionEntry {
    pub fn new(id: u32, user: &str) -> Arc<SessionEntry> {
        Arc::new(SessionEntry {
            id,
            user: user.to_string(),
            host: OnceLock::new(),
            activity: Mutex::new(Activity { command: "Sleep", since: Instant::now(), info: None, db: None }),
            kill: AtomicU8::new(Kill::None as u8),
            killed: Notify::new(),
        })
    }

    /// The client's host (set once, after login).
    pub fn set_host(&self, host: &str) {
        let _ = self.host.set(host.to_string());
    }

    pub fn host(&self) -> &str {
        self.host.get().map(String::as_str).unwrap_or("localhost")
    }

    /// A statement starts. A KILL QUERY that came while the session was
    /// idle is dropped, as in MySQL.
    pub fn begin(&self, command: &'static str, info: Option<Arc<str>>, db: Option<Arc<str>>) {
        let _ = self.kill.compare_exchange(Kill::Query as u8, Kill::None as u8, Ordering::AcqRel, Ordering::Acquire);
        let mut a = self.activity.lock().expect("activity");
        *a = Activity { command, since: Instant::now(), info, db };
    }

    /// USE / COM_INIT_DB changed the default database.
    pub fn set_db(&self, db: Option<Arc<str>>) {
        self.activity.lock().expect("activity").db = db;
    }

    /// The statement ended: back to Sleep; a KILL QUERY it did not see is
    /// dropped.
    pub fn end(&self) {
        let _ = self.kill.compare_exchange(Kill::Query as u8, Kill::None as u8, Ordering::AcqRel, Ordering::Acquire);
        let mut a = self.activity.lock().expect("activity");
        a.command = "Sleep";
        a.since = Instant::now();
        a.info = None;
    }

    pub fn activity(&self) -> Activity {
        self.activity.lock().expect("activity").clone()
    }

    pub fn kill_requested(&self) -> Kill {
        match self.kill.load(Ordering::Acquire) {
            1 => Kill::Query,
            2 => Kill::Connection,
            _ => Kill::None,
        }
    }

    /// Ask the session to stop (a connection kill is never downgraded).
    pub fn request_kill(&self, what: Kill) {
        match what {
            Kill::Connection => self.kill.store(Kill::Connection as u8, Ordering::Release),
            Kill::Query => {
                let _ = self.kill.compare_exchange(
                    Kill::None as u8,
                    Kill::Query as u8,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
            }
            Kill::None => return,
        }
        self.killed.notify_waiters();
    }

    /// Resolves once a kill of at least `what` is requested.
    pub async fn wait_kill(&self, what: Kill) {
        loop {
            let notified = self.killed.notified();
            tokio::pin!(notified);
            // Registered before the check: a request between the check and
            // the await still wakes this waiter.
            notified.as_mut().enable();
            if self.kill.load(Ordering::Acquire) >= what as u8 {
                return;
            }
            notified.await;
        }
    }
}

/// Every session of the SQL node, by connection id.
#[derive(Default)]
pub struct Registry {
    sessions: Mutex<BTreeMap<u32, Arc<SessionEntry>>>,
}

impl Registry {
    pub fn register(&self, e: Arc<SessionEntry>) {
        self.sessions.lock().expect("registry").insert(e.id, e);
    }

    pub fn unregister(&self, id: u32) {
        self.sessions.lock().expect("registry").remove(&id);
    }

    pub fn get(&self, id: u32) -> Option<Arc<SessionEntry>> {
        self.sessions.lock().expect("registry").get(&id).cloned()
    }

    /// All sessions in id order.
    pub fn list(&self) -> Vec<Arc<SessionEntry>> {
        self.sessions.lock().expect("registry").values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn kill_query_is_dropped_between_statements_and_kill_connection_stays() {
        let e = SessionEntry::new(7, "root");
        e.request_kill(Kill::Query);
        assert_eq!(e.kill_requested(), Kill::Query);
        e.begin("Query", Some("SELECT 1".into()), Some("d".into()));
        assert_eq!(e.kill_requested(), Kill::None, "a KILL QUERY while idle is dropped");
        assert_eq!(e.activity().command, "Query");
        assert_eq!(e.activity().info.as_deref(), Some("SELECT 1"));
        e.request_kill(Kill::Query);
        e.wait_kill(Kill::Query).await;
        e.end();
        assert_eq!(e.kill_requested(), Kill::None);
        assert_eq!(e.activity().command, "Sleep");
        assert_eq!(e.activity().db.as_deref(), Some("d"), "the database stays");
        e.request_kill(Kill::Connection);
        e.request_kill(Kill::Query);
        e.begin("Query", None, None);
        assert_eq!(e.kill_requested(), Kill::Connection, "never downgraded");
        e.wait_kill(Kill::Query).await;
        e.wait_kill(Kill::Connection).await;
    }

    #[tokio::test]
    async fn a_waiter_wakes_on_the_request() {
        let e = SessionEntry::new(1, "u");
        let e2 = e.clone();
        let w = tokio::spawn(async move { e2.wait_kill(Kill::Connection).await });
        tokio::task::yield_now().await;
        e.request_kill(Kill::Query);
        tokio::task::yield_now().await;
        assert!(!w.is_finished(), "a query kill does not end a connection wait");
        e.request_kill(Kill::Connection);
        w.await.unwrap();
    }

    #[test]
    fn registry_lists_in_id_order() {
        let r = Registry::default();
        r.register(SessionEntry::new(5, "a"));
        r.register(SessionEntry::new(2, "b"));
        assert_eq!(r.list().iter().map(|e| e.id).collect::<Vec<_>>(), vec![2, 5]);
        assert_eq!(r.get(5).unwrap().user, "a");
        r.unregister(5);
        assert!(r.get(5).is_none());
    }
}
