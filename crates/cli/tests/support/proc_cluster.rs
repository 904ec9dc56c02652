//! A cluster of real processes on loopback for tests and benchmarks:
//! `norr mgmd` and data nodes started with `norr datad --mgm`. Shared by
//! crates/cli/tests/cluster_process.rs and examples/failover_bench.rs
//! (included with `#[path]`), so it depends only on std and the mgmd crate.
#![allow(dead_code)] // each user needs a different part

use norr_mgmd::protocol::{ClusterView, MgmCommand, MgmReply, NodeState};
use norr_mgmd::session::run_command;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A data node's last restart line ("recovered to GCI g ..." or "no
/// complete global checkpoint on disk ...").
fn restart_line(log: &str) -> Option<&str> {
    log.lines().rev().find(|l| l.contains("no complete global checkpoint on disk") || l.contains("recovered to GCI "))
}

/// The GCI a data node's last start restored from its own files, from its
/// log ("recovered to GCI g"; 0 for "no complete global checkpoint on
/// disk").
pub fn recovered_in_log(log: &str) -> Option<u64> {
    let l = restart_line(log)?;
    let Some(rest) = l.split("recovered to GCI ").nth(1) else { return Some(0) };
    rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// Whether a data node's last start found its files a complete copy of its
/// partitions: false when its restart line says "an INCOMPLETE copy" (it
/// was copying from a replica at a node restart when it stopped; the GCI it
/// names is its system file's, and the cluster may restart below it).
/// None without a restart line.
pub fn complete_copy_in_log(log: &str) -> Option<bool> {
    restart_line(log).map(|l| !l.contains("an INCOMPLETE copy"))
}

/// The GCI a cluster's system restart went to, from each restarted data
/// node's log since its start: the GCI the nodes name (they must agree; it
/// may be above what any node's files restored, when a node rolled forward
/// through its REDO log), else the highest GCI their files restored. Never
/// below a GCI that a node whose files are a complete copy restored: that
/// GCI was complete for the whole cluster.
pub fn system_restart_gci(texts: &[&str]) -> Result<u64, String> {
    let told: Vec<u64> = texts.iter().filter_map(|t| restart_gci_in_log(t)).collect();
    if told.windows(2).any(|w| w[0] != w[1]) {
        return Err(format!("the data nodes name different restart GCIs: {told:?}"));
    }
    let gci = match told.first() {
        Some(g) => *g,
        None => texts.iter().filter_map(|t| recovered_in_log(t)).max().ok_or("no recovered GCI in the restart logs")?,
    };
    for (i, t) in texts.iter().enumerate() {
        if let (Some(r), Some(true)) = (recovered_in_log(t), complete_copy_in_log(t)) {
            if r > gci {
                return Err(format!(
                    "the cluster restarted to GCI {gci}, below the GCI {r} that data node #{i}'s complete files restored"
                ));
            }
        }
    }
    Ok(gci)
}

/// The GCI a cluster's system restart restarted to, from a data node's log
/// ("the cluster restarts to GCI g"): it may be above the GCI the node's own
/// files restored, when the node rolled forward through its REDO log.
pub fn restart_gci_in_log(log: &str) -> Option<u64> {
    log.lines().rev().find_map(|l| {
        let rest = l.split("the cluster restarts to GCI ").nth(1)?;
        rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
    })
}

/// xorshift64*: the random moments of the chaos and kill -9 harnesses
/// (they print their seed, so a run can be repeated).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Starting a cluster on a loaded 2-core machine: generous, but bounded.
pub const START: Duration = Duration::from_secs(90);

pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("norr-cluster-proc-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn free_port() -> u16 {
    free_ports(1)
}

/// The first of `n` consecutive loopback ports that are free now, taken
/// below the kernel's ephemeral range. Not `bind(0)`: that hands out ports
/// from the ephemeral range, where any process's outgoing connection may
/// take the port between this check and the child's bind (Linux gives
/// `connect` even ports and `bind(0)` odd ones, so the port after a
/// `bind(0)` port, which `--port-base` uses for the second data node, is
/// exactly what connections get). Distinct within a process.
pub fn free_ports(n: u16) -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    assert!((1..=16).contains(&n), "a run of 1 to 16 ports, not {n}");
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|w| w.parse::<u32>().ok()))
        .unwrap_or(32768);
    let low = 10_000u32;
    assert!(ephemeral_low > low + 1000, "ephemeral ports start at {ephemeral_low}; no room below them");
    let slots = (ephemeral_low - low) / 16;
    // Each process starts at its own slot, so test binaries and benchmarks
    // running at once rarely probe the same ports.
    let start = std::process::id().wrapping_mul(2_654_435_761) % slots;
    for _ in 0..slots {
        let slot = (start + NEXT.fetch_add(1, Ordering::Relaxed)) % slots;
        let base = (low + slot * 16) as u16;
        let free = (base..base + n).all(|p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok());
        if free {
            return base;
        }
    }
    panic!("no run of {n} free ports between {low} and {ephemeral_low}");
}

/// Children are killed when the test ends, whatever happens.
pub struct Proc {
    pub child: Child,
    pub log: PathBuf,
}

impl Proc {
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub struct Cluster {
    pub norr: PathBuf,
    pub dir: TempDir,
    pub mgm: String,
    /// Data node id -> native address.
    pub data: Vec<(u16, String)>,
    pub mgmd: Option<Proc>,
    pub nodes: Vec<Option<Proc>>,
}

impl Cluster {
    /// mgmd and `data_nodes` data nodes of the `norr` binary at `norr`;
    /// `data_knobs`: extra lines for the file's [data] section.
    pub fn start(norr: &Path, tag: &str, data_nodes: u16, replicas: u8, data_knobs: &str) -> Cluster {
        let dir = TempDir::new(tag);
        let mgm_port = free_port();
        let mut text = format!(
            "[cluster]\nname = \"{tag}\"\nreplicas = {replicas}\n[data]\n{data_knobs}\n[[node]]\nid = 1\nkind = \"mgmd\"\nhost = \"127.0.0.1\"\nport = {mgm_port}\n"
        );
        let mut data = Vec::new();
        for i in 0..data_nodes {
            let id = 2 + i;
            let port = free_port();
            text.push_str(&format!("[[node]]\nid = {id}\nkind = \"data\"\nhost = \"127.0.0.1\"\nport = {port}\n"));
            data.push((id, format!("127.0.0.1:{port}")));
        }
        let file = dir.0.join("cluster.toml");
        std::fs::write(&file, text).unwrap();
        let log = dir.0.join("mgmd.log");
        let child = Command::new(norr)
            .args(["mgmd", "--config"])
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mgm = format!("127.0.0.1:{mgm_port}");
        let mut c =
            Cluster { norr: norr.to_path_buf(), dir, mgm, data, mgmd: Some(Proc { child, log }), nodes: Vec::new() };
        // mgmd listens before the data nodes ask it.
        let deadline = Instant::now() + START;
        while c.view().is_none() {
            assert!(Instant::now() < deadline, "mgmd did not start: {}", c.mgmd.as_ref().unwrap().log_text());
            std::thread::sleep(Duration::from_millis(50));
        }
        for i in 0..c.data.len() {
            let p = c.spawn_node(i);
            c.nodes.push(Some(p));
        }
        c
    }

    pub fn spawn_node(&self, i: usize) -> Proc {
        let id = self.data[i].0;
        let log = self.dir.0.join(format!("node-{id}.log"));
        let out = std::fs::OpenOptions::new().create(true).append(true).open(&log).unwrap();
        let child = Command::new(&self.norr)
            .args(["datad", "--mgm", &self.mgm, "--node-id", &id.to_string()])
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(out)
            .spawn()
            .unwrap();
        Proc { child, log }
    }

    pub fn view(&self) -> Option<ClusterView> {
        match run_command(&self.mgm, MgmCommand::Show, Duration::from_secs(5)) {
            Ok(MgmReply::Show(v)) => Some(v),
            _ => None,
        }
    }

    pub fn logs(&self) -> String {
        let mut s = String::new();
        for p in self.nodes.iter().flatten() {
            s.push_str(&format!("--- {}\n{}\n", p.log.display(), p.log_text()));
        }
        s
    }

    /// Wait until exactly the data nodes `ids` report "started".
    pub fn wait_started(&self, ids: &[u16]) {
        let deadline = Instant::now() + START;
        loop {
            if let Some(v) = self.view() {
                let started: Vec<u16> = v
                    .nodes
                    .iter()
                    .filter(|n| n.connected && n.state == Some(NodeState::Started))
                    .map(|n| n.id)
                    .collect();
                if ids.iter().all(|i| started.contains(i)) {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "data nodes {ids:?} did not start; logs:\n{}", self.logs());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn kill(&mut self, i: usize) {
        let mut p = self.nodes[i].take().expect("running");
        p.child.kill().unwrap();
        p.child.wait().unwrap();
    }

    /// Stop (SIGSTOP) or continue (SIGCONT) data node `i`'s process.
    pub fn signal(&self, i: usize, sig: &str) {
        let pid = self.nodes[i].as_ref().expect("running").child.id();
        let ok = Command::new("kill").args([sig, &pid.to_string()]).status().unwrap().success();
        assert!(ok, "kill {sig} {pid}");
    }
}
