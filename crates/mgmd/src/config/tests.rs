use super::*;

const BASE: &str = "/srv/norr";

fn parse(text: &str) -> Result<ClusterConfig, ConfigError> {
    ClusterConfig::parse(text, Path::new(BASE))
}

/// The problems of a config that must be refused.
fn problems(text: &str) -> Vec<String> {
    match parse(text) {
        Ok(c) => panic!("accepted:\n{text}\n=> {c:?}"),
        Err(e) => e.problems(),
    }
}

/// Asserts one problem contains every fragment.
fn refused(text: &str, fragments: &[&str]) {
    let ps = problems(text);
    assert!(ps.iter().any(|p| fragments.iter().all(|f| p.contains(f))), "wanted {fragments:?} in {ps:#?}");
}

const TWO_DATA: &str = r#"
[cluster]
name = "t"
replicas = 2
[[node]]
id = 1
kind = "mgmd"
[[node]]
id = 2
kind = "data"
port = 2202
[[node]]
id = 3
kind = "data"
port = 2203
"#;

fn with(extra: &str) -> String {
    format!("{TWO_DATA}\n{extra}")
}

#[test]
fn example_config_validates_and_has_what_it_says() {
    let c = parse(EXAMPLE_CONFIG).unwrap();
    assert_eq!(c.name, "demo");
    assert_eq!(c.replicas, 2);
    assert_eq!(c.partitions_per_node, 2);
    assert_eq!(c.knobs.data_memory_bytes, 1 << 30);
    assert_eq!(c.knobs.default_partitions, 4, "2 per node x 2 data nodes");
    assert_eq!(c.node_groups(), vec![vec![2, 3]]);
    assert_eq!(c.node(2).unwrap().data_dir.as_deref(), Some(Path::new("/srv/norr/norr-data/node-2")));
    assert_eq!(c.node(3).unwrap().data_dir.as_deref(), Some(Path::new("/srv/norr/norr-data/node-3")));
    let sql = c.node(100).unwrap();
    assert_eq!((sql.kind, sql.port, sql.host_restriction()), (NodeKind::Sql, 3306, Some("127.0.0.1")));
    assert_eq!(c.mgm_addresses(), "127.0.0.1:1186");
    assert_eq!(c.node(2).unwrap().address(), "127.0.0.1:2202");
}

#[test]
fn defaults_fill_what_the_file_leaves_out() {
    // replicas defaults to 2, as in NDB: one data node alone is then refused.
    refused("[[node]]\nid = 5\nkind = \"data\"\nport = 2202\n", &["1 data nodes cannot form node groups of 2"]);
    let c = parse(&TWO_DATA.replace("name = \"t\"\nreplicas = 2", "")).unwrap();
    assert_eq!((c.name.as_str(), c.replicas, c.partitions_per_node), ("norr", 2, 2));
    let m = c.node(1).unwrap();
    assert_eq!((m.host.as_str(), m.port, m.data_dir.as_ref()), ("127.0.0.1", DEFAULT_MGMD_PORT, None));
}

#[test]
fn single_data_node_with_one_replica_needs_no_mgmd() {
    let c = parse("[cluster]\nreplicas = 1\n[[node]]\nid = 5\nkind = \"data\"\nport = 2202\n").unwrap();
    assert_eq!(c.knobs, Knobs { default_partitions: 2, ..Knobs::default() });
    assert_eq!(c.node(5).unwrap().host, "127.0.0.1");
    assert_eq!(c.node_groups(), vec![vec![5]]);
    assert_eq!(c.node_group_of(5), Some(0));
    assert_eq!(c.mgm_addresses(), "");
}

#[test]
fn round_trip_through_canonical_text() {
    let c = parse(EXAMPLE_CONFIG).unwrap();
    let text = c.to_toml();
    let back = ClusterConfig::parse(&text, Path::new(BASE)).unwrap();
    assert_eq!(back, c);
    // Resolved paths are absolute: another base directory changes nothing but base_dir.
    let elsewhere = ClusterConfig::parse(&text, Path::new("/elsewhere")).unwrap();
    assert_eq!(elsewhere.nodes, c.nodes);
    assert_eq!(elsewhere.digest(), c.digest());
    assert_eq!(back.to_toml(), text, "canonical text is a fixed point");
    assert!(text.contains("data_memory_bytes = \"1G\""), "{text}");
    assert!(!text.contains("default_partitions"), "derived, not written: {text}");
}

#[test]
fn digest_is_stable_and_tells_configs_apart() {
    let a = parse(EXAMPLE_CONFIG).unwrap();
    // Key order, comments and spelling do not matter.
    let reordered = r#"
[[node]]
kind = "data"
id = 3
port = 2203
[[node]]
port = 2202
id = 2
kind = "data"
data_dir = "./norr-data/x/../node-2"
[[node]]
id = 1
kind = "mgmd"
[data]
gcp_interval_ms = 2000
data_memory_bytes = 1073741824
[cluster]
partitions_per_node = 2
name = "demo"
[[node]]
kind = "sql"
id = 100
host = "127.0.0.1"
port = 3306
"#;
    let b = parse(reordered).unwrap();
    assert_eq!(a.diff(&b), Vec::<String>::new());
    assert_eq!(a.digest(), b.digest());
    let c = parse(&EXAMPLE_CONFIG.replace("lock_wait_timeout_ms = 1200", "lock_wait_timeout_ms = 500")).unwrap();
    assert_ne!(a.digest(), c.digest());
    // The value is fixed by the algorithm, not by the process: FNV-1a of known text.
    assert_eq!(canon::fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(canon::fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
}

#[test]
fn diff_names_each_difference() {
    let here = parse(EXAMPLE_CONFIG).unwrap();
    let cluster = parse(
        &EXAMPLE_CONFIG
            .replace("lock_wait_timeout_ms = 1200", "lock_wait_timeout_ms = 500")
            .replace("port = 2203", "port = 2204")
            .replace("data_memory_bytes = \"1G\"", "data_memory_bytes = \"512M\"")
            .replace("name = \"demo\"", "name = \"prod\""),
    )
    .unwrap();
    let d = here.diff(&cluster);
    assert!(d.contains(&"data.lock_wait_timeout_ms: 1200 here, 500 in the cluster".to_string()), "{d:#?}");
    assert!(d.contains(&"node 3: port 2203 here, 2204 in the cluster".to_string()), "{d:#?}");
    assert!(d.contains(&"data.data_memory_bytes: 1G here, 512M in the cluster".to_string()), "{d:#?}");
    assert!(d.contains(&"cluster.name: \"demo\" here, \"prod\" in the cluster".to_string()), "{d:#?}");
    assert_eq!(d.len(), 4, "{d:#?}");

    let fewer = parse(&with("")).unwrap();
    let more = parse(&with("[[node]]\nid = 101\nkind = \"api\"\n")).unwrap();
    assert_eq!(fewer.diff(&more), vec!["node 101: not here, an api slot in the cluster".to_string()]);
    assert_eq!(more.diff(&fewer), vec!["node 101: an api slot here, not in the cluster".to_string()]);
}

#[test]
fn sizes_in_data_section() {
    let c = parse(&with("[data]\ndata_memory_bytes = \"256M\"\nmax_frame_bytes = \"2MiB\"\n")).unwrap();
    assert_eq!(c.knobs.data_memory_bytes, 256 << 20);
    assert_eq!(c.knobs.max_frame_bytes, 2 << 20);
    let c = parse(&with("[data]\ndata_memory_bytes = 268435456\n")).unwrap();
    assert_eq!(c.knobs.data_memory_bytes, 256 << 20);
    refused(&with("[data]\ndata_memory_bytes = \"lots\"\n"), &["[data] data_memory_bytes = \"lots\"", "not a size"]);
    refused(&with("[data]\nlock_wait_timeout_ms = \"5s\"\n"), &["lock_wait_timeout_ms = \"5s\" must be an integer"]);
    refused(&with("[data]\nread_backup = 1\n"), &["read_backup = 1 must be true or false"]);
    refused(&with("[data]\nlock_wait_timeout_ms = -5\n"), &["lock_wait_timeout_ms = -5 must not be negative"]);
}

#[test]
fn unknown_keys_are_refused_everywhere() {
    refused(
        &with("[data]\nlock_wait_timeout = 5\n"),
        &["[data] unknown knob `lock_wait_timeout`", "did you mean `lock_wait_timeout_ms`"],
    );
    refused(
        &TWO_DATA.replace("replicas = 2", "replicas = 2\nreplica = 2"),
        &["unknown key `replica` in [cluster]", "replicas"],
    );
    refused(
        &with("[[node]]\nid = 4\nkind = \"data\"\nport = 1\nhostname = \"x\"\n"),
        &["node 4 (data): unknown key `hostname`"],
    );
    refused(&with("[nodes]\nx = 1\n"), &["unknown key `nodes` at the top level", "did you mean `node`"]);
    refused(
        &with("wat = 1\n").replacen("\n[cluster]", "wat = 1\n[cluster]", 1),
        &["unknown key `wat` at the top level"],
    );
}

#[test]
fn knob_ranges_come_from_knobs_validate() {
    refused(
        &with("[data]\nlock_wait_timeout_ms = 0\n"),
        &["[data] lock_wait_timeout_ms = 0 is out of range 1..=3600000"],
    );
    refused(&with("[data]\nmissed_heartbeats = 1\n"), &["missed_heartbeats = 1 is out of range 2..=100"]);
    refused(&with("[data]\ndefault_partitions = 4\n"), &["default_partitions cannot be set", "partitions_per_node"]);
    refused(
        &TWO_DATA.replace("replicas = 2", "replicas = 2\npartitions_per_node = 0"),
        &["cluster.partitions_per_node = 0 is out of range 1..=128"],
    );
}

#[test]
fn replicas_and_node_groups() {
    refused(&TWO_DATA.replace("replicas = 2", "replicas = 0"), &["cluster.replicas = 0 is out of range 1..=4"]);
    refused(&TWO_DATA.replace("replicas = 2", "replicas = 5"), &["cluster.replicas = 5 is out of range 1..=4"]);
    refused(
        &TWO_DATA.replace("replicas = 2", "replicas = \"two\""),
        &["cluster.replicas = \"two\" must be an integer"],
    );
    refused(
        &with("[[node]]\nid = 4\nkind = \"data\"\nport = 2204\n"),
        &["3 data nodes cannot form node groups of 2", "use a multiple of 2"],
    );
    let four = with("[[node]]\nid = 4\nkind = \"data\"\nport = 2204\n[[node]]\nid = 9\nkind = \"data\"\nport = 2209\n");
    let c = parse(&four).unwrap();
    assert_eq!(c.node_groups(), vec![vec![2, 3], vec![4, 9]]);
    assert_eq!(c.node_group_of(9), Some(1));
    assert_eq!(c.node_group_of(1), None, "mgmd is in no node group");
    assert_eq!(c.knobs.default_partitions, 8);
    let c = parse(&four.replace("replicas = 2", "replicas = 4")).unwrap();
    assert_eq!(c.node_groups(), vec![vec![2, 3, 4, 9]]);
    assert_eq!(c.data_nodes().map(|n| n.id).collect::<Vec<_>>(), vec![2, 3, 4, 9]);
}

#[test]
fn data_nodes_and_mgmd_are_required() {
    refused("[cluster]\nname = \"x\"\n[[node]]\nid = 1\nkind = \"mgmd\"\n", &["no data node"]);
    refused(
        "[[node]]\nid = 2\nkind = \"data\"\nport = 2202\n[[node]]\nid = 3\nkind = \"data\"\nport = 2203\n",
        &["2 data nodes and no mgmd"],
    );
    // Several mgmds are allowed; the first (lowest id) arbitrates.
    let c = parse(&with("[[node]]\nid = 50\nkind = \"mgmd\"\nport = 1187\n")).unwrap();
    assert_eq!(c.mgmd_nodes().map(|n| n.id).collect::<Vec<_>>(), vec![1, 50]);
    assert_eq!(c.mgm_addresses(), "127.0.0.1:1186,127.0.0.1:1187");
}

#[test]
fn node_ids_are_unique_and_in_range_for_their_kind() {
    refused(&with("[[node]]\nid = 3\nkind = \"data\"\nport = 2299\n"), &["node 3 is defined twice", "#3 and #4"]);
    refused(
        &with("[[node]]\nid = 100\nkind = \"data\"\nport = 2299\n"),
        &["id = 100 is out of range for a data node: 1..=99"],
    );
    refused(
        &with("[[node]]\nid = 0\nkind = \"mgmd\"\nport = 2299\n"),
        &["id = 0 is out of range for a mgmd node: 1..=99"],
    );
    refused(&with("[[node]]\nid = 42\nkind = \"sql\"\n"), &["id = 42 is out of range for a sql node: 100..=65535"]);
    refused(&with("[[node]]\nid = 70000\nkind = \"api\"\n"), &["id = 70000 is out of range for an api node"]);
    refused(&with("[[node]]\nkind = \"api\"\n"), &["entry #4: id is missing"]);
    refused(&with("[[node]]\nid = 7\n"), &["entry #4: kind is missing"]);
    refused(&with("[[node]]\nid = 7\nkind = \"storage\"\n"), &["kind = \"storage\" is not a node kind"]);
    refused(&with("[[node]]\nid = \"seven\"\nkind = \"data\"\n"), &["id = \"seven\" must be an integer"]);
}

#[test]
fn two_nodes_on_one_host_and_port_are_refused() {
    refused(
        &TWO_DATA.replace("port = 2203", "port = 2202"),
        &["node 3: port 2202 is already used by node 2 (127.0.0.1:2202)"],
    );
    // localhost and 127.0.0.1 are one interface.
    refused(
        &TWO_DATA.replace("port = 2203", "port = 2202\nhost = \"localhost\""),
        &["node 3: port 2202 is already used by node 2"],
    );
    refused(
        &with("[[node]]\nid = 100\nkind = \"sql\"\nhost = \"127.0.0.1\"\nport = 1186\n"),
        &["node 100: port 1186 is already used by node 1"],
    );
    // Other hosts may reuse a port.
    let c = parse(&TWO_DATA.replace("port = 2203", "port = 2202\nhost = \"10.0.0.3\"")).unwrap();
    assert_eq!(c.node(3).unwrap().address(), "10.0.0.3:2202");
    refused(
        &with("[[node]]\nid = 4\nkind = \"data\"\nport = 0\n"),
        &["node 4 (data): port = 0 must be an integer in 1..=65535"],
    );
    refused(&with("[[node]]\nid = 4\nkind = \"data\"\n"), &["node 4 (data): port is missing"]);
    refused(&with("[[node]]\nid = 101\nkind = \"api\"\nport = 5\n"), &["node 101 (api): port is only for"]);
}

#[test]
fn data_dirs_are_per_node() {
    refused(
        &TWO_DATA.replace("port = 2203", "port = 2203\ndata_dir = \"norr-data/node-2\""),
        &["node 3: data_dir /srv/norr/norr-data/node-2 is also the data_dir of node 2"],
    );
    refused(
        &TWO_DATA
            .replace("port = 2202", "port = 2202\ndata_dir = \"d\"")
            .replace("port = 2203", "port = 2203\ndata_dir = \"./x/../d\""),
        &["node 3: data_dir /srv/norr/d is also the data_dir of node 2"],
    );
    let c = parse(&TWO_DATA.replace("port = 2202", "port = 2202\ndata_dir = \"/var/lib/norr/2\"")).unwrap();
    assert_eq!(c.node(2).unwrap().data_dir.as_deref(), Some(Path::new("/var/lib/norr/2")));
    refused(
        &TWO_DATA.replace("kind = \"mgmd\"", "kind = \"mgmd\"\ndata_dir = \"m\""),
        &["node 1 (mgmd): data_dir is only for data nodes"],
    );
    refused(&TWO_DATA.replace("port = 2202", "port = 2202\ndata_dir = \"\""), &["node 2 (data): data_dir is empty"]);
}

#[test]
fn names_and_hosts_must_not_be_empty() {
    refused(&TWO_DATA.replace("name = \"t\"", "name = \"  \""), &["cluster.name is empty"]);
    refused(&TWO_DATA.replace("name = \"t\"", "name = 5"), &["cluster.name = 5 must be a string"]);
    refused(&TWO_DATA.replace("port = 2202", "port = 2202\nhost = \"\""), &["node 2 (data): host is empty"]);
    refused(&TWO_DATA.replace("port = 2202", "port = 2202\nhost = \"a b\""), &["host = \"a b\" is not a host name"]);
}

#[test]
fn every_problem_is_reported_at_once() {
    let ps = problems(
        r#"
[cluster]
replicas = 9
[data]
bogus = 1
[[node]]
id = 2
kind = "data"
port = 2202
[[node]]
id = 2
kind = "data"
port = 2203
"#,
    );
    assert!(ps.iter().any(|p| p.contains("replicas = 9")), "{ps:#?}");
    assert!(ps.iter().any(|p| p.contains("unknown knob `bogus`")), "{ps:#?}");
    assert!(ps.iter().any(|p| p.contains("node 2 is defined twice")), "{ps:#?}");
    let e = parse("[cluster]\nreplicas = 9\n[data]\nbogus = 1\n").unwrap_err().to_string();
    assert!(e.starts_with("cluster configuration is invalid: 3 problems:\n  - "), "{e}");
}

#[test]
fn syntax_errors_name_the_line() {
    let e = parse("[cluster]\nname = \n").unwrap_err();
    assert!(matches!(e, ConfigError::Syntax { .. }));
    assert!(e.to_string().contains("line 2"), "{e}");
    assert!(parse("").unwrap_err().to_string().contains("no data node"));
}

#[test]
fn load_resolves_against_the_files_directory() {
    let dir = std::env::temp_dir().join(format!("norr-mgmd-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("cluster.toml");
    std::fs::write(&f, EXAMPLE_CONFIG).unwrap();
    let c = ClusterConfig::load(&f).unwrap();
    assert_eq!(c.node(3).unwrap().data_dir.as_deref(), Some(dir.join("norr-data/node-3").as_path()));
    std::fs::write(&f, "[cluster]\nreplicas = 7\n").unwrap();
    let e = ClusterConfig::load(&f).unwrap_err().to_string();
    assert!(e.contains(&format!("cluster configuration {} is invalid", f.display())), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
    let e = ClusterConfig::load(&f).unwrap_err().to_string();
    assert!(e.starts_with("cannot read the cluster configuration"), "{e}");
}

#[test]
fn normalize_is_lexical() {
    use parse::normalize;
    assert_eq!(normalize(Path::new("/a/./b/../c")), Path::new("/a/c"));
    assert_eq!(normalize(Path::new("/../a")), Path::new("/a"));
    assert_eq!(normalize(Path::new("../a/..")), Path::new(".."));
    assert_eq!(normalize(Path::new("./")), Path::new("."));
}

#[test]
fn the_secret_is_validated_never_shown_and_never_in_the_canonical_text() {
    let secret = "0123456789abcdef0123456789abcdef-_.+/=~";
    let text = TWO_DATA.replace("replicas = 2", &format!("replicas = 2\nsecret = \"{secret}\""));
    let c = parse(&text).unwrap();
    assert_eq!(c.secret.as_ref().map(ClusterSecret::expose), Some(secret));
    assert_eq!(c.api_auth, ApiAuth::Secret, "the default with a secret");
    let canon = c.to_toml();
    assert!(!canon.contains(secret), "mgmd hands this text to anyone:\n{canon}");
    assert!(canon.contains("api_auth = \"secret\""));
    // Nodes parse mgmd's text: the same configuration but the secret, same digest.
    let back = parse(&canon).unwrap();
    assert_eq!((back.api_auth, back.secret.as_ref()), (ApiAuth::Secret, None));
    assert_eq!(back.digest(), c.digest());
    assert!(back.diff(&c).is_empty());
    // No secret: no api_auth line, the text (and digest) of before the key.
    let plain = parse(TWO_DATA).unwrap();
    assert_eq!(plain.api_auth, ApiAuth::Off);
    assert!(!plain.to_toml().contains("api_auth"));
    assert_eq!(c.diff(&plain), vec!["cluster.api_auth: secret here, off in the cluster".to_string()]);
    // Explicitly off with a secret; explicitly on (the secret comes from elsewhere).
    let off = parse(&text.replace("replicas = 2\n", "replicas = 2\napi_auth = \"off\"\n")).unwrap();
    assert_eq!(off.api_auth, ApiAuth::Off);
    let on = parse(&TWO_DATA.replace("replicas = 2", "replicas = 2\napi_auth = \"secret\"")).unwrap();
    assert_eq!((on.api_auth, on.secret.is_none()), (ApiAuth::Secret, true));

    let short = TWO_DATA.replace("replicas = 2", "replicas = 2\nsecret = \"hunter2\"");
    refused(&short, &["cluster.secret", "7 characters", "at least 32"]);
    assert!(problems(&short).iter().all(|p| !p.contains("hunter2")), "the value is never shown");
    let quote = TWO_DATA.replace("replicas = 2", &format!("replicas = 2\nsecret = \"{} x\"", "a".repeat(40)));
    refused(&quote, &["cluster.secret", "position 41"]);
    refused(&TWO_DATA.replace("replicas = 2", "replicas = 2\nsecret = 5"), &["cluster.secret must be a string"]);
    refused(
        &TWO_DATA.replace("replicas = 2", "replicas = 2\napi_auth = \"on\""),
        &["cluster.api_auth", "\"off\", \"secret\" or \"account\""],
    );
}

#[test]
fn account_logins_are_a_mode_of_their_own_that_needs_the_secret_too() {
    let acc = parse(&TWO_DATA.replace("replicas = 2", "replicas = 2\napi_auth = \"account\"")).unwrap();
    assert_eq!(acc.api_auth, ApiAuth::Account);
    assert!(acc.api_auth.requires_secret() && ApiAuth::Secret.requires_secret() && !ApiAuth::Off.requires_secret());
    let canon = acc.to_toml();
    assert!(canon.contains("api_auth = \"account\""), "{canon}");
    let back = parse(&canon).unwrap();
    assert_eq!(back.api_auth, ApiAuth::Account);
    assert_eq!(back.digest(), acc.digest());
    let secret_only = parse(&TWO_DATA.replace("replicas = 2", "replicas = 2\napi_auth = \"secret\"")).unwrap();
    assert_ne!(secret_only.digest(), acc.digest(), "nodes of the two modes do not form one cluster");
    assert_eq!(acc.diff(&secret_only), vec!["cluster.api_auth: account here, secret in the cluster".to_string()]);
}
