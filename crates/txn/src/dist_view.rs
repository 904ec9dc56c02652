//! A block's view of the distribution: DIH's latest `Dist` with the node
//! failures this block already knows of laid over it.
//!
//! QMGR tells every block of a node about a failure, and the DIH master
//! publishes a distribution without the failed node later. In between,
//! two things can go wrong without this overlay:
//! * a distribution DIH published before it handled the failure arrives
//!   after the failure report and would bring the dead node back to life;
//! * a TC that knows of the failure sends a write to an LQH on another
//!   node that does not know yet: that LQH would pass the write along a
//!   chain through the dead node, the chain's answer would never come, and
//!   no later failure report would tell TC. So TC sends the nodes it knows
//!   failed with every operation (`LqhKeyReq::failed`), and LQH lays them
//!   over its own view first.
//!
//! A failure is known for certain once QMGR reported it (a failure report
//! is only sent when the cluster agreed on it), so taking it early is safe.
//! It stays laid over until DIH's distribution shows the node dead too, or
//! QMGR reports the node joined again (it restarted; DIH then lists it as
//! starting). Failures carry QMGR's membership generation, so that a TC
//! that has not heard of a node's join yet cannot make an LQH that has
//! drop the restarting node from its chains.
//!
//! Liveness and routing are two questions. Whether a node in a replica
//! chain is *down* (skip it, do not wait for it) is answered from QMGR's
//! news alone ([`DistView::down`]): a node is down once a failure of it is
//! heard of and until it joins again. DIH's distribution only says where
//! operations go. The two must not be mixed: while DIH puts a restarted node
//! into the write path (`Starting`), the members learn it one by one, and a
//! block that has not yet would call the node dead although another node's
//! LQH already passed it a write; skipping it then left the write prepared
//! there forever (a held row lock, and a take-over that later found the
//! committed transaction unfinished and rolled it back, simulator seed
//! cluster:933). QMGR's join is heard long before DIH's update (the
//! restarting node first syncs the schema), so membership news is never
//! behind the distribution.

use norr_kernel::NodeId;
use norr_signals::cluster::Membership;
use norr_signals::dist::{Dist, ReplicaState};
use std::collections::{BTreeMap, BTreeSet};

/// A node failure as QMGR declared it: the node and the membership
/// generation that left it out. Generations only grow, so a block can tell a
/// failure it has not heard of from an old one the node has since recovered
/// from (its join has a higher generation).
pub type Failure = (NodeId, u64);

pub struct DistView {
    dist: Dist,
    /// Failed nodes DIH's distribution does not show dead yet.
    unconfirmed: BTreeSet<NodeId>,
    /// The generation of the latest failure or join of each node heard of.
    last_event: BTreeMap<NodeId, u64>,
    /// Failures not followed by a join yet, in id order (what TC sends
    /// with its operations; empty while every node is up).
    failures: Vec<Failure>,
    /// The newest membership QMGR reported (generation, members); None
    /// before the first (a data node without QMGR).
    members: Option<(u64, Vec<NodeId>)>,
    /// A distribution came from DIH (`on_dist`); until then the view is the
    /// one given to `new` (this node alone).
    from_dih: bool,
    /// This block is on a data node of a cluster (`in_cluster`): its view
    /// means nothing until DIH sends one, even before QMGR's first news.
    clustered: bool,
}

impl DistView {
    pub fn new(dist: Dist) -> DistView {
        DistView {
            dist,
            unconfirmed: BTreeSet::new(),
            last_event: BTreeMap::new(),
            failures: Vec::new(),
            members: None,
            from_dih: false,
            clustered: false,
        }
    }

    /// The view of a block on a data node of a cluster: it awaits DIH's
    /// distribution from the start ([`DistView::awaiting_dih`]), not only
    /// once QMGR reported a membership. A restarted node listens for clients
    /// as soon as its files are read, before it has even connected to its
    /// peers; a client with the distribution of the node's previous life
    /// sends it transactions then, and with the one-node view it would
    /// commit them alone on its restored replicas, acknowledge them, and
    /// lose them when it copied its partitions from a live replica (the
    /// chaos test lost 26 acknowledged transfers so).
    pub fn in_cluster(dist: Dist) -> DistView {
        DistView { clustered: true, ..DistView::new(dist) }
    }

    /// The failures heard of whose nodes have not joined again.
    pub fn failures(&self) -> &[Failure] {
        &self.failures
    }

    /// Is `node` down as far as QMGR's news goes: a failure of it heard of
    /// (from QMGR or a TC) and no join since, or not a member of the newest
    /// membership heard of? A node in a replica chain that is not down gets
    /// the chain's phases and is waited for, whatever the distribution says
    /// (see the module comment).
    pub fn down(&self, node: NodeId) -> bool {
        self.failures.binary_search_by_key(&node, |f| f.0).is_ok()
            || self.members.as_ref().is_some_and(|(_, m)| !m.contains(&node))
    }

    /// Is this a data node of a cluster (built [`DistView::in_cluster`], or
    /// QMGR reported a membership) whose DIH has not handed it a
    /// distribution yet? Its view then says it holds
    /// every partition alone, which is only true of a node without a
    /// cluster: a restarted node is in this state from its join until the
    /// master DIH puts it into the write path, and must not coordinate or
    /// serve anything meanwhile (a client with an older distribution still
    /// sends it transactions).
    pub fn awaiting_dih(&self) -> bool {
        (self.clustered || self.members.is_some()) && !self.from_dih
    }

    /// DIH published `dist` (never older than the one held).
    pub fn on_dist(&mut self, dist: Dist) {
        self.from_dih = true;
        assert!(dist.version >= self.dist.version, "distribution went back");
        self.dist = dist;
        let dist = &self.dist;
        self.unconfirmed.retain(|n| dist.state(*n) != ReplicaState::Dead);
        self.lay_over();
    }

    /// `node` failed in membership `generation` (QMGR's report, or a TC's
    /// that heard it first). Old news is ignored: a failure already heard
    /// of, or one the node has joined again since.
    pub fn node_failed(&mut self, (node, generation): Failure) {
        if self.last_event.get(&node).is_some_and(|g| *g >= generation) {
            return;
        }
        self.last_event.insert(node, generation);
        match self.failures.binary_search_by_key(&node, |f| f.0) {
            Ok(i) => self.failures[i].1 = generation,
            Err(i) => self.failures.insert(i, (node, generation)),
        }
        if self.dist.state(node) != ReplicaState::Dead {
            self.unconfirmed.insert(node);
            self.lay_over();
        }
        debug_assert!(self.failures.windows(2).all(|w| w[0].0 < w[1].0));
    }

    /// QMGR reports a membership (a start, a join, a failure: `failed` left
    /// it). Its members are alive at its generation, so a failure of theirs
    /// declared at that generation or before is old news (a node that
    /// restarted hears of the failures of its previous life from TCs that
    /// have not seen it join).
    pub fn on_membership(&mut self, failed: &[NodeId], m: &Membership) {
        for f in failed {
            self.node_failed((*f, m.generation));
        }
        self.members_at(&m.members, m.generation);
        if self.members.as_ref().is_none_or(|(g, _)| *g <= m.generation) {
            self.members = Some((m.generation, m.members.clone()));
        }
    }

    fn members_at(&mut self, members: &[NodeId], generation: u64) {
        for m in members {
            self.node_joined(*m, generation);
        }
    }

    /// QMGR reports `node` joined again in membership `generation`; DIH
    /// lists it as starting from then on.
    pub fn node_joined(&mut self, node: NodeId, generation: u64) {
        if self.last_event.get(&node).is_some_and(|g| *g >= generation) {
            return;
        }
        self.last_event.insert(node, generation);
        self.failures.retain(|f| f.0 != node);
        self.unconfirmed.remove(&node);
    }

    fn lay_over(&mut self) {
        for n in &self.unconfirmed {
            self.dist.states.insert(*n, ReplicaState::Dead);
        }
    }
}

impl std::ops::Deref for DistView {
    type Target = Dist;
    fn deref(&self) -> &Dist {
        &self.dist
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_nodes(version: u64) -> Dist {
        let mut d = Dist::new(vec![vec![1, 2]], ReplicaState::Alive);
        d.version = version;
        d
    }

    #[test]
    fn a_cluster_view_awaits_dih_from_the_start() {
        let mut v = DistView::in_cluster(Dist::single(2));
        assert!(v.awaiting_dih(), "before QMGR's first news too");
        v.on_membership(&[], &Membership { generation: 4, members: vec![1, 2], president: 1 });
        assert!(v.awaiting_dih());
        v.on_dist(two_nodes(7));
        assert!(!v.awaiting_dih());
        // A node without a cluster serves with its own view at once.
        assert!(!DistView::new(Dist::single(1)).awaiting_dih());
    }

    #[test]
    fn an_older_distribution_does_not_revive_a_failed_node() {
        let mut v = DistView::new(two_nodes(1));
        assert!(v.failures().is_empty());
        v.node_failed((2, 5));
        assert_eq!(v.failures(), &[(2, 5)]);
        assert_eq!(v.state(2), ReplicaState::Dead);
        // Published before DIH handled the failure: node 2 still alive there.
        v.on_dist(two_nodes(2));
        assert_eq!(v.state(2), ReplicaState::Dead);
        // DIH handled it: the overlay is no longer needed.
        let mut handled = two_nodes(3);
        handled.states.insert(2, ReplicaState::Dead);
        v.on_dist(handled);
        assert!(v.unconfirmed.is_empty());
        // The node restarts: QMGR reports the join, DIH lists it as starting.
        v.node_joined(2, 6);
        assert!(v.failures().is_empty());
        let mut back = two_nodes(4);
        back.states.insert(2, ReplicaState::Starting);
        v.on_dist(back);
        assert_eq!(v.state(2), ReplicaState::Starting);
    }

    #[test]
    fn a_restarted_node_ignores_failures_of_its_former_life() {
        // Node 2 restarted: its blocks start fresh and hear the membership
        // they joined (generation 6); a TC elsewhere still sends node 1's
        // failure of generation 5, which node 1 has since come back from.
        let mut v = DistView::new(two_nodes(1));
        v.members_at(&[1, 2], 6);
        v.node_failed((1, 5));
        assert_eq!(v.state(1), ReplicaState::Alive);
        v.node_failed((1, 7));
        assert_eq!(v.state(1), ReplicaState::Dead);
    }

    #[test]
    fn a_failure_older_than_the_nodes_join_is_ignored() {
        let mut v = DistView::new(two_nodes(1));
        v.node_failed((2, 5));
        v.node_joined(2, 6);
        v.on_dist(two_nodes(2));
        // A TC that has not heard of the join yet still sends the failure.
        v.node_failed((2, 5));
        assert_eq!(v.state(2), ReplicaState::Alive);
        assert!(v.failures().is_empty());
        // A new failure of the node counts again.
        v.node_failed((2, 7));
        assert_eq!(v.state(2), ReplicaState::Dead);
        assert_eq!(v.failures(), &[(2, 7)]);
    }
}
