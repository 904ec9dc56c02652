//! Which parts the next checkpoint writes fully, and how a restore reads
//! the checkpoint files back.

use super::{partition_dir, ChainLink, LcpControl, LcpDataSummary, LcpId, LcpIdent, PartMask, PartWindow, PARTS};
use crate::error::FormatError;
use norr_signals::ckpt::Gci;
use norr_signals::{PartitionId, TableId};

/// What the next checkpoint of a partition writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextLcp {
    pub lcp_id: LcpId,
    /// Parts written in full (pass to storage's `lcp_begin`).
    pub full_parts: PartWindow,
    /// Other parts: rows with GCI >= this (pass to `lcp_begin`).
    pub since_gci: Gci,
    /// The chain the control file will record.
    pub chain: Vec<ChainLink>,
}

/// Choose the next checkpoint of a partition.
///
/// * First checkpoint (`prev` None): every part in full.
/// * Otherwise a window of full parts continuing where the previous one
///   ended, of at least `ceil(2048 / max_chain)` parts (so every part is
///   imaged fully within `max_chain` checkpoints and a restore reads at most
///   that many files), and more as more rows changed: `ceil(2048 * changed
///   / total)`, so a restore reads about twice the partition at most
///   (changed rows cost as much to restore as full ones). When half the rows
///   or more changed, a full checkpoint is as cheap and restarts the chain.
pub fn next_lcp(
    prev: Option<&LcpControl>,
    lcp_id: LcpId,
    changed_rows: u64,
    total_rows: u64,
    max_chain: usize,
) -> NextLcp {
    assert!(max_chain >= 2);
    let Some(prev) = prev else {
        return NextLcp { lcp_id, full_parts: PartWindow::ALL, since_gci: 0, chain: Vec::new() };
    };
    assert!(lcp_id > prev.lcp_id, "LCP ids only grow ({lcp_id} after {})", prev.lcp_id);
    let parts = PARTS as u64;
    let min = parts.div_ceil(max_chain as u64 - 1);
    let by_change = if total_rows == 0 { 0 } else { (parts * changed_rows.min(total_rows)).div_ceil(total_rows) };
    let count = if changed_rows.saturating_mul(2) >= total_rows.max(1) { parts } else { min.max(by_change).min(parts) };
    let full = PartWindow::new(prev.full_parts.end(), count as u16);
    let mut links: Vec<ChainLink> = prev.chain.clone();
    links.push(prev.as_link());
    // Keep the shortest suffix in which every part outside `full` has a full image.
    let mut start = links.len();
    for p in 0..PARTS {
        if full.contains(p) {
            continue;
        }
        let base = links.iter().rposition(|l| l.full_parts.contains(p)).expect("a control file covers every part");
        start = start.min(base);
    }
    let chain = links[start.min(links.len())..].to_vec();
    debug_assert!(chain.len() < max_chain, "chain of {} links", chain.len());
    NextLcp { lcp_id, full_parts: full, since_gci: prev.start_gci, chain }
}

/// LCP ids whose files become obsolete once `new`'s control file is durable.
pub fn obsolete_after(new: &LcpControl, prev: &LcpControl) -> Vec<LcpId> {
    let keep: Vec<LcpId> = new.chain.iter().map(|l| l.lcp_id).chain([new.lcp_id]).collect();
    prev.chain.iter().map(|l| l.lcp_id).chain([prev.lcp_id]).filter(|id| !keep.contains(id)).collect()
}

/// One data file to read in a restore, and which of its entries to apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreStep {
    pub ident: LcpIdent,
    pub data: LcpDataSummary,
    /// Apply rows of these parts (parts whose full image is here or earlier).
    pub rows_of: PartMask,
    /// Apply tombstones of these parts (parts whose full image is earlier).
    pub tombstones_of: PartMask,
}

/// How to restore one partition from its checkpoint files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestorePlan {
    pub table: TableId,
    pub partition: PartitionId,
    /// The checkpoint restored to (None: no checkpoint; the partition starts
    /// empty and all of its REDO is applied).
    pub lcp_id: Option<LcpId>,
    /// Read in this order; within one file tombstones come before rows.
    pub steps: Vec<RestoreStep>,
    /// Apply REDO records of this partition with GCI >= this.
    pub redo_from_gci: Gci,
    /// The restored partition is consistent once REDO is applied up to at
    /// least this GCI (if the recovered GCI is lower, this checkpoint cannot
    /// be used: a newer checkpoint than the restart point).
    pub min_restore_gci: Gci,
    /// Files of the partition no restore needs (delete them).
    pub obsolete: Vec<String>,
    /// Control files that were refused, and why (their checkpoints are
    /// treated as never completed).
    pub rejected: Vec<FormatError>,
}

/// Plan a restore from the files in a partition's checkpoint directory.
/// `names`: the directory listing; `controls`: the bytes of every `*.ctl`
/// file in it (by name). `restore_gci`: the GCI the node restarts to
/// (a checkpoint whose data needs REDO beyond it is not usable).
pub fn plan_restore(
    table: TableId,
    partition: PartitionId,
    names: &[String],
    controls: &[(String, Vec<u8>)],
    restore_gci: Gci,
) -> Result<RestorePlan, FormatError> {
    let dir = partition_dir(table, partition);
    let mut ids_with_data: Vec<LcpId> = Vec::new();
    for n in names {
        if let Some(id) = n.strip_suffix(".data").and_then(|s| s.parse().ok()) {
            ids_with_data.push(id);
        }
    }
    let mut valid: Vec<LcpControl> = Vec::new();
    let mut rejected = Vec::new();
    for (name, bytes) in controls {
        let path = format!("{dir}/{name}");
        match LcpControl::decode(bytes, &path) {
            Ok(c) if c.table == table && c.partition == partition => valid.push(c),
            Ok(c) => rejected.push(FormatError::new(
                &path,
                0,
                format!("control file of table {} partition {}", c.table, c.partition),
            )),
            Err(e) => rejected.push(e),
        }
    }
    valid.sort_by_key(|c| std::cmp::Reverse(c.lcp_id));
    let mut chosen = None;
    for c in &valid {
        let needs: Vec<LcpId> = c.chain.iter().map(|l| l.lcp_id).chain([c.lcp_id]).collect();
        if let Some(missing) = needs.iter().find(|id| !ids_with_data.contains(id)) {
            rejected.push(FormatError::new(
                &c.ident().control_path(),
                0,
                format!("checkpoint {} needs the data file of checkpoint {missing}, which is missing", c.lcp_id),
            ));
            continue;
        }
        if c.max_gci > restore_gci || c.start_gci > restore_gci.saturating_add(1) {
            rejected.push(FormatError::new(
                &c.ident().control_path(),
                0,
                format!("checkpoint {} holds GCI {} beyond the restart point {restore_gci}", c.lcp_id, c.max_gci),
            ));
            continue;
        }
        chosen = Some(c.clone());
        break;
    }
    let mut obsolete = Vec::new();
    let Some(c) = chosen else {
        if !valid.is_empty() {
            // Checkpoints exist but none is usable: starting this partition
            // empty would silently lose its rows.
            let why = rejected.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; ");
            return Err(FormatError::new(
                &dir,
                0,
                format!("no usable checkpoint of table {table} partition {partition}: {why}"),
            ));
        }
        for n in names {
            obsolete.push(format!("{dir}/{n}"));
        }
        return Ok(RestorePlan {
            table,
            partition,
            lcp_id: None,
            steps: vec![],
            redo_from_gci: 0,
            min_restore_gci: 0,
            obsolete,
            rejected,
        });
    };
    let links: Vec<ChainLink> = c.chain.iter().copied().chain([c.as_link()]).collect();
    // base[p]: index of the link with part p's last full image.
    let mut base = vec![0usize; PARTS as usize];
    for p in 0..PARTS {
        base[p as usize] =
            links.iter().rposition(|l| l.full_parts.contains(p)).expect("checked: every part has a full image");
    }
    let mut steps = Vec::new();
    for (i, l) in links.iter().enumerate() {
        let (mut rows_of, mut tombstones_of) = (PartMask::EMPTY, PartMask::EMPTY);
        for p in 0..PARTS {
            if base[p as usize] <= i {
                rows_of.insert(p);
            }
            if base[p as usize] < i {
                tombstones_of.insert(p);
            }
        }
        if rows_of.is_empty() && tombstones_of.is_empty() {
            continue;
        }
        let ident = LcpIdent { table, partition, lcp_id: l.lcp_id };
        steps.push(RestoreStep { ident, data: l.data, rows_of, tombstones_of });
    }
    let keep: Vec<LcpId> = links.iter().map(|l| l.lcp_id).collect();
    for n in names {
        let id: Option<LcpId> = n.strip_suffix(".data").or_else(|| n.strip_suffix(".ctl")).and_then(|s| s.parse().ok());
        if id.is_none_or(|id| !keep.contains(&id)) {
            obsolete.push(format!("{dir}/{n}"));
        }
    }
    let min_restore_gci = links.iter().map(|l| l.data.max_gci).max().unwrap_or(0);
    Ok(RestorePlan {
        table,
        partition,
        lcp_id: Some(c.lcp_id),
        steps,
        redo_from_gci: c.start_gci,
        min_restore_gci,
        obsolete,
        rejected,
    })
}
