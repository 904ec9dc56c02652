//! Connect handshake: the first frame each way on a new connection.
//!
//! Client -> node: `Hello`; node -> client: `Welcome` (the client's API node id
//! and the node's id) or `Refused`. After that every frame carries one
//! `norr_signals::wire` message.
//!
//! # `Hello` on the wire (postcard)
//!
//! ```text
//! field               encoding                          since
//! magic               varint u32 ("NORR")               first version
//! wire_version        varint u16                        first version
//! client_name         varint length + UTF-8 bytes       first version
//! requested_api_node  optional: absent = None;          cluster clients
//!                     else 0 (None) or 1 + varint u16
//! ```
//! Fields are only added at the end, and each added field is optional: a
//! node reads a Hello that stops before a field as that field's default (an
//! older client), and ignores bytes after the fields it knows (a newer
//! client). So an added field needs no new wire version.

use norr_kernel::NodeId;
use serde::{Deserialize, Serialize};

/// "NORR" in ASCII: guards against talking to something that is not NorrDB.
pub const MAGIC: u32 = 0x4E4F_5252;

/// The client's first frame. Decode with [`decode_hello`] (it accepts the
/// shorter Hellos of older clients); fields are appended at the end only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hello {
    pub magic: u32,
    pub wire_version: u16,
    /// Free text for logs ("norr-client 0.1", "sqld").
    pub client_name: String,
    /// The API node id the client asks for. In a cluster every data node
    /// must know an API node by the same id (a node that takes over a failed
    /// coordinator answers the client by it), so a client connected to
    /// several data nodes asks each for the id mgmd (or the first data node)
    /// gave it. The node accepts a free id and refuses a taken one with the
    /// reason; `None` lets the node choose, as a lone client does.
    pub requested_api_node: Option<NodeId>,
}

impl Hello {
    /// A Hello of this version's wire protocol.
    pub fn new(client_name: impl Into<String>, requested_api_node: Option<NodeId>) -> Hello {
        Hello {
            magic: MAGIC,
            wire_version: norr_signals::wire::WIRE_VERSION,
            client_name: client_name.into(),
            requested_api_node,
        }
    }
}

/// The fields every Hello has had since the first version.
#[derive(Deserialize)]
struct HelloHead {
    magic: u32,
    wire_version: u16,
    client_name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HelloReply {
    Welcome {
        api_node: NodeId,
        data_node: NodeId,
        wire_version: u16,
        /// TC instances on the data node (block TC, instances 0..n): the client
        /// starts each transaction on the one its first operation's partition
        /// maps to (`norr_signals::partition::coordinator_instance`).
        tc_instances: u16,
    },
    Refused {
        reason: String,
    },
}

pub fn encode_hello(h: &Hello) -> Vec<u8> {
    postcard::to_stdvec(h).expect("postcard encode to Vec")
}

pub fn decode_hello(b: &[u8]) -> Result<Hello, String> {
    let (head, rest): (HelloHead, &[u8]) = postcard::take_from_bytes(b).map_err(|e| format!("malformed hello: {e}"))?;
    if head.magic != MAGIC {
        return Err(format!("bad magic {:#x}: not a NorrDB client", head.magic));
    }
    // Optional fields, in order; an absent one takes its default.
    let (requested_api_node, _rest) = match rest {
        [] => (None, rest),
        _ => postcard::take_from_bytes::<Option<NodeId>>(rest)
            .map_err(|e| format!("malformed hello (requested API node id): {e}"))?,
    };
    // Bytes after the known fields come from a newer client: ignored.
    Ok(Hello { magic: head.magic, wire_version: head.wire_version, client_name: head.client_name, requested_api_node })
}

pub fn encode_reply(r: &HelloReply) -> Vec<u8> {
    postcard::to_stdvec(r).expect("postcard encode to Vec")
}

pub fn decode_reply(b: &[u8]) -> Result<HelloReply, String> {
    postcard::from_bytes(b).map_err(|e| format!("malformed hello reply: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_round_trips() {
        for id in [None, Some(100), Some(65535)] {
            let h = Hello::new("t", id);
            assert_eq!(decode_hello(&encode_hello(&h)).unwrap(), h);
        }
    }

    /// A Hello of a client from before `requested_api_node` reads as one that
    /// asks for no id; one with fields this version does not know still reads.
    #[test]
    fn older_and_newer_hellos_decode() {
        // magic 0x4E4F5252 as a varint, wire_version 1, client_name "t".
        let old = [0xD2, 0xA4, 0xBD, 0xF2, 0x04, 0x01, 0x01, b't'];
        let h = decode_hello(&old).unwrap();
        assert_eq!((h.magic, h.wire_version, h.client_name.as_str(), h.requested_api_node), (MAGIC, 1, "t", None));
        let cur = encode_hello(&Hello { wire_version: 1, ..Hello::new("t", Some(300)) });
        assert_eq!(&cur[..old.len()], &old[..], "the first fields' encoding is unchanged");
        let mut newer = cur.clone();
        newer.extend_from_slice(&[0x05, 0x07]);
        assert_eq!(decode_hello(&newer).unwrap().requested_api_node, Some(300));
    }

    #[test]
    fn bad_hellos_are_errors_not_panics() {
        let mut bad_tag = encode_hello(&Hello::new("t", None));
        *bad_tag.last_mut().unwrap() = 9; // Option tag 9
        assert!(decode_hello(&bad_tag).unwrap_err().contains("requested API node id"));
        let h = encode_hello(&Hello { magic: 7, ..Hello::new("t", None) });
        assert!(decode_hello(&h).unwrap_err().contains("bad magic"));
        let good = encode_hello(&Hello::new("client", Some(1234)));
        for n in 0..good.len() {
            let _ = decode_hello(&good[..n]);
        }
        assert!(decode_hello(&good[..3]).is_err());
        assert!(decode_hello(&[0xFF; 16]).is_err());
    }
}
