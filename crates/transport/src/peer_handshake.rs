//! The handshake between two data nodes: the first frame each way on a
//! node-to-node connection. The node with the higher id connects to the one
//! with the lower (one connection per pair) and sends `PeerHello`; the other
//! answers `PeerReply::Welcome`, or `Refused` with a reason, and closes.
//!
//! Its own magic tells a data node from an API client (`handshake::Hello`)
//! on the same port. With a cluster secret the node dialled answers
//! `Challenge` first and the dialler proves the secret (`crate::auth`), as
//! API clients do.
//!
//! ```text
//! PeerHello (postcard)
//! magic            varint u32 ("NRDN")
//! wire_version     varint u16   must equal the receiver's
//! node_id          varint u16   the connecting data node
//! to_node          varint u16   whom it thinks it connects to
//! config_digest    varint u64   digest of the cluster configuration it runs with
//! incarnation      varint u64   changes at every start of the node's blocks
//! ```

use norr_kernel::NodeId;
use serde::{Deserialize, Serialize};

/// "NRDN" in ASCII.
pub const PEER_MAGIC: u32 = 0x4E52_444E;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerHello {
    pub magic: u32,
    pub wire_version: u16,
    pub node_id: NodeId,
    pub to_node: NodeId,
    pub config_digest: u64,
    pub incarnation: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PeerReply {
    Welcome {
        node_id: NodeId,
        incarnation: u64,
    },
    Refused {
        reason: String,
    },
    /// The node dialled requires the cluster secret: the dialler answers
    /// with an `auth::AuthResponse` over `auth::peer_context(its id, this
    /// node, its incarnation)`, then gets `Welcome` or `Refused`.
    Challenge {
        nonce: [u8; crate::auth::NONCE_BYTES],
    },
}

/// True if `frame` starts with the data-node magic (a `PeerHello`).
pub fn is_peer_hello(frame: &[u8]) -> bool {
    matches!(postcard::take_from_bytes::<u32>(frame), Ok((PEER_MAGIC, _)))
}

pub fn encode_peer_hello(h: &PeerHello) -> Vec<u8> {
    postcard::to_stdvec(h).expect("postcard encode to Vec")
}

pub fn decode_peer_hello(b: &[u8]) -> Result<PeerHello, String> {
    let h: PeerHello = postcard::from_bytes(b).map_err(|e| format!("malformed data node hello: {e}"))?;
    if h.magic != PEER_MAGIC {
        return Err(format!("bad magic {:#x}: not a NorrDB data node", h.magic));
    }
    Ok(h)
}

pub fn encode_peer_reply(r: &PeerReply) -> Vec<u8> {
    postcard::to_stdvec(r).expect("postcard encode to Vec")
}

pub fn decode_peer_reply(b: &[u8]) -> Result<PeerReply, String> {
    postcard::from_bytes(b).map_err(|e| format!("malformed data node hello reply: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_tells_peers_from_clients() {
        let h =
            PeerHello { magic: PEER_MAGIC, wire_version: 7, node_id: 3, to_node: 1, config_digest: 42, incarnation: 9 };
        let b = encode_peer_hello(&h);
        assert!(is_peer_hello(&b));
        assert_eq!(decode_peer_hello(&b).unwrap(), h);
        let api =
            crate::handshake::encode_hello(&crate::handshake::Hello::new("x", crate::handshake::ApiKind::SqlNode));
        assert!(!is_peer_hello(&api));
        assert!(decode_peer_hello(&api).is_err());
        for n in 0..b.len() {
            assert!(decode_peer_hello(&b[..n]).is_err());
        }
        let r = PeerReply::Refused { reason: "no".into() };
        assert_eq!(decode_peer_reply(&encode_peer_reply(&r)).unwrap(), r);
    }
}
