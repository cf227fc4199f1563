//! RFC 9497 oblivious pseudorandom function, mode OPRF (0x00), ciphersuite
//! `ristretto255-SHA512`.
//!
//! # What it gives
//!
//! The server holds a secret key `k`; the PRF is
//! `F(k, x) = SHA-512(len(x) || x || 0x0020 || k·H(x) || "Finalize")`, where
//! `H` hashes onto the ristretto255 group.
//!
//! * **Pseudorandomness.** Without `k`, outputs are indistinguishable from
//!   random (under the one-more gap Diffie–Hellman assumption). A client
//!   learns `F(k, x)` only for the inputs it queries, one per query.
//! * **Obliviousness.** The client sends `r·H(x)` for a uniformly random,
//!   non-zero blind `r`. That element is uniform in the group and independent
//!   of `x`, so the server learns nothing about the input or the output, even
//!   with unbounded computing power.
//! * **Forward secrecy for the client.** Because every query uses a fresh
//!   blind (never reused, never derived from the input), a recorded
//!   transcript stays useless to an attacker that later steals the server key
//!   or the server's state: this is the property the OPRF-based PSI of
//!   Baldi et al. relies on. [`blind`] and [`blind_batch`] always draw new
//!   blinds; there is deliberately no public way to choose one.
//!
//! # Example
//!
//! ```
//! use psikit_primitives::oprf::{self, BlindedElement, EvaluatedElement, ServerKey};
//! use rand_core::OsRng;
//!
//! let key = ServerKey::generate(&mut OsRng);
//!
//! // Client: blind the input and send the encoding.
//! let (blind, blinded) = oprf::blind(b"alice@example.com", &mut OsRng)?;
//! let request = blinded.to_bytes();
//!
//! // Server: decode (untrusted bytes), evaluate, reply.
//! let reply = key.blind_evaluate(&BlindedElement::from_bytes(&request)?).to_bytes();
//!
//! // Client: unblind. The server can compute the same value directly.
//! let evaluated = EvaluatedElement::from_bytes(&reply)?;
//! let output = oprf::finalize(b"alice@example.com", &blind, &evaluated)?;
//! assert_eq!(output, key.evaluate(b"alice@example.com")?);
//! # Ok::<(), oprf::OprfError>(())
//! ```
//!
//! # What it does not give
//!
//! Mode 0 is **not verifiable**. A malicious server can evaluate with a key
//! other than the one it uses for its own items (or a different key per
//! query), which makes the client's outputs wrong or lets the server tag
//! queries. It still cannot learn the client's inputs. Protocols that need
//! the server to be committed to one key must use VOPRF (mode 1), which this
//! module does not implement.
//!
//! # Why hand-written on curve25519-dalek
//!
//! Mode 0 needs only hashing to the group, one scalar multiplication per
//! party and SHA-512, so the whole construction fits in this file and can be
//! checked line by line against the RFC and its test vectors. Owning it lets
//! us shape the API for PSI: the server evaluates millions of its own items
//! with [`ServerKey::evaluate_batch`], and the client batches blinding and
//! unblinding, all spread over rayon. Batches work in chunks that share
//! inversions: unblinding inverts a chunk's blinds with one batched scalar
//! inversion, and every batch path multiplies by half the scalar so that
//! dalek's `double_and_compress_batch` can encode the whole chunk with one
//! field inversion instead of an inverse square root per point. Outputs are
//! byte-for-byte those of the single-item functions. On a CPU with AVX-512
//! IFMA the batch paths run on psikit's multi-buffer kernel instead
//! (eight points per vector, `crate::ristretto`; see [`batch_backend`]),
//! with the same outputs.
//!
//! # Side channels
//!
//! Operations on secrets (the server key, blinds, unblinded elements) use
//! dalek's constant-time scalar and point arithmetic. Code branches only on
//! public facts: input lengths, whether a wire element decodes, and the
//! negligible-probability events the RFC tells implementations to reject (a
//! zero scalar, an input hashing to the identity).
//!
//! # Threads
//!
//! The `*_batch` functions run on the current rayon pool: the global pool, or
//! the one entered with `ThreadPool::install`.

mod client;
mod hash;
mod server;
mod suite;
mod wire;

pub use client::{blind, blind_batch, finalize, finalize_batch, Blind};
pub use hash::expand_message_xmd;
pub use server::ServerKey;
pub use suite::{
    OprfError, Output, Result, CONTEXT_STRING, ELEMENT_LEN, MAX_INPUT_LEN, OUTPUT_LEN, SCALAR_LEN,
};
pub use wire::{BlindedElement, EvaluatedElement};

/// Which arithmetic the batch functions use on this CPU, for reports:
/// psikit's multi-buffer kernel, or curve25519-dalek.
pub fn batch_backend() -> &'static str {
    match crate::ristretto::Kernel::detect() {
        Some(kernel) => kernel.describe(),
        None => "curve25519-dalek (one point at a time)",
    }
}

#[cfg(test)]
mod tests;
