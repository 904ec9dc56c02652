//! A fast, fixed (unseeded) hasher for the blocks' hash maps and the native
//! client's request map: the FxHash multiply-rotate of rustc, with a final
//! avalanche so that hashbrown's top-7-bit tags and low-bit bucket index both
//! see every input bit.
//!
//! Fixed on purpose: the same inputs hash the same in every run, so a block
//! behaves identically whatever the process (SipHash's `RandomState` is seeded
//! per process). The maps it serves are keyed by small internal ids and
//! encoded keys chosen by our own code paths; they are used for lookups only,
//! never iterated where the order could reach a trace.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

#[derive(Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            // The length keeps "ab" and "ab\0" apart.
            self.add(u64::from_le_bytes(b) ^ ((rest.len() as u64) << 59));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }
    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.add(i as u64);
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        // murmur3 fmix64: spread the last multiply's high bits down.
        let mut h = self.hash;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h
    }
}

pub type FxBuild = BuildHasherDefault<FxHasher>;
/// `HashMap` with [`FxHasher`]; build with `FxHashMap::default()`.
pub type FxHashMap<K, V> = HashMap<K, V, FxBuild>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn fixed_and_spread() {
        let b = FxBuild::default();
        // Fixed across runs and processes.
        assert_eq!(b.hash_one(7u64), FxBuild::default().hash_one(7u64));
        // Lengths and trailing zero bytes are told apart.
        assert_ne!(b.hash_one(b"ab".as_slice()), b.hash_one(b"ab\0".as_slice()));
        assert_ne!(b.hash_one(vec![0u8; 8]), b.hash_one(vec![0u8; 16]));
        // Sequential ids do not collide in the low bits hashbrown uses.
        let mut low: Vec<u64> = (0u64..256).map(|i| b.hash_one(i) & 0xff).collect();
        low.sort_unstable();
        low.dedup();
        assert!(low.len() > 128, "{} distinct low bytes", low.len());
        let mut m: FxHashMap<(u32, Vec<u8>), u32> = FxHashMap::default();
        for i in 0..1000u32 {
            m.insert((i % 3, i.to_be_bytes().to_vec()), i);
        }
        assert_eq!(m[&(2, 998u32.to_be_bytes().to_vec())], 998);
    }
}
