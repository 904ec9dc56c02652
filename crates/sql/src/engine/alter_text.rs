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

/// Table options of an ALTER TABLE, which the SQL parser does not take
/// there: `[DEFAULT] CHARACTER SET | CHARSET [=] cs`, `[DEFAULT] COLLATE [=]
/// c`, `CONVERT TO CHARACTER SET cs [COLLATE c]`, `ENGINE [=] e`, `COMMENT
/// [=] 'text'`, `AUTO_INCREMENT [=] n` after another option, and the
/// InnoDB / MyISAM options that mean nothing here (ROW_FORMAT, ...). One run
/// of them separated by spaces (a comma starts another run) is carried as
/// one `VALIDATE CONSTRAINT` marker, as `EnforcementOp` is.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TableOptions {
    /// New default character set / collation of the table.
    pub charset: Option<String>,
    pub collate: Option<String>,
    /// CONVERT TO: every character column takes the new default too.
    pub convert: bool,
    pub engine: Option<String>,
    pub comment: Option<String>,
    pub auto_increment: Option<u64>,
}

impl TableOptions {
    fn text(&self) -> String {
        let json = serde_json::to_string(self).expect("table options serialize");
        format!("VALIDATE CONSTRAINT `{}`", format!("{MARK}table-options:{json}").replace('`', "``"))
    }

    /// The options a VALIDATE CONSTRAINT name carries; None for a name the
    /// rewrite did not make.
    pub fn from_marker(marker: &str) -> Option<TableOptions> {
        serde_json::from_str(marker.strip_prefix(MARK)?.strip_prefix("table-options:")?).ok()
    }
}

/// Table options that InnoDB or MyISAM read and the data node has no use
/// for: accepted and ignored, as CREATE TABLE does.
const IGNORED_OPTIONS: &[&str] = &[
    "ROW_FORMAT",
    "KEY_BLOCK_SIZE",
    "STATS_PERSISTENT",
    "STATS_AUTO_RECALC",
    "STATS_SAMPLE_PAGES",
    "PACK_KEYS",
    "CHECKSUM",
    "DELAY_KEY_WRITE",
    "AVG_ROW_LENGTH",
    "MAX_ROWS",
    "MIN_ROWS",
];

/// The run of table options starting at `toks[sig[k]]`: the options and the
/// number of significant tokens they take; None if no option starts there.
fn table_options_at(toks: &[sqlparser::tokenizer::Token], sig: &[usize], k: usize) -> Option<(TableOptions, usize)> {
    use sqlparser::tokenizer::Token;
    let tok = |n: usize| sig.get(k + n).map(|&j| &toks[j]);
    let is = |n: usize, word: &str| matches!(tok(n), Some(Token::Word(w)) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word));
    // A name or value: a word, a quoted string or a number.
    let value = |n: usize| match tok(n) {
        Some(Token::Word(w)) => Some(w.value.clone()),
        Some(Token::SingleQuotedString(v) | Token::DoubleQuotedString(v)) => Some(v.clone()),
        Some(Token::Number(v, _)) => Some(v.clone()),
        _ => None,
    };
    let mut o = TableOptions::default();
    let mut n = 0;
    let mut any = false;
    loop {
        let start = n;
        let default = is(n, "DEFAULT");
        if default {
            n += 1;
        }
        // The value after an optional `=`.
        let take_value = |n: &mut usize| -> Option<String> {
            if tok(*n) == Some(&Token::Eq) {
                *n += 1;
            }
            let v = value(*n)?;
            *n += 1;
            Some(v)
        };
        if is(n, "CHARSET") || (is(n, "CHARACTER") && is(n + 1, "SET")) {
            n += if is(n, "CHARSET") { 1 } else { 2 };
            o.charset = Some(take_value(&mut n)?);
        } else if is(n, "COLLATE") {
            n += 1;
            o.collate = Some(take_value(&mut n)?);
        } else if !default && is(n, "CONVERT") && is(n + 1, "TO") {
            n += 2;
            if is(n, "CHARSET") {
                n += 1;
            } else if is(n, "CHARACTER") && is(n + 1, "SET") {
                n += 2;
            } else {
                return None;
            }
            o.charset = Some(take_value(&mut n)?);
            o.convert = true;
            if is(n, "COLLATE") {
                n += 1;
                o.collate = Some(take_value(&mut n)?);
            }
        } else if !default && is(n, "ENGINE") {
            n += 1;
            o.engine = Some(take_value(&mut n)?);
        } else if !default && is(n, "COMMENT") {
            n += 1;
            if tok(n) == Some(&Token::Eq) {
                n += 1;
            }
            match tok(n) {
                Some(Token::SingleQuotedString(v) | Token::DoubleQuotedString(v)) => o.comment = Some(v.clone()),
                _ => return None,
            }
            n += 1;
        } else if !default && any && is(n, "AUTO_INCREMENT") {
            n += 1;
            o.auto_increment = Some(take_value(&mut n)?.parse().ok()?);
        } else if !default && IGNORED_OPTIONS.iter().any(|w| is(n, w)) {
            n += 1;
            take_value(&mut n)?;
        } else {
            n = start;
            break;
        }
        any = true;
    }
    any.then_some((o, n))
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
    use crate::engine::dialect::NorrMySql;
    use sqlparser::keywords::Keyword;
    use sqlparser::tokenizer::{Token, Tokenizer};
    let Ok(toks) = Tokenizer::new(&NorrMySql, sql).tokenize() else {
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
                   // Where the first operation starts: after `ALTER TABLE [db.]name`.
    let first_op = if sig.get(3).is_some_and(|&j| toks[j] == Token::Period) { 5 } else { 3 };
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
        // Table options, where an operation starts.
        let op_start = depth == 0 && (k == first_op || (k > first_op && toks[sig[k - 1]] == Token::Comma));
        if op_start {
            if let Some((opts, used)) = table_options_at(&toks, &sig, k) {
                out.push(opts.text());
                i = sig[k + used - 1] + 1;
                k += used;
                changed = true;
                continue;
            }
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
        // Table options: one marker per space-separated run, at an operation's start only.
        let opts = |sql: &str| -> Vec<TableOptions> {
            let text = rewrite_alter_text(sql);
            let stmt = crate::engine::parse_sqlparser(&text).unwrap();
            let sqlparser::ast::Statement::AlterTable(at) = stmt else { panic!("{text}") };
            at.operations
                .iter()
                .filter_map(|op| match op {
                    sqlparser::ast::AlterTableOperation::ValidateConstraint { name } => {
                        TableOptions::from_marker(&name.value)
                    }
                    _ => None,
                })
                .collect()
        };
        let run = opts("ALTER TABLE db.t ENGINE = InnoDB DEFAULT CHARSET=latin1 COLLATE latin1_bin COMMENT 'a`b' AUTO_INCREMENT=7 ROW_FORMAT=DYNAMIC");
        assert_eq!(
            run,
            vec![TableOptions {
                charset: Some("latin1".into()),
                collate: Some("latin1_bin".into()),
                convert: false,
                engine: Some("InnoDB".into()),
                comment: Some("a`b".into()),
                auto_increment: Some(7),
            }]
        );
        let convert = opts("alter table t convert to character set utf8mb4 collate utf8mb4_unicode_ci, ADD COLUMN c TEXT CHARACTER SET latin1 COMMENT 'x'");
        assert_eq!(convert.len(), 1);
        assert!(convert[0].convert && convert[0].collate.as_deref() == Some("utf8mb4_unicode_ci"));
        assert_eq!(opts("ALTER TABLE t ADD COLUMN c INT, CHARSET utf8mb4, COMMENT='z'").len(), 2);
        // An option of a column is no table option.
        assert!(opts("ALTER TABLE t MODIFY c VARCHAR(3) CHARACTER SET latin1 COMMENT 'x'").is_empty());
        assert_eq!(rewrite_alter_text("ALTER TABLE t AUTO_INCREMENT = 5"), "ALTER TABLE t AUTO_INCREMENT = 5");
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
