//! Who may change the cluster through mgmd.
//!
//! mgmd's port answers anyone (data nodes, SQL nodes and clients fetch the
//! configuration from it), so without a check anyone who reaches it could
//! stop every data node. A mgmd that holds the cluster secret therefore
//! serves a state-changing command (stop, start, restart, stop --all) only
//! when it comes with a proof of the secret: HMAC-SHA-256 keyed with the
//! secret over a nonce mgmd handed out for it, a nonce of the client's, and
//! the command itself (`norr_transport::auth::mgm_command_context`). The
//! nonce serves one command; a proof is bound to the command and to the mgmd
//! that asked for it, so a recorded exchange cannot be replayed, nor a proof
//! for `stop 3` turned into `stop --all`. `show` and `status` only read and
//! stay open.
//!
//! [`CommandGate`] is one connection's side of this in mgmd; [`sign`] is the
//! client's. Neither does I/O.

use crate::protocol::{MgmCommand, ToMgmd};
use norr_kernel::NodeId;
use norr_transport::auth::{self, AuthResponse, ClusterSecret, AUTH_MAGIC, NONCE_BYTES};

/// The bytes a command's proof covers (with the mgmd's node id, through
/// `mgm_command_context`): its request id and the command, postcard-encoded.
fn context(mgmd: NodeId, req_id: u32, cmd: &MgmCommand) -> Vec<u8> {
    let bytes = postcard::to_stdvec(&(req_id, cmd)).expect("postcard encodes to a Vec");
    auth::mgm_command_context(mgmd, &bytes)
}

/// The client's signed command for mgmd `mgmd`'s challenge `nonce`.
pub fn sign(
    secret: &ClusterSecret,
    nonce: &[u8; NONCE_BYTES],
    mgmd: NodeId,
    req_id: u32,
    cmd: MgmCommand,
) -> Result<ToMgmd, String> {
    let r = auth::respond(secret, nonce, &context(mgmd, req_id, &cmd))?;
    Ok(ToMgmd::SignedCommand { req_id, cmd, client_nonce: r.client_nonce, proof: r.proof })
}

/// The text of a refusal: what was refused and what to do about it.
pub fn missing_secret_reason(cmd: &MgmCommand) -> String {
    format!(
        "mgmd refused {}: this cluster has a secret, and commands that change it need the proof of it (show and \
         status do not); run norr mgm with --secret-file FILE, --data-dir DIR (its cluster.secret) or {}",
        command_name(cmd),
        auth::SECRET_ENV
    )
}

/// "stop 3", "stop --all": as the user typed it.
pub fn command_name(cmd: &MgmCommand) -> String {
    match cmd {
        MgmCommand::Show => "show".into(),
        MgmCommand::Status => "status".into(),
        MgmCommand::Stop { node } => format!("stop {node}"),
        MgmCommand::Start { node } => format!("start {node}"),
        MgmCommand::Restart { node } => format!("restart {node}"),
        MgmCommand::StopAll => "stop --all".into(),
    }
}

/// One mgmd connection's command check: the secret (None: commands are
/// open) and the nonce handed out last, not used yet.
pub struct CommandGate {
    secret: Option<ClusterSecret>,
    mgmd: NodeId,
    pending: Option<(u32, [u8; NONCE_BYTES])>,
}

impl CommandGate {
    pub fn new(secret: Option<ClusterSecret>, mgmd: NodeId) -> CommandGate {
        CommandGate { secret, mgmd, pending: None }
    }

    /// Whether commands that change the cluster need a proof.
    pub fn required(&self) -> bool {
        self.secret.is_some()
    }

    /// A fresh nonce for command `req_id` (replacing an unused one). mgmd
    /// hands one out also without a secret: a client that signs
    /// everything then works against both.
    pub fn challenge(&mut self, req_id: u32) -> Result<[u8; NONCE_BYTES], String> {
        let nonce = auth::new_nonce()?;
        self.pending = Some((req_id, nonce));
        Ok(nonce)
    }

    /// The node id the proof is bound to (sent with the challenge).
    pub fn mgmd(&self) -> NodeId {
        self.mgmd
    }

    /// May `cmd`, sent without a proof, run? Err: the refusal's reason.
    pub fn check_plain(&self, cmd: &MgmCommand) -> Result<(), String> {
        if self.required() && cmd.changes_state() {
            return Err(missing_secret_reason(cmd));
        }
        Ok(())
    }

    /// May this signed command run? The pending nonce is used up either
    /// way, so a wrong guess costs the guesser a round trip per try and a
    /// right proof cannot be sent twice.
    pub fn check_signed(
        &mut self,
        req_id: u32,
        cmd: &MgmCommand,
        client_nonce: &[u8; NONCE_BYTES],
        proof: &[u8; 32],
    ) -> Result<(), String> {
        let pending = self.pending.take();
        let Some(secret) = &self.secret else { return Ok(()) };
        let what = command_name(cmd);
        let Some((challenged_id, nonce)) = pending else {
            return Err(format!(
                "mgmd refused {what}: its proof answers no challenge (ask for one first; each serves one command)"
            ));
        };
        if challenged_id != req_id {
            return Err(format!(
                "mgmd refused {what}: the challenge was for request {challenged_id}, the command is request {req_id}"
            ));
        }
        let r = AuthResponse { magic: AUTH_MAGIC, client_nonce: *client_nonce, proof: *proof };
        if !auth::verify(secret, &nonce, &context(self.mgmd, req_id, cmd), &r) {
            return Err(format!(
                "mgmd refused {what}: wrong cluster secret (the proof does not match this mgmd's secret)"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(c: char) -> ClusterSecret {
        ClusterSecret::new(&c.to_string().repeat(40)).unwrap()
    }

    fn signed(s: &ClusterSecret, nonce: &[u8; 32], mgmd: NodeId, req_id: u32, cmd: MgmCommand) -> ([u8; 32], [u8; 32]) {
        match sign(s, nonce, mgmd, req_id, cmd).unwrap() {
            ToMgmd::SignedCommand { client_nonce, proof, .. } => (client_nonce, proof),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn with_a_secret_only_proven_commands_that_change_the_cluster_run() {
        let s = secret('a');
        let mut g = CommandGate::new(Some(s.clone()), 1);
        assert!(g.check_plain(&MgmCommand::Show).is_ok());
        assert!(g.check_plain(&MgmCommand::Status).is_ok());
        for cmd in [
            MgmCommand::Stop { node: 2 },
            MgmCommand::Start { node: 2 },
            MgmCommand::Restart { node: 2 },
            MgmCommand::StopAll,
        ] {
            let e = g.check_plain(&cmd).unwrap_err();
            assert!(e.contains(&command_name(&cmd)) && e.contains("--secret-file"), "{e}");
        }
        let stop = MgmCommand::Stop { node: 3 };
        // Right secret: runs once.
        let nonce = g.challenge(7).unwrap();
        let (cn, proof) = signed(&s, &nonce, 1, 7, stop.clone());
        assert_eq!(g.check_signed(7, &stop, &cn, &proof), Ok(()));
        let e = g.check_signed(7, &stop, &cn, &proof).unwrap_err();
        assert!(e.contains("answers no challenge"), "replayed: {e}");
        // A fresh challenge does not revive the old proof.
        let _ = g.challenge(7).unwrap();
        assert!(g.check_signed(7, &stop, &cn, &proof).unwrap_err().contains("wrong cluster secret"));
        // Wrong secret; the proof of another command, request or mgmd.
        for (sec, mgmd, req, cmd) in [
            (secret('b'), 1, 8, stop.clone()),
            (s.clone(), 1, 8, MgmCommand::Stop { node: 2 }),
            (s.clone(), 1, 8, MgmCommand::StopAll),
            (s.clone(), 50, 8, stop.clone()),
        ] {
            let nonce = g.challenge(8).unwrap();
            let (cn, proof) = signed(&sec, &nonce, mgmd, 8, cmd.clone());
            let e = g.check_signed(req, &stop, &cn, &proof).unwrap_err();
            assert!(e.contains("wrong cluster secret") && e.contains("stop 3"), "{sec:?} {mgmd} {cmd:?}: {e}");
        }
        // Signed for request 9 but sent as request 10.
        let nonce = g.challenge(9).unwrap();
        let (cn, proof) = signed(&s, &nonce, 1, 9, stop.clone());
        assert!(g.check_signed(10, &stop, &cn, &proof).unwrap_err().contains("request 9"));
    }

    #[test]
    fn without_a_secret_everything_runs() {
        let mut g = CommandGate::new(None, 1);
        assert!(!g.required());
        assert!(g.check_plain(&MgmCommand::StopAll).is_ok());
        assert!(g.check_signed(1, &MgmCommand::StopAll, &[0; 32], &[0; 32]).is_ok());
        let nonce = g.challenge(2).unwrap();
        let (cn, proof) = signed(&secret('z'), &nonce, 1, 2, MgmCommand::StopAll);
        assert!(g.check_signed(2, &MgmCommand::StopAll, &cn, &proof).is_ok());
    }
}
