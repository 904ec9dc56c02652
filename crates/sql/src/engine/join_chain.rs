//! `c JOIN l JOIN o ON o.id = l.order_id AND o.customer_id = c.id`: a chain
//! of joins without parentheses where an earlier join has no ON.
//!
//! MySQL reads such a chain left to right, `(c JOIN l) JOIN o ON ...`, so the
//! ON may name every table before it (the manual's example of this is
//! `t1 JOIN t2 JOIN t3 ON (i1 = i3)`). sqlparser's MySQL dialect instead
//! nests the tail under the join that has no condition,
//! `c JOIN (l JOIN o ON ...)`, and the ON then cannot see `c` (1054).
//!
//! After the parse, each such paren-less nest is spliced back into the
//! enclosing chain. Only nests the statement wrote without parentheses are
//! touched (checked on the text: the nest's first table follows the JOIN
//! keyword directly), so `c JOIN (l JOIN o ON ...)` keeps MySQL's rule that
//! an ON sees only its own operands. A nest holding a RIGHT JOIN stays as it
//! is: there the two readings differ in which rows are kept, not only in
//! which names are visible, and sqlparser's reading is kept.

use sqlparser::ast::{
    FromTable, Join, JoinConstraint, JoinOperator, Query, SetExpr, Spanned, Statement, TableFactor, TableWithJoins,
    UpdateTableFromKind, VisitMut, VisitorMut,
};
use std::collections::VecDeque;
use std::ops::ControlFlow;

/// Splice the paren-less join nests of `st` (parsed from `sql`) back into
/// their chains. Statements with fewer than two JOINs are not walked.
pub fn flatten(sql: &str, st: &mut Statement) {
    if joins_in(sql) < 2 {
        return;
    }
    let _ = st.visit(&mut Flatten { sql });
}

fn joins_in(sql: &str) -> usize {
    sql.as_bytes().windows(4).filter(|w| w.eq_ignore_ascii_case(b"JOIN")).count()
}

struct Flatten<'a> {
    sql: &'a str,
}

impl VisitorMut for Flatten<'_> {
    type Break = ();
    fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
        self.set_expr(&mut q.body);
        ControlFlow::Continue(())
    }
    fn pre_visit_table_factor(&mut self, f: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::NestedJoin { table_with_joins, .. } = f {
            self.chain(table_with_joins);
        }
        ControlFlow::Continue(())
    }
    fn pre_visit_statement(&mut self, st: &mut Statement) -> ControlFlow<()> {
        match st {
            Statement::Update(u) => {
                self.chain(&mut u.table);
                if let Some(UpdateTableFromKind::BeforeSet(f) | UpdateTableFromKind::AfterSet(f)) = &mut u.from {
                    f.iter_mut().for_each(|t| self.chain(t));
                }
            }
            Statement::Delete(d) => {
                let (FromTable::WithFromKeyword(f) | FromTable::WithoutKeyword(f)) = &mut d.from;
                f.iter_mut().for_each(|t| self.chain(t));
                if let Some(u) = &mut d.using {
                    u.iter_mut().for_each(|t| self.chain(t));
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

impl Flatten<'_> {
    fn set_expr(&self, body: &mut SetExpr) {
        match body {
            SetExpr::Select(sel) => sel.from.iter_mut().for_each(|t| self.chain(t)),
            SetExpr::SetOperation { left, right, .. } => {
                self.set_expr(left);
                self.set_expr(right);
            }
            _ => {}
        }
    }

    /// Splice the paren-less nests of one chain, depth first (a nest's own
    /// tail may be nested again: `a JOIN b JOIN c JOIN d ON .. ON ..`).
    fn chain(&self, twj: &mut TableWithJoins) {
        if !twj.joins.iter().any(|j| self.splices(j)) {
            return;
        }
        let mut todo: VecDeque<Join> = std::mem::take(&mut twj.joins).into();
        let mut out = Vec::with_capacity(todo.len() + 2);
        while let Some(j) = todo.pop_front() {
            if !self.splices(&j) {
                out.push(j);
                continue;
            }
            let Join { relation, global, join_operator } = j;
            let TableFactor::NestedJoin { table_with_joins, .. } = relation else {
                out.push(Join { relation, global, join_operator });
                continue;
            };
            let TableWithJoins { relation, joins } = *table_with_joins;
            for (k, inner) in joins.into_iter().enumerate() {
                todo.insert(k, inner);
            }
            out.push(Join { relation, global, join_operator });
        }
        twj.joins = out;
    }

    /// Whether `j` is an inner join without a condition whose right side is
    /// a nest written without parentheses holding no RIGHT JOIN.
    fn splices(&self, j: &Join) -> bool {
        let conditionless = matches!(
            &j.join_operator,
            JoinOperator::Join(JoinConstraint::None)
                | JoinOperator::Inner(JoinConstraint::None)
                | JoinOperator::StraightJoin(JoinConstraint::None)
        );
        let TableFactor::NestedJoin { table_with_joins: nest, alias: None } = &j.relation else {
            return false;
        };
        conditionless
            && nest.joins.iter().all(|n| {
                !matches!(
                    n.join_operator,
                    JoinOperator::Right(_) | JoinOperator::RightOuter(_) | JoinOperator::FullOuter(_)
                )
            })
            && self.follows_join_keyword(&nest.relation)
    }

    /// Whether the text right before `f` (a table, or a derived table with
    /// its opening parenthesis) is the JOIN keyword: the nest around `f` was
    /// written without parentheses.
    fn follows_join_keyword(&self, f: &TableFactor) -> bool {
        let start = f.span().start;
        let Some(at) = crate::engine::parse_ext::byte_offset(self.sql, start) else {
            return false;
        };
        let mut before = self.sql[..at].trim_end();
        match f {
            TableFactor::Table { .. } => {}
            TableFactor::Derived { .. } => match before.strip_suffix('(') {
                Some(b) => before = b.trim_end(),
                None => return false,
            },
            _ => return false,
        }
        let b = before.as_bytes();
        b.len() >= 4
            && b[b.len() - 4..].eq_ignore_ascii_case(b"JOIN")
            && !b
                .len()
                .checked_sub(5)
                .and_then(|i| b.get(i))
                .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'$')
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::dialect::NorrMySql;
    use sqlparser::parser::Parser;

    fn flattened(sql: &str) -> String {
        let mut st = Parser::parse_sql(&NorrMySql, sql).unwrap().remove(0);
        flatten(sql, &mut st);
        st.to_string()
    }

    #[test]
    fn paren_less_chains_read_left_to_right() {
        assert_eq!(
            flattened("SELECT 1 FROM c JOIN l JOIN o ON o.id = l.oid AND o.cid = c.id"),
            "SELECT 1 FROM c JOIN l JOIN o ON o.id = l.oid AND o.cid = c.id"
        );
        let mut st = Parser::parse_sql(&NorrMySql, "SELECT 1 FROM c JOIN l JOIN o ON o.cid = c.id").unwrap().remove(0);
        flatten("SELECT 1 FROM c JOIN l JOIN o ON o.cid = c.id", &mut st);
        let Statement::Query(q) = &st else { panic!() };
        let SetExpr::Select(s) = q.body.as_ref() else { panic!() };
        assert_eq!(s.from[0].joins.len(), 2, "two joins in one chain, no nest");
        assert!(matches!(s.from[0].joins[1].join_operator, JoinOperator::Join(JoinConstraint::On(_))));
        // Twice nested, over lines, and with a LEFT JOIN in the tail.
        let sql = "select 1 from a join b\n  join c left join d on d.x = a.x on c.y = b.y";
        let mut st = Parser::parse_sql(&NorrMySql, sql).unwrap().remove(0);
        let before = st.to_string();
        flatten(sql, &mut st);
        assert_ne!(st.to_string(), before);
        let sql = "SELECT 1 FROM c JOIN (SELECT 1 AS id) l JOIN o ON o.cid = c.id";
        let mut st = Parser::parse_sql(&NorrMySql, sql).unwrap().remove(0);
        flatten(sql, &mut st);
        let Statement::Query(q) = &st else { panic!() };
        let SetExpr::Select(s) = q.body.as_ref() else { panic!() };
        assert_eq!(s.from[0].joins.len(), 2, "a derived table heads the spliced chain");
    }

    #[test]
    fn written_parentheses_and_right_joins_stay() {
        for sql in [
            "SELECT 1 FROM c JOIN (l JOIN o ON o.cid = c.id)",
            "SELECT 1 FROM c JOIN ( l JOIN o ON o.cid = c.id)",
            "SELECT 1 FROM c JOIN l RIGHT JOIN o ON o.cid = l.id",
        ] {
            let mut st = Parser::parse_sql(&NorrMySql, sql).unwrap().remove(0);
            let before = st.to_string();
            flatten(sql, &mut st);
            assert_eq!(st.to_string(), before, "{sql}");
        }
    }
}
