//! What a statement needs, checked before it runs (`Engine::run_parsed`
//! and the prepared-SELECT path call `check`): 1142 / 1143 for tables and
//! columns, 1044 for databases, 1227 for global privileges, 1820 while the
//! password is expired.
//!
//! A view is checked as a table (SELECT on the view); the tables under it
//! are read with the view's rights, as MySQL's SQL SECURITY DEFINER views.
//! Column privileges are checked against every column name the statement
//! mentions that the table has (a name used only for another table of the
//! same statement counts too: stricter than MySQL, never looser).

use super::privs::Privs;
use super::run::who;
use super::stmt::AclStmt;
use super::{column_denied, db_denied, needs, table_denied, SessionAccount, Snapshot};
use crate::engine::parse_ext::ShowStmt;
use crate::engine::relations::Relations;
use crate::engine::{ddl, infoschema, lock_statements::LockStmt, view_ddl::ViewStmt, Engine, Parsed};
use crate::types::{Session, SqlError};
use sqlparser::ast::{self, ObjectName, Statement, Visit};
use std::collections::HashSet;

/// Privileges a table-level grant at the global level implies for every table.
fn all_table_privs() -> Privs {
    Privs::all_at(super::privs::Level::Table)
}

#[derive(Default)]
struct Needs {
    tables: Vec<(String, String, Privs)>,
    dbs: Vec<(String, Privs)>,
    global: Vec<(Privs, &'static str)>,
    /// Writes to the `mysql` schema (refused: accounts change through
    /// CREATE USER, GRANT, ...).
    system_write: bool,
}

impl Needs {
    fn table(&mut self, db: String, table: String, p: Privs) {
        match self.tables.iter_mut().find(|(d, t, _)| *d == db && t.eq_ignore_ascii_case(&table)) {
            Some((_, _, x)) => *x |= p,
            None => self.tables.push((db, table, p)),
        }
    }
}

fn relations<V: Visit>(x: &V) -> Relations {
    crate::engine::relations::of(x)
}

fn resolve(s: &Session, rel: &Relations, name: &ObjectName) -> Result<Option<(String, String)>, SqlError> {
    crate::engine::relations::table_of(s, rel, name)
}

/// SELECT on every table a statement reads (those not in `skip`).
fn reads(s: &Session, n: &mut Needs, rel: &Relations, skip: &[&ObjectName]) -> Result<(), SqlError> {
    for name in &rel.names {
        if skip.contains(&name) {
            continue;
        }
        if let Some((d, t)) = resolve(s, rel, name)? {
            n.table(d, t, Privs::SELECT);
        }
    }
    Ok(())
}

fn write(s: &Session, n: &mut Needs, rel: &Relations, name: &ObjectName, p: Privs) -> Result<(), SqlError> {
    if let Some((d, t)) = resolve(s, rel, name)? {
        if d.eq_ignore_ascii_case(super::store::DB) {
            n.system_write = true;
        }
        n.table(d, t, p);
    }
    Ok(())
}

/// Tables of FROM / JOIN with their aliases (lower-case alias or name).
fn factors(twj: &ast::TableWithJoins) -> Vec<(&ObjectName, String)> {
    fn one(f: &ast::TableFactor) -> Option<(&ObjectName, String)> {
        if let ast::TableFactor::Table { name, alias, .. } = f {
            let key = alias
                .as_ref()
                .map(|a| a.name.value.to_ascii_lowercase())
                .unwrap_or_else(|| ddl::ident_of(name).last().cloned().unwrap_or_default().to_ascii_lowercase());
            Some((name, key))
        } else {
            None
        }
    }
    std::iter::once(&twj.relation).chain(twj.joins.iter().map(|j| &j.relation)).filter_map(one).collect()
}

fn statement_needs(s: &Session, st: &Statement, n: &mut Needs) -> Result<(), SqlError> {
    let rel = relations(st);
    match st {
        Statement::Query(_) => reads(s, n, &rel, &[])?,
        Statement::Insert(ins) => {
            if let ast::TableObject::TableName(name) = &ins.table {
                let mut p = Privs::INSERT;
                if ins.replace_into {
                    p |= Privs::DELETE;
                }
                if ins.on.is_some() {
                    p |= Privs::UPDATE;
                }
                write(s, n, &rel, name, p)?;
                reads(s, n, &rel, &[name])?;
            } else {
                reads(s, n, &rel, &[])?;
            }
        }
        Statement::Update(u) => {
            let mut tables = factors(&u.table);
            if let Some(ast::UpdateTableFromKind::BeforeSet(f) | ast::UpdateTableFromKind::AfterSet(f)) = &u.from {
                for twj in f {
                    tables.extend(factors(twj));
                }
            }
            let mut written: Vec<&ObjectName> = Vec::new();
            for a in &u.assignments {
                let target = match &a.target {
                    ast::AssignmentTarget::ColumnName(c) => ddl::ident_of(c),
                    ast::AssignmentTarget::Tuple(_) => Vec::new(),
                };
                let table = if target.len() >= 2 {
                    let q = target[target.len() - 2].to_ascii_lowercase();
                    tables.iter().find(|(_, k)| *k == q).map(|(nm, _)| *nm)
                } else {
                    tables.first().map(|(nm, _)| *nm)
                };
                if let Some(t) = table {
                    if !written.contains(&t) {
                        written.push(t);
                    }
                }
            }
            if written.is_empty() {
                if let Some((t, _)) = tables.first() {
                    written.push(t);
                }
            }
            for t in &written {
                write(s, n, &rel, t, Privs::UPDATE)?;
            }
            reads(s, n, &rel, &written)?;
        }
        Statement::Delete(d) => {
            let from = match &d.from {
                ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
            };
            let mut targets: Vec<&ObjectName> = Vec::new();
            if d.tables.is_empty() {
                for twj in from {
                    if let ast::TableFactor::Table { name, .. } = &twj.relation {
                        targets.push(name);
                    }
                }
            } else {
                let mut all = Vec::new();
                for twj in from {
                    all.extend(factors(twj));
                }
                if let Some(u) = &d.using {
                    for twj in u {
                        all.extend(factors(twj));
                    }
                }
                for t in &d.tables {
                    let key = ddl::ident_of(t).last().cloned().unwrap_or_default().to_ascii_lowercase();
                    targets.push(all.iter().find(|(_, k)| *k == key).map(|(nm, _)| *nm).unwrap_or(t));
                }
            }
            for t in &targets {
                write(s, n, &rel, t, Privs::DELETE)?;
            }
            reads(s, n, &rel, &targets)?;
        }
        Statement::Drop { object_type: ast::ObjectType::Table, names, temporary: false, .. } => {
            for nm in names {
                write(s, n, &rel, nm, Privs::DROP)?;
            }
        }
        Statement::Drop { object_type: ast::ObjectType::Database | ast::ObjectType::Schema, names, .. } => {
            if let Some(nm) = names.first() {
                let db = ddl::ident_of(nm).last().cloned().unwrap_or_default();
                if db.eq_ignore_ascii_case(super::store::DB) {
                    n.system_write = true;
                }
                n.dbs.push((db, Privs::DROP));
            }
        }
        Statement::Drop { object_type: ast::ObjectType::Index, table: Some(t), .. } => {
            write(s, n, &rel, t, Privs::INDEX)?
        }
        Statement::CreateIndex(ci) => write(s, n, &rel, &ci.table_name, Privs::INDEX)?,
        Statement::AlterTable(at) => write(s, n, &rel, &at.name, Privs::ALTER)?,
        Statement::RenameTable(pairs) => {
            for p in pairs {
                write(s, n, &rel, &p.old_name, Privs::ALTER | Privs::DROP)?;
                write(s, n, &rel, &p.new_name, Privs::CREATE | Privs::INSERT)?;
            }
        }
        Statement::Truncate(t) => {
            for x in &t.table_names {
                write(s, n, &rel, &x.name, Privs::DROP)?;
            }
        }
        Statement::Explain { statement, .. } => statement_needs(s, statement, n)?,
        Statement::ExplainTable { table_name, .. } => {
            if let Some((d, t)) = resolve(s, &rel, table_name)? {
                n.table(d, t, Privs::NONE);
            }
        }
        Statement::Set(set) => {
            let global = match set {
                ast::Set::SingleAssignment { scope, variable, .. } => is_global(*scope, variable),
                ast::Set::MultipleAssignments { assignments } => {
                    assignments.iter().any(|a| is_global(a.scope, &a.name))
                }
                _ => false,
            };
            if global {
                n.global.push((Privs::SUPER, "SUPER or SYSTEM_VARIABLES_ADMIN"));
            }
        }
        _ => {}
    }
    Ok(())
}

fn is_global(scope: Option<ast::ContextModifier>, name: &ObjectName) -> bool {
    if matches!(scope, Some(ast::ContextModifier::Global)) {
        return true;
    }
    let parts = ddl::ident_of(name);
    match parts.as_slice() {
        [one] => one.to_ascii_lowercase().starts_with("@@global."),
        [sc, _] => sc.eq_ignore_ascii_case("@@global") || sc.eq_ignore_ascii_case("global"),
        _ => false,
    }
}

fn parsed_needs(s: &Session, p: &Parsed, n: &mut Needs) -> Result<(), SqlError> {
    match p {
        Parsed::Sql(st) | Parsed::StartConsistentSnapshot(st) => statement_needs(s, st, n)?,
        Parsed::CreateTable(ct, _) => {
            let rel = relations(ct.as_ref());
            let name = &ct.name;
            write(s, n, &rel, name, Privs::CREATE)?;
            if let Some(like) = &ct.like {
                let src = match like {
                    ast::CreateTableLikeKind::Parenthesized(l) | ast::CreateTableLikeKind::Plain(l) => &l.name,
                };
                if let Some((d, t)) = resolve(s, &rel, src)? {
                    n.table(d, t, Privs::SELECT);
                }
            }
            if ct.query.is_some() {
                write(s, n, &rel, name, Privs::INSERT)?;
            }
            reads(s, n, &rel, &[name])?;
        }
        Parsed::CreateDatabase { name, .. } => {
            if name.eq_ignore_ascii_case(super::store::DB) {
                n.system_write = true;
            }
            n.dbs.push((name.clone(), Privs::CREATE));
        }
        Parsed::Show(st) => match st {
            ShowStmt::Columns { db, table, .. }
            | ShowStmt::Index { db, table, .. }
            | ShowStmt::CreateTable { db, table } => {
                let d = match db {
                    Some(d) => d.clone(),
                    None => s.current_db.as_deref().ok_or_else(crate::engine::error_map::no_db)?.to_string(),
                };
                if !infoschema::is_infoschema(&d) {
                    // Any privilege on the table will do (Privs::NONE: see `check`).
                    n.table(d, table.clone(), Privs::NONE);
                }
            }
            ShowStmt::CreateView { db, table } => {
                let d = match db {
                    Some(d) => d.clone(),
                    None => s.current_db.as_deref().ok_or_else(crate::engine::error_map::no_db)?.to_string(),
                };
                n.table(d, table.clone(), Privs::SHOW_VIEW | Privs::SELECT);
            }
            ShowStmt::EngineStatus { .. } => n.global.push((Privs::PROCESS, "PROCESS")),
            _ => {}
        },
        Parsed::Lock(l) => match l {
            LockStmt::Lock(list) => {
                for (name, _) in list {
                    let (d, t) = crate::engine::lock_statements::resolve(s, name)?;
                    n.table(d.clone(), t, Privs::SELECT);
                    n.dbs.push((d, Privs::LOCK_TABLES));
                }
            }
            LockStmt::FlushTables { .. } | LockStmt::FlushPrivileges => n.global.push((Privs::RELOAD, "RELOAD")),
            LockStmt::AlterKeys(name) => {
                let (d, t) = crate::engine::lock_statements::resolve(s, name)?;
                n.table(d, t, Privs::ALTER);
            }
            LockStmt::Unlock => {}
        },
        Parsed::Maintenance(m) => {
            for name in &m.tables {
                let (d, t) = crate::engine::lock_statements::resolve(s, name)?;
                n.table(d, t, Privs::SELECT);
            }
        }
        Parsed::View(v) => match v {
            ViewStmt::Create(cv) => {
                let d = match &cv.db {
                    Some(d) => d.clone(),
                    None => s.current_db.as_deref().ok_or_else(crate::engine::error_map::no_db)?.to_string(),
                };
                let mut p = Privs::CREATE_VIEW;
                if cv.or_replace || cv.alter {
                    p |= Privs::DROP;
                }
                n.table(d, cv.name.clone(), p);
                let rel = relations(cv.query.as_ref());
                reads(s, n, &rel, &[])?;
            }
            ViewStmt::Drop { names, .. } => {
                for name in names {
                    let (d, t) = crate::engine::lock_statements::resolve(s, name)?;
                    n.table(d, t, Privs::DROP);
                }
            }
        },
        Parsed::LoadData(l) => {
            let (d, t) = crate::engine::lock_statements::resolve(s, &l.table)?;
            if d.eq_ignore_ascii_case(super::store::DB) {
                n.system_write = true;
            }
            n.table(d, t, Privs::INSERT);
            if !l.local {
                n.global.push((Privs::FILE, "FILE"));
            }
        }
        Parsed::SelectInto(si) => parsed_needs(s, &si.query, n)?,
        Parsed::Do(q) => {
            let rel = relations(q.as_ref());
            reads(s, n, &rel, &[])?;
        }
        Parsed::SetCharacterSet(_) | Parsed::SqlPrepare(_) | Parsed::Acl(_) => {}
    }
    Ok(())
}

/// Checks the statement against the session's privileges. Only for
/// sessions of a logged-in account (`Session::account`).
pub async fn check(e: &Engine, s: &Session, a: &SessionAccount, p: &Parsed) -> Result<(), SqlError> {
    if a.password_expired && !matches!(p, Parsed::Acl(AclStmt::AlterUser { .. } | AclStmt::SetPassword { .. })) {
        return Err(SqlError::new(
            1820,
            "HY000",
            "You must reset your password using ALTER USER statement before executing this statement.",
        ));
    }
    if matches!(p, Parsed::Acl(_)) {
        // Checked as they run (`run`): what they need depends on the accounts.
        return Ok(());
    }
    let mut n = Needs::default();
    parsed_needs(s, p, &mut n)?;
    if n.system_write {
        return Err(SqlError::unsupported(
            "changing the mysql schema directly (accounts change through CREATE USER, ALTER USER, GRANT, REVOKE, ...)",
        ));
    }
    if n.tables.is_empty() && n.dbs.is_empty() && n.global.is_empty() {
        return Ok(());
    }
    let snap = e.acl().current(e).await?;
    let w = who(&snap, a);
    let global = snap.global_privs(&w);
    for (p, name) in &n.global {
        if !global.intersects(*p) {
            return Err(needs(name));
        }
    }
    for (db, p) in &n.dbs {
        if !(global | snap.db_privs(&w, db)).contains(*p) {
            return Err(db_denied(a, db));
        }
    }
    if global.contains(all_table_privs()) {
        return Ok(());
    }
    for (db, table, need) in &n.tables {
        check_table(e, &snap, &w, a, p, db, table, *need).await?;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn check_table(
    e: &Engine,
    snap: &Snapshot,
    w: &[(String, String)],
    a: &SessionAccount,
    stmt: &Parsed,
    db: &str,
    table: &str,
    p: Privs,
) -> Result<(), SqlError> {
    let have = snap.global_privs(w) | snap.db_privs(w, db) | snap.table_privs(w, db, table);
    let cols = snap.column_privs(w, db, table);
    if p.is_empty() {
        // SHOW COLUMNS / DESCRIBE / SHOW CREATE TABLE: any privilege.
        if have.without_grant_option().is_empty() && cols.is_empty() {
            return Err(table_denied("SELECT", a, table));
        }
        return Ok(());
    }
    let missing = p.minus(have);
    if missing.is_empty() {
        return Ok(());
    }
    let first = missing.names().first().copied().unwrap_or("SELECT");
    let column_level = Privs::SELECT | Privs::INSERT | Privs::UPDATE;
    if cols.is_empty() || !column_level.contains(missing) {
        return Err(table_denied(first, a, table));
    }
    // Column grants: every column of this table the statement names (all of
    // them for `*` or an INSERT without a column list) needs the privilege.
    let Ok(t) = e.catalog().get(db, table).await else {
        return Err(table_denied(first, a, table));
    };
    let table_cols: Vec<String> =
        t.meta.columns.iter().zip(&t.def.columns).filter(|(m, _)| !m.hidden).map(|(_, c)| c.name.clone()).collect();
    let (idents, wildcard, insert_cols, update_cols) = mentioned_columns(stmt);
    for bit in [Privs::SELECT, Privs::INSERT, Privs::UPDATE] {
        if !missing.contains(bit) {
            continue;
        }
        let used: Vec<String> = if bit == Privs::INSERT {
            match &insert_cols {
                Some(l) if !l.is_empty() => l.clone(),
                _ => table_cols.clone(),
            }
        } else if bit == Privs::UPDATE {
            update_cols.clone()
        } else if wildcard {
            table_cols.clone()
        } else {
            table_cols.iter().filter(|c| idents.contains(&c.to_ascii_lowercase())).cloned().collect()
        };
        if used.is_empty() && !cols.iter().any(|(_, cp)| cp.contains(bit)) {
            return Err(table_denied(bit.names()[0], a, table));
        }
        if let Some(err) = column_error(a, bit, &cols, &used, table) {
            return Err(err);
        }
    }
    Ok(())
}

/// Column names a statement mentions, whether it has a `*`, its INSERT
/// column list and its UPDATE targets.
fn mentioned_columns(p: &Parsed) -> (HashSet<String>, bool, Option<Vec<String>>, Vec<String>) {
    let Parsed::Sql(st) = p else {
        return (HashSet::new(), true, None, Vec::new());
    };
    let rel = relations(st.as_ref());
    let (ins, upd) = match st.as_ref() {
        Statement::Insert(i) => {
            (Some(i.columns.iter().filter_map(|c| ddl::ident_of(c).last().cloned()).collect()), Vec::new())
        }
        Statement::Update(u) => (
            None,
            u.assignments
                .iter()
                .filter_map(|a| match &a.target {
                    ast::AssignmentTarget::ColumnName(c) => ddl::ident_of(c).last().cloned(),
                    _ => None,
                })
                .collect(),
        ),
        _ => (None, Vec::new()),
    };
    (rel.idents, rel.wildcard, ins, upd)
}

/// 1143 for the first column of `used` without `p` in `cols`.
fn column_error(
    a: &SessionAccount,
    p: Privs,
    cols: &[(String, Privs)],
    used: &[String],
    table: &str,
) -> Option<SqlError> {
    let name = p.names().first().copied().unwrap_or("SELECT");
    for c in used {
        let lc = c.to_ascii_lowercase();
        if !cols.iter().any(|(n, cp)| *n == lc && cp.contains(p)) {
            return Some(column_denied(name, a, c, table));
        }
    }
    None
}
