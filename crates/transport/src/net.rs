//! TCP listeners and connectors, optionally wrapped in TLS (rustls, with the
//! `ring` provider; TLS 1.2 and 1.3 with rustls' safe defaults).
//!
//! Server side: a certificate chain and key, and optionally a client CA, in
//! which case every client must present a certificate signed by it (mutual
//! TLS). Client side: the CA (or self-signed certificate) that the server's
//! certificate must chain to, and optionally a client certificate.
//!
//! A listener may speak WebSocket instead of raw frames
//! ([`Listener::websocket`]): the upgrade follows TLS, then the channel
//! runs over the WebSocket's binary messages ([`crate::ws`]).

use std::future::poll_fn;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::task::Poll;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::channel::{Channel, Limits, Stream};
use crate::error::TransportError;
use crate::ws::{self, AllowedOrigins};

/// PEM files configuring the server's TLS.
#[derive(Debug, Clone)]
pub struct ServerTlsFiles {
    pub cert_chain: PathBuf,
    pub private_key: PathBuf,
    /// If set, clients must authenticate with a certificate from this CA.
    pub client_ca: Option<PathBuf>,
}

/// PEM files configuring the client's TLS.
#[derive(Debug, Clone)]
pub struct ClientTlsFiles {
    /// Certificate(s) the server's chain must lead to.
    pub server_ca: PathBuf,
    /// Name to verify in the server certificate (defaults to the host).
    pub server_name: Option<String>,
    /// Client certificate chain and key, for servers requiring mutual TLS.
    pub client_cert: Option<(PathBuf, PathBuf)>,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn tls_err(what: &str, path: &Path, e: impl std::fmt::Display) -> TransportError {
    TransportError::TlsConfig(format!("{what} {}: {e}", path.display()))
}

fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TransportError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| tls_err("cannot read certificates from", path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| tls_err("bad certificate in", path, e))?;
    if certs.is_empty() {
        return Err(tls_err("no certificate found in", path, "empty"));
    }
    Ok(certs)
}

fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TransportError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| tls_err("cannot read private key", path, e))
}

fn load_roots(path: &Path) -> Result<RootCertStore, TransportError> {
    let mut roots = RootCertStore::empty();
    for cert in load_certs(path)? {
        roots
            .add(cert)
            .map_err(|e| tls_err("unusable CA certificate in", path, e))?;
    }
    Ok(roots)
}

fn server_config(files: &ServerTlsFiles) -> Result<ServerConfig, TransportError> {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TransportError::TlsConfig(e.to_string()))?;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(load_roots(ca)?), provider())
                    .build()
                    .map_err(|e| tls_err("bad client CA", ca, e))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    builder
        .with_single_cert(
            load_certs(&files.cert_chain)?,
            load_key(&files.private_key)?,
        )
        .map_err(|e| tls_err("certificate and key do not fit", &files.cert_chain, e))
}

fn client_config(files: &ClientTlsFiles) -> Result<ClientConfig, TransportError> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TransportError::TlsConfig(e.to_string()))?
        .with_root_certificates(load_roots(&files.server_ca)?);
    match &files.client_cert {
        None => Ok(builder.with_no_client_auth()),
        Some((cert, key)) => builder
            .with_client_auth_cert(load_certs(cert)?, load_key(key)?)
            .map_err(|e| tls_err("client certificate and key do not fit", cert, e)),
    }
}

/// A bound TCP listener that hands out framed channels.
pub struct Listener {
    tcp: TcpListener,
    tls: Option<TlsAcceptor>,
    /// Set for a WebSocket listener: the pages that may use it.
    websocket: Option<Arc<AllowedOrigins>>,
    limits: Limits,
}

impl Listener {
    pub async fn bind(
        addr: &str,
        tls: Option<&ServerTlsFiles>,
        limits: Limits,
    ) -> Result<Self, TransportError> {
        let tls = match tls {
            Some(files) => Some(TlsAcceptor::from(Arc::new(server_config(files)?))),
            None => None,
        };
        let tcp = TcpListener::bind(addr)
            .await
            .map_err(|e| TransportError::Bind(addr.to_string(), e))?;
        Ok(Self {
            tcp,
            tls,
            websocket: None,
            limits,
        })
    }

    /// Makes this a WebSocket listener (`ws://`, or `wss://` with TLS)
    /// for the pages `origins` allows.
    pub fn websocket(mut self, origins: AllowedOrigins) -> Self {
        self.websocket = Some(Arc::new(origins));
        self
    }

    pub fn local_addr(&self) -> Result<SocketAddr, TransportError> {
        Ok(self.tcp.local_addr()?)
    }

    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    pub fn is_websocket(&self) -> bool {
        self.websocket.is_some()
    }

    /// Accepts the next TCP connection. The TLS handshake and WebSocket
    /// upgrade (if any) are left to [`Incoming::handshake`] so a slow
    /// client cannot stall the accept loop.
    pub async fn accept(&self) -> Result<Incoming, TransportError> {
        accept_any(std::slice::from_ref(self), 0).await
    }

    fn incoming(&self, (tcp, peer): (TcpStream, SocketAddr)) -> Result<Incoming, TransportError> {
        tcp.set_nodelay(true)?;
        Ok(Incoming {
            tcp,
            peer,
            tls: self.tls.clone(),
            websocket: self.websocket.clone(),
            limits: self.limits,
        })
    }
}

/// Accepts the next connection on whichever of `listeners` has one (a
/// server's TCP and WebSocket listeners, served by one loop), asking
/// listener `turn` (modulo their number) first: a caller that counts its
/// accepts into `turn` keeps a flooded listener from starving the others.
pub async fn accept_any(listeners: &[Listener], turn: usize) -> Result<Incoming, TransportError> {
    let first = turn % listeners.len().max(1);
    let order = listeners[first..].iter().chain(&listeners[..first]);
    poll_fn(|cx| {
        for listener in order.clone() {
            if let Poll::Ready(accepted) = listener.tcp.poll_accept(cx) {
                return Poll::Ready(accepted.map(|a| (a, listener)));
            }
        }
        Poll::Pending
    })
    .await
    .map_err(TransportError::from)
    .and_then(|(accepted, listener)| listener.incoming(accepted))
}

/// An accepted connection whose TLS handshake has not happened yet.
pub struct Incoming {
    tcp: TcpStream,
    peer: SocketAddr,
    tls: Option<TlsAcceptor>,
    websocket: Option<Arc<AllowedOrigins>>,
    limits: Limits,
}

impl Incoming {
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Completes the TLS handshake and the WebSocket upgrade, if any (each
    /// bounded by the read timeout).
    pub async fn handshake(self) -> Result<Channel, TransportError> {
        match self.tls {
            None => upgrade(self.tcp, self.websocket.as_deref(), self.limits).await,
            Some(acceptor) => {
                let hs = acceptor.accept(self.tcp);
                let stream = tokio::time::timeout(self.limits.read_timeout, hs)
                    .await
                    .map_err(|_| TransportError::Timeout("TLS handshake"))?
                    .map_err(|e| TransportError::Tls(e.to_string()))?;
                upgrade(stream, self.websocket.as_deref(), self.limits).await
            }
        }
    }
}

/// The channel over `stream`, after a WebSocket upgrade if `websocket`.
async fn upgrade<S: Stream + 'static>(
    stream: S,
    websocket: Option<&AllowedOrigins>,
    limits: Limits,
) -> Result<Channel, TransportError> {
    match websocket {
        None => Ok(Channel::new(stream, limits)),
        Some(origins) => Ok(Channel::new(
            ws::accept(stream, origins, limits).await?,
            limits,
        )),
    }
}

/// Connects to `addr` ("host:port"), with TLS if `tls` is given.
pub async fn connect(
    addr: &str,
    tls: Option<&ClientTlsFiles>,
    limits: Limits,
) -> Result<Channel, TransportError> {
    let connecting = TcpStream::connect(addr);
    let tcp = tokio::time::timeout(limits.read_timeout, connecting)
        .await
        .map_err(|_| TransportError::Timeout("connecting"))?
        .map_err(|e| TransportError::Connect(addr.to_string(), e))?;
    tcp.set_nodelay(true)?;
    let Some(files) = tls else {
        return Ok(Channel::new(tcp, limits));
    };
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    let name = files
        .server_name
        .clone()
        .unwrap_or_else(|| host.to_string());
    let name = ServerName::try_from(name.trim_matches(['[', ']']).to_string())
        .map_err(|e| TransportError::TlsConfig(format!("bad server name {name}: {e}")))?;
    let connector = TlsConnector::from(Arc::new(client_config(files)?));
    let stream = tokio::time::timeout(limits.read_timeout, connector.connect(name, tcp))
        .await
        .map_err(|_| TransportError::Timeout("TLS handshake"))?
        .map_err(|e| TransportError::Tls(e.to_string()))?;
    Ok(Channel::new(stream, limits))
}
