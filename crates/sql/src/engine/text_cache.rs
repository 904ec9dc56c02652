//! Parsed text INSERTs kept per session, keyed by their text with the
//! literal values of the VALUES rows taken out.
//!
//! Drivers that send statements as text (PyMySQL, mysql-connector without
//! server-side prepares, sysbench's oltp_insert) repeat the same INSERT
//! with other values. Parsing is most of such a statement's cost in the
//! SQL node (callgrind, bench/RESULTS.md 2026-11-28 16:52: a text INSERT
//! 126,636 instructions in sqld, mostly sqlparser's tokenizer and parser
//! and our pre-scans of the text). Here a cheap scan of the text finds the
//! VALUES rows' elements that are one plain literal (an unsigned number or
//! a single-quoted string without escapes), puts `?` in their place and
//! looks the result up; the statement then runs as a prepared one would,
//! with those literals as its parameters.
//!
//! Why that is the same statement: an element that is exactly one literal
//! is evaluated to that literal's value and nothing else (INSERT takes the
//! values, not their expressions' types: `dml::execute_insert`), and
//! `literal` below is the very function the expression compiler uses for
//! it. Parsing does not depend on the session (`parse_statement` sees only
//! the text) or on the catalog, so a kept parse is valid for as long as the
//! session lives. Everything else of the statement stays in the key as
//! written. A text the scan is not sure about (comments, which may carry
//! optimizer hints or version-conditional text; a `?` outside quotes; a
//! backslash anywhere, whose meaning in a string depends on sql_mode;
//! unbalanced quotes or parentheses) is not kept: it is parsed as before.

use crate::engine::expr::compile::literal;
use crate::engine::Parsed;
use norr_signals::Value;
use sqlparser::ast;
use sqlparser::ast::Statement;
use std::collections::HashMap;
use std::sync::Arc;

/// Texts longer than this are parsed every time: a bulk INSERT's shape is
/// rarely repeated, and its key would cost memory for nothing.
pub const MAX_TEXT_BYTES: usize = 8 * 1024;

/// Parses a session keeps (the oldest half is dropped when full).
pub const MAX_ENTRIES: usize = 64;

/// A text with its literals taken out.
#[derive(Debug, PartialEq)]
pub struct Normalized {
    /// The text with `?` for each literal taken out.
    pub key: String,
    /// The literals' values, in text order.
    pub params: Vec<Value>,
}

/// One session's kept parses.
#[derive(Debug, Default)]
pub struct TextCache {
    map: HashMap<String, (u64, Arc<Parsed>)>,
    /// Insertion counter: the age of an entry.
    clock: u64,
    hits: u64,
}

impl TextCache {
    pub fn get(&mut self, key: &str) -> Option<Arc<Parsed>> {
        let p = self.map.get(key).map(|(_, p)| p.clone());
        if p.is_some() {
            self.hits += 1;
        }
        p
    }

    /// Keep the parse of `key`, dropping the older half of the entries when
    /// the cache is full (a session that never repeats a shape cannot make
    /// it grow).
    pub fn put(&mut self, key: String, parsed: Arc<Parsed>) {
        debug_assert!(cacheable(&parsed), "only INSERT ... VALUES parses are kept");
        if self.map.len() >= MAX_ENTRIES {
            let mut ages: Vec<u64> = self.map.values().map(|(a, _)| *a).collect();
            ages.sort_unstable();
            let cut = ages[ages.len() / 2];
            self.map.retain(|_, (a, _)| *a >= cut);
        }
        self.clock += 1;
        self.map.insert(key, (self.clock, parsed));
        debug_assert!(self.map.len() <= MAX_ENTRIES);
    }

    /// Statements that ran from a kept parse.
    pub fn hits(&self) -> u64 {
        self.hits
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Whether a parse may be kept: an INSERT / REPLACE whose rows are a
/// VALUES list (the only shape `normalize` takes literals out of).
pub fn cacheable(p: &Parsed) -> bool {
    match p {
        Parsed::Sql(st) => match st.as_ref() {
            Statement::Insert(ins) => {
                ins.source.as_ref().is_some_and(|q| matches!(q.body.as_ref(), ast::SetExpr::Values(_)))
            }
            _ => false,
        },
        _ => false,
    }
}

fn starts_with_word(s: &str, w: &str) -> bool {
    s.len() >= w.len()
        && s.as_bytes()[..w.len()].eq_ignore_ascii_case(w.as_bytes())
        && s.as_bytes().get(w.len()).is_none_or(|b| !is_word_byte(*b))
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

/// The end (exclusive) of the quoted text starting at `i` (a quote byte),
/// or None if it does not end. Doubled quotes stay inside; backslashes are
/// refused by the caller beforehand.
fn quoted_end(b: &[u8], i: usize) -> Option<usize> {
    let q = b[i];
    let mut j = i + 1;
    while j < b.len() {
        if b[j] == q {
            if b.get(j + 1) == Some(&q) {
                j += 2;
                continue;
            }
            return Some(j + 1);
        }
        j += 1;
    }
    None
}

/// An element of a VALUES row that is one literal this cache takes out.
fn element_literal(e: &str) -> Option<Value> {
    let b = e.as_bytes();
    match b.first()? {
        b'0'..=b'9' => {
            // digits ['.' digits]: what sqlparser reads as one Number token.
            let int_end = b.iter().position(|c| !c.is_ascii_digit()).unwrap_or(b.len());
            let end = if b.get(int_end) == Some(&b'.') {
                let frac = &b[int_end + 1..];
                let n = frac.iter().position(|c| !c.is_ascii_digit()).unwrap_or(frac.len());
                if n == 0 {
                    return None;
                }
                int_end + 1 + n
            } else {
                int_end
            };
            if end != b.len() {
                return None;
            }
            literal(&ast::Value::Number(e.to_string(), false)).ok()
        }
        b'\'' => {
            // One string, nothing doubled inside: the text between the
            // quotes is its value.
            let inner = &e[1..];
            let close = inner.find('\'')?;
            if close + 1 != inner.len() {
                return None;
            }
            literal(&ast::Value::SingleQuotedString(inner[..close].to_string())).ok()
        }
        _ => None,
    }
}

/// The key and parameters of an INSERT / REPLACE ... VALUES text, or None
/// if this cache does not take it (see the module doc).
pub fn normalize(sql: &str) -> Option<Normalized> {
    let text = sql.trim();
    if text.len() > MAX_TEXT_BYTES || !(starts_with_word(text, "INSERT") || starts_with_word(text, "REPLACE")) {
        return None;
    }
    let b = text.as_bytes();
    if b.contains(&b'\\') {
        return None;
    }
    let mut key = String::with_capacity(text.len());
    let mut params = Vec::new();
    // Bytes up to `copied` are in `key`.
    let mut copied = 0;
    let mut i = 0;
    let mut depth = 0usize;
    // After the VALUES keyword, until a word ends the rows.
    let mut in_values = false;
    let mut values_done = false;
    // Start of the current element of a row (after '(' or ',').
    let mut elem_start: Option<usize> = None;
    while i < b.len() {
        let c = b[i];
        match c {
            b'\'' | b'"' | b'`' => {
                i = quoted_end(b, i)?;
                continue;
            }
            b'?' => return None,
            b'#' => return None,
            b'-' if b.get(i + 1) == Some(&b'-') => return None,
            b'/' if b.get(i + 1) == Some(&b'*') => return None,
            b';' => return None,
            b'(' => {
                depth += 1;
                if in_values && depth == 1 {
                    elem_start = Some(i + 1);
                }
            }
            b')' | b',' => {
                if in_values && depth == 1 {
                    let start = elem_start?;
                    let raw = &text[start..i];
                    let e = raw.trim();
                    if let Some(v) = element_literal(e) {
                        let lead = raw.len() - raw.trim_start().len();
                        key.push_str(&text[copied..start + lead]);
                        key.push('?');
                        copied = start + lead + e.len();
                        params.push(v);
                    }
                    elem_start = if c == b',' { Some(i + 1) } else { None };
                }
                if c == b')' {
                    depth = depth.checked_sub(1)?;
                }
            }
            _ if is_word_byte(c) && (i == 0 || !is_word_byte(b[i - 1])) => {
                let word_end = i + b[i..].iter().position(|x| !is_word_byte(*x)).unwrap_or(b.len() - i);
                let w = &text[i..word_end];
                if depth == 0 {
                    if !values_done
                        && !in_values
                        && (w.eq_ignore_ascii_case("VALUES") || w.eq_ignore_ascii_case("VALUE"))
                    {
                        in_values = true;
                    } else if in_values {
                        // A word after the rows (ON DUPLICATE KEY UPDATE,
                        // AS alias): the rest is kept as written.
                        in_values = false;
                        values_done = true;
                    }
                }
                i = word_end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    if depth != 0 || !(in_values || values_done) {
        return None;
    }
    key.push_str(&text[copied..]);
    debug_assert_eq!(key.matches('?').count(), params.len(), "one parameter per ?");
    Some(Normalized { key, params })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(sql: &str) -> Option<(String, Vec<Value>)> {
        normalize(sql).map(|n| (n.key, n.params))
    }

    #[test]
    fn whole_literal_elements_of_values_rows_become_parameters() {
        let (key, params) =
            n("INSERT INTO sbtest1 (id, k, c, pad) VALUES (0, 50123, '8-abc def', 'x y')").expect("taken");
        assert_eq!(key, "INSERT INTO sbtest1 (id, k, c, pad) VALUES (?, ?, ?, ?)");
        assert_eq!(params.len(), 4);
        assert_eq!(params[1], literal(&ast::Value::Number("50123".into(), false)).unwrap());
        assert_eq!(params[2], Value::Bytes(b"8-abc def".to_vec()));
        // Several rows, decimals, and elements that stay as written.
        let (key, params) =
            n("replace into t values ( 1.50 , NOW(), -3, 'a'), (2,DEFAULT,NULL, \"q\")").expect("taken");
        assert_eq!(key, "replace into t values ( ? , NOW(), -3, ?), (?,DEFAULT,NULL, \"q\")");
        assert_eq!(params.len(), 3);
        assert_eq!(params[0], literal(&ast::Value::Number("1.50".into(), false)).unwrap());
    }

    #[test]
    fn only_the_values_rows_are_touched() {
        let (key, params) =
            n("INSERT INTO t (a, b) VALUES (1, 'x') ON DUPLICATE KEY UPDATE b = 'y', a = 7").expect("taken");
        assert_eq!(key, "INSERT INTO t (a, b) VALUES (?, ?) ON DUPLICATE KEY UPDATE b = 'y', a = 7");
        assert_eq!(params.len(), 2);
        // Nested parentheses: a function's arguments are not elements.
        let (key, _) = n("INSERT INTO t VALUES (CONCAT('a', 1), 2)").expect("taken");
        assert_eq!(key, "INSERT INTO t VALUES (CONCAT('a', 1), ?)");
        // A column list's parentheses come before VALUES.
        let (key, _) = n("INSERT INTO `va(l)ues` (`1`) VALUES ('it''s', 3)").expect("taken");
        assert_eq!(key, "INSERT INTO `va(l)ues` (`1`) VALUES ('it''s', ?)");
    }

    #[test]
    fn texts_the_scan_is_not_sure_about_are_not_taken() {
        for sql in [
            "SELECT 1",
            "INSERT INTO t SELECT 1",
            "INSERT INTO t SET a = 1",
            "INSERT /*+ SET_VAR(x=1) */ INTO t VALUES (1)",
            "INSERT INTO t VALUES (1) -- c",
            "INSERT INTO t VALUES (1) # c",
            "INSERT INTO t VALUES ('a\\'b')",
            "INSERT INTO t VALUES (?)",
            "INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)",
            "INSERT INTO t VALUES ('open",
            "INSERT INTO t VALUES ((1)",
            "INSERT INTO t VALUES (1))",
            "INSERTX INTO t VALUES (1)",
        ] {
            assert_eq!(n(sql), None, "{sql}");
        }
        let long = format!("INSERT INTO t VALUES ('{}')", "x".repeat(MAX_TEXT_BYTES));
        assert_eq!(n(&long), None);
    }

    #[test]
    fn numbers_that_are_not_one_plain_token_stay_as_written() {
        let (key, params) = n("INSERT INTO t VALUES (1e5, 0x1F, 1., .5, 12abc, 'a' 'b', 7)").expect("taken");
        assert_eq!(key, "INSERT INTO t VALUES (1e5, 0x1F, 1., .5, 12abc, 'a' 'b', ?)");
        assert_eq!(params.len(), 1);
    }

    #[test]
    fn the_cache_stays_bounded() {
        let parsed = Arc::new(crate::engine::parse_statement("INSERT INTO t VALUES (?)").expect("parses"));
        assert!(cacheable(&parsed));
        let mut c = TextCache::default();
        for i in 0..(MAX_ENTRIES * 3) {
            c.put(format!("k{i}"), parsed.clone());
            assert!(c.len() <= MAX_ENTRIES);
        }
        // The newest entries survive.
        assert!(c.get(&format!("k{}", MAX_ENTRIES * 3 - 1)).is_some());
        assert!(c.get("k0").is_none());
        assert_eq!(c.hits(), 1);
        let select = crate::engine::parse_statement("SELECT 1").expect("parses");
        assert!(!cacheable(&select));
    }
}
