//! Frame bounds: which rows of a sorted partition a row's frame covers.
//!
//! Positions are within the partition (0..n); a frame is the half-open
//! range `lo..hi` (empty when `lo >= hi`).

use crate::engine::expr::value::{order_cmp, Coll};
use norr_signals::Value;
use std::cmp::Ordering;

/// A frame bound with its offset evaluated: a row count (ROWS) or the ORDER
/// BY value at the bound (RANGE; computed per row by the caller as the
/// current value minus / plus the offset).
#[derive(Debug, Clone, PartialEq)]
pub enum EBound {
    UnboundedPreceding,
    /// ROWS: this many rows before the current one.
    Rows(Dir, u64),
    /// RANGE: rows whose ORDER BY value is at (or, for the start, after) this
    /// value in the window's order. `None`: the current row's value is NULL,
    /// and the bound is its peer group's edge.
    Value(Option<Value>),
    CurrentRow,
    UnboundedFollowing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    Preceding,
    Following,
}

/// The peer group (rows with equal ORDER BY values) of each position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peers {
    pub start: usize,
    pub end: usize,
}

/// The RANGE frame's ORDER BY key of every position, and its direction.
pub struct RangeKeys<'a> {
    pub keys: &'a [Value],
    pub desc: bool,
    pub coll: Coll,
}

impl RangeKeys<'_> {
    /// Whether `x` sorts strictly before `b` in the window's order.
    fn before(&self, x: &Value, b: &Value) -> bool {
        let o = order_cmp(x, b, self.coll);
        if self.desc {
            o == Ordering::Greater
        } else {
            o == Ordering::Less
        }
    }
    fn after(&self, x: &Value, b: &Value) -> bool {
        let o = order_cmp(x, b, self.coll);
        if self.desc {
            o == Ordering::Less
        } else {
            o == Ordering::Greater
        }
    }
}

/// First position of the frame of row `pos`.
pub fn start_of(b: &EBound, pos: usize, n: usize, peers: Peers, range: bool, keys: Option<&RangeKeys>) -> usize {
    match b {
        EBound::UnboundedPreceding => 0,
        EBound::Rows(Dir::Preceding, k) => pos.saturating_sub(usize::try_from(*k).unwrap_or(usize::MAX)),
        EBound::Rows(Dir::Following, k) => pos.saturating_add(usize::try_from(*k).unwrap_or(usize::MAX)).min(n),
        EBound::CurrentRow => peers_or_row(range, peers.start, pos),
        EBound::Value(None) => peers.start,
        EBound::Value(Some(v)) => match keys {
            Some(k) => k.keys[..n].partition_point(|x| k.before(x, v)),
            None => pos,
        },
        EBound::UnboundedFollowing => n,
    }
}

/// One past the last position of the frame of row `pos`.
pub fn end_of(b: &EBound, pos: usize, n: usize, peers: Peers, range: bool, keys: Option<&RangeKeys>) -> usize {
    match b {
        EBound::UnboundedPreceding => 0,
        EBound::Rows(Dir::Preceding, k) => {
            let k = usize::try_from(*k).unwrap_or(usize::MAX);
            if pos >= k {
                pos - k + 1
            } else {
                0
            }
        }
        EBound::Rows(Dir::Following, k) => {
            pos.saturating_add(usize::try_from(*k).unwrap_or(usize::MAX)).saturating_add(1).min(n)
        }
        EBound::CurrentRow => peers_or_row(range, peers.end, pos + 1),
        EBound::Value(None) => peers.end,
        EBound::Value(Some(v)) => match keys {
            Some(k) => k.keys[..n].partition_point(|x| !k.after(x, v)),
            None => pos + 1,
        },
        EBound::UnboundedFollowing => n,
    }
}

/// CURRENT ROW is the row itself in ROWS frames and its peer group's edge in
/// RANGE frames.
fn peers_or_row(range: bool, peer_edge: usize, row_edge: usize) -> usize {
    if range {
        peer_edge
    } else {
        row_edge
    }
}

/// The frame `lo..hi` of row `pos`. RANGE frames with value offsets pass
/// the partition's ORDER BY `keys`.
pub fn frame_of(
    start: &EBound,
    end: &EBound,
    pos: usize,
    n: usize,
    peers: Peers,
    range: bool,
    keys: Option<&RangeKeys>,
) -> (usize, usize) {
    let lo = start_of(start, pos, n, peers, range, keys);
    let hi = end_of(end, pos, n, peers, range, keys);
    (lo, hi.max(lo))
}
