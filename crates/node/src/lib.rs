//! A cluster data node's blocks in one scheduler: TC and LQH instances,
//! DICT, DIH and QMGR, wired so that QMGR tells DIH, TC, LQH and DICT of
//! every membership change and DIH publishes the distribution to TC, LQH and
//! DICT.
//!
//! QMGR runs the membership: the host starts it (`QmgrStartReq`), reports
//! the connections to the other data nodes (`ConnectRep` / `DisconnectRep`),
//! and acts on what it asks of `block::HOST` (`HostDisconnectReq`,
//! `HostShutdownReq`) and `block::MGM` (`ArbitReq`, answered `ArbitConf`).
//!
//! The host adds its own blocks on top (`block::HOST`, `block::FS`,
//! `block::MGM`) and starts the node; the production runtime and the
//! simulator both build nodes here, so they run the same wiring.
//!
//! `testkit` runs several such nodes in one thread with a deterministic
//! network, for tests of the cluster protocols.

pub mod ckpt;
pub mod durable;
pub mod lcp;
pub mod testkit;

use norr_kernel::{BlockRef, NodeId, Scheduler};
use norr_knobs::Knobs;
use norr_signals::{block, Signal};

/// What a data node needs to know of its cluster to build its blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// This node's id.
    pub node: NodeId,
    /// Every data node, in node groups of `replicas` (configuration order).
    pub node_groups: Vec<Vec<NodeId>>,
}

impl Topology {
    /// One data node on its own.
    pub fn single(node: NodeId) -> Topology {
        Topology { node, node_groups: vec![vec![node]] }
    }
}

/// The blocks of the node that hear of every membership change (QMGR's
/// subscribers), in the order they hear it: DIH first (it publishes the new
/// distribution), then TC, LQH, DICT and CKPT.
pub fn membership_subscribers(node: NodeId, knobs: &Knobs) -> Vec<BlockRef> {
    let mut v = vec![BlockRef::new(node, block::DIH, 0)];
    v.extend((0..knobs.tc_instances.max(1)).map(|i| BlockRef::new(node, block::TC, i)));
    v.extend((0..norr_txn::LQH_INSTANCES).map(|i| BlockRef::new(node, block::LQH, i)));
    v.push(BlockRef::new(node, block::DICT, 0));
    v.push(BlockRef::new(node, block::CKPT, 0));
    v
}

/// The blocks whose `NfCompleteRep { node }` a failed node waits for before
/// it may join again: TC instance 0 reports it once the failed node's
/// transactions are all taken over (the other blocks finish with a failed
/// node while they handle its `NodeFailRep`).
pub fn nf_confirmers(node: NodeId) -> Vec<BlockRef> {
    vec![BlockRef::new(node, block::TC, 0)]
}

/// A cluster data node's scheduler with TC, LQH, DICT, DIH, QMGR and CKPT
/// (keeping nothing on disk: GCIs advance, saves are answered at once).
pub fn build_cluster_node(topo: &Topology, knobs: &Knobs) -> Scheduler<Signal> {
    build_cluster_node_observed(topo, knobs, &[])
}

/// [`build_cluster_node`] with extra QMGR subscribers after the node's own
/// (test kits record the membership changes with them).
pub fn build_cluster_node_observed(topo: &Topology, knobs: &Knobs, observers: &[BlockRef]) -> Scheduler<Signal> {
    let mut s = norr_txn::build_cluster_data_node(topo.node, knobs);
    // TCs start tagging commits with GCI 1 (see norr_signals::ckpt).
    let ckpt = ckpt::Ckpt::cluster(topo.node, topo.node_groups.clone(), knobs, 1, 0);
    add_cluster_blocks(&mut s, topo, knobs, observers, ckpt, &[], None);
    s
}

/// Add DIH, QMGR and `ckpt` to a node's scheduler holding TC, LQH and DICT.
pub(crate) fn add_cluster_blocks(
    s: &mut Scheduler<Signal>,
    topo: &Topology,
    knobs: &Knobs,
    observers: &[BlockRef],
    ckpt: ckpt::Ckpt,
    restored_tables: &[norr_signals::schema::TableDef],
    restored_gci: Option<norr_signals::ckpt::Gci>,
) {
    let node = topo.node;
    add_dih(s, topo, knobs, restored_tables, restored_gci);
    let mut subscribers = membership_subscribers(node, knobs);
    subscribers.extend_from_slice(observers);
    let qmgr = norr_cluster::Qmgr::new(node, topo.node_groups.clone(), knobs, subscribers)
        .with_nf_confirmers(nf_confirmers(node));
    s.add_block(block::QMGR, 0, Box::new(qmgr));
    s.add_block(block::CKPT, 0, Box::new(ckpt));
}

/// Add DIH to a node's scheduler holding TC, LQH, DICT (and CKPT, which
/// gets the distribution too: its system file records the replica states).
fn add_dih(
    s: &mut Scheduler<Signal>,
    topo: &Topology,
    knobs: &Knobs,
    restored_tables: &[norr_signals::schema::TableDef],
    restored_gci: Option<norr_signals::ckpt::Gci>,
) {
    let node = topo.node;
    let mut dist_subscribers: Vec<BlockRef> =
        (0..knobs.tc_instances.max(1)).map(|i| BlockRef::new(node, block::TC, i)).collect();
    dist_subscribers.extend((0..norr_txn::LQH_INSTANCES).map(|i| BlockRef::new(node, block::LQH, i)));
    dist_subscribers.push(BlockRef::new(node, block::DICT, 0));
    dist_subscribers.push(BlockRef::new(node, block::CKPT, 0));
    let mut dih =
        norr_cluster::Dih::new(node, topo.node_groups.clone(), norr_txn::LQH_INSTANCES, dist_subscribers, knobs);
    dih.restore_tables(restored_tables);
    dih.set_restored_gci(restored_gci);
    s.add_block(block::DIH, 0, Box::new(dih));
}
