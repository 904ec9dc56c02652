//! A fake data node that speaks the real framing and signals, with a tiny
//! in-memory store: enough to test the client's protocol handling (multiplexing,
//! routing, errors, disconnects) without the real TC/LQH blocks.
//!
//! Semantics (simplified): operations apply at once with an undo log per
//! transaction; a row written by an open transaction is locked, and another
//! transaction touching it gets LockWaitTimeout at once. A closed connection
//! rolls back its open transactions. Table named "blackhole": requests get no reply.
#![allow(dead_code, clippy::type_complexity)]

use norr_signals::coerce::coerce_row;
use norr_signals::filter_eval::eval_filter;
use norr_signals::*;
use norr_transport::handshake::{decode_hello, encode_reply, HelloReply};
use norr_transport::{encode_frame, encode_frame_with, FrameDecoder};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

type Key = Vec<u8>;

#[derive(Default)]
struct Table {
    def: Option<TableDef>,
    rows: BTreeMap<Key, Vec<Value>>,
}

#[derive(Default)]
pub struct Store {
    tables: HashMap<TableId, Table>,
    next_table: TableId,
    /// row -> owning (conn, txn)
    locks: HashMap<(TableId, Key), (u64, u64)>,
    /// (conn, txn) -> undo entries (table, key, old row)
    undo: HashMap<(u64, u64), Vec<(TableId, Key, Option<Vec<Value>>)>>,
    committed: u64,
    aborted: u64,
    /// (conn, scan id) -> remaining rows
    scans: HashMap<(u64, u32), (Vec<Vec<Value>>, usize)>,
}

pub struct FakeNode {
    pub addr: SocketAddr,
    store: Arc<Mutex<Store>>,
}

impl Store {
    pub fn new() -> Store {
        Store { next_table: 1, ..Default::default() }
    }

    /// Roll back every open transaction and scan of connection `conn` (the
    /// node's API failure handling).
    pub fn drop_conn(&mut self, conn: u64) {
        let txns: Vec<_> = self.undo.keys().filter(|(c, _)| *c == conn).copied().collect();
        for t in txns {
            rollback(self, t);
        }
        self.scans.retain(|(c, _), _| *c != conn);
    }

    pub fn rows(&self, table: TableId) -> usize {
        self.tables.get(&table).map_or(0, |t| t.rows.len())
    }
}

impl FakeNode {
    pub async fn start() -> FakeNode {
        FakeNode::start_with_read_pause(None).await
    }

    /// A node that sleeps `pause` before every socket read once greeted: a
    /// slow reader, so the client's socket buffer fills and its writes are
    /// partial.
    pub async fn start_with_read_pause(pause: Option<std::time::Duration>) -> FakeNode {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let store = Arc::new(Mutex::new(Store::new()));
        let st = store.clone();
        tokio::spawn(async move {
            let mut conn_id = 0u64;
            loop {
                let Ok((s, _)) = l.accept().await else { return };
                conn_id += 1;
                tokio::spawn(serve(s, st.clone(), conn_id, pause));
            }
        });
        FakeNode { addr, store }
    }

    pub fn open_locks(&self) -> usize {
        self.store.lock().unwrap().locks.len()
    }
}

fn key_of(def: &TableDef, key: &[Value]) -> Result<Key, NodeError> {
    if key.len() != def.primary_key.len() || key.iter().any(|v| v.is_null()) {
        return Err(NodeError::new(ErrorCode::MissingKeyColumn));
    }
    Ok(postcard::to_stdvec(key).unwrap())
}

async fn serve(mut s: TcpStream, store: Arc<Mutex<Store>>, conn: u64, pause: Option<std::time::Duration>) {
    s.set_nodelay(true).unwrap();
    let mut dec = FrameDecoder::new(64 << 20);
    let mut buf = vec![0u8; 65536];
    let mut greeted = false;
    'outer: loop {
        if let (Some(p), true) = (pause, greeted) {
            tokio::time::sleep(p).await;
        }
        let n = match s.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        dec.push(&buf[..n]);
        let mut out = Vec::new();
        loop {
            let f = match dec.next_frame() {
                Ok(Some(f)) => f.to_vec(),
                Ok(None) => break,
                Err(_) => break 'outer,
            };
            if !greeted {
                decode_hello(&f).unwrap();
                let r = HelloReply::Welcome {
                    api_node: 100 + conn as u16,
                    data_node: 1,
                    wire_version: wire::WIRE_VERSION,
                    tc_instances: 1,
                };
                encode_frame(&encode_reply(&r), &mut out);
                greeted = true;
                continue;
            }
            let env = match wire::decode(&f) {
                Ok(e) => e,
                Err(_) => break 'outer,
            };
            let reply = handle(&store, conn, env.signal);
            if let Some(sig) = reply {
                let e = Envelope { from: env.to, to: env.from, prio: Priority::B, signal: sig };
                encode_frame_with(&mut out, |o| wire::encode_into(&e, o));
            }
        }
        if !out.is_empty() && s.write_all(&out).await.is_err() {
            break;
        }
    }
    // API failure: roll back every open transaction of this connection.
    store.lock().unwrap().drop_conn(conn);
}

fn rollback(st: &mut Store, t: (u64, u64)) {
    if let Some(undo) = st.undo.remove(&t) {
        for (tab, key, old) in undo.into_iter().rev() {
            let table = st.tables.get_mut(&tab).unwrap();
            match old {
                Some(r) => {
                    table.rows.insert(key.clone(), r);
                }
                None => {
                    table.rows.remove(&key);
                }
            }
        }
        st.aborted += 1;
    }
    st.locks.retain(|_, owner| *owner != t);
}

fn commit(st: &mut Store, t: (u64, u64)) {
    st.undo.remove(&t);
    st.locks.retain(|_, owner| *owner != t);
    st.committed += 1;
}

/// The reply to one request of connection `conn`, if any.
pub fn handle(store: &Mutex<Store>, conn: u64, sig: Signal) -> Option<Signal> {
    let mut st = store.lock().unwrap();
    match sig {
        Signal::DictReq(r) => {
            let res = dict(&mut st, r.op);
            Some(match res {
                Ok(result) => Signal::DictConf(Box::new(DictConf { req_id: r.req_id, result })),
                Err(error) => Signal::DictRef(Box::new(DictRef { req_id: r.req_id, error })),
            })
        }
        Signal::TcKeyReq(r) => {
            let t = (conn, r.txn);
            if r.ops
                .iter()
                .any(|op| st.tables.get(&op.table).and_then(|t| t.def.as_ref()).is_some_and(|d| d.name == "blackhole"))
            {
                return None;
            }
            let mut results = Vec::new();
            for (i, op) in r.ops.iter().enumerate() {
                match key_op(&mut st, t, op) {
                    Ok(row) => results.push(OpResult::Ok(row)),
                    Err(e) if !op.abort_on_error => results.push(OpResult::Err(e)),
                    Err(error) => {
                        rollback(&mut st, t);
                        return Some(Signal::TcKeyRef(Box::new(TcKeyRef {
                            txn: r.txn,
                            error,
                            op_index: Some(i as u32),
                        })));
                    }
                }
            }
            st.undo.entry(t).or_default();
            let outcome = match r.exec {
                ExecType::NoCommit => TxnOutcome::Open,
                ExecType::Commit => {
                    commit(&mut st, t);
                    TxnOutcome::Committed
                }
                ExecType::Rollback => {
                    rollback(&mut st, t);
                    TxnOutcome::RolledBack
                }
            };
            Some(Signal::TcKeyConf(Box::new(TcKeyConf { txn: r.txn, outcome, results, gci: 0 })))
        }
        Signal::ScanTabReq(r) => {
            let fail = |error| Some(Signal::ScanTabRef(Box::new(ScanTabRef { txn: r.txn, scan_id: r.scan_id, error })));
            let Some(table) = st.tables.get(&r.spec.table) else {
                return fail(NodeError::new(ErrorCode::NoSuchTable));
            };
            let def = table.def.clone().unwrap();
            let mut rows = Vec::new();
            for row in table.rows.values() {
                if let Some(f) = &r.spec.filter {
                    match eval_filter(f, row, &def) {
                        Ok(Some(true)) => {}
                        Ok(_) => continue,
                        Err(e) => return fail(e),
                    }
                }
                let row = if r.spec.projection.is_empty() {
                    row.clone()
                } else {
                    r.spec.projection.iter().map(|c| row[*c as usize].clone()).collect()
                };
                rows.push(row);
                if r.spec.limit.is_some_and(|l| rows.len() as u64 >= l) {
                    break;
                }
            }
            st.scans.insert((conn, r.scan_id), (rows, r.spec.batch_rows.max(1) as usize));
            Some(next_batch(&mut st, conn, r.txn, r.scan_id, false))
        }
        Signal::ScanNextReq(r) => {
            if !st.scans.contains_key(&(conn, r.scan_id)) {
                return Some(Signal::ScanTabRef(Box::new(ScanTabRef {
                    txn: r.txn,
                    scan_id: r.scan_id,
                    error: NodeError::new(ErrorCode::NoSuchScan),
                })));
            }
            Some(next_batch(&mut st, conn, r.txn, r.scan_id, r.close))
        }
        _ => None,
    }
}

fn next_batch(st: &mut Store, conn: u64, txn: u64, scan_id: u32, close: bool) -> Signal {
    let (rows, batch) = st.scans.get_mut(&(conn, scan_id)).unwrap();
    let take = if close { 0 } else { (*batch).min(rows.len()) };
    let out: Vec<_> = rows.drain(..take).collect();
    let done = close || rows.is_empty();
    if done {
        st.scans.remove(&(conn, scan_id));
    }
    Signal::ScanTabConf(Box::new(ScanTabConf { txn, scan_id, rows: out, done }))
}

fn key_op(st: &mut Store, t: (u64, u64), op: &KeyOp) -> Result<Option<Vec<Value>>, NodeError> {
    let Some(table) = st.tables.get(&op.table) else {
        return Err(NodeError::new(ErrorCode::NoSuchTable));
    };
    let def = table.def.clone().unwrap();
    let KeyAccess::Primary(key_vals) = &op.key else {
        return Err(NodeError::new(ErrorCode::NoSuchIndex));
    };
    let key = key_of(&def, key_vals)?;
    let lk = (op.table, key.clone());
    let locking = op.kind.is_write() || op.lock != LockMode::CommittedRead;
    if let Some(owner) = st.locks.get(&lk) {
        if *owner != t && locking {
            return Err(NodeError::new(ErrorCode::LockWaitTimeout));
        }
    }
    let table = st.tables.get_mut(&op.table).unwrap();
    let old = table.rows.get(&key).cloned();
    let new = match op.kind {
        OpKind::Read => {
            let row = old.ok_or_else(|| NodeError::new(ErrorCode::NoSuchRow))?;
            if locking {
                st.locks.insert(lk, t);
            }
            let row = if op.projection.is_empty() {
                row
            } else {
                op.projection.iter().map(|c| row[*c as usize].clone()).collect()
            };
            return Ok(Some(row));
        }
        OpKind::Insert | OpKind::Write if old.is_none() || op.kind == OpKind::Insert => {
            if old.is_some() {
                return Err(NodeError::new(ErrorCode::DuplicateKey));
            }
            let mut vals: Vec<(ColumnId, Value)> =
                def.primary_key.iter().zip(key_vals.iter()).map(|(c, v)| (*c, v.clone())).collect();
            vals.extend(op.values.iter().cloned());
            Some(coerce_row(&def, &vals)?)
        }
        OpKind::Update | OpKind::Write => {
            let mut row = old.clone().ok_or_else(|| NodeError::new(ErrorCode::NoSuchRow))?;
            for (c, v) in &op.values {
                let col = def.column(*c).ok_or_else(|| NodeError::new(ErrorCode::NoSuchColumn))?;
                row[*c as usize] = norr_signals::coerce::coerce_value(v.clone(), &col.ty, col.nullable)?;
            }
            for (c, d) in &op.increments {
                if let (Value::Int(a), Value::Int(b)) = (&row[*c as usize], d) {
                    row[*c as usize] = Value::Int(a + b);
                }
            }
            Some(row)
        }
        OpKind::Delete => {
            old.as_ref().ok_or_else(|| NodeError::new(ErrorCode::NoSuchRow))?;
            None
        }
        OpKind::Insert => unreachable!(),
    };
    match &new {
        Some(r) => table.rows.insert(key.clone(), r.clone()),
        None => table.rows.remove(&key),
    };
    st.undo.entry(t).or_default().push((op.table, key, old));
    st.locks.insert(lk, t);
    Ok(None)
}

fn dict(st: &mut Store, op: DictOp) -> Result<DictResult, NodeError> {
    let find = |st: &Store, name: &str| {
        st.tables.iter().find(|(_, t)| t.def.as_ref().unwrap().name == name).map(|(id, _)| *id)
    };
    match op {
        DictOp::CreateTable(mut def) => {
            if find(st, &def.name).is_some() {
                return Err(NodeError::new(ErrorCode::TableExists));
            }
            def.id = st.next_table;
            def.version = 1;
            if def.partitions == 0 {
                // What a data node decides (the client hashes keys with it).
                def.partitions = 8;
            }
            st.next_table += 1;
            st.tables.insert(def.id, Table { def: Some(def.clone()), rows: BTreeMap::new() });
            Ok(DictResult::Table(def))
        }
        DictOp::DropTable { name } => {
            let id = find(st, &name).ok_or_else(|| NodeError::new(ErrorCode::NoSuchTable))?;
            st.tables.remove(&id);
            Ok(DictResult::Done)
        }
        DictOp::TruncateTable { name } => {
            let id = find(st, &name).ok_or_else(|| NodeError::new(ErrorCode::NoSuchTable))?;
            st.tables.get_mut(&id).unwrap().rows.clear();
            Ok(DictResult::Done)
        }
        DictOp::GetTable { name } => {
            let id = find(st, &name).ok_or_else(|| NodeError::new(ErrorCode::NoSuchTable))?;
            Ok(DictResult::Table(st.tables[&id].def.clone().unwrap()))
        }
        DictOp::ListTables => Ok(DictResult::Tables(st.tables.values().map(|t| t.def.clone().unwrap()).collect())),
        DictOp::NodeStats => {
            let rows: u64 = st.tables.values().map(|t| t.rows.len() as u64).sum();
            Ok(DictResult::Stats(NodeStats {
                data_memory_limit_bytes: 1 << 30,
                data_memory_used_bytes: rows * 100,
                rows,
                tables: st.tables.len() as u32,
                open_transactions: st.undo.len() as u32,
                committed_transactions: st.committed,
                aborted_transactions: st.aborted,
            }))
        }
        DictOp::NextAutoInc { .. } => Ok(DictResult::AutoInc { first: 1 }),
        _ => Err(NodeError::with(ErrorCode::Internal, "not in the fake node")),
    }
}
