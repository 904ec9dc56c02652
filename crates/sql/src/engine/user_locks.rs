//! Named user-level locks (GET_LOCK, RELEASE_LOCK, RELEASE_ALL_LOCKS,
//! IS_FREE_LOCK, IS_USED_LOCK): the lock table of one SQL node. The SQL
//! functions themselves, their argument rules and the waits of a statement
//! are in `user_lock_fns`. Owner: query engineer.
//!
//! Scope: one `sqld` process. The locks live in this SQL node's memory, not
//! in the data nodes, exactly as in MySQL NDB Cluster, where GET_LOCK is
//! local to each mysqld: sessions of other SQL nodes (and native clients)
//! neither see nor wait for them. Applications that take a named lock around
//! a migration must therefore run every migrating client through the same
//! SQL node.
//!
//! Semantics, as MySQL 8.0: a session may hold any number of locks, and the
//! same lock several times (it stays held until RELEASE_LOCK ran as often as
//! GET_LOCK succeeded). Locks belong to the session, not to a transaction:
//! COMMIT and ROLLBACK keep them; the end of the session releases them.
//!
//! Waiting: a request for a lock another session holds joins the lock's
//! queue (first come, first served). A release that frees the lock hands it
//! to the first waiter at once and wakes it through a one-shot channel, so a
//! waiter costs no thread and no polling, and a newcomer can not overtake the
//! queue.
//!
//! Deadlocks: a waiting session waits for exactly one lock, held by one
//! session, so the wait-for graph is a set of chains (waiter -> holder). A
//! request whose chain leads back to the requester would close a cycle: it
//! fails at once with 3058 (the requester is the victim, and nothing else
//! changes). Chains only grow through new requests, and a hand-off gives the
//! lock to a session that stops waiting, so checking each new request is
//! enough to keep the graph free of cycles.

use crate::session_registry::{interrupted, Kill, SessionEntry};
use crate::types::SqlError;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::oneshot;

/// Longest lock name in characters (MySQL's NAME_CHAR_LEN).
pub const MAX_NAME_CHARS: usize = 64;

/// 3058 ER_USER_LOCK_DEADLOCK.
pub fn deadlock() -> SqlError {
    SqlError::new(
        3058,
        "HY000",
        "Deadlock found when trying to get user-level lock; try rolling back transaction/releasing locks and \
         restarting lock acquisition.",
    )
}

/// A session waiting in a lock's queue.
struct Waiter {
    session: u32,
    /// Fired when the lock is handed to this waiter.
    grant: oneshot::Sender<()>,
}

/// One held lock.
struct Lock {
    owner: u32,
    /// Times the owner got it (RELEASE_LOCK takes one).
    count: u64,
    queue: VecDeque<Waiter>,
}

#[derive(Default)]
struct State {
    /// By normalized name (see `user_lock_fns::lock_name`).
    locks: HashMap<String, Lock>,
    /// Session -> the lock it waits for (the wait-for graph's edges go on
    /// to that lock's owner).
    waiting: HashMap<u32, String>,
}

impl State {
    /// Would session `me` waiting for a lock `holder` holds close a cycle?
    fn closes_cycle(&self, me: u32, mut holder: u32) -> bool {
        // Each step follows one waiting session: a chain is never longer
        // than the number of waiters (plus its holder at the end).
        for _ in 0..=self.waiting.len() {
            if holder == me {
                return true;
            }
            let Some(name) = self.waiting.get(&holder) else { return false };
            let Some(l) = self.locks.get(name) else {
                debug_assert!(false, "a waiter waits for a lock nobody holds");
                return false;
            };
            holder = l.owner;
        }
        debug_assert!(false, "the wait-for graph has a cycle");
        false
    }

    /// The owner gives up the lock entirely: to the first waiter still
    /// listening, or the lock goes away.
    fn pass_on(&mut self, name: &str) {
        let Some(l) = self.locks.get_mut(name) else { return };
        while let Some(w) = l.queue.pop_front() {
            self.waiting.remove(&w.session);
            l.owner = w.session;
            l.count = 1;
            if w.grant.send(()).is_ok() {
                return;
            }
            // The waiter's future is gone without having left the queue
            // (not expected: its guard leaves first); try the next one.
        }
        self.locks.remove(name);
    }

    /// Release one level of `name` held by `me`.
    fn release_one(&mut self, me: u32, name: &str) {
        let Some(l) = self.locks.get_mut(name) else { return };
        debug_assert_eq!(l.owner, me);
        debug_assert!(l.count > 0);
        l.count -= 1;
        if l.count == 0 {
            self.pass_on(name);
        }
    }
}

/// The named locks of one SQL node (one per `Engine`).
#[derive(Default)]
pub struct UserLocks {
    state: Mutex<State>,
}

impl std::fmt::Debug for UserLocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UserLocks")
    }
}

/// What RELEASE_LOCK found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Released {
    /// One level released (RELEASE_LOCK returns 1).
    Yes,
    /// Another session holds it (0).
    NotOwner,
    /// Nobody holds it (NULL).
    NotHeld,
}

impl UserLocks {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock left consistent maps behind (every
        // update is a few statements with no early exit): go on with them.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Take `name` for session `me` if nobody else holds it (again if `me`
    /// does). True when taken.
    pub fn try_acquire(&self, me: u32, name: &str) -> bool {
        let mut st = self.state();
        match st.locks.get_mut(name) {
            None => {
                st.locks.insert(name.to_string(), Lock { owner: me, count: 1, queue: VecDeque::new() });
                true
            }
            Some(l) if l.owner == me => {
                l.count += 1;
                true
            }
            Some(_) => false,
        }
    }

    /// GET_LOCK's wait: take `name` for session `entry`, waiting up to
    /// `timeout` (None: without end). Ok(true) when taken, Ok(false) when
    /// the time ran out; 3058 when waiting would deadlock; 1317 when the
    /// session is killed (KILL QUERY or KILL CONNECTION) while it waits.
    pub async fn acquire(&self, entry: &SessionEntry, name: &str, timeout: Option<Duration>) -> Result<bool, SqlError> {
        let me = entry.id;
        let granted = {
            let mut st = self.state();
            let holder = match st.locks.get_mut(name) {
                None => {
                    st.locks.insert(name.to_string(), Lock { owner: me, count: 1, queue: VecDeque::new() });
                    return Ok(true);
                }
                Some(l) if l.owner == me => {
                    l.count += 1;
                    return Ok(true);
                }
                Some(l) => l.owner,
            };
            if timeout.is_some_and(|t| t.is_zero()) {
                return Ok(false);
            }
            if st.closes_cycle(me, holder) {
                return Err(deadlock());
            }
            let (tx, rx) = oneshot::channel();
            if let Some(l) = st.locks.get_mut(name) {
                l.queue.push_back(Waiter { session: me, grant: tx });
            }
            let before = st.waiting.insert(me, name.to_string());
            debug_assert!(before.is_none(), "a session waits for one lock at a time");
            rx
        };
        // Should the future be dropped mid-wait, the guard takes the session
        // out of the queue (if the receiver goes first, `pass_on` skips it).
        let mut guard = WaitGuard { locks: self, me, name, settled: false };
        let timer = async {
            match timeout {
                Some(t) => tokio::time::sleep(t).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            r = granted => {
                guard.settled = true;
                debug_assert!(r.is_ok(), "a waiter's channel closed while it was queued");
                Ok(r.is_ok())
            }
            _ = entry.wait_kill(Kill::Query) => {
                // Granted in the meantime or not, the statement is stopped
                // without the lock.
                guard.settled = true;
                if guard.leave() {
                    self.state().release_one(me, name);
                }
                Err(interrupted())
            }
            _ = timer => {
                guard.settled = true;
                // The hand-off may have come just before the timer: keep it.
                Ok(guard.leave())
            }
        }
    }

    /// RELEASE_LOCK for session `me`.
    pub fn release(&self, me: u32, name: &str) -> Released {
        let mut st = self.state();
        match st.locks.get(name) {
            None => Released::NotHeld,
            Some(l) if l.owner != me => Released::NotOwner,
            Some(_) => {
                st.release_one(me, name);
                Released::Yes
            }
        }
    }

    /// RELEASE_ALL_LOCKS, and the end of a session: every lock `me` holds, all
    /// levels. Returns the number of levels released.
    pub fn release_all(&self, me: u32) -> u64 {
        let mut st = self.state();
        if st.locks.is_empty() {
            return 0;
        }
        let mine: Vec<(String, u64)> =
            st.locks.iter().filter(|(_, l)| l.owner == me).map(|(n, l)| (n.clone(), l.count)).collect();
        let mut n = 0;
        for (name, count) in mine {
            n += count;
            st.pass_on(&name);
        }
        n
    }

    /// The connection id holding `name` (IS_USED_LOCK), None when free.
    pub fn owner(&self, name: &str) -> Option<u32> {
        self.state().locks.get(name).map(|l| l.owner)
    }
}

/// A session's place in a lock's queue while its wait is in flight. Dropped
/// without `settled` (the statement's future went away mid-wait) it leaves
/// the queue, or gives the lock on if it was handed over meanwhile.
struct WaitGuard<'a> {
    locks: &'a UserLocks,
    me: u32,
    name: &'a str,
    settled: bool,
}

impl WaitGuard<'_> {
    /// Leave the queue. True if the lock was handed over first (the session
    /// now holds it).
    fn leave(&self) -> bool {
        let mut st = self.locks.state();
        let State { locks, waiting } = &mut *st;
        let Some(l) = locks.get_mut(self.name) else { return false };
        if let Some(i) = l.queue.iter().position(|w| w.session == self.me) {
            l.queue.remove(i);
            waiting.remove(&self.me);
            return false;
        }
        l.owner == self.me
    }
}

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        if !self.settled && self.leave() {
            self.locks.state().release_one(self.me, self.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: u32) -> std::sync::Arc<SessionEntry> {
        SessionEntry::new(id, "u")
    }

    #[test]
    fn reentrant_levels_and_release_answers() {
        let l = UserLocks::default();
        assert!(l.try_acquire(1, "a"));
        assert!(l.try_acquire(1, "a"));
        assert!(!l.try_acquire(2, "a"));
        assert_eq!(l.owner("a"), Some(1));
        assert_eq!(l.release(2, "a"), Released::NotOwner);
        assert_eq!(l.release(1, "a"), Released::Yes);
        assert_eq!(l.owner("a"), Some(1), "one level left");
        assert_eq!(l.release(1, "a"), Released::Yes);
        assert_eq!(l.owner("a"), None);
        assert_eq!(l.release(1, "a"), Released::NotHeld);
        assert!(l.try_acquire(1, "a") && l.try_acquire(1, "a") && l.try_acquire(1, "b"));
        assert!(l.try_acquire(2, "c"));
        assert_eq!(l.release_all(1), 3);
        assert_eq!((l.owner("a"), l.owner("b"), l.owner("c")), (None, None, Some(2)));
        assert_eq!(l.release_all(1), 0);
    }

    #[tokio::test]
    async fn a_release_hands_the_lock_to_the_first_waiter() {
        let l = std::sync::Arc::new(UserLocks::default());
        assert!(l.try_acquire(1, "a"));
        let (l2, e2) = (l.clone(), entry(2));
        let w2 = tokio::spawn(async move { l2.acquire(&e2, "a", None).await });
        tokio::task::yield_now().await;
        let (l3, e3) = (l.clone(), entry(3));
        let w3 = tokio::spawn(async move { l3.acquire(&e3, "a", None).await });
        tokio::task::yield_now().await;
        assert!(!l.try_acquire(4, "a"), "held");
        assert_eq!(l.release(1, "a"), Released::Yes);
        assert!(w2.await.unwrap().unwrap());
        assert_eq!(l.owner("a"), Some(2), "handed over, not taken by a newcomer");
        assert_eq!(l.release_all(2), 1);
        assert!(w3.await.unwrap().unwrap());
        assert_eq!(l.owner("a"), Some(3));
    }

    #[tokio::test]
    async fn timeouts_kills_and_dropped_waits_leave_the_queue() {
        let l = std::sync::Arc::new(UserLocks::default());
        assert!(l.try_acquire(1, "a"));
        let e2 = entry(2);
        assert!(!l.acquire(&e2, "a", Some(Duration::ZERO)).await.unwrap());
        assert!(!l.acquire(&e2, "a", Some(Duration::from_millis(1))).await.unwrap());
        // Killed while waiting: 1317, and out of the queue.
        let (l2, e2b) = (l.clone(), e2.clone());
        let w = tokio::spawn(async move { l2.acquire(&e2b, "a", None).await });
        tokio::task::yield_now().await;
        e2.request_kill(Kill::Query);
        assert_eq!(w.await.unwrap().unwrap_err().code, 1317);
        // A wait whose future is dropped leaves the queue too.
        let e3 = entry(3);
        {
            let f = l.acquire(&e3, "a", None);
            tokio::pin!(f);
            assert!(futures_poll_once(f.as_mut()).await.is_none());
        }
        assert!(l.state().waiting.is_empty());
        assert_eq!(l.release(1, "a"), Released::Yes);
        assert_eq!(l.owner("a"), None, "nobody left in the queue to hand it to");
    }

    /// Poll a future once: Some(output) if it finished.
    async fn futures_poll_once<F: std::future::Future + Unpin>(mut f: F) -> Option<F::Output> {
        std::future::poll_fn(|cx| {
            std::task::Poll::Ready(match std::pin::Pin::new(&mut f).poll(cx) {
                std::task::Poll::Ready(v) => Some(v),
                std::task::Poll::Pending => None,
            })
        })
        .await
    }

    #[tokio::test]
    async fn a_request_that_closes_a_cycle_gets_3058() {
        let l = std::sync::Arc::new(UserLocks::default());
        assert!(l.try_acquire(1, "a"));
        assert!(l.try_acquire(2, "b"));
        assert!(l.try_acquire(3, "c"));
        // 1 waits for b (held by 2), 2 waits for c (held by 3).
        let (la, e1) = (l.clone(), entry(1));
        let w1 = tokio::spawn(async move { la.acquire(&e1, "b", None).await });
        tokio::task::yield_now().await;
        let (lb, e2) = (l.clone(), entry(2));
        let w2 = tokio::spawn(async move { lb.acquire(&e2, "c", None).await });
        tokio::task::yield_now().await;
        // 3 asking for a (held by 1) closes 3 -> 1 -> 2 -> 3.
        assert_eq!(l.acquire(&entry(3), "a", Some(Duration::from_secs(100))).await.unwrap_err().code, 3058);
        // Nothing changed: 3 still holds c; releasing it lets 2 on, then 1.
        assert_eq!(l.release_all(3), 1);
        assert!(w2.await.unwrap().unwrap());
        assert_eq!(l.release_all(2), 2);
        assert!(w1.await.unwrap().unwrap());
        assert_eq!((l.owner("a"), l.owner("b"), l.owner("c")), (Some(1), Some(1), None));
    }
}
