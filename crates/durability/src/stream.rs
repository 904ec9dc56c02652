//! A stream of checksummed records laid over fixed-size pages (REDO log and
//! LCP data files). A record is `len:u32 crc:u32 body` where the CRC-32C
//! covers `len` and `body`; records follow each other across page
//! boundaries, and each page says where the first record starting in it
//! begins (`first_record`), so a reader may start at any page.

use crate::frame::NO_RECORD;

pub const RECORD_HEADER_BYTES: usize = 8;
/// Largest record body written or accepted (a corrupt length cannot drive a
/// huge allocation).
pub const MAX_RECORD_BYTES: usize = 256 << 20;

fn record_crc(len: u32, body: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&len.to_le_bytes()), body)
}

/// Splits records into page-sized data areas.
#[derive(Debug)]
pub struct StreamWriter {
    room: usize,
    cur: Vec<u8>,
    cur_first: u32,
}

/// A page's worth of stream data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageData {
    pub data: Vec<u8>,
    pub first_record: u32,
}

impl StreamWriter {
    /// `room`: data bytes per page (page size minus header).
    pub fn new(room: usize) -> StreamWriter {
        assert!(room >= RECORD_HEADER_BYTES);
        StreamWriter { room, cur: Vec::with_capacity(room), cur_first: NO_RECORD }
    }

    /// Bytes a record of `body_len` adds to the stream.
    pub fn framed_len(body_len: usize) -> usize {
        RECORD_HEADER_BYTES + body_len
    }

    /// Bytes in the open (not yet full) page.
    pub fn open_len(&self) -> usize {
        self.cur.len()
    }

    /// Room left in the open page.
    pub fn open_room(&self) -> usize {
        self.room - self.cur.len()
    }

    /// Append one record; every page it fills is handed to `full`.
    pub fn push(&mut self, body: &[u8], mut full: impl FnMut(PageData)) {
        assert!(body.len() <= MAX_RECORD_BYTES, "record of {} bytes", body.len());
        let len = body.len() as u32;
        let mut head = [0u8; RECORD_HEADER_BYTES];
        head[0..4].copy_from_slice(&len.to_le_bytes());
        head[4..8].copy_from_slice(&record_crc(len, body).to_le_bytes());
        if self.cur_first == NO_RECORD {
            self.cur_first = self.cur.len() as u32;
        }
        for mut part in [&head[..], body] {
            while !part.is_empty() {
                if self.cur.len() == self.room {
                    full(self.take_page());
                }
                let n = part.len().min(self.room - self.cur.len());
                self.cur.extend_from_slice(&part[..n]);
                part = &part[n..];
            }
        }
        if self.cur.len() == self.room {
            full(self.take_page());
        }
    }

    /// Close the open page (possibly empty) and return it.
    pub fn take_page(&mut self) -> PageData {
        let data = std::mem::replace(&mut self.cur, Vec::with_capacity(self.room));
        let first_record = std::mem::replace(&mut self.cur_first, NO_RECORD);
        PageData { data, first_record }
    }
}

/// Reassembles records from pages fed in stream order.
#[derive(Debug, Default)]
pub struct StreamReader {
    /// Bytes of the record being assembled (header included).
    pending: Vec<u8>,
    /// Bytes the pending record still needs (0: between records).
    need: usize,
    /// A record start was found: until then pages are skipped (the reader
    /// may start in the middle of a record spanning several pages).
    started: bool,
}

impl StreamReader {
    pub fn new() -> StreamReader {
        StreamReader::default()
    }

    /// True if a record is cut at the end of what was fed.
    pub fn mid_record(&self) -> bool {
        self.need > 0 || !self.pending.is_empty()
    }

    /// Feed the data area of the next page. Every complete, checksum-verified
    /// record body is passed to `f`. An error names the offset in `data`.
    pub fn feed(
        &mut self,
        data: &[u8],
        first_record: u32,
        mut f: impl FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<(), (usize, String)> {
        let mut at = 0usize;
        if !self.started {
            if first_record == NO_RECORD {
                return Ok(()); // the tail of a record that began before the start
            }
            self.started = true;
            at = first_record as usize;
        } else if self.mid_record() {
            // The record in progress must end exactly where the page says the
            // next one starts (or run through the whole page). While its
            // header is cut, its length is unknown: the loop checks later.
            if data.is_empty() {
                return Err((0, "empty page in the middle of a record".into()));
            }
            if self.pending.len() >= RECORD_HEADER_BYTES {
                let rest = self.need;
                let expect = if rest >= data.len() { NO_RECORD } else { rest as u32 };
                if first_record != expect {
                    return Err((
                        0,
                        format!(
                            "record continues for {rest} bytes but the page says its first record is at {first_record}"
                        ),
                    ));
                }
            }
        } else if first_record != NO_RECORD && first_record != 0 {
            return Err((0, format!("page starts between records but says its first record is at {first_record}")));
        } else if first_record == NO_RECORD && !data.is_empty() {
            return Err((0, "page holds data but no record start, with no record in progress".into()));
        }
        while at < data.len() {
            if self.pending.is_empty() && data.len() - at >= RECORD_HEADER_BYTES {
                // Fast path: the header is in this page.
                let len = u32::from_le_bytes(data[at..at + 4].try_into().expect("4"));
                check_len(len).map_err(|e| (at, e))?;
                let total = RECORD_HEADER_BYTES + len as usize;
                if data.len() - at >= total {
                    let crc = u32::from_le_bytes(data[at + 4..at + 8].try_into().expect("4"));
                    let body = &data[at + RECORD_HEADER_BYTES..at + total];
                    if record_crc(len, body) != crc {
                        return Err((at, "record checksum mismatch".into()));
                    }
                    f(body).map_err(|e| (at, e))?;
                    at += total;
                    continue;
                }
            }
            // Slow path: the record spans pages.
            let rec_start = at;
            if self.pending.len() < RECORD_HEADER_BYTES {
                let n = (RECORD_HEADER_BYTES - self.pending.len()).min(data.len() - at);
                self.pending.extend_from_slice(&data[at..at + n]);
                at += n;
                if self.pending.len() < RECORD_HEADER_BYTES {
                    self.need = RECORD_HEADER_BYTES - self.pending.len();
                    break;
                }
                let len = u32::from_le_bytes(self.pending[0..4].try_into().expect("4"));
                check_len(len).map_err(|e| (rec_start, e))?;
                self.need = len as usize;
                self.pending.reserve(len as usize);
            }
            let n = self.need.min(data.len() - at);
            self.pending.extend_from_slice(&data[at..at + n]);
            at += n;
            self.need -= n;
            if self.need == 0 {
                let len = u32::from_le_bytes(self.pending[0..4].try_into().expect("4"));
                let crc = u32::from_le_bytes(self.pending[4..8].try_into().expect("4"));
                let body = &self.pending[RECORD_HEADER_BYTES..];
                if record_crc(len, body) != crc {
                    return Err((rec_start, "record checksum mismatch (record spanning pages)".into()));
                }
                f(body).map_err(|e| (rec_start, e))?;
                self.pending.clear();
            }
        }
        Ok(())
    }
}

fn check_len(len: u32) -> Result<(), String> {
    if len as usize > MAX_RECORD_BYTES {
        return Err(format!("record length {len} exceeds the limit of {MAX_RECORD_BYTES} bytes (corrupt length)"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(records: &[Vec<u8>], room: usize) -> Vec<PageData> {
        let mut w = StreamWriter::new(room);
        let mut pages = Vec::new();
        for r in records {
            w.push(r, |p| pages.push(p));
        }
        pages.push(w.take_page());
        pages
    }

    fn read(pages: &[PageData]) -> Result<Vec<Vec<u8>>, (usize, String)> {
        let mut r = StreamReader::new();
        let mut out = Vec::new();
        for p in pages {
            r.feed(&p.data, p.first_record, |b| {
                out.push(b.to_vec());
                Ok(())
            })?;
        }
        if r.mid_record() {
            return Err((0, "stream ends inside a record".into()));
        }
        Ok(out)
    }

    #[test]
    fn records_span_pages_and_read_back() {
        for room in [8usize, 9, 13, 64, 1000] {
            let recs: Vec<Vec<u8>> = (0..50).map(|i| vec![i as u8; (i * 7) % 90]).collect();
            let pages = write(&recs, room);
            assert!(pages.iter().all(|p| p.data.len() <= room));
            assert_eq!(read(&pages).unwrap(), recs, "room {room}");
            // Starting mid-stream at any page yields a suffix of the records.
            for start in 0..pages.len() {
                let got = read(&pages[start..]).unwrap();
                assert!(recs.ends_with(&got), "room {room} start {start}");
            }
        }
    }

    #[test]
    fn damage_is_detected() {
        let recs: Vec<Vec<u8>> = (0..20).map(|i| vec![i as u8; 30]).collect();
        let pages = write(&recs, 64);
        for pi in 0..pages.len() {
            for i in 0..pages[pi].data.len() {
                let mut c = pages.clone();
                c[pi].data[i] ^= 4;
                assert!(read(&c).is_err(), "page {pi} byte {i}");
            }
        }
    }
}
