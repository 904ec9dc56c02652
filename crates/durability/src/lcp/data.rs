//! LCP data files: pages (`frame`) of kind LcpDataPage, page `seq` = page
//! number in the file, meta = [lcp_id, table << 32 | partition, 0, 0],
//! holding a record stream. Record bodies:
//! `kind:u8 (1 row, 2 tombstone) part:u16 gci:u64 values` with values as
//! `row_codec::encode_row` (the whole row, or the primary key of a deleted
//! row). Every tombstone precedes every row.

use super::{LcpIdent, PartMask, LCP_VERSION, PARTS};
use crate::error::FormatError;
use crate::frame::{open_page, seal_page, Kind, PageError, PageHeader, PAGE_HEADER_BYTES};
use crate::stream::{StreamReader, StreamWriter};
use norr_signals::ckpt::Gci;
use norr_signals::{row_codec, Value};
use serde::{Deserialize, Serialize};

const ROW: u8 = 1;
const TOMBSTONE: u8 = 2;
const FIXED: usize = 1 + 2 + 8;

/// What the control file records about a data file, and what the reader
/// checks it against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LcpDataSummary {
    pub bytes: u64,
    pub page_bytes: u32,
    /// CRC-32C of the whole file.
    pub crc: u32,
    pub rows: u64,
    pub tombstones: u64,
    /// Highest GCI of a row or tombstone written (0: none).
    pub max_gci: Gci,
    /// Bytes of encoded row values (for restore speed figures).
    pub row_bytes: u64,
}

/// One entry of a data file.
#[derive(Debug, Clone, PartialEq)]
pub enum LcpEntry {
    Row { part: u16, gci: Gci, row: Vec<Value> },
    Tombstone { part: u16, gci: Gci, key: Vec<Value> },
}

/// Builds a data file. Push tombstones first, then rows; take whole pages
/// with `take_ready` as they fill (write them at the file's end), then
/// `finish`.
pub struct LcpDataWriter {
    ident: LcpIdent,
    page_bytes: u32,
    stream: StreamWriter,
    next_page: u64,
    ready: Vec<u8>,
    bytes: u64,
    crc: u32,
    rows: u64,
    tombstones: u64,
    max_gci: Gci,
    row_bytes: u64,
    scratch: Vec<u8>,
}

impl LcpDataWriter {
    pub fn new(ident: LcpIdent, page_bytes: u32) -> LcpDataWriter {
        assert!(page_bytes.is_power_of_two() && page_bytes >= 512);
        LcpDataWriter {
            ident,
            page_bytes,
            stream: StreamWriter::new(page_bytes as usize - PAGE_HEADER_BYTES),
            next_page: 0,
            ready: Vec::new(),
            bytes: 0,
            crc: 0,
            rows: 0,
            tombstones: 0,
            max_gci: 0,
            row_bytes: 0,
            scratch: Vec::new(),
        }
    }

    pub fn ident(&self) -> LcpIdent {
        self.ident
    }

    pub fn push_tombstone(&mut self, part: u16, gci: Gci, key: &[Value]) {
        assert_eq!(self.rows, 0, "LCP tombstones must precede rows");
        self.tombstones += 1;
        self.push(TOMBSTONE, part, gci, key);
    }

    pub fn push_row(&mut self, part: u16, gci: Gci, row: &[Value]) {
        self.rows += 1;
        self.push(ROW, part, gci, row);
    }

    fn push(&mut self, kind: u8, part: u16, gci: Gci, values: &[Value]) {
        assert!(part < PARTS, "part {part}");
        self.max_gci = self.max_gci.max(gci);
        let mut body = std::mem::take(&mut self.scratch);
        body.clear();
        body.push(kind);
        body.extend_from_slice(&part.to_le_bytes());
        body.extend_from_slice(&gci.to_le_bytes());
        row_codec::encode_row(values, &mut body);
        if kind == ROW {
            self.row_bytes += (body.len() - FIXED) as u64;
        }
        let mut pages = Vec::new();
        self.stream.push(&body, |p| pages.push(p));
        for p in pages {
            self.seal(p);
        }
        self.scratch = body;
    }

    fn seal(&mut self, p: crate::stream::PageData) {
        let h = PageHeader {
            kind: Kind::LcpDataPage,
            version: LCP_VERSION,
            page_bytes: self.page_bytes,
            seq: self.next_page,
            used: p.data.len() as u32,
            first_record: p.first_record,
            meta: [self.ident.lcp_id, (self.ident.table as u64) << 32 | self.ident.partition as u64, 0, 0],
        };
        let start = self.ready.len();
        seal_page(&h, &p.data, &mut self.ready);
        self.crc = crc32c::crc32c_append(self.crc, &self.ready[start..]);
        self.bytes += self.page_bytes as u64;
        self.next_page += 1;
    }

    /// Whole pages ready to be appended to the file.
    pub fn take_ready(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.ready)
    }

    pub fn ready_len(&self) -> usize {
        self.ready.len()
    }

    /// Seal the last page; returns the remaining bytes to append and the
    /// summary for the control file.
    pub fn finish(mut self) -> (Vec<u8>, LcpDataSummary) {
        let p = self.stream.take_page();
        self.seal(p);
        let s = LcpDataSummary {
            bytes: self.bytes,
            page_bytes: self.page_bytes,
            crc: self.crc,
            rows: self.rows,
            tombstones: self.tombstones,
            max_gci: self.max_gci,
            row_bytes: self.row_bytes,
        };
        (self.ready, s)
    }
}

/// Reads a data file as a restore step says: only the rows of `rows_of`
/// and the tombstones of `tombstones_of` are returned; everything is
/// checked (page checksums and numbers, the whole-file CRC, the counts).
pub struct LcpDataReader {
    ident: LcpIdent,
    summary: LcpDataSummary,
    rows_of: PartMask,
    tombstones_of: PartMask,
    next_page: u64,
    stream: StreamReader,
    crc: u32,
    rows: u64,
    tombstones: u64,
}

/// Most bytes per read.
pub const READ_CHUNK_BYTES: u64 = 1 << 20;

impl LcpDataReader {
    pub fn new(ident: LcpIdent, summary: LcpDataSummary, rows_of: PartMask, tombstones_of: PartMask) -> LcpDataReader {
        LcpDataReader {
            ident,
            summary,
            rows_of,
            tombstones_of,
            next_page: 0,
            stream: StreamReader::new(),
            crc: 0,
            rows: 0,
            tombstones: 0,
        }
    }

    /// (offset, len) of the next read; None when the file is read.
    pub fn next_read(&self) -> Option<(u64, u32)> {
        let at = self.next_page * self.summary.page_bytes as u64;
        if at >= self.summary.bytes {
            return None;
        }
        let chunk = READ_CHUNK_BYTES.max(self.summary.page_bytes as u64);
        Some((at, (self.summary.bytes - at).min(chunk) as u32))
    }

    /// Bytes read at `offset` (whole pages). Entries to apply go to `out`.
    pub fn feed(&mut self, offset: u64, bytes: &[u8], out: &mut Vec<LcpEntry>) -> Result<(), FormatError> {
        let path = self.ident.data_path();
        let pb = self.summary.page_bytes as usize;
        if offset != self.next_page * pb as u64 {
            return Err(FormatError::new(&path, offset, "LCP data read out of order"));
        }
        if !bytes.len().is_multiple_of(pb) || bytes.is_empty() {
            return Err(FormatError::new(
                &path,
                offset + bytes.len() as u64,
                format!("file cut short: {} bytes is not whole pages of {pb}", bytes.len()),
            ));
        }
        let meta0 = [self.ident.lcp_id, (self.ident.table as u64) << 32 | self.ident.partition as u64, 0, 0];
        for (i, page) in bytes.chunks_exact(pb).enumerate() {
            let off = offset + (i * pb) as u64;
            let (h, data) = open_page(page, Kind::LcpDataPage, LCP_VERSION, &path, off).map_err(|e| match e {
                PageError::Blank => FormatError::new(&path, off, "blank page in an LCP data file"),
                PageError::Bad(e) => e,
            })?;
            if h.seq != self.next_page || h.meta != meta0 {
                return Err(FormatError::new(
                    &path,
                    off,
                    format!(
                        "page {} of LCP {} of table {} partition {} found where page {} of this file belongs",
                        h.seq,
                        h.meta[0],
                        h.meta[1] >> 32,
                        h.meta[1] & 0xffff_ffff,
                        self.next_page
                    ),
                ));
            }
            self.crc = crc32c::crc32c_append(self.crc, page);
            let (rows_of, tombs_of) = (self.rows_of, self.tombstones_of);
            let (mut rows, mut tombs) = (self.rows, self.tombstones);
            self.stream
                .feed(data, h.first_record, |body| {
                    if body.len() < FIXED {
                        return Err("LCP record shorter than its fixed part".into());
                    }
                    let part = u16::from_le_bytes([body[1], body[2]]);
                    if part >= PARTS {
                        return Err(format!("LCP record of part {part}"));
                    }
                    let gci = u64::from_le_bytes(body[3..11].try_into().expect("8"));
                    match body[0] {
                        ROW => {
                            rows += 1;
                            if rows_of.contains(part) {
                                out.push(LcpEntry::Row { part, gci, row: row_codec::decode_row(&body[FIXED..])? });
                            }
                        }
                        TOMBSTONE => {
                            if rows > 0 {
                                return Err("tombstone after a row (tombstones come first)".into());
                            }
                            tombs += 1;
                            if tombs_of.contains(part) {
                                out.push(LcpEntry::Tombstone {
                                    part,
                                    gci,
                                    key: row_codec::decode_row(&body[FIXED..])?,
                                });
                            }
                        }
                        k => return Err(format!("unknown LCP record kind {k}")),
                    }
                    Ok(())
                })
                .map_err(|(at, e)| FormatError::new(&path, off + (PAGE_HEADER_BYTES + at) as u64, e))?;
            self.rows = rows;
            self.tombstones = tombs;
            self.next_page += 1;
        }
        Ok(())
    }

    /// After the last read: the file must be whole and match its control file.
    pub fn finish(&self) -> Result<(), FormatError> {
        let path = self.ident.data_path();
        let end = self.next_page * self.summary.page_bytes as u64;
        if end != self.summary.bytes {
            return Err(FormatError::new(
                &path,
                end,
                format!("LCP data file read {end} of {} bytes", self.summary.bytes),
            ));
        }
        if self.stream.mid_record() {
            return Err(FormatError::new(&path, end, "LCP data file ends inside a record"));
        }
        if self.crc != self.summary.crc || self.rows != self.summary.rows || self.tombstones != self.summary.tombstones
        {
            return Err(FormatError::new(
                &path,
                0,
                format!(
                    "LCP data file does not match its control file (crc {:#x}/{:#x}, rows {}/{}, tombstones {}/{})",
                    self.crc, self.summary.crc, self.rows, self.summary.rows, self.tombstones, self.summary.tombstones
                ),
            ));
        }
        Ok(())
    }
}
