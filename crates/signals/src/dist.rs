//! Distribution: which data nodes hold a partition, in which order (the
//! replica chain), and which of them is the primary.
//!
//! The cluster's data nodes form node groups of `replicas` nodes (from the
//! configuration: data nodes sorted by id, in consecutive chunks). Every
//! partition of a table lives in one node group; within it the replicas are
//! ordered, and the order rotates from partition to partition so that every
//! node is primary for an equal share. Whether a node may be in a chain, and
//! where, depends on its replica state, which DIH keeps and changes (node
//! failure, node restart). Everything here is a pure function of a [`Dist`]
//! and a table definition, so DIH, TC, LQH and the client compute the same
//! chains from the same `Dist` (its `version` says which one they hold).
//!
//! The chain of a write: prepare goes primary -> backups in chain order, the
//! last replica answers TC, commit runs back from the last replica to the
//! primary, complete forward again (see `internal`). Alive replicas come
//! first (the first is the primary); starting replicas (a node restart
//! copying its rows) follow at the tail: they receive every write but serve
//! no reads until DIH marks them alive.

use crate::schema::{PartitionId, TableDef};
use norr_kernel::NodeId;
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;
use std::collections::BTreeMap;

/// Most replicas of a partition (`replicas` of the cluster; fully replicated
/// tables have a copy on every data node and are bounded by MAX_DATA_NODES).
pub const MAX_REPLICAS: usize = 4;
/// Most data nodes in a cluster.
pub const MAX_DATA_NODES: usize = 48;

/// State of a data node's replicas, as DIH sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ReplicaState {
    /// Not a member of the cluster: in no chain.
    Dead,
    /// Restarting: at the tail of every chain of its partitions (it gets every
    /// write while its rows are copied from a live replica), never read from,
    /// never primary.
    Starting,
    /// Up to date: may be primary and serve reads.
    Alive,
}

/// The cluster's distribution as DIH publishes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dist {
    /// Bumped by every change; a holder of a newer version replaces an older one.
    pub version: u64,
    /// Node groups: each a list of `replicas` data node ids (configuration order).
    pub node_groups: Vec<Vec<NodeId>>,
    /// State of every configured data node.
    pub states: BTreeMap<NodeId, ReplicaState>,
}

/// A replica chain: the nodes of one partition's replicas in prepare order
/// (`nodes[0]` is the primary), and the LQH instance that owns the partition
/// on each of them (the same on every node).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Chain {
    pub instance: u16,
    pub nodes: SmallVec<[NodeId; MAX_REPLICAS]>,
}

impl Chain {
    pub fn primary(&self) -> NodeId {
        self.nodes[0]
    }
    pub fn tail(&self) -> NodeId {
        *self.nodes.last().expect("a chain has a node")
    }
    /// The node after `node` in prepare order.
    pub fn next(&self, node: NodeId) -> Option<NodeId> {
        let i = self.nodes.iter().position(|n| *n == node)?;
        self.nodes.get(i + 1).copied()
    }
    /// The node before `node` in prepare order (commit runs this way).
    pub fn prev(&self, node: NodeId) -> Option<NodeId> {
        let i = self.nodes.iter().position(|n| *n == node)?;
        i.checked_sub(1).map(|j| self.nodes[j])
    }
    pub fn contains(&self, node: NodeId) -> bool {
        self.nodes.contains(&node)
    }
    /// The chain without `failed` nodes (None if none is left).
    pub fn without(&self, failed: &[NodeId]) -> Option<Chain> {
        let nodes: SmallVec<[NodeId; MAX_REPLICAS]> =
            self.nodes.iter().copied().filter(|n| !failed.contains(n)).collect();
        (!nodes.is_empty()).then_some(Chain { instance: self.instance, nodes })
    }
}

/// How a table is distributed, from its definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TableOptions {
    /// Committed reads may use any alive replica (preferring one on the
    /// reader's own node); the commit is acknowledged once every replica has
    /// released its locks, so a client always reads its own writes.
    /// MySQL Cluster: `COMMENT="NDB_TABLE=READ_BACKUP=1"`.
    pub read_backup: bool,
    /// A copy of every partition on every data node (small, read-mostly
    /// tables read locally everywhere). Implies read-backup.
    /// MySQL Cluster: `COMMENT="NDB_TABLE=FULLY_REPLICATED=1"`.
    pub fully_replicated: bool,
}

impl TableOptions {
    pub fn reads_any_replica(&self) -> bool {
        self.read_backup || self.fully_replicated
    }
}

impl Dist {
    /// A distribution with every node of `node_groups` in `state`.
    pub fn new(node_groups: Vec<Vec<NodeId>>, state: ReplicaState) -> Dist {
        assert!(!node_groups.is_empty(), "a cluster has a node group");
        let r = node_groups[0].len();
        assert!((1..=MAX_REPLICAS).contains(&r), "replicas {r}");
        assert!(node_groups.iter().all(|g| g.len() == r), "node groups of unequal size");
        let states = node_groups.iter().flatten().map(|n| (*n, state)).collect::<BTreeMap<_, _>>();
        assert_eq!(states.len(), node_groups.len() * r, "a node in two node groups");
        Dist { version: 1, node_groups, states }
    }

    /// One data node with one replica: today's single-node layout.
    pub fn single(node: NodeId) -> Dist {
        Dist::new(vec![vec![node]], ReplicaState::Alive)
    }

    pub fn replicas(&self) -> usize {
        self.node_groups[0].len()
    }

    pub fn state(&self, node: NodeId) -> ReplicaState {
        self.states.get(&node).copied().unwrap_or(ReplicaState::Dead)
    }

    pub fn data_nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.states.keys().copied()
    }

    /// Node group of a data node.
    pub fn node_group_of(&self, node: NodeId) -> Option<usize> {
        self.node_groups.iter().position(|g| g.contains(&node))
    }

    /// The configured replicas of partition `part` of `def`, in chain order
    /// before states are applied (dead nodes included).
    fn replica_order(&self, def: &TableDef, part: PartitionId) -> SmallVec<[NodeId; 8]> {
        let groups = self.node_groups.len();
        let r = self.replicas();
        if def.options.fully_replicated {
            // Every node, rotated so that primaries spread over all of them.
            let all: SmallVec<[NodeId; 8]> = self.node_groups.iter().flatten().copied().collect();
            let rot = part as usize % all.len();
            return all.iter().cycle().skip(rot).take(all.len()).copied().collect();
        }
        let (group, rot) = if has_unique_index(def) {
            // Unique indexes are checked against the rows of one node's
            // storage (LQH's unique maps and unique-value locks): every
            // partition of such a table lives in one node group with one
            // primary, chosen by table id so that tables spread.
            let g = def.id as usize % groups;
            (g, (def.id as usize / groups) % r)
        } else {
            (part as usize % groups, (part as usize / groups) % r)
        };
        let g = &self.node_groups[group];
        (0..r).map(|i| g[(rot + i) % r]).collect()
    }

    /// The replica chain of partition `part` of `def`: alive replicas first
    /// (the first is the primary), then starting ones. None if no replica is
    /// alive (the partition is unavailable).
    pub fn chain(&self, def: &TableDef, part: PartitionId, lqh_instances: u16) -> Option<Chain> {
        let order = self.replica_order(def, part);
        let mut nodes: SmallVec<[NodeId; MAX_REPLICAS]> = SmallVec::new();
        for want in [ReplicaState::Alive, ReplicaState::Starting] {
            nodes.extend(order.iter().copied().filter(|n| self.state(*n) == want));
        }
        if nodes.is_empty() || self.state(nodes[0]) != ReplicaState::Alive {
            return None;
        }
        debug_assert!(nodes.windows(2).all(|w| w[0] != w[1]), "a node twice in a chain");
        Some(Chain { instance: crate::partition::lqh_instance(part, lqh_instances), nodes })
    }

    /// The primary replica's node of partition `part`.
    pub fn primary(&self, def: &TableDef, part: PartitionId) -> Option<NodeId> {
        let order = self.replica_order(def, part);
        order.iter().copied().find(|n| self.state(*n) == ReplicaState::Alive)
    }

    /// The node a committed read of `part` goes to: the primary, or for
    /// tables that read any replica the alive replica on `near` if there is
    /// one.
    pub fn read_node(&self, def: &TableDef, part: PartitionId, near: NodeId) -> Option<NodeId> {
        if def.options.reads_any_replica()
            && self.state(near) == ReplicaState::Alive
            && self.replica_order(def, part).contains(&near)
        {
            return Some(near);
        }
        self.primary(def, part)
    }

    /// Every node that holds (or receives) replicas of `part`.
    pub fn holds(&self, def: &TableDef, part: PartitionId, node: NodeId) -> bool {
        self.replica_order(def, part).contains(&node)
    }

    /// True if every partition of every table has an alive replica: at least
    /// one alive node in every node group.
    pub fn all_partitions_available(&self) -> bool {
        self.node_groups.iter().all(|g| g.iter().any(|n| self.state(*n) == ReplicaState::Alive))
    }

    /// Partitions of `def` whose primary is `node` (for `norr mgm show`).
    pub fn primary_share(&self, def: &TableDef, node: NodeId) -> (u32, u32) {
        let mine = (0..def.partitions).filter(|p| self.primary(def, *p) == Some(node)).count() as u32;
        (mine, def.partitions)
    }
}

/// True if the table has a unique secondary index (see `replica_order`).
pub fn has_unique_index(def: &TableDef) -> bool {
    def.indexes.iter().any(|i| i.unique)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{ColumnDef, IndexDef, IndexKind, PartitionScheme};
    use crate::value::ColumnType;

    fn def(id: u32, partitions: u32) -> TableDef {
        TableDef {
            id,
            version: 1,
            name: format!("t{id}"),
            columns: vec![ColumnDef::new("a", ColumnType::Int { unsigned: false }).not_null()],
            primary_key: vec![0],
            partitioning: PartitionScheme::Key { columns: vec![] },
            partitions,
            indexes: Vec::new(),
            extra: Vec::new(),
            options: TableOptions::default(),
        }
    }

    #[test]
    fn primaries_are_balanced_and_chains_follow_states() {
        let mut d = Dist::new(vec![vec![1, 2], vec![3, 4]], ReplicaState::Alive);
        let t = def(1, 8);
        let mut count = BTreeMap::new();
        for p in 0..8 {
            let c = d.chain(&t, p, 1).unwrap();
            assert_eq!(c.nodes.len(), 2);
            assert_eq!(d.node_group_of(c.nodes[0]), d.node_group_of(c.nodes[1]));
            *count.entry(c.primary()).or_insert(0) += 1;
        }
        assert_eq!(count.values().copied().collect::<Vec<_>>(), vec![2, 2, 2, 2]);
        // Node 1 dead: its partitions have 2 as primary, and no 1 in chains.
        d.states.insert(1, ReplicaState::Dead);
        for p in 0..8 {
            let c = d.chain(&t, p, 1).unwrap();
            assert!(!c.contains(1));
        }
        // Starting: at the tail, never primary.
        d.states.insert(1, ReplicaState::Starting);
        for p in 0..8 {
            let c = d.chain(&t, p, 1).unwrap();
            if c.contains(1) {
                assert_eq!(c.tail(), 1);
                assert_eq!(c.nodes.len(), 2);
            }
        }
        assert!(d.all_partitions_available());
        d.states.insert(2, ReplicaState::Dead);
        d.states.insert(1, ReplicaState::Dead);
        assert!(!d.all_partitions_available());
        assert!(d.chain(&t, 0, 1).is_none());
    }

    #[test]
    fn unique_tables_have_one_primary_and_fully_replicated_all_nodes() {
        let d = Dist::new(vec![vec![1, 2], vec![3, 4]], ReplicaState::Alive);
        let mut t = def(5, 8);
        t.indexes.push(IndexDef { id: 1, name: "u".into(), columns: vec![0], unique: true, kind: IndexKind::Ordered });
        let prim: std::collections::BTreeSet<_> = (0..8).map(|p| d.primary(&t, p).unwrap()).collect();
        assert_eq!(prim.len(), 1);
        let mut f = def(6, 4);
        f.options.fully_replicated = true;
        for p in 0..4 {
            assert_eq!(d.chain(&f, p, 1).unwrap().nodes.len(), 4);
            assert_eq!(d.read_node(&f, p, 3), Some(3));
        }
        let prim: std::collections::BTreeSet<_> = (0..4).map(|p| d.primary(&f, p).unwrap()).collect();
        assert_eq!(prim.len(), 4);
    }

    #[test]
    fn chain_navigation() {
        let c = Chain { instance: 0, nodes: [3, 1, 2].into_iter().collect() };
        assert_eq!(c.next(3), Some(1));
        assert_eq!(c.next(2), None);
        assert_eq!(c.prev(1), Some(3));
        assert_eq!(c.prev(3), None);
        assert_eq!(c.without(&[1]).unwrap().nodes.as_slice(), &[3, 2]);
        assert!(c.without(&[1, 2, 3]).is_none());
    }
}
