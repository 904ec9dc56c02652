//! ENUM and SET columns: member lists, validation of written values, and the
//! member index / bit mask MySQL uses in numeric context and for ORDER BY.
//!
//! Storage: an ENUM or SET column is a native VARCHAR holding the canonical
//! text of its value (the member as declared; for SET the members in
//! declaration order joined by ','). The member list lives only in the SQL
//! type text `SqlColumnMeta::sql_type` (`enum('red','green')`, exactly as SHOW
//! CREATE TABLE prints it), which is part of the table's `extra` in the
//! dictionary: every SQL node sees it and it survives restarts with no new
//! format. Why text and not the index: every path that copies raw rows
//! (ALTER TABLE copies, statement compensation, the native API, mysqldump
//! through SELECT) then stays correct without an ENUM-aware conversion, and
//! comparisons with strings, LIKE, FIND_IN_SET and indexes on the column work
//! on the native value. The cost is a few bytes per row more than MySQL's
//! 1-2 byte index, and the index is recomputed (a lookup in the member list)
//! where MySQL's numeric semantics need it: `col+0`, ORDER BY, comparisons
//! with numbers (`CExpr::EnumIndex`).

use crate::engine::catalog::quote_string;
use crate::types::SqlError;
use norr_signals::Value;

/// MySQL's limits (ER_TOO_BIG_SET 1097 for both; the ENUM limit is the
/// 2-byte index MySQL stores).
pub const MAX_ENUM_MEMBERS: usize = 65_535;
pub const MAX_SET_MEMBERS: usize = 64;
/// Longest member in characters (ER_TOO_LONG_SET_ENUM_VALUE).
pub const MAX_MEMBER_CHARS: usize = 255;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Enum,
    Set,
}

/// The member list of one ENUM or SET column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnumSet {
    pub kind: Kind,
    pub members: Vec<String>,
    /// Members match written values case-insensitively (the column's
    /// collation is not binary).
    pub ci: bool,
}

fn truncated(col: &str, row: u64) -> SqlError {
    SqlError::new(1265, "01000", format!("Data truncated for column '{col}' at row {row}"))
}

impl EnumSet {
    /// Validate a declared member list (CREATE / ALTER TABLE): trailing spaces
    /// are stripped as MySQL does, duplicates are error 1291, a SET member may
    /// not contain ','.
    pub fn declare(kind: Kind, members: Vec<String>, ci: bool, col: &str) -> Result<EnumSet, SqlError> {
        let what = if kind == Kind::Enum { "ENUM" } else { "SET" };
        let members: Vec<String> = members.into_iter().map(|m| m.trim_end_matches(' ').to_string()).collect();
        if kind == Kind::Enum && members.len() > MAX_ENUM_MEMBERS {
            return Err(SqlError::new(1097, "HY000", format!("Too many enumeration values for column {col}.")));
        }
        if kind == Kind::Set && members.len() > MAX_SET_MEMBERS {
            return Err(SqlError::new(1097, "HY000", format!("Too many strings for column {col} and SET")));
        }
        for (i, m) in members.iter().enumerate() {
            if m.chars().count() > MAX_MEMBER_CHARS {
                // ER_TOO_LONG_SET_ENUM_VALUE
                return Err(SqlError::new(3504, "HY000", format!("Too long enumeration/set value for column {col}.")));
            }
            if kind == Kind::Set && m.contains(',') {
                return Err(SqlError::new(1367, "22007", format!("Illegal set '{m}' value found during parsing")));
            }
            if members[..i].iter().any(|p| eq(p, m, ci)) {
                return Err(SqlError::new(
                    1291,
                    "HY000",
                    format!("Column '{col}' has duplicated value '{m}' in {what}"),
                ));
            }
        }
        Ok(EnumSet { kind, members, ci })
    }

    /// The SQL type text, as SHOW CREATE TABLE prints it: `enum('a','b')`.
    pub fn sql_type(&self) -> String {
        let list: Vec<String> = self.members.iter().map(|m| quote_string(m)).collect();
        let kw = if self.kind == Kind::Enum { "enum" } else { "set" };
        format!("{kw}({})", list.join(","))
    }

    /// Parse the text `sql_type` produced. None for any other type.
    pub fn parse_sql_type(sql_type: &str, ci: bool) -> Option<EnumSet> {
        let (kind, rest) = if let Some(r) = sql_type.strip_prefix("enum(") {
            (Kind::Enum, r)
        } else if let Some(r) = sql_type.strip_prefix("set(") {
            (Kind::Set, r)
        } else {
            return None;
        };
        let mut members = Vec::new();
        let mut it = rest.chars().peekable();
        loop {
            if it.next()? != '\'' {
                return None;
            }
            let mut m = String::new();
            loop {
                match it.next()? {
                    '\'' if it.peek() == Some(&'\'') => {
                        it.next();
                        m.push('\'');
                    }
                    '\'' => break,
                    '\\' => m.push(it.next()?),
                    c => m.push(c),
                }
            }
            members.push(m);
            match it.next()? {
                ',' => continue,
                ')' => break,
                _ => return None,
            }
        }
        Some(EnumSet { kind, members, ci })
    }

    /// Length in characters of the longest value (the native VARCHAR length).
    pub fn max_chars(&self) -> u32 {
        let lens = self.members.iter().map(|m| m.chars().count() as u32);
        match self.kind {
            Kind::Enum => lens.max().unwrap_or(0).max(1),
            Kind::Set => (lens.sum::<u32>() + self.members.len().saturating_sub(1) as u32).max(1),
        }
    }

    fn find(&self, s: &str) -> Option<usize> {
        let s = s.trim_end_matches(' ');
        self.members.iter().position(|m| eq(m, s, self.ci))
    }

    /// Convert a written value to the stored text (strict mode: anything that
    /// is not a member, index or mask is error 1265). Numbers and numeric
    /// strings that are no member are 1-based indexes (ENUM) or bit masks (SET),
    /// as in MySQL. `''` is the error value, which strict mode refuses.
    pub fn store(&self, v: &Value, col: &str, row: u64) -> Result<Value, SqlError> {
        let number = |v: &Value| -> Option<u64> {
            match v {
                Value::Int(i) => u64::try_from(*i).ok(),
                Value::UInt(u) => Some(*u),
                Value::Decimal(d) if d.scale == 0 => u64::try_from(d.mantissa).ok(),
                Value::Double(f) if f.fract() == 0.0 && *f >= 0.0 && *f < 1.9e19 => Some(*f as u64),
                Value::Float(f) if f.fract() == 0.0 && *f >= 0.0 => Some(*f as u64),
                _ => None,
            }
        };
        let text = match v {
            Value::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
            Value::Int(_) | Value::UInt(_) | Value::Decimal(_) | Value::Double(_) | Value::Float(_) => None,
            other => Some(crate::engine::catalog::value_text(other)),
        };
        match (self.kind, text) {
            (Kind::Enum, Some(s)) => {
                if let Some(i) = self.find(&s) {
                    return Ok(Value::str(&self.members[i]));
                }
                match s.trim().parse::<u64>() {
                    Ok(n) => self.enum_by_index(n, col, row),
                    Err(_) => Err(truncated(col, row)),
                }
            }
            (Kind::Enum, None) => self.enum_by_index(number(v).ok_or_else(|| truncated(col, row))?, col, row),
            (Kind::Set, Some(s)) => {
                let mut mask = 0u64;
                if !s.is_empty() {
                    for part in s.split(',') {
                        match self.find(part) {
                            Some(i) => mask |= 1 << i,
                            None => {
                                // A whole numeric string is a mask.
                                return match s.trim().parse::<u64>() {
                                    Ok(n) => self.set_by_mask(n, col, row),
                                    Err(_) => Err(truncated(col, row)),
                                };
                            }
                        }
                    }
                }
                Ok(Value::str(&self.set_text(mask)))
            }
            (Kind::Set, None) => self.set_by_mask(number(v).ok_or_else(|| truncated(col, row))?, col, row),
        }
    }

    fn enum_by_index(&self, n: u64, col: &str, row: u64) -> Result<Value, SqlError> {
        match n.checked_sub(1).and_then(|i| self.members.get(i as usize)) {
            Some(m) => Ok(Value::str(m)),
            None => Err(truncated(col, row)),
        }
    }

    fn set_by_mask(&self, n: u64, col: &str, row: u64) -> Result<Value, SqlError> {
        let all = if self.members.len() >= 64 { u64::MAX } else { (1u64 << self.members.len()) - 1 };
        if n & !all != 0 {
            return Err(truncated(col, row));
        }
        Ok(Value::str(&self.set_text(n)))
    }

    /// The members of `mask` in declaration order, joined by ','.
    pub fn set_text(&self, mask: u64) -> String {
        let parts: Vec<&str> =
            self.members.iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0).map(|(_, m)| m.as_str()).collect();
        parts.join(",")
    }

    /// The number MySQL uses for a stored value in numeric context: the
    /// 1-based index of an ENUM member (0 for the error value ''), the bit
    /// mask of a SET. NULL stays NULL.
    pub fn number(&self, v: &Value) -> Value {
        let Value::Bytes(b) = v else { return v.clone() };
        let s = String::from_utf8_lossy(b);
        match self.kind {
            // Signed where it fits, so `-col` is negative as in MySQL.
            Kind::Enum => Value::Int(self.find(&s).map(|i| i as i64 + 1).unwrap_or(0)),
            Kind::Set => {
                let mut mask = 0u64;
                if !s.is_empty() {
                    for part in s.split(',') {
                        if let Some(i) = self.find(part) {
                            mask |= 1 << i;
                        }
                    }
                }
                i64::try_from(mask).map_or(Value::UInt(mask), Value::Int)
            }
        }
    }
}

fn eq(a: &str, b: &str, ci: bool) -> bool {
    if ci {
        a.to_lowercase() == b.to_lowercase()
    } else {
        a == b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn color() -> EnumSet {
        EnumSet::declare(Kind::Enum, vec!["red".into(), "green ".into(), "it's".into()], true, "c").unwrap()
    }

    #[test]
    fn declare_strips_trailing_spaces_and_refuses_duplicates() {
        assert_eq!(color().members, vec!["red", "green", "it's"]);
        let e = EnumSet::declare(Kind::Enum, vec!["a".into(), "A".into()], true, "c").unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (1291, "Column 'c' has duplicated value 'A' in ENUM"));
        assert!(EnumSet::declare(Kind::Enum, vec!["a".into(), "A".into()], false, "c").is_ok());
        assert_eq!(EnumSet::declare(Kind::Set, vec!["a,b".into()], true, "c").unwrap_err().code, 1367);
        let many: Vec<String> = (0..65).map(|i| i.to_string()).collect();
        assert_eq!(EnumSet::declare(Kind::Set, many, true, "c").unwrap_err().code, 1097);
    }

    #[test]
    fn sql_type_roundtrips() {
        let c = color();
        assert_eq!(c.sql_type(), "enum('red','green','it''s')");
        assert_eq!(EnumSet::parse_sql_type(&c.sql_type(), true), Some(c));
        assert_eq!(EnumSet::parse_sql_type("varchar(3)", true), None);
        assert_eq!(EnumSet::parse_sql_type("enum('a'", true), None);
        assert_eq!(EnumSet::parse_sql_type("set('a','b')", true).unwrap().kind, Kind::Set);
    }

    #[test]
    fn enum_store_and_number() {
        let c = color();
        assert_eq!(c.store(&Value::str("RED "), "c", 1).unwrap(), Value::str("red"));
        assert_eq!(c.store(&Value::Int(2), "c", 1).unwrap(), Value::str("green"));
        assert_eq!(c.store(&Value::str("3"), "c", 1).unwrap(), Value::str("it's"));
        for bad in [Value::str(""), Value::str("blue"), Value::Int(0), Value::Int(4), Value::Int(-1)] {
            assert_eq!(c.store(&bad, "c", 2).unwrap_err().message, "Data truncated for column 'c' at row 2");
        }
        assert_eq!(c.number(&Value::str("green")), Value::Int(2));
        assert_eq!(c.number(&Value::str("")), Value::Int(0));
        assert_eq!(c.number(&Value::Null), Value::Null);
    }

    #[test]
    fn set_store_and_number() {
        let s = EnumSet::declare(Kind::Set, vec!["a".into(), "b".into(), "c".into()], true, "s").unwrap();
        assert_eq!(s.store(&Value::str("c,A,c"), "s", 1).unwrap(), Value::str("a,c"));
        assert_eq!(s.store(&Value::str(""), "s", 1).unwrap(), Value::str(""));
        assert_eq!(s.store(&Value::Int(6), "s", 1).unwrap(), Value::str("b,c"));
        assert_eq!(s.store(&Value::Int(8), "s", 1).unwrap_err().code, 1265);
        assert_eq!(s.store(&Value::str("a,d"), "s", 1).unwrap_err().code, 1265);
        assert_eq!(s.number(&Value::str("a,c")), Value::Int(5));
        assert_eq!(s.max_chars(), 5);
    }
}
