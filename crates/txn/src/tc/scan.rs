//! TC's scan coordinator: opens one partition scan per partition (all at once,
//! so partitions are scanned in parallel), buffers at most one LQH batch per
//! partition, and hands the client batches of at most `batch_rows` rows. For
//! index scans the client wants in index order (`ScanSpec::ordered`) it
//! merges the partitions' sorted streams on their ordered keys (k-way merge);
//! every other scan hands on whole partition batches as they come, and LQH
//! encodes no key per row for it.

use super::scan_filter::drop_range_implied;
use super::{internal, AbortReply, Tc, TxnState};
use crate::route::lqh_instance;
use norr_kernel::{BlockRef, Ctx};
use norr_signals::coerce::coerce_value;
use norr_signals::filter_eval::validate_filter;
use norr_signals::internal::{InternalSignal, LqhScanReq, ScanKey, ScanRows, TxnId};
use norr_signals::ops::{LockMode, ScanSpec, MAX_SCAN_BATCH_ROWS, MAX_SCAN_RANGES};
use norr_signals::schema::{IndexKind, PartitionId, TableDef};
use norr_signals::value::Value;
use norr_signals::{ErrorCode, NodeError, ScanNextReq, ScanTabConf, ScanTabRef, ScanTabReq, Signal};

/// Least rows per partition step of an ordered scan (see `on_scan_tab_req`).
const MIN_ORDERED_PART_ROWS: u32 = 64;

struct PartScan {
    part: PartitionId,
    lqh: BlockRef,
    /// The last batch from LQH; rows before `next` are handed on already
    /// (moved out, left empty).
    buf: ScanRows,
    next: usize,
    done: bool,
    /// A request to LQH is in flight.
    outstanding: bool,
}

pub(crate) struct TcScan {
    pub(super) api: BlockRef,
    pub(super) scan_id: u32,
    pub(super) handle: u64,
    txn: Option<TxnId>,
    ordered: bool,
    descending: bool,
    batch_rows: usize,
    /// Rows still allowed by the limit.
    remaining: u64,
    parts: Vec<PartScan>,
    /// The batch being assembled for the client.
    out: Vec<Vec<Value>>,
    /// Ordered scans: the merge heap, kept for reuse.
    merge: Vec<HeapEntry>,
    pub(super) client_waiting: bool,
    last_active_ns: u64,
}

fn validate_spec(def: &TableDef, spec: &ScanSpec) -> Result<Vec<PartitionId>, NodeError> {
    if spec.table_version != 0 && spec.table_version != def.version {
        return Err(NodeError::with(
            ErrorCode::SchemaVersionMismatch,
            format!("table {} is at version {}", def.name, def.version),
        ));
    }
    if spec.batch_rows == 0 || spec.batch_rows > MAX_SCAN_BATCH_ROWS {
        return Err(NodeError::with(
            ErrorCode::MalformedSignal,
            format!("batch_rows must be 1..={MAX_SCAN_BATCH_ROWS}"),
        ));
    }
    if spec.ranges.len() > MAX_SCAN_RANGES {
        return Err(NodeError::with(
            ErrorCode::BadScanBound,
            format!("a scan takes at most {MAX_SCAN_RANGES} ranges, not {}", spec.ranges.len()),
        ));
    }
    if !spec.ranges.is_empty() && spec.range.is_some() {
        return Err(NodeError::with(ErrorCode::BadScanBound, "a scan has a range or a list of ranges, not both"));
    }
    match spec.index {
        None if spec.range.is_some() || !spec.ranges.is_empty() => {
            return Err(NodeError::with(ErrorCode::BadScanBound, "a range needs an ordered index"));
        }
        None => {}
        Some(ix) => {
            let idx = def.index(ix).ok_or_else(|| NodeError::with(ErrorCode::NoSuchIndex, format!("index id {ix}")))?;
            if idx.kind != IndexKind::Ordered {
                return Err(NodeError::with(ErrorCode::NoSuchIndex, format!("index {} is not ordered", idx.name)));
            }
            for r in spec.range.iter().chain(&spec.ranges) {
                for b in [&r.low, &r.high] {
                    if b.values.len() > idx.columns.len() {
                        return Err(NodeError::with(ErrorCode::BadScanBound, "bound longer than the index key"));
                    }
                    for (c, v) in idx.columns.iter().zip(&b.values) {
                        let col = &def.columns[*c as usize];
                        coerce_value(v.clone(), &col.ty, true).map_err(|e| {
                            NodeError::with(ErrorCode::BadScanBound, format!("column {}: {}", col.name, e.message))
                        })?;
                    }
                }
            }
        }
    }
    if let Some(f) = &spec.filter {
        validate_filter(f, def).map_err(|e| NodeError::with(ErrorCode::BadFilter, e.to_string()))?;
    }
    if let Some(a) = &spec.aggregate {
        a.validate(def)?;
        if !spec.ranges.is_empty() || spec.limit.is_some() || spec.lock != LockMode::CommittedRead {
            return Err(NodeError::with(
                ErrorCode::BadAggregate,
                "a pushed aggregate takes no list of ranges, limit or lock",
            ));
        }
    }
    if let Some(c) = spec.projection.iter().find(|c| def.column(**c).is_none()) {
        return Err(NodeError::with(ErrorCode::NoSuchColumn, format!("column id {c} in table {}", def.name)));
    }
    let mut parts = match &spec.partitions {
        None => (0..def.partitions).collect::<Vec<_>>(),
        Some(ps) => {
            if let Some(p) = ps.iter().find(|p| **p >= def.partitions) {
                return Err(NodeError::with(ErrorCode::BadPartition, format!("partition {p} of {}", def.partitions)));
            }
            ps.clone()
        }
    };
    parts.sort_unstable();
    parts.dedup();
    Ok(parts)
}

impl Tc {
    pub(super) fn scan_ref(ctx: &mut Ctx<'_, Signal>, to: BlockRef, txn: u64, scan_id: u32, error: NodeError) {
        ctx.send(to, Signal::ScanTabRef(Box::new(ScanTabRef { txn, scan_id, error })));
    }

    pub(super) fn scan_conf(
        ctx: &mut Ctx<'_, Signal>,
        to: BlockRef,
        txn: u64,
        scan_id: u32,
        rows: Vec<Vec<Value>>,
        done: bool,
    ) {
        ctx.send(to, Signal::ScanTabConf(Box::new(ScanTabConf { txn, scan_id, rows, done })));
    }

    pub(super) fn on_scan_tab_req(&mut self, api: BlockRef, req: ScanTabReq, ctx: &mut Ctx<'_, Signal>) {
        let (handle, scan_id) = (req.txn, req.scan_id);
        let fail = |ctx: &mut Ctx<'_, Signal>, e: NodeError| Self::scan_ref(ctx, api, handle, scan_id, e);
        self.scan_tombstones.remove(&(api.node, scan_id));
        if let Some(e) = self.not_serving(ctx.now_ns()) {
            crate::probe!(self.counters, "tc: scan refused, not serving");
            return fail(ctx, e);
        }
        if self.scan_by_client.contains_key(&(api.node, scan_id)) {
            return fail(ctx, NodeError::with(ErrorCode::MalformedSignal, format!("scan id {scan_id} is open")));
        }
        if self.scans.len() >= self.max_scans {
            crate::probe!(self.counters, "tc: out of scan records");
            return fail(ctx, NodeError::with(ErrorCode::Overloaded, "too many open scans"));
        }
        let mut spec = req.spec;
        let Some(def) = self.defs.get(&spec.table).cloned() else {
            return fail(ctx, NodeError::with(ErrorCode::NoSuchTable, format!("table id {}", spec.table)));
        };
        if let Err(e) = self.privileges.check_scan(api.node, &def) {
            return fail(ctx, e);
        }
        let parts = match validate_spec(&def, &spec) {
            Ok(p) => p,
            Err(e) => return fail(ctx, e),
        };
        // Where each partition is read: its primary, or for a committed-read
        // scan of a table that reads any replica (by a transaction that has
        // written nothing yet) the replica on this node if there is one.
        let locking = !req.standalone && spec.lock != LockMode::CommittedRead;
        let wrote = !req.standalone
            && self.by_handle.get(&(api.node, handle)).and_then(|t| self.txns.get(t)).is_some_and(|x| x.wrote);
        let any_replica = !locking && def.options.reads_any_replica() && !wrote;
        let mut nodes = Vec::with_capacity(parts.len());
        for p in &parts {
            let n = if any_replica { self.dist.read_node(&def, *p, self.node) } else { self.dist.primary(&def, *p) };
            match n {
                Some(n) => nodes.push(n),
                None => {
                    let e = NodeError::with(ErrorCode::PartitionUnavailable, format!("partition {p} of {}", def.name));
                    return fail(ctx, e);
                }
            }
        }
        let had_filter = spec.filter.is_some();
        spec.filter = drop_range_implied(&def, spec.index, spec.range.as_ref(), spec.filter.take());
        if had_filter && spec.filter.is_none() {
            crate::probe!(self.counters, "tc: scan filter implied by the range");
        }
        // Only a locking scan belongs to the transaction; a committed-read scan
        // holds nothing to commit or abort.
        let txn = if locking {
            let t = match self.txn_for(api, handle, ctx.now_ns()) {
                Ok(t) => t,
                Err(e) => return fail(ctx, e),
            };
            let x = self.txns.get_mut(&t).expect("txn");
            if let TxnState::Aborting { reply: reply @ AbortReply::Tombstone(_), .. } = &mut x.state {
                // Aborting on TC's own account: this request learns it.
                let AbortReply::Tombstone(e) = std::mem::replace(reply, AbortReply::Silent) else { unreachable!() };
                return fail(ctx, e);
            }
            if matches!(x.state, TxnState::Committing { .. } | TxnState::Completing { .. } | TxnState::Aborting { .. })
            {
                return fail(ctx, NodeError::with(ErrorCode::MalformedSignal, "transaction is ending"));
            }
            x.last_active_ns = ctx.now_ns();
            Some(t)
        } else {
            None
        };
        // A committed-read scan inside a transaction does not join it, but
        // sees its writes (READ COMMITTED reads the transaction's own
        // changes). A transaction TC has no record of has written nothing.
        let reader = match txn {
            Some(t) => Some(t),
            None if !req.standalone => self.by_handle.get(&(api.node, handle)).copied(),
            None => None,
        };
        let key = self.next_scan;
        self.next_scan += 1;
        self.counters.bump("tc: scans");
        // Merged on the partitions' ordered keys only when the client needs
        // index order; otherwise an index scan runs as a full scan does.
        // A pushed aggregate's partial rows come in no order.
        let ordered = spec.index.is_some() && spec.ordered && spec.aggregate.is_none();
        if spec.index.is_some() && !ordered {
            crate::probe!(self.counters, "tc: unordered index scan");
        }
        let mut scan = TcScan {
            api,
            scan_id,
            handle,
            txn,
            ordered,
            descending: spec.descending,
            batch_rows: spec.batch_rows as usize,
            remaining: spec.limit.unwrap_or(u64::MAX),
            parts: Vec::with_capacity(parts.len()),
            out: Vec::new(),
            merge: Vec::new(),
            client_waiting: true,
            last_active_ns: ctx.now_ns(),
        };
        // Rows each partition returns per step: about two client batches
        // spread over the partitions, so TC buffers O(batch_rows) rows
        // whatever the partition count. An ordered merge stalls whenever a
        // partition's buffer runs dry, so it gets at least a modest batch
        // (bounded: MIN_ORDERED_PART_ROWS per partition).
        let spread = (2 * spec.batch_rows).div_ceil(parts.len().max(1) as u32);
        let floor = if ordered { spec.batch_rows.min(MIN_ORDERED_PART_ROWS) } else { 1 };
        let per_part = spread.max(floor).min(spec.batch_rows).min(scan.remaining.min(u32::MAX as u64) as u32).max(1);
        for (p, node) in parts.into_iter().zip(nodes) {
            let inst = lqh_instance(p, self.lqh_instances);
            let lqh = BlockRef::new(node, norr_signals::block::LQH, inst);
            if let Some(t) = txn {
                // A locking scan's row locks are released by the commit or
                // abort that reaches this LQH (a one-node chain).
                let x = self.txns.get_mut(&t).expect("txn");
                x.nodes.insert((node, inst));
                x.chains.insert(norr_signals::dist::Chain { instance: inst, nodes: [node].into_iter().collect() });
            }
            let done = scan.remaining == 0;
            if !done {
                let r = LqhScanReq {
                    scan: key,
                    txn,
                    reader,
                    table: spec.table,
                    table_version: spec.table_version,
                    part: p,
                    index: spec.index,
                    range: spec.range.clone(),
                    // Unordered: partitions are read forwards whatever the
                    // client asked, the order being unspecified anyway.
                    descending: ordered && spec.descending,
                    row_keys: ordered,
                    filter: spec.filter.clone(),
                    projection: spec.projection.clone(),
                    lock: if locking { spec.lock } else { LockMode::CommittedRead },
                    wait: spec.wait,
                    batch_rows: per_part,
                    ranges: spec.ranges.clone(),
                    aggregate: spec.aggregate.clone(),
                };
                ctx.send(lqh, internal(InternalSignal::LqhScanReq(Box::new(r))));
            }
            scan.parts.push(PartScan { part: p, lqh, buf: ScanRows::default(), next: 0, done, outstanding: !done });
        }
        if let Some(t) = txn {
            self.txns.get_mut(&t).expect("txn").scans.insert(key);
        }
        self.scan_by_client.insert((api.node, scan_id), key);
        self.scans.insert(key, Box::new(scan));
        self.arm_timer(ctx);
        self.pump(key, ctx);
    }

    pub(super) fn on_scan_next_req(&mut self, api: BlockRef, req: ScanNextReq, ctx: &mut Ctx<'_, Signal>) {
        let Some(&key) = self.scan_by_client.get(&(api.node, req.scan_id)) else {
            let error = match self.scan_tombstones.remove(&(api.node, req.scan_id)) {
                Some((error, handle)) => {
                    if let Some(h) = handle {
                        self.tombstones.remove(&(api.node, h));
                    }
                    error
                }
                None => NodeError::new(ErrorCode::NoSuchScan),
            };
            return Self::scan_ref(ctx, api, req.txn, req.scan_id, error);
        };
        let now = ctx.now_ns();
        let s = self.scans.get_mut(&key).expect("indexed scan");
        s.last_active_ns = now;
        if let Some(x) = s.txn.and_then(|t| self.txns.get_mut(&t)) {
            x.last_active_ns = now;
        }
        if req.close {
            let (api, handle, id) = (s.api, s.handle, s.scan_id);
            self.close_scan(key, ctx);
            return Self::scan_conf(ctx, api, handle, id, Vec::new(), true);
        }
        if s.client_waiting {
            return Self::scan_ref(
                ctx,
                api,
                req.txn,
                req.scan_id,
                NodeError::with(ErrorCode::MalformedSignal, "scan busy"),
            );
        }
        s.client_waiting = true;
        self.pump(key, ctx);
    }

    /// Close a scan: tell the LQHs still scanning, forget it. No reply.
    pub(super) fn close_scan(&mut self, key: ScanKey, ctx: &mut Ctx<'_, Signal>) {
        let Some(s) = self.scans.remove(&key) else {
            return;
        };
        self.scan_by_client.remove(&(s.api.node, s.scan_id));
        if let Some(x) = s.txn.and_then(|t| self.txns.get_mut(&t)) {
            x.scans.remove(&key);
        }
        for p in &s.parts {
            if !p.done {
                ctx.send(p.lqh, internal(InternalSignal::LqhScanCloseReq { scan: key, part: p.part }));
            }
        }
    }

    /// Remember that TC closed the scan on its own, so the client's next
    /// request for it learns why (a retriable time-out, not NoSuchScan).
    /// `free_handle`: reading the tombstone also forgets the transaction's
    /// tombstone (the SCAN_TABREF is how the client learns of the abort).
    pub(super) fn tombstone_scan(&mut self, key: ScanKey, error: NodeError, free_handle: bool) {
        let Some(s) = self.scans.get(&key) else {
            return;
        };
        if self.scan_tombstones.len() >= self.max_scans.max(super::MIN_TOMBSTONES) {
            let first = *self.scan_tombstones.keys().next().expect("non-empty");
            self.scan_tombstones.remove(&first);
        }
        let handle = s.txn.filter(|_| free_handle).map(|_| s.handle);
        // The first reason recorded wins (a time-out, then the abort it causes).
        self.scan_tombstones.entry((s.api.node, s.scan_id)).or_insert((error, handle));
    }

    pub(super) fn close_idle_scans(&mut self, now: u64, ctx: &mut Ctx<'_, Signal>) {
        let idle: Vec<ScanKey> = self
            .scans
            .iter()
            .filter(|(_, s)| {
                s.txn.is_none() && !s.client_waiting && now.saturating_sub(s.last_active_ns) >= self.txn_inactive_ns
            })
            .map(|(k, _)| *k)
            .collect();
        for k in idle {
            crate::probe!(self.counters, "tc: idle scan closed");
            let e = NodeError::with(ErrorCode::TransactionTimeout, "scan inactive too long");
            self.tombstone_scan(k, e, true);
            self.close_scan(k, ctx);
        }
    }

    pub(super) fn on_lqh_scan_conf(
        &mut self,
        key: ScanKey,
        part: PartitionId,
        rows: ScanRows,
        done: bool,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        let Some(s) = self.scans.get_mut(&key) else {
            return;
        }; // closed meanwhile
        let ordered = s.ordered;
        let p = s.parts.iter_mut().find(|p| p.part == part).expect("scan part");
        assert!(p.outstanding && p.is_empty(), "unrequested scan batch");
        assert!(!ordered || rows.keys.len() == rows.len(), "ordered scan batch without a key per row");
        debug_assert!(ordered || rows.keys.is_empty(), "keys encoded for a scan TC does not merge");
        p.outstanding = false;
        p.done = done;
        p.buf = rows;
        p.next = 0;
        self.pump(key, ctx);
    }

    pub(super) fn on_lqh_scan_ref(
        &mut self,
        key: ScanKey,
        part: PartitionId,
        error: NodeError,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        let Some(s) = self.scans.get_mut(&key) else {
            return;
        };
        if let Some(p) = s.parts.iter_mut().find(|p| p.part == part) {
            p.done = true; // LQH closed it
        }
        let (api, handle, scan_id, txn, waiting) = (s.api, s.handle, s.scan_id, s.txn, s.client_waiting);
        if error.code == ErrorCode::LockWaitTimeout {
            self.counters.bump("tc: lock wait timeouts");
        }
        if error.code == ErrorCode::LockNoWait {
            // A NOWAIT scan met a row locked by another transaction: the
            // scan ends, the transaction goes on (its locks, those of this
            // scan's earlier rows too, stay until it ends, as InnoDB keeps
            // the locks of a failed statement).
            crate::probe!(self.counters, "tc: nowait scan refused");
            if waiting {
                Self::scan_ref(ctx, api, handle, scan_id, error);
            } else {
                self.tombstone_scan(key, error, false);
            }
            self.close_scan(key, ctx);
            return;
        }
        if !waiting {
            // Never answer unasked: the client learns it from its next
            // SCAN_NEXTREQ (also when that one closes the scan).
            crate::probe!(self.counters, "tc: scan failed between batches");
            self.tombstone_scan(key, error.clone(), true);
        }
        self.close_scan(key, ctx);
        let Some(t) = txn.filter(|t| self.txns.contains_key(t)) else {
            if waiting {
                Self::scan_ref(ctx, api, handle, scan_id, error);
            }
            return;
        };
        let reply = match (&self.txns[&t].state, waiting) {
            (TxnState::Idle, true) => AbortReply::ScanRef { scan_id, error },
            // The scan tombstone reports it and frees the handle; until then
            // a request naming the handle learns it too.
            (TxnState::Idle, false) => AbortReply::Tombstone(NodeError::with(
                ErrorCode::TransactionAborted,
                "a scan of the transaction failed",
            )),
            // The client waits for its key request (or savepoint rollback):
            // that request gets the abort.
            (TxnState::Executing | TxnState::RollingBack { .. }, _) => {
                if waiting {
                    Self::scan_ref(ctx, api, handle, scan_id, error);
                }
                let error = NodeError::with(ErrorCode::TransactionAborted, "a scan of the transaction failed");
                AbortReply::KeyRef { error, op_index: None }
            }
            // Committing or aborting already: that outcome stands.
            _ => {
                if waiting {
                    Self::scan_ref(ctx, api, handle, scan_id, error);
                }
                return;
            }
        };
        self.abort(t, reply, ctx);
    }

    /// Move rows from the partition buffers into the client's batch; send it
    /// when full or finished; ask LQHs for more when a buffer runs dry.
    fn pump(&mut self, key: ScanKey, ctx: &mut Ctx<'_, Signal>) {
        let s = self.scans.get_mut(&key).expect("scan");
        if !s.client_waiting {
            return;
        }
        // The rows buffered now, as far as this batch takes them: room for
        // them at once instead of growing the batch row by row.
        let buffered: usize = s.parts.iter().map(|p| p.left()).sum();
        let room = s.batch_rows.saturating_sub(s.out.len()).min(s.remaining.min(usize::MAX as u64) as usize);
        s.out.reserve(buffered.min(room));
        if s.ordered {
            // Every live partition must show its next row before we know the
            // minimum; then a heap of the partitions by next row picks each.
            if !s.parts.iter().any(|p| p.is_empty() && !p.done) {
                let mut heap = std::mem::take(&mut s.merge);
                heap.clear();
                heap.extend((0..s.parts.len()).filter(|i| !s.parts[*i].is_empty()).map(|i| s.parts[i].head(i)));
                for i in (0..heap.len() / 2).rev() {
                    sift_down(&mut heap, i, &s.parts, s.descending);
                }
                while s.out.len() < s.batch_rows && s.remaining > 0 {
                    let Some(&HeapEntry { part: i, .. }) = heap.first() else { break };
                    s.out.push(s.parts[i].pop());
                    s.remaining -= 1;
                    if !s.parts[i].is_empty() {
                        heap[0] = s.parts[i].head(i);
                        sift_down(&mut heap, 0, &s.parts, s.descending);
                    } else if s.parts[i].done {
                        let last = heap.pop().expect("non-empty");
                        if !heap.is_empty() {
                            heap[0] = last;
                            sift_down(&mut heap, 0, &s.parts, s.descending);
                        }
                    } else {
                        break; // its next row is not here yet
                    }
                }
                s.merge = heap;
            }
        } else {
            while s.out.len() < s.batch_rows && s.remaining > 0 {
                let Some(p) = s.parts.iter_mut().find(|p| !p.is_empty()) else { break };
                let room = (s.batch_rows - s.out.len()).min(s.remaining.min(usize::MAX as u64) as usize);
                let n = room.min(p.left());
                if s.out.is_empty() && p.next == 0 && n == p.buf.len() {
                    // The whole LQH batch as it is: no copy.
                    s.out = std::mem::take(&mut p.buf.rows);
                    p.buf = ScanRows::default();
                } else {
                    s.out.extend(p.buf.rows.drain(p.next..p.next + n));
                    if p.next == p.buf.rows.len() {
                        p.buf = ScanRows::default();
                        p.next = 0;
                    }
                }
                s.remaining -= n as u64;
            }
        }
        let exhausted = s.parts.iter().all(|p| p.done && p.is_empty());
        let finished = exhausted || s.remaining == 0;
        if s.out.len() >= s.batch_rows || finished {
            let rows = std::mem::take(&mut s.out);
            let (api, handle, id) = (s.api, s.handle, s.scan_id);
            s.client_waiting = false;
            // The inactivity clock restarts when the client gets the answer.
            let now = ctx.now_ns();
            s.last_active_ns = now;
            if let Some(x) = s.txn.and_then(|t| self.txns.get_mut(&t)) {
                x.last_active_ns = now;
            }
            if finished {
                self.close_scan(key, ctx);
            }
            return Self::scan_conf(ctx, api, handle, id, rows, finished);
        }
        for p in s.parts.iter_mut().filter(|p| p.is_empty() && !p.done && !p.outstanding) {
            p.outstanding = true;
            ctx.send(p.lqh, internal(InternalSignal::LqhScanNextReq { scan: key, part: p.part }));
        }
    }
}

impl PartScan {
    /// Rows buffered and not handed on yet.
    fn left(&self) -> usize {
        self.buf.len() - self.next
    }

    fn is_empty(&self) -> bool {
        self.next == self.buf.len()
    }

    /// Ordered scans: the key of the next buffered row.
    fn next_key(&self) -> &[u8] {
        self.buf.keys.get(self.next)
    }

    /// Take the next buffered row.
    fn pop(&mut self) -> Vec<Value> {
        let row = std::mem::take(&mut self.buf.rows[self.next]);
        self.next += 1;
        row
    }
}

/// A partition in the merge heap, with the first 16 bytes of its next row's
/// key (zero-padded, big-endian) so that most comparisons are one integer
/// compare; equal prefixes fall back to the whole keys.
#[derive(Debug, Clone, Copy)]
struct HeapEntry {
    prefix: u128,
    part: usize,
}

impl PartScan {
    /// The heap entry of this partition (at position `part`) for its next row.
    fn head(&self, part: usize) -> HeapEntry {
        let k = self.next_key();
        let mut b = [0u8; 16];
        let n = k.len().min(16);
        b[..n].copy_from_slice(&k[..n]);
        HeapEntry { prefix: u128::from_be_bytes(b), part }
    }
}

/// Whether partition `a`'s next row comes before partition `b`'s (both have
/// one). Entry keys are unique (they end in the pk), so there are no ties.
/// Zero padding keeps the prefix order: where two padded prefixes first
/// differ, either both keys have a byte there, or the shorter key ended and
/// the other has a non-zero byte, so it sorts after as a longer key does.
fn before(parts: &[PartScan], descending: bool, a: HeapEntry, b: HeapEntry) -> bool {
    let ord = a.prefix.cmp(&b.prefix).then_with(|| parts[a.part].next_key().cmp(parts[b.part].next_key()));
    if descending {
        ord.is_gt()
    } else {
        ord.is_lt()
    }
}

/// Restore the heap order (first = next row to return) below position `i`.
fn sift_down(heap: &mut [HeapEntry], mut i: usize, parts: &[PartScan], descending: bool) {
    loop {
        let l = 2 * i + 1;
        if l >= heap.len() {
            return;
        }
        let r = l + 1;
        let c = if r < heap.len() && before(parts, descending, heap[r], heap[l]) { r } else { l };
        if !before(parts, descending, heap[c], heap[i]) {
            return;
        }
        heap.swap(c, i);
        i = c;
    }
}

impl Tc {
    /// Scans reading a partition on a failed node fail (a locking scan's
    /// transaction with them) with the temporary node-failure error.
    pub(super) fn scans_node_fail(&mut self, failed: &[norr_kernel::NodeId], ctx: &mut Ctx<'_, Signal>) {
        let hit: Vec<(ScanKey, PartitionId)> = self
            .scans
            .iter()
            .filter_map(|(k, s)| s.parts.iter().find(|p| !p.done && failed.contains(&p.lqh.node)).map(|p| (*k, p.part)))
            .collect();
        for (key, part) in hit {
            crate::probe!(self.counters, "tc: scan failed by a node failure");
            let e = NodeError::with(ErrorCode::TxnNodeFailure, "a data node the scan read failed");
            self.on_lqh_scan_ref(key, part, e, ctx);
        }
    }
}
