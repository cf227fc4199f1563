//! The filter itself: slicing tags into buckets and fingerprints, inserts
//! with lookahead and bounded eviction, lookups, deletes and slot change
//! tracking. Serialization and deltas (`wire.rs`) read its table through
//! the `pub(super)` fields.

use super::bits::{low_mask, BitTable};
use super::error::FilterError;
use super::limits::MAX_KICKS;
use super::params::CuckooFilterParams;

/// A 16-byte uniformly random tag (hash of an OPRF output) stored in the filter.
pub type Tag = [u8; 16];

/// Constant mixed into every eviction-PRNG seed so that small seeds (such
/// as the 0 used by [`CuckooFilter::from_bytes`]) still give a good state.
const SEED_SALT: u64 = 0x5053_494b_4954_4346; // "PSIKITCF"

/// splitmix64 finalizer: a fixed bijective 64-bit mixer.
#[inline]
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Maps a uniform 64-bit `x` to `0..n` with one multiplication (Lemire's
/// "fastrange"); cheaper than `%` and just as uniform for our purposes.
#[inline]
fn fastrange(x: u64, n: u64) -> u64 {
    ((u128::from(x) * u128::from(n)) >> 64) as u64
}

/// Little xorshift64* generator choosing eviction victims. Not cryptographic:
/// which slot gets evicted reveals nothing about the set.
#[derive(Clone, Debug)]
struct EvictionRng(u64);

impl EvictionRng {
    /// Derives a non-zero state from any seed.
    fn new(seed: u64) -> Self {
        Self(mix64(seed ^ SEED_SALT) | 1)
    }

    /// Next pseudorandom word.
    #[inline]
    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Pseudorandom value in `0..n`.
    #[inline]
    fn below(&mut self, n: u64) -> u64 {
        fastrange(self.next_u64(), n)
    }
}

/// Bit-packed cuckoo filter over [`Tag`]s; see the [module docs](super).
#[derive(Clone)]
pub struct CuckooFilter {
    pub(super) params: CuckooFilterParams,
    pub(super) table: BitTable,
    /// Number of occupied (non-zero) slots.
    pub(super) len: u64,
    /// `2^f - 1`: the number of possible (non-zero) fingerprints.
    fp_count: u64,
    rng: EvictionRng,
    /// One bit per slot when change tracking is on.
    changed: Option<Vec<u64>>,
    /// Reused scratch space for the eviction path: (slot bit position,
    /// previous content).
    kick_path: Vec<(u64, u64)>,
}

impl std::fmt::Debug for CuckooFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CuckooFilter")
            .field("params", &self.params)
            .field("len", &self.len)
            .field("track_changes", &self.changed.is_some())
            .finish_non_exhaustive()
    }
}

impl CuckooFilter {
    /// Empty filter. `seed` drives the (non-secret) choice of eviction
    /// victims, making builds reproducible.
    pub fn new(params: CuckooFilterParams, seed: u64) -> Result<Self, FilterError> {
        params.validate()?;
        let table = BitTable::zeroed(params.table_bits())?;
        Ok(Self::from_table(params, table, 0, seed))
    }

    /// Assembles a filter from an already validated table and item count.
    pub(super) fn from_table(
        params: CuckooFilterParams,
        table: BitTable,
        len: u64,
        seed: u64,
    ) -> Self {
        Self {
            params,
            table,
            len,
            fp_count: low_mask(params.fingerprint_bits),
            rng: EvictionRng::new(seed),
            changed: None,
            kick_path: Vec::new(),
        }
    }

    /// Re-seeds the eviction PRNG, e.g. after [`Self::from_bytes`] on a
    /// filter the caller intends to keep updating.
    pub fn reseed(&mut self, seed: u64) {
        self.rng = EvictionRng::new(seed);
    }

    /// The filter's parameters.
    pub fn params(&self) -> &CuckooFilterParams {
        &self.params
    }

    /// Number of fingerprints stored (inserts minus deletes that succeeded).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether no fingerprint is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Total number of slots.
    pub fn capacity_slots(&self) -> u64 {
        self.params.capacity_slots()
    }

    /// Fraction of slots in use.
    pub fn load_factor(&self) -> f64 {
        self.len as f64 / self.capacity_slots() as f64
    }

    /// Size of the packed table in bytes (excluding the serialization header).
    pub fn size_bytes(&self) -> u64 {
        self.params.table_bytes()
    }

    /// Table bits per stored item (`+inf` when empty): the real space cost,
    /// to compare with [`theoretical_bits_per_item`].
    pub fn bits_per_item(&self) -> f64 {
        if self.len == 0 {
            return f64::INFINITY;
        }
        self.params.table_bits() as f64 / self.len as f64
    }

    /// Expected false-positive rate of a lookup at the current load.
    pub fn estimated_fpr(&self) -> f64 {
        self.params.expected_fpr(self.load_factor())
    }

    /// Primary bucket and fingerprint of a tag (see module docs).
    #[inline]
    fn locate(&self, tag: &Tag) -> (u64, u64) {
        let x = u128::from_le_bytes(*tag);
        let bucket = fastrange(x as u64, self.params.num_buckets);
        let fp = fastrange((x >> 64) as u64, self.fp_count) + 1;
        (bucket, fp)
    }

    /// Alternate bucket of fingerprint `fp` stored in bucket `i`; an
    /// involution in `i` for every `fp` and any number of buckets.
    #[inline]
    fn alt(&self, i: u64, fp: u64) -> u64 {
        let m = self.params.num_buckets;
        let c = fastrange(mix64(fp), m);
        let s = c + m - i; // < 2m <= 2^41, no overflow
        if s >= m {
            s - m
        } else {
            s
        }
    }

    /// Bit position of `slot` within `bucket`.
    #[inline]
    fn slot_pos(&self, bucket: u64, slot: u64) -> u64 {
        bucket * self.params.bucket_bits() + slot * u64::from(self.params.fingerprint_bits)
    }

    /// First slot of `bucket` holding `fp` (use `fp = 0` to find a free slot).
    #[inline]
    fn find_slot(&self, bucket: u64, fp: u64) -> Option<u64> {
        let f = self.params.fingerprint_bits;
        let base = self.slot_pos(bucket, 0);
        (0..u64::from(self.params.bucket_size))
            .find(|&slot| self.table.get(base + slot * u64::from(f), f) == fp)
    }

    /// Number of occupied slots in `bucket`.
    pub(super) fn bucket_occupancy(&self, bucket: u64) -> u64 {
        let f = self.params.fingerprint_bits;
        let base = self.slot_pos(bucket, 0);
        (0..u64::from(self.params.bucket_size))
            .filter(|&slot| self.table.get(base + slot * u64::from(f), f) != 0)
            .count() as u64
    }

    /// Records that the slot at bit position `pos` changed, if tracking is
    /// on. Slot `j` of bucket `i` starts at bit `(i * b + j) * f`, so its
    /// global slot index is `pos / f`.
    #[inline]
    pub(super) fn mark_changed(&mut self, pos: u64) {
        if let Some(bits) = &mut self.changed {
            let slot = pos / u64::from(self.params.fingerprint_bits);
            bits[(slot >> 6) as usize] |= 1 << (slot & 63);
        }
    }

    /// Stores `fp` in a free slot of `bucket`, if there is one.
    #[inline]
    fn try_place(&mut self, bucket: u64, fp: u64) -> bool {
        match self.find_slot(bucket, 0) {
            Some(slot) => {
                let pos = self.slot_pos(bucket, slot);
                self.table.set(pos, self.params.fingerprint_bits, fp);
                self.len += 1;
                self.mark_changed(pos);
                true
            }
            None => false,
        }
    }

    /// Inserts a tag. Duplicates are stored again (the filter is a multiset
    /// of fingerprints), up to `2 * bucket_size` copies.
    ///
    /// Tries, in order: a free slot in either candidate bucket; moving one
    /// resident of a candidate bucket to a free slot of its own alternate
    /// bucket (one-step lookahead); then a random-walk eviction chain of at
    /// most [`MAX_KICKS`] steps with the same lookahead at each step. The
    /// lookahead keeps eviction chains, and therefore the number of buckets
    /// a delta must carry, short at high load.
    ///
    /// On [`FilterError::Full`] every eviction is undone, so the table is
    /// exactly as before the call and no previously inserted item is lost.
    pub fn insert(&mut self, tag: &Tag) -> Result<(), FilterError> {
        let (i1, fp) = self.locate(tag);
        let i2 = self.alt(i1, fp);
        if self.try_place(i1, fp) || self.try_place(i2, fp) {
            return Ok(());
        }
        if self.try_displace(i1, fp) || self.try_displace(i2, fp) {
            return Ok(());
        }
        let start = if self.rng.next_u64() & 1 == 0 { i1 } else { i2 };
        self.insert_with_kicks(start, fp)
    }

    /// One-step lookahead for a full `bucket`: if some resident's alternate
    /// bucket has a free slot, moves it there and stores `fp` in its place.
    /// Either succeeds (touching two buckets) or changes nothing.
    fn try_displace(&mut self, bucket: u64, fp: u64) -> bool {
        let f = self.params.fingerprint_bits;
        for slot in 0..u64::from(self.params.bucket_size) {
            let pos = self.slot_pos(bucket, slot);
            let resident = self.table.get(pos, f);
            let dest = self.alt(bucket, resident);
            if dest != bucket && self.try_place(dest, resident) {
                self.table.set(pos, f, fp);
                self.mark_changed(pos);
                return true;
            }
        }
        false
    }

    /// Cuckoo eviction loop: repeatedly swap the carried fingerprint with a
    /// random victim and move the victim to its alternate bucket. Every
    /// overwrite is logged so that a failure can be rolled back.
    fn insert_with_kicks(&mut self, start: u64, fp: u64) -> Result<(), FilterError> {
        let f = self.params.fingerprint_bits;
        let b = u64::from(self.params.bucket_size);
        let mut path = std::mem::take(&mut self.kick_path);
        path.clear();
        let (mut bucket, mut carried) = (start, fp);
        let mut placed = false;
        for _ in 0..MAX_KICKS {
            let slot = self.rng.below(b);
            let pos = self.slot_pos(bucket, slot);
            let victim = self.table.get(pos, f);
            self.table.set(pos, f, carried);
            self.mark_changed(pos);
            path.push((pos, victim));
            carried = victim;
            bucket = self.alt(bucket, carried);
            if self.try_place(bucket, carried) || self.try_displace(bucket, carried) {
                placed = true;
                break;
            }
        }
        if !placed {
            // Restore in reverse order: each entry holds what was there before.
            for &(pos, previous) in path.iter().rev() {
                self.table.set(pos, f, previous);
            }
        }
        self.kick_path = path;
        if placed {
            Ok(())
        } else {
            Err(FilterError::Full)
        }
    }

    /// Whether the tag may be in the set: never false for an inserted (and
    /// not deleted) tag; true for other tags with probability about
    /// [`Self::estimated_fpr`].
    #[inline]
    pub fn contains(&self, tag: &Tag) -> bool {
        let (i1, fp) = self.locate(tag);
        self.find_slot(i1, fp).is_some() || self.find_slot(self.alt(i1, fp), fp).is_some()
    }

    /// Removes one copy of the tag's fingerprint from its primary or
    /// alternate bucket; returns whether one was found.
    ///
    /// Caveat (inherent to cuckoo filters): deleting a tag that was never
    /// inserted may, on a fingerprint collision, remove another item's
    /// fingerprint and create a false negative. Callers (the server) must
    /// only delete tags they know are present. Deleting a present tag is
    /// always safe, even if a colliding copy is removed instead, because two
    /// equal fingerprints in a shared bucket have the same bucket pair.
    pub fn delete(&mut self, tag: &Tag) -> bool {
        let (i1, fp) = self.locate(tag);
        let i2 = self.alt(i1, fp);
        for bucket in [i1, i2] {
            if let Some(slot) = self.find_slot(bucket, fp) {
                let pos = self.slot_pos(bucket, slot);
                self.table.set(pos, self.params.fingerprint_bits, 0);
                self.len -= 1;
                self.mark_changed(pos);
                return true;
            }
        }
        false
    }

    /// Turns slot change tracking on or off. Turning it on starts from an
    /// empty change set (if already on, pending changes are kept); turning
    /// it off discards pending changes.
    pub fn set_track_changes(&mut self, on: bool) {
        match (on, self.changed.is_some()) {
            (true, false) => {
                let words = self.params.capacity_slots().div_ceil(64) as usize;
                self.changed = Some(vec![0; words]);
            }
            (false, _) => self.changed = None,
            (true, true) => {}
        }
    }

    /// Whether change tracking is on.
    pub fn tracks_changes(&self) -> bool {
        self.changed.is_some()
    }

    /// Sorted, deduplicated global slot indices (`bucket * b + slot`)
    /// written by insert, delete or import since tracking was enabled or
    /// since the previous call, and clears the set. May include slots whose
    /// final content is unchanged (e.g. after a failed insert), which is
    /// harmless for deltas. Empty when tracking is off.
    ///
    /// Slots rather than buckets: an insert or delete usually rewrites one
    /// slot, so a delta carries about `f` bits per change instead of `b * f`.
    pub fn take_changed_slots(&mut self) -> Vec<u64> {
        let Some(bits) = &mut self.changed else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (w, word) in bits.iter_mut().enumerate() {
            let mut x = std::mem::take(word);
            while x != 0 {
                out.push(((w as u64) << 6) | u64::from(x.trailing_zeros()));
                x &= x - 1;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::limits::MAX_NUM_BUCKETS;
    use super::*;
    use proptest::prelude::*;

    fn filter(m: u64, f: u32) -> CuckooFilter {
        let params = CuckooFilterParams {
            fingerprint_bits: f,
            bucket_size: 4,
            num_buckets: m,
        };
        CuckooFilter::new(params, 1).expect("valid params")
    }

    proptest! {
        #[test]
        fn alt_is_an_involution(m in 1u64..=MAX_NUM_BUCKETS, i_seed: u64, fp_seed: u64, f in 4u32..=64) {
            let cf = CuckooFilter::from_table(
                CuckooFilterParams { fingerprint_bits: f, bucket_size: 1, num_buckets: m },
                BitTable::zeroed(0).expect("empty"),
                0,
                0,
            );
            let i = fastrange(i_seed, m);
            let fp = fastrange(fp_seed, low_mask(f)) + 1;
            let j = cf.alt(i, fp);
            prop_assert!(j < m);
            prop_assert_eq!(cf.alt(j, fp), i);
        }
    }

    #[test]
    fn fingerprints_are_nonzero_and_in_range() {
        for f in [4u32, 8, 33, 63, 64] {
            let cf = filter(7, f);
            for hi in [0u64, 1, u64::MAX, u64::MAX - 1, 1 << 63] {
                let mut tag = [0u8; 16];
                tag[8..].copy_from_slice(&hi.to_le_bytes());
                let (i, fp) = cf.locate(&tag);
                assert!(i < 7);
                assert!(fp >= 1 && fp <= low_mask(f), "f={f} fp={fp}");
            }
        }
    }

    #[test]
    fn tracking_records_touched_slots() {
        let mut cf = filter(101, 12);
        cf.set_track_changes(true);
        let tag = [7u8; 16];
        cf.insert(&tag).expect("room");
        let (i1, _) = cf.locate(&tag);
        // The first free slot of the (empty) primary bucket.
        let slot = i1 * u64::from(cf.params().bucket_size);
        assert_eq!(cf.take_changed_slots(), vec![slot]);
        assert!(cf.take_changed_slots().is_empty());
        assert!(cf.delete(&tag));
        assert_eq!(cf.take_changed_slots(), vec![slot]);
        cf.set_track_changes(false);
        cf.insert(&tag).expect("room");
        assert!(cf.take_changed_slots().is_empty());
    }
}
