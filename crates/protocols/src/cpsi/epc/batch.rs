//! The small checks of a batch both EPC parties make: its number on the
//! wire, its length, its outputs.

use super::params::EpcParams;
use crate::error::Error;

/// Batch number `k` as it travels (u32).
pub(super) fn batch_index(k: usize) -> Result<u32, Error> {
    u32::try_from(k).map_err(|_| Error::Misuse("more than 2^32 EPC batches"))
}

/// A batch holds 1 to `n` real tags.
pub(super) fn check_batch_len(params: &EpcParams, len: usize) -> Result<(), Error> {
    if len == 0 || len > params.batch_slots() {
        return Err(Error::Misuse("an EPC batch holds 1 to n tags"));
    }
    Ok(())
}

/// Slot values (below `p < 2^31`) as outputs.
pub(super) fn to_outputs(slots: &[u64]) -> Result<Vec<u32>, Error> {
    slots
        .iter()
        .map(|&x| u32::try_from(x).map_err(|_| Error::Internal("EPC outputs are below p < 2^31")))
        .collect()
}
