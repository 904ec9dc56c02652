//! Invariants of the membership, checked after every step of the harness:
//! * agreement: every node that reports generation g reports the same
//!   membership (members and president);
//! * order: a node incarnation reports `ClusterStartedRep` once, first, and
//!   generations only grow;
//! * one cluster: a running (not hung) member that a newer generation left
//!   out, or that belongs to an earlier life of the cluster (all of whose
//!   nodes stopped, or a second cluster formed beside it), shuts down within
//!   a bounded time: two halves never both go on.

use norr_kernel::NodeId;
use norr_signals::cluster::{ClusterSignal, Membership};
use std::collections::BTreeMap;

#[derive(Debug)]
pub struct Checker {
    /// Generation -> the membership, for the cluster's current life (a
    /// cluster formed afresh after every node stopped starts a new one).
    by_gen: BTreeMap<u64, Membership>,
    pub lifetimes: u32,
    /// Each node's current incarnation's membership, if it is a member,
    /// with the life of the cluster it is from.
    views: BTreeMap<NodeId, (u32, Membership)>,
    /// When the current life began.
    lifetime_since_ns: u64,
    /// Since when a running member is known to be left out.
    stale_since: BTreeMap<NodeId, u64>,
    /// How long a left-out member may go on running.
    pub stale_window_ns: u64,
}

impl Checker {
    pub fn new(stale_window_ns: u64) -> Checker {
        Checker {
            by_gen: BTreeMap::new(),
            lifetimes: 0,
            views: BTreeMap::new(),
            lifetime_since_ns: 0,
            stale_since: BTreeMap::new(),
            stale_window_ns,
        }
    }

    pub fn view(&self, node: NodeId) -> Option<&Membership> {
        self.views.get(&node).map(|(_, m)| m)
    }

    pub fn generation_membership(&self, generation: u64) -> Option<&Membership> {
        self.by_gen.get(&generation)
    }

    pub fn newest_generation(&self) -> u64 {
        self.by_gen.last_key_value().map_or(0, |(g, _)| *g)
    }

    /// The node stopped (crash, shutdown): it is no member any more.
    pub fn node_down(&mut self, node: NodeId) {
        self.views.remove(&node);
        self.stale_since.remove(&node);
    }

    fn agree(&mut self, node: NodeId, m: &Membership) -> Result<(), String> {
        if !m.contains(node) {
            return Err(format!("node {node} reports generation {} without itself: {m:?}", m.generation));
        }
        if m.members.is_empty() || !m.contains(m.president) {
            return Err(format!("node {node} reports a malformed membership {m:?}"));
        }
        match self.by_gen.get(&m.generation) {
            Some(prev) if prev != m => Err(format!(
                "disagreement in generation {}: node {node} has {m:?}, another node had {prev:?}",
                m.generation
            )),
            Some(_) => Ok(()),
            None => {
                self.by_gen.insert(m.generation, m.clone());
                Ok(())
            }
        }
    }

    /// A subscriber signal node `node` got from its QMGR at `now_ns`.
    pub fn record(&mut self, now_ns: u64, node: NodeId, sig: &ClusterSignal) -> Result<(), String> {
        match sig {
            ClusterSignal::ClusterStartedRep { membership, joined, .. } => {
                if self.views.contains_key(&node) {
                    return Err(format!("node {node} got a second ClusterStartedRep"));
                }
                if !joined {
                    if membership.generation != 1 {
                        return Err(format!("node {node} formed a cluster at {membership:?}"));
                    }
                    // The first report of a formation: a new life of the
                    // cluster (the other members of the same formation
                    // report the same generation 1, before any change).
                    let same = self.by_gen.len() == 1 && self.by_gen.get(&1) == Some(membership);
                    if !same {
                        self.by_gen.clear();
                        self.lifetimes += 1;
                        self.lifetime_since_ns = now_ns;
                    }
                }
                self.agree(node, membership)?;
                self.views.insert(node, (self.lifetimes, membership.clone()));
            }
            ClusterSignal::NodeJoinedRep { membership, .. } | ClusterSignal::NodeFailRep { membership, .. } => {
                let Some((life, old)) = self.views.get(&node) else {
                    return Err(format!("node {node} got {sig:?} before ClusterStartedRep"));
                };
                if *life != self.lifetimes {
                    return Err(format!("node {node} of an earlier life of the cluster changed to {membership:?}"));
                }
                if membership.generation <= old.generation {
                    return Err(format!(
                        "node {node}: generation went from {} to {}",
                        old.generation, membership.generation
                    ));
                }
                if let ClusterSignal::NodeFailRep { failed, .. } = sig {
                    if failed.is_empty() || failed.iter().any(|f| membership.contains(*f) || !old.contains(*f)) {
                        return Err(format!("node {node}: bad failure report {sig:?} after {old:?}"));
                    }
                }
                if let ClusterSignal::NodeJoinedRep { node: j, .. } = sig {
                    if !membership.contains(*j) || old.contains(*j) {
                        return Err(format!("node {node}: bad join report {sig:?} after {old:?}"));
                    }
                }
                self.agree(node, membership)?;
                self.views.insert(node, (self.lifetimes, membership.clone()));
            }
            _ => {}
        }
        Ok(())
    }

    /// `running`: nodes up and not hung, with when each last resumed.
    pub fn check_stale(&mut self, now_ns: u64, running: &BTreeMap<NodeId, u64>) -> Result<(), String> {
        let newest = self.newest_generation();
        for (node, (life, view)) in &self.views {
            let Some(resumed_ns) = running.get(node) else {
                self.stale_since.remove(node);
                continue;
            };
            let earlier_life = *life != self.lifetimes;
            let left_out = earlier_life
                || (view.generation < newest
                    && self.by_gen.range(view.generation + 1..).any(|(_, m)| !m.contains(*node)));
            if !left_out {
                self.stale_since.remove(node);
                continue;
            }
            let mut since = *self.stale_since.entry(*node).or_insert(now_ns);
            since = since.max(*resumed_ns);
            if earlier_life {
                since = since.max(self.lifetime_since_ns);
            }
            if now_ns.saturating_sub(since) > self.stale_window_ns {
                return Err(format!(
                    "node {node} keeps running in generation {} (life {life} of the cluster) for {} ms after \
                     it was left out (life {}, newest generation {newest}: {:?})",
                    view.generation,
                    (now_ns - since) / 1_000_000,
                    self.lifetimes,
                    self.by_gen.get(&newest)
                ));
            }
        }
        Ok(())
    }
}
