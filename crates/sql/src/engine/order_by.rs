//! ORDER BY sorting through normalized sort keys.
//!
//! Comparing rows with `order_cmp` costs a dispatch on both values per key
//! and, for case-insensitive strings, a folding compare every time two rows
//! meet. When every key column holds one kind of value, each row's keys are
//! instead encoded once into a byte string whose plain byte order is the
//! order `order_cmp` gives (with the key's collation and direction), and the
//! rows are sorted by those bytes. A column that mixes kinds (say integers
//! and strings, which `order_cmp` compares as numbers) keeps the comparator.
//!
//! Per key: 0x00 for NULL, else 0x01 and the value's payload (keycode's
//! layouts: sign-flipped big-endian integers, ordered double bits, escaped
//! and terminated strings, case-folded for the case-insensitive collation).
//! Every key's encoding is prefix-free, so the concatenation compares key by
//! key, and a descending key is the byte complement of its encoding (which
//! also puts NULLs last, as MySQL does).

use crate::engine::expr::value::{order_cmp, Coll};
use norr_signals::coerce::rescale_round;
use norr_signals::keycode::{encode_bytes, encode_bytes_ci, encode_f64};
use norr_signals::{DateTime, Value};
use std::cmp::Ordering;

/// Direction and collation of one ORDER BY key.
#[derive(Debug, Clone, Copy)]
pub struct KeyDir {
    pub desc: bool,
    pub coll: Coll,
}

/// What one key column holds (besides NULLs), and so how it encodes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    /// Only NULLs.
    Nulls,
    /// Signed integers only: 8 bytes.
    Int,
    /// Integers and decimals, compared exactly: mantissas at the column's
    /// largest scale, 16 bytes.
    Exact {
        scale: u8,
    },
    /// FLOAT and DOUBLE (no NaN).
    Float,
    Text,
    /// DATE and DATETIME (a date compares as its midnight).
    DateTime,
    Time,
}

fn kind_of(v: &Value) -> Option<Kind> {
    Some(match v {
        Value::Null => Kind::Nulls,
        Value::Int(_) => Kind::Int,
        Value::UInt(_) => Kind::Exact { scale: 0 },
        Value::Decimal(d) => Kind::Exact { scale: d.scale },
        Value::Float(f) if !f.is_nan() => Kind::Float,
        Value::Double(f) if !f.is_nan() => Kind::Float,
        Value::Float(_) | Value::Double(_) => return None,
        Value::Bytes(_) => Kind::Text,
        Value::Date(_) | Value::DateTime(_) => Kind::DateTime,
        Value::Time(_) => Kind::Time,
    })
}

/// The kind covering both, None when `order_cmp` would mix them through a
/// conversion (numbers and strings, floats and exact numbers, ...).
fn join(a: Kind, b: Kind) -> Option<Kind> {
    use Kind::*;
    Some(match (a, b) {
        (Nulls, k) | (k, Nulls) => k,
        (Int, Int) => Int,
        (Int, Exact { scale }) | (Exact { scale }, Int) => Exact { scale },
        (Exact { scale: x }, Exact { scale: y }) => Exact { scale: x.max(y) },
        (x, y) if x == y => x,
        _ => return None,
    })
}

fn midnight(d: norr_signals::Date) -> DateTime {
    DateTime { date: d, hour: 0, minute: 0, second: 0, micro: 0 }
}

/// Append the encoding of a non-NULL value of kind `kind`. False when the
/// value cannot be encoded exactly (a decimal too large for the column's
/// common scale): the caller falls back to the comparator.
fn encode(out: &mut Vec<u8>, v: &Value, kind: Kind, coll: Coll) -> bool {
    match (v, kind) {
        (Value::Int(i), Kind::Int) => out.extend_from_slice(&((*i as u64) ^ (1 << 63)).to_be_bytes()),
        (_, Kind::Exact { scale }) => {
            let (m, s) = match v {
                Value::Int(i) => (*i as i128, 0),
                Value::UInt(u) => (*u as i128, 0),
                Value::Decimal(d) => (d.mantissa, d.scale),
                _ => return false,
            };
            // Scaling up never rounds; None is an overflow.
            let Some(m) = rescale_round(m, s, scale) else { return false };
            out.extend_from_slice(&((m as u128) ^ (1 << 127)).to_be_bytes());
        }
        (Value::Float(f), Kind::Float) => encode_f64(out, *f as f64),
        (Value::Double(f), Kind::Float) => encode_f64(out, *f),
        (Value::Bytes(b), Kind::Text) => match coll {
            Coll::Bin => encode_bytes(out, b),
            Coll::Ci => encode_bytes_ci(out, b),
        },
        (Value::Date(d), Kind::DateTime) => encode_datetime(out, &midnight(*d)),
        (Value::DateTime(dt), Kind::DateTime) => encode_datetime(out, dt),
        (Value::Time(t), Kind::Time) => out.extend_from_slice(&((*t as u64) ^ (1 << 63)).to_be_bytes()),
        _ => return false,
    }
    true
}

fn encode_datetime(out: &mut Vec<u8>, dt: &DateTime) {
    out.extend_from_slice(&dt.date.year.to_be_bytes());
    out.extend_from_slice(&[dt.date.month, dt.date.day, dt.hour, dt.minute, dt.second]);
    out.extend_from_slice(&dt.micro.to_be_bytes());
}

/// How two rows compare under the ORDER BY keys (the comparator the sort
/// keys reproduce, and the fallback when a column mixes kinds).
pub fn cmp_keys<'a>(a: usize, b: usize, key: &impl Fn(usize, usize) -> &'a Value, dirs: &[KeyDir]) -> Ordering {
    for (i, d) in dirs.iter().enumerate() {
        let c = order_cmp(key(a, i), key(b, i), d.coll);
        let c = if d.desc { c.reverse() } else { c };
        if c != Ordering::Equal {
            return c;
        }
    }
    Ordering::Equal
}

/// One row's place in the sort: its first 8 key bytes (zero padded) decide
/// most comparisons; the full key and then the arrival index the rest.
struct Entry {
    prefix: u64,
    start: u32,
    end: u32,
    row: u32,
}

/// The order in which to emit `rows` rows sorted by the ORDER BY keys (`key(r, i)`
/// is key `i` of row `r`). Stable: rows with equal keys keep arrival order.
pub fn sorted_order<'a>(rows: usize, key: impl Fn(usize, usize) -> &'a Value, dirs: &[KeyDir]) -> Vec<usize> {
    match sort_by_encoded_keys(rows, &key, dirs) {
        Some(order) => order,
        None => {
            let mut order: Vec<usize> = (0..rows).collect();
            order.sort_by(|&a, &b| cmp_keys(a, b, &key, dirs));
            order
        }
    }
}

/// `sorted_order` through encoded keys; None when a key column mixes kinds
/// or a value does not encode exactly.
fn sort_by_encoded_keys<'a>(
    rows: usize,
    key: &impl Fn(usize, usize) -> &'a Value,
    dirs: &[KeyDir],
) -> Option<Vec<usize>> {
    if rows < 2 {
        return Some((0..rows).collect());
    }
    if u32::try_from(rows).is_err() {
        return None;
    }
    let mut kinds = Vec::with_capacity(dirs.len());
    for i in 0..dirs.len() {
        let mut k = Kind::Nulls;
        for r in 0..rows {
            k = join(k, kind_of(key(r, i))?)?;
        }
        kinds.push(k);
    }
    let mut buf: Vec<u8> = Vec::with_capacity(rows * 16 * dirs.len());
    let mut entries = Vec::with_capacity(rows);
    for r in 0..rows {
        let start = buf.len();
        for (i, (d, &kind)) in dirs.iter().zip(&kinds).enumerate() {
            let from = buf.len();
            match key(r, i) {
                Value::Null => buf.push(0x00),
                v => {
                    buf.push(0x01);
                    if !encode(&mut buf, v, kind, d.coll) {
                        return None;
                    }
                }
            }
            if d.desc {
                buf[from..].iter_mut().for_each(|b| *b = !*b);
            }
        }
        let mut p = [0u8; 8];
        let n = (buf.len() - start).min(8);
        p[..n].copy_from_slice(&buf[start..start + n]);
        let (start, end) = (u32::try_from(start).ok()?, u32::try_from(buf.len()).ok()?);
        entries.push(Entry { prefix: u64::from_be_bytes(p), start, end, row: r as u32 });
    }
    // Distinct keys differ at a byte before either ends (prefix-free), so a
    // prefix difference is the key order; the row index makes equal keys
    // keep arrival order under the unstable sort.
    entries.sort_unstable_by(|a, b| {
        a.prefix
            .cmp(&b.prefix)
            .then_with(|| buf[a.start as usize..a.end as usize].cmp(&buf[b.start as usize..b.end as usize]))
            .then(a.row.cmp(&b.row))
    });
    Some(entries.into_iter().map(|e| e.row as usize).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use norr_signals::{Date, Decimal};

    /// xorshift64*: deterministic test data without a dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    fn text(rng: &mut Rng) -> Value {
        const PIECES: &[&str] = &[
            "a", "A", "b", "B", "z", "Z", "0", "9", "-", " ", "  ", "\0", "å", "Å", "ä", "Ö", "ö", "ß", "ẞ", "İ", "i",
            "ı", "Σ", "σ", "ς", "é", "É", "e", "\u{7f}", "~",
        ];
        let n = rng.below(5);
        let mut s = Vec::new();
        for _ in 0..n {
            match rng.below(PIECES.len() as u64 + 1) as usize {
                // A lone lead byte: not UTF-8, folded byte by byte.
                i if i == PIECES.len() => s.push(0xC3),
                i => s.extend_from_slice(PIECES[i].as_bytes()),
            }
        }
        Value::Bytes(s)
    }

    fn value_of(kind: u64, rng: &mut Rng) -> Value {
        if rng.below(6) == 0 {
            return Value::Null;
        }
        match kind {
            0 => Value::Int(rng.below(7) as i64 - 3),
            1 => match rng.below(3) {
                0 => Value::Int(rng.below(7) as i64 - 3),
                1 => Value::UInt(rng.below(5) + u64::MAX * rng.below(2) / 2),
                _ => Value::Decimal(Decimal { mantissa: rng.below(61) as i128 - 30, scale: rng.below(3) as u8 }),
            },
            2 => {
                let xs = [-1.5, -0.0, 0.0, 2.25, 1e300, -1e-300, f64::INFINITY];
                let x = xs[rng.below(xs.len() as u64) as usize];
                if rng.below(2) == 0 {
                    Value::Double(x)
                } else {
                    Value::Float(x as f32)
                }
            }
            3 => text(rng),
            4 => {
                let date = Date { year: 1999 + rng.below(2) as u16, month: 1 + rng.below(2) as u8, day: 1 };
                if rng.below(2) == 0 {
                    Value::Date(date)
                } else {
                    Value::DateTime(DateTime {
                        date,
                        hour: 0,
                        minute: 0,
                        second: rng.below(2) as u8,
                        micro: rng.below(2) as u32,
                    })
                }
            }
            5 => Value::Time(rng.below(7) as i64 * 500_000 - 1_500_000),
            // A mixed column, the comparator's case: integers and strings
            // compare as numbers. (One-digit strings, so that the comparator
            // stays a total order: "10" < "9" as strings but not as numbers.)
            _ => {
                if rng.below(2) == 0 {
                    Value::Int(rng.below(5) as i64 - 2)
                } else {
                    Value::Bytes(vec![b'0' + rng.below(4) as u8])
                }
            }
        }
    }

    fn comparator_order(rows: &[Vec<Value>], dirs: &[KeyDir]) -> Vec<usize> {
        let mut order: Vec<usize> = (0..rows.len()).collect();
        order.sort_by(|&a, &b| cmp_keys(a, b, &|r, i| &rows[r][i], dirs));
        order
    }

    #[test]
    fn encoded_keys_sort_exactly_as_the_comparator() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut encoded_cases = 0;
        for case in 0..3000 {
            let nkeys = 1 + rng.below(3) as usize;
            let kinds: Vec<u64> = (0..nkeys).map(|_| rng.below(7)).collect();
            let dirs: Vec<KeyDir> = (0..nkeys)
                .map(|_| KeyDir { desc: rng.below(2) == 1, coll: if rng.below(3) == 0 { Coll::Bin } else { Coll::Ci } })
                .collect();
            let n = rng.below(40) as usize;
            let rows: Vec<Vec<Value>> =
                (0..n).map(|_| kinds.iter().map(|&k| value_of(k, &mut rng)).collect()).collect();
            let want = comparator_order(&rows, &dirs);
            let got = sorted_order(rows.len(), |r, i| &rows[r][i], &dirs);
            assert_eq!(got, want, "case {case}: dirs {dirs:?} rows {rows:?}");
            if sort_by_encoded_keys(rows.len(), &|r, i| &rows[r][i], &dirs).is_some() {
                encoded_cases += 1;
            }
        }
        // Most cases went through the encoded keys, not the fallback.
        assert!(encoded_cases > 1500, "{encoded_cases}");
    }

    #[test]
    fn mixed_kinds_fall_back_and_case_insensitive_ties_keep_arrival_order() {
        let rows = vec![vec![Value::str("10")], vec![Value::Int(9)], vec![Value::str("abc")]];
        let dirs = [KeyDir { desc: false, coll: Coll::Ci }];
        assert!(sort_by_encoded_keys(rows.len(), &|r, i| &rows[r][i], &dirs).is_none());
        assert_eq!(sorted_order(rows.len(), |r, i| &rows[r][i], &dirs), comparator_order(&rows, &dirs));

        let rows = [
            vec![Value::str("ÅB")],
            vec![Value::Null],
            vec![Value::str("åb")],
            vec![Value::str("Åb ")],
            vec![Value::str("aB")],
        ];
        assert_eq!(sorted_order(rows.len(), |r, i| &rows[r][i], &dirs), vec![1, 4, 0, 2, 3]);
        let desc = [KeyDir { desc: true, coll: Coll::Ci }];
        assert_eq!(sorted_order(rows.len(), |r, i| &rows[r][i], &desc), vec![3, 0, 2, 4, 1]);
    }

    #[test]
    fn decimals_beyond_a_common_scale_fall_back() {
        let big = Value::Decimal(Decimal { mantissa: 10i128.pow(37), scale: 0 });
        let fine = Value::Decimal(Decimal { mantissa: 1, scale: 10 });
        let rows = [vec![big], vec![fine], vec![Value::Int(-1)]];
        let dirs = [KeyDir { desc: false, coll: Coll::Bin }];
        assert!(sort_by_encoded_keys(rows.len(), &|r, i| &rows[r][i], &dirs).is_none());
        assert_eq!(sorted_order(rows.len(), |r, i| &rows[r][i], &dirs), vec![2, 1, 0]);
    }
}
