//! The DDL of foreign keys that needs the dictionary: checking a new
//! constraint against its parent, linking parents to children
//! (`FkMeta::referenced_by`, see `fk`), ALTER TABLE ADD / DROP FOREIGN KEY,
//! and the refusals of DROP TABLE, TRUNCATE and DROP INDEX.
//!
//! With `foreign_key_checks = 0` (mysqldump's restore order) a constraint
//! may name a parent that does not exist yet; the parent picks up such
//! children when it is created (`prepare_create` looks through every table).

use crate::engine::catalog::{SqlIndexMeta, SqlTable, SqlTableMeta};
use crate::engine::error_map::{self, from_client, ErrCtx};
use crate::engine::fk::{self, FkRef, ForeignKey};
use crate::engine::Engine;
use crate::types::{QueryOutput, Session, SqlError};
use norr_signals::{ColumnId, ColumnSource, ColumnType, IndexDef, IndexKind, ScanSpec, TableDef, Value};
use sqlparser::ast::ForeignKeyConstraint;

/// @@foreign_key_checks of the session.
pub fn checks_on(s: &Session) -> bool {
    !matches!(crate::engine::vars::get_system_var(s, "foreign_key_checks", false), Some(Value::Int(0)))
}

/// (name, type, nullable) of each column, as `fk::check_child_columns` wants.
fn column_info(def: &TableDef) -> Vec<(String, ColumnType, bool)> {
    def.columns
        .iter()
        .enumerate()
        .map(|(i, c)| (c.name.clone(), c.ty.clone(), c.nullable && !def.primary_key.contains(&(i as ColumnId))))
        .collect()
}

/// Check a constraint's parent: `Ok(true)` if it exists (then it must fit),
/// `Ok(false)` if it does not and checks are off.
async fn check_against_parent(e: &Engine, checks: bool, f: &ForeignKey, child: &SqlTable) -> Result<bool, SqlError> {
    if f.references(&child.db, &child.name) {
        fk::check_parent(f, &column_info(&child.def), child)?;
        return Ok(true);
    }
    match e.catalog().try_get(&f.ref_db, &f.ref_table).await? {
        Some(p) => {
            fk::check_parent(f, &column_info(&child.def), &p)?;
            Ok(true)
        }
        None if checks => Err(fk::cannot_open_parent(&f.ref_table)),
        None => Ok(false),
    }
}

/// CREATE TABLE, before the definition goes to DICT: check its constraints
/// against their parents, refuse a constraint name another table of the
/// database uses (1826), and record the constraints of existing tables that
/// reference the new one (created while it did not exist). Returns the
/// parents to link once the table exists.
pub async fn prepare_create(e: &Engine, s: &Session, def: &mut TableDef) -> Result<Vec<ForeignKey>, SqlError> {
    let Some(mut meta) = SqlTableMeta::decode(&def.extra) else { return Ok(Vec::new()) };
    let me = SqlTable::from_def(def.clone()).ok_or_else(|| SqlError::internal("table name without a database"))?;
    let checks = checks_on(s);
    let all = e.client().list_tables().await.map_err(error_map::from_client_plain)?;
    let others: Vec<SqlTable> = all.into_iter().filter_map(SqlTable::from_def).collect();
    let mut to_link = Vec::new();
    for f in &meta.fk.foreign_keys {
        for o in others.iter().filter(|o| o.db == me.db && o.name != me.name) {
            if o.meta.fk.foreign_keys.iter().any(|x| x.name.eq_ignore_ascii_case(&f.name)) {
                return Err(SqlError::new(
                    1826,
                    "HY000",
                    format!("Duplicate foreign key constraint name '{}'", f.name),
                ));
            }
        }
        let exists = check_against_parent(e, checks, f, &me).await?;
        if f.references(&me.db, &me.name) {
            meta.fk.referenced_by.push(FkRef { db: me.db.clone(), table: me.name.clone(), name: f.name.clone() });
        } else if exists {
            to_link.push(f.clone());
        }
    }
    for o in &others {
        for f in o.meta.fk.foreign_keys.iter().filter(|f| f.references(&me.db, &me.name)) {
            meta.fk.referenced_by.push(FkRef { db: o.db.clone(), table: o.name.clone(), name: f.name.clone() });
        }
    }
    def.extra = meta.encode();
    Ok(to_link)
}

/// Rewrite a table's SQL metadata in the dictionary. The layout is the
/// same, so DICT copies no row; the table version goes up, so every SQL
/// node that cached the table reloads it (1412) before its next write.
///
/// A read-modify-write of the metadata: DICT refuses the write if another
/// change reached the table after our read (two SQL nodes linking children
/// to the same parent at once), and `f` is then applied again to the new
/// metadata, so neither change is lost.
pub async fn update_meta(e: &Engine, db: &str, table: &str, f: impl Fn(&mut SqlTableMeta)) -> Result<(), SqlError> {
    let native = crate::engine::catalog::native_name(db, table);
    for _ in 0..crate::engine::alter::MAX_SCHEMA_RACES {
        let mut def = match e.client().get_table(&native).await {
            Ok(d) => d,
            Err(err) if err.code() == Some(norr_signals::ErrorCode::NoSuchTable) => return Ok(()),
            Err(err) => return Err(from_client(err, &ErrCtx::table(db, table))),
        };
        let Some(mut meta) = SqlTableMeta::decode(&def.extra) else { return Ok(()) };
        f(&mut meta);
        def.extra = meta.encode();
        let sources = (0..def.columns.len()).map(|i| ColumnSource::Old(i as ColumnId)).collect();
        let version = def.version;
        e.catalog().invalidate(db, table);
        match e.client().alter_table(&native, def, sources, version).await {
            Ok(altered) => {
                e.auto_inc_cache().carry(altered.id, version, altered.version);
                e.catalog().put(altered);
                return Ok(());
            }
            Err(err) if crate::engine::alter::lost_schema_race(&err) => continue,
            Err(err) => return Err(from_client(err, &ErrCtx::table(db, table))),
        }
    }
    Err(crate::engine::alter::schema_race_error())
}

/// Add (or remove) `r` in the parent's `referenced_by`; whether the list
/// changed.
pub async fn link(e: &Engine, parent_db: &str, parent: &str, r: FkRef, add: bool) -> Result<bool, SqlError> {
    // Set by the last (successful) application of the update.
    let changed = std::sync::atomic::AtomicBool::new(false);
    update_meta(e, parent_db, parent, |m| {
        let before = m.fk.referenced_by.len();
        m.fk.referenced_by.retain(|x| x != &r);
        let removed = m.fk.referenced_by.len() != before;
        if add {
            m.fk.referenced_by.push(r.clone());
        }
        changed.store(removed != add, std::sync::atomic::Ordering::Relaxed);
    })
    .await?;
    Ok(changed.load(std::sync::atomic::Ordering::Relaxed))
}

/// Before CREATE TABLE: tell each existing parent about the new child.
///
/// First, so that a SQL node dying between the two steps cannot leave a
/// child its parent does not know about (its rows could then lose their
/// parent). The other way round is harmless: enforcement skips an entry
/// whose table is missing or has no such constraint. Returns the entries
/// this added, for `unlink_after_failed_create`.
pub async fn link_before_create(
    e: &Engine,
    db: &str,
    table: &str,
    parents: &[ForeignKey],
) -> Result<Vec<(String, String, FkRef)>, SqlError> {
    let mut added = Vec::new();
    for f in parents {
        let r = FkRef { db: db.to_string(), table: table.to_string(), name: f.name.clone() };
        match link(e, &f.ref_db, &f.ref_table, r.clone(), true).await {
            Ok(true) => added.push((f.ref_db.clone(), f.ref_table.clone(), r)),
            Ok(false) => {}
            Err(err) => {
                unlink_after_failed_create(e, added).await;
                return Err(err);
            }
        }
    }
    Ok(added)
}

/// The CREATE TABLE failed: take back the parents' entries
/// `link_before_create` added (best effort; a left-over entry is skipped).
pub async fn unlink_after_failed_create(e: &Engine, added: Vec<(String, String, FkRef)>) {
    for (db, table, r) in added {
        let _ = link(e, &db, &table, r, false).await;
    }
}

/// Tables that reference `t`, other than `t` itself and those in `except`.
fn other_children<'a>(t: &'a SqlTable, except: &'a [(String, String)]) -> impl Iterator<Item = &'a FkRef> + 'a {
    t.meta.fk.referenced_by.iter().filter(move |r| {
        let itself = r.db == t.db && r.table == t.name;
        let dropped_too = except.iter().any(|(d, n)| *d == r.db && *n == r.table);
        !itself && !dropped_too
    })
}

/// DROP TABLE: 3730 if another table (not dropped by the same statement)
/// references one of `tables`, with checks on.
pub async fn check_drop(e: &Engine, s: &Session, tables: &[(String, String)]) -> Result<(), SqlError> {
    if !checks_on(s) {
        return Ok(());
    }
    for (db, name) in tables {
        e.catalog().invalidate(db, name);
        if let Some(t) = e.catalog().try_get(db, name).await? {
            if let Some(r) = other_children(&t, tables).next() {
                return Err(fk::drop_referenced(name, r));
            }
        }
    }
    Ok(())
}

/// After a table is dropped: its parents forget it.
pub async fn unlink_dropped(e: &Engine, t: &SqlTable) {
    for f in &t.meta.fk.foreign_keys {
        if f.references(&t.db, &t.name) {
            continue;
        }
        let r = FkRef { db: t.db.clone(), table: t.name.clone(), name: f.name.clone() };
        // Best effort: the parent may be gone too; a stale entry only makes
        // a later parent delete look for a table that is not there.
        let _ = link(e, &f.ref_db, &f.ref_table, r, false).await;
    }
}

/// TRUNCATE of a table another table references: 1701 with checks on.
pub fn check_truncate(s: &Session, t: &SqlTable) -> Result<(), SqlError> {
    if !checks_on(s) {
        return Ok(());
    }
    match other_children(t, &[]).next() {
        Some(r) => Err(fk::truncate_referenced(r)),
        None => Ok(()),
    }
}

/// DROP INDEX: 1553 if a constraint of the table needs the index (no other
/// index starts with its columns), or a child's constraint uses it as the
/// parent key.
pub fn check_drop_index(t: &SqlTable, index: &str) -> Result<(), SqlError> {
    let rest: Vec<SqlIndexMeta> =
        t.meta.indexes.iter().filter(|i| !i.name.eq_ignore_ascii_case(index)).cloned().collect();
    for f in &t.meta.fk.foreign_keys {
        if !fk::has_leading_index(&rest, &f.columns) {
            return Err(fk::drop_index_needed(index));
        }
    }
    if let Some(ix) = t.meta.indexes.iter().find(|i| i.name.eq_ignore_ascii_case(index)) {
        if !t.meta.fk.referenced_by.is_empty() && ix.kind == crate::engine::catalog::SqlIndexKind::Unique {
            // Which children use this key is only known from their
            // definitions; refusing for any referenced unique key is the
            // safe side (the PRIMARY KEY cannot be dropped at all).
            return Err(fk::drop_index_needed(index));
        }
    }
    Ok(())
}

/// ALTER TABLE whose operations are all ADD FOREIGN KEY / DROP FOREIGN KEY.
pub fn is_fk_only(at: &sqlparser::ast::AlterTable) -> bool {
    use sqlparser::ast::{AlterTableOperation as Op, TableConstraint};
    !at.operations.is_empty()
        && at.operations.iter().all(|op| {
            matches!(
                op,
                Op::AddConstraint { constraint: TableConstraint::ForeignKey(_), .. } | Op::DropForeignKey { .. }
            )
        })
}

/// True if the ALTER TABLE has a foreign-key operation.
pub fn has_fk_op(at: &sqlparser::ast::AlterTable) -> bool {
    use sqlparser::ast::{AlterTableOperation as Op, TableConstraint};
    at.operations.iter().any(|op| {
        matches!(op, Op::AddConstraint { constraint: TableConstraint::ForeignKey(_), .. } | Op::DropForeignKey { .. })
    })
}

/// ALTER TABLE t ADD [CONSTRAINT n] FOREIGN KEY ... / DROP FOREIGN KEY n.
pub async fn alter_fk(e: &Engine, s: &mut Session, at: &sqlparser::ast::AlterTable) -> Result<QueryOutput, SqlError> {
    use sqlparser::ast::{AlterTableOperation as Op, TableConstraint};
    let (db, table) = crate::engine::ddl::resolve_name(s, &at.name)?;
    for op in &at.operations {
        match op {
            Op::AddConstraint { constraint: TableConstraint::ForeignKey(f), .. } => {
                add_fk(e, s, &db, &table, f).await?;
            }
            Op::DropForeignKey { name, .. } => drop_fk(e, &db, &table, &name.value).await?,
            _ => return Err(SqlError::internal("not a foreign-key operation")),
        }
    }
    Ok(QueryOutput::ok(0))
}

async fn fresh(e: &Engine, db: &str, table: &str) -> Result<std::sync::Arc<SqlTable>, SqlError> {
    e.catalog().invalidate(db, table);
    e.catalog().get(db, table).await
}

async fn add_fk(e: &Engine, s: &Session, db: &str, table: &str, c: &ForeignKeyConstraint) -> Result<(), SqlError> {
    let t = fresh(e, db, table).await?;
    let mut next = fk::max_generated(table, &t.meta.fk.foreign_keys);
    let (f, index_name) = fk::from_ast(c, db, table, &mut next)?;
    if t.meta.partition.is_some() {
        return Err(fk::partitioned());
    }
    fk::check_child_columns(&f, &column_info(&t.def))?;
    if t.meta.fk.foreign_keys.iter().any(|x| x.name.eq_ignore_ascii_case(&f.name)) {
        return Err(SqlError::new(1826, "HY000", format!("Duplicate foreign key constraint name '{}'", f.name)));
    }
    let checks = checks_on(s);
    let parent_exists = check_against_parent(e, checks, &f, &t).await?;
    if checks && parent_exists {
        check_existing_rows(e, &t, &f).await?;
    }
    if !fk::has_leading_index(&t.meta.indexes, &f.columns) {
        let name = index_name.unwrap_or_else(|| {
            let base = f.columns[0].clone();
            let mut n = base.clone();
            let mut k = 2;
            while t.meta.indexes.iter().any(|i| i.name.eq_ignore_ascii_case(&n)) {
                n = format!("{base}_{k}");
                k += 1;
            }
            n
        });
        let columns = f
            .columns
            .iter()
            .map(|c| t.column(c).map(|(id, _, _)| id).ok_or_else(|| error_map::key_column_missing(c)))
            .collect::<Result<Vec<_>, _>>()?;
        let ix = IndexDef { id: 0, name, columns, unique: false, kind: IndexKind::Ordered };
        e.catalog().invalidate(db, table);
        let def = e
            .client()
            .create_index(&t.native_name(), ix)
            .await
            .map_err(|err| from_client(err, &ErrCtx::table(db, table)))?;
        e.auto_inc_cache().carry(def.id, t.def.version, def.version);
        e.catalog().put(def);
    }
    let self_ref = f.references(db, table);
    let r = FkRef { db: db.to_string(), table: table.to_string(), name: f.name.clone() };
    let (pdb, ptable) = (f.ref_db.clone(), f.ref_table.clone());
    let r2 = r.clone();
    // The parent learns of the child first (see `link_before_create`).
    let linked = !self_ref && parent_exists && link(e, &pdb, &ptable, r.clone(), true).await?;
    let added = update_meta(e, db, table, move |m| {
        m.fk.foreign_keys.push(f.clone());
        if self_ref {
            m.fk.referenced_by.push(r2.clone());
        }
    })
    .await;
    if added.is_err() && linked {
        let _ = link(e, &pdb, &ptable, r, false).await;
    }
    added
}

/// Adding a constraint to a table with rows: every row whose referencing
/// columns are all non-NULL must have its parent (1452).
async fn check_existing_rows(e: &Engine, t: &SqlTable, f: &ForeignKey) -> Result<(), SqlError> {
    let cols: Vec<ColumnId> = f.columns.iter().filter_map(|c| t.column(c).map(|(id, _, _)| id)).collect();
    let mut spec = ScanSpec::full(t.def.id);
    spec.table_version = t.def.version;
    spec.projection = cols;
    let rows = e
        .client()
        .scan(spec)
        .await
        .map_err(error_map::from_client_plain)?
        .collect_all()
        .await
        .map_err(error_map::from_client_plain)?;
    let parent = if f.references(&t.db, &t.name) {
        std::sync::Arc::new(t.clone())
    } else {
        e.catalog().get(&f.ref_db, &f.ref_table).await?
    };
    let mut txn = e.client().begin();
    for r in rows {
        if r.iter().any(|v| v.is_null()) {
            continue;
        }
        if !crate::engine::fk_enforce::parent_exists(
            &mut txn,
            f,
            &parent,
            &r,
            norr_signals::LockMode::CommittedRead,
            None,
        )
        .await?
        {
            let _ = txn.rollback().await;
            return Err(fk::no_referenced_row(f, &t.db, &t.name));
        }
    }
    let _ = txn.rollback().await;
    Ok(())
}

async fn drop_fk(e: &Engine, db: &str, table: &str, name: &str) -> Result<(), SqlError> {
    let t = fresh(e, db, table).await?;
    let Some(f) = t.meta.fk.foreign_keys.iter().find(|f| f.name.eq_ignore_ascii_case(name)).cloned() else {
        return Err(error_map::cant_drop_key(name));
    };
    let r = FkRef { db: db.to_string(), table: table.to_string(), name: f.name.clone() };
    let self_ref = f.references(db, table);
    let r2 = r.clone();
    let dropped = f.name.clone();
    update_meta(e, db, table, move |m| {
        m.fk.foreign_keys.retain(|x| x.name != dropped);
        if self_ref {
            m.fk.referenced_by.retain(|x| x != &r2);
        }
    })
    .await?;
    if !self_ref {
        link(e, &f.ref_db, &f.ref_table, r, false).await?;
    }
    Ok(())
}
