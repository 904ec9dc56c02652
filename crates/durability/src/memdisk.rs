//! A tiny disk for this crate's tests: files of bytes, writes that stay
//! volatile until a sync, and crashes that keep a random prefix of the
//! volatile writes (the last one possibly torn). The simulator's disk
//! (crates/sim/src/disk.rs) is the full model; this one keeps the crate's
//! tests free of the simulator.

use std::collections::BTreeMap;

#[derive(Default, Clone)]
pub struct MemFile {
    pub durable: Vec<u8>,
    pub current: Vec<u8>,
    /// Volatile writes since the last sync: (offset, bytes).
    pub pending: Vec<(u64, Vec<u8>)>,
}

#[derive(Default, Clone)]
pub struct MemDisk {
    pub files: BTreeMap<String, MemFile>,
    pub seed: u64,
}

fn put(buf: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let end = offset as usize + data.len();
    if buf.len() < end {
        buf.resize(end, 0);
    }
    buf[offset as usize..end].copy_from_slice(data);
}

impl MemDisk {
    pub fn new(seed: u64) -> MemDisk {
        MemDisk { files: BTreeMap::new(), seed }
    }

    fn next(&mut self) -> u64 {
        // splitmix64
        self.seed = self.seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A pre-allocated, durable, zeroed file.
    pub fn create(&mut self, path: &str, len: usize) {
        self.files.insert(path.into(), MemFile { durable: vec![0; len], current: vec![0; len], pending: vec![] });
    }

    pub fn write(&mut self, path: &str, offset: u64, data: &[u8]) {
        let f = self.files.entry(path.into()).or_default();
        put(&mut f.current, offset, data);
        f.pending.push((offset, data.to_vec()));
    }

    pub fn sync(&mut self, path: &str) {
        let f = self.files.get_mut(path).expect("file");
        f.durable = f.current.clone();
        f.pending.clear();
    }

    pub fn read(&self, path: &str, offset: u64, len: usize) -> Vec<u8> {
        let f = &self.files[path];
        let s = (offset as usize).min(f.current.len());
        let e = (offset as usize + len).min(f.current.len());
        f.current[s..e].to_vec()
    }

    /// Lose volatile writes: each file keeps a random prefix of them, the
    /// last kept one cut at a random 512-byte boundary (a torn write).
    pub fn crash(&mut self) {
        let names: Vec<String> = self.files.keys().cloned().collect();
        for n in names {
            let pending = std::mem::take(&mut self.files.get_mut(&n).expect("file").pending);
            let keep = (self.next() % (pending.len() as u64 + 1)) as usize;
            let torn = self.next().is_multiple_of(2);
            let cut = self.next();
            let f = self.files.get_mut(&n).expect("file");
            let mut content = f.durable.clone();
            for (i, (off, data)) in pending.iter().enumerate().take(keep) {
                if i + 1 == keep && torn && data.len() > 512 {
                    let sectors = data.len() / 512;
                    let k = (cut % sectors as u64) as usize * 512;
                    put(&mut content, *off, &data[..k]);
                } else {
                    put(&mut content, *off, data);
                }
            }
            f.durable = content.clone();
            f.current = content;
        }
    }

    pub fn flip_bit(&mut self, path: &str, byte: usize, bit: u8) {
        let f = self.files.get_mut(path).expect("file");
        f.durable[byte] ^= 1 << bit;
        f.current[byte] ^= 1 << bit;
    }
}
