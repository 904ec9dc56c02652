//! Wire encoding of a batch of rows (`ScanTabConf::rows`): one byte string
//! written and read by hand instead of serde's per-value visitor calls.
//!
//! Why: a 100-row SCAN_TABCONF was ~11% of the data node's instructions to
//! encode and ~13% of the SQL node's to decode under sysbench read/write
//! (callgrind, bench/RESULTS.md); most of it was the generic sequence and enum
//! machinery around each value, not the bytes themselves.
//!
//! Layout (all varints are LEB128, signed ones zigzag-mapped first):
//! ```text
//! batch := rows:varint row*
//! row   := values:varint value*
//! value := tag:u8 payload
//!   0 NULL        -
//!   1 Int         zigzag varint
//!   2 UInt        varint
//!   3 Float       4 bytes, little-endian IEEE bits
//!   4 Double      8 bytes, little-endian IEEE bits
//!   5 Decimal     scale:u8, mantissa: zigzag varint (i128)
//!   6 Bytes       len:varint, bytes
//!   7 Date        year:u16 LE, month:u8, day:u8
//!   8 Time        zigzag varint (microseconds)
//!   9 DateTime    year:u16 LE, month, day, hour, minute, second:u8, micro:varint
//! ```
//! The batch travels as one serde byte string, so a frame that is cut or
//! garbled fails to decode with an error (never a panic), and counts from the
//! peer bound no allocation beyond the bytes actually present.

use crate::value::{Date, DateTime, Decimal, Value};
use serde::de::{Error, Visitor};
use serde::{Deserializer, Serializer};
use std::cell::RefCell;
use std::fmt;

const NULL: u8 = 0;
const INT: u8 = 1;
const UINT: u8 = 2;
const FLOAT: u8 = 3;
const DOUBLE: u8 = 4;
const DECIMAL: u8 = 5;
const BYTES: u8 = 6;
const DATE: u8 = 7;
const TIME: u8 = 8;
const DATETIME: u8 = 9;

thread_local! {
    /// Encoding scratch: the batch is built here, then handed to the
    /// serializer as one byte string (which copies it into the frame).
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

pub fn serialize<S: Serializer>(rows: &[Vec<Value>], s: S) -> Result<S::Ok, S::Error> {
    let mut buf = SCRATCH.with(|c| std::mem::take(&mut *c.borrow_mut()));
    buf.clear();
    encode_rows(rows, &mut buf);
    let r = s.serialize_bytes(&buf);
    // Keep a modest buffer for the next batch; drop one a huge batch grew.
    if buf.capacity() <= 1 << 20 {
        SCRATCH.with(|c| *c.borrow_mut() = buf);
    }
    r
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Vec<Value>>, D::Error> {
    d.deserialize_bytes(BatchVisitor)
}

struct BatchVisitor;

impl<'de> Visitor<'de> for BatchVisitor {
    type Value = Vec<Vec<Value>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an encoded row batch")
    }
    fn visit_bytes<E: Error>(self, v: &[u8]) -> Result<Self::Value, E> {
        decode_rows(v).map_err(E::custom)
    }
    fn visit_borrowed_bytes<E: Error>(self, v: &'de [u8]) -> Result<Self::Value, E> {
        decode_rows(v).map_err(E::custom)
    }
    fn visit_byte_buf<E: Error>(self, v: Vec<u8>) -> Result<Self::Value, E> {
        decode_rows(&v).map_err(E::custom)
    }
}

/// Append the encoding of `rows` to `out`.
pub fn encode_rows(rows: &[Vec<Value>], out: &mut Vec<u8>) {
    put_varint(out, rows.len() as u64);
    for row in rows {
        put_varint(out, row.len() as u64);
        for v in row {
            encode_value(v, out);
        }
    }
}

fn encode_value(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Null => out.push(NULL),
        Value::Int(i) => {
            out.push(INT);
            put_varint(out, zigzag(*i));
        }
        Value::UInt(u) => {
            out.push(UINT);
            put_varint(out, *u);
        }
        Value::Float(f) => {
            out.push(FLOAT);
            out.extend_from_slice(&f.to_bits().to_le_bytes());
        }
        Value::Double(f) => {
            out.push(DOUBLE);
            out.extend_from_slice(&f.to_bits().to_le_bytes());
        }
        Value::Decimal(d) => {
            out.push(DECIMAL);
            out.push(d.scale);
            put_varint128(out, ((d.mantissa << 1) ^ (d.mantissa >> 127)) as u128);
        }
        Value::Bytes(b) => {
            out.push(BYTES);
            put_varint(out, b.len() as u64);
            out.extend_from_slice(b);
        }
        Value::Date(d) => {
            out.push(DATE);
            put_date(out, d);
        }
        Value::Time(t) => {
            out.push(TIME);
            put_varint(out, zigzag(*t));
        }
        Value::DateTime(dt) => {
            out.push(DATETIME);
            put_date(out, &dt.date);
            out.extend_from_slice(&[dt.hour, dt.minute, dt.second]);
            put_varint(out, dt.micro as u64);
        }
    }
}

/// Decode a whole batch; trailing bytes are an error.
pub fn decode_rows(bytes: &[u8]) -> Result<Vec<Vec<Value>>, String> {
    let mut r = Reader { b: bytes, at: 0 };
    let n = r.count()?;
    let mut rows = Vec::with_capacity(n);
    for _ in 0..n {
        let width = r.count()?;
        let mut row = Vec::with_capacity(width);
        for _ in 0..width {
            row.push(r.value()?);
        }
        rows.push(row);
    }
    if r.at != bytes.len() {
        return Err(format!("{} trailing bytes after a row batch", bytes.len() - r.at));
    }
    Ok(rows)
}

/// Append the encoding of one row (`values:varint value*`, the `row` of the
/// batch layout above). The durability files (REDO records, LCP data) store
/// rows this way: a change here changes their format (their tests pin it).
pub fn encode_row(row: &[Value], out: &mut Vec<u8>) {
    put_varint(out, row.len() as u64);
    for v in row {
        encode_value(v, out);
    }
}

/// The bytes `encode_row(row)` appends, counted without encoding (the
/// node-restart copy reports the bytes of the rows it sends).
pub fn encoded_row_len(row: &[Value]) -> usize {
    varint_len(row.len() as u64) + row.iter().map(value_len).sum::<usize>()
}

fn value_len(v: &Value) -> usize {
    1 + match v {
        Value::Null => 0,
        Value::Int(i) | Value::Time(i) => varint_len(zigzag(*i)),
        Value::UInt(u) => varint_len(*u),
        Value::Float(_) => 4,
        Value::Double(_) => 8,
        Value::Decimal(d) => {
            let z = ((d.mantissa << 1) ^ (d.mantissa >> 127)) as u128;
            1 + (128 - (z | 1).leading_zeros() as usize).div_ceil(7)
        }
        Value::Bytes(b) => varint_len(b.len() as u64) + b.len(),
        Value::Date(_) => 4,
        Value::DateTime(dt) => 4 + 3 + varint_len(dt.micro as u64),
    }
}

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Decode exactly one row written by `encode_row`; trailing bytes are an error.
pub fn decode_row(bytes: &[u8]) -> Result<Vec<Value>, String> {
    let mut r = Reader { b: bytes, at: 0 };
    let width = r.count()?;
    let mut row = Vec::with_capacity(width);
    for _ in 0..width {
        row.push(r.value()?);
    }
    if r.at != bytes.len() {
        return Err(format!("{} trailing bytes after a row", bytes.len() - r.at));
    }
    Ok(row)
}

fn zigzag(i: i64) -> u64 {
    ((i << 1) ^ (i >> 63)) as u64
}

fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_varint128(out: &mut Vec<u8>, mut v: u128) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_date(out: &mut Vec<u8>, d: &Date) {
    out.extend_from_slice(&d.year.to_le_bytes());
    out.extend_from_slice(&[d.month, d.day]);
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len()).ok_or("row batch cut short")?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    #[inline]
    fn byte(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    /// Counts, lengths and small integers take one byte: that case inline;
    /// longer ones (most integer values) take the loop.
    #[inline]
    fn varint(&mut self) -> Result<u64, String> {
        match self.b.get(self.at) {
            Some(&b) if b < 0x80 => {
                self.at += 1;
                Ok(b as u64)
            }
            _ => self.varint_long(),
        }
    }

    fn varint_long(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            if shift == 63 && b > 1 {
                break;
            }
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint too long in a row batch".into())
    }

    fn varint128(&mut self) -> Result<u128, String> {
        let mut v = 0u128;
        for shift in (0..128).step_by(7) {
            let b = self.byte()?;
            if shift == 126 && b > 3 {
                break;
            }
            v |= ((b & 0x7f) as u128) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint too long in a row batch".into())
    }

    /// A row or value count: each counted item takes at least one byte, so a
    /// count beyond the bytes left is malformed (and cannot drive a huge
    /// allocation).
    fn count(&mut self) -> Result<usize, String> {
        let n = self.varint()?;
        if n > (self.b.len() - self.at) as u64 {
            return Err(format!("row batch count {n} exceeds the {} bytes left", self.b.len() - self.at));
        }
        Ok(n as usize)
    }

    fn date(&mut self) -> Result<Date, String> {
        let b = self.take(4)?;
        Ok(Date { year: u16::from_le_bytes([b[0], b[1]]), month: b[2], day: b[3] })
    }

    fn value(&mut self) -> Result<Value, String> {
        Ok(match self.byte()? {
            NULL => Value::Null,
            INT => Value::Int(unzigzag(self.varint()?)),
            UINT => Value::UInt(self.varint()?),
            FLOAT => {
                let b = self.take(4)?;
                Value::Float(f32::from_bits(u32::from_le_bytes(b.try_into().expect("4 bytes"))))
            }
            DOUBLE => {
                let b = self.take(8)?;
                Value::Double(f64::from_bits(u64::from_le_bytes(b.try_into().expect("8 bytes"))))
            }
            DECIMAL => {
                let scale = self.byte()?;
                let z = self.varint128()?;
                let mantissa = ((z >> 1) as i128) ^ -((z & 1) as i128);
                Value::Decimal(Decimal { mantissa, scale })
            }
            BYTES => {
                let n = self.varint()?;
                let n = usize::try_from(n).map_err(|_| "byte string too long".to_string())?;
                Value::Bytes(self.take(n)?.to_vec())
            }
            DATE => Value::Date(self.date()?),
            TIME => Value::Time(unzigzag(self.varint()?)),
            DATETIME => {
                let date = self.date()?;
                let t = self.take(3)?;
                let (hour, minute, second) = (t[0], t[1], t[2]);
                let micro =
                    u32::try_from(self.varint()?).map_err(|_| "DATETIME microseconds out of range".to_string())?;
                Value::DateTime(DateTime { date, hour, minute, second, micro })
            }
            t => return Err(format!("unknown value tag {t} in a row batch")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_rows() -> Vec<Vec<Value>> {
        let dt =
            DateTime { date: Date { year: 2026, month: 11, day: 23 }, hour: 9, minute: 59, second: 1, micro: 999_999 };
        vec![
            vec![],
            vec![Value::Null],
            vec![
                Value::Int(0),
                Value::Int(-1),
                Value::Int(i64::MIN),
                Value::Int(i64::MAX),
                Value::UInt(u64::MAX),
                Value::UInt(127),
                Value::UInt(128),
            ],
            vec![Value::Float(-0.0), Value::Float(f32::MAX), Value::Double(f64::MIN_POSITIVE), Value::Double(-2.5)],
            vec![
                Value::Decimal(Decimal { mantissa: i128::MIN, scale: 38 }),
                Value::Decimal(Decimal { mantissa: i128::MAX, scale: 0 }),
                Value::Decimal(Decimal { mantissa: -12345, scale: 2 }),
            ],
            vec![Value::Bytes(Vec::new()), Value::str("åäö"), Value::Bytes(vec![0xff; 300])],
            vec![Value::Date(dt.date), Value::Time(-3_020_399_000_000), Value::DateTime(dt)],
        ]
    }

    #[test]
    fn roundtrip_every_kind_of_value() {
        let rows = sample_rows();
        let mut b = Vec::new();
        encode_rows(&rows, &mut b);
        let back = decode_rows(&b).unwrap();
        // NaN-free sample: PartialEq is exact, -0.0 checked by bits.
        assert_eq!(back, rows);
        assert!(matches!(back[3][0], Value::Float(f) if f.to_bits() == (-0.0f32).to_bits()));
        // Through the signal codec as a field of SCAN_TABCONF.
        let conf = crate::ScanTabConf { txn: 9, scan_id: 3, rows: rows.clone(), done: true };
        let enc = postcard::to_stdvec(&conf).unwrap();
        let dec: crate::ScanTabConf = postcard::from_bytes(&enc).unwrap();
        assert_eq!(dec, conf);
    }

    #[test]
    fn encoded_row_len_is_the_encoded_size() {
        let mut rows = sample_rows();
        rows.push((0..20).map(|i| Value::Int(1 << (3 * i))).collect());
        rows.push((0..20).map(|i| Value::UInt(u64::MAX >> (3 * i))).collect());
        rows.push(vec![Value::Bytes(vec![1; 127]), Value::Bytes(vec![2; 128]), Value::Bytes(vec![3; 20_000])]);
        rows.push(vec![
            Value::Decimal(Decimal { mantissa: 0, scale: 0 }),
            Value::Decimal(Decimal { mantissa: 64, scale: 1 }),
        ]);
        for row in rows {
            let mut b = Vec::new();
            encode_row(&row, &mut b);
            assert_eq!(encoded_row_len(&row), b.len(), "{row:?}");
        }
    }

    #[test]
    fn malformed_batches_are_errors_not_panics() {
        let mut b = Vec::new();
        encode_rows(&sample_rows(), &mut b);
        for n in 0..b.len() {
            assert!(decode_rows(&b[..n]).is_err(), "prefix of {n} bytes decoded");
        }
        let mut trailing = b.clone();
        trailing.push(0);
        assert!(decode_rows(&trailing).is_err());
        // Counts larger than the bytes present, unknown tags, overlong varints.
        assert!(decode_rows(&[0xff, 0xff, 0xff, 0xff, 0x0f]).is_err());
        assert!(decode_rows(&[1, 1, 42]).is_err());
        assert!(decode_rows(&[1, 1, INT, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]).is_err());
        assert!(decode_rows(&[1, 1, BYTES, 0xff, 0xff, 0xff, 0xff, 0x0f, b'a']).is_err());
        // Random garbage never panics.
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..5000 {
            let len = (x % 48) as usize;
            let mut g = Vec::with_capacity(len);
            for _ in 0..len {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                g.push((x % 12) as u8 | if x & 0x100 != 0 { 0x80 } else { 0 });
            }
            let _ = decode_rows(&g);
        }
    }
}
