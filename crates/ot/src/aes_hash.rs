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
/// value). With AES-NI, eight key schedules run interleaved: one schedule
/// is a chain of ten dependent `AESKEYGENASSIST` steps, whose latency the
/// `aes` crate (a key at a time) waits out, about four times the cost of
/// eight chains side by side. Round keys are secret and wiped after use.
///
/// # Panics
/// If the slices have different lengths.
pub fn encrypt_each(keys: &[u128], blocks: &mut [u128]) {
    assert_eq!(keys.len(), blocks.len(), "one key per block");
    #[allow(unused_mut)]
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if psikit_primitives::cpu::features().aes {
        done = keys.len() / each::LANES * each::LANES;
        // SAFETY: the CPU dispatch just confirmed AES-NI (and SSE2, implied
        // by x86_64) at run time; both slices hold `done` blocks.
        unsafe { each::encrypt(&keys[..done], &mut blocks[..done]) };
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
mod vaes {
    use core::arch::asm;
    use core::arch::x86_64::{
        __m128i, __m256i, __m512i, _mm256_add_epi64, _mm512_add_epi64, _mm512_aesenc_epi128,
        _mm512_aesenclast_epi128, _mm512_broadcast_i32x4, _mm512_loadu_si512, _mm512_set_epi64,
        _mm512_storeu_si512, _mm512_xor_si512, _mm_aeskeygenassist_si128, _mm_loadu_si128,
        _mm_shuffle_epi32, _mm_slli_si128, _mm_xor_si128,
    };
    use zeroize::Zeroize;

    /// AES-128 round keys, each twice (one per 128-bit lane). Secret: wiped
    /// on drop.
    #[derive(Clone)]
    pub(super) struct RoundKeys([[u128; 2]; 11]);

    impl Drop for RoundKeys {
        fn drop(&mut self) {
            self.0.zeroize();
        }
    }

    impl RoundKeys {
        /// The key schedule of `key` (little-endian bytes), if the CPU has
        /// VAES.
        pub(super) fn new(key: u128) -> Option<Self> {
            if !available() {
                return None;
            }
            // SAFETY: `available` confirmed AES-NI (and SSE2, implied by
            // x86_64) at run time.
            let keys = unsafe { expand(key) };
            Some(Self(keys.map(|k| [k, k])))
        }
    }

    /// Whether the CPU has AES-NI, AVX2 (with OS support for YMM state) and
    /// VAES (psikit's one run-time dispatch, [`psikit_primitives::cpu`]).
    fn available() -> bool {
        let cpu = psikit_primitives::cpu::features();
        cpu.avx2 && cpu.aes && cpu.vaes
    }

    /// One step of the AES-128 key schedule.
    #[inline]
    #[target_feature(enable = "aes,sse2")]
    unsafe fn next_key<const RCON: i32>(k: __m128i) -> __m128i {
        let t = _mm_shuffle_epi32::<0xff>(_mm_aeskeygenassist_si128::<RCON>(k));
        let k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
        let k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
        let k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
        _mm_xor_si128(k, t)
    }

    /// The AES-128 key schedule (FIPS 197) with `AESKEYGENASSIST`.
    ///
    /// # Safety
    /// The CPU must support `aes` and `sse2`.
    #[target_feature(enable = "aes,sse2")]
    unsafe fn expand(key: u128) -> [u128; 11] {
        let mut k: [__m128i; 11] = [bytemuck::cast(key); 11];
        k[1] = next_key::<0x01>(k[0]);
        k[2] = next_key::<0x02>(k[1]);
        k[3] = next_key::<0x04>(k[2]);
        k[4] = next_key::<0x08>(k[3]);
        k[5] = next_key::<0x10>(k[4]);
        k[6] = next_key::<0x20>(k[5]);
        k[7] = next_key::<0x40>(k[6]);
        k[8] = next_key::<0x80>(k[7]);
        k[9] = next_key::<0x1b>(k[8]);
        k[10] = next_key::<0x36>(k[9]);
        k.map(bytemuck::cast)
    }

    /// Encrypts 8 blocks under `ka` (in `a`) and 8 under `kb` (in `b`).
    ///
    /// # Safety
    /// The CPU must support AVX2 and VAES.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn encrypt(ka: &RoundKeys, kb: &RoundKeys, a: &mut [__m256i; 4], b: &mut [__m256i; 4]) {
        let [a0, a1, a2, a3] = a;
        let [b0, b1, b2, b3] = b;
        asm!(
            "vpxor {a0}, {a0}, ymmword ptr [{ka}]",
            "vpxor {b0}, {b0}, ymmword ptr [{kb}]",
            "vpxor {a1}, {a1}, ymmword ptr [{ka}]",
            "vpxor {b1}, {b1}, ymmword ptr [{kb}]",
            "vpxor {a2}, {a2}, ymmword ptr [{ka}]",
            "vpxor {b2}, {b2}, ymmword ptr [{kb}]",
            "vpxor {a3}, {a3}, ymmword ptr [{ka}]",
            "vpxor {b3}, {b3}, ymmword ptr [{kb}]",
            "vaesenc {a0}, {a0}, ymmword ptr [{ka} + 32]",
            "vaesenc {b0}, {b0}, ymmword ptr [{kb} + 32]",
            "vaesenc {a1}, {a1}, ymmword ptr [{ka} + 32]",
            "vaesenc {b1}, {b1}, ymmword ptr [{kb} + 32]",
            "vaesenc {a2}, {a2}, ymmword ptr [{ka} + 32]",
            "vaesenc {b2}, {b2}, ymmword ptr [{kb} + 32]",
            "vaesenc {a3}, {a3}, ymmword ptr [{ka} + 32]",
            "vaesenc {b3}, {b3}, ymmword ptr [{kb} + 32]",
            "vaesenc {a0}, {a0}, ymmword ptr [{ka} + 64]",
            "vaesenc {b0}, {b0}, ymmword ptr [{kb} + 64]",
            "vaesenc {a1}, {a1}, ymmword ptr [{ka} + 64]",
            "vaesenc {b1}, {b1}, ymmword ptr [{kb} + 64]",
            "vaesenc {a2}, {a2}, ymmword ptr [{ka} + 64]",
            "vaesenc {b2}, {b2}, ymmword ptr [{kb} + 64]",
            "vaesenc {a3}, {a3}, ymmword ptr [{ka} + 64]",
            "vaesenc {b3}, {b3}, ymmword ptr [{kb} + 64]",
            "vaesenc {a0}, {a0}, ymmword ptr [{ka} + 96]",
            "vaesenc {b0}, {b0}, ymmword ptr [{kb} + 96]",
            "vaesenc {a1}, {a1}, ymmword ptr [{ka} + 96]",
            "vaesenc {b1}, {b1}, ymmword ptr [{kb} + 96]",
            "vaesenc {a2}, {a2}, ymmword ptr [{ka} + 96]",
            "vaesenc {b2}, {b2}, ymmword ptr [{kb} + 96]",
            "vaesenc {a3}, {a3}, ymmword ptr [{ka} + 96]",
            "vaesenc {b3}, {b3}, ymmword ptr [{kb} + 96]",
            "vaesenc {a0}, {a0}, ymmword ptr [{ka} + 128]",
            "vaesenc {b0}, {b0}, ymmword ptr [{kb} + 128]",
            "vaesenc {a1}, {a1}, ymmword ptr [{ka} + 128]",
            "vaesenc {b1}, {b1}, ymmword ptr [{kb} + 128]",
            "vaesenc {a2}, {a2}, ymmword ptr [{ka} + 128]",
            "vaesenc {b2}, {b2}, ymmword ptr [{kb} + 128]",
            "vaesenc {a3}, {a3}, ymmword ptr [{ka} + 128]",
            "vaesenc {b3}, {b3}, ymmword ptr [{kb} + 128]",
            "vaesenc {a0}, {a0}, ymmword ptr [{ka} + 160]",
            "vaesenc {b0}, {b0}, ymmword ptr [{kb} + 160]",
            "vaesenc {a1}, {a1}, ymmword ptr [{ka} + 160]",
            "vaesenc {b1}, {b1}, ymmword ptr [{kb} + 160]",
            "vaesenc {a2}, {a2}, ymmword ptr [{ka} + 160]",
            "vaesenc {b2}, {b2}, ymmword ptr [{kb} + 160]",
            "vaesenc {a3}, {a3}, ymmword ptr [{ka} + 160]",
            "vaesenc {b3}, {b3}, ymmword ptr [{kb} + 160]",
            "vaesenc {a0}, {a0}, ymmword ptr [{ka} + 192]",
            "vaesenc {b0}, {b0}, ymmword ptr [{kb} + 192]",
            "vaesenc {a1}, {a1}, ymmword ptr [{ka} + 192]",
            "vaesenc {b1}, {b1}, ymmword ptr [{kb} + 192]",
            "vaesenc {a2}, {a2}, ymmword ptr [{ka} + 192]",
            "vaesenc {b2}, {b2}, ymmword ptr [{kb} + 192]",
            "vaesenc {a3}, {a3}, ymmword ptr [{ka} + 192]",
            "vaesenc {b3}, {b3}, ymmword ptr [{kb} + 192]",
            "vaesenc {a0}, {a0}, ymmword ptr [{ka} + 224]",
            "vaesenc {b0}, {b0}, ymmword ptr [{kb} + 224]",
            "vaesenc {a1}, {a1}, ymmword ptr [{ka} + 224]",
            "vaesenc {b1}, {b1}, ymmword ptr [{kb} + 224]",
            "vaesenc {a2}, {a2}, ymmword ptr [{ka} + 224]",
            "vaesenc {b2}, {b2}, ymmword ptr [{kb} + 224]",
            "vaesenc {a3}, {a3}, ymmword ptr [{ka} + 224]",
            "vaesenc {b3}, {b3}, ymmword ptr [{kb} + 224]",
            "vaesenc {a0}, {a0}, ymmword ptr [{ka} + 256]",
            "vaesenc {b0}, {b0}, ymmword ptr [{kb} + 256]",
            "vaesenc {a1}, {a1}, ymmword ptr [{ka} + 256]",
            "vaesenc {b1}, {b1}, ymmword ptr [{kb} + 256]",
            "vaesenc {a2}, {a2}, ymmword ptr [{ka} + 256]",
            "vaesenc {b2}, {b2}, ymmword ptr [{kb} + 256]",
            "vaesenc {a3}, {a3}, ymmword ptr [{ka} + 256]",
            "vaesenc {b3}, {b3}, ymmword ptr [{kb} + 256]",
            "vaesenc {a0}, {a0}, ymmword ptr [{ka} + 288]",
            "vaesenc {b0}, {b0}, ymmword ptr [{kb} + 288]",
            "vaesenc {a1}, {a1}, ymmword ptr [{ka} + 288]",
            "vaesenc {b1}, {b1}, ymmword ptr [{kb} + 288]",
            "vaesenc {a2}, {a2}, ymmword ptr [{ka} + 288]",
            "vaesenc {b2}, {b2}, ymmword ptr [{kb} + 288]",
            "vaesenc {a3}, {a3}, ymmword ptr [{ka} + 288]",
            "vaesenc {b3}, {b3}, ymmword ptr [{kb} + 288]",
            "vaesenclast {a0}, {a0}, ymmword ptr [{ka} + 320]",
            "vaesenclast {b0}, {b0}, ymmword ptr [{kb} + 320]",
            "vaesenclast {a1}, {a1}, ymmword ptr [{ka} + 320]",
            "vaesenclast {b1}, {b1}, ymmword ptr [{kb} + 320]",
            "vaesenclast {a2}, {a2}, ymmword ptr [{ka} + 320]",
            "vaesenclast {b2}, {b2}, ymmword ptr [{kb} + 320]",
            "vaesenclast {a3}, {a3}, ymmword ptr [{ka} + 320]",
            "vaesenclast {b3}, {b3}, ymmword ptr [{kb} + 320]",
            ka = in(reg) ka.0.as_ptr(),
            kb = in(reg) kb.0.as_ptr(),
            a0 = inout(ymm_reg) *a0,
            a1 = inout(ymm_reg) *a1,
            a2 = inout(ymm_reg) *a2,
            a3 = inout(ymm_reg) *a3,
            b0 = inout(ymm_reg) *b0,
            b1 = inout(ymm_reg) *b1,
            b2 = inout(ymm_reg) *b2,
            b3 = inout(ymm_reg) *b3,
            options(nostack, readonly, preserves_flags),
        );
    }

    /// Whether this CPU runs the 512-bit kernels (`RoundKeys` exist only
    /// if it has VAES at all).
    fn wide() -> bool {
        psikit_primitives::cpu::features().avx512f
    }

    /// Encrypts `blocks` in place under `k`, 16 at a time, on the widest
    /// registers this CPU has.
    ///
    /// # Safety
    /// `k` must come from [`RoundKeys::new`] (the CPU has AVX2 and VAES);
    /// `blocks.len()` must be a multiple of 16.
    pub(super) unsafe fn encrypt_blocks(k: &RoundKeys, blocks: &mut [u128]) {
        match wide() {
            // SAFETY: `wide` confirmed AVX-512F; VAES as the caller says.
            true => unsafe { encrypt_blocks_512(k, blocks) },
            // SAFETY: as the caller says.
            false => unsafe { encrypt_blocks_256(k, blocks) },
        }
    }

    /// [`fill_pair`](super::fill_pair)'s counter mode on two keys at once,
    /// on the widest registers this CPU has.
    ///
    /// # Safety
    /// `ka` and `kb` must come from [`RoundKeys::new`]; `out_a.len() ==
    /// out_b.len()`, a multiple of 8; `first_block + out_a.len()` must not
    /// overflow `u64`.
    pub(super) unsafe fn ctr_pair(
        ka: &RoundKeys,
        kb: &RoundKeys,
        first_block: u64,
        out_a: &mut [u128],
        out_b: &mut [u128],
    ) {
        match wide() {
            // SAFETY: `wide` confirmed AVX-512F; the rest as the caller says.
            true => unsafe { ctr_pair_512(ka, kb, first_block, out_a, out_b) },
            // SAFETY: as the caller says.
            false => unsafe { ctr_pair_256(ka, kb, first_block, out_a, out_b) },
        }
    }

    /// Round key `r` of `k` in every 128-bit lane of a 512-bit register.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn key_512(k: &RoundKeys, r: usize) -> __m512i {
        // SAFETY: `k.0[r]` holds 32 readable bytes; an unaligned load.
        _mm512_broadcast_i32x4(unsafe { _mm_loadu_si128(k.0[r].as_ptr().cast()) })
    }

    /// Encrypts the blocks of `a` under `ka` and of `b` under `kb`, four
    /// blocks a register: all ten rounds, 16 blocks in flight.
    #[inline]
    #[target_feature(enable = "avx512f,vaes")]
    unsafe fn encrypt_512(
        ka: &RoundKeys,
        kb: &RoundKeys,
        a: &mut [__m512i; 2],
        b: &mut [__m512i; 2],
    ) {
        // Index loops, no closures: a closure kept out of line would lose
        // the target features and turn every intrinsic into a call.
        let (k0, l0) = unsafe { (key_512(ka, 0), key_512(kb, 0)) };
        for i in 0..2 {
            a[i] = _mm512_xor_si512(a[i], k0);
            b[i] = _mm512_xor_si512(b[i], l0);
        }
        for r in 1..10 {
            let (k, l) = unsafe { (key_512(ka, r), key_512(kb, r)) };
            for i in 0..2 {
                a[i] = _mm512_aesenc_epi128(a[i], k);
                b[i] = _mm512_aesenc_epi128(b[i], l);
            }
        }
        let (k, l) = unsafe { (key_512(ka, 10), key_512(kb, 10)) };
        for i in 0..2 {
            a[i] = _mm512_aesenclast_epi128(a[i], k);
            b[i] = _mm512_aesenclast_epi128(b[i], l);
        }
    }

    /// [`encrypt_blocks`] on 512-bit registers.
    ///
    /// # Safety
    /// The CPU must support AVX-512F and VAES; `blocks.len()` must be a
    /// multiple of 16.
    #[target_feature(enable = "avx512f,vaes")]
    pub(super) unsafe fn encrypt_blocks_512(k: &RoundKeys, blocks: &mut [u128]) {
        for chunk in blocks.chunks_exact_mut(16) {
            let p = chunk.as_mut_ptr().cast::<__m512i>();
            // SAFETY: `chunk` holds 16 blocks, four unaligned 64-byte
            // registers' worth, read and written through `p` only.
            unsafe {
                let mut a = [_mm512_loadu_si512(p), _mm512_loadu_si512(p.add(1))];
                let mut b = [_mm512_loadu_si512(p.add(2)), _mm512_loadu_si512(p.add(3))];
                encrypt_512(k, k, &mut a, &mut b);
                _mm512_storeu_si512(p, a[0]);
                _mm512_storeu_si512(p.add(1), a[1]);
                _mm512_storeu_si512(p.add(2), b[0]);
                _mm512_storeu_si512(p.add(3), b[1]);
            }
        }
    }

    /// [`ctr_pair`] on 512-bit registers: each holds four consecutive
    /// counter blocks of one stream, two registers a stream.
    ///
    /// # Safety
    /// As [`ctr_pair`], and the CPU must support AVX-512F and VAES.
    #[target_feature(enable = "avx512f,vaes")]
    pub(super) unsafe fn ctr_pair_512(
        ka: &RoundKeys,
        kb: &RoundKeys,
        first_block: u64,
        out_a: &mut [u128],
        out_b: &mut [u128],
    ) {
        // Block `j` of a register is the 128-bit counter `base + j`: its
        // low 64-bit lane counts, its high lane stays zero (no carry, as
        // the caller guarantees).
        let first = first_block as i64;
        let mut base = _mm512_set_epi64(0, first, 0, first, 0, first, 0, first);
        let steps = [
            _mm512_set_epi64(0, 3, 0, 2, 0, 1, 0, 0),
            _mm512_set_epi64(0, 7, 0, 6, 0, 5, 0, 4),
        ];
        let eight = _mm512_set_epi64(0, 8, 0, 8, 0, 8, 0, 8);
        for (oa, ob) in out_a.chunks_exact_mut(8).zip(out_b.chunks_exact_mut(8)) {
            let mut a = [
                _mm512_add_epi64(base, steps[0]),
                _mm512_add_epi64(base, steps[1]),
            ];
            let mut b = a;
            // SAFETY: as the caller says.
            unsafe { encrypt_512(ka, kb, &mut a, &mut b) };
            let (pa, pb) = (
                oa.as_mut_ptr().cast::<__m512i>(),
                ob.as_mut_ptr().cast::<__m512i>(),
            );
            // SAFETY: `oa` and `ob` hold 8 blocks each, two unaligned
            // 64-byte registers' worth.
            unsafe {
                _mm512_storeu_si512(pa, a[0]);
                _mm512_storeu_si512(pa.add(1), a[1]);
                _mm512_storeu_si512(pb, b[0]);
                _mm512_storeu_si512(pb.add(1), b[1]);
            }
            base = _mm512_add_epi64(base, eight);
        }
    }

    /// [`encrypt_blocks`] on 256-bit registers.
    ///
    /// # Safety
    /// The CPU must support AVX2 and VAES; `blocks.len()` must be a
    /// multiple of 16.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn encrypt_blocks_256(k: &RoundKeys, blocks: &mut [u128]) {
        for chunk in blocks.chunks_exact_mut(16) {
            let pairs: &mut [[u128; 2]] = bytemuck::cast_slice_mut(chunk);
            let mut a: [__m256i; 4] = core::array::from_fn(|i| bytemuck::cast(pairs[i]));
            let mut b: [__m256i; 4] = core::array::from_fn(|i| bytemuck::cast(pairs[4 + i]));
            encrypt(k, k, &mut a, &mut b);
            for (p, x) in pairs.iter_mut().zip(a.iter().chain(&b)) {
                *p = bytemuck::cast(*x);
            }
        }
    }

    /// [`ctr_pair`] on 256-bit registers, 8 blocks of each stream per step.
    ///
    /// # Safety
    /// The CPU must support AVX2 and VAES; `out_a.len() == out_b.len()`, a
    /// multiple of 8; `first_block + out_a.len()` must not overflow `u64`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn ctr_pair_256(
        ka: &RoundKeys,
        kb: &RoundKeys,
        first_block: u64,
        out_a: &mut [u128],
        out_b: &mut [u128],
    ) {
        // Lane counters: register i holds blocks 2i and 2i + 1.
        let step: [__m256i; 4] =
            core::array::from_fn(|i| bytemuck::cast([2 * i as u64, 0, 2 * i as u64 + 1, 0]));
        let mut base: __m256i = bytemuck::cast([first_block, 0, first_block, 0]);
        let eight: __m256i = bytemuck::cast([8u64, 0, 8, 0]);
        for (oa, ob) in out_a.chunks_exact_mut(8).zip(out_b.chunks_exact_mut(8)) {
            let mut a: [__m256i; 4] = core::array::from_fn(|i| _mm256_add_epi64(base, step[i]));
            let mut b = a;
            encrypt(ka, kb, &mut a, &mut b);
            let oa: &mut [[u128; 2]] = bytemuck::cast_slice_mut(oa);
            let ob: &mut [[u128; 2]] = bytemuck::cast_slice_mut(ob);
            for ((oa, ob), (x, y)) in oa.iter_mut().zip(ob.iter_mut()).zip(a.iter().zip(&b)) {
                *oa = bytemuck::cast(*x);
                *ob = bytemuck::cast(*y);
            }
            base = _mm256_add_epi64(base, eight);
        }
    }
}

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
        for len in [0usize, 1, 7, 8, 9, 16, 29] {
            let keys: Vec<u128> = (0..len as u128)
                .map(|i| i * 0x0123_4567_89ab_cdef + 5)
                .collect();
            let blocks: Vec<u128> = (0..len as u128)
                .map(|i| (!i).wrapping_mul(0x9e37_79b9))
                .collect();
            let mut fast = blocks.clone();
            encrypt_each(&keys, &mut fast);
            for ((k, b), f) in keys.iter().zip(&blocks).zip(&fast) {
                let mut one = [*b];
                encrypt_in_place(&Aes128::new(&k.to_le_bytes().into()), &mut one);
                assert_eq!(*f, one[0], "len {len}");
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
    fn prg_blocks_are_random_access() {
        let prg = Prg::new(42);
        let all = prg.blocks(10, 40);
        assert_eq!(prg.blocks(25, 5), all[15..20]);
        assert_ne!(Prg::new(43).blocks(10, 1)[0], all[0]);
    }
}
