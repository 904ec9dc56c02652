//! The schema file and the DDL log: crash-safe DDL (seed 000, "DDL log";
//! MySQL 8's atomic DDL). A DDL statement is either fully done or fully
//! undone after a crash at any point.
//!
//! * `schema/schema.dat`: a sealed blob (kind SchemaFile) holding a postcard
//!   [`SchemaSnapshot`]: every table definition, the next table id, the
//!   auto-increment reservations, and the id of the last DDL it includes.
//!   Replaced atomically: written to `schema/schema.tmp`, synced, renamed.
//! * `schema/ddl.log`: sealed blobs (kind DdlEntry) back to back, each a
//!   postcard [`DdlEntry`], each appended with a sync before the step it
//!   announces.
//!
//! The protocol of one DDL (the DICT block drives it with [`DdlLogWriter`]):
//! 1. log `Begin { id, op }`;
//! 2. log `Commit { id }`: from here on the change is durable;
//! 3. post-commit actions (a dropped table's checkpoint files are deleted);
//! 4. log `Done { id }`.
//!
//! At start ([`recover`]): the snapshot plus every committed DDL after it is
//! the schema; a DDL begun but not committed is undone (any files it made
//! are deleted, `Abort` is logged); a DDL committed but not done has its
//! post-commit actions done again (they are idempotent) and `Done` logged.
//! Then a new snapshot is written and the log emptied.

use crate::crash::{points, CrashPoints};
use crate::crash_point;
use crate::error::FormatError;
use crate::frame::{open_blob, seal, Kind, BLOB_HEADER_BYTES, MAGIC};
use crate::sysfile::Crashed;
use norr_signals::{TableDef, TableId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Format version of DDL log entries.
pub const SCHEMA_VERSION: u16 = 1;
/// Format version of the schema file: 2 added `pending` (version 1 files
/// are read as having none).
pub const SCHEMA_FILE_VERSION: u16 = 2;
pub const SCHEMA_FILE: &str = "schema/schema.dat";
pub const SCHEMA_TMP: &str = "schema/schema.tmp";
pub const DDL_LOG: &str = "schema/ddl.log";

pub type DdlId = u64;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SchemaSnapshot {
    /// Every DDL with an id up to this is included.
    pub last_ddl_id: DdlId,
    pub next_table_id: TableId,
    /// By table id.
    pub tables: BTreeMap<TableId, TableDef>,
    /// Auto-increment values handed out up to (exclusive) this, per table:
    /// DICT reserves ranges and logs each reservation, so a restart never
    /// hands out a value twice.
    pub auto_inc: BTreeMap<TableId, u64>,
    /// A cluster node: the schema change the master DICT announced and has
    /// not ended (not in `tables` yet). It may have reached some nodes'
    /// storage before every node crashed: the master after a system restart
    /// makes it again everywhere (norr-txn's DICT).
    pub pending: Option<norr_signals::internal::SchemaChange>,
}

/// The schema file's body in format version 1 (no `pending`).
#[derive(Serialize, Deserialize)]
struct SchemaSnapshotV1 {
    last_ddl_id: DdlId,
    next_table_id: TableId,
    tables: BTreeMap<TableId, TableDef>,
    auto_inc: BTreeMap<TableId, u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum DdlOp {
    CreateTable(TableDef),
    DropTable {
        table: TableId,
    },
    /// Replace a table's definition (new columns, indexes, a rename; the
    /// version must be higher).
    AlterTable(TableDef),
    /// Values below `up_to` may have been handed out.
    AutoIncReserve {
        table: TableId,
        up_to: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum DdlEntry {
    Begin { id: DdlId, op: DdlOp },
    Commit { id: DdlId },
    Abort { id: DdlId },
    Done { id: DdlId },
}

impl DdlEntry {
    pub fn id(&self) -> DdlId {
        match self {
            DdlEntry::Begin { id, .. } | DdlEntry::Commit { id } | DdlEntry::Abort { id } | DdlEntry::Done { id } => {
                *id
            }
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let body = postcard::to_stdvec(self).expect("DDL entry encodes");
        let mut out = Vec::new();
        seal(Kind::DdlEntry, SCHEMA_VERSION, &body, &mut out);
        out
    }
}

impl SchemaSnapshot {
    pub fn encode(&self) -> Vec<u8> {
        let body = postcard::to_stdvec(self).expect("schema encodes");
        let mut out = Vec::new();
        seal(Kind::SchemaFile, SCHEMA_FILE_VERSION, &body, &mut out);
        out
    }

    pub fn decode(bytes: &[u8], path: &str) -> Result<SchemaSnapshot, FormatError> {
        let blob = open_blob(bytes, Kind::SchemaFile, SCHEMA_FILE_VERSION, path, 0)?;
        let bad =
            |e: postcard::Error| FormatError::new(path, BLOB_HEADER_BYTES as u64, format!("schema file body: {e}"));
        if blob.version == 1 {
            let v1: SchemaSnapshotV1 = postcard::from_bytes(blob.body).map_err(bad)?;
            return Ok(SchemaSnapshot {
                last_ddl_id: v1.last_ddl_id,
                next_table_id: v1.next_table_id,
                tables: v1.tables,
                auto_inc: v1.auto_inc,
                pending: None,
            });
        }
        postcard::from_bytes(blob.body).map_err(bad)
    }

    /// Apply a committed DDL. Errors mean the log contradicts the schema
    /// (corruption or a bug): the node must not guess.
    pub fn apply(&mut self, op: &DdlOp) -> Result<(), String> {
        match op {
            DdlOp::CreateTable(def) => {
                if self.tables.contains_key(&def.id) {
                    return Err(format!("create of table id {} which exists", def.id));
                }
                self.next_table_id = self.next_table_id.max(def.id + 1);
                self.tables.insert(def.id, def.clone());
            }
            DdlOp::DropTable { table } => {
                if self.tables.remove(table).is_none() {
                    return Err(format!("drop of table id {table} which does not exist"));
                }
                self.auto_inc.remove(table);
            }
            DdlOp::AlterTable(def) => match self.tables.get_mut(&def.id) {
                Some(old) if def.version > old.version => *old = def.clone(),
                Some(old) => {
                    return Err(format!("alter of table {} to version {} from {}", def.id, def.version, old.version))
                }
                None => return Err(format!("alter of table id {} which does not exist", def.id)),
            },
            DdlOp::AutoIncReserve { table, up_to } => {
                let e = self.auto_inc.entry(*table).or_insert(0);
                *e = (*e).max(*up_to);
            }
        }
        Ok(())
    }
}

/// Something recovery or a DDL's post-commit step must do on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DdlAction {
    /// Delete every checkpoint file of the table (`lcp/<table>/...`): list
    /// the directory tree and remove each file, then the directories.
    RemoveTableFiles { table: TableId },
}

/// The post-commit actions of a DDL (also what undoing an uncommitted one
/// must clean up, for a create).
pub fn post_commit_actions(op: &DdlOp) -> Vec<DdlAction> {
    match op {
        DdlOp::DropTable { table } => vec![DdlAction::RemoveTableFiles { table: *table }],
        _ => vec![],
    }
}

fn undo_actions(op: &DdlOp) -> Vec<DdlAction> {
    match op {
        // A table that never committed may have had checkpoint files made.
        DdlOp::CreateTable(def) => vec![DdlAction::RemoveTableFiles { table: def.id }],
        _ => vec![],
    }
}

/// What a start finds.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaRecovery {
    /// The schema after every committed DDL.
    pub schema: SchemaSnapshot,
    /// Do these (in order), then append `log_entries` to the log, then
    /// write `schema` as the new schema file and empty the log.
    pub actions: Vec<DdlAction>,
    pub log_entries: Vec<DdlEntry>,
    /// DDLs undone (begun, never committed) and finished (committed, not done).
    pub undone: Vec<DdlId>,
    pub finished: Vec<DdlId>,
    /// Bytes of the log holding whole entries (a torn last entry after them
    /// was never acknowledged).
    pub log_valid_len: u64,
}

/// Recover the schema from the schema file and the DDL log (None: missing).
pub fn recover(schema_file: Option<&[u8]>, log: Option<&[u8]>) -> Result<SchemaRecovery, FormatError> {
    let mut schema = match schema_file {
        Some(b) => SchemaSnapshot::decode(b, SCHEMA_FILE)?,
        None => SchemaSnapshot::default(),
    };
    let log = log.unwrap_or(&[]);
    let (entries, valid_len) = read_log(log)?;
    let mut begun: BTreeMap<DdlId, DdlOp> = BTreeMap::new();
    let mut committed: BTreeMap<DdlId, DdlOp> = BTreeMap::new();
    let mut last = schema.last_ddl_id;
    for (offset, e) in entries {
        let id = e.id();
        if id <= schema.last_ddl_id {
            continue; // in the schema file already
        }
        let bad = |what: String| FormatError::new(DDL_LOG, offset, what);
        match e {
            DdlEntry::Begin { op, .. } => {
                if id <= last {
                    return Err(bad(format!("DDL {id} begins after DDL {last}")));
                }
                last = id;
                begun.insert(id, op);
            }
            DdlEntry::Commit { .. } => {
                let op = begun.remove(&id).ok_or_else(|| bad(format!("commit of DDL {id} which did not begin")))?;
                schema.apply(&op).map_err(|w| bad(format!("DDL {id}: {w}")))?;
                committed.insert(id, op);
            }
            DdlEntry::Abort { .. } => {
                begun.remove(&id).ok_or_else(|| bad(format!("abort of DDL {id} which did not begin")))?;
            }
            DdlEntry::Done { .. } => {
                committed.remove(&id).ok_or_else(|| bad(format!("done of DDL {id} which did not commit")))?;
            }
        }
    }
    schema.last_ddl_id = last;
    let mut r = SchemaRecovery {
        schema,
        actions: vec![],
        log_entries: vec![],
        undone: vec![],
        finished: vec![],
        log_valid_len: valid_len,
    };
    for (id, op) in begun {
        r.actions.extend(undo_actions(&op));
        r.log_entries.push(DdlEntry::Abort { id });
        r.undone.push(id);
    }
    for (id, op) in committed {
        r.actions.extend(post_commit_actions(&op));
        r.log_entries.push(DdlEntry::Done { id });
        r.finished.push(id);
    }
    Ok(r)
}

/// Parse the log: whole entries with their offsets, and the length they
/// cover. A damaged entry with a valid entry somewhere after it is
/// corruption in the middle (an error); at the end it is a torn append.
fn read_log(log: &[u8]) -> Result<(Vec<(u64, DdlEntry)>, u64), FormatError> {
    let mut at = 0usize;
    let mut out = Vec::new();
    while at < log.len() {
        let parsed = open_blob(&log[at..], Kind::DdlEntry, SCHEMA_VERSION, DDL_LOG, at as u64).and_then(|b| {
            postcard::from_bytes::<DdlEntry>(b.body)
                .map(|e| (e, b.len))
                .map_err(|e| FormatError::new(DDL_LOG, at as u64, format!("DDL entry body: {e}")))
        });
        match parsed {
            Ok((e, len)) => {
                out.push((at as u64, e));
                at += len;
            }
            Err(e) => {
                // Look for any valid entry after the damage.
                let later = (at + 1..log.len().saturating_sub(3)).any(|i| {
                    log[i..i + 4] == MAGIC
                        && open_blob(&log[i..], Kind::DdlEntry, SCHEMA_VERSION, DDL_LOG, i as u64).is_ok()
                });
                if later {
                    return Err(FormatError::new(
                        DDL_LOG,
                        at as u64,
                        format!("damaged DDL log entry followed by valid ones: {}", e.what),
                    ));
                }
                break;
            }
        }
    }
    Ok((out, at as u64))
}

/// An append to the DDL log: `bytes` at `offset`, synced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogAppend {
    pub offset: u64,
    pub bytes: Vec<u8>,
}

/// Drives the log of DDLs (one at a time, as DICT runs them).
#[derive(Debug, Clone)]
pub struct DdlLogWriter {
    next_id: DdlId,
    offset: u64,
    pub crash: CrashPoints,
}

impl DdlLogWriter {
    /// After `recover` (and its actions, entries, new snapshot and an
    /// emptied log): the log starts empty.
    pub fn new(schema: &SchemaSnapshot) -> DdlLogWriter {
        DdlLogWriter { next_id: schema.last_ddl_id + 1, offset: 0, crash: CrashPoints::off() }
    }

    fn append(&mut self, e: &DdlEntry) -> LogAppend {
        let bytes = e.encode();
        let a = LogAppend { offset: self.offset, bytes };
        self.offset += a.bytes.len() as u64;
        a
    }

    /// Step 1: announce the DDL.
    pub fn begin(&mut self, op: DdlOp) -> (DdlId, LogAppend) {
        let id = self.next_id;
        self.next_id += 1;
        (id, self.append(&DdlEntry::Begin { id, op }))
    }

    /// Step 2: the DDL takes effect (after the begin entry is durable).
    pub fn commit(&mut self, id: DdlId) -> Result<LogAppend, Crashed> {
        if crash_point!(self.crash, points::DDL_AFTER_BEGIN) {
            return Err(Crashed(points::DDL_AFTER_BEGIN));
        }
        Ok(self.append(&DdlEntry::Commit { id }))
    }

    /// Undo instead of step 2 (the change failed).
    pub fn abort(&mut self, id: DdlId) -> LogAppend {
        self.append(&DdlEntry::Abort { id })
    }

    /// Step 3: what to do after the commit entry is durable.
    pub fn post_commit(&mut self, op: &DdlOp) -> Result<Vec<DdlAction>, Crashed> {
        if crash_point!(self.crash, points::DDL_AFTER_COMMIT) {
            return Err(Crashed(points::DDL_AFTER_COMMIT));
        }
        Ok(post_commit_actions(op))
    }

    /// Step 4.
    pub fn done(&mut self, id: DdlId) -> Result<LogAppend, Crashed> {
        if crash_point!(self.crash, points::DDL_BEFORE_DONE) {
            return Err(Crashed(points::DDL_BEFORE_DONE));
        }
        Ok(self.append(&DdlEntry::Done { id }))
    }

    /// A new schema file: write `bytes` to `SCHEMA_TMP` (synced), then call
    /// `snapshot_rename`, then empty the log (`log_emptied`).
    pub fn snapshot(&self, schema: &SchemaSnapshot) -> Vec<u8> {
        schema.encode()
    }

    /// The rename `SCHEMA_TMP` -> `SCHEMA_FILE` to issue.
    pub fn snapshot_rename(&mut self) -> Result<(&'static str, &'static str), Crashed> {
        if crash_point!(self.crash, points::SCHEMA_AFTER_TMP_BEFORE_RENAME) {
            return Err(Crashed(points::SCHEMA_AFTER_TMP_BEFORE_RENAME));
        }
        Ok((SCHEMA_TMP, SCHEMA_FILE))
    }

    /// The log was truncated to empty (after the rename).
    pub fn log_emptied(&mut self) {
        self.offset = 0;
    }
}

#[cfg(test)]
mod tests;
