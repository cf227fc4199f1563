//! What a server serves, given as plain paths and addresses: the filter's
//! state directory, the HE database's, or a sharded HE database's router
//! directory and its shards' servers. `psikit serve` and Python's
//! `psikit.Server` both describe their flags or arguments as a [`Serving`]
//! and call `Router::serving`, so the two front ends open the same
//! services the same way.

#[cfg(feature = "unbalanced")]
use std::path::PathBuf;

use super::limits::ServerLimits;
#[cfg(feature = "he")]
use crate::common::connect::ServerAddr;
#[cfg(feature = "he")]
use crate::he_psi::shard::TraceSink;

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
