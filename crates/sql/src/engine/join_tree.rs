//! The FROM clause as a join tree (MySQL 8.0 rules), for FROM clauses the
//! flat left-deep path in `query::compile_block` does not take: parenthesized
//! joins (`a LEFT JOIN (b JOIN c ON ..) ON ..`) and RIGHT JOIN anywhere.
//!
//! Only the shape lives here; `join_plan` turns a tree into sources, ON
//! conditions and NULL-extended nests.
//!
//! * Commas bind weaker than JOIN: `a, b JOIN c ON p` is `a, (b JOIN c ON p)`
//!   (sqlparser already parses it that way: one `TableWithJoins` per comma item).
//! * `x RIGHT JOIN y ON p` is stored as `y LEFT JOIN x ON p`, as MySQL rewrites
//!   it; each leaf keeps its written position (`ordinal`) so `SELECT *` lists
//!   columns in the order the statement names the tables.

use crate::types::SqlError;
use sqlparser::ast::{JoinConstraint, JoinOperator, TableFactor, TableWithJoins};

/// MySQL's limit on tables in one join (ER_TOO_MANY_TABLES).
pub const MAX_JOIN_TABLES: usize = 61;

pub enum JoinNode<'a> {
    /// A table, view, CTE or derived table (never a `NestedJoin`).
    Leaf { factor: &'a TableFactor, ordinal: usize },
    Join {
        left: Box<JoinNode<'a>>,
        right: Box<JoinNode<'a>>,
        /// LEFT JOIN (RIGHT JOIN after the swap): `right` is NULL-extended.
        outer: bool,
        /// None for a comma.
        cond: Option<&'a JoinConstraint>,
    },
}

/// 1116 when a FROM clause names more tables than MySQL joins.
pub fn check_table_count(n: usize) -> Result<(), SqlError> {
    if n > MAX_JOIN_TABLES {
        return Err(SqlError::new(
            1116,
            "HY000",
            format!("Too many tables; MySQL can only use {MAX_JOIN_TABLES} tables in a join"),
        ));
    }
    Ok(())
}

/// Whether the FROM clause needs the tree path: a parenthesized join, or a
/// RIGHT JOIN that is not the first join of its item (the flat path runs
/// `a RIGHT JOIN b ON ..` at the head of an item itself).
pub fn needs_tree(from: &[TableWithJoins]) -> bool {
    from.iter().any(|twj| {
        nested_with_joins(&twj.relation)
            || twj.joins.iter().enumerate().any(|(i, j)| {
                nested_with_joins(&j.relation)
                    || (i > 0 && matches!(j.join_operator, JoinOperator::Right(_) | JoinOperator::RightOuter(_)))
            })
    })
}

fn nested_with_joins(f: &TableFactor) -> bool {
    match f {
        TableFactor::NestedJoin { table_with_joins, .. } => {
            !table_with_joins.joins.is_empty() || nested_with_joins(&table_with_joins.relation)
        }
        _ => false,
    }
}

/// Build the tree of a FROM clause (non-empty). Leaves are numbered in
/// written order.
pub fn build(from: &[TableWithJoins]) -> Result<JoinNode<'_>, SqlError> {
    let mut ordinal = 0;
    let mut items = from.iter();
    let Some(first) = items.next() else {
        return Err(SqlError::internal("join tree of an empty FROM"));
    };
    let mut tree = item(first, &mut ordinal)?;
    for twj in items {
        let right = item(twj, &mut ordinal)?;
        tree = JoinNode::Join { left: Box::new(tree), right: Box::new(right), outer: false, cond: None };
    }
    check_table_count(ordinal)?;
    Ok(tree)
}

/// One comma item: a factor and its left-deep joins.
fn item<'a>(twj: &'a TableWithJoins, ordinal: &mut usize) -> Result<JoinNode<'a>, SqlError> {
    let mut tree = factor(&twj.relation, ordinal)?;
    for j in &twj.joins {
        let right = factor(&j.relation, ordinal)?;
        let (outer, swap, cond) = match &j.join_operator {
            JoinOperator::Join(c)
            | JoinOperator::Inner(c)
            | JoinOperator::CrossJoin(c)
            | JoinOperator::StraightJoin(c) => (false, false, c),
            JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => (true, false, c),
            JoinOperator::Right(c) | JoinOperator::RightOuter(c) => {
                if !matches!(c, JoinConstraint::On(_)) {
                    // The merged USING column of a RIGHT JOIN is the right
                    // table's; the USING code merges into the left one.
                    return Err(SqlError::unsupported(
                        "RIGHT JOIN with USING or NATURAL (write it as a LEFT JOIN with the tables swapped)",
                    ));
                }
                (true, true, c)
            }
            other => {
                let what = format!("{other:?}");
                let kind = what.split('(').next().unwrap_or("this kind of");
                return Err(SqlError::unsupported(format!("{kind} join")));
            }
        };
        let (left, right) = if swap { (right, tree) } else { (tree, right) };
        tree = JoinNode::Join { left: Box::new(left), right: Box::new(right), outer, cond: Some(cond) };
    }
    Ok(tree)
}

fn factor<'a>(f: &'a TableFactor, ordinal: &mut usize) -> Result<JoinNode<'a>, SqlError> {
    match f {
        TableFactor::NestedJoin { table_with_joins, alias } => {
            if let Some(a) = alias {
                // MySQL's grammar has no alias for a parenthesized join.
                return Err(SqlError::parse(format!(
                    "You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near '{a}'"
                )));
            }
            item(table_with_joins, ordinal)
        }
        _ => {
            let n = JoinNode::Leaf { factor: f, ordinal: *ordinal };
            *ordinal += 1;
            // Bound the work before planning: a FROM with thousands of
            // tables fails here, not after resolving them all.
            check_table_count(*ordinal)?;
            Ok(n)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::dialect::NorrMySql;
    use sqlparser::ast::{SetExpr, Statement};
    use sqlparser::parser::Parser;

    fn from_of(sql: &str) -> Vec<TableWithJoins> {
        let st = Parser::parse_sql(&NorrMySql, sql).expect("parses");
        let Statement::Query(q) = &st[0] else { panic!("not a query") };
        let SetExpr::Select(s) = q.body.as_ref() else { panic!("not a select") };
        s.from.clone()
    }

    /// Leaves in execution order as (ordinal, outer-join depth).
    fn shape(n: &JoinNode, depth: usize, out: &mut Vec<(usize, usize)>) {
        match n {
            JoinNode::Leaf { ordinal, .. } => out.push((*ordinal, depth)),
            JoinNode::Join { left, right, outer, .. } => {
                shape(left, depth, out);
                shape(right, depth + usize::from(*outer), out);
            }
        }
    }

    #[test]
    fn flat_chains_stay_on_the_flat_path() {
        assert!(!needs_tree(&from_of("SELECT * FROM a JOIN b ON a.x = b.x LEFT JOIN c ON c.y = b.y")));
        assert!(!needs_tree(&from_of("SELECT * FROM a RIGHT JOIN b ON a.x = b.x, c")));
        assert!(needs_tree(&from_of("SELECT * FROM a LEFT JOIN (b JOIN c ON b.x = c.x) ON a.x = b.x")));
        assert!(needs_tree(&from_of("SELECT * FROM a JOIN b ON a.x = b.x RIGHT JOIN c ON c.y = b.y")));
    }

    #[test]
    fn right_join_swaps_operands_and_keeps_written_order() {
        let from = from_of("SELECT * FROM a JOIN b ON a.x = b.x RIGHT JOIN (c LEFT JOIN d ON c.z = d.z) ON c.y = b.y");
        let t = build(&from).expect("builds");
        let mut leaves = Vec::new();
        shape(&t, 0, &mut leaves);
        // c, d run first; (a JOIN b) is the NULL-extended side.
        assert_eq!(leaves, vec![(2, 0), (3, 1), (0, 1), (1, 1)]);
    }

    #[test]
    fn too_many_tables() {
        let names: Vec<String> = (0..62).map(|i| format!("t{i}")).collect();
        let from = from_of(&format!("SELECT 1 FROM {}", names.join(", ")));
        let err = build(&from).err().expect("62 tables are refused");
        assert_eq!(err.code, 1116);
        let from = from_of(&format!("SELECT 1 FROM {}", names[..61].join(", ")));
        assert!(build(&from).is_ok());
    }
}
