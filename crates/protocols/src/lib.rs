//! psikit's protocols, one module per family, built on the primitives,
//! structures and transport crates:
//!
//! * [`filter_psi`]: unbalanced PSI from a DH OPRF with an updatable cuckoo
//!   filter (Resende-Aranha / Baldi et al.).
//! * [`he_psi`]: unbalanced labeled PSI from homomorphic encryption (the
//!   APSI design of Cong et al.).
//! * [`rr16`]: malicious-secure PSI from OT extension and garbled Bloom
//!   filters (Rindal-Rosulek).
//! * [`service`]: the long-running server that routes requests to them.

pub mod common;
pub mod filter_psi;
pub mod he_psi;
pub mod rr16;
pub mod service;

#[cfg(test)]
mod codec_tests;
mod error;
mod keyfile;
mod oprf_wire;

pub use common::{Match, NoProgress, Progress};
pub use error::Error;
