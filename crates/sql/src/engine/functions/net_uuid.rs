//! UUID and network-address functions (MySQL 8.0): UUID_TO_BIN,
//! BIN_TO_UUID, IS_UUID, INET_ATON, INET_NTOA, INET6_ATON, INET6_NTOA,
//! IS_IPV4, IS_IPV6. Schemas that keep UUIDs as BINARY(16) and addresses as
//! integers or VARBINARY(16) use them in their queries.

use super::{s_val, Func};
use crate::engine::expr::value::{to_i64, to_text};
use crate::engine::expr::EvalCtx;
use crate::types::SqlError;
use norr_signals::Value;
use std::net::{Ipv4Addr, Ipv6Addr};

/// 1411 ER_WRONG_VALUE_FOR_TYPE, as MySQL words it for these functions.
fn wrong_value(v: &[u8], func: &str) -> SqlError {
    SqlError::new(
        1411,
        "HY000",
        format!("Incorrect string value: '{}' for function {func}", String::from_utf8_lossy(v)),
    )
}

/// The 16 bytes of a UUID in text form: 32 hex digits, optionally with the
/// four dashes of the standard form, optionally in braces (MySQL's forms).
fn parse_uuid(t: &[u8]) -> Option<[u8; 16]> {
    let t = match (t.first(), t.last()) {
        (Some(b'{'), Some(b'}')) if t.len() == 38 => &t[1..37],
        _ => t,
    };
    let hex: Vec<u8> = match t.len() {
        32 => t.to_vec(),
        36 => {
            if [8, 13, 18, 23].iter().any(|&i| t[i] != b'-') {
                return None;
            }
            t.iter().copied().filter(|b| *b != b'-').collect()
        }
        _ => return None,
    };
    if hex.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, pair) in hex.chunks(2).enumerate() {
        let s = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(s, 16).ok()?;
    }
    Some(out)
}

/// UUID_TO_BIN's swap: the time-high and time-low groups change places, so
/// version-1 UUIDs made one after another sort (and index) in time order.
/// Byte i of the swapped form is byte `SWAPPED_FROM[i]` of the UUID.
const SWAPPED_FROM: [usize; 16] = [6, 7, 4, 5, 0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15];

fn swap_time(b: [u8; 16]) -> [u8; 16] {
    std::array::from_fn(|i| b[SWAPPED_FROM[i]])
}

/// The inverse of `swap_time`.
fn unswap_time(b: [u8; 16]) -> [u8; 16] {
    let mut o = [0u8; 16];
    for (i, &from) in SWAPPED_FROM.iter().enumerate() {
        o[from] = b[i];
    }
    o
}

fn uuid_text(b: &[u8; 16]) -> String {
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

/// INET_ATON's forms: one to four dot-separated decimal parts; the last
/// part fills the low bytes ('127.1' is 127.0.0.1).
fn inet_aton(t: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(t).ok()?;
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() > 4 || parts.iter().any(|p| p.is_empty() || p.len() > 3 || !p.bytes().all(|b| b.is_ascii_digit())) {
        return None;
    }
    let nums: Vec<u64> = parts.iter().map(|p| p.parse().ok()).collect::<Option<_>>()?;
    if nums.iter().any(|&n| n > 255) {
        return None;
    }
    let (last, head) = nums.split_last()?;
    let mut v = 0u64;
    for (i, n) in head.iter().enumerate() {
        v |= n << (8 * (3 - i));
    }
    Some(v | last)
}

fn parse_ip(t: &[u8]) -> Option<Vec<u8>> {
    let s = std::str::from_utf8(t).ok()?;
    if let Ok(v4) = s.parse::<Ipv4Addr>() {
        return Some(v4.octets().to_vec());
    }
    s.parse::<Ipv6Addr>().ok().map(|v6| v6.octets().to_vec())
}

/// IS_IPV4 / IS_IPV6, which answer 0 (not NULL) for NULL.
pub(super) fn call_null_aware(f: Func, args: &[Value]) -> Option<Value> {
    let t = || to_text(&args[0]).map(|t| t.into_owned()).unwrap_or_default();
    Some(match f {
        Func::IsIpv4 => {
            Value::Int(std::str::from_utf8(&t()).ok().is_some_and(|s| s.parse::<Ipv4Addr>().is_ok()) as i64)
        }
        Func::IsIpv6 => {
            Value::Int(std::str::from_utf8(&t()).ok().is_some_and(|s| s.parse::<Ipv6Addr>().is_ok()) as i64)
        }
        _ => return None,
    })
}

/// The other functions of this module; NULL arguments were answered already.
pub(super) fn call(f: Func, args: &[Value], ctx: &mut EvalCtx) -> Result<Value, SqlError> {
    let t = to_text(&args[0]).map(|t| t.into_owned()).unwrap_or_default();
    let swap = args.get(1).is_some_and(|a| to_i64(a, &mut ctx.warnings).unwrap_or(0) != 0);
    Ok(match f {
        Func::UuidToBin => {
            let b = parse_uuid(&t).ok_or_else(|| wrong_value(&t, "uuid_to_bin"))?;
            Value::Bytes(if swap { swap_time(b) } else { b }.to_vec())
        }
        Func::BinToUuid => {
            let b: [u8; 16] = t.as_slice().try_into().map_err(|_| wrong_value(&t, "bin_to_uuid"))?;
            s_val(uuid_text(&if swap { unswap_time(b) } else { b }))
        }
        Func::IsUuid => Value::Int(parse_uuid(&t).is_some() as i64),
        Func::InetAton => inet_aton(&t).map(Value::UInt).unwrap_or(Value::Null),
        Func::InetNtoa => match to_i64(&args[0], &mut ctx.warnings) {
            Some(n) if (0..=u32::MAX as i64).contains(&n) => s_val(Ipv4Addr::from(n as u32).to_string()),
            _ => Value::Null,
        },
        Func::Inet6Aton => parse_ip(&t).map(Value::Bytes).unwrap_or(Value::Null),
        Func::Inet6Ntoa => match t.len() {
            4 => s_val(Ipv4Addr::new(t[0], t[1], t[2], t[3]).to_string()),
            16 => {
                let b: [u8; 16] = t.as_slice().try_into().expect("16 bytes");
                s_val(Ipv6Addr::from(b).to_string())
            }
            _ => Value::Null,
        },
        _ => return Err(SqlError::internal("not a UUID or network function")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_forms_and_swap_round_trip() {
        let u = b"6ccd780c-baba-1026-9564-5b8c656024db";
        let b = parse_uuid(u).expect("valid");
        assert_eq!(uuid_text(&b), std::str::from_utf8(u).unwrap());
        assert_eq!(parse_uuid(b"6ccd780cbaba102695645b8c656024db"), Some(b));
        assert_eq!(parse_uuid(b"{6ccd780c-baba-1026-9564-5b8c656024db}"), Some(b));
        assert_eq!(parse_uuid(b"6ccd780c-baba-1026-9564-5b8c656024d"), None);
        assert_eq!(parse_uuid(b"6ccd780c+baba-1026-9564-5b8c656024db"), None);
        // MySQL's documented example of the swap.
        assert_eq!(uuid_text(&swap_time(b)), "1026baba-6ccd-780c-9564-5b8c656024db");
        assert_eq!(unswap_time(swap_time(b)), b);
    }

    #[test]
    fn inet_aton_takes_mysqls_short_forms() {
        assert_eq!(inet_aton(b"10.0.5.9"), Some(167773449));
        assert_eq!(inet_aton(b"127.1"), Some(2130706433));
        assert_eq!(inet_aton(b"255.255.255.255"), Some(4294967295));
        assert_eq!(inet_aton(b"1.2.3.256"), None);
        assert_eq!(inet_aton(b"1..2"), None);
        assert_eq!(inet_aton(b"1.2.3.4.5"), None);
        assert_eq!(parse_ip(b"fdfe::5a55:caff:fefa:9089").map(|v| v.len()), Some(16));
        assert_eq!(parse_ip(b"10.0.5.9"), Some(vec![10, 0, 5, 9]));
        assert_eq!(parse_ip(b"nope"), None);
    }
}
