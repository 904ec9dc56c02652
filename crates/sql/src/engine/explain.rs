//! EXPLAIN: MySQL's traditional table format, one row per table access, with
//! the access path NorrDB uses (`type`: const = primary-key lookup, eq_ref =
//! unique lookup or batched join lookup, range = index range or several key
//! lookups, ALL = full scan; `Extra` spells it out) and the partitions left
//! after pruning (evaluated with the statement's parameters, if any).
//! `rows` and `filtered` are estimates from the tables' statistics
//! (`index_stats`, `row_estimates`), made when a table has none yet.

use crate::engine::catalog::SqlTable;
use crate::engine::exec::{self, scan_partitions};
use crate::engine::expr::EvalCtx;
use crate::engine::index_stats::{self, TableEstimate};
use crate::engine::partition::PartFn;
use crate::engine::plan::{self, Access};
use crate::engine::query::{prepare_query, JoinLookup, QueryNode, SelectPlan, SourceKind, TableAccess};
use crate::engine::{dml, multi_table_dml, row_estimates, Engine};
use crate::types::{ColumnMeta, FieldType, QueryOutput, Session, SqlError};
use norr_signals::{TableId, Value};
use sqlparser::ast::Statement;
use std::collections::HashMap;
use std::sync::Arc;

/// Column names of EXPLAIN's output.
pub const EXPLAIN_COLUMNS: [&str; 12] = [
    "id",
    "select_type",
    "table",
    "partitions",
    "type",
    "possible_keys",
    "key",
    "key_len",
    "ref",
    "rows",
    "filtered",
    "Extra",
];

fn columns() -> Vec<ColumnMeta> {
    EXPLAIN_COLUMNS
        .iter()
        .map(|n| {
            let ft = match *n {
                "id" | "rows" => FieldType::LongLong,
                "filtered" => FieldType::Double,
                _ => FieldType::VarString,
            };
            ColumnMeta::expr(n, ft)
        })
        .collect()
}

fn s(x: &str) -> Value {
    Value::str(x)
}

/// Partition names of a table (declared names, else p0..pN-1).
pub fn partition_names(t: &crate::engine::catalog::SqlTable, part: &PartFn) -> Vec<String> {
    if let Some(info) = &t.meta.partition {
        if !info.defs.is_empty() {
            return info.defs.iter().map(|d| d.name.clone()).collect();
        }
    }
    (0..part.partition_count().max(1)).map(|i| format!("p{i}")).collect()
}

/// One EXPLAIN row for a table access.
pub fn access_row(
    id: i64,
    select_type: &str,
    alias: &str,
    ta: &TableAccess,
    lookup: Option<&JoinLookup>,
    est: &Estimates,
    ctx: &mut EvalCtx,
) -> Result<Vec<Value>, SqlError> {
    let def = &ta.table.def;
    let stats = est.get(&def.id).map(|e| e.as_ref());
    let names = partition_names(&ta.table, &ta.part);
    let join_lookup = lookup.is_some();
    let (ty, key, mut extra) = match (&ta.access, lookup) {
        (_, Some(l)) => {
            let name = match l.index.and_then(|i| def.index(i)) {
                Some(ix) if ix.name.eq_ignore_ascii_case(norr_signals::schema::PK_ORDERED_INDEX) => "PRIMARY".into(),
                Some(ix) => ix.name.clone(),
                None => "PRIMARY".to_string(),
            };
            if l.range {
                ("ref", name, "index ranges of a batch of outer keys per scan".to_string())
            } else {
                ("eq_ref", name, "batched key lookup per outer row batch".to_string())
            }
        }
        (Access::PkLookup { keys }, _) if keys.len() == 1 => {
            ("const", "PRIMARY".to_string(), "primary key lookup".to_string())
        }
        (Access::PkLookup { keys }, _) => {
            ("range", "PRIMARY".to_string(), format!("primary key batch lookup ({} keys)", keys.len()))
        }
        (Access::UniqueLookup { name, keys, .. }, _) => {
            (if keys.len() == 1 { "const" } else { "range" }, name.clone(), "unique index lookup".to_string())
        }
        (Access::IndexRange { name, .. }, _) => ("range", name.clone(), "index range scan".to_string()),
        (Access::IndexKeys { name, keys, .. }, _) => {
            ("range", name.clone(), format!("index ranges, one scan per batch of keys ({} keys)", keys.len()))
        }
        (Access::PkRange { low, high }, _) => match plan::resolve_pk_range(def, low, high, ctx)? {
            plan::PkRangeRun::Keys(k) => {
                ("range", "PRIMARY".to_string(), format!("primary key range as batched key lookups ({} keys)", k.len()))
            }
            plan::PkRangeRun::Scan(Access::IndexRange { name, .. }) => ("range", name, "index range scan".to_string()),
            plan::PkRangeRun::Scan(_) => ("ALL", String::new(), "full table scan".to_string()),
        },
        (Access::FullScan, _) => ("ALL", String::new(), "full table scan".to_string()),
    };
    // Partitions after pruning.
    let parts: Vec<String> = match &ta.access {
        Access::PkLookup { keys } if !join_lookup => match plan::eval_keys(keys, &def.primary_key, def, ctx) {
            Ok(Some(ks)) if ta.part.partition_count() > 0 => {
                let mut ps: Vec<u32> = Vec::new();
                for k in &ks {
                    let mut row = vec![Value::Null; def.columns.len()];
                    for (c, v) in def.primary_key.iter().zip(k) {
                        row[*c as usize] = v.clone();
                    }
                    if ta.part.columns().iter().all(|c| def.primary_key.contains(c)) {
                        if let Ok(Some(p)) = ta.part.partition_of_local_row(def, &row, ctx.zone()) {
                            if !ps.contains(&p) {
                                ps.push(p);
                            }
                        }
                    }
                }
                if ps.is_empty() {
                    names.clone()
                } else {
                    ps.sort_unstable();
                    ps.iter().filter_map(|p| names.get(*p as usize).cloned()).collect()
                }
            }
            _ => names.clone(),
        },
        _ => match scan_partitions(ta, ctx)? {
            None => names.clone(),
            Some(ps) => ps.iter().filter_map(|p| names.get(*p as usize).cloned()).collect(),
        },
    };
    if !join_lookup
        && (matches!(ta.access, Access::IndexRange { .. } | Access::FullScan)
            || matches!(ta.access, Access::PkRange { .. }) && !extra.starts_with("primary key"))
        && plan::build_filter(def, &ta.local, &[], ctx)?.is_some()
    {
        extra.push_str("; Using pushed condition");
    }
    if parts.is_empty() {
        extra = "no matching row in pruned partitions".to_string();
    }
    let rows = estimated_rows(ta, lookup, stats, ctx)?;
    let filtered = row_estimates::filtered(ta, lookup, stats);
    Ok(vec![
        Value::Int(id),
        s(select_type),
        s(alias),
        if parts.is_empty() || ta.table.meta.partition.is_none() { Value::Null } else { s(&parts.join(",")) },
        s(ty),
        if key.is_empty() { Value::Null } else { s(&key) },
        if key.is_empty() { Value::Null } else { s(&key) },
        Value::Null,
        Value::Null,
        rows,
        Value::Double(filtered),
        s(&extra),
    ])
}

/// EXPLAIN's `rows` for a table access: the keys a lookup of whole keys
/// reads (with the statement's values), 1 per outer row for a join lookup
/// on a unique key (`eq_ref`), else the statistics' estimate
/// (`row_estimates`); NULL without statistics.
fn estimated_rows(
    ta: &TableAccess,
    lookup: Option<&JoinLookup>,
    stats: Option<&TableEstimate>,
    ctx: &mut EvalCtx,
) -> Result<Value, SqlError> {
    let def = &ta.table.def;
    if lookup.is_some_and(|l| !l.range) {
        return Ok(Value::Int(1));
    }
    let keys = match (&ta.access, lookup) {
        (_, Some(_)) => None,
        (Access::PkLookup { keys }, _) => plan::eval_keys(keys, &def.primary_key, def, ctx)?,
        (Access::UniqueLookup { index, keys, .. }, _) => match def.index(*index) {
            Some(ix) => plan::eval_keys(keys, &ix.columns, def, ctx)?,
            None => None,
        },
        (Access::PkRange { low, high }, _) => match plan::resolve_pk_range(def, low, high, ctx)? {
            plan::PkRangeRun::Keys(k) => Some(k),
            plan::PkRangeRun::Scan(_) => None,
        },
        _ => None,
    };
    if let Some(k) = keys {
        return Ok(Value::Int(k.len() as i64));
    }
    Ok(stats.and_then(|e| row_estimates::access_rows(ta, lookup, e)).map_or(Value::Null, |n| Value::Int(n as i64)))
}

/// The statistics of the tables a plan reads, by table id (`index_stats`).
pub type Estimates = HashMap<TableId, Arc<TableEstimate>>;

/// The tables `n` reads (derived tables and set operations included).
fn tables_of(n: &QueryNode, out: &mut Vec<Arc<SqlTable>>) {
    match n {
        QueryNode::SetOp(s) => {
            tables_of(&s.left, out);
            tables_of(&s.right, out);
        }
        QueryNode::Select(p) => {
            for src in &p.sources {
                match &src.kind {
                    SourceKind::Table(t) => out.push(t.table.clone()),
                    SourceKind::Derived(d) => tables_of(d, out),
                    _ => {}
                }
            }
        }
        QueryNode::Recursive(r) => r.anchors.iter().chain(&r.steps).for_each(|x| tables_of(x, out)),
    }
}

/// The statistics of `tables` (made now for those that have none). A table
/// that cannot be read for them gets none: its rows show NULL, the EXPLAIN
/// still answers.
async fn estimates_of(engine: &Engine, tables: Vec<Arc<SqlTable>>) -> Estimates {
    let mut out = Estimates::new();
    for t in tables {
        if out.contains_key(&t.def.id) {
            continue;
        }
        if let Ok(e) = index_stats::estimate(engine, &t).await {
            out.insert(t.def.id, e);
        }
    }
    out
}

/// The statistics of every table of a compiled query and its subqueries.
async fn query_estimates(engine: &Engine, c: &crate::engine::query::Compiled) -> Estimates {
    let mut tables = Vec::new();
    tables_of(&c.root, &mut tables);
    for sub in &c.subs {
        tables_of(&sub.node, &mut tables);
    }
    estimates_of(engine, tables).await
}

fn explain_node(
    n: &QueryNode,
    id: &mut i64,
    select_type: &str,
    out: &mut Vec<Vec<Value>>,
    est: &Estimates,
    ctx: &mut EvalCtx,
) -> Result<(), SqlError> {
    match n {
        QueryNode::SetOp(s) => {
            explain_node(&s.left, id, select_type, out, est, ctx)?;
            explain_node(&s.right, id, "UNION", out, est, ctx)
        }
        QueryNode::Select(p) => explain_select(p, id, select_type, out, est, ctx),
        QueryNode::Recursive(r) => {
            for a in &r.anchors {
                explain_node(a, id, select_type, out, est, ctx)?;
            }
            for s in &r.steps {
                explain_node(s, id, "UNION", out, est, ctx)?;
            }
            Ok(())
        }
    }
}

fn explain_select(
    p: &SelectPlan,
    id: &mut i64,
    select_type: &str,
    out: &mut Vec<Vec<Value>>,
    est: &Estimates,
    ctx: &mut EvalCtx,
) -> Result<(), SqlError> {
    *id += 1;
    let my_id = *id;
    for src in &p.sources {
        match &src.kind {
            SourceKind::Table(t) => {
                let mut row = access_row(my_id, select_type, &src.alias, t, src.lookup.as_ref(), est, ctx)?;
                if crate::engine::pushed_agg::explains_pushed(p, ctx)? {
                    // The data nodes compute the aggregate (`pushed_agg`).
                    if let Some(Value::Bytes(extra)) = row.last_mut() {
                        extra.extend_from_slice(b"; Using pushed aggregate");
                    }
                }
                out.push(row)
            }
            SourceKind::Derived(n) => {
                out.push(unkeyed_row(my_id, select_type, &src.alias, "derived table"));
                explain_node(n, id, "DERIVED", out, est, ctx)?;
            }
            SourceKind::JsonTable(_) => {
                out.push(unkeyed_row(my_id, select_type, &src.alias, "Table function: json_table; Using temporary"))
            }
            SourceKind::WorkTable(_) => out.push(unkeyed_row(my_id, select_type, &src.alias, "Recursive; Using where")),
            SourceKind::Rows(_) => {
                if p.sources.len() == 1 && src.alias.is_empty() {
                    out.push(vec![
                        Value::Int(my_id),
                        s(select_type),
                        Value::Null,
                        Value::Null,
                        Value::Null,
                        Value::Null,
                        Value::Null,
                        Value::Null,
                        Value::Null,
                        Value::Null,
                        Value::Null,
                        s("No tables used"),
                    ]);
                }
            }
        }
    }
    Ok(())
}

/// The EXPLAIN row of a source that is not a stored table (a derived
/// table, JSON_TABLE, a recursive CTE's work table): read whole (`ALL`), no
/// key, no row estimate; `extra` says what it is.
fn unkeyed_row(id: i64, select_type: &str, alias: &str, extra: &str) -> Vec<Value> {
    vec![
        Value::Int(id),
        s(select_type),
        s(alias),
        Value::Null,
        s("ALL"),
        Value::Null,
        Value::Null,
        Value::Null,
        Value::Null,
        Value::Null,
        Value::Double(100.0),
        s(extra),
    ]
}

/// The dispatcher's entry point for EXPLAIN <statement>.
pub async fn execute_explain(
    engine: &Engine,
    session: &mut Session,
    st: &Statement,
    params: &[Value],
) -> Result<QueryOutput, SqlError> {
    let Statement::Explain { statement, analyze: false, format, .. } = st else {
        return Err(SqlError::unsupported("EXPLAIN ANALYZE"));
    };
    // Only the traditional table: another format is refused, not answered
    // with the table (a client parsing JSON would get rows it cannot read).
    if let Some(sqlparser::ast::AnalyzeFormatKind::Keyword(f) | sqlparser::ast::AnalyzeFormatKind::Assignment(f)) =
        format
    {
        if *f != sqlparser::ast::AnalyzeFormat::TRADITIONAL {
            return Err(SqlError::unsupported(format!("EXPLAIN FORMAT={f} (only FORMAT=TRADITIONAL)")));
        }
    }
    let mut rows = Vec::new();
    match statement.as_ref() {
        Statement::Query(q) => {
            let c = prepare_query(engine, session, q).await?;
            let est = query_estimates(engine, &c).await;
            let mut ctx = exec::make_ctx(session, params, &c.sysvars, &c.uservars)?;
            let mut id = 0;
            explain_node(&c.root, &mut id, "SIMPLE", &mut rows, &est, &mut ctx)?;
            for sub in &c.subs {
                explain_node(
                    &sub.node,
                    &mut id,
                    if sub.correlated { "DEPENDENT SUBQUERY" } else { "SUBQUERY" },
                    &mut rows,
                    &est,
                    &mut ctx,
                )?;
            }
            if c.subs.is_empty() && matches!(c.root, QueryNode::SetOp(_)) {
                // keep MySQL's select_type for the first part of a UNION
                if let Some(r) = rows.first_mut() {
                    r[1] = s("PRIMARY");
                }
            } else if !c.subs.is_empty() {
                if let Some(r) = rows.first_mut() {
                    r[1] = s("PRIMARY");
                }
            }
        }
        Statement::Update(_) | Statement::Delete(_) if multi_table_dml::is_multi(statement) => {
            let (c, targets) = multi_table_dml::explain_plan(engine, session, statement).await?;
            let est = query_estimates(engine, &c).await;
            let mut ctx = exec::make_ctx(session, params, &c.sysvars, &c.uservars)?;
            let mut id = 0;
            explain_node(&c.root, &mut id, "SIMPLE", &mut rows, &est, &mut ctx)?;
            let kind = if matches!(statement.as_ref(), Statement::Update(_)) { "UPDATE" } else { "DELETE" };
            for r in rows.iter_mut() {
                let written =
                    matches!(&r[2], Value::Bytes(a) if targets.iter().any(|t| t.as_bytes().eq_ignore_ascii_case(a)));
                if r[0] == Value::Int(1) && written {
                    r[1] = s(kind);
                }
            }
            for sub in &c.subs {
                explain_node(
                    &sub.node,
                    &mut id,
                    if sub.correlated { "DEPENDENT SUBQUERY" } else { "SUBQUERY" },
                    &mut rows,
                    &est,
                    &mut ctx,
                )?;
            }
        }
        Statement::Update(_) | Statement::Delete(_) => {
            let (ta, alias) = dml::explain_access(engine, session, statement).await?;
            let est = estimates_of(engine, vec![ta.table.clone()]).await;
            let mut ctx = exec::make_ctx(session, params, &[], &[])?;
            let kind = if matches!(statement.as_ref(), Statement::Update(_)) { "UPDATE" } else { "DELETE" };
            rows.push(access_row(1, kind, &alias, &ta, None, &est, &mut ctx)?);
        }
        Statement::Insert(_) => {
            rows.push(vec![
                Value::Int(1),
                s("INSERT"),
                Value::Null,
                Value::Null,
                s("ALL"),
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
            ]);
        }
        _ => return Err(SqlError::unsupported("EXPLAIN of this statement")),
    }
    Ok(QueryOutput::Rows { columns: columns().into(), rows })
}
