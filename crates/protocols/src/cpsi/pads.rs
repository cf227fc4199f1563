//! Hashing silent OT's correlations into the bits each consumer keeps
//! (module `rot`): whole-word pads of a small VOLE's messages, the low
//! bits of one hash per OT, packed or one byte each.

use psikit_ot::aes_hash;
use rayon::prelude::*;
use zeroize::Zeroize;

use super::bits::Bits;

/// Per `x` of `xs`, the low `keep` bits of `H(x ⊕ offsets[j])` at bits
/// `keep·j ..` of one word (at most 64 bits in all), narrowed by
/// `narrow`; the inputs of 16 `x` permuted at once in a buffer on the
/// stack. `H(u) = π(u) ⊕ u`, and only the low bits are kept: those of
/// `π(u)` XOR those of `u`, the latter taken from `x` and the offset
/// directly.
pub(super) fn hashed_pads<T: Copy + Default + Send>(
    xs: &[u128],
    offsets: &[u128],
    keep: u32,
    narrow: fn(u64) -> T,
) -> Vec<T> {
    const PER: usize = 16;
    let width = offsets.len();
    let mask = (1u64 << keep) - 1;
    let spread = |j: usize, low: u64| (low & mask) << (keep as usize * j);
    let offset_bits = (offsets.iter().enumerate()).fold(0, |w, (j, o)| w | spread(j, *o as u64));
    let every = (0..width).fold(0, |w, j| w | spread(j, 1));
    let mut out = vec![T::default(); xs.len()];
    out.par_chunks_mut(1 << 10)
        .zip(xs.par_chunks(1 << 10))
        .for_each(|(out, xs)| {
            let mut buf = [0u128; PER * 16];
            for (out, xs) in out.chunks_mut(PER).zip(xs.chunks(PER)) {
                let buf = &mut buf[..xs.len() * width];
                for (row, x) in buf.chunks_exact_mut(width).zip(xs) {
                    for (b, o) in row.iter_mut().zip(offsets) {
                        *b = x ^ o;
                    }
                }
                aes_hash::permute_many(buf);
                for ((o, row), x) in out.iter_mut().zip(buf.chunks_exact(width)).zip(xs) {
                    let permuted =
                        (row.iter().enumerate()).fold(0, |w, (j, h)| w | spread(j, *h as u64));
                    let input = offset_bits ^ ((*x as u64 & mask) * every);
                    *o = narrow(permuted ^ input);
                }
            }
            buf.zeroize();
        });
    out
}

/// The low `keep` bits of `H(x)` for each `x` of `xs`.
pub(super) fn hashed_lows(xs: &[u128], keep: u32) -> Vec<u8> {
    let mask = (1u8 << keep) - 1;
    let mut out = vec![0u8; xs.len()];
    out.par_chunks_mut(1 << 12)
        .zip(xs.par_chunks(1 << 12))
        .for_each(|(out, xs)| {
            let mut buf = [0u128; 64];
            for (out, xs) in out.chunks_mut(64).zip(xs.chunks(64)) {
                let buf = &mut buf[..xs.len()];
                buf.copy_from_slice(xs);
                aes_hash::cr_many(buf);
                for (o, h) in out.iter_mut().zip(buf.iter()) {
                    *o = *h as u8 & mask;
                }
            }
            buf.zeroize();
        });
    out
}

/// Bit 0 of `H(x ⊕ offset)` for each `x` of `xs`.
pub(super) fn hashed_low_bits(xs: &[u128], offset: u128) -> Bits {
    let words = xs
        .par_chunks(1 << 12)
        .flat_map_iter(|chunk| {
            chunk.chunks(64).map(move |c| {
                let mut buf = [0u128; 64];
                let buf = &mut buf[..c.len()];
                for (b, x) in buf.iter_mut().zip(c) {
                    *b = x ^ offset;
                }
                aes_hash::cr_many(buf);
                let word = buf.iter().rev().fold(0, |w, h| w << 1 | (*h as u64 & 1));
                buf.zeroize();
                word
            })
        })
        .collect();
    Bits::from_words(words, xs.len())
}

/// Bit 0 of each message.
pub(super) fn low_bits_of(messages: &[u128]) -> Bits {
    Bits::from_bools(messages.iter().map(|m| m & 1 == 1))
}
