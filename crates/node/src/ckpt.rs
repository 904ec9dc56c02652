//! CKPT: the global checkpoint (GCP) protocol of `norr_signals::ckpt`.
//!
//! Every data node runs a CKPT block with two roles:
//! * **participant** (every node): carries each step of a GCP to the node's
//!   own TCs and LQHs, answers the master once all of them did, and writes
//!   the node's system file;
//! * **master** (the QMGR president; a node on its own is its own master):
//!   runs the rounds across every live data node.
//!
//! A round, every `gcp_interval_ms`, for a new GCI `g` above every GCI any
//! node tags commits with:
//! 1. `GcpPrepareReq { g }` to every node: their TCs hold back commit
//!    decisions.
//! 2. Once all confirmed, `GcpCommitReq { g }`: commits are tagged `g` from
//!    now on; each node reports `GcpTcFinishedRep { g - 1 }` once none of its
//!    TCs' transactions tagged below `g` is still committing.
//! 3. `GcpSaveReq { g - 1 }`: each node's LQHs make their REDO durable up to
//!    it.
//! 4. `GcpRecordReq { g - 1 }`: each node records `g - 1` as complete in its
//!    system file (A/B alternately, synced). A restart recovers to it.
//! 5. Once every node recorded it: `GcpCompleteRep { g - 1 }` to every
//!    node (its LQHs). Only now is `g - 1` reported complete anywhere.
//!
//! No node's system file names a GCI before every live node saved its REDO
//! up to it (step 4 follows step 3 everywhere).
//!
//! Failures: a node that fails during a round is dropped from it (the
//! master stops waiting for it), but no round moves from commit to save
//! until the failed node's transactions are taken over (`NfCompleteRep`
//! from the president's TC): the take-over commits them with the GCI their
//! coordinator gave them, which must not be saved before. When the master fails, the new president
//! takes over: it asks every member what it holds (`GcpStateReq`), then
//! runs a new round above every GCI any node tags commits with. That round
//! releases TCs still held by the old master's prepare, and its save and
//! record steps cover every GCI the old round left unfinished. A node that
//! joins is asked the same before its first round; until then its TCs are
//! held (a cluster node's CKPT holds them from the start), so it never
//! commits with a GCI the cluster has left behind.
//!
//! At a system restart the master picks the highest GCI that a node of
//! every node group holds, restored from its files or by rolling its REDO
//! log forward (`GcpStateConf::reachable`: GCIs whose saves a node's log
//! holds though its system file missed their record, as after a crash
//! between the groups' record writes), and tells every node that stays
//! (`GcpRestartGciReq`); the others restart and copy. A participant carries
//! out only the requests of the master that last asked its state.
//!
//! A node whose part of a GCP fails (its REDO log refused the save: an IO
//! failed, or a committed transaction found no room; or its system file
//! could not be written) cannot make commits durable any more. In a cluster
//! it leaves (`HostShutdownReq`, fatal, restart): the master keeps it in
//! the round until its failure drops it, and the survivors, which hold
//! every partition it held unless its node group is lost, go on completing
//! GCIs; its restart reads its files and copies what it missed from a live
//! replica. Before, one node's failed disk stopped every later GCP of the
//! whole cluster until someone restarted that node. A lone data node keeps
//! serving with GCPs stopped (nothing later can be called complete; commits
//! go on, network durable in its memory) and says why in its log.
//! Without a data directory the system file step is answered at once.

use norr_durability::sysfile::{NodeInfo, NodeRestartState, SysFile, SysFileStore};
use norr_kernel::counters::Counters;
use norr_kernel::{Block, BlockRef, Ctx, Envelope, NodeId, Priority};
use norr_knobs::Knobs;
use norr_signals::ckpt::{CkptSignal, Gci};
use norr_signals::cluster::{ClusterSignal, Membership, QmgrMsg};
use norr_signals::dist::ReplicaState;
use norr_signals::fs::{FileHandle, FsOp, FsResult, FsSignal};
use norr_signals::internal::{BlockStats, InternalSignal};
use norr_signals::{block, Signal};
use std::collections::{BTreeMap, BTreeSet};

/// The master's side: where the round is.
#[derive(Debug)]
enum Round {
    /// No round running (the timer starts the next).
    Idle,
    /// Asking these nodes what they hold before the next round.
    Sync {
        waiting: BTreeSet<NodeId>,
        system_restart: bool,
    },
    Prepare {
        gci: Gci,
        waiting: BTreeSet<NodeId>,
    },
    Commit {
        gci: Gci,
        waiting: BTreeSet<NodeId>,
    },
    Save {
        gci: Gci,
        waiting: BTreeSet<NodeId>,
    },
    Record {
        gci: Gci,
        waiting: BTreeSet<NodeId>,
        /// Every node records it (false: only those without a complete
        /// copy on disk, see `Ckpt::record_targets`).
        full: bool,
        /// The nodes asked to record it.
        targets: BTreeSet<NodeId>,
    },
    /// A save or system file write failed: no more GCPs.
    Stopped {
        why: String,
    },
}

/// What a node told the master of its state (`GcpStateConf`).
#[derive(Debug, Clone)]
struct NodeState {
    restored: Gci,
    restorable: bool,
    /// GCIs above `restored` its files can roll forward to (until it hears
    /// where the cluster restarts).
    reachable: Vec<Gci>,
}

impl NodeState {
    /// Its files can restore exactly GCI `c`.
    fn holds(&self, c: Gci) -> bool {
        self.restorable && (self.restored == c || self.reachable.contains(&c))
    }
}

/// The master's state (present while this node is the master).
#[derive(Debug)]
struct Master {
    round: Round,
    /// Nodes that told their state: the participants of the next round.
    known: BTreeMap<NodeId, NodeState>,
    /// Members still to ask (joined, or the round was busy when they came).
    to_sync: BTreeSet<NodeId>,
    timer_armed: bool,
    /// The highest GCI any participant tags commits with: the next round's
    /// GCI is above it.
    tagged: Gci,
}

/// The participant's side: the local step in progress for a master.
#[derive(Debug)]
enum Local {
    Idle,
    Prepare {
        gci: Gci,
        master: BlockRef,
        waiting: BTreeSet<BlockRef>,
    },
    /// Waiting for every TC to report nothing tagged `prev` or lower is
    /// still committing.
    Commit {
        prev: Gci,
        gci: Gci,
        master: BlockRef,
        waiting: BTreeSet<BlockRef>,
    },
    Save {
        gci: Gci,
        master: BlockRef,
        waiting: BTreeSet<BlockRef>,
    },
}

/// A system file write in flight (separate from `Local`: a new master's
/// steps may come while it runs; the file store takes one write at a time).
#[derive(Debug, Clone, Copy)]
struct Writing {
    gci: Gci,
    master: BlockRef,
    step: SysStep,
}

#[derive(Debug, Clone, Copy)]
enum SysStep {
    Open,
    Write(FileHandle),
    Close,
}

/// The system file of a node with a data directory.
pub struct SysState {
    pub sysfile: SysFile,
    pub store: SysFileStore,
}

pub struct Ckpt {
    node: NodeId,
    /// A data node on its own (no QMGR): always its own master.
    standalone: bool,
    /// DICT heard `SystemRestartedRep` (once per start).
    dict_told: bool,
    /// The host heard what the files held at start (`report_durable`).
    durable_reported: bool,
    tc_instances: u16,
    lqh_instances: u16,
    interval_ns: u64,
    /// The GCI this node's TCs tag commits with.
    current: Gci,
    /// The last complete GCI this node knows of.
    complete: Gci,
    /// What this node restored from its files at start (or rolled
    /// forward to at a system restart).
    restored: Gci,
    restorable: bool,
    /// GCIs above `restored` this node's files can roll forward to; kept
    /// (and the LQHs keep the records) until the node hears where the
    /// cluster restarts (`GcpRestartGciReq`), or its first GCP round comes
    /// without it (then it stays at `restored`).
    reachable: Vec<Gci>,
    /// This node joined a running cluster and copied its partitions: its
    /// REDO log lacks the copied rows, so its files are not a complete copy
    /// (until a local checkpoint covers them; see crates/node/src/lcp.rs).
    copied: bool,
    /// The last recorded LCP round when a copied node became alive (see
    /// `lcp_on_complete`).
    copied_lcp_floor: Option<u64>,
    membership: Option<Membership>,
    /// The cluster's node groups (configuration order).
    node_groups: Vec<Vec<NodeId>>,
    /// Replica states from DIH (cluster nodes), for the system file.
    replica_states: BTreeMap<NodeId, ReplicaState>,
    master: Option<Master>,
    /// The master whose requests this node carries out: the last one that
    /// asked its state (every master begins with `GcpStateReq`). Requests
    /// of an earlier master that arrive later (it failed or left with them
    /// in flight) are dropped: carried out, they would replace the step the
    /// current master waits for.
    following: Option<BlockRef>,
    local: Local,
    writing: Option<Writing>,
    /// A record request that came while a write was in flight: done next.
    record_next: Option<(Gci, BlockRef)>,
    /// Why this node's own part of GCPs stopped, if it did.
    local_stopped: Option<String>,
    sys: Option<SysState>,
    /// The system file bytes to write once the file is open.
    pending_sys: Option<Vec<u8>>,
    next_req: u64,
    counters: Counters,
    /// Local checkpoints of this node (a data directory only; `lcp.rs`).
    lcp: Option<crate::lcp::LcpCoordinator>,
    /// Failed nodes whose transactions the president's TC has not finished
    /// taking over (from `NodeFailRep` until its `NfCompleteRep`). A master
    /// does not move a round from commit to save while one is pending: the
    /// failed coordinator may have left transactions tagged with the GCI
    /// being closed that only the take-over commits, and once that GCI is
    /// saved a commit tagged with it would be a REDO record after its flush
    /// (a node asserted exactly that in the chaos test; without the assert,
    /// a GCI called complete would lack a transaction that a client was
    /// told committed). Every node keeps the set, so that a new master knows it.
    takeovers: BTreeSet<NodeId>,
    /// `NfCompleteRep`s that came before this node's own `NodeFailRep` of
    /// the node (members hear of a failure one by one).
    takeovers_done_early: BTreeSet<NodeId>,
}

fn ckpt(s: CkptSignal) -> Signal {
    Signal::Ckpt(Box::new(s))
}

impl Ckpt {
    /// A data node on its own. `current`: the GCI the node's TCs start
    /// tagging commits with; `complete`: the last complete GCI (the restart
    /// point, 0 if none). The host delivers `start_signal` once.
    pub fn new(node: NodeId, knobs: &Knobs, current: Gci, complete: Gci) -> Ckpt {
        let mut c = Ckpt::cluster(node, vec![vec![node]], knobs, current, complete);
        c.standalone = true;
        c.restorable = true;
        c.following = Some(Self::ckpt_of(node));
        c.membership = Some(Membership { generation: 1, members: vec![node], president: node });
        c.master = Some(Master {
            round: Round::Idle,
            known: BTreeMap::from([(node, NodeState { restored: complete, restorable: true, reachable: Vec::new() })]),
            to_sync: BTreeSet::new(),
            timer_armed: true,
            tagged: current,
        });
        c
    }

    /// A data node of a cluster: it learns the membership from QMGR (it is
    /// one of QMGR's subscribers) and the replica states from DIH (one of
    /// DIH's distribution subscribers); the president's CKPT is the master.
    /// Its TCs are held until the master's first round reaches them.
    pub fn cluster(node: NodeId, node_groups: Vec<Vec<NodeId>>, knobs: &Knobs, current: Gci, complete: Gci) -> Ckpt {
        assert!(current > complete, "commits are tagged above the last complete GCI");
        Ckpt {
            node,
            standalone: false,
            dict_told: false,
            durable_reported: false,
            tc_instances: knobs.tc_instances.max(1),
            lqh_instances: norr_txn::LQH_INSTANCES,
            interval_ns: knobs.gcp_interval_ms.max(1) * 1_000_000,
            current,
            complete,
            restored: complete,
            restorable: false,
            reachable: Vec::new(),
            copied: false,
            copied_lcp_floor: None,
            membership: None,
            node_groups,
            replica_states: BTreeMap::new(),
            master: None,
            following: None,
            local: Local::Idle,
            writing: None,
            record_next: None,
            local_stopped: None,
            sys: None,
            pending_sys: None,
            next_req: 1,
            counters: Counters::default(),
            takeovers: BTreeSet::new(),
            takeovers_done_early: BTreeSet::new(),
            lcp: None,
        }
    }

    /// Record each complete GCI in this system file (a data directory).
    /// `restorable`: the node's files hold a complete copy of its
    /// partitions up to `complete` (its system file said it was started).
    pub fn with_sysfile(mut self, sys: SysState, restorable: bool) -> Ckpt {
        self.restorable = restorable || self.standalone;
        self.sys = Some(sys);
        self
    }

    /// GCIs above the restored one this node's files can also restore to
    /// (`RestoreReport::reachable`; its LQHs hold the records).
    pub fn with_reachable(mut self, reachable: Vec<Gci>) -> Ckpt {
        debug_assert!(reachable.iter().all(|g| *g > self.restored));
        self.reachable = reachable;
        self
    }

    /// Run local checkpoints (with a system file: they are recorded in it).
    pub fn with_lcp(mut self, lcp: crate::lcp::LcpCoordinator) -> Ckpt {
        debug_assert!(self.sys.is_some(), "local checkpoints need a system file");
        self.lcp = Some(lcp);
        self
    }

    pub fn complete_gci(&self) -> Gci {
        self.complete
    }

    /// Why GCPs stopped (a refused save or a failed system file write), as
    /// far as this node knows.
    pub fn stopped(&self) -> Option<&str> {
        if let Some(Master { round: Round::Stopped { why }, .. }) = &self.master {
            return Some(why);
        }
        self.local_stopped.as_deref()
    }

    /// Counters, and where this node's GCP stands (tests, `norrinfo`).
    fn stats(&self) -> BlockStats {
        let mut counters = self.counters.snapshot();
        counters.push(("ckpt: current gci".into(), self.current));
        counters.push(("ckpt: complete gci".into(), self.complete));
        counters.push(("ckpt: take-overs pending".into(), self.takeovers.len() as u64));
        if let Some(lcp) = &self.lcp {
            counters.extend(lcp.counters());
        }
        let (local_step, local_waiting) = match &self.local {
            Local::Idle => (0, 0),
            Local::Prepare { waiting, .. } => (2, waiting.len()),
            Local::Commit { waiting, .. } => (3, waiting.len()),
            Local::Save { waiting, .. } => (4, waiting.len()),
        };
        counters.push(("ckpt: local step (0 idle, 2 prepare, 3 commit, 4 save)".into(), local_step));
        counters.push(("ckpt: local step waits for".into(), local_waiting as u64));
        if let Some(m) = &self.master {
            let waiting = match &m.round {
                Round::Sync { waiting, .. }
                | Round::Prepare { waiting, .. }
                | Round::Commit { waiting, .. }
                | Round::Save { waiting, .. }
                | Round::Record { waiting, .. } => waiting.len(),
                Round::Idle | Round::Stopped { .. } => 0,
            };
            counters.push(("ckpt: master step waits for".into(), waiting as u64));
            let step = match &m.round {
                Round::Idle => 0,
                Round::Sync { .. } => 1,
                Round::Prepare { .. } => 2,
                Round::Commit { .. } => 3,
                Round::Save { .. } => 4,
                Round::Record { .. } => 5,
                Round::Stopped { .. } => 6,
            };
            counters.push((
                "ckpt: master step (0 idle, 1 sync, 2 prepare, 3 commit, 4 save, 5 record, 6 stopped)".into(),
                step,
            ));
        }
        BlockStats { counters, ..BlockStats::default() }
    }

    fn local_tcs(&self) -> BTreeSet<BlockRef> {
        (0..self.tc_instances).map(|i| BlockRef::new(self.node, block::TC, i)).collect()
    }

    fn local_lqhs(&self) -> BTreeSet<BlockRef> {
        (0..self.lqh_instances).map(|i| BlockRef::new(self.node, block::LQH, i)).collect()
    }

    fn ckpt_of(n: NodeId) -> BlockRef {
        BlockRef::new(n, block::CKPT, 0)
    }

    // ------------------------------------------------------------------
    // Membership
    // ------------------------------------------------------------------

    fn on_cluster(&mut self, from: BlockRef, sig: ClusterSignal, ctx: &mut Ctx<'_, Signal>) {
        match sig {
            ClusterSignal::ClusterStartedRep { membership, joined, .. } => {
                // Hold the TCs until the master's first round: they must not
                // commit under a GCI the cluster may have left behind.
                let hold = self.current + 1;
                for to in self.local_tcs() {
                    ctx.send_prio(to, ckpt(CkptSignal::GcpPrepareReq { gci: hold }), Priority::A);
                }
                let president = membership.president;
                self.membership = Some(membership.clone());
                self.copied |= joined;
                if joined {
                    // A node restart: the running cluster's rows win; the
                    // records past its restored GCI are of no use.
                    self.restore_to(self.restored, ctx);
                }
                if president == self.node {
                    // Formed the cluster (or joined as its only member).
                    self.become_master(&membership.members, !joined, ctx);
                }
            }
            ClusterSignal::NodeJoinedRep { node, membership } => {
                // A failed node joins only after its take-over finished.
                self.takeovers.remove(&node);
                self.takeovers_done_early.remove(&node);
                self.membership = Some(membership);
                if let Some(m) = &mut self.master {
                    m.to_sync.insert(node);
                    if matches!(m.round, Round::Idle) {
                        self.sync_or_round(ctx);
                    }
                }
            }
            ClusterSignal::NodeFailRep { failed, membership } => {
                for f in &failed {
                    if !self.takeovers_done_early.remove(f) {
                        self.takeovers.insert(*f);
                    }
                }
                let president = membership.president;
                self.membership = Some(membership.clone());
                if self.master.is_some() {
                    self.drop_failed(&failed, ctx);
                } else if president == self.node {
                    self.counters.bump("ckpt: master take-overs");
                    self.become_master(&membership.members, false, ctx);
                }
            }
            ClusterSignal::NfCompleteRep { node } => {
                if !self.takeovers.remove(&node) {
                    self.takeovers_done_early.insert(node);
                }
                if self.master.is_some() {
                    self.advance_if_done(ctx);
                }
            }
            ClusterSignal::DistRep { dist } => {
                self.replica_states = dist.data_nodes().map(|n| (n, dist.state(n))).collect();
                let version = dist.version;
                ctx.send_prio(from, Signal::Cluster(Box::new(ClusterSignal::DistConf { version })), Priority::A);
            }
            _ => {}
        }
    }

    /// This node is the master now: ask every member its state, then run a
    /// round. `system_restart`: the members formed the cluster together.
    fn become_master(&mut self, members: &[NodeId], system_restart: bool, ctx: &mut Ctx<'_, Signal>) {
        let waiting: BTreeSet<NodeId> = members.iter().copied().collect();
        for &n in &waiting {
            ctx.send_prio(Self::ckpt_of(n), ckpt(CkptSignal::GcpStateReq), Priority::A);
        }
        self.master = Some(Master {
            round: Round::Sync { waiting, system_restart },
            known: BTreeMap::new(),
            to_sync: BTreeSet::new(),
            timer_armed: false,
            tagged: 0,
        });
    }

    /// Between rounds: ask the nodes that joined, or start the next round.
    fn sync_or_round(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let m = self.master.as_mut().expect("master");
        debug_assert!(matches!(m.round, Round::Idle));
        if m.to_sync.is_empty() {
            return self.start_round(ctx);
        }
        let waiting = std::mem::take(&mut m.to_sync);
        for &n in &waiting {
            ctx.send_prio(Self::ckpt_of(n), ckpt(CkptSignal::GcpStateReq), Priority::A);
        }
        m.round = Round::Sync { waiting, system_restart: false };
    }

    fn drop_failed(&mut self, failed: &[NodeId], ctx: &mut Ctx<'_, Signal>) {
        let m = self.master.as_mut().expect("master");
        for f in failed {
            m.known.remove(f);
            m.to_sync.remove(f);
            match &mut m.round {
                Round::Sync { waiting, .. }
                | Round::Prepare { waiting, .. }
                | Round::Commit { waiting, .. }
                | Round::Save { waiting, .. }
                | Round::Record { waiting, .. } => {
                    waiting.remove(f);
                }
                Round::Idle | Round::Stopped { .. } => {}
            }
        }
        self.counters.bump("ckpt: nodes dropped from a round");
        self.advance_if_done(ctx);
    }

    // ------------------------------------------------------------------
    // Master
    // ------------------------------------------------------------------

    fn arm_timer(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let m = self.master.as_mut().expect("master");
        if m.timer_armed {
            return;
        }
        m.timer_armed = true;
        let me = ctx.self_ref();
        ctx.send_delayed(me, ckpt(CkptSignal::GcpTimer), self.interval_ns);
    }

    fn send_all(&self, nodes: &BTreeSet<NodeId>, sig: CkptSignal, ctx: &mut Ctx<'_, Signal>) {
        for &n in nodes {
            ctx.send_prio(Self::ckpt_of(n), ckpt(sig.clone()), Priority::A);
        }
    }

    fn start_round(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let m = self.master.as_mut().expect("master");
        let gci = m.tagged + 1;
        let waiting: BTreeSet<NodeId> = m.known.keys().copied().collect();
        m.round = Round::Prepare { gci, waiting: waiting.clone() };
        self.send_all(&waiting, CkptSignal::GcpPrepareReq { gci }, ctx);
        self.counters.bump("ckpt: gcps started");
        self.advance_if_done(ctx);
    }

    /// A reply from node `from` to the master's current step.
    fn on_master_reply(&mut self, from: NodeId, sig: CkptSignal, ctx: &mut Ctx<'_, Signal>) {
        let Some(m) = self.master.as_mut() else {
            // Answers to an earlier mastership of this node.
            return norr_kernel::probe!(self.counters, "ckpt: reply while not master");
        };
        let matched = match (&sig, &mut m.round) {
            (
                CkptSignal::GcpStateConf { current, complete, restored, restorable, reachable },
                Round::Sync { waiting, .. },
            ) => {
                let fresh = waiting.remove(&from);
                if fresh {
                    let state =
                        NodeState { restored: *restored, restorable: *restorable, reachable: reachable.clone() };
                    m.known.insert(from, state);
                    m.tagged = m.tagged.max(*current);
                    self.complete = self.complete.max(*complete);
                }
                fresh
            }
            (CkptSignal::GcpPrepareConf { gci }, Round::Prepare { gci: g, waiting })
            | (CkptSignal::GcpTcFinishedRep { gci }, Round::Commit { gci: g, waiting })
            | (CkptSignal::GcpSaveConf { gci }, Round::Save { gci: g, waiting })
            | (CkptSignal::GcpRecordConf { gci }, Round::Record { gci: g, waiting, .. })
                if gci == g =>
            {
                waiting.remove(&from)
            }
            (CkptSignal::GcpSaveRef { gci, error }, Round::Save { gci: g, .. }) if gci == g => {
                if from != self.node && self.has_other_members() {
                    // It leaves (`local_failed`); its failure drops it from
                    // the round, which then completes without it.
                    return norr_kernel::probe!(
                        self.counters,
                        "ckpt: a node refused a save, the round waits for it to leave"
                    );
                }
                self.stop_master(format!("node {from} could not save GCI {gci}: {error}"));
                return;
            }
            _ => false,
        };
        if !matched {
            // A late answer to a round given up (take-over, failure).
            return norr_kernel::probe!(self.counters, "ckpt: stale reply to the master");
        }
        self.advance_if_done(ctx);
    }

    /// True when the cluster has a member besides this node.
    fn has_other_members(&self) -> bool {
        self.membership.as_ref().is_some_and(|m| m.members.iter().any(|&n| n != self.node))
    }

    /// This node's part of GCPs failed for good (see the module doc): no
    /// later save of it is possible. In a cluster the node leaves.
    fn local_failed(&mut self, why: String, ctx: &mut Ctx<'_, Signal>) {
        debug_assert!(!why.is_empty(), "a failure says why");
        if self.local_stopped.is_some() {
            return;
        }
        self.local_stopped = Some(why.clone());
        let host = BlockRef::new(self.node, block::HOST, 0);
        if !self.has_other_members() {
            norr_kernel::probe!(self.counters, "ckpt: gcps stopped on a lone node");
            let rep = ClusterSignal::DurabilityLostRep { why };
            return ctx.send_prio(host, Signal::Cluster(Box::new(rep)), Priority::A);
        }
        norr_kernel::probe!(self.counters, "ckpt: left the cluster, its part of a gcp failed");
        let (host, req) = norr_signals::cluster::leave_and_restart(
            self.node,
            format!("this node can no longer make commits durable: {why}"),
        );
        ctx.send_prio(host, req, Priority::A);
    }

    fn stop_master(&mut self, why: String) {
        self.counters.bump("ckpt: gcps stopped");
        if let Some(m) = &mut self.master {
            m.round = Round::Stopped { why };
        }
    }

    /// The current step's answers are all in: the next step.
    fn advance_if_done(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let m = self.master.as_mut().expect("master");
        let nodes: BTreeSet<NodeId> = m.known.keys().copied().collect();
        match &m.round {
            Round::Sync { waiting, system_restart } if waiting.is_empty() => {
                // A node still holding records past its restored GCI has not
                // heard where the cluster restarts (the master that decided
                // failed before telling it): decide again.
                let undecided = m.known.values().any(|s| !s.reachable.is_empty());
                if *system_restart || undecided {
                    self.system_restart_gci(ctx);
                }
                let m = self.master.as_mut().expect("master");
                if matches!(m.round, Round::Stopped { .. }) {
                    return;
                }
                m.round = Round::Idle;
                self.start_round(ctx);
            }
            Round::Prepare { gci, waiting } if waiting.is_empty() => {
                let gci = *gci;
                m.tagged = gci;
                m.round = Round::Commit { gci: gci - 1, waiting: nodes.clone() };
                self.send_all(&nodes, CkptSignal::GcpCommitReq { gci }, ctx);
            }
            Round::Commit { gci, waiting } if waiting.is_empty() && self.takeovers.is_empty() => {
                let gci = *gci;
                m.round = Round::Save { gci, waiting: nodes.clone() };
                self.send_all(&nodes, CkptSignal::GcpSaveReq { gci }, ctx);
            }
            Round::Save { gci, waiting } if waiting.is_empty() => {
                let gci = *gci;
                let (targets, full) = Self::record_targets(&self.node_groups, &m.known);
                m.round = Round::Record { gci, waiting: targets.clone(), full, targets: targets.clone() };
                self.send_all(&targets, CkptSignal::GcpRecordReq { gci }, ctx);
            }
            Round::Record { gci, waiting, full, targets } if waiting.is_empty() => {
                let (gci, full, targets) = (*gci, *full, targets.clone());
                m.round = Round::Idle;
                if full {
                    self.counters.bump("ckpt: gcps completed");
                    self.send_all(&nodes, CkptSignal::GcpCompleteRep { gci }, ctx);
                } else {
                    self.counters.bump("ckpt: gcis recorded only by nodes without a complete copy");
                    self.send_all(&targets, CkptSignal::GcpRecordedRep { gci }, ctx);
                }
                if self.master.as_ref().is_some_and(|m| !m.to_sync.is_empty()) {
                    self.sync_or_round(ctx);
                } else {
                    self.arm_timer(ctx);
                }
            }
            _ => {}
        }
    }

    /// Which nodes record a saved GCI. Every node, if every node group
    /// with a live node has one whose files hold a complete copy (a system
    /// restart can then restore the GCI). Otherwise (a node that copied at
    /// its node restart is its group's only live node, and no checkpoint
    /// covers its copied rows yet) the GCI could not be restored after a
    /// crash of every node, and the nodes with complete copies must not
    /// record it: their system files would name a GCI that group cannot
    /// reach, and no system restart would be possible. Only the nodes
    /// without a complete copy record it then (their system files are not
    /// used to restore, and their checkpoint rounds are recorded with it),
    /// until their files are complete (`GcpFilesCompleteRep`). Meanwhile no
    /// GCI is complete: disk-durable commits wait, the other nodes' REDO
    /// logs are not released.
    fn record_targets(node_groups: &[Vec<NodeId>], known: &BTreeMap<NodeId, NodeState>) -> (BTreeSet<NodeId>, bool) {
        let full = node_groups
            .iter()
            .filter(|g| g.iter().any(|n| known.contains_key(n)))
            .all(|g| g.iter().any(|n| known.get(n).is_some_and(|s| s.restorable)));
        if full {
            return (known.keys().copied().collect(), true);
        }
        let targets: BTreeSet<NodeId> = known.iter().filter(|(_, s)| !s.restorable).map(|(n, _)| *n).collect();
        debug_assert!(!targets.is_empty(), "a group without a complete copy has a live node without one");
        (targets, false)
    }

    /// At a system restart (the members formed the cluster), every node
    /// restored its own files to its own last complete GCI. The cluster
    /// restarts to the highest GCI that a node of every node group restored
    /// exactly, from files that are a complete copy. Every other node is sent
    /// to a node restart: it copies its partitions from a replica at that
    /// GCI. If no GCI is held by a node of every group, the master stops
    /// (GCPs stop, TCs stay held): starting would lose or half apply
    /// transactions.
    fn system_restart_gci(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let m = self.master.as_ref().expect("master");
        // A node's files restore exactly its restored GCI or one it can
        // roll forward to: a GCI some node's system file recorded was saved
        // by every node of that round before any recorded it, so a node
        // that missed only the record holds it in its REDO log.
        let mut candidates: Vec<Gci> = m
            .known
            .values()
            .filter(|s| s.restorable)
            .flat_map(|s| std::iter::once(s.restored).chain(s.reachable.iter().copied()))
            .collect();
        candidates.sort_unstable();
        candidates.dedup();
        let present: BTreeSet<NodeId> = m.known.keys().copied().collect();
        let holds = |c: Gci| {
            self.node_groups
                .iter()
                .filter(|g| g.iter().any(|n| present.contains(n)))
                .all(|g| g.iter().any(|n| m.known.get(n).is_some_and(|s| s.holds(c))))
        };
        let Some(restart) = candidates.iter().rev().copied().find(|&c| holds(c)) else {
            if candidates.is_empty() || candidates == [0] {
                return; // an initial start: nothing on any disk
            }
            let held: Vec<String> = m
                .known
                .iter()
                .map(|(n, s)| {
                    format!(
                        "node {n}: GCI {} ({})",
                        s.restored,
                        if s.restorable { "complete copy" } else { "incomplete copy" }
                    )
                })
                .collect();
            return self.stop_master(format!(
                "system restart impossible: no GCI is held by a node of every node group ({})",
                held.join(", ")
            ));
        };
        let behind: Vec<NodeId> = m.known.iter().filter(|(_, s)| !s.holds(restart)).map(|(n, _)| *n).collect();
        self.counters.bump("ckpt: system restarts decided");
        let m = self.master.as_mut().expect("master");
        for n in behind {
            m.known.remove(&n);
            ctx.send_prio(Self::ckpt_of(n), ckpt(CkptSignal::GcpRestartNodeReq { gci: restart }), Priority::A);
        }
        // The others restart to it, some rolling forward; before any round.
        for (n, s) in m.known.iter_mut() {
            if s.restored != restart {
                self.counters.bump("ckpt: nodes rolled forward at a system restart");
            }
            s.restored = restart;
            s.reachable.clear();
            ctx.send_prio(Self::ckpt_of(*n), ckpt(CkptSignal::GcpRestartGciReq { gci: restart }), Priority::A);
        }
        self.complete = self.complete.max(restart);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let Some(m) = self.master.as_mut() else { return };
        m.timer_armed = false;
        if matches!(m.round, Round::Idle) {
            self.sync_or_round(ctx);
        }
    }

    // ------------------------------------------------------------------
    // Participant
    // ------------------------------------------------------------------

    fn reply_master(&self, master: BlockRef, sig: CkptSignal, ctx: &mut Ctx<'_, Signal>) {
        ctx.send_prio(master, ckpt(sig), Priority::A);
    }

    /// A request of the master (possibly a new one replacing an old one's
    /// step in progress).
    fn on_master_req(&mut self, master: BlockRef, sig: CkptSignal, ctx: &mut Ctx<'_, Signal>) {
        match sig {
            CkptSignal::GcpStateReq => {
                let conf = CkptSignal::GcpStateConf {
                    current: self.current,
                    complete: self.complete,
                    restored: self.restored,
                    restorable: self.files_complete(),
                    reachable: self.reachable.clone(),
                };
                self.reply_master(master, conf, ctx);
            }
            CkptSignal::GcpPrepareReq { gci } => {
                debug_assert!(gci > self.current, "prepare of {gci} at {}", self.current);
                // No restart GCI came: the node stays at the one it restored.
                self.restore_to(self.restored, ctx);
                self.tell_dict_restarted(ctx);
                let waiting = self.local_tcs();
                for &to in &waiting {
                    ctx.send_prio(to, ckpt(CkptSignal::GcpPrepareReq { gci }), Priority::A);
                }
                self.local = Local::Prepare { gci, master, waiting };
            }
            CkptSignal::GcpCommitReq { gci } => {
                let prev = self.current;
                self.current = gci;
                let waiting = self.local_tcs();
                for &to in &waiting {
                    ctx.send_prio(to, ckpt(CkptSignal::GcpCommitReq { gci }), Priority::A);
                }
                self.local = Local::Commit { prev, gci, master, waiting };
            }
            CkptSignal::GcpSaveReq { gci } => {
                if let Some(why) = &self.local_stopped {
                    let error = why.clone();
                    return self.reply_master(master, CkptSignal::GcpSaveRef { gci, error }, ctx);
                }
                let waiting = self.local_lqhs();
                for &to in &waiting {
                    ctx.send_prio(to, ckpt(CkptSignal::GcpSaveReq { gci }), Priority::A);
                }
                self.local = Local::Save { gci, master, waiting };
            }
            CkptSignal::GcpRecordReq { gci } => self.record(gci, master, ctx),
            CkptSignal::GcpCompleteRep { gci } => {
                if gci > self.complete {
                    self.complete = gci;
                }
                // LQHs, and TCs (they hold `CommitDisk` answers until then).
                for to in self.local_lqhs().into_iter().chain(self.local_tcs()) {
                    ctx.send_prio(to, ckpt(CkptSignal::GcpCompleteRep { gci }), Priority::A);
                }
                self.lcp_on_complete(gci, ctx);
            }
            CkptSignal::GcpRecordedRep { gci } => {
                // Recorded here, not complete: only the local checkpoints
                // move on (this node's files are not a complete copy yet).
                debug_assert!(!self.files_complete(), "a complete copy told of a GCI recorded without it");
                self.lcp_on_complete(gci, ctx);
            }
            CkptSignal::GcpRestartNodeReq { gci } => {
                self.restore_to(self.restored, ctx);
                self.restart_as_node_restart(gci, ctx)
            }
            CkptSignal::GcpRestartGciReq { gci } => {
                debug_assert!(gci == self.restored || self.reachable.contains(&gci), "restart to {gci} not held");
                // The operator hears the GCI the cluster restarts to: a node
                // that rolls forward logged a lower one when it restored.
                let rep = ClusterSignal::SystemRestartRep { gci, restored: self.restored };
                ctx.send(BlockRef::new(self.node, block::HOST, 0), Signal::Cluster(Box::new(rep)));
                self.restore_to(gci, ctx);
                self.tell_dict_restarted(ctx);
            }
            other => {
                norr_kernel::probe!(self.counters, "ckpt: unexpected request");
                debug_assert!(false, "CKPT got request {other:?}");
            }
        }
    }

    /// This node restarts to `gci` (its restored GCI, or one its REDO log
    /// can roll forward to): once, before its first GCP round. The LQHs
    /// replay the records they kept up to it (or drop them); their
    /// `GcpRestoreToReq` is queued before anything the first round brings.
    fn restore_to(&mut self, gci: Gci, ctx: &mut Ctx<'_, Signal>) {
        if self.reachable.is_empty() {
            return;
        }
        let rolled = self.reachable.contains(&gci);
        debug_assert!(rolled || gci == self.restored);
        self.reachable.clear();
        if rolled {
            self.counters.bump("ckpt: rolled forward at a system restart");
            self.restored = gci;
            self.complete = self.complete.max(gci);
        }
        for to in self.local_lqhs() {
            ctx.send_prio(to, ckpt(CkptSignal::GcpRestoreToReq { gci }), Priority::A);
        }
    }

    fn on_restore_to_conf(&mut self, from: BlockRef, gci: Gci, error: Option<String>, ctx: &mut Ctx<'_, Signal>) {
        if let Some(error) = error {
            // Its rows are half replayed: not usable. It leaves and starts
            // again, copying from a live replica.
            norr_kernel::probe!(self.counters, "ckpt: roll forward failed");
            self.local_stopped = Some(format!("LQH {from} could not roll forward to GCI {gci}: {error}"));
            self.restart_as_node_restart(gci, ctx);
        }
    }

    /// This node is in the restarted cluster with what its files restored
    /// (the master's first round reached it, not a restart as a node
    /// restart): DICT may settle the schema (`SystemRestartedRep`).
    fn tell_dict_restarted(&mut self, ctx: &mut Ctx<'_, Signal>) {
        if self.dict_told || self.sys.is_none() || self.standalone || !self.restorable {
            return;
        }
        self.dict_told = true;
        let dict = BlockRef::new(self.node, block::DICT, 0);
        ctx.send_prio(dict, Signal::Cluster(Box::new(ClusterSignal::SystemRestartedRep)), Priority::A);
    }

    /// The cluster restarts to a GCI these files do not hold: leave and
    /// start again as a node restart.
    fn restart_as_node_restart(&mut self, _restart_gci: Gci, ctx: &mut Ctx<'_, Signal>) {
        // Its files stay as they are: the next start restores them and joins
        // the running cluster, which copies (and from then on its system
        // file says `Restarting`).
        self.restorable = false;
        self.replica_states.insert(self.node, ReplicaState::Starting);
        self.counters.bump("ckpt: behind the system restart GCI");
        // A graceful leave, QMGR then shuts the node down to start again (a
        // node restart, copying from a replica at the restart GCI): the
        // others see no failure, so no arbitration is needed.
        let qmgr = BlockRef::new(self.node, block::QMGR, 0);
        let leave = ClusterSignal::Qmgr(QmgrMsg::LeaveReq { node: self.node });
        ctx.send_prio(qmgr, Signal::Cluster(Box::new(leave)), Priority::A);
    }

    /// A local block (TC or LQH) answered the step in progress.
    fn on_local_reply(&mut self, from: BlockRef, sig: CkptSignal, ctx: &mut Ctx<'_, Signal>) {
        let done = match (&sig, &mut self.local) {
            (CkptSignal::GcpPrepareConf { gci }, Local::Prepare { gci: g, waiting, .. })
            | (CkptSignal::GcpSaveConf { gci }, Local::Save { gci: g, waiting, .. })
                if gci == g =>
            {
                waiting.remove(&from);
                waiting.is_empty()
            }
            (CkptSignal::GcpTcFinishedRep { gci }, Local::Commit { prev, waiting, .. }) if gci == prev => {
                waiting.remove(&from);
                waiting.is_empty()
            }
            (CkptSignal::GcpSaveRef { gci, error }, Local::Save { gci: g, master, .. }) if gci == g => {
                let (gci, master) = (*gci, *master);
                let error = format!("LQH {from}: {error}");
                self.local = Local::Idle;
                self.reply_master(master, CkptSignal::GcpSaveRef { gci, error: error.clone() }, ctx);
                return self.local_failed(error, ctx);
            }
            // Answers to the hold at start, or to a step a new master
            // replaced.
            _ => return norr_kernel::probe!(self.counters, "ckpt: stale local reply"),
        };
        if !done {
            return;
        }
        let reply = match std::mem::replace(&mut self.local, Local::Idle) {
            Local::Prepare { gci, master, .. } => (master, CkptSignal::GcpPrepareConf { gci }),
            Local::Commit { gci, master, .. } => (master, CkptSignal::GcpTcFinishedRep { gci: gci - 1 }),
            Local::Save { gci, master, .. } => (master, CkptSignal::GcpSaveConf { gci }),
            other => unreachable!("no local answers awaited in {other:?}"),
        };
        self.reply_master(reply.0, reply.1, ctx);
    }

    /// A GCI is complete and this node's system file recording it is
    /// durable: local checkpoints move on (`lcp.rs` records a finished
    /// round in the next system file write). A node that copied its
    /// partitions at a node restart holds a complete copy in its files again
    /// once a checkpoint round that started after the copy ended (it became
    /// alive) is recorded: the round after the one running then.
    fn lcp_on_complete(&mut self, gci: Gci, ctx: &mut Ctx<'_, Signal>) {
        let (Some(lcp), Some(sys)) = (self.lcp.as_mut(), self.sys.as_mut()) else { return };
        lcp.on_gcp_completed(gci, &mut sys.sysfile, ctx);
        if !self.copied {
            return;
        }
        let recorded = lcp.last_lcp_id();
        match self.copied_lcp_floor {
            None if self.replica_states.get(&self.node) == Some(&ReplicaState::Alive) => {
                self.copied_lcp_floor = Some(recorded)
            }
            Some(floor) if recorded >= floor + 2 => {
                self.counters.bump("ckpt: copied rows covered by a local checkpoint");
                self.copied = false;
                self.copied_lcp_floor = None;
                self.restorable = true;
                // The master records GCIs on every node again once every
                // group has a node whose files are complete.
                if let Some(master) = self.following {
                    ctx.send_prio(master, ckpt(CkptSignal::GcpFilesCompleteRep), Priority::A);
                }
            }
            _ => {}
        }
    }

    /// Tell the host what this node's files can restore to (a cluster node
    /// with a data directory; `norr mgm show`).
    /// `written`: after a system file write (its own state says), else at
    /// start (the restore said).
    fn report_durable(&self, written: bool, ctx: &mut Ctx<'_, Signal>) {
        let Some(sys) = self.sys.as_ref().filter(|_| !self.standalone) else { return };
        let own = sys.sysfile.nodes.iter().find(|i| i.node == self.node).map(|i| i.state);
        let complete_copy = (written || self.restorable) && own.is_none_or(|s| s == NodeRestartState::Started);
        let rep = ClusterSignal::DurableGciRep { gci: sys.sysfile.last_complete_gci, complete_copy };
        ctx.send(BlockRef::new(self.node, block::HOST, 0), Signal::Cluster(Box::new(rep)));
    }

    /// This node's files hold a complete copy of its partitions (as its
    /// next system file write will say), or it has none (no data
    /// directory: nothing to restore from anyway).
    fn files_complete(&self) -> bool {
        self.sys.is_none() || (self.restorable && !self.copied)
    }

    /// This node's state in its own system file.
    fn own_restart_state(&self) -> NodeRestartState {
        if self.standalone {
            return NodeRestartState::Started;
        }
        if self.copied {
            return NodeRestartState::Restarting;
        }
        match self.replica_states.get(&self.node) {
            Some(ReplicaState::Alive) => NodeRestartState::Started,
            Some(ReplicaState::Starting) => NodeRestartState::Restarting,
            Some(ReplicaState::Dead) | None => NodeRestartState::Absent,
        }
    }

    /// Write `gci` as complete in the system file (or answer at once
    /// without a data directory).
    fn record(&mut self, gci: Gci, master: BlockRef, ctx: &mut Ctx<'_, Signal>) {
        if self.writing.is_some() {
            // A new master's record while an older write is in flight: it
            // starts when that one ends.
            self.counters.bump("ckpt: record waits for a write in flight");
            self.record_next = Some((gci, master));
            return;
        }
        let own = self.own_restart_state();
        let members: Vec<NodeId> = self.membership.as_ref().map_or_else(|| vec![self.node], |m| m.members.clone());
        let Some(sys) = self.sys.as_mut() else {
            return self.reply_master(master, CkptSignal::GcpRecordConf { gci }, ctx);
        };
        sys.sysfile.last_complete_gci = sys.sysfile.last_complete_gci.max(gci);
        let mut infos: BTreeMap<NodeId, NodeInfo> = sys.sysfile.nodes.iter().map(|i| (i.node, *i)).collect();
        for n in members {
            let state = if n == self.node {
                own
            } else {
                match self.replica_states.get(&n) {
                    Some(ReplicaState::Starting) => NodeRestartState::Restarting,
                    _ => NodeRestartState::Started,
                }
            };
            infos.insert(n, NodeInfo { node: n, state, last_gci: gci });
        }
        infos.entry(self.node).and_modify(|i| i.state = own);
        sys.sysfile.nodes = infos.into_values().collect();
        match sys.store.write(&mut sys.sysfile) {
            Ok(w) => {
                self.writing = Some(Writing { gci, master, step: SysStep::Open });
                self.pending_sys = Some(w.bytes);
                self.fs(ctx, FsOp::Open { path: w.path.into(), create: true, truncate: true });
            }
            Err(crashed) => panic!("crash point reached: {}", crashed.0),
        }
    }

    fn fs(&mut self, ctx: &mut Ctx<'_, Signal>, op: FsOp) {
        let req_id = self.next_req;
        self.next_req += 1;
        let to = BlockRef::new(self.node, block::FS, 0);
        ctx.send_prio(to, Signal::Fs(Box::new(FsSignal::Req { req_id, op })), Priority::A);
    }

    fn on_fs(&mut self, sig: FsSignal, ctx: &mut Ctx<'_, Signal>) {
        let Some(Writing { gci, master, step }) = self.writing else {
            debug_assert!(false, "FS reply outside a system file write");
            return;
        };
        match (sig, step) {
            (FsSignal::Conf { result: FsResult::Opened { file, .. }, .. }, SysStep::Open) => {
                let data = self.pending_sys.take().expect("bytes to write");
                self.writing = Some(Writing { gci, master, step: SysStep::Write(file) });
                self.fs(ctx, FsOp::Write { file, offset: 0, data, sync: true });
            }
            (FsSignal::Conf { result: FsResult::Written, .. }, SysStep::Write(file)) => {
                self.writing = Some(Writing { gci, master, step: SysStep::Close });
                self.fs(ctx, FsOp::Close { file });
            }
            (FsSignal::Conf { result: FsResult::Closed, .. }, SysStep::Close) => {
                let sys = self.sys.as_mut().expect("a system file");
                if let Err(crashed) = sys.store.on_written() {
                    panic!("crash point reached: {}", crashed.0);
                }
                self.writing = None;
                self.report_durable(true, ctx);
                self.reply_master(master, CkptSignal::GcpRecordConf { gci }, ctx);
                if let Some((gci, master)) = self.record_next.take() {
                    self.record(gci, master, ctx);
                }
            }
            (FsSignal::Ref { error, .. }, _) => {
                self.sys.as_mut().expect("a system file").store.on_failed();
                let why = format!("cannot write the system file: {error}");
                self.writing = None;
                // The master hears it as a refused save of this GCI.
                self.reply_master(master, CkptSignal::GcpSaveRef { gci, error: why.clone() }, ctx);
                if let Some((gci, master)) = self.record_next.take() {
                    self.reply_master(master, CkptSignal::GcpSaveRef { gci, error: why.clone() }, ctx);
                }
                self.local_failed(why, ctx);
            }
            (other, _) => debug_assert!(false, "CKPT got FS reply {other:?}"),
        }
    }

    fn on_ckpt(&mut self, from: BlockRef, sig: CkptSignal, ctx: &mut Ctx<'_, Signal>) {
        use CkptSignal as C;
        // Local checkpoints: this node's own rounds (`lcp.rs`).
        if let C::LcpTimer | C::LcpInstanceConf { .. } | C::LcpInstanceRef { .. } = sig {
            if let (Some(lcp), Some(sys)) = (self.lcp.as_mut(), self.sys.as_mut()) {
                lcp.on_signal(from, sig, self.complete, &mut sys.sysfile, ctx);
            }
            return;
        }
        match (&sig, from.block) {
            (C::GcpTimer, _) => self.on_timer(ctx),
            (C::GcpRestoreToConf { gci, error }, block::LQH) if from.node == self.node => {
                let (gci, error) = (*gci, error.clone());
                self.on_restore_to_conf(from, gci, error, ctx)
            }
            (C::GcpFilesCompleteRep, block::CKPT) => {
                if let Some(s) = self.master.as_mut().and_then(|m| m.known.get_mut(&from.node)) {
                    s.restorable = true;
                    self.counters.bump("ckpt: nodes whose files became a complete copy");
                }
            }
            (_, block::TC | block::LQH) if from.node == self.node => self.on_local_reply(from, sig, ctx),
            (
                C::GcpStateReq
                | C::GcpPrepareReq { .. }
                | C::GcpCommitReq { .. }
                | C::GcpSaveReq { .. }
                | C::GcpRecordReq { .. }
                | C::GcpCompleteRep { .. }
                | C::GcpRestartNodeReq { .. }
                | C::GcpRestartGciReq { .. }
                | C::GcpRecordedRep { .. },
                block::CKPT,
            ) => {
                if let C::GcpStateReq = sig {
                    self.following = Some(from);
                } else if self.following != Some(from) {
                    return norr_kernel::probe!(self.counters, "ckpt: request of a master no longer followed");
                }
                self.on_master_req(from, sig, ctx)
            }
            (
                C::GcpStateConf { .. }
                | C::GcpPrepareConf { .. }
                | C::GcpTcFinishedRep { .. }
                | C::GcpSaveConf { .. }
                | C::GcpSaveRef { .. }
                | C::GcpRecordConf { .. },
                block::CKPT,
            ) => {
                if self.record_refused(&sig) {
                    return;
                }
                self.on_master_reply(from.node, sig, ctx)
            }
            _ => {
                norr_kernel::probe!(self.counters, "ckpt: unexpected signal");
                debug_assert!(false, "CKPT got {sig:?} from {from}");
            }
        }
    }

    /// A node's failed system file write comes back as a `GcpSaveRef` during
    /// the record step: GCPs stop.
    fn record_refused(&mut self, sig: &CkptSignal) -> bool {
        let (CkptSignal::GcpSaveRef { gci, error }, Some(Master { round: Round::Record { gci: g, .. }, .. })) =
            (sig, &self.master)
        else {
            return false;
        };
        if gci == g {
            self.stop_master(format!("could not record GCI {gci}: {error}"));
        }
        true
    }
}

impl Block<Signal> for Ckpt {
    fn on_signal(&mut self, env: Envelope<Signal>, ctx: &mut Ctx<'_, Signal>) {
        if !self.durable_reported {
            // What the node's files held at its start, before any write.
            self.durable_reported = true;
            self.report_durable(false, ctx);
        }
        match env.signal {
            Signal::Ckpt(c) => self.on_ckpt(env.from, *c, ctx),
            Signal::Fs(f) => self.on_fs(*f, ctx),
            Signal::Cluster(c) => self.on_cluster(env.from, *c, ctx),
            Signal::Internal(i) => match *i {
                InternalSignal::StatsReq { req } => {
                    let stats = Box::new(self.stats());
                    ctx.send(env.from, Signal::Internal(Box::new(InternalSignal::StatsConf { req, stats })));
                }
                _ => norr_kernel::probe!(self.counters, "ckpt: unexpected internal signal"),
            },
            other => {
                norr_kernel::probe!(self.counters, "ckpt: unexpected signal");
                debug_assert!(false, "CKPT got {}", other.name());
            }
        }
    }
}

/// The signal that starts a lone node's CKPT (the host delivers it once).
/// A cluster node's CKPT starts with QMGR's `ClusterStartedRep` instead.
pub fn start_signal(node: NodeId) -> Envelope<Signal> {
    let me = BlockRef::new(node, block::CKPT, 0);
    Envelope { from: me, to: me, prio: Priority::B, signal: ckpt(CkptSignal::GcpTimer) }
}
