//! Accounts and privileges, stored in the cluster (issue 25).
//! Owner: accounts engineer.
//!
//! The accounts live in tables of the hidden-by-privilege `mysql` schema in
//! the data nodes (`store`), so every SQL node sees the same ones. Each SQL
//! node keeps a snapshot of them (`Acl`); a statement that changes them bumps
//! the row of `mysql.acl_version`, and a SQL node re-reads the version row
//! at most every `RECHECK` (the node that made the change reloads at once).
//! A version check per statement would cost one data-node round trip per
//! statement, about what a point select itself costs.
//!
//! * `privs`: the privilege bits and their names.
//! * `stmt`: parsing of CREATE USER, GRANT, ... (sqlparser knows few of them).
//! * `run`: executing them, SHOW GRANTS.
//! * `check`: what each statement needs, checked before it runs.
//! * `store`: the system tables, first-start bootstrap and seeding.

pub mod check;
pub mod privs;
pub mod run;
pub mod stmt;
pub mod store;
pub mod views;

use crate::types::SqlError;
use privs::Privs;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How stale another SQL node's change may be when a statement starts.
pub const RECHECK: Duration = Duration::from_millis(200);

/// One account (or role: `is_role`) as stored in `mysql.user`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRow {
    pub user: String,
    pub host: String,
    /// mysql_native_password hash: SHA1(SHA1(password)), hex upper-case
    /// with a leading '*' as MySQL shows it; empty for no password.
    pub native_hash: String,
    /// caching_sha2_password verifier: SHA256(SHA256(password)), hex;
    /// empty for no password.
    pub sha2_hash: String,
    /// The account's plugin (what CREATE USER ... IDENTIFIED WITH named, or
    /// caching_sha2_password by default).
    pub plugin: String,
    pub privs: Privs,
    pub locked: bool,
    pub password_expired: bool,
    pub is_role: bool,
    /// REQUIRE SSL (`mysql.user_ssl`): logins without TLS are refused.
    pub require_ssl: bool,
}

/// A grant on one database (`mysql.db`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbGrant {
    pub user: String,
    pub host: String,
    pub db: String,
    pub privs: Privs,
}

/// A grant on one table (`mysql.tables_priv`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableGrant {
    pub user: String,
    pub host: String,
    pub db: String,
    pub table: String,
    pub privs: Privs,
}

/// A grant on one column (`mysql.columns_priv`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnGrant {
    pub user: String,
    pub host: String,
    pub db: String,
    pub table: String,
    pub column: String,
    pub privs: Privs,
}

/// A role granted to an account (`mysql.role_edges`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleEdge {
    pub role: (String, String),
    pub to: (String, String),
    pub is_default: bool,
    pub with_admin: bool,
}

/// Everything in the system tables at one version.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub version: i64,
    pub users: Vec<UserRow>,
    pub dbs: Vec<DbGrant>,
    pub tables: Vec<TableGrant>,
    pub columns: Vec<ColumnGrant>,
    pub roles: Vec<RoleEdge>,
}

/// `user@host` as MySQL quotes it in messages.
pub fn quoted(user: &str, host: &str) -> String {
    format!("'{user}'@'{host}'")
}

/// Whether an account's host pattern admits a client from `peer` (the IP
/// text, or "localhost" for the Unix socket). `%` and `_` are wildcards as
/// in LIKE; `localhost` also admits loopback addresses, as MySQL resolves
/// them to it.
pub fn host_matches(pattern: &str, peer: &str) -> bool {
    let peer_is_local = peer == "localhost" || peer == "127.0.0.1" || peer == "::1" || peer == "::ffff:127.0.0.1";
    if pattern.eq_ignore_ascii_case("localhost") {
        return peer_is_local;
    }
    like(pattern.as_bytes(), peer.as_bytes())
}

fn like(p: &[u8], s: &[u8]) -> bool {
    match p.first() {
        None => s.is_empty(),
        Some(b'%') => (0..=s.len()).any(|i| like(&p[1..], &s[i..])),
        Some(b'_') => !s.is_empty() && like(&p[1..], &s[1..]),
        Some(c) => s.first().is_some_and(|x| x.eq_ignore_ascii_case(c)) && like(&p[1..], &s[1..]),
    }
}

/// How specific a host pattern is: MySQL sorts exact hosts before patterns,
/// and `%` last.
fn host_rank(h: &str) -> u8 {
    if h == "%" {
        2
    } else if h.contains('%') || h.contains('_') {
        1
    } else {
        0
    }
}

impl Snapshot {
    pub fn user(&self, user: &str, host: &str) -> Option<&UserRow> {
        self.users.iter().find(|u| u.user == user && u.host.eq_ignore_ascii_case(host))
    }

    /// The account a client `user` from `peer` logs in as: the most specific
    /// matching host, as MySQL. Roles cannot log in.
    pub fn login_account(&self, user: &str, peer: &str) -> Option<&UserRow> {
        self.users
            .iter()
            .filter(|u| !u.is_role && u.user == user && host_matches(&u.host, peer))
            .min_by_key(|u| host_rank(&u.host))
    }

    /// The account and the roles active for it (and the roles those were
    /// granted, transitively): whose grants add up to its privileges.
    pub fn grantees(&self, me: &(String, String), active: &[(String, String)]) -> Vec<(String, String)> {
        let mut out = vec![me.clone()];
        let mut seen: HashSet<(String, String)> = out.iter().cloned().collect();
        let mut todo: Vec<(String, String)> = active.to_vec();
        while let Some(r) = todo.pop() {
            if seen.insert(r.clone()) {
                for e in self.roles.iter().filter(|e| e.to == r) {
                    todo.push(e.role.clone());
                }
                out.push(r);
            }
        }
        out
    }

    /// The roles granted to an account marked as default.
    pub fn default_roles(&self, me: &(String, String)) -> Vec<(String, String)> {
        self.roles.iter().filter(|e| &e.to == me && e.is_default).map(|e| e.role.clone()).collect()
    }

    pub fn granted_roles(&self, me: &(String, String)) -> Vec<(String, String)> {
        self.roles.iter().filter(|e| &e.to == me).map(|e| e.role.clone()).collect()
    }

    fn is_of(who: &[(String, String)], u: &str, h: &str) -> bool {
        who.iter().any(|(wu, wh)| wu == u && wh.eq_ignore_ascii_case(h))
    }

    pub fn global_privs(&self, who: &[(String, String)]) -> Privs {
        self.users.iter().filter(|u| Self::is_of(who, &u.user, &u.host)).fold(Privs::NONE, |a, u| a | u.privs)
    }

    pub fn db_privs(&self, who: &[(String, String)], db: &str) -> Privs {
        self.dbs
            .iter()
            .filter(|g| Self::is_of(who, &g.user, &g.host) && db_matches(&g.db, db))
            .fold(Privs::NONE, |a, g| a | g.privs)
    }

    pub fn table_privs(&self, who: &[(String, String)], db: &str, table: &str) -> Privs {
        self.tables
            .iter()
            .filter(|g| Self::is_of(who, &g.user, &g.host) && g.db == db && g.table.eq_ignore_ascii_case(table))
            .fold(Privs::NONE, |a, g| a | g.privs)
    }

    /// Column grants of the table, by column (lower-case).
    pub fn column_privs(&self, who: &[(String, String)], db: &str, table: &str) -> Vec<(String, Privs)> {
        self.columns
            .iter()
            .filter(|g| Self::is_of(who, &g.user, &g.host) && g.db == db && g.table.eq_ignore_ascii_case(table))
            .map(|g| (g.column.to_ascii_lowercase(), g.privs))
            .collect()
    }

    /// Whether the grantees have any privilege at all on something in `db`
    /// (USE, SHOW DATABASES).
    pub fn any_in_db(&self, who: &[(String, String)], db: &str) -> bool {
        self.global_privs(who).intersects(table_level())
            || !self.db_privs(who, db).is_empty()
            || self.tables.iter().any(|g| Self::is_of(who, &g.user, &g.host) && g.db == db)
            || self.columns.iter().any(|g| Self::is_of(who, &g.user, &g.host) && g.db == db)
    }

    /// Whether the grantees may see the table (SHOW TABLES).
    pub fn any_on_table(&self, who: &[(String, String)], db: &str, table: &str) -> bool {
        self.global_privs(who).intersects(table_level())
            || !self.db_privs(who, db).without_grant_option().is_empty()
            || !self.table_privs(who, db, table).is_empty()
            || !self.column_privs(who, db, table).is_empty()
    }
}

/// The privileges on tables: a global grant of one of them (not PROCESS,
/// SUPER, ...) shows every database and table.
fn table_level() -> Privs {
    Privs::all_at(privs::Level::Table)
}

/// Database names in grants are exact (wildcards in grant database names
/// are not supported: refused at GRANT time).
fn db_matches(pattern: &str, db: &str) -> bool {
    pattern == db
}

pub use crate::types::SessionAccount;

/// This SQL node's copy of the system tables.
pub struct Acl {
    cache: Mutex<Cached>,
}

struct Cached {
    snap: Arc<Snapshot>,
    checked: Option<Instant>,
}

impl Default for Acl {
    fn default() -> Self {
        Acl { cache: Mutex::new(Cached { snap: Arc::new(Snapshot::default()), checked: None }) }
    }
}

impl Acl {
    /// The snapshot as of at most `RECHECK` ago (re-read when the version
    /// row moved).
    pub async fn current(&self, e: &crate::engine::Engine) -> Result<Arc<Snapshot>, SqlError> {
        let (snap, fresh) = {
            let c = self.cache.lock().expect("acl lock");
            (c.snap.clone(), c.checked.is_some_and(|t| t.elapsed() < RECHECK))
        };
        if fresh {
            return Ok(snap);
        }
        let v = store::read_version(e).await?;
        let snap = if v == snap.version && v != 0 { snap } else { Arc::new(store::load(e).await?) };
        let mut c = self.cache.lock().expect("acl lock");
        if snap.version >= c.snap.version {
            c.snap = snap.clone();
        }
        c.checked = Some(Instant::now());
        Ok(snap)
    }

    /// Forget the snapshot: the next statement reads the tables again (this
    /// node just changed them).
    pub fn invalidate(&self) {
        let mut c = self.cache.lock().expect("acl lock");
        c.checked = None;
        c.snap = Arc::new(Snapshot::default());
    }
}

/// What a logged-in session may see of the metadata (SHOW DATABASES,
/// SHOW TABLES, information_schema's privilege views).
pub struct Visibility {
    pub snap: Arc<Snapshot>,
    /// The account and its active roles.
    pub who: Vec<(String, String)>,
    pub global: Privs,
}

impl Visibility {
    /// None: the session is not restricted (made in-process).
    pub async fn of(e: &crate::engine::Engine, s: &crate::types::Session) -> Result<Option<Visibility>, SqlError> {
        let Some(a) = &s.account else { return Ok(None) };
        let snap = e.acl().current(e).await?;
        let who = run::who(&snap, a);
        let global = snap.global_privs(&who);
        Ok(Some(Visibility { snap, who, global }))
    }

    /// The rows of an information_schema table this account may see: rows
    /// naming a database (TABLE_SCHEMA, SCHEMA_NAME, ...) need some
    /// privilege in it, rows naming a table too (TABLE_NAME) some privilege
    /// on that table.
    pub fn filter_rows(
        &self,
        (cols, mut rows): (Vec<crate::types::ColumnMeta>, Vec<Vec<norr_signals::Value>>),
    ) -> (Vec<crate::types::ColumnMeta>, Vec<Vec<norr_signals::Value>>) {
        let pos = |names: &[&str]| cols.iter().position(|c| names.contains(&c.name.as_str()));
        let db = pos(&["TABLE_SCHEMA", "SCHEMA_NAME", "CONSTRAINT_SCHEMA", "EVENT_SCHEMA", "ROUTINE_SCHEMA"]);
        let table = pos(&["TABLE_NAME"]);
        let text = |v: &norr_signals::Value| crate::engine::catalog::value_text(v);
        if let Some(di) = db {
            if !self.global.contains(Privs::SHOW_DATABASES) || table.is_some() {
                rows.retain(|r| {
                    let d = text(&r[di]);
                    if crate::engine::infoschema::is_infoschema(&d) {
                        return true;
                    }
                    match table {
                        Some(ti) => self.snap.any_on_table(&self.who, &d, &text(&r[ti])),
                        None => self.snap.any_in_db(&self.who, &d),
                    }
                });
            }
        }
        (cols, rows)
    }
}

/// 1142 ER_TABLEACCESS_DENIED_ERROR.
pub fn table_denied(cmd: &str, a: &SessionAccount, table: &str) -> SqlError {
    SqlError::new(1142, "42000", format!("{cmd} command denied to user '{}'@'{}' for table '{table}'", a.user, a.host))
}

/// 1143 ER_COLUMNACCESS_DENIED_ERROR.
pub fn column_denied(cmd: &str, a: &SessionAccount, column: &str, table: &str) -> SqlError {
    SqlError::new(
        1143,
        "42000",
        format!("{cmd} command denied to user '{}'@'{}' for column '{column}' in table '{table}'", a.user, a.host),
    )
}

/// 1044 ER_DBACCESS_DENIED_ERROR.
pub fn db_denied(a: &SessionAccount, db: &str) -> SqlError {
    SqlError::new(1044, "42000", format!("Access denied for user '{}'@'{}' to database '{db}'", a.user, a.host))
}

/// 1227 ER_SPECIFIC_ACCESS_DENIED_ERROR.
pub fn needs(what: &str) -> SqlError {
    SqlError::new(
        1227,
        "42000",
        format!("Access denied; you need (at least one of) the {what} privilege(s) for this operation"),
    )
}

/// 1396 ER_CANNOT_USER.
pub fn cannot_user(op: &str, who: &str) -> SqlError {
    SqlError::new(1396, "HY000", format!("Operation {op} failed for {who}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_patterns() {
        assert!(host_matches("%", "10.1.2.3"));
        assert!(host_matches("localhost", "127.0.0.1"));
        assert!(host_matches("localhost", "localhost"));
        assert!(!host_matches("localhost", "10.1.2.3"));
        assert!(host_matches("10.1.%", "10.1.2.3"));
        assert!(!host_matches("10.1.%", "10.2.2.3"));
        assert!(host_matches("10.1.2._", "10.1.2.3"));
    }
}
