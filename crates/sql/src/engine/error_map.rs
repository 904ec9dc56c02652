//! Native errors (`norr_client::ClientError`, `NodeError`) -> MySQL errors
//! (error number, SQLSTATE, message), plus constructors for the MySQL errors the
//! catalog raises itself. Owner: catalog engineer.
//!
//! Use `from_client(e, &ErrCtx::table("db", "t"))` (or `from_client_plain(e)`)
//! wherever a client call fails; give the context you have so the messages read
//! like MySQL's ("Duplicate entry '5' for key 't1.PRIMARY'").

use crate::types::SqlError;
use norr_client::ClientError;
use norr_signals::{ErrorCode, NodeError};

/// What the caller knows about the failing operation; every field is optional.
#[derive(Debug, Clone, Default)]
pub struct ErrCtx {
    pub db: String,
    pub table: String,
    /// Key name for duplicate-key errors ("PRIMARY" or the index name).
    pub key_name: Option<String>,
    /// The duplicate key value as MySQL prints it: values joined by '-'.
    pub key_value: Option<String>,
    /// Column name for NULL / range / length errors.
    pub column: Option<String>,
    /// 1-based row number of a multi-row INSERT (for 1264/1406/1366 messages).
    pub row: Option<u64>,
}

impl ErrCtx {
    pub fn table(db: &str, table: &str) -> ErrCtx {
        ErrCtx { db: db.to_string(), table: table.to_string(), ..Default::default() }
    }
}

/// Map a client error without any context.
pub fn from_client_plain(e: ClientError) -> SqlError {
    from_client(e, &ErrCtx::default())
}

/// Map a client error to the MySQL error a client of MySQL NDB Cluster would see.
pub fn from_client(e: ClientError, ctx: &ErrCtx) -> SqlError {
    match e {
        ClientError::Node(ne) => from_node(&ne, ctx),
        // No data node connected (they are down or restarting; the client
        // connects again by itself): temporary, as MySQL Cluster's 4009.
        ClientError::NotConnected(m) => SqlError::new(
            1297,
            "HY000",
            format!("Got temporary error 4009 'Cluster failure: not connected to a data node ({m})' from NDBCLUSTER"),
        ),
        ClientError::Timeout => SqlError::new(
            1205,
            "HY000",
            "Lock wait timeout exceeded; try restarting transaction (request to the data node timed out)",
        ),
        ClientError::Protocol(m) => SqlError::internal(format!("Internal error talking to the data node: {m}")),
    }
}

fn qualified(ctx: &ErrCtx) -> String {
    if ctx.db.is_empty() {
        ctx.table.clone()
    } else {
        format!("{}.{}", ctx.db, ctx.table)
    }
}

/// Map a node error.
pub fn from_node(e: &NodeError, ctx: &ErrCtx) -> SqlError {
    let detail = if e.message.is_empty() { String::new() } else { format!(" ({})", e.message) };
    let col = ctx.column.clone().unwrap_or_else(|| "?".to_string());
    let row = ctx.row.unwrap_or(1);
    match e.code {
        ErrorCode::DuplicateKey | ErrorCode::DuplicateUniqueKey => {
            let key = ctx.key_name.clone().unwrap_or_else(|| {
                if e.code == ErrorCode::DuplicateKey {
                    "PRIMARY".to_string()
                } else {
                    "UNIQUE".to_string()
                }
            });
            let key = if ctx.table.is_empty() { key } else { format!("{}.{}", ctx.table, key) };
            let val = ctx.key_value.clone().unwrap_or_else(|| e.message.clone());
            SqlError::new(1062, "23000", format!("Duplicate entry '{val}' for key '{key}'"))
        }
        ErrorCode::NullInNotNullColumn | ErrorCode::MissingKeyColumn => {
            SqlError::new(1048, "23000", format!("Column '{col}' cannot be null"))
        }
        ErrorCode::NoDefault => SqlError::new(1364, "HY000", format!("Field '{col}' doesn't have a default value")),
        ErrorCode::ValueOutOfRange => {
            SqlError::new(1264, "22003", format!("Out of range value for column '{col}' at row {row}"))
        }
        ErrorCode::ValueTooLarge => {
            SqlError::new(1406, "22001", format!("Data too long for column '{col}' at row {row}"))
        }
        ErrorCode::WrongValueType | ErrorCode::InvalidUtf8 => {
            SqlError::new(1366, "HY000", format!("Incorrect value for column '{col}' at row {row}{detail}"))
        }
        ErrorCode::NoSuchRow => SqlError::new(1032, "HY000", format!("Can't find record in '{}'", ctx.table)),
        ErrorCode::KeyUpdateNotAllowed => {
            SqlError::new(1235, "42000", "This version of NorrDB doesn't yet support 'updating a primary key in place'")
        }
        ErrorCode::MissingPartition | ErrorCode::BadPartition => {
            SqlError::new(1526, "HY000", format!("Table has no partition for value{detail}"))
        }
        ErrorCode::LockWaitTimeout => {
            SqlError::new(1205, "HY000", "Lock wait timeout exceeded; try restarting transaction")
        }
        // 3572 ER_LOCK_NOWAIT; the transaction stays open, as in MySQL.
        ErrorCode::LockNoWait => SqlError::new(
            3572,
            "HY000",
            "Statement aborted because lock(s) could not be acquired immediately and NOWAIT is set.",
        ),
        ErrorCode::TransactionTimeout | ErrorCode::TransactionAborted => SqlError::new(
            1297,
            "HY000",
            format!("Got temporary error {} '{}' from NDBCLUSTER", e.code.code(), e.code.description()),
        ),
        ErrorCode::TooManyOperations => too_many_rows(None, 0),
        ErrorCode::TooManyTransactions
        | ErrorCode::Overloaded
        | ErrorCode::NodeShutdown
        | ErrorCode::RedoLogFull
        | ErrorCode::RedoBufferOverloaded
        | ErrorCode::NodeFailure
        | ErrorCode::AbortedAfterNodeFailure
        | ErrorCode::TxnNodeFailure
        | ErrorCode::WrongReplica
        | ErrorCode::PartitionUnavailable => SqlError::new(
            1297,
            "HY000",
            format!("Got temporary error {} '{}' from NDBCLUSTER", e.code.code(), e.code.description()),
        ),
        // Not temporary: the commit may have happened (4013), or did (4115, 4279).
        // NDB's "Got error N 'text' from NDBCLUSTER" (1296), with the detail.
        ErrorCode::OutcomeUnknown | ErrorCode::CommittedResultsLost | ErrorCode::CommitDiskTimeout => SqlError::new(
            1296,
            "HY000",
            format!("Got error {} '{}' from NDBCLUSTER{detail}", e.code.code(), e.code.description()),
        ),
        ErrorCode::NotConnected => SqlError::new(
            1297,
            "HY000",
            format!("Got temporary error 4009 'Cluster failure: not connected to a data node' from NDBCLUSTER{detail}"),
        ),
        ErrorCode::TableFull => SqlError::new(1114, "HY000", format!("The table '{}' is full", ctx.table)),
        ErrorCode::NoSuchTable => no_such_table(&ctx.db, &ctx.table),
        ErrorCode::NoSuchColumn => SqlError::new(1054, "42S22", format!("Unknown column '{col}' in 'field list'")),
        ErrorCode::NoSuchIndex => SqlError::new(
            1176,
            "42000",
            format!("Key '{}' doesn't exist in table '{}'", ctx.key_name.clone().unwrap_or_default(), ctx.table),
        ),
        ErrorCode::TableExists => table_exists(&ctx.table),
        ErrorCode::IndexExists => dup_key_name(ctx.key_name.as_deref().unwrap_or("?")),
        ErrorCode::SchemaVersionMismatch => SqlError::new(
            1412,
            "HY000",
            format!("Table definition of '{}' has changed, please retry transaction", qualified(ctx)),
        ),
        ErrorCode::BadSchema => {
            SqlError::new(1005, "HY000", format!("Can't create table '{}'{detail}", qualified(ctx)))
        }
        ErrorCode::TooManyTables => {
            SqlError::new(1005, "HY000", format!("Can't create table '{}' (too many tables){detail}", qualified(ctx)))
        }
        // The aggregate refusals reach a statement only if `pushed_agg` did
        // not run it again unpushed (a bug): as the other bad requests.
        ErrorCode::NoSuchScan
        | ErrorCode::BadScanBound
        | ErrorCode::BadFilter
        | ErrorCode::MalformedSignal
        | ErrorCode::BadAggregate
        | ErrorCode::AggregateTooManyGroups
        | ErrorCode::AggregateOverflow => SqlError::internal(format!(
            "Got error {} '{}' from NDBCLUSTER{detail}",
            e.code.code(),
            e.code.description()
        )),
        // A data node refuses this only to native clients logged in with a
        // SQL account (issue 25); its message is already MySQL's 1142 text.
        ErrorCode::AccessDenied => SqlError::new(
            1142,
            "42000",
            if e.message.is_empty() { e.code.description().to_string() } else { e.message.clone() },
        ),
        ErrorCode::UnsupportedVersion | ErrorCode::Internal => SqlError::internal(format!(
            "Got error {} '{}' from NDBCLUSTER{detail}",
            e.code.code(),
            e.code.description()
        )),
    }
}

// ---- MySQL errors raised by the catalog ----

/// 1146 ER_NO_SUCH_TABLE.
pub fn no_such_table(db: &str, table: &str) -> SqlError {
    SqlError::new(1146, "42S02", format!("Table '{db}.{table}' doesn't exist"))
}
/// 1050 ER_TABLE_EXISTS_ERROR.
pub fn table_exists(table: &str) -> SqlError {
    SqlError::new(1050, "42S01", format!("Table '{table}' already exists"))
}
/// 1051 ER_BAD_TABLE_ERROR.
pub fn unknown_table(names: &str) -> SqlError {
    SqlError::new(1051, "42S02", format!("Unknown table '{names}'"))
}
/// 1049 ER_BAD_DB_ERROR.
pub fn unknown_db(db: &str) -> SqlError {
    SqlError::new(1049, "42000", format!("Unknown database '{db}'"))
}
/// 1007 ER_DB_CREATE_EXISTS.
pub fn db_exists(db: &str) -> SqlError {
    SqlError::new(1007, "HY000", format!("Can't create database '{db}'; database exists"))
}
/// 1008 ER_DB_DROP_EXISTS.
pub fn db_drop_missing(db: &str) -> SqlError {
    SqlError::new(1008, "HY000", format!("Can't drop database '{db}'; database doesn't exist"))
}
/// 1044 ER_DBACCESS_DENIED_ERROR.
pub fn db_access_denied(user: &str, db: &str) -> SqlError {
    SqlError::new(1044, "42000", format!("Access denied for user '{user}' to database '{db}'"))
}
/// 1046 ER_NO_DB_ERROR.
pub fn no_db() -> SqlError {
    SqlError::new(1046, "3D000", "No database selected")
}
/// 1054 ER_BAD_FIELD_ERROR.
pub fn unknown_column(col: &str, place: &str) -> SqlError {
    SqlError::new(1054, "42S22", format!("Unknown column '{col}' in '{place}'"))
}
/// 1060 ER_DUP_FIELDNAME.
pub fn dup_column(col: &str) -> SqlError {
    SqlError::new(1060, "42S21", format!("Duplicate column name '{col}'"))
}
/// 1061 ER_DUP_KEYNAME.
pub fn dup_key_name(name: &str) -> SqlError {
    SqlError::new(1061, "42000", format!("Duplicate key name '{name}'"))
}
/// 1068 ER_MULTIPLE_PRI_KEY.
pub fn multiple_pk() -> SqlError {
    SqlError::new(1068, "42000", "Multiple primary key defined")
}
/// 1075 ER_WRONG_AUTO_KEY.
pub fn wrong_auto_key() -> SqlError {
    SqlError::new(
        1075,
        "42000",
        "Incorrect table definition; there can be only one auto column and it must be defined as a key",
    )
}
/// 1059 ER_TOO_LONG_IDENT.
pub fn too_long_ident(name: &str) -> SqlError {
    SqlError::new(1059, "42000", format!("Identifier name '{name}' is too long"))
}
/// 1166 ER_WRONG_COLUMN_NAME.
pub fn wrong_column_name(name: &str) -> SqlError {
    SqlError::new(1166, "42000", format!("Incorrect column name '{name}'"))
}
/// 1103 ER_WRONG_TABLE_NAME.
pub fn wrong_table_name(name: &str) -> SqlError {
    SqlError::new(1103, "42000", format!("Incorrect table name '{name}'"))
}
/// 1102 ER_WRONG_DB_NAME.
pub fn wrong_db_name(name: &str) -> SqlError {
    SqlError::new(1102, "42000", format!("Incorrect database name '{name}'"))
}
/// 1074 ER_TOO_BIG_FIELDLENGTH.
pub fn too_big_field_length(col: &str, max: u32) -> SqlError {
    SqlError::new(
        1074,
        "42000",
        format!("Column length too big for column '{col}' (max = {max}); use BLOB or TEXT instead"),
    )
}
/// 1118 ER_TOO_BIG_ROWSIZE.
pub fn too_big_rowsize() -> SqlError {
    SqlError::new(
        1118,
        "42000",
        "Row size too large. The maximum row size for the used table type, not counting BLOBs, is 65535. \
         This includes storage overhead, check the manual. You have to change some columns to TEXT or BLOBs",
    )
}
/// 1503 ER_UNIQUE_KEY_NEED_ALL_FIELDS_IN_PF.
pub fn unique_needs_partition_fields(key: &str) -> SqlError {
    SqlError::new(1503, "HY000", format!("A {key} must include all columns in the table's partitioning function"))
}
/// 1064 with MySQL's "near" wording.
pub fn parse_error_near(near: &str) -> SqlError {
    SqlError::parse(format!(
        "You have an error in your SQL syntax; check the manual that corresponds to your NorrDB server version for the right syntax to use near '{near}' at line 1"
    ))
}
/// 1072 ER_KEY_COLUMN_DOES_NOT_EXITS.
pub fn key_column_missing(col: &str) -> SqlError {
    SqlError::new(1072, "42000", format!("Key column '{col}' doesn't exist in table"))
}
/// 1091 ER_CANT_DROP_FIELD_OR_KEY.
pub fn cant_drop_key(name: &str) -> SqlError {
    SqlError::new(1091, "42000", format!("Can't DROP '{name}'; check that column/key exists"))
}
/// 1067 ER_INVALID_DEFAULT.
pub fn invalid_default(col: &str) -> SqlError {
    SqlError::new(1067, "42000", format!("Invalid default value for '{col}'"))
}
/// 1193 ER_UNKNOWN_SYSTEM_VARIABLE.
pub fn unknown_system_variable(name: &str) -> SqlError {
    SqlError::new(1193, "HY000", format!("Unknown system variable '{name}'"))
}
/// 1231 ER_WRONG_VALUE_FOR_VAR.
pub fn wrong_value_for_var(name: &str, value: &str) -> SqlError {
    SqlError::new(1231, "42000", format!("Variable '{name}' can't be set to the value of '{value}'"))
}
/// 1232 ER_WRONG_TYPE_FOR_VAR.
pub fn wrong_type_for_var(name: &str) -> SqlError {
    SqlError::new(1232, "42000", format!("Incorrect argument type to variable '{name}'"))
}
/// 1115 ER_UNKNOWN_CHARACTER_SET.
pub fn unknown_charset(name: &str) -> SqlError {
    SqlError::new(1115, "42000", format!("Unknown character set: '{name}'"))
}
/// 1273 ER_UNKNOWN_COLLATION.
pub fn unknown_collation(name: &str) -> SqlError {
    SqlError::new(1273, "HY000", format!("Unknown collation: '{name}'"))
}
/// 1253 ER_COLLATION_CHARSET_MISMATCH.
pub fn collation_mismatch(coll: &str, cs: &str) -> SqlError {
    SqlError::new(1253, "42000", format!("COLLATION '{coll}' is not valid for CHARACTER SET '{cs}'"))
}

/// A statement or transaction that changes more rows than one transaction
/// may (the data nodes' max_ops_per_txn): MySQL's 1206 (InnoDB's "lock table
/// full", the same situation), saying what to do. `rows`: the statement's
/// count when known before it changed anything; `limit`: the SQL node's
/// `--max-rows-per-transaction` (0: the data node refused, limit unknown here).
pub fn too_many_rows(rows: Option<u64>, limit: u64) -> SqlError {
    let what = match (rows, limit) {
        (Some(n), l) => format!(
            "The statement would change {n} rows in one transaction, more than the {l} a transaction may change"
        ),
        (None, _) => "The transaction changes more rows than the data nodes allow in one transaction (max_ops_per_txn)"
            .to_string(),
    };
    SqlError::new(
        1206,
        "HY000",
        format!(
            "{what}; nothing was changed by this statement. Change the rows in batches (e.g. repeat DELETE ... LIMIT 100000 \
             until it affects no rows, or UPDATE ... WHERE on ranges of the key), or empty a whole table with TRUNCATE TABLE"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_the_common_node_errors() {
        let e = from_client(
            ClientError::Node(NodeError::new(ErrorCode::DuplicateKey)),
            &ErrCtx { table: "t1".into(), key_value: Some("5".into()), ..Default::default() },
        );
        assert_eq!((e.code, e.sqlstate), (1062, "23000"));
        assert_eq!(e.message, "Duplicate entry '5' for key 't1.PRIMARY'");
        let e = from_client_plain(ClientError::Node(NodeError::new(ErrorCode::LockWaitTimeout)));
        assert_eq!((e.code, e.sqlstate), (1205, "HY000"));
        let e = from_client_plain(ClientError::Node(NodeError::new(ErrorCode::LockNoWait)));
        assert_eq!((e.code, e.sqlstate), (3572, "HY000"));
        assert_eq!(e.message, "Statement aborted because lock(s) could not be acquired immediately and NOWAIT is set.");
        let e = from_client(ClientError::Node(NodeError::new(ErrorCode::NoSuchTable)), &ErrCtx::table("d", "t"));
        assert_eq!((e.code, e.message.as_str()), (1146, "Table 'd.t' doesn't exist"));
        assert_eq!(from_client_plain(ErrorCode::TableFull.into()).code, 1114);
        assert_eq!(from_client_plain(ErrorCode::NullInNotNullColumn.into()).code, 1048);
        assert_eq!(from_client_plain(ErrorCode::ValueOutOfRange.into()).code, 1264);
        assert_eq!(from_client_plain(ErrorCode::ValueTooLarge.into()).code, 1406);
        assert_eq!(from_client_plain(ErrorCode::WrongValueType.into()).code, 1366);
        // No data node connected: temporary (the client reconnects by itself).
        let e = from_client_plain(ClientError::NotConnected("node 1 down".into()));
        assert_eq!((e.code, e.sqlstate), (1297, "HY000"));
        assert!(e.message.starts_with("Got temporary error 4009 "), "{}", e.message);
        assert!(e.message.contains("node 1 down"), "{}", e.message);
        assert_eq!(from_client_plain(ErrorCode::NotConnected.into()).code, 1297);
        assert_eq!(from_client_plain(ErrorCode::TxnNodeFailure.into()).code, 1297);
        // Node failures: temporary, as MySQL Cluster reports them (1297).
        let e = from_client_plain(ErrorCode::NodeFailure.into());
        assert_eq!((e.code, e.sqlstate), (1297, "HY000"));
        assert_eq!(e.message, "Got temporary error 4010 'Node failure caused abort of transaction' from NDBCLUSTER");
        assert_eq!(from_client_plain(ErrorCode::AbortedAfterNodeFailure.into()).code, 1297);
        // A commit of unknown outcome is not temporary: 1296, with NDB's number.
        let e = from_client_plain(NodeError::with(ErrorCode::OutcomeUnknown, "node 2 failed").into());
        assert_eq!((e.code, e.sqlstate), (1296, "HY000"));
        assert!(e.message.starts_with("Got error 4013 "), "{}", e.message);
        assert!(e.message.contains("node 2 failed"), "{}", e.message);
        // every code maps to something with a 5-character SQLSTATE
        for &c in ErrorCode::ALL {
            let e = from_client_plain(c.into());
            assert_eq!(e.sqlstate.len(), 5, "{c:?}");
        }
    }
}
