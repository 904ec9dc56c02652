//! The storage LQH runs on: committed rows and indexes (`norr-storage`). LQH
//! keeps uncommitted images itself and applies them at commit.

pub use norr_storage::{MemoryStats, RowId, ScanBatch, ScanCursor, ScanStep, Storage};
