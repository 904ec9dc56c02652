//! The writer of one REDO log part (see the module doc of `redo` for the
//! invariants). The caller (LQH in a data node) owns the IO: it asks
//! `poll_io` what to do, sends it to the FS block, and reports completions
//! with `on_io_done`.

use super::{meta, record, RedoGeometry, RedoRecord, MAX_IO_PAGES, MAX_UNSYNCED_PAGES, REDO_VERSION, RESERVE_PAGES};
use crate::crash::{points, CrashPoints};
use crate::crash_point;
use crate::frame::{seal_page, Kind, PageHeader};
use crate::stream::StreamWriter;
use norr_signals::ckpt::Gci;
use norr_signals::fs::FsError;
use std::collections::VecDeque;

/// Why an append was refused. Both are temporary for the transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AppendError {
    /// The ring has no free pages: the tail must move (a local checkpoint
    /// completes and `release_before` is called). `ErrorCode::RedoLogFull`.
    #[error("REDO log part is full (waiting for a local checkpoint to free its tail)")]
    LogFull,
    /// More than `buffer_bytes` of pages wait to be written (the disk is
    /// slower than the commit rate). `ErrorCode::RedoBufferOverloaded`.
    #[error("REDO log buffer is full (the disk is behind)")]
    BufferFull,
}

impl AppendError {
    /// The error a transaction gets.
    pub fn error_code(self) -> norr_signals::ErrorCode {
        match self {
            AppendError::LogFull => norr_signals::ErrorCode::RedoLogFull,
            AppendError::BufferFull => norr_signals::ErrorCode::RedoBufferOverloaded,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RedoError {
    /// A write or sync failed: the part cannot promise durability any more
    /// (answer GCP saves with a refusal; the node must restart).
    #[error("REDO log part {part}: {error}")]
    Io { part: u32, error: FsError },
    #[error("REDO log part {part}: {what}")]
    Protocol { part: u32, what: String },
}

/// What the caller must do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedoIo {
    /// Write `data` (whole pages) at `offset` of log file `file_no`
    /// (`redo::file_path`), without sync.
    Write { io_id: u64, file_no: u32, offset: u64, data: Vec<u8> },
    /// Make every write to file `file_no` durable.
    Sync { io_id: u64, file_no: u32 },
    /// An armed crash point fired: crash the node now.
    Crash(&'static str),
}

/// Where to continue after a restart (built by `RedoReader::finish`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedoResume {
    /// First page to write: the one after the restart point's marker page.
    pub next_seq: u64,
    pub tail_seq: u64,
    /// The GCI the node restarted to (durable by construction).
    pub durable_gci: Gci,
    /// Seq of the marker page of `durable_gci` (the tail never passes it).
    pub marker_seq: u64,
    /// (seq, highest GCI of a record touching it) of every page in
    /// `tail_seq..next_seq`, for tail release.
    pub page_gcis: Vec<(u64, Gci)>,
    /// Pages `next_seq..=invalidate_through` may hold pre-crash content
    /// beyond the restart point: they are overwritten with blank pages
    /// (synced) before anything new is written.
    pub invalidate_through: u64,
}

/// Counters for `norrinfo` and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedoStats {
    pub records: u64,
    pub record_bytes: u64,
    pub pages_written: u64,
    pub writes: u64,
    pub syncs: u64,
    pub log_full: u64,
    pub buffer_full: u64,
}

#[derive(Debug)]
struct Ready {
    seq: u64,
    bytes: Vec<u8>,
    tail: u64,
}

#[derive(Debug, Clone, Copy)]
enum InFlight {
    Write { io_id: u64, end_seq: u64, then_sync: bool, tail: u64, file_no: u32 },
    Sync { io_id: u64, end_seq: u64, tail: u64 },
    Invalidate { io_id: u64, end_seq: u64 },
}

pub struct RedoPart {
    part: u32,
    geo: RedoGeometry,
    stream: StreamWriter,
    /// Seq of the open page (being filled; not yet sealed).
    open_seq: u64,
    open_max_gci: Gci,
    ready: VecDeque<Ready>,
    ready_bytes: usize,
    buffer_bytes: usize,
    inflight: Option<InFlight>,
    /// A completed write that must be synced before anything else.
    sync_due: Option<(u32, u64, u64)>,
    next_io_id: u64,
    /// Pages below are written / durable.
    written_seq: u64,
    synced_seq: u64,
    /// Oldest page still needed, and the tail recorded in the newest synced page.
    tail: u64,
    durable_tail: u64,
    /// Closed pages from the tail on: (seq, highest record GCI touching it).
    page_gcis: VecDeque<(u64, Gci)>,
    /// Newest durable marker page (the tail never passes it).
    marker_seq: Option<u64>,
    /// Flushes waiting for their marker page to be durable: (gci, marker seq).
    flushes: VecDeque<(Gci, u64)>,
    durable_gci: Gci,
    last_flush_gci: Gci,
    /// Records of a GCI above `last_flush_gci + 1`, in append order: they
    /// enter the stream only after the marker page of the GCI below theirs
    /// (module doc, invariant 5). Encoded bodies with their GCI.
    held: Vec<(Gci, Vec<u8>)>,
    /// Framed bytes of `held`.
    held_bytes: usize,
    /// Blank pages still to write after a resume: seqs `.0..=.1`.
    invalidate: Option<(u64, u64)>,
    crash: CrashPoints,
    crashed: Option<&'static str>,
    failed: Option<RedoError>,
    stats: RedoStats,
    scratch: Vec<u8>,
}

impl RedoPart {
    /// A fresh log part whose files exist, pre-allocated and zeroed.
    /// `buffer_bytes`: most bytes of sealed pages waiting to be written.
    pub fn create(part: u32, geo: RedoGeometry, buffer_bytes: usize) -> RedoPart {
        let resume = RedoResume {
            next_seq: 0,
            tail_seq: 0,
            durable_gci: 0,
            marker_seq: 0,
            page_gcis: Vec::new(),
            invalidate_through: 0,
        };
        let mut p = RedoPart::resume(part, geo, buffer_bytes, resume);
        p.invalidate = None;
        p.marker_seq = None;
        p
    }

    /// Continue a log after a restart (see `RedoReader::finish`).
    pub fn resume(part: u32, geo: RedoGeometry, buffer_bytes: usize, r: RedoResume) -> RedoPart {
        geo.validate().expect("validated REDO geometry");
        assert!(buffer_bytes >= geo.page_bytes as usize * 2, "REDO buffer smaller than two pages");
        assert!(r.tail_seq <= r.next_seq && r.next_seq - r.tail_seq < geo.total_pages());
        let inval_end = r.invalidate_through.min(r.tail_seq + geo.total_pages() - 1);
        RedoPart {
            part,
            geo,
            stream: StreamWriter::new(geo.room()),
            open_seq: r.next_seq,
            open_max_gci: 0,
            ready: VecDeque::new(),
            ready_bytes: 0,
            buffer_bytes,
            inflight: None,
            sync_due: None,
            next_io_id: 1,
            written_seq: r.next_seq,
            synced_seq: r.next_seq,
            tail: r.tail_seq,
            durable_tail: r.tail_seq,
            page_gcis: r.page_gcis.into_iter().filter(|&(s, _)| s >= r.tail_seq && s < r.next_seq).collect(),
            marker_seq: Some(r.marker_seq),
            flushes: VecDeque::new(),
            durable_gci: r.durable_gci,
            last_flush_gci: r.durable_gci,
            held: Vec::new(),
            held_bytes: 0,
            invalidate: (inval_end >= r.next_seq).then_some((r.next_seq, inval_end)),
            crash: CrashPoints::off(),
            crashed: None,
            failed: None,
            stats: RedoStats::default(),
            scratch: Vec::new(),
        }
    }

    /// The same part continued from another restart point instead (a
    /// roll forward to a later GCI the log holds, see
    /// `RedoRecovered::ahead_resumes`). Only before anything was written.
    pub fn resumed_at(&self, r: RedoResume) -> RedoPart {
        assert!(
            self.inflight.is_none()
                && self.ready.is_empty()
                && self.stats.pages_written == 0
                && self.stats.records == 0
                && self.held.is_empty(),
            "REDO part {} moved to another restart point after writing",
            self.part
        );
        assert!(r.durable_gci >= self.durable_gci, "a restart point below the one restored");
        let mut p = RedoPart::resume(self.part, self.geo, self.buffer_bytes, r);
        p.crash = self.crash.clone();
        p
    }

    /// Arm crash points (tests and the simulator).
    pub fn crash_points_mut(&mut self) -> &mut CrashPoints {
        &mut self.crash
    }

    pub fn part(&self) -> u32 {
        self.part
    }

    pub fn geometry(&self) -> RedoGeometry {
        self.geo
    }

    pub fn stats(&self) -> &RedoStats {
        &self.stats
    }

    /// Every record with GCI <= this is durable.
    pub fn durable_gci(&self) -> Gci {
        self.durable_gci
    }

    /// Share of the ring in use (0.0..=1.0), from the durable tail to the
    /// open page: checkpoint speed follows this.
    /// Highest GCI a flush (GCP save) was asked for: every later append
    /// must carry a higher GCI.
    pub fn last_flush_gci(&self) -> Gci {
        self.last_flush_gci
    }

    pub fn fill_ratio(&self) -> f64 {
        (self.open_seq + 1 - self.durable_tail) as f64 / self.geo.total_pages() as f64
    }

    /// Oldest page still needed.
    pub fn tail_seq(&self) -> u64 {
        self.tail
    }

    /// Seq of the page being filled.
    pub fn head_seq(&self) -> u64 {
        self.open_seq
    }

    pub fn failed(&self) -> Option<&RedoError> {
        self.failed.as_ref()
    }

    /// Seq the open page would have after adding `bytes` to the stream.
    fn open_seq_after(&self, bytes: usize) -> u64 {
        self.open_seq + ((self.stream.open_len() + bytes) / self.geo.room()) as u64
    }

    /// Highest page seq the ring lets us fill now (exclusive bound).
    fn limit_seq(&self) -> u64 {
        self.durable_tail + self.geo.total_pages()
    }

    /// Would an append of about `bytes` of records be taken now? Callers
    /// check at prepare (with the bytes of every write still uncommitted) so
    /// that the append at commit, which cannot be refused, finds room.
    pub fn check_room(&self, bytes: usize) -> Result<(), AppendError> {
        if self.failed.is_some() || self.crashed.is_some() {
            return Err(AppendError::LogFull);
        }
        let framed = bytes + crate::stream::RECORD_HEADER_BYTES + self.held_bytes;
        let new_open = self.open_seq_after(framed);
        if new_open + RESERVE_PAGES >= self.limit_seq() {
            return Err(AppendError::LogFull);
        }
        let new_pages = (new_open - self.open_seq) as usize;
        if self.ready_bytes + new_pages * self.geo.page_bytes as usize > self.buffer_bytes {
            return Err(AppendError::BufferFull);
        }
        Ok(())
    }

    /// Log the records of one transaction, all tagged `gci`: all of them or
    /// none (a refused append leaves the log as it was).
    pub fn append(&mut self, gci: Gci, records: &[RedoRecord]) -> Result<(), AppendError> {
        assert!(gci > self.last_flush_gci, "REDO append of GCI {gci} after a flush of {}", self.last_flush_gci);
        if self.failed.is_some() || self.crashed.is_some() {
            // The caller learns of the failure through poll_io / on_io_done;
            // transactions get a temporary error until the node restarts.
            self.stats.log_full += 1;
            return Err(AppendError::LogFull);
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        let mut ends = Vec::with_capacity(records.len());
        for r in records {
            record::encode(gci, r, &mut scratch);
            ends.push(scratch.len());
        }
        let framed = scratch.len() + records.len() * crate::stream::RECORD_HEADER_BYTES;
        // Held records enter the stream before the next marker's end: count
        // them as if they were in it.
        let new_open = self.open_seq_after(framed + self.held_bytes);
        if new_open + RESERVE_PAGES >= self.limit_seq() {
            self.stats.log_full += 1;
            self.scratch = scratch;
            return Err(AppendError::LogFull);
        }
        let new_pages = (new_open - self.open_seq) as usize;
        if self.ready_bytes + new_pages * self.geo.page_bytes as usize > self.buffer_bytes {
            self.stats.buffer_full += 1;
            self.scratch = scratch;
            return Err(AppendError::BufferFull);
        }
        let hold = gci > self.last_flush_gci + 1;
        let mut start = 0;
        for end in ends {
            if hold {
                self.held.push((gci, scratch[start..end].to_vec()));
                self.held_bytes += end - start + crate::stream::RECORD_HEADER_BYTES;
            } else {
                self.push_record(gci, &scratch[start..end]);
            }
            start = end;
        }
        self.stats.records += records.len() as u64;
        self.stats.record_bytes += framed as u64;
        debug_assert!(if hold || !self.held.is_empty() {
            self.open_seq <= new_open
        } else {
            self.open_seq == new_open
        });
        debug_assert!(!hold || self.held.iter().all(|(g, _)| *g > self.last_flush_gci + 1));
        self.scratch = scratch;
        Ok(())
    }

    /// Move the held records of GCI <= `upto` into the stream, in append
    /// order.
    fn release_held(&mut self, upto: Gci) {
        if self.held.is_empty() {
            return;
        }
        let held = std::mem::take(&mut self.held);
        self.held_bytes = 0;
        for (gci, body) in held {
            if gci <= upto {
                self.push_record(gci, &body);
            } else {
                self.held_bytes += body.len() + crate::stream::RECORD_HEADER_BYTES;
                self.held.push((gci, body));
            }
        }
    }

    fn push_record(&mut self, gci: Gci, body: &[u8]) {
        self.open_max_gci = self.open_max_gci.max(gci);
        let mut full = Vec::new();
        self.stream.push(body, |p| full.push(p));
        for p in full {
            // A record spanning pages counts in each page it touches.
            self.seal_open(p, 0, gci);
        }
    }

    /// Seal the open page with `data` (marker `marker`, 0 for none) and open the next.
    fn seal_open(&mut self, p: crate::stream::PageData, marker: Gci, carry_gci: Gci) {
        let seq = self.open_seq;
        let h = PageHeader {
            kind: Kind::RedoPage,
            version: REDO_VERSION,
            page_bytes: self.geo.page_bytes,
            seq,
            used: p.data.len() as u32,
            first_record: p.first_record,
            meta: {
                let mut m = [0u64; 4];
                m[meta::TAIL] = self.tail;
                m[meta::MARKER] = marker;
                m[meta::PART] = self.part as u64;
                m[meta::GEOMETRY] = self.geo.meta_word();
                m
            },
        };
        let mut bytes = Vec::with_capacity(self.geo.page_bytes as usize);
        seal_page(&h, &p.data, &mut bytes);
        self.page_gcis.push_back((seq, self.open_max_gci));
        self.ready_bytes += bytes.len();
        self.ready.push_back(Ready { seq, bytes, tail: self.tail });
        self.open_seq += 1;
        // A record continuing into the next page touches it too.
        self.open_max_gci = carry_gci;
        debug_assert!(self.open_seq < self.limit_seq());
    }

    /// Make every record with GCI <= `gci` durable (a GCP save). Closes the
    /// open page as a marker page. Returns true if already durable. The
    /// caller must have appended every record of GCI <= `gci` before.
    pub fn flush_up_to(&mut self, gci: Gci) -> Result<bool, AppendError> {
        if gci <= self.durable_gci {
            return Ok(true);
        }
        if gci <= self.last_flush_gci {
            return Ok(false); // already requested; completes with it
        }
        if self.open_seq_after(self.held_bytes) + 1 >= self.limit_seq() {
            return Err(AppendError::LogFull);
        }
        // Records of GCIs up to `gci` that came before an earlier flush of a
        // GCI further below (a new master's save can cover several GCIs)
        // belong before this marker; those of `gci + 1` right after it.
        self.release_held(gci);
        self.last_flush_gci = gci;
        let p = self.stream.take_page();
        let seq = self.open_seq;
        self.seal_open(p, gci, 0);
        self.flushes.push_back((gci, seq));
        self.release_held(gci + 1);
        debug_assert!(self.held.iter().all(|(g, _)| *g > gci + 1), "held records of a GCI the marker covers");
        Ok(false)
    }

    /// Records with GCI < `gci` are no longer needed (a local checkpoint of
    /// every partition of this part restores them). Frees the tail.
    pub fn release_before(&mut self, gci: Gci) {
        let Some(marker) = self.marker_seq else { return };
        while let Some(&(seq, max_gci)) = self.page_gcis.front() {
            if max_gci >= gci || seq >= marker {
                break;
            }
            self.page_gcis.pop_front();
            self.tail = seq + 1;
        }
        debug_assert!(self.tail <= self.open_seq);
    }

    /// The next IO to issue, if any (one at a time).
    pub fn poll_io(&mut self) -> Option<RedoIo> {
        if let Some(name) = self.crashed {
            return Some(RedoIo::Crash(name));
        }
        if self.inflight.is_some() || self.failed.is_some() {
            return None;
        }
        let io_id = self.next_io_id;
        if let Some((file_no, end_seq, tail)) = self.sync_due.take() {
            if crash_point!(self.crash, points::REDO_AFTER_WRITE_BEFORE_SYNC) {
                self.crashed = Some(points::REDO_AFTER_WRITE_BEFORE_SYNC);
                return Some(RedoIo::Crash(points::REDO_AFTER_WRITE_BEFORE_SYNC));
            }
            self.next_io_id += 1;
            self.stats.syncs += 1;
            self.inflight = Some(InFlight::Sync { io_id, end_seq, tail });
            return Some(RedoIo::Sync { io_id, file_no });
        }
        if let Some((from, through)) = self.invalidate {
            if crash_point!(self.crash, points::REDO_BEFORE_INVALIDATE) {
                self.crashed = Some(points::REDO_BEFORE_INVALIDATE);
                return Some(RedoIo::Crash(points::REDO_BEFORE_INVALIDATE));
            }
            let (file_no, offset) = self.geo.position(from);
            let in_file = self.geo.pages_per_file() - offset / self.geo.page_bytes as u64;
            let n = (through - from + 1).min(in_file).min(MAX_IO_PAGES);
            self.next_io_id += 1;
            self.inflight = Some(InFlight::Invalidate { io_id, end_seq: from + n });
            let data = vec![0u8; (n * self.geo.page_bytes as u64) as usize];
            return Some(RedoIo::Write { io_id, file_no, offset, data });
        }
        let first = self.ready.front()?.seq;
        debug_assert_eq!(first, self.written_seq);
        let (file_no, offset) = self.geo.position(first);
        let in_file = self.geo.pages_per_file() - offset / self.geo.page_bytes as u64;
        let n = (self.ready.len() as u64).min(in_file).min(MAX_IO_PAGES);
        let mut data = Vec::with_capacity((n * self.geo.page_bytes as u64) as usize);
        let mut tail = 0;
        let mut has_marker = false;
        for _ in 0..n {
            let r = self.ready.pop_front().expect("counted");
            self.ready_bytes -= r.bytes.len();
            has_marker |= self.flushes.iter().any(|&(_, s)| s == r.seq);
            tail = r.tail;
            data.extend_from_slice(&r.bytes);
        }
        let end_seq = first + n;
        let ends_file = n == in_file;
        let then_sync = has_marker || ends_file || end_seq - self.synced_seq > MAX_UNSYNCED_PAGES;
        self.next_io_id += 1;
        self.stats.writes += 1;
        self.stats.pages_written += n;
        self.inflight = Some(InFlight::Write { io_id, end_seq, then_sync, tail, file_no });
        Some(RedoIo::Write { io_id, file_no, offset, data })
    }

    /// An IO from `poll_io` completed. Returns the new durable GCI when a
    /// flush completed.
    pub fn on_io_done(&mut self, io_id: u64, result: Result<(), FsError>) -> Result<Option<Gci>, RedoError> {
        let Some(inflight) = self.inflight else {
            return Err(RedoError::Protocol {
                part: self.part,
                what: format!("completion of IO {io_id} with none in flight"),
            });
        };
        let expected = match inflight {
            InFlight::Write { io_id, .. } | InFlight::Sync { io_id, .. } | InFlight::Invalidate { io_id, .. } => io_id,
        };
        if expected != io_id {
            return Err(RedoError::Protocol {
                part: self.part,
                what: format!("completion of IO {io_id}, expected {expected}"),
            });
        }
        self.inflight = None;
        if let Err(error) = result {
            let e = RedoError::Io { part: self.part, error };
            self.failed = Some(e.clone());
            return Err(e);
        }
        match inflight {
            InFlight::Write { end_seq, then_sync, tail, file_no, .. } => {
                self.written_seq = end_seq;
                if then_sync {
                    self.sync_due = Some((file_no, end_seq, tail));
                }
                Ok(None)
            }
            InFlight::Invalidate { end_seq, .. } => {
                let (_, through) = self.invalidate.expect("invalidating");
                if end_seq > through {
                    self.invalidate = None;
                } else {
                    self.invalidate = Some((end_seq, through));
                }
                // Blank pages must be durable before new pages follow them.
                let file_no = self.geo.position(end_seq - 1).0;
                self.sync_due = Some((file_no, self.synced_seq, self.durable_tail));
                Ok(None)
            }
            InFlight::Sync { end_seq, tail, .. } => {
                self.synced_seq = self.synced_seq.max(end_seq);
                self.durable_tail = self.durable_tail.max(tail);
                let mut newest = None;
                while let Some(&(gci, seq)) = self.flushes.front() {
                    if seq >= self.synced_seq {
                        break;
                    }
                    self.flushes.pop_front();
                    assert!(gci > self.durable_gci, "GCIs only grow");
                    newest = Some(gci);
                    self.marker_seq = Some(seq);
                }
                let Some(gci) = newest else { return Ok(None) };
                if crash_point!(self.crash, points::REDO_AFTER_SYNC_BEFORE_CONF) {
                    self.crashed = Some(points::REDO_AFTER_SYNC_BEFORE_CONF);
                    return Ok(None);
                }
                self.durable_gci = gci;
                Ok(Some(gci))
            }
        }
    }

    /// True if nothing is buffered or in flight (a clean stop may proceed).
    pub fn is_idle(&self) -> bool {
        self.inflight.is_none() && self.ready.is_empty() && self.sync_due.is_none() && self.invalidate.is_none()
    }
}
