//! What LQH tells a take-over (`LqhTransReq`): the transactions it holds
//! whose coordinator was on a failed node, with whether it committed them
//! (and in which GCI) and the chains of their operations. The take-over TC
//! commits a transaction that any replica committed and aborts the others,
//! sending its commit / complete / abort along those chains; until then the
//! records (and their locks) stay here exactly as they were.

use super::Lqh;
use norr_kernel::{BlockRef, Ctx, NodeId};
use norr_signals::internal::{InternalSignal, TransInfo, TxnId};
use norr_signals::Signal;

/// Transactions reported per `LqhTransConf` (bounds the message size).
const TRANS_PER_CONF: usize = 256;

/// The data node whose TC handed out transaction id `t` (its top 16 bits).
pub fn tc_node_of(t: TxnId) -> NodeId {
    (t >> 48) as NodeId
}

impl Lqh {
    pub(super) fn on_trans_req(&mut self, from: BlockRef, failed_tc: NodeId, ctx: &mut Ctx<'_, Signal>) {
        crate::probe!(self.counters, "lqh: take-over report");
        let mut ids: Vec<TxnId> = self.txns.keys().copied().filter(|t| tc_node_of(*t) == failed_tc).collect();
        ids.sort_unstable();
        let infos: Vec<TransInfo> = ids
            .iter()
            .map(|t| {
                let x = &self.txns[t];
                TransInfo {
                    txn: *t,
                    api: x.api,
                    handle: x.handle,
                    committed: x.committed.then_some(x.gci),
                    chains: x.chains.iter().cloned().collect(),
                }
            })
            .collect();
        self.counters.bump_by("lqh: transactions reported to a take-over", infos.len() as u64);
        let mut chunks: Vec<Vec<TransInfo>> = infos.chunks(TRANS_PER_CONF).map(|c| c.to_vec()).collect();
        if chunks.is_empty() {
            chunks.push(Vec::new());
        }
        let last = chunks.len() - 1;
        for (i, txns) in chunks.into_iter().enumerate() {
            let conf = InternalSignal::LqhTransConf { failed_tc, txns, done: i == last };
            ctx.send(from, Signal::Internal(Box::new(conf)));
        }
    }
}
