//! The FS block of the production host (`block::FS`, NDB's NDBFS): real
//! files under the node's data directory, done by one IO thread so the
//! event loop never waits for a disk.
//!
//! * [`FsBlock`] (registered at `block::FS` instance 0) hands every
//!   `FsSignal::Req` to the IO thread, in arrival order.
//! * The IO thread executes requests one at a time (so requests on one file
//!   are done in the order they were sent, as `norr_signals::fs` promises),
//!   with positional reads and writes, `fdatasync`, and a directory fsync
//!   after every create, remove and rename (so they are durable on reply).
//! * Completions go into [`FsCompletions`]; the event loop drains them into
//!   the scheduler every round (`EventLoop::deliver_fs_completions`) and the
//!   IO thread wakes it through the mio waker when it may be asleep.
//!
//! Errors: a path that is absolute, empty, has `..`, `.` or empty
//! components is `BadPath`; ENOSPC is `NoSpace`; a data directory that was
//! removed or replaced under the node is `DirectoryGone` (checked before
//! every request but plain reads and unsynced writes, so at the latest at the
//! next GCP's sync).
//!
//! Startup checks for `norr datad --data-dir`: [`open_data_dir`] takes the
//! directory's lock (`flock` on `norr.lock`; a second process is refused
//! with the holder's pid) and checks or writes the VERSION file (a newer
//! format is refused with a clear message).

use norr_kernel::{Block, BlockRef, Ctx, Envelope, Priority};
use norr_signals::fs::{FileHandle, FsError, FsErrorKind, FsOp, FsResult, FsSignal};
use norr_signals::{block, Signal};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

/// Largest read served at once (a larger `len` is cut: the caller reads on).
pub const MAX_READ_BYTES: u32 = 64 << 20;

/// Completed requests waiting for the event loop.
pub struct FsCompletions {
    queue: Mutex<Vec<norr_signals::Envelope>>,
    /// `queue` may be non-empty (checked without the lock).
    pending: AtomicBool,
    waker: Arc<mio::Waker>,
}

impl FsCompletions {
    pub(crate) fn new(waker: Arc<mio::Waker>) -> Arc<FsCompletions> {
        Arc::new(FsCompletions { queue: Mutex::new(Vec::new()), pending: AtomicBool::new(false), waker })
    }

    fn push(&self, env: norr_signals::Envelope) {
        self.queue.lock().unwrap_or_else(|e| e.into_inner()).push(env);
        // Wake only on the false -> true edge: one eventfd write per batch
        // of completions the loop has not yet looked at. The loop clears
        // `pending` before it takes the queue, so no completion is missed.
        if !self.pending.swap(true, Ordering::SeqCst) {
            if let Err(e) = self.waker.wake() {
                tracing::warn!("FS: waking the event loop failed: {e}");
            }
        }
    }

    pub(crate) fn has_work(&self) -> bool {
        self.pending.load(Ordering::SeqCst)
    }

    /// Move the completions into `out` (in completion order).
    pub(crate) fn take(&self, out: &mut Vec<norr_signals::Envelope>) {
        self.pending.store(false, Ordering::SeqCst);
        out.append(&mut self.queue.lock().unwrap_or_else(|e| e.into_inner()));
    }
}

struct Job {
    reply_to: BlockRef,
    me: BlockRef,
    req_id: u64,
    op: FsOp,
}

/// The FS block: forwards requests to the IO thread.
pub struct FsBlock {
    tx: mpsc::Sender<Job>,
}

impl Block<Signal> for FsBlock {
    fn on_signal(&mut self, env: Envelope<Signal>, ctx: &mut Ctx<'_, Signal>) {
        let Signal::Fs(fs) = env.signal else {
            tracing::warn!(signal = env.signal.name(), from = %env.from, "FS block got a non-FS signal; dropped");
            return;
        };
        match *fs {
            FsSignal::Req { req_id, op } => {
                let job = Job { reply_to: env.from, me: ctx.self_ref(), req_id, op };
                if let Err(mpsc::SendError(job)) = self.tx.send(job) {
                    // The IO thread is gone (it panicked): fail the request.
                    let error = FsError {
                        kind: FsErrorKind::Io,
                        path: String::new(),
                        offset: None,
                        message: "the FS IO thread has stopped".into(),
                    };
                    ctx.send(job.reply_to, Signal::Fs(Box::new(FsSignal::Ref { req_id: job.req_id, error })));
                }
            }
            other => tracing::warn!(?other, "FS block got a reply signal; dropped"),
        }
    }
}

/// Start the IO thread for `data_dir` and return the block to register.
/// The thread ends when the block is dropped (with the scheduler).
pub fn start_fs(data_dir: PathBuf, completions: Arc<FsCompletions>) -> io::Result<FsBlock> {
    let mut exec = FsExecutor::new(data_dir)?;
    let (tx, rx) = mpsc::channel::<Job>();
    std::thread::Builder::new().name("norr-fs".into()).spawn(move || {
        while let Ok(job) = rx.recv() {
            let signal = match exec.execute(job.op) {
                Ok(result) => FsSignal::Conf { req_id: job.req_id, result },
                Err(error) => FsSignal::Ref { req_id: job.req_id, error },
            };
            completions.push(Envelope {
                from: job.me,
                to: job.reply_to,
                prio: Priority::B,
                signal: Signal::Fs(Box::new(signal)),
            });
        }
    })?;
    Ok(FsBlock { tx })
}

pub use norr_signals::fs::check_path;

/// Executes requests on real files (the IO thread's state; usable directly
/// in tests).
pub struct FsExecutor {
    dir: PathBuf,
    /// (device, inode) of the data directory at start.
    dir_id: (u64, u64),
    files: HashMap<FileHandle, (File, String)>,
    next_handle: FileHandle,
}

fn fs_err(kind: FsErrorKind, path: &str, offset: Option<u64>, message: impl Into<String>) -> FsError {
    FsError { kind, path: path.to_string(), offset, message: message.into() }
}

fn from_io(e: &io::Error, path: &str, offset: Option<u64>) -> FsError {
    let kind = match e.kind() {
        io::ErrorKind::NotFound => FsErrorKind::NotFound,
        io::ErrorKind::StorageFull => FsErrorKind::NoSpace,
        _ if e.raw_os_error() == Some(libc::ENOSPC) || e.raw_os_error() == Some(libc::EDQUOT) => FsErrorKind::NoSpace,
        _ => FsErrorKind::Io,
    };
    fs_err(kind, path, offset, e.to_string())
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

impl FsExecutor {
    pub fn new(dir: PathBuf) -> io::Result<FsExecutor> {
        let m = std::fs::metadata(&dir)?;
        if !m.is_dir() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} is not a directory", dir.display())));
        }
        Ok(FsExecutor { dir, dir_id: (m.dev(), m.ino()), files: HashMap::new(), next_handle: 1 })
    }

    fn check_dir(&self, path: &str) -> Result<(), FsError> {
        match std::fs::metadata(&self.dir) {
            Ok(m) if (m.dev(), m.ino()) == self.dir_id => Ok(()),
            Ok(_) => Err(fs_err(
                FsErrorKind::DirectoryGone,
                path,
                None,
                format!("the data directory {} was replaced under the running node", self.dir.display()),
            )),
            Err(e) => Err(fs_err(
                FsErrorKind::DirectoryGone,
                path,
                None,
                format!("the data directory {} is gone: {e}", self.dir.display()),
            )),
        }
    }

    fn full(&self, path: &str) -> Result<PathBuf, FsError> {
        check_path(path).map_err(|m| fs_err(FsErrorKind::BadPath, path, None, m))?;
        Ok(self.dir.join(path))
    }

    fn file(&self, h: FileHandle) -> Result<&(File, String), FsError> {
        self.files.get(&h).ok_or_else(|| {
            fs_err(FsErrorKind::BadHandle, &format!("<handle {h}>"), None, "no open file with this handle")
        })
    }

    /// Create the missing directories above `full` (each made durable in its
    /// parent).
    fn make_parents(&self, full: &Path, path: &str) -> Result<(), FsError> {
        let Some(parent) = full.parent() else { return Ok(()) };
        let mut missing = Vec::new();
        let mut p = parent;
        while !p.exists() && p.starts_with(&self.dir) && p != self.dir {
            missing.push(p.to_path_buf());
            p = match p.parent() {
                Some(pp) => pp,
                None => break,
            };
        }
        for d in missing.iter().rev() {
            match std::fs::create_dir(d) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(from_io(&e, path, None)),
            }
            if let Some(pp) = d.parent() {
                sync_dir(pp).map_err(|e| from_io(&e, path, None))?;
            }
        }
        Ok(())
    }

    pub fn execute(&mut self, op: FsOp) -> Result<FsResult, FsError> {
        match op {
            FsOp::Open { path, create, truncate } => {
                self.check_dir(&path)?;
                let full = self.full(&path)?;
                if create {
                    self.make_parents(&full, &path)?;
                }
                let existed = full.exists();
                let f = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(create)
                    .truncate(truncate)
                    .open(&full)
                    .map_err(|e| from_io(&e, &path, None))?;
                if !existed || truncate {
                    // A new file's directory entry, and an emptied file's size,
                    // are durable when the reply comes.
                    f.sync_all().map_err(|e| from_io(&e, &path, None))?;
                    if let Some(parent) = full.parent() {
                        sync_dir(parent).map_err(|e| from_io(&e, &path, None))?;
                    }
                }
                let size = f.metadata().map_err(|e| from_io(&e, &path, None))?.len();
                let h = self.next_handle;
                self.next_handle = self.next_handle.wrapping_add(1).max(1);
                self.files.insert(h, (f, path));
                Ok(FsResult::Opened { file: h, size })
            }
            FsOp::Write { file, offset, data, sync } => {
                if sync {
                    let path = self.file(file)?.1.clone();
                    self.check_dir(&path)?;
                }
                let (f, path) = self.file(file)?;
                let old_len = f.metadata().map_err(|e| from_io(&e, path, Some(offset)))?.len();
                if let Err(e) = f.write_all_at(&data, offset) {
                    let err = from_io(&e, path, Some(offset));
                    // A failed extending write leaves no partial tail behind.
                    if offset + data.len() as u64 > old_len {
                        let _ = f.set_len(old_len.max(offset.min(old_len)));
                    }
                    return Err(err);
                }
                if sync {
                    f.sync_data().map_err(|e| from_io(&e, path, Some(offset)))?;
                }
                Ok(FsResult::Written)
            }
            FsOp::Read { file, offset, len } => {
                let (f, path) = self.file(file)?;
                let size = f.metadata().map_err(|e| from_io(&e, path, Some(offset)))?.len();
                let want = (len.min(MAX_READ_BYTES) as u64).min(size.saturating_sub(offset)) as usize;
                let mut data = vec![0u8; want];
                let mut got = 0;
                while got < want {
                    match f.read_at(&mut data[got..], offset + got as u64) {
                        Ok(0) => break,
                        Ok(n) => got += n,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(from_io(&e, path, Some(offset + got as u64))),
                    }
                }
                data.truncate(got);
                Ok(FsResult::Read { data })
            }
            FsOp::Sync { file } => {
                let path = self.file(file)?.1.clone();
                self.check_dir(&path)?;
                let (f, path) = self.file(file)?;
                f.sync_data().map_err(|e| from_io(&e, path, None))?;
                Ok(FsResult::Synced)
            }
            FsOp::Close { file } => {
                self.files.remove(&file).ok_or_else(|| {
                    fs_err(FsErrorKind::BadHandle, &format!("<handle {file}>"), None, "no open file with this handle")
                })?;
                Ok(FsResult::Closed)
            }
            FsOp::Remove { path } => {
                self.check_dir(&path)?;
                let full = self.full(&path)?;
                let r = match std::fs::symlink_metadata(&full) {
                    Ok(m) if m.is_dir() => std::fs::remove_dir(&full),
                    Ok(_) => std::fs::remove_file(&full),
                    Err(e) => Err(e),
                };
                match r {
                    Ok(()) => {
                        if let Some(parent) = full.parent() {
                            sync_dir(parent).map_err(|e| from_io(&e, &path, None))?;
                        }
                        Ok(FsResult::Done)
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(FsResult::Done),
                    Err(e) => Err(from_io(&e, &path, None)),
                }
            }
            FsOp::Rename { from, to } => {
                self.check_dir(&from)?;
                let (f, t) = (self.full(&from)?, self.full(&to)?);
                self.make_parents(&t, &to)?;
                std::fs::rename(&f, &t).map_err(|e| from_io(&e, &from, None))?;
                for d in [t.parent(), f.parent()].into_iter().flatten() {
                    sync_dir(d).map_err(|e| from_io(&e, &to, None))?;
                }
                Ok(FsResult::Done)
            }
            FsOp::List { dir } => {
                self.check_dir(&dir)?;
                let full = self.full(&dir)?;
                let mut names = Vec::new();
                match std::fs::read_dir(&full) {
                    Ok(rd) => {
                        for e in rd {
                            let e = e.map_err(|e| from_io(&e, &dir, None))?;
                            names.push(e.file_name().to_string_lossy().into_owned());
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(from_io(&e, &dir, None)),
                }
                names.sort();
                Ok(FsResult::Listed { names })
            }
        }
    }
}

/// Why a data directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    #[error("data directory {dir} is in use by another process (pid {pid}); stop it first, or give this node another --data-dir")]
    Locked { dir: String, pid: String },
    #[error("data directory {dir}: {message}")]
    Format { dir: String, message: String },
    #[error("data directory {dir}: {error}")]
    Io { dir: String, error: io::Error },
}

/// A data directory this process owns; the lock is released when dropped
/// (or when the process dies: it is an `flock`).
#[derive(Debug)]
pub struct DataDirLock {
    dir: PathBuf,
    _lock: File,
    pub version: norr_durability::layout::VersionInfo,
    /// The directory was created or was empty: a node's first start.
    pub fresh: bool,
}

impl DataDirLock {
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

/// Open (creating it if needed) and lock a data directory for `node_id`,
/// then check its VERSION file (written on a first start).
pub fn open_data_dir(dir: &Path, node_id: u16) -> Result<DataDirLock, DataDirError> {
    use norr_durability::layout::{decode_version, encode_version, LOCK_FILE, VERSION_FILE};
    use std::io::{Read, Seek, Write};
    let name = dir.display().to_string();
    let io_err = |error: io::Error| DataDirError::Io { dir: name.clone(), error };
    std::fs::create_dir_all(dir).map_err(io_err)?;
    let mut lock = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.join(LOCK_FILE))
        .map_err(io_err)?;
    // SAFETY: flock on a file descriptor we own and keep open in `lock`;
    // it has no memory effects.
    let r = unsafe { libc::flock(std::os::unix::io::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX | libc::LOCK_NB) };
    if r != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            let mut pid = String::new();
            let _ = lock.read_to_string(&mut pid);
            let pid = pid.trim().to_string();
            return Err(DataDirError::Locked { dir: name, pid: if pid.is_empty() { "unknown".into() } else { pid } });
        }
        return Err(io_err(e));
    }
    lock.set_len(0).map_err(io_err)?;
    lock.seek(io::SeekFrom::Start(0)).map_err(io_err)?;
    writeln!(lock, "{}", std::process::id()).map_err(io_err)?;
    let vpath = dir.join(VERSION_FILE);
    match std::fs::read(&vpath) {
        Ok(bytes) => {
            let version = decode_version(&bytes)
                .map_err(|e| DataDirError::Format { dir: name.clone(), message: e.to_string() })?;
            if version.node_id != node_id {
                return Err(DataDirError::Format {
                    dir: name,
                    message: format!(
                        "it belongs to node {}, not node {node_id}: give each node its own data directory",
                        version.node_id
                    ),
                });
            }
            Ok(DataDirLock { dir: dir.to_path_buf(), _lock: lock, version, fresh: false })
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let others = std::fs::read_dir(dir)
                .map_err(io_err)?
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name() != LOCK_FILE)
                .count();
            if others > 0 {
                return Err(DataDirError::Format {
                    dir: name,
                    message: format!("it holds files but no {VERSION_FILE} file: not a NorrDB data directory (or damaged); use an empty directory"),
                });
            }
            let bytes = encode_version(node_id, env!("CARGO_PKG_VERSION"));
            let tmp = dir.join("VERSION.tmp");
            let mut f = File::create(&tmp).map_err(io_err)?;
            f.write_all(&bytes).map_err(io_err)?;
            f.sync_all().map_err(io_err)?;
            std::fs::rename(&tmp, &vpath).map_err(io_err)?;
            sync_dir(dir).map_err(io_err)?;
            let version =
                decode_version(&bytes).map_err(|e| DataDirError::Format { dir: name, message: e.to_string() })?;
            Ok(DataDirLock { dir: dir.to_path_buf(), _lock: lock, version, fresh: true })
        }
        Err(e) => Err(io_err(e)),
    }
}

/// Register the FS block for `data_dir` in `sched` (the host calls this
/// when `RuntimeOptions::data_dir` is set).
pub(crate) fn register(
    sched: &mut norr_kernel::Scheduler<Signal>,
    data_dir: &Path,
    completions: Arc<FsCompletions>,
) -> io::Result<()> {
    let b = start_fs(data_dir.to_path_buf(), completions)?;
    sched.add_block(block::FS, 0, Box::new(b));
    Ok(())
}

#[cfg(test)]
mod tests;
