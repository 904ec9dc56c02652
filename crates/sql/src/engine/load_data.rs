//! LOAD DATA LOCAL INFILE: bulk loading of a client's text file (CSV, TSV,
//! `mysqldump --tab` output) into a table.
//!
//! The statement runs in three steps, because the file's bytes arrive from
//! the client after the statement: `start` parses the statement, resolves the
//! table and its columns and opens the statement's transaction; the protocol
//! layer then asks the client for the file and hands each packet to `feed`,
//! which cuts complete records out of the stream and writes them in batches;
//! `finish` takes the last record, commits (autocommit) and reports
//! "Records: N  Deleted: N  Skipped: N  Warnings: N". Memory stays bounded by
//! one batch plus one partial record, whatever the file's size.
//!
//! The whole file is one statement: in autocommit mode one transaction, in
//! an explicit transaction undone to a savepoint when it fails, so a load is
//! never half applied. A client that disconnects mid-file ends the session,
//! which rolls the transaction back.
//!
//! Semantics follow MySQL's for LOCAL: a row with a duplicate key is skipped
//! with a warning (REPLACE: replaces the old row), a row a CHECK constraint
//! refuses is skipped with a warning, and a value that does not convert to
//! its column is adjusted with a warning as in MySQL's non-strict mode: an
//! empty or non-numeric field gives 0 (or its numeric prefix), an
//! out-of-range number the nearest limit, a too-long string its prefix, NULL
//! for a NOT NULL column the column type's implicit default. A date or time
//! that does not parse is an error (MySQL would store a zero date, which
//! NorrDB does not have). Missing fields leave their columns to the default
//! (warning 1261); extra fields are dropped (warning 1262).
//!
//! `LOAD DATA INFILE` without LOCAL reads a file on the server's host; that
//! is refused as MySQL refuses it with secure_file_priv unset (1290).

use crate::engine::catalog::SqlTable;
use crate::engine::dml::{self, BuiltRows, StoreFn};
use crate::engine::error_map::parse_error_near;
use crate::engine::expr::compile::{Compiler, ParamMap, Scope};
use crate::engine::expr::value::{numeric_prefix_len, Warnings};
use crate::engine::expr::{eval, CExpr, EvalCtx};
use crate::engine::fk_enforce::{self, StmtGuard};
use crate::engine::parse_ext::{self, Cursor};
use crate::engine::query::{resolve_tables, StmtCompiler};
use crate::engine::store;
use crate::engine::{exec, generated, txn_control, vars, Engine};
use crate::types::{QueryOutput, Session, SqlError};
use norr_signals::{ColumnId, ColumnType, Value};
use sqlparser::ast::{self, Statement};
use sqlparser::tokenizer::Token;
use std::sync::Arc;

/// Rows written per round trip to the data node.
const BATCH_ROWS: usize = 512;

/// What to do with a row whose key is already in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnDuplicate {
    /// Not said: an error without LOCAL, skip with a warning with LOCAL.
    Default,
    Ignore,
    Replace,
}

/// Where a field of the file goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Column(String),
    /// `@name`: a user variable, for the SET clause (or to drop the field).
    Var(String),
}

/// FIELDS and LINES options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Format {
    pub field_term: Vec<u8>,
    pub enclosed: Option<u8>,
    /// OPTIONALLY ENCLOSED: only for writing (SELECT INTO OUTFILE); reading
    /// treats it as ENCLOSED.
    pub optionally: bool,
    pub escaped: Option<u8>,
    pub line_start: Vec<u8>,
    pub line_term: Vec<u8>,
}

impl Default for Format {
    fn default() -> Format {
        Format {
            field_term: b"\t".to_vec(),
            enclosed: None,
            optionally: false,
            escaped: Some(b'\\'),
            line_start: Vec::new(),
            line_term: b"\n".to_vec(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadStmt {
    pub local: bool,
    pub file: String,
    pub on_duplicate: OnDuplicate,
    pub table: (Option<String>, String),
    pub format: Format,
    pub ignore_lines: u64,
    /// None: every visible column in table order.
    pub targets: Option<Vec<Target>>,
    /// The text after SET: `col = expr, ...`.
    pub set_text: Option<String>,
}

// ------------------------------------------------------------------ parsing

/// Parse the statement if it is a LOAD DATA (`None`: someone else's).
/// `words` are its first words, upper-cased.
pub fn parse(sql: &str, words: &[String]) -> Option<Result<LoadStmt, SqlError>> {
    let w = |i: usize| words.get(i).map(|s| s.as_str()).unwrap_or("");
    (w(0) == "LOAD" && w(1) == "DATA").then(|| parse_load(sql))
}

/// The SET clause starts at the first top-level `SET` that is not part of
/// `CHARACTER SET`.
fn split_set_clause(sql: &str) -> (&str, Option<&str>) {
    let words = parse_ext::words_with_pos(sql);
    for (k, &(s, e, depth)) in words.iter().enumerate() {
        let prev_is_character = k > 0 && {
            let (ps, pe, _) = words[k - 1];
            sql[ps..pe].eq_ignore_ascii_case("CHARACTER")
        };
        if depth == 0 && sql[s..e].eq_ignore_ascii_case("SET") && !prev_is_character {
            return (&sql[..s], Some(sql[e..].trim().trim_end_matches(';').trim()));
        }
    }
    (sql, None)
}

/// A one-character option (ENCLOSED BY, ESCAPED BY): MySQL takes the first
/// byte and refuses longer strings (1083).
fn one_char(s: &str) -> Result<Option<u8>, SqlError> {
    match s.as_bytes() {
        [] => Ok(None),
        [b] => Ok(Some(*b)),
        _ => Err(SqlError::new(1083, "42000", "Field separator argument is not what is expected; check the manual")),
    }
}

fn parse_load(sql: &str) -> Result<LoadStmt, SqlError> {
    let (head, set_text) = split_set_clause(sql);
    let mut c = Cursor::new(head)?;
    c.expect_word("LOAD")?;
    c.expect_word("DATA")?;
    let _ = c.eat_word("LOW_PRIORITY") || c.eat_word("CONCURRENT");
    let local = c.eat_word("LOCAL");
    c.expect_word("INFILE")?;
    let file = c.string()?;
    let on_duplicate = if c.eat_word("REPLACE") {
        OnDuplicate::Replace
    } else if c.eat_word("IGNORE") {
        OnDuplicate::Ignore
    } else {
        OnDuplicate::Default
    };
    c.expect_word("INTO")?;
    c.expect_word("TABLE")?;
    let table = c.object_name()?;
    if c.is_word("PARTITION") {
        return Err(SqlError::unsupported("LOAD DATA with explicit partition selection (PARTITION (...))"));
    }
    if c.eat_word("CHARACTER") {
        c.expect_word("SET")?;
        let cs = match c.peek() {
            Some(Token::SingleQuotedString(_)) => c.string()?,
            _ => c.ident()?,
        };
        let cs = cs.to_ascii_lowercase();
        if !matches!(cs.as_str(), "utf8mb4" | "utf8" | "utf8mb3" | "binary" | "ascii") {
            return Err(SqlError::unsupported(format!(
                "LOAD DATA CHARACTER SET {cs} (the file is read as utf8mb4; convert it first)"
            )));
        }
    }
    let mut format = Format::default();
    if c.eat_word("FIELDS") || c.eat_word("COLUMNS") {
        let mut any = false;
        if c.eat_word("TERMINATED") {
            c.expect_word("BY")?;
            format.field_term = c.string()?.into_bytes();
            any = true;
        }
        if c.is_word("OPTIONALLY") || c.is_word("ENCLOSED") {
            format.optionally = c.eat_word("OPTIONALLY");
            c.expect_word("ENCLOSED")?;
            c.expect_word("BY")?;
            format.enclosed = one_char(&c.string()?)?;
            any = true;
        }
        if c.eat_word("ESCAPED") {
            c.expect_word("BY")?;
            format.escaped = one_char(&c.string()?)?;
            any = true;
        }
        if !any {
            return Err(c.err());
        }
    }
    if c.eat_word("LINES") {
        let mut any = false;
        if c.eat_word("STARTING") {
            c.expect_word("BY")?;
            format.line_start = c.string()?.into_bytes();
            any = true;
        }
        if c.eat_word("TERMINATED") {
            c.expect_word("BY")?;
            format.line_term = c.string()?.into_bytes();
            any = true;
        }
        if !any {
            return Err(c.err());
        }
    }
    if format.line_term.is_empty() {
        // MySQL would take fixed-width rows; nobody writes files like that.
        return Err(SqlError::unsupported("LOAD DATA with an empty LINES TERMINATED BY"));
    }
    if format.field_term.is_empty() {
        return Err(SqlError::unsupported("LOAD DATA with an empty FIELDS TERMINATED BY (fixed-width rows)"));
    }
    let mut ignore_lines = 0;
    if c.eat_word("IGNORE") {
        ignore_lines = c.number()?;
        if !(c.eat_word("LINES") || c.eat_word("ROWS")) {
            return Err(c.err());
        }
    }
    let mut targets = None;
    if c.peek() == Some(&Token::LParen) {
        let group = c.paren_group()?;
        let mut list = Vec::new();
        let mut it = group.into_iter().peekable();
        while let Some(t) = it.next() {
            let target = match t {
                Token::AtSign => match it.next() {
                    Some(Token::Word(w)) => Target::Var(w.value.to_ascii_lowercase()),
                    Some(Token::SingleQuotedString(s)) | Some(Token::DoubleQuotedString(s)) => {
                        Target::Var(s.to_ascii_lowercase())
                    }
                    _ => return Err(parse_error_near("@")),
                },
                Token::Word(w) if w.quote_style.is_none() && w.value.starts_with('@') => {
                    Target::Var(w.value.trim_start_matches('@').to_ascii_lowercase())
                }
                Token::Word(w) => {
                    // `t.col` names the column too.
                    let mut name = w.value;
                    while it.peek() == Some(&Token::Period) {
                        it.next();
                        match it.next() {
                            Some(Token::Word(w2)) => name = w2.value,
                            _ => return Err(parse_error_near(".")),
                        }
                    }
                    Target::Column(name)
                }
                other => return Err(parse_error_near(&other.to_string())),
            };
            list.push(target);
            match it.next() {
                None => break,
                Some(Token::Comma) => {}
                Some(other) => return Err(parse_error_near(&other.to_string())),
            }
        }
        targets = Some(list);
    }
    if !(c.at_end() || (c.peek() == Some(&Token::SemiColon) && c.peek_at(1).is_none())) {
        return Err(c.err());
    }
    if set_text.is_some_and(|s| s.is_empty()) {
        return Err(parse_error_near(""));
    }
    Ok(LoadStmt {
        local,
        file,
        on_duplicate,
        table,
        format,
        ignore_lines,
        targets,
        set_text: set_text.map(str::to_string),
    })
}

// ------------------------------------------------------------------ records

/// One field of a record: NULL (`\N`, or an unenclosed NULL when fields are
/// enclosed) or its bytes with escapes resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Field {
    Null,
    Text(Vec<u8>),
}

/// What `next_record` found at the front of the buffer.
#[derive(Debug, PartialEq, Eq)]
enum Next {
    /// A complete record and the bytes it took (terminator included).
    Record(Vec<Field>, usize),
    /// Bytes before the next LINES STARTING BY prefix, to drop.
    Skip(usize),
    /// Not enough bytes yet.
    More,
}

/// The buffer ends where more bytes decide what comes next.
struct NeedMore;

/// Does `term` start at `buf[i..]`?
fn term_at(buf: &[u8], i: usize, term: &[u8], eof: bool) -> Result<bool, NeedMore> {
    let rest = &buf[i..];
    if rest.len() >= term.len() {
        Ok(rest.starts_with(term))
    } else if !eof && term.starts_with(rest) {
        Err(NeedMore)
    } else {
        Ok(false)
    }
}

fn unescape(b: u8) -> u8 {
    match b {
        b'0' => 0,
        b'b' => 8,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'Z' => 26,
        other => other,
    }
}

/// The escape sequence whose escape byte is `buf[i]`, resolved into
/// `value`; returns the bytes it took. An escape byte that ends the file
/// stands for itself.
fn take_escape(buf: &[u8], i: usize, eof: bool, value: &mut Vec<u8>) -> Result<usize, NeedMore> {
    match buf.get(i + 1) {
        Some(&n) => {
            value.push(unescape(n));
            Ok(2)
        }
        None if eof => {
            value.push(buf[i]);
            Ok(1)
        }
        None => Err(NeedMore),
    }
}

impl Format {
    /// The record at the front of `buf`. At `eof`, whatever is left is the
    /// last record (a file need not end with a line terminator).
    fn next_record(&self, buf: &[u8], eof: bool) -> Next {
        self.record(buf, eof).unwrap_or(Next::More)
    }

    /// Does a line or field terminator (or the end of the file) start at `i`?
    fn ends_field(&self, buf: &[u8], i: usize, eof: bool) -> Result<bool, NeedMore> {
        Ok(i == buf.len() || term_at(buf, i, &self.line_term, eof)? || term_at(buf, i, &self.field_term, eof)?)
    }

    fn record(&self, buf: &[u8], eof: bool) -> Result<Next, NeedMore> {
        let mut i = 0;
        if !self.line_start.is_empty() {
            match buf.windows(self.line_start.len()).position(|w| w == self.line_start.as_slice()) {
                Some(0) => i = self.line_start.len(),
                Some(p) => return Ok(Next::Skip(p)),
                None if eof => return Ok(Next::Skip(buf.len())),
                // Keep a possible partial prefix at the end.
                None => return Ok(Next::Skip(buf.len().saturating_sub(self.line_start.len() - 1))),
            }
        }
        let mut fields = Vec::new();
        loop {
            // One field starting at i.
            let mut value = Vec::new();
            let mut escaped_n = false;
            let enclosed = self.enclosed.filter(|&e| buf.get(i) == Some(&e));
            if let Some(e) = enclosed {
                i += 1;
                loop {
                    let Some(&b) = buf.get(i) else {
                        if !eof {
                            return Err(NeedMore);
                        }
                        // Unterminated quote at the end of the file: take it as is.
                        fields.push(Field::Text(value));
                        return Ok(Next::Record(fields, buf.len()));
                    };
                    if Some(b) == self.escaped && b != e {
                        i += take_escape(buf, i, eof, &mut value)?;
                        continue;
                    }
                    if b == e {
                        match buf.get(i + 1) {
                            Some(&n) if n == e => {
                                value.push(e);
                                i += 2;
                                continue;
                            }
                            None if !eof => return Err(NeedMore),
                            // The closing quote counts only before a terminator.
                            _ if self.ends_field(buf, i + 1, eof)? => {
                                i += 1;
                                break;
                            }
                            _ => {}
                        }
                    }
                    value.push(b);
                    i += 1;
                }
            } else {
                while !self.ends_field(buf, i, eof)? {
                    let b = buf[i];
                    if Some(b) == self.escaped {
                        escaped_n |= value.is_empty() && buf.get(i + 1) == Some(&b'N');
                        i += take_escape(buf, i, eof, &mut value)?;
                    } else {
                        value.push(b);
                        i += 1;
                    }
                }
            }
            let is_null =
                enclosed.is_none() && ((escaped_n && value == b"N") || (self.enclosed.is_some() && value == b"NULL"));
            fields.push(if is_null { Field::Null } else { Field::Text(value) });
            // What ends the field: the line, the field, or the file.
            if i >= buf.len() {
                return if eof { Ok(Next::Record(fields, buf.len())) } else { Err(NeedMore) };
            }
            if term_at(buf, i, &self.line_term, eof)? {
                return Ok(Next::Record(fields, i + self.line_term.len()));
            }
            if term_at(buf, i, &self.field_term, eof)? {
                i += self.field_term.len();
            } else {
                // After a closing quote, junk before the terminator: MySQL
                // keeps reading the field; we end it here and go on.
                i += 1;
            }
        }
    }
}

// ------------------------------------------------------------------ the job

/// A LOAD DATA LOCAL between `start` and `finish`, kept in the session.
pub struct LoadJob {
    file: String,
    table: Arc<SqlTable>,
    format: Format,
    replace: bool,
    /// Where each field goes: a column, or a user variable slot.
    targets: Vec<Target>,
    /// Column ids of the `Column` targets, then of the SET columns, in the
    /// order the raw rows list their values.
    columns: Vec<ColumnId>,
    /// SET col = expr (None: DEFAULT), evaluated with the row's columns.
    sets: Vec<Option<CExpr>>,
    /// Slot in `ctx.uservals` of each user variable the SET clause reads,
    /// by name.
    var_slots: Vec<(String, usize)>,
    ctx: EvalCtx<'static>,
    fk_on: bool,
    guard: Option<StmtGuard>,
    /// Unparsed bytes: at most one partial record.
    pending: Vec<u8>,
    rows: Vec<Vec<Option<Value>>>,
    lines_to_skip: u64,
    records: u64,
    written_rows: u64,
    affected: u64,
    duplicates: u64,
    first_ai: Option<u64>,
    error: Option<SqlError>,
    /// Values of the user variables after the last record (MySQL leaves
    /// them set).
    last_vars: Vec<(String, Value)>,
}

/// Statement start: everything that can fail before the client sends a byte.
pub async fn start(e: &Engine, s: &mut Session, st: &LoadStmt) -> Result<QueryOutput, SqlError> {
    if !st.local {
        return Err(SqlError::new(
            1290,
            "HY000",
            "The MySQL server is running with the --secure-file-priv option so it cannot execute this statement",
        ));
    }
    if vars::global_value("local_infile").is_none_or(|v| v.as_i64() != Some(1)) {
        return Err(SqlError::new(
            3948,
            "42000",
            "Loading local data is disabled; this must be enabled on both the client and server sides",
        ));
    }
    let (db, name) = &st.table;
    let quoted = match db {
        Some(db) => format!("`{}`.`{}`", db.replace('`', "``"), name.replace('`', "``")),
        None => format!("`{}`", name.replace('`', "``")),
    };
    // The SET clause as an INSERT ... SET, which the SQL parser knows; it
    // also names the table for the resolver.
    let text = match &st.set_text {
        Some(set) => format!("INSERT INTO {quoted} SET {set}"),
        None => format!("INSERT INTO {quoted} VALUES ()"),
    };
    let stmt = crate::engine::parse_sqlparser(&text)?;
    let Statement::Insert(ins) = &stmt else { return Err(SqlError::internal("LOAD DATA: not an INSERT")) };
    let tables = match resolve_tables(e, s, &stmt).await {
        Ok(t) => t,
        Err(err) if err.code == 1146 => {
            let db_name = db.clone().or_else(|| s.current_db.as_deref().map(str::to_string)).unwrap_or_default();
            if e.catalog().views()?.get(&db_name, name).await?.is_some() {
                return Err(SqlError::unsupported("LOAD DATA into a view (load its base table)"));
            }
            return Err(err);
        }
        Err(err) => return Err(err),
    };
    let ast::TableObject::TableName(tname) = &ins.table else {
        return Err(SqlError::internal("LOAD DATA: no table"));
    };
    let table = tables.get(tname)?;
    let t = &table;

    let targets: Vec<Target> = match &st.targets {
        Some(list) => list.clone(),
        None => t
            .columns_visible()
            .filter(|(id, _, _)| !generated::is_generated(t, *id))
            .map(|(_, col, _)| Target::Column(col.name.clone()))
            .collect(),
    };
    let mut columns = Vec::new();
    for target in &targets {
        if let Target::Column(n) = target {
            let id = t
                .column(n)
                .map(|(id, _, _)| id)
                .ok_or_else(|| crate::engine::error_map::unknown_column(n, "field list"))?;
            if columns.contains(&id) {
                return Err(SqlError::new(1110, "42000", format!("Column '{n}' specified twice")));
            }
            if generated::is_generated(t, id) {
                return Err(generated::value_not_allowed(&t.def.columns[id as usize].name, &t.name));
            }
            columns.push(id);
        }
    }

    // SET col = expr: compiled against the table's columns, with the
    // file's user variables.
    let pm = ParamMap::from_statement(&stmt);
    let mut sc = StmtCompiler::new(&tables, pm.clone());
    let scope: Scope = dml::table_scope(t, &t.name);
    let mut sets = Vec::new();
    for a in &ins.assignments {
        let id = dml::assignment_col(t, a)?;
        if columns.contains(&id) {
            let n = &t.def.columns[id as usize].name;
            return Err(SqlError::new(1110, "42000", format!("Column '{n}' specified twice")));
        }
        if generated::is_generated(t, id) {
            return Err(generated::value_not_allowed(&t.def.columns[id as usize].name, &t.name));
        }
        columns.push(id);
        let is_default = matches!(&a.value, ast::Expr::Identifier(i)
            if i.value.eq_ignore_ascii_case("default") && i.quote_style.is_none());
        if is_default {
            sets.push(None);
            continue;
        }
        let mut comp = Compiler::plain(&scope, None, &pm, "field list", &mut sc);
        sets.push(Some(comp.compile(&a.value)?.0));
    }
    if !sc.subs.is_empty() {
        return Err(SqlError::unsupported("subqueries in LOAD DATA ... SET"));
    }
    let sysvars = std::mem::take(&mut sc.sysvars);
    let uservars = std::mem::take(&mut sc.uservars);
    let mut ctx = exec::make_ctx(s, &[], &sysvars, &uservars)?;
    ctx.warnings = Warnings::default();
    let var_slots =
        uservars.iter().enumerate().map(|(k, n)| (n.trim_start_matches('@').to_ascii_lowercase(), k)).collect();

    let fk_on = fk_enforce::active(s, t);
    txn_control::begin_statement(e, s);
    let guard = StmtGuard::begin(s).await;
    let guard = match guard {
        Ok(g) => Some(g),
        Err(err) => return txn_control::end_statement(e, s, Err(err)).await,
    };
    s.load_job = Some(Box::new(LoadJob {
        file: st.file.clone(),
        table: table.clone(),
        format: st.format.clone(),
        replace: st.on_duplicate == OnDuplicate::Replace,
        targets,
        columns,
        sets,
        var_slots,
        ctx,
        fk_on,
        guard,
        pending: Vec::new(),
        rows: Vec::new(),
        lines_to_skip: st.ignore_lines,
        records: 0,
        written_rows: 0,
        affected: 0,
        duplicates: 0,
        first_ai: None,
        error: None,
        last_vars: Vec::new(),
    }));
    Ok(QueryOutput::ok(0))
}

/// The file the client is to send, while a LOAD DATA LOCAL waits for it.
pub fn pending_file(s: &Session) -> Option<String> {
    s.load_job.as_ref().map(|j| j.file.clone())
}

/// One packet of the client's file.
pub async fn feed(e: &Engine, s: &mut Session, data: &[u8]) {
    let Some(mut job) = s.load_job.take() else { return };
    if job.error.is_none() {
        job.pending.extend_from_slice(data);
        if let Err(err) = job.take_records(e, s, false).await {
            job.error = Some(err);
        } else if job.pending.len() as u64 > job.ctx.max_packet.max(MIN_RECORD_BYTES) {
            // One record without its end (a file with other terminators
            // than the statement says, or no line ends at all) would grow
            // without bound: refused past max_allowed_packet, which no row
            // can be longer than anyway. The rest of the file is read and
            // dropped (the protocol must reach its end).
            job.error = Some(record_too_long(job.ctx.max_packet));
            job.pending = Vec::new();
        }
    }
    s.load_job = Some(job);
}

/// Records up to this many bytes are always taken, whatever a session's
/// max_allowed_packet (whose minimum is 1 KiB).
const MIN_RECORD_BYTES: u64 = 64 << 10;

/// 1153 (ER_NET_PACKET_TOO_LARGE) for a record of the file longer than
/// max_allowed_packet, saying what to check.
fn record_too_long(max_packet: u64) -> SqlError {
    SqlError::new(
        1153,
        "08S01",
        format!(
            "Got a packet bigger than 'max_allowed_packet' bytes: a record of the LOAD DATA file is longer than \
             max_allowed_packet ({max_packet} bytes); check the FIELDS and LINES TERMINATED BY clauses against the \
             file, or raise max_allowed_packet"
        ),
    )
}

/// The end of the file (`aborted`: the client could not send it): the last
/// record, then the statement's end.
pub async fn finish(e: &Engine, s: &mut Session, aborted: Option<SqlError>) -> Result<QueryOutput, SqlError> {
    let Some(mut job) = s.load_job.take() else { return Err(SqlError::internal("no LOAD DATA in progress")) };
    let mut res = match (aborted, job.error.take()) {
        (_, Some(err)) | (Some(err), None) => Err(err),
        (None, None) => job.take_records(e, s, true).await,
    };
    if res.is_ok() {
        res = job.write(e, s).await;
    }
    let res = match job.guard.take() {
        Some(g) => g.finish(s, res).await,
        None => res,
    };
    let res = txn_control::end_statement(e, s, res).await;
    s.warnings = std::mem::take(&mut job.ctx.warnings.list);
    res?;
    for (name, v) in job.last_vars.drain(..) {
        vars::set_user_var(s, &name, v);
    }
    if let Some(first) = job.first_ai {
        s.last_insert_id = first;
    }
    let skipped = if job.replace { 0 } else { job.duplicates };
    let deleted = if job.replace { job.duplicates } else { 0 };
    let info =
        format!("Records: {}  Deleted: {deleted}  Skipped: {skipped}  Warnings: {}", job.records, s.warnings.len());
    Ok(QueryOutput::Ok { affected_rows: job.affected, last_insert_id: job.first_ai.unwrap_or(0), info })
}

/// A session that ends during a load (the client went away mid-file): the
/// statement is undone with the session's transaction.
pub fn abandon(s: &mut Session) {
    s.load_job = None;
}

impl LoadJob {
    /// Cut the complete records out of `pending` (at `eof`: all of it) and
    /// write them in batches.
    async fn take_records(&mut self, e: &Engine, s: &mut Session, eof: bool) -> Result<(), SqlError> {
        let mut at = 0;
        loop {
            if eof && at >= self.pending.len() {
                break;
            }
            match self.format.next_record(&self.pending[at..], eof) {
                Next::More => break,
                Next::Skip(n) => {
                    if n == 0 {
                        break;
                    }
                    at += n;
                }
                Next::Record(fields, n) => {
                    at += n.max(1);
                    if self.lines_to_skip > 0 {
                        self.lines_to_skip -= 1;
                        continue;
                    }
                    self.records += 1;
                    self.add_record(fields)?;
                    if self.rows.len() >= BATCH_ROWS {
                        self.pending.drain(..at);
                        at = 0;
                        self.write(e, s).await?;
                    }
                }
            }
        }
        self.pending.drain(..at.min(self.pending.len()));
        Ok(())
    }

    /// One record as a raw row: the column targets' values, then the SET
    /// columns' values.
    fn add_record(&mut self, fields: Vec<Field>) -> Result<(), SqlError> {
        let rowno = self.records;
        let n_targets = self.targets.len();
        if fields.len() < n_targets {
            self.ctx.warnings.push(1261, format!("Row {rowno} doesn't contain data for all columns"));
        } else if fields.len() > n_targets {
            self.ctx
                .warnings
                .push(1262, format!("Row {rowno} was truncated; it contained more data than there were input columns"));
        }
        let width = self.table.def.columns.len();
        let mut raw: Vec<Option<Value>> = Vec::with_capacity(self.columns.len());
        // The row as SET expressions see it: loaded columns, NULL elsewhere.
        let mut visible = if self.sets.is_empty() { Vec::new() } else { vec![Value::Null; width] };
        let mut fields = fields.into_iter();
        self.last_vars.clear();
        for target in &self.targets {
            let v = match fields.next() {
                Some(Field::Text(b)) => Some(Value::Bytes(b)),
                Some(Field::Null) => Some(Value::Null),
                None => None,
            };
            match target {
                Target::Column(_) => {
                    let id = self.columns[raw.len()];
                    if let (Some(x), false) = (&v, visible.is_empty()) {
                        visible[id as usize] = x.clone();
                    }
                    raw.push(v);
                }
                Target::Var(name) => {
                    let v = v.unwrap_or(Value::Null);
                    for (n, slot) in &self.var_slots {
                        if n == name {
                            if let Some(x) = self.ctx.uservals.get_mut(*slot) {
                                *x = v.clone();
                            }
                        }
                    }
                    self.last_vars.push((name.clone(), v));
                }
            }
        }
        for set in &self.sets {
            raw.push(match set {
                None => None,
                Some(expr) => Some(eval(expr, &visible, &mut self.ctx)?),
            });
        }
        self.rows.push(raw);
        Ok(())
    }

    /// Write the rows collected so far.
    async fn write(&mut self, e: &Engine, s: &mut Session) -> Result<(), SqlError> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let raw = std::mem::take(&mut self.rows);
        let base = self.written_rows;
        self.written_rows += raw.len() as u64;
        let store: StoreFn = lenient_store;
        let BuiltRows { rows, first_ai, need_ai, .. } =
            dml::build_rows(e, &self.table, &self.columns, raw, &mut self.ctx, true, base, Some(store)).await?;
        if need_ai > 0 && self.first_ai.is_none() {
            self.first_ai = Some(first_ai);
        }
        let found_rows = s.client_found_rows;
        let txn = txn_control::txn_mut(s)?;
        let (affected, dups) =
            dml::load_batch(e, txn, &self.table, &rows, self.replace, &mut self.ctx, found_rows, self.fk_on).await?;
        self.affected += affected;
        self.duplicates += dups;
        Ok(())
    }
}

// ------------------------------------------------------------------ values

/// MySQL's non-strict conversion, which LOAD DATA LOCAL uses: try the strict
/// one, and when it refuses the value, store the adjusted value MySQL would
/// with a warning. Dates and times that do not parse stay errors.
fn lenient_store(
    t: &SqlTable,
    c: usize,
    v: Value,
    row: u64,
    zone: Option<&crate::engine::functions::tz::Zone>,
    w: &mut Warnings,
) -> Result<Value, SqlError> {
    let col = &t.def.columns[c];
    let first = match store::store_col(t, c, v.clone(), row, zone, w) {
        Ok(x) => return Ok(x),
        Err(err) => err,
    };
    let adjusted = match first.code {
        1048 => implicit_default(&col.ty),
        1264 => clip_number(&v, &col.ty),
        1265 | 1366 if col.ty.int_range().is_some() || is_real(&col.ty) => numeric_prefix(&v),
        1406 | 1265 if col.ty.is_bytes() => truncate_text(v, &col.ty),
        _ => None,
    };
    let Some(x) = adjusted else { return Err(first) };
    let warning = match first.code {
        1048 => {
            (1263, format!("Column set to default value; NULL supplied to NOT NULL column '{}' at row {row}", col.name))
        }
        code => (code, first.message.clone()),
    };
    // The adjusted value may itself be out of range (a prefix of "9e99").
    let stored = match store::store_col(t, c, x.clone(), row, zone, w) {
        Ok(y) => y,
        Err(e2) if e2.code == 1264 => match clip_number(&x, &col.ty) {
            Some(y) => store::store_col(t, c, y, row, zone, w)?,
            None => return Err(first),
        },
        Err(_) => return Err(first),
    };
    w.push(warning.0, warning.1);
    Ok(stored)
}

fn is_real(ty: &ColumnType) -> bool {
    matches!(ty, ColumnType::Float | ColumnType::Double | ColumnType::Decimal { .. })
}

/// The value a NOT NULL column takes for NULL in non-strict mode.
fn implicit_default(ty: &ColumnType) -> Option<Value> {
    if ty.int_range().is_some() || is_real(ty) {
        Some(Value::Int(0))
    } else if ty.is_bytes() {
        Some(Value::Bytes(Vec::new()))
    } else {
        None
    }
}

/// The longest numeric prefix of a text ("12abc" -> 12, "" -> 0).
fn numeric_prefix(v: &Value) -> Option<Value> {
    let Value::Bytes(b) = v else { return None };
    let text = String::from_utf8_lossy(b);
    let t = text.trim_start();
    Some(match numeric_prefix_len(t.as_bytes()) {
        Some(end) => Value::Bytes(t.as_bytes()[..end].to_vec()),
        None => Value::Int(0),
    })
}

/// An out-of-range number clipped to the column's range.
fn clip_number(v: &Value, ty: &ColumnType) -> Option<Value> {
    let negative = match v {
        Value::Int(i) => *i < 0,
        Value::Double(f) => *f < 0.0,
        Value::Float(f) => *f < 0.0,
        Value::Decimal(d) => d.mantissa < 0,
        Value::Bytes(b) => String::from_utf8_lossy(b).trim_start().starts_with('-'),
        _ => false,
    };
    if let Some((lo, hi)) = ty.int_range() {
        let x = if negative { lo } else { hi };
        return Some(if ty.is_unsigned_int() { Value::UInt(x as u64) } else { Value::Int(x as i64) });
    }
    match ty {
        ColumnType::Float => Some(Value::Double(if negative { -(f32::MAX as f64) } else { f32::MAX as f64 })),
        ColumnType::Double => Some(Value::Double(if negative { f64::MIN } else { f64::MAX })),
        ColumnType::Decimal { precision, scale } => {
            let digits = "9".repeat((*precision).saturating_sub(*scale) as usize);
            let frac = "9".repeat(*scale as usize);
            let text = match (digits.is_empty(), frac.is_empty()) {
                (_, true) => digits,
                (true, false) => format!("0.{frac}"),
                (false, false) => format!("{digits}.{frac}"),
            };
            let text = if negative { format!("-{text}") } else { text };
            Some(Value::Bytes(text.into_bytes()))
        }
        _ => None,
    }
}

/// A string cut to the column's length in characters (bytes for binary
/// columns).
fn truncate_text(v: Value, ty: &ColumnType) -> Option<Value> {
    let Value::Bytes(b) = v else { return None };
    let chars = |max: u32| {
        let text = String::from_utf8_lossy(&b);
        Some(Value::Bytes(text.chars().take(max as usize).collect::<String>().into_bytes()))
    };
    match ty {
        ColumnType::Char { len, .. } | ColumnType::Varchar { len, .. } => chars(*len),
        ColumnType::Binary { len } | ColumnType::Varbinary { len } => {
            Some(Value::Bytes(b[..b.len().min(*len as usize)].to_vec()))
        }
        ColumnType::Blob => Some(Value::Bytes(b[..b.len().min(norr_signals::MAX_VALUE_BYTES)].to_vec())),
        ColumnType::Text { .. } => {
            let mut end = b.len().min(norr_signals::MAX_VALUE_BYTES);
            while end > 0 && std::str::from_utf8(&b[..end]).is_err() {
                end -= 1;
            }
            Some(Value::Bytes(b[..end].to_vec()))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(f: &Format, data: &[u8]) -> Vec<Vec<Field>> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < data.len() {
            match f.next_record(&data[at..], true) {
                Next::Record(r, n) => {
                    out.push(r);
                    at += n;
                }
                Next::Skip(n) => at += n,
                Next::More => panic!("more at eof"),
            }
        }
        out
    }

    fn t(s: &str) -> Field {
        Field::Text(s.as_bytes().to_vec())
    }

    #[test]
    fn tab_separated_with_escapes() {
        let f = Format::default();
        let r = records(&f, b"1\ta\\tb\t\\N\n2\t\\\\x\t\n");
        assert_eq!(r, vec![vec![t("1"), t("a\tb"), Field::Null], vec![t("2"), t("\\x"), t("")]]);
    }

    #[test]
    fn csv_enclosed_with_doubled_quotes_and_newlines() {
        let f = Format {
            field_term: b",".to_vec(),
            enclosed: Some(b'"'),
            line_term: b"\r\n".to_vec(),
            ..Format::default()
        };
        let r = records(&f, b"1,\"a,\"\"b\"\"\nc\",NULL,\"NULL\"\r\n2,x,,\r\n");
        assert_eq!(r, vec![vec![t("1"), t("a,\"b\"\nc"), Field::Null, t("NULL")], vec![t("2"), t("x"), t(""), t("")]]);
    }

    #[test]
    fn last_line_without_terminator_and_line_prefix() {
        let f = Format { line_start: b"xxx".to_vec(), field_term: b",".to_vec(), ..Format::default() };
        let r = records(&f, b"xxx1,a\nskip me\nyyxxx2,b");
        assert_eq!(r, vec![vec![t("1"), t("a")], vec![t("2"), t("b")]]);
    }

    #[test]
    fn streaming_waits_for_whole_records() {
        let f = Format {
            field_term: b"||".to_vec(),
            enclosed: Some(b'\''),
            line_term: b"\r\n".to_vec(),
            ..Format::default()
        };
        let data = b"1||'a||b'\r\n2||c\r\n";
        // Every cut of the stream gives the same records.
        for cut in 0..data.len() {
            let mut out = Vec::new();
            let mut buf = data[..cut].to_vec();
            let mut rest = &data[cut..];
            loop {
                let eof = rest.is_empty();
                match f.next_record(&buf, eof) {
                    Next::Record(r, n) => {
                        out.push(r);
                        buf.drain(..n);
                        if eof && buf.is_empty() {
                            break;
                        }
                    }
                    Next::Skip(n) => {
                        buf.drain(..n);
                    }
                    Next::More => {
                        assert!(!eof, "more at eof, cut {cut}");
                        buf.extend_from_slice(rest);
                        rest = &[];
                    }
                }
                if eof && buf.is_empty() {
                    break;
                }
            }
            assert_eq!(out, vec![vec![t("1"), t("a||b")], vec![t("2"), t("c")]], "cut {cut}");
        }
    }

    #[test]
    fn parses_the_statement() {
        let sql = "LOAD DATA LOCAL INFILE '/tmp/x.csv' REPLACE INTO TABLE db.t CHARACTER SET utf8mb4 \
                   FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"' ESCAPED BY '' \
                   LINES TERMINATED BY '\\r\\n' IGNORE 1 LINES (a, @b, c) SET d = @b * 2, e = DEFAULT";
        let st = parse_load(sql).unwrap();
        assert!(st.local);
        assert_eq!(st.file, "/tmp/x.csv");
        assert_eq!(st.on_duplicate, OnDuplicate::Replace);
        assert_eq!(st.table, (Some("db".into()), "t".into()));
        assert_eq!(st.format.field_term, b",");
        assert_eq!(st.format.enclosed, Some(b'"'));
        assert!(st.format.optionally);
        assert_eq!(st.format.escaped, None);
        assert_eq!(st.format.line_term, b"\r\n");
        assert_eq!(st.ignore_lines, 1);
        assert_eq!(
            st.targets,
            Some(vec![Target::Column("a".into()), Target::Var("b".into()), Target::Column("c".into())])
        );
        assert_eq!(st.set_text.as_deref(), Some("d = @b * 2, e = DEFAULT"));
        assert!(parse_load("LOAD DATA LOCAL INFILE 'f' INTO TABLE t FIELDS ENCLOSED BY 'ab'").is_err());
        assert!(parse_load("LOAD DATA LOCAL INFILE 'f' INTO TABLE t garbage").is_err());
        assert!(parse_load("LOAD DATA INFILE 'f' INTO TABLE t").is_ok_and(|s| !s.local));
    }

    #[test]
    fn numeric_prefixes() {
        let p = |s: &str| numeric_prefix(&Value::Bytes(s.as_bytes().to_vec()));
        assert_eq!(p(""), Some(Value::Int(0)));
        assert_eq!(p("abc"), Some(Value::Int(0)));
        assert_eq!(p(" 12abc"), Some(Value::Bytes(b"12".to_vec())));
        assert_eq!(p("-3.5e2x"), Some(Value::Bytes(b"-3.5e2".to_vec())));
        assert_eq!(p("7e"), Some(Value::Bytes(b"7".to_vec())));
    }
}
