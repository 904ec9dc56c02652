//! An in-process byte pipe between an API node and a data node that run in the
//! same process (`norr up`): the colocated link, in the role of NDB's
//! shared-memory transporter.
//!
//! The same frames cross it as cross a socket, so the data node validates them
//! the same way; only the system calls are gone. A socket costs a `sendto`, a
//! `recvfrom` and usually an `epoll_wait` on each side per message, and on a
//! small virtual machine those (and the wake-ups behind them) were over a
//! third of the CPU of a point select (bench/RESULTS.md). Here a message is a
//! copy into a buffer under a mutex, and a wake-up only when the other side
//! sleeps.
//!
//! Each direction is a bounded buffer ([`PIPE_CAPACITY_BYTES`]): a writer
//! facing a full buffer gets `WouldBlock` (the data node) or waits (the API
//! node), as with a socket whose send buffer is full, so neither side can make
//! the other hold unbounded memory.
//!
//! The API end is polled like an async socket (`poll_read`, `try_write`,
//! `poll_writable`). The data node end is non-blocking `Read`/`Write`; the
//! data node's event loop learns that an end needs attention through
//! [`NodeWake`] with the token it gave the end when it took it
//! ([`NodeEnd::set_token`]).

use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// Most bytes buffered in one direction. A write that finds the buffer full
/// waits; one that finds room may take up to the room left.
pub const PIPE_CAPACITY_BYTES: usize = 1 << 20;

/// How a pipe tells the data node's event loop that an end has something for
/// it (bytes to read, room to write, or the API end closed). Implemented by the
/// host; called from the API node's threads.
pub trait NodeWake: Send + Sync {
    fn wake(&self, token: usize);
}

/// No token yet: the data node has not taken the end.
const NO_TOKEN: usize = usize::MAX;

/// One direction of the pipe.
#[derive(Default)]
struct Direction {
    buf: Vec<u8>,
    /// Bytes before `pos` were read already.
    pos: usize,
    /// The writing end is gone: the reader sees end-of-file after the bytes.
    writer_closed: bool,
    /// The reading end is gone: writes fail.
    reader_closed: bool,
    /// A writer found the buffer full and waits for room.
    writer_waiting: bool,
    /// The API end's task waiting in `poll_read` / `poll_writable`.
    waker: Option<Waker>,
}

impl Direction {
    fn len(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn room(&self) -> usize {
        PIPE_CAPACITY_BYTES.saturating_sub(self.len())
    }

    /// Append what fits of `data`; returns how much.
    fn push(&mut self, data: &[u8]) -> usize {
        let n = data.len().min(self.room());
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        self.buf.extend_from_slice(&data[..n]);
        n
    }

    /// Move up to `out.len()` bytes into `out`.
    fn pop(&mut self, out: &mut [u8]) -> usize {
        self.pop_with(|avail| {
            let n = out.len().min(avail.len());
            out[..n].copy_from_slice(&avail[..n]);
            n
        })
    }

    /// Hand the buffered bytes to `take`, which returns how many it took.
    fn pop_with(&mut self, take: impl FnOnce(&[u8]) -> usize) -> usize {
        let n = take(&self.buf[self.pos..]);
        assert!(n <= self.len(), "took {n} of {} bytes", self.len());
        self.pos += n;
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos >= PIPE_CAPACITY_BYTES / 2 {
            // Keep the live bytes near the front so the buffer stays bounded.
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        debug_assert!(self.len() <= PIPE_CAPACITY_BYTES);
        n
    }
}

struct Pipe {
    to_node: Mutex<Direction>,
    to_api: Mutex<Direction>,
    node: Arc<dyn NodeWake>,
    token: AtomicUsize,
    /// The node has been told and has not looked yet: further wakes are
    /// redundant. Cleared by the node before it looks (`NodeEnd::take_wake`).
    queued: AtomicBool,
}

fn lock(m: &Mutex<Direction>) -> MutexGuard<'_, Direction> {
    // A panic while holding the lock leaves the buffer consistent (every
    // mutation is a single push or pop), so a poisoned lock is still usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Pipe {
    fn wake_node(&self) {
        if self.queued.swap(true, Ordering::AcqRel) {
            return;
        }
        let token = self.token.load(Ordering::Acquire);
        if token == NO_TOKEN {
            // Not taken yet: the node reads the end right after it takes it.
            self.queued.store(false, Ordering::Release);
            return;
        }
        self.node.wake(token);
    }
}

/// A new pipe: the API end for the client, the node end for the data node's
/// event loop (which must then call [`NodeEnd::set_token`] and read it).
pub fn pipe(node: Arc<dyn NodeWake>) -> (ApiEnd, NodeEnd) {
    let p = Arc::new(Pipe {
        to_node: Mutex::new(Direction::default()),
        to_api: Mutex::new(Direction::default()),
        node,
        token: AtomicUsize::new(NO_TOKEN),
        queued: AtomicBool::new(false),
    });
    (ApiEnd { pipe: p.clone() }, NodeEnd { pipe: p })
}

/// The API node's end. Dropping it closes the pipe (the data node reads
/// end-of-file, as from a closed socket).
pub struct ApiEnd {
    pipe: Arc<Pipe>,
}

impl ApiEnd {
    /// Read what has arrived into `out`; `Ready(Ok(0))` is end-of-file (the
    /// data node closed its end). Registers the task to be woken otherwise.
    pub fn poll_read(&self, cx: &mut Context<'_>, out: &mut [u8]) -> Poll<io::Result<usize>> {
        if out.is_empty() {
            return Poll::Ready(Ok(0));
        }
        self.poll_read_with(cx, |avail| {
            let n = out.len().min(avail.len());
            out[..n].copy_from_slice(&avail[..n]);
            n
        })
    }

    /// [`ApiEnd::poll_read`] for a reader that copies out of the pipe itself
    /// (into uninitialised memory, say): `take` gets the bytes that have
    /// arrived (never empty) and returns how many it took (at least one).
    pub fn poll_read_with(&self, cx: &mut Context<'_>, take: impl FnOnce(&[u8]) -> usize) -> Poll<io::Result<usize>> {
        let mut d = lock(&self.pipe.to_api);
        if d.len() == 0 {
            if d.writer_closed {
                return Poll::Ready(Ok(0));
            }
            match &d.waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => d.waker = Some(cx.waker().clone()),
            }
            return Poll::Pending;
        }
        let n = d.pop_with(take);
        debug_assert!(n > 0, "a reader took nothing of available bytes");
        let node_waits = std::mem::take(&mut d.writer_waiting);
        drop(d);
        if node_waits {
            self.pipe.wake_node();
        }
        Poll::Ready(Ok(n))
    }

    /// Queue as much of `data` as there is room for. `WouldBlock` if there is
    /// none (wait with [`ApiEnd::poll_writable`]); `BrokenPipe` once the data
    /// node closed its end.
    pub fn try_write(&self, data: &[u8]) -> io::Result<usize> {
        let mut d = lock(&self.pipe.to_node);
        if d.reader_closed {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "the data node closed the connection"));
        }
        if d.writer_closed {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "the connection was shut down"));
        }
        if data.is_empty() {
            return Ok(0);
        }
        let was_empty = d.len() == 0;
        let n = d.push(data);
        if n == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        drop(d);
        if was_empty {
            self.pipe.wake_node();
        }
        Ok(n)
    }

    /// Ready once a write can take bytes (or would fail: closed).
    pub fn poll_writable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut d = lock(&self.pipe.to_node);
        if d.room() > 0 || d.reader_closed || d.writer_closed {
            return Poll::Ready(Ok(()));
        }
        d.writer_waiting = true;
        d.waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Close the sending direction (the data node reads end-of-file after
    /// the bytes already queued). Reading goes on until the node closes.
    pub fn shutdown(&self) {
        let mut d = lock(&self.pipe.to_node);
        if d.writer_closed {
            return;
        }
        d.writer_closed = true;
        drop(d);
        self.pipe.wake_node();
    }
}

impl Drop for ApiEnd {
    fn drop(&mut self) {
        lock(&self.pipe.to_api).reader_closed = true;
        self.shutdown();
    }
}

/// The data node's end: non-blocking `Read` and `Write` like a socket.
/// Dropping it closes the pipe (the API node reads end-of-file and its
/// writes fail).
pub struct NodeEnd {
    pipe: Arc<Pipe>,
}

impl NodeEnd {
    /// Set the token [`NodeWake::wake`] is called with. The caller must read
    /// the end after this: bytes written before the token was set did not
    /// wake anyone.
    pub fn set_token(&self, token: usize) {
        assert_ne!(token, NO_TOKEN, "token {token} is reserved");
        self.pipe.token.store(token, Ordering::Release);
    }

    /// Called by the node before it looks at the end after a wake: later
    /// activity wakes it again.
    pub fn take_wake(&self) {
        self.pipe.queued.store(false, Ordering::Release);
    }

    fn close(&self) {
        {
            let mut d = lock(&self.pipe.to_api);
            d.writer_closed = true;
            if let Some(w) = d.waker.take() {
                w.wake();
            }
        }
        let mut d = lock(&self.pipe.to_node);
        d.reader_closed = true;
        if let Some(w) = d.waker.take() {
            w.wake();
        }
    }

    /// Close both directions now (as `shutdown(Both)` on a socket).
    pub fn shutdown(&self) {
        self.close();
    }
}

impl io::Read for NodeEnd {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let mut d = lock(&self.pipe.to_node);
        if d.len() == 0 {
            if d.writer_closed || out.is_empty() {
                return Ok(0);
            }
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = d.pop(out);
        if d.writer_waiting && d.room() > 0 {
            d.writer_waiting = false;
            if let Some(w) = d.waker.take() {
                w.wake();
            }
        }
        Ok(n)
    }
}

impl io::Write for NodeEnd {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let mut d = lock(&self.pipe.to_api);
        if d.reader_closed {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "the API node closed the connection"));
        }
        if d.writer_closed {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "the connection was shut down"));
        }
        if data.is_empty() {
            return Ok(0);
        }
        let n = d.push(data);
        if n == 0 {
            d.writer_waiting = true;
            return Err(io::ErrorKind::WouldBlock.into());
        }
        if let Some(w) = d.waker.take() {
            w.wake();
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for NodeEnd {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    #[derive(Default)]
    struct Wakes {
        tokens: Mutex<Vec<usize>>,
    }
    impl NodeWake for Wakes {
        fn wake(&self, token: usize) {
            self.tokens.lock().unwrap_or_else(|e| e.into_inner()).push(token);
        }
    }

    #[derive(Default)]
    struct CountWaker(AtomicUsize);
    impl Wake for CountWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A waker that counts its wakes.
    fn counting_waker() -> (Arc<CountWaker>, Waker) {
        let cw = Arc::new(CountWaker::default());
        (cw.clone(), Waker::from(cw))
    }

    fn new_pipe() -> (Arc<Wakes>, ApiEnd, NodeEnd) {
        let w = Arc::new(Wakes::default());
        let (a, n) = pipe(w.clone());
        (w, a, n)
    }

    #[test]
    fn bytes_cross_both_ways_and_the_node_is_woken_once_per_look() {
        let (wakes, api, mut node) = new_pipe();
        // Before the node took the end: no wake, and the bytes wait.
        assert_eq!(api.try_write(b"hello").unwrap(), 5);
        assert!(wakes.tokens.lock().unwrap().is_empty());
        node.set_token(7);
        let mut buf = [0u8; 16];
        assert_eq!(node.read(&mut buf).unwrap(), 5);
        assert_eq!(&buf[..5], b"hello");
        assert_eq!(node.read(&mut buf).unwrap_err().kind(), io::ErrorKind::WouldBlock);
        // Taken: a write into the empty buffer wakes the node; later ones do
        // not until the node has looked (take_wake, then read to WouldBlock).
        api.try_write(b"a").unwrap();
        api.try_write(b"b").unwrap();
        assert_eq!(*wakes.tokens.lock().unwrap(), vec![7]);
        assert_eq!(node.read(&mut buf).unwrap(), 2);
        api.try_write(b"c").unwrap();
        assert_eq!(*wakes.tokens.lock().unwrap(), vec![7], "not looked yet: no second wake");
        node.take_wake();
        assert_eq!(node.read(&mut buf).unwrap(), 1);
        assert_eq!(&buf[..1], b"c");
        assert_eq!(node.read(&mut buf).unwrap_err().kind(), io::ErrorKind::WouldBlock);
        api.try_write(b"d").unwrap();
        assert_eq!(*wakes.tokens.lock().unwrap(), vec![7, 7]);
        assert_eq!(node.read(&mut buf).unwrap(), 1);

        // Node to API: a pending reader is woken by the write.
        let (cw, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(api.poll_read(&mut cx, &mut buf).is_pending());
        assert_eq!(node.write(b"reply").unwrap(), 5);
        assert_eq!(cw.0.load(Ordering::SeqCst), 1);
        match api.poll_read(&mut cx, &mut buf[..3]) {
            Poll::Ready(Ok(3)) => assert_eq!(&buf[..3], b"rep"),
            other => panic!("{other:?}"),
        }
        match api.poll_read(&mut cx, &mut buf) {
            Poll::Ready(Ok(2)) => assert_eq!(&buf[..2], b"ly"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_full_direction_pushes_back_and_frees_on_read() {
        let (wakes, api, mut node) = new_pipe();
        node.set_token(3);
        let chunk = vec![9u8; PIPE_CAPACITY_BYTES / 4 + 1];
        let mut queued = 0;
        loop {
            match api.try_write(&chunk) {
                Ok(n) => queued += n,
                Err(e) => {
                    assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
                    break;
                }
            }
        }
        assert_eq!(queued, PIPE_CAPACITY_BYTES);
        let (cw, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(api.poll_writable(&mut cx).is_pending());
        let mut out = vec![0u8; 1000];
        assert_eq!(node.read(&mut out).unwrap(), 1000);
        assert_eq!(cw.0.load(Ordering::SeqCst), 1, "reading made room: the writer is woken");
        assert!(api.poll_writable(&mut cx).is_ready());
        // Drain it all; the buffer never holds more than its capacity.
        let mut total = 1000;
        let mut big = vec![0u8; 64 * 1024];
        while let Ok(n) = node.read(&mut big) {
            assert!(n > 0);
            total += n;
        }
        assert_eq!(total, PIPE_CAPACITY_BYTES);

        // The node's direction: WouldBlock when full, a wake for the node once
        // the API reads.
        let mut written = 0;
        loop {
            match node.write(&chunk) {
                Ok(n) => written += n,
                Err(e) => {
                    assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
                    break;
                }
            }
        }
        assert_eq!(written, PIPE_CAPACITY_BYTES);
        wakes.tokens.lock().unwrap().clear();
        node.take_wake();
        assert!(matches!(api.poll_read(&mut cx, &mut out), Poll::Ready(Ok(1000))));
        assert_eq!(*wakes.tokens.lock().unwrap(), vec![3], "room again: the node is told");
        assert_eq!(node.write(b"x").unwrap(), 1);
    }

    #[test]
    fn closing_either_end_is_seen_by_the_other() {
        let (wakes, api, mut node) = new_pipe();
        node.set_token(1);
        api.try_write(b"last").unwrap();
        drop(api);
        assert!(wakes.tokens.lock().unwrap().contains(&1));
        let mut buf = [0u8; 8];
        assert_eq!(node.read(&mut buf).unwrap(), 4, "bytes before the close are delivered");
        assert_eq!(node.read(&mut buf).unwrap(), 0, "then end-of-file");
        assert_eq!(node.write(b"x").unwrap_err().kind(), io::ErrorKind::BrokenPipe);

        let (_wakes, api, mut node) = new_pipe();
        node.set_token(2);
        assert_eq!(node.write(b"bye").unwrap(), 3);
        let (_cw, waker) = counting_waker();
        let mut cx = Context::from_waker(&waker);
        drop(node);
        assert!(matches!(api.poll_read(&mut cx, &mut buf), Poll::Ready(Ok(3))));
        assert!(matches!(api.poll_read(&mut cx, &mut buf), Poll::Ready(Ok(0))));
        assert_eq!(api.try_write(b"x").unwrap_err().kind(), io::ErrorKind::BrokenPipe);
        assert!(api.poll_writable(&mut cx).is_ready());
    }

    #[test]
    fn bytes_arrive_in_order_across_threads() {
        // A writer thread and a reader thread with a small read size: every
        // byte arrives once, in order, with no lost wake-up.
        struct Unpark(std::thread::Thread);
        impl NodeWake for Unpark {
            fn wake(&self, _token: usize) {
                self.0.unpark();
            }
        }
        let (api, mut node) = pipe(Arc::new(Unpark(std::thread::current())));
        node.set_token(0);
        const N: usize = 3 * PIPE_CAPACITY_BYTES;
        let writer = std::thread::spawn(move || {
            let data: Vec<u8> = (0..N).map(|i| (i % 251) as u8).collect();
            let mut at = 0;
            while at < N {
                match api.try_write(&data[at..(at + 7919).min(N)]) {
                    Ok(n) => at += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                    Err(e) => panic!("{e}"),
                }
            }
        });
        let mut got = 0usize;
        let mut buf = [0u8; 4096];
        loop {
            node.take_wake();
            match node.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    for (i, b) in buf[..n].iter().enumerate() {
                        assert_eq!(*b, ((got + i) % 251) as u8);
                    }
                    got += n;
                }
                // A write after the empty read wakes us (unpark before park
                // makes park return at once): a lost wake-up hangs the test.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::park(),
                Err(e) => panic!("{e}"),
            }
        }
        writer.join().unwrap();
        assert_eq!(got, N);
    }
}
