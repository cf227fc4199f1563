//! A small BFV homomorphic-encryption layer for psikit's APSI-style labeled
//! PSI (issue 4), built on the pure-Rust `fhe` 0.1.1 crate.
//!
//! The client makes a [`SecretKey`] and [`RelinKey`], encrypts slot vectors
//! ([`SecretKey::encrypt_slots`]) and sends them compactly ([`wire`]). The
//! server stores its polynomials as [`CompactPoly`], turns them into
//! [`PlainPoly`] per query, evaluates with an [`Evaluator`] and sends results
//! switched to the lowest level. Parameters are an [`HeParams`].
//!
//! Three shortcuts keep the server fast and the answer small, each giving
//! the same decryption as the plain path: factors of several products are
//! lifted once ([`Evaluator::prepare`], [`Evaluator::mul_prepared`]); powers
//! only used in dot products may stay unrelinearized (3 parts) until the one
//! [`Evaluator::relin`] of each result; and results may drop low bits that
//! only hold noise ([`wire::encode_result_ct_dropped`]).
//!
//! Security choices, and why:
//!
//! * **128-bit moduli bound.** [`HeParams::new`] refuses coefficient moduli
//!   whose total size exceeds the HomomorphicEncryption.org bound for the
//!   degree ([`security`]), counting the special key-switching prime, and
//!   refuses degrees outside the table.
//! * **Ternary secret.** That bound assumes a ternary secret, so keys are
//!   sampled uniformly from {-1, 0, 1} with a CSPRNG instead of fhe's default
//!   centered-binomial secret; it also lowers noise growth. Error terms use
//!   fhe's centered binomial with variance 11 (σ ≈ 3.32 ≥ 3.2).
//! * **Special prime.** The last modulus is only used by the relinearization
//!   key (SEAL's technique); ciphertexts start one level below it.
//! * **Seeded ciphertexts.** Fresh encryptions are secret-key encryptions
//!   whose uniform half is expanded from a 32-byte seed, so a query
//!   ciphertext travels as seed plus one polynomial. The seed is public by
//!   design, as the uniform polynomial would be.
//! * **Untrusted input.** Decoders use our own packing with exact lengths and
//!   range checks; every evaluator method checks parameters, levels and part
//!   counts before calling fhe, whose operators `assert!` on mismatches.
//! * **No noise flooding**, as in APSI: a result's noise may depend on the
//!   server's polynomials (semi-honest model, design note section 2).
//!   Protocols that must hide their evaluation from the key owner (circuit
//!   PSI's equality-preserving compression) add
//!   [`PublicKey::encrypt_zero_flooded`] instead.
//!
//! For additive use only (plaintext products and sums, no relinearization),
//! [`HeParams::without_key_switching`] drops the special prime, and
//! [`PublicKey`], [`dot_plain`], [`Ciphertext::add_ciphertext`],
//! [`Ciphertext::add_plain_slots`], [`Ciphertext::switch_to_lowest`] and
//! [`PlainPoly::from_slots`] work without an [`Evaluator`]; their noise
//! bounds are in the `additive` module's docs and [`FRESH_NOISE_BOUND`].
//!
//! No `fhe` or `rand` 0.9 type appears in this API, so callers stay on the
//! workspace's rand 0.8 and the backend can be swapped.

#![deny(unsafe_code)]
#![warn(missing_docs)]

mod additive;
mod ciphertext;
mod dropped;
mod encode;
mod error;
mod eval;
mod keys;
mod pack;
mod params;
mod prepared;
mod scale;
pub mod security;
pub mod wire;

pub use additive::{dot_plain, public_key_noise_bound, PublicKey, FRESH_NOISE_BOUND};
pub use ciphertext::Ciphertext;
pub use encode::{CompactPoly, PlainPoly};
pub use error::HeError;
pub use eval::Evaluator;
pub use keys::{RelinKey, SecretKey};
pub use params::HeParams;
pub use prepared::Prepared;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_perf;
