//! A transaction's own uncommitted writes in its scans.
//!
//! Storage holds committed rows only; a transaction's new images wait in its
//! `pending` map until commit. A scan issued inside a transaction must still
//! see them (READ COMMITTED reads the transaction's own changes): when the
//! scan opens, the images of the rows the transaction wrote in the scanned
//! partition are copied aside, those that qualify (filter, ordered range)
//! sorted in the scan's order. The scan then skips the committed image of
//! every row written so, and merges the copied images into its stream: by
//! ordered key for an ordered scan (so TC's merge of the partitions still
//! sees sorted streams), after the committed rows for a full scan.
//!
//! The copy is a snapshot: writes the transaction makes while the scan is
//! open are not seen by it (as a statement's own writes are not seen by its
//! scan, which is what an UPDATE driven by a scan needs: a row it moves ahead
//! in the index is not found again).

use super::exec::project;
use super::Lqh;
use crate::store::ScanCursor;
use norr_signals::filter_eval::eval_filter;
use norr_signals::internal::{ScanRow, TxnId};
use norr_signals::ops::Filter;
use norr_signals::schema::{ColumnId, IndexId, PartitionId, TableDef};
use norr_signals::value::Value;
use norr_signals::NodeError;
use std::collections::{BTreeSet, VecDeque};

/// Own writes a scan overlays on the committed rows of its partition.
pub(super) struct OwnWrites {
    /// Encoded pks of the rows written (inserted, updated, deleted) when the
    /// scan opened: their committed images are never returned.
    written: BTreeSet<Vec<u8>>,
    /// Images to return, with their ordered key (empty for a full scan), in
    /// scan order.
    rows: VecDeque<(Vec<u8>, Vec<Value>)>,
    descending: bool,
}

impl OwnWrites {
    /// Whether the committed image of the row with this encoded pk is hidden
    /// by a write of the transaction.
    pub(super) fn hides(&self, pk: &[u8]) -> bool {
        self.written.contains(pk)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The next own row if it comes before the committed row with ordered
    /// key `next` (None: the committed rows are exhausted, every own row
    /// comes now).
    pub(super) fn pop_before(&mut self, next: Option<&[u8]>) -> Option<(Vec<u8>, Vec<Value>)> {
        let (k, _) = self.rows.front()?;
        let before = match next {
            None => true,
            Some(n) if self.descending => k.as_slice() > n,
            Some(n) => k.as_slice() < n,
        };
        if before {
            self.rows.pop_front()
        } else {
            None
        }
    }
}

/// What a scan needs to pick its own writes.
pub(super) struct OwnScanSpec<'a> {
    pub reader: TxnId,
    pub def: &'a TableDef,
    pub part: PartitionId,
    pub index: Option<IndexId>,
    pub cursor: &'a ScanCursor,
    pub filter: Option<&'a Filter>,
    pub descending: bool,
}

impl Lqh {
    /// Snapshot the reader's writes in the scanned partition; None if it has
    /// none there (the scan then reads storage only, at no extra cost).
    pub(super) fn own_writes(&self, spec: &OwnScanSpec<'_>) -> Result<Option<OwnWrites>, NodeError> {
        let Some(txn) = self.txns.get(&spec.reader).filter(|x| !x.committed) else {
            return Ok(None);
        };
        let table = spec.def.id;
        let mut written = BTreeSet::new();
        let mut rows = Vec::new();
        for ((_, pk), p) in txn.pending.range((table, Vec::new())..(table + 1, Vec::new())) {
            if p.part != spec.part {
                continue;
            }
            written.insert(pk.clone());
            let Some(img) = &p.image else { continue };
            if let Some(f) = spec.filter {
                if eval_filter(f, img, spec.def)? != Some(true) {
                    continue;
                }
            }
            let key = match spec.index {
                Some(ix) => self.storage.ordered_key(table, ix, img),
                None => Vec::new(),
            };
            if spec.cursor.admits(&key) {
                rows.push((key, img.clone()));
            }
        }
        if written.is_empty() {
            return Ok(None);
        }
        if spec.index.is_some() {
            rows.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            if spec.descending {
                rows.reverse();
            }
        }
        Ok(Some(OwnWrites { written, rows: rows.into(), descending: spec.descending }))
    }
}

/// An own row ready to return: its ordered key and projected values.
pub(super) fn own_scan_row(
    def: &TableDef,
    (key, img): (Vec<u8>, Vec<Value>),
    projection: &[ColumnId],
) -> Result<ScanRow, NodeError> {
    Ok(ScanRow { key, values: project(def, &img, projection)? })
}
