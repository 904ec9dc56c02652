//! Handshake and authentication against the fake backend with mysql_async.

mod protocol_support;
use mysql_async::prelude::*;
use norr_sql::protocol::auth::AuthPlugin;
use protocol_support::*;

#[tokio::test]
async fn both_plugins_and_switching() {
    // Greeting offers caching_sha2_password (MySQL 8 default).
    let srv = start_server().await;
    for (user, pw) in [("root", "rootpw"), ("sha", "spw"), ("native", "npw"), ("nopw", "")] {
        let mut c = mysql_async::Conn::new(opts(srv.port, user, pw)).await.unwrap_or_else(|e| panic!("{user}: {e}"));
        let v: Vec<i64> = c.query("select 1").await.unwrap();
        assert_eq!(v, vec![1], "{user}");
        c.disconnect().await.unwrap();
    }
    // Greeting offers mysql_native_password: the sha account gets switched.
    let srv = start_server_with(|c| c.default_auth_plugin = AuthPlugin::Native).await;
    for (user, pw) in [("root", "rootpw"), ("sha", "spw"), ("native", "npw"), ("nopw", "")] {
        let mut c = mysql_async::Conn::new(opts(srv.port, user, pw)).await.unwrap_or_else(|e| panic!("{user}: {e}"));
        c.ping().await.unwrap();
        c.disconnect().await.unwrap();
    }
}

#[tokio::test]
async fn wrong_password_is_1045() {
    let srv = start_server().await;
    for (user, pw) in [("root", "bad"), ("root", ""), ("ghost", "x"), ("sha", "npw"), ("native", "spw"), ("nopw", "x")]
    {
        let e = mysql_async::Conn::new(opts(srv.port, user, pw)).await.err().unwrap_or_else(|| panic!("{user} got in"));
        let (code, state, msg) = server_error(e);
        assert_eq!((code, state.as_str()), (1045, "28000"), "{user}: {msg}");
        assert!(msg.contains(&format!("Access denied for user '{user}'")), "{msg}");
        let using = if pw.is_empty() { "NO" } else { "YES" };
        assert!(msg.contains(&format!("(using password: {using})")), "{msg}");
    }
    let srv = start_server_with(|c| c.default_auth_plugin = AuthPlugin::Native).await;
    let e = mysql_async::Conn::new(opts(srv.port, "sha", "bad")).await.err().unwrap();
    assert_eq!(server_error(e).0, 1045);
    // The server still serves after failed logins.
    let mut c = mysql_async::Conn::new(opts(srv.port, "root", "rootpw")).await.unwrap();
    c.ping().await.unwrap();
}

#[tokio::test]
async fn raw_native_login_and_switch_to_sha2() {
    let srv = start_server().await;
    let (_r, ok) = Raw::login(srv.port, "root", "rootpw", CAPS).await;
    assert_eq!(ok[0], 0);
    // The raw client starts with native; "sha" must be switched to caching_sha2.
    let (_r, ok) = Raw::login(srv.port, "sha", "spw", CAPS).await;
    assert_eq!(ok[0], 0, "{ok:?}");
    let (_r, err) = Raw::login(srv.port, "sha", "wrong", CAPS).await;
    assert_eq!(err_of(&err).0, 1045);
    // A pre-4.1 client is refused with 1043.
    let (_r, err) = Raw::login(srv.port, "root", "rootpw", CAPS & !0x200).await;
    assert_eq!(err_of(&err).0, 1043);
}

#[tokio::test]
async fn connect_with_db_and_init_db() {
    let srv = start_server().await;
    let mut c = mysql_async::Conn::new(opts(srv.port, "root", "rootpw").db_name(Some("shop"))).await.unwrap();
    let db: Vec<Option<String>> = c.query("select db").await.unwrap();
    assert_eq!(db, vec![Some("shop".to_string())]);
    let e = mysql_async::Conn::new(opts(srv.port, "root", "rootpw").db_name(Some("nosuchdb"))).await.err().unwrap();
    assert_eq!(server_error(e).0, 1049);
    // COM_INIT_DB by hand.
    let (mut r, _) = Raw::login(srv.port, "root", "rootpw", CAPS).await;
    r.command(b"\x02other").await;
    assert_eq!(r.read().await.unwrap()[0], 0);
    r.command(b"\x03select db").await;
    let _cols = r.read().await.unwrap();
    let _def = r.read().await.unwrap();
    let _eof = r.read().await.unwrap();
    let row = r.read().await.unwrap();
    assert_eq!(&row[1..], b"other");
    let _eof = r.read().await.unwrap();
    r.command(b"\x02nosuchdb").await;
    let (code, state, _) = err_of(&r.read().await.unwrap());
    assert_eq!((code, state.as_str()), (1049, "42000"));
    // COM_PING still fine afterwards.
    r.command(b"\x0e").await;
    assert_eq!(r.read().await.unwrap()[0], 0);
}

#[tokio::test]
async fn too_many_connections_keeps_one_for_an_admin() {
    let srv = start_server_with(|c| c.max_connections = 2).await;
    let _a = mysql_async::Conn::new(opts(srv.port, "sha", "spw")).await.unwrap();
    let _b = mysql_async::Conn::new(opts(srv.port, "native", "npw")).await.unwrap();
    // The connection past the limit is kept for an admin account (as
    // MySQL's for CONNECTION_ADMIN): another account is refused once it
    // has logged in, with the SQLSTATE of a refusal after the handshake.
    let e = mysql_async::Conn::new(opts(srv.port, "sha", "spw")).await.err().unwrap();
    let (code, state, msg) = server_error(e);
    assert_eq!((code, state.as_str(), msg.as_str()), (1040, "08004", "Too many connections"));
    // The refused client may read its error before the server counts it
    // out: until then the admin's connection would be one more past it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut admin = loop {
        match mysql_async::Conn::new(opts(srv.port, "root", "rootpw")).await {
            Ok(c) => break c,
            Err(e) if std::time::Instant::now() < deadline => {
                assert_eq!(server_error(e).0, 1040);
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            Err(e) => panic!("the admin's connection was refused: {e:?}"),
        }
    };
    admin.ping().await.unwrap();
    // Past the admin's connection, everyone is refused before the greeting.
    let e = mysql_async::Conn::new(opts(srv.port, "root", "rootpw")).await.err().unwrap();
    assert_eq!(server_error(e).0, 1040);
    drop(_a);
    drop(admin);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let _c = mysql_async::Conn::new(opts(srv.port, "sha", "spw")).await.unwrap();
}
