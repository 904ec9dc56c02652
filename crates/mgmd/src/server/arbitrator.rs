//! The arbitrator: after a node failure that leaves the survivors unable to
//! prove they are the only part of the cluster left (a network split with no
//! majority), each part asks mgmd; exactly one wins, the others shut down,
//! so two halves never both take writes.
//!
//! Both halves of a split were members of the same membership generation
//! (the one before the failure) and ask with it. The first request of a
//! generation wins and its survivor set is recorded; a later request of that
//! generation is granted only if its survivors share a node with every set
//! granted for the generation (a retry, the winning half asking again after
//! its president failed, or after one more of its nodes failed), else
//! refused. Sharing a node is what matters: two disjoint survivor sets are
//! two parts of the cluster, and two overlapping ones agree through the
//! data nodes' membership protocol. (Granting any node of the winning set
//! is not enough: if the winning half splits again before it agreed, each
//! piece holds a node of it.) Deterministic: no clock, no IO; unit-tested
//! here.
//!
//! Limit: the record lives in this mgmd's memory. If mgmd restarts between
//! the two halves' requests, the second half is granted too. NDB closes that
//! gap with an arbitrator ticket handed out before the failure; the data
//! nodes' membership protocol may add one later.

use crate::protocol::{ArbitReply, ArbitReq};
use norr_kernel::NodeId;
use std::collections::{BTreeMap, BTreeSet};

/// Generations remembered: far more than splits in flight at once.
pub const KEEP_GENERATIONS: usize = 64;

#[derive(Debug, Default)]
pub struct Arbitrator {
    /// Generation -> the survivor sets granted, the winner first.
    granted: BTreeMap<u64, Vec<BTreeSet<NodeId>>>,
}

/// Most survivor sets remembered per generation (retries of one set are not
/// stored again).
const KEEP_SETS: usize = 16;

impl Arbitrator {
    pub fn new() -> Arbitrator {
        Arbitrator::default()
    }

    /// Decide one request (already checked to come from `req.requester`).
    pub fn decide(&mut self, req: &ArbitReq) -> ArbitReply {
        let generation = req.generation;
        let refuse = |reason: String| ArbitReply::Refused { generation, reason };
        let survivors: BTreeSet<NodeId> = req.survivors.iter().copied().collect();
        if !survivors.contains(&req.requester) {
            return refuse(format!(
                "node {} asked for survivors {} that do not include itself",
                req.requester,
                list(&survivors)
            ));
        }
        if let Some(both) = req.failed.iter().find(|f| survivors.contains(f)) {
            return refuse(format!("node {both} is listed both as a survivor and as failed"));
        }
        if let Some(sets) = self.granted.get_mut(&generation) {
            if let Some(apart) = sets.iter().find(|w| w.is_disjoint(&survivors)) {
                return refuse(format!(
                    "another part of the cluster (nodes {}) won arbitration for membership generation {generation}",
                    list(apart)
                ));
            }
            if !sets.contains(&survivors) && sets.len() < KEEP_SETS {
                sets.push(survivors);
            }
            return ArbitReply::Granted { generation };
        }
        if let Some((&newest, _)) = self.granted.last_key_value() {
            if generation < newest {
                return refuse(format!(
                    "membership generation {generation} is older than the last arbitration ({newest}): \
                     node {} missed a membership change",
                    req.requester
                ));
            }
        }
        self.granted.insert(generation, vec![survivors]);
        while self.granted.len() > KEEP_GENERATIONS {
            self.granted.pop_first();
        }
        debug_assert!(self.granted.contains_key(&generation));
        ArbitReply::Granted { generation }
    }

    /// The newest generation decided, if any.
    pub fn newest(&self) -> Option<u64> {
        self.granted.last_key_value().map(|(g, _)| *g)
    }

    /// The cluster restarted as a whole (its generations start over):
    /// forget the earlier life's decisions (see `Registry::arbitrate`).
    pub fn new_incarnation(&mut self) {
        self.granted.clear();
    }

    /// The survivor set that won `generation`, if one did.
    pub fn winners(&self, generation: u64) -> Option<&BTreeSet<NodeId>> {
        self.granted.get(&generation).and_then(|sets| sets.first())
    }
}

fn list(ids: &BTreeSet<NodeId>) -> String {
    ids.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(requester: NodeId, generation: u64, survivors: &[NodeId], failed: &[NodeId]) -> ArbitReq {
        ArbitReq { requester, generation, survivors: survivors.to_vec(), failed: failed.to_vec() }
    }

    fn granted(r: &ArbitReply) -> bool {
        matches!(r, ArbitReply::Granted { .. })
    }

    #[test]
    fn first_half_of_a_split_wins_the_other_loses() {
        let mut a = Arbitrator::new();
        assert_eq!(a.decide(&req(2, 5, &[2, 4], &[3, 5])), ArbitReply::Granted { generation: 5 });
        let r = a.decide(&req(3, 5, &[3, 5], &[2, 4]));
        match r {
            ArbitReply::Refused { generation: 5, reason } => {
                assert!(reason.contains("another part of the cluster (nodes 2, 4) won"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        // The other node of the winning half, and a retry, are granted.
        assert!(granted(&a.decide(&req(4, 5, &[2, 4], &[3, 5]))));
        assert!(granted(&a.decide(&req(2, 5, &[2, 4], &[3, 5]))));
        // Still refused on retry.
        assert!(!granted(&a.decide(&req(5, 5, &[3, 5], &[2, 4]))));
        assert_eq!(a.winners(5).unwrap().iter().copied().collect::<Vec<_>>(), vec![2, 4]);
    }

    #[test]
    fn a_winning_half_that_splits_again_has_only_one_piece_granted() {
        let mut a = Arbitrator::new();
        // {2,3,5,6} won generation 2 against node 1...
        assert!(granted(&a.decide(&req(2, 2, &[2, 3, 5, 6], &[1]))));
        // ...then split into {3,5} and {2,6} before it agreed: both pieces
        // hold a node of the winning set, only the first may go on.
        assert!(granted(&a.decide(&req(3, 2, &[3, 5], &[1, 2, 6]))));
        let r = a.decide(&req(2, 2, &[2, 6], &[1, 3, 5]));
        assert!(matches!(&r, ArbitReply::Refused { reason, .. } if reason.contains("(nodes 3, 5) won")), "{r:?}");
        // A set overlapping every granted one (e.g. after a president
        // failed) is still granted.
        assert!(granted(&a.decide(&req(5, 2, &[3, 5, 6], &[1, 2]))));
    }

    #[test]
    fn each_generation_is_decided_on_its_own() {
        let mut a = Arbitrator::new();
        assert!(granted(&a.decide(&req(2, 1, &[2], &[3]))));
        // Next failure, next generation: the winner of that one decides it.
        assert!(granted(&a.decide(&req(3, 2, &[3], &[2]))));
        assert!(!granted(&a.decide(&req(2, 2, &[2], &[3]))));
    }

    #[test]
    fn a_node_behind_the_cluster_is_refused() {
        let mut a = Arbitrator::new();
        assert!(granted(&a.decide(&req(2, 10, &[2, 3], &[4]))));
        let r = a.decide(&req(4, 8, &[4], &[2, 3]));
        assert!(
            matches!(&r, ArbitReply::Refused { reason, .. } if reason.contains("missed a membership change")),
            "{r:?}"
        );
    }

    #[test]
    fn malformed_requests_are_refused_and_decide_nothing() {
        let mut a = Arbitrator::new();
        let r = a.decide(&req(2, 1, &[3], &[4]));
        assert!(matches!(&r, ArbitReply::Refused { reason, .. } if reason.contains("do not include itself")), "{r:?}");
        let r = a.decide(&req(2, 1, &[2, 3], &[3]));
        assert!(
            matches!(&r, ArbitReply::Refused { reason, .. } if reason.contains("both as a survivor and as failed"))
        );
        assert!(a.winners(1).is_none());
        assert!(granted(&a.decide(&req(4, 1, &[4], &[2, 3]))));
    }

    #[test]
    fn memory_is_bounded() {
        let mut a = Arbitrator::new();
        for g in 0..(KEEP_GENERATIONS as u64 * 3) {
            assert!(granted(&a.decide(&req(2, g, &[2], &[3]))));
        }
        assert_eq!(a.granted.len(), KEEP_GENERATIONS);
        // Forgotten generations are older than the newest: refused, not re-granted.
        assert!(!granted(&a.decide(&req(3, 0, &[3], &[2]))));
    }
}
