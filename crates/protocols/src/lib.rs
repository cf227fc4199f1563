//! psikit's protocols, one module per family, built on the primitives,
//! structures and transport crates:
//!
//! * [`filter_psi`]: unbalanced PSI from a DH OPRF with an updatable cuckoo
//!   filter (Resende-Aranha / Baldi et al.).
//! * [`he_psi`]: unbalanced labeled PSI from homomorphic encryption (the
//!   APSI design of Cong et al.).
//! * [`rr16`]: malicious-secure PSI from OT extension and garbled Bloom
//!   filters (Rindal-Rosulek).
//! * [`vole_psi`]: fast balanced PSI from silent VOLE and an OKVS
//!   (Raghuraman-Rindal).
//! * [`cpsi`]: circuit PSI and what it computes on the intersection
//!   (cardinality, sums, threshold, union; Pinkas et al. with the EPC
//!   paper's framework).
//! * [`service`]: the long-running server that routes requests to them.

#[cfg(feature = "two-party")]
pub mod balanced;
pub mod common;
#[cfg(feature = "cpsi")]
pub mod cpsi;
#[cfg(feature = "filter")]
pub mod filter_psi;
#[cfg(feature = "he")]
pub mod he_psi;
#[cfg(feature = "two-party")]
pub mod jobs;
#[cfg(feature = "rr16")]
pub mod rr16;
#[cfg(feature = "net")]
pub mod service;
#[cfg(feature = "net")]
pub mod serving;
#[cfg(feature = "vole")]
pub mod vole_psi;

#[cfg(test)]
mod codec_tests;
mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
#[cfg(feature = "unbalanced")]
mod keyfile;
#[cfg(feature = "unbalanced")]
pub mod oprf_wire;

pub use common::{Match, NoProgress, Progress};
pub use error::{one_line, Error, Violation};
/// CSV keys, normalisation and synthetic data: the item encoding every
/// front end must share, re-exported so front ends need no other crate.
pub use psikit_io as io;
/// The allocator settings (keep freed memory for reuse, huge pages).
pub use psikit_primitives::memory;
/// The OPRF of the unbalanced protocols (RFC 9497, ristretto255-SHA512),
/// for front ends that key, derive or time it.
pub use psikit_primitives::oprf;

// Every key a CSV reader accepts is one the OPRF accepts.
const _: () = assert!(psikit_io::MAX_KEY_BYTES == psikit_primitives::oprf::MAX_INPUT_LEN);
