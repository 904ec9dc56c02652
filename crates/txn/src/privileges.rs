//! Privilege checks of native clients logged in with a SQL account (issue
//! 25 item 4), for TC (key operations, scans) and DICT (schema changes).
//!
//! The data node's host tells both blocks an API node's grants when it logs
//! in, and again whenever the accounts change
//! (`InternalSignal::ApiGrants`); API_FAILREQ forgets them. An API node
//! without grants proved the cluster secret (a SQL node, which checks its
//! own sessions' privileges, or a trusted tool): it is not checked here. The
//! grants come by signal, never read from shared memory, so the blocks stay
//! deterministic state machines.

use norr_kernel::NodeId;
use norr_signals::acl::{self, Grants};
use norr_signals::{DictOp, NodeError, OpKind, TableDef, TableId};
use std::collections::HashMap;

#[derive(Default)]
pub struct Privileges {
    by_api: HashMap<NodeId, Grants>,
}

/// The privileges a key operation of `kind` needs on its table.
pub fn needed(kind: OpKind) -> u64 {
    match kind {
        OpKind::Read => acl::SELECT,
        OpKind::Insert => acl::INSERT,
        OpKind::Update => acl::UPDATE,
        // An upsert inserts or overwrites: both.
        OpKind::Write => acl::INSERT | acl::UPDATE,
        OpKind::Delete => acl::DELETE,
    }
}

impl Privileges {
    /// The grants of `api` from now on; None: not checked (the secret).
    pub fn set(&mut self, api: NodeId, grants: Option<Grants>) {
        match grants {
            Some(g) => self.by_api.insert(api, g),
            None => self.by_api.remove(&api),
        };
    }

    /// `api` is gone (API_FAILREQ): its id may come back with other grants.
    pub fn forget(&mut self, api: NodeId) {
        self.by_api.remove(&api);
    }

    /// A key operation of `api` on `table`.
    pub fn check_op(&self, api: NodeId, table: &TableDef, kind: OpKind) -> Result<(), NodeError> {
        match self.by_api.get(&api) {
            Some(g) => g.check_table(&table.name, needed(kind)),
            None => Ok(()),
        }
    }

    /// The start of a scan of `table` by `api` (SELECT, whatever its lock:
    /// the rows it locks are changed by key operations, checked each).
    pub fn check_scan(&self, api: NodeId, table: &TableDef) -> Result<(), NodeError> {
        match self.by_api.get(&api) {
            Some(g) => g.check_table(&table.name, acl::SELECT),
            None => Ok(()),
        }
    }

    /// A DICT request of `api`: CREATE for a new table (on its database),
    /// DROP for DROP and TRUNCATE (as MySQL), INDEX for indexes, ALTER (and,
    /// for a rename, CREATE on the new name) for ALTER TABLE, INSERT for
    /// AUTO_INCREMENT reservations. Reading definitions, the distribution
    /// and statistics needs nothing (a client cannot plan without them).
    /// `name_of`: a table id's name (None: unknown, left to DICT's own
    /// "no such table").
    pub fn check_dict(
        &self,
        api: NodeId,
        op: &DictOp,
        name_of: impl Fn(TableId) -> Option<String>,
    ) -> Result<(), NodeError> {
        let Some(g) = self.by_api.get(&api) else { return Ok(()) };
        match op {
            DictOp::CreateTable(def) => g.check_new_table(&def.name, acl::CREATE),
            DictOp::DropTable { name } | DictOp::TruncateTable { name } => g.check_table(name, acl::DROP),
            DictOp::CreateIndex { table, .. } | DictOp::DropIndex { table, .. } => g.check_table(table, acl::INDEX),
            DictOp::AlterTable { table, def, .. } => {
                g.check_table(table, acl::ALTER)?;
                if def.name != *table {
                    g.check_new_table(&def.name, acl::CREATE)?;
                }
                Ok(())
            }
            DictOp::NextAutoInc { table, .. } | DictOp::BumpAutoInc { table, .. } => match name_of(*table) {
                Some(name) => g.check_table(&name, acl::INSERT),
                None => Ok(()),
            },
            DictOp::GetTable { .. } | DictOp::ListTables | DictOp::NodeStats | DictOp::GetDistribution => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use norr_signals::{ColumnType, ErrorCode};

    fn table(name: &str) -> TableDef {
        TableDef { id: 9, ..crate::testkit::table_def(name, 2, &[("k", ColumnType::Int { unsigned: false })]) }
    }

    #[test]
    fn only_accounts_are_checked_and_each_operation_needs_its_privilege() {
        let mut p = Privileges::default();
        let t = table("shop/orders");
        // API node 100 proved the secret: no grants, never checked.
        for k in [OpKind::Read, OpKind::Insert, OpKind::Update, OpKind::Write, OpKind::Delete] {
            assert!(p.check_op(100, &t, k).is_ok());
        }
        let g =
            |bits: u64| Grants { account: "'app'@'%'".into(), dbs: vec![("shop".into(), bits)], ..Grants::default() };
        p.set(101, Some(g(acl::SELECT | acl::INSERT)));
        assert!(p.check_op(101, &t, OpKind::Read).is_ok() && p.check_scan(101, &t).is_ok());
        assert!(p.check_op(101, &t, OpKind::Insert).is_ok());
        for k in [OpKind::Update, OpKind::Write, OpKind::Delete] {
            let e = p.check_op(101, &t, k).unwrap_err();
            assert_eq!(e.code, ErrorCode::AccessDenied, "{k:?}");
        }
        assert!(p.check_op(101, &table("other/t"), OpKind::Read).is_err());
        assert!(p.check_scan(101, &table("other/t")).unwrap_err().to_string().contains("SELECT command denied"));
        // DICT requests.
        let name_of = |id: TableId| (id == 9).then(|| "shop/orders".to_string());
        assert!(p.check_dict(101, &DictOp::NextAutoInc { table: 9, count: 1 }, name_of).is_ok());
        assert!(p.check_dict(101, &DictOp::GetTable { name: "other/t".into() }, name_of).is_ok());
        assert!(p.check_dict(101, &DictOp::DropTable { name: "shop/orders".into() }, name_of).is_err());
        assert!(p.check_dict(101, &DictOp::CreateTable(table("shop/new")), name_of).is_err());
        p.set(101, Some(g(acl::CREATE | acl::DROP | acl::ALTER)));
        assert!(p.check_dict(101, &DictOp::CreateTable(table("shop/new")), name_of).is_ok());
        assert!(p.check_dict(101, &DictOp::TruncateTable { name: "shop/orders".into() }, name_of).is_ok());
        assert!(p.check_dict(101, &DictOp::NextAutoInc { table: 9, count: 1 }, name_of).is_err());
        let alter = |to: &str| DictOp::AlterTable {
            table: "shop/orders".into(),
            def: table(to),
            sources: Vec::new(),
            expect_version: 1,
        };
        assert!(p.check_dict(101, &alter("shop/orders"), name_of).is_ok());
        assert!(p.check_dict(101, &alter("other/orders"), name_of).unwrap_err().to_string().contains("CREATE"));
        // Grants taken away, then the API node gone: its id starts unchecked.
        p.set(101, Some(g(0)));
        assert!(p.check_op(101, &t, OpKind::Read).is_err());
        p.forget(101);
        assert!(p.check_op(101, &t, OpKind::Read).is_ok());
    }
}
