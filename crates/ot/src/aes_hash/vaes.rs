use core::arch::asm;
use core::arch::x86_64::{
    __m128i, __m256i, __m512i, _mm256_add_epi64, _mm512_add_epi64, _mm512_aesenc_epi128,
    _mm512_aesenclast_epi128, _mm512_and_si512, _mm512_broadcast_i32x4, _mm512_loadu_si512,
    _mm512_maskz_shuffle_epi32, _mm512_or_si512, _mm512_reduce_or_epi64, _mm512_ror_epi32,
    _mm512_set1_epi32, _mm512_set_epi64, _mm512_setzero_si512, _mm512_shuffle_epi32,
    _mm512_sllv_epi64, _mm512_storeu_si512, _mm512_xor_si512, _mm_aeskeygenassist_si128,
    _mm_loadu_si128, _mm_shuffle_epi32, _mm_slli_si128, _mm_xor_si128,
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

/// Whether the kernels that need both VAES and AVX-512
/// ([`encrypt_each_512`], [`cr_lows_512`]) run on this CPU.
pub(super) fn wide_vaes() -> bool {
    available() && wide()
}

/// One step of the AES-128 key schedule on 16 keys, four a register,
/// without `AESKEYGENASSIST` (128-bit only). With all four words of a
/// lane set to the key's last word `w3`, `ShiftRows` changes nothing, so
/// `AESENCLAST` under `RCON << 8` in every word gives `SubWord(w3) ⊕
/// (RCON << 8)`; rotating each word right by a byte then gives
/// `RotWord(SubWord(w3)) ⊕ RCON`, the schedule's `t`. The next key is
/// the running XOR of the key's words, plus `t` in every word.
#[inline]
#[target_feature(enable = "avx512f,vaes")]
unsafe fn next_keys_512<const RCON: i32>(k: &mut [__m512i; 4]) {
    let rcon = _mm512_set1_epi32(RCON << 8);
    for k in k.iter_mut() {
        let w3 = _mm512_shuffle_epi32::<0xff>(*k);
        let t = _mm512_ror_epi32::<8>(_mm512_aesenclast_epi128(w3, rcon));
        // Words (w0, w1, w2, w3) → (w0, w0⊕w1, w1⊕w2, w2⊕w3) → prefix XORs.
        let x = _mm512_xor_si512(*k, _mm512_maskz_shuffle_epi32::<0x90>(0xeeee, *k));
        let x = _mm512_xor_si512(x, _mm512_maskz_shuffle_epi32::<0x40>(0xcccc, x));
        *k = _mm512_xor_si512(x, t);
    }
}

/// [`encrypt_each`](super::encrypt_each) on 512-bit registers: 16 key
/// schedules side by side, each round key used as soon as it is made.
/// Round keys are secret: the last ones are wiped (the earlier ones were
/// overwritten).
///
/// # Safety
/// The CPU must support AVX-512F and VAES; both slices hold the same
/// multiple of 16 blocks.
#[target_feature(enable = "avx512f,vaes")]
pub(super) unsafe fn encrypt_each_512(keys: &[u128], blocks: &mut [u128]) {
    for (keys, blocks) in keys.chunks_exact(16).zip(blocks.chunks_exact_mut(16)) {
        let (kp, bp) = (
            keys.as_ptr().cast::<__m512i>(),
            blocks.as_mut_ptr().cast::<__m512i>(),
        );
        let mut k = [_mm512_setzero_si512(); 4];
        let mut s = [_mm512_setzero_si512(); 4];
        // Index loops, no closures (see `encrypt_512`).
        for i in 0..4 {
            // SAFETY: both chunks hold 16 blocks, four unaligned 64-byte
            // registers' worth.
            unsafe {
                k[i] = _mm512_loadu_si512(kp.add(i));
                s[i] = _mm512_xor_si512(_mm512_loadu_si512(bp.add(i)), k[i]);
            }
        }
        macro_rules! step {
            ($rcon:literal) => {
                // SAFETY: the features this function enables.
                unsafe { next_keys_512::<$rcon>(&mut k) };
                for i in 0..4 {
                    s[i] = _mm512_aesenc_epi128(s[i], k[i]);
                }
            };
        }
        step!(0x01);
        step!(0x02);
        step!(0x04);
        step!(0x08);
        step!(0x10);
        step!(0x20);
        step!(0x40);
        step!(0x80);
        step!(0x1b);
        // SAFETY: as above.
        unsafe { next_keys_512::<0x36>(&mut k) };
        for i in 0..4 {
            s[i] = _mm512_aesenclast_epi128(s[i], k[i]);
            // SAFETY: as the loads.
            unsafe { _mm512_storeu_si512(bp.add(i), s[i]) };
        }
        k = [_mm512_setzero_si512(); 4];
        core::hint::black_box(&k);
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
unsafe fn encrypt_512(ka: &RoundKeys, kb: &RoundKeys, a: &mut [__m512i; 2], b: &mut [__m512i; 2]) {
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

/// Registers [`cr_lows_512`] keeps in flight through the rounds: enough
/// for the AES units' throughput, few enough to leave room for the
/// offsets and the packing constants (32 registers in all).
const LOWS_IN_FLIGHT: usize = 8;

/// [`cr_lows_at_offsets`](super::cr_lows_at_offsets)'s `π` part on
/// 512-bit registers, for `4·R` offsets (`R` registers an input): the low
/// `keep` bits of `π(x ⊕ offsets[j])` at bits `keep·j ..` of `out`'s word,
/// `8 / R` inputs at a time. Returns how many inputs it took (whole groups
/// only; the caller does the rest).
///
/// # Safety
/// The CPU must support AVX-512F and VAES; `offsets.len() == 4·R`,
/// `R` divides [`LOWS_IN_FLIGHT`], `1 ≤ keep` and `keep·4·R ≤ 64`;
/// `out.len() == xs.len()`.
#[target_feature(enable = "avx512f,vaes")]
pub(super) unsafe fn cr_lows_512<const R: usize>(
    k: &RoundKeys,
    xs: &[u128],
    offsets: &[u128],
    keep: u32,
    out: &mut [u64],
) -> usize {
    let group = LOWS_IN_FLIGHT / R;
    let mask = ((1u64 << keep) - 1) as i64;
    // Lane `l` of register `i` is offset `4i + l`: its bits go to `keep·(4i + l)`.
    let mut offs = [_mm512_setzero_si512(); R];
    let mut shifts = [_mm512_setzero_si512(); R];
    for i in 0..R {
        // SAFETY: `offsets` holds `4R` blocks, so four from `4i`.
        offs[i] = unsafe { _mm512_loadu_si512(offsets.as_ptr().add(4 * i).cast()) };
        let at = |l: usize| (keep as usize * (4 * i + l)) as i64;
        shifts[i] = _mm512_set_epi64(0, at(3), 0, at(2), 0, at(1), 0, at(0));
    }
    let masks = _mm512_set_epi64(0, mask, 0, mask, 0, mask, 0, mask);
    let taken = xs.len() / group * group;
    for (xs, out) in xs[..taken]
        .chunks_exact(group)
        .zip(out.chunks_exact_mut(group))
    {
        let mut s = [_mm512_setzero_si512(); LOWS_IN_FLIGHT];
        for g in 0..group {
            // SAFETY: `xs[g]` is 16 readable bytes; an unaligned load.
            let x = _mm512_broadcast_i32x4(unsafe { _mm_loadu_si128(xs[g..].as_ptr().cast()) });
            for i in 0..R {
                s[g * R + i] = _mm512_xor_si512(x, offs[i]);
            }
        }
        // SAFETY: AVX-512F and VAES as the caller says.
        unsafe { encrypt_all_512(k, &mut s) };
        for g in 0..group {
            let mut word = _mm512_setzero_si512();
            for i in 0..R {
                let low = _mm512_and_si512(s[g * R + i], masks);
                word = _mm512_or_si512(word, _mm512_sllv_epi64(low, shifts[i]));
            }
            out[g] = _mm512_reduce_or_epi64(word) as u64;
        }
    }
    taken
}

/// Encrypts every register of `s` under `k` (four blocks a register), all
/// rounds side by side.
#[inline]
#[target_feature(enable = "avx512f,vaes")]
unsafe fn encrypt_all_512<const N: usize>(k: &RoundKeys, s: &mut [__m512i; N]) {
    // SAFETY (each `key_512`): round keys 0..=10 exist.
    let k0 = unsafe { key_512(k, 0) };
    for x in s.iter_mut() {
        *x = _mm512_xor_si512(*x, k0);
    }
    for r in 1..10 {
        let kr = unsafe { key_512(k, r) };
        for x in s.iter_mut() {
            *x = _mm512_aesenc_epi128(*x, kr);
        }
    }
    let kl = unsafe { key_512(k, 10) };
    for x in s.iter_mut() {
        *x = _mm512_aesenclast_epi128(*x, kl);
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
