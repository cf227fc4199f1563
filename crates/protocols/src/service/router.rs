//! The [`Router`]: serves registered services on one listener, records
//! its metrics ([`Metrics`]) and log events, answers readiness probes and
//! drains on shutdown ([`Router::run_until`]).
//!
//! Log events (`tracing`, target `psikit::request` and
//! `psikit::connection`) carry the peer's address, protocol, step, items,
//! duration, outcome and bytes: never a request's contents, keys or
//! labels.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use psikit_transport::net::{accept_any, Listener};
use psikit_transport::{ids, Channel, ErrorCode, ErrorMessage, Limits, ProtocolId};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use super::budget::Budgets;
use super::contract::{Service, Session};
use super::limits::ServerLimits;
use super::metrics::{Answered, Metrics, Refusal};
use crate::error::Error;

/// How long a connection may stay idle between its requests once the
/// server drains: a client's next request of the same query (an HE
/// query's ciphertexts after its OPRF answer) comes within it.
const DRAIN_IDLE: Duration = Duration::from_secs(5);

/// How a drain ended ([`Router::run_until`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drained {
    /// Requests still running when the grace period ended (their
    /// connections were closed); 0 for a clean drain.
    pub cut_short: usize,
}

/// Serves a set of [`Service`]s, at most one per protocol id, on one port.
pub struct Router {
    services: Vec<Arc<dyn Service>>,
    limits: ServerLimits,
    budgets: Option<Budgets>,
    metrics: Arc<Metrics>,
    /// Each service's last failed reload, until a reload succeeds.
    reload_failures: Mutex<Vec<(ProtocolId, String)>>,
    /// Set once the router stops accepting: readiness probes fail.
    draining: AtomicBool,
}

impl Router {
    pub fn new(limits: ServerLimits) -> Self {
        Self {
            services: Vec::new(),
            budgets: limits.query_budget.map(Budgets::new),
            limits,
            metrics: Arc::new(Metrics::new()),
            reload_failures: Mutex::new(Vec::new()),
            draining: AtomicBool::new(false),
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

    /// The metrics in Prometheus' text format, each service's epoch and
    /// readiness sampled now.
    pub fn metrics_text(&self) -> String {
        let failures = self.failures();
        for service in &self.services {
            let id = service.protocol();
            let ready = !failures.iter().any(|(p, _)| *p == id);
            self.metrics.state(id, service.epoch(), ready);
        }
        self.metrics.encode()
    }

    /// Whether every service can answer now: `Err` lists why not (a
    /// failed reload, a shard that does not answer, the server draining).
    pub async fn readiness(&self) -> Result<(), Vec<String>> {
        let mut why: Vec<String> = (self.failures().into_iter())
            .map(|(id, e)| format!("{}: the last reload failed: {e}", ids::label(id)))
            .collect();
        for service in &self.services {
            if let Err(e) = service.ready().await {
                why.push(format!("{}: {e}", ids::label(service.protocol())));
            }
        }
        if self.draining.load(Ordering::SeqCst) {
            why.push("shutting down".into());
        }
        match why.is_empty() {
            true => Ok(()),
            false => Err(why),
        }
    }

    fn failures(&self) -> Vec<(ProtocolId, String)> {
        match self.reload_failures.lock() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn set_failure(&self, id: ProtocolId, failure: Option<String>) {
        let mut g = match self.reload_failures.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        g.retain(|(p, _)| *p != id);
        if let Some(e) = failure {
            g.push((id, e));
        }
    }

    /// Serves requests on one connection until the client closes it or a
    /// request fails. The client is told why before the connection closes
    /// (also when its frame could not be read: another wire version, an
    /// oversized or malformed frame), and the close lets it read that.
    /// Without a client address, no query budget applies (see
    /// [`Router::run`], which knows it).
    pub async fn serve_connection(&self, ch: Channel) -> Result<(), Error> {
        // No drain reaches a connection served on its own.
        self.serve_client(ch, None, &Closing::new()).await.0
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
    /// requests are charged to its query budget if one is set; also
    /// returns the bytes received and sent.
    async fn serve_client(
        &self,
        mut ch: Channel,
        client: Option<SocketAddr>,
        closing: &Closing,
    ) -> (Result<(), Error>, (u64, u64)) {
        let outcome = self.serve_requests(&mut ch, client, closing).await;
        if let Err((protocol, e)) = &outcome {
            if let Some(msg) = e.to_peer_message() {
                ch.send_error(*protocol, &msg).await;
            }
        }
        let counts = (ch.bytes_received(), ch.bytes_sent());
        if outcome.is_err() {
            ch.close().await;
        }
        (outcome.map_err(|(_, e)| e), counts)
    }

    /// The request loop; an error comes with the protocol to report it in.
    /// Once the server drains, the loop ends when the client has been idle
    /// for [`DRAIN_IDLE`].
    async fn serve_requests(
        &self,
        ch: &mut Channel,
        client: Option<SocketAddr>,
        closing: &Closing,
    ) -> Result<(), (ProtocolId, Error)> {
        let mut session = Session::new(self.metrics.clone());
        loop {
            let received = ch.bytes_received();
            let frame = match closing.idle(ch.recv_or_eof()).await {
                Some(Ok(Some(frame))) => frame,
                Some(Ok(None)) | None => return Ok(()),
                Some(Err(e)) => {
                    // A dropped or idle link is no refusal.
                    if !e.is_link_failure() {
                        self.metrics.refused(Refusal::ProtocolError);
                    }
                    return Err((ids::CONNECTION, e.into()));
                }
            };
            let _busy = closing.request();
            let start = Instant::now();
            let sent = ch.bytes_sent();
            let protocol = frame.protocol;
            let Some(service) = self.service(protocol) else {
                self.metrics.refused(Refusal::ProtocolError);
                return Err((protocol, Error::Unsupported(protocol)));
            };
            let (kind, step) = (frame.kind, service.step(frame.kind));
            let items = service.oprf_cost(&frame);
            let charged = self.charge(client.map(|a| a.ip()), items);
            let within_budget = charged.is_ok();
            let outcome = match charged {
                Ok(()) => service.handle(frame, ch, &mut session).await,
                Err(e) => {
                    self.metrics.refused(Refusal::Budget);
                    Err(e)
                }
            };
            let answered = Answered {
                outcome: match within_budget {
                    true => outcome_label(&outcome),
                    false => "budget",
                },
                items,
                duration: start.elapsed(),
                received: ch.bytes_received() - received,
                sent: ch.bytes_sent() - sent,
            };
            self.metrics.request(protocol, step, &answered);
            let error = outcome.as_ref().err();
            log_request(client, (protocol, kind, step), &answered, error);
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
            (Some(budgets), Some(ip)) => budgets.charge(ip, items, Instant::now()),
            _ => Ok(()),
        }
    }

    /// Accepts connections on `listeners` (TCP and WebSocket: one server)
    /// until they fail for good, at most
    /// `max_connections` served at once (the others are told the server
    /// is busy); each connection runs in its own task, so one misbehaving
    /// client never stops the others. Also runs the reload watcher.
    pub async fn run(self: Arc<Self>, listeners: Vec<Listener>) -> Result<(), Error> {
        self.run_until(listeners, std::future::pending(), Duration::ZERO)
            .await
            .map(|_| ())
    }

    /// [`Router::run`] on every one of `listeners` (TCP and WebSocket: one
    /// server, one connection limit) until `stop` completes, then drains:
    /// stops accepting (new connections are refused), lets every
    /// connection finish the request it is in and any next one that comes
    /// within [`DRAIN_IDLE`], and closes what is left after `grace`.
    pub async fn run_until(
        self: Arc<Self>,
        listeners: Vec<Listener>,
        stop: impl Future<Output = ()>,
        grace: Duration,
    ) -> Result<Drained, Error> {
        let _watcher = WatcherGuard(tokio::spawn(self.clone().watch()));
        let slots = Arc::new(Semaphore::new(self.limits.max_connections.max(1)));
        let closing = Closing::new();
        let mut connections = JoinSet::new();
        // Which listener is asked first takes turns (`accept_any`).
        let mut accepted = 0usize;
        tokio::pin!(stop);
        loop {
            tokio::select! {
                () = &mut stop => break,
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
                incoming = accept_any(&listeners, accepted) => match incoming {
                    Ok(incoming) => {
                        accepted = accepted.wrapping_add(1);
                        let router = self.clone();
                        let permit = slots.clone().try_acquire_owned();
                        let closing = closing.clone();
                        connections.spawn(async move {
                            let peer = incoming.peer();
                            let ch = match incoming.handshake().await {
                                Ok(ch) => ch,
                                Err(e) => {
                                    router.metrics.refused(Refusal::handshake(&e));
                                    return tracing::warn!(target: "psikit::connection", %peer, error = %e, "handshake failed");
                                }
                            };
                            match permit {
                                Ok(_permit) => router.serve_counted(ch, peer, &closing).await,
                                Err(_) => router.refuse_busy(ch, peer).await,
                            }
                        });
                    }
                    Err(e) => tracing::warn!(error = %e, "accept failed"),
                },
            }
        }
        drop(listeners);
        self.draining.store(true, Ordering::SeqCst);
        closing.start();
        tracing::info!(
            connections = connections.len(),
            grace_secs = grace.as_secs_f64(),
            "draining"
        );
        let drained = tokio::time::timeout(grace, async {
            while connections.join_next().await.is_some() {}
        });
        let cut_short = match drained.await {
            Ok(()) => 0,
            Err(_) => {
                let cut = closing.in_flight();
                connections.abort_all();
                cut
            }
        };
        Ok(Drained { cut_short })
    }

    /// Serves one accepted connection, counting it open and logging its
    /// end.
    async fn serve_counted(&self, ch: Channel, peer: SocketAddr, closing: &Closing) {
        let _open = self.metrics.connection();
        let start = Instant::now();
        let (outcome, (received, sent)) = self.serve_client(ch, Some(peer), closing).await;
        let duration_ms = start.elapsed().as_secs_f64() * 1e3;
        match outcome {
            Ok(()) => tracing::info!(
                target: "psikit::connection", %peer, duration_ms, received, sent, outcome = "closed"
            ),
            Err(e) => tracing::info!(
                target: "psikit::connection", %peer, duration_ms, received, sent,
                outcome = "failed", error = %e
            ),
        }
    }

    /// Tells a client over the connection limit that the server is busy.
    async fn refuse_busy(&self, mut ch: Channel, peer: SocketAddr) {
        self.metrics.refused(Refusal::Busy);
        tracing::info!(target: "psikit::connection", %peer, outcome = "busy");
        let busy = ErrorMessage::new(ErrorCode::Busy, "server busy; retry later");
        ch.send_error(ids::CONNECTION, &busy).await;
        ch.close().await;
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
                let id = service.protocol();
                match outcome {
                    Ok(Ok(Some(line))) => {
                        self.metrics.reloaded(id, true);
                        self.set_failure(id, None);
                        tracing::info!(protocol = ids::label(id), state = %line, "reloaded");
                    }
                    Ok(Ok(None)) => {}
                    Ok(Err(e)) => {
                        self.metrics.reloaded(id, false);
                        self.set_failure(id, Some(e.to_string()));
                        tracing::warn!(
                            protocol = ids::label(id), error = %e,
                            "reload failed; keeping the current state"
                        );
                    }
                    Err(e) => tracing::error!(error = %e, "reload task failed"),
                }
            }
        }
    }
}

/// A request's outcome as a metric label: "ok", the error code the client
/// was told, or "failed" where the link itself failed.
fn outcome_label(outcome: &Result<(), Error>) -> &'static str {
    match outcome {
        Ok(()) => "ok",
        Err(e) => e.to_peer_message().map_or("failed", |m| m.code.label()),
    }
}

/// One request's log event: sizes, times and outcome only.
fn log_request(
    peer: Option<SocketAddr>,
    (protocol, kind, step): (ProtocolId, u8, &'static str),
    done: &Answered,
    error: Option<&Error>,
) {
    let peer = peer.map(|p| p.to_string()).unwrap_or_default();
    let duration_ms = done.duration.as_secs_f64() * 1e3;
    let protocol = ids::label(protocol);
    match error {
        None => tracing::info!(
            target: "psikit::request", %peer, protocol, kind, step, items = done.items,
            duration_ms, outcome = done.outcome, received = done.received, sent = done.sent
        ),
        Some(e) => tracing::info!(
            target: "psikit::request", %peer, protocol, kind, step, items = done.items,
            duration_ms, outcome = done.outcome, received = done.received, sent = done.sent,
            error = %e
        ),
    }
}

/// The drain as the connections see it: whether it started, and the
/// requests in flight.
#[derive(Clone)]
struct Closing {
    started: watch::Receiver<bool>,
    start: Arc<watch::Sender<bool>>,
    in_flight: Arc<AtomicUsize>,
}

impl Closing {
    fn new() -> Self {
        let (start, started) = watch::channel(false);
        Self {
            started,
            start: Arc::new(start),
            in_flight: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn start(&self) {
        self.start.send_replace(true);
    }

    fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Counts a request in flight until the guard is dropped.
    fn request(&self) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(self.in_flight.clone())
    }

    /// Waits for the client's next frame; once the drain started, for at
    /// most [`DRAIN_IDLE`] (`None`: the wait ended).
    async fn idle<T>(&self, next: impl Future<Output = T>) -> Option<T> {
        tokio::pin!(next);
        let mut started = self.started.clone();
        tokio::select! {
            got = &mut next => return Some(got),
            _ = started.wait_for(|s| *s) => {}
        }
        tokio::time::timeout(DRAIN_IDLE, next).await.ok()
    }
}

/// A request in flight (see [`Closing::request`]).
struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Stops the watcher when the router's accept loop ends or is dropped.
struct WatcherGuard(tokio::task::JoinHandle<()>);

impl Drop for WatcherGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}
