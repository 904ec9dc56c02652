//! Plans a prepared statement keeps between executions (UPDATE / DELETE),
//! so that an execution costs no name resolution or compiling.
//!
//! A kept plan is reused only while it is still what compiling would give:
//! the session's default database is the one it was compiled under, and the
//! catalog still hands out the very table objects it was compiled against
//! (DDL, or a schema-version error that made the catalog forget a table,
//! replaces them), and no temporary table was created or dropped since
//! (`temp_tables`). Statements over information_schema are never kept: their
//! rows are read when the names are resolved.

use crate::engine::catalog::SqlTable;
use crate::engine::query::{resolve_tables, Tables};
use crate::engine::Engine;
use crate::types::{Session, SqlError};
use sqlparser::ast::Statement;
use std::sync::{Arc, Mutex};

struct Kept<T> {
    default_db: Option<Arc<str>>,
    /// `TempTables::generation` when compiled (see `temp_tables`).
    temp_generation: u64,
    tables: Vec<((String, String), Arc<SqlTable>)>,
    plan: Arc<T>,
}

/// One kept plan (empty until the first execution).
pub struct PlanSlot<T>(Mutex<Option<Arc<Kept<T>>>>);

impl<T> Default for PlanSlot<T> {
    fn default() -> Self {
        PlanSlot(Mutex::new(None))
    }
}

impl<T> std::fmt::Debug for PlanSlot<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self.0.lock().map(|g| g.is_some()).unwrap_or(false);
        f.debug_struct("PlanSlot").field("kept", &kept).finish()
    }
}

/// The plan of `st`: the one kept in `slot` if still valid, else compiled
/// (and kept, when there is a slot).
pub async fn plan<T>(
    engine: &Engine,
    session: &Session,
    st: &Statement,
    slot: Option<&PlanSlot<T>>,
    compile: impl FnOnce(&Tables) -> Result<T, SqlError>,
) -> Result<Arc<T>, SqlError> {
    if let Some(slot) = slot {
        let kept = slot.0.lock().ok().and_then(|g| g.clone());
        if let Some(k) = kept {
            if k.default_db == session.current_db
                && k.temp_generation == session.temp.generation()
                && still_current(engine, session, &k.tables).await
            {
                return Ok(k.plan.clone());
            }
        }
    }
    let tables = resolve_tables(engine, session, st).await?;
    let plan = Arc::new(compile(&tables)?);
    if let Some(slot) = slot {
        if tables.virtual_rows.is_empty() {
            let kept = Kept {
                default_db: session.current_db.clone(),
                temp_generation: session.temp.generation(),
                tables: tables.map.iter().map(|(k, t)| (k.clone(), t.clone())).collect(),
                plan: plan.clone(),
            };
            if let Ok(mut g) = slot.0.lock() {
                *g = Some(Arc::new(kept));
            }
        }
    }
    Ok(plan)
}

async fn still_current(engine: &Engine, session: &Session, tables: &[((String, String), Arc<SqlTable>)]) -> bool {
    for ((db, name), t) in tables {
        match crate::engine::temp_tables::get(engine, session, db, name).await {
            Ok(cur) if Arc::ptr_eq(&cur, t) => {}
            _ => return false,
        }
    }
    true
}
