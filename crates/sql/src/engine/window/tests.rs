//! Frame bounds and NTILE buckets at their edges.

use super::eval::ntile_bucket;
use super::frame::{frame_of, Dir, EBound, Peers, RangeKeys};
use crate::engine::expr::value::Coll;
use norr_signals::Value;

const ALL: Peers = Peers { start: 0, end: 0 };

fn rows(start: EBound, end: EBound, n: usize) -> Vec<(usize, usize)> {
    (0..n).map(|p| frame_of(&start, &end, p, n, ALL, false, None)).collect()
}

#[test]
fn rows_frames_clamp_to_the_partition() {
    use EBound::*;
    // 1 PRECEDING .. 1 FOLLOWING
    assert_eq!(rows(Rows(Dir::Preceding, 1), Rows(Dir::Following, 1), 4), vec![(0, 2), (0, 3), (1, 4), (2, 4)]);
    // Offsets past either end (and u64::MAX) clamp instead of overflowing.
    assert_eq!(rows(Rows(Dir::Preceding, u64::MAX), Rows(Dir::Following, u64::MAX), 3), vec![(0, 3); 3]);
    // 3 PRECEDING .. 1 PRECEDING: empty for the first row.
    assert_eq!(rows(Rows(Dir::Preceding, 3), Rows(Dir::Preceding, 1), 4), vec![(0, 0), (0, 1), (0, 2), (0, 3)]);
    // 2 FOLLOWING .. 3 FOLLOWING: empty at the end.
    assert_eq!(rows(Rows(Dir::Following, 2), Rows(Dir::Following, 3), 4), vec![(2, 4), (3, 4), (4, 4), (4, 4)]);
    // A frame that ends before it starts is empty, never inverted.
    for (lo, hi) in rows(Rows(Dir::Following, 1), Rows(Dir::Preceding, 1), 5) {
        assert!(lo == hi, "{lo}..{hi}");
    }
    // CURRENT ROW in ROWS is the row, not its peers.
    assert_eq!(rows(UnboundedPreceding, CurrentRow, 3), vec![(0, 1), (0, 2), (0, 3)]);
    assert_eq!(rows(CurrentRow, UnboundedFollowing, 3), vec![(0, 3), (1, 3), (2, 3)]);
}

#[test]
fn rows_frame_of_an_empty_or_single_partition() {
    assert!(rows(EBound::UnboundedPreceding, EBound::UnboundedFollowing, 0).is_empty());
    assert_eq!(rows(EBound::Rows(Dir::Preceding, 5), EBound::Rows(Dir::Following, 5), 1), vec![(0, 1)]);
}

#[test]
fn range_current_row_means_the_peer_group() {
    let peers = [Peers { start: 0, end: 2 }, Peers { start: 0, end: 2 }, Peers { start: 2, end: 3 }];
    let f: Vec<_> = (0..3)
        .map(|p| frame_of(&EBound::UnboundedPreceding, &EBound::CurrentRow, p, 3, peers[p], true, None))
        .collect();
    assert_eq!(f, vec![(0, 2), (0, 2), (0, 3)]);
    let f: Vec<_> =
        (0..3).map(|p| frame_of(&EBound::CurrentRow, &EBound::CurrentRow, p, 3, peers[p], true, None)).collect();
    assert_eq!(f, vec![(0, 2), (0, 2), (2, 3)]);
}

#[test]
fn range_value_bounds_with_nulls_and_both_directions() {
    // Ascending: NULLs first.
    let keys = [Value::Null, Value::Int(1), Value::Int(3), Value::Int(3), Value::Int(7)];
    let asc = RangeKeys { keys: &keys, desc: false, coll: Coll::Ci };
    let p = Peers { start: 2, end: 4 };
    // Row 2 (value 3), 2 PRECEDING .. 1 FOLLOWING: values in [1, 4].
    let f =
        frame_of(&EBound::Value(Some(Value::Int(1))), &EBound::Value(Some(Value::Int(4))), 2, 5, p, true, Some(&asc));
    assert_eq!(f, (1, 4));
    // A bound value past every key: empty at the end, whole at the start.
    let f = frame_of(&EBound::Value(Some(Value::Int(8))), &EBound::UnboundedFollowing, 4, 5, p, true, Some(&asc));
    assert_eq!(f, (5, 5));
    let f = frame_of(&EBound::UnboundedPreceding, &EBound::Value(Some(Value::Int(0))), 1, 5, p, true, Some(&asc));
    assert_eq!(f, (0, 1), "NULL sorts before 0 in an ascending window");
    // The NULL row: its offsets resolve to its peer group (the NULLs).
    let nulls = Peers { start: 0, end: 1 };
    let f = frame_of(&EBound::Value(None), &EBound::Value(None), 0, 5, nulls, true, Some(&asc));
    assert_eq!(f, (0, 1));

    // Descending: 7, 3, 3, 1, NULL. Row 1 (value 3), 1 PRECEDING .. 2
    // FOLLOWING: values from 4 down to 1.
    let keys = [Value::Int(7), Value::Int(3), Value::Int(3), Value::Int(1), Value::Null];
    let desc = RangeKeys { keys: &keys, desc: true, coll: Coll::Ci };
    let p = Peers { start: 1, end: 3 };
    let f =
        frame_of(&EBound::Value(Some(Value::Int(4))), &EBound::Value(Some(Value::Int(1))), 1, 5, p, true, Some(&desc));
    assert_eq!(f, (1, 4));
    // Decimal bounds compare with integer keys.
    let half = Value::Decimal(norr_signals::Decimal { mantissa: 35, scale: 1 });
    let f = frame_of(&EBound::Value(Some(half)), &EBound::CurrentRow, 1, 5, p, true, Some(&desc));
    assert_eq!(f, (1, 3));
}

#[test]
fn ntile_gives_the_first_buckets_one_row_more() {
    let buckets = |m: usize, k: u64| (0..m).map(|p| ntile_bucket(p, m, k)).collect::<Vec<_>>();
    assert_eq!(buckets(9, 4), vec![1, 1, 1, 2, 2, 3, 3, 4, 4]);
    assert_eq!(buckets(3, 5), vec![1, 2, 3]);
    assert_eq!(buckets(4, 1), vec![1, 1, 1, 1]);
    assert_eq!(buckets(5, u64::MAX), vec![1, 2, 3, 4, 5]);
    assert!(buckets(0, 3).is_empty());
}
