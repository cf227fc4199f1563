//! Data structures used by psikit's private-set-intersection protocols.
//!
//! The main item is [`CuckooFilter`], a compact approximate-membership filter
//! that an unbalanced-PSI server fills with pseudorandom tags (hashes of OPRF
//! outputs) and ships to clients, together with bucket-level deltas so that a
//! client's copy can be kept byte-identical to the server's after updates.
//!
//! [`CuckooTable`] is the client-side cuckoo hash table of the HE PSI
//! protocol: one item per bin, with a location function shared with the
//! server ([`cuckoo_locations`]).
//!
//! [`okvs`] is an oblivious key-value store (binned random-band OKVS,
//! GF(2)-linear), the encoding VOLE-based PSI and OPPRFs are built on.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cuckoo_filter;
pub mod cuckoo_table;
pub mod okvs;

pub use cuckoo_filter::{
    theoretical_bits_per_item, CuckooFilter, CuckooFilterParams, FilterError, Tag, FORMAT_VERSION,
    HEADER_LEN, MAX_KICKS,
};
pub use cuckoo_table::{
    cuckoo_location, cuckoo_locations, distinct_locations, CuckooTable, CuckooTableError,
    Locations, Placement, TableEntry,
};
pub use okvs::{Fill, Okvs, OkvsError, OkvsParams};
