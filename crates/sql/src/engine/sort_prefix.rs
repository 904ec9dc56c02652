//! ORDER BY's sort, sped up by a 64-bit prefix of each row's first sort key.
//!
//! Sorting rows with the value comparator moves whole rows and dispatches on
//! value kinds and collations at every comparison; on sysbench's
//! `ORDER BY c` over 100 rows that cost about ten times the comparisons
//! themselves. Here the sort moves small (prefix, row index) entries, and two
//! entries whose prefixes differ are ordered by the prefixes alone: a prefix
//! is built so that "prefixes differ" implies "the comparator orders them the
//! same way" (an abbreviated key). Equal prefixes, or a row without one, go
//! to the full comparator, so the result is exactly the comparator's stable
//! sort.
//!
//! Prefixes exist for a first key column whose non-NULL values are all
//! strings (first 8 bytes, case-folded as `cmp_bytes` folds ASCII) or all
//! integers; other columns sort with the comparator alone.

use std::cmp::Ordering;

use crate::engine::expr::value::Coll;
use norr_signals::Value;

/// One row in the sort: its first key's prefix (`None`: compare in full).
struct Entry {
    prefix: Option<u64>,
    row: usize,
}

/// What the first key column holds (besides NULLs).
#[derive(Clone, Copy, PartialEq)]
enum Domain {
    Strings,
    Ints,
}

/// Stable sort of `items` by `cmp`, whose first criterion is `first(item)`
/// under `coll` (reversed when `desc`), as `order_cmp` orders values.
pub fn sort_by_first_key<T>(
    items: &mut [T],
    first: impl Fn(&T) -> &Value,
    coll: Coll,
    desc: bool,
    cmp: impl Fn(&T, &T) -> Ordering,
) {
    if items.len() < 2 {
        return;
    }
    let Some(domain) = domain_of(items.iter().map(&first)) else {
        items.sort_by(cmp);
        return;
    };
    let mut entries: Vec<Entry> = items
        .iter()
        .enumerate()
        .map(|(row, it)| {
            // A descending key orders prefixes the other way round.
            let prefix = prefix(first(it), domain, coll).map(|p| if desc { !p } else { p });
            Entry { prefix, row }
        })
        .collect();
    entries.sort_by(|a, b| match (a.prefix, b.prefix) {
        (Some(x), Some(y)) if x != y => x.cmp(&y),
        _ => cmp(&items[a.row], &items[b.row]),
    });
    // Position k takes the item that was at entries[k].row. Swapping moves
    // the item at k to `src`, which `moved[k]` records: an item looked for
    // at a position already filled is found by following those records.
    let mut moved: Vec<usize> = entries.iter().map(|e| e.row).collect();
    for k in 0..moved.len() {
        let mut src = moved[k];
        while src < k {
            src = moved[src];
        }
        items.swap(k, src);
        moved[k] = src;
    }
}

/// The one kind of non-NULL value in the column, if it has prefixes.
fn domain_of<'v>(mut vals: impl Iterator<Item = &'v Value>) -> Option<Domain> {
    let mut domain = None;
    vals.try_for_each(|v| {
        let d = match v {
            Value::Null => return Some(()),
            Value::Bytes(_) => Domain::Strings,
            Value::Int(_) => Domain::Ints,
            _ => return None,
        };
        match domain {
            None => domain = Some(d),
            Some(x) if x != d => return None,
            Some(_) => {}
        }
        Some(())
    })?;
    domain
}

/// A value's prefix: if two values' prefixes differ, `order_cmp` orders the
/// values as the prefixes are ordered.
///
/// NULL sorts first (0; a value whose prefix is also 0 ties with it and goes
/// to the comparator). Integers: the value with its sign bit flipped.
/// Strings: the first 8 bytes (lowercased ASCII for `Coll::Ci`), big-endian,
/// zero-padded: a string that ends within them is a prefix of any string
/// with the same leading bytes and sorts before it, which padding with the
/// smallest byte keeps (or ties). A non-ASCII byte among the first 8 makes
/// `cmp_bytes` fold whole strings, so such a string gets no prefix.
fn prefix(v: &Value, domain: Domain, coll: Coll) -> Option<u64> {
    match (v, domain) {
        (Value::Null, _) => Some(0),
        (Value::Int(i), Domain::Ints) => Some((*i as u64) ^ (1 << 63)),
        (Value::Bytes(b), Domain::Strings) => {
            let head = &b[..b.len().min(8)];
            let mut buf = [0u8; 8];
            match coll {
                Coll::Bin => buf[..head.len()].copy_from_slice(head),
                Coll::Ci => {
                    if !head.is_ascii() {
                        return None;
                    }
                    for (d, s) in buf.iter_mut().zip(head) {
                        *d = s.to_ascii_lowercase();
                    }
                }
            }
            Some(u64::from_be_bytes(buf))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::expr::value::order_cmp;

    /// A small deterministic generator (xorshift) for test data.
    struct Gen(u64);
    impl Gen {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn pick<'a>(&mut self, from: &'a [&'a str]) -> &'a str {
            from[(self.next() % from.len() as u64) as usize]
        }
    }

    /// Strings that share long prefixes, differ only in case, end early,
    /// hold NUL bytes or non-ASCII characters (one folds to ASCII: the
    /// Kelvin sign).
    fn string_value(g: &mut Gen) -> Value {
        const PARTS: &[&str] = &["", "a", "A", "ab", "abcdefgh", "ABCDEFGH", "\0", "é", "É", "\u{212a}", "k", "z", "0"];
        if g.next().is_multiple_of(10) {
            return Value::Null;
        }
        let n = g.next() % 4;
        let s: String = (0..n).map(|_| g.pick(PARTS)).collect();
        Value::Bytes(s.into_bytes())
    }

    fn int_value(g: &mut Gen) -> Value {
        match g.next() % 8 {
            0 => Value::Null,
            1 => Value::Int(i64::MIN),
            2 => Value::Int(i64::MAX),
            3 => Value::Int(0),
            _ => Value::Int((g.next() % 7) as i64 - 3),
        }
    }

    /// Rows (key, tiebreak, original position) sorted both ways must come
    /// out identical: same order, same stability.
    fn check(rows: Vec<(Value, Value, usize)>, coll: Coll, desc: bool) {
        let cmp = |a: &(Value, Value, usize), b: &(Value, Value, usize)| {
            let c = order_cmp(&a.0, &b.0, coll);
            let c = if desc { c.reverse() } else { c };
            c.then_with(|| order_cmp(&a.1, &b.1, coll))
        };
        let mut want = rows.clone();
        want.sort_by(cmp);
        let mut got = rows;
        sort_by_first_key(&mut got, |r| &r.0, coll, desc, cmp);
        assert_eq!(got, want, "coll {coll:?} desc {desc}");
    }

    #[test]
    fn sorts_strings_as_the_comparator_does() {
        let mut g = Gen(0x9e37_79b9_7f4a_7c15);
        for round in 0..200 {
            let n = (g.next() % 40) as usize;
            let rows: Vec<_> = (0..n).map(|i| (string_value(&mut g), Value::Int((g.next() % 3) as i64), i)).collect();
            for coll in [Coll::Ci, Coll::Bin] {
                check(rows.clone(), coll, round % 2 == 0);
            }
        }
    }

    #[test]
    fn sorts_integers_as_the_comparator_does() {
        let mut g = Gen(0x2545_f491_4f6c_dd1d);
        for round in 0..200 {
            let n = (g.next() % 40) as usize;
            let rows: Vec<_> = (0..n).map(|i| (int_value(&mut g), string_value(&mut g), i)).collect();
            check(rows, Coll::Ci, round % 2 == 1);
        }
    }

    #[test]
    fn mixed_columns_fall_back_to_the_comparator() {
        // Mixed classes have no prefixes; any total order of them (here by
        // their debug text, which disagrees with prefixes) is kept.
        let mut g = Gen(77);
        let cmp = |a: &(Value, usize), b: &(Value, usize)| format!("{:?}", a.0).cmp(&format!("{:?}", b.0));
        for round in 0..100 {
            let n = (g.next() % 30) as usize;
            let rows: Vec<_> = (0..n)
                .map(|i| (if g.next().is_multiple_of(2) { int_value(&mut g) } else { string_value(&mut g) }, i))
                .collect();
            let mut rows = rows;
            rows.push((Value::Int(1), n));
            rows.push((Value::str("x"), n + 1));
            let mut want = rows.clone();
            want.sort_by(cmp);
            let mut got = rows;
            sort_by_first_key(&mut got, |r| &r.0, Coll::Ci, round % 2 == 0, cmp);
            assert_eq!(got, want);
        }
        assert!(domain_of([Value::Int(1), Value::str("1")].iter()).is_none());
        assert!(domain_of([Value::Null, Value::str("1")].iter()) == Some(Domain::Strings));
    }
}
