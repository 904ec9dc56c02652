//! DICT: the schema of the data node. Validates and numbers tables and
//! indexes, hands out AUTO_INCREMENT values, and pushes every schema change to
//! the LQH instances (storage) first, then to TC (routing), replying to the
//! client once both confirmed. DDL requests run one at a time, in arrival order.
//!
//! ALTER TABLE reaches LQH in two phases: `SchemaChange::AlterTable` (each
//! instance builds the table's rows in the new layout aside, or refuses),
//! then, once all answered, `AlterCommit` to all (switch) or `AlterAbort` to
//! all (drop the copies): all or nothing across instances. TC then takes the
//! committed definition.
//!
//! Every table gets an ordered index named `PRIMARY` on its primary key (as
//! NDB creates one by default), so primary-key ranges are index range scans.
//! Storage keeps it in a compact form (row ids only, see norr-storage's
//! `pk_order`) at about 4-6 bytes per row. The name is reserved: a client
//! cannot create another index named so, nor drop this one.

use crate::counters::Counters;
use crate::validate::{validate_alter, validate_index, validate_table};
use norr_durability::crash::{points, CrashPoints};
use norr_durability::crash_point;
use norr_kernel::{Block, BlockRef, Ctx, NodeId, Priority};
use norr_knobs::Knobs;
use norr_signals::cluster::{ClusterSignal, DictState, Membership};
use norr_signals::dist::Dist;
use norr_signals::internal::{BlockStats, InternalSignal, SchemaChange};
use norr_signals::schema::{IndexDef, IndexId, IndexKind, TableDef, TableId, PK_ORDERED_INDEX};
use norr_signals::{
    block, ColumnSource, DictConf, DictOp, DictRef, DictReq, DictResult, ErrorCode, NodeError, NodeStats, Signal,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

#[path = "dict_persist.rs"]
mod persist;

#[path = "dict_files.rs"]
mod files;

#[path = "dict_auto_inc.rs"]
mod auto_inc;

#[path = "dict_proxy.rs"]
mod proxy;

/// Most DDL requests queued before DICT answers Overloaded.
const MAX_QUEUED_DDL: usize = 1024;
/// Most tables a node holds.
const MAX_TABLES: usize = 20_000;

/// The `PRIMARY` ordered index of a table (id assigned later).
fn pk_ordered_index(def: &TableDef) -> IndexDef {
    IndexDef {
        id: 0,
        name: PK_ORDERED_INDEX.into(),
        columns: def.primary_key.clone(),
        unique: false,
        kind: IndexKind::Ordered,
    }
}

/// Give a new table its `PRIMARY` ordered index. One the request carries
/// (a definition read back from DICT and changed, maybe in its primary key)
/// is replaced.
fn add_pk_ordered_index(def: &mut TableDef) {
    def.indexes.retain(|i| !i.name.eq_ignore_ascii_case(PK_ORDERED_INDEX));
    def.indexes.push(pk_ordered_index(def));
}

fn reserved_name() -> NodeError {
    NodeError::with(
        ErrorCode::BadSchema,
        format!("index name {PK_ORDERED_INDEX} is reserved for the primary key's ordered index"),
    )
}

struct Queued {
    from: BlockRef,
    req: DictReq,
}

enum Stage {
    /// Waiting for these DICTs to hold the change as pending
    /// (`DictPendingConf`): no LQH sees a change before every DICT that
    /// could become master knows it.
    Announce {
        waiting: BTreeSet<NodeId>,
    },
    /// Waiting for these LQH instances. `refused`: the nodes whose LQH
    /// refused the change so far (`error` is the first refusal).
    Lqh {
        waiting: BTreeSet<BlockRef>,
        error: Option<NodeError>,
        refused: BTreeSet<NodeId>,
    },
    /// Waiting for these TC instances (and DIH blocks) to take the change.
    Tc {
        waiting: BTreeSet<BlockRef>,
    },
    Stats {
        waiting: BTreeSet<BlockRef>,
        acc: BlockStats,
    },
    /// ALTER TABLE: every LQH prepared (or refused); waiting for these to
    /// switch to their copy (`error` None) or drop it (`error`: why the
    /// change is refused).
    LqhAlterEnd {
        waiting: BTreeSet<BlockRef>,
        error: Option<NodeError>,
    },
    /// Some LQH refused a CREATE TABLE or CREATE INDEX that others made:
    /// waiting for these to undo it, then the client hears `error`.
    LqhUndo {
        waiting: BTreeSet<BlockRef>,
        error: NodeError,
    },
    /// A joining node's DICT is applying the whole schema (`DictSyncReq`).
    Sync {
        node: NodeId,
    },
    /// The change is committed: waiting for this DICT's schema file write
    /// (`own`: its outcome, once done) and for every other live DICT to
    /// have it in its schema file (`DictStateAck`), then the client hears.
    Persisted {
        waiting: BTreeSet<NodeId>,
        own: Option<Result<DictResult, NodeError>>,
    },
}

struct Active {
    from: BlockRef,
    req_id: u32,
    req: u64,
    change: Option<SchemaChange>,
    stage: Stage,
    silent: bool,
    /// The other DICTs were told of the change (`DictPendingReq`): they
    /// must hear of its end, a `DictStateRep` or `DictPendingClearRep`.
    announced: bool,
    /// The change as announced, until it ends: this node's schema file
    /// holds it as pending meanwhile (a cluster node).
    announced_change: Option<SchemaChange>,
    /// From its commit here until the client's answer (every node's
    /// schema file holds it): the table it changed and its definition
    /// before (None: it did not exist). Readers see that (`visible`): no
    /// client plans against a change a crash may still undo.
    before: Option<(TableId, Option<TableDef>)>,
}

/// A joining node's own schema sync: answers of local blocks still to come.
struct LocalSync {
    outstanding: usize,
    req: u64,
}

pub struct Dict {
    node: NodeId,
    lqh_instances: u16,
    /// TC instances of every node: each keeps its own copy of the definitions.
    tc_instances: u16,
    default_partitions: u32,
    /// Knob `read_backup`: tables read any replica unless they say otherwise.
    default_read_backup: bool,
    tables: BTreeMap<TableId, TableDef>,
    next_table_id: TableId,
    next_index_id: IndexId,
    /// Next AUTO_INCREMENT value per table (the master's).
    auto_inc: BTreeMap<TableId, u64>,
    /// AUTO_INCREMENT high-water marks the other DICTs know.
    auto_inc_high: BTreeMap<TableId, u64>,
    queue: VecDeque<Queued>,
    active: Option<Active>,
    next_req: u64,
    /// API nodes whose failure is being handled (see `InternalSignal::ApiFailDone`).
    failed_apis: BTreeSet<NodeId>,
    /// Grants of API nodes logged in with a SQL account (issue 25).
    privileges: crate::privileges::Privileges,
    /// The cluster's distribution as DIH last published it (this node alone
    /// until a DIH runs).
    dist: Dist,
    /// None: a data node on its own (no QMGR): this DICT is the master.
    membership: Option<Membership>,
    /// Requests passed on to the master (`dict_proxy.rs`).
    proxy: proxy::Proxy,
    local_sync: Option<LocalSync>,
    counters: Counters,
    /// The schema file in the data directory (see `dict_persist.rs`).
    persist: Option<persist::Persist>,
    /// Dropped tables' checkpoint files to delete (see `dict_files.rs`).
    dropped_files: files::DroppedFiles,
    /// Master: AUTO_INCREMENT marks on their way to the other DICTs.
    marks: auto_inc::Marks,
    /// Not master: the change the master announced and has not finished
    /// (see `ClusterSignal::DictPendingReq`). Finished by this DICT if it
    /// becomes master first.
    /// With the request that began it (`Active::from`, `req_id`).
    pending: Option<(SchemaChange, (BlockRef, u32))>,
    /// Restored from a data directory and not yet settled with the
    /// restarted cluster (`SystemRestartedRep`, or a take-over): as master
    /// it starts no DDL (a change pending from before the stop comes
    /// first).
    unsettled: bool,
    crash: CrashPoints,
}

/// The table definitions a change carries.
fn change_defs(change: &SchemaChange) -> Vec<&TableDef> {
    match change {
        SchemaChange::CreateTable(d)
        | SchemaChange::CreateIndex { def: d, .. }
        | SchemaChange::DropIndex { def: d, .. }
        | SchemaChange::AlterTable { def: d, .. }
        | SchemaChange::AlterCommit { def: d }
        | SchemaChange::TruncateTable(d) => vec![d],
        SchemaChange::DropTable(_) | SchemaChange::AlterAbort(_) => Vec::new(),
    }
}

fn internal(s: InternalSignal) -> Signal {
    Signal::Internal(Box::new(s))
}

fn cluster(s: ClusterSignal) -> Signal {
    Signal::Cluster(Box::new(s))
}

impl Dict {
    pub fn new(node: NodeId, lqh_instances: u16, knobs: &Knobs) -> Dict {
        Dict {
            node,
            lqh_instances,
            tc_instances: knobs.tc_instances.max(1),
            default_partitions: knobs.default_partitions,
            default_read_backup: knobs.read_backup,
            tables: BTreeMap::new(),
            next_table_id: 1,
            next_index_id: 1,
            auto_inc: BTreeMap::new(),
            auto_inc_high: BTreeMap::new(),
            queue: VecDeque::new(),
            active: None,
            next_req: 1,
            failed_apis: Default::default(),
            privileges: Default::default(),
            dist: Dist::single(node),
            membership: None,
            proxy: proxy::Proxy::default(),
            local_sync: None,
            counters: Counters::default(),
            persist: None,
            dropped_files: files::DroppedFiles::default(),
            pending: None,
            unsettled: false,
            marks: auto_inc::Marks::default(),
            crash: CrashPoints::off(),
        }
    }

    /// Crash points of DICT's steps and its schema file writes (tests; the
    /// node panics "crash point reached: ..." there).
    pub fn crash_points_mut(&mut self) -> &mut CrashPoints {
        &mut self.crash
    }

    fn is_master(&self) -> bool {
        self.membership.as_ref().is_none_or(|m| m.president == self.node)
    }

    /// The master of a cluster. Unlike `is_master`, false before this node
    /// heard that its cluster started: another node's master DICT may
    /// already talk to it.
    fn leads(&self) -> bool {
        self.membership.as_ref().is_some_and(|m| m.president == self.node)
    }

    fn members(&self) -> Vec<NodeId> {
        match &self.membership {
            Some(m) => m.members.clone(),
            None => vec![self.node],
        }
    }

    /// Every member's LQH instances.
    fn lqh_targets(&self) -> BTreeSet<BlockRef> {
        let mut t = BTreeSet::new();
        for n in self.members() {
            for i in 0..self.lqh_instances {
                t.insert(BlockRef::new(n, block::LQH, i));
            }
        }
        t
    }

    /// Every member's TC instances, and in a cluster its DIH.
    fn tc_targets(&self) -> BTreeSet<BlockRef> {
        let mut t = BTreeSet::new();
        for n in self.members() {
            for i in 0..self.tc_instances {
                t.insert(BlockRef::new(n, block::TC, i));
            }
            if self.membership.is_some() {
                t.insert(BlockRef::new(n, block::DIH, 0));
            }
        }
        t
    }

    /// The tables as clients see them: a committed change is shown once
    /// its DDL is answered (see `Active::before`).
    fn visible(&self) -> impl Iterator<Item = &TableDef> {
        let before = self.active.as_ref().and_then(|a| a.before.as_ref());
        let hidden = before.map(|(id, _)| *id);
        self.tables.values().filter(move |t| Some(t.id) != hidden).chain(before.and_then(|(_, d)| d.as_ref()))
    }

    fn by_name(&self, name: &str) -> Option<&TableDef> {
        self.tables.values().find(|t| t.name == name)
    }

    /// Refuse a change of `old` into `new` that would put the table's
    /// partitions on other node groups: the rows would have to move
    /// between groups, which no schema change does (it would leave them on
    /// nodes that no longer serve them: the rows would vanish from reads).
    /// Placement depends on FULLY_REPLICATED and on whether the table has a
    /// unique index (`norr_signals::dist`); with one node group every
    /// placement is the same nodes (only primary roles move), so anything
    /// goes.
    fn check_placement(&self, old: &TableDef, new: &TableDef) -> Result<(), NodeError> {
        use norr_signals::dist::has_unique_index;
        if self.dist.node_groups.len() <= 1 {
            return Ok(());
        }
        let why = if old.options.fully_replicated != new.options.fully_replicated {
            "changing FULLY_REPLICATED"
        } else if has_unique_index(old) != has_unique_index(new) {
            if has_unique_index(new) {
                "adding the first unique index"
            } else {
                "dropping the last unique index"
            }
        } else {
            return Ok(());
        };
        Err(NodeError::with(
            ErrorCode::BadSchema,
            format!(
                "{why} of table {} would move its rows between node groups, which is not supported yet: \
                 create a new table with the wanted definition and copy the rows (INSERT ... SELECT)",
                old.name
            ),
        ))
    }

    fn find(&self, name: &str) -> Result<TableDef, NodeError> {
        self.by_name(name).cloned().ok_or_else(|| NodeError::with(ErrorCode::NoSuchTable, name.to_string()))
    }

    fn conf(ctx: &mut Ctx<'_, Signal>, to: BlockRef, req_id: u32, result: DictResult) {
        ctx.send(to, Signal::DictConf(Box::new(DictConf { req_id, result })));
    }

    fn dref(ctx: &mut Ctx<'_, Signal>, to: BlockRef, req_id: u32, error: NodeError) {
        ctx.send(to, Signal::DictRef(Box::new(DictRef { req_id, error })));
    }

    fn on_req(&mut self, from: BlockRef, req: DictReq, ctx: &mut Ctx<'_, Signal>) {
        let id = req.req_id;
        // Checked where the client's request arrives (a proxy's master trusts it).
        let name_of = |t| self.visible().find(|d| d.id == t).map(|d| d.name.clone());
        if let Some(e) =
            self.privileges.check_dict(from.node, &req.op, name_of).err().filter(|_| from.block == block::API)
        {
            return Self::dref(ctx, from, id, e);
        }
        if let DictOp::GetDistribution = &req.op {
            return Self::conf(ctx, from, id, DictResult::Distribution(Box::new(self.dist.clone())));
        }
        if !self.is_master() {
            // Pass it on to the master; its answer comes back here.
            return self.proxy_forward(from, req, ctx);
        }
        match &req.op {
            DictOp::GetTable { name } => match self.visible().find(|t| t.name == *name) {
                Some(d) => Self::conf(ctx, from, id, DictResult::Table(d.clone())),
                None => Self::dref(ctx, from, id, NodeError::with(ErrorCode::NoSuchTable, name.clone())),
            },
            DictOp::ListTables => {
                let mut tables: Vec<TableDef> = self.visible().cloned().collect();
                tables.sort_by_key(|t| t.id);
                Self::conf(ctx, from, id, DictResult::Tables(tables))
            }
            DictOp::NextAutoInc { table, count } => match self.auto_inc.get_mut(table) {
                Some(next) => {
                    let first = *next;
                    // count 0 reserves nothing: a look at the next value.
                    *next = next.saturating_add(*count);
                    let (table, next) = (*table, *next);
                    self.answer_auto_inc_marked(from, id, table, next, DictResult::AutoInc { first }, ctx);
                }
                None => Self::dref(ctx, from, id, NodeError::with(ErrorCode::NoSuchTable, format!("table id {table}"))),
            },
            DictOp::BumpAutoInc { table, used } => match self.auto_inc.get_mut(table) {
                Some(next) => {
                    *next = (*next).max(used.saturating_add(1));
                    let (table, next) = (*table, *next);
                    self.answer_auto_inc_marked(from, id, table, next, DictResult::Done, ctx);
                }
                None => Self::dref(ctx, from, id, NodeError::with(ErrorCode::NoSuchTable, format!("table id {table}"))),
            },
            _ => {
                if self.queue.len() >= MAX_QUEUED_DDL {
                    return Self::dref(
                        ctx,
                        from,
                        id,
                        NodeError::with(ErrorCode::Overloaded, "too many queued DDL requests"),
                    );
                }
                self.queue.push_back(Queued { from, req });
                self.start_next(ctx);
            }
        }
    }

    /// The other members (their DICTs hear the master's changes).
    fn others(&self) -> BTreeSet<NodeId> {
        self.members().into_iter().filter(|n| *n != self.node).collect()
    }

    /// `sig` to every other member's DICT.
    fn to_other_dicts(&self, sig: ClusterSignal, prio: Priority, ctx: &mut Ctx<'_, Signal>) {
        for n in self.others() {
            ctx.send_prio(BlockRef::new(n, block::DICT, 0), cluster(sig.clone()), prio);
        }
    }

    fn broadcast_state(&self, state: DictState, ctx: &mut Ctx<'_, Signal>) {
        self.to_other_dicts(ClusterSignal::DictStateRep(Box::new(state)), Priority::B, ctx);
    }

    /// `change` (of request `req`) to each of `to` (LQHs, TCs, DIHs).
    fn send_change(req: u64, change: &SchemaChange, to: &BTreeSet<BlockRef>, ctx: &mut Ctx<'_, Signal>) {
        for b in to {
            let s = InternalSignal::SchemaChangeReq { req, change: Box::new(change.clone()) };
            ctx.send(*b, internal(s));
        }
    }

    /// The schema as a whole (for a joining node).
    fn full_state(&self) -> DictState {
        DictState {
            upsert: self.tables.values().cloned().collect(),
            remove: Vec::new(),
            next_table_id: self.next_table_id,
            next_index_id: self.next_index_id,
            auto_inc_high: self
                .auto_inc
                .iter()
                .map(|(t, n)| (*t, self.auto_inc_high.get(t).copied().unwrap_or(*n).max(*n)))
                .collect(),
            full: true,
            ack: false,
            mark_seq: 0,
            origin: None,
        }
    }

    /// A schema change (or the whole schema) from the master.
    fn apply_state(&mut self, s: &DictState) {
        if s.full {
            // Tables dropped while this node was away: their files go too.
            let dropped: Vec<TableId> =
                self.tables.keys().copied().filter(|t| !s.upsert.iter().any(|d| d.id == *t)).collect();
            for t in dropped {
                self.dropped_files_after_next_write(t);
                self.auto_inc.remove(&t);
                self.auto_inc_high.remove(&t);
            }
            // The AUTO_INCREMENT counters of the tables that stay keep the
            // higher of the two marks: a mark this DICT heard from a master
            // that died may be above the new master's (never hand out a
            // value twice; a gap is harmless).
            self.tables.clear();
        }
        for d in &s.upsert {
            self.auto_inc.entry(d.id).or_insert(1);
            self.tables.insert(d.id, d.clone());
        }
        for t in &s.remove {
            self.dropped_files_after_next_write(*t);
            self.tables.remove(t);
            self.auto_inc.remove(t);
            self.auto_inc_high.remove(t);
        }
        self.next_table_id = self.next_table_id.max(s.next_table_id);
        self.next_index_id = self.next_index_id.max(s.next_index_id);
        for (t, h) in &s.auto_inc_high {
            // Were this node to become master, it continues above the mark.
            let high = self.auto_inc_high.entry(*t).or_insert(*h);
            *high = (*high).max(*h);
            let n = self.auto_inc.entry(*t).or_insert(1);
            *n = (*n).max(*h);
        }
    }

    /// Start queued requests until one needs to wait for other blocks.
    fn start_next(&mut self, ctx: &mut Ctx<'_, Signal>) {
        if self.unsettled && self.membership.is_some() {
            return;
        }
        while self.active.is_none() {
            let Some(q) = self.queue.pop_front() else {
                return;
            };
            let (from, req_id) = (q.from, q.req.req_id);
            let req = self.next_req;
            self.next_req += 1;
            if let DictOp::ListTables = q.req.op {
                // A sync request travels as a DictReq from a DICT (see
                // `on_cluster`): ListTables from a DICT block means sync.
                if from.block == block::DICT {
                    let node = from.node;
                    ctx.send(from, cluster(ClusterSignal::DictSyncConf(Box::new(self.full_state()))));
                    let stage = Stage::Sync { node };
                    self.active = Some(Active {
                        from,
                        req_id,
                        req,
                        change: None,
                        stage,
                        silent: true,
                        announced: false,
                        announced_change: None,
                        before: None,
                    });
                    continue;
                }
            }
            match self.plan(q.req.op) {
                Err(e) => Self::dref(ctx, from, req_id, e),
                Ok(None) => {
                    // NodeStats: ask every block of this node.
                    let mut waiting = BTreeSet::new();
                    for i in 0..self.lqh_instances {
                        waiting.insert(BlockRef::new(self.node, block::LQH, i));
                    }
                    for i in 0..self.tc_instances {
                        waiting.insert(BlockRef::new(self.node, block::TC, i));
                    }
                    for to in &waiting {
                        ctx.send(*to, internal(InternalSignal::StatsReq { req }));
                    }
                    let stage = Stage::Stats { waiting, acc: BlockStats::default() };
                    self.active = Some(Active {
                        from,
                        req_id,
                        req,
                        change: None,
                        stage,
                        silent: false,
                        announced: false,
                        announced_change: None,
                        before: None,
                    });
                }
                Ok(Some(change)) => self.begin_change(from, req_id, change, false, ctx),
            }
        }
    }

    /// Start a planned change: first every other DICT holds it as pending
    /// (so that whichever becomes master can finish it should this one
    /// die), then the LQHs make it.
    fn begin_change(
        &mut self,
        from: BlockRef,
        req_id: u32,
        change: SchemaChange,
        silent: bool,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        debug_assert!(self.active.is_none(), "one DDL at a time");
        debug_assert!(self.is_master(), "only the master changes the schema");
        let req = self.next_req;
        self.next_req += 1;
        let others = self.others();
        let s = ClusterSignal::DictPendingReq { change: Box::new(change.clone()), origin: (from, req_id) };
        self.to_other_dicts(s, Priority::A, ctx);
        let announced = !others.is_empty();
        let mut waiting = others;
        let mut announced_change = None;
        if self.membership.is_some() {
            // This node's schema file holds the change as pending before
            // any LQH sees it, as every other node's does: after a crash of
            // every node the master makes it again (`take_over`).
            announced_change = Some(change.clone());
            waiting.insert(self.node);
        }
        let stage = Stage::Announce { waiting };
        let change = Some(change);
        self.active =
            Some(Active { from, req_id, req, change, stage, silent, announced, announced_change, before: None });
        if self.membership.is_some() {
            let write = self.next_schema_write();
            self.persist_in_background(ctx);
            let me = ctx.self_ref();
            self.send_after_write(write, me, ClusterSignal::DictPendingConf { node: self.node }, ctx);
        }
        self.progress(ctx);
    }

    /// Every DICT holds the active change: the LQHs make it.
    fn send_to_lqh(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let waiting = self.lqh_targets();
        let a = self.active.as_mut().expect("active request");
        Self::send_change(a.req, a.change.as_ref().expect("schema change"), &waiting, ctx);
        a.stage = Stage::Lqh { waiting, error: None, refused: BTreeSet::new() };
        self.progress(ctx);
    }

    /// What undoes `change` on the LQHs that made it when another refused
    /// it (None: nothing to undo, or nothing that can be).
    fn undo_of(&self, change: &SchemaChange) -> Option<SchemaChange> {
        match change {
            SchemaChange::CreateTable(def) => Some(SchemaChange::DropTable(def.id)),
            SchemaChange::CreateIndex { def, index } => {
                let old = self.tables.get(&def.id)?.clone();
                debug_assert!(old.index(*index).is_none(), "the refused index is not in the committed definition");
                Some(SchemaChange::DropIndex { def: old, index: *index })
            }
            // ALTER TABLE has its own two phases; a DROP, TRUNCATE or DROP
            // INDEX that an LQH refuses midway cannot be undone.
            _ => None,
        }
    }

    /// Some LQHs refused `change`, which cannot be undone where it was made
    /// (TRUNCATE, DROP TABLE, DROP INDEX). If no live node made it, the
    /// DDL is refused as a whole. If some did, their replicas and the
    /// refusers' no longer match: the refusers leave (`DictLeaveReq`) and
    /// come back as node restarts that copy the table from a live replica,
    /// and the DDL is committed on the others. (Answering the error while
    /// the change stays made elsewhere would tell the client the statement
    /// failed when its rows are gone on some replicas.)
    fn refused_without_undo(
        &mut self,
        change: SchemaChange,
        refused: BTreeSet<NodeId>,
        e: NodeError,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        debug_assert!(self.undo_of(&change).is_none());
        let made_somewhere = self.members().iter().any(|n| !refused.contains(n));
        if !made_somewhere || self.membership.is_none() {
            return self.finish(ctx, Err(e));
        }
        assert!(!refused.is_empty(), "an LQH refusal without a refusing node");
        for n in &refused {
            self.counters.bump("dict: nodes told to leave, a change made elsewhere refused");
            let why = format!(
                "its LQH refused a schema change of table id {} that the other nodes made ({}): its replicas would \
                 differ from theirs",
                change.table(),
                e.message
            );
            let to = BlockRef::new(*n, block::DICT, 0);
            ctx.send_prio(to, Signal::Cluster(Box::new(ClusterSignal::DictLeaveReq { why })), Priority::A);
        }
        self.send_to_tc(ctx);
    }

    /// This DICT became master (the old one failed). A change the old
    /// master announced may have reached some LQHs and not others: it is
    /// made again everywhere (each block takes a change it has already as
    /// done) and committed. Without one, the other DICTs take this one's
    /// schema whole, which ends any change they hold as pending (one that
    /// never reached an LQH: the old master waited for every DICT,
    /// this one included, before it sent a change to any).
    fn take_over(&mut self, ctx: &mut Ctx<'_, Signal>) {
        self.unsettled = false;
        if self.active.is_some() {
            debug_assert!(false, "a DICT that was not master ran a request");
            return;
        }
        let pending = self.pending.take();
        let finishing = pending.as_ref().map(|(_, origin)| *origin);
        self.to_other_dicts(ClusterSignal::DictTakeoverRep { finishing }, Priority::A, ctx);
        match pending {
            Some((change, (from, req_id))) => {
                self.counters.bump("dict: a new master finished the old master's change");
                // Its ids are taken, whatever its end.
                for def in change_defs(&change) {
                    if matches!(change, SchemaChange::CreateTable(_)) {
                        self.next_table_id = self.next_table_id.max(def.id + 1);
                    }
                    let top = def.indexes.iter().map(|i| i.id).max().unwrap_or(0);
                    self.next_index_id = self.next_index_id.max(top + 1);
                }
                // The client hears the end through the DICT it asked (a
                // client of the failed node's own DICT is gone with it).
                let silent = from.block != block::DICT;
                self.begin_change(from, req_id, change, silent, ctx);
            }
            None => {
                self.counters.bump("dict: a new master sent its schema whole");
                let state = self.full_state();
                self.broadcast_state(state, ctx);
            }
        }
        // This node's own requests held by the failed master.
        let me = self.node;
        self.on_takeover_rep(me, finishing, ctx);
    }

    /// Validate a DDL request against the current schema. Ok(None): NodeStats.
    fn plan(&mut self, op: DictOp) -> Result<Option<SchemaChange>, NodeError> {
        Ok(Some(match op {
            DictOp::CreateTable(mut def) => {
                if self.by_name(&def.name).is_some() {
                    return Err(NodeError::with(ErrorCode::TableExists, def.name));
                }
                if self.tables.len() >= MAX_TABLES {
                    return Err(NodeError::new(ErrorCode::TooManyTables));
                }
                if def.partitions == 0 {
                    def.partitions = self.default_partitions;
                }
                // The cluster's default (knob `read_backup`); a table cannot
                // opt out of it (NDB's default lives in each SQL node instead).
                def.options.read_backup |= self.default_read_backup;
                validate_table(&def).map_err(|m| NodeError::with(ErrorCode::BadSchema, m))?;
                add_pk_ordered_index(&mut def);
                def.id = self.next_table_id;
                self.next_table_id += 1;
                def.version = 1;
                for idx in &mut def.indexes {
                    idx.id = self.next_index_id;
                    self.next_index_id += 1;
                }
                SchemaChange::CreateTable(def)
            }
            DictOp::DropTable { name } => SchemaChange::DropTable(self.find(&name)?.id),
            DictOp::TruncateTable { name } => {
                let mut def = self.find(&name)?;
                def.version += 1;
                SchemaChange::TruncateTable(def)
            }
            DictOp::CreateIndex { table, mut index } => {
                let mut def = self.find(&table)?;
                if def.index_by_name(&index.name).is_some() {
                    return Err(NodeError::with(ErrorCode::IndexExists, index.name));
                }
                if index.name.eq_ignore_ascii_case(PK_ORDERED_INDEX) {
                    return Err(reserved_name());
                }
                validate_index(&def, &index).map_err(|m| NodeError::with(ErrorCode::BadSchema, m))?;
                let old = def.clone();
                index.id = self.next_index_id;
                let id = index.id;
                def.indexes.push(index);
                self.check_placement(&old, &def)?;
                self.next_index_id += 1;
                def.version += 1;
                SchemaChange::CreateIndex { def, index: id }
            }
            DictOp::DropIndex { table, index } => {
                let mut def = self.find(&table)?;
                if index.eq_ignore_ascii_case(PK_ORDERED_INDEX) {
                    return Err(NodeError::with(
                        ErrorCode::BadSchema,
                        "the primary key's ordered index cannot be dropped",
                    ));
                }
                let id = def.index_by_name(&index).ok_or_else(|| NodeError::with(ErrorCode::NoSuchIndex, index))?.id;
                let old = def.clone();
                def.indexes.retain(|i| i.id != id);
                self.check_placement(&old, &def)?;
                def.version += 1;
                SchemaChange::DropIndex { def, index: id }
            }
            DictOp::AlterTable { table, mut def, sources, expect_version } => {
                let old = self.find(&table)?;
                // Schema changes run one at a time here, so this check and
                // the change are atomic: of two ALTERs made from the same
                // version, the second is refused rather than undoing the
                // first (its definition does not contain the first's change).
                if old.version != expect_version {
                    return Err(NodeError::with(
                        ErrorCode::SchemaVersionMismatch,
                        format!(
                            "table {table} is at version {}, the change was made from version {expect_version}",
                            old.version
                        ),
                    ));
                }
                if self.by_name(&def.name).is_some_and(|t| t.id != old.id) {
                    return Err(NodeError::with(ErrorCode::TableExists, def.name));
                }
                // A definition read back from DICT carries its `PRIMARY`
                // ordered index (replaced below); another index may not take
                // the name.
                let pk_order = pk_ordered_index(&def);
                if def.indexes.iter().any(|i| {
                    i.name.eq_ignore_ascii_case(PK_ORDERED_INDEX)
                        && (i.columns != pk_order.columns || i.unique || i.kind != IndexKind::Ordered)
                }) {
                    return Err(reserved_name());
                }
                def.id = old.id;
                def.version = old.version + 1;
                if def.partitions == 0 {
                    def.partitions = old.partitions;
                }
                // As at CREATE: the cluster's default is not lost by an ALTER.
                def.options.read_backup |= self.default_read_backup;
                validate_table(&def).map_err(|m| NodeError::with(ErrorCode::BadSchema, m))?;
                validate_alter(&old, &def, &sources).map_err(|m| NodeError::with(ErrorCode::BadSchema, m))?;
                self.check_placement(&old, &def)?;
                add_pk_ordered_index(&mut def);
                // An index that is the same (name, columns through `sources`,
                // kind) keeps its id: a change that keeps the layout then
                // needs no copy of the rows.
                for idx in &mut def.indexes {
                    let cols: Option<Vec<_>> = idx
                        .columns
                        .iter()
                        .map(|c| match sources.get(*c as usize) {
                            Some(ColumnSource::Old(o)) => Some(*o),
                            _ => None,
                        })
                        .collect();
                    let same = old.indexes.iter().find(|o| {
                        o.name.eq_ignore_ascii_case(&idx.name)
                            && Some(&o.columns) == cols.as_ref()
                            && o.unique == idx.unique
                            && o.kind == idx.kind
                    });
                    match same {
                        Some(o) => idx.id = o.id,
                        None => {
                            idx.id = self.next_index_id;
                            self.next_index_id += 1;
                        }
                    }
                }
                SchemaChange::AlterTable { def, sources }
            }
            DictOp::NodeStats => return Ok(None),
            DictOp::GetTable { .. }
            | DictOp::ListTables
            | DictOp::NextAutoInc { .. }
            | DictOp::BumpAutoInc { .. }
            | DictOp::GetDistribution => {
                unreachable!("answered without queueing")
            }
        }))
    }

    /// Make a confirmed change DICT's own truth and build the client's answer.
    fn commit(&mut self, change: SchemaChange) -> DictResult {
        match change {
            SchemaChange::CreateTable(def) => {
                self.auto_inc.insert(def.id, 1);
                self.tables.insert(def.id, def.clone());
                DictResult::Table(def)
            }
            SchemaChange::DropTable(t) => {
                self.tables.remove(&t);
                self.auto_inc.remove(&t);
                self.forget_auto_inc_mark(t);
                self.dropped_files_after_next_write(t);
                DictResult::Done
            }
            SchemaChange::TruncateTable(def) => {
                // Counting starts again at 1; the mark goes with the old
                // values (the snapshot written now holds 1). Values handed
                // out before are tied to the old version: a write that
                // carries one is refused (`SchemaVersionMismatch`).
                let t = def.id;
                debug_assert_eq!(self.tables.get(&t).map(|d| d.version + 1), Some(def.version));
                self.tables.insert(t, def);
                self.auto_inc.insert(t, 1);
                self.forget_auto_inc_mark(t);
                DictResult::Done
            }
            SchemaChange::CreateIndex { def, .. }
            | SchemaChange::DropIndex { def, .. }
            | SchemaChange::AlterCommit { def } => {
                self.tables.insert(def.id, def.clone());
                DictResult::Table(def)
            }
            SchemaChange::AlterTable { .. } | SchemaChange::AlterAbort(_) => {
                unreachable!("DICT commits an ALTER TABLE as AlterCommit")
            }
        }
    }

    fn finish(&mut self, ctx: &mut Ctx<'_, Signal>, result: Result<DictResult, NodeError>) {
        let a = self.active.take().expect("active request");
        if a.announced_change.is_some() {
            // Refused: this node's schema file drops it.
            self.persist_in_background(ctx);
        }
        if a.announced && result.is_err() {
            // A refused change: the others forget it (a committed one ends
            // with its `DictStateRep`).
            self.to_other_dicts(ClusterSignal::DictPendingClearRep, Priority::A, ctx);
        }
        if !a.silent {
            match result {
                Ok(r) => Self::conf(ctx, a.from, a.req_id, r),
                Err(e) => Self::dref(ctx, a.from, a.req_id, e),
            }
        }
        self.start_next(ctx);
    }

    fn on_schema_conf(&mut self, from: BlockRef, req: u64, error: Option<NodeError>, ctx: &mut Ctx<'_, Signal>) {
        if let Some(ls) = self.local_sync.as_mut().filter(|l| l.req == req) {
            debug_assert!(error.is_none(), "a block refused the synced schema: {error:?}");
            ls.outstanding -= 1;
            return self.local_sync_progress(ctx);
        }
        let Some(a) = self.active.as_mut().filter(|a| a.req == req) else {
            debug_assert!(false, "stray schema conf {req}");
            return;
        };
        match &mut a.stage {
            Stage::Lqh { waiting, error: first, refused } => {
                waiting.remove(&from);
                if error.is_some() {
                    refused.insert(from.node);
                }
                if first.is_none() {
                    *first = error;
                }
            }
            Stage::LqhAlterEnd { waiting, error: first } => {
                waiting.remove(&from);
                if first.is_none() {
                    *first = error;
                }
            }
            Stage::LqhUndo { waiting, .. } => {
                if let Some(e) = error {
                    crate::probe!(self.counters, "dict: an LQH refused to undo a refused change");
                    debug_assert!(false, "{from} refused an undo: {e:?}");
                }
                waiting.remove(&from);
            }
            Stage::Tc { waiting } => {
                debug_assert!(error.is_none(), "TC cannot refuse a schema change");
                waiting.remove(&from);
            }
            Stage::Announce { .. } | Stage::Stats { .. } | Stage::Sync { .. } | Stage::Persisted { .. } => {
                debug_assert!(false, "schema conf during announce, stats, sync or persist")
            }
        }
        self.progress(ctx);
    }

    /// Move the active change on once its stage has every answer.
    fn progress(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let Some(a) = self.active.as_mut() else {
            return;
        };
        let req = a.req;
        match &mut a.stage {
            Stage::Announce { waiting } => {
                if waiting.is_empty() {
                    if crash_point!(self.crash, points::DICT_PENDING_BEFORE_STORAGE) {
                        panic!("crash point reached: {}", points::DICT_PENDING_BEFORE_STORAGE);
                    }
                    self.send_to_lqh(ctx);
                }
            }
            Stage::LqhUndo { waiting, error } => {
                if waiting.is_empty() {
                    let e = error.clone();
                    self.finish(ctx, Err(e));
                }
            }
            Stage::Lqh { waiting, error: first, refused } => {
                if !waiting.is_empty() {
                    return;
                }
                if let Some(SchemaChange::AlterTable { def, .. }) = &a.change {
                    // Every LQH answered: all switch to their copies, or
                    // all drop them (those that failed hold none).
                    let error = first.take();
                    let next = match error {
                        None => SchemaChange::AlterCommit { def: def.clone() },
                        Some(_) => SchemaChange::AlterAbort(def.id),
                    };
                    let waiting = self.lqh_targets();
                    Self::send_change(req, &next, &waiting, ctx);
                    let a = self.active.as_mut().expect("active");
                    a.stage = Stage::LqhAlterEnd { waiting, error };
                    a.change = Some(next);
                    return;
                }
                if let Some(e) = first.take() {
                    // Those that made it undo it: the schema stays as DICT
                    // has it on every LQH.
                    let refused = std::mem::take(refused);
                    let change = a.change.clone().expect("schema change");
                    let Some(undo) = self.undo_of(&change) else {
                        return self.refused_without_undo(change, refused, e, ctx);
                    };
                    self.counters.bump("dict: refused changes undone");
                    let waiting = self.lqh_targets();
                    Self::send_change(req, &undo, &waiting, ctx);
                    let a = self.active.as_mut().expect("active");
                    a.stage = Stage::LqhUndo { waiting, error: e };
                    return;
                }
                self.send_to_tc(ctx);
            }
            Stage::LqhAlterEnd { waiting, error: refused } => {
                if !waiting.is_empty() {
                    return;
                }
                if let Some(e) = refused.take() {
                    return self.finish(ctx, Err(e));
                }
                self.send_to_tc(ctx);
            }
            Stage::Tc { waiting } => {
                if !waiting.is_empty() {
                    return;
                }
                if crash_point!(self.crash, points::DICT_MADE_BEFORE_SCHEMA_WRITE) {
                    panic!("crash point reached: {}", points::DICT_MADE_BEFORE_SCHEMA_WRITE);
                }
                let change = a.change.take().expect("schema change");
                // Committed: the schema write below holds it, not pending.
                a.announced_change = None;
                let (from, req_id) = (a.from, a.req_id);
                let delta = match &change {
                    SchemaChange::DropTable(t) => DictState { remove: vec![*t], ..DictState::default() },
                    SchemaChange::CreateTable(d)
                    | SchemaChange::TruncateTable(d)
                    | SchemaChange::CreateIndex { def: d, .. }
                    | SchemaChange::DropIndex { def: d, .. }
                    | SchemaChange::AlterCommit { def: d } => {
                        DictState { upsert: vec![d.clone()], ..DictState::default() }
                    }
                    SchemaChange::AlterTable { .. } | SchemaChange::AlterAbort(_) => DictState::default(),
                };
                let id = change.table();
                let before = Some((id, self.tables.get(&id).cloned()));
                self.active.as_mut().expect("active").before = before;
                let r = self.commit(change);
                let mut others = BTreeSet::new();
                if self.membership.is_some() {
                    let delta = DictState {
                        next_table_id: self.next_table_id,
                        next_index_id: self.next_index_id,
                        ack: true,
                        origin: Some((from, req_id)),
                        ..delta
                    };
                    self.broadcast_state(delta, ctx);
                    others = self.others();
                }
                if others.is_empty() {
                    if let Some(r) = self.persist_then_finish(r, ctx) {
                        self.finish(ctx, Ok(r));
                    }
                    return;
                }
                // Every node's schema file holds the change before the
                // client hears of it: any of them may restart the cluster.
                self.active.as_mut().expect("active").stage = Stage::Persisted { waiting: others, own: None };
                if let Some(r) = self.persist_then_finish(r, ctx) {
                    self.own_persisted(Ok(r), ctx);
                }
            }
            Stage::Persisted { waiting, own } => {
                if waiting.is_empty() && own.is_some() {
                    let r = own.take().expect("checked");
                    self.finish(ctx, r);
                }
            }
            Stage::Stats { .. } | Stage::Sync { .. } => {}
        }
    }

    /// Every LQH took the active change: hand it to the TC instances (and DIHs).
    fn send_to_tc(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let waiting = self.tc_targets();
        let a = self.active.as_mut().expect("active request");
        Self::send_change(a.req, a.change.as_ref().expect("schema change"), &waiting, ctx);
        a.stage = Stage::Tc { waiting };
        self.progress(ctx);
    }

    fn on_stats_conf(&mut self, from: BlockRef, req: u64, s: BlockStats, ctx: &mut Ctx<'_, Signal>) {
        let Some(a) = self.active.as_mut().filter(|a| a.req == req) else {
            return;
        };
        let Stage::Stats { waiting, acc } = &mut a.stage else {
            return;
        };
        acc.data_memory_limit_bytes += s.data_memory_limit_bytes;
        acc.data_memory_used_bytes += s.data_memory_used_bytes;
        acc.rows += s.rows;
        acc.open_transactions += s.open_transactions;
        acc.committed_transactions += s.committed_transactions;
        acc.aborted_transactions += s.aborted_transactions;
        waiting.remove(&from);
        if waiting.is_empty() {
            let st = NodeStats {
                data_memory_limit_bytes: acc.data_memory_limit_bytes,
                data_memory_used_bytes: acc.data_memory_used_bytes,
                rows: acc.rows,
                tables: self.tables.len() as u32,
                open_transactions: acc.open_transactions,
                committed_transactions: acc.committed_transactions,
                aborted_transactions: acc.aborted_transactions,
            };
            self.finish(ctx, Ok(DictResult::Stats(st)));
        }
    }

    fn on_cluster(&mut self, from: BlockRef, sig: ClusterSignal, ctx: &mut Ctx<'_, Signal>) {
        match sig {
            ClusterSignal::DistRep { dist } => {
                self.dist = *dist;
                let version = self.dist.version;
                ctx.send_prio(from, cluster(ClusterSignal::DistConf { version }), Priority::A);
            }
            ClusterSignal::ClusterStartedRep { membership, joined, .. } => {
                self.membership = Some(membership.clone());
                if joined {
                    // A node restart: take the schema from the master.
                    let master = BlockRef::new(membership.president, block::DICT, 0);
                    ctx.send(master, cluster(ClusterSignal::DictSyncReq { node: self.node }));
                }
            }
            ClusterSignal::NodeJoinedRep { membership, .. } => self.membership = Some(membership),
            ClusterSignal::NodeFailRep { failed, membership } => self.on_node_fail(&failed, membership, ctx),
            ClusterSignal::DictForwardReq { api, req } => {
                // The master; a proxy DICT passed a client's request on.
                self.on_req(api, *req, ctx)
            }
            ClusterSignal::DictSyncReq { node } => {
                // Queued like DDL: the master runs none while the node applies it.
                let req = DictReq { req_id: 0, op: DictOp::ListTables };
                self.queue.push_back(Queued { from: BlockRef::new(node, block::DICT, 0), req });
                self.start_next(ctx);
            }
            ClusterSignal::DictSyncConf(state) => self.on_sync_conf(&state, ctx),
            ClusterSignal::DictSyncedRep { node } => {
                // At the master: the joining node applied the schema.
                if matches!(self.active.as_ref().map(|a| &a.stage), Some(Stage::Sync { node: n }) if *n == node) {
                    self.finish(ctx, Ok(DictResult::Done));
                }
            }
            ClusterSignal::DictStateAck { node } => self.on_state_ack(node, ctx),
            ClusterSignal::DictPendingReq { change, origin } => {
                if self.leads() {
                    // From a master this node no longer follows.
                    crate::probe!(self.counters, "dict: pending change from a former master");
                    return;
                }
                self.pending = Some((*change, origin));
                // Confirmed once this node's schema file holds it.
                let write = self.next_schema_write();
                self.persist_in_background(ctx);
                self.send_after_write(write, from, ClusterSignal::DictPendingConf { node: self.node }, ctx);
            }
            ClusterSignal::DictPendingConf { node } => {
                if let Some(Stage::Announce { waiting }) = self.active.as_mut().map(|a| &mut a.stage) {
                    waiting.remove(&node);
                    self.progress(ctx);
                }
            }
            ClusterSignal::DictMarkAck { node, seq } => self.on_mark_ack(node, seq, ctx),
            ClusterSignal::DictTakeoverRep { finishing } => self.on_takeover_rep(from.node, finishing, ctx),
            ClusterSignal::SystemRestartedRep => {
                // This node restarted from its files with the cluster (not
                // behind it: a node behind leaves, and the next master
                // settles the schema in `on_node_fail`). The master makes a
                // change announced before every node stopped again
                // everywhere; otherwise the others take its schema.
                let unsettled = std::mem::take(&mut self.unsettled);
                if unsettled && self.leads() && self.active.is_none() {
                    self.take_over(ctx);
                }
                self.start_next(ctx);
            }
            ClusterSignal::DictLeaveReq { why } => {
                crate::probe!(self.counters, "dict: left the cluster, a change made elsewhere was refused here");
                let (host, req) = norr_signals::cluster::leave_and_restart(self.node, why);
                ctx.send_prio(host, req, Priority::A);
            }
            ClusterSignal::DictPendingClearRep => {
                if !self.leads() && self.pending.take().is_some() {
                    self.persist_in_background(ctx);
                }
            }
            ClusterSignal::DictStateRep(state) => {
                if !self.leads() {
                    // The end of the pending change (a DDL's change, or a new
                    // master's whole schema): the schema file drops it.
                    let ended = (state.ack || state.full) && self.pending.take().is_some();
                    if let Some((origin, pid)) = state.origin {
                        if origin == ctx.self_ref() {
                            self.proxy_done(pid, &state);
                        }
                    }
                    self.apply_state(&state);
                    // A new AUTO_INCREMENT mark too: were this node the
                    // master after a restart, it continues above it.
                    let changed = ended
                        || state.full
                        || !state.upsert.is_empty()
                        || !state.remove.is_empty()
                        || !state.auto_inc_high.is_empty();
                    // The write that will hold the change (None: no files,
                    // or nothing in the file changes, as for a TRUNCATE).
                    let write = if changed { self.next_schema_write() } else { None };
                    if changed {
                        self.persist_in_background(ctx);
                    }
                    if state.ack {
                        self.ack_state_after(write, from, ctx);
                    }
                    if state.mark_seq > 0 {
                        self.ack_mark_after(write, state.mark_seq, from, ctx);
                    }
                }
            }
            other => debug_assert!(false, "DICT got unexpected {other:?}"),
        }
    }

    /// Master: `node`'s DICT has the change of the DDL in its schema file.
    fn on_state_ack(&mut self, node: NodeId, ctx: &mut Ctx<'_, Signal>) {
        let expected = match self.active.as_mut().map(|a| &mut a.stage) {
            Some(Stage::Persisted { waiting, .. }) => waiting.remove(&node),
            _ => false,
        };
        if expected {
            self.progress(ctx);
        } else {
            // A node that failed and came back, a master change: the DDL it
            // confirms is answered already.
            crate::probe!(self.counters, "dict: schema write confirmation for no DDL");
        }
    }

    /// This node's schema write of the active change ended (`result`: the
    /// answer): the client hears it once the other DICTs confirmed theirs.
    fn own_persisted(&mut self, result: Result<DictResult, NodeError>, ctx: &mut Ctx<'_, Signal>) {
        match self.active.as_mut().map(|a| &mut a.stage) {
            Some(Stage::Persisted { own, .. }) => {
                debug_assert!(own.is_none(), "two schema writes of one DDL");
                *own = Some(result);
                self.progress(ctx);
            }
            _ => self.finish(ctx, result),
        }
    }

    /// A joining node's DICT: the master's whole schema arrived; create the
    /// tables in this node's LQH, TC and DIH, then tell DIH and the master.
    fn on_sync_conf(&mut self, state: &DictState, ctx: &mut Ctx<'_, Signal>) {
        // A change pending in this node's files from before it stopped is
        // the running cluster's business, long settled.
        self.pending = None;
        self.apply_state(state);
        self.persist_in_background(ctx);
        let req = self.next_req;
        self.next_req += 1;
        let mut waiting = BTreeSet::new();
        for i in 0..self.lqh_instances {
            waiting.insert(BlockRef::new(self.node, block::LQH, i));
        }
        for i in 0..self.tc_instances {
            waiting.insert(BlockRef::new(self.node, block::TC, i));
        }
        waiting.insert(BlockRef::new(self.node, block::DIH, 0));
        for def in self.tables.values() {
            for to in &waiting {
                let change = Box::new(SchemaChange::CreateTable(def.clone()));
                ctx.send(*to, internal(InternalSignal::SchemaChangeReq { req, change }));
            }
        }
        let outstanding = self.tables.len() * waiting.len();
        self.local_sync = Some(LocalSync { outstanding, req });
        self.local_sync_progress(ctx);
    }

    fn local_sync_progress(&mut self, ctx: &mut Ctx<'_, Signal>) {
        if self.local_sync.as_ref().is_none_or(|l| l.outstanding > 0) {
            return;
        }
        self.local_sync = None;
        let synced = ClusterSignal::DictSyncedRep { node: self.node };
        ctx.send(BlockRef::new(self.node, block::DIH, 0), cluster(synced.clone()));
        if let Some(m) = &self.membership {
            ctx.send(BlockRef::new(m.president, block::DICT, 0), cluster(synced));
        }
    }

    fn on_node_fail(&mut self, failed: &[NodeId], membership: Membership, ctx: &mut Ctx<'_, Signal>) {
        let old_master = self.membership.as_ref().map(|m| m.president);
        let was_master = self.is_master();
        self.membership = Some(membership);
        let took_over = !was_master && self.is_master();
        if old_master.is_some_and(|m| failed.contains(&m)) && !self.is_master() {
            // Requests of ours the failed master held: once the new
            // master's take-over report is in (`dict_proxy.rs`).
            self.proxy_reroute(ctx);
        }
        if let Some(a) = self.active.as_mut() {
            match &mut a.stage {
                Stage::Lqh { waiting, .. }
                | Stage::LqhAlterEnd { waiting, .. }
                | Stage::Tc { waiting }
                | Stage::LqhUndo { waiting, .. }
                | Stage::Stats { waiting, .. } => waiting.retain(|b| !failed.contains(&b.node)),
                Stage::Announce { waiting } | Stage::Persisted { waiting, .. } => {
                    waiting.retain(|n| !failed.contains(n))
                }
                Stage::Sync { node } => {
                    if failed.contains(node) {
                        crate::probe!(self.counters, "dict: joining node failed during its sync");
                        self.finish(ctx, Ok(DictResult::Done));
                        return;
                    }
                }
            }
        }
        self.queue.retain(|q| !(q.from.block == block::DICT && failed.contains(&q.from.node)));
        self.progress(ctx);
        if took_over {
            self.marks_take_over();
            self.take_over(ctx);
        } else if self.is_master() {
            self.marks_on_node_fail(failed, ctx);
        }
        if self.is_master() {
            self.start_next(ctx);
        }
    }
}

impl Block<Signal> for Dict {
    fn on_signal(&mut self, env: norr_kernel::Envelope<Signal>, ctx: &mut Ctx<'_, Signal>) {
        let from = env.from;
        match env.signal {
            Signal::DictReq(_) if self.failed_apis.contains(&from.node) => {}
            Signal::DictReq(req) => self.on_req(from, *req, ctx),
            reply @ (Signal::DictConf(_) | Signal::DictRef(_)) => self.proxy_answer(reply, ctx),
            Signal::ApiFailReq { api_node } => {
                self.privileges.forget(api_node);
                if self.failed_apis.insert(api_node) {
                    let me = ctx.self_ref();
                    ctx.send(me, internal(InternalSignal::ApiFailDone { api_node }));
                }
                self.queue.retain(|q| q.from.node != api_node);
                self.proxy_api_failed(api_node);
                if let Some(a) = self.active.as_mut().filter(|a| a.from.node == api_node) {
                    a.silent = true;
                }
            }
            Signal::Cluster(sig) => self.on_cluster(from, *sig, ctx),
            Signal::Fs(f) => self.on_fs(*f, ctx),
            Signal::Internal(sig) => match *sig {
                InternalSignal::SchemaChangeConf { req, error } => self.on_schema_conf(from, req, error, ctx),
                InternalSignal::StatsConf { req, stats } => self.on_stats_conf(from, req, *stats, ctx),
                InternalSignal::ApiFailDone { api_node } => {
                    self.failed_apis.remove(&api_node);
                }
                InternalSignal::ApiGrants { api_node, grants } => self.privileges.set(api_node, grants.map(|g| *g)),
                InternalSignal::StatsReq { req } => {
                    // DICT's counters (the node's own statistics are
                    // `DictOp::NodeStats`).
                    let stats = BlockStats { counters: self.counters.snapshot(), ..BlockStats::default() };
                    ctx.send(from, internal(InternalSignal::StatsConf { req, stats: Box::new(stats) }));
                }
                other => {
                    crate::probe!(self.counters, "dict: unexpected internal signal");
                    debug_assert!(false, "DICT got unexpected {other:?}")
                }
            },
            other => {
                crate::probe!(self.counters, "dict: unexpected signal");
                debug_assert!(false, "DICT got unexpected {}", other.name())
            }
        }
    }
}
