//! Enforcing foreign keys inside the statement's transaction (model: `fk`).
//!
//! * A child row written with all referencing columns non-NULL needs its
//!   parent: read by the parent's key with a shared lock held to commit, so
//!   a concurrent parent delete waits for us (and we for it). Missing: 1452.
//! * A parent row deleted, or its referenced columns updated: the row is
//!   already locked exclusively by the write; the referencing rows are found
//!   through the child's index on the referencing columns (the DDL makes
//!   sure one exists) and locked exclusively, then RESTRICT / NO ACTION
//!   fails (1451), CASCADE deletes or updates them, SET NULL sets their
//!   columns NULL, recursively up to InnoDB's depth of 15 (3008).
//!
//! The checks run after the row's own write, as InnoDB's do (a row may
//! reference itself). A failing statement is undone by the caller: in
//! autocommit its transaction is rolled back; inside a transaction the
//! statement runs after a native savepoint and is rolled back to it
//! (`StmtGuard`), which also undoes cascaded changes.
//!
//! Only statements on tables that have or are referenced by foreign keys
//! come here (`active`): everything else keeps its fast paths.

use crate::engine::catalog::SqlTable;
use crate::engine::error_map::{self, ErrCtx};
use crate::engine::exec::{self, Reader, Row};
use crate::engine::expr::value::Coll;
use crate::engine::expr::{CExpr, CmpKind, EvalCtx};
use crate::engine::fk::{self, FkAction, ForeignKey, ParentKey, MAX_CASCADE_DEPTH};
use crate::engine::functions::tz::{SessionZone, Zone};
use crate::engine::partition::PartFn;
use crate::engine::plan;
use crate::engine::query::TableAccess;
use crate::engine::ts_zone;
use crate::engine::Engine;
use crate::types::{Session, SqlError};
use norr_client::{Savepoint, Transaction};
use norr_signals::coerce::coerce_value;
use norr_signals::{ColumnId, ColumnType, ErrorCode, ExecType, KeyAccess, KeyOp, LockMode, OpKind, OpResult, Value};
use std::sync::Arc;

/// True if a write statement on `t` has foreign-key work to do.
pub fn active(s: &Session, t: &SqlTable) -> bool {
    !t.meta.fk.is_empty() && crate::engine::fk_ddl::checks_on(s)
}

/// Column ids of `names` in `t` (names checked at DDL time).
fn col_ids(t: &SqlTable, names: &[String]) -> Option<Vec<ColumnId>> {
    names.iter().map(|n| t.column(n).map(|(id, _, _)| id)).collect()
}

fn coll_of(ty: &ColumnType) -> Coll {
    if ty.is_text() && ty.collation() == norr_signals::Collation::CaseInsensitive {
        Coll::Ci
    } else {
        Coll::Bin
    }
}

/// Is there a parent row for child key values `vals` (in `f.columns`
/// order)? Read with `lock` in `txn`. `zone`: the session zone whose wall
/// time TIMESTAMP values are (None: UTC, or values as stored).
pub async fn parent_exists(
    txn: &mut Transaction,
    f: &ForeignKey,
    parent: &SqlTable,
    vals: &[Value],
    lock: LockMode,
    zone: Option<&Zone>,
) -> Result<bool, SqlError> {
    let Some(key) = fk::parent_key(f, parent) else { return Ok(false) };
    let Some(ids) = col_ids(parent, &f.ref_columns) else { return Ok(false) };
    let mut values = Vec::with_capacity(vals.len());
    for (v, id) in vals.iter().zip(&ids) {
        // A value the parent column cannot hold (longer string, ...) has no parent.
        match coerce_value(v.clone(), &parent.def.columns[*id as usize].ty, false) {
            Ok(v) => values.push(v),
            Err(_) => return Ok(false),
        }
    }
    let key = match key {
        ParentKey::Primary => KeyAccess::Primary(values),
        ParentKey::Unique(index) => KeyAccess::Unique { index, values },
    };
    let op = KeyOp {
        table: parent.def.id,
        table_version: parent.def.version,
        kind: OpKind::Read,
        lock,
        wait: norr_signals::LockWait::Wait,
        key,
        partition: None,
        values: vec![],
        increments: vec![],
        projection: vec![parent.def.primary_key[0]],
        abort_on_error: false,
    };
    let ctx = ErrCtx::table(&parent.db, &parent.name);
    let r = ts_zone::execute(txn, vec![op], ExecType::NoCommit, &parent.def, zone)
        .await
        .map_err(|e| error_map::from_client(e, &ctx))?;
    match r.into_iter().next() {
        Some(OpResult::Ok(Some(_))) => Ok(true),
        Some(OpResult::Ok(None)) => Ok(false),
        Some(OpResult::Err(e)) if e.code == ErrorCode::NoSuchRow => Ok(false),
        Some(OpResult::Err(e)) => Err(error_map::from_node(&e, &ctx)),
        None => Err(SqlError::internal("no result for a parent read")),
    }
}

/// Foreign-key work of one statement.
pub struct Fk<'a> {
    pub engine: &'a Engine,
    /// The session zone (`EvalCtx::tz`): rows and keys hold its wall time.
    pub zone: SessionZone,
}

impl Fk<'_> {
    async fn table(&self, db: &str, name: &str, me: &Arc<SqlTable>) -> Result<Option<Arc<SqlTable>>, SqlError> {
        if me.db == db && me.name == name {
            return Ok(Some(me.clone()));
        }
        self.engine.catalog().try_get(db, name).await
    }

    /// After writing child row `row` of `t`: every constraint whose columns
    /// `changed` touches (None: all) must find its parent (1452).
    pub async fn check_parents(
        &self,
        txn: &mut Transaction,
        t: &Arc<SqlTable>,
        row: &[Value],
        changed: Option<&[ColumnId]>,
    ) -> Result<(), SqlError> {
        for f in &t.meta.fk.foreign_keys {
            let Some(ids) = col_ids(t, &f.columns) else { continue };
            if changed.is_some_and(|ch| !ids.iter().any(|c| ch.contains(c))) {
                continue;
            }
            let vals: Vec<Value> = ids.iter().map(|c| row[*c as usize].clone()).collect();
            if vals.iter().any(|v| v.is_null()) {
                continue;
            }
            let Some(parent) = self.table(&f.ref_db, &f.ref_table, t).await? else {
                return Err(fk::no_referenced_row(f, &t.db, &t.name));
            };
            if !parent_exists(txn, f, &parent, &vals, LockMode::Shared, self.zone.as_deref()).await? {
                return Err(fk::no_referenced_row(f, &t.db, &t.name));
            }
        }
        Ok(())
    }

    /// After deleting row `old` of `t`: apply the ON DELETE actions of the
    /// constraints that reference `t`.
    pub async fn on_delete(
        &self,
        txn: &mut Transaction,
        t: &Arc<SqlTable>,
        old: &[Value],
        ctx: &mut EvalCtx<'_>,
        depth: usize,
    ) -> Result<(), SqlError> {
        self.on_parent_change(txn, t, old, None, ctx, depth).await
    }

    /// After updating row `old` of `t` to `new`: ON UPDATE actions for the
    /// constraints whose referenced columns changed.
    pub async fn on_update(
        &self,
        txn: &mut Transaction,
        t: &Arc<SqlTable>,
        old: &[Value],
        new: &[Value],
        ctx: &mut EvalCtx<'_>,
        depth: usize,
    ) -> Result<(), SqlError> {
        self.on_parent_change(txn, t, old, Some(new), ctx, depth).await
    }

    async fn on_parent_change(
        &self,
        txn: &mut Transaction,
        t: &Arc<SqlTable>,
        old: &[Value],
        new: Option<&[Value]>,
        ctx: &mut EvalCtx<'_>,
        depth: usize,
    ) -> Result<(), SqlError> {
        for r in &t.meta.fk.referenced_by {
            let Some(child) = self.table(&r.db, &r.table, t).await? else { continue };
            let Some(f) = child.meta.fk.foreign_keys.iter().find(|f| f.name == r.name && f.references(&t.db, &t.name))
            else {
                continue;
            };
            let Some(ref_ids) = col_ids(t, &f.ref_columns) else { continue };
            let Some(child_ids) = col_ids(&child, &f.columns) else { continue };
            let old_key: Vec<Value> = ref_ids.iter().map(|c| old[*c as usize].clone()).collect();
            if old_key.iter().any(|v| v.is_null()) {
                continue;
            }
            let new_key: Option<Vec<Value>> = new.map(|n| ref_ids.iter().map(|c| n[*c as usize].clone()).collect());
            if let Some(nk) = &new_key {
                let same = nk.iter().zip(&old_key).zip(&ref_ids).all(|((a, b), c)| {
                    crate::engine::expr::value::group_eq(a, b, coll_of(&t.def.columns[*c as usize].ty)) && a == b
                });
                if same {
                    continue;
                }
            }
            let rows = find_children(txn, &child, &child_ids, &old_key, ctx).await?;
            if rows.is_empty() {
                continue;
            }
            let action = if new.is_some() { f.on_update } else { f.on_delete };
            match action {
                FkAction::NoAction | FkAction::Restrict => {
                    return Err(fk::row_is_referenced(f, &child.db, &child.name))
                }
                _ if depth + 1 > MAX_CASCADE_DEPTH => return Err(fk::depth_exceeded()),
                FkAction::Cascade if new.is_none() => {
                    for row in rows {
                        if delete_row(txn, &child, &row, self.zone.as_deref()).await? {
                            Box::pin(self.on_delete(txn, &child, &row, ctx, depth + 1)).await?;
                        }
                    }
                }
                FkAction::Cascade | FkAction::SetNull => {
                    for row in rows {
                        let mut to = row.clone();
                        for (i, c) in child_ids.iter().enumerate() {
                            to[*c as usize] = match (&new_key, action) {
                                (Some(nk), FkAction::Cascade) => {
                                    let col = &child.def.columns[*c as usize];
                                    coerce_value(nk[i].clone(), &col.ty, col.nullable)
                                        .map_err(|e| error_map::from_node(&e, &ErrCtx::table(&child.db, &child.name)))?
                                }
                                _ => Value::Null,
                            };
                        }
                        // The child's generated columns follow its new key,
                        // and its CHECK constraints see the new row.
                        let mut written = child_ids.clone();
                        crate::engine::check_constraints::complete_row(&child, &mut to, ctx, 1)?;
                        if let Some(g) = &child.generated {
                            written.extend(g.ids().filter(|c| to[*c as usize] != row[*c as usize]));
                        }
                        update_row(txn, &child, &row, &to, &written, self.zone.as_deref()).await?;
                        // The child's own columns may be referenced further down.
                        Box::pin(self.on_update(txn, &child, &row, &to, ctx, depth + 1)).await?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Rows of `child` whose `cols` equal `key`, locked exclusively, through the
/// index the DDL guarantees on those columns.
async fn find_children(
    txn: &mut Transaction,
    child: &Arc<SqlTable>,
    cols: &[ColumnId],
    key: &[Value],
    ctx: &mut EvalCtx<'_>,
) -> Result<Vec<Row>, SqlError> {
    let mut conj = Vec::with_capacity(cols.len());
    for (c, v) in cols.iter().zip(key) {
        let col = &child.def.columns[*c as usize];
        let Ok(v) = coerce_value(v.clone(), &col.ty, true) else { return Ok(Vec::new()) };
        conj.push(CExpr::Cmp(
            CmpKind::Eq,
            Box::new(CExpr::Col(*c as usize)),
            Box::new(CExpr::Lit(v)),
            coll_of(&col.ty),
        ));
    }
    let ta = TableAccess {
        table: child.clone(),
        part: Arc::new(PartFn::build(&child.def, None, &Default::default())?),
        access: plan::choose_access(&child.def, &conj),
        local: conj,
        needed: (0..child.def.columns.len() as ColumnId).collect(),
        lock: crate::engine::row_lock::RowLock::waiting(LockMode::Exclusive),
        compact_local: None,
        only: None,
    };
    let mut rd = Reader::Txn(txn);
    exec::fetch_table(&mut rd, &ta, ctx, None, false).await
}

fn pk(t: &SqlTable, row: &[Value]) -> Vec<Value> {
    t.def.primary_key.iter().map(|c| row[*c as usize].clone()).collect()
}

fn key_op(t: &SqlTable, kind: OpKind, row: &[Value], values: Vec<(ColumnId, Value)>) -> KeyOp {
    KeyOp {
        table: t.def.id,
        table_version: t.def.version,
        kind,
        lock: LockMode::Exclusive,
        wait: norr_signals::LockWait::Wait,
        key: KeyAccess::Primary(pk(t, row)),
        partition: None,
        values,
        increments: vec![],
        projection: vec![],
        abort_on_error: false,
    }
}

async fn run(txn: &mut Transaction, t: &SqlTable, op: KeyOp, zone: Option<&Zone>) -> Result<OpResult, SqlError> {
    let ctx = ErrCtx::table(&t.db, &t.name);
    let r = ts_zone::execute(txn, vec![op], ExecType::NoCommit, &t.def, zone)
        .await
        .map_err(|e| error_map::from_client(e, &ctx))?;
    r.into_iter().next().ok_or_else(|| SqlError::internal("no result"))
}

/// Delete a child row by its key; false if it was gone already (a row
/// reached twice through a cycle).
async fn delete_row(txn: &mut Transaction, t: &SqlTable, row: &[Value], zone: Option<&Zone>) -> Result<bool, SqlError> {
    match run(txn, t, key_op(t, OpKind::Delete, row, vec![]), zone).await? {
        OpResult::Ok(_) => Ok(true),
        OpResult::Err(e) if e.code == ErrorCode::NoSuchRow => Ok(false),
        OpResult::Err(e) => Err(error_map::from_node(&e, &ErrCtx::table(&t.db, &t.name))),
    }
}

/// Set the referencing columns of a child row (delete + insert when they
/// are part of its primary key).
async fn update_row(
    txn: &mut Transaction,
    t: &SqlTable,
    old: &[Value],
    new: &[Value],
    cols: &[ColumnId],
    zone: Option<&Zone>,
) -> Result<(), SqlError> {
    let ctx = ErrCtx::table(&t.db, &t.name);
    let key_changed = cols.iter().any(|c| t.def.primary_key.contains(c));
    let r = if key_changed {
        if !delete_row(txn, t, old, zone).await? {
            return Ok(());
        }
        let all = new.iter().cloned().enumerate().map(|(i, v)| (i as ColumnId, v)).collect();
        run(txn, t, key_op(t, OpKind::Insert, new, all), zone).await?
    } else {
        let vals = cols.iter().map(|c| (*c, new[*c as usize].clone())).collect();
        run(txn, t, key_op(t, OpKind::Update, old, vals), zone).await?
    };
    match r {
        OpResult::Ok(_) => Ok(()),
        OpResult::Err(e) if e.code == ErrorCode::NoSuchRow => Ok(()),
        OpResult::Err(e) => Err(error_map::from_node(&e, &ctx)),
    }
}

/// Statement atomicity for statements with foreign-key work inside an
/// explicit transaction: a native savepoint before, rolled back to on
/// failure (cascaded changes included). In autocommit the statement's own
/// transaction is rolled back by `txn_control::end_statement`.
pub struct StmtGuard(Option<Savepoint>);

impl StmtGuard {
    pub async fn begin(s: &mut Session) -> Result<StmtGuard, SqlError> {
        if !s.in_transaction {
            return Ok(StmtGuard(None));
        }
        let Some(txn) = s.txn.as_mut() else { return Ok(StmtGuard(None)) };
        let sp = txn.savepoint().await.map_err(error_map::from_client_plain)?;
        Ok(StmtGuard(Some(sp)))
    }

    /// Undo the statement if it failed and the transaction is still open.
    pub async fn finish<T>(self, s: &mut Session, res: Result<T, SqlError>) -> Result<T, SqlError> {
        if res.is_err() {
            if let (Some(sp), Some(txn)) = (self.0, s.txn.as_mut()) {
                if !txn.is_finished() {
                    let _ = txn.rollback_to(sp).await;
                }
            }
        }
        res
    }
}
