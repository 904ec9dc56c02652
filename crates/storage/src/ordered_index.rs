//! TUX: ordered indexes of one partition, and the table-wide unique maps.
//!
//! An ordered index is a `BTreeMap` from `index key ++ encoded pk` (keycode bytes,
//! so byte order is SQL order and every entry is distinct) to the RowId.
//! Unique indexes (ordered or hash) also have one table-wide map from the
//! encoded index key to (partition, row): uniqueness holds across partitions.
//! A key with a NULL column is never entered in a unique map (NULLs never
//! conflict, as in SQL).

use crate::fixed_pages::RowId;
use crate::memory::entry_cost;
use norr_signals::PartitionId;
use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::ops::Bound;

/// Keys up to this many bytes are stored inline in the B-tree node.
pub const INLINE_KEY_BYTES: usize = 30;

/// An index key (keycode bytes). Short keys (most: a BIGINT key plus a BIGINT
/// pk is 18 bytes) live inline in the B-tree node: no heap allocation per
/// entry, and comparisons during a search touch no other cache line.
#[derive(Clone)]
pub enum IKey {
    Inline(u8, [u8; INLINE_KEY_BYTES]),
    Heap(Box<[u8]>),
}

impl IKey {
    pub fn new(b: &[u8]) -> IKey {
        if b.len() <= INLINE_KEY_BYTES {
            let mut a = [0u8; INLINE_KEY_BYTES];
            a[..b.len()].copy_from_slice(b);
            IKey::Inline(b.len() as u8, a)
        } else {
            IKey::Heap(b.into())
        }
    }
    pub fn as_slice(&self) -> &[u8] {
        match self {
            IKey::Inline(n, a) => &a[..*n as usize],
            IKey::Heap(b) => b,
        }
    }
}

/// Sort (key, value) pairs by key bytes, for bulk builds. Each key's first
/// 32 bytes (zero-padded) are read once into two big-endian integers, so the
/// sort compares integers; unequal padded prefixes order their keys as the
/// bytes do, and only keys with equal prefixes are compared as bytes.
pub fn sort_by_key<T>(entries: Vec<(IKey, T)>) -> Vec<(IKey, T)> {
    let words = |k: &IKey| {
        let b = k.as_slice();
        let mut w = [0u8; 32];
        let n = b.len().min(32);
        w[..n].copy_from_slice(&b[..n]);
        (u128::from_be_bytes(w[..16].try_into().expect("16")), u128::from_be_bytes(w[16..].try_into().expect("16")))
    };
    let mut order: Vec<(u128, u128, u32)> = entries
        .iter()
        .enumerate()
        .map(|(i, (k, _))| {
            let (a, b) = words(k);
            (a, b, u32::try_from(i).expect("fewer than 2^32 entries"))
        })
        .collect();
    order.sort_unstable_by(|x, y| {
        (x.0, x.1).cmp(&(y.0, y.1)).then_with(|| entries[x.2 as usize].0.cmp(&entries[y.2 as usize].0))
    });
    let mut slots: Vec<Option<(IKey, T)>> = entries.into_iter().map(Some).collect();
    order.iter().map(|o| slots[o.2 as usize].take().expect("each entry once")).collect()
}

impl Borrow<[u8]> for IKey {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}
impl PartialEq for IKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}
impl Eq for IKey {}
impl PartialOrd for IKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for IKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_slice().cmp(other.as_slice())
    }
}
impl std::fmt::Debug for IKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:02x?}", self.as_slice())
    }
}

#[derive(Default, Clone)]
pub struct OrderedIndex {
    pub map: BTreeMap<IKey, RowId>,
    bytes: u64,
}

impl OrderedIndex {
    pub fn footprint(&self) -> u64 {
        self.bytes
    }
    pub fn insert(&mut self, key: &[u8], row: RowId) {
        self.bytes += entry_cost(key.len());
        let old = self.map.insert(IKey::new(key), row);
        assert!(old.is_none(), "ordered index entry already present");
    }
    /// Build from entries sorted by key, all distinct (a bulk build).
    pub fn from_sorted(entries: Vec<(IKey, RowId)>) -> OrderedIndex {
        assert!(entries.windows(2).all(|w| w[0].0 < w[1].0), "ordered index entries not sorted and distinct");
        let bytes = entries.iter().map(|(k, _)| entry_cost(k.as_slice().len())).sum();
        OrderedIndex { map: entries.into_iter().collect(), bytes }
    }
    pub fn remove(&mut self, key: &[u8]) {
        let old = self.map.remove(key);
        assert!(old.is_some(), "ordered index entry missing");
        self.bytes -= entry_cost(key.len());
    }
}

#[derive(Default, Clone)]
pub struct UniqueMap {
    pub map: BTreeMap<IKey, (PartitionId, RowId)>,
    bytes: u64,
}

impl UniqueMap {
    pub fn footprint(&self) -> u64 {
        self.bytes
    }
    pub fn get(&self, key: &[u8]) -> Option<(PartitionId, RowId)> {
        self.map.get(key).copied()
    }
    pub fn insert(&mut self, key: &[u8], at: (PartitionId, RowId)) {
        self.bytes += entry_cost(key.len());
        let old = self.map.insert(IKey::new(key), at);
        assert!(old.is_none(), "unique map entry already present");
    }
    /// Build from entries sorted by key, all distinct (a bulk build).
    pub fn from_sorted(entries: Vec<(IKey, (PartitionId, RowId))>) -> UniqueMap {
        assert!(entries.windows(2).all(|w| w[0].0 < w[1].0), "unique map entries not sorted and distinct");
        let bytes = entries.iter().map(|(k, _)| entry_cost(k.as_slice().len())).sum();
        UniqueMap { map: entries.into_iter().collect(), bytes }
    }
    pub fn remove(&mut self, key: &[u8]) {
        let old = self.map.remove(key);
        assert!(old.is_some(), "unique map entry missing");
        self.bytes -= entry_cost(key.len());
    }
}

/// Smallest byte string greater than every string that starts with `prefix`
/// (None if there is none: the prefix is all 0xFF).
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut v = prefix.to_vec();
    while let Some(last) = v.pop() {
        if last != 0xFF {
            v.push(last + 1);
            return Some(v);
        }
    }
    None
}

/// Turn encoded bound prefixes into a key range over `index key ++ pk` entries.
/// An empty prefix is unbounded.
pub fn key_range(low: &[u8], low_incl: bool, high: &[u8], high_incl: bool) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let lo = if low.is_empty() {
        Bound::Unbounded
    } else if low_incl {
        Bound::Included(low.to_vec())
    } else {
        match prefix_successor(low) {
            Some(s) => Bound::Included(s),
            // Nothing sorts after an all-0xFF prefix: an empty range.
            None => Bound::Excluded(vec![0xFF; low.len() + 1]),
        }
    };
    let hi = if high.is_empty() {
        Bound::Unbounded
    } else if high_incl {
        match prefix_successor(high) {
            Some(s) => Bound::Excluded(s),
            None => Bound::Unbounded,
        }
    } else {
        Bound::Excluded(high.to_vec())
    };
    (lo, hi)
}

/// True if no key lies between the bounds (BTreeMap::range would panic on
/// some of these).
pub fn range_is_empty<K: AsRef<[u8]>>(lo: &Bound<K>, hi: &Bound<K>) -> bool {
    match (lo, hi) {
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => false,
        (Bound::Included(a), Bound::Included(b)) => a.as_ref() > b.as_ref(),
        (Bound::Included(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b))
        | (Bound::Excluded(a), Bound::Excluded(b)) => a.as_ref() >= b.as_ref(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_and_heap_keys_order_as_bytes() {
        let keys: Vec<Vec<u8>> = vec![vec![], vec![0], vec![1; 30], vec![1; 31], vec![1; 29], vec![2], vec![1; 100]];
        for a in &keys {
            for b in &keys {
                assert_eq!(IKey::new(a).cmp(&IKey::new(b)), a.cmp(b));
                assert_eq!(IKey::new(a).as_slice(), &a[..]);
            }
        }
        assert!(matches!(IKey::new(&[1; 30]), IKey::Inline(..)));
        assert!(matches!(IKey::new(&[1; 31]), IKey::Heap(..)));
        assert_eq!(std::mem::size_of::<IKey>(), 32);
    }

    #[test]
    fn successor() {
        assert_eq!(prefix_successor(&[1, 2]), Some(vec![1, 3]));
        assert_eq!(prefix_successor(&[1, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_successor(&[0xFF]), None);
        assert!(range_is_empty(&Bound::Included(vec![2]), &Bound::Excluded(vec![2])));
    }

    #[test]
    fn bulk_sort_orders_as_bytes() {
        let mut keys: Vec<Vec<u8>> = vec![vec![], vec![0], vec![0; 16], vec![0; 17], vec![0; 40], vec![255; 33]];
        keys.extend([[vec![1; 16], vec![0]].concat(), [vec![1; 16], vec![2]].concat(), vec![1; 16]]);
        keys.extend([[vec![7; 32], vec![0]].concat(), [vec![7; 32], vec![1]].concat(), vec![7; 32], vec![7; 31]]);
        let mut x = 99u64;
        for _ in 0..300 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            keys.push((0..x % 40).map(|i| ((x >> (i % 8)) & 3) as u8).collect());
        }
        keys.sort();
        keys.dedup();
        let mut shuffled: Vec<(IKey, usize)> = keys.iter().enumerate().map(|(i, k)| (IKey::new(k), i)).collect();
        shuffled.reverse();
        shuffled.rotate_left(17);
        let sorted = sort_by_key(shuffled);
        assert_eq!(sorted.iter().map(|(_, i)| *i).collect::<Vec<_>>(), (0..keys.len()).collect::<Vec<_>>());
        assert!(!range_is_empty(&Bound::Included(vec![2]), &Bound::Included(vec![2])));
    }
}
