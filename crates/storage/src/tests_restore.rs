//! Restore tests: chains of partial checkpoints (rotating full parts, changed
//! rows, tombstones) restored into a fresh `Storage`, with and without REDO
//! replay, fuzzy scans and restarts that continue the chain; index rebuild;
//! restore-mode errors.

use super::tests::{bigint, index, table, varchar};
use super::*;
use norr_signals::schema::{ColumnDef, IndexKind};
use norr_signals::value::ColumnType;
use std::collections::BTreeMap;

const T: TableId = 9;
const UIX: IndexId = 1;
const NIX: IndexId = 2;
const PRIMARY: IndexId = 3;
const PARTS: u32 = 2;
const KEYS: u64 = 3000;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// (id BIGINT pk, u VARCHAR(20) unique, n INT ordered, pad BINARY(250),
/// v VARCHAR(200)), with the PRIMARY ordered index: about 100 rows per page.
fn def() -> TableDef {
    let mut d = table(
        T,
        vec![
            ColumnDef::new("id", bigint()).not_null(),
            ColumnDef::new("u", varchar(20)),
            ColumnDef::new("n", ColumnType::Int { unsigned: false }),
            ColumnDef::new("pad", ColumnType::Binary { len: 250 }),
            ColumnDef::new("v", varchar(200)),
        ],
        vec![0],
        PARTS,
    );
    d.indexes = vec![
        index(UIX, "u", vec![1], true, IndexKind::UniqueHash),
        index(NIX, "n", vec![2], false, IndexKind::Ordered),
        index(PRIMARY, "PRIMARY", vec![0], false, IndexKind::Ordered),
    ];
    d
}

fn random_row(rng: &mut Rng, id: i64) -> Vec<Value> {
    // Unique values derive from the key, so they never collide.
    let u = match rng.below(3) {
        0 => Value::Null,
        1 => Value::str(&format!("u{id}")),
        _ => Value::str(&format!("U{id}x")),
    };
    let n = if rng.below(8) == 0 { Value::Null } else { Value::Int(rng.below(40) as i64 - 10) };
    let pad = Value::Bytes(vec![(id as u8).wrapping_add(rng.below(3) as u8); 250]);
    let v = if rng.below(5) == 0 {
        Value::Null
    } else {
        Value::Bytes(vec![b'a' + rng.below(26) as u8; rng.below(200) as usize])
    };
    vec![Value::Int(id), u, n, pad, v]
}

fn part_of(s: &Storage, id: i64) -> PartitionId {
    s.partition_of_pk(T, &[Value::Int(id)]).unwrap()
}

fn find(s: &Storage, id: i64) -> Option<(PartitionId, RowId)> {
    let p = part_of(s, id);
    s.lookup(T, p, &s.encode_pk(T, &[Value::Int(id)]).unwrap()).map(|r| (p, r))
}

#[derive(Clone)]
enum Redo {
    Put(PartitionId, Vec<Value>),
    Delete(PartitionId, i64),
}

/// What a checkpoint of one partition wrote.
struct LcpFile {
    full: PartSet,
    tombstones: Vec<Tombstone>,
    rows: Vec<LcpRow>,
}

/// A data node and what a durability layer would have on disk for it.
struct World {
    s: Storage,
    model: BTreeMap<i64, Vec<Value>>,
    gci: u64,
    /// [partition][lcp number]
    files: Vec<Vec<LcpFile>>,
    /// Per LCP: the commit GCI when it began, and the REDO length then.
    begin_gci: Vec<u64>,
    redo_at_begin: Vec<usize>,
    redo: Vec<(u64, Redo)>,
    window: u32,
    rng: Rng,
}

impl World {
    fn new(seed: u64, window: u32) -> World {
        let mut s = Storage::new(1 << 30);
        s.create_table(&def()).unwrap();
        s.set_commit_gci(1);
        World {
            s,
            model: BTreeMap::new(),
            gci: 1,
            files: (0..PARTS).map(|_| Vec::new()).collect(),
            begin_gci: Vec::new(),
            redo_at_begin: Vec::new(),
            redo: Vec::new(),
            window,
            rng: Rng(seed | 1),
        }
    }

    /// One committed write: insert, update or delete of a random key.
    fn step(&mut self) {
        if self.rng.below(8) == 0 {
            self.gci += 1;
            self.s.set_commit_gci(self.gci);
        }
        let id = self.rng.below(KEYS) as i64;
        let p = part_of(&self.s, id);
        match (find(&self.s, id), self.rng.below(10)) {
            (Some((_, r)), 0..=3) => {
                self.s.delete(T, p, r);
                self.model.remove(&id);
                self.redo.push((self.gci, Redo::Delete(p, id)));
            }
            (Some((_, r)), _) => {
                let row = random_row(&mut self.rng, id);
                self.s.update(T, p, r, row).unwrap();
                self.wrote(p, r, id);
            }
            (None, _) => {
                let row = random_row(&mut self.rng, id);
                let r = self.s.insert(T, p, row).unwrap();
                self.wrote(p, r, id);
            }
        }
    }

    fn wrote(&mut self, p: PartitionId, r: RowId, id: i64) {
        let stored = self.s.read_row(T, p, r);
        assert_eq!(self.s.row_gci(T, p, r), Some(self.gci));
        self.redo.push((self.gci, Redo::Put(p, stored.clone())));
        self.model.insert(id, stored);
    }

    fn steps(&mut self, n: u64) {
        for _ in 0..n {
            self.step();
        }
    }

    /// A checkpoint of every partition; with `fuzzy`, writes run between
    /// the scan's batches.
    fn checkpoint(&mut self, fuzzy: bool) {
        let i = self.begin_gci.len();
        let since = if i == 0 { 0 } else { self.begin_gci[i - 1] };
        self.begin_gci.push(self.gci);
        self.redo_at_begin.push(self.redo.len());
        let full = PartSet::window(i as u32 * self.window, self.window);
        for p in 0..PARTS {
            let (mut scan, tombstones) = self.s.lcp_begin(T, p, full.clone(), since).unwrap();
            assert!(i == 0 || *scan.full_parts() == full, "only the first checkpoint is forced full");
            let mut rows = Vec::new();
            loop {
                let batch = 1 + self.rng.below(200) as usize;
                if self.s.lcp_next(&mut scan, batch, &mut rows).unwrap() {
                    break;
                }
                if fuzzy {
                    let n = self.rng.below(4);
                    self.steps(n);
                }
            }
            assert!(scan.pages_examined() + scan.pages_skipped() <= self.s.lcp_stats(T, p).unwrap().pages + 64);
            self.files[p as usize].push(LcpFile { full: scan.full_parts().clone(), tombstones, rows });
        }
    }

    /// A new node restored from the first `lcps` checkpoints, then (if
    /// given) the REDO log from that position.
    fn restore(&self, lcps: usize, redo_from: Option<usize>) -> Storage {
        let mut s = Storage::new(1 << 30);
        s.create_table(&def()).unwrap();
        s.restore_begin(T).unwrap();
        for p in 0..PARTS {
            let files = &self.files[p as usize][..lcps];
            let mut start = vec![None; LCP_PARTS as usize];
            for (i, f) in files.iter().enumerate() {
                for q in f.full.iter() {
                    start[q as usize] = Some(i);
                }
            }
            let eligible = |i: usize, q: u16| i >= start[q as usize].expect("every part has a full image");
            for (i, f) in files.iter().enumerate() {
                for t in &f.tombstones {
                    if eligible(i, t.lcp_part) {
                        s.restore_delete(T, p, t.lcp_part, &t.key).unwrap();
                    }
                }
                for r in &f.rows {
                    if eligible(i, r.lcp_part) {
                        s.restore_put(T, p, r.lcp_part, r.row.clone(), r.gci).unwrap();
                    }
                }
            }
        }
        if let Some(from) = redo_from {
            for (gci, op) in &self.redo[from..] {
                match op {
                    Redo::Put(p, row) => s.redo_put(T, *p, row.clone(), *gci).unwrap(),
                    Redo::Delete(p, id) => {
                        s.redo_delete(T, *p, &[Value::Int(*id)], *gci).unwrap();
                    }
                }
            }
        }
        s.check_invariants();
        s.restore_finish(T).unwrap();
        s.check_invariants();
        s.set_commit_gci(self.gci);
        s
    }

    /// Restore from every checkpoint and the REDO since the last one began.
    fn restore_latest(&self) -> Storage {
        let n = self.begin_gci.len();
        self.restore(n, Some(self.redo_at_begin[n - 1]))
    }
}

/// Every row of a storage, by id.
fn contents(s: &Storage) -> BTreeMap<i64, Vec<Value>> {
    let mut got = BTreeMap::new();
    for p in 0..PARTS {
        let mut cur = s.scan_open(T, p, None, None, false).unwrap();
        let mut out = Vec::new();
        while !s.scan_next(T, p, &mut cur, None, 1000, 1000, &mut out).unwrap() {}
        for (_, r) in out {
            assert!(got.insert(r[0].as_i64().unwrap(), r).is_none(), "key stored twice");
        }
    }
    got
}

/// Ordered scan of an index over every partition: (index value, id) pairs.
fn ordered(s: &Storage, ix: IndexId, col: usize) -> Vec<(Value, i64)> {
    let mut v = Vec::new();
    for p in 0..PARTS {
        let mut cur = s.scan_open(T, p, Some(ix), None, false).unwrap();
        let mut out = Vec::new();
        while !s.scan_next(T, p, &mut cur, None, 1000, 1000, &mut out).unwrap() {}
        let part: Vec<(Value, i64)> = out.iter().map(|(_, r)| (r[col].clone(), r[0].as_i64().unwrap())).collect();
        // Each partition's scan is in index order.
        let keys: Vec<Vec<u8>> = out.iter().map(|(_, r)| s.ordered_key(T, ix, r)).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "index {ix} scan out of order");
        v.extend(part);
    }
    v.sort_by_key(|a| a.1);
    v
}

/// `s` holds exactly `model`, and its indexes agree with it.
fn assert_holds(s: &Storage, model: &BTreeMap<i64, Vec<Value>>, what: &str) {
    let got = contents(s);
    if &got != model {
        let missing: Vec<_> = model.keys().filter(|k| !got.contains_key(k)).take(5).collect();
        let extra: Vec<_> = got.keys().filter(|k| !model.contains_key(k)).take(5).collect();
        let differ: Vec<_> =
            model.iter().filter(|(k, r)| got.get(k).is_some_and(|g| g != *r)).map(|(k, _)| k).take(5).collect();
        panic!(
            "{what}: {} rows, want {}; missing {missing:?}, extra {extra:?}, differ {differ:?}",
            got.len(),
            model.len()
        );
    }
    for (id, row) in model {
        if !row[1].is_null() {
            let (p, r) = s.lookup_unique(T, UIX, &[row[1].clone()]).unwrap().expect("unique entry");
            assert_eq!(s.read_row(T, p, r)[0], Value::Int(*id), "{what}: unique lookup");
        }
    }
    let want_n: Vec<(Value, i64)> = model.iter().map(|(id, r)| (r[2].clone(), *id)).collect();
    assert_eq!(ordered(s, NIX, 2), want_n, "{what}: ordered index");
    let want_pk: Vec<(Value, i64)> = model.keys().map(|id| (Value::Int(*id), *id)).collect();
    assert_eq!(ordered(s, PRIMARY, 0), want_pk, "{what}: primary key order");
}

fn assert_same_checksums(a: &Storage, b: &Storage) {
    for p in 0..PARTS {
        assert_eq!(a.partition_checksum(T, p).unwrap(), b.partition_checksum(T, p).unwrap(), "partition {p}");
    }
}

#[test]
fn a_chain_of_partial_checkpoints_restores_the_state_at_the_last_start() {
    for (seed, window) in [(1u64, 1u32), (2, 5), (3, 64), (4, 2048)] {
        let mut w = World::new(seed, window);
        let mut checked = 0;
        for lcp in 0..24 {
            let n = 50 + w.rng.below(400);
            w.steps(n);
            let at_start = w.model.clone();
            w.checkpoint(false);
            // Writes after the checkpoint are not in it.
            let n = w.rng.below(150);
            w.steps(n);
            let restored = w.restore(lcp + 1, None);
            assert_holds(&restored, &at_start, &format!("window {window}, after LCP {lcp}"));
            checked += at_start.len();
            if lcp % 6 == 5 {
                let latest = w.restore_latest();
                assert_holds(&latest, &w.model, &format!("window {window}, LCP {lcp} + REDO"));
                assert_same_checksums(&latest, &w.s);
            }
            w.s.check_invariants();
        }
        assert!(checked > 10_000, "the chain held rows ({checked})");
        // The partial checkpoints wrote much less than full ones would.
        if window < 64 {
            let written: usize = w.files.iter().flat_map(|f| &f[1..]).map(|f| f.rows.len()).sum();
            let full: usize = 23 * w.model.len();
            assert!(written * 3 < full, "window {window}: {written} rows written, {full} if full");
        }
    }
}

#[test]
fn fuzzy_checkpoints_plus_redo_restore_the_latest_state() {
    for (seed, window) in [(11u64, 1u32), (12, 7), (13, 300), (14, 2048)] {
        let mut w = World::new(seed, window);
        for lcp in 0..20 {
            let n = 50 + w.rng.below(300);
            w.steps(n);
            w.checkpoint(true);
            let n = w.rng.below(100);
            w.steps(n);
            let restored = w.restore_latest();
            assert_holds(&restored, &w.model, &format!("window {window}, fuzzy LCP {lcp} + REDO"));
            if lcp % 4 == 0 {
                assert_same_checksums(&restored, &w.s);
            }
        }
        w.s.check_invariants();
    }
}

#[test]
fn a_restarted_node_continues_the_chain() {
    for (seed, window) in [(21u64, 1u32), (22, 3), (23, 100)] {
        let mut w = World::new(seed, window);
        let mut restarts = 0;
        for lcp in 0..30 {
            let n = 50 + w.rng.below(300);
            w.steps(n);
            w.checkpoint(lcp % 2 == 0);
            let n = w.rng.below(100);
            w.steps(n);
            if lcp % 5 == 4 {
                // Crash: the node comes back from its files and REDO, then
                // keeps checkpointing into the same chain.
                let s = w.restore_latest();
                assert_holds(&s, &w.model, &format!("window {window}: restart after LCP {lcp}"));
                w.s = s;
                restarts += 1;
            }
            let restored = w.restore_latest();
            assert_holds(&restored, &w.model, &format!("window {window}: LCP {lcp}, {restarts} restarts"));
        }
        assert_eq!(restarts, 6);
    }
}

/// A fully loaded storage and its rows as one all-full checkpoint.
fn loaded(seed: u64, rows: u64) -> (Storage, Vec<LcpRow>) {
    let mut rng = Rng(seed);
    let mut s = Storage::new(1 << 30);
    s.create_table(&def()).unwrap();
    s.set_commit_gci(3);
    for _ in 0..rows {
        let id = rng.below(KEYS) as i64;
        let p = part_of(&s, id);
        let row = random_row(&mut rng, id);
        match find(&s, id) {
            Some((_, r)) if rng.below(3) == 0 => s.delete(T, p, r),
            Some((_, r)) => s.update(T, p, r, row).unwrap(),
            None => {
                s.insert(T, p, row).unwrap();
            }
        }
    }
    let mut out = Vec::new();
    for p in 0..PARTS {
        let (mut scan, _) = s.lcp_begin(T, p, PartSet::all(), 0).unwrap();
        while !s.lcp_next(&mut scan, 100, &mut out).unwrap() {}
    }
    (s, out)
}

fn restore_rows(rows: &[LcpRow]) -> Storage {
    let mut s = Storage::new(1 << 30);
    s.create_table(&def()).unwrap();
    s.restore_begin(T).unwrap();
    // In reverse: the restored row ids differ from the source's.
    for r in rows.iter().rev() {
        let p = part_of(&s, r.row[0].as_i64().unwrap());
        s.restore_put(T, p, r.lcp_part, r.row.clone(), r.gci).unwrap();
    }
    s.restore_finish(T).unwrap();
    s
}

#[test]
fn restore_finish_builds_the_indexes_online_writes_build() {
    let (src, rows) = loaded(5, 6000);
    let dst = restore_rows(&rows);
    dst.check_invariants();
    assert_holds(&dst, &contents(&src), "restored");
    // Entry for entry (row ids differ, so compare what the entries name).
    let (a, b) = (&src.tables[&T], &dst.tables[&T]);
    for p in 0..PARTS as usize {
        let keys =
            |t: &TableStore| t.parts[p].ordered[&NIX].map.keys().map(|k| k.as_slice().to_vec()).collect::<Vec<_>>();
        assert_eq!(keys(a), keys(b), "ordered index entries of partition {p}");
        let pks = |t: &TableStore| t.parts[p].pk_order.rows().map(|r| t.read(p, r)[0].clone()).collect::<Vec<_>>();
        assert_eq!(pks(a), pks(b), "primary key order of partition {p}");
        assert_eq!(a.parts[p].ordered[&NIX].footprint(), b.parts[p].ordered[&NIX].footprint());
    }
    let uniq = |t: &TableStore| {
        let m = t.indexes.iter().find(|i| i.def.id == UIX).unwrap().unique.as_ref().unwrap();
        m.map.iter().map(|(k, (p, r))| (k.as_slice().to_vec(), t.read(*p as usize, *r)[0].clone())).collect::<Vec<_>>()
    };
    assert_eq!(uniq(a), uniq(b), "unique map");
    // Row GCIs and checkpoint parts come back as they were.
    for r in &rows {
        let (p, rid) = find(&dst, r.row[0].as_i64().unwrap()).unwrap();
        assert_eq!(dst.row_gci(T, p, rid), Some(r.gci));
        assert_eq!(dst.lcp_part_of(T, p, rid), Some(r.lcp_part));
    }
    assert_same_checksums(&src, &dst);
    // The restored node writes normally afterwards.
    let mut dst = dst;
    let id = (0..KEYS as i64).find(|id| find(&dst, *id).is_none()).unwrap();
    let p = part_of(&dst, id);
    dst.insert(T, p, vec![Value::Int(id), Value::str("fresh"), Value::Int(1), Value::Null, Value::Null]).unwrap();
    let dup = vec![Value::Int(KEYS as i64 + 1), Value::str("FRESH"), Value::Null, Value::Null, Value::Null];
    let e = dst.insert(T, part_of(&dst, KEYS as i64 + 1), dup).unwrap_err();
    assert_eq!(e.code, ErrorCode::DuplicateUniqueKey);
    dst.check_invariants();
}

#[test]
fn a_duplicate_unique_value_in_restored_data_is_corruption() {
    let mut s = Storage::new(1 << 30);
    s.create_table(&def()).unwrap();
    s.restore_begin(T).unwrap();
    let row = |id: i64, u: &str| vec![Value::Int(id), Value::str(u), Value::Int(id), Value::Null, Value::Null];
    for (id, u) in [(1, "a"), (2, "b"), (3, "A")] {
        s.restore_put(T, part_of(&s, id), 0, row(id, u), 2).unwrap();
    }
    let used = s.memory().used_bytes;
    let e = s.restore_finish(T).unwrap_err();
    assert_eq!(e.code, ErrorCode::Internal);
    assert!(
        e.message.contains("corrupt") && e.message.contains("t9") && e.message.contains("index u"),
        "{}",
        e.message
    );
    assert!(s.is_restoring(T), "still restoring, unchanged");
    assert_eq!(s.memory().used_bytes, used);
    s.check_invariants();
    assert!(s.restore_delete(T, part_of(&s, 3), 0, &[Value::Int(3)]).unwrap());
    s.restore_finish(T).unwrap();
    assert!(!s.is_restoring(T));
    assert!(s.lookup_unique(T, UIX, &[Value::str("A")]).unwrap().is_some());
    s.check_invariants();
}

#[test]
fn restore_mode_checks_its_input_and_guards_the_table() {
    let mut s = Storage::new(1 << 30);
    s.create_table(&def()).unwrap();
    let row = |id: i64| vec![Value::Int(id), Value::str(&format!("u{id}")), Value::Int(id), Value::Null, Value::Null];
    let p1 = part_of(&s, 1);
    // Not restoring: refused.
    assert_eq!(s.restore_put(T, p1, 0, row(1), 1).unwrap_err().code, ErrorCode::Internal);
    assert_eq!(s.redo_put(T, p1, row(1), 1).unwrap_err().code, ErrorCode::Internal);
    assert!(s.restore_finish(T).is_err());
    s.insert(T, p1, row(1)).unwrap();
    s.restore_begin(T).unwrap();
    assert!(s.restore_begin(T).is_err(), "twice");
    // Bad input from a file is an error, never a panic.
    let e = |r: Result<(), NodeError>| r.unwrap_err().code;
    assert_eq!(e(s.restore_put(T, p1, 0, vec![Value::Int(1)], 1)), ErrorCode::WrongValueType);
    assert!(s.restore_put(T, p1, 0, vec![Value::str("x"); 5], 1).is_err());
    let mut null_key = row(1);
    null_key[0] = Value::Null;
    assert!(s.restore_put(T, p1, 0, null_key, 1).is_err());
    assert_eq!(e(s.restore_put(T, p1, 2048, row(1), 1)), ErrorCode::Internal);
    assert_eq!(e(s.restore_put(T, p1, 0, row(1), u32::MAX as u64 + 1)), ErrorCode::Internal);
    let other = (2..100).find(|id| part_of(&s, *id) != p1).unwrap();
    assert_eq!(e(s.restore_put(T, p1, 0, row(other), 1)), ErrorCode::BadPartition);
    assert_eq!(e(s.restore_put(T, 5, 0, row(1), 1)), ErrorCode::BadPartition);
    assert_eq!(e(s.restore_put(99, 0, 0, row(1), 1)), ErrorCode::NoSuchTable);
    assert!(s.restore_delete(T, p1, 0, &[Value::str("x")]).is_err());
    assert!(s.restore_delete(T, p1, 0, &[]).is_err());
    // Normal writes, unique lookups, index scans, checkpoints and index DDL
    // wait for restore_finish; full scans and deletes work.
    assert_eq!(s.insert(T, p1, row(7)).unwrap_err().code, ErrorCode::Internal);
    assert!(s.put(T, p1, row(1)).is_err());
    assert!(s.lookup_unique(T, UIX, &[Value::str("u1")]).is_err());
    assert!(s.scan_open(T, p1, Some(NIX), None, false).is_err());
    assert!(s.lcp_begin(T, p1, PartSet::all(), 0).is_err());
    assert!(s.create_index(T, &index(9, "n2", vec![2], false, IndexKind::Ordered)).is_err());
    assert_eq!(contents(&s).len(), 1);
    s.check_invariants();
    s.restore_put(T, p1, 0, row(1), 1).unwrap();
    let (_, r) = find(&s, 1).unwrap();
    s.delete(T, p1, r);
    s.check_invariants();
    s.restore_finish(T).unwrap();
    assert!(contents(&s).is_empty());
    s.check_invariants();
}

#[test]
fn restore_runs_out_of_memory_cleanly() {
    let mut s = Storage::new(400_000);
    s.create_table(&def()).unwrap();
    s.restore_begin(T).unwrap();
    let mut stored = 0u64;
    let mut err = None;
    for id in 0..10_000i64 {
        let row = vec![Value::Int(id), Value::Null, Value::Int(id), Value::Null, Value::str("some text")];
        match s.restore_put(T, part_of(&s, id), (id % 5) as u16, row, 1) {
            Ok(()) => stored += 1,
            Err(e) => {
                err = Some(e);
                break;
            }
        }
    }
    assert_eq!(err.unwrap().code, ErrorCode::TableFull);
    assert!(stored > 100);
    let m = s.memory();
    assert!(m.used_bytes <= m.limit_bytes);
    assert_eq!(m.rows, stored);
    s.check_invariants();
}

#[test]
fn restore_puts_rows_in_their_parts_and_moves_them() {
    let mut s = Storage::new(1 << 30);
    s.create_table(&def()).unwrap();
    s.restore_begin(T).unwrap();
    let row = |id: i64, n: i64| vec![Value::Int(id), Value::Null, Value::Int(n), Value::Null, Value::Null];
    let p = part_of(&s, 1);
    s.restore_put(T, p, 1500, row(1, 1), 4).unwrap();
    let (_, r) = find(&s, 1).unwrap();
    assert_eq!((s.lcp_part_of(T, p, r), s.row_gci(T, p, r)), (Some(1500), Some(4)));
    // The same part again: overwritten in place.
    s.restore_put(T, p, 1500, row(1, 2), 5).unwrap();
    assert_eq!(find(&s, 1), Some((p, r)));
    assert_eq!((s.read_row(T, p, r)[2].clone(), s.row_gci(T, p, r)), (Value::Int(2), Some(5)));
    // Another part: the key moves there; the part it left gets a tombstone.
    s.restore_put(T, p, 3, row(1, 3), 6).unwrap();
    let (_, r2) = find(&s, 1).unwrap();
    assert_eq!(s.lcp_part_of(T, p, r2), Some(3));
    assert_eq!(s.lcp_stats(T, p).unwrap().tombstones, 1);
    // A checkpoint tombstone of the part it left does not delete it; one of
    // its part does, leaving no tombstone.
    assert!(!s.restore_delete(T, p, 1500, &[Value::Int(1)]).unwrap());
    assert!(s.restore_delete(T, p, 3, &[Value::Int(1)]).unwrap());
    assert!(!s.restore_delete(T, p, 3, &[Value::Int(1)]).unwrap());
    assert_eq!(s.lcp_stats(T, p).unwrap().tombstones, 1);
    // REDO: puts keep a stored row's part, new keys go anywhere; deletes
    // leave tombstones.
    s.restore_put(T, p, 700, row(1, 4), 7).unwrap();
    s.redo_put(T, p, row(1, 5), 8).unwrap();
    let (_, r3) = find(&s, 1).unwrap();
    assert_eq!((s.lcp_part_of(T, p, r3), s.row_gci(T, p, r3)), (Some(700), Some(8)));
    assert!(s.redo_delete(T, p, &[Value::Int(1)], 9).unwrap());
    assert!(!s.redo_delete(T, p, &[Value::Int(1)], 9).unwrap());
    s.check_invariants();
    s.restore_finish(T).unwrap();
    let (_, t) = s.lcp_begin(T, p, PartSet::empty(), 0).unwrap();
    let t: Vec<(u16, u64)> = t.iter().map(|t| (t.lcp_part, t.gci)).collect();
    assert_eq!(t, vec![(1500, 6), (700, 9)]);
    s.check_invariants();
}

/// A key a fuzzy checkpoint caught twice (deleted and inserted again in
/// another part during its scan) is restored into the later part; the part
/// it left must get a tombstone, or a later restore whose chain for the
/// later part starts after the key's deletion would bring it back.
#[test]
fn a_key_checkpointed_twice_stays_deleted_after_a_restart() {
    let row = |n: i64| vec![Value::Int(1), Value::Null, Value::Int(n), Value::Null, Value::Null];
    // LCP 0 (full in every part) holds the key in part 5, then in part 9.
    let lcp0 = [LcpRow { lcp_part: 5, gci: 1, row: row(1) }, LcpRow { lcp_part: 9, gci: 2, row: row(2) }];
    let mut b = Storage::new(1 << 30);
    b.create_table(&def()).unwrap();
    let p = part_of(&b, 1);
    b.restore_begin(T).unwrap();
    for r in &lcp0 {
        b.restore_put(T, p, r.lcp_part, r.row.clone(), r.gci).unwrap();
    }
    b.restore_finish(T).unwrap();
    let (_, r) = find(&b, 1).unwrap();
    assert_eq!(b.read_row(T, p, r)[2], Value::Int(2), "the later image wins");
    // The restarted node deletes the key, then checkpoints twice: LCP 1
    // partial, LCP 2 full in part 9 only.
    b.set_commit_gci(3);
    b.delete(T, p, r);
    let (mut s1, t1) = b.lcp_begin(T, p, PartSet::empty(), 2).unwrap();
    let mut rows1 = Vec::new();
    while !b.lcp_next(&mut s1, 10, &mut rows1).unwrap() {}
    let mut part9 = PartSet::empty();
    part9.insert(9);
    let (mut s2, t2) = b.lcp_begin(T, p, part9.clone(), 3).unwrap();
    let mut rows2 = Vec::new();
    while !b.lcp_next(&mut s2, 10, &mut rows2).unwrap() {}
    assert!(rows1.is_empty() && rows2.is_empty() && t2.is_empty());
    assert_eq!(t1.iter().map(|t| t.lcp_part).collect::<Vec<_>>(), vec![5, 9], "the move and the delete");
    // Restore the chain: part 5 from LCP 0, part 9 from LCP 2.
    let mut c = Storage::new(1 << 30);
    c.create_table(&def()).unwrap();
    c.restore_begin(T).unwrap();
    for r in lcp0.iter().filter(|r| r.lcp_part == 5) {
        c.restore_put(T, p, r.lcp_part, r.row.clone(), r.gci).unwrap();
    }
    for t in t1.iter().filter(|t| t.lcp_part == 5) {
        c.restore_delete(T, p, t.lcp_part, &t.key).unwrap();
    }
    c.restore_finish(T).unwrap();
    assert_eq!(find(&c, 1), None, "the deleted key stays deleted");
}

/// A restore builds the primary-key order in bulk with leaves exactly as
/// long as their rows; inserting into a last leaf 2 short of full after it
/// grew its capacity by less than the usual 4 slots (it panicked once).
#[test]
fn inserts_after_a_bulk_built_pk_order_fill_its_leaves() {
    let mut s = Storage::new(256 << 20);
    let mut d = table(T, vec![ColumnDef::new("id", bigint()).not_null()], vec![0], 1);
    d.indexes = vec![index(PRIMARY, "PRIMARY", vec![0], false, IndexKind::Ordered)];
    s.create_table(&d).unwrap();
    s.restore_begin(T).unwrap();
    let n = crate::pk_order::LEAF_ROWS as i64 * 2 - 2;
    for id in 0..n {
        s.redo_put(T, 0, vec![Value::Int(2 * id)], 1).unwrap();
    }
    s.restore_finish(T).unwrap();
    for id in 0..8 {
        s.insert(T, 0, vec![Value::Int(2 * (n - 4) + 1 + 2 * id)]).unwrap();
    }
    assert_eq!(s.row_count(T), n as u64 + 8);
}

/// Rows replayed from the REDO log at a restore are only in the log, which
/// the next recorded checkpoint round releases: they count as changes for
/// that round (or the partition would keep a checkpoint without them, and
/// the restart after would lose them). Rows from checkpoint files do not.
#[test]
fn rows_replayed_from_redo_are_changes_for_the_next_checkpoint() {
    let mut rng = Rng(11);
    let mut s = Storage::new(1 << 30);
    s.create_table(&def()).unwrap();
    s.restore_begin(T).unwrap();
    let mut replayed = [0u64; PARTS as usize];
    for id in 0..200i64 {
        let p = part_of(&s, id);
        s.restore_put(T, p, (id % 7) as u16, random_row(&mut rng, id), 3).unwrap();
    }
    for id in 150..260i64 {
        let p = part_of(&s, id);
        s.redo_put(T, p, random_row(&mut rng, id), 9 + (id % 3) as u64).unwrap();
        replayed[p as usize] += 1;
    }
    for id in [5i64, 6, 7] {
        let p = part_of(&s, id);
        assert!(s.redo_delete(T, p, &[Value::Int(id)], 12).unwrap());
        replayed[p as usize] += 1;
    }
    s.restore_finish(T).unwrap();
    for p in 0..PARTS {
        let st = s.lcp_stats(T, p).unwrap();
        assert_eq!(st.rows_changed, replayed[p as usize], "partition {p}");
        assert_eq!(st.oldest_gci_written, Some(9), "partition {p}");
        assert!(st.chain);
    }
    // A roll forward restores the table again (a system restart to a later
    // GCI): what it replays adds to the changes, which stay.
    s.restore_begin(T).unwrap();
    for id in 300..340i64 {
        let p = part_of(&s, id);
        s.redo_put(T, p, random_row(&mut rng, id), 13).unwrap();
        replayed[p as usize] += 1;
    }
    s.restore_finish(T).unwrap();
    for p in 0..PARTS {
        let st = s.lcp_stats(T, p).unwrap();
        assert_eq!(st.rows_changed, replayed[p as usize], "partition {p} after the roll forward");
        assert_eq!(st.oldest_gci_written, Some(9), "partition {p} after the roll forward");
    }
    s.check_invariants();
}
