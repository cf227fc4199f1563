//! The [`Router`]: serves registered services on one listener.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use psikit_transport::net::Listener;
use psikit_transport::{ids, Channel, ErrorCode, ErrorMessage, Limits, ProtocolId};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;

use super::budget::Budgets;
use super::contract::{Service, Session};
use super::limits::ServerLimits;
use crate::error::Error;

/// Serves a set of [`Service`]s, at most one per protocol id, on one port.
pub struct Router {
    services: Vec<Arc<dyn Service>>,
    limits: ServerLimits,
    budgets: Option<Budgets>,
}

impl Router {
    pub fn new(limits: ServerLimits) -> Self {
        Self {
            services: Vec::new(),
            budgets: limits.query_budget.map(Budgets::new),
            limits,
        }
    }

    /// Adds a service; refuses a second service for the same protocol.
    pub fn register(&mut self, service: Arc<dyn Service>) -> Result<(), Error> {
        let id = service.protocol();
        if self.service(id).is_some() {
            return Err(Error::Config(format!(
                "two services registered for {}",
                ids::name(id)
            )));
        }
        self.services.push(service);
        Ok(())
    }

    /// The registered services, in registration order.
    pub fn services(&self) -> &[Arc<dyn Service>] {
        &self.services
    }

    fn service(&self, id: ProtocolId) -> Option<&Arc<dyn Service>> {
        self.services.iter().find(|s| s.protocol() == id)
    }

    /// Serves requests on one connection until the client closes it or a
    /// request fails. The client is told why before the connection closes
    /// (also when its frame could not be read: another wire version, an
    /// oversized or malformed frame), and the close lets it read that.
    /// Without a client address, no query budget applies (see
    /// [`Router::run`], which knows it).
    pub async fn serve_connection(&self, ch: Channel) -> Result<(), Error> {
        self.serve_client(ch, None).await
    }

    /// The message level of the server: answers `request` (the bytes a
    /// client sent, one or more whole requests) as if they came on a fresh
    /// connection that the client then closed, and returns every byte the
    /// server wrote back. For callers that carry psikit's messages over a
    /// transport of their own (HTTP, a queue); each call is independent,
    /// as each request of the filter and HE protocols is. A request that
    /// fails is answered with the error message the client would get on a
    /// connection, so the client's step raises it; a request cut short
    /// fails as a connection closed mid-message.
    pub async fn respond(&self, request: &[u8], limits: Limits) -> Vec<u8> {
        // The server half of an in-memory connection; the client half is
        // written and read at once, so neither direction's buffer can stall
        // the other.
        let (client, server) = tokio::io::duplex(64 << 10);
        let (mut from_server, mut to_server) = tokio::io::split(client);
        let serve = async {
            // Its error is already in the answer, as an error frame.
            let _ = self.serve_connection(Channel::new(server, limits)).await;
        };
        let send = async {
            // The server may stop reading early (a bad request): the rest
            // of the request is then of no use.
            if to_server.write_all(request).await.is_ok() {
                let _ = to_server.shutdown().await;
            }
        };
        let mut answer = Vec::new();
        let receive = async {
            // Ends when the server drops its half; a read error can only
            // come after the server is gone, with `answer` complete.
            let _ = from_server.read_to_end(&mut answer).await;
        };
        tokio::join!(serve, send, receive);
        answer
    }

    /// [`Router::serve_connection`] for a client at `client`, whose
    /// requests are charged to its query budget if one is set.
    async fn serve_client(&self, mut ch: Channel, client: Option<IpAddr>) -> Result<(), Error> {
        let outcome = self.serve_requests(&mut ch, client).await;
        if let Err((protocol, e)) = &outcome {
            if let Some(msg) = e.to_peer_message() {
                ch.send_error(*protocol, &msg).await;
            }
            ch.close().await;
        }
        outcome.map_err(|(_, e)| e)
    }

    /// The request loop; an error comes with the protocol to report it in.
    async fn serve_requests(
        &self,
        ch: &mut Channel,
        client: Option<IpAddr>,
    ) -> Result<(), (ProtocolId, Error)> {
        let mut session = Session::default();
        loop {
            let frame = match ch.recv_or_eof().await {
                Ok(Some(frame)) => frame,
                Ok(None) => return Ok(()),
                Err(e) => return Err((ids::CONNECTION, e.into())),
            };
            let protocol = frame.protocol;
            let outcome = match self.service(protocol) {
                Some(service) => match self.charge(client, service.oprf_cost(&frame)) {
                    Ok(()) => service.handle(frame, ch, &mut session).await,
                    Err(e) => Err(e),
                },
                None => Err(Error::Unsupported(protocol)),
            };
            match outcome {
                Ok(()) => {}
                // Told, and expected to recover on this connection.
                Err(e) if e.keeps_connection() => {
                    if let Some(msg) = e.to_peer_message() {
                        ch.send_error(protocol, &msg).await;
                    }
                }
                Err(e) => return Err((protocol, e)),
            }
        }
    }

    /// Charges `items` OPRF evaluations to `client`'s budget, if both are
    /// known.
    fn charge(&self, client: Option<IpAddr>, items: u64) -> Result<(), Error> {
        match (&self.budgets, client) {
            (Some(budgets), Some(ip)) => budgets.charge(ip, items, std::time::Instant::now()),
            _ => Ok(()),
        }
    }

    /// Accepts connections until the listener fails for good, at most
    /// `max_connections` served at once (the others are told the server
    /// is busy); each connection runs in its own task, so one misbehaving
    /// client never stops the others. Also runs the reload watcher.
    /// Connection errors are reported on stderr without any set contents.
    pub async fn run(self: Arc<Self>, listener: Listener) -> Result<(), Error> {
        let _watcher = WatcherGuard(tokio::spawn(self.clone().watch()));
        let slots = Arc::new(Semaphore::new(self.limits.max_connections.max(1)));
        loop {
            let incoming = match listener.accept().await {
                Ok(i) => i,
                Err(e) => {
                    eprintln!("psikit: accept failed: {e}");
                    continue;
                }
            };
            let peer = incoming.peer();
            let router = self.clone();
            let permit = slots.clone().try_acquire_owned();
            tokio::spawn(async move {
                let mut ch = match incoming.handshake().await {
                    Ok(ch) => ch,
                    Err(e) => return eprintln!("psikit: {peer}: {e}"),
                };
                let Ok(_permit) = permit else {
                    let busy = ErrorMessage::new(ErrorCode::Busy, "server busy; retry later");
                    ch.send_error(ids::CONNECTION, &busy).await;
                    ch.close().await;
                    return;
                };
                if let Err(e) = router.serve_client(ch, Some(peer.ip())).await {
                    eprintln!("psikit: {peer}: {e}");
                }
            });
        }
    }

    /// Asks every service to reload its state, every `reload_every`,
    /// forever. [`Router::run`] runs it; a router used only through
    /// [`Router::respond`] runs it in a task of its own.
    pub async fn watch(self: Arc<Self>) {
        let every = self.limits.reload_every.max(Duration::from_millis(10));
        loop {
            tokio::time::sleep(every).await;
            for service in &self.services {
                let s = service.clone();
                let outcome = tokio::task::spawn_blocking(move || s.reload()).await;
                match outcome {
                    Ok(Ok(Some(line))) => {
                        eprintln!("psikit: reloaded the state of {} ({line})", service.name())
                    }
                    Ok(Ok(None)) => {}
                    Ok(Err(e)) => eprintln!(
                        "psikit: {}: keeping the current state; reload failed: {e}",
                        service.name()
                    ),
                    Err(e) => eprintln!("psikit: reload task failed: {e}"),
                }
            }
        }
    }
}

/// Stops the watcher when the router's accept loop ends or is dropped.
struct WatcherGuard(tokio::task::JoinHandle<()>);

impl Drop for WatcherGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}
