//! The text of a multi-table UPDATE / DELETE made readable to sqlparser
//! (see `rewrite`); the statements themselves are `multi_table_dml`.

use crate::engine::parse_ext::{Lexeme, Lexer};
use sqlparser::ast;

/// The optimizer-hint prefix that carries IGNORE through sqlparser, which
/// does not know `UPDATE IGNORE` / `DELETE IGNORE` (see `rewrite`).
const IGNORE_HINT: &str = "norrignore";

/// The lexemes up to the first top-level `SET` (included), or the first
/// `max_words` words: the rewrite looks no further, and the rest of a long
/// statement costs nothing.
fn lexemes(sql: &str, max_words: usize) -> Vec<Lexeme> {
    let mut words = 0;
    let mut out = Vec::new();
    for l in Lexer::new(sql) {
        out.push(l);
        if let Lexeme::Word { start, end, depth } = l {
            words += 1;
            if words >= max_words || (depth == 0 && sql[start..end].eq_ignore_ascii_case("SET")) {
                break;
            }
        }
    }
    out
}

/// What sqlparser cannot read in an UPDATE / DELETE, rewritten into what it can:
/// the options `LOW_PRIORITY` / `QUICK` (no effect here) are dropped, `IGNORE`
/// becomes the hint `/*norrignore+*/`, and the commas of `UPDATE t1, t2 SET`
/// become `CROSS JOIN` (MySQL's comma join binds looser than JOIN ... ON, so
/// this accepts a few statements MySQL refuses, never the reverse). Other
/// statements: None.
pub fn rewrite(sql: &str) -> Option<String> {
    // DELETE's options are its first words; UPDATE's table list ends at SET.
    let lx = match sql.get(..6) {
        Some(w) if w.eq_ignore_ascii_case("DELETE") => lexemes(sql, 5),
        _ => lexemes(sql, usize::MAX),
    };
    let word = |k: usize| match lx.get(k) {
        Some(&Lexeme::Word { start, end, depth: 0 }) => Some((start, end, sql[start..end].to_ascii_uppercase())),
        _ => None,
    };
    let (_, kw_end, kw) = word(0)?;
    let is_update = match kw.as_str() {
        "UPDATE" => true,
        "DELETE" => false,
        _ => return None,
    };
    let mut k = 1;
    let mut ignore = false;
    let mut cut: Vec<(usize, usize, &str)> = Vec::new();
    while let Some((s, e, w)) = word(k) {
        let option = match w.as_str() {
            "LOW_PRIORITY" => true,
            "QUICK" => !is_update,
            "IGNORE" => {
                ignore = true;
                true
            }
            _ => false,
        };
        if !option {
            break;
        }
        cut.push((s, e, ""));
        k += 1;
    }
    if is_update {
        for l in &lx[k..] {
            match *l {
                Lexeme::Word { start, end, depth: 0 } if sql[start..end].eq_ignore_ascii_case("SET") => break,
                Lexeme::Comma { at, depth: 0 } => cut.push((at, at + 1, " CROSS JOIN ")),
                _ => {}
            }
        }
    }
    if cut.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(sql.len() + 32);
    out.push_str(&sql[..kw_end]);
    if ignore {
        out.push_str(" /*");
        out.push_str(IGNORE_HINT);
        out.push_str("+*/");
    }
    let mut pos = kw_end;
    for (s, e, with) in cut {
        out.push_str(&sql[pos..s]);
        out.push_str(with);
        pos = e;
    }
    out.push_str(&sql[pos..]);
    Some(out)
}

/// The statement had IGNORE (see `rewrite`).
pub fn has_ignore(hints: &[ast::OptimizerHint]) -> bool {
    hints.iter().any(|h| h.prefix.eq_ignore_ascii_case(IGNORE_HINT))
}

#[cfg(test)]
mod tests {
    use super::rewrite;

    fn norm(s: Option<String>) -> Option<String> {
        s.map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
    }

    #[test]
    fn options_and_comma_joins_are_rewritten() {
        assert_eq!(rewrite("UPDATE t SET a = 1"), None);
        assert_eq!(rewrite("SELECT 1"), None);
        assert_eq!(
            norm(rewrite("UPDATE t1, t2 SET t1.a = t2.b")).as_deref(),
            Some("UPDATE t1 CROSS JOIN t2 SET t1.a = t2.b")
        );
        assert_eq!(
            norm(rewrite("update low_priority ignore t1,(select 1, 2) d set a = 'x,y', b = 2")).as_deref(),
            Some("update /*norrignore+*/ t1 CROSS JOIN (select 1, 2) d set a = 'x,y', b = 2")
        );
        assert_eq!(
            norm(rewrite("DELETE QUICK IGNORE t1 FROM t1, t2")).as_deref(),
            Some("DELETE /*norrignore+*/ t1 FROM t1, t2")
        );
        // Commas after SET, quoted commas and names are left alone.
        assert_eq!(rewrite("UPDATE t SET a = 1, b = 2"), None);
        assert_eq!(rewrite("UPDATE `a,b` SET c = 1"), None);
    }
}
