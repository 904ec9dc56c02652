//! COM_QUERY results, OK packets, status flags, errors, multi-statements,
//! COM_FIELD_LIST, prepared statements with every type.

mod protocol_support;
use mysql_async::prelude::*;
use mysql_async::{Row, Value as MV};
use protocol_support::*;

async fn conn(port: u16) -> mysql_async::Conn {
    mysql_async::Conn::new(opts(port, "root", "rootpw")).await.unwrap()
}

fn texts(row: &Row) -> Vec<Option<String>> {
    row.clone()
        .unwrap()
        .into_iter()
        .map(|v| match v {
            MV::NULL => None,
            MV::Bytes(b) => Some(String::from_utf8_lossy(&b).into_owned()),
            other => Some(format!("{other:?}")),
        })
        .collect()
}

const EXPECTED_TEXT: [&str; 19] = [
    "-128",
    "-32768",
    "8388607",
    "-2147483648",
    "18446744073709551615",
    "-9223372036854775808",
    "1.5",
    "0.30000000000000004",
    "1e20",
    "-123.45",
    "héllo",
    "\u{0}\u{1}\u{2}\u{FFFD}",
    "2024-02-29",
    "2024-02-29 13:05:09",
    "2024-02-29 13:05:09.123456",
    "2024-02-29 13:05:09.123",
    "838:59:59",
    "-25:00:00.500000",
    "2024",
];

#[tokio::test]
async fn text_results_every_type() {
    let srv = start_server().await;
    let mut c = conn(srv.port).await;
    let rows: Vec<Row> = c.query("select types").await.unwrap();
    assert_eq!(rows.len(), 1);
    let t = texts(&rows[0]);
    for (i, e) in EXPECTED_TEXT.iter().enumerate() {
        assert_eq!(t[i].as_deref(), Some(*e), "column {i}");
    }
    assert_eq!(t[19], None);
    // Column metadata survives.
    let cols = rows[0].columns_ref();
    assert_eq!(cols[0].name_str(), "tiny");
    assert_eq!(cols[0].table_str(), "t");
    assert_eq!(cols[0].schema_str(), "test");
    assert_eq!(cols[9].decimals(), 2);
    assert_eq!(cols[9].column_type(), mysql_async::consts::ColumnType::MYSQL_TYPE_NEWDECIMAL);
    assert!(cols[4].flags().contains(mysql_async::consts::ColumnFlags::UNSIGNED_FLAG));
    // Big and empty result sets.
    let rows: Vec<(i64, String)> = c.query("select many").await.unwrap();
    assert_eq!(rows.len(), 10_000);
    assert_eq!(rows[9999], (9999, "row-9999".to_string()));
    let rows: Vec<i64> = c.query("select empty").await.unwrap();
    assert!(rows.is_empty());
}

#[tokio::test]
async fn ok_packets_status_and_errors() {
    let srv = start_server().await;
    let mut c = conn(srv.port).await;
    c.query_drop("insert").await.unwrap();
    assert_eq!(c.affected_rows(), 3);
    assert_eq!(c.last_insert_id(), Some(42));
    assert_eq!(c.info(), "Records: 3  Duplicates: 0  Warnings: 0");
    c.query_drop("warn").await.unwrap();
    assert_eq!(c.get_warnings(), 1);
    use mysql_async::consts::StatusFlags as S;
    c.query_drop("begin").await.unwrap();
    let st = c.last_ok_packet().unwrap().status_flags();
    assert!(st.contains(S::SERVER_STATUS_IN_TRANS) && st.contains(S::SERVER_STATUS_AUTOCOMMIT));
    c.query_drop("commit").await.unwrap();
    let st = c.last_ok_packet().unwrap().status_flags();
    assert!(!st.contains(S::SERVER_STATUS_IN_TRANS));
    c.query_drop("set autocommit=0").await.unwrap();
    let st = c.last_ok_packet().unwrap().status_flags();
    assert!(!st.contains(S::SERVER_STATUS_AUTOCOMMIT));

    for (q, code, state) in
        [("error", 1146, "42S02"), ("dup", 1062, "23000"), ("selectt 1", 1064, "42000"), ("", 1065, "42000")]
    {
        let e = c.query_drop(q).await.err().unwrap();
        let (gc, gs, _) = server_error(e);
        assert_eq!((gc, gs.as_str()), (code, state), "{q}");
    }
    // The connection survives errors.
    let v: Vec<i64> = c.query("select 1").await.unwrap();
    assert_eq!(v, vec![1]);
}

#[tokio::test]
async fn multi_statements() {
    let srv = start_server().await;
    let mut c = conn(srv.port).await; // mysql_async sets CLIENT_MULTI_STATEMENTS
    let mut r = c.query_iter("select 1; insert; select types").await.unwrap();
    let a: Vec<Row> = r.collect().await.unwrap();
    assert_eq!(a.len(), 1);
    let b: Vec<Row> = r.collect().await.unwrap();
    assert!(b.is_empty());
    assert_eq!(r.affected_rows(), 3);
    let t: Vec<Row> = r.collect().await.unwrap();
    assert_eq!(t.len(), 1);
    drop(r);
    // An error stops the batch; earlier results are delivered.
    let mut r = c.query_iter("select 1; error; select 1").await.unwrap();
    let a: Vec<Row> = r.collect().await.unwrap();
    assert_eq!(a.len(), 1);
    let e = r.collect::<Row>().await.err().unwrap();
    assert_eq!(server_error(e).0, 1146);
    drop(r);
    let v: Vec<i64> = c.query("select 1").await.unwrap();
    assert_eq!(v, vec![1]);
}

#[tokio::test]
async fn prepared_round_trip_mysql_async() {
    let srv = start_server().await;
    let mut c = conn(srv.port).await;
    let params: Vec<MV> = vec![
        MV::Int(-5),
        MV::Int(i64::MAX),
        MV::UInt(u64::MAX),
        MV::Float(2.5),
        MV::Double(-1.25e-9),
        MV::Bytes(b"text \x00 with nul".to_vec()),
        MV::Bytes(vec![0xff; 70_000]),
        MV::Date(2023, 12, 31, 0, 0, 0, 0),
        MV::Date(2023, 12, 31, 23, 59, 58, 999_999),
        MV::Time(true, 1, 2, 3, 4, 5),
        MV::Time(false, 0, 0, 0, 0, 0),
        MV::NULL,
    ];
    let sql = format!("select {}", vec!["?"; params.len()].join(", "));
    let stmt = c.prep(&sql).await.unwrap();
    assert_eq!(stmt.num_params() as usize, params.len());
    for _ in 0..3 {
        let rows: Vec<Row> = c.exec(&stmt, params.clone()).await.unwrap();
        let got = rows[0].clone().unwrap();
        for (i, (g, p)) in got.iter().zip(&params).enumerate() {
            let want = match p {
                // DATETIME at midnight comes back as a date-length value.
                MV::Date(y, m, d, 0, 0, 0, 0) => MV::Date(*y, *m, *d, 0, 0, 0, 0),
                other => other.clone(),
            };
            assert_eq!(g, &want, "param {i}");
        }
    }
    // Binary result of every column type.
    let rows: Vec<Row> = c.exec("select types", ()).await.unwrap();
    let v = rows[0].clone().unwrap();
    assert_eq!(v[0], MV::Int(-128));
    assert_eq!(v[1], MV::Int(-32768));
    assert_eq!(v[2], MV::Int(8388607));
    assert_eq!(v[3], MV::Int(-2147483648));
    assert_eq!(v[4], MV::UInt(u64::MAX));
    assert_eq!(v[5], MV::Int(i64::MIN));
    assert_eq!(v[6], MV::Float(1.5));
    assert_eq!(v[7], MV::Double(0.1 + 0.2));
    assert_eq!(v[8], MV::Double(1e20));
    assert_eq!(v[9], MV::Bytes(b"-123.45".to_vec()));
    assert_eq!(v[10], MV::Bytes("héllo".as_bytes().to_vec()));
    assert_eq!(v[11], MV::Bytes(vec![0, 1, 2, 255]));
    assert_eq!(v[12], MV::Date(2024, 2, 29, 0, 0, 0, 0));
    assert_eq!(v[13], MV::Date(2024, 2, 29, 13, 5, 9, 0));
    assert_eq!(v[14], MV::Date(2024, 2, 29, 13, 5, 9, 123456));
    assert_eq!(v[15], MV::Date(2024, 2, 29, 13, 5, 9, 123456));
    assert_eq!(v[16], MV::Time(false, 34, 22, 59, 59, 0));
    assert_eq!(v[17], MV::Time(true, 1, 1, 0, 0, 500_000));
    assert!(v[18] == MV::UInt(2024) || v[18] == MV::Int(2024), "{:?}", v[18]);
    assert_eq!(v[19], MV::NULL);
    // Prepared OK results and errors.
    c.exec_drop("insert ?, ?", (1, 2)).await.unwrap();
    assert_eq!(c.affected_rows(), 2);
    assert_eq!(c.last_insert_id(), Some(7));
    let e = c.prep("bogus").await.err().unwrap();
    assert_eq!(server_error(e).0, 1064);
    c.close(stmt).await.unwrap();
    let v: Vec<i64> = c.query("select 1").await.unwrap();
    assert_eq!(v, vec![1]);
}

#[tokio::test]
async fn field_list_and_statistics() {
    let srv = start_server().await;
    let (mut r, _) = Raw::login(srv.port, "root", "rootpw", CAPS).await;
    r.command(b"\x04t\0").await;
    for name in ["tiny", "short", "int24"] {
        let p = r.read().await.unwrap();
        assert!(p.windows(name.len()).any(|w| w == name.as_bytes()), "{p:?}");
        assert_eq!(*p.last().unwrap(), 0xfb); // default value: NULL
    }
    assert_eq!(r.read().await.unwrap()[0], 0xfe);
    r.command(b"\x04nope\0").await;
    assert_eq!(err_of(&r.read().await.unwrap()).0, 1146);
    r.command(b"\x09").await;
    assert!(r.read().await.unwrap().starts_with(b"Uptime: "));
}
