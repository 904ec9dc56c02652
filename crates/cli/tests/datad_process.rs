//! The `norr` binary as a process: `norr datad` serves on loopback and stops
//! cleanly on SIGINT; a bad configuration is a clear error and exit code 1.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const NORR: &str = env!("CARGO_BIN_EXE_norr");

fn hello_frame() -> Vec<u8> {
    // Hello { magic: "NORR", wire_version, client_name: "t" } in postcard:
    // magic u32 varint, version u16 varint (one byte while below 128),
    // string with varint length.
    let mut payload = Vec::new();
    let mut m: u32 = 0x4E4F_5252;
    while m >= 0x80 {
        payload.push((m as u8 & 0x7F) | 0x80);
        m >>= 7;
    }
    payload.push(m as u8);
    let version = norr_signals::wire::WIRE_VERSION;
    assert!(version < 0x80, "a one-byte varint");
    payload.push(version as u8);
    payload.push(1);
    payload.push(b't');
    let mut w = (payload.len() as u32).to_le_bytes().to_vec();
    w.extend_from_slice(&crc32c(&payload).to_le_bytes());
    w.extend_from_slice(&payload);
    w
}

/// CRC-32C (Castagnoli), bitwise: the test needs no crate for it.
fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
        }
    }
    !crc
}

#[test]
fn datad_serves_and_stops_on_sigint() {
    let mut child = Command::new(NORR)
        .args(["datad", "--listen", "127.0.0.1:0", "--data-memory", "64M"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn norr datad");
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let addr = loop {
        let line = lines.next().expect("datad printed its address").unwrap();
        if let Some(rest) = line.split(" listening on ").nth(1) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    // Drain the rest of stderr so the child never blocks on a full pipe.
    let drain = std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>());

    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&hello_frame()).unwrap();
    let mut hdr = [0u8; 8];
    s.read_exact(&mut hdr).unwrap();
    let len = u32::from_le_bytes(hdr[0..4].try_into().unwrap()) as usize;
    let mut reply = vec![0u8; len];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(crc32c(&reply), u32::from_le_bytes(hdr[4..8].try_into().unwrap()));
    assert_eq!(reply[0], 0, "HelloReply::Welcome is variant 0");

    let status = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let t = Instant::now();
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "datad did not stop on SIGINT");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(code.success(), "datad exit status {code}");
    let rest = drain.join().unwrap().join("\n");
    assert!(rest.contains("stopped"), "{rest}");
}

#[test]
fn bad_configuration_is_a_clear_error() {
    let out = Command::new(NORR).args(["datad", "--lock-wait-timeout-ms", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("lock_wait_timeout_ms = 0 is out of range"), "{err}");

    let dir = std::env::temp_dir().join(format!("norr-cli-proc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("bad.toml");
    std::fs::write(&f, "data_memory_bytes = \"lots\"\n").unwrap();
    let out = Command::new(NORR).args(["datad", "--config", f.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("invalid configuration"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();

    let out = Command::new(NORR).args(["datad", "--data-memory", "huge"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "clap usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a size"));

    let out = Command::new(NORR).args(["datad", "--print-config", "--set", "max_scans=7"]).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("max_scans = 7"));
}
