//! The cluster blocks of a data node:
//! * `dih`: the distribution (replica chains, replica states) and node
//!   restarts, driven by the master DIH;
//! * `qmgr`: membership, heartbeats, the node-failure protocol and
//!   arbitration.
//!
//! Their signals are `norr_signals::cluster`. Like every block they are
//! deterministic state machines: time, network and disk come through `Ctx`.

pub mod dih;
pub mod qmgr;
pub mod qmgr_testkit;

pub(crate) use norr_kernel::probe;

pub use dih::Dih;
pub use qmgr::Qmgr;
