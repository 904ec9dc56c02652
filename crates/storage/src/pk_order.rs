//! The ordered index on the primary key of one partition, in a compact form.
//!
//! Every table gets an ordered index on its primary key (NDB's hidden
//! `PRIMARY` ordered index) so that key ranges are range scans. A `BTreeMap`
//! entry of a general ordered index costs about 64 bytes (key copy, row id,
//! node slack); this one stores only the 4-byte row ids, sorted by the
//! encoded primary key, which is re-encoded from the row itself whenever it
//! is compared (as the hash index does), at about 5-6 bytes per row.
//!
//! Layout: a list of leaves, each a sorted run of at most `LEAF_ROWS` row ids.
//! A leaf's fence is the encoded key its first entry had when the leaf was
//! made: every key in leaf i is >= fence i and < fence i+1 (leaf 0's fence is
//! empty, below every key), so an insert or delete picks its leaf by comparing
//! fences (plain bytes) and only then reads rows, O(log LEAF_ROWS) of them.
//! Appends at the end (ascending keys) start a new leaf instead of splitting,
//! so those leaves stay full.

use crate::fixed_pages::RowId;

/// Most row ids per leaf.
pub const LEAF_ROWS: usize = 512;
/// Bytes charged per leaf besides its row ids: the leaf record itself and the
/// fence's allocation header.
const LEAF_OVERHEAD: u64 = std::mem::size_of::<Leaf>() as u64 + 16;

struct Leaf {
    fence: Box<[u8]>,
    rows: Vec<RowId>,
}

impl Leaf {
    fn bytes(&self) -> u64 {
        LEAF_OVERHEAD + self.fence.len() as u64 + (self.rows.capacity() * std::mem::size_of::<RowId>()) as u64
    }
}

/// Encodes the primary key of a stored row into the buffer (cleared first).
pub type EncodePk<'a> = dyn FnMut(RowId, &mut Vec<u8>) + 'a;

#[derive(Default)]
pub struct PkOrder {
    leaves: Vec<Leaf>,
    len: usize,
    bytes: u64,
}

/// A position: leaf and entry within it.
pub type Pos = (usize, usize);

impl PkOrder {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn footprint(&self) -> u64 {
        self.bytes + (self.leaves.capacity() * std::mem::size_of::<Leaf>()) as u64
    }

    /// Upper bound of the memory one insert adds (a leaf doubles or splits,
    /// the leaf list may grow).
    pub fn insert_cost(&self, key_len: usize) -> u64 {
        let list = if self.leaves.len() == self.leaves.capacity() {
            (self.leaves.capacity().max(4) * std::mem::size_of::<Leaf>()) as u64
        } else {
            0
        };
        (LEAF_ROWS * std::mem::size_of::<RowId>()) as u64 + LEAF_OVERHEAD + key_len as u64 + list
    }

    /// The leaf whose key range holds `pk`.
    fn leaf_for(&self, pk: &[u8]) -> usize {
        self.leaves.partition_point(|l| &*l.fence <= pk).saturating_sub(1)
    }

    /// Index in leaf `li` of the first entry whose key is >= pk, and whether
    /// it is equal.
    fn search(&self, li: usize, pk: &[u8], enc: &mut EncodePk<'_>, buf: &mut Vec<u8>) -> (usize, bool) {
        let rows = &self.leaves[li].rows;
        let (mut lo, mut hi) = (0, rows.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            enc(rows[mid], buf);
            match buf.as_slice().cmp(pk) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Equal => return (mid, true),
                std::cmp::Ordering::Greater => hi = mid,
            }
        }
        (lo, false)
    }

    fn set_bytes(&mut self) {
        self.bytes = self.leaves.iter().map(Leaf::bytes).sum();
    }

    /// Build from rows sorted by primary key, all distinct: full leaves, each
    /// fenced by its first key (a bulk build).
    pub fn from_sorted(rows: &[RowId], enc: &mut EncodePk<'_>) -> PkOrder {
        let mut o = PkOrder::default();
        let (mut prev, mut buf) = (Vec::new(), Vec::new());
        for (i, chunk) in rows.chunks(LEAF_ROWS).enumerate() {
            enc(chunk[0], &mut buf);
            assert!(i == 0 || prev < buf, "primary keys not sorted and distinct");
            let fence: Box<[u8]> = if i == 0 { Box::default() } else { buf.as_slice().into() };
            enc(chunk[chunk.len() - 1], &mut prev);
            debug_assert!(chunk.len() == 1 || buf < prev, "leaf {i} not sorted");
            o.leaves.push(Leaf { fence, rows: chunk.to_vec() });
        }
        o.len = rows.len();
        o.set_bytes();
        o
    }

    /// Add a row with encoded primary key `pk` (not present yet).
    pub fn insert(&mut self, pk: &[u8], row: RowId, enc: &mut EncodePk<'_>) {
        if self.leaves.is_empty() {
            self.leaves.push(Leaf { fence: Box::default(), rows: Vec::with_capacity(4) });
            self.set_bytes();
        }
        let mut buf = Vec::with_capacity(pk.len());
        let li = self.leaf_for(pk);
        let (at, found) = self.search(li, pk, enc, &mut buf);
        assert!(!found, "primary key already in the ordered index");
        let last = li + 1 == self.leaves.len();
        let leaf = &mut self.leaves[li];
        let before = leaf.bytes();
        if leaf.rows.len() < LEAF_ROWS {
            if leaf.rows.len() == leaf.rows.capacity() {
                let grow = leaf.rows.capacity().clamp(4, LEAF_ROWS - leaf.rows.len());
                leaf.rows.reserve_exact(grow);
            }
            leaf.rows.insert(at, row);
            self.bytes = self.bytes + self.leaves[li].bytes() - before;
        } else if last && at == leaf.rows.len() {
            // Appending past the end: a new last leaf, the full one stays full.
            let mut rows = Vec::with_capacity(4);
            rows.push(row);
            self.leaves.push(Leaf { fence: pk.into(), rows });
            self.set_bytes();
        } else {
            let upper: Vec<RowId> = leaf.rows.split_off(LEAF_ROWS / 2);
            let mut upper_leaf = Leaf { fence: Box::default(), rows: Vec::with_capacity(LEAF_ROWS / 2 + 1) };
            upper_leaf.rows.extend_from_slice(&upper);
            enc(upper_leaf.rows[0], &mut buf);
            upper_leaf.fence = buf.as_slice().into();
            if at <= LEAF_ROWS / 2 {
                leaf.rows.insert(at, row);
            } else {
                upper_leaf.rows.insert(at - LEAF_ROWS / 2, row);
            }
            self.leaves.insert(li + 1, upper_leaf);
            self.set_bytes();
        }
        self.len += 1;
    }

    /// Remove the row with encoded primary key `pk`; false if it is not there.
    pub fn remove(&mut self, pk: &[u8], enc: &mut EncodePk<'_>) -> bool {
        if self.leaves.is_empty() {
            return false;
        }
        let mut buf = Vec::with_capacity(pk.len());
        let li = self.leaf_for(pk);
        let (at, found) = self.search(li, pk, enc, &mut buf);
        if !found {
            return false;
        }
        self.leaves[li].rows.remove(at);
        if self.leaves[li].rows.is_empty() && self.leaves.len() > 1 {
            self.leaves.remove(li);
            // The first leaf covers every key below the second one's fence.
            self.leaves[0].fence = Box::default();
        } else {
            let rows = &mut self.leaves[li].rows;
            if rows.len() * 4 < rows.capacity() {
                rows.shrink_to(rows.len() * 2);
            }
        }
        self.set_bytes();
        self.len -= 1;
        true
    }

    /// Position of the first entry whose encoded pk `before` rejects.
    /// `before` must be monotone over encoded keys (true for every key below
    /// some point, false from there on), as a comparison with a bound is: it
    /// is also asked about leaf fences, which picks the leaf by comparing
    /// bytes, so only rows of one leaf are encoded (O(log LEAF_ROWS)).
    #[cfg(test)]
    pub fn seek_pk(&self, before: impl Fn(&[u8]) -> bool, enc: &mut EncodePk<'_>) -> Pos {
        let mut buf = Vec::new();
        self.seek(&before, |r| {
            enc(r, &mut buf);
            before(&buf)
        })
    }

    /// `seek_pk` with the predicate given twice: on encoded keys (for leaf
    /// fences) and on rows (`row_before(r)` must equal `fence_before` of
    /// row r's encoded key), so a caller that can decide a row without
    /// encoding its key does so.
    pub fn seek(&self, mut fence_before: impl FnMut(&[u8]) -> bool, row_before: impl FnMut(RowId) -> bool) -> Pos {
        let mut row_before = row_before;
        let Some(rest) = self.leaves.get(1..) else {
            return (0, 0);
        };
        // Every key of leaf i is >= fence i, and below fence i+1: the leaves
        // before the last one whose fence is `before` hold only `before`
        // keys, the leaves after it none.
        let li = rest.partition_point(|l| fence_before(&l.fence));
        let at = self.leaves[li].rows.partition_point(|&r| row_before(r));
        if at == self.leaves[li].rows.len() {
            // The next leaf starts at a fence that is not `before`.
            return (li + 1, 0);
        }
        (li, at)
    }

    /// The entry at `pos` (None at the end). Positions from `seek`, `next`
    /// and `prev` are always at an entry or at the end (only a lone leaf is
    /// ever empty).
    pub fn get(&self, (li, at): Pos) -> Option<RowId> {
        self.leaves.get(li)?.rows.get(at).copied()
    }

    /// The position after `pos`.
    pub fn next(&self, (li, at): Pos) -> Pos {
        match self.leaves.get(li) {
            Some(l) if at + 1 < l.rows.len() => (li, at + 1),
            Some(_) => (li + 1, 0),
            None => (li, 0),
        }
    }

    /// The position before `pos`, None at the start.
    pub fn prev(&self, (li, at): Pos) -> Option<Pos> {
        if at > 0 {
            return Some((li, at - 1));
        }
        let mut l = li;
        while l > 0 {
            l -= 1;
            if let Some(n) = self.leaves[l].rows.len().checked_sub(1) {
                return Some((l, n));
            }
        }
        None
    }

    /// Every row id in key order (tests, invariant checks).
    pub fn rows(&self) -> impl Iterator<Item = RowId> + '_ {
        self.leaves.iter().flat_map(|l| l.rows.iter().copied())
    }

    /// Check the structure: sorted, fences bounding their leaves, byte count.
    pub fn check_invariants(&self, enc: &mut EncodePk<'_>) {
        let mut prev: Option<Vec<u8>> = None;
        let mut buf = Vec::new();
        for (i, l) in self.leaves.iter().enumerate() {
            assert!(l.rows.len() <= LEAF_ROWS);
            assert!(!l.rows.is_empty() || self.leaves.len() == 1, "empty leaf {i}");
            assert!(i > 0 || l.fence.is_empty(), "first fence not empty");
            for &r in &l.rows {
                enc(r, &mut buf);
                assert!(buf.as_slice() >= &*l.fence, "key below its leaf's fence");
                if let Some(next) = self.leaves.get(i + 1) {
                    assert!(buf.as_slice() < &*next.fence, "key at or above the next fence");
                }
                assert!(prev.as_deref().is_none_or(|p| p < buf.as_slice()), "keys out of order");
                prev = Some(buf.clone());
            }
        }
        assert_eq!(self.rows().count(), self.len);
        assert_eq!(self.bytes, self.leaves.iter().map(Leaf::bytes).sum::<u64>());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Row ids map to keys through a table: key of row r = keys[r].
    fn enc_of(keys: &[u64]) -> impl FnMut(RowId, &mut Vec<u8>) + '_ {
        move |r, buf| {
            buf.clear();
            buf.extend_from_slice(&keys[r as usize].to_be_bytes());
        }
    }

    #[test]
    fn random_inserts_and_deletes_keep_order() {
        let n = 5000u64;
        // A permutation of keys: row r has key (r * 7919) % n.
        let keys: Vec<u64> = (0..n).map(|r| (r * 7919) % n).collect();
        let mut e = enc_of(&keys);
        let mut o = PkOrder::default();
        for r in 0..n as RowId {
            o.insert(&keys[r as usize].to_be_bytes(), r, &mut e);
        }
        o.check_invariants(&mut e);
        let in_order: Vec<u64> = o.rows().map(|r| keys[r as usize]).collect();
        assert_eq!(in_order, (0..n).collect::<Vec<_>>());
        for r in (0..n as RowId).filter(|r| r % 3 != 0) {
            assert!(o.remove(&keys[r as usize].to_be_bytes(), &mut e));
        }
        assert!(!o.remove(&keys[1].to_be_bytes(), &mut e));
        o.check_invariants(&mut e);
        let mut want: Vec<u64> = (0..n as RowId).filter(|r| r % 3 == 0).map(|r| keys[r as usize]).collect();
        want.sort();
        assert_eq!(o.rows().map(|r| keys[r as usize]).collect::<Vec<_>>(), want);
        // Seek at every point, against the sorted keys.
        let key_of = |b: &[u8]| u64::from_be_bytes(b.try_into().expect("8-byte keys"));
        for t in (0..n + 2).step_by(7) {
            let p = o.seek_pk(|k| key_of(k) < t, &mut e);
            assert_eq!(o.get(p).map(|r| keys[r as usize]), want.iter().copied().find(|k| *k >= t), "seek {t}");
            let back = o.prev(p).and_then(|q| o.get(q)).map(|r| keys[r as usize]);
            assert_eq!(back, want.iter().copied().rev().find(|k| *k < t), "before {t}");
        }
        // Walk forward and back.
        let p = o.seek_pk(|k| key_of(k) < 100, &mut e);
        let first = o.get(p).map(|r| keys[r as usize]);
        assert_eq!(first, want.iter().copied().find(|k| *k >= 100));
        let back = o.prev(p).and_then(|q| o.get(q)).map(|r| keys[r as usize]);
        assert_eq!(back, want.iter().copied().rev().find(|k| *k < 100));
        let fwd = o.get(o.next(p)).map(|r| keys[r as usize]);
        assert_eq!(fwd, want.iter().copied().filter(|k| *k >= 100).nth(1));
        // Delete everything.
        for r in (0..n as RowId).filter(|r| r % 3 == 0) {
            assert!(o.remove(&keys[r as usize].to_be_bytes(), &mut e));
        }
        o.check_invariants(&mut e);
        assert!(o.is_empty());
        assert_eq!(o.get(o.seek_pk(|_| true, &mut e)), None);
        assert_eq!(o.get(o.seek_pk(|_| false, &mut e)), None);
        assert_eq!(o.prev(o.seek_pk(|_| true, &mut e)), None);
    }

    #[test]
    fn ascending_inserts_fill_leaves() {
        let n = 20_000u64;
        let keys: Vec<u64> = (0..n).collect();
        let mut e = enc_of(&keys);
        let mut o = PkOrder::default();
        for r in 0..n as RowId {
            o.insert(&keys[r as usize].to_be_bytes(), r, &mut e);
        }
        o.check_invariants(&mut e);
        let per_row = o.footprint() as f64 / n as f64;
        assert!(per_row < 5.0, "{per_row} bytes per row");
    }
}
