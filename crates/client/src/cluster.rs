//! The client's view of the cluster: one link per data node, each holding
//! the current connection to it (`conn::Conn`), a supervisor task per link
//! that notices a broken connection at once and makes a new one with
//! backoff (logged), and, with several data nodes, the distribution
//! (`Dist`: node groups, primaries), fetched from any node and refreshed
//! when a link goes down or comes up and every `dist_refresh_interval`.
//!
//! Every data node must know the client by the same API node id (a node
//! that takes over a failed coordinator answers the client by it): the id
//! comes from mgmd (`Client::connect_mgm`), from `ConnectOptions::api_node_id`,
//! or from the first data node that answers, and every other connection
//! (and every reconnect) asks for it in the handshake. A lone data node
//! without mgmd assigns an id at each connect, as before.
//!
//! Routing (`routing` for the partition): a transaction starts on the node
//! holding its first partition's primary replica, else on the next replica
//! of the chain that is connected, else on any connected node (spread by
//! the transaction handle). Dictionary requests go to the first connected
//! node in configuration order.

use crate::conn::{self, Conn, LinkParams, Reply, ReqKey, Shared};
use crate::error::ClientError;
use crate::routing::{self, tc_instance, Defs, FirstPart};
use crate::takeover::TakeoverAnswers;
use crate::{ConnectOptions, LocalLink};
use norr_kernel::NodeId;
use norr_signals::dist::{Dist, MAX_DATA_NODES, MAX_REPLICAS};
use norr_signals::{DictOp, DictReq, DictResult, KeyOp, ScanSpec, Signal};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;
use tokio::sync::Notify;

/// Where a data node is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Endpoint {
    /// Addresses resolved once (`Client::connect` with a `ToSocketAddrs`),
    /// tried in order.
    Tcp(Vec<SocketAddr>),
    /// `HOST:PORT`, resolved again at every connect.
    Host(String),
    /// A data node's Unix-domain socket on this host.
    Unix(PathBuf),
    /// An in-process link: made once, by the caller; never made again.
    Local,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Tcp(a) if a.len() == 1 => write!(f, "{}", a[0]),
            Endpoint::Tcp(a) => {
                write!(f, "{}", a.iter().map(|a| a.to_string()).collect::<Vec<_>>().join("|"))
            }
            Endpoint::Host(h) => f.write_str(h),
            Endpoint::Unix(p) => write!(f, "unix:{}", p.display()),
            Endpoint::Local => f.write_str("in-process link"),
        }
    }
}

/// One data node: where it is, its id, and the current connection to it.
pub(crate) struct NodeLink {
    pub endpoint: Endpoint,
    /// From the configuration (mgmd) or the first handshake; 0: not known yet.
    node_id: AtomicU16,
    /// The latest connection, live or closed (the supervisor replaces it).
    current: Mutex<Option<Arc<Conn>>>,
}

impl NodeLink {
    pub fn node_id(&self) -> Option<NodeId> {
        Some(self.node_id.load(Ordering::Relaxed)).filter(|id| *id != 0)
    }

    /// The connection, if it is up.
    pub fn live(&self) -> Option<Arc<Conn>> {
        let g = self.current.lock().expect("link lock");
        match &*g {
            Some(c) if !c.shared.is_closed() => Some(c.clone()),
            _ => None,
        }
    }

    fn is_live(&self) -> bool {
        self.current.lock().expect("link lock").as_ref().is_some_and(|c| !c.shared.is_closed())
    }

    /// Why the last connection closed (None while it is up or if none was made).
    fn closed_reason(&self) -> Option<String> {
        self.current.lock().expect("link lock").as_ref().and_then(|c| c.shared.closed_reason())
    }
}

/// Everything one client (all clones of a `Client`) shares.
pub(crate) struct ClusterShared {
    pub opts: ConnectOptions,
    pub links: Vec<NodeLink>,
    /// This client's API node id (0 before the first handshake).
    api_node: AtomicU16,
    /// Ask every node for `api_node` (several data nodes, an id from mgmd or
    /// from the options); else a lone node assigns one at each connect.
    request_ids: bool,
    pub defs: Defs,
    dist: Mutex<Option<Arc<Dist>>>,
    pub answers: Arc<TakeoverAnswers>,
    next_txn: AtomicU64,
    /// Connections made again after a loss (any node).
    reconnects: AtomicU64,
    /// Requests sent to data nodes that wait for a reply, over every
    /// connection (`Client::round_trips`).
    pub round_trips: Arc<AtomicU64>,
    /// The session with mgmd (`Client::connect_mgm`), kept while the client lives.
    mgm: Option<norr_mgmd::session::MgmLink>,
    /// Wakes the distribution refresher (a link went down or up, or a node
    /// said the client's routing is behind).
    events: Arc<Notify>,
}

impl Drop for ClusterShared {
    fn drop(&mut self) {
        if let Some(link) = self.mgm.take() {
            // Its drop joins the session's thread, which may be inside a
            // connect attempt for seconds: never on a runtime worker.
            let _ = std::thread::Builder::new().name("mgmd-link-drop".into()).spawn(move || drop(link));
        }
    }
}

/// How to build a client.
pub(crate) struct Plan {
    /// Every data node, with its id when the configuration says it.
    pub endpoints: Vec<(Endpoint, Option<NodeId>)>,
    /// The API node id every node is asked for (mgmd's, or the options');
    /// None with several nodes: the first node's choice.
    pub api_node: Option<NodeId>,
    pub mgm: Option<norr_mgmd::session::MgmLink>,
    /// The link for an `Endpoint::Local` (the only endpoint then).
    pub local: Option<LocalLink>,
}

async fn connect_endpoint(ep: &Endpoint, opts: ConnectOptions, link: LinkParams) -> Result<Conn, ClientError> {
    match ep {
        Endpoint::Tcp(addrs) => conn::connect(&addrs[..], opts, link).await,
        Endpoint::Host(h) => conn::connect(h.as_str(), opts, link).await,
        Endpoint::Unix(p) => conn::connect_unix(p, opts, link).await,
        Endpoint::Local => {
            Err(ClientError::NotConnected("an in-process link to a data node cannot be made again".to_string()))
        }
    }
}

/// Transaction handles are unique for the client's lifetime (take-over
/// answers name them) and, since they start from the clock, unlikely to
/// repeat a handle of an earlier run that had the same API node id.
fn first_txn_handle() -> u64 {
    let micros =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(1);
    // Room below 2^63 for a long life of handles.
    (micros & ((1u64 << 60) - 1)).max(1)
}

/// Connect to the nodes of `plan`: succeeds once at least one is connected;
/// the others are retried in the background.
pub(crate) async fn connect(plan: Plan, opts: ConnectOptions) -> Result<Arc<ClusterShared>, ClientError> {
    assert!(!plan.endpoints.is_empty(), "a client needs a data node");
    if plan.endpoints.len() > MAX_DATA_NODES {
        return Err(ClientError::Protocol(format!(
            "{} data nodes given; a cluster has at most {MAX_DATA_NODES}",
            plan.endpoints.len()
        )));
    }
    for (i, (a, _)) in plan.endpoints.iter().enumerate() {
        if plan.endpoints[..i].iter().any(|(b, _)| b == a) {
            return Err(ClientError::Protocol(format!("data node address {a} given twice")));
        }
    }
    let answers = Arc::new(TakeoverAnswers::default());
    let several = plan.endpoints.len() > 1;
    let request_ids = several || plan.api_node.is_some();
    let round_trips = Arc::new(AtomicU64::new(0));
    let params = |id: Option<NodeId>| LinkParams {
        requested_api_node: id,
        answers: answers.clone(),
        round_trips: round_trips.clone(),
    };
    let n = plan.endpoints.len();
    let mut conns: Vec<Option<Conn>> = (0..n).map(|_| None).collect();
    let mut failures: Vec<(usize, ClientError)> = Vec::new();
    let mut api_node = plan.api_node;

    if let Some(link) = plan.local {
        assert!(!several && plan.endpoints[0].0 == Endpoint::Local);
        conns[0] = Some(conn::connect_local(link, opts.clone(), params(api_node)).await?);
    } else {
        let mut rest: Vec<usize> = (0..n).collect();
        if api_node.is_none() {
            // The first node that answers chooses the id; the others are asked for it.
            while !rest.is_empty() {
                let i = rest.remove(0);
                match connect_endpoint(&plan.endpoints[i].0, opts.clone(), params(None)).await {
                    Ok(c) => {
                        api_node = Some(c.shared.api_node);
                        conns[i] = Some(c);
                        break;
                    }
                    Err(e) => failures.push((i, e)),
                }
            }
        }
        let tasks: Vec<_> = rest
            .into_iter()
            .map(|i| {
                let (ep, o, p) = (plan.endpoints[i].0.clone(), opts.clone(), params(api_node));
                (i, tokio::spawn(async move { connect_endpoint(&ep, o, p).await }))
            })
            .collect();
        for (i, t) in tasks {
            match t.await {
                Ok(Ok(c)) => conns[i] = Some(c),
                Ok(Err(e)) => failures.push((i, e)),
                Err(e) => failures.push((i, ClientError::Protocol(format!("connect task failed: {e}")))),
            }
        }
    }
    // A node must be the one the configuration names, and no node twice.
    for i in 0..n {
        let Some(got) = conns[i].as_ref().map(|c| c.shared.data_node) else { continue };
        let clash = match plan.endpoints[i].1 {
            Some(want) if want != got => Some(format!("it is data node {got}, the configuration says {want}")),
            _ => (0..i)
                .find(|j| conns[*j].as_ref().is_some_and(|c| c.shared.data_node == got))
                .map(|j| format!("{} reaches the same data node {got}", plan.endpoints[j].0)),
        };
        if let Some(why) = clash {
            conns[i] = None;
            failures.push((i, ClientError::Protocol(format!("data node at {}: {why}", plan.endpoints[i].0))));
        }
    }
    if conns.iter().all(|c| c.is_none()) {
        if failures.len() == 1 {
            return Err(failures.pop().expect("one").1);
        }
        let all: Vec<String> = failures.iter().map(|(i, e)| format!("{}: {e}", plan.endpoints[*i].0)).collect();
        return Err(ClientError::NotConnected(format!("no data node could be reached ({})", all.join("; "))));
    }
    for (i, e) in &failures {
        tracing::warn!(addr = %plan.endpoints[*i].0, "data node not connected ({e}); retrying in the background");
    }

    let keep_defs = several || conns.iter().flatten().any(|c| c.shared.tc_instances > 1);
    let first_api = conns.iter().flatten().next().map(|c| c.shared.api_node).expect("one is connected");
    let events = Arc::new(Notify::new());
    let mut watch = Vec::with_capacity(n);
    let links = plan
        .endpoints
        .into_iter()
        .zip(conns)
        .map(|((endpoint, id), c)| {
            let id = id.or(c.as_ref().map(|c| c.shared.data_node)).unwrap_or(0);
            watch.push(c.as_ref().map(|c| c.shared.clone()));
            NodeLink { endpoint, node_id: AtomicU16::new(id), current: Mutex::new(c.map(Arc::new)) }
        })
        .collect();
    let cluster = Arc::new(ClusterShared {
        links,
        api_node: AtomicU16::new(api_node.unwrap_or(first_api)),
        request_ids,
        defs: Defs::new(keep_defs),
        dist: Mutex::new(None),
        answers,
        next_txn: AtomicU64::new(first_txn_handle()),
        reconnects: AtomicU64::new(0),
        round_trips,
        mgm: plan.mgm,
        events: events.clone(),
        opts,
    });
    for (i, w) in watch.into_iter().enumerate() {
        tokio::spawn(supervise(Arc::downgrade(&cluster), events.clone(), i, w));
    }
    if several {
        // Route the first transactions well: fetch the distribution now.
        if let Err(e) = cluster.refresh_dist().await {
            tracing::warn!("no distribution from the data nodes yet ({e}); routing without it");
        }
        tokio::spawn(refresh_dist_loop(Arc::downgrade(&cluster), events, cluster.opts.dist_refresh_interval));
    }
    Ok(cluster)
}

/// Watch link `index`: when its connection closes, log it and make a new
/// one, with backoff, until the client is dropped.
async fn supervise(weak: Weak<ClusterShared>, events: Arc<Notify>, index: usize, mut watching: Option<Arc<Shared>>) {
    loop {
        if let Some(s) = watching.take() {
            let why = s.wait_closed().await;
            drop(s);
            let Some(cl) = weak.upgrade() else { return };
            let link = &cl.links[index];
            tracing::warn!(node = ?link.node_id(), addr = %link.endpoint, "lost the connection to a data node: {why}");
            if !cl.links.iter().any(NodeLink::is_live) {
                // A whole-cluster restart may start distribution versions over.
                *cl.dist.lock().expect("dist lock") = None;
            }
            events.notify_waiters();
            if link.endpoint == Endpoint::Local {
                return;
            }
        }
        let (mut delay, max) = match weak.upgrade() {
            Some(cl) => (cl.opts.reconnect_backoff_min, cl.opts.reconnect_backoff_max),
            None => return,
        };
        let since = Instant::now();
        let mut attempts: u32 = 0;
        loop {
            tokio::time::sleep(delay).await;
            let Some(cl) = weak.upgrade() else { return };
            attempts += 1;
            let link = &cl.links[index];
            match cl.reconnect(index).await {
                Ok(shared) => {
                    tracing::info!(
                        node = shared.data_node,
                        addr = %link.endpoint,
                        api_node = shared.api_node,
                        "connected to the data node again after {attempts} attempt(s) in {:.1} s",
                        since.elapsed().as_secs_f64()
                    );
                    events.notify_waiters();
                    watching = Some(shared);
                    break;
                }
                Err(e) => {
                    // Logged loudly at first and then every 10th attempt;
                    // the backoff keeps the rest cheap.
                    if attempts == 1 || attempts.is_multiple_of(10) {
                        tracing::warn!(node = ?link.node_id(), addr = %link.endpoint,
                            "reconnect attempt {attempts} failed: {e}; next in {} ms", (delay * 2).min(max).as_millis());
                    } else {
                        tracing::debug!(node = ?link.node_id(), addr = %link.endpoint, "reconnect attempt {attempts} failed: {e}");
                    }
                    delay = (delay * 2).min(max);
                }
            }
        }
    }
}

/// Refresh the distribution every `interval`, and at once when a link goes
/// down or comes up, until the client is dropped.
async fn refresh_dist_loop(weak: Weak<ClusterShared>, events: Arc<Notify>, interval: std::time::Duration) {
    let interval = interval.max(std::time::Duration::from_millis(10));
    loop {
        // Created before the refresh: an event during it is not missed.
        let woken = events.notified();
        {
            let Some(cl) = weak.upgrade() else { return };
            if let Err(e) = cl.refresh_dist().await {
                tracing::debug!("distribution not refreshed: {e}");
            }
        }
        let _ = tokio::time::timeout(interval, woken).await;
    }
}

/// A distribution from the network, checked before any code indexes it.
fn check_dist(d: &Dist) -> Result<(), String> {
    let r = d.node_groups.first().map_or(0, Vec::len);
    if d.node_groups.is_empty() || d.node_groups.len() > MAX_DATA_NODES || !(1..=MAX_REPLICAS).contains(&r) {
        return Err(format!("{} node groups of {r} replicas", d.node_groups.len()));
    }
    if d.node_groups.iter().any(|g| g.len() != r) {
        return Err("node groups of unequal size".to_string());
    }
    let mut seen = std::collections::BTreeSet::new();
    if !d.node_groups.iter().flatten().all(|n| *n != 0 && seen.insert(*n)) {
        return Err("a node id 0 or a node in two places".to_string());
    }
    Ok(())
}

impl ClusterShared {
    pub fn api_node(&self) -> NodeId {
        self.api_node.load(Ordering::Relaxed)
    }

    pub fn alloc_txn(&self) -> u64 {
        self.next_txn.fetch_add(1, Ordering::Relaxed)
    }

    /// True if the cluster has one data node: nobody else can take over.
    pub fn single_node(&self) -> bool {
        self.links.len() == 1
    }

    pub fn any_connected(&self) -> bool {
        self.links.iter().any(NodeLink::is_live)
    }

    pub fn all_connected(&self) -> bool {
        self.links.iter().all(NodeLink::is_live)
    }

    pub fn distribution(&self) -> Option<Arc<Dist>> {
        self.dist.lock().expect("dist lock").clone()
    }

    fn not_connected(&self) -> ClientError {
        if self.single_node() {
            let why = self.links[0].closed_reason().unwrap_or_else(|| "connection closed".to_string());
            return ClientError::NotConnected(format!("{why}; reconnecting in the background"));
        }
        ClientError::NotConnected(format!(
            "none of the {} data nodes is connected; reconnecting in the background",
            self.links.len()
        ))
    }

    /// The first connected node in configuration order (dictionary requests:
    /// one node as long as it is up, so a client sees its own DDL at once).
    pub fn first_live(&self) -> Result<Arc<Conn>, ClientError> {
        self.links.iter().find_map(NodeLink::live).ok_or_else(|| self.not_connected())
    }

    /// Some connected node, chosen by `spread` among those connected.
    fn any_live(&self, spread: u64) -> Result<Arc<Conn>, ClientError> {
        let live = self.links.iter().filter(|l| l.is_live()).count();
        if live == 0 {
            return Err(self.not_connected());
        }
        let want = (spread % live as u64) as usize;
        // A link may go down in between: then the first live one from there.
        let start = self.links.iter().enumerate().filter(|(_, l)| l.is_live()).nth(want).map_or(0, |(i, _)| i);
        (0..self.links.len())
            .find_map(|k| self.links[(start + k) % self.links.len()].live())
            .ok_or_else(|| self.not_connected())
    }

    fn live_node(&self, node: NodeId) -> Option<Arc<Conn>> {
        self.links.iter().find(|l| l.node_id() == Some(node)).and_then(NodeLink::live)
    }

    /// The coordinator (connection, TC instance) of a transaction whose
    /// first request is the key operations `ops`.
    pub fn place_ops(&self, ops: &[KeyOp], spread: u64) -> Result<(Arc<Conn>, u16), ClientError> {
        if self.single_node() {
            // The single-node path: no distribution, no definitions unless
            // the node runs several TC instances.
            let conn = self.links[0].live().ok_or_else(|| self.not_connected())?;
            let tcs = conn.shared.tc_instances;
            let instance =
                if tcs == 1 { 0 } else { tc_instance(routing::ops_partition(&self.defs, ops).part, tcs, spread) };
            return Ok((conn, instance));
        }
        self.place(routing::ops_partition(&self.defs, ops), spread)
    }

    /// The coordinator of a transaction (or standalone scan) whose first
    /// request is the scan `spec`.
    pub fn place_scan(&self, spec: &ScanSpec, spread: u64) -> Result<(Arc<Conn>, u16), ClientError> {
        self.place(routing::scan_partition(&self.defs, spec), spread)
    }

    /// The coordinator for a transaction on a known partition.
    pub fn place(&self, fp: FirstPart, spread: u64) -> Result<(Arc<Conn>, u16), ClientError> {
        let conn = if self.single_node() {
            self.links[0].live().ok_or_else(|| self.not_connected())?
        } else {
            let on_chain = || {
                let (part, def) = (fp.part?, fp.def.as_ref()?);
                let dist = self.distribution()?;
                // Alive replicas first, the primary at the head.
                let chain = dist.chain(def, part, 1)?;
                chain.nodes.iter().find_map(|n| self.live_node(*n))
            };
            match on_chain() {
                Some(c) => c,
                None => self.any_live(spread)?,
            }
        };
        let instance = tc_instance(fp.part, conn.shared.tc_instances, spread);
        Ok((conn, instance))
    }

    /// How many times a lost connection was made again.
    pub fn reconnects(&self) -> u64 {
        self.reconnects.load(Ordering::Acquire)
    }

    /// Make a new connection for link `index` and install it.
    async fn reconnect(&self, index: usize) -> Result<Arc<Shared>, ClientError> {
        let link = &self.links[index];
        let requested = self.request_ids.then(|| self.api_node());
        let params = LinkParams {
            requested_api_node: requested,
            answers: self.answers.clone(),
            round_trips: self.round_trips.clone(),
        };
        let conn = connect_endpoint(&link.endpoint, self.opts.clone(), params).await?;
        let got = conn.shared.data_node;
        if let Some(was) = link.node_id().filter(|was| *was != got) {
            return Err(ClientError::Protocol(format!(
                "{} is data node {got} now, it was data node {was}",
                link.endpoint
            )));
        }
        if let Some(other) = self.links.iter().find(|l| l.node_id() == Some(got) && !std::ptr::eq(*l, link)) {
            return Err(ClientError::Protocol(format!(
                "{} reaches data node {got}, as {} does",
                link.endpoint, other.endpoint
            )));
        }
        link.node_id.store(got, Ordering::Relaxed);
        if !self.request_ids {
            self.api_node.store(conn.shared.api_node, Ordering::Relaxed);
        }
        if conn.shared.tc_instances > 1 {
            self.defs.keep_from_now();
        }
        let shared = conn.shared.clone();
        // Counted before the install: whoever sees the connection also
        // sees the count (a caller that checks the count before using the
        // client never misses a reconnect it then uses).
        self.reconnects.fetch_add(1, Ordering::AcqRel);
        *link.current.lock().expect("link lock") = Some(Arc::new(conn));
        Ok(shared)
    }

    /// One dictionary request to the first connected node.
    pub async fn dict(&self, op: DictOp) -> Result<DictResult, ClientError> {
        let conn = self.first_live()?;
        Self::dict_at(&conn, op).await
    }

    /// One dictionary request to the node of `conn`.
    async fn dict_at(conn: &Conn, op: DictOp) -> Result<DictResult, ClientError> {
        let s = &conn.shared;
        let req_id = s.alloc_dict();
        let reply =
            s.request(ReqKey::Dict(req_id), s.dict(), Signal::DictReq(Box::new(DictReq { req_id, op }))).await?;
        match reply {
            Reply::Dict(Ok(r)) => Ok(r),
            Reply::Dict(Err(e)) => Err(ClientError::Node(e)),
            other => Err(ClientError::Protocol(format!("unexpected reply to DICT_REQ: {other:?}"))),
        }
    }

    /// A node refused a transaction because it does not serve the
    /// partition (it restarts, or is not a live replica): the distribution
    /// this client routed by is behind. Fetch it again now rather than at
    /// the next interval.
    pub fn routing_refused(&self) {
        self.events.notify_waiters();
    }

    /// One node's distribution.
    async fn dist_of(conn: &Conn) -> Result<Box<Dist>, ClientError> {
        let d = match Self::dict_at(conn, DictOp::GetDistribution).await? {
            DictResult::Distribution(d) => d,
            other => return Err(ClientError::Protocol(format!("expected a distribution, got {other:?}"))),
        };
        check_dist(&d).map_err(|e| ClientError::Protocol(format!("malformed distribution from a data node: {e}")))?;
        Ok(d)
    }

    /// Ask every connected data node for the distribution; keep the newest
    /// (ours if it is newer). Not one node: a node that just restarted is
    /// connected before its DIH has the cluster's distribution, and one
    /// that has not handled a failure yet still shows the failed node
    /// alive; asking only the first connected node kept routing to a
    /// restarting node for seconds (the chaos test saw bursts of 4278).
    pub async fn refresh_dist(&self) -> Result<Arc<Dist>, ClientError> {
        let conns: Vec<Arc<Conn>> = self.links.iter().filter_map(NodeLink::live).collect();
        if conns.is_empty() {
            return Err(self.not_connected());
        }
        let mut newest: Option<Box<Dist>> = None;
        let mut last_err = None;
        for c in &conns {
            match Self::dist_of(c).await {
                Ok(d) if newest.as_ref().is_none_or(|n| d.version > n.version) => newest = Some(d),
                Ok(_) => {}
                Err(e) => last_err = Some(e),
            }
        }
        let Some(d) = newest else {
            return Err(last_err.expect("a node answered or failed"));
        };
        let mut cur = self.dist.lock().expect("dist lock");
        match &*cur {
            Some(have) if have.version > d.version => Ok(have.clone()),
            _ => {
                if cur.as_ref().is_none_or(|have| have.version != d.version) {
                    tracing::debug!(version = d.version, "distribution updated");
                }
                let d = Arc::new(*d);
                *cur = Some(d.clone());
                Ok(d)
            }
        }
    }

    /// Status of every data node link, in configuration order.
    pub fn link_status(&self) -> Vec<(Option<NodeId>, String, bool)> {
        self.links.iter().map(|l| (l.node_id(), l.endpoint.to_string(), l.is_live())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use norr_signals::dist::ReplicaState;

    #[test]
    fn malformed_distributions_are_refused() {
        assert!(check_dist(&Dist::new(vec![vec![1, 2], vec![3, 4]], ReplicaState::Alive)).is_ok());
        let mut d = Dist::single(1);
        d.node_groups.clear();
        assert!(check_dist(&d).is_err());
        d.node_groups = vec![vec![1, 2], vec![3]];
        assert!(check_dist(&d).is_err());
        d.node_groups = vec![vec![1, 2], vec![2, 3]];
        assert!(check_dist(&d).is_err());
        d.node_groups = vec![vec![0]];
        assert!(check_dist(&d).is_err());
        d.node_groups = vec![vec![1, 2, 3, 4, 5]];
        assert!(check_dist(&d).is_err());
    }

    #[test]
    fn endpoints_print_as_given() {
        assert_eq!(Endpoint::Host("db1:2202".into()).to_string(), "db1:2202");
        assert_eq!(Endpoint::Unix("/tmp/n.sock".into()).to_string(), "unix:/tmp/n.sock");
        assert_eq!(Endpoint::Tcp(vec!["127.0.0.1:1".parse().unwrap()]).to_string(), "127.0.0.1:1");
    }

    #[test]
    fn handles_start_high_and_unique() {
        let a = first_txn_handle();
        assert!(a > 1 << 40, "from the clock: {a}");
        assert!(a < 1 << 60);
    }
}
