//! Shared by the tests that run the engine against a real data node.

/// A 2-thread runtime for the engine and an in-process data node with
/// `knobs` on a free loopback port.
#[allow(dead_code)] // not every test binary that shares this module uses it
pub fn runtime_and_node(knobs: norr_knobs::Knobs) -> (tokio::runtime::Runtime, norr_runtime::DataNodeHandle) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let node = norr_runtime::start_data_node(norr_runtime::DataNodeConfig {
        node_id: 1,
        listen: "127.0.0.1:0".parse().expect("addr"),
        knobs,
        cluster: None,
    })
    .expect("data node starts");
    (rt, node)
}

/// A runtime like `norr sqld --threads 2` (its session threads and their
/// stacks), an in-process data node with `knobs`, and a SQL node with `cfg`
/// on a free port: the SQL node as a client meets it, for the tests of what
/// a client can do to it (robustness, streaming).
#[allow(dead_code)]
pub fn sqld_like(
    knobs: norr_knobs::Knobs,
    cfg: norr_sql::engine::EngineConfig,
) -> (tokio::runtime::Runtime, norr_runtime::DataNodeHandle, u16) {
    let rt = norr_sql::server::session_runtime(2).expect("runtime");
    let node = norr_runtime::start_data_node(norr_runtime::DataNodeConfig {
        node_id: 1,
        listen: "127.0.0.1:0".parse().expect("addr"),
        knobs,
        cluster: None,
    })
    .expect("data node starts");
    let addr = node.local_addr().to_string();
    let port = rt.block_on(async move { sql_node_with(&addr, cfg).await });
    (rt, node, port)
}

/// The MySQL error number of a statement's failure, or None if it
/// succeeded (panics on an error that is not the server's).
#[allow(dead_code)]
pub async fn error_of(c: &mut mysql_async::Conn, sql: &str) -> Option<u16> {
    use mysql_async::prelude::Queryable;
    match c.query_drop(sql).await {
        Ok(()) => None,
        Err(mysql_async::Error::Server(e)) => Some(e.code),
        Err(other) => panic!("{}...: not a server error: {other}", &sql[..sql.floor_char_boundary(60)]),
    }
}

/// Root's password of the SQL nodes `sql_node` starts.
#[allow(dead_code)] // not every test binary that shares this module uses SQL nodes
pub const PASSWORD: &str = "pw";

/// A SQL node (engine + MySQL protocol server) on a free loopback port,
/// reaching the data node at `addr`; its port.
#[allow(dead_code)]
pub async fn sql_node(addr: &str) -> u16 {
    sql_node_with(addr, norr_sql::engine::EngineConfig::default()).await
}

/// `sql_node` with the engine configured by `cfg`.
#[allow(dead_code)]
pub async fn sql_node_with(addr: &str, cfg: norr_sql::engine::EngineConfig) -> u16 {
    use norr_sql::engine::Engine;
    use norr_sql::server::{serve_listener, ServerConfig, ServerState};
    let engine = Engine::connect(addr, cfg).await.expect("engine connects");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(serve_listener(listener, engine, ServerState::new(ServerConfig::with_root(PASSWORD))));
    port
}

/// A MySQL client connection to a `sql_node` as root, in `db` if given.
#[allow(dead_code)]
pub async fn connect(port: u16, db: Option<&str>) -> mysql_async::Conn {
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some("root"))
        .pass(Some(PASSWORD))
        .db_name(db)
        .prefer_socket(false);
    mysql_async::Conn::new(opts).await.expect("connection accepted")
}

/// The MySQL error number of a server error (panics on any other error).
#[allow(dead_code)]
pub fn code(e: mysql_async::Error) -> u16 {
    match e {
        mysql_async::Error::Server(e) => e.code,
        other => panic!("expected a server error, got {other:?}"),
    }
}
