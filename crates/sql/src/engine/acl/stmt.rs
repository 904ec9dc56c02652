//! Parsing of the account statements (sqlparser 0.63 parses few of them,
//! and none with MySQL's `user@host` names).

use super::privs::{Level, Privs};
use crate::engine::parse_ext::Cursor;
use crate::types::SqlError;
use sqlparser::tokenizer::Token;

/// `'user'@'host'` (host `%` when left out, as MySQL).
pub type Account = (String, String);

#[derive(Debug, Clone, PartialEq)]
pub enum Auth {
    /// IDENTIFIED [WITH plugin] BY 'password'.
    Password { plugin: Option<String>, password: String },
    /// IDENTIFIED WITH plugin (no password).
    Plugin(String),
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct UserOpts {
    /// ACCOUNT LOCK (true) / UNLOCK (false).
    pub lock: Option<bool>,
    /// PASSWORD EXPIRE (true) / PASSWORD EXPIRE NEVER|DEFAULT (false).
    pub expire: Option<bool>,
    /// REQUIRE SSL (true) / REQUIRE NONE (false).
    pub require_ssl: Option<bool>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// `*.*`
    Global,
    /// `db.*`, or `*` (the current database: None).
    Db(Option<String>),
    /// `db.t` or `t`.
    Table(Option<String>, String),
}

/// One privilege of a GRANT/REVOKE, with its column list if any.
#[derive(Debug, Clone, PartialEq)]
pub struct PrivItem {
    /// None: ALL [PRIVILEGES].
    pub privs: Option<Privs>,
    pub columns: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum RoleSpec {
    Default,
    None,
    All,
    List(Vec<Account>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum AclStmt {
    CreateUser {
        if_not_exists: bool,
        users: Vec<(Account, Option<Auth>)>,
        opts: UserOpts,
    },
    CreateRole {
        if_not_exists: bool,
        roles: Vec<Account>,
    },
    /// `users` None in an entry's account: ALTER USER USER().
    AlterUser {
        if_exists: bool,
        users: Vec<(Option<Account>, Option<Auth>)>,
        opts: UserOpts,
    },
    DropUser {
        if_exists: bool,
        users: Vec<Account>,
        role: bool,
    },
    RenameUser(Vec<(Account, Account)>),
    Grant {
        items: Vec<PrivItem>,
        target: Target,
        to: Vec<Account>,
        grant_option: bool,
    },
    Revoke {
        items: Vec<PrivItem>,
        target: Target,
        from: Vec<Account>,
        grant_option: bool,
    },
    GrantRole {
        roles: Vec<Account>,
        to: Vec<Account>,
        admin: bool,
    },
    RevokeRole {
        roles: Vec<Account>,
        from: Vec<Account>,
    },
    SetRole(RoleSpec),
    SetDefaultRole {
        roles: RoleSpec,
        to: Vec<Account>,
    },
    /// None: the session's own.
    ShowGrants {
        user: Option<Account>,
        using: Vec<Account>,
    },
    /// SET PASSWORD [FOR user] = 'pw'.
    SetPassword {
        user: Option<Account>,
        password: String,
    },
}

/// The account statements, picked by their first words; None: not one.
pub fn parse(sql: &str, words: &[String]) -> Option<Result<AclStmt, SqlError>> {
    let w = |i: usize| words.get(i).map(|s| s.as_str()).unwrap_or("");
    let ours = matches!(
        (w(0), w(1)),
        ("CREATE" | "DROP", "USER" | "ROLE")
            | ("ALTER" | "RENAME", "USER")
            | ("GRANT" | "REVOKE", _)
            | ("SET", "ROLE" | "PASSWORD")
            | ("SHOW", "GRANTS")
    ) || (w(0) == "SET" && w(1) == "DEFAULT" && w(2) == "ROLE");
    if !ours {
        return None;
    }
    Some(parse_ours(sql))
}

fn parse_ours(sql: &str) -> Result<AclStmt, SqlError> {
    let mut c = Cursor::new(sql)?;
    let st = if c.eat_word("CREATE") {
        let role = if c.eat_word("ROLE") {
            true
        } else {
            c.expect_word("USER")?;
            false
        };
        let if_not_exists = if_words(&mut c, &["IF", "NOT", "EXISTS"])?;
        if role {
            AclStmt::CreateRole { if_not_exists, roles: account_list(&mut c)? }
        } else {
            let mut users = Vec::new();
            loop {
                let a = account(&mut c)?;
                users.push((a, auth(&mut c)?));
                if !c.eat(&Token::Comma) {
                    break;
                }
            }
            AclStmt::CreateUser { if_not_exists, users, opts: user_opts(&mut c)? }
        }
    } else if c.eat_word("ALTER") {
        c.expect_word("USER")?;
        let if_exists = if_words(&mut c, &["IF", "EXISTS"])?;
        let mut users = Vec::new();
        loop {
            let a = if c.is_word("USER") && c.peek_at(1) == Some(&Token::LParen) {
                c.next_token();
                c.expect(&Token::LParen)?;
                c.expect(&Token::RParen)?;
                None
            } else {
                Some(account(&mut c)?)
            };
            if c.is_word("DEFAULT") && c.is_word_at(1, "ROLE") {
                return Err(SqlError::unsupported("ALTER USER ... DEFAULT ROLE (use SET DEFAULT ROLE)"));
            }
            users.push((a, auth(&mut c)?));
            if !c.eat(&Token::Comma) {
                break;
            }
        }
        AclStmt::AlterUser { if_exists, users, opts: user_opts(&mut c)? }
    } else if c.eat_word("DROP") {
        let role = if c.eat_word("ROLE") {
            true
        } else {
            c.expect_word("USER")?;
            false
        };
        let if_exists = if_words(&mut c, &["IF", "EXISTS"])?;
        AclStmt::DropUser { if_exists, users: account_list(&mut c)?, role }
    } else if c.eat_word("RENAME") {
        c.expect_word("USER")?;
        let mut pairs = Vec::new();
        loop {
            let from = account(&mut c)?;
            c.expect_word("TO")?;
            pairs.push((from, account(&mut c)?));
            if !c.eat(&Token::Comma) {
                break;
            }
        }
        AclStmt::RenameUser(pairs)
    } else if c.eat_word("GRANT") {
        if is_role_grant(&c) {
            let roles = account_list(&mut c)?;
            c.expect_word("TO")?;
            let to = account_list(&mut c)?;
            let admin = if_words(&mut c, &["WITH", "ADMIN", "OPTION"])?;
            AclStmt::GrantRole { roles, to, admin }
        } else {
            let (items, mut grant_option) = priv_list(&mut c)?;
            c.expect_word("ON")?;
            let target = target(&mut c)?;
            c.expect_word("TO")?;
            let to = account_list(&mut c)?;
            if if_words(&mut c, &["WITH", "GRANT", "OPTION"])? {
                grant_option = true;
            }
            if c.is_word("REQUIRE") || c.is_word("IDENTIFIED") || c.is_word("AS") {
                return Err(SqlError::unsupported(format!("GRANT ... {}", c.rest_text())));
            }
            AclStmt::Grant { items, target, to, grant_option }
        }
    } else if c.eat_word("REVOKE") {
        if if_words(&mut c, &["ALL", "PRIVILEGES", ","])? || if_words(&mut c, &["ALL", ","])? {
            // REVOKE ALL [PRIVILEGES], GRANT OPTION FROM users: everything
            // at every level.
            c.expect_word("GRANT")?;
            c.expect_word("OPTION")?;
            c.expect_word("FROM")?;
            let from = account_list(&mut c)?;
            AclStmt::Revoke {
                items: vec![PrivItem { privs: None, columns: vec![] }],
                target: Target::Global,
                from,
                grant_option: true,
            }
        } else if is_role_grant(&c) {
            let roles = account_list(&mut c)?;
            c.expect_word("FROM")?;
            AclStmt::RevokeRole { roles, from: account_list(&mut c)? }
        } else {
            let (items, grant_option) = priv_list(&mut c)?;
            c.expect_word("ON")?;
            let target = target(&mut c)?;
            c.expect_word("FROM")?;
            AclStmt::Revoke { items, target, from: account_list(&mut c)?, grant_option }
        }
    } else if c.eat_word("SET") {
        if c.eat_word("PASSWORD") {
            let user = if c.eat_word("FOR") { Some(account(&mut c)?) } else { None };
            c.expect(&Token::Eq)?;
            if c.is_word("PASSWORD") {
                return Err(SqlError::unsupported("SET PASSWORD = PASSWORD('...') (give the password as a string)"));
            }
            AclStmt::SetPassword { user, password: c.string()? }
        } else if c.eat_word("DEFAULT") {
            c.expect_word("ROLE")?;
            let roles = role_spec(&mut c)?;
            c.expect_word("TO")?;
            AclStmt::SetDefaultRole { roles, to: account_list(&mut c)? }
        } else {
            c.expect_word("ROLE")?;
            AclStmt::SetRole(role_spec(&mut c)?)
        }
    } else {
        c.expect_word("SHOW")?;
        c.expect_word("GRANTS")?;
        let mut user = None;
        let mut using = Vec::new();
        if c.eat_word("FOR") {
            if c.is_word("CURRENT_USER") {
                c.next_token();
                if c.eat(&Token::LParen) {
                    c.expect(&Token::RParen)?;
                }
            } else {
                user = Some(account(&mut c)?);
            }
            if c.eat_word("USING") {
                using = account_list(&mut c)?;
            }
        }
        AclStmt::ShowGrants { user, using }
    };
    c.eat(&Token::SemiColon);
    if !c.at_end() {
        return Err(c.err());
    }
    Ok(st)
}

/// Eats the words (or `,`) if all are next.
fn if_words(c: &mut Cursor, words: &[&str]) -> Result<bool, SqlError> {
    let all =
        words.iter().enumerate().all(
            |(i, w)| {
                if *w == "," {
                    c.peek_at(i) == Some(&Token::Comma)
                } else {
                    c.is_word_at(i, w)
                }
            },
        );
    if all {
        for _ in words {
            c.next_token();
        }
    }
    Ok(all)
}

/// GRANT r1, r2 TO ...: no ON before TO.
fn is_role_grant(c: &Cursor) -> bool {
    let mut i = 0;
    loop {
        match c.peek_at(i) {
            None => return false,
            Some(Token::Word(w)) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("ON") => return false,
            Some(Token::Word(w))
                if w.quote_style.is_none()
                    && (w.value.eq_ignore_ascii_case("TO") || w.value.eq_ignore_ascii_case("FROM")) =>
            {
                return true
            }
            _ => i += 1,
        }
    }
}

/// A name part: identifier, quoted identifier or string.
fn name_part(c: &mut Cursor) -> Result<String, SqlError> {
    match c.peek() {
        Some(Token::SingleQuotedString(_) | Token::DoubleQuotedString(_)) => c.string(),
        _ => c.ident(),
    }
}

/// `user[@host]`, host `%` when absent.
pub fn account(c: &mut Cursor) -> Result<Account, SqlError> {
    // `u@h` unquoted is one word to the tokenizer.
    if let Some(Token::Word(w)) = c.peek() {
        if w.quote_style.is_none() {
            if let Some((u, h)) = w.value.split_once('@') {
                if !u.is_empty() {
                    let (u, h) = (u.to_string(), h.to_string());
                    c.next_token();
                    // `u@'h'`: the host is the next token.
                    let h = if h.is_empty() { name_part(c)? } else { h };
                    return Ok((u, h));
                }
            }
        }
    }
    let user = name_part(c)?;
    // `u@h` tokenizes as a word `@h`; `'u'@'h'` as `@` then a string.
    let host = match c.peek().cloned() {
        Some(Token::AtSign) => {
            c.next_token();
            name_part(c)?
        }
        Some(Token::Word(w)) if w.quote_style.is_none() && w.value.starts_with('@') => {
            c.next_token();
            if w.value == "@" {
                name_part(c)?
            } else {
                w.value[1..].to_string()
            }
        }
        _ => "%".to_string(),
    };
    if user.chars().count() > 32 {
        return Err(SqlError::new(
            1470,
            "HY000",
            format!("String '{user}' is too long for user name (should be no longer than 32)"),
        ));
    }
    if host.chars().count() > 255 {
        return Err(SqlError::new(
            1470,
            "HY000",
            format!("String '{host}' is too long for host name (should be no longer than 255)"),
        ));
    }
    Ok((user, host))
}

fn account_list(c: &mut Cursor) -> Result<Vec<Account>, SqlError> {
    let mut v = vec![account(c)?];
    while c.eat(&Token::Comma) {
        v.push(account(c)?);
    }
    Ok(v)
}

fn auth(c: &mut Cursor) -> Result<Option<Auth>, SqlError> {
    if !c.eat_word("IDENTIFIED") {
        return Ok(None);
    }
    let plugin = if c.eat_word("WITH") { Some(name_part(c)?) } else { None };
    if let Some(p) = &plugin {
        if p != super::super::super::protocol::auth::NATIVE && p != super::super::super::protocol::auth::CACHING_SHA2 {
            return Err(SqlError::new(1524, "HY000", format!("Plugin '{p}' is not loaded")));
        }
    }
    if c.eat_word("BY") {
        if c.is_word("RANDOM") {
            return Err(SqlError::unsupported("IDENTIFIED BY RANDOM PASSWORD"));
        }
        return Ok(Some(Auth::Password { plugin, password: c.string()? }));
    }
    if c.is_word("AS") {
        return Err(SqlError::unsupported("IDENTIFIED WITH ... AS 'hash' (give the password with BY)"));
    }
    match plugin {
        Some(p) => Ok(Some(Auth::Plugin(p))),
        None => Err(c.err()),
    }
}

fn user_opts(c: &mut Cursor) -> Result<UserOpts, SqlError> {
    let mut o = UserOpts::default();
    loop {
        if c.eat_word("REQUIRE") {
            if c.eat_word("SSL") {
                o.require_ssl = Some(true);
            } else if c.eat_word("NONE") {
                o.require_ssl = Some(false);
            } else {
                // X509, ISSUER, SUBJECT, CIPHER: certificate checks per account.
                return Err(SqlError::unsupported(format!("REQUIRE {} (REQUIRE SSL and NONE are)", c.rest_text())));
            }
        } else if c.eat_word("ACCOUNT") {
            if c.eat_word("LOCK") {
                o.lock = Some(true);
            } else {
                c.expect_word("UNLOCK")?;
                o.lock = Some(false);
            }
        } else if c.eat_word("PASSWORD") {
            c.expect_word("EXPIRE")?;
            if c.eat_word("NEVER") || c.eat_word("DEFAULT") {
                o.expire = Some(false);
            } else if c.is_word("INTERVAL") {
                return Err(SqlError::unsupported("PASSWORD EXPIRE INTERVAL"));
            } else {
                o.expire = Some(true);
            }
        } else if c.at_end() || c.peek() == Some(&Token::SemiColon) {
            return Ok(o);
        } else {
            // WITH MAX_..., FAILED_LOGIN_ATTEMPTS, COMMENT, ...
            return Err(SqlError::unsupported(format!("account option {}", c.rest_text())));
        }
    }
}

fn priv_list(c: &mut Cursor) -> Result<(Vec<PrivItem>, bool), SqlError> {
    let mut items = Vec::new();
    let mut grant_option = false;
    loop {
        let mut words = Vec::new();
        while let Some(Token::Word(w)) = c.peek() {
            if w.quote_style.is_some() || w.value.eq_ignore_ascii_case("ON") {
                break;
            }
            words.push(w.value.to_ascii_uppercase());
            c.next_token();
        }
        let name = words.join(" ");
        let columns = if c.peek() == Some(&Token::LParen) {
            let toks = c.paren_group()?;
            let mut cols = Vec::new();
            for t in toks {
                match t {
                    Token::Word(w) => cols.push(w.value),
                    Token::Comma => {}
                    _ => return Err(c.err()),
                }
            }
            cols
        } else {
            Vec::new()
        };
        match name.as_str() {
            "ALL" | "ALL PRIVILEGES" => items.push(PrivItem { privs: None, columns }),
            "GRANT OPTION" => grant_option = true,
            "" => return Err(c.err()),
            n => match Privs::by_name(n) {
                Some(p) => items.push(PrivItem { privs: Some(p), columns }),
                None => {
                    return Err(SqlError::unsupported(format!(
                        "the privilege {n} (NorrDB grants SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, \
                         INDEX, CREATE VIEW, SHOW VIEW, PROCESS, SUPER, RELOAD, FILE, SHOW DATABASES, LOCK TABLES, \
                         CREATE USER, CREATE ROLE, DROP ROLE, ALL, GRANT OPTION)"
                    )))
                }
            },
        }
        if !c.eat(&Token::Comma) {
            break;
        }
    }
    Ok((items, grant_option))
}

fn target(c: &mut Cursor) -> Result<Target, SqlError> {
    if c.eat_word("TABLE") {
        // An explicit object type: only tables are granted on.
    } else if c.is_word("PROCEDURE") || c.is_word("FUNCTION") {
        return Err(SqlError::unsupported("GRANT ... ON PROCEDURE / FUNCTION (NorrDB has no stored routines)"));
    }
    if c.eat(&Token::Mul) {
        if c.eat(&Token::Period) {
            c.expect(&Token::Mul)?;
            return Ok(Target::Global);
        }
        return Ok(Target::Db(None));
    }
    let first = c.ident()?;
    if c.eat(&Token::Period) {
        if c.eat(&Token::Mul) {
            return Ok(Target::Db(Some(first)));
        }
        return Ok(Target::Table(Some(first), c.ident()?));
    }
    Ok(Target::Table(None, first))
}

fn role_spec(c: &mut Cursor) -> Result<RoleSpec, SqlError> {
    if c.eat_word("DEFAULT") {
        Ok(RoleSpec::Default)
    } else if c.eat_word("NONE") {
        Ok(RoleSpec::None)
    } else if c.eat_word("ALL") {
        if c.is_word("EXCEPT") {
            return Err(SqlError::unsupported("SET ROLE ALL EXCEPT"));
        }
        Ok(RoleSpec::All)
    } else {
        Ok(RoleSpec::List(account_list(c)?))
    }
}

impl Target {
    pub fn level(&self) -> Level {
        match self {
            Target::Global => Level::Global,
            Target::Db(_) => Level::Db,
            Target::Table(..) => Level::Table,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::parse_ext::first_words;

    fn p(sql: &str) -> AclStmt {
        let w = first_words(sql, 3).unwrap();
        parse(sql, &w).expect("ours").unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    fn a(u: &str, h: &str) -> Account {
        (u.into(), h.into())
    }

    #[test]
    fn user_statements() {
        assert_eq!(
            p("CREATE USER 'app'@'%' IDENTIFIED BY 'x'"),
            AclStmt::CreateUser {
                if_not_exists: false,
                users: vec![(a("app", "%"), Some(Auth::Password { plugin: None, password: "x".into() }))],
                opts: UserOpts::default()
            }
        );
        assert_eq!(
            p("create user if not exists bob@localhost, `c`@'10.%' identified with mysql_native_password by 'p' account lock"),
            AclStmt::CreateUser {
                if_not_exists: true,
                users: vec![
                    (a("bob", "localhost"), None),
                    (
                        a("c", "10.%"),
                        Some(Auth::Password { plugin: Some("mysql_native_password".into()), password: "p".into() })
                    )
                ],
                opts: UserOpts { lock: Some(true), ..Default::default() }
            }
        );
        assert_eq!(
            p("ALTER USER root IDENTIFIED BY 'pw'"),
            AclStmt::AlterUser {
                if_exists: false,
                users: vec![(Some(a("root", "%")), Some(Auth::Password { plugin: None, password: "pw".into() }))],
                opts: UserOpts::default()
            }
        );
        assert!(matches!(
            p("ALTER USER u PASSWORD EXPIRE"),
            AclStmt::AlterUser { opts: UserOpts { expire: Some(true), .. }, .. }
        ));
        assert_eq!(p("RENAME USER a TO b@h"), AclStmt::RenameUser(vec![(a("a", "%"), a("b", "h"))]));
        assert_eq!(
            p("DROP ROLE IF EXISTS r"),
            AclStmt::DropUser { if_exists: true, users: vec![a("r", "%")], role: true }
        );
    }

    #[test]
    fn grants() {
        assert_eq!(
            p("GRANT SELECT, INSERT (a, b), CREATE VIEW ON d.* TO u@'%' WITH GRANT OPTION"),
            AclStmt::Grant {
                items: vec![
                    PrivItem { privs: Some(Privs::SELECT), columns: vec![] },
                    PrivItem { privs: Some(Privs::INSERT), columns: vec!["a".into(), "b".into()] },
                    PrivItem { privs: Some(Privs::CREATE_VIEW), columns: vec![] },
                ],
                target: Target::Db(Some("d".into())),
                to: vec![a("u", "%")],
                grant_option: true,
            }
        );
        assert!(matches!(p("GRANT ALL PRIVILEGES ON *.* TO u"), AclStmt::Grant { target: Target::Global, .. }));
        assert!(matches!(p("GRANT ALL ON t TO u"), AclStmt::Grant { target: Target::Table(None, _), .. }));
        assert_eq!(
            p("GRANT r1, r2 TO u"),
            AclStmt::GrantRole { roles: vec![a("r1", "%"), a("r2", "%")], to: vec![a("u", "%")], admin: false }
        );
        assert!(matches!(p("REVOKE ALL PRIVILEGES, GRANT OPTION FROM u"), AclStmt::Revoke { grant_option: true, .. }));
        assert!(matches!(p("REVOKE SELECT ON *.* FROM u"), AclStmt::Revoke { .. }));
        assert_eq!(p("REVOKE r FROM u"), AclStmt::RevokeRole { roles: vec![a("r", "%")], from: vec![a("u", "%")] });
        assert_eq!(p("SET ROLE ALL"), AclStmt::SetRole(RoleSpec::All));
        assert_eq!(
            p("SET DEFAULT ROLE r TO u@localhost"),
            AclStmt::SetDefaultRole { roles: RoleSpec::List(vec![a("r", "%")]), to: vec![a("u", "localhost")] }
        );
        assert_eq!(p("SHOW GRANTS"), AclStmt::ShowGrants { user: None, using: vec![] });
        assert_eq!(p("SHOW GRANTS FOR 'u'@'h'"), AclStmt::ShowGrants { user: Some(a("u", "h")), using: vec![] });
        let e = parse("GRANT EXECUTE ON *.* TO u", &first_words("GRANT EXECUTE ON *.* TO u", 3).unwrap()).unwrap();
        assert_eq!(e.unwrap_err().code, 1235);
    }
}
