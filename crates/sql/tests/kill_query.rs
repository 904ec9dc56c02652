//! KILL QUERY stops long statements, not only waits for table locks: a join
//! that runs in the SQL node's memory (without a key to look up the inner
//! side), and a locking scan waiting in the data node for a row lock. Both
//! end with 1317; the connection and its transaction stay usable, and the
//! killed scan leaves no lock request behind on the data node.

mod node_support;

use mysql_async::prelude::*;
use norr_sql::engine::{Engine, EngineConfig};
use norr_sql::server::{serve_listener, ServerConfig, ServerState};

const PASSWORD: &str = "pw";
/// Rows of the test table. The unkeyed self-join below looks at ROWS^2 (400
/// million) row pairs: minutes of work, so a statement that ends before the
/// KILL QUERY reaches it is a failure, not a race.
const ROWS: u64 = 20_000;

async fn connect(port: u16) -> mysql_async::Conn {
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some("root"))
        .pass(Some(PASSWORD))
        .db_name(Some("kq"))
        .prefer_socket(false);
    mysql_async::Conn::new(opts).await.expect("connection accepted")
}

fn code<T: std::fmt::Debug>(r: Result<T, mysql_async::Error>) -> u16 {
    match r {
        Err(mysql_async::Error::Server(e)) => e.code,
        other => panic!("expected a server error, got {other:?}"),
    }
}

/// Wait until session `id` is listed as running `sql` (it has started), then
/// KILL QUERY it.
async fn kill_when_running(killer: &mut mysql_async::Conn, id: u32, sql: &str) {
    loop {
        let info: Option<Option<String>> = killer
            .query_first(format!("SELECT INFO FROM information_schema.PROCESSLIST WHERE ID = {id}"))
            .await
            .expect("processlist");
        if info.flatten().as_deref() == Some(sql) {
            break;
        }
        tokio::task::yield_now().await;
    }
    killer.query_drop(format!("KILL QUERY {id}")).await.expect("kill query");
}

#[test]
fn kill_query_stops_joins_and_scans() {
    // Row-lock waits far longer than the test: a wait that the kill does not
    // end would show as a hang and then 1205, not as 1317.
    let knobs = norr_knobs::Knobs { lock_wait_timeout_ms: 120_000, ..Default::default() };
    let (rt, node) = node_support::runtime_and_node(knobs);
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let engine = Engine::connect(&addr, EngineConfig::default()).await.expect("engine connects");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(serve_listener(listener, engine, ServerState::new(ServerConfig::with_root(PASSWORD))));
        let opts = mysql_async::OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(port)
            .user(Some("root"))
            .pass(Some(PASSWORD))
            .prefer_socket(false);
        let mut setup = mysql_async::Conn::new(opts).await.expect("connect");
        setup.query_drop("CREATE DATABASE kq; CREATE TABLE kq.t (id INT PRIMARY KEY, v INT)").await.expect("schema");
        for chunk in 0..ROWS / 1000 {
            let values: Vec<String> = (chunk * 1000 + 1..=chunk * 1000 + 1000).map(|i| format!("({i}, {i})")).collect();
            setup.query_drop(format!("INSERT INTO kq.t VALUES {}", values.join(","))).await.expect("rows");
        }
        let mut killer = connect(port).await;

        // ---- A join with no key for the inner side runs in the SQL node's
        // memory; it yields to the other sessions and stops at the kill.
        let mut a = connect(port).await;
        let ida = a.id();
        let join = "SELECT COUNT(*) FROM t x LEFT JOIN t y ON x.v + y.v < 0";
        let plan: Vec<mysql_async::Row> = a.query(format!("EXPLAIN {join}")).await.expect("explain");
        assert_eq!(plan.len(), 2, "two tables joined");
        let running = tokio::spawn(async move {
            let r = a.query_first::<u64, _>(join).await;
            (a, r)
        });
        kill_when_running(&mut killer, ida, join).await;
        let (mut a, r) = running.await.expect("join task");
        assert_eq!(code(r), 1317);
        let n: Option<u64> = a.query_first("SELECT COUNT(*) FROM t").await.expect("the connection stays");
        assert_eq!(n, Some(ROWS));

        // ---- A locking scan waiting for a row lock another transaction holds.
        let mut holder = connect(port).await;
        holder.query_drop("BEGIN").await.unwrap();
        holder.query_drop("SELECT v FROM t WHERE id = 500 FOR UPDATE").await.expect("lock row 500");
        // The scanner has its own write in an open transaction: the kill ends
        // the statement, not the transaction.
        a.query_drop("BEGIN").await.unwrap();
        a.query_drop("INSERT INTO t VALUES (100000, 7)").await.expect("insert in the transaction");
        let scan = "SELECT id FROM t WHERE v > 0 FOR UPDATE";
        let running = tokio::spawn(async move {
            let r = a.query_drop(scan).await;
            (a, r)
        });
        kill_when_running(&mut killer, ida, scan).await;
        let (mut a, r) = running.await.expect("scan task");
        assert_eq!(code(r), 1317);
        let mine: Option<u64> =
            a.query_first("SELECT v FROM t WHERE id = 100000").await.expect("the transaction goes on");
        assert_eq!(mine, Some(7));
        a.query_drop("COMMIT").await.expect("commit");

        // The killed scan's lock request is gone: once the holder commits, a
        // third session locks row 500 at once (a leftover request ahead of it
        // would make it wait the full two minutes).
        holder.query_drop("UPDATE t SET v = 501 WHERE id = 500").await.unwrap();
        holder.query_drop("COMMIT").await.unwrap();
        let mut third = connect(port).await;
        third.query_drop("BEGIN").await.unwrap();
        let v: Option<i64> = third.query_first("SELECT v FROM t WHERE id = 500 FOR UPDATE").await.expect("lock");
        assert_eq!(v, Some(501));
        third.query_drop("COMMIT").await.unwrap();
        let total: Option<u64> = third.query_first("SELECT COUNT(*) FROM t").await.unwrap();
        assert_eq!(total, Some(ROWS + 1), "the killed transaction's insert was committed");
    });
}
