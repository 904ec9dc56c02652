//! Copying a partition to a starting replica (node restart), both ends.
//!
//! The primary (`CopyFragReq` from the master DIH) scans the partition with
//! the scan machinery of LQH, as a locking scan under shared locks of a
//! transaction of its own, addressed to itself: each batch of rows is sent
//! to the starting node (`CopyRows`) and only then are the batch's locks
//! released. The starting node is already at the tail of every chain of the
//! partition when the copy begins (DIH saw to it), so for every row:
//! * a writer that prepared before the copy read the row holds its lock
//!   until it committed at the primary, which is after it committed at the
//!   starting node (commit runs backwards along the chain): the copy reads
//!   the committed row afterwards and sends the same or newer data;
//! * a writer that comes after the copy read the row waits for the shared
//!   lock, which is released only once the row was sent; its own write then
//!   reaches the starting node later on the same link (messages between two
//!   nodes stay in order).
//!
//! Either way the starting node ends with the row's latest committed image.
//! It stores each copied row as it comes (insert, or overwrite by key),
//! tagged with the row's GCI at the source.
//!
//! Delta copies (`since_gci: Some(g)`, a node that restarted from its files
//! holding every commit up to GCI g and kept the partition's rows, see
//! `resync.rs`): a row whose GCI at the source is at most g goes as its key
//! only (`CopyRows::keys`), the others in full. The row's GCI is read under
//! the same shared lock as the row, so the argument above holds for keys
//! too: a key is sent only for a row no writer changed after g up to the
//! moment the lock was granted (a writer that prepared before holds its
//! lock until it committed at the primary, and its commit GCI is above g:
//! the row then goes in full); a writer after waits until the key was sent,
//! and its change reaches the starting node after the key. A key means
//! "your row is current": the starting node marks it confirmed
//! (`sync_confirm`); at the last batch it deletes every restored row that
//! neither a key, a full row nor a write through the chain confirmed: the
//! rows deleted while it was down (`sync_end`). A key for a row the
//! starting node lacks cannot happen with consistent files; if it does, the
//! copy stops with `missing_keys` and the master copies the partition again
//! in full.
//!
//! One batch is in flight at a time: the next is read once the starting
//! node confirmed the last (`CopyRowsConf`), which bounds the memory a copy
//! takes on both ends: a batch holds as many rows as fit in
//! `COPY_BATCH_BYTES` at the table's largest possible row, between
//! `COPY_BATCH_ROWS_MIN` and `COPY_BATCH_ROWS_MAX` (a key is never larger
//! than its row). Small rows go many to a batch: the copy's pace is one
//! round trip per batch.

use super::Lqh;
use norr_kernel::{BlockRef, Ctx, NodeId};
use norr_signals::internal::{CopyRows, InternalSignal, LqhScanReq, ScanKey, ScanRows};
use norr_signals::ops::{LockMode, LockWait};
use norr_signals::row_codec;
use norr_signals::schema::TableDef;
use norr_signals::schema::{PartitionId, TableId};
use norr_signals::value::Value;
use norr_signals::{block, ErrorCode, NodeError, Signal};

/// Bytes of a copied batch at the table's largest rows (see the module doc).
const COPY_BATCH_BYTES: u64 = 512 << 10;
/// Rows per copied batch, at least and at most.
const COPY_BATCH_ROWS_MIN: u32 = 4;
const COPY_BATCH_ROWS_MAX: u32 = 2048;
/// Instance bits of the transaction and scan ids of copies (above every TC
/// instance, so they never collide with a TC's ids on this node).
const COPY_INSTANCE: u64 = 0xFF;

/// What the master asks of a copy (`CopyFragReq`).
pub(super) struct CopyFragAsk {
    pub req: u64,
    pub table: TableId,
    pub part: PartitionId,
    pub dest: NodeId,
    pub since_gci: Option<u64>,
}

/// The starting node's answer to a batch (`CopyRowsConf`).
pub(super) struct CopyRowsAnswer {
    pub error: Option<NodeError>,
    pub missing_keys: u64,
    pub deleted: u64,
}

/// A copy this node sends as a primary.
pub(crate) struct CopyOut {
    req: u64,
    master: BlockRef,
    table: TableId,
    part: PartitionId,
    dest: NodeId,
    /// Some(g): a delta copy (rows of GCI <= g go as keys).
    since_gci: Option<u64>,
    /// Rows sent in full, keys sent, bytes of rows and keys sent (as
    /// encoded on the wire, with each row's GCI: at most 5 bytes).
    rows: u64,
    keys: u64,
    bytes: u64,
    /// Rows the starting node deleted at the end (`sync_end`).
    deleted: u64,
    /// Keys the starting node did not hold (the copy stopped).
    missing_keys: u64,
    /// A batch went out already (the next is not the first).
    sent_any: bool,
    /// The scan has delivered its last batch.
    scan_done: bool,
}

impl Lqh {
    fn copy_key(&self, req: u64) -> ScanKey {
        debug_assert!(req < (1 << 40));
        ((self.node as u64) << 48) | (COPY_INSTANCE << 40) | (req & ((1 << 40) - 1))
    }

    pub(super) fn on_copy_frag_req(&mut self, master: BlockRef, ask: CopyFragAsk, ctx: &mut Ctx<'_, Signal>) {
        let CopyFragAsk { req, table, part, dest, since_gci } = ask;
        let refuse = |ctx: &mut Ctx<'_, Signal>, error: NodeError| {
            ctx.send(master, Signal::Internal(Box::new(InternalSignal::CopyFragRef { req, table, part, error })));
        };
        let key = self.copy_key(req);
        if self.copies.contains_key(&key) {
            crate::probe!(self.counters, "lqh: copy requested twice");
            return refuse(ctx, NodeError::with(ErrorCode::Internal, "partition copy requested twice"));
        }
        let Some(def) = self.defs.get(&table).cloned() else {
            return refuse(ctx, NodeError::with(ErrorCode::NoSuchTable, format!("table id {table}")));
        };
        if !self.serves(&def, part) {
            return refuse(ctx, NodeError::with(ErrorCode::WrongReplica, "the copy source is not a live replica"));
        }
        self.counters.bump(if since_gci.is_some() {
            "lqh: delta copies started"
        } else {
            "lqh: partition copies started"
        });
        let c = CopyOut {
            req,
            master,
            table,
            part,
            dest,
            since_gci,
            rows: 0,
            keys: 0,
            bytes: 0,
            deleted: 0,
            missing_keys: 0,
            sent_any: false,
            scan_done: false,
        };
        self.copies.insert(key, c);
        let scan = LqhScanReq {
            scan: key,
            txn: Some(key),
            reader: None,
            table,
            table_version: def.version,
            part,
            index: None,
            range: None,
            descending: false,
            row_keys: false,
            filter: None,
            projection: Vec::new(),
            lock: LockMode::Shared,
            wait: LockWait::Wait,
            batch_rows: copy_batch_rows(&def),
            ranges: Vec::new(),
            aggregate: None,
        };
        let me = ctx.self_ref();
        self.on_scan_req(me, scan, ctx);
    }

    /// A batch of this node's own copy scan: send it (rows changed since a
    /// delta copy's GCI in full, the others as keys), then let its locks go.
    pub(super) fn copy_scan_conf(
        &mut self,
        scan: ScanKey,
        part: PartitionId,
        rows: ScanRows,
        done: bool,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        let Some(c) = self.copies.get(&scan) else {
            crate::probe!(self.counters, "lqh: scan batch of an ended copy");
            return;
        };
        debug_assert_eq!(c.part, part);
        let (table, since) = (c.table, c.since_gci);
        let Some(def) = self.defs.get(&table).cloned() else {
            let e = NodeError::with(ErrorCode::NoSuchTable, format!("table id {table} dropped during its copy"));
            return self.copy_end(scan, Err(e), ctx);
        };
        let mut out = CopyRows {
            req: c.req,
            table,
            part,
            table_version: def.version,
            first: !c.sent_any,
            last: done,
            rows: Vec::with_capacity(rows.rows.len()),
            gcis: Vec::with_capacity(rows.rows.len()),
            keys: Vec::new(),
        };
        let mut bytes = 0u64;
        for row in rows.rows {
            // The row is locked (shared) by this copy: its GCI is the one
            // of the image just read.
            let gci = self.copied_row_gci(&def, part, &row);
            match since {
                Some(g) if gci <= g => {
                    let key: Vec<Value> = def.primary_key.iter().map(|c| row[*c as usize].clone()).collect();
                    bytes += row_codec::encoded_row_len(&key) as u64;
                    out.keys.push(key);
                }
                _ => {
                    bytes += (row_codec::encoded_row_len(&row) + 5) as u64;
                    out.rows.push(row);
                    out.gcis.push(gci);
                }
            }
        }
        let c = self.copies.get_mut(&scan).expect("checked");
        c.scan_done = done;
        c.sent_any = true;
        c.rows += out.rows.len() as u64;
        c.keys += out.keys.len() as u64;
        c.bytes += bytes;
        let to = BlockRef::new(c.dest, block::LQH, self.instance);
        ctx.send(to, Signal::Internal(Box::new(InternalSignal::CopyRows(Box::new(out)))));
        // Sent: a writer waiting for one of these rows now reaches the
        // starting node after them.
        self.release_locks_of(scan, ctx);
    }

    /// The GCI of the stored row with `row`'s key (the copy holds its lock).
    fn copied_row_gci(&self, def: &TableDef, part: PartitionId, row: &[Value]) -> u64 {
        let gci = self
            .pk_of(def, row)
            .ok()
            .and_then(|enc| self.storage.lookup(def.id, part, &enc))
            .and_then(|rid| self.storage.row_gci(def.id, part, rid));
        debug_assert!(gci.is_some(), "a row the copy holds locked is stored");
        // (Never absent; if it were, the newest GCI this node tagged sends
        // the row in full.)
        gci.unwrap_or_else(|| self.storage.commit_gci())
    }

    pub(super) fn copy_scan_ref(
        &mut self,
        scan: ScanKey,
        part: PartitionId,
        error: NodeError,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        if !self.copies.contains_key(&scan) {
            crate::probe!(self.counters, "lqh: scan refusal of an ended copy");
            return;
        }
        debug_assert!(self.copies[&scan].part == part);
        self.copy_end(scan, Err(error), ctx);
    }

    pub(super) fn on_copy_rows_conf(
        &mut self,
        req: u64,
        table: TableId,
        part: PartitionId,
        answer: CopyRowsAnswer,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        let CopyRowsAnswer { error, missing_keys, deleted } = answer;
        let key = self.copy_key(req);
        let Some(c) = self.copies.get_mut(&key) else {
            crate::probe!(self.counters, "lqh: copy confirmation of an ended copy");
            return;
        };
        debug_assert!(c.table == table && c.part == part);
        if let Some(e) = error {
            return self.copy_end(key, Err(e), ctx);
        }
        c.deleted += deleted;
        if missing_keys > 0 {
            // The starting node lacks rows it should hold: stop; the master
            // copies the partition in full.
            crate::probe!(self.counters, "lqh: delta copy stopped: rows missing at the starting node");
            c.missing_keys = missing_keys;
            return self.copy_end(key, Ok(()), ctx);
        }
        if c.scan_done {
            return self.copy_end(key, Ok(()), ctx);
        }
        let me = ctx.self_ref();
        self.on_scan_next(me, key, part, ctx);
    }

    /// Release every lock the copy transaction holds, keep its scan.
    fn release_locks_of(&mut self, t: u64, ctx: &mut Ctx<'_, Signal>) {
        let Some(txn) = self.txns.get_mut(&t) else {
            return;
        };
        let keys = std::mem::take(&mut txn.locks);
        let mut grants = Vec::new();
        for key in keys {
            self.locks.release(&key, t, &mut grants);
        }
        self.on_grants(grants, ctx);
    }

    /// End a copy: close its scan and transaction, tell the master.
    fn copy_end(&mut self, key: ScanKey, result: Result<(), NodeError>, ctx: &mut Ctx<'_, Signal>) {
        let c = self.copies.remove(&key).expect("copy");
        let mut grants = Vec::new();
        self.drop_scan((key, c.part), &mut grants);
        if let Some(mut txn) = self.txns.remove(&key) {
            self.release_txn(key, &mut txn, ctx);
        }
        self.on_grants(grants, ctx);
        let (req, table, part) = (c.req, c.table, c.part);
        let reply = match result {
            Ok(()) => {
                self.counters.bump("lqh: partition copies done");
                self.counters.bump_by("lqh: rows copied out", c.rows);
                self.counters.bump_by("lqh: keys copied out", c.keys);
                self.counters.bump_by("lqh: bytes copied out", c.bytes);
                InternalSignal::CopyFragConf {
                    req,
                    table,
                    part,
                    rows: c.rows,
                    keys: c.keys,
                    deleted: c.deleted,
                    bytes: c.bytes,
                    missing_keys: c.missing_keys,
                }
            }
            Err(error) => {
                crate::probe!(self.counters, "lqh: partition copy failed");
                InternalSignal::CopyFragRef { req, table, part, error }
            }
        };
        ctx.send(c.master, Signal::Internal(Box::new(reply)));
    }

    /// Copies to or from failed nodes end (the master starts over or drops
    /// the restart).
    pub(super) fn copies_node_fail(&mut self, failed: &[NodeId], ctx: &mut Ctx<'_, Signal>) {
        let ended: Vec<ScanKey> = self
            .copies
            .iter()
            .filter(|(_, c)| failed.contains(&c.dest) || failed.contains(&c.master.node))
            .map(|(k, _)| *k)
            .collect();
        for k in ended {
            crate::probe!(self.counters, "lqh: copy ended by a node failure");
            let e = NodeError::with(ErrorCode::TxnNodeFailure, "a node of the copy failed");
            self.copy_end(k, Err(e), ctx);
        }
    }

    /// Rows and an order-independent checksum of a partition's committed
    /// rows: replicas that converged agree on both.
    pub(super) fn partition_checksum(&self, table: TableId, part: PartitionId) -> (u64, u64) {
        let Ok(mut cursor) = self.storage.scan_open(table, part, None, None, false) else {
            return (0, 0);
        };
        let (mut rows, mut sum) = (0u64, 0u64);
        let mut out = Vec::new();
        loop {
            out.clear();
            let done = match self.storage.scan_next(table, part, &mut cursor, None, 1024, usize::MAX, &mut out) {
                Ok(d) => d,
                Err(_) => return (rows, sum),
            };
            for (_, row) in &out {
                rows += 1;
                let bytes = postcard::to_stdvec(row).unwrap_or_default();
                sum = sum.wrapping_add(fnv1a(&bytes));
            }
            if done {
                return (rows, sum);
            }
        }
    }
}

/// Rows per batch of a copy of `def`'s rows: `COPY_BATCH_BYTES` of its
/// largest rows, within the row bounds.
fn copy_batch_rows(def: &TableDef) -> u32 {
    let max = max_row_bytes(def).max(1);
    (COPY_BATCH_BYTES / max).clamp(COPY_BATCH_ROWS_MIN as u64, COPY_BATCH_ROWS_MAX as u64) as u32
}

/// The largest row of `def` in the wire encoding (`row_codec`): tag and
/// length prefix, the longest value of each column (4 bytes a character).
fn max_row_bytes(def: &TableDef) -> u64 {
    use norr_signals::value::{ColumnType as C, MAX_VALUE_BYTES};
    let col = |t: &C| -> u64 {
        match t {
            C::Char { len, .. } | C::Varchar { len, .. } => 4 * *len as u64,
            C::Binary { len } | C::Varbinary { len } => *len as u64,
            C::Text { .. } | C::Blob => MAX_VALUE_BYTES as u64,
            C::Decimal { .. } => 20,
            _ => 16,
        }
    };
    def.columns.iter().map(|c| 6 + col(&c.ty)).sum::<u64>() + 10
}

fn fnv1a(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for x in b {
        h ^= *x as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::table_def;
    use norr_signals::value::{Collation, ColumnType};

    #[test]
    fn copy_batches_are_bounded_in_rows_and_bytes() {
        let small = table_def("s", 1, &[("v", ColumnType::BigInt { unsigned: false })]);
        assert_eq!(copy_batch_rows(&small), COPY_BATCH_ROWS_MAX);
        let wide = table_def("w", 1, &[("v", ColumnType::Varchar { len: 1000, collation: Collation::default() })]);
        let n = copy_batch_rows(&wide);
        assert!(n > COPY_BATCH_ROWS_MIN && n < COPY_BATCH_ROWS_MAX, "{n}");
        assert!(n as u64 * max_row_bytes(&wide) <= COPY_BATCH_BYTES);
        let blob = table_def("b", 1, &[("v", ColumnType::Blob)]);
        assert_eq!(copy_batch_rows(&blob), COPY_BATCH_ROWS_MIN);
    }
}
