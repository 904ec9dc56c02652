//! Fixed-size row slots of one partition, in 32 KiB pages.
//!
//! A RowId is `page * slots_per_page + slot`; it stays valid while the row lives.
//! Each page keeps a bitmap of live slots (for scans), a free list threaded
//! through its free slots (the first 4 bytes of a free slot hold the next free
//! slot, `NONE` ends the list) and a bump pointer for never-used slots.
//! Allocation takes the lowest-numbered allocated page that has a free slot, so
//! rows pack towards the front and pages at the back can drain and be released
//! (a page with no live row gives its 32 KiB back; its number is reused first).
//!
//! Every slot ends in the row's GCI (u32 LE, `ROW_GCI_BYTES`): the global
//! checkpoint of the transaction that last wrote the row. `slot` hands out the
//! row bytes only; `gci` / `set_gci` the tail. Each page also keeps the
//! highest GCI ever written on it since it was allocated, so a partial local
//! checkpoint skips a page with nothing newer than its `since` GCI in O(1).
//!
//! Local checkpoint parts: page `p` belongs to part `p % LCP_PARTS`, so a row's
//! part is fixed while it lives. `alloc_in_part` places a row in a page of a
//! given part (restore puts a row back in the part its checkpoint image came
//! from, which keeps later tombstones consistent with the files).

use crate::memory::FIXED_PAGE_BYTES;
use std::collections::BTreeSet;

pub type RowId = u32;

/// Bytes of the row GCI at the end of every slot.
pub const ROW_GCI_BYTES: usize = 4;
/// Parts a partition's rows are divided into for partial local checkpoints.
pub const LCP_PARTS: u32 = 2048;

const NONE: u32 = u32::MAX;

struct FixedPage {
    /// None when the page is released.
    buf: Option<Box<[u8]>>,
    live_bits: Vec<u64>,
    live: u32,
    free_head: u32,
    bump: u32,
    /// Highest row GCI written on the page since it was allocated (an upper
    /// bound of the GCIs of its live rows).
    max_gci: u32,
}

impl FixedPage {
    fn released() -> FixedPage {
        FixedPage { buf: None, live_bits: Vec::new(), live: 0, free_head: NONE, bump: 0, max_gci: 0 }
    }
}

pub struct FixedPages {
    /// Bytes of a row (the caller's slot); the stored slot adds the GCI.
    row_size: usize,
    /// `row_size + ROW_GCI_BYTES`.
    stride: usize,
    slots_per_page: u32,
    pages: Vec<FixedPage>,
    /// Allocated pages with at least one free slot.
    partial: BTreeSet<u32>,
    /// Page numbers whose buffer was released.
    released: BTreeSet<u32>,
    allocated_pages: u64,
    live: u64,
    /// The page `alloc_in_part` used last (restore fills a part's pages in
    /// runs, so the next row usually goes to the same page).
    part_hint: Option<u32>,
}

impl FixedPages {
    /// Pages of rows of `row_size` bytes (each slot also holds the row GCI).
    pub fn new(row_size: usize) -> FixedPages {
        assert!((4..=FIXED_PAGE_BYTES - ROW_GCI_BYTES).contains(&row_size), "row size {row_size}");
        let stride = row_size + ROW_GCI_BYTES;
        FixedPages {
            row_size,
            stride,
            slots_per_page: (FIXED_PAGE_BYTES / stride) as u32,
            pages: Vec::new(),
            partial: BTreeSet::new(),
            released: BTreeSet::new(),
            allocated_pages: 0,
            live: 0,
            part_hint: None,
        }
    }

    pub fn slots_per_page(&self) -> u32 {
        self.slots_per_page
    }

    /// Page numbers in use or released (`0..page_count()`).
    pub fn page_count(&self) -> u32 {
        self.pages.len() as u32
    }

    /// One past the highest row id any page can hold today.
    pub fn row_id_bound(&self) -> u64 {
        self.pages.len() as u64 * self.slots_per_page as u64
    }

    /// The highest GCI written on page `p` since it was allocated; None if
    /// the page is released (holds no row).
    pub fn page_max_gci(&self, p: u32) -> Option<u32> {
        self.pages.get(p as usize).filter(|pg| pg.buf.is_some()).map(|pg| pg.max_gci)
    }

    /// Checkpoint part of a row id (of its page).
    pub fn part_of(&self, row: RowId) -> u16 {
        ((row / self.slots_per_page) % LCP_PARTS) as u16
    }

    /// GCI of a live row.
    pub fn gci(&self, row: RowId) -> u32 {
        assert!(self.is_live(row), "row {row} is not live");
        let (p, s) = self.split(row);
        let buf = self.pages[p].buf.as_ref().expect("allocated");
        let o = s * self.stride + self.row_size;
        u32::from_le_bytes(buf[o..o + ROW_GCI_BYTES].try_into().expect("4 bytes"))
    }

    /// Tag a live row with the GCI of the transaction that wrote it.
    pub fn set_gci(&mut self, row: RowId, gci: u32) {
        assert!(self.is_live(row), "row {row} is not live");
        let (p, s) = self.split(row);
        let o = s * self.stride + self.row_size;
        let pg = &mut self.pages[p];
        pg.max_gci = pg.max_gci.max(gci);
        let buf = pg.buf.as_mut().expect("allocated");
        buf[o..o + ROW_GCI_BYTES].copy_from_slice(&gci.to_le_bytes());
    }

    pub fn live_rows(&self) -> u64 {
        self.live
    }

    /// Pages holding a buffer (not released).
    pub fn allocated_pages(&self) -> u64 {
        self.allocated_pages
    }

    fn page_bytes(&self) -> u64 {
        (FIXED_PAGE_BYTES + self.bitmap_words() * 8) as u64
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

    /// The row bytes of a live slot (without the GCI).
    pub fn slot(&self, row: RowId) -> &[u8] {
        assert!(self.is_live(row), "row {row} is not live");
        let (p, s) = self.split(row);
        let buf = self.pages[p].buf.as_ref().expect("allocated");
        &buf[s * self.stride..s * self.stride + self.row_size]
    }

    pub fn slot_mut(&mut self, row: RowId) -> &mut [u8] {
        assert!(self.is_live(row), "row {row} is not live");
        let (p, s) = self.split(row);
        let (stride, size) = (self.stride, self.row_size);
        let buf = self.pages[p].buf.as_mut().expect("allocated");
        &mut buf[s * stride..s * stride + size]
    }

    /// Take a free slot, tagged `gci` (allocating a page if needed; the
    /// caller checked memory).
    pub fn alloc(&mut self, gci: u32) -> RowId {
        let p = match self.partial.first() {
            Some(&p) => p,
            None => self.new_page(),
        };
        self.take_slot(p, gci)
    }

    /// The allocated page of checkpoint part `part` with a free slot that
    /// `alloc_in_part` would use, or else the page number it would allocate
    /// (false).
    fn page_for_part(&self, part: u16) -> (u32, bool) {
        assert!((part as u32) < LCP_PARTS, "checkpoint part {part} out of range");
        let has_room = |p: u32| {
            let pg = &self.pages[p as usize];
            pg.buf.is_some() && pg.live < self.slots_per_page
        };
        if let Some(h) = self.part_hint {
            if h % LCP_PARTS == part as u32 && (h as usize) < self.pages.len() && has_room(h) {
                return (h, true);
            }
        }
        let mut released = None;
        let mut p = part as u32;
        while (p as usize) < self.pages.len() {
            if has_room(p) {
                return (p, true);
            }
            if released.is_none() && self.pages[p as usize].buf.is_none() {
                released = Some(p);
            }
            p = p.checked_add(LCP_PARTS).expect("page numbers exhausted");
        }
        (released.unwrap_or(p), false)
    }

    /// Memory an `alloc_in_part(part, _)` may add.
    pub fn alloc_in_part_cost(&self, part: u16) -> u64 {
        match self.page_for_part(part) {
            (_, true) => 0,
            (p, false) => {
                let len = (p as usize + 1).max(self.pages.len());
                // Growing the page table one entry at a time at most doubles it.
                let table =
                    if len > self.pages.capacity() { (2 * len).max(4) * std::mem::size_of::<FixedPage>() } else { 0 };
                self.page_bytes() + table as u64
            }
        }
    }

    /// `alloc` in a page of checkpoint part `part` (a page `p` with
    /// `p % LCP_PARTS == part`), allocating such a page if none has room.
    pub fn alloc_in_part(&mut self, part: u16, gci: u32) -> RowId {
        let p = match self.page_for_part(part) {
            (p, true) => p,
            (p, false) => {
                while self.pages.len() <= p as usize {
                    let n = self.pages.len() as u32;
                    self.pages.push(FixedPage::released());
                    self.released.insert(n);
                }
                self.allocate_page_at(p);
                p
            }
        };
        self.part_hint = Some(p);
        let row = self.take_slot(p, gci);
        debug_assert_eq!(self.part_of(row), part);
        row
    }

    fn take_slot(&mut self, p: u32, gci: u32) -> RowId {
        let spp = self.slots_per_page;
        let size = self.stride;
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
        let o = s as usize * size + size - ROW_GCI_BYTES;
        buf[o..o + ROW_GCI_BYTES].copy_from_slice(&gci.to_le_bytes());
        pg.max_gci = pg.max_gci.max(gci);
        if pg.live == spp {
            self.partial.remove(&p);
        }
        self.live += 1;
        let row = p.checked_mul(spp).and_then(|b| b.checked_add(s)).expect("RowId space exhausted");
        assert_ne!(row, NONE);
        row
    }

    fn fresh_page(&self) -> FixedPage {
        FixedPage {
            buf: Some(vec![0u8; self.slots_per_page as usize * self.stride].into_boxed_slice()),
            live_bits: vec![0; self.bitmap_words()],
            live: 0,
            free_head: NONE,
            bump: 0,
            max_gci: 0,
        }
    }

    fn new_page(&mut self) -> u32 {
        let page = self.fresh_page();
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

    /// Allocate the released page number `p`.
    fn allocate_page_at(&mut self, p: u32) {
        assert!(self.released.remove(&p), "page {p} is not released");
        self.pages[p as usize] = self.fresh_page();
        self.allocated_pages += 1;
        self.partial.insert(p);
    }

    pub fn free(&mut self, row: RowId) {
        assert!(self.is_live(row), "free of dead row {row}");
        let (p, s) = self.split(row);
        let size = self.stride;
        let pg = &mut self.pages[p];
        pg.live_bits[s / 64] &= !(1 << (s % 64));
        pg.live -= 1;
        self.live -= 1;
        // An empty page is released, unless it is the partition's last one
        // (so a small table with insert/delete churn does not allocate and
        // zero a page per row).
        if pg.live == 0 && self.allocated_pages > 1 {
            *pg = FixedPage::released();
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

    /// First live row of page `p` in slot `from_slot` or later.
    pub fn next_live_in_page(&self, p: u32, from_slot: u32) -> Option<RowId> {
        let pg = self.pages.get(p as usize)?;
        if pg.buf.is_none() || pg.live == 0 {
            return None;
        }
        let s = from_slot as usize;
        let mut w = s / 64;
        let mut bits = if w < pg.live_bits.len() { pg.live_bits[w] & (!0u64 << (s % 64)) } else { 0 };
        while w < pg.live_bits.len() {
            if bits != 0 {
                let slot = w * 64 + bits.trailing_zeros() as usize;
                return Some(p * self.slots_per_page + slot as u32);
            }
            w += 1;
            bits = pg.live_bits.get(w).copied().unwrap_or(0);
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
            for s in 0..self.slots_per_page {
                let row = p as u32 * self.slots_per_page + s;
                if self.is_live(row) {
                    assert!(self.gci(row) <= pg.max_gci, "row {row} has a GCI above its page's");
                }
            }
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
        let spp = (FIXED_PAGE_BYTES / (100 + ROW_GCI_BYTES)) as u32;
        let rows: Vec<RowId> = (0..spp * 3).map(|_| fp.alloc(1)).collect();
        assert_eq!(rows, (0..spp * 3).collect::<Vec<_>>());
        assert_eq!(fp.allocated_pages, 3);
        fp.slot_mut(5).fill(7);
        assert!(fp.slot(5).iter().all(|&b| b == 7));
        fp.free(5);
        fp.free(spp + 1);
        assert_eq!(fp.next_live(5), Some(6));
        assert_eq!(fp.alloc(1), 5, "lowest page first");
        assert_eq!(fp.alloc(1), spp + 1);
        for r in spp..2 * spp {
            fp.free(r);
        }
        assert_eq!(fp.allocated_pages, 2, "an empty page is released");
        assert_eq!(fp.next_live(spp as u64), Some(2 * spp));
        fp.check_invariants();
        assert_eq!(fp.alloc(1), spp, "released page number reused");
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
        let r = fp.alloc(1);
        assert!(fp.is_live(r));
        assert_eq!(fp.allocated_pages, 1);
        fp.check_invariants();
    }
}
