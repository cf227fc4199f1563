//! Cryptographic primitives used by psikit's protocols: OPRF now; OT and HE
//! wrappers later.
//!
//! * [`oprf`]: the RFC 9497 oblivious pseudorandom function in mode OPRF
//!   (0x00) over the `ristretto255-SHA512` ciphersuite, with batch APIs that
//!   spread work over a rayon thread pool.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod oprf;
