//! The SQL engine: parses statements and dispatches them. Owner of this file:
//! catalog engineer (see DESIGN.md for who owns the submodules).
//!
//! Dispatch: SELECT -> `query::execute_query`, INSERT/REPLACE/UPDATE/DELETE ->
//! `dml::execute_*`, EXPLAIN -> `explain::execute_explain` (query engineer);
//! everything else (DDL, SHOW, SET, USE, transactions) is handled here and in
//! the catalog modules.

pub mod acl;
pub mod alter;
pub mod alter_generated;
pub mod alter_text;
pub mod auto_inc_cache;
pub mod bit;
pub mod catalog;
pub mod check_constraints;
pub mod const_prop;
pub mod create_from;
pub mod ddl;
pub mod default_fn;
pub mod depth;
pub mod dialect;
pub mod do_stmt;
pub mod engine_status;
pub mod enumset;
pub mod error_map;
pub mod fk;
pub mod fk_ddl;
pub mod fk_enforce;
pub mod found_rows;
pub mod full_group_by;
pub mod generated;
pub mod index_stats;
pub mod inert_vars;
pub mod infoschema;
pub mod insert_values;
pub mod json;
pub mod json_table;
pub mod json_table_lateral;
pub mod load_data;
pub mod lock_statements;
pub mod memory;
pub mod multi_table_dml;
pub mod multi_table_text;
pub mod namespace;
pub mod parse_ext;
pub mod show;
pub mod slow_log;
pub mod store;
pub mod table_locks;
pub mod table_maintenance;
pub mod table_stats;
pub mod table_values;
pub mod temp_tables;
pub mod text_cache;
pub mod ts_zone;
pub mod txn_control;
pub mod user_lock_fns;
pub mod user_locks;
pub mod vars;
pub mod view_ddl;
pub mod view_dml;
pub mod view_expand;
pub mod views;

// Query engineer's modules.
pub mod dml;
pub mod dual;
pub mod exec;
pub mod exec_time;
pub mod explain;
pub mod expr;
pub mod from_parens;
pub mod functions;
pub mod item_names;
pub mod join_chain;
pub mod join_nests;
pub mod join_plan;
pub mod join_tree;
pub mod lock_of_text;
pub mod locked_limit;
pub mod partition;
pub mod plan;
pub mod plan_cache;
pub mod pushed_agg;
pub mod query;
pub mod read_only_ddl;
pub mod recursive;
pub mod relations;
pub mod rollup;
pub mod row_estimates;
pub mod row_layout;
pub mod row_lock;
pub mod scan_order;
pub mod select_into;
pub mod sort_keys;
pub mod sort_prefix;
pub mod sql_prepare;
pub mod stream;
pub mod window;

use crate::types::{ColumnMeta, QueryOutput, Session, SqlError, Warning, WarningLevel};
use catalog::{Catalog, PartitionInfo};
use norr_client::Client;
use norr_signals::Value;
use parse_ext::ShowStmt;
use sqlparser::ast::{self, Expr, ObjectName, ObjectType, Statement};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Reported as @@version and in the handshake.
    pub version: String,
    pub max_allowed_packet: u64,
    /// @@port (the SQL listener's port).
    pub port: u16,
    /// @@hostname.
    pub hostname: String,
    /// Native partitions of a table created without PARTITION BY (0: the node decides).
    pub default_partitions: u32,
    /// How long a session polls for the data node's reply before sleeping
    /// (`ConnectOptions::reply_spin`; zero never spins).
    pub reply_spin: std::time::Duration,
    /// @@socket: the Unix socket sqld listens on (empty: none).
    pub socket: String,
    /// Start value of @@global.max_connections (the server's configured limit);
    /// SET GLOBAL changes it for new connections (`Backend::max_connections`).
    pub max_connections: u64,
    /// This SQL node's name, stable across its restarts: it tags the hidden
    /// tables of temporary tables, and a start drops those an earlier run
    /// left (`temp_tables`). Empty: a per-process tag and no sweep.
    pub node_name: String,
    /// Most rows one DELETE / UPDATE may change: the data nodes'
    /// max_ops_per_txn. A larger statement fails at once with 1206, before
    /// changing anything, instead of failing at the data node's limit after
    /// doing the work (issue 22, case 9).
    pub max_rows_per_txn: u64,
    /// Most bytes of rows one statement may hold in this SQL node
    /// (`memory`; 0: no limit).
    pub max_statement_memory: u64,
    /// @@datadir: the directory the process running this SQL node keeps its
    /// files in (`norr up`'s --data-dir). Empty for a `norr sqld`, which
    /// keeps nothing on disk (the data nodes keep the rows).
    pub datadir: String,
    /// The cluster secret proved to the data nodes (`--secret-file`);
    /// None: the client's default, NORR_CLUSTER_SECRET.
    pub secret: Option<norr_client::ClusterSecret>,
}

/// The data nodes' default max_ops_per_txn.
pub const DEFAULT_MAX_ROWS_PER_TXN: u64 = 1_000_000;

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            version: "8.0.36-NorrDB-0.1".to_string(),
            max_allowed_packet: 64 << 20,
            port: 3306,
            hostname: "localhost".to_string(),
            default_partitions: 0,
            reply_spin: std::time::Duration::ZERO,
            socket: String::new(),
            max_connections: crate::server::DEFAULT_MAX_CONNECTIONS as u64,
            node_name: String::new(),
            max_rows_per_txn: DEFAULT_MAX_ROWS_PER_TXN,
            max_statement_memory: memory::DEFAULT_MAX_STATEMENT_MEMORY_BYTES,
            datadir: String::new(),
            secret: None,
        }
    }
}

/// Counters for SHOW STATUS.
#[derive(Default)]
struct Status {
    questions: AtomicU64,
    com_select: AtomicU64,
    com_insert: AtomicU64,
    com_update: AtomicU64,
    com_delete: AtomicU64,
    com_commit: AtomicU64,
    com_rollback: AtomicU64,
    connections: AtomicU64,
    threads_connected: AtomicUsize,
    text_plan_hits: AtomicU64,
}

pub struct Engine {
    client: Client,
    catalog: Catalog,
    cfg: EngineConfig,
    started: std::time::Instant,
    status: Status,
    table_locks: table_locks::TableLocks,
    sessions: crate::session_registry::Registry,
    /// GET_LOCK's named locks of this SQL node.
    user_locks: Arc<user_locks::UserLocks>,
    /// `Client::reconnect_count` when the catalog's caches were last known
    /// to match the data nodes (see `Engine::check_reconnects`).
    seen_reconnects: AtomicU64,
    /// The accounts and privileges of the cluster, as last read.
    acl: acl::Acl,
    /// AUTO_INCREMENT values this SQL node reserved and has not used.
    auto_inc: auto_inc_cache::AutoIncCache,
    /// Row counts and rows per key this SQL node keeps (`index_stats`).
    index_stats: index_stats::IndexStats,
}

/// A parsed statement.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)] // parsed once per statement, never stored in bulk
pub enum Parsed {
    Sql(Box<Statement>),
    /// CREATE TABLE with its PARTITION BY clause (parsed by us).
    CreateTable(Box<ast::CreateTable>, Option<PartitionInfo>),
    Show(ShowStmt),
    CreateDatabase {
        name: String,
        if_not_exists: bool,
        charset: Option<String>,
        collation: Option<String>,
    },
    /// SET CHARACTER SET x / SET CHARSET x.
    SetCharacterSet(String),
    /// LOCK / UNLOCK TABLES, FLUSH, ALTER TABLE ... DISABLE KEYS.
    Lock(lock_statements::LockStmt),
    /// START TRANSACTION WITH CONSISTENT SNAPSHOT [, ...]: the phrase is
    /// taken off (reads are READ COMMITTED) and noted in a warning.
    StartConsistentSnapshot(Box<Statement>),
    /// PREPARE / EXECUTE / DEALLOCATE PREPARE (named in SQL text).
    SqlPrepare(sql_prepare::SqlPrepareStmt),
    /// ANALYZE / OPTIMIZE / CHECK / REPAIR / CHECKSUM TABLE.
    Maintenance(table_maintenance::MaintenanceStmt),
    /// CREATE / ALTER / DROP VIEW.
    View(view_ddl::ViewStmt),
    /// LOAD DATA [LOCAL] INFILE.
    LoadData(Box<load_data::LoadStmt>),
    /// SELECT ... INTO @var, ...
    SelectInto(select_into::SelectInto),
    /// DO expr, ...: the expressions as a SELECT without FROM (`do_stmt`).
    Do(Box<ast::Query>),
    /// CREATE USER, GRANT, SET ROLE, SHOW GRANTS, ... (`acl::stmt`).
    Acl(acl::stmt::AclStmt),
}

/// A prepared statement: parsed once, executed many times.
#[derive(Debug)]
pub struct Prepared {
    pub param_count: u16,
    /// Result columns as of the prepare: the compiled plan's own list when
    /// there is one, so that executes hand out the same `Arc`.
    pub columns: Arc<[ColumnMeta]>,
    pub sql: Arc<str>,
    parsed: Parsed,
    /// The compiled plan of a SELECT, made once at prepare time so that an
    /// execution costs no parsing or planning; replaced when the schema it was
    /// compiled against changed (1146 / 1412 on execution).
    compiled: std::sync::Mutex<Option<Arc<query::Compiled>>>,
    /// The compiled plan of an UPDATE / DELETE, made at its first execution.
    row_plan: plan_cache::PlanSlot<dml::RowStmt>,
}

impl Prepared {
    pub fn parsed(&self) -> &Parsed {
        &self.parsed
    }

    fn compiled(&self) -> Option<Arc<query::Compiled>> {
        self.compiled.lock().ok().and_then(|g| g.clone())
    }

    fn set_compiled(&self, c: Arc<query::Compiled>) {
        if let Ok(mut g) = self.compiled.lock() {
            *g = Some(c);
        }
    }

    fn query(&self) -> Option<&ast::Query> {
        match &self.parsed {
            Parsed::Sql(st) => match st.as_ref() {
                Statement::Query(q) => Some(q),
                _ => None,
            },
            _ => None,
        }
    }
}

pub(crate) fn parse_sqlparser(sql: &str) -> Result<Statement, SqlError> {
    // Depth-bounded (issue 22): a long operator chain must not overflow.
    let mut v = depth::parse(sql)?;
    match v.len() {
        1 => {
            let mut st = v.remove(0);
            dual::strip(sql, &mut st);
            join_chain::flatten(sql, &mut st);
            if parse_ext::mentions(sql, b"select") {
                item_names::apply(sql, &mut st);
            }
            Ok(st)
        }
        0 => Err(SqlError::new(1065, "42000", "Query was empty")),
        _ => Err(SqlError::parse("You have an error in your SQL syntax: one statement expected")),
    }
}

/// `SET @x := 1` -> `SET @x = 1` (top level, outside quotes).
fn rewrite_set_assign(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut quote: Option<char> = None;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => {
                if c == q {
                    quote = None;
                }
                out.push(c);
            }
            None => {
                if c == '\'' || c == '"' || c == '`' {
                    quote = Some(c);
                    out.push(c);
                } else if c == ':' && chars.peek() == Some(&'=') {
                    chars.next();
                    out.push('=');
                } else {
                    out.push(c);
                }
            }
        }
    }
    out
}

/// CREATE {DATABASE|SCHEMA} [IF NOT EXISTS] name [options].
fn parse_create_database(sql: &str) -> Result<Parsed, SqlError> {
    let mut c = parse_ext::Cursor::new(sql)?;
    c.expect_word("CREATE")?;
    if !(c.eat_word("DATABASE") || c.eat_word("SCHEMA")) {
        return Err(c.err());
    }
    let mut if_not_exists = false;
    if c.eat_word("IF") {
        c.expect_word("NOT")?;
        c.expect_word("EXISTS")?;
        if_not_exists = true;
    }
    let name = c.ident()?;
    let (mut charset, mut collation) = (None, None);
    while !c.at_end() {
        c.eat_word("DEFAULT");
        if c.eat_word("CHARSET") || (c.eat_word("CHARACTER") && c.eat_word("SET")) {
            c.eat(&sqlparser::tokenizer::Token::Eq);
            charset = Some(match c.peek() {
                Some(sqlparser::tokenizer::Token::SingleQuotedString(_)) => c.string()?,
                _ => c.ident()?,
            });
        } else if c.eat_word("COLLATE") {
            c.eat(&sqlparser::tokenizer::Token::Eq);
            collation = Some(match c.peek() {
                Some(sqlparser::tokenizer::Token::SingleQuotedString(_)) => c.string()?,
                _ => c.ident()?,
            });
        } else if c.eat_word("ENCRYPTION") {
            c.eat(&sqlparser::tokenizer::Token::Eq);
            c.string()?;
        } else {
            return Err(c.err());
        }
    }
    Ok(Parsed::CreateDatabase { name, if_not_exists, charset, collation })
}

/// START TRANSACTION with WITH CONSISTENT SNAPSHOT among its
/// characteristics: parsed without that one.
fn parse_consistent_snapshot(sql: &str) -> Result<Parsed, SqlError> {
    let mut c = parse_ext::Cursor::new(sql)?;
    c.expect_word("START")?;
    c.expect_word("TRANSACTION")?;
    let mut kept = Vec::new();
    loop {
        if c.eat_word("WITH") {
            c.expect_word("CONSISTENT")?;
            c.expect_word("SNAPSHOT")?;
        } else if c.eat_word("READ") {
            if c.eat_word("ONLY") {
                kept.push("READ ONLY");
            } else {
                c.expect_word("WRITE")?;
                kept.push("READ WRITE");
            }
        } else {
            return Err(c.err());
        }
        if c.at_end() {
            break;
        }
        c.expect(&sqlparser::tokenizer::Token::Comma)?;
    }
    let text = format!("START TRANSACTION {}", kept.join(", "));
    Ok(Parsed::StartConsistentSnapshot(Box::new(parse_sqlparser(text.trim_end())?)))
}

/// Parse one statement (already split).
pub fn parse_statement(sql: &str) -> Result<Parsed, SqlError> {
    // The first words pick the statement's parser, mostly without
    // tokenizing here: the SQL parser tokenizes the statement anyway.
    let words = parse_ext::first_words(sql, 3)?;
    let w = |i: usize| words.get(i).map(|s| s.as_str()).unwrap_or("");
    if let Some(r) = lock_statements::parse(sql, &words) {
        return r.map(Parsed::Lock);
    }
    if let Some(r) = acl::stmt::parse(sql, &words) {
        return r.map(Parsed::Acl);
    }
    if let Some(r) = sql_prepare::parse(sql, &words) {
        return r.map(Parsed::SqlPrepare);
    }
    if let Some(r) = table_maintenance::parse(sql, &words) {
        return r.map(Parsed::Maintenance);
    }
    if let Some(r) = view_ddl::parse(sql, &words) {
        return r.map(Parsed::View);
    }
    if let Some(r) = load_data::parse(sql, &words) {
        return r.map(|l| Parsed::LoadData(Box::new(l)));
    }
    if let Some(r) = select_into::parse(sql, &words) {
        return r.map(Parsed::SelectInto);
    }
    match w(0) {
        "SHOW" => return Ok(Parsed::Show(parse_ext::parse_show(sql)?)),
        "DO" => {
            if let Some(r) = do_stmt::parse(sql) {
                return r.map(Parsed::Do);
            }
        }
        "START" if w(1) == "TRANSACTION" && sql.to_ascii_uppercase().contains("CONSISTENT") => {
            return parse_consistent_snapshot(sql);
        }
        "CREATE" if w(1) == "DATABASE" || w(1) == "SCHEMA" => return parse_create_database(sql),
        "SET" if w(1) == "CHARSET" || (w(1) == "CHARACTER" && w(2) == "SET") => {
            let mut c = parse_ext::Cursor::new(sql)?;
            c.expect_word("SET")?;
            if !c.eat_word("CHARSET") {
                c.expect_word("CHARACTER")?;
                c.expect_word("SET")?;
            }
            let cs = match c.peek() {
                Some(sqlparser::tokenizer::Token::SingleQuotedString(_)) => c.string()?,
                _ => c.ident()?,
            };
            return Ok(Parsed::SetCharacterSet(cs));
        }
        "SET" if matches!(w(1), "SESSION" | "GLOBAL") && w(2) == "TRANSACTION" => {
            // sqlparser drops the scope before TRANSACTION; its Postgres
            // spelling keeps it (`SetTransaction::session`), which tells a
            // session's characteristics from the next transaction's. GLOBAL
            // sets the global values new sessions start from, as MySQL:
            // the assignments to @@global.transaction_* it stands for.
            let mut c = parse_ext::Cursor::new(sql)?;
            c.expect_word("SET")?;
            c.next_token();
            c.expect_word("TRANSACTION")?;
            let text = format!("SET SESSION CHARACTERISTICS AS TRANSACTION {}", c.rest_text());
            let st = parse_sqlparser(&text)?;
            if w(1) == "GLOBAL" {
                if let Statement::Set(ast::Set::SetTransaction { modes, .. }) = &st {
                    return Ok(Parsed::Sql(Box::new(parse_sqlparser(&txn_control::global_characteristics(modes))?)));
                }
            }
            return Ok(Parsed::Sql(Box::new(st)));
        }
        "SET" => return Ok(Parsed::Sql(Box::new(parse_sqlparser(&rewrite_set_assign(sql))?))),
        "CREATE" | "ALTER" => {
            let (text, part) = parse_ext::split_partition_clause(sql);
            if let Some(p) = part {
                if w(0) == "ALTER" {
                    return Err(SqlError::unsupported("ALTER TABLE ... PARTITION BY"));
                }
                let info = parse_ext::parse_partition_clause(&p)?;
                return match parse_sqlparser(&text)? {
                    Statement::CreateTable(ct) => Ok(Parsed::CreateTable(Box::new(ct), Some(info))),
                    _ => Err(error_map::parse_error_near(&p)),
                };
            }
        }
        _ => {}
    }
    let rewritten;
    let sql = match w(0) {
        "UPDATE" | "DELETE" => match multi_table_dml::rewrite(sql) {
            Some(t) => {
                rewritten = t;
                rewritten.as_str()
            }
            None => sql,
        },
        // `TABLE t` (MySQL 8.0.19+) as `SELECT * FROM t` ("": a statement
        // starting with `(`).
        "SELECT" | "WITH" | "TABLE" | "VALUES" | "INSERT" | "REPLACE" | "" if parse_ext::mentions(sql, b"TABLE") => {
            match table_values::rewrite_statement(sql) {
                Some(t) => {
                    rewritten = t;
                    rewritten.as_str()
                }
                None => sql,
            }
        }
        _ => sql,
    };
    let text = if sql.as_bytes().windows(5).any(|w| w.eq_ignore_ascii_case(b"SHARE")) {
        parse_ext::rewrite_lock_in_share_mode(sql)
    } else if w(0) == "ALTER" && w(1) == "TABLE" {
        alter_text::rewrite_alter_text(sql)
    } else {
        sql.to_string()
    };
    let text = lock_of_text::rewrite(&text).unwrap_or(text);
    let parsed = match parse_sqlparser(&text) {
        Ok(st) => st,
        // `FROM (a, b) ...`: retried with the comma list as CROSS JOINs.
        Err(e) => match from_parens::rewrite(&text) {
            Some(t) => parse_sqlparser(&t).map_err(|_| e)?,
            None => return Err(e),
        },
    };
    match parsed {
        Statement::CreateTable(ct) => Ok(Parsed::CreateTable(Box::new(ct), None)),
        other => Ok(Parsed::Sql(Box::new(other))),
    }
}

fn ident_str(e: &Expr) -> Option<String> {
    match e {
        Expr::Identifier(i) => Some(i.value.clone()),
        _ => None,
    }
}

impl Engine {
    /// Connect to the data nodes and prepare the catalog (creates the
    /// databases table on first start). `data_node` is `HOST:PORT`, or
    /// `unix:PATH` for a data node's Unix-domain socket on this host, or
    /// several of these comma separated (every data node of a cluster).
    /// A data node whose connection breaks is connected again in the
    /// background.
    pub async fn connect(data_node: &str, cfg: EngineConfig) -> Result<Arc<Engine>, SqlError> {
        let opts = Self::client_options(&cfg);
        let client = if data_node.contains(',') {
            let addrs = norr_client::DataNodeAddr::parse_list(data_node)
                .map_err(|e| SqlError::internal(format!("--data-node: {e}")))?;
            Client::connect_cluster(&addrs, opts).await
        } else {
            match data_node.strip_prefix("unix:") {
                Some(path) => Client::connect_unix(path, opts).await,
                None => Client::connect_with(data_node, opts).await,
            }
        }
        .map_err(error_map::from_client_plain)?;
        Self::with_client(client, cfg).await
    }

    /// Connect through the management server at `mgm` (`HOST:PORT`, several
    /// comma separated): the data nodes and this SQL node's node id come
    /// from the cluster's configuration.
    pub async fn connect_mgm(mgm: &str, cfg: EngineConfig) -> Result<Arc<Engine>, SqlError> {
        let opts = Self::client_options(&cfg);
        let client = Client::connect_mgm(mgm, opts).await.map_err(error_map::from_client_plain)?;
        Self::with_client(client, cfg).await
    }

    fn client_options(cfg: &EngineConfig) -> norr_client::ConnectOptions {
        // Sessions each have one small request out at a time: direct sends
        // keep sqld and the data node working at once (see the option).
        norr_client::ConnectOptions {
            client_name: format!("sqld {}", cfg.node_name),
            kind: norr_client::ApiKind::SqlNode,
            reply_spin: cfg.reply_spin,
            direct_send: true,
            secret: cfg.secret.clone(),
            ..Default::default()
        }
    }

    /// True when a data node came back after its connection broke since
    /// the catalog was last loaded: it may have restarted (a node without
    /// durable storage restarts empty) or missed schema changes. One integer
    /// compare per statement (`reload_catalog` does the rest).
    #[inline]
    fn catalog_stale(&self) -> bool {
        self.client.reconnect_count() != self.seen_reconnects.load(Ordering::Acquire)
    }

    /// Drop the cached definitions and make the catalog's own tables again.
    async fn reload_catalog(&self) -> Result<(), SqlError> {
        let n = self.client.reconnect_count();
        tracing::info!("sqld: a data node was connected again: reloading the catalog");
        self.catalog.after_reconnect().await?;
        // The data nodes may have started empty: table ids and versions
        // start again, so a kept range could repeat values.
        self.auto_inc.clear();
        // Several sessions may reload at once: each reload is complete.
        self.seen_reconnects.fetch_max(n, Ordering::AcqRel);
        Ok(())
    }

    /// Connect through an in-process link to a data node in this process
    /// (`norr up`).
    pub async fn connect_local(
        connect: &crate::server::LocalConnect,
        cfg: EngineConfig,
    ) -> Result<Arc<Engine>, SqlError> {
        let opts = norr_client::ConnectOptions {
            kind: norr_client::ApiKind::SqlNode,
            reply_spin: cfg.reply_spin,
            secret: cfg.secret.clone(),
            ..Default::default()
        };
        let link = connect().map_err(|e| {
            error_map::from_client_plain(norr_client::ClientError::NotConnected(format!("in-process link: {e}")))
        })?;
        let client = Client::connect_local(link, opts).await.map_err(error_map::from_client_plain)?;
        Self::with_client(client, cfg).await
    }

    /// An engine on an existing client connection.
    pub async fn with_client(client: Client, cfg: EngineConfig) -> Result<Arc<Engine>, SqlError> {
        // Read before the bootstrap: a reconnect during it reloads again.
        let client_reconnects = client.reconnect_count();
        let catalog = Catalog::new(client.clone());
        catalog.bootstrap().await?;
        crate::session_registry::start_clock();
        vars::init_globals(&[
            ("version", Value::str(&cfg.version)),
            ("max_allowed_packet", Value::UInt(cfg.max_allowed_packet)),
            ("port", Value::UInt(cfg.port as u64)),
            ("hostname", Value::str(&cfg.hostname)),
            ("socket", Value::str(&cfg.socket)),
            ("max_connections", Value::UInt(cfg.max_connections)),
            ("datadir", Value::str(&cfg.datadir)),
        ]);
        let engine = Arc::new(Engine {
            client,
            catalog,
            cfg,
            started: std::time::Instant::now(),
            status: Status::default(),
            table_locks: table_locks::TableLocks::default(),
            sessions: Default::default(),
            user_locks: Default::default(),
            seen_reconnects: AtomicU64::new(client_reconnects),
            acl: acl::Acl::default(),
            auto_inc: Default::default(),
            index_stats: Default::default(),
        });
        // The system tables of accounts (first start of a cluster).
        acl::store::bootstrap(&engine).await?;
        // Before any session exists: no live temporary table carries this
        // node's tag yet, so everything with it is an orphan.
        if let Err(e) = temp_tables::sweep_orphans(&engine).await {
            tracing::warn!("sqld: temporary tables of an earlier run not swept: {e}");
        }
        Ok(engine)
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// AUTO_INCREMENT values this SQL node keeps (`auto_inc_cache`).
    pub fn auto_inc_cache(&self) -> &auto_inc_cache::AutoIncCache {
        &self.auto_inc
    }

    /// Statistics for EXPLAIN (`index_stats`).
    pub fn index_stats(&self) -> &index_stats::IndexStats {
        &self.index_stats
    }

    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    pub fn acl(&self) -> &acl::Acl {
        &self.acl
    }

    /// A session for the engine's own statements (the accounts' system
    /// tables): no account, so no privilege checks; not in the process list.
    pub fn internal_session(&self) -> Session {
        let mut s = Session::new(0, "");
        vars::apply_globals(&mut s, vars::global_value);
        // Its statements quote strings with backslash escapes (`acl::store::lit`).
        s.vars.insert("sql_mode".into(), Value::str("STRICT_TRANS_TABLES"));
        s
    }

    /// Run one statement of the engine's own on `s` (from `internal_session`).
    /// Boxed: it is called from inside statement execution.
    pub fn run_internal<'a>(
        &'a self,
        s: &'a mut Session,
        sql: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<QueryOutput, SqlError>> + Send + 'a>> {
        Box::pin(async move {
            debug_assert!(s.account.is_none());
            let parsed = parse_statement(sql)?;
            self.run_parsed(s, &parsed, &[], None).await
        })
    }

    /// Create the first accounts of a fresh cluster (root and the users of
    /// the --config file); an existing cluster keeps its accounts.
    pub async fn seed_accounts(&self, seeds: &[acl::store::Seed]) -> Result<bool, SqlError> {
        acl::store::seed(self, seeds).await
    }

    pub fn new_session(&self, connection_id: u32, user: &str) -> Session {
        self.status.connections.fetch_add(1, Ordering::Relaxed);
        self.status.threads_connected.fetch_add(1, Ordering::Relaxed);
        let mut s = Session::new(connection_id, user);
        s.max_rows_per_txn = self.cfg.max_rows_per_txn;
        s.max_statement_memory = self.cfg.max_statement_memory;
        s.entry.set_user_locks(self.user_locks.clone());
        self.sessions.register(s.entry.clone());
        // Session values start from the globals, as in MySQL.
        vars::apply_globals(&mut s, vars::global_value);
        s
    }

    /// One COM_QUERY: one result per statement, stopping after the first error.
    pub async fn execute_text(&self, s: &mut Session, sql: &str) -> Vec<Result<QueryOutput, SqlError>> {
        let stmts = parse_ext::split_statements(sql);
        if stmts.is_empty() {
            return vec![Err(SqlError::new(1065, "42000", "Query was empty"))];
        }
        if stmts.len() > 1 && !s.multi_statements {
            let second = stmts[1].chars().take(60).collect::<String>();
            return vec![Err(error_map::parse_error_near(&second))];
        }
        if self.catalog_stale() {
            if let Err(e) = self.reload_catalog().await {
                return vec![Err(e)];
            }
        }
        let n_stmts = stmts.len();
        // The results of several statements are sent in order after they
        // all ran: none of them may stream its rows ahead of the others.
        let sink = if n_stmts > 1 { s.result_sink.take() } else { None };
        let mut out = Vec::with_capacity(n_stmts);
        let text: Arc<str> = Arc::from(sql);
        s.entry.begin(crate::session_registry::Command::Query, Some(&text), s.current_db.as_ref());
        for st in stmts {
            if s.entry.kill_requested() != crate::session_registry::Kill::None {
                out.push(Err(crate::session_registry::interrupted()));
                break;
            }
            let r = self.run_text(s, &st).await;
            let failed = r.is_err();
            out.push(r);
            if failed {
                break;
            }
            if s.load_job.is_some() {
                // The client's file comes after this statement's reply; the
                // protocol layer asks for it (`load_data`). MySQL clients
                // send LOAD DATA LOCAL on its own.
                if out.len() < n_stmts {
                    load_data::abandon(s);
                    let _ = txn_control::end_statement(self, s, Err::<(), _>(SqlError::internal(""))).await;
                    if let Some(last) = out.last_mut() {
                        *last = Err(SqlError::unsupported(
                            "LOAD DATA LOCAL INFILE followed by more statements in one query",
                        ));
                    }
                }
                break;
            }
        }
        s.entry.end();
        if sink.is_some() {
            s.result_sink = sink;
        }
        out
    }

    async fn run_text(&self, s: &mut Session, sql: &str) -> Result<QueryOutput, SqlError> {
        self.status.questions.fetch_add(1, Ordering::Relaxed);
        s.exec_time_hint = exec_time::hint(sql);
        // A repeated INSERT ... VALUES shape runs from its kept parse with
        // its literals as parameters (`text_cache`).
        // The switch is read only for texts the cache would take.
        let cache_on = |s: &Session| s.vars.get("norr_text_plan_cache").and_then(|v| v.as_i64()) != Some(0);
        if let Some(n) = text_cache::normalize(sql).filter(|_| cache_on(s)) {
            let kept = match s.text_plans.get(&n.key) {
                Some(p) => {
                    self.status.text_plan_hits.fetch_add(1, Ordering::Relaxed);
                    Some(p)
                }
                None => match parse_statement(&n.key) {
                    Ok(p) if text_cache::cacheable(&p) => {
                        let p = Arc::new(p);
                        s.text_plans.put(n.key, p.clone());
                        Some(p)
                    }
                    // Not a shape this cache keeps, or the text does not
                    // parse: the usual path gives the error of the text
                    // as written.
                    _ => None,
                },
            };
            if let Some(p) = kept {
                return self.run_parsed(s, &p, &n.params, None).await;
            }
        }
        let parsed = match parse_statement(sql) {
            Ok(p) => p,
            Err(e) => {
                self.record_error(s, &e);
                return Err(e);
            }
        };
        self.run_parsed(s, &parsed, &[], None).await
    }

    async fn run_parsed(
        &self,
        s: &mut Session,
        p: &Parsed,
        params: &[Value],
        row_plan: Option<&plan_cache::PlanSlot<dml::RowStmt>>,
    ) -> Result<QueryOutput, SqlError> {
        let r = self.run_statement(s, p, params, row_plan).await;
        txn_control::end_of_statement(s);
        r
    }

    async fn run_statement(
        &self,
        s: &mut Session,
        p: &Parsed,
        params: &[Value],
        row_plan: Option<&plan_cache::PlanSlot<dml::RowStmt>>,
    ) -> Result<QueryOutput, SqlError> {
        let keeps_warnings = matches!(p, Parsed::Show(ShowStmt::Warnings { .. } | ShowStmt::Errors { .. }));
        if !keeps_warnings {
            s.warnings.clear();
        }
        if s.txn.is_none() && !s.in_transaction {
            s.txn_wrote = false;
        }
        if lock_statements::writes_rows(p) {
            s.txn_wrote = true;
        }
        // Tested here, not in the callee: no future is made for the check
        // while no session holds a lock (every statement comes by here).
        if self.table_locks.any_held() {
            if let Err(e) = self.check_table_locks(s, p).await {
                self.record_error(s, &e);
                return Err(e);
            }
        }
        if let Some(a) = &s.account {
            if let Err(e) = acl::check::check(self, s, a, p).await {
                self.record_error(s, &e);
                return Err(e);
            }
        }
        // A statement on tables outside a transaction starts one: it takes
        // a pending SET TRANSACTION READ ONLY | READ WRITE (`start_next_txn_mode`).
        // DDL's implicit commit ends it unused, as a COMMIT does.
        if s.next_txn_read_only.is_some() && !s.in_transaction {
            if read_only_ddl::refused(p) == Some(read_only_ddl::Refused::AfterImplicitCommit) {
                s.next_txn_read_only = None;
            } else if !lock_statements::table_accesses(s, p).is_empty() {
                txn_control::start_next_txn_mode(s);
            }
        }
        if lock_statements::writes_rows(p) && txn_control::read_only(s) && lock_statements::writes_tables(s, p) {
            let e = txn_control::read_only_refusal();
            self.record_error(s, &e);
            return Err(e);
        }
        if let Some(when) = read_only_ddl::refused(p) {
            if let Err(e) = self.refuse_read_only_ddl(s, when).await {
                self.record_error(s, &e);
                return Err(e);
            }
        }
        let select = matches!(p, Parsed::Sql(st) if matches!(st.as_ref(), Statement::Query(_)));
        let mut r = match exec_time::limit(s, select) {
            None => self.dispatch(s, p, params, row_plan).await,
            Some(d) => {
                let entry = s.entry.clone();
                Box::pin(exec_time::bounded(&entry, d, self.dispatch(s, p, params, row_plan))).await
            }
        };
        let mut races = 0;
        while matches!(&r, Err(e) if e.code == 1412) {
            // A table changed under a cached definition (DDL through another
            // SQL node): forget the cache and run the statement again,
            // unless a transaction is open (it is aborted; the client
            // retries it). A failed autocommitted statement left nothing.
            // Each lost race means another schema change went through, so
            // under a burst of DDL this ends (MySQL's statement would have
            // waited on the metadata lock instead).
            self.catalog.invalidate_all();
            races += 1;
            if s.in_transaction || s.txn.is_some() || races > alter::MAX_SCHEMA_RACES {
                break;
            }
            r = self.dispatch(s, p, params, row_plan).await;
        }
        match &r {
            Err(e) => self.record_error(s, e),
            Ok(out) if lock_statements::writes_rows(p) => index_stats::note_statement(self, s, p, out),
            Ok(_) => {}
        }
        // EXECUTE recorded its statement's result already.
        if !matches!(p, Parsed::SqlPrepare(_)) {
            found_rows::record(s, &r, select);
        }
        r
    }

    fn record_error(&self, s: &mut Session, e: &SqlError) {
        s.warnings.clear();
        s.warnings.push(Warning { level: WarningLevel::Error, code: e.code, message: e.message.clone() });
    }

    /// Parse once for COM_STMT_PREPARE.
    pub async fn prepare(&self, s: &mut Session, sql: &str) -> Result<Arc<Prepared>, SqlError> {
        let stmts = parse_ext::split_statements(sql);
        if stmts.len() != 1 {
            return Err(if stmts.is_empty() {
                SqlError::new(1065, "42000", "Query was empty")
            } else {
                error_map::parse_error_near(&stmts[1])
            });
        }
        if self.catalog_stale() {
            self.reload_catalog().await?;
        }
        let parsed = parse_statement(&stmts[0])?;
        if matches!(parsed, Parsed::LoadData(_)) {
            return Err(SqlError::new(
                1295,
                "HY000",
                "This command is not supported in the prepared statement protocol yet",
            ));
        }
        let n = parse_ext::count_placeholders(&stmts[0])?;
        if n > u16::MAX as usize {
            return Err(SqlError::new(1390, "HY000", "Prepared statement contains too many placeholders"));
        }
        // As MySQL, a query that does not compile (unknown table or column,
        // ...) fails the prepare, not its first execution.
        let mut compiled = None;
        let mut columns: Arc<[ColumnMeta]> = Vec::new().into();
        if let Parsed::Sql(st) = &parsed {
            if let Statement::Query(q) = st.as_ref() {
                if found_rows::calc_requested(q) {
                    // Runs through `found_rows::execute_calc`, not a kept plan.
                    columns = query::prepare_query(self, s, &found_rows::without_calc(q)).await?.shared_columns();
                } else {
                    let c = query::prepare_query(self, s, q).await?;
                    columns = c.shared_columns();
                    compiled = Some(c);
                }
            }
        }
        Ok(Arc::new(Prepared {
            param_count: n as u16,
            columns,
            sql: Arc::from(stmts[0].as_str()),
            parsed,
            compiled: std::sync::Mutex::new(compiled),
            row_plan: Default::default(),
        }))
    }

    pub async fn execute_prepared(
        &self,
        s: &mut Session,
        p: &Prepared,
        params: Vec<Value>,
    ) -> Result<QueryOutput, SqlError> {
        self.status.questions.fetch_add(1, Ordering::Relaxed);
        if params.len() != p.param_count as usize {
            return Err(SqlError::new(1210, "HY000", "Incorrect arguments to mysqld_stmt_execute"));
        }
        s.entry.begin(crate::session_registry::Command::Execute, Some(&p.sql), s.current_db.as_ref());
        let reloaded = if self.catalog_stale() { self.reload_catalog().await } else { Ok(()) };
        s.exec_time_hint = exec_time::hint(&p.sql);
        let r = match (reloaded, exec_time::limit(s, p.query().is_some())) {
            (Ok(()), None) => self.execute_prepared_inner(s, p, params).await,
            (Ok(()), Some(d)) => {
                let entry = s.entry.clone();
                Box::pin(exec_time::bounded(&entry, d, self.execute_prepared_inner(s, p, params))).await
            }
            (Err(e), _) => Err(e),
        };
        s.entry.end();
        r
    }

    async fn execute_prepared_inner(
        &self,
        s: &mut Session,
        p: &Prepared,
        params: Vec<Value>,
    ) -> Result<QueryOutput, SqlError> {
        let (Some(mut c), Some(q)) = (p.compiled(), p.query()) else {
            return self.run_parsed(s, &p.parsed, &params, Some(&p.row_plan)).await;
        };
        // A temporary table created or dropped since the plan was compiled
        // may change what its names mean: compile again (one integer compare
        // on the common path).
        if c.temp_generation != s.temp.generation() {
            c = match query::prepare_query(self, s, q).await {
                Ok(c2) => c2,
                Err(e) => {
                    self.record_error(s, &e);
                    return Err(e);
                }
            };
            p.set_compiled(c.clone());
        }
        s.warnings.clear();
        if let Some(a) = &s.account {
            if let Err(e) = acl::check::check(self, s, a, &p.parsed).await {
                self.record_error(s, &e);
                return Err(e);
            }
        }
        if self.table_locks.any_held() {
            if let Err(e) = self.check_table_locks(s, &p.parsed).await {
                self.record_error(s, &e);
                return Err(e);
            }
        }
        self.status.com_select.fetch_add(1, Ordering::Relaxed);
        let mut r = if c.views.is_empty() {
            query::execute_prepared_query_to_client(self, s, &c, &params).await
        } else {
            // Boxed: the check's future stays out of the common path's.
            Box::pin(self.execute_over_views(s, p, q, c, &params)).await
        };
        let mut races = 0;
        // The schema changed under the plan: forget the stale cached
        // definitions and compile again (as `run_parsed`).
        while matches!(&r, Err(e) if e.code == 1412 || (e.code == 1146 && races == 0)) {
            self.catalog.invalidate_all();
            races += 1;
            if races > alter::MAX_SCHEMA_RACES {
                break;
            }
            r = match query::prepare_query(self, s, q).await {
                Ok(c2) => {
                    p.set_compiled(c2.clone());
                    query::execute_prepared_query_to_client(self, s, &c2, &params).await
                }
                Err(e2) => Err(e2),
            };
        }
        if let Err(e) = &r {
            self.record_error(s, e);
        }
        found_rows::record(s, &r, true);
        r
    }

    /// Run the kept plan `c` of a prepared SELECT that reads views, after
    /// checking that none of them changed since it was compiled (CREATE OR
    /// REPLACE / ALTER / DROP VIEW, on any SQL node); a changed one makes
    /// the plan compiled again first, as MySQL re-prepares (a dropped view
    /// then gives 1146). A change between the check and the reads is the
    /// same as the statement having run just before it.
    async fn execute_over_views(
        &self,
        s: &mut Session,
        p: &Prepared,
        q: &ast::Query,
        c: Arc<query::Compiled>,
        params: &[Value],
    ) -> Result<QueryOutput, SqlError> {
        let c = if self.catalog.views()?.all_current(&c.views).await? {
            c
        } else {
            let fresh = query::prepare_query(self, s, q).await?;
            p.set_compiled(fresh.clone());
            fresh
        };
        query::execute_prepared_query_to_client(self, s, &c, params).await
    }

    /// COM_FIELD_LIST.
    pub async fn field_list(&self, s: &mut Session, table: &str) -> Result<Vec<ColumnMeta>, SqlError> {
        let db = s.current_db.clone().ok_or_else(error_map::no_db)?;
        let t = temp_tables::get(self, s, &db, table).await?;
        Ok(t.result_columns())
    }

    /// COM_INIT_DB / USE.
    pub async fn init_db(&self, s: &mut Session, db: &str) -> Result<(), SqlError> {
        if let Some(a) = &s.account {
            // As MySQL: USE needs some privilege in the database (1044).
            if !infoschema::is_infoschema(db) {
                let snap = self.acl.current(self).await?;
                if !snap.any_in_db(&acl::run::who(&snap, a), db) {
                    return Err(acl::db_denied(a, db));
                }
            }
        }
        if !self.catalog.db_exists(db).await? {
            return Err(error_map::unknown_db(db));
        }
        let (cs, coll) = match self.catalog.db_info(db).await? {
            Some(i) => (i.charset, i.collation),
            None => ("utf8mb3".to_string(), "utf8mb3_general_ci".to_string()),
        };
        s.vars.insert("character_set_database".into(), Value::str(&cs));
        s.vars.insert("collation_database".into(), Value::str(&coll));
        s.current_db = Some(if infoschema::is_infoschema(db) { infoschema::DB.into() } else { db.into() });
        s.entry.set_db(s.current_db.clone());
        Ok(())
    }

    /// Connection closed: roll back an open transaction.
    pub async fn end_session(&self, s: &mut Session) {
        load_data::abandon(s);
        let _ = txn_control::rollback(s).await;
        if !s.temp.is_empty() {
            temp_tables::drop_all(self, s).await;
        }
        // Off the list before the locks go: whoever the release lets in no
        // longer sees the session.
        self.sessions.unregister(s.connection_id);
        self.table_locks.release(s.connection_id, std::mem::take(&mut s.table_locks));
        // GET_LOCK's locks end with the session (quit, lost connection, KILL
        // CONNECTION, COM_RESET_CONNECTION), never with a transaction.
        self.user_locks.release_all(s.connection_id);
        self.status.threads_connected.fetch_sub(1, Ordering::Relaxed);
    }

    /// PROCESSLIST rows (Id, User, Host, db, Command, Time, State, Info):
    /// every session for root, the user's own for others (as MySQL without
    /// the PROCESS privilege). Info is cut at 100 characters unless `full`.
    pub fn processlist_rows(&self, s: &Session, full: bool) -> Vec<Vec<Value>> {
        self.sessions
            .list()
            .into_iter()
            .filter(|e| s.user == "root" || e.user == s.user)
            .map(|e| {
                let a = e.activity();
                let info = a.info.as_deref().map(|i| {
                    if full {
                        Value::str(i)
                    } else {
                        Value::str(&i.chars().take(100).collect::<String>())
                    }
                });
                vec![
                    Value::UInt(e.id as u64),
                    Value::str(&e.user),
                    Value::str(e.host()),
                    a.db.as_deref().map(Value::str).unwrap_or(Value::Null),
                    Value::str(if e.kill_requested() == crate::session_registry::Kill::Connection {
                        "Killed"
                    } else {
                        a.command
                    }),
                    Value::UInt(a.seconds),
                    Value::str(match e.wait_state() {
                        Some(w) => w,
                        None if a.command == "Sleep" => "",
                        None => "executing",
                    }),
                    info.unwrap_or(Value::Null),
                ]
            })
            .collect()
    }

    /// Rows of SHOW [GLOBAL] STATUS.
    pub async fn status_rows(&self, s: &Session, global: bool) -> Vec<Vec<Value>> {
        let st = &self.status;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed).to_string();
        let mut rows: Vec<(String, String)> = vec![
            ("Aborted_clients".into(), "0".into()),
            ("Aborted_connects".into(), "0".into()),
            ("Com_commit".into(), g(&st.com_commit)),
            ("Com_delete".into(), g(&st.com_delete)),
            ("Com_insert".into(), g(&st.com_insert)),
            ("Com_rollback".into(), g(&st.com_rollback)),
            ("Com_select".into(), g(&st.com_select)),
            ("Com_update".into(), g(&st.com_update)),
            ("Connections".into(), g(&st.connections)),
            // Rows statements hold in this SQL node (`memory`), and the part
            // of them on their way to clients (`stream`).
            // Row pairs joins compared in memory (`exec::join_rows_compared`);
            // scans and rows read from data nodes (`exec::rows_read`).
            ("Norr_full_scans".into(), exec::full_scans().to_string()),
            ("Norr_join_rows_compared".into(), exec::join_rows_compared().to_string()),
            // Aggregates the data nodes computed, and those they turned
            // down (run again the ordinary way): `pushed_agg`.
            ("Norr_pushed_aggregates".into(), pushed_agg::pushed().to_string()),
            ("Norr_pushed_aggregates_refused".into(), pushed_agg::refused().to_string()),
            ("Norr_range_scans".into(), exec::range_scans().to_string()),
            ("Norr_result_bytes_in_flight".into(), memory::result_bytes_in_flight().to_string()),
            // Requests sent to data nodes that waited for a reply (every
            // session's, and the node_stats of earlier status queries).
            ("Norr_round_trips".into(), self.client.round_trips().to_string()),
            ("Norr_rows_read".into(), exec::rows_read().to_string()),
            ("Norr_statement_memory_bytes".into(), memory::process_used().to_string()),
            // Text INSERTs that ran from a session's kept parse (`text_cache`).
            ("Norr_text_plan_hits".into(), g(&st.text_plan_hits)),
            ("Queries".into(), g(&st.questions)),
            ("Questions".into(), g(&st.questions)),
            // The session's connection (empty without TLS, and for GLOBAL).
            ("Ssl_cipher".into(), s.tls.as_ref().filter(|_| !global).map(|t| t.cipher.clone()).unwrap_or_default()),
            ("Ssl_version".into(), s.tls.as_ref().filter(|_| !global).map(|t| t.version.clone()).unwrap_or_default()),
            ("Threads_connected".into(), st.threads_connected.load(Ordering::Relaxed).to_string()),
            ("Threads_running".into(), "1".into()),
            ("Uptime".into(), self.started.elapsed().as_secs().to_string()),
        ];
        if let Ok(ns) = self.client.node_stats().await {
            rows.push(("Ndb_data_memory_limit_bytes".into(), ns.data_memory_limit_bytes.to_string()));
            rows.push(("Ndb_data_memory_used_bytes".into(), ns.data_memory_used_bytes.to_string()));
            rows.push(("Ndb_rows".into(), ns.rows.to_string()));
            rows.push(("Ndb_tables".into(), ns.tables.to_string()));
            rows.push(("Ndb_open_transactions".into(), ns.open_transactions.to_string()));
            rows.push(("Ndb_committed_transactions".into(), ns.committed_transactions.to_string()));
            rows.push(("Ndb_aborted_transactions".into(), ns.aborted_transactions.to_string()));
        }
        rows.sort();
        rows.into_iter().map(|(k, v)| vec![Value::str(&k), Value::str(&v)]).collect()
    }

    /// 1792 for DDL in read-only mode (`read_only_ddl`), after the implicit
    /// commit MySQL makes first when the statement makes one.
    async fn refuse_read_only_ddl(&self, s: &mut Session, when: read_only_ddl::Refused) -> Result<(), SqlError> {
        match when {
            read_only_ddl::Refused::AfterImplicitCommit if txn_control::session_read_only(s) => {
                self.implicit_commit(s).await?;
                Err(txn_control::read_only_refusal())
            }
            read_only_ddl::Refused::InTransaction if txn_control::read_only(s) => Err(txn_control::read_only_refusal()),
            _ => Ok(()),
        }
    }

    /// MySQL commits an open transaction before DDL.
    async fn implicit_commit(&self, s: &mut Session) -> Result<(), SqlError> {
        if s.in_transaction || s.txn.is_some() {
            self.wait_commit_allowed(s).await?;
            txn_control::commit(s).await?;
        }
        Ok(())
    }

    /// How long this session waits for a table lock (@@lock_wait_timeout).
    fn lock_wait(s: &Session) -> std::time::Duration {
        let secs = match vars::get_system_var(s, "lock_wait_timeout", false) {
            Some(Value::Int(n)) => n.max(0) as u64,
            Some(Value::UInt(n)) => n,
            _ => 31_536_000,
        };
        std::time::Duration::from_secs(secs)
    }

    /// Table locks of this SQL node: a session holding some may use only
    /// those (1100, 1099, 1223); another waits until the statement's tables
    /// are free. Callers test `any_held` first, so the statement path pays
    /// one atomic load while no session holds a lock.
    async fn check_table_locks(&self, s: &Session, p: &Parsed) -> Result<(), SqlError> {
        let accesses = lock_statements::table_accesses(s, p);
        if accesses.is_empty() {
            return Ok(());
        }
        if !s.table_locks.is_empty() {
            return table_locks::check_own(&s.table_locks, &accesses);
        }
        self.table_locks.wait_for_access(&s.entry, &accesses, Self::lock_wait(s)).await
    }

    /// A transaction that changed rows commits only while no other session
    /// holds the global read lock (FLUSH TABLES WITH READ LOCK).
    async fn wait_commit_allowed(&self, s: &Session) -> Result<(), SqlError> {
        if self.table_locks.any_held() && s.txn_wrote && s.txn.is_some() {
            self.table_locks.wait_no_global_read(&s.entry, Self::lock_wait(s)).await?;
        }
        Ok(())
    }

    /// UNLOCK TABLES' release (also at START TRANSACTION, LOCK TABLES and
    /// session end). `global` also gives up the global read lock.
    fn release_table_locks(&self, s: &mut Session, global: bool) {
        let mut held = std::mem::take(&mut s.table_locks);
        if !global && held.global_read {
            s.table_locks.global_read = true;
            held.global_read = false;
        }
        self.table_locks.release(s.connection_id, held);
    }

    async fn run_lock_statement(
        &self,
        s: &mut Session,
        st: &lock_statements::LockStmt,
    ) -> Result<QueryOutput, SqlError> {
        use lock_statements::{resolve, LockStmt};
        let busy = || {
            SqlError::new(
                1192,
                "HY000",
                "Can't execute the given command because you have active locked tables or an active transaction",
            )
        };
        match st {
            LockStmt::Lock(list) => {
                if s.table_locks.global_read {
                    return Err(busy());
                }
                self.implicit_commit(s).await?;
                self.release_table_locks(s, false);
                let mut want = Vec::with_capacity(list.len());
                for (name, mode) in list {
                    let (db, table) = resolve(s, name)?;
                    if infoschema::is_infoschema(&db) {
                        return Err(error_map::db_access_denied(&s.user, &db));
                    }
                    match self.catalog.get(&db, &table).await {
                        Ok(_) => {}
                        // A view is locked by its name (mysqldump locks the
                        // views it dumps; statements name it, so they pass
                        // the lock check) and, as in MySQL, so are the
                        // tables it reads, in the same mode: writers of
                        // those tables wait as they would for the view.
                        Err(e) if e.code == 1146 && self.catalog.views()?.get(&db, &table).await?.is_some() => {
                            for (bdb, btable) in view_expand::base_tables(self, &db, &table).await? {
                                want.push((bdb, btable, *mode));
                            }
                        }
                        Err(e) => return Err(e),
                    }
                    want.push((db, table, *mode));
                }
                let timeout = Self::lock_wait(s);
                let held = self.table_locks.lock_tables(&s.entry, table_locks::merge(want), timeout).await?;
                s.table_locks.tables = held.tables;
                Ok(QueryOutput::ok(0))
            }
            LockStmt::Unlock => {
                if !s.table_locks.tables.is_empty() {
                    self.implicit_commit(s).await?;
                }
                self.release_table_locks(s, true);
                Ok(QueryOutput::ok(0))
            }
            LockStmt::FlushTables { tables, read_lock } => {
                if !s.table_locks.is_empty() {
                    return Err(busy());
                }
                self.implicit_commit(s).await?;
                let mut names = Vec::with_capacity(tables.len());
                for name in tables {
                    let (db, table) = resolve(s, name)?;
                    self.catalog.invalidate(&db, &table);
                    if *read_lock {
                        self.catalog.get(&db, &table).await?;
                    }
                    names.push((db, table, table_locks::Mode::Read));
                }
                if tables.is_empty() {
                    // No table cache to close: the definitions cached here are
                    // what FLUSH TABLES drops, read again on next use.
                    self.catalog.invalidate_all();
                }
                if *read_lock {
                    let timeout = Self::lock_wait(s);
                    s.table_locks = if names.is_empty() {
                        self.table_locks.lock_global_read(&s.entry, timeout).await?
                    } else {
                        self.table_locks.lock_tables(&s.entry, table_locks::merge(names), timeout).await?
                    };
                }
                Ok(QueryOutput::ok(0))
            }
            LockStmt::FlushPrivileges => {
                // Re-read the accounts now rather than within acl::RECHECK.
                self.acl.invalidate();
                Ok(QueryOutput::ok(0))
            }
            LockStmt::AlterKeys(name) => {
                let (db, table) = resolve(s, name)?;
                self.implicit_commit(s).await?;
                self.catalog.get(&db, &table).await?;
                // Indexes are always maintained, as InnoDB's; MySQL answers
                // the same note there.
                s.warnings.push(Warning {
                    level: WarningLevel::Note,
                    code: 1031,
                    message: format!("Table storage engine for '{table}' doesn't have this option"),
                });
                Ok(QueryOutput::ok(0))
            }
        }
    }

    /// Statements by kind. The futures of rare, large statements (CREATE
    /// and ALTER TABLE, LOAD DATA, DML through views, EXPLAIN,
    /// SQL_CALC_FOUND_ROWS) are boxed: an async fn's future is as large as
    /// its largest branch, and the statement's future is created and moved
    /// whole for every statement (a point select copied 17 KB before).
    async fn dispatch(
        &self,
        s: &mut Session,
        p: &Parsed,
        params: &[Value],
        row_plan: Option<&plan_cache::PlanSlot<dml::RowStmt>>,
    ) -> Result<QueryOutput, SqlError> {
        match p {
            Parsed::Show(st) => show::execute_show(self, s, st).await,
            Parsed::CreateTable(ct, part) => {
                // As MySQL: CREATE TEMPORARY TABLE does not end the transaction.
                if !ct.temporary {
                    self.implicit_commit(s).await?;
                }
                Box::pin(ddl::create_table(self, s, ct, part.clone())).await
            }
            Parsed::CreateDatabase { name, if_not_exists, charset, collation } => {
                self.implicit_commit(s).await?;
                ddl::create_database(self, s, name, *if_not_exists, charset.as_deref(), collation.as_deref()).await
            }
            Parsed::SetCharacterSet(cs) => {
                vars::set_names(s, cs, None, true)?;
                Ok(QueryOutput::ok(0))
            }
            Parsed::Sql(st) => self.dispatch_sql(s, st, params, row_plan).await,
            Parsed::Lock(st) => self.run_lock_statement(s, st).await,
            Parsed::SqlPrepare(st) => sql_prepare::run(self, s, st).await,
            Parsed::Maintenance(st) => table_maintenance::run(self, s, st).await,
            Parsed::View(st) => view_ddl::run(self, s, st).await,
            Parsed::LoadData(st) => Box::pin(load_data::start(self, s, st)).await,
            Parsed::SelectInto(st) => select_into::run(self, s, st, params).await,
            Parsed::Do(q) => query::execute_query(self, s, q, params).await.map(|_| QueryOutput::ok(0)),
            Parsed::Acl(st) => {
                // As MySQL: account statements end the transaction (not
                // SET ROLE or SHOW GRANTS, which change nothing stored).
                if !matches!(st, acl::stmt::AclStmt::SetRole(_) | acl::stmt::AclStmt::ShowGrants { .. }) {
                    self.implicit_commit(s).await?;
                }
                Box::pin(acl::run::execute(self, s, st)).await
            }
            Parsed::StartConsistentSnapshot(st) => {
                let out = self.dispatch_sql(s, st, params, row_plan).await?;
                s.warnings.push(Warning {
                    level: WarningLevel::Warning,
                    code: 138,
                    message: "NorrDB: WITH CONSISTENT SNAPSHOT was ignored: reads are READ COMMITTED, \
                              each sees the latest committed rows"
                        .into(),
                });
                Ok(out)
            }
        }
    }

    async fn dispatch_sql(
        &self,
        s: &mut Session,
        st: &Statement,
        params: &[Value],
        row_plan: Option<&plan_cache::PlanSlot<dml::RowStmt>>,
    ) -> Result<QueryOutput, SqlError> {
        match st {
            Statement::Query(q) => {
                self.status.com_select.fetch_add(1, Ordering::Relaxed);
                if found_rows::calc_requested(q) {
                    return Box::pin(found_rows::execute_calc(self, s, q, params)).await;
                }
                query::execute_query_to_client(self, s, q, params).await
            }
            Statement::Insert(_) => {
                self.status.com_insert.fetch_add(1, Ordering::Relaxed);
                match dml::execute_insert(self, s, st, params).await {
                    // Writes through a view: looked for only when the name is no table.
                    Err(e) if e.code == 1146 => Box::pin(view_dml::execute(self, s, st, params, e)).await,
                    r => r,
                }
            }
            Statement::Update { .. } => {
                self.status.com_update.fetch_add(1, Ordering::Relaxed);
                match dml::execute_update(self, s, st, params, row_plan).await {
                    Err(e) if e.code == 1146 => Box::pin(view_dml::execute(self, s, st, params, e)).await,
                    r => r,
                }
            }
            Statement::Delete(_) => {
                self.status.com_delete.fetch_add(1, Ordering::Relaxed);
                match dml::execute_delete(self, s, st, params, row_plan).await {
                    Err(e) if e.code == 1146 => Box::pin(view_dml::execute(self, s, st, params, e)).await,
                    r => r,
                }
            }
            Statement::Explain { .. } => Box::pin(explain::execute_explain(self, s, st, params)).await,
            Statement::ExplainTable { table_name, .. } => {
                let (db, table) = ddl::resolve_name(s, table_name)?;
                show::describe(self, s, &db, &table, false, &parse_ext::ShowFilter::None).await
            }
            Statement::Drop { object_type: ObjectType::Table, if_exists, names, temporary: true, .. } => {
                // No implicit commit for DROP TEMPORARY TABLE (MySQL).
                temp_tables::drop_temporary(self, s, names, *if_exists).await
            }
            Statement::Drop { object_type, if_exists, names, table, .. } => {
                self.implicit_commit(s).await?;
                match object_type {
                    ObjectType::Table => ddl::drop_tables(self, s, names, *if_exists).await,
                    ObjectType::Database | ObjectType::Schema => {
                        let name = names.first().map(|n| n.to_string()).unwrap_or_default();
                        let parts = ddl::ident_of(&names[0]);
                        let name = parts.last().cloned().unwrap_or(name);
                        ddl::drop_database(self, s, &name, *if_exists).await
                    }
                    ObjectType::Index => {
                        let t = table.as_ref().ok_or_else(|| SqlError::parse("DROP INDEX needs ON table"))?;
                        let name = ddl::ident_of(&names[0]).last().cloned().unwrap_or_default();
                        ddl::drop_index(self, s, t, &name).await
                    }
                    other => Err(SqlError::unsupported(format!("DROP {other}"))),
                }
            }
            Statement::CreateIndex(ci) => {
                self.implicit_commit(s).await?;
                let cols = ci
                    .columns
                    .iter()
                    .map(|c| match &c.column.expr {
                        Expr::Identifier(i) => Ok(i.value.clone()),
                        Expr::Function(f) => Ok(f.name.to_string()),
                        other => Err(SqlError::unsupported(format!("index key part {other}"))),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let name = ci.name.as_ref().map(|n| ddl::ident_of(n).last().cloned().unwrap_or_default());
                ddl::create_index(self, s, &ci.table_name, name, cols, ci.unique).await
            }
            Statement::AlterTable(at) => {
                if fk_ddl::has_fk_op(at) {
                    // A temporary table has no foreign keys (1215 on CREATE).
                    temp_tables::refuse_ddl(s, &at.name, "ALTER TABLE ... FOREIGN KEY")?;
                }
                self.implicit_commit(s).await?;
                Box::pin(ddl::alter_table(self, s, at)).await
            }
            Statement::RenameTable(pairs) => {
                for p in pairs {
                    temp_tables::refuse_ddl(s, &p.old_name, "RENAME TABLE")?;
                }
                self.implicit_commit(s).await?;
                match alter::rename_tables(self, s, pairs).await {
                    Err(e) if e.code == 1146 => view_ddl::rename_view(self, s, pairs, e).await,
                    r => r,
                }
            }
            Statement::Truncate(t) => {
                self.implicit_commit(s).await?;
                let names: Vec<ObjectName> = t.table_names.iter().map(|x| x.name.clone()).collect();
                ddl::truncate(self, s, &names).await
            }
            Statement::Use(u) => {
                let name = match u {
                    ast::Use::Object(n) | ast::Use::Database(n) | ast::Use::Schema(n) => n,
                    _ => return Err(SqlError::unsupported(format!("{u}"))),
                };
                let db = ddl::ident_of(name).last().cloned().unwrap_or_default();
                self.init_db(s, &db).await?;
                Ok(QueryOutput::ok(0))
            }
            Statement::StartTransaction { modes, .. } => {
                self.wait_commit_allowed(s).await?;
                txn_control::begin(s).await?;
                let asked = modes.iter().rev().find_map(|m| match m {
                    ast::TransactionMode::AccessMode(a) => Some(matches!(a, ast::TransactionAccessMode::ReadOnly)),
                    _ => None,
                });
                s.txn_read_only = asked.or(s.next_txn_read_only.take());
                // As MySQL: beginning a transaction ends LOCK TABLES.
                self.release_table_locks(s, false);
                Ok(QueryOutput::ok(0))
            }
            Statement::Commit { chain, .. } => {
                self.status.com_commit.fetch_add(1, Ordering::Relaxed);
                self.wait_commit_allowed(s).await?;
                txn_control::commit(s).await?;
                // COMMIT and ROLLBACK end a pending SET TRANSACTION mode too.
                s.next_txn_read_only = None;
                if *chain {
                    txn_control::begin(s).await?;
                }
                Ok(QueryOutput::ok(0))
            }
            Statement::Rollback { savepoint: None, chain } => {
                self.status.com_rollback.fetch_add(1, Ordering::Relaxed);
                txn_control::rollback(s).await?;
                s.next_txn_read_only = None;
                if *chain {
                    txn_control::begin(s).await?;
                }
                Ok(QueryOutput::ok(0))
            }
            Statement::Rollback { savepoint: Some(name), .. } => {
                txn_control::rollback_to(self, s, &name.value).await?;
                Ok(QueryOutput::ok(0))
            }
            Statement::Savepoint { name } => {
                txn_control::savepoint(self, s, &name.value).await?;
                Ok(QueryOutput::ok(0))
            }
            Statement::ReleaseSavepoint { name } => {
                txn_control::release_savepoint(s, &name.value)?;
                Ok(QueryOutput::ok(0))
            }
            Statement::Set(set) => self.execute_set(s, set, params).await,
            Statement::Kill { modifier, id } => {
                use crate::session_registry::Kill;
                let what = match modifier {
                    Some(ast::KillType::Query) => Kill::Query,
                    Some(ast::KillType::Connection) | None => Kill::Connection,
                    Some(other) => return Err(SqlError::unsupported(format!("KILL {other}"))),
                };
                let target = u32::try_from(*id)
                    .ok()
                    .and_then(|i| self.sessions.get(i))
                    .ok_or_else(|| SqlError::new(1094, "HY000", format!("Unknown thread id: {id}")))?;
                // Another account's session needs SUPER (CONNECTION_ADMIN);
                // anyone may kill their own sessions.
                let superuser = match &s.account {
                    None => true,
                    Some(_) => {
                        acl::run::global_of(&*self.acl.current(self).await?, s).contains(acl::privs::Privs::SUPER)
                    }
                };
                if target.user != s.user && !superuser {
                    return Err(SqlError::new(1095, "HY000", format!("You are not owner of thread {id}")));
                }
                target.request_kill(what);
                Ok(QueryOutput::ok(0))
            }
            Statement::CreateDatabase { .. } => {
                Err(SqlError::internal("CREATE DATABASE is parsed by parse_create_database"))
            }
            other => Err(SqlError::unsupported(other.to_string().chars().take(60).collect::<String>())),
        }
    }

    /// Evaluate a SET value: literals, identifiers (ON, OFF, DEFAULT, names),
    /// @@vars and @vars here; anything else through `SELECT <expr>`.
    async fn eval_set_value(&self, s: &mut Session, e: &Expr, params: &[Value]) -> Result<Value, SqlError> {
        if let Some(v) = parse_ext::literal_expr_value(e) {
            return Ok(v);
        }
        match e {
            Expr::Identifier(i) if i.value.starts_with("@@") => {
                let n = i.value.trim_start_matches("@@");
                return vars::get_system_var(s, n, false).ok_or_else(|| error_map::unknown_system_variable(n));
            }
            Expr::Identifier(i) if i.value.starts_with('@') => return Ok(vars::get_user_var(s, &i.value)),
            Expr::Identifier(i) if i.quote_style.is_none() || i.quote_style == Some('`') => {
                return Ok(Value::str(&i.value))
            }
            Expr::CompoundIdentifier(v) if v.len() == 2 && v[0].value.starts_with("@@") => {
                let global = v[0].value.eq_ignore_ascii_case("@@global");
                return vars::get_system_var(s, &v[1].value, global)
                    .ok_or_else(|| error_map::unknown_system_variable(&v[1].value));
            }
            Expr::Value(v) if matches!(v.value, ast::Value::Placeholder(_)) => {
                return params
                    .first()
                    .cloned()
                    .ok_or_else(|| SqlError::new(1210, "HY000", "Incorrect arguments to SET"));
            }
            _ => {}
        }
        let q = match parse_sqlparser(&format!("SELECT {e}"))? {
            Statement::Query(q) => q,
            _ => return Err(SqlError::internal("SELECT did not parse as a query")),
        };
        match query::execute_query(self, s, &q, params).await? {
            QueryOutput::Rows { rows, .. } => {
                Ok(rows.into_iter().next().and_then(|r| r.into_iter().next()).unwrap_or(Value::Null))
            }
            QueryOutput::Ok { .. } | QueryOutput::Streamed { .. } => Ok(Value::Null),
        }
    }

    async fn set_one(
        &self,
        s: &mut Session,
        scope: Option<ast::ContextModifier>,
        name: &ObjectName,
        value: &Expr,
        params: &[Value],
    ) -> Result<(), SqlError> {
        let parts = ddl::ident_of(name);
        let mut global = matches!(scope, Some(ast::ContextModifier::Global));
        let var = match parts.as_slice() {
            [one] if one.starts_with("@@") => one.trim_start_matches("@@").to_string(),
            [one] if one.starts_with('@') => {
                let v = self.eval_set_value(s, value, params).await?;
                vars::set_user_var(s, one, v);
                return Ok(());
            }
            [one] => one.clone(),
            [sc, n] if sc.starts_with("@@") => {
                let sc = sc.trim_start_matches("@@").to_ascii_lowercase();
                match sc.as_str() {
                    "global" => global = true,
                    "session" | "local" => global = false,
                    _ => return Err(error_map::unknown_system_variable(&format!("{sc}.{n}"))),
                }
                n.clone()
            }
            [sc, n] if sc.eq_ignore_ascii_case("global") => {
                global = true;
                n.clone()
            }
            [sc, n] if sc.eq_ignore_ascii_case("session") || sc.eq_ignore_ascii_case("local") => n.clone(),
            _ => return Err(error_map::unknown_system_variable(&name.to_string())),
        };
        let v = match (value, ident_str(value)) {
            (_, Some(id)) if !id.starts_with('@') => Value::str(&id),
            _ => self.eval_set_value(s, value, params).await?,
        };
        // `SET @@transaction_isolation = x`, the @@ form without a scope
        // word, is the next transaction's only, like SET TRANSACTION
        // ISOLATION LEVEL (MySQL 8.0); `SET transaction_isolation = x` and
        // the SESSION forms set the session's value.
        let bare_at = scope.is_none() && matches!(parts.as_slice(), [one] if one.starts_with("@@"));
        if bare_at && matches!(var.to_ascii_lowercase().as_str(), "transaction_isolation" | "tx_isolation") {
            return txn_control::next_txn_isolation_var(s, &var, &v);
        }
        if vars::set_system_var(s, &var, global, v)? == vars::SetEffect::CommitNow {
            txn_control::commit(s).await?;
        }
        Ok(())
    }

    async fn execute_set(&self, s: &mut Session, set: &ast::Set, params: &[Value]) -> Result<QueryOutput, SqlError> {
        match set {
            ast::Set::SingleAssignment { scope, variable, values, .. } => {
                let v = values.first().ok_or_else(|| SqlError::parse("SET needs a value"))?;
                self.set_one(s, *scope, variable, v, params).await?;
            }
            ast::Set::MultipleAssignments { assignments } => {
                for a in assignments {
                    self.set_one(s, a.scope, &a.name, &a.value, params).await?;
                }
            }
            ast::Set::SetNames { charset_name, collation_name } => {
                vars::set_names(s, &charset_name.value, collation_name.as_deref(), false)?;
            }
            ast::Set::SetNamesDefault {} => vars::set_names(s, "utf8mb4", None, false)?,
            ast::Set::SetTransaction { modes, session, .. } => {
                // Without SESSION the characteristics are the next
                // transaction's only, and not while one is open (1568).
                if !*session && s.in_transaction {
                    return Err(SqlError::new(
                        1568,
                        "25001",
                        "Transaction characteristics can't be changed while a transaction is in progress",
                    ));
                }
                for m in modes {
                    match m {
                        ast::TransactionMode::IsolationLevel(l) => {
                            let name = txn_control::isolation_name(l);
                            if *session {
                                vars::set_system_var(s, "transaction_isolation", false, Value::str(name))?;
                            } else {
                                // The next transaction's only: @@transaction_isolation
                                // stays the session's (as in MySQL 8.0).
                                txn_control::next_txn_isolation(s, name);
                            }
                        }
                        ast::TransactionMode::AccessMode(a) => {
                            let ro = matches!(a, ast::TransactionAccessMode::ReadOnly);
                            if *session {
                                vars::set_system_var(s, "transaction_read_only", false, Value::Int(ro as i64))?;
                            } else {
                                s.next_txn_read_only = Some(ro);
                            }
                        }
                    }
                }
            }
            ast::Set::SetTimeZone { value, .. } => {
                let v = self.eval_set_value(s, value, params).await?;
                vars::set_system_var(s, "time_zone", false, v)?;
            }
            other => return Err(SqlError::unsupported(other.to_string())),
        }
        Ok(QueryOutput::ok(0))
    }
}

/// The protocol layer runs engine calls on tokio tasks: every future must be Send.
#[allow(dead_code)]
fn assert_futures_are_send(e: &Engine, s: &mut Session, p: &Prepared) {
    fn is_send<T: Send>(_: &T) {}
    is_send(&e.execute_text(s, ""));
    is_send(&e.prepare(s, ""));
    is_send(&e.execute_prepared(s, p, Vec::new()));
    is_send(&e.field_list(s, ""));
    is_send(&e.init_db(s, ""));
    is_send(&e.end_session(s));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_extended_statements() {
        assert!(matches!(parse_statement("SHOW CREATE DATABASE d").unwrap(), Parsed::Show(_)));
        assert!(matches!(
            parse_statement("CREATE TABLE t (a INT PRIMARY KEY) PARTITION BY KEY (a) PARTITIONS 2").unwrap(),
            Parsed::CreateTable(_, Some(_))
        ));
        assert!(matches!(parse_statement("SELECT * FROM t WHERE a = 1 LOCK IN SHARE MODE").unwrap(), Parsed::Sql(_)));
        assert!(matches!(parse_statement("SET @x := 5").unwrap(), Parsed::Sql(_)));
        assert!(matches!(parse_statement("SET CHARACTER SET utf8mb4").unwrap(), Parsed::SetCharacterSet(_)));
        match parse_statement("CREATE SCHEMA IF NOT EXISTS d DEFAULT CHARACTER SET = utf8mb4 COLLATE utf8mb4_bin")
            .unwrap()
        {
            Parsed::CreateDatabase { name, if_not_exists, charset, collation } => {
                assert_eq!(name, "d");
                assert!(if_not_exists);
                assert_eq!(charset.as_deref(), Some("utf8mb4"));
                assert_eq!(collation.as_deref(), Some("utf8mb4_bin"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(parse_statement("SELEC 1").unwrap_err().code, 1064);
    }
}
