//! A node restart from local files, at the starting node: which restored
//! rows it keeps, and how the partition copies bring them up to date.
//!
//! The node restored its last local checkpoints and REDO up to GCI g (the
//! host says so with `set_restored_gci`; None when its files are not a
//! complete copy, or hold nothing). When it joins the running cluster
//! (`ClusterStartedRep { joined }`), its restored tables are held aside:
//! invisible to operations, rows kept in storage. DICT then creates the
//! cluster's tables here (`SchemaChange::CreateTable`): a table whose
//! definition is the very one restored (`TableDef::keeps_restored_rows_of`:
//! not dropped, re-created or altered meanwhile) keeps its rows; any other
//! restored table is dropped, and its partitions are copied in full. The
//! master DIH makes the same decision from the same definitions (the
//! node's DIH tells it which tables were kept, with g).
//!
//! Each partition of a kept table is resynchronised: from the moment it is
//! kept (before this node is in any replica chain, so before any write
//! reaches it) storage tracks which of its rows are confirmed current
//! (`sync_begin`): a write through the chain confirms the row it touches, a
//! copied row or key confirms its row. The partition's copy is a delta
//! (rows written after g in full, the others as keys); its last batch
//! deletes what nothing confirmed (`sync_end`): the rows deleted in the
//! cluster while this node was down. Tracking must start before the first
//! write, not at the copy's first batch: a row inserted through the chain
//! while the copy scan is under way may be behind the scan at the primary,
//! and only the write's own mark keeps it.
//!
//! While a partition is resynchronised, DDL that rebuilds rows or builds an
//! index on them (ALTER TABLE, CREATE INDEX) is refused with a temporary
//! error: the restored rows still include rows deleted meanwhile.
//!
//! Checkpoints: the restored chains are forgotten (`forget_lcp_chains`) and
//! each kept partition's storage chain is reset when it is kept and again
//! when its copy ends, so the partition's next checkpoint is whole; CKPT
//! keeps the node's files marked as not restorable until a checkpoint
//! round that began after the restart is recorded (`ckpt.rs`, `copied`).

use super::Lqh;
use norr_kernel::{BlockRef, Ctx};
use norr_signals::dist::ReplicaState;
use norr_signals::internal::{CopyRows, InternalSignal};
use norr_signals::schema::{PartitionId, TableDef, TableId};
use norr_signals::{ErrorCode, NodeError, Signal};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The starting node's state of a node restart from its files.
#[derive(Default)]
pub(super) struct Resync {
    /// Every commit with a GCI up to this one is in the restored rows (None:
    /// nothing restorable: every restored row is dropped at the join).
    restored_gci: Option<u64>,
    /// Restored tables waiting for the cluster's schema (after the join).
    held: BTreeMap<TableId, Arc<TableDef>>,
    /// Partitions of kept tables whose copy has not ended.
    syncing: BTreeSet<(TableId, PartitionId)>,
}

/// What storing one copied batch did.
struct Stored {
    missing_keys: u64,
    deleted: u64,
}

impl Lqh {
    /// Restart (host, before the first signal): the restored rows hold
    /// every commit up to `gci` (None: the files are not a complete copy).
    pub fn set_restored_gci(&mut self, gci: Option<u64>) {
        self.resync.restored_gci = gci;
    }

    /// This node joined a running cluster (a node restart): its restored
    /// tables wait for the cluster's schema, or, with nothing restorable,
    /// are dropped before any write reaches the node.
    pub(super) fn on_joined(&mut self) {
        self.forget_lcp_chains();
        if self.resync.restored_gci.is_none() {
            return self.discard_restored_rows();
        }
        let mut held: Vec<(TableId, Arc<TableDef>)> = self.defs.drain().collect();
        held.sort_unstable_by_key(|(t, _)| *t);
        self.resync.held = held.into_iter().collect();
    }

    /// Drop every restored table, rows and all.
    fn discard_restored_rows(&mut self) {
        let mut tables: Vec<TableId> = self.defs.keys().copied().collect();
        tables.sort_unstable();
        for t in tables {
            self.defs.remove(&t);
            self.drop_restored(t);
        }
    }

    fn drop_restored(&mut self, t: TableId) {
        if let Err(e) = self.storage.drop_table(t) {
            debug_assert!(false, "dropping restored table {t}: {e:?}");
        }
        self.counters.bump("lqh: restored tables dropped at a node restart");
    }

    /// DICT creates a table at this node. Some(result) if it is a restored
    /// table kept with its rows; None: create it as usual (a restored table
    /// of that id that cannot be kept is dropped first).
    pub(super) fn create_kept_table(&mut self, def: &TableDef) -> Option<Result<(), NodeError>> {
        let restored = self.resync.held.remove(&def.id)?;
        if !def.keeps_restored_rows_of(&restored) {
            self.drop_restored(def.id);
            return None;
        }
        for p in 0..def.partitions {
            let r = self.storage.lcp_reset(def.id, p).and_then(|()| self.storage.sync_begin(def.id, p));
            if let Err(e) = r {
                return Some(Err(e));
            }
            self.resync.syncing.insert((def.id, p));
        }
        self.counters.bump("lqh: restored tables kept at a node restart");
        self.defs.insert(def.id, Arc::new(def.clone()));
        Some(Ok(()))
    }

    /// A new distribution: once this node is in the chains (`Starting`),
    /// the schema sync is over: restored tables the cluster no longer has
    /// are dropped. Once it is `Alive`, every copy ended: partitions still
    /// tracked were not copied here (this node does not hold them).
    pub(super) fn resync_on_dist(&mut self) {
        if self.resync.held.is_empty() && self.resync.syncing.is_empty() {
            return;
        }
        let own = self.dist.state(self.node);
        if own == ReplicaState::Dead {
            return;
        }
        for t in std::mem::take(&mut self.resync.held).into_keys() {
            self.drop_restored(t);
        }
        if own != ReplicaState::Alive {
            return;
        }
        for (t, p) in std::mem::take(&mut self.resync.syncing) {
            let held = self.defs.get(&t).is_some_and(|d| self.dist.holds(d, p, self.node));
            debug_assert!(!held, "table {t} partition {p}: node alive before its copy ended");
            if held {
                crate::probe!(self.counters, "lqh: resync ended without a copy");
            }
            match self.storage.sync_end(t, p) {
                Ok(n) => self.counters.bump_by("lqh: rows deleted by a resync", n),
                Err(e) => debug_assert!(false, "ending the resync of {t}/{p}: {e:?}"),
            }
        }
    }

    /// DDL that cannot run on a table some of whose partitions are being
    /// resynchronised (it would rebuild or index rows that may be gone).
    pub(super) fn resync_refuses_ddl(&self, table: TableId) -> Option<NodeError> {
        let busy = self.resync.syncing.range((table, 0)..=(table, PartitionId::MAX)).next().is_some();
        busy.then(|| {
            NodeError::with(
                ErrorCode::Overloaded,
                format!("table id {table} is being copied to this restarting node: retry when the node restart ends"),
            )
        })
    }

    /// After TRUNCATE or DROP of `table`: a truncated partition holds no
    /// restored row any more (tracking starts again on the empty
    /// partition); a dropped one is forgotten.
    pub(super) fn resync_after_ddl(&mut self, table: TableId, dropped: bool) {
        let parts: Vec<PartitionId> =
            self.resync.syncing.range((table, 0)..=(table, PartitionId::MAX)).map(|(_, p)| *p).collect();
        for p in parts {
            if dropped || self.storage.sync_begin(table, p).is_err() {
                self.resync.syncing.remove(&(table, p));
            }
        }
        self.resync.held.remove(&table);
    }

    /// The starting replica's end of a copy: store the batch, answer it.
    pub(super) fn on_copy_rows(&mut self, from: BlockRef, rows: CopyRows, ctx: &mut Ctx<'_, Signal>) {
        let (req, table, part) = (rows.req, rows.table, rows.part);
        let (n, k) = (rows.rows.len() as u64, rows.keys.len() as u64);
        let (error, missing_keys, deleted) = match self.store_copied(rows) {
            Ok(s) => {
                self.counters.bump_by("lqh: rows copied in", n);
                self.counters.bump_by("lqh: keys confirmed by a copy", k - s.missing_keys);
                self.counters.bump_by("lqh: rows deleted by a resync", s.deleted);
                if s.missing_keys > 0 {
                    crate::probe!(self.counters, "lqh: delta copy named rows missing here");
                    self.counters.bump_by("lqh: keys missing at a delta copy", s.missing_keys);
                }
                (None, s.missing_keys, s.deleted)
            }
            Err(e) => {
                crate::probe!(self.counters, "lqh: copied rows refused");
                (Some(e), 0, 0)
            }
        };
        let conf = InternalSignal::CopyRowsConf { req, table, part, error, missing_keys, deleted };
        ctx.send(from, Signal::Internal(Box::new(conf)));
    }

    fn store_copied(&mut self, c: CopyRows) -> Result<Stored, NodeError> {
        let CopyRows { table, part, table_version: version, last, rows, gcis, keys, .. } = c;
        let def = self.defs.get(&table).cloned().ok_or_else(|| NodeError::new(ErrorCode::NoSuchTable))?;
        if def.version != version {
            return Err(NodeError::with(
                ErrorCode::SchemaVersionMismatch,
                format!("table {} is at version {} here, {version} at the copy's source", def.name, def.version),
            ));
        }
        if rows.len() != gcis.len() || gcis.iter().any(|g| *g > u32::MAX as u64) {
            return Err(NodeError::with(ErrorCode::MalformedSignal, "copied rows without a GCI each"));
        }
        let syncing = self.resync.syncing.contains(&(table, part));
        if !keys.is_empty() && !syncing {
            // Keys name rows this node kept, but it kept none here: copy
            // the partition in full.
            return Ok(Stored { missing_keys: keys.len() as u64, deleted: 0 });
        }
        // Each row is tagged with its GCI at the source, so that a delta
        // copy from this node later sends it exactly when it changed after
        // the receiver's GCI; but never below the start of the newest
        // checkpoint round here: a partial checkpoint takes the rows
        // written since the previous round began by their GCI.
        let floor = self.lcp.max_start_gci;
        let before = self.storage.commit_gci();
        let mut stored = Ok(());
        for (row, gci) in rows.into_iter().zip(gcis) {
            self.storage.set_commit_gci(gci.max(floor));
            if let Err(e) = self.storage.put(table, part, row) {
                stored = Err(e);
                break;
            }
        }
        self.storage.set_commit_gci(before);
        stored?;
        let mut missing_keys = 0;
        for key in &keys {
            if !self.storage.sync_confirm(table, part, key)? {
                missing_keys += 1;
            }
        }
        if missing_keys > 0 {
            return Ok(Stored { missing_keys, deleted: 0 });
        }
        let mut deleted = 0;
        if last && syncing {
            deleted = self.storage.sync_end(table, part)?;
            self.storage.lcp_reset(table, part)?;
            self.resync.syncing.remove(&(table, part));
        }
        Ok(Stored { missing_keys: 0, deleted })
    }
}
