//! Cuckoo filter (Fan, Andersen, Kaminsky, Mitzenmacher, CoNEXT 2014) tailored
//! to unbalanced private set intersection.
//!
//! # Use in psikit
//! The server evaluates an OPRF on each of its items and hashes every output
//! to a uniformly random 16-byte [`Tag`]. It inserts the tags into a
//! [`CuckooFilter`] and sends the filter to clients, who look up the tags of
//! their own items. When the server's set changes it applies inserts and
//! deletes with change tracking on ([`CuckooFilter::set_track_changes`]) and
//! ships only the changed slots ([`CuckooFilter::export_slots`] /
//! [`CuckooFilter::import_slots`]), so each client's copy stays
//! byte-identical to the server's.
//!
//! ```
//! use psikit_structures::{CuckooFilter, CuckooFilterParams};
//!
//! let params = CuckooFilterParams::for_capacity(1000, 30, 4, 0.9)?;
//! let mut server = CuckooFilter::new(params, 7)?;
//! server.insert(&[1u8; 16])?;
//! let mut client = CuckooFilter::from_bytes(&server.to_bytes(), 1 << 20)?;
//! assert!(client.contains(&[1u8; 16]));
//!
//! server.set_track_changes(true);
//! server.insert(&[2u8; 16])?;
//! let changed = server.take_changed_slots();
//! client.import_slots(&changed, &server.export_slots(&changed))?;
//! assert_eq!(client.to_bytes(), server.to_bytes());
//! # Ok::<(), psikit_structures::FilterError>(())
//! ```
//!
//! # Hashing scheme
//! Tags are PRF outputs and already uniform, so the filter does not hash
//! keys; it slices the tag (both halves read little-endian):
//! * primary bucket `i1 = fastrange(tag[0..8], m)`, where
//!   `fastrange(x, m) = (x * m) >> 64` maps a uniform 64-bit value to `0..m`;
//! * fingerprint `fp = fastrange(tag[8..16], 2^f - 1) + 1`, an `f`-bit value
//!   that is never zero (zero marks an empty slot);
//! * alternate bucket `alt(i, fp) = (c(fp) + m - i) mod m` with
//!   `c(fp) = fastrange(mix64(fp), m)` (`mix64` is the splitmix64
//!   finalizer). `alt` is an involution (`alt(alt(i, fp), fp) == i`) for any
//!   `m`, which is what partial-key cuckoo hashing needs, and unlike the
//!   usual XOR trick it does not require `m` to be a power of two. `alt(i, fp)`
//!   may equal `i`, in which case the item has a single candidate bucket.
//!
//! # Insertion
//! An insert uses a free slot in either candidate bucket if there is one;
//! otherwise it tries to move one resident of a candidate bucket to a free
//! slot in that resident's other bucket (one-step lookahead), and only then
//! falls back to the classic random-walk eviction, bounded by [`MAX_KICKS`],
//! with the same lookahead at every step. The lookahead keeps eviction
//! chains short at high load, which matters because every bucket an insert
//! touches must be shipped in the next delta. A failed insert rolls back
//! its evictions, leaving the filter bit-for-bit unchanged.
//!
//! # False-positive rate
//! A lookup compares `fp` against the `2b` slots of two buckets, so with
//! fingerprints of `f` bits the probability of a false positive at load
//! factor `α` is about `1 - (1 - 2^-f)^(2bα)`
//! ([`CuckooFilterParams::expected_fpr`]) and at most `2b / 2^f`
//! ([`CuckooFilterParams::fpr_upper_bound`]). The resulting space cost is
//! `(log2(1/ε) + log2(2b)) / α` bits per item
//! ([`theoretical_bits_per_item`]).
//!
//! # Why hand-written
//! The protocol needs things general-purpose cuckoo-filter crates do not
//! provide together: keys that are sliced rather than hashed, any number of
//! buckets (so the filter can be sized within a few percent of its target
//! load), bit-exact packing with a stable wire format, atomic inserts that
//! leave the filter untouched on failure, and slot-level change tracking
//! with export/import of deltas.
//!
//! # Files
//! This file only declares the parts and re-exports them: the filter in
//! `filter.rs`, its parameters in `params.rs`, the supported ranges and the
//! eviction bound in `limits.rs`, the error in `error.rs`, the bit table in
//! `bits.rs`, the serialized layout in `format.rs` and its encoding and the
//! slot deltas in `wire.rs`.

mod bits;
mod error;
mod filter;
mod format;
mod limits;
mod params;
mod wire;

pub use error::FilterError;
pub use filter::{CuckooFilter, Tag};
pub use format::{FORMAT_VERSION, HEADER_LEN};
pub use limits::{
    MAX_BUCKET_SIZE, MAX_FINGERPRINT_BITS, MAX_KICKS, MAX_NUM_BUCKETS, MIN_FINGERPRINT_BITS,
};
pub use params::{theoretical_bits_per_item, CuckooFilterParams};
