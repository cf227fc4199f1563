//! Data structures used by psikit's private-set-intersection protocols.
//!
//! The main item is [`CuckooFilter`], a compact approximate-membership filter
//! that an unbalanced-PSI server fills with pseudorandom tags (hashes of OPRF
//! outputs) and ships to clients, together with bucket-level deltas so that a
//! client's copy can be kept byte-identical to the server's after updates.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cuckoo_filter;

pub use cuckoo_filter::{
    theoretical_bits_per_item, CuckooFilter, CuckooFilterParams, FilterError, Tag, FORMAT_VERSION,
    HEADER_LEN, MAX_KICKS,
};
