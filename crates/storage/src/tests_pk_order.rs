//! The primary-key order (`pk_order`): scans of it return exactly what the
//! same scans of an ordinary B-tree ordered index on the same columns return,
//! through random inserts, updates and deletes; memory per row.

use super::tests::{get, index, put, table, varchar};
use super::*;
use norr_signals::ops::Bound;
use norr_signals::schema::{ColumnDef, IndexKind};
use norr_signals::value::ColumnType;

const T: TableId = 1;
/// The PkOrder index (plain ordered index on the pk).
const PK: IndexId = 1;
/// The same columns as a unique ordered index: kept in a BTreeMap.
const BT: IndexId = 2;

/// Composite pk (a INT, s VARCHAR(8)), a payload column.
fn setup(partitions: u32) -> Storage {
    let mut s = Storage::new(64 << 20);
    let mut def = table(
        T,
        vec![
            ColumnDef::new("a", ColumnType::Int { unsigned: false }).not_null(),
            ColumnDef::new("s", varchar(8)).not_null(),
            ColumnDef::new("v", ColumnType::Int { unsigned: false }),
        ],
        vec![0, 1],
        partitions,
    );
    def.indexes.push(index(PK, "PRIMARY", vec![0, 1], false, IndexKind::Ordered));
    def.indexes.push(index(BT, "pk_copy", vec![0, 1], true, IndexKind::Ordered));
    s.create_table(&def).unwrap();
    s
}

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn key(rng: &mut Rng) -> Vec<Value> {
    let strs = ["", "a", "B", "bb", "c", "zz"];
    vec![Value::Int(rng.below(40) as i64 - 10), Value::str(strs[rng.below(6) as usize])]
}

fn bound(rng: &mut Rng) -> Bound {
    let k = key(rng);
    let vals = match rng.below(3) {
        0 => Vec::new(),
        1 => k[..1].to_vec(),
        _ => k,
    };
    Bound { values: vals, inclusive: rng.below(2) == 0 }
}

fn drain(s: &Storage, part: PartitionId, cur: &mut ScanCursor, batch: usize, examine: usize) -> Vec<Vec<Value>> {
    let mut rows = Vec::new();
    let mut out = Vec::new();
    loop {
        out.clear();
        let done = s.scan_next(T, part, cur, None, batch, examine, &mut out).unwrap();
        assert!(out.len() <= batch);
        rows.extend(out.drain(..).map(|(_, r)| r));
        if done {
            return rows;
        }
    }
}

/// Drain with `scan_next_rows`: the rows (only `cols` decoded) and their keys.
fn drain_rows(
    s: &Storage,
    part: PartitionId,
    cur: &mut ScanCursor,
    batch: usize,
    cols: Option<&[bool]>,
    projection: Option<&[ColumnId]>,
) -> (Vec<Vec<Value>>, Vec<Vec<u8>>) {
    let step = ScanStep { filter: None, cols, projection, max_rows: batch, examine_limit: batch + 3, keys: true };
    let (mut rows, mut keys) = (Vec::new(), Vec::new());
    loop {
        let mut out = ScanBatch::default();
        let done = s.scan_next_rows(T, part, cur, &step, &mut out).unwrap();
        assert_eq!(out.rows.len(), out.keys.len(), "one key per row");
        assert_eq!(out.rows.len(), out.ids.len(), "one row id per row");
        keys.extend(out.keys.iter().map(|k| k.to_vec()));
        rows.extend(out.rows);
        if done {
            return (rows, keys);
        }
    }
}

#[test]
fn pk_order_scans_match_a_btree_index() {
    for seed in 1..4u64 {
        let mut s = setup(3);
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        for step in 0..3000 {
            let k = key(&mut rng);
            match (get(&s, T, &k), rng.below(4)) {
                (None, _) => {
                    let mut r = k.clone();
                    r.push(Value::Int(step));
                    put(&mut s, T, r).unwrap();
                }
                (Some((p, rid)), 0) => s.delete(T, p, rid),
                (Some((p, rid)), _) => {
                    let mut r = k.clone();
                    r.push(Value::Int(-step));
                    s.update(T, p, rid, r).unwrap();
                }
            }
            if step % 500 == 0 {
                s.check_invariants();
            }
        }
        s.check_invariants();
        for _ in 0..200 {
            let range = ScanRange { low: bound(&mut rng), high: bound(&mut rng) };
            let desc = rng.below(2) == 0;
            let part = rng.below(3) as PartitionId;
            let batch = 1 + rng.below(20) as usize;
            let examine = 1 + rng.below(30) as usize;
            let mut a = s.scan_open(T, part, Some(PK), Some(&range), desc).unwrap();
            let mut b = s.scan_open(T, part, Some(BT), Some(&range), desc).unwrap();
            let got = drain(&s, part, &mut a, batch, examine);
            let want = drain(&s, part, &mut b, batch, examine);
            assert_eq!(got, want, "seed {seed}, range {range:?}, desc {desc}");
            // The merge key TC sees is the same too.
            for r in &got {
                assert!(!s.ordered_key(T, PK, r).is_empty());
                assert_eq!(s.ordered_key(T, PK, r).len(), s.ordered_key(T, BT, r).len());
            }
            // Decoding only some columns: the same rows with the others NULL,
            // and the keys storage hands out are the rows' ordered keys.
            let mask = [false, rng.below(2) == 0, true];
            for ix in [PK, BT] {
                let mut c = s.scan_open(T, part, Some(ix), Some(&range), desc).unwrap();
                let (rows, keys) = drain_rows(&s, part, &mut c, batch, Some(&mask), None);
                assert_eq!(rows.len(), got.len());
                for ((r, k), full) in rows.iter().zip(&keys).zip(&got) {
                    assert_eq!(*k, s.ordered_key(T, ix, full), "seed {seed}, index {ix}");
                    let masked: Vec<Value> =
                        full.iter().zip(mask).map(|(v, m)| if m { v.clone() } else { Value::Null }).collect();
                    assert_eq!(*r, masked);
                }
                // Projected: the same rows as the projected columns, same keys.
                let mut c = s.scan_open(T, part, Some(ix), Some(&range), desc).unwrap();
                let (rows, pkeys) = drain_rows(&s, part, &mut c, batch, Some(&[true; 3]), Some(&[2, 1, 2]));
                let want: Vec<Vec<Value>> =
                    got.iter().map(|r| vec![r[2].clone(), r[1].clone(), r[2].clone()]).collect();
                assert_eq!(rows, want, "seed {seed}, index {ix}");
                assert_eq!(pkeys, keys);
            }
        }
    }
}

#[test]
fn pk_order_cursor_survives_changes_between_batches() {
    let mut s = setup(1);
    for a in 0..300 {
        put(&mut s, T, vec![Value::Int(a), Value::str("k"), Value::Int(a)]).unwrap();
    }
    for desc in [false, true] {
        let mut cur = s.scan_open(T, 0, Some(PK), None, desc).unwrap();
        let mut seen = Vec::new();
        let mut out = Vec::new();
        let mut next_new = 1000;
        let (mut inserted, mut deleted) = (Vec::new(), Vec::new());
        loop {
            out.clear();
            let done = s.scan_next(T, 0, &mut cur, None, 7, 100, &mut out).unwrap();
            seen.extend(out.iter().map(|(_, r)| r[0].as_i64().unwrap()));
            if done {
                break;
            }
            // Delete a row ahead of the cursor, insert one behind and one ahead.
            let last = *seen.last().unwrap();
            let ahead = if desc { last - 3 } else { last + 3 };
            if let Some((p, rid)) = get(&s, T, &[Value::Int(ahead), Value::str("k")]) {
                s.delete(T, p, rid);
                deleted.push(ahead);
            }
            let behind = if desc { next_new } else { -next_new };
            put(&mut s, T, vec![Value::Int(behind), Value::str("k"), Value::Int(0)]).unwrap();
            inserted.push(behind);
            next_new += 1;
        }
        let mut sorted = seen.clone();
        sorted.sort();
        if desc {
            sorted.reverse();
        }
        sorted.dedup();
        assert_eq!(seen, sorted, "in order, no row twice (desc {desc})");
        assert!(!deleted.is_empty());
        assert!(!seen.iter().any(|a| inserted.contains(a)), "rows inserted behind the cursor are not returned");
        assert!(!seen.iter().any(|a| deleted.contains(a)), "rows deleted ahead of the cursor are not returned");
        s.check_invariants();
    }
}

#[test]
fn pk_order_is_created_and_dropped_on_existing_rows() {
    let mut s = Storage::new(64 << 20);
    let def = table(
        T,
        vec![ColumnDef::new("id", ColumnType::BigInt { unsigned: false }).not_null(), ColumnDef::new("c", varchar(4))],
        vec![0],
        2,
    );
    s.create_table(&def).unwrap();
    for i in 0..1000 {
        put(&mut s, T, vec![Value::Int(i * 3 % 1000), Value::Null]).unwrap();
    }
    let before = s.memory().used_bytes;
    s.create_index(T, &index(PK, "PRIMARY", vec![0], false, IndexKind::Ordered)).unwrap();
    s.check_invariants();
    let added = s.memory().used_bytes - before;
    assert!(added > 0 && added < 12 * 1000, "{added} bytes for 1000 rows");
    let range = ScanRange { low: Bound::inclusive(vec![Value::Int(10)]), high: Bound::exclusive(vec![Value::Int(20)]) };
    let mut ids = Vec::new();
    for p in 0..2 {
        let mut cur = s.scan_open(T, p, Some(PK), Some(&range), false).unwrap();
        ids.extend(drain(&s, p, &mut cur, 4, 4).iter().map(|r| r[0].as_i64().unwrap()));
    }
    ids.sort();
    assert_eq!(ids, (10..20).collect::<Vec<_>>());
    s.drop_index(T, PK).unwrap();
    s.check_invariants();
    assert_eq!(s.memory().used_bytes, before);
}

/// Enough rows for several pk-order leaves (seeks pick the leaf by its
/// fence), inserted out of order and thinned out: range scans both ways
/// still match the B-tree copy of the index.
#[test]
fn pk_order_scans_over_many_leaves_match_a_btree_index() {
    let mut s = setup(1);
    let n = 3000i64;
    for i in 0..n {
        let a = i * 7919 % n;
        put(&mut s, T, vec![Value::Int(a), Value::str(if a % 2 == 0 { "a" } else { "B" }), Value::Int(i)]).unwrap();
    }
    for a in (0..n).filter(|a| a % 5 == 1 || (1000..1600).contains(a)) {
        let k = [Value::Int(a), Value::str(if a % 2 == 0 { "a" } else { "B" })];
        let (p, rid) = get(&s, T, &k).unwrap();
        s.delete(T, p, rid);
    }
    s.check_invariants();
    let mut rng = Rng(77);
    for _ in 0..300 {
        let v = |rng: &mut Rng| Value::Int(rng.below(n as u64 + 20) as i64 - 10);
        let range = ScanRange {
            low: Bound { values: vec![v(&mut rng)], inclusive: rng.below(2) == 0 },
            high: Bound { values: vec![v(&mut rng)], inclusive: rng.below(2) == 0 },
        };
        let desc = rng.below(2) == 0;
        let batch = 1 + rng.below(200) as usize;
        let mut a = s.scan_open(T, 0, Some(PK), Some(&range), desc).unwrap();
        let mut b = s.scan_open(T, 0, Some(BT), Some(&range), desc).unwrap();
        let got = drain(&s, 0, &mut a, batch, batch + 5);
        assert_eq!(got, drain(&s, 0, &mut b, batch, batch + 5), "range {range:?}, desc {desc}");
    }
}

/// A one-integer pk, where pk-order scans compare rows with the bounds by
/// their integer instead of their encoded key: for signed and unsigned
/// columns of several widths, over several leaves, the scans return what
/// the B-tree copy returns, at the stored keys themselves (inclusive and
/// exclusive), between them, at the column's edges, beyond its range (the
/// infinity markers), with inexact numbers, empty and reversed ranges, both
/// directions and several batch sizes.
#[test]
fn one_integer_pk_scans_match_a_btree_index() {
    let types = [
        ColumnType::Int { unsigned: false },
        ColumnType::BigInt { unsigned: true },
        ColumnType::SmallInt { unsigned: false },
        ColumnType::TinyInt { unsigned: true },
    ];
    for ty in types {
        let mut s = Storage::new(64 << 20);
        let mut def = table(
            T,
            vec![ColumnDef::new("id", ty.clone()).not_null(), ColumnDef::new("v", ColumnType::Int { unsigned: false })],
            vec![0],
            1,
        );
        def.indexes.push(index(PK, "PRIMARY", vec![0], false, IndexKind::Ordered));
        def.indexes.push(index(BT, "pk_copy", vec![0], true, IndexKind::Ordered));
        s.create_table(&def).unwrap();
        let (lo, hi) = ty.int_range().expect("integer type");
        let unsigned = ty.is_unsigned_int();
        let val = |x: i128| if unsigned { Value::UInt(x as u64) } else { Value::Int(x as i64) };
        // Keys: the column's edges and, for the wide types, more than one
        // leaf's worth of values around zero and around the edges (the
        // 1-byte column holds what it can).
        let mut keys: Vec<i128> = vec![lo, lo + 1, hi - 1, hi];
        for i in 0..1200i128 {
            keys.push((i * 37 % 1200 - if unsigned { 0 } else { 600 }).clamp(lo, hi));
            keys.push((hi - i * 3).max(lo));
        }
        keys.sort();
        keys.dedup();
        for (i, k) in keys.iter().enumerate() {
            put(&mut s, T, vec![val(*k), Value::Int(i as i64)]).unwrap();
        }
        for k in keys.iter().step_by(3) {
            let (p, rid) = get(&s, T, &[val(*k)]).unwrap();
            s.delete(T, p, rid);
        }
        s.check_invariants();
        // Bound values: every kept and deleted key's neighbourhood at the
        // edges, values outside the column's range, inexact numbers.
        let mut vals: Vec<Value> = vec![Value::Int(i64::MIN), Value::UInt(u64::MAX), Value::Int(-1), Value::Int(0)];
        for k in [lo, lo + 1, lo + 2, -1, 0, 1, 2, 3, 599, 600, hi - 3, hi - 1, hi] {
            if (lo..=hi).contains(&k) {
                vals.push(val(k));
            }
            vals.push(Value::Double(k as f64 + 0.5));
        }
        vals.push(Value::Double(1e30));
        vals.push(Value::Double(-1e30));
        let mut rng = Rng(0x5eed ^ lo as u64);
        for i in 0..400 {
            let pick = |rng: &mut Rng| vals[rng.below(vals.len() as u64) as usize].clone();
            let side = |rng: &mut Rng| match rng.below(8) {
                0 => Bound { values: Vec::new(), inclusive: true },
                n => Bound { values: vec![pick(rng)], inclusive: n % 2 == 0 },
            };
            let range = ScanRange { low: side(&mut rng), high: side(&mut rng) };
            let desc = i % 2 == 0;
            let batch = [1usize, 3, 50, 2000][rng.below(4) as usize];
            let mut a = s.scan_open(T, 0, Some(PK), Some(&range), desc).unwrap();
            let mut b = s.scan_open(T, 0, Some(BT), Some(&range), desc).unwrap();
            let got = drain_rows(&s, 0, &mut a, batch, None, None);
            assert_eq!(got, drain_rows(&s, 0, &mut b, batch, None, None), "{ty:?} range {range:?}, desc {desc}");
        }
    }
}
