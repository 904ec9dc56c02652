//! Simple statistics per table and index, which EXPLAIN's `rows` and
//! `filtered` come from. Owner: query engineer.
//!
//! What is kept, per table (one SQL node's view; NDB's index statistics are
//! kept much the same way, per SQL node, and refreshed by ANALYZE TABLE):
//! - the row count: exact when the table was analyzed (a committed-read
//!   count scan, `table_stats::count_rows`), then moved by the rows this SQL
//!   node's INSERT / DELETE statements report (`note_statement`; one map
//!   lookup per statement, nothing while no table has statistics; rows of a
//!   transaction that later rolls back are counted too, until the next
//!   analysis);
//! - for every index and every prefix of its columns, the mean number of
//!   rows per distinct key value ("rows per key", MySQL's
//!   `rec_per_key`), from a sample: the first `SAMPLE_ROWS` rows a full
//!   scan returns (rows are spread over partitions by a hash of their
//!   primary key, so these are no particular key range). A table of at most
//!   `SAMPLE_ROWS` rows is read whole and its figures are exact; a whole
//!   unique key is one row per key by construction.
//!
//! When they are made: by ANALYZE TABLE; when EXPLAIN needs a table that has
//! none (or only ones of an older table version); and when EXPLAIN finds
//! that more rows changed through this SQL node since the last analysis
//! than a tenth of the table (InnoDB's automatic recalculation threshold).
//! Rows other SQL nodes write are seen at the next analysis.

use crate::engine::catalog::SqlTable;
use crate::engine::expr::value::{encode_group_key, Coll};
use crate::engine::{error_map, exec, lock_statements, table_stats, Engine, Parsed};
use crate::types::{QueryOutput, Session, SqlError};
use norr_signals::{ColumnId, IndexId, ScanSpec, TableId};
use sqlparser::ast::Statement;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Rows read to estimate rows per key.
pub const SAMPLE_ROWS: u64 = 4096;

/// One table's statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct TableEstimate {
    pub id: TableId,
    pub version: u32,
    /// Rows now, as far as this SQL node knows.
    pub rows: u64,
    /// Rows at the last analysis.
    analyzed_rows: u64,
    /// Rows inserted or deleted through this SQL node since.
    changed: u64,
    /// Rows per key of each index, by prefix length - 1; at least 1.
    per_key: HashMap<IndexId, Vec<f64>>,
}

impl TableEstimate {
    /// Rows per key of the first `prefix` columns of `index` (None: no
    /// such index or prefix).
    pub fn rows_per_key(&self, index: IndexId, prefix: usize) -> Option<f64> {
        prefix.checked_sub(1).and_then(|i| self.per_key.get(&index)?.get(i).copied())
    }

    /// Expected rows for one key of the first `prefix` columns of `index`
    /// (never more than the table's rows).
    pub fn rows_for_key(&self, index: IndexId, prefix: usize) -> Option<f64> {
        Some(self.rows_per_key(index, prefix)?.min(self.rows as f64))
    }

    /// Past InnoDB's recalculation threshold: a tenth of the table changed.
    fn stale(&self) -> bool {
        self.changed > self.analyzed_rows / 10 + 16
    }
}

/// The statistics this SQL node keeps, by (database, table) as the
/// statements name them (DML reports by name; the estimate carries the
/// table id and version it was made for).
#[derive(Debug, Default)]
pub struct IndexStats {
    tables: Mutex<HashMap<(String, String), Arc<TableEstimate>>>,
}

fn key_of(db: &str, table: &str) -> (String, String) {
    (db.to_lowercase(), table.to_lowercase())
}

impl IndexStats {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Arc<TableEstimate>>> {
        self.tables.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether any table has statistics (DML skips `note_write` if not).
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// `inserted` rows were added to and `deleted` taken from `db.table`
    /// (a statement of this SQL node that succeeded).
    pub fn note_write(&self, db: &str, table: &str, inserted: u64, deleted: u64) {
        let mut m = self.lock();
        if let Some(t) = m.get_mut(&key_of(db, table)) {
            let t = Arc::make_mut(t);
            t.rows = t.rows.saturating_add(inserted).saturating_sub(deleted);
            t.changed = t.changed.saturating_add(inserted).saturating_add(deleted);
        }
    }

    /// The kept figures of `t` if they are of its current version and not
    /// stale.
    pub fn current(&self, t: &SqlTable) -> Option<Arc<TableEstimate>> {
        let m = self.lock();
        let e = m.get(&key_of(&t.db, &t.name))?;
        (e.id == t.def.id && e.version == t.def.version && !e.stale()).then(|| e.clone())
    }

    fn keep(&self, t: &SqlTable, e: TableEstimate) -> Arc<TableEstimate> {
        let e = Arc::new(e);
        self.lock().insert(key_of(&t.db, &t.name), e.clone());
        e
    }
}

/// After a statement that succeeded: move the row count of the table it
/// wrote by the rows it reports (INSERT, REPLACE and LOAD DATA add them,
/// DELETE takes them away; a REPLACE or ON DUPLICATE KEY UPDATE that
/// replaced rows counts them as added, an estimate the next analysis
/// corrects). Multi-table statements are left to that analysis.
pub fn note_statement(e: &Engine, s: &Session, p: &Parsed, out: &QueryOutput) {
    let QueryOutput::Ok { affected_rows, .. } = out else { return };
    if *affected_rows == 0 || e.index_stats().is_empty() {
        return;
    }
    let deletes = matches!(p, Parsed::Sql(st) if matches!(st.as_ref(), Statement::Delete(_)));
    let adds =
        matches!(p, Parsed::LoadData(_)) || matches!(p, Parsed::Sql(st) if matches!(st.as_ref(), Statement::Insert(_)));
    if !deletes && !adds {
        return;
    }
    let written: Vec<_> = lock_statements::table_accesses(s, p)
        .into_iter()
        .filter(|a| a.mode == crate::engine::table_locks::Mode::Write)
        .collect();
    if let [a] = written.as_slice() {
        let (ins, del) = if deletes { (0, *affected_rows) } else { (*affected_rows, 0) };
        e.index_stats().note_write(&a.db, &a.table, ins, del);
    }
}

/// The current figures of `t`: the kept ones, else a fresh analysis.
pub async fn estimate(e: &Engine, t: &SqlTable) -> Result<Arc<TableEstimate>, SqlError> {
    match e.index_stats().current(t) {
        Some(est) => Ok(est),
        None => analyze(e, t).await,
    }
}

/// Analyze `t` now and keep the result (ANALYZE TABLE).
pub async fn analyze(e: &Engine, t: &SqlTable) -> Result<Arc<TableEstimate>, SqlError> {
    let est = measure(e, t).await?;
    Ok(e.index_stats().keep(t, est))
}

/// Columns the sample reads: every indexed column, ascending.
fn sample_columns(t: &SqlTable) -> Vec<ColumnId> {
    let mut cols: Vec<ColumnId> = t.def.indexes.iter().flat_map(|ix| ix.columns.iter().copied()).collect();
    cols.extend(t.def.primary_key.first().copied());
    cols.sort_unstable();
    cols.dedup();
    cols
}

async fn measure(e: &Engine, t: &SqlTable) -> Result<TableEstimate, SqlError> {
    let err = |x| error_map::from_client(x, &exec::table_err(&t.def));
    let cols = sample_columns(t);
    let mut spec = ScanSpec::full(t.def.id);
    spec.table_version = t.def.version;
    spec.ordered = false;
    spec.projection = cols.clone();
    spec.limit = Some(SAMPLE_ROWS);
    spec.batch_rows = SAMPLE_ROWS.min(norr_signals::MAX_SCAN_BATCH_ROWS as u64) as u32;
    let sample = e.client().scan(spec).await.map_err(err)?.collect_all().await.map_err(err)?;
    let rows =
        if (sample.len() as u64) < SAMPLE_ROWS { sample.len() as u64 } else { table_stats::count_rows(e, t).await? };
    let at: HashMap<ColumnId, usize> = cols.iter().enumerate().map(|(i, c)| (*c, i)).collect();
    let per_key = t
        .def
        .indexes
        .iter()
        .map(|ix| {
            let positions: Vec<usize> = ix.columns.iter().filter_map(|c| at.get(c).copied()).collect();
            (ix.id, rows_per_prefix(&sample, rows, &positions, ix.unique))
        })
        .collect();
    Ok(TableEstimate { id: t.def.id, version: t.def.version, rows, analyzed_rows: rows, changed: 0, per_key })
}

/// Rows per distinct value of each prefix of `positions`, from `sample`
/// of a table of `rows` rows (a whole unique key: 1). The distinct values
/// of the table are estimated from the sample's with Haas and Stokes'
/// "Duj1" estimator, n·d / (n − f1 + f1·n/N) for n sampled rows with d
/// distinct values of which f1 were seen once: d when the sample is the
/// whole table or every value repeats in it, scaled up toward N·d/n as more
/// values are seen only once (a near-unique column).
fn rows_per_prefix(sample: &[Vec<norr_signals::Value>], rows: u64, positions: &[usize], unique: bool) -> Vec<f64> {
    let colls = vec![Coll::Bin; positions.len()];
    let n = sample.len() as f64;
    let total = (rows as f64).max(n);
    (1..=positions.len())
        .map(|k| {
            if unique && k == positions.len() {
                return 1.0;
            }
            let mut seen: HashMap<Vec<u8>, u32> = HashMap::new();
            for r in sample {
                let vals: Vec<norr_signals::Value> =
                    positions[..k].iter().map(|p| r.get(*p).cloned().unwrap_or(norr_signals::Value::Null)).collect();
                let mut key = Vec::new();
                encode_group_key(&vals, &colls[..k], &mut key);
                *seen.entry(key).or_insert(0) += 1;
            }
            if seen.is_empty() {
                return 1.0;
            }
            let d = seen.len() as f64;
            let f1 = seen.values().filter(|c| **c == 1).count() as f64;
            let distinct = (n * d / (n - f1 + f1 * n / total)).clamp(d, total);
            (total / distinct).max(1.0)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use norr_signals::Value;

    #[test]
    fn rows_per_prefix_counts_distinct_prefixes() {
        // (a, b): a has 2 values, (a, b) 4 over 8 rows.
        let sample: Vec<Vec<Value>> =
            (0..8).map(|i| vec![Value::Int(i % 2), Value::Int(i % 4), Value::Int(i)]).collect();
        assert_eq!(rows_per_prefix(&sample, 8, &[0, 1], false), vec![4.0, 2.0]);
        assert_eq!(rows_per_prefix(&sample, 8, &[0, 1, 2], true), vec![4.0, 2.0, 1.0]);
        assert_eq!(rows_per_prefix(&[], 0, &[0], false), vec![1.0]);
    }

    #[test]
    fn a_sample_scales_to_the_table() {
        // Every value repeats in the sample: all of them were seen.
        let few: Vec<Vec<Value>> = (0..1000).map(|i| vec![Value::Int(i % 10)]).collect();
        assert_eq!(rows_per_prefix(&few, 100_000, &[0], false), vec![10_000.0]);
        // Every value seen once: a near-unique column of the whole table.
        let unique: Vec<Vec<Value>> = (0..1000).map(|i| vec![Value::Int(i)]).collect();
        let got = rows_per_prefix(&unique, 100_000, &[0], false)[0];
        assert!((1.0..1.01).contains(&got), "{got}");
    }

    #[test]
    fn writes_move_the_count_and_make_it_stale() {
        let mut e = TableEstimate {
            id: 1,
            version: 1,
            rows: 1000,
            analyzed_rows: 1000,
            changed: 0,
            per_key: HashMap::from([(7, vec![10.0])]),
        };
        assert_eq!(e.rows_for_key(7, 1), Some(10.0));
        assert_eq!(e.rows_for_key(7, 2), None);
        assert_eq!(e.rows_for_key(8, 1), None);
        let s = IndexStats::default();
        s.lock().insert(key_of("d", "t"), Arc::new(e.clone()));
        s.note_write("D", "T", 50, 0);
        let got = s.lock().get(&key_of("d", "t")).cloned().expect("kept");
        assert_eq!(got.rows, 1050);
        assert!(!got.stale());
        e.changed = 200;
        assert!(e.stale());
    }
}
