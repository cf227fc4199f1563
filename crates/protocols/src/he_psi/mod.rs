//! Unbalanced labeled PSI from homomorphic encryption (the APSI design; see
//! `docs/he-psi-design.md`).
//!
//! Under construction: parameters, powers plan and the sender database
//! exist; the query, the service and the CLI follow.

pub mod bundle;
pub mod client;
pub mod db_file;
pub mod eval;
pub mod hashing;
pub mod label;
pub mod messages;
pub mod params;
pub mod poly;
pub mod powers;
pub mod presets;
pub mod receiver;
pub mod select;
pub mod sender;
pub mod sender_db;
pub mod service;
pub mod shape;
pub mod state;

#[cfg(test)]
mod tests;

pub use client::{HeClient, QueryOutcome};
pub use messages::PROTOCOL_ID;
pub use receiver::Match;
pub use service::{HeLimits, HeService};
pub use state::{HeState, Row};
