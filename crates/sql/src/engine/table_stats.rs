//! Per-table figures of SHOW TABLE STATUS and information_schema.TABLES
//! (Rows, Avg_row_length, Data_length). Owner: catalog engineer.
//!
//! Where the row count comes from: the data node keeps an exact row count per
//! table (`Storage::row_count`) but only reports its node-wide total
//! (`NodeStats::rows`); a per-table figure over the wire would need a new
//! field, summed over the primary replicas of every node group. Until then
//! sqld counts: a committed-read full scan that returns only the first
//! primary-key column (no locks, one small value per row, batches of
//! `MAX_SCAN_BATCH_ROWS`), so the cost is that of `SELECT COUNT(*)`. The count
//! is exact for committed data at the time of the scan (MySQL's InnoDB figure
//! is an estimate; NDB's is exact too). MySQL 8 caches these figures for
//! `information_schema_stats_expiry` seconds; NorrDB always reports current
//! ones.
//!
//! Avg_row_length is the mean bytes of column data of a sample of rows (the
//! first `SAMPLE_ROWS` a full scan returns), counted as MySQL's storage
//! requirements for the column types; Data_length is that mean times Rows.
//! A table of at most `SAMPLE_ROWS` rows is read once and both are exact.

use crate::engine::catalog::SqlTable;
use crate::engine::{error_map, exec, Engine};
use crate::types::SqlError;
use norr_signals::{ColumnType, ScanSpec, Value, MAX_SCAN_BATCH_ROWS};

/// Rows read with every column to estimate the average row length.
pub const SAMPLE_ROWS: u64 = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TableStats {
    pub rows: u64,
    pub avg_row_length: u64,
    pub data_length: u64,
}

/// Current figures of `t` (see the module comment for how they are made).
pub async fn table_stats(e: &Engine, t: &SqlTable) -> Result<TableStats, SqlError> {
    let client = e.client();
    let err = |x| error_map::from_client(x, &exec::table_err(&t.def));
    let mut sample = ScanSpec::full(t.def.id);
    sample.table_version = t.def.version;
    sample.ordered = false;
    sample.limit = Some(SAMPLE_ROWS);
    sample.batch_rows = SAMPLE_ROWS as u32;
    let rows = client.scan(sample).await.map_err(err)?.collect_all().await.map_err(err)?;
    let sample_rows = rows.len() as u64;
    let sample_bytes: u64 = rows.iter().map(|r| row_bytes(&t.def.columns, r)).sum();
    let avg_row_length = sample_bytes.checked_div(sample_rows).unwrap_or(0);
    if sample_rows < SAMPLE_ROWS {
        return Ok(TableStats { rows: sample_rows, avg_row_length, data_length: sample_bytes });
    }
    let n = count_rows(e, t).await?;
    Ok(TableStats { rows: n, avg_row_length, data_length: avg_row_length.saturating_mul(n) })
}

/// `t`'s committed rows, counted by a scan that returns only the first
/// primary-key column of each (see the module comment).
pub async fn count_rows(e: &Engine, t: &SqlTable) -> Result<u64, SqlError> {
    let client = e.client();
    let err = |x| error_map::from_client(x, &exec::table_err(&t.def));
    let mut count = ScanSpec::full(t.def.id);
    count.table_version = t.def.version;
    count.ordered = false;
    count.batch_rows = MAX_SCAN_BATCH_ROWS;
    count.projection = t.def.primary_key.first().copied().into_iter().collect();
    let mut scan = client.scan(count).await.map_err(err)?;
    let mut n = 0u64;
    while let Some(batch) = scan.next_batch().await.map_err(err)? {
        n += batch.len() as u64;
    }
    Ok(n)
}

/// The Rows, Avg_row_length and Data_length cells of a table's row in SHOW
/// TABLE STATUS / information_schema.TABLES: NULL when the table cannot be
/// read (dropped or altered since it was listed), as MySQL shows NULL for
/// figures it does not have.
pub async fn stats_cells(e: &Engine, t: &SqlTable) -> [Value; 3] {
    match table_stats(e, t).await {
        Ok(s) => [Value::UInt(s.rows), Value::UInt(s.avg_row_length), Value::UInt(s.data_length)],
        Err(_) => [Value::Null, Value::Null, Value::Null],
    }
}

/// The cells from Engine to Comment of a table's row, which SHOW TABLE STATUS
/// and information_schema.TABLES share (the one puts the name before them,
/// the other catalog, schema, name and type). Without `with_stats` the
/// figures that cost a scan or a round trip are left 0 and NULL.
pub async fn status_cells(e: &Engine, t: &SqlTable, with_stats: bool) -> Vec<Value> {
    let ([rows_n, avg, data], auto_inc) = if with_stats {
        (stats_cells(e, t).await, auto_increment_cell(e, t).await)
    } else {
        ([Value::UInt(0), Value::UInt(0), Value::UInt(0)], Value::Null)
    };
    let s = |v: &str| Value::str(v);
    vec![
        s("ndbcluster"),
        Value::UInt(10),
        s("Dynamic"),
        rows_n,
        avg,
        data,
        Value::UInt(0),
        Value::UInt(0),
        Value::UInt(0),
        auto_inc,
        Value::Null,
        Value::Null,
        Value::Null,
        s(&t.meta.collation),
        Value::Null,
        s(if t.meta.partition.is_some() { "partitioned" } else { "" }),
        s(&t.meta.comment),
    ]
}

/// The Auto_increment cell: the value the next insert would get (the data
/// node's counter, read without reserving), or NULL for a table without an
/// AUTO_INCREMENT column (the hidden primary key's counter is not shown, as
/// in MySQL) or one that cannot be read.
pub async fn auto_increment_cell(e: &Engine, t: &SqlTable) -> Value {
    if !t.columns_visible().any(|(_, c, _)| c.auto_increment) {
        return Value::Null;
    }
    // This SQL node's kept range comes first: DICT's counter is past it.
    if let Some(next) = e.auto_inc_cache().peek(t.def.id, t.def.version) {
        return Value::UInt(next);
    }
    e.client().next_auto_inc(t.def.id, 0).await.map(Value::UInt).unwrap_or(Value::Null)
}

/// Bytes of a row's column data (the hidden primary key included, as MySQL
/// counts InnoDB's hidden row id).
fn row_bytes(columns: &[norr_signals::ColumnDef], row: &[Value]) -> u64 {
    columns.iter().zip(row).map(|(c, v)| value_bytes(&c.ty, v)).sum()
}

/// MySQL's storage requirement of a value of a column type (fractional
/// seconds left out): fixed widths for numbers and dates, the bytes plus a
/// length prefix for strings. NULL takes no data bytes.
fn value_bytes(ty: &ColumnType, v: &Value) -> u64 {
    if v.is_null() {
        return 0;
    }
    match ty {
        ColumnType::TinyInt { .. } => 1,
        ColumnType::SmallInt { .. } => 2,
        ColumnType::MediumInt { .. } | ColumnType::Date | ColumnType::Time => 3,
        ColumnType::Int { .. } | ColumnType::Float | ColumnType::Timestamp => 4,
        ColumnType::DateTime => 5,
        ColumnType::BigInt { .. } | ColumnType::Double => 8,
        // 4 bytes per 9 digits.
        ColumnType::Decimal { precision, .. } => (*precision as u64 * 4).div_ceil(9),
        ColumnType::Char { .. }
        | ColumnType::Varchar { .. }
        | ColumnType::Binary { .. }
        | ColumnType::Varbinary { .. }
        | ColumnType::Text { .. }
        | ColumnType::Blob => {
            let len = v.as_bytes().map_or(0, |b| b.len() as u64);
            len + if len < 256 { 1 } else { 2 }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use norr_signals::{Collation, ColumnDef};

    #[test]
    fn row_bytes_counts_types_and_skips_nulls() {
        let cols = vec![
            ColumnDef::new("a", ColumnType::Int { unsigned: false }),
            ColumnDef::new("b", ColumnType::Varchar { len: 10, collation: Collation::CaseInsensitive }),
            ColumnDef::new("c", ColumnType::BigInt { unsigned: true }),
            ColumnDef::new("d", ColumnType::Decimal { precision: 10, scale: 2 }),
        ];
        let row = vec![Value::Int(1), Value::str("héllo"), Value::Null, Value::Null];
        assert_eq!(row_bytes(&cols, &row), 4 + 6 + 1);
        assert_eq!(value_bytes(&cols[3].ty, &Value::Int(0)), 5);
        assert_eq!(value_bytes(&ColumnType::Blob, &Value::Bytes(vec![0; 300])), 302);
    }
}
