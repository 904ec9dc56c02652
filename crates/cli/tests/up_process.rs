//! `norr up` as a user runs it: the default shape (mgmd, 2 data node
//! processes, replicas = 2, an SQL node) and `--data-nodes 1` (everything in
//! one process, one copy). Each comes up, greets a MySQL client on its SQL
//! port, takes native writes, and stops on Ctrl-C (SIGINT) with exit status 0.

mod support;

use norr_client::blocking::Client;
use norr_client::*;
use norr_mgmd::config::NodeKind;
use norr_mgmd::protocol::{MgmCommand, MgmReply, NodeState};
use norr_mgmd::session::run_command;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::proc_cluster::{free_port, free_ports, Proc, TempDir, START};

const NORR: &str = env!("CARGO_BIN_EXE_norr");

/// The first packet a MySQL server sends: protocol version 10, then the
/// server version string.
/// Fails at once, with every log, if `norr up` exits first.
fn wait_for_mysql_greeting(port: u16, up: &mut Proc, dir: &TempDir) -> String {
    let deadline = Instant::now() + START;
    loop {
        if let Some(status) = up.child.try_wait().unwrap() {
            panic!("norr up exited ({status}) before serving SQL on port {port}; logs:\n{}", logs(up, dir));
        }
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut head = [0u8; 4];
            if s.read_exact(&mut head).is_ok() {
                let len = usize::from(head[0]) | usize::from(head[1]) << 8 | usize::from(head[2]) << 16;
                let mut body = vec![0u8; len];
                s.read_exact(&mut body).unwrap();
                assert_eq!(body[0], 10, "protocol version of the greeting");
                let end = body[1..].iter().position(|&b| b == 0).expect("NUL-terminated version");
                return String::from_utf8_lossy(&body[1..1 + end]).into_owned();
            }
        }
        assert!(Instant::now() < deadline, "norr up did not serve SQL on port {port}; logs:\n{}", logs(up, dir));
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `norr up`'s own log and each data node's (under norr-data/ or the
/// --data-dir given).
fn logs(up: &Proc, dir: &TempDir) -> String {
    let mut out = up.log_text();
    for sub in ["norr-data", "data"] {
        let Ok(entries) = std::fs::read_dir(dir.0.join(sub)) else { continue };
        for e in entries.flatten() {
            if e.path().extension().is_some_and(|x| x == "log") {
                let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                out.push_str(&format!("\n--- {}:\n{text}", e.path().display()));
            }
        }
    }
    out
}

fn spawn_up(dir: &TempDir, args: &[String]) -> Proc {
    let log = dir.0.join("up.log");
    let child = Command::new(NORR)
        .arg("up")
        .args(args)
        .current_dir(&dir.0)
        .env("NORR_ROOT_PASSWORD", "")
        .stdout(std::fs::File::create(dir.0.join("up.out")).unwrap())
        .stderr(std::fs::File::create(&log).unwrap())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    Proc { child, log }
}

/// Write and read back one row through the native API, with the cluster
/// secret `norr up` keeps in `secret_file`; without it (or with another) the
/// data node refuses the connection.
fn native_round_trip(addr: &str, table: &str, secret_file: &std::path::Path) {
    use norr_transport::auth::ClusterSecret;
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(secret_file).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600, "the secret file is its owner's only");
    let secret = ClusterSecret::from_file(secret_file).unwrap();
    let with = |secret: Option<ClusterSecret>| {
        Client::connect_with(addr, ConnectOptions { secret, ..ConnectOptions::default() }).map_err(|e| e.to_string())
    };
    if std::env::var_os(norr_transport::auth::SECRET_ENV).is_none() {
        let Err(e) = with(None) else { panic!("served without a secret") };
        assert!(e.contains("requires the cluster secret"), "{e}");
    }
    let Err(e) = with(Some(ClusterSecret::generate().unwrap())) else { panic!("served with another secret") };
    assert!(e.contains("wrong cluster secret"), "{e}");
    let c = with(Some(secret)).unwrap();
    let def = table_def(
        table,
        vec![
            ColumnDef::new("k", ColumnType::BigInt { unsigned: false }).not_null(),
            ColumnDef::new("v", ColumnType::BigInt { unsigned: false }),
        ],
        vec![0],
    );
    let t = c.create_table(def).unwrap().id;
    let mut txn = c.begin();
    txn.execute(vec![KeyOp::write(t, vec![Value::Int(7)], vec![(1, Value::Int(70))])], ExecType::Commit).unwrap();
    let rows = c.scan(ScanSpec::full(t)).unwrap().collect_all().unwrap();
    assert_eq!(rows, vec![vec![Value::Int(7), Value::Int(70)]]);
}

/// SIGINT (what Ctrl-C sends) stops everything; `norr up` exits 0.
fn interrupt_and_wait(mut up: Proc) {
    let pid = up.child.id().to_string();
    assert!(Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let deadline = Instant::now() + START;
    loop {
        if let Some(status) = up.child.try_wait().unwrap() {
            let log = up.log_text();
            assert!(status.success(), "norr up exited with {status}; log:\n{log}");
            // A cluster's stop --all goes through mgmd, signed with the secret.
            assert!(!log.contains("through mgmd failed"), "mgmd refused norr up's stop --all; log:\n{log}");
            return;
        }
        assert!(Instant::now() < deadline, "norr up did not stop on SIGINT; log:\n{}", up.log_text());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn up_with_one_data_node_keeps_one_copy_in_one_process() {
    let dir = TempDir::new("up-one");
    let (native, sql) = (free_port(), free_port());
    let mut up = spawn_up(
        &dir,
        &["--data-nodes", "1", "--port-base", &native.to_string(), "--sql-port", &sql.to_string()].map(String::from),
    );
    let version = wait_for_mysql_greeting(sql, &mut up, &dir);
    assert!(!version.is_empty());
    native_round_trip(&format!("127.0.0.1:{native}"), "up_one", &dir.0.join("norr-data/cluster.secret"));
    interrupt_and_wait(up);
}

#[test]
fn up_by_default_starts_mgmd_and_two_replicated_data_nodes() {
    let dir = TempDir::new("up-two");
    // The data nodes take --port-base and the next port.
    let (native, sql, mgm) = (free_ports(2), free_port(), free_port());
    let mut up = spawn_up(
        &dir,
        &[
            "--port-base",
            &native.to_string(),
            "--sql-port",
            &sql.to_string(),
            "--mgm-port",
            &mgm.to_string(),
            "--data-dir",
            "data",
        ]
        .map(String::from),
    );
    wait_for_mysql_greeting(sql, &mut up, &dir);
    // Each data node reports its state to mgmd every half second.
    let deadline = Instant::now() + START;
    loop {
        let view = match run_command(&format!("127.0.0.1:{mgm}"), MgmCommand::Show, Duration::from_secs(5)) {
            Ok(MgmReply::Show(v)) => v,
            other => panic!("mgm show: {other:?}"),
        };
        let started = view
            .nodes
            .iter()
            .filter(|n| n.kind == NodeKind::Data && n.connected && n.state == Some(NodeState::Started))
            .count();
        if started == 2 {
            break;
        }
        assert!(Instant::now() < deadline, "two data nodes started: {view:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(dir.0.join("data/cluster.toml").exists(), "the generated cluster file is kept");
    let toml = std::fs::read_to_string(dir.0.join("data/cluster.toml")).unwrap();
    assert!(toml.contains("secret = "), "the cluster file has the secret");
    native_round_trip(&format!("127.0.0.1:{native}"), "up_two", &dir.0.join("data/cluster.secret"));
    interrupt_and_wait(up);
}

/// Processes whose parent is `pid` (from /proc).
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { continue };
        // pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
        let Some(rest) = stat.rsplit_once(')').map(|r| r.1) else { continue };
        if rest.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok()) == Some(pid) {
            out.push(child);
        }
    }
    out
}

/// True while `pid` exists and has not exited (a zombie waiting for its
/// new parent to reap it has exited).
fn running(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    stat.rsplit_once(')').and_then(|r| r.1.split_whitespace().next()).is_some_and(|state| state != "Z")
}

#[test]
fn data_nodes_end_when_norr_up_is_killed() {
    let dir = TempDir::new("up-kill");
    let (native, sql, mgm) = (free_ports(2), free_port(), free_port());
    let mut up = spawn_up(
        &dir,
        &["--port-base", &native.to_string(), "--sql-port", &sql.to_string(), "--mgm-port", &mgm.to_string()]
            .map(String::from),
    );
    wait_for_mysql_greeting(sql, &mut up, &dir);
    let nodes = children_of(up.child.id());
    assert_eq!(nodes.len(), 2, "two data node processes: {nodes:?}");
    up.child.kill().unwrap();
    up.child.wait().unwrap();
    let deadline = Instant::now() + START;
    while nodes.iter().any(|p| running(*p)) {
        assert!(Instant::now() < deadline, "data nodes {nodes:?} outlived a killed norr up");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Wait for `norr up` to exit by itself; its status, stdout and stderr.
fn exit_of(mut up: Proc, dir: &TempDir) -> (std::process::ExitStatus, String, String) {
    let deadline = Instant::now() + START;
    loop {
        if let Some(status) = up.child.try_wait().unwrap() {
            let out = std::fs::read_to_string(dir.0.join("up.out")).unwrap_or_default();
            return (status, out, up.log_text());
        }
        assert!(Instant::now() < deadline, "norr up kept running; logs:\n{}", logs(&up, dir));
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Another server on `port` that greets every client as MySQL would: the
/// readiness check of a `norr up` whose own SQL node failed to bind once
/// took its greeting for its own SQL node's.
fn foreign_mysql_server(port: u16) {
    let l = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let mut body = vec![10u8];
            body.extend_from_slice(b"8.0.99-other\0");
            body.extend_from_slice(&7u32.to_le_bytes());
            body.extend_from_slice(&[1u8; 8]);
            body.push(0);
            let mut packet = vec![body.len() as u8, 0, 0, 0];
            packet.extend_from_slice(&body);
            let _ = std::io::Write::write_all(&mut s, &packet);
        }
    });
}

/// Asserts the one error a busy port gives: the port, the process holding
/// it (this test process), the flag that picks another; and no success.
fn assert_busy_port_error(up: Proc, dir: &TempDir, port: u16, flag: &str) {
    let (status, out, err) = exit_of(up, dir);
    assert!(!status.success(), "norr up exited with {status}; stdout:\n{out}\nstderr:\n{err}");
    assert!(!out.contains("is up") && !out.contains("Connect with"), "success reported:\n{out}");
    let line = err.lines().find(|l| l.starts_with("norr: error:")).unwrap_or_else(|| panic!("no error:\n{err}"));
    assert!(line.contains(&format!("port {port} ")), "{line}");
    assert!(line.contains(&format!("pid {}", std::process::id())), "the holder named: {line}");
    assert!(line.contains(flag), "{line}");
}

#[test]
fn a_busy_sql_port_fails_the_start_and_never_reports_success() {
    let dir = TempDir::new("up-busy-sql");
    let (native, sql) = (free_port(), free_port());
    foreign_mysql_server(sql);
    let up = spawn_up(
        &dir,
        &["--data-nodes", "1", "--port-base", &native.to_string(), "--sql-port", &sql.to_string()].map(String::from),
    );
    assert_busy_port_error(up, &dir, sql, "--sql-port");

    // The same with the default shape (mgmd and data node processes).
    let (native, mgm) = (free_ports(2), free_port());
    let up = spawn_up(
        &dir,
        &["--port-base", &native.to_string(), "--sql-port", &sql.to_string(), "--mgm-port", &mgm.to_string()]
            .map(String::from),
    );
    assert_busy_port_error(up, &dir, sql, "--sql-port");
}

#[test]
fn a_busy_mgm_or_data_node_port_fails_the_start_before_anything_runs() {
    let dir = TempDir::new("up-busy-other");
    let (native, sql, mgm) = (free_ports(2), free_port(), free_port());
    let args = ["--port-base", &native.to_string(), "--sql-port", &sql.to_string(), "--mgm-port", &mgm.to_string()]
        .map(String::from);
    {
        let _held = std::net::TcpListener::bind(("127.0.0.1", mgm)).unwrap();
        assert_busy_port_error(spawn_up(&dir, &args), &dir, mgm, "--mgm-port");
    }
    // The second data node's port (--port-base + 1).
    let _held = std::net::TcpListener::bind(("127.0.0.1", native + 1)).unwrap();
    assert_busy_port_error(spawn_up(&dir, &args), &dir, native + 1, "--port-base");
    assert!(!dir.0.join("norr-data/node-2.log").exists(), "no data node was started");
}
