//! Unbalanced labeled PSI from homomorphic encryption: the APSI design of
//! Cong et al. (CCS 2021), sections 3 and 4; design notes in
//! `docs/he-psi-design.md`, user guide in `docs/he-psi.md`.
//!
//! A server holds a large set, each item optionally with a label; a client
//! with a small set learns which of its items the server holds and their
//! labels. The flow: both parties' items go through an OPRF keyed by the
//! server ([`state`], [`client`]); the server hashes every item into all of
//! its cuckoo bins and keeps, per SIMD slot, the polynomial vanishing on
//! the slot's items and interpolation polynomials of the encrypted labels
//! ([`sender_db`], [`bundle`], [`poly`], [`label`]); the client cuckoo-hashes
//! its items and sends BFV encryptions of a few source powers of them
//! ([`receiver`]); the server computes every power ([`powers`], [`eval`]),
//! evaluates the polynomials and streams one result package per bin bundle
//! ([`sender`], [`service`]); the client reads zeros as matches and decrypts
//! the labels. Parameters come from APSI's JSON files ([`params`],
//! [`presets`]) or are chosen automatically ([`select`]).
//!
//! # Security model and leakage
//!
//! Semi-honest server and client; computational security 128 bits (the BFV
//! parameters must meet the HomomorphicEncryption.org bound, checked by
//! `psikit-he`), false-positive probability at most 2^-40 per query for the
//! automatically selected parameters (reported for any other parameters).
//! Like APSI there is no noise flooding: result noise may depend on the
//! server's polynomials, so a malicious client is out of scope beyond what
//! the OPRF gives (each OPRF evaluation is one membership test, limited per
//! request). What each side learns besides the intersection and labels:
//!
//! * the client: all parameters, the number of bin bundles per bundle index
//!   (so the server's set size up to that granularity, and how it changes
//!   across updates), the label length bound, and response timing;
//! * the server: the number of OPRF items (the client's set size, unless it
//!   pads with `--pad-to`) and the number of query rounds; the query
//!   ciphertexts have a fixed count and size for given parameters.

mod bundle;
pub mod client;
mod cost;
pub(crate) mod db_file;
mod eval;
pub mod facade;
mod hashing;
mod label;
pub mod messages;
pub mod params;
mod poly;
mod powers;
pub mod presets;
pub mod receiver;
pub mod router;
pub mod select;
pub mod sender;
pub(crate) mod sender_db;
pub mod service;
pub(crate) mod shape;
pub mod shard;
pub mod sharded;
pub mod state;

#[cfg(test)]
mod tests;

pub use client::{HeClient, QueryOutcome};
pub use messages::PROTOCOL_ID;
pub use sender_db::UpdateStats;
pub use service::HeService;
pub use state::{HeState, Row};
