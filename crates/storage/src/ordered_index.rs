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
use std::collections::BTreeMap;
use std::ops::Bound;

#[derive(Default, Clone)]
pub struct OrderedIndex {
    pub map: BTreeMap<Vec<u8>, RowId>,
    bytes: u64,
}

impl OrderedIndex {
    pub fn footprint(&self) -> u64 {
        self.bytes
    }
    pub fn insert(&mut self, key: Vec<u8>, row: RowId) {
        self.bytes += entry_cost(key.len());
        let old = self.map.insert(key, row);
        assert!(old.is_none(), "ordered index entry already present");
    }
    pub fn remove(&mut self, key: &[u8]) {
        let old = self.map.remove(key);
        assert!(old.is_some(), "ordered index entry missing");
        self.bytes -= entry_cost(key.len());
    }
}

#[derive(Default, Clone)]
pub struct UniqueMap {
    pub map: BTreeMap<Vec<u8>, (PartitionId, RowId)>,
    bytes: u64,
}

impl UniqueMap {
    pub fn footprint(&self) -> u64 {
        self.bytes
    }
    pub fn get(&self, key: &[u8]) -> Option<(PartitionId, RowId)> {
        self.map.get(key).copied()
    }
    pub fn insert(&mut self, key: Vec<u8>, at: (PartitionId, RowId)) {
        self.bytes += entry_cost(key.len());
        let old = self.map.insert(key, at);
        assert!(old.is_none(), "unique map entry already present");
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
pub fn key_range(
    low: &[u8],
    low_incl: bool,
    high: &[u8],
    high_incl: bool,
) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
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
pub fn range_is_empty(lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    match (lo, hi) {
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => false,
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b))
        | (Bound::Excluded(a), Bound::Excluded(b)) => a >= b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn successor() {
        assert_eq!(prefix_successor(&[1, 2]), Some(vec![1, 3]));
        assert_eq!(prefix_successor(&[1, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_successor(&[0xFF]), None);
        assert!(range_is_empty(
            &Bound::Included(vec![2]),
            &Bound::Excluded(vec![2])
        ));
        assert!(!range_is_empty(
            &Bound::Included(vec![2]),
            &Bound::Included(vec![2])
        ));
    }
}
