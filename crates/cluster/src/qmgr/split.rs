//! May these survivors go on? NDB's rule, applied by the coordinator of a
//! change once every survivor promised its ballot (so the survivors are the
//! set of nodes that are really together, and two disjoint survivor sets of
//! one generation can never both be told "go on"):
//!
//! 1. nobody failed (a join or a graceful leave): go on;
//! 2. some node group has no survivor: the data of its partitions is gone,
//!    stop (the other part, if any, holds that group);
//! 3. some node group survives whole: go on (any other part lacks that
//!    group entirely, so rule 2 stops it);
//! 4. else ask the arbitrator, which grants one part per generation.
//!
//! At the cluster start (generation 0) rule 2 never applies: the coordinator
//! starts forming only with a node of every group.

use norr_kernel::NodeId;
use std::collections::BTreeSet;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SplitDecision {
    GoOn,
    /// The node groups (their nodes) with no survivor.
    GroupLost(Vec<Vec<NodeId>>),
    Arbitrate,
}

pub fn decide(node_groups: &[Vec<NodeId>], survivors: &BTreeSet<NodeId>, failed: &BTreeSet<NodeId>) -> SplitDecision {
    debug_assert!(survivors.is_disjoint(failed), "a node both survives and failed");
    if failed.is_empty() {
        return SplitDecision::GoOn;
    }
    let lost: Vec<Vec<NodeId>> =
        node_groups.iter().filter(|g| !g.iter().any(|n| survivors.contains(n))).cloned().collect();
    if !lost.is_empty() {
        return SplitDecision::GroupLost(lost);
    }
    if node_groups.iter().any(|g| g.iter().all(|n| survivors.contains(n))) {
        return SplitDecision::GoOn;
    }
    SplitDecision::Arbitrate
}

/// Does `nodes` hold at least one node of every node group?
pub fn covers_every_group(node_groups: &[Vec<NodeId>], nodes: &BTreeSet<NodeId>) -> bool {
    node_groups.iter().all(|g| g.iter().any(|n| nodes.contains(n)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[NodeId]) -> BTreeSet<NodeId> {
        v.iter().copied().collect()
    }

    #[test]
    fn the_four_rules() {
        let groups = vec![vec![1, 2], vec![3, 4]];
        // Nobody failed.
        assert_eq!(decide(&groups, &set(&[1, 2, 3, 4]), &set(&[])), SplitDecision::GoOn);
        // A whole group survives: go on.
        assert_eq!(decide(&groups, &set(&[1, 2, 3]), &set(&[4])), SplitDecision::GoOn);
        // The other side of that split lacks group [1, 2].
        assert_eq!(decide(&groups, &set(&[4]), &set(&[1, 2, 3])), SplitDecision::GroupLost(vec![vec![1, 2]]));
        // One node of each group on each side: only the arbitrator can tell.
        assert_eq!(decide(&groups, &set(&[1, 3]), &set(&[2, 4])), SplitDecision::Arbitrate);
        assert_eq!(decide(&groups, &set(&[2, 4]), &set(&[1, 3])), SplitDecision::Arbitrate);
        // Each side of {1,2}|{3,4} lacks a group: both stop.
        assert_eq!(decide(&groups, &set(&[1, 2]), &set(&[3, 4])), SplitDecision::GroupLost(vec![vec![3, 4]]));
        // One group of two nodes: the survivor of a two-node cluster asks.
        assert_eq!(decide(&[vec![1, 2]], &set(&[1]), &set(&[2])), SplitDecision::Arbitrate);
        // One replica per group: losing any node loses its group.
        assert_eq!(decide(&[vec![1], vec![2]], &set(&[1]), &set(&[2])), SplitDecision::GroupLost(vec![vec![2]]));
    }

    #[test]
    fn coverage() {
        let groups = vec![vec![1, 2], vec![3, 4]];
        assert!(covers_every_group(&groups, &set(&[1, 3])));
        assert!(!covers_every_group(&groups, &set(&[1, 2])));
        assert!(!covers_every_group(&groups, &set(&[])));
    }
}
