//! Wire formats: whole-filter serialization and slot deltas, in the layout
//! `format.rs` describes.

use super::bits::BitTable;
use super::error::FilterError;
use super::filter::CuckooFilter;
use super::format::{FORMAT_VERSION, HEADER_LEN};
use super::params::CuckooFilterParams;

/// Reads the little-endian `u64` at `offset`, if the input is long enough.
fn read_u64(bytes: &[u8], offset: usize) -> Option<u64> {
    let field = bytes.get(offset..offset + 8)?;
    field.try_into().ok().map(u64::from_le_bytes)
}

/// Parses and validates the header, returning the parameters and the
/// declared item count.
fn parse_header(bytes: &[u8]) -> Result<(CuckooFilterParams, u64), FilterError> {
    let truncated = || FilterError::WrongLength {
        expected: HEADER_LEN as u64,
        actual: bytes.len(),
    };
    let (&version, rest) = bytes.split_first().ok_or_else(truncated)?;
    if version != FORMAT_VERSION {
        return Err(FilterError::UnsupportedVersion {
            found: version,
            expected: FORMAT_VERSION,
        });
    }
    let (&f, &b) = match rest {
        [f, b, ..] => (f, b),
        _ => return Err(truncated()),
    };
    let num_buckets = read_u64(bytes, 3).ok_or_else(truncated)?;
    let count = read_u64(bytes, 11).ok_or_else(truncated)?;
    let params = CuckooFilterParams {
        fingerprint_bits: u32::from(f),
        bucket_size: u32::from(b),
        num_buckets,
    };
    params.validate()?;
    Ok((params, count))
}

impl CuckooFilter {
    /// Serializes the filter: header followed by the packed table (see the
    /// layout documented in the `format` module source). Eviction PRNG state and change tracking are
    /// not included.
    pub fn to_bytes(&self) -> Vec<u8> {
        let p = &self.params;
        let mut out = Vec::with_capacity(p.serialized_len() as usize);
        out.push(FORMAT_VERSION);
        out.push(p.fingerprint_bits as u8);
        out.push(p.bucket_size as u8);
        out.extend_from_slice(&p.num_buckets.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
        out.extend_from_slice(&self.table.to_le_bytes(p.table_bits()));
        out
    }

    /// Decodes a filter produced by [`Self::to_bytes`], accepting at most
    /// `max_bytes` of serialized size.
    ///
    /// Rejects unknown versions, out-of-range parameters, sizes above
    /// `max_bytes`, inputs whose length does not match the header, non-zero
    /// padding, and item counts that disagree with the table. The size check
    /// happens before any allocation, and the allocation is then bounded by
    /// the input length. The eviction PRNG gets the fixed seed 0; see
    /// [`Self::reseed`].
    pub fn from_bytes(bytes: &[u8], max_bytes: usize) -> Result<Self, FilterError> {
        let (params, declared) = parse_header(bytes)?;
        let size = params.serialized_len();
        if size > max_bytes as u64 {
            return Err(FilterError::TooLarge {
                size,
                max: max_bytes,
            });
        }
        if bytes.len() as u64 != size {
            return Err(FilterError::WrongLength {
                expected: size,
                actual: bytes.len(),
            });
        }
        let table = BitTable::from_le_bytes(&bytes[HEADER_LEN..], params.table_bits())?;
        let mut filter = Self::from_table(params, table, 0, 0);
        let actual = filter.count_occupied();
        if actual != declared {
            return Err(FilterError::CountMismatch { declared, actual });
        }
        filter.len = actual;
        Ok(filter)
    }

    /// Counts non-empty slots by scanning the whole table.
    fn count_occupied(&self) -> u64 {
        (0..self.params.num_buckets)
            .map(|bucket| self.bucket_occupancy(bucket))
            .sum()
    }

    /// Packs the fingerprints in the given slots (global slot indices, as
    /// from [`Self::take_changed_slots`]), in the given order, into
    /// `ceil(indices.len() * f / 8)` bytes (zero-padded). Used by the server
    /// to ship the slots that changed.
    ///
    /// # Panics
    /// If an index is not below `capacity_slots` (indices come from the
    /// server's own filter, never from the network).
    pub fn export_slots(&self, indices: &[u64]) -> Vec<u8> {
        let f = u64::from(self.params.fingerprint_bits);
        let nbits = indices.len() as u64 * f;
        let mut out = BitTable::zeroed(nbits).expect("export size bounded by the filter's size");
        for (k, &slot) in indices.iter().enumerate() {
            assert!(
                slot < self.params.capacity_slots(),
                "slot index {slot} out of range ({} slots)",
                self.params.capacity_slots()
            );
            out.copy_from(k as u64 * f, &self.table, slot * f, f);
        }
        out.to_le_bytes(nbits)
    }

    /// Overwrites the given slots with packed fingerprints from
    /// [`Self::export_slots`] and updates the item count. Indices must be
    /// strictly increasing and below `capacity_slots`, and `packed` must have
    /// exactly the matching length with zero padding. All checks happen
    /// before any write, so on error the filter is unchanged.
    pub fn import_slots(&mut self, indices: &[u64], packed: &[u8]) -> Result<(), FilterError> {
        self.check_indices(indices)?;
        let f = self.params.fingerprint_bits;
        let fw = u64::from(f);
        // indices.len() <= capacity_slots <= 2^43 after the check: no overflow.
        let src = BitTable::from_le_bytes(packed, indices.len() as u64 * fw)?;
        for (k, &slot) in indices.iter().enumerate() {
            let pos = slot * fw;
            let was_occupied = self.table.get(pos, f) != 0;
            let value = src.get(k as u64 * fw, f);
            self.table.set(pos, f, value);
            self.len = self.len - u64::from(was_occupied) + u64::from(value != 0);
            self.mark_changed(pos);
        }
        Ok(())
    }

    /// Validates delta indices: each below `capacity_slots`, strictly
    /// increasing.
    fn check_indices(&self, indices: &[u64]) -> Result<(), FilterError> {
        let num_slots = self.params.capacity_slots();
        let mut previous: Option<u64> = None;
        for (position, &index) in indices.iter().enumerate() {
            if index >= num_slots {
                return Err(FilterError::SlotOutOfRange { index, num_slots });
            }
            if previous.is_some_and(|p| index <= p) {
                return Err(FilterError::UnsortedIndices { position, index });
            }
            previous = Some(index);
        }
        Ok(())
    }
}
