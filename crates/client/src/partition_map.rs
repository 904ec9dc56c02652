//! Partition-aware coordinator choice: which TC a transaction is started on.
//!
//! A transaction runs wherever its TC is, and every TC can coordinate any
//! transaction (it routes each operation to the LQH owning the operation's
//! partition), so the choice never affects what a transaction does, only where
//! the work lands. The client makes it lazily, at the transaction's first
//! request, from the partition that request touches: the partition a data node
//! would compute for the first key operation (`norr_signals::partition`, the
//! very code TC routes with), or the one partition a pruned scan reads, or the
//! partition the caller named with `Client::begin_on_partition`.
//!
//! What the cluster offers today is one data node per connection, running
//! `tc_instances` TC instances on its one thread (the `tc_instances` knob; the
//! node says how many in the handshake). Partition p is coordinated by TC
//! instance `p % tc_instances`. With several data nodes the same choice picks
//! the node holding the partition's primary replica; that needs a partition
//! -> node map from DIH, which does not exist yet.
//!
//! With one TC instance (the default) there is nothing to choose: the choice
//! is one comparison, no key is hashed and no definition is kept, so the
//! single-TC hot path (point selects) costs what it did.

use norr_kernel::{BlockRef, NodeId};
use norr_signals::partition::{coordinator_instance, op_partition, partition_of_pk};
use norr_signals::{block, KeyAccess, KeyOp, PartitionId, PartitionScheme, ScanSpec, TableDef, TableId, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The connection's partition map: the data node, its TC instances, and the
/// table definitions seen on the connection (to hash keys as the node does).
pub(crate) struct PartitionMap {
    node: NodeId,
    tc_instances: u16,
    /// Filled from every definition DICT returns on this connection; empty
    /// with one TC instance (nothing to choose, nothing to keep).
    defs: Mutex<HashMap<TableId, Arc<TableDef>>>,
}

impl PartitionMap {
    pub fn new(node: NodeId, tc_instances: u16) -> PartitionMap {
        PartitionMap { node, tc_instances: tc_instances.max(1), defs: Mutex::new(HashMap::new()) }
    }

    pub fn tc_instances(&self) -> u16 {
        self.tc_instances
    }

    /// The TC block of `instance`.
    pub fn tc(&self, instance: u16) -> BlockRef {
        BlockRef::new(self.node, block::TC, instance)
    }

    /// Remember a definition DICT returned (newest wins).
    pub fn learn(&self, def: &TableDef) {
        if self.tc_instances > 1 {
            self.defs.lock().expect("defs lock").insert(def.id, Arc::new(def.clone()));
        }
    }

    /// Forget a dropped table.
    pub fn forget(&self, name: &str) {
        if self.tc_instances > 1 {
            self.defs.lock().expect("defs lock").retain(|_, d| d.name != name);
        }
    }

    fn def(&self, table: TableId) -> Option<Arc<TableDef>> {
        self.defs.lock().expect("defs lock").get(&table).cloned()
    }

    /// Coordinator of a transaction on partition `part`.
    pub fn for_partition(&self, part: PartitionId) -> u16 {
        coordinator_instance(part, self.tc_instances)
    }

    /// Coordinator of a transaction whose first key is `key` of `def`: None
    /// when the key does not name a partition (user partitioning, which maps
    /// by value, or a malformed key the node will refuse anyway).
    pub fn for_key(&self, def: &TableDef, key: &[Value]) -> Option<u16> {
        if self.tc_instances == 1 {
            return Some(0);
        }
        if def.partitioning == PartitionScheme::User {
            return None;
        }
        partition_of_pk(def, key).ok().map(|p| self.for_partition(p))
    }

    /// Coordinator of a transaction whose first request is the batch `ops`.
    /// `spread` (the transaction handle) places transactions whose first
    /// operation names no partition: a table this connection never looked up,
    /// or a unique-index access (its partition is known only at LQH).
    pub fn for_ops(&self, ops: &[KeyOp], spread: u64) -> u16 {
        if self.tc_instances == 1 {
            return 0;
        }
        let part = ops.first().and_then(|op| match self.def(op.table) {
            Some(def) => op_partition(&def, op).ok().flatten(),
            // Unknown table: a partition the caller computed (user partitioning).
            None if matches!(op.key, KeyAccess::Primary(_)) => op.partition,
            None => None,
        });
        match part {
            Some(p) => self.for_partition(p),
            None => self.spread(spread),
        }
    }

    /// Coordinator of a transaction (or standalone scan) whose first request
    /// is a scan: the partition it is pruned to, if exactly one.
    pub fn for_scan(&self, spec: &ScanSpec, spread: u64) -> u16 {
        if self.tc_instances == 1 {
            return 0;
        }
        match spec.partitions.as_deref() {
            Some([p]) => self.for_partition(*p),
            _ => self.spread(spread),
        }
    }

    fn spread(&self, spread: u64) -> u16 {
        (spread % self.tc_instances as u64) as u16
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use norr_signals::{ColumnDef, ColumnType};

    fn def(id: TableId, partitioning: PartitionScheme) -> TableDef {
        TableDef {
            id,
            version: 1,
            name: format!("t{id}"),
            columns: vec![ColumnDef::new("k", ColumnType::BigInt { unsigned: false }).not_null()],
            primary_key: vec![0],
            partitioning,
            partitions: 8,
            indexes: Vec::new(),
            extra: Vec::new(),
            options: Default::default(),
        }
    }

    fn key(k: i64) -> Vec<Value> {
        vec![Value::Int(k)]
    }

    #[test]
    fn single_tc_never_looks() {
        let m = PartitionMap::new(1, 1);
        let d = def(5, PartitionScheme::Key { columns: vec![] });
        m.learn(&d);
        assert!(m.defs.lock().unwrap().is_empty(), "one TC: no definitions kept");
        for k in 0..20 {
            assert_eq!(m.for_ops(&[KeyOp::read(5, key(k))], k as u64), 0);
            assert_eq!(m.for_key(&d, &key(k)), Some(0));
        }
        assert_eq!(m.tc(0), BlockRef::new(1, block::TC, 0));
    }

    #[test]
    fn first_op_partition_chooses() {
        let m = PartitionMap::new(1, 3);
        let d = def(5, PartitionScheme::Key { columns: vec![] });
        m.learn(&d);
        let mut seen = std::collections::BTreeSet::new();
        for k in 0..50 {
            let p = partition_of_pk(&d, &key(k)).unwrap();
            let want = (p % 3) as u16;
            // Whatever the handle, and whatever follows the first operation.
            let ops = vec![KeyOp::read(5, key(k)), KeyOp::read(5, key(k + 1))];
            for spread in [0, 1, 2] {
                assert_eq!(m.for_ops(&ops, spread), want, "key {k}");
            }
            assert_eq!(m.for_key(&d, &key(k)), Some(want));
            seen.insert(want);
        }
        assert_eq!(seen.len(), 3, "50 keys over 8 partitions reach every TC");
    }

    #[test]
    fn user_partitioning_uses_the_given_partition() {
        let m = PartitionMap::new(1, 4);
        let d = def(6, PartitionScheme::User);
        m.learn(&d);
        let mut op = KeyOp::read(6, key(1));
        op.partition = Some(6);
        assert_eq!(m.for_ops(&[op.clone()], 0), 2);
        // Not learnt: the caller's partition still counts.
        let m2 = PartitionMap::new(1, 4);
        assert_eq!(m2.for_ops(&[op], 0), 2);
        // The key alone does not say where a RANGE/LIST row lives.
        assert_eq!(m.for_key(&d, &key(1)), None);
    }

    #[test]
    fn no_partition_spreads_by_handle() {
        let m = PartitionMap::new(1, 4);
        // Unknown table, no partition given.
        assert_eq!(m.for_ops(&[KeyOp::read(9, key(1))], 7), 3);
        // Unique-index access: LQH finds the partition.
        let d = def(5, PartitionScheme::Key { columns: vec![] });
        m.learn(&d);
        let u = KeyOp { key: KeyAccess::Unique { index: 1, values: key(1) }, ..KeyOp::read(5, vec![]) };
        assert_eq!(m.for_ops(&[u], 6), 2);
        // After a drop the definition is gone.
        m.forget("t5");
        assert_eq!(m.for_ops(&[KeyOp::read(5, key(1))], 5), 1);
    }

    #[test]
    fn scans_pruned_to_one_partition() {
        let m = PartitionMap::new(1, 4);
        let mut spec = ScanSpec::full(5);
        assert_eq!(m.for_scan(&spec, 9), 1);
        spec.partitions = Some(vec![7]);
        assert_eq!(m.for_scan(&spec, 9), 3);
        spec.partitions = Some(vec![7, 2]);
        assert_eq!(m.for_scan(&spec, 9), 1);
    }
}
