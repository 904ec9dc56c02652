//! Where the processes of a cluster find the cluster secret
//! (`norr_transport::auth`): data nodes check it, SQL nodes and clients
//! prove it.
//!
//! The secret never travels through mgmd (its port answers anyone, so what
//! it serves is public): a data node started with `--mgm` learns from mgmd
//! only *whether* the cluster requires it (`[cluster] api_auth`) and reads
//! the secret itself from `--secret-file` or `NORR_CLUSTER_SECRET`. `norr
//! up` keeps one per data directory in `cluster.secret` (owner-only; `--fresh`
//! keeps it, so clients given it go on working) and hands it to every
//! process it starts.

use anyhow::Context;
use norr_transport::auth::{ClusterSecret, SECRET_ENV};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The file in `norr up`'s data directory that holds its secret.
pub const SECRET_FILE: &str = "cluster.secret";

/// `--secret-file FILE` if given, else `NORR_CLUSTER_SECRET`, else None.
pub fn from_flag_or_env(file: Option<&Path>) -> anyhow::Result<Option<ClusterSecret>> {
    match file {
        Some(f) => Ok(Some(ClusterSecret::from_file(f).map_err(anyhow::Error::msg)?)),
        None => ClusterSecret::from_env().map_err(anyhow::Error::msg),
    }
}

/// The message for a data node that must check a secret it was not given.
pub fn missing(what: &str) -> String {
    format!(
        "{what} requires the cluster secret ([cluster] api_auth = \"secret\" or \"account\"), and this process has none: pass \
         --secret-file FILE or set {SECRET_ENV} (mgmd does not hand the secret out)"
    )
}

/// Write `text` to `path` readable by its owner only (also when the file
/// existed with wider permissions): it holds the cluster secret.
pub fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot make {} private", path.display()))?;
    f.write_all(text.as_bytes()).with_context(|| format!("cannot write {}", path.display()))
}

/// `norr up`'s secret for the cluster in `data_root`: the one in its
/// `cluster.secret` (so clients given it keep working across restarts),
/// else a new one written there.
pub fn load_or_create(data_root: &Path) -> anyhow::Result<(ClusterSecret, PathBuf)> {
    std::fs::create_dir_all(data_root)
        .with_context(|| format!("cannot create the data directory {}", data_root.display()))?;
    let path = data_root.join(SECRET_FILE);
    if path.exists() {
        let s = ClusterSecret::from_file(&path)
            .map_err(|e| anyhow::anyhow!("{e} (delete the file and `norr up` writes a new secret)"))?;
        return Ok((s, path));
    }
    let s = ClusterSecret::generate().map_err(anyhow::Error::msg)?;
    write_private(&path, &format!("{}\n", s.expose()))?;
    Ok((s, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn norr_up_keeps_one_private_secret_per_directory() {
        let dir = std::env::temp_dir().join(format!("norr-secret-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (a, path) = load_or_create(&dir).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "owner-only");
        let (b, _) = load_or_create(&dir).unwrap();
        assert_eq!(a, b, "the next start reuses it");
        assert_eq!(from_flag_or_env(Some(&path)).unwrap(), Some(a));
        std::fs::write(&path, "short\n").unwrap();
        let e = load_or_create(&dir).unwrap_err().to_string();
        assert!(e.contains("at least 32") && e.contains("delete the file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
