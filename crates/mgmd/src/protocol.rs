//! The mgmd protocol: TCP, frames of `norr_transport::frame` (length +
//! CRC-32C), each carrying one postcard-encoded message.
//!
//! ```text
//! peer -> mgmd   Hello                      first frame, always
//! mgmd -> peer   Welcome | Refused          Refused closes the connection
//! then, any order:
//! peer -> mgmd   Report | Heartbeat | Arbitrate | Command
//!                | CommandChallengeReq | SignedCommand
//! mgmd -> peer   ArbitReply | CommandReply | NodeCommand | CommandChallenge
//! ```
//! A mgmd with the cluster secret serves a state-changing command (stop,
//! start, restart, stop --all) only as a `SignedCommand`: the client asks for
//! a nonce (`CommandChallengeReq`), mgmd answers `CommandChallenge`, and the
//! client sends the command with its proof of the secret over that nonce and
//! the command (`crate::command_auth`). `show` and `status` stay open.
//! Messages are only ever appended to (new enum variants at the end), and
//! `MGM_PROTOCOL_VERSION` grows when a shape changes; a Hello of another
//! version is refused with both versions named. A frame over
//! `MAX_MGM_FRAME_BYTES`, a bad checksum, a message that does not decode or
//! has trailing bytes closes the connection with a logged error.

use crate::config::{ConfigError, NodeKind};
use norr_kernel::NodeId;
use norr_transport::frame::{encode_frame, FrameDecoder};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// "NMGM": guards against talking to something that is not a NorrDB mgmd peer.
pub const MGM_MAGIC: u32 = 0x4E4D_474D;
pub const MGM_PROTOCOL_VERSION: u16 = 4;
/// Largest frame either side accepts: a configuration of hundreds of nodes
/// is tens of kilobytes.
pub const MAX_MGM_FRAME_BYTES: usize = 16 << 20;
/// Longest text field we send (names, reasons, phases): bounds what one
/// message can make the other side print.
pub const MAX_TEXT_CHARS: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PeerRole {
    DataNode,
    SqlNode,
    Api,
    /// The `norr mgm` management client.
    Mgm,
}

impl PeerRole {
    /// "a data node", "an API client": for messages.
    pub fn with_article(self) -> &'static str {
        match self {
            PeerRole::DataNode => "a data node",
            PeerRole::SqlNode => "a SQL node",
            PeerRole::Api => "an API client",
            PeerRole::Mgm => "a management client",
        }
    }
}

impl std::fmt::Display for PeerRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PeerRole::DataNode => "data node",
            PeerRole::SqlNode => "SQL node",
            PeerRole::Api => "API client",
            PeerRole::Mgm => "management client",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToMgmd {
    /// First message on a connection. `node_id`: a data node's configured id;
    /// for SQL/API nodes a wanted slot, or None for any; None for `Mgm`.
    /// `name`: free text for logs ("norr datad 0.1.0").
    Hello { magic: u32, version: u16, role: PeerRole, node_id: Option<NodeId>, name: String },
    /// From data (and SQL) nodes, about once a second.
    Report(NodeReport),
    /// From a data node whose membership lost nodes it cannot prove dead.
    Arbitrate(ArbitReq),
    /// From `norr mgm`; answered by a CommandReply with the same `req_id`.
    Command { req_id: u32, cmd: MgmCommand },
    /// "Still here" from a session that has no report to send (yet): keeps
    /// the session live so its node id stays reserved (see the server's
    /// `SESSION_STALE_AFTER`).
    Heartbeat,
    /// "Give me a nonce to sign command `req_id` with": answered by a
    /// `CommandChallenge`. A new request replaces an unused nonce.
    CommandChallengeReq { req_id: u32 },
    /// A command with the proof of the cluster secret
    /// (`command_auth::sign`) over the nonce of the last `CommandChallenge`
    /// on this connection; answered by a CommandReply with the same
    /// `req_id`. A nonce serves one command only.
    SignedCommand { req_id: u32, cmd: MgmCommand, client_nonce: [u8; 32], proof: [u8; 32] },
    /// Answer to a `SessionChallenge`: the proof of the cluster secret for
    /// the session the Hello asked for (`session_auth::prove`).
    SessionProof { client_nonce: [u8; 32], proof: [u8; 32] },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum FromMgmd {
    /// Answer to Hello: the node id (allocated for API/SQL nodes that gave
    /// none; 0 for `Mgm`), the whole cluster config as canonical TOML text,
    /// and its digest (`ClusterConfig::digest`).
    Welcome {
        node_id: NodeId,
        config_toml: String,
        digest: u64,
    },
    /// Answer to Hello; mgmd then closes the connection.
    Refused {
        reason: String,
    },
    ArbitReply(ArbitReply),
    CommandReply {
        req_id: u32,
        reply: MgmReply,
    },
    /// Pushed to a data node (`norr mgm stop/start/restart N`, `stop --all`).
    NodeCommand(NodeCommand),
    /// Answer to `CommandChallengeReq`: the nonce to sign the command with,
    /// and the node id of the mgmd that will check it (part of what is
    /// signed).
    CommandChallenge {
        req_id: u32,
        nonce: [u8; 32],
        mgmd_node: NodeId,
    },
    /// Answer to the Hello of a data node, SQL node or API client when the
    /// cluster has a secret: prove it (`ToMgmd::SessionProof`) over this
    /// nonce before mgmd reserves a node id or hands out the configuration.
    SessionChallenge {
        nonce: [u8; 32],
        mgmd_node: NodeId,
    },
}

/// What a node says about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeReport {
    pub node_id: NodeId,
    pub state: NodeState,
    pub node_group: Option<u32>,
    /// Partitions this node is primary for, of `partitions` it holds.
    pub primary_partitions: u32,
    pub partitions: u32,
    pub version: String,
    pub uptime_ms: u64,
    /// Start/restart phases done so far with their durations, e.g. ("copy rows", 1234).
    pub phases: Vec<(String, u64)>,
    /// This node is the president (the membership's master) now.
    pub president: bool,
    /// The GCI a restart of the node's files recovers to (its system
    /// file's last complete GCI). None: no data directory (or not known
    /// yet).
    pub last_durable_gci: Option<u64>,
    /// The files hold a complete copy of the node's partitions up to that
    /// GCI (false: in or after a node restart whose copied rows no local
    /// checkpoint covers yet; a restart would copy from a live replica).
    pub files_complete: bool,
    /// Where it serves ("127.0.0.1:2202").
    pub address: String,
    /// The last stop or restart the cluster refused this node (None: none
    /// since the process started).
    pub refusal: Option<Refusal>,
}

/// Why the cluster refused to let a node stop (it is the last live node of
/// its group, for example), numbered: a client waiting on its command tells
/// a new refusal from an earlier one by the count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// Refusals of this node process so far, this one included.
    pub count: u32,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeState {
    Starting {
        phase: String,
    },
    Started,
    Stopping,
    /// The process is alive, out of the cluster, waiting for `start`.
    Stopped,
}

impl std::fmt::Display for NodeState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NodeState::Starting { phase } if phase.is_empty() => f.write_str("starting"),
            NodeState::Starting { phase } => write!(f, "starting ({phase})"),
            NodeState::Started => f.write_str("started"),
            NodeState::Stopping => f.write_str("stopping"),
            NodeState::Stopped => f.write_str("stopped"),
        }
    }
}

/// "May the nodes in `survivors` go on without `failed`?"
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArbitReq {
    pub requester: NodeId,
    /// The membership generation before the failure: both halves of a split share it.
    pub generation: u64,
    pub survivors: Vec<NodeId>,
    pub failed: Vec<NodeId>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ArbitReply {
    Granted {
        generation: u64,
    },
    /// `generation` echoes the request's, so a late reply to an abandoned
    /// request is never taken for the answer to a newer one.
    Refused {
        generation: u64,
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MgmCommand {
    Show,
    Status,
    Stop { node: NodeId },
    Start { node: NodeId },
    Restart { node: NodeId },
    StopAll,
}

impl MgmCommand {
    /// Whether the command changes the cluster (and so, with a cluster
    /// secret, needs the proof of it); `show` and `status` only read.
    pub fn changes_state(&self) -> bool {
        !matches!(self, MgmCommand::Show | MgmCommand::Status)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MgmReply {
    Show(ClusterView),
    Done { message: String },
    Error { message: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeCommand {
    /// Leave the cluster, keep the process, wait for Start.
    Stop,
    Start,
    Restart,
    /// `stop --all`: the process exits.
    Shutdown,
}

/// mgmd's picture of the cluster, for `norr mgm show` / `status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterView {
    pub name: String,
    /// The data node reporting itself president, if a connected one does.
    pub president: Option<NodeId>,
    /// `ClusterConfig::digest` of the configuration mgmd serves.
    pub digest: u64,
    /// The mgmd answering.
    pub mgmd_node_id: NodeId,
    /// Every configured node, then API/SQL nodes with dynamic ids; by id.
    pub nodes: Vec<NodeView>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeView {
    pub id: NodeId,
    pub kind: NodeKind,
    /// Configured "host:port", or the reported address, or where the
    /// session comes from.
    pub address: String,
    /// A session is open and heard from within the last 3 s (for the mgmd
    /// answering: always).
    pub connected: bool,
    /// From the latest report (None: never reported).
    pub state: Option<NodeState>,
    pub node_group: Option<u32>,
    pub primary_partitions: u32,
    pub partitions: u32,
    pub version: String,
    /// As reported, plus the time since the report.
    pub uptime_ms: u64,
    pub phases: Vec<(String, u64)>,
    pub president: bool,
    /// As reported (see `NodeReport`).
    pub last_durable_gci: Option<u64>,
    pub files_complete: bool,
    /// The session's peer address ("127.0.0.1:50312"), when connected.
    pub peer: Option<String>,
    /// As reported (see `NodeReport`).
    pub refusal: Option<Refusal>,
}

#[derive(Debug, thiserror::Error)]
pub enum MgmError {
    #[error("cannot reach mgmd at {addrs}: {detail}")]
    Connect { addrs: String, detail: String },
    #[error("mgmd at {addr} refused this node: {reason}")]
    Refused { addr: String, reason: String },
    #[error("protocol error with {peer}: {detail}")]
    Protocol { peer: String, detail: String },
    #[error("connection to {peer} failed: {source}")]
    Io { peer: String, source: std::io::Error },
    #[error("no answer from mgmd within {} ms", .0.as_millis())]
    Timeout(Duration),
    #[error("not connected to mgmd (it is down or restarting)")]
    NotConnected,
    #[error("this node's configuration differs from the cluster's: {}", .0.join("; "))]
    ConfigDiffers(Vec<String>),
    #[error("mgmd at {addr} sent a configuration that does not parse: {source}")]
    BadConfig { addr: String, source: ConfigError },
}

/// Encode `msg` as one frame appended to `out`.
pub fn encode<T: Serialize>(msg: &T, out: &mut Vec<u8>) {
    let payload = postcard::to_stdvec(msg).expect("postcard encodes to a Vec");
    assert!(payload.len() <= MAX_MGM_FRAME_BYTES, "mgmd message of {} bytes", payload.len());
    encode_frame(&payload, out);
}

/// Decode one message from a frame's payload: the whole payload, nothing left over.
pub fn decode<T: DeserializeOwned>(payload: &[u8]) -> Result<T, String> {
    let (msg, rest) = postcard::take_from_bytes::<T>(payload).map_err(|e| format!("undecodable message: {e}"))?;
    if !rest.is_empty() {
        return Err(format!("{} trailing bytes after a message of {} bytes", rest.len(), payload.len() - rest.len()));
    }
    Ok(msg)
}

/// Cut `s` to at most `MAX_TEXT_CHARS` characters.
pub fn bounded_text(s: &str) -> String {
    if s.chars().count() <= MAX_TEXT_CHARS {
        s.to_string()
    } else {
        s.chars().take(MAX_TEXT_CHARS).collect()
    }
}

/// What `FramedConn::recv` got.
#[derive(Debug)]
pub enum Recv<T> {
    Msg(T),
    /// The read timeout passed with no whole frame.
    Idle,
    /// The peer closed the connection.
    Closed,
}

/// A blocking connection that sends and receives framed messages.
/// Receiving is resumable: a read timeout in the middle of a frame keeps the
/// bytes read so far.
pub struct FramedConn {
    stream: TcpStream,
    decoder: FrameDecoder,
    peer: String,
    buf: Vec<u8>,
}

impl FramedConn {
    pub fn new(stream: TcpStream) -> FramedConn {
        let peer = stream.peer_addr().map_or_else(|_| "?".to_string(), |a| a.to_string());
        let _ = stream.set_nodelay(true);
        FramedConn { stream, decoder: FrameDecoder::new(MAX_MGM_FRAME_BYTES), peer, buf: vec![0u8; 64 * 1024] }
    }

    pub fn peer(&self) -> &str {
        &self.peer
    }

    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    pub fn send<T: Serialize>(&mut self, msg: &T) -> Result<(), MgmError> {
        send_on(&self.stream, &self.peer, msg)
    }

    /// Wait up to the socket's read timeout for one message.
    pub fn recv<T: DeserializeOwned>(&mut self) -> Result<Recv<T>, MgmError> {
        loop {
            if let Some(msg) = self.next_buffered()? {
                return Ok(Recv::Msg(msg));
            }
            match self.stream.read(&mut self.buf) {
                Ok(0) => return Ok(Recv::Closed),
                Ok(n) => self.decoder.push(&self.buf[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return Ok(Recv::Idle),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if is_disconnect(&e) => return Ok(Recv::Closed),
                Err(source) => return Err(MgmError::Io { peer: self.peer.clone(), source }),
            }
        }
    }

    /// One message within `timeout`: Err on timeout, close, or a bad message.
    pub fn recv_within<T: DeserializeOwned>(&mut self, timeout: Duration) -> Result<T, MgmError> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(MgmError::Timeout(timeout));
            }
            let _ = self.stream.set_read_timeout(Some(left));
            match self.recv()? {
                Recv::Msg(m) => return Ok(m),
                Recv::Idle => {}
                Recv::Closed => {
                    return Err(MgmError::Protocol { peer: self.peer.clone(), detail: "connection closed".into() })
                }
            }
        }
    }

    fn next_buffered<T: DeserializeOwned>(&mut self) -> Result<Option<T>, MgmError> {
        let peer = &self.peer;
        let protocol_error = |detail: String| MgmError::Protocol { peer: peer.clone(), detail };
        match self.decoder.next_frame() {
            Err(e) => Err(protocol_error(e.to_string())),
            Ok(None) => Ok(None),
            Ok(Some(payload)) => decode(payload).map(Some).map_err(protocol_error),
        }
    }
}

/// Send one framed message on a (shared) stream.
pub fn send_on<T: Serialize>(mut stream: &TcpStream, peer: &str, msg: &T) -> Result<(), MgmError> {
    let mut out = Vec::new();
    encode(msg, &mut out);
    stream.write_all(&out).map_err(|source| MgmError::Io { peer: peer.to_string(), source })
}

fn is_disconnect(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe | ErrorKind::UnexpectedEof
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn report() -> NodeReport {
        NodeReport {
            node_id: 2,
            state: NodeState::Starting { phase: "copy rows".into() },
            node_group: Some(0),
            primary_partitions: 2,
            partitions: 4,
            version: "0.1.0".into(),
            uptime_ms: 12_345,
            phases: vec![("restore".into(), 10), ("copy rows".into(), 1234)],
            president: true,
            last_durable_gci: Some(77),
            files_complete: true,
            address: "127.0.0.1:2202".into(),
            refusal: Some(Refusal { count: 1, reason: "the last live node of node group 0".into() }),
        }
    }

    fn samples() -> (Vec<ToMgmd>, Vec<FromMgmd>) {
        let to = vec![
            ToMgmd::Hello {
                magic: MGM_MAGIC,
                version: MGM_PROTOCOL_VERSION,
                role: PeerRole::SqlNode,
                node_id: None,
                name: "sqld".into(),
            },
            ToMgmd::Report(report()),
            ToMgmd::Arbitrate(ArbitReq { requester: 2, generation: 9, survivors: vec![2, 4], failed: vec![3, 5] }),
            ToMgmd::Command { req_id: 7, cmd: MgmCommand::Restart { node: 3 } },
            ToMgmd::Command { req_id: 8, cmd: MgmCommand::StopAll },
            ToMgmd::Heartbeat,
            ToMgmd::CommandChallengeReq { req_id: 9 },
            ToMgmd::SignedCommand {
                req_id: 9,
                cmd: MgmCommand::Stop { node: 2 },
                client_nonce: [3; 32],
                proof: [4; 32],
            },
        ];
        let view = ClusterView {
            name: "demo".into(),
            president: Some(2),
            digest: 0xdead_beef_0123_4567,
            mgmd_node_id: 1,
            nodes: vec![NodeView {
                id: 2,
                kind: NodeKind::Data,
                address: "127.0.0.1:2202".into(),
                connected: true,
                state: Some(NodeState::Started),
                node_group: Some(0),
                primary_partitions: 2,
                partitions: 4,
                version: "0.1.0".into(),
                uptime_ms: 1,
                phases: vec![],
                president: true,
                last_durable_gci: None,
                files_complete: false,
                peer: Some("127.0.0.1:4000".into()),
                refusal: None,
            }],
        };
        let from = vec![
            FromMgmd::Welcome { node_id: 100, config_toml: "[cluster]\n".into(), digest: u64::MAX },
            FromMgmd::Refused { reason: "no".into() },
            FromMgmd::ArbitReply(ArbitReply::Granted { generation: 3 }),
            FromMgmd::ArbitReply(ArbitReply::Refused { generation: 3, reason: "other side".into() }),
            FromMgmd::CommandReply { req_id: 1, reply: MgmReply::Show(view) },
            FromMgmd::CommandReply { req_id: 2, reply: MgmReply::Done { message: "ok".into() } },
            FromMgmd::NodeCommand(NodeCommand::Shutdown),
            FromMgmd::CommandChallenge { req_id: 9, nonce: [5; 32], mgmd_node: 1 },
        ];
        (to, from)
    }

    #[test]
    fn messages_round_trip_through_frames() {
        let (to, from) = samples();
        let mut wire = Vec::new();
        for m in &to {
            encode(m, &mut wire);
        }
        let mut d = FrameDecoder::new(MAX_MGM_FRAME_BYTES);
        d.push(&wire);
        for m in &to {
            let got: ToMgmd = decode(d.next_frame().unwrap().unwrap()).unwrap();
            assert_eq!(&got, m);
        }
        assert!(d.next_frame().unwrap().is_none());
        for m in &from {
            let bytes = postcard::to_stdvec(m).unwrap();
            assert_eq!(&decode::<FromMgmd>(&bytes).unwrap(), m);
        }
    }

    #[test]
    fn truncated_and_padded_messages_are_errors() {
        let (to, _) = samples();
        for m in &to {
            let bytes = postcard::to_stdvec(m).unwrap();
            for cut in 0..bytes.len() {
                assert!(decode::<ToMgmd>(&bytes[..cut]).is_err(), "{m:?} cut at {cut}");
            }
            let mut padded = bytes.clone();
            padded.push(0);
            let e = decode::<ToMgmd>(&padded).unwrap_err();
            assert!(e.contains("1 trailing bytes"), "{e}");
        }
        assert!(decode::<ToMgmd>(&[200]).unwrap_err().contains("undecodable"));
    }

    /// The hello's leading bytes are fixed: a peer of another version can
    /// always read the magic and version and say why it is refused.
    #[test]
    fn hello_starts_with_variant_magic_and_version() {
        let h = ToMgmd::Hello { magic: MGM_MAGIC, version: 1, role: PeerRole::Mgm, node_id: None, name: String::new() };
        let b = postcard::to_stdvec(&h).unwrap();
        assert_eq!(b[0], 0, "Hello is variant 0");
        // MGM_MAGIC as a varint, then version 1.
        assert_eq!(&b[1..7], &[0xCD, 0x8E, 0xB5, 0xF2, 0x04, 0x01]);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]
        /// Arbitrary bytes never panic the decoders.
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode::<ToMgmd>(&bytes);
            let _ = decode::<FromMgmd>(&bytes);
        }

        /// Valid messages with bytes flipped, cut or inserted never panic.
        #[test]
        fn mutated_messages_never_panic(pick in 0usize..16, pos in any::<usize>(), byte in any::<u8>(), cut in any::<bool>()) {
            let (to, from) = samples();
            let mut bytes = if pick < to.len() {
                postcard::to_stdvec(&to[pick]).unwrap()
            } else {
                postcard::to_stdvec(&from[pick - to.len()]).unwrap()
            };
            let at = pos % bytes.len();
            if cut { bytes.truncate(at) } else { bytes[at] = byte }
            let _ = decode::<ToMgmd>(&bytes);
            let _ = decode::<FromMgmd>(&bytes);
        }

        /// A frame stream with random damage either decodes or errors.
        #[test]
        fn damaged_frames_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let mut d = FrameDecoder::new(MAX_MGM_FRAME_BYTES);
            d.push(&bytes);
            while let Ok(Some(f)) = d.next_frame() {
                let _ = decode::<ToMgmd>(f);
            }
        }
    }
}
