//! `FROM (a, b) JOIN c ON ...`: a parenthesized comma list of table
//! references, which MySQL accepts and sqlparser 0.63 does not (its
//! parenthesized join holds one `TableWithJoins`, no comma list).
//!
//! Inside parentheses a comma is an inner join that binds weaker than JOIN,
//! so `(a, b JOIN c ON p)` is rewritten to `(a CROSS JOIN (b JOIN c ON p))`:
//! items that hold a JOIN of their own are parenthesized, and the items are
//! chained with CROSS JOIN. Only tried when the statement text does not parse
//! as it is, so statements that parse never pay for it.

use crate::engine::parse_ext;
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, Word};

/// The statement with its parenthesized FROM comma lists rewritten, or None
/// when there is nothing to rewrite (or the text has string literals whose
/// quoting re-joined tokens might not keep).
pub fn rewrite(sql: &str) -> Option<String> {
    let toks = parse_ext::tokens(sql).ok()?;
    if toks.iter().any(|t| match t {
        Token::SingleQuotedString(s) | Token::DoubleQuotedString(s) => s.contains(['\'', '"', '\\']),
        Token::Word(w) => w.quote_style.is_some_and(|q| q != '`'),
        _ => false,
    }) {
        return None;
    }
    let mut out: Vec<Token> = Vec::with_capacity(toks.len() + 8);
    // One frame per open parenthesis (and one for the statement).
    let mut frames: Vec<Frame> = vec![Frame { table_group: false, in_from: false, start: 0, commas: Vec::new() }];
    let mut changed = false;
    for (i, t) in toks.iter().enumerate() {
        let frame = frames.last_mut()?;
        match t {
            Token::Word(w) if w.quote_style.is_none() => match w.keyword {
                Keyword::FROM => frame.in_from = true,
                Keyword::WHERE
                | Keyword::GROUP
                | Keyword::HAVING
                | Keyword::ORDER
                | Keyword::LIMIT
                | Keyword::WINDOW
                | Keyword::UNION
                | Keyword::FOR
                | Keyword::LOCK
                | Keyword::INTO
                | Keyword::SET => frame.in_from = false,
                _ => {}
            },
            Token::Comma if frame.table_group => frame.commas.push(out.len()),
            Token::LParen => {
                let after_ref = match out.last() {
                    Some(Token::Word(w)) => {
                        w.quote_style.is_none()
                            && matches!(w.keyword, Keyword::FROM | Keyword::JOIN | Keyword::STRAIGHT_JOIN)
                            && frame.in_from
                    }
                    Some(Token::Comma) => frame.in_from,
                    Some(Token::LParen) => frame.table_group,
                    _ => false,
                };
                let subquery = matches!(toks.get(i + 1), Some(Token::Word(w))
                    if w.quote_style.is_none() && matches!(w.keyword, Keyword::SELECT | Keyword::WITH | Keyword::VALUES | Keyword::TABLE));
                let table_group = after_ref && !subquery;
                out.push(t.clone());
                frames.push(Frame { table_group, in_from: table_group, start: out.len(), commas: Vec::new() });
                continue;
            }
            Token::RParen => {
                if frames.len() < 2 {
                    return None;
                }
                let f = frames.pop()?;
                if f.table_group && !f.commas.is_empty() {
                    let items = split_at(&out[f.start..], &f.commas, f.start);
                    out.truncate(f.start);
                    for (k, item) in items.into_iter().enumerate() {
                        if k > 0 {
                            out.push(keyword("CROSS", Keyword::CROSS));
                            out.push(keyword("JOIN", Keyword::JOIN));
                        }
                        if has_join(&item) {
                            out.push(Token::LParen);
                            out.extend(item);
                            out.push(Token::RParen);
                        } else {
                            out.extend(item);
                        }
                    }
                    changed = true;
                }
            }
            _ => {}
        }
        out.push(t.clone());
    }
    changed.then(|| parse_ext::join_tokens(&out))
}

struct Frame {
    /// A parenthesized list of table references.
    table_group: bool,
    /// Between FROM (or the group's start) and the end of the FROM clause.
    in_from: bool,
    /// Index in the output where the group's tokens start.
    start: usize,
    /// Output indices of the group's own commas.
    commas: Vec<usize>,
}

/// Split `toks` (starting at output index `base`) at the commas at `commas`.
fn split_at(toks: &[Token], commas: &[usize], base: usize) -> Vec<Vec<Token>> {
    let mut items = Vec::with_capacity(commas.len() + 1);
    let mut from = 0;
    for &c in commas {
        items.push(toks[from..c - base].to_vec());
        from = c - base + 1;
    }
    items.push(toks[from..].to_vec());
    items
}

/// Whether a comma item holds a join at its own level.
fn has_join(item: &[Token]) -> bool {
    let mut depth = 0i32;
    item.iter().any(|t| {
        match t {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            _ => {}
        }
        depth == 0
            && matches!(t, Token::Word(w) if w.quote_style.is_none() && matches!(w.keyword, Keyword::JOIN | Keyword::STRAIGHT_JOIN))
    })
}

fn keyword(text: &str, keyword: Keyword) -> Token {
    Token::Word(Word { value: text.to_string(), quote_style: None, keyword })
}

#[cfg(test)]
mod tests {
    use super::rewrite;

    /// The rewrite with spaces dropped (`join_tokens` decides the spacing).
    fn squeezed(sql: &str) -> Option<String> {
        rewrite(sql).map(|s| s.replace(' ', ""))
    }

    #[test]
    fn comma_lists_in_from_parens() {
        assert_eq!(
            squeezed("SELECT * FROM (a, b) JOIN c ON a.x = c.x").as_deref(),
            Some("SELECT*FROM(aCROSSJOINb)JOINcONa.x=c.x")
        );
        assert_eq!(
            squeezed("SELECT * FROM t LEFT JOIN (a, b JOIN c ON b.y = c.y) ON t.x = a.x").as_deref(),
            Some("SELECT*FROMtLEFTJOIN(aCROSSJOIN(bJOINcONb.y=c.y))ONt.x=a.x")
        );
        let text = rewrite("SELECT * FROM (a, b) JOIN c ON a.x = c.x").expect("rewritten");
        assert!(sqlparser::parser::Parser::parse_sql(&crate::engine::dialect::NorrMySql, &text).is_ok());
    }

    #[test]
    fn other_parens_are_left_alone() {
        assert_eq!(rewrite("SELECT * FROM t WHERE x IN (1, 2)"), None);
        assert_eq!(rewrite("SELECT * FROM (SELECT a, b FROM t) d JOIN u ON f(d.a, 1) = u.a"), None);
        assert_eq!(rewrite("INSERT INTO t (a, b) VALUES (1, 2)"), None);
        assert_eq!(rewrite("SELECT * FROM (a, b) WHERE s = 'it''s'"), None);
    }
}
