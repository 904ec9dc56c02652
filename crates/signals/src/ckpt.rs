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
}
