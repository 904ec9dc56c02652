//! Memcomparable key encoding, shared by every layer so that they agree on key
//! equality, order and partition placement.
//!
//! `encode_value` writes a byte string whose `memcmp` order equals the SQL order
//! of the values under the column's type and collation, and whose equality equals
//! SQL equality (so 'abc' and 'ABC' encode identically in a case-insensitive
//! column). The hash index, the ordered indexes, the lock table and the partition
//! function all work on these bytes.
//!
//! Layout per value: 0x00 for NULL (sorts first), else 0x01 followed by:
//! * signed ints: i64 big-endian with the sign bit flipped;
//! * unsigned ints: u64 big-endian;
//! * FLOAT/DOUBLE: f64 bits, negative values all bits flipped, others sign bit set;
//! * DECIMAL: mantissa rescaled to the column scale, i128 big-endian, sign flipped;
//! * strings: the (case-folded for CI collation) bytes with 0x00 escaped as
//!   0x00 0xFF, terminated by 0x00 0x00, so a prefix sorts before its extensions;
//! * DATE: year u16 BE, month, day; DATETIME/TIMESTAMP: date, h, m, s, micro u32 BE;
//! * TIME: i64 micros, sign flipped.
//!
//! The encoder assumes the value was already coerced to the column type
//! (`coerce::coerce_value`); a value of the wrong class is a caller bug.

use crate::value::{Collation, ColumnType, Value};

/// Append the memcomparable encoding of `v` (of column type `ty`) to `out`.
pub fn encode_value(out: &mut Vec<u8>, v: &Value, ty: &ColumnType) {
    match v {
        Value::Null => out.push(0x00),
        _ => {
            out.push(0x01);
            encode_non_null(out, v, ty);
        }
    }
}

fn encode_non_null(out: &mut Vec<u8>, v: &Value, ty: &ColumnType) {
    match v {
        Value::Null => unreachable!("handled by encode_value"),
        Value::Int(i) => {
            if ty.is_unsigned_int() {
                // A coerced value in an unsigned column is never negative.
                out.extend_from_slice(&(*i as u64).to_be_bytes());
            } else {
                out.extend_from_slice(&((*i as u64) ^ (1 << 63)).to_be_bytes());
            }
        }
        Value::UInt(u) => {
            if ty.is_unsigned_int() {
                out.extend_from_slice(&u.to_be_bytes());
            } else {
                let i = i64::try_from(*u).unwrap_or(i64::MAX);
                out.extend_from_slice(&((i as u64) ^ (1 << 63)).to_be_bytes());
            }
        }
        Value::Float(f) => encode_f64(out, *f as f64),
        Value::Double(f) => encode_f64(out, *f),
        Value::Decimal(d) => {
            let target_scale = match ty {
                ColumnType::Decimal { scale, .. } => *scale,
                _ => d.scale,
            };
            let m = rescale(d.mantissa, d.scale, target_scale);
            out.extend_from_slice(&((m as u128) ^ (1 << 127)).to_be_bytes());
        }
        Value::Bytes(b) => {
            if ty.collation() == Collation::CaseInsensitive && ty.is_text() {
                let folded = fold_case(b);
                encode_bytes(out, &folded);
            } else {
                encode_bytes(out, b);
            }
        }
        Value::Date(d) => {
            out.extend_from_slice(&d.year.to_be_bytes());
            out.push(d.month);
            out.push(d.day);
        }
        Value::DateTime(dt) => {
            out.extend_from_slice(&dt.date.year.to_be_bytes());
            out.push(dt.date.month);
            out.push(dt.date.day);
            out.push(dt.hour);
            out.push(dt.minute);
            out.push(dt.second);
            out.extend_from_slice(&dt.micro.to_be_bytes());
        }
        Value::Time(t) => out.extend_from_slice(&((*t as u64) ^ (1 << 63)).to_be_bytes()),
    }
}

fn encode_f64(out: &mut Vec<u8>, f: f64) {
    // -0.0 and 0.0 are equal in SQL: give them one encoding.
    let f = if f == 0.0 { 0.0 } else { f };
    let bits = f.to_bits();
    let key = if bits >> 63 == 1 { !bits } else { bits | (1 << 63) };
    out.extend_from_slice(&key.to_be_bytes());
}

fn encode_bytes(out: &mut Vec<u8>, b: &[u8]) {
    for &byte in b {
        if byte == 0 {
            out.push(0x00);
            out.push(0xFF);
        } else {
            out.push(byte);
        }
    }
    out.push(0x00);
    out.push(0x00);
}

/// Rescale a decimal mantissa from scale `from` to scale `to` (truncating when
/// `to < from`; coercion has already rounded to the column scale).
pub fn rescale(m: i128, from: u8, to: u8) -> i128 {
    use std::cmp::Ordering;
    match to.cmp(&from) {
        Ordering::Equal => m,
        Ordering::Greater => {
            let mut r = m;
            for _ in from..to {
                r = r.saturating_mul(10);
            }
            r
        }
        Ordering::Less => {
            let mut r = m;
            for _ in to..from {
                r /= 10;
            }
            r
        }
    }
}

/// Case folding for the case-insensitive collation: simple lower-casing of each
/// character. Invalid UTF-8 is folded byte-wise (ASCII only) rather than rejected,
/// because coercion rejects invalid UTF-8 before a value is stored.
pub fn fold_case(b: &[u8]) -> Vec<u8> {
    match std::str::from_utf8(b) {
        Ok(s) => {
            if s.bytes().all(|c| c.is_ascii() && !c.is_ascii_uppercase()) {
                return b.to_vec();
            }
            let mut out = String::with_capacity(s.len());
            for ch in s.chars() {
                for l in ch.to_lowercase() {
                    out.push(l);
                }
            }
            out.into_bytes()
        }
        Err(_) => b.iter().map(|c| c.to_ascii_lowercase()).collect(),
    }
}

/// Encode a composite key (values in key-column order, types alongside).
pub fn encode_key(values: &[Value], types: &[&ColumnType]) -> Vec<u8> {
    debug_assert_eq!(values.len(), types.len());
    let mut out = Vec::with_capacity(values.len() * 10);
    for (v, t) in values.iter().zip(types) {
        encode_value(&mut out, v, t);
    }
    out
}

/// 64-bit FNV-1a then a murmur-style finaliser over the encoded key: cheap,
/// deterministic across processes and versions (partition placement depends on it,
/// so it must never change without a format version bump).
pub fn key_hash(encoded: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in encoded {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

/// Partition of a row whose partition-key columns encode to `encoded`.
pub fn partition_of(encoded: &[u8], partitions: u32) -> u32 {
    debug_assert!(partitions > 0);
    (key_hash(encoded) % partitions as u64) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{Date, DateTime, Decimal};

    fn enc(v: Value, ty: ColumnType) -> Vec<u8> {
        let mut o = Vec::new();
        encode_value(&mut o, &v, &ty);
        o
    }

    #[test]
    fn signed_ints_order() {
        let t = ColumnType::BigInt { unsigned: false };
        let vals = [i64::MIN, -5, -1, 0, 1, 7, i64::MAX];
        for w in vals.windows(2) {
            assert!(enc(Value::Int(w[0]), t.clone()) < enc(Value::Int(w[1]), t.clone()));
        }
        assert!(enc(Value::Null, t.clone()) < enc(Value::Int(i64::MIN), t));
    }

    #[test]
    fn unsigned_accepts_int_and_uint_equally() {
        let t = ColumnType::Int { unsigned: true };
        assert_eq!(enc(Value::Int(5), t.clone()), enc(Value::UInt(5), t));
    }

    #[test]
    fn doubles_order_and_zero() {
        let t = ColumnType::Double;
        let vals = [f64::NEG_INFINITY, -2.5, -0.1, 0.0, 1e-9, 3.0, f64::INFINITY];
        for w in vals.windows(2) {
            assert!(enc(Value::Double(w[0]), t.clone()) < enc(Value::Double(w[1]), t.clone()));
        }
        assert_eq!(enc(Value::Double(-0.0), t.clone()), enc(Value::Double(0.0), t));
    }

    #[test]
    fn strings_case_insensitive_and_prefix_order() {
        let ci = ColumnType::Varchar { len: 10, collation: Collation::CaseInsensitive };
        let bin = ColumnType::Varchar { len: 10, collation: Collation::Binary };
        assert_eq!(enc(Value::str("AbC"), ci.clone()), enc(Value::str("abc"), ci.clone()));
        assert_ne!(enc(Value::str("AbC"), bin.clone()), enc(Value::str("abc"), bin.clone()));
        assert!(enc(Value::str("ab"), ci.clone()) < enc(Value::str("abc"), ci.clone()));
        assert!(enc(Value::str("abc"), ci.clone()) < enc(Value::str("abd"), ci.clone()));
        assert_eq!(enc(Value::str("ÅÄÖ"), ci.clone()), enc(Value::str("åäö"), ci));
        let b = ColumnType::Varbinary { len: 10 };
        assert!(enc(Value::Bytes(vec![1, 0]), b.clone()) < enc(Value::Bytes(vec![1, 0, 0]), b.clone()));
        assert!(enc(Value::Bytes(vec![1]), b.clone()) < enc(Value::Bytes(vec![1, 0]), b));
    }

    #[test]
    fn decimals_rescale() {
        let t = ColumnType::Decimal { precision: 10, scale: 2 };
        let a = Value::Decimal(Decimal { mantissa: 150, scale: 2 });
        let b = Value::Decimal(Decimal { mantissa: 15, scale: 1 });
        assert_eq!(enc(a, t.clone()), enc(b, t.clone()));
        let neg = Value::Decimal(Decimal { mantissa: -1, scale: 2 });
        assert!(enc(neg, t.clone()) < enc(Value::Decimal(Decimal { mantissa: 0, scale: 2 }), t));
    }

    #[test]
    fn dates_order() {
        let d1 = Date { year: 1999, month: 12, day: 31 };
        let d2 = Date { year: 2000, month: 1, day: 1 };
        assert!(enc(Value::Date(d1), ColumnType::Date) < enc(Value::Date(d2), ColumnType::Date));
        let t1 = DateTime { date: d2, hour: 0, minute: 0, second: 0, micro: 5 };
        let t2 = DateTime { date: d2, hour: 0, minute: 0, second: 1, micro: 0 };
        assert!(enc(Value::DateTime(t1), ColumnType::DateTime) < enc(Value::DateTime(t2), ColumnType::DateTime));
    }

    #[test]
    fn partition_is_stable_and_in_range() {
        let t = ColumnType::BigInt { unsigned: false };
        let mut counts = [0u32; 8];
        for i in 0..8000 {
            let k = encode_key(&[Value::Int(i)], &[&t]);
            let p = partition_of(&k, 8);
            assert_eq!(p, partition_of(&k, 8));
            counts[p as usize] += 1;
        }
        // A fair hash puts roughly 1000 keys in each of 8 partitions.
        assert!(counts.iter().all(|&c| (800..1200).contains(&c)), "{counts:?}");
    }
}
