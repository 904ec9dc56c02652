//! `FOR UPDATE OF a, b NOWAIT` (MySQL 8.0: a list of tables after `OF`) ->
//! `FOR UPDATE OF a NOWAIT FOR UPDATE OF b NOWAIT`. sqlparser 0.63 takes one
//! name after `OF` but any number of locking clauses, and to MySQL one clause
//! per table means the same as the list; `row_lock::clauses` then refuses a
//! table named twice (3569) as MySQL does.

use crate::engine::parse_ext::{Lexeme, Lexer};

/// The text with every `OF` list split into one clause per table; None when
/// there is none (the usual case: no allocation).
pub fn rewrite(sql: &str) -> Option<String> {
    let b = sql.as_bytes();
    // Cheap test first: a list needs a comma and a word `OF`.
    if !b.contains(&b',') || !b.windows(4).any(|w| is_ws(w[0]) && w[1..3].eq_ignore_ascii_case(b"OF") && is_ws(w[3])) {
        return None;
    }
    let words: Vec<(usize, usize)> = Lexer::new(sql)
        .filter_map(|l| match l {
            Lexeme::Word { start, end, .. } => Some((start, end)),
            Lexeme::Comma { .. } => None,
        })
        .collect();
    let is = |k: usize, w: &str| words.get(k).is_some_and(|&(s, e)| sql[s..e].eq_ignore_ascii_case(w));
    for k in 0..words.len() {
        if !(is(k, "FOR") && (is(k + 1, "UPDATE") || is(k + 1, "SHARE")) && is(k + 2, "OF")) {
            continue;
        }
        let mode = &sql[words[k + 1].0..words[k + 1].1];
        let Some((names, after)) = name_list(b, words[k + 2].1) else { continue };
        if names.len() < 2 {
            continue;
        }
        let (policy, end) = policy(sql, after);
        let clauses: Vec<String> =
            names.iter().map(|&(s, e)| format!("FOR {mode} OF {}{policy}", &sql[s..e])).collect();
        let text = format!("{}{}{}", &sql[..words[k].0], clauses.join(" "), &sql[end..]);
        // Each pass shortens one list to single names: a later list (another
        // query block) is split by the next pass.
        return Some(rewrite(&text).unwrap_or(text));
    }
    None
}

fn is_ws(c: u8) -> bool {
    c.is_ascii_whitespace()
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && is_ws(b[i]) {
        i += 1;
    }
    i
}

/// End of one identifier at `i` (a word, or back-quoted with ``` `` ``` for
/// a back-quote inside).
fn ident_end(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'`' => {
            let mut j = i + 1;
            loop {
                match b.get(j)? {
                    b'`' if b.get(j + 1) == Some(&b'`') => j += 2,
                    b'`' => return Some(j + 1),
                    _ => j += 1,
                }
            }
        }
        c if c.is_ascii_alphanumeric() || *c == b'_' || *c == b'$' || *c >= 0x80 => {
            let mut j = i;
            while b.get(j).is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'$' || *c >= 0x80) {
                j += 1;
            }
            Some(j)
        }
        _ => None,
    }
}

/// The comma-separated names (`t`, `` `t` ``, `db.t`) from `i`, and the
/// position after the last one. None if no name is there.
fn name_list(b: &[u8], i: usize) -> Option<(Vec<(usize, usize)>, usize)> {
    let mut names = Vec::new();
    let mut i = skip_ws(b, i);
    loop {
        let start = i;
        let mut end = ident_end(b, i)?;
        if b.get(end) == Some(&b'.') {
            end = ident_end(b, end + 1)?;
        }
        names.push((start, end));
        let j = skip_ws(b, end);
        if b.get(j) != Some(&b',') {
            return Some((names, end));
        }
        i = skip_ws(b, j + 1);
    }
}

/// `NOWAIT` / `SKIP LOCKED` right after position `i`: the text every clause
/// repeats (with a leading space, or "") and where it ends.
fn policy(sql: &str, i: usize) -> (&'static str, usize) {
    let b = sql.as_bytes();
    let word = |at: usize| {
        let s = skip_ws(b, at);
        let e = ident_end(b, s).filter(|_| b[s] != b'`').unwrap_or(s);
        (s, e)
    };
    let (s, e) = word(i);
    if sql[s..e].eq_ignore_ascii_case("NOWAIT") {
        return (" NOWAIT", e);
    }
    if sql[s..e].eq_ignore_ascii_case("SKIP") {
        let (s2, e2) = word(e);
        if sql[s2..e2].eq_ignore_ascii_case("LOCKED") {
            return (" SKIP LOCKED", e2);
        }
    }
    ("", i)
}

#[cfg(test)]
mod tests {
    use super::rewrite;

    #[test]
    fn splits_of_lists() {
        assert_eq!(rewrite("SELECT * FROM t WHERE id = 1 FOR UPDATE"), None);
        assert_eq!(rewrite("SELECT a, b FROM t FOR UPDATE OF t"), None);
        assert_eq!(rewrite("SELECT a, b FROM t LIMIT 1 OFFSET 2"), None);
        assert_eq!(
            rewrite("SELECT * FROM a, b FOR UPDATE OF a, b").as_deref(),
            Some("SELECT * FROM a, b FOR UPDATE OF a FOR UPDATE OF b")
        );
        assert_eq!(
            rewrite("select * from a join b for share of a ,`b``x` , d.c  skip\n locked;").as_deref(),
            Some(
                "select * from a join b FOR share OF a SKIP LOCKED FOR share OF `b``x` SKIP LOCKED \
                 FOR share OF d.c SKIP LOCKED;"
            )
        );
        assert_eq!(
            rewrite("SELECT * FROM a, b, c FOR UPDATE OF a, b NOWAIT FOR SHARE OF c").as_deref(),
            Some("SELECT * FROM a, b, c FOR UPDATE OF a NOWAIT FOR UPDATE OF b NOWAIT FOR SHARE OF c")
        );
        // In a string, or a list that is not one of names: left alone.
        assert_eq!(rewrite("SELECT 'x FOR UPDATE OF a, b' FROM t"), None);
        assert_eq!(rewrite("SELECT * FROM a FOR UPDATE OF , b"), None);
    }
}
