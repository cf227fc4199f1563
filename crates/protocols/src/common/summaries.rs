//! The last round of the balanced two-party PSIs (RR16, VOLE-PSI): the
//! sender sends one short pseudorandom *summary value* per item (a
//! truncated OPRF output, or RR16's `H(x || garbled filter sum)`), sorted so
//! that their order says nothing; the receiver compares its own; and, if
//! both parties asked for it, the receiver reveals the matched values so
//! that the sender can map them back to its items.
//!
//! Summary values are `σ + log2 n_s + log2 n_r` bits ([`summary_len`]):
//! any false match over the whole run has probability at most `2^-σ`
//! (`σ` from [`crate::common::statistical`]).

use std::collections::HashMap;

use psikit_transport::{Channel, DecodeError, ProtocolId};
use rayon::prelude::*;

use crate::error::Error;

/// A summary value in fixed-size words: its `len` bytes (at most 21 for
/// sets below 2^64) little-endian in three `u64`s, zero-padded. Fixed size
/// keeps them off the heap, and word comparisons make sorting and binary
/// search cheap (byte arrays compare through `memcmp` calls).
pub type Summary = [u64; 3];

/// Bytes of a summary value for these set sizes: `σ + log2(n_s) +
/// log2(n_r)` bits for a `2^-σ` chance of any false match.
pub fn summary_len(sender: u64, receiver: u64, sigma: u32) -> usize {
    let bits = sigma + 64 - sender.max(1).leading_zeros() + 64 - receiver.max(1).leading_zeros();
    bits.div_ceil(8) as usize
}

/// The first `len` bytes of `bytes` (at most 24) as a [`Summary`].
pub fn pack(bytes: &[u8], len: usize) -> Summary {
    let mut buf = [0u8; 24];
    buf[..len].copy_from_slice(&bytes[..len]);
    let word = |i: usize| u64::from_le_bytes(buf[8 * i..8 * i + 8].try_into().expect("8 bytes"));
    [word(0), word(1), word(2)]
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
    /// Bytes per value ([`summary_len`]).
    pub len: usize,
}

impl Exchange {
    /// The sender's side: sends its values sorted (hiding which belongs to
    /// which item), then, if `reveal`, learns which of its items matched.
    pub async fn send(
        &self,
        ch: &mut Channel,
        values: &[Summary],
        reveal: bool,
    ) -> Result<Option<Vec<usize>>, Error> {
        let sorted = sorted_copy(values, |s| s[0]);
        ch.send_chunked(self.protocol, self.summaries, &self.encode(&sorted))
            .await?;
        drop(sorted);
        match reveal {
            true => Ok(Some(self.receive_revealed(ch, values).await?)),
            false => Ok(None),
        }
    }

    /// The receiver's side: which of `mine` the sender (of `peer_count`
    /// items) holds; if `reveal`, tells the sender which matched.
    pub async fn receive(
        &self,
        ch: &mut Channel,
        mine: &[Summary],
        peer_count: u64,
        reveal: bool,
    ) -> Result<Vec<bool>, Error> {
        // Our own values sorted, indexed before the sender's arrive (while
        // it computes them); theirs are then looked up in any order.
        let numbered: Vec<(Summary, u32)> = mine.iter().zip(0u32..).map(|(s, i)| (*s, i)).collect();
        let numbered = sorted_copy(&numbered, |p| p.0[0]);
        let (sorted, order): (Vec<Summary>, Vec<u32>) = numbered.into_iter().unzip();
        let index = SortedIndex::new(&sorted, self.len);
        let max = peer_count * self.len as u64;
        let bytes = ch.recv_chunked(self.protocol, self.summaries, max).await?;
        let found: Vec<usize> = split_values(&bytes, self.len, peer_count)?
            .par_iter()
            .filter_map(|v| index.position(&pack(v, self.len)))
            .collect();
        let mut matches = vec![false; mine.len()];
        for p in found {
            matches[order[p] as usize] = true;
        }
        if reveal {
            let found: Vec<Summary> = mine
                .iter()
                .zip(&matches)
                .filter(|(_, m)| **m)
                .map(|(s, _)| *s)
                .collect();
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
        let max = (summaries.len() * self.len) as u64;
        let bytes = ch.recv_chunked(self.protocol, self.reveal, max).await?;
        let values = self.decode(&bytes, summaries.len() as u64)?;
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

    /// Values as sent: each truncated to the value length.
    fn encode(&self, values: &[Summary]) -> Vec<u8> {
        let mut out = vec![0u8; values.len() * self.len];
        if self.len > 0 {
            out.par_chunks_mut(self.len)
                .zip(values.par_iter())
                .for_each(|(o, v)| {
                    let mut buf = [0u8; 24];
                    for (bytes, w) in buf.chunks_exact_mut(8).zip(v) {
                        bytes.copy_from_slice(&w.to_le_bytes());
                    }
                    o.copy_from_slice(&buf[..self.len]);
                });
        }
        out
    }

    /// Received values (at most `max_count`), zero-padded.
    fn decode(&self, bytes: &[u8], max_count: u64) -> Result<Vec<Summary>, Error> {
        Ok(split_values(bytes, self.len, max_count)?
            .into_iter()
            .map(|v| pack(v, self.len))
            .collect())
    }
}

/// Sorted values with a directory of where each value of their leading
/// bits starts: a lookup reads one short run (about two values) instead of
/// binary-searching the whole array, whose last levels each miss the cache
/// (a binary search per item was a fifth of the receiver's time at 2^20).
/// Comparisons only: no hashing of values the peer chose, and skewed
/// values only lengthen runs.
struct SortedIndex<'a> {
    sorted: &'a [Summary],
    /// `starts[b]`: the first value whose leading bits are `>= b`.
    starts: Vec<u32>,
    /// Right shift of a value's first word giving its leading bits.
    shift: u32,
}

impl<'a> SortedIndex<'a> {
    /// `sorted` must be sorted; `len` is the values' byte length.
    fn new(sorted: &'a [Summary], len: usize) -> Self {
        // Leading bits of the first word's `8·min(len, 8)` value bits: about
        // two values per directory entry.
        let value_bits = 8 * len.min(8) as u32;
        let dir_bits = (sorted.len().max(1).ilog2()).clamp(1, 24).min(value_bits);
        let shift = value_bits - dir_bits;
        let mut starts = vec![0u32; (1 << dir_bits) + 1];
        let mut next = 0usize;
        for (b, start) in starts.iter_mut().enumerate() {
            while next < sorted.len() && ((sorted[next][0] >> shift) as usize) < b {
                next += 1;
            }
            *start = next as u32;
        }
        Self {
            sorted,
            starts,
            shift,
        }
    }

    /// Where `s` is in the sorted values, if it is there.
    fn position(&self, s: &Summary) -> Option<usize> {
        let b = (s[0] >> self.shift) as usize;
        match (self.starts.get(b), self.starts.get(b + 1)) {
            (Some(&lo), Some(&hi)) => self.sorted[lo as usize..hi as usize]
                .iter()
                .position(|x| x == s)
                .map(|p| lo as usize + p),
            _ => None,
        }
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
    let first = bucket_into(values, &mut out, |v| (word(v) >> 56) as usize);
    let mut scratch = Vec::new();
    for range in first {
        let bucket = &mut out[range];
        if bucket.len() <= 64 {
            bucket.sort_unstable();
            continue;
        }
        scratch.clear();
        scratch.resize(bucket.len(), T::default());
        for sub in bucket_into(bucket, &mut scratch, |v| (word(v) >> 48) as usize & 0xff) {
            scratch[sub].sort_unstable();
        }
        bucket.copy_from_slice(&scratch);
    }
    out
}

/// Scatters `from` into `to` by `byte` (below 256), keeping their order
/// within a bucket; returns each bucket's range.
fn bucket_into<T: Copy>(
    from: &[T],
    to: &mut [T],
    byte: impl Fn(&T) -> usize,
) -> Vec<std::ops::Range<usize>> {
    let mut starts = [0usize; 257];
    for s in from {
        starts[byte(s) + 1] += 1;
    }
    for b in 0..256 {
        starts[b + 1] += starts[b];
    }
    let mut next = starts;
    for s in from {
        let b = byte(s);
        to[next[b]] = *s;
        next[b] += 1;
    }
    (0..256).map(|b| starts[b]..starts[b + 1]).collect()
}

/// Splits a received run of fixed-size summary values.
pub fn split_values(bytes: &[u8], len: usize, max_count: u64) -> Result<Vec<&[u8]>, DecodeError> {
    if len == 0 || !bytes.len().is_multiple_of(len) {
        return Err(DecodeError::invalid(
            "summary values",
            "length is not a multiple of the value size",
        ));
    }
    let count = (bytes.len() / len) as u64;
    if count > max_count {
        return Err(DecodeError::TooLarge {
            field: "summary values",
            got: count,
            max: max_count,
        });
    }
    Ok(bytes.chunks_exact(len).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_length_covers_lambda_and_set_sizes() {
        assert_eq!(summary_len(1, 1, 40), 6);
        assert_eq!(summary_len(1 << 20, 1 << 20, 40), 11);
        assert_eq!(summary_len(0, 0, 40), 6);
        // A job's buckets take more bits each: 256 buckets, 8 more.
        assert_eq!(summary_len(1 << 20, 1 << 20, 48), 12);
    }

    #[test]
    fn values_split_only_into_whole_values_within_the_count() {
        assert!(split_values(&[0u8; 30], 10, 2).is_err());
        assert_eq!(split_values(&[0u8; 30], 10, 3).expect("3 values").len(), 3);
        assert!(split_values(&[0u8; 31], 10, 9).is_err());
        assert!(split_values(&[0u8; 0], 0, 9).is_err());
    }

    #[test]
    fn the_index_finds_exactly_the_values_held() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        for (len, n) in [(6, 0), (6, 1), (6, 1000), (11, 5000), (16, 3)] {
            let mut held: Vec<Summary> =
                (0..n).map(|_| pack(&rng.gen::<[u8; 24]>(), len)).collect();
            held.sort_unstable();
            let index = SortedIndex::new(&held, len);
            for (i, s) in held.iter().enumerate() {
                assert_eq!(index.position(s), Some(i), "len {len} n {n}");
            }
            let absent = (0..1000)
                .map(|_| pack(&rng.gen::<[u8; 24]>(), len))
                .filter(|s| held.binary_search(s).is_err());
            assert!(absent.into_iter().all(|s| index.position(&s).is_none()));
        }
    }

    #[test]
    fn the_bucket_sort_sorts_random_and_skewed_values() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
        let random: Vec<Summary> = (0..100_000)
            .map(|_| pack(&rng.gen::<[u8; 24]>(), 11))
            .collect();
        let skewed: Vec<Summary> = (0..5000u64).map(|i| [i % 7, i, 0]).collect();
        for values in [random, skewed, Vec::new()] {
            let mut want = values.clone();
            want.sort_unstable();
            assert_eq!(sorted_copy(&values, |s| s[0]), want);
        }
    }

    #[test]
    fn encoding_truncates_and_decoding_restores() {
        let x = Exchange {
            protocol: 9,
            summaries: 1,
            reveal: 2,
            len: 11,
        };
        let values = [pack(&[7u8; 24], 11), pack(&[1u8; 24], 11)];
        let bytes = x.encode(&values);
        assert_eq!(bytes.len(), 22);
        assert_eq!(x.decode(&bytes, 2).expect("decode"), values);
        assert!(x.decode(&bytes, 1).is_err());
    }
}
