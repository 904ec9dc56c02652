//! Pushed aggregates at LQH (`ScanSpec::aggregate`).
//!
//! A scan with an aggregate reads its partition as any committed-read scan
//! does (range, filter, the reader's own writes), but instead of handing
//! its rows to TC it folds them, batch by batch, into one state per group,
//! and answers once, when the partition is exhausted, with one partial row
//! per group: the group's values, then one partial result per aggregate.
//! The client merges the partitions' partial rows (COUNTs and SUMs add up,
//! MIN / MAX compare again).
//!
//! The scan asks storage for just the columns the aggregate reads (GROUP BY
//! columns, then the aggregates' arguments); `ScanAgg` reads them by their
//! position in that projection.
//!
//! Everything the request names is checked again here (a peer's request is
//! untrusted): a bad column or type, too many groups, or a sum that leaves
//! the i128 accumulator fails the scan with an error, never a panic.

use norr_signals::coerce::compare_values;
use norr_signals::internal::ScanRows;
use norr_signals::ops::{AggFn, ScanAggregate};
use norr_signals::schema::{ColumnId, TableDef};
use norr_signals::value::{ColumnType, Decimal, Value};
use norr_signals::{ErrorCode, NodeError};
use std::cmp::Ordering;
use std::collections::HashMap;

/// The running aggregate of one partition scan.
pub(crate) struct ScanAgg {
    aggs: Vec<AggFn>,
    max_groups: usize,
    /// Per GROUP BY column: its position in the projected rows, its type.
    group: Vec<(usize, ColumnType)>,
    /// Per aggregate: its argument's position and type (None: COUNT(*)).
    args: Vec<Option<(usize, ColumnType)>>,
    groups: Vec<Group>,
    /// Group key (see `push_key`) -> position in `groups`.
    index: HashMap<Vec<u8>, usize>,
    key: Vec<u8>,
}

struct Group {
    /// The GROUP BY values of the group's first row.
    values: Vec<Value>,
    states: Vec<State>,
}

enum State {
    Count(i64),
    /// The exact sum at the column's scale; None before a non-NULL value.
    Sum(Option<i128>),
    /// MIN / MAX so far; None before a non-NULL value.
    Best(Option<Value>),
}

fn bad(m: String) -> NodeError {
    NodeError::with(ErrorCode::BadAggregate, m)
}

/// Scale at which a summable column's values are added (integers: 0).
fn scale_of(ty: &ColumnType) -> u8 {
    match ty {
        ColumnType::Decimal { scale, .. } => *scale,
        _ => 0,
    }
}

/// An integer or DECIMAL value as a mantissa at `scale`.
fn mantissa_at(v: &Value, scale: u8) -> Result<i128, NodeError> {
    let overflow = || NodeError::with(ErrorCode::AggregateOverflow, format!("{v:?} at scale {scale}"));
    match v {
        Value::Int(i) => {
            10i128.checked_pow(scale as u32).and_then(|p| (*i as i128).checked_mul(p)).ok_or_else(overflow)
        }
        Value::UInt(u) => {
            10i128.checked_pow(scale as u32).and_then(|p| (*u as i128).checked_mul(p)).ok_or_else(overflow)
        }
        Value::Decimal(d) if d.scale <= scale => {
            10i128.checked_pow((scale - d.scale) as u32).and_then(|p| d.mantissa.checked_mul(p)).ok_or_else(overflow)
        }
        other => Err(bad(format!("{other:?} is not a number at scale {scale}"))),
    }
}

/// Append `v`'s group-key encoding: values that are equal as SQL groups
/// them (an integer column's values, a DECIMAL's at the column's scale,
/// dates and times) encode equal, others differ. NULL is a group.
fn push_key(v: &Value, ty: &ColumnType, out: &mut Vec<u8>) -> Result<(), NodeError> {
    match v {
        Value::Null => out.push(0),
        Value::Int(_) | Value::UInt(_) | Value::Decimal(_) => {
            out.push(1);
            out.extend_from_slice(&mantissa_at(v, scale_of(ty))?.to_be_bytes());
        }
        Value::Date(d) => {
            out.push(2);
            out.extend_from_slice(&d.year.to_be_bytes());
            out.extend_from_slice(&[d.month, d.day]);
        }
        Value::Time(t) => {
            out.push(3);
            out.extend_from_slice(&t.to_be_bytes());
        }
        Value::DateTime(dt) => {
            out.push(4);
            out.extend_from_slice(&dt.date.year.to_be_bytes());
            out.extend_from_slice(&[dt.date.month, dt.date.day, dt.hour, dt.minute, dt.second]);
            out.extend_from_slice(&dt.micro.to_be_bytes());
        }
        other => return Err(bad(format!("cannot group by {other:?}"))),
    }
    Ok(())
}

impl ScanAgg {
    /// The aggregate of a scan of `def`, and the columns the scan must
    /// read for it (in the order `fold` expects them).
    pub(crate) fn new(spec: ScanAggregate, def: &TableDef) -> Result<(ScanAgg, Vec<ColumnId>), NodeError> {
        spec.validate(def)?;
        let mut cols: Vec<ColumnId> = Vec::new();
        let mut pos = |c: ColumnId| -> Result<(usize, ColumnType), NodeError> {
            let ty = def.column(c).ok_or_else(|| bad(format!("no column {c}")))?.ty.clone();
            let p = cols.iter().position(|x| *x == c).unwrap_or_else(|| {
                cols.push(c);
                cols.len() - 1
            });
            Ok((p, ty))
        };
        let group = spec.group_by.iter().map(|c| pos(*c)).collect::<Result<Vec<_>, _>>()?;
        let args = spec.aggs.iter().map(|a| a.column().map(&mut pos).transpose()).collect::<Result<Vec<_>, _>>()?;
        if cols.is_empty() {
            // COUNT(*) alone: any one column, so that storage decodes little
            // (an empty projection would mean every column).
            cols.push(def.primary_key.first().copied().unwrap_or(0));
        }
        let agg = ScanAgg {
            aggs: spec.aggs,
            max_groups: spec.max_groups as usize,
            group,
            args,
            groups: Vec::new(),
            index: HashMap::new(),
            key: Vec::new(),
        };
        Ok((agg, cols))
    }

    fn new_states(&self) -> Vec<State> {
        self.aggs
            .iter()
            .map(|a| match a {
                AggFn::CountStar | AggFn::Count(_) => State::Count(0),
                AggFn::Sum(_) => State::Sum(None),
                AggFn::Min(_) | AggFn::Max(_) => State::Best(None),
            })
            .collect()
    }

    /// Fold the scan's rows found so far into the groups (`rows` is left
    /// empty).
    pub(crate) fn fold(&mut self, rows: &mut ScanRows) -> Result<(), NodeError> {
        rows.keys = Default::default();
        for row in std::mem::take(&mut rows.rows) {
            self.fold_row(&row)?;
        }
        Ok(())
    }

    fn cell(row: &[Value], p: usize) -> Result<&Value, NodeError> {
        row.get(p).ok_or_else(|| NodeError::with(ErrorCode::Internal, format!("aggregated row has no column {p}")))
    }

    fn fold_row(&mut self, row: &[Value]) -> Result<(), NodeError> {
        let gi = if self.group.is_empty() {
            if self.groups.is_empty() {
                let states = self.new_states();
                self.groups.push(Group { values: Vec::new(), states });
            }
            0
        } else {
            self.key.clear();
            for (p, ty) in &self.group {
                push_key(Self::cell(row, *p)?, ty, &mut self.key)?;
            }
            match self.index.get(&self.key) {
                Some(i) => *i,
                None => {
                    if self.groups.len() >= self.max_groups {
                        return Err(NodeError::with(
                            ErrorCode::AggregateTooManyGroups,
                            format!("more than {} groups", self.max_groups),
                        ));
                    }
                    let values =
                        self.group.iter().map(|(p, _)| Self::cell(row, *p).cloned()).collect::<Result<_, _>>()?;
                    let states = self.new_states();
                    self.groups.push(Group { values, states });
                    self.index.insert(self.key.clone(), self.groups.len() - 1);
                    self.groups.len() - 1
                }
            }
        };
        let g = &mut self.groups[gi];
        for ((a, arg), st) in self.aggs.iter().zip(&self.args).zip(&mut g.states) {
            let Some((p, ty)) = arg else {
                debug_assert!(matches!(a, AggFn::CountStar));
                if let State::Count(n) = st {
                    *n += 1;
                }
                continue;
            };
            let v = Self::cell(row, *p)?;
            if v.is_null() {
                continue;
            }
            match (a, st) {
                (AggFn::Count(_), State::Count(n)) => *n += 1,
                (AggFn::Sum(_), State::Sum(s)) => {
                    let m = mantissa_at(v, scale_of(ty))?;
                    let sum = s.unwrap_or(0).checked_add(m).ok_or_else(|| {
                        NodeError::with(ErrorCode::AggregateOverflow, "SUM left the data node's accumulator")
                    })?;
                    *s = Some(sum);
                }
                (AggFn::Min(_) | AggFn::Max(_), State::Best(best)) => {
                    let want = if matches!(a, AggFn::Min(_)) { Ordering::Less } else { Ordering::Greater };
                    let better = match best {
                        None => true,
                        Some(b) => {
                            compare_values(v, b, ty).ok_or_else(|| bad(format!("cannot compare {v:?}")))? == want
                        }
                    };
                    if better {
                        *best = Some(v.clone());
                    }
                }
                _ => return Err(NodeError::with(ErrorCode::Internal, "aggregate state of another kind")),
            }
        }
        Ok(())
    }

    /// The partial rows: per group its GROUP BY values, then each
    /// aggregate's partial result. Without GROUP BY exactly one row, also
    /// when no row was read (COUNT 0, the others NULL).
    pub(crate) fn take_partials(&mut self) -> ScanRows {
        if self.group.is_empty() && self.groups.is_empty() {
            let states = self.new_states();
            self.groups.push(Group { values: Vec::new(), states });
        }
        let mut out = ScanRows::default();
        for g in std::mem::take(&mut self.groups) {
            let mut row = g.values;
            for (st, arg) in g.states.into_iter().zip(&self.args) {
                row.push(match st {
                    State::Count(n) => Value::Int(n),
                    State::Sum(None) | State::Best(None) => Value::Null,
                    State::Sum(Some(m)) => {
                        Value::Decimal(Decimal { mantissa: m, scale: arg.as_ref().map_or(0, |(_, ty)| scale_of(ty)) })
                    }
                    State::Best(Some(v)) => v,
                });
            }
            out.push(None, row);
        }
        self.index.clear();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use norr_signals::schema::{ColumnDef, PartitionScheme};

    fn def() -> TableDef {
        TableDef {
            id: 1,
            version: 0,
            name: "db/t".into(),
            columns: vec![
                ColumnDef::new("id", ColumnType::BigInt { unsigned: false }),
                ColumnDef::new("g", ColumnType::Int { unsigned: false }),
                ColumnDef::new("d", ColumnType::Decimal { precision: 10, scale: 2 }),
                ColumnDef::new("s", ColumnType::Varchar { len: 10, collation: norr_signals::value::Collation::Binary }),
            ],
            primary_key: vec![0],
            partitioning: PartitionScheme::Key { columns: vec![] },
            partitions: 1,
            indexes: vec![],
            extra: vec![],
            options: Default::default(),
        }
    }

    fn dec(m: i128) -> Value {
        Value::Decimal(Decimal { mantissa: m, scale: 2 })
    }

    fn run(spec: ScanAggregate, rows: Vec<Vec<Value>>) -> Result<Vec<Vec<Value>>, NodeError> {
        let d = def();
        let (mut agg, cols) = ScanAgg::new(spec, &d)?;
        // Rows as storage projects them.
        let mut batch = ScanRows::default();
        for r in rows {
            batch.push(None, cols.iter().map(|c| r[*c as usize].clone()).collect());
        }
        agg.fold(&mut batch)?;
        assert!(batch.rows.is_empty(), "fold takes the rows");
        Ok(agg.take_partials().rows)
    }

    fn spec(group_by: Vec<ColumnId>, aggs: Vec<AggFn>) -> ScanAggregate {
        ScanAggregate { group_by, aggs, max_groups: 8 }
    }

    #[test]
    fn no_rows_without_group_by_is_one_row_with_null_sum() {
        let all = vec![AggFn::CountStar, AggFn::Count(2), AggFn::Sum(2), AggFn::Min(1), AggFn::Max(2)];
        let got = run(spec(vec![], all.clone()), vec![]).unwrap();
        assert_eq!(got, vec![vec![Value::Int(0), Value::Int(0), Value::Null, Value::Null, Value::Null]]);
        // With GROUP BY: no group, no row.
        assert!(run(spec(vec![1], all), vec![]).unwrap().is_empty());
    }

    #[test]
    fn nulls_are_skipped_and_sums_are_exact() {
        let rows = vec![
            vec![Value::Int(1), Value::Int(7), dec(105), Value::Null],
            vec![Value::Int(2), Value::Int(7), Value::Null, Value::Null],
            vec![Value::Int(3), Value::Null, dec(-1), Value::Null],
            vec![Value::Int(4), Value::Int(7), dec(10), Value::Null],
            vec![Value::Int(5), Value::Null, Value::Null, Value::Null],
        ];
        let aggs = vec![AggFn::CountStar, AggFn::Count(2), AggFn::Sum(2), AggFn::Min(2), AggFn::Max(0), AggFn::Sum(0)];
        let mut got = run(spec(vec![1], aggs), rows).unwrap();
        got.sort_by_key(|r| r[0].as_i64());
        let i = |n: i64| Value::Int(n);
        let d0 = |m: i128| Value::Decimal(Decimal { mantissa: m, scale: 0 });
        assert_eq!(
            got,
            vec![
                vec![Value::Null, i(2), i(1), dec(-1), dec(-1), i(5), d0(8)],
                vec![i(7), i(3), i(2), dec(115), dec(10), i(4), d0(7)],
            ]
        );
    }

    #[test]
    fn too_many_groups_and_overflow_fail_cleanly() {
        let rows: Vec<Vec<Value>> = (0..9).map(|k| vec![Value::Int(k), Value::Int(k), dec(1), Value::Null]).collect();
        let e = run(spec(vec![1], vec![AggFn::CountStar]), rows.clone()).unwrap_err();
        assert_eq!(e.code, ErrorCode::AggregateTooManyGroups);
        assert_eq!(run(spec(vec![1], vec![AggFn::CountStar]), rows[..8].to_vec()).unwrap().len(), 8);
        let big = |_| {
            vec![
                Value::Int(0),
                Value::Int(0),
                Value::Decimal(Decimal { mantissa: i128::MAX / 2 + 1, scale: 2 }),
                Value::Null,
            ]
        };
        let e = run(spec(vec![], vec![AggFn::Sum(2)]), (0..2).map(big).collect()).unwrap_err();
        assert_eq!(e.code, ErrorCode::AggregateOverflow);
    }

    #[test]
    fn bad_specs_are_refused() {
        let d = def();
        for (s, what) in [
            (spec(vec![], vec![AggFn::Sum(3)]), "SUM of a string"),
            (spec(vec![], vec![AggFn::Min(3)]), "MIN of a string"),
            (spec(vec![3], vec![AggFn::CountStar]), "GROUP BY a string"),
            (spec(vec![], vec![AggFn::Count(99)]), "unknown column"),
            (spec(vec![], vec![]), "nothing to compute"),
            (ScanAggregate { max_groups: 0, ..spec(vec![], vec![AggFn::CountStar]) }, "no groups allowed"),
        ] {
            let e = ScanAgg::new(s, &d).err().unwrap_or_else(|| panic!("{what} accepted"));
            assert_eq!(e.code, ErrorCode::BadAggregate, "{what}");
        }
        // COUNT of a string is fine: no value is compared.
        assert!(ScanAgg::new(spec(vec![], vec![AggFn::Count(3)]), &d).is_ok());
    }
}
