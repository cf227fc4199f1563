//! Hashing silent OT's correlations into the bits each consumer keeps
//! (module `rot`): whole-word pads of a small VOLE's messages, the low
//! bits of one hash per OT, packed or one byte each.

use psikit_ot::aes_hash;
use rayon::prelude::*;
use zeroize::Zeroize;

use super::bits::Bits;

/// Per `x` of `xs`, the low `keep` bits of `H(x ⊕ offsets[j])` at bits
/// `keep·j ..` of one word (at most 64 bits in all), narrowed by `narrow`
/// ([`aes_hash::cr_lows_at_offsets`] a block of inputs at a time).
pub(super) fn hashed_pads<T: Copy + Default + Send>(
    xs: &[u128],
    offsets: &[u128],
    keep: u32,
    narrow: fn(u64) -> T,
) -> Vec<T> {
    const BLOCK: usize = 1 << 10;
    let mut out = vec![T::default(); xs.len()];
    out.par_chunks_mut(BLOCK)
        .zip(xs.par_chunks(BLOCK))
        .for_each(|(out, xs)| {
            let mut words = [0u64; BLOCK];
            let words = &mut words[..xs.len()];
            aes_hash::cr_lows_at_offsets(xs, offsets, keep, words);
            for (o, w) in out.iter_mut().zip(words.iter()) {
                *o = narrow(*w);
            }
            words.zeroize();
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
