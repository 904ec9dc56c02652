//! Checkpoint signals: the global checkpoint (GCP) and local checkpoints
//! (LCP), run by the CKPT block of every node, with the president's CKPT as
//! master (see `cluster::Membership::president`).
//!
//! ## Global checkpoint
//! Every commit is tagged at TC with the current global checkpoint id (GCI),
//! and LQH writes each committed change to its REDO log tagged with it. Every
//! `gcp_interval_ms` the master starts a GCP for a new GCI `g`:
//! 1. `GcpPrepareReq { gci: g }` -> every TC instance of every node: stop
//!    giving out commit decisions (queue them). Reply `GcpPrepareConf`.
//! 2. `GcpCommitReq { gci: g }` -> every TC: commits from now on are tagged
//!    `g`; go on. Once no transaction tagged below `g` is still committing
//!    at some LQH, TC sends `GcpTcFinishedRep { gci: g - 1 }` (at once if none).
//! 3. Once every TC finished `g - 1`: `GcpSaveReq { gci: g - 1 }` -> every
//!    LQH: have every REDO record tagged up to `g - 1` durable. Reply
//!    `GcpSaveConf`.
//! 4. The master records `g - 1` as the last complete GCI (every node's
//!    system file), the cluster's disk-durability point.
//!
//! The barrier in steps 1-2 is what makes GCIs consistent with commit order:
//! a transaction that commits after another on the same row gets the same or
//! a later GCI, whichever TCs coordinate them. With no CKPT block running
//! (tests of single blocks), TC tags every commit with GCI 1.
//!
//! ## Local checkpoint (a node with a data directory)
//! Each node's CKPT runs rounds of partial local checkpoints of its own
//! LQHs (node `crate::lcp` in norr-node):
//! 1. `LcpStartReq { lcp_id, start_gci }` -> every LQH of the node; each
//!    checkpoints its partitions one after the other in bounded slices
//!    (`LcpSlice` to itself) and answers `LcpInstanceConf` (or
//!    `LcpInstanceRef`).
//! 2. Once the last complete GCI reaches the round's highest `max_gci`,
//!    the system file records `last_lcp_id = lcp_id` (with the next GCP's
//!    write); once that write is durable, `LcpCompleteRep` -> every LQH:
//!    REDO before `start_gci` is released, obsolete files deleted.
//! 3. `LcpTimer` starts the next round after a short gap.

use serde::{Deserialize, Serialize};

/// A global checkpoint id.
pub type Gci = u64;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CkptSignal {
    /// CKPT master -> TC (A): block commit decisions before switching to `gci`.
    GcpPrepareReq {
        gci: Gci,
    },
    /// TC -> CKPT master.
    GcpPrepareConf {
        gci: Gci,
    },
    /// CKPT master -> TC (A): tag commits with `gci` from now on and resume.
    GcpCommitReq {
        gci: Gci,
    },
    /// TC -> CKPT master: no transaction tagged `gci` or lower is committing
    /// any more (its REDO records are all written to the log buffers).
    GcpTcFinishedRep {
        gci: Gci,
    },
    /// CKPT master -> LQH: make REDO durable up to `gci`. Reply `GcpSaveConf`
    /// (or `GcpSaveRef` on a disk error: the node cannot promise durability).
    GcpSaveReq {
        gci: Gci,
    },
    GcpSaveConf {
        gci: Gci,
    },
    GcpSaveRef {
        gci: Gci,
        error: String,
    },
    /// CKPT -> TC and LQH (and clients asking for disk-durable commits): every
    /// transaction tagged `gci` or lower is on disk on every live node.
    GcpCompleteRep {
        gci: Gci,
    },
    /// CKPT -> itself: time for the next GCP (every `gcp_interval_ms`; the
    /// host delivers the first one when the node starts).
    GcpTimer,
    /// CKPT -> itself: time to start the next local checkpoint round
    /// (`lcp_min_gap_ms` after the previous round was recorded).
    LcpTimer,
    /// CKPT -> every LQH of its node: checkpoint each partition of the
    /// instance as LCP `lcp_id`. `start_gci` is the REDO replay point the
    /// control files record: every change of a lower GCI was applied to
    /// storage before this request was sent (the last complete GCI + 1).
    LcpStartReq {
        lcp_id: u64,
        start_gci: Gci,
    },
    /// LQH -> CKPT: every partition of the instance is checkpointed (data
    /// and control files synced). `max_gci`: the highest GCI in any of its
    /// files; the round can be used by a restart once that GCI is complete.
    /// `redo_fill`: the instance's REDO fill in per mille, for the gap to
    /// the next round.
    LcpInstanceConf {
        lcp_id: u64,
        max_gci: Gci,
        partitions: u32,
        rows: u64,
        bytes: u64,
        redo_fill_permille: u32,
    },
    /// LQH -> CKPT: the round failed here (a disk error). The REDO log is
    /// not released; the next round retries.
    LcpInstanceRef {
        lcp_id: u64,
        error: String,
    },
    /// CKPT -> every LQH of its node: the system file records round
    /// `lcp_id` as complete. Release REDO records of GCI < `release_before`
    /// and delete checkpoint files no restart needs any more.
    LcpCompleteRep {
        lcp_id: u64,
        release_before: Gci,
    },
    /// LQH -> itself: the next slice of the running checkpoint scan.
    LcpSlice {
        lcp_id: u64,
    },
    /// Master CKPT -> every participating node's CKPT, once every LQH saved
    /// `gci`: record it as the last complete GCI in the node's system file
    /// (synced). Reply `GcpRecordConf`. Only once every node confirmed is
    /// `GcpCompleteRep { gci }` sent.
    GcpRecordReq {
        gci: Gci,
    },
    GcpRecordConf {
        gci: Gci,
    },
    /// A new master CKPT (cluster start, take-over after the master failed,
    /// a node that joined) -> a node's CKPT: what GCIs do you hold? The
    /// master starts its next GCI above every `current` it heard.
    GcpStateReq,
    GcpStateConf {
        /// The GCI the node's TCs tag commits with.
        current: Gci,
        /// The last complete GCI the node knows of.
        complete: Gci,
        /// The GCI the node restored from its own files when it started
        /// (0: none, or no data directory).
        restored: Gci,
        /// Its files held a complete copy of its partitions (its system
        /// file called it started): a system restart may use it.
        restorable: bool,
        /// GCIs above `restored` its files can also restore to, until it
        /// heard where the cluster restarts (its system file missed the
        /// last GCP records; its REDO log holds their saves).
        reachable: Vec<Gci>,
    },
    /// Master CKPT -> a node's CKPT at a system restart: the cluster
    /// restarts to GCI `gci`, which this node's files do not hold; it
    /// records that its files are not a consistent copy and restarts
    /// (a node restart: it copies its partitions from a live replica).
    GcpRestartNodeReq {
        gci: Gci,
    },
    /// Master CKPT -> every node's CKPT that a system restart keeps: the
    /// cluster restarts to `gci`, which the node restored or can roll
    /// forward to (`GcpStateConf::reachable`). Before the first round.
    GcpRestartGciReq {
        gci: Gci,
    },
    /// Master CKPT -> the nodes that recorded `gci` while some node group
    /// had no live node with a complete copy on disk (only nodes without
    /// one record then: `gci` is not complete, but their local
    /// checkpoints go on, until their files are a complete copy).
    GcpRecordedRep {
        gci: Gci,
    },
    /// A node's CKPT -> the master it follows: this node's files became a
    /// complete copy (a local checkpoint covered the rows it copied at its
    /// node restart); its next system file write says so.
    GcpFilesCompleteRep,
    /// CKPT -> every LQH of its node: the node restarts to `gci`: replay
    /// the REDO records kept past the restored GCI up to it (or drop them).
    GcpRestoreToReq {
        gci: Gci,
    },
    /// LQH -> CKPT. `error`: the replay failed (the node's rows are not
    /// usable; it must restart and copy).
    GcpRestoreToConf {
        gci: Gci,
        error: Option<String>,
    },
}
