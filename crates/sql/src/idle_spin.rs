//! Keeps sqld's event loop polling for a short while after client traffic
//! instead of sleeping in epoll straight away.
//!
//! On small virtual machines a thread that sleeps is woken through the
//! hypervisor, which costs tens of microseconds per wakeup; with sysbench-like
//! clients (many connections, one statement in flight each) sqld would sleep
//! and be woken once per statement. While traffic keeps arriving, a spinner
//! task yields in a loop; every yield makes the runtime poll its sockets with
//! a zero timeout, so the next client packet or data-node reply is seen
//! without a sleep. After `window` without a client packet the spinner parks,
//! and the next packet wakes it. It is the SQL node's counterpart of the data
//! node's `--idle-spin-us` (RonDB's spintime).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

pub struct IdleSpin {
    window: Duration,
    /// Client packets seen; the spinner watches it change.
    activity: AtomicU64,
    parked: AtomicBool,
    wake: Notify,
}

impl IdleSpin {
    /// `window` zero turns spinning off: `touch` is then a no-op.
    pub fn new(window: Duration) -> IdleSpin {
        IdleSpin { window, activity: AtomicU64::new(0), parked: AtomicBool::new(false), wake: Notify::new() }
    }

    pub fn enabled(&self) -> bool {
        !self.window.is_zero()
    }

    /// A client packet arrived.
    #[inline]
    pub fn touch(&self) {
        if !self.enabled() {
            return;
        }
        self.activity.fetch_add(1, Ordering::Relaxed);
        if self.parked.load(Ordering::Relaxed) && self.parked.swap(false, Ordering::AcqRel) {
            self.wake.notify_one();
        }
    }

    /// The spinner task: runs forever (spawn it once per runtime thread).
    pub async fn run(&self) {
        if !self.enabled() {
            return;
        }
        loop {
            let mut seen = self.activity.load(Ordering::Relaxed);
            let mut since = Instant::now();
            loop {
                tokio::task::yield_now().await;
                let now_seen = self.activity.load(Ordering::Relaxed);
                if now_seen != seen {
                    seen = now_seen;
                    since = Instant::now();
                } else if since.elapsed() >= self.window {
                    break;
                }
            }
            // Park. `notify_one` stores a permit, so a touch between the flag
            // store and the await is not lost.
            self.parked.store(true, Ordering::Release);
            if self.activity.load(Ordering::Relaxed) != seen {
                self.parked.store(false, Ordering::Release);
                continue;
            }
            self.wake.notified().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test(flavor = "current_thread")]
    async fn parks_after_the_window_and_wakes_on_touch() {
        let spin = Arc::new(IdleSpin::new(Duration::from_millis(2)));
        let task = tokio::spawn({
            let spin = spin.clone();
            async move { spin.run().await }
        });
        // Let it spin out its window and park.
        while !spin.parked.load(Ordering::Acquire) {
            tokio::task::yield_now().await;
        }
        spin.touch();
        assert!(!spin.parked.load(Ordering::Acquire), "touch clears the parked flag");
        // It resumes spinning and parks again after another quiet window.
        while !spin.parked.load(Ordering::Acquire) {
            tokio::task::yield_now().await;
        }
        task.abort();
    }

    #[test]
    fn zero_window_is_off() {
        let spin = IdleSpin::new(Duration::ZERO);
        assert!(!spin.enabled());
        spin.touch();
        assert_eq!(spin.activity.load(Ordering::Relaxed), 0);
    }
}
