//! `SELECT ... INTO @var [, @var ...]`: the one row a query returns goes into
//! user variables instead of a result set. Migration scripts lean on it
//! (`SELECT COUNT(*) INTO @has_col FROM information_schema.COLUMNS ...`, then
//! `PREPARE` a conditional ALTER). As MySQL: no row leaves the variables
//! unchanged with warning 1329, more than one row is error 1172, a list
//! whose length differs from the select list's is 1222, and the reply is OK
//! with the row count as affected rows.
//!
//! The INTO clause may stand before FROM or at the end of the statement (a
//! UNION's INTO applies to the whole union). It is cut out of the text and
//! the rest runs as an ordinary query.
//!
//! `INTO OUTFILE` / `INTO DUMPFILE` write a file on the server's host and
//! are refused as MySQL refuses them with secure_file_priv unset (1290).

use crate::engine::expr::value::MAX_WARNINGS;
use crate::engine::parse_ext::{self, Lexeme, Lexer};
use crate::engine::{parse_statement, vars, Engine, Parsed};
use crate::types::{QueryOutput, Session, SqlError, Warning, WarningLevel};
use norr_signals::Value;

#[derive(Debug, Clone)]
pub struct SelectInto {
    /// The statement without its INTO clause.
    pub query: Box<Parsed>,
    /// Lower-case user variable names, without `@`.
    pub vars: Vec<String>,
}

pub fn secure_file_priv() -> SqlError {
    SqlError::new(
        1290,
        "HY000",
        "The MySQL server is running with the --secure-file-priv option so it cannot execute this statement",
    )
}

/// Parse the statement if it is a SELECT with a top-level INTO (`None`:
/// not ours). `words` are its first words, upper-cased.
pub fn parse(sql: &str, words: &[String]) -> Option<Result<SelectInto, SqlError>> {
    // Most SELECTs have no INTO: a byte scan spares them the lexer.
    if !matches!(words.first().map(String::as_str), Some("SELECT" | "WITH")) || !parse_ext::mentions(sql, b"into") {
        return None;
    }
    let (start, end) = Lexer::new(sql).find_map(|l| match l {
        Lexeme::Word { start, end, depth: 0 } if sql[start..end].eq_ignore_ascii_case("INTO") => Some((start, end)),
        _ => None,
    })?;
    Some(parse_target(sql, start, end))
}

fn parse_target(sql: &str, into_start: usize, into_end: usize) -> Result<SelectInto, SqlError> {
    let b = sql.as_bytes();
    let near = |at: usize| crate::engine::error_map::parse_error_near(&sql[at.min(sql.len())..]);
    let skip_ws = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    let word_end = |mut i: usize| {
        while i < b.len() && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'_' | b'$' | b'.')) {
            i += 1;
        }
        i
    };
    let mut i = skip_ws(into_end);
    let w = word_end(i);
    let word = &sql[i..w];
    if word.eq_ignore_ascii_case("OUTFILE") || word.eq_ignore_ascii_case("DUMPFILE") {
        return Err(secure_file_priv());
    }
    let mut vars = Vec::new();
    loop {
        if b.get(i) != Some(&b'@') {
            let w = word_end(i);
            if w > i {
                // A stored program's local variable: there are none here.
                return Err(SqlError::new(1327, "42000", format!("Undeclared variable: {}", &sql[i..w])));
            }
            return Err(near(i));
        }
        i += 1;
        if b.get(i) == Some(&b'@') {
            return Err(near(i - 1));
        }
        let name = match b.get(i) {
            Some(&q @ (b'\'' | b'"' | b'`')) => {
                let close = sql[i + 1..].find(q as char).map(|k| i + 1 + k).ok_or_else(|| near(i))?;
                let n = sql[i + 1..close].to_string();
                i = close + 1;
                n
            }
            _ => {
                let w = word_end(i);
                if w == i {
                    return Err(near(i));
                }
                let n = sql[i..w].to_string();
                i = w;
                n
            }
        };
        vars.push(name.to_ascii_lowercase());
        let j = skip_ws(i);
        if b.get(j) == Some(&b',') {
            i = skip_ws(j + 1);
            continue;
        }
        i = j;
        break;
    }
    let query = format!("{} {}", &sql[..into_start], &sql[i..]);
    let inner = parse_statement(query.trim())?;
    if !matches!(&inner, Parsed::Sql(st) if matches!(st.as_ref(), sqlparser::ast::Statement::Query(_))) {
        return Err(near(into_start));
    }
    Ok(SelectInto { query: Box::new(inner), vars })
}

pub async fn run(e: &Engine, s: &mut Session, st: &SelectInto, params: &[Value]) -> Result<QueryOutput, SqlError> {
    let out = Box::pin(e.run_parsed(s, &st.query, params, None)).await?;
    let QueryOutput::Rows { columns, mut rows } = out else {
        return Err(SqlError::internal("SELECT ... INTO: the query returned no rows"));
    };
    if columns.len() != st.vars.len() {
        return Err(SqlError::new(1222, "21000", "The used SELECT statements have a different number of columns"));
    }
    match rows.len() {
        0 => {
            if s.warnings.len() < MAX_WARNINGS {
                s.warnings.push(Warning {
                    level: WarningLevel::Warning,
                    code: 1329,
                    message: "No data - zero rows fetched, selected, or processed".into(),
                });
            }
            Ok(QueryOutput::ok(0))
        }
        1 => {
            let row = rows.pop().unwrap_or_default();
            for (name, v) in st.vars.iter().zip(row) {
                vars::set_user_var(s, name, v);
            }
            Ok(QueryOutput::ok(1))
        }
        _ => Err(SqlError::new(1172, "42000", "Result consisted of more than one row")),
    }
}
