//! CREATE TEMPORARY TABLE, with MySQL 8.0's semantics: a table only its
//! session sees, that shadows a base table of the same name, and that goes
//! away when the session ends. Owner: catalog engineer.
//!
//! The SQL node keeps no rows, so a temporary table's rows live in an
//! ordinary data-node table under a hidden name,
//! `norr_sys/tmp#<node tag>#<connection id>#<seq>`:
//!
//! * `norr_sys` is no user database (no row in `norr_sys/schemata`), so the
//!   table is in no SHOW TABLES / SHOW DATABASES / information_schema list,
//!   which all start from the user databases.
//! * `<node tag>` names the SQL node (`EngineConfig::node_name`, sanitized
//!   and kept short enough for the data node's 64-byte name limit). A SQL
//!   node that starts sweeps every hidden table of its own tag: those are
//!   the leftovers of an earlier run of the same node that died with
//!   sessions open. Two running SQL nodes must therefore not share a node
//!   name. An engine without a node name (tests) uses `p<pid>` and sweeps
//!   nothing.
//! * `<seq>` is a process-wide counter, so names never repeat within one run
//!   (COM_RESET_CONNECTION keeps the connection id).
//!
//! Each session maps (db, name) to the hidden table's `SqlTable`, whose
//! `db` / `name` are rewritten to the user's names (messages and result
//! metadata show those) while `def.name` stays the hidden one
//! (`SqlTable::native_name`). Name resolution asks the map first; the map
//! is empty in almost every session, and the lookup is then one length test.
//! Every change of the map bumps `TempTables::generation`, which kept plans
//! (prepared SELECTs, `plan_cache`) compare before reuse, so a prepared
//! statement follows a temporary table created or dropped under it.
//!
//! ALTER TABLE, CREATE INDEX and DROP INDEX change the hidden table as they
//! change a base table (`for_ddl` finds it, `store` keeps the new
//! definition in the session). Not supported (1235, a clear refusal rather
//! than a half-working path): renaming a temporary table (RENAME TABLE or
//! ALTER TABLE ... RENAME). Foreign keys (1215) and partitioning (1562) are
//! refused as MySQL does.

use crate::engine::catalog::{PartitionInfo, SqlTable, SqlTableMeta};
use crate::engine::ddl::{build_table, resolve_name};
use crate::engine::error_map::{self, from_client, ErrCtx};
use crate::engine::Engine;
use crate::types::{Session, SqlError, Warning, WarningLevel};
use norr_signals::{ErrorCode, MAX_NAME_LEN};
use sqlparser::ast::{CreateTable, ObjectName, TableConstraint};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Where the hidden tables live: the system "database", never a user one.
const HIDDEN_DB: &str = "norr_sys";
/// First part of every hidden table's name inside `HIDDEN_DB`.
const HIDDEN_PREFIX: &str = "tmp#";
/// Longest node tag kept verbatim; longer names are shortened with a hash.
/// 64 (name limit) - 13 ("norr_sys/tmp#") - 22 ("#" + u32 id + "#" + seq up
/// to 10 digits) = 29.
const MAX_TAG_LEN: usize = 29;

/// Process-wide: hidden names never repeat within one run.
static SEQ: AtomicU64 = AtomicU64::new(1);

/// A session's temporary tables.
#[derive(Default, Debug)]
pub struct TempTables {
    map: HashMap<(String, String), Arc<SqlTable>>,
    generation: u64,
}

impl TempTables {
    /// True in almost every session: the resolution hot path tests only this.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Bumped by every create and drop; kept plans compare it.
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation
    }

    fn insert(&mut self, t: Arc<SqlTable>) {
        self.map.insert((t.db.clone(), t.name.clone()), t);
        self.generation += 1;
    }

    fn remove(&mut self, db: &str, name: &str) -> Option<Arc<SqlTable>> {
        let t = self.map.remove(&(db.to_string(), name.to_string()))?;
        self.generation += 1;
        Some(t)
    }
}

/// The session's temporary table `db.name`, if any.
#[inline]
pub fn lookup(s: &Session, db: &str, name: &str) -> Option<Arc<SqlTable>> {
    if s.temp.is_empty() {
        return None;
    }
    s.temp.map.get(&(db.to_string(), name.to_string())).cloned()
}

/// Resolve `db.name` as a statement of this session sees it: its temporary
/// table first, else the base table.
pub async fn get(e: &Engine, s: &Session, db: &str, name: &str) -> Result<Arc<SqlTable>, SqlError> {
    match lookup(s, db, name) {
        Some(t) => Ok(t),
        None => e.catalog().get(db, name).await,
    }
}

/// The table a DDL statement on `db.name` changes: the session's temporary
/// table of the name, else the base table (fresh from the dictionary when
/// `fresh`: an ALTER builds the new definition from it).
pub async fn for_ddl(e: &Engine, s: &Session, db: &str, name: &str, fresh: bool) -> Result<Arc<SqlTable>, SqlError> {
    if let Some(t) = lookup(s, db, name) {
        return Ok(t);
    }
    if fresh {
        e.catalog().invalidate(db, name);
    }
    e.catalog().get(db, name).await
}

/// Keep the definition a DDL statement gave `t`: a temporary table's in the
/// session, under the user's names (bumping the generation, so kept plans
/// of the old shape are made again), a base table's in the catalog.
/// The DDL kept DICT's AUTO_INCREMENT counter (callers that reset it, a
/// TRUNCATE, forget the SQL node's kept range after this).
pub fn store(e: &Engine, s: &mut Session, t: &SqlTable, def: norr_signals::TableDef) -> Result<(), SqlError> {
    e.auto_inc_cache().carry(t.def.id, t.def.version, def.version);
    if !is_temporary(t) {
        e.catalog().put(def);
        return Ok(());
    }
    let mut n = SqlTable::from_def(def).ok_or_else(|| SqlError::internal("temporary table definition"))?;
    n.db = t.db.clone();
    n.name = t.name.clone();
    s.temp.insert(Arc::new(n));
    Ok(())
}

/// Take the session's temporary `db.name` out of name resolution for a
/// moment (`put_back` returns it); the hidden table stays.
pub fn set_aside(s: &mut Session, db: &str, name: &str) -> Option<Arc<SqlTable>> {
    if s.temp.is_empty() {
        return None;
    }
    s.temp.remove(db, name)
}

/// Undo `set_aside`.
pub fn put_back(s: &mut Session, t: Arc<SqlTable>) {
    debug_assert!(lookup(s, &t.db, &t.name).is_none(), "a set-aside name was taken");
    s.temp.insert(t);
}

/// Whether a table is one of the hidden tables (by its native name).
pub fn is_temporary(t: &SqlTable) -> bool {
    t.def.name.strip_prefix(HIDDEN_DB).and_then(|r| r.strip_prefix('/')).is_some_and(|r| r.starts_with(HIDDEN_PREFIX))
}

/// The SQL node's tag inside hidden names (see the module doc).
fn node_tag(node_name: &str) -> String {
    if node_name.is_empty() {
        return format!("p{}", std::process::id());
    }
    let clean: String =
        node_name.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.:@".contains(c) { c } else { '_' }).collect();
    if clean.len() <= MAX_TAG_LEN {
        return clean;
    }
    // FNV-1a: stable across runs and builds (the sweep depends on that).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in node_name.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{}~{h:016x}", &clean[..MAX_TAG_LEN - 17])
}

/// `norr_sys/tmp#<tag>#` for this engine.
fn node_prefix(e: &Engine) -> String {
    format!("{HIDDEN_DB}/{HIDDEN_PREFIX}{}#", node_tag(&e.config().node_name))
}

fn hidden_name(e: &Engine, s: &Session) -> String {
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let name = format!("{}{}#{seq}", node_prefix(e), s.connection_id);
    debug_assert!(name.len() <= MAX_NAME_LEN, "{name}");
    name
}

/// 1215 ER_CANNOT_ADD_FOREIGN: InnoDB keeps no foreign keys on temporary tables.
fn cannot_add_foreign() -> SqlError {
    SqlError::new(1215, "HY000", "Cannot add foreign key constraint")
}

/// CREATE TEMPORARY TABLE without LIKE or a query (those make a plain
/// definition and come here too): true if made, false when IF NOT EXISTS
/// turned an existing temporary table of the name into a note.
pub async fn create(
    e: &Engine,
    s: &mut Session,
    ct: &CreateTable,
    partition: Option<PartitionInfo>,
) -> Result<bool, SqlError> {
    debug_assert!(ct.temporary);
    let (db, table) = resolve_name(s, &ct.name)?;
    if partition.is_some() {
        return Err(SqlError::new(1562, "HY000", "Cannot create temporary table with partitions"));
    }
    if ct.constraints.iter().any(|c| matches!(c, TableConstraint::ForeignKey(_))) {
        return Err(cannot_add_foreign());
    }
    // Only the session's own temporary tables count: a base table of the
    // name is shadowed, not a conflict (MySQL).
    if lookup(s, &db, &table).is_some() {
        if ct.if_not_exists {
            s.warnings.push(Warning {
                level: WarningLevel::Note,
                code: 1050,
                message: format!("Table '{table}' already exists"),
            });
            return Ok(false);
        }
        return Err(error_map::table_exists(&table));
    }
    let info = e.catalog().db_info(&db).await?.ok_or_else(|| error_map::unknown_db(&db))?;
    let mut plain = ct.clone();
    plain.temporary = false;
    let mut def = build_table(&db, &info.collation, &plain, None, e.config().default_partitions)?;
    def.name = hidden_name(e, s);
    let auto_start = SqlTableMeta::decode(&def.extra).and_then(|m| m.auto_increment_start);
    let created = e.client().create_table(def).await.map_err(|err| from_client(err, &ErrCtx::table(&db, &table)))?;
    if let Some(start) = auto_start.filter(|&x| x > 1) {
        let _ = e.client().bump_auto_inc(created.id, start - 1).await;
    }
    let mut t = SqlTable::from_def(created).ok_or_else(|| SqlError::internal("temporary table definition"))?;
    t.db = db;
    t.name = table;
    s.temp.insert(Arc::new(t));
    Ok(true)
}

/// Drop the session's temporary table `db.name`; false if there is none.
pub async fn drop_one(e: &Engine, s: &mut Session, db: &str, name: &str) -> Result<bool, SqlError> {
    let Some(t) = s.temp.remove(db, name) else {
        return Ok(false);
    };
    match e.client().drop_table(&t.def.name).await {
        Ok(()) => Ok(true),
        Err(err) if err.code() == Some(ErrorCode::NoSuchTable) => Ok(true),
        Err(err) => {
            // Still there: keep it reachable, so that a retry or the
            // session's end can drop it.
            s.temp.insert(t);
            Err(from_client(err, &ErrCtx::table(db, name)))
        }
    }
}

/// DROP TEMPORARY TABLE [IF EXISTS] names: never touches a base table.
pub async fn drop_temporary(
    e: &Engine,
    s: &mut Session,
    names: &[ObjectName],
    if_exists: bool,
) -> Result<crate::types::QueryOutput, SqlError> {
    let all: Vec<(String, String)> = names.iter().map(|n| resolve_name(s, n)).collect::<Result<_, _>>()?;
    let mut missing = Vec::new();
    for (db, name) in all {
        if !drop_one(e, s, &db, &name).await? {
            missing.push(format!("{db}.{name}"));
        }
    }
    if !missing.is_empty() {
        if !if_exists {
            return Err(error_map::unknown_table(&missing.join(",")));
        }
        for m in missing {
            s.warnings.push(Warning { level: WarningLevel::Note, code: 1051, message: format!("Unknown table '{m}'") });
        }
    }
    Ok(crate::types::QueryOutput::ok(0))
}

/// Plain DROP TABLE: drops the session's temporary tables among `names`
/// (a temporary table goes first, as in MySQL) and hands back the others.
pub async fn drop_shadowing(e: &Engine, s: &mut Session, names: &[ObjectName]) -> Result<Vec<ObjectName>, SqlError> {
    if s.temp.is_empty() {
        return Ok(names.to_vec());
    }
    let mut rest = Vec::with_capacity(names.len());
    for n in names {
        let (db, name) = resolve_name(s, n)?;
        if !drop_one(e, s, &db, &name).await? {
            rest.push(n.clone());
        }
    }
    Ok(rest)
}

/// Session end (quit, lost connection, KILL, COM_RESET_CONNECTION): drop
/// every temporary table. A failure leaves the hidden table to the sweep
/// at the next start of this SQL node.
pub async fn drop_all(e: &Engine, s: &mut Session) {
    let all: Vec<Arc<SqlTable>> = s.temp.map.drain().map(|(_, t)| t).collect();
    s.temp.generation += 1;
    for t in all {
        if let Err(err) = e.client().drop_table(&t.def.name).await {
            if err.code() != Some(ErrorCode::NoSuchTable) {
                tracing::warn!("sqld: temporary table {} not dropped at session end: {err}", t.def.name);
            }
        }
    }
}

/// At engine start: drop the hidden tables an earlier run of this SQL node
/// (same node name) left behind; how many.
pub async fn sweep_orphans(e: &Engine) -> Result<usize, SqlError> {
    if e.config().node_name.is_empty() {
        return Ok(0);
    }
    let prefix = node_prefix(e);
    let all = e.client().list_tables().await.map_err(error_map::from_client_plain)?;
    let mut n = 0;
    for d in all.iter().filter(|d| d.name.starts_with(&prefix)) {
        match e.client().drop_table(&d.name).await {
            Ok(()) => n += 1,
            Err(err) if err.code() == Some(ErrorCode::NoSuchTable) => {}
            Err(err) => return Err(error_map::from_client_plain(err)),
        }
    }
    if n > 0 {
        tracing::info!(
            "sqld: dropped {n} temporary table(s) left by an earlier run of node {:?}",
            e.config().node_name
        );
    }
    Ok(n)
}

/// DDL that is not supported on a temporary table: 1235 when `name` is one
/// of the session's (checked before the base-table path would answer 1146
/// or, worse, change a shadowed base table).
pub fn refuse_ddl(s: &Session, name: &ObjectName, what: &str) -> Result<(), SqlError> {
    if s.temp.is_empty() {
        return Ok(());
    }
    let (db, table) = resolve_name(s, name)?;
    if lookup(s, &db, &table).is_some() {
        return Err(SqlError::unsupported(format!("{what} on a temporary table")));
    }
    Ok(())
}

/// SHOW CREATE TABLE's text for a temporary table.
pub fn show_create(t: &SqlTable) -> String {
    let text = crate::engine::show::show_create_table(t);
    match text.strip_prefix("CREATE TABLE ") {
        Some(rest) => format!("CREATE TEMPORARY TABLE {rest}"),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_tags_fit_the_name_limit_and_are_stable() {
        assert_eq!(node_tag("sqld@127.0.0.1:3306"), "sqld@127.0.0.1:3306");
        assert_eq!(node_tag("a/b#c d"), "a_b_c_d");
        let long = "x".repeat(100);
        let t = node_tag(&long);
        assert_eq!(t.len(), MAX_TAG_LEN);
        assert_eq!(t, node_tag(&long));
        assert_ne!(t, node_tag(&"x".repeat(99)));
        let worst = format!("norr_sys/tmp#{t}#{}#{}", u32::MAX, u64::from(u32::MAX) * 2);
        assert!(worst.len() <= MAX_NAME_LEN, "{worst}");
        assert!(node_tag("").starts_with('p'));
    }
}
