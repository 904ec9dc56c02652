//! The protocol ceiling: a MySQL server that runs `norr sqld`'s own protocol
//! layer, runtime and allocator, but does no database work at all. Every
//! statement is answered at once: a SELECT (text or prepared) with one row of
//! one 119-byte CHAR column, shaped like sysbench's `c`; anything else with OK.
//!
//! It is a measuring instrument, not a database: sysbench against it shows
//! what the client and the kernel's socket path cost per query on a machine,
//! which bounds the throughput any server can reach there
//! (`bench/sysbench_vs_mariadb.sh` runs it beside MariaDB and norr).
//!
//! ```text
//! cargo build --release -p norr-sql --example null_sqld
//! target/release/examples/null_sqld --listen 127.0.0.1:3399
//! ```

use norr_signals::Value;
use norr_sql::server::{bind_unix, serve_listener, serve_unix, Backend, PreparedInfo, ServerConfig, ServerState};
use norr_sql::types::{ColumnMeta, FieldType, QueryOutput, Session, SqlError};
use std::future::{ready, Future};
use std::sync::Arc;

// The allocator `norr sqld` runs with (crates/cli/src/main.rs).
#[global_allocator]
static GLOBAL: norr_alloc::Allocator = norr_alloc::Allocator;

/// sysbench's `c` values are 119 characters.
const ROW_BYTES: usize = 119;

struct NullBackend {
    columns: Arc<[ColumnMeta]>,
}

/// What a statement is, as far as the null server cares.
struct NullStmt {
    returns_rows: bool,
}

fn is_select(sql: &str) -> bool {
    let head = sql.trim_start().get(..6).unwrap_or("");
    head.eq_ignore_ascii_case("select") || head.eq_ignore_ascii_case("show v") || head.eq_ignore_ascii_case("show s")
}

impl NullBackend {
    fn new() -> NullBackend {
        let mut c = ColumnMeta::expr("c", FieldType::String);
        c.column_length = 480;
        NullBackend { columns: Arc::from([c]) }
    }

    fn answer(&self, returns_rows: bool) -> QueryOutput {
        if returns_rows {
            let row = vec![Value::Bytes(vec![b'7'; ROW_BYTES])];
            QueryOutput::Rows { columns: self.columns.clone(), rows: vec![row] }
        } else {
            QueryOutput::ok(0)
        }
    }
}

impl Backend for NullBackend {
    type Stmt = NullStmt;

    fn server_version(&self) -> String {
        "8.0.36-NorrDB-null".into()
    }

    fn new_session(&self, connection_id: u32, user: &str) -> Session {
        Session::new(connection_id, user)
    }

    fn execute_text<'a>(
        &'a self,
        s: &'a mut Session,
        sql: &'a str,
    ) -> impl Future<Output = Vec<Result<QueryOutput, SqlError>>> + Send + 'a {
        let parts: Vec<&str> =
            if s.multi_statements { sql.split(';').filter(|p| !p.trim().is_empty()).collect() } else { vec![sql] };
        ready(parts.into_iter().map(|p| Ok(self.answer(is_select(p)))).collect())
    }

    fn prepare<'a>(
        &'a self,
        _s: &'a mut Session,
        sql: &'a str,
    ) -> impl Future<Output = Result<PreparedInfo<NullStmt>, SqlError>> + Send + 'a {
        let returns_rows = is_select(sql);
        let param_count = u16::try_from(sql.matches('?').count()).unwrap_or(u16::MAX);
        let columns = if returns_rows { self.columns.clone() } else { Arc::from([]) };
        ready(Ok(PreparedInfo { stmt: Arc::new(NullStmt { returns_rows }), param_count, columns }))
    }

    fn execute_prepared<'a>(
        &'a self,
        _s: &'a mut Session,
        stmt: &'a NullStmt,
        _params: Vec<Value>,
    ) -> impl Future<Output = Result<QueryOutput, SqlError>> + Send + 'a {
        ready(Ok(self.answer(stmt.returns_rows)))
    }

    fn field_list<'a>(
        &'a self,
        _s: &'a mut Session,
        _table: &'a str,
    ) -> impl Future<Output = Result<Vec<ColumnMeta>, SqlError>> + Send + 'a {
        ready(Ok(self.columns.to_vec()))
    }

    fn init_db<'a>(
        &'a self,
        s: &'a mut Session,
        db: &'a str,
    ) -> impl Future<Output = Result<(), SqlError>> + Send + 'a {
        s.current_db = Some(Arc::from(db));
        ready(Ok(()))
    }

    fn end_session<'a>(&'a self, _s: &'a mut Session) -> impl Future<Output = ()> + Send + 'a {
        ready(())
    }
}

fn main() -> anyhow::Result<()> {
    let mut listen = "127.0.0.1:3399".to_string();
    let mut socket: Option<std::path::PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--listen" => listen = args.next().ok_or_else(|| anyhow::anyhow!("--listen needs HOST:PORT"))?,
            "--socket" => socket = Some(args.next().ok_or_else(|| anyhow::anyhow!("--socket needs a path"))?.into()),
            "--help" | "-h" => {
                println!(
                    "null_sqld [--listen HOST:PORT] [--socket PATH]: answers MySQL clients without doing any database work"
                );
                return Ok(());
            }
            other => anyhow::bail!("unknown argument {other} (try --help)"),
        }
    }
    // One session thread, as `norr sqld`'s default.
    let rt = tokio::runtime::Builder::new_current_thread().thread_name("sqld").enable_all().build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&listen)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
        let mut config = ServerConfig::with_root("");
        config.max_connections = 1000;
        let (backend, state) = (Arc::new(NullBackend::new()), ServerState::new(config));
        if let Some(path) = &socket {
            tokio::spawn(serve_unix(bind_unix(path)?, backend.clone(), state.clone()));
        }
        serve_listener(listener, backend, state).await;
        Ok(())
    })
}
