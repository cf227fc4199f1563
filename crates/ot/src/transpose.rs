//! Bit-matrix transposition between 128 × n and n × 128.
//!
//! OT extension produces its matrix column by column (one column per base
//! OT, `n` bits each, from a PRG) but every OT needs a row (128 bits, one
//! per base OT). This module turns one layout into the other.
//!
//! Layouts (bit `k` of a `u128` is `(x >> k) & 1`, i.e. little-endian):
//!
//! * *column-major* `cols`: 128 columns of `n / 128` blocks each; bit `i` of
//!   column `j` is bit `i % 128` of `cols[j * (n / 128) + i / 128]`.
//! * *row-major* `rows`: `n` rows; bit `j` of row `i` is bit `j` of `rows[i]`.
//!
//! Both directions work tile by tile on 128 × 128 squares. The x86_64 fast
//! paths use a 16 × 16 byte shuffle network followed by `PMOVMSKB`, which
//! extracts one bit from each of 16 (SSE2) or 32 (AVX2) bytes at once. SSE2
//! is part of every x86_64 CPU; AVX2 is used when psikit's CPU dispatch
//! ([`psikit_primitives::cpu`]) detects it at run time. The
//! portable path transposes a tile with seven rounds of masked block swaps on
//! `u128` rows. Tests check that every path equals a naive bit-by-bit
//! transpose.

/// Which tile routine runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    Portable,
    Sse2,
    Avx2,
}

/// The fastest path this CPU supports (psikit's one run-time dispatch,
/// [`psikit_primitives::cpu`]).
pub fn best_path() -> Path {
    let cpu = psikit_primitives::cpu::features();
    if cfg!(target_arch = "x86_64") && cpu.avx2 {
        Path::Avx2
    } else if cfg!(target_arch = "x86_64") && cpu.sse2 {
        Path::Sse2
    } else {
        Path::Portable
    }
}

/// Transposes a column-major 128 × n matrix into `n` rows. `n` is
/// `cols.len()`, which must equal `rows.len()` and be a multiple of 128.
pub fn transpose_128xn(cols: &[u128], rows: &mut [u128]) {
    transpose_impl(cols, rows, true, best_path());
}

/// Transposes `n` rows into a column-major 128 × n matrix (the inverse of
/// [`transpose_128xn`]).
pub fn transpose_nx128(rows: &[u128], cols: &mut [u128]) {
    transpose_impl(rows, cols, false, best_path());
}

/// [`transpose_128xn`] on a chosen path, for tests and benchmarks. Falls
/// back to the portable path if the CPU lacks the requested features.
pub fn transpose_128xn_with(path: Path, cols: &[u128], rows: &mut [u128]) {
    transpose_impl(cols, rows, true, checked(path));
}

/// [`transpose_nx128`] on a chosen path (see [`transpose_128xn_with`]).
pub fn transpose_nx128_with(path: Path, rows: &[u128], cols: &mut [u128]) {
    transpose_impl(rows, cols, false, checked(path));
}

/// `path` if this CPU supports it, else the portable path.
fn checked(path: Path) -> Path {
    let ok = matches!(
        (path, best_path()),
        (Path::Portable, _) | (Path::Sse2, Path::Sse2 | Path::Avx2) | (Path::Avx2, Path::Avx2)
    );
    if ok {
        path
    } else {
        Path::Portable
    }
}

/// Reference implementation, one bit at a time.
pub fn transpose_128xn_naive(cols: &[u128], rows: &mut [u128]) {
    let blocks = cols.len() / 128;
    for (i, row) in rows.iter_mut().enumerate() {
        let mut r = 0u128;
        for j in 0..128 {
            let bit = (cols[j * blocks + i / 128] >> (i % 128)) & 1;
            r |= bit << j;
        }
        *row = r;
    }
}

/// Shared driver: for each 128 × 128 tile, gathers its 128 source words,
/// transposes them and scatters the result. `forward` is 128×n → n×128.
fn transpose_impl(src: &[u128], dst: &mut [u128], forward: bool, path: Path) {
    let n = src.len();
    assert_eq!(
        n,
        dst.len(),
        "transpose: source and destination sizes differ"
    );
    assert_eq!(n % 128, 0, "transpose: n must be a multiple of 128");
    let blocks = n / 128;
    let mut tile_in = [0u128; 128];
    let mut tile_out = [0u128; 128];
    for t in 0..blocks {
        if forward {
            for (j, w) in tile_in.iter_mut().enumerate() {
                *w = src[j * blocks + t];
            }
        } else {
            tile_in.copy_from_slice(&src[t * 128..(t + 1) * 128]);
        }
        if forward {
            let out: &mut [u128; 128] = (&mut dst[t * 128..(t + 1) * 128])
                .try_into()
                .expect("tile of 128 rows");
            transpose_tile(&tile_in, out, path);
        } else {
            transpose_tile(&tile_in, &mut tile_out, path);
            for (j, w) in tile_out.iter().enumerate() {
                dst[j * blocks + t] = *w;
            }
        }
    }
}

/// Transposes one 128 × 128 tile: bit `j` of `out[i]` = bit `i` of `inp[j]`.
/// `path` must have been validated by [`best_path`] or [`checked`].
fn transpose_tile(inp: &[u128; 128], out: &mut [u128; 128], path: Path) {
    match path {
        #[cfg(target_arch = "x86_64")]
        Path::Avx2 => {
            // SAFETY: `Path::Avx2` is only produced by `best_path`/`checked`
            // after the CPU dispatch detected AVX2 at run time; the
            // routine needs nothing else and touches memory only through
            // safe references.
            unsafe { avx2::transpose_tile(inp, out) }
        }
        #[cfg(target_arch = "x86_64")]
        Path::Sse2 => {
            // SAFETY: `Path::Sse2` is only produced after the CPU dispatch
            // detected SSE2 (or AVX2, which implies it) at run time; memory
            // is accessed through safe references.
            unsafe { sse2::transpose_tile(inp, out) }
        }
        _ => {
            out.copy_from_slice(inp);
            transpose_tile_in_place(out);
        }
    }
}

/// Portable tile transpose: at each scale `j` (64, 32, ..., 1) swap the
/// off-diagonal `j × j` blocks of every `2j × 2j` block.
fn transpose_tile_in_place(m: &mut [u128; 128]) {
    let mut j = 64;
    let mut mask: u128 = u128::from(u64::MAX); // columns c with c & j == 0
    while j != 0 {
        let mut r = 0;
        while r < 128 {
            for k in r..r + j {
                let (a, b) = (m[k], m[k + j]);
                let t = ((a >> j) ^ b) & mask;
                m[k + j] = b ^ t;
                m[k] = a ^ (t << j);
            }
            r += 2 * j;
        }
        j >>= 1;
        mask ^= mask << j;
    }
}

#[cfg(target_arch = "x86_64")]
mod sse2 {
    use core::arch::x86_64::{
        __m128i, _mm_add_epi8, _mm_movemask_epi8, _mm_unpackhi_epi8, _mm_unpacklo_epi8,
    };

    /// SSE2 tile transpose. For each group of 16 input rows, a 4-round
    /// byte-interleave network turns the 16 rows × 16 bytes into 16 vectors
    /// holding "byte b of each of the 16 rows"; `PMOVMSKB` then reads bit 7
    /// of those 16 bytes (16 bits of one output row) and doubling each byte
    /// brings the next bit into position.
    ///
    /// # Safety
    /// The CPU must support SSE2.
    #[target_feature(enable = "sse2")]
    pub(super) unsafe fn transpose_tile(inp: &[u128; 128], out: &mut [u128; 128]) {
        let out16: &mut [[u16; 8]] = bytemuck::cast_slice_mut(&mut out[..]);
        for g in 0..8 {
            let mut v: [__m128i; 16] = [bytemuck::cast(0u128); 16];
            for (k, slot) in v.iter_mut().enumerate() {
                *slot = bytemuck::cast(inp[16 * g + k]);
            }
            // Each round maps (vector v, byte p) to a rotation of the 8-bit
            // index v‖p; four rounds swap v and p, i.e. transpose.
            for _ in 0..4 {
                let mut w = v;
                for k in 0..8 {
                    w[2 * k] = _mm_unpacklo_epi8(v[k], v[k + 8]);
                    w[2 * k + 1] = _mm_unpackhi_epi8(v[k], v[k + 8]);
                }
                v = w;
            }
            for (b, vb) in v.iter().enumerate() {
                let mut x = *vb;
                for bit in (0..8).rev() {
                    out16[8 * b + bit][g] = _mm_movemask_epi8(x) as u16;
                    x = _mm_add_epi8(x, x);
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use core::arch::x86_64::{
        __m256i, _mm256_add_epi8, _mm256_movemask_epi8, _mm256_unpackhi_epi8, _mm256_unpacklo_epi8,
    };

    /// AVX2 tile transpose: the SSE2 network run on two groups of 16 rows
    /// at once (one per 128-bit lane, since AVX2 unpacks stay within lanes),
    /// so each `VPMOVMSKB` yields 32 bits of an output row.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    // `pair` selects both input rows and an output column, so a range loop
    // reads best.
    #[allow(clippy::needless_range_loop)]
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn transpose_tile(inp: &[u128; 128], out: &mut [u128; 128]) {
        let out32: &mut [[u32; 4]] = bytemuck::cast_slice_mut(&mut out[..]);
        for pair in 0..4 {
            let (lo, hi) = (32 * pair, 32 * pair + 16);
            let mut v: [__m256i; 16] = [bytemuck::cast([0u128; 2]); 16];
            for (k, slot) in v.iter_mut().enumerate() {
                *slot = bytemuck::cast([inp[lo + k], inp[hi + k]]);
            }
            for _ in 0..4 {
                let mut w = v;
                for k in 0..8 {
                    w[2 * k] = _mm256_unpacklo_epi8(v[k], v[k + 8]);
                    w[2 * k + 1] = _mm256_unpackhi_epi8(v[k], v[k + 8]);
                }
                v = w;
            }
            for (b, vb) in v.iter().enumerate() {
                let mut x = *vb;
                for bit in (0..8).rev() {
                    out32[8 * b + bit][pair] = _mm256_movemask_epi8(x) as u32;
                    x = _mm256_add_epi8(x, x);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn every_path_equals_naive() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for n in [128usize, 256, 384, 1024, 128 * 37] {
            let cols: Vec<u128> = (0..n).map(|_| rng.gen()).collect();
            let mut naive = vec![0u128; n];
            transpose_128xn_naive(&cols, &mut naive);
            let mut fast = vec![0u128; n];
            transpose_128xn(&cols, &mut fast);
            assert_eq!(fast, naive, "n = {n}");
            let mut back = vec![0u128; n];
            transpose_nx128(&naive, &mut back);
            assert_eq!(back, cols);
            for path in [Path::Portable, Path::Sse2, Path::Avx2] {
                let mut rows = vec![0u128; n];
                transpose_128xn_with(path, &cols, &mut rows);
                assert_eq!(rows, naive, "{path:?}, n = {n}");
                let mut back = vec![0u128; n];
                transpose_nx128_with(path, &naive, &mut back);
                assert_eq!(back, cols, "{path:?}, n = {n}");
            }
        }
    }

    #[test]
    fn single_bits_land_in_place() {
        let n = 256;
        for (i, j) in [(0usize, 0usize), (255, 127), (130, 5), (7, 64)] {
            let mut cols = vec![0u128; n];
            cols[j * 2 + i / 128] = 1 << (i % 128);
            let mut rows = vec![0u128; n];
            transpose_128xn(&cols, &mut rows);
            for (k, r) in rows.iter().enumerate() {
                assert_eq!(*r, if k == i { 1 << j } else { 0 });
            }
        }
    }
}
