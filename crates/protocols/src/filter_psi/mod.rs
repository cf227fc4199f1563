//! Unbalanced PSI from a DH-based OPRF with an updatable cuckoo filter
//! (Baldi et al.'s protocol as optimised by Resende and Aranha, Figure 2).
//!
//! # The protocol
//! *Offline.* The server holds a long-term OPRF key `k` (RFC 9497,
//! ristretto255-SHA512). It computes `F_k(x)` for every item `x` of its set
//! `X`, derives a 16-byte tag from each output and inserts the tags into a
//! cuckoo filter, which every client downloads once and caches.
//!
//! *Updates.* Insertions and deletions advance the server's *epoch*. A client
//! holding epoch `e` asks for what changed since `e` and receives only the
//! filter slots that changed (their current fingerprints), after which its filter is
//! byte-identical to the server's (checked with a SHA-256 digest). When the
//! load factor passes the rebuild threshold (0.95 by default) the server
//! builds a larger filter under a new filter id and clients download it in
//! full.
//!
//! *Online.* For each query the client blinds every item afresh
//! (`r * H(y)`), the server multiplies by `k`, the client unblinds, hashes to
//! `F_k(y)`, derives the tag and looks it up in its filter. A query is one
//! round trip; its cost does not depend on `|X|`.
//!
//! # Security model
//! * **Client privacy** holds against a malicious server: the server sees
//!   only uniformly random group elements; fresh blinds give forward secrecy
//!   for past queries even if the client is later compromised.
//! * **Server privacy** holds against a malicious client under the one-more
//!   gap Diffie-Hellman assumption: the client learns `F_k` only on as many
//!   points as it sent, and tags of the other items are pseudorandom. The
//!   server caps the items per request; a client can still make many
//!   requests, so deployments that must bound what a client may test should
//!   rate-limit per client.
//! * **Leakage.** The client learns `|X|` (approximately, from the filter's
//!   load) and how many items each update added or removed; the server learns
//!   `|Y|` of each query. Filter epochs reveal when the server updated.
//! * **False positives.** A client item outside `X` matches with
//!   probability at most `2b / 2^f` (`b` slots per bucket, `f` fingerprint
//!   bits); the default chooses `f` for 2^-30 per item, i.e. an expected
//!   `|Y| / 2^30` false positives per query. Choose a smaller rate with
//!   [`FilterConfig::fpr_log2`] at the cost of `1 / load` bits per item per
//!   halving.
//! * Mode 0 of RFC 9497 is not verifiable: a malicious server can evaluate
//!   with another key and make the client miss matches (it cannot learn the
//!   client's items). The server is trusted for correctness.

mod cache;
mod client;
mod config;
mod facade;
pub mod messages;
#[cfg(feature = "net")]
mod server;
mod state;
mod tag;
pub mod tag_cache;

pub use cache::{ClientCache, PendingQuery, SyncKind, SyncOutcome};
pub use client::QueryOutcome;
pub use config::FilterConfig;
pub use facade::{
    query_stepper, setup, setup_from_spool, update, ClientQuery, FilterClient, SetupReport,
};
pub use messages::PROTOCOL_ID;
#[cfg(feature = "net")]
pub use server::{FilterService, FilterSnapshot, SyncBody};
#[cfg(feature = "fuzzing")]
pub(crate) use state::STATE_VERSION;
pub use state::{tags_for_items, tags_from_reader, ServerState, UpdateReport};
pub use tag::{tag_from_output, Tag};
