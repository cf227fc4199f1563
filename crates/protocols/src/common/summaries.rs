//! The last round of the balanced two-party PSIs (RR16, VOLE-PSI): the
//! sender sends one short pseudorandom *summary value* per item (a
//! truncated OPRF output, or RR16's `H(x || garbled filter sum)`), sorted so
//! that their order says nothing; the receiver compares its own; and, if
//! both parties asked for it, the receiver reveals the matched values so
//! that the sender can map them back to its items.
//!
//! Summary values are `σ + log2 n_s + log2 n_r` bits ([`summary_bits`]):
//! any false match over the whole run has probability at most `2^-σ`
//! (`σ` from [`crate::common::statistical`]). They travel as a sorted set
//! in Elias-Fano form (`common::summary_codec`), about `log2 n_s - 2`
//! bits per value fewer than whole values.

use std::collections::HashMap;
use std::ops::Range;

use psikit_transport::{Channel, ProtocolId};
use rayon::prelude::*;

use super::summary_codec::{self, Layout};
use crate::error::Error;

/// A summary value in fixed-size words: its `bits` bits (at most 168 for
/// sets below 2^64) little-endian in three `u64`s, zero-padded. Fixed size
/// keeps them off the heap, and word comparisons make sorting and binary
/// search cheap (byte arrays compare through `memcmp` calls).
pub type Summary = [u64; 3];

/// Bits of a summary value for these set sizes: `σ + log2(n_s) +
/// log2(n_r)` (each logarithm rounded up to the sizes' bit lengths) for a
/// `2^-σ` chance of any false match.
pub fn summary_bits(sender: u64, receiver: u64, sigma: u32) -> u32 {
    sigma + 64 - sender.max(1).leading_zeros() + 64 - receiver.max(1).leading_zeros()
}

/// The first `bits` bits of `bytes` (little-endian; at most 192 bits, and
/// `bytes` must hold them) as a [`Summary`].
pub fn pack(bytes: &[u8], bits: u32) -> Summary {
    let len = bits.div_ceil(8) as usize;
    let mut buf = [0u8; 24];
    buf[..len].copy_from_slice(&bytes[..len]);
    let word = |i: usize| u64::from_le_bytes(buf[8 * i..8 * i + 8].try_into().expect("8 bytes"));
    let mut s = [word(0), word(1), word(2)];
    for (i, w) in s.iter_mut().enumerate() {
        let kept = bits.saturating_sub(64 * i as u32);
        if kept < 64 {
            *w &= (1u64 << kept) - 1;
        }
    }
    s
}

/// [`pack`] of a 128-bit value's little-endian bytes (`bits` at most
/// 128) in two masks rather than byte copies: VOLE-PSI packs one per item
/// on each side.
pub fn pack_u128(x: u128, bits: u32) -> Summary {
    let kept = match bits {
        128.. => x,
        _ => x & ((1u128 << bits) - 1),
    };
    [kept as u64, (kept >> 64) as u64, 0]
}

/// Where one run's summaries travel: the family's protocol id and the
/// kinds of its two chunked transfers, and the value length.
#[derive(Clone, Copy, Debug)]
pub struct Exchange {
    pub protocol: ProtocolId,
    /// Kind of the sender's summary values.
    pub summaries: u8,
    /// Kind of the receiver's revealed matches.
    pub reveal: u8,
    /// Bits per value ([`summary_bits`]).
    pub bits: u32,
}

impl Exchange {
    /// The sender's side: sends its values as a sorted set (hiding which
    /// belongs to which item), then, if `reveal`, learns which of its items
    /// matched.
    pub async fn send(
        &self,
        ch: &mut Channel,
        values: &[Summary],
        reveal: bool,
    ) -> Result<Option<Vec<usize>>, Error> {
        let layout = Layout::segmented(self.bits, values.len() as u64);
        // Cut by segment, then each segment sorted just before it is sent:
        // the receiver looks up the first while the rest are sorted (the
        // whole set's sort took 25-31 ms at 2^20 before any could go).
        let mut cut = vec![[0; 3]; values.len()];
        let segments = bucket_into(values, &mut cut, |s| layout.segment_of(s), |_, s| *s);
        let mut before = 0;
        for (segment, range) in segments.into_iter().take(layout.segments()).enumerate() {
            let part = sorted_copy(&cut[range], |s| s[0]);
            let bytes = summary_codec::encode_segment(&layout, segment, &part, before);
            before += bytes.len() as u128;
            ch.send_chunked(self.protocol, self.summaries, &bytes)
                .await?;
        }
        drop(cut);
        match reveal {
            true => Ok(Some(self.receive_revealed(ch, values).await?)),
            false => Ok(None),
        }
    }

    /// The receiver's side: which of `mine` the sender (of `peer_count`
    /// items) holds; if `reveal`, tells the sender which matched. The
    /// sender's values arrive sorted, a segment at a time (the decoder
    /// refuses them otherwise), so each segment is indexed as it is and
    /// ours of that segment looked up while the next one comes.
    pub async fn receive(
        &self,
        ch: &mut Channel,
        mine: &[Summary],
        peer_count: u64,
        reveal: bool,
    ) -> Result<Vec<bool>, Error> {
        // Grouped while the sender computes its values.
        let grouped = Grouped::new(mine, self.bits);
        let layout = Layout::segmented(self.bits, peer_count);
        let mut matches = vec![false; mine.len()];
        let (mut left, mut before) = (peer_count, 0);
        for segment in 0..layout.segments() {
            let bytes = ch
                .recv_chunked(self.protocol, self.summaries, self.max_bytes(peer_count))
                .await?;
            let theirs = summary_codec::decode_segment(&layout, segment, &bytes, left, before)?;
            before += bytes.len() as u128;
            drop(bytes);
            left -= theirs.len() as u64;
            let groups = grouped.of_segment(&layout, segment);
            SortedIndex::new(&theirs, self.bits, layout.segment_bits()).mark(
                &grouped,
                groups,
                &mut matches,
            );
        }
        if reveal {
            let mut found: Vec<Summary> = mine
                .iter()
                .zip(&matches)
                .filter(|(_, m)| **m)
                .map(|(s, _)| *s)
                .collect();
            // Sorted, so that their order says nothing of ours.
            found.sort_unstable();
            ch.send_chunked(self.protocol, self.reveal, &self.encode(&found))
                .await?;
        }
        Ok(matches)
    }

    /// The receiver's claimed intersection, as indices of our items. A
    /// malicious receiver can omit items or name any of ours (it holds all
    /// our summary values): this output is only as honest as the receiver.
    async fn receive_revealed(
        &self,
        ch: &mut Channel,
        summaries: &[Summary],
    ) -> Result<Vec<usize>, Error> {
        let count = summaries.len() as u64;
        let bytes = ch
            .recv_chunked(self.protocol, self.reveal, self.max_bytes(count))
            .await?;
        let values = summary_codec::decode(&bytes, self.bits, count)?;
        let index: HashMap<&Summary, usize> =
            summaries.iter().enumerate().map(|(i, s)| (s, i)).collect();
        let mut out: Vec<usize> = values
            .iter()
            .filter_map(|v| index.get(v).copied())
            .collect();
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    /// Sorted values as sent.
    fn encode(&self, sorted: &[Summary]) -> Vec<u8> {
        summary_codec::encode(sorted, self.bits)
    }

    /// The most bytes `count` values can take (the transfer's limit, also of
    /// each segment of a run of `count`): the count, at most `bits + 2` bits
    /// a value, two padded bytes, and a segmented run's headers and
    /// roundings (16 of each).
    fn max_bytes(&self, count: u64) -> u64 {
        10 + 16 * 10 + (count * (u64::from(self.bits) + 2)).div_ceil(8)
    }
}

/// Sorted values with a directory of where each value of their leading
/// bits starts: a lookup reads one short run (under one value on average)
/// instead of binary-searching the whole array, whose last levels each
/// miss the cache (a binary search per item was a fifth of the receiver's
/// time at 2^20). Comparisons only: no hashing of values the peer chose;
/// skewed values (a cheating sender's) only lengthen runs, which are
/// binary-searched.
struct SortedIndex<'a> {
    sorted: &'a [Summary],
    /// `starts[b]`: the first value whose leading bits are `>= b`.
    starts: Vec<u32>,
    /// Right shift and mask of a value's first word giving its leading
    /// bits after the fixed ones.
    shift: u32,
    dir_mask: u64,
}

/// Runs up to this long are compared whole, without branches (a run is
/// longer with probability below 0.4% for pseudorandom values, about one
/// value per directory entry).
const RUN: usize = 4;

impl<'a> SortedIndex<'a> {
    /// `sorted` must be sorted; `bits` is the values' length, of which the
    /// top `fixed` are the same in all (a segment's).
    fn new(sorted: &'a [Summary], bits: u32, fixed: u32) -> Self {
        // Leading bits of the first word's value bits after the fixed ones:
        // about one value per directory entry.
        let value_bits = bits.min(64) - fixed;
        let dir_bits = (sorted.len().max(1).ilog2() + 1)
            .clamp(1, 24)
            .min(value_bits);
        let shift = value_bits - dir_bits;
        let dir_mask = (1u64 << dir_bits) - 1;
        let mut starts = vec![0u32; (1 << dir_bits) + 1];
        let mut next = 0usize;
        for (b, start) in starts.iter_mut().enumerate() {
            while next < sorted.len() && ((sorted[next][0] >> shift & dir_mask) as usize) < b {
                next += 1;
            }
            *start = next as u32;
        }
        Self {
            sorted,
            starts,
            shift,
            dir_mask,
        }
    }

    /// Marks in `held` which values of the groups `groups` are held: each
    /// group's lookups stay within one 256th of the directory and the
    /// values, in the caches, instead of two random reads from memory
    /// each. A group's hits are collected without a branch on the outcome
    /// (half of the lookups hit when half of the items match).
    fn mark(&self, grouped: &Grouped, groups: Range<usize>, held: &mut [bool]) {
        let found: Vec<u32> = grouped.groups[groups]
            .par_iter()
            .flat_map_iter(|g| {
                let values = &grouped.values[g.clone()];
                let mut hits = vec![0u32; values.len()];
                let mut count = 0;
                for (s, i) in values {
                    hits[count] = *i;
                    count += usize::from(self.holds(s));
                }
                hits.truncate(count);
                hits
            })
            .collect();
        for i in found {
            held[i as usize] = true;
        }
    }

    /// Whether `s` is among the sorted values. A run of up to [`RUN`]
    /// values is compared whole, without branches, so that the CPU
    /// overlaps consecutive lookups instead of waiting on mispredicted
    /// branches of a search; a longer run is binary-searched.
    fn holds(&self, s: &Summary) -> bool {
        let b = (s[0] >> self.shift & self.dir_mask) as usize;
        let (Some(&lo), Some(&hi)) = (self.starts.get(b), self.starts.get(b + 1)) else {
            return false;
        };
        let run = &self.sorted[lo as usize..hi as usize];
        if run.len() > RUN {
            return run.binary_search(s).is_ok();
        }
        let Some(last) = self.sorted.len().checked_sub(1) else {
            return false;
        };
        let mut found = false;
        for j in 0..RUN {
            let v = &self.sorted[(lo as usize + j).min(last)];
            let equal = (v[0] ^ s[0]) | (v[1] ^ s[1]) | (v[2] ^ s[2]) == 0;
            found |= equal & (j < run.len());
        }
        found
    }
}

/// Values with their positions, grouped by their leading byte (one
/// counting pass), for [`SortedIndex::mark`].
struct Grouped {
    values: Vec<(Summary, u32)>,
    groups: Vec<Range<usize>>,
    /// Bits of a group's key (the values' top bits, at most 8).
    key_bits: u32,
}

impl Grouped {
    fn new(values: &[Summary], bits: u32) -> Self {
        let key_bits = bits.min(8);
        let lead = bits.min(64) - key_bits;
        let mut grouped = vec![([0; 3], 0); values.len()];
        let groups = bucket_into(
            values,
            &mut grouped,
            |s| (s[0] >> lead) as usize & 0xff,
            |i, s| (*s, i as u32),
        );
        Self {
            values: grouped,
            groups,
            key_bits,
        }
    }

    /// The groups of the values of `segment` of `layout`: a group's key is
    /// the values' top `key_bits` bits, which start with the segment's.
    fn of_segment(&self, layout: &Layout, segment: usize) -> Range<usize> {
        let per = self.key_bits - layout.segment_bits();
        segment << per..(segment + 1) << per
    }
}

/// A sorted copy of pseudorandom values: two levels of 256-way bucketing
/// on the leading bytes (each a counting pass whose 256 write streams stay
/// in the caches; the second runs on one first-level bucket at a time,
/// which fits in L2 up to millions of values), then a comparison sort of
/// each small bucket. Several times faster than a comparison sort of the
/// whole array at 2^20 to 2^24 values; values that are not random are
/// still sorted, only slower.
fn sorted_copy<T: Copy + Ord + Default>(values: &[T], word: impl Fn(&T) -> u64) -> Vec<T> {
    let mut out = vec![T::default(); values.len()];
    let first = bucket_into(values, &mut out, |v| (word(v) >> 56) as usize, |_, v| *v);
    let mut scratch = Vec::new();
    for range in first {
        let bucket = &mut out[range];
        if bucket.len() <= 64 {
            bucket.sort_unstable();
            continue;
        }
        scratch.clear();
        scratch.resize(bucket.len(), T::default());
        let byte = |v: &T| (word(v) >> 48) as usize & 0xff;
        for sub in bucket_into(bucket, &mut scratch, byte, |_, v| *v) {
            scratch[sub].sort_unstable();
        }
        bucket.copy_from_slice(&scratch);
    }
    out
}

/// Scatters `item(i, x)` for each `x = from[i]` into `to` by `byte(x)`
/// (below 256), keeping their order within a bucket; returns each
/// bucket's range.
fn bucket_into<T, U>(
    from: &[T],
    to: &mut [U],
    byte: impl Fn(&T) -> usize,
    item: impl Fn(usize, &T) -> U,
) -> Vec<Range<usize>> {
    let mut starts = [0usize; 257];
    for s in from {
        starts[byte(s) + 1] += 1;
    }
    for b in 0..256 {
        starts[b + 1] += starts[b];
    }
    let mut next = starts;
    for (i, s) in from.iter().enumerate() {
        let b = byte(s);
        to[next[b]] = item(i, s);
        next[b] += 1;
    }
    (0..256).map(|b| starts[b]..starts[b + 1]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which of the grouped values `index` holds (every group looked up).
    fn members(index: &SortedIndex, grouped: &Grouped) -> Vec<bool> {
        let mut held = vec![false; grouped.values.len()];
        index.mark(grouped, 0..grouped.groups.len(), &mut held);
        held
    }

    #[test]
    fn summary_length_covers_sigma_and_set_sizes() {
        assert_eq!(summary_bits(1, 1, 40), 42);
        assert_eq!(summary_bits(1 << 20, 1 << 20, 40), 82);
        assert_eq!(summary_bits(0, 0, 40), 42);
        // A job's buckets take more bits each: 256 buckets, 8 more.
        assert_eq!(summary_bits(1 << 20, 1 << 20, 48), 90);
    }

    #[test]
    fn packing_keeps_exactly_the_value_bits() {
        let bytes = [0xffu8; 24];
        assert_eq!(pack(&bytes, 42), [(1 << 42) - 1, 0, 0]);
        assert_eq!(pack(&bytes, 64), [u64::MAX, 0, 0]);
        assert_eq!(pack(&bytes, 82), [u64::MAX, (1 << 18) - 1, 0]);
        assert_eq!(pack(&bytes, 192), [u64::MAX; 3]);
    }

    #[test]
    fn packing_a_u128_is_packing_its_bytes() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(4);
        for bits in 1..=128 {
            let x: u128 = rng.gen();
            assert_eq!(pack_u128(x, bits), pack(&x.to_le_bytes(), bits), "{bits}");
        }
    }

    #[test]
    fn the_index_finds_exactly_the_values_held() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        for (bits, n) in [(42, 0), (42, 1), (48, 1000), (82, 5000), (128, 3)] {
            let mut held: Vec<Summary> =
                (0..n).map(|_| pack(&rng.gen::<[u8; 24]>(), bits)).collect();
            held.sort_unstable();
            let index = SortedIndex::new(&held, bits, 0);
            assert!(held.iter().all(|s| index.holds(s)), "bits {bits} n {n}");
            let absent: Vec<Summary> = (0..1000)
                .map(|_| pack(&rng.gen::<[u8; 24]>(), bits))
                .filter(|s| held.binary_search(s).is_err())
                .collect();
            assert!(absent.iter().all(|s| !index.holds(s)));
            // Held and absent values interleaved, looked up together.
            let asked: Vec<Summary> = absent
                .iter()
                .zip(held.iter().cycle())
                .flat_map(|(a, h)| [*a, *h])
                .collect();
            let want: Vec<bool> = (0..asked.len()).map(|i| i % 2 == 1 && n > 0).collect();
            assert_eq!(
                members(&index, &Grouped::new(&asked, bits)),
                want,
                "bits {bits} n {n}"
            );
        }
    }

    /// A segment's index and its groups find exactly its held values.
    #[test]
    fn each_segment_finds_its_values() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for (bits, n) in [(6, 50), (42, 3000), (82, 5000), (130, 700)] {
            let mut held: Vec<Summary> =
                (0..n).map(|_| pack(&rng.gen::<[u8; 24]>(), bits)).collect();
            held.sort_unstable();
            let asked: Vec<Summary> = (0..2 * n)
                .map(|i| match i % 2 {
                    0 => held[i / 2],
                    _ => pack(&rng.gen::<[u8; 24]>(), bits),
                })
                .collect();
            let grouped = Grouped::new(&asked, bits);
            let layout = Layout::segmented(bits, n as u64);
            let mut found = vec![false; asked.len()];
            for (segment, part) in layout.split(&held).into_iter().enumerate() {
                let index = SortedIndex::new(part, bits, layout.segment_bits());
                index.mark(&grouped, grouped.of_segment(&layout, segment), &mut found);
            }
            let want: Vec<bool> = asked
                .iter()
                .map(|v| held.binary_search(v).is_ok())
                .collect();
            assert_eq!(found, want, "bits {bits}");
        }
    }

    #[test]
    fn runs_of_every_length_find_exactly_their_values() {
        // Small values share directory entry 0: a run of `k` values, the
        // branch-free compare up to `RUN`, the binary search past it.
        for k in 1..=RUN as u64 + 2 {
            let held: Vec<Summary> = (0..k).map(|j| [2 * j + 1, j, 0]).collect();
            let index = SortedIndex::new(&held, 64, 0);
            assert!(held.iter().all(|s| index.holds(s)), "run of {k}");
            for j in 0..=k {
                assert!(!index.holds(&[2 * j, j, 0]), "run of {k}");
                assert!(!index.holds(&[2 * j + 1, j + 1, 0]), "run of {k}");
            }
        }
    }

    #[test]
    fn skewed_values_are_found_in_their_long_run() {
        // A cheating sender's values all in one directory entry.
        let held: Vec<Summary> = (0..5000u64).map(|i| [7, i * 3, 0]).collect();
        let index = SortedIndex::new(&held, 130, 0);
        let asked: Vec<Summary> = (0..100u64).map(|i| [7, i, 0]).collect();
        let want: Vec<bool> = (0..100).map(|i| i % 3 == 0).collect();
        assert_eq!(members(&index, &Grouped::new(&asked, 130)), want);
    }

    #[test]
    fn the_bucket_sort_sorts_random_and_skewed_values() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
        let random: Vec<Summary> = (0..100_000)
            .map(|_| pack(&rng.gen::<[u8; 24]>(), 82))
            .collect();
        let skewed: Vec<Summary> = (0..5000u64).map(|i| [i % 7, i, 0]).collect();
        for values in [random, skewed, Vec::new()] {
            let mut want = values.clone();
            want.sort_unstable();
            assert_eq!(sorted_copy(&values, |s| s[0]), want);
        }
    }
}
