//! Tests of replica resynchronisation (sync marks, copy scan) and partition
//! checksums.

use super::tests::{bigint, get, index, put, table, varchar};
use super::*;
use norr_signals::schema::{ColumnDef, IndexKind};
use std::collections::BTreeMap;

const T: TableId = 4;
const UIX: IndexId = 1;

fn def() -> TableDef {
    let mut d = table(
        T,
        vec![
            ColumnDef::new("id", bigint()).not_null(),
            ColumnDef::new("u", varchar(20)),
            ColumnDef::new("n", bigint()),
        ],
        vec![0],
        3,
    );
    d.indexes = vec![index(UIX, "u", vec![1], true, IndexKind::Ordered)];
    d
}

fn row(id: i64, n: i64) -> Vec<Value> {
    let u = if id % 4 == 0 { Value::Null } else { Value::str(&format!("u{id}")) };
    vec![Value::Int(id), u, Value::Int(n)]
}

fn storage() -> Storage {
    let mut s = Storage::new(1 << 28);
    s.create_table(&def()).unwrap();
    s
}

fn ids(s: &Storage) -> Vec<i64> {
    let mut v = Vec::new();
    for p in 0..3 {
        let mut cur = s.scan_open(T, p, None, None, false).unwrap();
        let mut out = Vec::new();
        while !s.scan_next(T, p, &mut cur, None, 100, 100, &mut out).unwrap() {}
        v.extend(out.iter().map(|(_, r)| r[0].as_i64().unwrap()));
    }
    v.sort();
    v
}

fn checksums(s: &Storage) -> Vec<(u64, u64)> {
    (0..3).map(|p| s.partition_checksum(T, p).unwrap()).collect()
}

#[test]
fn sync_end_deletes_exactly_the_unconfirmed_rows() {
    let mut s = storage();
    for i in 0..600 {
        put(&mut s, T, row(i, i)).unwrap();
    }
    for p in 0..3 {
        s.lcp_begin(T, p, PartSet::all(), 0).unwrap();
        s.sync_begin(T, p).unwrap();
        assert!(s.is_syncing(T, p));
    }
    s.check_invariants();
    s.set_commit_gci(7);
    let mut want: Vec<i64> = Vec::new();
    for i in 0..600i64 {
        let pk = [Value::Int(i)];
        let p = s.partition_of_pk(T, &pk).unwrap();
        match i % 6 {
            // Confirmed by key.
            0 | 1 => {
                assert!(s.sync_confirm(T, p, &pk).unwrap());
                want.push(i);
            }
            // Written meanwhile (update, put): confirmed by the write.
            2 => {
                let (_, r) = get(&s, T, &pk).unwrap();
                s.update(T, p, r, row(i, -i)).unwrap();
                want.push(i);
            }
            3 => {
                s.put(T, p, row(i, -i)).unwrap();
                want.push(i);
            }
            // Deleted meanwhile, then inserted again (a new slot): confirmed.
            4 if i % 12 == 4 => {
                let (_, r) = get(&s, T, &pk).unwrap();
                s.delete(T, p, r);
                put(&mut s, T, row(i, 0)).unwrap();
                want.push(i);
            }
            // Never confirmed: the live replica no longer has them.
            _ => {}
        }
    }
    // New rows inserted during the sync are confirmed too.
    for i in 1000..1010 {
        put(&mut s, T, row(i, 0)).unwrap();
        want.push(i);
    }
    // Absent keys are reported, not confirmed.
    assert!(!s.sync_confirm(T, 0, &[Value::Int(5000)]).unwrap());
    assert!(s.sync_confirm(T, 0, &[Value::str("not a number")]).is_err());
    s.check_invariants();
    let before = s.row_count(T);
    let mut deleted = 0;
    for p in 0..3 {
        deleted += s.sync_end(T, p).unwrap();
        assert!(!s.is_syncing(T, p));
    }
    want.sort();
    assert_eq!(deleted, before - want.len() as u64);
    assert_eq!(ids(&s), want);
    // Unique index and tombstones followed the deletes.
    assert!(s.lookup_unique(T, UIX, &[Value::str("u5")]).unwrap().is_none());
    assert!(s.lookup_unique(T, UIX, &[Value::str("u1")]).unwrap().is_some());
    assert!(s.tombstone_count() >= deleted);
    s.check_invariants();
    // Not tracking (any more): errors.
    assert_eq!(s.sync_end(T, 0).unwrap_err().code, ErrorCode::Internal);
    assert!(s.sync_confirm(T, 0, &[Value::Int(0)]).is_err());
    assert_eq!(s.sync_begin(99, 0).unwrap_err().code, ErrorCode::NoSuchTable);
    assert_eq!(s.sync_begin(T, 3).unwrap_err().code, ErrorCode::BadPartition);
}

#[test]
fn a_restarting_node_catches_up_from_a_live_replica() {
    // The live node and a restarting one that has its state as of GCI 5.
    let mut live = storage();
    for g in 1..=5u64 {
        live.set_commit_gci(g);
        for i in 0..200 {
            let id = (g as i64 - 1) * 200 + i;
            put(&mut live, T, row(id, id)).unwrap();
        }
    }
    let mut node = storage();
    node.restore_begin(T).unwrap();
    for p in 0..3 {
        let (mut scan, _) = live.lcp_begin(T, p, PartSet::all(), 0).unwrap();
        let mut rows = Vec::new();
        while !live.lcp_next(&mut scan, 64, &mut rows).unwrap() {}
        for r in rows {
            node.restore_put(T, p, r.lcp_part, r.row, r.gci).unwrap();
        }
    }
    node.restore_finish(T).unwrap();
    assert_eq!(checksums(&node), checksums(&live));
    // While it was down: inserts, updates and deletes at GCIs 6..=9.
    for g in 6..=9u64 {
        live.set_commit_gci(g);
        for i in 0..40i64 {
            let id = (i * 37 + g as i64 * 11) % 1000;
            let pk = [Value::Int(id)];
            let p = live.partition_of_pk(T, &pk).unwrap();
            match (get(&live, T, &pk), i % 3) {
                (Some((_, r)), 0) => live.delete(T, p, r),
                (Some((_, r)), _) => live.update(T, p, r, row(id, id * 100 + g as i64)).unwrap(),
                (None, _) => {
                    live.insert(T, p, row(id, -1)).unwrap();
                }
            }
        }
        put(&mut live, T, row(2000 + g as i64, 0)).unwrap();
    }
    assert_ne!(checksums(&node), checksums(&live));
    // Copy: rows after GCI 5 in full, the rest as keys; then delete what was
    // not sent.
    let (mut full, mut keys) = (0, 0);
    for p in 0..3 {
        node.sync_begin(T, p).unwrap();
        let mut cur = live.scan_open(T, p, None, None, false).unwrap();
        loop {
            let mut out = Vec::new();
            let done = live.copy_scan_next(T, p, &mut cur, 5, 17, &mut out).unwrap();
            assert!(out.len() <= 17);
            for c in out {
                match c {
                    CopyRow::Full { gci, row } => {
                        assert!(gci > 5);
                        node.set_commit_gci(gci);
                        node.put(T, p, row).unwrap();
                        full += 1;
                    }
                    CopyRow::Key { key } => {
                        assert_eq!(key.len(), 1);
                        assert!(node.sync_confirm(T, p, &key).unwrap(), "the node has every row up to GCI 5");
                        keys += 1;
                    }
                }
            }
            if done {
                break;
            }
        }
        node.sync_end(T, p).unwrap();
    }
    assert!(full >= 50 && keys >= 700, "{full} full rows, {keys} keys");
    assert_eq!(full + keys, live.row_count(T));
    assert_eq!(ids(&node), ids(&live));
    assert_eq!(checksums(&node), checksums(&live));
    node.check_invariants();
    // A copy scan needs a full-scan cursor.
    let mut ord = live.scan_open(T, 0, Some(UIX), None, false).unwrap();
    assert!(live.copy_scan_next(T, 0, &mut ord, 0, 10, &mut Vec::new()).is_err());
}

#[test]
fn checksums_ignore_order_and_see_every_value() {
    let rows: Vec<Vec<Value>> = (0..500).map(|i| row(i, i * 3)).collect();
    let mut a = storage();
    for r in &rows {
        put(&mut a, T, r.clone()).unwrap();
    }
    // Reverse order, with churn so that row ids and var chunks differ, and
    // other GCIs.
    let mut b = storage();
    b.set_commit_gci(9);
    for r in rows.iter().rev() {
        put(&mut b, T, vec![r[0].clone(), Value::Null, Value::Int(0)]).unwrap();
    }
    for r in rows.iter().rev() {
        let (p, rid) = get(&b, T, &r[..1]).unwrap();
        b.delete(T, p, rid);
        put(&mut b, T, r.clone()).unwrap();
    }
    assert_eq!(checksums(&a), checksums(&b));
    let total: u64 = checksums(&a).iter().map(|c| c.0).sum();
    assert_eq!(total, 500);
    // One value differs (a NULL, a var value, the case of a string): the
    // checksum of that partition differs.
    let model: BTreeMap<i64, Vec<Value>> = rows.iter().map(|r| (r[0].as_i64().unwrap(), r.clone())).collect();
    for (id, change) in [(7, 2usize), (9, 1), (13, 1)] {
        let mut c = storage();
        for r in model.values() {
            put(&mut c, T, r.clone()).unwrap();
        }
        let (p, rid) = get(&c, T, &[Value::Int(id)]).unwrap();
        let mut r = model[&id].clone();
        r[change] = match (id, change) {
            (7, _) => Value::Null,
            (9, _) => Value::str("something else"),
            _ => Value::str("U13"),
        };
        c.update(T, p, rid, r).unwrap();
        let (ca, cc) = (checksums(&a), checksums(&c));
        assert_eq!(ca[p as usize].0, cc[p as usize].0);
        assert_ne!(ca[p as usize].1, cc[p as usize].1, "row {id} column {change}");
        for q in (0..3).filter(|q| *q != p as usize) {
            assert_eq!(ca[q], cc[q]);
        }
    }
    // A missing row changes the count and the sum.
    let (p, rid) = get(&b, T, &[Value::Int(3)]).unwrap();
    b.delete(T, p, rid);
    assert_ne!(checksums(&a)[p as usize], checksums(&b)[p as usize]);
    assert_eq!(a.partition_checksum(T, 9).unwrap_err().code, ErrorCode::BadPartition);
    assert_eq!(storage().partition_checksum(T, 0).unwrap(), (0, 0));
}

#[test]
fn inserts_during_a_resync_that_take_new_pages_stay_within_their_estimate() {
    // sync_begin sizes the marks for the pages the partition has; rows
    // inserted meanwhile (writes reaching the restarting node through the
    // chain) fill new pages, and the first mark on each grows the bitmap.
    // The insert's estimate covers that growth: its debug assertion
    // (`delta <= need`) failed in the real-process chaos test with "insert
    // charged 2216 > estimated 2113", and fails here without the bitmap's
    // share in the estimate.
    let mut s = storage();
    for i in 0..50 {
        put(&mut s, T, row(i, i)).unwrap();
    }
    for p in 0..3 {
        s.sync_begin(T, p).unwrap();
    }
    for i in 50..20_000 {
        put(&mut s, T, row(i, i)).unwrap();
    }
    assert_eq!(ids(&s).len(), 20_000);
    for p in 0..3 {
        s.sync_end(T, p).unwrap();
    }
    // The 50 rows from before the resync were neither confirmed nor
    // written: sync_end deletes them; the rows written during it stay.
    assert_eq!(ids(&s), (50..20_000).collect::<Vec<i64>>());
}
