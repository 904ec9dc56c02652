//! Execution of compiled queries on the native client: key lookups (batched),
//! range and full scans with pushed filters and pruned partitions, joins
//! (batched key lookups of the inner side, or hash / nested loops over a
//! fetched inner side), aggregation, ORDER BY, DISTINCT, LIMIT, subqueries.

use crate::engine::error_map::{self, ErrCtx};
use crate::engine::expr::compile::{AggKind, AggSpec, ScopeCol, SubKind};
use crate::engine::expr::value::{self as vals, order_cmp, Coll, Num};
use crate::engine::expr::{eval, eval_pred, is_row_independent, CExpr, CmpKind, EvalCtx, SubResult};
use crate::engine::functions::tz::Zone;
use crate::engine::partition::{constraints_from, ColRange};
use crate::engine::plan::{self, Access, KeyConv};
use crate::engine::query::{Compiled, OrderKey, QueryNode, SelectPlan, SetOpPlan, Source, SourceKind, TableAccess};
use crate::engine::row_lock::RowLock;
use crate::engine::{sort_keys, txn_control, vars, Engine};
use crate::types::{Session, SqlError};
use norr_client::{Client, ClientError, Transaction};
use norr_signals::{
    ColumnId, Decimal, ErrorCode, ExecType, KeyAccess, KeyOp, OpKind, OpResult, PartitionId, ScanSpec, TableDef, Value,
    MAX_OPS_PER_BATCH, MAX_SCAN_RANGES,
};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

/// Rows per scan batch we ask the data node for.
pub const SCAN_BATCH_ROWS: u32 = 1024;
/// Outer rows per batch of join key lookups.
pub const JOIN_BATCH: usize = 1024;
/// Most rows a statement may materialise (bounded memory per statement).
pub const MAX_RESULT_ROWS: usize = 50_000_000;

pub type Row = Vec<Value>;
type BoxFut<'a, T> = Pin<Box<dyn Future<Output = Result<T, SqlError>> + Send + 'a>>;

/// Where reads go: a standalone committed read, or the session's transaction.
pub enum Reader<'a> {
    Standalone(&'a Client),
    Txn(&'a mut Transaction),
}

impl Reader<'_> {
    pub async fn key_ops(&mut self, ops: Vec<KeyOp>) -> Result<Vec<OpResult>, ClientError> {
        match self {
            Reader::Standalone(c) => {
                // One round trip: execute + commit of a read-only transaction.
                let mut t = c.begin();
                t.execute(ops, ExecType::Commit).await
            }
            Reader::Txn(t) => t.execute(ops, ExecType::NoCommit).await,
        }
    }
    pub async fn scan(&mut self, spec: ScanSpec) -> Result<norr_client::ScanStream, ClientError> {
        count_scan(&spec);
        match self {
            Reader::Standalone(c) => c.scan(spec).await,
            Reader::Txn(t) => t.scan(spec).await,
        }
    }
}

/// All rows of a scan. A KILL QUERY stops it even while a batch is in
/// flight (say, a locking scan waiting for a row lock): dropping the stream
/// closes the scan on the data node, which cancels its lock wait.
async fn scan_rows(
    rd: &mut Reader<'_>,
    spec: ScanSpec,
    ctx: &EvalCtx<'_>,
    def: &TableDef,
) -> Result<Vec<Row>, SqlError> {
    let err = |e| error_map::from_client(e, &table_err(def));
    // TIMESTAMP values come in UTC: the session sees its zone's wall time.
    let zone = ctx.zone().filter(|_| crate::engine::ts_zone::has_timestamp(def));
    let projection = if zone.is_some() { spec.projection.clone() } else { Vec::new() };
    let to_local = |mut rows: Vec<Row>| {
        if zone.is_some() {
            for r in rows.iter_mut() {
                crate::engine::ts_zone::row_to_local(r, def, &projection, zone);
            }
        }
        rows
    };
    let mut scan = rd.scan(spec).await.map_err(err)?;
    let Some(entry) = ctx.stop.as_deref() else {
        let rows = scan.collect_all().await.map_err(err)?;
        count_rows_read(rows.len());
        return Ok(to_local(rows));
    };
    let mut rows = Vec::new();
    loop {
        let batch = tokio::select! {
            biased;
            b = scan.next_batch() => b.map_err(err)?,
            _ = entry.wait_kill(crate::session_registry::Kill::Query) => {
                return Err(crate::session_registry::interrupted())
            }
        };
        if let Some(b) = &batch {
            count_rows_read(b.len());
            // Bounded (`memory`): 1041 rather than growing without end.
            ctx.mem.charge(crate::engine::memory::rows_bytes(b))?;
        }
        match batch {
            Some(mut b) if rows.is_empty() => rows = std::mem::take(&mut b),
            Some(mut b) => rows.append(&mut b),
            None => return Ok(to_local(rows)),
        }
    }
}

/// A statement's turn on its session thread, for long in-memory loops
/// (joins without a usable key, filters, projections of many rows).
///
/// Sessions share a few runtime threads, and tokio has no thread of its own
/// for sockets: while every thread is inside one long poll, no client packet
/// is read at all, whoever it is for. So a loop gives its thread back every
/// `TURN` of work (measured in time, as a row pair of a join and a row of a
/// projection cost very different amounts): `yield_now` lets the runtime
/// poll its sockets and run or hand out the other sessions' ready work, and
/// the statement then stops if KILL, a disconnect or max_execution_time
/// marked it. The clock is read only every `UNITS_PER_CHECK` units.
pub(crate) struct Turn {
    units: usize,
    /// When the turn began; read at the first check only, so that short
    /// statements (a point select) never read the clock here.
    since: Option<std::time::Instant>,
}

/// How long a statement keeps its thread at most between yields (plus the
/// `UNITS_PER_CHECK` units before the first look at the clock).
const TURN: std::time::Duration = std::time::Duration::from_millis(2);
/// Units of work between two looks at the clock.
const UNITS_PER_CHECK: usize = 1 << 10;

impl Turn {
    pub(crate) fn new() -> Turn {
        Turn { units: 0, since: None }
    }

    /// `done` more units of work; at the end of a turn, yield and stop on a kill.
    pub(crate) async fn point(&mut self, ctx: &EvalCtx<'_>, done: usize) -> Result<(), SqlError> {
        self.units += done;
        if self.units < UNITS_PER_CHECK {
            return Ok(());
        }
        self.units = 0;
        let now = std::time::Instant::now();
        match self.since {
            Some(t) if now.duration_since(t) >= TURN => {}
            Some(_) => return Ok(()),
            None => {
                self.since = Some(now);
                return ctx.check_killed();
            }
        }
        tokio::task::yield_now().await;
        self.since = Some(std::time::Instant::now());
        ctx.check_killed()
    }
}

pub fn table_err(def: &TableDef) -> ErrCtx {
    let (db, t) = def.name.split_once('/').unwrap_or(("", &def.name));
    ErrCtx::table(db, t)
}

/// Build the evaluation context of a statement from the session.
pub fn make_ctx<'p>(
    session: &Session,
    params: &'p [Value],
    sysvars: &[(String, bool)],
    uservars: &[String],
) -> Result<EvalCtx<'p>, SqlError> {
    let mut ctx = EvalCtx::new(params);
    ctx.current_db = session.current_db.clone();
    ctx.tz = session.time_zone.clone();
    ctx.connection_id = session.connection_id;
    ctx.login = session.account.as_ref().map(|a| a.names.clone());
    ctx.stop = Some(session.entry.clone());
    ctx.last_insert_id = session.last_insert_id;
    ctx.max_rows_per_txn = session.max_rows_per_txn;
    ctx.mem = crate::engine::memory::StatementMemory::new(session.max_statement_memory);
    let var = |name: &str| session.vars.get(name).and_then(|v| v.as_i64()).and_then(|n| u64::try_from(n).ok());
    if let Some(n) = var("max_allowed_packet") {
        ctx.max_packet = n;
    }
    if let Some(n) = var("group_concat_max_len") {
        ctx.group_concat_max_len = n;
    }
    if let Some(n) = var("ndb_autoincrement_prefetch_sz") {
        ctx.ai_prefetch = n.clamp(1, crate::engine::auto_inc_cache::MAX_PREFETCH);
    }
    for (name, global) in sysvars {
        match vars::get_system_var(session, name, *global) {
            Some(v) => {
                if name.ends_with(')') {
                    crate::engine::found_rows::note_read(name, &mut ctx.warnings);
                }
                ctx.sysvals.push(v)
            }
            None => return Err(error_map::unknown_system_variable(name)),
        }
    }
    for u in uservars {
        ctx.uservals.push(vars::get_user_var(session, u));
    }
    Ok(ctx)
}

/// Is `flag` (upper case, e.g. "ONLY_FULL_GROUP_BY") in the session's sql_mode?
pub fn sql_mode_has(session: &Session, flag: &str) -> bool {
    match vars::get_system_var(session, "sql_mode", false) {
        Some(Value::Bytes(b)) => b.split(|c| *c == b',').any(|f| f == flag.as_bytes()),
        _ => false,
    }
}

/// Does a division by zero in the values an INSERT or UPDATE writes fail it
/// (strict mode with ERROR_FOR_DIVISION_BY_ZERO, as MySQL)? IGNORE makes it
/// a warning again.
pub fn div_zero_is_error(session: &Session, ignore: bool) -> bool {
    !ignore
        && sql_mode_has(session, "ERROR_FOR_DIVISION_BY_ZERO")
        && (sql_mode_has(session, "STRICT_TRANS_TABLES") || sql_mode_has(session, "STRICT_ALL_TABLES"))
}

/// A statement that called LAST_INSERT_ID(expr) sets the session's value
/// (and reports it as the OK packet's insert id, returned here; 0 if not).
pub fn note_set_last_insert_id(session: &mut Session, ctx: &EvalCtx<'_>) -> u64 {
    match ctx.set_last_insert_id {
        Some(id) => {
            session.last_insert_id = id;
            id
        }
        None => 0,
    }
}

/// Does any query block of `n` lock rows (a locking clause of a derived
/// table counts: its rows are locked too)?
fn node_locks(n: &QueryNode) -> bool {
    match n {
        QueryNode::Select(p) => {
            p.lock.is_locking() || p.sources.iter().any(|s| matches!(&s.kind, SourceKind::Derived(d) if node_locks(d)))
        }
        QueryNode::SetOp(s) => node_locks(&s.left) || node_locks(&s.right),
        QueryNode::Recursive(r) => r.anchors.iter().chain(&r.steps).any(node_locks),
    }
}

/// Run a compiled SELECT for the session: through its transaction when one is
/// open or rows are locked, else as standalone committed reads.
pub async fn run_compiled(
    engine: &Engine,
    session: &mut Session,
    c: &Compiled,
    params: &[Value],
) -> Result<Vec<Row>, SqlError> {
    match run_compiled_to(engine, session, c, params, None).await? {
        Produced::Rows(rows) => Ok(rows),
        Produced::Streamed(_) => Err(SqlError::internal("a result streamed without a sink")),
    }
}

/// What a top-level SELECT produced: its rows, or how many it sent to the
/// client as it went (`stream`).
pub enum Produced {
    Rows(Vec<Row>),
    Streamed(u64),
}

/// `run_compiled`, streaming the rows to `sink` when there is one and the
/// plan allows (`stream::streamable`).
pub async fn run_compiled_to(
    engine: &Engine,
    session: &mut Session,
    c: &Compiled,
    params: &[Value],
    sink: Option<&crate::engine::stream::ResultSink>,
) -> Result<Produced, SqlError> {
    run_compiled_as(engine, session, c, params, sink, false).await
}

/// The SELECT of INSERT ... SELECT: a division by zero in it fails the
/// statement with 1365 where the INSERT's own values would
/// (`div_zero_is_error`), as MySQL's strict mode does.
pub async fn run_insert_source(
    engine: &Engine,
    session: &mut Session,
    c: &Compiled,
    params: &[Value],
    div_zero_error: bool,
) -> Result<Vec<Row>, SqlError> {
    match run_compiled_as(engine, session, c, params, None, div_zero_error).await? {
        Produced::Rows(rows) => Ok(rows),
        Produced::Streamed(_) => Err(SqlError::internal("a result streamed without a sink")),
    }
}

async fn run_compiled_as(
    engine: &Engine,
    session: &mut Session,
    c: &Compiled,
    params: &[Value],
    sink: Option<&crate::engine::stream::ResultSink>,
    div_zero_error: bool,
) -> Result<Produced, SqlError> {
    if params.len() < c.param_count {
        return Err(SqlError::new(1210, "HY000", "Incorrect arguments to mysqld_stmt_execute"));
    }
    if let Some(e) = &c.full_group_by {
        if sql_mode_has(session, "ONLY_FULL_GROUP_BY") {
            return Err(e.clone());
        }
    }
    let mut ctx = make_ctx(session, params, &c.sysvars, &c.uservars)?;
    ctx.div_zero_error = div_zero_error;
    let use_txn = session.in_transaction
        || session.txn.is_some()
        || !session.autocommit
        || node_locks(&c.root)
        || c.subs.iter().any(|s| node_locks(&s.node));
    let res = if use_txn {
        txn_control::begin_statement(engine, session);
        let res = match session.txn.as_mut() {
            Some(t) => {
                let mut rd = Reader::Txn(t);
                run_root(&mut rd, c, &mut ctx, sink).await
            }
            None => Err(SqlError::internal("no transaction")),
        };
        txn_control::end_statement(engine, session, res).await
    } else {
        let mut rd = Reader::Standalone(engine.client());
        run_root(&mut rd, c, &mut ctx, sink).await
    };
    session.warnings = std::mem::take(&mut ctx.warnings.list);
    if let Some(id) = ctx.set_last_insert_id {
        session.last_insert_id = id;
    }
    res
}

/// The statement's root, streamed when it can be.
async fn run_root(
    rd: &mut Reader<'_>,
    c: &Compiled,
    ctx: &mut EvalCtx<'_>,
    sink: Option<&crate::engine::stream::ResultSink>,
) -> Result<Produced, SqlError> {
    if let Some(sink) = sink {
        if let Some((p, t)) = crate::engine::stream::streamable(c) {
            // Boxed: the streaming future stays out of the common path's.
            return Box::pin(async {
                run_subs(rd, c, ctx).await?;
                crate::engine::stream::run(rd, c, p, t, ctx, sink).await.map(Produced::Streamed)
            })
            .await;
        }
    }
    run_with_subs(rd, c, ctx).await.map(Produced::Rows)
}

/// Run the uncorrelated subqueries, then the root.
pub async fn run_with_subs(rd: &mut Reader<'_>, c: &Compiled, ctx: &mut EvalCtx<'_>) -> Result<Vec<Row>, SqlError> {
    run_subs(rd, c, ctx).await?;
    match &c.root {
        // Not through `run_node`: its boxed future (needed where queries
        // nest) cost an allocation and a copy of the future per statement.
        QueryNode::Select(p) => run_select(rd, c, p, ctx).await,
        n => run_node(rd, c, n, ctx).await,
    }
}

/// Run the uncorrelated subqueries (their results go to `ctx.subs`).
pub(crate) async fn run_subs(rd: &mut Reader<'_>, c: &Compiled, ctx: &mut EvalCtx<'_>) -> Result<(), SqlError> {
    if !c.subs.is_empty() || !ctx.subs.is_empty() {
        ctx.subs = vec![SubResult::NotRun; c.subs.len()];
    }
    for (i, s) in c.subs.iter().enumerate() {
        if !s.correlated {
            let r = run_sub(rd, c, i, ctx).await?;
            ctx.subs[i] = r;
        }
    }
    Ok(())
}

fn run_sub<'a>(rd: &'a mut Reader<'_>, c: &'a Compiled, i: usize, ctx: &'a mut EvalCtx<'_>) -> BoxFut<'a, SubResult> {
    Box::pin(async move {
        let s = &c.subs[i];
        let rows = run_node(rd, c, &s.node, ctx).await?;
        Ok(match s.kind {
            SubKind::Exists => SubResult::Exists(!rows.is_empty()),
            SubKind::Scalar => {
                if rows.len() > 1 {
                    return Err(SqlError::new(1242, "21000", "Subquery returns more than 1 row"));
                }
                SubResult::Scalar(rows.into_iter().next().and_then(|r| r.into_iter().next()).unwrap_or(Value::Null))
            }
            SubKind::In => {
                let mut has_null = false;
                let mut values = Vec::with_capacity(rows.len());
                for r in rows {
                    let v = r.into_iter().next().unwrap_or(Value::Null);
                    if v.is_null() {
                        has_null = true;
                    } else {
                        values.push(v);
                    }
                }
                SubResult::Set { values, has_null }
            }
            SubKind::Rows(_) => SubResult::Rows(rows),
        })
    })
}

pub fn run_node<'a>(
    rd: &'a mut Reader<'_>,
    c: &'a Compiled,
    n: &'a QueryNode,
    ctx: &'a mut EvalCtx<'_>,
) -> BoxFut<'a, Vec<Row>> {
    Box::pin(async move {
        match n {
            QueryNode::Select(p) => run_select(rd, c, p, ctx).await,
            QueryNode::SetOp(s) => run_setop(rd, c, s, ctx).await,
            QueryNode::Recursive(r) => crate::engine::recursive::run(rd, c, r, ctx).await,
        }
    })
}

async fn run_setop(
    rd: &mut Reader<'_>,
    c: &Compiled,
    s: &SetOpPlan,
    ctx: &mut EvalCtx<'_>,
) -> Result<Vec<Row>, SqlError> {
    let mut rows = run_node(rd, c, &s.left, ctx).await?;
    rows.extend(run_node(rd, c, &s.right, ctx).await?);
    if s.distinct {
        let colls: Vec<Coll> = s.types.iter().map(|t| t.coll).collect();
        rows = dedup(rows, &colls, &ctx.mem)?;
    }
    let keyed: Vec<(Vec<Value>, Row)> = if s.order.is_empty() {
        rows.into_iter().map(|r| (Vec::new(), r)).collect()
    } else {
        let mut v = Vec::with_capacity(rows.len());
        for r in rows {
            let k = s.order.iter().map(|o| eval(&o.expr, &r, ctx)).collect::<Result<Vec<_>, _>>()?;
            v.push((k, r));
        }
        v
    };
    finish_rows(keyed, &s.order, &[], false, &[], s.limit.as_ref(), s.offset.as_ref(), ctx)
}

// The group / distinct key encoding lives with the values (COUNT(DISTINCT
// a, b) builds one in an expression).
pub use crate::engine::expr::value::encode_group_key;

/// DISTINCT by hashing: the first of each set of equal rows, in order. The
/// set of keys seen is about as large again as the rows kept, and is
/// counted against the statement's memory.
fn dedup(rows: Vec<Row>, colls: &[Coll], mem: &crate::engine::memory::StatementMemory) -> Result<Vec<Row>, SqlError> {
    let mut seen = std::collections::HashSet::with_capacity(rows.len());
    let mut out = Vec::with_capacity(rows.len());
    let mut key = Vec::new();
    let mut built = crate::engine::memory::Built::default();
    for r in rows {
        key.clear();
        encode_group_key(&r, colls, &mut key);
        if seen.insert(key.clone()) {
            built.add_bytes(mem, key.len() as u64 + crate::engine::memory::HASH_ENTRY_BYTES)?;
            out.push(r);
        }
    }
    built.flush(mem)?;
    Ok(out)
}

/// Whether the ORDER BY just applied leaves rows that DISTINCT deems equal
/// next to each other, so that comparing neighbours (`same_row`) keeps what
/// `dedup` would: every order key is an output column compared with that
/// column's DISTINCT collation, every output column is an order key, and
/// each column holds one kind of value (integers or strings, and NULLs), for
/// which "orders equal" and "groups equal" are the same relation (an integer
/// and a string can order equal yet are distinct).
fn sort_groups_rows(
    order: &[OrderKey],
    key_cols: &[Option<usize>],
    out_colls: &[Coll],
    keyed: &[(Vec<Value>, Row)],
) -> bool {
    if order.is_empty() || key_cols.len() != order.len() {
        return false;
    }
    for (o, kc) in order.iter().zip(key_cols) {
        match kc {
            Some(j) if out_colls.get(*j) == Some(&o.coll) => {}
            _ => return false,
        }
    }
    let width = out_colls.len();
    if !(0..width).all(|j| key_cols.contains(&Some(j))) {
        return false;
    }
    // 0: only NULLs so far, 1: integers, 2: strings.
    let mut kind = vec![0u8; width];
    for (_, r) in keyed {
        if r.len() != width {
            return false;
        }
        for (v, k) in r.iter().zip(kind.iter_mut()) {
            let this = match v {
                Value::Null => continue,
                Value::Int(_) => 1,
                Value::Bytes(_) => 2,
                _ => return false,
            };
            if *k == 0 {
                *k = this;
            } else if *k != this {
                return false;
            }
        }
    }
    true
}

/// DISTINCT equality of two rows whose columns each hold one kind of value
/// (see `sort_groups_rows`): what equal `encode_group_key` bytes mean.
fn same_row(a: &[Value], b: &[Value], colls: &[Coll]) -> bool {
    a.iter().zip(b).enumerate().all(|(i, (x, y))| match (x, y) {
        (Value::Null, Value::Null) => true,
        (Value::Int(p), Value::Int(q)) => p == q,
        (Value::Bytes(p), Value::Bytes(q)) => {
            vals::cmp_bytes(p, q, colls.get(i).copied().unwrap_or(Coll::Ci)) == std::cmp::Ordering::Equal
        }
        _ => false,
    })
}

pub(crate) fn eval_count(e: Option<&CExpr>, ctx: &mut EvalCtx, what: &str) -> Result<Option<u64>, SqlError> {
    let Some(e) = e else { return Ok(None) };
    let v = eval(e, &[], ctx)?;
    match v {
        Value::Null => Ok(None),
        Value::Int(i) if i >= 0 => Ok(Some(i as u64)),
        Value::UInt(u) => Ok(Some(u)),
        _ => Err(SqlError::new(1210, "HY000", format!("Incorrect arguments to {what}"))),
    }
}

/// Order key `i` of a keyed row (see `finish_rows`).
fn order_key<'r>(r: &'r (Vec<Value>, Row), key_cols: &[Option<usize>], i: usize) -> &'r Value {
    match key_cols.get(i).copied().flatten() {
        Some(j) => &r.1[j],
        None => &r.0[i],
    }
}

/// Sort by keys, DISTINCT, OFFSET, LIMIT. Order key `i` is `keys[i]`, or
/// output column `j` when `key_cols[i] == Some(j)` (a key that is a selected
/// column is not stored twice).
#[allow(clippy::too_many_arguments)]
fn finish_rows(
    mut keyed: Vec<(Vec<Value>, Row)>,
    order: &[OrderKey],
    key_cols: &[Option<usize>],
    distinct: bool,
    out_colls: &[Coll],
    limit: Option<&CExpr>,
    offset: Option<&CExpr>,
    ctx: &mut EvalCtx,
) -> Result<Vec<Row>, SqlError> {
    if !order.is_empty() {
        sort_keys::sort_by_keys(
            &mut keyed,
            order.len(),
            |r, i| order_key(r, key_cols, i),
            |i| (order[i].desc, order[i].coll),
        );
    }
    let sorted_distinct = distinct && sort_groups_rows(order, key_cols, out_colls, &keyed);
    let mut rows: Vec<Row> = keyed.into_iter().map(|(_, r)| r).collect();
    if sorted_distinct {
        // Equal rows are neighbours now: keep the first of each run.
        rows.dedup_by(|later, first| same_row(first, later, out_colls));
    } else if distinct {
        rows = dedup(rows, out_colls, &ctx.mem)?;
    }
    let off = eval_count(offset, ctx, "OFFSET")?.unwrap_or(0) as usize;
    let lim = eval_count(limit, ctx, "LIMIT")?;
    if off > 0 {
        rows.drain(..off.min(rows.len()));
    }
    if let Some(l) = lim {
        rows.truncate(l as usize);
    }
    Ok(rows)
}

/// Per-column constraints for partition pruning from a table's local conjuncts.
fn prune_constraints(
    def: &TableDef,
    local: &[CExpr],
    ctx: &mut EvalCtx,
) -> Result<Vec<(ColumnId, ColRange)>, SqlError> {
    let mut cmps = Vec::new();
    let mut ins = Vec::new();
    // Partition functions read a TIMESTAMP's stored UTC moment
    // (`partition_of_local_row`), these values are the session's wall time:
    // no pruning on such a column under a zone other than UTC.
    let zoned = ctx.zone().is_some();
    let conv = |c: usize, v: Value| -> Option<Value> {
        let col = def.columns.get(c)?;
        if zoned && matches!(col.ty, norr_signals::ColumnType::Timestamp) {
            return None;
        }
        match plan::key_value(&v, col) {
            KeyConv::Val(x) => Some(x),
            _ => None,
        }
    };
    for e in local {
        match e {
            CExpr::Cmp(k, l, r, _) => {
                let (c, k, x) = match (l.as_ref(), r.as_ref()) {
                    (CExpr::Col(c), x) if is_row_independent(x) => (*c, *k, x),
                    (x, CExpr::Col(c)) if is_row_independent(x) => (*c, k.flip(), x),
                    _ => continue,
                };
                let v = eval(x, &[], ctx)?;
                if let Some(v) = conv(c, v) {
                    cmps.push((c as ColumnId, k, v));
                }
            }
            CExpr::Between { expr, low, high, negated: false, .. } => {
                if let CExpr::Col(c) = expr.as_ref() {
                    if is_row_independent(low) && is_row_independent(high) {
                        let (a, b) = (eval(low, &[], ctx)?, eval(high, &[], ctx)?);
                        if let (Some(a), Some(b)) = (conv(*c, a), conv(*c, b)) {
                            cmps.push((*c as ColumnId, CmpKind::Ge, a));
                            cmps.push((*c as ColumnId, CmpKind::Le, b));
                        }
                    }
                }
            }
            CExpr::InList { expr, list, negated: false, .. } => {
                if let CExpr::Col(c) = expr.as_ref() {
                    if list.iter().all(is_row_independent) {
                        let mut vs = Vec::new();
                        let mut ok = true;
                        for x in list {
                            match conv(*c, eval(x, &[], ctx)?) {
                                Some(v) => vs.push(v),
                                None => ok = false,
                            }
                        }
                        if ok {
                            ins.push((*c as ColumnId, vs));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(constraints_from(&cmps, &ins))
}

/// Partitions a scan of this table needs (None = all).
pub fn scan_partitions(t: &TableAccess, ctx: &mut EvalCtx) -> Result<Option<Vec<PartitionId>>, SqlError> {
    let pruned = pruned_partitions(t, ctx)?;
    // PARTITION (...) names the partitions read; pruning may leave fewer.
    Ok(match (&t.only, pruned) {
        (None, p) => p,
        (Some(only), None) => Some(only.clone()),
        (Some(only), Some(p)) => Some(p.into_iter().filter(|x| only.contains(x)).collect()),
    })
}

fn pruned_partitions(t: &TableAccess, ctx: &mut EvalCtx) -> Result<Option<Vec<PartitionId>>, SqlError> {
    if t.part.partition_count() <= 1 {
        return Ok(None);
    }
    let cons = prune_constraints(&t.table.def, &t.local, ctx)?;
    if cons.is_empty() {
        return Ok(None);
    }
    Ok(t.part.prune(&t.table.def, &cons))
}

/// Partition of a keyed operation on a user-partitioned table (None otherwise).
/// Err(()) = no partition can hold the key (callers map it to their own
/// error or skip the key, so it carries nothing).
/// `zone`: the session zone, whose wall times the key's TIMESTAMP values are.
#[allow(clippy::result_unit_err)]
pub fn key_partition(
    t: &TableAccess,
    key_cols: &[ColumnId],
    key: &[Value],
    zone: Option<&Zone>,
) -> Result<Option<PartitionId>, ()> {
    if !t.part.is_user() {
        return Ok(None);
    }
    let def = &t.table.def;
    let mut row = vec![Value::Null; def.columns.len()];
    for (c, v) in key_cols.iter().zip(key) {
        row[*c as usize] = v.clone();
    }
    if !t.part.columns().iter().all(|c| key_cols.contains(c)) {
        return Ok(None);
    }
    t.part.partition_of_local_row(def, &row, zone).map_err(|_| ())
}

fn read_op(t: &TableAccess, lock: RowLock, key: KeyAccess, partition: Option<PartitionId>) -> KeyOp {
    let def = &t.table.def;
    KeyOp {
        table: def.id,
        table_version: def.version,
        kind: OpKind::Read,
        lock: lock.mode,
        wait: lock.wait,
        key,
        partition,
        values: Vec::new(),
        increments: Vec::new(),
        projection: t.needed.clone(),
        abort_on_error: false,
    }
}

/// Spread a projected row into a full-width table row (NULL where a column
/// was not fetched), unless the plan uses the rows as fetched
/// (`row_layout`). `needed` is strictly increasing (sorted and deduplicated
/// by the planner), so one pass fills the row front to back.
pub(crate) fn widen(t: &TableAccess, mut r: Vec<Value>) -> Row {
    if t.compact_local.is_some() {
        // Joined rows place the next source right after this one's columns.
        if r.len() != t.needed.len() {
            r.resize(t.needed.len(), Value::Null);
        }
        return r;
    }
    let n = t.table.def.columns.len();
    if t.needed.len() == n {
        return r;
    }
    // A fresh row of the full width: growing `r` in place would reallocate
    // it (an aligned reallocation is the allocator's slow path), which cost
    // more than the rest of the row's handling.
    let mut row = Vec::with_capacity(n);
    let ascending = t.needed.windows(2).all(|w| w[0] < w[1]) && t.needed.last().is_some_and(|&c| (c as usize) < n);
    if !ascending {
        row.resize(n, Value::Null);
        for (c, v) in t.needed.iter().zip(r) {
            if let Some(slot) = row.get_mut(*c as usize) {
                *slot = v;
            }
        }
        return row;
    }
    for (c, v) in t.needed.iter().zip(r) {
        row.resize(*c as usize, Value::Null);
        row.push(v);
    }
    row.resize(n, Value::Null);
    row
}

/// Key reads (pk or unique); results in key order, missing rows skipped.
/// Returns (key index, row) pairs.
/// Keys hold the session zone's wall time for TIMESTAMP columns (`zone`,
/// None: UTC), and so do the rows returned.
pub async fn read_keys(
    rd: &mut Reader<'_>,
    t: &TableAccess,
    index: Option<norr_signals::IndexId>,
    cols: &[ColumnId],
    keys: Vec<Vec<Value>>,
    zone: Option<&Zone>,
) -> Result<Vec<(usize, Row)>, SqlError> {
    read_keys_with(rd, t, t.lock, index, cols, keys, zone).await
}

/// `read_keys` under `lock` rather than the table access's own. A row
/// SKIP LOCKED passes over is missing like an absent one.
pub async fn read_keys_with(
    rd: &mut Reader<'_>,
    t: &TableAccess,
    lock: RowLock,
    index: Option<norr_signals::IndexId>,
    cols: &[ColumnId],
    keys: Vec<Vec<Value>>,
    zone: Option<&Zone>,
) -> Result<Vec<(usize, Row)>, SqlError> {
    let def = &t.table.def;
    let zone = zone.filter(|_| crate::engine::ts_zone::has_timestamp(def));
    let mut out = Vec::with_capacity(keys.len());
    let mut ops = Vec::with_capacity(keys.len().min(MAX_OPS_PER_BATCH));
    let mut idx = Vec::with_capacity(keys.len().min(MAX_OPS_PER_BATCH));
    let total = keys.len();
    for (i, k) in keys.into_iter().enumerate() {
        let part = match key_partition(t, cols, &k, zone) {
            Ok(p) => p,
            Err(()) => continue,
        };
        let access = match index {
            None => KeyAccess::Primary(k),
            Some(ix) => KeyAccess::Unique { index: ix, values: k },
        };
        ops.push(read_op(t, lock, access, part));
        idx.push(i);
        if ops.len() == MAX_OPS_PER_BATCH || i + 1 == total {
            crate::engine::ts_zone::ops_to_utc(&mut ops, def, zone);
            let mut res = rd
                .key_ops(std::mem::take(&mut ops))
                .await
                .map_err(|e| error_map::from_client(e, &table_err(&t.table.def)))?;
            if zone.is_some() {
                for r in res.iter_mut() {
                    if let OpResult::Ok(Some(row)) = r {
                        crate::engine::ts_zone::row_to_local(row, def, &t.needed, zone);
                    }
                }
            }
            count_rows_read(res.iter().filter(|r| matches!(r, OpResult::Ok(Some(_)))).count());
            for (j, r) in res.into_iter().enumerate() {
                match r {
                    OpResult::Ok(Some(row)) => out.push((idx[j], widen(t, row))),
                    OpResult::Ok(None) => {}
                    OpResult::Err(e) if e.code == ErrorCode::NoSuchRow => {}
                    OpResult::Err(e) => return Err(error_map::from_node(&e, &table_err(&t.table.def))),
                }
            }
            idx.clear();
        }
    }
    if !ops.is_empty() {
        crate::engine::ts_zone::ops_to_utc(&mut ops, def, zone);
        let mut res = rd.key_ops(ops).await.map_err(|e| error_map::from_client(e, &table_err(&t.table.def)))?;
        if zone.is_some() {
            for r in res.iter_mut() {
                if let OpResult::Ok(Some(row)) = r {
                    crate::engine::ts_zone::row_to_local(row, def, &t.needed, zone);
                }
            }
        }
        count_rows_read(res.iter().filter(|r| matches!(r, OpResult::Ok(Some(_)))).count());
        for (j, r) in res.into_iter().enumerate() {
            match r {
                OpResult::Ok(Some(row)) => out.push((idx[j], widen(t, row))),
                OpResult::Err(e) if e.code != ErrorCode::NoSuchRow => {
                    return Err(error_map::from_node(&e, &table_err(&t.table.def)))
                }
                _ => {}
            }
        }
    }
    Ok(out)
}

/// The scan spec for a table access (None = provably no rows).
pub fn scan_spec(t: &TableAccess, ctx: &mut EvalCtx, limit: Option<u64>) -> Result<Option<ScanSpec>, SqlError> {
    Ok(scan_spec_via(t, t.lock, &t.access, ctx, limit, true)?.map(|(spec, _)| spec))
}

/// `scan_spec` with the access path given apart from the table access; also
/// says which local conjuncts the scan's range decides exactly (left out of
/// the pushed filter; the caller need not check them again). `ordered`: an
/// index scan returns rows in index order (see `scan_order`).
pub(crate) fn scan_spec_via(
    t: &TableAccess,
    lock: RowLock,
    access: &Access,
    ctx: &mut EvalCtx,
    limit: Option<u64>,
    ordered: bool,
) -> Result<Option<(ScanSpec, Vec<bool>)>, SqlError> {
    let def = &t.table.def;
    let partitions = scan_partitions(t, ctx)?;
    if partitions.as_ref().is_some_and(|p| p.is_empty()) {
        return Ok(None);
    }
    let mut spec = ScanSpec::full(def.id);
    spec.table_version = def.version;
    spec.projection = t.needed.clone();
    spec.lock = lock.mode;
    spec.wait = lock.wait;
    spec.batch_rows = SCAN_BATCH_ROWS;
    spec.partitions = partitions;
    spec.limit = limit;
    spec.ordered = ordered;
    let mut implied = Vec::new();
    if let Access::IndexRange { index, eq, low, high, .. } = access {
        let ix = def.index(*index).ok_or_else(|| SqlError::internal("index vanished"))?;
        match plan::eval_range(def, &ix.columns, eq, low, high, ctx)? {
            None => return Ok(None),
            Some(r) => {
                implied = plan::range_implied(def, &ix.columns, eq.len(), &r, &t.local, ctx)?;
                spec.index = Some(*index);
                spec.range = Some(r);
            }
        }
    }
    spec.filter = plan::build_filter(def, &t.local, &implied, ctx)?;
    Ok(Some((spec, implied)))
}

/// Fetch the rows of a table access (local conjuncts applied); `ordered`:
/// a scan returns them in index order (see `scan_order`).
pub async fn fetch_table(
    rd: &mut Reader<'_>,
    t: &TableAccess,
    ctx: &mut EvalCtx<'_>,
    limit: Option<u64>,
    ordered: bool,
) -> Result<Vec<Row>, SqlError> {
    fetch_table_with(rd, t, t.lock, ctx, limit, ordered).await
}

/// `fetch_table` under `lock` rather than the table access's own.
pub async fn fetch_table_with(
    rd: &mut Reader<'_>,
    t: &TableAccess,
    lock: RowLock,
    ctx: &mut EvalCtx<'_>,
    limit: Option<u64>,
    ordered: bool,
) -> Result<Vec<Row>, SqlError> {
    let def = &t.table.def;
    // Key reads, or else the access a scan uses: a wide pk range scans the
    // PRIMARY ordered index; lookup keys that did not convert exactly scan
    // the table.
    let mut scan_access = None;
    // Local conjuncts the access decided exactly (not checked below): bit i
    // for conjunct i; conjuncts past the 64th are always checked.
    let mut implied: u64 = 0;
    let keyed = match &t.access {
        Access::PkLookup { keys } => {
            let k = plan::eval_keys(keys, &def.primary_key, def, ctx)?;
            if k.is_some() {
                implied = plan::keys_implied(def, &def.primary_key, keys, &t.local, ctx.params);
            }
            k.map(|k| (None, &def.primary_key[..], k))
        }
        Access::UniqueLookup { index, keys, .. } => {
            let cols = def.index(*index).map(|i| &i.columns[..]).unwrap_or_default();
            plan::eval_keys(keys, cols, def, ctx)?.map(|k| (Some(*index), cols, k))
        }
        Access::PkRange { low, high } => match plan::resolve_pk_range(def, low, high, ctx)? {
            plan::PkRangeRun::Keys(k) => Some((None, &def.primary_key[..], k)),
            plan::PkRangeRun::Scan(a) => {
                scan_access = Some(a);
                None
            }
        },
        _ => None,
    };
    let ranges = match &t.access {
        Access::IndexKeys { index, keys, .. } => index_key_ranges(def, *index, keys, ctx)?,
        _ => None,
    };
    let rows: Vec<Row> = match (keyed, ranges) {
        (_, Some(ranges)) => {
            // Up to MAX_SCAN_RANGES keys per scan; ascending and disjoint,
            // so an ordered scan returns them in index order.
            let mut rows = Vec::new();
            for batch in ranges.chunks(MAX_SCAN_RANGES) {
                let Some((mut spec, _)) = scan_spec_via(t, lock, &Access::FullScan, ctx, None, ordered)? else {
                    break;
                };
                if let Access::IndexKeys { index, .. } = &t.access {
                    spec.index = Some(*index);
                }
                spec.ranges = batch.to_vec();
                rows.extend(scan_ranges_rows(rd, spec, ctx, def).await?.into_iter().map(|(_, r)| widen(t, r)));
            }
            rows
        }
        (Some((index, cols, keys)), None) => {
            // Not `collect()`: that would reuse the (index, row) buffer and
            // reallocate it to the smaller element size.
            let found = read_keys_with(rd, t, lock, index, cols, keys, ctx.zone()).await?;
            let mut rows = Vec::with_capacity(found.len());
            rows.extend(found.into_iter().map(|(_, r)| r));
            rows
        }
        (None, None) => {
            let access = match (&t.access, &scan_access) {
                (_, Some(a)) => a,
                (
                    Access::PkLookup { .. }
                    | Access::UniqueLookup { .. }
                    | Access::PkRange { .. }
                    | Access::IndexKeys { .. },
                    None,
                ) => &Access::FullScan,
                (a, None) => a,
            };
            match scan_spec_via(t, lock, access, ctx, limit, ordered)? {
                None => Vec::new(),
                Some((spec, skip)) => {
                    for (i, _) in skip.iter().enumerate().take(64).filter(|(_, s)| **s) {
                        implied |= 1 << i;
                    }
                    let rows = scan_rows(rd, spec, ctx, def).await?;
                    rows.into_iter().map(|r| widen(t, r)).collect()
                }
            }
        }
    };
    let checks = t.row_local();
    let residual = |i: usize| i >= 64 || implied & (1 << i) == 0;
    if !(0..checks.len()).any(residual) {
        return Ok(rows);
    }
    let mut out = Vec::with_capacity(rows.len());
    'rows: for r in rows {
        for (i, c) in checks.iter().enumerate() {
            if residual(i) && !eval_pred(c, &r, ctx)? {
                continue 'rows;
            }
        }
        out.push(r);
    }
    Ok(out)
}

/// The ranges of an `IndexKeys` access with the statement's values, in
/// index order (so that their rows are too), duplicates dropped; None: a
/// key did not convert exactly (scan instead).
fn index_key_ranges(
    def: &TableDef,
    index: norr_signals::IndexId,
    keys: &[Vec<CExpr>],
    ctx: &mut EvalCtx,
) -> Result<Option<Vec<norr_signals::ScanRange>>, SqlError> {
    let Some(ix) = def.index(index) else { return Ok(None) };
    let len = keys.first().map_or(0, |k| k.len());
    let cols = &ix.columns[..len.min(ix.columns.len())];
    let Some(mut vals) = plan::eval_keys(keys, cols, def, ctx)? else { return Ok(None) };
    let colls: Vec<Coll> = cols.iter().map(|c| plan::coll_of(&def.columns[*c as usize].ty)).collect();
    let mut w = vals::Warnings::default();
    vals.sort_by(|a, b| {
        for ((x, y), coll) in a.iter().zip(b).zip(&colls) {
            match vals::sql_cmp(x, y, *coll, &mut w) {
                Some(std::cmp::Ordering::Equal) | None => continue,
                Some(o) => return o,
            }
        }
        std::cmp::Ordering::Equal
    });
    // Keys equal under the collation ('a', 'A') are one range.
    vals.dedup_by(|a, b| {
        a.iter()
            .zip(b.iter())
            .zip(&colls)
            .all(|((x, y), c)| vals::sql_cmp(x, y, *c, &mut w) == Some(std::cmp::Ordering::Equal))
    });
    Ok(Some(
        vals.into_iter()
            .map(|k| norr_signals::ScanRange {
                low: norr_signals::Bound::inclusive(k.clone()),
                high: norr_signals::Bound::inclusive(k),
            })
            .collect(),
    ))
}

/// Opens the scan of a table access that is no key read (see
/// `fetch_table_with`) for a caller that takes its rows batch by batch
/// (`stream`): the stream, and the local conjuncts its range decides exactly
/// (bit i: conjunct i; past the 64th always checked). None: provably no rows.
pub(crate) async fn open_table_scan(
    rd: &mut Reader<'_>,
    t: &TableAccess,
    ctx: &mut EvalCtx<'_>,
    limit: Option<u64>,
    ordered: bool,
) -> Result<Option<(norr_client::ScanStream, u64)>, SqlError> {
    let def = &t.table.def;
    let resolved;
    let access = match &t.access {
        Access::PkRange { low, high } => match plan::resolve_pk_range(def, low, high, ctx)? {
            plan::PkRangeRun::Scan(a) => {
                resolved = a;
                &resolved
            }
            plan::PkRangeRun::Keys(_) => return Err(SqlError::internal("a key read opened as a scan")),
        },
        Access::PkLookup { .. } | Access::UniqueLookup { .. } | Access::IndexKeys { .. } => &Access::FullScan,
        a => a,
    };
    let Some((spec, skip)) = scan_spec_via(t, t.lock, access, ctx, limit, ordered)? else {
        return Ok(None);
    };
    let mut implied = 0u64;
    for (i, _) in skip.iter().enumerate().take(64).filter(|(_, s)| **s) {
        implied |= 1 << i;
    }
    let scan = rd.scan(spec).await.map_err(|e| error_map::from_client(e, &table_err(def)))?;
    Ok(Some((scan, implied)))
}

pub(crate) fn concat(a: &[Value], b: &[Value]) -> Row {
    let mut r = Vec::with_capacity(a.len() + b.len());
    r.extend_from_slice(a);
    r.extend_from_slice(b);
    r
}

/// The equalities of ON usable as a hash join's key: (inner column offset
/// in the joined row, outer column, collation), every one of them. A key
/// of only the first would make `o.w = ol.w AND o.id = ol.oid` compare each
/// order with every line of its warehouse (issue 23's TPC-C finding).
fn hash_keys(on: &[CExpr], base: usize, width: usize) -> Vec<(usize, usize, Coll)> {
    let mut keys = Vec::new();
    for c in on {
        if let CExpr::Cmp(CmpKind::Eq, l, r, coll) = c {
            if let (CExpr::Col(a), CExpr::Col(b)) = (l.as_ref(), r.as_ref()) {
                let inner = |x: usize| x >= base && x < base + width;
                if inner(*a) && *b < base {
                    keys.push((*a, *b, *coll));
                } else if inner(*b) && *a < base {
                    keys.push((*b, *a, *coll));
                }
            }
        }
    }
    keys
}

/// Row pairs that joins compared in this SQL node's memory (a hash join's
/// candidates in a bucket, a nested loop's every pair): SHOW GLOBAL STATUS
/// `Norr_join_rows_compared`, which shows a join whose key lets it look at
/// few pairs.
static JOIN_ROWS_COMPARED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

pub fn join_rows_compared() -> u64 {
    JOIN_ROWS_COMPARED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Rows this SQL node received from data nodes for statements' table reads
/// (key reads and scans): SHOW GLOBAL STATUS `Norr_rows_read`, which shows
/// whether a statement looked up its rows or scanned a table for them.
static ROWS_READ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

pub fn rows_read() -> u64 {
    ROWS_READ.load(std::sync::atomic::Ordering::Relaxed)
}

pub(crate) fn count_rows_read(n: usize) {
    ROWS_READ.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
}

/// Scans statements opened: of whole tables (no index, or an index without
/// bounds), and of bounded index ranges: SHOW GLOBAL STATUS
/// `Norr_full_scans` and `Norr_range_scans` (MySQL's `Select_scan` and
/// `Select_range`). Rows a scan's pushed filter drops on the data node never
/// reach `Norr_rows_read`, so a scan shows here.
static FULL_SCANS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static RANGE_SCANS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

pub fn full_scans() -> u64 {
    FULL_SCANS.load(std::sync::atomic::Ordering::Relaxed)
}

pub fn range_scans() -> u64 {
    RANGE_SCANS.load(std::sync::atomic::Ordering::Relaxed)
}

/// A multi-range scan counts once per range (ranges read, as before they
/// were read one scan each); its round trips show in `Norr_round_trips`.
fn count_scan(spec: &ScanSpec) {
    if spec.index.is_some() && !spec.ranges.is_empty() {
        RANGE_SCANS.fetch_add(spec.ranges.len() as u64, std::sync::atomic::Ordering::Relaxed);
        return;
    }
    let bounded = spec.index.is_some()
        && spec.range.as_ref().is_some_and(|r| !r.low.values.is_empty() || !r.high.values.is_empty());
    let counter = if bounded { &RANGE_SCANS } else { &FULL_SCANS };
    counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// The hash key of `row` over `cols` into `out`; false if a part is NULL
/// (which equals nothing).
fn hash_key_of(row: &[Value], cols: &[usize], colls: &[Coll], out: &mut Vec<u8>) -> bool {
    out.clear();
    for (&c, coll) in cols.iter().zip(colls) {
        let v = &row[c];
        if v.is_null() {
            return false;
        }
        encode_group_key(std::slice::from_ref(v), std::slice::from_ref(coll), out);
    }
    true
}

/// All rows of one source (its own conjuncts applied; not joined).
pub(crate) async fn source_rows(
    rd: &mut Reader<'_>,
    c: &Compiled,
    p: &SelectPlan,
    s: &Source,
    ctx: &mut EvalCtx<'_>,
    lock_pick: bool,
    push_limit: Option<u64>,
) -> Result<Vec<Row>, SqlError> {
    Ok(match &s.kind {
        SourceKind::Table(t) => {
            let lock = if lock_pick { RowLock::NONE } else { t.lock };
            let ordered = crate::engine::scan_order::select_needs_scan_order(p);
            fetch_table_with(rd, t, lock, ctx, push_limit, ordered).await?
        }
        SourceKind::Derived(n) => run_node(rd, c, n, ctx).await?,
        SourceKind::Rows(r) => r.clone(),
        SourceKind::WorkTable(slot) => crate::engine::recursive::work_rows(ctx, *slot),
        // First in FROM: its document reads no other source.
        SourceKind::JsonTable(jt) => jt.rows(&[], ctx)?,
    })
}

/// A joined row out of prefix row `from_row`; `from` (when asked for)
/// records which prefix row each output row extends (`join_nests`).
/// Adds a joined row to the output, counting it against the statement's
/// memory (`memory::Built`): a join's output is new rows, which a cross
/// join of a few thousand rows per side makes gigabytes of.
fn emit(
    next: &mut Vec<Row>,
    from: &mut Option<&mut Vec<usize>>,
    built: &mut crate::engine::memory::Built,
    mem: &crate::engine::memory::StatementMemory,
    row: Row,
    from_row: usize,
) -> Result<(), SqlError> {
    built.add(mem, &row)?;
    next.push(row);
    if let Some(f) = from {
        f.push(from_row);
    }
    Ok(())
}

/// Join source `s` to the rows so far (`rows`: the joined row prefix before
/// it): batched key lookups, a hash join or a nested loop; a left-joined
/// source NULL-extends prefix rows without a match. Output rows follow the
/// order of their prefix rows.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn join_source(
    rd: &mut Reader<'_>,
    c: &Compiled,
    p: &SelectPlan,
    s: &Source,
    rows: &[Row],
    ctx: &mut EvalCtx<'_>,
    lock_pick: bool,
    push_limit: Option<u64>,
    mut from: Option<&mut Vec<usize>>,
) -> Result<Vec<Row>, SqlError> {
    let prefix_width = s.base;
    let null_ext = if s.left_join { vec![Value::Null; s.width] } else { Vec::new() };
    let mut next: Vec<Row> = Vec::new();
    let mut built = crate::engine::memory::Built::default();
    if let SourceKind::JsonTable(jt) = &s.kind {
        return crate::engine::json_table::join(jt, s, rows, ctx, from);
    }
    let by_ranges = s.lookup.as_ref().is_some_and(|l| l.range);
    if let (Some(l), SourceKind::Table(t), true) = (&s.lookup, &s.kind, by_ranges && rows.len() <= MAX_REF_OUTER_ROWS) {
        return ref_join(rd, s, l, t, rows, ctx, from).await;
    }
    if let (Some(l), SourceKind::Table(t), false) = (&s.lookup, &s.kind, by_ranges) {
        // Batched key lookups of the inner side, one batch per JOIN_BATCH outer rows.
        for (ci, chunk) in rows.chunks(JOIN_BATCH).enumerate() {
            ctx.check_killed()?;
            let (keys, key_of_row) = distinct_join_keys(l, t, chunk, ctx)?;
            let found = read_keys(rd, t, l.index, &l.cols, keys, ctx.zone()).await?;
            let mut by_key: HashMap<usize, Row> = HashMap::with_capacity(found.len());
            'found: for (ki, row) in found {
                for lc in t.row_local() {
                    if !eval_pred(lc, &row, ctx)? {
                        continue 'found;
                    }
                }
                by_key.insert(ki, row);
            }
            for (k, (r, key)) in chunk.iter().zip(key_of_row).enumerate() {
                let from_row = ci * JOIN_BATCH + k;
                let mut matched = false;
                if let Some(inner) = key.and_then(|key| by_key.get(&key)) {
                    let joined = concat(r, inner);
                    if all_pass(&s.on, &joined, ctx)? {
                        matched = true;
                        emit(&mut next, &mut from, &mut built, &ctx.mem, joined, from_row)?;
                    }
                }
                if !matched && s.left_join {
                    emit(&mut next, &mut from, &mut built, &ctx.mem, concat(r, &null_ext), from_row)?;
                }
            }
        }
        built.flush(&ctx.mem)?;
        return Ok(next);
    }
    let inner = source_rows(rd, c, p, s, ctx, lock_pick, push_limit).await?;
    let keys = hash_keys(&s.on, prefix_width, s.width);
    let mut compared = 0u64;
    if !keys.is_empty() {
        let inner_cols: Vec<usize> = keys.iter().map(|k| k.0 - prefix_width).collect();
        let outer_cols: Vec<usize> = keys.iter().map(|k| k.1).collect();
        let colls: Vec<Coll> = keys.iter().map(|k| k.2).collect();
        let mut table: HashMap<Vec<u8>, Vec<usize>> = HashMap::with_capacity(inner.len());
        let mut turn = Turn::new();
        let mut k = Vec::new();
        for (i, r) in inner.iter().enumerate() {
            turn.point(ctx, 1).await?;
            if !hash_key_of(r, &inner_cols, &colls, &mut k) {
                continue;
            }
            // The table is new memory beside the inner rows (which were
            // charged when scanned): a key and an index per row.
            built.add_bytes(&ctx.mem, k.len() as u64 + crate::engine::memory::HASH_ENTRY_BYTES)?;
            table.entry(std::mem::take(&mut k)).or_default().push(i);
        }
        for (from_row, r) in rows.iter().enumerate() {
            turn.point(ctx, 1).await?;
            let mut matched = false;
            if hash_key_of(r, &outer_cols, &colls, &mut k) {
                if let Some(list) = table.get(&k) {
                    compared += list.len() as u64;
                    for &i in list {
                        let joined = concat(r, &inner[i]);
                        if all_pass(&s.on, &joined, ctx)? {
                            matched = true;
                            emit(&mut next, &mut from, &mut built, &ctx.mem, joined, from_row)?;
                        }
                    }
                }
            }
            if !matched && s.left_join {
                emit(&mut next, &mut from, &mut built, &ctx.mem, concat(r, &null_ext), from_row)?;
            }
        }
    } else {
        let mut turn = Turn::new();
        for (from_row, r) in rows.iter().enumerate() {
            turn.point(ctx, inner.len().max(1)).await?;
            compared += inner.len() as u64;
            let mut matched = false;
            for ir in &inner {
                let joined = concat(r, ir);
                if all_pass(&s.on, &joined, ctx)? {
                    matched = true;
                    emit(&mut next, &mut from, &mut built, &ctx.mem, joined, from_row)?;
                    if next.len() > MAX_RESULT_ROWS {
                        return Err(SqlError::new(1104, "42000", "The SELECT would examine too many rows"));
                    }
                }
            }
            if !matched && s.left_join {
                emit(&mut next, &mut from, &mut built, &ctx.mem, concat(r, &null_ext), from_row)?;
            }
        }
    }
    JOIN_ROWS_COMPARED.fetch_add(compared, std::sync::atomic::Ordering::Relaxed);
    built.flush(&ctx.mem)?;
    Ok(next)
}

/// Most outer rows a join reads through index ranges (`JoinLookup::range`,
/// one multi-range scan per `MAX_SCAN_RANGES` distinct keys): past it, one
/// scan of the inner side and a hash join are taken to cost less.
pub const MAX_REF_OUTER_ROWS: usize = 1024;

/// The join key of outer row `r` as the inner table's values (None: it
/// equals no stored value, a NULL say).
fn join_key_of(
    l: &crate::engine::query::JoinLookup,
    t: &TableAccess,
    r: &Row,
    ctx: &mut EvalCtx<'_>,
) -> Result<Option<Vec<Value>>, SqlError> {
    let mut k = Vec::with_capacity(l.keys.len());
    for (e, col) in l.keys.iter().zip(&l.cols) {
        let v = eval(e, r, ctx)?;
        let zone = ctx.zone();
        match crate::engine::ts_zone::zoned_value(
            &v,
            &t.table.def.columns[*col as usize],
            zone,
            crate::engine::ts_zone::Use::JoinLookup,
        )
        .0
        {
            KeyConv::Val(x) => k.push(x),
            _ => return Ok(None),
        }
    }
    Ok(Some(k))
}

/// Distinct join keys and, per outer row, the position of its key among
/// them (`distinct_join_keys`).
type JoinKeys = (Vec<Vec<Value>>, Vec<Option<usize>>);

/// The distinct join keys of outer `rows` (as the inner table's values, in
/// first-seen order), and each row's position among them (None: its key
/// equals nothing). Keys are told apart as GROUP BY tells values apart.
fn distinct_join_keys(
    l: &crate::engine::query::JoinLookup,
    t: &TableAccess,
    rows: &[Row],
    ctx: &mut EvalCtx<'_>,
) -> Result<JoinKeys, SqlError> {
    let mut keys: Vec<Vec<Value>> = Vec::new();
    let mut key_of_row: Vec<Option<usize>> = Vec::with_capacity(rows.len());
    let mut key_index: HashMap<Vec<u8>, usize> = HashMap::new();
    for r in rows {
        let Some(k) = join_key_of(l, t, r, ctx)? else {
            key_of_row.push(None);
            continue;
        };
        let mut enc = Vec::new();
        encode_group_key(&k, &vec![Coll::Ci; k.len()], &mut enc);
        let ki = *key_index.entry(enc).or_insert_with(|| {
            keys.push(k);
            keys.len() - 1
        });
        key_of_row.push(Some(ki));
    }
    Ok((keys, key_of_row))
}

/// The rows of a multi-range scan (`ScanSpec::ranges`) with the position of
/// the range each came from, taken off the row (see `scan_rows`).
async fn scan_ranges_rows(
    rd: &mut Reader<'_>,
    spec: ScanSpec,
    ctx: &EvalCtx<'_>,
    def: &TableDef,
) -> Result<Vec<(usize, Row)>, SqlError> {
    let ranges = spec.ranges.len();
    let mut out = Vec::new();
    for mut r in scan_rows(rd, spec, ctx, def).await? {
        match r.pop() {
            Some(Value::Int(no)) if (0..ranges as i64).contains(&no) => out.push((no as usize, r)),
            other => return Err(SqlError::internal(format!("a multi-range scan row tagged {other:?}"))),
        }
    }
    Ok(out)
}

/// A range of exactly the index key prefix `k`.
fn point_range(k: Vec<Value>) -> norr_signals::ScanRange {
    norr_signals::ScanRange { low: norr_signals::Bound::inclusive(k.clone()), high: norr_signals::Bound::inclusive(k) }
}

/// An index nested-loop join through an ordered index (MySQL's `ref`):
/// the inner rows of each distinct outer key are one range of the index,
/// read with the inner side's own conditions pushed down; the ranges of up
/// to `MAX_SCAN_RANGES` keys go in one scan (one round trip per batch).
async fn ref_join(
    rd: &mut Reader<'_>,
    s: &Source,
    l: &crate::engine::query::JoinLookup,
    t: &TableAccess,
    rows: &[Row],
    ctx: &mut EvalCtx<'_>,
    mut from: Option<&mut Vec<usize>>,
) -> Result<Vec<Row>, SqlError> {
    let def = &t.table.def;
    let null_ext = if s.left_join { vec![Value::Null; s.width] } else { Vec::new() };
    let mut next: Vec<Row> = Vec::new();
    let mut built = crate::engine::memory::Built::default();
    let (keys, key_of_row) = distinct_join_keys(l, t, rows, ctx)?;
    // The inner rows of each key.
    let mut inner: Vec<Vec<Row>> = vec![Vec::new(); keys.len()];
    let checks = t.row_local();
    let mut keys = keys.into_iter();
    let mut first = 0;
    while keys.len() > 0 {
        ctx.check_killed()?;
        let batch: Vec<_> = keys.by_ref().take(MAX_SCAN_RANGES).map(point_range).collect();
        let Some((mut spec, _)) = scan_spec_via(t, t.lock, &Access::FullScan, ctx, None, false)? else {
            break;
        };
        spec.index = l.index;
        let n = batch.len();
        spec.ranges = batch;
        'found: for (no, r) in scan_ranges_rows(rd, spec, ctx, def).await? {
            let r = widen(t, r);
            for c in checks {
                if !eval_pred(c, &r, ctx)? {
                    continue 'found;
                }
            }
            inner[first + no].push(r);
        }
        first += n;
    }
    for (from_row, (r, key)) in rows.iter().zip(key_of_row).enumerate() {
        let mut matched = false;
        for ir in key.map(|k| &inner[k][..]).unwrap_or_default() {
            let joined = concat(r, ir);
            if all_pass(&s.on, &joined, ctx)? {
                matched = true;
                emit(&mut next, &mut from, &mut built, &ctx.mem, joined, from_row)?;
            }
        }
        if !matched && s.left_join {
            emit(&mut next, &mut from, &mut built, &ctx.mem, concat(r, &null_ext), from_row)?;
        }
    }
    built.flush(&ctx.mem)?;
    Ok(next)
}

async fn run_select(
    rd: &mut Reader<'_>,
    c: &Compiled,
    p: &SelectPlan,
    ctx: &mut EvalCtx<'_>,
) -> Result<Vec<Row>, SqlError> {
    // A locking read with LIMIT reads its candidates without locks and
    // locks the ones it returns (see `locked_limit`).
    let lock_pick = crate::engine::locked_limit::table(p);
    // Limit pushdown: one table, nothing that needs every row.
    let push_limit = if lock_pick.is_none()
        && p.sources.len() == 1
        && p.filter.is_empty()
        && p.agg.is_none()
        && p.order.is_empty()
        && !p.distinct
        && p.correlated.is_empty()
        && p.windows.is_empty()
    {
        match &p.sources[0].kind {
            SourceKind::Table(t) if t.local.is_empty() => match eval_count(p.limit.as_ref(), ctx, "LIMIT")? {
                Some(l) => Some(l + eval_count(p.offset.as_ref(), ctx, "OFFSET")?.unwrap_or(0)),
                None => None,
            },
            _ => None,
        }
    } else {
        None
    };
    // A single-table aggregate the data nodes compute: its groups, not the
    // rows (`pushed_agg`; None: read the rows).
    let pushed = match p.agg.is_some() {
        true => crate::engine::pushed_agg::run(rd, p, lock_pick.is_some(), ctx).await?,
        false => None,
    };
    // The rows so far: one empty row to extend. A first source that is not
    // a lookup replaces it, so it is only allocated when something reads it.
    let mut rows: Vec<Row> = match p.sources.first() {
        Some(s) if s.lookup.is_none() => Vec::new(),
        _ => vec![Vec::new()],
    };
    if !p.nests.is_empty() && pushed.is_none() {
        rows = crate::engine::join_nests::run(rd, c, p, ctx, lock_pick.is_some(), push_limit).await?;
    }
    for (si, s) in p.sources.iter().enumerate() {
        if !p.nests.is_empty() || pushed.is_some() {
            break;
        }
        if si == 0 && s.lookup.is_none() {
            rows = source_rows(rd, c, p, s, ctx, lock_pick.is_some(), push_limit).await?;
            // ON of the first source (only from nested joins) acts as a filter.
            if !s.on.is_empty() {
                let mut keep = Vec::with_capacity(rows.len());
                for r in rows {
                    if all_pass(&s.on, &r, ctx)? {
                        keep.push(r);
                    }
                }
                rows = keep;
            }
            continue;
        }
        rows = join_source(rd, c, p, s, &rows, ctx, lock_pick.is_some(), push_limit, None).await?;
    }

    // WHERE (rest), with correlated subqueries run per row.
    if !p.filter.is_empty() || !p.correlated.is_empty() {
        let mut keep = Vec::with_capacity(rows.len());
        let mut turn = Turn::new();
        'w: for r in rows {
            turn.point(ctx, 1).await?;
            // Without a WHERE to check (nor aggregates, windows or HAVING, which
            // read them later) the projection runs them for its row: once
            // here as well read every subquery twice.
            let for_projection_only =
                p.filter.is_empty() && p.agg.is_none() && p.windows.is_empty() && p.having.is_none();
            if !p.correlated.is_empty() && !for_projection_only {
                ctx.check_killed()?;
                run_correlated(rd, c, &p.correlated, &r, ctx).await?;
            }
            if p.waits {
                // Boxed: the waits' future stays out of this one's size,
                // which every statement pays for.
                let pass = Box::pin(crate::engine::user_lock_fns::eval_waiting(ctx, |ctx| {
                    for f in &p.filter {
                        if !eval_pred(f, &r, ctx)? {
                            return Ok(false);
                        }
                    }
                    Ok(true)
                }))
                .await?;
                if !pass {
                    continue 'w;
                }
            } else {
                for f in &p.filter {
                    if !eval_pred(f, &r, ctx)? {
                        continue 'w;
                    }
                }
            }
            keep.push(r);
        }
        rows = keep;
    }

    if let Some(t) = lock_pick {
        rows = crate::engine::locked_limit::pick(rd, p, t, rows, ctx).await?;
    }

    // Aggregation.
    let mut rows = match (&p.agg, pushed) {
        (_, Some(groups)) => groups,
        (Some(a), None) => aggregate(rows, a, p.width, ctx)?,
        (None, None) => rows,
    };
    // Window functions see the rows HAVING keeps.
    let having = match p.windows.is_empty() {
        true => p.having.as_ref(),
        false => {
            if let Some(h) = &p.having {
                let mut keep = Vec::with_capacity(rows.len());
                for r in rows {
                    if eval_pred(h, &r, ctx)? {
                        keep.push(r);
                    }
                }
                rows = keep;
            }
            crate::engine::window::eval::apply(&mut rows, &p.windows, ctx)?;
            None
        }
    };
    // HAVING, projection, order keys.
    // A select list of distinct plain columns takes its values out of the
    // row instead of copying them; an order key that is a selected column
    // is read from the output row.
    let moves = plain_distinct_cols(&p.proj);
    let col_of = |e: &CExpr| match e {
        CExpr::Col(i) => *i,
        _ => usize::MAX, // not reached: `moves` holds only for plain columns
    };
    let key_cols: Vec<Option<usize>> = p
        .order
        .iter()
        .map(|o| match &o.expr {
            CExpr::Col(i) => p.proj.iter().position(|e| matches!(e, CExpr::Col(j) if j == i)),
            _ => None,
        })
        .collect();
    let keys_in_output = key_cols.iter().all(Option::is_some);
    // A select list of ascending plain columns is built in the row itself,
    // when every row is wide enough to hold them.
    let in_place = moves && {
        let cols = &p.proj;
        cols.windows(2).all(|w| col_of(&w[0]) < col_of(&w[1]))
            && cols.last().is_none_or(|l| rows.iter().all(|r| col_of(l) < r.len()))
    };
    let mut keyed: Vec<(Vec<Value>, Row)> = Vec::with_capacity(rows.len());
    let mut built = crate::engine::memory::Built::default();
    let mut turn = Turn::new();
    for mut r in rows {
        turn.point(ctx, 1).await?;
        if let Some(h) = having {
            if !eval_pred(h, &r, ctx)? {
                continue;
            }
        }
        if !p.correlated.is_empty() && p.agg.is_none() {
            run_correlated(rd, c, &p.correlated, &r, ctx).await?;
        }
        // Keys that are selected columns are read from the output row
        // (`order_key`): when all are, no key vector is allocated.
        let mut keys = Vec::new();
        if !keys_in_output {
            keys.reserve_exact(p.order.len());
            for (o, kc) in p.order.iter().zip(&key_cols) {
                keys.push(match kc {
                    Some(_) => Value::Null,
                    None => eval(&o.expr, &r, ctx)?,
                });
            }
        }
        let out = match moves {
            true if in_place => {
                // Ascending offsets: slot k takes the value at cols[k] >= k,
                // which no earlier swap has touched.
                for (k, e) in p.proj.iter().enumerate() {
                    r.swap(k, col_of(e));
                }
                r.truncate(p.proj.len());
                r
            }
            true => p
                .proj
                .iter()
                .map(|e| r.get_mut(col_of(e)).map(|v| std::mem::replace(v, Value::Null)).unwrap_or(Value::Null))
                .collect(),
            false if p.waits => {
                let r = &r;
                Box::pin(crate::engine::user_lock_fns::eval_waiting(ctx, |ctx| {
                    p.proj.iter().map(|e| eval(e, r, ctx)).collect::<Result<Vec<Value>, SqlError>>()
                }))
                .await?
            }
            false => {
                let mut out = Vec::with_capacity(p.proj.len());
                for e in &p.proj {
                    out.push(eval(e, &r, ctx)?);
                }
                out
            }
        };
        // Computed values are new memory (a REPEAT per row can make each
        // row megabytes): counted as the result is built, not after.
        if !moves {
            built.add(&ctx.mem, &out)?;
        }
        keyed.push((keys, out));
    }
    built.flush(&ctx.mem)?;
    if p.waits && ctx.waits.sleep_interrupted && p.sources.iter().any(|s| matches!(s.kind, SourceKind::Table(_))) {
        // A killed SLEEP returned 1; as part of a query over a table it
        // ends the query, as in MySQL.
        return Err(crate::session_registry::interrupted());
    }
    let colls: Vec<Coll> = if p.distinct { p.types.iter().map(|t| t.coll).collect() } else { Vec::new() };
    finish_rows(keyed, &p.order, &key_cols, p.distinct, &colls, p.limit.as_ref(), p.offset.as_ref(), ctx)
}

/// Whether a select list is made only of plain, pairwise distinct column
/// references (checked in place: a list of their offsets was an allocation
/// per statement).
pub(crate) fn plain_distinct_cols(proj: &[CExpr]) -> bool {
    proj.iter().enumerate().all(|(k, e)| match e {
        CExpr::Col(i) => !proj[..k].iter().any(|p| matches!(p, CExpr::Col(j) if j == i)),
        _ => false,
    })
}

async fn run_correlated(
    rd: &mut Reader<'_>,
    c: &Compiled,
    subs: &[usize],
    row: &Row,
    ctx: &mut EvalCtx<'_>,
) -> Result<(), SqlError> {
    for &i in subs {
        let saved = std::mem::replace(&mut ctx.outer_row, row.clone());
        // One run per outer row: the rows it reads and builds are gone once
        // it has answered, and so is the answer of the previous outer row,
        // which this one replaces. Their charges go back, and the new answer
        // is charged: a statement holds one answer per subquery, not
        // everything its runs ever read (a check of TPC-C reads 30,000
        // history rows per customer and failed with 1041 after ~400).
        ctx.subs[i] = SubResult::NotRun;
        let mark = ctx.mem.used();
        let r = run_sub(rd, c, i, ctx).await;
        ctx.outer_row = saved;
        ctx.mem.release_to(mark);
        let r = r?;
        ctx.mem.charge(sub_result_bytes(&r))?;
        ctx.subs[i] = r;
    }
    Ok(())
}

/// Estimated bytes a subquery's answer holds (`memory::row_bytes` for its
/// values).
fn sub_result_bytes(r: &SubResult) -> u64 {
    match r {
        SubResult::Scalar(v) => crate::engine::memory::row_bytes(std::slice::from_ref(v)),
        SubResult::Exists(_) | SubResult::NotRun => 0,
        SubResult::Set { values, .. } => crate::engine::memory::row_bytes(values),
        SubResult::Rows(rows) => crate::engine::memory::rows_bytes(rows),
    }
}

/// Running state of one aggregate.
#[derive(Debug, Clone)]
pub(crate) enum AggState {
    Count(i64),
    Sum(Option<Num>),
    Avg(Option<Num>, i64),
    Min(Option<Value>),
    Max(Option<Value>),
    /// GROUP_CONCAT: the pieces with their ORDER BY keys, joined at the end.
    /// Bounded by group_concat_max_len (see `ConcatBound`).
    Concat(Vec<(Vec<Value>, Vec<u8>)>, ConcatBound),
    Bit(Option<u64>),
    /// Welford's running count, mean and sum of squared deviations.
    Var(i64, f64, f64),
    /// JSON_ARRAYAGG's elements in arrival order (None before the first row:
    /// the empty set gives NULL, not `[]`).
    JsonArray(Option<Vec<serde_json::Value>>),
    /// JSON_OBJECTAGG's members; a later duplicate key replaces the earlier.
    JsonObject(Option<serde_json::Map<String, serde_json::Value>>),
}

/// GROUP_CONCAT's bound: bytes of the result so far (pieces and
/// separators), and the session's group_concat_max_len (taken at the first
/// row). Without ORDER BY, pieces past the limit are not even kept; with it
/// every piece is, as any may sort first; the result is cut at the end.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ConcatBound {
    pub bytes: u64,
    pub max_len: Option<u64>,
}

pub(crate) fn agg_init(a: &AggSpec) -> AggState {
    match a.kind {
        AggKind::CountStar | AggKind::Count => AggState::Count(0),
        AggKind::Sum => AggState::Sum(None),
        AggKind::Avg => AggState::Avg(None, 0),
        AggKind::Min => AggState::Min(None),
        AggKind::Max => AggState::Max(None),
        AggKind::GroupConcat => AggState::Concat(Vec::new(), ConcatBound::default()),
        AggKind::BitAnd | AggKind::BitOr | AggKind::BitXor => AggState::Bit(None),
        AggKind::StdPop | AggKind::StdSamp | AggKind::VarPop | AggKind::VarSamp => AggState::Var(0, 0.0, 0.0),
        AggKind::JsonArrayAgg => AggState::JsonArray(None),
        AggKind::JsonObjectAgg => AggState::JsonObject(None),
    }
}

fn add_num(acc: Option<Num>, v: Num) -> Result<Num, SqlError> {
    let v = match v {
        Num::I(_) | Num::U(_) => Num::D(Decimal {
            mantissa: match v {
                Num::I(i) => i as i128,
                Num::U(u) => u as i128,
                _ => 0,
            },
            scale: 0,
        }),
        o => o,
    };
    match acc {
        None => Ok(v),
        Some(a) => Ok(vals::arith(vals::ArithOp::Add, a, v, &|| "sum".into())?.unwrap_or(a)),
    }
}

/// Fold one source row's value into an aggregate. `row` is the source row,
/// for GROUP_CONCAT's ORDER BY keys.
/// Adds one value to an aggregate's state. Returns the bytes the state grew
/// by (GROUP_CONCAT's pieces, the JSON aggregates' members), which a caller
/// that keeps many states counts against the statement's memory; the other
/// states have a fixed size.
pub(crate) fn agg_step(
    st: &mut AggState,
    a: &AggSpec,
    v: Option<Value>,
    row: &[Value],
    ctx: &mut EvalCtx,
) -> Result<u64, SqlError> {
    let v = match v {
        None => {
            // COUNT(*)
            if let AggState::Count(n) = st {
                *n += 1;
            }
            return Ok(0);
        }
        Some(Value::Null) => return Ok(0),
        Some(v) => v,
    };
    let mut grew = 0;
    match st {
        AggState::Count(n) => *n += 1,
        AggState::Sum(s) => {
            // Integers into an integral decimal sum: a plain add while it fits
            // (what `add_num` computes, without the general decimal arithmetic).
            if let (Value::Int(i), Some(Num::D(d))) = (&v, s.as_mut()) {
                if d.scale == 0 {
                    if let Some(m) = d.mantissa.checked_add(*i as i128) {
                        d.mantissa = m;
                        return Ok(0);
                    }
                }
            }
            if let Some(x) = vals::to_num(&v, &mut ctx.warnings) {
                *s = Some(add_num(*s, x)?);
            }
        }
        AggState::Avg(s, n) => {
            if let Some(x) = vals::to_num(&v, &mut ctx.warnings) {
                *s = Some(add_num(*s, x)?);
                *n += 1;
            }
        }
        AggState::Min(m) => {
            if m.as_ref().is_none_or(|cur| order_cmp(&v, cur, a.coll) == std::cmp::Ordering::Less) {
                *m = Some(v);
            }
        }
        AggState::Max(m) => {
            if m.as_ref().is_none_or(|cur| order_cmp(&v, cur, a.coll) == std::cmp::Ordering::Greater) {
                *m = Some(v);
            }
        }
        AggState::Concat(items, bound) => {
            let max_len = *bound.max_len.get_or_insert(ctx.group_concat_max_len);
            if bound.bytes > max_len && a.order.is_empty() {
                return Ok(0); // cut already: this piece would not show
            }
            let keys = a.order.iter().map(|(e, _, _)| eval(e, row, ctx)).collect::<Result<Vec<_>, _>>()?;
            let piece = vals::to_text(&v).unwrap_or_default().into_owned();
            let sep = if items.is_empty() { 0 } else { a.separator.len() as u64 };
            let before = bound.bytes;
            bound.bytes = bound.bytes.saturating_add(sep + piece.len() as u64);
            if before <= max_len && bound.bytes > max_len {
                ctx.warnings.push(1260, format!("Row {} was cut by GROUP_CONCAT()", items.len() + 1));
            }
            grew = (piece.len() + std::mem::size_of::<(Vec<Value>, Vec<u8>)>()) as u64
                + crate::engine::memory::row_bytes(&keys);
            items.push((keys, piece));
        }
        AggState::Var(n, mean, m2) => {
            if let Some(x) = vals::to_f64(&v, &mut ctx.warnings) {
                *n += 1;
                let d = x - *mean;
                *mean += d / *n as f64;
                *m2 += d * (x - *mean);
            }
        }
        AggState::JsonArray(items) => {
            // The argument is a one-element JSON_ARRAY (see AggKind). Its
            // text's length stands for what the parsed element holds.
            grew = v.as_bytes().map_or(0, |b| b.len() as u64);
            let one = json_fragment(&v)?;
            let items = items.get_or_insert_with(Vec::new);
            match one {
                serde_json::Value::Array(a) => items.extend(a),
                other => items.push(other),
            }
        }
        AggState::JsonObject(members) => {
            // The argument is a one-member JSON_OBJECT (see AggKind).
            grew = v.as_bytes().map_or(0, |b| b.len() as u64) + crate::engine::memory::HASH_ENTRY_BYTES;
            let members = members.get_or_insert_with(serde_json::Map::new);
            if let serde_json::Value::Object(m) = json_fragment(&v)? {
                for (k, x) in m {
                    members.insert(k, x);
                }
            }
        }
        AggState::Bit(b) => {
            let x = vals::to_i64(&v, &mut ctx.warnings).unwrap_or(0) as u64;
            *b = Some(match (a.kind, *b) {
                (_, None) => x,
                (AggKind::BitAnd, Some(y)) => x & y,
                (AggKind::BitXor, Some(y)) => x ^ y,
                (_, Some(y)) => x | y,
            });
        }
    }
    Ok(grew)
}

pub(crate) fn agg_final(st: AggState, a: &AggSpec) -> Value {
    match st {
        AggState::Count(n) => Value::Int(n),
        AggState::Sum(s) => match s {
            None => Value::Null,
            Some(Num::F(f)) => Value::Double(f),
            Some(n) => n.to_value(),
        },
        AggState::Avg(s, n) => match s {
            None => Value::Null,
            Some(Num::F(f)) => Value::Double(f / n as f64),
            Some(x) => match vals::arith(vals::ArithOp::Div, x, Num::I(n), &|| "avg".into()) {
                Ok(Some(r)) => r.to_value(),
                _ => Value::Null,
            },
        },
        AggState::Min(m) | AggState::Max(m) => m.unwrap_or(Value::Null),
        AggState::Concat(mut items, bound) => {
            if items.is_empty() {
                return Value::Null;
            }
            if !a.order.is_empty() {
                // Stable: equal keys keep arrival order.
                sort_keys::sort_by_keys(&mut items, a.order.len(), |(k, _), i| &k[i], |i| (a.order[i].1, a.order[i].2));
            }
            let max_len = bound.max_len.unwrap_or(u64::MAX);
            let mut out = Vec::with_capacity(bound.bytes.min(max_len) as usize);
            for (i, (_, piece)) in items.into_iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(&a.separator);
                }
                out.extend_from_slice(&piece);
                if out.len() as u64 > max_len {
                    break;
                }
            }
            if out.len() as u64 > max_len {
                // Cut at a character boundary, as MySQL cuts characters.
                let mut end = max_len as usize;
                while end > 0 && (out[end] & 0xC0) == 0x80 {
                    end -= 1;
                }
                out.truncate(end);
            }
            Value::Bytes(out)
        }
        AggState::Var(n, _, m2) => {
            let samp = matches!(a.kind, AggKind::StdSamp | AggKind::VarSamp);
            let denom = if samp { n - 1 } else { n };
            if n == 0 || denom <= 0 {
                return Value::Null;
            }
            let var = m2 / denom as f64;
            Value::Double(if matches!(a.kind, AggKind::StdPop | AggKind::StdSamp) { var.sqrt() } else { var })
        }
        AggState::Bit(b) => Value::UInt(b.unwrap_or(if a.kind == AggKind::BitAnd { u64::MAX } else { 0 })),
        AggState::JsonArray(None) | AggState::JsonObject(None) => Value::Null,
        AggState::JsonArray(Some(items)) => {
            Value::Bytes(crate::engine::json::to_text(&serde_json::Value::Array(items)).into_bytes())
        }
        AggState::JsonObject(Some(m)) => {
            Value::Bytes(crate::engine::json::to_text(&serde_json::Value::Object(m)).into_bytes())
        }
    }
}

/// The JSON text a JSON aggregate's wrapped argument produced, parsed back.
/// It was written by JSON_ARRAY / JSON_OBJECT, so a parse failure is ours.
fn json_fragment(v: &Value) -> Result<serde_json::Value, SqlError> {
    let text = v.as_bytes().ok_or_else(|| SqlError::internal("JSON aggregate argument is not text"))?;
    crate::engine::json::parse(text).map_err(|e| SqlError::internal(format!("JSON aggregate argument: {}", e.message)))
}

/// GROUP BY + aggregates: one post-aggregation row per group = first source
/// row ++ aggregate values (++ ROLLUP's group slots and GROUPING() values).
///
/// Each row is aggregated at every level of `rollup::levels` (one level
/// without ROLLUP): a level's groups are keyed by the level and the values of
/// the GROUP BY expressions it keeps.
fn aggregate(
    rows: Vec<Row>,
    a: &crate::engine::query::AggPlan,
    width: usize,
    ctx: &mut EvalCtx,
) -> Result<Vec<Row>, SqlError> {
    use crate::engine::rollup;
    struct Group {
        first: Row,
        states: Vec<AggState>,
        seen: Vec<std::collections::HashSet<Vec<u8>>>,
        /// With ROLLUP: the values of the GROUP BY expressions this group
        /// keeps (its level is their count).
        kept: Vec<Value>,
    }
    let n = a.group_by.len();
    let levels = rollup::levels(n, a.rollup.is_some());
    let mut groups: Vec<Group> = Vec::new();
    let mut index: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut key = Vec::new();
    let mut gvals = Vec::with_capacity(n);
    let mut avals: Vec<Option<Value>> = Vec::with_capacity(a.aggs.len());
    // Groups, their index and their states are new memory beside the rows
    // (issue 22): a GROUP BY of long computed keys, COUNT(DISTINCT ...) of
    // many values or GROUP_CONCAT ... ORDER BY of long pieces holds far more
    // than the rows it reads. Counted as built, 1041 past the limits.
    let mut built = crate::engine::memory::Built::default();
    let group_bytes = (std::mem::size_of::<Group>() + a.aggs.len() * std::mem::size_of::<AggState>()) as u64;
    for r in rows {
        gvals.clear();
        for g in &a.group_by {
            gvals.push(eval(g, &r, ctx)?);
        }
        avals.clear();
        for spec in &a.aggs {
            avals.push(match &spec.arg {
                None => None,
                Some(e) => Some(eval(e, &r, ctx)?),
            });
        }
        for level in levels.clone().rev() {
            // The last level takes the row's values; earlier ones copy them.
            let last = level == *levels.start();
            // Without GROUP BY every row is in the one group: no key to hash.
            let found = if n == 0 {
                (!groups.is_empty()).then_some(0)
            } else {
                key.clear();
                if a.rollup.is_some() {
                    key.extend_from_slice(&(level as u32).to_le_bytes());
                }
                encode_group_key(&gvals[..level], &a.group_colls[..level], &mut key);
                index.get(&key).copied()
            };
            let gi = match found {
                Some(i) => i,
                None => {
                    let g = Group {
                        first: r.clone(),
                        states: a.aggs.iter().map(agg_init).collect(),
                        seen: a.aggs.iter().map(|_| Default::default()).collect(),
                        kept: if a.rollup.is_some() { gvals[..level].to_vec() } else { Vec::new() },
                    };
                    let bytes = group_bytes
                        + crate::engine::memory::row_bytes(&g.first)
                        + crate::engine::memory::row_bytes(&g.kept)
                        + key.len() as u64
                        + crate::engine::memory::HASH_ENTRY_BYTES;
                    built.add_bytes(&ctx.mem, bytes)?;
                    groups.push(g);
                    index.insert(key.clone(), groups.len() - 1);
                    groups.len() - 1
                }
            };
            let g = &mut groups[gi];
            for (k, spec) in a.aggs.iter().enumerate() {
                let v = if last { avals[k].take() } else { avals[k].clone() };
                if spec.distinct {
                    if let Some(v) = &v {
                        if v.is_null() {
                            continue;
                        }
                        let mut enc = Vec::new();
                        encode_group_key(std::slice::from_ref(v), &[spec.coll], &mut enc);
                        let bytes = enc.len() as u64 + crate::engine::memory::HASH_ENTRY_BYTES;
                        if !g.seen[k].insert(enc) {
                            continue;
                        }
                        built.add_bytes(&ctx.mem, bytes)?;
                    }
                }
                let grew = agg_step(&mut g.states[k], spec, v, &r, ctx)?;
                built.add_bytes(&ctx.mem, grew)?;
            }
        }
    }
    built.flush(&ctx.mem)?;
    if groups.is_empty() && n == 0 {
        // Aggregates over no rows: one row (COUNT = 0, others NULL).
        groups.push(Group {
            first: vec![Value::Null; width],
            states: a.aggs.iter().map(agg_init).collect(),
            seen: vec![],
            kept: Vec::new(),
        });
    }
    if a.rollup.is_some() {
        let mut keyed: Vec<(Vec<Value>, Group)> =
            groups.into_iter().map(|g| (rollup::sort_key(&g.kept, n), g)).collect();
        sort_keys::sort_by_keys(&mut keyed, 2 * n, |(k, _), i| &k[i], |i| (false, a.group_colls[i / 2]));
        groups = keyed.into_iter().map(|(_, g)| g).collect();
    }
    let mut out = Vec::with_capacity(groups.len());
    for g in groups {
        let mut row = g.first;
        row.resize(width, Value::Null);
        for (st, spec) in g.states.into_iter().zip(&a.aggs) {
            row.push(agg_final(st, spec));
        }
        if let Some(r) = &a.rollup {
            rollup::extend_row(&mut row, r, n, g.kept);
        }
        out.push(row);
    }
    Ok(out)
}

/// information_schema tables (served by the catalog's `infoschema` module).
pub async fn virtual_table(
    engine: &Engine,
    session: &Session,
    name: &str,
    wanted: crate::engine::infoschema::Wanted,
    scope: &crate::engine::infoschema::NameScope,
) -> Result<(Vec<ScopeCol>, Vec<Vec<Value>>), SqlError> {
    use crate::engine::expr::{SqlType, TClass};
    use crate::types::FieldType;
    match crate::engine::infoschema::virtual_table(engine, session, name, wanted, scope).await? {
        None => Err(crate::engine::infoschema::unknown_table_error(name)),
        Some((cols, rows)) => {
            let scope = cols
                .iter()
                .map(|c| {
                    let class = match c.field_type {
                        FieldType::Tiny
                        | FieldType::Short
                        | FieldType::Long
                        | FieldType::LongLong
                        | FieldType::Int24 => {
                            if c.flags & crate::types::column_flags::UNSIGNED != 0 {
                                TClass::UInt
                            } else {
                                TClass::Int
                            }
                        }
                        FieldType::NewDecimal => TClass::Decimal,
                        FieldType::Double | FieldType::Float => TClass::Double,
                        FieldType::DateTime | FieldType::Timestamp => TClass::DateTime,
                        FieldType::Date => TClass::Date,
                        _ => TClass::Str,
                    };
                    ScopeCol {
                        table: name.to_lowercase(),
                        name: c.name.clone(),
                        ty: SqlType::new(class),
                        enums: None,
                        default: None,
                    }
                })
                .collect();
            Ok((scope, rows))
        }
    }
}

/// True if every condition holds for the row (an empty list holds).
pub(crate) fn all_pass(conds: &[CExpr], row: &[Value], ctx: &mut EvalCtx) -> Result<bool, SqlError> {
    for c in conds {
        if !eval_pred(c, row, ctx)? {
            return Ok(false);
        }
    }
    Ok(true)
}
