//! The canonical text of a configuration, its digest and the differences
//! between two configurations.
//!
//! Canonical: `[cluster]` with every key but the secret (`api_auth` only
//! when not "off"), `[data]` with every knob in the
//! order of `Knobs`' fields (sizes spelled "1G" where exact), then one
//! `[[node]]` per node sorted by id with its resolved `data_dir`. It does not
//! depend on how the source file was written, so equal configurations have
//! equal text and equal digests.

use super::{ApiAuth, ClusterConfig, NodeConfig, NodeKind};
use norr_knobs::{format_size, Knobs};
use std::collections::BTreeMap;
use std::fmt::Write;
use toml::Value;

pub(super) fn to_toml(c: &ClusterConfig) -> String {
    let mut s = String::new();
    s.push_str("[cluster]\n");
    let _ = writeln!(s, "name = {}", Value::String(c.name.clone()));
    let _ = writeln!(s, "replicas = {}", c.replicas);
    let _ = writeln!(s, "partitions_per_node = {}", c.partitions_per_node);
    // Written only when on, so a configuration without a secret keeps the
    // text (and digest) it had before the key existed. Never the secret.
    if c.api_auth != ApiAuth::Off {
        let _ = writeln!(s, "api_auth = \"{}\"", c.api_auth.as_str());
    }
    s.push_str("\n[data]\n");
    for (k, v) in knob_lines(&c.knobs) {
        let _ = writeln!(s, "{k} = {v}");
    }
    for n in &c.nodes {
        s.push_str("\n[[node]]\n");
        let _ = writeln!(s, "id = {}", n.id);
        let _ = writeln!(s, "kind = \"{}\"", n.kind);
        if !n.host.is_empty() {
            let _ = writeln!(s, "host = {}", Value::String(n.host.clone()));
        }
        if n.port != 0 {
            let _ = writeln!(s, "port = {}", n.port);
        }
        if let Some(d) = &n.data_dir {
            let _ = writeln!(s, "data_dir = {}", Value::String(d.to_string_lossy().into_owned()));
        }
    }
    s
}

/// `key = value` pairs of the knobs in field order, without the derived
/// `default_partitions`; sizes as "1G" strings where exact.
fn knob_lines(k: &Knobs) -> Vec<(String, String)> {
    // toml's serializer writes a struct's fields in declaration order, one
    // `key = value` line each (every knob is a scalar).
    let text = toml::to_string(k).expect("knobs serialize to TOML");
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(" = ") else { continue };
        if key == "default_partitions" {
            continue;
        }
        let value = match value.parse::<u64>() {
            Ok(n) if key.ends_with("_bytes") && format_size(n) != n.to_string() => format!("\"{}\"", format_size(n)),
            _ => value.to_string(),
        };
        out.push((key.to_string(), value));
    }
    debug_assert!(out.len() > 10, "every knob is listed");
    out
}

/// 64-bit FNV-1a: tiny, stable across processes and platforms (unlike std's
/// randomly keyed SipHash), and enough to tell configurations apart.
pub(super) fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

pub(super) fn diff(here: &ClusterConfig, cluster: &ClusterConfig) -> Vec<String> {
    let mut out = Vec::new();
    let mut cmp = |key: &str, a: String, b: String| {
        if a != b {
            out.push(format!("{key}: {a} here, {b} in the cluster"));
        }
    };
    cmp("cluster.name", format!("{:?}", here.name), format!("{:?}", cluster.name));
    cmp("cluster.replicas", here.replicas.to_string(), cluster.replicas.to_string());
    cmp("cluster.partitions_per_node", here.partitions_per_node.to_string(), cluster.partitions_per_node.to_string());
    cmp("cluster.api_auth", here.api_auth.as_str().into(), cluster.api_auth.as_str().into());
    let theirs: BTreeMap<String, String> = knob_lines(&cluster.knobs).into_iter().collect();
    for (k, a) in knob_lines(&here.knobs) {
        let b = theirs.get(&k).cloned().unwrap_or_else(|| "absent".into());
        cmp(&format!("data.{k}"), a.trim_matches('"').to_string(), b.trim_matches('"').to_string());
    }
    let ids: std::collections::BTreeSet<_> = here.nodes.iter().chain(&cluster.nodes).map(|n| n.id).collect();
    for id in ids {
        match (here.node(id), cluster.node(id)) {
            (Some(a), None) => out.push(format!("node {id}: {} here, not in the cluster", describe(a))),
            (None, Some(b)) => out.push(format!("node {id}: not here, {} in the cluster", describe(b))),
            (Some(a), Some(b)) => {
                let mut field = |name: &str, x: String, y: String| {
                    if x != y {
                        out.push(format!("node {id}: {name} {x} here, {y} in the cluster"));
                    }
                };
                field("kind", a.kind.to_string(), b.kind.to_string());
                field("host", shown_host(a), shown_host(b));
                field("port", a.port.to_string(), b.port.to_string());
                let dir = |n: &NodeConfig| n.data_dir.as_ref().map_or("none".into(), |d| d.display().to_string());
                field("data_dir", dir(a), dir(b));
            }
            (None, None) => unreachable!("id taken from one of the two"),
        }
    }
    out
}

fn shown_host(n: &NodeConfig) -> String {
    if n.host.is_empty() {
        "(any)".into()
    } else {
        n.host.clone()
    }
}

fn describe(n: &NodeConfig) -> String {
    match n.kind {
        NodeKind::Api => "an api slot".into(),
        k => format!("a {k} node at {}", n.address()),
    }
}
