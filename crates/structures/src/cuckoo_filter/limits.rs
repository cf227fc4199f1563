//! The filter's supported ranges and its eviction bound, in a file of their
//! own because the parameters, the filter and the error messages all read
//! them.

/// Smallest supported fingerprint width in bits.
pub const MIN_FINGERPRINT_BITS: u32 = 4;
/// Largest supported fingerprint width in bits.
pub const MAX_FINGERPRINT_BITS: u32 = 64;
/// Largest supported number of slots per bucket.
pub const MAX_BUCKET_SIZE: u32 = 8;
/// Largest supported number of buckets (2^40).
pub const MAX_NUM_BUCKETS: u64 = 1 << 40;

/// Maximum number of evictions one insertion may perform before it gives up
/// and reports [`FilterError::Full`](super::FilterError::Full).
pub const MAX_KICKS: usize = 500;
