//! Connect handshake: the first frame each way on a new connection.
//!
//! Client -> node: `Hello`; node -> client: `Welcome` (the client's API node id
//! and the node's id) or `Refused`. After that every frame carries one
//! `norr_signals::wire` message.

use norr_kernel::NodeId;
use serde::{Deserialize, Serialize};

/// "NORR" in ASCII: guards against talking to something that is not NorrDB.
pub const MAGIC: u32 = 0x4E4F_5252;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub magic: u32,
    pub wire_version: u16,
    /// Free text for logs ("norr-client 0.1", "sqld").
    pub client_name: String,
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
    let h: Hello = postcard::from_bytes(b).map_err(|e| format!("malformed hello: {e}"))?;
    if h.magic != MAGIC {
        return Err(format!("bad magic {:#x}: not a NorrDB client", h.magic));
    }
    Ok(h)
}

pub fn encode_reply(r: &HelloReply) -> Vec<u8> {
    postcard::to_stdvec(r).expect("postcard encode to Vec")
}

pub fn decode_reply(b: &[u8]) -> Result<HelloReply, String> {
    postcard::from_bytes(b).map_err(|e| format!("malformed hello reply: {e}"))
}
