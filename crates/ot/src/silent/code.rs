//! The Expand-Convolute code (Raghuraman, Rindal, Tanguy, "Expand-Convolute
//! Codes for Pseudorandom Correlation Generators from LPN", CRYPTO 2023,
//! ePrint 2023/882), used to compress the silent generators' sparse noise.
//!
//! Silent OT and VOLE need a linear map `E: F^N -> F^k` (the "dual encode")
//! such that `E(e)` looks uniform when `e` is a sparse regular-noise vector
//! (dual LPN). Expand-Convolute builds `E` from two cheap steps over the
//! `N - k` entries after the first `k`:
//!
//! 1. **convolute**: a pass that, for each entry `x_i` in order, adds `x_i`
//!    to the next `ACC` entries selected by random bits and always to the
//!    one after them (circularly), run twice with independent bits; this
//!    is an accumulator with a random window (a convolution), linear-time
//!    and streaming;
//! 2. **expand**: each output `j < k` is the systematic entry `x_j` plus the
//!    sum of `WEIGHT` convoluted entries, one uniformly placed in each of
//!    `WEIGHT` equal regions (a regular expander), so outputs are
//!    independent and computed in parallel.
//!
//! The code is public: its random bits and positions come from AES-CTR
//! under fixed public seeds, so both parties build the same matrix.
//!
//! This is written here rather than taken from `cryprot-codes` (the one
//! crate implementing it): that crate picks its fast path at compile time
//! (`target_feature = "sse4.1"`), where psikit dispatches at run time, and
//! it pins its own `aes` and `rand` versions, which would put second copies
//! of both in every build.

use std::ops::{BitAnd, BitXor, BitXorAssign};

use rayon::prelude::*;

use crate::aes_hash::Prg;

/// Entries of the vectors a code encodes: GF(2^128) elements (`u128`) for
/// correlation values, GF(2) elements (`u8` holding 0 or 1) for choice
/// bits. Addition is XOR in both.
pub trait Symbol:
    Copy
    + Default
    + Send
    + Sync
    + BitXor<Output = Self>
    + BitXorAssign
    + BitAnd<Output = Self>
    + zeroize::DefaultIsZeroes
{
    /// All ones if `bit`, else zero: `x & mask(b)` is `b·x` without a branch.
    fn mask(bit: bool) -> Self;

    /// Bit `j` of the value (false past its width).
    fn bit(self, j: usize) -> bool;
}

impl Symbol for u128 {
    fn mask(bit: bool) -> Self {
        0u128.wrapping_sub(u128::from(bit))
    }

    fn bit(self, j: usize) -> bool {
        j < 128 && self >> j & 1 == 1
    }
}

impl Symbol for u8 {
    fn mask(bit: bool) -> Self {
        0u8.wrapping_sub(u8::from(bit))
    }

    fn bit(self, j: usize) -> bool {
        j < 8 && self >> j & 1 == 1
    }
}

/// Accumulator window of the convolution (RRT23's "24").
pub const ACC: usize = 24;
/// Expander weight (RRT23's weight-7 instance; `super::params` takes the
/// most conservative distance estimate published for it).
pub const WEIGHT: usize = 7;

/// Public seeds of the code's randomness (two convolution passes, expander).
const SEEDS: [u128; 3] = [
    0x7073_696b_6974_2d65_632d_6163_632d_3031, // "psikit-ec-acc-01"
    0x7073_696b_6974_2d65_632d_6163_632d_3032, // "psikit-ec-acc-02"
    0x7073_696b_6974_2d65_632d_6578_702d_3031, // "psikit-ec-exp-01"
];

/// An Expand-Convolute code from `N = 2k` inputs to `k` outputs.
#[derive(Clone, Debug)]
pub struct ExConvCode {
    /// Outputs (the message size).
    k: usize,
    /// Inputs (the code size), `2k`.
    n: usize,
}

impl ExConvCode {
    /// The code with `k` outputs and `2k` inputs. `k` must be at least
    /// `WEIGHT` so that every expander region is non-empty.
    pub fn new(k: usize) -> Self {
        assert!(k >= WEIGHT, "an Expand-Convolute code needs k >= {WEIGHT}");
        Self { k, n: 2 * k }
    }

    /// Outputs.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Inputs.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Encodes `x` (length `n`) in place; the result is `x[..k]`.
    pub fn dual_encode<T: Symbol>(&self, x: &mut [T]) {
        assert_eq!(x.len(), self.n, "the code takes {} inputs", self.n);
        let (out, tail) = x.split_at_mut(self.k);
        for &seed in &SEEDS[..2] {
            convolute(tail, seed);
        }
        expand(out, tail);
    }
}

/// One convolution pass over `x`: entry `i` is added to `x[i+1+b]` for each
/// random bit `b < ACC` that is set, then to `x[i+1+ACC]` (indices mod the
/// length). Sequential by nature (each entry is final only once its
/// predecessors are added in), but streaming and branch-free.
fn convolute<T: Symbol>(x: &mut [T], seed: u128) {
    let len = x.len();
    let bits = CoefficientStream::new(seed);
    // Entries whose window stays inside the slice take the fast loop.
    let straight = len.saturating_sub(ACC + 1);
    let mut block = [0u128; STREAM_BLOCKS];
    for start in (0..len).step_by(STREAMED) {
        bits.fill((start / STREAMED) as u64, &mut block);
        let end = (start + STREAMED).min(len);
        for i in start..end {
            let coeffs = coefficient_word(&block, i - start);
            let xi = x[i];
            if i < straight {
                let window = &mut x[i + 1..i + 2 + ACC];
                for (b, y) in window[..ACC].iter_mut().enumerate() {
                    *y ^= xi & T::mask(coeffs >> b & 1 == 1);
                }
                window[ACC] ^= xi;
            } else {
                for b in 0..ACC {
                    x[(i + 1 + b) % len] ^= xi & T::mask(coeffs >> b & 1 == 1);
                }
                x[(i + 1 + ACC) % len] ^= xi;
            }
        }
    }
}

/// Each `out[j] += Σ_r tail[region_r + offset(j, r)]` over `WEIGHT` equal
/// regions of `tail`, where `offset(j, r)` comes from stream word
/// `r·k + j`.
///
/// Row by row, the `WEIGHT` reads land anywhere in `tail` (16 MiB of blocks
/// at 2^20 outputs): a cache miss each, which made a row-major loop 90% of
/// an extension. So the outputs are summed one region at a time: each pass
/// streams through the outputs and reads at random within one region only
/// (`1/WEIGHT` of the tail, 2.3 MiB at 2^20 outputs), which stays in
/// the caches.
/// The outputs are split into one part per thread, each making all passes.
fn expand<T: Symbol>(out: &mut [T], tail: &[T]) {
    let (k, region) = (out.len(), tail.len() / WEIGHT);
    let positions = CoefficientStream::new(SEEDS[2]);
    let part = k.div_ceil(rayon::current_num_threads().max(1));
    out.par_chunks_mut(part.max(1))
        .enumerate()
        .for_each(|(p, rows)| {
            let mut words = vec![0u32; STREAMED];
            for r in 0..WEIGHT {
                let base = &tail[r * region..(r + 1) * region];
                for (s, sub) in rows.chunks_mut(STREAMED).enumerate() {
                    positions.words(r * k + p * part + s * STREAMED, &mut words[..sub.len()]);
                    for (o, &w) in sub.iter_mut().zip(&words) {
                        *o ^= base[reduce(w, region)];
                    }
                }
            }
        });
}

/// 32-bit words produced per refill of a stream.
const STREAMED: usize = 4 * STREAM_BLOCKS;
/// AES blocks per refill.
const STREAM_BLOCKS: usize = 1 << 10;

/// The code's public randomness: AES-CTR under a fixed seed, read as
/// 32-bit words; refill `c` holds words `c·STREAMED ..`.
struct CoefficientStream(Prg);

impl CoefficientStream {
    fn new(seed: u128) -> Self {
        Self(Prg::new(seed))
    }

    fn fill(&self, refill: u64, block: &mut [u128; STREAM_BLOCKS]) {
        self.0.fill(refill * STREAM_BLOCKS as u64, block);
    }

    /// Words `first, first + 1, ..` into `out` (at most [`STREAMED`]).
    fn words(&self, first: usize, out: &mut [u32]) {
        let mut block = [0u128; STREAM_BLOCKS + 1];
        let blocks = (first % 4 + out.len()).div_ceil(4);
        self.0.fill((first / 4) as u64, &mut block[..blocks]);
        for (i, o) in out.iter_mut().enumerate() {
            let w = first % 4 + i;
            *o = (block[w / 4] >> (32 * (w % 4))) as u32;
        }
    }
}

/// Word `w` of a refill.
fn coefficient_word(block: &[u128; STREAM_BLOCKS], w: usize) -> u32 {
    (block[w / 4] >> (32 * (w % 4))) as u32
}

/// A 32-bit random word mapped to `0..bound` (multiply-shift; the bias of
/// at most `bound / 2^32` is irrelevant for a public code).
fn reduce(word: u32, bound: usize) -> usize {
    ((u64::from(word) * bound as u64) >> 32) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// Words `0..count` of a code stream, computed in one go.
    fn stream_words(seed: u128, count: usize) -> Vec<u32> {
        let blocks = Prg::new(seed).blocks(0, count.div_ceil(4));
        (0..count)
            .map(|w| (blocks[w / 4] >> (32 * (w % 4))) as u32)
            .collect()
    }

    /// The code as its definition, with plain loops and indices taken mod
    /// the length everywhere, to check the fast loops and the streaming.
    fn reference_encode(code: &ExConvCode, x: &[u128]) -> Vec<u128> {
        let k = code.k();
        let mut tail = x[k..].to_vec();
        let len = tail.len();
        for &seed in &SEEDS[..2] {
            let words = stream_words(seed, len);
            for i in 0..len {
                let xi = tail[i];
                for b in 0..ACC {
                    if words[i] >> b & 1 == 1 {
                        tail[(i + 1 + b) % len] ^= xi;
                    }
                }
                tail[(i + 1 + ACC) % len] ^= xi;
            }
        }
        let words = stream_words(SEEDS[2], WEIGHT * k);
        let region = len / WEIGHT;
        (0..k)
            .map(|j| {
                (0..WEIGHT).fold(x[j], |acc, r| {
                    let offset = (u64::from(words[r * k + j]) * region as u64) >> 32;
                    acc ^ tail[r * region + offset as usize]
                })
            })
            .collect()
    }

    #[test]
    fn fast_encoding_equals_the_definition() {
        let mut rng = StdRng::seed_from_u64(1);
        for k in [WEIGHT, 40, 257, 1000, 5000] {
            let code = ExConvCode::new(k);
            let x: Vec<u128> = (0..code.n()).map(|_| rng.gen()).collect();
            let mut y = x.clone();
            code.dual_encode(&mut y);
            assert_eq!(y[..k], reference_encode(&code, &x)[..], "k = {k}");
        }
    }

    #[test]
    fn bits_and_blocks_encode_alike() {
        // Encoding a 0/1 vector as bits or as blocks of 0/1 agrees: what
        // the silent OT receiver's choice bits rely on.
        let mut rng = StdRng::seed_from_u64(2);
        let code = ExConvCode::new(5000);
        let bits: Vec<u8> = (0..code.n()).map(|_| rng.gen_range(0..2)).collect();
        let mut blocks: Vec<u128> = bits.iter().map(|&b| u128::from(b)).collect();
        let mut encoded = bits.clone();
        code.dual_encode(&mut encoded);
        code.dual_encode(&mut blocks);
        let as_bits: Vec<u8> = blocks[..code.k()].iter().map(|&b| b as u8).collect();
        assert_eq!(encoded[..code.k()], as_bits[..]);
    }

    #[test]
    fn a_single_noise_entry_spreads_over_many_outputs() {
        // The convolution is an accumulator: a tail entry reaches about
        // half of all later entries, so about half of the outputs. Far
        // fewer would mean a broken pass.
        let code = ExConvCode::new(1 << 14);
        for i in [code.k(), code.k() + 7, code.n() - 1] {
            let mut x = vec![0u8; code.n()];
            x[i] = 1;
            code.dual_encode(&mut x);
            let weight = x[..code.k()].iter().filter(|&&b| b == 1).count();
            assert!(
                weight > code.k() / 4,
                "entry {i} reaches only {weight} outputs"
            );
        }
    }
}
