//! The client (APSI's receiver): the sans-IO core `receiver.rs` (cuckoo
//! hashing the OPRF'd items, encrypting the source powers, reading matches
//! and labels out of result packages) and the network driver `driver.rs`
//! ([`HeClient`]: parameters, OPRF round, query rounds over a channel).
//!
//! Public: [`HeClient`] and what a query returns; front ends usually go
//! through the facade (`he_psi::facade`), which adds padding, retries and
//! kept keys. The core stays crate-private: it is driven only here.

pub(crate) mod driver;
pub(crate) mod receiver;

pub use driver::{HeClient, QueryOutcome, QueryTimes};
