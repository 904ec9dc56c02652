//! A node's session with mgmd, when the cluster has a secret: before mgmd
//! reserves a node id, hands out the configuration (which names every
//! node's address) or takes reports and arbitration requests, the peer
//! proves the secret. Without this, anyone who reaches mgmd's port could
//! take a data node's id (so the real node is refused), feed `norr mgm
//! show` false reports, or ask for arbitration in a data node's name.
//!
//! The exchange: Hello; mgmd answers `SessionChallenge { nonce }`; the peer
//! sends `SessionProof` (HMAC-SHA-256 keyed with the secret over mgmd's
//! nonce, a nonce of the peer's and `mgm_session_context`: the mgmd, the
//! role and the node id the Hello asked for); then Welcome or Refused as
//! before. `norr mgm` sessions (role `Mgm`) are not challenged: they only
//! read (`show`, `status`), and the commands that change the cluster carry
//! their own proof (`command_auth`).
//!
//! No I/O here: the server and the session code send and receive.

use crate::protocol::{PeerRole, ToMgmd};
use norr_kernel::NodeId;
use norr_transport::auth::{self, AuthResponse, ClusterSecret, AUTH_MAGIC, NONCE_BYTES};

/// The role's number in the proof's context (fixed: part of what is signed).
fn role_byte(role: PeerRole) -> u8 {
    match role {
        PeerRole::DataNode => 1,
        PeerRole::SqlNode => 2,
        PeerRole::Api => 3,
        PeerRole::Mgm => 4,
    }
}

/// Does mgmd challenge a Hello of `role`? Only with a secret, and never
/// the management client's (see the module doc). With `accounts`
/// (`api_auth = "account"`) native clients log in to the data nodes with a
/// SQL account and need not know the secret: their sessions (an API node
/// id, which the data nodes still check) are not challenged either; data
/// and SQL nodes' are.
pub fn challenged(secret: Option<&ClusterSecret>, role: PeerRole, accounts: bool) -> bool {
    secret.is_some() && role != PeerRole::Mgm && !(accounts && role == PeerRole::Api)
}

/// The peer's proof for mgmd `mgmd`'s challenge `nonce`, for the session
/// its Hello asked for (`role`, `requested` node id).
pub fn prove(
    secret: &ClusterSecret,
    nonce: &[u8; NONCE_BYTES],
    mgmd: NodeId,
    role: PeerRole,
    requested: Option<NodeId>,
) -> Result<ToMgmd, String> {
    let r = auth::respond(secret, nonce, &auth::mgm_session_context(mgmd, role_byte(role), requested))?;
    Ok(ToMgmd::SessionProof { client_nonce: r.client_nonce, proof: r.proof })
}

/// mgmd's check of a `SessionProof`. Err: the refusal's text.
pub fn check(
    secret: &ClusterSecret,
    nonce: &[u8; NONCE_BYTES],
    mgmd: NodeId,
    role: PeerRole,
    requested: Option<NodeId>,
    client_nonce: &[u8; NONCE_BYTES],
    proof: &[u8; 32],
) -> Result<(), String> {
    let r = AuthResponse { magic: AUTH_MAGIC, client_nonce: *client_nonce, proof: *proof };
    let context = auth::mgm_session_context(mgmd, role_byte(role), requested);
    if auth::verify(secret, nonce, &context, &r) {
        Ok(())
    } else {
        Err(format!("wrong cluster secret: the proof of {} does not match this mgmd's secret", role.with_article()))
    }
}

/// The refusal a peer without the secret gets (and logs), with what to do.
pub fn missing_secret_reason(role: PeerRole) -> String {
    format!(
        "mgmd asks {} for the proof of the cluster secret and it has none: give the node the cluster's secret \
         (--secret-file FILE, --data-dir DIR holding cluster.secret, or {})",
        role.with_article(),
        auth::SECRET_ENV
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(c: char) -> ClusterSecret {
        ClusterSecret::new(&c.to_string().repeat(40)).unwrap()
    }

    fn parts(m: ToMgmd) -> ([u8; 32], [u8; 32]) {
        match m {
            ToMgmd::SessionProof { client_nonce, proof } => (client_nonce, proof),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_proof_holds_only_for_its_secret_nonce_mgmd_role_and_node_id() {
        let (s, nonce) = (secret('a'), [7u8; 32]);
        let (cn, proof) = parts(prove(&s, &nonce, 1, PeerRole::DataNode, Some(3)).unwrap());
        assert_eq!(check(&s, &nonce, 1, PeerRole::DataNode, Some(3), &cn, &proof), Ok(()));
        let wrong = [
            check(&secret('b'), &nonce, 1, PeerRole::DataNode, Some(3), &cn, &proof),
            check(&s, &[8u8; 32], 1, PeerRole::DataNode, Some(3), &cn, &proof),
            check(&s, &nonce, 2, PeerRole::DataNode, Some(3), &cn, &proof),
            check(&s, &nonce, 1, PeerRole::SqlNode, Some(3), &cn, &proof),
            check(&s, &nonce, 1, PeerRole::DataNode, Some(4), &cn, &proof),
            check(&s, &nonce, 1, PeerRole::DataNode, None, &cn, &proof),
            check(&s, &nonce, 1, PeerRole::DataNode, Some(3), &[0u8; 32], &proof),
        ];
        for (i, r) in wrong.iter().enumerate() {
            let e = r.as_ref().expect_err(&format!("case {i} passed"));
            assert!(e.contains("wrong cluster secret"), "{e}");
        }
        let mut bad = proof;
        bad[0] ^= 1;
        assert!(check(&s, &nonce, 1, PeerRole::DataNode, Some(3), &cn, &bad).is_err());
    }

    #[test]
    fn only_nodes_of_a_cluster_with_a_secret_are_challenged() {
        let s = secret('a');
        assert!(challenged(Some(&s), PeerRole::DataNode, false));
        assert!(challenged(Some(&s), PeerRole::SqlNode, false));
        assert!(challenged(Some(&s), PeerRole::Api, false));
        assert!(!challenged(Some(&s), PeerRole::Mgm, false));
        assert!(!challenged(None, PeerRole::DataNode, false));
        // Account logins: native clients do not hold the secret.
        assert!(!challenged(Some(&s), PeerRole::Api, true));
        assert!(challenged(Some(&s), PeerRole::DataNode, true));
        assert!(challenged(Some(&s), PeerRole::SqlNode, true));
    }

    #[test]
    fn a_session_proof_is_not_a_command_proof() {
        // The same secret and nonce: the 'S' and 'M' contexts differ, so a
        // proof a node made for its session never passes as `stop --all`.
        let s = secret('a');
        let mut gate = crate::command_auth::CommandGate::new(Some(s.clone()), 1);
        let nonce = gate.challenge(5).unwrap();
        let (cn, proof) = parts(prove(&s, &nonce, 1, PeerRole::DataNode, Some(3)).unwrap());
        let r = gate.check_signed(5, &crate::protocol::MgmCommand::StopAll, &cn, &proof);
        assert!(r.as_ref().is_err_and(|e| e.contains("wrong cluster secret")), "{r:?}");
        // And the gate itself takes a real command proof over that kind of nonce.
        let nonce = gate.challenge(6).unwrap();
        let signed = crate::command_auth::sign(&s, &nonce, 1, 6, crate::protocol::MgmCommand::StopAll).unwrap();
        let ToMgmd::SignedCommand { client_nonce, proof, .. } = signed else { panic!() };
        assert_eq!(gate.check_signed(6, &crate::protocol::MgmCommand::StopAll, &client_nonce, &proof), Ok(()));
    }
}
