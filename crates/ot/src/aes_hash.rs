//! Fixed-key AES: the public permutation `π`, the correlation-robust hashes
//! built from it, and the AES-CTR PRG that expands base-OT seeds.
//!
//! # Hashes (Guo, Katz, Wang, Yu, "Efficient and secure multiparty
//! computation from fixed-key block ciphers", IEEE S&P 2020, "GKWY20")
//!
//! `π` is AES-128 under a fixed, public key (derived below from a public
//! label, so nobody chose it). GKWY20 prove, with `π` modelled as a random
//! permutation:
//!
//! * [`cr`]: `H(x) = π(x) ⊕ x` is *correlation robust* (CR): for a secret
//!   uniform `Δ`, the values `H(x_j ⊕ Δ)` at distinct public `x_j` look
//!   random. That is exactly what the semi-honest IKNP sender needs for
//!   random-OT outputs `H(q_i)`, `H(q_i ⊕ Δ)`: the rows `t_i = q_i ⊕ r_i·Δ`
//!   are pseudorandom and distinct except with negligible probability.
//! * [`tccr`]: `H(i, x) = π(π(x) ⊕ i) ⊕ π(x)` is *tweakable circular
//!   correlation robust* (TCCR). With the OT index as tweak it stays secure
//!   when the adversary chooses the inputs and even when the offsets repeat,
//!   which is what KOS15 needs: a malicious receiver picks its rows `t_i`
//!   freely (e.g. equal rows) and may learn a few bits of `Δ` through the
//!   consistency check's selective failure, and GKWY20 (Section 7) show TCCR
//!   suffices for the random-OT outputs of malicious OT extension.
//!
//! Both cost one (CR) or two (TCCR) AES calls per hashed message; the batch
//! forms pipeline AES-NI over many blocks, or VAES (four blocks per
//! instruction with AVX-512, two with AVX2) where the CPU has it.
//!
//! # PRG
//! [`Prg`] is AES-128 in counter mode keyed by a base-OT output: block `k` of
//! the stream is `AES_key(k)`, so any block range can be produced
//! independently (which lets batches of OTs be expanded in parallel).
//! [`fill_pair`] expands two streams at once, with VAES where available.

use std::sync::OnceLock;

use aes::cipher::consts::U16;
use aes::cipher::inout::InOutBuf;
use aes::cipher::{BlockEncrypt, KeyInit};
use aes::Aes128;
use sha2::{Digest, Sha256};
use zeroize::Zeroize;

/// Blocks hashed per inner batch: enough to keep AES-NI's pipeline full,
/// small enough to live on the stack.
const HASH_BATCH: usize = 64;

/// The public label from which the fixed AES key is derived.
const FIXED_KEY_LABEL: &[u8] = b"psikit-ot fixed-key AES permutation v1";

/// The fixed-key permutation `π`, built once.
fn fixed() -> &'static Aes128 {
    static FIXED: OnceLock<Aes128> = OnceLock::new();
    FIXED.get_or_init(|| {
        let digest = Sha256::digest(FIXED_KEY_LABEL);
        Aes128::new_from_slice(&digest[..16]).expect("AES-128 key is 16 bytes")
    })
}

/// Encrypts every block of `blocks` in place (blocks are the little-endian
/// bytes of each `u128`).
fn encrypt_in_place(cipher: &Aes128, blocks: &mut [u128]) {
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(blocks);
    let (chunks, tail) = InOutBuf::from(bytes).into_chunks::<U16>();
    debug_assert!(tail.is_empty());
    cipher.encrypt_blocks_inout(chunks);
}

/// `π(x)`: AES-128 under the fixed public key.
pub fn permute(x: u128) -> u128 {
    let mut b = [x];
    encrypt_in_place(fixed(), &mut b);
    b[0]
}

/// Applies `π` to every block in place.
pub fn permute_many(blocks: &mut [u128]) {
    #[cfg(target_arch = "x86_64")]
    if let Some(keys) = fixed_vaes() {
        let whole = blocks.len() / 16 * 16;
        let (head, tail) = blocks.split_at_mut(whole);
        // SAFETY: `RoundKeys` exist only if `vaes::available` confirmed AVX2
        // and VAES at run time; `head`'s length is a multiple of 16.
        unsafe { vaes::encrypt_blocks(keys, head) };
        if !tail.is_empty() {
            encrypt_in_place(fixed(), tail);
        }
        return;
    }
    encrypt_in_place(fixed(), blocks);
}

/// `π`'s round keys for the VAES kernel, if the CPU has VAES.
#[cfg(target_arch = "x86_64")]
fn fixed_vaes() -> Option<&'static vaes::RoundKeys> {
    static FIXED: OnceLock<Option<vaes::RoundKeys>> = OnceLock::new();
    FIXED
        .get_or_init(|| {
            let digest = Sha256::digest(FIXED_KEY_LABEL);
            let key = u128::from_le_bytes(digest[..16].try_into().expect("16 bytes"));
            vaes::RoundKeys::new(key)
        })
        .as_ref()
}

/// The GKWY20 correlation-robust hash `π(x) ⊕ x` (semi-honest IKNP).
pub fn cr(x: u128) -> u128 {
    permute(x) ^ x
}

/// [`cr`] on every block in place.
pub fn cr_many(blocks: &mut [u128]) {
    let mut save = [0u128; HASH_BATCH];
    for chunk in blocks.chunks_mut(HASH_BATCH) {
        let save = &mut save[..chunk.len()];
        save.copy_from_slice(chunk);
        permute_many(chunk);
        for (c, s) in chunk.iter_mut().zip(save.iter()) {
            *c ^= *s;
        }
    }
}

/// For each `x` of `xs`, the low `keep` bits of `cr(x ⊕ offsets[j])` for
/// every `j`, at bits `keep·j ..` of `out`'s word: a small VOLE sender's
/// random-OT messages (`x` its value, `offsets[j] = j·Δ`), cut to the bits
/// their consumer keeps.
///
/// With 4 or 16 offsets on VAES-512 ([`vaes::cr_lows_512`]) the inputs are
/// made from `x` in registers and hashed and packed there. The batch form
/// (a buffer of `x ⊕ offsets[j]` through [`permute_many`], then a loop
/// packing one bit of each block) spent twice as long writing and reading
/// the buffer as hashing it. Only `π`'s low bits are computed per block:
/// those of `x ⊕ offsets[j]` are one word operation for all `j`.
///
/// # Panics
/// If `offsets` is empty, `keep` is 0, `keep·offsets.len() > 64` or the
/// slices `xs` and `out` differ in length.
pub fn cr_lows_at_offsets(xs: &[u128], offsets: &[u128], keep: u32, out: &mut [u64]) {
    let width = offsets.len();
    assert!(
        width > 0 && keep > 0 && keep as usize * width <= 64,
        "{width} offsets of {keep} bits do not fit a word"
    );
    assert_eq!(xs.len(), out.len(), "one word per input");
    #[allow(unused_mut)]
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if let Some(k) = fixed_vaes().filter(|_| vaes::wide_vaes()) {
        // SAFETY: `wide_vaes` just confirmed AVX-512F and VAES at run time;
        // the offsets are as many as each kernel's registers hold, the
        // slices equally long.
        done = unsafe {
            match width {
                4 => vaes::cr_lows_512::<1>(k, xs, offsets, keep, out),
                16 => vaes::cr_lows_512::<4>(k, xs, offsets, keep, out),
                _ => 0,
            }
        };
    }
    permuted_lows(&xs[done..], offsets, keep, &mut out[done..]);
    let mask = low_mask(keep);
    let spread = |j: usize, low: u64| (low & mask) << (keep as usize * j);
    let offset_bits = (offsets.iter().enumerate()).fold(0, |w, (j, o)| w | spread(j, *o as u64));
    let every = (0..width).fold(0, |w, j| w | spread(j, 1));
    for (o, x) in out.iter_mut().zip(xs) {
        *o ^= offset_bits ^ ((*x as u64 & mask) * every);
    }
}

/// The low `keep` bits of a word set (`1 ≤ keep ≤ 64`; a shift by 64
/// would overflow).
fn low_mask(keep: u32) -> u64 {
    u64::MAX >> (64 - keep)
}

/// The portable part of [`cr_lows_at_offsets`]: the low `keep` bits of
/// `π(x ⊕ offsets[j])`, packed, through a buffer of whole rows (at most 64
/// offsets, as `keep ≥ 1` bits of each fit a word).
fn permuted_lows(xs: &[u128], offsets: &[u128], keep: u32, out: &mut [u64]) {
    const BUF: usize = 256;
    let width = offsets.len();
    let mask = low_mask(keep);
    let mut buf = [0u128; BUF];
    let per = BUF / width.max(1);
    for (out, xs) in out.chunks_mut(per).zip(xs.chunks(per)) {
        let buf = &mut buf[..xs.len() * width];
        for (row, x) in buf.chunks_exact_mut(width).zip(xs) {
            for (b, o) in row.iter_mut().zip(offsets) {
                *b = x ^ o;
            }
        }
        permute_many(buf);
        for (o, row) in out.iter_mut().zip(buf.chunks_exact(width)) {
            *o = (row.iter().enumerate())
                .fold(0, |w, (j, h)| w | (*h as u64 & mask) << (keep as usize * j));
        }
    }
    buf.zeroize();
}

/// The GKWY20 TCCR hash `π(π(x) ⊕ i) ⊕ π(x)` with tweak `i` (KOS15).
pub fn tccr(tweak: u128, x: u128) -> u128 {
    let p = permute(x);
    permute(p ^ tweak) ^ p
}

/// [`tccr`] on every block in place; block `k` uses tweak `tweak(k)`.
pub fn tccr_many(blocks: &mut [u128], tweak: impl Fn(usize) -> u128) {
    let mut pi = [0u128; HASH_BATCH];
    for (c, chunk) in blocks.chunks_mut(HASH_BATCH).enumerate() {
        let pi = &mut pi[..chunk.len()];
        pi.copy_from_slice(chunk);
        permute_many(pi);
        for (k, (x, p)) in chunk.iter_mut().zip(pi.iter()).enumerate() {
            *x = *p ^ tweak(c * HASH_BATCH + k);
        }
        permute_many(chunk);
        for (x, p) in chunk.iter_mut().zip(pi.iter()) {
            *x ^= *p;
        }
    }
}

/// `AES_{keys[i]}(blocks[i])` for every `i`, in place: one block under each
/// of many keys (VOLE-PSI's malicious binding keys AES with each OPRF
/// value). Key schedules run interleaved: one schedule is a chain of ten
/// dependent steps, whose latency the `aes` crate (a key at a time) waits
/// out. With AVX-512 and VAES, 16 schedules run four a register
/// ([`vaes::encrypt_each_512`]); with AES-NI, eight side by side, about
/// four times faster than the `aes` crate. Round keys are secret and
/// wiped after use.
///
/// # Panics
/// If the slices have different lengths.
pub fn encrypt_each(keys: &[u128], blocks: &mut [u128]) {
    assert_eq!(keys.len(), blocks.len(), "one key per block");
    #[allow(unused_mut)]
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    {
        if vaes::wide_vaes() {
            done = keys.len() / 16 * 16;
            // SAFETY: `wide_vaes` just confirmed AVX-512F and VAES at run
            // time; both slices hold `done` blocks, a multiple of 16.
            unsafe { vaes::encrypt_each_512(&keys[..done], &mut blocks[..done]) };
        }
        if psikit_primitives::cpu::features().aes {
            let more = (keys.len() - done) / each::LANES * each::LANES;
            let range = done..done + more;
            // SAFETY: the CPU dispatch just confirmed AES-NI (and SSE2,
            // implied by x86_64) at run time; both slices hold `more`
            // blocks from `done`, a multiple of `LANES`.
            unsafe { each::encrypt(&keys[range.clone()], &mut blocks[range]) };
            done += more;
        }
    }
    for (key, block) in keys[done..].iter().zip(&mut blocks[done..]) {
        let mut b = [*block];
        encrypt_in_place(&Aes128::new(&key.to_le_bytes().into()), &mut b);
        *block = b[0];
    }
}

/// [`encrypt_each`]'s AES-NI kernel. Written by hand because no crate
/// offers one block under each of many keys with their schedules
/// interleaved.
#[cfg(target_arch = "x86_64")]
mod each {
    use core::arch::x86_64::{
        __m128i, _mm_aesenc_si128, _mm_aesenclast_si128, _mm_aeskeygenassist_si128,
        _mm_shuffle_epi32, _mm_slli_si128, _mm_xor_si128,
    };

    /// Keys scheduled side by side.
    pub(super) const LANES: usize = 8;

    /// One step of the AES-128 key schedule on every lane.
    #[inline]
    #[target_feature(enable = "aes,sse2")]
    unsafe fn next<const RCON: i32>(k: &mut [__m128i; LANES]) {
        for k in k.iter_mut() {
            let t = _mm_shuffle_epi32::<0xff>(_mm_aeskeygenassist_si128::<RCON>(*k));
            let mut x = _mm_xor_si128(*k, _mm_slli_si128::<4>(*k));
            x = _mm_xor_si128(x, _mm_slli_si128::<4>(x));
            x = _mm_xor_si128(x, _mm_slli_si128::<4>(x));
            *k = _mm_xor_si128(x, t);
        }
    }

    /// One AES round (or the last) on every lane under its own round key.
    #[inline]
    #[target_feature(enable = "aes,sse2")]
    unsafe fn round(s: &mut [__m128i; LANES], k: &[__m128i; LANES], last: bool) {
        for (s, k) in s.iter_mut().zip(k) {
            *s = match last {
                false => _mm_aesenc_si128(*s, *k),
                true => _mm_aesenclast_si128(*s, *k),
            };
        }
    }

    /// # Safety
    /// The CPU must support `aes` and `sse2`; both slices hold the same
    /// multiple of [`LANES`] blocks.
    #[target_feature(enable = "aes,sse2")]
    pub(super) unsafe fn encrypt(keys: &[u128], blocks: &mut [u128]) {
        for (keys, blocks) in keys.chunks_exact(LANES).zip(blocks.chunks_exact_mut(LANES)) {
            let mut k: [__m128i; LANES] = core::array::from_fn(|i| bytemuck::cast(keys[i]));
            let mut s: [__m128i; LANES] =
                core::array::from_fn(|i| _mm_xor_si128(bytemuck::cast(blocks[i]), k[i]));
            // Each round key is used as soon as it is made.
            macro_rules! step {
                ($rcon:literal, $last:literal) => {
                    next::<$rcon>(&mut k);
                    round(&mut s, &k, $last);
                };
            }
            step!(0x01, false);
            step!(0x02, false);
            step!(0x04, false);
            step!(0x08, false);
            step!(0x10, false);
            step!(0x20, false);
            step!(0x40, false);
            step!(0x80, false);
            step!(0x1b, false);
            step!(0x36, true);
            for (b, s) in blocks.iter_mut().zip(&s) {
                *b = bytemuck::cast(*s);
            }
            // Wipe the last round keys (the earlier ones were overwritten).
            k = [_mm_xor_si128(k[0], k[0]); LANES];
            core::hint::black_box(&k);
        }
    }
}

/// AES-128 in counter mode, keyed by a (secret) seed. Round keys are wiped
/// when the PRG is dropped (the `aes` crate's `zeroize` feature, and
/// [`vaes::RoundKeys`]'s own `Drop`).
#[derive(Clone)]
pub struct Prg {
    cipher: Aes128,
    /// Our own copy of the round keys for [`fill_pair`]'s VAES kernel, when
    /// the CPU has VAES (the `aes` crate does not use VAES nor expose its
    /// keys).
    #[cfg(target_arch = "x86_64")]
    vaes: Option<vaes::RoundKeys>,
}

impl Prg {
    /// A PRG keyed by `seed` (its little-endian bytes are the AES key).
    pub fn new(seed: u128) -> Self {
        let cipher = Aes128::new_from_slice(&seed.to_le_bytes()).expect("16-byte key");
        Self {
            cipher,
            #[cfg(target_arch = "x86_64")]
            vaes: vaes::RoundKeys::new(seed),
        }
    }

    /// Fills `out` with stream blocks `first_block, first_block + 1, ...`.
    pub fn fill(&self, first_block: u64, out: &mut [u128]) {
        for (k, o) in out.iter_mut().enumerate() {
            *o = u128::from(first_block) + k as u128;
        }
        #[cfg(target_arch = "x86_64")]
        if let Some(keys) = &self.vaes {
            let whole = out.len() / 16 * 16;
            let (head, tail) = out.split_at_mut(whole);
            // SAFETY: `RoundKeys` exist only if `vaes::available` confirmed
            // AVX2 and VAES at run time; `head`'s length is a multiple of 16.
            unsafe { vaes::encrypt_blocks(keys, head) };
            encrypt_in_place(&self.cipher, tail);
            return;
        }
        encrypt_in_place(&self.cipher, out);
    }

    /// Stream blocks as a fresh vector.
    pub fn blocks(&self, first_block: u64, count: usize) -> Vec<u128> {
        let mut v = vec![0u128; count];
        self.fill(first_block, &mut v);
        v
    }
}

/// `a.fill(first_block, out_a)` and `b.fill(first_block, out_b)` in one
/// pass (the slices must have equal lengths). OT extension expands two
/// streams per matrix column (the receiver's two seeds) or two columns at a
/// time (the sender), 8 blocks each per 1024 OTs; with VAES both run in one
/// kernel call with 16 blocks in flight.
pub fn fill_pair(a: &Prg, b: &Prg, first_block: u64, out_a: &mut [u128], out_b: &mut [u128]) {
    assert_eq!(out_a.len(), out_b.len(), "two streams of equal length");
    #[cfg(target_arch = "x86_64")]
    if let (Some(ka), Some(kb)) = (&a.vaes, &b.vaes) {
        let whole = out_a.len() / 8 * 8;
        // The kernel adds counters in 64-bit lanes: no carry may occur.
        if first_block.checked_add(whole as u64).is_some() {
            let (head_a, tail_a) = out_a.split_at_mut(whole);
            let (head_b, tail_b) = out_b.split_at_mut(whole);
            // SAFETY: `RoundKeys` exist only if `vaes::available` confirmed
            // AVX2 and VAES at run time; the heads have equal lengths, a
            // multiple of 8, and no 64-bit counter overflow (checked above).
            unsafe { vaes::ctr_pair(ka, kb, first_block, head_a, head_b) };
            if !tail_a.is_empty() {
                let tail_start = first_block + whole as u64;
                a.fill(tail_start, tail_a);
                b.fill(tail_start, tail_b);
            }
            return;
        }
    }
    a.fill(first_block, out_a);
    b.fill(first_block, out_b);
}

/// The VAES kernels behind [`permute_many`], [`Prg::fill`] and
/// [`fill_pair`]: AES is the largest single cost of OT extension and of the
/// silent generators' trees, and the `aes` crate's AES-NI path does 8
/// blocks of one key per call with a per-call set-up that OT extension's
/// 8-block columns cannot amortise. Both widths keep 16 blocks in flight,
/// which the AES units need to reach their throughput: on 512-bit
/// registers (AVX-512, four blocks per `VAESENC`, round keys held in
/// registers) where the CPU has them, 2-2.5 times the blocks per second of
/// the 256-bit form on AMD Zen 5 (0.35 against 0.72-0.95 ns a block, one
/// core);
/// otherwise on 256-bit registers (AVX2, two blocks per `VAESENC`). The
/// 256-bit kernel is inline assembly, written when psikit's minimum Rust
/// predated the VAES intrinsics; the 512-bit one uses the intrinsics.
#[cfg(target_arch = "x86_64")]
mod vaes;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_forms_equal_single_forms() {
        let xs: Vec<u128> = (0..200u128)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .collect();
        let mut c = xs.clone();
        cr_many(&mut c);
        let mut t = xs.clone();
        tccr_many(&mut t, |k| 1000 + k as u128);
        for (k, x) in xs.iter().enumerate() {
            assert_eq!(c[k], cr(*x));
            assert_eq!(t[k], tccr(1000 + k as u128, *x));
            assert_ne!(c[k], *x);
        }
        // Distinct tweaks give unrelated outputs for the same input.
        assert_ne!(tccr(1, 5), tccr(2, 5));
    }

    #[test]
    fn permute_many_equals_the_aes_crate() {
        for len in [0usize, 1, 15, 16, 17, 64, 100] {
            let xs: Vec<u128> = (0..len as u128).map(|i| i * 0x1234_5678_9abc).collect();
            let mut fast = xs.clone();
            permute_many(&mut fast);
            let mut slow = xs.clone();
            encrypt_in_place(fixed(), &mut slow);
            assert_eq!(fast, slow, "len {len}");
        }
    }

    #[test]
    fn fill_pair_equals_two_fills() {
        let (a, b) = (Prg::new(7), Prg::new(u128::MAX - 3));
        for len in [0usize, 1, 7, 8, 9, 16, 21] {
            let (mut x, mut y) = (vec![0u128; len], vec![0u128; len]);
            fill_pair(&a, &b, 1 << 40, &mut x, &mut y);
            assert_eq!(x, a.blocks(1 << 40, len), "len {len}");
            assert_eq!(y, b.blocks(1 << 40, len), "len {len}");
        }
    }

    /// Both VAES widths against the `aes` crate, whichever the dispatch
    /// picks: a CPU with AVX-512 checks the 256-bit kernels too.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn every_vaes_width_equals_the_aes_crate() {
        let seeds = [0x0123_4567_89ab_cdef_fedc_ba98_7654_3210u128, 7];
        let (Some(ka), Some(kb)) = (
            vaes::RoundKeys::new(seeds[0]),
            vaes::RoundKeys::new(seeds[1]),
        ) else {
            return;
        };
        let aes = |seed: u128, blocks: &[u128]| {
            let mut out = blocks.to_vec();
            encrypt_in_place(&Aes128::new(&seed.to_le_bytes().into()), &mut out);
            out
        };
        let xs: Vec<u128> = (0..64u128)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .collect();
        // Counters across a 2^40 boundary: the kernels count in 64-bit lanes.
        let first = (1u64 << 40) - 3;
        let counters: Vec<u128> = (0..64).map(|i| u128::from(first + i)).collect();
        let wide = psikit_primitives::cpu::features().avx512f;
        for w in [false, true].into_iter().filter(|&w| !w || wide) {
            let (mut x, mut a, mut b) = (xs.clone(), vec![0u128; 64], vec![0u128; 64]);
            // SAFETY: `RoundKeys` exist, so the CPU has AVX2 and VAES (and
            // AVX-512F when `w`); 64 blocks, a multiple of 16, and no
            // counter overflow.
            unsafe {
                match w {
                    true => vaes::encrypt_blocks_512(&ka, &mut x),
                    false => vaes::encrypt_blocks_256(&ka, &mut x),
                }
                match w {
                    true => vaes::ctr_pair_512(&ka, &kb, first, &mut a, &mut b),
                    false => vaes::ctr_pair_256(&ka, &kb, first, &mut a, &mut b),
                }
            }
            assert_eq!(x, aes(seeds[0], &xs), "512-bit: {w}");
            assert_eq!(a, aes(seeds[0], &counters), "512-bit: {w}");
            assert_eq!(b, aes(seeds[1], &counters), "512-bit: {w}");
        }
    }

    #[test]
    fn encrypt_each_equals_the_aes_crate() {
        for len in [0usize, 1, 7, 8, 9, 16, 29, 48] {
            let keys: Vec<u128> = (0..len as u128)
                .map(|i| i * 0x0123_4567_89ab_cdef + 5)
                .collect();
            let blocks: Vec<u128> = (0..len as u128)
                .map(|i| (!i).wrapping_mul(0x9e37_79b9))
                .collect();
            let want: Vec<u128> = keys
                .iter()
                .zip(&blocks)
                .map(|(k, b)| {
                    let mut one = [*b];
                    encrypt_in_place(&Aes128::new(&k.to_le_bytes().into()), &mut one);
                    one[0]
                })
                .collect();
            let mut fast = blocks.clone();
            encrypt_each(&keys, &mut fast);
            assert_eq!(fast, want, "len {len}");
            // Each kernel this CPU has, whichever the dispatch picks.
            #[cfg(target_arch = "x86_64")]
            {
                if psikit_primitives::cpu::features().aes {
                    let whole = len / each::LANES * each::LANES;
                    let mut b = blocks[..whole].to_vec();
                    // SAFETY: AES-NI was just detected; `whole` blocks each.
                    unsafe { each::encrypt(&keys[..whole], &mut b) };
                    assert_eq!(b, want[..whole], "AES-NI, len {len}");
                }
                if vaes::wide_vaes() {
                    let whole = len / 16 * 16;
                    let mut b = blocks[..whole].to_vec();
                    // SAFETY: AVX-512F and VAES were just detected.
                    unsafe { vaes::encrypt_each_512(&keys[..whole], &mut b) };
                    assert_eq!(b, want[..whole], "512-bit, len {len}");
                }
            }
        }
        // FIPS 197, appendix C.1 (AES-128), bytes as little-endian words.
        let key = u128::from_le_bytes(core::array::from_fn(|i| i as u8));
        let plain = u128::from_le_bytes(core::array::from_fn(|i| (i as u8) * 0x11));
        let want = u128::from_le_bytes([
            0x69, 0xc4, 0xe0, 0xd8, 0x6a, 0x7b, 0x04, 0x30, 0xd8, 0xcd, 0xb7, 0x80, 0x70, 0xb4,
            0xc5, 0x5a,
        ]);
        let mut blocks = [plain; 9];
        encrypt_each(&[key; 9], &mut blocks);
        assert_eq!(blocks, [want; 9]);
    }

    #[test]
    fn cr_lows_at_offsets_are_the_hashes_low_bits() {
        let offsets: Vec<u128> = (0..64u128)
            .map(|j| j.wrapping_mul(0x0123_4567_89ab_cdef_0f1e_2d3c_4b5a_6978))
            .collect();
        // Widths on and off the kernels' (4, 16), keeps up to a full word,
        // lengths on both sides of their groups (8 and 2 inputs).
        let cases = [
            (1, 1),
            (3, 5),
            (4, 1),
            (4, 2),
            (16, 1),
            (16, 4),
            (64, 1),
            (2, 32),
            (1, 64),
        ];
        for (width, keep) in cases {
            for len in [0usize, 1, 2, 7, 8, 9, 17, 33] {
                let xs: Vec<u128> = (0..len as u128)
                    .map(|i| (!i).wrapping_mul(0x9e37_79b9_7f4a))
                    .collect();
                let offsets = &offsets[..width];
                let want: Vec<u64> = (xs.iter())
                    .map(|x| {
                        (offsets.iter().enumerate()).fold(0, |w, (j, o)| {
                            let low = cr(x ^ o) as u64 & (u64::MAX >> (64 - keep));
                            w | low << (keep as usize * j)
                        })
                    })
                    .collect();
                let mut got = vec![0u64; len];
                cr_lows_at_offsets(&xs, offsets, keep, &mut got);
                assert_eq!(got, want, "width {width}, keep {keep}, len {len}");
                // The portable part alone, whatever the dispatch picks.
                let mut portable = vec![0u64; len];
                permuted_lows(&xs, offsets, keep, &mut portable);
                let inputs: Vec<u64> = (xs.iter())
                    .map(|x| {
                        (offsets.iter().enumerate()).fold(0, |w, (j, o)| {
                            w | ((x ^ o) as u64 & (u64::MAX >> (64 - keep))) << (keep as usize * j)
                        })
                    })
                    .collect();
                let portable: Vec<u64> = portable.iter().zip(&inputs).map(|(p, i)| p ^ i).collect();
                assert_eq!(
                    portable, want,
                    "portable: width {width}, keep {keep}, len {len}"
                );
            }
        }
    }

    #[test]
    fn prg_blocks_are_random_access() {
        let prg = Prg::new(42);
        let all = prg.blocks(10, 40);
        assert_eq!(prg.blocks(25, 5), all[15..20]);
        assert_ne!(Prg::new(43).blocks(10, 1)[0], all[0]);
    }
}
