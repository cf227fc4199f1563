//! SHA-256's compression function on many independent one-block messages.
//!
//! Hashing a million short items (VOLE-PSI's item keys) is one compression
//! each from the initial state. With the SHA extensions one compression is
//! bound by the latency of its dependent `sha256rnds2` chain (about 60 ns
//! here), while the unit can start another one meanwhile: the kernel below
//! runs two messages' rounds interleaved. Two, because the SHA instructions
//! only reach the 16 legacy vector registers and each message keeps seven
//! of them live.

/// SHA-256's initial state (FIPS 180-4, 5.3.3).
pub const IV: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// `states[i]` = the compression function of [`IV`] and `blocks[i]` (the
/// state after the first block of a message). Uses the SHA extensions
/// when [`crate::cpu`] reports them; the `sha2` crate otherwise (the
/// reference the tests compare against).
///
/// # Panics
/// If the slices have different lengths.
pub fn compress_from_iv(blocks: &[[u8; 64]], states: &mut [[u32; 8]]) {
    compress_from(&IV, blocks, states);
}

/// `states[i]` = the compression function of `init` and `blocks[i]`: the
/// last block of messages that share their earlier blocks (a fixed
/// prefix, compressed once into `init`). Same dispatch as
/// [`compress_from_iv`].
///
/// # Panics
/// If the slices have different lengths.
pub fn compress_from(init: &[u32; 8], blocks: &[[u8; 64]], states: &mut [[u32; 8]]) {
    assert_eq!(blocks.len(), states.len(), "one state per block");
    #[allow(unused_mut)]
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if crate::cpu::features().sha {
        // SAFETY: the CPU dispatch just confirmed the SHA extensions and
        // SSE4.1 at run time; the kernel reads and writes only through
        // the slices it is given.
        #[allow(unsafe_code)]
        unsafe {
            done = x86::compress_pairs(init, blocks, states);
        }
    }
    reference(init, &blocks[done..], &mut states[done..]);
}

/// The portable path: one message at a time through `sha2`.
fn reference(init: &[u32; 8], blocks: &[[u8; 64]], states: &mut [[u32; 8]]) {
    for (block, state) in blocks.iter().zip(states) {
        *state = *init;
        sha2::compress256(state, &[(*block).into()]);
    }
}

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod x86 {
    use core::arch::x86_64::{
        __m128i, _mm_add_epi32, _mm_alignr_epi8, _mm_blend_epi16, _mm_loadu_si128, _mm_set_epi64x,
        _mm_sha256msg1_epu32, _mm_sha256msg2_epu32, _mm_sha256rnds2_epu32, _mm_shuffle_epi32,
        _mm_shuffle_epi8, _mm_storeu_si128,
    };

    /// The round constants (FIPS 180-4, 4.2.2), four per vector.
    static K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];

    /// One message's working state: `abef`, `cdgh` as `sha256rnds2` wants
    /// them, and the last five schedule vectors.
    struct Lane {
        abef: __m128i,
        cdgh: __m128i,
        w: [__m128i; 5],
    }

    /// Compresses `blocks` two at a time from `init` into `states`;
    /// returns how many it did (all but an odd last one).
    ///
    /// Callers must have checked the `sha` and `sse4.1` extensions.
    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    pub unsafe fn compress_pairs(
        init: &[u32; 8],
        blocks: &[[u8; 64]],
        states: &mut [[u32; 8]],
    ) -> usize {
        // Byte order of the message words (big-endian in each 32 bits).
        let mask = _mm_set_epi64x(0x0C0D_0E0F_0809_0A0B, 0x0405_0607_0001_0203);
        let (abef0, cdgh0) = pack(init);
        for (pair, out) in blocks.chunks_exact(2).zip(states.chunks_exact_mut(2)) {
            let load = |b: &[u8; 64], i: usize| {
                _mm_shuffle_epi8(_mm_loadu_si128(b.as_ptr().cast::<__m128i>().add(i)), mask)
            };
            let lane = |b: &[u8; 64]| Lane {
                abef: abef0,
                cdgh: cdgh0,
                w: [load(b, 0), load(b, 1), load(b, 2), load(b, 3), load(b, 0)],
            };
            let mut x = lane(&pair[0]);
            let mut y = lane(&pair[1]);
            // Rounds 0..16 on the message words, then 16..64 on the
            // schedule, whose vector `i` replaces the one from `i - 5`
            // (index `i % 5` of the five kept). Written out so that every
            // index is a constant and the lanes stay in registers.
            macro_rules! groups {
                ($($i:literal)*) => {$(
                    if $i >= 4 {
                        schedule(&mut x, $i);
                        schedule(&mut y, $i);
                    }
                    let k = _mm_loadu_si128(K.as_ptr().cast::<__m128i>().add($i));
                    rounds4(&mut x, &mut y, $i, k);
                )*};
            }
            groups!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
            for (l, out) in [x, y].iter().zip(out.iter_mut()) {
                let abef = _mm_add_epi32(l.abef, abef0);
                let cdgh = _mm_add_epi32(l.cdgh, cdgh0);
                unpack(abef, cdgh, out);
            }
        }
        blocks.len() / 2 * 2
    }

    /// Schedule vector `i >= 4` from vectors `i - 4 .. i`.
    #[inline(always)]
    unsafe fn schedule(l: &mut Lane, i: usize) {
        let w = |j: usize| l.w[j % 5];
        let t1 = _mm_sha256msg1_epu32(w(i - 4), w(i - 3));
        let t2 = _mm_alignr_epi8(w(i - 1), w(i - 2), 4);
        l.w[i % 5] = _mm_sha256msg2_epu32(_mm_add_epi32(t1, t2), w(i - 1));
    }

    /// Rounds `4i .. 4i + 4` of both lanes, interleaved.
    #[inline(always)]
    unsafe fn rounds4(x: &mut Lane, y: &mut Lane, i: usize, k: __m128i) {
        let tx = _mm_add_epi32(x.w[i % 5], k);
        let ty = _mm_add_epi32(y.w[i % 5], k);
        x.cdgh = _mm_sha256rnds2_epu32(x.cdgh, x.abef, tx);
        y.cdgh = _mm_sha256rnds2_epu32(y.cdgh, y.abef, ty);
        x.abef = _mm_sha256rnds2_epu32(x.abef, x.cdgh, _mm_shuffle_epi32(tx, 0x0E));
        y.abef = _mm_sha256rnds2_epu32(y.abef, y.cdgh, _mm_shuffle_epi32(ty, 0x0E));
    }

    /// A state as the (`abef`, `cdgh`) pair.
    #[inline(always)]
    unsafe fn pack(state: &[u32; 8]) -> (__m128i, __m128i) {
        let dcba = _mm_loadu_si128(state.as_ptr().cast::<__m128i>());
        let efgh = _mm_loadu_si128(state.as_ptr().cast::<__m128i>().add(1));
        let cdab = _mm_shuffle_epi32(dcba, 0xB1);
        let efgh = _mm_shuffle_epi32(efgh, 0x1B);
        (
            _mm_alignr_epi8(cdab, efgh, 8),
            _mm_blend_epi16(efgh, cdab, 0xF0),
        )
    }

    /// The (`abef`, `cdgh`) pair back as a state.
    #[inline(always)]
    unsafe fn unpack(abef: __m128i, cdgh: __m128i, state: &mut [u32; 8]) {
        let feba = _mm_shuffle_epi32(abef, 0x1B);
        let dchg = _mm_shuffle_epi32(cdgh, 0xB1);
        let dcba = _mm_blend_epi16(feba, dchg, 0xF0);
        let hgef = _mm_alignr_epi8(dchg, feba, 8);
        _mm_storeu_si128(state.as_mut_ptr().cast::<__m128i>(), dcba);
        _mm_storeu_si128(state.as_mut_ptr().cast::<__m128i>().add(1), hgef);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn the_kernel_matches_sha2_at_every_count() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for count in [0, 1, 2, 3, 4, 7, 64, 101] {
            let blocks: Vec<[u8; 64]> = (0..count)
                .map(|_| {
                    let mut b = [0u8; 64];
                    rng.fill(&mut b[..]);
                    b
                })
                .collect();
            let mut got = vec![[0u32; 8]; count];
            compress_from_iv(&blocks, &mut got);
            let mut want = vec![[0u32; 8]; count];
            reference(&IV, &blocks, &mut want);
            assert_eq!(got, want, "{count} blocks");
            // From another state (a prefix's).
            let init: [u32; 8] = rng.gen();
            compress_from(&init, &blocks, &mut got);
            reference(&init, &blocks, &mut want);
            assert_eq!(got, want, "{count} blocks after a prefix");
        }
    }

    #[test]
    fn one_padded_block_is_the_digest() {
        use sha2::{Digest, Sha256};
        let mut block = [0u8; 64];
        block[..3].copy_from_slice(b"abc");
        block[3] = 0x80;
        block[63] = 24;
        let mut state = [[0u32; 8]; 2];
        compress_from_iv(&[block, block], &mut state);
        let digest: Vec<u8> = state[1].iter().flat_map(|w| w.to_be_bytes()).collect();
        assert_eq!(digest[..], Sha256::digest(b"abc")[..]);
    }
}
