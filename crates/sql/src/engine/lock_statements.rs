//! The statements around table locks, which mysqldump and its restores send:
//! LOCK TABLES, UNLOCK TABLES, FLUSH TABLES [...] [WITH READ LOCK],
//! FLUSH PRIVILEGES and ALTER TABLE ... DISABLE / ENABLE KEYS; and which
//! tables a statement reads and writes, for the lock check
//! (`table_locks` keeps the locks).

use crate::engine::parse_ext::Cursor;
use crate::engine::table_locks::{Access, Mode};
use crate::engine::Parsed;
use crate::types::{Session, SqlError};
use sqlparser::ast::{self, ObjectName, Statement};
use sqlparser::tokenizer::Token;

/// A table named in one of these statements: (database if given, table).
pub type Name = (Option<String>, String);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockStmt {
    /// LOCK TABLES t [[AS] alias] {READ [LOCAL] | [LOW_PRIORITY] WRITE}, ...
    Lock(Vec<(Name, Mode)>),
    Unlock,
    /// FLUSH TABLES [t, ...] [WITH READ LOCK].
    FlushTables {
        tables: Vec<Name>,
        read_lock: bool,
    },
    /// FLUSH PRIVILEGES: this SQL node re-reads the accounts' system tables
    /// at its next statement (`acl`).
    FlushPrivileges,
    /// ALTER TABLE t DISABLE KEYS / ENABLE KEYS.
    AlterKeys(Name),
}

/// Parse the statement if it is one of ours (`None`: someone else's).
/// `words` are its first words, upper-cased.
pub fn parse(sql: &str, words: &[String]) -> Option<Result<LockStmt, SqlError>> {
    let w = |i: usize| words.get(i).map(|s| s.as_str()).unwrap_or("");
    let ours =
        matches!(w(0), "LOCK" | "UNLOCK" | "FLUSH") || (w(0) == "ALTER" && w(1) == "TABLE" && is_alter_keys(sql));
    ours.then(|| parse_ours(sql))
}

/// ALTER TABLE t {DISABLE | ENABLE} KEYS: the last two words say so.
fn is_alter_keys(sql: &str) -> bool {
    let Ok(toks) = crate::engine::parse_ext::tokens(sql) else {
        return false;
    };
    let word = |t: Option<&Token>, kw: &str| matches!(t, Some(Token::Word(w)) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(kw));
    let toks: Vec<&Token> = toks.iter().filter(|t| **t != Token::SemiColon).collect();
    let n = toks.len();
    n >= 2
        && word(toks.get(n - 1).copied(), "KEYS")
        && (word(toks.get(n - 2).copied(), "DISABLE") || word(toks.get(n - 2).copied(), "ENABLE"))
}

fn parse_ours(sql: &str) -> Result<LockStmt, SqlError> {
    let mut c = Cursor::new(sql)?;
    let stmt = if c.eat_word("LOCK") {
        if !(c.eat_word("TABLES") || c.eat_word("TABLE")) {
            return Err(c.err());
        }
        let mut list = Vec::new();
        loop {
            let name = c.object_name()?;
            // [[AS] alias]: aliases are accepted; the lock is on the table.
            c.eat_word("AS");
            if !(c.is_word("READ") || c.is_word("WRITE") || c.is_word("LOW_PRIORITY")) {
                c.ident()?;
            }
            let mode = if c.eat_word("READ") {
                c.eat_word("LOCAL");
                Mode::Read
            } else {
                c.eat_word("LOW_PRIORITY");
                c.expect_word("WRITE")?;
                Mode::Write
            };
            list.push((name, mode));
            if !c.eat(&Token::Comma) {
                break;
            }
        }
        LockStmt::Lock(list)
    } else if c.eat_word("UNLOCK") {
        if !(c.eat_word("TABLES") || c.eat_word("TABLE")) {
            return Err(c.err());
        }
        LockStmt::Unlock
    } else if c.eat_word("FLUSH") {
        // NO_WRITE_TO_BINLOG / LOCAL: there is no binary log to keep it out of.
        let _ = c.eat_word("NO_WRITE_TO_BINLOG") || c.eat_word("LOCAL");
        if c.eat_word("PRIVILEGES") {
            LockStmt::FlushPrivileges
        } else if c.eat_word("TABLES") || c.eat_word("TABLE") {
            let mut tables = Vec::new();
            if !c.at_end() && !c.is_word("WITH") && !c.is_word("FOR") {
                loop {
                    tables.push(c.object_name()?);
                    if !c.eat(&Token::Comma) {
                        break;
                    }
                }
            }
            let read_lock = if c.eat_word("WITH") {
                c.expect_word("READ")?;
                c.expect_word("LOCK")?;
                true
            } else if c.is_word("FOR") {
                return Err(SqlError::unsupported("FLUSH TABLES ... FOR EXPORT"));
            } else {
                false
            };
            LockStmt::FlushTables { tables, read_lock }
        } else {
            let what = c.rest_text();
            return Err(SqlError::unsupported(format!("FLUSH {what}")));
        }
    } else {
        c.expect_word("ALTER")?;
        c.expect_word("TABLE")?;
        let name = c.object_name()?;
        if !(c.eat_word("DISABLE") || c.eat_word("ENABLE")) {
            return Err(c.err());
        }
        c.expect_word("KEYS")?;
        LockStmt::AlterKeys(name)
    };
    c.eat(&Token::SemiColon);
    if !c.at_end() {
        return Err(c.err());
    }
    Ok(stmt)
}

/// Resolve a name against the session's database.
pub fn resolve(s: &Session, (db, table): &Name) -> Result<(String, String), SqlError> {
    match db {
        Some(d) => Ok((d.clone(), table.clone())),
        None => Ok((s.current_db.as_deref().ok_or_else(crate::engine::error_map::no_db)?.to_string(), table.clone())),
    }
}

/// The tables the statement would read and write. Statements that name no
/// table (or only metadata: SHOW, information_schema) give none; names that do
/// not resolve are left out (the statement reports them itself).
pub fn table_accesses(s: &Session, p: &Parsed) -> Vec<Access> {
    let st = match p {
        Parsed::Sql(st) => st.as_ref(),
        Parsed::Lock(LockStmt::AlterKeys(name)) => {
            return resolve(s, name)
                .map(|(db, table)| vec![Access { db, table, mode: Mode::Write }])
                .unwrap_or_default();
        }
        Parsed::LoadData(l) => {
            return resolve(s, &l.table)
                .map(|(db, table)| vec![Access { db, table, mode: Mode::Write }])
                .unwrap_or_default();
        }
        // ANALYZE / CHECKSUM ... TABLE read their tables.
        Parsed::Maintenance(m) => {
            return m
                .tables
                .iter()
                .filter_map(|name| resolve(s, name).ok())
                .map(|(db, table)| Access { db, table, mode: Mode::Read })
                .collect();
        }
        _ => return Vec::new(),
    };
    let writes: Vec<&ObjectName> = match st {
        Statement::Query(_) => Vec::new(),
        Statement::Insert(ins) => match &ins.table {
            ast::TableObject::TableName(n) => vec![n],
            _ => Vec::new(),
        },
        Statement::Update(u) => match &u.table.relation {
            ast::TableFactor::Table { name, .. } => vec![name],
            _ => Vec::new(),
        },
        Statement::Delete(d) => {
            let from = match &d.from {
                ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
            };
            let mut v: Vec<&ObjectName> = d.tables.iter().collect();
            for t in from {
                if let ast::TableFactor::Table { name, .. } = &t.relation {
                    if d.tables.is_empty() {
                        v.push(name);
                    }
                }
            }
            v
        }
        Statement::AlterTable(at) => vec![&at.name],
        Statement::Drop { object_type: ast::ObjectType::Table, names, .. } => names.iter().collect(),
        Statement::Drop { object_type: ast::ObjectType::Index, table: Some(t), .. } => vec![t],
        Statement::Truncate(t) => t.table_names.iter().map(|x| &x.name).collect(),
        Statement::CreateIndex(ci) => vec![&ci.table_name],
        _ => return Vec::new(),
    };
    let rel = crate::engine::relations::of(st);
    let mut out: Vec<Access> = Vec::new();
    let mut add = |name: &ObjectName, mode: Mode| {
        // The session's own temporary tables are left out too: nobody else
        // can reach them, so no table lock (its own or another session's)
        // applies (MySQL).
        let Ok(Some((db, table))) = crate::engine::relations::table_of(s, &rel, name) else {
            return;
        };
        match out.iter_mut().find(|a| a.db == db && a.table == table) {
            Some(a) => a.mode = a.mode.max(mode),
            None => out.push(Access { db, table, mode }),
        }
    };
    for n in &writes {
        add(n, Mode::Write);
    }
    for n in &rel.names {
        add(n, Mode::Read);
    }
    out
}

/// Whether `p` changes rows of a table other than the session's temporary
/// ones (which a READ ONLY transaction may still change, as MySQL's).
pub fn writes_tables(s: &Session, p: &Parsed) -> bool {
    table_accesses(s, p).iter().any(|a| a.mode == Mode::Write)
}

/// True for statements that change rows (a transaction that ran one must
/// wait for the global read lock before it commits).
pub fn writes_rows(p: &Parsed) -> bool {
    matches!(p, Parsed::LoadData(_))
        || matches!(p, Parsed::Sql(st) if matches!(st.as_ref(), Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::parse_statement;

    fn p(sql: &str) -> LockStmt {
        match parse_statement(sql).unwrap() {
            Parsed::Lock(l) => l,
            other => panic!("{sql}: {other:?}"),
        }
    }

    fn n(db: Option<&str>, t: &str) -> Name {
        (db.map(str::to_string), t.to_string())
    }

    #[test]
    fn parses_what_mysqldump_sends() {
        assert_eq!(
            p("LOCK TABLES `customers` READ LOCAL, `orders` READ /*!32311 LOCAL */"),
            LockStmt::Lock(vec![(n(None, "customers"), Mode::Read), (n(None, "orders"), Mode::Read)])
        );
        assert_eq!(p("LOCK TABLES `t` WRITE"), LockStmt::Lock(vec![(n(None, "t"), Mode::Write)]));
        assert_eq!(
            p("lock table d.t as x low_priority write, u y read"),
            LockStmt::Lock(vec![(n(Some("d"), "t"), Mode::Write), (n(None, "u"), Mode::Read)])
        );
        assert_eq!(p("UNLOCK TABLES"), LockStmt::Unlock);
        assert_eq!(p("FLUSH TABLES"), LockStmt::FlushTables { tables: vec![], read_lock: false });
        assert_eq!(
            p("FLUSH /*!40101 LOCAL */ TABLES WITH READ LOCK"),
            LockStmt::FlushTables { tables: vec![], read_lock: true }
        );
        assert_eq!(
            p("flush tables a, d.b with read lock"),
            LockStmt::FlushTables { tables: vec![n(None, "a"), n(Some("d"), "b")], read_lock: true }
        );
        assert_eq!(p("FLUSH PRIVILEGES"), LockStmt::FlushPrivileges);
        assert_eq!(p("/*!40000 ALTER TABLE `t` DISABLE KEYS */"), LockStmt::AlterKeys(n(None, "t")));
        assert_eq!(p("ALTER TABLE d.t ENABLE KEYS;"), LockStmt::AlterKeys(n(Some("d"), "t")));
    }

    #[test]
    fn bad_lock_statements_are_errors() {
        for sql in [
            "LOCK TABLES",
            "LOCK TABLES t",
            "LOCK TABLES t READ,",
            "LOCK TABLES t READ x",
            "UNLOCK",
            "FLUSH TABLES t WITH",
        ] {
            let e = parse_statement(sql).unwrap_err();
            assert_eq!(e.code, 1064, "{sql}: {e:?}");
        }
        assert_eq!(parse_statement("FLUSH LOGS").unwrap_err().code, 1235);
        assert_eq!(parse_statement("FLUSH TABLES t FOR EXPORT").unwrap_err().code, 1235);
    }

    fn accesses(sql: &str) -> Vec<(String, Mode)> {
        let mut s = Session::new(1, "root");
        s.current_db = Some("d".into());
        table_accesses(&s, &parse_statement(sql).unwrap())
            .into_iter()
            .map(|a| (format!("{}.{}", a.db, a.table), a.mode))
            .collect()
    }

    #[test]
    fn statements_read_and_write_their_tables() {
        use Mode::{Read, Write};
        assert_eq!(accesses("SELECT 1"), vec![]);
        assert_eq!(accesses("SELECT 1 FROM dual"), vec![]);
        assert_eq!(
            accesses("SELECT * FROM t JOIN e.u ON t.a = u.a WHERE t.b IN (SELECT b FROM v)"),
            vec![("d.t".into(), Read), ("e.u".into(), Read), ("d.v".into(), Read)]
        );
        assert_eq!(accesses("WITH c AS (SELECT * FROM t) SELECT * FROM c"), vec![("d.t".into(), Read)]);
        assert_eq!(accesses("SELECT * FROM information_schema.tables"), vec![]);
        assert_eq!(accesses("INSERT INTO t SELECT * FROM u"), vec![("d.t".into(), Write), ("d.u".into(), Read)]);
        assert_eq!(accesses("INSERT INTO t VALUES (1)"), vec![("d.t".into(), Write)]);
        assert_eq!(
            accesses("UPDATE t SET a = (SELECT max(a) FROM u) WHERE b = 1"),
            vec![("d.t".into(), Write), ("d.u".into(), Read)]
        );
        assert_eq!(accesses("DELETE FROM t WHERE a = 1"), vec![("d.t".into(), Write)]);
        assert_eq!(accesses("DROP TABLE t, e.u"), vec![("d.t".into(), Write), ("e.u".into(), Write)]);
        assert_eq!(accesses("TRUNCATE TABLE t"), vec![("d.t".into(), Write)]);
        assert_eq!(accesses("ALTER TABLE t DISABLE KEYS"), vec![("d.t".into(), Write)]);
        assert_eq!(accesses("SHOW CREATE TABLE t"), vec![]);
        assert!(writes_rows(&parse_statement("DELETE FROM t").unwrap()));
        assert!(!writes_rows(&parse_statement("SELECT * FROM t").unwrap()));
    }
}
