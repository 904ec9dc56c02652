//! The statements a read-only transaction refuses whatever they name (1792),
//! as MySQL 8.0 marks them: table, index, database and view DDL, TRUNCATE,
//! OPTIMIZE / REPAIR TABLE, and the account statements (CREATE / ALTER /
//! DROP / RENAME USER, roles, GRANT / REVOKE, SET PASSWORD). Row writes are
//! checked elsewhere (`lock_statements::writes_tables`: a temporary table's
//! rows may change in a read-only transaction, its definition may not).
//!
//! MySQL tests this after the statement's implicit commit, which ends an
//! explicit READ ONLY transaction and returns to the session's
//! @@transaction_read_only: so `START TRANSACTION READ ONLY; CREATE TABLE`
//! commits and creates, while a READ ONLY session refuses every DDL. CREATE
//! / DROP TEMPORARY TABLE make no implicit commit and are refused inside a
//! READ ONLY transaction too.

use crate::engine::acl::stmt::AclStmt;
use crate::engine::table_maintenance::Op;
use crate::engine::view_ddl::ViewStmt;
use crate::engine::Parsed;
use sqlparser::ast::{ObjectType, Statement};

/// When a statement is refused in read-only mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// After its implicit commit: when the session is READ ONLY.
    AfterImplicitCommit,
    /// Without an implicit commit: when the current transaction (or the
    /// session) is READ ONLY.
    InTransaction,
}

/// Whether (and how) `p` is refused in read-only mode; None: not by this rule.
pub fn refused(p: &Parsed) -> Option<Refused> {
    use Refused::*;
    match p {
        Parsed::CreateTable(ct, _) => Some(if ct.temporary { InTransaction } else { AfterImplicitCommit }),
        Parsed::CreateDatabase { .. } => Some(AfterImplicitCommit),
        Parsed::View(ViewStmt::Create(_) | ViewStmt::Drop { .. }) => Some(AfterImplicitCommit),
        Parsed::Maintenance(m) if matches!(m.op, Op::Optimize | Op::Repair) => Some(AfterImplicitCommit),
        Parsed::Lock(crate::engine::lock_statements::LockStmt::AlterKeys(_)) => Some(AfterImplicitCommit),
        Parsed::Acl(
            AclStmt::CreateUser { .. }
            | AclStmt::CreateRole { .. }
            | AclStmt::AlterUser { .. }
            | AclStmt::DropUser { .. }
            | AclStmt::RenameUser(_)
            | AclStmt::Grant { .. }
            | AclStmt::Revoke { .. }
            | AclStmt::GrantRole { .. }
            | AclStmt::RevokeRole { .. }
            | AclStmt::SetPassword { .. },
        ) => Some(AfterImplicitCommit),
        Parsed::Acl(_) => None,
        Parsed::Sql(st) => match st.as_ref() {
            Statement::Drop { object_type: ObjectType::Table, temporary: true, .. } => Some(InTransaction),
            Statement::CreateTable(ct) if ct.temporary => Some(InTransaction),
            Statement::Drop {
                object_type:
                    ObjectType::Table | ObjectType::Database | ObjectType::Schema | ObjectType::Index | ObjectType::View,
                ..
            }
            | Statement::CreateTable(_)
            | Statement::CreateIndex(_)
            | Statement::CreateDatabase { .. }
            | Statement::CreateSchema { .. }
            | Statement::CreateView { .. }
            | Statement::AlterTable(_)
            | Statement::AlterView { .. }
            | Statement::RenameTable(_)
            | Statement::Truncate(_) => Some(AfterImplicitCommit),
            _ => None,
        },
        _ => None,
    }
}
