//! `SET GLOBAL max_connections` through the real engine and server: the new
//! limit applies to new connections (1040 "Too many connections" past it and
//! the one connection kept for an admin account), connections already in stay. Its own test binary: system variables are process-wide,
//! and a low limit must not refuse other tests' clients.
//!
//! A refused client may get its error before the server has counted the
//! connection out, so a connection that must succeed is made with room under
//! the limit; one that must be refused is made at the limit exactly.

mod node_support;

use mysql_async::prelude::*;
use norr_sql::engine::{Engine, EngineConfig};
use norr_sql::server::{serve_listener, ServerConfig, ServerState};

const PASSWORD: &str = "pw";

fn opts(port: u16) -> mysql_async::OptsBuilder {
    mysql_async::OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some("root"))
        .pass(Some(PASSWORD))
        .prefer_socket(false)
}

async fn connect(port: u16) -> mysql_async::Conn {
    mysql_async::Conn::new(opts(port)).await.expect("connection accepted")
}

async fn refused(port: u16) {
    match mysql_async::Conn::new(opts(port)).await {
        // Refused before the handshake, so without a SQLSTATE on the wire
        // (as MySQL): the client reports HY000.
        Err(mysql_async::Error::Server(e)) => {
            assert_eq!((e.code, e.state.as_str(), e.message.as_str()), (1040, "HY000", "Too many connections"))
        }
        Err(other) => panic!("expected error 1040, got {other:?}"),
        Ok(_) => panic!("connection accepted past max_connections"),
    }
}

async fn global_limit(c: &mut mysql_async::Conn) -> u64 {
    c.query_first("SELECT @@global.max_connections").await.expect("select").expect("one row")
}

async fn still_works(c: &mut mysql_async::Conn) {
    let one: Option<i64> = c.query_first("SELECT 1").await.expect("an existing connection keeps working");
    assert_eq!(one, Some(1));
}

#[test]
fn set_global_max_connections_limits_new_connections() {
    let (rt, node) = node_support::runtime_and_node(norr_knobs::Knobs::default());
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let server_cfg = ServerConfig::with_root(PASSWORD);
        let engine_cfg = EngineConfig { max_connections: server_cfg.max_connections as u64, ..Default::default() };
        let engine = Engine::connect(&addr, engine_cfg).await.expect("engine connects");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(serve_listener(listener, engine, ServerState::new(server_cfg)));

        let mut a = connect(port).await;
        assert_eq!(global_limit(&mut a).await, 151, "the configured limit is the global's start value");
        a.query_drop("SET GLOBAL max_connections = 2").await.expect("set");
        assert_eq!(global_limit(&mut a).await, 2);
        let mut b = connect(port).await;
        // One past the limit is kept for an admin account (root is one).
        let mut admin = connect(port).await;
        refused(port).await;
        still_works(&mut a).await;
        still_works(&mut b).await;
        still_works(&mut admin).await;

        // Lowered under the number connected: nobody is dropped, nobody new gets in.
        a.query_drop("SET GLOBAL max_connections = 1").await.expect("set");
        still_works(&mut b).await;
        refused(port).await;

        // Raised: new connections are accepted again.
        b.query_drop("SET GLOBAL max_connections = 10").await.expect("set");
        let mut c = connect(port).await;
        still_works(&mut c).await;

        // Out of range values are clamped as MySQL does (1..=100000): 0 must
        // not lock every client out.
        a.query_drop("SET GLOBAL max_connections = 0").await.expect("set");
        assert_eq!(global_limit(&mut a).await, 1);
        a.query_drop("SET GLOBAL max_connections = 1000000").await.expect("set");
        assert_eq!(global_limit(&mut a).await, 100_000);
        // Only GLOBAL, as in MySQL.
        let e = a.query_drop("SET SESSION max_connections = 5").await.expect_err("session scope");
        assert!(matches!(e, mysql_async::Error::Server(ref s) if s.code == 1229), "{e:?}");
        a.query_drop("SET GLOBAL max_connections = DEFAULT").await.expect("set");
        assert_eq!(global_limit(&mut a).await, 151);
        for conn in [a, b, c, admin] {
            conn.disconnect().await.expect("disconnect");
        }
    });
    drop(rt);
    drop(node);
}
