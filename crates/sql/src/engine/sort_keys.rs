//! Sorting rows by ORDER BY keys (SELECT, UPDATE/DELETE ... ORDER BY,
//! GROUP_CONCAT(... ORDER BY)).
//!
//! `order_cmp` compares two values pairwise, and across value classes it
//! follows SQL comparison (a string against a number compares as DOUBLE).
//! That relation is not transitive: 9 < 10 as numbers, "10" < "9" as text,
//! and 9 = "9". A key column can hold several classes when its expression
//! mixes them (`CASE ... THEN 1 ELSE 'a' END`, `COALESCE(int_col, str_col)`,
//! a UNION of an integer and a string column). MySQL gives such an
//! expression one result type, a string, and sorts its values as text; the
//! rows here sort the same way: a key column whose non-NULL values span
//! more than one class is compared by the values' text for the whole sort.
//! Besides matching MySQL, this keeps the comparator a total order, which
//! `sort_by` needs (it may panic on one that is not).

use std::cmp::Ordering;

use norr_signals::Value;

use super::expr::value::{self as vals, Coll};
use super::sort_prefix;

/// The class of values `order_cmp` compares consistently among themselves;
/// None for NULL, which sorts first whatever the column's class.
fn class(v: &Value) -> Option<u8> {
    Some(match v {
        Value::Null => return None,
        Value::Int(_) | Value::UInt(_) | Value::Float(_) | Value::Double(_) | Value::Decimal(_) => 0,
        Value::Date(_) | Value::DateTime(_) => 1,
        Value::Time(_) => 2,
        Value::Bytes(_) => 3,
    })
}

/// For each of `n_keys` key columns, whether its values must be compared as
/// text (they span several classes).
fn text_columns<'a, T: 'a>(
    items: impl Iterator<Item = &'a T>,
    n_keys: usize,
    key: &impl Fn(&T, usize) -> &Value,
) -> Vec<bool> {
    let mut seen: Vec<Option<u8>> = vec![None; n_keys];
    let mut text = vec![false; n_keys];
    for it in items {
        for i in 0..n_keys {
            if text[i] {
                continue;
            }
            if let Some(c) = class(key(it, i)) {
                match seen[i] {
                    None => seen[i] = Some(c),
                    Some(s) if s != c => text[i] = true,
                    Some(_) => {}
                }
            }
        }
    }
    text
}

/// ORDER BY comparison of two values of one key column; `as_text` as
/// decided for the column by `text_columns`.
fn cmp_key(a: &Value, b: &Value, coll: Coll, as_text: bool) -> Ordering {
    if as_text {
        match (vals::to_text(a), vals::to_text(b)) {
            (Some(x), Some(y)) => vals::cmp_bytes(&x, &y, coll),
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
        }
    } else {
        vals::order_cmp(a, b, coll)
    }
}

/// Stable sort of `items` by `n_keys` keys: key `i` of an item is
/// `key(item, i)`, its direction and collation `dir(i)` (desc, coll).
pub fn sort_by_keys<T>(
    items: &mut [T],
    n_keys: usize,
    key: impl Fn(&T, usize) -> &Value,
    dir: impl Fn(usize) -> (bool, Coll),
) {
    if n_keys == 0 || items.len() < 2 {
        return;
    }
    let text = text_columns(items.iter(), n_keys, &key);
    let cmp = |a: &T, b: &T| {
        for (i, &as_text) in text.iter().enumerate() {
            let (desc, coll) = dir(i);
            let c = cmp_key(key(a, i), key(b, i), coll, as_text);
            if c != Ordering::Equal {
                return if desc { c.reverse() } else { c };
            }
        }
        Ordering::Equal
    };
    if text[0] {
        items.sort_by(cmp);
    } else {
        // The first key compares with `order_cmp`: its prefixes apply.
        let (desc, coll) = dir(0);
        sort_prefix::sort_by_first_key(items, |it| key(it, 0), coll, desc, cmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sort(vals: Vec<Value>) -> Vec<Value> {
        let mut v: Vec<Vec<Value>> = vals.into_iter().map(|x| vec![x]).collect();
        sort_by_keys(&mut v, 1, |r, i| &r[i], |_| (false, Coll::Ci));
        v.into_iter().map(|mut r| r.remove(0)).collect()
    }

    #[test]
    fn one_class_sorts_by_its_own_order() {
        let got = sort(vec![Value::Int(10), Value::Null, Value::Int(9), Value::Double(9.5)]);
        assert_eq!(got, vec![Value::Null, Value::Int(9), Value::Double(9.5), Value::Int(10)]);
        let got = sort(vec![Value::str("b"), Value::str("A"), Value::str("a ")]);
        assert_eq!(got, vec![Value::str("A"), Value::str("a "), Value::str("b")]);
    }

    #[test]
    fn mixed_classes_sort_as_text() {
        let got = sort(vec![Value::Int(9), Value::str("9"), Value::Int(10), Value::str("x"), Value::Null]);
        // As text: "10" < "9" = "9" < "x"; the sort is stable for the tie.
        assert_eq!(got, vec![Value::Null, Value::Int(10), Value::Int(9), Value::str("9"), Value::str("x")]);
    }

    #[test]
    fn many_mixed_values_sort_without_panicking_into_a_consistent_order() {
        // Enough values for sort_by's checks of the comparator to run.
        let mut input = Vec::new();
        for i in 0..500i64 {
            input.push(match i % 4 {
                0 => Value::Int(i * 7919 % 1000),
                1 => Value::str(&format!("{}", i * 104729 % 1000)),
                2 => Value::str(&format!("s{}", i % 37)),
                _ => Value::Double((i % 53) as f64 / 3.0),
            });
        }
        let got = sort(input);
        for w in got.windows(2) {
            let (a, b) = (vals::to_text(&w[0]).unwrap(), vals::to_text(&w[1]).unwrap());
            assert_ne!(vals::cmp_bytes(&a, &b, Coll::Ci), Ordering::Greater, "{:?} before {:?}", w[0], w[1]);
        }
    }
}
