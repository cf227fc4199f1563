//! What a server serves, given as plain paths and addresses: the filter's
//! state directory, the HE database's, or a sharded HE database's router
//! directory and its shards' servers. `psikit serve` and Python's
//! `psikit.Server` both describe their flags or arguments as a [`Serving`]
//! and call [`Router::serving`], so the two front ends open the same
//! services the same way. Above the families (it opens their services),
//! so not in `service/`, which the families build on.

#[cfg(feature = "unbalanced")]
use std::path::PathBuf;

#[cfg(feature = "unbalanced")]
use std::sync::Arc;

#[cfg(feature = "he")]
use crate::common::connect::ServerAddr;
use crate::error::Error;
#[cfg(feature = "he")]
use crate::he_psi::shard::TraceSink;
use crate::service::{Router, ServerLimits};

/// What a server serves. Each state given becomes one service on the
/// router; nothing given is a router without services (the front ends
/// refuse it in their own terms).
#[derive(Clone, Default)]
pub struct Serving {
    /// The filter protocol from this state directory.
    #[cfg(feature = "filter")]
    pub filter_state: Option<PathBuf>,
    /// The HE protocol from this state directory (a whole database or a
    /// shard).
    #[cfg(feature = "he")]
    pub he_state: Option<PathBuf>,
    /// Keep the HE database's query-ready plaintexts in memory (faster
    /// queries, more memory).
    #[cfg(feature = "he")]
    pub he_cache: bool,
    /// A sharded HE database, served as its router.
    #[cfg(feature = "he")]
    pub he_router: Option<HeRouting>,
    pub limits: ServerLimits,
}

/// A sharded HE database's router: its directory (the OPRF key and the
/// manifest) and its shards' servers, in shard order.
#[cfg(feature = "he")]
#[derive(Clone)]
pub struct HeRouting {
    pub dir: PathBuf,
    pub shards: Vec<ServerAddr>,
    /// Told of every answered query (sizes and times only).
    pub trace: Option<TraceSink>,
}

impl Router {
    /// A router with a service for every state `serving` gives, each
    /// reloading its files live (see [`Serving`]); none given is a router
    /// without services, which front ends refuse in their own terms.
    pub fn serving(serving: &Serving) -> Result<Self, Error> {
        #[allow(unused_mut)]
        let mut router = Router::new(serving.limits);
        #[cfg(feature = "filter")]
        if let Some(dir) = &serving.filter_state {
            let service = crate::filter_psi::FilterService::open(dir, serving.limits)?;
            router.register(Arc::new(service))?;
        }
        #[cfg(feature = "he")]
        if let Some(dir) = &serving.he_state {
            let service = crate::he_psi::HeService::open(dir, serving.he_cache, serving.limits)?;
            router.register(Arc::new(service))?;
        }
        #[cfg(feature = "he")]
        if let Some(routing) = &serving.he_router {
            let shards = routing.shards.clone();
            let mut service =
                crate::he_psi::shard::ShardRouter::open(&routing.dir, shards, serving.limits)?;
            if let Some(trace) = &routing.trace {
                service = service.with_trace(trace.clone());
            }
            router.register(Arc::new(service))?;
        }
        Ok(router)
    }
}
