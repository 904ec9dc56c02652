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
use norr_signals::acl::Grants;
use std::sync::atomic::{AtomicU64, Ordering};
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
    /// Global privileges (`mysql.user.privs`, bits of `norr_signals::acl`).
    pub privs: u64,
}

/// A grant on a database (`mysql.db`, `table` None) or on one table
/// (`mysql.tables_priv`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectGrant {
    pub user: String,
    pub host: String,
    pub db: String,
    pub table: Option<String>,
    pub privs: u64,
}

/// A role granted to an account (`mysql.role_edges`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleGrant {
    pub role: (String, String),
    pub to: (String, String),
    pub is_default: bool,
}

/// Every account at one version of `mysql.acl_version`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccountTable {
    pub version: i64,
    pub accounts: Vec<NativeAccount>,
    pub grants: Vec<ObjectGrant>,
    pub roles: Vec<RoleGrant>,
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
    /// What account `user`@`host` (the row it logged in as) may do: its own
    /// grants and those of its default roles (and of the roles granted to
    /// those), as a SQL session of it has at its start. An account no longer
    /// there has none: its open connections can do nothing.
    pub fn grants_for(&self, user: &str, host: &str) -> Grants {
        let me = (user.to_string(), host.to_string());
        let mut who = vec![me.clone()];
        let mut todo: Vec<(String, String)> =
            self.roles.iter().filter(|e| e.to == me && e.is_default).map(|e| e.role.clone()).collect();
        while let Some(r) = todo.pop() {
            if !who.contains(&r) {
                todo.extend(self.roles.iter().filter(|e| e.to == r).map(|e| e.role.clone()));
                who.push(r);
            }
        }
        let is_of = |u: &str, h: &str| who.iter().any(|(wu, wh)| wu == u && wh.eq_ignore_ascii_case(h));
        let exists = self.accounts.iter().any(|a| a.user == user && a.host.eq_ignore_ascii_case(host) && !a.is_role);
        let mut g = Grants { account: format!("'{user}'@'{host}'"), ..Grants::default() };
        if !exists {
            return g;
        }
        g.global = self.accounts.iter().filter(|a| is_of(&a.user, &a.host)).fold(0, |p, a| p | a.privs);
        for o in self.grants.iter().filter(|o| is_of(&o.user, &o.host)) {
            match &o.table {
                None => g.dbs.push((o.db.clone(), o.privs)),
                Some(t) => g.tables.push((o.db.clone(), t.clone(), o.privs)),
            }
        }
        g
    }

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
    /// Tables published so far: the host compares it, once a loop round,
    /// with what it last handed its blocks (no lock taken for that).
    published: AtomicU64,
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
        self.published.fetch_add(1, Ordering::Release);
    }

    /// How many tables were published: changes with every `publish`.
    pub fn generation(&self) -> u64 {
        self.published.load(Ordering::Acquire)
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
        NativeAccount {
            user: user.into(),
            host: host.into(),
            sha2_hash: stored(pw),
            locked: false,
            is_role: false,
            privs: 0,
        }
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
            ..AccountTable::default()
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
        assert_eq!(d.generation(), 0);
        d.publish(AccountTable { version: 1, accounts: vec![acct("a", "%", "")], ..AccountTable::default() });
        let old = d.current().unwrap();
        d.publish(AccountTable { version: 2, ..AccountTable::default() });
        assert_eq!((old.version, old.accounts.len()), (1, 1), "a reader keeps the table it took");
        assert_eq!((d.version(), d.generation()), (Some(2), 2));
    }

    #[test]
    fn grants_add_up_the_account_and_its_default_roles() {
        use norr_signals::acl::{DELETE, INSERT, SELECT, UPDATE};
        let pair = |u: &str| (u.to_string(), "%".to_string());
        let grant = |u: &str, db: &str, table: Option<&str>, privs: u64| ObjectGrant {
            user: u.into(),
            host: "%".into(),
            db: db.into(),
            table: table.map(str::to_string),
            privs,
        };
        let t = AccountTable {
            version: 1,
            accounts: vec![
                NativeAccount { privs: UPDATE, ..acct("app", "%", "") },
                NativeAccount { is_role: true, ..acct("reader", "%", "") },
                NativeAccount { is_role: true, ..acct("base", "%", "") },
                NativeAccount { is_role: true, ..acct("other", "%", "") },
            ],
            grants: vec![
                grant("app", "shop", Some("orders"), DELETE),
                grant("reader", "shop", None, SELECT),
                grant("base", "stock", None, INSERT),
                grant("other", "hr", None, SELECT),
            ],
            roles: vec![
                RoleGrant { role: pair("reader"), to: pair("app"), is_default: true },
                RoleGrant { role: pair("base"), to: pair("reader"), is_default: false },
                // Granted but not a default role: not active at a native login.
                RoleGrant { role: pair("other"), to: pair("app"), is_default: false },
            ],
        };
        let g = t.grants_for("app", "%");
        assert_eq!(g.account, "'app'@'%'");
        assert_eq!(g.global, UPDATE);
        assert_eq!(g.on_table("shop/orders"), UPDATE | DELETE | SELECT);
        assert_eq!(g.on_table("stock/items"), UPDATE | INSERT, "a role of a default role");
        assert_eq!(g.on_table("hr/people"), UPDATE, "a role granted but not default");
        let gone = t.grants_for("dropped", "%");
        assert_eq!((gone.global, gone.dbs.len(), gone.tables.len()), (0, 0, 0));
    }
}
