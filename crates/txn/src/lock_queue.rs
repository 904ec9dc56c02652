//! Row lock manager of one LQH: shared / exclusive locks keyed by `LockKey`,
//! with a FIFO wait queue per key.
//!
//! Rules:
//! * re-entrant: an owner that holds a lock at least as strong gets it at once;
//! * upgrade: an owner holding Shared asking Exclusive gets it at once if it is
//!   the only holder, else it waits at the head of the queue (an upgrade must not
//!   queue behind a request that itself waits for the upgrader to go away);
//! * FIFO: a new request waits if anyone waits before it, even if compatible
//!   with the holders, so an exclusive waiter is never starved by readers.
//!
//! Deadlocks are not detected: the lock-wait time-out (LQH) breaks them.

use crate::fxhash::FxHashMap;
use norr_signals::internal::TxnId;
use norr_signals::schema::{IndexId, TableId};
use smallvec::SmallVec;
use std::collections::VecDeque;

/// What a lock protects.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LockKey {
    /// A row: table and encoded primary key.
    Row(TableId, Vec<u8>),
    /// A unique index value: table, index and encoded index key, so two
    /// uncommitted writers of the same unique value serialize.
    Unique(TableId, IndexId, Vec<u8>),
}

impl LockKey {
    pub fn table(&self) -> TableId {
        match self {
            LockKey::Row(t, _) | LockKey::Unique(t, _, _) => *t,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    Shared,
    Exclusive,
}

impl Mode {
    fn compatible(self, other: Mode) -> bool {
        self == Mode::Shared && other == Mode::Shared
    }
}

/// Result of an acquire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acquire {
    Granted,
    /// Queued; a later `Grant` with this tag says when it is granted.
    Waiting,
}

/// A waiter that became a holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    pub owner: TxnId,
    pub tag: u64,
}

#[derive(Debug, Clone, Copy)]
struct Waiter {
    owner: TxnId,
    mode: Mode,
    tag: u64,
}

#[derive(Debug, Default)]
struct Entry {
    /// At most one Exclusive holder, or any number of Shared holders; an owner
    /// appears at most once.
    /// Inline for the usual single holder: no allocation per locked row.
    holders: SmallVec<[(TxnId, Mode); 1]>,
    waiters: VecDeque<Waiter>,
}

impl Entry {
    fn held_by(&self, owner: TxnId) -> Option<Mode> {
        self.holders.iter().find(|h| h.0 == owner).map(|h| h.1)
    }

    fn can_grant(&self, owner: TxnId, mode: Mode) -> bool {
        match self.held_by(owner) {
            Some(held) if held >= mode => true,
            // Upgrade: only as the sole holder.
            Some(_) => self.holders.len() == 1,
            None => self.holders.iter().all(|h| h.1.compatible(mode)),
        }
    }

    fn grant(&mut self, owner: TxnId, mode: Mode) {
        if let Some(h) = self.holders.iter_mut().find(|h| h.0 == owner) {
            h.1 = h.1.max(mode);
        } else {
            self.holders.push((owner, mode));
        }
        self.check();
    }

    /// Grant waiters from the head of the queue while they fit.
    fn wake(&mut self, out: &mut Vec<Grant>) {
        while let Some(w) = self.waiters.front().copied() {
            if !self.can_grant(w.owner, w.mode) {
                break;
            }
            self.waiters.pop_front();
            self.grant(w.owner, w.mode);
            out.push(Grant { owner: w.owner, tag: w.tag });
        }
    }

    fn check(&self) {
        let x = self.holders.iter().filter(|h| h.1 == Mode::Exclusive).count();
        assert!(x == 0 || self.holders.len() == 1, "exclusive lock shared: {:?}", self.holders);
    }
}

/// Every lock of one LQH. Lookups only (no iteration), so a hash map keeps traces
/// deterministic.
#[derive(Debug, Default)]
pub struct LockTable {
    entries: FxHashMap<LockKey, Entry>,
    waiting: usize,
}

impl LockTable {
    pub fn new() -> LockTable {
        LockTable::default()
    }

    /// Ask for `key` in `mode` on behalf of `owner`. `tag` names the wait if it
    /// must queue. An owner may wait on a key more than once (an operation and
    /// a scan of one transaction): once it holds the key, its later waits are
    /// granted as they reach the head of the queue.
    pub fn acquire(&mut self, key: &LockKey, owner: TxnId, mode: Mode, tag: u64) -> Acquire {
        self.acquire_tracked(key, owner, mode, tag).0
    }

    /// `acquire`, also telling whether `owner` neither held nor waited for
    /// `key` before (so the caller records the key once per owner without a
    /// set of its own).
    pub fn acquire_tracked(&mut self, key: &LockKey, owner: TxnId, mode: Mode, tag: u64) -> (Acquire, bool) {
        // Clone the key only for a new entry (a re-entrant request finds one).
        let e = match self.entries.get_mut(key) {
            Some(e) => e,
            None => self.entries.entry(key.clone()).or_default(),
        };
        let held = e.held_by(owner);
        let first = held.is_none() && !e.waiters.iter().any(|w| w.owner == owner);
        if e.can_grant(owner, mode) && (held.is_some() || e.waiters.is_empty()) {
            e.grant(owner, mode);
            return (Acquire::Granted, first);
        }
        let w = Waiter { owner, mode, tag };
        if held.is_some() {
            // Upgrade waits first in line.
            e.waiters.push_front(w);
        } else {
            e.waiters.push_back(w);
        }
        self.waiting += 1;
        (Acquire::Waiting, first)
    }

    /// `acquire_tracked` that never queues (NOWAIT / SKIP LOCKED): the lock
    /// if it can be granted now, under the same rules (re-entrant, upgrade
    /// as sole holder, nobody waiting before a new holder); else None and the
    /// table is exactly as before. Some(first) as for `acquire_tracked`.
    pub fn try_acquire(&mut self, key: &LockKey, owner: TxnId, mode: Mode) -> Option<bool> {
        let Some(e) = self.entries.get_mut(key) else {
            let mut e = Entry::default();
            e.grant(owner, mode);
            self.entries.insert(key.clone(), e);
            return Some(true);
        };
        let held = e.held_by(owner);
        if !(e.can_grant(owner, mode) && (held.is_some() || e.waiters.is_empty())) {
            return None;
        }
        let first = held.is_none() && !e.waiters.iter().any(|w| w.owner == owner);
        e.grant(owner, mode);
        Some(first)
    }

    /// Does `owner` hold `key` at least in `mode`?
    pub fn holds(&self, key: &LockKey, owner: TxnId, mode: Mode) -> bool {
        self.entries.get(key).and_then(|e| e.held_by(owner)).is_some_and(|m| m >= mode)
    }

    /// Drop a queued wait (time-out, abort). Waiters behind it may now be granted.
    pub fn cancel_wait(&mut self, key: &LockKey, owner: TxnId, tag: u64, out: &mut Vec<Grant>) {
        let Some(e) = self.entries.get_mut(key) else {
            return;
        };
        let before = e.waiters.len();
        e.waiters.retain(|w| !(w.owner == owner && w.tag == tag));
        e.wake(out);
        self.waiting -= before - e.waiters.len();
        if e.holders.is_empty() && e.waiters.is_empty() {
            self.entries.remove(key);
        }
    }

    /// Release `owner`'s hold on `key` but not its waits (a lock taken and
    /// found useless while the owner may still wait on it elsewhere).
    pub fn unlock(&mut self, key: &LockKey, owner: TxnId, out: &mut Vec<Grant>) {
        let Some(e) = self.entries.get_mut(key) else {
            return;
        };
        e.holders.retain(|h| h.0 != owner);
        let before = e.waiters.len();
        e.wake(out);
        self.waiting -= before - e.waiters.len();
        if e.holders.is_empty() && e.waiters.is_empty() {
            self.entries.remove(key);
        }
    }

    /// Release `owner`'s hold and waits on `key`; returns the waiters granted.
    pub fn release(&mut self, key: &LockKey, owner: TxnId, out: &mut Vec<Grant>) {
        let Some(e) = self.entries.get_mut(key) else {
            return;
        };
        e.holders.retain(|h| h.0 != owner);
        let before = e.waiters.len();
        e.waiters.retain(|w| w.owner != owner);
        e.wake(out);
        self.waiting -= before - e.waiters.len();
        if e.holders.is_empty() && e.waiters.is_empty() {
            self.entries.remove(key);
        }
    }

    /// Keys with a holder or waiter.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Waits queued over all keys.
    pub fn waiting(&self) -> usize {
        self.waiting
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(n: u8) -> LockKey {
        LockKey::Row(1, vec![n])
    }

    #[test]
    fn shared_compatible_exclusive_waits_fifo() {
        let mut t = LockTable::new();
        let mut g = Vec::new();
        assert_eq!(t.acquire(&k(1), 1, Mode::Shared, 10), Acquire::Granted);
        assert_eq!(t.acquire(&k(1), 2, Mode::Shared, 20), Acquire::Granted);
        assert_eq!(t.acquire(&k(1), 3, Mode::Exclusive, 30), Acquire::Waiting);
        // FIFO: a compatible reader queues behind the writer.
        assert_eq!(t.acquire(&k(1), 4, Mode::Shared, 40), Acquire::Waiting);
        t.release(&k(1), 1, &mut g);
        assert!(g.is_empty());
        t.release(&k(1), 2, &mut g);
        assert_eq!(g, vec![Grant { owner: 3, tag: 30 }]);
        g.clear();
        t.release(&k(1), 3, &mut g);
        assert_eq!(g, vec![Grant { owner: 4, tag: 40 }]);
        g.clear();
        t.release(&k(1), 4, &mut g);
        assert!(t.is_empty());
        assert_eq!(t.waiting(), 0);
    }

    #[test]
    fn reentrant_and_upgrade() {
        let mut t = LockTable::new();
        let mut g = Vec::new();
        assert_eq!(t.acquire(&k(1), 1, Mode::Exclusive, 1), Acquire::Granted);
        assert_eq!(t.acquire(&k(1), 1, Mode::Shared, 2), Acquire::Granted);
        assert_eq!(t.acquire(&k(1), 1, Mode::Exclusive, 3), Acquire::Granted);
        assert_eq!(t.acquire(&k(2), 1, Mode::Shared, 4), Acquire::Granted);
        assert_eq!(t.acquire(&k(2), 1, Mode::Exclusive, 5), Acquire::Granted);
        assert!(t.holds(&k(2), 1, Mode::Exclusive));
        // Upgrade with another reader: waits at the head of the queue.
        assert_eq!(t.acquire(&k(3), 1, Mode::Shared, 6), Acquire::Granted);
        assert_eq!(t.acquire(&k(3), 2, Mode::Shared, 7), Acquire::Granted);
        assert_eq!(t.acquire(&k(3), 3, Mode::Exclusive, 8), Acquire::Waiting);
        assert_eq!(t.acquire(&k(3), 1, Mode::Exclusive, 9), Acquire::Waiting);
        t.release(&k(3), 2, &mut g);
        assert_eq!(g, vec![Grant { owner: 1, tag: 9 }]);
        assert!(t.holds(&k(3), 1, Mode::Exclusive));
    }

    #[test]
    fn unlock_keeps_waits_and_double_waits_are_granted() {
        let mut t = LockTable::new();
        let mut g = Vec::new();
        assert_eq!(t.acquire(&k(1), 1, Mode::Exclusive, 1), Acquire::Granted);
        assert_eq!(t.acquire(&k(1), 2, Mode::Shared, 2), Acquire::Waiting);
        assert_eq!(t.acquire(&k(1), 2, Mode::Exclusive, 3), Acquire::Waiting);
        t.release(&k(1), 1, &mut g);
        assert_eq!(g, vec![Grant { owner: 2, tag: 2 }, Grant { owner: 2, tag: 3 }]);
        assert!(t.holds(&k(1), 2, Mode::Exclusive));
        g.clear();
        // unlock drops the hold, not the owner's waits.
        assert_eq!(t.acquire(&k(2), 3, Mode::Shared, 4), Acquire::Granted);
        assert_eq!(t.acquire(&k(2), 5, Mode::Shared, 5), Acquire::Granted);
        assert_eq!(t.acquire(&k(2), 4, Mode::Exclusive, 6), Acquire::Waiting);
        assert_eq!(t.acquire(&k(2), 3, Mode::Exclusive, 7), Acquire::Waiting);
        t.unlock(&k(2), 3, &mut g);
        assert!(g.is_empty());
        assert_eq!(t.waiting(), 2);
        t.release(&k(2), 5, &mut g);
        assert_eq!(g, vec![Grant { owner: 3, tag: 7 }], "the upgrade waited first in line");
    }

    #[test]
    fn try_acquire_never_queues() {
        let mut t = LockTable::new();
        let mut g = Vec::new();
        assert_eq!(t.try_acquire(&k(1), 1, Mode::Exclusive), Some(true));
        assert_eq!(t.try_acquire(&k(1), 1, Mode::Shared), Some(false), "re-entrant");
        assert_eq!(t.try_acquire(&k(1), 2, Mode::Shared), None);
        assert_eq!(t.try_acquire(&k(1), 2, Mode::Exclusive), None);
        assert_eq!(t.waiting(), 0);
        // Shared with shared; not past a queued writer (FIFO), nor as an
        // upgrade beside another reader.
        assert_eq!(t.try_acquire(&k(2), 1, Mode::Shared), Some(true));
        assert_eq!(t.try_acquire(&k(2), 2, Mode::Shared), Some(true));
        assert_eq!(t.try_acquire(&k(2), 1, Mode::Exclusive), None);
        assert_eq!(t.acquire(&k(2), 3, Mode::Exclusive, 30), Acquire::Waiting);
        assert_eq!(t.try_acquire(&k(2), 4, Mode::Shared), None);
        // An owner that waits on the key is not new to it.
        assert_eq!(t.acquire(&k(3), 5, Mode::Exclusive, 50), Acquire::Granted);
        assert_eq!(t.acquire(&k(3), 6, Mode::Exclusive, 60), Acquire::Waiting);
        t.release(&k(3), 5, &mut g);
        assert_eq!(g, vec![Grant { owner: 6, tag: 60 }]);
        assert_eq!(t.try_acquire(&k(3), 6, Mode::Shared), Some(false));
        // Refusals leave nothing behind.
        for (key, o) in [(k(1), 1), (k(2), 1), (k(2), 2), (k(3), 6)] {
            t.release(&key, o, &mut g);
        }
        t.cancel_wait(&k(2), 3, 30, &mut g);
        t.release(&k(2), 3, &mut g);
        assert!(t.is_empty() && t.waiting() == 0);
    }

    #[test]
    fn cancel_wait_wakes_followers() {
        let mut t = LockTable::new();
        let mut g = Vec::new();
        assert_eq!(t.acquire(&k(1), 1, Mode::Shared, 1), Acquire::Granted);
        assert_eq!(t.acquire(&k(1), 2, Mode::Exclusive, 2), Acquire::Waiting);
        assert_eq!(t.acquire(&k(1), 3, Mode::Shared, 3), Acquire::Waiting);
        t.cancel_wait(&k(1), 2, 2, &mut g);
        assert_eq!(g, vec![Grant { owner: 3, tag: 3 }]);
        assert_eq!(t.waiting(), 0);
        g.clear();
        t.release(&k(1), 1, &mut g);
        t.release(&k(1), 3, &mut g);
        assert!(g.is_empty() && t.is_empty());
    }
}
