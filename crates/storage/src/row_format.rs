//! Row format: how a row's values are laid out in its fixed-size slot and in its
//! variable-size part.
//!
//! Fixed slot (one per row, all slots of a table have the same size):
//!
//! ```text
//! +-------------+----------------------------+------------------+
//! | null bitmap | fixed-width columns        | var ref (6 bytes)|
//! | ceil(n/8) B | in column order, LE        | only if the table|
//! | bit i = col | widths: see FixedKind      | has var columns  |
//! | i is NULL   |                            |                  |
//! +-------------+----------------------------+------------------+
//! ```
//!
//! Fixed-width columns: integers in their declared width (TINYINT 1 .. BIGINT 8,
//! MEDIUMINT 3), FLOAT 4, DOUBLE 8, DECIMAL 8 bytes (precision <= 18) or 16 bytes
//! (mantissa at the column scale), BINARY(n) n bytes, DATE 4, DATETIME/TIMESTAMP
//! 11, TIME 8. A NULL fixed column keeps its (zeroed) bytes.
//!
//! Variable part (CHAR, VARCHAR, VARBINARY, TEXT, BLOB): one chunk per row in the
//! partition's `VarStore`, holding for each non-NULL var column, in column order,
//! a LEB128 length followed by the bytes. CHAR is stored here too: a utf8mb4
//! CHAR(n) may take 1..4n bytes, and reserving 4n bytes per row in the fixed part
//! would waste most of it for ASCII data (NDB does reserve it; we prefer the
//! memory). A row whose var columns are all NULL has no chunk.

use crate::var_storage::VarRef;
use norr_signals::value::{ColumnType, Date, DateTime, Decimal, Value};
use norr_signals::TableDef;

/// Width of the var ref in a fixed slot.
pub const VAR_REF_BYTES: usize = 6;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FixedKind {
    Int(u8),
    UInt(u8),
    F32,
    F64,
    Dec { bytes: u8, scale: u8 },
    Bin(u32),
    Date,
    DateTime,
    Time,
}

impl FixedKind {
    fn width(self) -> usize {
        match self {
            FixedKind::Int(w) | FixedKind::UInt(w) => w as usize,
            FixedKind::F32 | FixedKind::Date => 4,
            FixedKind::F64 | FixedKind::Time => 8,
            FixedKind::Dec { bytes, .. } => bytes as usize,
            FixedKind::Bin(n) => n as usize,
            FixedKind::DateTime => 11,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColLoc {
    Fixed {
        off: u32,
        kind: FixedKind,
    },
    /// Index among the var columns.
    Var(u16),
}

/// Where each column of a table lives.
#[derive(Debug, Clone)]
pub struct RowLayout {
    pub cols: Vec<ColLoc>,
    /// Offset of the var ref, if the table has var columns.
    pub var_ref_off: Option<usize>,
    pub var_cols: usize,
    /// Bytes of a fixed slot (at least 4: a free slot holds the free-list link).
    pub slot_size: usize,
    /// Column ids of the var columns, in var order.
    pub var_col_ids: Vec<usize>,
}

fn int_width(ty: &ColumnType) -> Option<u8> {
    Some(match ty {
        ColumnType::TinyInt { .. } => 1,
        ColumnType::SmallInt { .. } => 2,
        ColumnType::MediumInt { .. } => 3,
        ColumnType::Int { .. } => 4,
        ColumnType::BigInt { .. } => 8,
        _ => return None,
    })
}

impl RowLayout {
    pub fn new(def: &TableDef) -> RowLayout {
        let n = def.columns.len();
        let null_bytes = n.div_ceil(8);
        let mut off = null_bytes;
        let mut cols = Vec::with_capacity(n);
        let mut var_col_ids = Vec::new();
        for (i, c) in def.columns.iter().enumerate() {
            let kind = if let Some(w) = int_width(&c.ty) {
                if c.ty.is_unsigned_int() {
                    FixedKind::UInt(w)
                } else {
                    FixedKind::Int(w)
                }
            } else {
                match &c.ty {
                    ColumnType::Float => FixedKind::F32,
                    ColumnType::Double => FixedKind::F64,
                    ColumnType::Decimal { precision, scale } => {
                        FixedKind::Dec { bytes: if *precision <= 18 { 8 } else { 16 }, scale: *scale }
                    }
                    ColumnType::Binary { len } => FixedKind::Bin(*len),
                    ColumnType::Date => FixedKind::Date,
                    ColumnType::DateTime | ColumnType::Timestamp => FixedKind::DateTime,
                    ColumnType::Time => FixedKind::Time,
                    _ => {
                        cols.push(ColLoc::Var(var_col_ids.len() as u16));
                        var_col_ids.push(i);
                        continue;
                    }
                }
            };
            cols.push(ColLoc::Fixed { off: off as u32, kind });
            off += kind.width();
        }
        let var_ref_off = if var_col_ids.is_empty() {
            None
        } else {
            off += VAR_REF_BYTES;
            Some(off - VAR_REF_BYTES)
        };
        RowLayout { cols, var_ref_off, var_cols: var_col_ids.len(), slot_size: off.max(4), var_col_ids }
    }

    pub fn is_null(&self, slot: &[u8], col: usize) -> bool {
        slot[col / 8] & (1 << (col % 8)) != 0
    }

    /// Write the fixed part of `row` into `slot` (all of it). The var ref is
    /// left zero: the caller sets it.
    pub fn write_fixed(&self, row: &[Value], slot: &mut [u8]) {
        debug_assert_eq!(slot.len(), self.slot_size);
        debug_assert_eq!(row.len(), self.cols.len());
        slot.fill(0);
        for (i, (v, loc)) in row.iter().zip(&self.cols).enumerate() {
            if v.is_null() {
                slot[i / 8] |= 1 << (i % 8);
                continue;
            }
            if let ColLoc::Fixed { off, kind } = loc {
                let off = *off as usize;
                write_fixed_value(&mut slot[off..off + kind.width()], *kind, v);
            }
        }
    }

    /// The var chunk payload of `row` (empty if every var column is NULL).
    pub fn var_payload(&self, row: &[Value]) -> Vec<u8> {
        // Sized once: a length prefix is at most 10 bytes (most are 1-2).
        let len: usize = self.var_col_ids.iter().map(|&c| row[c].as_bytes().map_or(0, |b| b.len() + 10)).sum();
        let mut out = Vec::with_capacity(len);
        for &c in &self.var_col_ids {
            if let Value::Bytes(b) = &row[c] {
                put_varint(&mut out, b.len() as u64);
                out.extend_from_slice(b);
            } else {
                assert!(row[c].is_null(), "var column {c} holds a non-bytes value {:?}", row[c]);
            }
        }
        out
    }

    pub fn var_ref(&self, slot: &[u8]) -> Option<VarRef> {
        self.var_ref_off.map(|o| VarRef::decode(&slot[o..o + VAR_REF_BYTES]))
    }

    pub fn set_var_ref(&self, slot: &mut [u8], r: VarRef) {
        let o = self.var_ref_off.expect("table has var columns");
        r.encode(&mut slot[o..o + VAR_REF_BYTES]);
    }

    /// Decode column `col` from a slot and its var payload.
    pub fn read_col(&self, slot: &[u8], payload: &[u8], col: usize) -> Value {
        if self.is_null(slot, col) {
            return Value::Null;
        }
        match self.cols[col] {
            ColLoc::Fixed { off, kind } => {
                let off = off as usize;
                read_fixed_value(&slot[off..off + kind.width()], kind)
            }
            ColLoc::Var(k) => {
                let mut pos = 0;
                for &c in &self.var_col_ids[..k as usize] {
                    if !self.is_null(slot, c) {
                        let (len, n) = get_varint(&payload[pos..]);
                        pos += n + len as usize;
                    }
                }
                let (len, n) = get_varint(&payload[pos..]);
                Value::Bytes(payload[pos + n..pos + n + len as usize].to_vec())
            }
        }
    }

    /// Append the memcomparable key encoding (`keycode::encode_value`) of
    /// column `col` of a stored row, of type `ty`. Integer columns (the usual
    /// primary key) are encoded straight from the slot bytes; ordered scans
    /// and the primary-key order do this for every row they pass.
    pub fn encode_key_col(&self, slot: &[u8], payload: &[u8], col: usize, ty: &ColumnType, out: &mut Vec<u8>) {
        if let Some(ic) = self.int_key_col(col) {
            ic.put(slot, out);
            return;
        }
        norr_signals::keycode::encode_value(out, &self.read_col(slot, payload, col), ty);
    }

    /// Where column `col` sits if it is a fixed-width integer column, for
    /// encoding its key straight from slot bytes (`IntKeyCol::put`).
    pub fn int_key_col(&self, col: usize) -> Option<IntKeyCol> {
        match self.cols[col] {
            ColLoc::Fixed { off, kind: FixedKind::Int(w) } => Some(IntKeyCol::new(col, off as usize, w as usize, true)),
            ColLoc::Fixed { off, kind: FixedKind::UInt(w) } => {
                Some(IntKeyCol::new(col, off as usize, w as usize, false))
            }
            _ => None,
        }
    }

    /// Decode the whole row.
    pub fn read_row(&self, slot: &[u8], payload: &[u8], out: &mut Vec<Value>) {
        out.reserve(self.cols.len());
        let mut pos = 0;
        for (i, loc) in self.cols.iter().enumerate() {
            if self.is_null(slot, i) {
                out.push(Value::Null);
                continue;
            }
            match *loc {
                ColLoc::Fixed { off, kind } => {
                    let off = off as usize;
                    out.push(read_fixed_value(&slot[off..off + kind.width()], kind));
                }
                ColLoc::Var(_) => {
                    let (len, n) = get_varint(&payload[pos..]);
                    let start = pos + n;
                    pos = start + len as usize;
                    out.push(Value::Bytes(payload[start..pos].to_vec()));
                }
            }
        }
        debug_assert_eq!(pos, payload.len(), "var payload not fully consumed");
    }

    /// Decode the columns `mask` selects (indexed by column id); the others
    /// read as NULL without being decoded. Scans use it to skip the columns
    /// neither the filter, the key nor the projection looks at (a string
    /// column not read costs no allocation).
    pub fn read_row_masked(&self, slot: &[u8], payload: &[u8], mask: &[bool], out: &mut Vec<Value>) {
        out.reserve(self.cols.len());
        let mut pos = 0;
        for (i, loc) in self.cols.iter().enumerate() {
            let wanted = mask.get(i).copied().unwrap_or(false);
            if self.is_null(slot, i) {
                out.push(Value::Null);
                continue;
            }
            match *loc {
                ColLoc::Fixed { off, kind } if wanted => {
                    let off = off as usize;
                    out.push(read_fixed_value(&slot[off..off + kind.width()], kind));
                }
                ColLoc::Fixed { .. } => out.push(Value::Null),
                ColLoc::Var(_) => {
                    // Skipped or not, the payload position moves past it.
                    let (len, n) = get_varint(&payload[pos..]);
                    let start = pos + n;
                    pos = start + len as usize;
                    out.push(if wanted { Value::Bytes(payload[start..pos].to_vec()) } else { Value::Null });
                }
            }
        }
        debug_assert_eq!(pos, payload.len(), "var payload not fully consumed");
    }

    /// Bytes of the row's own data, as counted by the memory overhead figure:
    /// fixed-width column widths plus the bytes of var values.
    pub fn data_bytes(&self, row: &[Value]) -> usize {
        row.iter()
            .zip(&self.cols)
            .map(|(v, loc)| match (v, loc) {
                (Value::Null, _) => 0,
                (_, ColLoc::Fixed { kind, .. }) => kind.width(),
                (Value::Bytes(b), ColLoc::Var(_)) => b.len(),
                _ => 0,
            })
            .sum()
    }
}

/// A fixed-width integer key column's place in the slot: its key encoding
/// (`keycode::encode_value`) is built from these bytes with no type dispatch
/// and no decoded `Value`. Primary keys are usually such columns, and the
/// primary-key order, hash lookups and pk range scans encode them per row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntKeyCol {
    pub col: usize,
    off: usize,
    width: usize,
    signed: bool,
    /// 64 - 8 * width: shifting the 8 bytes read at `off` up by this and
    /// back down keeps the column's own bytes (sign-extended if signed).
    shift: u32,
}

impl IntKeyCol {
    fn new(col: usize, off: usize, width: usize, signed: bool) -> IntKeyCol {
        IntKeyCol { col, off, width, signed, shift: 64 - 8 * width as u32 }
    }

    /// Append the column's key encoding: 0x00 for NULL, else 0x01 and the
    /// value as a big-endian u64 (signed: sign-extended, sign bit flipped).
    #[inline]
    pub fn put(&self, slot: &[u8], out: &mut Vec<u8>) {
        let Some(key) = self.key(slot) else {
            out.push(0x00);
            return;
        };
        let mut enc = [0x01u8; 9];
        enc[1..].copy_from_slice(&key.to_be_bytes());
        out.extend_from_slice(&enc);
    }

    /// The value as its key encoding orders it (the big-endian u64 after
    /// `put`'s 0x01), None if it is NULL.
    #[inline]
    pub fn key(&self, slot: &[u8]) -> Option<u64> {
        if slot[self.col / 8] & (1 << (self.col % 8)) != 0 {
            return None;
        }
        // Eight bytes at once where the slot has them (the bytes past the
        // column are shifted out), so no per-width dispatch.
        let raw = match slot.get(self.off..self.off + 8) {
            Some(b) => u64::from_le_bytes(b.try_into().expect("8 bytes")),
            None => read_int64(&slot[self.off..self.off + self.width], false),
        };
        let up = raw << self.shift;
        Some(if self.signed { (((up as i64) >> self.shift) as u64) ^ (1 << 63) } else { up >> self.shift })
    }
}

/// A little-endian integer of 1..=8 bytes as a u64, sign-extended if
/// `signed` (the common widths without a variable-length copy).
#[inline]
fn read_int64(src: &[u8], signed: bool) -> u64 {
    let w = src.len();
    let raw = match src {
        [a] => *a as u64,
        [a, b] => u16::from_le_bytes([*a, *b]) as u64,
        [a, b, c, d] => u32::from_le_bytes([*a, *b, *c, *d]) as u64,
        [a, b, c, d, e, f, g, h] => u64::from_le_bytes([*a, *b, *c, *d, *e, *f, *g, *h]),
        _ => {
            let mut b = [0u8; 8];
            b[..w].copy_from_slice(src);
            u64::from_le_bytes(b)
        }
    };
    if signed {
        let shift = 64 - 8 * w as u32;
        (((raw << shift) as i64) >> shift) as u64
    } else {
        raw
    }
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Returns (value, bytes consumed).
pub(crate) fn get_varint(b: &[u8]) -> (u64, usize) {
    let mut v = 0u64;
    for (i, &byte) in b.iter().enumerate().take(10) {
        v |= ((byte & 0x7f) as u64) << (7 * i);
        if byte & 0x80 == 0 {
            return (v, i + 1);
        }
    }
    panic!("corrupt varint in var payload");
}

fn write_int(dst: &mut [u8], v: i128) {
    let bytes = v.to_le_bytes();
    let w = dst.len();
    dst.copy_from_slice(&bytes[..w]);
}

fn read_int(src: &[u8], signed: bool) -> i128 {
    let mut bytes = [0u8; 16];
    bytes[..src.len()].copy_from_slice(src);
    if signed && src[src.len() - 1] & 0x80 != 0 {
        for b in &mut bytes[src.len()..] {
            *b = 0xff;
        }
    }
    i128::from_le_bytes(bytes)
}

fn write_date(dst: &mut [u8], d: &Date) {
    dst[0..2].copy_from_slice(&d.year.to_le_bytes());
    dst[2] = d.month;
    dst[3] = d.day;
}

fn read_date(src: &[u8]) -> Date {
    Date { year: u16::from_le_bytes([src[0], src[1]]), month: src[2], day: src[3] }
}

fn write_fixed_value(dst: &mut [u8], kind: FixedKind, v: &Value) {
    match (kind, v) {
        (FixedKind::Int(_) | FixedKind::UInt(_), Value::Int(i)) => write_int(dst, *i as i128),
        (FixedKind::Int(_) | FixedKind::UInt(_), Value::UInt(u)) => write_int(dst, *u as i128),
        (FixedKind::F32, Value::Float(f)) => dst.copy_from_slice(&f.to_le_bytes()),
        (FixedKind::F64, Value::Double(f)) => dst.copy_from_slice(&f.to_le_bytes()),
        (FixedKind::Dec { scale, .. }, Value::Decimal(d)) => {
            assert_eq!(d.scale, scale, "decimal not coerced to the column scale");
            write_int(dst, d.mantissa)
        }
        (FixedKind::Bin(n), Value::Bytes(b)) => {
            assert_eq!(b.len(), n as usize, "BINARY value not padded");
            dst.copy_from_slice(b)
        }
        (FixedKind::Date, Value::Date(d)) => write_date(dst, d),
        (FixedKind::DateTime, Value::DateTime(dt)) => {
            write_date(&mut dst[0..4], &dt.date);
            dst[4] = dt.hour;
            dst[5] = dt.minute;
            dst[6] = dt.second;
            dst[7..11].copy_from_slice(&dt.micro.to_le_bytes());
        }
        (FixedKind::Time, Value::Time(t)) => dst.copy_from_slice(&t.to_le_bytes()),
        (k, v) => panic!("value {v:?} does not fit fixed column kind {k:?}; row not coerced"),
    }
}

fn read_fixed_value(src: &[u8], kind: FixedKind) -> Value {
    match kind {
        FixedKind::Int(_) => Value::Int(read_int64(src, true) as i64),
        FixedKind::UInt(_) => Value::UInt(read_int64(src, false)),
        FixedKind::F32 => Value::Float(f32::from_le_bytes(src.try_into().expect("4 bytes"))),
        FixedKind::F64 => Value::Double(f64::from_le_bytes(src.try_into().expect("8 bytes"))),
        FixedKind::Dec { scale, .. } => Value::Decimal(Decimal { mantissa: read_int(src, true), scale }),
        FixedKind::Bin(_) => Value::Bytes(src.to_vec()),
        FixedKind::Date => Value::Date(read_date(src)),
        FixedKind::DateTime => Value::DateTime(DateTime {
            date: read_date(&src[0..4]),
            hour: src[4],
            minute: src[5],
            second: src[6],
            micro: u32::from_le_bytes(src[7..11].try_into().expect("4 bytes")),
        }),
        FixedKind::Time => Value::Time(i64::from_le_bytes(src.try_into().expect("8 bytes"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints() {
        for v in [0u64, 1, 127, 128, 300, 1 << 20, 4 << 20, u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(get_varint(&b), (v, b.len()));
        }
    }

    /// The slot-level key encoding of integer columns is the encoding of the
    /// decoded value, in every width, signed and unsigned, NULL included.
    #[test]
    fn key_encoding_from_the_slot_matches_encode_value() {
        let mut types = Vec::new();
        for unsigned in [false, true] {
            types.push(ColumnType::TinyInt { unsigned });
            types.push(ColumnType::SmallInt { unsigned });
            types.push(ColumnType::MediumInt { unsigned });
            types.push(ColumnType::Int { unsigned });
            types.push(ColumnType::BigInt { unsigned });
        }
        // Alone in a table, a column ends a short slot: fewer than eight
        // bytes follow its offset.
        for t in &types {
            check_key_encoding(std::slice::from_ref(t));
        }
        types.push(ColumnType::Varchar { len: 10, collation: Default::default() });
        check_key_encoding(&types);
    }

    fn check_key_encoding(types: &[ColumnType]) {
        use norr_signals::keycode::encode_value;
        use norr_signals::schema::ColumnDef;
        let def = TableDef {
            id: 1,
            version: 1,
            name: "t".into(),
            columns: types.iter().enumerate().map(|(i, t)| ColumnDef::new(&format!("c{i}"), t.clone())).collect(),
            primary_key: vec![0],
            partitioning: norr_signals::PartitionScheme::Key { columns: Vec::new() },
            partitions: 1,
            indexes: Vec::new(),
            extra: Vec::new(),
            options: Default::default(),
        };
        let layout = RowLayout::new(&def);
        let samples = [i64::MIN, -(1 << 23), -129, -128, -1, 0, 1, 127, 128, 255, 65_535, (1 << 24) - 1, i64::MAX];
        for s in samples {
            let row: Vec<Value> = types
                .iter()
                .map(|t| match (t.int_range(), t.is_unsigned_int()) {
                    (Some((lo, hi)), false) => Value::Int((s as i128).clamp(lo, hi) as i64),
                    (Some((lo, hi)), true) => Value::UInt((s as i128).clamp(lo, hi) as u64),
                    _ if s == 0 => Value::Null,
                    _ => Value::Bytes(b"Ab".to_vec()),
                })
                .collect();
            let mut slot = vec![0u8; layout.slot_size];
            layout.write_fixed(&row, &mut slot);
            let payload = layout.var_payload(&row);
            for (c, t) in types.iter().enumerate() {
                let (mut want, mut got) = (Vec::new(), Vec::new());
                encode_value(&mut want, &row[c], t);
                layout.encode_key_col(&slot, &payload, c, t, &mut got);
                assert_eq!(got, want, "column {c} ({t:?}), sample {s}");
                // Decoding reads back the value written, at every width's edges.
                assert_eq!(layout.read_col(&slot, &payload, c), row[c], "read column {c} ({t:?}), sample {s}");
            }
        }
        // NULL integers too.
        let row = vec![Value::Null; types.len()];
        let mut slot = vec![0u8; layout.slot_size];
        layout.write_fixed(&row, &mut slot);
        for (c, t) in types.iter().enumerate() {
            let mut got = Vec::new();
            layout.encode_key_col(&slot, &[], c, t, &mut got);
            assert_eq!(got, vec![0x00]);
        }
    }

    #[test]
    fn ints_roundtrip_in_every_width() {
        for w in [1usize, 2, 3, 4, 8] {
            let max = (1i128 << (8 * w - 1)) - 1;
            for v in [-max - 1, -1, 0, 1, max] {
                let mut b = vec![0u8; w];
                write_int(&mut b, v);
                assert_eq!(read_int(&b, true), v);
            }
            let umax = (1i128 << (8 * w)) - 1;
            let mut b = vec![0u8; w];
            write_int(&mut b, umax);
            assert_eq!(read_int(&b, false), umax);
        }
    }
}
