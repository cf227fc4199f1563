//! Error type of the cuckoo filter.

use thiserror::Error;

use super::limits::MAX_KICKS;

/// Everything that can go wrong when building, updating or decoding a
/// [`CuckooFilter`](super::CuckooFilter).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FilterError {
    /// An insertion could not find a free slot within the eviction bound.
    /// The filter is left exactly as it was before the call.
    #[error(
        "cuckoo filter is full: no free slot found within {} evictions; filter unchanged",
        MAX_KICKS
    )]
    Full,
    /// Parameters outside the supported ranges, or an unusable sizing request.
    #[error("invalid cuckoo filter parameters: {0}")]
    InvalidParams(String),
    /// Serialized filter with a format version this code does not understand.
    #[error(
        "unsupported cuckoo filter format version {found} (this build reads version {expected})"
    )]
    UnsupportedVersion {
        /// Version byte found in the input.
        found: u8,
        /// Version this build writes and reads.
        expected: u8,
    },
    /// The serialized filter declares a size above the caller's limit.
    #[error(
        "serialized cuckoo filter would be {size} bytes, above the allowed maximum of {max} bytes"
    )]
    TooLarge {
        /// Size implied by the header, in bytes.
        size: u64,
        /// Caller-supplied limit, in bytes.
        max: usize,
    },
    /// Input length does not match the length implied by the header or indices.
    #[error("wrong input length: expected {expected} bytes, got {actual}")]
    WrongLength {
        /// Length implied by the parameters / header.
        expected: u64,
        /// Length actually supplied.
        actual: usize,
    },
    /// The header's item count disagrees with the fingerprints in the table.
    #[error(
        "item count in header ({declared}) does not match the {actual} fingerprints in the table"
    )]
    CountMismatch {
        /// Count stated in the header.
        declared: u64,
        /// Non-empty slots actually present.
        actual: u64,
    },
    /// Bits after the end of the packed table (in its last byte) are not zero,
    /// so the encoding is not canonical.
    #[error("non-zero padding bits after the packed table")]
    NonZeroPadding,
    /// A slot index in a delta is not below the number of slots.
    #[error("slot index {index} out of range (the filter has {num_slots} slots)")]
    SlotOutOfRange {
        /// Offending index.
        index: u64,
        /// Number of slots of the filter.
        num_slots: u64,
    },
    /// Slot indices in a delta are not strictly increasing.
    #[error(
        "slot indices must be strictly increasing; index {index} at position {position} is not"
    )]
    UnsortedIndices {
        /// Position in the index list.
        position: usize,
        /// Index found at that position.
        index: u64,
    },
}
