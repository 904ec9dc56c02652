//! The tables a statement names, found by walking its syntax tree: what
//! privilege checks (`acl::check`), table locks and READ ONLY transactions
//! (`lock_statements`) look at. One walk for all of them, so they agree on
//! what is a table (not a CTE, not DUAL).

use crate::engine::{ddl, infoschema};
use crate::types::{Session, SqlError};
use sqlparser::ast::{self, Expr, ObjectName, Visit, Visitor};
use std::collections::HashSet;
use std::ops::ControlFlow;

/// Table names in a statement, with the CTE names (which are not tables),
/// the column names it mentions (lower-cased) and whether a select list
/// has `*`.
#[derive(Default)]
pub struct Relations {
    pub names: Vec<ObjectName>,
    pub ctes: HashSet<String>,
    pub idents: HashSet<String>,
    pub wildcard: bool,
}

impl Visitor for Relations {
    type Break = ();
    fn pre_visit_query(&mut self, q: &ast::Query) -> ControlFlow<()> {
        if let Some(w) = &q.with {
            for cte in &w.cte_tables {
                self.ctes.insert(cte.alias.name.value.to_ascii_lowercase());
            }
        }
        if let ast::SetExpr::Select(sel) = q.body.as_ref() {
            if sel
                .projection
                .iter()
                .any(|i| matches!(i, ast::SelectItem::Wildcard(_) | ast::SelectItem::QualifiedWildcard(..)))
            {
                self.wildcard = true;
            }
        }
        ControlFlow::Continue(())
    }
    fn pre_visit_relation(&mut self, r: &ObjectName) -> ControlFlow<()> {
        self.names.push(r.clone());
        ControlFlow::Continue(())
    }
    fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
        match e {
            Expr::Identifier(i) => {
                self.idents.insert(i.value.to_ascii_lowercase());
            }
            Expr::CompoundIdentifier(p) => {
                if let Some(l) = p.last() {
                    self.idents.insert(l.value.to_ascii_lowercase());
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// The relations of `x` (a statement, a query, ...).
pub fn of<V: Visit>(x: &V) -> Relations {
    let mut r = Relations::default();
    let _ = x.visit(&mut r);
    r
}

/// (db, table) of a name `rel` holds; None for CTEs, DUAL,
/// information_schema and the session's temporary tables (its own: no
/// other session can reach them, and MySQL checks their privilege once, at
/// creation). An error when the name does not resolve (no database chosen).
pub fn table_of(s: &Session, rel: &Relations, name: &ObjectName) -> Result<Option<(String, String)>, SqlError> {
    let parts = ddl::ident_of(name);
    if parts.len() == 1 && (parts[0].eq_ignore_ascii_case("dual") || rel.ctes.contains(&parts[0].to_ascii_lowercase()))
    {
        return Ok(None);
    }
    let (db, table) = ddl::resolve_name(s, name)?;
    if infoschema::is_infoschema(&db) || crate::engine::temp_tables::lookup(s, &db, &table).is_some() {
        return Ok(None);
    }
    Ok(Some((db, table)))
}
