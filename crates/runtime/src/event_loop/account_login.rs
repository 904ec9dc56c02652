//! Native logins with a SQL account (`RuntimeOptions::api_accounts`, the
//! cluster's `api_auth = "account"`): the handshake's answer to a challenge
//! may be an account login (`norr_transport::account_auth`) instead of the
//! cluster-secret proof; its magic tells which. Only native clients log in
//! with an account: SQL nodes and management servers read and write the
//! accounts themselves, so they must prove the cluster secret.

use super::EventLoop;
use crate::conn::PendingAuth;
use crate::stream::Peer;
use norr_transport::account_auth;
use norr_transport::account_book::peer_host;
use norr_transport::handshake::ApiKind;
use tracing::{info, warn};

impl EventLoop {
    /// Check an account login answering `pending`'s challenge: None if it is
    /// accepted, else what the client is told (the exact reason is logged
    /// here with the peer's address).
    pub(super) fn account_login_refusal(&mut self, peer: Peer, pending: &PendingAuth, frame: &[u8]) -> Option<String> {
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
                None
            }
            Err(r) => {
                warn!(%peer, reason = %r.to_log, acl_version = table.version, "account login refused");
                Some(r.to_client)
            }
        }
    }
}
