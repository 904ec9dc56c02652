//! Native API login with a SQL account (issue 25 item 4): the proof of a
//! password, and the frame that carries it.
//!
//! This is the part both ends share (the data node's check against its
//! accounts is `crate::account_book`). A data node that asks a native client to log in
//! sends a fresh nonce (as for the cluster secret, `crate::auth`); the
//! client answers with an [`AccountLogin`]: the account name, a nonce of its
//! own and a scramble of the password. The node checks the scramble against
//! the account's stored verifier, `mysql.user.sha2_hash` =
//! hex(SHA256(SHA256(password))), which is what the SQL nodes keep for
//! caching_sha2_password: no new column, and a password set with ALTER USER
//! works on both ports at once.
//!
//! ```text
//! AccountLogin (postcard)
//! magic          varint u32 ("NRLG")
//! user           varint length + UTF-8 (at most MAX_USER_CHARS characters)
//! client_nonce   32 bytes
//! scramble       32 bytes
//! h1 = SHA256(password), h2 = SHA256(h1) (the stored verifier)
//! transcript = "norr-account-login-v1" 0x00 | node_nonce (32) | client_nonce (32)
//!              | 'U' | data_node (u16 BE) | user bytes
//! scramble = h1 XOR SHA256(transcript | h2)
//! ```
//! The node computes `x = scramble XOR SHA256(transcript | h2)` and accepts
//! when `SHA256(x) == h2`: only someone who knows h1 (the password's hash)
//! can make a scramble that passes, the password never crosses the wire, and
//! a scramble is worth nothing on another connection (another node nonce),
//! at another data node or for another account. As with MySQL's own
//! scrambles, someone who has both a recorded login and the stored verifier
//! can recover h1: the system tables must stay unreadable to others (they
//! are, through SQL; the native port serves them only to the cluster's own
//! processes once account checks are on).

use crate::auth::NONCE_BYTES;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// "NRLG" in ASCII: tells a login from anything else a client may send.
pub const LOGIN_MAGIC: u32 = 0x4E52_4C47;
/// Longest account name, as `mysql.user.user` (VARCHAR(32)).
pub const MAX_USER_CHARS: usize = 32;
/// Largest login frame a node reads (a real one is under 120 bytes).
pub const MAX_LOGIN_FRAME_BYTES: usize = 256;
pub const SCRAMBLE_BYTES: usize = 32;

const DOMAIN: &[u8] = b"norr-account-login-v1\0";

/// A native client's answer to a login challenge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountLogin {
    pub magic: u32,
    pub user: String,
    pub client_nonce: [u8; NONCE_BYTES],
    pub scramble: [u8; SCRAMBLE_BYTES],
}

fn transcript_hash(
    node_nonce: &[u8; NONCE_BYTES],
    client_nonce: &[u8; NONCE_BYTES],
    data_node: u16,
    user: &str,
    h2: &[u8; 32],
) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(DOMAIN);
    h.update(node_nonce);
    h.update(client_nonce);
    h.update([b'U']);
    h.update(data_node.to_be_bytes());
    h.update(user.as_bytes());
    h.update(h2);
    h.finalize().into()
}

fn xor(a: &[u8; 32], b: &[u8; 32]) -> [u8; 32] {
    std::array::from_fn(|i| a[i] ^ b[i])
}

/// The client's login for `user` with `password`, answering data node
/// `data_node`'s challenge `node_nonce`. An account without a password
/// sends an all-zero scramble.
pub fn login(
    user: &str,
    password: &str,
    node_nonce: &[u8; NONCE_BYTES],
    data_node: u16,
) -> Result<AccountLogin, String> {
    if user.chars().count() > MAX_USER_CHARS {
        return Err(format!("account name of {} characters (at most {MAX_USER_CHARS})", user.chars().count()));
    }
    let client_nonce = crate::auth::new_nonce()?;
    let scramble = if password.is_empty() {
        [0; SCRAMBLE_BYTES]
    } else {
        let h1: [u8; 32] = Sha256::digest(password.as_bytes()).into();
        let h2: [u8; 32] = Sha256::digest(h1).into();
        xor(&h1, &transcript_hash(node_nonce, &client_nonce, data_node, user, &h2))
    };
    Ok(AccountLogin { magic: LOGIN_MAGIC, user: user.to_string(), client_nonce, scramble })
}

/// The stored verifier from `mysql.user.sha2_hash`'s text: None for an
/// account without a password (empty text), Err for text that is not 64
/// hex digits (a damaged row: nobody logs in with it).
pub fn parse_verifier(text: &str) -> Result<Option<[u8; 32]>, String> {
    if text.is_empty() {
        return Ok(None);
    }
    let b = text.as_bytes();
    if b.len() != 64 {
        return Err(format!("password verifier of {} characters (64 hex digits expected)", b.len()));
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = [0u8; 32];
    for (i, pair) in b.chunks(2).enumerate() {
        match (digit(pair[0]), digit(pair[1])) {
            (Some(h), Some(l)) => out[i] = h << 4 | l,
            _ => return Err("password verifier is not hex".into()),
        }
    }
    Ok(Some(out))
}

/// True if `l` proves the password of the account whose stored verifier
/// is `verifier` (`parse_verifier`; None: no password, and then only the
/// all-zero scramble passes) for this challenge. Compared in constant time.
pub fn verify(verifier: Option<&[u8; 32]>, node_nonce: &[u8; NONCE_BYTES], data_node: u16, l: &AccountLogin) -> bool {
    let Some(h2) = verifier else {
        return l.scramble.iter().fold(0u8, |acc, b| acc | b) == 0;
    };
    let h1 = xor(&l.scramble, &transcript_hash(node_nonce, &l.client_nonce, data_node, &l.user, h2));
    let got: [u8; 32] = Sha256::digest(h1).into();
    got.iter().zip(h2).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// True if `frame` starts with the login magic: an [`AccountLogin`] (to be
/// decoded with [`decode_login`]) rather than a cluster-secret proof
/// (`crate::auth::AuthResponse`).
pub fn is_login(frame: &[u8]) -> bool {
    matches!(postcard::take_from_bytes::<u32>(frame), Ok((LOGIN_MAGIC, _)))
}

pub fn encode_login(l: &AccountLogin) -> Vec<u8> {
    postcard::to_stdvec(l).expect("postcard encode to Vec")
}

/// Decode a login: refuses a frame over `MAX_LOGIN_FRAME_BYTES`, a wrong
/// magic, an account name over `MAX_USER_CHARS`, a short frame and
/// trailing bytes.
pub fn decode_login(b: &[u8]) -> Result<AccountLogin, String> {
    if b.len() > MAX_LOGIN_FRAME_BYTES {
        return Err(format!("login of {} bytes (at most {MAX_LOGIN_FRAME_BYTES})", b.len()));
    }
    match postcard::take_from_bytes::<u32>(b) {
        Ok((LOGIN_MAGIC, _)) => {}
        Ok(_) => return Err("expected an account login, got another message".into()),
        Err(e) => return Err(format!("malformed login: {e}")),
    }
    let (l, rest): (AccountLogin, &[u8]) = postcard::take_from_bytes(b).map_err(|e| format!("malformed login: {e}"))?;
    if !rest.is_empty() {
        return Err(format!("malformed login: {} bytes after its end", rest.len()));
    }
    if l.user.chars().count() > MAX_USER_CHARS {
        return Err(format!("account name of {} characters (at most {MAX_USER_CHARS})", l.user.chars().count()));
    }
    Ok(l)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// hex(SHA256(SHA256(pw))): what the SQL node stores (its own code, in
    /// norr-sql's acl::store, is the reference this must agree with).
    fn stored(pw: &str) -> String {
        let h2 = Sha256::digest(Sha256::digest(pw.as_bytes()));
        h2.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn the_right_password_verifies_nothing_else_does() {
        let v = parse_verifier(&stored("s3cret")).unwrap();
        let nonce = crate::auth::new_nonce().unwrap();
        let l = login("app", "s3cret", &nonce, 2).unwrap();
        assert!(verify(v.as_ref(), &nonce, 2, &l));
        assert!(!verify(v.as_ref(), &nonce, 2, &login("app", "s3creT", &nonce, 2).unwrap()), "wrong password");
        assert!(!verify(v.as_ref(), &crate::auth::new_nonce().unwrap(), 2, &l), "replayed on another connection");
        assert!(!verify(v.as_ref(), &nonce, 3, &l), "moved to another data node");
        let other_user = AccountLogin { user: "root".into(), ..l.clone() };
        assert!(!verify(v.as_ref(), &nonce, 2, &other_user), "claimed for another account");
        let mut flipped = l.clone();
        flipped.scramble[0] ^= 1;
        assert!(!verify(v.as_ref(), &nonce, 2, &flipped));
        // An account with no password: only the empty password's login.
        assert_eq!(parse_verifier("").unwrap(), None);
        assert!(verify(None, &nonce, 2, &login("app", "", &nonce, 2).unwrap()));
        assert!(!verify(None, &nonce, 2, &l));
        // A password account is not entered with an empty password.
        assert!(!verify(v.as_ref(), &nonce, 2, &login("app", "", &nonce, 2).unwrap()));
    }

    #[test]
    fn verifiers_and_frames_are_checked() {
        assert!(parse_verifier("abc").unwrap_err().contains("64 hex digits"));
        assert!(parse_verifier(&"g".repeat(64)).unwrap_err().contains("not hex"));
        assert!(parse_verifier(&"é".repeat(32)).is_err());
        assert!(login(&"u".repeat(33), "p", &[0; 32], 2).unwrap_err().contains("at most 32"));
        let l = login("app", "pw", &[7; 32], 2).unwrap();
        let b = encode_login(&l);
        assert!(b.len() < 120);
        assert_eq!(decode_login(&b).unwrap(), l);
        for n in 0..b.len() {
            assert!(decode_login(&b[..n]).is_err(), "prefix of {n} bytes");
        }
        assert!(decode_login(&[b.clone(), vec![0]].concat()).unwrap_err().contains("after its end"));
        assert!(decode_login(&vec![0xFF; MAX_LOGIN_FRAME_BYTES + 1]).unwrap_err().contains("at most"));
        let auth = crate::auth::encode_auth_response(
            &crate::auth::respond(&crate::auth::ClusterSecret::generate().unwrap(), &[1; 32], b"x").unwrap(),
        );
        assert!(decode_login(&auth).unwrap_err().contains("another message"));
        assert!(is_login(&b) && !is_login(&auth) && !is_login(&[]));
        let long = AccountLogin { user: "u".repeat(40), ..l };
        assert!(decode_login(&encode_login(&long)).unwrap_err().contains("at most 32"));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]
        /// Arbitrary bytes, and a real login damaged, never panic.
        #[test]
        fn bad_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300), pos in any::<usize>(), byte in any::<u8>()) {
            let _ = decode_login(&bytes);
            let _ = parse_verifier(&String::from_utf8_lossy(&bytes));
            let mut b = encode_login(&login("app", "pw", &[7; 32], 2).unwrap());
            let at = pos % b.len();
            b[at] = byte;
            if let Ok(l) = decode_login(&b) {
                let v = parse_verifier(&stored("pw")).unwrap();
                let _ = verify(v.as_ref(), &[7; 32], 2, &l);
            }
        }
    }
}
