//! `FROM DUAL`: MySQL's name for "no table" (`SELECT 1 FROM DUAL`, the
//! validation query of many connection pools). sqlparser reads it as a table
//! named DUAL; a query block whose whole FROM is an unquoted, unaliased DUAL
//! is turned into one without FROM before anything resolves tables. A DUAL
//! beside other tables is left alone, so it names a real table as MySQL's
//! grammar would refuse it anyway.

use sqlparser::ast::{Query, SetExpr, Statement, TableFactor, VisitMut, VisitorMut};
use std::ops::ControlFlow;

struct StripDual;

fn strip_set_expr(body: &mut SetExpr) {
    match body {
        SetExpr::Select(sel) => {
            let only_dual = match sel.from.as_slice() {
                [twj] if twj.joins.is_empty() => matches!(&twj.relation,
                    TableFactor::Table { name, alias: None, args: None, .. }
                        if name.0.len() == 1
                            && name.0[0].as_ident().is_some_and(|i| i.quote_style.is_none() && i.value.eq_ignore_ascii_case("dual"))),
                _ => false,
            };
            if only_dual {
                sel.from.clear();
            }
        }
        SetExpr::SetOperation { left, right, .. } => {
            strip_set_expr(left);
            strip_set_expr(right);
        }
        _ => {}
    }
}

impl VisitorMut for StripDual {
    type Break = ();
    fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
        strip_set_expr(&mut q.body);
        ControlFlow::Continue(())
    }
}

/// Drop `FROM DUAL` from every query block of `st`. `sql` is its text: most
/// statements do not mention DUAL and are not walked.
pub fn strip(sql: &str, st: &mut Statement) {
    if crate::engine::parse_ext::mentions(sql, b"dual") {
        let _ = st.visit(&mut StripDual);
    }
}

/// `strip` for a query parsed on its own (a view's body).
pub fn strip_query(q: &mut Query) {
    let _ = q.visit(&mut StripDual);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::dialect::NorrMySql;
    use sqlparser::parser::Parser;

    fn rewritten(sql: &str) -> String {
        let mut st = Parser::parse_sql(&NorrMySql, sql).unwrap().remove(0);
        strip(sql, &mut st);
        st.to_string()
    }

    #[test]
    fn only_a_lone_unquoted_dual_goes() {
        assert_eq!(rewritten("SELECT 1 FROM DUAL WHERE 1 = 1"), "SELECT 1 WHERE 1 = 1");
        assert_eq!(rewritten("select 1 from dual union select 2 from Dual"), "SELECT 1 UNION SELECT 2");
        assert_eq!(rewritten("SELECT (SELECT 1 FROM DUAL) FROM t"), "SELECT (SELECT 1) FROM t");
        assert_eq!(rewritten("SELECT 1 FROM `dual`"), "SELECT 1 FROM `dual`");
        assert_eq!(rewritten("SELECT 1 FROM dual AS d"), "SELECT 1 FROM dual AS d");
        assert_eq!(rewritten("SELECT 1 FROM db.dual"), "SELECT 1 FROM db.dual");
    }
}
