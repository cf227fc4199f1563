//! A uniformly random permutation of `0..len`, fast for the 2^20-entry OT
//! chunks of RR16.
//!
//! Written by hand because Fisher-Yates over the whole array
//! (`SliceRandom::shuffle`) swaps with a random element at every step, a
//! cache miss per entry once the array outgrows the cache; with the bit-by-
//! bit sampling of the choice bits it was the receiver's largest cost. The
//! Rao-Sandelius method used here first sends every entry to one of 256
//! buckets by an independent uniform random byte (256 sequential write
//! streams), then shuffles each bucket with Fisher-Yates inside the cache.
//!
//! The result is exactly uniform: bucket choices are i.i.d. and each bucket
//! is shuffled uniformly, so relabelling the entries does not change the
//! output distribution, and the only distribution over permutations with
//! that symmetry is the uniform one.

use rand::rngs::StdRng;
use rand::{CryptoRng, Rng, RngCore, SeedableRng};
use rayon::prelude::*;

const BUCKETS: usize = 256;

/// A uniformly random permutation of `0..len` (`len` below 2^32). Buckets
/// are shuffled in parallel, each with its own generator seeded from `rng`.
pub fn random_permutation<R: RngCore + CryptoRng>(len: usize, rng: &mut R) -> Vec<u32> {
    assert!(u32::try_from(len).is_ok(), "permutation too long");
    let mut bucket_of = vec![0u8; len];
    rng.fill_bytes(&mut bucket_of);
    let mut counts = [0usize; BUCKETS];
    for &b in &bucket_of {
        counts[usize::from(b)] += 1;
    }
    let mut next = [0usize; BUCKETS];
    let mut start = 0;
    for (n, c) in next.iter_mut().zip(counts) {
        *n = start;
        start += c;
    }
    let mut out = vec![0u32; len];
    for (i, &b) in bucket_of.iter().enumerate() {
        let slot = &mut next[usize::from(b)];
        out[*slot] = i as u32;
        *slot += 1;
    }
    let mut buckets = Vec::with_capacity(BUCKETS);
    let mut rest = out.as_mut_slice();
    for c in counts {
        let mut seed = <StdRng as SeedableRng>::Seed::default();
        rng.fill_bytes(&mut seed);
        let (bucket, tail) = rest.split_at_mut(c);
        buckets.push((bucket, seed));
        rest = tail;
    }
    buckets
        .into_par_iter()
        .for_each(|(bucket, seed)| fisher_yates(bucket, &mut StdRng::from_seed(seed)));
    out
}

/// Fisher-Yates on one bucket. Random words are drawn in bulk (the
/// generator's vectorised block function) and mapped to `[0, i]` by
/// Lemire's multiply-shift with rejection, which is exact.
fn fisher_yates(bucket: &mut [u32], rng: &mut StdRng) {
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
