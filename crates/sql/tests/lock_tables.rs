//! LOCK TABLES, UNLOCK TABLES, FLUSH TABLES WITH READ LOCK and the statements
//! mysqldump's output needs, through real clients against the real server:
//! what a session holding locks may do (1100, 1099, 1223), that other
//! sessions of the SQL node wait (and time out with 1205 after
//! @@lock_wait_timeout), and that locks end with UNLOCK TABLES, START
//! TRANSACTION and the connection.

mod node_support;

use mysql_async::prelude::*;
use norr_sql::engine::{Engine, EngineConfig};
use norr_sql::server::{serve_listener, ServerConfig, ServerState};

const PASSWORD: &str = "pw";

async fn connect(port: u16) -> mysql_async::Conn {
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some("root"))
        .pass(Some(PASSWORD))
        .db_name(Some("lk"))
        .prefer_socket(false);
    let mut c = mysql_async::Conn::new(opts).await.expect("connection accepted");
    // Waits in these tests end in a second: a wait that should not happen
    // shows as 1205 quickly, and one that should is asserted to be 1205.
    c.query_drop("SET SESSION lock_wait_timeout = 1").await.expect("set");
    c
}

/// A SQL node on the data node at `addr`: its port, and a root connection
/// without a default database.
async fn serve(addr: &str) -> (u16, mysql_async::Conn) {
    let engine = Engine::connect(addr, EngineConfig::default()).await.expect("engine connects");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(serve_listener(listener, engine, ServerState::new(ServerConfig::with_root(PASSWORD))));
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(port)
        .user(Some("root"))
        .pass(Some(PASSWORD))
        .prefer_socket(false);
    (port, mysql_async::Conn::new(opts).await.expect("connect"))
}

fn code<T: std::fmt::Debug>(r: Result<T, mysql_async::Error>) -> u16 {
    match r {
        Err(mysql_async::Error::Server(e)) => e.code,
        other => panic!("expected a server error, got {other:?}"),
    }
}

async fn count(c: &mut mysql_async::Conn, table: &str) -> u64 {
    c.query_first(format!("SELECT COUNT(*) FROM {table}")).await.expect("count").expect("row")
}

#[test]
fn table_locks_of_one_sql_node() {
    let (rt, node) = node_support::runtime_and_node(norr_knobs::Knobs::default());
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let (port, mut setup) = serve(&addr).await;
        setup.query_drop("CREATE DATABASE lk").await.expect("db");
        setup
            .query_drop("CREATE TABLE lk.t (id INT PRIMARY KEY, v INT); CREATE TABLE lk.u (id INT PRIMARY KEY)")
            .await
            .expect("tables");
        setup.query_drop("INSERT INTO lk.t VALUES (1, 1), (2, 2); INSERT INTO lk.u VALUES (1)").await.expect("rows");

        let mut a = connect(port).await;
        let mut b = connect(port).await;

        // ---- READ lock: the holder reads only what it locked, writes nothing;
        // others read, and their writes wait.
        a.query_drop("LOCK TABLES t READ").await.expect("lock read");
        assert_eq!(count(&mut a, "t").await, 2);
        assert_eq!(code(a.query_drop("INSERT INTO t VALUES (3, 3)").await), 1099);
        assert_eq!(code(a.query_drop("SELECT * FROM u").await), 1100);
        assert_eq!(code(a.query_drop("SELECT * FROM t JOIN u USING (id)").await), 1100);
        // information_schema and SHOW need no lock.
        let n: Option<u64> =
            a.query_first("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'lk'").await.unwrap();
        assert_eq!(n, Some(2));
        a.query_drop("SHOW CREATE TABLE u").await.expect("show");
        assert_eq!(count(&mut b, "t").await, 2);
        assert_eq!(code(b.query_drop("UPDATE t SET v = 9 WHERE id = 1").await), 1205);
        assert_eq!(code(b.query_drop("DELETE FROM t").await), 1205);
        b.query_drop("INSERT INTO u VALUES (2)").await.expect("u is not locked");
        // A second reader shares the lock.
        b.query_drop("LOCK TABLES t READ").await.expect("shared read");
        b.query_drop("UNLOCK TABLES").await.expect("unlock");

        // ---- A waiting writer goes on once the lock is released.
        let mut c = connect(port).await;
        c.query_drop("SET SESSION lock_wait_timeout = 60").await.unwrap();
        let waiter = tokio::spawn(async move {
            c.query_drop("UPDATE t SET v = 10 WHERE id = 1").await.expect("update after the unlock");
            c
        });
        tokio::task::yield_now().await;
        a.query_drop("UNLOCK TABLES").await.expect("unlock");
        let mut c = waiter.await.expect("task");
        let v: Option<i64> = c.query_first("SELECT v FROM t WHERE id = 1").await.unwrap();
        assert_eq!(v, Some(10));

        // ---- WRITE lock: everyone else waits, readers too, prepared too.
        a.query_drop("LOCK TABLES t WRITE, u READ").await.expect("lock write");
        a.query_drop("INSERT INTO t VALUES (3, 3)").await.expect("holder writes");
        assert_eq!(code(a.query_drop("INSERT INTO u VALUES (3)").await), 1099);
        assert_eq!(code(b.query_drop("SELECT * FROM t").await), 1205);
        let stmt = b.prep("SELECT v FROM t WHERE id = ?").await.expect("prepare needs no lock");
        assert_eq!(code(b.exec_first::<i64, _, _>(&stmt, (1,)).await), 1205);
        assert_eq!(count(&mut b, "u").await, 2, "u is only READ-locked");
        assert_eq!(code(b.query_drop("LOCK TABLES t READ").await), 1205);
        assert_eq!(code(b.query_drop("DROP TABLE t").await), 1205);
        // START TRANSACTION ends LOCK TABLES (after committing).
        a.query_drop("START TRANSACTION").await.unwrap();
        let v: Option<i64> = b.exec_first(&stmt, (3,)).await.expect("free again");
        assert_eq!(v, Some(3));
        a.query_drop("COMMIT").await.unwrap();

        // ---- A closed connection gives its locks back.
        let mut d = connect(port).await;
        d.query_drop("LOCK TABLES t WRITE").await.unwrap();
        assert_eq!(code(b.query_drop("SELECT * FROM t").await), 1205);
        d.disconnect().await.expect("quit");
        // The server ends the session after the quit: wait for the lock to go.
        b.query_drop("SET SESSION lock_wait_timeout = 60").await.unwrap();
        assert_eq!(count(&mut b, "t").await, 3);
        b.query_drop("SET SESSION lock_wait_timeout = 1").await.unwrap();

        // ---- Errors.
        assert_eq!(code(a.query_drop("LOCK TABLES nope READ").await), 1146);
        assert_eq!(code(a.query_drop("LOCK TABLES information_schema.tables READ").await), 1044);
        assert_eq!(code(a.query_drop("LOCK TABLES t READ,").await), 1064);
        assert_eq!(code(a.query_drop("FLUSH LOGS").await), 1235);
        a.query_drop("UNLOCK TABLES").await.expect("unlock without locks is fine");

        // ---- FLUSH TABLES WITH READ LOCK: writes wait, and so does the
        // COMMIT of a transaction that wrote before it.
        b.query_drop("BEGIN").await.unwrap();
        b.query_drop("INSERT INTO u VALUES (10)").await.unwrap();
        a.query_drop("FLUSH TABLES WITH READ LOCK").await.expect("ftwrl");
        assert_eq!(code(a.query_drop("INSERT INTO u VALUES (11)").await), 1223);
        assert_eq!(count(&mut a, "u").await, 2, "b's insert is not committed");
        assert_eq!(code(b.query_drop("COMMIT").await), 1205);
        let mut e = connect(port).await;
        assert_eq!(code(e.query_drop("INSERT INTO u VALUES (12)").await), 1205);
        assert_eq!(count(&mut e, "t").await, 3, "reads go on");
        assert_eq!(code(a.query_drop("LOCK TABLES t READ").await), 1192);
        a.query_drop("UNLOCK TABLES").await.unwrap();
        b.query_drop("COMMIT").await.expect("commit after the unlock");
        assert_eq!(count(&mut e, "u").await, 3);

        // ---- mysqldump's other statements.
        a.query_drop("ALTER TABLE t DISABLE KEYS").await.expect("disable keys");
        let w: Vec<(String, u16, String)> = a.query("SHOW WARNINGS").await.unwrap();
        assert_eq!(w, vec![("Note".into(), 1031, "Table storage engine for 't' doesn't have this option".into())]);
        a.query_drop("/*!40000 ALTER TABLE `t` ENABLE KEYS */").await.expect("enable keys");
        assert_eq!(code(a.query_drop("ALTER TABLE nope DISABLE KEYS").await), 1146);
        a.query_drop("START TRANSACTION /*!40100 WITH CONSISTENT SNAPSHOT */").await.expect("snapshot");
        let w: Vec<(String, u16, String)> = a.query("SHOW WARNINGS").await.unwrap();
        assert_eq!(w.len(), 1);
        assert_eq!((w[0].0.as_str(), w[0].1), ("Warning", 138));
        a.query_drop("COMMIT").await.unwrap();
        a.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY").await.expect("with read only");
        a.query_drop("ROLLBACK").await.unwrap();
        a.query_drop("FLUSH TABLES").await.expect("flush");
        a.query_drop("FLUSH TABLES t, u").await.expect("flush some");
        a.query_drop("FLUSH PRIVILEGES").await.expect("flush privileges");
        assert_eq!(count(&mut a, "t").await, 3);
    });
}

/// LOCK TABLES of a view locks the tables it reads too (through views over
/// views), in the same mode, as MySQL: their writers (or, under WRITE, their
/// readers) wait.
#[test]
fn locking_a_view_locks_its_base_tables() {
    let (rt, node) = node_support::runtime_and_node(norr_knobs::Knobs::default());
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let (port, mut setup) = serve(&addr).await;
        setup.query_drop("CREATE DATABASE lk").await.expect("db");
        setup
            .query_drop(
                "CREATE TABLE lk.t (id INT PRIMARY KEY, v INT); CREATE TABLE lk.u (id INT PRIMARY KEY); \
                 CREATE TABLE lk.free (id INT PRIMARY KEY); \
                 CREATE VIEW lk.vt AS SELECT t.id, t.v FROM lk.t JOIN lk.u ON t.id = u.id; \
                 CREATE VIEW lk.vv AS SELECT id FROM lk.vt WHERE v > 0",
            )
            .await
            .expect("tables and views");
        setup.query_drop("INSERT INTO lk.t VALUES (1, 1); INSERT INTO lk.u VALUES (1)").await.expect("rows");
        let mut a = connect(port).await;
        let mut b = connect(port).await;

        a.query_drop("LOCK TABLES vv READ").await.expect("lock a view over a view");
        assert_eq!(count(&mut a, "vv").await, 1);
        assert_eq!(code(b.query_drop("UPDATE t SET v = 2").await), 1205, "t is read through vv");
        assert_eq!(code(b.query_drop("INSERT INTO u VALUES (2)").await), 1205, "u is read through vv");
        assert_eq!(count(&mut b, "t").await, 1, "readers go on");
        b.query_drop("INSERT INTO free VALUES (1)").await.expect("free is not locked");
        a.query_drop("UNLOCK TABLES").await.unwrap();
        b.query_drop("UPDATE t SET v = 2").await.expect("free again");

        a.query_drop("LOCK TABLES vt WRITE").await.expect("lock a view for write");
        assert_eq!(code(b.query_drop("SELECT * FROM t").await), 1205);
        assert_eq!(code(b.query_drop("SELECT * FROM u").await), 1205);
        a.query_drop("UNLOCK TABLES").await.unwrap();
        assert_eq!(count(&mut b, "t").await, 1);
    });
}

/// SHOW PROCESSLIST / information_schema.PROCESSLIST list every session of the
/// SQL node; KILL QUERY ends a table-lock wait with 1317 and keeps the
/// connection; KILL CONNECTION closes it and gives its locks back.
#[test]
fn processlist_and_kill() {
    let (rt, node) = node_support::runtime_and_node(norr_knobs::Knobs::default());
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let (port, mut setup) = serve(&addr).await;
        setup.query_drop("CREATE DATABASE lk; CREATE TABLE lk.t (id INT PRIMARY KEY)").await.expect("schema");
        setup.query_drop("INSERT INTO lk.t VALUES (1)").await.expect("row");

        let mut a = connect(port).await;
        let mut b = connect(port).await;
        let id_of = |c: &mut mysql_async::Conn| c.id();
        let (ida, idb) = (id_of(&mut a), id_of(&mut b));

        type Row = (u64, String, String, Option<String>, String, u64, String, Option<String>);
        let rows: Vec<Row> = b.query("SHOW FULL PROCESSLIST").await.expect("processlist");
        let ra = rows.iter().find(|r| r.0 == ida as u64).expect("a is listed");
        assert_eq!(
            (ra.1.as_str(), ra.2.as_str(), ra.3.as_deref(), ra.4.as_str()),
            ("root", "127.0.0.1", Some("lk"), "Sleep")
        );
        assert_eq!(ra.7, None);
        let rb = rows.iter().find(|r| r.0 == idb as u64).expect("b is listed");
        assert_eq!((rb.4.as_str(), rb.7.as_deref()), ("Query", Some("SHOW FULL PROCESSLIST")));
        let n: Option<u64> = b
            .query_first(format!(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = {ida} AND COMMAND = 'Sleep'"
            ))
            .await
            .unwrap();
        assert_eq!(n, Some(1));

        // KILL QUERY ends a wait for a table lock.
        a.query_drop("LOCK TABLES t WRITE").await.unwrap();
        let mut c = connect(port).await;
        let idc = c.id();
        c.query_drop("SET SESSION lock_wait_timeout = 60").await.unwrap();
        let waiter = tokio::spawn(async move {
            let r = c.query_drop("SELECT * FROM t").await;
            (c, r)
        });
        // Once c's statement is listed as running, a KILL QUERY reaches it.
        loop {
            let info: Option<Option<String>> = b
                .query_first(format!("SELECT INFO FROM information_schema.PROCESSLIST WHERE ID = {idc}"))
                .await
                .unwrap();
            if info.flatten().as_deref() == Some("SELECT * FROM t") {
                break;
            }
            tokio::task::yield_now().await;
        }
        b.query_drop(format!("KILL QUERY {idc}")).await.expect("kill query");
        let (mut c, r) = waiter.await.unwrap();
        assert_eq!(code(r), 1317);
        let one: Option<u64> = c.query_first("SELECT 1").await.expect("the connection stays");
        assert_eq!(one, Some(1));

        // KILL CONNECTION closes a's connection and releases its lock.
        b.query_drop(format!("KILL {ida}")).await.expect("kill connection");
        assert!(a.query_drop("SELECT 1").await.is_err(), "a's connection is closed");
        c.query_drop("SET SESSION lock_wait_timeout = 60").await.unwrap();
        assert_eq!(count(&mut c, "t").await, 1);
        let rows: Vec<Row> = b.query("SHOW PROCESSLIST").await.unwrap();
        assert!(rows.iter().all(|r| r.0 != ida as u64), "a is gone from the list");

        assert_eq!(code(b.query_drop("KILL 4000000000").await), 1094);
        assert_eq!(code(b.query_drop("KILL QUERY 99999").await), 1094);
    });
}
