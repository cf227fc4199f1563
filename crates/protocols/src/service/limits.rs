//! The limits a server enforces, one set for every service.

use std::time::Duration;

use super::budget::QueryBudget;

/// Limits of a router (`service::Router`) and of the services it serves. They bound
/// what one client can make the server do; every service reads the fields
/// that concern it.
#[derive(Debug, Clone, Copy)]
pub struct ServerLimits {
    /// Client connections served at once; others are told the server is
    /// busy.
    pub max_connections: usize,
    /// Most items (OPRF elements) in one query request.
    pub max_query_items: u32,
    /// Expensive queries (HE evaluation) run at once; others wait their
    /// turn. Each such query uses every core.
    pub max_concurrent_queries: usize,
    /// How often services check their state files for updates.
    pub reload_every: Duration,
    /// OPRF evaluations allowed per client (IP address) and time window;
    /// `None`: unlimited.
    pub query_budget: Option<QueryBudget>,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            max_connections: 1024,
            max_query_items: 1 << 18,
            max_concurrent_queries: 2,
            reload_every: Duration::from_secs(2),
            query_budget: None,
        }
    }
}
