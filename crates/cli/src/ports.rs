//! The ports `norr up` listens on: each is bound (or, for a port a child
//! process binds, checked) before anything reports success, and a busy one
//! fails the start with one error that names the port, the process holding
//! it where /proc shows it, and the flag that picks another.

use std::net::{SocketAddr, TcpListener};

/// One port `norr up` needs: where, what for, and the flag that moves it.
#[derive(Debug, Clone, Copy)]
pub struct Port {
    pub addr: SocketAddr,
    /// What listens there, e.g. "SQL node, MySQL protocol".
    pub what: &'static str,
    /// The `norr up` flag that picks another port, e.g. "--sql-port".
    pub flag: &'static str,
}

impl Port {
    /// Bind the port and keep it: nothing else can take it until the
    /// listener is dropped.
    pub fn bind(self) -> anyhow::Result<TcpListener> {
        TcpListener::bind(self.addr).map_err(|e| self.error(&e))
    }

    /// Check that the port is free now (a child process binds it later).
    /// Port 0 (any free port) is always free.
    pub fn check(self) -> anyhow::Result<()> {
        if self.addr.port() == 0 {
            return Ok(());
        }
        self.bind().map(drop)
    }

    /// The error for a failed bind of this port: for a port in use, which
    /// process holds it and which flag picks another.
    pub fn error(self, e: &std::io::Error) -> anyhow::Error {
        let port = self.addr.port();
        if e.kind() == std::io::ErrorKind::AddrInUse {
            let holder = match listeners_of(port) {
                Some(v) if !v.is_empty() => format!("by {}", v.join(", ")),
                // The socket is there but no /proc/PID/fd we may read
                // names it: another user's process, or one in another
                // network namespace's view.
                _ => "by a process this user cannot see (another user's?)".to_string(),
            };
            anyhow::anyhow!(
                "port {port} ({}, {}) is already in use {holder}; choose another port with {} (nothing was started)",
                self.what,
                self.addr,
                self.flag
            )
        } else {
            anyhow::anyhow!(
                "cannot listen on {} ({}): {e}; choose another port with {}",
                self.addr,
                self.what,
                self.flag
            )
        }
    }
}

/// The processes with a listening TCP socket on `port` (any address, IPv4
/// or IPv6), as "pid N (command line)". None when /proc cannot be read.
pub fn listeners_of(port: u16) -> Option<Vec<String>> {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else { continue };
        inodes.extend(listening_inodes(&text, port));
    }
    if inodes.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(fds) = std::fs::read_dir(e.path().join("fd")) else { continue };
        let holds = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|l| {
                let l = l.to_string_lossy();
                l.strip_prefix("socket:[")
                    .and_then(|r| r.strip_suffix(']'))
                    .and_then(|n| n.parse::<u64>().ok())
                    .is_some_and(|n| inodes.contains(&n))
            })
        });
        if holds {
            out.push(format!("pid {pid} ({})", command_line(pid)));
        }
    }
    Some(out)
}

/// The inodes of the sockets in LISTEN state on `port` in a
/// /proc/net/tcp{,6} table: "sl local_address rem_address st ... inode",
/// the address as HEX_IP:HEX_PORT and LISTEN as state 0A.
fn listening_inodes(table: &str, port: u16) -> Vec<u64> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let local_port = f.get(1)?.rsplit_once(':').and_then(|(_, p)| u16::from_str_radix(p, 16).ok())?;
            (local_port == port && *f.get(3)? == "0A").then(|| f.get(9)?.parse().ok())?
        })
        .collect()
}

/// A process's command line, shortened for one error line.
fn command_line(pid: u32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let mut s: String =
        raw.split(|&b| b == 0).filter(|a| !a.is_empty()).map(String::from_utf8_lossy).collect::<Vec<_>>().join(" ");
    if s.is_empty() {
        s = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default().trim().to_string();
    }
    // One line, whatever the arguments hold.
    s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.chars().count() > 80 {
        s = s.chars().take(77).collect::<String>() + "...";
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listening_sockets_are_found_by_port_and_state() {
        // Port 3306 (0x0CEA) listening, the same port as a connection's
        // remote end, and another port listening.
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:0CEA 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0
   1: 0100007F:9C40 0100007F:0CEA 01 00000000:00000000 00:00000000 00000000  1000        0 4343 1 0000000000000000 20 4 30 10 -1
   2: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4444 1 0000000000000000 100 0 0 10 0";
        assert_eq!(listening_inodes(table, 3306), vec![4242]);
        assert_eq!(listening_inodes(table, 8080), vec![4444]);
        assert!(listening_inodes(table, 40000).is_empty());
    }

    #[test]
    fn a_busy_port_names_its_holder_and_the_flag() {
        let held = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = held.local_addr().unwrap();
        let port = Port { addr, what: "SQL node, MySQL protocol", flag: "--sql-port" };
        let e = port.check().unwrap_err().to_string();
        assert!(e.contains(&format!("port {}", addr.port())), "{e}");
        assert!(e.contains("--sql-port"), "{e}");
        assert!(e.contains(&format!("pid {}", std::process::id())), "{e}");
        drop(held);
    }
}
