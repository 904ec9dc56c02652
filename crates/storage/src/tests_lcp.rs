//! Tests of row GCIs and the partial local checkpoint scan.

use super::tests::{bigint, get, put, table, varchar};
use super::*;
use norr_signals::schema::ColumnDef;
use norr_signals::value::ColumnType;
use norr_signals::ColumnSource;
use std::collections::BTreeMap;

const T: TableId = 7;

/// (id BIGINT pk, v VARCHAR(20), pad BINARY(250)): about 100 rows per page,
/// so a few thousand rows span many pages.
fn wide_table(partitions: u32) -> TableDef {
    table(
        T,
        vec![
            ColumnDef::new("id", bigint()).not_null(),
            ColumnDef::new("v", varchar(20)),
            ColumnDef::new("pad", ColumnType::Binary { len: 250 }),
        ],
        vec![0],
        partitions,
    )
}

fn row(id: i64, v: &str) -> Vec<Value> {
    vec![Value::Int(id), Value::str(v), Value::Bytes(vec![id as u8; 250])]
}

fn storage(partitions: u32) -> Storage {
    let mut s = Storage::new(1 << 30);
    s.create_table(&wide_table(partitions)).unwrap();
    s
}

/// Run a checkpoint scan to the end in batches of `batch`.
fn scan_all(s: &Storage, scan: &mut LcpScan, batch: usize) -> Vec<LcpRow> {
    let mut out = Vec::new();
    let mut calls = 0;
    while !s.lcp_next(scan, batch, &mut out).unwrap() {
        calls += 1;
        assert!(calls < 1_000_000, "checkpoint scan does not end");
    }
    out
}

fn ids(rows: &[LcpRow]) -> Vec<i64> {
    let mut v: Vec<i64> = rows.iter().map(|r| r.row[0].as_i64().unwrap()).collect();
    v.sort();
    v
}

#[test]
fn writes_tag_rows_with_the_commit_gci() {
    let mut s = storage(1);
    assert_eq!(s.commit_gci(), 0);
    s.set_commit_gci(5);
    let r = s.insert(T, 0, row(1, "a")).unwrap();
    assert_eq!(s.row_gci(T, 0, r), Some(5));
    s.set_commit_gci(9);
    s.update(T, 0, r, row(1, "b")).unwrap();
    assert_eq!(s.row_gci(T, 0, r), Some(9));
    s.set_commit_gci(11);
    let r2 = s.put(T, 0, row(1, "c")).unwrap();
    assert_eq!(r2, r, "put of an existing key updates in place");
    assert_eq!(s.row_gci(T, 0, r), Some(11));
    assert_eq!(s.read_row(T, 0, r)[1], Value::str("c"));
    let r3 = s.put(T, 0, row(2, "d")).unwrap();
    assert_eq!(s.row_gci(T, 0, r3), Some(11));
    assert_eq!(s.row_count(T), 2);
    // Nothing for rows, partitions or tables that do not exist.
    s.delete(T, 0, r3);
    assert_eq!(s.row_gci(T, 0, r3), None);
    assert_eq!(s.row_gci(T, 1, r), None);
    assert_eq!(s.row_gci(99, 0, r), None);
    // Counters since the last lcp_begin (none yet): 4 writes and a delete.
    let st = s.lcp_stats(T, 0).unwrap();
    assert_eq!(st.rows_changed, 5);
    assert_eq!(st.oldest_gci_written, Some(5));
    assert!(st.bytes_changed > 4 * 250);
    assert_eq!((st.rows, st.tombstones, st.chain), (1, 0, false));
    s.check_invariants();
}

#[test]
#[should_panic(expected = "does not fit in u32")]
fn a_commit_gci_above_u32_is_a_bug() {
    let mut s = storage(1);
    s.set_commit_gci(u32::MAX as u64 + 1);
}

#[test]
fn part_sets() {
    let w = PartSet::window(2046, 4);
    assert_eq!(w.iter().collect::<Vec<_>>(), vec![0, 1, 2046, 2047]);
    assert_eq!(w.len(), 4);
    assert_eq!(format!("{w:?}"), "PartSet[0-1,2046-2047]");
    assert!(PartSet::window(5, 5000).is_all());
    assert!(PartSet::window(4096 + 3, 1).contains(3));
    assert!(PartSet::empty().is_empty());
    assert!(!PartSet::all().contains(2048), "no part 2048");
    let mut p = PartSet::default();
    p.insert(7);
    assert!(p.contains(7) && !p.contains(8));
}

#[test]
fn first_checkpoint_is_full_and_later_ones_skip_unchanged_pages() {
    let mut s = storage(1);
    s.set_commit_gci(1);
    for i in 0..2000 {
        s.insert(T, 0, row(i, "x")).unwrap();
    }
    let pages = s.lcp_stats(T, 0).unwrap().pages;
    assert!(pages >= 15, "{pages} pages");
    // No chain yet: every part is written, whatever was asked.
    s.set_commit_gci(2);
    let (mut scan, tomb) = s.lcp_begin(T, 0, PartSet::empty(), 2).unwrap();
    assert!(tomb.is_empty());
    assert!(scan.full_parts().is_all());
    let rows = scan_all(&s, &mut scan, 100);
    assert_eq!(ids(&rows), (0..2000).collect::<Vec<_>>());
    assert_eq!(scan.pages_examined(), pages);
    assert_eq!(scan.pages_skipped(), 0);
    assert_eq!(scan.max_gci(), 1);
    for r in &rows {
        assert_eq!(r.gci, 1);
        let (_, rid) = get(&s, T, &r.row[..1]).unwrap();
        assert_eq!(Some(r.lcp_part), s.lcp_part_of(T, 0, rid));
    }
    // Change three rows on two pages at GCI 3 (rows 0, 1: page 0; the last
    // row: the last page).
    s.set_commit_gci(3);
    for id in [0, 1, 1999] {
        let (_, rid) = get(&s, T, &[Value::Int(id)]).unwrap();
        s.update(T, 0, rid, row(id, "changed")).unwrap();
    }
    let st = s.lcp_stats(T, 0).unwrap();
    assert_eq!((st.rows_changed, st.oldest_gci_written, st.chain), (3, Some(3), true));
    let (mut scan, _) = s.lcp_begin(T, 0, PartSet::empty(), 2).unwrap();
    assert!(scan.full_parts().is_empty(), "the chain exists now: partial");
    let rows = scan_all(&s, &mut scan, 1);
    assert_eq!(ids(&rows), vec![0, 1, 1999]);
    assert!(rows.iter().all(|r| r.gci == 3 && r.row[1] == Value::str("changed")));
    assert_eq!(scan.pages_examined(), 2, "only the two changed pages are read");
    assert_eq!(scan.pages_skipped(), pages - 2);
    assert_eq!(scan.rows_examined(), scan.rows_returned() + (rows_on_first_page(&s) - 2) + (last_page_rows(&s) - 1));
    // Page 0 (part 0) full, nothing changed since GCI 4: page 0 only.
    let (mut scan, _) = s.lcp_begin(T, 0, PartSet::window(0, 1), 4).unwrap();
    let rows = scan_all(&s, &mut scan, 7);
    assert_eq!(rows.len() as u64, rows_on_first_page(&s));
    assert!(rows.iter().all(|r| r.lcp_part == 0));
    assert_eq!((scan.pages_examined(), scan.pages_skipped()), (1, pages - 1));
    // All parts full: everything again.
    let (mut scan, _) = s.lcp_begin(T, 0, PartSet::all(), 4).unwrap();
    assert_eq!(scan_all(&s, &mut scan, 1000).len(), 2000);
    s.check_invariants();
}

fn rows_on_first_page(s: &Storage) -> u64 {
    let mut cur = s.scan_open(T, 0, None, None, false).unwrap();
    let mut out = Vec::new();
    while !s.scan_next(T, 0, &mut cur, None, 10_000, 10_000, &mut out).unwrap() {}
    out.iter().filter(|(r, _)| s.lcp_part_of(T, 0, *r) == Some(0)).count() as u64
}

fn last_page_rows(s: &Storage) -> u64 {
    let mut cur = s.scan_open(T, 0, None, None, false).unwrap();
    let mut out = Vec::new();
    while !s.scan_next(T, 0, &mut cur, None, 10_000, 10_000, &mut out).unwrap() {}
    let last = out.iter().map(|(r, _)| s.lcp_part_of(T, 0, *r).unwrap()).max().unwrap();
    out.iter().filter(|(r, _)| s.lcp_part_of(T, 0, *r) == Some(last)).count() as u64
}

#[test]
fn deletes_leave_tombstones_only_with_a_chain() {
    let mut s = storage(2);
    s.set_commit_gci(1);
    for i in 0..300 {
        put(&mut s, T, row(i, "x")).unwrap();
    }
    // No checkpoint yet: deletes cost nothing.
    let (p, r) = get(&s, T, &[Value::Int(0)]).unwrap();
    s.delete(T, p, r);
    assert_eq!(s.tombstone_count(), 0);
    let (_, t0) = s.lcp_begin(T, 0, PartSet::empty(), 0).unwrap();
    let (_, t1) = s.lcp_begin(T, 1, PartSet::empty(), 0).unwrap();
    assert!(t0.is_empty() && t1.is_empty());
    // Now each delete leaves its key, part and GCI.
    let used = s.memory().used_bytes;
    let mut want: BTreeMap<PartitionId, Vec<Tombstone>> = BTreeMap::new();
    for i in 1..=100 {
        s.set_commit_gci(10 + i as u64);
        let (p, r) = get(&s, T, &[Value::Int(i)]).unwrap();
        let lcp_part = s.lcp_part_of(T, p, r).unwrap();
        want.entry(p).or_default().push(Tombstone { lcp_part, gci: 10 + i as u64, key: vec![Value::Int(i)] });
        s.delete(T, p, r);
    }
    assert_eq!(s.tombstone_count(), 100);
    assert!(s.memory().used_bytes > used, "tombstones are charged");
    let st = s.lcp_stats(T, 0).unwrap();
    assert_eq!(st.tombstones, want[&0].len() as u64);
    assert!(st.tombstone_bytes >= 15 * st.tombstones && st.tombstone_bytes <= 24 * st.tombstones);
    s.check_invariants();
    for p in 0..2 {
        let (_, got) = s.lcp_begin(T, p, PartSet::empty(), 0).unwrap();
        assert_eq!(got, want[&p], "partition {p}");
    }
    assert_eq!(s.tombstone_count(), 0);
    assert!(s.memory().used_bytes <= used, "handed out: no longer charged");
    s.check_invariants();
    // lcp_reset ends the chain: no tombstones, and the next checkpoint is full.
    s.lcp_reset(T, 0).unwrap();
    let (p, r) = (0..300).filter_map(|i| get(&s, T, &[Value::Int(i)])).find(|(p, _)| *p == 0).unwrap();
    s.delete(T, p, r);
    assert_eq!(s.lcp_stats(T, 0).unwrap().tombstones, 0);
    let (scan, _) = s.lcp_begin(T, 0, PartSet::empty(), 1000).unwrap();
    assert!(scan.full_parts().is_all());
}

#[test]
fn tombstones_with_string_and_composite_keys_round_trip() {
    let mut s = Storage::new(1 << 26);
    let def = table(
        8,
        vec![
            ColumnDef::new("a", varchar(50)).not_null(),
            ColumnDef::new("b", ColumnType::Int { unsigned: true }).not_null(),
            ColumnDef::new("c", bigint()),
        ],
        vec![1, 0],
        1,
    );
    s.create_table(&def).unwrap();
    s.lcp_begin(8, 0, PartSet::empty(), 0).unwrap();
    let keys = [("Ab\0c", 3u64), ("", 0), ("é".repeat(20).as_str(), u32::MAX as u64)].map(|(a, b)| (a.to_string(), b));
    for (a, b) in &keys {
        s.insert(8, 0, vec![Value::str(a), Value::UInt(*b), Value::Null]).unwrap();
    }
    s.set_commit_gci(4);
    for (a, b) in &keys {
        let enc = s.encode_pk(8, &[Value::UInt(*b), Value::str(a)]).unwrap();
        let r = s.lookup(8, 0, &enc).unwrap();
        s.delete(8, 0, r);
    }
    let (_, got) = s.lcp_begin(8, 0, PartSet::empty(), 0).unwrap();
    let want: Vec<Vec<Value>> = keys.iter().map(|(a, b)| vec![Value::UInt(*b), Value::str(a)]).collect();
    assert_eq!(got.iter().map(|t| t.key.clone()).collect::<Vec<_>>(), want);
    assert!(got.iter().all(|t| t.gci == 4 && t.lcp_part == 0));
}

#[test]
fn a_scan_returns_every_unchanged_row_once_under_concurrent_writes() {
    let mut s = storage(1);
    s.set_commit_gci(1);
    for i in 0..3000 {
        s.insert(T, 0, row(i, "x")).unwrap();
    }
    s.lcp_begin(T, 0, PartSet::empty(), 0).unwrap();
    // Rows 0..1000 are never touched again; the others churn while the scan
    // runs: updates, deletes and inserts of new keys.
    let (mut scan, _) = s.lcp_begin(T, 0, PartSet::window(0, 3), 2).unwrap();
    let mut out = Vec::new();
    let mut next_key = 3000;
    let mut step = 0u64;
    let mut seen_ids = Vec::new();
    loop {
        out.clear();
        let done = s.lcp_next(&mut scan, 13, &mut out).unwrap();
        seen_ids.extend(out.iter().map(|r| (r.row[0].as_i64().unwrap(), r.lcp_part)));
        if done {
            break;
        }
        step += 1;
        s.set_commit_gci(2 + step / 10);
        let victim = 1000 + (step * 7919 % 2000) as i64;
        if let Some((_, r)) = get(&s, T, &[Value::Int(victim)]) {
            if step.is_multiple_of(3) {
                s.delete(T, 0, r);
            } else {
                s.update(T, 0, r, row(victim, "u")).unwrap();
            }
        }
        s.insert(T, 0, row(next_key, "n")).unwrap();
        next_key += 1;
    }
    // Unchanged rows outside the full parts are not written (GCI 1 < 2);
    // within them, each once. No (row, part) pair twice.
    let mut pairs = seen_ids.clone();
    pairs.sort();
    pairs.dedup();
    assert_eq!(pairs.len(), seen_ids.len(), "a row returned twice");
    let full = scan.full_parts().clone();
    for i in 0..1000 {
        let (_, r) = get(&s, T, &[Value::Int(i)]).unwrap();
        let part = s.lcp_part_of(T, 0, r).unwrap();
        let n = seen_ids.iter().filter(|(id, _)| *id == i).count();
        assert_eq!(n, usize::from(full.contains(part)), "row {i} in part {part}");
    }
    s.check_invariants();
}

#[test]
fn stale_scans_are_refused() {
    let mut s = storage(2);
    for i in 0..50 {
        put(&mut s, T, row(i, "x")).unwrap();
    }
    let mut out = Vec::new();
    // A newer lcp_begin on the partition voids the older scan.
    let (mut old, _) = s.lcp_begin(T, 0, PartSet::all(), 0).unwrap();
    let (mut new, _) = s.lcp_begin(T, 0, PartSet::all(), 0).unwrap();
    assert_eq!(s.lcp_next(&mut old, 10, &mut out).unwrap_err().code, ErrorCode::Internal);
    // A scan of the other partition is unaffected.
    let (mut other, _) = s.lcp_begin(T, 1, PartSet::all(), 0).unwrap();
    s.lcp_next(&mut new, 1, &mut out).unwrap();
    // Truncate ends the chains: both scans are void, the next is full again.
    s.truncate_table(T).unwrap();
    assert!(s.lcp_next(&mut new, 10, &mut out).is_err());
    assert!(s.lcp_next(&mut other, 10, &mut out).is_err());
    let (scan, _) = s.lcp_begin(T, 0, PartSet::empty(), 0).unwrap();
    assert!(scan.full_parts().is_all());
    // Dropped (and re-created under the same id): void.
    let (mut scan, _) = s.lcp_begin(T, 1, PartSet::empty(), 0).unwrap();
    s.drop_table(T).unwrap();
    assert_eq!(s.lcp_next(&mut scan, 10, &mut out).unwrap_err().code, ErrorCode::NoSuchTable);
    s.create_table(&wide_table(2)).unwrap();
    assert!(s.lcp_next(&mut scan, 10, &mut out).is_err());
    // Bad partition.
    assert_eq!(s.lcp_begin(T, 2, PartSet::all(), 0).unwrap_err().code, ErrorCode::BadPartition);
    assert_eq!(s.lcp_begin(99, 0, PartSet::all(), 0).unwrap_err().code, ErrorCode::NoSuchTable);
}

#[test]
fn an_alter_that_rebuilds_rows_starts_a_new_chain() {
    let mut s = storage(1);
    s.set_commit_gci(3);
    for i in 0..10 {
        s.insert(T, 0, row(i, "x")).unwrap();
    }
    let (mut scan, _) = s.lcp_begin(T, 0, PartSet::empty(), 0).unwrap();
    s.set_commit_gci(8);
    let mut def = wide_table(1);
    def.columns.push(ColumnDef::new("extra", bigint()));
    let mut sources: Vec<ColumnSource> = (0..3).map(ColumnSource::Old).collect();
    sources.push(ColumnSource::Value(Value::Int(1)));
    s.alter_prepare(T, &def, &sources).unwrap();
    s.alter_commit(T).unwrap();
    assert!(s.lcp_next(&mut scan, 10, &mut Vec::new()).is_err());
    let (mut scan, _) = s.lcp_begin(T, 0, PartSet::empty(), 100).unwrap();
    assert!(scan.full_parts().is_all());
    let rows = scan_all(&s, &mut scan, 100);
    assert_eq!(rows.len(), 10);
    assert!(rows.iter().all(|r| r.gci == 8 && r.row.len() == 4), "rebuilt rows are tagged when rebuilt");
}

#[test]
fn since_gci_above_a_write_since_the_last_checkpoint_is_refused() {
    let mut s = storage(1);
    s.lcp_begin(T, 0, PartSet::empty(), 0).unwrap();
    s.set_commit_gci(10);
    s.insert(T, 0, row(1, "a")).unwrap();
    // A late commit of an older GCI after the GCI switch.
    s.set_commit_gci(9);
    s.insert(T, 0, row(2, "b")).unwrap();
    let e = s.lcp_begin(T, 0, PartSet::empty(), 10).unwrap_err();
    assert_eq!(e.code, ErrorCode::Internal);
    assert!(e.message.contains("since_gci 10"), "{}", e.message);
    let (mut scan, _) = s.lcp_begin(T, 0, PartSet::empty(), 9).unwrap();
    assert_eq!(ids(&scan_all(&s, &mut scan, 10)), vec![1, 2]);
}

#[test]
fn an_abandoned_checkpoint_gives_back_its_tombstones_and_counters() {
    let mut s = storage(1);
    s.set_commit_gci(1);
    for i in 0..20 {
        s.insert(T, 0, row(i, "x")).unwrap();
    }
    // A first (forced full) checkpoint that fails: the next is full again.
    let (scan, t) = s.lcp_begin(T, 0, PartSet::empty(), 0).unwrap();
    s.lcp_abandon(scan, t).unwrap();
    assert!(!s.lcp_stats(T, 0).unwrap().chain);
    assert_eq!(s.lcp_stats(T, 0).unwrap().rows_changed, 20, "counters merged back");
    let (scan, _) = s.lcp_begin(T, 0, PartSet::empty(), 0).unwrap();
    assert!(scan.full_parts().is_all());
    // Tombstones of a failed partial checkpoint come back before newer ones.
    s.set_commit_gci(2);
    let del = |s: &mut Storage, id: i64| {
        let (_, r) = get(s, T, &[Value::Int(id)]).unwrap();
        s.delete(T, 0, r);
    };
    del(&mut s, 1);
    del(&mut s, 2);
    let (scan, t) = s.lcp_begin(T, 0, PartSet::empty(), 1).unwrap();
    assert_eq!(t.len(), 2);
    s.set_commit_gci(3);
    del(&mut s, 3);
    let used = s.memory().used_bytes;
    s.lcp_abandon(scan, t).unwrap();
    assert!(s.memory().used_bytes >= used);
    s.check_invariants();
    let (scan, t) = s.lcp_begin(T, 0, PartSet::empty(), 1).unwrap();
    assert!(!scan.full_parts().is_all());
    assert_eq!(t.iter().map(|t| (t.key[0].as_i64().unwrap(), t.gci)).collect::<Vec<_>>(), vec![(1, 2), (2, 2), (3, 3)]);
    // Giving back a scan that a newer one replaced is a caller bug.
    let (newer, _) = s.lcp_begin(T, 0, PartSet::empty(), 1).unwrap();
    assert!(s.lcp_abandon(scan, t).is_err());
    // After a truncate there is nothing to give back to: accepted, dropped.
    s.truncate_table(T).unwrap();
    s.lcp_abandon(newer, Vec::new()).unwrap();
    s.check_invariants();
}
