use super::*;
use crate::crash::{points, ALL};
use crate::memdisk::MemDisk;
use norr_signals::ckpt::Gci;
use norr_signals::Value;

const PART: u32 = 3;

fn small_geo() -> RedoGeometry {
    // 3 files x 100 pages of 512 bytes: wraps quickly, records span pages.
    RedoGeometry { files: 3, file_bytes: 100 * 512, page_bytes: 512 }
}

fn rec(i: u64, width: usize) -> RedoRecord {
    RedoRecord {
        op: if i.is_multiple_of(5) { RedoOp::Delete } else { RedoOp::Put },
        table: (i % 3) as u32,
        partition: (i % 2) as u32,
        values: vec![Value::UInt(i), Value::Bytes(vec![(i % 251) as u8; width])],
    }
}

struct Harness {
    disk: MemDisk,
    geo: RedoGeometry,
    part: RedoPart,
}

impl Harness {
    fn new(seed: u64, geo: RedoGeometry) -> Harness {
        let mut disk = MemDisk::new(seed);
        for f in 0..geo.files {
            disk.create(&file_path(PART, f), geo.file_bytes as usize);
        }
        Harness { disk, geo, part: RedoPart::create(PART, geo, 64 * geo.page_bytes as usize) }
    }

    /// Run IO until idle; returns a crash point if one fired.
    fn pump(&mut self) -> Option<&'static str> {
        while let Some(io) = self.part.poll_io() {
            match io {
                RedoIo::Write { io_id, file_no, offset, data } => {
                    assert_eq!(offset % self.geo.page_bytes as u64, 0);
                    self.disk.write(&file_path(PART, file_no), offset, &data);
                    self.part.on_io_done(io_id, Ok(())).unwrap();
                }
                RedoIo::Sync { io_id, file_no } => {
                    self.disk.sync(&file_path(PART, file_no));
                    self.part.on_io_done(io_id, Ok(())).unwrap();
                }
                RedoIo::Crash(p) => return Some(p),
            }
        }
        None
    }

    /// Read the log back as a restart would (to = `to`).
    fn recover(&self, from: Gci, to: Gci) -> Result<(Vec<LoggedRecord>, RedoRecovered), crate::FormatError> {
        self.recover_with(from, to, 0)
    }

    /// `recover`, looking ahead past the marker of `to` for up to
    /// `ahead_pages` pages.
    fn recover_with(
        &self,
        from: Gci,
        to: Gci,
        ahead_pages: u64,
    ) -> Result<(Vec<LoggedRecord>, RedoRecovered), crate::FormatError> {
        let firsts: Vec<(u32, Vec<u8>)> = first_page_reads(&self.geo)
            .iter()
            .map(|r| (r.file_no, self.disk.read(&file_path(PART, r.file_no), r.offset, r.len as usize)))
            .collect();
        let head = match choose_head_file(&self.geo, PART, &firsts)? {
            Some(f) => {
                let bytes = self.disk.read(&file_path(PART, f), 0, self.geo.file_bytes as usize);
                let whole = scan_head_file(&self.geo, PART, f, &bytes);
                assert_eq!(self.head_by_reads(f), whole, "bisection and the whole-file walk disagree");
                Some(whole?)
            }
            None => None,
        };
        let mut reader = RedoReader::new(self.geo, PART, head, from, to).with_lookahead(ahead_pages);
        let mut out = Vec::new();
        while let Some(r) = reader.next_read() {
            let bytes = self.disk.read(&file_path(PART, r.file_no), r.offset, r.len as usize);
            reader.feed(r, &bytes, &mut out)?;
        }
        Ok((out, reader.finish()?))
    }
}

#[test]
fn append_flush_read_back() {
    let mut h = Harness::new(1, small_geo());
    let mut expect = Vec::new();
    for g in 1..=5u64 {
        for i in 0..7u64 {
            let r = rec(g * 100 + i, (i * 37 % 700) as usize);
            h.part.append(g, std::slice::from_ref(&r)).unwrap();
            expect.push(LoggedRecord { gci: g, record: r });
        }
        assert!(!h.part.flush_up_to(g).unwrap());
        assert_eq!(h.pump(), None);
        assert_eq!(h.part.durable_gci(), g);
    }
    let (got, rec) = h.recover(1, 5).unwrap();
    assert_eq!(got, expect);
    assert_eq!(rec.max_gci_seen, 5);
    let (got, _) = h.recover(3, 4).unwrap();
    assert_eq!(got, expect.iter().filter(|r| (3..=4).contains(&r.gci)).cloned().collect::<Vec<_>>());
    // Asking for a GCI that never completed is refused, naming a file and offset.
    let e = h.recover(1, 6).unwrap_err();
    assert!(e.path.starts_with("redo/part-3/file-") && e.what.contains("GCI 6"), "{e}");
}

#[test]
fn full_log_refuses_and_release_frees_it_across_wraps() {
    let geo = small_geo();
    let mut h = Harness::new(2, geo);
    let mut g = 1u64;
    let mut full_seen = 0;
    let mut i = 0u64;
    let mut kept: Vec<LoggedRecord> = Vec::new();
    // Several laps: append until full, flush, "checkpoint" (release), go on.
    while h.part.stats().pages_written < geo.total_pages() * 4 {
        i += 1;
        let r = rec(i, 150);
        match h.part.append(g, std::slice::from_ref(&r)) {
            Ok(()) => kept.push(LoggedRecord { gci: g, record: r }),
            Err(AppendError::LogFull) => {
                full_seen += 1;
                assert!(h.part.fill_ratio() > 0.9, "{}", h.part.fill_ratio());
                h.part.flush_up_to(g).unwrap();
                assert_eq!(h.pump(), None);
                // Everything below g is checkpointed.
                h.part.release_before(g);
                g += 1;
                // The freed space becomes usable once a synced page records the tail.
                h.part.flush_up_to(g).unwrap();
                assert_eq!(h.pump(), None);
                g += 1;
                kept.retain(|r| r.gci >= g - 2);
            }
            Err(e) => panic!("{e}"),
        }
        if i.is_multiple_of(40) {
            h.part.flush_up_to(g).unwrap();
            assert_eq!(h.pump(), None);
            g += 1;
        }
    }
    assert!(full_seen >= 3, "the log filled {full_seen} times");
    h.part.flush_up_to(g).unwrap();
    assert_eq!(h.pump(), None);
    // Read back across the wrap: the records not released are all there.
    let from = kept.first().map_or(g, |r| r.gci);
    let (got, _) = h.recover(from, g).unwrap();
    assert_eq!(got, kept);
}

#[test]
fn buffer_bound_refuses_when_disk_is_behind() {
    let geo = small_geo();
    let mut part = RedoPart::create(PART, geo, 4 * geo.page_bytes as usize);
    let mut n = 0;
    let err = loop {
        match part.append(1, &[rec(n, 400)]) {
            Ok(()) => n += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(err, AppendError::BufferFull);
    assert!(n >= 3, "{n}");
}

/// Random work with crashes: after each crash the log recovers exactly the
/// records of every GCI reported durable, and the part resumes and goes on.
impl Harness {
    /// `scan_head_file_at` on file `f`, counting nothing: the restart's way.
    fn head_by_reads(&self, f: u32) -> Result<HeadScan, crate::FormatError> {
        let path = file_path(PART, f);
        let mut read =
            |offset: u64, len: u32| -> Result<Vec<u8>, ()> { Ok(self.disk.read(&path, offset, len as usize)) };
        scan_head_file_at(&self.geo, PART, f, &mut read).expect("memory reads do not fail")
    }
}

#[test]
fn the_head_found_by_bisection_is_the_head_the_whole_file_walk_finds() {
    // Files of 2,000 pages, far more than the window the bisection walks
    // (`HEAD_WINDOW_PAGES`), crashed at random moments of the IO: torn and
    // lost unsynced pages at the head, an older lap's pages after it.
    let geo = RedoGeometry { files: 2, file_bytes: 2_000 * 512, page_bytes: 512 };
    let (mut heads, mut reads) = (0u64, 0u64);
    for seed in 0..40u64 {
        let mut h = Harness::new(seed, geo);
        let mut x = seed.wrapping_add(7);
        let mut next = || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            x >> 33
        };
        let (mut g, mut durable) = (1u64, 0u64);
        for i in 0..(500 + next() % 12_000) {
            let _ = h.part.append(g, &[rec(i, (next() % 700) as usize)]);
            if next() % 25 == 0 {
                let _ = h.part.flush_up_to(g);
                g += 1;
            }
            for _ in 0..(next() % 3) {
                let Some(io) = h.part.poll_io() else { break };
                let d = match io {
                    RedoIo::Write { io_id, file_no, offset, data } => {
                        h.disk.write(&file_path(PART, file_no), offset, &data);
                        h.part.on_io_done(io_id, Ok(())).unwrap()
                    }
                    RedoIo::Sync { io_id, file_no } => {
                        h.disk.sync(&file_path(PART, file_no));
                        h.part.on_io_done(io_id, Ok(())).unwrap()
                    }
                    RedoIo::Crash(_) => unreachable!(),
                };
                durable = d.unwrap_or(durable);
            }
            if h.part.fill_ratio() > 0.6 && durable > 2 {
                h.part.release_before(durable - 1);
            }
        }
        h.disk.crash();
        let firsts: Vec<(u32, Vec<u8>)> = first_page_reads(&geo)
            .iter()
            .map(|r| (r.file_no, h.disk.read(&file_path(PART, r.file_no), r.offset, r.len as usize)))
            .collect();
        let Some(f) = choose_head_file(&geo, PART, &firsts).unwrap() else { continue };
        let whole = scan_head_file(&geo, PART, f, &h.disk.read(&file_path(PART, f), 0, geo.file_bytes as usize));
        let path = file_path(PART, f);
        let mut read = |offset: u64, len: u32| -> Result<Vec<u8>, ()> {
            reads += 1;
            Ok(h.disk.read(&path, offset, len as usize))
        };
        let by_reads = scan_head_file_at(&geo, PART, f, &mut read).unwrap();
        assert_eq!(by_reads, whole, "seed {seed}");
        assert!(whole.is_ok(), "seed {seed}: {whole:?}");
        heads += 1;
    }
    assert!(heads >= 30, "only {heads} of 40 crashes left a head file");
    // The first page, ~11 bisection pages and one window per head, not
    // 2,000 pages.
    assert!(reads <= heads * 14, "{reads} reads for {heads} heads");
}

#[test]
fn crashes_lose_nothing_durable() {
    for seed in 0..40u64 {
        let geo = small_geo();
        let mut h = Harness::new(seed, geo);
        let mut all: Vec<LoggedRecord> = Vec::new();
        let mut durable = 0;
        let mut g = 1;
        let mut i = 0u64;
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            x >> 33
        };
        for round in 0..6 {
            let steps = 50 + next() % 200;
            for _ in 0..steps {
                i += 1;
                let r = rec(i, (next() % 900) as usize);
                if h.part.append(g, std::slice::from_ref(&r)).is_ok() {
                    all.push(LoggedRecord { gci: g, record: r });
                }
                if next() % 20 == 0 {
                    let _ = h.part.flush_up_to(g);
                    g += 1;
                }
                if next() % 3 == 0 {
                    // Partial progress of the IO: at most a few steps.
                    for _ in 0..(next() % 4) {
                        let Some(io) = h.part.poll_io() else { break };
                        match io {
                            RedoIo::Write { io_id, file_no, offset, data } => {
                                h.disk.write(&file_path(PART, file_no), offset, &data);
                                if let Some(d) = h.part.on_io_done(io_id, Ok(())).unwrap() {
                                    durable = d;
                                }
                            }
                            RedoIo::Sync { io_id, file_no } => {
                                h.disk.sync(&file_path(PART, file_no));
                                if let Some(d) = h.part.on_io_done(io_id, Ok(())).unwrap() {
                                    durable = d;
                                }
                            }
                            RedoIo::Crash(_) => unreachable!(),
                        }
                    }
                }
                if h.part.fill_ratio() > 0.6 && durable > 2 {
                    h.part.release_before(durable - 1);
                    all.retain(|r| r.gci >= durable - 1);
                }
            }
            // Crash, then restart to the durable GCI.
            h.disk.crash();
            let from = all.first().map_or(durable, |r| r.gci).min(durable.max(1));
            let (got, recovered) =
                h.recover(from, durable).unwrap_or_else(|e| panic!("seed {seed} round {round}: {e}"));
            let expect: Vec<LoggedRecord> = all.iter().filter(|r| r.gci <= durable && r.gci >= from).cloned().collect();
            assert_eq!(got.len(), expect.len(), "seed {seed} round {round}");
            assert_eq!(got, expect, "seed {seed} round {round}");
            all.retain(|r| r.gci <= durable);
            // New GCIs above everything the log may hold.
            g = recovered.max_gci_seen.max(g) + 1;
            h.part = RedoPart::resume(PART, geo, 64 * geo.page_bytes as usize, recovered.resume);
            assert_eq!(h.pump(), None);
        }
    }
}

#[test]
fn corrupt_page_in_needed_range_is_an_error_naming_file_and_offset() {
    let geo = small_geo();
    let mut h = Harness::new(5, geo);
    for g in 1..=4u64 {
        for i in 0..10 {
            h.part.append(g, &[rec(g * 10 + i, 200)]).unwrap();
        }
        h.part.flush_up_to(g).unwrap();
        assert_eq!(h.pump(), None);
    }
    // Flip a bit in page 2 of file 0 (needed for GCI 4).
    h.disk.flip_bit(&file_path(PART, 0), 2 * 512 + 100, 3);
    let e = h.recover(1, 4).unwrap_err();
    assert_eq!((e.path.as_str(), e.offset), ("redo/part-3/file-0", 1024), "{e}");
    assert!(e.what.contains("checksum"), "{e}");
}

#[test]
fn torn_page_after_the_last_complete_gci_is_ignored() {
    let geo = small_geo();
    let mut h = Harness::new(6, geo);
    h.part.append(1, &[rec(1, 100)]).unwrap();
    h.part.flush_up_to(1).unwrap();
    assert_eq!(h.pump(), None);
    for i in 0..20 {
        h.part.append(2, &[rec(100 + i, 300)]).unwrap();
    }
    assert_eq!(h.pump(), None); // full pages written, not synced
    let (_, offset_page) = geo.position(h.part.head_seq() - 1);
    h.disk.flip_bit(&file_path(PART, 0), offset_page as usize + 70, 0);
    let (got, rec1) = h.recover(1, 1).unwrap();
    assert_eq!(got.len(), 1);
    assert!(rec1.resume.invalidate_through > rec1.resume.next_seq);
}

#[test]
fn every_redo_crash_point_recovers() {
    for &p in ALL.iter().filter(|p| p.starts_with("redo:")) {
        let geo = small_geo();
        let mut h = Harness::new(7, geo);
        let mut committed = Vec::new();
        for g in 1..=3u64 {
            let r = rec(g, 600);
            h.part.append(g, std::slice::from_ref(&r)).unwrap();
            committed.push(LoggedRecord { gci: g, record: r });
            h.part.flush_up_to(g).unwrap();
            assert_eq!(h.pump(), None);
        }
        // Restart once so the resume path (invalidation) runs too.
        h.disk.crash();
        let (_, recovered) = h.recover(1, 3).unwrap();
        h.part = RedoPart::resume(PART, geo, 1 << 20, recovered.resume);
        h.part.crash_points_mut().arm(p, 0).unwrap();
        let r = rec(4, 600);
        h.part.append(4, std::slice::from_ref(&r)).unwrap();
        h.part.flush_up_to(4).unwrap();
        let crashed = h.pump();
        assert_eq!(crashed, Some(p), "point {p} fired");
        let durable = h.part.durable_gci();
        assert_eq!(durable, 3, "{p}: nothing reported durable after the crash point");
        h.disk.crash();
        let (got, _) = h.recover(1, 3).unwrap_or_else(|e| panic!("{p}: {e}"));
        assert_eq!(got, committed, "{p}");
        let _ = points::REDO_AFTER_SYNC_BEFORE_CONF;
    }
}

/// A transaction tagged 6 commits before the GCP save of 5 (the GCP's
/// commit step precedes its save step). The node crashes before 6 is
/// complete and restarts to 5; later GCIs complete. A restart to one of
/// them must not find the record of 6: that GCI never completed.
#[test]
fn a_record_of_the_next_gci_never_lands_before_the_marker_of_the_one_saved() {
    let geo = small_geo();
    let mut h = Harness::new(1, geo);
    h.part.append(5, &[rec(1, 10)]).unwrap();
    h.part.append(6, &[rec(2, 10)]).unwrap();
    h.part.flush_up_to(5).unwrap();
    assert!(h.pump().is_none());
    let (got, r) = h.recover(1, 5).unwrap();
    assert_eq!(got.iter().map(|r| r.gci).collect::<Vec<_>>(), vec![5]);
    // Crash: the record of 6 was written (after the marker) or not; either
    // way GCIs after the restart are above it.
    h.part = RedoPart::resume(PART, geo, 64 * geo.page_bytes as usize, r.resume);
    h.part.append(7, &[rec(3, 10)]).unwrap();
    h.part.flush_up_to(7).unwrap();
    assert!(h.pump().is_none());
    let (got, _) = h.recover(1, 7).unwrap();
    assert_eq!(got.iter().map(|r| r.gci).collect::<Vec<_>>(), vec![5, 7], "GCI 6 never completed");
}

/// A new GCP master's save covers several GCIs at once: records held for
/// a GCI it covers go before its marker, those of the GCI after it follow.
#[test]
fn a_flush_covering_several_gcis_orders_the_held_records_around_its_marker() {
    let geo = small_geo();
    let mut h = Harness::new(2, geo);
    h.part.flush_up_to(4).unwrap();
    h.part.append(5, &[rec(1, 10)]).unwrap();
    h.part.append(7, &[rec(2, 10)]).unwrap();
    h.part.append(6, &[rec(3, 10)]).unwrap();
    h.part.flush_up_to(6).unwrap();
    assert!(h.pump().is_none());
    let (got, _) = h.recover(1, 6).unwrap();
    assert_eq!(
        got.iter().map(|r| (r.gci, r.record.clone())).collect::<Vec<_>>(),
        vec![(5, rec(1, 10)), (6, rec(3, 10))]
    );
    h.part.flush_up_to(7).unwrap();
    assert!(h.pump().is_none());
    let (got, _) = h.recover(1, 7).unwrap();
    assert_eq!(got.iter().map(|r| r.gci).collect::<Vec<_>>(), vec![5, 6, 7]);
}

/// A node restored to 5 whose log also holds the markers of 6 and 7 (its
/// system file missed their records): the look-ahead gives the records of
/// 6 and 7 and where to resume for each; records after the last marker
/// are not part of any GCI the log holds whole. Rolled forward to 6, the
/// log continues after the marker of 6, and a later restart reads 5, 6 and
/// what came after, never 7.
#[test]
fn the_look_ahead_gives_each_later_gci_the_log_holds_whole() {
    let geo = small_geo();
    let mut h = Harness::new(3, geo);
    for g in 5..=7u64 {
        h.part.append(g, &[rec(g, 300), rec(g + 100, 700)]).unwrap();
        h.part.flush_up_to(g).unwrap();
    }
    h.part.append(8, &[rec(8, 10)]).unwrap();
    assert!(h.pump().is_none());
    let (got, r) = h.recover_with(1, 5, 1000).unwrap();
    assert_eq!(got.iter().map(|r| r.gci).collect::<Vec<_>>(), vec![5, 5]);
    assert_eq!(r.ahead.iter().map(|r| r.gci).collect::<Vec<_>>(), vec![6, 6, 7, 7]);
    assert_eq!(r.ahead[0].record, rec(6, 300));
    assert_eq!(r.ahead_resumes.iter().map(|(g, _)| *g).collect::<Vec<_>>(), vec![6, 7]);
    assert!(r.max_gci_seen >= 7);
    // Without the look-ahead nothing after the marker of 5 is read.
    let (_, plain) = h.recover(1, 5).unwrap();
    assert!(plain.ahead.is_empty() && plain.ahead_resumes.is_empty());
    assert_eq!(plain.resume, r.resume);
    let base = RedoPart::resume(PART, geo, 64 * geo.page_bytes as usize, r.resume.clone());
    let at6 = r.ahead_resumes[0].1.clone();
    assert_eq!(at6.durable_gci, 6);
    h.part = base.resumed_at(at6);
    h.part.append(9, &[rec(9, 10)]).unwrap();
    h.part.flush_up_to(9).unwrap();
    assert!(h.pump().is_none());
    let (got, _) = h.recover(1, 9).unwrap();
    assert_eq!(got.iter().map(|r| r.gci).collect::<Vec<_>>(), vec![5, 5, 6, 6, 9]);
}

/// The look-ahead stops at a damaged page without an error: the GCIs after
/// it are not reachable, those before are.
#[test]
fn the_look_ahead_ends_quietly_at_a_damaged_page() {
    let geo = small_geo();
    let mut h = Harness::new(4, geo);
    for g in 5..=8u64 {
        h.part.append(g, &[rec(g, 400)]).unwrap();
        h.part.flush_up_to(g).unwrap();
    }
    assert!(h.pump().is_none());
    let (_, full) = h.recover_with(1, 5, 1000).unwrap();
    let seq7 = full.ahead_resumes.iter().find(|(g, _)| *g == 7).unwrap().1.marker_seq;
    let (file, offset) = geo.position(seq7);
    h.disk.write(&file_path(PART, file), offset + 100, &[0xAB; 8]);
    let (_, cut) = h.recover_with(1, 5, 1000).unwrap();
    assert_eq!(cut.ahead_resumes.iter().map(|(g, _)| *g).collect::<Vec<_>>(), vec![6]);
    assert!(cut.ahead.iter().all(|r| r.gci == 6));
}
