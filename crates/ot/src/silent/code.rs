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

use std::ops::{BitAnd, BitXor, BitXorAssign, Range};

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

    /// The value as an element of GF(2^128) (bytes hold noise bits).
    fn field(self) -> u128;

    /// Takes the convolution steps `first, first + 1, ..` of a pass on a
    /// vector `kernel` (`coeffs[g]` holds the coefficient words of steps
    /// `first + 4g .. first + 4g + 4`, one per 32 bits) and returns how many
    /// it took; the portable loop continues from there. Symbols without a
    /// vector kernel, or a CPU without the kernel's instructions, take none.
    /// `planes` is [`Symbol::planes`] of the whole vector.
    fn convolute_steps(
        x: &mut [Self],
        first: usize,
        coeffs: &[u128],
        kernel: Kernel,
        planes: u8,
    ) -> usize {
        let _ = (x, first, coeffs, kernel, planes);
        0
    }

    /// The bit planes a bit-sliced kernel must run for the whole vector
    /// `x` (bytes only; other symbols take every bit at once).
    fn planes(x: &[Self]) -> u8 {
        let _ = x;
        0
    }
}

impl Symbol for u128 {
    fn mask(bit: bool) -> Self {
        0u128.wrapping_sub(u128::from(bit))
    }

    fn bit(self, j: usize) -> bool {
        j < 128 && self >> j & 1 == 1
    }

    fn field(self) -> u128 {
        self
    }

    fn convolute_steps(
        x: &mut [Self],
        first: usize,
        coeffs: &[u128],
        kernel: Kernel,
        _planes: u8,
    ) -> usize {
        let cpu = psikit_primitives::cpu::features();
        match kernel {
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 if cpu.avx512f => {
                // SAFETY: the CPU dispatch just confirmed AVX-512F at run
                // time, the only extension the kernel uses; it reaches
                // memory only through checked sub-slices of `x`.
                unsafe { x86::convolute_avx512(x, first, coeffs) }
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 if cpu.avx2 => {
                // SAFETY: the CPU dispatch just confirmed AVX2 at run time,
                // the only extension the kernel uses; it reaches memory only
                // through checked sub-slices of `x`.
                unsafe { x86::convolute_avx2(x, first, coeffs) }
            }
            _ => 0,
        }
    }
}

impl Symbol for u8 {
    fn mask(bit: bool) -> Self {
        0u8.wrapping_sub(u8::from(bit))
    }

    fn bit(self, j: usize) -> bool {
        j < 8 && self >> j & 1 == 1
    }

    fn field(self) -> u128 {
        u128::from(self)
    }

    /// The planes in use anywhere in the vector, never per stretch: the
    /// receiver's noise bits are secret, and skipping planes that are zero
    /// over one stretch would time where the first noise point lies. Over
    /// the whole vector the answer is public: the silent generators'
    /// bytes (choice bits, small VOLE values of `bits` bits) use exactly
    /// the planes below their public width, since every extension has
    /// hundreds of noise points, each uniform and nonzero in that width.
    fn planes(x: &[Self]) -> u8 {
        x.iter().fold(0, |acc, &b| acc | b)
    }

    /// Bytes take the bit-sliced loop on every vector kernel (it needs no
    /// vector instructions, but [`Kernel::Portable`] stays the reference).
    fn convolute_steps(
        x: &mut [Self],
        first: usize,
        coeffs: &[u128],
        kernel: Kernel,
        planes: u8,
    ) -> usize {
        if kernel == Kernel::Portable {
            return 0;
        }
        let steps = (4 * coeffs.len()).min(x.len().saturating_sub(first + ACC + 2));
        if steps == 0 {
            return 0;
        }
        let coeffs = &coeffs[..steps.div_ceil(4)];
        // The planes in groups of up to four, the last group's list padded
        // with its own first plane.
        let js: Vec<usize> = (0..8).filter(|j| planes >> j & 1 == 1).collect();
        for group in js.chunks(4) {
            let at = |q: usize| group[q.min(group.len() - 1)];
            match group.len() {
                1 => convolute_bit_planes(x, [at(0)], first, coeffs, steps),
                2 => convolute_bit_planes(x, [at(0), at(1)], first, coeffs, steps),
                _ => convolute_bit_planes(x, [at(0), at(1), at(2), at(3)], first, coeffs, steps),
            }
        }
        steps
    }
}

/// Accumulator window of the convolution (RRT23's "24").
pub const ACC: usize = 24;
/// Expander weight (RRT23's weight-7 instance; `super::params` takes the
/// most conservative distance estimate published for it).
pub const WEIGHT: usize = 7;

/// Steps `first, first + 1, ..` (one per coefficient word) of a pass on
/// bits `js` of every byte. Passes are XORs, so each bit plane evolves
/// alone, and with one bit per entry the entries in reach of a step fit
/// one machine word: plane `q` is a ring of 64 entries in `rings[q]`
/// (entry `first + r` at bit `r mod 64`). A step reads its entry's bit
/// and, if it is set, XORs in its reach rotated into place: four
/// operations a plane, with no byte read or written. Entries move between
/// the bytes and the rings 32 at a time ([`RING_HALF`]), eight per word
/// operation: when 32 steps are done, the half ring they finished goes
/// back into the bytes and the next 32 entries come into it. The planes'
/// chains are independent, so the CPU overlaps them (four planes cost
/// little more than one); a plane listed twice is computed twice alike.
/// The caller keeps every step's reach inside `x`.
fn convolute_bit_planes<const P: usize>(
    x: &mut [u8],
    js: [usize; P],
    first: usize,
    coeffs: &[u128],
    steps: usize,
) {
    #[cfg(test)]
    tests::PLANE_RUNS.with(|n| n.set(n.get() + P));
    let mut rings = [0u64; P];
    load_half(x, &js, first, 0, &mut rings);
    load_half(x, &js, first, RING_HALF, &mut rings);
    for start in (0..steps).step_by(RING_HALF) {
        if start > 0 {
            // The half that held entries `start - 32 ..` is final: out,
            // and entries `start + 32 ..` in (the same bits of the ring).
            store_half(x, &js, first, start - RING_HALF, &rings);
            load_half(x, &js, first, start + RING_HALF, &mut rings);
        }
        for t in start..(start + RING_HALF).min(steps) {
            let word = (coeffs[t / 4] >> (32 * (t % 4))) as u64;
            let at = (t % 64) as u32;
            let reach = ((word & ((1 << ACC) - 1)) << 1 | 1 << (ACC + 1)).rotate_left(at);
            for ring in rings.iter_mut() {
                // All ones if the entry's bit is set: shifts, no branch
                // (the receiver's noise is secret).
                let set = ((*ring << (63 - at)) as i64 >> 63) as u64;
                *ring ^= reach & set;
            }
        }
    }
    // The entries still in the rings (the last steps' and their reach).
    let last = steps.div_ceil(RING_HALF).max(1) - 1;
    store_half(x, &js, first, RING_HALF * last, &rings);
    store_half(x, &js, first, RING_HALF * (last + 1), &rings);
}

/// Entries moved between the bytes and a plane's ring at a time: half a
/// ring, so the other half keeps the entries in reach of the next steps
/// (`ACC + 1 < RING_HALF`).
const RING_HALF: usize = 32;

/// A 1 in every byte of a word: a byte value times it fills all eight.
const EVERY_BYTE: u64 = 0x0101_0101_0101_0101;

/// Bit `k` of `b` (`b < 256`) in byte `k` (0 or 1): eight ring bits back
/// to eight entries. Arithmetic, not a table: the bits are the secret
/// noise, and a table read at their value would put them in the cache's
/// address trace. The multiplication copies `b` into every byte, the mask
/// keeps bit `k` in byte `k`, and adding `0x80 - 2^k` to byte `k` carries
/// into its top bit exactly when that bit is set (no byte overflows).
fn spread_bits(b: u64) -> u64 {
    let own = b.wrapping_mul(EVERY_BYTE) & 0x8040_2010_0804_0201;
    ((own + 0x0040_6070_787c_7e7f) >> 7) & EVERY_BYTE
}

/// Bit `j` of each of the 8 bytes of `v` (little-endian), as bits `0..8`:
/// the multiplication moves byte `k`'s bit to bit `56 + k`, every partial
/// product at a position of its own, so nothing carries.
fn gather_bits(v: u64, j: usize) -> u64 {
    ((v >> j) & EVERY_BYTE).wrapping_mul(0x0102_0408_1020_4080) >> 56
}

/// Planes `js` of the (up to) 32 entries from `first + r` (`r` a multiple
/// of 32) into their half of each ring, bits `r mod 64 ..`. Inlined, so
/// the rings stay in registers.
#[inline(always)]
fn load_half<const P: usize>(
    x: &[u8],
    js: &[usize; P],
    first: usize,
    r: usize,
    rings: &mut [u64; P],
) {
    let (at, shift) = (first + r, r % 64);
    let half = 0xffff_ffffu64 << shift;
    let entries = &x[at.min(x.len())..(at + RING_HALF).min(x.len())];
    for (q, ring) in rings.iter_mut().enumerate() {
        let mut bits = 0u64;
        for (g, group) in entries.chunks(8).enumerate() {
            let mut v = [0u8; 8];
            v[..group.len()].copy_from_slice(group);
            bits |= gather_bits(u64::from_le_bytes(v), js[q]) << (8 * g);
        }
        *ring = *ring & !half | bits << shift;
    }
}

/// The ring half holding the (up to) 32 entries from `first + r` back into
/// planes `js` of their bytes; the bytes' other bits stay.
#[inline(always)]
fn store_half<const P: usize>(
    x: &mut [u8],
    js: &[usize; P],
    first: usize,
    r: usize,
    rings: &[u64; P],
) {
    let (at, shift) = (first + r, r % 64);
    let mask = js.iter().fold(0u8, |m, &j| m | 1 << j);
    let keep = !(u64::from(mask) * EVERY_BYTE);
    let len = x.len();
    let entries = &mut x[at.min(len)..(at + RING_HALF).min(len)];
    for (g, group) in entries.chunks_mut(8).enumerate() {
        let mut v = [0u8; 8];
        v[..group.len()].copy_from_slice(group);
        let mut word = u64::from_le_bytes(v) & keep;
        for (ring, &j) in rings.iter().zip(js) {
            word |= spread_bits(ring >> (shift + 8 * g) & 0xff) << j;
        }
        group.copy_from_slice(&word.to_le_bytes()[..group.len()]);
    }
}

/// Which loop runs the convolution passes. All give the same result: the
/// vector kernels keep the pass's sliding window of `ACC + 2` entries in
/// registers instead of reading and writing it back at every step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// The portable loop (the reference).
    Portable,
    /// 256-bit registers, two `u128` entries each.
    Avx2,
    /// 512-bit registers, four `u128` entries each.
    Avx512,
}

impl Kernel {
    /// The fastest kernel this CPU supports (psikit's one run-time
    /// dispatch, [`psikit_primitives::cpu`]).
    pub fn best() -> Self {
        let cpu = psikit_primitives::cpu::features();
        if cfg!(target_arch = "x86_64") && cpu.avx512f {
            Kernel::Avx512
        } else if cfg!(target_arch = "x86_64") && cpu.avx2 {
            Kernel::Avx2
        } else {
            Kernel::Portable
        }
    }
}

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
        let kernel = Kernel::best();
        for &seed in &SEEDS[..2] {
            convolute(tail, seed, kernel);
        }
        expand(out, tail);
    }
}

/// One convolution pass over `x`: entry `i` is added to `x[i+1+b]` for each
/// random bit `b < ACC` that is set, then to `x[i+1+ACC]` (indices mod the
/// length). Sequential by nature (each entry is final only once its
/// predecessors are added in), but streaming and branch-free. `kernel`
/// takes what steps it can of each refill of coefficients, the portable
/// loop the rest (at least the wrap-around at the end).
fn convolute<T: Symbol>(x: &mut [T], seed: u128, kernel: Kernel) {
    let len = x.len();
    let bits = CoefficientStream::new(seed);
    let planes = T::planes(x);
    let mut block = [0u128; STREAM_BLOCKS];
    for start in (0..len).step_by(STREAMED) {
        bits.fill((start / STREAMED) as u64, &mut block);
        let end = (start + STREAMED).min(len);
        let taken = T::convolute_steps(x, start, &block[..(end - start) / 4], kernel, planes);
        convolute_portable(x, start + taken..end, start, &block);
    }
}

/// Steps `steps` of a pass whose coefficient refill `block` starts at step
/// `start`: the portable kernel.
fn convolute_portable<T: Symbol>(
    x: &mut [T],
    steps: Range<usize>,
    start: usize,
    block: &[u128; STREAM_BLOCKS],
) {
    let len = x.len();
    // Entries whose window stays inside the slice take the fast loop.
    let straight = len.saturating_sub(ACC + 1);
    for i in steps {
        let coeffs = coefficient_word(block, i - start);
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
        // Split whole blocks first (constant shifts), then drop the words
        // before `first`: one copy instead of a variable shift per word.
        let mut words = [0u32; 4 * (STREAM_BLOCKS + 1)];
        for (w, b) in words.chunks_exact_mut(4).zip(&block[..blocks]) {
            w.copy_from_slice(&[0, 32, 64, 96].map(|s| (b >> s) as u32));
        }
        out.copy_from_slice(&words[first % 4..first % 4 + out.len()]);
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

/// The vector convolution kernels. Both run the pass in groups of steps
/// over a window of entries held in registers (entry `i0 + p` of a group
/// starting at step `i0` in register `p / L`, lane `p % L`, for `L` entries
/// per register): each step broadcasts its entry (final by then) and adds
/// it, masked per lane, into every register its targets fall in; after a
/// group the first register is final and stored, the others move down and
/// the next entries are loaded. Only whole groups whose window stays inside
/// `x` run here; the wrap-around at the end is left to the portable loop.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use core::arch::x86_64::{
        __m256i, __m512i, _mm256_and_si256, _mm256_load_si256, _mm256_loadu_si256,
        _mm256_permute4x64_epi64, _mm256_storeu_si256, _mm256_xor_si256, _mm512_load_si512,
        _mm512_loadu_si512, _mm512_shuffle_i64x2, _mm512_storeu_si512, _mm512_ternarylogic_epi64,
    };

    use super::ACC;

    /// Positions, counted from the first entry of its group, that step `s`
    /// of a group adds its entry to: the next `ACC` entries selected by the
    /// coefficient `word` and always the one after them.
    fn targets(word: u32, s: usize) -> u64 {
        (u64::from(word) & ((1 << ACC) - 1)) << (s + 1) | 1 << (s + 1 + ACC)
    }

    /// Entry `n` selects (all ones) the `u128` lanes `l` with bit `l` of
    /// `n` set, as one 512-bit mask; entries below 4 also serve as 256-bit
    /// masks. A table lookup is a plain load, cheaper than building masks.
    #[repr(align(64))]
    struct LaneMasks([[u64; 8]; 16]);

    static LANE_MASKS: LaneMasks = LaneMasks(lane_masks());

    const fn lane_masks() -> [[u64; 8]; 16] {
        let mut t = [[0; 8]; 16];
        let mut n = 0;
        while n < 16 {
            let mut q = 0;
            while q < 8 {
                if n >> (q / 2) & 1 == 1 {
                    t[n][q] = u64::MAX;
                }
                q += 1;
            }
            n += 1;
        }
        t
    }

    /// AVX-512 kernel: groups of 4 steps over a window of 32 entries in 8
    /// registers, one `vpternlogq` per register and step. Returns the steps
    /// taken.
    ///
    /// Callers must have checked AVX-512F (hence `unsafe` to call).
    #[target_feature(enable = "avx512f")]
    pub(super) fn convolute_avx512(x: &mut [u128], first: usize, coeffs: &[u128]) -> usize {
        // Group `g` reads entries up to `first + 4g + 32`.
        let groups = coeffs.len().min(x.len().saturating_sub(first + 28) / 4);
        if groups == 0 {
            return 0;
        }
        let mut w: [__m512i; 7] = [0, 1, 2, 3, 4, 5, 6].map(|r| load4(x, first + 4 * r));
        for (g, &words) in coeffs[..groups].iter().enumerate() {
            let i = first + 4 * g;
            let mut v = [w[0], w[1], w[2], w[3], w[4], w[5], w[6], load4(x, i + 28)];
            for s in 0..4 {
                let xi = broadcast4(v[0], s);
                let m = targets((words >> (32 * s)) as u32, s);
                for (r, y) in v.iter_mut().enumerate() {
                    // Step `s` reaches registers `(s + 1) / 4 ..= (s + 1 + ACC) / 4`.
                    if r < (s + 1) / 4 || r > (s + 1 + ACC) / 4 {
                        continue;
                    }
                    let lanes = mask4(&LANE_MASKS.0[(m >> (4 * r)) as usize & 15]);
                    // y ^ (xi & lanes)
                    *y = _mm512_ternarylogic_epi64::<0x78>(*y, xi, lanes);
                }
            }
            store4(x, i, v[0]);
            w = [v[1], v[2], v[3], v[4], v[5], v[6], v[7]];
        }
        for (r, y) in w.into_iter().enumerate() {
            store4(x, first + 4 * (groups + r), y);
        }
        4 * groups
    }

    /// Lane `s` of `v` in all four lanes.
    #[target_feature(enable = "avx512f")]
    fn broadcast4(v: __m512i, s: usize) -> __m512i {
        match s {
            0 => _mm512_shuffle_i64x2::<0x00>(v, v),
            1 => _mm512_shuffle_i64x2::<0x55>(v, v),
            2 => _mm512_shuffle_i64x2::<0xaa>(v, v),
            _ => _mm512_shuffle_i64x2::<0xff>(v, v),
        }
    }

    #[target_feature(enable = "avx512f")]
    fn mask4(lanes: &[u64; 8]) -> __m512i {
        // SAFETY: `lanes` is 64 readable bytes, 64-byte aligned (a row of
        // `LANE_MASKS`).
        unsafe { _mm512_load_si512(lanes.as_ptr().cast()) }
    }

    #[target_feature(enable = "avx512f")]
    fn load4(x: &[u128], p: usize) -> __m512i {
        let entries = &x[p..p + 4];
        // SAFETY: `entries` is 64 readable bytes (bounds checked above).
        unsafe { _mm512_loadu_si512(entries.as_ptr().cast()) }
    }

    #[target_feature(enable = "avx512f")]
    fn store4(x: &mut [u128], p: usize, v: __m512i) {
        let entries = &mut x[p..p + 4];
        // SAFETY: `entries` is 64 writable bytes (bounds checked above).
        unsafe { _mm512_storeu_si512(entries.as_mut_ptr().cast(), v) }
    }

    /// AVX2 kernel: groups of 2 steps over a window of 28 entries in 14
    /// registers, an AND and an XOR per register and step. Returns the steps
    /// taken.
    ///
    /// Callers must have checked AVX2 (hence `unsafe` to call).
    #[target_feature(enable = "avx2")]
    pub(super) fn convolute_avx2(x: &mut [u128], first: usize, coeffs: &[u128]) -> usize {
        // Group `g` reads entries up to `first + 2g + 28`.
        let groups = (2 * coeffs.len()).min(x.len().saturating_sub(first + 26) / 2);
        if groups == 0 {
            return 0;
        }
        let mut w: [__m256i; 13] = std::array::from_fn(|r| load2(x, first + 2 * r));
        for g in 0..groups {
            let i = first + 2 * g;
            let words = coeffs[g / 2] >> (64 * (g % 2));
            let mut v: [__m256i; 14] = std::array::from_fn(|r| match w.get(r) {
                Some(&y) => y,
                None => load2(x, i + 26),
            });
            for s in 0..2 {
                let xi = broadcast2(v[0], s);
                let m = targets((words >> (32 * s)) as u32, s);
                for (r, y) in v.iter_mut().enumerate() {
                    let lanes = mask2(&LANE_MASKS.0[(m >> (2 * r)) as usize & 3]);
                    *y = _mm256_xor_si256(*y, _mm256_and_si256(xi, lanes));
                }
            }
            store2(x, i, v[0]);
            w = std::array::from_fn(|r| v[r + 1]);
        }
        for (r, y) in w.into_iter().enumerate() {
            store2(x, first + 2 * (groups + r), y);
        }
        2 * groups
    }

    /// Lane `s` of `v` in both lanes.
    #[target_feature(enable = "avx2")]
    fn broadcast2(v: __m256i, s: usize) -> __m256i {
        match s {
            0 => _mm256_permute4x64_epi64::<0x44>(v),
            _ => _mm256_permute4x64_epi64::<0xee>(v),
        }
    }

    #[target_feature(enable = "avx2")]
    fn mask2(lanes: &[u64; 8]) -> __m256i {
        // SAFETY: `lanes` is 64 readable bytes, 64-byte aligned (a row of
        // `LANE_MASKS`); the first 32 are read.
        unsafe { _mm256_load_si256(lanes.as_ptr().cast()) }
    }

    #[target_feature(enable = "avx2")]
    fn load2(x: &[u128], p: usize) -> __m256i {
        let entries = &x[p..p + 2];
        // SAFETY: `entries` is 32 readable bytes (bounds checked above).
        unsafe { _mm256_loadu_si256(entries.as_ptr().cast()) }
    }

    #[target_feature(enable = "avx2")]
    fn store2(x: &mut [u128], p: usize, v: __m256i) {
        let entries = &mut x[p..p + 2];
        // SAFETY: `entries` is 32 writable bytes (bounds checked above).
        unsafe { _mm256_storeu_si256(entries.as_mut_ptr().cast(), v) }
    }
}

#[cfg(test)]
mod tests;
