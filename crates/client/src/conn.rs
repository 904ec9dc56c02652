//! One multiplexed connection to a data node: the handshake, a writer task that
//! coalesces queued frames into one write, and a reader task that routes
//! replies to the requests waiting for them.
//!
//! Send path: a caller encodes its frame into the shared send buffer (under a
//! short mutex) and wakes the writer task, which yields once (so that the
//! other tasks ready in the same round queue theirs) and writes the whole
//! buffer in one go; whatever queues meanwhile goes with its next write. At low
//! load every request is written at once; at high load requests batch
//! themselves without any timer (the adaptive send of NDB's transporters, with
//! no artificial delay).
//!
//! With `ConnectOptions::direct_send` the caller instead writes its frame to
//! the socket itself (non-blocking) when nothing else is queued or being
//! written; only what the socket does not take, and frames queued while the
//! writer is busy, go through the writer. See that option for when each wins.
//!
//! Receive path: the reader decodes frames and completes the oneshot channel
//! registered under the reply's key (transaction handle, scan id or dictionary
//! request id). A reply nobody waits for (its caller gave up) is dropped.
//!
//! When the connection fails, every pending request completes with
//! `NotConnected` and so does every later one; the client's link supervisor
//! (`cluster`) notices (`Shared::wait_closed`) and makes a new connection.
//!
//! A take-over node's TC_KEY_FAILCONF (the outcome of a transaction whose
//! coordinator was on another, failed data node) may come on any
//! connection: it goes to the client-wide `TakeoverAnswers`.

use crate::error::ClientError;
use crate::takeover::TakeoverAnswers;
use crate::ConnectOptions;
use norr_kernel::{BlockRef, NodeId, Priority};
use norr_signals::{block, wire, DictResult, Envelope, NodeError, ScanTabConf, Signal, TcKeyConf, TcKeyRef};
use norr_transport::auth;
use norr_transport::handshake::{self, Hello, HelloReply};
use norr_transport::local_pipe::ApiEnd;
use norr_transport::{encode_frame, encode_frame_with, FrameDecoder};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{tcp, unix, TcpStream, UnixStream};
use tokio::sync::{oneshot, Notify};

/// A reply routed to one waiting request.
#[derive(Debug)]
pub(crate) enum Reply {
    Key(Result<Box<TcKeyConf>, Box<TcKeyRef>>),
    Scan(Result<Box<ScanTabConf>, NodeError>),
    Dict(Result<DictResult, NodeError>),
    /// No reply within the request timeout (sent by the timeout sweeper).
    TimedOut,
}

/// Key of a pending request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ReqKey {
    Txn(u64),
    Scan(u32),
    Dict(u32),
}

/// A request waiting for its reply.
struct Waiter {
    tx: oneshot::Sender<Reply>,
    /// `Shared::sweep_tick` when the request was registered.
    since_tick: u32,
}

/// The pending map's keys are ids this client allocates itself (a reply's key
/// only looks up and removes), so nobody can pick colliding keys and the
/// DoS-resistant default SipHash buys nothing; it cost ~700 instructions per
/// key request (one insert, one remove).
type PendingMap = norr_kernel::fxhash::FxHashMap<ReqKey, Waiter>;

struct Pending {
    waiting: PendingMap,
    /// Set once the connection is gone: why.
    closed: Option<String>,
}

struct SendQueue {
    buf: Vec<u8>,
    closed: bool,
    /// The writer task holds bytes it has not finished writing (or has been
    /// asked to write): a direct write now would interleave with them.
    writer_busy: bool,
    /// The socket, for direct writes from `send` while the writer is idle
    /// (`None` without `direct_send`, and once the connection is closing:
    /// the writer shuts it down).
    direct: Option<Arc<WriteHalf>>,
}

/// State shared by the API handles and the two IO tasks.
pub(crate) struct Shared {
    pub api_node: NodeId,
    pub data_node: NodeId,
    /// TC instances on the node (block TC, instances 0..n): transactions are
    /// spread over them by partition (`routing`).
    pub tc_instances: u16,
    pub opts: ConnectOptions,
    pending: Mutex<Pending>,
    /// Set with `Pending::closed`: a lock-free "is it closed?" for routing.
    closed: AtomicBool,
    /// Woken once, when the connection closes.
    closed_wakeup: Notify,
    /// Where take-over answers (TC_KEY_FAILCONF) go.
    answers: Arc<TakeoverAnswers>,
    send: Mutex<SendQueue>,
    send_wakeup: Notify,
    next_scan: AtomicU32,
    next_dict: AtomicU32,
    /// Counts the timeout sweeper's rounds: requests are stamped with it, so
    /// that timing them out needs neither a timer nor a clock read per request.
    sweep_tick: AtomicU32,
    /// Requests sent that wait for a reply (round trips), shared by every
    /// connection of the client (`Client::round_trips`).
    round_trips: Arc<AtomicU64>,
}

/// The timeout sweeper runs this many rounds per request timeout; a request
/// times out after more than that many rounds, so between 1 and 1.25 times
/// the timeout after it was sent (rounds are at least 1 ms apart).
const SWEEPS_PER_TIMEOUT: u32 = 4;

/// Send buffer capacity kept between writes; a larger one (after a big batch)
/// is shrunk back so an idle connection does not pin memory.
const SEND_BUF_KEEP_BYTES: usize = 1 << 20;
/// Bytes read from the socket per read call.
const READ_CHUNK_BYTES: usize = 256 * 1024;

impl Shared {
    pub fn alloc_scan(&self) -> u32 {
        self.next_scan.fetch_add(1, Ordering::Relaxed)
    }
    pub fn alloc_dict(&self) -> u32 {
        self.next_dict.fetch_add(1, Ordering::Relaxed)
    }

    pub fn dict(&self) -> BlockRef {
        BlockRef::new(self.data_node, block::DICT, 0)
    }

    /// The TC block of `instance` on this node.
    pub fn tc(&self, instance: u16) -> BlockRef {
        debug_assert!(instance < self.tc_instances.max(1));
        BlockRef::new(self.data_node, block::TC, instance)
    }

    /// Why the connection is closed, if it is.
    pub fn closed_reason(&self) -> Option<String> {
        self.pending.lock().expect("pending lock").closed.clone()
    }

    /// True once the connection has failed or was closed.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Returns (with the reason) once the connection is closed.
    pub async fn wait_closed(&self) -> String {
        loop {
            // Registered before the check, so a close in between still wakes it.
            let woken = self.closed_wakeup.notified();
            if let Some(why) = self.closed_reason() {
                return why;
            }
            woken.await;
        }
    }

    fn not_connected(&self) -> ClientError {
        ClientError::NotConnected(self.closed_reason().unwrap_or_else(|| "connection closed".to_string()))
    }

    /// Register interest in the reply under `key`. Fails if the connection is
    /// closed or too many requests are pending.
    pub fn register(&self, key: ReqKey) -> Result<oneshot::Receiver<Reply>, ClientError> {
        let (tx, rx) = oneshot::channel();
        let mut p = self.pending.lock().expect("pending lock");
        if let Some(why) = &p.closed {
            return Err(ClientError::NotConnected(why.clone()));
        }
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        if p.waiting.len() >= self.opts.max_pending_requests {
            return Err(ClientError::Node(NodeError::with(
                norr_signals::ErrorCode::Overloaded,
                format!("more than {} requests pending on this connection", self.opts.max_pending_requests),
            )));
        }
        let since_tick = self.sweep_tick.load(Ordering::Relaxed);
        let old = p.waiting.insert(key, Waiter { tx, since_tick });
        assert!(old.is_none(), "request key {key:?} registered twice");
        Ok(rx)
    }

    pub fn unregister(&self, key: ReqKey) {
        self.pending.lock().expect("pending lock").waiting.remove(&key);
    }

    /// Queue one message to `to`. Checks the frame size limit before anything
    /// is queued, so an oversized request never reaches the node (which would
    /// close the connection, failing every other transaction on it).
    pub fn send(&self, to: BlockRef, signal: Signal) -> Result<(), ClientError> {
        let env = Envelope { from: BlockRef::new(self.api_node, block::API, 0), to, prio: Priority::B, signal };
        let mut q = self.send.lock().expect("send lock");
        if q.closed {
            drop(q);
            return Err(self.not_connected());
        }
        let was_empty = q.buf.is_empty();
        let start = q.buf.len();
        encode_frame_with(&mut q.buf, |out| wire::encode_into(&env, out));
        let payload = q.buf.len() - start - norr_transport::frame::FRAME_HEADER_BYTES;
        if payload > self.opts.max_frame_bytes {
            q.buf.truncate(start);
            return Err(ClientError::Node(NodeError::with(
                norr_signals::ErrorCode::ValueTooLarge,
                format!(
                    "request of {payload} bytes exceeds the frame limit of {} bytes; send smaller batches",
                    self.opts.max_frame_bytes
                ),
            )));
        }
        if was_empty && !q.writer_busy {
            if let Some(w) = &q.direct {
                match w.try_write(&q.buf) {
                    Ok(n) if n == q.buf.len() => {
                        q.buf.clear();
                        return Ok(());
                    }
                    Ok(n) => {
                        let _ = q.buf.drain(..n);
                    }
                    // WouldBlock or an error: the writer retries and reports.
                    Err(_) => {}
                }
            }
        }
        if was_empty {
            q.writer_busy = true;
            drop(q);
            self.send_wakeup.notify_one();
        }
        Ok(())
    }

    /// Send and wait for the reply under `key`, with the request timeout.
    pub async fn request(&self, key: ReqKey, to: BlockRef, signal: Signal) -> Result<Reply, ClientError> {
        self.start_request(key, to, signal)?.wait().await
    }

    /// Register for the reply under `key` and queue the request. An error
    /// here means nothing of the request was sent; once this returns, the
    /// request may reach the node (see [`SentRequest::wait`]).
    pub fn start_request(&self, key: ReqKey, to: BlockRef, signal: Signal) -> Result<SentRequest<'_>, ClientError> {
        let rx = self.register(key)?;
        // Removes the registration if this future is dropped before the reply.
        let guard = Unregister { shared: self, key };
        self.send(to, signal)?;
        Ok(SentRequest { rx, guard })
    }
}

/// A request on its way (`Shared::start_request`).
pub(crate) struct SentRequest<'a> {
    rx: oneshot::Receiver<Reply>,
    guard: Unregister<'a>,
}

impl SentRequest<'_> {
    /// The reply, or `NotConnected` if the connection failed before it came
    /// (the request may or may not have reached the node), or `Timeout`.
    pub async fn wait(self) -> Result<Reply, ClientError> {
        let SentRequest { mut rx, guard } = self;
        let shared = guard.shared;
        if !shared.opts.reply_spin.is_zero() {
            let start = std::time::Instant::now();
            loop {
                match rx.try_recv() {
                    Ok(reply) => {
                        std::mem::forget(guard);
                        return Ok(reply);
                    }
                    Err(oneshot::error::TryRecvError::Closed) => {
                        std::mem::forget(guard);
                        return Err(shared.not_connected());
                    }
                    Err(oneshot::error::TryRecvError::Empty) => {}
                }
                if start.elapsed() >= shared.opts.reply_spin {
                    break;
                }
                // Lets the writer and reader tasks run; with nothing else to
                // do, the runtime polls the socket with a zero timeout.
                tokio::task::yield_now().await;
            }
        }
        // The request timeout is enforced by `timeout_sweeper` (a tokio timer
        // per request cost about as much as the rest of a key lookup here).
        let reply = rx.await;
        std::mem::forget(guard);
        match reply {
            Ok(Reply::TimedOut) => Err(ClientError::Timeout),
            Ok(r) => Ok(r),
            Err(_) => Err(shared.not_connected()),
        }
    }
}

impl Shared {
    /// One sweeper round: fails the requests registered more than
    /// SWEEPS_PER_TIMEOUT rounds ago. False once the connection is closed.
    fn sweep_timeouts(&self) -> bool {
        let tick = self.sweep_tick.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
        let expired: Vec<Waiter> = {
            let mut p = self.pending.lock().expect("pending lock");
            if p.closed.is_some() {
                return false;
            }
            let keys: Vec<ReqKey> = p
                .waiting
                .iter()
                .filter(|(_, w)| tick.wrapping_sub(w.since_tick) > SWEEPS_PER_TIMEOUT)
                .map(|(k, _)| *k)
                .collect();
            keys.iter().filter_map(|k| p.waiting.remove(k)).collect()
        };
        for w in expired {
            let _ = w.tx.send(Reply::TimedOut);
        }
        true
    }

    /// Mark the connection dead: fail every pending request, refuse new ones.
    pub fn close(&self, why: String) {
        let waiting = {
            let mut p = self.pending.lock().expect("pending lock");
            if p.closed.is_none() {
                p.closed = Some(why);
            }
            self.closed.store(true, Ordering::Release);
            std::mem::take(&mut p.waiting)
        };
        // Dropping the senders wakes every waiter with an error.
        drop(waiting);
        self.send.lock().expect("send lock").closed = true;
        self.send_wakeup.notify_one();
        self.closed_wakeup.notify_waiters();
    }

    fn dispatch(&self, env: Envelope) -> Result<(), String> {
        let (key, reply) = match env.signal {
            Signal::TcKeyConf(c) => (ReqKey::Txn(c.txn), Reply::Key(Ok(c))),
            Signal::TcKeyRef(r) => (ReqKey::Txn(r.txn), Reply::Key(Err(r))),
            Signal::ScanTabConf(c) => (ReqKey::Scan(c.scan_id), Reply::Scan(Ok(c))),
            Signal::ScanTabRef(r) => (ReqKey::Scan(r.scan_id), Reply::Scan(Err(r.error))),
            Signal::DictConf(c) => (ReqKey::Dict(c.req_id), Reply::Dict(Ok(c.result))),
            Signal::DictRef(r) => (ReqKey::Dict(r.req_id), Reply::Dict(Err(r.error))),
            Signal::TcKeyFailConf(c) => {
                self.answers.deliver(self.data_node, &c);
                return Ok(());
            }
            other => return Err(format!("unexpected signal {} from the data node", other.name())),
        };
        let tx = self.pending.lock().expect("pending lock").waiting.remove(&key);
        if let Some(w) = tx {
            // The waiter may have gone (dropped future): nothing to do.
            let _ = w.tx.send(reply);
        }
        Ok(())
    }
}

struct Unregister<'a> {
    shared: &'a Shared,
    key: ReqKey,
}

impl Drop for Unregister<'_> {
    fn drop(&mut self) {
        self.shared.unregister(self.key);
    }
}

/// Owns the IO tasks; dropping it (with the last `Client` clone) stops them and
/// closes the socket.
pub(crate) struct Conn {
    pub shared: Arc<Shared>,
    reader: tokio::task::AbortHandle,
    writer: tokio::task::AbortHandle,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.shared.close("client dropped".to_string());
        self.reader.abort();
        // The writer exits by itself once it has flushed (queued rollbacks of
        // dropped transactions still go out), or is aborted with the runtime.
        let _ = &self.writer;
    }
}

/// The write side of the socket to the data node.
pub(crate) enum WriteHalf {
    Tcp(tcp::OwnedWriteHalf),
    Unix(unix::OwnedWriteHalf),
    /// A data node in this process (`connect_local`).
    Local(Arc<ApiEnd>),
}

impl WriteHalf {
    fn try_write(&self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            WriteHalf::Tcp(w) => w.try_write(buf),
            WriteHalf::Unix(w) => w.try_write(buf),
            WriteHalf::Local(w) => w.try_write(buf),
        }
    }

    async fn writable(&self) -> std::io::Result<()> {
        match self {
            WriteHalf::Tcp(w) => w.writable().await,
            WriteHalf::Unix(w) => w.writable().await,
            WriteHalf::Local(w) => std::future::poll_fn(|cx| w.poll_writable(cx)).await,
        }
    }

    async fn shutdown(&mut self) -> std::io::Result<()> {
        match self {
            WriteHalf::Tcp(w) => w.shutdown().await,
            WriteHalf::Unix(w) => w.shutdown().await,
            WriteHalf::Local(w) => {
                w.shutdown();
                Ok(())
            }
        }
    }
}

/// The read side of an in-process link.
struct LocalRead(Arc<ApiEnd>);

impl AsyncRead for LocalRead {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if buf.remaining() == 0 {
            return std::task::Poll::Ready(Ok(()));
        }
        // Copies straight into the (possibly uninitialised) space: zeroing a
        // large read buffer first would cost more than the copy.
        let read = self.0.poll_read_with(cx, |avail| {
            let n = avail.len().min(buf.remaining());
            buf.put_slice(&avail[..n]);
            n
        });
        match read {
            std::task::Poll::Ready(Ok(_)) => std::task::Poll::Ready(Ok(())),
            std::task::Poll::Ready(Err(e)) => std::task::Poll::Ready(Err(e)),
            std::task::Poll::Pending => std::task::Poll::Pending,
        }
    }
}

type ReadHalf = Box<dyn AsyncRead + Unpin + Send>;

/// What a new connection needs from its client besides the options.
#[derive(Clone)]
pub(crate) struct LinkParams {
    /// The API node id to ask the data node for (`Hello::requested_api_node`).
    pub requested_api_node: Option<NodeId>,
    pub answers: Arc<TakeoverAnswers>,
    /// The client's round-trip counter (`Shared::round_trips`).
    pub round_trips: Arc<AtomicU64>,
}

/// Connect over TCP and handshake, then start the IO tasks on the current runtime.
pub(crate) async fn connect(
    addr: impl tokio::net::ToSocketAddrs,
    opts: ConnectOptions,
    link: LinkParams,
) -> Result<Conn, ClientError> {
    let io = async {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok::<_, std::io::Error>(stream)
    };
    let stream = match tokio::time::timeout(opts.connect_timeout, io).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(ClientError::NotConnected(format!("connect failed: {e}"))),
        Err(_) => return Err(ClientError::NotConnected("connect timed out".to_string())),
    };
    let (rd, wr) = stream.into_split();
    start(Box::new(rd), WriteHalf::Tcp(wr), opts, link).await
}

/// Connect to a data node's Unix-domain socket (same host) and handshake.
pub(crate) async fn connect_unix(
    path: &std::path::Path,
    opts: ConnectOptions,
    link: LinkParams,
) -> Result<Conn, ClientError> {
    let stream = match tokio::time::timeout(opts.connect_timeout, UnixStream::connect(path)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(ClientError::NotConnected(format!("connect to {} failed: {e}", path.display()))),
        Err(_) => return Err(ClientError::NotConnected("connect timed out".to_string())),
    };
    let (rd, wr) = stream.into_split();
    start(Box::new(rd), WriteHalf::Unix(wr), opts, link).await
}

/// Connect through an in-process link to a data node in this process and
/// handshake. Sends always go straight into the link (`direct_send`): a
/// write there is a copy, not a system call.
pub(crate) async fn connect_local(
    end: ApiEnd,
    mut opts: ConnectOptions,
    link: LinkParams,
) -> Result<Conn, ClientError> {
    opts.direct_send = true;
    let end = Arc::new(end);
    start(Box::new(LocalRead(end.clone())), WriteHalf::Local(end), opts, link).await
}

async fn start(mut rd: ReadHalf, wr: WriteHalf, opts: ConnectOptions, link: LinkParams) -> Result<Conn, ClientError> {
    let hello = Hello::new(opts.client_name.clone(), opts.kind).requesting(link.requested_api_node);
    let mut frame = Vec::new();
    encode_frame(&handshake::encode_hello(&hello), &mut frame);
    let mut dec = FrameDecoder::new(opts.max_frame_bytes);
    let hs = async {
        write_all(&wr, &frame).await.map_err(|e| ClientError::NotConnected(format!("handshake write: {e}")))?;
        let mut buf = vec![0u8; 4096];
        let mut challenged = false;
        loop {
            if let Some(f) = dec.next_frame().map_err(|e| ClientError::Protocol(format!("handshake: {e}")))? {
                match handshake::decode_reply(f).map_err(ClientError::Protocol)? {
                    HelloReply::Challenge { nonce, data_node } if !challenged => {
                        challenged = true;
                        let answer = answer_challenge(&opts, &hello, &nonce, data_node)?;
                        frame.clear();
                        encode_frame(&answer, &mut frame);
                        write_all(&wr, &frame)
                            .await
                            .map_err(|e| ClientError::NotConnected(format!("handshake write: {e}")))?;
                        continue;
                    }
                    HelloReply::Challenge { .. } => {
                        return Err(ClientError::Protocol("data node sent a second authentication challenge".into()))
                    }
                    reply => return Ok(reply),
                }
            }
            let n = rd.read(&mut buf).await.map_err(|e| ClientError::NotConnected(format!("handshake read: {e}")))?;
            if n == 0 {
                return Err(ClientError::NotConnected("connection closed during handshake".to_string()));
            }
            dec.push(&buf[..n]);
        }
    };
    let reply = match tokio::time::timeout(opts.connect_timeout, hs).await {
        Ok(r) => r?,
        Err(_) => return Err(ClientError::NotConnected("handshake timed out".to_string())),
    };
    let (api_node, data_node, tc_instances) = match reply {
        HelloReply::Welcome { api_node, data_node, wire_version, tc_instances } => {
            if wire_version != wire::WIRE_VERSION {
                return Err(ClientError::Node(NodeError::with(
                    norr_signals::ErrorCode::UnsupportedVersion,
                    format!("node speaks wire version {wire_version}, client {}", wire::WIRE_VERSION),
                )));
            }
            (api_node, data_node, tc_instances)
        }
        HelloReply::Refused { reason } => {
            return Err(ClientError::Protocol(format!("data node refused the connection: {reason}")))
        }
        HelloReply::Challenge { .. } => unreachable!("the handshake loop answers challenges"),
    };
    if let Some(want) = link.requested_api_node.filter(|w| *w != api_node) {
        return Err(ClientError::Protocol(format!("asked the data node for API node id {want}, was given {api_node}")));
    }

    let wr = Arc::new(wr);
    let direct = opts.direct_send.then(|| wr.clone());
    let shared = Arc::new(Shared {
        api_node,
        data_node,
        tc_instances: tc_instances.max(1),
        opts,
        pending: Mutex::new(Pending { waiting: PendingMap::default(), closed: None }),
        closed: AtomicBool::new(false),
        closed_wakeup: Notify::new(),
        answers: link.answers,
        send: Mutex::new(SendQueue { buf: Vec::with_capacity(64 * 1024), closed: false, writer_busy: false, direct }),
        send_wakeup: Notify::new(),
        next_scan: AtomicU32::new(1),
        next_dict: AtomicU32::new(1),
        sweep_tick: AtomicU32::new(0),
        round_trips: link.round_trips,
    });
    if let Some(t) = shared.opts.request_timeout {
        tokio::spawn(timeout_sweeper(Arc::downgrade(&shared), t / SWEEPS_PER_TIMEOUT));
    }
    let reader = tokio::spawn(reader_task(shared.clone(), rd, dec)).abort_handle();
    let writer = tokio::spawn(writer_task(shared.clone(), wr)).abort_handle();
    Ok(Conn { shared, reader, writer })
}

/// The answer to a data node's challenge: with `opts.user`, that account's
/// login (`norr_transport::account_auth`); else the auth response frame's
/// payload with the secret of `opts` or else of the environment. Neither: an
/// error that says what the node asked for and where a secret comes from.
fn answer_challenge(
    opts: &ConnectOptions,
    hello: &Hello,
    nonce: &[u8; auth::NONCE_BYTES],
    data_node: norr_kernel::NodeId,
) -> Result<Vec<u8>, ClientError> {
    if let Some(user) = &opts.user {
        let l = norr_transport::account_auth::login(user, opts.password.expose(), nonce, data_node)
            .map_err(ClientError::Protocol)?;
        return Ok(norr_transport::account_auth::encode_login(&l));
    }
    let secret = match &opts.secret {
        Some(s) => s.clone(),
        None => match auth::ClusterSecret::from_env().map_err(ClientError::Protocol)? {
            Some(s) => s,
            None => {
                return Err(ClientError::Protocol(format!(
                    "data node {data_node} requires the cluster secret or an account: set ConnectOptions::secret \
                     (or the {} environment variable; `norr up` writes the secret to its cluster file, [cluster] \
                     secret), or ConnectOptions::user and password where the cluster takes account logins \
                     (api_auth = \"account\")",
                    auth::SECRET_ENV
                )))
            }
        },
    };
    let r = auth::respond(&secret, nonce, &auth::api_context(data_node, hello)).map_err(ClientError::Protocol)?;
    Ok(auth::encode_auth_response(&r))
}

/// Times out requests (see `Shared::sweep_timeouts`) until the connection is
/// closed or dropped.
async fn timeout_sweeper(shared: std::sync::Weak<Shared>, period: std::time::Duration) {
    let mut every = tokio::time::interval(period.max(std::time::Duration::from_millis(1)));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    every.tick().await; // the first tick is immediate
    loop {
        every.tick().await;
        match shared.upgrade() {
            Some(s) if s.sweep_timeouts() => {}
            _ => return,
        }
    }
}

async fn writer_task(shared: Arc<Shared>, wr: Arc<WriteHalf>) {
    let mut out: Vec<u8> = Vec::with_capacity(64 * 1024);
    loop {
        // Let the other tasks that are ready on this runtime (sessions whose
        // requests arrived together) queue their frames first: under load this
        // turns one write per request into one write per scheduler round,
        // without a timer; when nothing else is ready it costs one pass.
        tokio::task::yield_now().await;
        let closed = {
            let mut q = shared.send.lock().expect("send lock");
            std::mem::swap(&mut q.buf, &mut out);
            if out.is_empty() {
                q.writer_busy = false;
            }
            if q.closed {
                q.direct = None;
            }
            q.closed
        };
        if !out.is_empty() {
            if let Err(e) = write_all(&wr, &out).await {
                shared.close(format!("write failed: {e}"));
                return;
            }
            out.clear();
            if out.capacity() > SEND_BUF_KEEP_BYTES {
                out.shrink_to(SEND_BUF_KEEP_BYTES);
            }
            // Frames may have queued during the write: go round without waiting.
            continue;
        }
        if closed {
            // `send` dropped its handle when `closed` was set (above, under
            // the lock), so this is the last one.
            if let Ok(mut w) = Arc::try_unwrap(wr) {
                let _ = w.shutdown().await;
            }
            return;
        }
        shared.send_wakeup.notified().await;
    }
}

/// Write all of `buf` through a shared socket handle.
async fn write_all(wr: &WriteHalf, mut buf: &[u8]) -> std::io::Result<()> {
    while !buf.is_empty() {
        wr.writable().await?;
        match wr.try_write(buf) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

async fn reader_task(shared: Arc<Shared>, mut rd: ReadHalf, mut dec: FrameDecoder) {
    let why = 'outer: loop {
        // Frames already buffered (the handshake read may have over-read).
        loop {
            match dec.next_frame() {
                Ok(Some(f)) => match wire::decode(f) {
                    Ok(env) => {
                        if let Err(e) = shared.dispatch(env) {
                            break 'outer e;
                        }
                    }
                    Err(e) => break 'outer format!("bad message from the data node: {e}"),
                },
                Ok(None) => break,
                Err(e) => break 'outer format!("bad frame from the data node: {e}"),
            }
        }
        // Straight into the decoder's buffer: no copy through a read buffer.
        match rd.read_buf(dec.append_target(READ_CHUNK_BYTES)).await {
            Ok(0) => break "connection closed by the data node".to_string(),
            Ok(_) => {}
            Err(e) => break format!("read failed: {e}"),
        }
    };
    shared.close(why);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::hash::BuildHasher;

    /// Keys of different kinds with the same id stay apart, and a map of many
    /// sequential ids (how they are allocated) finds every one.
    #[test]
    fn pending_map_keys() {
        let h = std::hash::BuildHasherDefault::<norr_kernel::fxhash::FxHasher>::default();
        assert_ne!(h.hash_one(ReqKey::Txn(1)), h.hash_one(ReqKey::Scan(1)));
        assert_ne!(h.hash_one(ReqKey::Scan(1)), h.hash_one(ReqKey::Dict(1)));
        let mut m: HashMap<ReqKey, u64, _> = HashMap::with_hasher(h);
        for i in 0..10_000u64 {
            m.insert(ReqKey::Txn(i), i);
            m.insert(ReqKey::Scan(i as u32), i + 1);
        }
        for i in 0..10_000u64 {
            assert_eq!(m.remove(&ReqKey::Txn(i)), Some(i));
            assert_eq!(m.get(&ReqKey::Scan(i as u32)), Some(&(i + 1)));
        }
        assert_eq!(m.len(), 10_000);
    }
}
