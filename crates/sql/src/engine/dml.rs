//! INSERT (multi-row, IGNORE, ON DUPLICATE KEY UPDATE, INSERT ... SELECT),
//! REPLACE, UPDATE and DELETE (WHERE / ORDER BY / LIMIT).
//!
//! Values are converted to the column types with MySQL strict-mode errors
//! (1048, 1264, 1265, 1292, 1364, 1366, 1406) *before* anything is written.
//!
//! Statement atomicity ("no statement is half applied"):
//! * autocommit: the statement is one native transaction; any error rolls it
//!   back (`txn_control::end_statement`).
//! * inside an explicit transaction: write operations are sent with
//!   `abort_on_error = false`, so a failing operation (duplicate key, ...)
//!   does not abort the native transaction. On failure we *compensate*: the
//!   statement's own applied operations are undone in the same transaction
//!   (inserted rows deleted, updated rows written back, deleted rows
//!   re-inserted), the error is returned, and the transaction goes on, as in
//!   MySQL. Errors that abort the native transaction (lock wait timeout, node
//!   failure) roll back the whole transaction, as NDB does.
//!
//! Fast paths (one native round trip in autocommit mode): single-row INSERT
//! with values, `UPDATE t SET k=k+1 WHERE pk=?` (interpreted increment),
//! `UPDATE t SET c=? WHERE pk=?` (read + update in one batch, so "changed"
//! rows are exact), `DELETE FROM t WHERE pk=?`.

use crate::engine::catalog::{SqlDefault, SqlTable};
use crate::engine::error_map::{self, ErrCtx};
use crate::engine::exec::{self, key_partition, Reader, Row};
use crate::engine::expr::compile::{column_sqltype, Compiler, ParamMap, Scope, ScopeCol};
use crate::engine::expr::value::{self as vals, Coll, Num, Warnings};
use crate::engine::expr::{conjuncts, eval, is_row_independent, CExpr, EvalCtx, SqlType};
use crate::engine::fk_enforce::{self, Fk, StmtGuard};
use crate::engine::functions::tz::{SessionZone, Zone};
use crate::engine::partition::PartFn;
use crate::engine::plan::{self, Access};
use crate::engine::plan_cache::{self, PlanSlot};
use crate::engine::query::{resolve_tables, OrderKey, StmtCompiler, TableAccess, Tables};
use crate::engine::store::{col_err, out_of_range, round_to_int, store_col, store_value};
use crate::engine::{
    check_constraints, generated, insert_values, multi_table_dml, scan_order, ts_zone, txn_control, Engine,
};
use crate::types::{QueryOutput, Session, SqlError};
use norr_client::{ClientError, Transaction};
use norr_signals::{
    ColumnId, ColumnType, ErrorCode, ExecType, KeyAccess, KeyOp, LockMode, NodeError, OpKind, OpResult, PartitionId,
    TableDef, Value, MAX_OPS_PER_BATCH,
};
use sqlparser::ast::{self, Expr, Statement};
use std::sync::Arc;

// ---------------------------------------------------------------- helpers

fn table_ctx(t: &SqlTable) -> ErrCtx {
    ErrCtx::table(&t.db, &t.name)
}

fn key_text(vals_: &[Value]) -> String {
    vals_.iter().map(|v| vals::to_string_lossy(v).unwrap_or_else(|| "NULL".into())).collect::<Vec<_>>().join("-")
}

/// The duplicate-key error for a row (PRIMARY, or the unique index it collides on).
fn dup_error(t: &SqlTable, e: &NodeError, row: &[Value]) -> SqlError {
    let mut ctx = table_ctx(t);
    if e.code == ErrorCode::DuplicateKey {
        ctx.key_name = Some("PRIMARY".into());
        ctx.key_value = Some(key_text(&t.def.primary_key.iter().map(|c| row[*c as usize].clone()).collect::<Vec<_>>()));
    } else {
        let uniq: Vec<_> = t.def.indexes.iter().filter(|i| i.unique).collect();
        let ix = uniq.iter().find(|i| e.message.contains(&i.name)).or(uniq.first());
        if let Some(ix) = ix {
            ctx.key_name = Some(ix.name.clone());
            ctx.key_value = Some(key_text(&ix.columns.iter().map(|c| row[*c as usize].clone()).collect::<Vec<_>>()));
        }
    }
    error_map::from_node(e, &ctx)
}

fn is_dup(e: &NodeError) -> bool {
    matches!(e.code, ErrorCode::DuplicateKey | ErrorCode::DuplicateUniqueKey)
}

/// A keyed write (or read) of `t` by primary key. Key and values hold the
/// session zone's wall time for TIMESTAMP columns (`zone`, None: UTC): the
/// op carries their UTC moments (`ts_zone`).
fn op_for(
    zone: Option<&Zone>,
    t: &SqlTable,
    kind: OpKind,
    key: Vec<Value>,
    values: Vec<(ColumnId, Value)>,
    partition: Option<PartitionId>,
) -> KeyOp {
    let mut op = KeyOp {
        table: t.def.id,
        table_version: t.def.version,
        kind,
        lock: LockMode::Exclusive,
        wait: norr_signals::LockWait::Wait,
        key: KeyAccess::Primary(key),
        partition,
        values,
        increments: Vec::new(),
        projection: Vec::new(),
        abort_on_error: false,
    };
    if zone.is_some() {
        ts_zone::ops_to_utc(std::slice::from_mut(&mut op), &t.def, zone);
    }
    op
}

fn pk_of(def: &TableDef, row: &[Value]) -> Vec<Value> {
    def.primary_key.iter().map(|c| row[*c as usize].clone()).collect()
}

/// The user partition of `row` (its TIMESTAMP values wall times of `zone`).
/// 1748 unless `row` belongs to one of the partitions `PARTITION (...)`
/// named (`only`), as MySQL refuses such a write.
fn check_partition_set(
    part: &PartFn,
    t: &SqlTable,
    row: &[Value],
    only: &[PartitionId],
    zone: Option<&Zone>,
) -> Result<(), SqlError> {
    match part.partition_of_local_row(&t.def, row, zone)? {
        Some(p) if !only.contains(&p) => {
            Err(SqlError::new(1748, "HY000", "Found a row not matching the given partition set"))
        }
        _ => Ok(()),
    }
}

fn row_partition(
    part: &PartFn,
    def: &TableDef,
    row: &[Value],
    zone: Option<&Zone>,
) -> Result<Option<PartitionId>, SqlError> {
    if !part.is_user() {
        return Ok(None);
    }
    part.partition_of_local_row(def, row, zone)
}

/// Execute write ops in batches; results in order.
async fn exec_ops(txn: &mut Transaction, ops: Vec<KeyOp>, t: &SqlTable) -> Result<Vec<OpResult>, SqlError> {
    let mut out = Vec::with_capacity(ops.len());
    let mut it = ops.into_iter().peekable();
    while it.peek().is_some() {
        let batch: Vec<KeyOp> = it.by_ref().take(MAX_OPS_PER_BATCH).collect();
        let r = txn.execute(batch, ExecType::NoCommit).await.map_err(|e| error_map::from_client(e, &table_ctx(t)))?;
        out.extend(r);
    }
    Ok(out)
}

/// True if the statement runs as its own native transaction (autocommit, nothing open).
fn autocommit_alone(s: &Session) -> bool {
    s.autocommit && !s.in_transaction && s.txn.is_none()
}

/// Best-effort undo of a statement's applied operations (explicit transactions).
pub(crate) async fn compensate(txn: &mut Transaction, undo: Vec<KeyOp>) {
    if undo.is_empty() || txn.is_finished() {
        return;
    }
    let _ = txn.execute(undo, ExecType::NoCommit).await;
}

// ---------------------------------------------------------------- auto increment

/// `n` consecutive AUTO_INCREMENT values of `t`: from this SQL node's kept
/// range, or reserved in DICT with `prefetch - n` more kept for later
/// statements (`auto_inc_cache`, where why a kept value is never stale).
async fn reserve_auto_inc(engine: &Engine, t: &SqlTable, n: u64, prefetch: u64) -> Result<u64, SqlError> {
    let cache = engine.auto_inc_cache();
    if let Some(first) = cache.take(t.def.id, t.def.version, n) {
        return Ok(first);
    }
    let got = n.max(prefetch);
    let first =
        engine.client().next_auto_inc(t.def.id, got).await.map_err(|e| error_map::from_client(e, &table_ctx(t)))?;
    cache.install(t.def.id, t.def.version, first, got, n);
    Ok(first)
}

/// Raise `t`'s AUTO_INCREMENT counter past the explicit value `used`
/// (one round trip to DICT unless it is known to be past it already).
async fn bump_auto_inc(engine: &Engine, t: &SqlTable, used: u64) -> Result<(), SqlError> {
    let cache = engine.auto_inc_cache();
    if !cache.note_explicit(t.def.id, t.def.version, used) {
        return Ok(());
    }
    engine.client().bump_auto_inc(t.def.id, used).await.map_err(|e| error_map::from_client(e, &table_ctx(t)))?;
    cache.raised(t.def.id, t.def.version, used);
    Ok(())
}

// ---------------------------------------------------------------- INSERT

pub(crate) fn table_scope(t: &SqlTable, alias: &str) -> Scope {
    Scope {
        cols: t
            .def
            .columns
            .iter()
            .zip(&t.meta.columns)
            .zip(&t.enums)
            .enumerate()
            .map(|(i, ((c, m), e))| ScopeCol {
                table: alias.to_lowercase(),
                name: if m.hidden { "\u{0}hidden".into() } else { c.name.clone() },
                ty: SqlType { json: m.sql_type == "json", ..column_sqltype(&c.ty) },
                enums: e.clone(),
                default: Some(crate::engine::default_fn::of_column(t, i)),
            })
            .collect(),
        merged: vec![],
    }
}

/// Rewrite VALUES(col) in ON DUPLICATE KEY UPDATE to a reference to the new row.
fn rewrite_values_fn(e: &mut Expr) {
    let _ = ast::visit_expressions_mut(e, |x| {
        if let Expr::Function(f) = x {
            if f.name.to_string().eq_ignore_ascii_case("values") {
                if let ast::FunctionArguments::List(l) = &f.args {
                    if let Some(ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(Expr::Identifier(id)))) =
                        l.args.first()
                    {
                        *x = Expr::CompoundIdentifier(vec![
                            ast::Ident::new("\u{1}new"),
                            ast::Ident::new(format!("\u{1}{}", id.value)),
                        ]);
                    }
                }
            }
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
}

/// MySQL 8's row alias of an INSERT (`INSERT ... AS new [(a, b)] ON
/// DUPLICATE KEY UPDATE c = new.c` or `c = b`): names for the row being
/// inserted, the modern spelling of VALUES(col). Resolved by rewriting the
/// names to the new-row references VALUES(col) becomes.
struct RowAlias {
    alias: String,
    /// Column alias -> the table column it names (by position in the
    /// INSERT's column list).
    cols: Vec<(String, String)>,
}

impl RowAlias {
    fn new_col(&self, col: &str) -> Expr {
        Expr::CompoundIdentifier(vec![ast::Ident::new("\u{1}new"), ast::Ident::new(format!("\u{1}{col}"))])
    }

    /// The table column a name after `alias.` (or a bare column alias) stands for.
    fn column_for<'a>(&'a self, name: &'a str, bare: bool) -> Option<&'a str> {
        if let Some((_, c)) = self.cols.iter().find(|(a, _)| a.eq_ignore_ascii_case(name)) {
            return Some(c);
        }
        // Without column aliases `alias.col` names the table's columns.
        (!bare && self.cols.is_empty()).then_some(name)
    }

    fn rewrite(&self, e: &mut Expr) {
        let _ = ast::visit_expressions_mut(e, |x| {
            let target = match x {
                Expr::CompoundIdentifier(parts)
                    if parts.len() == 2 && parts[0].value.eq_ignore_ascii_case(&self.alias) =>
                {
                    // Unknown names are left as written: the compiler reports them.
                    self.column_for(&parts[1].value, false).map(str::to_string)
                }
                Expr::Identifier(id) => self.column_for(&id.value, true).map(str::to_string),
                _ => None,
            };
            if let Some(c) = target {
                *x = self.new_col(&c);
            }
            std::ops::ControlFlow::<()>::Continue(())
        });
    }
}

fn insert_row_alias(
    t: &SqlTable,
    aliases: Option<&ast::InsertAliases>,
    target: &[ColumnId],
) -> Result<Option<RowAlias>, SqlError> {
    let Some(a) = aliases else { return Ok(None) };
    let alias = a.row_alias.to_string().trim_matches('`').to_string();
    if alias.eq_ignore_ascii_case(&t.name) {
        return Err(SqlError::new(1066, "42000", format!("Not unique table/alias: '{alias}'")));
    }
    let mut cols = Vec::new();
    if let Some(names) = a.col_aliases.as_ref().filter(|n| !n.is_empty()) {
        if !target.is_empty() && names.len() != target.len() {
            return Err(SqlError::new(1136, "21S01", "Column count doesn't match value count at row 1"));
        }
        for (n, c) in names.iter().zip(target) {
            if cols.iter().any(|(x, _): &(String, String)| x.eq_ignore_ascii_case(&n.value)) {
                return Err(SqlError::new(1060, "42S21", format!("Duplicate column name '{}'", n.value)));
            }
            cols.push((n.value.clone(), t.def.columns[*c as usize].name.clone()));
        }
    }
    Ok(Some(RowAlias { alias, cols }))
}

pub(crate) fn assignment_col(t: &SqlTable, a: &ast::Assignment) -> Result<ColumnId, SqlError> {
    let name = match &a.target {
        ast::AssignmentTarget::ColumnName(n) => {
            n.0.last()
                .map(|p| p.as_ident().map(|i| i.value.clone()).unwrap_or_else(|| p.to_string()))
                .unwrap_or_default()
        }
        ast::AssignmentTarget::Tuple(_) => return Err(SqlError::unsupported("tuple assignment")),
    };
    t.column(&name).map(|(id, _, _)| id).ok_or_else(|| error_map::unknown_column(&name, "field list"))
}

enum InsertMode {
    Plain,
    Ignore,
    Replace,
    Upsert(Vec<(ColumnId, CExpr)>),
}

/// The dispatcher's entry point for INSERT and REPLACE.
pub async fn execute_insert(
    engine: &Engine,
    session: &mut Session,
    st: &Statement,
    params: &[Value],
) -> Result<QueryOutput, SqlError> {
    let Statement::Insert(ins) = st else { return Err(SqlError::internal("not an INSERT")) };
    let ast::TableObject::TableName(name) = &ins.table else {
        return Err(SqlError::unsupported("INSERT INTO TABLE FUNCTION"));
    };
    if ins.returning.is_some() {
        return Err(SqlError::unsupported("INSERT ... RETURNING"));
    }
    let tables = resolve_tables(engine, session, st).await?;
    let t = tables.get(name)?;
    let only = match &ins.partitioned {
        Some(names) => {
            let names: Vec<ast::Ident> = names
                .iter()
                .map(|e| match e {
                    Expr::Identifier(i) => Ok(i.clone()),
                    other => Err(SqlError::parse(format!("bad partition name {other}"))),
                })
                .collect::<Result<_, _>>()?;
            crate::engine::query::selected_partitions(&t, &*exec_part(&t)?, &names)?
        }
        None => None,
    };
    let fk_on = fk_enforce::active(session, &t);
    if ins.insert_alias.is_some() && ins.on.is_none() {
        // The alias names nothing then; still check it as MySQL does.
        insert_row_alias(&t, ins.insert_alias.as_ref(), &[])?;
    }
    let pm = ParamMap::from_statement(st);
    if params.len() < pm.count() {
        return Err(SqlError::new(1210, "HY000", "Incorrect arguments to mysqld_stmt_execute"));
    }
    let scope = table_scope(&t, &t.name);

    // Target columns.
    let mut target: Vec<ColumnId> = Vec::new();
    let mut set_exprs: Vec<&Expr> = Vec::new();
    if !ins.assignments.is_empty() {
        for a in &ins.assignments {
            target.push(assignment_col(&t, a)?);
            set_exprs.push(&a.value);
        }
    } else if ins.columns.is_empty() {
        target = t.columns_visible().map(|(id, _, _)| id).collect();
    } else {
        for c in &ins.columns {
            let n =
                c.0.last()
                    .map(|p| p.as_ident().map(|i| i.value.clone()).unwrap_or_else(|| p.to_string()))
                    .unwrap_or_default();
            let id = t.column(&n).map(|(id, _, _)| id).ok_or_else(|| error_map::unknown_column(&n, "field list"))?;
            if target.contains(&id) {
                return Err(SqlError::new(1110, "42000", format!("Column '{n}' specified twice")));
            }
            target.push(id);
        }
    }

    let mut sc = StmtCompiler::new(&tables, pm.clone());
    // Source rows: expressions (VALUES / SET) or a query.
    enum Src {
        Exprs(Vec<Vec<Option<CExpr>>>),
        Query(crate::engine::query::Compiled),
    }
    // VALUES may name the row's own columns (`insert_values`).
    let src = if !set_exprs.is_empty() {
        let mut row = Vec::new();
        for e in set_exprs {
            row.push(compile_value_expr(&mut sc, &scope, e, &pm)?);
        }
        Src::Exprs(vec![row])
    } else {
        let Some(q) = &ins.source else { return Err(SqlError::parse("INSERT without values")) };
        match q.body.as_ref() {
            ast::SetExpr::Values(v) => {
                let mut rows = Vec::with_capacity(v.rows.len());
                for (i, r) in v.rows.iter().enumerate() {
                    if r.content.len() != target.len() && !(target.is_empty() && r.content.is_empty()) {
                        return Err(SqlError::new(
                            1136,
                            "21S01",
                            format!("Column count doesn't match value count at row {}", i + 1),
                        ));
                    }
                    let mut row = Vec::with_capacity(r.content.len());
                    for e in &r.content {
                        row.push(compile_value_expr(&mut sc, &scope, e, &pm)?);
                    }
                    rows.push(row);
                }
                Src::Exprs(rows)
            }
            _ => {
                let mut sc2 = StmtCompiler::new(&tables, pm.clone());
                let root = sc2.compile_query(q, None, crate::engine::row_lock::RowLock::NONE)?;
                let c = sc2.finish(root);
                if c.columns().len() != target.len() {
                    return Err(SqlError::new(1136, "21S01", "Column count doesn't match value count at row 1"));
                }
                Src::Query(c)
            }
        }
    };

    // A generated column takes no value but DEFAULT (3105).
    if let Some(g) = &t.generated {
        let given = |j: usize| match &src {
            Src::Exprs(rows) => rows.iter().any(|r| r.get(j).is_some_and(|v| v.is_some())),
            Src::Query(_) => true,
        };
        if let Some((_, c)) = target.iter().enumerate().find(|(j, c)| g.is_generated(**c) && given(*j)) {
            return Err(generated::value_not_allowed(&t.def.columns[*c as usize].name, &t.name));
        }
    }

    // Mode.
    let mode = if ins.replace_into {
        InsertMode::Replace
    } else if let Some(ast::OnInsert::DuplicateKeyUpdate(assigns)) = &ins.on {
        let mut both = scope.clone();
        for c in &scope.cols {
            // Reachable only through VALUES(col), never as a bare name.
            both.cols.push(ScopeCol {
                table: "\u{1}new".into(),
                name: format!("\u{1}{}", c.name),
                ty: c.ty,
                enums: c.enums.clone(),
                default: c.default.clone(),
            });
        }
        let row_alias = insert_row_alias(&t, ins.insert_alias.as_ref(), &target)?;
        let mut list = Vec::new();
        for a in assigns {
            let col = assignment_col(&t, a)?;
            if generated::skip_assignment(&t, col, &a.value)? {
                continue;
            }
            let mut e = a.value.clone();
            rewrite_values_fn(&mut e);
            if let Some(ra) = &row_alias {
                ra.rewrite(&mut e);
            }
            let params = pm.clone();
            let mut comp = Compiler::plain(&both, None, &params, "field list", &mut sc);
            list.push((col, comp.compile(&e)?.0));
        }
        InsertMode::Upsert(list)
    } else if ins.ignore {
        InsertMode::Ignore
    } else {
        InsertMode::Plain
    };
    let subs_compiled = sc.subs.len();
    let sysvars = std::mem::take(&mut sc.sysvars);
    let uservars = std::mem::take(&mut sc.uservars);
    if subs_compiled > 0 {
        return Err(SqlError::unsupported("subqueries in INSERT values"));
    }

    let mut ctx = exec::make_ctx(session, params, &sysvars, &uservars)?;
    ctx.div_zero_error = exec::div_zero_is_error(session, ins.ignore);
    // Evaluate source rows.
    let raw_rows: Vec<Vec<Option<Value>>> = match &src {
        Src::Exprs(rows) if insert_values::reads_row(rows) => {
            let mut out = Vec::with_capacity(rows.len());
            for (i, r) in rows.iter().enumerate() {
                out.push(insert_values::eval_row(&t, &target, r, i as u64 + 1, &mut ctx)?);
            }
            out
        }
        Src::Exprs(rows) => {
            let mut out = Vec::with_capacity(rows.len());
            for r in rows {
                let mut vrow = Vec::with_capacity(r.len());
                for e in r {
                    vrow.push(match e {
                        None => None,
                        Some(e) => Some(eval(e, &[], &mut ctx)?),
                    });
                }
                out.push(vrow);
            }
            out
        }
        Src::Query(c) => exec::run_insert_source(engine, session, c, params, ctx.div_zero_error)
            .await?
            .into_iter()
            .map(|r| r.into_iter().map(Some).collect())
            .collect(),
    };

    let BuiltRows { rows: final_rows, first_ai, need_ai, explicit_ai } =
        build_rows(engine, &t, &target, raw_rows, &mut ctx, ins.ignore, 0, None).await?;
    let part = exec_part(&t)?;
    let mut partitions = Vec::with_capacity(final_rows.len());
    for r in &final_rows {
        if let Some(only) = &only {
            check_partition_set(&part, &t, r, only, ctx.tz.as_deref())?;
        }
        partitions.push(row_partition(&part, &t.def, r, ctx.tz.as_deref())?);
    }

    // Fast path: autocommit, plain insert: one batch with commit.
    let tz = ctx.tz.clone();
    if autocommit_alone(session) && matches!(mode, InsertMode::Plain) && final_rows.len() <= MAX_OPS_PER_BATCH && !fk_on
    {
        let ops: Vec<KeyOp> = final_rows
            .iter()
            .zip(&partitions)
            .map(|(r, p)| {
                let mut op = op_for(
                    tz.as_deref(),
                    &t,
                    OpKind::Insert,
                    pk_of(&t.def, r),
                    r.iter().cloned().enumerate().map(|(i, v)| (i as ColumnId, v)).collect(),
                    *p,
                );
                op.abort_on_error = true;
                op
            })
            .collect();
        let mut txn = txn_control::new_txn(engine, session);
        let res = txn.execute(ops, txn_control::commit_exec(session)).await;
        txn_control::note_commit(session, &txn);
        match res {
            Ok(_) => {
                let n = final_rows.len() as u64;
                return Ok(finish_insert(session, ctx, n, (first_ai, need_ai, explicit_ai), n, 0));
            }
            // Which of several rows collided the batch's error does not say:
            // nothing was written, so the statement runs again below, row by
            // row, whose error names the row's key as MySQL does.
            Err(ClientError::Node(ne)) if is_dup(&ne) && final_rows.len() > 1 => {}
            Err(e) => return Err(insert_client_err(&t, e, &final_rows)),
        }
    }

    txn_control::begin_statement(engine, session);
    let fk = Fk { engine, zone: ctx.tz.clone() };
    let guard = if fk_on { Some(StmtGuard::begin(session).await) } else { None };
    let found_rows = session.client_found_rows;
    let res = match (session.txn.as_mut(), guard.as_ref()) {
        (_, Some(Err(e))) => Err(e.clone()),
        (Some(txn), _) => {
            let fk = fk_on.then_some(&fk);
            insert_rows(txn, &t, &part, &final_rows, &partitions, &mode, &mut ctx, found_rows, fk).await
        }
        (None, _) => Err(SqlError::internal("no transaction")),
    };
    let res = match guard {
        Some(Ok(g)) => g.finish(session, res).await,
        _ => res,
    };
    let (affected, dups) = txn_control::end_statement(engine, session, res).await?;
    raise_ai_after_update(engine, &t, &ctx).await?;
    let n = final_rows.len() as u64;
    Ok(finish_insert(session, ctx, affected, (first_ai, need_ai, explicit_ai), n, dups))
}

/// Converts a value for column `c` of `t` (row number `row` for messages).
pub(crate) type StoreFn = fn(&SqlTable, usize, Value, u64, Option<&Zone>, &mut Warnings) -> Result<Value, SqlError>;

/// Source rows made into table rows, ready to write.
pub(crate) struct BuiltRows {
    pub rows: Vec<Row>,
    /// The first auto-increment value generated, and how many were.
    pub first_ai: u64,
    pub need_ai: u64,
    /// The last value given explicitly for the AUTO_INCREMENT column (the
    /// OK packet's insert id when none was generated, as MySQL reports it).
    pub explicit_ai: Option<u64>,
}

/// Full table rows from source rows (`raw[i][j]` is the value for
/// `target[j]`, None for DEFAULT): defaults, auto-increment values (reserved
/// from the data node), conversion to the column types, generated columns
/// and CHECK constraints (`ignore`: a refused row is skipped with a
/// warning). Shared by INSERT / REPLACE and LOAD DATA, which passes the rows
/// before these (`row_base`, for the row numbers in messages) and its own
/// conversion (`lenient`; None: `store_col`'s strict one).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn build_rows(
    engine: &Engine,
    t: &SqlTable,
    target: &[ColumnId],
    raw_rows: Vec<Vec<Option<Value>>>,
    ctx: &mut EvalCtx<'_>,
    ignore: bool,
    row_base: u64,
    lenient: Option<StoreFn>,
) -> Result<BuiltRows, SqlError> {
    let width = t.def.columns.len();
    let ai_col = t.def.columns.iter().position(|c| c.auto_increment).map(|i| i as ColumnId);
    let mut need_ai = 0u64;
    let mut rows: Vec<Vec<Option<Value>>> = Vec::with_capacity(raw_rows.len());
    for raw in raw_rows {
        let mut full: Vec<Option<Value>> = vec![None; width];
        for (c, v) in target.iter().zip(raw) {
            full[*c as usize] = v;
        }
        if let Some(ai) = ai_col {
            let v = &full[ai as usize];
            let gen = match v {
                None | Some(Value::Null) => true,
                Some(x) => vals::to_i64(x, &mut Warnings::default()) == Some(0) && !matches!(x, Value::Bytes(_)),
            };
            if gen {
                full[ai as usize] = None;
                need_ai += 1;
            }
        }
        rows.push(full);
    }
    let mut first_ai = 0u64;
    let mut next_ai = 0u64;
    if need_ai > 0 {
        first_ai = reserve_auto_inc(engine, t, need_ai, ctx.ai_prefetch).await?;
        next_ai = first_ai;
    }
    let mut max_explicit_ai = 0u64;
    let mut last_explicit_ai: Option<u64> = None;
    let mut final_rows: Vec<Row> = Vec::with_capacity(rows.len());
    for (ri, full) in rows.into_iter().enumerate() {
        let rowno = row_base + ri as u64 + 1;
        let mut out = Vec::with_capacity(width);
        let ai_generated = ai_col.is_some_and(|c| full[c as usize].is_none());
        for (ci, v) in full.into_iter().enumerate() {
            let col = &t.def.columns[ci];
            let meta = &t.meta.columns[ci];
            let v = match v {
                Some(v) => {
                    if v.is_null() && matches!(col.ty, ColumnType::Timestamp) && !col.nullable {
                        Value::DateTime(ctx.now_local())
                    } else {
                        v
                    }
                }
                None if Some(ci as ColumnId) == ai_col => {
                    let x = next_ai;
                    next_ai += 1;
                    if col.ty.is_unsigned_int() {
                        Value::UInt(x)
                    } else {
                        Value::Int(x as i64)
                    }
                }
                // Computed below, once every other column is converted.
                None if generated::is_generated(t, ci as ColumnId) => {
                    out.push(Value::Null);
                    continue;
                }
                None => match &meta.default {
                    SqlDefault::CurrentTimestamp { .. } => Value::DateTime(ctx.now_local()),
                    SqlDefault::Null => Value::Null,
                    SqlDefault::Literal { .. } => col.default.clone().unwrap_or(Value::Null),
                    SqlDefault::None => match &col.default {
                        Some(d) => d.clone(),
                        None if col.nullable => Value::Null,
                        None => {
                            return Err(col_err(
                                1364,
                                "HY000",
                                format!("Field '{}' doesn't have a default value", col.name),
                            ))
                        }
                    },
                },
            };
            let v = match lenient {
                Some(store) => store(t, ci, v, rowno, ctx.tz.as_deref(), &mut ctx.warnings)?,
                None => store_col(t, ci, v, rowno, ctx.tz.as_deref(), &mut ctx.warnings)?,
            };
            if Some(ci as ColumnId) == ai_col {
                let given = match v {
                    Value::UInt(u) => Some(u),
                    _ => v.as_i64().filter(|i| *i > 0).map(|i| i as u64),
                };
                if let Some(u) = given {
                    max_explicit_ai = max_explicit_ai.max(u);
                    if !ai_generated {
                        last_explicit_ai = Some(u);
                    }
                }
            }
            out.push(v);
        }
        // INSERT IGNORE skips a row its CHECK constraints refuse.
        if !check_constraints::complete_row_or_skip(t, &mut out, ctx, rowno, ignore)? {
            continue;
        }
        final_rows.push(out);
    }
    if max_explicit_ai >= next_ai.max(1) && ai_col.is_some() {
        bump_auto_inc(engine, t, max_explicit_ai).await?;
    }
    // The hidden `$PK` of a table without a PRIMARY KEY is no AUTO_INCREMENT
    // column to the client: its values are never an insert id.
    let visible_ai = ai_col.is_some_and(|c| !t.is_hidden(c));
    Ok(BuiltRows {
        rows: final_rows,
        first_ai,
        need_ai: if visible_ai { need_ai } else { 0 },
        explicit_ai: last_explicit_ai.filter(|_| visible_ai),
    })
}

/// LOAD DATA's write of one batch of built rows in the statement's
/// transaction: a duplicate key replaces the old row (`replace`) or skips the
/// new one with a warning. Returns (affected rows, duplicates).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn load_batch(
    engine: &Engine,
    txn: &mut Transaction,
    t: &Arc<SqlTable>,
    rows: &[Row],
    replace: bool,
    ctx: &mut EvalCtx<'_>,
    found_rows: bool,
    fk_on: bool,
) -> Result<(u64, u64), SqlError> {
    let part = exec_part(t)?;
    let mut partitions = Vec::with_capacity(rows.len());
    for r in rows {
        partitions.push(row_partition(&part, &t.def, r, ctx.tz.as_deref())?);
    }
    let mode = if replace { InsertMode::Replace } else { InsertMode::Ignore };
    let fk = Fk { engine, zone: ctx.tz.clone() };
    insert_rows(txn, t, &part, rows, &partitions, &mode, ctx, found_rows, fk_on.then_some(&fk)).await
}

pub(crate) fn exec_part(t: &SqlTable) -> Result<Arc<PartFn>, SqlError> {
    let scope = table_scope(t, &t.name);
    Ok(Arc::new(PartFn::build(&t.def, t.meta.partition.as_ref(), &scope)?))
}

fn insert_client_err(t: &SqlTable, e: ClientError, rows: &[Row]) -> SqlError {
    if let ClientError::Node(ne) = &e {
        if is_dup(ne) {
            // Which row? The node names the key in its message when it can; else the first row.
            let row = rows.iter().find(|r| ne.message.contains(&key_text(&pk_of(&t.def, r)))).or(rows.first());
            if let Some(r) = row {
                return dup_error(t, ne, r);
            }
        }
    }
    error_map::from_client(e, &table_ctx(t))
}

fn finish_insert(
    session: &mut Session,
    ctx: EvalCtx,
    affected: u64,
    (first_ai, need_ai, explicit_ai): (u64, u64, Option<u64>),
    rows: u64,
    dups: u64,
) -> QueryOutput {
    session.warnings = ctx.warnings.list;
    // LAST_INSERT_ID() changes only when a value was generated for a row
    // that went in (not for a row ON DUPLICATE KEY UPDATE updated instead),
    // or when the statement called LAST_INSERT_ID(expr), which wins. The OK
    // packet's insert id is that value, else the last explicit value given
    // to the AUTO_INCREMENT column (MySQL's mysql_insert_id()).
    let generated = need_ai > 0 && dups < rows;
    let insert_id = if let Some(id) = ctx.set_last_insert_id {
        session.last_insert_id = id;
        id
    } else if generated {
        session.last_insert_id = first_ai;
        first_ai
    } else {
        explicit_ai.unwrap_or(0)
    };
    let info = if rows > 1 || dups > 0 {
        format!("Records: {rows}  Duplicates: {dups}  Warnings: {}", session.warnings.len())
    } else {
        String::new()
    };
    QueryOutput::Ok { affected_rows: affected, last_insert_id: insert_id, info }
}

/// The bare keyword DEFAULT (not a column named `default`).
fn is_default_keyword(e: &Expr) -> bool {
    matches!(e, Expr::Identifier(id) if id.value.eq_ignore_ascii_case("default") && id.quote_style.is_none())
}

/// `SET col = DEFAULT`: the column's default as INSERT would give it (1364
/// for a NOT NULL column without one, as MySQL in strict mode).
fn column_default_expr(t: &SqlTable, col: ColumnId) -> Result<CExpr, SqlError> {
    let c = &t.def.columns[col as usize];
    Ok(match &t.meta.columns[col as usize].default {
        SqlDefault::CurrentTimestamp { .. } => CExpr::Func(crate::engine::functions::Func::Now, vec![]),
        SqlDefault::Null => CExpr::Lit(Value::Null),
        SqlDefault::Literal { .. } => CExpr::Lit(c.default.clone().unwrap_or(Value::Null)),
        SqlDefault::None => match &c.default {
            Some(d) => CExpr::Lit(d.clone()),
            None if c.nullable => CExpr::Lit(Value::Null),
            None => {
                return Err(col_err(1364, "HY000", format!("Field '{}' doesn't have a default value", c.name)));
            }
        },
    })
}

fn compile_value_expr(
    sc: &mut StmtCompiler,
    scope: &Scope,
    e: &Expr,
    pm: &ParamMap,
) -> Result<Option<CExpr>, SqlError> {
    if let Expr::Identifier(id) = e {
        if id.value.eq_ignore_ascii_case("default") && id.quote_style.is_none() {
            return Ok(None);
        }
    }
    let mut comp = Compiler {
        scope,
        outer: None,
        params: pm,
        clause: "field list",
        aggs: None,
        agg_base: 0,
        aliases: &[],
        host: sc,
    };
    Ok(Some(comp.compile(e)?.0))
}

/// Insert rows in the session transaction; returns (affected rows, duplicates).
#[allow(clippy::too_many_arguments)]
async fn insert_rows(
    txn: &mut Transaction,
    t: &Arc<SqlTable>,
    part: &PartFn,
    rows: &[Row],
    partitions: &[Option<PartitionId>],
    mode: &InsertMode,
    ctx: &mut EvalCtx<'_>,
    found_rows: bool,
    fk: Option<&Fk<'_>>,
) -> Result<(u64, u64), SqlError> {
    let tz = ctx.tz.clone();
    let ops: Vec<KeyOp> = rows
        .iter()
        .zip(partitions)
        .map(|(r, p)| {
            op_for(
                tz.as_deref(),
                t,
                OpKind::Insert,
                pk_of(&t.def, r),
                r.iter().cloned().enumerate().map(|(i, v)| (i as ColumnId, v)).collect(),
                *p,
            )
        })
        .collect();
    let res = exec_ops(txn, ops, t).await?;
    let mut undo: Vec<KeyOp> = Vec::new();
    let mut affected = 0u64;
    let mut dups = 0u64;
    for (i, r) in res.iter().enumerate() {
        let row = &rows[i];
        match r {
            OpResult::Ok(_) => {
                affected += 1;
                undo.push(op_for(tz.as_deref(), t, OpKind::Delete, pk_of(&t.def, row), vec![], partitions[i]));
                if let Some(fx) = fk {
                    if let Err(err) = fx.check_parents(txn, t, row, None).await {
                        if matches!(mode, InsertMode::Ignore) && err.code == 1452 {
                            // INSERT IGNORE: the row goes, the error becomes a warning.
                            if let Some(del) = undo.pop() {
                                exec_ops(txn, vec![del], t).await?;
                            }
                            affected -= 1;
                            ctx.warnings.push(err.code, err.message);
                            continue;
                        }
                        undo.reverse();
                        compensate(txn, undo).await;
                        return Err(err);
                    }
                }
            }
            OpResult::Err(e) if is_dup(e) => {
                dups += 1;
                let outcome = match mode {
                    InsertMode::Plain => Err(dup_error(t, e, row)),
                    InsertMode::Ignore => {
                        let err = dup_error(t, e, row);
                        ctx.warnings.push(err.code, err.message);
                        Ok(0)
                    }
                    InsertMode::Replace => {
                        match replace_row(txn, t, part, row, partitions[i], e, &mut undo, fk, ctx).await {
                            Ok(n) => match fk {
                                Some(fx) => fx.check_parents(txn, t, row, None).await.map(|_| n),
                                None => Ok(n),
                            },
                            Err(e) => Err(e),
                        }
                    }
                    InsertMode::Upsert(assigns) => {
                        upsert_row(txn, t, part, row, e, assigns, ctx, &mut undo, found_rows, fk).await
                    }
                };
                match outcome {
                    Ok(n) => affected += n,
                    Err(err) => {
                        undo.reverse();
                        compensate(txn, undo).await;
                        return Err(err);
                    }
                }
            }
            OpResult::Err(e) => {
                let mut ectx = table_ctx(t);
                ectx.row = Some(i as u64 + 1);
                let err = error_map::from_node(e, &ectx);
                undo.reverse();
                compensate(txn, undo).await;
                return Err(err);
            }
        }
    }
    Ok((affected, dups))
}

/// Read the row a new row collides with (by pk, else by the colliding unique index).
async fn conflicting_row(
    txn: &mut Transaction,
    t: &SqlTable,
    row: &[Value],
    e: &NodeError,
    zone: Option<&Zone>,
) -> Result<Option<Row>, SqlError> {
    let mut candidates: Vec<KeyAccess> = Vec::new();
    if e.code == ErrorCode::DuplicateKey {
        candidates.push(KeyAccess::Primary(pk_of(&t.def, row)));
    } else {
        for ix in t.def.indexes.iter().filter(|i| i.unique) {
            let vals_: Vec<Value> = ix.columns.iter().map(|c| row[*c as usize].clone()).collect();
            if vals_.iter().any(|v| v.is_null()) {
                continue;
            }
            candidates.push(KeyAccess::Unique { index: ix.id, values: vals_ });
        }
    }
    for key in candidates {
        let op = KeyOp {
            table: t.def.id,
            table_version: t.def.version,
            kind: OpKind::Read,
            lock: LockMode::Exclusive,
            wait: norr_signals::LockWait::Wait,
            key,
            partition: None,
            values: vec![],
            increments: vec![],
            projection: vec![],
            abort_on_error: false,
        };
        let mut op = op;
        if let (KeyAccess::Primary(k), true) = (&op.key, t.meta.partition.is_some()) {
            let part = exec_part(t)?;
            let ta = TableAccess {
                table: Arc::new(t.clone()),
                part,
                access: Access::FullScan,
                local: vec![],
                needed: vec![],
                lock: crate::engine::row_lock::RowLock::waiting(LockMode::Exclusive),
                compact_local: None,
                only: None,
            };
            op.partition = key_partition(&ta, &t.def.primary_key, k, zone).ok().flatten();
        }
        // The row's values are wall times of the session zone, and so is the
        // row read.
        let r = ts_zone::execute(txn, vec![op], ExecType::NoCommit, &t.def, zone)
            .await
            .map_err(|e| error_map::from_client(e, &table_ctx(t)))?;
        if let Some(OpResult::Ok(Some(row))) = r.into_iter().next() {
            return Ok(Some(row));
        }
    }
    Ok(None)
}

#[allow(clippy::too_many_arguments)]
async fn replace_row(
    txn: &mut Transaction,
    t: &Arc<SqlTable>,
    part: &PartFn,
    row: &[Value],
    p: Option<PartitionId>,
    e: &NodeError,
    undo: &mut Vec<KeyOp>,
    fk: Option<&Fk<'_>>,
    ctx: &mut EvalCtx<'_>,
) -> Result<u64, SqlError> {
    let tz = ctx.tz.clone();
    let mut affected = 0;
    let mut err = e.clone();
    // Delete every row the new one collides with, then insert (at most a few rounds).
    for _ in 0..8 {
        let Some(old) = conflicting_row(txn, t, row, &err, tz.as_deref()).await? else {
            return Err(dup_error(t, &err, row));
        };
        let oldp = row_partition(part, &t.def, &old, tz.as_deref())?;
        let del = op_for(tz.as_deref(), t, OpKind::Delete, pk_of(&t.def, &old), vec![], oldp);
        exec_ops(txn, vec![del], t).await?;
        undo.push(op_for(
            tz.as_deref(),
            t,
            OpKind::Insert,
            pk_of(&t.def, &old),
            old.iter().cloned().enumerate().map(|(i, v)| (i as ColumnId, v)).collect(),
            oldp,
        ));
        affected += 1;
        // REPLACE is a delete and an insert: the old row's children see a delete.
        if let Some(fx) = fk {
            fx.on_delete(txn, t, &old, ctx, 0).await?;
        }
        let ins = op_for(
            tz.as_deref(),
            t,
            OpKind::Insert,
            pk_of(&t.def, row),
            row.iter().cloned().enumerate().map(|(i, v)| (i as ColumnId, v)).collect(),
            p,
        );
        match exec_ops(txn, vec![ins], t).await?.into_iter().next() {
            Some(OpResult::Ok(_)) => {
                undo.push(op_for(tz.as_deref(), t, OpKind::Delete, pk_of(&t.def, row), vec![], p));
                return Ok(affected + 1);
            }
            Some(OpResult::Err(e2)) if is_dup(&e2) => err = e2,
            Some(OpResult::Err(e2)) => return Err(error_map::from_node(&e2, &table_ctx(t))),
            None => return Err(SqlError::internal("no result")),
        }
    }
    Err(dup_error(t, &err, row))
}

#[allow(clippy::too_many_arguments)]
async fn upsert_row(
    txn: &mut Transaction,
    t: &Arc<SqlTable>,
    part: &PartFn,
    row: &[Value],
    e: &NodeError,
    assigns: &[(ColumnId, CExpr)],
    ctx: &mut EvalCtx<'_>,
    undo: &mut Vec<KeyOp>,
    found_rows: bool,
    fk: Option<&Fk<'_>>,
) -> Result<u64, SqlError> {
    let Some(old) = conflicting_row(txn, t, row, e, ctx.tz.as_deref()).await? else { return Err(dup_error(t, e, row)) };
    let mut both = old.clone();
    both.extend_from_slice(row);
    let mut new = old.clone();
    for (c, ex) in assigns {
        let v = eval(ex, &both, ctx)?;
        let v = store_col(t, *c as usize, v, 1, ctx.tz.as_deref(), &mut ctx.warnings)?;
        new[*c as usize] = v.clone();
        both[*c as usize] = v;
    }
    check_constraints::complete_row(t, &mut new, ctx, 1)?;
    let changed: Vec<(ColumnId, Value)> = new
        .iter()
        .enumerate()
        .filter(|(i, v)| !vals::group_eq(v, &old[*i], Coll::Bin))
        .map(|(i, v)| (i as ColumnId, v.clone()))
        .collect();
    if changed.is_empty() {
        return Ok(if found_rows { 1 } else { 0 });
    }
    apply_update(txn, t, part, &old, &new, &changed, undo, fk, ctx).await?;
    Ok(2)
}

/// True if a column an UPDATE writes itself (not generated) changed: only
/// then do ON UPDATE CURRENT_TIMESTAMP columns take the time, as in MySQL.
pub(crate) fn assigned_change(t: &SqlTable, old: &[Value], new: &[Value]) -> bool {
    new.iter()
        .zip(old)
        .enumerate()
        .any(|(i, (n, o))| !generated::is_generated(t, i as ColumnId) && !vals::group_eq(n, o, Coll::Bin))
}

/// Update one row (delete + insert when the key or the partition changes),
/// then its foreign-key work.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn apply_update(
    txn: &mut Transaction,
    t: &Arc<SqlTable>,
    part: &PartFn,
    old: &[Value],
    new: &[Value],
    changed: &[(ColumnId, Value)],
    undo: &mut Vec<KeyOp>,
    fk: Option<&Fk<'_>>,
    ctx: &mut EvalCtx<'_>,
) -> Result<(), SqlError> {
    write_update(txn, t, part, old, new, changed, undo, &ctx.tz).await?;
    note_ai_written(t, changed, ctx);
    if let Some(fx) = fk {
        let cols: Vec<ColumnId> = changed.iter().map(|(c, _)| *c).collect();
        fx.check_parents(txn, t, new, Some(&cols)).await?;
        fx.on_update(txn, t, old, new, ctx, 0).await?;
    }
    Ok(())
}

/// Remembers a value an update wrote to the AUTO_INCREMENT column (see
/// `EvalCtx::ai_written`).
fn note_ai_written(t: &SqlTable, changed: &[(ColumnId, Value)], ctx: &mut EvalCtx<'_>) {
    let Some(ai) = t.def.columns.iter().position(|c| c.auto_increment) else { return };
    let Some((_, v)) = changed.iter().find(|(c, _)| *c as usize == ai) else { return };
    let v = match v {
        Value::UInt(u) => *u,
        v => match v.as_i64() {
            Some(i) if i > 0 => i as u64,
            _ => return,
        },
    };
    match ctx.ai_written.iter_mut().find(|(id, _)| *id == t.def.id) {
        Some((_, m)) => *m = (*m).max(v),
        None => ctx.ai_written.push((t.def.id, v)),
    }
}

/// Raises `t`'s AUTO_INCREMENT counter past what the statement's updates
/// wrote to the column (`note_ai_written`), so that the next generated value
/// does not collide with them.
pub(crate) async fn raise_ai_after_update(engine: &Engine, t: &SqlTable, ctx: &EvalCtx<'_>) -> Result<(), SqlError> {
    match ctx.ai_written.iter().find(|(id, _)| *id == t.def.id) {
        Some((_, used)) => bump_auto_inc(engine, t, *used).await,
        None => Ok(()),
    }
}

#[allow(clippy::too_many_arguments)]
async fn write_update(
    txn: &mut Transaction,
    t: &SqlTable,
    part: &PartFn,
    old: &[Value],
    new: &[Value],
    changed: &[(ColumnId, Value)],
    undo: &mut Vec<KeyOp>,
    tz: &SessionZone,
) -> Result<(), SqlError> {
    let oldp = row_partition(part, &t.def, old, tz.as_deref())?;
    let newp = row_partition(part, &t.def, new, tz.as_deref())?;
    let key_changed = changed.iter().any(|(c, _)| t.def.primary_key.contains(c));
    let full = |r: &[Value]| r.iter().cloned().enumerate().map(|(i, v)| (i as ColumnId, v)).collect::<Vec<_>>();
    if key_changed || oldp != newp {
        let del = op_for(tz.as_deref(), t, OpKind::Delete, pk_of(&t.def, old), vec![], oldp);
        let ins = op_for(tz.as_deref(), t, OpKind::Insert, pk_of(&t.def, new), full(new), newp);
        let res = exec_ops(txn, vec![del, ins], t).await?;
        if let Some(OpResult::Ok(_)) = res.first() {
            undo.push(op_for(tz.as_deref(), t, OpKind::Insert, pk_of(&t.def, old), full(old), oldp));
        }
        match res.get(1) {
            Some(OpResult::Ok(_)) => {
                undo.push(op_for(tz.as_deref(), t, OpKind::Delete, pk_of(&t.def, new), vec![], newp));
                Ok(())
            }
            Some(OpResult::Err(e)) if is_dup(e) => Err(dup_error(t, e, new)),
            Some(OpResult::Err(e)) => Err(error_map::from_node(e, &table_ctx(t))),
            None => Err(SqlError::internal("no result")),
        }
    } else {
        let op = op_for(tz.as_deref(), t, OpKind::Update, pk_of(&t.def, old), changed.to_vec(), oldp);
        match exec_ops(txn, vec![op], t).await?.into_iter().next() {
            Some(OpResult::Ok(_)) => {
                let back: Vec<(ColumnId, Value)> =
                    changed.iter().map(|(c, _)| (*c, old[*c as usize].clone())).collect();
                undo.push(op_for(tz.as_deref(), t, OpKind::Update, pk_of(&t.def, old), back, oldp));
                Ok(())
            }
            Some(OpResult::Err(e)) if is_dup(&e) => Err(dup_error(t, &e, new)),
            Some(OpResult::Err(e)) => {
                let mut ectx = table_ctx(t);
                ectx.column = changed.first().map(|(c, _)| t.def.columns[*c as usize].name.clone());
                Err(error_map::from_node(&e, &ectx))
            }
            None => Err(SqlError::internal("no result")),
        }
    }
}

// ---------------------------------------------------------------- UPDATE / DELETE

/// A compiled single-table UPDATE or DELETE (kept by prepared statements,
/// see `plan_cache`).
pub struct RowStmt {
    /// Parameters the statement reads.
    param_count: usize,
    table: Arc<SqlTable>,
    part: Arc<PartFn>,
    conj: Vec<CExpr>,
    access: Access,
    order: Vec<OrderKey>,
    limit: Option<CExpr>,
    /// UPDATE: (column, expression over the row being updated).
    sets: Vec<(ColumnId, CExpr)>,
    sysvars: Vec<(String, bool)>,
    uservars: Vec<String>,
    /// `PARTITION (...)`: the partitions the statement may read and write.
    only: Option<Vec<PartitionId>>,
}

type SingleTable<'a> = (&'a ast::ObjectName, String, &'a [ast::Ident]);

/// The table of a single-table UPDATE / DELETE: its name, the alias its
/// columns are qualified with, and the partitions `PARTITION (...)` names.
fn single_table(from: &[ast::TableWithJoins]) -> Result<SingleTable<'_>, SqlError> {
    if from.len() != 1 || !from[0].joins.is_empty() {
        return Err(SqlError::unsupported("multi-table UPDATE / DELETE"));
    }
    match &from[0].relation {
        ast::TableFactor::Table { name, alias, partitions, .. } => {
            let a = alias
                .as_ref()
                .map(|a| a.name.value.clone())
                // The name as written, without its quotes: `t`.a names t.
                .unwrap_or_else(|| {
                    name.0
                        .last()
                        .map(|p| p.as_ident().map_or_else(|| p.to_string(), |i| i.value.clone()))
                        .unwrap_or_default()
                });
            Ok((name, a, partitions))
        }
        _ => Err(SqlError::unsupported("UPDATE / DELETE of a derived table")),
    }
}

#[allow(clippy::too_many_arguments)]
fn compile_row_stmt(
    tables: &Tables,
    pm: ParamMap,
    (name, alias, partitions): (&ast::ObjectName, &str, &[ast::Ident]),
    selection: Option<&Expr>,
    order_by: &[ast::OrderByExpr],
    limit: Option<&Expr>,
    assigns: &[ast::Assignment],
) -> Result<RowStmt, SqlError> {
    let t = tables.get(name)?;
    let scope = table_scope(&t, alias);
    let param_count = pm.count();
    let mut sc = StmtCompiler::new(tables, pm.clone());
    let mut conj = Vec::new();
    if let Some(w) = selection {
        let mut c = Compiler::plain(&scope, None, &pm, "where clause", &mut sc);
        conjuncts(c.compile(w)?.0, &mut conj);
    }
    let mut sets = Vec::new();
    for a in assigns {
        let col = assignment_col(&t, a)?;
        if generated::skip_assignment(&t, col, &a.value)? {
            continue;
        }
        if is_default_keyword(&a.value) {
            sets.push((col, column_default_expr(&t, col)?));
            continue;
        }
        let mut c = Compiler::plain(&scope, None, &pm, "field list", &mut sc);
        sets.push((col, c.compile(&a.value)?.0));
    }
    let mut order = Vec::new();
    for o in order_by {
        let mut c = Compiler::plain(&scope, None, &pm, "order clause", &mut sc);
        let (e, ty) = c.compile(&o.expr)?;
        order.push(OrderKey { expr: e, desc: matches!(o.options.sort, Some(ast::OrderBySort::Desc)), coll: ty.coll });
    }
    let limit = match limit {
        Some(l) => {
            let empty = Scope::default();
            let mut c = Compiler::plain(&empty, None, &pm, "LIMIT", &mut sc);
            Some(c.compile(l)?.0)
        }
        None => None,
    };
    if !sc.subs.is_empty() {
        return Err(SqlError::unsupported("subqueries in UPDATE / DELETE"));
    }
    let part = exec_part(&t)?;
    let only = crate::engine::query::selected_partitions(&t, &part, partitions)?;
    // PARTITION (...): a scan of those partitions (a key lookup would reach
    // rows of the others).
    let access = if only.is_some() { Access::FullScan } else { plan::choose_access(&t.def, &conj) };
    Ok(RowStmt {
        param_count,
        table: t,
        part,
        only,
        conj,
        access,
        order,
        limit,
        sets,
        sysvars: sc.sysvars,
        uservars: sc.uservars,
    })
}

/// Conjuncts fully answered by a pk lookup (each is `pk_col = value` / IN on a pk column).
fn only_pk_conjuncts(def: &TableDef, conj: &[CExpr]) -> bool {
    conj.iter().all(|c| match c {
        CExpr::Cmp(crate::engine::expr::CmpKind::Eq, l, r, _) => match (l.as_ref(), r.as_ref()) {
            (CExpr::Col(x), v) | (v, CExpr::Col(x)) => {
                def.primary_key.contains(&(*x as ColumnId)) && is_row_independent(v)
            }
            _ => false,
        },
        CExpr::InList { expr, list, negated: false, .. } => {
            matches!(expr.as_ref(), CExpr::Col(x) if def.primary_key.contains(&(*x as ColumnId)))
                && list.iter().all(is_row_independent)
        }
        _ => false,
    })
}

/// `col = col + const` / `col = col - const` on a numeric column: an interpreted increment.
fn as_increment(col: ColumnId, e: &CExpr, t: &SqlTable) -> Option<CExpr> {
    use crate::engine::expr::value::ArithOp;
    let ty = &t.def.columns[col as usize].ty;
    ty.int_range()?;
    // The node checks the native BIGINT range, not a BIT(n) column's width.
    if t.bits.get(col as usize).is_some_and(|b| *b > 0) {
        return None;
    }
    match e {
        CExpr::Arith(op @ (ArithOp::Add | ArithOp::Sub), l, r) => match (l.as_ref(), r.as_ref()) {
            (CExpr::Col(c), d) if *c as ColumnId == col && is_row_independent(d) => {
                Some(if *op == ArithOp::Add { d.clone() } else { CExpr::Neg(Box::new(d.clone())) })
            }
            (d, CExpr::Col(c)) if *op == ArithOp::Add && *c as ColumnId == col && is_row_independent(d) => {
                Some(d.clone())
            }
            _ => None,
        },
        _ => None,
    }
}

pub(crate) fn update_info(matched: u64, changed: u64, warnings: usize) -> String {
    format!("Rows matched: {matched}  Changed: {changed}  Warnings: {warnings}")
}

/// Fetch the rows an UPDATE / DELETE affects (locked, all columns), filtered, ordered, limited.
async fn target_rows(txn: &mut Transaction, rs: &RowStmt, ctx: &mut EvalCtx<'_>) -> Result<Vec<Row>, SqlError> {
    let ta = TableAccess {
        table: rs.table.clone(),
        part: rs.part.clone(),
        access: rs.access.clone(),
        local: rs.conj.clone(),
        needed: (0..rs.table.def.columns.len() as ColumnId).collect(),
        lock: crate::engine::row_lock::RowLock::waiting(LockMode::Exclusive),
        compact_local: None,
        only: rs.only.clone(),
    };
    let mut rd = Reader::Txn(txn);
    let ordered = scan_order::row_stmt_needs_scan_order(rs.limit.is_some(), !rs.sets.is_empty());
    let mut rows = exec::fetch_table(&mut rd, &ta, ctx, None, ordered).await?;
    if !rs.order.is_empty() {
        let mut keyed = Vec::with_capacity(rows.len());
        for r in rows {
            let k = rs.order.iter().map(|o| eval(&o.expr, &r, ctx)).collect::<Result<Vec<_>, _>>()?;
            keyed.push((k, r));
        }
        super::sort_keys::sort_by_keys(
            &mut keyed,
            rs.order.len(),
            |r, i| &r.0[i],
            |i| (rs.order[i].desc, rs.order[i].coll),
        );
        rows = keyed.into_iter().map(|(_, r)| r).collect();
    }
    if let Some(l) = &rs.limit {
        let n = vals::to_i64(&eval(l, &[], ctx)?, &mut Warnings::default()).unwrap_or(0).max(0) as usize;
        rows.truncate(n);
    }
    // Before any row is changed (issue 22, case 9): a statement larger than
    // one transaction may be fails now, not after doing the work.
    let limit = ctx.max_rows_per_txn;
    if rows.len() as u64 > limit {
        return Err(error_map::too_many_rows(Some(rows.len() as u64), limit));
    }
    Ok(rows)
}

/// The dispatcher's entry point for UPDATE.
pub async fn execute_update(
    engine: &Engine,
    session: &mut Session,
    st: &Statement,
    params: &[Value],
    kept: Option<&PlanSlot<RowStmt>>,
) -> Result<QueryOutput, SqlError> {
    let Statement::Update(u) = st else { return Err(SqlError::internal("not an UPDATE")) };
    if multi_table_dml::is_multi(st) {
        return multi_table_dml::execute(engine, session, st, params).await;
    }
    if u.from.is_some() {
        return Err(SqlError::unsupported("UPDATE ... FROM"));
    }
    let (name, alias, partitions) = single_table(std::slice::from_ref(&u.table))?;
    let rs = plan_cache::plan(engine, session, st, kept, |tables| {
        compile_row_stmt(
            tables,
            ParamMap::from_statement(st),
            (name, &alias, partitions),
            u.selection.as_ref(),
            &u.order_by,
            u.limit.as_ref(),
            &u.assignments,
        )
    })
    .await?;
    if params.len() < rs.param_count {
        return Err(SqlError::new(1210, "HY000", "Incorrect arguments to mysqld_stmt_execute"));
    }
    let rs = rs.as_ref();
    let mut ctx = exec::make_ctx(session, params, &rs.sysvars, &rs.uservars)?;
    ctx.div_zero_error = exec::div_zero_is_error(session, false);
    let def = &rs.table.def;
    let found_rows = session.client_found_rows;

    let fk_on = fk_enforce::active(session, &rs.table);
    // Fast path: pk lookup, nothing else in WHERE, row-independent values or increments.
    if let (Access::PkLookup { keys }, false) = (&rs.access, fk_on) {
        // (Nor the AUTO_INCREMENT column: its counter may have to be raised.)
        let no_key_change =
            rs.sets.iter().all(|(c, _)| !def.primary_key.contains(c) && !def.columns[*c as usize].auto_increment);
        let part_cols_untouched = rs.sets.iter().all(|(c, _)| !rs.part.columns().contains(c));
        let simple = rs.sets.iter().all(|(c, e)| is_row_independent(e) || as_increment(*c, e, &rs.table).is_some());
        let no_on_update = !rs.table.meta.columns.iter().any(|m| m.on_update_now);
        // Generated columns and CHECK constraints read the whole row, which
        // this path does not read.
        let no_row_rules = rs.table.generated.is_none() && rs.table.checks.is_none();
        if only_pk_conjuncts(def, &rs.conj)
            && rs.order.is_empty()
            && rs.limit.is_none()
            && no_key_change
            && part_cols_untouched
            && simple
            && no_on_update
            && no_row_rules
        {
            if let Some(keys) = plan::eval_keys(keys, &def.primary_key, def, &mut ctx)? {
                return update_by_keys(engine, session, rs, keys, ctx, found_rows).await;
            }
        }
    }

    txn_control::begin_statement(engine, session);
    let fk = Fk { engine, zone: ctx.tz.clone() };
    let guard = if fk_on { Some(StmtGuard::begin(session).await) } else { None };
    let res = match (session.txn.as_mut(), guard.as_ref()) {
        (_, Some(Err(e))) => Err(e.clone()),
        (Some(txn), _) => update_general(txn, rs, &mut ctx, fk_on.then_some(&fk)).await,
        (None, _) => Err(SqlError::internal("no transaction")),
    };
    let res = match guard {
        Some(Ok(g)) => g.finish(session, res).await,
        _ => res,
    };
    let (matched, changed) = txn_control::end_statement(engine, session, res).await?;
    raise_ai_after_update(engine, &rs.table, &ctx).await?;
    session.warnings = std::mem::take(&mut ctx.warnings.list);
    let info = update_info(matched, changed, session.warnings.len());
    let last_insert_id = exec::note_set_last_insert_id(session, &ctx);
    Ok(QueryOutput::Ok { affected_rows: if found_rows { matched } else { changed }, last_insert_id, info })
}

async fn update_general(
    txn: &mut Transaction,
    rs: &RowStmt,
    ctx: &mut EvalCtx<'_>,
    fk: Option<&Fk<'_>>,
) -> Result<(u64, u64), SqlError> {
    let t = &rs.table;
    let rows = target_rows(txn, rs, ctx).await?;
    let on_update: Vec<ColumnId> = t
        .meta
        .columns
        .iter()
        .enumerate()
        .filter(|(i, m)| m.on_update_now && !rs.sets.iter().any(|(c, _)| *c as usize == *i))
        .map(|(i, _)| i as ColumnId)
        .collect();
    // Compute every new row first: conversion errors leave nothing written.
    let mut plans = Vec::with_capacity(rows.len());
    for (ri, old) in rows.iter().enumerate() {
        let mut new = old.clone();
        for (c, e) in &rs.sets {
            let v = eval(e, &new, ctx)?;
            new[*c as usize] = store_col(t, *c as usize, v, ri as u64 + 1, ctx.tz.as_deref(), &mut ctx.warnings)?;
        }
        // ON UPDATE columns take the time before generated columns and
        // checks read the row.
        if !on_update.is_empty() && assigned_change(t, old, &new) {
            for c in &on_update {
                new[*c as usize] = Value::DateTime(ctx.now_local());
            }
        }
        check_constraints::complete_row(t, &mut new, ctx, ri as u64 + 1)?;
        let changed: Vec<(ColumnId, Value)> = new
            .iter()
            .enumerate()
            .filter(|(i, v)| !vals::group_eq(v, &old[*i], Coll::Bin))
            .map(|(i, v)| (i as ColumnId, v.clone()))
            .collect();
        plans.push((new, changed));
    }
    let mut undo = Vec::new();
    let mut n_changed = 0u64;
    for (old, (new, changed)) in rows.iter().zip(plans) {
        if changed.is_empty() {
            continue;
        }
        let res = match &rs.only {
            Some(only) => check_partition_set(&rs.part, t, &new, only, ctx.tz.as_deref()),
            None => Ok(()),
        };
        let res = match res {
            Ok(()) => apply_update(txn, t, &rs.part, old, &new, &changed, &mut undo, fk, ctx).await,
            Err(e) => Err(e),
        };
        if let Err(e) = res {
            undo.reverse();
            compensate(txn, undo).await;
            return Err(e);
        }
        n_changed += 1;
    }
    Ok((rows.len() as u64, n_changed))
}

/// UPDATE by primary keys without reading first (increments) or with the read
/// in the same batch (exact "changed" count): one round trip per batch.
async fn update_by_keys(
    engine: &Engine,
    session: &mut Session,
    rs: &RowStmt,
    keys: Vec<Vec<Value>>,
    mut ctx: EvalCtx<'_>,
    found_rows: bool,
) -> Result<QueryOutput, SqlError> {
    let t = &rs.table;
    let def = &t.def;
    let tz = ctx.tz.clone();
    let mut values: Vec<(ColumnId, Value)> = Vec::new();
    let mut increments: Vec<(ColumnId, Value)> = Vec::new();
    for (c, e) in &rs.sets {
        let col = &def.columns[*c as usize];
        if let Some(d) = as_increment(*c, e, t) {
            let dv = eval(&d, &[], &mut ctx)?;
            if dv.is_null() {
                values.push((*c, store_value(Value::Null, col, 1, None, &mut ctx.warnings)?));
            } else {
                let n = vals::to_num(&dv, &mut ctx.warnings).unwrap_or(Num::I(0));
                let i = round_to_int(n).ok_or_else(|| out_of_range(col, 1))?;
                let i = i64::try_from(i).map_err(|_| out_of_range(col, 1))?;
                increments.push((*c, Value::Int(i)));
            }
        } else {
            let v = eval(e, &[], &mut ctx)?;
            values.push((*c, store_col(t, *c as usize, v, 1, ctx.tz.as_deref(), &mut ctx.warnings)?));
        }
    }
    let ta = TableAccess {
        table: t.clone(),
        part: rs.part.clone(),
        access: Access::FullScan,
        local: vec![],
        needed: vec![],
        lock: crate::engine::row_lock::RowLock::waiting(LockMode::Exclusive),
        compact_local: None,
        only: None,
    };
    let read_cols: Vec<ColumnId> = values.iter().map(|(c, _)| *c).collect();
    let mut ops = Vec::with_capacity(keys.len() * 2);
    for k in &keys {
        let Ok(p) = key_partition(&ta, &def.primary_key, k, tz.as_deref()) else { continue };
        if !values.is_empty() {
            let mut rd = op_for(tz.as_deref(), t, OpKind::Read, k.clone(), vec![], p);
            rd.projection = read_cols.clone();
            ops.push(rd);
        }
        let mut op = op_for(tz.as_deref(), t, OpKind::Update, k.clone(), values.clone(), p);
        op.increments = increments.clone();
        ops.push(op);
    }
    let per = if values.is_empty() { 1 } else { 2 };
    // Several keys in autocommit go through the statement transaction, so a
    // failing one rolls back the others.
    let alone = autocommit_alone(session) && keys.len() == 1;
    let res = if alone {
        let mut txn = txn_control::new_txn(engine, session);
        let exec = txn_control::commit_exec(session);
        let res = run_ops(&mut txn, ops, Some(exec), t, tz.as_deref()).await;
        txn_control::note_commit(session, &txn);
        res.map_err(|e| fix_col(e, def, &rs.sets))?
    } else {
        txn_control::begin_statement(engine, session);
        let r = match session.txn.as_mut() {
            Some(txn) => {
                let r = run_ops(txn, ops, None, t, tz.as_deref()).await;
                match r {
                    Ok(res) => {
                        // An operation error (e.g. out of range increment): undo the applied ones.
                        if let Some(e) = res.iter().find_map(|x| match x {
                            OpResult::Err(e) if e.code != ErrorCode::NoSuchRow => Some(e.clone()),
                            _ => None,
                        }) {
                            let mut undo = Vec::new();
                            for (i, r) in res.iter().enumerate() {
                                if i % per == 0 && per == 2 {
                                    if let (OpResult::Ok(Some(old)), Some(OpResult::Ok(_))) = (r, res.get(i + 1)) {
                                        let k = &keys[i / per];
                                        let back: Vec<(ColumnId, Value)> =
                                            read_cols.iter().cloned().zip(old.iter().cloned()).collect();
                                        undo.push(op_for(
                                            tz.as_deref(),
                                            t,
                                            OpKind::Update,
                                            k.clone(),
                                            back,
                                            key_partition(&ta, &def.primary_key, k, tz.as_deref()).ok().flatten(),
                                        ));
                                    }
                                } else if per == 1 {
                                    if let OpResult::Ok(_) = r {
                                        let k = &keys[i];
                                        let mut op = op_for(
                                            tz.as_deref(),
                                            t,
                                            OpKind::Update,
                                            k.clone(),
                                            vec![],
                                            key_partition(&ta, &def.primary_key, k, tz.as_deref()).ok().flatten(),
                                        );
                                        op.increments = increments
                                            .iter()
                                            .map(|(c, v)| (*c, Value::Int(-v.as_i64().unwrap_or(0))))
                                            .collect();
                                        undo.push(op);
                                    }
                                }
                            }
                            compensate(txn, undo).await;
                            Err(fix_col(error_map::from_node(&e, &table_ctx(t)), def, &rs.sets))
                        } else {
                            Ok(res)
                        }
                    }
                    Err(e) => Err(e),
                }
            }
            None => Err(SqlError::internal("no transaction")),
        };
        txn_control::end_statement(engine, session, r).await?
    };
    let mut matched = 0u64;
    let mut changed = 0u64;
    for chunk in res.chunks(per) {
        let upd = chunk.last();
        match upd {
            Some(OpResult::Ok(_)) => {
                matched += 1;
                let same = per == 2
                    && match &chunk[0] {
                        OpResult::Ok(Some(old)) => {
                            increments.is_empty()
                                && old.iter().zip(&values).all(|(o, (_, n))| vals::group_eq(o, n, Coll::Bin))
                        }
                        _ => false,
                    };
                if !same {
                    changed += 1;
                }
            }
            Some(OpResult::Err(e)) if e.code == ErrorCode::NoSuchRow => {}
            Some(OpResult::Err(e)) => return Err(fix_col(error_map::from_node(e, &table_ctx(t)), def, &rs.sets)),
            None => {}
        }
    }
    session.warnings = std::mem::take(&mut ctx.warnings.list);
    let info = update_info(matched, changed, session.warnings.len());
    let last_insert_id = exec::note_set_last_insert_id(session, &ctx);
    Ok(QueryOutput::Ok { affected_rows: if found_rows { matched } else { changed }, last_insert_id, info })
}

/// Execute `ops` (made by `op_for`, so in UTC already); rows read come back
/// in the session zone (`zone`).
async fn run_ops(
    txn: &mut Transaction,
    ops: Vec<KeyOp>,
    commit: Option<ExecType>,
    t: &SqlTable,
    zone: Option<&Zone>,
) -> Result<Vec<OpResult>, SqlError> {
    let zone = zone.filter(|_| ts_zone::has_timestamp(&t.def));
    let projections: Vec<Vec<ColumnId>> =
        if zone.is_some() { ops.iter().map(|o| o.projection.clone()).collect() } else { Vec::new() };
    let mut res = if let Some(exec) = commit {
        txn.execute(ops, exec).await.map_err(|e| error_map::from_client(e, &table_ctx(t)))?
    } else {
        exec_ops(txn, ops, t).await?
    };
    ts_zone::results_to_local(&mut res, &projections, &t.def, zone);
    Ok(res)
}

/// Put the column name into a node error message mapped without one ('?').
fn fix_col(mut e: SqlError, def: &TableDef, sets: &[(ColumnId, CExpr)]) -> SqlError {
    if e.message.contains("column '?'") {
        if let Some((c, _)) = sets.first() {
            e.message = e.message.replace("column '?'", &format!("column '{}'", def.columns[*c as usize].name));
        }
    }
    e
}

/// The parts of a single-table UPDATE / DELETE: target name, alias,
/// PARTITION names, WHERE, ORDER BY, LIMIT and (UPDATE) SET.
type SingleTableParts<'a> = (
    &'a ast::ObjectName,
    String,
    &'a [ast::Ident],
    Option<&'a Expr>,
    &'a [ast::OrderByExpr],
    Option<&'a Expr>,
    &'a [ast::Assignment],
);

/// The table access an UPDATE / DELETE would use (for EXPLAIN).
pub(crate) async fn explain_access(
    engine: &Engine,
    session: &Session,
    st: &Statement,
) -> Result<(TableAccess, String), SqlError> {
    let (name, alias, partitions, selection, order_by, limit, assigns): SingleTableParts<'_> = match st {
        Statement::Update(u) => {
            let (n, a, p) = single_table(std::slice::from_ref(&u.table))?;
            (n, a, p, u.selection.as_ref(), &u.order_by, u.limit.as_ref(), &u.assignments)
        }
        Statement::Delete(d) => {
            let from = match &d.from {
                ast::FromTable::WithFromKeyword(v) | ast::FromTable::WithoutKeyword(v) => v,
            };
            let (n, a, p) = single_table(from)?;
            (n, a, p, d.selection.as_ref(), &d.order_by, d.limit.as_ref(), &[])
        }
        _ => return Err(SqlError::unsupported("EXPLAIN of this statement")),
    };
    let tables = resolve_tables(engine, session, st).await?;
    let rs = compile_row_stmt(
        &tables,
        ParamMap::from_statement(st),
        (name, &alias, partitions),
        selection,
        order_by,
        limit,
        assigns,
    )?;
    Ok((
        TableAccess {
            table: rs.table,
            part: rs.part,
            access: rs.access,
            local: rs.conj,
            needed: vec![],
            lock: crate::engine::row_lock::RowLock::waiting(LockMode::Exclusive),
            compact_local: None,
            only: None,
        },
        alias,
    ))
}

/// The dispatcher's entry point for DELETE.
pub async fn execute_delete(
    engine: &Engine,
    session: &mut Session,
    st: &Statement,
    params: &[Value],
    kept: Option<&PlanSlot<RowStmt>>,
) -> Result<QueryOutput, SqlError> {
    let Statement::Delete(d) = st else { return Err(SqlError::internal("not a DELETE")) };
    if multi_table_dml::is_multi(st) {
        return multi_table_dml::execute(engine, session, st, params).await;
    }
    let from = match &d.from {
        ast::FromTable::WithFromKeyword(v) | ast::FromTable::WithoutKeyword(v) => v,
    };
    let (name, alias, partitions) = single_table(from)?;
    let rs = plan_cache::plan(engine, session, st, kept, |tables| {
        let pm = ParamMap::from_statement(st);
        compile_row_stmt(
            tables,
            pm,
            (name, &alias, partitions),
            d.selection.as_ref(),
            &d.order_by,
            d.limit.as_ref(),
            &[],
        )
    })
    .await?;
    if params.len() < rs.param_count {
        return Err(SqlError::new(1210, "HY000", "Incorrect arguments to mysqld_stmt_execute"));
    }
    let rs = rs.as_ref();
    let mut ctx = exec::make_ctx(session, params, &rs.sysvars, &rs.uservars)?;
    let t = rs.table.clone();
    let def = &t.def;

    let fk_on = fk_enforce::active(session, &t);
    // Fast path: delete by primary keys.
    let tz = ctx.tz.clone();
    if let (Access::PkLookup { keys }, false) = (&rs.access, fk_on) {
        if only_pk_conjuncts(def, &rs.conj) && rs.order.is_empty() && rs.limit.is_none() && autocommit_alone(session) {
            if let Some(keys) = plan::eval_keys(keys, &def.primary_key, def, &mut ctx)? {
                let ta = TableAccess {
                    table: t.clone(),
                    part: rs.part.clone(),
                    access: Access::FullScan,
                    local: vec![],
                    needed: vec![],
                    lock: crate::engine::row_lock::RowLock::waiting(LockMode::Exclusive),
                    compact_local: None,
                    only: None,
                };
                let ops: Vec<KeyOp> = keys
                    .iter()
                    .filter_map(|k| {
                        key_partition(&ta, &def.primary_key, k, tz.as_deref())
                            .ok()
                            .map(|p| op_for(tz.as_deref(), &t, OpKind::Delete, k.clone(), vec![], p))
                    })
                    .collect();
                if ops.len() <= MAX_OPS_PER_BATCH {
                    let mut txn = txn_control::new_txn(engine, session);
                    let res = txn.execute(ops, txn_control::commit_exec(session)).await;
                    txn_control::note_commit(session, &txn);
                    let res = res.map_err(|e| error_map::from_client(e, &table_ctx(&t)))?;
                    let mut n = 0;
                    for r in res {
                        match r {
                            OpResult::Ok(_) => n += 1,
                            OpResult::Err(e) if e.code == ErrorCode::NoSuchRow => {}
                            OpResult::Err(e) => return Err(error_map::from_node(&e, &table_ctx(&t))),
                        }
                    }
                    session.warnings = std::mem::take(&mut ctx.warnings.list);
                    return Ok(QueryOutput::ok(n));
                }
            }
        }
    }

    txn_control::begin_statement(engine, session);
    let fk = Fk { engine, zone: ctx.tz.clone() };
    let guard = if fk_on { Some(StmtGuard::begin(session).await) } else { None };
    let res = match (session.txn.as_mut(), guard.as_ref()) {
        (_, Some(Err(e))) => Err(e.clone()),
        (Some(txn), _) => delete_general(txn, rs, &mut ctx, fk_on.then_some(&fk)).await,
        (None, _) => Err(SqlError::internal("no transaction")),
    };
    let res = match guard {
        Some(Ok(g)) => g.finish(session, res).await,
        _ => res,
    };
    let n = txn_control::end_statement(engine, session, res).await?;
    session.warnings = std::mem::take(&mut ctx.warnings.list);
    exec::note_set_last_insert_id(session, &ctx);
    Ok(QueryOutput::ok(n))
}

async fn delete_general(
    txn: &mut Transaction,
    rs: &RowStmt,
    ctx: &mut EvalCtx<'_>,
    fk: Option<&Fk<'_>>,
) -> Result<u64, SqlError> {
    let t = &rs.table;
    let rows = target_rows(txn, rs, ctx).await?;
    let mut undo = Vec::new();
    let gone = match delete_rows(txn, t, &rs.part, &rows, &mut undo, &ctx.tz).await {
        Ok(g) => g,
        Err(e) => {
            compensate(txn, undo).await;
            return Err(e);
        }
    };
    let n = gone.iter().filter(|g| **g).count() as u64;
    if let Some(fx) = fk {
        // Every row of the statement is gone before the children are
        // looked at, so rows of one statement that reference each other
        // (a self-referencing table) do not block their own delete.
        for (i, r) in gone.iter().enumerate() {
            if *r {
                fx.on_delete(txn, t, &rows[i], ctx, 0).await?;
            }
        }
    }
    Ok(n)
}

/// Delete `rows` of `t` by primary key (one batch per MAX_OPS_PER_BATCH);
/// which ones were there. Each deleted row's re-insert goes to `undo`; on
/// an error the caller compensates `undo`.
pub(crate) async fn delete_rows(
    txn: &mut Transaction,
    t: &SqlTable,
    part: &PartFn,
    rows: &[Row],
    undo: &mut Vec<KeyOp>,
    tz: &SessionZone,
) -> Result<Vec<bool>, SqlError> {
    let mut ops = Vec::with_capacity(rows.len());
    let mut parts = Vec::with_capacity(rows.len());
    for r in rows {
        let p = row_partition(part, &t.def, r, tz.as_deref())?;
        parts.push(p);
        ops.push(op_for(tz.as_deref(), t, OpKind::Delete, pk_of(&t.def, r), vec![], p));
    }
    let res = exec_ops(txn, ops, t).await?;
    let mut gone = Vec::with_capacity(rows.len());
    for (i, r) in res.iter().enumerate() {
        match r {
            OpResult::Ok(_) => {
                gone.push(true);
                undo.push(reinsert(t, &rows[i], parts[i], tz));
            }
            OpResult::Err(e) if e.code == ErrorCode::NoSuchRow => gone.push(false),
            OpResult::Err(e) => return Err(error_map::from_node(e, &table_ctx(t))),
        }
    }
    Ok(gone)
}

fn reinsert(t: &SqlTable, row: &[Value], p: Option<PartitionId>, tz: &SessionZone) -> KeyOp {
    let full = row.iter().cloned().enumerate().map(|(i, v)| (i as ColumnId, v)).collect();
    op_for(tz.as_deref(), t, OpKind::Insert, pk_of(&t.def, row), full, p)
}
