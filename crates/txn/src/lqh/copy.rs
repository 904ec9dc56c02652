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
//! It stores each copied row as it comes (insert, or overwrite by key).
//!
//! One batch is in flight at a time: the next is read once the starting
//! node confirmed the last (`CopyRowsConf`), which bounds the memory a copy
//! takes on both ends.

use super::Lqh;
use norr_kernel::{BlockRef, Ctx, NodeId};
use norr_signals::internal::{CopyRows, InternalSignal, LqhScanReq, ScanKey, ScanRows};
use norr_signals::ops::{LockMode, LockWait};
use norr_signals::schema::{PartitionId, TableId};
use norr_signals::value::Value;
use norr_signals::{block, ErrorCode, NodeError, Signal};

/// Rows per copied batch.
const COPY_BATCH_ROWS: u32 = 256;
/// Instance bits of the transaction and scan ids of copies (above every TC
/// instance, so they never collide with a TC's ids on this node).
const COPY_INSTANCE: u64 = 0xFF;

/// A copy this node sends as a primary.
pub(crate) struct CopyOut {
    req: u64,
    master: BlockRef,
    table: TableId,
    part: PartitionId,
    dest: NodeId,
    rows: u64,
    bytes: u64,
    /// The scan has delivered its last batch.
    scan_done: bool,
}

impl Lqh {
    fn copy_key(&self, req: u64) -> ScanKey {
        debug_assert!(req < (1 << 40));
        ((self.node as u64) << 48) | (COPY_INSTANCE << 40) | (req & ((1 << 40) - 1))
    }

    pub(super) fn on_copy_frag_req(
        &mut self,
        master: BlockRef,
        req: u64,
        table: TableId,
        part: PartitionId,
        dest: NodeId,
        ctx: &mut Ctx<'_, Signal>,
    ) {
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
        self.counters.bump("lqh: partition copies started");
        self.copies.insert(key, CopyOut { req, master, table, part, dest, rows: 0, bytes: 0, scan_done: false });
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
            batch_rows: COPY_BATCH_ROWS,
        };
        let me = ctx.self_ref();
        self.on_scan_req(me, scan, ctx);
    }

    /// A batch of this node's own copy scan: send it, then let its locks go.
    pub(super) fn copy_scan_conf(
        &mut self,
        scan: ScanKey,
        part: PartitionId,
        rows: ScanRows,
        done: bool,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        let Some(c) = self.copies.get_mut(&scan) else {
            crate::probe!(self.counters, "lqh: scan batch of an ended copy");
            return;
        };
        debug_assert_eq!(c.part, part);
        c.scan_done = done;
        c.rows += rows.rows.len() as u64;
        c.bytes += rows.rows.iter().map(|r| super::exec::est_bytes(r)).sum::<u64>();
        let version = self.defs.get(&c.table).map_or(0, |d| d.version);
        let out = CopyRows { req: c.req, table: c.table, part, table_version: version, rows: rows.rows };
        let to = BlockRef::new(c.dest, block::LQH, self.instance);
        ctx.send(to, Signal::Internal(Box::new(InternalSignal::CopyRows(Box::new(out)))));
        // Sent: a writer waiting for one of these rows now reaches the
        // starting node after them.
        self.release_locks_of(scan, ctx);
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
        error: Option<NodeError>,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        let key = self.copy_key(req);
        let Some(c) = self.copies.get(&key) else {
            crate::probe!(self.counters, "lqh: copy confirmation of an ended copy");
            return;
        };
        debug_assert!(c.table == table && c.part == part);
        if let Some(e) = error {
            return self.copy_end(key, Err(e), ctx);
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
                InternalSignal::CopyFragConf { req, table, part, rows: c.rows, bytes: c.bytes }
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

    /// The starting replica's end: store the copied rows (insert, or
    /// overwrite the row with the same key).
    pub(super) fn on_copy_rows(&mut self, from: BlockRef, rows: CopyRows, ctx: &mut Ctx<'_, Signal>) {
        let CopyRows { req, table, part, table_version, rows } = rows;
        let n = rows.len() as u64;
        let error = self.store_copied(table, part, table_version, rows).err();
        if error.is_none() {
            self.counters.bump_by("lqh: rows copied in", n);
        } else {
            crate::probe!(self.counters, "lqh: copied rows refused");
        }
        ctx.send(from, Signal::Internal(Box::new(InternalSignal::CopyRowsConf { req, table, part, error })));
    }

    fn store_copied(
        &mut self,
        table: TableId,
        part: PartitionId,
        version: u32,
        rows: Vec<Vec<Value>>,
    ) -> Result<(), NodeError> {
        let def = self.defs.get(&table).cloned().ok_or_else(|| NodeError::new(ErrorCode::NoSuchTable))?;
        if def.version != version {
            return Err(NodeError::with(
                ErrorCode::SchemaVersionMismatch,
                format!("table {} is at version {} here, {version} at the copy's source", def.name, def.version),
            ));
        }
        for row in rows {
            let enc = self.pk_of(&def, &row)?;
            match self.storage.lookup(table, part, &enc) {
                Some(rid) => self.storage.update(table, part, rid, row)?,
                None => {
                    self.storage.insert(table, part, row)?;
                }
            }
        }
        Ok(())
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

fn fnv1a(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for x in b {
        h ^= *x as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}
