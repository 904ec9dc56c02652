//! PREPARE / EXECUTE / DEALLOCATE PREPARE: prepared statements named in SQL
//! text. Clients without the binary protocol (the `mysql` client, stored
//! scripts, some connectors' "emulated" mode) use them, and they share the
//! binary protocol's machinery: `PREPARE` is `Engine::prepare` (one parse,
//! a SELECT's plan compiled once) and `EXECUTE` runs the same execution path
//! as COM_STMT_EXECUTE, with the `?` values taken from user variables.
//!
//! Names are per session and case-insensitive, as in MySQL; preparing a name
//! again first drops the old statement, so a failed PREPARE leaves none.

use crate::engine::parse_ext::Cursor;
use crate::engine::{vars, Engine, Parsed, Prepared};
use crate::types::{QueryOutput, Session, SqlError};
use norr_signals::Value;
use sqlparser::tokenizer::Token;
use std::sync::Arc;

/// Most statements one session may hold by name (MySQL's global default
/// `max_prepared_stmt_count`; the binary protocol's own cap is separate).
pub const MAX_NAMED_STATEMENTS: usize = 16382;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `PREPARE s FROM 'text'`.
    Text(String),
    /// `PREPARE s FROM @var`: the variable's value when PREPARE runs.
    UserVar(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SqlPrepareStmt {
    Prepare {
        name: String,
        source: Source,
    },
    /// `EXECUTE s [USING @a, @b]`: user variable names, without `@`.
    Execute {
        name: String,
        using: Vec<String>,
    },
    /// `{DEALLOCATE | DROP} PREPARE s`.
    Deallocate {
        name: String,
    },
}

/// Parse the statement if it is one of ours (`None`: someone else's).
/// `words` are its first words, upper-cased.
pub fn parse(sql: &str, words: &[String]) -> Option<Result<SqlPrepareStmt, SqlError>> {
    let w = |i: usize| words.get(i).map(|s| s.as_str()).unwrap_or("");
    let ours = matches!(w(0), "PREPARE" | "EXECUTE") || (matches!(w(0), "DEALLOCATE" | "DROP") && w(1) == "PREPARE");
    ours.then(|| parse_ours(sql))
}

fn parse_ours(sql: &str) -> Result<SqlPrepareStmt, SqlError> {
    let mut c = Cursor::new(sql)?;
    let stmt = if c.eat_word("PREPARE") {
        let name = c.ident()?;
        c.expect_word("FROM")?;
        let source = match c.peek() {
            Some(Token::SingleQuotedString(_)) | Some(Token::DoubleQuotedString(_)) => Source::Text(c.string()?),
            _ => Source::UserVar(user_var(&mut c)?),
        };
        SqlPrepareStmt::Prepare { name, source }
    } else if c.eat_word("EXECUTE") {
        let name = c.ident()?;
        let mut using = Vec::new();
        if c.eat_word("USING") {
            loop {
                using.push(user_var(&mut c)?);
                if !c.eat(&Token::Comma) {
                    break;
                }
            }
        }
        SqlPrepareStmt::Execute { name, using }
    } else {
        if !(c.eat_word("DEALLOCATE") || c.eat_word("DROP")) {
            return Err(c.err());
        }
        c.expect_word("PREPARE")?;
        SqlPrepareStmt::Deallocate { name: c.ident()? }
    };
    c.eat(&Token::SemiColon);
    if !c.at_end() {
        return Err(c.err());
    }
    Ok(stmt)
}

/// `@name` (the tokenizer gives one word with the `@`), name lower-cased.
fn user_var(c: &mut Cursor) -> Result<String, SqlError> {
    match c.peek() {
        Some(Token::Word(w)) if w.quote_style.is_none() && w.value.starts_with('@') && w.value.len() > 1 => {
            let name = w.value[1..].to_ascii_lowercase();
            c.next_token();
            Ok(name)
        }
        Some(Token::AtSign) => {
            c.next_token();
            Ok(c.ident()?.to_ascii_lowercase())
        }
        _ => Err(c.err()),
    }
}

fn key(name: &str) -> String {
    name.to_ascii_lowercase()
}

fn unknown(name: &str, to: &str) -> SqlError {
    SqlError::new(1243, "HY000", format!("Unknown prepared statement handler ({name}) given to {to}"))
}

/// Run one of the three statements.
pub async fn run(engine: &Engine, s: &mut Session, st: &SqlPrepareStmt) -> Result<QueryOutput, SqlError> {
    match st {
        SqlPrepareStmt::Prepare { name, source } => {
            let text = match source {
                Source::Text(t) => t.clone(),
                // MySQL takes a NULL variable as the text "NULL", which is
                // then a syntax error; a number as its decimal text.
                Source::UserVar(v) => match vars::get_user_var(s, v) {
                    Value::Null => "NULL".to_string(),
                    other => crate::engine::expr::value::to_string_lossy(&other).unwrap_or_default(),
                },
            };
            s.sql_prepared.remove(&key(name));
            if s.sql_prepared.len() >= MAX_NAMED_STATEMENTS {
                return Err(SqlError::new(
                    1461,
                    "42000",
                    format!("Can't create more than max_prepared_stmt_count statements (current value: {MAX_NAMED_STATEMENTS})"),
                ));
            }
            let prepared = engine.prepare(s, &text).await?;
            if matches!(prepared.parsed(), Parsed::SqlPrepare(_)) {
                return Err(SqlError::new(
                    1295,
                    "HY000",
                    "This command is not supported in the prepared statement protocol yet",
                ));
            }
            s.sql_prepared.insert(key(name), prepared);
            Ok(QueryOutput::Ok { affected_rows: 0, last_insert_id: 0, info: "Statement prepared".into() })
        }
        SqlPrepareStmt::Execute { name, using } => {
            let p: Arc<Prepared> = s.sql_prepared.get(&key(name)).cloned().ok_or_else(|| unknown(name, "EXECUTE"))?;
            if using.len() != p.param_count as usize {
                return Err(SqlError::new(1210, "HY000", "Incorrect arguments to EXECUTE"));
            }
            let params: Vec<Value> = using.iter().map(|v| vars::get_user_var(s, v)).collect();
            // Boxed: the execution path leads back to the dispatcher that
            // called us (a future cannot contain itself).
            Box::pin(engine.execute_prepared_inner(s, &p, params)).await
        }
        SqlPrepareStmt::Deallocate { name } => {
            s.sql_prepared.remove(&key(name)).ok_or_else(|| unknown(name, "DEALLOCATE PREPARE"))?;
            Ok(QueryOutput::ok(0))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(sql: &str) -> Option<Result<SqlPrepareStmt, SqlError>> {
        let words = crate::engine::parse_ext::first_words(sql, 3).unwrap();
        parse(sql, &words)
    }

    #[test]
    fn parses_the_three_statements() {
        assert_eq!(
            p("PREPARE s1 FROM 'SELECT ?'").unwrap().unwrap(),
            SqlPrepareStmt::Prepare { name: "s1".into(), source: Source::Text("SELECT ?".into()) }
        );
        assert_eq!(
            p("prepare `S 2` from @Txt;").unwrap().unwrap(),
            SqlPrepareStmt::Prepare { name: "S 2".into(), source: Source::UserVar("txt".into()) }
        );
        assert_eq!(
            p("EXECUTE s1 USING @a, @B").unwrap().unwrap(),
            SqlPrepareStmt::Execute { name: "s1".into(), using: vec!["a".into(), "b".into()] }
        );
        assert_eq!(p("execute s1").unwrap().unwrap(), SqlPrepareStmt::Execute { name: "s1".into(), using: vec![] });
        assert_eq!(p("DEALLOCATE PREPARE s1").unwrap().unwrap(), SqlPrepareStmt::Deallocate { name: "s1".into() });
        assert_eq!(p("drop prepare s1").unwrap().unwrap(), SqlPrepareStmt::Deallocate { name: "s1".into() });
        assert!(p("DROP TABLE t").is_none());
        assert!(p("SELECT 1").is_none());
    }

    #[test]
    fn malformed_forms_are_syntax_errors() {
        for sql in [
            "PREPARE",
            "PREPARE s",
            "PREPARE s FROM",
            "PREPARE s FROM 1",
            "PREPARE s FROM 'x' extra",
            "EXECUTE s USING",
            "EXECUTE s USING a",
            "EXECUTE s USING @a,",
            "DEALLOCATE PREPARE",
        ] {
            let e = p(sql).unwrap().unwrap_err();
            assert_eq!(e.code, 1064, "{sql}");
        }
    }
}
