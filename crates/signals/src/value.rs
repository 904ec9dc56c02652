//! Typed column values and column types.
//!
//! `Value` is what crosses every boundary (client <-> TC <-> LQH <-> storage):
//! one enum with a variant per storage class, not per SQL type, so that the
//! column type (`ColumnType`) decides width, range and collation.

use serde::{Deserialize, Serialize};

/// Largest TEXT / BLOB / VARCHAR / VARBINARY value the storage accepts, in bytes.
/// Documented limit (README "Types"): values beyond it get `ErrorCode::ValueTooLarge`.
pub const MAX_VALUE_BYTES: usize = 4 * 1024 * 1024;

/// Largest CHAR / BINARY length (characters / bytes), as MySQL.
pub const MAX_CHAR_LEN: u32 = 255;

/// Largest VARCHAR / VARBINARY declared length, as MySQL (bytes for VARBINARY,
/// characters for VARCHAR).
pub const MAX_VARCHAR_LEN: u32 = 65_535;

/// Largest DECIMAL precision we support (fits an i128 mantissa).
pub const MAX_DECIMAL_PRECISION: u8 = 38;

/// String comparison rule of a character column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub enum Collation {
    /// `utf8mb4_0900_ai_ci`-like default: case-insensitive, compares by simple
    /// Unicode lower-case folding, trailing spaces are *not* ignored (PAD SPACE is
    /// not emulated, as in MySQL 8's 0900 collations). CHAR values never end in
    /// a space (coercion strips them, as MySQL strips CHAR's padding on read).
    #[default]
    CaseInsensitive,
    /// `utf8mb4_bin`: byte order of the UTF-8 encoding.
    Binary,
}

/// A column's declared type.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ColumnType {
    TinyInt {
        unsigned: bool,
    },
    SmallInt {
        unsigned: bool,
    },
    MediumInt {
        unsigned: bool,
    },
    Int {
        unsigned: bool,
    },
    BigInt {
        unsigned: bool,
    },
    Float,
    Double,
    /// DECIMAL(precision, scale); precision 1..=38, scale <= precision.
    Decimal {
        precision: u8,
        scale: u8,
    },
    /// CHAR(len): len in characters (utf8mb4), 0..=255.
    Char {
        len: u32,
        collation: Collation,
    },
    /// VARCHAR(len): len in characters.
    Varchar {
        len: u32,
        collation: Collation,
    },
    /// BINARY(len): fixed bytes, right-padded with 0x00.
    Binary {
        len: u32,
    },
    /// VARBINARY(len).
    Varbinary {
        len: u32,
    },
    /// TEXT (all sizes): up to MAX_VALUE_BYTES bytes.
    Text {
        collation: Collation,
    },
    /// BLOB (all sizes): up to MAX_VALUE_BYTES bytes.
    Blob,
    Date,
    /// TIME: signed, -838:59:59.000000 ..= 838:59:59.000000.
    Time,
    DateTime,
    /// TIMESTAMP: stored as UTC, 1970-01-01 00:00:01 ..= 2038-01-19 03:14:07.
    Timestamp,
}

impl ColumnType {
    /// True for types whose values are `Value::Bytes`.
    pub fn is_bytes(&self) -> bool {
        matches!(
            self,
            ColumnType::Char { .. }
                | ColumnType::Varchar { .. }
                | ColumnType::Binary { .. }
                | ColumnType::Varbinary { .. }
                | ColumnType::Text { .. }
                | ColumnType::Blob
        )
    }

    /// True for character (not binary) string types.
    pub fn is_text(&self) -> bool {
        matches!(self, ColumnType::Char { .. } | ColumnType::Varchar { .. } | ColumnType::Text { .. })
    }

    /// Collation of a character column; `Binary` for everything else.
    pub fn collation(&self) -> Collation {
        match self {
            ColumnType::Char { collation, .. }
            | ColumnType::Varchar { collation, .. }
            | ColumnType::Text { collation } => *collation,
            _ => Collation::Binary,
        }
    }

    /// Integer range `(min, max)` of an integer type, as i128; None for non-integers.
    pub fn int_range(&self) -> Option<(i128, i128)> {
        let r = match self {
            ColumnType::TinyInt { unsigned: false } => (i8::MIN as i128, i8::MAX as i128),
            ColumnType::TinyInt { unsigned: true } => (0, u8::MAX as i128),
            ColumnType::SmallInt { unsigned: false } => (i16::MIN as i128, i16::MAX as i128),
            ColumnType::SmallInt { unsigned: true } => (0, u16::MAX as i128),
            ColumnType::MediumInt { unsigned: false } => (-(1 << 23), (1 << 23) - 1),
            ColumnType::MediumInt { unsigned: true } => (0, (1 << 24) - 1),
            ColumnType::Int { unsigned: false } => (i32::MIN as i128, i32::MAX as i128),
            ColumnType::Int { unsigned: true } => (0, u32::MAX as i128),
            ColumnType::BigInt { unsigned: false } => (i64::MIN as i128, i64::MAX as i128),
            ColumnType::BigInt { unsigned: true } => (0, u64::MAX as i128),
            _ => return None,
        };
        Some(r)
    }

    /// True for the unsigned integer types (values are `Value::UInt`).
    pub fn is_unsigned_int(&self) -> bool {
        matches!(
            self,
            ColumnType::TinyInt { unsigned: true }
                | ColumnType::SmallInt { unsigned: true }
                | ColumnType::MediumInt { unsigned: true }
                | ColumnType::Int { unsigned: true }
                | ColumnType::BigInt { unsigned: true }
        )
    }
}

/// A calendar date. Field order makes the derived `Ord` chronological.
/// MySQL's zero date (0000-00-00) is representable but rejected in strict mode by SQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Date {
    pub year: u16,
    pub month: u8,
    pub day: u8,
}

/// A date and time of day with microseconds (DATETIME and TIMESTAMP; TIMESTAMP in UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DateTime {
    pub date: Date,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
    pub micro: u32,
}

/// A fixed-point decimal: `mantissa * 10^-scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Decimal {
    pub mantissa: i128,
    pub scale: u8,
}

/// One column value.
///
/// Storage class by column type:
/// * signed integers -> `Int`, unsigned integers -> `UInt`
/// * FLOAT -> `Float`, DOUBLE -> `Double`, DECIMAL -> `Decimal`
/// * CHAR, VARCHAR, TEXT (UTF-8), BINARY, VARBINARY, BLOB -> `Bytes`
/// * DATE -> `Date`, TIME -> `Time` (signed microseconds), DATETIME and TIMESTAMP -> `DateTime`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Value {
    Null,
    Int(i64),
    UInt(u64),
    Float(f32),
    Double(f64),
    Decimal(Decimal),
    Bytes(#[serde(with = "byte_buf")] Vec<u8>),
    Date(Date),
    /// TIME as signed microseconds.
    Time(i64),
    DateTime(DateTime),
}

impl Value {
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// Convenience for tests and examples: a UTF-8 string value.
    pub fn str(s: &str) -> Value {
        Value::Bytes(s.as_bytes().to_vec())
    }

    /// The value as i64 if it is an integer that fits.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(v) => Some(*v),
            Value::UInt(v) => i64::try_from(*v).ok(),
            _ => None,
        }
    }

    /// The bytes of a `Bytes` value.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bytes(b) => Some(b),
            _ => None,
        }
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}
impl From<i32> for Value {
    fn from(v: i32) -> Self {
        Value::Int(v as i64)
    }
}
impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Value::UInt(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Bytes(v.as_bytes().to_vec())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Bytes(v.into_bytes())
    }
}
impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Self {
        Value::Bytes(v)
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Double(v)
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        match v {
            Some(v) => v.into(),
            None => Value::Null,
        }
    }
}

/// Serde for byte strings as one byte buffer instead of a sequence of `u8`s:
/// serde's default for `Vec<u8>` visits every byte, the hottest part of
/// encoding a row. For postcard (the wire codec) both are the same bytes (a
/// varint length, then the bytes), so the wire format does not change; formats
/// without a byte type (JSON) still read a sequence of numbers.
pub mod byte_buf {
    use serde::de::{Error, SeqAccess, Visitor};
    use serde::{Deserializer, Serializer};
    use std::fmt;

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(v)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        d.deserialize_byte_buf(BytesVisitor)
    }

    struct BytesVisitor;

    impl<'de> Visitor<'de> for BytesVisitor {
        type Value = Vec<u8>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a byte string")
        }
        fn visit_bytes<E: Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
            Ok(v.to_vec())
        }
        fn visit_byte_buf<E: Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
            Ok(v)
        }
        fn visit_str<E: Error>(self, v: &str) -> Result<Vec<u8>, E> {
            Ok(v.as_bytes().to_vec())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
            // Cap the pre-allocation: the hint comes from the peer.
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
            while let Some(b) = seq.next_element::<u8>()? {
                out.push(b);
            }
            Ok(out)
        }
    }
}
