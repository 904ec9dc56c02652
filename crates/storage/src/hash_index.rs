//! ACC: the primary-key hash index of one partition.
//!
//! A `hashbrown::HashTable<RowId>`: the table stores only the 4-byte row id (plus
//! hashbrown's 1 control byte per bucket); keys are never copied into the index.
//! Hashing and equality re-encode the primary key from the row itself, through
//! the closures the caller passes, which keeps the index at about 5-10 bytes per
//! row.
//!
//! The hash is `keycode::key_hash` of the encoded key, remixed: the partition
//! function takes the same hash modulo the partition count, so within one
//! partition its low bits are correlated and must not pick buckets directly.

use crate::fixed_pages::RowId;
use hashbrown::HashTable;

#[derive(Default)]
pub struct HashIndex {
    table: HashTable<RowId>,
}

/// Bucket hash of an encoded primary key.
pub fn pk_hash(encoded: &[u8]) -> u64 {
    let h = norr_signals::keycode::key_hash(encoded).rotate_left(32);
    let h = (h ^ 0x9e37_79b9_7f4a_7c15).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^ (h >> 31)
}

impl HashIndex {
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Bytes of the table's allocation.
    pub fn footprint(&self) -> u64 {
        self.table.allocation_size() as u64
    }

    /// Upper bound of the memory one more insert adds (a resize doubles it).
    pub fn insert_cost(&self) -> u64 {
        if self.table.len() < self.table.capacity() {
            0
        } else {
            self.table.allocation_size() as u64 + 128
        }
    }

    /// Upper bound of the memory `reserve(additional)` adds.
    pub fn reserve_cost(&self, additional: u64) -> u64 {
        let want = (self.table.len() as u64).saturating_add(additional);
        if want <= self.table.capacity() as u64 {
            return 0;
        }
        // hashbrown: a power-of-two bucket count at 7/8 load, one control
        // byte per bucket plus a group's worth, and the 4-byte row ids.
        let buckets = (want.saturating_mul(8) / 7).max(4).checked_next_power_of_two().unwrap_or(u64::MAX);
        buckets.saturating_mul(5).saturating_add(64)
    }

    /// Grow to hold `additional` more row ids without rehashing; `rehash`
    /// gives the hash of a row already in the index.
    pub fn reserve(&mut self, additional: usize, rehash: impl Fn(RowId) -> u64) {
        self.table.reserve(additional, |&r| rehash(r));
    }

    pub fn find(&self, hash: u64, mut eq: impl FnMut(RowId) -> bool) -> Option<RowId> {
        self.table.find(hash, |&r| eq(r)).copied()
    }

    /// Insert a row id; `rehash` gives the hash of any row already in the index.
    pub fn insert(&mut self, hash: u64, row: RowId, rehash: impl Fn(RowId) -> u64) {
        self.table.insert_unique(hash, row, |&r| rehash(r));
    }

    /// Remove a row id; returns false if it was not there.
    pub fn remove(&mut self, hash: u64, row: RowId) -> bool {
        match self.table.find_entry(hash, |&r| r == row) {
            Ok(e) => {
                e.remove();
                true
            }
            Err(_) => false,
        }
    }
}
