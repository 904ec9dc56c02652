//! JSON values: validation of written documents, MySQL's normalized text
//! form, path expressions, and the JSON_* functions.
//!
//! Storage: a JSON column is a native TEXT column (binary collation) holding
//! the document in MySQL's normalized text form, so what SELECT returns is
//! what MySQL 8.0 prints: `{"a": 1, "b": [1, 2]}` (", " and ": " separators),
//! object keys sorted by length and then bytewise (MySQL's binary JSON
//! order), duplicate keys resolved to the last value (8.0.3+). The SQL type
//! text `json` in `SqlColumnMeta::sql_type` marks the column; the text form is
//! the format, so nothing new is versioned. Parsing uses serde_json; the
//! output format is written here.

use crate::types::SqlError;
use serde_json::{Map, Number, Value as J};

/// Deepest nesting accepted (MySQL's limit: ER_JSON_DOCUMENT_TOO_DEEP).
pub const MAX_DEPTH: usize = 100;

/// Why a text is not JSON, in MySQL's (rapidjson's) words, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub message: &'static str,
    pub pos: usize,
}

/// Parse a JSON text.
pub fn parse(text: &[u8]) -> Result<J, ParseError> {
    if text.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(ParseError { message: "The document is empty.", pos: 0 });
    }
    let v: J = serde_json::from_slice(text).map_err(|e| {
        use serde_json::error::Category;
        let pos = byte_offset(text, e.line(), e.column());
        let s = e.to_string();
        let message = if s.starts_with("trailing characters") {
            "The document root must not be followed by other values."
        } else if s.starts_with("key must be a string") {
            "Missing a name for object member."
        } else if s.starts_with("expected `:`") {
            "Missing a colon after a name of object member."
        } else if s.starts_with("expected `,` or `}`") {
            "Missing a comma or '}' after an object member."
        } else if s.starts_with("expected `,` or `]`") {
            "Missing a comma or ']' after an array element."
        } else if s.starts_with("invalid escape") {
            "Invalid escape character in string."
        } else if s.starts_with("control character") {
            "Invalid encoding in string."
        } else if e.classify() == Category::Eof {
            if s.contains("string") {
                "Missing a closing quotation mark in string."
            } else {
                "Invalid value."
            }
        } else {
            "Invalid value."
        };
        ParseError { message, pos }
    })?;
    if depth(&v) > MAX_DEPTH {
        return Err(ParseError { message: "The JSON document exceeds the maximum depth.", pos: 0 });
    }
    Ok(v)
}

/// serde_json reports 1-based line and column: MySQL reports a byte offset.
fn byte_offset(text: &[u8], line: usize, column: usize) -> usize {
    let mut off = 0;
    for (i, l) in text.split(|b| *b == b'\n').enumerate() {
        if i + 1 == line {
            return (off + column.saturating_sub(1)).min(text.len());
        }
        off += l.len() + 1;
    }
    text.len()
}

fn depth(v: &J) -> usize {
    match v {
        J::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        J::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
        _ => 1,
    }
}

/// Object keys in MySQL's order: shorter first, then bytewise.
pub fn sorted_keys(m: &Map<String, J>) -> Vec<&String> {
    let mut k: Vec<&String> = m.keys().collect();
    k.sort_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.as_bytes().cmp(b.as_bytes())));
    k
}

/// MySQL's text form of a JSON value.
pub fn to_text(v: &J) -> String {
    let mut s = String::new();
    write(&mut s, v);
    s
}

fn write(out: &mut String, v: &J) {
    match v {
        J::Null => out.push_str("null"),
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Number(n) => out.push_str(&number_text(n)),
        J::String(s) => quote_into(out, s),
        J::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write(out, x);
            }
            out.push(']');
        }
        J::Object(m) => {
            out.push('{');
            for (i, k) in sorted_keys(m).into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                quote_into(out, k);
                out.push_str(": ");
                write(out, &m[k]);
            }
            out.push('}');
        }
    }
}

/// Integers as they are; doubles always with a fraction or exponent, as
/// MySQL prints them (`1.0`, `1.5`, `1e100`).
fn number_text(n: &Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    let f = n.as_f64().unwrap_or(0.0);
    let s = format!("{f:?}");
    // Rust prints 1e100 as "1e100" and 1.5e-7 as "1.5e-7", as MySQL does.
    s
}

/// A JSON string literal for `s`: `"` and `\` escaped, control characters
/// as \n, \t, ... or \u00XX; everything else as is (MySQL does not escape
/// non-ASCII or '/').
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    quote_into(&mut out, s);
    out
}

fn quote_into(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// JSON_TYPE's name of a value.
pub fn type_name(v: &J) -> &'static str {
    match v {
        J::Null => "NULL",
        J::Bool(_) => "BOOLEAN",
        J::Number(n) if n.is_i64() => "INTEGER",
        J::Number(n) if n.is_u64() => "UNSIGNED INTEGER",
        J::Number(_) => "DOUBLE",
        J::String(_) => "STRING",
        J::Array(_) => "ARRAY",
        J::Object(_) => "OBJECT",
    }
}

// ---------------------------------------------------------------- paths

/// One step of a path expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Leg {
    Key(String),
    /// `[n]`; `[last]` and `[last-n]` as offsets from the end.
    Index(usize),
    FromEnd(usize),
    AnyKey,
    AnyIndex,
    /// `**`: this value and every value below it.
    AnyDepth,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Path {
    pub legs: Vec<Leg>,
}

impl Path {
    pub fn has_wildcard(&self) -> bool {
        self.legs.iter().any(|l| matches!(l, Leg::AnyKey | Leg::AnyIndex | Leg::AnyDepth))
    }
}

/// ER_INVALID_JSON_PATH (3143).
pub fn bad_path(pos: usize) -> SqlError {
    SqlError::new(3143, "42000", format!("Invalid JSON path expression. The error is around character position {pos}."))
}

/// Parse a path expression (`$`, `.key`, `."quoted key"`, `.*`, `[n]`,
/// `[last]`, `[last-n]`, `[*]`, `**`).
pub fn parse_path(p: &str) -> Result<Path, SqlError> {
    let b = p.as_bytes();
    let mut i = 0;
    let skip_ws = |i: &mut usize| {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    skip_ws(&mut i);
    if b.get(i) != Some(&b'$') {
        return Err(bad_path(i + 1));
    }
    i += 1;
    let mut legs = Vec::new();
    loop {
        skip_ws(&mut i);
        if i >= b.len() {
            break;
        }
        match b[i] {
            b'.' => {
                i += 1;
                skip_ws(&mut i);
                match b.get(i) {
                    Some(b'*') => {
                        i += 1;
                        legs.push(Leg::AnyKey);
                    }
                    Some(b'"') => {
                        // A quoted key: JSON string syntax.
                        let start = i;
                        i += 1;
                        while i < b.len() && b[i] != b'"' {
                            if b[i] == b'\\' {
                                i += 1;
                            }
                            i += 1;
                        }
                        if i >= b.len() {
                            return Err(bad_path(i));
                        }
                        i += 1;
                        let key: String = serde_json::from_slice(&b[start..i]).map_err(|_| bad_path(i))?;
                        legs.push(Leg::Key(key));
                    }
                    _ => {
                        let start = i;
                        while i < b.len()
                            && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'$' || b[i] >= 0x80)
                        {
                            i += 1;
                        }
                        if i == start || b[start].is_ascii_digit() {
                            return Err(bad_path(i.max(1)));
                        }
                        legs.push(Leg::Key(p[start..i].to_string()));
                    }
                }
            }
            b'[' => {
                let close = p[i..].find(']').map(|o| i + o).ok_or_else(|| bad_path(b.len()))?;
                let inner = p[i + 1..close].trim();
                let leg = if inner == "*" {
                    Leg::AnyIndex
                } else if inner == "last" {
                    Leg::FromEnd(0)
                } else if let Some(n) = inner.strip_prefix("last").map(str::trim).and_then(|r| r.strip_prefix('-')) {
                    Leg::FromEnd(n.trim().parse().map_err(|_| bad_path(close))?)
                } else {
                    Leg::Index(inner.parse().map_err(|_| bad_path(close))?)
                };
                legs.push(leg);
                i = close + 1;
            }
            b'*' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                // `**` must be followed by another leg.
                skip_ws(&mut i);
                if i >= b.len() {
                    return Err(bad_path(i));
                }
                legs.push(Leg::AnyDepth);
            }
            _ => return Err(bad_path(i + 1)),
        }
    }
    Ok(Path { legs })
}

/// Every value the path selects, in document order.
pub fn select<'a>(v: &'a J, legs: &[Leg], out: &mut Vec<&'a J>) {
    let Some((leg, rest)) = legs.split_first() else {
        out.push(v);
        return;
    };
    match (leg, v) {
        (Leg::Key(k), J::Object(m)) => {
            if let Some(x) = m.get(k) {
                select(x, rest, out)
            }
        }
        (Leg::Index(n), J::Array(a)) => {
            if let Some(x) = a.get(*n) {
                select(x, rest, out)
            }
        }
        // A non-array is treated as a one-element array ([0] is itself).
        (Leg::Index(0) | Leg::FromEnd(0), x) if !x.is_array() => select(x, rest, out),
        (Leg::FromEnd(n), J::Array(a)) => {
            if let Some(x) = a.len().checked_sub(n + 1).and_then(|i| a.get(i)) {
                select(x, rest, out)
            }
        }
        (Leg::AnyKey, J::Object(m)) => {
            for k in sorted_keys(m) {
                select(&m[k], rest, out)
            }
        }
        (Leg::AnyIndex, J::Array(a)) => {
            for x in a {
                select(x, rest, out)
            }
        }
        (Leg::AnyDepth, x) => {
            select(x, rest, out);
            match x {
                J::Array(a) => a.iter().for_each(|c| select(c, legs, out)),
                J::Object(m) => sorted_keys(m).into_iter().for_each(|k| select(&m[k], legs, out)),
                _ => {}
            }
        }
        _ => {}
    }
}

/// The value at a wildcard-free path, for changing it.
fn lookup_mut<'a>(v: &'a mut J, legs: &[Leg]) -> Option<&'a mut J> {
    let Some((leg, rest)) = legs.split_first() else { return Some(v) };
    match (leg, v) {
        (Leg::Key(k), J::Object(m)) => lookup_mut(m.get_mut(k)?, rest),
        (Leg::Index(n), J::Array(a)) => lookup_mut(a.get_mut(*n)?, rest),
        (Leg::FromEnd(n), J::Array(a)) => {
            let i = a.len().checked_sub(n + 1)?;
            lookup_mut(a.get_mut(i)?, rest)
        }
        (Leg::Index(0) | Leg::FromEnd(0), x) if !x.is_array() => lookup_mut(x, rest),
        _ => None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Modify {
    Set,
    Insert,
    Replace,
}

/// JSON_SET / JSON_INSERT / JSON_REPLACE of one path. The path has no wildcard.
pub fn modify(doc: &mut J, path: &Path, val: J, how: Modify) -> Result<(), SqlError> {
    if path.has_wildcard() {
        return Err(SqlError::new(
            3149,
            "42000",
            "In this situation, path expressions may not contain the * and ** tokens.",
        ));
    }
    let Some((last, parent_legs)) = path.legs.split_last() else {
        // `$` itself: replaced by SET / REPLACE, kept by INSERT.
        if how != Modify::Insert {
            *doc = val;
        }
        return Ok(());
    };
    if let Some(existing) = lookup_mut(doc, &path.legs) {
        if how != Modify::Insert {
            *existing = val;
        }
        return Ok(());
    }
    if how == Modify::Replace {
        return Ok(());
    }
    let Some(parent) = lookup_mut(doc, parent_legs) else { return Ok(()) };
    match (last, parent) {
        (Leg::Key(k), J::Object(m)) => {
            m.insert(k.clone(), val);
        }
        // Past the end of an array: appended.
        (Leg::Index(_) | Leg::FromEnd(_), J::Array(a)) => a.push(val),
        // A non-array with an index past 0 is wrapped: [value, val].
        (Leg::Index(_) | Leg::FromEnd(_), p) => {
            let old = std::mem::take(p);
            *p = J::Array(vec![old, val]);
        }
        _ => {}
    }
    Ok(())
}

fn no_wildcards(path: &Path) -> Result<(), SqlError> {
    if path.has_wildcard() {
        return Err(SqlError::new(
            3149,
            "42000",
            "In this situation, path expressions may not contain the * and ** tokens.",
        ));
    }
    Ok(())
}

/// JSON_ARRAY_APPEND of one value: appended to the array at `path`; a
/// non-array there becomes an array of it and the value; a path that
/// selects nothing changes nothing.
pub fn array_append(doc: &mut J, path: &Path, val: J) -> Result<(), SqlError> {
    no_wildcards(path)?;
    match lookup_mut(doc, &path.legs) {
        Some(J::Array(a)) => a.push(val),
        Some(other) => {
            let old = std::mem::take(other);
            *other = J::Array(vec![old, val]);
        }
        None => {}
    }
    Ok(())
}

/// JSON_ARRAY_INSERT of one value: `path` must end in an array position
/// (3165); the value goes in before that element, or at the end of a
/// shorter array. A parent that is not an array changes nothing.
pub fn array_insert(doc: &mut J, path: &Path, val: J) -> Result<(), SqlError> {
    no_wildcards(path)?;
    let not_a_cell = || SqlError::new(3165, "42000", "A path expression is not a path to a cell in an array.");
    let Some((last, parent_legs)) = path.legs.split_last() else { return Err(not_a_cell()) };
    if !matches!(last, Leg::Index(_) | Leg::FromEnd(_)) {
        return Err(not_a_cell());
    }
    if let Some(J::Array(a)) = lookup_mut(doc, parent_legs) {
        let at = match last {
            Leg::Index(n) => (*n).min(a.len()),
            // `[last]` is the last element's place; `[last-n]` n before it.
            Leg::FromEnd(n) => a.len().saturating_sub(n + 1),
            _ => a.len(),
        };
        a.insert(at, val);
    }
    Ok(())
}

/// JSON_SEARCH: the paths of the string scalars `hit` accepts, in document
/// order, inside the values `within` selects (the whole document when
/// empty); only the first with `all` false. A value two paths select is
/// reported once.
pub fn search(doc: &J, within: &[Path], all: bool, hit: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut legs = Vec::new();
    let roots: Vec<Path> = if within.is_empty() { vec![Path { legs: Vec::new() }] } else { within.to_vec() };
    search_in(doc, &mut legs, &roots, all, hit, &mut out);
    out
}

fn search_in(
    v: &J,
    at: &mut Vec<Leg>,
    roots: &[Path],
    all: bool,
    hit: &dyn Fn(&str) -> bool,
    out: &mut Vec<String>,
) -> bool {
    if !all && !out.is_empty() {
        return true;
    }
    match v {
        J::String(s) if roots.iter().any(|r| covers(&r.legs, at)) && hit(s) => out.push(path_text(at)),
        J::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                at.push(Leg::Index(i));
                let done = search_in(x, at, roots, all, hit, out);
                at.pop();
                if done {
                    return true;
                }
            }
        }
        J::Object(m) => {
            for k in sorted_keys(m) {
                at.push(Leg::Key(k.clone()));
                let done = search_in(&m[k], at, roots, all, hit, out);
                at.pop();
                if done {
                    return true;
                }
            }
        }
        _ => {}
    }
    !all && !out.is_empty()
}

/// Whether the path `pattern` selects the concrete location `at` or a
/// value containing it.
fn covers(pattern: &[Leg], at: &[Leg]) -> bool {
    let Some((p, rest)) = pattern.split_first() else { return true };
    match p {
        Leg::AnyDepth => (0..=at.len()).any(|skip| covers(rest, &at[skip..])),
        _ => {
            let Some((a, at_rest)) = at.split_first() else { return false };
            let same = match (p, a) {
                (Leg::Key(k), Leg::Key(x)) => k == x,
                (Leg::Index(n), Leg::Index(x)) => n == x,
                (Leg::AnyKey, Leg::Key(_)) | (Leg::AnyIndex, Leg::Index(_)) => true,
                _ => false,
            };
            same && covers(rest, at_rest)
        }
    }
}

/// A concrete path as MySQL prints it: `$[0].key."other key"`.
fn path_text(legs: &[Leg]) -> String {
    let mut s = String::from("$");
    for l in legs {
        match l {
            Leg::Index(i) => s.push_str(&format!("[{i}]")),
            Leg::Key(k) => {
                s.push('.');
                let plain = k.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$')
                    && k.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '$');
                if plain {
                    s.push_str(k);
                } else {
                    s.push_str(&quote(k));
                }
            }
            _ => {}
        }
    }
    s
}

/// JSON_REMOVE of one path.
pub fn remove(doc: &mut J, path: &Path) -> Result<(), SqlError> {
    if path.has_wildcard() {
        return Err(SqlError::new(
            3149,
            "42000",
            "In this situation, path expressions may not contain the * and ** tokens.",
        ));
    }
    let Some((last, parent_legs)) = path.legs.split_last() else {
        return Err(SqlError::new(3153, "42000", "The path expression '$' is not allowed in this context."));
    };
    match (last, lookup_mut(doc, parent_legs)) {
        (Leg::Key(k), Some(J::Object(m))) => {
            m.remove(k);
        }
        (Leg::Index(n), Some(J::Array(a))) if *n < a.len() => {
            a.remove(*n);
        }
        (Leg::FromEnd(n), Some(J::Array(a))) => {
            if let Some(i) = a.len().checked_sub(n + 1) {
                a.remove(i);
            }
        }
        _ => {}
    }
    Ok(())
}

/// JSON_CONTAINS(target, candidate): MySQL's containment rules.
pub fn contains(target: &J, cand: &J) -> bool {
    match (target, cand) {
        (J::Object(t), J::Object(c)) => c.iter().all(|(k, cv)| t.get(k).is_some_and(|tv| contains(tv, cv))),
        (J::Array(t), J::Array(c)) => c.iter().all(|cv| t.iter().any(|tv| contains(tv, cv))),
        (J::Array(t), c) => t.iter().any(|tv| contains(tv, c)),
        (t, c) => scalar_eq(t, c),
    }
}

fn scalar_eq(a: &J, b: &J) -> bool {
    match (a, b) {
        (J::Number(x), J::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(p), Some(q)) => p == q,
            _ => x.as_f64() == y.as_f64(),
        },
        _ => a == b,
    }
}

/// Whether two JSON values are equal as MySQL compares them (numbers by
/// value, objects whatever their key order, arrays element by element).
pub fn equal(a: &J, b: &J) -> bool {
    match (a, b) {
        (J::Array(x), J::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| equal(p, q)),
        (J::Object(x), J::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| equal(v, w)))
        }
        _ => scalar_eq(a, b),
    }
}

/// JSON_OVERLAPS: two arrays share an element, two objects a key with equal
/// values; an array and a non-array overlap when the array holds that value;
/// otherwise the two must be equal.
pub fn overlaps(a: &J, b: &J) -> bool {
    match (a, b) {
        (J::Array(x), J::Array(y)) => x.iter().any(|p| y.iter().any(|q| equal(p, q))),
        (J::Object(x), J::Object(y)) => x.iter().any(|(k, v)| y.get(k).is_some_and(|w| equal(v, w))),
        (J::Array(x), other) | (other, J::Array(x)) => x.iter().any(|p| equal(p, other)),
        _ => equal(a, b),
    }
}

/// JSON_PRETTY's text: one member or element per line, indented by two
/// spaces per level; an empty array or object stays `[]` / `{}`.
pub fn pretty(v: &J) -> String {
    fn go(out: &mut String, v: &J, depth: usize) {
        let pad = |out: &mut String, d: usize| out.extend(std::iter::repeat_n("  ", d));
        match v {
            J::Array(a) if !a.is_empty() => {
                out.push_str("[\n");
                for (i, x) in a.iter().enumerate() {
                    pad(out, depth + 1);
                    go(out, x, depth + 1);
                    out.push_str(if i + 1 < a.len() { ",\n" } else { "\n" });
                }
                pad(out, depth);
                out.push(']');
            }
            J::Object(m) if !m.is_empty() => {
                out.push_str("{\n");
                let keys = sorted_keys(m);
                for (i, k) in keys.iter().enumerate() {
                    pad(out, depth + 1);
                    quote_into(out, k);
                    out.push_str(": ");
                    go(out, &m[*k], depth + 1);
                    out.push_str(if i + 1 < keys.len() { ",\n" } else { "\n" });
                }
                pad(out, depth);
                out.push('}');
            }
            other => write(out, other),
        }
    }
    let mut s = String::new();
    go(&mut s, v, 0);
    s
}

/// JSON_LENGTH: members of an object, elements of an array, 1 for a scalar.
pub fn length(v: &J) -> usize {
    match v {
        J::Array(a) => a.len(),
        J::Object(m) => m.len(),
        _ => 1,
    }
}

/// JSON_UNQUOTE of a text: a JSON string literal loses its quotes and
/// escapes; anything else is returned as is.
pub fn unquote(s: &[u8]) -> Result<Vec<u8>, SqlError> {
    if s.len() >= 2 && s[0] == b'"' && s[s.len() - 1] == b'"' {
        return match serde_json::from_slice::<String>(s) {
            Ok(t) => Ok(t.into_bytes()),
            Err(_) => Err(SqlError::new(
                3141,
                "22032",
                "Invalid JSON text in argument 1 to function json_unquote: \"Missing a closing quotation mark in string.\" at position 1.",
            )),
        };
    }
    Ok(s.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(s: &str) -> String {
        to_text(&parse(s.as_bytes()).unwrap())
    }

    #[test]
    fn normalized_text_is_mysqls() {
        assert_eq!(norm(r#"{"b":[1,2],"a":1}"#), r#"{"a": 1, "b": [1, 2]}"#);
        assert_eq!(norm(r#"{"bb":1,"a":2,"c":3}"#), r#"{"a": 2, "c": 3, "bb": 1}"#);
        assert_eq!(norm(r#"{"a":1,"a":2}"#), r#"{"a": 2}"#);
        assert_eq!(
            norm(r#" [1.0, 1.5, -2, true, null, "x\"y\u0001"] "#),
            r#"[1.0, 1.5, -2, true, null, "x\"y\u0001"]"#
        );
        assert_eq!(norm("\"é/\""), "\"é/\"");
        assert_eq!(norm("1e100"), "1e100");
    }

    #[test]
    fn parse_errors_have_mysql_messages() {
        assert_eq!(parse(b"").unwrap_err().message, "The document is empty.");
        assert_eq!(parse(b"{\"a\" 1}").unwrap_err().message, "Missing a colon after a name of object member.");
        assert_eq!(parse(b"[1] x").unwrap_err().message, "The document root must not be followed by other values.");
        assert_eq!(parse(b"abc").unwrap_err(), ParseError { message: "Invalid value.", pos: 0 });
        let deep = "[".repeat(101) + &"]".repeat(101);
        assert!(parse(deep.as_bytes()).is_err());
    }

    #[test]
    fn paths_select() {
        let d = parse(br#"{"a": {"b": [10, 20, {"c": 30}]}, "x y": 1}"#).unwrap();
        let get = |p: &str| {
            let mut out = Vec::new();
            select(&d, &parse_path(p).unwrap().legs, &mut out);
            out.into_iter().map(to_text).collect::<Vec<_>>().join("|")
        };
        assert_eq!(get("$.a.b[1]"), "20");
        assert_eq!(get("$.a.b[last]"), r#"{"c": 30}"#);
        assert_eq!(get("$.\"x y\""), "1");
        assert_eq!(get("$.a.b[*]"), r#"10|20|{"c": 30}"#);
        assert_eq!(get("$**.c"), "30");
        // Keys in MySQL's order: "a" (shorter) before "x y".
        assert_eq!(get("$.*"), r#"{"b": [10, 20, {"c": 30}]}|1"#);
        assert_eq!(get("$.nope"), "");
        for bad in ["a", "$.", "$[x]", "$**", "$.1a"] {
            assert_eq!(parse_path(bad).unwrap_err().code, 3143, "{bad}");
        }
    }

    #[test]
    fn modify_and_remove() {
        let mut d = parse(br#"{"a": 1, "b": [1]}"#).unwrap();
        modify(&mut d, &parse_path("$.a").unwrap(), J::from(2), Modify::Insert).unwrap();
        modify(&mut d, &parse_path("$.c").unwrap(), J::from(3), Modify::Insert).unwrap();
        modify(&mut d, &parse_path("$.b[5]").unwrap(), J::from(9), Modify::Set).unwrap();
        modify(&mut d, &parse_path("$.z").unwrap(), J::from(9), Modify::Replace).unwrap();
        assert_eq!(to_text(&d), r#"{"a": 1, "b": [1, 9], "c": 3}"#);
        remove(&mut d, &parse_path("$.b[0]").unwrap()).unwrap();
        assert_eq!(to_text(&d), r#"{"a": 1, "b": [9], "c": 3}"#);
        assert_eq!(remove(&mut d, &parse_path("$").unwrap()).unwrap_err().code, 3153);
    }

    #[test]
    fn containment() {
        let t = parse(br#"{"a": 1, "b": [1, 2, {"c": 3}]}"#).unwrap();
        assert!(contains(&t, &parse(br#"{"b": [2]}"#).unwrap()));
        // A non-array candidate is contained in an array holding it.
        assert!(contains(&t, &parse(br#"{"b": {"c": 3}}"#).unwrap()));
        assert!(contains(&t, &parse(br#"{"a": 1.0}"#).unwrap()));
        assert!(!contains(&t, &parse(br#"{"a": 2}"#).unwrap()));
    }
}
