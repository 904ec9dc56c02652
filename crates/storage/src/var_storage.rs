//! Variable-size storage of one partition: the var chunks of its rows.
//!
//! Small chunks (payload <= `LARGE_THRESHOLD`) live in 32 KiB var pages,
//! bump-allocated. Each chunk carries a 6-byte header: the owning RowId (u32 LE,
//! `DEAD` once freed) and the payload length (u16 LE). Freeing a chunk only marks
//! it dead; a page whose free plus dead space reaches a quarter of the page is
//! "reclaimable" and is compacted (live chunks slid to the front, the owners'
//! var refs patched through the `relocate` callback) when the current page is
//! full. A page with no live chunk is released. This is why the header keeps the
//! owner: compaction needs no page directory and a row needs only a 6-byte ref.
//!
//! Chunks above `LARGE_THRESHOLD` (big TEXT/BLOB values, up to 4 MiB per value)
//! get an allocation of their own, charged at its length plus `LARGE_OVERHEAD`.
//!
//! Chosen over a per-partition arena with offsets because pages bound the
//! fragmentation per page, let memory go back when pages empty, and match the
//! page-granular accounting of `data_memory`.

use crate::fixed_pages::RowId;
use crate::memory::{LARGE_OVERHEAD, VAR_PAGE_BYTES};
use std::collections::BTreeSet;

/// Payloads above this many bytes get their own allocation.
pub const LARGE_THRESHOLD: usize = 4096;
const HEADER: usize = 6;
const DEAD: u32 = u32::MAX;
const LARGE_OFFSET: u16 = u16::MAX;
/// A non-current page with at least this much free + dead space is reclaimable.
const RECLAIM_BYTES: usize = VAR_PAGE_BYTES / 4;

// Compile-time checks of the constants the format relies on.
const _: () = assert!(VAR_PAGE_BYTES <= u16::MAX as usize);
const _: () = assert!(RECLAIM_BYTES >= LARGE_THRESHOLD + HEADER);

/// Reference from a fixed slot to a var chunk: 6 bytes (page u32, offset u16).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VarRef {
    pub page: u32,
    pub offset: u16,
}

impl VarRef {
    /// The row has no chunk (all var columns NULL).
    pub const NONE: VarRef = VarRef { page: u32::MAX, offset: 0 };

    pub fn is_none(self) -> bool {
        self.page == u32::MAX
    }
    pub fn encode(self, dst: &mut [u8]) {
        dst[0..4].copy_from_slice(&self.page.to_le_bytes());
        dst[4..6].copy_from_slice(&self.offset.to_le_bytes());
    }
    pub fn decode(src: &[u8]) -> VarRef {
        VarRef {
            page: u32::from_le_bytes(src[0..4].try_into().expect("4 bytes")),
            offset: u16::from_le_bytes([src[4], src[5]]),
        }
    }
}

struct VarPage {
    buf: Box<[u8]>,
    used: usize,
    dead: usize,
    live_chunks: u32,
}

impl VarPage {
    fn free_space(&self) -> usize {
        VAR_PAGE_BYTES - self.used
    }
}

#[derive(Default)]
pub struct VarStore {
    pages: Vec<Option<VarPage>>,
    released: Vec<u32>,
    current: Option<u32>,
    reclaimable: BTreeSet<u32>,
    allocated_pages: u64,
    large: Vec<Option<Box<[u8]>>>,
    free_large: Vec<u32>,
    large_bytes: u64,
    chunks: u64,
}

impl VarStore {
    /// Bytes charged against data memory.
    pub fn footprint(&self) -> u64 {
        self.allocated_pages * VAR_PAGE_BYTES as u64
            + self.large_bytes
            + (self.pages.capacity() * 8 + self.large.capacity() * 16) as u64
    }

    pub fn chunks(&self) -> u64 {
        self.chunks
    }

    /// Upper bound of the memory an `alloc` of `len` payload bytes adds.
    pub fn alloc_cost(&self, len: usize) -> u64 {
        if len == 0 {
            0
        } else if len > LARGE_THRESHOLD {
            // The slab of large allocations may double.
            (len + LARGE_OVERHEAD) as u64 + (self.large.capacity().max(4) * 16) as u64
        } else if self.current_fits(len + HEADER) || !self.reclaimable.is_empty() {
            0
        } else {
            // The page table may double.
            VAR_PAGE_BYTES as u64 + (self.pages.capacity().max(4) * 8) as u64
        }
    }

    fn current_fits(&self, need: usize) -> bool {
        match self.current {
            Some(p) => self.page(p).free_space() >= need,
            None => false,
        }
    }

    fn page(&self, p: u32) -> &VarPage {
        self.pages[p as usize].as_ref().expect("var page allocated")
    }

    fn page_mut(&mut self, p: u32) -> &mut VarPage {
        self.pages[p as usize].as_mut().expect("var page allocated")
    }

    /// Payload of a chunk.
    pub fn get(&self, r: VarRef) -> &[u8] {
        if r.is_none() {
            return &[];
        }
        if r.offset == LARGE_OFFSET {
            return self.large[r.page as usize].as_deref().expect("large chunk live");
        }
        let pg = self.page(r.page);
        let o = r.offset as usize;
        let len = u16::from_le_bytes([pg.buf[o + 4], pg.buf[o + 5]]) as usize;
        debug_assert_ne!(u32::from_le_bytes(pg.buf[o..o + 4].try_into().expect("4")), DEAD);
        &pg.buf[o + HEADER..o + HEADER + len]
    }

    /// Store `payload` for row `owner`. `relocate(row, new_ref)` is called for
    /// every other live chunk a compaction moves. The caller checked memory
    /// with `alloc_cost`.
    pub fn alloc(&mut self, owner: RowId, payload: &[u8], relocate: &mut dyn FnMut(RowId, VarRef)) -> VarRef {
        assert_ne!(owner, DEAD);
        if payload.is_empty() {
            return VarRef::NONE;
        }
        self.chunks += 1;
        if payload.len() > LARGE_THRESHOLD {
            let b: Box<[u8]> = payload.into();
            self.large_bytes += (payload.len() + LARGE_OVERHEAD) as u64;
            let idx = match self.free_large.pop() {
                Some(i) => {
                    self.large[i as usize] = Some(b);
                    i
                }
                None => {
                    self.large.push(Some(b));
                    (self.large.len() - 1) as u32
                }
            };
            return VarRef { page: idx, offset: LARGE_OFFSET };
        }
        let need = payload.len() + HEADER;
        if !self.current_fits(need) {
            self.switch_page(need, relocate);
        }
        let p = self.current.expect("current var page");
        let pg = self.page_mut(p);
        let o = pg.used;
        pg.buf[o..o + 4].copy_from_slice(&owner.to_le_bytes());
        pg.buf[o + 4..o + 6].copy_from_slice(&(payload.len() as u16).to_le_bytes());
        pg.buf[o + HEADER..o + need].copy_from_slice(payload);
        pg.used += need;
        pg.live_chunks += 1;
        VarRef { page: p, offset: o as u16 }
    }

    fn switch_page(&mut self, need: usize, relocate: &mut dyn FnMut(RowId, VarRef)) {
        if let Some(old) = self.current.take() {
            self.note_maybe_reclaimable(old);
        }
        while let Some(p) = self.reclaimable.pop_first() {
            self.compact(p, relocate);
            if self.page(p).free_space() >= need {
                self.current = Some(p);
                return;
            }
        }
        let pg = VarPage { buf: vec![0u8; VAR_PAGE_BYTES].into_boxed_slice(), used: 0, dead: 0, live_chunks: 0 };
        self.allocated_pages += 1;
        let p = match self.released.pop() {
            Some(p) => {
                self.pages[p as usize] = Some(pg);
                p
            }
            None => {
                self.pages.push(Some(pg));
                (self.pages.len() - 1) as u32
            }
        };
        self.current = Some(p);
    }

    fn note_maybe_reclaimable(&mut self, p: u32) {
        if self.current == Some(p) {
            return;
        }
        let pg = self.page(p);
        if pg.dead + pg.free_space() >= RECLAIM_BYTES {
            self.reclaimable.insert(p);
        }
    }

    fn compact(&mut self, p: u32, relocate: &mut dyn FnMut(RowId, VarRef)) {
        let pg = self.pages[p as usize].as_mut().expect("var page allocated");
        let (mut read, mut write) = (0usize, 0usize);
        while read < pg.used {
            let owner = u32::from_le_bytes(pg.buf[read..read + 4].try_into().expect("4"));
            let len = u16::from_le_bytes([pg.buf[read + 4], pg.buf[read + 5]]) as usize + HEADER;
            if owner != DEAD {
                if write != read {
                    pg.buf.copy_within(read..read + len, write);
                    relocate(owner, VarRef { page: p, offset: write as u16 });
                }
                write += len;
            }
            read += len;
        }
        assert_eq!(read, pg.used, "var page {p} chunk chain corrupt");
        pg.used = write;
        pg.dead = 0;
    }

    /// Free a chunk (no-op for `VarRef::NONE`).
    pub fn free(&mut self, r: VarRef) {
        if r.is_none() {
            return;
        }
        self.chunks -= 1;
        if r.offset == LARGE_OFFSET {
            let b = self.large[r.page as usize].take().expect("large chunk live");
            self.large_bytes -= (b.len() + LARGE_OVERHEAD) as u64;
            self.free_large.push(r.page);
            return;
        }
        let p = r.page;
        let is_current = self.current == Some(p);
        let pg = self.page_mut(p);
        let o = r.offset as usize;
        let owner = u32::from_le_bytes(pg.buf[o..o + 4].try_into().expect("4"));
        assert_ne!(owner, DEAD, "double free of var chunk {r:?}");
        let len = u16::from_le_bytes([pg.buf[o + 4], pg.buf[o + 5]]) as usize;
        pg.buf[o..o + 4].copy_from_slice(&DEAD.to_le_bytes());
        pg.dead += len + HEADER;
        pg.live_chunks -= 1;
        if pg.live_chunks == 0 {
            if is_current {
                pg.used = 0;
                pg.dead = 0;
            } else {
                self.pages[p as usize] = None;
                self.released.push(p);
                self.reclaimable.remove(&p);
                self.allocated_pages -= 1;
            }
        } else {
            self.note_maybe_reclaimable(p);
        }
    }

    /// Overwrite a chunk's payload in place (same length only).
    pub fn overwrite(&mut self, r: VarRef, payload: &[u8]) {
        if r.offset == LARGE_OFFSET {
            let b = self.large[r.page as usize].as_mut().expect("large chunk live");
            assert_eq!(b.len(), payload.len());
            b.copy_from_slice(payload);
            return;
        }
        let pg = self.page_mut(r.page);
        let o = r.offset as usize;
        let len = u16::from_le_bytes([pg.buf[o + 4], pg.buf[o + 5]]) as usize;
        assert_eq!(len, payload.len());
        pg.buf[o + HEADER..o + HEADER + len].copy_from_slice(payload);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn alloc_free_compact_keeps_payloads() {
        let mut vs = VarStore::default();
        let mut refs: HashMap<RowId, VarRef> = HashMap::new();
        let mut seed = 7u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let payload = |id: RowId, len: usize| -> Vec<u8> { (0..len).map(|i| (id as usize + i) as u8).collect() };
        let mut lens: HashMap<RowId, usize> = HashMap::new();
        for step in 0..20_000u32 {
            let r = next();
            let id = (r % 500) as RowId;
            if let Some(old) = refs.remove(&id) {
                assert_eq!(vs.get(old), &payload(id, lens[&id])[..]);
                vs.free(old);
            }
            if r % 3 != 0 {
                let len = if step % 97 == 0 { 5000 } else { (next() % 300) as usize };
                let p = payload(id, len);
                let mut moved = Vec::new();
                let nr = vs.alloc(id, &p, &mut |o, nr| moved.push((o, nr)));
                for (o, m) in moved {
                    refs.insert(o, m);
                }
                refs.insert(id, nr);
                lens.insert(id, len);
            }
        }
        for (id, r) in &refs {
            assert_eq!(vs.get(*r), &payload(*id, lens[id])[..]);
        }
        // Bounded: 500 rows of at most ~5 KiB never need more than a few pages.
        assert!(vs.allocated_pages <= 16, "pages {}", vs.allocated_pages);
        for (_, r) in refs.drain() {
            vs.free(r);
        }
        assert_eq!(vs.chunks(), 0);
        assert!(vs.allocated_pages <= 1);
        assert_eq!(vs.large_bytes, 0);
    }
}
