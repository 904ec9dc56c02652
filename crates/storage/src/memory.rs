//! Data-memory accounting.
//!
//! Every page (fixed and var), every large var allocation, the hash index
//! tables and the ordered / unique index entries are charged against the node's
//! `data_memory_bytes`. Pages and hash tables are charged at their real
//! allocation size; B-tree entries at an estimate (`ORDERED_ENTRY_OVERHEAD` plus
//! the key bytes), since `BTreeMap` does not expose its node allocations.
//! An operation computes an upper bound of what it will add before it changes
//! anything, so running out of memory (`TableFull`) leaves storage unchanged.

/// Size of a fixed-size row page.
pub const FIXED_PAGE_BYTES: usize = 32 * 1024;
/// Size of a var page.
pub const VAR_PAGE_BYTES: usize = 32 * 1024;
/// Charged per large var allocation on top of its length (allocator header).
pub const LARGE_OVERHEAD: usize = 16;
/// Charged per ordered-index or unique-map entry on top of its key bytes:
/// the key's Vec header (24), the value (4..8), B-tree node slack and the heap
/// allocation header.
pub const ORDERED_ENTRY_OVERHEAD: u64 = 56;

/// Memory use of a data node's storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryStats {
    pub limit_bytes: u64,
    pub used_bytes: u64,
    pub rows: u64,
}

/// Cost charged for one ordered-index or unique-map entry with this key.
pub fn entry_cost(key_len: usize) -> u64 {
    key_len as u64 + ORDERED_ENTRY_OVERHEAD
}
