//! norr-durability: the on-disk formats of a data node and the pure state
//! machines that write and read them. No blocks, no IO, no clock: the
//! callers (LQH, the CKPT block, DICT, the restart code) own the IO through
//! the FS block and feed bytes in and out. Every file kind is drawn byte by
//! byte in FORMATS.md beside this crate.
//!
//! * [`layout`]: data directory paths and the VERSION file.
//! * [`frame`]: the two checksummed containers (sealed blobs and pages).
//! * [`redo`]: REDO log parts: writer state machine and restart reader.
//! * [`lcp`]: partial local checkpoint files, the choice of full parts and
//!   the restore planner.
//! * [`sysfile`]: the per-node system file, two copies written alternately.
//! * [`schema`]: the schema file and the crash-safe DDL log.
//! * [`crash`]: named crash points.

pub mod crash;
pub mod error;
pub mod frame;
pub mod layout;
pub mod lcp;
pub mod redo;
pub mod schema;
pub mod stream;
pub mod sysfile;

#[cfg(test)]
mod memdisk;

pub use crash::CrashPoints;
pub use error::FormatError;
