//! Result column names of unaliased select-list expressions: the
//! statement's own text, as MySQL names them (`SELECT 1 != 1` is a column
//! named `1 != 1`, `COUNT( * )` keeps its spaces, `TRUE` its case).
//!
//! The compiler names such a column after the expression (`query.rs`), and
//! sqlparser's rendering of an expression is not the text it was parsed
//! from (`1 <> 1`, `true`, `--5`). So, after the parse, each select-list
//! expression whose text differs from its rendering gets that text as its
//! name, as an alias: the compiler already lets ORDER BY and HAVING refer to
//! an unaliased expression by its name (MySQL does too), so the alias
//! changes nothing but the name.
//!
//! What MySQL names otherwise is left as it is: a column reference (its
//! name as written), a string literal (its value) and NULL (`NULL`). Each
//! name is checked by parsing the text back: it must give the same
//! expression, so a statement the text scan misreads keeps the old name.

use crate::engine::dialect::NorrMySql;
use crate::engine::parse_ext::byte_offset;
use sqlparser::ast::{Expr, Ident, Query, SelectItem, SetExpr, Statement, Value, VisitMut, VisitorMut};
use sqlparser::keywords::Keyword;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};
use std::ops::ControlFlow;

/// MySQL cuts longer automatic names (and warns only for aliases).
const MAX_NAME_CHARS: usize = 256;

/// Name the unaliased select-list expressions of `st` (parsed from `sql`)
/// after their text.
pub fn apply(sql: &str, st: &mut Statement) {
    let _ = st.visit(&mut Namer { sql, tokens: None });
}

struct Namer<'a> {
    sql: &'a str,
    /// The statement's tokens, made the first time a name is needed.
    tokens: Option<Vec<TokenWithSpan>>,
}

impl VisitorMut for Namer<'_> {
    type Break = ();
    fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
        self.set_expr(&mut q.body);
        ControlFlow::Continue(())
    }
}

/// Whether MySQL names the item `e` otherwise than by its text (also
/// inside parentheses: `SELECT (a)` is named `a`).
fn named_otherwise(e: &Expr) -> bool {
    crate::engine::expr::compile::named_by_value(e)
}

impl Namer<'_> {
    fn set_expr(&mut self, body: &mut SetExpr) {
        match body {
            SetExpr::Select(sel) => {
                let wanted =
                    sel.projection.iter().any(|i| matches!(i, SelectItem::UnnamedExpr(e) if !named_otherwise(e)));
                if !wanted {
                    return;
                }
                let Some(texts) = self.item_texts(sel.select_token.0.span.start) else {
                    return;
                };
                if texts.len() != sel.projection.len() {
                    return;
                }
                for (item, text) in sel.projection.iter_mut().zip(texts) {
                    let SelectItem::UnnamedExpr(e) = item else { continue };
                    if named_otherwise(e)
                        || text == crate::engine::expr::compile::expr_display_name(e)
                        || !reads_as(&text, e)
                    {
                        continue;
                    }
                    let name: String = text.chars().take(MAX_NAME_CHARS).collect();
                    let expr = std::mem::replace(e, Expr::value(Value::Null));
                    *item = SelectItem::ExprWithAlias { expr, alias: Ident::with_quote('`', name) };
                }
            }
            SetExpr::SetOperation { left, right, .. } => {
                self.set_expr(left);
                self.set_expr(right);
            }
            _ => {}
        }
    }

    /// The text of each select-list item of the SELECT whose keyword is at
    /// `at`, trimmed; None when the text cannot be found.
    fn item_texts(&mut self, at: sqlparser::tokenizer::Location) -> Option<Vec<String>> {
        if self.tokens.is_none() {
            self.tokens = Tokenizer::new(&NorrMySql, self.sql).tokenize_with_location().ok();
        }
        let toks = self.tokens.as_deref()?;
        let first = toks.iter().position(|t| t.span.start == at)?;
        if !matches!(&toks[first].token, Token::Word(w) if w.keyword == Keyword::SELECT) {
            return None;
        }
        let mut i = first + 1;
        // Modifiers before the first item.
        while let Some(t) = toks.get(i) {
            match &t.token {
                Token::Whitespace(_) => {}
                Token::Word(w)
                    if w.quote_style.is_none()
                        && matches!(
                            w.keyword,
                            Keyword::ALL
                                | Keyword::DISTINCT
                                | Keyword::DISTINCTROW
                                | Keyword::HIGH_PRIORITY
                                | Keyword::STRAIGHT_JOIN
                                | Keyword::SQL_SMALL_RESULT
                                | Keyword::SQL_BIG_RESULT
                                | Keyword::SQL_BUFFER_RESULT
                                | Keyword::SQL_NO_CACHE
                                | Keyword::SQL_CALC_FOUND_ROWS
                        ) => {}
                _ => break,
            }
            i += 1;
        }
        let mut items = Vec::new();
        let mut depth = 0i32;
        let mut start: Option<usize> = None;
        let mut last = i;
        loop {
            let t = toks.get(i);
            let end_of_item = match t.map(|t| &t.token) {
                None | Some(Token::EOF | Token::SemiColon) => true,
                Some(Token::RParen) if depth == 0 => true,
                Some(Token::Comma) if depth == 0 => true,
                Some(Token::Word(w)) if depth == 0 && w.quote_style.is_none() => matches!(
                    w.keyword,
                    Keyword::FROM
                        | Keyword::INTO
                        | Keyword::WHERE
                        | Keyword::GROUP
                        | Keyword::HAVING
                        | Keyword::WINDOW
                        | Keyword::ORDER
                        | Keyword::LIMIT
                        | Keyword::UNION
                        | Keyword::EXCEPT
                        | Keyword::INTERSECT
                        | Keyword::FOR
                        | Keyword::LOCK
                ),
                _ => false,
            };
            if end_of_item {
                let s = start?;
                let from = byte_offset(self.sql, toks[s].span.start)?;
                let to = byte_offset(self.sql, toks[last].span.end)?;
                items.push(self.sql.get(from..to)?.to_string());
                start = None;
                if !matches!(t.map(|t| &t.token), Some(Token::Comma)) {
                    return Some(items);
                }
            } else if let Some(t) = t {
                match t.token {
                    Token::LParen => depth += 1,
                    Token::RParen => depth -= 1,
                    _ => {}
                }
                if !matches!(t.token, Token::Whitespace(_)) {
                    start.get_or_insert(i);
                    last = i;
                }
            }
            i += 1;
        }
    }
}

/// Whether `text` parses as the expression `e` (spans aside).
fn reads_as(text: &str, e: &Expr) -> bool {
    let Ok(mut p) = Parser::new(&NorrMySql).try_with_sql(text) else {
        return false;
    };
    match p.parse_expr() {
        Ok(parsed) => parsed == *e && p.peek_token().token == Token::EOF,
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(sql: &str) -> Vec<String> {
        let mut st = Parser::parse_sql(&NorrMySql, sql).unwrap().remove(0);
        apply(sql, &mut st);
        let Statement::Query(q) = &st else { panic!("a query") };
        let mut body = q.body.as_ref();
        while let SetExpr::SetOperation { left, .. } = body {
            body = left.as_ref();
        }
        let SetExpr::Select(s) = body else { panic!("a select") };
        s.projection
            .iter()
            .map(|i| match i {
                SelectItem::ExprWithAlias { alias, .. } => alias.value.clone(),
                SelectItem::UnnamedExpr(e) => crate::engine::expr::compile::expr_display_name(e),
                other => other.to_string(),
            })
            .collect()
    }

    #[test]
    fn names_are_the_text_as_written() {
        assert_eq!(
            names("SELECT 1 != 1, - -5, TRUE, x'0a0b', a  +  b, COUNT( * ), 'x', NULL, A, t.b FROM t"),
            ["1 != 1", "- -5", "TRUE", "x'0a0b'", "a  +  b", "COUNT( * )", "x", "NULL", "A", "b"]
        );
        assert_eq!(names("select distinct\n  1+1 ,\tconcat('a', (1)) as c, 2 from t where 1"), ["1+1", "c", "2"]);
        assert_eq!(names("SELECT 1 != 1 UNION SELECT 2"), ["1 != 1"]);
    }

    #[test]
    fn subqueries_and_nested_selects_are_named_too() {
        let sql = "SELECT (SELECT 1 != 1 FROM t LIMIT 1), 2 <> 3 FROM (SELECT a <> 1 FROM t) d";
        let mut st = Parser::parse_sql(&NorrMySql, sql).unwrap().remove(0);
        apply(sql, &mut st);
        let text = st.to_string();
        assert!(text.contains("1 <> 1 AS `1 != 1`"), "{text}");
        assert!(text.contains("a <> 1 AS `a <> 1`") || text.contains("SELECT a <> 1 FROM"), "{text}");
        assert!(text.contains("AS `(SELECT 1 != 1 FROM t LIMIT 1)`"), "{text}");
    }
}
