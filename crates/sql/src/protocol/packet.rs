//! MySQL packet framing: a 3-byte little-endian payload length and a 1-byte
//! sequence id before every payload. A logical packet of 16 MiB - 1 bytes or
//! more is sent as a chain of 0xFF_FFFF-byte chunks ending in a shorter chunk
//! (possibly empty); every chunk takes the next sequence id.
//!
//! Limits: a logical packet larger than `max_allowed_packet` is refused before
//! its payload is read (`PacketError::TooLarge`), so a client cannot make the
//! server allocate more than that; and the buffer grows as the payload
//! arrives, never from what the header announces, so that a header followed
//! by nothing costs nothing (issue 22, case 4). Reads time out: waiting for
//! the next command after `idle_timeout` (wait_timeout), inside a packet
//! after `read_timeout` (net_read_timeout); writes after `write_timeout`
//! (net_write_timeout).

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Largest payload of one physical packet.
pub const MAX_CHUNK_BYTES: usize = 0xFF_FFFF;

#[derive(Debug, thiserror::Error)]
pub enum PacketError {
    #[error("connection closed")]
    Closed,
    #[error("packet of at least {size_bytes} bytes exceeds max_allowed_packet {max_bytes}")]
    TooLarge { size_bytes: usize, max_bytes: usize },
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    /// No command came within `idle_timeout` (true), or a packet stalled
    /// half-read for `read_timeout` (false).
    #[error("read timed out")]
    TimedOut { idle: bool },
}

/// Bytes read into a packet's buffer at a time: the buffer grows by what
/// arrives, never by what the header announces.
const READ_STEP_BYTES: usize = 64 * 1024;

/// Reads logical packets, tracking the sequence id.
pub struct PacketReader<R> {
    inner: R,
    /// Sequence id the next packet we *send* must carry (last received + 1).
    pub next_seq: u8,
    pub max_allowed_packet: usize,
    /// Longest wait for the first byte of a packet (None: forever).
    pub idle_timeout: Option<std::time::Duration>,
    /// Longest wait for the rest of a packet once it has started.
    pub read_timeout: Option<std::time::Duration>,
}

impl<R: AsyncRead + Unpin> PacketReader<R> {
    pub fn new(inner: R, max_allowed_packet: usize) -> Self {
        PacketReader { inner, next_seq: 0, max_allowed_packet, idle_timeout: None, read_timeout: None }
    }

    /// Puts `new` in place of the stream read from, returning the old one
    /// (the TLS upgrade wraps it).
    pub fn replace_inner(&mut self, new: R) -> R {
        std::mem::replace(&mut self.inner, new)
    }

    /// Reads one logical packet (joining >16 MiB chains). Returns the payload;
    /// `self.next_seq` becomes last seq + 1. Clean EOF before a header gives
    /// `Closed`.
    pub async fn read_packet(&mut self) -> Result<Vec<u8>, PacketError> {
        let mut payload = Vec::new();
        self.read_packet_into(&mut payload).await?;
        Ok(payload)
    }

    /// `read_packet` into a caller-owned buffer (cleared first), so that a
    /// command loop reuses one allocation for every packet instead of
    /// allocating per packet. On error the buffer's contents are unspecified.
    pub async fn read_packet_into(&mut self, payload: &mut Vec<u8>) -> Result<(), PacketError> {
        payload.clear();
        // The first byte: a command may be long in coming (wait_timeout).
        let mut b0 = [0u8; 1];
        let idle = self.idle_timeout;
        match with_timeout(idle, self.inner.read_exact(&mut b0)).await {
            None => return Err(PacketError::TimedOut { idle: true }),
            Some(Ok(_)) => {}
            Some(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(PacketError::Closed),
            Some(Err(e)) => return Err(e.into()),
        }
        // The rest of the packet: net_read_timeout.
        let read = self.read_timeout;
        match with_timeout(read, self.read_rest(b0[0], payload)).await {
            None => Err(PacketError::TimedOut { idle: false }),
            Some(r) => r,
        }
    }

    async fn read_rest(&mut self, b0: u8, payload: &mut Vec<u8>) -> Result<(), PacketError> {
        let mut first = true;
        loop {
            let mut header = [0u8; 4];
            if first {
                header[0] = b0;
                self.inner.read_exact(&mut header[1..]).await?;
            } else {
                self.inner.read_exact(&mut header).await?;
            }
            let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
            self.next_seq = header[3].wrapping_add(1);
            let total = payload.len() + len;
            if total > self.max_allowed_packet {
                return Err(PacketError::TooLarge { size_bytes: total, max_bytes: self.max_allowed_packet });
            }
            // Grown step by step as the bytes come: a header announcing
            // 16 MiB and then silence reserves nothing.
            while payload.len() < total {
                let start = payload.len();
                let step = (total - start).min(READ_STEP_BYTES);
                payload.resize(start + step, 0);
                self.inner.read_exact(&mut payload[start..]).await?;
            }
            first = false;
            if len < MAX_CHUNK_BYTES {
                return Ok(());
            }
        }
    }

    /// Reads and discards whatever the client still sends, for at most
    /// `limit_bytes` or `timeout`: used before closing after a fatal error so
    /// that the kernel does not answer unread data with a RST that would make
    /// the client lose our error packet.
    pub async fn drain(&mut self, limit_bytes: usize, timeout: std::time::Duration) {
        let mut buf = vec![0u8; 64 * 1024];
        let mut seen = 0usize;
        let _ = tokio::time::timeout(timeout, async {
            while seen < limit_bytes {
                match self.inner.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => seen += n,
                }
            }
        })
        .await;
    }
}

impl<R: tokio::io::AsyncBufRead + Unpin> PacketReader<R> {
    /// Watches the connection between commands, while a statement runs:
    /// true once the client has closed it (or it failed), false as soon as
    /// the client sends something (a pipelined command, left in the buffer
    /// for `read_packet_into`). Cancel-safe: whatever arrives stays buffered.
    pub async fn peer_closed(&mut self) -> bool {
        use tokio::io::AsyncBufReadExt;
        match self.inner.fill_buf().await {
            Ok(b) => b.is_empty(),
            Err(_) => true,
        }
    }
}

/// `f`, or None if `limit` passes first (no limit: `f`).
async fn with_timeout<T>(limit: Option<std::time::Duration>, f: impl std::future::Future<Output = T>) -> Option<T> {
    match limit {
        None => Some(f.await),
        Some(d) => tokio::time::timeout(d, f).await.ok(),
    }
}

/// Buffers outgoing packets; `flush` writes them in one go.
pub struct PacketWriter<W> {
    inner: W,
    buf: Vec<u8>,
    pub seq: u8,
    /// Longest a flush may wait for the client to take its bytes
    /// (net_write_timeout); None: forever.
    pub write_timeout: Option<std::time::Duration>,
}

/// Flush the buffer to the socket once it holds this much (large result sets).
const FLUSH_THRESHOLD_BYTES: usize = 256 * 1024;

impl<W: AsyncWrite + Unpin> PacketWriter<W> {
    pub fn new(inner: W) -> Self {
        PacketWriter { inner, buf: Vec::with_capacity(16 * 1024), seq: 0, write_timeout: None }
    }

    /// Puts `new` in place of the stream written to, returning the old one
    /// (the TLS upgrade wraps it). Call with nothing pushed and unflushed.
    pub fn replace_inner(&mut self, new: W) -> W {
        std::mem::replace(&mut self.inner, new)
    }

    /// Appends one logical packet (split into chunks if needed).
    pub fn push(&mut self, payload: &[u8]) {
        let mut rest = payload;
        loop {
            let n = rest.len().min(MAX_CHUNK_BYTES);
            let len = (n as u32).to_le_bytes();
            self.buf.extend_from_slice(&[len[0], len[1], len[2], self.seq]);
            self.buf.extend_from_slice(&rest[..n]);
            self.seq = self.seq.wrapping_add(1);
            rest = &rest[n..];
            if n < MAX_CHUNK_BYTES {
                break;
            }
        }
    }

    /// Appends one logical packet that `write` puts straight into the buffer
    /// (no payload copy); one too big for a single chunk is split as `push` does.
    pub fn push_with(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        let start = self.buf.len();
        self.buf.extend_from_slice(&[0, 0, 0, 0]);
        write(&mut self.buf);
        let n = self.buf.len() - start - 4;
        if n < MAX_CHUNK_BYTES {
            let len = (n as u32).to_le_bytes();
            self.buf[start..start + 4].copy_from_slice(&[len[0], len[1], len[2], self.seq]);
            self.seq = self.seq.wrapping_add(1);
        } else {
            let payload = self.buf.split_off(start + 4);
            self.buf.truncate(start);
            self.push(&payload);
        }
    }

    /// `push_with`, then a flush if the buffer grew large.
    pub async fn send_with(&mut self, write: impl FnOnce(&mut Vec<u8>)) -> std::io::Result<()> {
        self.push_with(write);
        if self.buf.len() >= FLUSH_THRESHOLD_BYTES {
            self.flush().await?;
        }
        Ok(())
    }

    /// Appends a packet and flushes if the buffer grew large.
    pub async fn send(&mut self, payload: &[u8]) -> std::io::Result<()> {
        self.push(payload);
        if self.buf.len() >= FLUSH_THRESHOLD_BYTES {
            self.flush().await?;
        }
        Ok(())
    }

    /// Forgets what was pushed and not yet flushed (a result cut short).
    pub fn discard(&mut self) {
        self.buf.clear();
    }

    pub async fn flush(&mut self) -> std::io::Result<()> {
        if !self.buf.is_empty() {
            // A client that stops reading holds the statement (and this
            // buffer) at most net_write_timeout.
            match with_timeout(self.write_timeout, self.inner.write_all(&self.buf)).await {
                Some(r) => r?,
                None => return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "net_write_timeout")),
            }
            self.buf.clear();
            if self.buf.capacity() > 4 * FLUSH_THRESHOLD_BYTES {
                self.buf.shrink_to(16 * 1024);
            }
        }
        self.inner.flush().await
    }

    pub async fn shutdown(&mut self) {
        let _ = self.flush().await;
        let _ = self.inner.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn split_and_join_big_packets() {
        for size in [0usize, 1, MAX_CHUNK_BYTES - 1, MAX_CHUNK_BYTES, MAX_CHUNK_BYTES + 5, 2 * MAX_CHUNK_BYTES] {
            let payload: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            let mut w = PacketWriter::new(Vec::new());
            w.seq = 3;
            w.push(&payload);
            let chunks = size / MAX_CHUNK_BYTES + 1;
            assert_eq!(w.seq, 3 + chunks as u8);
            let bytes = std::mem::take(&mut w.buf);
            let mut r = PacketReader::new(&bytes[..], 64 * 1024 * 1024);
            let got = r.read_packet().await.unwrap();
            assert_eq!(got.len(), size);
            assert!(got == payload);
            assert_eq!(r.next_seq, 3 + chunks as u8);
        }
    }

    #[test]
    fn push_with_writes_what_push_writes() {
        for size in [0usize, 1, 300, MAX_CHUNK_BYTES - 1, MAX_CHUNK_BYTES, MAX_CHUNK_BYTES + 5] {
            let payload: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            let (mut a, mut b) = (PacketWriter::new(Vec::new()), PacketWriter::new(Vec::new()));
            for w in [&mut a, &mut b] {
                w.seq = 250;
                w.push(b"x");
            }
            a.push(&payload);
            b.push_with(|buf| buf.extend_from_slice(&payload));
            assert_eq!(a.seq, b.seq, "size {size}");
            assert!(a.buf == b.buf, "size {size}");
        }
    }

    /// A reused buffer holds exactly the latest packet, whether it is
    /// shorter or longer than the one before.
    #[tokio::test]
    async fn read_packet_into_replaces_the_previous_packet() {
        let mut w = PacketWriter::new(Vec::new());
        for p in [&b"a longer first packet"[..], b"short", b"", b"then a longer one again"] {
            w.push(p);
        }
        let bytes = std::mem::take(&mut w.buf);
        let mut r = PacketReader::new(&bytes[..], 1024);
        let mut buf = Vec::new();
        for p in [&b"a longer first packet"[..], b"short", b"", b"then a longer one again"] {
            r.read_packet_into(&mut buf).await.unwrap();
            assert_eq!(buf, p);
        }
        assert!(matches!(r.read_packet_into(&mut buf).await, Err(PacketError::Closed)));
    }

    /// A header announcing 16 MiB and then nothing: nothing is reserved
    /// for it, and the read ends at read_timeout.
    #[tokio::test]
    async fn a_bare_header_reserves_nothing_and_times_out() {
        let (mut client, server) = tokio::io::duplex(64);
        client.write_all(&[0xff, 0xff, 0xfe, 0]).await.unwrap();
        let mut r = PacketReader::new(server, 64 << 20);
        r.read_timeout = Some(std::time::Duration::from_millis(50));
        let mut buf = Vec::new();
        let e = r.read_packet_into(&mut buf).await.unwrap_err();
        assert!(matches!(e, PacketError::TimedOut { idle: false }), "{e:?}");
        assert!(buf.capacity() <= READ_STEP_BYTES, "reserved {} bytes", buf.capacity());
        // Between packets the idle limit applies instead.
        let (_client, server) = tokio::io::duplex(64);
        let mut r = PacketReader::new(server, 1024);
        r.idle_timeout = Some(std::time::Duration::from_millis(50));
        assert!(matches!(r.read_packet_into(&mut buf).await, Err(PacketError::TimedOut { idle: true })));
    }

    /// A large packet arriving in pieces is read whole.
    #[tokio::test]
    async fn a_packet_in_pieces_is_read_whole() {
        let (mut client, server) = tokio::io::duplex(1000);
        let payload: Vec<u8> = (0..300_000).map(|i| (i % 251) as u8).collect();
        let mut w = PacketWriter::new(Vec::new());
        w.push(&payload);
        let bytes = std::mem::take(&mut w.buf);
        tokio::spawn(async move { client.write_all(&bytes).await.unwrap() });
        let mut r = PacketReader::new(server, 1 << 20);
        r.read_timeout = Some(std::time::Duration::from_secs(10));
        assert!(r.read_packet().await.unwrap() == payload);
    }

    #[tokio::test]
    async fn too_large_is_refused_before_reading() {
        let mut w = PacketWriter::new(Vec::new());
        w.push(&vec![7u8; 2000]);
        let bytes = std::mem::take(&mut w.buf);
        let mut r = PacketReader::new(&bytes[..], 1024);
        assert!(matches!(r.read_packet().await, Err(PacketError::TooLarge { .. })));
    }
}
