//! A uniformly random permutation of `0..len`, fast for the 2^20-entry OT
//! chunks of RR16, drawn in two steps to fit how RR16's receiver uses it.
//!
//! Written by hand because Fisher-Yates over the whole array
//! (`SliceRandom::shuffle`) swaps with a random element at every step, a
//! cache miss per entry once the array outgrows the cache; with the bit-by-
//! bit sampling of the choice bits it was the receiver's largest cost. The
//! Rao-Sandelius method used here first sends every entry to one of 256
//! buckets by an independent uniform random byte (256 sequential write
//! streams), then shuffles each bucket with Fisher-Yates inside the cache;
//! the permutation is the concatenation of the shuffled buckets.
//!
//! The result is exactly uniform: bucket choices are i.i.d. and each bucket
//! is shuffled uniformly, so relabelling the entries does not change the
//! output distribution, and the only distribution over permutations with
//! that symmetry is the uniform one.
//!
//! The two steps: [`Shuffle::new`] scatters and shuffles only the bucket
//! that straddles a given position `split`, which already fixes the *set*
//! of entries before `split` (RR16: the OTs with choice bit 1).
//! [`Shuffle::finish`] then drops some entries (the opened OTs) and shuffles
//! what is left of the other buckets, one bucket at a time while it is in
//! the cache. Dropping entries from a uniformly ordered bucket and
//! shuffling first are the same distribution, and each bucket's generator
//! is seeded in the first step, so the result is the first step's uniform
//! permutation with the dropped entries removed.

use std::ops::Range;

use rand::rngs::StdRng;
use rand::{CryptoRng, Rng, RngCore, SeedableRng};
use rayon::prelude::*;
use zeroize::Zeroize;

const BUCKETS: usize = 256;

/// A uniformly random permutation of `0..len` (`len` below 2^32) in the
/// making; see the module docs. Secret (RR16's choice bits): wiped on drop.
pub struct Shuffle {
    order: Vec<u32>,
    /// Bucket `b` is `order[bounds[b]..bounds[b + 1]]`.
    bounds: Vec<usize>,
    /// One generator seed per bucket, for its shuffle.
    seeds: Vec<<StdRng as SeedableRng>::Seed>,
    split: usize,
    /// Random bytes choosing the buckets; kept to reuse the allocation.
    bucket_of: Vec<u8>,
}

impl Drop for Shuffle {
    fn drop(&mut self) {
        self.order.zeroize();
        self.seeds.zeroize();
        self.bucket_of.zeroize();
    }
}

impl Shuffle {
    /// Scatters `0..len` into buckets and shuffles the bucket that holds
    /// position `split` (at most `len`). `spare`, a spent shuffle, lends its
    /// buffers, so that chunk after chunk needs no fresh allocations, whose
    /// page faults and zero-fills cost as much as the scatter itself.
    pub fn new<R: RngCore + CryptoRng>(
        len: usize,
        split: usize,
        rng: &mut R,
        spare: Option<Shuffle>,
    ) -> Self {
        assert!(u32::try_from(len).is_ok(), "permutation too long");
        assert!(split <= len, "split beyond the permutation");
        let (mut order, mut bucket_of) = match spare {
            Some(mut s) => (
                std::mem::take(&mut s.order),
                std::mem::take(&mut s.bucket_of),
            ),
            None => (Vec::new(), Vec::new()),
        };
        bucket_of.resize(len, 0);
        rng.fill_bytes(&mut bucket_of);
        let mut counts = [0usize; BUCKETS];
        for &b in &bucket_of {
            counts[usize::from(b)] += 1;
        }
        let mut bounds = Vec::with_capacity(BUCKETS + 1);
        let mut next = [0usize; BUCKETS];
        let mut start = 0;
        for (n, c) in next.iter_mut().zip(counts) {
            bounds.push(start);
            *n = start;
            start += c;
        }
        bounds.push(start);
        // Every entry is overwritten by the scatter below.
        order.resize(len, 0);
        for (i, &b) in bucket_of.iter().enumerate() {
            let slot = &mut next[usize::from(b)];
            order[*slot] = i as u32;
            *slot += 1;
        }
        let mut seeds = vec![<StdRng as SeedableRng>::Seed::default(); BUCKETS];
        for seed in &mut seeds {
            rng.fill_bytes(seed);
        }
        let mut shuffle = Self {
            order,
            bounds,
            seeds,
            split,
            bucket_of,
        };
        if let Some(b) = shuffle.split_bucket() {
            let range = shuffle.bucket(b);
            fisher_yates(
                &mut shuffle.order[range],
                &mut StdRng::from_seed(shuffle.seeds[b]),
            );
        }
        shuffle
    }

    /// The bucket holding position `split`, if any (none when `split` is
    /// at a bucket boundary).
    fn split_bucket(&self) -> Option<usize> {
        (0..BUCKETS).find(|&b| self.bounds[b] < self.split && self.split < self.bounds[b + 1])
    }

    fn bucket(&self, b: usize) -> Range<usize> {
        self.bounds[b]..self.bounds[b + 1]
    }

    /// The entries at positions `..split` of the permutation, in no
    /// meaningful order yet.
    pub fn prefix(&self) -> &[u32] {
        &self.order[..self.split]
    }

    /// Removes the entries for which `drop` holds and finishes the shuffle.
    /// Returns the remaining entries in permutation order (the caller may
    /// append to them: the shuffle is spent, good only as a spare for
    /// [`Shuffle::new`]), and how many of them were before `split`. Buckets
    /// are processed in parallel.
    pub fn finish(&mut self, drop: impl Fn(u32) -> bool + Sync) -> (&mut Vec<u32>, usize) {
        let split_bucket = self.split_bucket();
        let split = self.split;
        let mut parts = Vec::with_capacity(BUCKETS);
        let mut rest = self.order.as_mut_slice();
        for b in 0..BUCKETS {
            let (bucket, tail) = rest.split_at_mut(self.bounds[b + 1] - self.bounds[b]);
            parts.push((b, bucket));
            rest = tail;
        }
        let seeds = &self.seeds;
        let bounds = &self.bounds;
        // Per bucket: entries kept before `split`, and after it.
        let kept: Vec<(usize, usize)> = parts
            .into_par_iter()
            .map(|(b, bucket)| {
                if Some(b) == split_bucket {
                    // Shuffled already: keep the order, compact each side.
                    let (before, after) = bucket.split_at_mut(split - bounds[b]);
                    (compact(before, &drop), compact(after, &drop))
                } else {
                    let n = compact(bucket, &drop);
                    fisher_yates(&mut bucket[..n], &mut StdRng::from_seed(seeds[b]));
                    match bounds[b + 1] <= split {
                        true => (n, 0),
                        false => (0, n),
                    }
                }
            })
            .collect();
        // Close the gaps: bucket after bucket, before-split parts first
        // (only the split bucket has both).
        let mut write = 0;
        let mut kept_before = 0;
        for (b, &(before, after)) in kept.iter().enumerate() {
            let start = self.bounds[b];
            self.order.copy_within(start..start + before, write);
            write += before;
            kept_before += before;
            let after_start = match Some(b) == split_bucket {
                true => split,
                false => start + before,
            };
            self.order
                .copy_within(after_start..after_start + after, write);
            write += after;
        }
        self.order[write..].zeroize();
        self.order.truncate(write);
        (&mut self.order, kept_before)
    }
}

/// Moves the entries of `xs` that `drop` rejects to its front, in order;
/// returns how many there are.
fn compact(xs: &mut [u32], drop: &impl Fn(u32) -> bool) -> usize {
    let mut n = 0;
    for i in 0..xs.len() {
        let x = xs[i];
        xs[n] = x;
        n += usize::from(!drop(x));
    }
    n
}

/// A uniformly random permutation of `0..len`.
#[cfg(test)]
pub fn random_permutation<R: RngCore + CryptoRng>(len: usize, rng: &mut R) -> Vec<u32> {
    let mut s = Shuffle::new(len, len / 3, rng, None);
    s.finish(|_| false).0.clone()
}

/// Fisher-Yates on one bucket. Random values are drawn in bulk (the
/// generator's vectorised block function) and mapped to `[0, i]` by
/// Lemire's multiply-shift with rejection, which is exact. Buckets hold a
/// few thousand entries, so 16-bit values suffice (rejected with
/// probability below `i / 2^16`); drawing 32 bits per entry made the
/// generator a third of the shuffle's time. Larger buckets (only for
/// permutations above 2^24 entries) draw 32-bit values.
fn fisher_yates(bucket: &mut [u32], rng: &mut StdRng) {
    if bucket.len() > 1 << 16 {
        return fisher_yates_wide(bucket, rng);
    }
    let mut words = vec![0u16; bucket.len()];
    rng.fill(&mut words[..]);
    for i in (1..bucket.len()).rev() {
        let bound = i as u32 + 1;
        let mut m = u32::from(words[i]) * bound;
        if m & 0xffff < bound {
            let threshold = (1u32 << 16) % bound;
            while m & 0xffff < threshold {
                m = u32::from(rng.gen::<u16>()) * bound;
            }
        }
        bucket.swap(i, (m >> 16) as usize);
    }
}

/// [`fisher_yates`] with 32-bit random values, for buckets of any size.
fn fisher_yates_wide(bucket: &mut [u32], rng: &mut StdRng) {
    let mut words = vec![0u32; bucket.len()];
    rng.fill(&mut words[..]);
    for i in (1..bucket.len()).rev() {
        let bound = i as u32 + 1;
        let mut m = u64::from(words[i]) * u64::from(bound);
        if (m as u32) < bound {
            let threshold = bound.wrapping_neg() % bound;
            while (m as u32) < threshold {
                m = u64::from(rng.next_u32()) * u64::from(bound);
            }
        }
        bucket.swap(i, (m >> 32) as usize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::OsRng;

    /// `finish` keeps exactly the entries not dropped, and counts those
    /// among the first `split` positions, whichever bucket `split` falls in.
    #[test]
    fn finish_drops_entries_and_counts_the_prefix() {
        let mut rng = StdRng::seed_from_u64(4);
        let mut spare = None;
        for (len, split) in [(0, 0), (1, 1), (1000, 0), (1000, 1000), (100_003, 37_000)] {
            let mut s = Shuffle::new(len, split, &mut rng, spare.take());
            let mut prefix = s.prefix().to_vec();
            prefix.sort_unstable();
            let drop = |i: u32| i % 7 == 3;
            let (kept, before) = s.finish(drop);
            let kept = kept.clone();
            let expected_before = prefix.iter().filter(|&&i| !drop(i)).count();
            assert_eq!(before, expected_before, "{len} {split}");
            let mut in_prefix = kept[..before].to_vec();
            in_prefix.sort_unstable();
            assert!(in_prefix.iter().all(|i| prefix.binary_search(i).is_ok()));
            let mut sorted = kept.clone();
            sorted.sort_unstable();
            let want: Vec<u32> = (0..len as u32).filter(|&i| !drop(i)).collect();
            assert_eq!(sorted, want, "{len} {split}");
            spare = Some(s);
        }
    }

    /// With an entry dropped, the other four still come in all 24 orders
    /// about equally often, and the prefix of two holds each pair equally
    /// often.
    #[test]
    fn orders_stay_uniform_after_dropping() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut counts = std::collections::HashMap::new();
        let trials = 48_000;
        for _ in 0..trials {
            let mut s = Shuffle::new(5, 2, &mut rng, None);
            let (kept, _) = s.finish(|i| i == 2);
            *counts.entry(kept.clone()).or_insert(0u32) += 1;
        }
        assert_eq!(counts.len(), 24);
        assert!(
            counts.values().all(|&c| (1780..=2220).contains(&c)),
            "{counts:?}"
        );
    }

    /// The 32-bit path, taken by buckets above 2^16 entries, is uniform
    /// too, and both paths keep every entry.
    #[test]
    fn wide_fisher_yates_is_uniform() {
        let mut rng = StdRng::seed_from_u64(8);
        let mut counts = std::collections::HashMap::new();
        for _ in 0..48_000 {
            let mut v = [0u32, 1, 2, 3];
            fisher_yates_wide(&mut v, &mut rng);
            *counts.entry(v).or_insert(0u32) += 1;
        }
        assert_eq!(counts.len(), 24);
        assert!(
            counts.values().all(|&c| (1780..=2220).contains(&c)),
            "{counts:?}"
        );
        let mut big: Vec<u32> = (0..70_000).collect();
        fisher_yates(&mut big, &mut rng);
        assert_ne!(big[..100], (0..100).collect::<Vec<u32>>()[..]);
        big.sort_unstable();
        assert!(big.iter().enumerate().all(|(i, &v)| v as usize == i));
    }

    #[test]
    fn is_a_permutation() {
        for len in [0, 1, 2, 255, 256, 257, 100_003] {
            let mut p = random_permutation(len, &mut OsRng);
            p.sort_unstable();
            assert!(p.iter().enumerate().all(|(i, &v)| v as usize == i), "{len}");
        }
    }

    /// All 24 orders of 4 entries appear about equally often.
    #[test]
    fn small_permutations_are_uniform() {
        let mut rng = StdRng::seed_from_u64(5);
        let mut counts = std::collections::HashMap::new();
        let trials = 48_000;
        for _ in 0..trials {
            *counts
                .entry(random_permutation(4, &mut rng))
                .or_insert(0u32) += 1;
        }
        assert_eq!(counts.len(), 24);
        // Expected 2000 each; a 5-sigma band is about +-220.
        assert!(
            counts.values().all(|&c| (1780..=2220).contains(&c)),
            "{counts:?}"
        );
    }

    /// Every entry is equally likely at every position of a long permutation.
    #[test]
    fn positions_are_uniform_in_long_permutations() {
        let mut rng = StdRng::seed_from_u64(6);
        let len = 1000;
        let mut first_quarter = vec![0u32; len];
        let trials = 400;
        for _ in 0..trials {
            for &v in &random_permutation(len, &mut rng)[..len / 4] {
                first_quarter[v as usize] += 1;
            }
        }
        // Each entry lands in the first quarter ~100 times out of 400
        // (sd ~8.7); a bias towards low or high entries would show in the halves.
        let low: u32 = first_quarter[..len / 2].iter().sum();
        let high: u32 = first_quarter[len / 2..].iter().sum();
        assert_eq!(low + high, (trials * len / 4) as u32);
        assert!(low.abs_diff(high) < 2_000, "{low} vs {high}");
        assert!(first_quarter.iter().all(|&c| (55..=145).contains(&c)));
    }
}
