//! Errors of the durability formats. Every error about bytes read from disk
//! names the file (its path relative to the data directory) and the byte
//! offset where the problem is, so an operator can find it.

/// Bytes from a file were not what the format says: bad magic, bad
/// checksum, unknown version, cut short, or inconsistent with other files.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path} at offset {offset}: {what}")]
pub struct FormatError {
    pub path: String,
    pub offset: u64,
    pub what: String,
}

impl FormatError {
    pub fn new(path: &str, offset: u64, what: impl Into<String>) -> FormatError {
        FormatError { path: path.to_string(), offset, what: what.into() }
    }
}
