//! The simulated disk of a data node and the FS block on top of it
//! (`block::FS` in the simulator; the runtime's is real files, see
//! crates/runtime/src/fs.rs). Deterministic: every delay and fault comes
//! from the disk's own seeded [`Rng`].
//!
//! Model:
//! * A file has durable contents and a list of writes made since its last
//!   sync (volatile). Reads see every write. `Sync` (or a write with `sync`)
//!   makes the file's current contents durable.
//! * Creating, truncating, renaming and removing are durable at once (the
//!   runtime fsyncs the directory before replying, so the real host agrees).
//! * [`SimDisk::crash`]: each file keeps its durable contents plus a random
//!   prefix (or, in `CrashMode::Subset`, a random subset) of its volatile
//!   writes; the last write kept may be torn (only its first sectors land);
//!   now and then a bit of a random file flips (bit rot found at restart).
//! * Faults while running: replies delayed by a random latency (in order per
//!   file), a full disk (`NoSpace`, nothing written), read and write errors,
//!   a removed data directory (`DirectoryGone`), on demand bit flips.
//!
//! The disk outlives the node: a crash resets the FS block (open handles are
//! gone) and the host builds a new one over the same [`SharedDisk`].

use crate::rng::Rng;
use norr_kernel::{Block, Ctx, Envelope};
use norr_signals::fs::{check_path, FileHandle, FsError, FsErrorKind, FsOp, FsResult, FsSignal};
use norr_signals::Signal;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// Size of a sector: a torn write keeps whole sectors.
pub const SECTOR_BYTES: usize = 512;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashMode {
    /// Volatile writes survive in issue order up to a random point.
    Prefix,
    /// Each volatile write survives or not on its own (a disk that reorders).
    Subset,
}

/// Fault and delay parameters of a disk.
#[derive(Debug, Clone, PartialEq)]
pub struct DiskFaults {
    pub latency_min_ns: u64,
    pub latency_max_ns: u64,
    pub read_error_p: f64,
    pub write_error_p: f64,
    /// Total bytes the disk holds (None: unlimited).
    pub capacity_bytes: Option<u64>,
    pub crash_mode: CrashMode,
    /// At a crash: the last volatile write kept is torn with this probability.
    pub torn_write_p: f64,
    /// At a crash: a random bit of a random file flips with this probability.
    pub bit_flip_at_crash_p: f64,
}

impl DiskFaults {
    /// A perfect, instant disk.
    pub fn none() -> DiskFaults {
        DiskFaults {
            latency_min_ns: 0,
            latency_max_ns: 0,
            read_error_p: 0.0,
            write_error_p: 0.0,
            capacity_bytes: None,
            crash_mode: CrashMode::Prefix,
            torn_write_p: 0.0,
            bit_flip_at_crash_p: 0.0,
        }
    }

    /// Faults chosen by a seed (the cluster simulator's disks).
    pub fn random(rng: &mut Rng) -> DiskFaults {
        let min = rng.range(1, 200) * 1_000;
        DiskFaults {
            latency_min_ns: min,
            latency_max_ns: min + rng.range(0, 5_000) * 1_000,
            read_error_p: *rng.pick(&[0.0, 0.0, 0.0001]),
            write_error_p: *rng.pick(&[0.0, 0.0, 0.0001]),
            capacity_bytes: *rng.pick(&[None, None, None, Some(64 << 20)]),
            crash_mode: *rng.pick(&[CrashMode::Prefix, CrashMode::Subset]),
            torn_write_p: *rng.pick(&[0.0, 0.5, 1.0]),
            bit_flip_at_crash_p: *rng.pick(&[0.0, 0.0, 0.05]),
        }
    }
}

#[derive(Debug, Clone, Default)]
struct SimFile {
    durable: Vec<u8>,
    current: Vec<u8>,
    volatile: Vec<(u64, Vec<u8>)>,
}

/// What happened to a disk (for tests and run reports).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiskStats {
    pub writes: u64,
    pub syncs: u64,
    pub reads: u64,
    pub crashes: u64,
    pub lost_writes: u64,
    pub torn_writes: u64,
    pub bit_flips: u64,
    pub no_space: u64,
    pub io_errors: u64,
}

/// One node's disk.
#[derive(Debug)]
pub struct SimDisk {
    files: BTreeMap<String, SimFile>,
    dirs: BTreeSet<String>,
    rng: Rng,
    pub faults: DiskFaults,
    /// The data directory was removed under the node.
    gone: bool,
    pub stats: DiskStats,
}

pub type SharedDisk = Arc<Mutex<SimDisk>>;

/// A node's data directory on the simulated disk as restart reads it
/// (`norr_node::durable::build_durable`): the files' current contents,
/// synced or not (a crash was already applied to the disk).
pub struct SimDataDir(pub SharedDisk);

impl norr_node::durable::DataDir for SimDataDir {
    fn read(&self, path: &str) -> Result<Option<Vec<u8>>, String> {
        Ok(self.0.lock().unwrap().contents(path).map(|b| b.to_vec()))
    }

    fn read_at(&self, path: &str, offset: u64, len: u32) -> Result<Vec<u8>, String> {
        let d = self.0.lock().unwrap();
        let mut out = vec![0u8; len as usize];
        if let Some(b) = d.contents(path) {
            let s = (offset as usize).min(b.len());
            let e = (offset as usize + len as usize).min(b.len());
            out[..e - s].copy_from_slice(&b[s..e]);
        }
        Ok(out)
    }

    fn remove(&self, path: &str) -> Result<(), String> {
        self.0.lock().unwrap().remove_file(path);
        Ok(())
    }

    fn list(&self, dir: &str) -> Result<Vec<String>, String> {
        let prefix = format!("{dir}/");
        let d = self.0.lock().unwrap();
        let mut names: Vec<String> = d
            .file_names()
            .into_iter()
            .filter_map(|n| n.strip_prefix(&prefix).map(|r| r.split('/').next().unwrap_or(r).to_string()))
            .collect();
        names.dedup();
        Ok(names)
    }
}

fn err(kind: FsErrorKind, path: &str, offset: Option<u64>, message: &str) -> FsError {
    FsError { kind, path: path.to_string(), offset, message: message.to_string() }
}

fn put(buf: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let end = offset as usize + data.len();
    if buf.len() < end {
        buf.resize(end, 0);
    }
    buf[offset as usize..end].copy_from_slice(data);
}

impl SimDisk {
    pub fn new(rng: Rng, faults: DiskFaults) -> SimDisk {
        SimDisk { files: BTreeMap::new(), dirs: BTreeSet::new(), rng, faults, gone: false, stats: DiskStats::default() }
    }

    pub fn shared(rng: Rng, faults: DiskFaults) -> SharedDisk {
        Arc::new(Mutex::new(SimDisk::new(rng, faults)))
    }

    /// Bytes in use (current contents).
    pub fn used_bytes(&self) -> u64 {
        self.files.values().map(|f| f.current.len() as u64).sum()
    }

    /// The file's contents as reads see them.
    pub fn contents(&self, path: &str) -> Option<&[u8]> {
        self.files.get(path).map(|f| f.current.as_slice())
    }

    /// The file's durable contents (what a crash keeps for sure).
    pub fn durable(&self, path: &str) -> Option<&[u8]> {
        self.files.get(path).map(|f| f.durable.as_slice())
    }

    /// Create (or replace) a file at once and durably, as if a node had
    /// written and synced it (tests: files a crash left behind).
    pub fn put_durable(&mut self, path: &str, data: Vec<u8>) {
        self.make_parents(path);
        self.files.insert(path.to_string(), SimFile { durable: data.clone(), current: data, volatile: Vec::new() });
    }

    /// Remove a file at once and durably (a host's start-up clean-up, done
    /// before its FS block runs).
    pub fn remove_file(&mut self, path: &str) {
        self.files.remove(path);
    }

    pub fn file_names(&self) -> Vec<String> {
        self.files.keys().cloned().collect()
    }

    /// The node crashed: volatile writes are lost, kept in part or torn.
    pub fn crash(&mut self) {
        self.stats.crashes += 1;
        let names: Vec<String> = self.files.keys().cloned().collect();
        for name in names {
            let f = self.files.get_mut(&name).expect("listed");
            let volatile = std::mem::take(&mut f.volatile);
            let n = volatile.len();
            let keep: Vec<bool> = match self.faults.crash_mode {
                CrashMode::Prefix => {
                    let k = self.rng.below(n as u64 + 1) as usize;
                    (0..n).map(|i| i < k).collect()
                }
                CrashMode::Subset => (0..n).map(|_| self.rng.chance(0.5)).collect(),
            };
            let last_kept = keep.iter().rposition(|&k| k);
            let mut content = f.durable.clone();
            for (i, (off, data)) in volatile.iter().enumerate() {
                if !keep[i] {
                    self.stats.lost_writes += 1;
                    continue;
                }
                if Some(i) == last_kept && data.len() > SECTOR_BYTES && self.rng.chance(self.faults.torn_write_p) {
                    let sectors = data.len().div_ceil(SECTOR_BYTES);
                    let k = self.rng.below(sectors as u64) as usize * SECTOR_BYTES;
                    put(&mut content, *off, &data[..k]);
                    self.stats.torn_writes += 1;
                } else {
                    put(&mut content, *off, data);
                }
            }
            let f = self.files.get_mut(&name).expect("listed");
            f.durable = content.clone();
            f.current = content;
        }
        if self.rng.chance(self.faults.bit_flip_at_crash_p) {
            self.flip_random_bit();
        }
    }

    /// Flip one random bit of one random non-empty file (durably). Returns
    /// (path, byte offset, bit), or None if every file is empty.
    pub fn flip_random_bit(&mut self) -> Option<(String, u64, u8)> {
        let candidates: Vec<String> =
            self.files.iter().filter(|(_, f)| !f.current.is_empty()).map(|(n, _)| n.clone()).collect();
        if candidates.is_empty() {
            return None;
        }
        let path = self.rng.pick(&candidates).clone();
        let f = self.files.get_mut(&path).expect("picked");
        let at = self.rng.below(f.current.len() as u64) as usize;
        let bit = self.rng.below(8) as u8;
        f.current[at] ^= 1 << bit;
        if at < f.durable.len() {
            f.durable[at] ^= 1 << bit;
        }
        self.stats.bit_flips += 1;
        Some((path, at as u64, bit))
    }

    /// `rm -rf` of the data directory under the running node.
    pub fn remove_data_dir(&mut self) {
        self.files.clear();
        self.dirs.clear();
        self.gone = true;
    }

    fn make_parents(&mut self, path: &str) {
        let mut p = path;
        while let Some((parent, _)) = p.rsplit_once('/') {
            self.dirs.insert(parent.to_string());
            p = parent;
        }
    }

    fn check(&self, path: &str) -> Result<(), FsError> {
        if self.gone {
            return Err(err(FsErrorKind::DirectoryGone, path, None, "the data directory was removed under the node"));
        }
        check_path(path).map_err(|m| err(FsErrorKind::BadPath, path, None, &m))
    }

    /// Execute one request (`handles`: the FS block's open files).
    fn execute(&mut self, op: FsOp, handles: &mut Handles) -> Result<FsResult, FsError> {
        match op {
            FsOp::Open { path, create, truncate } => {
                self.check(&path)?;
                if !self.files.contains_key(&path) {
                    if !create {
                        return Err(err(FsErrorKind::NotFound, &path, None, "no such file"));
                    }
                    self.make_parents(&path);
                    self.files.insert(path.clone(), SimFile::default());
                }
                let f = self.files.get_mut(&path).expect("present");
                if truncate {
                    *f = SimFile::default();
                }
                let size = f.current.len() as u64;
                Ok(FsResult::Opened { file: handles.open(path), size })
            }
            FsOp::Write { file, offset, data, sync } => {
                let path = handles.path(file)?;
                if self.gone {
                    return Err(err(
                        FsErrorKind::DirectoryGone,
                        &path,
                        Some(offset),
                        "the data directory was removed under the node",
                    ));
                }
                if self.rng.chance(self.faults.write_error_p) {
                    self.stats.io_errors += 1;
                    return Err(err(FsErrorKind::Io, &path, Some(offset), "simulated write error"));
                }
                let cur_len = self.files.get(&path).map_or(0, |f| f.current.len() as u64);
                let grow = (offset + data.len() as u64).saturating_sub(cur_len);
                if let Some(cap) = self.faults.capacity_bytes {
                    if self.used_bytes() + grow > cap {
                        self.stats.no_space += 1;
                        return Err(err(FsErrorKind::NoSpace, &path, Some(offset), "simulated full disk"));
                    }
                }
                let f = self
                    .files
                    .get_mut(&path)
                    .ok_or_else(|| err(FsErrorKind::NotFound, &path, Some(offset), "file removed"))?;
                put(&mut f.current, offset, &data);
                f.volatile.push((offset, data));
                self.stats.writes += 1;
                if sync {
                    f.durable = f.current.clone();
                    f.volatile.clear();
                    self.stats.syncs += 1;
                }
                Ok(FsResult::Written)
            }
            FsOp::Read { file, offset, len } => {
                let path = handles.path(file)?;
                if self.rng.chance(self.faults.read_error_p) {
                    self.stats.io_errors += 1;
                    return Err(err(FsErrorKind::Io, &path, Some(offset), "simulated read error"));
                }
                let f = self
                    .files
                    .get(&path)
                    .ok_or_else(|| err(FsErrorKind::NotFound, &path, Some(offset), "file removed"))?;
                let s = (offset as usize).min(f.current.len());
                let e = (offset as usize).saturating_add(len as usize).min(f.current.len());
                self.stats.reads += 1;
                Ok(FsResult::Read { data: f.current[s..e].to_vec() })
            }
            FsOp::Sync { file } => {
                let path = handles.path(file)?;
                if self.gone {
                    return Err(err(
                        FsErrorKind::DirectoryGone,
                        &path,
                        None,
                        "the data directory was removed under the node",
                    ));
                }
                if let Some(f) = self.files.get_mut(&path) {
                    f.durable = f.current.clone();
                    f.volatile.clear();
                }
                self.stats.syncs += 1;
                Ok(FsResult::Synced)
            }
            FsOp::Close { file } => {
                handles.path(file)?;
                handles.files.remove(&file);
                Ok(FsResult::Closed)
            }
            FsOp::Remove { path } => {
                self.check(&path)?;
                if self.files.remove(&path).is_none() && self.dirs.contains(&path) {
                    let prefix = format!("{path}/");
                    if self.files.keys().any(|k| k.starts_with(&prefix))
                        || self.dirs.iter().any(|d| d.starts_with(&prefix))
                    {
                        return Err(err(FsErrorKind::Io, &path, None, "directory not empty"));
                    }
                    self.dirs.remove(&path);
                }
                Ok(FsResult::Done)
            }
            FsOp::Rename { from, to } => {
                self.check(&from)?;
                self.check(&to)?;
                let f =
                    self.files.remove(&from).ok_or_else(|| err(FsErrorKind::NotFound, &from, None, "no such file"))?;
                self.make_parents(&to);
                self.files.insert(to.clone(), f);
                // Open handles follow the file.
                for p in handles.files.values_mut() {
                    if *p == from {
                        p.clone_from(&to);
                    }
                }
                Ok(FsResult::Done)
            }
            FsOp::List { dir } => {
                self.check(&dir)?;
                let prefix = format!("{dir}/");
                let mut names: BTreeSet<String> = BTreeSet::new();
                for p in self.files.keys().chain(self.dirs.iter()) {
                    if let Some(rest) = p.strip_prefix(&prefix) {
                        names.insert(rest.split('/').next().unwrap_or(rest).to_string());
                    }
                }
                Ok(FsResult::Listed { names: names.into_iter().collect() })
            }
        }
    }

    fn latency(&mut self) -> u64 {
        self.rng.range(self.faults.latency_min_ns, self.faults.latency_max_ns.max(self.faults.latency_min_ns))
    }
}

/// Open files of one FS block life.
#[derive(Debug, Default)]
struct Handles {
    files: BTreeMap<FileHandle, String>,
    next: FileHandle,
}

impl Handles {
    fn open(&mut self, path: String) -> FileHandle {
        self.next = self.next.wrapping_add(1).max(1);
        self.files.insert(self.next, path);
        self.next
    }
    fn path(&self, h: FileHandle) -> Result<String, FsError> {
        self.files
            .get(&h)
            .cloned()
            .ok_or_else(|| err(FsErrorKind::BadHandle, &format!("<handle {h}>"), None, "no open file with this handle"))
    }
}

/// The simulator's FS block over a [`SimDisk`].
pub struct SimFsBlock {
    disk: SharedDisk,
    handles: Handles,
    /// Per file (or path): when its last reply is due, so replies on one
    /// file keep their order whatever the latencies drawn.
    last_due_ns: BTreeMap<String, u64>,
}

impl SimFsBlock {
    pub fn new(disk: SharedDisk) -> SimFsBlock {
        SimFsBlock { disk, handles: Handles::default(), last_due_ns: BTreeMap::new() }
    }
}

impl Block<Signal> for SimFsBlock {
    fn on_signal(&mut self, env: Envelope<Signal>, ctx: &mut Ctx<'_, Signal>) {
        let Signal::Fs(fs) = env.signal else { return };
        let FsSignal::Req { req_id, op } = *fs else { return };
        let key = match &op {
            FsOp::Open { path, .. } | FsOp::Remove { path } => path.clone(),
            FsOp::Rename { from, .. } => from.clone(),
            FsOp::List { dir } => dir.clone(),
            FsOp::Write { file, .. } | FsOp::Read { file, .. } | FsOp::Sync { file } | FsOp::Close { file } => {
                self.handles.files.get(file).cloned().unwrap_or_default()
            }
        };
        let (reply, latency) = {
            let mut disk = self.disk.lock().unwrap_or_else(|e| e.into_inner());
            let r = disk.execute(op, &mut self.handles);
            (r, disk.latency())
        };
        let signal = match reply {
            Ok(result) => FsSignal::Conf { req_id, result },
            Err(error) => FsSignal::Ref { req_id, error },
        };
        let now = ctx.now_ns();
        let due = (now + latency).max(self.last_due_ns.get(&key).copied().unwrap_or(0));
        self.last_due_ns.insert(key, due);
        let signal = Signal::Fs(Box::new(signal));
        if due == now {
            ctx.send(env.from, signal);
        } else {
            ctx.send_delayed(env.from, signal, due - now);
        }
    }
}

#[cfg(test)]
mod tests;
