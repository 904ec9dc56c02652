//! Authentication: the handshake v10 greeting, `mysql_native_password` and
//! `caching_sha2_password`.
//!
//! The server keeps no plaintext password: an account has the hashes
//! `LoginAccount` holds, SHA1(SHA1(pw)) for mysql_native_password and
//! SHA256(SHA256(pw)) for caching_sha2_password. Either lets the server
//! check a client's scramble without the password (the scramble XORs the
//! first hash with a digest of the nonce and the second), so a
//! `caching_sha2_password` client is always answered with
//! fast-auth-success (0x01 0x03) and never needs the full authentication
//! (RSA key exchange or TLS): the cluster's stored verifier plays the role
//! of MySQL's in-memory cache. A client that starts with a plugin the
//! account does not use (or one we do not know) gets an AuthSwitchRequest.

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

/// An account as login checks it: hashes only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginAccount {
    /// The account's host pattern (CURRENT_USER()).
    pub host: String,
    /// SHA1(SHA1(password)); None: the empty password.
    pub native: Option<[u8; 20]>,
    /// SHA256(SHA256(password)); None: the empty password.
    pub sha2: Option<[u8; 32]>,
    /// The plugin a client must use (None: whichever it starts with).
    pub plugin: Option<AuthPlugin>,
    pub locked: bool,
    pub password_expired: bool,
    /// REQUIRE SSL: a login over a connection without TLS is refused (1045).
    pub require_ssl: bool,
}

impl LoginAccount {
    /// An open account (not locked, not expired, TLS not required) with
    /// these hashes.
    fn with_hashes(
        host: &str,
        native: Option<[u8; 20]>,
        sha2: Option<[u8; 32]>,
        plugin: Option<AuthPlugin>,
    ) -> LoginAccount {
        LoginAccount {
            host: host.to_string(),
            native,
            sha2,
            plugin,
            locked: false,
            password_expired: false,
            require_ssl: false,
        }
    }

    /// From a plaintext password (configuration of in-process servers).
    pub fn from_password(host: &str, password: &str, plugin: Option<AuthPlugin>) -> LoginAccount {
        use sha1::Digest;
        let (native, sha2) = if password.is_empty() {
            (None, None)
        } else {
            let n1 = sha1::Sha1::digest(password.as_bytes());
            let s1 = sha2::Sha256::digest(password.as_bytes());
            (Some(sha1::Sha1::digest(n1).into()), Some(sha2::Sha256::digest(s1).into()))
        };
        LoginAccount::with_hashes(host, native, sha2, plugin)
    }

    /// From the stored hex texts (`*HEX` for native, hex for sha2; empty
    /// for the empty password). None: a stored hash is malformed.
    pub fn from_hex(host: &str, native: &str, sha2: &str, plugin: Option<AuthPlugin>) -> Option<LoginAccount> {
        fn unhex<const N: usize>(t: &str) -> Option<Option<[u8; N]>> {
            if t.is_empty() {
                return Some(None);
            }
            if t.len() != 2 * N || !t.is_ascii() {
                return None;
            }
            let mut out = [0u8; N];
            for (i, b) in out.iter_mut().enumerate() {
                *b = u8::from_str_radix(&t[2 * i..2 * i + 2], 16).ok()?;
            }
            Some(Some(out))
        }
        let native = unhex::<20>(native.strip_prefix('*').unwrap_or(native))?;
        let sha2 = unhex::<32>(sha2)?;
        Some(LoginAccount::with_hashes(host, native, sha2, plugin))
    }
}

/// Both plugins' check: an empty password expects an empty response (some
/// clients send one NUL); otherwise the client's first hash, recovered as
/// response XOR `mask`, must hash (`D`) to the stored hash.
fn check_scramble<D: sha1::Digest, const N: usize>(response: &[u8], stored: Option<&[u8; N]>, mask: &[&[u8]]) -> bool {
    let Some(stored) = stored else { return response.is_empty() || response == [0] };
    let mut h = D::new();
    for part in mask {
        h.update(part);
    }
    let mask = h.finalize();
    if response.len() != N || mask.len() != N {
        return false;
    }
    let first: Vec<u8> = response.iter().zip(mask.iter()).map(|(a, b)| a ^ b).collect();
    let d = D::digest(&first);
    // Constant-time compare: do not leak how many bytes matched.
    d.len() == N && d.iter().zip(stored).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// True if `response` is what a client knowing the password of `a` sends
/// for `nonce`. An empty password expects an empty response (some clients
/// send one NUL).
pub fn verify_account(plugin: AuthPlugin, nonce: &[u8], a: &LoginAccount, response: &[u8]) -> bool {
    let response = match plugin {
        AuthPlugin::Native if response.len() == 21 && response[20] == 0 => &response[..20],
        AuthPlugin::CachingSha2 if response.len() == 33 && response[32] == 0 => &response[..32],
        _ => response,
    };
    match plugin {
        // scramble = SHA1(pw) XOR SHA1(nonce || SHA1(SHA1(pw)))
        AuthPlugin::Native => {
            let stored = a.native.as_ref();
            check_scramble::<sha1::Sha1, 20>(response, stored, &[nonce, stored.map_or(&[][..], |x| &x[..])])
        }
        // scramble = SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) || nonce)
        AuthPlugin::CachingSha2 => {
            let stored = a.sha2.as_ref();
            check_scramble::<sha2::Sha256, 32>(response, stored, &[stored.map_or(&[][..], |x| &x[..]), nonce])
        }
    }
}

/// caching_sha2_password's full authentication: the password the client
/// sent in clear (over TLS only), checked against the stored
/// SHA256(SHA256(password)). The client ends it with a NUL.
pub fn verify_cleartext_sha2(a: &LoginAccount, password: &[u8]) -> bool {
    use sha1::Digest;
    let password = password.strip_suffix(&[0]).unwrap_or(password);
    match &a.sha2 {
        None => password.is_empty(),
        Some(stored) => {
            let d = sha2::Sha256::digest(sha2::Sha256::digest(password));
            d.iter().zip(stored).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
        }
    }
}

/// caching_sha2_password's "perform full authentication" request (after
/// the 0x01 "more data" header): the client then sends its password,
/// in clear over TLS.
pub const PERFORM_FULL_AUTH: [u8; 2] = [0x01, 0x04];

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
    use mysql_common::scramble::{scramble_native, scramble_sha256};

    #[test]
    fn nonce_is_printable() {
        for _ in 0..100 {
            let n = new_nonce();
            assert!(n.iter().all(|&c| (0x21..=0x7e).contains(&c) && c != b'$'));
        }
    }

    #[test]
    fn verify_both_plugins() {
        // The scrambles a client computes from the password (mysql_common's,
        // an independent implementation) pass the check from hashes only.
        let n = new_nonce();
        let pw = LoginAccount::from_password("%", "pw", None);
        let r = scramble_native(&n, b"pw").unwrap();
        assert!(verify_account(AuthPlugin::Native, &n, &pw, &r));
        assert!(!verify_account(AuthPlugin::Native, &n, &LoginAccount::from_password("%", "px", None), &r));
        assert!(!verify_account(AuthPlugin::CachingSha2, &n, &pw, &r));
        // Some clients end the scramble with a NUL.
        let mut with_nul = r.to_vec();
        with_nul.push(0);
        assert!(verify_account(AuthPlugin::Native, &n, &pw, &with_nul));
        let r = scramble_sha256(&n, b"pw").unwrap();
        assert!(verify_account(AuthPlugin::CachingSha2, &n, &pw, &r));
        let empty = LoginAccount::from_password("%", "", None);
        assert!(verify_account(AuthPlugin::Native, &n, &empty, &[]));
        assert!(verify_account(AuthPlugin::Native, &n, &empty, &[0]));
        assert!(!verify_account(AuthPlugin::Native, &n, &empty, &r));
        assert!(!verify_account(AuthPlugin::Native, &n, &pw, &[]));
    }

    #[test]
    fn verify_from_hashes_only() {
        let n = new_nonce();
        let a = LoginAccount::from_password("%", "pw", None);
        assert!(verify_account(AuthPlugin::Native, &n, &a, &scramble_native(&n, b"pw").unwrap()));
        assert!(!verify_account(AuthPlugin::Native, &n, &a, &scramble_native(&n, b"px").unwrap()));
        assert!(verify_account(AuthPlugin::CachingSha2, &n, &a, &scramble_sha256(&n, b"pw").unwrap()));
        assert!(!verify_account(AuthPlugin::CachingSha2, &n, &a, &scramble_sha256(&n, b"px").unwrap()));
        assert!(!verify_account(AuthPlugin::CachingSha2, &n, &a, &[]));
        // The stored texts (mysql.user) give the same account.
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02X}")).collect::<String>();
        let stored =
            LoginAccount::from_hex("%", &format!("*{}", hex(&a.native.unwrap())), &hex(&a.sha2.unwrap()), None);
        assert_eq!(stored.as_ref(), Some(&a));
        let empty = LoginAccount::from_password("%", "", None);
        assert!(verify_account(AuthPlugin::Native, &n, &empty, &[]));
        assert!(!verify_account(AuthPlugin::Native, &n, &empty, &scramble_native(&n, b"pw").unwrap()));
    }
}
