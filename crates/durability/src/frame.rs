//! The two checksummed containers every durability file is made of (drawn
//! byte by byte in FORMATS.md):
//!
//! * a **sealed blob**: a 16-byte header (magic, kind, format version, body
//!   length, CRC-32C) and a body. Small files (VERSION, system file, LCP
//!   control, schema file) are one blob; the DDL log is blobs back to back.
//! * a **page**: a fixed-size unit (REDO log pages, LCP data pages) with a
//!   64-byte header carrying a sequence number, how many data bytes it holds,
//!   where the first record starting in it begins, four words of
//!   kind-specific metadata, and a CRC-32C of the whole page.
//!
//! All integers are little-endian. CRC-32C (Castagnoli) as computed by the
//! `crc32c` crate (hardware instructions where the CPU has them).

use crate::error::FormatError;

/// First four bytes of every blob and page.
pub const MAGIC: [u8; 4] = *b"NORR";
pub const BLOB_HEADER_BYTES: usize = 16;
pub const PAGE_HEADER_BYTES: usize = 64;
/// `first_record` of a page in which no record starts (all continuation).
pub const NO_RECORD: u32 = u32::MAX;
/// Largest blob body accepted from disk (a schema file with thousands of
/// tables is a few MB): a corrupted length cannot drive a huge allocation.
pub const MAX_BLOB_BODY: usize = 256 << 20;

/// What a blob or page is. Stored as u16 after the magic; a reader refuses a
/// blob of another kind (a file put in the wrong place).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum Kind {
    Version = 1,
    SysFile = 2,
    LcpControl = 3,
    SchemaFile = 4,
    /// Reserved: entries of the retired DDL log (`schema/ddl.log`, never
    /// written by DICT); the number is not reused.
    DdlEntry = 5,
    RedoPage = 6,
    LcpDataPage = 7,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Version => "VERSION file",
            Kind::SysFile => "system file",
            Kind::LcpControl => "LCP control file",
            Kind::SchemaFile => "schema file",
            Kind::DdlEntry => "DDL log entry",
            Kind::RedoPage => "REDO log page",
            Kind::LcpDataPage => "LCP data page",
        }
    }
}

/// Append a sealed blob holding `body` to `out`.
pub fn seal(kind: Kind, version: u16, body: &[u8], out: &mut Vec<u8>) {
    assert!(body.len() <= MAX_BLOB_BODY, "blob body of {} bytes", body.len());
    let start = out.len();
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&(kind as u16).to_le_bytes());
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&out[start..start + 12]), body);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(body);
}

/// A blob read back: its version and body.
#[derive(Debug, PartialEq, Eq)]
pub struct Blob<'a> {
    pub version: u16,
    pub body: &'a [u8],
    /// Bytes the blob took (header + body).
    pub len: usize,
}

/// Read the blob at the start of `bytes` (which sit at `offset` in `path`).
/// `max_version`: the newest format version this code reads; a newer one is
/// refused with a message that says so.
pub fn open_blob<'a>(
    bytes: &'a [u8],
    kind: Kind,
    max_version: u16,
    path: &str,
    offset: u64,
) -> Result<Blob<'a>, FormatError> {
    let err = |what: String| FormatError::new(path, offset, what);
    if bytes.len() < BLOB_HEADER_BYTES {
        return Err(err(format!(
            "{} cut short: {} bytes, the header alone is {BLOB_HEADER_BYTES}",
            kind.name(),
            bytes.len()
        )));
    }
    if bytes[0..4] != MAGIC {
        return Err(err(format!("not a NorrDB {} (bad magic)", kind.name())));
    }
    let got_kind = u16::from_le_bytes([bytes[4], bytes[5]]);
    if got_kind != kind as u16 {
        return Err(err(format!("expected a {} but found file kind {got_kind}", kind.name())));
    }
    let version = u16::from_le_bytes([bytes[6], bytes[7]]);
    let len = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")) as usize;
    if len > MAX_BLOB_BODY || len > bytes.len() - BLOB_HEADER_BYTES {
        return Err(err(format!(
            "{} cut short or corrupt: body of {len} bytes, {} present",
            kind.name(),
            bytes.len() - BLOB_HEADER_BYTES
        )));
    }
    let stored = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes"));
    let body = &bytes[BLOB_HEADER_BYTES..BLOB_HEADER_BYTES + len];
    let crc = crc32c::crc32c_append(crc32c::crc32c(&bytes[0..12]), body);
    if crc != stored {
        return Err(err(format!("{} checksum mismatch (stored {stored:#010x}, computed {crc:#010x})", kind.name())));
    }
    // Checked after the checksum: a version number is only trusted intact.
    if version == 0 || version > max_version {
        return Err(err(format!(
            "{} has format version {version}; this NorrDB reads versions 1..={max_version} (written by a newer NorrDB? use that version)",
            kind.name()
        )));
    }
    Ok(Blob { version, body, len: BLOB_HEADER_BYTES + len })
}

/// The header of a page. `meta` is kind-specific (see the REDO and LCP
/// modules and FORMATS.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageHeader {
    pub kind: Kind,
    pub version: u16,
    pub page_bytes: u32,
    pub seq: u64,
    /// Data bytes used after the header.
    pub used: u32,
    /// Offset (in the data area) of the first record that starts in this
    /// page, or `NO_RECORD`.
    pub first_record: u32,
    pub meta: [u64; 4],
}

/// Write a whole page: header, `data` (at most `page_bytes - 64`), zero fill,
/// then the CRC over everything with the CRC field zero.
pub fn seal_page(h: &PageHeader, data: &[u8], out: &mut Vec<u8>) {
    let pb = h.page_bytes as usize;
    assert!(pb > PAGE_HEADER_BYTES && data.len() <= pb - PAGE_HEADER_BYTES);
    assert_eq!(h.used as usize, data.len());
    let start = out.len();
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&(h.kind as u16).to_le_bytes());
    out.extend_from_slice(&h.version.to_le_bytes());
    out.extend_from_slice(&h.page_bytes.to_le_bytes());
    out.extend_from_slice(&[0; 4]); // CRC, filled below
    out.extend_from_slice(&h.seq.to_le_bytes());
    out.extend_from_slice(&h.used.to_le_bytes());
    out.extend_from_slice(&h.first_record.to_le_bytes());
    for m in h.meta {
        out.extend_from_slice(&m.to_le_bytes());
    }
    debug_assert_eq!(out.len() - start, PAGE_HEADER_BYTES);
    out.extend_from_slice(data);
    out.resize(start + pb, 0);
    let crc = crc32c::crc32c(&out[start..start + pb]);
    out[start + 12..start + 16].copy_from_slice(&crc.to_le_bytes());
}

/// Why a page did not open. `Blank` (all zero: never written, or
/// invalidated) is told apart from damage, which readers of a log use to
/// tell its end from corruption.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageError {
    Blank,
    Bad(FormatError),
}

/// Check and parse one page (`bytes` is exactly one page, at `offset` in `path`).
pub fn open_page<'a>(
    bytes: &'a [u8],
    kind: Kind,
    max_version: u16,
    path: &str,
    offset: u64,
) -> Result<(PageHeader, &'a [u8]), PageError> {
    let bad = |what: String| PageError::Bad(FormatError::new(path, offset, what));
    if bytes.len() < PAGE_HEADER_BYTES {
        return Err(bad(format!("{} cut short: {} bytes", kind.name(), bytes.len())));
    }
    if bytes[0..PAGE_HEADER_BYTES].iter().all(|&b| b == 0) {
        return Err(PageError::Blank);
    }
    if bytes[0..4] != MAGIC {
        return Err(bad(format!("not a NorrDB {} (bad magic)", kind.name())));
    }
    let u16_at = |i: usize| u16::from_le_bytes([bytes[i], bytes[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
    let u64_at = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
    if u16_at(4) != kind as u16 {
        return Err(bad(format!("expected a {} but found kind {}", kind.name(), u16_at(4))));
    }
    let page_bytes = u32_at(8);
    if page_bytes as usize != bytes.len() {
        return Err(bad(format!("{} says it is {page_bytes} bytes, expected {}", kind.name(), bytes.len())));
    }
    let stored = u32_at(12);
    let crc = {
        let c = crc32c::crc32c(&bytes[0..12]);
        let c = crc32c::crc32c_append(c, &[0; 4]);
        crc32c::crc32c_append(c, &bytes[16..])
    };
    if crc != stored {
        return Err(bad(format!("{} checksum mismatch (torn or corrupt page)", kind.name())));
    }
    let version = u16_at(6);
    if version == 0 || version > max_version {
        return Err(bad(format!(
            "{} has format version {version}; this NorrDB reads versions 1..={max_version}",
            kind.name()
        )));
    }
    let used = u32_at(24);
    let first_record = u32_at(28);
    let room = bytes.len() - PAGE_HEADER_BYTES;
    if used as usize > room || (first_record != NO_RECORD && first_record >= used) {
        return Err(bad(format!("{} header is inconsistent (used {used}, first record {first_record})", kind.name())));
    }
    let h = PageHeader {
        kind,
        version,
        page_bytes,
        seq: u64_at(16),
        used,
        first_record,
        meta: [u64_at(32), u64_at(40), u64_at(48), u64_at(56)],
    };
    Ok((h, &bytes[PAGE_HEADER_BYTES..PAGE_HEADER_BYTES + used as usize]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_round_trip_and_damage() {
        let mut b = Vec::new();
        seal(Kind::SysFile, 1, b"hello", &mut b);
        let blob = open_blob(&b, Kind::SysFile, 1, "sys/A", 0).unwrap();
        assert_eq!((blob.version, blob.body, blob.len), (1, &b"hello"[..], 21));
        // Wrong kind, newer version, flipped bits anywhere, cut short.
        assert!(open_blob(&b, Kind::Version, 1, "x", 0).unwrap_err().what.contains("expected a VERSION file"));
        let mut newer = Vec::new();
        seal(Kind::SysFile, 3, b"x", &mut newer);
        let e = open_blob(&newer, Kind::SysFile, 2, "sys/A", 7).unwrap_err();
        assert!(e.what.contains("format version 3") && e.offset == 7 && e.path == "sys/A", "{e}");
        for i in 0..b.len() {
            for bit in 0..8 {
                let mut c = b.clone();
                c[i] ^= 1 << bit;
                assert!(open_blob(&c, Kind::SysFile, 1, "p", 0).is_err(), "flip byte {i} bit {bit}");
            }
        }
        for n in 0..b.len() {
            assert!(open_blob(&b[..n], Kind::SysFile, 1, "p", 0).is_err());
        }
    }

    #[test]
    fn page_round_trip_and_damage() {
        let h = PageHeader {
            kind: Kind::RedoPage,
            version: 1,
            page_bytes: 256,
            seq: 42,
            used: 5,
            first_record: 0,
            meta: [1, 2, 3, 4],
        };
        let mut p = Vec::new();
        seal_page(&h, b"abcde", &mut p);
        assert_eq!(p.len(), 256);
        let (h2, data) = open_page(&p, Kind::RedoPage, 1, "redo", 0).unwrap();
        assert_eq!((h2, data), (h, &b"abcde"[..]));
        assert_eq!(open_page(&vec![0; 256], Kind::RedoPage, 1, "r", 0), Err(PageError::Blank));
        for i in 0..p.len() {
            let mut c = p.clone();
            c[i] ^= 0x10;
            assert!(matches!(open_page(&c, Kind::RedoPage, 1, "r", 0), Err(PageError::Bad(_))), "byte {i}");
        }
        assert!(open_page(&p, Kind::LcpDataPage, 1, "r", 0).is_err());
    }
}
