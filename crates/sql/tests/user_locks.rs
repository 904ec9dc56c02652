//! GET_LOCK and SLEEP between sessions, through the real server and a MySQL
//! client, against a real data node: contention with no and a short wait, a
//! waiter that gets the lock when its holder releases it or its session
//! ends (disconnect, KILL, COM_RESET_CONNECTION), KILL QUERY ending a lock
//! wait (1317) and a SLEEP (which then returns 1), KILL CONNECTION ending a
//! lock wait, and a deadlock between two waiting sessions (3058).
//!
//! Orderings come from the protocol, not from sleeps: a waiter is known to
//! wait once a third session sees it in PROCESSLIST with State "User lock"
//! (or "User sleep"); long timeouts make a wait that is not ended by what the
//! test does show up as a hang, not as a pass.

mod node_support;

use mysql_async::prelude::*;
use node_support::{code, connect, sql_node};

/// Waits no test step is meant to reach.
const LONG: i64 = 600;

/// Wait until session `id` shows PROCESSLIST State `state`.
async fn wait_state(observer: &mut mysql_async::Conn, id: u32, state: &str) {
    loop {
        let s: Option<Option<String>> = observer
            .query_first(format!("SELECT STATE FROM information_schema.PROCESSLIST WHERE ID = {id}"))
            .await
            .expect("processlist");
        if s.flatten().as_deref() == Some(state) {
            return;
        }
        tokio::task::yield_now().await;
    }
}

/// Wait until nobody holds lock `name` (the end of a killed session
/// releases its locks after the KILL statement has answered).
async fn wait_free(observer: &mut mysql_async::Conn, name: &str) {
    loop {
        let free: Option<i64> = observer.query_first(format!("SELECT IS_FREE_LOCK('{name}')")).await.expect("free?");
        if free == Some(1) {
            return;
        }
        tokio::task::yield_now().await;
    }
}

async fn holder(c: &mut mysql_async::Conn, name: &str) -> Option<u32> {
    c.query_first::<Option<u32>, _>(format!("SELECT IS_USED_LOCK('{name}')")).await.expect("used?").flatten()
}

/// What a spawned query gives back: the connection and its one value.
type Ran = (mysql_async::Conn, Result<Option<Option<i64>>, mysql_async::Error>);

/// Run `sql` on `c` in a task of its own.
fn spawn_query(mut c: mysql_async::Conn, sql: String) -> tokio::task::JoinHandle<Ran> {
    tokio::spawn(async move {
        let r = c.query_first::<Option<i64>, _>(sql).await;
        (c, r)
    })
}

#[test]
fn named_locks_between_sessions() {
    let (rt, node) = node_support::runtime_and_node(norr_knobs::Knobs::default());
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let port = sql_node(&addr).await;
        let mut obs = connect(port, None).await;
        let mut a = connect(port, None).await;
        let mut b = connect(port, None).await;
        let (ida, idb) = (a.id(), b.id());

        // ---- Contention: no wait, then a short one; both answer 0.
        let got: Option<i64> = a.query_first("SELECT GET_LOCK('mig', 0)").await.unwrap();
        assert_eq!(got, Some(1));
        let got: Option<i64> = b.query_first("SELECT GET_LOCK('mig', 0)").await.unwrap();
        assert_eq!(got, Some(0));
        let got: Option<i64> = b.query_first("SELECT GET_LOCK('mig', 1)").await.unwrap();
        assert_eq!(got, Some(0), "a one-second wait runs out");
        assert_eq!(holder(&mut obs, "mig").await, Some(ida));

        // ---- A waiter (a prepared statement) gets the lock when its holder
        // releases it. The row is evaluated again after the wait; the lock
        // taken before the wait is not taken twice.
        let waiter = tokio::spawn(async move {
            let r = b
                .exec_first::<Option<i64>, _, _>("SELECT GET_LOCK('side', 0) * 10 + GET_LOCK(?, ?)", ("mig", LONG))
                .await;
            (b, r)
        });
        wait_state(&mut obs, idb, "User lock").await;
        let rel: Option<i64> = a.query_first("SELECT RELEASE_LOCK('mig')").await.unwrap();
        assert_eq!(rel, Some(1));
        let (mut b, r) = waiter.await.unwrap();
        assert_eq!(r.unwrap(), Some(Some(11)));
        assert_eq!(holder(&mut obs, "mig").await, Some(idb));
        let levels: Option<(Option<i64>, Option<i64>)> =
            b.query_first("SELECT RELEASE_LOCK('side'), RELEASE_LOCK('side')").await.unwrap();
        assert_eq!(levels, Some((Some(1), None)), "one level of 'side'");
        // COMMIT does not release it.
        b.query_drop("BEGIN").await.unwrap();
        b.query_drop("COMMIT").await.unwrap();
        assert_eq!(holder(&mut obs, "mig").await, Some(idb));

        // ---- The holder disconnects: the waiter gets the lock.
        let waiter = spawn_query(a, format!("SELECT GET_LOCK('mig', {LONG})"));
        wait_state(&mut obs, ida, "User lock").await;
        b.disconnect().await.unwrap();
        let (mut a, r) = waiter.await.unwrap();
        assert_eq!(r.unwrap(), Some(Some(1)));
        assert_eq!(holder(&mut obs, "mig").await, Some(ida));

        // ---- COM_RESET_CONNECTION releases (answered after the release).
        a.reset().await.unwrap();
        assert_eq!(holder(&mut obs, "mig").await, None);

        // ---- KILL CONNECTION releases the killed session's locks.
        let mut k = connect(port, None).await;
        let got: Option<i64> = k.query_first("SELECT GET_LOCK('killed', 0) + GET_LOCK('killed', 0)").await.unwrap();
        assert_eq!(got, Some(2));
        obs.query_drop(format!("KILL {}", k.id())).await.unwrap();
        wait_free(&mut obs, "killed").await;
        drop(k);

        // ---- KILL QUERY ends a lock wait with 1317; the session goes on.
        let got: Option<i64> = a.query_first("SELECT GET_LOCK('q', 0)").await.unwrap();
        assert_eq!(got, Some(1));
        let b = connect(port, None).await;
        let idb = b.id();
        let waiter = spawn_query(b, "SELECT GET_LOCK('q', -1)".into());
        wait_state(&mut obs, idb, "User lock").await;
        obs.query_drop(format!("KILL QUERY {idb}")).await.unwrap();
        let (mut b, r) = waiter.await.unwrap();
        assert_eq!(code(r.unwrap_err()), 1317);
        assert_eq!(holder(&mut b, "q").await, Some(ida), "the session is usable; the lock stays with its holder");

        // ---- KILL CONNECTION ends a lock wait, and the waiter leaves the
        // queue: the next release hands the lock to nobody.
        let waiter = spawn_query(b, format!("SELECT GET_LOCK('q', {LONG})"));
        wait_state(&mut obs, idb, "User lock").await;
        obs.query_drop(format!("KILL {idb}")).await.unwrap();
        let (_b, r) = waiter.await.unwrap();
        assert!(r.is_err(), "the killed connection's statement fails: {r:?}");
        let rel: Option<i64> = a.query_first("SELECT RELEASE_LOCK('q')").await.unwrap();
        assert_eq!(rel, Some(1));
        assert_eq!(holder(&mut obs, "q").await, None);

        // ---- Deadlock: a holds x and waits for y; b, holding y, asks for x.
        let mut b = connect(port, None).await;
        let idb = b.id();
        let got: Option<i64> = a.query_first("SELECT GET_LOCK('x', 0)").await.unwrap();
        assert_eq!(got, Some(1));
        let got: Option<i64> = b.query_first("SELECT GET_LOCK('y', 0)").await.unwrap();
        assert_eq!(got, Some(1));
        let waiter = spawn_query(a, format!("SELECT GET_LOCK('y', {LONG})"));
        wait_state(&mut obs, ida, "User lock").await;
        let r = b.query_first::<Option<i64>, _>(format!("SELECT GET_LOCK('x', {LONG})")).await;
        assert_eq!(code(r.unwrap_err()), 3058);
        // The victim keeps its locks; releasing y lets a through.
        assert_eq!(holder(&mut obs, "y").await, Some(idb));
        let rel: Option<i64> = b.query_first("SELECT RELEASE_LOCK('y')").await.unwrap();
        assert_eq!(rel, Some(1));
        let (mut a, r) = waiter.await.unwrap();
        assert_eq!(r.unwrap(), Some(Some(1)));
        let n: Option<i64> = a.query_first("SELECT RELEASE_ALL_LOCKS()").await.unwrap();
        assert_eq!(n, Some(2));
    });
}

#[test]
fn kill_query_interrupts_sleep() {
    let (rt, node) = node_support::runtime_and_node(norr_knobs::Knobs::default());
    let addr = node.local_addr().to_string();
    rt.block_on(async move {
        let port = sql_node(&addr).await;
        let mut obs = connect(port, None).await;
        obs.query_drop("CREATE DATABASE ul; CREATE TABLE ul.t (id INT PRIMARY KEY)").await.unwrap();
        obs.query_drop("INSERT INTO ul.t VALUES (1), (2)").await.unwrap();
        let s = connect(port, None).await;
        let id = s.id();

        // A SLEEP that is the whole query returns 1, without an error.
        let sleeper = spawn_query(s, format!("SELECT SLEEP({LONG})"));
        wait_state(&mut obs, id, "User sleep").await;
        obs.query_drop(format!("KILL QUERY {id}")).await.unwrap();
        let (mut s, r) = sleeper.await.unwrap();
        assert_eq!(r.unwrap(), Some(Some(1)));

        // DO SLEEP: the same, an OK.
        let sleeper = tokio::spawn(async move {
            let r = s.query_drop(format!("DO SLEEP({LONG})")).await;
            (s, r)
        });
        wait_state(&mut obs, id, "User sleep").await;
        obs.query_drop(format!("KILL QUERY {id}")).await.unwrap();
        let (s, r) = sleeper.await.unwrap();
        r.unwrap();

        // Part of a query over a table: the query ends with 1317.
        let sleeper = spawn_query(s, format!("SELECT id FROM ul.t WHERE SLEEP({LONG}) = 0"));
        wait_state(&mut obs, id, "User sleep").await;
        obs.query_drop(format!("KILL QUERY {id}")).await.unwrap();
        let (mut s, r) = sleeper.await.unwrap();
        assert_eq!(code(r.unwrap_err()), 1317);

        // The session goes on; a short SLEEP runs to its end.
        let v: Option<i64> = s.query_first("SELECT SLEEP(0.01)").await.unwrap();
        assert_eq!(v, Some(0));
    });
}
