//! Unbalanced labeled PSI from homomorphic encryption: the APSI design of
//! Cong et al. (CCS 2021), sections 3 and 4; design notes in
//! `docs/he-psi-design.md`, user guide in `docs/he-psi.md`.
//!
//! A server holds a large set, each item optionally with a label; a client
//! with a small set learns which of its items the server holds and their
//! labels. The flow: both parties' items go through an OPRF keyed by the
//! server; the server hashes every item into all of its cuckoo bins and
//! keeps, per SIMD slot, the polynomial vanishing on the slot's items and
//! interpolation polynomials of the encrypted labels; the client
//! cuckoo-hashes its items and sends BFV encryptions of a few source powers
//! of them; the server computes every power, evaluates the polynomials and
//! streams one result package per bin bundle; the client reads zeros as
//! matches and decrypts the labels. Parameters come from APSI's JSON files
//! ([`params`], [`presets`]) or are chosen automatically ([`select`]).
//!
//! # Layout, by role (as APSI's sender/receiver/common)
//!
//! * `common/`: what both roles share (messages, the answer stream,
//!   hashing, the database's shape, labels, field maths, the powers plan
//!   and its groupings, the cost model);
//! * [`client`]: the receiver's sans-IO core and [`HeClient`];
//! * [`server`]: the sender database, the evaluation, the state directory
//!   and [`HeService`];
//! * [`shard`]: sharded databases (files, the router, the build stages);
//! * [`facade`]: what front ends call (set-up, queries, labels).
//!
//! Front ends use only the facade and the public types re-exported here;
//! the cores are crate-private.
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

pub mod client;
pub(crate) mod common;
pub mod facade;
pub mod params;
pub mod presets;
pub mod select;
pub mod server;
pub mod shard;

#[cfg(test)]
mod tests;

pub use client::{HeClient, QueryOutcome};
pub use common::messages::{self, PROTOCOL_ID};
pub use server::{DbMemory, HeService, HeState, Row, UpdateStats};
pub use shard::sharded;
