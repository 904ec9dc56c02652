//! Signals of the cluster layer: membership (QMGR), distribution (DIH), the
//! cluster-wide dictionary (DICT master <-> DICT), and the requests blocks
//! make of their host (connections, shutdown, the arbitrator).
//!
//! Every data node runs QMGR, DIH and DICT; one of the nodes, the president
//! (the oldest member), is also the master of DIH and DICT. Each signal's doc
//! says sender -> receiver and the reply.
//!
//! ## Membership (QMGR)
//! The host reports data-node connections (`ConnectRep` / `DisconnectRep`,
//! priority A). QMGR forms the cluster with the other QMGRs (`Qmgr(..)`
//! messages, owned by the QMGR block), heartbeats its peers, and runs the
//! node-failure protocol: all survivors agree on one membership change at a
//! time, asking the arbitrator (`ArbitReq` to the host's MGM block) when the
//! survivors cannot know they are the only part of the cluster left. It
//! tells the node's other blocks what changed: `ClusterStartedRep` once, then
//! `NodeJoinedRep` / `NodeFailRep`, each with the new [`Membership`]. Blocks
//! learn who the master is from `Membership::president`.
//!
//! ## Distribution (DIH)
//! DIH keeps the [`Dist`] (node groups and replica states) and sends every new
//! version to the node's TC, LQH and DICT instances (`DistRep`, confirmed by
//! `DistConf`). A node failure changes it the same way at every DIH (the
//! failed nodes become `Dead`). A node restart is driven by the master DIH:
//! the starting node asks (`DihStartReq`) once its DICT has the schema; the
//! master makes it `Starting` everywhere (`DihUpdateReq` / `Conf`: each DIH
//! confirms only after its TC/LQH/DICT confirmed the new `Dist`), copies every
//! partition it holds from the partition's primary (`CopyFragReq` to LQH, see
//! `internal`: only the rows changed since the node's restored GCI for the
//! tables it kept from its files), then makes it `Alive` everywhere.
//!
//! `Dist::version` is `generation << 20 | n`: a node failure sets it to the
//! new membership generation's base at every DIH alike, and the master
//! numbers its updates within a generation, so all DIHs agree on versions.

use crate::dist::Dist;
use crate::schema::{TableDef, TableId};
use norr_kernel::NodeId;
use serde::{Deserialize, Serialize};

/// The cluster's members as QMGR agreed them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Membership {
    /// Bumped by every change (a join, a failure, a graceful leave).
    pub generation: u64,
    /// Live data nodes, ascending.
    pub members: Vec<NodeId>,
    /// The oldest member: runs the node-failure and join protocols and is the
    /// master of DIH (global checkpoints, node restarts) and DICT (DDL).
    pub president: NodeId,
}

impl Membership {
    pub fn contains(&self, node: NodeId) -> bool {
        self.members.binary_search(&node).is_ok()
    }
}

/// Why a node must stop (`HostShutdownReq`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ShutdownReason {
    /// The survivors of a failure lost arbitration, or the arbitrator could
    /// not be reached: the other part of the cluster may be serving.
    LostArbitration(String),
    /// Every replica of some partition is gone: serving would give partial data.
    NodeGroupLost(Vec<NodeId>),
    /// The other members declared this node failed (it was cut off or hung).
    Excluded(String),
    /// This node's configuration differs from the cluster's.
    ConfigMismatch(String),
    /// Asked by the operator (`norr mgm stop`), after a graceful leave.
    Requested,
    /// An internal error that makes continuing unsafe.
    Fatal(String),
}

/// A membership and the join order behind it: what QMGR agrees on per
/// generation. `order` lists the members oldest first (the president is
/// `order[0]`, and when it fails every survivor picks the same successor).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterView {
    pub membership: Membership,
    pub order: Vec<NodeId>,
}

/// A proposal number of QMGR's membership protocol, unique per proposer:
/// ordered by `round`, then by `node`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Ballot {
    pub round: u32,
    pub node: NodeId,
}

/// One change of the membership: the step from generation g to g + 1.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MembershipChange {
    /// Generation 0 -> 1: the starting nodes `members` form the cluster.
    Form { members: Vec<NodeId> },
    /// `node` joins a running cluster (it then does a node restart).
    Join { node: NodeId },
    /// `node` leaves on purpose (`norr mgm stop`).
    Leave { node: NodeId },
    /// `failed` are cut off: crashed, hung or unreachable.
    Fail { failed: Vec<NodeId> },
}

/// What a data node's QMGR is doing, as it tells a starting node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PeerState {
    /// The host has not started it yet.
    Idle,
    /// Looking for a cluster, or forming one with the other starting nodes.
    Starting,
    /// A member of a running cluster.
    Member(ClusterView),
}

/// Messages between the QMGR blocks of data nodes (and a few a QMGR sends
/// itself). Owned by the QMGR block: `norr_cluster::qmgr` describes the
/// protocol. Every message from a peer is priority A.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum QmgrMsg {
    /// Member -> every other member, each heartbeat interval. Any message of
    /// a member counts as a heartbeat.
    Heartbeat {
        generation: u64,
    },
    /// Starting node -> every connected data node: is a cluster running?
    /// Reply `Presence`.
    PresenceReq {
        node: NodeId,
    },
    Presence {
        node: NodeId,
        state: PeerState,
    },
    /// Starting node -> president: let me join. Reply `CmRegConf` once every
    /// member agreed (generation + 1), or `CmRegRef`.
    CmRegReq {
        node: NodeId,
    },
    CmRegConf {
        view: ClusterView,
    },
    /// `retry`: try again later (a change in progress, the node's previous
    /// life not yet cleaned up); else the node may not join at all.
    CmRegRef {
        node: NodeId,
        reason: String,
        retry: bool,
    },
    /// The host -> its own QMGR, and that QMGR -> the president: `node`
    /// leaves the cluster on purpose. No reply on success: the leaving node
    /// shuts down (`HostShutdownReq { Requested }`) once every member agreed.
    LeaveReq {
        node: NodeId,
    },
    /// President -> leaving node (`retry`: try again later), and a refused
    /// leave -> the host that asked.
    LeaveRef {
        node: NodeId,
        reason: String,
        retry: bool,
    },
    /// Member -> the president as it sees it: these members failed (any
    /// member's report is enough to exclude a node).
    FailRep {
        generation: u64,
        failed: Vec<NodeId>,
        reason: String,
    },
    /// Phase 1 of a change of `generation`, coordinator (the acting
    /// president) -> the quorum (the members not in `failed`, itself
    /// included): promise `ballot`, cut `failed` off. `current`: the
    /// coordinator's view, for a member that missed the last change.
    /// Reply `PrepChangeConf` (with the change this member accepted, if
    /// any, and every node it believes failed) or `PrepChangeRef`.
    PrepChangeReq {
        generation: u64,
        ballot: Ballot,
        failed: Vec<NodeId>,
        current: Option<ClusterView>,
    },
    PrepChangeConf {
        generation: u64,
        ballot: Ballot,
        accepted: Option<(Ballot, MembershipChange)>,
        failed: Vec<NodeId>,
    },
    /// The member promised a higher ballot.
    PrepChangeRef {
        generation: u64,
        ballot: Ballot,
        promised: Ballot,
    },
    /// Phase 2, coordinator -> quorum: accept `change` (after the survivors
    /// were found allowed to go on). Reply `AcceptChangeConf` / `Ref`.
    AcceptChangeReq {
        generation: u64,
        ballot: Ballot,
        change: MembershipChange,
    },
    AcceptChangeConf {
        generation: u64,
        ballot: Ballot,
    },
    AcceptChangeRef {
        generation: u64,
        ballot: Ballot,
        promised: Ballot,
    },
    /// Phase 3, coordinator -> quorum: every one accepted; `view` is the new
    /// generation.
    ChangeDecided {
        view: ClusterView,
        change: MembershipChange,
    },
    /// Reply to a message of an older generation: the sender missed changes.
    Catchup {
        view: ClusterView,
    },
    /// To a node this member declared failed (sent before the connection is
    /// closed, so a hung node reads it when it wakes up).
    YouAreExcluded {
        generation: u64,
        reason: String,
    },
    /// Coordinator -> quorum: the survivors of a failure may not go on
    /// (a node group lost, or arbitration lost): shut down.
    Stop {
        generation: u64,
        ballot: Ballot,
        reason: ShutdownReason,
    },
    /// QMGR -> itself (delayed): heartbeats, time-outs, retries.
    Tick,
    /// QMGR -> itself (delayed): the arbitrator did not answer in time.
    ArbitTimeout {
        generation: u64,
        ballot: Ballot,
    },
}

/// How a data node starts (the host decides from its data directory).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StartKind {
    /// No local data: a new cluster, or a node restart that copies every row.
    Initial,
    /// Local files to restore from (system restart or node restart).
    FromDisk,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ClusterSignal {
    /// QMGR -> its node's TCs (A), every heartbeat tick while the node ran
    /// without a stall and heard from every member since its last one: it
    /// is a member at least until `until_ns` (its own clock). The others
    /// declare a node failed only after `missed_heartbeats` intervals
    /// without a message from it, and the lease ends before that, so a
    /// node that was frozen (SIGSTOP, a long stall) serves nothing from its
    /// replicas after it wakes until it knows it is still a member: the
    /// others may have excluded it and changed the rows meanwhile.
    ServeLeaseRep {
        until_ns: u64,
    },
    // ---------------- host <-> QMGR ----------------
    /// Host -> QMGR (A): the host is up; form or join the cluster.
    QmgrStartReq {
        kind: StartKind,
    },
    /// Host -> QMGR (A): a connection to data node `node` is up.
    ConnectRep {
        node: NodeId,
    },
    /// Host -> QMGR (A): the connection to data node `node` broke.
    DisconnectRep {
        node: NodeId,
    },
    /// QMGR -> host: cut the connection to `node` and refuse it until it
    /// restarts (it was declared failed).
    HostDisconnectReq {
        node: NodeId,
    },
    /// Any block -> host: stop this node's blocks; `restart`: start them again
    /// as a node restart (the process stays).
    HostShutdownReq {
        reason: ShutdownReason,
        restart: bool,
    },
    /// QMGR -> QMGR (between nodes).
    Qmgr(QmgrMsg),
    /// QMGR (president) -> MGM (the host's link to the arbitrator): may these
    /// survivors go on? Reply `ArbitConf`. The host answers `granted: false`
    /// when it has no arbitrator to ask.
    ArbitReq {
        generation: u64,
        survivors: Vec<NodeId>,
        failed: Vec<NodeId>,
    },
    ArbitConf {
        generation: u64,
        granted: bool,
        reason: String,
    },

    // ---------------- QMGR -> the node's blocks (A) ----------------
    /// This node is a member of a running cluster (sent once per node start).
    /// `joined`: it joined a cluster that was already running (it must copy
    /// its replicas: a node restart); false: it formed the cluster with the
    /// others (an initial or system start).
    ClusterStartedRep {
        membership: Membership,
        kind: StartKind,
        joined: bool,
    },
    /// `node` joined.
    NodeJoinedRep {
        node: NodeId,
        membership: Membership,
    },
    /// `failed` left the cluster (crashed, cut off or stopped): every block
    /// finishes or aborts what it was doing with them.
    NodeFailRep {
        failed: Vec<NodeId>,
        membership: Membership,
    },
    /// TC -> its node's QMGR, and take-over TC -> every member's TC: the
    /// transactions whose coordinator was on `node` are all finished (taken
    /// over). QMGR lets a failed node join again only after this (its new
    /// transactions reuse transaction ids of the old one).
    NfCompleteRep {
        node: NodeId,
    },

    // ---------------- DIH ----------------
    /// DIH -> TC, LQH, DICT instances of its node (A): the distribution is
    /// now `dist`. Reply `DistConf`.
    DistRep {
        dist: Box<Dist>,
    },
    DistConf {
        version: u64,
    },
    /// Starting node's DIH -> master DIH: this node has the schema; start
    /// its node restart. The master answers `DihStartConf` when the node is
    /// `Alive` (or `DihStartRef`).
    /// `restored_gci`: Some(g) if the node restored a complete copy of its
    /// partitions up to GCI g from its files (every commit with a GCI up to
    /// g is in its rows); `kept`: the tables whose restored rows it kept
    /// (schema unchanged). Those partitions are copied as a delta: only
    /// rows written after g in full (`CopyFragReq::since_gci`).
    DihStartReq {
        node: NodeId,
        restored_gci: Option<crate::ckpt::Gci>,
        kept: Vec<TableId>,
    },
    DihStartConf {
        node: NodeId,
        dist: Box<Dist>,
    },
    DihStartRef {
        node: NodeId,
        reason: String,
        retry: bool,
    },
    /// Master DIH -> every member's DIH: adopt `dist` (a node restart moved a
    /// node to `Starting` or `Alive`). Reply `DihUpdateConf` once the node's
    /// TC, LQH and DICT confirmed it (`DistConf`), so that when the master has
    /// every answer, no operation is routed with an older distribution.
    DihUpdateReq {
        dist: Box<Dist>,
    },
    DihUpdateConf {
        version: u64,
    },
    /// DICT -> its node's DIH: the schema is in place (a joining node synced
    /// it from the master DICT): the node restart may begin.
    DictSyncedRep {
        node: NodeId,
    },
    /// Master DIH -> starting node's DIH: progress of its restart (phase
    /// name and milliseconds it took), for `norr mgm show`.
    DihRestartPhaseRep {
        node: NodeId,
        phase: String,
        duration_ms: u64,
    },
    /// Master DIH -> itself: go on with the running node restart (after a
    /// retry delay, or a partition that needs no copy).
    DihRestartStep,
    /// DIH -> its host: how the node stands (after every change).
    NodeStatusRep(Box<NodeStatus>),
    /// CKPT -> its host (a cluster node with a data directory): the GCI a
    /// restart of this node's files recovers to (its system file's last
    /// complete GCI; at start, the GCI it was restored to), and whether the
    /// files are a complete copy of its partitions (false: a node restart
    /// copied rows not yet covered by a local checkpoint, or the files
    /// could not be restored whole; a restart then copies from a live
    /// replica). For `norr mgm show`.
    DurableGciRep {
        gci: crate::ckpt::Gci,
        complete_copy: bool,
    },

    // ---------------- DICT master <-> DICT ----------------
    /// DICT -> master DICT: a client's dictionary request, to be answered by
    /// the master directly to `api`.
    DictForwardReq {
        api: norr_kernel::BlockRef,
        req: Box<crate::api::DictReq>,
    },
    /// Master DICT -> every other DICT: schema changes, so each node can
    /// answer reads and any can become master.
    DictStateRep(Box<DictState>),
    /// Starting node's DICT -> master DICT: send me the whole schema. Reply
    /// `DictSyncConf` (queued behind any DDL in progress).
    DictSyncReq {
        node: NodeId,
    },
    DictSyncConf(Box<DictState>),
    /// DICT -> master DICT: a `DictStateRep` with `ack` is in this node's
    /// schema file (or the node keeps no files): the master answers the DDL
    /// once every other live DICT said so.
    DictStateAck {
        node: NodeId,
    },
    /// Master DICT -> every other DICT, before a DDL reaches any LQH: the
    /// change it is about to make (ids and versions assigned). Reply
    /// `DictPendingConf`. The change stays pending here until the master's
    /// `DictStateRep` of it (or a full one) or `DictPendingClearRep`; a DICT
    /// that becomes master with a change pending finishes it (the old
    /// master may have died with some LQHs changed and others not).
    DictPendingReq {
        change: Box<crate::internal::SchemaChange>,
        /// The request that began it: the master's client (a DICT that
        /// passed a request on, and its id for it).
        origin: (norr_kernel::BlockRef, u32),
    },
    DictPendingConf {
        node: NodeId,
    },
    /// Master DICT -> every other DICT: the pending change was refused and
    /// undone; forget it.
    DictPendingClearRep,
    /// New master DICT -> every other DICT: it took over, and finishes the
    /// change begun by `finishing` (None: no change was half done). Each
    /// DICT then settles the requests it had passed on to the failed master
    /// (`dict_proxy.rs` in norr-txn).
    DictTakeoverRep {
        finishing: Option<(norr_kernel::BlockRef, u32)>,
    },
    /// CKPT -> its node's DICT: this node restarted from its files into a
    /// restarting cluster at the cluster's restart GCI (it is not behind
    /// it). The master DICT then settles a schema change announced before
    /// every node stopped (norr-txn's `Dict::take_over`).
    SystemRestartedRep,
    /// DICT -> master DICT: the AUTO_INCREMENT mark of `DictStateRep`
    /// `mark_seq` = `seq` is in this node's schema file (or the node keeps
    /// no files): the master hands out values below it once every other
    /// live DICT said so.
    DictMarkAck {
        node: NodeId,
        seq: u64,
    },
    /// CKPT -> its host, on a lone data node whose REDO log or system file
    /// failed (a cluster node leaves instead): global checkpoints stopped,
    /// nothing committed from now on becomes durable, and the node's LQHs
    /// refuse writes; the host logs it. A restart is needed.
    DurabilityLostRep {
        why: String,
    },
    /// QMGR -> its node's TCs (A), local only: this node suspects
    /// `suspected` failed, so the serve lease ends now, not when it would
    /// have run out. Until the failure round decides (and QMGR renews the
    /// lease at once, `ServeLeaseRep`), the TCs take no new transaction or
    /// scan. Why: a connection that closes under two live nodes (a cut that
    /// resets it) lets the side that wins arbitration take over at once,
    /// while the losing side's lease would still have let it answer reads
    /// from rows the winner goes on to change. Both sides see the close at
    /// about the same moment, so the loser stops serving before the winner's
    /// round can end.
    ServeLeaseRevokedRep {
        suspected: Vec<NodeId>,
    },
    /// Master DICT -> the DICT of a node whose LQH refused a schema change
    /// that other nodes' LQHs made and that cannot be undone (TRUNCATE,
    /// DROP TABLE, DROP INDEX: the rows are gone there). Its replicas no
    /// longer match the others', so the node leaves and comes back as a
    /// node restart, which copies the table from a live replica
    /// (`leave_and_restart`); the DDL is committed without it.
    DictLeaveReq {
        why: String,
    },
    /// CKPT -> its host, local only: the restarting cluster's master chose
    /// `gci` as the system restart GCI and this node restarts to it; its
    /// own files restored `restored` (lower when it rolls forward through
    /// its REDO log to a GCI another node recorded). The host logs it: the
    /// GCI every transaction up to which is in the restarted cluster.
    SystemRestartRep {
        gci: crate::ckpt::Gci,
        restored: crate::ckpt::Gci,
    },
}

/// What a block sends its node's host (`block::HOST`, priority A) when the
/// node can no longer be a correct replica but the cluster can go on
/// without it: it leaves at once (a failure to the others) and starts again
/// as a node restart, which copies its partitions from live replicas.
/// `why` is logged.
pub fn leave_and_restart(node: NodeId, why: String) -> (norr_kernel::BlockRef, crate::Signal) {
    let host = norr_kernel::BlockRef::new(node, crate::block::HOST, 0);
    let req = ClusterSignal::HostShutdownReq { reason: ShutdownReason::Fatal(why), restart: true };
    (host, crate::Signal::Cluster(Box::new(req)))
}

/// What a data node shows of itself (`norr mgm show`): DIH tells its host
/// whenever it changes (`NodeStatusRep`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStatus {
    /// Member of a running cluster, with its replicas up to date.
    pub started: bool,
    /// What it is doing now ("starting", "copying rows", "started", ...).
    pub phase: String,
    /// Start or restart phases done, with their durations in milliseconds.
    pub phases: Vec<(String, u64)>,
    pub president: Option<NodeId>,
    pub node_group: Option<u32>,
    /// Partitions (of every table) this node is primary for, of those its
    /// node group holds.
    pub primary_partitions: u32,
    pub partitions: u32,
    /// Data nodes alive in the distribution.
    pub alive_nodes: Vec<NodeId>,
    pub dist_version: u64,
}

/// The dictionary's replicated state (whole, or the change of one DDL).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DictState {
    /// Tables created or changed (their full definition).
    pub upsert: Vec<TableDef>,
    /// Tables dropped.
    pub remove: Vec<TableId>,
    pub next_table_id: TableId,
    pub next_index_id: crate::schema::IndexId,
    /// Per table: AUTO_INCREMENT values below this may have been handed out
    /// (a new master continues from here).
    pub auto_inc_high: Vec<(TableId, u64)>,
    /// True: a full snapshot (replace everything), false: a change.
    pub full: bool,
    /// The change of a DDL: the master answers the DDL only once this DICT
    /// has it in its schema file (`DictStateAck`). False: an
    /// AUTO_INCREMENT mark, written in the background.
    pub ack: bool,
    /// Non-zero: the change carries AUTO_INCREMENT marks the master waits
    /// to hear are held here (`DictMarkAck` with this number).
    pub mark_seq: u64,
    /// The change of a DDL: the request that asked for it (a DICT that
    /// passed a client's request on, and its id), so that DICT can answer
    /// should the master's answer be lost with the master.
    pub origin: Option<(norr_kernel::BlockRef, u32)>,
}
