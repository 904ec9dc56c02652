//! Every reader of the durability formats on random and mutated bytes:
//! never a panic, and errors name a file and an offset inside it.

use norr_durability::frame::{open_page, Kind};
use norr_durability::lcp::{self, LcpControl, LcpDataReader, LcpDataWriter, LcpIdent, PartMask};
use norr_durability::redo::{self, RedoGeometry, RedoOp, RedoPart, RedoReader, RedoRecord};
use norr_durability::schema::{self, SchemaSnapshot};
use norr_durability::sysfile::{SysFile, SysFileStore};
use norr_durability::{layout, FormatError};
use norr_signals::Value;
use proptest::prelude::*;

fn named(e: &FormatError, len: usize) {
    assert!(!e.path.is_empty(), "{e}");
    assert!(e.offset <= len as u64 + (1 << 20), "{e}");
}

/// Sample valid files to mutate.
fn samples() -> Vec<(&'static str, Vec<u8>)> {
    let mut sf = SysFile::new(4);
    sf.last_complete_gci = 77;
    let ident = LcpIdent { table: 1, partition: 0, lcp_id: 2 };
    let mut w = LcpDataWriter::new(ident, 512);
    w.push_tombstone(5, 3, &[Value::Int(1)]);
    for i in 0..20 {
        w.push_row(i, 4, &[Value::Int(i as i64), Value::Bytes(vec![7; 90])]);
    }
    let mut data = w.take_ready();
    let (rest, summary) = w.finish();
    data.extend(rest);
    let control = LcpControl {
        table: 1,
        partition: 0,
        lcp_id: 2,
        table_version: 1,
        start_gci: 5,
        since_gci: 0,
        max_gci: 4,
        full_parts: lcp::PartWindow::ALL,
        data: summary,
        chain: vec![],
    };
    vec![
        ("sysfile", sf.encode()),
        ("control", control.encode()),
        ("lcpdata", data),
        ("version", layout::encode_version(1, "0.1.0")),
        ("schema", SchemaSnapshot::default().encode()),
    ]
}

fn read_all(kind: &str, bytes: &[u8]) -> bool {
    let mut ok = true;
    match kind {
        "sysfile" => {
            if let Err(e) = SysFileStore::load(Some(bytes), None) {
                named(&e, bytes.len());
                ok = false;
            }
        }
        "control" => {
            if let Err(e) = LcpControl::decode(bytes, "lcp/1/0/2.ctl") {
                named(&e, bytes.len());
                ok = false;
            }
        }
        "lcpdata" => {
            let ident = LcpIdent { table: 1, partition: 0, lcp_id: 2 };
            // Trust a summary derived from the bytes' length: the reader must
            // still check every page.
            let whole = bytes.len() / 512 * 512;
            let summary = lcp::LcpDataSummary {
                bytes: whole as u64,
                page_bytes: 512,
                crc: crc32c::crc32c(&bytes[..whole]),
                rows: 20,
                tombstones: 1,
                max_gci: 4,
                row_bytes: 0,
            };
            let mut r = LcpDataReader::new(ident, summary, PartMask::ALL, PartMask::ALL);
            let mut out = Vec::new();
            while let Some((off, len)) = r.next_read() {
                let end = (off as usize + len as usize).min(bytes.len());
                if let Err(e) = r.feed(off, &bytes[off as usize..end], &mut out) {
                    named(&e, bytes.len());
                    return false;
                }
            }
            ok = r.finish().is_ok();
        }
        "version" => {
            if let Err(e) = layout::decode_version(bytes) {
                named(&e, bytes.len());
                ok = false;
            }
        }
        "schema" => {
            if let Err(e) = SchemaSnapshot::decode(bytes, schema::SCHEMA_FILE) {
                named(&e, bytes.len());
                ok = false;
            }
        }
        _ => unreachable!(),
    }
    ok
}

fn redo_log_bytes() -> (RedoGeometry, Vec<Vec<u8>>) {
    let geo = RedoGeometry { files: 2, file_bytes: 150 * 512, page_bytes: 512 };
    let mut files = vec![vec![0u8; geo.file_bytes as usize]; 2];
    let mut part = RedoPart::create(0, geo, 1 << 20);
    for g in 1..=6u64 {
        for i in 0..5 {
            let r = RedoRecord {
                op: RedoOp::Put,
                table: 1,
                partition: 0,
                values: vec![Value::UInt(g * 10 + i), Value::Bytes(vec![1; 300])],
            };
            part.append(g, &[r]).unwrap();
        }
        part.flush_up_to(g).unwrap();
        while let Some(io) = part.poll_io() {
            match io {
                redo::RedoIo::Write { io_id, file_no, offset, data } => {
                    files[file_no as usize][offset as usize..offset as usize + data.len()].copy_from_slice(&data);
                    part.on_io_done(io_id, Ok(())).unwrap();
                }
                redo::RedoIo::Sync { io_id, .. } => {
                    part.on_io_done(io_id, Ok(())).unwrap();
                }
                redo::RedoIo::Crash(_) => unreachable!(),
            }
        }
    }
    (geo, files)
}

fn read_redo(geo: RedoGeometry, files: &[Vec<u8>]) -> usize {
    let firsts: Vec<(u32, Vec<u8>)> = (0..geo.files).map(|f| (f, files[f as usize][..512].to_vec())).collect();
    let head = match redo::choose_head_file(&geo, 0, &firsts) {
        Ok(Some(f)) => match redo::scan_head_file(&geo, 0, f, &files[f as usize]) {
            Ok(h) => Some(h),
            Err(e) => {
                named(&e, files[0].len());
                return 0;
            }
        },
        Ok(None) => None,
        Err(e) => {
            named(&e, files[0].len());
            return 0;
        }
    };
    let mut r = RedoReader::new(geo, 0, head, 1, 6);
    let mut out = Vec::new();
    while let Some(rd) = r.next_read() {
        let f = &files[rd.file_no as usize];
        let end = (rd.offset as usize + rd.len as usize).min(f.len());
        if let Err(e) = r.feed(rd, &f[rd.offset as usize..end], &mut out) {
            named(&e, f.len());
            return 0;
        }
    }
    if let Err(e) = r.finish() {
        named(&e, files[0].len());
        return 0;
    }
    out.len()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..3000)) {
        for kind in ["sysfile", "control", "lcpdata", "version", "schema"] {
            let _ = read_all(kind, &bytes);
        }
        let _ = open_page(&bytes, Kind::RedoPage, 1, "redo/part-0/file-0", 0);
    }

    #[test]
    fn mutated_files_never_panic(which in 0usize..5, flips in proptest::collection::vec((any::<u32>(), any::<u8>()), 1..6), cut in any::<u32>()) {
        let (kind, mut bytes) = samples().swap_remove(which);
        for (at, x) in flips {
            let i = at as usize % bytes.len();
            bytes[i] ^= x | 1;
        }
        if cut % 4 == 0 {
            bytes.truncate(cut as usize % (bytes.len() + 1));
        }
        let _ = read_all(kind, &bytes);
    }

    #[test]
    fn mutated_redo_log_never_panics_and_errors_name_a_place(flips in proptest::collection::vec((0u32..2, any::<u32>(), any::<u8>()), 1..8)) {
        let (geo, mut files) = redo_log_bytes();
        for (f, at, x) in flips {
            let file = &mut files[f as usize];
            let i = at as usize % file.len();
            file[i] ^= x | 1;
        }
        read_redo(geo, &files);
    }
}

#[test]
fn samples_read_clean() {
    for (kind, bytes) in samples() {
        assert!(read_all(kind, &bytes), "{kind}");
    }
    let (geo, files) = redo_log_bytes();
    assert_eq!(read_redo(geo, &files), 30);
}
