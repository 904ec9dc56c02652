//! The data node's account reader (`[cluster] api_auth = "account"`): keeps
//! the node's `AccountDirectory` (what native logins are checked against,
//! `norr_transport::account_book`, and whose grants TC and DICT check their
//! requests against) equal to the SQL accounts: `mysql.user`, `mysql.db`,
//! `mysql.tables_priv` and `mysql.role_edges`. (Column grants,
//! `mysql.columns_priv`, are not read: a native client works on whole rows,
//! so a column grant alone does not let it at a table.)
//!
//! The SQL nodes own those tables: they create them at the first start and
//! bump `mysql.acl_version` in the same transaction as every change to the
//! accounts (CREATE USER, ALTER USER, GRANT, ...). The reader runs in the
//! `norr datad` process, on its own thread and outside the node's blocks
//! (they stay deterministic state machines without clocks): it connects to
//! its own data node like any client, proving the cluster secret, reads the
//! version row every `POLL`, and reads the tables again when the version
//! moved. The version is read before the rows, so a table published is
//! never older than its version says (a change between the two reads is
//! read again at the next poll). A node restarted by the supervisor is
//! connected again; until the first load the node refuses account logins
//! ("not loaded yet") rather than guess.

use norr_client::blocking::Client;
use norr_client::{ClientError, ConnectOptions};
use norr_signals::{ErrorCode, ScanSpec, TableDef, Value};
use norr_transport::account_book::{AccountDirectory, AccountTable, NativeAccount, ObjectGrant, RoleGrant};
use norr_transport::auth::ClusterSecret;
use norr_transport::handshake::ApiKind;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How stale the node's accounts may be after a change through SQL (the
/// SQL nodes re-read theirs every 200 ms).
const POLL: Duration = Duration::from_millis(250);
/// Wait between attempts to connect to the node (it may be starting).
const RETRY: Duration = Duration::from_millis(500);

/// The native names of the tables read (`db/table`, as the SQL nodes name them).
const VERSION_TABLE: &str = "mysql/acl_version";
const USER_TABLE: &str = "mysql/user";
const DB_TABLE: &str = "mysql/db";
const TABLES_TABLE: &str = "mysql/tables_priv";
const ROLES_TABLE: &str = "mysql/role_edges";

/// The reader thread; stopped and joined on drop.
pub struct AccountReader {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for AccountReader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Start reading the accounts of the cluster through the data node at
/// `node` into `dir`.
pub fn start(node: SocketAddr, secret: ClusterSecret, dir: Arc<AccountDirectory>) -> std::io::Result<AccountReader> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let thread =
        std::thread::Builder::new().name("account-reader".into()).spawn(move || run(node, secret, &dir, &flag))?;
    Ok(AccountReader { stop, thread: Some(thread) })
}

/// Sleep `d` in small steps, returning early (true) once `stop` is set.
fn sleep_unless_stopped(d: Duration, stop: &AtomicBool) -> bool {
    let step = Duration::from_millis(50);
    let mut left = d;
    while !left.is_zero() {
        if stop.load(Ordering::Relaxed) {
            return true;
        }
        let s = left.min(step);
        std::thread::sleep(s);
        left -= s;
    }
    stop.load(Ordering::Relaxed)
}

fn run(node: SocketAddr, secret: ClusterSecret, dir: &AccountDirectory, stop: &AtomicBool) {
    let opts = ConnectOptions {
        client_name: "norr datad account reader".into(),
        // A reserved slot: the node's own process, never crowded out by clients.
        kind: ApiKind::Management,
        secret: Some(secret),
        connect_timeout: Duration::from_secs(5),
        request_timeout: Some(Duration::from_secs(5)),
        ..ConnectOptions::default()
    };
    // The last error logged, so a node that stays down is not logged every retry.
    let mut last_error = String::new();
    let mut note = |e: String| {
        if e != last_error {
            tracing::warn!("account reader: {e}");
            last_error = e;
        }
    };
    while !stop.load(Ordering::Relaxed) {
        let client = match Client::connect_with(node, opts.clone()) {
            Ok(c) => c,
            Err(e) => {
                note(format!("cannot connect to the data node at {node}: {e}"));
                if sleep_unless_stopped(RETRY, stop) {
                    return;
                }
                continue;
            }
        };
        loop {
            match refresh(&client, dir) {
                Ok(Some(t)) => {
                    tracing::info!(
                        acl_version = t.version,
                        accounts = t.accounts.len(),
                        "account reader: accounts loaded"
                    );
                    dir.publish(t);
                }
                Ok(None) => {}
                Err(e) => {
                    note(format!("cannot read the accounts: {e}"));
                    if !client.is_connected() {
                        break;
                    }
                }
            }
            if sleep_unless_stopped(POLL, stop) {
                return;
            }
        }
    }
}

/// The accounts if their version differs from the one published (or none
/// is), else None. A cluster whose SQL nodes have not made the tables yet
/// has no accounts (version -1).
fn refresh(client: &Client, dir: &AccountDirectory) -> Result<Option<AccountTable>, ClientError> {
    let version_def = match client.get_table(VERSION_TABLE) {
        Ok(d) => d,
        Err(e) if e.code() == Some(ErrorCode::NoSuchTable) => {
            return Ok((dir.version() != Some(-1)).then(|| AccountTable { version: -1, ..AccountTable::default() }))
        }
        Err(e) => return Err(e),
    };
    let row = client.read(version_def.id, vec![Value::Int(1)])?;
    let version = row.as_deref().and_then(|r| column(&version_def, r, "version")).and_then(Value::as_i64).unwrap_or(0);
    if dir.version() == Some(version) {
        return Ok(None);
    }
    let read = |name: &str| -> Result<(TableDef, Vec<Vec<Value>>), ClientError> {
        let def = client.get_table(name)?;
        let rows = client.scan(ScanSpec { table_version: def.version, ..ScanSpec::full(def.id) })?.collect_all()?;
        Ok((def, rows))
    };
    let (user_def, users) = read(USER_TABLE)?;
    let mut t = table_from_rows(&user_def, version, &users);
    let (db_def, dbs) = read(DB_TABLE)?;
    let (tables_def, tables) = read(TABLES_TABLE)?;
    let (roles_def, roles) = read(ROLES_TABLE)?;
    t.grants = grants_from_rows(&db_def, &dbs, false);
    t.grants.extend(grants_from_rows(&tables_def, &tables, true));
    t.roles = roles_from_rows(&roles_def, &roles);
    Ok(Some(t))
}

/// Column `name` of `row` (a row of every column of `def`, in order).
fn column<'a>(def: &TableDef, row: &'a [Value], name: &str) -> Option<&'a Value> {
    def.columns.iter().position(|c| c.name.eq_ignore_ascii_case(name)).and_then(|i| row.get(i))
}

/// A missing or non-text column reads as empty text, a missing number as
/// 0, as the SQL nodes read them: a damaged verifier then refuses its
/// account's logins (`account_book`), never admits them.
fn text(def: &TableDef, r: &[Value], name: &str) -> String {
    match column(def, r, name) {
        Some(Value::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
        _ => String::new(),
    }
}

fn int(def: &TableDef, r: &[Value], name: &str) -> i64 {
    column(def, r, name).and_then(Value::as_i64).unwrap_or(0)
}

/// The accounts in rows of `mysql.user`.
fn table_from_rows(def: &TableDef, version: i64, rows: &[Vec<Value>]) -> AccountTable {
    let accounts = rows
        .iter()
        .map(|r| NativeAccount {
            user: text(def, r, "user"),
            host: text(def, r, "host"),
            sha2_hash: text(def, r, "sha2_hash"),
            locked: int(def, r, "locked") != 0,
            is_role: int(def, r, "is_role") != 0,
            privs: int(def, r, "privs") as u64,
        })
        .collect();
    AccountTable { version, accounts, ..AccountTable::default() }
}

/// Rows of `mysql.db` (`with_table` false) or `mysql.tables_priv`.
fn grants_from_rows(def: &TableDef, rows: &[Vec<Value>], with_table: bool) -> Vec<ObjectGrant> {
    rows.iter()
        .map(|r| ObjectGrant {
            user: text(def, r, "user"),
            host: text(def, r, "host"),
            db: text(def, r, "db"),
            table: with_table.then(|| text(def, r, "table_name")),
            privs: int(def, r, "privs") as u64,
        })
        .collect()
}

/// Rows of `mysql.role_edges`.
fn roles_from_rows(def: &TableDef, rows: &[Vec<Value>]) -> Vec<RoleGrant> {
    rows.iter()
        .map(|r| RoleGrant {
            role: (text(def, r, "role_user"), text(def, r, "role_host")),
            to: (text(def, r, "to_user"), text(def, r, "to_host")),
            is_default: int(def, r, "is_default") != 0,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use norr_signals::{ColumnDef, ColumnType};

    fn col(name: &str, ty: ColumnType) -> ColumnDef {
        ColumnDef::new(name, ty).not_null()
    }

    fn vc() -> ColumnType {
        ColumnType::Varchar { len: 64, collation: Default::default() }
    }

    #[test]
    fn rows_of_mysql_user_become_accounts() {
        let cols = vec![
            col("user", vc()),
            col("host", vc()),
            col("native_hash", vc()),
            col("sha2_hash", vc()),
            col("plugin", vc()),
            col("privs", ColumnType::BigInt { unsigned: false }),
            col("locked", ColumnType::TinyInt { unsigned: false }),
            col("password_expired", ColumnType::TinyInt { unsigned: false }),
            col("is_role", ColumnType::TinyInt { unsigned: false }),
        ];
        let def = norr_client::table_def("mysql/user", cols, vec![0, 1]);
        let row = |u: &str, h: &str, sha: &str, locked: i64, role: i64| {
            vec![
                Value::str(u),
                Value::str(h),
                Value::str(""),
                Value::str(sha),
                Value::str(""),
                Value::Int(5),
                Value::Int(locked),
                Value::Int(0),
                Value::Int(role),
            ]
        };
        let t = table_from_rows(&def, 7, &[row("app", "%", "ab", 0, 0), row("r", "%", "", 1, 1), vec![]]);
        assert_eq!(t.version, 7);
        assert_eq!(
            t.accounts[0],
            NativeAccount {
                user: "app".into(),
                host: "%".into(),
                sha2_hash: "ab".into(),
                locked: false,
                is_role: false,
                privs: 5
            }
        );
        assert!(t.accounts[1].locked && t.accounts[1].is_role);
        // A short row: empty text and 0, never a panic.
        assert_eq!(t.accounts[2].user, "");
        assert!(!t.accounts[2].locked);
    }

    #[test]
    fn rows_of_grant_and_role_tables_become_grants() {
        let tp = norr_client::table_def(
            "mysql/tables_priv",
            vec![col("user", vc()), col("host", vc()), col("db", vc()), col("table_name", vc()), col("privs", vc())],
            vec![0, 1, 2, 3],
        );
        let g = grants_from_rows(
            &tp,
            &[vec![Value::str("u"), Value::str("%"), Value::str("d"), Value::str("t"), Value::Int(3)]],
            true,
        );
        assert_eq!(
            g,
            vec![ObjectGrant { user: "u".into(), host: "%".into(), db: "d".into(), table: Some("t".into()), privs: 3 }]
        );
        let re = norr_client::table_def(
            "mysql/role_edges",
            ["role_user", "role_host", "to_user", "to_host", "is_default", "with_admin"].map(|n| col(n, vc())).to_vec(),
            vec![0, 1, 2, 3],
        );
        let r = roles_from_rows(
            &re,
            &[["r", "%", "u", "%"].map(Value::str).into_iter().chain([Value::Int(1), Value::Int(0)]).collect()],
        );
        assert_eq!(
            r,
            vec![RoleGrant { role: ("r".into(), "%".into()), to: ("u".into(), "%".into()), is_default: true }]
        );
    }
}
