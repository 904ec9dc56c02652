//! TLS for the MySQL protocol (issue 25): the server's certificate (given
//! with --ssl-cert / --ssl-key, or made on first start and kept, as MySQL
//! makes its auto-generated certificates in the data directory), optional
//! client certificates checked against --ssl-ca, and the upgrade of a
//! connection after the client's SSLRequest.
//!
//! rustls with the `ring` provider: a pure-Rust-and-assembly build (no
//! cmake, as aws-lc-rs needs), well kept, and what tokio-rustls wraps.

pub use crate::types::TlsInfo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// File names of a generated certificate, as MySQL names its own.
pub const GENERATED_CERT: &str = "server-cert.pem";
pub const GENERATED_KEY: &str = "server-key.pem";

/// Where the server's certificate comes from.
#[derive(Debug, Clone, Default)]
pub struct TlsSource {
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    pub ca: Option<PathBuf>,
    /// Where a generated certificate is kept (None: made anew, in memory
    /// only, at every start).
    pub generated_dir: Option<PathBuf>,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_certs(path: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| anyhow::anyhow!("cannot read certificates from {}: {e}", path.display()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("bad certificate in {}: {e}", path.display()))?;
    anyhow::ensure!(!certs.is_empty(), "no certificate in {}", path.display());
    Ok(certs)
}

fn read_key(path: &Path) -> anyhow::Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_file(path)
        .map_err(|e| anyhow::anyhow!("cannot read a private key from {}: {e}", path.display()))
}

/// A self-signed certificate for `localhost` and this host's name:
/// (certificate PEM, key PEM).
fn self_signed() -> anyhow::Result<(String, String)> {
    let mut names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    if let Ok(h) = std::env::var("HOSTNAME") {
        if !h.is_empty() && !names.contains(&h) {
            names.push(h);
        }
    }
    let ck = rcgen::generate_simple_self_signed(names)?;
    Ok((ck.cert.pem(), ck.key_pair.serialize_pem()))
}

/// The generated certificate in `dir`, made there on first use (the key
/// readable by its owner only).
fn generated_in(dir: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    let (cert, key) = (dir.join(GENERATED_CERT), dir.join(GENERATED_KEY));
    if cert.exists() && key.exists() {
        return Ok((cert, key));
    }
    std::fs::create_dir_all(dir).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    let (cert_pem, key_pem) = self_signed()?;
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&key)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", key.display()))?;
        f.write_all(key_pem.as_bytes())?;
    }
    std::fs::write(&cert, cert_pem).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", cert.display()))?;
    tracing::info!(
        "sqld: made a self-signed TLS certificate {} (replace it with --ssl-cert / --ssl-key)",
        cert.display()
    );
    Ok((cert, key))
}

/// The server's TLS configuration from `src`.
pub fn server_config(src: &TlsSource) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let (certs, key) = match (&src.cert, &src.key) {
        (Some(c), Some(k)) => (read_certs(c)?, read_key(k)?),
        (Some(_), None) | (None, Some(_)) => anyhow::bail!("--ssl-cert and --ssl-key go together"),
        (None, None) => match &src.generated_dir {
            Some(dir) => {
                let (c, k) = generated_in(dir)?;
                (read_certs(&c)?, read_key(&k)?)
            }
            None => {
                let (c, k) = self_signed()?;
                let certs = CertificateDer::pem_slice_iter(c.as_bytes()).collect::<Result<Vec<_>, _>>()?;
                (certs, PrivateKeyDer::from_pem_slice(k.as_bytes())?)
            }
        },
    };
    let builder = rustls::ServerConfig::builder_with_provider(provider()).with_safe_default_protocol_versions()?;
    let builder = match &src.ca {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in read_certs(ca)? {
                roots.add(c).map_err(|e| anyhow::anyhow!("bad CA certificate in {}: {e}", ca.display()))?;
            }
            // A client certificate is checked when the client gives one; an
            // account's REQUIRE SSL asks for the encryption only.
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                .allow_unauthenticated()
                .build()?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let cfg = builder.with_single_cert(certs, key).map_err(|e| anyhow::anyhow!("the TLS certificate and key: {e}"))?;
    Ok(Arc::new(cfg))
}

/// The two halves of a client's stream joined again for the TLS handshake.
/// The read half keeps its buffer: a client sends its TLS ClientHello right
/// after the SSLRequest packet, without waiting, so the first TLS bytes may
/// already sit in it.
pub struct Joined<R, W> {
    pub r: R,
    pub w: W,
}

impl<R: AsyncRead + Unpin, W: Unpin> AsyncRead for Joined<R, W> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().r).poll_read(cx, buf)
    }
}

impl<R: Unpin, W: AsyncWrite + Unpin> AsyncWrite for Joined<R, W> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().w).poll_write(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().w).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().w).poll_shutdown(cx)
    }
}

/// The server side of the TLS handshake on `io`: the encrypted stream and
/// what SHOW STATUS tells of it.
pub async fn accept<IO: AsyncRead + AsyncWrite + Unpin>(
    cfg: Arc<rustls::ServerConfig>,
    io: IO,
) -> std::io::Result<(tokio_rustls::server::TlsStream<IO>, TlsInfo)> {
    let tls = tokio_rustls::TlsAcceptor::from(cfg).accept(io).await?;
    let info = info_of(tls.get_ref().1);
    Ok((tls, info))
}

fn info_of(c: &rustls::ServerConnection) -> TlsInfo {
    let cipher = c.negotiated_cipher_suite().map(|s| openssl_name(s.suite())).unwrap_or_default();
    let version = match c.protocol_version() {
        Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3".to_string(),
        Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2".to_string(),
        Some(v) => format!("{v:?}"),
        None => String::new(),
    };
    TlsInfo { cipher, version }
}

/// OpenSSL's name of a suite rustls offers (what MySQL's Ssl_cipher shows).
fn openssl_name(s: rustls::CipherSuite) -> String {
    use rustls::CipherSuite as S;
    let name = match s {
        S::TLS13_AES_128_GCM_SHA256 => "TLS_AES_128_GCM_SHA256",
        S::TLS13_AES_256_GCM_SHA384 => "TLS_AES_256_GCM_SHA384",
        S::TLS13_CHACHA20_POLY1305_SHA256 => "TLS_CHACHA20_POLY1305_SHA256",
        S::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 => "ECDHE-ECDSA-AES128-GCM-SHA256",
        S::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 => "ECDHE-ECDSA-AES256-GCM-SHA384",
        S::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256 => "ECDHE-ECDSA-CHACHA20-POLY1305",
        S::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => "ECDHE-RSA-AES128-GCM-SHA256",
        S::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => "ECDHE-RSA-AES256-GCM-SHA384",
        S::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 => "ECDHE-RSA-CHACHA20-POLY1305",
        other => return format!("{other:?}"),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_certificate_is_kept_and_reused() {
        let dir = std::env::temp_dir().join(format!("norr-tls-{}", std::process::id()));
        let src = TlsSource { generated_dir: Some(dir.clone()), ..Default::default() };
        server_config(&src).unwrap();
        let first = std::fs::read(dir.join(GENERATED_CERT)).unwrap();
        server_config(&src).unwrap();
        assert_eq!(std::fs::read(dir.join(GENERATED_CERT)).unwrap(), first, "made again instead of reused");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join(GENERATED_KEY)).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "the key is readable by others: {mode:o}");
        // Given files are used as they are; a lone --ssl-cert is an error.
        let given = TlsSource {
            cert: Some(dir.join(GENERATED_CERT)),
            key: Some(dir.join(GENERATED_KEY)),
            ..Default::default()
        };
        server_config(&given).unwrap();
        let half = TlsSource { cert: Some(dir.join(GENERATED_CERT)), ..Default::default() };
        assert!(server_config(&half).unwrap_err().to_string().contains("--ssl-key"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn cipher_names_are_openssl_s() {
        assert_eq!(openssl_name(rustls::CipherSuite::TLS13_AES_256_GCM_SHA384), "TLS_AES_256_GCM_SHA384");
        assert_eq!(
            openssl_name(rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256),
            "ECDHE-RSA-AES128-GCM-SHA256"
        );
    }
}
