//! The one error type of the crate.

use std::fmt::Display;

/// Everything that can go wrong in `psikit-he`.
///
/// Decoders and evaluator methods return these instead of letting the fhe
/// backend reach one of its `assert!`s, so a malformed message from a peer is
/// an error value, never a crash.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeError {
    /// The degree has no entry in the 128-bit security table.
    #[error("polynomial degree {0} is not supported (use 1024, 2048, 4096, 8192, 16384 or 32768)")]
    UnsupportedDegree(usize),
    /// The coefficient moduli are too large for 128-bit security.
    #[error(
        "coefficient moduli total {total_bits} bits, above the 128-bit security limit of \
         {max_bits} bits at degree {degree}"
    )]
    Insecure {
        /// Polynomial degree.
        degree: usize,
        /// Sum of the bit lengths of all moduli, special prime included.
        total_bits: usize,
        /// The limit for this degree.
        max_bits: usize,
    },
    /// Fewer than two coefficient moduli (one data prime plus the special prime).
    #[error(
        "need at least 2 coefficient moduli (the last one is the key-switching prime), got {0}"
    )]
    TooFewModuli(usize),
    /// No coefficient modulus at all.
    #[error("need at least one coefficient modulus")]
    NoModuli,
    /// Relinearization asked of parameters without a key-switching prime
    /// ([`crate::params::HeParams::without_key_switching`]).
    #[error("these parameters have no key-switching prime, so no relinearization key")]
    NoKeySwitching,
    /// A flooding bound too large for the ciphertext modulus.
    #[error("flooding bound of {bits} bits does not fit below the ciphertext modulus")]
    FloodTooLarge {
        /// Bits of the requested bound.
        bits: u32,
    },
    /// A requested modulus size outside what fhe supports.
    #[error("coefficient modulus {index} has {bits} bits; fhe supports 10 to 62")]
    ModulusSize {
        /// Position in the list.
        index: usize,
        /// Requested bits.
        bits: usize,
    },
    /// No (more) primes of this size that are 1 mod `modulus`.
    #[error("no {bits}-bit prime congruent to 1 mod {modulus} is left")]
    NoPrime {
        /// Requested bits.
        bits: usize,
        /// The congruence modulus, 2n.
        modulus: u64,
    },
    /// The plaintext modulus is not prime.
    #[error("plaintext modulus {0} is not prime")]
    PlainNotPrime(u64),
    /// The plaintext modulus does not allow SIMD batching.
    #[error("plaintext modulus {t} is not 1 mod 2n = {two_n}, so slots cannot be batched")]
    PlainNotBatching {
        /// Plaintext modulus.
        t: u64,
        /// Twice the degree.
        two_n: u64,
    },
    /// The plaintext modulus is not below the first coefficient modulus.
    #[error(
        "plaintext modulus {t} must be below the first coefficient modulus {q1}, which is \
         all that is left at the lowest level"
    )]
    PlainTooLarge {
        /// Plaintext modulus.
        t: u64,
        /// First coefficient modulus.
        q1: u64,
    },
    /// The plaintext modulus equals one of the generated coefficient moduli.
    #[error("plaintext modulus {0} equals one of the coefficient moduli")]
    PlainIsCoefficientModulus(u64),
    /// Two objects made from different `HeParams` were combined.
    #[error("objects made from different HeParams were combined")]
    ParamsMismatch,
    /// A ciphertext is not at the level an operation needs.
    #[error("{what}: ciphertext at level {found}, expected level {expected}")]
    WrongLevel {
        /// The operation.
        what: &'static str,
        /// Level the operation needs.
        expected: usize,
        /// Level found.
        found: usize,
    },
    /// A ciphertext has the wrong number of polynomials.
    #[error("{what}: ciphertext has {found} parts, expected {expected}")]
    WrongParts {
        /// The operation.
        what: &'static str,
        /// Parts the operation needs.
        expected: usize,
        /// Parts found.
        found: usize,
    },
    /// More slot values than the degree.
    #[error("{got} slot values given, at most {max} fit in one plaintext")]
    TooManySlots {
        /// Values given.
        got: usize,
        /// Slot count.
        max: usize,
    },
    /// A slot value is not reduced modulo the plaintext modulus.
    #[error("slot {index} holds {value}, which is not below the plaintext modulus {modulus}")]
    SlotOutOfRange {
        /// Slot index.
        index: usize,
        /// Offending value.
        value: u64,
        /// Plaintext modulus.
        modulus: u64,
    },
    /// A dot product with no terms or with unequal term counts.
    #[error(
        "dot product needs as many ciphertexts as plaintexts, at least one (got {cts} and {pts})"
    )]
    DotLengths {
        /// Ciphertexts given.
        cts: usize,
        /// Plaintexts given.
        pts: usize,
    },
    /// Encoded bytes of the wrong length.
    #[error("{what}: {found} bytes, expected exactly {expected}")]
    WireLength {
        /// What was being decoded.
        what: &'static str,
        /// Exact length for these parameters.
        expected: usize,
        /// Length received.
        found: usize,
    },
    /// An encoded coefficient is not below its modulus (or padding bits are set).
    #[error("{what}: coefficient {index} is not below its modulus")]
    WireCoefficient {
        /// What was being decoded.
        what: &'static str,
        /// Index of the coefficient in the encoding.
        index: usize,
    },
    /// More low bits to drop than a result coefficient has, less one.
    #[error("cannot drop {drop_bits} bits from result coefficients, at most {max_drop_bits}")]
    DropBits {
        /// Bits asked for.
        drop_bits: u32,
        /// `bits(q_1) - 1`.
        max_drop_bits: u32,
    },
    /// Only fresh encryptions carry the seed the compact query form needs.
    #[error("ciphertext is not a fresh seeded encryption, so it has no compact query form")]
    NotSeeded,
    /// An error reported by the fhe backend (its types are kept out of this API).
    #[error("fhe backend: {0}")]
    Backend(String),
}

/// Wraps an fhe or fhe-math error without exposing its type.
pub(crate) fn backend(e: impl Display) -> HeError {
    HeError::Backend(e.to_string())
}
