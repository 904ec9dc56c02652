//! Error codes: stable numbers (NDB-style where NDB has an equivalent), a
//! classification that tells clients whether to retry, a description and what
//! the user should do.

use serde::{Deserialize, Serialize};

/// How a client should react to an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorClass {
    /// Retry the whole transaction (lock wait timeout, node overload, ...).
    Temporary,
    /// The request is wrong or conflicts with data; retrying will not help.
    Permanent,
    /// Schema problem: unknown table/column/index, version mismatch.
    Schema,
    /// Malformed request or protocol violation.
    Protocol,
    /// Resource exhausted (table full); retry may succeed after deletes or
    /// configuration change.
    Resource,
    /// Internal invariant broken: a bug; report it.
    Internal,
    /// The outcome of the request is unknown (a commit whose coordinator
    /// failed and whose fate nobody could tell): it may have taken effect.
    /// Do not simply retry: check first.
    UnknownResult,
}

macro_rules! error_codes {
    ($( $name:ident = $code:expr, $class:ident, $desc:expr, $action:expr; )*) => {
        /// Every error a data node can report. The number is stable and appears in
        /// logs and in client errors.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum ErrorCode { $( $name, )* }

        impl ErrorCode {
            pub fn code(self) -> u32 { match self { $( ErrorCode::$name => $code, )* } }
            pub fn class(self) -> ErrorClass { match self { $( ErrorCode::$name => ErrorClass::$class, )* } }
            pub fn description(self) -> &'static str { match self { $( ErrorCode::$name => $desc, )* } }
            /// What the user should do about it.
            pub fn action(self) -> &'static str { match self { $( ErrorCode::$name => $action, )* } }
            pub fn from_code(code: u32) -> Option<ErrorCode> {
                match code { $( $code => Some(ErrorCode::$name), )* _ => None }
            }
            pub const ALL: &'static [ErrorCode] = &[ $( ErrorCode::$name, )* ];
        }
    };
}

error_codes! {
    // --- data errors (per operation) ---
    NoSuchRow = 626, Permanent, "Tuple did not exist", "the row with this key does not exist; read before update/delete or use write (upsert)";
    DuplicateKey = 630, Permanent, "Tuple already existed when attempting to insert", "a row with this primary key exists; use update or write (upsert)";
    DuplicateUniqueKey = 893, Permanent, "Constraint violation: unique index already has this value", "another row holds this unique key value";
    NullInNotNullColumn = 839, Permanent, "NULL given for a NOT NULL column", "give a value for the column";
    NoDefault = 4260, Permanent, "Column has no default value and none was given", "give a value for every NOT NULL column without a default";
    ValueOutOfRange = 4261, Permanent, "Value out of range for the column type", "use a value the column type can hold, or widen the column";
    ValueTooLarge = 4262, Permanent, "Value too long for the column", "shorten the value or declare a longer column";
    WrongValueType = 4263, Permanent, "Value of the wrong type for the column", "send a value of the column's type";
    InvalidUtf8 = 4264, Permanent, "Character column value is not valid UTF-8", "send utf8mb4 text";
    MissingKeyColumn = 4265, Permanent, "A primary key or index key column is missing or NULL", "give every key column a non-NULL value";
    KeyUpdateNotAllowed = 4266, Permanent, "The primary key of a row cannot be updated in place", "delete the row and insert it under the new key";
    MissingPartition = 4267, Permanent, "Table uses user-defined partitioning; the operation must name its partition", "pass the partition id computed by the client";
    BadPartition = 4268, Permanent, "Partition id out of range or row does not belong in the partition", "compute the partition with the table's partition function";
    // --- transactions ---
    LockWaitTimeout = 266, Temporary, "Time-out in NDB, probably caused by deadlock", "retry the transaction";
    TransactionTimeout = 4008, Temporary, "Transaction was inactive too long and was aborted", "retry the transaction";
    TransactionAborted = 4350, Temporary, "Transaction already aborted", "start a new transaction";
    TooManyOperations = 233, Temporary, "Out of operation records in transaction coordinator", "use smaller transactions or raise max_ops_per_transaction";
    // NDB 4006: "Connect failure - out of connection objects".
    TooManyTransactions = 4006, Temporary, "Out of transaction records in transaction coordinator", "retry later or raise max_transactions";
    NodeShutdown = 4023, Temporary, "Transaction aborted due to node shutdown", "reconnect to another node and retry";
    Overloaded = 1218, Temporary, "Send buffers overloaded in data node", "retry; reduce batch size or concurrency";
    // --- resources ---
    TableFull = 827, Resource, "Out of memory in NorrDB data node: table is full", "delete rows, or raise data_memory in the configuration";
    // --- schema ---
    NoSuchTable = 723, Schema, "No such table existed", "check the table name; create it first";
    NoSuchColumn = 4004, Schema, "Attribute name or id not found in the table", "check the column name";
    NoSuchIndex = 4243, Schema, "Index not found", "check the index name";
    TableExists = 721, Schema, "Schema object with given name already exists", "drop it first or use another name";
    IndexExists = 4244, Schema, "Index with given name already exists", "use another index name";
    SchemaVersionMismatch = 241, Schema, "Invalid schema object version", "reload the table definition and retry";
    BadSchema = 4269, Schema, "Invalid table or index definition", "fix the definition (see the message)";
    TooManyTables = 707, Resource, "No more table metadata records", "drop unused tables or raise max_tables";
    // --- scans ---
    NoSuchScan = 4270, Protocol, "Scan id not known to the node (closed or never opened)", "open a new scan";
    BadScanBound = 4271, Permanent, "Scan bound does not match the index columns", "give bounds as a prefix of the index columns";
    BadFilter = 4272, Permanent, "Pushed-down filter refers to unknown columns or compares incompatible types", "fix the filter";
    // --- protocol ---
    MalformedSignal = 4273, Protocol, "Malformed or oversized message", "client bug: the connection is closed";
    UnsupportedVersion = 4274, Protocol, "Protocol version not supported by this node", "upgrade the client or the node";
    NotConnected = 4009, Temporary, "Cluster failure: not connected to a data node", "check that the data node runs and is reachable, then retry";
    // --- internal ---
    Internal = 4275, Internal, "Internal error in the data node", "report a bug with the node log";
    // --- added later: at the end, so the codes above keep their variant index on the wire ---
    LockNoWait = 4276, Temporary, "Row locked by another transaction and the read asked not to wait (NOWAIT)", "the transaction stays open: retry the read later, or let it wait (leave out NOWAIT)";
    TxnNodeFailure = 4027, Temporary, "Node failure caused abort of transaction", "retry the transaction: the cluster routes around the failed node";
    WrongReplica = 4277, Temporary, "The operation reached a node that is not a live replica of its partition (the distribution changed)", "retry the transaction";
    PartitionUnavailable = 4278, Temporary, "No live replica of the partition", "retry later: every node of the partition's node group is down";
    // --- node failure (client side: the coordinator's data node failed) ---
    NodeFailure = 4010, Temporary, "Node failure caused abort of transaction", "retry the transaction: it is started on a live data node";
    AbortedAfterNodeFailure = 4025, Temporary, "Node failure caused abort of transaction: the node that took over its coordinator rolled it back", "retry the transaction";
    OutcomeUnknown = 4013, UnknownResult, "Request timed out in waiting for node failure: the outcome of the commit is unknown", "the transaction may have committed: check whether its changes are there before retrying it";
    CommittedResultsLost = 4115, Permanent, "Transaction was committed but all read information was not received due to node crash", "the transaction is committed (do not retry it): read the rows again if you need them";
    // --- durability ---
    RedoLogFull = 410, Temporary, "REDO log files overloaded", "retry; the log frees as checkpoints complete";
    RedoBufferOverloaded = 1221, Temporary, "REDO buffers overloaded", "retry; the disk is slower than the commit rate (a faster disk, or a larger redo_buffer_bytes, helps)";
    CommitDiskTimeout = 4279, Permanent, "Transaction committed in memory on every replica, but its global checkpoint was not confirmed on disk in time", "do NOT retry: the transaction is committed; it reaches disk when global checkpoints run again (check the data nodes' disks and logs; the wait is bounded by commit_disk_timeout_ms)";
    // --- pushed aggregates (ScanSpec::aggregate) ---
    BadAggregate = 4280, Permanent, "Pushed aggregate refers to unknown columns or aggregates a type the data node does not aggregate", "fix the aggregate, or read the rows and aggregate them in the client";
    AggregateTooManyGroups = 4281, Resource, "Pushed aggregate has more groups in a partition than it allowed", "read the rows and aggregate them in the client";
    // Issue 25: a native client logged in with a SQL account lacks a
    // privilege (the SQL nodes report it as MySQL's 1142). Numbered apart
    // from the 428x run so that codes added there do not collide.
    AccessDenied = 4290, Permanent, "Access denied: the account lacks the privilege for this operation", "GRANT the privilege to the account through a SQL node, or log in with another account";
    AggregateOverflow = 4282, Permanent, "Pushed SUM overflowed the data node's exact accumulator", "read the rows and aggregate them in the client";
}

impl ErrorCode {
    /// True if the transaction should be retried as a whole.
    pub fn is_temporary(self) -> bool {
        self.class() == ErrorClass::Temporary
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "error {}: {}", self.code(), self.description())
    }
}

/// An error with optional detail (which column, which key...). The code decides
/// behaviour; the message is for humans.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{code}{}", if message.is_empty() { String::new() } else { format!(" ({message})") })]
pub struct NodeError {
    pub code: ErrorCode,
    pub message: String,
}

impl NodeError {
    pub fn new(code: ErrorCode) -> Self {
        NodeError { code, message: String::new() }
    }
    pub fn with(code: ErrorCode, message: impl Into<String>) -> Self {
        NodeError { code, message: message.into() }
    }
}

impl From<ErrorCode> for NodeError {
    fn from(code: ErrorCode) -> Self {
        NodeError::new(code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn codes_are_unique_and_roundtrip() {
        let mut seen = std::collections::HashSet::new();
        for &e in ErrorCode::ALL {
            assert!(seen.insert(e.code()), "duplicate code {}", e.code());
            assert_eq!(ErrorCode::from_code(e.code()), Some(e));
            assert!(!e.description().is_empty() && !e.action().is_empty());
        }
        assert!(ErrorCode::LockWaitTimeout.is_temporary());
        assert!(!ErrorCode::DuplicateKey.is_temporary());
    }

    /// NDB's numbers where NDB has the error (MySQL Cluster users look them up).
    #[test]
    fn node_failure_codes_are_ndbs() {
        assert_eq!(ErrorCode::NodeFailure.code(), 4010);
        assert_eq!(ErrorCode::AbortedAfterNodeFailure.code(), 4025);
        assert_eq!(ErrorCode::OutcomeUnknown.code(), 4013);
        assert_eq!(ErrorCode::CommittedResultsLost.code(), 4115);
        assert_eq!(ErrorCode::TooManyTransactions.code(), 4006);
        assert_eq!(ErrorCode::NodeShutdown.code(), 4023);
        assert_eq!(ErrorCode::NotConnected.code(), 4009);
        assert!(ErrorCode::NodeFailure.is_temporary() && ErrorCode::AbortedAfterNodeFailure.is_temporary());
        // Unknown outcome: never "just retry" (the commit may have happened).
        assert_eq!(ErrorCode::OutcomeUnknown.class(), ErrorClass::UnknownResult);
        assert!(!ErrorCode::OutcomeUnknown.is_temporary() && !ErrorCode::CommittedResultsLost.is_temporary());
    }
}
