//! [`ScanStream`]: the rows of a scan, batch by batch.

use crate::conn::{Conn, Reply, ReqKey};
use crate::error::ClientError;
use crate::transaction::{send_rollback, TXN_ABORTED, TXN_NODE_FAILED, TXN_OPEN};
use norr_signals::{BlockRef, ErrorCode, NodeError, ScanNextReq, ScanSpec, ScanTabReq, Signal, Value, MAX_SCAN_RANGES};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

/// The rows of a scan, fetched batch by batch (`ScanSpec::batch_rows` rows per
/// round trip): call [`ScanStream::next_batch`], or use it as a
/// `futures_core::Stream` of rows. Dropping an unfinished stream closes the
/// scan in the background.
pub struct ScanStream {
    /// The connection to the node running the scan.
    conn: Arc<Conn>,
    /// The TC running the scan (the transaction's coordinator).
    tc: BlockRef,
    txn: u64,
    scan_id: u32,
    /// Rows received and not yet handed out.
    buffered: std::vec::IntoIter<Vec<Value>>,
    /// The node said the scan is finished (or it failed).
    done: bool,
    /// A fetch started by `poll_next` and not finished yet.
    inflight: Option<FetchFuture>,
    /// The owning transaction's state (None for a standalone scan).
    txn_state: Option<Arc<AtomicU8>>,
}

type FetchResult = Result<(Vec<Vec<Value>>, bool), ClientError>;
type FetchFuture = std::pin::Pin<Box<dyn std::future::Future<Output = FetchResult> + Send>>;

/// One scan round trip; owns its connection handle so it can live in the stream.
async fn fetch(conn: Arc<Conn>, tc: BlockRef, req: Signal, scan_id: u32) -> FetchResult {
    let s = &conn.shared;
    match s.request(ReqKey::Scan(scan_id), tc, req).await {
        Ok(Reply::Scan(Ok(conf))) => Ok((conf.rows, conf.done)),
        Ok(Reply::Scan(Err(e))) => Err(ClientError::Node(e)),
        Ok(other) => Err(ClientError::Protocol(format!("unexpected reply to SCAN_TABREQ: {other:?}"))),
        // The scan's TC is gone with its connection (and with it the scan,
        // and the transaction it belongs to).
        Err(ClientError::NotConnected(why)) => Err(ClientError::Node(NodeError::with(
            ErrorCode::NodeFailure,
            format!("the scan's coordinator on data node {} is gone ({why}): retry the transaction", s.data_node),
        ))),
        Err(e) => Err(e),
    }
}

/// Refuse a scan request the data node would refuse to decode (which
/// would cost the connection, and every request on it): a range list
/// longer than `MAX_SCAN_RANGES`.
pub(crate) fn check_spec(spec: &ScanSpec) -> Result<(), ClientError> {
    if spec.ranges.len() > MAX_SCAN_RANGES {
        return Err(ClientError::Protocol(format!(
            "a scan takes at most {MAX_SCAN_RANGES} ranges, not {}",
            spec.ranges.len()
        )));
    }
    Ok(())
}

impl std::fmt::Debug for ScanStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScanStream").field("scan_id", &self.scan_id).field("done", &self.done).finish()
    }
}

impl ScanStream {
    pub(crate) async fn open(
        conn: Arc<Conn>,
        tc: BlockRef,
        txn: u64,
        standalone: bool,
        spec: ScanSpec,
        txn_state: Option<Arc<AtomicU8>>,
    ) -> Result<ScanStream, ClientError> {
        let scan_id = conn.shared.alloc_scan();
        let req = Signal::ScanTabReq(Box::new(ScanTabReq { txn, scan_id, standalone, spec }));
        let mut st = ScanStream {
            conn: conn.clone(),
            tc,
            txn,
            scan_id,
            buffered: Vec::new().into_iter(),
            done: false,
            inflight: None,
            txn_state,
        };
        let r = fetch(conn, tc, req, scan_id).await;
        st.absorb(r)?;
        Ok(st)
    }

    fn next_req(&self, close: bool) -> Signal {
        Signal::ScanNextReq(ScanNextReq { txn: self.txn, scan_id: self.scan_id, close })
    }

    /// Take in the outcome of a round trip.
    fn absorb(&mut self, r: FetchResult) -> Result<(), ClientError> {
        match r {
            Ok((rows, done)) => {
                self.buffered = rows.into_iter();
                self.done = done;
                Ok(())
            }
            Err(err) => {
                // On SCAN_TABREF the node closed the scan and aborted the
                // transaction (except for a NOWAIT scan that met a locked
                // row: only the scan ends); on a lost reply, roll back to be
                // sure.
                self.done = true;
                let code = err.code();
                // A pushed aggregate the node would not compute (too many
                // groups, a sum past its range) only ends the scan too: the
                // caller reads the rows instead.
                let scan_only = matches!(
                    code,
                    Some(
                        ErrorCode::LockNoWait
                            | ErrorCode::BadAggregate
                            | ErrorCode::AggregateTooManyGroups
                            | ErrorCode::AggregateOverflow
                    )
                );
                if let Some(st) = self.txn_state.as_ref().filter(|_| !scan_only) {
                    let ended = if code == Some(ErrorCode::NodeFailure) { TXN_NODE_FAILED } else { TXN_ABORTED };
                    let prev = st.swap(ended, Ordering::AcqRel);
                    if prev == TXN_OPEN && !matches!(err, ClientError::Node(_)) {
                        send_rollback(&self.conn.shared, self.tc, self.txn);
                    }
                }
                Err(err)
            }
        }
    }

    /// The next batch of rows, or `None` when the scan is finished.
    pub async fn next_batch(&mut self) -> Result<Option<Vec<Vec<Value>>>, ClientError> {
        loop {
            if self.buffered.len() > 0 {
                // Reuses the batch's allocation (in-place collect).
                return Ok(Some(std::mem::take(&mut self.buffered).collect()));
            }
            let fut = match self.inflight.take() {
                Some(f) => f,
                None if self.done => return Ok(None),
                None => Box::pin(fetch(self.conn.clone(), self.tc, self.next_req(false), self.scan_id)),
            };
            let r = fut.await;
            self.absorb(r)?;
        }
    }

    /// Every remaining row.
    pub async fn collect_all(mut self) -> Result<Vec<Vec<Value>>, ClientError> {
        let mut all = Vec::new();
        while let Some(mut b) = self.next_batch().await? {
            all.append(&mut b);
        }
        Ok(all)
    }

    /// Close the scan early (waits for the node to confirm).
    pub async fn close(mut self) -> Result<(), ClientError> {
        if let Some(f) = self.inflight.take() {
            let r = f.await;
            self.absorb(r)?;
        }
        self.buffered = Vec::new().into_iter();
        if self.done {
            return Ok(());
        }
        let r = fetch(self.conn.clone(), self.tc, self.next_req(true), self.scan_id).await;
        self.absorb(r)?;
        self.done = true;
        Ok(())
    }
}

/// Rows one by one; an error is the last item.
impl futures_core::Stream for ScanStream {
    type Item = Result<Vec<Value>, ClientError>;

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        let this = self.get_mut();
        loop {
            if let Some(row) = this.buffered.next() {
                return Poll::Ready(Some(Ok(row)));
            }
            if this.inflight.is_none() {
                if this.done {
                    return Poll::Ready(None);
                }
                this.inflight = Some(Box::pin(fetch(this.conn.clone(), this.tc, this.next_req(false), this.scan_id)));
            }
            let fut = this.inflight.as_mut().expect("set above");
            let r = match fut.as_mut().poll(cx) {
                Poll::Ready(r) => r,
                Poll::Pending => return Poll::Pending,
            };
            this.inflight = None;
            if let Err(e) = this.absorb(r) {
                return Poll::Ready(Some(Err(e)));
            }
        }
    }
}

impl Drop for ScanStream {
    fn drop(&mut self) {
        if !self.done || self.inflight.is_some() {
            let s = &self.conn.shared;
            s.unregister(ReqKey::Scan(self.scan_id));
            let _ =
                s.send(self.tc, Signal::ScanNextReq(ScanNextReq { txn: self.txn, scan_id: self.scan_id, close: true }));
        }
    }
}
