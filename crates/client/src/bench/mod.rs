//! `norr bench`: a native-API load generator in the spirit of NDB's flexAsynch.
//!
//! Every thread owns one connection (on a current-thread tokio runtime) and keeps
//! `--inflight` transactions in flight on it; each transaction is one batch of
//! `--batch` primary-key operations of one kind (drawn from `--mix`) executed
//! with Commit, i.e. one round trip. Latency is measured per batch round trip
//! into HDR histograms; throughput counts operations (rows) per second.

mod args;
mod report;

pub use args::{BenchArgs, Mix, OpMix};
pub use report::BenchReport;

use crate::{table_def, Client, ClientError, ColumnDef, ColumnType, ExecType, KeyOp, OpResult, TableDef, Value};
use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Batches in flight per connection while loading.
const LOAD_INFLIGHT: usize = 16;
/// Rows per load batch.
const LOAD_BATCH: usize = 256;
/// Highest latency the histograms track (longer ones are clamped).
const MAX_LATENCY_US: u64 = 60_000_000;
/// Give up after this many permanent errors (a misconfigured run, not load).
const MAX_PERMANENT_ERRORS: u64 = 1000;

/// Run the benchmark described by `args`: load if asked, then the timed run;
/// prints the report (text or JSON) to stdout.
pub fn run_bench(args: BenchArgs) -> anyhow::Result<()> {
    let report = run_bench_report(&args)?;
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_text());
    }
    Ok(())
}

/// Like [`run_bench`] but returns the report instead of printing it.
pub fn run_bench_report(args: &BenchArgs) -> anyhow::Result<BenchReport> {
    args.validate()?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (table, mem) = rt.block_on(prepare(args))?;
    drop(rt);
    let mut report = BenchReport::new(args, mem);
    if args.duration.is_zero() {
        return Ok(report);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let measure_from = start + args.warmup;
    let end = measure_from + args.duration;
    let mut handles = Vec::new();
    for thread_no in 0..args.threads {
        let args = args.clone();
        let table = table.clone();
        let stop = stop.clone();
        handles.push(std::thread::Builder::new().name(format!("bench-{thread_no}")).spawn(
            move || -> anyhow::Result<ThreadStats> {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
                rt.block_on(run_thread(&args, thread_no, &table, measure_from, end, &stop))
            },
        )?);
    }
    let mut total = ThreadStats::new();
    let mut first_err = None;
    for h in handles {
        match h.join() {
            Ok(Ok(s)) => total.merge(&s),
            Ok(Err(e)) => first_err = first_err.or(Some(e)),
            Err(_) => bail!("a bench thread panicked"),
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    report.finish(&total, args.duration);
    Ok(report)
}

/// Memory figures measured around the load.
#[derive(Debug, Clone, Default)]
pub struct MemoryFigures {
    pub rows_loaded: u64,
    pub used_before_bytes: u64,
    pub used_after_bytes: u64,
    /// Key + value bytes of the loaded rows.
    pub payload_bytes: u64,
}

impl MemoryFigures {
    /// (used delta − payload) / rows: what the node spends per row beyond the data.
    pub fn overhead_per_row_bytes(&self) -> Option<f64> {
        if self.rows_loaded == 0 {
            return None;
        }
        let delta = self.used_after_bytes as f64 - self.used_before_bytes as f64;
        Some((delta - self.payload_bytes as f64) / self.rows_loaded as f64)
    }
}

/// The bench table: `k BIGINT NOT NULL PRIMARY KEY, v VARBINARY(record_size)`.
pub fn bench_table_def(name: &str, record_size: usize) -> TableDef {
    table_def(
        name,
        vec![
            ColumnDef::new("k", ColumnType::BigInt { unsigned: false }).not_null(),
            ColumnDef::new("v", ColumnType::Varbinary { len: record_size.max(1) as u32 }).not_null(),
        ],
        vec![0],
    )
}

fn payload(record_size: usize, seed: u64) -> Value {
    let mut v = Vec::with_capacity(record_size);
    let mut x = seed | 1;
    while v.len() < record_size {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(b'a' + (x % 26) as u8);
    }
    Value::Bytes(v)
}

/// How long a run waits for every data node of `--addr a,b,...` to be connected.
const CONNECT_ALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// One data node: a plain connection (as before). Several: a cluster client
/// connected to each of them, so that every transaction starts on the node
/// of its first partition's primary; waits until all are connected (and the
/// distribution is known) so the measured run is not routed through one node.
async fn connect(args: &BenchArgs, opts: crate::ConnectOptions) -> anyhow::Result<Client> {
    let addrs = crate::DataNodeAddr::parse_list(&args.addr).map_err(|e| anyhow::anyhow!("--addr: {e}"))?;
    if addrs.len() == 1 {
        return Client::connect_with(args.addr.trim(), opts).await.with_context(|| format!("connect to {}", args.addr));
    }
    let client = Client::connect_cluster(&addrs, opts).await.with_context(|| format!("connect to {}", args.addr))?;
    if !client.wait_connected(CONNECT_ALL_TIMEOUT).await {
        bail!("not every data node of {} connected within {CONNECT_ALL_TIMEOUT:?}", args.addr);
    }
    client.refresh_distribution().await.context("fetch the cluster's distribution")?;
    Ok(client)
}

async fn prepare(args: &BenchArgs) -> anyhow::Result<(TableDef, Option<MemoryFigures>)> {
    let client = connect(args, crate::ConnectOptions::default()).await?;
    if !args.load {
        let t = client
            .get_table(&args.table)
            .await
            .with_context(|| format!("table {} (run with --load to create and fill it)", args.table))?;
        return Ok((t, None));
    }
    match client.drop_table(&args.table).await {
        Ok(()) => {}
        Err(e) if e.code() == Some(crate::ErrorCode::NoSuchTable) => {}
        Err(e) => return Err(e).context("drop the old bench table"),
    }
    let before = client.node_stats().await.context("node stats before load")?;
    let t = client.create_table(bench_table_def(&args.table, args.record_size)).await.context("create table")?;
    load(&client, &t, args).await?;
    let after = client.node_stats().await.context("node stats after load")?;
    let mem = MemoryFigures {
        rows_loaded: args.keys,
        used_before_bytes: before.data_memory_used_bytes,
        used_after_bytes: after.data_memory_used_bytes,
        payload_bytes: args.keys * (8 + args.record_size as u64),
    };
    Ok((t, Some(mem)))
}

async fn load(client: &Client, t: &TableDef, args: &BenchArgs) -> anyhow::Result<()> {
    let value = payload(args.record_size, 0x5eed);
    let next = std::cell::Cell::new(0u64);
    let worker = || async {
        loop {
            let first = next.get();
            if first >= args.keys {
                return Ok::<_, ClientError>(());
            }
            let last = (first + LOAD_BATCH as u64).min(args.keys);
            next.set(last);
            let ops: Vec<_> = (first..last)
                .map(|k| KeyOp::write(t.id, vec![Value::Int(k as i64)], vec![(1, value.clone())]))
                .collect();
            let mut tries = 0;
            loop {
                match client.begin().execute(ops.clone(), ExecType::Commit).await {
                    Ok(_) => break,
                    Err(e) if e.is_temporary() && tries < 10 => tries += 1,
                    Err(e) => return Err(e),
                }
            }
        }
    };
    let workers: Vec<_> = (0..LOAD_INFLIGHT).map(|_| worker()).collect();
    for r in futures_join_all(workers).await {
        r.context("load")?;
    }
    Ok(())
}

/// Poll a set of futures on the current task until all are done (a tiny
/// join_all, to avoid a dependency for one call).
async fn futures_join_all<F: std::future::Future>(futs: Vec<F>) -> Vec<F::Output> {
    let mut futs: Vec<_> = futs.into_iter().map(|f| Some(Box::pin(f))).collect();
    let mut out: Vec<Option<F::Output>> = (0..futs.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, slot) in futs.iter_mut().enumerate() {
            if let Some(f) = slot {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => {
                        out[i] = Some(v);
                        *slot = None;
                    }
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter().map(|o| o.expect("every future completed")).collect()
}

/// Per-thread (then merged) counters and histograms, per operation kind.
pub(crate) struct ThreadStats {
    pub hist: [Histogram<u64>; 4],
    pub all: Histogram<u64>,
    pub ops: [u64; 4],
    pub batches: [u64; 4],
    /// Operations that came back with a per-op error (e.g. read of a deleted row).
    pub op_misses: u64,
    pub temporary_errors: u64,
    pub permanent_errors: u64,
    pub first_error: Option<String>,
}

impl ThreadStats {
    fn new() -> Self {
        let h = || Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("histogram bounds");
        ThreadStats {
            hist: [h(), h(), h(), h()],
            all: h(),
            ops: [0; 4],
            batches: [0; 4],
            op_misses: 0,
            temporary_errors: 0,
            permanent_errors: 0,
            first_error: None,
        }
    }
    fn merge(&mut self, o: &ThreadStats) {
        for i in 0..4 {
            self.hist[i].add(&o.hist[i]).expect("same bounds");
            self.ops[i] += o.ops[i];
            self.batches[i] += o.batches[i];
        }
        self.all.add(&o.all).expect("same bounds");
        self.op_misses += o.op_misses;
        self.temporary_errors += o.temporary_errors;
        self.permanent_errors += o.permanent_errors;
        if self.first_error.is_none() {
            self.first_error = o.first_error.clone();
        }
    }
}

async fn run_thread(
    args: &BenchArgs,
    thread_no: usize,
    table: &TableDef,
    measure_from: Instant,
    end: Instant,
    stop: &AtomicBool,
) -> anyhow::Result<ThreadStats> {
    let opts = crate::ConnectOptions {
        reply_spin: std::time::Duration::from_micros(args.reply_spin_us),
        ..Default::default()
    };
    let client = connect(args, opts).await?;
    let stats = std::cell::RefCell::new(ThreadStats::new());
    let value = payload(args.record_size, thread_no as u64 + 1);
    let workers: Vec<_> = (0..args.inflight)
        .map(|w| {
            let client = &client;
            let stats = &stats;
            let value = &value;
            async move {
                let mut rng = (thread_no as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                    ^ (w as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03);
                let mut next_rand = move || {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng
                };
                // Inserted keys live above the loaded range, unique per worker.
                let mut insert_seq: u64 = 0;
                let insert_base = args.keys + (((thread_no * args.inflight + w) as u64) << 32);
                let workers_total = (args.threads * args.inflight) as u64;
                let worker_index = (thread_no * args.inflight + w) as u64;
                let worker_keys = (args.keys / workers_total).max(1);
                let mut ops: Vec<KeyOp> = Vec::with_capacity(args.batch);
                loop {
                    let now = Instant::now();
                    if now >= end || stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let kind = args.mix.pick(next_rand());
                    ops.clear();
                    for _ in 0..args.batch {
                        // Each worker owns the keys congruent to its index, so
                        // concurrent write batches never wait for each other's
                        // locks (no deadlocks to time out, as flexAsynch).
                        let k = (worker_index + (next_rand() % worker_keys) * workers_total) as i64;
                        let mut op = match kind {
                            OpMix::Read => KeyOp::read(table.id, vec![Value::Int(k)]),
                            OpMix::Update => KeyOp::update(table.id, vec![Value::Int(k)], vec![(1, value.clone())]),
                            OpMix::Insert => {
                                insert_seq += 1;
                                KeyOp::insert(
                                    table.id,
                                    vec![Value::Int((insert_base + insert_seq) as i64)],
                                    vec![(1, value.clone())],
                                )
                            }
                            OpMix::Delete => KeyOp::delete(table.id, vec![Value::Int(k)]),
                        };
                        op.abort_on_error = false;
                        ops.push(op);
                    }
                    let batch = std::mem::replace(&mut ops, Vec::with_capacity(args.batch));
                    let t0 = Instant::now();
                    let res = client.begin().execute(batch, ExecType::Commit).await;
                    let t1 = Instant::now();
                    let mut st = stats.borrow_mut();
                    let measured = t0 >= measure_from && t1 <= end;
                    match res {
                        Ok(results) => {
                            if measured {
                                let us = ((t1 - t0).as_micros() as u64).clamp(1, MAX_LATENCY_US);
                                let i = kind as usize;
                                st.hist[i].record(us).expect("clamped");
                                st.all.record(us).expect("clamped");
                                st.ops[i] += results.len() as u64;
                                st.batches[i] += 1;
                                st.op_misses += results.iter().filter(|r| matches!(r, OpResult::Err(_))).count() as u64;
                            }
                        }
                        Err(e) if e.is_temporary() => {
                            st.temporary_errors += 1;
                            if st.first_error.is_none() {
                                st.first_error = Some(e.to_string());
                            }
                            if matches!(e, ClientError::NotConnected(_)) {
                                return Err(anyhow::Error::new(e).context("connection lost"));
                            }
                        }
                        Err(e) => {
                            st.permanent_errors += 1;
                            if st.first_error.is_none() {
                                st.first_error = Some(e.to_string());
                            }
                            if st.permanent_errors > MAX_PERMANENT_ERRORS {
                                return Err(anyhow::Error::new(e).context("too many errors"));
                            }
                        }
                    }
                }
                Ok::<_, anyhow::Error>(())
            }
        })
        .collect();
    for r in futures_join_all(workers).await {
        if let Err(e) = r {
            stop.store(true, Ordering::Relaxed);
            return Err(e);
        }
    }
    Ok(stats.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overhead() {
        let m = MemoryFigures { rows_loaded: 10, used_before_bytes: 1000, used_after_bytes: 3000, payload_bytes: 1800 };
        assert_eq!(m.overhead_per_row_bytes(), Some(20.0));
        assert_eq!(MemoryFigures::default().overhead_per_row_bytes(), None);
    }

    #[test]
    fn payload_has_size() {
        assert_eq!(payload(100, 3).as_bytes().unwrap().len(), 100);
        assert_eq!(payload(0, 3).as_bytes().unwrap().len(), 0);
    }
}
