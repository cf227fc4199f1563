//! What a protocol's server side implements ([`Service`]) and what it may
//! keep per connection ([`Session`]).

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use psikit_transport::{Channel, Frame, ProtocolId};

use super::metrics::Metrics;
use crate::error::Error;

/// The future of [`Service::handle`].
pub type Handled<'a> = Pin<Box<dyn Future<Output = Result<(), Error>> + Send + 'a>>;

/// The future of [`Service::ready`]: why the service cannot serve now, if
/// it cannot.
pub type Readiness<'a> = Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>>;

/// A protocol's server side, as the router (`service::Router`) sees it.
pub trait Service: Send + Sync + 'static {
    /// The protocol whose frames this service answers.
    fn protocol(&self) -> ProtocolId;

    /// Answers one request frame. It may read further frames of the same
    /// request from `ch` and send any number of responses, and keep what
    /// the connection's later requests need in `session`. An error ends
    /// the request; the router tells the client about it.
    fn handle<'a>(
        &'a self,
        frame: Frame,
        ch: &'a mut Channel,
        session: &'a mut Session,
    ) -> Handled<'a>;

    /// Reloads the service's state if its files changed; returns a line
    /// describing the new state, or `None` when nothing changed. Blocking:
    /// the router calls it off the async threads.
    fn reload(&self) -> Result<Option<String>, Error>;

    /// What the service serves, for people: "the filter protocol".
    fn name(&self) -> &'static str;

    /// The current state in a few words: sizes, epoch, memory.
    fn describe(&self) -> String;

    /// The step a request of kind `kind` is, in a word ("oprf", "sync",
    /// "he_eval"): the label of its metrics and log events.
    fn step(&self, kind: u8) -> &'static str;

    /// The epoch (update count) of the state served, for the metrics.
    fn epoch(&self) -> u64;

    /// Whether the service can answer queries now, beyond its state being
    /// loaded (the router tracks reloads itself): a sharded database's
    /// router asks its shards. Called when a readiness probe asks.
    fn ready(&self) -> Readiness<'_> {
        Box::pin(async { Ok(()) })
    }

    /// OPRF evaluations `frame` asks for, charged against the client's
    /// query budget before it is handled ([`QueryBudget`](super::budget::QueryBudget)). Zero for
    /// requests that evaluate nothing.
    fn oprf_cost(&self, frame: &Frame) -> u64 {
        let _ = frame;
        0
    }
}

/// What a service keeps between the requests of one connection (the
/// state a sharded database's router answers a whole connection from),
/// and the server's metrics, where a service records what only it sees.
/// Its slot is empty when the connection opens.
pub struct Session {
    slot: Option<Box<dyn Any + Send>>,
    metrics: Arc<Metrics>,
}

impl Session {
    pub(crate) fn new(metrics: Arc<Metrics>) -> Self {
        Self {
            slot: None,
            metrics,
        }
    }

    /// The server's metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The value kept, made by `make` on first use (or when the slot holds
    /// another service's value: one connection may speak two protocols).
    pub fn get_or_insert_with<T: Send + 'static>(&mut self, make: impl FnOnce() -> T) -> &mut T {
        if !self.slot.as_ref().is_some_and(|v| v.is::<T>()) {
            self.slot = Some(Box::new(make()));
        }
        match self.slot.as_mut().and_then(|v| v.downcast_mut::<T>()) {
            Some(value) => value,
            None => unreachable!("the slot was just filled with a T"),
        }
    }
}
