//! The service layer: how protocols plug into psikit's long-running
//! server.
//!
//! A protocol's server side implements [`Service`]: it names its protocol
//! id (from [`psikit_transport::ids`]), answers the request frames of that
//! protocol on a connection, and reloads its state when its files change
//! (through a [`LiveState`]). A [`Router`] serves any set of registered
//! services on one listener: it accepts connections, bounds how many run
//! at once, routes each frame by its protocol byte, tells clients why a
//! request failed, and runs the one reload watcher for every service. It
//! records the server's [`Metrics`] and log events, and drains on
//! shutdown; the admin listener ([`admin`]) serves its health, readiness
//! and metrics over HTTP.

pub mod admin;
mod budget;
mod contract;
mod limits;
mod live;
mod local;
mod metrics;
mod router;

pub use budget::QueryBudget;
pub use contract::{Handled, Readiness, Service, Session};
pub use limits::ServerLimits;
pub use live::LiveState;
pub use local::LocalServer;
pub use metrics::{Metrics, Queued, Running};
pub use router::{Drained, Router};
