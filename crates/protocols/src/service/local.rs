//! A router on a free loopback port, for tests, the demo and benchmarks.

use std::sync::Arc;

use psikit_transport::net::{self, Listener};
use psikit_transport::{Channel, Limits};

use super::contract::Service;
use super::limits::ServerLimits;
use super::router::Router;
use crate::error::Error;

/// A [`Router`] serving on `127.0.0.1` at a free port until dropped.
pub struct LocalServer {
    addr: String,
    task: tokio::task::JoinHandle<Result<(), Error>>,
}

impl LocalServer {
    /// Starts serving `router` with the given transport limits.
    pub async fn start(router: Router, limits: Limits) -> Result<Self, Error> {
        let listener = Listener::bind("127.0.0.1:0", None, limits).await?;
        let addr = listener.local_addr()?.to_string();
        let task = tokio::spawn(Arc::new(router).run(vec![listener]));
        Ok(Self { addr, task })
    }

    /// Serves one service with default limits.
    pub async fn serving(service: Arc<dyn Service>) -> Result<Self, Error> {
        let mut router = Router::new(ServerLimits::default());
        router.register(service)?;
        Self::start(router, Limits::default()).await
    }

    /// The `host:port` clients connect to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// A new plain-TCP client connection.
    pub async fn connect(&self, limits: Limits) -> Result<Channel, Error> {
        Ok(net::connect(&self.addr, None, limits).await?)
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
