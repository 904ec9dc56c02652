//! The arbitrator as mgmd runs it (crates/mgmd/src/server/arbitrator.rs;
//! repeated here because block crates do not depend on mgmd): the first
//! request of a generation wins; a later one of that generation is granted
//! only if its survivors share a node with every set granted for it; a
//! generation older than the newest decided one is refused.

use norr_kernel::NodeId;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArbiterMode {
    /// Reachable: answers after the network delay.
    Up,
    /// No arbitrator: the host answers `granted: false` at once.
    Down,
    /// Requests vanish (mgmd hung): QMGR's time-out decides.
    Silent,
}

#[derive(Debug, Default)]
pub struct Arbiter {
    granted: BTreeMap<u64, Vec<BTreeSet<NodeId>>>,
}

impl Arbiter {
    pub fn decide(&mut self, requester: NodeId, generation: u64, survivors: &[NodeId]) -> Result<(), String> {
        let survivors: BTreeSet<NodeId> = survivors.iter().copied().collect();
        if !survivors.contains(&requester) {
            return Err(format!("node {requester} is not among its survivors"));
        }
        if let Some(sets) = self.granted.get_mut(&generation) {
            if let Some(apart) = sets.iter().find(|w| w.is_disjoint(&survivors)) {
                return Err(format!("another part of the cluster ({apart:?}) won generation {generation}"));
            }
            if !sets.contains(&survivors) {
                sets.push(survivors);
            }
            return Ok(());
        }
        if let Some((&newest, _)) = self.granted.last_key_value() {
            if generation < newest {
                return Err(format!("generation {generation} is older than {newest}"));
            }
        }
        self.granted.insert(generation, vec![survivors]);
        Ok(())
    }

    /// The survivor set that won `generation` first.
    pub fn winners(&self, generation: u64) -> Option<&BTreeSet<NodeId>> {
        self.granted.get(&generation).and_then(|s| s.first())
    }
}
