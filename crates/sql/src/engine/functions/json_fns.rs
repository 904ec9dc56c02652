//! The JSON_* functions (and `->`, `->>`) over `engine::json`.
//!
//! Arguments arrive as SQL values. A document argument is parsed as JSON
//! text. A value argument (JSON_OBJECT, JSON_ARRAY, JSON_SET, ...) becomes
//! a JSON scalar (strings become JSON strings) unless it is itself of JSON
//! type (a JSON column or another JSON function): the compiler passes a bit
//! mask of those as the last argument, as MySQL decides this by the static
//! type of the argument too.

use super::Func;
use crate::engine::catalog::value_text;
use crate::engine::json::{self, Modify, Path};
use crate::types::SqlError;
use norr_signals::Value;
use serde_json::Value as J;

/// SQL name of a JSON function, for error messages.
fn name(f: Func) -> &'static str {
    match f {
        Func::JsonExtract => "json_extract",
        Func::JsonUnquote => "json_unquote",
        Func::JsonQuote => "json_quote",
        Func::JsonObject => "json_object",
        Func::JsonArray => "json_array",
        Func::JsonValid => "json_valid",
        Func::JsonType => "json_type",
        Func::JsonContains => "json_contains",
        Func::JsonContainsPath => "json_contains_path",
        Func::JsonKeys => "json_keys",
        Func::JsonLength => "json_length",
        Func::JsonDepth => "json_depth",
        Func::JsonMergePatch => "json_merge_patch",
        Func::JsonMergePreserve => "json_merge_preserve",
        Func::JsonSet => "json_set",
        Func::JsonInsert => "json_insert",
        Func::JsonReplace => "json_replace",
        Func::JsonRemove => "json_remove",
        Func::JsonArrayAppend => "json_array_append",
        Func::JsonArrayInsert => "json_array_insert",
        Func::JsonSearch => "json_search",
        Func::JsonOverlaps => "json_overlaps",
        Func::JsonPretty => "json_pretty",
        Func::JsonMemberOf => "member of",
        _ => "json",
    }
}

/// Functions whose result is of JSON type (MYSQL_TYPE_JSON in metadata, and
/// embedded as JSON when passed to another JSON function).
pub fn returns_json(f: Func) -> bool {
    matches!(
        f,
        Func::JsonExtract
            | Func::JsonObject
            | Func::JsonArray
            | Func::JsonKeys
            | Func::JsonMergePatch
            | Func::JsonMergePreserve
            | Func::JsonSet
            | Func::JsonInsert
            | Func::JsonReplace
            | Func::JsonRemove
            | Func::JsonArrayAppend
            | Func::JsonArrayInsert
            | Func::JsonSearch
    )
}

/// JSON_SEARCH's bit in the JSON-type mask (not an argument's: bit 63 would
/// be a path's) saying that its search string compares case-insensitively.
/// MySQL matches with LIKE between each JSON string (utf8mb4_bin) and the
/// search string: a literal (coercible, as the JSON side) leaves the binary
/// collation in force, while a column, a user variable or an explicit
/// `COLLATE` brings its own collation, a `_ci` one here.
pub const SEARCH_CI: u64 = 1 << 63;

/// Functions that embed their (value) arguments in a document, where a
/// truth value is a JSON boolean.
pub fn embeds_values(f: Func) -> bool {
    matches!(
        f,
        Func::JsonObject
            | Func::JsonArray
            | Func::JsonSet
            | Func::JsonInsert
            | Func::JsonReplace
            | Func::JsonArrayAppend
            | Func::JsonArrayInsert
    )
}

/// ER_INVALID_JSON_TEXT_IN_PARAM (3141).
fn bad_doc(f: Func, arg: usize, e: json::ParseError) -> SqlError {
    SqlError::new(
        3141,
        "22032",
        format!(
            "Invalid JSON text in argument {arg} to function {}: \"{}\" at position {}.",
            name(f),
            e.message,
            e.pos
        ),
    )
}

fn doc(f: Func, args: &[Value], i: usize) -> Result<J, SqlError> {
    let text = match &args[i] {
        Value::Bytes(b) => std::borrow::Cow::Borrowed(b.as_slice()),
        other => std::borrow::Cow::Owned(value_text(other).into_bytes()),
    };
    json::parse(&text).map_err(|e| bad_doc(f, i + 1, e))
}

fn path(args: &[Value], i: usize) -> Result<Path, SqlError> {
    json::parse_path(&String::from_utf8_lossy(args[i].as_bytes().unwrap_or_default()))
}

/// A SQL value as a JSON value (`is_json`: the argument has JSON type).
fn to_json(f: Func, v: &Value, is_json: bool, arg: usize) -> Result<J, SqlError> {
    Ok(match v {
        Value::Null => J::Null,
        Value::Bytes(b) if is_json => json::parse(b).map_err(|e| bad_doc(f, arg, e))?,
        Value::Bytes(b) => J::String(String::from_utf8_lossy(b).into_owned()),
        Value::Int(i) => J::from(*i),
        Value::UInt(u) => J::from(*u),
        Value::Double(d) => serde_json::Number::from_f64(*d).map_or(J::Null, J::Number),
        Value::Float(d) => serde_json::Number::from_f64(*d as f64).map_or(J::Null, J::Number),
        Value::Decimal(_) => {
            let t = value_text(v);
            serde_json::from_str::<J>(&t).unwrap_or(J::String(t))
        }
        other => J::String(value_text(other)),
    })
}

fn text(v: &J) -> Value {
    Value::Bytes(json::to_text(v).into_bytes())
}

/// Evaluate a JSON function. `args` excludes the JSON-type mask, given as `mask`.
pub fn call(f: Func, args: &[Value], mask: u64) -> Result<Value, SqlError> {
    let is_json = |i: usize| i < 64 && mask & (1 << i) != 0;
    match f {
        Func::JsonObject => {
            if !args.len().is_multiple_of(2) {
                return Err(SqlError::new(
                    1582,
                    "42000",
                    "Incorrect parameter count in the call to native function 'json_object'",
                ));
            }
            let mut m = serde_json::Map::new();
            for (k, pair) in args.chunks(2).enumerate() {
                if pair[0].is_null() {
                    return Err(SqlError::new(3158, "22032", "JSON documents may not contain NULL member names."));
                }
                let key = String::from_utf8_lossy(&crate::engine::expr::value::to_text(&pair[0]).unwrap_or_default())
                    .into_owned();
                m.insert(key, to_json(f, &pair[1], is_json(2 * k + 1), 2 * k + 2)?);
            }
            return Ok(text(&J::Object(m)));
        }
        Func::JsonArray => {
            let mut a = Vec::with_capacity(args.len());
            for (i, v) in args.iter().enumerate() {
                a.push(to_json(f, v, is_json(i), i + 1)?);
            }
            return Ok(text(&J::Array(a)));
        }
        _ => {}
    }
    if args.first().is_some_and(Value::is_null) {
        return Ok(Value::Null);
    }
    Ok(match f {
        Func::JsonOverlaps => {
            if args[1].is_null() {
                return Ok(Value::Null);
            }
            Value::Int(json::overlaps(&doc(f, args, 0)?, &doc(f, args, 1)?) as i64)
        }
        Func::JsonPretty => Value::Bytes(json::pretty(&doc(f, args, 0)?).into_bytes()),
        // value MEMBER OF (array): the value as a JSON value (a string is a
        // JSON string unless it has JSON type), an element of the array (or
        // equal to a document that is not one).
        Func::JsonMemberOf => {
            if args[1].is_null() {
                return Ok(Value::Null);
            }
            let v = to_json(f, &args[0], is_json(0), 1)?;
            let a = doc(f, args, 1)?;
            Value::Int(match &a {
                J::Array(items) => items.iter().any(|x| json::equal(x, &v)),
                other => json::equal(other, &v),
            } as i64)
        }
        Func::JsonValid => Value::Int(match &args[0] {
            Value::Bytes(b) => json::parse(b).is_ok() as i64,
            _ => 0,
        }),
        Func::JsonQuote => {
            Value::Bytes(json::quote(&String::from_utf8_lossy(args[0].as_bytes().unwrap_or_default())).into_bytes())
        }
        Func::JsonUnquote => match &args[0] {
            Value::Bytes(b) => Value::Bytes(json::unquote(b)?),
            other => Value::Bytes(value_text(other).into_bytes()),
        },
        Func::JsonType => Value::str(json::type_name(&doc(f, args, 0)?)),
        Func::JsonExtract => {
            if args[1..].iter().any(Value::is_null) {
                return Ok(Value::Null);
            }
            let d = doc(f, args, 0)?;
            let paths: Vec<Path> = (1..args.len()).map(|i| path(args, i)).collect::<Result<_, _>>()?;
            let mut found = Vec::new();
            for p in &paths {
                json::select(&d, &p.legs, &mut found);
            }
            let wrap = paths.len() > 1 || paths.iter().any(Path::has_wildcard);
            match (found.len(), wrap) {
                (0, _) => Value::Null,
                (1, false) => text(found[0]),
                _ => text(&J::Array(found.into_iter().cloned().collect())),
            }
        }
        Func::JsonContains => {
            let target = doc(f, args, 0)?;
            if args[1].is_null() {
                return Ok(Value::Null);
            }
            let cand = doc(f, args, 1)?;
            let target = if args.len() > 2 {
                let p = path(args, 2)?;
                let mut found = Vec::new();
                json::select(&target, &p.legs, &mut found);
                match found.first() {
                    Some(t) => (*t).clone(),
                    None => return Ok(Value::Null),
                }
            } else {
                target
            };
            Value::Int(json::contains(&target, &cand) as i64)
        }
        Func::JsonContainsPath => {
            let d = doc(f, args, 0)?;
            let mode = String::from_utf8_lossy(args[1].as_bytes().unwrap_or_default()).to_ascii_lowercase();
            let all = match mode.as_str() {
                "all" => true,
                "one" => false,
                _ => {
                    return Err(SqlError::new(
                        3150,
                        "42000",
                        "The oneOrAll argument to json_contains_path may take these values: 'one' or 'all'.",
                    ))
                }
            };
            let mut hits = 0;
            for i in 2..args.len() {
                let p = path(args, i)?;
                let mut found = Vec::new();
                json::select(&d, &p.legs, &mut found);
                hits += !found.is_empty() as usize;
            }
            Value::Int(if all { hits == args.len() - 2 } else { hits > 0 } as i64)
        }
        Func::JsonKeys | Func::JsonLength => {
            let d = doc(f, args, 0)?;
            let target = if args.len() > 1 {
                let p = path(args, 1)?;
                if p.has_wildcard() {
                    return Err(SqlError::new(
                        3149,
                        "42000",
                        "In this situation, path expressions may not contain the * and ** tokens.",
                    ));
                }
                let mut found = Vec::new();
                json::select(&d, &p.legs, &mut found);
                match found.first() {
                    Some(t) => (*t).clone(),
                    None => return Ok(Value::Null),
                }
            } else {
                d
            };
            if f == Func::JsonLength {
                Value::Int(json::length(&target) as i64)
            } else {
                match &target {
                    J::Object(m) => {
                        text(&J::Array(json::sorted_keys(m).into_iter().map(|k| J::String(k.clone())).collect()))
                    }
                    _ => Value::Null,
                }
            }
        }
        Func::JsonSet | Func::JsonInsert | Func::JsonReplace | Func::JsonArrayAppend | Func::JsonArrayInsert => {
            if args.len() % 2 != 1 {
                return Err(SqlError::new(
                    1582,
                    "42000",
                    format!("Incorrect parameter count in the call to native function '{}'", name(f)),
                ));
            }
            let mut d = doc(f, args, 0)?;
            let how = match f {
                Func::JsonSet => Modify::Set,
                Func::JsonInsert => Modify::Insert,
                _ => Modify::Replace,
            };
            for i in (1..args.len()).step_by(2) {
                if args[i].is_null() {
                    return Ok(Value::Null);
                }
                let p = path(args, i)?;
                let v = to_json(f, &args[i + 1], is_json(i + 1), i + 2)?;
                match f {
                    Func::JsonArrayAppend => json::array_append(&mut d, &p, v)?,
                    Func::JsonArrayInsert => json::array_insert(&mut d, &p, v)?,
                    _ => json::modify(&mut d, &p, v, how)?,
                }
            }
            text(&d)
        }
        Func::JsonSearch => {
            let all = match args[1].as_bytes().map(|b| b.to_ascii_lowercase()) {
                Some(b) if b == b"one" => false,
                Some(b) if b == b"all" => true,
                None if args[1].is_null() => return Ok(Value::Null),
                _ => {
                    return Err(SqlError::new(
                        3154,
                        "42000",
                        "The oneOrAll argument to json_search may take these values: 'one' or 'all'.",
                    ))
                }
            };
            if args[2].is_null() {
                return Ok(Value::Null);
            }
            let d = doc(f, args, 0)?;
            let pattern = crate::engine::expr::value::to_text(&args[2]).unwrap_or_default().into_owned();
            let escape = match args.get(3) {
                None | Some(Value::Null) => b'\\',
                Some(v) => match crate::engine::expr::value::to_text(v).unwrap_or_default().as_ref() {
                    [] => b'\\',
                    [c] => *c,
                    _ => return Err(SqlError::new(1210, "HY000", "Incorrect arguments to ESCAPE")),
                },
            };
            let mut within = Vec::new();
            for i in 4..args.len() {
                if args[i].is_null() {
                    return Ok(Value::Null);
                }
                within.push(path(args, i)?);
            }
            let coll = if mask & SEARCH_CI != 0 {
                crate::engine::expr::value::Coll::Ci
            } else {
                crate::engine::expr::value::Coll::Bin
            };
            let found = json::search(&d, &within, all, &|s: &str| {
                crate::engine::expr::like_match(s.as_bytes(), &pattern, escape, coll)
            });
            match found.len() {
                0 => Value::Null,
                1 => text(&J::String(found.into_iter().next().unwrap_or_default())),
                _ => text(&J::Array(found.into_iter().map(J::String).collect())),
            }
        }
        Func::JsonDepth | Func::JsonMergePatch | Func::JsonMergePreserve if args.iter().any(|a| a.is_null()) => {
            Value::Null
        }
        Func::JsonDepth => Value::Int(depth(&doc(f, args, 0)?)),
        Func::JsonMergePatch | Func::JsonMergePreserve => {
            let mut d = doc(f, args, 0)?;
            for i in 1..args.len() {
                let next = doc(f, args, i)?;
                d = if f == Func::JsonMergePatch { merge_patch(d, next) } else { merge_preserve(d, next) };
            }
            text(&d)
        }
        Func::JsonRemove => {
            let mut d = doc(f, args, 0)?;
            for i in 1..args.len() {
                if args[i].is_null() {
                    return Ok(Value::Null);
                }
                json::remove(&mut d, &path(args, i)?)?;
            }
            text(&d)
        }
        _ => return Err(SqlError::internal(format!("not a JSON function: {f:?}"))),
    })
}

/// JSON_DEPTH: 1 for a scalar or an empty array / object, else one more
/// than the deepest member.
fn depth(d: &J) -> i64 {
    match d {
        J::Array(a) if !a.is_empty() => 1 + a.iter().map(depth).max().unwrap_or(0),
        J::Object(m) if !m.is_empty() => 1 + m.values().map(depth).max().unwrap_or(0),
        _ => 1,
    }
}

/// JSON_MERGE_PATCH of two documents (RFC 7396): an object patches an
/// object member by member (a null member removes the key); anything else
/// replaces the target.
fn merge_patch(target: J, patch: J) -> J {
    let J::Object(p) = patch else { return patch };
    let mut t = match target {
        J::Object(t) => t,
        _ => serde_json::Map::new(),
    };
    for (k, v) in p {
        if v.is_null() {
            t.remove(&k);
        } else {
            let old = t.remove(&k).unwrap_or(J::Null);
            t.insert(k, merge_patch(old, v));
        }
    }
    J::Object(t)
}

/// JSON_MERGE_PRESERVE of two documents: arrays concatenate, objects merge
/// (a key in both merges its two values), and a scalar is taken as an
/// array of itself.
fn merge_preserve(a: J, b: J) -> J {
    match (a, b) {
        (J::Object(mut x), J::Object(y)) => {
            for (k, v) in y {
                let merged = match x.remove(&k) {
                    Some(old) => merge_preserve(old, v),
                    None => v,
                };
                x.insert(k, merged);
            }
            J::Object(x)
        }
        (a, b) => {
            let as_array = |v: J| match v {
                J::Array(items) => items,
                other => vec![other],
            };
            let mut items = as_array(a);
            items.extend(as_array(b));
            J::Array(items)
        }
    }
}

/// Validate and normalize a value written to a JSON column (error 3140 as MySQL).
pub fn store(v: &Value, table: &str, col: &str) -> Result<Value, SqlError> {
    let bad = |message: &str, pos: usize| {
        SqlError::new(
            3140,
            "22032",
            format!("Invalid JSON text: \"{message}\" at position {pos} in value for column '{table}.{col}'."),
        )
    };
    match v {
        Value::Bytes(b) => match json::parse(b) {
            Ok(j) => Ok(text(&j)),
            Err(e) => Err(bad(e.message, e.pos)),
        },
        Value::Null => Ok(Value::Null),
        // MySQL refuses a number or date: only text (or JSON) converts to JSON.
        _ => Err(bad("not a JSON text, may need CAST", 0)),
    }
}
