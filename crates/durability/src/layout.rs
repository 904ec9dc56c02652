//! The data directory of a data node (`norr datad --data-dir DIR`). Every
//! path the FS block gets is relative to it. See FORMATS.md for each kind.
//!
//! ```text
//! norr.lock                      lock file (flock; holds the owner's pid)
//! VERSION                        data directory format version (sealed blob)
//! sys/sysfile.A, sys/sysfile.B   system file, two copies written alternately
//! redo/part-<p>/file-<k>         REDO log part p (one per LDM), file k
//! lcp/<table>/<partition>/<id>.data   LCP data file of checkpoint id
//! lcp/<table>/<partition>/<id>.ctl    its control file (written last)
//! schema/schema.dat              schema file (all table definitions)
//! schema/schema.tmp              the next schema file, before its rename
//! ```

use crate::error::FormatError;
use crate::frame::{open_blob, seal, Kind};

pub const LOCK_FILE: &str = "norr.lock";
pub const VERSION_FILE: &str = "VERSION";
/// Format version of the data directory as a whole. Bump it when a file
/// kind changes incompatibly; a directory of a newer version is refused.
pub const DATA_DIR_VERSION: u16 = 1;

/// What the VERSION file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionInfo {
    pub format: u16,
    pub node_id: u16,
    /// The NorrDB release that created the directory (for the operator).
    pub created_by: String,
}

/// The VERSION file: a sealed blob (kind Version, version = the format
/// version) whose body is one line of text, readable with `strings`:
/// `norrdb data directory format=<v> node=<id> created-by=<release>\n`.
pub fn encode_version(node_id: u16, created_by: &str) -> Vec<u8> {
    let body = format!("norrdb data directory format={DATA_DIR_VERSION} node={node_id} created-by={created_by}\n");
    let mut out = Vec::new();
    seal(Kind::Version, DATA_DIR_VERSION, body.as_bytes(), &mut out);
    out
}

/// Check a VERSION file. A newer format is refused with a message telling
/// the operator what to do.
pub fn decode_version(bytes: &[u8]) -> Result<VersionInfo, FormatError> {
    let err = |what: String| FormatError::new(VERSION_FILE, 0, what);
    if bytes.len() >= 8 && bytes[0..4] == crate::frame::MAGIC {
        let v = u16::from_le_bytes([bytes[6], bytes[7]]);
        if v > DATA_DIR_VERSION {
            // Refused before anything else of the newer format is trusted.
            return Err(err(format!(
                "the data directory has format version {v}, newer than this NorrDB ({}) reads (format {DATA_DIR_VERSION}): run the NorrDB release that wrote it, or start this node with an empty data directory",
                env!("CARGO_PKG_VERSION")
            )));
        }
    }
    let blob = open_blob(bytes, Kind::Version, DATA_DIR_VERSION, VERSION_FILE, 0)?;
    let text = std::str::from_utf8(blob.body).map_err(|_| err("VERSION body is not text".into()))?;
    let mut info = VersionInfo { format: blob.version, node_id: 0, created_by: String::new() };
    for word in text.split_whitespace() {
        if let Some(v) = word.strip_prefix("node=") {
            info.node_id = v.parse().map_err(|_| err(format!("bad node id {v:?} in VERSION")))?;
        } else if let Some(v) = word.strip_prefix("created-by=") {
            info.created_by = v.to_string();
        }
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_round_trip_and_newer_refused() {
        let b = encode_version(3, "0.1.0");
        assert_eq!(decode_version(&b).unwrap(), VersionInfo { format: 1, node_id: 3, created_by: "0.1.0".into() });
        let mut newer = Vec::new();
        seal(Kind::Version, DATA_DIR_VERSION + 1, b"norrdb data directory format=2\n", &mut newer);
        let e = decode_version(&newer).unwrap_err();
        assert!(e.what.contains("newer than this NorrDB") && e.path == "VERSION", "{e}");
        assert!(decode_version(&b[..10]).is_err());
        assert!(decode_version(b"hello, world").is_err());
    }
}
