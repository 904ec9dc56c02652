//! Results streamed to the client (issue 22, case 7): a SELECT over one
//! table without sorting, grouping or DISTINCT hands its rows to the
//! connection batch by batch while the scan runs, instead of building the
//! whole result first. The connection's writer takes one batch at a time
//! from a channel of one slot, so a client that reads slowly slows the
//! scan: the SQL node holds a few batches per statement (a scan batch, or
//! `MAX_BATCH_BYTES` of rows when they are large) whatever the result's
//! size (the batch in the channel, the one being made, and the
//! connection's output buffer), and the data node sends the next batch only
//! when it is asked for it. A client that goes away closes the channel: the
//! statement fails at its next batch, its scan is closed and its memory
//! returned.
//!
//! Statements that need every row before the first can be sent (ORDER BY
//! that the scan does not give, GROUP BY, DISTINCT, joins, windows, UNION)
//! are built whole as before, within `--max-statement-memory`.
//!
//! The protocol layer owns the receiving end (`protocol::conn`); it puts a
//! sender into `Session::result_sink` for the statements of a query made of
//! one statement. Output of a streamed statement is `QueryOutput::Streamed`:
//! the columns and rows were sent, what remains is the end of the result.

use crate::engine::exec::{self, Reader, Row};
use crate::engine::expr::{eval, eval_pred, CExpr, EvalCtx};
use crate::engine::memory::{self, InFlight};
use crate::engine::plan::{self, Access};
use crate::engine::query::{Compiled, QueryNode, SelectPlan, SourceKind, TableAccess};
use crate::session_registry::Kill;
use crate::types::{ColumnMeta, SqlError};
use norr_signals::Value;
use std::sync::Arc;
use tokio::sync::mpsc;

/// One part of a streamed result, in order: the columns once, then rows.
#[derive(Debug)]
pub enum ResultPart {
    /// The result's columns, sent before its first rows.
    Columns(Arc<[ColumnMeta]>),
    /// Rows, and the charge for the memory they hold until written.
    Rows(Vec<Row>, InFlight),
}

/// The engine's end of a connection's result channel.
#[derive(Debug, Clone)]
pub struct ResultSink(mpsc::Sender<ResultPart>);

/// The connection's end: parts in the order the statement sent them.
pub type ResultReceiver = mpsc::Receiver<ResultPart>;

/// A connection's result channel. One slot: the statement makes its next
/// batch while the writer sends this one, and waits for the writer beyond
/// that (back-pressure from the client's socket).
pub fn channel() -> (ResultSink, ResultReceiver) {
    let (tx, rx) = mpsc::channel(1);
    (ResultSink(tx), rx)
}

/// 1160 (ER_NET_ERROR_ON_WRITE): the connection's writer is gone.
fn client_gone() -> SqlError {
    SqlError::new(1160, "08S01", "Got an error writing communication packets: the client went away")
}

impl ResultSink {
    /// Hands `part` to the connection, waiting while the writer is busy; a
    /// KILL QUERY ends the wait.
    async fn send(&self, part: ResultPart, ctx: &EvalCtx<'_>) -> Result<(), SqlError> {
        let send = self.0.send(part);
        match ctx.stop.as_deref() {
            None => send.await.map_err(|_| client_gone()),
            Some(entry) => tokio::select! {
                biased;
                r = send => r.map_err(|_| client_gone()),
                _ = entry.wait_kill(Kill::Query) => Err(crate::session_registry::interrupted()),
            },
        }
    }
}

/// The plan and its one table when `c` can be streamed: a SELECT over one
/// table whose rows go out in the order the table gives them, one by one.
pub fn streamable(c: &Compiled) -> Option<(&SelectPlan, &TableAccess)> {
    let QueryNode::Select(p) = &c.root else { return None };
    if p.sources.len() != 1
        || !p.nests.is_empty()
        || p.agg.is_some()
        || p.having.is_some()
        || !p.windows.is_empty()
        || !p.order.is_empty()
        || p.distinct
        || !p.correlated.is_empty()
        || p.waits
        || crate::engine::locked_limit::table(p).is_some()
    {
        return None;
    }
    let s = &p.sources[0];
    if s.lookup.is_some() || !s.on.is_empty() {
        return None;
    }
    match &s.kind {
        // Key reads return a bounded number of rows: built whole, which is
        // cheaper for a point select than a channel's round trip.
        SourceKind::Table(t)
            if !matches!(
                t.access,
                Access::PkLookup { .. } | Access::UniqueLookup { .. } | Access::IndexKeys { .. }
            ) =>
        {
            Some((p, t))
        }
        _ => None,
    }
}

/// Where the rows come from: a narrow primary-key range read as key
/// lookups gives its rows at once (at most a few thousand), a scan batch by
/// batch.
enum Batches {
    Once(Option<Vec<Row>>),
    Scan { scan: norr_client::ScanStream, implied: u64 },
}

/// Runs the streamable plan `p` over `t` (see `streamable`), sending its
/// rows to `sink`; the number of rows sent. The uncorrelated subqueries
/// have run (`exec::run_subs`).
pub async fn run(
    rd: &mut Reader<'_>,
    c: &Compiled,
    p: &SelectPlan,
    t: &TableAccess,
    ctx: &mut EvalCtx<'_>,
    sink: &ResultSink,
) -> Result<u64, SqlError> {
    let def = &t.table.def;
    let offset = exec::eval_count(p.offset.as_ref(), ctx, "OFFSET")?.unwrap_or(0);
    let limit = exec::eval_count(p.limit.as_ref(), ctx, "LIMIT")?;
    // As `run_select`: the scan may stop after LIMIT + OFFSET rows when
    // every row it returns is a result row.
    let push_limit = match limit {
        Some(l) if p.filter.is_empty() && t.local.is_empty() => Some(l.saturating_add(offset)),
        _ => None,
    };
    let keyed = match &t.access {
        Access::PkRange { low, high } => {
            matches!(plan::resolve_pk_range(def, low, high, ctx)?, plan::PkRangeRun::Keys(_))
        }
        _ => false,
    };
    let ordered = crate::engine::scan_order::select_needs_scan_order(p);
    let mut source = if keyed {
        Batches::Once(Some(exec::fetch_table(rd, t, ctx, push_limit, ordered).await?))
    } else {
        match exec::open_table_scan(rd, t, ctx, push_limit, ordered).await? {
            None => Batches::Once(None),
            Some((scan, implied)) => Batches::Scan { scan, implied },
        }
    };
    let zone = ctx.tz.clone().filter(|_| crate::engine::ts_zone::has_timestamp(def));
    let checks = t.row_local();
    let moves = exec::plain_distinct_cols(&p.proj);
    let mut skip = offset;
    let mut left = limit.unwrap_or(u64::MAX);
    let mut sent = 0u64;
    let mut columns_sent = false;
    while left > 0 {
        let (batch, implied) = match &mut source {
            Batches::Once(rows) => match rows.take() {
                // Checked by `fetch_table`.
                Some(r) => (r, None),
                None => break,
            },
            Batches::Scan { scan, implied } => {
                let next = match ctx.stop.as_deref() {
                    None => scan.next_batch().await,
                    Some(entry) => tokio::select! {
                        biased;
                        b = scan.next_batch() => b,
                        _ = entry.wait_kill(Kill::Query) => return Err(crate::session_registry::interrupted()),
                    },
                };
                match next.map_err(|e| crate::engine::error_map::from_client(e, &exec::table_err(def)))? {
                    Some(mut b) => {
                        exec::count_rows_read(b.len());
                        for r in b.iter_mut() {
                            crate::engine::ts_zone::row_to_local(r, def, &t.needed, zone.as_deref());
                        }
                        (b.into_iter().map(|r| exec::widen(t, r)).collect::<Vec<Row>>(), Some(*implied))
                    }
                    None => break,
                }
            }
        };
        // Local conjuncts the scan's range did not decide exactly.
        let residual = |i: usize| implied.is_some_and(|m| i >= 64 || m & (1 << i) == 0);
        let mut out = Vec::with_capacity(batch.len().min(left as usize));
        let mut out_bytes = 0u64;
        'rows: for mut r in batch {
            for (i, check) in checks.iter().enumerate() {
                if residual(i) && !eval_pred(check, &r, ctx)? {
                    continue 'rows;
                }
            }
            for f in &p.filter {
                if !eval_pred(f, &r, ctx)? {
                    continue 'rows;
                }
            }
            if skip > 0 {
                skip -= 1;
                continue;
            }
            let row = project(&p.proj, moves, &mut r, ctx)?;
            out_bytes += memory::row_bytes(&row);
            out.push(row);
            left -= 1;
            if left == 0 {
                break;
            }
            // Computed values can make a row megabytes (a REPEAT per row):
            // a batch ends at MAX_BATCH_BYTES, whatever its rows.
            if out_bytes >= MAX_BATCH_BYTES {
                sent += send_rows(sink, c, ctx, &mut columns_sent, std::mem::take(&mut out), out_bytes).await?;
                out_bytes = 0;
            }
        }
        if out.is_empty() {
            continue;
        }
        sent += send_rows(sink, c, ctx, &mut columns_sent, out, out_bytes).await?;
    }
    // Dropping a scan that has not finished closes it on the data node.
    drop(source);
    if !columns_sent {
        sink.send(ResultPart::Columns(c.shared_columns()), ctx).await?;
    }
    Ok(sent)
}

/// Bytes of rows after which a batch goes to the client even if the scan's
/// batch has more rows: the SQL node holds a few batches per statement.
const MAX_BATCH_BYTES: u64 = 4 << 20;

/// Sends `rows` (`bytes`: their estimate, charged until written), and the
/// columns first if they have not been sent; the number of rows sent.
async fn send_rows(
    sink: &ResultSink,
    c: &Compiled,
    ctx: &mut EvalCtx<'_>,
    columns_sent: &mut bool,
    rows: Vec<Row>,
    bytes: u64,
) -> Result<u64, SqlError> {
    let charge = ctx.mem.in_flight(bytes)?;
    if !*columns_sent {
        sink.send(ResultPart::Columns(c.shared_columns()), ctx).await?;
        *columns_sent = true;
    }
    let n = rows.len() as u64;
    sink.send(ResultPart::Rows(rows, charge), ctx).await?;
    ctx.check_killed()?;
    Ok(n)
}

/// One output row: the select list over `r` (plain columns moved out).
fn project(proj: &[CExpr], moves: bool, r: &mut Row, ctx: &mut EvalCtx<'_>) -> Result<Row, SqlError> {
    if moves {
        return Ok(proj
            .iter()
            .map(|e| match e {
                CExpr::Col(i) => r.get_mut(*i).map(|v| std::mem::replace(v, Value::Null)).unwrap_or(Value::Null),
                _ => Value::Null, // not reached: `moves` holds only for plain columns
            })
            .collect());
    }
    let mut out = Vec::with_capacity(proj.len());
    for e in proj {
        out.push(eval(e, r, ctx)?);
    }
    Ok(out)
}
