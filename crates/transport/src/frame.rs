//! Frames: the unit on the wire.
//!
//! ```text
//! offset  size  field
//! 0       4     payload length in bytes, u32 little-endian (<= max_frame_bytes)
//! 4       4     CRC-32C of the payload, u32 little-endian
//! 8       n     payload (one `norr_signals::wire` message, or a handshake message)
//! ```
//! A frame longer than the receiver's limit, or with a wrong checksum, is a
//! protocol error: the receiver logs it and closes that connection.

pub const FRAME_HEADER_BYTES: usize = 8;
/// Default largest payload: room for a batch of maximum-size BLOB values.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge { len: usize, max: usize },
    #[error("frame checksum mismatch (expected {expected:#010x}, got {actual:#010x})")]
    BadChecksum { expected: u32, actual: u32 },
}

/// Append one frame carrying `payload` to `out`.
pub fn encode_frame(payload: &[u8], out: &mut Vec<u8>) {
    assert!(payload.len() <= u32::MAX as usize, "frame payload over 4 GiB");
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// Encode a frame whose payload is produced by `fill` directly into `out`
/// (avoids a copy of the payload): the header is patched afterwards.
pub fn encode_frame_with(out: &mut Vec<u8>, fill: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&[0u8; FRAME_HEADER_BYTES]);
    fill(out);
    let payload_len = out.len() - start - FRAME_HEADER_BYTES;
    assert!(payload_len <= u32::MAX as usize, "frame payload over 4 GiB");
    let crc = crc32c::crc32c(&out[start + FRAME_HEADER_BYTES..]);
    out[start..start + 4].copy_from_slice(&(payload_len as u32).to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// Incremental frame decoder: feed it bytes as they arrive, take whole frames out.
pub struct FrameDecoder {
    buf: Vec<u8>,
    /// Start of unconsumed bytes in `buf`.
    pos: usize,
    max_frame_bytes: usize,
}

impl FrameDecoder {
    pub fn new(max_frame_bytes: usize) -> Self {
        FrameDecoder { buf: Vec::with_capacity(64 * 1024), pos: 0, max_frame_bytes }
    }

    /// Append received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.compact();
        self.buf.extend_from_slice(bytes);
    }

    /// The buffer to append received bytes to, with room for at least
    /// `min_spare_bytes` more: a reader that fills it directly (tokio's
    /// `read_buf`) saves `push`'s copy of every received byte. Callers only
    /// append to it; the bytes before its end are the decoder's.
    pub fn append_target(&mut self, min_spare_bytes: usize) -> &mut Vec<u8> {
        self.compact();
        self.buf.reserve(min_spare_bytes);
        &mut self.buf
    }

    /// Bytes buffered, including consumed-but-not-compacted ones.
    pub fn buffered_len(&self) -> usize {
        self.buf.len()
    }

    fn compact(&mut self) {
        if self.pos > 0 && (self.pos == self.buf.len() || self.pos > 32 * 1024) {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
    }

    /// The next complete frame's payload, if one is buffered. The returned slice
    /// is valid until the next call on the decoder.
    pub fn next_frame(&mut self) -> Result<Option<&[u8]>, FrameError> {
        let avail = &self.buf[self.pos..];
        if avail.len() < FRAME_HEADER_BYTES {
            return Ok(None);
        }
        let len = u32::from_le_bytes(avail[0..4].try_into().expect("4 bytes")) as usize;
        if len > self.max_frame_bytes {
            return Err(FrameError::TooLarge { len, max: self.max_frame_bytes });
        }
        if avail.len() < FRAME_HEADER_BYTES + len {
            return Ok(None);
        }
        let expected = u32::from_le_bytes(avail[4..8].try_into().expect("4 bytes"));
        let start = self.pos + FRAME_HEADER_BYTES;
        let payload = &self.buf[start..start + len];
        let actual = crc32c::crc32c(payload);
        if actual != expected {
            return Err(FrameError::BadChecksum { expected, actual });
        }
        self.pos = start + len;
        Ok(Some(&self.buf[start..start + len]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_anywhere() {
        let mut wire = Vec::new();
        let payloads: Vec<Vec<u8>> = (0..50).map(|i| vec![i as u8; i * 7]).collect();
        for p in &payloads {
            encode_frame(p, &mut wire);
        }
        for chunk in [1usize, 3, 8, 9, 100, 4096] {
            let mut d = FrameDecoder::new(1 << 20);
            let mut got = Vec::new();
            for c in wire.chunks(chunk) {
                d.push(c);
                while let Some(f) = d.next_frame().unwrap() {
                    got.push(f.to_vec());
                }
            }
            assert_eq!(got, payloads, "chunk size {chunk}");
        }
    }

    /// Bytes appended through `append_target` decode as pushed ones do,
    /// across compactions (frames consumed between appends).
    #[test]
    fn append_target_decodes_like_push() {
        let mut wire = Vec::new();
        let payloads: Vec<Vec<u8>> = (0..200).map(|i| vec![i as u8; (i * 331) % 5000]).collect();
        for p in &payloads {
            encode_frame(p, &mut wire);
        }
        let mut d = FrameDecoder::new(1 << 20);
        let mut got = Vec::new();
        for c in wire.chunks(7000) {
            let t = d.append_target(16);
            assert!(t.capacity() - t.len() >= 16);
            t.extend_from_slice(c);
            while let Some(f) = d.next_frame().unwrap() {
                got.push(f.to_vec());
            }
        }
        assert_eq!(got, payloads);
    }

    #[test]
    fn encode_with_matches_encode() {
        let mut a = Vec::new();
        encode_frame(b"hello", &mut a);
        let mut b = Vec::new();
        encode_frame_with(&mut b, |o| o.extend_from_slice(b"hello"));
        assert_eq!(a, b);
    }

    #[test]
    fn oversized_and_corrupt_frames_are_errors() {
        let mut d = FrameDecoder::new(16);
        let mut w = Vec::new();
        encode_frame(&[0u8; 17], &mut w);
        d.push(&w);
        assert_eq!(d.next_frame(), Err(FrameError::TooLarge { len: 17, max: 16 }));

        let mut d = FrameDecoder::new(16);
        let mut w = Vec::new();
        encode_frame(b"abc", &mut w);
        w[9] ^= 1;
        d.push(&w);
        assert!(matches!(d.next_frame(), Err(FrameError::BadChecksum { .. })));
    }
}
