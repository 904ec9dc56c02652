//! Taking over the transactions of a failed coordinator (NDB's non-blocking
//! two-phase commit).
//!
//! Every TC remembers which failed data nodes' transactions are not yet
//! finished (`takeover_pending`). The president's TC instance 0 finishes
//! them: it asks every LQH instance of every member what it holds of
//! transactions whose id carries a failed node (`LqhTransReq`), gathers the
//! answers, and for each transaction found decides as the protocol requires:
//! commit (with the GCI reported) if any replica committed it (so the
//! coordinator had decided to commit), abort otherwise (nothing committed:
//! the coordinator cannot have told its client "committed"). It then runs the
//! commit or abort along the reported chains like any transaction of its
//! own, and tells the client the outcome (TC_KEY_FAILCONF): a client waiting
//! for the answer to its commit learns it; one that was not learns at its
//! next request on another node that the transaction is gone.
//!
//! When every such transaction is finished, it tells the members' TCs (each
//! tells its node's CKPT) and its own node's QMGR (`NfCompleteRep`): a failed node may only
//! join again after that, since its new transactions reuse transaction ids,
//! and no global checkpoint is saved before (the taken-over commits carry
//! the GCI their coordinator gave them).
//! If the president fails meanwhile, the next one takes over everything
//! still pending.

use super::{internal, AbortReply, Tc, TcTxn, TxnState};
use norr_kernel::{BlockRef, Ctx, NodeId};
use norr_signals::cluster::ClusterSignal;
use norr_signals::dist::Chain;
use norr_signals::internal::{InternalSignal, TransInfo, TxnId};
use norr_signals::{block, Signal};
use std::collections::{BTreeMap, BTreeSet};

/// What the LQHs reported of one transaction.
#[derive(Debug, Default)]
struct Found {
    api: Option<BlockRef>,
    handle: u64,
    committed: Option<u64>,
    chains: BTreeSet<Chain>,
    reporters: BTreeSet<(NodeId, u16)>,
}

#[derive(Debug)]
pub(crate) struct Takeover {
    /// The failed nodes this round takes over.
    nodes: BTreeSet<NodeId>,
    /// (LQH node, instance, failed node) whose last report has not come.
    waiting: BTreeSet<(NodeId, u16, NodeId)>,
    found: BTreeMap<TxnId, Found>,
    /// Every report is in and the transactions found were started.
    started: bool,
    /// Transactions started, and of those finished.
    open: usize,
    finished: usize,
}

fn cluster(s: ClusterSignal) -> Signal {
    Signal::Cluster(Box::new(s))
}

impl Tc {
    fn is_takeover_tc(&self) -> bool {
        self.instance == 0 && self.membership.as_ref().is_some_and(|m| m.president == self.node)
    }

    /// Start a take-over round if this is the president's TC, none runs and
    /// failed nodes wait for one.
    pub(super) fn maybe_take_over(&mut self, ctx: &mut Ctx<'_, Signal>) {
        if !self.is_takeover_tc() || self.takeover.is_some() || self.takeover_pending.is_empty() {
            return;
        }
        let members = self.membership.as_ref().expect("president").members.clone();
        let nodes = self.takeover_pending.clone();
        self.counters.bump("tc: take-overs started");
        let mut waiting = BTreeSet::new();
        for m in &members {
            for i in 0..self.lqh_instances {
                for f in &nodes {
                    waiting.insert((*m, i, *f));
                    let req = InternalSignal::LqhTransReq { failed_tc: *f };
                    ctx.send(BlockRef::new(*m, block::LQH, i), internal(req));
                }
            }
        }
        self.takeover = Some(Takeover { nodes, waiting, found: BTreeMap::new(), started: false, open: 0, finished: 0 });
    }

    /// A reporting LQH's node failed: its report will not come.
    pub(super) fn takeover_node_fail(&mut self, failed: &[NodeId], ctx: &mut Ctx<'_, Signal>) {
        if let Some(tk) = self.takeover.as_mut() {
            tk.waiting.retain(|(n, _, _)| !failed.contains(n));
        }
        self.takeover_step(ctx);
    }

    pub(super) fn on_trans_conf(
        &mut self,
        from: BlockRef,
        failed_tc: NodeId,
        txns: Vec<TransInfo>,
        done: bool,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        let Some(tk) = self.takeover.as_mut() else {
            crate::probe!(self.counters, "tc: take-over report without a take-over");
            return;
        };
        for info in txns {
            debug_assert_eq!(info.txn >> 48, failed_tc as u64);
            let f = tk.found.entry(info.txn).or_default();
            f.api = Some(info.api);
            f.handle = info.handle;
            if let Some(g) = info.committed {
                // Every replica that committed it did so with the one GCI
                // the coordinator decided.
                debug_assert!(f.committed.is_none_or(|x| x == g), "one transaction, two GCIs");
                f.committed = Some(g);
            }
            f.chains.extend(info.chains);
            f.reporters.insert((from.node, from.instance));
        }
        if done {
            tk.waiting.remove(&(from.node, from.instance, failed_tc));
        }
        self.takeover_step(ctx);
    }

    /// Once every LQH reported: finish every transaction found.
    fn takeover_step(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let Some(tk) = self.takeover.as_mut() else {
            return;
        };
        if tk.started || !tk.waiting.is_empty() {
            return;
        }
        tk.started = true;
        let found = std::mem::take(&mut tk.found);
        let now = ctx.now_ns();
        let mut started = 0;
        for (t, f) in found {
            if self.txns.contains_key(&t) {
                crate::probe!(self.counters, "tc: taken-over transaction already known");
                continue;
            }
            let dist = &self.dist;
            let chains: BTreeSet<Chain> = f
                .chains
                .iter()
                .filter_map(|c| {
                    // Down, not dead in the distribution: see `Tc::note_chain`.
                    let down: Vec<NodeId> = c.nodes.iter().copied().filter(|n| dist.down(*n)).collect();
                    c.without(&down)
                })
                .collect();
            let mut nodes = f.reporters.clone();
            for c in &chains {
                nodes.extend(c.nodes.iter().map(|n| (*n, c.instance)));
            }
            let api = f.api.expect("a report names the client");
            let txn = TcTxn {
                api,
                handle: f.handle,
                state: TxnState::Idle,
                nodes,
                chains,
                wrote: true,
                ack_after_complete: false,
                gci: 0,
                wait_disk: false,
                taken_over: true,
                final_results: Vec::new(),
                ops: 0,
                last_active_ns: now,
                batch: None,
                scans: BTreeSet::new(),
                silent: false,
                savepoint: 0,
            };
            self.txns.insert(t, txn);
            started += 1;
            match f.committed {
                Some(gci) => {
                    crate::probe!(self.counters, "tc: taken-over transaction committed");
                    *self.committing.entry(gci).or_insert(0) += 1;
                    let tc = ctx.self_ref();
                    let txn = self.txns.get_mut(&t).expect("just inserted");
                    txn.gci = gci;
                    let waiting = super::commit_chains(&txn.chains);
                    for c in &waiting {
                        let req = InternalSignal::LqhCommitReq { txn: t, gci, chain: c.clone(), tc };
                        ctx.send(Self::lqh_at(c.tail(), c.instance), internal(req));
                    }
                    let empty = waiting.is_empty();
                    txn.state = TxnState::Committing { waiting, error: None };
                    if empty {
                        self.commit_done(t, ctx);
                    }
                }
                None => {
                    crate::probe!(self.counters, "tc: taken-over transaction aborted");
                    self.abort(t, AbortReply::TakenOver, ctx);
                }
            }
        }
        self.counters.bump_by("tc: transactions taken over", started as u64);
        let tk = self.takeover.as_mut().expect("take-over");
        // Transactions finished at once above are counted in `finished` already.
        tk.open = started;
        self.takeover_finish_if_done(ctx);
    }

    /// A taken-over transaction committed or aborted.
    pub(super) fn takeover_txn_done(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let Some(tk) = self.takeover.as_mut() else {
            return;
        };
        tk.finished += 1;
        self.takeover_finish_if_done(ctx);
    }

    fn takeover_finish_if_done(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let Some(tk) = self.takeover.as_ref() else {
            return;
        };
        if !tk.started || tk.finished < tk.open {
            return;
        }
        let tk = self.takeover.take().expect("take-over");
        self.counters.bump("tc: take-overs done");
        let members = self.membership.as_ref().expect("president").members.clone();
        for node in &tk.nodes {
            self.takeover_pending.remove(node);
            for m in &members {
                ctx.send(BlockRef::new(*m, block::TC, 0), cluster(ClusterSignal::NfCompleteRep { node: *node }));
            }
            let qmgr = BlockRef::new(self.node, block::QMGR, 0);
            ctx.send(qmgr, cluster(ClusterSignal::NfCompleteRep { node: *node }));
        }
        // Failures that came meanwhile.
        self.maybe_take_over(ctx);
    }
}
