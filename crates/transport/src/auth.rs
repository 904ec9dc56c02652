//! Cluster-secret authentication of native protocol connections.
//!
//! A data node that has a cluster secret answers a `Hello` with
//! `HelloReply::Challenge` (a fresh random nonce) instead of `Welcome`. The
//! connecting side answers with one [`AuthResponse`] frame: a nonce of its own
//! and an HMAC-SHA-256 keyed with the secret over both nonces and what the
//! connection is ([`proof`]). The node checks it (constant time) and only then
//! gives the connection an API node id (`Welcome`), or refuses and closes.
//! The secret itself never crosses the wire, and a proof is worth nothing on
//! another connection: every connection gets a new node nonce.
//!
//! ```text
//! AuthResponse (postcard)
//! magic          varint u32 ("NRAU")
//! client_nonce   32 bytes
//! proof          32 bytes   HMAC-SHA-256(secret, transcript)
//! transcript = "norr-api-auth-v1" 0x00 | node_nonce (32) | client_nonce (32) | context
//! context (API client)  = 'A' | data_node (u16 BE) | kind (u8) | requested_api_node (u16 BE, 0 = none)
//! context (data node)   = 'P' | from node (u16 BE) | to node (u16 BE) | incarnation (u64 BE)
//! context (mgmd command) = 'M' | mgmd node (u16 BE) | the signed command's bytes
//! context (mgmd session) = 'S' | mgmd node (u16 BE) | role (u8) | requested node id (u16 BE, 0 = none)
//! ```
//! mgmd asks the same proof of a state-changing management command (`norr
//! mgm stop`), over a nonce it hands out per command and the command itself
//! ([`mgm_command_context`]): the leading tag keeps a proof made for a
//! connection from passing for a command, and the other way round.
//! Data nodes of a cluster authenticate each other the same way on the same
//! port: the node dialled answers a `PeerHello` with `PeerReply::Challenge`.
//! The client nonce keeps a node (or someone posing as one) from choosing
//! every byte the client signs. The transcript binds the proof to the data
//! node and to what the Hello declared, so a proof cannot be moved to another
//! node or turned into a claim of another kind.

use crate::handshake::{ApiKind, Hello};
use hmac::{Hmac, Mac};
use norr_kernel::NodeId;
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// "NRAU" in ASCII: tells an auth response from anything else a client may send.
pub const AUTH_MAGIC: u32 = 0x4E52_4155;
/// Bytes of a nonce and of a proof.
pub const NONCE_BYTES: usize = 32;
pub const PROOF_BYTES: usize = 32;
/// Largest auth response frame a node reads (the real one is ~70 bytes): a
/// stranger cannot make the node decode more before it has proved anything.
pub const MAX_AUTH_FRAME_BYTES: usize = 256;
/// Shortest and longest secret, in characters.
pub const MIN_SECRET_CHARS: usize = 32;
pub const MAX_SECRET_CHARS: usize = 256;
/// The environment variable processes read the cluster secret from
/// (`norr up` sets it for the processes it starts).
pub const SECRET_ENV: &str = "NORR_CLUSTER_SECRET";

const DOMAIN: &[u8] = b"norr-api-auth-v1\0";

/// The cluster's shared secret. Its `Debug` does not show it, so it cannot
/// leak into logs or error messages.
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterSecret(String);

impl std::fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterSecret(..)")
    }
}

/// Characters a secret may contain besides ASCII letters and digits: those a
/// TOML string, a shell variable and a file hold without quoting trouble.
const SECRET_PUNCT: &str = "-_.+/=~";

impl ClusterSecret {
    /// A secret from its text, checked: `MIN_SECRET_CHARS..=MAX_SECRET_CHARS`
    /// characters, ASCII letters, digits and `-_.+/=~` only. The error names
    /// the rule broken (never the secret).
    pub fn new(text: &str) -> Result<ClusterSecret, String> {
        let n = text.chars().count();
        if n < MIN_SECRET_CHARS {
            return Err(format!(
                "the cluster secret has {n} characters: at least {MIN_SECRET_CHARS} are needed \
                 (`norr up` generates one; `openssl rand -hex 32` makes one too)"
            ));
        }
        if n > MAX_SECRET_CHARS {
            return Err(format!("the cluster secret has {n} characters: at most {MAX_SECRET_CHARS} are allowed"));
        }
        if let Some(pos) = text.chars().position(|c| !(c.is_ascii_alphanumeric() || SECRET_PUNCT.contains(c))) {
            return Err(format!(
                "the cluster secret has a character not allowed at position {} (allowed: ASCII letters, digits and {SECRET_PUNCT})",
                pos + 1
            ));
        }
        Ok(ClusterSecret(text.to_string()))
    }

    /// A new random secret: 64 hex digits (256 bits from the OS).
    pub fn generate() -> Result<ClusterSecret, String> {
        let mut raw = [0u8; 32];
        getrandom::fill(&mut raw).map_err(|e| format!("no randomness for a cluster secret: {e}"))?;
        let text: String = raw.iter().map(|b| format!("{b:02x}")).collect();
        Ok(ClusterSecret(text))
    }

    /// The secret from the environment (`SECRET_ENV`): None when unset or
    /// empty, an error when set to something that is not a valid secret.
    pub fn from_env() -> Result<Option<ClusterSecret>, String> {
        match std::env::var(SECRET_ENV) {
            Ok(s) if s.is_empty() => Ok(None),
            Ok(s) => ClusterSecret::new(&s).map(Some).map_err(|e| format!("{SECRET_ENV}: {e}")),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => Err(format!("{SECRET_ENV} is not valid UTF-8")),
        }
    }

    /// The secret from a file holding it (one line; surrounding whitespace
    /// is ignored). The error names the file.
    pub fn from_file(path: &std::path::Path) -> Result<ClusterSecret, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the cluster secret file {}: {e}", path.display()))?;
        ClusterSecret::new(text.trim()).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The secret's text, for writing it to a cluster file or handing it to
    /// a child process. Never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// The connecting side's answer to a challenge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthResponse {
    pub magic: u32,
    pub client_nonce: [u8; NONCE_BYTES],
    pub proof: [u8; PROOF_BYTES],
}

/// A fresh random nonce; an error if the OS has no randomness to give.
pub fn new_nonce() -> Result<[u8; NONCE_BYTES], String> {
    let mut n = [0u8; NONCE_BYTES];
    getrandom::fill(&mut n).map_err(|e| format!("no randomness for a nonce: {e}"))?;
    Ok(n)
}

/// What an API connection's proof binds: the data node it talks to and what
/// its Hello declared (kind, requested API node id).
pub fn api_context(data_node: NodeId, hello: &Hello) -> Vec<u8> {
    let kind: u8 = match hello.kind {
        ApiKind::NativeClient => 0,
        ApiKind::SqlNode => 1,
        ApiKind::Management => 2,
    };
    let mut c = vec![b'A'];
    c.extend_from_slice(&data_node.to_be_bytes());
    c.push(kind);
    c.extend_from_slice(&hello.requested_api_node.unwrap_or(0).to_be_bytes());
    c
}

/// What a data node's proof to another binds: who dials whom, and the
/// dialler's incarnation (`peer_handshake::PeerHello`).
pub fn peer_context(from: NodeId, to: NodeId, incarnation: u64) -> Vec<u8> {
    let mut c = vec![b'P'];
    c.extend_from_slice(&from.to_be_bytes());
    c.extend_from_slice(&to.to_be_bytes());
    c.extend_from_slice(&incarnation.to_be_bytes());
    c
}

/// What a management command's proof binds: the mgmd that asked for it and
/// the command's encoded bytes (request id and command, as the mgmd
/// protocol encodes them), so a proof for `stop 3` is not one for
/// `stop --all`.
pub fn mgm_command_context(mgmd: NodeId, command: &[u8]) -> Vec<u8> {
    let mut c = Vec::with_capacity(3 + command.len());
    c.push(b'M');
    c.extend_from_slice(&mgmd.to_be_bytes());
    c.extend_from_slice(command);
    c
}

/// What a node's proof to mgmd binds when it opens its session (a data
/// node, SQL node or API client fetching the configuration): the mgmd that
/// asked, the role the Hello declared (`role`: the mgmd protocol's own
/// number for it) and the node id it asked for. A proof for data node 3 is
/// not one for data node 4, nor for an API slot.
pub fn mgm_session_context(mgmd: NodeId, role: u8, requested: Option<NodeId>) -> Vec<u8> {
    let mut c = vec![b'S'];
    c.extend_from_slice(&mgmd.to_be_bytes());
    c.push(role);
    c.extend_from_slice(&requested.unwrap_or(0).to_be_bytes());
    c
}

/// The MAC over a handshake's transcript (see the module doc). `context`
/// starts with a tag ('A' API, 'P' peer, 'M' mgmd command, 'S' mgmd
/// session), so a proof of one purpose is never one of another.
fn mac_over(
    secret: &ClusterSecret,
    node_nonce: &[u8; NONCE_BYTES],
    client_nonce: &[u8; NONCE_BYTES],
    context: &[u8],
) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.0.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(DOMAIN);
    mac.update(node_nonce);
    mac.update(client_nonce);
    mac.update(context);
    mac
}

/// The proof of `secret` for a handshake: the node's challenge
/// `node_nonce`, the connecting side's `client_nonce` and the link's
/// `context` (`api_context`, `peer_context`).
pub fn proof(
    secret: &ClusterSecret,
    node_nonce: &[u8; NONCE_BYTES],
    client_nonce: &[u8; NONCE_BYTES],
    context: &[u8],
) -> [u8; PROOF_BYTES] {
    mac_over(secret, node_nonce, client_nonce, context).finalize().into_bytes().into()
}

/// The connecting side's whole answer to a challenge (a fresh client nonce).
pub fn respond(secret: &ClusterSecret, node_nonce: &[u8; NONCE_BYTES], context: &[u8]) -> Result<AuthResponse, String> {
    let client_nonce = new_nonce()?;
    let proof = proof(secret, node_nonce, &client_nonce, context);
    Ok(AuthResponse { magic: AUTH_MAGIC, client_nonce, proof })
}

/// True if `r` proves knowledge of `secret` for this handshake (compared in
/// constant time).
pub fn verify(secret: &ClusterSecret, node_nonce: &[u8; NONCE_BYTES], context: &[u8], r: &AuthResponse) -> bool {
    mac_over(secret, node_nonce, &r.client_nonce, context).verify_slice(&r.proof).is_ok()
}

pub fn encode_auth_response(r: &AuthResponse) -> Vec<u8> {
    postcard::to_stdvec(r).expect("postcard encode to Vec")
}

/// Decode an auth response: refuses a frame over `MAX_AUTH_FRAME_BYTES`, a
/// wrong magic (something else sent where the answer belongs), a short
/// frame and trailing bytes.
pub fn decode_auth_response(b: &[u8]) -> Result<AuthResponse, String> {
    if b.len() > MAX_AUTH_FRAME_BYTES {
        return Err(format!("authentication response of {} bytes (at most {MAX_AUTH_FRAME_BYTES})", b.len()));
    }
    let magic = match postcard::take_from_bytes::<u32>(b) {
        Ok((m, _)) => m,
        Err(e) => return Err(format!("malformed authentication response: {e}")),
    };
    if magic != AUTH_MAGIC {
        return Err("expected the authentication response to the challenge, got another message \
             (this data node requires the cluster secret before anything else)"
            .into());
    }
    let (r, rest): (AuthResponse, &[u8]) =
        postcard::take_from_bytes(b).map_err(|e| format!("malformed authentication response: {e}"))?;
    if !rest.is_empty() {
        return Err(format!("malformed authentication response: {} bytes after its end", rest.len()));
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(c: char) -> ClusterSecret {
        ClusterSecret::new(&c.to_string().repeat(40)).unwrap()
    }

    #[test]
    fn right_secret_verifies_wrong_one_or_other_handshake_does_not() {
        let s = secret('a');
        let hello = Hello::new("t", ApiKind::NativeClient);
        let ctx = api_context(2, &hello);
        let nonce = new_nonce().unwrap();
        let r = respond(&s, &nonce, &ctx).unwrap();
        assert!(verify(&s, &nonce, &ctx, &r));
        // Wrong secret.
        let bad = respond(&secret('b'), &nonce, &ctx).unwrap();
        assert!(!verify(&s, &nonce, &ctx, &bad));
        // Replayed on a new connection: another node nonce.
        let fresh = new_nonce().unwrap();
        assert_ne!(fresh, nonce);
        assert!(!verify(&s, &fresh, &ctx, &r));
        // Moved to another data node, or to another declared kind or id.
        assert!(!verify(&s, &nonce, &api_context(3, &hello), &r));
        assert!(!verify(&s, &nonce, &api_context(2, &Hello::new("t", ApiKind::SqlNode)), &r));
        assert!(!verify(&s, &nonce, &api_context(2, &hello.clone().requesting(Some(101))), &r));
        // A data node's proof is not an API client's, nor for another dial.
        let p = respond(&s, &nonce, &peer_context(3, 2, 9)).unwrap();
        assert!(verify(&s, &nonce, &peer_context(3, 2, 9), &p));
        assert!(!verify(&s, &nonce, &peer_context(3, 2, 10), &p));
        assert!(!verify(&s, &nonce, &peer_context(4, 2, 9), &p));
        assert!(!verify(&s, &nonce, &ctx, &p));
        // A management command's proof: for that command at that mgmd only,
        // and never an API or peer proof.
        let m = respond(&s, &nonce, &mgm_command_context(1, b"stop 3")).unwrap();
        assert!(verify(&s, &nonce, &mgm_command_context(1, b"stop 3"), &m));
        assert!(!verify(&s, &nonce, &mgm_command_context(1, b"stop --all"), &m));
        assert!(!verify(&s, &nonce, &mgm_command_context(50, b"stop 3"), &m));
        assert!(!verify(&s, &nonce, &ctx, &m));
        assert!(!verify(&s, &nonce, &mgm_command_context(1, b"stop 3"), &r));
        // Any flipped bit of the proof.
        let mut flipped = r.clone();
        flipped.proof[31] ^= 1;
        assert!(!verify(&s, &nonce, &ctx, &flipped));
    }

    #[test]
    fn auth_response_round_trips_and_bad_frames_are_errors() {
        let r = respond(&secret('a'), &[7; 32], &api_context(2, &Hello::new("t", ApiKind::SqlNode))).unwrap();
        let b = encode_auth_response(&r);
        assert!(b.len() < MAX_AUTH_FRAME_BYTES);
        assert_eq!(decode_auth_response(&b).unwrap(), r);
        for n in 0..b.len() {
            assert!(decode_auth_response(&b[..n]).is_err(), "prefix of {n} bytes");
        }
        let mut long = b.clone();
        long.push(0);
        assert!(decode_auth_response(&long).unwrap_err().contains("after its end"));
        assert!(decode_auth_response(&vec![0xFF; MAX_AUTH_FRAME_BYTES + 1]).unwrap_err().contains("at most"));
        // A wire message (or a second Hello) where the answer belongs.
        let hello = crate::handshake::encode_hello(&Hello::new("t", ApiKind::NativeClient));
        assert!(decode_auth_response(&hello).unwrap_err().contains("requires the cluster secret"));
    }

    #[test]
    fn secrets_are_validated_and_never_shown() {
        assert!(ClusterSecret::new("short").unwrap_err().contains("at least 32"));
        assert!(ClusterSecret::new(&"a".repeat(257)).unwrap_err().contains("at most 256"));
        let e = ClusterSecret::new(&format!("{}\"x", "a".repeat(40))).unwrap_err();
        assert!(e.contains("position 41"), "{e}");
        assert!(!e.contains("aaaa"), "the error does not show the secret: {e}");
        assert!(ClusterSecret::new(&format!("{}-_.+/=~", "Az09".repeat(8))).is_ok());
        let g = ClusterSecret::generate().unwrap();
        assert_eq!(g.expose().len(), 64);
        assert!(ClusterSecret::new(g.expose()).is_ok());
        assert_ne!(g, ClusterSecret::generate().unwrap());
        assert_eq!(format!("{g:?}"), "ClusterSecret(..)");
    }
}
