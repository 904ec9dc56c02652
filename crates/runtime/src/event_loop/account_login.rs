//! Native logins with a SQL account (`RuntimeOptions::api_accounts`, the
//! cluster's `api_auth = "account"`): the handshake's answer to a challenge
//! may be an account login (`norr_transport::account_auth`) instead of the
//! cluster-secret proof; its magic tells which. Only native clients log in
//! with an account: SQL nodes and management servers read and write the
//! accounts themselves, so they must prove the cluster secret.
//!
//! A connection logged in with an account has its grants handed to every TC
//! instance and DICT (`InternalSignal::ApiGrants`, checked by
//! `norr_txn::privileges`) when it is admitted, and again whenever the
//! account reader publishes the accounts anew (`refresh_grants`, once a loop
//! round): a GRANT or REVOKE holds for its next request.

use super::EventLoop;
use crate::conn::PendingAuth;
use crate::stream::Peer;
use norr_kernel::{BlockRef, Priority};
use norr_signals::{block, Envelope, InternalSignal, Signal};
use norr_transport::account_auth;
use norr_transport::account_book::peer_host;
use norr_transport::handshake::ApiKind;
use tracing::{debug, info, warn};

impl EventLoop {
    /// Check an account login answering `pending`'s challenge: None if it is
    /// accepted, else what the client is told (the exact reason is logged
    /// here with the peer's address).
    pub(super) fn account_login_refusal(
        &mut self,
        slot: usize,
        peer: Peer,
        pending: &PendingAuth,
        frame: &[u8],
    ) -> Option<String> {
        let Some(dir) = self.opts.api_accounts.as_ref() else {
            return Some(
                "this data node does not take account logins (the cluster's api_auth is \"secret\"): \
                 prove the cluster secret instead"
                    .into(),
            );
        };
        if pending.hello.kind != ApiKind::NativeClient {
            return Some(format!(
                "a {} proves the cluster secret: account logins are for native clients",
                pending.hello.kind
            ));
        }
        let login = match account_auth::decode_login(frame) {
            Ok(l) => l,
            Err(e) => return Some(format!("authentication failed: {e}")),
        };
        let Some(table) = dir.current() else {
            warn!(%peer, user = %login.user, "account login before the accounts were loaded");
            return Some(
                "this data node has not loaded the accounts yet (mysql.user, written by the SQL nodes): \
                 try again shortly"
                    .into(),
            );
        };
        let host = peer_host(match peer {
            Peer::Tcp(a) => Some(a),
            Peer::Unix | Peer::Local => None,
        });
        match table.check_login(&login, &host, &pending.nonce, self.node_id) {
            Ok(account) => {
                info!(%peer, user = %account.user, host = %account.host, acl_version = table.version, "account login accepted");
                if let Some(c) = self.conns[slot].as_mut() {
                    c.account = Some((account.user.clone(), account.host.clone()));
                }
                None
            }
            Err(r) => {
                warn!(%peer, reason = %r.to_log, acl_version = table.version, "account login refused");
                Some(r.to_client)
            }
        }
    }
}

impl EventLoop {
    /// Tell every TC instance and DICT what the account connection `slot`
    /// logged in with may do (`norr_txn::privileges`). Priority A: it runs
    /// before any request of the connection, which waits in job buffer B.
    /// Nothing for a connection without an account.
    pub(super) fn send_grants(&mut self, slot: usize) {
        let Some(c) = self.conns[slot].as_ref() else { return };
        let (Some(api_node), Some((user, host))) = (c.api_node, c.account.as_ref()) else { return };
        let Some(table) = self.opts.api_accounts.as_ref().and_then(|d| d.current()) else { return };
        let grants = table.grants_for(user, host);
        let from = BlockRef::new(self.node_id, 0, 0);
        let tcs = (0..self.sched.instances(block::TC)).map(|i| (block::TC, i));
        for (b, i) in tcs.chain([(block::DICT, 0)]) {
            let signal = Signal::Internal(Box::new(InternalSignal::ApiGrants {
                api_node,
                grants: Some(Box::new(grants.clone())),
            }));
            let env = Envelope { from, to: BlockRef::new(self.node_id, b, i), prio: Priority::A, signal };
            if let Err(e) = self.sched.deliver(env) {
                debug!(?e, api_node, "grants not delivered");
            }
        }
    }

    /// Once a loop round, before reading requests: when the accounts were
    /// published again (a GRANT, a REVOKE, a dropped account ...), give TC
    /// and DICT the new grants of every connection logged in with one, so
    /// the change holds for its next request without a reconnect.
    pub(super) fn refresh_grants(&mut self) {
        let Some(generation) = self.opts.api_accounts.as_ref().map(|d| d.generation()) else { return };
        if generation == self.grants_generation {
            return;
        }
        self.grants_generation = generation;
        let slots: Vec<usize> = (0..self.conns.len())
            .filter(|&s| self.conns[s].as_ref().is_some_and(|c| c.account.is_some() && c.api_node.is_some()))
            .collect();
        for slot in slots {
            self.send_grants(slot);
        }
    }
}
