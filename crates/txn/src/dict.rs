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

use crate::validate::{validate_alter, validate_index, validate_table};
use norr_kernel::{Block, BlockRef, Ctx, NodeId};
use norr_knobs::Knobs;
use norr_signals::internal::{BlockStats, InternalSignal, SchemaChange};
use norr_signals::schema::{IndexDef, IndexId, IndexKind, TableDef, TableId, PK_ORDERED_INDEX};
use norr_signals::{
    block, ColumnSource, DictConf, DictOp, DictRef, DictReq, DictResult, ErrorCode, NodeError, NodeStats, Signal,
};
use std::collections::{BTreeMap, VecDeque};

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
    /// Waiting for `waiting` LQH instances.
    Lqh {
        waiting: usize,
        error: Option<NodeError>,
    },
    /// Waiting for this many TC instances to take the change.
    Tc {
        waiting: usize,
    },
    Stats {
        waiting: usize,
        acc: BlockStats,
    },
    /// ALTER TABLE: every LQH prepared (or refused); waiting for this many
    /// to switch to their copy (`error` None) or drop it (`error`: why the
    /// change is refused).
    LqhAlterEnd {
        waiting: usize,
        error: Option<NodeError>,
    },
}

struct Active {
    from: BlockRef,
    req_id: u32,
    req: u64,
    change: Option<SchemaChange>,
    stage: Stage,
    silent: bool,
}

pub struct Dict {
    node: NodeId,
    lqh_instances: u16,
    /// TC instances of the node: each keeps its own copy of the definitions.
    tc_instances: u16,
    default_partitions: u32,
    tables: BTreeMap<TableId, TableDef>,
    next_table_id: TableId,
    next_index_id: IndexId,
    /// Next AUTO_INCREMENT value per table.
    auto_inc: BTreeMap<TableId, u64>,
    queue: VecDeque<Queued>,
    active: Option<Active>,
    next_req: u64,
    /// API nodes whose failure is being handled (see `InternalSignal::ApiFailDone`).
    failed_apis: std::collections::BTreeSet<NodeId>,
    /// The cluster's distribution as DIH last published it (this node alone
    /// until a DIH runs).
    dist: norr_signals::dist::Dist,
}

fn internal(s: InternalSignal) -> Signal {
    Signal::Internal(Box::new(s))
}

impl Dict {
    pub fn new(node: NodeId, lqh_instances: u16, knobs: &Knobs) -> Dict {
        Dict {
            node,
            lqh_instances,
            tc_instances: knobs.tc_instances.max(1),
            default_partitions: knobs.default_partitions,
            tables: BTreeMap::new(),
            next_table_id: 1,
            next_index_id: 1,
            auto_inc: BTreeMap::new(),
            queue: VecDeque::new(),
            active: None,
            next_req: 1,
            failed_apis: Default::default(),
            dist: norr_signals::dist::Dist::single(node),
        }
    }

    fn by_name(&self, name: &str) -> Option<&TableDef> {
        self.tables.values().find(|t| t.name == name)
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
        match &req.op {
            DictOp::GetTable { name } => match self.by_name(name) {
                Some(d) => Self::conf(ctx, from, id, DictResult::Table(d.clone())),
                None => Self::dref(ctx, from, id, NodeError::with(ErrorCode::NoSuchTable, name.clone())),
            },
            DictOp::ListTables => {
                Self::conf(ctx, from, id, DictResult::Tables(self.tables.values().cloned().collect()))
            }
            DictOp::GetDistribution => Self::conf(ctx, from, id, DictResult::Distribution(Box::new(self.dist.clone()))),
            DictOp::NextAutoInc { table, count } => match self.auto_inc.get_mut(table) {
                Some(next) => {
                    let first = *next;
                    // count 0 reserves nothing: a look at the next value.
                    *next = next.saturating_add(*count);
                    Self::conf(ctx, from, id, DictResult::AutoInc { first });
                }
                None => Self::dref(ctx, from, id, NodeError::with(ErrorCode::NoSuchTable, format!("table id {table}"))),
            },
            DictOp::BumpAutoInc { table, used } => match self.auto_inc.get_mut(table) {
                Some(next) => {
                    *next = (*next).max(used.saturating_add(1));
                    Self::conf(ctx, from, id, DictResult::Done);
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

    /// Start queued requests until one needs to wait for other blocks.
    fn start_next(&mut self, ctx: &mut Ctx<'_, Signal>) {
        while self.active.is_none() {
            let Some(q) = self.queue.pop_front() else {
                return;
            };
            let (from, req_id) = (q.from, q.req.req_id);
            match self.plan(q.req.op) {
                Err(e) => Self::dref(ctx, from, req_id, e),
                Ok(None) => {
                    // NodeStats: ask every block.
                    let req = self.next_req;
                    self.next_req += 1;
                    for i in 0..self.lqh_instances {
                        ctx.send(BlockRef::new(self.node, block::LQH, i), internal(InternalSignal::StatsReq { req }));
                    }
                    for i in 0..self.tc_instances {
                        ctx.send(BlockRef::new(self.node, block::TC, i), internal(InternalSignal::StatsReq { req }));
                    }
                    let waiting = self.lqh_instances as usize + self.tc_instances as usize;
                    let stage = Stage::Stats { waiting, acc: BlockStats::default() };
                    self.active = Some(Active { from, req_id, req, change: None, stage, silent: false });
                }
                Ok(Some(change)) => {
                    let req = self.next_req;
                    self.next_req += 1;
                    for i in 0..self.lqh_instances {
                        let s = InternalSignal::SchemaChangeReq { req, change: Box::new(change.clone()) };
                        ctx.send(BlockRef::new(self.node, block::LQH, i), internal(s));
                    }
                    let stage = Stage::Lqh { waiting: self.lqh_instances as usize, error: None };
                    self.active = Some(Active { from, req_id, req, change: Some(change), stage, silent: false });
                }
            }
        }
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
            DictOp::TruncateTable { name } => SchemaChange::TruncateTable(self.find(&name)?.id),
            DictOp::CreateIndex { table, mut index } => {
                let mut def = self.find(&table)?;
                if def.index_by_name(&index.name).is_some() {
                    return Err(NodeError::with(ErrorCode::IndexExists, index.name));
                }
                if index.name.eq_ignore_ascii_case(PK_ORDERED_INDEX) {
                    return Err(reserved_name());
                }
                validate_index(&def, &index).map_err(|m| NodeError::with(ErrorCode::BadSchema, m))?;
                index.id = self.next_index_id;
                self.next_index_id += 1;
                let id = index.id;
                def.indexes.push(index);
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
                def.indexes.retain(|i| i.id != id);
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
                validate_table(&def).map_err(|m| NodeError::with(ErrorCode::BadSchema, m))?;
                validate_alter(&old, &def, &sources).map_err(|m| NodeError::with(ErrorCode::BadSchema, m))?;
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
                DictResult::Done
            }
            SchemaChange::TruncateTable(t) => {
                self.auto_inc.insert(t, 1);
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
        if !a.silent {
            match result {
                Ok(r) => Self::conf(ctx, a.from, a.req_id, r),
                Err(e) => Self::dref(ctx, a.from, a.req_id, e),
            }
        }
        self.start_next(ctx);
    }

    fn on_schema_conf(&mut self, req: u64, error: Option<NodeError>, ctx: &mut Ctx<'_, Signal>) {
        let Some(a) = self.active.as_mut().filter(|a| a.req == req) else {
            debug_assert!(false, "stray schema conf {req}");
            return;
        };
        match &mut a.stage {
            Stage::Lqh { waiting, error: first } => {
                *waiting -= 1;
                if first.is_none() {
                    *first = error;
                }
                if *waiting > 0 {
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
                    a.stage = Stage::LqhAlterEnd { waiting: self.lqh_instances as usize, error };
                    a.change = Some(next.clone());
                    for i in 0..self.lqh_instances {
                        let s = InternalSignal::SchemaChangeReq { req, change: Box::new(next.clone()) };
                        ctx.send(BlockRef::new(self.node, block::LQH, i), internal(s));
                    }
                    return;
                }
                if let Some(e) = first.take() {
                    // With several LQH instances, those that applied it would
                    // need undoing; with one, nothing changed.
                    return self.finish(ctx, Err(e));
                }
                self.send_to_tc(ctx);
            }
            Stage::LqhAlterEnd { waiting, error: refused } => {
                debug_assert!(error.is_none(), "LQH failed to switch or drop an ALTER TABLE copy: {error:?}");
                *waiting -= 1;
                if *waiting > 0 {
                    return;
                }
                if let Some(e) = refused.take() {
                    return self.finish(ctx, Err(e));
                }
                self.send_to_tc(ctx);
            }
            Stage::Tc { waiting } => {
                debug_assert!(error.is_none(), "TC cannot refuse a schema change");
                *waiting -= 1;
                if *waiting > 0 {
                    return;
                }
                let change = a.change.take().expect("schema change");
                let r = self.commit(change);
                self.finish(ctx, Ok(r));
            }
            Stage::Stats { .. } => debug_assert!(false, "schema conf during stats"),
        }
    }

    /// Every LQH took the active change: hand it to the TC instances.
    fn send_to_tc(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let (node, tcs) = (self.node, self.tc_instances);
        let a = self.active.as_mut().expect("active request");
        a.stage = Stage::Tc { waiting: tcs as usize };
        let change = a.change.clone().expect("schema change");
        for i in 0..tcs {
            let s = InternalSignal::SchemaChangeReq { req: a.req, change: Box::new(change.clone()) };
            ctx.send(BlockRef::new(node, block::TC, i), internal(s));
        }
    }

    fn on_stats_conf(&mut self, req: u64, s: BlockStats, ctx: &mut Ctx<'_, Signal>) {
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
        *waiting -= 1;
        if *waiting == 0 {
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
}

impl Block<Signal> for Dict {
    fn on_signal(&mut self, env: norr_kernel::Envelope<Signal>, ctx: &mut Ctx<'_, Signal>) {
        match env.signal {
            Signal::DictReq(_) if self.failed_apis.contains(&env.from.node) => {}
            Signal::DictReq(req) => self.on_req(env.from, *req, ctx),
            Signal::ApiFailReq { api_node } => {
                if self.failed_apis.insert(api_node) {
                    let me = ctx.self_ref();
                    ctx.send(me, internal(InternalSignal::ApiFailDone { api_node }));
                }
                self.queue.retain(|q| q.from.node != api_node);
                if let Some(a) = self.active.as_mut().filter(|a| a.from.node == api_node) {
                    a.silent = true;
                }
            }
            Signal::Internal(sig) => match *sig {
                InternalSignal::SchemaChangeConf { req, error } => self.on_schema_conf(req, error, ctx),
                InternalSignal::StatsConf { req, stats } => self.on_stats_conf(req, *stats, ctx),
                InternalSignal::ApiFailDone { api_node } => {
                    self.failed_apis.remove(&api_node);
                }
                other => debug_assert!(false, "DICT got unexpected {other:?}"),
            },
            other => debug_assert!(false, "DICT got unexpected {}", other.name()),
        }
    }
}
