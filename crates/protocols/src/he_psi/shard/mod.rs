//! Sharded databases: a database split by the items' OPRF outputs into
//! shards, each served by an ordinary [`HeService`](crate::he_psi::server::HeService),
//! and a router in front that evaluates the OPRF itself and fans every
//! query out to all shards at one epoch.
//!
//! * `manifest.rs`: the shard of an item and the router's `manifest.json`
//!   ([`Manifest`]); a shard's own `shard.json` ([`ShardInfo`]) is the
//!   server's (`server/shard_info.rs`), which loads it;
//! * `router.rs`: the router service ([`ShardRouter`]) and its per-query
//!   trace ([`QueryTrace`]);
//! * [`sharded`]: the build and update as stages a distributed engine can
//!   spread (public: the Python Ray stages call them one by one);
//! * [`probe`]: one shard's query timed stage by stage, the narrow entry
//!   `psikit bench scale` measures its cost model with.

pub(crate) mod manifest;
pub mod probe;
pub(crate) mod router;
pub mod sharded;

pub use crate::he_psi::server::shard_info::ShardInfo;
pub use manifest::Manifest;
pub use router::{QueryTrace, ShardRouter, ShardTrace, TraceSink};
