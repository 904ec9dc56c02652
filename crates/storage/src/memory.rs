//! Data-memory accounting.
//!
//! Every page (fixed and var), every large var allocation, the hash index
//! tables and the ordered / unique index entries are charged against the node's
//! `data_memory_bytes`. Pages and hash tables are charged at their real
//! allocation size; B-tree entries at an estimate (`ORDERED_ENTRY_OVERHEAD` plus
//! the key bytes), since `BTreeMap` does not expose its node allocations.
//! An operation computes an upper bound of what it will add before it changes
//! anything, so running out of memory (`TableFull`) leaves storage unchanged.

/// Size of a fixed-size row page.
pub const FIXED_PAGE_BYTES: usize = 32 * 1024;
/// Size of a var page.
pub const VAR_PAGE_BYTES: usize = 32 * 1024;
/// Charged per large var allocation on top of its length (allocator header).
pub const LARGE_OVERHEAD: usize = 16;
/// Charged per ordered-index or unique-map entry: a B-tree leaf holds 11
/// entries of 32-byte key + 4..8-byte value (~410-450 bytes) and is ~70% full
/// under random inserts, plus internal nodes: about 60 bytes per entry.
pub const ORDERED_ENTRY_OVERHEAD: u64 = 64;

/// Memory use of a data node's storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryStats {
    pub limit_bytes: u64,
    pub used_bytes: u64,
    pub rows: u64,
}

/// Cost charged for one ordered-index or unique-map entry with this key: keys
/// longer than `INLINE_KEY_BYTES` add their own heap allocation.
pub fn entry_cost(key_len: usize) -> u64 {
    if key_len <= crate::ordered_index::INLINE_KEY_BYTES {
        ORDERED_ENTRY_OVERHEAD
    } else {
        ORDERED_ENTRY_OVERHEAD + key_len as u64 + 16
    }
}

/// Measure the per-row memory overhead for a (BIGINT pk, BIGINT, CHAR(20))
/// table: bytes charged beyond the column data (8 + 8 + 20 bytes), averaged over
/// `rows` inserted rows, with the `PRIMARY` ordered index the dictionary gives
/// every table when `pk_order` (about 27 bytes at 100k rows, 5-6 of them the
/// ordered index) or without it (about 21). The target is <= 32.
pub fn measure_row_overhead(rows: i64, pk_order: bool) -> f64 {
    use norr_signals::schema::{ColumnDef, PartitionScheme};
    use norr_signals::value::{Collation, ColumnType, Value};
    let mut s = crate::Storage::new(1 << 30);
    let def = norr_signals::TableDef {
        id: 1,
        version: 1,
        name: "overhead".into(),
        columns: vec![
            ColumnDef::new("id", ColumnType::BigInt { unsigned: false }).not_null(),
            ColumnDef::new("v", ColumnType::BigInt { unsigned: false }),
            ColumnDef::new("c", ColumnType::Char { len: 20, collation: Collation::CaseInsensitive }),
        ],
        primary_key: vec![0],
        partitioning: PartitionScheme::Key { columns: vec![] },
        partitions: 1,
        indexes: if pk_order {
            vec![norr_signals::IndexDef {
                id: 1,
                name: "PRIMARY".into(),
                columns: vec![0],
                unique: false,
                kind: norr_signals::IndexKind::Ordered,
            }]
        } else {
            vec![]
        },
        extra: vec![],
        options: Default::default(),
    };
    s.create_table(&def).expect("create table");
    let mut data = 0u64;
    for i in 0..rows {
        let row = vec![
            Value::Int(i),
            Value::Int(i.wrapping_mul(7)),
            Value::str(&format!("{:020}", i % 100_000_000_000_000_000)),
        ];
        data += s.data_bytes_of_row(1, &row) as u64;
        s.insert(1, 0, row).expect("insert");
    }
    let m = s.memory();
    (m.used_bytes - data) as f64 / rows.max(1) as f64
}
