//! DIH: the distribution of a data node's cluster, and node restarts.
//!
//! Every node's DIH holds the same [`Dist`] (node groups, one replica state
//! per data node) and hands each new version to the node's TC, LQH and DICT
//! instances (`DistRep`, confirmed by `DistConf`); from it they compute every
//! partition's replica chain (`norr_signals::dist`).
//!
//! How the distribution changes:
//! * cluster start (`ClusterStartedRep`, not joined): the members are
//!   `Alive`, every other configured node `Dead`;
//! * node failure (`NodeFailRep`): the failed nodes become `Dead`, at every
//!   DIH alike, version `generation << 20`;
//! * node restart, driven by the master DIH (the president's): the joining
//!   node asks to start once its DICT has the schema (`DihStartReq`); the
//!   master makes it `Starting` at every member (`DihUpdateReq`, each DIH
//!   confirming only once its local blocks confirmed: after that no
//!   operation is prepared along a chain without it), copies each partition
//!   it holds from the partition's primary (`CopyFragReq`, one at a time;
//!   a delta of the rows changed since the node's restored GCI for the
//!   tables it kept from its files, see `restart.rs`), then makes it
//!   `Alive` everywhere and tells it (`DihStartConf`). One
//!   restart runs at a time; others queue. The master numbers its updates
//!   `generation << 20 | n`.
//!
//! If the master fails during a restart, the starting node gives up and
//! restarts (its peers then see it fail and mark it `Dead`); if the starting
//! node fails, the master drops the restart; if a copy's source fails, the
//! master copies that partition again from the new primary.

mod restart;

use norr_kernel::counters::Counters;
use norr_kernel::{Block, BlockRef, Ctx, Envelope, NodeId, Priority};
use norr_knobs::Knobs;
use norr_signals::ckpt::Gci;
use norr_signals::cluster::{ClusterSignal, Membership, NodeStatus, ShutdownReason};
use norr_signals::dist::{Dist, ReplicaState};
use norr_signals::internal::{BlockStats, InternalSignal, SchemaChange};
use norr_signals::schema::{TableDef, TableId};
use norr_signals::{block, Signal};
use restart::MasterState;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Bits of `Dist::version` below the membership generation.
pub const VERSION_GEN_SHIFT: u32 = 20;

fn cluster(s: ClusterSignal) -> Signal {
    Signal::Cluster(Box::new(s))
}

/// A distribution being handed to the local blocks.
struct Publish {
    version: u64,
    waiting: usize,
    /// The master DIH waiting for `DihUpdateConf`, if the change came from it.
    reply_to: Option<BlockRef>,
}

/// This node's own restart (it joined a running cluster).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OwnRestart {
    /// Joined; waiting for DICT to sync the schema.
    Schema { since_ns: u64 },
    /// Asked the master; its rows are being copied.
    Copy { since_ns: u64 },
    /// Done: alive.
    Done,
}

pub struct Dih {
    node: NodeId,
    lqh_instances: u16,
    dist: Dist,
    membership: Option<Membership>,
    /// Tables as DICT announced them (the master copies their partitions at a
    /// node restart).
    tables: BTreeMap<TableId, Arc<TableDef>>,
    /// A restart from local files: the tables restored, and the GCI every
    /// commit up to which the restored rows hold (None: nothing
    /// restorable). At a node restart, the tables whose cluster definition
    /// is the restored one keep their rows (LQH decides the same, see
    /// norr-txn's `lqh/resync.rs`) and are copied as a delta.
    restored: BTreeMap<TableId, Arc<TableDef>>,
    restored_gci: Option<Gci>,
    /// Blocks of this node that get every `Dist`: TC and LQH instances, DICT.
    subscribers: Vec<BlockRef>,
    publishing: Option<Publish>,
    /// A newer distribution that came while one was being published.
    queued: Option<(Dist, Option<BlockRef>)>,
    master: MasterState,
    own: Option<OwnRestart>,
    /// This node's start and restart phases with their durations (ms).
    phases: Vec<(String, u64)>,
    counters: Counters,
}

impl Dih {
    /// DIH of data node `node` in a cluster of `node_groups` (every data
    /// node, in configuration order), telling `subscribers` (the node's TC
    /// and LQH instances and DICT) of every distribution.
    pub fn new(
        node: NodeId,
        node_groups: Vec<Vec<NodeId>>,
        lqh_instances: u16,
        subscribers: Vec<BlockRef>,
        _knobs: &Knobs,
    ) -> Dih {
        assert!(node_groups.iter().flatten().any(|n| *n == node), "node {node} is not a data node of the cluster");
        assert!(subscribers.iter().all(|s| s.node == node), "DIH publishes to its own node only");
        let mut dist = Dist::new(node_groups, ReplicaState::Dead);
        dist.version = 0;
        Dih {
            node,
            lqh_instances,
            dist,
            membership: None,
            tables: BTreeMap::new(),
            restored: BTreeMap::new(),
            restored_gci: None,
            subscribers,
            publishing: None,
            queued: None,
            master: MasterState::default(),
            own: None,
            phases: Vec::new(),
            counters: Counters::default(),
        }
    }

    /// A restarted node's tables (from its schema file), before the first
    /// signal: the master copies their partitions at node restarts.
    pub fn restore_tables(&mut self, defs: &[TableDef]) {
        for d in defs {
            self.tables.insert(d.id, Arc::new(d.clone()));
            self.restored.insert(d.id, Arc::new(d.clone()));
        }
    }

    /// A restarted node's restored rows hold every commit up to `gci`
    /// (None: its files are not a complete copy): a node restart copies
    /// only what changed since.
    pub fn set_restored_gci(&mut self, gci: Option<Gci>) {
        self.restored_gci = gci;
    }

    pub fn dist(&self) -> &Dist {
        &self.dist
    }

    fn is_master(&self) -> bool {
        self.membership.as_ref().is_some_and(|m| m.president == self.node)
    }

    fn dih_ref(node: NodeId) -> BlockRef {
        BlockRef::new(node, block::DIH, 0)
    }

    /// Adopt `dist` and hand it to the local blocks; `reply_to`: answer the
    /// master once they confirmed.
    fn publish(&mut self, dist: Dist, reply_to: Option<BlockRef>, ctx: &mut Ctx<'_, Signal>) {
        if self.publishing.is_some() {
            // One at a time, so confirmations are never mixed up; a newer
            // one replaces a queued one (whose master is answered then too:
            // the newer version includes its change).
            if let Some((_, Some(old))) = self.queued.take() {
                let version = dist.version;
                ctx.send(old, cluster(ClusterSignal::DihUpdateConf { version }));
            }
            self.queued = Some((dist, reply_to));
            return;
        }
        assert!(
            dist.version >= self.dist.version,
            "distribution went back from {} to {}",
            self.dist.version,
            dist.version
        );
        self.dist = dist;
        self.counters.bump("dih: distributions published");
        let version = self.dist.version;
        for s in &self.subscribers {
            ctx.send_prio(*s, cluster(ClusterSignal::DistRep { dist: Box::new(self.dist.clone()) }), Priority::A);
        }
        self.publishing = Some(Publish { version, waiting: self.subscribers.len(), reply_to });
        if self.subscribers.is_empty() {
            self.published(ctx);
        }
    }

    fn on_dist_conf(&mut self, version: u64, ctx: &mut Ctx<'_, Signal>) {
        let Some(p) = self.publishing.as_mut() else {
            debug_assert!(false, "DistConf {version} with nothing published");
            return;
        };
        debug_assert_eq!(p.version, version, "DistConf for another version");
        p.waiting -= 1;
        if p.waiting == 0 {
            self.published(ctx);
        }
    }

    /// Tell the host how the node stands (for `norr mgm show`).
    fn report_status(&self, ctx: &mut Ctx<'_, Signal>) {
        let started = matches!(self.own, Some(OwnRestart::Done)) && self.dist.state(self.node) == ReplicaState::Alive;
        let phase = match self.own {
            None => "joining the cluster",
            Some(OwnRestart::Schema { .. }) => "syncing the schema",
            Some(OwnRestart::Copy { .. }) => "copying rows from live replicas",
            Some(OwnRestart::Done) if started => "started",
            Some(OwnRestart::Done) => "starting",
        };
        let (mut primary, mut total) = (0u32, 0u32);
        for def in self.tables.values() {
            for p in 0..def.partitions {
                if self.dist.holds(def, p, self.node) {
                    total += 1;
                    if self.dist.primary(def, p) == Some(self.node) {
                        primary += 1;
                    }
                }
            }
        }
        let status = NodeStatus {
            started,
            phase: phase.to_string(),
            phases: self.phases.clone(),
            president: self.membership.as_ref().map(|m| m.president),
            node_group: self.dist.node_group_of(self.node).map(|g| g as u32),
            primary_partitions: primary,
            partitions: total,
            alive_nodes: self.dist.states.iter().filter(|(_, s)| **s == ReplicaState::Alive).map(|(n, _)| *n).collect(),
            dist_version: self.dist.version,
        };
        let host = BlockRef::new(self.node, block::HOST, 0);
        ctx.send(host, cluster(ClusterSignal::NodeStatusRep(Box::new(status))));
    }

    fn published(&mut self, ctx: &mut Ctx<'_, Signal>) {
        self.report_status(ctx);
        let p = self.publishing.take().expect("publishing");
        if let Some(master) = p.reply_to {
            ctx.send(master, cluster(ClusterSignal::DihUpdateConf { version: p.version }));
        }
        if let Some((dist, reply_to)) = self.queued.take() {
            self.publish(dist, reply_to, ctx);
        }
    }

    fn generation_base(m: &Membership) -> u64 {
        m.generation << VERSION_GEN_SHIFT
    }

    fn on_cluster_started(&mut self, m: Membership, joined: bool, ctx: &mut Ctx<'_, Signal>) {
        assert!(m.contains(self.node), "started in a cluster without this node");
        self.membership = Some(m.clone());
        if joined {
            // A node restart: the master tells us the distribution once we
            // ask to start (after DICT has the schema).
            self.own = Some(OwnRestart::Schema { since_ns: ctx.now_ns() });
            self.phases.push(("join cluster".into(), 0));
            return;
        }
        let mut dist = self.dist.clone();
        for n in dist.data_nodes().collect::<Vec<_>>() {
            let s = if m.contains(n) { ReplicaState::Alive } else { ReplicaState::Dead };
            dist.states.insert(n, s);
        }
        dist.version = Self::generation_base(&m);
        if !dist.all_partitions_available() {
            // QMGR starts a cluster only with a node of every node group.
            let reason = format!("cluster started without a node of every node group: {:?}", m.members);
            return self.shut_down(ShutdownReason::Fatal(reason), false, ctx);
        }
        self.own = Some(OwnRestart::Done);
        self.phases.push(("start cluster".into(), 0));
        self.publish(dist, None, ctx);
    }

    fn on_node_fail(&mut self, failed: Vec<NodeId>, m: Membership, ctx: &mut Ctx<'_, Signal>) {
        let old_president = self.membership.as_ref().map(|o| o.president);
        self.membership = Some(m.clone());
        self.counters.bump("dih: node failures");
        if let Some(OwnRestart::Schema { .. } | OwnRestart::Copy { .. }) = self.own {
            if old_president.is_some_and(|p| failed.contains(&p)) {
                // The master that ran our restart is gone: start over.
                crate::probe!(self.counters, "dih: restart lost its master");
                let reason = ShutdownReason::Fatal("the master node failed during this node's restart".into());
                return self.shut_down(reason, true, ctx);
            }
        }
        let mut dist = self.latest_dist().clone();
        for f in &failed {
            dist.states.insert(*f, ReplicaState::Dead);
        }
        dist.version = dist.version.max(Self::generation_base(&m));
        if !dist.all_partitions_available() {
            let lost: Vec<NodeId> = failed.clone();
            return self.shut_down(ShutdownReason::NodeGroupLost(lost), false, ctx);
        }
        self.publish(dist, None, ctx);
        if self.is_master() {
            self.master_node_fail(&failed, ctx);
        }
    }

    /// The newest distribution this DIH knows (a queued one counts).
    fn latest_dist(&self) -> &Dist {
        self.queued.as_ref().map_or(&self.dist, |(d, _)| d)
    }

    fn shut_down(&mut self, reason: ShutdownReason, restart: bool, ctx: &mut Ctx<'_, Signal>) {
        let host = BlockRef::new(self.node, block::HOST, 0);
        ctx.send_prio(host, cluster(ClusterSignal::HostShutdownReq { reason, restart }), Priority::A);
    }

    fn on_update_req(&mut self, from: BlockRef, dist: Dist, ctx: &mut Ctx<'_, Signal>) {
        let current = self.latest_dist().version;
        if dist.version <= current && current != 0 {
            // Older than what we have (a failure overtook it): the master
            // sends a newer one after the failure; confirm this one anyway.
            crate::probe!(self.counters, "dih: stale distribution update");
            ctx.send(from, cluster(ClusterSignal::DihUpdateConf { version: dist.version }));
            return;
        }
        self.publish(dist, Some(from), ctx);
    }

    fn on_dict_synced(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let Some(OwnRestart::Schema { since_ns }) = self.own else {
            debug_assert!(false, "DICT synced outside a node restart");
            return;
        };
        let ms = (ctx.now_ns() - since_ns) / 1_000_000;
        self.phases.push(("sync schema".into(), ms));
        self.own = Some(OwnRestart::Copy { since_ns: ctx.now_ns() });
        self.report_status(ctx);
        let master = self.membership.as_ref().expect("a member").president;
        // The tables whose restored rows LQH kept (the same test).
        let kept: Vec<TableId> = match self.restored_gci {
            None => Vec::new(),
            Some(_) => self
                .restored
                .values()
                .filter(|r| self.tables.get(&r.id).is_some_and(|d| d.keeps_restored_rows_of(r)))
                .map(|r| r.id)
                .collect(),
        };
        let restored_gci = self.restored_gci;
        let req = ClusterSignal::DihStartReq { node: self.node, restored_gci, kept };
        ctx.send(Self::dih_ref(master), cluster(req));
    }

    fn on_start_conf(&mut self, dist: Dist, ctx: &mut Ctx<'_, Signal>) {
        let Some(OwnRestart::Copy { since_ns }) = self.own else {
            debug_assert!(false, "DihStartConf outside a node restart");
            return;
        };
        let ms = (ctx.now_ns() - since_ns) / 1_000_000;
        self.phases.push(("copy rows and take over".into(), ms));
        self.own = Some(OwnRestart::Done);
        self.counters.bump("dih: node restart done");
        debug_assert_eq!(dist.state(self.node), ReplicaState::Alive);
        if dist.version > self.latest_dist().version {
            self.publish(dist, None, ctx);
        } else {
            // The master's update made this node `Alive` already: the host
            // hears it is started now (publishing reports it otherwise).
            self.report_status(ctx);
        }
    }

    fn on_schema_change(&mut self, change: &SchemaChange) {
        match change {
            SchemaChange::CreateTable(def)
            | SchemaChange::CreateIndex { def, .. }
            | SchemaChange::DropIndex { def, .. }
            | SchemaChange::AlterCommit { def }
            | SchemaChange::TruncateTable(def) => {
                self.tables.insert(def.id, Arc::new(def.clone()));
            }
            SchemaChange::DropTable(t) => {
                self.tables.remove(t);
            }
            SchemaChange::AlterTable { .. } | SchemaChange::AlterAbort(_) => {}
        }
    }

    fn stats(&self) -> BlockStats {
        let mut counters = self.counters.snapshot();
        counters.push(("dih: distribution version".into(), self.dist.version));
        let alive = self.dist.states.values().filter(|s| **s == ReplicaState::Alive).count();
        counters.push(("dih: alive nodes".into(), alive as u64));
        for (name, ms) in &self.phases {
            counters.push((format!("dih: phase ms: {name}"), *ms));
        }
        BlockStats { counters, ..BlockStats::default() }
    }
}

impl Block<Signal> for Dih {
    fn on_signal(&mut self, env: Envelope<Signal>, ctx: &mut Ctx<'_, Signal>) {
        let from = env.from;
        match env.signal {
            Signal::Cluster(sig) => match *sig {
                ClusterSignal::ClusterStartedRep { membership, joined, .. } => {
                    if joined {
                        // A node restart: the tables restored from this
                        // node's files give way to the cluster's (DICT's
                        // sync announces them again).
                        self.tables.clear();
                    }
                    self.on_cluster_started(membership, joined, ctx)
                }
                ClusterSignal::NodeJoinedRep { membership, .. } => self.membership = Some(membership),
                ClusterSignal::NodeFailRep { failed, membership } => self.on_node_fail(failed, membership, ctx),
                ClusterSignal::DistConf { version } => self.on_dist_conf(version, ctx),
                ClusterSignal::DihUpdateReq { dist } => self.on_update_req(from, *dist, ctx),
                ClusterSignal::DihUpdateConf { version } => self.master_update_conf(from.node, version, ctx),
                ClusterSignal::DictSyncedRep { .. } => self.on_dict_synced(ctx),
                ClusterSignal::DihStartReq { node, restored_gci, kept } => {
                    self.master_start_req(node, restored_gci, kept, ctx)
                }
                ClusterSignal::DihRestartStep => self.master_step(ctx),
                ClusterSignal::DihRestartPhaseRep { phase, duration_ms, .. } => {
                    self.phases.push((phase, duration_ms));
                    self.report_status(ctx);
                }
                ClusterSignal::DihStartConf { dist, .. } => self.on_start_conf(*dist, ctx),
                ClusterSignal::DihStartRef { reason, .. } => {
                    crate::probe!(self.counters, "dih: node restart refused");
                    self.shut_down(ShutdownReason::Fatal(format!("node restart failed: {reason}")), true, ctx)
                }
                other => {
                    crate::probe!(self.counters, "dih: unexpected cluster signal");
                    debug_assert!(false, "DIH got unexpected {other:?}");
                }
            },
            Signal::Internal(sig) => match *sig {
                InternalSignal::SchemaChangeReq { req, change } => {
                    self.on_schema_change(&change);
                    self.report_status(ctx);
                    ctx.send(from, Signal::Internal(Box::new(InternalSignal::SchemaChangeConf { req, error: None })));
                }
                InternalSignal::CopyFragConf { req, table, part, rows, keys, deleted, bytes, missing_keys } => {
                    let done = restart::CopyDone { rows, keys, deleted, bytes, missing_keys };
                    self.master_copy_done(req, table, part, Ok(done), ctx)
                }
                InternalSignal::CopyFragRef { req, table, part, error } => {
                    self.master_copy_done(req, table, part, Err(error), ctx)
                }
                InternalSignal::StatsReq { req } => {
                    let stats = Box::new(self.stats());
                    ctx.send(from, Signal::Internal(Box::new(InternalSignal::StatsConf { req, stats })));
                }
                other => {
                    crate::probe!(self.counters, "dih: unexpected internal signal");
                    debug_assert!(false, "DIH got unexpected {other:?}");
                }
            },
            other => {
                crate::probe!(self.counters, "dih: unexpected signal");
                debug_assert!(false, "DIH got unexpected {}", other.name());
            }
        }
    }
}
