//! A harness that drives one data node (as built by `build_data_node`) the way
//! a host does: signals from API node refs go in through `deliver`, the node
//! runs until idle, replies come out of `take_remote`, and virtual time moves
//! with `advance_ms` (firing delayed signals in order). Public so the simulator
//! and other crates' tests can reuse it.

use crate::build_data_node;
use norr_kernel::{BlockRef, Envelope, NodeId, Priority, Scheduler};
use norr_knobs::Knobs;
use norr_signals::ops::{KeyOp, OpResult, ScanSpec};
use norr_signals::schema::{ColumnId, IndexDef, IndexKind, PartitionScheme, TableDef};
use norr_signals::value::{ColumnType, Value};
use norr_signals::*;

/// Node id of the data node under test (API nodes in tests use other ids).
pub const DATA_NODE: NodeId = 9;

pub struct Harness {
    pub sched: Scheduler<Signal>,
    pub node: NodeId,
    next_req: u32,
    next_scan: u32,
    /// Replies not yet claimed by a helper.
    pub inbox: Vec<Envelope<Signal>>,
}

/// API block address of API node `api`.
pub fn api_ref(api: NodeId) -> BlockRef {
    BlockRef::new(api, block::API, 0)
}

/// Where a client signal goes on the data node.
pub fn target_block(sig: &Signal) -> u16 {
    match sig {
        Signal::DictReq(_) => block::DICT,
        _ => block::TC,
    }
}

impl Harness {
    pub fn new(knobs: Knobs) -> Harness {
        Harness {
            sched: build_data_node(DATA_NODE, &knobs),
            node: DATA_NODE,
            next_req: 1,
            next_scan: 1,
            inbox: Vec::new(),
        }
    }

    /// A harness around a node built by the caller (e.g. with more LQH
    /// instances than `build_data_node` makes).
    pub fn with_scheduler(sched: Scheduler<Signal>) -> Harness {
        Harness { sched, node: DATA_NODE, next_req: 1, next_scan: 1, inbox: Vec::new() }
    }

    /// A node with `lqh_instances` LQH instances (see `build_data_node_with_lqh`).
    pub fn with_lqh_instances(knobs: Knobs, lqh_instances: u16) -> Harness {
        let sched = crate::build_data_node_with_lqh(DATA_NODE, &knobs, lqh_instances);
        Harness { sched, ..Harness::new(knobs) }
    }

    pub fn now_ms(&self) -> u64 {
        self.sched.now_ns() / 1_000_000
    }

    /// Queue a signal from API node `api` without running the node.
    pub fn send(&mut self, api: NodeId, sig: Signal) {
        assert_ne!(api, self.node, "an API node needs its own node id");
        let to = BlockRef::new(self.node, target_block(&sig), 0);
        let prio = if matches!(sig, Signal::ApiFailReq { .. }) { Priority::A } else { Priority::B };
        self.sched.deliver(Envelope { from: api_ref(api), to, prio, signal: sig }).expect("deliver");
    }

    /// Run until idle; return (and forget) every signal that left the node.
    pub fn run(&mut self) -> Vec<Envelope<Signal>> {
        self.sched.run_until_idle(usize::MAX);
        let mut out = std::mem::take(&mut self.inbox);
        out.extend(self.sched.take_remote());
        out
    }

    /// Send, run until idle, return what left the node.
    pub fn request(&mut self, api: NodeId, sig: Signal) -> Vec<Envelope<Signal>> {
        self.send(api, sig);
        self.run()
    }

    /// Move virtual time forward by `ms`, firing timers in order and running
    /// the node after each; returns what left the node.
    pub fn advance_ms(&mut self, ms: u64) -> Vec<Envelope<Signal>> {
        let target = self.sched.now_ns() + ms * 1_000_000;
        let mut out = self.run();
        while let Some(t) = self.sched.next_timer_ns().filter(|t| *t <= target) {
            self.sched.advance_to(t);
            out.extend(self.run());
        }
        self.sched.advance_to(target);
        out.extend(self.run());
        out
    }

    /// Also tell DICT (as hosts do).
    pub fn api_fail(&mut self, api: NodeId) -> Vec<Envelope<Signal>> {
        let sig = Signal::ApiFailReq { api_node: api };
        let tcs = (0..self.sched.instances(block::TC)).map(|i| (block::TC, i));
        for (b, i) in tcs.chain([(block::DICT, 0)]) {
            let to = BlockRef::new(self.node, b, i);
            let env = Envelope { from: BlockRef::new(0, 0, 0), to, prio: Priority::A, signal: sig.clone() };
            self.sched.deliver(env).expect("deliver");
        }
        self.run()
    }

    // --- DICT ---

    pub fn dict(&mut self, api: NodeId, op: DictOp) -> Result<DictResult, NodeError> {
        let req_id = self.next_req;
        self.next_req += 1;
        let out = self.request(api, Signal::DictReq(Box::new(DictReq { req_id, op })));
        let mut res = None;
        for e in out {
            match e.signal {
                Signal::DictConf(c) if c.req_id == req_id && e.to == api_ref(api) => res = Some(Ok(c.result)),
                Signal::DictRef(r) if r.req_id == req_id && e.to == api_ref(api) => res = Some(Err(r.error)),
                _ => self.inbox.push(e),
            }
        }
        res.expect("DICT answered")
    }

    pub fn create_table(&mut self, def: TableDef) -> Result<TableDef, NodeError> {
        match self.dict(100, DictOp::CreateTable(def))? {
            DictResult::Table(d) => Ok(d),
            other => panic!("unexpected {other:?}"),
        }
    }

    // --- transactions ---

    /// Send a TC_KEYREQ and wait (running the node, not advancing time) for its
    /// answer; None if it is not answered yet (e.g. waiting for a lock).
    pub fn try_key(
        &mut self,
        api: NodeId,
        txn: u64,
        exec: ExecType,
        ops: Vec<KeyOp>,
    ) -> Option<Result<TcKeyConf, TcKeyRef>> {
        self.send(api, Signal::TcKeyReq(Box::new(TcKeyReq { txn, exec, ops })));
        let out = self.run();
        self.inbox.extend(out);
        self.take_key_reply(api, txn)
    }

    /// Claim the answer to transaction `txn` of `api` from the inbox.
    pub fn take_key_reply(&mut self, api: NodeId, txn: u64) -> Option<Result<TcKeyConf, TcKeyRef>> {
        let i = self.inbox.iter().position(|e| {
            e.to == api_ref(api)
                && matches!(&e.signal, Signal::TcKeyConf(c) if c.txn == txn)
                    | matches!(&e.signal, Signal::TcKeyRef(r) if r.txn == txn)
        })?;
        match self.inbox.remove(i).signal {
            Signal::TcKeyConf(c) => Some(Ok(*c)),
            Signal::TcKeyRef(r) => Some(Err(*r)),
            _ => unreachable!(),
        }
    }

    /// Send a TC_SAVEPOINTREQ; its answer (TC_KEYCONF / TC_KEYREF), which
    /// must come without waiting.
    pub fn savepoint(
        &mut self,
        api: NodeId,
        txn: u64,
        savepoint: u32,
        action: SavepointAction,
    ) -> Result<TcKeyConf, TcKeyRef> {
        self.send(api, Signal::TcSavepointReq(Box::new(TcSavepointReq { txn, savepoint, action })));
        let out = self.run();
        self.inbox.extend(out);
        self.take_key_reply(api, txn).expect("savepoint request answered without waiting")
    }

    /// A batch that must be answered at once.
    pub fn key(&mut self, api: NodeId, txn: u64, exec: ExecType, ops: Vec<KeyOp>) -> Result<TcKeyConf, TcKeyRef> {
        self.try_key(api, txn, exec, ops).expect("batch answered without waiting")
    }

    /// Run one auto-committed batch; results or the error.
    pub fn autocommit(&mut self, ops: Vec<KeyOp>) -> Result<Vec<OpResult>, NodeError> {
        let txn = 1_000_000 + self.next_req as u64;
        self.next_req += 1;
        match self.key(100, txn, ExecType::Commit, ops) {
            Ok(c) => {
                assert_eq!(c.outcome, TxnOutcome::Committed);
                Ok(c.results)
            }
            Err(r) => Err(r.error),
        }
    }

    /// Committed read of one row by primary key (None: no such row).
    pub fn get(&mut self, table: u32, key: Vec<Value>) -> Option<Vec<Value>> {
        let mut op = KeyOp::read(table, key);
        op.abort_on_error = false;
        match self.autocommit(vec![op]).expect("read").remove(0) {
            OpResult::Ok(r) => r,
            OpResult::Err(e) if e.code == ErrorCode::NoSuchRow => None,
            OpResult::Err(e) => panic!("read failed: {e}"),
        }
    }

    // --- scans ---

    pub fn next_scan_id(&mut self) -> u32 {
        self.next_scan += 1;
        self.next_scan
    }

    /// Claim the answer for scan `scan_id` of `api`.
    pub fn take_scan_reply(&mut self, api: NodeId, scan_id: u32) -> Option<Result<ScanTabConf, ScanTabRef>> {
        let i = self.inbox.iter().position(|e| {
            e.to == api_ref(api)
                && matches!(&e.signal, Signal::ScanTabConf(c) if c.scan_id == scan_id)
                    | matches!(&e.signal, Signal::ScanTabRef(r) if r.scan_id == scan_id)
        })?;
        match self.inbox.remove(i).signal {
            Signal::ScanTabConf(c) => Some(Ok(*c)),
            Signal::ScanTabRef(r) => Some(Err(*r)),
            _ => unreachable!(),
        }
    }

    pub fn scan_open(
        &mut self,
        api: NodeId,
        txn: u64,
        standalone: bool,
        spec: ScanSpec,
    ) -> (u32, Option<Result<ScanTabConf, ScanTabRef>>) {
        let scan_id = self.next_scan_id();
        let out = self.request(api, Signal::ScanTabReq(Box::new(ScanTabReq { txn, scan_id, standalone, spec })));
        self.inbox.extend(out);
        (scan_id, self.take_scan_reply(api, scan_id))
    }

    pub fn scan_next(
        &mut self,
        api: NodeId,
        txn: u64,
        scan_id: u32,
        close: bool,
    ) -> Option<Result<ScanTabConf, ScanTabRef>> {
        let out = self.request(api, Signal::ScanNextReq(ScanNextReq { txn, scan_id, close }));
        self.inbox.extend(out);
        self.take_scan_reply(api, scan_id)
    }

    /// Run a scan to its end; every row, the number of batches, or the error.
    pub fn scan_all(
        &mut self,
        api: NodeId,
        txn: u64,
        standalone: bool,
        spec: ScanSpec,
    ) -> Result<(Vec<Vec<Value>>, usize), NodeError> {
        let batch = spec.batch_rows as usize;
        let (id, mut r) = self.scan_open(api, txn, standalone, spec);
        let mut rows = Vec::new();
        let mut batches = 0;
        loop {
            match r.expect("scan answered") {
                Err(e) => return Err(e.error),
                Ok(c) => {
                    batches += 1;
                    assert!(c.rows.len() <= batch, "batch of {} > {batch}", c.rows.len());
                    rows.extend(c.rows);
                    if c.done {
                        return Ok((rows, batches));
                    }
                }
            }
            r = self.scan_next(api, txn, id, false);
        }
    }

    /// Named counters (probes) of TC and every LQH instance, summed by name.
    pub fn counters(&mut self) -> std::collections::BTreeMap<String, u64> {
        use norr_signals::internal::InternalSignal;
        let mut targets = vec![(block::TC, 0)];
        targets.extend((0..self.sched.instances(block::LQH)).map(|i| (block::LQH, i)));
        for (b, i) in targets {
            let sig = Signal::Internal(Box::new(InternalSignal::StatsReq { req: 0 }));
            let env =
                Envelope { from: api_ref(100), to: BlockRef::new(self.node, b, i), prio: Priority::B, signal: sig };
            self.sched.deliver(env).expect("deliver");
        }
        let mut out = std::collections::BTreeMap::new();
        for e in self.run() {
            match e.signal {
                Signal::Internal(s) => match *s {
                    InternalSignal::StatsConf { stats, .. } => {
                        for (k, v) in stats.counters {
                            *out.entry(k).or_insert(0) += v;
                        }
                    }
                    other => panic!("unexpected {other:?}"),
                },
                _ => self.inbox.push(e),
            }
        }
        out
    }

    pub fn stats(&mut self) -> NodeStats {
        match self.dict(100, DictOp::NodeStats).expect("stats") {
            DictResult::Stats(s) => s,
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// A simple table: `id BIGINT NOT NULL` primary key, then the given columns.
pub fn table_def(name: &str, partitions: u32, cols: &[(&str, ColumnType)]) -> TableDef {
    let mut columns = vec![ColumnDef::new("id", ColumnType::BigInt { unsigned: false }).not_null()];
    for (n, t) in cols {
        columns.push(ColumnDef::new(n, t.clone()));
    }
    TableDef {
        id: 0,
        version: 0,
        name: name.to_string(),
        columns,
        primary_key: vec![0],
        partitioning: PartitionScheme::Key { columns: Vec::new() },
        partitions,
        indexes: Vec::new(),
        extra: Vec::new(),
        options: Default::default(),
    }
}

pub fn index_def(name: &str, columns: &[ColumnId], unique: bool, kind: IndexKind) -> IndexDef {
    IndexDef { id: 0, name: name.to_string(), columns: columns.to_vec(), unique, kind }
}

/// The scan tests' table: (id, k INT, s VARCHAR(30)) over `partitions`
/// partitions, with a non-unique ordered index `by_k` on k.
pub fn k_s_table_def(name: &str, partitions: u32) -> TableDef {
    let mut def = table_def(
        name,
        partitions,
        &[
            ("k", ColumnType::Int { unsigned: false }),
            ("s", ColumnType::Varchar { len: 30, collation: Default::default() }),
        ],
    );
    def.indexes.push(index_def("by_k", &[1], false, IndexKind::Ordered));
    def
}
