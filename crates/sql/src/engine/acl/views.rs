//! information_schema's USER_PRIVILEGES, SCHEMA_PRIVILEGES,
//! TABLE_PRIVILEGES and COLUMN_PRIVILEGES: one row per grantee and
//! privilege, from the accounts' system tables. An account sees its own
//! rows; one with global SELECT or CREATE USER sees everyone's.

use super::privs::{Privs, ALL_PRIVS};
use super::{run, Snapshot};
use crate::engine::Engine;
use crate::types::{Session, SqlError};
use norr_signals::Value;

fn grantee(u: &str, h: &str) -> Value {
    Value::str(&format!("'{u}'@'{h}'"))
}

/// One row per privilege in `p` (USAGE when there is none, for the global
/// level as MySQL), each with the leading columns `lead`.
fn expand(out: &mut Vec<Vec<Value>>, lead: Vec<Value>, p: Privs, usage: bool) {
    let grantable = if p.contains(Privs::GRANT_OPTION) { "YES" } else { "NO" };
    let names = p.names();
    if names.is_empty() && usage {
        let mut r = lead.clone();
        r.extend([Value::str("USAGE"), Value::str(grantable)]);
        out.push(r);
    }
    for (bit, name, _) in ALL_PRIVS {
        if *bit != Privs::GRANT_OPTION && p.contains(*bit) {
            let mut r = lead.clone();
            r.extend([Value::str(name), Value::str(grantable)]);
            out.push(r);
        }
    }
}

pub async fn rows(e: &Engine, s: &Session, table: &str) -> Result<Vec<Vec<Value>>, SqlError> {
    let snap = e.acl().current(e).await?;
    let all = run::global_of(&snap, s).intersects(Privs::SELECT | Privs::CREATE_USER);
    let mine =
        |u: &str, h: &str| all || s.account.as_ref().is_some_and(|a| a.user == u && a.host.eq_ignore_ascii_case(h));
    Ok(build(&snap, table, &mine))
}

fn build(snap: &Snapshot, table: &str, mine: &dyn Fn(&str, &str) -> bool) -> Vec<Vec<Value>> {
    let def = || Value::str("def");
    let mut out = Vec::new();
    match table {
        "USER_PRIVILEGES" => {
            for u in snap.users.iter().filter(|u| mine(&u.user, &u.host)) {
                expand(&mut out, vec![grantee(&u.user, &u.host), def()], u.privs, true);
            }
        }
        "SCHEMA_PRIVILEGES" => {
            for g in snap.dbs.iter().filter(|g| mine(&g.user, &g.host)) {
                expand(&mut out, vec![grantee(&g.user, &g.host), def(), Value::str(&g.db)], g.privs, false);
            }
        }
        "TABLE_PRIVILEGES" => {
            for g in snap.tables.iter().filter(|g| mine(&g.user, &g.host)) {
                let lead = vec![grantee(&g.user, &g.host), def(), Value::str(&g.db), Value::str(&g.table)];
                expand(&mut out, lead, g.privs, false);
            }
        }
        _ => {
            for g in snap.columns.iter().filter(|g| mine(&g.user, &g.host)) {
                let lead = vec![
                    grantee(&g.user, &g.host),
                    def(),
                    Value::str(&g.db),
                    Value::str(&g.table),
                    Value::str(&g.column),
                ];
                expand(&mut out, lead, g.privs, false);
            }
        }
    }
    out
}
