//! How the parties of a protocol reach each other: a client connecting to
//! a server ([`ServerAddr`]), the two peers of a two-party protocol (one
//! listens, one connects: [`Peer`], the one driver every two-party facade
//! opens its channel with), and a runtime for the facades' blocking entry
//! points.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

pub use psikit_transport::net::{ClientTlsFiles, Listener, ServerTlsFiles};
pub use psikit_transport::ws::AllowedOrigins;
use psikit_transport::{net, TransportError};

use super::{Channel, Limits};
use crate::error::Error;

/// Where a client finds its server.
#[derive(Clone, Debug)]
pub struct ServerAddr {
    /// `host:port`.
    pub addr: String,
    /// TLS settings; `None` for plain TCP.
    pub tls: Option<ClientTlsFiles>,
    pub limits: Limits,
}

impl ServerAddr {
    /// A plain-TCP address with default limits.
    pub fn plain(addr: impl Into<String>) -> Self {
        Self {
            addr: addr.into(),
            tls: None,
            limits: Limits::default(),
        }
    }

    pub async fn connect(&self) -> Result<Channel, Error> {
        Ok(net::connect(&self.addr, self.tls.as_ref(), self.limits).await?)
    }
}

/// Retries of a request a server refused as busy (all its connection
/// slots taken): how many, and the first wait, doubled each time with
/// random jitter (so clients refused together do not return together).
/// Five retries wait about 6 s in all.
pub const BUSY_RETRIES: u32 = 5;
const BUSY_FIRST_WAIT: Duration = Duration::from_millis(200);

/// Waits between attempts of a request refused as busy. Only requests
/// safe to repeat use it: syncs and queries, which change nothing at the
/// server.
#[derive(Debug, Default)]
struct BusyRetry {
    done: u32,
}

impl BusyRetry {
    /// Whether `result` is a busy refusal worth another attempt; if so,
    /// first waits out the backoff.
    async fn again<T>(&mut self, result: &Result<T, Error>) -> bool {
        if !matches!(result, Err(e) if e.is_busy()) || self.done >= BUSY_RETRIES {
            return false;
        }
        let base = BUSY_FIRST_WAIT * 2u32.pow(self.done);
        let jitter = rand::random::<f64>() * 0.5 + 0.75;
        self.done += 1;
        tokio::time::sleep(base.mul_f64(jitter)).await;
        true
    }
}

/// One attempt of a request on a fresh connection: `state` (the client
/// and what it asks) and the channel, lent for the attempt.
pub type Attempt<'a, T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send + 'a>>;

/// Runs `attempt` on a fresh connection to `server`, and again, after
/// [`BusyRetry`]'s backoff, while the server refuses it as busy: the one
/// retry loop of every client request safe to repeat (syncs and queries,
/// which change nothing at the server). `state` is handed to each attempt,
/// so an attempt may borrow the client mutably.
pub async fn with_busy_retry<S: Send, T>(
    server: &ServerAddr,
    state: &mut S,
    mut attempt: impl for<'a> FnMut(&'a mut S, &'a mut Channel) -> Attempt<'a, T>,
) -> Result<T, Error> {
    let mut retry = BusyRetry::default();
    loop {
        let result = match server.connect().await {
            Ok(mut ch) => attempt(state, &mut ch).await,
            Err(e) => Err(e),
        };
        if !retry.again(&result).await {
            return result;
        }
    }
}

/// How one party of a two-party protocol meets the other.
#[derive(Clone, Debug)]
pub enum Peer {
    /// Wait for the peer on this address (optionally serving TLS), for at
    /// most `accept_timeout` if given.
    Listen {
        addr: String,
        tls: Option<ServerTlsFiles>,
        limits: Limits,
        accept_timeout: Option<Duration>,
    },
    /// Connect to a listening peer.
    Connect(ServerAddr),
}

impl Peer {
    /// Opens the channel to the peer. A listening party calls `listening`
    /// with its bound address before it waits (so a user can be told where
    /// to connect).
    pub async fn open(&self, listening: impl FnOnce(&str)) -> Result<Channel, Error> {
        match self {
            Peer::Listen {
                addr,
                tls,
                limits,
                accept_timeout,
            } => {
                let listener = Listener::bind(addr, tls.as_ref(), *limits).await?;
                listening(&listener.local_addr()?.to_string());
                accept_within(&listener, *accept_timeout).await
            }
            Peer::Connect(server) => server.connect().await,
        }
    }
}

/// The next connection `listener` accepts (TLS handshake done), waiting
/// at most `limit` if given.
pub async fn accept_within(listener: &Listener, limit: Option<Duration>) -> Result<Channel, Error> {
    let accept = async { listener.accept().await?.handshake().await };
    let channel = match limit {
        Some(limit) => tokio::time::timeout(limit, accept)
            .await
            .map_err(|_| TransportError::Timeout("waiting for the peer to connect"))?,
        None => accept.await,
    };
    Ok(channel?)
}

/// A multi-threaded runtime for the async drivers (blocking entry points,
/// front ends that keep a server running across several calls).
pub fn runtime() -> Result<tokio::runtime::Runtime, Error> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Config(format!("cannot start the async runtime: {e}")))
}

/// Runs `future` to completion on a new [`runtime`]: how the facades'
/// blocking entry points call their async drivers.
pub fn block_on<F: Future>(future: F) -> Result<F::Output, Error> {
    Ok(runtime()?.block_on(future))
}

/// A loopback TCP channel pair (first: the connecting side), for tests,
/// the demo and benchmarks of two-party protocols.
pub async fn loopback_pair(limits: Limits) -> Result<(Channel, Channel), Error> {
    let listener = Listener::bind("127.0.0.1:0", None, limits).await?;
    let addr = listener.local_addr()?.to_string();
    let accept = tokio::spawn(async move { listener.accept().await?.handshake().await });
    let client = net::connect(&addr, None, limits).await?;
    let server = accept
        .await
        .map_err(|e| Error::task("accepting a connection", e))??;
    Ok((client, server))
}
