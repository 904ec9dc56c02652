//! ALTER TABLE text the SQL parser does not take, rewritten before parsing
//! (see `rewrite_alter_text`). Owner: catalog engineer.

/// MySQL ALTER TABLE forms the SQL parser does not take, rewritten to ones
/// it does: `ADD [COLUMN] (c1 def, c2 def)` -> `ADD COLUMN c1 def, ADD COLUMN
/// c2 def`; `DROP KEY k` -> `DROP INDEX k`; `DROP CHECK c` -> `DROP
/// CONSTRAINT c`; `RENAME t2` -> `RENAME TO t2`.
/// Other text is returned as it is.
pub fn rewrite_alter_text(sql: &str) -> String {
    use sqlparser::dialect::MySqlDialect;
    use sqlparser::keywords::Keyword;
    use sqlparser::tokenizer::{Token, Tokenizer};
    let Ok(toks) = Tokenizer::new(&MySqlDialect {}, sql).tokenize() else {
        return sql.to_string();
    };
    let kw = |t: &Token, k: Keyword| matches!(t, Token::Word(w) if w.keyword == k && w.quote_style.is_none());
    // Indexes of the tokens that are not whitespace.
    let sig: Vec<usize> = (0..toks.len()).filter(|&i| !matches!(toks[i], Token::Whitespace(_))).collect();
    let mut out: Vec<String> = Vec::with_capacity(toks.len());
    let mut changed = false;
    let mut depth = 0i32;
    let mut k = 0; // position in `sig`
    let mut i = 0; // position in `toks`
    while i < toks.len() {
        let t = &toks[i];
        let at_sig = sig.get(k) == Some(&i);
        if !at_sig {
            out.push(t.to_string());
            i += 1;
            continue;
        }
        let next = |n: usize| sig.get(k + n).map(|&j| &toks[j]);
        match t {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            _ => {}
        }
        if depth == 0 && kw(t, Keyword::DROP) && next(1).is_some_and(|n| kw(n, Keyword::CHECK)) {
            out.push("DROP CONSTRAINT".into());
            i = sig[k + 1] + 1;
            k += 2;
            changed = true;
            continue;
        }
        if depth == 0 && kw(t, Keyword::DROP) && next(1).is_some_and(|n| kw(n, Keyword::KEY)) {
            out.push("DROP INDEX".into());
            i = sig[k + 1] + 1;
            k += 2;
            changed = true;
            continue;
        }
        if depth == 0
            && kw(t, Keyword::RENAME)
            && next(1).is_some_and(|n| {
                matches!(n, Token::Word(_))
                    && ![Keyword::TO, Keyword::AS, Keyword::COLUMN, Keyword::INDEX, Keyword::KEY]
                        .iter()
                        .any(|k| kw(n, *k))
            })
        {
            out.push("RENAME TO".into());
            i += 1;
            k += 1;
            changed = true;
            continue;
        }
        if depth == 0 && kw(t, Keyword::ADD) {
            let skip = usize::from(next(1).is_some_and(|n| kw(n, Keyword::COLUMN)));
            if next(1 + skip) == Some(&Token::LParen) {
                // Split the parenthesised list at its top-level commas.
                let open = k + 1 + skip;
                let mut d = 0i32;
                let mut parts: Vec<String> = vec![String::new()];
                let mut j = sig[open];
                let mut end = None;
                while j < toks.len() {
                    match &toks[j] {
                        Token::LParen => {
                            d += 1;
                            if d == 1 {
                                j += 1;
                                continue;
                            }
                        }
                        Token::RParen => {
                            d -= 1;
                            if d == 0 {
                                end = Some(j);
                                break;
                            }
                        }
                        Token::Comma if d == 1 => {
                            parts.push(String::new());
                            j += 1;
                            continue;
                        }
                        _ => {}
                    }
                    parts.last_mut().expect("one part").push_str(&toks[j].to_string());
                    j += 1;
                }
                let Some(end) = end else {
                    return sql.to_string();
                };
                let cols: Vec<String> = parts.iter().map(|p| format!("ADD COLUMN {}", p.trim())).collect();
                out.push(cols.join(", "));
                i = end + 1;
                while sig.get(k).is_some_and(|&x| x <= end) {
                    k += 1;
                }
                changed = true;
                continue;
            }
        }
        out.push(t.to_string());
        i += 1;
        k += 1;
    }
    if changed {
        out.concat()
    } else {
        sql.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alter_text_rewrites() {
        assert_eq!(
            rewrite_alter_text("ALTER TABLE t ADD COLUMN (a INT DEFAULT 1, b DECIMAL(5,2) NOT NULL), DROP KEY k"),
            "ALTER TABLE t ADD COLUMN a INT DEFAULT 1, ADD COLUMN b DECIMAL(5,2) NOT NULL, DROP INDEX k"
        );
        assert_eq!(rewrite_alter_text("ALTER TABLE t ADD (c VARCHAR(3))"), "ALTER TABLE t ADD COLUMN c VARCHAR(3)");
        assert_eq!(rewrite_alter_text("alter table t rename t2"), "alter table t RENAME TO t2");
        assert_eq!(rewrite_alter_text("ALTER TABLE t DROP CHECK c1"), "ALTER TABLE t DROP CONSTRAINT c1");
        for same in [
            "ALTER TABLE t RENAME TO t2",
            "ALTER TABLE t RENAME COLUMN a TO b",
            "ALTER TABLE t ADD KEY k (a, b), ADD c INT DEFAULT '(x'",
            "ALTER TABLE t ADD (",
        ] {
            assert_eq!(rewrite_alter_text(same), same);
        }
    }
}
