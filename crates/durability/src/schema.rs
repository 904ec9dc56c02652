//! The schema file: crash-safe DDL (seed 000's "DDL log" and MySQL 8's
//! atomic DDL, by another route). A DDL statement is either fully done or
//! fully undone after a crash at any point.
//!
//! `schema/schema.dat`: a sealed blob (kind SchemaFile) holding a postcard
//! [`SchemaSnapshot`]: every table definition, the next table id, the
//! auto-increment marks, and the change DICT has announced and not yet ended
//! (`pending`). Replaced atomically: written to `schema/schema.tmp`, synced,
//! renamed (the rename made durable).
//!
//! The DICT block (norr-txn) writes it twice per DDL in a cluster: with the
//! change `pending` before any storage makes it, then with the change
//! committed (or, after a refusal, without it). A restarted cluster's master
//! makes a pending change again on every node, each taking a change it
//! already has as done; a lone node writes only the commit, and a crash
//! before it leaves the old definition, which its REDO log's records agree
//! with (a TRUNCATE's or rebuild's reset record carries the table version it
//! belongs to). So the snapshot plus `pending` is a one-entry DDL log: an
//! earlier log of Begin/Commit/Done entries (`schema/ddl.log`) was never
//! written by DICT and is gone; blob kind 5 stays reserved for it.
//!
//! Named crash points in DICT's steps and in this file's replace
//! (`crash::points::DICT_*`, `SCHEMA_AFTER_TMP_BEFORE_RENAME`) are tested in
//! norr-node's `ddl_reset_sim_disk`.

use crate::error::FormatError;
use crate::frame::{open_blob, seal, Kind, BLOB_HEADER_BYTES};
use norr_signals::internal::SchemaChange;
use norr_signals::{TableDef, TableId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Format version of the schema file: 2 added `pending` (version 1 files
/// are read as having none); 3 changed a pending TRUNCATE to carry the
/// table's new definition (a TRUNCATE raises the table version; version 2
/// files are read by giving the table's definition one version more).
pub const SCHEMA_FILE_VERSION: u16 = 3;
pub const SCHEMA_FILE: &str = "schema/schema.dat";
pub const SCHEMA_TMP: &str = "schema/schema.tmp";

/// Counts the schema's changes (a snapshot includes every one up to its
/// `last_ddl_id`).
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
    pub pending: Option<SchemaChange>,
}

/// The schema file's body in format version 1 (no `pending`).
#[derive(Serialize, Deserialize)]
struct SchemaSnapshotV1 {
    last_ddl_id: DdlId,
    next_table_id: TableId,
    tables: BTreeMap<TableId, TableDef>,
    auto_inc: BTreeMap<TableId, u64>,
}

/// The schema file's body in format version 2 (`pending` in the layout of
/// that version's schema changes).
#[derive(Serialize, Deserialize)]
struct SchemaSnapshotV2 {
    last_ddl_id: DdlId,
    next_table_id: TableId,
    tables: BTreeMap<TableId, TableDef>,
    auto_inc: BTreeMap<TableId, u64>,
    pending: Option<PendingV2>,
}

/// `norr_signals::internal::SchemaChange` as format version 2 wrote it
/// (postcard writes variants by position: the order must not change).
#[derive(Serialize, Deserialize)]
enum PendingV2 {
    CreateTable(TableDef),
    DropTable(TableId),
    TruncateTable(TableId),
    CreateIndex { def: TableDef, index: norr_signals::schema::IndexId },
    DropIndex { def: TableDef, index: norr_signals::schema::IndexId },
    AlterTable { def: TableDef, sources: Vec<norr_signals::api::ColumnSource> },
    AlterCommit { def: TableDef },
    AlterAbort(TableId),
}

impl PendingV2 {
    /// The change in today's layout; None for a TRUNCATE of a table the
    /// file does not hold (nothing to make again).
    fn upgrade(self, tables: &BTreeMap<TableId, TableDef>) -> Option<SchemaChange> {
        Some(match self {
            PendingV2::CreateTable(def) => SchemaChange::CreateTable(def),
            PendingV2::DropTable(t) => SchemaChange::DropTable(t),
            PendingV2::TruncateTable(t) => {
                let mut def = tables.get(&t)?.clone();
                def.version += 1;
                SchemaChange::TruncateTable(def)
            }
            PendingV2::CreateIndex { def, index } => SchemaChange::CreateIndex { def, index },
            PendingV2::DropIndex { def, index } => SchemaChange::DropIndex { def, index },
            PendingV2::AlterTable { def, sources } => SchemaChange::AlterTable { def, sources },
            PendingV2::AlterCommit { def } => SchemaChange::AlterCommit { def },
            PendingV2::AlterAbort(t) => SchemaChange::AlterAbort(t),
        })
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
        // Older versions are read as the one after them, up to today's.
        let v2 = match blob.version {
            1 => {
                let v1: SchemaSnapshotV1 = postcard::from_bytes(blob.body).map_err(bad)?;
                SchemaSnapshotV2 {
                    last_ddl_id: v1.last_ddl_id,
                    next_table_id: v1.next_table_id,
                    tables: v1.tables,
                    auto_inc: v1.auto_inc,
                    pending: None,
                }
            }
            2 => postcard::from_bytes(blob.body).map_err(bad)?,
            _ => return postcard::from_bytes(blob.body).map_err(bad),
        };
        let pending = v2.pending.and_then(|p| p.upgrade(&v2.tables));
        Ok(SchemaSnapshot {
            last_ddl_id: v2.last_ddl_id,
            next_table_id: v2.next_table_id,
            tables: v2.tables,
            auto_inc: v2.auto_inc,
            pending,
        })
    }
}

#[cfg(test)]
mod tests;
