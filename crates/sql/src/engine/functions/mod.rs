//! Scalar functions: string, numeric, date and information functions with
//! MySQL semantics (NULL in -> NULL out unless noted).

use crate::engine::expr::datetime::{self as dtm, Unit};
use crate::engine::expr::value::{self as vals, to_f64, to_i64, to_num, to_text, Num};
use crate::engine::expr::{EvalCtx, SqlType, TClass};
use crate::types::SqlError;
use norr_signals::{Date, DateTime, Decimal, Value};

pub mod json_fns;
mod math;
mod net_uuid;
mod periods;
pub(crate) mod regexp;
mod temporal;
mod text;
pub mod tz;

pub use temporal::str_to_date_class;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Func {
    // strings
    Concat,
    ConcatWs,
    Substring,
    Length,
    CharLength,
    Upper,
    Lower,
    Trim,
    LTrim,
    RTrim,
    LPad,
    RPad,
    Replace,
    Locate,
    Instr,
    Left,
    Right,
    Repeat,
    Reverse,
    Space,
    Ascii,
    Hex,
    SubstringIndex,
    Char,
    Field,
    Elt,
    FindInSet,
    Ord,
    Bin,
    Oct,
    Conv,
    Unhex,
    ToBase64,
    FromBase64,
    Quote,
    Md5,
    Sha1,
    Sha2,
    Crc32,
    BitLength,
    Insert,
    Strcmp,
    Format,
    Uuid,
    UuidToBin,
    BinToUuid,
    IsUuid,
    InetAton,
    InetNtoa,
    Inet6Aton,
    Inet6Ntoa,
    IsIpv4,
    IsIpv6,
    /// ANY_VALUE(x): x (for ONLY_FULL_GROUP_BY queries; no such check here).
    AnyValue,
    PeriodAdd,
    PeriodDiff,
    RandomBytes,
    /// REGEXP_LIKE(s, pattern [, match_type]); also the REGEXP / RLIKE operator.
    /// The four take the layout of `expr::compile::regexp_args` (`regexp`).
    RegexpLike,
    RegexpInstr,
    RegexpSubstr,
    RegexpReplace,
    // numeric
    Abs,
    Round,
    Truncate,
    Floor,
    Ceil,
    Mod,
    Greatest,
    Least,
    Sign,
    Pow,
    Sqrt,
    Rand,
    Exp,
    Ln,
    Log,
    Log2,
    Log10,
    Pi,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Atan2,
    Cot,
    Radians,
    Degrees,
    // control
    If,
    NullIf,
    IsNull,
    // dates
    /// NOW() and its synonyms, CURDATE(), CURTIME(): the session zone's
    /// wall time.
    Now,
    CurDate,
    CurTime,
    /// UTC_TIMESTAMP(), UTC_DATE(), UTC_TIME(): whatever the session zone.
    UtcTimestamp,
    UtcDate,
    UtcTime,
    UnixTimestamp,
    FromUnixtime,
    /// CONVERT_TZ(dt, from_tz, to_tz): see `tz`.
    ConvertTz,
    DateFormat,
    /// DATE_ADD/DATE_SUB/ADDDATE: args (date, n, unit-as-int).
    DateAdd,
    DateSub,
    Year,
    Month,
    Day,
    Hour,
    Minute,
    Second,
    DayOfWeek,
    DayOfYear,
    Weekday,
    DateDiff,
    ToDays,
    Date,
    LastDay,
    MonthName,
    DayName,
    /// STR_TO_DATE(s, format); its result class depends on the format.
    StrToDate,
    /// TIMESTAMPDIFF: args (unit-as-int, from, to).
    TimestampDiff,
    Quarter,
    Week,
    WeekOfYear,
    YearWeek,
    TimeToSec,
    SecToTime,
    MakeDate,
    MakeTime,
    TimeDiff,
    FromDays,
    Microsecond,
    TimeFormat,
    // information
    LastInsertId,
    Database,
    Version,
    ConnectionId,
    /// USER(), SESSION_USER(), SYSTEM_USER(): the login's user@client-host.
    User,
    /// CURRENT_USER(): the matched account's user@host-pattern.
    CurrentUser,
    // casts: args (value); target in the variant
    CastSigned,
    CastUnsigned,
    CastChar,
    CastBinary,
    /// The bitwise operators `&`, `|`, `^`, `<<`, `>>`, `~`.
    BitAndOp,
    BitOrOp,
    BitXorOp,
    ShiftLeftOp,
    ShiftRightOp,
    BitNotOp,
    /// BIT_COUNT(n): the bits set in n as a 64-bit integer.
    BitCount,
    /// TO_SECONDS(x): seconds since year 0 (TO_DAYS * 86400 + time of day).
    ToSeconds,
    /// TIMESTAMP(x [, time]): x as a DATETIME, plus `time` when given.
    Timestamp,
    /// SOUNDEX(s): MySQL's soundex string (not cut to four characters).
    Soundex,
    AddTime,
    SubTime,
    /// EXTRACT(unit FROM x) for compound units, MICROSECOND and QUARTER.
    ExtractParts,
    /// The argument of COUNT(DISTINCT a, b, ...): the values' group key
    /// (tuples SQL deems equal give equal bytes), NULL when any value is
    /// NULL (such rows are not counted). The last argument names each
    /// value's collation, one byte each: `b` binary, `c` case-insensitive.
    DistinctKey,
    /// TRIM(side remstr FROM s) (side: 1 leading, 2 trailing, 3 both).
    TrimStr,
    CastDate,
    CastDateTime,
    CastTime,
    CastDouble,
    /// CAST(x AS DECIMAL(p, s)): args (value, p, s).
    CastDecimal,
    // JSON (`json_fns`): the compiler appends the JSON-typed-argument mask.
    JsonExtract,
    JsonUnquote,
    JsonQuote,
    JsonObject,
    JsonArray,
    JsonValid,
    JsonType,
    JsonContains,
    JsonContainsPath,
    JsonKeys,
    JsonLength,
    JsonDepth,
    JsonMergePatch,
    JsonMergePreserve,
    JsonSet,
    JsonInsert,
    JsonReplace,
    JsonRemove,
    JsonArrayAppend,
    JsonArrayInsert,
    JsonSearch,
    JsonOverlaps,
    JsonPretty,
    /// `value MEMBER OF (array)`: args (value, array, mask).
    JsonMemberOf,
    /// CAST(x AS JSON): args (value, mask).
    CastJson,
    // named locks and SLEEP (`user_lock_fns`)
    GetLock,
    ReleaseLock,
    ReleaseAllLocks,
    IsFreeLock,
    IsUsedLock,
    Sleep,
}

/// True for the functions `json_fns` evaluates (their last argument is the
/// JSON-type mask).
pub fn is_json_fn(f: Func) -> bool {
    use Func::*;
    matches!(
        f,
        JsonExtract
            | JsonUnquote
            | JsonQuote
            | JsonObject
            | JsonArray
            | JsonValid
            | JsonType
            | JsonContains
            | JsonContainsPath
            | JsonKeys
            | JsonLength
            | JsonDepth
            | JsonMergePatch
            | JsonMergePreserve
            | JsonSet
            | JsonInsert
            | JsonReplace
            | JsonRemove
            | JsonArrayAppend
            | JsonArrayInsert
            | JsonSearch
            | JsonOverlaps
            | JsonPretty
            | JsonMemberOf
            | CastJson
    )
}

/// Function by SQL name, with the allowed argument counts.
pub fn lookup(name: &str) -> Option<(Func, usize, usize)> {
    use Func::*;
    const N: usize = usize::MAX;
    Some(match name.to_ascii_lowercase().as_str() {
        "concat" => (Concat, 1, N),
        "concat_ws" => (ConcatWs, 2, N),
        "substring" | "substr" | "mid" => (Substring, 2, 3),
        "length" | "octet_length" => (Length, 1, 1),
        "char_length" | "character_length" => (CharLength, 1, 1),
        "upper" | "ucase" => (Upper, 1, 1),
        "lower" | "lcase" => (Lower, 1, 1),
        "trim" => (Trim, 1, 1),
        "ltrim" => (LTrim, 1, 1),
        "rtrim" => (RTrim, 1, 1),
        "lpad" => (LPad, 3, 3),
        "rpad" => (RPad, 3, 3),
        "replace" => (Replace, 3, 3),
        "locate" => (Locate, 2, 3),
        "instr" => (Instr, 2, 2),
        "left" => (Left, 2, 2),
        "right" => (Right, 2, 2),
        "repeat" => (Repeat, 2, 2),
        "reverse" => (Reverse, 1, 1),
        "space" => (Space, 1, 1),
        "ascii" => (Ascii, 1, 1),
        "hex" => (Hex, 1, 1),
        "substring_index" => (SubstringIndex, 3, 3),
        "char" => (Char, 1, N),
        "field" => (Field, 2, N),
        "elt" => (Elt, 2, N),
        "find_in_set" => (FindInSet, 2, 2),
        "ord" => (Ord, 1, 1),
        "bin" => (Bin, 1, 1),
        "oct" => (Oct, 1, 1),
        "conv" => (Conv, 3, 3),
        "unhex" => (Unhex, 1, 1),
        "to_base64" => (ToBase64, 1, 1),
        "from_base64" => (FromBase64, 1, 1),
        "quote" => (Quote, 1, 1),
        "md5" => (Md5, 1, 1),
        "sha1" | "sha" => (Sha1, 1, 1),
        "sha2" => (Sha2, 2, 2),
        "crc32" => (Crc32, 1, 1),
        "bit_length" => (BitLength, 1, 1),
        "insert" => (Insert, 4, 4),
        "strcmp" => (Strcmp, 2, 2),
        "format" => (Format, 2, 2),
        "uuid" => (Uuid, 0, 0),
        "uuid_to_bin" => (UuidToBin, 1, 2),
        "bin_to_uuid" => (BinToUuid, 1, 2),
        "is_uuid" => (IsUuid, 1, 1),
        "inet_aton" => (InetAton, 1, 1),
        "inet_ntoa" => (InetNtoa, 1, 1),
        "inet6_aton" => (Inet6Aton, 1, 1),
        "inet6_ntoa" => (Inet6Ntoa, 1, 1),
        "is_ipv4" => (IsIpv4, 1, 1),
        "is_ipv6" => (IsIpv6, 1, 1),
        "any_value" => (AnyValue, 1, 1),
        "period_add" => (PeriodAdd, 2, 2),
        "period_diff" => (PeriodDiff, 2, 2),
        "random_bytes" => (RandomBytes, 1, 1),
        "regexp_like" => (RegexpLike, 2, 3),
        "regexp_instr" => (RegexpInstr, 2, 6),
        "regexp_substr" => (RegexpSubstr, 2, 5),
        "regexp_replace" => (RegexpReplace, 3, 6),
        "exp" => (Exp, 1, 1),
        "ln" => (Ln, 1, 1),
        "log" => (Log, 1, 2),
        "log2" => (Log2, 1, 1),
        "log10" => (Log10, 1, 1),
        "pi" => (Pi, 0, 0),
        "sin" => (Sin, 1, 1),
        "cos" => (Cos, 1, 1),
        "tan" => (Tan, 1, 1),
        "asin" => (Asin, 1, 1),
        "acos" => (Acos, 1, 1),
        "atan" => (Atan, 1, 2),
        "atan2" => (Atan2, 2, 2),
        "cot" => (Cot, 1, 1),
        "radians" => (Radians, 1, 1),
        "degrees" => (Degrees, 1, 1),
        "isnull" => (IsNull, 1, 1),
        "str_to_date" => (StrToDate, 2, 2),
        "quarter" => (Quarter, 1, 1),
        "week" => (Week, 1, 2),
        "weekofyear" => (WeekOfYear, 1, 1),
        "yearweek" => (YearWeek, 1, 2),
        "time_to_sec" => (TimeToSec, 1, 1),
        "sec_to_time" => (SecToTime, 1, 1),
        "makedate" => (MakeDate, 2, 2),
        "maketime" => (MakeTime, 3, 3),
        "addtime" => (AddTime, 2, 2),
        "subtime" => (SubTime, 2, 2),
        "timediff" => (TimeDiff, 2, 2),
        "from_days" => (FromDays, 1, 1),
        "microsecond" => (Microsecond, 1, 1),
        "time_format" => (TimeFormat, 2, 2),
        "time" => (CastTime, 1, 1),
        "utc_timestamp" => (UtcTimestamp, 0, 1),
        "utc_date" => (UtcDate, 0, 0),
        "utc_time" => (UtcTime, 0, 1),
        "abs" => (Abs, 1, 1),
        "round" => (Round, 1, 2),
        "truncate" => (Truncate, 2, 2),
        "floor" => (Floor, 1, 1),
        "ceil" | "ceiling" => (Ceil, 1, 1),
        "mod" => (Mod, 2, 2),
        "greatest" => (Greatest, 2, N),
        "least" => (Least, 2, N),
        "sign" => (Sign, 1, 1),
        "pow" | "power" => (Pow, 2, 2),
        "sqrt" => (Sqrt, 1, 1),
        "rand" => (Rand, 0, 1),
        "if" => (If, 3, 3),
        "nullif" => (NullIf, 2, 2),
        "now" | "current_timestamp" | "localtime" | "localtimestamp" | "sysdate" => (Now, 0, 1),
        "curdate" | "current_date" => (CurDate, 0, 0),
        "curtime" | "current_time" => (CurTime, 0, 1),
        "unix_timestamp" => (UnixTimestamp, 0, 1),
        "from_unixtime" => (FromUnixtime, 1, 2),
        "date_format" => (DateFormat, 2, 2),
        "convert_tz" => (ConvertTz, 3, 3),
        "year" => (Year, 1, 1),
        "month" => (Month, 1, 1),
        "day" | "dayofmonth" => (Day, 1, 1),
        "hour" => (Hour, 1, 1),
        "minute" => (Minute, 1, 1),
        "second" => (Second, 1, 1),
        "dayofweek" => (DayOfWeek, 1, 1),
        "dayofyear" => (DayOfYear, 1, 1),
        "weekday" => (Weekday, 1, 1),
        "datediff" => (DateDiff, 2, 2),
        "to_days" => (ToDays, 1, 1),
        "date" => (Date, 1, 1),
        "last_day" => (LastDay, 1, 1),
        "monthname" => (MonthName, 1, 1),
        "dayname" => (DayName, 1, 1),
        "last_insert_id" => (LastInsertId, 0, 1),
        "database" | "schema" => (Database, 0, 0),
        "version" => (Version, 0, 0),
        "connection_id" => (ConnectionId, 0, 0),
        "user" | "session_user" | "system_user" => (User, 0, 0),
        "current_user" => (CurrentUser, 0, 0),
        "json_extract" => (JsonExtract, 2, N),
        "json_unquote" => (JsonUnquote, 1, 1),
        "json_quote" => (JsonQuote, 1, 1),
        "json_object" => (JsonObject, 0, N),
        "json_array" => (JsonArray, 0, N),
        "json_valid" => (JsonValid, 1, 1),
        "json_type" => (JsonType, 1, 1),
        "json_contains" => (JsonContains, 2, 3),
        "json_contains_path" => (JsonContainsPath, 3, N),
        "json_keys" => (JsonKeys, 1, 2),
        "json_length" => (JsonLength, 1, 2),
        "json_depth" => (JsonDepth, 1, 1),
        "json_merge_patch" => (JsonMergePatch, 2, N),
        "json_merge_preserve" => (JsonMergePreserve, 2, N),
        "json_set" => (JsonSet, 3, N),
        "json_insert" => (JsonInsert, 3, N),
        "json_replace" => (JsonReplace, 3, N),
        "json_remove" => (JsonRemove, 2, N),
        "json_array_append" => (JsonArrayAppend, 3, N),
        "json_array_insert" => (JsonArrayInsert, 3, N),
        "json_search" => (JsonSearch, 3, N),
        "json_overlaps" => (JsonOverlaps, 2, 2),
        "json_pretty" => (JsonPretty, 1, 1),
        "bit_count" => (BitCount, 1, 1),
        "to_seconds" => (ToSeconds, 1, 1),
        "timestamp" => (Timestamp, 1, 2),
        "soundex" => (Soundex, 1, 1),
        "get_lock" => (GetLock, 2, 2),
        "release_lock" => (ReleaseLock, 1, 1),
        "release_all_locks" => (ReleaseAllLocks, 0, 0),
        "is_free_lock" => (IsFreeLock, 1, 1),
        "is_used_lock" => (IsUsedLock, 1, 1),
        "sleep" => (Sleep, 1, 1),
        _ => return None,
    })
}

pub fn is_nondeterministic(f: Func) -> bool {
    // The lock functions and SLEEP act each time they are evaluated: never
    // taken for a constant (a key to look up, a pushed-down value).
    matches!(f, Func::Rand | Func::LastInsertId | Func::Uuid | Func::RandomBytes)
        || crate::engine::user_lock_fns::is_lock_fn(f)
}

/// Static result type of a function given its argument types.
pub fn ret_type(f: Func, args: &[SqlType]) -> SqlType {
    use Func::*;
    let s = SqlType::new(TClass::Str);
    let int = SqlType::new(TClass::Int);
    let dbl = SqlType { decimals: 31, ..SqlType::new(TClass::Double) };
    match f {
        Concat | ConcatWs | Substring | Upper | Lower | Trim | LTrim | RTrim | LPad | RPad | Replace | Left | Right
        | Repeat | Reverse | Space | Hex | DateFormat | MonthName | DayName | Database | Version | User
        | CurrentUser | CastChar | SubstringIndex | Elt | Bin | Oct | Conv | ToBase64 | Quote | Md5 | Sha1 | Sha2
        | Insert | Format | Uuid | RegexpSubstr | RegexpReplace | TimeFormat | BinToUuid | InetNtoa | Inet6Ntoa => {
            let mut t = s;
            if args.iter().any(|a| a.class == TClass::Bin || (a.class == TClass::Str && a.coll == vals::Coll::Bin)) {
                t.coll = vals::Coll::Bin;
            }
            t
        }
        // Binary strings: compared by bytes and sent with the binary
        // character set, so that drivers hand them out as bytes (a random
        // byte string is no UTF-8).
        CastBinary | Char | Unhex | FromBase64 | UuidToBin | Inet6Aton | RandomBytes => {
            SqlType { coll: vals::Coll::Bin, ..SqlType::new(TClass::Bin) }
        }
        IsUuid | IsIpv4 | IsIpv6 | PeriodAdd | PeriodDiff => int,
        AnyValue => args.first().copied().unwrap_or(s),
        InetAton => SqlType::new(TClass::UInt),
        Length | CharLength | Locate | Instr | Ascii | Year | Month | Day | Hour | Minute | Second | DayOfWeek
        | DayOfYear | Weekday | DateDiff | ToDays | ConnectionId | CastSigned | Sign | Field | FindInSet | Ord
        | BitLength | Strcmp | RegexpLike | RegexpInstr | IsNull | TimestampDiff | Quarter | Week | WeekOfYear
        | YearWeek | TimeToSec | Microsecond | GetLock | ReleaseLock | ReleaseAllLocks | IsFreeLock | Sleep => int,
        IsUsedLock => SqlType::new(TClass::UInt),
        LastInsertId | CastUnsigned | Crc32 => SqlType::new(TClass::UInt),
        UnixTimestamp => {
            if args.is_empty() {
                int
            } else {
                SqlType { decimals: 6, ..SqlType::new(TClass::Decimal) }
            }
        }
        Abs | Mod => match args.first() {
            Some(t) if t.is_numeric() => *t,
            _ => dbl,
        },
        Round | Truncate | Floor | Ceil => match args.first() {
            Some(t) if matches!(t.class, TClass::Int | TClass::UInt) => *t,
            Some(t) if t.class == TClass::Decimal => {
                if matches!(f, Floor | Ceil) || args.len() == 1 {
                    int
                } else {
                    *t
                }
            }
            _ => dbl,
        },
        Greatest | Least | If | NullIf => {
            let xs: &[SqlType] = if f == If { &args[1.min(args.len())..] } else { args };
            unify(xs)
        }
        Pow | Sqrt | Rand | CastDouble | Exp | Ln | Log | Log2 | Log10 | Sin | Cos | Tan | Asin | Acos | Atan
        | Atan2 | Cot | Radians | Degrees => dbl,
        Pi => SqlType { decimals: 6, ..SqlType::new(TClass::Double) },
        // The class for a literal format is set by the compiler (`str_to_date_class`).
        StrToDate => SqlType::new(TClass::DateTime),
        Now | UtcTimestamp | FromUnixtime | CastDateTime => SqlType::new(TClass::DateTime),
        // The argument's fractional digits (MySQL: its datetime precision).
        ConvertTz => SqlType {
            decimals: args
                .first()
                .filter(|t| matches!(t.class, TClass::DateTime | TClass::Time))
                .map_or(0, |t| t.decimals),
            ..SqlType::new(TClass::DateTime)
        },
        DateAdd | DateSub => match args.first() {
            Some(t) if t.class == TClass::Date => SqlType::new(TClass::Date),
            _ => SqlType::new(TClass::DateTime),
        },
        CurDate | UtcDate | Date | LastDay | CastDate | MakeDate | FromDays => SqlType::new(TClass::Date),
        CurTime | UtcTime | CastTime | SecToTime | MakeTime | TimeDiff => SqlType::new(TClass::Time),
        CastDecimal => SqlType::new(TClass::Decimal),
        JsonExtract | JsonObject | JsonArray | JsonKeys | JsonSet | JsonInsert | JsonReplace | JsonRemove
        | JsonArrayAppend | JsonArrayInsert | JsonSearch | JsonMergePatch | JsonMergePreserve | CastJson => {
            SqlType { json: true, coll: vals::Coll::Bin, ..s }
        }
        JsonUnquote | JsonQuote | JsonType | JsonPretty => SqlType { coll: vals::Coll::Bin, ..s },
        JsonValid | JsonContains | JsonContainsPath | JsonLength | JsonDepth | JsonOverlaps | JsonMemberOf => int,
        BitCount | ToSeconds => int,
        Soundex => s,
        Timestamp => SqlType::new(TClass::DateTime),
        BitAndOp | BitOrOp | BitXorOp | ShiftLeftOp | ShiftRightOp | BitNotOp => SqlType::new(TClass::UInt),
        ExtractParts => int,
        DistinctKey => SqlType { coll: vals::Coll::Bin, ..SqlType::new(TClass::Bin) },
        // A DATETIME or TIME stays one; a string gives a string, as MySQL.
        AddTime | SubTime => match args.first().map(|t| t.class) {
            Some(TClass::DateTime) | Some(TClass::Date) => SqlType::new(TClass::DateTime),
            Some(TClass::Time) => SqlType::new(TClass::Time),
            _ => s,
        },
        TrimStr => args.first().copied().unwrap_or(s),
    }
}

/// The common type of several expressions (CASE, IF, COALESCE, UNION).
pub fn unify(ts: &[SqlType]) -> SqlType {
    let mut out: Option<SqlType> = None;
    for t in ts {
        if t.class == TClass::Null {
            continue;
        }
        out = Some(match out {
            None => *t,
            Some(o) => {
                let class = match (o.class, t.class) {
                    (a, b) if a == b => a,
                    (TClass::Int, TClass::UInt) | (TClass::UInt, TClass::Int) => TClass::Decimal,
                    (TClass::Int | TClass::UInt | TClass::Decimal, TClass::Int | TClass::UInt | TClass::Decimal) => {
                        TClass::Decimal
                    }
                    (a, b) if o.is_numeric() && t.is_numeric() && (a == TClass::Double || b == TClass::Double) => {
                        TClass::Double
                    }
                    (TClass::Date, TClass::DateTime) | (TClass::DateTime, TClass::Date) => TClass::DateTime,
                    (TClass::Bin, _) | (_, TClass::Bin) => TClass::Bin,
                    _ => TClass::Str,
                };
                SqlType {
                    class,
                    coll: if o.coll == vals::Coll::Bin || t.coll == vals::Coll::Bin {
                        vals::Coll::Bin
                    } else {
                        vals::Coll::Ci
                    },
                    decimals: o.decimals.max(t.decimals),
                    len: o.len.max(t.len),
                    json: o.json && t.json,
                    boolean: o.boolean && t.boolean,
                }
            }
        });
    }
    out.unwrap_or(SqlType::new(TClass::Null))
}

fn text(v: &Value) -> Option<String> {
    vals::to_string_lossy(v)
}

/// MySQL's bound on a string or JSON value a function builds
/// (ER_WARN_ALLOWED_PACKET_OVERFLOWED): a result of more than the session's
/// max_allowed_packet bytes is NULL with warning 1301. Called with the
/// result's size before anything is allocated for it.
pub(crate) fn over_packet(ctx: &mut EvalCtx, func: &str, size_bytes: u128) -> bool {
    if size_bytes <= ctx.max_packet as u128 {
        return false;
    }
    ctx.warnings
        .push(1301, format!("Result of {func}() was larger than max_allowed_packet ({}) - truncated", ctx.max_packet));
    true
}

/// Functions whose result holds all of their arguments (the evaluator stops
/// as soon as the arguments alone are too large: `over_packet`).
pub(crate) fn joins_args(f: Func) -> bool {
    matches!(f, Func::Concat | Func::ConcatWs | Func::JsonArray | Func::JsonObject)
}

/// The SQL name of `f` for messages: `ConcatWs` -> `concat_ws`.
pub(crate) fn name_of(f: Func) -> &'static str {
    match f {
        Func::Concat => "concat",
        Func::ConcatWs => "concat_ws",
        Func::JsonArray => "json_array",
        Func::JsonObject => "json_object",
        Func::JsonSet => "json_set",
        Func::JsonInsert => "json_insert",
        Func::JsonReplace => "json_replace",
        Func::Insert => "insert",
        Func::ToBase64 => "to_base64",
        Func::Quote => "quote",
        _ => "function",
    }
}

fn s_val(s: String) -> Value {
    Value::Bytes(s.into_bytes())
}

/// Coerce a value to a DATETIME (strings parsed; numbers like 20240101).
pub fn to_datetime(v: &Value, ctx: &mut EvalCtx) -> Option<DateTime> {
    match v {
        Value::DateTime(dt) => Some(*dt),
        Value::Date(d) => Some(DateTime { date: *d, hour: 0, minute: 0, second: 0, micro: 0 }),
        Value::Null => None,
        Value::Bytes(b) => match dtm::parse_datetime(b) {
            Some((dt, _)) => Some(dt),
            None => {
                ctx.warnings.push(1292, format!("Incorrect datetime value: '{}'", String::from_utf8_lossy(b)));
                None
            }
        },
        Value::Int(_) | Value::UInt(_) => {
            let s = text(v)?;
            let r = dtm::parse_datetime(s.as_bytes()).map(|x| x.0);
            if r.is_none() {
                ctx.warnings.push(1292, format!("Incorrect datetime value: '{s}'"));
            }
            r
        }
        _ => {
            ctx.warnings.push(1292, format!("Incorrect datetime value: '{}'", text(v).unwrap_or_default()));
            None
        }
    }
}

fn to_date(v: &Value, ctx: &mut EvalCtx) -> Option<Date> {
    to_datetime(v, ctx).map(|d| d.date)
}

fn round_num(n: Num, places: i64, truncate: bool) -> Num {
    match n {
        Num::I(_) | Num::U(_) if places >= 0 => n,
        Num::I(i) => {
            let p = 10i128.pow((-places).min(19) as u32);
            let x = i as i128;
            let r = if truncate { x / p * p } else { ((x.abs() + p / 2) / p * p) * x.signum() };
            Num::I(r.clamp(i64::MIN as i128, i64::MAX as i128) as i64)
        }
        Num::U(u) => {
            let p = 10u128.pow((-places).min(19) as u32);
            let x = u as u128;
            let r = if truncate { x / p * p } else { (x + p / 2) / p * p };
            Num::U(r.min(u64::MAX as u128) as u64)
        }
        Num::D(d) => {
            let target = places.clamp(-30, 30);
            if target >= d.scale as i64 {
                return n;
            }
            let drop = (d.scale as i64 - target) as u32;
            let p = 10i128.pow(drop.min(38));
            let m = d.mantissa;
            let q = if truncate { m / p } else { (m.abs() + p / 2) / p * m.signum() };
            if target >= 0 {
                Num::D(Decimal { mantissa: q, scale: target as u8 })
            } else {
                Num::D(Decimal { mantissa: q * 10i128.pow((-target) as u32), scale: 0 })
            }
        }
        Num::F(f) => {
            let p = 10f64.powi(places.clamp(-308, 308) as i32);
            let x = f * p;
            let r = if truncate { x.trunc() } else { x.round() };
            Num::F(r / p)
        }
    }
}

fn date_part(f: Func, v: &Value, ctx: &mut EvalCtx) -> Value {
    let time_part = matches!(f, Func::Hour | Func::Minute | Func::Second);
    // HOUR / MINUTE / SECOND read a string or number as a TIME ('10:11:12',
    // '100:00:00', 101112) unless it is a whole DATETIME, as MySQL does.
    let as_time = match v {
        Value::Time(t) => Some(*t),
        Value::Null | Value::Date(_) | Value::DateTime(_) => None,
        Value::Bytes(b) if dtm::parse_datetime(b).is_some() => None,
        // 20240102101112: a DATETIME number (a TIME number has at most 7 digits).
        Value::Int(_) | Value::UInt(_)
            if text(v).is_some_and(|s| s.len() > 7 && dtm::parse_datetime(s.as_bytes()).is_some()) =>
        {
            None
        }
        _ if time_part => match text(v) {
            Some(s) => match dtm::parse_time(s.as_bytes()) {
                Some(t) => Some(t),
                None => {
                    ctx.warnings.push(1292, format!("Truncated incorrect time value: '{s}'"));
                    return Value::Null;
                }
            },
            None => None,
        },
        _ => None,
    };
    if let (Some(t), true) = (as_time, time_part) {
        let secs = t.unsigned_abs() / 1_000_000;
        return Value::Int(match f {
            Func::Hour => secs / 3600,
            Func::Minute => (secs / 60) % 60,
            _ => secs % 60,
        } as i64);
    }
    let Some(dt) = to_datetime(v, ctx) else { return Value::Null };
    let d = dt.date;
    Value::Int(match f {
        Func::Year => d.year as i64,
        Func::Month => d.month as i64,
        Func::Day => d.day as i64,
        Func::Hour => dt.hour as i64,
        Func::Minute => dt.minute as i64,
        Func::Second => dt.second as i64,
        Func::DayOfWeek => ((dtm::weekday(&d) + 1) % 7 + 1) as i64,
        Func::DayOfYear => dtm::day_of_year(&d) as i64,
        Func::Weekday => dtm::weekday(&d) as i64,
        Func::ToDays => dtm::to_days(&d),
        _ => return Value::Null,
    })
}

/// The parts EXTRACT gives for a unit it computes with `ExtractParts`, in
/// order (None for the simple units, which have functions of their own).
pub fn extract_parts(unit: &str) -> Option<&'static [&'static str]> {
    Some(match unit.to_ascii_uppercase().as_str() {
        "MICROSECOND" => &["MICROSECOND"],
        "QUARTER" => &["QUARTER"],
        "YEAR_MONTH" => &["YEAR", "MONTH"],
        "DAY_HOUR" => &["DAY", "HOUR"],
        "DAY_MINUTE" => &["DAY", "HOUR", "MINUTE"],
        "DAY_SECOND" => &["DAY", "HOUR", "MINUTE", "SECOND"],
        "DAY_MICROSECOND" => &["DAY", "HOUR", "MINUTE", "SECOND", "MICROSECOND"],
        "HOUR_MINUTE" => &["HOUR", "MINUTE"],
        "HOUR_SECOND" => &["HOUR", "MINUTE", "SECOND"],
        "HOUR_MICROSECOND" => &["HOUR", "MINUTE", "SECOND", "MICROSECOND"],
        "MINUTE_SECOND" => &["MINUTE", "SECOND"],
        "MINUTE_MICROSECOND" => &["MINUTE", "SECOND", "MICROSECOND"],
        "SECOND_MICROSECOND" => &["SECOND", "MICROSECOND"],
        _ => return None,
    })
}

/// An operand of a bitwise operator as MySQL takes it: a 64-bit unsigned
/// integer (negative numbers in two's complement, others rounded).
fn bits(v: &Value, ctx: &mut EvalCtx) -> Option<u64> {
    Some(match to_num(v, &mut ctx.warnings)? {
        Num::I(i) => i as u64,
        Num::U(u) => u,
        n => {
            let r = n.to_f64().round();
            if r < 0.0 {
                (r as i64) as u64
            } else {
                r as u64
            }
        }
    })
}

/// CAST(x AS CHAR(n)) keeps the first n characters, CAST(x AS BINARY(n))
/// the first n bytes, padding a shorter value with 0x00 bytes; a value cut
/// short gives warning 1292, as in MySQL.
fn cast_to_length(mut b: Vec<u8>, n: usize, binary: bool, ctx: &mut EvalCtx) -> Value {
    let cut = if binary {
        (b.len() > n).then_some(n)
    } else {
        String::from_utf8_lossy(&b).char_indices().nth(n).map(|(i, _)| i)
    };
    if let Some(at) = cut {
        let kind = if binary { "BINARY" } else { "CHAR" };
        ctx.warnings.push(1292, format!("Truncated incorrect {kind}({n}) value: '{}'", String::from_utf8_lossy(&b)));
        b.truncate(at);
    } else if binary {
        b.resize(n, 0);
    }
    Value::Bytes(b)
}

fn chars(s: &str) -> Vec<char> {
    s.chars().collect()
}

/// Greatest / least with MySQL's comparison rules (numeric if all numeric).
fn extreme(args: &[Value], greatest: bool, ctx: &mut EvalCtx) -> Value {
    if args.iter().any(|a| a.is_null()) {
        return Value::Null;
    }
    let mut best = args[0].clone();
    for a in &args[1..] {
        let o = vals::sql_cmp(a, &best, vals::Coll::Ci, &mut ctx.warnings);
        if let Some(o) = o {
            if (greatest && o == std::cmp::Ordering::Greater) || (!greatest && o == std::cmp::Ordering::Less) {
                best = a.clone();
            }
        }
    }
    best
}

pub fn unit_from_code(c: i64) -> Unit {
    match c {
        0 => Unit::Microsecond,
        1 => Unit::Second,
        2 => Unit::Minute,
        3 => Unit::Hour,
        4 => Unit::Day,
        5 => Unit::Week,
        6 => Unit::Month,
        7 => Unit::Quarter,
        _ => Unit::Year,
    }
}

pub fn unit_code(u: Unit) -> i64 {
    match u {
        Unit::Microsecond => 0,
        Unit::Second => 1,
        Unit::Minute => 2,
        Unit::Hour => 3,
        Unit::Day => 4,
        Unit::Week => 5,
        Unit::Month => 6,
        Unit::Quarter => 7,
        Unit::Year => 8,
    }
}

pub fn call(f: Func, args: Vec<Value>, ctx: &mut EvalCtx) -> Result<Value, SqlError> {
    use Func::*;
    if is_json_fn(f) {
        let (mask, rest) = match args.split_last() {
            Some((Value::UInt(m), rest)) => (*m, rest),
            _ => (0, &args[..]),
        };
        if f == CastJson {
            return match rest.first() {
                Some(v) if mask & 1 != 0 => Ok(v.clone()),
                Some(Value::Bytes(b)) => json_fns::call(JsonExtract, &[Value::Bytes(b.clone()), Value::str("$")], 0)
                    .map_err(|e| SqlError { message: e.message.replace("json_extract", "cast_as_json"), ..e }),
                Some(Value::Null) | None => Ok(Value::Null),
                Some(v) => json_fns::call(JsonArray, std::slice::from_ref(v), 0)
                    .map(|a| Value::Bytes(a.as_bytes().map(|b| b[1..b.len() - 1].to_vec()).unwrap_or_default())),
            };
        }
        let out = json_fns::call(f, rest, mask)?;
        if json_fns::embeds_values(f) && over_packet(ctx, name_of(f), out.as_bytes().map_or(0, |b| b.len()) as u128) {
            return Ok(Value::Null);
        }
        return Ok(out);
    }
    if crate::engine::user_lock_fns::is_lock_fn(f) {
        return crate::engine::user_lock_fns::call(f, &args, ctx);
    }
    let null_in = args.iter().any(|a| a.is_null());
    // Functions with their own NULL handling first.
    match f {
        DistinctKey => {
            let Some((Value::Bytes(kinds), values)) = args.split_last() else {
                return Err(SqlError::internal("DistinctKey without collations"));
            };
            if values.iter().any(|v| v.is_null()) {
                return Ok(Value::Null);
            }
            let colls: Vec<vals::Coll> =
                kinds.iter().map(|k| if *k == b'b' { vals::Coll::Bin } else { vals::Coll::Ci }).collect();
            let mut key = Vec::new();
            vals::encode_group_key(values, &colls, &mut key);
            return Ok(Value::Bytes(key));
        }
        Concat if null_in => return Ok(Value::Null),
        ConcatWs => {
            if args[0].is_null() {
                return Ok(Value::Null);
            }
            let sep = to_text(&args[0]).unwrap_or_default().into_owned();
            let present = args[1..].iter().filter(|a| !a.is_null()).count() as u128;
            let body: u128 = args[1..].iter().map(|a| a.as_bytes().map_or(24, |b| b.len()) as u128).sum();
            if over_packet(ctx, "concat_ws", body + present.saturating_sub(1) * sep.len() as u128) {
                return Ok(Value::Null);
            }
            let mut out = Vec::new();
            let mut first = true;
            for a in &args[1..] {
                if let Some(t) = to_text(a) {
                    if !first {
                        out.extend_from_slice(&sep);
                    }
                    out.extend_from_slice(&t);
                    first = false;
                }
            }
            return Ok(Value::Bytes(out));
        }
        If => {
            let c = vals::to_bool(&args[0], &mut ctx.warnings) == Some(true);
            let mut a = args;
            return Ok(if c { a.swap_remove(1) } else { a.swap_remove(2) });
        }
        NullIf => {
            if args[0].is_null() {
                return Ok(Value::Null);
            }
            let eq =
                vals::sql_cmp(&args[0], &args[1], vals::Coll::Ci, &mut ctx.warnings) == Some(std::cmp::Ordering::Equal);
            return Ok(if eq { Value::Null } else { args.into_iter().next().unwrap_or(Value::Null) });
        }
        Now | UtcTimestamp | CurDate | UtcDate | CurTime | UtcTime => {
            let n = if matches!(f, Now | CurDate | CurTime) { ctx.now_local() } else { ctx.now() };
            return Ok(match f {
                Now | UtcTimestamp => Value::DateTime(n),
                CurDate | UtcDate => Value::Date(n.date),
                _ => Value::Time((n.hour as i64 * 3600 + n.minute as i64 * 60 + n.second as i64) * 1_000_000),
            });
        }
        // The moment, so no zone.
        UnixTimestamp if args.is_empty() => {
            return Ok(Value::Int(dtm::datetime_to_unix_micros(&ctx.now()) / 1_000_000));
        }
        LastInsertId => {
            if let Some(v) = args.first() {
                let n = to_i64(v, &mut ctx.warnings).unwrap_or(0).max(0) as u64;
                ctx.set_last_insert_id = Some(n);
                ctx.last_insert_id = n;
                return Ok(Value::UInt(n));
            }
            return Ok(Value::UInt(ctx.last_insert_id));
        }
        Database => return Ok(ctx.current_db.as_deref().map(Value::str).unwrap_or(Value::Null)),
        // @@version is global and read-only: looked up here, not per statement.
        Version => return Ok(crate::engine::vars::global_value("version").unwrap_or(Value::Null)),
        ConnectionId => return Ok(Value::Int(ctx.connection_id as i64)),
        User | CurrentUser => {
            let names = ctx.login.as_deref();
            return Ok(s_val(match (f, names) {
                (_, None) => "root@localhost".into(),
                (User, Some(n)) => n.user.clone(),
                (_, Some(n)) => n.current_user.clone(),
            }));
        }
        Rand => {
            let x = (vals::to_i64(args.first().unwrap_or(&Value::Int(0)), &mut ctx.warnings).unwrap_or(0) as u64)
                ^ (crate::engine::expr::now_unix_micros() as u64);
            let mut h = x.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            h ^= h >> 31;
            return Ok(Value::Double((h >> 11) as f64 / (1u64 << 53) as f64));
        }
        Greatest => return Ok(extreme(&args, true, ctx)),
        Least => return Ok(extreme(&args, false, ctx)),
        IsNull => return Ok(Value::Int(args[0].is_null() as i64)),
        Pi => return Ok(Value::Double(std::f64::consts::PI)),
        Field | Elt | Char | Quote | Uuid => {
            return Ok(text::call_null_aware(f, &args, ctx).unwrap_or(Value::Null));
        }
        IsIpv4 | IsIpv6 => return Ok(net_uuid::call_null_aware(f, &args).unwrap_or(Value::Null)),
        AnyValue => return Ok(args.into_iter().next().unwrap_or(Value::Null)),
        _ => {}
    }
    if null_in {
        return Ok(Value::Null);
    }
    let a0 = &args[0];
    Ok(match f {
        Concat => {
            let parts: Vec<_> = args.iter().map(|a| to_text(a).unwrap_or_default()).collect();
            let total: u128 = parts.iter().map(|p| p.len() as u128).sum();
            if over_packet(ctx, "concat", total) {
                return Ok(Value::Null);
            }
            let mut out = Vec::with_capacity(total as usize);
            for p in &parts {
                out.extend_from_slice(p);
            }
            Value::Bytes(out)
        }
        Substring => {
            let s = chars(&text(a0).unwrap_or_default());
            let pos = to_i64(&args[1], &mut ctx.warnings).unwrap_or(0);
            let n = s.len() as i64;
            let start = if pos > 0 {
                pos - 1
            } else if pos < 0 {
                n + pos
            } else {
                return Ok(s_val(String::new()));
            };
            if start < 0 || start >= n {
                return Ok(s_val(String::new()));
            }
            let len = match args.get(2) {
                Some(l) => to_i64(l, &mut ctx.warnings).unwrap_or(0).max(0),
                None => n,
            };
            let end = (start + len).min(n);
            s_val(s[start as usize..end as usize].iter().collect())
        }
        Length => Value::Int(to_text(a0).map(|t| t.len()).unwrap_or(0) as i64),
        CharLength => Value::Int(text(a0).map(|t| t.chars().count()).unwrap_or(0) as i64),
        Upper => s_val(text(a0).unwrap_or_default().to_uppercase()),
        Lower => s_val(text(a0).unwrap_or_default().to_lowercase()),
        Trim => s_val(text(a0).unwrap_or_default().trim_matches(' ').to_string()),
        LTrim => s_val(text(a0).unwrap_or_default().trim_start_matches(' ').to_string()),
        RTrim => s_val(text(a0).unwrap_or_default().trim_end_matches(' ').to_string()),
        LPad | RPad => {
            let s = chars(&text(a0).unwrap_or_default());
            let n = to_i64(&args[1], &mut ctx.warnings).unwrap_or(0);
            let pad = chars(&text(&args[2]).unwrap_or_default());
            if n < 0 {
                return Ok(Value::Null);
            }
            let n = n as usize;
            if n <= s.len() {
                return Ok(s_val(s[..n].iter().collect()));
            }
            if pad.is_empty() {
                return Ok(Value::Null);
            }
            // The result's size, from the counts, before building it.
            let fill_chars = (n - s.len()) as u128;
            let pad_bytes: u128 = pad.iter().map(|c| c.len_utf8() as u128).sum();
            let rest: u128 =
                pad[..(fill_chars % pad.len() as u128) as usize].iter().map(|c| c.len_utf8() as u128).sum();
            let body_bytes: u128 = s.iter().map(|c| c.len_utf8() as u128).sum();
            let size = body_bytes + fill_chars / pad.len() as u128 * pad_bytes + rest;
            if over_packet(ctx, if f == LPad { "lpad" } else { "rpad" }, size) {
                return Ok(Value::Null);
            }
            let fill: String = pad.iter().cycle().take(n - s.len()).collect();
            let body: String = s.iter().collect();
            s_val(if f == LPad { fill + &body } else { body + &fill })
        }
        Replace => {
            let s = text(a0).unwrap_or_default();
            let from = text(&args[1]).unwrap_or_default();
            if from.is_empty() {
                return Ok(s_val(s));
            }
            let to = text(&args[2]).unwrap_or_default();
            if to.len() > from.len() {
                let hits = s.matches(from.as_str()).count() as u128;
                if over_packet(ctx, "replace", s.len() as u128 + hits * (to.len() - from.len()) as u128) {
                    return Ok(Value::Null);
                }
            }
            s_val(s.replace(&from, &to))
        }
        Locate | Instr => {
            let (needle, hay) = if f == Locate { (&args[0], &args[1]) } else { (&args[1], &args[0]) };
            let hay = chars(&text(hay).unwrap_or_default().to_lowercase());
            let needle = chars(&text(needle).unwrap_or_default().to_lowercase());
            let start = match args.get(2) {
                Some(p) if f == Locate => to_i64(p, &mut ctx.warnings).unwrap_or(1).max(1) as usize - 1,
                _ => 0,
            };
            if needle.is_empty() {
                return Ok(Value::Int(if start <= hay.len() { start as i64 + 1 } else { 0 }));
            }
            let mut found = 0i64;
            if hay.len() >= needle.len() {
                for i in start..=(hay.len() - needle.len()) {
                    if hay[i..i + needle.len()] == needle[..] {
                        found = i as i64 + 1;
                        break;
                    }
                }
            }
            Value::Int(found)
        }
        Left | Right => {
            let s = chars(&text(a0).unwrap_or_default());
            let n = to_i64(&args[1], &mut ctx.warnings).unwrap_or(0).max(0) as usize;
            let n = n.min(s.len());
            s_val(if f == Left { s[..n].iter().collect() } else { s[s.len() - n..].iter().collect() })
        }
        Repeat => {
            let n = to_i64(&args[1], &mut ctx.warnings).unwrap_or(0).max(0) as u128;
            let t = text(a0).unwrap_or_default();
            if over_packet(ctx, "repeat", t.len() as u128 * n) {
                return Ok(Value::Null);
            }
            s_val(t.repeat(n as usize))
        }
        Reverse => s_val(text(a0).unwrap_or_default().chars().rev().collect()),
        Space => {
            let n = to_i64(a0, &mut ctx.warnings).unwrap_or(0).max(0) as u128;
            if over_packet(ctx, "space", n) {
                return Ok(Value::Null);
            }
            s_val(" ".repeat(n as usize))
        }
        Ascii => Value::Int(to_text(a0).and_then(|t| t.first().copied()).unwrap_or(0) as i64),
        Hex => match a0 {
            Value::Int(_) | Value::UInt(_) => s_val(format!("{:X}", to_i64(a0, &mut ctx.warnings).unwrap_or(0))),
            _ => {
                let t = to_text(a0).unwrap_or_default();
                if over_packet(ctx, "hex", t.len() as u128 * 2) {
                    return Ok(Value::Null);
                }
                s_val(t.iter().map(|b| format!("{b:02X}")).collect())
            }
        },
        Abs => match to_num(a0, &mut ctx.warnings) {
            Some(Num::I(i)) => {
                if i == i64::MIN {
                    return Err(vals::err_out_of_range("BIGINT", &format!("abs({i})")));
                }
                Value::Int(i.abs())
            }
            Some(Num::D(d)) => Value::Decimal(Decimal { mantissa: d.mantissa.abs(), scale: d.scale }),
            Some(Num::F(x)) => Value::Double(x.abs()),
            Some(n) => n.to_value(),
            None => Value::Null,
        },
        Round | Truncate => {
            let places = match args.get(1) {
                Some(p) => to_i64(p, &mut ctx.warnings).unwrap_or(0),
                None => 0,
            };
            match to_num(a0, &mut ctx.warnings) {
                Some(n) => {
                    let r = round_num(n, places, f == Truncate);
                    match (r, args.len()) {
                        (Num::D(d), 1) => Value::Int(d.mantissa as i64),
                        (r, _) => r.to_value(),
                    }
                }
                None => Value::Null,
            }
        }
        Floor | Ceil => match to_num(a0, &mut ctx.warnings) {
            Some(Num::F(x)) => Value::Double(if f == Floor { x.floor() } else { x.ceil() }),
            Some(Num::D(d)) => {
                let p = 10i128.pow(d.scale as u32);
                let q = d.mantissa.div_euclid(p);
                let r = d.mantissa.rem_euclid(p);
                let v = if f == Ceil && r != 0 { q + 1 } else { q };
                Value::Int(v as i64)
            }
            Some(n) => n.to_value(),
            None => Value::Null,
        },
        Mod => {
            let (Some(x), Some(y)) = (to_num(a0, &mut ctx.warnings), to_num(&args[1], &mut ctx.warnings)) else {
                return Ok(Value::Null);
            };
            match vals::arith(vals::ArithOp::Mod, x, y, &|| "mod".into())? {
                Some(n) => n.to_value(),
                None => ctx.division_by_zero()?,
            }
        }
        Sign => Value::Int(match to_f64(a0, &mut ctx.warnings) {
            Some(x) if x > 0.0 => 1,
            Some(x) if x < 0.0 => -1,
            _ => 0,
        }),
        Pow => {
            let r =
                to_f64(a0, &mut ctx.warnings).unwrap_or(0.0).powf(to_f64(&args[1], &mut ctx.warnings).unwrap_or(0.0));
            if !r.is_finite() {
                return Err(vals::err_out_of_range("DOUBLE", "pow"));
            }
            Value::Double(r)
        }
        Sqrt => {
            let x = to_f64(a0, &mut ctx.warnings).unwrap_or(0.0);
            if x < 0.0 {
                Value::Null
            } else {
                Value::Double(x.sqrt())
            }
        }
        UnixTimestamp => match to_datetime(a0, ctx) {
            Some(dt) => {
                // The argument is the session zone's wall time.
                let dt = match ctx.zone() {
                    Some(z) => tz::local_to_utc(&dt, z).map_or(dt, |u| u.utc),
                    None => dt,
                };
                let us = dtm::datetime_to_unix_micros(&dt);
                if us < 0 {
                    Value::Int(0)
                } else if dt.micro == 0 {
                    Value::Int(us / 1_000_000)
                } else {
                    Value::Decimal(Decimal { mantissa: us as i128, scale: 6 })
                }
            }
            None => Value::Null,
        },
        FromUnixtime => {
            let secs = match to_num(a0, &mut ctx.warnings) {
                Some(n) => n.to_f64(),
                None => return Ok(Value::Null),
            };
            if secs < 0.0 {
                return Ok(Value::Null);
            }
            let Some(dt) = dtm::unix_micros_to_datetime((secs * 1e6).round() as i64) else { return Ok(Value::Null) };
            // The moment as the session zone's wall time.
            let dt = match ctx.zone() {
                Some(z) => tz::utc_to_local(&dt, z).unwrap_or(dt),
                None => dt,
            };
            match args.get(1) {
                Some(fmt) => s_val(dtm::date_format(&dt, &to_text(fmt).unwrap_or_default())),
                None => Value::DateTime(dt),
            }
        }
        ConvertTz => {
            // NULL for a bad datetime or an unknown zone, as MySQL.
            let Some(dt) = to_datetime(a0, ctx) else { return Ok(Value::Null) };
            if dt.date.year == 0 && dt.date.month == 0 && dt.date.day == 0 {
                return Ok(Value::Null);
            }
            let zone = |v: &Value| to_text(v).and_then(|t| tz::parse_zone(&t));
            match (zone(&args[1]), zone(&args[2])) {
                (Some(from), Some(to)) => Value::DateTime(tz::convert(&dt, &from, &to)),
                _ => Value::Null,
            }
        }
        DateFormat => match to_datetime(a0, ctx) {
            Some(dt) => s_val(dtm::date_format(&dt, &to_text(&args[1]).unwrap_or_default())),
            None => Value::Null,
        },
        DateAdd | DateSub => {
            let is_date = matches!(a0, Value::Date(_))
                || matches!(a0, Value::Bytes(b) if dtm::parse_datetime(b).map(|x| !x.1).unwrap_or(false));
            let Some(dt) = to_datetime(a0, ctx) else { return Ok(Value::Null) };
            let unit = unit_from_code(to_i64(&args[2], &mut ctx.warnings).unwrap_or(4));
            let n = match to_i64(&args[1], &mut ctx.warnings) {
                Some(n) => n,
                None => return Ok(Value::Null),
            };
            let n = if f == DateSub { -n } else { n };
            match dtm::add_interval(&dt, n, unit) {
                Some(r) => {
                    let date_only =
                        is_date && matches!(unit, Unit::Day | Unit::Week | Unit::Month | Unit::Quarter | Unit::Year);
                    if date_only {
                        Value::Date(r.date)
                    } else {
                        Value::DateTime(r)
                    }
                }
                None => {
                    ctx.warnings.push(1441, "Datetime function: datetime field overflow".into());
                    Value::Null
                }
            }
        }
        Year | Month | Day | Hour | Minute | Second | DayOfWeek | DayOfYear | Weekday | ToDays => date_part(f, a0, ctx),
        DateDiff => match (to_date(a0, ctx), to_date(&args[1], ctx)) {
            (Some(x), Some(y)) => Value::Int(dtm::date_to_days(&x) - dtm::date_to_days(&y)),
            _ => Value::Null,
        },
        Date | CastDate => match to_date(a0, ctx) {
            Some(d) => Value::Date(d),
            None => Value::Null,
        },
        LastDay => match to_date(a0, ctx) {
            Some(d) => {
                Value::Date(norr_signals::Date { day: norr_signals::coerce::days_in_month(d.year, d.month), ..d })
            }
            None => Value::Null,
        },
        MonthName => match to_date(a0, ctx) {
            Some(d) => s_val(dtm::date_format(&DateTime { date: d, hour: 0, minute: 0, second: 0, micro: 0 }, b"%M")),
            None => Value::Null,
        },
        DayName => match to_date(a0, ctx) {
            Some(d) => s_val(dtm::date_format(&DateTime { date: d, hour: 0, minute: 0, second: 0, micro: 0 }, b"%W")),
            None => Value::Null,
        },
        CastSigned => match to_num(a0, &mut ctx.warnings) {
            Some(Num::U(u)) => Value::Int(u as i64),
            Some(_) => Value::Int(to_i64(a0, &mut ctx.warnings).unwrap_or(0)),
            None => Value::Null,
        },
        CastUnsigned => match to_num(a0, &mut ctx.warnings) {
            Some(Num::I(i)) => Value::UInt(i as u64),
            Some(Num::U(u)) => Value::UInt(u),
            Some(n) => {
                let i = to_i64(&n.to_value(), &mut ctx.warnings).unwrap_or(0);
                Value::UInt(i.max(0) as u64)
            }
            None => Value::Null,
        },
        BitAndOp | BitOrOp | BitXorOp | ShiftLeftOp | ShiftRightOp => {
            let (Some(x), Some(y)) = (bits(a0, ctx), bits(&args[1], ctx)) else { return Ok(Value::Null) };
            Value::UInt(match f {
                BitAndOp => x & y,
                BitOrOp => x | y,
                BitXorOp => x ^ y,
                ShiftLeftOp => x.checked_shl(u32::try_from(y).unwrap_or(u32::MAX)).unwrap_or(0),
                _ => x.checked_shr(u32::try_from(y).unwrap_or(u32::MAX)).unwrap_or(0),
            })
        }
        AddTime | SubTime => {
            let delta = match &args[1] {
                Value::Time(t) => Some(*t),
                v => text(v).and_then(|s| dtm::parse_time(s.as_bytes())),
            };
            let Some(delta) = delta.map(|d| if f == SubTime { -d } else { d }) else { return Ok(Value::Null) };
            let add_dt = |dt: &DateTime| {
                dtm::unix_micros_to_datetime(dtm::datetime_to_unix_micros(dt) + delta).map(Value::DateTime)
            };
            let out = match a0 {
                Value::DateTime(dt) => add_dt(dt),
                Value::Date(d) => add_dt(&DateTime { date: *d, hour: 0, minute: 0, second: 0, micro: 0 }),
                Value::Time(t) => Some(Value::Time(t + delta)),
                v => match text(v) {
                    Some(s) => match dtm::parse_datetime(s.as_bytes()) {
                        Some((dt, _)) if s.contains('-') => add_dt(&dt),
                        _ => dtm::parse_time(s.as_bytes()).map(|t| Value::Time(t + delta)),
                    }
                    .and_then(|v| vals::to_string_lossy(&v).map(|s| Value::str(&s))),
                    None => None,
                },
            };
            out.unwrap_or(Value::Null)
        }
        ExtractParts => {
            let unit = text(&args[1]).unwrap_or_default();
            let Some(parts) = extract_parts(&unit) else { return Ok(Value::Null) };
            let Some(dt) = to_datetime(a0, ctx) else { return Ok(Value::Null) };
            let mut n: i64 = 0;
            for p in parts {
                let (v, width) = match *p {
                    "YEAR" => (dt.date.year as i64, 0),
                    "QUARTER" => ((dt.date.month as i64 + 2) / 3, 1),
                    "MONTH" => (dt.date.month as i64, 2),
                    "DAY" => (dt.date.day as i64, 2),
                    "HOUR" => (dt.hour as i64, 2),
                    "MINUTE" => (dt.minute as i64, 2),
                    "SECOND" => (dt.second as i64, 2),
                    _ => (dt.micro as i64, 6),
                };
                n = n * 10i64.pow(width) + v;
            }
            Value::Int(n)
        }
        TrimStr => {
            let s = to_text(a0).unwrap_or_default().into_owned();
            let what = to_text(&args[1]).unwrap_or_default().into_owned();
            let side = args[2].as_i64().unwrap_or(3);
            let mut b: &[u8] = &s;
            if !what.is_empty() {
                if side & 1 != 0 {
                    while b.starts_with(&what) {
                        b = &b[what.len()..];
                    }
                }
                if side & 2 != 0 {
                    while b.ends_with(&what) {
                        b = &b[..b.len() - what.len()];
                    }
                }
            }
            Value::Bytes(b.to_vec())
        }
        BitNotOp => match bits(a0, ctx) {
            Some(x) => Value::UInt(!x),
            None => Value::Null,
        },
        BitCount => match bits(a0, ctx) {
            Some(x) => Value::Int(x.count_ones() as i64),
            None => Value::Null,
        },
        ToSeconds => match to_datetime(a0, ctx) {
            Some(dt) => Value::Int(
                dtm::to_days(&dt.date) * 86_400 + dt.hour as i64 * 3600 + dt.minute as i64 * 60 + dt.second as i64,
            ),
            None => Value::Null,
        },
        Timestamp => match to_datetime(a0, ctx) {
            Some(dt) if args.len() == 1 => Value::DateTime(dt),
            Some(dt) => call(AddTime, vec![Value::DateTime(dt), args[1].clone()], ctx)?,
            None => Value::Null,
        },
        CastChar | CastBinary => {
            let b = to_text(a0).unwrap_or_default().into_owned();
            match args.get(1).and_then(|n| n.as_i64()) {
                Some(n) => cast_to_length(b, n.max(0) as usize, f == CastBinary, ctx),
                None => Value::Bytes(b),
            }
        }
        CastDateTime => match to_datetime(a0, ctx) {
            Some(dt) => Value::DateTime(dt),
            None => Value::Null,
        },
        CastTime => match a0 {
            Value::Time(_) => a0.clone(),
            Value::DateTime(dt) => Value::Time(
                (dt.hour as i64 * 3600 + dt.minute as i64 * 60 + dt.second as i64) * 1_000_000 + dt.micro as i64,
            ),
            _ => {
                let t = to_text(a0).unwrap_or_default();
                match dtm::parse_time(&t) {
                    Some(t) => Value::Time(t),
                    // A DATETIME literal: its time of day.
                    None => match dtm::parse_datetime(&t) {
                        Some((dt, _)) => Value::Time(
                            (dt.hour as i64 * 3600 + dt.minute as i64 * 60 + dt.second as i64) * 1_000_000
                                + dt.micro as i64,
                        ),
                        None => Value::Null,
                    },
                }
            }
        },
        // Evaluated by `json_fns` before this match.
        JsonExtract | JsonUnquote | JsonQuote | JsonObject | JsonArray | JsonValid | JsonType | JsonContains
        | JsonContainsPath | JsonKeys | JsonLength | JsonDepth | JsonMergePatch | JsonMergePreserve | JsonSet
        | JsonInsert | JsonReplace | JsonRemove | JsonArrayAppend | JsonArrayInsert | JsonSearch | JsonOverlaps
        | JsonPretty | JsonMemberOf | CastJson => return Err(SqlError::internal("JSON function outside json_fns")),
        // Evaluated with the functions that handle NULL themselves.
        DistinctKey => return Err(SqlError::internal("DistinctKey outside its NULL handling")),
        CastDouble => Value::Double(to_f64(a0, &mut ctx.warnings).unwrap_or(0.0)),
        CastDecimal => {
            let p = to_i64(&args[1], &mut ctx.warnings).unwrap_or(10).clamp(1, 38) as u32;
            let s = to_i64(&args[2], &mut ctx.warnings).unwrap_or(0).clamp(0, 30) as u8;
            let d = match to_num(a0, &mut ctx.warnings) {
                Some(Num::F(x)) => {
                    vals::parse_decimal(&format!("{:.*}", s as usize, x)).unwrap_or(Decimal { mantissa: 0, scale: s })
                }
                Some(n) => match round_num(n, s as i64, false) {
                    Num::D(d) => d,
                    Num::I(i) => Decimal { mantissa: i as i128, scale: 0 },
                    Num::U(u) => Decimal { mantissa: u as i128, scale: 0 },
                    Num::F(_) => Decimal { mantissa: 0, scale: 0 },
                },
                None => return Ok(Value::Null),
            };
            let m = norr_signals::coerce::rescale_round(d.mantissa, d.scale, s).unwrap_or(0);
            let max = 10i128.pow(p) - 1;
            if m.abs() > max {
                ctx.warnings.push(1264, "Out of range value for column 'cast' at row 1".into());
                Value::Decimal(Decimal { mantissa: max * m.signum(), scale: s })
            } else {
                Value::Decimal(Decimal { mantissa: m, scale: s })
            }
        }
        SubstringIndex | FindInSet | Ord | Bin | Oct | Conv | Unhex | ToBase64 | FromBase64 | Md5 | Sha1 | Sha2
        | Crc32 | BitLength | Insert | Strcmp | Format | Soundex => text::call(f, &args, ctx)?,
        RegexpLike | RegexpInstr | RegexpSubstr | RegexpReplace => regexp::call(f, &args, ctx)?,
        Exp | Ln | Log | Log2 | Log10 | Sin | Cos | Tan | Asin | Acos | Atan | Atan2 | Cot | Radians | Degrees => {
            math::call(f, &args, ctx)?
        }
        UuidToBin | BinToUuid | IsUuid | InetAton | InetNtoa | Inet6Aton | Inet6Ntoa => net_uuid::call(f, &args, ctx)?,
        PeriodAdd | PeriodDiff | RandomBytes => periods::call(f, &args, ctx)?,
        StrToDate | TimestampDiff | Quarter | Week | WeekOfYear | YearWeek | TimeToSec | SecToTime | MakeDate
        | MakeTime | TimeDiff | FromDays | Microsecond | TimeFormat => temporal::call(f, &args, ctx)?,
        // Handled above.
        ConcatWs | If | NullIf | Now | CurDate | CurTime | UtcTimestamp | UtcDate | UtcTime | LastInsertId
        | Database | Version | ConnectionId | User | CurrentUser | Rand | Greatest | Least | IsNull | Pi | Field
        | Elt | Char | Quote | Uuid | IsIpv4 | IsIpv6 | AnyValue | GetLock | ReleaseLock | ReleaseAllLocks
        | IsFreeLock | IsUsedLock | Sleep => Value::Null,
    })
}

#[cfg(test)]
mod tests;
