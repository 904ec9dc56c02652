//! Types shared by the protocol layer (`protocol`, `server`) and the engine
//! (`engine`): result sets with MySQL column metadata, OK results, errors with
//! MySQL error numbers and SQLSTATEs, warnings, and the per-connection session.

use norr_signals::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// MySQL protocol field types (`enum_field_types`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FieldType {
    Tiny = 0x01,
    Short = 0x02,
    Long = 0x03,
    Float = 0x04,
    Double = 0x05,
    Null = 0x06,
    Timestamp = 0x07,
    LongLong = 0x08,
    Int24 = 0x09,
    Date = 0x0a,
    Time = 0x0b,
    DateTime = 0x0c,
    Year = 0x0d,
    VarChar = 0x0f,
    Bit = 0x10,
    Json = 0xf5,
    NewDecimal = 0xf6,
    TinyBlob = 0xf9,
    MediumBlob = 0xfa,
    LongBlob = 0xfb,
    Blob = 0xfc,
    VarString = 0xfd,
    String = 0xfe,
}

/// Column definition flags (`*_FLAG` in mysql_com.h).
pub mod column_flags {
    pub const NOT_NULL: u16 = 1;
    pub const PRI_KEY: u16 = 2;
    pub const UNIQUE_KEY: u16 = 4;
    pub const MULTIPLE_KEY: u16 = 8;
    pub const BLOB: u16 = 16;
    pub const UNSIGNED: u16 = 32;
    pub const BINARY: u16 = 128;
    pub const ENUM: u16 = 256;
    pub const AUTO_INCREMENT: u16 = 512;
    pub const TIMESTAMP: u16 = 1024;
    pub const SET: u16 = 2048;
    pub const NO_DEFAULT_VALUE: u16 = 4096;
    pub const NUM: u16 = 32768;
}

/// Character set / collation ids used in column metadata.
pub mod charset {
    /// utf8mb4_0900_ai_ci: our case-insensitive default.
    pub const UTF8MB4_CI: u16 = 255;
    /// utf8mb4_bin.
    pub const UTF8MB4_BIN: u16 = 46;
    /// binary (numbers, dates, BINARY/VARBINARY/BLOB).
    pub const BINARY: u16 = 63;
}

/// One result-set column as the client sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnMeta {
    pub schema: String,
    pub table: String,
    pub org_table: String,
    pub name: String,
    pub org_name: String,
    pub field_type: FieldType,
    /// Display length in bytes as MySQL reports it (e.g. VARCHAR(10) utf8mb4 -> 40).
    pub column_length: u32,
    pub decimals: u8,
    pub flags: u16,
    pub charset: u16,
}

impl ColumnMeta {
    /// An expression column (no table), e.g. `SELECT 1+1`.
    pub fn expr(name: &str, field_type: FieldType) -> ColumnMeta {
        let charset = match field_type {
            FieldType::VarChar | FieldType::VarString | FieldType::String => charset::UTF8MB4_CI,
            _ => charset::BINARY,
        };
        ColumnMeta {
            schema: String::new(),
            table: String::new(),
            org_table: String::new(),
            name: name.to_string(),
            org_name: String::new(),
            field_type,
            column_length: 0,
            decimals: 0,
            flags: 0,
            charset,
        }
    }
}

/// What a statement returns. Values in `rows` are rendered by the protocol layer
/// according to each column's `field_type` (text or binary protocol):
/// Int/UInt -> integer, Float/Double -> MySQL float formatting, Decimal -> with
/// its scale, Bytes -> as is, Date/DateTime/Time -> 'YYYY-MM-DD', 'YYYY-MM-DD
/// hh:mm:ss[.ffffff]' (fraction only if `decimals` > 0), '[-]hh:mm:ss'.
/// `columns` is shared: a prepared statement hands out its plan's list on
/// every execute instead of a copy (a copy cost ~600 instructions per point
/// select), and the protocol layer recognises the list it last sent by pointer.
/// `Streamed`: a result set whose columns and `rows` rows went to the client
/// while the statement ran (`engine::stream`); the protocol layer ends it.
#[derive(Debug, Clone, PartialEq)]
pub enum QueryOutput {
    Rows { columns: Arc<[ColumnMeta]>, rows: Vec<Vec<Value>> },
    Ok { affected_rows: u64, last_insert_id: u64, info: String },
    Streamed { rows: u64 },
}

impl QueryOutput {
    pub fn ok(affected_rows: u64) -> QueryOutput {
        QueryOutput::Ok { affected_rows, last_insert_id: 0, info: String::new() }
    }
}

/// An error as the client sees it: MySQL error number, SQLSTATE, message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ERROR {code} ({sqlstate}): {message}")]
pub struct SqlError {
    pub code: u16,
    pub sqlstate: &'static str,
    pub message: String,
}

impl SqlError {
    pub fn new(code: u16, sqlstate: &'static str, message: impl Into<String>) -> SqlError {
        SqlError { code, sqlstate, message: message.into() }
    }
    /// 1064 ER_PARSE_ERROR.
    pub fn parse(message: impl Into<String>) -> SqlError {
        SqlError::new(1064, "42000", message)
    }
    /// 1235 ER_NOT_SUPPORTED_YET.
    pub fn unsupported(what: impl Into<String>) -> SqlError {
        SqlError::new(1235, "42000", format!("This version of NorrDB doesn't yet support '{}'", what.into()))
    }
    /// 1105 ER_UNKNOWN_ERROR.
    pub fn internal(message: impl Into<String>) -> SqlError {
        SqlError::new(1105, "HY000", message)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarningLevel {
    Note,
    Warning,
    Error,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub level: WarningLevel,
    pub code: u16,
    pub message: String,
}

/// The account a session logged in as, and its active roles.
#[derive(Debug, Clone)]
pub struct SessionAccount {
    /// The user name the client gave.
    pub user: String,
    /// The host pattern of the account it matched (CURRENT_USER()).
    pub host: String,
    /// The client's address (`localhost` for the Unix socket).
    pub peer: String,
    /// SET ROLE's roles; None: the account's default roles (looked up when
    /// a statement needs them, so a change of defaults shows at once).
    pub active_roles: Option<Vec<(String, String)>>,
    /// PASSWORD EXPIRE: only ALTER USER / SET PASSWORD may run (1820).
    pub password_expired: bool,
    /// USER() and CURRENT_USER(), made once at login (a statement's
    /// evaluation context takes a reference, not copies of the strings).
    pub names: Arc<LoginNames>,
}

/// What USER() / SESSION_USER() / SYSTEM_USER() and CURRENT_USER() return
/// for a session.
#[derive(Debug, PartialEq, Eq)]
pub struct LoginNames {
    /// `user@peer`: the name the client gave and where it came from (the
    /// IP address, as MySQL with skip_name_resolve; `localhost` for the
    /// Unix socket).
    pub user: String,
    /// `user@host-pattern` of the account the login matched.
    pub current_user: String,
}

impl LoginNames {
    pub fn new(user: &str, account_host: &str, peer: &str) -> LoginNames {
        LoginNames { user: format!("{user}@{peer}"), current_user: format!("{user}@{account_host}") }
    }
}

impl SessionAccount {
    pub fn me(&self) -> (String, String) {
        (self.user.clone(), self.host.clone())
    }
}

/// A TLS connection's cipher suite and protocol version (SHOW STATUS LIKE
/// 'Ssl_%').
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsInfo {
    /// The cipher suite as OpenSSL (so MySQL) names it.
    pub cipher: String,
    /// "TLSv1.2" / "TLSv1.3".
    pub version: String,
}

/// Per-connection state. Created by `Engine::new_session`, owned by the
/// connection task, passed `&mut` to every engine call.
pub struct Session {
    pub connection_id: u32,
    pub user: String,
    /// The default database (USE). Shared: every statement's evaluation
    /// context takes it, and a reference count is cheaper than a copy.
    pub current_db: Option<Arc<str>>,
    /// @@autocommit.
    pub autocommit: bool,
    /// True between BEGIN/START TRANSACTION (or the first statement with
    /// autocommit off) and COMMIT/ROLLBACK.
    pub in_transaction: bool,
    /// The open native transaction, if any statement of the current
    /// transaction has touched the data node yet.
    pub txn: Option<norr_client::Transaction>,
    /// Savepoints of `txn` (SAVEPOINT name), oldest first, names unique
    /// (compared case-insensitively, as MySQL); emptied whenever `txn` ends.
    pub savepoints: Vec<(String, norr_client::Savepoint)>,
    /// Session system variables, lower-case names without @@.
    pub vars: BTreeMap<String, Value>,
    /// @@time_zone as statements apply it, parsed once when it is set
    /// (`vars::set_system_var`, `Engine::new_session`); None is UTC.
    pub time_zone: crate::engine::functions::tz::SessionZone,
    /// User variables (@name), lower-case names.
    pub user_vars: BTreeMap<String, Value>,
    pub last_insert_id: u64,
    /// GCI of the session's last commit that wrote something
    /// (`@@norr_last_commit_gci`; 0 before the first): the commit is on
    /// disk once the cluster's last complete GCI reaches it.
    pub last_commit_gci: u64,
    /// `@@norr_commit_wait = 'disk'`: commits wait until their GCI is on
    /// disk. Kept by `vars::set_system_var` and `vars::apply_globals` so
    /// that a commit does not look the variable up.
    pub commit_wait_disk: bool,
    /// The session's row-lock wait (`innodb_lock_wait_timeout` once SET for
    /// the session or globally; None: the data nodes' own time-out). Kept by
    /// `vars::set_system_var` and `vars::apply_globals`; read by
    /// `txn_control::row_lock_wait`.
    pub row_lock_wait: Option<std::time::Duration>,
    /// Warnings of the last statement (SHOW WARNINGS).
    pub warnings: Vec<Warning>,
    /// Client asked for "found rows" instead of "changed rows" (CLIENT_FOUND_ROWS).
    pub client_found_rows: bool,
    /// Client can take several statements in one COM_QUERY.
    pub multi_statements: bool,
    /// LOCK TABLES / FLUSH TABLES WITH READ LOCK held by this session.
    pub table_locks: crate::engine::table_locks::Held,
    /// The open transaction ran a statement that changes rows (its COMMIT
    /// waits while another session holds the global read lock).
    pub txn_wrote: bool,
    /// This session as SHOW PROCESSLIST and KILL see it (registered with the
    /// engine by `Engine::new_session`).
    pub entry: Arc<crate::session_registry::SessionEntry>,
    /// Statements prepared by name in SQL text (PREPARE), lower-case names.
    pub sql_prepared: std::collections::HashMap<String, Arc<crate::engine::Prepared>>,
    /// Parses of text INSERTs kept for their next run (`engine::text_cache`).
    pub text_plans: crate::engine::text_cache::TextCache,
    /// What FOUND_ROWS() answers (see `found_rows`).
    pub found_rows: u64,
    /// What ROW_COUNT() answers.
    pub row_count: i64,
    /// Set by a SELECT SQL_CALC_FOUND_ROWS for `found_rows::record`.
    pub calc_found_rows: Option<u64>,
    /// CREATE TEMPORARY TABLE's tables of this session (`temp_tables`).
    pub temp: crate::engine::temp_tables::TempTables,
    /// A LOAD DATA LOCAL INFILE waiting for (or reading) the client's file.
    pub load_job: Option<Box<crate::engine::load_data::LoadJob>>,
    /// Most rows one DELETE / UPDATE may change (`EngineConfig::max_rows_per_txn`).
    pub max_rows_per_txn: u64,
    /// Most bytes of rows one statement may hold (`engine::memory`; 0: no limit).
    pub max_statement_memory: u64,
    /// Where a top-level SELECT may stream its rows (`engine::stream`): set
    /// by the protocol layer, None for statements whose results are built
    /// whole (and while a query of several statements runs).
    pub result_sink: Option<crate::engine::stream::ResultSink>,
    /// The `/*+ MAX_EXECUTION_TIME(n) */` hint of the statement about to
    /// run (milliseconds; `engine::exec_time`), taken by it.
    pub exec_time_hint: Option<u64>,
    /// The account the client logged in as (set by the protocol layer);
    /// None for sessions made in-process (the engine's own statements,
    /// embedding code and tests), which are not privilege-checked.
    pub account: Option<SessionAccount>,
    /// The open explicit transaction's access mode (START TRANSACTION READ
    /// ONLY: Some(true), READ WRITE: Some(false)); None: the session's
    /// @@transaction_read_only. Cleared when the transaction ends.
    pub txn_read_only: Option<bool>,
    /// SET TRANSACTION READ ONLY | READ WRITE without SESSION: the mode of
    /// the next transaction only, as MySQL.
    pub next_txn_read_only: Option<bool>,
    /// `txn_read_only` is the running autocommitted statement's mode (it
    /// took `next_txn_read_only`): dropped when the statement ends.
    pub txn_read_only_stmt: bool,
    /// The connection's TLS, if the client asked for it.
    pub tls: Option<TlsInfo>,
}

impl Session {
    pub fn new(connection_id: u32, user: &str) -> Session {
        Session {
            connection_id,
            user: user.to_string(),
            current_db: None,
            autocommit: true,
            in_transaction: false,
            txn: None,
            savepoints: Vec::new(),
            vars: BTreeMap::new(),
            time_zone: None,
            user_vars: BTreeMap::new(),
            last_insert_id: 0,
            last_commit_gci: 0,
            commit_wait_disk: false,
            row_lock_wait: None,
            warnings: Vec::new(),
            client_found_rows: false,
            multi_statements: false,
            table_locks: Default::default(),
            txn_wrote: false,
            entry: crate::session_registry::SessionEntry::new(connection_id, user),
            sql_prepared: std::collections::HashMap::new(),
            text_plans: Default::default(),
            found_rows: 0,
            row_count: -1,
            calc_found_rows: None,
            temp: Default::default(),
            load_job: None,
            max_rows_per_txn: crate::engine::DEFAULT_MAX_ROWS_PER_TXN,
            max_statement_memory: crate::engine::memory::DEFAULT_MAX_STATEMENT_MEMORY_BYTES,
            result_sink: None,
            exec_time_hint: None,
            account: None,
            txn_read_only: None,
            next_txn_read_only: None,
            txn_read_only_stmt: false,
            tls: None,
        }
    }
}
