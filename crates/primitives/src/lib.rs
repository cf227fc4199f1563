//! Cryptographic primitives used by psikit's protocols, and the one
//! run-time CPU dispatch of their hot kernels.
//!
//! * [`cpu`]: which instruction-set extensions the kernels may use.
//! * [`oprf`]: the RFC 9497 oblivious pseudorandom function in mode OPRF
//!   (0x00) over the `ristretto255-SHA512` ciphersuite, with batch APIs that
//!   spread work over a rayon thread pool.
//! * [`memory`]: the allocator settings (freed memory kept, huge pages).
//! * [`sha256`]: SHA-256 of many one-block messages.

// The only unsafe code is the CPUID read in `cpu`, the allocator settings
// in `memory`, the SHA kernel in `sha256` and the IFMA kernel in
// `ristretto`.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod cpu;
pub mod memory;
pub mod oprf;
mod ristretto;
pub mod sha256;
