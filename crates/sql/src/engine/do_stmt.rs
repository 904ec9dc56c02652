//! `DO expr [, expr] ...`: evaluate and discard (MySQL 8.0). Owner: query
//! engineer.
//!
//! sqlparser has no DO statement, so the text after the keyword is parsed
//! as the select list of a `SELECT` without FROM, and runs as that query
//! whose rows are dropped: errors of the expressions are the statement's,
//! and GET_LOCK / SLEEP wait as they do in a select list. DO answers OK with
//! no rows affected.

use crate::engine::error_map;
use crate::types::SqlError;
use sqlparser::ast::{self, SetExpr, Statement};

/// Byte offset just after a leading `DO` keyword (after whitespace and
/// comments), if the statement starts with one.
fn after_do(sql: &str) -> Option<usize> {
    let b = sql.as_bytes();
    let mut i = 0;
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if b[i..].starts_with(b"/*") {
            i += b[i + 2..].windows(2).position(|w| w == b"*/")? + 4;
        } else if b[i..].starts_with(b"#")
            || (b[i..].starts_with(b"--") && b.get(i + 2).is_none_or(|c| c.is_ascii_whitespace()))
        {
            i += b[i..].iter().position(|&c| c == b'\n').unwrap_or(b.len() - i);
        } else {
            break;
        }
    }
    let word = b.get(i..i + 2)?;
    let next = b.get(i + 2).copied();
    (word.eq_ignore_ascii_case(b"DO") && !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'$'))
        .then_some(i + 2)
}

/// Parse a DO statement into the query it runs. None if `sql` is not one.
pub fn parse(sql: &str) -> Option<Result<Box<ast::Query>, SqlError>> {
    let at = after_do(sql)?;
    let rest = &sql[at..];
    Some((|| {
        let st = crate::engine::parse_sqlparser(&format!("SELECT{rest}"))?;
        let near = || error_map::parse_error_near(rest.trim_start());
        let Statement::Query(q) = st else { return Err(near()) };
        // Only a list of expressions: no FROM, WHERE, GROUP BY, ... (the
        // grammar of DO has none of them).
        let plain = q.with.is_none()
            && q.order_by.is_none()
            && q.limit_clause.is_none()
            && q.fetch.is_none()
            && q.locks.is_empty()
            && matches!(q.body.as_ref(), SetExpr::Select(s)
                if s.from.is_empty()
                    && s.selection.is_none()
                    && s.having.is_none()
                    && s.distinct.is_none()
                    && s.into.is_none()
                    && matches!(&s.group_by, ast::GroupByExpr::Expressions(g, m) if g.is_empty() && m.is_empty()));
        if !plain {
            return Err(near());
        }
        Ok(q)
    })())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_keyword() {
        assert_eq!(after_do("DO 1"), Some(2));
        assert_eq!(after_do("  /* c */ do(1)"), Some(12));
        assert_eq!(after_do("-- x\nDO 1"), Some(7));
        assert_eq!(after_do("DOUBLE"), None);
        assert_eq!(after_do("DO_x"), None);
        assert_eq!(after_do("SELECT 1"), None);
        assert_eq!(after_do("/* open"), None);
    }

    #[test]
    fn parses_a_list_of_expressions_only() {
        assert!(parse("DO 1, SLEEP(0)").unwrap().is_ok());
        assert!(parse("DO 1 AS x").unwrap().is_ok());
        assert_eq!(parse("DO").unwrap().unwrap_err().code, 1064);
        assert_eq!(parse("DO 1 FROM t").unwrap().unwrap_err().code, 1064);
        assert_eq!(parse("DO 1 WHERE 1").unwrap().unwrap_err().code, 1064);
        assert_eq!(parse("DO 1 UNION SELECT 2").unwrap().unwrap_err().code, 1064);
    }
}
