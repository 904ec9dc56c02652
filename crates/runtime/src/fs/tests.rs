use super::*;
use std::sync::atomic::AtomicU64;

static N: AtomicU64 = AtomicU64::new(0);

/// A fresh directory under the system temp dir, removed on drop.
pub(crate) struct TempDir(pub PathBuf);
impl TempDir {
    pub fn new() -> TempDir {
        let p =
            std::env::temp_dir().join(format!("norr-fs-{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst)));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn open(x: &mut FsExecutor, path: &str, create: bool, truncate: bool) -> Result<(FileHandle, u64), FsError> {
    match x.execute(FsOp::Open { path: path.into(), create, truncate })? {
        FsResult::Opened { file, size } => Ok((file, size)),
        r => panic!("{r:?}"),
    }
}

#[test]
fn files_round_trip() {
    let d = TempDir::new();
    let mut x = FsExecutor::new(d.0.clone()).unwrap();
    assert_eq!(open(&mut x, "redo/part-0/file-0", false, false).unwrap_err().kind, FsErrorKind::NotFound);
    let (h, size) = open(&mut x, "redo/part-0/file-0", true, false).unwrap();
    assert_eq!(size, 0);
    x.execute(FsOp::Write { file: h, offset: 4096, data: vec![7; 100], sync: true }).unwrap();
    assert_eq!(
        x.execute(FsOp::Read { file: h, offset: 4090, len: 1000 }).unwrap(),
        FsResult::Read { data: [vec![0; 6], vec![7; 100]].concat() }
    );
    assert_eq!(x.execute(FsOp::Read { file: h, offset: 9000, len: 10 }).unwrap(), FsResult::Read { data: vec![] });
    assert_eq!(x.execute(FsOp::Sync { file: h }).unwrap(), FsResult::Synced);
    assert_eq!(x.execute(FsOp::Close { file: h }).unwrap(), FsResult::Closed);
    assert_eq!(x.execute(FsOp::Sync { file: h }).unwrap_err().kind, FsErrorKind::BadHandle);
    let (h2, size) = open(&mut x, "redo/part-0/file-0", false, false).unwrap();
    assert_eq!(size, 4196);
    assert_ne!(h, h2);
    let (_, size) = open(&mut x, "redo/part-0/file-0", false, true).unwrap();
    assert_eq!(size, 0, "truncate empties the file");
    open(&mut x, "schema/schema.tmp", true, false).unwrap();
    x.execute(FsOp::Rename { from: "schema/schema.tmp".into(), to: "schema/schema.dat".into() }).unwrap();
    assert_eq!(
        x.execute(FsOp::List { dir: "schema".into() }).unwrap(),
        FsResult::Listed { names: vec!["schema.dat".into()] }
    );
    assert_eq!(x.execute(FsOp::List { dir: "nothing".into() }).unwrap(), FsResult::Listed { names: vec![] });
    x.execute(FsOp::Remove { path: "schema/schema.dat".into() }).unwrap();
    x.execute(FsOp::Remove { path: "schema/schema.dat".into() }).unwrap(); // missing: no error
    x.execute(FsOp::Remove { path: "schema".into() }).unwrap(); // an empty directory
    assert_eq!(x.execute(FsOp::List { dir: "".into() }).unwrap_err().kind, FsErrorKind::BadPath);
}

#[test]
fn bad_paths_are_refused() {
    let d = TempDir::new();
    let mut x = FsExecutor::new(d.0.clone()).unwrap();
    for p in ["", "/etc/passwd", "../x", "a/../../x", "a//b", "./a", "a/.", "a\0b", "a\\b"] {
        let e = open(&mut x, p, true, false).unwrap_err();
        assert_eq!(e.kind, FsErrorKind::BadPath, "{p:?}");
        assert!(check_path(p).is_err());
    }
    assert!(check_path("lcp/3/0/12.data").is_ok());
}

#[test]
fn a_vanished_data_directory_is_noticed() {
    let d = TempDir::new();
    let dir = d.0.join("data");
    std::fs::create_dir(&dir).unwrap();
    let mut x = FsExecutor::new(dir.clone()).unwrap();
    let (h, _) = open(&mut x, "sys/sysfile.A", true, false).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let e = x.execute(FsOp::Write { file: h, offset: 0, data: vec![1], sync: true }).unwrap_err();
    assert_eq!(e.kind, FsErrorKind::DirectoryGone, "{e}");
    // Replaced by another directory of the same name: noticed too.
    std::fs::create_dir(&dir).unwrap();
    let e = open(&mut x, "sys/sysfile.B", true, false).unwrap_err();
    assert_eq!(e.kind, FsErrorKind::DirectoryGone, "{e}");
}

#[test]
fn data_dir_lock_and_version() {
    let d = TempDir::new();
    let dir = d.0.join("node1");
    let a = open_data_dir(&dir, 1).unwrap();
    assert!(a.fresh);
    assert_eq!(a.version.node_id, 1);
    // A second open (same process here; another process in real use) is refused with the pid.
    let e = open_data_dir(&dir, 1).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, DataDirError::Locked { .. }) && msg.contains(&std::process::id().to_string()), "{msg}");
    drop(a);
    let b = open_data_dir(&dir, 1).unwrap();
    assert!(!b.fresh);
    drop(b);
    // Another node's directory.
    let e = open_data_dir(&dir, 2).unwrap_err().to_string();
    assert!(e.contains("belongs to node 1"), "{e}");
    // A newer format.
    let mut newer = Vec::new();
    norr_durability::frame::seal(
        norr_durability::frame::Kind::Version,
        99,
        b"norrdb data directory format=99 node=1\n",
        &mut newer,
    );
    std::fs::write(dir.join("VERSION"), newer).unwrap();
    let e = open_data_dir(&dir, 1).unwrap_err().to_string();
    assert!(e.contains("format version 99") && e.contains("newer"), "{e}");
    // A directory with files but no VERSION is not taken over.
    let other = d.0.join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("precious.txt"), b"x").unwrap();
    let e = open_data_dir(&other, 1).unwrap_err().to_string();
    assert!(e.contains("no VERSION file"), "{e}");
}

#[test]
fn full_disk_is_no_space() {
    // /dev/full fails every write with ENOSPC.
    let Ok(f) = OpenOptions::new().write(true).open("/dev/full") else { return };
    let e = f.write_all_at(&[1, 2, 3], 0).unwrap_err();
    assert_eq!(from_io(&e, "x", Some(0)).kind, FsErrorKind::NoSpace);
}
