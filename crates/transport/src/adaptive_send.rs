//! Adaptive send policy and the per-connection send buffer, without IO.
//!
//! The host (production runtime, client, simulator) owns the socket and the
//! clock; it tells the policy when a message was queued and when the queue was
//! sent, always with times it read itself (`u64` nanoseconds), and asks
//! [`AdaptiveSend::should_send_now`] whether to write the queued bytes now or
//! keep coalescing.
//!
//! # The algorithm (after "Thoughts on a new NDB API: Adaptive send algorithm")
//!
//! The state is `max_waits`: how many further messages a queued message may wait
//! for before the queue is sent anyway. For every queued message we measure how
//! long ago the message `max_waits` messages back was queued (the wait the
//! oldest message of a batch of `max_waits + 1` would have had), and the same for
//! `max_waits + 1`. Every `adapt_interval_ns` the means of both are compared with
//! half the allowed delay:
//!
//! * mean for `max_waits` within `max_delay / 2`: the state is acceptable; if the
//!   mean for `max_waits + 1` is within it too, `max_waits` grows by one;
//! * otherwise `max_waits` shrinks by one.
//!
//! The decision itself is conservative: the queue is sent as soon as
//! * `max_waits` further messages have been queued behind the oldest one, or
//! * the oldest queued message has waited `max_delay_ns` (never longer), or
//! * the queued bytes reach `flush_bytes` (a full batch gains nothing by waiting).
//!
//! With sparse traffic the measured waits are large, `max_waits` stays at 0 and
//! every message is sent at once; with a steady high rate, `max_waits` climbs
//! until a batch's oldest message waits about half the allowed delay.
//!
//! Hosts that block in a poll with millisecond resolution cannot wait for a
//! deadline of a few microseconds: they flush everything before they block (see
//! the runtime), so the policy only delays sends while the host is busy anyway.

use std::io;

/// Largest `max_waits`: bounds the history ring and the batch a message may wait for.
pub const MAX_WAITS_CAP: u32 = 64;
/// Queued bytes at which the queue is always sent.
pub const DEFAULT_FLUSH_BYTES: usize = 64 * 1024;
/// How often `max_waits` is re-evaluated.
pub const DEFAULT_ADAPT_INTERVAL_NS: u64 = 10_000_000;

const HISTORY: usize = MAX_WAITS_CAP as usize + 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdaptiveSendConfig {
    /// Longest a queued message may wait for company (`Knobs::max_send_delay_us`).
    pub max_delay_ns: u64,
    /// Queued bytes at which the queue is always sent.
    pub flush_bytes: usize,
    /// Interval between re-evaluations of `max_waits`.
    pub adapt_interval_ns: u64,
}

impl AdaptiveSendConfig {
    pub fn from_knobs(k: &norr_knobs::Knobs) -> Self {
        AdaptiveSendConfig {
            max_delay_ns: k.max_send_delay_us.saturating_mul(1_000),
            flush_bytes: DEFAULT_FLUSH_BYTES,
            adapt_interval_ns: DEFAULT_ADAPT_INTERVAL_NS,
        }
    }
}

/// Per-connection adaptive send state. Pure: no clock, no IO.
#[derive(Debug, Clone)]
pub struct AdaptiveSend {
    cfg: AdaptiveSendConfig,
    max_waits: u32,
    /// Queue times of the last `HISTORY` messages (ring, `hist_len` valid).
    hist: [u64; HISTORY],
    hist_head: usize,
    hist_len: usize,
    /// Messages queued since the last send, and when the oldest of them was queued.
    queued_msgs: u32,
    oldest_queued_ns: Option<u64>,
    // Statistics of the current interval.
    interval_start_ns: u64,
    sum_wait_ns: u64,
    sum_wait_plus1_ns: u64,
    samples: u64,
    // Counters for observability and tests.
    sends: u64,
    messages: u64,
}

impl AdaptiveSend {
    pub fn new(cfg: AdaptiveSendConfig, now_ns: u64) -> Self {
        assert!(cfg.flush_bytes > 0, "flush_bytes must be positive");
        assert!(cfg.adapt_interval_ns > 0, "adapt_interval_ns must be positive");
        AdaptiveSend {
            cfg,
            max_waits: 0,
            hist: [0; HISTORY],
            hist_head: 0,
            hist_len: 0,
            queued_msgs: 0,
            oldest_queued_ns: None,
            interval_start_ns: now_ns,
            sum_wait_ns: 0,
            sum_wait_plus1_ns: 0,
            samples: 0,
            sends: 0,
            messages: 0,
        }
    }

    pub fn config(&self) -> &AdaptiveSendConfig {
        &self.cfg
    }

    /// Current state: how many further messages a queued message may wait for.
    pub fn max_waits(&self) -> u32 {
        self.max_waits
    }

    /// Messages queued since the last send.
    pub fn queued_msgs(&self) -> u32 {
        self.queued_msgs
    }

    /// Sends (flushes) so far.
    pub fn sends(&self) -> u64 {
        self.sends
    }

    /// Messages queued so far.
    pub fn messages(&self) -> u64 {
        self.messages
    }

    /// Queue time of the message `back` messages before the newest (0 = newest).
    fn hist_back(&self, back: usize) -> Option<u64> {
        if back >= self.hist_len {
            return None;
        }
        let idx = (self.hist_head + HISTORY - 1 - back) % HISTORY;
        Some(self.hist[idx])
    }

    /// A message was appended to the send buffer at `now_ns`.
    pub fn on_queued(&mut self, now_ns: u64) {
        self.maybe_adapt(now_ns);
        self.hist[self.hist_head] = now_ns;
        self.hist_head = (self.hist_head + 1) % HISTORY;
        self.hist_len = (self.hist_len + 1).min(HISTORY);
        let k = self.max_waits as usize;
        if let (Some(a), Some(b)) = (self.hist_back(k), self.hist_back(k + 1)) {
            self.sum_wait_ns = self.sum_wait_ns.saturating_add(now_ns.saturating_sub(a));
            self.sum_wait_plus1_ns = self.sum_wait_plus1_ns.saturating_add(now_ns.saturating_sub(b));
            self.samples += 1;
        }
        self.queued_msgs = self.queued_msgs.saturating_add(1);
        if self.oldest_queued_ns.is_none() {
            self.oldest_queued_ns = Some(now_ns);
        }
        self.messages += 1;
    }

    /// Everything queued was handed to the socket at `now_ns`.
    pub fn on_sent(&mut self, now_ns: u64) {
        self.maybe_adapt(now_ns);
        if self.queued_msgs > 0 {
            self.sends += 1;
        }
        self.queued_msgs = 0;
        self.oldest_queued_ns = None;
    }

    /// Re-evaluate `max_waits` once per interval.
    fn maybe_adapt(&mut self, now_ns: u64) {
        let elapsed = now_ns.saturating_sub(self.interval_start_ns);
        if elapsed < self.cfg.adapt_interval_ns {
            return;
        }
        let half = self.cfg.max_delay_ns / 2;
        let before = self.max_waits;
        match (self.sum_wait_ns.checked_div(self.samples), self.sum_wait_plus1_ns.checked_div(self.samples)) {
            (Some(mean), Some(mean_plus1)) if mean <= half => {
                if mean_plus1 <= half && self.max_waits < MAX_WAITS_CAP {
                    self.max_waits += 1;
                }
            }
            // Waits too long, or fewer messages than the state needs to be
            // measured (sparse traffic): wait for fewer.
            _ => self.max_waits = self.max_waits.saturating_sub(1),
        }
        if self.cfg.max_delay_ns == 0 {
            self.max_waits = 0;
        }
        // Long idle gaps count as sparse intervals: decay one step per missed interval.
        let missed = (elapsed / self.cfg.adapt_interval_ns).saturating_sub(1);
        self.max_waits = self.max_waits.saturating_sub(missed.min(MAX_WAITS_CAP as u64) as u32);
        debug_assert!(self.max_waits <= before + 1);
        self.interval_start_ns = now_ns;
        self.sum_wait_ns = 0;
        self.sum_wait_plus1_ns = 0;
        self.samples = 0;
    }

    /// Should the `queued_bytes` waiting in the send buffer be written now?
    pub fn should_send_now(&self, now_ns: u64, queued_bytes: usize) -> bool {
        if queued_bytes == 0 {
            return false;
        }
        if queued_bytes >= self.cfg.flush_bytes || self.max_waits == 0 {
            return true;
        }
        if self.queued_msgs > self.max_waits {
            return true;
        }
        match self.oldest_queued_ns {
            // Bytes without a queued message (a partial write left over): send.
            None => true,
            Some(t) => now_ns.saturating_sub(t) >= self.cfg.max_delay_ns,
        }
    }

    /// Latest time the queue may be sent, if messages are queued.
    pub fn deadline_ns(&self) -> Option<u64> {
        self.oldest_queued_ns.map(|t| t.saturating_add(self.cfg.max_delay_ns))
    }
}

/// The send buffer of one connection overflowed: the peer does not read its
/// replies, and the host closes the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("send buffer holds {len} unsent bytes, at the limit of {max} bytes: peer is not reading")]
pub struct SendBufferFull {
    pub len: usize,
    pub max: usize,
}

/// Outgoing bytes of one connection, bounded by `max_bytes`
/// (`Knobs::max_send_buffer_bytes`).
#[derive(Debug)]
pub struct SendBuffer {
    buf: Vec<u8>,
    /// Bytes before `pos` were written already.
    pos: usize,
    max_bytes: usize,
}

impl SendBuffer {
    pub fn new(max_bytes: usize) -> Self {
        assert!(max_bytes > 0);
        SendBuffer { buf: Vec::new(), pos: 0, max_bytes }
    }

    /// Bytes waiting to be written.
    pub fn len(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// Bytes waiting to be written, oldest first.
    pub fn pending(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    /// `n` bytes of `pending()` were written.
    pub fn consume(&mut self, n: usize) {
        assert!(n <= self.len(), "consumed more than pending");
        self.pos += n;
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
            // Do not keep a huge allocation around after a burst.
            if self.buf.capacity() > 4 * DEFAULT_FLUSH_BYTES {
                self.buf.shrink_to(DEFAULT_FLUSH_BYTES);
            }
        } else if self.pos > DEFAULT_FLUSH_BYTES && self.pos * 2 > self.buf.len() {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
    }

    /// Append one frame whose payload `fill` writes in place, unless the bytes
    /// already pending reach the bound: then the peer is not reading, nothing is
    /// appended and the host closes the connection. (So the buffer holds at most
    /// `max_bytes` plus one frame: a single reply larger than the bound still
    /// goes out to a peer that reads.)
    pub fn push_frame_with(&mut self, fill: impl FnOnce(&mut Vec<u8>)) -> Result<(), SendBufferFull> {
        if self.len() >= self.max_bytes {
            return Err(SendBufferFull { len: self.len(), max: self.max_bytes });
        }
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        crate::frame::encode_frame_with(&mut self.buf, fill);
        Ok(())
    }

    /// Append one frame carrying `payload`.
    pub fn push_frame(&mut self, payload: &[u8]) -> Result<(), SendBufferFull> {
        self.push_frame_with(|out| out.extend_from_slice(payload))
    }

    /// Write pending bytes to `w` until done or `WouldBlock`. Returns the bytes
    /// written; `Ok(0)` with bytes still pending means the writer would block.
    /// A writer accepting zero bytes is reported as `WriteZero`.
    pub fn write_to<W: io::Write>(&mut self, w: &mut W) -> io::Result<usize> {
        let mut total = 0;
        while !self.is_empty() {
            match w.write(self.pending()) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "peer accepts no bytes")),
                Ok(n) => {
                    self.consume(n);
                    total += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;
    const MS: u64 = 1_000_000;

    fn cfg(max_delay_us: u64) -> AdaptiveSendConfig {
        AdaptiveSendConfig {
            max_delay_ns: max_delay_us * US,
            flush_bytes: DEFAULT_FLUSH_BYTES,
            adapt_interval_ns: DEFAULT_ADAPT_INTERVAL_NS,
        }
    }

    /// Drive a policy like a host would: messages of `msg_bytes` arrive at the
    /// given times; after each arrival, and at every deadline in between, the host
    /// asks whether to send. Returns (messages, sends, worst wait of any message).
    fn drive(p: &mut AdaptiveSend, arrivals: &[u64], msg_bytes: usize) -> (u64, u64, u64) {
        let mut queued_bytes = 0usize;
        let mut queue_times: Vec<u64> = Vec::new();
        let mut worst = 0u64;
        let mut sends = 0u64;
        let mut flush = |p: &mut AdaptiveSend, now: u64, qb: &mut usize, qt: &mut Vec<u64>| {
            for t in qt.drain(..) {
                worst = worst.max(now - t);
            }
            *qb = 0;
            p.on_sent(now);
            sends += 1;
        };
        for &t in arrivals {
            // A host honours deadlines that expire before the next arrival.
            if let Some(d) = p.deadline_ns() {
                if d <= t && queued_bytes > 0 {
                    assert!(p.should_send_now(d, queued_bytes));
                    flush(p, d, &mut queued_bytes, &mut queue_times);
                }
            }
            p.on_queued(t);
            queued_bytes += msg_bytes;
            queue_times.push(t);
            if p.should_send_now(t, queued_bytes) {
                flush(p, t, &mut queued_bytes, &mut queue_times);
            }
        }
        if let Some(d) = p.deadline_ns() {
            flush(p, d, &mut queued_bytes, &mut queue_times);
        }
        (arrivals.len() as u64, sends, worst)
    }

    #[test]
    fn steady_high_rate_coalesces() {
        // One 100-byte message every 1 us for 300 ms, max delay 20 us: max_waits
        // climbs one step per 10 ms interval to ~10 (half the delay), then stays.
        let mut p = AdaptiveSend::new(cfg(20), 0);
        let arrivals: Vec<u64> = (0..300_000).map(|i| i * US).collect();
        let (msgs, sends, worst) = drive(&mut p, &arrivals, 100);
        assert!((9..=11).contains(&p.max_waits()), "max_waits {}", p.max_waits());
        assert!(sends * 4 < msgs, "{sends} sends for {msgs} messages");
        assert!(worst <= 20 * US, "worst wait {worst} ns");
    }

    #[test]
    fn sparse_traffic_sends_at_once() {
        // One message every 1 ms, max delay 20 us: every message goes out at once.
        let mut p = AdaptiveSend::new(cfg(20), 0);
        for i in 0..1000u64 {
            let t = i * MS;
            p.on_queued(t);
            assert!(p.should_send_now(t, 100), "message {i} delayed");
            p.on_sent(t);
        }
        assert_eq!(p.max_waits(), 0);
        assert_eq!(p.sends(), 1000);
    }

    #[test]
    fn burst_then_sparse_decays() {
        let mut p = AdaptiveSend::new(cfg(20), 0);
        let burst: Vec<u64> = (0..50_000).map(|i| i * US).collect();
        drive(&mut p, &burst, 50);
        assert!(p.max_waits() > 0);
        // After a long pause every message is sent at once again.
        let start = 1_000 * MS;
        for i in 0..100u64 {
            let t = start + i * 5 * MS;
            p.on_queued(t);
            assert!(p.should_send_now(t, 50), "message {i} delayed after pause");
            p.on_sent(t);
        }
    }

    #[test]
    fn never_exceeds_max_delay() {
        // Irregular traffic: bursts and gaps from a xorshift generator.
        for max_delay_us in [1u64, 20, 200] {
            let mut p = AdaptiveSend::new(cfg(max_delay_us), 0);
            let mut x: u64 = 0x2545F4914F6CDD1D ^ max_delay_us;
            let mut t = 0u64;
            let mut arrivals = Vec::new();
            for _ in 0..200_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                t += match x % 10 {
                    0 => x % (500 * US),
                    1..=3 => x % (30 * US),
                    _ => x % (2 * US),
                };
                arrivals.push(t);
            }
            let (_, _, worst) = drive(&mut p, &arrivals, 64);
            assert!(worst <= max_delay_us * US, "delay {max_delay_us} us: worst wait {worst} ns");
        }
    }

    #[test]
    fn large_queue_sends_and_zero_delay_never_waits() {
        let mut p = AdaptiveSend::new(cfg(20), 0);
        let arrivals: Vec<u64> = (0..50_000).map(|i| i * US).collect();
        drive(&mut p, &arrivals, 10);
        assert!(p.max_waits() > 0);
        let t = 60 * MS;
        p.on_queued(t);
        assert!(!p.should_send_now(t, 100));
        assert!(p.should_send_now(t, DEFAULT_FLUSH_BYTES));
        assert_eq!(p.deadline_ns(), Some(t + 20 * US));
        assert!(p.should_send_now(t + 20 * US, 100));
        assert!(!p.should_send_now(t, 0));

        let mut z = AdaptiveSend::new(cfg(0), 0);
        let arrivals: Vec<u64> = (0..50_000).map(|i| i * 10).collect();
        let (_, _, worst) = drive(&mut z, &arrivals, 10);
        assert_eq!(worst, 0);
        assert_eq!(z.max_waits(), 0);
    }

    #[test]
    fn send_buffer_bound_and_partial_writes() {
        struct Trickle {
            got: Vec<u8>,
            per_call: usize,
            calls_left: usize,
        }
        impl io::Write for Trickle {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                if self.calls_left == 0 {
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                self.calls_left -= 1;
                let n = b.len().min(self.per_call);
                self.got.extend_from_slice(&b[..n]);
                Ok(n)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut sb = SendBuffer::new(100);
        sb.push_frame(b"hello").unwrap();
        assert_eq!(sb.len(), 8 + 5);
        let mut w = Trickle { got: Vec::new(), per_call: 4, calls_left: 2 };
        assert_eq!(sb.write_to(&mut w).unwrap(), 8);
        assert_eq!(sb.len(), 5);
        w.calls_left = 10;
        sb.write_to(&mut w).unwrap();
        assert!(sb.is_empty());
        let mut d = crate::FrameDecoder::new(1024);
        d.push(&w.got);
        assert_eq!(d.next_frame().unwrap(), Some(&b"hello"[..]));

        // A peer that stops reading overflows the bound.
        let mut sb = SendBuffer::new(100);
        for _ in 0..8 {
            sb.push_frame(&[0u8; 4]).unwrap();
        }
        sb.push_frame(&[0u8; 20]).unwrap(); // 96 pending: still accepted
        let err = sb.push_frame(&[0u8; 1]).unwrap_err();
        assert_eq!(err, SendBufferFull { len: 8 * 12 + 28, max: 100 });
        assert_eq!(sb.len(), 124, "a refused frame is not appended");
        // One frame larger than the bound goes to a peer that reads.
        let mut sb = SendBuffer::new(100);
        sb.push_frame(&[7u8; 500]).unwrap();
        assert_eq!(sb.len(), 508);

        let mut sb = SendBuffer::new(1 << 20);
        sb.push_frame_with(|o| o.extend_from_slice(b"xyz")).unwrap();
        let mut zero = Trickle { got: Vec::new(), per_call: 0, calls_left: 1 };
        assert_eq!(sb.write_to(&mut zero).unwrap_err().kind(), io::ErrorKind::WriteZero);
    }
}
