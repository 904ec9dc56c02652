//! MariaDB's extended capability MARIADB_CLIENT_CACHE_METADATA at the packet
//! level: offered in the greeting's reserved bytes, taken only from a client
//! that announces it the MariaDB way, and then a prepared statement's execute
//! leaves out column definitions the client already holds.

mod protocol_support;
use norr_sql::protocol::conn::MARIADB_CACHE_METADATA;
use protocol_support::*;

const CLIENT_MYSQL: u32 = 0x1;
const DEPRECATE_EOF: u32 = 0x0100_0000;
/// What libmariadb sends to a server without CLIENT_MYSQL: the same flags minus bit 0.
const MARIADB_CAPS: u32 = CAPS & !CLIENT_MYSQL;

async fn login(port: u16, caps: u32, mariadb_caps: u32) -> Raw {
    let ((r, ok), _) = Raw::login_mariadb(port, "root", "rootpw", caps, mariadb_caps).await;
    assert_eq!(ok[0], 0, "login failed: {ok:?}");
    r
}

/// Prepares `sql`; returns the statement id and its column count.
async fn prepare(r: &mut Raw, sql: &str, deprecate_eof: bool) -> (u32, u16) {
    let p = r.prepare(sql, deprecate_eof).await;
    (p.id, p.cols)
}

/// COM_STMT_EXECUTE of a statement without parameters.
async fn execute(r: &mut Raw, id: u32) {
    let mut p = vec![0x17];
    p.extend_from_slice(&id.to_le_bytes());
    p.push(0);
    p.extend_from_slice(&1u32.to_le_bytes());
    r.command(&p).await;
}

/// COM_STMT_EXECUTE with one parameter: `typed` sends its type (new-params-bound).
async fn execute_one(r: &mut Raw, id: u32, typed: Option<u8>, value: &[u8]) {
    let mut p = vec![0x17];
    p.extend_from_slice(&id.to_le_bytes());
    p.push(0);
    p.extend_from_slice(&1u32.to_le_bytes());
    p.push(0); // NULL bitmap
    match typed {
        Some(t) => p.extend_from_slice(&[1, t, 0]),
        None => p.push(0),
    }
    p.extend_from_slice(value);
    r.command(&p).await;
}

/// The field type byte of a ColumnDefinition41 payload.
fn def_type(def: &[u8]) -> u8 {
    let mut i = 0;
    for _ in 0..6 {
        i += 1 + def[i] as usize; // short lenenc strings only
    }
    assert_eq!(def[i], 0x0c);
    def[i + 7]
}

/// One result set as it arrived.
struct ResultSet {
    count_packet: Vec<u8>,
    defs: Vec<Vec<u8>>,
    rows: usize,
}

/// Reads a result set: the column count packet, the definitions it announces,
/// the EOF after them (unless DEPRECATE_EOF), the rows and the closing packet.
async fn read_result_set(r: &mut Raw, cache_metadata: bool, deprecate_eof: bool) -> ResultSet {
    let count_packet = r.read().await.unwrap();
    assert!(count_packet[0] > 0 && count_packet[0] < 0xfb, "not a column count: {count_packet:?}");
    let n = count_packet[0] as usize;
    let follows = if cache_metadata {
        assert_eq!(count_packet.len(), 2, "{count_packet:?}");
        assert!(count_packet[1] <= 1, "{count_packet:?}");
        count_packet[1] == 1
    } else {
        assert_eq!(count_packet.len(), 1, "{count_packet:?}");
        true
    };
    let mut defs = Vec::new();
    if follows {
        for _ in 0..n {
            let d = r.read().await.unwrap();
            assert_eq!(&d[..4], b"\x03def", "{d:?}");
            defs.push(d);
        }
    }
    if !deprecate_eof {
        let eof = r.read().await.unwrap();
        assert_eq!((eof[0], eof.len()), (0xfe, 5), "{eof:?}");
    }
    let mut rows = 0;
    loop {
        let p = r.read().await.unwrap();
        if p[0] == 0xfe && p.len() < 9 {
            break;
        }
        rows += 1;
    }
    ResultSet { count_packet, defs, rows }
}

#[tokio::test]
async fn greeting_offers_cache_metadata_in_the_reserved_bytes() {
    let srv = start_server().await;
    let (_, g) = Raw::login_mariadb(srv.port, "root", "rootpw", CAPS, 0).await;
    let ver_end = g.iter().position(|&b| b == 0).unwrap();
    // libmariadb looks for "MariaDB" in the version before it reads the
    // extension; the MySQL version still comes first.
    let version = String::from_utf8_lossy(&g[1..ver_end]).into_owned();
    assert!(version.starts_with("8.0.36-NorrDB-test ") && version.contains("MariaDB"), "{version}");
    let caps_lo = ver_end + 1 + 4 + 8 + 1;
    assert_eq!(g[caps_lo] & 1, 0, "CLIENT_MYSQL must be clear for MariaDB clients to read the extension");
    let reserved = caps_lo + 2 + 1 + 2 + 2 + 1;
    assert_eq!(&g[reserved..reserved + 6], &[0; 6]);
    let ext = u32::from_le_bytes([g[reserved + 6], g[reserved + 7], g[reserved + 8], g[reserved + 9]]);
    assert_eq!(ext, MARIADB_CACHE_METADATA);
}

#[tokio::test]
async fn execute_leaves_out_definitions_the_client_holds() {
    let srv = start_server().await;
    let mut r = login(srv.port, MARIADB_CAPS, MARIADB_CACHE_METADATA).await;
    let (id, cols) = prepare(&mut r, "select types", false).await;
    assert!(cols > 1);
    for _ in 0..3 {
        execute(&mut r, id).await;
        let rs = read_result_set(&mut r, true, false).await;
        assert_eq!(rs.count_packet, vec![cols as u8, 0]);
        assert!(rs.defs.is_empty());
        assert_eq!(rs.rows, 1);
    }
    // Text results always carry their definitions, flagged as following.
    r.command(b"\x03select types").await;
    let rs = read_result_set(&mut r, true, false).await;
    assert_eq!(rs.count_packet, vec![cols as u8, 1]);
    assert_eq!(rs.defs.len(), cols as usize);
    assert_eq!(rs.rows, 1);
}

#[tokio::test]
async fn changed_columns_are_sent_and_then_left_out() {
    let srv = start_server().await;
    let mut r = login(srv.port, MARIADB_CAPS, MARIADB_CACHE_METADATA).await;
    // The fake backend prepares `select ?` as a VARCHAR column but executes it
    // with the bound value's type.
    let (id, _) = prepare(&mut r, "select ?", false).await;
    let longlong = 0x08;
    let var_string = 0xfd;
    let steps: [(Option<u8>, Vec<u8>, Option<u8>); 4] = [
        (Some(longlong), 7i64.to_le_bytes().to_vec(), Some(longlong)),
        (None, 8i64.to_le_bytes().to_vec(), None),
        (Some(var_string), b"\x02hi".to_vec(), Some(var_string)),
        (None, b"\x02yo".to_vec(), None),
    ];
    for (i, (typed, value, sent)) in steps.into_iter().enumerate() {
        execute_one(&mut r, id, typed, &value).await;
        let rs = read_result_set(&mut r, true, false).await;
        assert_eq!(rs.rows, 1, "step {i}");
        match sent {
            Some(t) => {
                assert_eq!(rs.count_packet, vec![1, 1], "step {i}");
                assert_eq!(def_type(&rs.defs[0]), t, "step {i}");
            }
            None => assert_eq!(rs.count_packet, vec![1, 0], "step {i}"),
        }
    }
}

#[tokio::test]
async fn deprecate_eof_and_cache_metadata_together() {
    let srv = start_server().await;
    let caps = MARIADB_CAPS | DEPRECATE_EOF;
    let mut r = login(srv.port, caps, MARIADB_CACHE_METADATA).await;
    let (id, cols) = prepare(&mut r, "select types", true).await;
    execute(&mut r, id).await;
    let rs = read_result_set(&mut r, true, true).await;
    assert_eq!(rs.count_packet, vec![cols as u8, 0]);
    assert_eq!(rs.rows, 1);
}

#[tokio::test]
async fn mysql_clients_get_every_definition_every_time() {
    let srv = start_server().await;
    // A MySQL client keeps CLIENT_MYSQL set: the filler bytes mean nothing
    // then, even if not zero. A MariaDB client that does not ask for the
    // capability does not get it either.
    for (caps, ext) in [(CAPS, MARIADB_CACHE_METADATA), (CAPS, 0), (MARIADB_CAPS, 0)] {
        let mut r = login(srv.port, caps, ext).await;
        let (id, cols) = prepare(&mut r, "select types", false).await;
        for _ in 0..2 {
            execute(&mut r, id).await;
            let rs = read_result_set(&mut r, false, false).await;
            assert_eq!(rs.count_packet, vec![cols as u8], "caps {caps:#x} ext {ext:#x}");
            assert_eq!(rs.defs.len(), cols as usize);
            assert_eq!(rs.rows, 1);
        }
        r.command(b"\x03select 1").await;
        let rs = read_result_set(&mut r, false, false).await;
        assert_eq!(rs.count_packet, vec![1]);
    }
}
