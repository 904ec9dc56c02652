//! Named event counters of a block. A BTreeMap so reports list them in a fixed
//! order; the names double as `probe!` markers for rare paths (the simulator can
//! check a test really reached "lqh: lock wait timed out").

use std::collections::BTreeMap;

#[derive(Debug, Default, Clone)]
pub struct Counters {
    map: BTreeMap<&'static str, u64>,
}

impl Counters {
    pub fn bump(&mut self, name: &'static str) {
        *self.map.entry(name).or_insert(0) += 1;
    }

    /// `n` events at once (a batch); no entry appears for `n == 0`, as with
    /// `n` calls of `bump`.
    pub fn bump_by(&mut self, name: &'static str, n: u64) {
        if n > 0 {
            *self.map.entry(name).or_insert(0) += n;
        }
    }

    pub fn get(&self, name: &str) -> u64 {
        self.map.get(name).copied().unwrap_or(0)
    }

    pub fn snapshot(&self) -> Vec<(String, u64)> {
        self.map.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }
}

/// Mark a rare path: `probe!(self.counters, "lqh: lock wait timed out")`.
#[macro_export]
macro_rules! probe {
    ($counters:expr, $name:literal) => {
        $counters.bump($name)
    };
}
