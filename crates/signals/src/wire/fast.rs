//! Hand-written codec of the two messages a data node handles once per
//! client batch: it decodes TC_KEYREQ and encodes TC_KEYCONF. Both use
//! exactly postcard's encoding of `WireMsg` (what the generic codec reads
//! and writes), so the wire format does not change: serde's generic path
//! visits every field and value through visitors (~1.4k instructions to
//! decode a one-row point select, ~0.8k to encode its answer), these read
//! and write the structs directly.
//!
//! Rules, the same as postcard's (checked against it by the tests below):
//! integers wider than a byte are LEB128 varints (u16 at most 3 bytes, u32 5,
//! u64 and lengths 10, u128 19; the last byte may carry only the bits left),
//! signed ones zigzag-encoded; `u8` is one raw byte; bool and Option tags
//! are one byte, 0 or 1; enum variants are u32 varints in declaration order;
//! structs are their fields in order; f32/f64 are little-endian. Every read
//! is bounds-checked: malformed input is an error, never a panic, and a
//! claimed length never reserves more than the bytes left could hold.

use super::WireError;
use crate::ops::{KeyAccess, KeyOp, LockMode, OpKind, OpResult};
use crate::value::{Date, DateTime, Decimal, Value};
use crate::{Envelope, ExecType, Signal, TcKeyReq, TxnOutcome};
use norr_kernel::{BlockRef, Priority};

/// Variant index of `Signal::TcKeyReq` in postcard's encoding (the first variant).
const SIGNAL_TC_KEYREQ: u32 = 0;

/// What is wrong with a frame. A `&'static str` rather than `WireError`'s
/// String: every read returns a `Result`, and a word-sized error keeps them
/// in registers (the message is built once, in `decode_tc_key_req`).
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

    fn values(&mut self) -> R<Vec<Value>> {
        let (n, cap) = self.len()?;
        let mut v = Vec::with_capacity(cap);
        for _ in 0..n {
            v.push(self.value()?);
        }
        Ok(v)
    }

    fn column_values(&mut self) -> R<Vec<(u16, Value)>> {
        let (n, cap) = self.len()?;
        let mut v = Vec::with_capacity(cap);
        for _ in 0..n {
            v.push((self.u16()?, self.value()?));
        }
        Ok(v)
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
        let (n, cap) = self.len()?;
        let mut projection = Vec::with_capacity(cap);
        for _ in 0..n {
            projection.push(self.u16()?);
        }
        let abort_on_error = self.bool()?;
        Ok(KeyOp { table, table_version, kind, lock, key, partition, values, increments, projection, abort_on_error })
    }

    fn tc_key_req(&mut self) -> R<TcKeyReq> {
        let txn = self.u64()?;
        let exec = match self.u32()? {
            0 => ExecType::NoCommit,
            1 => ExecType::Commit,
            2 => ExecType::Rollback,
            _ => return Err(malformed("bad ExecType")),
        };
        let (n, cap) = self.len()?;
        let mut ops = Vec::with_capacity(cap);
        for _ in 0..n {
            ops.push(self.key_op()?);
        }
        Ok(TcKeyReq { txn, exec, ops })
    }
}

/// Decode `bytes` if it is a TC_KEYREQ message: Some(result), None if it is
/// another signal (or too short to tell), for the generic decoder.
pub(super) fn decode_tc_key_req(bytes: &[u8]) -> Option<Result<Envelope, WireError>> {
    let mut r = Reader { buf: bytes, pos: 0 };
    let (from, to, prio_a) = match (r.block_ref(), r.block_ref(), r.bool()) {
        (Ok(f), Ok(t), Ok(p)) => (f, t, p),
        _ => return None,
    };
    if r.u32().ok()? != SIGNAL_TC_KEYREQ {
        return None;
    }
    let req = match r.tc_key_req() {
        Ok(req) => req,
        Err(Bad(what)) => return Some(Err(WireError::Malformed(format!("TC_KEYREQ: {what}")))),
    };
    if r.left() > 0 {
        return Some(Err(WireError::Malformed(format!("{} trailing bytes", r.left()))));
    }
    let prio = if prio_a { Priority::A } else { Priority::B };
    Some(Ok(Envelope { from, to, prio, signal: Signal::TcKeyReq(Box::new(req)) }))
}

/// Variant index of `Signal::TcKeyConf` (the second variant).
const SIGNAL_TC_KEYCONF: u64 = 1;

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

/// Append the encoding of `env` if it is a TC_KEYCONF whose results are all
/// rows or write acknowledgements (the reply to every successful batch) and
/// return true; otherwise write nothing and return false (the generic
/// encoder handles it, e.g. results carrying a `NodeError`).
pub(super) fn encode_tc_key_conf(env: &Envelope, out: &mut Vec<u8>) -> bool {
    let Signal::TcKeyConf(c) = &env.signal else {
        return false;
    };
    if c.results.iter().any(|r| matches!(r, OpResult::Err(_))) {
        return false;
    }
    put_block_ref(out, env.from);
    put_block_ref(out, env.to);
    out.push((env.prio == Priority::A) as u8);
    put_varint(out, SIGNAL_TC_KEYCONF);
    put_varint(out, c.txn);
    out.push(match c.outcome {
        TxnOutcome::Open => 0,
        TxnOutcome::Committed => 1,
        TxnOutcome::RolledBack => 2,
    });
    put_varint(out, c.results.len() as u64);
    for r in &c.results {
        let OpResult::Ok(row) = r else { unreachable!("checked above") };
        out.push(0); // OpResult::Ok
        match row {
            None => out.push(0),
            Some(values) => {
                out.push(1);
                put_varint(out, values.len() as u64);
                for v in values {
                    put_value(out, v);
                }
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{decode_generic, encode};
    use crate::*;

    fn env(ops: Vec<KeyOp>, exec: ExecType) -> Envelope {
        Envelope {
            from: BlockRef::new(300, block::API, 0),
            to: BlockRef::new(1, block::TC, 3),
            prio: Priority::B,
            signal: Signal::TcKeyReq(Box::new(TcKeyReq { txn: u64::MAX - 5, exec, ops })),
        }
    }

    /// Every variant of everything a TC_KEYREQ carries, at awkward sizes.
    fn every_kind_of_op() -> Vec<KeyOp> {
        let dt = DateTime {
            date: Date { year: 2026, month: 11, day: 23 },
            hour: 23,
            minute: 59,
            second: 58,
            micro: 999_999,
        };
        let all_values = vec![
            Value::Null,
            Value::Int(i64::MIN),
            Value::Int(-1),
            Value::Int(i64::MAX),
            Value::UInt(u64::MAX),
            Value::UInt(0),
            Value::Float(-1.5),
            Value::Double(f64::MAX),
            Value::Decimal(Decimal { mantissa: i128::MIN, scale: 38 }),
            Value::Decimal(Decimal { mantissa: i128::MAX, scale: 0 }),
            Value::Decimal(Decimal { mantissa: -12345, scale: 2 }),
            Value::Bytes(Vec::new()),
            Value::Bytes((0..300).map(|i| i as u8).collect()),
            Value::Date(Date { year: u16::MAX, month: 255, day: 0 }),
            Value::Time(-86_400_000_000),
            Value::DateTime(dt),
        ];
        let mut ops = vec![KeyOp::read(7, vec![Value::Int(42)])];
        let mut w = KeyOp::write(
            u32::MAX,
            all_values.clone(),
            all_values.iter().cloned().enumerate().map(|(i, v)| (i as u16 * 1000, v)).collect(),
        );
        w.increments = vec![(3, Value::Int(-7)), (u16::MAX, Value::Double(0.5))];
        w.partition = Some(u32::MAX);
        w.table_version = 1 << 20;
        w.abort_on_error = false;
        ops.push(w);
        let mut u = KeyOp::update(1, vec![], vec![]);
        u.key = KeyAccess::Unique { index: 300, values: all_values };
        u.lock = LockMode::Shared;
        u.projection = vec![0, 127, 128, u16::MAX];
        ops.push(u);
        ops.push(KeyOp::insert(2, vec![Value::str("k")], vec![(1, Value::Null)]));
        let mut d = KeyOp::delete(3, vec![Value::UInt(9)]);
        d.partition = Some(0);
        ops.push(d);
        ops
    }

    /// Both decoded to the same message (compared by encoding: a damaged
    /// float may be a NaN), or both refused.
    fn same(a: &Result<Envelope, WireError>, b: &Result<Envelope, WireError>) -> bool {
        match (a, b) {
            (Ok(x), Ok(y)) => x.prio == y.prio && encode(x) == encode(y),
            (Err(_), Err(_)) => true,
            _ => false,
        }
    }

    /// The fast decoder's answer for `b`, or the generic one's if it declines.
    fn fast(b: &[u8]) -> Result<Envelope, WireError> {
        decode_tc_key_req(b).unwrap_or_else(|| decode_generic(b))
    }

    #[test]
    fn decodes_what_the_encoder_writes() {
        for exec in [ExecType::NoCommit, ExecType::Commit, ExecType::Rollback] {
            for ops in [Vec::new(), vec![KeyOp::read(1, vec![Value::Int(1)])], every_kind_of_op()] {
                let e = env(ops, exec);
                let b = encode(&e);
                let got = decode_tc_key_req(&b).expect("a TC_KEYREQ").expect("decodes");
                assert_eq!(got.signal, e.signal);
                assert_eq!((got.from, got.to, got.prio), (e.from, e.to, e.prio));
            }
        }
        let mut a = env(vec![], ExecType::Commit);
        a.prio = Priority::A;
        assert_eq!(decode_tc_key_req(&encode(&a)).unwrap().unwrap().prio, Priority::A);
    }

    #[test]
    fn other_signals_go_to_the_generic_decoder() {
        let e = Envelope {
            from: BlockRef::new(300, block::API, 0),
            to: BlockRef::new(1, block::TC, 0),
            prio: Priority::B,
            signal: Signal::ScanNextReq(ScanNextReq { txn: 1, scan_id: 2, close: false }),
        };
        assert!(decode_tc_key_req(&encode(&e)).is_none());
    }

    /// Truncations, every single-byte change and trailing bytes: the fast
    /// decoder agrees with postcard (both accept with the same value, or
    /// both refuse), and never panics.
    #[test]
    fn agrees_with_postcard_on_damaged_frames() {
        let b = encode(&env(every_kind_of_op(), ExecType::Commit));
        for n in 0..b.len() {
            assert!(fast(&b[..n]).is_err(), "truncated to {n} bytes");
            assert!(same(&fast(&b[..n]), &decode_generic(&b[..n])));
        }
        let mut longer = b.clone();
        longer.push(0);
        assert!(fast(&longer).is_err(), "trailing byte");
        let mut m = b.clone();
        for i in 0..b.len() {
            for x in [0x00, 0x01, 0x02, 0x03, 0x7f, 0x80, 0xff, b[i] ^ 0x80, b[i].wrapping_add(1)] {
                m[i] = x;
                assert!(same(&fast(&m), &decode_generic(&m)), "byte {i} set to {x:#x}");
            }
            m[i] = b[i];
        }
    }

    /// The fast TC_KEYCONF encoder writes postcard's bytes exactly.
    #[test]
    fn key_conf_encoding_is_postcards() {
        let rows = every_kind_of_op().into_iter().map(|op| match op.key {
            KeyAccess::Primary(v) | KeyAccess::Unique { values: v, .. } => OpResult::Ok(Some(v)),
        });
        let mut all: Vec<OpResult> = rows.collect();
        all.push(OpResult::Ok(None));
        all.push(OpResult::Ok(Some(Vec::new())));
        for outcome in [TxnOutcome::Open, TxnOutcome::Committed, TxnOutcome::RolledBack] {
            for results in [Vec::new(), vec![OpResult::Ok(None)], all.clone()] {
                for (prio, txn) in [(Priority::A, 0), (Priority::B, u64::MAX)] {
                    let e = Envelope {
                        from: BlockRef::new(1, block::TC, 1),
                        to: BlockRef::new(u16::MAX, block::API, 0),
                        prio,
                        signal: Signal::TcKeyConf(Box::new(TcKeyConf { txn, outcome, results: results.clone() })),
                    };
                    let mut generic = Vec::new();
                    super::super::encode_generic(&e, &mut generic);
                    let mut fast = vec![0xAA];
                    assert!(encode_tc_key_conf(&e, &mut fast));
                    assert_eq!(&fast[1..], &generic[..], "{outcome:?} {} results", results.len());
                    let back = decode_generic(&fast[1..]).unwrap();
                    assert!(same(&Ok(back), &Ok(e)));
                }
            }
        }
        // An error result (or another signal) is left to the generic encoder.
        let err = OpResult::Err(NodeError::new(ErrorCode::NoSuchRow));
        let e = Envelope {
            from: BlockRef::new(1, block::TC, 0),
            to: BlockRef::new(5, block::API, 0),
            prio: Priority::B,
            signal: Signal::TcKeyConf(Box::new(TcKeyConf {
                txn: 1,
                outcome: TxnOutcome::Open,
                results: vec![OpResult::Ok(None), err],
            })),
        };
        let mut out = Vec::new();
        assert!(!encode_tc_key_conf(&e, &mut out));
        assert!(out.is_empty());
        assert!(!encode_tc_key_conf(&env(vec![], ExecType::Commit), &mut out));
    }

    #[test]
    fn garbage_and_huge_lengths_are_errors() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut g = Vec::new();
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            g.clear();
            // A plausible header (TC_KEYREQ to TC) then random bytes.
            let head = encode(&env(vec![], ExecType::Commit));
            assert_eq!(head[8], 0, "the signal variant follows 8 header bytes");
            g.extend_from_slice(&head[..9]);
            let len = (x % 48) as usize;
            let mut y = x;
            for _ in 0..len {
                y = y.rotate_left(9).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                g.push((y >> 56) as u8);
            }
            assert!(same(&fast(&g), &decode_generic(&g)), "{g:?}");
        }
        // A batch claiming u64::MAX operations, and a value claiming 2^62
        // bytes: refused without reserving memory for them.
        let mut b = encode(&env(vec![], ExecType::Commit));
        b.pop();
        b.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert!(fast(&b).is_err());
        let mut b = encode(&env(vec![KeyOp::read(1, vec![Value::Bytes(vec![1])])], ExecType::Commit));
        let at = b.iter().rposition(|&v| v == 6).expect("Bytes variant");
        b.truncate(at + 1);
        b.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40]);
        assert!(fast(&b).is_err());
    }
}
