//! TOML text -> `ClusterConfig`, checking every rule. Problems are collected,
//! not returned at the first, so a user fixes a file in one round.

use super::{
    ApiAuth, ClusterConfig, ClusterSecret, ConfigError, NodeConfig, NodeKind, DEFAULT_MGMD_PORT, MAX_REPLICAS,
};
use norr_kernel::NodeId;
use norr_knobs::{parse_size, Knobs};
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use toml::{Table, Value};

const ORIGIN: &str = "cluster configuration";
const CLUSTER_KEYS: [&str; 5] = ["name", "replicas", "partitions_per_node", "secret", "api_auth"];
const NODE_KEYS: [&str; 5] = ["id", "kind", "host", "port", "data_dir"];
const DEFAULT_HOST: &str = "127.0.0.1";
const DEFAULT_REPLICAS: u8 = 2;
const MAX_PARTITIONS_PER_NODE: u32 = 128;
const MAX_NAME_CHARS: usize = 64;

pub(super) fn parse(text: &str, base_dir: &Path) -> Result<ClusterConfig, ConfigError> {
    let table: Table = toml::from_str(text)
        .map_err(|e| ConfigError::Syntax { origin: ORIGIN.into(), message: e.to_string().trim().to_string() })?;
    let mut p = Problems::default();
    let mut cluster = Table::new();
    let mut data = Table::new();
    let mut node_entries = Vec::new();
    for (key, value) in table {
        match (key.as_str(), value) {
            ("cluster", Value::Table(t)) => cluster = t,
            ("data", Value::Table(t)) => data = t,
            ("node", Value::Array(a)) => node_entries = a,
            ("cluster" | "data", v) => p.push(format!("`{key}` must be a section ([{key}]), not {}", show(&v))),
            ("node", v) => p.push(format!("`node` must be a list of [[node]] sections, not {}", show(&v))),
            (other, _) => p.push(format!(
                "unknown key `{other}` at the top level{} (allowed: [cluster], [data], [[node]])",
                suggest(other, &["cluster", "data", "node"])
            )),
        }
    }

    let name = match cluster.get("name") {
        None => "norr".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => {
            p.push(format!("cluster.name = {} must be a string", show(v)));
            String::new()
        }
    };
    if cluster.get("name").is_some_and(Value::is_str) {
        check_name(&name, &mut p);
    }
    let replicas = int_key(&cluster, "cluster.replicas", "replicas", 1, MAX_REPLICAS as i64, &mut p)
        .map_or(DEFAULT_REPLICAS, |v| v as u8);
    let partitions_per_node = int_key(
        &cluster,
        "cluster.partitions_per_node",
        "partitions_per_node",
        1,
        MAX_PARTITIONS_PER_NODE as i64,
        &mut p,
    )
    .map_or(Knobs::default().default_partitions, |v| v as u32);
    let secret = match cluster.get("secret") {
        None => None,
        // The message never shows the value: it may be a real secret.
        Some(Value::String(text)) => match ClusterSecret::new(text) {
            Ok(s) => Some(s),
            Err(e) => {
                p.push(format!("cluster.secret: {e}"));
                None
            }
        },
        Some(_) => {
            p.push("cluster.secret must be a string".into());
            None
        }
    };
    let api_auth = match cluster.get("api_auth") {
        None if secret.is_some() || cluster.contains_key("secret") => ApiAuth::Secret,
        None => ApiAuth::Off,
        Some(Value::String(s)) if s == "off" => ApiAuth::Off,
        Some(Value::String(s)) if s == "secret" => ApiAuth::Secret,
        Some(Value::String(s)) if s == "account" => ApiAuth::Account,
        Some(v) => {
            p.push(format!("cluster.api_auth = {} must be \"off\", \"secret\" or \"account\"", show(v)));
            ApiAuth::Off
        }
    };
    for key in cluster.keys().filter(|k| !CLUSTER_KEYS.contains(&k.as_str())) {
        p.push(format!(
            "unknown key `{key}` in [cluster]{} (allowed: {})",
            suggest(key, &CLUSTER_KEYS),
            CLUSTER_KEYS.join(", ")
        ));
    }

    if data.contains_key("default_partitions") {
        p.push(
            "[data] default_partitions cannot be set in a cluster file: use partitions_per_node in [cluster] \
             (a table's default partitions = partitions_per_node x data nodes)"
                .into(),
        );
        data.remove("default_partitions");
    }
    let mut knobs = match knobs_from_table(data) {
        Ok(k) => k,
        Err(problems) => {
            for e in problems {
                p.push(format!("[data] {e}"));
            }
            Knobs::default()
        }
    };

    let nodes = parse_nodes(node_entries, base_dir, &mut p);
    check_cluster_shape(&nodes, replicas, &mut p);
    let data_nodes = nodes.iter().filter(|n| n.kind == NodeKind::Data).count() as u32;
    knobs.default_partitions = partitions_per_node.saturating_mul(data_nodes.max(1));
    if let Err(e) = knobs.validate() {
        if e.starts_with("default_partitions") {
            p.push(format!(
                "cluster.partitions_per_node = {partitions_per_node} with {data_nodes} data nodes gives {} \
                 partitions per table: at most 1024",
                knobs.default_partitions
            ));
        } else {
            p.push(format!("[data] {e}"));
        }
    }
    p.finish()?;
    Ok(ClusterConfig {
        name,
        replicas,
        partitions_per_node,
        knobs,
        nodes,
        api_auth,
        secret,
        base_dir: base_dir.to_path_buf(),
    })
}

/// A table of knob values -> validated `Knobs`: missing knobs take their
/// defaults, `*_bytes` knobs accept sizes ("1G"). Errors name the knob, the
/// value and what is allowed (one per problem). Used for the `[data]` section
/// of a cluster file and for `norr datad --config`.
pub fn knobs_from_table(table: Table) -> Result<Knobs, Vec<String>> {
    let defaults = Table::try_from(Knobs::default()).expect("knobs serialize to a TOML table");
    let known: Vec<&str> = defaults.keys().map(String::as_str).collect();
    let mut problems = Vec::new();
    let mut clean = Table::new();
    for (key, value) in table {
        let Some(default) = defaults.get(&key) else {
            problems.push(format!(
                "unknown knob `{key}`{} (`norr datad --print-config` lists every knob)",
                suggest(&key, &known)
            ));
            continue;
        };
        let value = match (default, value) {
            (Value::Integer(_), Value::String(s)) if key.ends_with("_bytes") => match parse_size(&s) {
                Ok(n) => match i64::try_from(n) {
                    Ok(n) => Value::Integer(n),
                    Err(_) => {
                        problems.push(format!("{key} = \"{s}\" is too large"));
                        continue;
                    }
                },
                Err(e) => {
                    problems.push(format!("{key} = \"{s}\": {e}"));
                    continue;
                }
            },
            (Value::Integer(_), Value::Integer(n)) if n < 0 => {
                problems.push(format!("{key} = {n} must not be negative"));
                continue;
            }
            (Value::Integer(_), v @ Value::Integer(_)) | (Value::Boolean(_), v @ Value::Boolean(_)) => v,
            (Value::Integer(_), v) => {
                let sizes = if key.ends_with("_bytes") { " or a size such as \"512M\"" } else { "" };
                problems.push(format!("{key} = {} must be an integer{sizes}", show(&v)));
                continue;
            }
            (Value::Boolean(_), v) => {
                problems.push(format!("{key} = {} must be true or false", show(&v)));
                continue;
            }
            (_, v) => v,
        };
        clean.insert(key, value);
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let knobs: Knobs =
        Value::Table(clean).try_into().map_err(|e: toml::de::Error| vec![e.message().trim().to_string()])?;
    knobs.validate().map_err(|e| vec![e])?;
    Ok(knobs)
}

#[derive(Default)]
struct Problems(Vec<String>);

impl Problems {
    fn push(&mut self, s: String) {
        self.0.push(s);
    }
    fn finish(self) -> Result<(), ConfigError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid { origin: ORIGIN.into(), problems: self.0 })
        }
    }
}

/// A value as the user wrote it (strings quoted), shortened.
fn show(v: &Value) -> String {
    let s = match v {
        Value::Table(_) => "a section".to_string(),
        Value::Array(_) => "a list".to_string(),
        v => v.to_string(),
    };
    if s.chars().count() > 40 {
        format!("{}...", s.chars().take(40).collect::<String>())
    } else {
        s
    }
}

/// " (did you mean `x`?)" when a known name is close to the unknown one.
fn suggest(unknown: &str, known: &[&str]) -> String {
    let best = known.iter().map(|k| (edit_distance(unknown, k), *k)).min();
    match best {
        Some((d, k)) if d <= 2 || (d <= unknown.len() / 3) => format!(" (did you mean `{k}`?)"),
        _ => String::new(),
    }
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

fn check_name(name: &str, p: &mut Problems) {
    if name.trim().is_empty() {
        p.push("cluster.name is empty: give the cluster a name, e.g. name = \"demo\"".into());
    } else if name.chars().count() > MAX_NAME_CHARS {
        p.push(format!("cluster.name is {} characters long: at most {MAX_NAME_CHARS}", name.chars().count()));
    } else if name.chars().any(char::is_control) {
        p.push(format!("cluster.name = {name:?} contains a control character"));
    }
}

/// An integer key in lo..=hi; None (with a problem) when present but wrong,
/// None (no problem) when absent.
fn int_key(t: &Table, label: &str, key: &str, lo: i64, hi: i64, p: &mut Problems) -> Option<i64> {
    match t.get(key)? {
        Value::Integer(n) if (lo..=hi).contains(n) => Some(*n),
        Value::Integer(n) => {
            p.push(format!("{label} = {n} is out of range {lo}..={hi}"));
            None
        }
        v => {
            p.push(format!("{label} = {} must be an integer in {lo}..={hi}", show(v)));
            None
        }
    }
}

fn parse_nodes(entries: Vec<Value>, base_dir: &Path, p: &mut Problems) -> Vec<NodeConfig> {
    // id -> entry number of its first definition, to name both in the message.
    let mut seen: BTreeMap<NodeId, usize> = BTreeMap::new();
    let mut nodes = Vec::new();
    for (i, entry) in entries.into_iter().enumerate() {
        let n = i + 1;
        let Value::Table(t) = entry else {
            p.push(format!("[[node]] entry #{n} must be a section"));
            continue;
        };
        if let Some(node) = parse_node(&t, n, base_dir, p) {
            if let Some(first) = seen.insert(node.id, n) {
                p.push(format!(
                    "node {} is defined twice ([[node]] entries #{first} and #{n}): ids are unique",
                    node.id
                ));
                seen.insert(node.id, first);
                continue;
            }
            nodes.push(node);
        }
    }
    nodes.sort_by_key(|n| n.id);
    check_addresses(&nodes, p);
    check_data_dirs(&nodes, p);
    nodes
}

fn parse_node(t: &Table, n: usize, base_dir: &Path, p: &mut Problems) -> Option<NodeConfig> {
    let before = p.0.len();
    let kind = match t.get("kind") {
        None => {
            p.push(format!("[[node]] entry #{n}: kind is missing (one of \"mgmd\", \"data\", \"sql\", \"api\")"));
            None
        }
        Some(Value::String(s)) => {
            let k = NodeKind::from_str_opt(s);
            if k.is_none() {
                p.push(format!("[[node]] entry #{n}: kind = {s:?} is not a node kind (one of \"mgmd\", \"data\", \"sql\", \"api\")"));
            }
            k
        }
        Some(v) => {
            p.push(format!(
                "[[node]] entry #{n}: kind = {} must be a string (\"mgmd\", \"data\", \"sql\" or \"api\")",
                show(v)
            ));
            None
        }
    };
    let id = match t.get("id") {
        None => {
            p.push(format!("[[node]] entry #{n}: id is missing"));
            None
        }
        Some(Value::Integer(i)) => match (kind, NodeId::try_from(*i)) {
            (Some(k), Ok(id)) if k.id_range().contains(&id) => Some(id),
            (Some(k), _) => {
                let r = k.id_range();
                p.push(format!(
                    "[[node]] entry #{n}: id = {i} is out of range for {} node: {}..={}{}",
                    k.with_article(),
                    r.start(),
                    r.end(),
                    if k == NodeKind::Data || k == NodeKind::Mgmd {
                        " (100 and up are for SQL and API nodes)"
                    } else {
                        " (1..=99 are for data and mgmd nodes)"
                    }
                ));
                None
            }
            (None, Ok(id)) if id >= 1 => Some(id),
            (None, _) => {
                p.push(format!("[[node]] entry #{n}: id = {i} is out of range 1..=65535"));
                None
            }
        },
        Some(v) => {
            p.push(format!("[[node]] entry #{n}: id = {} must be an integer", show(v)));
            None
        }
    };
    let who = match (id, kind) {
        (Some(id), Some(k)) => format!("node {id} ({k})"),
        (Some(id), None) => format!("node {id}"),
        _ => format!("[[node]] entry #{n}"),
    };
    for key in t.keys().filter(|k| !NODE_KEYS.contains(&k.as_str())) {
        p.push(format!("{who}: unknown key `{key}`{} (allowed: {})", suggest(key, &NODE_KEYS), NODE_KEYS.join(", ")));
    }
    let kind = kind?;
    let host = match t.get("host") {
        None if matches!(kind, NodeKind::Sql | NodeKind::Api) => String::new(),
        None => DEFAULT_HOST.to_string(),
        Some(Value::String(s)) if s.trim().is_empty() => {
            p.push(format!(
                "{who}: host is empty (leave the key out{})",
                match kind {
                    NodeKind::Sql | NodeKind::Api => " to let any host take the slot",
                    _ => " for the default 127.0.0.1",
                }
            ));
            String::new()
        }
        Some(Value::String(s)) if s.chars().any(|c| c.is_whitespace() || c.is_control() || c == ',') => {
            p.push(format!("{who}: host = {s:?} is not a host name or address"));
            String::new()
        }
        Some(Value::String(s)) => s.trim_start_matches('[').trim_end_matches(']').to_string(),
        Some(v) => {
            p.push(format!("{who}: host = {} must be a string", show(v)));
            String::new()
        }
    };
    let port = match (kind, t.get("port")) {
        (NodeKind::Api, Some(_)) => {
            p.push(format!("{who}: port is only for mgmd, data and sql nodes (an API client listens on none)"));
            0
        }
        (NodeKind::Data, None) => {
            p.push(format!("{who}: port is missing (the native protocol port, e.g. port = 2202)"));
            0
        }
        (NodeKind::Mgmd, None) => DEFAULT_MGMD_PORT,
        (_, None) => 0,
        (_, Some(Value::Integer(v))) if (1..=65535).contains(v) => *v as u16,
        (_, Some(v)) => {
            p.push(format!("{who}: port = {} must be an integer in 1..=65535", show(v)));
            0
        }
    };
    let data_dir = match (kind, t.get("data_dir")) {
        (NodeKind::Data, None) => Some(normalize(&base_dir.join(format!("norr-data/node-{}", id.unwrap_or(0))))),
        (NodeKind::Data, Some(Value::String(s))) if s.trim().is_empty() => {
            p.push(format!("{who}: data_dir is empty (leave the key out for norr-data/node-<id>)"));
            None
        }
        (NodeKind::Data, Some(Value::String(s))) => Some(normalize(&base_dir.join(s))),
        (NodeKind::Data, Some(v)) => {
            p.push(format!("{who}: data_dir = {} must be a string (a path)", show(v)));
            None
        }
        (_, Some(_)) => {
            p.push(format!("{who}: data_dir is only for data nodes"));
            None
        }
        (_, None) => None,
    };
    if p.0.len() > before {
        return None;
    }
    Some(NodeConfig { id: id?, kind, host, port, data_dir })
}

/// Two nodes listening on one host:port would fail at start, late and
/// confusingly: refuse the file instead.
fn check_addresses(nodes: &[NodeConfig], p: &mut Problems) {
    let mut taken: BTreeMap<(String, u16), &NodeConfig> = BTreeMap::new();
    for n in nodes.iter().filter(|n| n.port != 0 && !n.host.is_empty()) {
        let key = (canonical_host(&n.host), n.port);
        match taken.get(&key) {
            Some(first) => p.push(format!(
                "node {}: port {} is already used by node {} ({})",
                n.id,
                n.port,
                first.id,
                first.address()
            )),
            None => {
                taken.insert(key, n);
            }
        }
    }
}

/// Spellings of one host that surely mean the same interface.
fn canonical_host(h: &str) -> String {
    match h.to_ascii_lowercase().as_str() {
        "localhost" | "127.0.0.1" => "127.0.0.1".into(),
        other => other.to_string(),
    }
}

fn check_data_dirs(nodes: &[NodeConfig], p: &mut Problems) {
    let mut taken: BTreeMap<(String, &Path), NodeId> = BTreeMap::new();
    for n in nodes {
        let Some(dir) = &n.data_dir else { continue };
        // Two hosts may use the same path; one host may not.
        match taken.get(&(canonical_host(&n.host), dir.as_path())) {
            Some(first) => p.push(format!(
                "node {}: data_dir {} is also the data_dir of node {first} on host {}: each data node needs its own",
                n.id,
                dir.display(),
                n.host
            )),
            None => {
                taken.insert((canonical_host(&n.host), dir.as_path()), n.id);
            }
        }
    }
}

fn check_cluster_shape(nodes: &[NodeConfig], replicas: u8, p: &mut Problems) {
    let data = nodes.iter().filter(|n| n.kind == NodeKind::Data).count();
    let mgmd = nodes.iter().filter(|n| n.kind == NodeKind::Mgmd).count();
    if data == 0 {
        p.push("no data node: add at least one [[node]] with kind = \"data\"".into());
    } else if !data.is_multiple_of(replicas as usize) {
        p.push(format!(
            "{data} data nodes cannot form node groups of {replicas}: use a multiple of {replicas} data nodes \
             (cluster.replicas = {replicas})"
        ));
    }
    if data > 1 && mgmd == 0 {
        p.push(format!(
            "{data} data nodes and no mgmd: a cluster of more than one data node needs a [[node]] with \
             kind = \"mgmd\" (it serves the configuration and arbitrates)"
        ));
    }
}

/// Lexical normalization ("a/./b/../c" -> "a/c"): two spellings of one
/// directory compare equal, without touching the file system (it may not
/// exist yet, or be on another host).
pub(super) fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if matches!(out.components().next_back(), Some(Component::Normal(_))) {
                    out.pop();
                } else if !out.has_root() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}
