//! Shared by the protocol_* tests: a fake SQL backend with scripted answers,
//! a server on a free loopback port, and a raw packet client for the cases a
//! real driver cannot produce (malformed, oversized, COM_FIELD_LIST, ...).
#![allow(dead_code)]

use norr_signals::value::{Date, DateTime, Decimal};
use norr_signals::Value;
use norr_sql::protocol::auth::AuthPlugin;
use norr_sql::server::{serve_listener, Backend, PreparedInfo, ServerConfig, ServerState, User};
use norr_sql::types::{column_flags, ColumnMeta, FieldType, QueryOutput, Session, SqlError};
use std::future::Future;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub struct FakeBackend;

/// Parameters of the last COM_STMT_EXECUTE, for tests that check decoding.
pub static LAST_PARAMS: std::sync::Mutex<Vec<Value>> = std::sync::Mutex::new(Vec::new());

pub struct FakeStmt {
    pub sql: String,
}

/// Column metadata for a value, so that a prepared `SELECT ?, ?` echoes its
/// parameters with matching types.
pub fn meta_for(name: &str, v: &Value) -> ColumnMeta {
    let (ft, dec, flags) = match v {
        Value::Null => (FieldType::Null, 0, 0),
        Value::Int(_) => (FieldType::LongLong, 0, 0),
        Value::UInt(_) => (FieldType::LongLong, 0, column_flags::UNSIGNED),
        Value::Float(_) => (FieldType::Float, 31, 0),
        Value::Double(_) => (FieldType::Double, 31, 0),
        Value::Decimal(d) => (FieldType::NewDecimal, d.scale, 0),
        Value::Bytes(_) => (FieldType::VarString, 0, 0),
        Value::Date(_) => (FieldType::Date, 0, 0),
        Value::DateTime(_) => (FieldType::DateTime, 6, 0),
        Value::Time(_) => (FieldType::Time, 6, 0),
    };
    let mut c = ColumnMeta::expr(name, ft);
    c.decimals = dec;
    c.flags = flags;
    c
}

/// One row holding every kind of value, with its columns.
pub fn all_types() -> (Vec<ColumnMeta>, Vec<Value>) {
    let dt = DateTime { date: Date { year: 2024, month: 2, day: 29 }, hour: 13, minute: 5, second: 9, micro: 123456 };
    let mk = |name: &str, ft: FieldType, dec: u8, flags: u16| {
        let mut c = ColumnMeta::expr(name, ft);
        c.decimals = dec;
        c.flags = flags;
        c.table = "t".into();
        c.org_table = "t".into();
        c.schema = "test".into();
        c
    };
    let cols = vec![
        mk("tiny", FieldType::Tiny, 0, 0),
        mk("short", FieldType::Short, 0, 0),
        mk("int24", FieldType::Int24, 0, 0),
        mk("long", FieldType::Long, 0, 0),
        mk("ulong", FieldType::LongLong, 0, column_flags::UNSIGNED),
        mk("longlong", FieldType::LongLong, 0, 0),
        mk("flt", FieldType::Float, 31, 0),
        mk("dbl", FieldType::Double, 31, 0),
        mk("dbl_big", FieldType::Double, 31, 0),
        mk("dec", FieldType::NewDecimal, 2, 0),
        mk("vc", FieldType::VarString, 0, 0),
        mk("blob", FieldType::Blob, 0, column_flags::BLOB | column_flags::BINARY),
        mk("d", FieldType::Date, 0, 0),
        mk("dt", FieldType::DateTime, 0, 0),
        mk("dt6", FieldType::DateTime, 6, 0),
        mk("ts3", FieldType::Timestamp, 3, 0),
        mk("tm", FieldType::Time, 0, 0),
        mk("tm_neg", FieldType::Time, 6, 0),
        mk("yr", FieldType::Year, 0, column_flags::UNSIGNED),
        mk("nul", FieldType::VarString, 0, 0),
    ];
    let row = vec![
        Value::Int(-128),
        Value::Int(-32768),
        Value::Int(8388607),
        Value::Int(-2147483648),
        Value::UInt(u64::MAX),
        Value::Int(i64::MIN),
        Value::Float(1.5),
        Value::Double(0.1 + 0.2),
        Value::Double(1e20),
        Value::Decimal(Decimal { mantissa: -12345, scale: 2 }),
        Value::str("héllo"),
        Value::Bytes(vec![0, 1, 2, 255]),
        Value::Date(Date { year: 2024, month: 2, day: 29 }),
        Value::DateTime(DateTime { micro: 0, ..dt }),
        Value::DateTime(dt),
        Value::DateTime(dt),
        Value::Time((838 * 3600 + 59 * 60 + 59) * 1_000_000),
        Value::Time(-(25 * 3600 * 1_000_000 + 500_000)),
        Value::UInt(2024),
        Value::Null,
    ];
    (cols, row)
}

fn run(s: &mut Session, sql: &str) -> Result<QueryOutput, SqlError> {
    let q = sql.trim().to_ascii_lowercase();
    let q = q.trim_end_matches(';').trim();
    match q {
        "select 1" => Ok(QueryOutput::Rows {
            columns: vec![ColumnMeta::expr("1", FieldType::LongLong)].into(),
            rows: vec![vec![Value::Int(1)]],
        }),
        "select types" => {
            let (columns, row) = all_types();
            Ok(QueryOutput::Rows { columns: columns.into(), rows: vec![row] })
        }
        "select many" => Ok(QueryOutput::Rows {
            columns: vec![ColumnMeta::expr("n", FieldType::LongLong), ColumnMeta::expr("s", FieldType::VarString)].into(),
            rows: (0..10_000).map(|i| vec![Value::Int(i), Value::str(&format!("row-{i}"))]).collect(),
        }),
        "select empty" => Ok(QueryOutput::Rows { columns: vec![ColumnMeta::expr("x", FieldType::Long)].into(), rows: vec![] }),
        "insert" => {
            s.last_insert_id = 42;
            Ok(QueryOutput::Ok { affected_rows: 3, last_insert_id: 42, info: "Records: 3  Duplicates: 0  Warnings: 0".into() })
        }
        "warn" => {
            s.warnings = vec![norr_sql::types::Warning {
                level: norr_sql::types::WarningLevel::Warning,
                code: 1265,
                message: "Data truncated".into(),
            }];
            Ok(QueryOutput::ok(1))
        }
        "begin" => {
            s.in_transaction = true;
            Ok(QueryOutput::ok(0))
        }
        "commit" | "rollback" => {
            s.in_transaction = false;
            Ok(QueryOutput::ok(0))
        }
        "set autocommit=0" => {
            s.autocommit = false;
            Ok(QueryOutput::ok(0))
        }
        "select db" => Ok(QueryOutput::Rows {
            columns: vec![ColumnMeta::expr("DATABASE()", FieldType::VarString)].into(),
            rows: vec![vec![s.current_db.as_deref().map(Value::str).unwrap_or(Value::Null)]],
        }),
        "error" => Err(SqlError::new(1146, "42S02", "Table 'test.nope' doesn't exist")),
        "dup" => Err(SqlError::new(1062, "23000", "Duplicate entry '1' for key 'PRIMARY'")),
        _ if q.starts_with("select @@") => {
            // Drivers read a few variables after connecting.
            let vars: Vec<&str> = q["select ".len()..].split(',').map(|v| v.trim()).collect();
            let columns: Vec<_> = vars.iter().map(|v| ColumnMeta::expr(v, FieldType::LongLong)).collect();
            let row = vars
                .iter()
                .map(|v| match *v {
                    "@@max_allowed_packet" => Value::Int(64 << 20),
                    "@@wait_timeout" => Value::Int(28800),
                    _ => Value::Null,
                })
                .collect();
            Ok(QueryOutput::Rows { columns: columns.into(), rows: vec![row] })
        }
        _ if q.starts_with("select len ") => {
            let n = q.len() - "select len ".len();
            Ok(QueryOutput::Rows {
                columns: vec![ColumnMeta::expr("len", FieldType::LongLong)].into(),
                rows: vec![vec![Value::Int(n as i64)]],
            })
        }
        _ => Err(SqlError::parse(format!(
            "You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near '{}' at line 1",
            sql.chars().take(40).collect::<String>()
        ))),
    }
}

fn ready<T: Send>(v: T) -> impl Future<Output = T> + Send {
    std::future::ready(v)
}

impl Backend for FakeBackend {
    type Stmt = FakeStmt;

    fn server_version(&self) -> String {
        "8.0.36-NorrDB-test".into()
    }

    fn new_session(&self, connection_id: u32, user: &str) -> Session {
        Session::new(connection_id, user)
    }

    fn execute_text<'a>(
        &'a self,
        s: &'a mut Session,
        sql: &'a str,
    ) -> impl Future<Output = Vec<Result<QueryOutput, SqlError>>> + Send + 'a {
        let mut out = Vec::new();
        let stmts: Vec<&str> = if s.multi_statements {
            sql.split(';').filter(|x| !x.trim().is_empty()).collect()
        } else if sql.trim().is_empty() {
            vec![]
        } else {
            vec![sql]
        };
        if !s.multi_statements && sql.trim().trim_end_matches(';').contains(';') {
            return ready(vec![Err(SqlError::parse("You have an error in your SQL syntax near ';'"))]);
        }
        for st in stmts {
            let r = run(s, st);
            let stop = r.is_err();
            out.push(r);
            if stop {
                break;
            }
        }
        ready(out)
    }

    fn prepare<'a>(
        &'a self,
        _s: &'a mut Session,
        sql: &'a str,
    ) -> impl Future<Output = Result<PreparedInfo<FakeStmt>, SqlError>> + Send + 'a {
        let q = sql.trim().to_ascii_lowercase();
        let r = if q == "select types" {
            let (columns, _) = all_types();
            Ok(PreparedInfo { stmt: Arc::new(FakeStmt { sql: q }), param_count: 0, columns: columns.into() })
        } else if q.starts_with("select ?") || q == "insert" || q.starts_with("select 1") {
            let n = q.matches('?').count() as u16;
            let columns = (0..n).map(|i| ColumnMeta::expr(&format!("p{i}"), FieldType::VarString)).collect::<Vec<_>>();
            Ok(PreparedInfo { stmt: Arc::new(FakeStmt { sql: q }), param_count: n, columns: columns.into() })
        } else if q.starts_with("insert ?") {
            let n = q.matches('?').count() as u16;
            Ok(PreparedInfo { stmt: Arc::new(FakeStmt { sql: q }), param_count: n, columns: Arc::from([]) })
        } else {
            Err(SqlError::parse("You have an error in your SQL syntax"))
        };
        ready(r)
    }

    fn execute_prepared<'a>(
        &'a self,
        s: &'a mut Session,
        stmt: &'a FakeStmt,
        params: Vec<Value>,
    ) -> impl Future<Output = Result<QueryOutput, SqlError>> + Send + 'a {
        *LAST_PARAMS.lock().unwrap() = params.clone();
        let r = if stmt.sql == "select types" {
            let (columns, row) = all_types();
            Ok(QueryOutput::Rows { columns: columns.into(), rows: vec![row] })
        } else if stmt.sql.starts_with("insert") {
            Ok(QueryOutput::Ok { affected_rows: params.len() as u64, last_insert_id: 7, info: String::new() })
        } else if stmt.sql.starts_with("select 1") && params.is_empty() {
            run(s, "select 1")
        } else {
            let columns: Vec<_> = params.iter().enumerate().map(|(i, v)| meta_for(&format!("p{i}"), v)).collect();
            Ok(QueryOutput::Rows { columns: columns.into(), rows: vec![params] })
        };
        ready(r)
    }

    fn field_list<'a>(
        &'a self,
        _s: &'a mut Session,
        table: &'a str,
    ) -> impl Future<Output = Result<Vec<ColumnMeta>, SqlError>> + Send + 'a {
        let r = if table == "t" {
            let (cols, _) = all_types();
            Ok(cols.into_iter().take(3).collect())
        } else {
            Err(SqlError::new(1146, "42S02", format!("Table 'test.{table}' doesn't exist")))
        };
        ready(r)
    }

    fn init_db<'a>(
        &'a self,
        s: &'a mut Session,
        db: &'a str,
    ) -> impl Future<Output = Result<(), SqlError>> + Send + 'a {
        let r = if db == "nosuchdb" {
            Err(SqlError::new(1049, "42000", format!("Unknown database '{db}'")))
        } else {
            s.current_db = Some(db.into());
            Ok(())
        };
        ready(r)
    }

    fn end_session<'a>(&'a self, s: &'a mut Session) -> impl Future<Output = ()> + Send + 'a {
        s.in_transaction = false;
        ready(())
    }
}

pub struct TestServer {
    pub port: u16,
    pub state: Arc<ServerState>,
}

/// Starts a fake-backed server: users root/"rootpw" (any plugin),
/// "native"/"npw" (mysql_native_password only), "sha"/"spw"
/// (caching_sha2_password only), "nopw" (empty password).
pub async fn start_server_with(f: impl FnOnce(&mut ServerConfig)) -> TestServer {
    let mut cfg = ServerConfig::with_root("rootpw");
    cfg.users.insert("native".into(), User { password: "npw".into(), plugin: Some(AuthPlugin::Native) });
    cfg.users.insert("sha".into(), User { password: "spw".into(), plugin: Some(AuthPlugin::CachingSha2) });
    cfg.users.insert("nopw".into(), User { password: "".into(), plugin: None });
    f(&mut cfg);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let state = ServerState::new(cfg);
    tokio::spawn(serve_listener(listener, Arc::new(FakeBackend), state.clone()));
    TestServer { port, state }
}

pub async fn start_server() -> TestServer {
    start_server_with(|_| {}).await
}

pub fn opts(port: u16, user: &str, pass: &str) -> mysql_async::OptsBuilder {
    mysql_async::OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some(user))
        .pass(Some(pass))
        .prefer_socket(false)
}

/// A minimal raw client: speaks packets, logs in with mysql_native_password.
pub struct Raw {
    pub s: TcpStream,
    pub seq: u8,
}

pub const CAPS: u32 = 0x0000_0200 /*PROTOCOL_41*/ | 0x8000 /*SECURE_CONN*/ | 0x0008_0000 /*PLUGIN_AUTH*/
    | 0x2000 /*TRANSACTIONS*/ | 0x0002_0000 /*MULTI_RESULTS*/ | 0x1 | 0x4;

/// What COM_STMT_PREPARE answered.
pub struct Prepared {
    pub id: u32,
    pub cols: u16,
    pub params: u16,
}

impl Raw {
    pub async fn connect(port: u16) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        Raw { s, seq: 0 }
    }

    pub async fn read(&mut self) -> Option<Vec<u8>> {
        let mut h = [0u8; 4];
        self.s.read_exact(&mut h).await.ok()?;
        let len = u32::from_le_bytes([h[0], h[1], h[2], 0]) as usize;
        self.seq = h[3].wrapping_add(1);
        let mut p = vec![0u8; len];
        self.s.read_exact(&mut p).await.ok()?;
        Some(p)
    }

    pub async fn write(&mut self, payload: &[u8]) {
        let len = (payload.len() as u32).to_le_bytes();
        let mut b = vec![len[0], len[1], len[2], self.seq];
        b.extend_from_slice(payload);
        self.s.write_all(&b).await.unwrap();
        self.seq = self.seq.wrapping_add(1);
    }

    /// A command: sequence restarts at 0.
    pub async fn command(&mut self, payload: &[u8]) {
        self.seq = 0;
        self.write(payload).await;
    }

    /// COM_STMT_PREPARE of `sql`: reads the PREPARE_OK, the parameter and
    /// column definitions (each checked to start with catalog "def") and,
    /// unless `deprecate_eof` was negotiated, the EOF after each block.
    pub async fn prepare(&mut self, sql: &str, deprecate_eof: bool) -> Prepared {
        let mut p = vec![0x16];
        p.extend_from_slice(sql.as_bytes());
        self.command(&p).await;
        let ok = self.read().await.unwrap();
        assert_eq!(ok[0], 0, "{ok:?}");
        let id = u32::from_le_bytes([ok[1], ok[2], ok[3], ok[4]]);
        let cols = u16::from_le_bytes([ok[5], ok[6]]);
        let params = u16::from_le_bytes([ok[7], ok[8]]);
        for block in [params, cols] {
            if block > 0 {
                for _ in 0..block {
                    assert_eq!(&self.read().await.unwrap()[..4], b"\x03def");
                }
                if !deprecate_eof {
                    assert_eq!(self.read().await.unwrap()[0], 0xfe);
                }
            }
        }
        Prepared { id, cols, params }
    }

    /// Greeting + native-password login with `caps`.
    pub async fn login(port: u16, user: &str, pass: &str, caps: u32) -> (Raw, Vec<u8>) {
        Raw::login_mariadb(port, user, pass, caps, 0).await.0
    }

    /// `login`, also sending MariaDB extended capabilities `mariadb_caps` in
    /// the last 4 filler bytes (as libmariadb does when the greeting lacks
    /// CLIENT_MYSQL). Returns the greeting too.
    pub async fn login_mariadb(
        port: u16,
        user: &str,
        pass: &str,
        caps: u32,
        mariadb_caps: u32,
    ) -> ((Raw, Vec<u8>), Vec<u8>) {
        let mut r = Raw::connect(port).await;
        let g = r.read().await.unwrap();
        assert_eq!(g[0], 10);
        let ver_end = g.iter().position(|&b| b == 0).unwrap();
        let p = ver_end + 1 + 4;
        let mut nonce = g[p..p + 8].to_vec();
        let p2 = p + 8 + 1 + 2 + 1 + 2 + 2 + 1 + 10;
        nonce.extend_from_slice(&g[p2..p2 + 12]);
        let scr =
            mysql_common::scramble::scramble_native(&nonce, pass.as_bytes()).map(|x| x.to_vec()).unwrap_or_default();
        let mut resp = Vec::new();
        resp.extend_from_slice(&caps.to_le_bytes());
        resp.extend_from_slice(&(16u32 << 20).to_le_bytes());
        resp.push(255);
        resp.extend_from_slice(&[0u8; 19]);
        resp.extend_from_slice(&mariadb_caps.to_le_bytes());
        resp.extend_from_slice(user.as_bytes());
        resp.push(0);
        resp.push(scr.len() as u8);
        resp.extend_from_slice(&scr);
        resp.extend_from_slice(b"mysql_native_password\0");
        r.write(&resp).await;
        let mut reply = r.read().await.unwrap();
        if reply[0] == 0xfe {
            // auth switch: answer for the requested plugin
            let name_end = reply.iter().position(|&b| b == 0).unwrap();
            let plugin = String::from_utf8_lossy(&reply[1..name_end]).to_string();
            let nonce2 = reply[name_end + 1..name_end + 21].to_vec();
            let scr = if plugin == "caching_sha2_password" {
                mysql_common::scramble::scramble_sha256(&nonce2, pass.as_bytes())
                    .map(|x| x.to_vec())
                    .unwrap_or_default()
            } else {
                mysql_common::scramble::scramble_native(&nonce2, pass.as_bytes())
                    .map(|x| x.to_vec())
                    .unwrap_or_default()
            };
            r.write(&scr).await;
            reply = r.read().await.unwrap();
            if reply == [0x01, 0x03] {
                reply = r.read().await.unwrap();
            }
        }
        ((r, reply), g)
    }
}

/// Error code and SQLSTATE of an ERR packet.
pub fn err_of(p: &[u8]) -> (u16, String, String) {
    assert_eq!(p[0], 0xff, "expected ERR packet, got {p:?}");
    let code = u16::from_le_bytes([p[1], p[2]]);
    let state = String::from_utf8_lossy(&p[4..9]).to_string();
    let msg = String::from_utf8_lossy(&p[9..]).to_string();
    (code, state, msg)
}

pub fn server_error(e: mysql_async::Error) -> (u16, String, String) {
    match e {
        mysql_async::Error::Server(se) => (se.code, se.state, se.message),
        other => panic!("expected server error, got {other:?}"),
    }
}
