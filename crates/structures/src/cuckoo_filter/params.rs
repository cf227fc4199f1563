//! Filter parameters, validation and sizing from a target false-positive rate.

use super::error::FilterError;
use super::format::HEADER_LEN;
use super::limits::{MAX_BUCKET_SIZE, MAX_FINGERPRINT_BITS, MAX_NUM_BUCKETS, MIN_FINGERPRINT_BITS};

/// Shape of a [`CuckooFilter`](super::CuckooFilter): fingerprint width,
/// slots per bucket and number of buckets (any value, not only powers of two).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CuckooFilterParams {
    /// Bits per fingerprint, `4..=64`.
    pub fingerprint_bits: u32,
    /// Slots per bucket, `1..=8`.
    pub bucket_size: u32,
    /// Number of buckets, `1..=2^40`.
    pub num_buckets: u64,
}

impl CuckooFilterParams {
    /// Checks every field against its supported range. The ranges keep all
    /// size arithmetic within `u64` (at most 2^49 table bits).
    pub fn validate(&self) -> Result<(), FilterError> {
        if !(MIN_FINGERPRINT_BITS..=MAX_FINGERPRINT_BITS).contains(&self.fingerprint_bits) {
            return Err(FilterError::InvalidParams(format!(
                "fingerprint_bits = {} is outside {MIN_FINGERPRINT_BITS}..={MAX_FINGERPRINT_BITS}",
                self.fingerprint_bits
            )));
        }
        if !(1..=MAX_BUCKET_SIZE).contains(&self.bucket_size) {
            return Err(FilterError::InvalidParams(format!(
                "bucket_size = {} is outside 1..={MAX_BUCKET_SIZE}",
                self.bucket_size
            )));
        }
        if !(1..=MAX_NUM_BUCKETS).contains(&self.num_buckets) {
            return Err(FilterError::InvalidParams(format!(
                "num_buckets = {} is outside 1..=2^40",
                self.num_buckets
            )));
        }
        Ok(())
    }

    /// Sizes a filter for `items` items at the given `load` (fraction of
    /// slots filled, in (0, 1]) so that a lookup's false-positive probability
    /// is at most `2^-fpr_log2` even when the filter is full.
    ///
    /// `fingerprint_bits = fpr_log2 + ceil(log2(2 * bucket_size))` (the
    /// smallest `f` with `2b / 2^f <= 2^-fpr_log2`) and
    /// `num_buckets = max(1, ceil(items / (bucket_size * load)))`.
    pub fn for_capacity(
        items: u64,
        fpr_log2: u32,
        bucket_size: u32,
        load: f64,
    ) -> Result<Self, FilterError> {
        if !(load > 0.0 && load <= 1.0) {
            return Err(FilterError::InvalidParams(format!(
                "load = {load} is outside (0, 1]"
            )));
        }
        if !(1..=MAX_BUCKET_SIZE).contains(&bucket_size) {
            return Err(FilterError::InvalidParams(format!(
                "bucket_size = {bucket_size} is outside 1..={MAX_BUCKET_SIZE}"
            )));
        }
        let two_b = 2 * u64::from(bucket_size);
        let ceil_log2_two_b = 64 - (two_b - 1).leading_zeros();
        let fingerprint_bits = fpr_log2.saturating_add(ceil_log2_two_b);
        let buckets = (items as f64 / (f64::from(bucket_size) * load)).ceil();
        // `as` saturates for huge values; validate() then rejects them.
        let num_buckets = (buckets as u64).max(1);
        let params = Self {
            fingerprint_bits,
            bucket_size,
            num_buckets,
        };
        params.validate()?;
        Ok(params)
    }

    /// Total number of slots (`bucket_size * num_buckets`).
    pub fn capacity_slots(&self) -> u64 {
        self.num_buckets.saturating_mul(u64::from(self.bucket_size))
    }

    /// Bits occupied by one bucket (`bucket_size * fingerprint_bits`).
    pub fn bucket_bits(&self) -> u64 {
        u64::from(self.bucket_size) * u64::from(self.fingerprint_bits)
    }

    /// Bits of the packed table (saturating for out-of-range parameters).
    pub fn table_bits(&self) -> u64 {
        self.num_buckets.saturating_mul(self.bucket_bits())
    }

    /// Bytes of the packed table, i.e. `table_bits` rounded up to a byte.
    pub fn table_bytes(&self) -> u64 {
        self.table_bits().div_ceil(8)
    }

    /// Length of [`CuckooFilter::to_bytes`](super::CuckooFilter::to_bytes)
    /// output for these parameters: header plus packed table.
    pub fn serialized_len(&self) -> u64 {
        self.table_bytes().saturating_add(HEADER_LEN as u64)
    }

    /// Worst-case false-positive probability of one lookup, reached when
    /// every slot is full: `2b / 2^f` (union bound over the `2b` slots of the
    /// two candidate buckets).
    pub fn fpr_upper_bound(&self) -> f64 {
        2.0 * f64::from(self.bucket_size) * (-f64::from(self.fingerprint_bits)).exp2()
    }

    /// Estimated false-positive probability at a given `load`:
    /// `1 - (1 - 2^-f)^(2 b load)`, computed with `ln_1p`/`exp_m1` so that it
    /// stays accurate for large `f`.
    pub fn expected_fpr(&self, load: f64) -> f64 {
        let per_slot = (-f64::from(self.fingerprint_bits)).exp2();
        let probes = 2.0 * f64::from(self.bucket_size) * load;
        -(probes * (-per_slot).ln_1p()).exp_m1()
    }
}

/// Space cost predicted by the cuckoo-filter analysis:
/// `(log2(1/eps) + log2(2b)) / load` bits per stored item for a target
/// false-positive rate `eps`, bucket size `b` and load factor `load`.
pub fn theoretical_bits_per_item(eps: f64, bucket_size: u32, load: f64) -> f64 {
    ((1.0 / eps).log2() + (2.0 * f64::from(bucket_size)).log2()) / load
}
