//! TLS on the gRPC port (`[tls]`): rustls with the ring provider, ALPN `h2`, optional client
//! certificates, and certificates reloaded without a restart.
//!
//! The current [`ServerConfig`] sits in an [`ArcSwap`]: every handshake reads it once, so a
//! reload changes what new connections get while established ones keep the session they
//! negotiated. A reload reads every file again and swaps only when all of them parse and the key
//! matches the certificate; otherwise the old configuration stays and the error is logged.
//! Reloads happen on SIGHUP and, with `reload_check_secs > 0`, when a file's modification time,
//! size or inode changes.

use std::{
    future::Future,
    io,
    net::SocketAddr,
    path::{Path, PathBuf},
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::{Duration, SystemTime},
};

use arc_swap::ArcSwap;
use rustls::{
    crypto::CryptoProvider,
    pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer},
    server::{VerifierBuilderError, WebPkiClientVerifier},
    RootCertStore, ServerConfig,
};
use tokio::{
    net::{TcpListener, TcpStream},
    task::{JoinHandle, JoinSet},
};
use tokio_rustls::server::TlsStream;
use tokio_stream::Stream;
use tracing::{debug, error, info, warn};

use crate::config::TlsConfig;

/// How long a client has to finish its handshake: a client that stalls holds only its own task,
/// never the accept loop, and not for longer than this.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long accepting pauses after an error that is not one connection's (out of file
/// descriptors, say): retrying at once would spin on the same error.
const ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("tls.cert_file is set but tls.key_file is not")]
    NoKeyFile,
    #[error("{setting} is set but tls.cert_file is not: without a server certificate the port would serve plaintext")]
    NoCertFile { setting: &'static str },
    #[error("cannot read {setting} {}", .path.display())]
    Read {
        setting: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{setting} {} is not valid PEM", .path.display())]
    Pem {
        setting: &'static str,
        path: PathBuf,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("{setting} {} holds no PEM certificate (-----BEGIN CERTIFICATE-----)", .path.display())]
    NoCertificate { setting: &'static str, path: PathBuf },
    #[error("tls.key_file {} holds no PEM private key (PKCS#8, PKCS#1 or SEC1)", .path.display())]
    NoPrivateKey { path: PathBuf },
    #[error("the certificate in tls.cert_file {} cannot be used with the key in tls.key_file {}", .cert.display(), .key.display())]
    Certificate {
        cert: PathBuf,
        key: PathBuf,
        #[source]
        source: rustls::Error,
    },
    #[error("tls.client_ca_file {} holds a certificate that cannot be a trust anchor", .path.display())]
    ClientCaCertificate {
        path: PathBuf,
        #[source]
        source: rustls::Error,
    },
    #[error("cannot verify client certificates against tls.client_ca_file {}", .path.display())]
    ClientVerifier {
        path: PathBuf,
        #[source]
        source: VerifierBuilderError,
    },
}

/// The files a configuration is read from.
#[derive(Debug, Clone)]
struct TlsFiles {
    cert: PathBuf,
    key: PathBuf,
    client_ca: Option<PathBuf>,
}

impl TlsFiles {
    fn paths(&self) -> impl Iterator<Item = &Path> {
        [Some(self.cert.as_path()), Some(self.key.as_path()), self.client_ca.as_deref()].into_iter().flatten()
    }
}

/// A file as the change check sees it: modification time, size and inode, or nothing when it
/// cannot be read (a rotation in progress).
type Stamp = Option<(SystemTime, u64, u64)>;

/// The server's TLS configuration, reloadable while it serves.
#[derive(Debug)]
pub struct ServerTls {
    files: TlsFiles,
    reload_check: Option<Duration>,
    current: ArcSwap<ServerConfig>,
}

impl ServerTls {
    /// The configuration `[tls]` describes, read from its files; `None` when `cert_file` is
    /// unset (plaintext). Any file that cannot be read or used is an error naming it.
    pub fn from_config(config: &TlsConfig) -> Result<Option<Arc<ServerTls>>, TlsError> {
        let Some(cert) = config.cert_file.clone() else {
            if config.key_file.is_some() {
                return Err(TlsError::NoCertFile { setting: "tls.key_file" });
            }
            if config.client_ca_file.is_some() {
                return Err(TlsError::NoCertFile { setting: "tls.client_ca_file" });
            }
            return Ok(None);
        };
        let key = config.key_file.clone().ok_or(TlsError::NoKeyFile)?;
        let files = TlsFiles { cert, key, client_ca: config.client_ca_file.clone() };
        let current = server_config(&files)?;
        let reload_check = (config.reload_check_secs > 0).then(|| Duration::from_secs(config.reload_check_secs));
        match &files.client_ca {
            Some(ca) => info!(
                cert_file = %files.cert.display(),
                client_ca_file = %ca.display(),
                reload_check_secs = config.reload_check_secs,
                "tls on; client certificates required"
            ),
            None => info!(cert_file = %files.cert.display(), reload_check_secs = config.reload_check_secs, "tls on"),
        }
        Ok(Some(Arc::new(ServerTls { files, reload_check, current: ArcSwap::from_pointee(current) })))
    }

    /// The configuration the next handshake uses.
    pub fn current(&self) -> Arc<ServerConfig> {
        self.current.load_full()
    }

    /// Reads every file again and, if all of them are usable, makes the result the configuration
    /// of new connections. A failure keeps the current configuration and is logged (naming the
    /// file) as well as returned.
    pub fn reload(&self) -> Result<(), TlsError> {
        match server_config(&self.files) {
            Ok(config) => {
                self.current.store(Arc::new(config));
                info!(cert_file = %self.files.cert.display(), "tls certificates reloaded");
                Ok(())
            }
            Err(err) => {
                error!(error = %chain(&err), "tls reload failed; new connections keep the previous certificates");
                Err(err)
            }
        }
    }

    /// The TLS connections of `listener`: accepts TCP (with TCP_NODELAY), runs each handshake on
    /// its own task within [`HANDSHAKE_TIMEOUT`], and yields the connections that complete one.
    /// While the stream lives, SIGHUP and (with `reload_check_secs`) file changes reload the
    /// certificates; dropping it closes the listener and stops both.
    pub fn incoming(self: &Arc<Self>, listener: TcpListener) -> TlsIncoming {
        // Registered before this returns, so a SIGHUP from then on reloads instead of taking the
        // signal's default action (ending the process).
        #[cfg(unix)]
        let hangup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
            Ok(signal) => Some(signal),
            Err(err) => {
                warn!(error = %err, "cannot listen for SIGHUP; tls certificates reload only on file changes");
                None
            }
        };
        #[cfg(not(unix))]
        let hangup = None;
        let watcher = tokio::spawn(watch(self.clone(), hangup));
        TlsIncoming { listener, tls: self.clone(), handshakes: JoinSet::new(), backoff: None, watcher }
    }

    fn stamps(&self) -> Vec<Stamp> {
        self.files.paths().map(stamp).collect()
    }
}

#[cfg(unix)]
type Hangup = tokio::signal::unix::Signal;
#[cfg(not(unix))]
type Hangup = std::convert::Infallible;

/// Reloads on SIGHUP and on file changes until aborted (when its [`TlsIncoming`] is dropped).
async fn watch(tls: Arc<ServerTls>, mut hangup: Option<Hangup>) {
    // A reload that fails is not retried until a file changes again (or SIGHUP): the stamps are
    // of the files tried, not of the last good ones, so one bad file logs one error.
    let mut seen = tls.stamps();
    loop {
        let signalled = async {
            match hangup.as_mut() {
                #[cfg(unix)]
                Some(signal) => signal.recv().await.is_some(),
                _ => std::future::pending().await,
            }
        };
        let tick = async {
            match tls.reload_check {
                Some(every) => tokio::time::sleep(every).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            received = signalled => {
                if !received {
                    hangup = None;
                    continue;
                }
                info!("sighup: reloading tls certificates");
                seen = tls.stamps();
                let _ = tls.reload();
            }
            _ = tick => {
                let now = tls.stamps();
                if now != seen {
                    seen = now;
                    let _ = tls.reload();
                }
            }
        }
    }
}

fn stamp(path: &Path) -> Stamp {
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    Some((meta.modified().ok()?, meta.len(), inode))
}

/// The TLS connections of one listener (see [`ServerTls::incoming`]), for tonic's
/// `serve_with_incoming_shutdown`. Only completed handshakes come out: a failed one is logged at
/// debug level and dropped, and accept errors are logged, never yielded.
pub struct TlsIncoming {
    listener: TcpListener,
    tls: Arc<ServerTls>,
    handshakes: JoinSet<Option<TlsStream<TcpStream>>>,
    backoff: Option<Pin<Box<tokio::time::Sleep>>>,
    watcher: JoinHandle<()>,
}

impl TlsIncoming {
    fn handshake(&mut self, tcp: TcpStream, peer: SocketAddr) {
        // Small frames (an event, a result) go out at once instead of waiting for the client's
        // delayed ACK, as on the plaintext port.
        if let Err(err) = tcp.set_nodelay(true) {
            debug!(%peer, error = %err, "cannot set TCP_NODELAY");
        }
        let acceptor = tokio_rustls::TlsAcceptor::from(self.tls.current());
        self.handshakes.spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => Some(stream),
                Ok(Err(err)) => {
                    debug!(%peer, error = %err, "tls handshake failed");
                    None
                }
                Err(_) => {
                    debug!(%peer, timeout_secs = HANDSHAKE_TIMEOUT.as_secs(), "tls handshake timed out");
                    None
                }
            }
        });
    }
}

impl Stream for TlsIncoming {
    type Item = Result<TlsStream<TcpStream>, io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if let Some(backoff) = this.backoff.as_mut() {
            if backoff.as_mut().poll(cx).is_ready() {
                this.backoff = None;
            }
        }
        while this.backoff.is_none() {
            match this.listener.poll_accept(cx) {
                Poll::Ready(Ok((tcp, peer))) => this.handshake(tcp, peer),
                Poll::Ready(Err(err)) if is_connection_error(&err) => {
                    debug!(error = %err, "accept failed for one connection");
                }
                Poll::Ready(Err(err)) => {
                    error!(error = %err, backoff_ms = ACCEPT_BACKOFF.as_millis() as u64, "accept failed; pausing");
                    let mut sleep = Box::pin(tokio::time::sleep(ACCEPT_BACKOFF));
                    // Registers the wake-up for the end of the pause.
                    let _ = sleep.as_mut().poll(cx);
                    this.backoff = Some(sleep);
                }
                Poll::Pending => break,
            }
        }
        loop {
            match this.handshakes.poll_join_next(cx) {
                Poll::Ready(Some(Ok(Some(stream)))) => return Poll::Ready(Some(Ok(stream))),
                Poll::Ready(Some(Ok(None))) => continue,
                Poll::Ready(Some(Err(err))) => {
                    if err.is_panic() {
                        error!(error = %err, "tls handshake task panicked");
                    }
                    continue;
                }
                // With no handshake under way the listener (or the pause) holds the waker.
                Poll::Ready(None) | Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl Drop for TlsIncoming {
    fn drop(&mut self) {
        self.watcher.abort();
    }
}

/// Errors that end one connection only; accepting the next one may succeed at once.
fn is_connection_error(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
    )
}

fn provider() -> Arc<CryptoProvider> {
    // Explicit: the build also enables rustls' aws-lc-rs feature (through reqwest), so there is
    // no single crate-feature default for rustls to pick.
    Arc::new(rustls::crypto::ring::default_provider())
}

fn server_config(files: &TlsFiles) -> Result<ServerConfig, TlsError> {
    let certs = read_certificates("tls.cert_file", &files.cert)?;
    let key = read_key(&files.key)?;
    let provider = provider();
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|source| TlsError::Certificate { cert: files.cert.clone(), key: files.key.clone(), source })?;
    let builder = match &files.client_ca {
        Some(path) => {
            let mut roots = RootCertStore::empty();
            for cert in read_certificates("tls.client_ca_file", path)? {
                roots.add(cert).map_err(|source| TlsError::ClientCaCertificate { path: path.clone(), source })?;
            }
            // Mandatory: a handshake without a certificate the CA signed fails.
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|source| TlsError::ClientVerifier { path: path.clone(), source })?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(certs, key).map_err(|source| TlsError::Certificate {
        cert: files.cert.clone(),
        key: files.key.clone(),
        source,
    })?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

fn read(setting: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read { setting, path: path.to_owned(), source })
}

fn read_certificates(setting: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(setting, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::Pem { setting, path: path.to_owned(), source })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate { setting, path: path.to_owned() });
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read("tls.key_file", path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|source| match source {
        rustls::pki_types::pem::Error::NoItemsFound => TlsError::NoPrivateKey { path: path.to_owned() },
        source => TlsError::Pem { setting: "tls.key_file", path: path.to_owned(), source },
    })
}

/// An error and its causes on one line, for a log field.
fn chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Pems {
        cert: String,
        key: String,
    }

    fn self_signed(name: &str) -> Pems {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_owned()]).unwrap().self_signed(&key).unwrap();
        Pems { cert: cert.pem(), key: key.serialize_pem() }
    }

    fn write(dir: &Path, pems: &Pems) -> TlsConfig {
        std::fs::write(dir.join("cert.pem"), &pems.cert).unwrap();
        std::fs::write(dir.join("key.pem"), &pems.key).unwrap();
        TlsConfig {
            cert_file: Some(dir.join("cert.pem")),
            key_file: Some(dir.join("key.pem")),
            client_ca_file: None,
            reload_check_secs: 0,
        }
    }

    #[test]
    fn unset_cert_file_is_plaintext() {
        assert!(ServerTls::from_config(&TlsConfig::default()).unwrap().is_none());
    }

    #[test]
    fn a_key_or_ca_without_a_certificate_is_an_error() {
        let config = TlsConfig { key_file: Some("key.pem".into()), ..TlsConfig::default() };
        let err = ServerTls::from_config(&config).unwrap_err();
        assert!(matches!(err, TlsError::NoCertFile { setting: "tls.key_file" }), "{err}");
        let config = TlsConfig { client_ca_file: Some("ca.pem".into()), ..TlsConfig::default() };
        let err = ServerTls::from_config(&config).unwrap_err();
        assert!(matches!(err, TlsError::NoCertFile { setting: "tls.client_ca_file" }), "{err}");
        let config = TlsConfig { cert_file: Some("cert.pem".into()), ..TlsConfig::default() };
        assert!(matches!(ServerTls::from_config(&config).unwrap_err(), TlsError::NoKeyFile));
    }

    #[test]
    fn unusable_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let config = write(dir.path(), &self_signed("localhost"));
        let cert = dir.path().join("cert.pem");
        let key = dir.path().join("key.pem");

        let missing = TlsConfig { cert_file: Some(dir.path().join("missing.pem")), ..config.clone() };
        let err = ServerTls::from_config(&missing).unwrap_err();
        assert!(matches!(err, TlsError::Read { setting: "tls.cert_file", .. }), "{err}");
        assert!(err.to_string().contains("missing.pem"), "{err}");

        std::fs::write(&key, "not a key").unwrap();
        let err = ServerTls::from_config(&config).unwrap_err();
        assert!(matches!(err, TlsError::NoPrivateKey { .. }), "{err}");
        assert!(err.to_string().contains(&key.display().to_string()), "{err}");

        // A key that is not the certificate's.
        std::fs::write(&key, self_signed("localhost").key).unwrap();
        let err = ServerTls::from_config(&config).unwrap_err();
        assert!(matches!(err, TlsError::Certificate { .. }), "{err}");

        std::fs::write(&cert, "-----BEGIN CERTIFICATE-----\n%%%\n").unwrap();
        let err = ServerTls::from_config(&config).unwrap_err();
        assert!(matches!(err, TlsError::Pem { setting: "tls.cert_file", .. }), "{err}");

        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, "").unwrap();
        let config = TlsConfig { client_ca_file: Some(ca), ..write(dir.path(), &self_signed("localhost")) };
        let err = ServerTls::from_config(&config).unwrap_err();
        assert!(matches!(err, TlsError::NoCertificate { setting: "tls.client_ca_file", .. }), "{err}");
    }

    #[test]
    fn a_failed_reload_keeps_the_current_configuration() {
        let dir = tempfile::tempdir().unwrap();
        let config = write(dir.path(), &self_signed("localhost"));
        let tls = ServerTls::from_config(&config).unwrap().unwrap();
        let first = tls.current();
        assert_eq!(first.alpn_protocols, vec![b"h2".to_vec()]);

        std::fs::write(dir.path().join("cert.pem"), "garbage").unwrap();
        assert!(tls.reload().is_err());
        assert!(Arc::ptr_eq(&first, &tls.current()), "the old configuration stays");

        write(dir.path(), &self_signed("localhost"));
        tls.reload().unwrap();
        assert!(!Arc::ptr_eq(&first, &tls.current()), "a good reload swaps");
    }

    #[test]
    fn stamps_change_with_the_files() {
        let dir = tempfile::tempdir().unwrap();
        let config = write(dir.path(), &self_signed("localhost"));
        let tls = ServerTls::from_config(&config).unwrap().unwrap();
        let before = tls.stamps();
        assert!(before.iter().all(Option::is_some));
        write(dir.path(), &self_signed("example.test"));
        assert_ne!(before, tls.stamps());
    }
}
