//! Native clients log in with SQL accounts (issue 25 item 4, `[cluster]
//! api_auth = "account"`), through real processes: mgmd, a data node and a
//! SQL node. Accounts made and changed through SQL (CREATE USER, ALTER
//! USER, GRANT, REVOKE) take effect for native clients without a restart
//! (grants even on a connection already open); a wrong password, a locked
//! account, a client with neither account nor secret and a SQL node posing
//! with an account are refused with a clear reason, and operations without
//! the privilege fail with AccessDenied (MySQL's 1142).

mod support;

use norr_client::blocking::Client;
use norr_client::{ApiKind, ClientError, ConnectOptions, ErrorCode, ExecType, KeyOp, Password, ScanSpec, Value};
use norr_mgmd::protocol::{MgmCommand, MgmReply, NodeState};
use norr_mgmd::session::run_command;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::proc_cluster::{free_port, Proc, TempDir, START};

const NORR: &str = env!("CARGO_BIN_EXE_norr");
const SECRET: &str = "native-accounts-test-secret-0123456789abcdef";
/// How long a change through SQL may take to reach the data node's
/// accounts (the reader polls every 250 ms; generous for a loaded machine).
const PROPAGATE: Duration = Duration::from_secs(30);

fn spawn(dir: &TempDir, name: &str, args: &[&str]) -> Proc {
    let log = dir.0.join(format!("{name}.log"));
    let child = Command::new(NORR)
        .args(args)
        .current_dir(&dir.0)
        .env(norr_transport::auth::SECRET_ENV, SECRET)
        .env("NORR_ROOT_PASSWORD", "")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    Proc { child, log }
}

fn connect(addr: &str, user: Option<&str>, password: &str, kind: ApiKind) -> Result<Client, String> {
    let opts = ConnectOptions {
        user: user.map(str::to_string),
        password: Password::new(password),
        kind,
        connect_timeout: Duration::from_secs(10),
        ..ConnectOptions::default()
    };
    Client::connect_with(addr, opts).map_err(|e| e.to_string())
}

/// The reason a connection that must fail was refused.
fn refused(r: Result<Client, String>, what: &str) -> String {
    match r {
        Ok(_) => panic!("{what}: the data node served the connection"),
        Err(e) => e,
    }
}

/// Retry `f` until it returns Some, or fail with `what` and the logs.
fn eventually<T>(what: &str, logs: &dyn Fn() -> String, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + PROPAGATE;
    loop {
        if let Some(t) = f() {
            return t;
        }
        assert!(Instant::now() < deadline, "{what}; logs:\n{}", logs());
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn native_clients_log_in_with_sql_accounts_and_see_changes_without_restarts() {
    // The test's own process has no secret: a client without an account
    // must be refused, not rescued by the environment.
    assert!(std::env::var_os(norr_transport::auth::SECRET_ENV).is_none(), "run without NORR_CLUSTER_SECRET");
    let dir = TempDir::new("native-accounts");
    let (mgm_port, data_port, sql_port) = (free_port(), free_port(), free_port());
    let file = dir.0.join("cluster.toml");
    std::fs::write(
        &file,
        format!(
            "[cluster]\nname = \"acct\"\nreplicas = 1\nsecret = \"{SECRET}\"\napi_auth = \"account\"\n\
             [[node]]\nid = 1\nkind = \"mgmd\"\nhost = \"127.0.0.1\"\nport = {mgm_port}\n\
             [[node]]\nid = 2\nkind = \"data\"\nhost = \"127.0.0.1\"\nport = {data_port}\n"
        ),
    )
    .unwrap();
    let mgm = format!("127.0.0.1:{mgm_port}");
    let data = format!("127.0.0.1:{data_port}");
    let mgmd = spawn(&dir, "mgmd", &["mgmd", "--config", file.to_str().unwrap()]);
    let deadline = Instant::now() + START;
    while run_command(&mgm, MgmCommand::Show, Duration::from_secs(5)).is_err() {
        assert!(Instant::now() < deadline, "mgmd did not start: {}", mgmd.log_text());
        std::thread::sleep(Duration::from_millis(50));
    }
    let node = spawn(&dir, "node-2", &["datad", "--mgm", &mgm, "--node-id", "2", "--in-memory"]);
    let logs = || format!("--- mgmd\n{}\n--- node 2\n{}", mgmd.log_text(), node.log_text());
    eventually("the data node did not start", &logs, || {
        let Ok(MgmReply::Show(v)) = run_command(&mgm, MgmCommand::Show, Duration::from_secs(5)) else { return None };
        v.nodes.iter().any(|n| n.id == 2 && n.connected && n.state == Some(NodeState::Started)).then_some(())
    });

    // No SQL node has made the accounts yet: nobody logs in with one.
    let e = refused(connect(&data, Some("app"), "right", ApiKind::NativeClient), "no accounts yet");
    assert!(e.contains("data node refused the connection"), "{e}");
    // Neither account nor secret.
    let e = refused(connect(&data, None, "", ApiKind::NativeClient), "no credentials");
    assert!(e.contains("requires the cluster secret or an account"), "{e}");

    let sqld = spawn(&dir, "sqld", &["sqld", "--data-node", &data, "--listen", &format!("127.0.0.1:{sql_port}")]);
    let logs = || format!("{}\n--- sqld\n{}", logs(), sqld.log_text());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let url = format!("mysql://root@127.0.0.1:{sql_port}/");
    let mut sql = eventually("the SQL node did not serve root", &logs, || {
        rt.block_on(mysql_async::Conn::from_url(url.as_str())).ok()
    });
    let mut run = |q: &str| -> Vec<mysql_async::Row> {
        use mysql_async::prelude::Queryable;
        rt.block_on(sql.query(q)).unwrap_or_else(|e| panic!("{q}: {e}"))
    };
    run("CREATE USER 'app'@'%' IDENTIFIED BY 'right'");

    // The account reaches the data node without a restart.
    eventually("the right password was never accepted", &logs, || {
        connect(&data, Some("app"), "right", ApiKind::NativeClient).ok()
    });
    let e = refused(connect(&data, Some("app"), "wrong", ApiKind::NativeClient), "wrong password");
    assert!(e.contains("access denied for user 'app'@'127.0.0.1' (using password: YES)"), "{e}");
    let e = refused(connect(&data, Some("nobody"), "", ApiKind::NativeClient), "no such account");
    assert!(e.contains("access denied for user 'nobody'@'127.0.0.1' (using password: NO)"), "{e}");
    // The cluster's own processes prove the secret; an account is not enough.
    let e = refused(connect(&data, Some("app"), "right", ApiKind::SqlNode), "a SQL node with an account");
    assert!(e.contains("account logins are for native clients"), "{e}");

    // A new password works at once on both ports; the old one no longer does.
    run("ALTER USER 'app'@'%' IDENTIFIED BY 'changed'");
    eventually("the new password was never accepted", &logs, || {
        connect(&data, Some("app"), "changed", ApiKind::NativeClient).ok()
    });
    assert!(connect(&data, Some("app"), "right", ApiKind::NativeClient).is_err(), "the old password still works");

    run("ALTER USER 'app'@'%' ACCOUNT LOCK");
    let e = eventually("a locked account still logs in", &logs, || {
        connect(&data, Some("app"), "changed", ApiKind::NativeClient).err()
    });
    assert!(e.contains("account is locked"), "{e}");
    run("DROP USER 'app'@'%'");
    eventually("a dropped account still logs in differently", &logs, || {
        let e = connect(&data, Some("app"), "changed", ApiKind::NativeClient).err()?;
        e.contains("access denied for user 'app'@'127.0.0.1' (using password: YES)").then_some(())
    });

    // Privileges (item 4): an account without grants logs in but may do
    // nothing; GRANTs through SQL reach the open connection without a
    // reconnect or a restart.
    run("CREATE DATABASE shop");
    run("CREATE TABLE shop.orders (k INT NOT NULL PRIMARY KEY, v INT)");
    run("INSERT INTO shop.orders VALUES (1, 10)");
    run("CREATE USER 'clerk'@'%' IDENTIFIED BY 'pw'");
    let clerk = eventually("the clerk never logged in", &logs, || {
        connect(&data, Some("clerk"), "pw", ApiKind::NativeClient).ok()
    });
    let orders = clerk.get_table("shop/orders").expect("definitions are readable without privileges");
    let denied = |r: Result<(), ClientError>, what: &str| {
        let e = r.err().unwrap_or_else(|| panic!("{what} was allowed"));
        assert_eq!(e.code(), Some(ErrorCode::AccessDenied), "{what}: {e}");
        e.to_string()
    };
    let read = |c: &Client| c.read(orders.id, vec![Value::Int(1)]).map(|r| assert_eq!(r.unwrap()[1], Value::Int(10)));
    let scan =
        |c: &Client| c.scan(ScanSpec::full(orders.id)).and_then(|s| s.collect_all()).map(|r| assert_eq!(r.len(), 1));
    let insert = |c: &Client, k: i64| {
        let mut t = c.begin();
        t.execute(vec![KeyOp::insert(orders.id, vec![Value::Int(k)], vec![(1, Value::Int(k))])], ExecType::Commit)
            .map(drop)
    };
    let e = denied(read(&clerk), "a read without SELECT");
    assert!(e.contains("SELECT command denied to user 'clerk'@'%' for table 'shop.orders'"), "{e}");
    denied(scan(&clerk), "a scan without SELECT");
    denied(insert(&clerk, 2), "an insert without INSERT");
    denied(clerk.drop_table("shop/orders"), "DROP TABLE without DROP");
    let e = denied(
        clerk
            .create_table(norr_client::table_def(
                "shop/mine",
                vec![norr_client::ColumnDef::new("k", norr_client::ColumnType::Int { unsigned: false }).not_null()],
                vec![0],
            ))
            .map(drop),
        "CREATE TABLE without CREATE",
    );
    assert!(e.contains("CREATE command denied to user 'clerk'@'%' for table 'shop.mine'"), "{e}");
    run("GRANT SELECT ON shop.orders TO 'clerk'@'%'");
    eventually("GRANT SELECT never reached the open connection", &logs, || read(&clerk).ok());
    scan(&clerk).expect("a scan with SELECT");
    denied(insert(&clerk, 2), "an insert with SELECT only");
    run("GRANT INSERT ON shop.* TO 'clerk'@'%'");
    eventually("GRANT INSERT ON shop.* never reached the open connection", &logs, || insert(&clerk, 2).ok());
    run("REVOKE SELECT ON shop.orders FROM 'clerk'@'%'");
    eventually("REVOKE never reached the open connection", &logs, || {
        read(&clerk).err().filter(|e| e.code() == Some(ErrorCode::AccessDenied))
    });
    // DICT: schema changes need CREATE / DROP.
    let e = denied(clerk.drop_table("shop/orders"), "DROP TABLE with SELECT and INSERT");
    assert!(e.contains("DROP command denied to user 'clerk'@'%' for table 'shop.orders'"), "{e}");
    // The SQL node (the cluster secret) is never checked by the data node.
    let n: Option<i64> = run("SELECT COUNT(*) FROM shop.orders")[0].get(0);
    assert_eq!(n, Some(2));
    drop(clerk);

    // The data node logged each refusal's exact reason and the peer.
    let log = node.log_text();
    assert!(log.contains("account login refused"), "{log}");
    assert!(log.contains("wrong password for 'app'@'%'"), "{log}");
    assert!(log.contains("no account 'nobody' admits host 127.0.0.1"), "{log}");
    assert!(log.contains("account 'app'@'%' is locked"), "{log}");
    assert!(log.contains("account login accepted"), "{log}");
    drop(rt);
}
