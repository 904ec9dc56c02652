//! The system file of a node: what a restart must know before anything
//! else (NDB's sysfile). Two copies, `sys/sysfile.A` and `sys/sysfile.B`,
//! each one sealed blob (kind SysFile) with a postcard body. A write goes to
//! the copy that does not hold the newest valid contents, so a torn write
//! leaves the other intact; on load the valid copy with the highest
//! `generation` wins.

use crate::crash::{points, CrashPoints};
use crate::crash_point;
use crate::error::FormatError;
use crate::frame::{open_blob, seal, Kind};
use norr_signals::ckpt::Gci;
use norr_signals::NodeId;
use serde::{Deserialize, Serialize};

pub const SYSFILE_VERSION: u16 = 1;
pub const PATHS: [&str; 2] = ["sys/sysfile.A", "sys/sysfile.B"];

/// A data node's restart state as this node last knew it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeRestartState {
    /// Holds a complete, restorable copy of its partitions up to `last_gci`.
    Started,
    /// Was being restarted (copying from a live replica): its local files
    /// are not a consistent copy; a restart must copy again.
    Restarting,
    /// Never started, or dropped from the cluster.
    Absent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub node: NodeId,
    pub state: NodeRestartState,
    /// Newest GCI the node's local files can be restored to.
    pub last_gci: Gci,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SysFile {
    /// Bumped by every write; the newest valid copy wins.
    pub generation: u64,
    pub node_id: NodeId,
    /// The cluster's last complete GCI: a restart recovers to it.
    pub last_complete_gci: Gci,
    /// Newest local checkpoint round completed by this node.
    pub last_lcp_id: u64,
    /// Per data node of the cluster, for node restarts (sorted by node).
    pub nodes: Vec<NodeInfo>,
    /// The node stopped cleanly (everything flushed) at its last stop.
    pub clean_shutdown: bool,
}

impl SysFile {
    pub fn new(node_id: NodeId) -> SysFile {
        SysFile {
            generation: 0,
            node_id,
            last_complete_gci: 0,
            last_lcp_id: 0,
            nodes: Vec::new(),
            clean_shutdown: false,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let body = postcard::to_stdvec(self).expect("sysfile encodes");
        let mut out = Vec::new();
        seal(Kind::SysFile, SYSFILE_VERSION, &body, &mut out);
        out
    }

    pub fn decode(bytes: &[u8], path: &str) -> Result<SysFile, FormatError> {
        let blob = open_blob(bytes, Kind::SysFile, SYSFILE_VERSION, path, 0)?;
        let s: SysFile = postcard::from_bytes(blob.body).map_err(|e| {
            FormatError::new(path, crate::frame::BLOB_HEADER_BYTES as u64, format!("system file body: {e}"))
        })?;
        if s.nodes.windows(2).any(|w| w[0].node >= w[1].node) {
            return Err(FormatError::new(path, 0, "system file node list not sorted"));
        }
        Ok(s)
    }
}

/// An armed crash point fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("crash point: {0}")]
pub struct Crashed(pub &'static str);

/// A write to issue: `bytes` to `path` at offset 0, truncating, synced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysWrite {
    pub path: &'static str,
    pub bytes: Vec<u8>,
}

/// Which copy to write next, and the generation.
#[derive(Debug, Clone)]
pub struct SysFileStore {
    /// Index into PATHS of the copy holding the newest valid contents.
    newest: Option<usize>,
    generation: u64,
    in_flight: bool,
    pub crash: CrashPoints,
}

/// What loading found.
#[derive(Debug)]
pub struct SysLoad {
    pub store: SysFileStore,
    /// None: neither copy exists (a new node).
    pub sysfile: Option<SysFile>,
    /// A copy that was refused (the other one was used): worth a warning.
    pub warnings: Vec<FormatError>,
}

impl SysFileStore {
    /// Load from the two copies' bytes (None: the file is missing).
    /// Both present and both invalid is an error: the node cannot know its
    /// restart point and must not guess.
    pub fn load(a: Option<&[u8]>, b: Option<&[u8]>) -> Result<SysLoad, FormatError> {
        let mut best: Option<(usize, SysFile)> = None;
        let mut warnings = Vec::new();
        let mut present = 0;
        for (i, bytes) in [a, b].into_iter().enumerate() {
            let Some(bytes) = bytes else { continue };
            present += 1;
            match SysFile::decode(bytes, PATHS[i]) {
                Ok(s) => {
                    if best.as_ref().is_none_or(|(_, b)| s.generation > b.generation) {
                        best = Some((i, s));
                    }
                }
                Err(e) => warnings.push(e),
            }
        }
        if present > 0 && best.is_none() {
            let why = warnings.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; ");
            return Err(FormatError::new(PATHS[0], 0, format!("no valid copy of the system file: {why}")));
        }
        let store = SysFileStore {
            newest: best.as_ref().map(|(i, _)| *i),
            generation: best.as_ref().map_or(0, |(_, s)| s.generation),
            in_flight: false,
            crash: CrashPoints::off(),
        };
        Ok(SysLoad { store, sysfile: best.map(|(_, s)| s), warnings })
    }

    /// The write of `sf` (its generation is set). One write at a time.
    pub fn write(&mut self, sf: &mut SysFile) -> Result<SysWrite, Crashed> {
        assert!(!self.in_flight, "system file write while one is in flight");
        if crash_point!(self.crash, points::SYSFILE_BEFORE_WRITE) {
            return Err(Crashed(points::SYSFILE_BEFORE_WRITE));
        }
        sf.generation = self.generation + 1;
        self.in_flight = true;
        let target = match self.newest {
            Some(0) => 1,
            _ => 0,
        };
        Ok(SysWrite { path: PATHS[target], bytes: sf.encode() })
    }

    /// The write (synced) completed.
    pub fn on_written(&mut self) -> Result<(), Crashed> {
        assert!(self.in_flight);
        self.in_flight = false;
        self.generation += 1;
        self.newest = Some(match self.newest {
            Some(0) => 1,
            _ => 0,
        });
        if crash_point!(self.crash, points::SYSFILE_AFTER_WRITE) {
            return Err(Crashed(points::SYSFILE_AFTER_WRITE));
        }
        Ok(())
    }

    /// The write failed: the other copy still holds the newest contents.
    pub fn on_failed(&mut self) {
        self.in_flight = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alternate_copies_newest_valid_wins() {
        let mut files: [Option<Vec<u8>>; 2] = [None, None];
        let load = SysFileStore::load(None, None).unwrap();
        assert!(load.sysfile.is_none());
        let mut store = load.store;
        let mut sf = SysFile::new(2);
        for g in 1..=5u64 {
            sf.last_complete_gci = g * 10;
            sf.nodes = vec![NodeInfo { node: 2, state: NodeRestartState::Started, last_gci: g * 10 }];
            let w = store.write(&mut sf).unwrap();
            let i = PATHS.iter().position(|p| *p == w.path).unwrap();
            // Alternates: never overwrite the newest copy.
            assert_eq!(i, (g as usize + 1) % 2);
            files[i] = Some(w.bytes);
            store.on_written().unwrap();
            let l = SysFileStore::load(files[0].as_deref(), files[1].as_deref()).unwrap();
            assert_eq!(l.sysfile.unwrap().last_complete_gci, g * 10);
        }
        // A torn write of the next copy: the other (newest valid) wins.
        let w = store.write(&mut sf).unwrap();
        let i = PATHS.iter().position(|p| *p == w.path).unwrap();
        files[i] = Some(w.bytes[..w.bytes.len() / 2].to_vec());
        let l = SysFileStore::load(files[0].as_deref(), files[1].as_deref()).unwrap();
        assert_eq!(l.sysfile.unwrap().last_complete_gci, 50);
        assert_eq!(l.warnings.len(), 1);
        assert!(l.warnings[0].path.starts_with("sys/sysfile."));
        // The next write after that load goes to the damaged copy again.
        let mut store = l.store;
        assert_eq!(store.write(&mut sf).unwrap().path, PATHS[i]);
        // Both corrupt: refused.
        let mut bad = files[1 - i].clone().unwrap();
        bad[20] ^= 1;
        let e = SysFileStore::load(Some(&bad), Some(&bad)).unwrap_err();
        assert!(e.what.contains("no valid copy"), "{e}");
    }

    #[test]
    fn crash_points_fire() {
        let mut store = SysFileStore::load(None, None).unwrap().store;
        store.crash.arm(points::SYSFILE_BEFORE_WRITE, 0).unwrap();
        let mut sf = SysFile::new(1);
        assert_eq!(store.write(&mut sf), Err(Crashed(points::SYSFILE_BEFORE_WRITE)));
        store.crash.arm(points::SYSFILE_AFTER_WRITE, 0).unwrap();
        store.write(&mut sf).unwrap();
        assert_eq!(store.on_written(), Err(Crashed(points::SYSFILE_AFTER_WRITE)));
    }
}
