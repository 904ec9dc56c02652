//! System variables (`@@x`, SET, SHOW VARIABLES) and user variables (`@x`).
//! Owner: catalog engineer.
//!
//! For the expression evaluator: `get_system_var(session, "version", false)`
//! returns the value of `@@version` / `@@session.version`; `global = true` for
//! `@@global.x`. Names are case-insensitive, without `@@`. `None` means unknown
//! variable (error 1193 `error_map::unknown_system_variable`). User variables
//! are in `session.user_vars` (lower-case names, without `@`); unknown ones
//! are NULL.

use crate::engine::error_map;
use crate::types::{Session, SqlError};
use norr_signals::Value;
use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Global,
    Session,
    Both,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Bool,
    Int,
    Str,
}

pub struct VarDef {
    pub name: &'static str,
    pub scope: Scope,
    pub kind: Kind,
    pub default: &'static str,
    pub read_only: bool,
}

const fn v(name: &'static str, scope: Scope, kind: Kind, default: &'static str) -> VarDef {
    VarDef { name, scope, kind, default, read_only: false }
}
const fn ro(name: &'static str, scope: Scope, kind: Kind, default: &'static str) -> VarDef {
    VarDef { name, scope, kind, default, read_only: true }
}

use Kind::*;
use Scope::*;

/// MySQL 8.0's default less NO_ENGINE_SUBSTITUTION: ndbcluster is the only
/// engine here, so with it every `ENGINE=InnoDB` of an application or dump
/// would fail (1286). Without it such a table is made ndbcluster with
/// warnings 1286 and 1266 (`ddl::check_engine`); a session that wants the
/// refusal sets the mode.
pub const DEFAULT_SQL_MODE: &str =
    "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO";

/// Every variable we know, sorted by name. Values of `version`, `port`,
/// `hostname`, `max_allowed_packet` come from the engine config (`init_globals`).
pub static VARS: &[VarDef] = &[
    v("auto_increment_increment", Both, Int, "1"),
    v("auto_increment_offset", Both, Int, "1"),
    v("autocommit", Both, Bool, "1"),
    ro("basedir", Global, Str, "/usr/"),
    v("big_tables", Both, Bool, "0"),
    ro("binlog_format", Both, Str, "ROW"),
    v("bulk_insert_buffer_size", Both, Int, "8388608"),
    v("character_set_client", Both, Str, "utf8mb4"),
    v("character_set_connection", Both, Str, "utf8mb4"),
    v("character_set_database", Both, Str, "utf8mb4"),
    ro("character_set_filesystem", Both, Str, "binary"),
    v("character_set_results", Both, Str, "utf8mb4"),
    v("character_set_server", Both, Str, "utf8mb4"),
    ro("character_set_system", Global, Str, "utf8mb3"),
    ro("character_sets_dir", Global, Str, "/usr/share/mysql/charsets/"),
    v("collation_connection", Both, Str, "utf8mb4_0900_ai_ci"),
    v("collation_database", Both, Str, "utf8mb4_0900_ai_ci"),
    v("collation_server", Both, Str, "utf8mb4_0900_ai_ci"),
    v("completion_type", Both, Str, "NO_CHAIN"),
    v("connect_timeout", Global, Int, "10"),
    v("cte_max_recursion_depth", Both, Int, "1000"),
    // Set from the engine config: empty when nothing is kept on disk here.
    ro("datadir", Global, Str, ""),
    v("default_storage_engine", Both, Str, "ndbcluster"),
    v("default_tmp_storage_engine", Both, Str, "ndbcluster"),
    v("default_week_format", Both, Int, "0"),
    v("div_precision_increment", Both, Int, "4"),
    ro("error_count", Session, Int, "0"),
    v("event_scheduler", Global, Str, "OFF"),
    v("explicit_defaults_for_timestamp", Both, Bool, "1"),
    v("foreign_key_checks", Both, Bool, "1"),
    v("general_log", Global, Bool, "0"),
    v("group_concat_max_len", Both, Int, "1024"),
    ro("gtid_mode", Global, Str, "OFF"),
    ro("have_openssl", Global, Str, "DISABLED"),
    ro("have_query_cache", Global, Str, "NO"),
    ro("have_ssl", Global, Str, "DISABLED"),
    ro("hostname", Global, Str, "localhost"),
    v("identity", Session, Int, "0"),
    v("information_schema_stats_expiry", Both, Int, "86400"),
    v("init_connect", Global, Str, ""),
    v("innodb_lock_wait_timeout", Both, Int, "50"),
    v("interactive_timeout", Both, Int, "28800"),
    v("last_insert_id", Session, Int, "0"),
    ro("license", Global, Str, "Apache-2.0"),
    // LOAD DATA LOCAL INFILE (the client must allow it too). On by default,
    // as MariaDB: the risk it guards against is the client's.
    v("local_infile", Global, Bool, "1"),
    v("lock_wait_timeout", Both, Int, "31536000"),
    ro("log_bin", Global, Bool, "0"),
    v("long_query_time", Both, Str, "10.000000"),
    ro("lower_case_file_system", Global, Bool, "0"),
    ro("lower_case_table_names", Global, Int, "0"),
    v("max_allowed_packet", Both, Int, "67108864"),
    v("max_connections", Global, Int, "151"),
    v("max_execution_time", Both, Int, "0"),
    v("max_heap_table_size", Both, Int, "16777216"),
    v("max_join_size", Both, Int, "18446744073709551615"),
    v("max_sort_length", Both, Int, "1024"),
    v("max_user_connections", Both, Int, "0"),
    v("ndb_autoincrement_prefetch_sz", Both, Int, "512"),
    v("net_buffer_length", Both, Int, "16384"),
    v("net_read_timeout", Both, Int, "30"),
    v("net_write_timeout", Both, Int, "60"),
    // When COMMIT (and an autocommitted statement) returns: 'network' once
    // every replica holds the change in memory (NDB's default); 'disk' once
    // its global checkpoint is on disk in the cluster (bounded by the data
    // nodes' commit_disk_timeout_ms, then error 1296 / 4279: committed,
    // disk durability unconfirmed).
    v("norr_commit_wait", Both, Str, "network"),
    // GCI of the session's last commit that wrote something.
    ro("norr_last_commit_gci", Session, Int, "0"),
    // Text INSERT ... VALUES shapes keep their parse per session
    // (`text_cache`); OFF parses every statement.
    v("norr_text_plan_cache", Both, Bool, "1"),
    ro("performance_schema", Global, Bool, "0"),
    ro("port", Global, Int, "3306"),
    ro("protocol_version", Global, Int, "10"),
    v("query_cache_size", Global, Int, "0"),
    v("query_cache_type", Both, Str, "OFF"),
    v("read_only", Global, Bool, "0"),
    v("require_secure_transport", Global, Bool, "0"),
    ro("server_id", Global, Int, "1"),
    v("session_track_gtids", Both, Str, "OFF"),
    v("session_track_schema", Both, Bool, "1"),
    v("session_track_state_change", Both, Bool, "0"),
    v(
        "session_track_system_variables",
        Both,
        Str,
        "time_zone,autocommit,character_set_client,character_set_results,character_set_connection",
    ),
    v("session_track_transaction_info", Both, Str, "OFF"),
    // Acted on by engine::slow_log.
    v("slow_query_log", Global, Bool, "0"),
    v("slow_query_log_file", Global, Str, ""),
    ro("socket", Global, Str, ""),
    v("sql_auto_is_null", Both, Bool, "0"),
    v("sql_big_selects", Both, Bool, "1"),
    v("sql_log_bin", Session, Bool, "1"),
    v("sql_mode", Both, Str, DEFAULT_SQL_MODE),
    v("sql_notes", Both, Bool, "1"),
    v("sql_quote_show_create", Both, Bool, "1"),
    v("sql_require_primary_key", Both, Bool, "0"),
    v("sql_safe_updates", Both, Bool, "0"),
    v("sql_select_limit", Both, Int, "18446744073709551615"),
    v("sql_warnings", Both, Bool, "0"),
    ro("ssl_ca", Global, Str, ""),
    ro("ssl_cert", Global, Str, ""),
    ro("ssl_key", Global, Str, ""),
    v("super_read_only", Global, Bool, "0"),
    ro("system_time_zone", Global, Str, "UTC"),
    v("time_zone", Both, Str, "SYSTEM"),
    v("timestamp", Session, Str, "0"),
    ro("tmpdir", Global, Str, "/tmp"),
    v("transaction_alloc_block_size", Both, Int, "8192"),
    v("transaction_isolation", Both, Str, "READ-COMMITTED"),
    v("transaction_prealloc_size", Both, Int, "4096"),
    v("transaction_read_only", Both, Bool, "0"),
    v("tx_isolation", Both, Str, "READ-COMMITTED"),
    v("tx_read_only", Both, Bool, "0"),
    v("unique_checks", Both, Bool, "1"),
    v("updatable_views_with_limit", Both, Str, "YES"),
    ro("version", Global, Str, "8.0.36-NorrDB-0.1"),
    ro("version_comment", Global, Str, "NorrDB (MySQL-compatible, NDB-style in-memory cluster)"),
    ro("version_compile_machine", Global, Str, "x86_64"),
    ro("version_compile_os", Global, Str, "Linux"),
    ro("version_compile_zlib", Global, Str, "1.2.13"),
    v("wait_timeout", Both, Int, "28800"),
    ro("warning_count", Session, Int, "0"),
];

pub fn var_def(name: &str) -> Option<&'static VarDef> {
    let n = name.to_ascii_lowercase();
    VARS.iter().find(|d| d.name == n)
}

fn globals() -> &'static Mutex<BTreeMap<String, Value>> {
    static G: OnceLock<Mutex<BTreeMap<String, Value>>> = OnceLock::new();
    G.get_or_init(|| Mutex::new(BTreeMap::new()))
}

/// Set process-wide global values (engine start: version, port, ...).
pub fn init_globals(values: &[(&str, Value)]) {
    let mut g = globals().lock().expect("lock");
    for (k, v) in values {
        g.insert(k.to_string(), v.clone());
    }
}

fn typed_default(d: &VarDef) -> Value {
    match d.kind {
        Bool | Int => d
            .default
            .parse::<i64>()
            .map(Value::Int)
            .or_else(|_| d.default.parse::<u64>().map(Value::UInt))
            .unwrap_or_else(|_| Value::str(d.default)),
        Str => Value::str(d.default),
    }
}

/// Global value of a variable.
pub fn global_value(name: &str) -> Option<Value> {
    let d = var_def(name)?;
    if let Some(v) = globals().lock().expect("lock").get(d.name) {
        return Some(v.clone());
    }
    Some(typed_default(d))
}

/// `@@name` (session value, falling back to the global) or `@@global.name`.
pub fn get_system_var(s: &Session, name: &str, global: bool) -> Option<Value> {
    let Some(d) = var_def(name) else { return crate::engine::found_rows::pseudo_value(s, name) };
    if global {
        if d.scope == Session {
            return None;
        }
        return global_value(d.name);
    }
    match d.name {
        "autocommit" => return Some(Value::Int(s.autocommit as i64)),
        "last_insert_id" | "identity" => return Some(Value::UInt(s.last_insert_id)),
        "norr_last_commit_gci" => return Some(Value::UInt(s.last_commit_gci)),
        "warning_count" => {
            return Some(Value::UInt(
                s.warnings.iter().filter(|w| w.level != crate::types::WarningLevel::Error).count() as u64,
            ))
        }
        "error_count" => {
            return Some(Value::UInt(
                s.warnings.iter().filter(|w| w.level == crate::types::WarningLevel::Error).count() as u64,
            ))
        }
        "character_set_database" | "collation_database" => {
            if let Some(v) = s.vars.get(d.name) {
                return Some(v.clone());
            }
        }
        _ => {}
    }
    if let Some(v) = s.vars.get(d.name) {
        return Some(v.clone());
    }
    global_value(d.name)
}

/// True if the session's commits wait for disk (`norr_commit_wait = 'disk'`).
pub fn commit_waits_for_disk(s: &Session) -> bool {
    s.commit_wait_disk
}

/// A `norr_commit_wait` value (normalised) that asks commits to wait for disk.
fn is_disk(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::Bytes(b)) if b.as_slice() == b"disk")
}

/// A new session (or one reset by COM_RESET_CONNECTION) starts from the
/// global values, as in MySQL; `global` gives them (`global_value`).
pub fn apply_globals(s: &mut Session, global: impl Fn(&str) -> Option<Value>) {
    for d in VARS.iter().filter(|d| d.scope == Both && !d.read_only) {
        if let Some(v) = global(d.name) {
            if d.name != "autocommit" {
                s.vars.insert(d.name.to_string(), v);
            }
        }
    }
    if let Some(Value::Int(a)) = global("autocommit") {
        s.autocommit = a != 0;
    }
    if let Some(Value::Bytes(z)) = s.vars.get("time_zone") {
        s.time_zone = crate::engine::functions::tz::session_zone(z);
    }
    s.commit_wait_disk = is_disk(s.vars.get("norr_commit_wait"));
    // Only a value SET GLOBAL gave: the compiled-in 50 s is MySQL's, not the
    // data nodes' (see `txn_control::row_lock_wait`).
    s.row_lock_wait = explicit_global("innodb_lock_wait_timeout").and_then(|v| lock_wait_secs(&v));
}

/// A global value SET GLOBAL (or the engine's start) gave, without the
/// compiled-in default.
fn explicit_global(name: &str) -> Option<Value> {
    globals().lock().expect("lock").get(name).cloned()
}

/// `innodb_lock_wait_timeout`'s value as a duration (at least 1 s).
fn lock_wait_secs(v: &Value) -> Option<std::time::Duration> {
    let secs = match v {
        Value::Int(n) => (*n).max(1) as u64,
        Value::UInt(n) => (*n).max(1),
        _ => return None,
    };
    Some(std::time::Duration::from_secs(secs))
}

/// Value shown by SHOW VARIABLES (booleans as ON/OFF).
pub fn show_text(name: &str, v: &Value) -> String {
    let is_bool = var_def(name).is_some_and(|d| d.kind == Bool);
    match v {
        Value::Null => String::new(),
        Value::Int(i) if is_bool => (if *i != 0 { "ON" } else { "OFF" }).to_string(),
        other => crate::engine::catalog::value_text(other),
    }
}

fn truthy(name: &str, v: &Value) -> Result<bool, SqlError> {
    let bad = || error_map::wrong_value_for_var(name, &crate::engine::catalog::value_text(v));
    match v {
        Value::Int(0) | Value::UInt(0) => Ok(false),
        Value::Int(1) | Value::UInt(1) => Ok(true),
        Value::Bytes(b) => match String::from_utf8_lossy(b).to_ascii_uppercase().as_str() {
            "ON" | "TRUE" | "1" => Ok(true),
            "OFF" | "FALSE" | "0" => Ok(false),
            _ => Err(bad()),
        },
        Value::Decimal(_) | Value::Double(_) | Value::Float(_) => Err(error_map::wrong_type_for_var(name)),
        _ => Err(bad()),
    }
}

/// sql_mode flags in MySQL's bit order (the order @@sql_mode prints them in).
const SQL_MODES: &[&str] = &[
    "REAL_AS_FLOAT",
    "PIPES_AS_CONCAT",
    "ANSI_QUOTES",
    "IGNORE_SPACE",
    "ONLY_FULL_GROUP_BY",
    "NO_UNSIGNED_SUBTRACTION",
    "NO_DIR_IN_CREATE",
    "ANSI",
    "NO_AUTO_VALUE_ON_ZERO",
    "NO_BACKSLASH_ESCAPES",
    "STRICT_TRANS_TABLES",
    "STRICT_ALL_TABLES",
    "NO_ZERO_IN_DATE",
    "NO_ZERO_DATE",
    "ALLOW_INVALID_DATES",
    "ERROR_FOR_DIVISION_BY_ZERO",
    "TRADITIONAL",
    "HIGH_NOT_PRECEDENCE",
    "NO_ENGINE_SUBSTITUTION",
    "PAD_CHAR_TO_FULL_LENGTH",
    "TIME_TRUNCATE_FRACTIONAL",
];

fn norm_sql_mode(v: &str) -> Result<String, SqlError> {
    let mut out: Vec<&str> = Vec::new();
    for part in v.split(',').map(|p| p.trim()).filter(|p| !p.is_empty()) {
        let up = part.to_ascii_uppercase();
        let expanded: &[&str] = match up.as_str() {
            "TRADITIONAL" => &[
                "TRADITIONAL",
                "STRICT_TRANS_TABLES",
                "STRICT_ALL_TABLES",
                "NO_ZERO_IN_DATE",
                "NO_ZERO_DATE",
                "ERROR_FOR_DIVISION_BY_ZERO",
                "NO_ENGINE_SUBSTITUTION",
            ],
            "ANSI" => {
                &["ANSI", "REAL_AS_FLOAT", "PIPES_AS_CONCAT", "ANSI_QUOTES", "IGNORE_SPACE", "ONLY_FULL_GROUP_BY"]
            }
            _ => match SQL_MODES.iter().find(|m| **m == up) {
                Some(m) => std::slice::from_ref(m),
                None => return Err(error_map::wrong_value_for_var("sql_mode", part)),
            },
        };
        for m in expanded {
            if !out.contains(m) {
                out.push(m);
            }
        }
    }
    out.sort_by_key(|m| SQL_MODES.iter().position(|x| x == m));
    Ok(out.join(","))
}

pub(crate) fn isolation(v: &str) -> Option<&'static str> {
    match v.to_ascii_uppercase().replace(' ', "-").as_str() {
        "READ-UNCOMMITTED" => Some("READ-UNCOMMITTED"),
        "READ-COMMITTED" => Some("READ-COMMITTED"),
        "REPEATABLE-READ" => Some("REPEATABLE-READ"),
        "SERIALIZABLE" => Some("SERIALIZABLE"),
        _ => None,
    }
}

/// What a SET did that the engine must act on.
#[derive(Debug, PartialEq, Eq)]
pub enum SetEffect {
    None,
    /// autocommit switched on while a transaction was open: commit it.
    CommitNow,
}

/// Variables whose session value is fixed when the connection starts (MySQL's
/// ER_VARIABLE_IS_READONLY for SET SESSION).
const SESSION_READ_ONLY: &[&str] = &["max_allowed_packet"];

/// Bounds of integer variables whose value sqld acts on; MySQL clamps an
/// out-of-range SET to them (with a truncation warning NorrDB does not issue).
pub(crate) fn int_bounds(name: &str) -> Option<(i64, i64)> {
    match name {
        // Enforced for new connections (protocol::conn); 0 would lock every client out.
        "max_connections" => Some((1, 100_000)),
        // Enforced for new connections (protocol::conn), as MySQL: 1 KiB to 1 GiB.
        "max_allowed_packet" => Some((1024, 1 << 30)),
        // Enforced for logins starting now (protocol::conn), as MySQL: 2 s to a year.
        "connect_timeout" => Some((2, 31_536_000)),
        // NDB's bounds: a SQL node keeps at most this many unused values.
        "ndb_autoincrement_prefetch_sz" => Some((1, 65_536)),
        _ => None,
    }
}

fn clamp_int(name: &str, v: Value) -> Value {
    // MySQL keeps max_allowed_packet a multiple of 1 KiB (rounding down).
    let block = if name == "max_allowed_packet" { 1024 } else { 1 };
    match int_bounds(name) {
        Some((lo, hi)) => match v {
            Value::Int(i) => Value::Int(i.clamp(lo, hi) / block * block),
            Value::UInt(u) => Value::Int(i64::try_from(u).unwrap_or(hi).clamp(lo, hi) / block * block),
            other => other,
        },
        None => v,
    }
}

/// Validate and normalise a value for a system variable.
fn normalise(d: &VarDef, v: Value) -> Result<Value, SqlError> {
    let text = |v: &Value| crate::engine::catalog::value_text(v);
    if v.is_null() {
        return match d.name {
            "character_set_results" => Ok(Value::Null),
            _ => Err(error_map::wrong_value_for_var(d.name, "NULL")),
        };
    }
    Ok(match d.kind {
        Bool => Value::Int(truthy(d.name, &v)? as i64),
        Int => clamp_int(
            d.name,
            match v {
                Value::Int(_) | Value::UInt(_) => v,
                Value::Bytes(ref b) => {
                    let s = String::from_utf8_lossy(b).to_string();
                    if s.eq_ignore_ascii_case("default") {
                        return Ok(typed_default(d));
                    }
                    s.trim().parse::<i64>().map(Value::Int).map_err(|_| error_map::wrong_type_for_var(d.name))?
                }
                _ => return Err(error_map::wrong_type_for_var(d.name)),
            },
        ),
        Str => {
            let s = text(&v);
            match d.name {
                "sql_mode" => Value::str(&norm_sql_mode(&s)?),
                "norr_commit_wait" => match s.to_ascii_lowercase().as_str() {
                    w @ ("disk" | "network") => Value::str(w),
                    _ => return Err(error_map::wrong_value_for_var(d.name, &s)),
                },
                "transaction_isolation" | "tx_isolation" => {
                    Value::str(isolation(&s).ok_or_else(|| error_map::wrong_value_for_var(d.name, &s))?)
                }
                "character_set_client" | "character_set_connection" | "character_set_results" => {
                    crate::engine::catalog::connection_charset(&s)?;
                    Value::str(&s.to_ascii_lowercase())
                }
                "character_set_server" | "character_set_database" => {
                    crate::engine::catalog::charset_canonical(&s).ok_or_else(|| error_map::unknown_charset(&s))?;
                    Value::str(&s.to_ascii_lowercase())
                }
                "collation_connection" | "collation_server" | "collation_database" => {
                    crate::engine::catalog::collation_from_name(&s).ok_or_else(|| error_map::unknown_collation(&s))?;
                    if d.name == "collation_connection" {
                        if let Some((cs, _)) = s.split_once('_') {
                            crate::engine::catalog::connection_charset(cs)?;
                        }
                    }
                    Value::str(&s.to_ascii_lowercase())
                }
                "time_zone" => {
                    // SYSTEM, an offset in MySQL's range, or a zone name
                    // (the session keeps it parsed: `Session::time_zone`).
                    if crate::engine::functions::tz::parse_zone(s.as_bytes()).is_none() {
                        return Err(SqlError::new(1298, "HY000", format!("Unknown or incorrect time zone: '{s}'")));
                    }
                    Value::str(&s)
                }
                _ => Value::str(&s),
            }
        }
    })
}

/// SET [GLOBAL|SESSION] name = value. `value` is already evaluated (DEFAULT
/// arrives as the string "DEFAULT").
pub fn set_system_var(s: &mut Session, name: &str, global: bool, value: Value) -> Result<SetEffect, SqlError> {
    let d = var_def(name).ok_or_else(|| error_map::unknown_system_variable(name))?;
    if d.read_only {
        return Err(SqlError::new(1238, "HY000", format!("Variable '{}' is a read only variable", d.name)));
    }
    if global && d.scope == Session {
        return Err(SqlError::new(
            1228,
            "HY000",
            format!("Variable '{}' is a SESSION variable and can't be used with SET GLOBAL", d.name),
        ));
    }
    if !global && SESSION_READ_ONLY.contains(&d.name) {
        return Err(SqlError::new(
            1621,
            "HY000",
            format!("SESSION variable '{}' is read-only. Use SET GLOBAL to assign the value", d.name),
        ));
    }
    if !global && d.scope == Global {
        return Err(SqlError::new(
            1229,
            "HY000",
            format!("Variable '{}' is a GLOBAL variable and should be set with SET GLOBAL", d.name),
        ));
    }
    let is_default = matches!(&value, Value::Bytes(b) if b.eq_ignore_ascii_case(b"DEFAULT"));
    // `SET x = DEFAULT`: the global value (for SET GLOBAL, the compiled-in default).
    let value = if is_default {
        if global {
            typed_default(d)
        } else {
            global_value(d.name).unwrap_or_else(|| typed_default(d))
        }
    } else {
        normalise(d, value)?
    };
    // Values asking for what NorrDB does not do are refused, not stored.
    crate::engine::inert_vars::check(d.name, &value)?;
    crate::engine::slow_log::on_set(d.name, &value, global)?;
    if matches!(d.name, "transaction_isolation" | "tx_isolation") {
        note_isolation(s, &value);
    }
    if global {
        let mut g = globals().lock().expect("lock");
        // The two spellings are one variable (as in the session's values).
        let alias = match d.name {
            "transaction_isolation" => Some("tx_isolation"),
            "tx_isolation" => Some("transaction_isolation"),
            "transaction_read_only" => Some("tx_read_only"),
            "tx_read_only" => Some("transaction_read_only"),
            _ => None,
        };
        for n in std::iter::once(d.name).chain(alias) {
            if is_default {
                // The compiled-in default again, which `global_value` falls
                // back to; no longer a value SET GLOBAL gave (`explicit_global`).
                g.remove(n);
            } else {
                g.insert(n.to_string(), value.clone());
            }
        }
        return Ok(SetEffect::None);
    }
    let mut effect = SetEffect::None;
    match d.name {
        "autocommit" => {
            let on = matches!(value, Value::Int(1));
            if on && !s.autocommit && s.in_transaction {
                effect = SetEffect::CommitNow;
            }
            s.autocommit = on;
            return Ok(effect);
        }
        "last_insert_id" | "identity" => {
            s.last_insert_id = value.as_i64().unwrap_or(0) as u64;
            return Ok(effect);
        }
        "transaction_isolation" | "tx_isolation" => {
            s.vars.insert("transaction_isolation".into(), value.clone());
            s.vars.insert("tx_isolation".into(), value);
            return Ok(effect);
        }
        "transaction_read_only" | "tx_read_only" => {
            s.vars.insert("transaction_read_only".into(), value.clone());
            s.vars.insert("tx_read_only".into(), value);
            return Ok(effect);
        }
        "time_zone" => {
            s.time_zone =
                crate::engine::functions::tz::session_zone(crate::engine::catalog::value_text(&value).as_bytes())
        }
        "norr_commit_wait" => s.commit_wait_disk = is_disk(Some(&value)),
        // `SET SESSION ... = DEFAULT` with no SET GLOBAL before goes back to
        // the data nodes' time-out.
        "innodb_lock_wait_timeout" => {
            s.row_lock_wait =
                if is_default && explicit_global(d.name).is_none() { None } else { lock_wait_secs(&value) }
        }
        _ => {}
    }
    s.vars.insert(d.name.to_string(), value);
    Ok(effect)
}

/// A note that an isolation level other than READ COMMITTED is recorded
/// (for the clients that read it back) but not what transactions get.
fn note_isolation(s: &mut Session, level: &Value) {
    let name = crate::engine::catalog::value_text(level);
    if !name.eq_ignore_ascii_case("READ-COMMITTED") {
        s.warnings.push(crate::types::Warning {
            level: crate::types::WarningLevel::Note,
            code: 1235,
            message: format!("NorrDB runs every transaction at READ-COMMITTED; {name} is recorded but not provided"),
        });
    }
}

/// SET NAMES cs [COLLATE coll] / SET CHARACTER SET cs.
pub fn set_names(s: &mut Session, charset: &str, collation: Option<&str>, character_set: bool) -> Result<(), SqlError> {
    let cs_l = charset.to_ascii_lowercase();
    if cs_l != "default" {
        crate::engine::catalog::connection_charset(charset)?;
    }
    let cs = match cs_l.as_str() {
        "default" => "utf8mb4".to_string(),
        "utf8" => "utf8mb3".to_string(), // MySQL 8 reports utf8 as utf8mb3
        _ => cs_l,
    };
    let coll = match collation {
        Some(c) => {
            crate::engine::catalog::collation_from_name(c).ok_or_else(|| error_map::unknown_collation(c))?;
            let c = c.to_ascii_lowercase();
            let prefix_ok = c.starts_with(&format!("{cs}_")) || (cs == "utf8mb3" && c.starts_with("utf8_")) || c == cs;
            if !prefix_ok {
                return Err(error_map::collation_mismatch(&c, &cs));
            }
            c
        }
        None => match cs.as_str() {
            "utf8mb4" => "utf8mb4_0900_ai_ci".to_string(),
            "utf8" | "utf8mb3" => "utf8mb3_general_ci".to_string(),
            "ascii" => "ascii_general_ci".to_string(),
            "binary" => "binary".to_string(),
            _ => "utf8mb4_0900_ai_ci".to_string(),
        },
    };
    s.vars.insert("character_set_client".into(), Value::str(&cs));
    s.vars.insert("character_set_results".into(), Value::str(&cs));
    if character_set {
        // SET CHARACTER SET: connection charset follows the database.
        let db_cs = get_system_var(s, "character_set_database", false).unwrap_or(Value::str("utf8mb4"));
        s.vars.insert("character_set_connection".into(), db_cs);
    } else {
        s.vars.insert("character_set_connection".into(), Value::str(&cs));
        s.vars.insert("collation_connection".into(), Value::str(&coll));
    }
    Ok(())
}

/// Set a user variable (`@name := value`).
pub fn set_user_var(s: &mut Session, name: &str, value: Value) {
    s.user_vars.insert(name.trim_start_matches('@').to_ascii_lowercase(), value);
}

/// A user variable's value (NULL when never set).
pub fn get_user_var(s: &Session, name: &str) -> Value {
    s.user_vars.get(&name.trim_start_matches('@').to_ascii_lowercase()).cloned().unwrap_or(Value::Null)
}

/// `(name, value)` of every variable visible in SHOW [GLOBAL] VARIABLES.
pub fn all_vars(s: &Session, global: bool) -> Vec<(String, Value)> {
    VARS.iter()
        .filter(|d| !(global && d.scope == Session))
        .filter_map(|d| get_system_var(s, d.name, global && d.scope != Session).map(|v| (d.name.to_string(), v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vars_are_sorted_and_unique() {
        for w in VARS.windows(2) {
            assert!(w[0].name < w[1].name, "{} / {}", w[0].name, w[1].name);
        }
    }

    #[test]
    fn commit_wait_is_disk_or_network() {
        let mut s = Session::new(1, "root");
        assert_eq!(get_system_var(&s, "norr_commit_wait", false), Some(Value::str("network")));
        assert!(!commit_waits_for_disk(&s));
        set_system_var(&mut s, "norr_commit_wait", false, Value::str("DISK")).unwrap();
        assert_eq!(get_system_var(&s, "@@norr_commit_wait".trim_start_matches('@'), false), Some(Value::str("disk")));
        assert!(commit_waits_for_disk(&s));
        let e = set_system_var(&mut s, "norr_commit_wait", false, Value::str("fsync")).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (1231, "Variable 'norr_commit_wait' can't be set to the value of 'fsync'")
        );
        assert!(commit_waits_for_disk(&s), "a refused SET changes nothing");
        set_system_var(&mut s, "norr_commit_wait", false, Value::str("network")).unwrap();
        assert!(!commit_waits_for_disk(&s));
        assert_eq!(get_system_var(&s, "norr_last_commit_gci", false), Some(Value::UInt(0)));
        assert_eq!(set_system_var(&mut s, "norr_last_commit_gci", false, Value::Int(5)).unwrap_err().code, 1238);
    }

    /// The session's commit-wait flag follows every way the variable
    /// changes: SET SESSION (and = DEFAULT), a new session taking the
    /// global value, a reset session (COM_RESET_CONNECTION starts from the
    /// globals again).
    #[test]
    fn commit_wait_flag_follows_the_variable() {
        let disk_global = |name: &str| match name {
            "norr_commit_wait" => Some(Value::str("disk")),
            other => global_value(other),
        };
        // A new session under SET GLOBAL norr_commit_wait = 'disk'.
        let mut s = Session::new(1, "root");
        assert!(!s.commit_wait_disk, "default 'network'");
        apply_globals(&mut s, disk_global);
        assert!(s.commit_wait_disk);
        assert_eq!(get_system_var(&s, "norr_commit_wait", false), Some(Value::str("disk")));
        set_system_var(&mut s, "NORR_COMMIT_WAIT", false, Value::str("Network")).unwrap();
        assert!(!s.commit_wait_disk);
        // SET SESSION ... = DEFAULT takes the global value (the process's
        // global here is the compiled-in 'network').
        set_system_var(&mut s, "norr_commit_wait", false, Value::str("disk")).unwrap();
        assert!(s.commit_wait_disk);
        set_system_var(&mut s, "norr_commit_wait", false, Value::str("DEFAULT")).unwrap();
        assert_eq!(s.commit_wait_disk, is_disk(global_value("norr_commit_wait").as_ref()));
        // COM_RESET_CONNECTION: a new session from the globals forgets the
        // session's own 'disk'.
        set_system_var(&mut s, "norr_commit_wait", false, Value::str("disk")).unwrap();
        let mut reset = Session::new(1, "root");
        apply_globals(&mut reset, global_value);
        assert_eq!(reset.commit_wait_disk, is_disk(global_value("norr_commit_wait").as_ref()));
        assert_eq!(
            reset.commit_wait_disk,
            get_system_var(&reset, "norr_commit_wait", false) == Some(Value::str("disk"))
        );
        let mut reset = Session::new(1, "root");
        apply_globals(&mut reset, disk_global);
        assert!(reset.commit_wait_disk);
    }

    #[test]
    fn set_and_get() {
        let mut s = Session::new(1, "root");
        assert_eq!(get_system_var(&s, "AUTOCOMMIT", false), Some(Value::Int(1)));
        set_system_var(&mut s, "autocommit", false, Value::str("OFF")).unwrap();
        assert!(!s.autocommit);
        s.in_transaction = true;
        assert_eq!(set_system_var(&mut s, "autocommit", false, Value::Int(1)).unwrap(), SetEffect::CommitNow);
        set_system_var(&mut s, "sql_mode", false, Value::str("strict_trans_tables, ansi_quotes")).unwrap();
        assert_eq!(get_system_var(&s, "sql_mode", false), Some(Value::str("ANSI_QUOTES,STRICT_TRANS_TABLES")));
        assert_eq!(set_system_var(&mut s, "sql_mode", false, Value::str("bogus")).unwrap_err().code, 1231);
        assert_eq!(set_system_var(&mut s, "nope", false, Value::Int(1)).unwrap_err().code, 1193);
        assert_eq!(set_system_var(&mut s, "version", false, Value::Int(1)).unwrap_err().code, 1238);
        set_system_var(&mut s, "tx_isolation", false, Value::str("repeatable-read")).unwrap();
        assert_eq!(get_system_var(&s, "transaction_isolation", false), Some(Value::str("REPEATABLE-READ")));
        set_names(&mut s, "utf8mb4", Some("utf8mb4_bin"), false).unwrap();
        assert_eq!(get_system_var(&s, "collation_connection", false), Some(Value::str("utf8mb4_bin")));
        assert_eq!(set_names(&mut s, "latin1", None, false).unwrap_err().code, 1235);
        assert_eq!(set_names(&mut s, "cp1251", None, false).unwrap_err().code, 1115);
        let latin1 = Value::str("latin1_swedish_ci");
        assert_eq!(set_system_var(&mut s, "collation_connection", false, latin1.clone()).unwrap_err().code, 1235);
        set_system_var(&mut s, "collation_server", false, latin1).unwrap();
        assert_eq!(
            set_system_var(&mut s, "character_set_results", false, Value::str("latin1")).unwrap_err().code,
            1235
        );
        set_system_var(&mut s, "character_set_server", false, Value::str("latin1")).unwrap();
        assert_eq!(show_text("autocommit", &Value::Int(1)), "ON");
    }
}
