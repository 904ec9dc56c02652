//! The file system block (FS, NDB's NDBFS): the only way a block reaches the
//! disk. Blocks send `FsSignal::Req` to `BlockRef(node, block::FS, 0)` and get
//! one `Conf` or `Ref` with the same `req_id` back. The host provides the
//! block: real files under the node's data directory on IO threads in the
//! runtime, a simulated disk (slow, failing, losing unsynced writes at a
//! crash) in the simulator. Requests on one file are done in the order they
//! were sent; requests on different files may complete in any order.
//!
//! Paths are relative to the data directory, '/'-separated, without `..`,
//! empty components or a leading '/'; the host refuses others (`BadPath`).

use serde::{Deserialize, Serialize};

/// Check a request path as every FS host does: relative, '/'-separated,
/// without empty, `.` or `..` components, NUL or backslash.
pub fn check_path(path: &str) -> Result<(), String> {
    if path.is_empty() || path.starts_with('/') || path.contains('\0') || path.contains('\\') {
        return Err(format!("path {path:?} must be relative to the data directory"));
    }
    if path.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
        return Err(format!("path {path:?} has an empty, '.' or '..' component"));
    }
    Ok(())
}

/// A file the FS block opened for the node (unique among its open files).
pub type FileHandle = u32;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum FsOp {
    /// Open a file; `create`: make it if missing (and its parent directories);
    /// `truncate`: empty it. A created file's directory entry (and a
    /// truncation) is durable when the reply comes. Reply `Opened`.
    Open { path: String, create: bool, truncate: bool },
    /// Write `data` at `offset` (extending the file if needed); with `sync`
    /// the data is durable when the reply comes. Reply `Written`.
    Write { file: FileHandle, offset: u64, data: Vec<u8>, sync: bool },
    /// Read up to `len` bytes at `offset` (fewer at the end of the file).
    /// Reply `Read`.
    Read { file: FileHandle, offset: u64, len: u32 },
    /// Make every write to the file so far durable. Reply `Synced`.
    Sync { file: FileHandle },
    /// Reply `Closed`.
    Close { file: FileHandle },
    /// Remove a file or an empty directory (no error if missing), durably.
    /// Reply `Done`.
    Remove { path: String },
    /// Atomically replace `to` with `from` (and make the rename durable).
    /// Reply `Done`.
    Rename { from: String, to: String },
    /// Names of the entries of a directory (empty if missing), sorted.
    /// Reply `Listed`.
    List { dir: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum FsResult {
    Opened { file: FileHandle, size: u64 },
    Written,
    Read { data: Vec<u8> },
    Synced,
    Closed,
    Done,
    Listed { names: Vec<String> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FsErrorKind {
    NotFound,
    /// The disk is full: the write did not happen (nothing partial is visible).
    NoSpace,
    /// A read or write failed.
    Io,
    BadPath,
    BadHandle,
    /// The data directory vanished or was replaced under the node.
    DirectoryGone,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsError {
    pub kind: FsErrorKind,
    pub path: String,
    pub offset: Option<u64>,
    pub message: String,
}

impl std::fmt::Display for FsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.offset {
            Some(o) => write!(f, "{:?} on {} at offset {o}: {}", self.kind, self.path, self.message),
            None => write!(f, "{:?} on {}: {}", self.kind, self.path, self.message),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum FsSignal {
    /// Block -> FS.
    Req {
        req_id: u64,
        op: FsOp,
    },
    /// FS -> the requesting block.
    Conf {
        req_id: u64,
        result: FsResult,
    },
    Ref {
        req_id: u64,
        error: FsError,
    },
}
