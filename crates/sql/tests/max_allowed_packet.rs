//! `SET GLOBAL max_allowed_packet` through the real engine and server: as in
//! MySQL, the global value is each new connection's packet limit (and its
//! read-only @@session value); connections already in keep theirs. Its own
//! test binary: system variables are process-wide.

mod node_support;

use mysql_async::prelude::*;
use norr_sql::engine::{Engine, EngineConfig};
use norr_sql::server::{serve_listener, ServerConfig, ServerState};

const PASSWORD: &str = "pw";

async fn connect(port: u16) -> mysql_async::Conn {
    connect_with(port, None).await
}

/// `client_limit`: the client's own packet limit (None: the server's
/// @@max_allowed_packet, which mysql_async then enforces itself).
async fn connect_with(port: u16, client_limit: Option<usize>) -> mysql_async::Conn {
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some("root"))
        .pass(Some(PASSWORD))
        .prefer_socket(false)
        .max_allowed_packet(client_limit);
    mysql_async::Conn::new(opts).await.expect("connection accepted")
}

async fn limit(c: &mut mysql_async::Conn, scope: &str) -> u64 {
    c.query_first(format!("SELECT @@{scope}.max_allowed_packet")).await.expect("select").expect("one row")
}

/// A statement of about `bytes` bytes whose result is the length of its literal.
fn big_statement(bytes: usize) -> (String, u64) {
    let n = bytes - 30;
    (format!("SELECT LENGTH('{}')", "x".repeat(n)), n as u64)
}

#[test]
fn set_global_max_allowed_packet_applies_to_new_connections() {
    let (rt, node) = node_support::runtime_and_node(norr_knobs::Knobs::default());
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let server_cfg = ServerConfig::with_root(PASSWORD);
        let engine_cfg =
            EngineConfig { max_allowed_packet: server_cfg.max_allowed_packet as u64, ..Default::default() };
        let engine = Engine::connect(&addr, engine_cfg).await.expect("engine connects");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(serve_listener(listener, engine, ServerState::new(server_cfg)));

        let mut old = connect(port).await;
        assert_eq!(limit(&mut old, "global").await, 64 << 20, "the configured limit is the global's start value");
        assert_eq!(limit(&mut old, "session").await, 64 << 20);
        // The session value is the connection's limit: read-only, as in MySQL.
        let e = old.query_drop("SET SESSION max_allowed_packet = 4096").await.expect_err("read-only");
        assert!(matches!(e, mysql_async::Error::Server(ref s) if s.code == 1621 && s.state == "HY000"), "{e:?}");

        // Rounded down to a multiple of 1024, as MySQL does.
        old.query_drop("SET GLOBAL max_allowed_packet = 5000").await.expect("set");
        assert_eq!(limit(&mut old, "global").await, 4096);
        // The connection already in keeps its limit.
        assert_eq!(limit(&mut old, "session").await, 64 << 20);
        let (stmt, len) = big_statement(10_000);
        let got: Option<u64> = old.query_first(&stmt).await.expect("under the old connection's limit");
        assert_eq!(got, Some(len));

        // A new connection gets the new one, and a bigger packet is error
        // 1153 with the connection closed (MySQL does the same). The client
        // is told a larger limit so that the server, not the client, refuses.
        let mut new = connect_with(port, Some(64 << 20)).await;
        assert_eq!(limit(&mut new, "session").await, 4096);
        let (small, small_len) = big_statement(4000);
        let got: Option<u64> = new.query_first(&small).await.expect("under the limit");
        assert_eq!(got, Some(small_len));
        match new.query_drop(&stmt).await {
            Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1153, "{e:?}"),
            other => panic!("expected error 1153, got {other:?}"),
        }

        // Clamped to MySQL's range; DEFAULT is the compiled-in 64 MiB.
        old.query_drop("SET GLOBAL max_allowed_packet = 1").await.expect("set");
        assert_eq!(limit(&mut old, "global").await, 1024);
        old.query_drop("SET GLOBAL max_allowed_packet = 4294967296").await.expect("set");
        assert_eq!(limit(&mut old, "global").await, 1 << 30);
        old.query_drop("SET GLOBAL max_allowed_packet = DEFAULT").await.expect("set");
        assert_eq!(limit(&mut old, "global").await, 64 << 20);
        let mut after = connect(port).await;
        let got: Option<u64> = after.query_first(&stmt).await.expect("the default limit again");
        assert_eq!(got, Some(len));
        for c in [old, after] {
            c.disconnect().await.expect("disconnect");
        }
    });
    drop(rt);
    drop(node);
}
