//! What `sqlparser` (0.63, MySqlDialect) cannot parse, and statement splitting.
//! Owner: catalog engineer.
//!
//! * `split_statements`: one COM_QUERY text -> statements (quotes, backticks and
//!   comments respected).
//! * `rewrite_lock_in_share_mode`: `LOCK IN SHARE MODE` -> `FOR SHARE`.
//! * `split_partition_clause` + `parse_partition_clause`: the `PARTITION BY ...`
//!   clause of CREATE TABLE, cut off the text before sqlparser sees it and parsed
//!   here into `catalog::PartitionInfo`.
//! * `parse_show`: every SHOW statement (sqlparser knows only some forms, and
//!   maps others to `ShowVariable`), parsed here into `ShowStmt`.

use crate::engine::catalog::{PartitionDef, PartitionInfo, PartitionKind, PartitionValues};
use crate::engine::dialect::NorrMySql;
use crate::engine::error_map::parse_error_near;
use crate::types::SqlError;
use norr_signals::Value;
use sqlparser::keywords::Keyword;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, Tokenizer, Whitespace};

/// Split text into statements at top-level semicolons. Empty statements are
/// dropped; a trailing `;` is fine.
pub fn split_statements(sql: &str) -> Vec<String> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            q @ (b'\'' | b'"' | b'`') => {
                i += 1;
                while i < b.len() {
                    if b[i] == b'\\' && q != b'`' {
                        i += 2;
                        continue;
                    }
                    if b[i] == q {
                        if i + 1 < b.len() && b[i + 1] == q {
                            i += 2;
                            continue;
                        }
                        break;
                    }
                    i += 1;
                }
                i += 1;
            }
            b'-' if i + 2 <= b.len()
                && b.get(i + 1) == Some(&b'-')
                && b.get(i + 2).is_none_or(|c| c.is_ascii_whitespace()) =>
            {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
            }
            b';' => {
                let s = sql[start..i].trim();
                if !is_blank(s) {
                    out.push(s.to_string());
                }
                i += 1;
                start = i;
            }
            _ => i += 1,
        }
    }
    if start < sql.len() {
        let s = sql[start.min(sql.len())..].trim();
        if !is_blank(s) {
            out.push(s.to_string());
        }
    }
    out
}

/// True if the text holds nothing but whitespace and comments.
fn is_blank(s: &str) -> bool {
    // Only text that starts with a comment can be all comments: anything else
    // is decided without tokenizing the statement (this runs for every
    // statement received as text).
    match s.trim_start().as_bytes().first() {
        None => return true,
        Some(b'-' | b'#' | b'/') => {}
        Some(_) => return false,
    }
    match Tokenizer::new(&NorrMySql, s).tokenize() {
        Ok(toks) => toks.iter().all(|t| matches!(t, Token::Whitespace(_) | Token::EOF)),
        Err(_) => s.trim().is_empty(),
    }
}

/// The first `n` words of a statement, upper-cased, as the tokenizer would
/// give them (unquoted words only; stops at the first other token), read
/// without tokenizing the whole statement. `None` when the text needs the real
/// tokenizer to be sure (a comment, `@` or non-ASCII text before the `n`th
/// word).
pub fn leading_words(sql: &str, n: usize) -> Option<Vec<String>> {
    let b = sql.as_bytes();
    let mut out = Vec::with_capacity(n);
    let mut i = 0;
    while out.len() < n {
        while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
            i += 1;
        }
        let Some(&c) = b.get(i) else { break };
        match c {
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                let start = i;
                while i < b.len() && matches!(b[i], b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'$') {
                    i += 1;
                }
                // The MySQL dialect's words go on through `@` and non-ASCII.
                if b.get(i).is_some_and(|&c| c >= 0x80 || c == b'@') {
                    return None;
                }
                out.push(sql[start..i].to_ascii_uppercase());
            }
            b'-' | b'#' | b'/' | b'@' | 0x80.. => return None,
            _ => break,
        }
    }
    Some(out)
}

/// The first `n` words of a statement, upper-cased (unquoted words only; stops
/// at the first other token): `leading_words` where it can tell, else the
/// tokenizer. Text the tokenizer rejects is a 1064.
pub fn first_words(sql: &str, n: usize) -> Result<Vec<String>, SqlError> {
    match leading_words(sql, n) {
        Some(w) => Ok(w),
        None => tokenizer_words(sql, n),
    }
}

/// `first_words` by tokenizing the whole statement.
fn tokenizer_words(sql: &str, n: usize) -> Result<Vec<String>, SqlError> {
    let mut w = Vec::new();
    for t in tokens(sql)?.into_iter().take(n) {
        match t {
            Token::Word(x) if x.quote_style.is_none() => w.push(x.value.to_ascii_uppercase()),
            _ => break,
        }
    }
    Ok(w)
}

/// Tokens without whitespace and comments. Errors become 1064.
pub fn tokens(sql: &str) -> Result<Vec<Token>, SqlError> {
    let toks = Tokenizer::new(&NorrMySql, sql)
        .tokenize()
        .map_err(|e| SqlError::parse(format!("You have an error in your SQL syntax: {e}")))?;
    Ok(toks.into_iter().filter(|t| !matches!(t, Token::Whitespace(_) | Token::EOF)).collect())
}

/// The byte offset of a 1-based (line, column in characters) location, as
/// sqlparser's tokenizer counts them; None for an empty span (line 0) or a
/// location outside `sql`.
pub fn byte_offset(sql: &str, at: sqlparser::tokenizer::Location) -> Option<usize> {
    let (line, column) = (at.line, at.column);
    if line == 0 || column == 0 {
        return None;
    }
    let mut l = 1u64;
    let mut line_start = 0usize;
    if line > 1 {
        for (i, c) in sql.char_indices() {
            if c == '\n' {
                l += 1;
                if l == line {
                    line_start = i + 1;
                    break;
                }
            }
        }
        if l != line {
            return None;
        }
    }
    let rest = &sql[line_start..];
    let col = usize::try_from(column - 1).ok()?;
    match rest.char_indices().nth(col) {
        Some((i, _)) => Some(line_start + i),
        // Just past the last character (a span's end).
        None if rest.chars().count() == col => Some(sql.len()),
        None => None,
    }
}

/// Does `sql` contain `word` (ASCII, any case) anywhere, quotes and
/// comments included? A quick test before a rewrite that needs a real scan.
pub fn mentions(sql: &str, word: &[u8]) -> bool {
    sql.as_bytes().windows(word.len()).any(|w| w.eq_ignore_ascii_case(word))
}

/// A word or a comma of statement text, outside quotes and comments, with
/// its paren depth (byte positions into the text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lexeme {
    Word { start: usize, end: usize, depth: i32 },
    Comma { at: usize, depth: i32 },
}

/// The words and commas of SQL text, in order, skipping quoted strings and
/// identifiers, comments and numbers: enough to find keywords for the text
/// rewrites sqlparser needs, lazily (a caller that stops early reads no
/// further).
pub struct Lexer<'a> {
    b: &'a [u8],
    i: usize,
    depth: i32,
}

impl<'a> Lexer<'a> {
    pub fn new(sql: &'a str) -> Lexer<'a> {
        Lexer { b: sql.as_bytes(), i: 0, depth: 0 }
    }
}

impl Iterator for Lexer<'_> {
    type Item = Lexeme;

    fn next(&mut self) -> Option<Lexeme> {
        let b = self.b;
        while self.i < b.len() {
            let i = &mut self.i;
            match b[*i] {
                q @ (b'\'' | b'"' | b'`') => {
                    *i += 1;
                    while *i < b.len() {
                        if b[*i] == b'\\' && q != b'`' {
                            *i += 2;
                            continue;
                        }
                        if b[*i] == q {
                            break;
                        }
                        *i += 1;
                    }
                    *i += 1;
                }
                b'(' => {
                    self.depth += 1;
                    *i += 1;
                }
                b')' => {
                    self.depth -= 1;
                    *i += 1;
                }
                b',' => {
                    *i += 1;
                    return Some(Lexeme::Comma { at: *i - 1, depth: self.depth });
                }
                b'#' => {
                    while *i < b.len() && b[*i] != b'\n' {
                        *i += 1;
                    }
                }
                b'-' if b.get(*i + 1) == Some(&b'-') => {
                    while *i < b.len() && b[*i] != b'\n' {
                        *i += 1;
                    }
                }
                b'/' if b.get(*i + 1) == Some(&b'*') => {
                    *i += 2;
                    while *i + 1 < b.len() && !(b[*i] == b'*' && b[*i + 1] == b'/') {
                        *i += 1;
                    }
                    *i += 2;
                }
                c if c.is_ascii_alphabetic() || c == b'_' => {
                    let start = *i;
                    while *i < b.len() && (b[*i].is_ascii_alphanumeric() || b[*i] == b'_' || b[*i] == b'$') {
                        *i += 1;
                    }
                    return Some(Lexeme::Word { start, end: *i, depth: self.depth });
                }
                c if c.is_ascii_digit() => {
                    while *i < b.len() && (b[*i].is_ascii_alphanumeric() || b[*i] == b'_' || b[*i] == b'.') {
                        *i += 1;
                    }
                }
                _ => *i += 1,
            }
        }
        None
    }
}

/// Byte ranges of the words of `sql` (outside quotes and comments), with
/// their paren depth.
pub(crate) fn words_with_pos(sql: &str) -> Vec<(usize, usize, i32)> {
    Lexer::new(sql)
        .filter_map(|l| match l {
            Lexeme::Word { start, end, depth } => Some((start, end, depth)),
            Lexeme::Comma { .. } => None,
        })
        .collect()
}

/// `... LOCK IN SHARE MODE` -> `... FOR SHARE` (sqlparser knows only the latter).
pub fn rewrite_lock_in_share_mode(sql: &str) -> String {
    let w = words_with_pos(sql);
    let is = |k: usize, word: &str| w.get(k).is_some_and(|&(s, e, _)| sql[s..e].eq_ignore_ascii_case(word));
    for k in 0..w.len() {
        if is(k, "LOCK") && is(k + 1, "IN") && is(k + 2, "SHARE") && is(k + 3, "MODE") {
            let (s, _, _) = w[k];
            let (_, e, _) = w[k + 3];
            let rewritten = format!("{}FOR SHARE{}", &sql[..s], &sql[e..]);
            return rewrite_lock_in_share_mode(&rewritten);
        }
    }
    sql.to_string()
}

/// The first word of a statement, upper-cased ("" if none).
pub fn first_word(sql: &str) -> String {
    words_with_pos(sql).first().map(|&(s, e, _)| sql[s..e].to_ascii_uppercase()).unwrap_or_default()
}

/// For `CREATE TABLE ... PARTITION BY ...`: the text without the clause and the
/// clause itself (starting at `PARTITION`). Other statements are returned as is.
pub fn split_partition_clause(sql: &str) -> (String, Option<String>) {
    let w = words_with_pos(sql);
    let up = |k: usize| w.get(k).map(|&(s, e, _)| sql[s..e].to_ascii_uppercase()).unwrap_or_default();
    let is_create_table = up(0) == "CREATE" && (up(1) == "TABLE" || (up(1) == "TEMPORARY" && up(2) == "TABLE"));
    let is_alter = up(0) == "ALTER" && up(1) == "TABLE";
    if !is_create_table && !is_alter {
        return (sql.to_string(), None);
    }
    for (k, &(start, _, depth)) in w.iter().enumerate() {
        if depth == 0 && up(k) == "PARTITION" && up(k + 1) == "BY" {
            let s = start;
            return (sql[..s].trim_end().to_string(), Some(sql[s..].trim().to_string()));
        }
    }
    (sql.to_string(), None)
}

/// A cursor over tokens for the small parsers here.
pub struct Cursor {
    toks: Vec<Token>,
    pos: usize,
}

impl Cursor {
    pub fn new(sql: &str) -> Result<Cursor, SqlError> {
        Ok(Cursor { toks: tokens(sql)?, pos: 0 })
    }
    pub fn peek(&self) -> Option<&Token> {
        self.toks.get(self.pos)
    }
    pub fn peek_at(&self, k: usize) -> Option<&Token> {
        self.toks.get(self.pos + k)
    }
    pub fn at_end(&self) -> bool {
        self.pos >= self.toks.len()
    }
    pub fn next_token(&mut self) -> Option<Token> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }
    /// Text of the rest, for error messages.
    pub fn rest_text(&self) -> String {
        join_tokens(&self.toks[self.pos.min(self.toks.len())..])
    }
    pub fn err(&self) -> SqlError {
        let r = self.rest_text();
        parse_error_near(&r.chars().take(80).collect::<String>())
    }
    /// True if the next token is the (unquoted) word `kw`, case-insensitive.
    pub fn is_word(&self, kw: &str) -> bool {
        self.is_word_at(0, kw)
    }
    pub fn is_word_at(&self, k: usize, kw: &str) -> bool {
        matches!(self.peek_at(k), Some(Token::Word(w)) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(kw))
    }
    pub fn eat_word(&mut self, kw: &str) -> bool {
        if self.is_word(kw) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    pub fn expect_word(&mut self, kw: &str) -> Result<(), SqlError> {
        if self.eat_word(kw) {
            Ok(())
        } else {
            Err(self.err())
        }
    }
    pub fn eat(&mut self, t: &Token) -> bool {
        if self.peek() == Some(t) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    pub fn expect(&mut self, t: &Token) -> Result<(), SqlError> {
        if self.eat(t) {
            Ok(())
        } else {
            Err(self.err())
        }
    }
    /// An identifier (quoted or not).
    pub fn ident(&mut self) -> Result<String, SqlError> {
        match self.peek() {
            Some(Token::Word(w)) => {
                let v = w.value.clone();
                self.pos += 1;
                Ok(v)
            }
            _ => Err(self.err()),
        }
    }
    /// `name` or `db.name`.
    pub fn object_name(&mut self) -> Result<(Option<String>, String), SqlError> {
        let a = self.ident()?;
        if self.eat(&Token::Period) {
            let b = self.ident()?;
            Ok((Some(a), b))
        } else {
            Ok((None, a))
        }
    }
    pub fn string(&mut self) -> Result<String, SqlError> {
        match self.peek() {
            Some(Token::SingleQuotedString(s)) | Some(Token::DoubleQuotedString(s)) => {
                let v = s.clone();
                self.pos += 1;
                Ok(v)
            }
            _ => Err(self.err()),
        }
    }
    pub fn number(&mut self) -> Result<u64, SqlError> {
        match self.peek() {
            Some(Token::Number(n, _)) => {
                let v = n.parse::<u64>().map_err(|_| self.err())?;
                self.pos += 1;
                Ok(v)
            }
            _ => Err(self.err()),
        }
    }
    /// Tokens of a balanced `( ... )` group, without the outer parens.
    pub fn paren_group(&mut self) -> Result<Vec<Token>, SqlError> {
        self.expect(&Token::LParen)?;
        let mut depth = 1;
        let mut out = Vec::new();
        loop {
            let t = self.next_token().ok_or_else(|| parse_error_near(""))?;
            match t {
                Token::LParen => depth += 1,
                Token::RParen => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(out);
                    }
                }
                _ => {}
            }
            out.push(t);
        }
    }
    /// Tokens up to the end.
    /// How many tokens the statement has.
    pub fn token_count(&self) -> usize {
        self.toks.len()
    }
    pub fn rest(&mut self) -> Vec<Token> {
        let r = self.toks[self.pos.min(self.toks.len())..].to_vec();
        self.pos = self.toks.len();
        r
    }
}

/// Re-join tokens into SQL text with MySQL-like spacing.
pub fn join_tokens(toks: &[Token]) -> String {
    let mut s = String::new();
    let mut prev: Option<&Token> = None;
    for t in toks {
        let no_space = match (prev, t) {
            (None, _) => true,
            (_, Token::RParen | Token::Comma | Token::Period) => true,
            (Some(Token::LParen | Token::Period), _) => true,
            (Some(Token::Word(w)), Token::LParen) => w.quote_style.is_none() && w.keyword != Keyword::IN,
            _ => false,
        };
        if !no_space {
            s.push(' ');
        }
        match t {
            Token::Word(w) if w.quote_style == Some('`') => {
                s.push('`');
                s.push_str(&w.value.replace('`', "``"));
                s.push('`');
            }
            _ => s.push_str(&t.to_string()),
        }
        prev = Some(t);
    }
    s
}

/// Split a token list at top-level commas.
fn split_commas(toks: &[Token]) -> Vec<Vec<Token>> {
    let mut out = vec![Vec::new()];
    let mut depth = 0;
    for t in toks {
        match t {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            Token::Comma if depth == 0 => {
                out.push(Vec::new());
                continue;
            }
            _ => {}
        }
        out.last_mut().expect("never empty").push(t.clone());
    }
    if out.len() == 1 && out[0].is_empty() {
        out.clear();
    }
    out
}

fn ident_list(toks: &[Token]) -> Result<Vec<String>, SqlError> {
    split_commas(toks)
        .into_iter()
        .map(|part| match part.as_slice() {
            [Token::Word(w)] => Ok(w.value.clone()),
            _ => Err(parse_error_near(&join_tokens(&part))),
        })
        .collect()
}

/// Evaluate a constant literal of a partition definition: numbers, strings,
/// negative numbers, NULL. Anything else is kept as text only (`None`).
pub fn literal_value(text: &str) -> Option<Value> {
    let expr = Parser::new(&NorrMySql).try_with_sql(text).ok()?.parse_expr().ok()?;
    literal_expr_value(&expr)
}

/// A charset introducer (`_binary`, `_utf8mb4`, ...): true for `_binary`;
/// an unknown character set is 1115, as in MySQL.
pub fn introducer_is_binary(introducer: &str) -> Result<bool, SqlError> {
    let cs = introducer.trim_start_matches('_').to_ascii_lowercase();
    match cs.as_str() {
        "binary" => Ok(true),
        "utf8mb4" | "utf8mb3" | "utf8" | "ascii" | "latin1" => Ok(false),
        _ => Err(SqlError::new(1115, "42000", format!("Unknown character set: '{cs}'"))),
    }
}

/// Text of a COM_QUERY / COM_STMT_PREPARE packet. SQL is parsed as UTF-8,
/// but a string literal may hold any bytes: mysqldump writes binary column
/// values as raw bytes between quotes (backslash-escaped), and MySQL keeps
/// them byte for byte. Such a literal (not valid UTF-8 once unescaped) is
/// rewritten as the hex literal of its bytes, which is the same binary
/// string; a `_binary` introducer before it goes, as it says nothing more.
/// Bytes outside literals that are not UTF-8 (in comments, or bad
/// identifiers the parser then refuses) are replaced by U+FFFD.
pub fn query_text(bytes: &[u8]) -> String {
    if let Ok(s) = std::str::from_utf8(bytes) {
        return s.to_string();
    }
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len() + 16);
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'\'' | b'"' => {
                let start = i;
                let mut value = Vec::new();
                i += 1;
                let mut closed = false;
                while i < bytes.len() {
                    let b = bytes[i];
                    if b == b'\\' && i + 1 < bytes.len() {
                        let e = bytes[i + 1];
                        match e {
                            b'0' => value.push(0),
                            b'b' => value.push(8),
                            b'n' => value.push(b'\n'),
                            b'r' => value.push(b'\r'),
                            b't' => value.push(b'\t'),
                            b'Z' => value.push(0x1a),
                            // MySQL keeps the backslash of \% and \_ (LIKE patterns).
                            b'%' | b'_' => value.extend_from_slice(&[b'\\', e]),
                            other => value.push(other),
                        }
                        i += 2;
                    } else if b == c {
                        if bytes.get(i + 1) == Some(&c) {
                            value.push(c);
                            i += 2;
                        } else {
                            i += 1;
                            closed = true;
                            break;
                        }
                    } else {
                        value.push(b);
                        i += 1;
                    }
                }
                if closed && std::str::from_utf8(&value).is_err() {
                    strip_binary_introducer(&mut out);
                    out.extend_from_slice(b"X'");
                    for b in &value {
                        out.extend_from_slice(format!("{b:02X}").as_bytes());
                    }
                    out.push(b'\'');
                } else {
                    out.extend_from_slice(&bytes[start..i]);
                }
            }
            // Comments are copied whole (a quote in one starts no literal);
            // `/*!` and `/*+` hold SQL and are scanned as such.
            b'#' => i = copy_until(bytes, i, b"\n", &mut out),
            b'-' if bytes.get(i + 1) == Some(&b'-') && bytes.get(i + 2).is_none_or(|b| b.is_ascii_whitespace()) => {
                i = copy_until(bytes, i, b"\n", &mut out)
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') && !matches!(bytes.get(i + 2), Some(b'!' | b'+')) => {
                i = copy_until(bytes, i, b"*/", &mut out)
            }
            b'`' => {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'`' {
                    i += 1;
                }
                i = (i + 1).min(bytes.len());
                out.extend_from_slice(&bytes[start..i]);
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Copy `bytes[from..]` up to and including the first `end` after `from`
/// (or to the end); returns where copying stopped.
fn copy_until(bytes: &[u8], from: usize, end: &[u8], out: &mut Vec<u8>) -> usize {
    let stop =
        bytes[from + 1..].windows(end.len()).position(|w| w == end).map_or(bytes.len(), |p| from + 1 + p + end.len());
    out.extend_from_slice(&bytes[from..stop]);
    stop
}

/// Drop a trailing `_binary` introducer (and the blanks after it) from `out`.
fn strip_binary_introducer(out: &mut Vec<u8>) {
    let trimmed = out.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(0, |p| p + 1);
    const INTRO: &[u8] = b"_binary";
    if trimmed >= INTRO.len() && out[trimmed - INTRO.len()..trimmed].eq_ignore_ascii_case(INTRO) {
        let before = trimmed - INTRO.len();
        let word_start = before == 0 || !(out[before - 1].is_ascii_alphanumeric() || out[before - 1] == b'_');
        if word_start {
            out.truncate(before);
        }
    }
}

/// MySQL's bit-value literal `b'1010'` (sqlparser reads it as a byte string).
/// NorrDB gives it its numeric value, so it compares with and stores into BIT
/// columns as MySQL does; MySQL would print it as a binary string in a select
/// list (`SELECT b'1000001'` is 'A' there, 65 here). None: not only 0s and 1s,
/// or more than 64 bits.
pub fn bit_literal(s: &str) -> Option<Value> {
    if s.is_empty() || s.len() > 64 || !s.bytes().all(|c| c == b'0' || c == b'1') {
        return None;
    }
    u64::from_str_radix(s, 2).ok().map(Value::UInt)
}

/// A literal expression's value (numbers, strings, NULL, TRUE/FALSE, -number).
pub fn literal_expr_value(expr: &sqlparser::ast::Expr) -> Option<Value> {
    use sqlparser::ast::{Expr, UnaryOperator, Value as V};
    match expr {
        Expr::Value(v) => match &v.value {
            V::Number(n, _) => number_value(n),
            V::SingleQuotedString(s) | V::DoubleQuotedString(s) => Some(Value::Bytes(s.as_bytes().to_vec())),
            V::SingleQuotedByteStringLiteral(s) => bit_literal(s).or_else(|| Some(Value::Bytes(s.as_bytes().to_vec()))),
            V::Null => Some(Value::Null),
            V::Boolean(b) => Some(Value::Int(*b as i64)),
            V::HexStringLiteral(h) => {
                let bytes: Option<Vec<u8>> =
                    (0..h.len()).step_by(2).map(|i| u8::from_str_radix(h.get(i..i + 2)?, 16).ok()).collect();
                bytes.map(Value::Bytes)
            }
            _ => None,
        },
        Expr::UnaryOp { op: UnaryOperator::Minus, expr } => match literal_expr_value(expr)? {
            Value::Int(i) => Some(Value::Int(i.checked_neg()?)),
            Value::UInt(u) if u == 1u64 << 63 => Some(Value::Int(i64::MIN)),
            Value::UInt(u) => Some(Value::Int(-(i64::try_from(u).ok()?))),
            Value::Decimal(d) => Some(Value::Decimal(norr_signals::Decimal { mantissa: -d.mantissa, scale: d.scale })),
            Value::Double(f) => Some(Value::Double(-f)),
            _ => None,
        },
        Expr::UnaryOp { op: UnaryOperator::Plus, expr } => literal_expr_value(expr),
        Expr::Prefixed { prefix, value } if introducer_is_binary(&prefix.value).is_ok() => literal_expr_value(value),
        Expr::Nested(e) => literal_expr_value(e),
        _ => None,
    }
}

/// A numeric literal as MySQL types it: integer, DECIMAL (with a point) or DOUBLE (with an exponent).
pub fn number_value(n: &str) -> Option<Value> {
    if let Ok(i) = n.parse::<i64>() {
        return Some(Value::Int(i));
    }
    if let Ok(u) = n.parse::<u64>() {
        return Some(Value::UInt(u));
    }
    if n.contains(['e', 'E']) {
        return n.parse::<f64>().ok().map(Value::Double);
    }
    let (int, frac) = n.split_once('.').unwrap_or((n, ""));
    let digits = format!("{int}{frac}");
    if digits.len() <= 38 {
        if let Ok(m) = digits.parse::<i128>() {
            return Some(Value::Decimal(norr_signals::Decimal { mantissa: m, scale: frac.len() as u8 }));
        }
    }
    n.parse::<f64>().ok().map(Value::Double)
}

/// Parse `PARTITION BY ...` (the text starts at PARTITION).
pub fn parse_partition_clause(text: &str) -> Result<PartitionInfo, SqlError> {
    let mut c = Cursor::new(text)?;
    c.expect_word("PARTITION")?;
    c.expect_word("BY")?;
    let linear = c.eat_word("LINEAR");
    let kind = if c.eat_word("KEY") {
        if c.eat_word("ALGORITHM") {
            c.expect(&Token::Eq)?;
            c.number()?;
        }
        PartitionKind::Key { columns: ident_list(&c.paren_group()?)?, linear }
    } else if c.eat_word("HASH") {
        PartitionKind::Hash { expr: join_tokens(&c.paren_group()?), linear }
    } else if !linear && c.eat_word("RANGE") {
        if c.eat_word("COLUMNS") {
            PartitionKind::RangeColumns { columns: ident_list(&c.paren_group()?)? }
        } else {
            PartitionKind::Range { expr: join_tokens(&c.paren_group()?) }
        }
    } else if !linear && c.eat_word("LIST") {
        if c.eat_word("COLUMNS") {
            PartitionKind::ListColumns { columns: ident_list(&c.paren_group()?)? }
        } else {
            PartitionKind::List { expr: join_tokens(&c.paren_group()?) }
        }
    } else {
        return Err(c.err());
    };
    let mut count = None;
    if c.eat_word("PARTITIONS") {
        let n = c.number()?;
        if n == 0 {
            return Err(SqlError::new(1504, "HY000", "Number of partitions = 0 is not an allowed value"));
        }
        count = Some(n as u32);
    }
    if c.is_word("SUBPARTITION") {
        return Err(SqlError::unsupported("SUBPARTITION"));
    }
    let mut defs = Vec::new();
    if c.peek() == Some(&Token::LParen) {
        let body = c.paren_group()?;
        for part in split_commas(&body) {
            defs.push(parse_partition_def(&part, &kind)?);
        }
    }
    if !c.at_end() {
        return Err(c.err());
    }
    let info = PartitionInfo { kind, count, defs };
    info.validate()?;
    Ok(info)
}

fn parse_partition_def(toks: &[Token], kind: &PartitionKind) -> Result<PartitionDef, SqlError> {
    let text = join_tokens(toks);
    let mut c = Cursor { toks: toks.to_vec(), pos: 0 };
    c.expect_word("PARTITION")?;
    let name = c.ident()?;
    let mut values = PartitionValues::None;
    if c.eat_word("VALUES") {
        if c.eat_word("LESS") {
            c.expect_word("THAN")?;
            if c.eat_word("MAXVALUE") {
                values = PartitionValues::LessThan(vec![None]);
            } else {
                let g = c.paren_group()?;
                let mut vals = Vec::new();
                for p in split_commas(&g) {
                    if matches!(p.as_slice(), [Token::Word(w)] if w.value.eq_ignore_ascii_case("MAXVALUE")) {
                        vals.push(None);
                    } else {
                        vals.push(Some(join_tokens(&p)));
                    }
                }
                values = PartitionValues::LessThan(vals);
            }
            if !matches!(kind, PartitionKind::Range { .. } | PartitionKind::RangeColumns { .. }) {
                return Err(SqlError::new(
                    1480,
                    "HY000",
                    "Only RANGE PARTITIONING can use VALUES LESS THAN in partition definition",
                ));
            }
        } else if c.eat_word("IN") {
            let g = c.paren_group()?;
            let mut lists = Vec::new();
            for p in split_commas(&g) {
                if p.first() == Some(&Token::LParen) {
                    let mut cc = Cursor { toks: p.clone(), pos: 0 };
                    let inner = cc.paren_group()?;
                    lists.push(split_commas(&inner).iter().map(|t| join_tokens(t)).collect());
                } else {
                    lists.push(vec![join_tokens(&p)]);
                }
            }
            values = PartitionValues::In(lists);
            if !matches!(kind, PartitionKind::List { .. } | PartitionKind::ListColumns { .. }) {
                return Err(SqlError::new(
                    1480,
                    "HY000",
                    "Only LIST PARTITIONING can use VALUES IN in partition definition",
                ));
            }
        } else {
            return Err(parse_error_near(&text));
        }
    }
    // ENGINE = x, COMMENT = '...', NODEGROUP n ...: accepted and ignored.
    let mut comment = String::new();
    while !c.at_end() {
        if c.eat_word("STORAGE") {
            continue;
        }
        if c.eat_word("ENGINE") || c.eat_word("NODEGROUP") {
            c.eat(&Token::Eq);
            c.next_token();
            continue;
        }
        if c.eat_word("COMMENT") {
            c.eat(&Token::Eq);
            comment = c.string()?;
            continue;
        }
        return Err(c.err());
    }
    Ok(PartitionDef { name, values, comment })
}

// ---------------- SHOW ----------------

/// `LIKE 'pattern'` or `WHERE expr` after a SHOW.
#[derive(Debug, Clone, PartialEq)]
pub enum ShowFilter {
    None,
    Like(String),
    Where(Box<sqlparser::ast::Expr>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum ShowStmt {
    Databases {
        filter: ShowFilter,
    },
    Tables {
        full: bool,
        db: Option<String>,
        filter: ShowFilter,
    },
    Columns {
        full: bool,
        db: Option<String>,
        table: String,
        filter: ShowFilter,
    },
    Index {
        db: Option<String>,
        table: String,
        filter: ShowFilter,
    },
    CreateTable {
        db: Option<String>,
        table: String,
    },
    CreateDatabase {
        db: String,
        if_not_exists: bool,
    },
    CreateView {
        db: Option<String>,
        table: String,
    },
    Variables {
        global: bool,
        filter: ShowFilter,
    },
    Status {
        global: bool,
        filter: ShowFilter,
    },
    Warnings {
        count_only: bool,
        limit: Option<u64>,
    },
    Errors {
        count_only: bool,
        limit: Option<u64>,
    },
    Engines,
    /// SHOW ENGINE name STATUS (`mutex`: SHOW ENGINE name MUTEX).
    EngineStatus {
        engine: String,
        mutex: bool,
    },
    Collation {
        filter: ShowFilter,
    },
    CharacterSet {
        filter: ShowFilter,
    },
    TableStatus {
        db: Option<String>,
        filter: ShowFilter,
    },
    Processlist {
        full: bool,
    },
    Plugins,
    Grants,
    Privileges,
    /// SHOW MASTER/BINARY/REPLICA/SLAVE STATUS, SHOW BINARY LOGS ...: empty result.
    Empty(&'static str),
}

fn show_filter(c: &mut Cursor) -> Result<ShowFilter, SqlError> {
    if c.eat_word("LIKE") {
        return Ok(ShowFilter::Like(c.string()?));
    }
    if c.eat_word("WHERE") {
        let rest = c.rest();
        let text = join_tokens(&rest);
        let est = crate::engine::depth::preflight(rest.iter())?;
        let expr = crate::engine::depth::bounded(est, || {
            Parser::new(&NorrMySql)
                .try_with_sql(&text)
                .and_then(|mut p| p.parse_expr())
                .map_err(|_| parse_error_near(&text))
        })?;
        return Ok(ShowFilter::Where(Box::new(expr)));
    }
    Ok(ShowFilter::None)
}

fn from_db(c: &mut Cursor) -> Result<Option<String>, SqlError> {
    if c.eat_word("FROM") || c.eat_word("IN") {
        Ok(Some(c.ident()?))
    } else {
        Ok(None)
    }
}

fn limit(c: &mut Cursor) -> Result<Option<u64>, SqlError> {
    if c.eat_word("LIMIT") {
        let a = c.number()?;
        if c.eat(&Token::Comma) {
            return Ok(Some(c.number()?));
        }
        return Ok(Some(a));
    }
    Ok(None)
}

/// Parse a SHOW statement (the text starts with SHOW).
pub fn parse_show(sql: &str) -> Result<ShowStmt, SqlError> {
    let mut c = Cursor::new(sql)?;
    c.expect_word("SHOW")?;
    let global = c.eat_word("GLOBAL");
    let session = !global && (c.eat_word("SESSION") || c.eat_word("LOCAL"));
    let _ = session;
    let full = c.eat_word("FULL");
    let extended = c.eat_word("EXTENDED");
    let _ = extended || c.eat_word("EXTENDED");
    let full = full || c.eat_word("FULL");
    let st = if c.eat_word("DATABASES") || c.eat_word("SCHEMAS") {
        ShowStmt::Databases { filter: show_filter(&mut c)? }
    } else if c.eat_word("TABLES") {
        let db = from_db(&mut c)?;
        ShowStmt::Tables { full, db, filter: show_filter(&mut c)? }
    } else if c.eat_word("COLUMNS") || c.eat_word("FIELDS") {
        if !(c.eat_word("FROM") || c.eat_word("IN")) {
            return Err(c.err());
        }
        let (mut db, table) = c.object_name()?;
        if let Some(d) = from_db(&mut c)? {
            db = Some(d);
        }
        ShowStmt::Columns { full, db, table, filter: show_filter(&mut c)? }
    } else if c.eat_word("INDEX") || c.eat_word("INDEXES") || c.eat_word("KEYS") {
        if !(c.eat_word("FROM") || c.eat_word("IN")) {
            return Err(c.err());
        }
        let (mut db, table) = c.object_name()?;
        if let Some(d) = from_db(&mut c)? {
            db = Some(d);
        }
        ShowStmt::Index { db, table, filter: show_filter(&mut c)? }
    } else if c.eat_word("CREATE") {
        if c.eat_word("TABLE") {
            let (db, table) = c.object_name()?;
            ShowStmt::CreateTable { db, table }
        } else if c.eat_word("DATABASE") || c.eat_word("SCHEMA") {
            let mut ine = false;
            if c.eat_word("IF") {
                c.expect_word("NOT")?;
                c.expect_word("EXISTS")?;
                ine = true;
            }
            ShowStmt::CreateDatabase { db: c.ident()?, if_not_exists: ine }
        } else if c.eat_word("VIEW") {
            let (db, table) = c.object_name()?;
            ShowStmt::CreateView { db, table }
        } else {
            return Err(SqlError::unsupported(format!("SHOW CREATE {}", c.rest_text())));
        }
    } else if c.eat_word("VARIABLES") {
        ShowStmt::Variables { global, filter: show_filter(&mut c)? }
    } else if c.eat_word("STATUS") {
        ShowStmt::Status { global, filter: show_filter(&mut c)? }
    } else if c.is_word("COUNT") {
        c.next_token();
        let g = c.paren_group()?;
        if !matches!(g.as_slice(), [Token::Mul]) {
            return Err(c.err());
        }
        if c.eat_word("WARNINGS") {
            ShowStmt::Warnings { count_only: true, limit: None }
        } else if c.eat_word("ERRORS") {
            ShowStmt::Errors { count_only: true, limit: None }
        } else {
            return Err(c.err());
        }
    } else if c.eat_word("WARNINGS") {
        ShowStmt::Warnings { count_only: false, limit: limit(&mut c)? }
    } else if c.eat_word("ERRORS") {
        ShowStmt::Errors { count_only: false, limit: limit(&mut c)? }
    } else if c.eat_word("ENGINES") || (c.eat_word("STORAGE") && c.eat_word("ENGINES")) {
        ShowStmt::Engines
    } else if c.eat_word("ENGINE") {
        let engine = c.ident()?;
        let mutex = if c.eat_word("STATUS") {
            false
        } else if c.eat_word("MUTEX") {
            true
        } else {
            return Err(c.err());
        };
        ShowStmt::EngineStatus { engine, mutex }
    } else if c.eat_word("COLLATION") {
        ShowStmt::Collation { filter: show_filter(&mut c)? }
    } else if c.eat_word("CHARSET") || (c.is_word("CHARACTER") && c.is_word_at(1, "SET")) {
        if c.eat_word("CHARACTER") {
            c.expect_word("SET")?;
        }
        ShowStmt::CharacterSet { filter: show_filter(&mut c)? }
    } else if c.eat_word("TABLE") {
        c.expect_word("STATUS")?;
        let db = from_db(&mut c)?;
        ShowStmt::TableStatus { db, filter: show_filter(&mut c)? }
    } else if c.eat_word("PROCESSLIST") {
        ShowStmt::Processlist { full }
    } else if c.eat_word("PLUGINS") {
        ShowStmt::Plugins
    } else if c.eat_word("GRANTS") {
        c.rest();
        ShowStmt::Grants
    } else if c.eat_word("PRIVILEGES") {
        ShowStmt::Privileges
    } else if c.eat_word("MASTER") || c.eat_word("BINARY") || c.eat_word("REPLICA") || c.eat_word("SLAVE") {
        c.rest();
        ShowStmt::Empty("status")
    } else if c.eat_word("TRIGGERS") || c.eat_word("EVENTS") {
        c.rest();
        ShowStmt::Empty("triggers")
    } else if c.eat_word("PROCEDURE") || c.eat_word("FUNCTION") {
        c.rest();
        ShowStmt::Empty("routines")
    } else if c.eat_word("OPEN") {
        c.rest();
        ShowStmt::Empty("open tables")
    } else {
        return Err(c.err());
    };
    if !c.at_end() {
        return Err(c.err());
    }
    Ok(st)
}

/// Number of `?` placeholders in a statement text.
pub fn count_placeholders(sql: &str) -> Result<usize, SqlError> {
    Ok(tokens(sql)?.iter().filter(|t| matches!(t, Token::Placeholder(p) if p == "?")).count())
}

#[allow(dead_code)]
fn _whitespace_is_used(_: Whitespace) {}

#[cfg(test)]
mod query_text_tests {
    use super::query_text;

    #[test]
    fn utf8_text_is_unchanged() {
        let sql = "SELECT 'é\\'' , \"😀\", `a``b` -- it's\n";
        assert_eq!(query_text(sql.as_bytes()), sql);
    }

    #[test]
    fn binary_literals_become_hex_literals_of_their_bytes() {
        let mut sql =
            b"INSERT INTO t VALUES (1,'a\xea\\0\\'\\\\\\n''z'),(2,_binary '\xff'),(3,'ok','\xc3\xa9')".to_vec();
        sql.extend_from_slice(b",(4,\"q\xfe\"\"\")");
        assert_eq!(
            query_text(&sql),
            "INSERT INTO t VALUES (1,X'61EA00275C0A277A'),(2,X'FF'),(3,'ok','\u{e9}'),(4,X'71FE22')"
        );
        // The LIKE escapes keep their backslash; `x_binary` is no introducer.
        assert_eq!(query_text(b"SELECT '\\%\xfe\\_', x_binary '\xfe'"), "SELECT X'5C25FE5C5F', x_binary X'FE'");
    }

    #[test]
    fn quotes_in_comments_start_no_literal() {
        let sql = b"/* it's */ SELECT 1 # don't\n, '\xfe' -- a'b\n/*!40101 , '\xfd' */";
        assert_eq!(query_text(sql), "/* it's */ SELECT 1 # don't\n, X'FE' -- a'b\n/*!40101 , X'FD' */");
    }

    #[test]
    fn bad_bytes_outside_literals_and_unclosed_literals_do_not_panic() {
        assert_eq!(query_text(b"SELECT \xff"), "SELECT \u{fffd}");
        assert_eq!(query_text(b"SELECT '\xff"), "SELECT '\u{fffd}");
        assert_eq!(query_text(b"SELECT '\\"), "SELECT '\\");
        for n in 0..64u8 {
            let v: Vec<u8> = (0..n)
                .map(|i| [b'\'', b'\\', 0xff, b'"', b'`', b'-', b'#', b'/', b'*'][(i as usize * 7 + n as usize) % 9])
                .collect();
            let _ = query_text(&v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_statements() {
        assert_eq!(
            split_statements("select 1; select ';' ;; -- x\n select `a;b`;"),
            vec!["select 1", "select ';'", "-- x\n select `a;b`"]
        );
        assert_eq!(split_statements("select 'it''s;'; /* ; */ select 2"), vec!["select 'it''s;'", "/* ; */ select 2"]);
        assert_eq!(split_statements("  ;  -- only a comment"), Vec::<String>::new());
        assert_eq!(split_statements(r"select 'a\';b'"), vec![r"select 'a\';b'"]);
    }

    #[test]
    fn leading_words_agree_with_the_tokenizer() {
        let cases = [
            "SELECT c FROM sbtest1 WHERE id=1",
            "  select\n\tdistinct c from t",
            "SET NAMES utf8mb4",
            "set character set 'latin1'",
            "SHOW FULL TABLES FROM db",
            "CREATE DATABASE IF NOT EXISTS d",
            "create schema `x`",
            "CREATE TABLE t (a INT) PARTITION BY KEY(a)",
            "INSERT INTO sbtest1 (id, k, c, pad) VALUES (1, 2, 'a', 'b')",
            "UPDATE t SET a=a+1",
            "SELECT 1",
            "SELECT 'x'",
            "SELECT`a`FROM t",
            "BEGIN",
            "COMMIT;",
            "x$y z",
            "SELECT* FROM t",
            "select(1)",
            "",
            "   ",
            "a_b c_1 d9",
        ];
        for sql in cases {
            let got = leading_words(sql, 3).unwrap_or_else(|| panic!("{sql:?}: no answer"));
            assert_eq!(got, tokenizer_words(sql, 3).unwrap(), "{sql:?}");
        }
        // Comments, `@` inside a word and non-ASCII need the tokenizer.
        for sql in
            ["-- c\nSELECT 1", "/* c */ SELECT 1", "# c\nSELECT 1", "SET@x", "SET @x := 1", "SELECT é", "SELECTé 1"]
        {
            assert_eq!(leading_words(sql, 3), None, "{sql:?}");
        }
    }

    #[test]
    fn blank_statements() {
        for s in ["", "  ", "-- x", "/* a */ -- b", "#c"] {
            assert!(is_blank(s), "{s:?}");
        }
        for s in ["select 1", "-1", "/1", "/* a */ select 1", "x"] {
            assert!(!is_blank(s), "{s:?}");
        }
    }

    #[test]
    fn rewrites_lock_in_share_mode() {
        assert_eq!(
            rewrite_lock_in_share_mode("SELECT * FROM t WHERE a=1 lock in share   mode"),
            "SELECT * FROM t WHERE a=1 FOR SHARE"
        );
        assert_eq!(rewrite_lock_in_share_mode("SELECT 'lock in share mode'"), "SELECT 'lock in share mode'");
    }

    #[test]
    fn splits_and_parses_partition_clauses() {
        let (t, p) = split_partition_clause(
            "CREATE TABLE t (a INT, b INT, PRIMARY KEY (a)) ENGINE=ndb PARTITION BY KEY (a) PARTITIONS 4",
        );
        assert_eq!(t, "CREATE TABLE t (a INT, b INT, PRIMARY KEY (a)) ENGINE=ndb");
        let info = parse_partition_clause(&p.unwrap()).unwrap();
        assert_eq!(info.kind, PartitionKind::Key { columns: vec!["a".into()], linear: false });
        assert_eq!(info.count, Some(4));

        let info = parse_partition_clause(
            "PARTITION BY RANGE (YEAR(d)) (PARTITION p0 VALUES LESS THAN (1990), PARTITION p1 VALUES LESS THAN MAXVALUE ENGINE = ndbcluster)",
        )
        .unwrap();
        assert_eq!(info.kind, PartitionKind::Range { expr: "YEAR(d)".into() });
        assert_eq!(info.defs.len(), 2);
        assert_eq!(info.defs[0].values, PartitionValues::LessThan(vec![Some("1990".into())]));
        assert_eq!(info.defs[1].values, PartitionValues::LessThan(vec![None]));
        assert_eq!(info.partition_count(), 2);

        let info = parse_partition_clause(
            "PARTITION BY LIST COLUMNS (c, d) (PARTITION p0 VALUES IN (('a', 1), ('b', 2)), PARTITION p1 VALUES IN (('c', -3)))",
        )
        .unwrap();
        assert_eq!(
            info.defs[0].values,
            PartitionValues::In(vec![vec!["'a'".into(), "1".into()], vec!["'b'".into(), "2".into()]])
        );
        assert_eq!(info.defs[1].literal_values()[0][1], Some(Value::Int(-3)));

        let info = parse_partition_clause("PARTITION BY LINEAR HASH (a * 2) PARTITIONS 3").unwrap();
        assert_eq!(info.kind, PartitionKind::Hash { expr: "a * 2".into(), linear: true });
        assert!(parse_partition_clause("PARTITION BY RANGE (a)").is_err(), "RANGE needs definitions");
        assert!(parse_partition_clause("PARTITION BY LIST (a) (PARTITION p0 VALUES LESS THAN (3))").is_err());
        assert!(parse_partition_clause("PARTITION BY FOO (a)").is_err());
        let (t, p) = split_partition_clause("CREATE TABLE t (a INT COMMENT 'partition by x')");
        assert!(p.is_none());
        assert_eq!(t, "CREATE TABLE t (a INT COMMENT 'partition by x')");
    }

    #[test]
    fn parses_show() {
        assert_eq!(
            parse_show("SHOW TABLES FROM d LIKE 't%'").unwrap(),
            ShowStmt::Tables { full: false, db: Some("d".into()), filter: ShowFilter::Like("t%".into()) }
        );
        assert_eq!(
            parse_show("show full columns from d.t").unwrap(),
            ShowStmt::Columns { full: true, db: Some("d".into()), table: "t".into(), filter: ShowFilter::None }
        );
        assert_eq!(
            parse_show("SHOW INDEX FROM t FROM d").unwrap(),
            ShowStmt::Index { db: Some("d".into()), table: "t".into(), filter: ShowFilter::None }
        );
        assert_eq!(
            parse_show("SHOW CREATE DATABASE IF NOT EXISTS `x`").unwrap(),
            ShowStmt::CreateDatabase { db: "x".into(), if_not_exists: true }
        );
        assert!(matches!(
            parse_show("SHOW SESSION VARIABLES WHERE Variable_name = 'a'").unwrap(),
            ShowStmt::Variables { global: false, filter: ShowFilter::Where(_) }
        ));
        assert_eq!(parse_show("SHOW COUNT(*) WARNINGS").unwrap(), ShowStmt::Warnings { count_only: true, limit: None });
        assert_eq!(
            parse_show("SHOW CHARACTER SET LIKE 'utf8%'").unwrap(),
            ShowStmt::CharacterSet { filter: ShowFilter::Like("utf8%".into()) }
        );
        assert!(parse_show("SHOW BOGUS").is_err());
    }

    #[test]
    fn counts_placeholders() {
        assert_eq!(count_placeholders("select ? from t where a = ? and b = '?'").unwrap(), 2);
    }
}
