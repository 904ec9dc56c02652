//! The signal catalogue of NorrDB and the types every layer shares: values and
//! column types, schema objects, operations, error codes, the memcomparable key
//! encoding and the wire codec.

pub mod acl;
pub mod api;
pub mod ckpt;
pub mod cluster;
pub mod coerce;
pub mod dist;
pub mod error;
pub mod filter_eval;
pub mod fs;
pub mod internal;
pub mod keycode;
pub mod ops;
pub mod partition;
pub mod row_codec;
pub mod schema;
pub mod value;
pub mod wire;

pub use api::*;
pub use error::{ErrorClass, ErrorCode, NodeError};
pub use internal::InternalSignal;
pub use norr_kernel::{BlockRef, NodeId, Priority};
pub use ops::*;
pub use schema::*;
pub use value::*;

/// Block numbers.
pub mod block {
    /// Transaction coordinator.
    pub const TC: u16 = 1;
    /// Local query handler (owns the storage of its partitions).
    pub const LQH: u16 = 2;
    /// Dictionary.
    pub const DICT: u16 = 3;
    /// Membership: heartbeats, node failure protocol, arbitration requests.
    pub const QMGR: u16 = 4;
    /// Distribution: partition map, replica states, node restart.
    pub const DIH: u16 = 5;
    /// Global and local checkpoints.
    pub const CKPT: u16 = 6;
    /// File system (provided by the host: real files or a simulated disk).
    pub const FS: u16 = 7;
    /// The node's link to the management server (provided by the host):
    /// arbitration requests.
    pub const MGM: u16 = 8;
    /// The host itself (provided by the host): connection control, shutdown.
    pub const HOST: u16 = 9;
    /// An API client's receiving end (lives in the client, not the data node).
    pub const API: u16 = 10;
}

/// Every signal. Large payloads are boxed so the enum stays small in job buffers.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Signal {
    // --- API <-> TC ---
    TcKeyReq(Box<TcKeyReq>),
    TcKeyConf(Box<TcKeyConf>),
    TcKeyRef(Box<TcKeyRef>),
    ScanTabReq(Box<ScanTabReq>),
    ScanNextReq(ScanNextReq),
    ScanTabConf(Box<ScanTabConf>),
    ScanTabRef(Box<ScanTabRef>),
    // --- API <-> DICT ---
    DictReq(Box<DictReq>),
    DictConf(Box<DictConf>),
    DictRef(Box<DictRef>),
    /// Host -> TC and DICT (priority A): the API node lost its connection (or
    /// crashed). TC aborts its open transactions and closes its scans.
    ApiFailReq {
        api_node: NodeId,
    },
    /// Between blocks of the data node.
    Internal(Box<InternalSignal>),
    // --- API <-> TC, added after the others so earlier variants keep their
    // wire index (answered with TC_KEYCONF / TC_KEYREF) ---
    TcSavepointReq(Box<TcSavepointReq>),
    // --- between data nodes, and between a data node's blocks and its host ---
    Cluster(Box<cluster::ClusterSignal>),
    Fs(Box<fs::FsSignal>),
    Ckpt(Box<ckpt::CkptSignal>),
    /// Take-over TC -> API: the outcome of a transaction whose coordinator failed.
    TcKeyFailConf(Box<TcKeyFailConf>),
}

impl Signal {
    /// Signals an API node may send to a data node; the host drops anything else
    /// (and closes the connection) so a client cannot forge internal signals.
    pub fn allowed_from_api(&self) -> bool {
        matches!(
            self,
            Signal::TcKeyReq(_)
                | Signal::ScanTabReq(_)
                | Signal::ScanNextReq(_)
                | Signal::DictReq(_)
                | Signal::TcSavepointReq(_)
        )
    }

    /// Short name for logs and traces.
    pub fn name(&self) -> &'static str {
        match self {
            Signal::TcKeyReq(_) => "TC_KEYREQ",
            Signal::TcKeyConf(_) => "TC_KEYCONF",
            Signal::TcKeyRef(_) => "TC_KEYREF",
            Signal::ScanTabReq(_) => "SCAN_TABREQ",
            Signal::ScanNextReq(_) => "SCAN_NEXTREQ",
            Signal::ScanTabConf(_) => "SCAN_TABCONF",
            Signal::ScanTabRef(_) => "SCAN_TABREF",
            Signal::DictReq(_) => "DICT_REQ",
            Signal::DictConf(_) => "DICT_CONF",
            Signal::DictRef(_) => "DICT_REF",
            Signal::ApiFailReq { .. } => "API_FAILREQ",
            Signal::Internal(_) => "INTERNAL",
            Signal::TcSavepointReq(_) => "TC_SAVEPOINTREQ",
            Signal::Cluster(_) => "CLUSTER",
            Signal::Fs(_) => "FS",
            Signal::Ckpt(_) => "CKPT",
            Signal::TcKeyFailConf(_) => "TC_KEY_FAILCONF",
        }
    }
}

pub type Envelope = norr_kernel::Envelope<Signal>;
