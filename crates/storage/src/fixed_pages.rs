//! Fixed-size row slots of one partition, in 32 KiB pages.
//!
//! A RowId is `page * slots_per_page + slot`; it stays valid while the row lives.
//! Each page keeps a bitmap of live slots (for scans), a free list threaded
//! through its free slots (the first 4 bytes of a free slot hold the next free
//! slot, `NONE` ends the list) and a bump pointer for never-used slots.
//! Allocation takes the lowest-numbered allocated page that has a free slot, so
//! rows pack towards the front and pages at the back can drain and be released
//! (a page with no live row gives its 32 KiB back; its number is reused first).

use crate::memory::FIXED_PAGE_BYTES;
use std::collections::BTreeSet;

pub type RowId = u32;

const NONE: u32 = u32::MAX;

struct FixedPage {
    /// None when the page is released.
    buf: Option<Box<[u8]>>,
    live_bits: Vec<u64>,
    live: u32,
    free_head: u32,
    bump: u32,
}

pub struct FixedPages {
    slot_size: usize,
    slots_per_page: u32,
    pages: Vec<FixedPage>,
    /// Allocated pages with at least one free slot.
    partial: BTreeSet<u32>,
    /// Page numbers whose buffer was released.
    released: BTreeSet<u32>,
    allocated_pages: u64,
    live: u64,
}

impl FixedPages {
    pub fn new(slot_size: usize) -> FixedPages {
        assert!((4..=FIXED_PAGE_BYTES).contains(&slot_size), "slot size {slot_size}");
        FixedPages {
            slot_size,
            slots_per_page: (FIXED_PAGE_BYTES / slot_size) as u32,
            pages: Vec::new(),
            partial: BTreeSet::new(),
            released: BTreeSet::new(),
            allocated_pages: 0,
            live: 0,
        }
    }

    pub fn live_rows(&self) -> u64 {
        self.live
    }

    fn bitmap_words(&self) -> usize {
        (self.slots_per_page as usize).div_ceil(64)
    }

    /// Bytes charged against data memory: whole pages, their bitmaps and the
    /// page table.
    pub fn footprint(&self) -> u64 {
        self.allocated_pages * (FIXED_PAGE_BYTES + self.bitmap_words() * 8) as u64
            + (self.pages.capacity() * std::mem::size_of::<FixedPage>()) as u64
    }

    /// Memory an `alloc` may add.
    pub fn alloc_cost(&self) -> u64 {
        if self.partial.is_empty() {
            let page = (FIXED_PAGE_BYTES + self.bitmap_words() * 8) as u64;
            // A new page number may double the page table.
            let table = if self.released.is_empty() {
                self.pages.capacity().max(4) * std::mem::size_of::<FixedPage>()
            } else {
                0
            };
            page + table as u64
        } else {
            0
        }
    }

    fn split(&self, row: RowId) -> (usize, usize) {
        ((row / self.slots_per_page) as usize, (row % self.slots_per_page) as usize)
    }

    pub fn is_live(&self, row: RowId) -> bool {
        let (p, s) = self.split(row);
        match self.pages.get(p) {
            Some(pg) if pg.buf.is_some() => pg.live_bits[s / 64] & (1 << (s % 64)) != 0,
            _ => false,
        }
    }

    pub fn slot(&self, row: RowId) -> &[u8] {
        assert!(self.is_live(row), "row {row} is not live");
        let (p, s) = self.split(row);
        let buf = self.pages[p].buf.as_ref().expect("allocated");
        &buf[s * self.slot_size..(s + 1) * self.slot_size]
    }

    pub fn slot_mut(&mut self, row: RowId) -> &mut [u8] {
        assert!(self.is_live(row), "row {row} is not live");
        let (p, s) = self.split(row);
        let size = self.slot_size;
        let buf = self.pages[p].buf.as_mut().expect("allocated");
        &mut buf[s * size..(s + 1) * size]
    }

    /// Take a free slot (allocating a page if needed; the caller checked memory).
    pub fn alloc(&mut self) -> RowId {
        let p = match self.partial.first() {
            Some(&p) => p,
            None => self.new_page(),
        };
        let spp = self.slots_per_page;
        let size = self.slot_size;
        let pg = &mut self.pages[p as usize];
        let buf = pg.buf.as_mut().expect("partial page allocated");
        let s = if pg.free_head != NONE {
            let s = pg.free_head;
            let o = s as usize * size;
            pg.free_head = u32::from_le_bytes(buf[o..o + 4].try_into().expect("4"));
            s
        } else {
            assert!(pg.bump < spp, "partial page {p} has no free slot");
            pg.bump += 1;
            pg.bump - 1
        };
        debug_assert_eq!(pg.live_bits[s as usize / 64] & (1 << (s % 64)), 0);
        pg.live_bits[s as usize / 64] |= 1 << (s % 64);
        pg.live += 1;
        if pg.live == spp {
            self.partial.remove(&p);
        }
        self.live += 1;
        let row = p.checked_mul(spp).and_then(|b| b.checked_add(s)).expect("RowId space exhausted");
        assert_ne!(row, NONE);
        row
    }

    fn new_page(&mut self) -> u32 {
        let words = self.bitmap_words();
        let page = FixedPage {
            buf: Some(vec![0u8; self.slots_per_page as usize * self.slot_size].into_boxed_slice()),
            live_bits: vec![0; words],
            live: 0,
            free_head: NONE,
            bump: 0,
        };
        self.allocated_pages += 1;
        let p = match self.released.pop_first() {
            Some(p) => {
                self.pages[p as usize] = page;
                p
            }
            None => {
                self.pages.push(page);
                (self.pages.len() - 1) as u32
            }
        };
        self.partial.insert(p);
        p
    }

    pub fn free(&mut self, row: RowId) {
        assert!(self.is_live(row), "free of dead row {row}");
        let (p, s) = self.split(row);
        let size = self.slot_size;
        let pg = &mut self.pages[p];
        pg.live_bits[s / 64] &= !(1 << (s % 64));
        pg.live -= 1;
        self.live -= 1;
        // An empty page is released, unless it is the partition's last one
        // (so a small table with insert/delete churn does not allocate and
        // zero a page per row).
        if pg.live == 0 && self.allocated_pages > 1 {
            pg.buf = None;
            pg.live_bits = Vec::new();
            pg.free_head = NONE;
            pg.bump = 0;
            self.allocated_pages -= 1;
            self.partial.remove(&(p as u32));
            self.released.insert(p as u32);
            return;
        }
        let buf = pg.buf.as_mut().expect("allocated");
        let o = s * size;
        buf[o..o + 4].copy_from_slice(&pg.free_head.to_le_bytes());
        pg.free_head = s as u32;
        self.partial.insert(p as u32);
    }

    /// First live row with id >= `from`.
    pub fn next_live(&self, from: u64) -> Option<RowId> {
        let spp = self.slots_per_page as u64;
        let mut p = (from / spp) as usize;
        let mut s = (from % spp) as usize;
        while p < self.pages.len() {
            let pg = &self.pages[p];
            if pg.buf.is_some() && pg.live > 0 {
                let mut w = s / 64;
                let mut bits = if w < pg.live_bits.len() { pg.live_bits[w] & (!0u64 << (s % 64)) } else { 0 };
                while w < pg.live_bits.len() {
                    if bits != 0 {
                        let slot = w * 64 + bits.trailing_zeros() as usize;
                        return Some((p as u64 * spp + slot as u64) as RowId);
                    }
                    w += 1;
                    bits = pg.live_bits.get(w).copied().unwrap_or(0);
                }
            }
            p += 1;
            s = 0;
        }
        None
    }

    /// Check the page bookkeeping against the bitmaps (tests, debug).
    pub fn check_invariants(&self) {
        let mut live = 0u64;
        let mut allocated = 0u64;
        for (p, pg) in self.pages.iter().enumerate() {
            if pg.buf.is_none() {
                assert_eq!(pg.live, 0);
                assert!(self.released.contains(&(p as u32)));
                continue;
            }
            allocated += 1;
            let n: u32 = pg.live_bits.iter().map(|w| w.count_ones()).sum();
            assert_eq!(n, pg.live, "page {p} live count");
            assert_eq!(self.partial.contains(&(p as u32)), pg.live < self.slots_per_page, "page {p} partial set");
            live += n as u64;
        }
        assert_eq!(live, self.live);
        assert_eq!(allocated, self.allocated_pages);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_free_reuse_and_release() {
        let mut fp = FixedPages::new(100);
        let spp = (FIXED_PAGE_BYTES / 100) as u32;
        let rows: Vec<RowId> = (0..spp * 3).map(|_| fp.alloc()).collect();
        assert_eq!(rows, (0..spp * 3).collect::<Vec<_>>());
        assert_eq!(fp.allocated_pages, 3);
        fp.slot_mut(5).fill(7);
        assert!(fp.slot(5).iter().all(|&b| b == 7));
        fp.free(5);
        fp.free(spp + 1);
        assert_eq!(fp.next_live(5), Some(6));
        assert_eq!(fp.alloc(), 5, "lowest page first");
        assert_eq!(fp.alloc(), spp + 1);
        for r in spp..2 * spp {
            fp.free(r);
        }
        assert_eq!(fp.allocated_pages, 2, "an empty page is released");
        assert_eq!(fp.next_live(spp as u64), Some(2 * spp));
        fp.check_invariants();
        assert_eq!(fp.alloc(), spp, "released page number reused");
        fp.check_invariants();
        assert_eq!(fp.next_live(3 * spp as u64), None);
        // Emptying everything keeps one page.
        for r in 0..3 * spp {
            if fp.is_live(r) {
                fp.free(r);
            }
        }
        assert_eq!(fp.allocated_pages, 1);
        assert_eq!(fp.live_rows(), 0);
        fp.check_invariants();
        let r = fp.alloc();
        assert!(fp.is_live(r));
        assert_eq!(fp.allocated_pages, 1);
        fp.check_invariants();
    }
}
