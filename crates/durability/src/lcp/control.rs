//! LCP control files: one sealed blob (kind LcpControl) whose body is the
//! postcard encoding of [`LcpControl`]. Written (and synced) after the data
//! file is synced: a checkpoint counts only once its control file is whole.

use super::{LcpDataSummary, LcpId, LcpIdent, PartWindow, LCP_VERSION, PARTS};
use crate::error::FormatError;
use crate::frame::{open_blob, seal, Kind};
use norr_signals::ckpt::Gci;
use norr_signals::{PartitionId, TableId};
use serde::{Deserialize, Serialize};

/// An earlier checkpoint a restore still needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainLink {
    pub lcp_id: LcpId,
    pub full_parts: PartWindow,
    pub data: LcpDataSummary,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LcpControl {
    pub table: TableId,
    pub partition: PartitionId,
    pub lcp_id: LcpId,
    /// Schema version of the table when the checkpoint was taken.
    pub table_version: u32,
    /// REDO replay point: a restore from this checkpoint must apply every
    /// REDO record with GCI >= start_gci (the scan is fuzzy).
    pub start_gci: Gci,
    /// Rows of parts outside the window were written if their GCI >= this
    /// (the previous checkpoint's start_gci; 0 for a first checkpoint).
    pub since_gci: Gci,
    /// Highest GCI in this checkpoint's data file: REDO must be applied at
    /// least up to this for the restored partition to be consistent.
    pub max_gci: Gci,
    pub full_parts: PartWindow,
    pub data: LcpDataSummary,
    /// Earlier checkpoints still needed, oldest first (this one excluded).
    pub chain: Vec<ChainLink>,
}

impl LcpControl {
    pub fn ident(&self) -> LcpIdent {
        LcpIdent { table: self.table, partition: self.partition, lcp_id: self.lcp_id }
    }

    /// This checkpoint as a link of a later one's chain.
    pub fn as_link(&self) -> ChainLink {
        ChainLink { lcp_id: self.lcp_id, full_parts: self.full_parts, data: self.data }
    }

    pub fn encode(&self) -> Vec<u8> {
        debug_assert!(self.check().is_ok(), "{:?}", self.check());
        let body = postcard::to_stdvec(self).expect("LCP control encodes");
        let mut out = Vec::new();
        seal(Kind::LcpControl, LCP_VERSION, &body, &mut out);
        out
    }

    /// Parse a control file read from `path`.
    pub fn decode(bytes: &[u8], path: &str) -> Result<LcpControl, FormatError> {
        let blob = open_blob(bytes, Kind::LcpControl, LCP_VERSION, path, 0)?;
        if blob.len != bytes.len() {
            return Err(FormatError::new(path, blob.len as u64, "trailing bytes after the LCP control blob"));
        }
        let c: LcpControl = postcard::from_bytes(blob.body).map_err(|e| {
            FormatError::new(path, crate::frame::BLOB_HEADER_BYTES as u64, format!("LCP control body: {e}"))
        })?;
        c.check().map_err(|w| FormatError::new(path, 0, w))?;
        if c.ident().control_path() != path && path.starts_with("lcp/") {
            return Err(FormatError::new(
                path,
                0,
                format!("control file of {} found at {path}", c.ident().control_path()),
            ));
        }
        Ok(c)
    }

    /// Internal consistency (a valid checksum over nonsense is still refused).
    pub fn check(&self) -> Result<(), String> {
        if !self.full_parts.is_valid() || self.chain.iter().any(|l| !l.full_parts.is_valid()) {
            return Err("LCP control has an invalid part window".into());
        }
        if self.chain.windows(2).any(|w| w[0].lcp_id >= w[1].lcp_id)
            || self.chain.last().is_some_and(|l| l.lcp_id >= self.lcp_id)
        {
            return Err("LCP control chain is not in increasing LCP id order".into());
        }
        if self.since_gci > self.start_gci {
            return Err(format!("LCP control since_gci {} > start_gci {}", self.since_gci, self.start_gci));
        }
        // Every part has a full image in the chain or here.
        let mut covered = self.full_parts.mask();
        for l in &self.chain {
            let m = l.full_parts.mask();
            for p in 0..PARTS {
                if m.contains(p) {
                    covered.insert(p);
                }
            }
        }
        if covered.len() != PARTS as u32 {
            return Err(format!(
                "LCP control chain leaves {} parts without a full image",
                PARTS as u32 - covered.len()
            ));
        }
        Ok(())
    }
}
