//! `norr mgm`: the management client (the counterpart of ndb_mgm).

use anyhow::bail;
use norr_mgmd::config::NodeKind;
#[cfg(test)]
use norr_mgmd::protocol::Refusal;
use norr_mgmd::protocol::{ClusterView, MgmCommand, MgmReply, NodeState, NodeView};
use norr_mgmd::session::run_command_with;
use std::time::{Duration, Instant};

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  norr mgm show                       # every node: state, node group, primaries, uptime, restart GCI
  norr mgm --mgm 10.0.0.1:1186 status
  norr mgm stop 3                     # node 3 leaves the cluster; its process waits
  norr mgm start 3                    # ... and joins again
  norr mgm restart 3 --wait 120       # restart node 3, wait until it is started again
  norr mgm stop --all                 # shut every data node down
  norr mgm --secret-file /path/cluster.secret stop 3
  norr mgm --data-dir norr-data stop --all   # the secret `norr up` keeps there

Authentication: when the cluster has a secret ([cluster] secret, api_auth =
\"secret\"; `norr up` always makes one), mgmd runs stop, start and restart only
for a client that proves it (a challenge and an HMAC-SHA-256 over it and the
command; the secret never crosses the wire). norr mgm reads it from
--secret-file, from DIR/cluster.secret with --data-dir DIR, or from
NORR_CLUSTER_SECRET. show and status are read-only and open to anyone who
reaches mgmd's port.

Exit status 0 on success, 1 with a one-line reason on stderr when mgmd cannot
be reached, the node is unknown or not connected, or the command is refused.")]
pub struct MgmArgs {
    /// The mgmd to ask, HOST:PORT (several comma separated: the first that answers).
    #[arg(long, default_value = "127.0.0.1:1186", value_name = "HOST:PORT")]
    pub mgm: String,
    /// Seconds to wait for mgmd's answer.
    #[arg(long, default_value_t = 10, value_name = "SECS")]
    pub timeout: u64,
    /// File holding the cluster secret, to prove for stop, start and
    /// restart (default: NORR_CLUSTER_SECRET).
    #[arg(long, value_name = "FILE", conflicts_with = "data_dir")]
    pub secret_file: Option<std::path::PathBuf>,
    /// Read the cluster secret from DIR/cluster.secret (the file `norr up`
    /// keeps in its data directory).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<std::path::PathBuf>,
    #[command(subcommand)]
    pub cmd: MgmCmd,
}

#[derive(Debug, clap::Subcommand)]
pub enum MgmCmd {
    /// Every node: id, kind, address, state, node group, primary
    /// partitions, version, uptime, restart GCI (the last complete GCI a
    /// data node's files hold: what a restart of it recovers to; "needs
    /// copy" when they are not a complete copy of its partitions, so it
    /// would copy from a live replica; "-" without a data directory); the
    /// president; the phases of starting nodes.
    Show,
    /// One line per data node: its state.
    Status,
    /// Stop data node N: it leaves the cluster, its process stays and waits
    /// for `start N`. With --all: every data node shuts down (processes exit).
    Stop {
        #[arg(value_name = "N", required_unless_present = "all", conflicts_with = "all")]
        node: Option<u16>,
        /// Every data node (their processes exit).
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        wait: Wait,
    },
    /// Start stopped data node N again (it rejoins the cluster).
    Start {
        #[arg(value_name = "N")]
        node: u16,
        #[command(flatten)]
        wait: Wait,
    },
    /// Restart data node N (it leaves, restarts and rejoins).
    Restart {
        #[arg(value_name = "N")]
        node: u16,
        #[command(flatten)]
        wait: Wait,
    },
}

#[derive(Debug, Clone, Copy, clap::Args)]
pub struct Wait {
    /// Wait up to SECS until the node(s) got there (stop: stopped, or gone
    /// with --all; start and restart: started). Exit status 1 if not.
    #[arg(long, value_name = "SECS")]
    pub wait: Option<u64>,
}

pub fn run(a: MgmArgs) -> anyhow::Result<()> {
    let timeout = Duration::from_secs(a.timeout.max(1));
    let secret_file = a.secret_file.clone().or_else(|| a.data_dir.as_ref().map(|d| d.join(crate::secret::SECRET_FILE)));
    let secret = crate::secret::from_flag_or_env(secret_file.as_deref())?;
    let ask =
        |cmd: MgmCommand| -> anyhow::Result<MgmReply> { Ok(run_command_with(&a.mgm, cmd, timeout, secret.as_ref())?) };
    let view = || -> anyhow::Result<ClusterView> {
        match ask(MgmCommand::Show)? {
            MgmReply::Show(v) => Ok(v),
            MgmReply::Error { message } => bail!("{message}"),
            other => bail!("mgmd answered show with {other:?}"),
        }
    };
    let (cmd, wait) = match a.cmd {
        MgmCmd::Show => {
            print!("{}", render_show(&view()?));
            return Ok(());
        }
        MgmCmd::Status => {
            print!("{}", render_status(&view()?));
            return Ok(());
        }
        MgmCmd::Stop { all: true, wait, .. } => (MgmCommand::StopAll, wait),
        MgmCmd::Stop { node: Some(node), wait, .. } => (MgmCommand::Stop { node }, wait),
        MgmCmd::Stop { node: None, .. } => bail!("stop: give a node id, or --all"),
        MgmCmd::Start { node, wait } => (MgmCommand::Start { node }, wait),
        MgmCmd::Restart { node, wait } => (MgmCommand::Restart { node }, wait),
    };
    // For stop and restart --wait: the node before (its uptime, to see it
    // come back; its refusals so far, to tell a refusal of this command).
    let before = match (&cmd, wait.wait) {
        (MgmCommand::Restart { node } | MgmCommand::Stop { node }, Some(_)) => {
            view()?.nodes.into_iter().find(|n| n.id == *node)
        }
        _ => None,
    };
    let sent = Instant::now();
    match ask(cmd.clone())? {
        MgmReply::Done { message } => println!("{message}"),
        MgmReply::Error { message } => bail!("{message}"),
        MgmReply::Show(_) => bail!("mgmd answered {cmd:?} with a cluster view"),
    }
    let Some(secs) = wait.wait else { return Ok(()) };
    let deadline = sent + Duration::from_secs(secs);
    loop {
        let v = view()?;
        if let Some(why) = refused(&cmd, &v, before.as_ref()) {
            bail!("{why}");
        }
        if let Some(done) = reached(&cmd, &v, before.as_ref(), sent.elapsed()) {
            println!("{done}");
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("{cmd:?} was sent, but the node(s) did not get there within {secs} s (see `norr mgm show`)");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Some(message) if the node of a stop or restart reports a refusal newer
/// than those it had reported when the command was sent (`before`).
fn refused(cmd: &MgmCommand, v: &ClusterView, before: Option<&NodeView>) -> Option<String> {
    let (MgmCommand::Stop { node: id } | MgmCommand::Restart { node: id }) = *cmd else { return None };
    let seen = before.and_then(|b| b.refusal.as_ref()).map_or(0, |r| r.count);
    let r = v.nodes.iter().find(|n| n.id == id)?.refusal.as_ref().filter(|r| r.count > seen)?;
    let what = if matches!(cmd, MgmCommand::Stop { .. }) { "stop" } else { "restart" };
    Some(format!("node {id}: the cluster refused to {what} it, and it runs on: {}", r.reason))
}

/// Some(message) once `cmd` has taken effect in `v`.
fn reached(cmd: &MgmCommand, v: &ClusterView, before: Option<&NodeView>, since_sent: Duration) -> Option<String> {
    let node = |id: u16| v.nodes.iter().find(|n| n.id == id);
    match *cmd {
        MgmCommand::StopAll => {
            let up: Vec<u16> =
                v.nodes.iter().filter(|n| n.kind == NodeKind::Data && n.connected).map(|n| n.id).collect();
            up.is_empty().then(|| "every data node is down".to_string())
        }
        MgmCommand::Stop { node: id } => {
            let n = node(id)?;
            (n.state == Some(NodeState::Stopped) || !n.connected).then(|| format!("node {id}: stopped"))
        }
        MgmCommand::Start { node: id } => {
            let n = node(id)?;
            (n.connected && n.state == Some(NodeState::Started)).then(|| format!("node {id}: started"))
        }
        MgmCommand::Restart { node: id } => {
            let n = node(id)?;
            // Back when started with an uptime shorter than the time since
            // the command (the node came back) ...
            let restarted = n.uptime_ms < since_sent.as_millis() as u64
                // ... or, for a restart inside the process, with phases
                // different from those before.
                || before.is_some_and(|b| b.phases != n.phases);
            (n.connected && n.state == Some(NodeState::Started) && restarted).then(|| format!("node {id}: restarted"))
        }
        MgmCommand::Show | MgmCommand::Status => Some(String::new()),
    }
}

fn dash_if_empty(s: String) -> String {
    if s.is_empty() {
        "-".into()
    } else {
        s
    }
}

/// "3d 4h", "1h 2m", "5m 3s", "12s".
pub fn format_uptime(ms: u64) -> String {
    let s = ms / 1000;
    let (d, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{sec}s"),
        (0, 0, _) => format!("{m}m {sec}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

fn format_ms(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

fn state_text(n: &NodeView) -> String {
    match (&n.state, n.connected) {
        (_, false) => "not connected".into(),
        (None, true) => "connected".into(),
        (Some(s), true) => s.to_string(),
    }
}

/// The `show` table.
pub fn render_show(v: &ClusterView) -> String {
    let header = ["id", "kind", "address", "state", "group", "primary", "version", "uptime", "restart gci"];
    let rows: Vec<[String; 9]> = v
        .nodes
        .iter()
        .map(|n| {
            let data = n.kind == NodeKind::Data;
            let reported = n.connected && n.state.is_some();
            [
                n.id.to_string(),
                n.kind.to_string(),
                dash_if_empty(n.address.clone()),
                state_text(n),
                n.node_group.filter(|_| data).map_or("-".into(), |g| g.to_string()),
                if data && reported { format!("{} of {}", n.primary_partitions, n.partitions) } else { "-".into() },
                if n.connected { dash_if_empty(n.version.clone()) } else { "-".into() },
                if n.connected && (reported || n.kind == NodeKind::Mgmd) {
                    format_uptime(n.uptime_ms)
                } else {
                    "-".into()
                },
                match n.last_durable_gci.filter(|_| reported) {
                    None => "-".into(),
                    Some(g) if n.files_complete => g.to_string(),
                    Some(g) => format!("{g} (needs copy)"),
                },
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(widths).enumerate() {
            if i == 0 {
                s.push_str(&format!("{c:>w$}"));
            } else {
                s.push_str(&format!("  {c:<w$}"));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = format!(
        "Cluster \"{}\" (configuration digest {:#018x}, from mgmd node {})\n",
        v.name, v.digest, v.mgmd_node_id
    );
    out.push_str(&match v.president {
        Some(p) => format!("President: node {p}\n"),
        None => "President: none (no data node reports itself president)\n".into(),
    });
    out.push('\n');
    out.push_str(&line(&header.map(String::from)));
    for (r, n) in rows.iter().zip(&v.nodes) {
        out.push_str(&line(r));
        if n.connected && matches!(n.state, Some(NodeState::Starting { .. })) && !n.phases.is_empty() {
            let phases: Vec<String> = n.phases.iter().map(|(p, ms)| format!("{p} {}", format_ms(*ms))).collect();
            out.push_str(&format!("{:>w$}  phases done: {}\n", "", phases.join(", "), w = widths[0]));
        }
    }
    out
}

/// The `status` lines: one per data node.
pub fn render_status(v: &ClusterView) -> String {
    let mut out = String::new();
    for n in v.nodes.iter().filter(|n| n.kind == NodeKind::Data) {
        let mut line = format!("Node {}: {}", n.id, state_text(n));
        if n.connected && n.state.is_some() {
            line.push_str(&format!(
                " (NorrDB {}, node group {}, primary for {} of {} partitions, up {})",
                n.version,
                n.node_group.map_or("-".into(), |g| g.to_string()),
                n.primary_partitions,
                n.partitions,
                format_uptime(n.uptime_ms)
            ));
            if v.president == Some(n.id) {
                line.push_str(", president");
            }
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: u16, kind: NodeKind, connected: bool, state: Option<NodeState>) -> NodeView {
        NodeView {
            id,
            kind,
            address: format!("127.0.0.1:{}", 2200 + id),
            connected,
            state,
            node_group: (kind == NodeKind::Data).then_some(0),
            primary_partitions: 2,
            partitions: 4,
            version: "0.1.0".into(),
            uptime_ms: 3_723_000,
            phases: vec![("restore".into(), 20), ("copy rows".into(), 1500)],
            president: id == 2,
            last_durable_gci: Some(42),
            files_complete: id != 3,
            peer: None,
            refusal: None,
        }
    }

    fn view() -> ClusterView {
        ClusterView {
            name: "demo".into(),
            president: Some(2),
            digest: 0xabc,
            mgmd_node_id: 1,
            nodes: vec![
                node(1, NodeKind::Mgmd, true, Some(NodeState::Started)),
                node(2, NodeKind::Data, true, Some(NodeState::Started)),
                node(3, NodeKind::Data, true, Some(NodeState::Starting { phase: "copy rows".into() })),
                node(4, NodeKind::Data, false, Some(NodeState::Started)),
                node(100, NodeKind::Sql, false, None),
            ],
        }
    }

    #[test]
    fn show_is_a_table_with_the_president_and_phases() {
        let s = render_show(&view());
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "Cluster \"demo\" (configuration digest 0x0000000000000abc, from mgmd node 1)");
        assert_eq!(lines[1], "President: node 2");
        assert!(lines[3].starts_with(" id  kind  address"), "{s}");
        let row = |id: &str| *lines.iter().find(|l| l.trim_start().starts_with(&format!("{id} "))).unwrap();
        let n2: Vec<&str> = row("2").split("  ").map(str::trim).filter(|c| !c.is_empty()).collect();
        assert_eq!(n2, ["2", "data", "127.0.0.1:2202", "started", "0", "2 of 4", "0.1.0", "1h 2m", "42"], "{s}");
        assert!(row("3").contains("starting (copy rows)"), "{s}");
        // Node 3's files are not a complete copy: a restart would copy.
        assert!(row("3").ends_with("42 (needs copy)"), "{s}");
        assert!(lines[3].ends_with("restart gci"), "{s}");
        assert!(s.contains("phases done: restore 20 ms, copy rows 1.5 s"), "{s}");
        let n4 = row("4");
        assert!(n4.contains("not connected") && !n4.contains("2 of 4") && !n4.contains("42"), "{s}");
        assert!(row("100").contains("sql") && row("100").contains("not connected"), "{s}");
        // Columns line up: every row's state column starts at the same place.
        let col = lines[3].find("state").unwrap();
        assert_eq!(&row("4")[col..col + 13], "not connected");
    }

    #[test]
    fn status_lists_data_nodes() {
        let s = render_status(&view());
        assert_eq!(s.lines().count(), 3);
        assert!(s.starts_with(
            "Node 2: started (NorrDB 0.1.0, node group 0, primary for 2 of 4 partitions, up 1h 2m), president\n"
        ));
        assert!(s.contains("Node 4: not connected\n"));
    }

    #[test]
    fn uptimes() {
        assert_eq!(format_uptime(0), "0s");
        assert_eq!(format_uptime(59_999), "59s");
        assert_eq!(format_uptime(61_000), "1m 1s");
        assert_eq!(format_uptime(3_723_000), "1h 2m");
        assert_eq!(format_uptime(90_000_000), "1d 1h");
    }

    #[test]
    fn a_refused_stop_or_restart_ends_the_wait_with_the_reason() {
        let mut v = view();
        assert_eq!(v.nodes[1].id, 2);
        let before = v.nodes[1].clone();
        assert!(refused(&MgmCommand::Stop { node: 2 }, &v, Some(&before)).is_none());
        v.nodes[1].refusal = Some(Refusal { count: 1, reason: "the last live node of node group 0".into() });
        let why = refused(&MgmCommand::Stop { node: 2 }, &v, Some(&before)).expect("refused");
        assert!(why.contains("refused to stop") && why.contains("node group 0"), "{why}");
        // A refusal reported before the command does not end its wait.
        let before = v.nodes[1].clone();
        assert!(refused(&MgmCommand::Restart { node: 2 }, &v, Some(&before)).is_none());
        v.nodes[1].refusal = Some(Refusal { count: 2, reason: "again".into() });
        let why = refused(&MgmCommand::Restart { node: 2 }, &v, Some(&before)).expect("refused");
        assert!(why.contains("refused to restart") && why.ends_with("again"), "{why}");
        assert!(refused(&MgmCommand::Start { node: 2 }, &v, Some(&before)).is_none());
        assert!(refused(&MgmCommand::Stop { node: 4 }, &v, None).is_none());
    }

    #[test]
    fn waits_end_when_the_node_got_there() {
        let mut v = view();
        let t = Duration::from_secs(5);
        assert!(reached(&MgmCommand::Stop { node: 2 }, &v, None, t).is_none());
        assert!(reached(&MgmCommand::Stop { node: 4 }, &v, None, t).is_some(), "gone counts as stopped");
        assert!(reached(&MgmCommand::Start { node: 3 }, &v, None, t).is_none());
        assert!(reached(&MgmCommand::Start { node: 2 }, &v, None, t).is_some());
        assert!(reached(&MgmCommand::StopAll, &v, None, t).is_none());
        // Restart: started again, and either young or with new phases.
        let before = v.nodes[1].clone();
        assert!(reached(&MgmCommand::Restart { node: 2 }, &v, Some(&before), t).is_none());
        v.nodes[1].uptime_ms = 1000;
        assert!(reached(&MgmCommand::Restart { node: 2 }, &v, Some(&before), t).is_some());
        for n in &mut v.nodes {
            n.connected = n.kind != NodeKind::Data;
        }
        assert!(reached(&MgmCommand::StopAll, &v, None, t).is_some());
    }
}
