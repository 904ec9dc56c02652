//! Partial local checkpoints (NDB 7.6's partial LCP, seed 003): the scan that
//! reads what a checkpoint of one partition must write, the tombstones of
//! deleted rows, and the change counters that set the checkpoint speed.
//!
//! A partition's rows are divided into `LCP_PARTS` (2048) parts by fixed page:
//! page `p` is part `p % 2048`, so a row's part is fixed while it lives (an
//! update never moves a row; a delete and a new insert of the same key may
//! land in another part). A checkpoint writes
//! * every row of the parts in its "full" set (a window the caller rotates),
//! * in the other parts only the rows whose row GCI is `>= since_gci`,
//! * and the tombstones: the keys of rows that left a part (deleted) since the
//!   previous `lcp_begin`, each with the part the row was in.
//!
//! Pages with nothing written at `since_gci` or later are skipped in O(1) (each
//! page keeps the highest GCI written on it) unless their part is full.
//!
//! ## Chains
//! A partition has a checkpoint chain once `lcp_begin` or `restore_begin`
//! ran on it. Without one, deletes leave no tombstones (no memory is spent
//! when checkpoints are off) and the next `lcp_begin` writes every part in
//! full whatever set it was given (`LcpScan::full_parts` says what was
//! used). Truncate, an ALTER TABLE that rebuilds rows, `lcp_reset` and a
//! new table end the chain.
//!
//! ## Restoring a chain (what the checkpoint files must allow)
//! For LCPs 1..n of a partition (oldest first) with full sets F_i,
//! tombstones T_i and rows R_i, let start(q) be the last i with q in F_i
//! (the first LCP of a chain is full in every part, so every part has one).
//! Then `restore_begin`; for i in 1..=n: each tombstone of T_i with
//! i >= start(part) by `restore_delete`, then each row of R_i with
//! i >= start(part) by `restore_put` (tombstones of an LCP before its rows);
//! then the REDO log from the oldest GCI the last LCP may lack
//! (`redo_put` / `redo_delete`); then `restore_finish`. The rows land in the
//! same parts as in the files, so the restored node continues the chain: its
//! next LCP may be partial and uses `since_gci` = the since of the LCP after
//! the last one restored would have used (the GCI the REDO replay started
//! from is always safe).
//!
//! ## Fuzzy
//! The scan is fuzzy, as NDB's: rows written while it runs may or may not be
//! in it (the REDO log from the checkpoint's start repairs that), a row that
//! exists unchanged through the whole scan is returned exactly once, and no
//! row is returned twice (rows never move). A key deleted and inserted again
//! during the scan may appear twice, in two parts: restore keeps the later
//! one and records the move as a tombstone.
//!
//! ## Memory
//! Tombstones are kept compactly (part, GCI, the key in the row format of the
//! primary-key columns: ~15 bytes for a BIGINT key) and charged to data
//! memory. A committed delete cannot fail, so tombstones are never refused:
//! they may take `used_bytes` past the limit (inserts then get `TableFull`)
//! until `lcp_begin` hands them out.

use crate::fixed_pages::{FixedPages, RowId, LCP_PARTS};
use crate::row_format::{get_varint, put_varint, RowLayout};
use crate::table_store::{err, TableStore};
use crate::Storage;
use norr_signals::value::Value;
use norr_signals::{ErrorCode, NodeError, PartitionId, TableId};

/// A set of checkpoint parts (0..2048).
#[derive(Clone, PartialEq, Eq)]
pub struct PartSet {
    bits: [u64; LCP_PARTS as usize / 64],
}

impl PartSet {
    pub const fn empty() -> PartSet {
        PartSet { bits: [0; LCP_PARTS as usize / 64] }
    }

    pub const fn all() -> PartSet {
        PartSet { bits: [!0; LCP_PARTS as usize / 64] }
    }

    /// `count` consecutive parts from `first`, wrapping at 2048 (`first` is
    /// taken modulo 2048, `count` capped at 2048): the rotating window of
    /// full parts.
    pub fn window(first: u32, count: u32) -> PartSet {
        let mut s = PartSet::empty();
        for i in 0..count.min(LCP_PARTS) {
            s.insert(((first % LCP_PARTS + i) % LCP_PARTS) as u16);
        }
        s
    }

    /// Add a part (panics if it is not below 2048).
    pub fn insert(&mut self, part: u16) {
        assert!((part as u32) < LCP_PARTS, "checkpoint part {part} out of range");
        self.bits[part as usize / 64] |= 1 << (part % 64);
    }

    pub fn contains(&self, part: u16) -> bool {
        (part as u32) < LCP_PARTS && self.bits[part as usize / 64] & (1 << (part % 64)) != 0
    }

    pub fn len(&self) -> u32 {
        self.bits.iter().map(|w| w.count_ones()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn is_all(&self) -> bool {
        self.len() == LCP_PARTS
    }

    /// The parts, ascending.
    pub fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        (0..LCP_PARTS as u16).filter(|&p| self.contains(p))
    }
}

impl Default for PartSet {
    fn default() -> PartSet {
        PartSet::empty()
    }
}

impl std::fmt::Debug for PartSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Ranges, not 2048 booleans.
        let mut ranges = Vec::new();
        let mut it = self.iter().peekable();
        while let Some(a) = it.next() {
            let mut b = a;
            while it.peek() == Some(&(b + 1)) {
                b = it.next().expect("peeked");
            }
            ranges.push(if a == b { format!("{a}") } else { format!("{a}-{b}") });
        }
        write!(f, "PartSet[{}]", ranges.join(","))
    }
}

/// One row a checkpoint writes: its part, its row GCI and the whole row
/// (table column order).
#[derive(Debug, Clone, PartialEq)]
pub struct LcpRow {
    pub lcp_part: u16,
    pub gci: u64,
    pub row: Vec<Value>,
}

/// The key of a row that left checkpoint part `lcp_part` (deleted, or moved
/// by a restore), by a transaction of GCI `gci`. `key` holds the primary-key
/// values in primary-key column order.
#[derive(Debug, Clone, PartialEq)]
pub struct Tombstone {
    pub lcp_part: u16,
    pub gci: u64,
    pub key: Vec<Value>,
}

/// Change counters of one partition since its last `lcp_begin` (for the
/// adaptive checkpoint speed), and its current size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LcpStats {
    /// Row writes (inserts, updates, deletes, restores) since the last
    /// `lcp_begin` (a row written twice counts twice).
    pub rows_changed: u64,
    /// Stored bytes those writes wrote (fixed slot and var payload; a delete
    /// counts its key).
    pub bytes_changed: u64,
    /// Lowest GCI an insert or update since the last `lcp_begin` was tagged
    /// with: the next `lcp_begin` must not pass a `since_gci` above it.
    pub oldest_gci_written: Option<u64>,
    /// Tombstones waiting for the next `lcp_begin`, and their bytes.
    pub tombstones: u64,
    pub tombstone_bytes: u64,
    /// Live rows and allocated fixed pages of the partition now.
    pub rows: u64,
    pub pages: u64,
    /// The partition has a checkpoint chain (see the module doc).
    pub chain: bool,
}

/// A partition's deleted keys, appended compactly: per entry the part (u16
/// LE), the GCI (u32 LE), the key's fixed slot in the primary-key layout, a
/// LEB128 length and the key's var payload.
#[derive(Default)]
pub(crate) struct TombstoneLog {
    bytes: Vec<u8>,
    count: u64,
}

impl TombstoneLog {
    pub fn push(&mut self, layout: &RowLayout, lcp_part: u16, gci: u32, key: &[Value]) {
        let at = self.bytes.len();
        self.bytes.extend_from_slice(&lcp_part.to_le_bytes());
        self.bytes.extend_from_slice(&gci.to_le_bytes());
        let slot_at = self.bytes.len();
        self.bytes.resize(slot_at + layout.slot_size, 0);
        layout.write_fixed(key, &mut self.bytes[slot_at..]);
        let payload = layout.var_payload(key);
        put_varint(&mut self.bytes, payload.len() as u64);
        self.bytes.extend_from_slice(&payload);
        self.count += 1;
        debug_assert!(self.bytes.len() > at);
    }

    pub fn len(&self) -> u64 {
        self.count
    }

    pub fn byte_len(&self) -> u64 {
        self.bytes.len() as u64
    }

    pub fn footprint(&self) -> u64 {
        self.bytes.capacity() as u64
    }

    /// Every tombstone, oldest first.
    pub fn decode(&self, layout: &RowLayout) -> Vec<Tombstone> {
        let mut out = Vec::with_capacity(self.count as usize);
        let b = &self.bytes;
        let mut pos = 0;
        while pos < b.len() {
            let lcp_part = u16::from_le_bytes([b[pos], b[pos + 1]]);
            let gci = u32::from_le_bytes(b[pos + 2..pos + 6].try_into().expect("4 bytes"));
            pos += 6;
            let slot = &b[pos..pos + layout.slot_size];
            pos += layout.slot_size;
            let (len, n) = get_varint(&b[pos..]);
            pos += n;
            let payload = &b[pos..pos + len as usize];
            pos += len as usize;
            let mut key = Vec::new();
            layout.read_row(slot, payload, &mut key);
            out.push(Tombstone { lcp_part, gci: gci as u64, key });
        }
        assert_eq!(out.len() as u64, self.count, "tombstone log corrupt");
        out
    }

    fn take(&mut self) -> TombstoneLog {
        std::mem::take(self)
    }
}

/// What changed since the last `lcp_begin`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ChangeStats {
    rows: u64,
    bytes: u64,
    oldest_gci: Option<u32>,
}

impl ChangeStats {
    fn note(&mut self, bytes: usize, gci: Option<u32>) {
        self.rows += 1;
        self.bytes += bytes as u64;
        if let Some(g) = gci {
            self.oldest_gci = Some(self.oldest_gci.map_or(g, |o| o.min(g)));
        }
    }

    fn merge(&mut self, older: ChangeStats) {
        self.rows += older.rows;
        self.bytes += older.bytes;
        self.oldest_gci = match (self.oldest_gci, older.oldest_gci) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// Checkpoint state of one partition.
#[derive(Default)]
pub(crate) struct LcpState {
    /// A checkpoint chain exists (see the module doc): deletes leave
    /// tombstones, and the next checkpoint may be partial.
    pub chain: bool,
    /// Id of the partition's current checkpoint scan (the last `lcp_begin`).
    pub active_scan: Option<u64>,
    pub tombstones: TombstoneLog,
    pub changes: ChangeStats,
    /// Writes replayed from the REDO log during a restore. They are not in
    /// the partition's checkpoint files, only in the log, and the log is
    /// released before the start of every round the system file records,
    /// so the next checkpoint must take them (a partition left "unchanged"
    /// would keep a checkpoint without them, and the restart after the log
    /// moved on would lose them).
    pub replayed: ChangeStats,
}

impl LcpState {
    pub fn footprint(&self) -> u64 {
        self.tombstones.footprint()
    }

    /// A row write of `bytes` stored bytes; `gci` for inserts and updates
    /// (None for deletes: their tombstone is written whatever `since_gci`).
    pub fn note_write(&mut self, bytes: usize, gci: Option<u32>) {
        self.changes.note(bytes, gci);
    }

    /// A write replayed from the REDO log at a restore: besides
    /// `note_write`, it stays a change for the next checkpoint (see
    /// `replayed`).
    pub fn note_replayed(&mut self, bytes: usize, gci: Option<u32>) {
        self.replayed.note(bytes, gci);
    }

    /// End the chain: the next checkpoint is full, tombstones are dropped,
    /// a running scan is invalid.
    pub fn reset_chain(&mut self) {
        self.chain = false;
        self.active_scan = None;
        self.tombstones = TombstoneLog::default();
    }
}

/// A resumable checkpoint scan of one partition (`Storage::lcp_begin`). It
/// holds a position, never a reference into storage.
#[derive(Debug, Clone)]
pub struct LcpScan {
    table: TableId,
    part: PartitionId,
    id: u64,
    full: PartSet,
    /// lcp_begin wrote every part because the partition had no chain.
    forced_full: bool,
    since_gci: u64,
    /// Next row position to look at (a RowId, as u64 so it can pass the end).
    next: u64,
    done: bool,
    /// Counters before lcp_begin reset them (lcp_abandon gives them back).
    changes_before: ChangeStats,
    pages_examined: u64,
    pages_skipped: u64,
    rows_examined: u64,
    rows_returned: u64,
    max_gci: u64,
}

impl LcpScan {
    pub fn table(&self) -> TableId {
        self.table
    }
    pub fn partition(&self) -> PartitionId {
        self.part
    }
    /// The parts this checkpoint writes in full: the set given to
    /// `lcp_begin`, or every part when the partition had no chain. Record
    /// this set, not the one asked for.
    pub fn full_parts(&self) -> &PartSet {
        &self.full
    }
    pub fn since_gci(&self) -> u64 {
        self.since_gci
    }
    pub fn is_done(&self) -> bool {
        self.done
    }
    /// Fixed pages whose rows were looked at.
    pub fn pages_examined(&self) -> u64 {
        self.pages_examined
    }
    /// Fixed pages skipped without looking at a row (unchanged since
    /// `since_gci` and not in a full part).
    pub fn pages_skipped(&self) -> u64 {
        self.pages_skipped
    }
    pub fn rows_examined(&self) -> u64 {
        self.rows_examined
    }
    pub fn rows_returned(&self) -> u64 {
        self.rows_returned
    }
    /// Highest row GCI among the rows returned so far (0 if none).
    pub fn max_gci(&self) -> u64 {
        self.max_gci
    }
}

/// `lcp_next` looks at no more than this many live rows per row it may
/// return, so one call stays short when few rows qualify.
const EXAMINE_PER_ROW: usize = 16;

pub(crate) fn check_gci(gci: u64) -> Result<u32, NodeError> {
    u32::try_from(gci)
        .map_err(|_| err(ErrorCode::Internal, format!("GCI {gci} is out of range (row GCIs are kept as u32)")))
}

fn stale_scan(table: TableId, part: PartitionId) -> NodeError {
    err(
        ErrorCode::Internal,
        format!(
            "checkpoint scan of table {table} partition {part} is no longer valid (the table was truncated, \
             altered, dropped or restored, its chain reset, or a newer checkpoint began): start a new checkpoint"
        ),
    )
}

impl Storage {
    /// The GCI that following insert / update / delete / put calls tag rows
    /// (and tombstones) with: the GCI of the committing transaction. Panics
    /// above u32::MAX (a GCI that large is a bug upstream: 2-second GCIs
    /// reach it after 272 years).
    pub fn set_commit_gci(&mut self, gci: u64) {
        self.commit_gci = u32::try_from(gci).unwrap_or_else(|_| panic!("commit GCI {gci} does not fit in u32"));
    }

    pub fn commit_gci(&self) -> u64 {
        self.commit_gci as u64
    }

    /// GCI of the transaction that last wrote a live row; None if the table,
    /// partition or row does not exist.
    pub fn row_gci(&self, table: TableId, part: PartitionId, row: RowId) -> Option<u64> {
        let t = self.tables.get(&table)?;
        let f = t.parts.get(part as usize)?.fixed();
        f.is_live(row).then(|| f.gci(row) as u64)
    }

    /// Checkpoint part of a live row (None if it does not exist).
    pub fn lcp_part_of(&self, table: TableId, part: PartitionId, row: RowId) -> Option<u16> {
        let t = self.tables.get(&table)?;
        let f = t.parts.get(part as usize)?.fixed();
        f.is_live(row).then(|| f.part_of(row))
    }

    /// Begin a checkpoint of one partition: returns a cursor for `lcp_next`
    /// and the tombstones recorded since the previous `lcp_begin` (oldest
    /// first; storage forgets them). Rows of parts in `full_parts` are all
    /// returned, in other parts those with row GCI >= `since_gci`. Without
    /// a chain every part is full (see `LcpScan::full_parts`). A newer
    /// `lcp_begin` on the partition invalidates this scan.
    ///
    /// `since_gci` must be at most the GCI of every insert or update since
    /// the previous `lcp_begin` (commits of an older GCI can still arrive
    /// after a GCI switch, so the oldest GCI not complete when the previous
    /// checkpoint began is the safe choice); a larger one is refused
    /// (`Internal`), since rows would be missed (`LcpStats::oldest_gci_written`).
    pub fn lcp_begin(
        &mut self,
        table: TableId,
        part: PartitionId,
        full_parts: PartSet,
        since_gci: u64,
    ) -> Result<(LcpScan, Vec<Tombstone>), NodeError> {
        let id = self.next_lcp_scan;
        let t = self.tables.get_mut(&table).ok_or_else(|| crate::no_table(table))?;
        let pi = t.part_index(part)?;
        if t.restoring {
            return Err(t.restoring_error());
        }
        let lcp = &t.parts[pi].lcp;
        let forced_full = !lcp.chain;
        if !forced_full {
            if let Some(oldest) = lcp.changes.oldest_gci {
                if since_gci > oldest as u64 {
                    return Err(err(
                        ErrorCode::Internal,
                        format!(
                            "checkpoint of table {} partition {part}: since_gci {since_gci} is above GCI {oldest} \
                             of a row written since the previous checkpoint began (it would be missed)",
                            t.def.name
                        ),
                    ));
                }
            }
        }
        self.next_lcp_scan += 1;
        let before = t.parts[pi].footprint();
        let lcp = &mut t.parts[pi].lcp;
        let log = lcp.tombstones.take();
        let changes_before = std::mem::take(&mut lcp.changes);
        lcp.chain = true;
        lcp.active_scan = Some(id);
        let tombstones = log.decode(&t.key_layout);
        drop(log);
        let delta = t.parts[pi].footprint() as i64 - before as i64;
        debug_assert!(delta <= 0);
        t.bytes = (t.bytes as i64 + delta) as u64;
        self.apply_delta(delta);
        let scan = LcpScan {
            table,
            part,
            id,
            full: if forced_full { PartSet::all() } else { full_parts },
            forced_full,
            since_gci,
            next: 0,
            done: false,
            changes_before,
            pages_examined: 0,
            pages_skipped: 0,
            rows_examined: 0,
            rows_returned: 0,
            max_gci: 0,
        };
        Ok((scan, tombstones))
    }

    /// Append up to `max_rows` (at least 1) checkpoint rows to `out`; true
    /// when the partition is done. May return fewer rows while not done
    /// (it looks at no more than 16 rows per row it may return). Errors if
    /// the scan is no longer valid (see `lcp_begin`; the table dropped,
    /// truncated or rebuilt).
    pub fn lcp_next(&self, scan: &mut LcpScan, max_rows: usize, out: &mut Vec<LcpRow>) -> Result<bool, NodeError> {
        let t = self.t(scan.table)?;
        let pi = t.part_index(scan.part)?;
        if t.parts[pi].lcp.active_scan != Some(scan.id) {
            return Err(stale_scan(scan.table, scan.part));
        }
        if scan.done {
            return Ok(true);
        }
        let max_rows = max_rows.max(1);
        let examine_limit = max_rows.saturating_mul(EXAMINE_PER_ROW);
        let fixed = t.parts[pi].fixed();
        let spp = fixed.slots_per_page() as u64;
        let (mut returned, mut examined) = (0usize, 0usize);
        while returned < max_rows && examined < examine_limit {
            let page = scan.next / spp;
            if page >= fixed.page_count() as u64 {
                scan.done = true;
                break;
            }
            let page = page as u32;
            let slot = (scan.next % spp) as u32;
            let lcp_part = (page % LCP_PARTS) as u16;
            let full = scan.full.contains(lcp_part);
            let skip = match fixed.page_max_gci(page) {
                None => true,
                Some(g) => !full && (g as u64) < scan.since_gci,
            };
            if skip {
                if fixed.page_max_gci(page).is_some() {
                    scan.pages_skipped += 1;
                }
                scan.next = (page as u64 + 1) * spp;
                continue;
            }
            if slot == 0 {
                scan.pages_examined += 1;
            }
            let Some(r) = fixed.next_live_in_page(page, slot) else {
                scan.next = (page as u64 + 1) * spp;
                continue;
            };
            examined += 1;
            scan.rows_examined += 1;
            scan.next = r as u64 + 1;
            let gci = fixed.gci(r) as u64;
            if full || gci >= scan.since_gci {
                out.push(LcpRow { lcp_part, gci, row: t.read(pi, r) });
                returned += 1;
                scan.rows_returned += 1;
                scan.max_gci = scan.max_gci.max(gci);
            }
        }
        Ok(scan.done)
    }

    /// Give back a checkpoint that could not be completed (its files were
    /// not written), with the tombstones `lcp_begin` returned: they go back
    /// in front of the ones recorded since, the change counters are merged
    /// back, and if `lcp_begin` forced every part full the next one will
    /// too. The next checkpoint must then use the `since_gci` this one used.
    /// A no-op if the partition's chain ended meanwhile (truncate, rebuild,
    /// drop: the next checkpoint is full anyway); an error if a newer
    /// checkpoint began (its tombstones would be lost: a caller bug).
    pub fn lcp_abandon(&mut self, scan: LcpScan, tombstones: Vec<Tombstone>) -> Result<(), NodeError> {
        let Some(t) = self.tables.get_mut(&scan.table) else {
            return Ok(());
        };
        let pi = t.part_index(scan.part)?;
        let lcp = &t.parts[pi].lcp;
        if lcp.active_scan != Some(scan.id) {
            if !lcp.chain {
                return Ok(());
            }
            return Err(stale_scan(scan.table, scan.part));
        }
        for tb in &tombstones {
            if tb.lcp_part as u32 >= LCP_PARTS || tb.key.len() != t.pk.cols.len() {
                return Err(err(ErrorCode::Internal, "lcp_abandon: tombstones not from this partition's lcp_begin"));
            }
            check_gci(tb.gci)?;
        }
        let before = t.parts[pi].footprint();
        let mut log = TombstoneLog::default();
        for tb in &tombstones {
            log.push(&t.key_layout, tb.lcp_part, tb.gci as u32, &tb.key);
        }
        let lcp = &mut t.parts[pi].lcp;
        let newer = lcp.tombstones.take();
        log.bytes.extend_from_slice(&newer.bytes);
        log.count += newer.count;
        lcp.tombstones = log;
        lcp.changes.merge(scan.changes_before);
        lcp.active_scan = None;
        if scan.forced_full {
            lcp.chain = false;
        }
        let delta = t.parts[pi].footprint() as i64 - before as i64;
        t.bytes = (t.bytes as i64 + delta) as u64;
        self.apply_delta(delta);
        Ok(())
    }

    /// End a partition's checkpoint chain: its tombstones are dropped, deletes
    /// leave none until the next `lcp_begin`, which writes every part (for a
    /// durability layer that starts its files afresh).
    pub fn lcp_reset(&mut self, table: TableId, part: PartitionId) -> Result<(), NodeError> {
        let t = self.tables.get_mut(&table).ok_or_else(|| crate::no_table(table))?;
        let pi = t.part_index(part)?;
        let before = t.parts[pi].footprint();
        t.parts[pi].lcp.reset_chain();
        let delta = t.parts[pi].footprint() as i64 - before as i64;
        t.bytes = (t.bytes as i64 + delta) as u64;
        self.apply_delta(delta);
        Ok(())
    }

    /// Change counters and size of a partition (cheap).
    pub fn lcp_stats(&self, table: TableId, part: PartitionId) -> Result<LcpStats, NodeError> {
        let t = self.t(table)?;
        let p = &t.parts[t.part_index(part)?];
        let f: &FixedPages = p.fixed();
        Ok(LcpStats {
            rows_changed: p.lcp.changes.rows,
            bytes_changed: p.lcp.changes.bytes,
            oldest_gci_written: p.lcp.changes.oldest_gci.map(u64::from),
            tombstones: p.lcp.tombstones.len(),
            tombstone_bytes: p.lcp.tombstones.byte_len(),
            rows: f.live_rows(),
            pages: f.allocated_pages(),
            chain: p.lcp.chain,
        })
    }

    /// Tombstones held by every partition of every table.
    pub fn tombstone_count(&self) -> u64 {
        self.tables.values().flat_map(|t| &t.parts).map(|p| p.lcp.tombstones.len()).sum()
    }
}

impl TableStore {
    /// Check the tombstone logs decode (tests).
    pub(crate) fn check_lcp_invariants(&self) {
        for p in &self.parts {
            let n = p.lcp.tombstones.decode(&self.key_layout).len() as u64;
            assert_eq!(n, p.lcp.tombstones.len());
            assert!(p.lcp.chain || p.lcp.tombstones.len() == 0, "tombstones without a checkpoint chain");
        }
    }
}
