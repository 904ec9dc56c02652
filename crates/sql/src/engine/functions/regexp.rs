//! REGEXP / RLIKE and REGEXP_LIKE, REGEXP_INSTR, REGEXP_SUBSTR and
//! REGEXP_REPLACE with all their optional arguments, as MySQL 8.0 has them
//! (its manual's "Regular Expressions" section).
//!
//! The compiler (`expr::compile::regexp_args`) hands every call over in one
//! layout, the optional arguments filled with their defaults, so that a NULL
//! the user wrote is told from one left out (a NULL argument makes the
//! result NULL):
//!
//! ```text
//! REGEXP_LIKE    subject, pattern,              match_type, collation
//! REGEXP_INSTR   subject, pattern, pos, occ, return_option, match_type, collation
//! REGEXP_SUBSTR  subject, pattern, pos, occ,    match_type, collation
//! REGEXP_REPLACE subject, pattern, repl, pos, occ, match_type, collation
//! ```
//!
//! `collation` is "c" when a binary string takes part (case-sensitive) and
//! "i" otherwise; a `c` or `i` in match_type wins over it, the last one
//! written counting. Positions count characters from 1.
//!
//! MySQL matches with ICU; this engine's regex crate differs where ICU has
//! features the crate lacks (back-references, look-around: 3690), and `u`
//! (Unix line endings only) is what the crate always does.

use super::{s_val, text, Func};
use crate::engine::expr::value::{to_i64, Coll};
use crate::engine::expr::{EvalCtx, SqlType, TClass};
use crate::types::SqlError;
use norr_signals::Value;
use std::cell::RefCell;
use std::collections::HashMap;

/// Compiled patterns, per thread: a prepared statement re-runs the same few.
const CACHE_MAX: usize = 64;
/// Bound on a compiled pattern's size, so hostile patterns get an error, not memory.
const SIZE_LIMIT: usize = 1 << 20;

/// The match type's flags (bits of the cache key).
const CI: u8 = 1;
const MULTI_LINE: u8 = 2;
const DOT_NL: u8 = 4;

thread_local! {
    static CACHE: RefCell<HashMap<(String, u8), regex::Regex>> = RefCell::new(HashMap::new());
}

fn name_of(f: Func) -> &'static str {
    match f {
        Func::RegexpInstr => "regexp_instr",
        Func::RegexpSubstr => "regexp_substr",
        Func::RegexpReplace => "regexp_replace",
        _ => "regexp_like",
    }
}

/// 3995 ER_CHARACTER_SET_MISMATCH: a binary string matched against a
/// character string, or the other way round (MySQL 8.0.22 and later refuse
/// the mix rather than guess whether bytes or characters are meant). The
/// check is on the arguments' types, as MySQL's, so it fails whatever the
/// rows; only a character string (not a number or a date) counts as the
/// other side.
pub(crate) fn check_charsets(f: Func, subject: &SqlType, pattern: &SqlType) -> Result<(), SqlError> {
    let other = match (subject.class, pattern.class) {
        (TClass::Bin, TClass::Str) => pattern,
        (TClass::Str, TClass::Bin) => subject,
        _ => return Ok(()),
    };
    let collation = match other.coll {
        Coll::Bin => "utf8mb4_bin",
        Coll::Ci => "utf8mb4_0900_ai_ci",
    };
    Err(SqlError::new(
        3995,
        "HY000",
        format!("Character set 'binary' cannot be used in conjunction with '{collation}' in call to {}.", name_of(f)),
    ))
}

/// 1210 ER_WRONG_ARGUMENTS (a bad match type or return option).
fn wrong_arguments(f: Func) -> SqlError {
    SqlError::new(1210, "HY000", format!("Incorrect arguments to {}", name_of(f)))
}

/// 3686 ER_REGEXP_INDEX_OUTOFBOUNDS_ERROR: a position past the subject, or
/// a `$n` past the pattern's last group.
fn out_of_bounds() -> SqlError {
    SqlError::new(3686, "HY000", "Index out of bounds in regular expression search.")
}

/// The flags of `match_type` over the collation's default ("c" or "i").
fn flags(f: Func, match_type: &str, collation: &str) -> Result<u8, SqlError> {
    let mut fl = if collation == "c" { 0 } else { CI };
    for c in match_type.chars() {
        match c {
            'c' => fl &= !CI,
            'i' => fl |= CI,
            'm' => fl |= MULTI_LINE,
            'n' => fl |= DOT_NL,
            'u' => {}
            _ => return Err(wrong_arguments(f)),
        }
    }
    Ok(fl)
}

fn compiled(pattern: &str, fl: u8) -> Result<regex::Regex, SqlError> {
    // ICU refuses an empty pattern (MySQL: 3685).
    if pattern.is_empty() {
        return Err(illegal_argument());
    }
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if let Some(r) = c.get(&(pattern.to_string(), fl)) {
            return Ok(r.clone());
        }
        let r = regex::RegexBuilder::new(pattern)
            .case_insensitive(fl & CI != 0)
            .multi_line(fl & MULTI_LINE != 0)
            .dot_matches_new_line(fl & DOT_NL != 0)
            .size_limit(SIZE_LIMIT)
            .build()
            .map_err(|e| pattern_error(pattern, &e))?;
        if c.len() >= CACHE_MAX {
            c.clear();
        }
        c.insert((pattern.to_string(), fl), r.clone());
        Ok(r)
    })
}

fn illegal_argument() -> SqlError {
    SqlError::new(3685, "HY000", "Illegal argument to a regular expression.")
}

/// MySQL's error for a pattern that does not compile, by what is wrong with
/// it (the regex crate names the fault in its message).
fn pattern_error(pattern: &str, e: &regex::Error) -> SqlError {
    let msg = match e {
        regex::Error::CompiledTooBig(_) => {
            return SqlError::new(3700, "HY000", "Pattern exceeds limits on size or complexity.");
        }
        other => other.to_string(),
    };
    let has = |s: &str| msg.contains(s);
    if has("unclosed group") || has("unopened group") {
        SqlError::new(3691, "HY000", "Mismatched parenthesis in regular expression.")
    } else if has("unclosed character class") {
        SqlError::new(3696, "HY000", "The regular expression contains an unclosed bracket expression.")
    } else if has("repetition operator missing expression") {
        SqlError::new(
            3688,
            "HY000",
            format!("Syntax error in regular expression on line 1, character {}.", dangling_quantifier(pattern)),
        )
    } else if has("invalid repetition count range") {
        SqlError::new(3693, "HY000", "The maximum is less than the minumum in a {min,max} interval.")
    } else if has("counted repetition") || has("decimal literal") {
        SqlError::new(3692, "HY000", "Incorrect description of a {min,max} interval.")
    } else if has("invalid character class range") {
        SqlError::new(3697, "HY000", "The regular expression contains an [x-y] character range where x comes after y.")
    } else if has("backreferences are not supported") || has("look-around") {
        SqlError::new(
            3690,
            "HY000",
            "The regular expression contains a feature that is not implemented in this library.",
        )
    } else if has("escape") {
        SqlError::new(3689, "HY000", "Unrecognized escape sequence in regular expression.")
    } else {
        illegal_argument()
    }
}

/// The 1-based character of the first quantifier with nothing to repeat.
fn dangling_quantifier(pattern: &str) -> usize {
    let mut prev: Option<char> = None;
    for (i, c) in pattern.chars().enumerate() {
        if matches!(c, '*' | '+' | '?') && matches!(prev, None | Some('(' | '|')) {
            return i + 1;
        }
        prev = Some(c);
    }
    1
}

/// The byte offset of character `pos` (1-based): 1583 below 1 (as MySQL
/// 8.0 checks it), 3686 past the subject's last character (1 is allowed in
/// an empty subject).
fn start_of(f: Func, subject: &str, pos: i64) -> Result<usize, SqlError> {
    if pos < 1 {
        return Err(SqlError::new(
            1583,
            "42000",
            format!("Incorrect parameters in the call to native function '{}'", name_of(f)),
        ));
    }
    if subject.is_empty() && pos == 1 {
        return Ok(0);
    }
    let skip = usize::try_from(pos - 1).map_err(|_| out_of_bounds())?;
    subject.char_indices().nth(skip).map(|(i, _)| i).ok_or_else(out_of_bounds)
}

/// The matches of `re` in `hay` from byte `start`, in order; an empty match
/// moves the search on one character (no endless loop on `x*`).
fn matches_from<'h>(re: &regex::Regex, hay: &'h str, start: usize) -> impl Iterator<Item = regex::Captures<'h>> + 'h {
    let re = re.clone();
    let mut at = Some(start);
    std::iter::from_fn(move || {
        let from = at?;
        let caps = re.captures_at(hay, from)?;
        let m = caps.get(0)?;
        at = if m.end() > m.start() {
            Some(m.end())
        } else {
            hay[m.end()..].chars().next().map(|c| m.end() + c.len_utf8())
        };
        Some(caps)
    })
}

/// The `occurrence`-th match from `start` (an occurrence below 1 is 1).
fn nth<'h>(re: &regex::Regex, hay: &'h str, start: usize, occurrence: i64) -> Option<regex::Captures<'h>> {
    let skip = usize::try_from(occurrence.max(1) - 1).unwrap_or(usize::MAX);
    matches_from(re, hay, start).nth(skip)
}

/// One piece of REGEXP_REPLACE's replacement, read as ICU reads it.
enum Piece {
    Text(String),
    Group(usize),
    Named(String),
}

/// ICU's replacement text: `$n` is group n (its first digit always, more
/// digits while the number stays within the pattern's groups), `${name}` a
/// named group of the pattern, `\x` the character x; any other `$` is 3887.
fn replacement(with: &str, re: &regex::Regex) -> Result<Vec<Piece>, SqlError> {
    let groups = re.captures_len();
    let bad_name = || SqlError::new(3887, "HY000", "A capture group has an invalid name.");
    let mut out = Vec::new();
    let mut lit = String::new();
    let mut it = with.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '\\' => {
                if let Some(n) = it.next() {
                    lit.push(n);
                }
            }
            '$' => {
                if !lit.is_empty() {
                    out.push(Piece::Text(std::mem::take(&mut lit)));
                }
                match it.peek().copied() {
                    Some(d) if d.is_ascii_digit() => {
                        it.next();
                        let mut n = d as usize - '0' as usize;
                        while let Some(d) = it.peek().and_then(|d| d.to_digit(10)) {
                            let more = n.saturating_mul(10).saturating_add(d as usize);
                            if more >= groups {
                                break;
                            }
                            n = more;
                            it.next();
                        }
                        out.push(Piece::Group(n));
                    }
                    Some('{') => {
                        it.next();
                        let mut name = String::new();
                        loop {
                            match it.next() {
                                Some('}') if !name.is_empty() => break,
                                Some(ch) if ch.is_alphanumeric() => name.push(ch),
                                _ => return Err(bad_name()),
                            }
                        }
                        if !re.capture_names().any(|n| n == Some(name.as_str())) {
                            return Err(bad_name());
                        }
                        out.push(Piece::Named(name));
                    }
                    _ => return Err(bad_name()),
                }
            }
            c => lit.push(c),
        }
    }
    if !lit.is_empty() {
        out.push(Piece::Text(lit));
    }
    Ok(out)
}

/// Append one match's replacement (3686 for a group past the last; a group
/// that took no part is empty).
fn expand(pieces: &[Piece], caps: &regex::Captures<'_>, out: &mut String) -> Result<(), SqlError> {
    for p in pieces {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Group(n) => {
                if *n >= caps.len() {
                    return Err(out_of_bounds());
                }
                out.push_str(caps.get(*n).map_or("", |m| m.as_str()));
            }
            Piece::Named(name) => out.push_str(caps.name(name).map_or("", |m| m.as_str())),
        }
    }
    Ok(())
}

fn int_arg(v: &Value, ctx: &mut EvalCtx) -> i64 {
    to_i64(v, &mut ctx.warnings).unwrap_or(0)
}

/// Evaluate one of the four functions on the compiler's layout (module doc).
pub(super) fn call(f: Func, args: &[Value], ctx: &mut EvalCtx) -> Result<Value, SqlError> {
    let want = match f {
        Func::RegexpLike => 4,
        Func::RegexpSubstr => 6,
        _ => 7,
    };
    if args.len() != want {
        return Err(SqlError::internal(format!("{} with {} arguments", name_of(f), args.len())));
    }
    let subject = text(&args[0]).unwrap_or_default();
    let pattern = text(&args[1]).unwrap_or_default();
    let fl = flags(f, &text(&args[want - 2]).unwrap_or_default(), &text(&args[want - 1]).unwrap_or_default())?;
    let re = compiled(&pattern, fl)?;
    Ok(match f {
        Func::RegexpLike => Value::Int(re.is_match(&subject) as i64),
        Func::RegexpInstr => {
            let ret = int_arg(&args[4], ctx);
            if !matches!(ret, 0 | 1) {
                return Err(wrong_arguments(f));
            }
            let start = start_of(f, &subject, int_arg(&args[2], ctx))?;
            match nth(&re, &subject, start, int_arg(&args[3], ctx)).and_then(|c| c.get(0)) {
                Some(m) => {
                    let at = if ret == 1 { m.end() } else { m.start() };
                    Value::Int(subject[..at].chars().count() as i64 + 1)
                }
                None => Value::Int(0),
            }
        }
        Func::RegexpSubstr => {
            let start = start_of(f, &subject, int_arg(&args[2], ctx))?;
            match nth(&re, &subject, start, int_arg(&args[3], ctx)).and_then(|c| c.get(0)) {
                Some(m) => s_val(m.as_str().to_string()),
                None => Value::Null,
            }
        }
        Func::RegexpReplace => {
            let with = text(&args[2]).unwrap_or_default();
            let start = start_of(f, &subject, int_arg(&args[3], ctx))?;
            // Occurrence 0 (the default) replaces every match.
            let occurrence = int_arg(&args[4], ctx);
            let pieces = replacement(&with, &re)?;
            // The result's size from the matches, before building it (a
            // group in the replacement is at most the whole subject).
            let hits = if occurrence > 0 { 1 } else { matches_from(&re, &subject, start).count() as u128 };
            let groups = pieces.iter().filter(|p| !matches!(p, Piece::Text(_))).count() as u128;
            let each = with.len() as u128 + groups * subject.len() as u128;
            if super::over_packet(ctx, "regexp_replace", subject.len() as u128 + hits * each) {
                return Ok(Value::Null);
            }
            let mut out = String::with_capacity(subject.len());
            out.push_str(&subject[..start]);
            let mut at = start;
            let chosen: Box<dyn Iterator<Item = regex::Captures<'_>> + '_> = if occurrence > 0 {
                Box::new(nth(&re, &subject, start, occurrence).into_iter())
            } else {
                Box::new(matches_from(&re, &subject, start))
            };
            for caps in chosen {
                let Some(m) = caps.get(0) else { continue };
                out.push_str(&subject[at..m.start()]);
                expand(&pieces, &caps, &mut out)?;
                at = m.end();
            }
            out.push_str(&subject[at..]);
            s_val(out)
        }
        _ => return Err(SqlError::internal(format!("{f:?} is not a regular expression function"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> EvalCtx<'static> {
        EvalCtx::new(&[])
    }

    fn s(v: &str) -> Value {
        Value::str(v)
    }

    fn i(v: i64) -> Value {
        Value::Int(v)
    }

    fn instr(subject: &str, pat: &str, pos: i64, occ: i64, ret: i64, mt: &str) -> Result<Value, SqlError> {
        call(Func::RegexpInstr, &[s(subject), s(pat), i(pos), i(occ), i(ret), s(mt), s("i")], &mut ctx())
    }

    fn replace(subject: &str, pat: &str, with: &str, pos: i64, occ: i64) -> Result<Value, SqlError> {
        call(Func::RegexpReplace, &[s(subject), s(pat), s(with), i(pos), i(occ), s(""), s("i")], &mut ctx())
    }

    fn code<T: std::fmt::Debug>(r: Result<T, SqlError>) -> u16 {
        r.expect_err("an error").code
    }

    #[test]
    fn instr_position_occurrence_and_return_option() {
        assert_eq!(instr("abcabcabc", "a+", 1, 2, 0, "").unwrap(), i(4));
        assert_eq!(instr("abcabcabc", "a+", 1, 4, 0, "").unwrap(), i(0));
        assert_eq!(instr("abcabcabc", "a+", 4, 2, 0, "").unwrap(), i(7));
        assert_eq!(instr("aaabcabcabc", "a+", 1, 1, 1, "").unwrap(), i(4));
        // Characters, not bytes.
        assert_eq!(instr("ééxé", "x", 1, 1, 0, "").unwrap(), i(3));
        assert_eq!(code(instr("a", "a+", 3, 1, 0, "")), 3686);
        assert_eq!(code(instr("a", "a+", 0, 1, 0, "")), 1583);
        assert_eq!(code(instr("a", "a+", 1, 1, 2, "")), 1210);
        assert_eq!(code(instr("a", "a+", 1, 1, 0, "x")), 1210);
        assert_eq!(instr("", "a", 1, 1, 0, "").unwrap(), i(0));
    }

    #[test]
    fn match_type_letters() {
        assert_eq!(instr("aaabc", "A+", 1, 1, 1, "c").unwrap(), i(0));
        assert_eq!(instr("aaabc", "A+", 1, 1, 1, "ci").unwrap(), i(4));
        assert_eq!(instr("aaabc", "A+", 1, 1, 1, "cic").unwrap(), i(0));
        assert_eq!(instr("a\nb", "^b$", 1, 1, 0, "").unwrap(), i(0));
        assert_eq!(instr("a\nb", "^b$", 1, 1, 0, "m").unwrap(), i(3));
        assert_eq!(instr("a\nb", "a.b", 1, 1, 0, "").unwrap(), i(0));
        assert_eq!(instr("a\nb", "a.b", 1, 1, 0, "n").unwrap(), i(1));
        assert_eq!(instr("a\nb", "a.b", 1, 1, 0, "nu").unwrap(), i(1));
    }

    #[test]
    fn replace_position_occurrence_and_groups() {
        assert_eq!(replace("aaabbccbbddaa", "b+", "X", 1, 2).unwrap(), s("aaabbccXddaa"));
        assert_eq!(replace("aaabbccbbddaa", "(b+)", "<$1>", 1, 0).unwrap(), s("aaa<bb>cc<bb>ddaa"));
        assert_eq!(replace("abcbdb", "b", "X", 3, 0).unwrap(), s("abcXdX"));
        assert_eq!(replace("aaab", "b", "x", 1, 2).unwrap(), s("aaab"));
        assert_eq!(replace("abc123", "([a-z]+)([0-9]+)", "$2-$1", 1, 0).unwrap(), s("123-abc"));
        // `$10` with two groups is group 1, then '0'.
        assert_eq!(replace("abc123", "([a-z]+)([0-9]+)", "$10", 1, 0).unwrap(), s("abc0"));
        assert_eq!(replace("a$b", "\\$", "\\$\\\\", 1, 0).unwrap(), s("a$\\b"));
        assert_eq!(code(replace("abc123", "([a-z]+)([0-9]+)", "$3", 1, 0)), 3686);
        assert_eq!(code(replace("abc", "b", "$x", 1, 0)), 3887);
        assert_eq!(code(replace("a", "a+", "b", 3, 0)), 3686);
        // An empty match moves on one character.
        assert_eq!(replace("abc", "x*", "-", 1, 0).unwrap(), s("-a-b-c-"));
    }

    #[test]
    fn pattern_errors_have_mysql_codes() {
        assert_eq!(code(instr("a", "", 1, 1, 0, "")), 3685);
        assert_eq!(code(instr("a", "(", 1, 1, 0, "")), 3691);
        assert_eq!(code(instr("a", "[a", 1, 1, 0, "")), 3696);
        assert_eq!(code(instr("a", "+", 1, 1, 0, "")), 3688);
        assert_eq!(code(instr("a", "a{2,1}", 1, 1, 0, "")), 3693);
    }
}
