//! `norr mgmd` and `norr mgm` as processes: a fake data node (the session
//! library) reports to mgmd, `norr mgm` shows it and commands reach it; a
//! second process with the same node id and bad cluster files are refused.

use norr_mgmd::config::ClusterConfig;
use norr_mgmd::protocol::{MgmError, NodeCommand, NodeReport, NodeState, PeerRole};
use norr_mgmd::session::{fetch_config, fetch_config_with, MgmLink};
use norr_transport::auth::SECRET_ENV;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const NORR: &str = env!("CARGO_BIN_EXE_norr");
const T: Duration = Duration::from_secs(20);

/// A directory of its own per test, removed at the end.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("norr-mgmd-proc-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn cluster_file(mgmd_port: u16) -> String {
    format!(
        r#"
[cluster]
name = "proc"
replicas = 2
[[node]]
id = 1
kind = "mgmd"
host = "127.0.0.1"
port = {mgmd_port}
[[node]]
id = 2
kind = "data"
port = 2202
[[node]]
id = 3
kind = "data"
port = 2203
"#
    )
}

struct MgmdProcess {
    child: Child,
    addr: String,
    /// Its stderr lines so far (its log).
    log: Arc<Mutex<Vec<String>>>,
}

impl MgmdProcess {
    fn start(config: &Path) -> MgmdProcess {
        let mut child = Command::new(NORR)
            .args(["mgmd", "--config"])
            .arg(config)
            .env_remove(SECRET_ENV)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn norr mgmd");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let addr = loop {
            let line = lines.next().expect("mgmd printed its address").unwrap();
            if let Some(rest) = line.split(" listening on ").nth(1) {
                break rest.split_whitespace().next().unwrap().to_string();
            }
        };
        // Drain stderr so the child never blocks on a full pipe.
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = log.clone();
        std::thread::spawn(move || lines.map_while(Result::ok).for_each(|l| sink.lock().unwrap().push(l)));
        MgmdProcess { child, addr, log }
    }

    /// SIGINT, then the exit status.
    fn interrupt(mut self) -> std::process::ExitStatus {
        let ok = Command::new("kill").args(["-INT", &self.child.id().to_string()]).status().unwrap();
        assert!(ok.success());
        let t = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(t.elapsed() < T, "mgmd did not stop on SIGINT");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for MgmdProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn mgm(addr: &str, args: &[&str]) -> Output {
    Command::new(NORR).args(["mgm", "--mgm", addr]).args(args).env_remove(SECRET_ENV).output().expect("run norr mgm")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn fake_data_node(addr: &str, id: u16) -> (MgmLink, Receiver<NodeCommand>) {
    fake_data_node_with(addr, id, None)
}

/// A fake data node that proves `secret` when mgmd challenges its Hello.
fn fake_data_node_with(addr: &str, id: u16, secret: Option<&str>) -> (MgmLink, Receiver<NodeCommand>) {
    let secret = secret.map(|s| norr_transport::auth::ClusterSecret::new(s).unwrap());
    let (link, welcome) = fetch_config_with(addr, PeerRole::DataNode, Some(id), "fake datad", secret).unwrap();
    assert_eq!(welcome.config.name, "proc");
    let (tx, rx) = channel();
    let tx = Mutex::new(tx);
    link.start_reporting(
        Duration::from_millis(100),
        Box::new(move || NodeReport {
            node_id: id,
            state: NodeState::Started,
            node_group: Some(0),
            primary_partitions: 2,
            partitions: 4,
            version: "fake-1".into(),
            uptime_ms: 5_000,
            phases: vec![],
            president: true,
            last_durable_gci: Some(17),
            files_complete: true,
            address: format!("127.0.0.1:22{id:02}"),
            refusal: None,
        }),
        Box::new(move |c| {
            let _ = tx.lock().unwrap().send(c);
        }),
    );
    (link, rx)
}

#[test]
fn mgm_shows_a_reporting_node_and_commands_reach_it() {
    let dir = TempDir::new("show");
    let cfg = dir.write("cluster.toml", &cluster_file(free_port()));
    let m = MgmdProcess::start(&cfg);
    let (_link, rx) = fake_data_node(&m.addr, 2);

    // show lists it once its first report is in.
    let deadline = Instant::now() + T;
    let shown = loop {
        let out = mgm(&m.addr, &["show"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let s = text(&out.stdout);
        if s.contains("2 of 4") {
            break s;
        }
        assert!(Instant::now() < deadline, "node 2 never shown as reporting:\n{s}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(shown.contains("Cluster \"proc\""), "{shown}");
    assert!(shown.contains("President: node 2"), "{shown}");
    let row2 = shown.lines().find(|l| l.trim_start().starts_with("2 ")).unwrap();
    for col in ["data", "127.0.0.1:2202", "started", "2 of 4", "fake-1", "17"] {
        assert!(row2.contains(col), "{col} missing in {row2:?}");
    }
    let row3 = shown.lines().find(|l| l.trim_start().starts_with("3 ")).unwrap();
    assert!(row3.contains("not connected"), "{row3}");

    let st = mgm(&m.addr, &["status"]);
    assert!(st.status.success());
    assert!(text(&st.stdout).contains("Node 2: started (NorrDB fake-1"), "{}", text(&st.stdout));

    // stop 2 reaches the node's on_command; the reply says what was done.
    let out = mgm(&m.addr, &["stop", "2"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "node 2: stop sent (it was started)");
    assert_eq!(rx.recv_timeout(T).unwrap(), NodeCommand::Stop);
    let out = mgm(&m.addr, &["restart", "2"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(rx.recv_timeout(T).unwrap(), NodeCommand::Restart);
    let out = mgm(&m.addr, &["stop", "--all"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "shutdown sent to data nodes 2; not connected: 3");
    assert_eq!(rx.recv_timeout(T).unwrap(), NodeCommand::Shutdown);

    // Failures: exit status 1 and one line on stderr saying why.
    for (args, why) in [
        (&["stop", "7"][..], "node 7 is not in the cluster configuration"),
        (&["start", "3"][..], "node 3 is not connected to mgmd"),
        (&["restart", "1"][..], "node 1 is a mgmd node"),
    ] {
        let out = mgm(&m.addr, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = text(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(why), "{args:?}: {err}");
    }
    assert_eq!(m.interrupt().code(), Some(0));
}

#[test]
fn a_second_process_with_the_same_node_id_is_refused() {
    let dir = TempDir::new("dup");
    let cfg = dir.write("cluster.toml", &cluster_file(free_port()));
    let m = MgmdProcess::start(&cfg);
    let (_first, _) = fake_data_node(&m.addr, 3);
    match fetch_config(&m.addr, PeerRole::DataNode, Some(3), "second datad") {
        Err(MgmError::Refused { reason, .. }) => {
            assert!(reason.contains("node 3 is already connected"), "{reason}")
        }
        Err(e) => panic!("refused for the wrong reason: {e}"),
        Ok(_) => panic!("a second node 3 was admitted"),
    }
    // The configuration a node gets is the file's, with its digest.
    let (_api, w) = fetch_config(&m.addr, PeerRole::Api, None, "client").unwrap();
    assert_eq!(w.node_id, 100);
    assert_eq!(w.digest, ClusterConfig::load(&cfg).unwrap().digest());
}

#[test]
fn mgm_fails_cleanly_without_mgmd() {
    let addr = format!("127.0.0.1:{}", free_port());
    let out = mgm(&addr, &["show"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains(&format!("cannot reach mgmd at {addr}")), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let out = Command::new(NORR).args(["mgm", "stop"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "clap usage error: {}", text(&out.stderr));
}

#[test]
fn bad_cluster_files_are_refused_before_anything_starts() {
    let dir = TempDir::new("bad");
    let port = free_port();
    let good = cluster_file(port);
    let cases = [
        (
            "port.toml",
            good.replace("port = 2203", "port = 2202"),
            "node 3: port 2202 is already used by node 2 (127.0.0.1:2202)",
        ),
        (
            "groups.toml",
            format!("{good}[[node]]\nid = 4\nkind = \"data\"\nport = 2204\n"),
            "3 data nodes cannot form node groups of 2: use a multiple of 2 data nodes",
        ),
        (
            "unknown.toml",
            good.replace("[cluster]", "[cluster]\ncolour = \"blue\""),
            "unknown key `colour` in [cluster]",
        ),
        ("knob.toml", format!("{good}[data]\nlock_wait_timeout_ms = 0\n"), "lock_wait_timeout_ms = 0 is out of range"),
        ("syntax.toml", "[cluster\n".to_string(), "is not valid TOML"),
    ];
    for (name, body, why) in cases {
        let f = dir.write(name, &body);
        let out = Command::new(NORR).args(["mgmd", "--config"]).arg(&f).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{name}");
        let err = text(&out.stderr);
        assert!(err.contains(why), "{name}: {err}");
        assert!(err.contains(&f.display().to_string()), "{name}: the file is named: {err}");
    }
    // Nothing listens: the bad files started nothing.
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
    let out = Command::new(NORR).args(["mgmd", "--config"]).arg(dir.0.join("missing.toml")).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("cannot read the cluster configuration"));
}

#[test]
fn example_config_validates_and_check_prints_the_full_file() {
    let dir = TempDir::new("example");
    let out = Command::new(NORR).args(["mgmd", "--example-config"]).output().unwrap();
    assert!(out.status.success());
    let example = text(&out.stdout);
    assert!(example.contains("replicas = 2"), "{example}");
    let f = dir.write("cluster.toml", &example);
    let out = Command::new(NORR).args(["mgmd", "--check", "--config"]).arg(&f).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let full = ClusterConfig::parse(&text(&out.stdout), Path::new("/")).unwrap();
    let loaded = ClusterConfig::load(&f).unwrap();
    assert_eq!(full.nodes, loaded.nodes, "--check prints a file that reads back the same");
    assert_eq!(full.digest(), loaded.digest());
    assert!(text(&out.stdout).contains("txn_inactive_timeout_ms"), "every knob is listed");
    let help = Command::new(NORR).args(["mgm", "--help"]).output().unwrap();
    assert!(text(&help.stdout).contains("norr mgm stop --all"), "{}", text(&help.stdout));
    assert!(text(&help.stdout).contains("show and status are read-only and open"), "{}", text(&help.stdout));
}

/// Wait until `norr mgm show` lists node `id` as reporting.
fn wait_shown(addr: &str, id: u16) {
    let deadline = Instant::now() + T;
    loop {
        let out = mgm(addr, &["show"]);
        assert!(out.status.success(), "show needs no secret: {}", text(&out.stderr));
        let s = text(&out.stdout);
        if s.lines().any(|l| l.trim_start().starts_with(&format!("{id} ")) && l.contains("started")) {
            return;
        }
        assert!(Instant::now() < deadline, "node {id} never shown as reporting:\n{s}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A cluster file with a secret: `norr mgm stop` without it or with
/// another is refused (exit 1, one line, logged by mgmd with the client's
/// address); with it (--secret-file, --data-dir, the environment) it
/// works; show and status stay open.
#[test]
fn with_a_cluster_secret_mgm_commands_must_prove_it() {
    let dir = TempDir::new("secret");
    let secret = "ab".repeat(20);
    let file = cluster_file(free_port()).replace("replicas = 2", &format!("replicas = 2\nsecret = \"{secret}\""));
    let cfg = dir.write("cluster.toml", &file);
    let right = dir.write("cluster.secret", &format!("{secret}\n"));
    let wrong = dir.write("wrong.secret", &"cd".repeat(20));
    let m = MgmdProcess::start(&cfg);
    let (_link, rx) = fake_data_node_with(&m.addr, 2, Some(&secret));
    wait_shown(&m.addr, 2);
    assert!(mgm(&m.addr, &["status"]).status.success());

    let refused = |args: &[&str], why: &str| {
        let out = mgm(&m.addr, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", text(&out.stdout));
        let err = text(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(why), "{args:?}: {err}");
    };
    refused(&["stop", "2"], "mgmd refused stop 2: this cluster has a secret");
    refused(&["stop", "--all"], "--secret-file FILE, --data-dir DIR");
    let wrong = wrong.display().to_string();
    refused(&["--secret-file", &wrong, "restart", "2"], "mgmd refused restart 2: wrong cluster secret");
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err(), "a refused command reached the node");
    // mgmd logs before it answers; its stderr reaches us a little later.
    let deadline = Instant::now() + T;
    loop {
        let log = m.log.lock().unwrap().clone();
        let refusals = log.iter().filter(|l| l.contains("mgmd: refused") && l.contains(" from 127.0.0.1:")).count();
        if refusals == 3 {
            break;
        }
        assert!(
            refusals < 3 && Instant::now() < deadline,
            "each refusal logged once with the peer's address:\n{}",
            log.join("\n")
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    let out = mgm(&m.addr, &["--secret-file", &right.display().to_string(), "stop", "2"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(rx.recv_timeout(T).unwrap(), NodeCommand::Stop);
    let out = mgm(&m.addr, &["--data-dir", &dir.0.display().to_string(), "restart", "2"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(rx.recv_timeout(T).unwrap(), NodeCommand::Restart);
    let out =
        Command::new(NORR).args(["mgm", "--mgm", &m.addr, "stop", "--all"]).env(SECRET_ENV, &secret).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(rx.recv_timeout(T).unwrap(), NodeCommand::Shutdown);
    assert_eq!(m.interrupt().code(), Some(0));
}
