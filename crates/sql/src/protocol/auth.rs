//! Authentication: the handshake v10 greeting, `mysql_native_password` and
//! `caching_sha2_password`.
//!
//! The server knows every account's plaintext password (from configuration),
//! so it computes the expected scramble for either plugin itself: a
//! `caching_sha2_password` client is always answered with fast-auth-success
//! (0x01 0x03) and never needs the RSA key exchange or TLS of a full
//! authentication. A client that starts with a plugin the account does not
//! use (or one we do not know) gets an AuthSwitchRequest.

use mysql_common::scramble::{scramble_native, scramble_sha256};

pub const NATIVE: &str = "mysql_native_password";
pub const CACHING_SHA2: &str = "caching_sha2_password";

/// Length of the random challenge, as MySQL.
pub const NONCE_BYTES: usize = 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthPlugin {
    Native,
    CachingSha2,
}

impl AuthPlugin {
    pub fn name(self) -> &'static str {
        match self {
            AuthPlugin::Native => NATIVE,
            AuthPlugin::CachingSha2 => CACHING_SHA2,
        }
    }
    pub fn from_name(name: &str) -> Option<AuthPlugin> {
        match name {
            NATIVE => Some(AuthPlugin::Native),
            CACHING_SHA2 => Some(AuthPlugin::CachingSha2),
            _ => None,
        }
    }
}

/// A fresh challenge: printable ASCII without NUL or '$' (as MySQL), from the
/// OS random source.
pub fn new_nonce() -> [u8; NONCE_BYTES] {
    let mut raw = [0u8; NONCE_BYTES];
    if getrandom::fill(&mut raw).is_err() {
        // No OS randomness: fall back to a per-process hasher seed mixed with
        // the time. Weaker, but the server must keep serving.
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0),
        );
        let mut x = h.finish();
        for b in raw.iter_mut() {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            *b = (x >> 33) as u8;
        }
    }
    for b in raw.iter_mut() {
        // Map into 0x21..=0x7e minus '$'.
        let mut c = 0x21 + (*b % 94);
        if c == b'$' {
            c = b'%';
        }
        *b = c;
    }
    raw
}

/// True if `response` is what a client knowing `password` sends for `nonce`.
/// An empty password expects an empty response (some clients send one NUL).
pub fn verify(plugin: AuthPlugin, nonce: &[u8], password: &str, response: &[u8]) -> bool {
    if password.is_empty() {
        return response.is_empty() || response == [0];
    }
    // Some clients append a NUL to the scramble.
    let response = match plugin {
        AuthPlugin::Native if response.len() == 21 && response[20] == 0 => &response[..20],
        AuthPlugin::CachingSha2 if response.len() == 33 && response[32] == 0 => &response[..32],
        _ => response,
    };
    let expected: Option<Vec<u8>> = match plugin {
        AuthPlugin::Native => scramble_native(nonce, password.as_bytes()).map(|x| x.to_vec()),
        AuthPlugin::CachingSha2 => scramble_sha256(nonce, password.as_bytes()).map(|x| x.to_vec()),
    };
    match expected {
        // Constant-time compare: do not leak how many bytes matched.
        Some(e) => e.len() == response.len() && e.iter().zip(response).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0,
        None => false,
    }
}

/// The Protocol::HandshakeV10 greeting. `mariadb_capabilities` are MariaDB's
/// extended capability bits (the upper half of its 64-bit flags); MariaDB
/// clients read them from the last 4 reserved bytes when `capabilities` lacks
/// CLIENT_MYSQL (bit 0). MySQL clients ignore the reserved bytes.
pub fn handshake_packet(
    server_version: &str,
    connection_id: u32,
    nonce: &[u8; NONCE_BYTES],
    capabilities: u32,
    mariadb_capabilities: u32,
    status_flags: u16,
    plugin: AuthPlugin,
) -> Vec<u8> {
    let mut b = Vec::with_capacity(128);
    b.push(10);
    b.extend_from_slice(server_version.as_bytes());
    b.push(0);
    b.extend_from_slice(&connection_id.to_le_bytes());
    b.extend_from_slice(&nonce[..8]);
    b.push(0);
    b.extend_from_slice(&(capabilities as u16).to_le_bytes());
    b.push(255); // utf8mb4_0900_ai_ci
    b.extend_from_slice(&status_flags.to_le_bytes());
    b.extend_from_slice(&((capabilities >> 16) as u16).to_le_bytes());
    b.push((NONCE_BYTES + 1) as u8);
    b.extend_from_slice(&[0u8; 6]);
    b.extend_from_slice(&mariadb_capabilities.to_le_bytes());
    b.extend_from_slice(&nonce[8..]);
    b.push(0);
    b.extend_from_slice(plugin.name().as_bytes());
    b.push(0);
    b
}

/// Protocol::AuthSwitchRequest.
pub fn auth_switch_packet(plugin: AuthPlugin, nonce: &[u8; NONCE_BYTES]) -> Vec<u8> {
    let mut b = vec![0xfe];
    b.extend_from_slice(plugin.name().as_bytes());
    b.push(0);
    b.extend_from_slice(nonce);
    b.push(0);
    b
}

/// caching_sha2_password "fast auth success" (AuthMoreData 0x03).
pub const FAST_AUTH_SUCCESS: [u8; 2] = [0x01, 0x03];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonce_is_printable() {
        for _ in 0..100 {
            let n = new_nonce();
            assert!(n.iter().all(|&c| (0x21..=0x7e).contains(&c) && c != b'$'));
        }
    }

    #[test]
    fn verify_both_plugins() {
        let n = new_nonce();
        let r = scramble_native(&n, b"pw").unwrap();
        assert!(verify(AuthPlugin::Native, &n, "pw", &r));
        assert!(!verify(AuthPlugin::Native, &n, "px", &r));
        assert!(!verify(AuthPlugin::CachingSha2, &n, "pw", &r));
        let r = scramble_sha256(&n, b"pw").unwrap();
        assert!(verify(AuthPlugin::CachingSha2, &n, "pw", &r));
        assert!(verify(AuthPlugin::Native, &n, "", &[]));
        assert!(!verify(AuthPlugin::Native, &n, "", &r));
        assert!(!verify(AuthPlugin::Native, &n, "pw", &[]));
    }
}
