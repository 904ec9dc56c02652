//! Raw packets: every parameter type, long data, malformed and oversized
//! packets, unknown commands, random garbage. The server must answer with
//! MySQL errors and keep serving.

mod protocol_support;
use norr_signals::value::{Date, DateTime, Decimal};
use norr_signals::Value;
use protocol_support::*;

/// Prepares `sql` (no DEPRECATE_EOF); returns the statement id and its parameter count.
async fn prepare(r: &mut Raw, sql: &str) -> (u32, u16) {
    let p = r.prepare(sql, false).await;
    (p.id, p.params)
}

/// Reads a whole result set (or OK/ERR); returns the first packet.
async fn read_result(r: &mut Raw) -> Vec<u8> {
    let first = r.read().await.unwrap();
    if first[0] == 0 || first[0] == 0xff {
        return first;
    }
    // column count, defs, EOF, rows..., EOF
    loop {
        let p = r.read().await.unwrap();
        if p[0] == 0xfe && p.len() < 9 {
            break;
        }
    }
    loop {
        let p = r.read().await.unwrap();
        if (p[0] == 0xfe && p.len() < 9) || p[0] == 0xff {
            break;
        }
    }
    first
}

#[tokio::test]
async fn every_param_type_and_long_data() {
    let srv = start_server().await;
    let (mut r, ok) = Raw::login(srv.port, "root", "rootpw", CAPS).await;
    assert_eq!(ok[0], 0);
    let n = 19;
    let sql = format!("select {}", vec!["?"; n].join(","));
    let (id, params) = prepare(&mut r, &sql).await;
    assert_eq!(params as usize, n);
    // long data for the last parameter, in two pieces
    for piece in [&b"long "[..], &b"data"[..]] {
        let mut p = vec![0x18];
        p.extend_from_slice(&id.to_le_bytes());
        p.extend_from_slice(&(n as u16 - 1).to_le_bytes());
        p.extend_from_slice(piece);
        r.command(&p).await;
    }
    let mut p = vec![0x17];
    p.extend_from_slice(&id.to_le_bytes());
    p.push(0);
    p.extend_from_slice(&1u32.to_le_bytes());
    // NULL bitmap: param 16 (MYSQL_TYPE_NULL) and 17 (varchar sent as NULL)
    let mut bm = vec![0u8; n.div_ceil(8)];
    bm[16 / 8] |= 1 << (16 % 8);
    bm[17 / 8] |= 1 << (17 % 8);
    p.extend_from_slice(&bm);
    p.push(1);
    let types: [(u8, u8); 19] = [
        (0x01, 0),
        (0x01, 0x80),
        (0x02, 0),
        (0x0d, 0),
        (0x03, 0),
        (0x09, 0),
        (0x08, 0x80),
        (0x04, 0),
        (0x05, 0),
        (0xf6, 0),
        (0x0f, 0),
        (0xfc, 0),
        (0x0a, 0),
        (0x0c, 0),
        (0x07, 0),
        (0x0b, 0),
        (0x06, 0),
        (0xfd, 0),
        (0xfe, 0),
    ];
    for (t, f) in types {
        p.extend_from_slice(&[t, f]);
    }
    p.push(0xff); // tiny -1
    p.push(0xff); // tiny unsigned 255
    p.extend_from_slice(&(-2i16).to_le_bytes());
    p.extend_from_slice(&1999u16.to_le_bytes());
    p.extend_from_slice(&(-3i32).to_le_bytes());
    p.extend_from_slice(&5i32.to_le_bytes());
    p.extend_from_slice(&u64::MAX.to_le_bytes());
    p.extend_from_slice(&1.25f32.to_le_bytes());
    p.extend_from_slice(&(-0.5f64).to_le_bytes());
    p.extend_from_slice(b"\x0512.50");
    p.extend_from_slice(b"\x02vc");
    p.extend_from_slice(b"\x03\x00\x01\x02");
    p.extend_from_slice(&[4, 0xe8, 0x07, 2, 29]); // 2024-02-29
    p.extend_from_slice(&[7, 0xe8, 0x07, 2, 29, 1, 2, 3]);
    p.extend_from_slice(&[11, 0xe8, 0x07, 2, 29, 1, 2, 3, 0x40, 0xe2, 0x01, 0]); // .123456
    p.extend_from_slice(&[12, 1, 1, 0, 0, 0, 2, 3, 4, 0x40, 0xe2, 0x01, 0]); // -(1d 02:03:04.123456)
    r.command(&p).await;
    let first = read_result(&mut r).await;
    assert_ne!(first[0], 0xff, "{first:?}");
    let got = LAST_PARAMS.lock().unwrap().clone();
    let date = Date { year: 2024, month: 2, day: 29 };
    let want = vec![
        Value::Int(-1),
        Value::UInt(255),
        Value::Int(-2),
        Value::UInt(1999),
        Value::Int(-3),
        Value::Int(5),
        Value::UInt(u64::MAX),
        Value::Float(1.25),
        Value::Double(-0.5),
        Value::Decimal(Decimal { mantissa: 1250, scale: 2 }),
        Value::str("vc"),
        Value::Bytes(vec![0, 1, 2]),
        Value::Date(date),
        Value::DateTime(DateTime { date, hour: 1, minute: 2, second: 3, micro: 0 }),
        Value::DateTime(DateTime { date, hour: 1, minute: 2, second: 3, micro: 123456 }),
        Value::Time(-((((24 + 2) * 60 + 3) * 60 + 4) * 1_000_000 + 123456)),
        Value::Null,
        Value::Null,
        Value::str("long data"),
    ];
    assert_eq!(got, want);

    // Re-execute without re-binding types: types are remembered; long data was consumed.
    let mut p = vec![0x17];
    p.extend_from_slice(&id.to_le_bytes());
    p.push(0);
    p.extend_from_slice(&1u32.to_le_bytes());
    p.extend_from_slice(&[0xff, 0xff, 0x07]); // all NULL
    p.push(0);
    r.command(&p).await;
    let first = read_result(&mut r).await;
    assert_ne!(first[0], 0xff);
    assert!(LAST_PARAMS.lock().unwrap().iter().all(|v| v.is_null()));

    // Truncated execute: malformed packet error, connection survives.
    let mut p = vec![0x17];
    p.extend_from_slice(&id.to_le_bytes());
    p.push(0);
    p.extend_from_slice(&1u32.to_le_bytes());
    p.extend_from_slice(&[0, 0, 0, 1, 0x08]);
    r.command(&p).await;
    let (code, _, _) = err_of(&r.read().await.unwrap());
    assert_eq!(code, 1835);
    // Unknown statement id.
    let mut p = vec![0x17];
    p.extend_from_slice(&999u32.to_le_bytes());
    p.extend_from_slice(&[0, 1, 0, 0, 0]);
    r.command(&p).await;
    assert_eq!(err_of(&r.read().await.unwrap()).0, 1243);
    // Unknown parameter type.
    let (id2, _) = prepare(&mut r, "select ?").await;
    let mut p = vec![0x17];
    p.extend_from_slice(&id2.to_le_bytes());
    p.extend_from_slice(&[0, 1, 0, 0, 0, 0, 1, 0x42, 0, 1]);
    r.command(&p).await;
    assert_eq!(err_of(&r.read().await.unwrap()).0, 1210);
    // Reset and close.
    let mut p = vec![0x1a];
    p.extend_from_slice(&id.to_le_bytes());
    r.command(&p).await;
    assert_eq!(r.read().await.unwrap()[0], 0);
    let mut p = vec![0x19];
    p.extend_from_slice(&id.to_le_bytes());
    r.command(&p).await; // no reply
    let mut p = vec![0x1a];
    p.extend_from_slice(&id.to_le_bytes());
    r.command(&p).await;
    assert_eq!(err_of(&r.read().await.unwrap()).0, 1243);
    r.command(b"\x0e").await;
    assert_eq!(r.read().await.unwrap()[0], 0);
}

#[tokio::test]
async fn malformed_and_unknown_commands() {
    let srv = start_server().await;
    let (mut r, _) = Raw::login(srv.port, "root", "rootpw", CAPS).await;
    r.command(b"").await;
    assert_eq!(err_of(&r.read().await.unwrap()).0, 1835);
    r.command(b"\x7f").await;
    let (code, state, _) = err_of(&r.read().await.unwrap());
    assert_eq!((code, state.as_str()), (1047, "08S01"));
    r.command(b"\x17\x01").await;
    assert_eq!(err_of(&r.read().await.unwrap()).0, 1835);
    r.command(b"\x1a").await;
    assert_eq!(err_of(&r.read().await.unwrap()).0, 1835);
    r.command(b"\x03select 1").await;
    assert_eq!(read_result(&mut r).await, vec![1]);
    // Bad handshake: garbage instead of a HandshakeResponse.
    let mut raw = Raw::connect(srv.port).await;
    raw.read().await.unwrap();
    raw.write(b"\x01\x02\x03").await;
    assert_eq!(err_of(&raw.read().await.unwrap()).0, 1043);
}

#[tokio::test]
async fn oversized_packets() {
    let srv = start_server_with(|c| c.max_allowed_packet = 1 << 20).await;
    // Just under the limit works (and exercises the server's joining).
    let (mut r, _) = Raw::login(srv.port, "root", "rootpw", CAPS).await;
    let mut q = b"\x03select len ".to_vec();
    q.extend(std::iter::repeat_n(b'x', (1 << 20) - q.len()));
    r.command(&q).await;
    let _ = read_result(&mut r).await;
    // Over the limit: 1153 08S01, then the server closes the connection.
    q.push(b'x');
    r.command(&q).await;
    let (code, state, _) = err_of(&r.read().await.unwrap());
    assert_eq!((code, state.as_str()), (1153, "08S01"));
    assert!(r.read().await.is_none());
    // The same through mysql_async.
    let mut c = mysql_async::Conn::new(opts(srv.port, "root", "rootpw")).await.unwrap();
    let big = format!("select len {}", "y".repeat(2 << 20));
    let e = mysql_async::prelude::Queryable::query_drop(&mut c, big).await.err().unwrap();
    assert!(format!("{e:?}").contains("1153") || matches!(e, mysql_async::Error::Io(_)), "{e:?}");
    // And the server lives on.
    let mut c = mysql_async::Conn::new(opts(srv.port, "root", "rootpw")).await.unwrap();
    mysql_async::prelude::Queryable::ping(&mut c).await.unwrap();
}

#[tokio::test]
async fn packets_over_16mib_are_joined_and_split() {
    let srv = start_server().await;
    let (mut r, _) = Raw::login(srv.port, "root", "rootpw", CAPS).await;
    // A 20 MiB COM_QUERY sent as two chunks (0xFFFFFF + rest).
    let mut q = b"\x03select len ".to_vec();
    let body = 20 << 20;
    q.extend(std::iter::repeat_n(b'z', body));
    r.seq = 0;
    let (a, b) = q.split_at(0xFF_FFFF);
    r.write(a).await;
    r.write(b).await;
    let _count = r.read().await.unwrap();
    let _def = r.read().await.unwrap();
    let _eof = r.read().await.unwrap();
    let row = r.read().await.unwrap();
    assert_eq!(&row[1..], body.to_string().as_bytes());
}

/// Random garbage after login and instead of login: never a panic, the server
/// keeps answering.
#[tokio::test]
async fn fuzz_random_packets() {
    let srv = start_server().await;
    let mut x: u64 = 0x9e3779b97f4a7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..300 {
        let len = (next() % 64) as usize;
        let mut p: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if round % 2 == 0 && !p.is_empty() {
            // bias towards real commands
            p[0] = [0x03, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x04, 0x02, 0x1c][(next() % 10) as usize];
        }
        if round % 10 == 0 {
            // garbage as the handshake response
            let mut raw = Raw::connect(srv.port).await;
            raw.read().await.unwrap();
            raw.write(&p).await;
            let _ = tokio::time::timeout(std::time::Duration::from_secs(2), raw.read()).await;
            continue;
        }
        let (mut r, _) = Raw::login(srv.port, "root", "rootpw", CAPS).await;
        r.command(&p).await;
        if p.first() == Some(&0x01) {
            continue; // COM_QUIT
        }
        r.command(b"\x0e").await;
        // Drain until the ping's OK shows up (garbage may have produced replies).
        let mut ok = false;
        for _ in 0..50 {
            match tokio::time::timeout(std::time::Duration::from_secs(5), r.read()).await {
                Ok(Some(pk)) if pk.len() == 7 && pk[0] == 0 => {
                    ok = true;
                    break;
                }
                Ok(Some(_)) => continue,
                _ => break,
            }
        }
        assert!(ok, "round {round}: no answer to ping after {p:?}");
    }
    let mut c = mysql_async::Conn::new(opts(srv.port, "root", "rootpw")).await.unwrap();
    mysql_async::prelude::Queryable::ping(&mut c).await.unwrap();
}
