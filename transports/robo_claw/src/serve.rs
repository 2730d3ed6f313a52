//! The I/O edge: binding the port, optional TLS, and running the tonic server until the
//! transport is stopped.
//!
//! TLS is terminated here with tokio-rustls on the ring provider, and tonic serves the
//! decrypted streams. Why not tonic's own `tls_config`: it builds its rustls config with
//! the process-wide default provider, which panics when the final binary enables more
//! than one provider (another crate's choice we do not control) unless someone installs a
//! default globally. Choosing ring per server keeps this crate out of that global state.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tokio_util::sync::CancellationToken;
use tonic::transport::Server;

use crate::proto::robo_messenger_server::RoboMessengerServer;
use crate::service::Messenger;
use crate::shared::Shared;

/// Longest a client may take to finish the TLS handshake; a silent peer must not hold a
/// task and a socket for ever.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the certificate chain and the private key are (PEM files).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// Certificate chain, leaf first.
    pub cert_path: PathBuf,
    /// The private key of the leaf certificate (PKCS#8, PKCS#1 or SEC1).
    pub key_path: PathBuf,
}

/// Why TLS could not be set up. Paths are shown; key material never is.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The certificate file is unreadable or holds no certificate.
    #[error(
        "cannot read the TLS certificate chain from {path}: {reason}. Check tlsCertPath (a PEM file with the server certificate first)"
    )]
    Certificate {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// The key file is unreadable or holds no private key.
    #[error(
        "cannot read the TLS private key from {path}: {reason}. Check tlsKeyPath (a PEM file with the certificate's private key)"
    )]
    Key {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// rustls refused the pair (the key does not match the certificate, ...).
    #[error("the TLS certificate and key cannot be used together: {0}")]
    Config(String),
}

/// Loads the certificate chain and key into a rustls server config (ring, HTTP/2 ALPN).
pub fn server_config(files: &TlsFiles) -> Result<Arc<ServerConfig>, TlsError> {
    let shown = |path: &Path| path.display().to_string();
    let certificate = |reason: String| TlsError::Certificate {
        path: shown(&files.cert_path),
        reason,
    };
    let chain = CertificateDer::pem_file_iter(&files.cert_path)
        .map_err(|error| certificate(error.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| certificate(error.to_string()))?;
    if chain.is_empty() {
        return Err(certificate("no CERTIFICATE block in the file".into()));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key_path).map_err(|error| TlsError::Key {
        path: shown(&files.key_path),
        reason: error.to_string(),
    })?;
    let mut config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|error| TlsError::Config(error.to_string()))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|error| TlsError::Config(error.to_string()))?;
    // gRPC is HTTP/2 only.
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// Binds `host:port`. The error says what to change.
pub async fn bind(host: &str, port: u16) -> Result<TcpListener, String> {
    TcpListener::bind((host, port)).await.map_err(|error| {
        let hint = if error.kind() == io::ErrorKind::AddrInUse {
            "another program (or another bridge) already listens there; pick another transports.robo_claw.port"
        } else {
            "check transports.robo_claw.host and port"
        };
        format!("cannot listen on {host}:{port}: {error}; {hint}")
    })
}

/// Serves `messenger` on `listener` until `cancel` fires; with `tls`, every connection
/// is a TLS connection first.
pub(crate) fn spawn(
    listener: TcpListener,
    tls: Option<Arc<ServerConfig>>,
    messenger: Messenger,
    cancel: CancellationToken,
) -> JoinHandle<()> {
    let shared = messenger.shared.clone();
    let service = RoboMessengerServer::new(messenger);
    let shutdown = cancel.clone().cancelled_owned();
    match tls {
        None => tokio::spawn(async move {
            let served = Server::builder()
                .add_service(service)
                .serve_with_incoming_shutdown(TcpListenerStream::new(listener), shutdown)
                .await;
            report(&shared, served);
        }),
        Some(config) => tokio::spawn(async move {
            let (connections, incoming) = mpsc::channel(16);
            let acceptor = TlsAcceptor::from(config);
            tokio::spawn(accept_tls(
                listener,
                acceptor,
                connections,
                cancel,
                shared.clone(),
            ));
            let served = Server::builder()
                .add_service(service)
                .serve_with_incoming_shutdown(ReceiverStream::new(incoming), shutdown)
                .await;
            report(&shared, served);
        }),
    }
}

fn report(shared: &Shared, served: Result<(), tonic::transport::Error>) {
    if let Err(error) = served {
        shared.update(|stats| stats.last_error = Some(format!("the gRPC server stopped: {error}")));
    }
}

type TlsConnection = tokio_rustls::server::TlsStream<TcpStream>;

/// Accepts TCP connections and hands them on once their handshake is done; each handshake
/// runs on its own so one slow client cannot hold up the others.
async fn accept_tls(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    connections: mpsc::Sender<io::Result<TlsConnection>>,
    cancel: CancellationToken,
    shared: Arc<Shared>,
) {
    loop {
        let accepted = tokio::select! {
            () = cancel.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((tcp, _peer)) = accepted else {
            // Out of file descriptors and the like: give the system a moment instead of
            // spinning on the same error.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let acceptor = acceptor.clone();
        let connections = connections.clone();
        let shared = shared.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => {
                    let _ = connections.send(Ok(tls)).await;
                }
                Ok(Err(error)) => shared.update(|stats| {
                    stats.tls_failures += 1;
                    stats.last_error = Some(format!("a TLS handshake failed: {error}"));
                }),
                Err(_) => shared.update(|stats| stats.tls_failures += 1),
            }
        });
    }
}

/// The address actually bound (the port is chosen by the system when 0 was asked for).
pub fn local_addr(listener: &TcpListener) -> Result<SocketAddr, String> {
    listener
        .local_addr()
        .map_err(|error| format!("cannot read the bound address: {error}"))
}
