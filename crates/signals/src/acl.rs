//! What a native client logged in with a SQL account may do (issue 25 item
//! 4): the account's grants, as the data node's host hands them to TC and
//! DICT (`InternalSignal::ApiGrants`) at the login and again whenever the
//! accounts change. A client that proved the cluster secret (the cluster's
//! own processes: SQL nodes, management, tools given the secret) has no
//! grants and is not checked.
//!
//! Privileges are bits of one integer, the same bits the SQL nodes store in
//! `mysql.user`, `mysql.db` and `mysql.tables_priv` (norr-sql's
//! `acl::privs`; its tests check that the two agree). A table's native name
//! is `db/table`; a name without `/` (a table made through the native API)
//! belongs to no database, and only global grants reach it.

use crate::error::{ErrorCode, NodeError};
use serde::{Deserialize, Serialize};

pub const SELECT: u64 = 1 << 0;
pub const INSERT: u64 = 1 << 1;
pub const UPDATE: u64 = 1 << 2;
pub const DELETE: u64 = 1 << 3;
pub const CREATE: u64 = 1 << 4;
pub const DROP: u64 = 1 << 5;
pub const INDEX: u64 = 1 << 9;
pub const ALTER: u64 = 1 << 10;

/// The SQL name of a privilege bit above (for messages).
pub fn priv_name(bit: u64) -> &'static str {
    match bit {
        SELECT => "SELECT",
        INSERT => "INSERT",
        UPDATE => "UPDATE",
        DELETE => "DELETE",
        CREATE => "CREATE",
        DROP => "DROP",
        INDEX => "INDEX",
        ALTER => "ALTER",
        _ => "this",
    }
}

/// An account's privileges: its own grants and those of its default roles.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grants {
    /// `'user'@'host'`, as messages name the account.
    pub account: String,
    pub global: u64,
    /// (database, privileges).
    pub dbs: Vec<(String, u64)>,
    /// (database, table, privileges).
    pub tables: Vec<(String, String, u64)>,
}

/// A native table name's database and table (`db/table`; no `/`: no database).
pub fn split_name(native: &str) -> (&str, &str) {
    native.split_once('/').unwrap_or(("", native))
}

impl Grants {
    /// Every privilege the account holds on native table `name`.
    pub fn on_table(&self, name: &str) -> u64 {
        let (db, table) = split_name(name);
        let mut p = self.global;
        if !db.is_empty() {
            p |= self.dbs.iter().filter(|(d, _)| d == db).fold(0, |a, (_, b)| a | b);
            p |= self
                .tables
                .iter()
                .filter(|(d, t, _)| d == db && t.eq_ignore_ascii_case(table))
                .fold(0, |a, (_, _, b)| a | b);
        }
        p
    }

    /// Every privilege the account holds on database `db` (CREATE TABLE).
    pub fn on_db(&self, db: &str) -> u64 {
        self.global | self.dbs.iter().filter(|(d, _)| d == db).fold(0, |a, (_, b)| a | b)
    }

    /// Ok if the account holds every bit of `need` on table `name`, else
    /// `AccessDenied` naming the first missing privilege, as MySQL's 1142
    /// does ("SELECT command denied to user 'u'@'h' for table 'd.t'").
    pub fn check_table(&self, name: &str, need: u64) -> Result<(), NodeError> {
        self.check(self.on_table(name), need, name)
    }

    /// The same for an operation on database `db` itself (a new table in it).
    pub fn check_new_table(&self, name: &str, need: u64) -> Result<(), NodeError> {
        self.check(self.on_db(split_name(name).0), need, name)
    }

    fn check(&self, held: u64, need: u64, name: &str) -> Result<(), NodeError> {
        let missing = need & !held;
        if missing == 0 {
            return Ok(());
        }
        let bit = 1u64 << missing.trailing_zeros();
        let (db, table) = split_name(name);
        let what = if db.is_empty() { table.to_string() } else { format!("{db}.{table}") };
        Err(NodeError::with(
            ErrorCode::AccessDenied,
            format!("{} command denied to user {} for table '{what}'", priv_name(bit), self.account),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_add_up_over_levels_and_name_what_is_missing() {
        let g = Grants {
            account: "'app'@'%'".into(),
            global: 0,
            dbs: vec![("shop".into(), SELECT | INSERT)],
            tables: vec![("shop".into(), "Orders".into(), DELETE), ("other".into(), "t".into(), UPDATE)],
        };
        assert_eq!(g.on_table("shop/orders"), SELECT | INSERT | DELETE);
        assert_eq!(g.on_table("shop/items"), SELECT | INSERT);
        assert_eq!(g.on_table("other/t"), UPDATE);
        assert_eq!(g.on_table("t"), 0, "a table of no database: global grants only");
        assert!(g.check_table("shop/orders", SELECT | DELETE).is_ok());
        let e = g.check_table("shop/items", SELECT | UPDATE).unwrap_err();
        assert_eq!(e.code, ErrorCode::AccessDenied);
        assert!(e.to_string().contains("UPDATE command denied to user 'app'@'%' for table 'shop.items'"), "{e}");
        assert!(g.check_new_table("shop/new", CREATE).unwrap_err().to_string().contains("CREATE command denied"));
        let root = Grants { global: u64::MAX, ..Grants::default() };
        assert!(root.check_table("t", SELECT | DROP).is_ok() && root.check_new_table("x/y", CREATE).is_ok());
        assert_eq!(split_name("a/b/c"), ("a", "b/c"));
    }
}
