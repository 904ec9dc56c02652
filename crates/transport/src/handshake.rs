//! Connect handshake: the first frame each way on a new connection.
//!
//! Client -> node: `Hello`; node -> client: `Welcome` (the client's API node id
//! and the node's id) or `Refused`. After that every frame carries one
//! `norr_signals::wire` message.
//!
//! A data node with a cluster secret (`crate::auth`) answers the Hello with
//! `Challenge` instead; the client then sends one `auth::AuthResponse` frame
//! and gets `Welcome` or `Refused`. Until then the connection has no API node
//! id and any other frame closes it.
//!
//! # `Hello` on the wire (postcard)
//!
//! ```text
//! field               encoding                          since
//! magic               varint u32 ("NORR")               first version
//! wire_version        varint u16                        first version
//! client_name         varint length + UTF-8 bytes       first version
//! kind                varint (ApiKind)                  optional: absent = NativeClient
//! requested_api_node  1 + varint u16                    optional: absent (or 0) = None
//! ```
//! Fields are only ever added at the end, and each added field is optional:
//! a node reads a Hello that stops before it as the field's default (older
//! clients), and ignores bytes after the fields it knows (newer clients; an
//! older node's postcard decoder does the same). So a new field needs no new
//! wire version. A new field goes after the last one in `Hello`, in
//! `encode_hello`'s output (postcard writes fields in declaration order) and in
//! `decode_hello`. `requested_api_node` is written only when set, so a Hello
//! without it has the same bytes as before the field existed.

use norr_kernel::NodeId;
use serde::{Deserialize, Serialize};

/// "NORR" in ASCII: guards against talking to something that is not NorrDB.
pub const MAGIC: u32 = 0x4E4F_5252;

/// What kind of API node connects. The data node keeps
/// `Knobs::reserved_api_connections` of its API slots for SQL nodes and
/// management servers, so native clients cannot take every slot. Declared by
/// the client; with a cluster secret only a client that proved knowledge of
/// it gets a connection at all (`crate::auth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum ApiKind {
    /// An application on the native API (`norr-client`). Wire value 0.
    #[default]
    NativeClient,
    /// A SQL node (`norr sqld`). Wire value 1.
    SqlNode,
    /// A management server or tool. Wire value 2.
    Management,
}

impl ApiKind {
    /// Whether this kind may take the slots reserved for the cluster's own
    /// processes.
    pub fn may_use_reserved_slots(self) -> bool {
        matches!(self, ApiKind::SqlNode | ApiKind::Management)
    }

    /// The kind of a wire value; None for a value this version does not know.
    pub fn from_wire(v: u32) -> Option<ApiKind> {
        match v {
            0 => Some(ApiKind::NativeClient),
            1 => Some(ApiKind::SqlNode),
            2 => Some(ApiKind::Management),
            _ => None,
        }
    }
}

impl std::fmt::Display for ApiKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ApiKind::NativeClient => "native client",
            ApiKind::SqlNode => "SQL node",
            ApiKind::Management => "management",
        })
    }
}

/// The client's first frame. Decode with [`decode_hello`] (it accepts the
/// shorter Hellos of older clients); fields are appended at the end only
/// (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hello {
    pub magic: u32,
    pub wire_version: u16,
    /// Free text for logs ("norr-client 0.1", "sqld").
    pub client_name: String,
    /// What connects (optional on the wire: absent = `NativeClient`).
    pub kind: ApiKind,
    /// The API node id the client asks for. In a cluster every data node
    /// must know an API node by the same id (a node that takes over a failed
    /// coordinator answers the client by it), so a client connected to
    /// several data nodes asks each for the id mgmd (or the first data node)
    /// gave it. The node accepts a free id and refuses a taken one with the
    /// reason; `None` lets the node choose, as a lone client does. Not
    /// written when `None` (see the module doc).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_api_node: Option<NodeId>,
}

impl Hello {
    /// A Hello of this version's wire protocol.
    pub fn new(client_name: impl Into<String>, kind: ApiKind) -> Hello {
        Hello {
            magic: MAGIC,
            wire_version: norr_signals::wire::WIRE_VERSION,
            client_name: client_name.into(),
            kind,
            requested_api_node: None,
        }
    }

    /// This Hello asking the node for API node id `id` (`None`: the node
    /// chooses).
    pub fn requesting(self, id: Option<NodeId>) -> Hello {
        Hello { requested_api_node: id, ..self }
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
    /// The node requires the cluster secret: answer with an
    /// `auth::AuthResponse` proving it for this `nonce` (fresh for every
    /// connection). Wire variant 2.
    Challenge {
        nonce: [u8; crate::auth::NONCE_BYTES],
        data_node: NodeId,
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
    // Optional fields, in order; each absent one takes its default.
    let (kind, rest) = match rest {
        [] => (ApiKind::NativeClient, rest),
        _ => {
            let (v, rest): (u32, &[u8]) =
                postcard::take_from_bytes(rest).map_err(|e| format!("malformed hello (kind): {e}"))?;
            let kind = ApiKind::from_wire(v).ok_or_else(|| format!("unknown API node kind {v} in hello"))?;
            (kind, rest)
        }
    };
    let (requested_api_node, _rest) = match rest {
        [] => (None, rest),
        _ => postcard::take_from_bytes::<Option<NodeId>>(rest)
            .map_err(|e| format!("malformed hello (requested API node id): {e}"))?,
    };
    // Bytes after the known fields come from a newer client: ignored.
    Ok(Hello {
        magic: head.magic,
        wire_version: head.wire_version,
        client_name: head.client_name,
        kind,
        requested_api_node,
    })
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
        for kind in [ApiKind::NativeClient, ApiKind::SqlNode, ApiKind::Management] {
            for id in [None, Some(100), Some(65535)] {
                let h = Hello::new("t", kind).requesting(id);
                assert_eq!(decode_hello(&encode_hello(&h)).unwrap(), h);
            }
        }
    }

    /// A Hello of a client from before `kind` (the bytes `norr-client` sent
    /// then) reads as a native client asking for no id; one from a newer
    /// client with fields we do not know still reads.
    #[test]
    fn older_and_newer_hellos_decode() {
        // magic 0x4E4F5252 as a varint, wire_version 1, client_name "t".
        let old = [0xD2, 0xA4, 0xBD, 0xF2, 0x04, 0x01, 0x01, b't'];
        let h = decode_hello(&old).unwrap();
        assert_eq!((h.magic, h.wire_version, h.client_name.as_str(), h.kind), (MAGIC, 1, "t", ApiKind::NativeClient));
        assert_eq!(h.requested_api_node, None);
        let cur = encode_hello(&Hello { wire_version: 1, ..Hello::new("t", ApiKind::NativeClient) });
        assert_eq!(&cur[..old.len()], &old[..], "the first fields' encoding is unchanged");
        assert_eq!(cur.len(), old.len() + 1, "no id asked for: nothing written after kind");
        let mut newer = encode_hello(&Hello::new("t", ApiKind::SqlNode).requesting(Some(300)));
        newer.extend_from_slice(&[0x05, 0x07]);
        let h = decode_hello(&newer).unwrap();
        assert_eq!((h.kind, h.requested_api_node), (ApiKind::SqlNode, Some(300)));
    }

    #[test]
    fn bad_hellos_are_errors_not_panics() {
        let mut unknown = encode_hello(&Hello::new("t", ApiKind::NativeClient));
        *unknown.last_mut().unwrap() = 9;
        assert!(decode_hello(&unknown).unwrap_err().contains("unknown API node kind 9"));
        let mut bad_tag = encode_hello(&Hello::new("t", ApiKind::NativeClient));
        bad_tag.push(9); // Option tag 9
        assert!(decode_hello(&bad_tag).unwrap_err().contains("requested API node id"));
        let h = encode_hello(&Hello { magic: 7, ..Hello::new("t", ApiKind::NativeClient) });
        assert!(decode_hello(&h).unwrap_err().contains("bad magic"));
        let good = encode_hello(&Hello::new("client", ApiKind::SqlNode).requesting(Some(1234)));
        for n in 0..good.len() {
            // Every prefix: an error or (once the name is complete) a Hello.
            let _ = decode_hello(&good[..n]);
        }
        assert!(decode_hello(&good[..3]).is_err());
        assert!(decode_hello(&[0xFF; 16]).is_err());
    }
}
