//! Signals between API clients (native clients, SQL nodes) and the data node's
//! TC and DICT blocks. These cross the network; see `wire` for the codec.
//!
//! Transactions are named by the client: `txn` is a 64-bit handle unique among
//! the client's open transactions. A transaction starts with the first TC_KEYREQ
//! or locking SCAN_TABREQ that names it and ends with a TC_KEYREQ whose `exec` is
//! Commit or Rollback, or with an abort (TC_KEYREF / SCAN_TABREF), after which the
//! handle may be reused.
//!
//! A data node may run several TC instances (block TC, instances 0..n, the count
//! is in the handshake's Welcome). Each keeps its own transactions: a client
//! sends every request of a transaction, and of each of its scans, to the
//! instance that got the first one (clients choose it from the first
//! operation's partition, `crate::partition::coordinator_instance`).
//!
//! Details (TC in `norr-txn`):
//! * a transaction has one request in progress at a time: a TC_KEYREQ sent
//!   before the previous one was answered gets TC_KEYREF MalformedSignal and
//!   the transaction is left as it was;
//! * a transaction the node aborted on its own (inactive longer than
//!   txn_inactive_timeout_ms) answers the next TC_KEYREQ naming its handle with
//!   TC_KEYREF TransactionTimeout (a Rollback gets RolledBack); the handle is
//!   free after that one answer;
//! * Rollback or an empty Commit of an unknown handle are answered RolledBack /
//!   Committed;
//! * a lock-wait time-out always aborts the transaction (TC_KEYREF
//!   LockWaitTimeout, `op_index` = the waiting operation), even for an
//!   operation with `abort_on_error == false`;
//! * a committed-read key operation of a transaction on a row that transaction
//!   wrote returns its own uncommitted image (read your own writes); it never
//!   sees another transaction's;
//! * a committed-read SCAN_TABREQ never starts a transaction, even with
//!   `standalone == false`; a locking one does (and holds its row locks);
//! * a scan still open when its transaction commits ends with SCAN_TABCONF
//!   `done` (if the client waits for it) or is silently closed; when the
//!   transaction aborts it ends with SCAN_TABREF TransactionAborted;
//! * a scan the client leaves idle longer than txn_inactive_timeout_ms is
//!   closed; the next SCAN_NEXTREQ for it gets SCAN_TABREF TransactionTimeout;
//! * TC never sends a SCAN_TABREF unasked: a scan that fails while the client
//!   holds a batch (e.g. a lock-wait time-out in another partition) aborts its
//!   transaction at once, and the next SCAN_NEXTREQ (also a close) gets the
//!   SCAN_TABREF; that answer frees the transaction handle.

use crate::error::NodeError;
use crate::ops::{KeyOp, OpResult, ScanSpec};
use crate::schema::{ColumnId, IndexDef, TableDef, TableId};
use crate::value::Value;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExecType {
    /// Execute the batch, keep the transaction open (locks held).
    NoCommit,
    /// Execute the batch, then commit.
    Commit,
    /// Discard everything the transaction did (the batch must be empty).
    Rollback,
    /// Execute the batch, then commit, and answer only once the commit's
    /// global checkpoint is complete: its changes are on disk on every live
    /// data node (`norr_commit_wait = 'disk'`). Without data directories the
    /// answer waits for the same global checkpoint, kept in memory only.
    CommitDisk,
}

impl ExecType {
    /// The batch ends with a commit (`Commit` or `CommitDisk`).
    pub fn commits(self) -> bool {
        matches!(self, ExecType::Commit | ExecType::CommitDisk)
    }
}

/// TC_KEYREQ: API -> TC. A batch of key operations of one transaction.
/// Reply: TC_KEYCONF with one result per operation, or TC_KEYREF (transaction aborted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TcKeyReq {
    pub txn: u64,
    pub exec: ExecType,
    pub ops: Vec<KeyOp>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnOutcome {
    /// Batch executed, transaction still open.
    Open,
    Committed,
    RolledBack,
    /// Only for an `ExecType::CommitDisk` batch: committed in memory on
    /// every replica (as `Committed`), but the commit's GCI did not become
    /// complete within `commit_disk_timeout_ms` (global checkpoints stalled),
    /// so its disk durability is not confirmed. The client reports
    /// `ErrorCode::CommitDiskTimeout`. Last: the variant index is on the wire.
    CommittedNotOnDisk,
}

impl TxnOutcome {
    /// The transaction committed (disk durability confirmed or not).
    pub fn committed(self) -> bool {
        matches!(self, TxnOutcome::Committed | TxnOutcome::CommittedNotOnDisk)
    }
}

/// TC_KEYCONF: TC -> API. Results in request order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TcKeyConf {
    pub txn: u64,
    pub outcome: TxnOutcome,
    pub results: Vec<OpResult>,
    /// With `Committed`: the global checkpoint the transaction belongs to (it
    /// is on disk once that GCI is complete); 0 otherwise.
    pub gci: u64,
}

/// TC_KEY_FAILCONF: a data node that took over the transactions of a failed
/// coordinator -> API. The definite outcome of the transaction `txn` (the
/// client's handle) whose coordinator was on the failed node: `Committed`
/// (with its GCI) or `RolledBack`. A client waiting for the answer to a
/// commit on that node gets it from here, so a node failure never leaves it
/// guessing whether its commit happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TcKeyFailConf {
    pub txn: u64,
    pub outcome: TxnOutcome,
    pub gci: u64,
}

/// TC_KEYREF: TC -> API. The transaction is aborted (all its changes undone, locks
/// released). `op_index` names the failing operation of the batch, if one did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TcKeyRef {
    pub txn: u64,
    pub error: NodeError,
    pub op_index: Option<u32>,
}

/// TC_SAVEPOINTREQ: API -> TC. Savepoints of a transaction (InnoDB's
/// SAVEPOINT / ROLLBACK TO SAVEPOINT). The client numbers them: `savepoint`
/// of a `Set` is greater than that of every earlier `Set` of the transaction,
/// and the operations sent after it belong to it (TC stamps each with the
/// number, LQH keeps the row images it replaces). Reply: TC_KEYCONF (outcome
/// Open, no results) once done; TC_KEYREF if the transaction was aborted
/// instead (a bad number, or a transaction a concurrent DDL doomed). Busy and
/// time-out answers are those of TC_KEYREQ (see the module doc). Releasing a
/// savepoint needs no message: the client just forgets the number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcSavepointReq {
    pub txn: u64,
    pub savepoint: u32,
    pub action: SavepointAction,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SavepointAction {
    /// Set savepoint `savepoint`: later operations are stamped with it.
    Set,
    /// Undo every change made by operations stamped `savepoint` or later (a
    /// row back to its image at the savepoint, inserted rows gone), keep the
    /// transaction open. Row locks taken since stay held (as InnoDB).
    /// Requires that no key operation of the transaction is in flight.
    RollbackTo,
}

/// SCAN_TABREQ: API -> TC. Opens a scan. With `standalone`, the scan runs outside
/// any transaction (committed read only) and `txn` is ignored. Reply: SCAN_TABCONF
/// with the first batch, or SCAN_TABREF.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScanTabReq {
    pub txn: u64,
    pub scan_id: u32,
    pub standalone: bool,
    pub spec: ScanSpec,
}

/// SCAN_NEXTREQ: API -> TC. Asks for the next batch (reply SCAN_TABCONF), or
/// closes the scan early when `close` (reply SCAN_TABCONF with `done`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanNextReq {
    pub txn: u64,
    pub scan_id: u32,
    pub close: bool,
}

/// SCAN_TABCONF: TC -> API. A batch of projected rows; `done` means the scan is
/// finished and closed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScanTabConf {
    pub txn: u64,
    pub scan_id: u32,
    /// On the wire: one byte string in `row_codec`'s layout.
    #[serde(with = "crate::row_codec")]
    pub rows: Vec<Vec<Value>>,
    pub done: bool,
}

/// SCAN_TABREF: TC -> API. The scan failed and is closed. If it was part of a
/// transaction, the transaction is aborted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScanTabRef {
    pub txn: u64,
    pub scan_id: u32,
    pub error: NodeError,
}

/// Dictionary requests: API -> DICT. Reply DICT_CONF or DICT_REF with the same `req_id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum DictOp {
    /// Create a table (ids in the def are assigned by DICT). Reply: Table.
    CreateTable(TableDef),
    /// Reply: Done.
    DropTable { name: String },
    /// Remove every row, keep the definition (auto-increment restarts at 1). Reply: Done.
    TruncateTable { name: String },
    /// Build an index over the existing rows. Reply: Table (new version).
    CreateIndex { table: String, index: IndexDef },
    /// Reply: Table (new version).
    DropIndex { table: String, index: String },
    /// Reply: Table.
    GetTable { name: String },
    /// Reply: Tables.
    ListTables,
    /// Reserve `count` consecutive AUTO_INCREMENT values. Reply: AutoInc.
    /// `count` 0 reserves nothing: `first` is where the next reservation
    /// starts (SHOW TABLE STATUS's Auto_increment).
    NextAutoInc { table: TableId, count: u64 },
    /// Make sure later AUTO_INCREMENT values are > `used` (after an insert with an
    /// explicit value). Reply: Done.
    BumpAutoInc { table: TableId, used: u64 },
    /// Reply: Stats.
    NodeStats,
    /// Replace the definition of `table` with `def` (ALTER TABLE), all or
    /// nothing: every existing row is rebuilt into the new layout, its
    /// column i taken from `sources[i]` and converted to the new column type
    /// (the same checks as an insert: a value that does not fit fails the
    /// whole change and leaves the table as it was). `def.name` may differ
    /// from `table` (a rename). DICT keeps the table id and the ids of
    /// indexes that are unchanged, and assigns the rest. The primary key and
    /// the partitioning must keep their key encoding: same columns (through
    /// `sources`), same types. `expect_version` is the version of the
    /// definition the change was made from: if the table has moved on since
    /// (another ALTER got there first), DICT refuses with
    /// SchemaVersionMismatch instead of silently undoing that change. Reply:
    /// Table (new version).
    AlterTable { table: String, def: TableDef, sources: Vec<ColumnSource>, expect_version: u32 },
    /// The cluster's distribution (node groups, replica states), so that a
    /// client sends each keyed operation to its partition's primary and
    /// starts a transaction's coordinator there. Reply: Distribution.
    GetDistribution,
}

/// Where a column of an altered table (`DictOp::AlterTable`) takes the value
/// of each existing row from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ColumnSource {
    /// The old table's column with this id (converted if the type changed).
    Old(ColumnId),
    /// This value for every existing row (an added column).
    Value(Value),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DictReq {
    pub req_id: u32,
    pub op: DictOp,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeStats {
    pub data_memory_limit_bytes: u64,
    pub data_memory_used_bytes: u64,
    pub rows: u64,
    pub tables: u32,
    pub open_transactions: u32,
    pub committed_transactions: u64,
    pub aborted_transactions: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum DictResult {
    Done,
    Table(TableDef),
    Tables(Vec<TableDef>),
    AutoInc { first: u64 },
    Stats(NodeStats),
    Distribution(Box<crate::dist::Dist>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DictConf {
    pub req_id: u32,
    pub result: DictResult,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DictRef {
    pub req_id: u32,
    pub error: NodeError,
}
