//! The OKVS's one error, in its own file because both the parameter choice
//! (`params.rs`) and the API in `mod.rs` return it.

use thiserror::Error;

/// Why parameters could not be chosen, or an encode or decode was refused.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum OkvsError {
    /// Security parameter outside `1..=128`.
    #[error("OKVS statistical security must be in 1..=128 bits, got {0}")]
    Security(u32),
    /// Too many keys for the table's sizes.
    #[error("an OKVS for {0} keys is too large")]
    TooLarge(usize),
    /// No table sizes meet the failure bound (not expected for any `n`;
    /// reported rather than searched for ever).
    #[error("no OKVS sizes for {n} keys meet the 2^-{security} failure bound")]
    NoParameters {
        /// Number of keys.
        n: usize,
        /// The statistical security asked for.
        security: u32,
    },
    /// `keys` and `values` have different lengths.
    #[error("{keys} keys but {values} values")]
    LengthMismatch {
        /// Number of keys.
        keys: usize,
        /// Number of values.
        values: usize,
    },
    /// More keys than the parameters were chosen for.
    #[error("{keys} keys exceed the OKVS capacity of {capacity}")]
    OverCapacity {
        /// Number of keys.
        keys: usize,
        /// The parameters' capacity.
        capacity: usize,
    },
    /// The same key appears twice with different values.
    #[error("key at index {second} repeats the key at index {first} with another value")]
    DuplicateKey {
        /// Index of the first occurrence.
        first: usize,
        /// Index of the conflicting occurrence.
        second: usize,
    },
    /// The rows were dependent: the event of probability below
    /// `2^-security` (retry with another seed).
    #[error("OKVS encoding failed (probability below 2^-{0}); retry with another seed")]
    EncodeFailed(u32),
    /// A table of the wrong length was given to decode.
    #[error("OKVS table has {got} entries, expected {expected}")]
    TableLength {
        /// Entries the parameters give.
        expected: usize,
        /// Entries given.
        got: usize,
    },
    /// Bins decoded out of order, or not all of them before the end.
    #[error("OKVS bins taken out of order: expected bin {expected}, got {got}")]
    BinOrder {
        /// The bin due next.
        expected: usize,
        /// The bin given.
        got: usize,
    },
    /// `keys` and `out` have different lengths.
    #[error("{keys} keys but room for {out} decoded values")]
    OutputLength {
        /// Number of keys.
        keys: usize,
        /// Length of the output.
        out: usize,
    },
}
