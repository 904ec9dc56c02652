//! The accounts a data node checks native logins against (issue 25 item 4),
//! and the check itself.
//!
//! The accounts are the SQL ones: rows of `mysql.user`, which the SQL nodes
//! keep in the data nodes. A process-side reader (the `norr datad` account
//! reader) loads them and publishes each version into an
//! [`AccountDirectory`]; the host's handshake reads the newest table when a
//! login arrives. Publishing is the only writer and the handshake only
//! reads, so a login never waits for a reload.
//!
//! Host patterns work as in MySQL (and as the SQL node's `acl::host_matches`
//! does): `%` and `_` are LIKE wildcards, compared without case; `localhost`
//! also admits loopback addresses and same-host links (Unix socket,
//! in-process). Of the accounts of a user whose patterns admit the peer, the
//! most specific one is used: an exact host before a pattern, `%` last.

use crate::account_auth::{self, AccountLogin};
use crate::auth::NONCE_BYTES;
use std::sync::{Arc, RwLock};

/// One row of `mysql.user`, as much of it as a native login needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NativeAccount {
    pub user: String,
    pub host: String,
    /// `mysql.user.sha2_hash`: hex(SHA256(SHA256(password))), empty for an
    /// account without a password.
    pub sha2_hash: String,
    /// ALTER USER ... ACCOUNT LOCK.
    pub locked: bool,
    /// Roles are rows of `mysql.user` too, but nobody logs in as one.
    pub is_role: bool,
}

/// Every account at one version of `mysql.acl_version`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccountTable {
    pub version: i64,
    pub accounts: Vec<NativeAccount>,
}

/// Why a login was refused. `to_client` is what the client is told (as
/// MySQL's 1045, it does not say whether the account exists); `to_log` is
/// the exact reason, for the data node's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginRefusal {
    pub to_client: String,
    pub to_log: String,
}

/// The text of a peer's address an account's host pattern is matched
/// against: the IP address (an IPv4-mapped IPv6 address as IPv4), or
/// "localhost" for a link that never leaves the host (`None`).
pub fn peer_host(addr: Option<std::net::SocketAddr>) -> String {
    match addr {
        None => "localhost".to_string(),
        Some(a) => match a.ip() {
            std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => v4.to_string(),
                None => v6.to_string(),
            },
            ip => ip.to_string(),
        },
    }
}

/// Whether host pattern `pattern` admits a client from `peer` (see the
/// module doc).
pub fn host_matches(pattern: &str, peer: &str) -> bool {
    if pattern.eq_ignore_ascii_case("localhost") {
        return matches!(peer, "localhost" | "127.0.0.1" | "::1");
    }
    like(pattern.as_bytes(), peer.as_bytes())
}

/// LIKE with `%` and `_`, ASCII case folded, in time proportional to
/// pattern x text (no backtracking blow-up on patterns with many `%`).
fn like(p: &[u8], s: &[u8]) -> bool {
    // reach[j]: the pattern's first i characters can match s[..j].
    let mut reach = vec![false; s.len() + 1];
    reach[0] = true;
    for &c in p {
        let mut next = vec![false; s.len() + 1];
        match c {
            b'%' => {
                let mut any = false;
                for j in 0..=s.len() {
                    any |= reach[j];
                    next[j] = any;
                }
            }
            _ => {
                for j in 0..s.len() {
                    next[j + 1] = reach[j] && (c == b'_' || s[j].eq_ignore_ascii_case(&c));
                }
            }
        }
        reach = next;
    }
    reach[s.len()]
}

/// MySQL's order of host patterns: exact hosts first, then patterns, `%`
/// last.
fn host_rank(h: &str) -> u8 {
    if h == "%" {
        2
    } else if h.contains(['%', '_']) {
        1
    } else {
        0
    }
}

impl AccountTable {
    /// The account `user` from `peer` logs in as, if any (roles never).
    pub fn login_account(&self, user: &str, peer: &str) -> Option<&NativeAccount> {
        self.accounts
            .iter()
            .filter(|a| !a.is_role && a.user == user && host_matches(&a.host, peer))
            .min_by_key(|a| host_rank(&a.host))
    }

    /// Check `login` from `peer`, answering data node `data_node`'s challenge
    /// `node_nonce`: the account it logs in as, or why not.
    pub fn check_login(
        &self,
        login: &AccountLogin,
        peer: &str,
        node_nonce: &[u8; NONCE_BYTES],
        data_node: u16,
    ) -> Result<&NativeAccount, LoginRefusal> {
        let using = if login.scramble.iter().any(|b| *b != 0) { "YES" } else { "NO" };
        let denied = format!("access denied for user '{}'@'{peer}' (using password: {using})", login.user);
        let refuse = |why: String| LoginRefusal { to_client: denied.clone(), to_log: why };
        let Some(account) = self.login_account(&login.user, peer) else {
            return Err(refuse(format!("no account '{}' admits host {peer}", login.user)));
        };
        let verifier = match account_auth::parse_verifier(&account.sha2_hash) {
            Ok(v) => v,
            Err(e) => {
                return Err(refuse(format!(
                    "account '{}'@'{}' has a damaged password: {e}",
                    account.user, account.host
                )))
            }
        };
        if !account_auth::verify(verifier.as_ref(), node_nonce, data_node, login) {
            return Err(refuse(format!("wrong password for '{}'@'{}'", account.user, account.host)));
        }
        if account.locked {
            return Err(LoginRefusal {
                to_client: format!("access denied for user '{}'@'{peer}': account is locked", login.user),
                to_log: format!("account '{}'@'{}' is locked", account.user, account.host),
            });
        }
        Ok(account)
    }
}

/// The newest [`AccountTable`], shared between the reader that loads it and
/// the handshake that reads it. Empty until the first load: the node then
/// refuses account logins ("accounts not loaded yet") rather than guess.
#[derive(Debug, Default)]
pub struct AccountDirectory {
    current: RwLock<Option<Arc<AccountTable>>>,
}

/// A directory is equal only to itself (options that hold one compare
/// equal when they share it): its contents change under a reader's feet.
impl PartialEq for AccountDirectory {
    fn eq(&self, other: &AccountDirectory) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for AccountDirectory {}

impl AccountDirectory {
    pub fn new() -> AccountDirectory {
        AccountDirectory::default()
    }

    /// Replace the table (a newer version, or the first).
    pub fn publish(&self, table: AccountTable) {
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(table));
    }

    /// The table logins are checked against now; None before the first load.
    pub fn current(&self) -> Option<Arc<AccountTable>> {
        self.current.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The version loaded, if any.
    pub fn version(&self) -> Option<i64> {
        self.current().map(|t| t.version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    fn stored(pw: &str) -> String {
        if pw.is_empty() {
            return String::new();
        }
        Sha256::digest(Sha256::digest(pw.as_bytes())).iter().map(|b| format!("{b:02x}")).collect()
    }

    fn acct(user: &str, host: &str, pw: &str) -> NativeAccount {
        NativeAccount { user: user.into(), host: host.into(), sha2_hash: stored(pw), locked: false, is_role: false }
    }

    #[test]
    fn host_patterns_match_as_mysql() {
        assert!(host_matches("%", "10.1.2.3"));
        assert!(host_matches("10.1.%", "10.1.2.3"));
        assert!(!host_matches("10.1.%", "10.2.2.3"));
        assert!(host_matches("10.1.2._", "10.1.2.3"));
        assert!(!host_matches("10.1.2._", "10.1.2.33"));
        assert!(host_matches("LocalHost", "127.0.0.1"));
        assert!(host_matches("localhost", "localhost"));
        assert!(host_matches("localhost", "::1"));
        assert!(!host_matches("localhost", "10.1.2.3"));
        assert!(host_matches("127.0.0.1", "127.0.0.1"));
        assert!(!host_matches("127.0.0.1", "127.0.0.10"));
        // Many wildcards stay cheap.
        assert!(!host_matches(&"%a".repeat(100), &"b".repeat(200)));
        assert_eq!(peer_host(None), "localhost");
        assert_eq!(peer_host(Some("[::ffff:127.0.0.1]:5".parse().unwrap())), "127.0.0.1");
        assert_eq!(peer_host(Some("10.0.0.7:9".parse().unwrap())), "10.0.0.7");
    }

    #[test]
    fn logins_are_checked_against_the_most_specific_account() {
        let t = AccountTable {
            version: 3,
            accounts: vec![
                acct("app", "%", "wide"),
                acct("app", "127.0.0.1", "narrow"),
                NativeAccount { is_role: true, ..acct("role", "%", "") },
                NativeAccount { locked: true, ..acct("old", "%", "pw") },
                NativeAccount { sha2_hash: "zz".into(), ..acct("bad", "%", "") },
            ],
        };
        let nonce = [9u8; 32];
        let l = |u: &str, pw: &str| account_auth::login(u, pw, &nonce, 2).unwrap();
        assert_eq!(t.check_login(&l("app", "narrow"), "127.0.0.1", &nonce, 2).unwrap().host, "127.0.0.1");
        let e = t.check_login(&l("app", "wide"), "127.0.0.1", &nonce, 2).unwrap_err();
        assert!(e.to_client.contains("access denied for user 'app'@'127.0.0.1' (using password: YES)"), "{e:?}");
        assert!(e.to_log.contains("wrong password for 'app'@'127.0.0.1'"), "{e:?}");
        assert_eq!(t.check_login(&l("app", "wide"), "10.0.0.1", &nonce, 2).unwrap().host, "%");
        let e = t.check_login(&l("nobody", ""), "10.0.0.1", &nonce, 2).unwrap_err();
        assert!(e.to_client.contains("(using password: NO)") && e.to_log.contains("no account 'nobody'"), "{e:?}");
        assert!(t.check_login(&l("role", ""), "10.0.0.1", &nonce, 2).unwrap_err().to_log.contains("no account"));
        let e = t.check_login(&l("old", "pw"), "10.0.0.1", &nonce, 2).unwrap_err();
        assert!(e.to_client.contains("locked"), "{e:?}");
        // A locked account with a wrong password is told only "denied".
        assert!(!t.check_login(&l("old", "no"), "10.0.0.1", &nonce, 2).unwrap_err().to_client.contains("locked"));
        assert!(t.check_login(&l("bad", ""), "10.0.0.1", &nonce, 2).unwrap_err().to_log.contains("damaged"));
        // The proof is bound to the nonce and the data node.
        assert!(t.check_login(&l("app", "wide"), "10.0.0.1", &[8; 32], 2).is_err());
        assert!(t.check_login(&l("app", "wide"), "10.0.0.1", &nonce, 3).is_err());
    }

    #[test]
    fn the_directory_serves_the_newest_table() {
        let d = AccountDirectory::new();
        assert!(d.current().is_none());
        d.publish(AccountTable { version: 1, accounts: vec![acct("a", "%", "")] });
        let old = d.current().unwrap();
        d.publish(AccountTable { version: 2, accounts: vec![] });
        assert_eq!((old.version, old.accounts.len()), (1, 1), "a reader keeps the table it took");
        assert_eq!(d.version(), Some(2));
    }
}
