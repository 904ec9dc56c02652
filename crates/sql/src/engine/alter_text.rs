//! ALTER TABLE text the SQL parser does not take, rewritten before parsing
//! (see `rewrite_alter_text`). Owner: catalog engineer.

/// The CHECK operations the SQL parser has no form for. The rewrite carries
/// them as `VALIDATE CONSTRAINT <marker>` (PostgreSQL's form, which MySQL
/// does not have: `alter::apply` reads every such operation as one of these,
/// and refuses one without a marker as the syntax error it is in MySQL).
/// `DROP CHECK` needs its own form only for its error: a missing name is
/// 3821 (ER_CHECK_CONSTRAINT_NOT_FOUND) where DROP CONSTRAINT gives 3940.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnforcementOp {
    AlterCheck,
    AlterConstraint,
    DropCheck,
}

/// Prefix of the marker names: a control character no identifier a user
/// means to write starts with.
const MARK: &str = "\u{1}norr:";

impl EnforcementOp {
    /// The operation as the text `VALIDATE CONSTRAINT `marker`` (the
    /// constraint's name last, backticks doubled inside the quotes).
    fn text(self, enforced: bool, name: &str) -> String {
        let what = match self {
            EnforcementOp::AlterCheck => "alter-check",
            EnforcementOp::AlterConstraint => "alter-constraint",
            EnforcementOp::DropCheck => "drop-check",
        };
        let state = if enforced { "enforced" } else { "not-enforced" };
        format!("VALIDATE CONSTRAINT `{}`", format!("{MARK}{what}:{state}:{name}").replace('`', "``"))
    }

    /// The operation, the ENFORCED state it sets and the constraint's name
    /// a VALIDATE CONSTRAINT name carries; None for a name the rewrite did
    /// not make.
    pub fn from_marker(marker: &str) -> Option<(EnforcementOp, bool, &str)> {
        let rest = marker.strip_prefix(MARK)?;
        let (what, rest) = rest.split_once(':')?;
        let (state, name) = rest.split_once(':')?;
        let op = match what {
            "alter-check" => EnforcementOp::AlterCheck,
            "alter-constraint" => EnforcementOp::AlterConstraint,
            "drop-check" => EnforcementOp::DropCheck,
            _ => return None,
        };
        Some((op, state == "enforced", name))
    }
}

/// An identifier token's name (unquoted).
fn word_value(t: Option<&sqlparser::tokenizer::Token>) -> String {
    match t {
        Some(sqlparser::tokenizer::Token::Word(w)) => w.value.clone(),
        _ => String::new(),
    }
}

/// MySQL ALTER TABLE forms the SQL parser does not take, rewritten to ones
/// it does: `ADD [COLUMN] (c1 def, c2 def)` -> `ADD COLUMN c1 def, ADD COLUMN
/// c2 def`; `DROP KEY k` -> `DROP INDEX k`; `RENAME t2` -> `RENAME TO t2`;
/// `ALTER {CHECK | CONSTRAINT} c [NOT] ENFORCED` and `DROP CHECK c` -> see
/// `EnforcementOp`.
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
        // `ALTER {CHECK | CONSTRAINT} c [NOT] ENFORCED` and `DROP CHECK c`:
        // see `enforcement_op`.
        let alter_kind = (depth == 0 && kw(t, Keyword::ALTER))
            .then(|| next(1))
            .flatten()
            .and_then(|n| [Keyword::CHECK, Keyword::CONSTRAINT].into_iter().find(|k| kw(n, *k)));
        let is_name = |n: Option<&Token>| matches!(n, Some(Token::Word(w)) if w.quote_style.is_some() || w.keyword != Keyword::IF);
        if let Some(kind) = alter_kind.filter(|_| is_name(next(2))) {
            let (enforced, used) = if next(3).is_some_and(|n| kw(n, Keyword::ENFORCED)) {
                (true, 4)
            } else if next(3).is_some_and(|n| kw(n, Keyword::NOT)) && next(4).is_some_and(|n| kw(n, Keyword::ENFORCED))
            {
                (false, 5)
            } else {
                (true, 0)
            };
            if used > 0 {
                let what =
                    if kind == Keyword::CHECK { EnforcementOp::AlterCheck } else { EnforcementOp::AlterConstraint };
                out.push(what.text(enforced, &word_value(next(2))));
                i = sig[k + used - 1] + 1;
                k += used;
                changed = true;
                continue;
            }
        }
        if depth == 0 && kw(t, Keyword::DROP) && next(1).is_some_and(|n| kw(n, Keyword::CHECK)) && is_name(next(2)) {
            out.push(EnforcementOp::DropCheck.text(false, &word_value(next(2))));
            i = sig[k + 2] + 1;
            k += 3;
            changed = true;
            continue;
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
        let drop = rewrite_alter_text("ALTER TABLE t DROP CHECK c1");
        assert_eq!(drop, format!("ALTER TABLE t {}", EnforcementOp::DropCheck.text(false, "c1")));
        let alter = rewrite_alter_text("ALTER TABLE t ALTER CHECK `c``1` NOT ENFORCED, alter constraint c2 enforced");
        assert_eq!(
            alter,
            format!(
                "ALTER TABLE t {}, {}",
                EnforcementOp::AlterCheck.text(false, "c`1"),
                EnforcementOp::AlterConstraint.text(true, "c2")
            )
        );
        assert_eq!(
            EnforcementOp::from_marker(&format!("{MARK}alter-constraint:enforced:c:2")),
            Some((EnforcementOp::AlterConstraint, true, "c:2"))
        );
        assert_eq!(EnforcementOp::from_marker("c2"), None);
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
