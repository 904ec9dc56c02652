//! Reading a REDO log part after a restart.
//!
//! 1. `first_page_reads` -> read page 0 of every file; `choose_head_file`
//!    picks the file most recently entered (highest valid sequence number).
//! 2. Read that whole file; `scan_head_file` finds its last valid page in
//!    sequence and the tail that page recorded.
//! 3. `RedoReader` reads from that tail, in order (`next_read` / `feed`), and
//!    returns the records with GCI in `[from, to]`. It stops at the first
//!    marker page of a GCI >= `to`: every record needed is before it. If the
//!    log ends first (a blank, torn or corrupt page, or an older lap's page)
//!    the error names the file and offset: records the cluster called
//!    durable are missing there, and the node must not start with them lost.
//! 4. `finish` gives the `RedoResume` to continue writing the part.

use super::{
    file_path, meta, record, LoggedRecord, PageRead, RedoGeometry, RedoResume, MAX_IO_PAGES, MAX_UNSYNCED_PAGES,
    REDO_VERSION,
};
use crate::error::FormatError;
use crate::frame::{open_page, Kind, PageError, PageHeader};
use crate::stream::StreamReader;
use norr_signals::ckpt::Gci;

/// Page 0 of every file of the part.
pub fn first_page_reads(geo: &RedoGeometry) -> Vec<PageRead> {
    (0..geo.files).map(|f| PageRead { file_no: f, offset: 0, len: geo.page_bytes }).collect()
}

fn check_page(
    geo: &RedoGeometry,
    part: u32,
    bytes: &[u8],
    path: &str,
    offset: u64,
) -> Result<(PageHeader, Vec<u8>), PageError> {
    let (h, data) = open_page(bytes, Kind::RedoPage, REDO_VERSION, path, offset)?;
    let bad = |what: String| PageError::Bad(FormatError::new(path, offset, what));
    if h.meta[meta::PART] != part as u64 {
        return Err(bad(format!("page of log part {} found in part {part}", h.meta[meta::PART])));
    }
    if h.meta[meta::GEOMETRY] != geo.meta_word() {
        return Err(bad(format!(
            "page written with a different log geometry ({} files of {} pages; now {} of {}): redo_files / redo_file_bytes changed since the log was written",
            h.meta[meta::GEOMETRY] >> 32,
            h.meta[meta::GEOMETRY] & 0xffff_ffff,
            geo.files,
            geo.pages_per_file()
        )));
    }
    if geo.position(h.seq) != (path_file_no(path), offset) {
        return Err(bad(format!("page with sequence number {} is not at its place in the ring", h.seq)));
    }
    Ok((h, data.to_vec()))
}

fn path_file_no(path: &str) -> u32 {
    path.rsplit('-').next().and_then(|s| s.parse().ok()).unwrap_or(u32::MAX)
}

/// The file holding the log's head: the one whose first page is valid with
/// the highest sequence number. None: no file was ever written (a new log).
/// A damaged first page counts as not written (a crash while entering that
/// file); geometry mismatches are errors.
pub fn choose_head_file(
    geo: &RedoGeometry,
    part: u32,
    first_pages: &[(u32, Vec<u8>)],
) -> Result<Option<u32>, FormatError> {
    let mut best: Option<(u64, u32)> = None;
    for (file_no, bytes) in first_pages {
        let path = file_path(part, *file_no);
        match check_page(geo, part, bytes, &path, 0) {
            Ok((h, _)) => {
                if best.is_none_or(|(s, _)| h.seq > s) {
                    best = Some((h.seq, *file_no));
                }
            }
            Err(PageError::Blank) => {}
            Err(PageError::Bad(e)) if e.what.contains("geometry") || e.what.contains("log part") => return Err(e),
            Err(PageError::Bad(_)) => {}
        }
    }
    Ok(best.map(|(_, f)| f))
}

/// The newest valid page of the log and the tail it recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadScan {
    pub last_seq: u64,
    pub tail_seq: u64,
}

/// Walk the head file from its first page while pages are valid and in
/// sequence. `bytes`: the whole file (or at least its valid prefix).
pub fn scan_head_file(geo: &RedoGeometry, part: u32, file_no: u32, bytes: &[u8]) -> Result<HeadScan, FormatError> {
    let path = file_path(part, file_no);
    let pb = geo.page_bytes as usize;
    let mut last: Option<PageHeader> = None;
    for (i, page) in bytes.chunks_exact(pb).enumerate() {
        match check_page(geo, part, page, &path, (i * pb) as u64) {
            Ok((h, _)) if last.is_none_or(|l| h.seq == l.seq + 1) => last = Some(h),
            _ => break,
        }
    }
    match last {
        Some(h) => Ok(HeadScan { last_seq: h.seq, tail_seq: h.meta[meta::TAIL] }),
        None => Err(FormatError::new(&path, 0, "the head file's first page is not a valid REDO page")),
    }
}

/// Pages before the head page that may have been written out of order
/// with it: a page is torn only if it was never synced, and at most
/// `MAX_UNSYNCED_PAGES` pages (written `MAX_IO_PAGES` per IO) lie past the
/// last sync. Twice that, for margin.
const HEAD_WINDOW_PAGES: u64 = 2 * (MAX_UNSYNCED_PAGES + MAX_IO_PAGES);

/// `scan_head_file` without reading the whole file: `read(offset, len)`
/// reads bytes of the head file (zeros past its end). A file of 64 MB is
/// read as ~log2(pages) single pages and one window of
/// `HEAD_WINDOW_PAGES`, not whole (a restart read every part's head file
/// twice, 0.3-0.9 s per 64 MB file from a cold cache).
///
/// Bisection finds a page `c` that is in sequence (valid, with the
/// sequence number of its place counted from the first page) followed by
/// one that is not. The pages from the first to the end of the unbroken
/// run `L` are all in sequence, so `c >= L`. A page after `L` can be in
/// sequence only if it was written in the same unsynced stretch as the torn
/// page `L + 1`, so `c - L <= HEAD_WINDOW_PAGES`: the window before `c`,
/// walked page by page as `scan_head_file` does, ends at `L` exactly.
pub fn scan_head_file_at<E>(
    geo: &RedoGeometry,
    part: u32,
    file_no: u32,
    read: &mut dyn FnMut(u64, u32) -> Result<Vec<u8>, E>,
) -> Result<Result<HeadScan, FormatError>, E> {
    let path = file_path(part, file_no);
    let pb = geo.page_bytes as u64;
    let pages = geo.pages_per_file();
    let first = read(0, geo.page_bytes)?;
    let base = match check_page(geo, part, &first, &path, 0) {
        Ok((h, _)) => h.seq,
        Err(_) => return Ok(Err(FormatError::new(&path, 0, "the head file's first page is not a valid REDO page"))),
    };
    let mut in_sequence = |i: u64| -> Result<bool, E> {
        let bytes = read(i * pb, geo.page_bytes)?;
        Ok(matches!(check_page(geo, part, &bytes, &path, i * pb), Ok((h, _)) if h.seq == base + i))
    };
    // Invariant: page `lo` is in sequence; page `hi` is not (or is past the end).
    let (mut lo, mut hi) = (0u64, pages);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if in_sequence(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let start = lo.saturating_sub(HEAD_WINDOW_PAGES);
    let window = read(start * pb, ((lo - start + 1) * pb) as u32)?;
    let mut last: Option<PageHeader> = None;
    for (i, page) in window.chunks_exact(pb as usize).enumerate() {
        let at = start + i as u64;
        match check_page(geo, part, page, &path, at * pb) {
            Ok((h, _)) if h.seq == base + at && last.is_none_or(|l| h.seq == l.seq + 1) => last = Some(h),
            _ => break,
        }
    }
    debug_assert!(last.is_some(), "page {start} precedes the bisection's page {lo} in the unbroken run");
    Ok(match last {
        Some(h) => Ok(HeadScan { last_seq: h.seq, tail_seq: h.meta[meta::TAIL] }),
        None => Err(FormatError::new(&path, start * pb, "the REDO head file breaks before its last page in sequence")),
    })
}

/// What a completed read gives: where to resume, and what was seen.
#[derive(Debug, Clone, PartialEq)]
pub struct RedoRecovered {
    pub resume: RedoResume,
    /// With a look-ahead (`RedoReader::with_lookahead`): the records after
    /// the marker of `to`, up to the last marker found after it, in log
    /// order (all of a GCI above `to`); and for each of those markers, in
    /// order, its GCI and where to resume writing had the restart gone to
    /// it. A node whose system file missed the last GCP record can roll
    /// forward to such a GCI if the cluster restarts to it: the GCP saved
    /// it on every node before any node recorded it.
    pub ahead: Vec<LoggedRecord>,
    pub ahead_resumes: Vec<(Gci, RedoResume)>,
    /// Highest GCI of any record read (including those above `to`): GCIs
    /// handed out after the restart must be higher.
    pub max_gci_seen: Gci,
    pub pages_read: u64,
    pub records_returned: u64,
}

/// Reads records of GCIs `[from, to]` from the tail on.
pub struct RedoReader {
    geo: RedoGeometry,
    part: u32,
    from: Gci,
    to: Gci,
    tail_seq: u64,
    next_seq: u64,
    /// Reads stop here at the latest (one lap from the tail).
    end_seq: u64,
    /// The newest valid page the head scan found.
    last_seq: u64,
    stream: StreamReader,
    marker_seq: Option<u64>,
    max_gci_seen: Gci,
    page_gcis: Vec<(u64, Gci)>,
    /// Page where the record in progress began.
    rec_start_seq: u64,
    pages_read: u64,
    returned: u64,
    /// Pages the look-ahead past the marker of `to` may read (0: none).
    ahead_pages_left: u64,
    /// The look-ahead reached the log's end (or its page budget).
    ahead_ended: bool,
    ahead: Vec<LoggedRecord>,
    /// (GCI, seq) of every marker page the look-ahead found.
    ahead_markers: Vec<(Gci, u64)>,
    /// Highest page seq read.
    max_read_seq: Option<u64>,
}

impl RedoReader {
    /// `head`: from `scan_head_file`, or None for a log never written.
    pub fn new(geo: RedoGeometry, part: u32, head: Option<HeadScan>, from: Gci, to: Gci) -> RedoReader {
        // Reads go on past the head scan's end until the marker or a bad
        // page, so a damaged page is reported as what it is.
        let (tail, end, last) = match head {
            Some(h) => (h.tail_seq, h.tail_seq + geo.total_pages(), h.last_seq),
            None => (0, 0, 0),
        };
        RedoReader {
            geo,
            part,
            from,
            to,
            tail_seq: tail,
            next_seq: tail,
            end_seq: end,
            last_seq: last,
            stream: StreamReader::new(),
            // Nothing is needed when no GCI ever completed.
            marker_seq: None,
            max_gci_seen: 0,
            page_gcis: Vec::new(),
            rec_start_seq: tail,
            pages_read: 0,
            returned: 0,
            ahead_pages_left: 0,
            ahead_ended: false,
            ahead: Vec::new(),
            ahead_markers: Vec::new(),
            max_read_seq: None,
        }
    }

    /// Go on reading past the marker of `to`, at most `max_pages` pages,
    /// to the end of the valid log: its records and markers are returned
    /// apart (`RedoRecovered::ahead`). A bad or missing page there ends the
    /// look-ahead; it is not an error (nothing after `to` is needed).
    pub fn with_lookahead(mut self, max_pages: u64) -> RedoReader {
        self.ahead_pages_left = max_pages;
        self
    }

    /// True once every record needed has been read (and the look-ahead,
    /// if asked, ended).
    pub fn done(&self) -> bool {
        self.to == 0 || (self.marker_seq.is_some() && (self.ahead_ended || self.ahead_pages_left == 0))
    }

    fn in_lookahead(&self) -> bool {
        self.marker_seq.is_some()
    }

    /// The next pages to read (one file, in order); None when done or when
    /// the log ends (then `finish` says whether that is an error).
    pub fn next_read(&self) -> Option<PageRead> {
        if self.done() || self.next_seq >= self.end_seq {
            return None;
        }
        let (file_no, offset) = self.geo.position(self.next_seq);
        let in_file = self.geo.pages_per_file() - offset / self.geo.page_bytes as u64;
        let n = (self.end_seq - self.next_seq).min(in_file).min(MAX_IO_PAGES);
        Some(PageRead { file_no, offset, len: (n * self.geo.page_bytes as u64) as u32 })
    }

    /// Bytes of the read `next_read` gave. Records of GCI in `[from, to]`
    /// are appended to `out` in log order.
    pub fn feed(&mut self, read: PageRead, bytes: &[u8], out: &mut Vec<LoggedRecord>) -> Result<(), FormatError> {
        let path = file_path(self.part, read.file_no);
        if Some(read) != self.next_read() {
            return Err(FormatError::new(&path, read.offset, "REDO read out of order"));
        }
        let pb = self.geo.page_bytes as usize;
        if bytes.len() != read.len as usize {
            return Err(FormatError::new(
                &path,
                read.offset + bytes.len() as u64,
                format!("file cut short: {} of {} bytes read", bytes.len(), read.len),
            ));
        }
        for (i, page) in bytes.chunks_exact(pb).enumerate() {
            let offset = read.offset + (i * pb) as u64;
            if self.in_lookahead() {
                if !self.feed_ahead(page, &path, offset) {
                    self.ahead_ended = true;
                    break;
                }
                continue;
            }
            let (h, data) = match check_page(&self.geo, self.part, page, &path, offset) {
                Ok((h, d)) if h.seq == self.next_seq => (h, d),
                Ok((h, _)) => {
                    return Err(self.missing(
                        &path,
                        offset,
                        &format!("an older page (sequence {}) where {} belongs", h.seq, self.next_seq),
                    ))
                }
                Err(PageError::Blank) => return Err(self.missing(&path, offset, "a blank page")),
                Err(PageError::Bad(e)) => return Err(self.missing(&path, offset, &e.what)),
            };
            let (from, to) = (self.from, self.to);
            let n = self.decode_page(&h, &data, |g| g >= from && g <= to, out).map_err(|(at, e)| {
                FormatError::new(&path, offset + (crate::frame::PAGE_HEADER_BYTES + at) as u64, e)
            })?;
            self.returned += n;
            let marker = h.meta[meta::MARKER];
            if marker != 0 && marker >= self.to {
                self.marker_seq = Some(h.seq);
                // Records after the marker in the stream belong to the
                // look-ahead; none can be of a GCI <= `to` (redo module
                // doc, invariant 5).
                break;
            }
        }
        Ok(())
    }

    /// One page past the marker of `to`: false if the log ends here.
    fn feed_ahead(&mut self, page: &[u8], path: &str, offset: u64) -> bool {
        if self.ahead_pages_left == 0 {
            return false;
        }
        let (h, data) = match check_page(&self.geo, self.part, page, path, offset) {
            Ok((h, d)) if h.seq == self.next_seq => (h, d),
            _ => return false,
        };
        self.ahead_pages_left -= 1;
        let to = self.to;
        let mut found = Vec::new();
        if self.decode_page(&h, &data, |g| g > to, &mut found).is_err() {
            return false;
        }
        self.ahead.extend(found);
        let marker = h.meta[meta::MARKER];
        if marker > self.to && self.ahead_markers.last().is_none_or(|(g, _)| marker > *g) {
            self.ahead_markers.push((marker, h.seq));
        }
        true
    }

    /// Decodes the records of one checked page (`h`, `data`: the page after
    /// `next_seq`) into `out` where `keep` takes their GCI, and accounts the
    /// page: its highest GCI (a record's GCI counts for every page it
    /// touches, so that tail release never frees the page a needed record
    /// starts in), the highest GCI seen, and the read position. Returns the
    /// records kept; on a bad record (its offset in `data`, and what is
    /// wrong) the page is not accounted.
    fn decode_page(
        &mut self,
        h: &PageHeader,
        data: &[u8],
        keep: impl Fn(Gci) -> bool,
        out: &mut Vec<LoggedRecord>,
    ) -> Result<u64, (usize, String)> {
        debug_assert_eq!(h.seq, self.next_seq, "pages are decoded in order");
        let was_mid = self.stream.mid_record();
        let mut first_done: Option<Gci> = None;
        let mut page_max = 0;
        let mut kept = 0u64;
        let mut completed = 0u64;
        self.stream.feed(data, h.first_record, |body| {
            let rec = record::decode(body)?;
            if completed == 0 && was_mid {
                first_done = Some(rec.gci);
            }
            completed += 1;
            page_max = page_max.max(rec.gci);
            if keep(rec.gci) {
                out.push(rec);
                kept += 1;
            }
            Ok(())
        })?;
        if let Some(g) = first_done {
            // The record that ended here began on earlier pages: its GCI
            // counts for them too.
            for e in self.page_gcis.iter_mut().filter(|e| e.0 >= self.rec_start_seq) {
                e.1 = e.1.max(g);
            }
        }
        // A record left open here starts on this page, unless the page is
        // wholly inside a record that began earlier (its GCI is patched in
        // when it ends, above).
        if self.stream.mid_record() && (!was_mid || completed > 0) {
            self.rec_start_seq = h.seq;
        }
        self.max_gci_seen = self.max_gci_seen.max(page_max);
        self.pages_read += 1;
        self.page_gcis.push((h.seq, page_max));
        debug_assert!(self.max_read_seq.is_none_or(|s| s < h.seq));
        self.max_read_seq = Some(h.seq);
        self.next_seq += 1;
        Ok(kept)
    }

    fn missing(&self, path: &str, offset: u64, found: &str) -> FormatError {
        FormatError::new(
            path,
            offset,
            format!(
                "REDO log part {} ends before GCI {} is complete: found {found}; records of transactions the cluster reported durable are missing (corrupt or lost log page)",
                self.part, self.to
            ),
        )
    }

    /// After the reads: where to resume writing. An error if the records
    /// up to `to` were not all found.
    pub fn finish(self) -> Result<RedoRecovered, FormatError> {
        let marker_seq = match (self.marker_seq, self.to) {
            (Some(s), _) => s,
            (None, 0) => {
                // Nothing was ever durable: start the part afresh after the
                // newest page seen (none: a new log).
                if self.end_seq == 0 {
                    return Ok(RedoRecovered {
                        resume: RedoResume {
                            next_seq: 0,
                            tail_seq: 0,
                            durable_gci: 0,
                            marker_seq: 0,
                            page_gcis: vec![],
                            invalidate_through: MAX_UNSYNCED_PAGES + MAX_IO_PAGES,
                        },
                        max_gci_seen: 0,
                        pages_read: 0,
                        records_returned: 0,
                        ahead: Vec::new(),
                        ahead_resumes: Vec::new(),
                    });
                }
                self.last_seq
            }
            (None, _) => {
                let (file_no, offset) = self.geo.position(self.next_seq);
                return Err(self.missing(&file_path(self.part, file_no), offset, "the end of the log"));
            }
        };
        let next_seq = marker_seq + 1;
        let tail_seq = if self.to == 0 { next_seq } else { self.tail_seq };
        // Pages past any restart point may hold this life's records: blank
        // them (up to what was read, and what may be written unsynced).
        let newest = self.last_seq.max(marker_seq).max(self.max_read_seq.unwrap_or(0));
        let invalidate_through = newest + MAX_UNSYNCED_PAGES + MAX_IO_PAGES;
        let resume_at = |gci: Gci, marker_seq: u64, page_gcis: &[(u64, Gci)]| RedoResume {
            next_seq: marker_seq + 1,
            tail_seq,
            durable_gci: gci,
            marker_seq,
            page_gcis: page_gcis.iter().copied().filter(|(s, _)| *s <= marker_seq).collect(),
            invalidate_through,
        };
        let page_gcis = if self.to == 0 { vec![] } else { self.page_gcis };
        let resume = resume_at(self.to, marker_seq, &page_gcis);
        debug_assert_eq!(resume.next_seq, next_seq);
        let ahead_resumes: Vec<(Gci, RedoResume)> =
            self.ahead_markers.iter().map(|&(g, seq)| (g, resume_at(g, seq, &page_gcis))).collect();
        // Records after the last marker found belong to no GCI the log
        // holds whole.
        let last = ahead_resumes.last().map_or(self.to, |(g, _)| *g);
        let mut ahead = self.ahead;
        ahead.retain(|r| r.gci <= last);
        debug_assert!(ahead.iter().all(|r| r.gci > self.to));
        Ok(RedoRecovered {
            resume,
            max_gci_seen: self.max_gci_seen,
            pages_read: self.pages_read,
            records_returned: self.returned,
            ahead,
            ahead_resumes,
        })
    }
}
