//! LQH: executes operations on the partitions of one LDM instance.
//!
//! Per transaction, LQH keeps an operation record: a FIFO of operations still to
//! run (a transaction's operations run in arrival order, so an insert then an
//! update of the same key in one batch apply in batch order), the new row
//! images by row key (uncommitted; storage holds committed data only), and the
//! locks it holds. Commit applies the images to storage; abort drops them.
//!
//! Blocking is never done: an operation that must wait for a lock is parked at
//! the head of its transaction's queue and re-run from the start when the lock
//! is granted (its earlier lock requests are then re-entrant, and nothing is
//! changed before every lock is held, so a re-run is idempotent).
//!
//! Replication (see `norr_signals::internal` and `norr_signals::dist`): the
//! LQH that gets an operation from TC is the partition's primary (or, for a
//! committed read, the replica it reads). A write that prepared is passed
//! along the partition's replica chain (`replica.rs`): every backup locks
//! the row and keeps the primary's new image; the last replica answers TC.
//! Commit runs back along the chain (backups first, the primary last), and
//! a backup keeps its row locks until the complete phase. The chain is
//! computed here from this node's distribution, so a replica that started
//! (a node restart) is included as soon as this LQH knows of it.

mod copy;
mod exec;
mod lcp;
mod redo;
pub use redo::RollForward;
mod replica;
mod resync;
mod savepoint;
mod scan;
mod scan_aggregate;
mod scan_own;
mod takeover;

use crate::counters::Counters;
use crate::dist_view::DistView;
use crate::fxhash::{FxBuild, FxHashMap};
use crate::lock_queue::{Acquire, Grant, LockKey, LockTable, Mode};
use crate::store::{RowId, Storage};
use norr_kernel::{Block, BlockRef, Ctx, NodeId, Priority};
use norr_knobs::Knobs;
use norr_signals::cluster::ClusterSignal;
use norr_signals::dist::{Chain, Dist, ReplicaState};
use norr_signals::internal::{
    BlockStats, InternalSignal, LqhOp, LqhOpError, LqhOpResult, ReplicaOp, ScanKey, SchemaChange, TxnId,
};
use norr_signals::ops::LockWait;
use norr_signals::schema::{PartitionId, TableDef, TableId};
use norr_signals::value::Value;
use norr_signals::{ErrorCode, NodeError, Signal};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

pub(crate) use scan::LqhScan;

/// An operation waiting its turn in its transaction.
type QueuedOp = LqhOp;

/// A transaction's work waiting its turn here: an operation from TC, or a
/// write a primary prepared that this node keeps as a backup.
enum Queued {
    Op(LqhOp),
    Replica(ReplicaOp),
}

impl Queued {
    fn seq(&self) -> u32 {
        match self {
            Queued::Op(q) => q.seq,
            Queued::Replica(r) => r.seq,
        }
    }
}

/// The uncommitted state of one row written by a transaction.
struct Pending {
    part: PartitionId,
    /// New image; None = deleted.
    image: Option<Vec<Value>>,
    /// Memory reserved for the image until commit (see `Lqh::reserved_bytes`).
    est_bytes: u64,
    /// The committed row of this key when the transaction first wrote it
    /// (None: there was none). It cannot change until commit: the key is
    /// locked exclusively, and a DDL that rebuilds the table dooms the
    /// transaction first, so commit applies the image without a second lookup.
    committed: Option<RowId>,
    /// Stamp of the operation that moved the key's previous state onto the
    /// undo list (0: never moved; see `savepoint.rs`).
    savepoint: u32,
    /// Written here as a backup replica (the primary is another node): the
    /// row lock is held until the complete phase, not released at commit.
    backup: bool,
}

type RowKey = (TableId, Vec<u8>);

struct LqhTxn {
    tc: BlockRef,
    /// The transaction's client and its handle, for a take-over.
    api: BlockRef,
    handle: u64,
    queue: VecDeque<Queued>,
    /// Tag of the lock wait the head operation is parked on.
    waiting: Option<u64>,
    pending: BTreeMap<RowKey, Pending>,
    /// Unique index values held by the pending images: (table, index,
    /// encoded value) -> encoded pk of the row whose image has it. Lookups only.
    uniq: FxHashMap<(TableId, norr_signals::IndexId, Vec<u8>), Vec<u8>>,
    /// Keys held or waited for, released at commit/abort; each once (the
    /// lock table says when the transaction first asks for a key).
    locks: Vec<LockKey>,
    /// Set when a concurrent DDL invalidated the transaction: every later
    /// operation and the commit fail with it (TC then aborts).
    doomed: Option<NodeError>,
    /// A lock-wait time-out failed an operation: TC is about to abort, later
    /// queued operations are dropped.
    halted: bool,
    reserved_bytes: u64,
    /// Operations run so far (a locking scan checks whether any ran while it
    /// waited for a row lock).
    ops_run: u64,
    /// (table, partition) pairs this transaction reserved fresh pages in.
    page_reserved: BTreeSet<(TableId, PartitionId)>,
    /// States of row keys replaced since savepoints, oldest first (stamps
    /// non-decreasing); empty while no savepoint is set (see `savepoint.rs`).
    undo: Vec<savepoint::Undo>,
    committed: bool,
    /// The global checkpoint it committed in (once committed).
    gci: u64,
    /// Replica chains of the operations held here (a take-over commits or
    /// aborts along them).
    chains: BTreeSet<Chain>,
    /// The row key of the write `exec_op` just prepared (taken by the queue
    /// runner, which passes the write on along its chain).
    last_write: Option<(PartitionId, RowKey)>,
}

impl LqhTxn {
    fn new(tc: BlockRef) -> LqhTxn {
        LqhTxn {
            tc,
            api: tc,
            handle: 0,
            queue: VecDeque::new(),
            waiting: None,
            pending: BTreeMap::new(),
            uniq: FxHashMap::default(),
            locks: Vec::new(),
            doomed: None,
            halted: false,
            reserved_bytes: 0,
            page_reserved: BTreeSet::new(),
            ops_run: 0,
            undo: Vec::new(),
            committed: false,
            gci: 0,
            chains: BTreeSet::new(),
            last_write: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WaitTarget {
    Op(TxnId),
    Scan(ScanKey, PartitionId),
}

struct WaitInfo {
    key: LockKey,
    owner: TxnId,
    target: WaitTarget,
}

pub struct Lqh {
    node: NodeId,
    instance: u16,
    lqh_instances: u16,
    /// The cluster's distribution as DIH last published it (this node alone
    /// until a DIH runs).
    dist: DistView,
    /// Partition copies this node sends as a primary (node restarts).
    copies: BTreeMap<ScanKey, copy::CopyOut>,
    lock_wait_timeout_ns: u64,
    examine_per_step: usize,
    storage: Storage,
    /// Table definitions as applied to storage (cheap to clone per operation).
    defs: FxHashMap<TableId, Arc<TableDef>>,
    locks: LockTable,
    /// A hash map (see TC's `txns`); `doom_writers` visits it in any order,
    /// as its effect on each transaction is independent of the others.
    txns: FxHashMap<TxnId, LqhTxn>,
    waits: FxHashMap<u64, WaitInfo>,
    next_tag: u64,
    /// Boxed: a B-tree moves its values around as it changes.
    scans: BTreeMap<(ScanKey, PartitionId), Box<LqhScan>>,
    /// Estimated bytes of uncommitted images, checked with storage's used bytes
    /// at prepare so that commit never runs out of memory.
    reserved_bytes: u64,
    counters: Counters,
    /// The REDO log part of this instance (a node with a data directory).
    redo: Option<redo::LqhRedo>,
    /// Set by a schema change that logged a table reset (see
    /// `redo_log_reset`): the GCI its answer waits for.
    ddl_reset_gci: Option<norr_signals::ckpt::Gci>,
    /// Schema changes that came before this node's REDO roll forward at a
    /// system restart (`GcpRestoreToReq`): made after it, so that records
    /// of the old layout are never replayed into a changed table.
    ddl_before_restore: Vec<(BlockRef, u64, SchemaChange)>,
    /// Local checkpoints of this instance's partitions (`lcp.rs`).
    lcp: lcp::LqhLcp,
    lcp_max_chain: usize,
    lcp_slice_rows: usize,
    lcp_slice_delay_us: u64,
    /// A node restart from local files: restored tables kept, partitions
    /// being resynchronised (`resync.rs`).
    resync: resync::Resync,
}

/// Outcome of one attempt to run an operation.
enum Step {
    Done(Result<Option<Vec<Value>>, NodeError>),
    /// Parked on lock wait `tag`.
    Wait(u64),
}

impl Lqh {
    pub fn new(node: NodeId, instance: u16, lqh_instances: u16, knobs: &Knobs) -> Lqh {
        assert!(instance < lqh_instances);
        Lqh {
            node,
            instance,
            lqh_instances,
            dist: DistView::new(Dist::single(node)),
            copies: BTreeMap::new(),
            lock_wait_timeout_ns: knobs.lock_wait_timeout_ms * 1_000_000,
            examine_per_step: knobs.scan_examine_per_step.max(1) as usize,
            storage: Storage::new(knobs.data_memory_bytes),
            defs: FxHashMap::default(),
            locks: LockTable::new(),
            txns: FxHashMap::default(),
            waits: FxHashMap::default(),
            next_tag: 1,
            scans: BTreeMap::new(),
            reserved_bytes: 0,
            counters: Counters::default(),
            redo: None,
            ddl_reset_gci: None,
            ddl_before_restore: Vec::new(),
            lcp: lcp::LqhLcp::default(),
            lcp_max_chain: knobs.lcp_max_chain.max(2) as usize,
            lcp_slice_rows: knobs.lcp_slice_rows.max(1) as usize,
            lcp_slice_delay_us: knobs.lcp_slice_delay_us,
            resync: resync::Resync::default(),
        }
    }

    pub fn instance(&self) -> u16 {
        self.instance
    }

    /// The chain of an operation that left state on this node alone.
    fn own_chain(&self) -> Chain {
        Chain { instance: self.instance, nodes: [self.node].into_iter().collect() }
    }

    /// Ask for a lock for `owner`; Some(tag) if it must wait (a time-out is
    /// armed: `wait`'s own bound for `LockWait::WaitMs`, else the cluster's).
    fn lock(
        &mut self,
        owner: TxnId,
        key: &LockKey,
        mode: Mode,
        wait: LockWait,
        target: WaitTarget,
        ctx: &mut Ctx<'_, Signal>,
    ) -> Option<u64> {
        self.lock_owned(owner, key.clone(), mode, wait, target, ctx)
    }

    /// How long a lock request with `wait` may queue, in nanoseconds.
    fn lock_wait_ns(&self, wait: LockWait) -> u64 {
        match wait {
            LockWait::WaitMs(ms) => u64::from(ms) * 1_000_000,
            _ => self.lock_wait_timeout_ns,
        }
    }

    /// `lock` taking the key: the transaction's list keeps it without a copy.
    fn lock_owned(
        &mut self,
        owner: TxnId,
        key: LockKey,
        mode: Mode,
        wait: LockWait,
        target: WaitTarget,
        ctx: &mut Ctx<'_, Signal>,
    ) -> Option<u64> {
        let wait_ns = self.lock_wait_ns(wait);
        let tag = self.next_tag;
        self.next_tag += 1;
        let txn = self.txns.get_mut(&owner).expect("lock owner has a transaction record");
        let (acquired, first) = self.locks.acquire_tracked(&key, owner, mode, tag);
        let key = if first {
            txn.locks.push(key);
            txn.locks.last().expect("just pushed")
        } else {
            &key
        };
        match acquired {
            Acquire::Granted => None,
            Acquire::Waiting => {
                self.counters.bump("lqh: lock waits");
                self.waits.insert(tag, WaitInfo { key: key.clone(), owner, target });
                let me = ctx.self_ref();
                ctx.send_delayed(me, Signal::Internal(Box::new(InternalSignal::LqhLockTimeout { tag })), wait_ns);
                Some(tag)
            }
        }
    }

    /// `lock_owned` for a read that must not wait (NOWAIT / SKIP LOCKED):
    /// true if granted now; false if another transaction holds the key or
    /// waits for it first, and then nothing is queued and no time-out armed:
    /// the lock table and the transaction's key list are as before.
    fn try_lock_owned(&mut self, owner: TxnId, key: LockKey, mode: Mode) -> bool {
        let txn = self.txns.get_mut(&owner).expect("lock owner has a transaction record");
        match self.locks.try_acquire(&key, owner, mode) {
            Some(first) => {
                if first {
                    txn.locks.push(key);
                }
                true
            }
            None => {
                crate::probe!(self.counters, "lqh: lock busy, read did not wait");
                false
            }
        }
    }

    /// Resume whoever was granted a lock.
    fn on_grants(&mut self, grants: Vec<Grant>, ctx: &mut Ctx<'_, Signal>) {
        for g in grants {
            let Some(w) = self.waits.remove(&g.tag) else {
                continue;
            };
            debug_assert_eq!(w.owner, g.owner);
            match w.target {
                WaitTarget::Op(t) => {
                    if let Some(txn) = self.txns.get_mut(&t) {
                        if txn.waiting == Some(g.tag) {
                            txn.waiting = None;
                            self.run_queue(t, ctx);
                        }
                    }
                }
                WaitTarget::Scan(s, p) => {
                    if let Some(sc) = self.scans.get_mut(&(s, p)) {
                        if sc.waiting == Some(g.tag) {
                            sc.waiting = None;
                            self.scan_step((s, p), ctx);
                        }
                    }
                }
            }
        }
    }

    fn reply(ctx: &mut Ctx<'_, Signal>, to: BlockRef, s: InternalSignal) {
        ctx.send(to, Signal::Internal(Box::new(s)));
    }

    /// Run the transaction's queued work until something must wait for a
    /// lock. Results go to TC in one `LqhKeyConf`; prepared writes whose
    /// chain goes on go to the next replica in one `LqhReplicaReq` per node.
    fn run_queue(&mut self, t: TxnId, ctx: &mut Ctx<'_, Signal>) {
        let Some(txn) = self.txns.get(&t) else {
            return;
        };
        let tc = txn.tc;
        let (api, handle) = (txn.api, txn.handle);
        let mut results = Vec::with_capacity(txn.queue.len());
        let mut forward: BTreeMap<(NodeId, u16), Vec<ReplicaOp>> = BTreeMap::new();
        let own = self.own_chain();
        while let Some(txn) = self.txns.get_mut(&t) {
            if txn.waiting.is_some() {
                break;
            }
            let Some(item) = txn.queue.pop_front() else {
                break;
            };
            if let Some(error) = txn.doomed.clone() {
                let chain = match &item {
                    Queued::Op(_) => own.clone(),
                    Queued::Replica(r) => r.chain.clone(),
                };
                let outcome = Err(LqhOpError { error, fatal: true });
                results.push(LqhOpResult { seq: item.seq(), outcome, chain: Some(chain) });
                continue;
            }
            txn.ops_run += 1;
            if let Queued::Op(q) = &item {
                if q.op.kind.is_write() {
                    if let Err(error) = self.redo_admit() {
                        self.txns.get_mut(&t).expect("txn").chains.insert(own.clone());
                        let outcome = Err(LqhOpError { error, fatal: false });
                        results.push(LqhOpResult { seq: q.seq, outcome, chain: Some(own.clone()) });
                        continue;
                    }
                }
            }
            match item {
                Queued::Op(mut q) => match self.exec_op(t, &mut q, ctx) {
                    Step::Done(Ok(row)) if q.op.kind.is_write() => {
                        let (part, rk) =
                            self.txns.get_mut(&t).and_then(|x| x.last_write.take()).expect("a write records its key");
                        let chain = self.write_chain(rk.0, part);
                        self.txns.get_mut(&t).expect("txn").chains.insert(chain.clone());
                        match self.next_alive(&chain) {
                            None => results.push(LqhOpResult { seq: q.seq, outcome: Ok(row), chain: Some(chain) }),
                            Some(next) => {
                                let txn = self.txns.get(&t).expect("txn");
                                let image = txn.pending.get(&rk).and_then(|p| p.image.clone());
                                let r = ReplicaOp {
                                    seq: q.seq,
                                    table: rk.0,
                                    part,
                                    key: rk.1,
                                    image,
                                    savepoint: q.savepoint,
                                    chain: chain.clone(),
                                    result: row,
                                };
                                forward.entry((next, chain.instance)).or_default().push(r);
                            }
                        }
                    }
                    Step::Done(outcome) => {
                        let outcome = outcome.map_err(|error| LqhOpError { error, fatal: false });
                        self.txns.get_mut(&t).expect("txn").chains.insert(own.clone());
                        results.push(LqhOpResult { seq: q.seq, outcome, chain: Some(own.clone()) });
                    }
                    Step::Wait(tag) => {
                        let txn = self.txns.get_mut(&t).expect("still there");
                        txn.waiting = Some(tag);
                        txn.queue.push_front(Queued::Op(q));
                        break;
                    }
                },
                Queued::Replica(mut r) => {
                    let next = self.next_alive(&r.chain);
                    match self.exec_replica(t, &mut r, next.is_some(), ctx) {
                        Step::Done(Ok(_)) => {
                            self.txns.get_mut(&t).expect("txn").chains.insert(r.chain.clone());
                            match next {
                                Some(n) => forward.entry((n, r.chain.instance)).or_default().push(r),
                                None => {
                                    let chain = Some(r.chain);
                                    results.push(LqhOpResult { seq: r.seq, outcome: Ok(r.result), chain });
                                }
                            }
                        }
                        Step::Done(Err(error)) => {
                            // The primary ran every check: a backup that cannot
                            // keep the write (memory, a concurrent DDL) fails
                            // the transaction.
                            crate::probe!(self.counters, "lqh: backup refused a write");
                            let outcome = Err(LqhOpError { error, fatal: true });
                            results.push(LqhOpResult { seq: r.seq, outcome, chain: Some(r.chain) });
                        }
                        Step::Wait(tag) => {
                            let txn = self.txns.get_mut(&t).expect("still there");
                            txn.waiting = Some(tag);
                            txn.queue.push_front(Queued::Replica(r));
                            break;
                        }
                    }
                }
            }
        }
        if !results.is_empty() {
            // Counted once per run, not per operation (a map lookup by name).
            self.counters.bump_by("lqh: operations", results.len() as u64);
            self.counters.bump("lqh: key confs");
            Self::reply(ctx, tc, InternalSignal::LqhKeyConf { txn: t, results });
        }
        for ((node, instance), ops) in forward {
            self.counters.bump_by("lqh: writes passed on", ops.len() as u64);
            let req = norr_signals::internal::LqhReplicaReq { txn: t, tc, api, handle, ops };
            let to = BlockRef::new(node, norr_signals::block::LQH, instance);
            ctx.send(to, Signal::Internal(Box::new(InternalSignal::LqhReplicaReq(Box::new(req)))));
        }
    }

    fn on_key_req(
        &mut self,
        tc: BlockRef,
        t: TxnId,
        ops: Vec<LqhOp>,
        (api, handle): (BlockRef, u64),
        ctx: &mut Ctx<'_, Signal>,
    ) {
        self.counters.bump("lqh: key requests");
        if !self.txns.contains_key(&t) && ops.iter().all(|q| q.op.is_committed_read()) {
            return self.simple_reads(tc, t, ops, ctx);
        }
        let txn = self.txns.entry(t).or_insert_with(|| LqhTxn::new(tc));
        assert!(!txn.committed, "operation for committed transaction {t}");
        (txn.api, txn.handle) = (api, handle);
        if txn.halted {
            // TC aborts the transaction: nothing more runs.
            return;
        }
        txn.queue.extend(ops.into_iter().map(Queued::Op));
        if txn.waiting.is_none() {
            self.run_queue(t, ctx);
        }
    }

    /// Committed reads of a transaction with no record here (simple reads,
    /// see `norr_signals::internal`): nothing is queued before them and they
    /// take no lock, so they run now and leave no record; TC does not count
    /// this LQH as a participant.
    fn simple_reads(&mut self, tc: BlockRef, t: TxnId, ops: Vec<LqhOp>, ctx: &mut Ctx<'_, Signal>) {
        let mut results = Vec::with_capacity(ops.len());
        for mut q in ops {
            let outcome = match self.exec_op(t, &mut q, ctx) {
                Step::Done(Ok(row)) => Ok(row),
                Step::Done(Err(error)) => Err(LqhOpError { error, fatal: false }),
                Step::Wait(_) => unreachable!("a committed read waited for a lock"),
            };
            results.push(LqhOpResult { seq: q.seq, outcome, chain: None });
        }
        assert!(!self.txns.contains_key(&t), "simple reads of {t} left a record");
        self.counters.bump_by("lqh: operations", results.len() as u64);
        self.counters.bump("lqh: key confs");
        self.counters.bump("lqh: simple reads (no record)");
        Self::reply(ctx, tc, InternalSignal::LqhKeyConf { txn: t, results });
    }

    fn on_lock_timeout(&mut self, tag: u64, ctx: &mut Ctx<'_, Signal>) {
        let Some(w) = self.waits.remove(&tag) else {
            return;
        }; // granted or cancelled meanwhile
        crate::probe!(self.counters, "lqh: lock wait timed out");
        let mut grants = Vec::new();
        self.locks.cancel_wait(&w.key, w.owner, tag, &mut grants);
        let error = NodeError::with(ErrorCode::LockWaitTimeout, "lock wait timed out");
        match w.target {
            WaitTarget::Op(t) => {
                let txn = self.txns.get_mut(&t).expect("waiting op has a transaction");
                assert_eq!(txn.waiting, Some(tag));
                txn.waiting = None;
                txn.halted = true;
                let q = txn.queue.pop_front().expect("parked op");
                txn.queue.clear();
                let tc = txn.tc;
                let chain = match &q {
                    Queued::Op(_) => self.own_chain(),
                    Queued::Replica(r) => r.chain.clone(),
                };
                let results = vec![LqhOpResult {
                    seq: q.seq(),
                    outcome: Err(LqhOpError { error, fatal: true }),
                    chain: Some(chain),
                }];
                Self::reply(ctx, tc, InternalSignal::LqhKeyConf { txn: t, results });
            }
            WaitTarget::Scan(s, p) => {
                if let Some(sc) = self.scans.remove(&(s, p)) {
                    Self::reply(ctx, sc.tc, InternalSignal::LqhScanRef { scan: s, part: p, error });
                }
            }
        }
        self.on_grants(grants, ctx);
    }

    /// Release every lock and wait of a transaction; drop its scans.
    fn release_txn(&mut self, t: TxnId, txn: &mut LqhTxn, ctx: &mut Ctx<'_, Signal>) {
        let mut grants = Vec::new();
        if let Some(tag) = txn.waiting.take() {
            if let Some(w) = self.waits.remove(&tag) {
                self.locks.cancel_wait(&w.key, t, tag, &mut grants);
            }
        }
        let scans: Vec<_> = self.scans.iter().filter(|(_, s)| s.txn == Some(t)).map(|(k, _)| *k).collect();
        for k in scans {
            self.drop_scan(k, &mut grants);
        }
        for key in std::mem::take(&mut txn.locks) {
            self.locks.release(&key, t, &mut grants);
        }
        self.reserved_bytes -= txn.reserved_bytes;
        txn.reserved_bytes = 0;
        txn.pending.clear();
        txn.uniq.clear();
        txn.undo.clear();
        txn.queue.clear();
        self.on_grants(grants, ctx);
    }

    fn on_abort(&mut self, from: BlockRef, t: TxnId, ctx: &mut Ctx<'_, Signal>) {
        if let Some(mut txn) = self.txns.remove(&t) {
            assert!(!txn.committed, "abort after commit of {t}");
            self.counters.bump("lqh: aborts");
            self.release_txn(t, &mut txn, ctx);
        }
        Self::reply(ctx, from, InternalSignal::LqhAbortConf { txn: t });
    }

    /// Commit phase at this replica of `chain`: the first commit of a
    /// transaction applies everything it holds here and releases the locks
    /// of the rows this node is primary for (a backup keeps its locks until
    /// complete); then the commit goes on to the previous live replica, or,
    /// from the primary, back to TC.
    fn on_commit(&mut self, t: TxnId, gci: u64, chain: Chain, tc: BlockRef, ctx: &mut Ctx<'_, Signal>) {
        debug_assert!(chain.contains(self.node), "commit of {t} along a chain without node {}", self.node);
        match self.txns.remove(&t) {
            None => crate::probe!(self.counters, "lqh: commit passed on without a record"),
            Some(txn) if txn.committed => {
                self.txns.insert(t, txn);
            }
            Some(mut txn) => {
                assert!(txn.queue.is_empty() && txn.waiting.is_none(), "commit of {t} with operations in flight");
                if let Some(error) = txn.doomed.clone() {
                    crate::probe!(self.counters, "lqh: commit refused after ddl");
                    self.release_txn(t, &mut txn, ctx);
                    Self::reply(ctx, tc, InternalSignal::LqhCommitRef { txn: t, error });
                    return;
                }
                self.redo_log_commit(&txn, gci, ctx);
                self.storage.set_commit_gci(gci);
                self.apply(&mut txn);
                self.counters.bump("lqh: commits");
                self.release_committed(t, &mut txn, ctx);
                txn.committed = true;
                txn.gci = gci;
                txn.tc = tc;
                self.txns.insert(t, txn);
            }
        }
        match self.prev_alive(&chain) {
            Some(prev) => {
                let to = BlockRef::new(prev, norr_signals::block::LQH, chain.instance);
                ctx.send(to, Signal::Internal(Box::new(InternalSignal::LqhCommitReq { txn: t, gci, chain, tc })));
            }
            None => Self::reply(ctx, tc, InternalSignal::LqhCommitConf { txn: t, chain }),
        }
    }

    /// After commit: drop the scans and lock waits, release the locks of
    /// rows this node is primary for, keep a backup's row locks (released at
    /// complete). The images are in storage now.
    fn release_committed(&mut self, t: TxnId, txn: &mut LqhTxn, ctx: &mut Ctx<'_, Signal>) {
        // Looked up by borrowed key: a lock key is not cloned to ask.
        let backup_rows: std::collections::HashSet<(TableId, &[u8]), FxBuild> =
            txn.pending.iter().filter(|(_, p)| p.backup).map(|((t, k), _)| (*t, k.as_slice())).collect();
        let mut keep = Vec::new();
        let mut release = Vec::with_capacity(txn.locks.len());
        for key in std::mem::take(&mut txn.locks) {
            match &key {
                LockKey::Row(table, enc) if backup_rows.contains(&(*table, enc.as_slice())) => keep.push(key),
                _ => release.push(key),
            }
        }
        txn.locks = release;
        self.release_txn(t, txn, ctx);
        txn.locks = keep;
    }

    /// Complete phase: free the record and the backup's row locks, then on
    /// to the next live replica, or from the last one back to TC.
    fn on_complete(&mut self, t: TxnId, chain: Chain, tc: BlockRef, ctx: &mut Ctx<'_, Signal>) {
        match self.txns.remove(&t) {
            Some(mut txn) if txn.committed => {
                self.counters.bump("lqh: completes");
                self.release_txn(t, &mut txn, ctx);
            }
            Some(txn) => {
                // Complete only follows a commit of every chain.
                debug_assert!(false, "complete before commit of {t}");
                self.txns.insert(t, txn);
            }
            None => crate::probe!(self.counters, "lqh: complete passed on without a record"),
        }
        match self.next_alive(&chain) {
            Some(next) => {
                let to = BlockRef::new(next, norr_signals::block::LQH, chain.instance);
                ctx.send(to, Signal::Internal(Box::new(InternalSignal::LqhCompleteReq { txn: t, chain, tc })));
            }
            None => Self::reply(ctx, tc, InternalSignal::LqhCompleteConf { txn: t, chain }),
        }
    }

    /// Apply a transaction's images to storage: deletes first, then updates,
    /// then inserts, so a unique value moved from a deleted row to a new one
    /// never collides inside storage. Updates that swap unique values between
    /// rows of the transaction collide transiently whatever their order: those
    /// are applied as delete + insert after the other updates. Everything was
    /// checked at prepare, so nothing else can fail.
    ///
    /// Images are moved into storage, not copied (they are dropped with the
    /// transaction anyway), except on tables with a unique index, where a
    /// refused update is retried as an insert in the last pass.
    fn apply(&mut self, txn: &mut LqhTxn) {
        let defs = &self.defs;
        let has_unique = |table: TableId| defs.get(&table).is_none_or(|d| d.indexes.iter().any(|i| i.unique));
        let st = &mut self.storage;
        let refused = |table: TableId, e: NodeError| -> ! {
            panic!("storage refused a prepared change of table {table} at commit: {e}")
        };
        // Each row is looked up once: a pass only deletes, updates in place
        // or inserts rows of its own key, so no row id found here changes,
        // except for the deferred rows, which are deleted before pass 2.
        let mut rows: Vec<Option<RowId>> = txn.pending.values().map(|p| p.committed).collect();
        let mut deferred = Vec::new();
        for pass in 0..3 {
            if pass == 2 {
                for (table, part, rid) in deferred.drain(..) {
                    st.delete(table, part, rid);
                }
            }
            for (i, ((table, enc), p)) in txn.pending.iter_mut().enumerate() {
                debug_assert_eq!(rows[i], st.lookup(*table, p.part, enc));
                match (pass, rows[i], &mut p.image) {
                    (0, Some(rid), None) => {
                        st.delete(*table, p.part, rid);
                        rows[i] = None;
                    }
                    (1, Some(rid), Some(img)) => {
                        let img = if has_unique(*table) { img.clone() } else { std::mem::take(img) };
                        match st.update(*table, p.part, rid, img) {
                            Ok(()) => {}
                            Err(e) if e.code == ErrorCode::DuplicateUniqueKey => {
                                crate::probe!(self.counters, "lqh: unique swap applied as delete+insert");
                                deferred.push((*table, p.part, rid));
                                rows[i] = None;
                            }
                            Err(e) => refused(*table, e),
                        }
                    }
                    (2, None, Some(img)) => {
                        if let Err(e) = st.insert(*table, p.part, std::mem::take(img)) {
                            refused(*table, e);
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    /// A DDL changed `table` under running transactions: those with uncommitted
    /// writes on it can no longer commit safely (their checks ran against the
    /// old definition or rows); they fail at their next operation or commit.
    fn doom_writers(&mut self, table: TableId, why: &str) {
        for txn in self.txns.values_mut() {
            if txn.committed || !txn.pending.keys().any(|(t, _)| *t == table) {
                continue;
            }
            crate::probe!(self.counters, "lqh: transaction doomed by ddl");
            txn.doomed = Some(NodeError::with(ErrorCode::SchemaVersionMismatch, why.to_string()));
            let keys: Vec<RowKey> = txn.pending.keys().filter(|(t, _)| *t == table).cloned().collect();
            txn.uniq.retain(|(t, _, _), _| *t != table);
            for k in keys {
                let p = txn.pending.remove(&k).expect("listed");
                txn.reserved_bytes -= p.est_bytes;
                self.reserved_bytes -= p.est_bytes;
            }
        }
    }

    /// Fail the open scans of `table` (optionally only those on `index`).
    fn fail_scans(&mut self, table: TableId, index: Option<norr_signals::IndexId>, ctx: &mut Ctx<'_, Signal>) {
        let keys: Vec<_> = self
            .scans
            .iter()
            .filter(|(_, s)| s.table == table && (index.is_none() || s.index == index))
            .map(|(k, _)| *k)
            .collect();
        let mut grants = Vec::new();
        for k in keys {
            let tc = self.scans[&k].tc;
            self.drop_scan(k, &mut grants);
            let error = NodeError::with(ErrorCode::SchemaVersionMismatch, "table changed during the scan");
            Self::reply(ctx, tc, InternalSignal::LqhScanRef { scan: k.0, part: k.1, error });
        }
        self.on_grants(grants, ctx);
    }

    /// True when this LQH has made `change` already: a new DICT master
    /// makes the change its failed predecessor left half done again, on
    /// every LQH (`Dict::take_over`). A definition is compared whole: an
    /// equal one is the same change (ids and versions are never reused).
    fn has_schema_change(&self, change: &SchemaChange) -> bool {
        let has_def = |def: &TableDef| self.defs.get(&def.id).is_some_and(|d| **d == *def);
        match change {
            SchemaChange::CreateTable(def)
            | SchemaChange::CreateIndex { def, .. }
            | SchemaChange::DropIndex { def, .. }
            | SchemaChange::AlterCommit { def }
            | SchemaChange::TruncateTable(def) => has_def(def),
            SchemaChange::AlterTable { def, .. } => has_def(def) || self.storage.is_altering(def.id),
            SchemaChange::DropTable(t) => !self.defs.contains_key(t) && self.storage.table_def(*t).is_none(),
            // Discarding is idempotent.
            SchemaChange::AlterAbort(_) => false,
        }
    }

    fn on_schema_change(&mut self, change: SchemaChange, ctx: &mut Ctx<'_, Signal>) -> Option<NodeError> {
        let table = change.table();
        if self.has_schema_change(&change) {
            self.counters.bump("lqh: schema change it had made already");
            return None;
        }
        if matches!(change, SchemaChange::CreateIndex { .. } | SchemaChange::AlterTable { .. }) {
            if let Some(e) = self.resync_refuses_ddl(table) {
                crate::probe!(self.counters, "lqh: ddl refused during a resync");
                return Some(e);
            }
        }
        let r = match change {
            SchemaChange::CreateTable(def) => {
                if let Some(kept) = self.create_kept_table(&def) {
                    return kept.err();
                }
                let r = self.storage.create_table(&def);
                if r.is_ok() {
                    self.defs.insert(def.id, Arc::new(def));
                }
                r
            }
            SchemaChange::DropTable(t) => {
                self.doom_writers(t, "table dropped by a concurrent DDL");
                self.fail_scans(t, None, ctx);
                self.defs.remove(&t);
                self.resync_after_ddl(t, true);
                self.storage.drop_table(t)
            }
            SchemaChange::TruncateTable(def) => {
                let t = def.id;
                debug_assert!(
                    self.defs.get(&t).is_none_or(|d| d.version < def.version),
                    "a TRUNCATE must raise the table's version"
                );
                // The reset record must find room once the rows are gone.
                if let Err(e) = self.redo_check_ddl_room(None) {
                    return Some(e);
                }
                if norr_durability::crash_point!(
                    self.lcp.crash,
                    norr_durability::crash::points::LQH_TRUNCATE_NO_REDO_ROOM
                ) {
                    return Some(NodeError::with(
                        ErrorCode::RedoLogFull,
                        "the REDO log has no room for the TRUNCATE's reset record (fault point)",
                    ));
                }
                self.doom_writers(t, "table truncated by a concurrent DDL");
                self.fail_scans(t, None, ctx);
                let r = self.storage.truncate_table(t);
                self.resync_after_ddl(t, false);
                if r.is_ok() {
                    // The reset carries the new version: a restart whose
                    // schema file still holds the old one (the TRUNCATE was
                    // never answered) cuts the log there, as for an ALTER.
                    let version = def.version;
                    self.defs.insert(t, Arc::new(def));
                    self.ddl_reset_gci = self.redo_log_reset(t, version, Vec::new(), ctx);
                }
                r
            }
            SchemaChange::CreateIndex { def, index } => {
                let idx = def.index(index).expect("DICT sends the def with the index").clone();
                let r = self.storage.create_index(table, &idx);
                if r.is_ok() {
                    self.doom_writers(table, "index created by a concurrent DDL");
                    self.defs.insert(table, Arc::new(def));
                }
                r
            }
            SchemaChange::DropIndex { def, index } => {
                self.doom_writers(table, "index dropped by a concurrent DDL");
                self.fail_scans(table, Some(index), ctx);
                self.defs.insert(table, Arc::new(def));
                self.storage.drop_index(table, index)
            }
            SchemaChange::AlterTable { def, sources } => {
                // Doomed first: their commits would change rows after the
                // copy took them. Their images are dropped with them, so an
                // old-layout image can never reach the new table; writes
                // that come later are refused until commit or abort.
                self.doom_writers(table, "table altered by a concurrent DDL");
                let r = self.storage.alter_prepare(table, &def, &sources);
                match (r, self.storage.alter_rebuilt_bytes(table)) {
                    // The rebuilt rows go to the REDO log at commit (a
                    // restart has them nowhere else): room for them now, or
                    // the change is refused. Their encoding is at most about
                    // twice their size in memory.
                    (Ok(()), Some(bytes)) => match self.redo_check_ddl_room(Some(bytes.saturating_mul(2))) {
                        Ok(()) => Ok(()),
                        Err(e) => {
                            self.storage.alter_discard(table);
                            Err(e)
                        }
                    },
                    (r, _) => r,
                }
            }
            SchemaChange::AlterCommit { def } => {
                debug_assert!(
                    self.txns.values().all(|t| t.committed || !t.pending.keys().any(|(t, _)| *t == table)),
                    "a write reached table {table} while it was being altered"
                );
                // Scans hold cursors into the old rows.
                self.fail_scans(table, None, ctx);
                let rebuilt = self.storage.alter_rebuilt_bytes(table).is_some();
                let r = self.storage.alter_commit(table);
                if r.is_ok() {
                    let version = def.version;
                    self.defs.insert(table, Arc::new(def));
                    if rebuilt && self.redo.is_some() {
                        let rows = self.rebuilt_rows_for_redo(table);
                        self.ddl_reset_gci = self.redo_log_reset(table, version, rows, ctx);
                    }
                }
                r
            }
            SchemaChange::AlterAbort(t) => {
                self.storage.alter_discard(t);
                Ok(())
            }
        };
        r.err()
    }

    fn on_schema_change_req(&mut self, from: BlockRef, req: u64, change: SchemaChange, ctx: &mut Ctx<'_, Signal>) {
        self.ddl_reset_gci = None;
        let error = self.on_schema_change(change, ctx);
        // A TRUNCATE or rebuilding ALTER logged a reset: DICT hears
        // once its GCI is complete (a restart then replays it).
        if let (None, Some(gci)) = (&error, self.ddl_reset_gci.take()) {
            return self.redo_hold_schema_conf(gci, from, req, ctx);
        }
        Self::reply(ctx, from, InternalSignal::SchemaChangeConf { req, error });
    }

    /// The REDO roll forward is done (or there was none): the schema
    /// changes held for it are made, in order.
    pub(super) fn schema_changes_after_restore(&mut self, ctx: &mut Ctx<'_, Signal>) {
        for (from, req, change) in std::mem::take(&mut self.ddl_before_restore) {
            self.on_schema_change_req(from, req, change, ctx);
        }
    }

    fn stats(&self) -> BlockStats {
        let m = self.storage.memory();
        let mut counters = self.counters.snapshot();
        counters.push(("lqh: open transactions".into(), self.txns.len() as u64));
        counters.push(("lqh: locked keys".into(), self.locks.len() as u64));
        counters.push(("lqh: open scans".into(), self.scans.len() as u64));
        counters.push(("lqh: reserved bytes".into(), self.reserved_bytes));
        self.redo_stats(&mut counters);
        BlockStats {
            data_memory_limit_bytes: m.limit_bytes,
            data_memory_used_bytes: m.used_bytes,
            rows: m.rows,
            counters,
            ..BlockStats::default()
        }
    }
}

impl Block<Signal> for Lqh {
    fn on_signal(&mut self, env: norr_kernel::Envelope<Signal>, ctx: &mut Ctx<'_, Signal>) {
        let from = env.from;
        let sig = match env.signal {
            Signal::Internal(sig) => sig,
            Signal::Cluster(c) => return self.on_cluster(from, *c, ctx),
            Signal::Fs(f) => return self.on_fs(*f, ctx),
            Signal::Ckpt(c) => return self.on_ckpt(from, *c, ctx),
            other => {
                crate::probe!(self.counters, "lqh: unexpected signal");
                debug_assert!(false, "LQH got a non-internal signal {}", other.name());
                return;
            }
        };
        match *sig {
            InternalSignal::LqhKeyReq { txn, ops, api, handle, failed } => {
                // A TC's news of a failure of this very node is of a former
                // life of it (a node is never told of its own failure).
                for f in failed.into_iter().filter(|f| f.0 != self.node) {
                    self.dist.node_failed(f);
                }
                self.on_key_req(from, txn, ops, (api, handle), ctx)
            }
            InternalSignal::LqhReplicaReq(req) => self.on_replica_req(*req, ctx),
            InternalSignal::LqhCommitReq { txn, gci, chain, tc } => self.on_commit(txn, gci, chain, tc, ctx),
            InternalSignal::LqhCompleteReq { txn, chain, tc } => self.on_complete(txn, chain, tc, ctx),
            InternalSignal::LqhAbortReq { txn } => self.on_abort(from, txn, ctx),
            InternalSignal::LqhRollbackToReq { txn, savepoint } => {
                let error = self.rollback_to(txn, savepoint);
                Self::reply(ctx, from, InternalSignal::LqhRollbackToConf { txn, error });
            }
            InternalSignal::LqhLockTimeout { tag } => self.on_lock_timeout(tag, ctx),
            InternalSignal::LqhScanReq(req) => self.on_scan_req(from, *req, ctx),
            InternalSignal::LqhScanNextReq { scan, part } => self.on_scan_next(from, scan, part, ctx),
            InternalSignal::LqhScanCloseReq { scan, part } => {
                let mut grants = Vec::new();
                self.drop_scan((scan, part), &mut grants);
                self.on_grants(grants, ctx);
            }
            InternalSignal::LqhScanStep { scan, part } => {
                if self.scans.get(&(scan, part)).is_some_and(|s| s.step_scheduled) {
                    self.scans.get_mut(&(scan, part)).expect("checked").step_scheduled = false;
                    self.scan_step((scan, part), ctx);
                }
            }
            // This LQH's own partition copy scans answer to itself.
            InternalSignal::LqhScanConf { scan, part, rows, done } => self.copy_scan_conf(scan, part, rows, done, ctx),
            InternalSignal::LqhScanRef { scan, part, error } => self.copy_scan_ref(scan, part, error, ctx),
            InternalSignal::LqhTransReq { failed_tc } => self.on_trans_req(from, failed_tc, ctx),
            InternalSignal::CopyFragReq { req, table, part, dest, since_gci } => {
                self.on_copy_frag_req(from, copy::CopyFragAsk { req, table, part, dest, since_gci }, ctx)
            }
            InternalSignal::CopyRows(rows) => self.on_copy_rows(from, *rows, ctx),
            InternalSignal::CopyRowsConf { req, table, part, error, missing_keys, deleted } => {
                let answer = copy::CopyRowsAnswer { error, missing_keys, deleted };
                self.on_copy_rows_conf(req, table, part, answer, ctx)
            }
            InternalSignal::FragChecksumReq { req, table, part } => {
                let (rows, checksum) = self.partition_checksum(table, part);
                Self::reply(ctx, from, InternalSignal::FragChecksumConf { req, table, part, rows, checksum });
            }
            InternalSignal::SchemaChangeReq { req, change } => {
                if self.redo_roll_forward_pending() {
                    crate::probe!(self.counters, "lqh: schema change held until the redo roll forward");
                    self.ddl_before_restore.push((from, req, *change));
                    return;
                }
                self.on_schema_change_req(from, req, *change, ctx);
            }
            InternalSignal::StatsReq { req } => {
                let stats = Box::new(self.stats());
                Self::reply(ctx, from, InternalSignal::StatsConf { req, stats });
            }
            other => {
                crate::probe!(self.counters, "lqh: unexpected internal signal");
                debug_assert!(false, "LQH got unexpected {other:?}");
            }
        }
    }
}

impl Lqh {
    fn on_cluster(&mut self, from: BlockRef, sig: ClusterSignal, ctx: &mut Ctx<'_, Signal>) {
        match sig {
            ClusterSignal::DistRep { dist } => {
                self.dist.on_dist(*dist);
                self.resync_on_dist();
                let version = self.dist.version;
                ctx.send_prio(from, Signal::Cluster(Box::new(ClusterSignal::DistConf { version })), Priority::A);
            }
            ClusterSignal::NodeFailRep { failed, membership } => {
                self.dist.on_membership(&failed, &membership);
                self.copies_node_fail(&failed, ctx)
            }
            ClusterSignal::ClusterStartedRep { membership, joined, .. } => {
                self.dist.on_membership(&[], &membership);
                if joined {
                    self.on_joined();
                }
            }
            ClusterSignal::NodeJoinedRep { membership, .. } => self.dist.on_membership(&[], &membership),
            other => {
                crate::probe!(self.counters, "lqh: unexpected cluster signal");
                debug_assert!(false, "LQH got unexpected {other:?}");
            }
        }
    }

    /// The replica chain a write of `part` of `table` prepared here follows:
    /// the partition's chain with this node first. Normally this node is
    /// the primary already; if a TC with an older distribution sent the
    /// write here, this node still holds the row lock first, and every
    /// replica gets the write.
    fn write_chain(&self, table: TableId, part: PartitionId) -> Chain {
        let def = self.defs.get(&table).expect("a prepared write's table");
        let mut chain = self.dist.chain(def, part, self.lqh_instances).unwrap_or_else(|| self.own_chain());
        if chain.nodes[0] != self.node {
            chain.nodes.retain(|n| *n != self.node);
            chain.nodes.insert(0, self.node);
        }
        debug_assert!(chain.nodes.iter().all(|n| self.dist.holds(def, part, *n) || *n == self.node));
        chain
    }

    /// This LQH is on a data node of a cluster: it serves nothing until DIH
    /// sends a distribution (see `DistView::in_cluster`).
    pub fn in_cluster(&mut self) {
        debug_assert!(self.txns.is_empty(), "joined a cluster with transactions running");
        self.dist = DistView::in_cluster(Dist::single(self.node));
        debug_assert!(self.dist.awaiting_dih());
    }

    /// True if this node may execute an operation on `part` of `def` from TC:
    /// it holds the partition and is up to date.
    fn serves(&self, def: &TableDef, part: PartitionId) -> bool {
        if self.dist.awaiting_dih() {
            return false; // a restarting node before DIH's distribution: it holds nothing yet
        }
        if self.dist.states.len() == 1 {
            return true; // one data node: it holds everything (the hot path of `norr up`)
        }
        self.dist.state(self.node) == ReplicaState::Alive && self.dist.holds(def, part, self.node)
    }

    /// The live node before this one in `chain` (commit runs backwards).
    /// Only nodes QMGR's news says are down are skipped, not the ones this
    /// node's distribution calls dead: the chain was built by another node,
    /// whose distribution may be newer (a restarting node joining the write
    /// path; see `DistView::down`). Skipping such a node would end the
    /// commit before the primary, leaving its write prepared there.
    fn prev_alive(&self, chain: &Chain) -> Option<NodeId> {
        let i = chain.nodes.iter().position(|n| *n == self.node)?;
        chain.nodes[..i].iter().rev().copied().find(|n| !self.dist.down(*n))
    }

    /// The live node after this one in `chain` (prepare and complete run
    /// forwards; skipping as `prev_alive`).
    fn next_alive(&self, chain: &Chain) -> Option<NodeId> {
        let i = chain.nodes.iter().position(|n| *n == self.node)?;
        chain.nodes[i + 1..].iter().copied().find(|n| !self.dist.down(*n))
    }
}
