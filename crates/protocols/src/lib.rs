//! psikit's protocols, one module per family, built on the primitives,
//! structures and transport crates:
//!
//! * [`filter_psi`]: unbalanced PSI from a DH OPRF with an updatable cuckoo
//!   filter (Resende-Aranha / Baldi et al.).
//! * [`service`]: the long-running server that routes requests to them.

pub mod filter_psi;
pub mod he_psi;
pub mod rr16;
pub mod service;

mod error;
mod keyfile;

pub use error::Error;
