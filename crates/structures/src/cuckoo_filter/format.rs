//! The serialized filter's layout, apart from its encoder (`wire.rs`)
//! because the parameters size it too (`CuckooFilterParams::serialized_len`).
//!
//! Filter layout (all integers little-endian):
//!
//! | offset | size | field                                  |
//! |--------|------|----------------------------------------|
//! | 0      | 1    | format version ([`FORMAT_VERSION`])    |
//! | 1      | 1    | fingerprint_bits                       |
//! | 2      | 1    | bucket_size                            |
//! | 3      | 8    | num_buckets                            |
//! | 11     | 8    | item count                             |
//! | 19     | ...  | packed table, `ceil(m*b*f / 8)` bytes  |
//!
//! The table is a bitstring in which bucket `i`, slot `j` occupies bits
//! `(i*b + j)*f .. (i*b + j + 1)*f`; bit `k` is bit `k % 8` of byte `k / 8`.
//! Padding bits in the last byte are zero. A delta is the same packing
//! restricted to a list of slots, concatenated in list order.

/// Version byte written by [`CuckooFilter::to_bytes`](super::CuckooFilter::to_bytes).
pub const FORMAT_VERSION: u8 = 1;
/// Length of the serialization header in bytes.
pub const HEADER_LEN: usize = 19;
