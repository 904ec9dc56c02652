//! A SQL node whose data node restarts connects again by itself: statements
//! fail with a temporary error (never hang) while the node is down, and work
//! again once it is back, without restarting the SQL node.

mod node_support;

use mysql_async::prelude::Queryable;
use node_support::{code, connect, PASSWORD};
use norr_sql::engine::{Engine, EngineConfig};
use norr_sql::server::{serve_listener, ServerConfig, ServerState};
use std::time::{Duration, Instant};

#[test]
fn statements_work_again_after_the_data_node_restarts() {
    let (rt, node) = node_support::runtime_and_node(norr_knobs::Knobs::default());
    let addr = node.local_addr();
    let (engine, mut c) = rt.block_on(async {
        let engine = Engine::connect(&addr.to_string(), EngineConfig::default()).await.expect("engine connects");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(serve_listener(listener, engine.clone(), ServerState::new(ServerConfig::with_root(PASSWORD))));
        let mut c = connect(port, None).await;
        c.query_drop("CREATE DATABASE d1").await.unwrap();
        c.query_drop("CREATE TABLE d1.t (id INT PRIMARY KEY, v INT)").await.unwrap();
        c.query_drop("INSERT INTO d1.t VALUES (1, 10), (2, 20)").await.unwrap();
        let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM d1.t").await.unwrap();
        assert_eq!(n, Some(2));
        (engine, c)
    });

    // The data node goes away: statements fail at once with a temporary
    // error (4009: no data node connected), the MySQL connection stays.
    node.shutdown();
    drop(node);
    rt.block_on(async {
        let asked = Instant::now();
        let e = c.query_drop("SELECT * FROM d1.t WHERE id = 1").await.unwrap_err();
        assert!(asked.elapsed() < Duration::from_secs(10), "no hang: {:?}", asked.elapsed());
        let msg = e.to_string();
        assert_eq!(code(e), 1297, "{msg}");
        assert!(msg.contains("temporary error 4009") || msg.contains("temporary error 4010"), "{msg}");
    });

    // The node comes back on the same address (empty: it keeps rows in
    // memory only). The SQL node connects again by itself.
    let node = norr_runtime::start_data_node(norr_runtime::DataNodeConfig {
        node_id: 1,
        listen: addr,
        knobs: norr_knobs::Knobs::default(),
        cluster: None,
    })
    .expect("the data node starts again on its port");
    rt.block_on(async {
        assert!(engine.client().wait_connected(Duration::from_secs(30)).await, "sqld reconnected");
        // Every statement works again, DDL included (the catalog is reloaded).
        c.query_drop("CREATE DATABASE d2").await.unwrap();
        c.query_drop("CREATE TABLE d2.t (id INT PRIMARY KEY, v VARCHAR(10))").await.unwrap();
        c.query_drop("INSERT INTO d2.t VALUES (1, 'a'), (2, 'b')").await.unwrap();
        let rows: Vec<(i32, String)> = c.query("SELECT id, v FROM d2.t ORDER BY id").await.unwrap();
        assert_eq!(rows, vec![(1, "a".to_string()), (2, "b".to_string())]);
        c.query_drop("UPDATE d2.t SET v = 'c' WHERE id = 2").await.unwrap();
        let v: Option<String> = c.query_first("SELECT v FROM d2.t WHERE id = 2").await.unwrap();
        assert_eq!(v.as_deref(), Some("c"));
        // What lived only in the old node's memory is gone, and says so.
        let e = c.query_drop("SELECT * FROM d1.t").await.unwrap_err();
        assert!(matches!(code(e), 1146 | 1049));
        // Prepared statements too.
        let p = c.prep("SELECT v FROM d2.t WHERE id = ?").await.unwrap();
        let v: Option<String> = c.exec_first(&p, (1,)).await.unwrap();
        assert_eq!(v.as_deref(), Some("a"));
    });
    drop(c);
    drop(node);
}
