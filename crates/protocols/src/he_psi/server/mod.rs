//! The server (APSI's sender): the sender database and its bin bundles
//! (`sender_db.rs`, `placement.rs`, `bundle.rs`), its file (`db_file.rs`),
//! the homomorphic evaluation of a query (`eval.rs`, `sender.rs`: sans-IO,
//! bytes of ciphertexts in, result packages out), the state directory
//! (`state.rs`: OPRF key or shard description, `shard_info.rs`, database,
//! id) and the
//! network service (`service.rs`, [`HeService`]).
//!
//! Public: the service, the state a service serves ([`HeState`], with
//! narrow accessors for what front ends report) and the update counters.
//! The database and the evaluation stay crate-private; front ends build
//! and update through the facade.

pub(crate) mod bundle;
pub(crate) mod db_file;
pub(crate) mod eval;
pub(crate) mod placement;
pub(crate) mod sender;
pub(crate) mod sender_db;
pub(crate) mod service;
pub(crate) mod shard_info;
pub(crate) mod state;

pub use sender_db::{DbMemory, UpdateStats};
pub use service::HeService;
pub use state::{db_path, HeState, Row};
