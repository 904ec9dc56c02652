//! API nodes in the data node's own process (`DataNodeHandle::connect_local`,
//! used by `norr up` for its SQL node): how their pipes
//! (`norr_transport::local_pipe`) reach the event loop.
//!
//! A pipe with activity pushes its token here. The event loop looks at this
//! list every round, so while it is busy or spinning no system call is made
//! at all; only a loop blocked in poll must be woken through the mio waker
//! (one eventfd write). The `parked` / `pending` pair is a Dekker handshake:
//! the loop sets `parked` and then checks `pending`; a waker sets `pending` and
//! then checks `parked`. Both are SeqCst, so at least one of the two sees the
//! other's store and no wake-up is lost.

use norr_transport::local_pipe::{self, ApiEnd, NodeEnd, NodeWake};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

pub(crate) struct LocalReady {
    /// Tokens of local connections with something to do.
    tokens: Mutex<Vec<usize>>,
    /// Pipes handed over by `connect_local`, not yet taken by the loop.
    accepts: Mutex<Vec<NodeEnd>>,
    /// `tokens` or `accepts` may be non-empty (checked without a lock).
    pending: AtomicBool,
    /// The loop is blocked in poll, or about to be.
    parked: AtomicBool,
    /// The loop has stopped: no new connections.
    stopped: AtomicBool,
    waker: Arc<mio::Waker>,
}

impl NodeWake for LocalReady {
    fn wake(&self, token: usize) {
        self.tokens.lock().unwrap_or_else(|e| e.into_inner()).push(token);
        self.signal();
    }
}

impl LocalReady {
    pub fn new(waker: Arc<mio::Waker>) -> LocalReady {
        LocalReady {
            tokens: Mutex::new(Vec::new()),
            accepts: Mutex::new(Vec::new()),
            pending: AtomicBool::new(false),
            parked: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            waker,
        }
    }

    fn signal(&self) {
        self.pending.store(true, Ordering::SeqCst);
        if self.parked.load(Ordering::SeqCst) {
            if let Err(e) = self.waker.wake() {
                tracing::warn!("waking the data node's event loop failed: {e}");
            }
        }
    }

    /// A new in-process connection: the API end for the caller; the loop
    /// takes the node end on its next round.
    pub fn connect(self: &Arc<Self>) -> io::Result<ApiEnd> {
        let (api, node) = local_pipe::pipe(self.clone());
        {
            let mut accepts = self.accepts.lock().unwrap_or_else(|e| e.into_inner());
            // Checked under the lock `stop` drains under, so no end is left
            // behind in a stopped node.
            if self.stopped.load(Ordering::SeqCst) {
                return Err(io::Error::new(io::ErrorKind::NotConnected, "the data node has stopped"));
            }
            accepts.push(node);
        }
        self.signal();
        Ok(api)
    }

    pub fn has_work(&self) -> bool {
        self.pending.load(Ordering::SeqCst)
    }

    /// Move the pending tokens and new pipes into the loop's lists.
    pub fn take(&self, tokens: &mut Vec<usize>, accepts: &mut Vec<NodeEnd>) {
        // Cleared first: a wake after this point sets it again.
        self.pending.store(false, Ordering::SeqCst);
        std::mem::swap(&mut *self.tokens.lock().unwrap_or_else(|e| e.into_inner()), tokens);
        std::mem::swap(&mut *self.accepts.lock().unwrap_or_else(|e| e.into_inner()), accepts);
    }

    /// The loop is about to block in poll. False if it must not block: there
    /// is work (it then polls without blocking; `unpark` either way).
    pub fn park(&self) -> bool {
        self.parked.store(true, Ordering::SeqCst);
        !self.pending.load(Ordering::SeqCst)
    }

    pub fn unpark(&self) {
        self.parked.store(false, Ordering::SeqCst);
    }

    /// The loop is stopping: refuse new connections and close the pipes
    /// never taken (their API ends read end-of-file).
    pub fn stop(&self) {
        let never_taken = {
            let mut accepts = self.accepts.lock().unwrap_or_else(|e| e.into_inner());
            self.stopped.store(true, Ordering::SeqCst);
            std::mem::take(&mut *accepts)
        };
        drop(never_taken);
    }
}
