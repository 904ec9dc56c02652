//! The system tables of accounts in the data nodes, read and written with
//! SQL on an internal session (no privilege checks: `Session::account` is
//! None), so they are ordinary cluster tables: replicated, durable and the
//! same for every SQL node.
//!
//! Privileges are one integer per row (bits of `privs::Privs`); the
//! information_schema views and SHOW GRANTS give them names.

use super::privs::Privs;
use super::{ColumnGrant, DbGrant, RoleEdge, Snapshot, TableGrant, UserRow};
use crate::engine::Engine;
use crate::types::{QueryOutput, SqlError};
use norr_signals::Value;
use sha1::Digest;

pub const DB: &str = "mysql";

/// Tables made at the first start of a cluster (CREATE ... IF NOT EXISTS:
/// several SQL nodes may start at once).
const TABLES: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS mysql.user (user VARCHAR(32) COLLATE utf8mb4_bin NOT NULL, \
     host VARCHAR(255) COLLATE utf8mb4_bin NOT NULL, native_hash VARCHAR(41) NOT NULL, \
     sha2_hash VARCHAR(64) NOT NULL, plugin VARCHAR(64) NOT NULL, privs BIGINT NOT NULL, \
     locked TINYINT NOT NULL, password_expired TINYINT NOT NULL, is_role TINYINT NOT NULL, \
     PRIMARY KEY (user, host))",
    "CREATE TABLE IF NOT EXISTS mysql.db (user VARCHAR(32) COLLATE utf8mb4_bin NOT NULL, \
     host VARCHAR(255) COLLATE utf8mb4_bin NOT NULL, db VARCHAR(64) COLLATE utf8mb4_bin NOT NULL, \
     privs BIGINT NOT NULL, PRIMARY KEY (user, host, db))",
    "CREATE TABLE IF NOT EXISTS mysql.tables_priv (user VARCHAR(32) COLLATE utf8mb4_bin NOT NULL, \
     host VARCHAR(255) COLLATE utf8mb4_bin NOT NULL, db VARCHAR(64) COLLATE utf8mb4_bin NOT NULL, \
     table_name VARCHAR(64) COLLATE utf8mb4_bin NOT NULL, privs BIGINT NOT NULL, \
     PRIMARY KEY (user, host, db, table_name))",
    "CREATE TABLE IF NOT EXISTS mysql.columns_priv (user VARCHAR(32) COLLATE utf8mb4_bin NOT NULL, \
     host VARCHAR(255) COLLATE utf8mb4_bin NOT NULL, db VARCHAR(64) COLLATE utf8mb4_bin NOT NULL, \
     table_name VARCHAR(64) COLLATE utf8mb4_bin NOT NULL, column_name VARCHAR(64) COLLATE utf8mb4_bin NOT NULL, \
     privs BIGINT NOT NULL, PRIMARY KEY (user, host, db, table_name, column_name))",
    "CREATE TABLE IF NOT EXISTS mysql.role_edges (role_user VARCHAR(32) COLLATE utf8mb4_bin NOT NULL, \
     role_host VARCHAR(255) COLLATE utf8mb4_bin NOT NULL, to_user VARCHAR(32) COLLATE utf8mb4_bin NOT NULL, \
     to_host VARCHAR(255) COLLATE utf8mb4_bin NOT NULL, is_default TINYINT NOT NULL, \
     with_admin TINYINT NOT NULL, PRIMARY KEY (role_user, role_host, to_user, to_host))",
    // REQUIRE SSL accounts: a table of their own rather than a column of
    // mysql.user, so a cluster made before it gets it at the next start
    // without a change to mysql.user's rows.
    "CREATE TABLE IF NOT EXISTS mysql.user_ssl (user VARCHAR(32) COLLATE utf8mb4_bin NOT NULL, \
     host VARCHAR(255) COLLATE utf8mb4_bin NOT NULL, PRIMARY KEY (user, host))",
    "CREATE TABLE IF NOT EXISTS mysql.acl_version (id INT NOT NULL PRIMARY KEY, version BIGINT NOT NULL)",
];

/// A string literal for internal SQL (the internal session has no
/// NO_BACKSLASH_ESCAPES: `internal_session`).
pub fn lit(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('\'');
    for c in s.chars() {
        match c {
            '\'' => o.push_str("''"),
            '\\' => o.push_str("\\\\"),
            '\0' => o.push_str("\\0"),
            c => o.push(c),
        }
    }
    o.push('\'');
    o
}

fn hex(b: &[u8], upper: bool) -> String {
    b.iter().map(|x| if upper { format!("{x:02X}") } else { format!("{x:02x}") }).collect()
}

/// mysql_native_password's stored hash: '*' + SHA1(SHA1(pw)) in upper-case hex.
pub fn native_hash(password: &str) -> String {
    if password.is_empty() {
        return String::new();
    }
    let once = sha1::Sha1::digest(password.as_bytes());
    format!("*{}", hex(&sha1::Sha1::digest(once), true))
}

/// caching_sha2_password's verifier: SHA256(SHA256(pw)) in hex (what the
/// fast path checks a scramble against; see protocol::auth).
pub fn sha2_hash(password: &str) -> String {
    if password.is_empty() {
        return String::new();
    }
    let once = sha2::Sha256::digest(password.as_bytes());
    hex(&sha2::Sha256::digest(once), false)
}

/// Run internal SQL statements in one transaction.
pub async fn run(e: &Engine, stmts: &[String]) -> Result<Vec<QueryOutput>, SqlError> {
    let mut s = e.internal_session();
    let mut out = Vec::with_capacity(stmts.len());
    let many = stmts.len() > 1;
    if many {
        e.run_internal(&mut s, "BEGIN").await?;
    }
    for st in stmts {
        match e.run_internal(&mut s, st).await {
            Ok(o) => out.push(o),
            Err(err) => {
                if many {
                    let _ = e.run_internal(&mut s, "ROLLBACK").await;
                }
                return Err(err);
            }
        }
    }
    if many {
        e.run_internal(&mut s, "COMMIT").await?;
    }
    Ok(out)
}

/// Run changes to the tables and bump the version, in one transaction; this
/// node's snapshot is dropped so that its next statement sees the change.
pub async fn change(e: &Engine, mut stmts: Vec<String>) -> Result<(), SqlError> {
    stmts.push("UPDATE mysql.acl_version SET version = version + 1 WHERE id = 1".into());
    let r = run(e, &stmts).await;
    e.acl().invalidate();
    r.map(|_| ())
}

fn rows(o: QueryOutput) -> Vec<Vec<Value>> {
    match o {
        QueryOutput::Rows { rows, .. } => rows,
        _ => Vec::new(),
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        v => v.as_bytes().map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_else(|| int(v).to_string()),
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        Value::UInt(n) => *n as i64,
        _ => 0,
    }
}

/// A row's columns read in order, as the struct being built lists its
/// fields (Rust evaluates a struct expression's fields as written); a
/// missing column reads as empty / 0.
struct Cols<'a>(std::slice::Iter<'a, Value>);

impl Cols<'_> {
    fn text(&mut self) -> String {
        self.0.next().map(text).unwrap_or_default()
    }
    fn int(&mut self) -> i64 {
        self.0.next().map(int).unwrap_or(0)
    }
    fn privs(&mut self) -> Privs {
        Privs(self.int() as u64)
    }
    fn flag(&mut self) -> bool {
        self.int() != 0
    }
}

/// Make the tables if absent (first start of a cluster).
pub async fn bootstrap(e: &Engine) -> Result<(), SqlError> {
    let mut s = e.internal_session();
    if !e.catalog().db_exists(DB).await? {
        match e.run_internal(&mut s, "CREATE DATABASE mysql CHARACTER SET utf8mb4 COLLATE utf8mb4_bin").await {
            // Another SQL node made it first.
            Err(err) if err.code != 1007 => return Err(err),
            _ => {}
        }
    }
    for t in TABLES {
        e.run_internal(&mut s, t).await?;
    }
    e.run_internal(&mut s, "INSERT IGNORE INTO mysql.acl_version VALUES (1, 0)").await?;
    Ok(())
}

/// An account to create when the cluster has none yet.
pub struct Seed {
    pub user: String,
    pub host: String,
    pub password: String,
    pub plugin: Option<String>,
    pub privs: Privs,
}

/// First start: when `mysql.user` is empty, create `seeds` (root and the
/// users of the --config file). Later starts leave the accounts alone.
pub async fn seed(e: &Engine, seeds: &[Seed]) -> Result<bool, SqlError> {
    let mut s = e.internal_session();
    let n = rows(e.run_internal(&mut s, "SELECT COUNT(*) FROM mysql.user").await?);
    if n.first().and_then(|r| r.first()).map(int).unwrap_or(0) > 0 {
        return Ok(false);
    }
    let stmts = seeds
        .iter()
        .map(|u| {
            format!(
                "INSERT IGNORE INTO mysql.user VALUES ({}, {}, {}, {}, {}, {}, 0, 0, 0)",
                lit(&u.user),
                lit(&u.host),
                lit(&native_hash(&u.password)),
                lit(&sha2_hash(&u.password)),
                lit(u.plugin.as_deref().unwrap_or("")),
                u.privs.0
            )
        })
        .collect();
    change(e, stmts).await?;
    Ok(true)
}

pub async fn read_version(e: &Engine) -> Result<i64, SqlError> {
    let mut s = e.internal_session();
    let r = rows(e.run_internal(&mut s, "SELECT version FROM mysql.acl_version WHERE id = 1").await?);
    Ok(r.first().and_then(|r| r.first()).map(int).unwrap_or(0))
}

/// Read every table (one transaction, so the version matches the rows).
pub async fn load(e: &Engine) -> Result<Snapshot, SqlError> {
    let q = [
        "SELECT version FROM mysql.acl_version WHERE id = 1",
        "SELECT user, host, native_hash, sha2_hash, plugin, privs, locked, password_expired, is_role FROM mysql.user",
        "SELECT user, host, db, privs FROM mysql.db",
        "SELECT user, host, db, table_name, privs FROM mysql.tables_priv",
        "SELECT user, host, db, table_name, column_name, privs FROM mysql.columns_priv",
        "SELECT role_user, role_host, to_user, to_host, is_default, with_admin FROM mysql.role_edges",
        "SELECT user, host FROM mysql.user_ssl",
    ]
    .map(String::from);
    let mut out = run(e, &q).await?.into_iter().map(rows);
    let mut next = || out.next().unwrap_or_default();
    let version = next().first().and_then(|r| r.first()).map(int).unwrap_or(0);
    let mut users: Vec<UserRow> = next()
        .iter()
        .map(|r| {
            let mut c = Cols(r.iter());
            UserRow {
                user: c.text(),
                host: c.text(),
                native_hash: c.text(),
                sha2_hash: c.text(),
                plugin: c.text(),
                privs: c.privs(),
                locked: c.flag(),
                password_expired: c.flag(),
                is_role: c.flag(),
                require_ssl: false,
            }
        })
        .collect();
    let dbs = next()
        .iter()
        .map(|r| {
            let mut c = Cols(r.iter());
            DbGrant { user: c.text(), host: c.text(), db: c.text(), privs: c.privs() }
        })
        .collect();
    let tables = next()
        .iter()
        .map(|r| {
            let mut c = Cols(r.iter());
            TableGrant { user: c.text(), host: c.text(), db: c.text(), table: c.text(), privs: c.privs() }
        })
        .collect();
    let columns = next()
        .iter()
        .map(|r| {
            let mut c = Cols(r.iter());
            ColumnGrant {
                user: c.text(),
                host: c.text(),
                db: c.text(),
                table: c.text(),
                column: c.text(),
                privs: c.privs(),
            }
        })
        .collect();
    let roles = next()
        .iter()
        .map(|r| {
            let mut c = Cols(r.iter());
            RoleEdge {
                role: (c.text(), c.text()),
                to: (c.text(), c.text()),
                is_default: c.flag(),
                with_admin: c.flag(),
            }
        })
        .collect();
    for r in next() {
        let (user, host) = (text(&r[0]), text(&r[1]));
        if let Some(u) = users.iter_mut().find(|u| u.user == user && u.host == host) {
            u.require_ssl = true;
        }
    }
    Ok(Snapshot { version, users, dbs, tables, columns, roles })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_as_mysql() {
        // MySQL: SELECT PASSWORD('pw') gave this for mysql_native_password.
        assert_eq!(native_hash("password"), "*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19");
        assert_eq!(native_hash(""), "");
        assert_eq!(sha2_hash("x").len(), 64);
        assert_eq!(lit("a'b\\c"), "'a''b\\\\c'");
    }
}
