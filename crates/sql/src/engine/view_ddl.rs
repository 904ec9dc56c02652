//! CREATE / ALTER / DROP VIEW, SHOW CREATE VIEW, and a view's columns for
//! DESCRIBE and information_schema.
//!
//! The SELECT of a view is stored with its table names qualified with the
//! database they resolved in at CREATE time (as MySQL does), so that it
//! means the same from any session.

use crate::engine::catalog::{quote_ident, SqlColumnMeta, SqlDefault};
use crate::engine::dialect::NorrMySql;
use crate::engine::parse_ext::Cursor;
use crate::engine::view_expand::{cte_names, ident_parts, parse_select, view_error};
use crate::engine::views::{CheckOption, View, ViewMeta};
use crate::engine::{ddl, error_map, infoschema, namespace, vars, Engine};
use crate::types::{charset, column_flags as cf, ColumnMeta, FieldType, QueryOutput, Session, SqlError};
use norr_signals::{Collation, ColumnType, Value};
use sqlparser::ast::{self, Ident, ObjectNamePart, Query};
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};
use std::ops::ControlFlow;

/// A view statement.
#[derive(Debug, Clone, PartialEq)]
pub enum ViewStmt {
    /// CREATE [OR REPLACE] VIEW, or ALTER VIEW (`alter`).
    Create(Box<CreateView>),
    Drop {
        names: Vec<(Option<String>, String)>,
        if_exists: bool,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct CreateView {
    pub alter: bool,
    pub or_replace: bool,
    pub db: Option<String>,
    pub name: String,
    pub algorithm: Option<String>,
    /// (user, host); None: the session's user.
    pub definer: Option<(String, String)>,
    pub security: Option<String>,
    pub columns: Option<Vec<String>>,
    pub query: Box<Query>,
    pub check: CheckOption,
}

/// `Some` when the statement is a view statement (`words`: its first words).
pub fn parse(sql: &str, words: &[String]) -> Option<Result<ViewStmt, SqlError>> {
    let w = |i: usize| words.get(i).map(|s| s.as_str()).unwrap_or("");
    match w(0) {
        "DROP" if w(1) == "VIEW" => Some(parse_drop(sql)),
        "CREATE" | "ALTER" if matches!(w(1), "VIEW" | "OR" | "ALGORITHM" | "DEFINER" | "SQL") => parse_create(sql),
        _ => None,
    }
}

fn parse_drop(sql: &str) -> Result<ViewStmt, SqlError> {
    let mut c = Cursor::new(sql)?;
    c.expect_word("DROP")?;
    c.expect_word("VIEW")?;
    let mut if_exists = false;
    if c.eat_word("IF") {
        c.expect_word("EXISTS")?;
        if_exists = true;
    }
    let mut names = vec![c.object_name()?];
    while c.eat(&Token::Comma) {
        names.push(c.object_name()?);
    }
    // RESTRICT and CASCADE are accepted and do nothing, as in MySQL.
    let _ = c.eat_word("RESTRICT") || c.eat_word("CASCADE");
    c.eat(&Token::SemiColon);
    if !c.at_end() {
        return Err(c.err());
    }
    Ok(ViewStmt::Drop { names, if_exists })
}

/// A word's text whether quoted or not; string literals too (`'root'@'%'`).
fn token_text(t: &Token) -> Option<String> {
    match t {
        Token::Word(w) => Some(w.value.clone()),
        Token::SingleQuotedString(s) | Token::DoubleQuotedString(s) => Some(s.clone()),
        _ => None,
    }
}

/// DEFINER = user[@host] | CURRENT_USER[()] up to SQL SECURITY / VIEW.
fn parse_definer(c: &mut Cursor) -> Result<Option<(String, String)>, SqlError> {
    c.expect(&Token::Eq)?;
    let mut parts: Vec<String> = Vec::new();
    while !c.at_end() && !c.is_word("SQL") && !c.is_word("VIEW") {
        let t = c.next_token().ok_or_else(|| c.err())?;
        match t {
            Token::LParen | Token::RParen | Token::AtSign => {}
            other => match token_text(&other) {
                Some(x) => parts.extend(x.split('@').filter(|p| !p.is_empty()).map(str::to_string)),
                None => {
                    // `@'%'` may come as one token of the dialect.
                    let s = other.to_string();
                    let s = s.trim_start_matches('@').trim_matches(|ch| ch == '\'' || ch == '`' || ch == '"');
                    if s.is_empty() {
                        return Err(c.err());
                    }
                    parts.push(s.to_string());
                }
            },
        }
    }
    match parts.as_slice() {
        [u] if u.eq_ignore_ascii_case("CURRENT_USER") => Ok(None),
        [u] => Ok(Some((u.clone(), "%".to_string()))),
        [u, h] => Ok(Some((u.clone(), h.clone()))),
        _ => Err(c.err()),
    }
}

fn parse_create(sql: &str) -> Option<Result<ViewStmt, SqlError>> {
    let mut c = match Cursor::new(sql) {
        Ok(c) => c,
        Err(e) => return Some(Err(e)),
    };
    let alter = c.eat_word("ALTER");
    if !alter && !c.eat_word("CREATE") {
        return None;
    }
    let mut v = CreateView {
        alter,
        or_replace: false,
        db: None,
        name: String::new(),
        algorithm: None,
        definer: None,
        security: None,
        columns: None,
        query: Box::new(Query {
            with: None,
            body: Box::new(ast::SetExpr::Values(ast::Values {
                explicit_row: false,
                value_keyword: false,
                rows: vec![],
            })),
            order_by: None,
            limit_clause: None,
            fetch: None,
            locks: vec![],
            for_clause: None,
            settings: None,
            format_clause: None,
            pipe_operators: vec![],
        }),
        check: CheckOption::None,
    };
    let c_len = c.token_count();
    let r = (|| -> Result<bool, SqlError> {
        if !alter && c.eat_word("OR") {
            c.expect_word("REPLACE")?;
            v.or_replace = true;
        }
        if c.eat_word("ALGORITHM") {
            c.expect(&Token::Eq)?;
            let a = c.ident()?.to_ascii_uppercase();
            if !matches!(a.as_str(), "UNDEFINED" | "MERGE" | "TEMPTABLE") {
                return Err(error_map::parse_error_near(&a));
            }
            v.algorithm = Some(a);
        }
        if c.eat_word("DEFINER") {
            v.definer = parse_definer(&mut c)?;
        }
        if c.eat_word("SQL") {
            c.expect_word("SECURITY")?;
            let s = c.ident()?.to_ascii_uppercase();
            if !matches!(s.as_str(), "DEFINER" | "INVOKER") {
                return Err(error_map::parse_error_near(&s));
            }
            v.security = Some(s);
        }
        if !c.eat_word("VIEW") {
            // CREATE DEFINER=... PROCEDURE / TRIGGER ...: not a view.
            return Ok(false);
        }
        let (db, name) = c.object_name()?;
        v.db = db;
        v.name = name;
        if c.peek() == Some(&Token::LParen) {
            let group = c.paren_group()?;
            let mut cols = Vec::new();
            for (i, t) in group.iter().enumerate() {
                match (i % 2, t) {
                    (0, t) => cols.push(token_text(t).filter(|_| matches!(t, Token::Word(_))).ok_or_else(|| c.err())?),
                    (_, Token::Comma) => {}
                    _ => return Err(c.err()),
                }
            }
            v.columns = Some(cols);
        }
        c.expect_word("AS")?;
        let mut rest = c.rest();
        let rest_start = c_len - rest.len();
        while rest.last() == Some(&Token::SemiColon) {
            rest.pop();
        }
        // [WITH [CASCADED | LOCAL] CHECK OPTION] at the end.
        let word = |t: Option<&Token>, kw: &str| matches!(t, Some(Token::Word(w)) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(kw));
        let n = rest.len();
        if n >= 3 && word(rest.get(n - 1), "OPTION") && word(rest.get(n - 2), "CHECK") {
            if word(rest.get(n - 3), "WITH") {
                v.check = CheckOption::Cascaded;
                rest.truncate(n - 3);
            } else if n >= 4 && word(rest.get(n - 4), "WITH") {
                v.check = if word(rest.get(n - 3), "LOCAL") {
                    CheckOption::Local
                } else if word(rest.get(n - 3), "CASCADED") {
                    CheckOption::Cascaded
                } else {
                    return Err(error_map::parse_error_near("CHECK OPTION"));
                };
                rest.truncate(n - 4);
            }
        }
        // Depth-bounded as every statement (`depth`): a view's query is
        // the client's text too.
        let est = crate::engine::depth::preflight(rest.iter())?;
        // With their places in `sql`, so that the query's result names and
        // join chains get the same treatment as a statement's (below).
        let spanned = with_spans(sql, rest_start, &rest);
        let mut q = crate::engine::depth::bounded(est, move || {
            let p = Parser::new(&NorrMySql);
            let mut p = match spanned {
                Some(toks) => p.with_tokens_with_locations(toks),
                None => p.with_tokens(rest),
            };
            let q = p.parse_query().map_err(|e| {
                let msg = e.to_string();
                SqlError::parse(format!(
                    "You have an error in your SQL syntax; {}",
                    msg.strip_prefix("sql parser error: ").unwrap_or(&msg)
                ))
            })?;
            if p.peek_token().token != Token::EOF {
                return Err(error_map::parse_error_near(&p.peek_token().token.to_string()));
            }
            Ok(q)
        })?;
        crate::engine::dual::strip_query(&mut q);
        let mut st = ast::Statement::Query(q);
        crate::engine::join_chain::flatten(sql, &mut st);
        crate::engine::item_names::apply(sql, &mut st);
        let ast::Statement::Query(q) = st else {
            return Err(SqlError::internal("a view's query is no longer a query"));
        };
        v.query = q;
        Ok(true)
    })();
    match r {
        Ok(true) => Some(Ok(ViewStmt::Create(Box::new(v)))),
        Ok(false) => None,
        Err(e) => Some(Err(e)),
    }
}

/// `rest` (the tokens of `sql` from token `start` on, as `Cursor` splits
/// them, perhaps cut short at the end) with their places in `sql`; None if
/// the tokens do not line up.
fn with_spans(sql: &str, start: usize, rest: &[Token]) -> Option<Vec<TokenWithSpan>> {
    let all = Tokenizer::new(&NorrMySql, sql).tokenize_with_location().ok()?;
    let toks: Vec<TokenWithSpan> = all
        .into_iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_) | Token::EOF))
        .skip(start)
        .take(rest.len())
        .collect();
    (toks.len() == rest.len() && toks.iter().zip(rest).all(|(a, b)| a.token == *b)).then_some(toks)
}

/// Qualify the unqualified table names of a view's SELECT with `db` (CTE
/// names stay as they are).
pub fn qualify(q: &mut Query, db: &str) {
    let ctes = cte_names(q);
    let _ = ast::visit_relations_mut(q, |n| {
        if let [only] = n.0.as_slice() {
            let is_cte = only.as_ident().is_some_and(|i| ctes.iter().any(|c| c.eq_ignore_ascii_case(&i.value)));
            if !is_cte {
                let t = only.clone();
                n.0 = vec![ObjectNamePart::Identifier(Ident::with_quote('`', db)), t];
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

fn has_variable(q: &Query) -> bool {
    ast::visit_expressions(q, |e| match e {
        ast::Expr::Value(v) if matches!(v.value, ast::Value::Placeholder(_)) => ControlFlow::Break(()),
        ast::Expr::Identifier(i) if i.value.starts_with('@') && !i.value.starts_with("@@") => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

fn view_exists_err(name: &str) -> SqlError {
    error_map::table_exists(name)
}

fn session_text(s: &Session, var: &str, default: &str) -> String {
    match vars::get_system_var(s, var, false) {
        Some(v) => crate::engine::catalog::value_text(&v),
        None => default.to_string(),
    }
}

pub async fn run(e: &Engine, s: &mut Session, st: &ViewStmt) -> Result<QueryOutput, SqlError> {
    e.implicit_commit(s).await?;
    match st {
        ViewStmt::Create(cv) => create(e, s, cv).await,
        ViewStmt::Drop { names, if_exists } => drop(e, s, names, *if_exists).await,
    }
}

fn resolve(s: &Session, db: &Option<String>, name: &str) -> Result<(String, String), SqlError> {
    let db = match db {
        Some(d) => d.clone(),
        None => s.current_db.as_deref().ok_or_else(error_map::no_db)?.to_string(),
    };
    Ok((db, name.to_string()))
}

async fn create(e: &Engine, s: &mut Session, cv: &CreateView) -> Result<QueryOutput, SqlError> {
    let (db, name) = resolve(s, &cv.db, &cv.name)?;
    ddl::check_name(&name, "table")?;
    if infoschema::is_infoschema(&db) {
        return Err(error_map::db_access_denied(&s.user, &db));
    }
    if !e.catalog().db_exists(&db).await? {
        return Err(error_map::unknown_db(&db));
    }
    let store = e.catalog().views()?;
    let old = store.get(&db, &name).await?;
    if cv.alter && old.is_none() {
        return Err(error_map::no_such_table(&db, &name));
    }
    if (old.is_some() && !cv.alter && !cv.or_replace) || namespace::is_table_fresh(e, &db, &name).await? {
        return Err(view_exists_err(&name));
    }
    let mut q = (*cv.query).clone();
    if has_variable(&q) {
        return Err(SqlError::new(1351, "HY000", "View's SELECT contains a variable or parameter"));
    }
    if matches!(q.body.as_ref(), ast::SetExpr::Select(sel) if sel.into.is_some()) {
        return Err(SqlError::new(1350, "HY000", "View's SELECT contains a 'INTO' clause"));
    }
    // Unqualified names mean tables of the session's database, as in MySQL
    // (without one, compiling reports 1046).
    if let Some(cur) = s.current_db.clone() {
        qualify(&mut q, &cur);
    }
    if ast::visit_relations(&q, |n| {
        if ident_parts(n) == [db.clone(), name.clone()] {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .is_break()
    {
        return Err(SqlError::new(1462, "HY000", format!("`{db}`.`{name}` contains view recursion")));
    }
    // A view outlives the session: it cannot read a temporary table (MySQL).
    if !s.temp.is_empty() {
        let mut tmp = None;
        let _ = ast::visit_relations(&q, |n| {
            if let [d, t] = ident_parts(n).as_slice() {
                if crate::engine::temp_tables::lookup(s, d, t).is_some() {
                    tmp = Some(t.clone());
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        });
        if let Some(t) = tmp {
            return Err(SqlError::new(1352, "HY000", format!("View's SELECT refers to a temporary table '{t}'")));
        }
    }
    // Compiling checks tables and columns (1146, 1054) and names the result.
    let compiled = crate::engine::query::prepare_query(e, s, &q).await?;
    let result: Vec<String> = compiled.columns().iter().map(|c| c.name.clone()).collect();
    let columns = match &cv.columns {
        Some(list) => {
            if list.len() != result.len() {
                return Err(SqlError::new(
                    1353,
                    "HY000",
                    "In definition of view, derived table or common table expression, SELECT list and column names list have different column counts",
                ));
            }
            list.clone()
        }
        None => result,
    };
    for (i, c) in columns.iter().enumerate() {
        if columns[..i].iter().any(|p| p.eq_ignore_ascii_case(c)) {
            return Err(error_map::dup_column(c));
        }
    }
    let (user, host) = cv.definer.clone().unwrap_or_else(|| (s.user.clone(), "%".to_string()));
    let prev = old.as_ref().map(|o| &o.meta);
    let meta = ViewMeta {
        algorithm: cv
            .algorithm
            .clone()
            .or_else(|| if cv.alter { None } else { prev.map(|_| "UNDEFINED".to_string()) })
            .unwrap_or_else(|| "UNDEFINED".to_string()),
        definer: format!("{}@{}", quote_ident(&user), quote_ident(&host)),
        security: cv.security.clone().unwrap_or_else(|| "DEFINER".to_string()),
        check: cv.check,
        explicit_columns: cv.columns.is_some(),
        columns,
        select_sql: q.to_string(),
        charset_client: session_text(s, "character_set_client", "utf8mb4"),
        collation_connection: session_text(s, "collation_connection", "utf8mb4_0900_ai_ci"),
    };
    // The stored text must parse back to the same statement.
    let v = View { db: db.clone(), name: name.clone(), meta };
    if parse_select(&v).map(|p| p.to_string()) != Ok(v.meta.select_sql.clone()) {
        return Err(SqlError::unsupported(format!("a view over this SELECT (it does not print back): {q}")));
    }
    if !store.put(&v, cv.or_replace || cv.alter).await? {
        return Err(view_exists_err(&name));
    }
    if namespace::is_table_fresh(e, &db, &name).await? {
        // A table of the name was made meanwhile (on another SQL node; see
        // `namespace`): put back what the name was.
        match &old {
            Some(o) => store.put(o, true).await?,
            None => store.delete(&db, &name).await?,
        };
        return Err(view_exists_err(&name));
    }
    Ok(QueryOutput::ok(0))
}

async fn drop(
    e: &Engine,
    s: &mut Session,
    names: &[(Option<String>, String)],
    if_exists: bool,
) -> Result<QueryOutput, SqlError> {
    let store = e.catalog().views()?;
    let mut resolved = Vec::with_capacity(names.len());
    for (d, n) in names {
        resolved.push(resolve(s, d, n)?);
    }
    // MySQL checks every name first: a table among them is 1347, missing
    // views are 1051 together (notes under IF EXISTS).
    let mut missing = Vec::new();
    for (db, name) in &resolved {
        if store.get(db, name).await?.is_none() {
            if e.catalog().try_get(db, name).await?.is_some() {
                return Err(SqlError::new(1347, "HY000", format!("'{db}.{name}' is not VIEW")));
            }
            missing.push(format!("{db}.{name}"));
        }
    }
    if !missing.is_empty() && !if_exists {
        return Err(error_map::unknown_table(&missing.join(",")));
    }
    for (db, name) in &resolved {
        store.delete(db, name).await?;
    }
    for m in missing {
        s.warnings.push(crate::types::Warning {
            level: crate::types::WarningLevel::Note,
            code: 1051,
            message: format!("Unknown table '{m}'"),
        });
    }
    Ok(QueryOutput::ok(0))
}

/// Drop every view of `db` (DROP DATABASE).
pub async fn drop_all_in_db(e: &Engine, db: &str) -> Result<(), SqlError> {
    let store = e.catalog().views()?;
    for v in store.list_db(db).await? {
        store.delete(&v.db, &v.name).await?;
    }
    Ok(())
}

/// Table names of `q` in database `db` without the database (SHOW CREATE
/// VIEW omits the session's database, as MySQL: a dump then restores into
/// any database).
fn unqualify(q: &mut Query, db: &str) {
    let ctes = cte_names(q);
    let _ = ast::visit_relations_mut(q, |n| {
        if let [d, t] = n.0.as_slice() {
            let same_db = d.as_ident().is_some_and(|i| i.value == db);
            let shadowed = t.as_ident().is_some_and(|i| ctes.iter().any(|c| c.eq_ignore_ascii_case(&i.value)));
            if same_db && !shadowed {
                n.0 = vec![t.clone()];
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

/// The text SHOW CREATE VIEW prints, for a session in `current_db`.
pub fn create_text(v: &View, current_db: Option<&str>) -> String {
    let m = &v.meta;
    let select = match (current_db, parse_select(v)) {
        (Some(db), Ok(mut q)) => {
            unqualify(&mut q, db);
            q.to_string()
        }
        _ => m.select_sql.clone(),
    };
    let name = if current_db == Some(v.db.as_str()) {
        quote_ident(&v.name)
    } else {
        format!("{}.{}", quote_ident(&v.db), quote_ident(&v.name))
    };
    let cols = if m.explicit_columns {
        format!(" ({})", m.columns.iter().map(|c| quote_ident(c)).collect::<Vec<_>>().join(","))
    } else {
        String::new()
    };
    let check = match m.check {
        CheckOption::None => "",
        CheckOption::Local => " WITH LOCAL CHECK OPTION",
        CheckOption::Cascaded => " WITH CASCADED CHECK OPTION",
    };
    format!(
        "CREATE ALGORITHM={} DEFINER={} SQL SECURITY {} VIEW {}{} AS {}{}",
        m.algorithm, m.definer, m.security, name, cols, select, check
    )
}

/// SHOW CREATE VIEW (and SHOW CREATE TABLE of a view).
pub fn show_create(v: &View, current_db: Option<&str>) -> QueryOutput {
    let s = |x: &str| Value::str(x);
    let columns: Vec<ColumnMeta> = ["View", "Create View", "character_set_client", "collation_connection"]
        .iter()
        .map(|n| infoschema::col_s("", n))
        .collect();
    QueryOutput::Rows {
        columns: columns.into(),
        rows: vec![vec![
            s(&v.name),
            s(&create_text(v, current_db)),
            s(&v.meta.charset_client),
            s(&v.meta.collation_connection),
        ]],
    }
}

/// A view column as DESCRIBE and information_schema.COLUMNS show it.
pub struct ViewColumn {
    pub name: String,
    pub nullable: bool,
    pub ty: ColumnType,
    pub meta: SqlColumnMeta,
}

/// The native type matching a result column with no table column behind it
/// (for information_schema's lengths).
fn native_type(c: &ColumnMeta) -> ColumnType {
    let unsigned = c.flags & cf::UNSIGNED != 0;
    let binary = c.charset == charset::BINARY;
    let chars = if binary { c.column_length } else { c.column_length / 4 };
    match c.field_type {
        FieldType::Tiny => ColumnType::TinyInt { unsigned },
        FieldType::Short => ColumnType::SmallInt { unsigned },
        FieldType::Int24 => ColumnType::MediumInt { unsigned },
        FieldType::Long => ColumnType::Int { unsigned },
        FieldType::LongLong | FieldType::Bit | FieldType::Year => ColumnType::BigInt { unsigned },
        FieldType::Float => ColumnType::Float,
        FieldType::Double | FieldType::Null => ColumnType::Double,
        FieldType::NewDecimal => {
            let scale = c.decimals.min(38);
            let prec = c.column_length.saturating_sub((scale > 0) as u32 + (!unsigned) as u32).clamp(1, 38) as u8;
            ColumnType::Decimal { precision: prec.max(scale), scale }
        }
        FieldType::Date => ColumnType::Date,
        FieldType::Time => ColumnType::Time,
        FieldType::DateTime => ColumnType::DateTime,
        FieldType::Timestamp => ColumnType::Timestamp,
        FieldType::VarChar | FieldType::VarString | FieldType::Json if binary => ColumnType::Varbinary { len: chars },
        FieldType::VarChar | FieldType::VarString | FieldType::Json => {
            ColumnType::Varchar { len: chars, collation: Collation::CaseInsensitive }
        }
        FieldType::String if binary => ColumnType::Binary { len: chars },
        FieldType::String => ColumnType::Char { len: chars.min(255), collation: Collation::CaseInsensitive },
        FieldType::TinyBlob | FieldType::MediumBlob | FieldType::LongBlob | FieldType::Blob if binary => {
            ColumnType::Blob
        }
        FieldType::TinyBlob | FieldType::MediumBlob | FieldType::LongBlob | FieldType::Blob => {
            ColumnType::Text { collation: Collation::CaseInsensitive }
        }
    }
}

/// A type name for a result column with no table column behind it.
fn type_of(c: &ColumnMeta) -> String {
    let unsigned = if c.flags & cf::UNSIGNED != 0 { " unsigned" } else { "" };
    let chars = |len: u32| if c.charset == charset::BINARY { len } else { len / 4 };
    match c.field_type {
        FieldType::Tiny => format!("tinyint{unsigned}"),
        FieldType::Short => format!("smallint{unsigned}"),
        FieldType::Int24 => format!("mediumint{unsigned}"),
        FieldType::Long => format!("int{unsigned}"),
        FieldType::LongLong => format!("bigint{unsigned}"),
        FieldType::Float => "float".into(),
        FieldType::Double => "double".into(),
        FieldType::NewDecimal => {
            // The display length counts a sign (signed) and a point (scale > 0).
            let scale = c.decimals as u32;
            let prec = c.column_length.saturating_sub((scale > 0) as u32 + unsigned.is_empty() as u32);
            // A computed DECIMAL (SUM, ...) reports no length: MySQL's widest.
            let prec = if prec <= 1 { 65 } else { prec };
            format!("decimal({prec},{scale}){unsigned}")
        }
        FieldType::Date => "date".into(),
        FieldType::Time => "time".into(),
        FieldType::DateTime => "datetime".into(),
        FieldType::Timestamp => "timestamp".into(),
        FieldType::Year => "year".into(),
        FieldType::Json => "json".into(),
        FieldType::Bit => "bit(64)".into(),
        FieldType::Null => "binary(0)".into(),
        FieldType::VarChar | FieldType::VarString if c.charset == charset::BINARY => {
            format!("varbinary({})", chars(c.column_length))
        }
        FieldType::VarChar | FieldType::VarString => format!("varchar({})", chars(c.column_length)),
        FieldType::String if c.charset == charset::BINARY => format!("binary({})", chars(c.column_length)),
        FieldType::String => format!("char({})", chars(c.column_length)),
        FieldType::TinyBlob | FieldType::MediumBlob | FieldType::LongBlob | FieldType::Blob => {
            if c.charset == charset::BINARY {
                "longblob".into()
            } else {
                "longtext".into()
            }
        }
    }
}

/// The columns of view `db.name`, from compiling `SELECT * FROM` it: a
/// column that is a table's column has that column's definition.
pub async fn columns(e: &Engine, s: &Session, v: &View) -> Result<Vec<ViewColumn>, SqlError> {
    let sql = format!("SELECT * FROM {}.{}", quote_ident(&v.db), quote_ident(&v.name));
    let q = match crate::engine::parse_statement(&sql)? {
        crate::engine::Parsed::Sql(st) => match *st {
            ast::Statement::Query(q) => q,
            _ => return Err(SqlError::internal("SELECT did not parse as a query")),
        },
        _ => return Err(SqlError::internal("SELECT did not parse as a query")),
    };
    let compiled = crate::engine::query::prepare_query(e, s, &q).await.map_err(|_| view_error(&v.db, &v.name))?;
    let mut out = Vec::new();
    for c in compiled.columns() {
        let base = if !c.schema.is_empty() && !c.org_table.is_empty() && !c.org_name.is_empty() {
            e.catalog().try_get(&c.schema, &c.org_table).await.ok().flatten()
        } else {
            None
        };
        // A NOT NULL column read from the optional side of an outer join is
        // nullable in the view (the result column's flag says so).
        let from_table = base.as_ref().and_then(|t| {
            t.column(&c.org_name)
                .map(|(_, cd, m)| (cd.nullable || c.flags & cf::NOT_NULL == 0, cd.ty.clone(), m.clone()))
        });
        let (nullable, ty, meta) = match from_table {
            Some(x) => x,
            None => (
                c.flags & cf::NOT_NULL == 0,
                native_type(c),
                SqlColumnMeta {
                    sql_type: type_of(c),
                    fsp: if matches!(c.field_type, FieldType::DateTime | FieldType::Time | FieldType::Timestamp) {
                        c.decimals.min(6)
                    } else {
                        0
                    },
                    default: SqlDefault::None,
                    on_update_now: false,
                    comment: String::new(),
                    collation: (c.charset != charset::BINARY
                        && matches!(
                            c.field_type,
                            FieldType::VarChar
                                | FieldType::VarString
                                | FieldType::String
                                | FieldType::Blob
                                | FieldType::TinyBlob
                                | FieldType::MediumBlob
                                | FieldType::LongBlob
                        ))
                    .then(|| crate::engine::catalog::DEFAULT_COLLATION.to_string()),
                    hidden: false,
                },
            ),
        };
        out.push(ViewColumn { name: c.name.clone(), nullable, ty, meta });
    }
    Ok(out)
}

/// DESCRIBE / SHOW COLUMNS rows of a view (Field, Type, Null, Key,
/// Default, Extra [, Collation, Privileges, Comment with FULL]).
pub fn describe_rows(cols: &[ViewColumn], full: bool) -> Vec<Vec<Value>> {
    cols.iter()
        .map(|c| {
            let def = infoschema::default_display(&c.meta).map(|d| Value::str(&d)).unwrap_or(Value::Null);
            let null = Value::str(if c.nullable { "YES" } else { "NO" });
            if full {
                vec![
                    Value::str(&c.name),
                    Value::str(&c.meta.sql_type),
                    c.meta.collation.as_deref().map(Value::str).unwrap_or(Value::Null),
                    null,
                    Value::str(""),
                    def,
                    Value::str(""),
                    Value::str("select,insert,update,references"),
                    Value::str(&c.meta.comment),
                ]
            } else {
                vec![Value::str(&c.name), Value::str(&c.meta.sql_type), null, Value::str(""), def, Value::str("")]
            }
        })
        .collect()
}

/// The view `db.name`, or `err` (the table lookup's 1146) if there is none.
pub async fn view_or(e: &Engine, db: &str, name: &str, err: SqlError) -> Result<View, SqlError> {
    match e.catalog().views()?.get(db, name).await? {
        Some(v) => Ok(v),
        None => Err(err),
    }
}

/// SHOW CREATE VIEW: 1347 for a table, 1146 for neither.
pub async fn show_create_view(e: &Engine, s: &Session, db: &str, name: &str) -> Result<QueryOutput, SqlError> {
    if let Some(v) = e.catalog().views()?.get(db, name).await? {
        return Ok(show_create(&v, s.current_db.as_deref()));
    }
    if e.catalog().try_get(db, name).await?.is_some() {
        return Err(SqlError::new(1347, "HY000", format!("'{db}.{name}' is not VIEW")));
    }
    Err(error_map::no_such_table(db, name))
}

/// `user@host` as information_schema.VIEWS.DEFINER shows it.
fn definer_plain(d: &str) -> String {
    d.replace('`', "")
}

/// information_schema.VIEWS rows of the views `admits` lets through.
pub async fn infoschema_views(e: &Engine, scope: &infoschema::NameScope) -> Result<Vec<Vec<Value>>, SqlError> {
    let mut rows = Vec::new();
    let all = e.catalog().views()?.list().await?;
    // A view of the updatable shape over a view is updatable if that one is.
    // (db, view) -> (updatable shape, the (db, table) it reads).
    type Shape = (bool, Option<(String, String)>);
    let shapes: std::collections::HashMap<(String, String), Shape> = all
        .iter()
        .map(|v| {
            let (ok, base) = match parse_select(v) {
                Ok(q) => (crate::engine::view_expand::updatable_shape(&q), crate::engine::view_expand::base_key(&q)),
                Err(_) => (false, None),
            };
            ((v.db.clone(), v.name.clone()), (ok, base))
        })
        .collect();
    let updatable_view = |k: &(String, String)| {
        let mut k = k.clone();
        for _ in 0..crate::engine::views::MAX_VIEW_DEPTH {
            match shapes.get(&k) {
                None => return true,
                Some((false, _)) => return false,
                Some((true, None)) => return true,
                Some((true, Some(b))) => k = b.clone(),
            }
        }
        false
    };
    for v in all.iter() {
        if !scope.admits(&v.db, &v.name) {
            continue;
        }
        let updatable = updatable_view(&(v.db.clone(), v.name.clone()));
        rows.push(vec![
            Value::str("def"),
            Value::str(&v.db),
            Value::str(&v.name),
            Value::str(&v.meta.select_sql),
            Value::str(v.meta.check.name()),
            Value::str(if updatable { "YES" } else { "NO" }),
            Value::str(&definer_plain(&v.meta.definer)),
            Value::str(&v.meta.security),
            Value::str(&v.meta.charset_client),
            Value::str(&v.meta.collation_connection),
        ]);
    }
    Ok(rows)
}

/// The views `admits` lets through (information_schema.TABLES / COLUMNS).
pub async fn views_in_scope(e: &Engine, scope: &infoschema::NameScope) -> Result<Vec<View>, SqlError> {
    let dbs = e.catalog().databases().await?;
    let mut all = e.catalog().views()?.list().await?;
    all.retain(|v| dbs.contains_key(&v.db) && scope.admits(&v.db, &v.name));
    Ok(all)
}

/// RENAME TABLE of one view (`first_err`: the table rename's 1146, given
/// back when the name is no view either). A view moves within its database
/// or to another one; its SELECT names its tables qualified, so it reads the
/// same tables after the move.
pub async fn rename_view(
    e: &Engine,
    s: &Session,
    pairs: &[ast::RenameTable],
    first_err: SqlError,
) -> Result<QueryOutput, SqlError> {
    let [pair] = pairs else { return Err(first_err) };
    let (db, name) = ddl::resolve_name(s, &pair.old_name)?;
    let (to_db, to_name) = ddl::resolve_name(s, &pair.new_name)?;
    let store = e.catalog().views()?;
    let Some(v) = store.get(&db, &name).await? else { return Err(first_err) };
    ddl::check_name(&to_name, "table")?;
    if !e.catalog().db_exists(&to_db).await? {
        return Err(error_map::unknown_db(&to_db));
    }
    if namespace::is_table_fresh(e, &to_db, &to_name).await? || store.get(&to_db, &to_name).await?.is_some() {
        return Err(view_exists_err(&to_name));
    }
    let moved = View { db: to_db.clone(), name: to_name.clone(), meta: v.meta.clone() };
    if !store.put(&moved, false).await? {
        return Err(view_exists_err(&to_name));
    }
    if namespace::is_table_fresh(e, &to_db, &to_name).await? {
        // Lost the name to a table made meanwhile (see `namespace`).
        store.delete(&to_db, &to_name).await?;
        return Err(view_exists_err(&to_name));
    }
    store.delete(&db, &name).await?;
    Ok(QueryOutput::ok(0))
}
