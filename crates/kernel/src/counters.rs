//! Named event counters of a block. The names double as `probe!` markers for
//! rare paths (the simulator can check a test really reached "lqh: lock wait
//! timed out").
//!
//! Counters are bumped on every key operation, so `bump` must be cheap: the
//! map is keyed by the name's address and length (hashing two words) rather
//! than by its text (a BTreeMap of names cost several string comparisons per
//! bump, ~3% of the data node's instructions per point select). One name may
//! sit at several addresses if the compiler does not merge equal literals;
//! `get` and `snapshot` therefore merge entries by text, and `snapshot` lists
//! names in text order, so reports stay in a fixed order.

use std::collections::BTreeMap;

use crate::fxhash::FxHashMap;

#[derive(Debug, Default, Clone)]
pub struct Counters {
    /// (address, length) of the name → (name, count).
    map: FxHashMap<(usize, usize), (&'static str, u64)>,
}

impl Counters {
    #[inline]
    pub fn bump(&mut self, name: &'static str) {
        self.bump_by(name, 1);
    }

    /// `n` events at once (a batch); no entry appears for `n == 0`, as with
    /// `n` calls of `bump`.
    #[inline]
    pub fn bump_by(&mut self, name: &'static str, n: u64) {
        if n > 0 {
            self.map.entry((name.as_ptr() as usize, name.len())).or_insert((name, 0)).1 += n;
        }
    }

    pub fn get(&self, name: &str) -> u64 {
        self.map.values().filter(|(k, _)| *k == name).map(|(_, v)| v).sum()
    }

    pub fn snapshot(&self) -> Vec<(String, u64)> {
        let mut by_name: BTreeMap<&'static str, u64> = BTreeMap::new();
        for (k, v) in self.map.values() {
            *by_name.entry(k).or_insert(0) += v;
        }
        by_name.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }
}

/// Mark a rare path: `probe!(self.counters, "lqh: lock wait timed out")`.
#[macro_export]
macro_rules! probe {
    ($counters:expr, $name:literal) => {
        $counters.bump($name)
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_merge_by_name_whatever_the_address() {
        let mut c = Counters::default();
        c.bump("b: second");
        c.bump("a: first");
        c.bump_by("b: second", 2);
        c.bump_by("c: never", 0);
        // The same text at another address: a leaked copy.
        let other: &'static str = Box::leak(String::from("a: first").into_boxed_str());
        c.bump_by(other, 5);
        assert_eq!(c.get("a: first"), 6);
        assert_eq!(c.get("b: second"), 3);
        assert_eq!(c.get("c: never"), 0);
        assert_eq!(c.snapshot(), vec![("a: first".to_string(), 6), ("b: second".to_string(), 3)]);
    }
}
