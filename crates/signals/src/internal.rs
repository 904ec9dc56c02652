//! Signals between blocks inside the data node (TC <-> LQH, DICT <-> LQH/TC).
//! Owned by the txn crate's authors; each signal's doc says sender, receiver and reply.
//!
//! Transaction protocol (one replica today; the phases are there so replication
//! can slot in between without changing TC's state machine):
//!
//! * prepare: one `LqhKeyReq` per batch and LQH instance, carrying the batch's
//!   operations for that instance (one signal per batch rather than per
//!   operation, as NDB/RonDB amortise signal costs). For each operation LQH locks
//!   the row, checks it (missing row, duplicate key, unique constraints, memory)
//!   and keeps the new row image in its operation record. Reply: `LqhKeyConf`
//!   with one `LqhOpResult` per operation; the results of one request may come
//!   in several `LqhKeyConf`s (LQH sends what it has whenever an operation must
//!   wait for a lock). A transaction's operations execute at LQH in arrival order.
//! * commit: `LqhCommitReq` to every LQH that took part. LQH applies the images
//!   to storage (cannot fail: everything was checked at prepare) and releases the
//!   locks. Reply `LqhCommitConf`. TC answers the client once every LQH confirmed.
//! * complete: `LqhCompleteReq`: LQH frees the operation records. Reply
//!   `LqhCompleteConf`. (With backups, this is where backup locks are released.)
//! * abort: `LqhAbortReq`: LQH discards the images, cancels queued operations
//!   and lock waits, releases locks, frees the record. Reply `LqhAbortConf`, also
//!   for a transaction LQH never saw.
//! * simple reads (NDB's simple/dirty read): an `LqhKeyReq` whose operations
//!   are all committed reads (`KeyOp::is_committed_read`), for a transaction
//!   LQH holds no record of, runs at once and leaves no record: no lock, no
//!   image, nothing to commit, complete or abort. TC knows the same from its
//!   side (it has sent that LQH nothing else of the transaction, no operation
//!   and no scan) and does not count that LQH as a participant, so a
//!   transaction of committed reads only commits or aborts without a round to
//!   LQH. A late `LqhKeyConf` of such reads for a transaction TC already
//!   aborted is dropped like any other. A TC take-over would find nothing of
//!   them at LQH, which is right: a read that was not answered is retried.
//! * savepoints (TC_SAVEPOINTREQ): TC stamps every operation with the
//!   transaction's current savepoint number (`LqhOp::savepoint`, 0 before the
//!   first). The first time an operation stamped s > 0 writes a row key, LQH
//!   moves the key's previous uncommitted state (or "none") onto the
//!   transaction's undo list. `LqhRollbackToReq` to every participant pops
//!   that list down to the savepoint, restoring images, unique-index entries
//!   and reserved memory; locks stay. Reply `LqhRollbackToConf`. TC sends it
//!   only when the transaction has no key operation in flight. Simple reads
//!   leave nothing to undo; scans open at the time keep the snapshot of the
//!   transaction's writes they opened with.

use crate::dist::Chain;
use crate::error::NodeError;
use crate::ops::{Filter, KeyOp, LockMode, LockWait, ScanRange};
use crate::schema::{ColumnId, IndexId, PartitionId, TableDef, TableId};
use crate::value::Value;
use norr_kernel::{BlockRef, NodeId};
use serde::{Deserialize, Serialize};

/// A transaction as TC numbers it: unique among the transactions of one TC.
pub type TxnId = u64;
/// A scan as TC numbers it: unique among the scans of one TC.
pub type ScanKey = u64;

/// A schema change DICT pushes to LQH (which changes storage) and then to TC
/// (which keeps a copy of the table definitions for routing and validation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SchemaChange {
    /// The def carries its assigned id, version, partitions and index ids.
    CreateTable(TableDef),
    DropTable(TableId),
    /// `def` is the table's new definition: the same but for its version,
    /// one higher. A TRUNCATE is a version change so that whatever was
    /// planned or cached against the old rows (a SQL node's range of
    /// AUTO_INCREMENT values, a prepared write) is refused with
    /// `SchemaVersionMismatch` rather than applied to the new life of the
    /// table.
    TruncateTable(TableDef),
    /// `def` is the new definition (new version) that includes the index.
    CreateIndex {
        def: TableDef,
        index: IndexId,
    },
    /// `def` is the new definition without the index.
    DropIndex {
        def: TableDef,
        index: IndexId,
    },
    /// ALTER TABLE, first phase (LQH only): build the table's rows in the
    /// layout of `def` (the new version) aside, converting each row as
    /// `sources` says, and refuse writes to the table until `AlterCommit` or
    /// `AlterAbort`. Transactions with uncommitted writes on the table are
    /// doomed first, so the rows cannot change under the copy. Fails (and
    /// keeps nothing) on a value that does not convert, a unique-key
    /// conflict in the new indexes, or data memory short of the two copies.
    AlterTable {
        def: TableDef,
        sources: Vec<crate::api::ColumnSource>,
    },
    /// ALTER TABLE, second phase, once every LQH prepared: LQH switches to
    /// the copy (open scans of the table fail), then TC takes `def`.
    AlterCommit {
        def: TableDef,
    },
    /// ALTER TABLE refused by some LQH: every LQH drops its copy (if any)
    /// and takes writes again. Never sent to TC.
    AlterAbort(TableId),
}

impl SchemaChange {
    pub fn table(&self) -> TableId {
        match self {
            SchemaChange::CreateTable(d) => d.id,
            SchemaChange::DropTable(t) | SchemaChange::AlterAbort(t) => *t,
            SchemaChange::TruncateTable(def)
            | SchemaChange::CreateIndex { def, .. }
            | SchemaChange::DropIndex { def, .. }
            | SchemaChange::AlterTable { def, .. }
            | SchemaChange::AlterCommit { def } => def.id,
        }
    }
}

/// One row a partition scan returns to TC.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScanRow {
    /// Ordered-index scans: `Storage::ordered_key` of the row (index key ++ pk),
    /// which TC merges on. Empty for full-table scans.
    pub key: Vec<u8>,
    /// The projected row.
    pub values: Vec<Value>,
}

/// The keys of a batch of scanned rows, back to back in one buffer: one
/// allocation per batch instead of one per row (a range scan returns many
/// short keys).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RowKeysParts")]
pub struct RowKeys {
    bytes: Vec<u8>,
    /// End offset of each key in `bytes` (non-decreasing, the last one is
    /// `bytes.len()`).
    ends: Vec<u32>,
}

/// `RowKeys` as it arrives from a deserializer, checked before use.
#[derive(Deserialize)]
struct RowKeysParts {
    bytes: Vec<u8>,
    ends: Vec<u32>,
}

impl TryFrom<RowKeysParts> for RowKeys {
    type Error = &'static str;
    fn try_from(p: RowKeysParts) -> Result<RowKeys, &'static str> {
        let sorted = p.ends.windows(2).all(|w| w[0] <= w[1]);
        let last = p.ends.last().map_or(0, |e| *e as usize);
        if !sorted || last != p.bytes.len() {
            return Err("row key offsets do not fit the key bytes");
        }
        Ok(RowKeys { bytes: p.bytes, ends: p.ends })
    }
}

impl RowKeys {
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Append one key.
    pub fn push(&mut self, key: &[u8]) {
        self.bytes.extend_from_slice(key);
        let end = u32::try_from(self.bytes.len()).expect("scan batch keys exceed 4 GiB");
        self.ends.push(end);
    }

    /// Append one key made of two parts (`a ++ b`).
    pub fn push_parts(&mut self, a: &[u8], b: &[u8]) {
        self.bytes.extend_from_slice(a);
        self.bytes.extend_from_slice(b);
        let end = u32::try_from(self.bytes.len()).expect("scan batch keys exceed 4 GiB");
        self.ends.push(end);
    }

    /// Key `i` (panics if there is no such key).
    pub fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.bytes[start..self.ends[i] as usize]
    }

    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// Append every key of `other`.
    pub fn append(&mut self, other: &RowKeys) {
        let base = u32::try_from(self.bytes.len()).expect("scan batch keys exceed 4 GiB");
        self.bytes.extend_from_slice(&other.bytes);
        self.ends.extend(other.ends.iter().map(|e| e + base));
    }

    pub fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }

    /// Room for `keys` more keys of `bytes` bytes in all.
    pub fn reserve(&mut self, keys: usize, bytes: usize) {
        self.ends.reserve(keys);
        self.bytes.reserve(bytes);
    }
}

/// A batch of rows a partition scan returns to TC, in scan order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScanRows {
    /// Ordered-index scans asked for `row_keys`: one key per row,
    /// `Storage::ordered_key` of the row (index key ++ pk), which TC merges
    /// on. Empty otherwise.
    pub keys: RowKeys,
    /// The projected rows.
    pub rows: Vec<Vec<Value>>,
}

impl ScanRows {
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Append a row; `key` for ordered scans (every row then has one).
    pub fn push(&mut self, key: Option<&[u8]>, values: Vec<Value>) {
        if let Some(k) = key {
            self.keys.push(k);
        }
        self.rows.push(values);
    }

    /// Append every row of `other` (keys with them).
    pub fn append(&mut self, mut other: ScanRows) {
        if self.rows.is_empty() {
            *self = other;
            return;
        }
        self.keys.append(&other.keys);
        self.rows.append(&mut other.rows);
    }
}

/// LQH_SCANREQ: TC -> LQH. Open a scan of one partition and return the first
/// batch. Reply: `LqhScanConf` (then the scan waits for `LqhScanNextReq`), or
/// `LqhScanRef` (scan closed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LqhScanReq {
    pub scan: ScanKey,
    /// The transaction a locking scan belongs to (its locks are held until
    /// it ends). None: a committed-read scan, which holds nothing.
    pub txn: Option<TxnId>,
    /// The transaction the scan reads for: its own uncommitted writes (as
    /// they were when the scan opened) replace the committed rows. Set for
    /// every scan issued inside a transaction, locking or not; None for a
    /// standalone scan.
    pub reader: Option<TxnId>,
    pub table: TableId,
    pub table_version: u32,
    pub part: PartitionId,
    pub index: Option<IndexId>,
    pub range: Option<ScanRange>,
    pub descending: bool,
    /// Index scans: each returned row comes with its ordered key
    /// (`ScanRows::keys`), which TC merges on. false when TC hands rows on
    /// in any order (no key encoded per row).
    pub row_keys: bool,
    pub filter: Option<Filter>,
    /// Empty: every column.
    pub projection: Vec<ColumnId>,
    pub lock: LockMode,
    /// See `ScanSpec::wait`.
    pub wait: LockWait,
    /// Most rows per `LqhScanConf`.
    pub batch_rows: u32,
    /// See `ScanSpec::ranges`: read one after the other (`range` then None),
    /// each row tagged with its range's position.
    #[serde(deserialize_with = "crate::ops::bounded_ranges")]
    pub ranges: Vec<ScanRange>,
    /// See `ScanSpec::aggregate`: this partition's partial rows, in one
    /// `LqhScanConf`, instead of its rows.
    pub aggregate: Option<crate::ops::ScanAggregate>,
}

/// One operation of an `LqhKeyReq`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LqhOp {
    /// Sequence number of the operation in its transaction.
    pub seq: u32,
    /// The row's partition; None when the operation goes through a unique
    /// index (LQH resolves it).
    pub part: Option<PartitionId>,
    pub op: KeyOp,
    /// The transaction's savepoint when TC sent the operation (0: none set).
    pub savepoint: u32,
}

/// Outcome of one operation at LQH.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LqhOpResult {
    pub seq: u32,
    /// Ok: prepared (with the projected row of a read). Err: the operation
    /// failed; with `fatal` (lock-wait time-out, transaction invalidated by
    /// DDL) TC aborts the transaction whatever the operation's `abort_on_error`.
    pub outcome: Result<Option<Vec<Value>>, LqhOpError>,
    /// The replicas that hold state of the operation (locks, a new image), in
    /// prepare order: TC commits, completes and aborts along it. None for a
    /// read that left nothing (a simple read).
    pub chain: Option<Chain>,
}

/// One write of a transaction as the primary replica prepared it, sent on
/// along the chain (`LqhReplicaReq`): the key, and the row's new image
/// (None: deleted). A backup locks the key and keeps the image; it runs no
/// checks of its own (the primary ran them under its locks), so applying it
/// is an upsert or a delete-if-present.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplicaOp {
    pub seq: u32,
    pub table: TableId,
    pub part: PartitionId,
    /// The primary key, encoded as storage encodes it (`Storage::encode_pk`:
    /// every replica has the same schema, so the same bytes).
    pub key: Vec<u8>,
    pub image: Option<Vec<Value>>,
    pub savepoint: u32,
    pub chain: Chain,
    /// What the primary would answer TC for the operation (the tail does).
    pub result: Option<Vec<Value>>,
}

/// LQH_REPLICAREQ: LQH -> the next LQH of the chain: prepare these writes
/// of `txn` (in order). The last replica answers TC with `LqhKeyConf`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LqhReplicaReq {
    pub txn: TxnId,
    pub tc: BlockRef,
    pub api: BlockRef,
    pub handle: u64,
    pub ops: Vec<ReplicaOp>,
}

/// What an LQH holds of one transaction of a failed coordinator
/// (`LqhTransConf`, for the take-over).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransInfo {
    pub txn: TxnId,
    /// Where the transaction's client is, and its handle: the take-over tells
    /// it the outcome.
    pub api: BlockRef,
    pub handle: u64,
    /// Some(gci): this LQH committed it (so the decision was commit).
    pub committed: Option<u64>,
    /// Chains of its operations here.
    pub chains: Vec<Chain>,
}

/// A batch of rows a partition's primary copies to a starting replica.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CopyRows {
    pub req: u64,
    pub table: TableId,
    pub part: PartitionId,
    /// The table's version at the source: rows of another version are
    /// refused (an ALTER TABLE ran meanwhile; the partition is copied again).
    pub table_version: u32,
    /// The copy's first batch: the starting node starts tracking which of
    /// its rows the copy confirms (`sync_begin`).
    pub first: bool,
    /// The copy's last batch: the starting node deletes its rows that
    /// neither the copy nor a write confirmed (`sync_end`).
    pub last: bool,
    /// Whole rows, each stored as it is (insert or overwrite by key).
    #[serde(with = "crate::row_codec")]
    pub rows: Vec<Vec<Value>>,
    /// The GCI of each row of `rows` at the source (same length): the
    /// starting node tags the row with it, so that a later delta copy from
    /// this node sends it exactly when it changed after the receiver's GCI.
    pub gcis: Vec<u64>,
    /// Primary-key values of rows unchanged since the starting node's
    /// restored GCI (a delta copy): the starting node holds them already.
    #[serde(with = "crate::row_codec")]
    pub keys: Vec<Vec<Value>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LqhOpError {
    pub error: NodeError,
    pub fatal: bool,
}

/// Per-block figures DICT gathers for `DictOp::NodeStats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BlockStats {
    pub data_memory_limit_bytes: u64,
    pub data_memory_used_bytes: u64,
    pub rows: u64,
    pub open_transactions: u32,
    pub committed_transactions: u64,
    pub aborted_transactions: u64,
    /// Named event counters of the block (ops, lock waits, time-outs, probes).
    pub counters: Vec<(String, u64)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum InternalSignal {
    /// TC -> LQH (the primary replica of each operation's partition, or for
    /// a committed read the replica it reads): prepare operations of
    /// transaction `txn` (lock, check, build the new row images), run in
    /// order. Writes go on along their chain (`LqhReplicaReq`). Reply:
    /// `LqhKeyConf`s, one result per operation, from the node that ends each
    /// operation's chain. `api` / `handle`: the client, for a take-over.
    LqhKeyReq {
        txn: TxnId,
        ops: Vec<LqhOp>,
        api: BlockRef,
        handle: u64,
        /// Data nodes the sending TC knows failed (usually none). LQH
        /// leaves them out of write chains at once, even if its own node's
        /// failure report has not come yet: a write passed to a dead node
        /// would never be answered, and TC, already past that failure,
        /// would wait forever. Each failure with the membership generation
        /// that declared it (an LQH that already saw the node join again
        /// ignores it).
        failed: Vec<(NodeId, u64)>,
    },
    /// LQH -> TC: results of operations of `txn`, in execution order.
    LqhKeyConf {
        txn: TxnId,
        results: Vec<LqhOpResult>,
    },
    /// LQH -> next LQH of a chain (see `LqhReplicaReq`).
    LqhReplicaReq(Box<LqhReplicaReq>),
    /// TC -> the last LQH of `chain`, then each LQH -> the one before it:
    /// commit phase, tagged `gci`. An LQH commits everything it holds of
    /// the transaction at the first commit it gets (later ones for other
    /// chains only pass on). The primary (first of the chain) answers
    /// `LqhCommitConf` to `tc`; or `LqhCommitRef` if a concurrent DDL
    /// invalidated the transaction (it then aborted its part).
    LqhCommitReq {
        txn: TxnId,
        gci: u64,
        chain: Chain,
        tc: BlockRef,
    },
    /// LQH (primary of `chain`) -> TC: every replica of the chain committed.
    LqhCommitConf {
        txn: TxnId,
        chain: Chain,
    },
    /// LQH -> TC: the transaction could not commit here and was aborted.
    LqhCommitRef {
        txn: TxnId,
        error: NodeError,
    },
    /// TC -> the first LQH of `chain`, then on along it: complete phase:
    /// release the backups' locks, free the operation records. The last
    /// replica answers `LqhCompleteConf` to `tc`.
    LqhCompleteReq {
        txn: TxnId,
        chain: Chain,
        tc: BlockRef,
    },
    /// LQH -> TC.
    LqhCompleteConf {
        txn: TxnId,
        chain: Chain,
    },
    /// TC -> every LQH that may hold state of the transaction: abort it.
    /// Reply `LqhAbortConf` (always, also for a transaction LQH never saw).
    LqhAbortReq {
        txn: TxnId,
    },
    /// LQH -> TC.
    LqhAbortConf {
        txn: TxnId,
    },
    /// Take-over TC -> every LQH of the live nodes: report the transactions
    /// you hold whose coordinator was on `failed_tc` (TxnId's node bits).
    /// Reply: `LqhTransConf`s, the last with `done`.
    LqhTransReq {
        failed_tc: NodeId,
    },
    LqhTransConf {
        failed_tc: NodeId,
        txns: Vec<TransInfo>,
        done: bool,
    },
    /// Master DIH -> a partition's primary LQH: copy the partition's rows to
    /// the starting replica on `dest` (`CopyRows` batches, each confirmed by
    /// `CopyRowsConf`). Reply `CopyFragConf` / `CopyFragRef`.
    /// `since_gci`: Some(g): a delta copy to a node that holds every
    /// commit up to GCI g: rows written after g go in full, the others as
    /// keys; None: every row in full.
    CopyFragReq {
        req: u64,
        table: TableId,
        part: PartitionId,
        dest: NodeId,
        since_gci: Option<u64>,
    },
    CopyRows(Box<CopyRows>),
    /// `error`: the starting replica could not store the rows (the copy
    /// fails with it). `missing_keys`: keys of the batch the starting node
    /// does not hold (a delta copy then stops: the partition must be
    /// copied in full). `deleted`: rows the last batch's `sync_end` deleted.
    CopyRowsConf {
        req: u64,
        table: TableId,
        part: PartitionId,
        error: Option<NodeError>,
        missing_keys: u64,
        deleted: u64,
    },
    /// `rows`: rows sent in full, `keys`: rows sent as keys only, `deleted`:
    /// rows the starting node deleted at the end (gone at the source),
    /// `bytes`: bytes of rows and keys sent (wire encoding). A non-zero
    /// `missing_keys`: the copy stopped because the starting node lacked
    /// rows a delta copy named as unchanged; copy the partition again in
    /// full.
    CopyFragConf {
        req: u64,
        table: TableId,
        part: PartitionId,
        rows: u64,
        keys: u64,
        deleted: u64,
        bytes: u64,
        missing_keys: u64,
    },
    CopyFragRef {
        req: u64,
        table: TableId,
        part: PartitionId,
        error: NodeError,
    },
    /// Anyone -> LQH: count and checksum of a partition's committed rows
    /// (replicas of a partition must agree once quiet). Reply `FragChecksumConf`.
    FragChecksumReq {
        req: u64,
        table: TableId,
        part: PartitionId,
    },
    FragChecksumConf {
        req: u64,
        table: TableId,
        part: PartitionId,
        rows: u64,
        checksum: u64,
    },
    /// LQH -> LQH (delayed by lock_wait_timeout_ms): lock wait `tag` timed out,
    /// unless it was granted or cancelled meanwhile. No reply.
    LqhLockTimeout {
        tag: u64,
    },
    /// TC -> LQH: open a partition scan (see `LqhScanReq`).
    LqhScanReq(Box<LqhScanReq>),
    /// TC -> LQH: next batch of an open partition scan. Reply `LqhScanConf` / `LqhScanRef`.
    LqhScanNextReq {
        scan: ScanKey,
        part: PartitionId,
    },
    /// TC -> LQH: close a partition scan early. No reply (locks taken stay with
    /// the transaction).
    LqhScanCloseReq {
        scan: ScanKey,
        part: PartitionId,
    },
    /// LQH -> LQH: continue a partition scan step (a scan examines at most
    /// scan_examine_per_step rows per signal so it never monopolises the thread).
    LqhScanStep {
        scan: ScanKey,
        part: PartitionId,
    },
    /// LQH -> TC: a batch of rows; with `done` the partition scan is finished and closed.
    LqhScanConf {
        scan: ScanKey,
        part: PartitionId,
        rows: ScanRows,
        done: bool,
    },
    /// LQH -> TC: the partition scan failed and is closed.
    LqhScanRef {
        scan: ScanKey,
        part: PartitionId,
        error: NodeError,
    },
    /// DICT -> LQH (first), then DICT -> TC (after every LQH confirmed): apply a
    /// schema change. Reply `SchemaChangeConf` with the same `req`.
    SchemaChangeReq {
        req: u64,
        change: Box<SchemaChange>,
    },
    /// LQH/TC -> DICT. `error`: why LQH could not apply it (e.g. a unique index
    /// build found duplicates); TC never fails.
    SchemaChangeConf {
        req: u64,
        error: Option<NodeError>,
    },
    /// DICT -> LQH and TC: report figures. Reply `StatsConf`.
    StatsReq {
        req: u64,
    },
    /// LQH/TC -> DICT.
    StatsConf {
        req: u64,
        stats: Box<BlockStats>,
    },
    /// TC -> TC (delayed): periodic check for inactive transactions and idle scans.
    TcTimeoutCheck,
    /// TC -> TC and DICT -> DICT, priority B, sent while handling API_FAILREQ
    /// (priority A): requests of the failed API node already queued in job
    /// buffer B run before it and are dropped; once it runs, the node id may
    /// connect again. No reply.
    ApiFailDone {
        api_node: NodeId,
    },
    /// Host -> every TC instance and DICT (priority A): API node `api_node`
    /// logged in with a SQL account and holds these grants (sent at the
    /// login, before any request of it, and again when the accounts
    /// change); its requests are checked against them
    /// (`norr_txn::privileges`). None: not checked. No reply.
    ApiGrants {
        api_node: NodeId,
        grants: Option<Box<crate::acl::Grants>>,
    },
    /// TC -> LQH: undo the changes of `txn`'s operations stamped `savepoint`
    /// or later (see the module doc). Reply `LqhRollbackToConf`, also for a
    /// transaction LQH holds no record of.
    LqhRollbackToReq {
        txn: TxnId,
        savepoint: u32,
    },
    /// LQH -> TC. `error`: the transaction cannot be rolled back to a
    /// savepoint here (a concurrent DDL doomed it); TC then aborts it.
    LqhRollbackToConf {
        txn: TxnId,
        error: Option<NodeError>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_keys_hold_their_keys_and_round_trip() {
        let mut k = RowKeys::default();
        k.push(b"ab");
        k.push(b"");
        k.push_parts(b"x", b"yz");
        let mut m = RowKeys::default();
        m.push(b"q");
        m.append(&k);
        assert_eq!(m.iter().collect::<Vec<_>>(), vec![&b"q"[..], b"ab", b"", b"xyz"]);
        let back: RowKeys = postcard::from_bytes(&postcard::to_stdvec(&m).unwrap()).unwrap();
        assert_eq!(back, m);
        let rows = ScanRows { keys: m, rows: vec![vec![Value::Int(1)]; 4] };
        let back: ScanRows = postcard::from_bytes(&postcard::to_stdvec(&rows).unwrap()).unwrap();
        assert_eq!(back, rows);
    }

    /// Offsets that do not fit the bytes are refused when decoding (so `get`
    /// never slices out of bounds), never accepted or panicked on.
    #[test]
    fn row_keys_with_bad_offsets_do_not_decode() {
        #[derive(Serialize)]
        struct Raw {
            bytes: Vec<u8>,
            ends: Vec<u32>,
        }
        for (bytes, ends) in [(vec![1u8, 2], vec![3u32]), (vec![1, 2, 3], vec![2, 1, 3]), (vec![1, 2], vec![1])] {
            let enc = postcard::to_stdvec(&Raw { bytes, ends }).unwrap();
            assert!(postcard::from_bytes::<RowKeys>(&enc).is_err());
        }
        let good = postcard::to_stdvec(&Raw { bytes: vec![1, 2, 3], ends: vec![1, 1, 3] }).unwrap();
        let k: RowKeys = postcard::from_bytes(&good).unwrap();
        assert_eq!(k.iter().collect::<Vec<_>>(), vec![&[1u8][..], &[], &[2, 3]]);
        for n in 0..good.len() {
            assert!(postcard::from_bytes::<RowKeys>(&good[..n]).is_err());
        }
    }
}
