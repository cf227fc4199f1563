//! What a server counts and measures, exposed in Prometheus' text format
//! (the admin listener's `/metrics`, [`super::admin`]).
//!
//! The [`Router`](super::Router) records connections, refusals, requests,
//! their items, latency and bytes; services record what only they see
//! (HE evaluations queued and running, the sharded router's fan-out to
//! each shard) through the [`Session`](super::Session) they are handed;
//! the router's watcher records reloads, and the epoch and readiness of
//! each state are sampled when the metrics are read. Labels are protocol,
//! step, outcome, refusal reason and shard number: never anything a
//! client sent.
//!
//! Recording is a few atomic operations and, for a histogram or a labelled
//! family, a short lock: per request, not per item, so it stays on
//! whether or not anybody reads the metrics.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use psikit_transport::{ids, ProtocolId, TransportError};

/// Why a connection or request was refused before it was served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Every connection slot was taken (`max_connections`).
    Busy,
    /// The client's query budget could not pay for the request.
    Budget,
    /// The TLS handshake failed.
    Tls,
    /// The WebSocket upgrade failed: not a WebSocket request, a page whose
    /// origin is not allowed, or no upgrade in time.
    WebSocket,
    /// A frame could not be read: another wire version, oversized, cut
    /// short or for a protocol this server does not serve.
    ProtocolError,
}

impl Refusal {
    /// Why a connection's TLS handshake or WebSocket upgrade failed.
    pub(crate) fn handshake(e: &TransportError) -> Self {
        match e {
            TransportError::WebSocket(_) | TransportError::Timeout("WebSocket upgrade") => {
                Refusal::WebSocket
            }
            _ => Refusal::Tls,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Refusal::Busy => "busy",
            Refusal::Budget => "budget",
            Refusal::Tls => "tls",
            Refusal::WebSocket => "websocket",
            Refusal::ProtocolError => "protocol_error",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProtocolLabels {
    protocol: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StepLabels {
    protocol: &'static str,
    step: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    protocol: &'static str,
    step: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReloadLabels {
    protocol: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ShardLabels {
    shard: u32,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ShardIndex {
    shard: u32,
}

type Latency = Family<StepLabels, Histogram, fn() -> Histogram>;
type ShardLatency = Family<ShardIndex, Histogram, fn() -> Histogram>;

/// Latency buckets from 0.5 ms to about 65 s, doubling: an OPRF request of
/// one item and an HE query over a large database both land inside.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 18))
}

/// A server's metrics (see the module docs). Cheap to share: every field
/// is a handle to shared counters.
pub struct Metrics {
    registry: Registry,
    connections_open: Gauge,
    connections: Counter,
    refused: Family<ReasonLabels, Counter>,
    requests: Family<RequestLabels, Counter>,
    items: Family<ProtocolLabels, Counter>,
    latency: Latency,
    bytes_received: Family<ProtocolLabels, Counter>,
    bytes_sent: Family<ProtocolLabels, Counter>,
    reloads: Family<ReloadLabels, Counter>,
    epoch: Family<ProtocolLabels, Gauge>,
    ready: Family<ProtocolLabels, Gauge>,
    he_queued: Gauge,
    he_running: Gauge,
    shard_requests: Family<ShardLabels, Counter>,
    shard_latency: ShardLatency,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("psikit");
        let connections_open = Gauge::default();
        registry.register(
            "connections_open",
            "Client connections being served",
            connections_open.clone(),
        );
        let connections = Counter::default();
        registry.register(
            "connections",
            "Client connections accepted",
            connections.clone(),
        );
        let refused = Family::default();
        registry.register(
            "refused",
            "Connections and requests refused before being served, by reason",
            refused.clone(),
        );
        let requests = Family::default();
        registry.register(
            "requests",
            "Requests answered, by protocol, step and outcome",
            requests.clone(),
        );
        let items = Family::default();
        registry.register(
            "request_items",
            "Items (OPRF evaluations) requested",
            items.clone(),
        );
        let latency: Latency = Family::new_with_constructor(latency_histogram);
        registry.register(
            "request_duration_seconds",
            "Time to answer a request, by protocol and step",
            latency.clone(),
        );
        let bytes_received = Family::default();
        registry.register(
            "received_bytes",
            "Bytes received from clients, by protocol",
            bytes_received.clone(),
        );
        let bytes_sent = Family::default();
        registry.register(
            "sent_bytes",
            "Bytes sent to clients, by protocol",
            bytes_sent.clone(),
        );
        let reloads = Family::default();
        registry.register(
            "state_reloads",
            "State reloads after the files changed, by outcome",
            reloads.clone(),
        );
        let epoch = Family::default();
        registry.register(
            "state_epoch",
            "The epoch (update count) of the state served",
            epoch.clone(),
        );
        let ready = Family::default();
        registry.register(
            "ready",
            "1 when the protocol's state is loaded and serving",
            ready.clone(),
        );
        let he_queued = Gauge::default();
        registry.register(
            "he_evaluations_queued",
            "HE queries waiting for an evaluation slot",
            he_queued.clone(),
        );
        let he_running = Gauge::default();
        registry.register(
            "he_evaluations_running",
            "HE queries being evaluated",
            he_running.clone(),
        );
        let shard_requests = Family::default();
        registry.register(
            "shard_queries",
            "Queries a sharded database's router sent to each shard, by outcome",
            shard_requests.clone(),
        );
        let shard_latency: ShardLatency = Family::new_with_constructor(latency_histogram);
        registry.register(
            "shard_query_duration_seconds",
            "Time from sending a query to a shard to its done message",
            shard_latency.clone(),
        );
        Self {
            registry,
            connections_open,
            connections,
            refused,
            requests,
            items,
            latency,
            bytes_received,
            bytes_sent,
            reloads,
            epoch,
            ready,
            he_queued,
            he_running,
            shard_requests,
            shard_latency,
        }
    }

    /// A client connection was accepted; the guard counts it open until
    /// dropped.
    pub(crate) fn connection(&self) -> OpenConnection<'_> {
        self.connections.inc();
        self.connections_open.inc();
        OpenConnection(self)
    }

    pub(crate) fn refused(&self, why: Refusal) {
        (self.refused.get_or_create(&ReasonLabels {
            reason: why.label(),
        }))
        .inc();
    }

    /// One answered request: its step (the service's name for the request
    /// kind), outcome, items, duration and bytes each way.
    pub(crate) fn request(&self, protocol: ProtocolId, step: &'static str, done: &Answered) {
        let protocol = ids::label(protocol);
        let labels = RequestLabels {
            protocol,
            step,
            outcome: done.outcome,
        };
        self.requests.get_or_create(&labels).inc();
        let by = ProtocolLabels { protocol };
        self.items.get_or_create(&by).inc_by(done.items);
        self.bytes_received.get_or_create(&by).inc_by(done.received);
        self.bytes_sent.get_or_create(&by).inc_by(done.sent);
        (self.latency.get_or_create(&StepLabels { protocol, step }))
            .observe(done.duration.as_secs_f64());
    }

    /// A reload of `protocol`'s state after its files changed.
    pub(crate) fn reloaded(&self, protocol: ProtocolId, ok: bool) {
        let labels = ReloadLabels {
            protocol: ids::label(protocol),
            outcome: if ok { "ok" } else { "failed" },
        };
        self.reloads.get_or_create(&labels).inc();
    }

    /// The state of `protocol` as last sampled: its epoch and whether it
    /// serves.
    pub(crate) fn state(&self, protocol: ProtocolId, epoch: u64, ready: bool) {
        let by = ProtocolLabels {
            protocol: ids::label(protocol),
        };
        self.epoch
            .get_or_create(&by)
            .set(i64::try_from(epoch).unwrap_or(i64::MAX));
        self.ready.get_or_create(&by).set(i64::from(ready));
    }

    /// An HE query waits for an evaluation slot until the guard is turned
    /// into a running one ([`Queued::run`]) or dropped.
    pub fn he_queued(&self) -> Queued<'_> {
        self.he_queued.inc();
        Queued(self)
    }

    /// A sharded database's router heard shard `shard`'s answer to a query
    /// (or its failure) `took` after sending it.
    pub fn shard_query(&self, shard: usize, ok: bool, took: Duration) {
        let shard = u32::try_from(shard).unwrap_or(u32::MAX);
        let labels = ShardLabels {
            shard,
            outcome: if ok { "ok" } else { "failed" },
        };
        self.shard_requests.get_or_create(&labels).inc();
        if ok {
            (self.shard_latency.get_or_create(&ShardIndex { shard })).observe(took.as_secs_f64());
        }
    }

    /// The metrics in Prometheus' text exposition format (version 0.0.4 as
    /// `text/plain`, or OpenMetrics).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// What one request came to, for [`Metrics::request`] and the request's
/// log event.
pub(crate) struct Answered {
    pub outcome: &'static str,
    pub items: u64,
    pub duration: Duration,
    pub received: u64,
    pub sent: u64,
}

/// Counts a connection open while it lives.
pub(crate) struct OpenConnection<'a>(&'a Metrics);

impl Drop for OpenConnection<'_> {
    fn drop(&mut self) {
        self.0.connections_open.dec();
    }
}

/// An HE query waiting for its evaluation slot.
pub struct Queued<'a>(&'a Metrics);

impl<'a> Queued<'a> {
    /// The query got its slot: no longer queued, running until the
    /// returned guard is dropped.
    pub fn run(self) -> Running<'a> {
        let metrics = self.0;
        drop(self);
        metrics.he_running.inc();
        Running(metrics)
    }
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.he_queued.dec();
    }
}

/// An HE query being evaluated.
pub struct Running<'a>(&'a Metrics);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.he_running.dec();
    }
}
