//! The REDO log: one log part per LDM, `files` fixed-size files used as one
//! ring of pages. See FORMATS.md ("REDO log") for the bytes.
//!
//! * [`RedoPart`]: the writer state machine (append with group commit,
//!   page writes and syncs through the caller, GCP flushes, tail release).
//! * [`reader`]: after a restart, find the log's tail and read the records
//!   of a GCI range, refusing corrupt pages that hold needed records.
//!
//! Invariants the writer keeps, and the reader relies on:
//! 1. Every page is written once per lap, only when closed (never rewritten
//!    in place): a torn write can only damage pages that were never synced.
//! 2. One IO at a time, in page order; a write that fills the last page of
//!    a file is followed by a sync of that file before the next file is
//!    written; at most `MAX_UNSYNCED_PAGES` pages are written past the last
//!    sync.
//! 3. A GCP flush of `g` closes the open page as a *marker page* saying "every
//!    record with GCI <= g is in this page or before it", even if no record
//!    was appended (so a reader tells a complete log from a damaged one).
//! 4. A page may overwrite the page one lap older only once a synced page
//!    records a tail beyond it (`durable_tail`), so the tail found in the
//!    newest valid page is always a safe place to start reading.
//! 5. Records of GCI `g + 1` never precede the marker page of `g`: a
//!    transaction tagged `g + 1` may commit before the GCP save of `g`
//!    (the GCP's commit step comes before its save step), and its records
//!    wait in memory until that marker is sealed. So the log before the
//!    marker of `g` holds no record above `g`, and a restart to `g`, which
//!    resumes writing right after that marker, leaves no record of a GCI
//!    that never completed anywhere a later restart would read it (it
//!    would come back to life there: half a lost transaction, on one
//!    replica).

mod part;
pub mod reader;
mod record;
#[cfg(test)]
mod tests;

pub use part::{AppendError, RedoError, RedoIo, RedoPart, RedoResume, RedoStats};
pub use reader::{
    choose_head_file, first_page_reads, scan_head_file, scan_head_file_at, HeadScan, RedoReader, RedoRecovered,
};
pub use record::{LoggedRecord, RedoOp, RedoRecord, ALL_PARTITIONS};

/// REDO page size unless a test says otherwise.
pub const DEFAULT_PAGE_BYTES: u32 = 32 * 1024;
/// Format version of REDO pages and records.
pub const REDO_VERSION: u16 = 1;
/// Pages kept free for GCP marker pages: appends stop this short of full.
pub const RESERVE_PAGES: u64 = 4;
/// Most pages written past the last sync (bounds what a restart must
/// invalidate beyond the log's end).
pub const MAX_UNSYNCED_PAGES: u64 = 64;
/// Most pages in one write or read.
pub const MAX_IO_PAGES: u64 = 64;

/// Shape of one log part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RedoGeometry {
    pub files: u32,
    pub file_bytes: u64,
    pub page_bytes: u32,
}

impl RedoGeometry {
    pub fn new(files: u32, file_bytes: u64) -> RedoGeometry {
        RedoGeometry { files, file_bytes, page_bytes: DEFAULT_PAGE_BYTES }
    }

    pub fn validate(&self) -> Result<(), String> {
        if !self.page_bytes.is_power_of_two() || !(512..=1 << 20).contains(&self.page_bytes) {
            return Err(format!("REDO page size {} is not a power of two in 512..=1MiB", self.page_bytes));
        }
        if self.files == 0 || !self.file_bytes.is_multiple_of(self.page_bytes as u64) {
            return Err(format!(
                "REDO file size {} is not a multiple of the page size {}",
                self.file_bytes, self.page_bytes
            ));
        }
        let min_pages = 2 * (RESERVE_PAGES + MAX_UNSYNCED_PAGES);
        if self.total_pages() < min_pages || self.pages_per_file() < 2 {
            return Err(format!(
                "REDO log part of {} x {} bytes is too small: at least {} pages of {} bytes are needed",
                self.files, self.file_bytes, min_pages, self.page_bytes
            ));
        }
        Ok(())
    }

    pub fn pages_per_file(&self) -> u64 {
        self.file_bytes / self.page_bytes as u64
    }

    pub fn total_pages(&self) -> u64 {
        self.pages_per_file() * self.files as u64
    }

    /// Data bytes per page.
    pub fn room(&self) -> usize {
        self.page_bytes as usize - crate::frame::PAGE_HEADER_BYTES
    }

    /// (file number, byte offset) of the page with sequence number `seq`.
    pub fn position(&self, seq: u64) -> (u32, u64) {
        let slot = seq % self.total_pages();
        ((slot / self.pages_per_file()) as u32, (slot % self.pages_per_file()) * self.page_bytes as u64)
    }

    /// The geometry word stored in every page (meta[3]).
    pub(crate) fn meta_word(&self) -> u64 {
        (self.files as u64) << 32 | self.pages_per_file()
    }
}

/// Path of a log file, relative to the data directory.
pub fn file_path(part: u32, file_no: u32) -> String {
    format!("redo/part-{part}/file-{file_no}")
}

/// A read or write of pages of one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRead {
    pub file_no: u32,
    pub offset: u64,
    pub len: u32,
}

/// Page meta words of REDO pages.
pub(crate) mod meta {
    pub const TAIL: usize = 0;
    pub const MARKER: usize = 1;
    pub const PART: usize = 2;
    pub const GEOMETRY: usize = 3;
}
