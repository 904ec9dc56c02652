//! The TC, LQH and DICT blocks of one data node: transactions (routing,
//! batches, commit/abort phases, time-outs), row locks and operation execution
//! on local partitions, partition scans and their coordination, and the schema.
//!
//! Hosts (the threaded runtime and the simulator) build a node with
//! [`build_data_node`] and drive it only through `Scheduler::deliver`,
//! `run_one`, `advance_to` and `take_remote`. [`testkit`] wraps that for tests.
//!
//! The TC <-> LQH <-> DICT protocol is documented on
//! `norr_signals::internal::InternalSignal`; the client-visible semantics of
//! transaction handles and scans in `norr_signals::api`.
//!
//! Known gaps (deliberate, for now):
//! * one LQH instance: unique-index operations go to instance 0 and look up
//!   that instance's storage only; CREATE INDEX is not undone on the other
//!   instances if one fails (ALTER TABLE is: every instance builds its copy
//!   aside, then DICT tells all to switch or all to drop it); a commit refused
//!   by one LQH (concurrent DDL) cannot be undone on the others. All fine with
//!   `LQH_INSTANCES == 1`.
//! * DDL under running transactions is safe but blunt: a transaction with
//!   uncommitted writes on a table that is dropped, truncated or re-indexed
//!   fails its next operation or its commit with SchemaVersionMismatch.
//! * locks a locking scan took on rows that no longer match after the re-read
//!   are kept to the end of the transaction (NDB releases them).
//! * the ordered-scan merge at TC is O(partitions) per row.
//! * no deadlock detection: the lock-wait time-out breaks deadlocks.

pub use norr_kernel::counters;
pub use norr_kernel::probe;
pub mod dict;
pub mod dist_view;
pub use norr_kernel::fxhash;
pub mod lock_queue;
pub mod lqh;
pub mod privileges;
pub mod route;
pub mod store;
pub mod tc;
pub mod testkit;
pub mod validate;

use norr_kernel::{NodeId, Scheduler};
use norr_knobs::Knobs;
use norr_signals::{block, Signal};

/// LQH (LDM) instances per data node. One today; routing goes through
/// `route::lqh_instance`, so raising it only needs storage split per instance.
pub const LQH_INSTANCES: u16 = 1;

/// A data node's scheduler with the TC instances (`knobs.tc_instances`), the
/// LQH instances and DICT.
pub fn build_data_node(node: NodeId, knobs: &Knobs) -> Scheduler<Signal> {
    build_data_node_blocks(node, knobs, false)
}

/// [`build_data_node`] for a data node of a cluster: its TCs and LQHs serve
/// nothing until DIH hands them a distribution (`DistView::in_cluster`).
pub fn build_cluster_data_node(node: NodeId, knobs: &Knobs) -> Scheduler<Signal> {
    build_data_node_blocks(node, knobs, true)
}

fn build_data_node_blocks(node: NodeId, knobs: &Knobs, in_cluster: bool) -> Scheduler<Signal> {
    let mut s = Scheduler::new(node, knobs.job_buffer_bound);
    for i in 0..knobs.tc_instances.max(1) {
        let mut tc = tc::Tc::new(node, i, LQH_INSTANCES, knobs);
        if in_cluster {
            tc.in_cluster();
        }
        s.add_block(block::TC, i, Box::new(tc));
    }
    for i in 0..LQH_INSTANCES {
        let mut lqh = lqh::Lqh::new(node, i, LQH_INSTANCES, knobs);
        if in_cluster {
            lqh.in_cluster();
        }
        s.add_block(block::LQH, i, Box::new(lqh));
    }
    s.add_block(block::DICT, 0, Box::new(dict::Dict::new(node, LQH_INSTANCES, knobs)));
    s
}

/// `build_data_node` with `lqh_instances` LQH instances instead of
/// `LQH_INSTANCES`: for tests of protocols that span instances (DDL). With
/// more than one, unique indexes see only their own instance's rows (see the
/// known gaps above).
pub fn build_data_node_with_lqh(node: NodeId, knobs: &Knobs, lqh_instances: u16) -> Scheduler<Signal> {
    assert!(lqh_instances >= 1);
    let mut s = Scheduler::new(node, knobs.job_buffer_bound);
    for i in 0..knobs.tc_instances.max(1) {
        s.add_block(block::TC, i, Box::new(tc::Tc::new(node, i, lqh_instances, knobs)));
    }
    for i in 0..lqh_instances {
        s.add_block(block::LQH, i, Box::new(lqh::Lqh::new(node, i, lqh_instances, knobs)));
    }
    s.add_block(block::DICT, 0, Box::new(dict::Dict::new(node, lqh_instances, knobs)));
    s
}
