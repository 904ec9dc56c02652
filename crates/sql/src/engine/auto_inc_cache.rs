//! This SQL node's ranges of AUTO_INCREMENT values (NDB's
//! `ndb_autoincrement_prefetch_sz`). Owner: DML engineer.
//!
//! DICT (on the master data node) hands out AUTO_INCREMENT values in
//! ranges; asking it for each inserted row costs a round trip per statement,
//! about a fifth of a single-row INSERT's work. So a statement that needs `n`
//! values reserves `max(n, prefetch)` and the rest stay here for the next
//! statements of any session of this SQL node.
//!
//! Why it is safe: a range is kept per table *version*. DICT never hands out
//! a value twice within one version of a table, and every DDL that could make
//! a kept value wrong raises the version: a TRUNCATE (which makes DICT count
//! from 1 again) as much as an ALTER. A write carries the version it was
//! planned against and every data node refuses an old one
//! (`SchemaVersionMismatch`, 1412, after which the statement is planned again
//! against the new definition, whose version has no range here yet). So a
//! value kept from before a TRUNCATE made through another SQL node can never
//! be written after it.
//!
//! What it changes for users (as in NDB): values are unique but not in
//! insertion order across SQL nodes, and a SQL node that stops leaves a gap
//! of its unused values. `SET ndb_autoincrement_prefetch_sz = 1` asks DICT
//! for every statement.

use norr_signals::TableId;
use std::collections::HashMap;
use std::sync::Mutex;

/// `ndb_autoincrement_prefetch_sz`'s default (NDB 8.0's).
pub const DEFAULT_PREFETCH: u64 = 512;
/// Its bounds (NDB's): above this a stopped SQL node wastes too many values.
pub const MAX_PREFETCH: u64 = 65_536;

/// One table's kept values, for one version of the table.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Range {
    version: u32,
    /// `next..end` are reserved in DICT for this SQL node and not handed out.
    next: u64,
    end: u64,
    /// Every value up to this is reserved in DICT or was written to the
    /// table through this SQL node: an explicit value at or below it needs
    /// no round trip to raise DICT's counter.
    known: u64,
}

impl Range {
    fn fresh(version: u32) -> Range {
        Range { version, next: 0, end: 0, known: 0 }
    }

    fn left(&self) -> u64 {
        self.end.saturating_sub(self.next)
    }

    /// `used` was written: no kept value at or below it is handed out.
    fn pass(&mut self, used: u64) {
        if used >= self.next {
            self.next = used.saturating_add(1).min(self.end).max(self.next);
        }
    }
}

/// `table`'s range at `version`: a fresh one if none is kept, or one of
/// another version (its values are not valid at `version`).
fn range_at(m: &mut HashMap<TableId, Range>, table: TableId, version: u32) -> &mut Range {
    let r = m.entry(table).or_insert_with(|| Range::fresh(version));
    if r.version != version {
        *r = Range::fresh(version);
    }
    r
}

/// The kept ranges of one SQL node (one per `Engine`: two engines in one
/// process may talk to different clusters).
#[derive(Debug, Default)]
pub struct AutoIncCache {
    tables: Mutex<HashMap<TableId, Range>>,
}

impl AutoIncCache {
    /// `n` consecutive values of `table` at `version` from the kept range,
    /// if it holds that many: the first of them.
    pub fn take(&self, table: TableId, version: u32, n: u64) -> Option<u64> {
        debug_assert!(n > 0, "a statement takes at least one value");
        let mut m = self.tables.lock().ok()?;
        let r = m.get_mut(&table).filter(|r| r.version == version)?;
        if r.left() < n {
            return None;
        }
        let first = r.next;
        r.next += n;
        debug_assert!(r.next <= r.end && r.end.saturating_sub(1) <= r.known);
        Some(first)
    }

    /// DICT reserved `first..first + got` for this SQL node; the caller uses
    /// the first `used` of them. The rest are kept unless the range kept now
    /// holds more (the smaller one's values become a gap).
    pub fn install(&self, table: TableId, version: u32, first: u64, got: u64, used: u64) {
        assert!(used <= got, "a statement used {used} of the {got} values it reserved");
        let Ok(mut m) = self.tables.lock() else { return };
        let r = range_at(&mut m, table, version);
        let end = first.saturating_add(got);
        r.known = r.known.max(end.saturating_sub(1));
        if got - used > r.left() {
            r.next = first + used;
            r.end = end;
        }
        debug_assert!(r.next <= r.end);
    }

    /// The statement wrote the explicit value `used` to `table`'s
    /// AUTO_INCREMENT column. Kept values at or below it are dropped (the
    /// next generated value is above it, as MySQL's counter moves past an
    /// explicit value). True when DICT's counter may be below it: the caller
    /// raises it (`bump_auto_inc`) and then calls [`Self::raised`].
    pub fn note_explicit(&self, table: TableId, version: u32, used: u64) -> bool {
        let Ok(mut m) = self.tables.lock() else { return true };
        let Some(r) = m.get_mut(&table).filter(|r| r.version == version) else { return true };
        r.pass(used);
        used > r.known
    }

    /// DICT's counter is above `used` now.
    pub fn raised(&self, table: TableId, version: u32, used: u64) {
        let Ok(mut m) = self.tables.lock() else { return };
        let r = range_at(&mut m, table, version);
        r.known = r.known.max(used);
        r.pass(used);
    }

    /// The value this SQL node would hand out next at `version`, if it keeps
    /// any (SHOW TABLE STATUS shows it rather than DICT's counter, which is
    /// past every range a SQL node keeps).
    pub fn peek(&self, table: TableId, version: u32) -> Option<u64> {
        let m = self.tables.lock().ok()?;
        m.get(&table).filter(|r| r.version == version && r.left() > 0).map(|r| r.next)
    }

    /// This SQL node changed `table` from version `from` to `to` by a DDL
    /// that leaves DICT's counter as it was (ALTER TABLE, CREATE / DROP
    /// INDEX; not a TRUNCATE): the kept values are still this node's alone,
    /// so they stay, at the new version. A TRUNCATE made elsewhere after the
    /// change raises the version past `to` and ends them as before.
    pub fn carry(&self, table: TableId, from: u32, to: u32) {
        debug_assert!(from <= to, "a DDL never lowers the version");
        let Ok(mut m) = self.tables.lock() else { return };
        if let Some(r) = m.get_mut(&table).filter(|r| r.version == from) {
            r.version = to;
        }
    }

    /// Forget `table`'s kept values (ALTER TABLE ... AUTO_INCREMENT = n
    /// moved DICT's counter: the next value must come from there).
    pub fn forget(&self, table: TableId) {
        if let Ok(mut m) = self.tables.lock() {
            m.remove(&table);
        }
    }

    /// Forget every range: the data nodes may be a different cluster now
    /// (they were reconnected, possibly started empty, where table ids and
    /// versions start again).
    pub fn clear(&self) {
        if let Ok(mut m) = self.tables.lock() {
            m.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_range_hands_out_consecutive_values_until_it_runs_out() {
        let c = AutoIncCache::default();
        assert_eq!(c.take(1, 1, 1), None, "nothing kept yet");
        // A statement needing 1 value reserved 512 and used the first.
        c.install(1, 1, 1, 512, 1);
        assert_eq!(c.take(1, 1, 1), Some(2));
        assert_eq!(c.take(1, 1, 10), Some(3));
        assert_eq!(c.peek(1, 1), Some(13));
        // 1..=512 reserved, 1..=12 handed out: 500 left.
        assert_eq!(c.take(1, 1, 501), None, "500 left");
        assert_eq!(c.take(1, 1, 500), Some(13));
        assert_eq!(c.take(1, 1, 1), None);
        assert_eq!(c.peek(1, 1), None);
    }

    #[test]
    fn a_range_of_another_version_is_never_used() {
        let c = AutoIncCache::default();
        c.install(7, 3, 1000, 64, 1);
        // The table was truncated (version 4): DICT counts from 1 again.
        assert_eq!(c.take(7, 4, 1), None);
        assert_eq!(c.peek(7, 4), None);
        c.install(7, 4, 1, 64, 1);
        assert_eq!(c.take(7, 4, 1), Some(2));
        // The old version's values are gone, not merely hidden.
        assert_eq!(c.take(7, 3, 1), None);
        // Other tables are apart.
        assert_eq!(c.take(8, 4, 1), None);
    }

    #[test]
    fn an_explicit_value_moves_the_next_generated_value_past_it() {
        let c = AutoIncCache::default();
        c.install(1, 1, 1, 100, 1);
        // Inside the kept range: no round trip, the next value is above it.
        assert!(!c.note_explicit(1, 1, 50));
        assert_eq!(c.take(1, 1, 1), Some(51));
        // Below what was handed out: nothing changes.
        assert!(!c.note_explicit(1, 1, 10));
        assert_eq!(c.take(1, 1, 1), Some(52));
        // Above everything reserved: DICT must hear of it; the rest of the
        // range is below it and dropped.
        assert!(c.note_explicit(1, 1, 500));
        c.raised(1, 1, 500);
        assert_eq!(c.take(1, 1, 1), None);
        assert!(!c.note_explicit(1, 1, 400), "known to be at or below DICT's counter");
        // No range kept for a version: every explicit value is news.
        assert!(c.note_explicit(1, 2, 3));
    }

    #[test]
    fn the_larger_of_two_ranges_is_kept() {
        let c = AutoIncCache::default();
        c.install(1, 1, 1, 512, 1);
        // Another session needed 600 values at once: its leftover (0) is
        // smaller than the kept 511, which stay.
        c.install(1, 1, 513, 600, 600);
        assert_eq!(c.take(1, 1, 1), Some(2));
        // A leftover smaller than what is kept (300 < 510) is dropped...
        c.install(1, 1, 1113, 1000, 700);
        assert_eq!(c.take(1, 1, 1), Some(3));
        // ... a larger one (900 > 509) replaces the kept range.
        c.install(1, 1, 2113, 1000, 100);
        assert_eq!(c.take(1, 1, 1), Some(2213));
        c.forget(1);
        assert_eq!(c.take(1, 1, 1), None);
        c.install(1, 1, 5000, 10, 1);
        c.clear();
        assert_eq!(c.take(1, 1, 1), None);
    }
}
