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
use crate::lcp::LcpCoordinator;
use crate::Topology;
use norr_durability::lcp;
use norr_durability::redo::{self, RedoGeometry, RedoPart, RedoReader};
use norr_durability::schema::{self, SchemaSnapshot};
use norr_durability::sysfile::{NodeRestartState, SysFile, SysFileStore, PATHS};
use norr_durability::CrashPoints;
use norr_kernel::{BlockRef, NodeId, Scheduler};
use norr_knobs::Knobs;
use norr_signals::ckpt::Gci;
use norr_signals::schema::{PartitionId, TableDef, TableId};
use norr_signals::{block, Signal};
use norr_txn::lqh::{Lqh, RollForward};
use norr_txn::{dict::Dict, tc::Tc};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Read access to a node's data directory for the restart.
pub trait DataDir {
    /// The whole file; None if it does not exist.
    fn read(&self, path: &str) -> Result<Option<Vec<u8>>, String>;
    /// `len` bytes at `offset`, zeros past the end (REDO files are read in
    /// pages; a never-written page reads as blank).
    fn read_at(&self, path: &str, offset: u64, len: u32) -> Result<Vec<u8>, String>;
    /// Remove a file, or an empty directory, if present (durably).
    fn remove(&self, path: &str) -> Result<(), String>;
    /// Names of the entries of a directory, sorted (empty if it does not
    /// exist).
    fn list(&self, dir: &str) -> Result<Vec<String>, String>;
}

/// What a restart did, for the log.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RestoreReport {
    /// The GCI the node recovered to (0: nothing complete yet, a new node).
    pub gci: Gci,
    /// GCIs handed out from here on start above this.
    pub start_gci: Gci,
    pub tables: usize,
    /// Partitions restored from a local checkpoint, and what they read.
    pub lcp_partitions: u64,
    pub lcp_rows: u64,
    pub lcp_bytes: u64,
    /// Newest local checkpoint round recorded in the system file.
    pub lcp_id: u64,
    pub redo_records: u64,
    /// REDO records of an older life of a table's rows (before a TRUNCATE
    /// or rebuilding ALTER) or of a table version never made durable.
    pub redo_skipped: u64,
    /// Partitions whose checkpoint was not read: a later TRUNCATE or
    /// rebuilding ALTER in the REDO log replaced its rows.
    pub lcp_reset_partitions: u64,
    pub redo_pages: u64,
    /// Checkpoint files of tables the schema does not hold, removed.
    pub dropped_table_files: u64,
    /// Checkpoint files that could not be used (a newer round than the
    /// restart point, a torn control file): the restore used older ones.
    pub warnings: Vec<String>,
    pub read_schema: Duration,
    pub read_checkpoint: Duration,
    pub apply_redo: Duration,
    pub build_indexes: Duration,
    /// The files hold a complete copy of the node's partitions up to `gci`
    /// (false: the node was in a node restart; it must copy again).
    pub restorable: bool,
    /// GCIs above `gci` the files can also restore to (a cluster node
    /// whose system file missed the last GCP records: its REDO log holds
    /// their saves). The node's LQHs keep those records until the cluster
    /// decides where it restarts (`Lqh::set_roll_forward`).
    pub reachable: Vec<Gci>,
}

impl std::fmt::Display for RestoreReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.gci == 0 {
            return write!(f, "no complete global checkpoint on disk: starting empty");
        }
        write!(
            f,
            "recovered to GCI {}: {} tables; {} partitions from local checkpoints (round {}, {} rows, {} bytes); \
             {} REDO records from {} pages; read schema {:.3} s, read checkpoint {:.3} s ({:.1} MB/s), \
             apply REDO {:.3} s, rebuild indexes {:.3} s",
            self.gci,
            self.tables,
            self.lcp_partitions,
            self.lcp_id,
            self.lcp_rows,
            self.lcp_bytes,
            self.redo_records,
            self.redo_pages,
            self.read_schema.as_secs_f64(),
            self.read_checkpoint.as_secs_f64(),
            self.lcp_bytes as f64 / 1e6 / self.read_checkpoint.as_secs_f64().max(1e-9),
            self.apply_redo.as_secs_f64(),
            self.build_indexes.as_secs_f64()
        )?;
        if !self.restorable {
            // The GCI above is the system file's; the rows are not all
            // there (the copy from a live replica had not been covered by a
            // local checkpoint), so the cluster may restart below it.
            write!(
                f,
                "; an INCOMPLETE copy: this node was copying from a replica when it stopped, \
                 so it copies again from a node whose files are complete"
            )?;
        }
        Ok(())
    }
}

fn geometry(knobs: &Knobs) -> RedoGeometry {
    RedoGeometry::new(knobs.redo_files, knobs.redo_file_bytes)
}

/// What the reset records of one REDO part (TRUNCATE, rebuilding ALTER
/// TABLE; `RedoOp::Reset`) mean for a restart. Records are numbered in log
/// order (their ordinal among the records of GCI `1..=g`).
#[derive(Debug, Default)]
struct RedoResets {
    /// A reset to a table version the schema file does not hold (the DDL
    /// was not answered, its schema write never became durable): this and
    /// every later record of the table belong to that version and are
    /// skipped; the table is restored as it was before.
    cut: BTreeMap<TableId, u64>,
    /// The last reset of each table before any cut: (ordinal, GCI).
    last: BTreeMap<TableId, (u64, Gci)>,
    /// Partitions whose last reset applies (it is not older than the
    /// partition's checkpoint): their checkpoint is not read, and records
    /// up to the reset's ordinal are skipped (older lives of the rows).
    skip_through: BTreeMap<(TableId, PartitionId), u64>,
}

impl RedoResets {
    /// Skip this record (of ordinal `n`)?
    fn skips(&self, n: u64, r: &redo::RedoRecord) -> bool {
        r.op == redo::RedoOp::Reset
            || self.cut.get(&r.table).is_some_and(|&c| n >= c)
            || self.skip_through.get(&(r.table, r.partition)).is_some_and(|&s| n <= s)
    }
}

/// Read a REDO part's records of GCIs `1..=gci` in log order, each with
/// its ordinal. Returns what the reader recovered. `gci` must be above 0.
fn read_redo(
    dir: &dyn DataDir,
    geo: RedoGeometry,
    part: u32,
    gci: Gci,
    ahead_pages: u64,
    each: &mut dyn FnMut(u64, redo::LoggedRecord) -> Result<(), String>,
) -> Result<redo::RedoRecovered, String> {
    let mut firsts = Vec::new();
    for rd in redo::first_page_reads(&geo) {
        firsts.push((rd.file_no, dir.read_at(&redo::file_path(part, rd.file_no), rd.offset, rd.len)?));
    }
    let head = match redo::choose_head_file(&geo, part, &firsts).map_err(|e| e.to_string())? {
        Some(f) => {
            let path = redo::file_path(part, f);
            let found = redo::scan_head_file_at(&geo, part, f, &mut |offset, len| dir.read_at(&path, offset, len))?;
            Some(found.map_err(|e| e.to_string())?)
        }
        None => None,
    };
    let mut reader = RedoReader::new(geo, part, head, 1, gci).with_lookahead(ahead_pages);
    let mut out = Vec::new();
    let mut n = 0u64;
    while let Some(rd) = reader.next_read() {
        let bytes = dir.read_at(&redo::file_path(part, rd.file_no), rd.offset, rd.len)?;
        reader.feed(rd, &bytes, &mut out).map_err(|e| e.to_string())?;
        for r in out.drain(..) {
            each(n, r)?;
            n += 1;
        }
    }
    reader.finish().map_err(|e| e.to_string())
}

/// First pass over a REDO part: its resets (see [`RedoResets`]).
fn scan_resets(dir: &dyn DataDir, knobs: &Knobs, part: u32, gci: Gci, defs: &[TableDef]) -> Result<RedoResets, String> {
    let mut resets = RedoResets::default();
    if gci == 0 {
        return Ok(resets);
    }
    let versions: BTreeMap<TableId, u32> = defs.iter().map(|d| (d.id, d.version)).collect();
    read_redo(dir, geometry(knobs), part, gci, 0, &mut |n, r| {
        if r.record.op != redo::RedoOp::Reset {
            return Ok(());
        }
        let t = r.record.table;
        let Some(&schema_version) = versions.get(&t) else { return Ok(()) };
        let version = match r.record.values.first() {
            Some(norr_signals::Value::Int(v)) => {
                u32::try_from(*v).map_err(|_| format!("REDO reset of table {t}: bad version {v}"))?
            }
            other => return Err(format!("REDO reset of table {t} without a version: {other:?}")),
        };
        if resets.cut.contains_key(&t) {
            return Ok(());
        }
        if version > schema_version {
            resets.cut.insert(t, n);
        } else {
            resets.last.insert(t, (n, r.gci));
        }
        Ok(())
    })?;
    Ok(resets)
}

/// Read a REDO part's records of GCIs `1..=gci` into `lqh` (skipping what
/// `resets` makes obsolete); the part to continue writing.
fn restore_redo(
    dir: &dyn DataDir,
    knobs: &Knobs,
    part: u32,
    at: RestorePoint,
    resets: &RedoResets,
    lqh: &mut Lqh,
    report: &mut RestoreReport,
) -> Result<(RedoPart, Gci, RollForward), String> {
    let gci = at.gci;
    // A cluster node reads its REDO log past the restart point too: the
    // cluster may restart to a later GCI (see `RestoreReport::reachable`).
    // Bounded: normally a GCP interval or two of writes.
    let ahead_pages = if at.cluster { 2 * knobs.redo_buffer_bytes / redo::DEFAULT_PAGE_BYTES as u64 } else { 0 };
    let geo = geometry(knobs);
    let buffer = knobs.redo_buffer_bytes as usize;
    if gci == 0 {
        // Nothing was ever complete: whatever the files hold is not
        // durable. Start a new log (old pages could look like a head).
        for f in 0..geo.files {
            dir.remove(&redo::file_path(part, f))?;
        }
        return Ok((RedoPart::create(part, geo, buffer), 0, RollForward::default()));
    }
    let rec = read_redo(dir, geo, part, gci, ahead_pages, &mut |n, r| {
        report.redo_records += 1;
        if resets.skips(n, &r.record) {
            report.redo_skipped += 1;
            return Ok(());
        }
        lqh.restore_record(r).map_err(|e| format!("REDO replay: {e}"))
    })?;
    report.redo_pages += rec.pages_read;
    let roll = RollForward { records: rec.ahead, resumes: rec.ahead_resumes.into_iter().collect() };
    Ok((RedoPart::resume(part, geo, buffer, rec.resume), rec.max_gci_seen, roll))
}

/// The GCIs above the restored one that every REDO part can roll forward
/// to: a marker in each, and no TRUNCATE or rebuilding ALTER (a reset
/// record) at or below it (a roll forward replays rows, not resets).
fn reachable_gcis(rolls: &[RollForward]) -> Vec<Gci> {
    let Some(first) = rolls.first() else { return Vec::new() };
    let first_reset = rolls
        .iter()
        .flat_map(|r| r.records.iter())
        .filter(|r| r.record.op == redo::RedoOp::Reset)
        .map(|r| r.gci)
        .min()
        .unwrap_or(Gci::MAX);
    first
        .resumes
        .keys()
        .copied()
        .filter(|g| *g < first_reset && rolls.iter().all(|r| r.resumes.contains_key(g)))
        .collect()
}

/// The LCP id a checkpoint file name carries (`<id>.data`, `<id>.ctl`).
fn lcp_id_of(name: &str) -> Option<u64> {
    name.strip_suffix(".data").or_else(|| name.strip_suffix(".ctl")).and_then(|s| s.parse().ok())
}

/// Remove the checkpoint files of tables the schema does not hold: tables
/// dropped (or created and not committed) before the node stopped, whose
/// files DICT had not deleted yet. No restart needs them, and a table
/// created later must not find them. Returns the files removed.
fn remove_unknown_tables_files(dir: &dyn DataDir, snap: &SchemaSnapshot) -> Result<u64, String> {
    let mut removed = 0;
    for name in dir.list(lcp::LCP_DIR)? {
        // Only `lcp/<table id>`: anything else is not ours to remove.
        let Ok(table) = name.parse::<norr_signals::TableId>() else { continue };
        if snap.tables.contains_key(&table) {
            continue;
        }
        let tdir = lcp::table_dir(table);
        for part in dir.list(&tdir)? {
            let pdir = format!("{tdir}/{part}");
            for f in dir.list(&pdir)? {
                dir.remove(&format!("{pdir}/{f}"))?;
                removed += 1;
            }
            dir.remove(&pdir)?;
        }
        dir.remove(&tdir)?;
    }
    Ok(removed)
}

/// What a restore of checkpoints goes by.
#[derive(Debug, Clone, Copy)]
struct RestorePoint {
    /// The restart GCI (the system file's last complete GCI).
    gci: Gci,
    /// The newest checkpoint round the system file records.
    recorded_lcp: u64,
    /// A cluster node (it can copy from a live replica instead).
    cluster: bool,
}

/// Restore every partition of instance `lqh` from its local checkpoints
/// (FORMATS.md, "LCP control file"): the restore plan's data files in chain
/// order, every page verified; files no restart needs are removed. Returns
/// the highest LCP id found on disk.
fn restore_lcps(
    dir: &dyn DataDir,
    defs: &[TableDef],
    at: RestorePoint,
    resets: &mut RedoResets,
    lqh: &mut Lqh,
    report: &mut RestoreReport,
) -> Result<u64, String> {
    let RestorePoint { gci, recorded_lcp, cluster } = at;
    let mut max_id = 0;
    let mut entries = Vec::new();
    for def in defs {
        for p in 0..def.partitions {
            if norr_signals::partition::lqh_instance(p, norr_txn::LQH_INSTANCES) != lqh.instance() {
                continue;
            }
            let pdir = lcp::partition_dir(def.id, p);
            let names = dir.list(&pdir)?;
            max_id = names.iter().filter_map(|n| lcp_id_of(n)).fold(max_id, u64::max);
            if gci == 0 {
                // No GCI was ever complete: no checkpoint can be used.
                for n in &names {
                    dir.remove(&format!("{pdir}/{n}"))?;
                }
                continue;
            }
            // Only rounds the system file records: REDO was released for
            // them alone, so a newer (unrecorded) checkpoint is never
            // needed, and may hold GCIs beyond the restart point.
            let mut controls = Vec::new();
            let mut newer_version = None;
            for n in names.iter().filter(|n| n.ends_with(".ctl") && lcp_id_of(n).is_some_and(|id| id <= recorded_lcp)) {
                let path = format!("{pdir}/{n}");
                let bytes = dir.read(&path)?.ok_or_else(|| format!("{path} vanished"))?;
                // A checkpoint of a table version the schema file does not
                // hold (an ALTER whose schema write never became durable)
                // has rows of a layout the table does not have.
                match lcp::LcpControl::decode(&bytes, &path) {
                    Ok(c) if c.table_version > def.version => {
                        report.warnings.push(format!(
                            "checkpoint not used: {path} is of table version {}, the schema holds {}",
                            c.table_version, def.version
                        ));
                        newer_version = Some(path);
                    }
                    _ => controls.push((n.clone(), bytes)),
                }
            }
            let plan = lcp::plan_restore(def.id, p, &names, &controls, gci).map_err(|e| e.to_string())?;
            for rejected in &plan.rejected {
                report.warnings.push(format!("checkpoint not used: {rejected}"));
            }
            // The table's last reset in the REDO log (TRUNCATE, rebuilding
            // ALTER) replaces the checkpoint's rows if the checkpoint is not
            // newer: its start GCI is at most the reset's (a round that began
            // after the reset has a higher one, see `redo_log_reset`).
            let from_gci = if plan.lcp_id.is_some() { plan.redo_from_gci } else { 0 };
            if let Some(&(ordinal, reset_gci)) = resets.last.get(&def.id).filter(|(_, g)| *g >= from_gci) {
                resets.skip_through.insert((def.id, p), ordinal);
                report.lcp_reset_partitions += 1;
                // Every checkpoint file of the partition holds an older life
                // of its rows: the REDO log from the reset on has all of the
                // current one (it is kept until a later round is recorded).
                let _ = reset_gci;
                for n in &names {
                    dir.remove(&format!("{pdir}/{n}"))?;
                }
                continue;
            }
            // A newer checkpoint of a recorded round that cannot be used
            // (a corrupt or torn control file, a missing data file): the
            // REDO log was released up to that round's start once it was
            // recorded, so the older checkpoint the plan fell back to may
            // miss commits that are nowhere else any more.
            if let Some(chosen) = plan.lcp_id {
                let newer_bad = plan.rejected.iter().find(|e| {
                    let name = e.path.rsplit('/').next().unwrap_or("");
                    lcp_id_of(name).is_some_and(|id| id > chosen && id <= recorded_lcp)
                });
                if let Some(bad) = newer_bad {
                    let why = format!(
                        "{bad}; the older checkpoint {pdir}/{chosen}.ctl needs REDO from GCI {}, which the log \
                         no longer holds in full (it was released when the newer round was recorded)",
                        plan.redo_from_gci
                    );
                    if !cluster {
                        return Err(format!(
                            "cannot restore table {} partition {p} without losing commits: {why}. Refusing to start: \
                             restore the file, or start this node empty (a cluster node copies from a live replica)",
                            def.id
                        ));
                    }
                    // In a cluster the node copies everything from a live
                    // replica instead (its files are not a complete copy).
                    report.warnings.push(format!("{why}: the node copies its partitions from a live replica"));
                    report.restorable = false;
                }
            }
            let Some(lcp_id) = plan.lcp_id else {
                if let Some(path) = newer_version {
                    // The rows of the older version are nowhere else.
                    return Err(format!(
                        "cannot restore table {} partition {p}: {path} is of a table version newer than the schema \
                         file's {} and no checkpoint of that version remains",
                        def.id, def.version
                    ));
                }
                continue;
            };
            // The largest file of the chain (its full image, usually) is
            // about the partition's size.
            let rows = plan.steps.iter().map(|s| s.data.rows).max().unwrap_or(0);
            lqh.restore_reserve_rows(def.id, p, rows).map_err(|e| format!("restoring {pdir}: {e}"))?;
            for step in &plan.steps {
                let path = step.ident.data_path();
                let mut rd = lcp::LcpDataReader::new(step.ident, step.data, step.rows_of, step.tombstones_of);
                while let Some((offset, len)) = rd.next_read() {
                    let bytes = dir.read_at(&path, offset, len)?;
                    rd.feed(offset, &bytes, &mut entries).map_err(|e| e.to_string())?;
                    for e in entries.drain(..) {
                        if let lcp::LcpEntry::Row { .. } = e {
                            report.lcp_rows += 1;
                        }
                        lqh.restore_lcp_entry(def.id, p, e).map_err(|e| format!("restoring {path}: {e}"))?;
                    }
                    report.lcp_bytes += len as u64;
                }
                rd.finish().map_err(|e| e.to_string())?;
            }
            let ctl_name = format!("{lcp_id}.ctl");
            let bytes = &controls.iter().find(|(n, _)| *n == ctl_name).expect("the plan's control was listed").1;
            let control = lcp::LcpControl::decode(bytes, &format!("{pdir}/{ctl_name}")).map_err(|e| e.to_string())?;
            lqh.restore_redo_from(def.id, p, plan.redo_from_gci);
            lqh.restore_lcp_control(Some(control), max_id);
            report.lcp_partitions += 1;
            for path in &plan.obsolete {
                dir.remove(path)?;
            }
        }
    }
    lqh.restore_lcp_control(None, max_id);
    Ok(max_id)
}

/// Build a data node's blocks from its data directory (see the module
/// doc); the host adds FS (on the same directory) and starts it.
/// `topo`: Some for a cluster node (DIH, QMGR added), None for a node on
/// its own.
pub fn build_durable(
    node: NodeId,
    topo: Option<&Topology>,
    knobs: &Knobs,
    dir: &dyn DataDir,
) -> Result<(Scheduler<Signal>, RestoreReport), String> {
    build_durable_full(node, topo, knobs, dir, &[], &CrashPoints::off())
}

/// `build_durable` with crash points armed in every block that writes
/// files (tests: the node panics "crash point reached: ..." there).
pub fn build_durable_with(
    node: NodeId,
    topo: Option<&Topology>,
    knobs: &Knobs,
    dir: &dyn DataDir,
    crash: &CrashPoints,
) -> Result<(Scheduler<Signal>, RestoreReport), String> {
    build_durable_full(node, topo, knobs, dir, &[], crash)
}

/// [`build_durable`] with extra QMGR subscribers (test kits).
pub fn build_durable_observed(
    node: NodeId,
    topo: Option<&Topology>,
    knobs: &Knobs,
    dir: &dyn DataDir,
    observers: &[BlockRef],
) -> Result<(Scheduler<Signal>, RestoreReport), String> {
    build_durable_full(node, topo, knobs, dir, observers, &CrashPoints::off())
}

/// [`build_durable`] with QMGR subscribers and crash points.
pub fn build_durable_full(
    node: NodeId,
    topo: Option<&Topology>,
    knobs: &Knobs,
    dir: &dyn DataDir,
    observers: &[BlockRef],
    crash: &CrashPoints,
) -> Result<(Scheduler<Signal>, RestoreReport), String> {
    let mut report = RestoreReport::default();
    let t0 = Instant::now();
    let load = SysFileStore::load(dir.read(PATHS[0])?.as_deref(), dir.read(PATHS[1])?.as_deref())
        .map_err(|e| e.to_string())?;
    let (sysfile, mut store) = (load.sysfile, load.store);
    store.crash = crash.clone();
    if let Some(s) = &sysfile {
        if s.node_id != node {
            return Err(format!("the system file belongs to node {}, not node {node}", s.node_id));
        }
    }
    let gci = sysfile.as_ref().map_or(0, |s| s.last_complete_gci);
    // The files are a complete copy of this node's partitions only if its
    // system file called it started (not in the middle of a node restart).
    report.restorable = sysfile
        .as_ref()
        .is_none_or(|s| s.nodes.iter().find(|i| i.node == node).is_none_or(|i| i.state == NodeRestartState::Started));
    let snap = match dir.read(schema::SCHEMA_FILE)? {
        Some(b) => SchemaSnapshot::decode(&b, schema::SCHEMA_FILE).map_err(|e| e.to_string())?,
        None => SchemaSnapshot::default(),
    };
    let defs: Vec<_> = snap.tables.values().cloned().collect();
    report.dropped_table_files = remove_unknown_tables_files(dir, &snap)?;
    report.read_schema = t0.elapsed();
    report.tables = defs.len();

    let lqh_n = norr_txn::LQH_INSTANCES;
    let mut lqhs = Vec::new();
    let mut max_seen = gci;
    let recorded_lcp = sysfile.as_ref().map_or(0, |s| s.last_lcp_id);
    let mut max_lcp_id = recorded_lcp;
    let at = RestorePoint { gci, recorded_lcp, cluster: topo.is_some() };
    let mut rolls = Vec::new();
    for i in 0..lqh_n {
        let mut lqh = Lqh::new(node, i, lqh_n, knobs);
        if topo.is_some() {
            lqh.in_cluster();
        }
        lqh.restore_tables(&defs).map_err(|e| format!("restoring the tables: {e}"))?;
        *lqh.lcp_crash_points_mut() = crash.clone();
        let t0 = Instant::now();
        let mut resets = scan_resets(dir, knobs, i as u32, gci, &defs)?;
        report.apply_redo += t0.elapsed();
        let t1 = Instant::now();
        max_lcp_id = max_lcp_id.max(restore_lcps(dir, &defs, at, &mut resets, &mut lqh, &mut report)?);
        report.read_checkpoint += t1.elapsed();
        let t2 = Instant::now();
        let (mut part, seen, roll) = restore_redo(dir, knobs, i as u32, at, &resets, &mut lqh, &mut report)?;
        *part.crash_points_mut() = crash.clone();
        report.apply_redo += t2.elapsed();
        max_seen = max_seen.max(seen);
        lqh.enable_redo(part);
        lqhs.push(lqh);
        rolls.push(roll);
    }
    if report.restorable {
        report.reachable = reachable_gcis(&rolls);
    }
    if let Some(&top) = report.reachable.last() {
        for (lqh, mut roll) in lqhs.iter_mut().zip(rolls) {
            roll.records.retain(|r| r.gci <= top);
            roll.resumes.retain(|g, _| report.reachable.contains(g));
            lqh.set_roll_forward(roll);
        }
    }
    report.lcp_id = sysfile.as_ref().map_or(0, |s| s.last_lcp_id);
    let t2 = Instant::now();
    for lqh in &mut lqhs {
        lqh.restore_finish().map_err(|e| format!("rebuilding indexes: {e}"))?;
    }
    report.build_indexes = t2.elapsed();
    report.gci = gci;
    report.start_gci = max_seen + 1;
    // A node restart copies only the rows changed since `gci` into the
    // restored tables it keeps, if the files are a complete copy.
    let restored_gci = (report.restorable && gci > 0).then_some(gci);
    for lqh in &mut lqhs {
        lqh.set_restored_gci(restored_gci);
    }

    let mut s = Scheduler::new(node, knobs.job_buffer_bound);
    for i in 0..knobs.tc_instances.max(1) {
        let mut tc = Tc::new(node, i, lqh_n, knobs);
        if topo.is_some() {
            // Restored replicas are not served before DIH's distribution
            // (`DistView::in_cluster`): the node copies from a live replica first.
            tc.in_cluster();
        }
        tc.restore_tables(&defs);
        tc.set_start_gci(report.start_gci);
        tc.set_complete_gci(gci);
        s.add_block(block::TC, i, Box::new(tc));
    }
    for (i, lqh) in lqhs.into_iter().enumerate() {
        s.add_block(block::LQH, i as u16, Box::new(lqh));
    }
    let mut dict = Dict::new(node, lqh_n, knobs);
    dict.enable_persistence();
    *dict.crash_points_mut() = crash.clone();
    dict.restore_schema(&snap);
    s.add_block(block::DICT, 0, Box::new(dict));
    let sys = SysState { sysfile: sysfile.unwrap_or_else(|| SysFile::new(node)), store };
    let mut coordinator = LcpCoordinator::new(node, knobs, max_lcp_id);
    coordinator.crash = crash.clone();
    match topo {
        Some(t) => {
            let ckpt = Ckpt::cluster(node, t.node_groups.clone(), knobs, report.start_gci, gci)
                .with_sysfile(sys, report.restorable)
                .with_reachable(report.reachable.clone())
                .with_lcp(coordinator);
            crate::add_cluster_blocks(&mut s, t, knobs, observers, ckpt, &defs, restored_gci);
        }
        None => {
            let ckpt = Ckpt::new(node, knobs, report.start_gci, gci).with_sysfile(sys, true).with_lcp(coordinator);
            s.add_block(block::CKPT, 0, Box::new(ckpt));
            s.deliver(crate::ckpt::start_signal(node)).map_err(|_| "cannot start CKPT".to_string())?;
        }
    }
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
        let full = self.0.join(path);
        let r = match std::fs::symlink_metadata(&full) {
            Ok(m) if m.is_dir() => std::fs::remove_dir(&full),
            _ => std::fs::remove_file(&full),
        };
        match r {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(format!("cannot remove {path}: {e}")),
        }
    }

    fn list(&self, dir: &str) -> Result<Vec<String>, String> {
        let rd = match std::fs::read_dir(self.0.join(dir)) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(format!("cannot list {dir}: {e}")),
        };
        let mut names = Vec::new();
        for e in rd {
            let e = e.map_err(|e| format!("cannot list {dir}: {e}"))?;
            names.push(e.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::RestoreReport;

    #[test]
    fn the_restart_line_says_when_the_files_are_an_incomplete_copy() {
        let complete = RestoreReport { gci: 42, restorable: true, ..RestoreReport::default() };
        let incomplete = RestoreReport { gci: 42, restorable: false, ..RestoreReport::default() };
        let (a, b) = (complete.to_string(), incomplete.to_string());
        assert!(a.starts_with("recovered to GCI 42:"), "{a}");
        assert!(!a.contains("INCOMPLETE"), "{a}");
        // Log readers take the GCI after "recovered to GCI " either way.
        assert!(b.starts_with("recovered to GCI 42:"), "{b}");
        assert!(b.contains("an INCOMPLETE copy"), "{b}");
        let empty = RestoreReport { gci: 0, restorable: false, ..RestoreReport::default() };
        assert_eq!(empty.to_string(), "no complete global checkpoint on disk: starting empty");
    }
}
