//! The cluster configuration: one TOML file that configures every node.
//!
//! ```toml
//! [cluster]                  # name, replicas (1..=4), partitions_per_node,
//!                            # secret, api_auth ("off" | "secret" | "account")
//! [data]                     # the knobs of every data node (norr_knobs::Knobs)
//! [[node]]                   # one entry per node: id, kind, host, port, data_dir
//! ```
//! `norr mgmd --example-config` prints a commented example. `parse` refuses a
//! file that breaks any rule with every problem listed, each naming the key,
//! the value and what is allowed, so nothing starts on a bad configuration.
//!
//! `secret` is the cluster secret every connection to a data node's native
//! port must prove (`norr_transport::auth`); `api_auth` says whether data
//! nodes require it (default "secret" when the file has a secret). The
//! canonical text mgmd hands to nodes carries `api_auth` but never the
//! secret: mgmd's port answers anyone, so what it hands out is public. Each
//! process gets the secret itself (`NORR_CLUSTER_SECRET` or a secret file;
//! `norr up` passes it to the processes it starts).
//!
//! The parsed form is canonical: nodes sorted by id, every data node's
//! `data_dir` resolved to a path (absolute when the file was `load`ed), so the
//! text mgmd hands to nodes (`to_toml`) means the same on every node and its
//! `digest` identifies it.

mod canon;
mod parse;
#[cfg(test)]
mod tests;

pub use parse::knobs_from_table;

use norr_kernel::NodeId;
use norr_knobs::Knobs;
pub use norr_transport::auth::ClusterSecret;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Highest node id of a data node or mgmd; API and SQL nodes use
/// `FIRST_API_NODE_ID..=NodeId::MAX` (the runtime hands those out too).
pub const MAX_DATA_NODE_ID: NodeId = 99;
/// First node id of API and SQL nodes (the runtime's `FIRST_API_NODE_ID`).
pub const FIRST_API_NODE_ID: NodeId = 100;
/// Most copies of a partition.
pub const MAX_REPLICAS: u8 = 4;
/// Port of mgmd when its entry names none (ndb_mgmd's too).
pub const DEFAULT_MGMD_PORT: u16 = 1186;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum NodeKind {
    /// The management server (`norr mgmd`).
    Mgmd,
    /// A data node (`norr datad`).
    Data,
    /// A SQL node (`norr sqld`): an API node with a MySQL port.
    Sql,
    /// A native API client.
    Api,
}

impl NodeKind {
    /// The spelling in the configuration file.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeKind::Mgmd => "mgmd",
            NodeKind::Data => "data",
            NodeKind::Sql => "sql",
            NodeKind::Api => "api",
        }
    }

    pub fn from_str_opt(s: &str) -> Option<NodeKind> {
        Some(match s {
            "mgmd" => NodeKind::Mgmd,
            "data" => NodeKind::Data,
            "sql" => NodeKind::Sql,
            "api" => NodeKind::Api,
            _ => return None,
        })
    }

    /// "a data", "an api": for "... node" messages.
    pub fn with_article(self) -> &'static str {
        match self {
            NodeKind::Mgmd => "a mgmd",
            NodeKind::Data => "a data",
            NodeKind::Sql => "a sql",
            NodeKind::Api => "an api",
        }
    }

    /// Node ids this kind may use.
    pub fn id_range(self) -> std::ops::RangeInclusive<NodeId> {
        match self {
            NodeKind::Mgmd | NodeKind::Data => 1..=MAX_DATA_NODE_ID,
            NodeKind::Sql | NodeKind::Api => FIRST_API_NODE_ID..=NodeId::MAX,
        }
    }
}

impl std::fmt::Display for NodeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One `[[node]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeConfig {
    pub id: NodeId,
    pub kind: NodeKind,
    /// Host name or IP address. Data and mgmd nodes: where they listen
    /// (default "127.0.0.1"). SQL and API slots: only a peer from this host
    /// may take the slot; "" (the key left out) means any host.
    pub host: String,
    /// Data node: its native protocol port (API clients and other data nodes
    /// connect there). Mgmd: its port (default 1186). SQL node: its MySQL
    /// port, 0 when the entry names none. API slot: always 0.
    pub port: u16,
    /// Data nodes only (None for the others): where the node keeps its files,
    /// resolved against the configuration file's directory; the default is
    /// "norr-data/node-<id>" there.
    pub data_dir: Option<PathBuf>,
}

impl NodeConfig {
    /// "host:port", e.g. "127.0.0.1:2202" (what others connect to).
    pub fn address(&self) -> String {
        if self.host.contains(':') && !self.host.starts_with('[') {
            format!("[{}]:{}", self.host, self.port) // an IPv6 literal
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The host a SQL/API slot is restricted to, if any.
    pub fn host_restriction(&self) -> Option<&str> {
        (!self.host.is_empty()).then_some(self.host.as_str())
    }
}

/// `[cluster] api_auth`: what a data node asks of API connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiAuth {
    /// Anyone who reaches the native port is served (tests, a lone
    /// development node).
    Off,
    /// Every connection proves the cluster secret before it is served.
    Secret,
    /// As `Secret`, and a native client may instead log in with a SQL
    /// account (`mysql.user`, the accounts the SQL nodes keep): the password
    /// then protects data from native clients too. SQL nodes and management
    /// servers still prove the secret (they read and write the accounts).
    Account,
}

impl ApiAuth {
    pub fn as_str(self) -> &'static str {
        match self {
            ApiAuth::Off => "off",
            ApiAuth::Secret => "secret",
            ApiAuth::Account => "account",
        }
    }

    /// Whether the cluster's own processes must prove the cluster secret
    /// (every mode but `Off`).
    pub fn requires_secret(self) -> bool {
        self != ApiAuth::Off
    }
}

/// The whole cluster's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterConfig {
    /// Shown by `norr mgm show`; not empty.
    pub name: String,
    /// Copies of every partition, 1..=4; data nodes form node groups of this size.
    pub replicas: u8,
    /// A table's default partition count is this times the number of data nodes.
    pub partitions_per_node: u32,
    /// The knobs of every data node. `knobs.default_partitions` is derived:
    /// `partitions_per_node` x data nodes (the `[data]` section may not set it).
    pub knobs: Knobs,
    /// Every node, sorted by id.
    pub nodes: Vec<NodeConfig>,
    /// Whether data nodes require the cluster secret of API connections.
    pub api_auth: ApiAuth,
    /// The cluster secret, when the file has one. Not part of the canonical
    /// form (`to_toml`, `digest`, `diff`): it never leaves this process
    /// through mgmd.
    pub secret: Option<ClusterSecret>,
    /// The directory relative `data_dir`s were resolved against (the file's
    /// directory). Not part of the canonical form: `to_toml` writes resolved paths.
    pub base_dir: PathBuf,
}

/// A configuration that cannot be used, with every problem found.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the cluster configuration {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{origin} is not valid TOML: {message}")]
    Syntax { origin: String, message: String },
    #[error("{origin} is invalid: {}", list_problems(problems))]
    Invalid { origin: String, problems: Vec<String> },
}

fn list_problems(problems: &[String]) -> String {
    match problems {
        [one] => one.clone(),
        many => {
            let mut s = format!("{} problems:", many.len());
            for p in many {
                s.push_str("\n  - ");
                s.push_str(p);
            }
            s
        }
    }
}

impl ConfigError {
    /// Each problem on its own (one for a read or syntax error).
    pub fn problems(&self) -> Vec<String> {
        match self {
            ConfigError::Invalid { problems, .. } => problems.clone(),
            other => vec![other.to_string()],
        }
    }

    fn with_origin(self, new_origin: String) -> ConfigError {
        match self {
            ConfigError::Syntax { message, .. } => ConfigError::Syntax { origin: new_origin, message },
            ConfigError::Invalid { problems, .. } => ConfigError::Invalid { origin: new_origin, problems },
            read @ ConfigError::Read { .. } => read,
        }
    }
}

impl ClusterConfig {
    /// Parse and validate a cluster file's text. Relative `data_dir`s are
    /// resolved against `base_dir` (the file's directory).
    pub fn parse(text: &str, base_dir: &Path) -> Result<ClusterConfig, ConfigError> {
        parse::parse(text, base_dir)
    }

    /// Read, parse and validate a cluster file; relative `data_dir`s are
    /// resolved against its directory (made absolute).
    pub fn load(path: &Path) -> Result<ClusterConfig, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let base = if dir.is_absolute() {
            dir.to_path_buf()
        } else {
            std::env::current_dir().map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?.join(dir)
        };
        Self::parse(&text, &parse::normalize(&base))
            .map_err(|e| e.with_origin(format!("cluster configuration {}", path.display())))
    }

    /// The canonical TOML text: parses back (with any base directory) to an
    /// equal configuration, except that it leaves out the secret. This is
    /// what mgmd hands to nodes.
    pub fn to_toml(&self) -> String {
        canon::to_toml(self)
    }

    /// A stable 64-bit hash (FNV-1a) of the canonical text: equal on every
    /// node, process and build of the same version for the same configuration.
    pub fn digest(&self) -> u64 {
        canon::fnv1a64(self.to_toml().as_bytes())
    }

    /// What differs, one line per key, `self` called "here" and `other` "the
    /// cluster": "data.lock_wait_timeout_ms: 1200 here, 500 in the cluster",
    /// "node 3: port 2203 here, 2204 in the cluster". Empty when equal.
    pub fn diff(&self, other: &ClusterConfig) -> Vec<String> {
        canon::diff(self, other)
    }

    /// The data nodes, sorted by id.
    pub fn data_nodes(&self) -> impl Iterator<Item = &NodeConfig> {
        self.nodes.iter().filter(|n| n.kind == NodeKind::Data)
    }

    /// The mgmd nodes, sorted by id (the first is the arbitrator).
    pub fn mgmd_nodes(&self) -> impl Iterator<Item = &NodeConfig> {
        self.nodes.iter().filter(|n| n.kind == NodeKind::Mgmd)
    }

    /// The addresses of every mgmd, comma separated: a `--mgm` value.
    pub fn mgm_addresses(&self) -> String {
        self.mgmd_nodes().map(NodeConfig::address).collect::<Vec<_>>().join(",")
    }

    /// Node groups: data nodes sorted by id, in consecutive chunks of `replicas`.
    pub fn node_groups(&self) -> Vec<Vec<NodeId>> {
        let ids: Vec<NodeId> = self.data_nodes().map(|n| n.id).collect();
        assert!(ids.len().is_multiple_of(self.replicas as usize), "validated: data nodes are a multiple of replicas");
        ids.chunks(self.replicas as usize).map(<[NodeId]>::to_vec).collect()
    }

    /// The node group of data node `id`.
    pub fn node_group_of(&self, id: NodeId) -> Option<u32> {
        let pos = self.data_nodes().position(|n| n.id == id)?;
        Some((pos / self.replicas as usize) as u32)
    }

    pub fn node(&self, id: NodeId) -> Option<&NodeConfig> {
        self.nodes.binary_search_by_key(&id, |n| n.id).ok().map(|i| &self.nodes[i])
    }

    /// The SQL and API slots, sorted by id (empty: ids are handed out dynamically).
    pub fn api_slots(&self) -> impl Iterator<Item = &NodeConfig> {
        self.nodes.iter().filter(|n| matches!(n.kind, NodeKind::Sql | NodeKind::Api))
    }
}

/// `norr mgmd --example-config`: a commented cluster file that validates.
pub const EXAMPLE_CONFIG: &str = include_str!("example.toml");
