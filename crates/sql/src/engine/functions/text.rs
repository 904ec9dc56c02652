//! String functions beyond the basic set in `mod.rs`: searching and splitting
//! (SUBSTRING_INDEX, FIELD, ELT, FIND_IN_SET), codes and encodings (CHAR, ORD,
//! BIN, OCT, CONV, UNHEX, TO_BASE64, FROM_BASE64, QUOTE), digests (MD5, SHA1,
//! SHA2, CRC32), FORMAT, INSERT, STRCMP and UUID (regular expressions:
//! `regexp`).

use super::{chars, s_val, text, Func};
use crate::engine::expr::value::{self as vals, to_i64, to_num, to_text, Coll, Num};
use crate::engine::expr::EvalCtx;
use crate::types::SqlError;
use base64::Engine as _;
use norr_signals::Value;
use sha2::Digest as _;

/// Functions that see NULL arguments themselves.
pub(super) fn call_null_aware(f: Func, args: &[Value], ctx: &mut EvalCtx) -> Option<Value> {
    Some(match f {
        Func::Field => {
            if args[0].is_null() {
                return Some(Value::Int(0));
            }
            let pos = args[1..].iter().position(|a| {
                !a.is_null()
                    && vals::sql_cmp(&args[0], a, Coll::Ci, &mut ctx.warnings) == Some(std::cmp::Ordering::Equal)
            });
            Value::Int(pos.map(|p| p as i64 + 1).unwrap_or(0))
        }
        Func::Elt => match to_i64(&args[0], &mut ctx.warnings) {
            Some(n) if n >= 1 && (n as usize) < args.len() => args[n as usize].clone(),
            _ => Value::Null,
        },
        Func::Char => {
            let mut out = Vec::new();
            for a in args.iter().filter(|a| !a.is_null()) {
                let n = to_i64(a, &mut ctx.warnings).unwrap_or(0) as u32;
                let bytes = n.to_be_bytes();
                let skip = bytes.iter().take_while(|b| **b == 0).count().min(3);
                out.extend_from_slice(&bytes[skip..]);
            }
            Value::Bytes(out)
        }
        Func::Quote => match &args[0] {
            Value::Null => s_val("NULL".into()),
            v => {
                let raw = to_text(v).unwrap_or_default();
                let mut out = Vec::with_capacity(raw.len() + 2);
                out.push(b'\'');
                for &b in raw.iter() {
                    match b {
                        b'\'' | b'\\' => out.extend_from_slice(&[b'\\', b]),
                        0 => out.extend_from_slice(b"\\0"),
                        0x1a => out.extend_from_slice(b"\\Z"),
                        _ => out.push(b),
                    }
                }
                out.push(b'\'');
                Value::Bytes(out)
            }
        },
        Func::Uuid => s_val(uuid_v1()),
        _ => return None,
    })
}

/// Functions whose NULL arguments were already answered with NULL.
pub(super) fn call(f: Func, args: &[Value], ctx: &mut EvalCtx) -> Result<Value, SqlError> {
    let a0 = &args[0];
    Ok(match f {
        Func::SubstringIndex => {
            let s = to_text(a0).unwrap_or_default();
            let delim = to_text(&args[1]).unwrap_or_default();
            let count = to_i64(&args[2], &mut ctx.warnings).unwrap_or(0);
            Value::Bytes(substring_index(&s, &delim, count).to_vec())
        }
        Func::Soundex => Value::Bytes(soundex(&to_text(a0).unwrap_or_default()).into_bytes()),
        Func::FindInSet => {
            let needle = text(a0).unwrap_or_default();
            let list = text(&args[1]).unwrap_or_default();
            if needle.contains(',') {
                return Ok(Value::Int(0));
            }
            let pos = list.split(',').position(|item| {
                vals::sql_cmp(&Value::str(item), &Value::str(&needle), Coll::Ci, &mut ctx.warnings)
                    == Some(std::cmp::Ordering::Equal)
            });
            Value::Int(if list.is_empty() { 0 } else { pos.map(|p| p as i64 + 1).unwrap_or(0) })
        }
        Func::Ord => {
            let t = to_text(a0).unwrap_or_default();
            let first = std::str::from_utf8(&t).ok().and_then(|s| s.chars().next()).map(|c| c.len_utf8()).unwrap_or(1);
            Value::Int(t.iter().take(first).fold(0i64, |acc, b| acc * 256 + *b as i64))
        }
        Func::Bin | Func::Oct => {
            let n = to_i64(a0, &mut ctx.warnings).unwrap_or(0) as u64;
            s_val(if f == Func::Bin { format!("{n:b}") } else { format!("{n:o}") })
        }
        Func::Conv => conv(a0, &args[1], &args[2], ctx),
        Func::Unhex => {
            let t = to_text(a0).unwrap_or_default();
            let t = if t.len() % 2 == 1 { [b"0".as_slice(), &t].concat() } else { t.into_owned() };
            let out: Option<Vec<u8>> =
                t.chunks(2).map(|p| std::str::from_utf8(p).ok().and_then(|h| u8::from_str_radix(h, 16).ok())).collect();
            out.map(Value::Bytes).unwrap_or(Value::Null)
        }
        Func::ToBase64 => {
            let t = to_text(a0).unwrap_or_default();
            if super::over_packet(ctx, "to_base64", (t.len() as u128).div_ceil(3) * 4) {
                return Ok(Value::Null);
            }
            s_val(base64::engine::general_purpose::STANDARD.encode(t))
        }
        Func::FromBase64 => {
            let t = to_text(a0).unwrap_or_default();
            let compact: Vec<u8> = t.iter().copied().filter(|b| !b.is_ascii_whitespace()).collect();
            match base64::engine::general_purpose::STANDARD.decode(compact) {
                Ok(b) => Value::Bytes(b),
                Err(_) => Value::Null,
            }
        }
        Func::Md5 => s_val(hex_lower(&md5::Md5::digest(to_text(a0).unwrap_or_default()))),
        Func::Sha1 => s_val(hex_lower(&sha1::Sha1::digest(to_text(a0).unwrap_or_default()))),
        Func::Sha2 => {
            let t = to_text(a0).unwrap_or_default();
            match to_i64(&args[1], &mut ctx.warnings).unwrap_or(-1) {
                0 | 256 => s_val(hex_lower(&sha2::Sha256::digest(&t))),
                224 => s_val(hex_lower(&sha2::Sha224::digest(&t))),
                384 => s_val(hex_lower(&sha2::Sha384::digest(&t))),
                512 => s_val(hex_lower(&sha2::Sha512::digest(&t))),
                _ => Value::Null,
            }
        }
        Func::Crc32 => Value::UInt(crc32fast::hash(&to_text(a0).unwrap_or_default()) as u64),
        Func::BitLength => Value::Int(to_text(a0).map(|t| t.len() as i64 * 8).unwrap_or(0)),
        Func::Insert => {
            let s = chars(&text(a0).unwrap_or_default());
            let pos = to_i64(&args[1], &mut ctx.warnings).unwrap_or(0);
            let len = to_i64(&args[2], &mut ctx.warnings).unwrap_or(0);
            let new = text(&args[3]).unwrap_or_default();
            let s_bytes: usize = s.iter().map(|c| c.len_utf8()).sum();
            if super::over_packet(ctx, "insert", (s_bytes + new.len()) as u128) {
                return Ok(Value::Null);
            }
            if pos < 1 || pos as usize > s.len() {
                return Ok(s_val(s.iter().collect()));
            }
            let start = pos as usize - 1;
            let end = if len < 0 { s.len() } else { (start + len as usize).min(s.len()) };
            let mut out: String = s[..start].iter().collect();
            out.push_str(&new);
            out.extend(s[end..].iter());
            s_val(out)
        }
        Func::Strcmp => Value::Int(match vals::sql_cmp(a0, &args[1], Coll::Ci, &mut ctx.warnings) {
            Some(std::cmp::Ordering::Less) => -1,
            Some(std::cmp::Ordering::Equal) => 0,
            Some(std::cmp::Ordering::Greater) => 1,
            None => return Ok(Value::Null),
        }),
        Func::Format => {
            let places = to_i64(&args[1], &mut ctx.warnings).unwrap_or(0).clamp(0, 30);
            match to_num(a0, &mut ctx.warnings) {
                Some(n) => s_val(format_number(n, places as usize)),
                None => Value::Null,
            }
        }
        _ => return Err(SqlError::internal(format!("{f:?} is not a text function"))),
    })
}

/// SUBSTRING_INDEX: the part before the `count`-th delimiter (from the right
/// when `count` is negative). Delimiters match byte for byte, as in MySQL.
pub(super) fn substring_index<'a>(s: &'a [u8], delim: &[u8], count: i64) -> &'a [u8] {
    if delim.is_empty() || count == 0 {
        return &s[..0];
    }
    let hits: Vec<usize> = {
        let mut v = Vec::new();
        let mut i = 0;
        while i + delim.len() <= s.len() {
            if &s[i..i + delim.len()] == delim {
                v.push(i);
                i += delim.len();
            } else {
                i += 1;
            }
        }
        v
    };
    let want = count.unsigned_abs() as usize;
    if want > hits.len() {
        return s;
    }
    if count > 0 {
        &s[..hits[want - 1]]
    } else {
        &s[hits[hits.len() - want] + delim.len()..]
    }
}

fn conv(n: &Value, from: &Value, to: &Value, ctx: &mut EvalCtx) -> Value {
    let (Some(from), Some(to)) = (to_i64(from, &mut ctx.warnings), to_i64(to, &mut ctx.warnings)) else {
        return Value::Null;
    };
    let (fb, tb) = (from.unsigned_abs(), to.unsigned_abs());
    if !(2..=36).contains(&fb) || !(2..=36).contains(&tb) {
        return Value::Null;
    }
    let digits = text(n).unwrap_or_default();
    let digits = digits.trim();
    let (neg, body) = match digits.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, digits),
    };
    // Leading valid digits only, as MySQL; overflow saturates.
    let mut acc: u64 = 0;
    for c in body.chars() {
        let Some(d) = c.to_digit(fb as u32) else { break };
        acc = acc.saturating_mul(fb).saturating_add(d as u64);
    }
    let value = if neg { (acc as i64).wrapping_neg() as u64 } else { acc };
    let (neg_out, mut mag) =
        if to < 0 && (value as i64) < 0 { (true, (value as i64).unsigned_abs()) } else { (false, value) };
    let mut out = Vec::new();
    loop {
        let d = (mag % tb) as u32;
        out.push(std::char::from_digit(d, tb as u32).unwrap_or('0').to_ascii_uppercase());
        mag /= tb;
        if mag == 0 {
            break;
        }
    }
    if neg_out {
        out.push('-');
    }
    s_val(out.iter().rev().collect())
}

/// FORMAT(x, d): rounded to `d` places, with ',' between thousands.
fn format_number(n: Num, places: usize) -> String {
    let fixed = match super::round_num(n, places as i64, false) {
        Num::F(x) => format!("{x:.places$}"),
        Num::D(d) => {
            let v = Value::Decimal(d);
            let s = vals::to_string_lossy(&v).unwrap_or_default();
            pad_places(&s, places)
        }
        other => pad_places(&vals::to_string_lossy(&other.to_value()).unwrap_or_default(), places),
    };
    let (sign, body) = match fixed.strip_prefix('-') {
        Some(b) => ("-", b),
        None => ("", fixed.as_str()),
    };
    let (int, frac) = match body.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (body, None),
    };
    let mut grouped = String::with_capacity(int.len() + int.len() / 3);
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    match frac {
        Some(f) if places > 0 => format!("{sign}{grouped}.{f}"),
        _ => format!("{sign}{grouped}"),
    }
}

fn pad_places(s: &str, places: usize) -> String {
    let have = s.split_once('.').map(|(_, f)| f.len()).unwrap_or(0);
    if places == 0 {
        return s.split('.').next().unwrap_or(s).to_string();
    }
    let mut out = s.to_string();
    if have == 0 {
        out.push('.');
    }
    out.extend(std::iter::repeat_n('0', places.saturating_sub(have)));
    out
}

fn hex_lower(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A version-1 style UUID: time since 1582-10-15 in 100 ns steps, a random
/// clock sequence and a random node with the multicast bit set (no MAC).
fn uuid_v1() -> String {
    let us = crate::engine::expr::now_unix_micros().max(0) as u64;
    let t = us * 10 + 0x01B2_1DD2_1381_4000;
    let mut rnd = [0u8; 8];
    let _ = getrandom::fill(&mut rnd);
    let clock = (u16::from_be_bytes([rnd[0], rnd[1]]) & 0x3fff) | 0x8000;
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
        t & 0xffff_ffff,
        (t >> 32) & 0xffff,
        ((t >> 48) & 0x0fff) | 0x1000,
        clock,
        rnd[2] | 0x01,
        rnd[3],
        rnd[4],
        rnd[5],
        rnd[6],
        rnd[7]
    )
}

/// MySQL's SOUNDEX: the first letter, then the code of each later letter
/// that differs from the code of the letter before it (vowels, H, W and Y
/// have none and separate equal codes), at least four characters (padded
/// with '0'), not cut to four. Characters that are not ASCII letters are
/// skipped.
fn soundex(s: &[u8]) -> String {
    // Codes of A..Z.
    const CODES: &[u8; 26] = b"01230120022455012623010202";
    let code = |c: u8| CODES[(c.to_ascii_uppercase() - b'A') as usize];
    let mut letters = s.iter().copied().filter(u8::is_ascii_alphabetic);
    let Some(first) = letters.next() else { return String::new() };
    let mut out = String::from(first.to_ascii_uppercase() as char);
    let mut last = code(first);
    for c in letters {
        let k = code(c);
        if k != b'0' && k != last {
            out.push(k as char);
        }
        last = k;
    }
    while out.len() < 4 {
        out.push('0');
    }
    out
}
