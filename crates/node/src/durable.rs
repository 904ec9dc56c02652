//! A data node with a data directory: restart from its files, then run with
//! REDO logging, the schema file and the GCP (see norr-durability's
//! FORMATS.md for the files).
//!
//! The restart runs in the host before the blocks start (`build_durable`):
//! it reads the files through a [`DataDir`] (real files in the runtime, the
//! simulated disk in the simulator) and hands the restored state to the
//! blocks before their first signal:
//! 1. the system file: the last complete GCI `g`, the restart point;
//! 2. the schema file: the tables (DICT, TC, LQH);
//! 3. each LQH's REDO log part: every record of a GCI up to `g`, in log
//!    order, replayed into storage; then the indexes are built;
//! 4. TCs tag commits above every GCI the logs hold; the REDO parts go on
//!    after `g`'s marker page (pages after it are blanked first).
//!
//! Nothing after `g` is applied, and nothing up to `g` may be missing: a
//! REDO log that ends before `g`'s marker, or a corrupt page before it,
//! is an error naming the file and offset, and the node does not start.

use crate::ckpt::{Ckpt, SysState};
use crate::Topology;
use norr_durability::redo::{self, RedoGeometry, RedoPart, RedoReader};
use norr_durability::schema::{self, SchemaSnapshot};
use norr_durability::sysfile::{SysFile, SysFileStore, PATHS};
use norr_kernel::{NodeId, Scheduler};
use norr_knobs::Knobs;
use norr_signals::ckpt::Gci;
use norr_signals::{block, Signal};
use norr_txn::{dict::Dict, lqh::Lqh, tc::Tc};
use std::time::{Duration, Instant};

/// Read access to a node's data directory for the restart.
pub trait DataDir {
    /// The whole file; None if it does not exist.
    fn read(&self, path: &str) -> Result<Option<Vec<u8>>, String>;
    /// `len` bytes at `offset`, zeros past the end (REDO files are read in
    /// pages; a never-written page reads as blank).
    fn read_at(&self, path: &str, offset: u64, len: u32) -> Result<Vec<u8>, String>;
    /// Remove a file if present (durably).
    fn remove(&self, path: &str) -> Result<(), String>;
}

/// What a restart did, for the log.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RestoreReport {
    /// The GCI the node recovered to (0: nothing complete yet, a new node).
    pub gci: Gci,
    /// GCIs handed out from here on start above this.
    pub start_gci: Gci,
    pub tables: usize,
    pub redo_records: u64,
    pub redo_pages: u64,
    pub read_schema: Duration,
    pub apply_redo: Duration,
    pub build_indexes: Duration,
}

impl std::fmt::Display for RestoreReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.gci == 0 {
            return write!(f, "no complete global checkpoint on disk: starting empty");
        }
        write!(
            f,
            "recovered to GCI {}: {} tables; {} REDO records from {} pages; read schema {:.3} s, apply REDO {:.3} s, rebuild indexes {:.3} s",
            self.gci,
            self.tables,
            self.redo_records,
            self.redo_pages,
            self.read_schema.as_secs_f64(),
            self.apply_redo.as_secs_f64(),
            self.build_indexes.as_secs_f64()
        )
    }
}

fn geometry(knobs: &Knobs) -> RedoGeometry {
    RedoGeometry::new(knobs.redo_files, knobs.redo_file_bytes)
}

/// Read a REDO part's records of GCIs `1..=gci` into `lqh`; the part to
/// continue writing.
fn restore_redo(
    dir: &dyn DataDir,
    knobs: &Knobs,
    part: u32,
    gci: Gci,
    lqh: &mut Lqh,
    report: &mut RestoreReport,
) -> Result<(RedoPart, Gci), String> {
    let geo = geometry(knobs);
    let buffer = knobs.redo_buffer_bytes as usize;
    if gci == 0 {
        // Nothing was ever complete: whatever the files hold is not
        // durable. Start a new log (old pages could look like a head).
        for f in 0..geo.files {
            dir.remove(&redo::file_path(part, f))?;
        }
        return Ok((RedoPart::create(part, geo, buffer), 0));
    }
    let mut firsts = Vec::new();
    for rd in redo::first_page_reads(&geo) {
        firsts.push((rd.file_no, dir.read_at(&redo::file_path(part, rd.file_no), rd.offset, rd.len)?));
    }
    let head = match redo::choose_head_file(&geo, part, &firsts).map_err(|e| e.to_string())? {
        Some(f) => {
            let mut bytes = dir.read(&redo::file_path(part, f))?.unwrap_or_default();
            bytes.resize(geo.file_bytes as usize, 0);
            Some(redo::scan_head_file(&geo, part, f, &bytes).map_err(|e| e.to_string())?)
        }
        None => None,
    };
    let mut reader = RedoReader::new(geo, part, head, 1, gci);
    let mut out = Vec::new();
    while let Some(rd) = reader.next_read() {
        let bytes = dir.read_at(&redo::file_path(part, rd.file_no), rd.offset, rd.len)?;
        reader.feed(rd, &bytes, &mut out).map_err(|e| e.to_string())?;
        for r in out.drain(..) {
            report.redo_records += 1;
            lqh.restore_record(r).map_err(|e| format!("REDO replay: {e}"))?;
        }
    }
    let rec = reader.finish().map_err(|e| e.to_string())?;
    report.redo_pages += rec.pages_read;
    Ok((RedoPart::resume(part, geo, buffer, rec.resume), rec.max_gci_seen))
}

/// Build a data node's blocks from its data directory (see the module
/// doc); the host adds FS (on the same directory) and starts it.
/// `topo`: Some for a cluster node (DIH added), None for a node on its own.
pub fn build_durable(
    node: NodeId,
    topo: Option<&Topology>,
    knobs: &Knobs,
    dir: &dyn DataDir,
) -> Result<(Scheduler<Signal>, RestoreReport), String> {
    let mut report = RestoreReport::default();
    let t0 = Instant::now();
    let load = SysFileStore::load(dir.read(PATHS[0])?.as_deref(), dir.read(PATHS[1])?.as_deref())
        .map_err(|e| e.to_string())?;
    let (sysfile, store) = (load.sysfile, load.store);
    if let Some(s) = &sysfile {
        if s.node_id != node {
            return Err(format!("the system file belongs to node {}, not node {node}", s.node_id));
        }
    }
    let gci = sysfile.as_ref().map_or(0, |s| s.last_complete_gci);
    let snap = match dir.read(schema::SCHEMA_FILE)? {
        Some(b) => schema::recover(Some(&b), None).map_err(|e| e.to_string())?.schema,
        None => SchemaSnapshot::default(),
    };
    let defs: Vec<_> = snap.tables.values().cloned().collect();
    report.read_schema = t0.elapsed();
    report.tables = defs.len();

    let lqh_n = norr_txn::LQH_INSTANCES;
    let mut lqhs = Vec::new();
    let mut max_seen = gci;
    let t1 = Instant::now();
    for i in 0..lqh_n {
        let mut lqh = Lqh::new(node, i, lqh_n, knobs);
        lqh.restore_tables(&defs).map_err(|e| format!("restoring the tables: {e}"))?;
        let (part, seen) = restore_redo(dir, knobs, i as u32, gci, &mut lqh, &mut report)?;
        max_seen = max_seen.max(seen);
        lqh.enable_redo(part);
        lqhs.push(lqh);
    }
    report.apply_redo = t1.elapsed();
    let t2 = Instant::now();
    for lqh in &mut lqhs {
        lqh.restore_finish().map_err(|e| format!("rebuilding indexes: {e}"))?;
    }
    report.build_indexes = t2.elapsed();
    report.gci = gci;
    report.start_gci = max_seen + 1;

    let mut s = Scheduler::new(node, knobs.job_buffer_bound);
    for i in 0..knobs.tc_instances.max(1) {
        let mut tc = Tc::new(node, i, lqh_n, knobs);
        tc.restore_tables(&defs);
        tc.set_start_gci(report.start_gci);
        s.add_block(block::TC, i, Box::new(tc));
    }
    for (i, lqh) in lqhs.into_iter().enumerate() {
        s.add_block(block::LQH, i as u16, Box::new(lqh));
    }
    let mut dict = Dict::new(node, lqh_n, knobs);
    dict.enable_persistence();
    dict.restore_schema(&snap);
    s.add_block(block::DICT, 0, Box::new(dict));
    let nodes = match topo {
        Some(t) => {
            crate::add_dih(&mut s, t, knobs);
            t.node_groups.iter().flatten().copied().collect()
        }
        None => vec![node],
    };
    let sys = SysState { sysfile: sysfile.unwrap_or_else(|| SysFile::new(node)), store };
    let ckpt = Ckpt::new(node, nodes, knobs, report.start_gci, gci).with_sysfile(sys);
    s.add_block(block::CKPT, 0, Box::new(ckpt));
    s.deliver(crate::ckpt::start_signal(node)).map_err(|_| "cannot start CKPT".to_string())?;
    Ok((s, report))
}

/// A data directory on the local file system (the runtime's).
pub struct StdDataDir(pub std::path::PathBuf);

impl DataDir for StdDataDir {
    fn read(&self, path: &str) -> Result<Option<Vec<u8>>, String> {
        match std::fs::read(self.0.join(path)) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("cannot read {path}: {e}")),
        }
    }

    fn read_at(&self, path: &str, offset: u64, len: u32) -> Result<Vec<u8>, String> {
        use std::io::{Read, Seek};
        let mut buf = vec![0u8; len as usize];
        let mut f = match std::fs::File::open(self.0.join(path)) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(buf),
            Err(e) => return Err(format!("cannot open {path}: {e}")),
        };
        f.seek(std::io::SeekFrom::Start(offset)).map_err(|e| format!("cannot read {path} at {offset}: {e}"))?;
        let mut got = 0;
        while got < buf.len() {
            match f.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("cannot read {path} at {}: {e}", offset + got as u64)),
            }
        }
        Ok(buf)
    }

    fn remove(&self, path: &str) -> Result<(), String> {
        match std::fs::remove_file(self.0.join(path)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(format!("cannot remove {path}: {e}")),
        }
    }
}
