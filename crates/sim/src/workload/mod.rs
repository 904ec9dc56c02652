//! Workloads: simulated clients' state machines plus the invariant checkers.
//!
//! A workload sees the run three ways:
//! * as the clients: `on_start` / `on_wake` / `on_reply` drive each client's
//!   transactions through `ClientCtx` (send, wake later);
//! * as an omniscient observer: `observe_request` (a client request reached the
//!   node) and `observe_emitted` (the node sent a signal to a client, seen at the
//!   moment it leaves the node, even if the client is dead by then);
//! * as a checker: `check` after every step, `finish` after the run drained.

pub mod bank;
pub mod locks;
pub mod model;

use crate::host::Host;
use crate::rng::Rng;
use norr_kernel::NodeId;
use norr_signals::*;

pub struct ClientCtx<'a> {
    pub client: usize,
    pub api: NodeId,
    pub now_ns: u64,
    pub step: u64,
    /// The run is draining: finish the open transaction, start no new one.
    pub stopping: bool,
    pub rng: &'a mut Rng,
    sends: Vec<Signal>,
    wake_after_ns: Option<u64>,
}

impl<'a> ClientCtx<'a> {
    pub(crate) fn new(client: usize, api: NodeId, now_ns: u64, step: u64, stopping: bool, rng: &'a mut Rng) -> Self {
        ClientCtx { client, api, now_ns, step, stopping, rng, sends: Vec::new(), wake_after_ns: None }
    }
    pub fn send(&mut self, s: Signal) {
        self.sends.push(s);
    }
    /// Wake this client (`on_wake`) after `ns` of virtual time (replaces an earlier request).
    pub fn wake_after(&mut self, ns: u64) {
        self.wake_after_ns = Some(ns);
    }
    pub(crate) fn into_parts(self) -> (Vec<Signal>, Option<u64>) {
        (self.sends, self.wake_after_ns)
    }
}

pub trait Workload {
    fn name(&self) -> &'static str;
    /// Create tables and initial rows through `host.admin_request`.
    fn setup(&mut self, host: &mut Host) -> Result<(), String>;
    /// A client life begins (first start or restart with a new API node id).
    fn on_start(&mut self, c: &mut ClientCtx<'_>);
    fn on_wake(&mut self, c: &mut ClientCtx<'_>) -> Result<(), String>;
    fn on_reply(&mut self, c: &mut ClientCtx<'_>, sig: Signal) -> Result<(), String>;
    /// The client crashed (its API node id will never be used again).
    fn on_crash(&mut self, client: usize, api: NodeId);
    /// May the client crash now? (Workloads that cannot judge an in-doubt
    /// commit keep clients alive while a commit is outstanding.)
    fn can_crash(&self, _client: usize) -> bool {
        true
    }
    fn observe_request(&mut self, _step: u64, _api: NodeId, _sig: &Signal) -> Result<(), String> {
        Ok(())
    }
    fn observe_emitted(&mut self, _step: u64, _api: NodeId, _sig: &Signal) -> Result<(), String> {
        Ok(())
    }
    fn check(&mut self) -> Result<(), String> {
        Ok(())
    }
    /// True when the client has no request outstanding (drain is done when all are).
    fn is_idle(&self, client: usize) -> bool;
    /// Final checks once every client is idle and the network is empty.
    fn finish(&mut self, host: &mut Host) -> Result<(), String>;
    fn summary(&self) -> String;
}

/// A workload and the host are borrowed together during setup/finish; the
/// workload is also the observer of admin traffic, which it ignores. This
/// no-op observer stands in for it.
pub struct NoObserver;
impl Workload for NoObserver {
    fn name(&self) -> &'static str {
        "none"
    }
    fn setup(&mut self, _: &mut Host) -> Result<(), String> {
        Ok(())
    }
    fn on_start(&mut self, _: &mut ClientCtx<'_>) {}
    fn on_wake(&mut self, _: &mut ClientCtx<'_>) -> Result<(), String> {
        Ok(())
    }
    fn on_reply(&mut self, _: &mut ClientCtx<'_>, _: Signal) -> Result<(), String> {
        Ok(())
    }
    fn on_crash(&mut self, _: usize, _: NodeId) {}
    fn is_idle(&self, _: usize) -> bool {
        true
    }
    fn finish(&mut self, _: &mut Host) -> Result<(), String> {
        Ok(())
    }
    fn summary(&self) -> String {
        String::new()
    }
}

// ---- helpers shared by workloads -------------------------------------------

pub fn bigint() -> ColumnType {
    ColumnType::BigInt { unsigned: false }
}

/// A table `name(id BIGINT PRIMARY KEY, <cols> BIGINT ...)`.
pub fn int_table(name: &str, cols: &[&str], nullable: bool, partitions: u32) -> TableDef {
    let mut columns = vec![ColumnDef::new("id", bigint()).not_null()];
    for c in cols {
        let mut d = ColumnDef::new(c, bigint());
        if !nullable {
            d = d.not_null();
        }
        columns.push(d);
    }
    TableDef {
        id: 0,
        version: 0,
        name: name.to_string(),
        columns,
        primary_key: vec![0],
        partitioning: PartitionScheme::Key { columns: vec![] },
        partitions,
        indexes: vec![],
        extra: vec![],
        options: Default::default(),
    }
}

pub fn create_table(host: &mut Host, def: TableDef) -> Result<TableDef, String> {
    let req = DictReq { req_id: 1, op: DictOp::CreateTable(def) };
    match host.admin_request(Signal::DictReq(Box::new(req)), &mut NoObserver)? {
        Signal::DictConf(c) => match c.result {
            DictResult::Table(t) => Ok(t),
            other => Err(format!("CreateTable answered {other:?}")),
        },
        other => Err(format!("CreateTable failed: {other:?}")),
    }
}

/// Open transactions the node reports (None if it does not answer NodeStats).
pub fn open_transactions(host: &mut Host) -> Result<Option<u32>, String> {
    let req = DictReq { req_id: 2, op: DictOp::NodeStats };
    match host.admin_request(Signal::DictReq(Box::new(req)), &mut NoObserver)? {
        Signal::DictConf(c) => match c.result {
            DictResult::Stats(s) => Ok(Some(s.open_transactions)),
            _ => Ok(None),
        },
        _ => Ok(None),
    }
}

pub fn tc_key(txn: u64, exec: ExecType, ops: Vec<KeyOp>) -> Signal {
    Signal::TcKeyReq(Box::new(TcKeyReq { txn, exec, ops }))
}

/// Run one committed transaction as the admin client.
pub fn admin_commit(host: &mut Host, txn: u64, ops: Vec<KeyOp>) -> Result<TcKeyConf, String> {
    match host.admin_request(tc_key(txn, ExecType::Commit, ops), &mut NoObserver)? {
        Signal::TcKeyConf(c) if c.outcome == TxnOutcome::Committed => Ok(*c),
        other => Err(format!("admin commit failed: {other:?}")),
    }
}

/// Read every row of a table with a committed-read scan as the admin client.
pub fn admin_scan(host: &mut Host, table: TableId, scan_id: u32) -> Result<Vec<Vec<Value>>, String> {
    let mut spec = ScanSpec::full(table);
    spec.batch_rows = 64;
    let mut sig = Signal::ScanTabReq(Box::new(ScanTabReq { txn: 0, scan_id, standalone: true, spec }));
    let mut rows = Vec::new();
    for _ in 0..100_000 {
        match host.admin_request(sig, &mut NoObserver)? {
            Signal::ScanTabConf(c) => {
                rows.extend(c.rows);
                if c.done {
                    return Ok(rows);
                }
            }
            other => return Err(format!("admin scan failed: {other:?}")),
        }
        sig = Signal::ScanNextReq(ScanNextReq { txn: 0, scan_id, close: false });
    }
    Err("admin scan never finished".into())
}

/// Read one key with committed read as the admin client (None: no such row).
pub fn admin_read(host: &mut Host, txn: u64, table: TableId, key: i64) -> Result<Option<Vec<Value>>, String> {
    let mut op = KeyOp::read(table, vec![Value::Int(key)]);
    op.abort_on_error = false;
    let c = admin_commit(host, txn, vec![op])?;
    match c.results.into_iter().next() {
        Some(OpResult::Ok(r)) => Ok(r),
        Some(OpResult::Err(e)) if e.code == ErrorCode::NoSuchRow => Ok(None),
        other => Err(format!("admin read of {key}: {other:?}")),
    }
}

pub fn int_of(v: &Value) -> Result<i64, String> {
    v.as_i64().ok_or_else(|| format!("expected an integer, got {v:?}"))
}

/// Outcome of a reply to a transaction request, as a workload sees it.
pub fn is_temporary(e: &NodeError) -> bool {
    e.code.is_temporary()
}

/// Tells a scan the node closed because the client left it idle (TC closes
/// scans idle longer than `txn_inactive_timeout_ms`; the next SCAN_NEXTREQ then
/// gets NoSuchScan) from a scan the node lost.
#[derive(Debug, Clone)]
pub struct IdleScans {
    inactive_ns: u64,
    last_reply_ns: Vec<u64>,
    pub closed_idle: u64,
}

impl IdleScans {
    pub fn new(clients: usize, knobs: &norr_knobs::Knobs) -> IdleScans {
        IdleScans {
            inactive_ns: knobs.txn_inactive_timeout_ms * 1_000_000,
            last_reply_ns: vec![0; clients],
            closed_idle: 0,
        }
    }
    /// The client got a scan batch now.
    pub fn replied(&mut self, c: &ClientCtx<'_>) {
        self.last_reply_ns[c.client] = c.now_ns;
    }
    /// A NoSuchScan answer to SCAN_NEXTREQ: Ok if the scan sat idle long
    /// enough for TC to close it (half the limit: the client's clock sees
    /// network delays the node does not).
    pub fn judge(&mut self, c: &ClientCtx<'_>, e: &NodeError) -> Result<(), String> {
        let idle = c.now_ns.saturating_sub(self.last_reply_ns[c.client]);
        if e.code == ErrorCode::NoSuchScan && idle >= self.inactive_ns / 2 {
            self.closed_idle += 1;
            return Ok(());
        }
        Err(format!(
            "scan failed with {e} after {} ms idle (inactivity limit {} ms)",
            idle / 1_000_000,
            self.inactive_ns / 1_000_000
        ))
    }
}
