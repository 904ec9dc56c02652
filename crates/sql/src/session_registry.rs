//! The sessions of this SQL node as SHOW PROCESSLIST and KILL see them: what
//! each is doing, and a kill request each one watches for.
//!
//! `KILL CONNECTION` shuts the connection's socket down, as MySQL does: an
//! idle connection ends at once, a busy one when its statement stops. Both
//! kinds (and a client that goes away, and max_execution_time) stop the
//! running statement at its next check with 1317: a wait for a table or row
//! lock at once, a scan at its next batch, a loop in memory within a few
//! milliseconds (`engine::exec::Turn`). The stopped statement fails as any
//! failed statement does: its writes are rolled back.
//!
//! Keeping the entry current costs little on the statement path: two atomic
//! stores and one uncontended lock. Times come from a coarse clock, a
//! counter one thread advances ten times a second, because reading the real
//! clock twice per statement showed in the point-select profile.

use std::collections::BTreeMap;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Milliseconds since the clock started, advanced every `TICK`.
static CLOCK_MS: AtomicU64 = AtomicU64::new(0);
static CLOCK: Once = Once::new();
const TICK: Duration = Duration::from_millis(100);

/// Start the coarse clock (once per process).
pub fn start_clock() {
    CLOCK.call_once(|| {
        let start = Instant::now();
        let _ = std::thread::Builder::new().name("sqld-clock".into()).spawn(move || loop {
            std::thread::sleep(TICK);
            CLOCK_MS.store(start.elapsed().as_millis() as u64, Ordering::Relaxed);
        });
    });
}

fn now_ms() -> u64 {
    CLOCK_MS.load(Ordering::Relaxed)
}

const COMMANDS: [&str; 3] = ["Sleep", "Query", "Execute"];

/// What a session runs (index into `COMMANDS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Query = 1,
    Execute = 2,
}

/// Identity of a shared text (0: none), to see that a statement's text and
/// database are the ones already stored.
fn text_id(t: Option<&Arc<str>>) -> usize {
    t.map_or(0, |a| Arc::as_ptr(a) as *const u8 as usize)
}

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
    /// Seconds in that state.
    pub seconds: u64,
    /// The statement's text while one runs.
    pub info: Option<Arc<str>>,
    /// The session's default database.
    pub db: Option<Arc<str>>,
}

/// The statement text and database, set as a statement starts.
#[derive(Debug, Default)]
struct Texts {
    info: Option<Arc<str>>,
    db: Option<Arc<str>>,
}

/// One session's entry.
#[derive(Debug)]
pub struct SessionEntry {
    pub id: u32,
    pub user: String,
    host: OnceLock<String>,
    /// `since_ms << 2 | command index` (see `COMMANDS`).
    state: AtomicU64,
    texts: Mutex<Texts>,
    /// `text_id` of what `texts` holds. Only the session writes `texts`, and
    /// the `Arc`s stored there keep these addresses from being reused.
    info_id: AtomicUsize,
    db_id: AtomicUsize,
    kill: AtomicU8,
    killed: Notify,
    /// The connection's socket until it closes (`forget_socket`).
    socket: Mutex<Option<RawFd>>,
    /// The named locks of the session's SQL node (GET_LOCK), set when the
    /// engine registers the session: statements reach them through the
    /// entry their evaluation context already holds.
    user_locks: OnceLock<Arc<crate::engine::user_locks::UserLocks>>,
    /// What the session waits for (`WaitState`), shown as PROCESSLIST State.
    wait: AtomicU8,
    /// The running statement's max_execution_time passed (with a KILL
    /// QUERY, which stops it; `engine::exec_time` then reports 3024).
    timed_out: AtomicBool,
}

/// A wait of a statement that PROCESSLIST shows in its State column (MySQL's
/// stage names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitState {
    None = 0,
    /// GET_LOCK waits for a lock another session holds.
    UserLock = 1,
    /// SLEEP.
    UserSleep = 2,
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
            state: AtomicU64::new(now_ms() << 2),
            texts: Mutex::new(Texts::default()),
            info_id: AtomicUsize::new(0),
            db_id: AtomicUsize::new(0),
            kill: AtomicU8::new(Kill::None as u8),
            killed: Notify::new(),
            socket: Mutex::new(None),
            user_locks: OnceLock::new(),
            wait: AtomicU8::new(WaitState::None as u8),
            timed_out: AtomicBool::new(false),
        })
    }

    /// Attach the node's named locks (once, at registration).
    pub fn set_user_locks(&self, locks: Arc<crate::engine::user_locks::UserLocks>) {
        let _ = self.user_locks.set(locks);
    }

    pub fn user_locks(&self) -> Option<&crate::engine::user_locks::UserLocks> {
        self.user_locks.get().map(|l| &**l)
    }

    pub fn set_wait(&self, w: WaitState) {
        self.wait.store(w as u8, Ordering::Release);
    }

    /// PROCESSLIST State of a wait in progress, if any.
    pub fn wait_state(&self) -> Option<&'static str> {
        match self.wait.load(Ordering::Acquire) {
            1 => Some("User lock"),
            2 => Some("User sleep"),
            _ => None,
        }
    }

    /// The client's host (set once, after login).
    pub fn set_host(&self, host: &str) {
        let _ = self.host.set(host.to_string());
    }

    pub fn host(&self) -> &str {
        self.host.get().map(String::as_str).unwrap_or("localhost")
    }

    /// A statement starts. A KILL QUERY that came while the session was
    /// idle is dropped, as in MySQL. A prepared statement run again with the
    /// same database stores nothing but the state word.
    pub fn begin(&self, command: Command, info: Option<&Arc<str>>, db: Option<&Arc<str>>) {
        self.drop_query_kill();
        let (iid, did) = (text_id(info), text_id(db));
        if iid != self.info_id.load(Ordering::Relaxed) || did != self.db_id.load(Ordering::Relaxed) {
            let old = {
                let mut t = self.texts.lock().expect("texts");
                std::mem::replace(&mut *t, Texts { info: info.cloned(), db: db.cloned() })
            };
            self.info_id.store(iid, Ordering::Relaxed);
            self.db_id.store(did, Ordering::Relaxed);
            drop(old);
        }
        self.state.store(now_ms() << 2 | command as u64, Ordering::Release);
    }

    /// USE / COM_INIT_DB changed the default database.
    pub fn set_db(&self, db: Option<Arc<str>>) {
        let id = text_id(db.as_ref());
        self.texts.lock().expect("texts").db = db;
        self.db_id.store(id, Ordering::Relaxed);
    }

    fn drop_query_kill(&self) {
        if self.kill.load(Ordering::Acquire) == Kill::Query as u8 {
            let _ =
                self.kill.compare_exchange(Kill::Query as u8, Kill::None as u8, Ordering::AcqRel, Ordering::Acquire);
        }
    }

    /// The connection's socket, shut down by KILL CONNECTION.
    pub fn set_socket(&self, fd: RawFd) {
        *self.socket.lock().expect("socket") = Some(fd);
    }

    /// The socket is about to close: from now on a kill must not touch the
    /// descriptor (it may soon name another connection's socket).
    pub fn forget_socket(&self) {
        *self.socket.lock().expect("socket") = None;
    }

    fn shut_down_socket(&self) {
        let guard = self.socket.lock().expect("socket");
        if let Some(fd) = *guard {
            use std::os::fd::FromRawFd;
            // SAFETY: the descriptor stays open while `socket` holds it: the
            // connection clears it under this lock before closing its
            // socket. ManuallyDrop keeps this borrowed view from closing it.
            let view = std::mem::ManuallyDrop::new(unsafe { std::net::TcpStream::from_raw_fd(fd) });
            // shutdown(2) works alike on TCP and Unix sockets.
            let _ = view.shutdown(std::net::Shutdown::Both);
        }
    }

    /// The statement ended: back to Sleep; a KILL QUERY it did not see is
    /// dropped.
    pub fn end(&self) {
        self.drop_query_kill();
        self.state.store(now_ms() << 2, Ordering::Release);
    }

    pub fn activity(&self) -> Activity {
        let st = self.state.load(Ordering::Acquire);
        let command = COMMANDS[(st & 3) as usize % COMMANDS.len()];
        let t = self.texts.lock().expect("texts");
        Activity {
            command,
            seconds: now_ms().saturating_sub(st >> 2) / 1000,
            // A sleeping session's last statement is not shown (its text
            // stays until the next one replaces it).
            info: if command == "Sleep" { None } else { t.info.clone() },
            db: t.db.clone(),
        }
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
            Kill::Connection => {
                self.kill.store(Kill::Connection as u8, Ordering::Release);
                self.shut_down_socket();
            }
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

    /// The running statement's max_execution_time passed: stop it as KILL
    /// QUERY does.
    pub fn time_out(&self) {
        self.timed_out.store(true, Ordering::Release);
        self.request_kill(Kill::Query);
    }

    /// Whether `time_out` hit the statement; clears that and the KILL QUERY
    /// it made, so that the next statement runs.
    pub fn take_time_out(&self) -> bool {
        let hit = self.timed_out.swap(false, Ordering::AcqRel);
        if hit {
            self.drop_query_kill();
        }
        hit
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
        let (q, d): (Arc<str>, Arc<str>) = ("SELECT 1".into(), "d".into());
        e.begin(Command::Query, Some(&q), Some(&d));
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
        e.begin(Command::Query, None, None);
        assert_eq!(e.activity().info, None);
        assert_eq!(e.activity().db, None);
        // The same texts again: kept, not stored anew.
        e.begin(Command::Execute, Some(&q), Some(&d));
        e.begin(Command::Execute, Some(&q), Some(&d));
        assert_eq!((e.activity().command, e.activity().info.as_deref()), ("Execute", Some("SELECT 1")));
        e.set_db(None);
        e.begin(Command::Execute, Some(&q), Some(&d));
        assert_eq!(e.activity().db.as_deref(), Some("d"), "a USE in between is seen");
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
