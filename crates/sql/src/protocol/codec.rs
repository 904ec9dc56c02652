//! Byte-level encoding of server packets (OK, ERR, EOF, column definitions)
//! and a bounds-checked reader for client packets. Every read returns `None`
//! on short input instead of panicking: client bytes are untrusted.

use crate::types::{ColumnMeta, SqlError};

/// Server status flags (`SERVER_STATUS_*` in mysql_com.h).
pub mod status {
    pub const IN_TRANS: u16 = 0x0001;
    pub const AUTOCOMMIT: u16 = 0x0002;
    pub const MORE_RESULTS_EXISTS: u16 = 0x0008;
}

pub fn put_lenenc_int(buf: &mut Vec<u8>, v: u64) {
    if v < 251 {
        buf.push(v as u8);
    } else if v < (1 << 16) {
        buf.push(0xfc);
        buf.extend_from_slice(&(v as u16).to_le_bytes());
    } else if v < (1 << 24) {
        buf.push(0xfd);
        buf.extend_from_slice(&(v as u32).to_le_bytes()[..3]);
    } else {
        buf.push(0xfe);
        buf.extend_from_slice(&v.to_le_bytes());
    }
}

pub fn put_lenenc_str(buf: &mut Vec<u8>, s: &[u8]) {
    put_lenenc_int(buf, s.len() as u64);
    buf.extend_from_slice(s);
}

/// OK packet (header 0x00), or the 0xFE-headed OK that ends a result set
/// when CLIENT_DEPRECATE_EOF is on.
pub fn ok_packet(
    header: u8,
    affected_rows: u64,
    last_insert_id: u64,
    status_flags: u16,
    warnings: u16,
    info: &str,
) -> Vec<u8> {
    let mut b = Vec::with_capacity(16 + info.len());
    b.push(header);
    put_lenenc_int(&mut b, affected_rows);
    put_lenenc_int(&mut b, last_insert_id);
    b.extend_from_slice(&status_flags.to_le_bytes());
    b.extend_from_slice(&warnings.to_le_bytes());
    // The manual says string<EOF>, but mysqld (net_send_ok) writes a
    // length-encoded string, and clients (mysql_common, libmysql) parse that.
    if !info.is_empty() {
        put_lenenc_str(&mut b, info.as_bytes());
    }
    b
}

/// EOF packet (for clients without CLIENT_DEPRECATE_EOF).
/// A fixed-size array, not a Vec: two are sent per result set.
pub fn eof_packet(status_flags: u16, warnings: u16) -> [u8; 5] {
    let [w0, w1] = warnings.to_le_bytes();
    let [s0, s1] = status_flags.to_le_bytes();
    [0xfe, w0, w1, s0, s1]
}

/// ERR packet with SQLSTATE marker (CLIENT_PROTOCOL_41).
pub fn err_packet(e: &SqlError) -> Vec<u8> {
    let mut b = Vec::with_capacity(9 + e.message.len());
    b.push(0xff);
    b.extend_from_slice(&e.code.to_le_bytes());
    b.push(b'#');
    let st = e.sqlstate.as_bytes();
    // A SQLSTATE is exactly 5 characters; pad/truncate defensively.
    for i in 0..5 {
        b.push(*st.get(i).unwrap_or(&b'0'));
    }
    // MySQL caps error messages at MYSQL_ERRMSG_SIZE (512).
    let msg = e.message.as_bytes();
    let mut n = msg.len().min(512);
    while n < msg.len() && !e.message.is_char_boundary(n) {
        n -= 1;
    }
    b.extend_from_slice(&msg[..n]);
    b
}

/// ERR packet sent before the client said it speaks protocol 4.1 (refused
/// before the handshake): no SQLSTATE marker, which such a client would read
/// as part of the message. MySQL does the same for "Too many connections";
/// clients then report SQLSTATE HY000.
pub fn err_packet_pre41(e: &SqlError) -> Vec<u8> {
    let mut b = err_packet(e);
    b.drain(3..9);
    b
}

/// Column definition (Protocol::ColumnDefinition41). `field_list_default`
/// adds the trailing "default value" field COM_FIELD_LIST answers carry.
pub fn column_def(c: &ColumnMeta, field_list_default: bool) -> Vec<u8> {
    let mut b = Vec::with_capacity(64);
    put_column_def(&mut b, c, field_list_default);
    b
}

/// Appends a column definition packet's payload (see `column_def`).
pub fn put_column_def(b: &mut Vec<u8>, c: &ColumnMeta, field_list_default: bool) {
    put_lenenc_str(b, b"def");
    put_lenenc_str(b, c.schema.as_bytes());
    put_lenenc_str(b, c.table.as_bytes());
    put_lenenc_str(b, c.org_table.as_bytes());
    put_lenenc_str(b, c.name.as_bytes());
    put_lenenc_str(b, c.org_name.as_bytes());
    b.push(0x0c);
    b.extend_from_slice(&c.charset.to_le_bytes());
    b.extend_from_slice(&c.column_length.to_le_bytes());
    b.push(c.field_type as u8);
    b.extend_from_slice(&c.flags.to_le_bytes());
    b.push(c.decimals);
    b.extend_from_slice(&[0, 0]);
    if field_list_default {
        b.push(0xfb);
    }
}

/// Bounds-checked reader over a client payload.
pub struct Reader<'a> {
    pub buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.buf.len() < n {
            return None;
        }
        let (a, b) = self.buf.split_at(n);
        self.buf = b;
        Some(a)
    }
    pub fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    pub fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }
    pub fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub fn u64(&mut self) -> Option<u64> {
        self.take(8).map(|b| {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            u64::from_le_bytes(a)
        })
    }
    pub fn lenenc_int(&mut self) -> Option<u64> {
        match self.u8()? {
            x @ 0..=250 => Some(x as u64),
            0xfc => self.u16().map(|v| v as u64),
            0xfd => self.take(3).map(|b| u32::from_le_bytes([b[0], b[1], b[2], 0]) as u64),
            0xfe => self.u64(),
            _ => None, // 0xfb (NULL) and 0xff are not lengths
        }
    }
    pub fn lenenc_str(&mut self) -> Option<&'a [u8]> {
        let n = self.lenenc_int()?;
        let n = usize::try_from(n).ok()?;
        self.take(n)
    }
    /// Bytes up to a NUL (consumed), or up to the end if there is none.
    pub fn null_str(&mut self) -> &'a [u8] {
        match self.buf.iter().position(|&b| b == 0) {
            Some(i) => {
                let s = &self.buf[..i];
                self.buf = &self.buf[i + 1..];
                s
            }
            None => {
                let s = self.buf;
                self.buf = &[];
                s
            }
        }
    }
    pub fn rest(&mut self) -> &'a [u8] {
        let s = self.buf;
        self.buf = &[];
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenenc_round_trip() {
        for v in [0u64, 250, 251, 65535, 65536, (1 << 24) - 1, 1 << 24, u64::MAX] {
            let mut b = Vec::new();
            put_lenenc_int(&mut b, v);
            assert_eq!(Reader::new(&b).lenenc_int(), Some(v));
        }
        assert_eq!(Reader::new(&[0xfc, 1]).lenenc_int(), None);
        assert_eq!(Reader::new(&[0xfb]).lenenc_int(), None);
    }

    #[test]
    fn err_packet_pre41_has_no_sqlstate() {
        let e = SqlError::new(1040, "08004", "Too many connections");
        assert_eq!(err_packet_pre41(&e), [&[0xff, 0x10, 0x04][..], b"Too many connections"].concat());
    }

    #[test]
    fn err_packet_layout() {
        let p = err_packet(&SqlError::new(1045, "28000", "Access denied"));
        assert_eq!(&p[..9], &[0xff, 0x15, 0x04, b'#', b'2', b'8', b'0', b'0', b'0']);
    }
}
