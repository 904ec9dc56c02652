//! Partition-aware coordinator choice: which data node, and which TC
//! instance on it, a transaction is started on.
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
//! The node: the one holding the partition's primary replica, from the
//! cluster's distribution (`norr_signals::dist::Dist`, which the client
//! fetches and refreshes; see `cluster`): NDB's transaction hint. If that
//! node is not connected, the next replica of the chain, else any connected
//! node: a stale or missing map costs a hop, never correctness. The TC
//! instance on that node: `coordinator_instance(partition, tc_instances)`.
//!
//! With one data node running one TC instance (the default) there is
//! nothing to choose: the choice is one comparison, no key is hashed and no
//! definition is kept, so the single-node hot path (point selects) costs
//! what it did.

use norr_signals::partition::{coordinator_instance, op_partition, partition_of_pk};
use norr_signals::{KeyAccess, KeyOp, PartitionId, PartitionScheme, ScanSpec, TableDef, TableId, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The table definitions seen by the client (any connection), to hash keys
/// as the node does. Kept only while there is something to choose (several
/// data nodes, or several TC instances on one).
pub(crate) struct Defs {
    keep: AtomicBool,
    map: Mutex<HashMap<TableId, Arc<TableDef>>>,
}

impl Defs {
    pub fn new(keep: bool) -> Defs {
        Defs { keep: AtomicBool::new(keep), map: Mutex::new(HashMap::new()) }
    }

    /// Start keeping definitions (a node with several TC instances joined).
    pub fn keep_from_now(&self) {
        self.keep.store(true, Ordering::Relaxed);
    }

    pub fn keeping(&self) -> bool {
        self.keep.load(Ordering::Relaxed)
    }

    /// Remember a definition DICT returned (newest wins).
    pub fn learn(&self, def: &TableDef) {
        if self.keeping() {
            self.map.lock().expect("defs lock").insert(def.id, Arc::new(def.clone()));
        }
    }

    /// Forget a dropped table.
    pub fn forget(&self, name: &str) {
        if self.keeping() {
            self.map.lock().expect("defs lock").retain(|_, d| d.name != name);
        }
    }

    pub fn get(&self, table: TableId) -> Option<Arc<TableDef>> {
        if !self.keeping() {
            return None;
        }
        self.map.lock().expect("defs lock").get(&table).cloned()
    }
}

/// The partition a transaction's first request touches, with its table's
/// definition when the client knows it (the node's choice needs it).
#[derive(Debug, Clone, Default)]
pub(crate) struct FirstPart {
    pub part: Option<PartitionId>,
    pub def: Option<Arc<TableDef>>,
}

/// The partition of the first operation of `ops`: None for a table the
/// client never looked up (unless the caller named the partition, as for
/// user partitioning) or a unique-index access (its partition is known only
/// at LQH).
pub(crate) fn ops_partition(defs: &Defs, ops: &[KeyOp]) -> FirstPart {
    let Some(op) = ops.first() else { return FirstPart::default() };
    match defs.get(op.table) {
        Some(def) => FirstPart { part: op_partition(&def, op).ok().flatten(), def: Some(def) },
        // Unknown table: a partition the caller computed (user partitioning).
        None if matches!(op.key, KeyAccess::Primary(_)) => FirstPart { part: op.partition, def: None },
        None => FirstPart::default(),
    }
}

/// The one partition a scan is pruned to, if exactly one.
pub(crate) fn scan_partition(defs: &Defs, spec: &ScanSpec) -> FirstPart {
    match spec.partitions.as_deref() {
        Some([p]) => FirstPart { part: Some(*p), def: defs.get(spec.table) },
        _ => FirstPart::default(),
    }
}

/// The partition of `key` of `def`: None when the key does not name one
/// (user partitioning, which maps by value, or a malformed key the node
/// will refuse anyway).
pub(crate) fn key_partition(def: &TableDef, key: &[Value]) -> Option<PartitionId> {
    if def.partitioning == PartitionScheme::User {
        return None;
    }
    partition_of_pk(def, key).ok()
}

/// The TC instance of a transaction on partition `part` on a node with
/// `tc_instances`; `spread` (the transaction handle) places transactions
/// whose first request names no partition.
pub(crate) fn tc_instance(part: Option<PartitionId>, tc_instances: u16, spread: u64) -> u16 {
    if tc_instances <= 1 {
        return 0;
    }
    match part {
        Some(p) => coordinator_instance(p, tc_instances),
        None => (spread % tc_instances as u64) as u16,
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

    fn instance_for_ops(defs: &Defs, ops: &[KeyOp], tcs: u16, spread: u64) -> u16 {
        tc_instance(ops_partition(defs, ops).part, tcs, spread)
    }

    #[test]
    fn nothing_kept_when_there_is_nothing_to_choose() {
        let defs = Defs::new(false);
        let d = def(5, PartitionScheme::Key { columns: vec![] });
        defs.learn(&d);
        assert!(defs.map.lock().unwrap().is_empty(), "one node, one TC: no definitions kept");
        for k in 0..20 {
            assert_eq!(instance_for_ops(&defs, &[KeyOp::read(5, key(k))], 1, k as u64), 0);
        }
        defs.keep_from_now();
        defs.learn(&d);
        assert!(defs.get(5).is_some());
    }

    #[test]
    fn first_op_partition_chooses() {
        let defs = Defs::new(true);
        let d = def(5, PartitionScheme::Key { columns: vec![] });
        defs.learn(&d);
        let mut seen = std::collections::BTreeSet::new();
        for k in 0..50 {
            let p = partition_of_pk(&d, &key(k)).unwrap();
            let want = (p % 3) as u16;
            // Whatever the handle, and whatever follows the first operation.
            let ops = vec![KeyOp::read(5, key(k)), KeyOp::read(5, key(k + 1))];
            assert_eq!(ops_partition(&defs, &ops).part, Some(p));
            assert!(ops_partition(&defs, &ops).def.is_some());
            for spread in [0, 1, 2] {
                assert_eq!(instance_for_ops(&defs, &ops, 3, spread), want, "key {k}");
            }
            assert_eq!(key_partition(&d, &key(k)), Some(p));
            seen.insert(want);
        }
        assert_eq!(seen.len(), 3, "50 keys over 8 partitions reach every TC");
    }

    #[test]
    fn user_partitioning_uses_the_given_partition() {
        let defs = Defs::new(true);
        let d = def(6, PartitionScheme::User);
        defs.learn(&d);
        let mut op = KeyOp::read(6, key(1));
        op.partition = Some(6);
        assert_eq!(instance_for_ops(&defs, &[op.clone()], 4, 0), 2);
        // Not learnt: the caller's partition still counts.
        assert_eq!(instance_for_ops(&Defs::new(true), &[op], 4, 0), 2);
        // The key alone does not say where a RANGE/LIST row lives.
        assert_eq!(key_partition(&d, &key(1)), None);
    }

    #[test]
    fn no_partition_spreads_by_handle() {
        let defs = Defs::new(true);
        // Unknown table, no partition given.
        assert_eq!(instance_for_ops(&defs, &[KeyOp::read(9, key(1))], 4, 7), 3);
        // Unique-index access: LQH finds the partition.
        let d = def(5, PartitionScheme::Key { columns: vec![] });
        defs.learn(&d);
        let u = KeyOp { key: KeyAccess::Unique { index: 1, values: key(1) }, ..KeyOp::read(5, vec![]) };
        assert_eq!(instance_for_ops(&defs, &[u], 4, 6), 2);
        // After a drop the definition is gone.
        defs.forget("t5");
        assert_eq!(instance_for_ops(&defs, &[KeyOp::read(5, key(1))], 4, 5), 1);
        assert_eq!(instance_for_ops(&defs, &[], 4, 5), 1);
    }

    #[test]
    fn scans_pruned_to_one_partition() {
        let defs = Defs::new(true);
        let mut spec = ScanSpec::full(5);
        assert_eq!(tc_instance(scan_partition(&defs, &spec).part, 4, 9), 1);
        spec.partitions = Some(vec![7]);
        assert_eq!(tc_instance(scan_partition(&defs, &spec).part, 4, 9), 3);
        spec.partitions = Some(vec![7, 2]);
        assert_eq!(tc_instance(scan_partition(&defs, &spec).part, 4, 9), 1);
    }
}
