//! A connection's socket: TCP, or a Unix-domain socket for API nodes on the
//! same host (`RuntimeOptions::unix_socket`). A local SQL node reaches its data
//! node through the file system instead of the loopback TCP stack: the same
//! frames, but no TCP segment and acknowledgement processing per message,
//! which on a small machine is a visible share of both processes' CPU.

use mio::event::Source;
use mio::net::{TcpStream, UnixStream};
use mio::{Interest, Registry, Token};
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};

pub(crate) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    /// An API node in this process (`DataNodeHandle::connect_local`). Not
    /// registered with mio: the pipe reports activity through the loop's
    /// `LocalReady` instead.
    Local(norr_transport::local_pipe::NodeEnd),
}

/// Who is on the other end, for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Peer {
    Tcp(SocketAddr),
    /// Unix-socket peers have no useful address; the API node id names them.
    Unix,
    /// An API node in this process.
    Local,
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Peer::Tcp(a) => write!(f, "{a}"),
            Peer::Unix => write!(f, "unix socket"),
            Peer::Local => write!(f, "in-process link"),
        }
    }
}

impl Stream {
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.shutdown(how),
            Stream::Unix(s) => s.shutdown(how),
            Stream::Local(s) => {
                s.shutdown();
                Ok(())
            }
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
            Stream::Local(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
            Stream::Local(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            Stream::Unix(s) => s.flush(),
            Stream::Local(s) => s.flush(),
        }
    }
}

impl Source for Stream {
    fn register(&mut self, registry: &Registry, token: Token, interests: Interest) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.register(registry, token, interests),
            Stream::Unix(s) => s.register(registry, token, interests),
            Stream::Local(_) => Ok(()),
        }
    }
    fn reregister(&mut self, registry: &Registry, token: Token, interests: Interest) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.reregister(registry, token, interests),
            Stream::Unix(s) => s.reregister(registry, token, interests),
            Stream::Local(_) => Ok(()),
        }
    }
    fn deregister(&mut self, registry: &Registry) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.deregister(registry),
            Stream::Unix(s) => s.deregister(registry),
            Stream::Local(_) => Ok(()),
        }
    }
}

/// Bind a Unix-socket listener at `path`. A socket file left by a node that
/// is gone (nothing accepts on it) is replaced; one a live process still
/// listens on is an error, so two nodes never share a path.
pub(crate) fn bind_unix(path: &std::path::Path) -> io::Result<std::os::unix::net::UnixListener> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("{}: another process is listening on this socket", path.display()),
                ));
            }
            std::fs::remove_file(path)?;
        }
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{}: exists and is not a socket; not replacing it", path.display()),
            ))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let l = std::os::unix::net::UnixListener::bind(path)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot listen on {}: {e}", path.display())))?;
    l.set_nonblocking(true)?;
    Ok(l)
}
