//! ALTER TABLE and generated columns. Owner: catalog engineer.
//!
//! The DICT request of an ALTER copies or converts stored values; it cannot
//! evaluate SQL. So a generated column whose value the ALTER changes (added,
//! a new expression, type or storage, or a column it reads changed type or
//! is itself recomputed) gets a placeholder from DICT and is then computed
//! by the SQL node:
//!
//! 1. before the DICT request, every existing row is read and the new
//!    generated values are computed and converted with the new definition
//!    (`check_computable`): a strict-mode error refuses the ALTER with
//!    nothing changed, as MySQL's copying ALTER does;
//! 2. after it, one UPDATE statement over the whole table writes them
//!    (`recompute`): the same code path as any UPDATE of the table.
//!
//! A row written by another session between 1 and 2 is checked only by 2;
//! if that fails, the error is returned and the placeholders of the rows not
//! yet written stay (the UPDATE is one statement: all of it or nothing).

use crate::engine::catalog::{expr_columns, quote_ident, SqlIndexKind, SqlTable, SqlTableMeta};
use crate::engine::{dml, exec, generated, query, txn_control, Engine};
use crate::types::{QueryOutput, Session, SqlError};
use norr_signals::{TableDef, Value};

/// 3108 ER_DEPENDENT_BY_GENERATED_COLUMN: a generated column of the new
/// table (`new`: each column's definition and the old column it came from)
/// reads a column of the old table that is gone (dropped or renamed).
/// Checked on the result, so dropping a column together with the generated
/// columns that read it works, as in MySQL.
pub fn check_dependencies<'a>(
    new: impl Iterator<Item = &'a sqlparser::ast::ColumnDef> + Clone,
    t: &SqlTable,
) -> Result<(), SqlError> {
    for c in new.clone() {
        let Some((e, _)) = generated::generation_of(c)? else { continue };
        for name in expr_columns(&e.to_string()) {
            if new.clone().any(|n| n.name.value.eq_ignore_ascii_case(&name)) {
                continue;
            }
            if let Some((_, old, _)) = t.column(&name) {
                return Err(SqlError::new(
                    3108,
                    "HY000",
                    format!("Column '{}' has a generated column dependency.", old.name),
                ));
            }
        }
    }
    Ok(())
}

/// The generated columns of the new table (`new`, `meta`) whose values the
/// ALTER changes, in column order; `origins` maps each new column to the old
/// one it came from. Refused (1235): a recomputed column in the
/// partitioning, and a NOT NULL one in a UNIQUE index (the placeholders
/// would collide before they are computed). The primary key is guarded by
/// the caller (its columns must keep their stored values).
pub fn to_compute(
    t: &SqlTable,
    new: &TableDef,
    meta: &SqlTableMeta,
    origins: &[(String, Option<String>)],
    key_cols: &[String],
) -> Result<Vec<String>, SqlError> {
    let origin_of =
        |name: &str| origins.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).and_then(|(_, o)| o.as_deref());
    let same_type = |name: &str| -> bool {
        let Some(origin) = origin_of(name) else { return false };
        let (Some(old_id), Some(new_id)) = (t.def.column_id(origin), new.column_id(name)) else { return false };
        t.def.columns[old_id as usize].ty == new.columns[new_id as usize].ty
            && t.meta.columns[old_id as usize].sql_type == meta.columns[new_id as usize].sql_type
    };
    let mut out: Vec<String> = Vec::new();
    for g in &meta.generated {
        let kept = origin_of(&g.column)
            .and_then(|o| t.meta.generation(o))
            .is_some_and(|o| o.expr == g.expr && o.stored == g.stored)
            && same_type(&g.column)
            && generated::referenced_columns(&g.expr)
                .iter()
                .all(|r| same_type(r) && !out.iter().any(|c| c.eq_ignore_ascii_case(r)));
        if kept {
            continue;
        }
        let what = |why: &str| {
            SqlError::unsupported(format!("ALTER TABLE computing generated column '{}' that is {why}", g.column))
        };
        if origin_of(&g.column).is_some_and(|o| key_cols.iter().any(|k| k.eq_ignore_ascii_case(o))) {
            return Err(what("a primary-key or partitioning column"));
        }
        let id = new.column_id(&g.column).ok_or_else(|| SqlError::internal("generated column vanished"))?;
        let unique = meta.indexes.iter().any(|i| {
            matches!(i.kind, SqlIndexKind::Unique | SqlIndexKind::Primary)
                && i.columns.iter().any(|c| c.eq_ignore_ascii_case(&g.column))
        });
        if unique && !new.columns[id as usize].nullable {
            return Err(what("NOT NULL and in a UNIQUE index"));
        }
        out.push(g.column.clone());
    }
    Ok(out)
}

/// Step 1 (see the module doc): compute the new generated values of every
/// existing row of `t` under the new definition `new`, without writing, and
/// verify the new definition's CHECK constraints on each (3819 refuses the
/// ALTER with nothing changed, as in MySQL).
pub async fn check_computable(
    e: &Engine,
    s: &mut Session,
    t: &SqlTable,
    new: &TableDef,
    origins: &[(String, Option<String>)],
) -> Result<(), SqlError> {
    let nt = SqlTable::from_def(new.clone()).ok_or_else(|| SqlError::internal("new definition has no table"))?;
    let old_cols: Vec<String> = t.columns_visible().map(|(_, c, _)| c.name.clone()).collect();
    let sql = format!(
        "SELECT {} FROM {}.{}",
        old_cols.iter().map(|c| quote_ident(c)).collect::<Vec<_>>().join(", "),
        quote_ident(&t.db),
        quote_ident(&t.name)
    );
    let sqlparser::ast::Statement::Query(q) = crate::engine::parse_sqlparser(&sql)? else {
        return Err(SqlError::internal("SELECT did not parse as a query"));
    };
    let rows = match query::execute_query(e, s, &q, &[]).await? {
        QueryOutput::Rows { rows, .. } => rows,
        QueryOutput::Ok { .. } | QueryOutput::Streamed { .. } => {
            return Err(SqlError::internal("a query gave no result set"))
        }
    };
    // Where each new column's value comes from: an old column's position in
    // `old_cols`, or None (added, hidden, or recomputed: a placeholder).
    let from: Vec<Option<usize>> = nt
        .def
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            if generated::is_generated(&nt, i as u16) {
                return None;
            }
            let origin = origins.iter().find(|(n, _)| *n == c.name).and_then(|(_, o)| o.as_deref())?;
            old_cols.iter().position(|o| o == origin)
        })
        .collect();
    let mut ctx = exec::make_ctx(s, &[], &[], &[])?;
    for (ri, old) in rows.into_iter().enumerate() {
        let row_no = ri as u64 + 1;
        let mut row: Vec<Value> = Vec::with_capacity(from.len());
        for (i, f) in from.iter().enumerate() {
            let v = f.and_then(|j| old.get(j).cloned()).unwrap_or(Value::Null);
            // The data node converts the kept columns; an error there is
            // reported by the DICT request, not here.
            row.push(crate::engine::store::store_col(&nt, i, v.clone(), row_no, None, &mut ctx.warnings).unwrap_or(v));
        }
        crate::engine::check_constraints::complete_row(&nt, &mut row, &mut ctx, row_no)?;
    }
    Ok(())
}

/// Step 2 (see the module doc): write the generated values of every row of
/// the altered table `db`.`table` with one UPDATE, committed before return.
/// ON UPDATE CURRENT_TIMESTAMP columns keep their values (they are assigned
/// themselves), as in MySQL's ALTER.
pub async fn recompute(e: &Engine, s: &mut Session, db: &str, table: &str) -> Result<(), SqlError> {
    let t = crate::engine::temp_tables::get(e, s, db, table).await?;
    let Some(first) = t.meta.generated.first() else { return Ok(()) };
    // `g = DEFAULT` assigns nothing (the column is computed anyway) and
    // makes the statement a valid UPDATE of every row.
    let mut sets = vec![format!("{} = DEFAULT", quote_ident(&first.column))];
    for (c, m) in t.def.columns.iter().zip(&t.meta.columns) {
        if m.on_update_now {
            sets.push(format!("{0} = {0}", quote_ident(&c.name)));
        }
    }
    let sql = format!("UPDATE {}.{} SET {}", quote_ident(db), quote_ident(table), sets.join(", "));
    let st = crate::engine::parse_sqlparser(&sql)?;
    txn_control::begin(s).await?;
    match dml::execute_update(e, s, &st, &[], None).await {
        Ok(_) => txn_control::commit(s).await,
        Err(err) => {
            let _ = txn_control::rollback(s).await;
            Err(err)
        }
    }
}
