//! Partial local checkpoints (NDB 7.6's partial LCP, seed 003).
//!
//! A partition's rows are divided into [`PARTS`] parts (by row position, in
//! storage). A checkpoint of a partition writes, into one data file:
//! the tombstones (keys of rows deleted since the previous checkpoint, each
//! tagged with the part its row was in), then every row of the parts in a
//! rotating *window* of full parts, and the rows of the other parts changed
//! since the previous checkpoint began. Then a small control file says the
//! checkpoint is complete, and which earlier checkpoints a restore still
//! needs (the *chain*): for each part, its last full image and every later
//! checkpoint's changes.
//!
//! * [`data`]: the data file writer and reader.
//! * [`control`]: the control file.
//! * [`plan`]: choosing the next checkpoint's window, and the restore
//!   planner (which files in which order; which files are obsolete).

pub mod control;
pub mod data;
pub mod plan;
#[cfg(test)]
mod tests;

pub use control::{ChainLink, LcpControl};
pub use data::{LcpDataReader, LcpDataSummary, LcpDataWriter, LcpEntry};
pub use plan::{next_lcp, obsolete_after, plan_restore, NextLcp, RestorePlan, RestoreStep};

use norr_signals::{PartitionId, TableId};
use serde::{Deserialize, Serialize};

/// Parts per partition.
pub const PARTS: u16 = 2048;
/// LCP data page size.
pub const LCP_PAGE_BYTES: u32 = 32 * 1024;
/// Format version of LCP data pages and control files.
pub const LCP_VERSION: u16 = 1;
/// Default bound on the chain of checkpoints a restore reads: every part is
/// written fully at least once in this many checkpoints.
pub const DEFAULT_MAX_CHAIN: usize = 8;

pub type LcpId = u64;

/// Which partition and checkpoint a file belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct LcpIdent {
    pub table: TableId,
    pub partition: PartitionId,
    pub lcp_id: LcpId,
}

impl LcpIdent {
    pub fn dir(&self) -> String {
        partition_dir(self.table, self.partition)
    }
    pub fn data_path(&self) -> String {
        format!("{}/{}.data", self.dir(), self.lcp_id)
    }
    pub fn control_path(&self) -> String {
        format!("{}/{}.ctl", self.dir(), self.lcp_id)
    }
}

/// Directory of a partition's checkpoint files.
pub fn partition_dir(table: TableId, partition: PartitionId) -> String {
    format!("{}/{partition}", table_dir(table))
}

/// Where every checkpoint file of the node lives (`lcp/<table>/<partition>/`).
pub const LCP_DIR: &str = "lcp";

/// A table's checkpoint directory: one directory per partition in it.
pub fn table_dir(table: TableId) -> String {
    format!("{LCP_DIR}/{table}")
}

/// A window of parts `first, first+1, ..., first+count-1` (mod 2048).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartWindow {
    pub first: u16,
    pub count: u16,
}

impl PartWindow {
    pub const ALL: PartWindow = PartWindow { first: 0, count: PARTS };

    pub fn new(first: u16, count: u16) -> PartWindow {
        assert!(first < PARTS && (1..=PARTS).contains(&count), "part window {first}+{count}");
        PartWindow { first, count }
    }

    pub fn contains(&self, part: u16) -> bool {
        debug_assert!(part < PARTS);
        (part + PARTS - self.first) % PARTS < self.count
    }

    /// The part after the window's last.
    pub fn end(&self) -> u16 {
        ((self.first as u32 + self.count as u32) % PARTS as u32) as u16
    }

    pub fn is_valid(&self) -> bool {
        self.first < PARTS && (1..=PARTS).contains(&self.count)
    }

    pub fn mask(&self) -> PartMask {
        let mut m = PartMask::EMPTY;
        for i in 0..self.count {
            m.insert(((self.first as u32 + i as u32) % PARTS as u32) as u16);
        }
        m
    }
}

/// Any set of parts (2048 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartMask([u64; 32]);

impl PartMask {
    pub const EMPTY: PartMask = PartMask([0; 32]);
    pub const ALL: PartMask = PartMask([u64::MAX; 32]);

    pub fn contains(&self, part: u16) -> bool {
        self.0[(part / 64) as usize] & (1 << (part % 64)) != 0
    }
    pub fn insert(&mut self, part: u16) {
        self.0[(part / 64) as usize] |= 1 << (part % 64);
    }
    pub fn len(&self) -> u32 {
        self.0.iter().map(|w| w.count_ones()).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&w| w == 0)
    }
}
