use super::*;
use norr_signals::Value;
use std::collections::BTreeMap;

/// A model partition: key -> (part, gci, row), plus the tombstones since the
/// last checkpoint began (what storage's `lcp_begin` hands over).
#[derive(Default, Clone)]
struct Model {
    rows: BTreeMap<u64, (u16, u64, Vec<Value>)>,
    tombstones: Vec<(u16, u64, u64)>,
    changed: u64,
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn row(k: u64, v: u64, width: usize) -> Vec<Value> {
    vec![Value::UInt(k), Value::UInt(v), Value::Bytes(vec![v as u8; width])]
}

const T: u32 = 5;
const P: u32 = 1;

/// Files of the partition directory: name -> bytes.
type Dir = BTreeMap<String, Vec<u8>>;

/// Write a checkpoint of `m` as storage would (non-fuzzy here).
fn checkpoint(
    m: &mut Model,
    dir: &mut Dir,
    prev: Option<&LcpControl>,
    lcp_id: u64,
    gci: u64,
    max_chain: usize,
    page: u32,
) -> LcpControl {
    let next = next_lcp(prev, lcp_id, m.changed, m.rows.len() as u64, max_chain);
    let ident = LcpIdent { table: T, partition: P, lcp_id };
    let mut w = LcpDataWriter::new(ident, page);
    let mut file = Vec::new();
    for (part, g, k) in std::mem::take(&mut m.tombstones) {
        w.push_tombstone(part, g, &[Value::UInt(k)]);
        file.extend(w.take_ready());
    }
    for (_, (part, g, r)) in m.rows.iter() {
        if next.full_parts.contains(*part) || *g >= next.since_gci {
            w.push_row(*part, *g, r);
            file.extend(w.take_ready());
        }
    }
    let (rest, data) = w.finish();
    file.extend(rest);
    assert_eq!(file.len() as u64, data.bytes);
    m.changed = 0;
    let c = LcpControl {
        table: T,
        partition: P,
        lcp_id,
        table_version: 1,
        start_gci: gci,
        since_gci: next.since_gci,
        max_gci: data.max_gci,
        full_parts: next.full_parts,
        data,
        chain: next.chain,
    };
    dir.insert(format!("{lcp_id}.data"), file);
    dir.insert(format!("{lcp_id}.ctl"), c.encode());
    c
}

fn restore(dir: &Dir, gci: u64) -> Result<(BTreeMap<u64, Vec<Value>>, RestorePlan), crate::FormatError> {
    let names: Vec<String> = dir.keys().cloned().collect();
    let controls: Vec<(String, Vec<u8>)> =
        dir.iter().filter(|(n, _)| n.ends_with(".ctl")).map(|(n, b)| (n.clone(), b.clone())).collect();
    let plan = plan_restore(T, P, &names, &controls, gci)?;
    let mut out = BTreeMap::new();
    for s in &plan.steps {
        let bytes = dir.get(&format!("{}.data", s.ident.lcp_id)).expect("planned file exists");
        let mut r = LcpDataReader::new(s.ident, s.data, s.rows_of, s.tombstones_of);
        let mut entries = Vec::new();
        while let Some((off, len)) = r.next_read() {
            let end = (off as usize + len as usize).min(bytes.len());
            r.feed(off, &bytes[off as usize..end], &mut entries)?;
        }
        r.finish()?;
        for e in entries {
            match e {
                LcpEntry::Tombstone { key, .. } => {
                    let Value::UInt(k) = key[0] else { panic!() };
                    out.remove(&k);
                }
                LcpEntry::Row { row, .. } => {
                    let Value::UInt(k) = row[0] else { panic!() };
                    out.insert(k, row);
                }
            }
        }
    }
    Ok((out, plan))
}

fn apply_ops(m: &mut Model, rng: &mut Rng, n: u64, gci: u64, keyspace: u64) {
    for _ in 0..n {
        let k = rng.below(keyspace);
        let v = rng.next();
        match (m.rows.contains_key(&k), rng.below(4)) {
            (true, 0) => {
                let (part, _, _) = m.rows.remove(&k).expect("present");
                m.tombstones.push((part, gci, k));
            }
            (true, 1) => {
                // Delete and re-insert: the row may land in another part.
                let (part, _, _) = m.rows.remove(&k).expect("present");
                m.tombstones.push((part, gci, k));
                m.rows.insert(k, (rng.below(PARTS as u64) as u16, gci, row(k, v, (v % 40) as usize)));
            }
            (true, _) => {
                let e = m.rows.get_mut(&k).expect("present");
                e.1 = gci;
                e.2 = row(k, v, (v % 40) as usize);
            }
            (false, _) => {
                m.rows.insert(k, (rng.below(PARTS as u64) as u16, gci, row(k, v, (v % 40) as usize)));
            }
        }
        m.changed += 1;
    }
}

#[test]
fn random_chains_restore_the_checkpointed_state() {
    let mut chains_seen = 0;
    for seed in 0..30u64 {
        let mut rng = Rng(seed);
        let max_chain = 2 + rng.below(10) as usize;
        let page = [512u32, 4096, LCP_PAGE_BYTES][rng.below(3) as usize];
        let keyspace = 50 + rng.below(3000);
        let mut m = Model::default();
        let mut dir = Dir::new();
        let mut prev: Option<LcpControl> = None;
        let mut gci = 1;
        let mut max_len = 0;
        for lcp_id in 1..=14u64 {
            let n = [0, 5, 50, 2000][rng.below(4) as usize];
            apply_ops(&mut m, &mut rng, n, gci, keyspace);
            gci += 1;
            let c = checkpoint(&mut m, &mut dir, prev.as_ref(), lcp_id * 3, gci, max_chain, page);
            assert!(c.chain.len() < max_chain, "seed {seed}: chain {} >= {max_chain}", c.chain.len());
            max_len = max_len.max(c.chain.len());
            // Delete what became obsolete, as the CKPT block will.
            if let Some(p) = &prev {
                for id in obsolete_after(&c, p) {
                    dir.remove(&format!("{id}.data"));
                    dir.remove(&format!("{id}.ctl"));
                }
            }
            let (got, plan) = restore(&dir, gci).unwrap_or_else(|e| panic!("seed {seed} lcp {lcp_id}: {e}"));
            let want: BTreeMap<u64, Vec<Value>> = m.rows.iter().map(|(k, (_, _, r))| (*k, r.clone())).collect();
            assert_eq!(got, want, "seed {seed} lcp {lcp_id}");
            assert_eq!(plan.lcp_id, Some(c.lcp_id));
            assert_eq!(plan.redo_from_gci, gci);
            assert!(plan.obsolete.is_empty(), "seed {seed}: {:?}", plan.obsolete);
            prev = Some(c);
        }
        chains_seen += usize::from(max_len >= 2);
    }
    assert!(chains_seen >= 10, "only {chains_seen} seeds formed chains of partial checkpoints");
}

#[test]
fn partial_checkpoint_cost_follows_the_change_rate() {
    let mut rng = Rng(9);
    let mut m = Model::default();
    let mut dir = Dir::new();
    apply_ops(&mut m, &mut rng, 20_000, 1, 1_000_000);
    let first = checkpoint(&mut m, &mut dir, None, 1, 2, DEFAULT_MAX_CHAIN, LCP_PAGE_BYTES);
    assert_eq!(first.data.rows, m.rows.len() as u64);
    apply_ops(&mut m, &mut rng, 100, 2, 1_000_000);
    let second = checkpoint(&mut m, &mut dir, Some(&first), 2, 3, DEFAULT_MAX_CHAIN, LCP_PAGE_BYTES);
    // About 1/7 of the parts in full plus the ~100 changed rows.
    let total = m.rows.len() as f64;
    let written = second.data.rows as f64;
    assert!(written < total * 0.2 && written > total * 0.1, "{written} of {total}");
    assert_eq!(second.chain.len(), 1);
}

#[test]
fn incomplete_or_corrupt_newest_checkpoint_falls_back_or_refuses() {
    let mut rng = Rng(3);
    let mut m = Model::default();
    let mut dir = Dir::new();
    apply_ops(&mut m, &mut rng, 500, 1, 1000);
    let c1 = checkpoint(&mut m, &mut dir, None, 1, 2, 4, 512);
    let state1: BTreeMap<u64, Vec<Value>> = m.rows.iter().map(|(k, (_, _, r))| (*k, r.clone())).collect();
    apply_ops(&mut m, &mut rng, 50, 2, 1000);
    let _c2 = checkpoint(&mut m, &mut dir, Some(&c1), 2, 3, 4, 512);
    // A crash before the control file was complete: torn control.
    let ctl = dir.get_mut("2.ctl").unwrap();
    ctl.truncate(ctl.len() - 3);
    let (got, plan) = restore(&dir, 3).unwrap();
    assert_eq!(got, state1);
    assert_eq!(plan.lcp_id, Some(1));
    assert_eq!(plan.rejected.len(), 1);
    assert_eq!(plan.obsolete, vec!["lcp/5/1/2.ctl".to_string(), "lcp/5/1/2.data".to_string()]);
    // The only complete checkpoint has a corrupt data page: the read fails
    // naming the file and offset (the node must not start without those rows).
    let data = dir.get_mut("1.data").unwrap();
    data[512 + 200] ^= 1;
    let e = restore(&dir, 3).unwrap_err();
    assert_eq!((e.path.as_str(), e.offset), ("lcp/5/1/1.data", 512), "{e}");
    // A checkpoint whose rows are newer than the restart point is not used.
    let mut dir2 = Dir::new();
    let mut m2 = Model::default();
    apply_ops(&mut m2, &mut rng, 10, 7, 100);
    checkpoint(&mut m2, &mut dir2, None, 1, 8, 4, 512);
    let e = restore(&dir2, 6).unwrap_err();
    assert!(e.what.contains("beyond the restart point"), "{e}");
    // No checkpoint at all: an empty partition, all REDO applied.
    let (got, plan) = restore(&Dir::new(), 5).unwrap();
    assert!(got.is_empty() && plan.lcp_id.is_none() && plan.redo_from_gci == 0);
}

#[test]
fn control_round_trip_and_checks() {
    let mut m = Model::default();
    let mut dir = Dir::new();
    apply_ops(&mut m, &mut Rng(1), 10, 1, 100);
    let c = checkpoint(&mut m, &mut dir, None, 4, 2, 4, 512);
    let b = c.encode();
    assert_eq!(LcpControl::decode(&b, "lcp/5/1/4.ctl").unwrap(), c);
    assert!(LcpControl::decode(&b, "lcp/5/1/9.ctl").is_err(), "a control file in the wrong place");
    let mut broken = c.clone();
    broken.full_parts = PartWindow::new(0, 10);
    assert!(broken.check().unwrap_err().contains("without a full image"));
}
