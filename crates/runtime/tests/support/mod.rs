//! Helpers the raw-protocol tests of this crate share (each test file
//! includes this module with `mod support;`).

use norr_transport::FrameDecoder;
use std::io::Read;
use std::net::TcpStream;

/// The next whole frame from `s` (bytes `dec` holds first); None once the
/// peer closed the connection or the read failed (a read timeout too).
pub fn read_frame(s: &mut TcpStream, dec: &mut FrameDecoder) -> Option<Vec<u8>> {
    let mut buf = [0u8; 65536];
    loop {
        if let Some(f) = dec.next_frame().unwrap() {
            return Some(f.to_vec());
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => dec.push(&buf[..n]),
        }
    }
}
