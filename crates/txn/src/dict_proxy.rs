//! Requests a DICT that is not master passes on to the master, and what
//! becomes of them when the master fails.
//!
//! A client asks the DICT of the data node it is connected to; that DICT
//! passes the request on (`DictForwardReq`) and relays the answer. When the
//! master fails, each request it held had one of three ends, and the new
//! master's take-over report (`DictTakeoverRep`) tells this DICT which:
//! 1. done: the master committed it and told every DICT (its
//!    `DictStateRep` names the request), but the answer was lost with the
//!    master: this DICT answers from that state;
//! 2. half done: the change the new master finishes (the report names it):
//!    the new master answers;
//! 3. not begun (queued at the master, or announced to too few DICTs to
//!    have reached any LQH): passed on again to the new master.
//!
//! So a client hears a definite answer, never "outcome unknown". The report
//! may come before or after this node's own news of the failure
//! (`NodeFailRep`): the requests move once both are in.

use super::{cluster, Dict, DictState};
use norr_kernel::{BlockRef, Ctx, NodeId};
use norr_signals::cluster::ClusterSignal;
use norr_signals::{block, DictOp, DictReq, DictResult, ErrorCode, NodeError, Signal};
use std::collections::BTreeMap;

/// Most requests passed on at once (then Overloaded).
const MAX_PROXIED: usize = 16 * 1024;

/// A request passed on to the master.
pub(super) struct Proxied {
    api: BlockRef,
    id: u32,
    op: DictOp,
    /// The master it was sent to.
    to: NodeId,
    /// Its answer, from the master's `DictStateRep` (kept until the
    /// master's own answer, which normally follows at once).
    done: Option<DictResult>,
}

#[derive(Default)]
pub(super) struct Proxy {
    entries: BTreeMap<u32, Proxied>,
    next: u32,
    /// The last take-over report: the new master, and the request of this
    /// DICT it finishes (if any).
    takeover: Option<(NodeId, Option<u32>)>,
}

impl Dict {
    /// Not master: pass `req` from `api` on to the master.
    pub(super) fn proxy_forward(&mut self, api: BlockRef, req: DictReq, ctx: &mut Ctx<'_, Signal>) {
        if self.proxy.entries.len() >= MAX_PROXIED {
            let e = NodeError::with(ErrorCode::Overloaded, "too many dictionary requests in flight");
            return Self::dref(ctx, api, req.req_id, e);
        }
        self.proxy.next = self.proxy.next.wrapping_add(1).max(1);
        let pid = self.proxy.next;
        let master = self.membership.as_ref().expect("not master: a member").president;
        debug_assert!(master != self.node, "the master answers its own requests");
        let op = req.op.clone();
        self.proxy.entries.insert(pid, Proxied { api, id: req.req_id, op: req.op, to: master, done: None });
        Self::send_forward(master, pid, op, ctx);
    }

    fn send_forward(master: NodeId, pid: u32, op: DictOp, ctx: &mut Ctx<'_, Signal>) {
        let fwd = ClusterSignal::DictForwardReq { api: ctx.self_ref(), req: Box::new(DictReq { req_id: pid, op }) };
        ctx.send(BlockRef::new(master, block::DICT, 0), cluster(fwd));
    }

    /// The master's answer to a request passed on: relay it.
    pub(super) fn proxy_answer(&mut self, reply: Signal, ctx: &mut Ctx<'_, Signal>) {
        match reply {
            Signal::DictConf(mut c) => {
                if let Some(p) = self.proxy.entries.remove(&c.req_id) {
                    c.req_id = p.id;
                    ctx.send(p.api, Signal::DictConf(c));
                }
            }
            Signal::DictRef(mut r) => {
                if let Some(p) = self.proxy.entries.remove(&r.req_id) {
                    r.req_id = p.id;
                    ctx.send(p.api, Signal::DictRef(r));
                }
            }
            _ => unreachable!("only dictionary answers"),
        }
    }

    /// The master committed the change of request `pid` of this DICT
    /// (`state` is its `DictStateRep`): the answer, should the master's
    /// own be lost.
    pub(super) fn proxy_done(&mut self, pid: u32, state: &DictState) {
        let Some(p) = self.proxy.entries.get_mut(&pid) else { return };
        // As `Dict::commit` answers: the new definition, or Done for a
        // DROP or TRUNCATE.
        p.done = Some(match state.upsert.first() {
            Some(def) => DictResult::Table(def.clone()),
            None => DictResult::Done,
        });
    }

    /// The new master `master` took over; it finishes `finishing` (the
    /// request that began the change it found half done).
    pub(super) fn on_takeover_rep(
        &mut self,
        master: NodeId,
        finishing: Option<(BlockRef, u32)>,
        ctx: &mut Ctx<'_, Signal>,
    ) {
        let me = ctx.self_ref();
        let mine = finishing.filter(|(r, _)| *r == me).map(|(_, pid)| pid);
        self.proxy.takeover = Some((master, mine));
        self.proxy_reroute(ctx);
    }

    /// Requests sent to a master that failed, once this node follows the
    /// new one and has its take-over report: answered, left to it, or sent
    /// to it again (see the module doc).
    pub(super) fn proxy_reroute(&mut self, ctx: &mut Ctx<'_, Signal>) {
        let president = self.membership.as_ref().map(|m| m.president);
        let Some((master, finishing)) = self.proxy.takeover.filter(|(m, _)| Some(*m) == president) else { return };
        let stale: Vec<u32> = self.proxy.entries.iter().filter(|(_, p)| p.to != master).map(|(pid, _)| *pid).collect();
        for pid in stale {
            let p = self.proxy.entries.get_mut(&pid).expect("listed");
            p.to = master;
            if let Some(result) = p.done.take() {
                let (api, id) = (p.api, p.id);
                self.proxy.entries.remove(&pid);
                self.counters.bump("dict: requests answered after their master failed");
                Self::conf(ctx, api, id, result);
            } else if finishing == Some(pid) {
                self.counters.bump("dict: requests finished by the new master");
            } else {
                self.counters.bump("dict: requests passed on again after their master failed");
                let op = p.op.clone();
                Self::send_forward(master, pid, op, ctx);
            }
        }
    }

    /// API node `api_node` failed: its requests are forgotten (answers to
    /// them are dropped).
    pub(super) fn proxy_api_failed(&mut self, api_node: NodeId) {
        self.proxy.entries.retain(|_, p| p.api.node != api_node);
    }
}
