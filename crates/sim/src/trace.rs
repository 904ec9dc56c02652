//! The event trace hash: 64-bit FNV-1a over every event the host executes, with
//! a final avalanche. Stable across runs, platforms and Rust versions (unlike
//! `DefaultHasher`), so a seed's hash can be written into a test.

use norr_kernel::BlockRef;
use norr_signals::Signal;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

#[derive(Debug, Clone)]
pub struct TraceHasher {
    h: u64,
    events: u64,
}

impl Default for TraceHasher {
    fn default() -> Self {
        TraceHasher { h: FNV_OFFSET, events: 0 }
    }
}

/// Stable hash of arbitrary bytes.
pub fn fnv64(bytes: &[u8]) -> u64 {
    let mut h = FNV_OFFSET;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

/// Stable content hash of a signal: FNV over its postcard encoding.
pub fn signal_hash(sig: &Signal) -> u64 {
    match postcard::to_stdvec(sig) {
        Ok(b) => fnv64(&b),
        // Serialization of our own types into a Vec does not fail; hash the name
        // rather than panic if it ever does.
        Err(_) => fnv64(sig.name().as_bytes()),
    }
}

impl TraceHasher {
    pub fn write_u64(&mut self, v: u64) {
        for b in v.to_le_bytes() {
            self.h ^= b as u64;
            self.h = self.h.wrapping_mul(FNV_PRIME);
        }
    }

    pub fn write_bytes(&mut self, bytes: &[u8]) {
        self.write_u64(bytes.len() as u64);
        for &b in bytes {
            self.h ^= b as u64;
            self.h = self.h.wrapping_mul(FNV_PRIME);
        }
    }

    fn write_ref(&mut self, r: BlockRef) {
        self.write_u64(((r.node as u64) << 32) | ((r.block as u64) << 16) | r.instance as u64);
    }

    /// One executed event: time, kind, addresses, signal name and content.
    pub fn event(&mut self, now_ns: u64, kind: u8, from: BlockRef, to: BlockRef, sig: &Signal) {
        self.events += 1;
        self.write_u64(now_ns);
        self.write_u64(kind as u64);
        self.write_ref(from);
        self.write_ref(to);
        self.write_bytes(sig.name().as_bytes());
        self.write_u64(signal_hash(sig));
    }

    /// An event without a signal (client wake-up, crash, timer).
    pub fn mark(&mut self, now_ns: u64, kind: u8, a: u64) {
        self.events += 1;
        self.write_u64(now_ns);
        self.write_u64(kind as u64);
        self.write_u64(a);
    }

    pub fn events(&self) -> u64 {
        self.events
    }

    /// The trace hash so far.
    pub fn finish(&self) -> u64 {
        let mut z = self.h ^ self.events.rotate_left(32);
        z = (z ^ (z >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
        z = (z ^ (z >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        z ^ (z >> 33)
    }
}
