//! Answers of take-over nodes: the definite outcome of a transaction whose
//! coordinator's data node failed while its commit was outstanding.
//!
//! When a data node fails, a survivor finishes the transactions its TCs
//! coordinated (commit if any replica committed, else abort) and tells each
//! API node the outcome of its own ones with TC_KEY_FAILCONF, naming the
//! transaction by the client's handle. The answer comes on the connection
//! to the survivor, which may deliver it before the client has even noticed
//! that the failed node's connection broke: so answers nobody waits for yet
//! are kept for a while (bounded in number and age), and a transaction that
//! starts waiting looks there first. Transaction handles are unique for the
//! client's lifetime (`cluster::ClusterShared::alloc_txn`), so an answer
//! cannot be taken for another transaction's.

use norr_kernel::NodeId;
use norr_signals::{TcKeyFailConf, TxnOutcome};
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// The outcome a take-over node reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Answer {
    pub committed: bool,
    /// The commit's GCI (0 when rolled back).
    pub gci: u64,
}

/// Answers nobody waited for are dropped after this long: a waiter starts
/// within moments of the answer (when its connection's close is noticed).
const KEEP_UNCLAIMED: Duration = Duration::from_secs(60);
/// At most this many unclaimed answers are kept (the oldest go first).
const MAX_UNCLAIMED: usize = 16 * 1024;

#[derive(Default)]
struct Inner {
    waiting: HashMap<u64, oneshot::Sender<Answer>>,
    unclaimed: HashMap<u64, Answer>,
    /// Arrival order of `unclaimed` (entries already claimed are skipped).
    order: VecDeque<(u64, Instant)>,
}

/// One per client, shared by all its connections.
#[derive(Default)]
pub(crate) struct TakeoverAnswers {
    inner: Mutex<Inner>,
}

impl TakeoverAnswers {
    /// A TC_KEY_FAILCONF arrived from data node `from`.
    pub fn deliver(&self, from: NodeId, conf: &TcKeyFailConf) {
        let answer = match conf.outcome {
            // A take-over node never holds a commit for disk; if it did, the
            // transaction is committed all the same.
            TxnOutcome::Committed | TxnOutcome::CommittedNotOnDisk => Answer { committed: true, gci: conf.gci },
            TxnOutcome::RolledBack => Answer { committed: false, gci: 0 },
            TxnOutcome::Open => {
                // Not an outcome: ignore it rather than guess (the waiter
                // then reports the outcome as unknown).
                tracing::warn!(node = from, txn = conf.txn, "TC_KEY_FAILCONF without an outcome (Open): ignored");
                return;
            }
        };
        tracing::debug!(node = from, txn = conf.txn, ?answer, "take-over answer");
        let mut g = self.inner.lock().expect("answers lock");
        if let Some(tx) = g.waiting.remove(&conf.txn) {
            // The waiter may have timed out just now: then nobody needs it.
            let _ = tx.send(answer);
            return;
        }
        let now = Instant::now();
        g.prune(now);
        if g.unclaimed.insert(conf.txn, answer).is_none() {
            g.order.push_back((conf.txn, now));
        }
    }

    /// Wait up to `timeout` for the answer about `txn`; None if none came.
    pub async fn wait(&self, txn: u64, timeout: Duration) -> Option<Answer> {
        let rx = {
            let mut g = self.inner.lock().expect("answers lock");
            if let Some(a) = g.unclaimed.remove(&txn) {
                return Some(a);
            }
            let (tx, rx) = oneshot::channel();
            let old = g.waiting.insert(txn, tx);
            debug_assert!(old.is_none(), "two waiters for transaction {txn}");
            rx
        };
        let got = tokio::time::timeout(timeout, rx).await;
        // Gone already if the answer came; on a time-out (or a dropped
        // future, which never gets here) the entry must not linger.
        self.inner.lock().expect("answers lock").waiting.remove(&txn);
        match got {
            Ok(Ok(a)) => Some(a),
            _ => None,
        }
    }

    #[cfg(test)]
    fn unclaimed(&self) -> usize {
        self.inner.lock().unwrap().unclaimed.len()
    }
}

impl Inner {
    /// Drop unclaimed answers that are too old, and the oldest beyond the cap.
    fn prune(&mut self, now: Instant) {
        while let Some(&(txn, at)) = self.order.front() {
            let claimed = !self.unclaimed.contains_key(&txn);
            if claimed || now.duration_since(at) > KEEP_UNCLAIMED || self.unclaimed.len() >= MAX_UNCLAIMED {
                self.order.pop_front();
                if !claimed {
                    self.unclaimed.remove(&txn);
                }
            } else {
                break;
            }
        }
        debug_assert!(self.unclaimed.len() < MAX_UNCLAIMED);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(txn: u64, outcome: TxnOutcome, gci: u64) -> TcKeyFailConf {
        TcKeyFailConf { txn, outcome, gci }
    }

    #[tokio::test]
    async fn answers_reach_waiters_early_or_late() {
        let a = TakeoverAnswers::default();
        // Before the wait starts (the survivor was quicker than the close).
        a.deliver(2, &conf(7, TxnOutcome::Committed, 42));
        assert_eq!(a.wait(7, Duration::from_secs(5)).await, Some(Answer { committed: true, gci: 42 }));
        assert_eq!(a.unclaimed(), 0);
        // While waiting.
        let a = std::sync::Arc::new(a);
        let w = tokio::spawn({
            let a = a.clone();
            async move { a.wait(8, Duration::from_secs(5)).await }
        });
        while a.inner.lock().unwrap().waiting.is_empty() {
            tokio::task::yield_now().await;
        }
        a.deliver(3, &conf(8, TxnOutcome::RolledBack, 0));
        assert_eq!(w.await.unwrap(), Some(Answer { committed: false, gci: 0 }));
        // Nobody answers: None after the time-out, and no waiter is left.
        assert_eq!(a.wait(9, Duration::from_millis(20)).await, None);
        assert!(a.inner.lock().unwrap().waiting.is_empty());
        // An answer without an outcome is ignored.
        a.deliver(3, &conf(10, TxnOutcome::Open, 0));
        assert_eq!(a.unclaimed(), 0);
    }

    #[test]
    fn unclaimed_answers_are_bounded() {
        let a = TakeoverAnswers::default();
        for t in 0..(MAX_UNCLAIMED as u64 + 100) {
            a.deliver(2, &conf(t, TxnOutcome::RolledBack, 0));
        }
        assert_eq!(a.unclaimed(), MAX_UNCLAIMED);
        let g = a.inner.lock().unwrap();
        assert!(!g.unclaimed.contains_key(&0), "the oldest went first");
        assert!(g.unclaimed.contains_key(&(MAX_UNCLAIMED as u64 + 99)));
    }
}
