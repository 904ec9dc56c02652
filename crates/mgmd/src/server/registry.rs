//! What mgmd knows: who is connected under which node id, every node's
//! latest report, and the arbitrator. Deterministic (time is passed in, no
//! IO), so every rule is unit-tested without sockets; the TCP server in
//! `mod.rs` is a thin shell around it.

use super::arbitrator::Arbitrator;
use crate::config::{ClusterConfig, NodeKind, FIRST_API_NODE_ID};
use crate::protocol::{
    ArbitReply, ArbitReq, ClusterView, MgmCommand, MgmReply, NodeCommand, NodeReport, NodeState, NodeView, PeerRole,
    MGM_MAGIC, MGM_PROTOCOL_VERSION,
};
use norr_kernel::NodeId;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// A session heard from (report, heartbeat or any message) less recently
/// than this is shown as not connected, and its node id may be taken over by
/// a new process (the old one is presumed dead: a crashed host sends no FIN).
pub const SESSION_STALE_AFTER: Duration = Duration::from_secs(3);

/// Identifies one accepted connection (node ids are reused, sessions not).
pub type SessionId = u64;

#[derive(Debug, Clone)]
struct Session {
    sid: SessionId,
    role: PeerRole,
    peer: SocketAddr,
    last_heard: Instant,
    /// An API/SQL id handed out outside the configured slots.
    dynamic: bool,
}

/// A node's latest report and when it arrived.
#[derive(Debug, Clone)]
struct Reported {
    report: NodeReport,
    at: Instant,
}

/// A Hello that was accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    pub node_id: NodeId,
    pub sid: SessionId,
    /// A stale session this one replaced: the server closes its socket.
    pub evicted: Option<SessionId>,
}

/// What a command from `norr mgm` leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Routed {
    Reply(MgmReply),
    /// Send each command to its session, then reply `Done { message }`.
    Push {
        targets: Vec<(NodeId, SessionId, NodeCommand)>,
        message: String,
    },
}

pub struct Registry {
    config: ClusterConfig,
    digest: u64,
    mgmd_id: NodeId,
    started: Instant,
    version: String,
    sessions: BTreeMap<NodeId, Session>,
    reports: BTreeMap<NodeId, Reported>,
    /// SQL/API slots restricted to a host: the addresses that host resolved to.
    slot_ips: BTreeMap<NodeId, Vec<IpAddr>>,
    arbitrator: Arbitrator,
    next_sid: SessionId,
}

/// Refuse a Hello of a foreign magic or another protocol version.
pub fn check_version(magic: u32, version: u16) -> Result<(), String> {
    if magic != MGM_MAGIC {
        return Err(format!("bad magic {magic:#x}: not a NorrDB management protocol peer"));
    }
    if version != MGM_PROTOCOL_VERSION {
        return Err(format!(
            "management protocol version {version} is not supported: this mgmd speaks version {MGM_PROTOCOL_VERSION} \
             (run the same NorrDB version on every node)"
        ));
    }
    Ok(())
}

impl Registry {
    /// `slot_ips`: for each SQL/API slot with a host, the addresses it resolved to.
    pub fn new(
        config: ClusterConfig,
        mgmd_id: NodeId,
        slot_ips: BTreeMap<NodeId, Vec<IpAddr>>,
        now: Instant,
    ) -> Registry {
        assert_eq!(config.node(mgmd_id).map(|n| n.kind), Some(NodeKind::Mgmd), "mgmd {mgmd_id} is a configured mgmd");
        let digest = config.digest();
        Registry {
            config,
            digest,
            mgmd_id,
            started: now,
            version: env!("CARGO_PKG_VERSION").to_string(),
            sessions: BTreeMap::new(),
            reports: BTreeMap::new(),
            slot_ips,
            arbitrator: Arbitrator::new(),
            next_sid: 1,
        }
    }

    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    pub fn digest(&self) -> u64 {
        self.digest
    }

    fn live(&self, s: &Session, now: Instant) -> bool {
        now.saturating_duration_since(s.last_heard) <= SESSION_STALE_AFTER
    }

    /// A node id for a Hello, or the reason it is refused. `Mgm` peers get
    /// node id 0 and no registered session (they hold no id).
    pub fn admit(
        &mut self,
        role: PeerRole,
        node_id: Option<NodeId>,
        peer: SocketAddr,
        now: Instant,
    ) -> Result<Admitted, String> {
        let (id, dynamic) = match role {
            PeerRole::Mgm => {
                let sid = self.new_sid();
                return Ok(Admitted { node_id: 0, sid, evicted: None });
            }
            PeerRole::DataNode => (self.data_node_id(node_id, now)?, false),
            PeerRole::SqlNode | PeerRole::Api => self.api_node_id(role, node_id, peer.ip(), now)?,
        };
        let evicted = self.sessions.get(&id).map(|old| {
            debug_assert!(!self.live(old, now), "only a stale session is replaced");
            old.sid
        });
        let sid = self.new_sid();
        self.sessions.insert(id, Session { sid, role, peer, last_heard: now, dynamic });
        if role == PeerRole::DataNode {
            // A new life of the node: what its previous one reported (say
            // "started") is not true of it now; its own report comes soon.
            // `norr mgm show` and scripts waiting for "started" saw a node
            // that was still reading its files as started.
            self.reports.remove(&id);
        }
        Ok(Admitted { node_id: id, sid, evicted })
    }

    fn new_sid(&mut self) -> SessionId {
        let sid = self.next_sid;
        self.next_sid += 1;
        sid
    }

    /// Refused when another live session holds `id`.
    fn check_free(&self, id: NodeId, now: Instant) -> Result<(), String> {
        match self.sessions.get(&id) {
            Some(s) if self.live(s, now) => Err(format!(
                "node {id} is already connected from {} ({}): is another process running with node id {id}?",
                s.peer,
                s.role.with_article()
            )),
            _ => Ok(()),
        }
    }

    fn data_node_id(&self, node_id: Option<NodeId>, now: Instant) -> Result<NodeId, String> {
        let ids = || ids_of(self.config.data_nodes().map(|n| n.id));
        let Some(id) = node_id else {
            return Err(format!("a data node must say which node it is (--node-id N; data nodes: {})", ids()));
        };
        match self.config.node(id) {
            None => return Err(format!("node {id} is not in the cluster configuration (data nodes: {})", ids())),
            Some(n) if n.kind != NodeKind::Data => {
                return Err(format!(
                    "node {id} is configured as {} node, not a data node (data nodes: {})",
                    n.kind.with_article(),
                    ids()
                ))
            }
            Some(_) => {}
        }
        self.check_free(id, now)?;
        Ok(id)
    }

    /// Slot kinds a role may take, in order of preference.
    fn slot_kinds(role: PeerRole) -> &'static [NodeKind] {
        match role {
            PeerRole::SqlNode => &[NodeKind::Sql, NodeKind::Api],
            _ => &[NodeKind::Api],
        }
    }

    fn host_allows(&self, slot: NodeId, ip: IpAddr) -> bool {
        match self.config.node(slot).and_then(|n| n.host_restriction()) {
            None => true,
            Some(host) => {
                self.slot_ips.get(&slot).is_some_and(|ips| ips.contains(&ip)) || host.parse::<IpAddr>() == Ok(ip)
            }
        }
    }

    /// (id, dynamic) for a SQL node or API client.
    fn api_node_id(
        &self,
        role: PeerRole,
        wanted: Option<NodeId>,
        ip: IpAddr,
        now: Instant,
    ) -> Result<(NodeId, bool), String> {
        let kinds = Self::slot_kinds(role);
        let slots: Vec<NodeId> = self.config.api_slots().filter(|n| kinds.contains(&n.kind)).map(|n| n.id).collect();
        let free = |id: NodeId| self.check_free(id, now).is_ok();
        if slots.is_empty() {
            // No slot for this role: ids are handed out from 100 up, past the
            // configured ones (those belong to the other role).
            return match wanted {
                Some(id) if id < FIRST_API_NODE_ID => Err(format!(
                    "node id {id} is for data and mgmd nodes: API and SQL nodes use {FIRST_API_NODE_ID} and up"
                )),
                Some(id) if self.config.node(id).is_some() => Err(format!(
                    "node {id} is configured as {} slot, which {role}s cannot take",
                    self.config.node(id).map_or(NodeKind::Api, |n| n.kind).with_article()
                )),
                Some(id) => self.check_free(id, now).map(|()| (id, true)),
                None => (FIRST_API_NODE_ID..=NodeId::MAX)
                    .find(|&id| self.config.node(id).is_none() && free(id))
                    .map(|id| (id, true))
                    .ok_or_else(|| "every API node id is in use".to_string()),
            };
        }
        let kind_names = kinds.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(" or ");
        if let Some(id) = wanted {
            if !slots.contains(&id) {
                return Err(format!(
                    "node {id} is not a {kind_names} slot in the cluster configuration (slots: {})",
                    ids_of(slots.iter().copied())
                ));
            }
            if !self.host_allows(id, ip) {
                return Err(format!(
                    "node {id} is reserved for host {}, not {ip}",
                    self.config.node(id).map_or("", |n| &n.host)
                ));
            }
            self.check_free(id, now)?;
            return Ok((id, false));
        }
        if let Some(&id) = slots.iter().find(|&&id| self.host_allows(id, ip) && free(id)) {
            return Ok((id, false));
        }
        let why: Vec<String> = slots
            .iter()
            .map(|&id| match self.sessions.get(&id) {
                Some(s) if self.live(s, now) => format!("{id}: taken by {}", s.peer),
                _ => format!("{id}: only for host {}", self.config.node(id).map_or("", |n| &n.host)),
            })
            .collect();
        Err(format!(
            "no free {kind_names} slot for {} from {ip} ({}): add a [[node]] slot to the configuration",
            role.with_article(),
            why.join(", ")
        ))
    }

    /// The session `sid` of `node` sent something.
    pub fn heard(&mut self, node: NodeId, sid: SessionId, now: Instant) {
        if let Some(s) = self.sessions.get_mut(&node).filter(|s| s.sid == sid) {
            s.last_heard = now;
        }
    }

    /// Store a report; Err (the server disconnects the peer) when it is not
    /// the session's own node.
    pub fn report(&mut self, node: NodeId, sid: SessionId, report: NodeReport, now: Instant) -> Result<(), String> {
        if report.node_id != node {
            return Err(format!("report for node {} on the session of node {node}", report.node_id));
        }
        match self.sessions.get(&node) {
            Some(s) if s.sid == sid => {}
            _ => return Err(format!("report from node {node} whose session was replaced")),
        }
        self.heard(node, sid, now);
        self.reports.insert(node, Reported { report, at: now });
        Ok(())
    }

    /// The session closed. A dynamic API id is free again; a data node's last
    /// report is kept (shown as not connected).
    pub fn closed(&mut self, node: NodeId, sid: SessionId) {
        if self.sessions.get(&node).is_some_and(|s| s.sid == sid) {
            let s = self.sessions.remove(&node).expect("checked");
            if s.dynamic {
                self.reports.remove(&node);
            }
        }
    }

    /// Decide an arbitration request from `node`'s session.
    pub fn arbitrate(&mut self, node: NodeId, role: PeerRole, req: &ArbitReq, now: Instant) -> ArbitReply {
        let refuse = |reason: String| ArbitReply::Refused { generation: req.generation, reason };
        if role != PeerRole::DataNode {
            return refuse(format!("only data nodes take part in arbitration, not {}", role.with_article()));
        }
        if req.requester != node {
            return refuse(format!("node {node} asked on behalf of node {}", req.requester));
        }
        if let Some(bad) = req.survivors.iter().chain(&req.failed).find(|id| self.config.node_group_of(**id).is_none())
        {
            return refuse(format!("node {bad} is not a data node of this cluster"));
        }
        if self.config.mgmd_nodes().next().map(|n| n.id) != Some(self.mgmd_id) {
            // Two mgmds granting independently could each pick a winner.
            return refuse(format!(
                "mgmd {} is not the arbitrator: ask the first mgmd ({})",
                self.mgmd_id,
                self.config.mgm_addresses()
            ));
        }
        if let Some(refusal) = self.maybe_new_incarnation(req, now) {
            return refuse(refusal);
        }
        self.arbitrator.decide(req)
    }

    /// A cluster forming again (a system restart: QMGR's generations start
    /// over at 1, or 0 for a partial start) after mgmd arbitrated for an
    /// earlier life of it. The arbitrator's record of that life would refuse
    /// every generation below its newest, so after a restart of the whole
    /// cluster the first split (with 2 data nodes, the first node failure)
    /// shut the survivors down. A new life starts when the forming nodes
    /// are the whole cluster (registration of generation 1 by every data
    /// node), or a partial start (generation 0) while no data node outside
    /// it is connected here and reports itself started (it could be a part
    /// of the earlier life still running: then the partial start is refused,
    /// as before). Returns a refusal, or None to decide as usual.
    fn maybe_new_incarnation(&mut self, req: &ArbitReq, now: Instant) -> Option<String> {
        let newest = self.arbitrator.newest()?;
        let all: BTreeSet<NodeId> = self.config.data_nodes().map(|n| n.id).collect();
        let forming: BTreeSet<NodeId> = req.survivors.iter().copied().collect();
        let whole = req.generation == 1 && req.failed.is_empty() && forming == all;
        let partial = req.generation == 0;
        if !((whole && newest > 1) || (partial && newest >= 1)) {
            return None;
        }
        if partial {
            let running: Vec<NodeId> = all
                .difference(&forming)
                .copied()
                .filter(|n| {
                    self.sessions.get(n).is_some_and(|s| self.live(s, now))
                        && self.reports.get(n).is_some_and(|r| r.report.state == NodeState::Started)
                })
                .collect();
            if !running.is_empty() {
                return Some(format!(
                    "data node(s) {} still run as members of the cluster: a partial start without them is refused",
                    ids_of(running.into_iter())
                ));
            }
        }
        tracing::info!(
            "mgmd: the cluster starts a new life (nodes {}, generation {}): the arbitration record of the last one (up to generation {newest}) is dropped",
            ids_of(forming.into_iter()),
            req.generation
        );
        self.arbitrator.new_incarnation();
        None
    }

    /// A command from `norr mgm`.
    pub fn route(&self, cmd: &MgmCommand, now: Instant) -> Routed {
        let err = |message: String| Routed::Reply(MgmReply::Error { message });
        let (node, what) = match *cmd {
            MgmCommand::Show | MgmCommand::Status => return Routed::Reply(MgmReply::Show(self.view(now))),
            MgmCommand::StopAll => return self.route_stop_all(now),
            MgmCommand::Stop { node } => (node, NodeCommand::Stop),
            MgmCommand::Start { node } => (node, NodeCommand::Start),
            MgmCommand::Restart { node } => (node, NodeCommand::Restart),
        };
        let verb = command_verb(what);
        match self.config.node(node) {
            None => {
                return err(format!(
                    "node {node} is not in the cluster configuration (data nodes: {})",
                    self.data_ids()
                ))
            }
            Some(n) if n.kind != NodeKind::Data => {
                return err(format!(
                    "node {node} is {} node: {verb} takes a data node (data nodes: {})",
                    n.kind.with_article(),
                    self.data_ids()
                ))
            }
            Some(_) => {}
        }
        let Some(s) = self.sessions.get(&node).filter(|s| self.live(s, now)) else {
            return err(format!(
                "node {node} is not connected to mgmd: it is down, or not heard from in the last {} s",
                SESSION_STALE_AFTER.as_secs()
            ));
        };
        let state = self.reports.get(&node).map(|r| &r.report.state);
        match (what, state) {
            (NodeCommand::Start, Some(NodeState::Started)) => return err(format!("node {node} is already started")),
            (NodeCommand::Start, Some(NodeState::Starting { .. })) => {
                return err(format!("node {node} is already starting"))
            }
            (NodeCommand::Stop, Some(NodeState::Stopped)) => return err(format!("node {node} is already stopped")),
            _ => {}
        }
        let was = state.map_or_else(|| "no report yet".to_string(), |s| format!("it was {s}"));
        Routed::Push { targets: vec![(node, s.sid, what)], message: format!("node {node}: {verb} sent ({was})") }
    }

    fn route_stop_all(&self, now: Instant) -> Routed {
        let mut targets = Vec::new();
        let mut absent = Vec::new();
        for n in self.config.data_nodes() {
            match self.sessions.get(&n.id).filter(|s| self.live(s, now)) {
                Some(s) => targets.push((n.id, s.sid, NodeCommand::Shutdown)),
                None => absent.push(n.id),
            }
        }
        if targets.is_empty() {
            return Routed::Reply(MgmReply::Error { message: "no data node is connected: nothing to stop".into() });
        }
        let mut message = format!("shutdown sent to data nodes {}", ids_of(targets.iter().map(|t| t.0)));
        if !absent.is_empty() {
            message.push_str(&format!("; not connected: {}", ids_of(absent.into_iter())));
        }
        Routed::Push { targets, message }
    }

    fn data_ids(&self) -> String {
        ids_of(self.config.data_nodes().map(|n| n.id))
    }

    /// The cluster as mgmd sees it now.
    pub fn view(&self, now: Instant) -> ClusterView {
        let mut nodes: Vec<NodeView> = Vec::new();
        for n in &self.config.nodes {
            let mut v = self.node_view(n.id, n.kind, now);
            if n.port != 0 {
                v.address = n.address();
            } else if !n.host.is_empty() && v.address.is_empty() {
                v.address = n.host.clone();
            }
            if n.kind == NodeKind::Data && v.node_group.is_none() {
                v.node_group = self.config.node_group_of(n.id);
            }
            if n.id == self.mgmd_id {
                v.connected = true;
                v.state = Some(NodeState::Started);
                v.version = self.version.clone();
                v.uptime_ms = now.saturating_duration_since(self.started).as_millis() as u64;
            }
            nodes.push(v);
        }
        for (&id, s) in self.sessions.iter().filter(|(_, s)| s.dynamic) {
            let kind = if s.role == PeerRole::SqlNode { NodeKind::Sql } else { NodeKind::Api };
            nodes.push(self.node_view(id, kind, now));
        }
        nodes.sort_by_key(|v| v.id);
        let president = nodes.iter().find(|v| v.connected && v.president && v.kind == NodeKind::Data).map(|v| v.id);
        ClusterView {
            name: self.config.name.clone(),
            president,
            digest: self.digest,
            mgmd_node_id: self.mgmd_id,
            nodes,
        }
    }

    fn node_view(&self, id: NodeId, kind: NodeKind, now: Instant) -> NodeView {
        let session = self.sessions.get(&id).filter(|s| self.live(s, now));
        let report = self.reports.get(&id);
        let mut v = NodeView {
            id,
            kind,
            address: String::new(),
            connected: session.is_some(),
            state: None,
            node_group: None,
            primary_partitions: 0,
            partitions: 0,
            version: String::new(),
            uptime_ms: 0,
            phases: Vec::new(),
            president: false,
            last_durable_gci: None,
            files_complete: false,
            peer: session.map(|s| s.peer.to_string()),
            refusal: None,
        };
        if let Some(Reported { report: r, at }) = report {
            v.address = r.address.clone();
            v.state = Some(r.state.clone());
            v.node_group = r.node_group;
            v.primary_partitions = r.primary_partitions;
            v.partitions = r.partitions;
            v.version = r.version.clone();
            // A node not connected has no uptime we can vouch for.
            if session.is_some() {
                v.uptime_ms = r.uptime_ms.saturating_add(now.saturating_duration_since(*at).as_millis() as u64);
            }
            v.phases = r.phases.clone();
            v.president = r.president;
            v.last_durable_gci = r.last_durable_gci;
            v.refusal = r.refusal.clone();
            v.files_complete = r.files_complete;
        }
        if v.address.is_empty() {
            v.address = session.map_or_else(String::new, |s| s.peer.ip().to_string());
        }
        v
    }
}

pub fn command_verb(c: NodeCommand) -> &'static str {
    match c {
        NodeCommand::Stop => "stop",
        NodeCommand::Start => "start",
        NodeCommand::Restart => "restart",
        NodeCommand::Shutdown => "shutdown",
    }
}

fn ids_of(ids: impl Iterator<Item = NodeId>) -> String {
    let v: Vec<String> = ids.map(|i| i.to_string()).collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
