//! Schema objects: tables, columns, indexes and partitioning, as the dictionary
//! (DICT) stores them and as clients see them.

use crate::value::{ColumnType, Value};
use serde::{Deserialize, Serialize};

pub type TableId = u32;
pub type IndexId = u32;
pub type ColumnId = u16;
pub type PartitionId = u32;

/// Most partitions a table may have.
pub const MAX_PARTITIONS: u32 = 1024;
/// Most columns a table may have.
pub const MAX_COLUMNS: usize = 512;
/// Most columns in a primary key or an index.
pub const MAX_KEY_COLUMNS: usize = 32;
/// Longest table, column or index name in bytes.
pub const MAX_NAME_LEN: usize = 64;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ColumnDef {
    pub name: String,
    pub ty: ColumnType,
    pub nullable: bool,
    /// Default used when an insert does not give the column (None: NULL if
    /// nullable, else the insert fails with `ErrorCode::NoDefault`).
    pub default: Option<Value>,
    /// AUTO_INCREMENT column (at most one per table; values are handed out by
    /// the dictionary through `DictSignal::NextAutoIncReq`).
    pub auto_increment: bool,
}

impl ColumnDef {
    pub fn new(name: &str, ty: ColumnType) -> Self {
        ColumnDef { name: name.to_string(), ty, nullable: true, default: None, auto_increment: false }
    }
    pub fn not_null(mut self) -> Self {
        self.nullable = false;
        self
    }
    pub fn default_value(mut self, v: Value) -> Self {
        self.default = Some(v);
        self
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum IndexKind {
    /// Ordered (T-tree/B-tree like) index; supports range scans. Unique or not.
    Ordered,
    /// Unique hash index: equality lookups only.
    UniqueHash,
}

/// Name of the ordered index on the primary key the dictionary gives every
/// table (NDB's hidden `PRIMARY` ordered index). SQL shows the primary key as
/// `PRIMARY` already and does not list this index separately.
pub const PK_ORDERED_INDEX: &str = "PRIMARY";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexDef {
    /// Assigned by the dictionary on create; ignored in a create request.
    pub id: IndexId,
    pub name: String,
    /// Indexed columns, by column id, in key order.
    pub columns: Vec<ColumnId>,
    pub unique: bool,
    pub kind: IndexKind,
}

/// How rows map to partitions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PartitionScheme {
    /// The node hashes the values of these columns (a subset of the primary
    /// key; empty means the whole primary key) with `keycode::partition_hash`.
    Key { columns: Vec<ColumnId> },
    /// The client computes the partition of every row (SQL RANGE / LIST / HASH(expr)
    /// partitioning, as NDB's user-defined partitioning): every keyed operation
    /// must carry `partition`, scans may be limited to a set of partitions.
    User,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableDef {
    /// Assigned by the dictionary on create; ignored in a create request.
    pub id: TableId,
    /// Bumped by every schema change; operations carry the version they were
    /// planned against, a mismatch gets `ErrorCode::SchemaVersionMismatch`.
    pub version: u32,
    /// Fully qualified name, "database/table" (SQL) or any name (native API).
    pub name: String,
    pub columns: Vec<ColumnDef>,
    /// Primary key column ids, in key order. Never empty.
    pub primary_key: Vec<ColumnId>,
    pub partitioning: PartitionScheme,
    pub partitions: u32,
    pub indexes: Vec<IndexDef>,
    /// Opaque metadata a client stores with the table (the SQL layer keeps the
    /// original CREATE TABLE details it needs for SHOW CREATE TABLE here).
    pub extra: Vec<u8>,
    /// Distribution options (read-backup, fully replicated); see `dist`.
    pub options: crate::dist::TableOptions,
}

impl TableDef {
    /// A node restart from local files may keep the rows it restored of
    /// table `restored` (and have only the rows changed since copied) when
    /// the cluster's definition of it is `self`: the very same definition
    /// (id, version and every detail: a table dropped, re-created or
    /// altered while the node was down differs), and no unique index other
    /// than on the primary key. Why the last: until the copy ends, the
    /// restored rows include rows deleted meanwhile in the cluster, whose
    /// unique values a newer row may hold; storing that row here would be
    /// refused. Such tables are copied in full into an empty table.
    pub fn keeps_restored_rows_of(&self, restored: &TableDef) -> bool {
        self == restored && !self.indexes.iter().any(|i| i.unique && i.columns != self.primary_key)
    }

    pub fn column_id(&self, name: &str) -> Option<ColumnId> {
        self.columns.iter().position(|c| c.name.eq_ignore_ascii_case(name)).map(|i| i as ColumnId)
    }

    pub fn column(&self, id: ColumnId) -> Option<&ColumnDef> {
        self.columns.get(id as usize)
    }

    pub fn index(&self, id: IndexId) -> Option<&IndexDef> {
        self.indexes.iter().find(|i| i.id == id)
    }

    pub fn index_by_name(&self, name: &str) -> Option<&IndexDef> {
        self.indexes.iter().find(|i| i.name.eq_ignore_ascii_case(name))
    }

    /// Column ids the node hashes to choose a partition (Key scheme).
    pub fn partition_key_columns(&self) -> &[ColumnId] {
        match &self.partitioning {
            PartitionScheme::Key { columns } if !columns.is_empty() => columns,
            _ => &self.primary_key,
        }
    }
}
