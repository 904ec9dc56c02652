//! The same API for synchronous code. A [`Client`] owns a small tokio runtime
//! (one worker thread) that runs the connection's IO; every call blocks the
//! calling thread until the reply arrives. Handles are `Send + Sync`: several
//! threads may share one client (each with its own transactions).
//!
//! Do not call these from inside an async runtime (tokio panics on nested
//! `block_on`); use the async [`crate::Client`] there.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let knobs = norr_knobs::Knobs::default();
//! # let node = norr_runtime::start_data_node_with(
//! #     norr_runtime::DataNodeConfig { node_id: 1, listen: "127.0.0.1:0".parse()?, knobs: knobs.clone(), cluster: None },
//! #     Default::default(),
//! #     norr_txn::build_data_node(1, &knobs),
//! # )?;
//! # let addr = node.local_addr();
//! use norr_client::blocking::Client;
//! use norr_client::{table_def, ColumnDef, ColumnType, ExecType, KeyOp, Value};
//! let client = Client::connect(addr)?; // e.g. "127.0.0.1:2202"
//! let t = client.create_table(table_def(
//!     "kv",
//!     vec![
//!         ColumnDef::new("k", ColumnType::Int { unsigned: false }).not_null(),
//!         ColumnDef::new("v", ColumnType::Varchar { len: 20, collation: Default::default() }),
//!     ],
//!     vec![0],
//! ))?;
//! let mut txn = client.begin();
//! txn.execute(vec![KeyOp::write(t.id, vec![Value::Int(7)], vec![(1, Value::str("seven"))])], ExecType::NoCommit)?;
//! txn.commit()?;
//! assert_eq!(client.read(t.id, vec![Value::Int(7)])?, Some(vec![Value::Int(7), Value::str("seven")]));
//! # Ok(()) }
//! ```

use crate::{ClientError, CommitInfo, ConnectOptions, DataNodeAddr, DataNodeStatus, Dist};
use norr_signals::{ExecType, IndexDef, KeyOp, NodeStats, OpResult, ScanSpec, TableDef, TableId, Value};
use std::sync::Arc;
use std::time::Duration;

/// Blocking client: see the module docs.
#[derive(Clone, Debug)]
pub struct Client {
    inner: crate::Client,
    rt: Arc<tokio::runtime::Runtime>,
}

impl Client {
    pub fn connect(addr: impl tokio::net::ToSocketAddrs) -> Result<Client, ClientError> {
        Self::connect_with(addr, ConnectOptions::default())
    }

    pub fn connect_with(addr: impl tokio::net::ToSocketAddrs, opts: ConnectOptions) -> Result<Client, ClientError> {
        let rt = runtime()?;
        // Spawn the IO tasks on the runtime's worker, not on the caller's thread.
        let inner = rt.block_on(async {
            let addrs = addr_owned(addr).await?;
            let mut last = ClientError::NotConnected("the address resolved to nothing".to_string());
            for a in addrs {
                let opts = opts.clone();
                match tokio::spawn(crate::Client::connect_with(a, opts)).await {
                    Ok(Ok(c)) => return Ok(c),
                    Ok(Err(e)) => last = e,
                    Err(e) => last = ClientError::Protocol(format!("connect task failed: {e}")),
                }
            }
            Err(last)
        })?;
        Ok(Client { inner, rt: Arc::new(rt) })
    }

    /// See [`crate::Client::connect_unix`].
    pub fn connect_unix(path: impl AsRef<std::path::Path>, opts: ConnectOptions) -> Result<Client, ClientError> {
        let path = path.as_ref().to_path_buf();
        Self::spawn_connect(crate::Client::connect_unix(path, opts))
    }

    /// See [`crate::Client::connect_cluster`].
    pub fn connect_cluster(addrs: &[DataNodeAddr], opts: ConnectOptions) -> Result<Client, ClientError> {
        let addrs = addrs.to_vec();
        Self::spawn_connect(async move { crate::Client::connect_cluster(&addrs, opts).await })
    }

    /// See [`crate::Client::connect_mgm`].
    pub fn connect_mgm(mgm: &str, opts: ConnectOptions) -> Result<Client, ClientError> {
        let mgm = mgm.to_string();
        Self::spawn_connect(async move { crate::Client::connect_mgm(&mgm, opts).await })
    }

    /// Run a connect on a new runtime's worker (where the client's tasks
    /// then live).
    fn spawn_connect(
        f: impl std::future::Future<Output = Result<crate::Client, ClientError>> + Send + 'static,
    ) -> Result<Client, ClientError> {
        let rt = runtime()?;
        let inner = rt.block_on(async {
            match tokio::spawn(f).await {
                Ok(r) => r,
                Err(e) => Err(ClientError::Protocol(format!("connect task failed: {e}"))),
            }
        })?;
        Ok(Client { inner, rt: Arc::new(rt) })
    }

    /// See [`crate::Client::api_node`].
    pub fn api_node(&self) -> u16 {
        self.inner.api_node()
    }
    /// See [`crate::Client::data_node`].
    pub fn data_node(&self) -> u16 {
        self.inner.data_node()
    }
    /// See [`crate::Client::is_connected`].
    pub fn is_connected(&self) -> bool {
        self.inner.is_connected()
    }
    /// See [`crate::Client::data_node_status`].
    pub fn data_node_status(&self) -> Vec<DataNodeStatus> {
        self.inner.data_node_status()
    }
    /// See [`crate::Client::wait_connected`].
    pub fn wait_connected(&self, timeout: Duration) -> bool {
        self.run(self.inner.wait_connected(timeout))
    }
    /// See [`crate::Client::distribution`].
    pub fn distribution(&self) -> Option<Dist> {
        self.inner.distribution()
    }
    /// See [`crate::Client::refresh_distribution`].
    pub fn refresh_distribution(&self) -> Result<Dist, ClientError> {
        self.run(self.inner.refresh_distribution())
    }

    /// The async client underneath (shares the connection).
    pub fn as_async(&self) -> &crate::Client {
        &self.inner
    }

    fn run<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    pub fn create_table(&self, def: TableDef) -> Result<TableDef, ClientError> {
        self.run(self.inner.create_table(def))
    }
    pub fn drop_table(&self, name: &str) -> Result<(), ClientError> {
        self.run(self.inner.drop_table(name))
    }
    pub fn truncate_table(&self, name: &str) -> Result<(), ClientError> {
        self.run(self.inner.truncate_table(name))
    }
    pub fn create_index(&self, table: &str, index: IndexDef) -> Result<TableDef, ClientError> {
        self.run(self.inner.create_index(table, index))
    }
    pub fn drop_index(&self, table: &str, index: &str) -> Result<TableDef, ClientError> {
        self.run(self.inner.drop_index(table, index))
    }
    pub fn get_table(&self, name: &str) -> Result<TableDef, ClientError> {
        self.run(self.inner.get_table(name))
    }
    pub fn list_tables(&self) -> Result<Vec<TableDef>, ClientError> {
        self.run(self.inner.list_tables())
    }
    pub fn next_auto_inc(&self, table: TableId, count: u64) -> Result<u64, ClientError> {
        self.run(self.inner.next_auto_inc(table, count))
    }
    pub fn bump_auto_inc(&self, table: TableId, used: u64) -> Result<(), ClientError> {
        self.run(self.inner.bump_auto_inc(table, used))
    }
    pub fn node_stats(&self) -> Result<NodeStats, ClientError> {
        self.run(self.inner.node_stats())
    }
    pub fn read(&self, table: TableId, key: Vec<Value>) -> Result<Option<Vec<Value>>, ClientError> {
        self.run(self.inner.read(table, key))
    }
    pub fn begin(&self) -> Transaction {
        Transaction { inner: Some(self.inner.begin()), rt: self.rt.clone() }
    }
    pub fn begin_hinted(&self, table: &TableDef, key: &[Value]) -> Transaction {
        Transaction { inner: Some(self.inner.begin_hinted(table, key)), rt: self.rt.clone() }
    }
    pub fn begin_on_partition(&self, part: crate::PartitionId) -> Transaction {
        Transaction { inner: Some(self.inner.begin_on_partition(part)), rt: self.rt.clone() }
    }
    pub fn tc_instances(&self) -> u16 {
        self.inner.tc_instances()
    }
    pub fn scan(&self, spec: ScanSpec) -> Result<ScanStream, ClientError> {
        let s = self.run(self.inner.scan(spec))?;
        Ok(ScanStream { inner: Some(s), rt: self.rt.clone(), rows: Default::default() })
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, ClientError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("norr-client-io")
        .enable_all()
        .build()
        .map_err(|e| ClientError::NotConnected(format!("cannot start the client runtime: {e}")))
}

async fn addr_owned(addr: impl tokio::net::ToSocketAddrs) -> Result<Vec<std::net::SocketAddr>, ClientError> {
    let addrs: Vec<_> = tokio::net::lookup_host(addr)
        .await
        .map_err(|e| ClientError::NotConnected(format!("cannot resolve the address: {e}")))?
        .collect();
    Ok(addrs)
}

/// Blocking transaction; dropping an unfinished one rolls it back.
#[derive(Debug)]
pub struct Transaction {
    // Option so commit/rollback can move it out while Drop stays simple.
    inner: Option<crate::Transaction>,
    rt: Arc<tokio::runtime::Runtime>,
}

impl Transaction {
    fn txn(&mut self) -> &mut crate::Transaction {
        self.inner.as_mut().expect("transaction present until consumed")
    }
    pub fn execute(&mut self, ops: Vec<KeyOp>, exec: ExecType) -> Result<Vec<OpResult>, ClientError> {
        let rt = self.rt.clone();
        rt.block_on(self.txn().execute(ops, exec))
    }
    pub fn commit(mut self) -> Result<(), ClientError> {
        let t = self.inner.take().expect("transaction present until consumed");
        self.rt.block_on(t.commit())
    }
    /// See [`crate::Transaction::commit_with_info`].
    pub fn commit_with_info(mut self) -> Result<CommitInfo, ClientError> {
        let t = self.inner.take().expect("transaction present until consumed");
        self.rt.block_on(t.commit_with_info())
    }
    /// See [`crate::Transaction::set_lock_wait_timeout`].
    pub fn set_lock_wait_timeout(&mut self, timeout: Option<Duration>) {
        self.txn().set_lock_wait_timeout(timeout)
    }
    /// See [`crate::Transaction::commit_gci`].
    pub fn commit_gci(&self) -> Option<u64> {
        self.inner.as_ref().and_then(|t| t.commit_gci())
    }
    /// See [`crate::Transaction::id`].
    pub fn id(&self) -> u64 {
        self.inner.as_ref().expect("transaction present until consumed").id()
    }
    pub fn rollback(mut self) -> Result<(), ClientError> {
        let t = self.inner.take().expect("transaction present until consumed");
        self.rt.block_on(t.rollback())
    }
    /// See [`crate::Transaction::savepoint`].
    pub fn savepoint(&mut self) -> Result<crate::Savepoint, ClientError> {
        let rt = self.rt.clone();
        rt.block_on(self.txn().savepoint())
    }
    /// See [`crate::Transaction::rollback_to`].
    pub fn rollback_to(&mut self, sp: crate::Savepoint) -> Result<(), ClientError> {
        let rt = self.rt.clone();
        rt.block_on(self.txn().rollback_to(sp))
    }
    pub fn scan(&mut self, spec: ScanSpec) -> Result<ScanStream, ClientError> {
        let rt = self.rt.clone();
        let s = rt.block_on(self.txn().scan(spec))?;
        Ok(ScanStream { inner: Some(s), rt, rows: Default::default() })
    }
    pub fn is_finished(&self) -> bool {
        self.inner.as_ref().is_none_or(|t| t.is_finished())
    }
    pub fn coordinator(&self) -> Option<u16> {
        self.inner.as_ref().and_then(|t| t.coordinator())
    }
    /// See [`crate::Transaction::coordinator_node`].
    pub fn coordinator_node(&self) -> Option<u16> {
        self.inner.as_ref().and_then(|t| t.coordinator_node())
    }
}

/// Blocking scan; also an `Iterator` over rows.
#[derive(Debug)]
pub struct ScanStream {
    inner: Option<crate::ScanStream>,
    rt: Arc<tokio::runtime::Runtime>,
    /// Rows of the current batch not yet returned by the iterator.
    rows: std::collections::VecDeque<Vec<Value>>,
}

impl ScanStream {
    /// The next batch of rows (after any rows the iterator has buffered), or
    /// `None` when the scan is finished.
    pub fn next_batch(&mut self) -> Result<Option<Vec<Vec<Value>>>, ClientError> {
        if !self.rows.is_empty() {
            return Ok(Some(self.rows.drain(..).collect()));
        }
        match self.inner.as_mut() {
            Some(s) => self.rt.block_on(s.next_batch()),
            None => Ok(None),
        }
    }
    pub fn collect_all(mut self) -> Result<Vec<Vec<Value>>, ClientError> {
        let mut all: Vec<_> = self.rows.drain(..).collect();
        if let Some(s) = self.inner.take() {
            all.extend(self.rt.block_on(s.collect_all())?);
        }
        Ok(all)
    }
    pub fn close(mut self) -> Result<(), ClientError> {
        match self.inner.take() {
            Some(s) => self.rt.block_on(s.close()),
            None => Ok(()),
        }
    }
}

/// Rows one by one; an error ends the iteration.
impl Iterator for ScanStream {
    type Item = Result<Vec<Value>, ClientError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(r) = self.rows.pop_front() {
                return Some(Ok(r));
            }
            let s = self.inner.as_mut()?;
            match self.rt.block_on(s.next_batch()) {
                Ok(Some(b)) => self.rows.extend(b),
                Ok(None) => {
                    self.inner = None;
                    return None;
                }
                Err(e) => {
                    self.inner = None;
                    return Some(Err(e));
                }
            }
        }
    }
}
