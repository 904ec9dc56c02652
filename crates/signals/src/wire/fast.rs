//! Hand-written codec of the two messages every key-access batch costs: a
//! TC_KEYREQ (API -> TC) and its TC_KEYCONF answer. Both directions are here:
//! the data node decodes requests and encodes answers, the API side (the
//! native client in the SQL node) encodes requests and decodes answers. All
//! of it is exactly postcard's encoding of `WireMsg` (what the generic codec
//! reads and writes), so the wire format does not change: serde's generic
//! path visits every field and value through visitors (~1.4k instructions to
//! decode a one-row point select, ~0.8k to encode its answer, about 1k each
//! way on the client), these read and write the structs directly. Answers
//! with an error result (`OpResult::Err`) are left to the generic codec in
//! both directions: they are rare, and `NodeError` is not worth a copy.
//!
//! Rules, the same as postcard's (checked against it by the tests): integers
//! wider than a byte are LEB128 varints (u16 at most 3 bytes, u32 5, u64 and
//! lengths 10, u128 19; the last byte may carry only the bits left), signed
//! ones zigzag-encoded; `u8` is one raw byte; bool and Option tags are one
//! byte, 0 or 1; enum variants are u32 varints in declaration order; structs
//! are their fields in order; f32/f64 are little-endian. Every read is
//! bounds-checked: malformed input is an error, never a panic, and a claimed
//! length never reserves more than the bytes left could hold.

use super::WireError;
use crate::ops::{KeyAccess, KeyOp, LockMode, LockWait, OpKind, OpResult};
use crate::value::{Date, DateTime, Decimal, Value};
use crate::{Envelope, ExecType, Signal, TcKeyConf, TcKeyReq, TxnOutcome};
use norr_kernel::{BlockRef, Priority};

/// Variant indexes of `Signal::TcKeyReq` and `Signal::TcKeyConf` in
/// postcard's encoding (the first two variants).
const SIGNAL_TC_KEYREQ: u32 = 0;
const SIGNAL_TC_KEYCONF: u32 = 1;

/// What is wrong with a frame. A `&'static str` rather than `WireError`'s
/// String: every read returns a `Result`, and a word-sized error keeps them
/// in registers (the message is built once, in `try_decode`).
#[derive(Debug)]
struct Bad(&'static str);

type R<T> = Result<T, Bad>;

fn malformed(what: &'static str) -> Bad {
    Bad(what)
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn left(&self) -> usize {
        self.buf.len() - self.pos
    }

    #[inline(always)]
    fn byte(&mut self) -> R<u8> {
        let Some(&b) = self.buf.get(self.pos) else {
            return Err(malformed("unexpected end"));
        };
        self.pos += 1;
        Ok(b)
    }

    fn take(&mut self, n: usize) -> R<&'a [u8]> {
        if n > self.left() {
            return Err(malformed("unexpected end"));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// A varint of at most `max_bytes` bytes whose last possible byte holds
    /// at most `last_max` (postcard's `varint_max` / `max_of_last_byte`).
    /// Most are one byte (small ids, lengths, variants): read those inline.
    #[inline(always)]
    fn varint(&mut self, max_bytes: usize, last_max: u8) -> R<u64> {
        if let Some(&b) = self.buf.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(b as u64);
            }
        }
        self.varint_long(max_bytes, last_max)
    }

    #[inline(never)]
    fn varint_long(&mut self, max_bytes: usize, last_max: u8) -> R<u64> {
        let mut out = 0u64;
        for i in 0..max_bytes {
            let b = self.byte()?;
            out |= ((b & 0x7f) as u64) << (7 * i);
            if b & 0x80 == 0 {
                if i == max_bytes - 1 && b > last_max {
                    break;
                }
                return Ok(out);
            }
        }
        Err(malformed("bad varint"))
    }

    #[inline(always)]
    fn u16(&mut self) -> R<u16> {
        Ok(self.varint(3, 0x03)? as u16)
    }

    #[inline(always)]
    fn u32(&mut self) -> R<u32> {
        Ok(self.varint(5, 0x0f)? as u32)
    }

    #[inline(always)]
    fn u64(&mut self) -> R<u64> {
        self.varint(10, 0x01)
    }

    fn i64(&mut self) -> R<i64> {
        let n = self.u64()?;
        Ok(((n >> 1) as i64) ^ -((n & 1) as i64))
    }

    fn i128(&mut self) -> R<i128> {
        let (max_bytes, last_max) = (19, 0x03);
        let mut n = 0u128;
        for i in 0..max_bytes {
            let b = self.byte()?;
            n |= ((b & 0x7f) as u128) << (7 * i);
            if b & 0x80 == 0 {
                if i == max_bytes - 1 && b > last_max {
                    break;
                }
                return Ok(((n >> 1) as i128) ^ -((n & 1) as i128));
            }
        }
        Err(malformed("bad varint"))
    }

    #[inline(always)]
    fn bool(&mut self) -> R<bool> {
        match self.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(malformed("bad bool")),
        }
    }

    /// A sequence length, with the capacity to reserve for it: at most one
    /// element per byte left (every element takes at least one byte).
    #[inline(always)]
    fn len(&mut self) -> R<(usize, usize)> {
        let n = self.u64()?;
        let n = usize::try_from(n).map_err(|_| malformed("length overflows usize"))?;
        Ok((n, n.min(self.left())))
    }

    fn block_ref(&mut self) -> R<BlockRef> {
        Ok(BlockRef { node: self.u16()?, block: self.u16()?, instance: self.u16()? })
    }

    fn date(&mut self) -> R<Date> {
        Ok(Date { year: self.u16()?, month: self.byte()?, day: self.byte()? })
    }

    fn value(&mut self) -> R<Value> {
        Ok(match self.u32()? {
            0 => Value::Null,
            1 => Value::Int(self.i64()?),
            2 => Value::UInt(self.u64()?),
            3 => Value::Float(f32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes"))),
            4 => Value::Double(f64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes"))),
            5 => Value::Decimal(Decimal { mantissa: self.i128()?, scale: self.byte()? }),
            6 => {
                let (n, _) = self.len()?;
                Value::Bytes(self.take(n)?.to_vec())
            }
            7 => Value::Date(self.date()?),
            8 => Value::Time(self.i64()?),
            9 => Value::DateTime(DateTime {
                date: self.date()?,
                hour: self.byte()?,
                minute: self.byte()?,
                second: self.byte()?,
                micro: self.u32()?,
            }),
            _ => return Err(malformed("bad Value variant")),
        })
    }

    /// A length-prefixed sequence (postcard's `Vec`).
    #[inline(always)]
    fn list<T>(&mut self, mut item: impl FnMut(&mut Self) -> R<T>) -> R<Vec<T>> {
        let (n, cap) = self.len()?;
        let mut v = Vec::with_capacity(cap);
        for _ in 0..n {
            v.push(item(self)?);
        }
        Ok(v)
    }

    fn values(&mut self) -> R<Vec<Value>> {
        self.list(Self::value)
    }

    fn column_values(&mut self) -> R<Vec<(u16, Value)>> {
        self.list(|r| Ok((r.u16()?, r.value()?)))
    }

    fn key_op(&mut self) -> R<KeyOp> {
        let table = self.u32()?;
        let table_version = self.u32()?;
        let kind = match self.u32()? {
            0 => OpKind::Read,
            1 => OpKind::Insert,
            2 => OpKind::Update,
            3 => OpKind::Write,
            4 => OpKind::Delete,
            _ => return Err(malformed("bad OpKind")),
        };
        let lock = match self.u32()? {
            0 => LockMode::CommittedRead,
            1 => LockMode::Shared,
            2 => LockMode::Exclusive,
            _ => return Err(malformed("bad LockMode")),
        };
        let wait = match self.u32()? {
            0 => LockWait::Wait,
            1 => LockWait::NoWait,
            2 => LockWait::SkipLocked,
            3 => LockWait::WaitMs(self.u32()?),
            _ => return Err(malformed("bad LockWait")),
        };
        let key = match self.u32()? {
            0 => KeyAccess::Primary(self.values()?),
            1 => KeyAccess::Unique { index: self.u32()?, values: self.values()? },
            _ => return Err(malformed("bad KeyAccess")),
        };
        let partition = match self.byte()? {
            0 => None,
            1 => Some(self.u32()?),
            _ => return Err(malformed("bad Option")),
        };
        let values = self.column_values()?;
        let increments = self.column_values()?;
        let projection = self.list(Self::u16)?;
        let abort_on_error = self.bool()?;
        Ok(KeyOp {
            table,
            table_version,
            kind,
            lock,
            wait,
            key,
            partition,
            values,
            increments,
            projection,
            abort_on_error,
        })
    }

    fn tc_key_req(&mut self) -> R<TcKeyReq> {
        let txn = self.u64()?;
        let exec = match self.u32()? {
            0 => ExecType::NoCommit,
            1 => ExecType::Commit,
            2 => ExecType::Rollback,
            3 => ExecType::CommitDisk,
            _ => return Err(malformed("bad ExecType")),
        };
        let ops = self.list(Self::key_op)?;
        Ok(TcKeyReq { txn, exec, ops })
    }

    /// `Ok(None)` if a result is an error: the generic decoder reads those.
    fn tc_key_conf(&mut self) -> R<Option<TcKeyConf>> {
        let txn = self.u64()?;
        let outcome = match self.u32()? {
            0 => TxnOutcome::Open,
            1 => TxnOutcome::Committed,
            2 => TxnOutcome::RolledBack,
            3 => TxnOutcome::CommittedNotOnDisk,
            _ => return Err(malformed("bad TxnOutcome")),
        };
        let (n, cap) = self.len()?;
        let mut results = Vec::with_capacity(cap);
        for _ in 0..n {
            match self.u32()? {
                0 => {}
                1 => return Ok(None),
                _ => return Err(malformed("bad OpResult")),
            }
            let row = match self.byte()? {
                0 => None,
                1 => Some(self.values()?),
                _ => return Err(malformed("bad Option")),
            };
            results.push(OpResult::Ok(row));
        }
        let gci = self.u64()?;
        Ok(Some(TcKeyConf { txn, outcome, results, gci }))
    }
}

/// Decode `bytes` if it is a TC_KEYREQ, or a TC_KEYCONF without error
/// results: Some(result). None for any other message (or one too short to
/// tell), which the generic decoder reads.
pub(super) fn try_decode(bytes: &[u8]) -> Option<Result<Envelope, WireError>> {
    let mut r = Reader { buf: bytes, pos: 0 };
    let (from, to, prio_a) = match (r.block_ref(), r.block_ref(), r.bool()) {
        (Ok(f), Ok(t), Ok(p)) => (f, t, p),
        _ => return None,
    };
    let signal = match r.u32().ok()? {
        SIGNAL_TC_KEYREQ => match r.tc_key_req() {
            Ok(req) => Signal::TcKeyReq(Box::new(req)),
            Err(Bad(what)) => return Some(Err(WireError::Malformed(format!("TC_KEYREQ: {what}")))),
        },
        SIGNAL_TC_KEYCONF => match r.tc_key_conf() {
            Ok(Some(conf)) => Signal::TcKeyConf(Box::new(conf)),
            Ok(None) => return None,
            Err(Bad(what)) => return Some(Err(WireError::Malformed(format!("TC_KEYCONF: {what}")))),
        },
        _ => return None,
    };
    if r.left() > 0 {
        return Some(Err(WireError::Malformed(format!("{} trailing bytes", r.left()))));
    }
    let prio = if prio_a { Priority::A } else { Priority::B };
    Some(Ok(Envelope { from, to, prio, signal }))
}

#[inline(always)]
fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    if v < 0x80 {
        out.push(v as u8);
        return;
    }
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_i64(out: &mut Vec<u8>, v: i64) {
    put_varint(out, ((v << 1) ^ (v >> 63)) as u64);
}

fn put_i128(out: &mut Vec<u8>, v: i128) {
    let mut z = ((v << 1) ^ (v >> 127)) as u128;
    while z >= 0x80 {
        out.push(z as u8 | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn put_block_ref(out: &mut Vec<u8>, b: BlockRef) {
    put_varint(out, b.node as u64);
    put_varint(out, b.block as u64);
    put_varint(out, b.instance as u64);
}

fn put_date(out: &mut Vec<u8>, d: &Date) {
    put_varint(out, d.year as u64);
    out.extend_from_slice(&[d.month, d.day]);
}

fn put_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.push(0),
        Value::Int(i) => {
            out.push(1);
            put_i64(out, *i);
        }
        Value::UInt(u) => {
            out.push(2);
            put_varint(out, *u);
        }
        Value::Float(f) => {
            out.push(3);
            out.extend_from_slice(&f.to_le_bytes());
        }
        Value::Double(f) => {
            out.push(4);
            out.extend_from_slice(&f.to_le_bytes());
        }
        Value::Decimal(d) => {
            out.push(5);
            put_i128(out, d.mantissa);
            out.push(d.scale);
        }
        Value::Bytes(b) => {
            out.push(6);
            put_varint(out, b.len() as u64);
            out.extend_from_slice(b);
        }
        Value::Date(d) => {
            out.push(7);
            put_date(out, d);
        }
        Value::Time(t) => {
            out.push(8);
            put_i64(out, *t);
        }
        Value::DateTime(dt) => {
            out.push(9);
            put_date(out, &dt.date);
            out.extend_from_slice(&[dt.hour, dt.minute, dt.second]);
            put_varint(out, dt.micro as u64);
        }
    }
}

fn put_values(out: &mut Vec<u8>, values: &[Value]) {
    put_varint(out, values.len() as u64);
    for v in values {
        put_value(out, v);
    }
}

fn put_column_values(out: &mut Vec<u8>, values: &[(u16, Value)]) {
    put_varint(out, values.len() as u64);
    for (column, v) in values {
        put_varint(out, *column as u64);
        put_value(out, v);
    }
}

fn put_key_op(out: &mut Vec<u8>, op: &KeyOp) {
    put_varint(out, op.table as u64);
    put_varint(out, op.table_version as u64);
    out.push(match op.kind {
        OpKind::Read => 0,
        OpKind::Insert => 1,
        OpKind::Update => 2,
        OpKind::Write => 3,
        OpKind::Delete => 4,
    });
    out.push(match op.lock {
        LockMode::CommittedRead => 0,
        LockMode::Shared => 1,
        LockMode::Exclusive => 2,
    });
    match op.wait {
        LockWait::Wait => out.push(0),
        LockWait::NoWait => out.push(1),
        LockWait::SkipLocked => out.push(2),
        LockWait::WaitMs(ms) => {
            out.push(3);
            put_varint(out, ms as u64);
        }
    }
    match &op.key {
        KeyAccess::Primary(values) => {
            out.push(0);
            put_values(out, values);
        }
        KeyAccess::Unique { index, values } => {
            out.push(1);
            put_varint(out, *index as u64);
            put_values(out, values);
        }
    }
    match op.partition {
        None => out.push(0),
        Some(p) => {
            out.push(1);
            put_varint(out, p as u64);
        }
    }
    put_column_values(out, &op.values);
    put_column_values(out, &op.increments);
    put_varint(out, op.projection.len() as u64);
    for &column in &op.projection {
        put_varint(out, column as u64);
    }
    out.push(op.abort_on_error as u8);
}

/// `WireMsg`'s fields before the signal's own: sender, receiver, priority
/// and the signal's variant index.
fn put_header(out: &mut Vec<u8>, env: &Envelope, variant: u32) {
    put_block_ref(out, env.from);
    put_block_ref(out, env.to);
    out.push((env.prio == Priority::A) as u8);
    put_varint(out, variant as u64);
}

/// Append the encoding of `env` and return true if it is a TC_KEYREQ, or a
/// TC_KEYCONF whose results are all rows or write acknowledgements (the
/// reply to every successful batch); otherwise write nothing and return
/// false, for the generic encoder (e.g. results carrying a `NodeError`).
pub(super) fn try_encode(env: &Envelope, out: &mut Vec<u8>) -> bool {
    match &env.signal {
        Signal::TcKeyReq(req) => {
            put_header(out, env, SIGNAL_TC_KEYREQ);
            put_varint(out, req.txn);
            out.push(match req.exec {
                ExecType::NoCommit => 0,
                ExecType::Commit => 1,
                ExecType::Rollback => 2,
                ExecType::CommitDisk => 3,
            });
            put_varint(out, req.ops.len() as u64);
            for op in &req.ops {
                put_key_op(out, op);
            }
            true
        }
        Signal::TcKeyConf(c) => {
            if c.results.iter().any(|r| matches!(r, OpResult::Err(_))) {
                return false;
            }
            put_header(out, env, SIGNAL_TC_KEYCONF);
            put_varint(out, c.txn);
            out.push(match c.outcome {
                TxnOutcome::Open => 0,
                TxnOutcome::Committed => 1,
                TxnOutcome::RolledBack => 2,
                TxnOutcome::CommittedNotOnDisk => 3,
            });
            put_varint(out, c.results.len() as u64);
            for r in &c.results {
                let OpResult::Ok(row) = r else { unreachable!("checked above") };
                out.push(0); // OpResult::Ok
                match row {
                    None => out.push(0),
                    Some(values) => {
                        out.push(1);
                        put_values(out, values);
                    }
                }
            }
            put_varint(out, c.gci);
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests;
