//! Executing the account statements (`stmt::AclStmt`) and SHOW GRANTS.

use super::privs::{Level, Privs};
use super::stmt::{Account, AclStmt, Auth, PrivItem, RoleSpec, Target, UserOpts};
use super::store::{self, lit};
use super::{cannot_user, needs, quoted, SessionAccount, Snapshot};
use crate::engine::Engine;
use crate::types::{ColumnMeta, QueryOutput, Session, SqlError, Warning, WarningLevel};
use norr_signals::Value;
use std::sync::Arc;

/// The grantees whose privileges the session has (None: an in-process
/// session, which has them all).
pub fn who(snap: &Snapshot, a: &SessionAccount) -> Vec<(String, String)> {
    let active = match &a.active_roles {
        Some(r) => r.clone(),
        None => snap.default_roles(&a.me()),
    };
    snap.grantees(&a.me(), &active)
}

/// The session's global privileges (everything for an in-process session).
pub fn global_of(snap: &Snapshot, s: &Session) -> Privs {
    match &s.account {
        None => Privs(u64::MAX),
        Some(a) => snap.global_privs(&who(snap, a)),
    }
}

fn require_global(snap: &Snapshot, s: &Session, p: Privs, name: &str) -> Result<(), SqlError> {
    if global_of(snap, s).intersects(p) {
        Ok(())
    } else {
        Err(needs(name))
    }
}

fn is_self(s: &Session, a: &Account) -> bool {
    s.account.as_ref().is_some_and(|me| me.user == a.0 && me.host.eq_ignore_ascii_case(&a.1))
}

fn bq(a: &Account) -> String {
    format!("`{}`@`{}`", a.0.replace('`', "``"), a.1.replace('`', "``"))
}

fn where_user(a: &Account) -> String {
    format!("user = {} AND host = {}", lit(&a.0), lit(&a.1))
}

/// Whether `p` is within the bits a BIGINT keeps (they all are: bits < 63).
fn mask_out(p: Privs) -> i64 {
    (!p.0 & (i64::MAX as u64)) as i64
}

pub async fn execute(e: &Engine, s: &mut Session, st: &AclStmt) -> Result<QueryOutput, SqlError> {
    let snap = e.acl().current(e).await?;
    match st {
        AclStmt::CreateUser { if_not_exists, users, opts } => {
            require_global(&snap, s, Privs::CREATE_USER, "CREATE USER")?;
            create(e, s, &snap, users, opts, *if_not_exists, false).await
        }
        AclStmt::CreateRole { if_not_exists, roles } => {
            require_global(&snap, s, Privs::CREATE_USER | Privs::CREATE_ROLE, "CREATE USER or CREATE ROLE")?;
            let users: Vec<(Account, Option<Auth>)> = roles.iter().map(|r| (r.clone(), None)).collect();
            let opts = UserOpts { lock: Some(true), ..Default::default() };
            create(e, s, &snap, &users, &opts, *if_not_exists, true).await
        }
        AclStmt::AlterUser { if_exists, users, opts } => alter(e, s, &snap, users, opts, *if_exists).await,
        AclStmt::SetPassword { user, password } => {
            let auth = Some(Auth::Password { plugin: None, password: password.clone() });
            let opts = UserOpts::default();
            alter(e, s, &snap, &[(user.clone(), auth)], &opts, false).await
        }
        AclStmt::DropUser { if_exists, users, role } => {
            let (p, name, op) = if *role {
                (Privs::CREATE_USER | Privs::DROP_ROLE, "CREATE USER or DROP ROLE", "DROP ROLE")
            } else {
                (Privs::CREATE_USER, "CREATE USER", "DROP USER")
            };
            require_global(&snap, s, p, name)?;
            let mut failed = Vec::new();
            let mut stmts = Vec::new();
            for a in users {
                if snap.user(&a.0, &a.1).is_none() {
                    note_or_fail(s, a, *if_exists, 3162, "does not exist", &mut failed);
                    continue;
                }
                stmts.extend(drop_stmts(a));
            }
            if !failed.is_empty() {
                return Err(cannot_user(op, &failed.join(",")));
            }
            apply(e, stmts).await
        }
        AclStmt::RenameUser(pairs) => {
            require_global(&snap, s, Privs::CREATE_USER, "CREATE USER")?;
            let mut failed = Vec::new();
            let mut stmts = Vec::new();
            for (from, to) in pairs {
                if snap.user(&from.0, &from.1).is_none() || snap.user(&to.0, &to.1).is_some() {
                    failed.push(quoted(&from.0, &from.1));
                    continue;
                }
                stmts.extend(rename_stmts(from, to));
            }
            if !failed.is_empty() {
                return Err(cannot_user("RENAME USER", &failed.join(",")));
            }
            apply(e, stmts).await
        }
        AclStmt::Grant { items, target, to, grant_option } => {
            grant(e, s, &snap, items, target, to, *grant_option, false).await
        }
        AclStmt::Revoke { items, target, from, grant_option } => {
            grant(e, s, &snap, items, target, from, *grant_option, true).await
        }
        AclStmt::GrantRole { roles, to, admin } => {
            require_global(&snap, s, Privs::SUPER, "SUPER or ROLE_ADMIN")?;
            let mut stmts = Vec::new();
            for r in roles {
                if snap.user(&r.0, &r.1).is_none() {
                    return Err(unknown_auth_id(r));
                }
                for u in to {
                    if snap.user(&u.0, &u.1).is_none() {
                        return Err(unknown_auth_id(u));
                    }
                    if r == u {
                        return Err(SqlError::new(
                            3573,
                            "HY000",
                            format!(
                                "Renaming of a role identifier is forbidden: {} cannot be granted to itself",
                                bq(r)
                            ),
                        ));
                    }
                    stmts.push(format!(
                        "INSERT INTO mysql.role_edges VALUES ({}, {}, {}, {}, 0, {}) \
                         ON DUPLICATE KEY UPDATE with_admin = GREATEST(with_admin, {})",
                        lit(&r.0),
                        lit(&r.1),
                        lit(&u.0),
                        lit(&u.1),
                        *admin as u8,
                        *admin as u8
                    ));
                }
            }
            apply(e, stmts).await
        }
        AclStmt::RevokeRole { roles, from } => {
            require_global(&snap, s, Privs::SUPER, "SUPER or ROLE_ADMIN")?;
            let mut stmts = Vec::new();
            for r in roles {
                for u in from {
                    if !snap.roles.iter().any(|x| &x.role == r && &x.to == u) {
                        return Err(not_granted(r, u));
                    }
                    stmts.push(format!("DELETE FROM mysql.role_edges WHERE {}", edge_where(r, u)));
                }
            }
            apply(e, stmts).await
        }
        AclStmt::SetRole(spec) => {
            let Some(a) = s.account.as_mut() else {
                return Err(SqlError::unsupported("SET ROLE in a session without an account"));
            };
            let me = a.me();
            a.active_roles = match spec {
                RoleSpec::Default => None,
                RoleSpec::None => Some(Vec::new()),
                RoleSpec::All => Some(snap.granted_roles(&me)),
                RoleSpec::List(l) => {
                    let granted = snap.granted_roles(&me);
                    for r in l {
                        if !granted.contains(r) {
                            return Err(not_granted(r, &me));
                        }
                    }
                    Some(l.clone())
                }
            };
            Ok(QueryOutput::ok(0))
        }
        AclStmt::SetDefaultRole { roles, to } => {
            let mut stmts = Vec::new();
            for u in to {
                if !is_self(s, u) {
                    require_global(&snap, s, Privs::CREATE_USER, "CREATE USER")?;
                }
                if snap.user(&u.0, &u.1).is_none() {
                    return Err(unknown_auth_id(u));
                }
                let edges = format!(
                    "UPDATE mysql.role_edges SET is_default = {{}} WHERE to_user = {} AND to_host = {}",
                    lit(&u.0),
                    lit(&u.1)
                );
                match roles {
                    RoleSpec::Default => return Err(crate::engine::error_map::parse_error_near("DEFAULT")),
                    RoleSpec::None => stmts.push(edges.replace("{}", "0")),
                    RoleSpec::All => stmts.push(edges.replace("{}", "1")),
                    RoleSpec::List(l) => {
                        stmts.push(edges.replace("{}", "0"));
                        for r in l {
                            if !snap.roles.iter().any(|x| &x.role == r && &x.to == u) {
                                return Err(not_granted(r, u));
                            }
                            stmts
                                .push(format!("UPDATE mysql.role_edges SET is_default = 1 WHERE {}", edge_where(r, u)));
                        }
                    }
                }
            }
            apply(e, stmts).await
        }
        AclStmt::ShowGrants { user, using } => show_grants(s, &snap, user.as_ref(), using),
    }
}

/// Write `stmts` (one transaction, version bumped): the statement's OK.
async fn apply(e: &Engine, stmts: Vec<String>) -> Result<QueryOutput, SqlError> {
    store::change(e, stmts).await.map(|_| QueryOutput::ok(0))
}

/// IF [NOT] EXISTS met an account that is (not) there: with the clause a
/// note (`code`, `what` as MySQL words it), without it the account joins
/// the statement's error list.
fn note_or_fail(s: &mut Session, a: &Account, if_clause: bool, code: u16, what: &str, failed: &mut Vec<String>) {
    if if_clause {
        s.warnings.push(Warning {
            level: WarningLevel::Note,
            code,
            message: format!("Authorization ID {} {what}.", quoted(&a.0, &a.1)),
        });
    } else {
        failed.push(quoted(&a.0, &a.1));
    }
}

/// The role_edges rows of role `r` granted to `to`.
fn edge_where(r: &Account, to: &Account) -> String {
    format!(
        "role_user = {} AND role_host = {} AND to_user = {} AND to_host = {}",
        lit(&r.0),
        lit(&r.1),
        lit(&to.0),
        lit(&to.1)
    )
}

/// GRANT at one level: the row keyed `key` (its values in column order)
/// gets `p` added, made if absent.
fn add_privs(table: &str, key: &[String], p: Privs) -> String {
    format!(
        "INSERT INTO mysql.{table} VALUES ({}, {p}) ON DUPLICATE KEY UPDATE privs = privs | {p}",
        key.join(", "),
        p = p.0
    )
}

/// REVOKE at one level: the rows matching `cond` lose `p`.
fn remove_privs(table: &str, cond: &str, p: Privs) -> String {
    format!("UPDATE mysql.{table} SET privs = privs & {} WHERE {cond}", mask_out(p))
}

/// The rows matching `cond` that have no privilege left.
fn drop_empty(table: &str, cond: &str) -> String {
    format!("DELETE FROM mysql.{table} WHERE {cond} AND privs = 0")
}

fn unknown_auth_id(a: &Account) -> SqlError {
    SqlError::new(3523, "HY000", format!("Unknown authorization ID {}.", bq(a)))
}

fn not_granted(r: &Account, to: &Account) -> SqlError {
    SqlError::new(3530, "HY000", format!("{} is not granted to {}", bq(r), bq(to)))
}

async fn create(
    e: &Engine,
    s: &mut Session,
    snap: &Snapshot,
    users: &[(Account, Option<Auth>)],
    opts: &UserOpts,
    if_not_exists: bool,
    role: bool,
) -> Result<QueryOutput, SqlError> {
    let op = if role { "CREATE ROLE" } else { "CREATE USER" };
    let mut failed = Vec::new();
    let mut stmts = Vec::new();
    for (a, auth) in users {
        if snap.user(&a.0, &a.1).is_some() {
            note_or_fail(s, a, if_not_exists, 3163, "already exists", &mut failed);
            continue;
        }
        let (plugin, password) = match auth {
            None => (None, String::new()),
            Some(Auth::Plugin(p)) => (Some(p.clone()), String::new()),
            Some(Auth::Password { plugin, password }) => (plugin.clone(), password.clone()),
        };
        stmts.push(format!(
            "INSERT INTO mysql.user VALUES ({}, {}, {}, {}, {}, 0, {}, {}, {})",
            lit(&a.0),
            lit(&a.1),
            lit(&store::native_hash(&password)),
            lit(&store::sha2_hash(&password)),
            lit(plugin.as_deref().unwrap_or(crate::protocol::auth::CACHING_SHA2)),
            opts.lock.unwrap_or(false) as u8,
            opts.expire.unwrap_or(false) as u8,
            role as u8
        ));
        if opts.require_ssl == Some(true) {
            stmts.push(format!("INSERT INTO mysql.user_ssl VALUES ({}, {})", lit(&a.0), lit(&a.1)));
        }
    }
    if !failed.is_empty() {
        return Err(cannot_user(op, &failed.join(",")));
    }
    match store::change(e, stmts).await {
        // Another SQL node made the same account in the meantime.
        Err(err) if err.code == 1062 => {
            Err(cannot_user(op, &users.iter().map(|(a, _)| quoted(&a.0, &a.1)).collect::<Vec<_>>().join(",")))
        }
        r => r.map(|_| QueryOutput::ok(0)),
    }
}

async fn alter(
    e: &Engine,
    s: &mut Session,
    snap: &Snapshot,
    users: &[(Option<Account>, Option<Auth>)],
    opts: &UserOpts,
    if_exists: bool,
) -> Result<QueryOutput, SqlError> {
    let mut failed = Vec::new();
    let mut stmts = Vec::new();
    let mut self_password = false;
    for (a, auth) in users {
        let a = match a {
            Some(a) => a.clone(),
            None => match &s.account {
                Some(me) => me.me(),
                None => return Err(SqlError::unsupported("ALTER USER USER() in a session without an account")),
            },
        };
        // Anyone may set their own password; anything else needs CREATE USER.
        let own_password = is_self(s, &a) && opts.lock.is_none() && opts.expire.is_none() && opts.require_ssl.is_none();
        if !own_password {
            require_global(snap, s, Privs::CREATE_USER, "CREATE USER")?;
        }
        if snap.user(&a.0, &a.1).is_none() {
            note_or_fail(s, &a, if_exists, 3162, "does not exist", &mut failed);
            continue;
        }
        let mut sets = Vec::new();
        match auth {
            None => {}
            Some(Auth::Plugin(p)) => sets.push(format!("plugin = {}", lit(p))),
            Some(Auth::Password { plugin, password }) => {
                sets.push(format!("native_hash = {}", lit(&store::native_hash(password))));
                sets.push(format!("sha2_hash = {}", lit(&store::sha2_hash(password))));
                if let Some(p) = plugin {
                    sets.push(format!("plugin = {}", lit(p)));
                }
                // A new password ends PASSWORD EXPIRE, as MySQL.
                if opts.expire.is_none() {
                    sets.push("password_expired = 0".into());
                }
                if is_self(s, &a) {
                    self_password = true;
                }
            }
        }
        if let Some(l) = opts.lock {
            sets.push(format!("locked = {}", l as u8));
        }
        if let Some(x) = opts.expire {
            sets.push(format!("password_expired = {}", x as u8));
        }
        if !sets.is_empty() {
            stmts.push(format!("UPDATE mysql.user SET {} WHERE {}", sets.join(", "), where_user(&a)));
        }
        match opts.require_ssl {
            Some(true) => {
                stmts.push(format!("INSERT IGNORE INTO mysql.user_ssl VALUES ({}, {})", lit(&a.0), lit(&a.1)))
            }
            Some(false) => stmts.push(format!("DELETE FROM mysql.user_ssl WHERE {}", where_user(&a))),
            None => {}
        }
    }
    if !failed.is_empty() {
        return Err(cannot_user("ALTER USER", &failed.join(",")));
    }
    store::change(e, stmts).await?;
    if self_password {
        if let Some(a) = s.account.as_mut() {
            a.password_expired = false;
        }
    }
    Ok(QueryOutput::ok(0))
}

fn drop_stmts(a: &Account) -> Vec<String> {
    let w = where_user(a);
    vec![
        format!("DELETE FROM mysql.user WHERE {w}"),
        format!("DELETE FROM mysql.user_ssl WHERE {w}"),
        format!("DELETE FROM mysql.db WHERE {w}"),
        format!("DELETE FROM mysql.tables_priv WHERE {w}"),
        format!("DELETE FROM mysql.columns_priv WHERE {w}"),
        format!("DELETE FROM mysql.role_edges WHERE role_user = {} AND role_host = {}", lit(&a.0), lit(&a.1)),
        format!("DELETE FROM mysql.role_edges WHERE to_user = {} AND to_host = {}", lit(&a.0), lit(&a.1)),
    ]
}

/// Key columns cannot be updated in place: copy the rows under the new
/// name, then delete the old ones.
fn rename_stmts(from: &Account, to: &Account) -> Vec<String> {
    let w = where_user(from);
    let (nu, nh) = (lit(&to.0), lit(&to.1));
    let mut v = vec![
        format!("INSERT INTO mysql.user SELECT {nu}, {nh}, native_hash, sha2_hash, plugin, privs, locked, password_expired, is_role FROM mysql.user WHERE {w}"),
        format!("INSERT INTO mysql.user_ssl SELECT {nu}, {nh} FROM mysql.user_ssl WHERE {w}"),
        format!("INSERT INTO mysql.db SELECT {nu}, {nh}, db, privs FROM mysql.db WHERE {w}"),
        format!("INSERT INTO mysql.tables_priv SELECT {nu}, {nh}, db, table_name, privs FROM mysql.tables_priv WHERE {w}"),
        format!("INSERT INTO mysql.columns_priv SELECT {nu}, {nh}, db, table_name, column_name, privs FROM mysql.columns_priv WHERE {w}"),
        format!(
            "INSERT INTO mysql.role_edges SELECT {nu}, {nh}, to_user, to_host, is_default, with_admin FROM mysql.role_edges WHERE role_user = {} AND role_host = {}",
            lit(&from.0),
            lit(&from.1)
        ),
        format!(
            "INSERT INTO mysql.role_edges SELECT role_user, role_host, {nu}, {nh}, is_default, with_admin FROM mysql.role_edges WHERE to_user = {} AND to_host = {}",
            lit(&from.0),
            lit(&from.1)
        ),
    ];
    v.extend(drop_stmts(from));
    v
}

/// GRANT and REVOKE of privileges.
#[allow(clippy::too_many_arguments)]
async fn grant(
    e: &Engine,
    s: &mut Session,
    snap: &Snapshot,
    items: &[PrivItem],
    target: &Target,
    users: &[Account],
    grant_option: bool,
    revoke: bool,
) -> Result<QueryOutput, SqlError> {
    let cur_db = || s.current_db.as_deref().map(str::to_string).ok_or_else(crate::engine::error_map::no_db);
    let target = match target {
        Target::Db(None) => Target::Db(Some(cur_db()?)),
        Target::Table(None, t) => Target::Table(Some(cur_db()?), t.clone()),
        t => t.clone(),
    };
    let level = target.level();
    // REVOKE ALL PRIVILEGES, GRANT OPTION FROM u: every level.
    let revoke_everything = revoke
        && grant_option
        && matches!(target, Target::Global)
        && items.len() == 1
        && items[0].privs.is_none()
        && items[0].columns.is_empty();
    let mut privs = if grant_option { Privs::GRANT_OPTION } else { Privs::NONE };
    let mut column_privs: Vec<(String, Privs)> = Vec::new();
    for it in items {
        if it.columns.is_empty() {
            privs |= it.privs.unwrap_or(Privs::all_at(level));
        } else {
            let p = it.privs.unwrap_or(Privs::all_at(Level::Column));
            if !matches!(target, Target::Table(..)) {
                return Err(SqlError::new(
                    1144,
                    "42000",
                    "Illegal GRANT/REVOKE command; column privileges are granted ON a table",
                ));
            }
            p.check_level(Level::Column)?;
            for c in &it.columns {
                match column_privs.iter_mut().find(|(n, _)| n.eq_ignore_ascii_case(c)) {
                    Some((_, x)) => *x |= p,
                    None => column_privs.push((c.clone(), p)),
                }
            }
        }
    }
    if !revoke_everything {
        privs.without_grant_option().check_level(level)?;
    }
    // The granter needs GRANT OPTION and the privileges, at the level or above.
    if let Some(a) = &s.account {
        let w = who(snap, a);
        let mut have = snap.global_privs(&w);
        if let Target::Db(Some(d)) | Target::Table(Some(d), _) = &target {
            have |= snap.db_privs(&w, d);
        }
        if let Target::Table(Some(d), t) = &target {
            have |= snap.table_privs(&w, d, t);
        }
        let wanted = if revoke_everything {
            Privs::CREATE_USER
        } else {
            privs | column_privs.iter().fold(Privs::NONE, |a, (_, p)| a | *p) | Privs::GRANT_OPTION
        };
        let ok = if revoke_everything { have.contains(Privs::CREATE_USER) } else { have.contains(wanted) };
        if !ok {
            let cmd = if revoke { "REVOKE" } else { "GRANT" };
            return Err(match &target {
                Target::Global => needs(if revoke_everything { "CREATE USER" } else { "GRANT OPTION" }),
                Target::Db(Some(d)) => super::db_denied(a, d),
                Target::Table(_, t) => super::table_denied(cmd, a, t),
                Target::Db(None) => unreachable_target(),
            });
        }
    }
    if let Target::Table(Some(d), t) = &target {
        // As MySQL: a grant on a table that does not exist is refused (1146).
        let mut is = e.internal_session();
        e.run_internal(
            &mut is,
            &format!("SELECT 1 FROM `{}`.`{}` LIMIT 0", d.replace('`', "``"), t.replace('`', "``")),
        )
        .await?;
    }
    let mut stmts = Vec::new();
    for u in users {
        if snap.user(&u.0, &u.1).is_none() {
            return Err(if revoke {
                SqlError::new(
                    1141,
                    "42000",
                    format!("There is no such grant defined for user '{}' on host '{}'", u.0, u.1),
                )
            } else {
                SqlError::new(1410, "42000", "You are not allowed to create a user with GRANT")
            });
        }
        let wu = where_user(u);
        if revoke_everything {
            stmts.push(format!("UPDATE mysql.user SET privs = 0 WHERE {wu}"));
            for t in ["db", "tables_priv", "columns_priv"] {
                stmts.push(format!("DELETE FROM mysql.{t} WHERE {wu}"));
            }
            continue;
        }
        let (uu, uh) = (lit(&u.0), lit(&u.1));
        match &target {
            Target::Global => {
                stmts.push(if revoke {
                    remove_privs("user", &wu, privs)
                } else {
                    format!("UPDATE mysql.user SET privs = privs | {} WHERE {wu}", privs.0)
                });
            }
            Target::Db(Some(d)) => {
                let wd = format!("{wu} AND db = {}", lit(d));
                if revoke {
                    if !snap.dbs.iter().any(|g| g.user == u.0 && g.host == u.1 && &g.db == d) {
                        return Err(no_such_grant(u));
                    }
                    stmts.push(remove_privs("db", &wd, privs));
                    stmts.push(drop_empty("db", &wd));
                } else if !privs.is_empty() {
                    stmts.push(add_privs("db", &[uu, uh, lit(d)], privs));
                }
            }
            Target::Table(Some(d), t) => {
                let wt = format!("{wu} AND db = {} AND table_name = {}", lit(d), lit(t));
                if revoke {
                    let has_table = snap
                        .tables
                        .iter()
                        .any(|g| g.user == u.0 && g.host == u.1 && &g.db == d && g.table.eq_ignore_ascii_case(t));
                    let has_cols = snap
                        .columns
                        .iter()
                        .any(|g| g.user == u.0 && g.host == u.1 && &g.db == d && g.table.eq_ignore_ascii_case(t));
                    if !has_table && !has_cols {
                        return Err(no_such_grant(u));
                    }
                    if !privs.is_empty() {
                        stmts.push(remove_privs("tables_priv", &wt, privs));
                        stmts.push(drop_empty("tables_priv", &wt));
                        // Revoking a privilege at table level takes it off every column too.
                        stmts.push(remove_privs("columns_priv", &wt, privs));
                    }
                    for (c, p) in &column_privs {
                        stmts.push(remove_privs("columns_priv", &format!("{wt} AND column_name = {}", lit(c)), *p));
                    }
                    stmts.push(drop_empty("columns_priv", &wt));
                } else {
                    if !privs.is_empty() {
                        stmts.push(add_privs("tables_priv", &[uu.clone(), uh.clone(), lit(d), lit(t)], privs));
                    }
                    if !column_privs.is_empty() {
                        let table = e.catalog().get(d, t).await?;
                        for (c, p) in &column_privs {
                            let Some(col) = table.def.columns.iter().find(|x| x.name.eq_ignore_ascii_case(c)) else {
                                return Err(SqlError::new(1054, "42S22", format!("Unknown column '{c}' in '{t}'")));
                            };
                            stmts.push(add_privs(
                                "columns_priv",
                                &[uu.clone(), uh.clone(), lit(d), lit(t), lit(&col.name)],
                                *p,
                            ));
                        }
                    }
                }
            }
            Target::Db(None) | Target::Table(None, _) => return Err(unreachable_target()),
        }
    }
    apply(e, stmts).await
}

fn unreachable_target() -> SqlError {
    SqlError::internal("grant target without a database")
}

fn no_such_grant(u: &Account) -> SqlError {
    SqlError::new(1141, "42000", format!("There is no such grant defined for user '{}' on host '{}'", u.0, u.1))
}

fn priv_text(p: Privs, level: Level, cols: &[(String, Privs)]) -> String {
    let p = p.without_grant_option();
    let mut parts: Vec<String> = if !p.is_empty() && p == Privs::all_at(level) {
        vec!["ALL PRIVILEGES".into()]
    } else {
        p.names().into_iter().map(String::from).collect()
    };
    for (bit, name, _) in super::privs::ALL_PRIVS {
        let bit = *bit;
        let on: Vec<String> = cols.iter().filter(|(_, cp)| cp.contains(bit)).map(|(c, _)| format!("`{c}`")).collect();
        if !on.is_empty() {
            parts.push(format!("{name} ({})", on.join(", ")));
        }
    }
    if parts.is_empty() {
        "USAGE".into()
    } else {
        parts.join(", ")
    }
}

fn show_grants(
    s: &Session,
    snap: &Snapshot,
    user: Option<&Account>,
    using: &[Account],
) -> Result<QueryOutput, SqlError> {
    let (target, mut using) = match (user, &s.account) {
        (Some(u), _) => (u.clone(), using.to_vec()),
        (None, Some(a)) => {
            let roles = match &a.active_roles {
                Some(r) => r.clone(),
                None => snap.default_roles(&a.me()),
            };
            (a.me(), roles)
        }
        (None, None) => {
            // An in-process session (no login) is not privilege-checked: it
            // has everything, and says so.
            let columns: Arc<[ColumnMeta]> = Arc::from(vec![ColumnMeta::expr(
                &format!("Grants for {}@%", s.user),
                crate::types::FieldType::VarString,
            )]);
            let line = format!("GRANT ALL PRIVILEGES ON *.* TO `{}`@`%` WITH GRANT OPTION", s.user);
            return Ok(QueryOutput::Rows { columns, rows: vec![vec![Value::str(&line)]] });
        }
    };
    if !is_self(s, &target) {
        let own_db = s.account.as_ref().map(|a| snap.db_privs(&who(snap, a), store::DB)).unwrap_or(Privs(u64::MAX));
        if !(global_of(snap, s).intersects(Privs::SELECT | Privs::CREATE_USER) || own_db.contains(Privs::SELECT)) {
            return Err(match &s.account {
                Some(a) => super::db_denied(a, store::DB),
                None => needs("SELECT"),
            });
        }
    }
    if snap.user(&target.0, &target.1).is_none() {
        return Err(no_such_grant(&target));
    }
    for r in &using {
        if !snap.roles.iter().any(|x| &x.role == r && x.to == target) {
            return Err(not_granted(r, &target));
        }
    }
    let mut who = vec![target.clone()];
    who.append(&mut using);
    let who = snap.grantees(&target, &who[1..]);
    let to = bq(&target);
    let mut lines = Vec::new();
    let g = snap.global_privs(&who);
    let wgo = |p: Privs| if p.contains(Privs::GRANT_OPTION) { " WITH GRANT OPTION" } else { "" };
    lines.push(format!("GRANT {} ON *.* TO {to}{}", priv_text(g, Level::Global, &[]), wgo(g)));
    let mut dbs: Vec<&str> =
        snap.dbs.iter().filter(|d| who.iter().any(|w| w.0 == d.user && w.1 == d.host)).map(|d| d.db.as_str()).collect();
    dbs.sort();
    dbs.dedup();
    for d in dbs {
        let p = snap.db_privs(&who, d);
        lines.push(format!("GRANT {} ON `{d}`.* TO {to}{}", priv_text(p, Level::Db, &[]), wgo(p)));
    }
    let mut tables: Vec<(&str, &str)> = snap
        .tables
        .iter()
        .filter(|t| who.iter().any(|w| w.0 == t.user && w.1 == t.host))
        .map(|t| (t.db.as_str(), t.table.as_str()))
        .chain(
            snap.columns
                .iter()
                .filter(|t| who.iter().any(|w| w.0 == t.user && w.1 == t.host))
                .map(|t| (t.db.as_str(), t.table.as_str())),
        )
        .collect();
    tables.sort();
    tables.dedup();
    for (d, t) in tables {
        let p = snap.table_privs(&who, d, t);
        let mut cols: Vec<(String, Privs)> = Vec::new();
        for c in snap
            .columns
            .iter()
            .filter(|c| who.iter().any(|w| w.0 == c.user && w.1 == c.host) && c.db == d && c.table == t)
        {
            match cols.iter_mut().find(|(n, _)| *n == c.column) {
                Some((_, x)) => *x |= c.privs,
                None => cols.push((c.column.clone(), c.privs)),
            }
        }
        // By name: the rows come in the data nodes' scan order.
        cols.sort_by(|x, y| x.0.cmp(&y.0));
        lines.push(format!("GRANT {} ON `{d}`.`{t}` TO {to}{}", priv_text(p, Level::Table, &cols), wgo(p)));
    }
    let mut roles: Vec<_> = snap.roles.iter().filter(|r| r.to == target).collect();
    roles.sort_by(|a, b| a.role.cmp(&b.role));
    for r in roles {
        lines.push(format!("GRANT {} TO {to}{}", bq(&r.role), if r.with_admin { " WITH ADMIN OPTION" } else { "" }));
    }
    let title = format!("Grants for {}@{}", target.0, target.1);
    let columns: Arc<[ColumnMeta]> = Arc::from(vec![ColumnMeta::expr(&title, crate::types::FieldType::VarString)]);
    Ok(QueryOutput::Rows { columns, rows: lines.into_iter().map(|l| vec![Value::str(&l)]).collect() })
}
