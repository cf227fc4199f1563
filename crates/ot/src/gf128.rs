//! Arithmetic in GF(2^128) for the KOS15 consistency check.
//!
//! An element is a `u128` whose bit `k` is the coefficient of `X^k`; the
//! field is GF(2)\[X\] / (X^128 + X^7 + X^2 + X + 1). Products are first formed
//! as unreduced 256-bit carry-less products `(lo, hi)`, so that long sums of
//! products (the check's inner products) need a single reduction at the end.
//!
//! On x86_64 the carry-less multiply uses `PCLMULQDQ` when the CPU has it
//! (checked at run time), and long inner products `VPCLMULQDQ` on 512-bit
//! registers where the CPU has AVX-512; otherwise a constant-time portable
//! version runs. Tests check that every path agrees.

/// An unreduced carry-less product: `lo + hi·X^128`.
pub type Wide = (u128, u128);

/// Carry-less 64×64 → 128-bit product, portable and constant time (no
/// branches or table look-ups on the operands).
fn clmul64_portable(a: u64, b: u64) -> u128 {
    let a = u128::from(a);
    let mut acc = 0u128;
    for i in 0..64 {
        let bit = u128::from((b >> i) & 1);
        acc ^= (a & bit.wrapping_neg()) << i;
    }
    acc
}

/// Carry-less 128×128 → 256-bit product, portable.
pub fn clmul_portable(a: u128, b: u128) -> Wide {
    let (a0, a1) = (a as u64, (a >> 64) as u64);
    let (b0, b1) = (b as u64, (b >> 64) as u64);
    let lo = clmul64_portable(a0, b0);
    let hi = clmul64_portable(a1, b1);
    let mid = clmul64_portable(a0, b1) ^ clmul64_portable(a1, b0);
    (lo ^ (mid << 64), hi ^ (mid >> 64))
}

/// Reduces `lo + hi·X^128` modulo X^128 + X^7 + X^2 + X + 1.
pub fn reduce((lo, hi): Wide) -> u128 {
    // X^128 ≡ X^7 + X^2 + X + 1, so hi·X^128 ≡ hi·(X^7+X^2+X+1). The bits of
    // that product above X^127 (at most 7 of them) are folded once more.
    let spill = (hi >> 127) ^ (hi >> 126) ^ (hi >> 121);
    let fold = |v: u128| v ^ (v << 1) ^ (v << 2) ^ (v << 7);
    lo ^ fold(hi) ^ fold(spill)
}

/// Whether the CPU can run the `PCLMULQDQ` fast path (psikit's one
/// run-time dispatch, [`psikit_primitives::cpu`]).
pub fn has_clmul() -> bool {
    let cpu = psikit_primitives::cpu::features();
    cfg!(target_arch = "x86_64") && cpu.pclmulqdq && cpu.sse2
}

/// Carry-less 128×128 → 256-bit product (fast path when available).
pub fn clmul(a: u128, b: u128) -> Wide {
    inner_product(&[a], &[b])
}

/// Field multiplication.
pub fn mul(a: u128, b: u128) -> u128 {
    reduce(clmul(a, b))
}

/// Whether the CPU can run the 512-bit `VPCLMULQDQ` inner product.
fn has_clmul_512() -> bool {
    let cpu = psikit_primitives::cpu::features();
    has_clmul() && cpu.vpclmulqdq && cpu.avx512f
}

/// `Σ a_k·b_k`, unreduced. The slices must have equal length.
pub fn inner_product(a: &[u128], b: &[u128]) -> Wide {
    assert_eq!(a.len(), b.len(), "inner product of unequal lengths");
    #[cfg(target_arch = "x86_64")]
    if has_clmul_512() {
        // SAFETY: `has_clmul_512` just confirmed at run time that the CPU
        // supports AVX-512F, VPCLMULQDQ, PCLMULQDQ and SSE2.
        return unsafe { x86::inner_product_512(a, b) };
    }
    #[cfg(target_arch = "x86_64")]
    if has_clmul() {
        // SAFETY: `has_clmul` just confirmed at run time that the CPU
        // supports PCLMULQDQ and SSE2, the only features the function uses.
        return unsafe { x86::inner_product(a, b) };
    }
    inner_product_portable(a, b)
}

/// Portable [`inner_product`], public for tests and benchmarks.
pub fn inner_product_portable(a: &[u128], b: &[u128]) -> Wide {
    assert_eq!(a.len(), b.len(), "inner product of unequal lengths");
    a.iter().zip(b).fold((0, 0), |(l, h), (x, y)| {
        let (pl, ph) = clmul_portable(*x, *y);
        (l ^ pl, h ^ ph)
    })
}

/// `acc[i] += c·x[i]` for every `i` (a VOLE's `K = B + Δ·(P + C)` and
/// its evaluation `Decode(K, x) + Δ·h(x)`): one feature check per batch,
/// not per product. The slices must have equal length.
pub fn mul_acc(c: u128, x: &[u128], acc: &mut [u128]) {
    assert_eq!(x.len(), acc.len(), "multiply-accumulate of unequal lengths");
    #[cfg(target_arch = "x86_64")]
    if has_clmul_512() {
        // SAFETY: `has_clmul_512` just confirmed AVX-512F, VPCLMULQDQ,
        // PCLMULQDQ and SSE2 at run time.
        unsafe { x86::mul_acc_512(c, x, acc) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if has_clmul() {
        // SAFETY: `has_clmul` just confirmed PCLMULQDQ and SSE2 at run time.
        unsafe { x86::mul_acc(c, x, acc) };
        return;
    }
    mul_acc_portable(c, x, acc);
}

/// Portable [`mul_acc`], the reference the fast path is tested against.
pub fn mul_acc_portable(c: u128, x: &[u128], acc: &mut [u128]) {
    for (a, x) in acc.iter_mut().zip(x) {
        *a ^= reduce(clmul_portable(c, *x));
    }
}

/// XOR of two unreduced values (sums in the field are XORs).
pub fn add_wide(a: Wide, b: Wide) -> Wide {
    (a.0 ^ b.0, a.1 ^ b.1)
}

/// Running sums `Σ_k w_k·col_{j,k}` for many columns `j` at once (the KOS
/// check's `t̃_j`, `q̃_j`), unreduced. Each sum is kept as its three
/// Karatsuba parts `Σ a0·b0`, `Σ a1·b1`, `Σ (a0⊕a1)·(b0⊕b1)` (64-bit halves),
/// so every term costs three 64×64 carry-less products instead of four and
/// the middle part is recombined once per column at the end.
#[derive(Clone, Debug)]
pub struct ColumnSums {
    parts: Vec<[u128; 3]>,
}

impl ColumnSums {
    /// Zero sums for `columns` columns.
    pub fn new(columns: usize) -> Self {
        Self {
            parts: vec![[0; 3]; columns],
        }
    }

    /// Adds `Σ_k w_k·cols[j·w.len() + k]` to the sum of every column `j`:
    /// `cols` holds the columns one after the other, `w.len()` blocks each,
    /// and must have exactly one column per sum.
    pub fn add(&mut self, w: &[u128], cols: &[u128]) {
        assert_eq!(
            cols.len(),
            w.len() * self.parts.len(),
            "one column of weights' length per sum"
        );
        #[cfg(target_arch = "x86_64")]
        if has_clmul() {
            // SAFETY: `has_clmul` just confirmed at run time that the CPU
            // supports PCLMULQDQ and SSE2, the only features the function
            // uses; it reads and writes only through the given slices.
            return unsafe { x86::add_columns(&mut self.parts, w, cols) };
        }
        self.add_portable(w, cols);
    }

    /// Portable [`Self::add`], public for tests and benchmarks.
    pub fn add_portable(&mut self, w: &[u128], cols: &[u128]) {
        assert_eq!(cols.len(), w.len() * self.parts.len());
        if w.is_empty() {
            return;
        }
        for (part, col) in self.parts.iter_mut().zip(cols.chunks_exact(w.len())) {
            for (x, y) in w.iter().zip(col) {
                let (x0, x1) = (*x as u64, (*x >> 64) as u64);
                let (y0, y1) = (*y as u64, (*y >> 64) as u64);
                part[0] ^= clmul64_portable(x0, y0);
                part[1] ^= clmul64_portable(x1, y1);
                part[2] ^= clmul64_portable(x0 ^ x1, y0 ^ y1);
            }
        }
    }

    /// Adds another set of sums over the same columns.
    pub fn merge(mut self, other: &Self) -> Self {
        for (a, b) in self.parts.iter_mut().zip(&other.parts) {
            for (x, y) in a.iter_mut().zip(b) {
                *x ^= y;
            }
        }
        self
    }

    /// The reduced sums, one per column.
    pub fn finish(&self) -> Vec<u128> {
        self.parts
            .iter()
            .map(|&[lo, hi, m]| {
                let mid = m ^ lo ^ hi;
                reduce((lo ^ (mid << 64), hi ^ (mid >> 64)))
            })
            .collect()
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use core::arch::x86_64::{
        __m128i, __m512i, _mm512_broadcast_i32x4, _mm512_clmulepi64_epi128, _mm512_loadu_si512,
        _mm512_maskz_shuffle_epi32, _mm512_set_epi64, _mm512_setzero_si512, _mm512_storeu_si512,
        _mm512_xor_si512, _mm_clmulepi64_si128, _mm_setzero_si128, _mm_shuffle_epi32,
        _mm_slli_si128, _mm_srli_si128, _mm_xor_si128,
    };

    use super::Wide;

    /// PCLMULQDQ inner product: four 64×64 products per term (schoolbook),
    /// accumulated unreduced so the loop has no dependency on a reduction.
    ///
    /// # Safety
    /// The CPU must support `pclmulqdq` and `sse2`.
    #[target_feature(enable = "pclmulqdq,sse2")]
    pub(super) unsafe fn inner_product(a: &[u128], b: &[u128]) -> Wide {
        let (mut lo, mut hi, mut mid) = (
            _mm_setzero_si128(),
            _mm_setzero_si128(),
            _mm_setzero_si128(),
        );
        for (x, y) in a.iter().zip(b) {
            let x: __m128i = bytemuck::cast(*x);
            let y: __m128i = bytemuck::cast(*y);
            lo = _mm_xor_si128(lo, _mm_clmulepi64_si128::<0x00>(x, y));
            hi = _mm_xor_si128(hi, _mm_clmulepi64_si128::<0x11>(x, y));
            mid = _mm_xor_si128(mid, _mm_clmulepi64_si128::<0x01>(x, y));
            mid = _mm_xor_si128(mid, _mm_clmulepi64_si128::<0x10>(x, y));
        }
        let (lo, hi, mid): (u128, u128, u128) =
            (bytemuck::cast(lo), bytemuck::cast(hi), bytemuck::cast(mid));
        (lo ^ (mid << 64), hi ^ (mid >> 64))
    }

    /// [`inner_product`] four terms per instruction on 512-bit registers
    /// (the silent VOLE's malicious check runs it over every leaf, on the
    /// receiver's critical path): the same four products per term, summed
    /// lane-wise, the lanes added at the end, the last `len % 4` terms by
    /// [`inner_product`].
    ///
    /// # Safety
    /// The CPU must support `avx512f`, `vpclmulqdq`, `pclmulqdq` and
    /// `sse2`; the slices must have equal lengths.
    #[target_feature(enable = "avx512f,vpclmulqdq,pclmulqdq,sse2")]
    pub(super) unsafe fn inner_product_512(a: &[u128], b: &[u128]) -> Wide {
        let whole = a.len() / 4 * 4;
        let (mut lo, mut hi, mut mid) = (
            _mm512_setzero_si512(),
            _mm512_setzero_si512(),
            _mm512_setzero_si512(),
        );
        for (x, y) in a[..whole].chunks_exact(4).zip(b[..whole].chunks_exact(4)) {
            // SAFETY: each chunk holds four blocks, 64 readable bytes.
            let (x, y) = unsafe {
                (
                    _mm512_loadu_si512(x.as_ptr().cast()),
                    _mm512_loadu_si512(y.as_ptr().cast()),
                )
            };
            lo = _mm512_xor_si512(lo, _mm512_clmulepi64_epi128::<0x00>(x, y));
            hi = _mm512_xor_si512(hi, _mm512_clmulepi64_epi128::<0x11>(x, y));
            mid = _mm512_xor_si512(mid, _mm512_clmulepi64_epi128::<0x01>(x, y));
            mid = _mm512_xor_si512(mid, _mm512_clmulepi64_epi128::<0x10>(x, y));
        }
        let lanes = |v: __m512i| {
            let mut out = [0u128; 4];
            // SAFETY: `out` holds 64 writable bytes.
            unsafe { _mm512_storeu_si512(out.as_mut_ptr().cast(), v) };
            out.iter().fold(0, |s, x| s ^ x)
        };
        let (lo, hi, mid) = (lanes(lo), lanes(hi), lanes(mid));
        // SAFETY: the caller's CPU features include `inner_product`'s.
        let tail = unsafe { inner_product(&a[whole..], &b[whole..]) };
        (lo ^ (mid << 64) ^ tail.0, hi ^ (mid >> 64) ^ tail.1)
    }

    /// The kernel of [`super::mul_acc`]: four PCLMULQDQ per product and
    /// the reduction with carry-less products too (`hi·X^128 ≡ hi·0x87`,
    /// whose high half is folded once more), in one loop.
    ///
    /// # Safety
    /// The CPU must support `pclmulqdq` and `sse2`.
    #[target_feature(enable = "pclmulqdq,sse2")]
    pub(super) unsafe fn mul_acc(c: u128, x: &[u128], acc: &mut [u128]) {
        let c: __m128i = bytemuck::cast(c);
        let poly: __m128i = bytemuck::cast(0x87u128);
        for (a, x) in acc.iter_mut().zip(x) {
            let x: __m128i = bytemuck::cast(*x);
            let lo = _mm_clmulepi64_si128::<0x00>(c, x);
            let hi = _mm_clmulepi64_si128::<0x11>(c, x);
            let mid = _mm_xor_si128(
                _mm_clmulepi64_si128::<0x01>(c, x),
                _mm_clmulepi64_si128::<0x10>(c, x),
            );
            // `lo + mid·X^64 + hi·X^128`: mid's halves go to lo and hi.
            let lo = _mm_xor_si128(lo, _mm_slli_si128::<8>(mid));
            let hi = _mm_xor_si128(hi, _mm_srli_si128::<8>(mid));
            let t0 = _mm_clmulepi64_si128::<0x00>(hi, poly);
            let t1 = _mm_clmulepi64_si128::<0x01>(hi, poly);
            // `t1·X^64`: its bits past X^128 (below 2^7) fold once more.
            let t2 = _mm_clmulepi64_si128::<0x01>(t1, poly);
            let r = _mm_xor_si128(
                _mm_xor_si128(lo, t0),
                _mm_xor_si128(_mm_slli_si128::<8>(t1), t2),
            );
            *a ^= bytemuck::cast::<__m128i, u128>(r);
        }
    }

    /// [`mul_acc`] four products per instruction on 512-bit registers
    /// (VOLE-PSI's and the OPPRF's sender runs it over its whole table and
    /// every item), reduced as [`mul_acc`] reduces. The last `len % 4`
    /// products go to [`mul_acc`].
    ///
    /// # Safety
    /// The CPU must support `avx512f`, `vpclmulqdq`, `pclmulqdq` and
    /// `sse2`; the slices must have equal lengths.
    #[target_feature(enable = "avx512f,vpclmulqdq,pclmulqdq,sse2")]
    pub(super) unsafe fn mul_acc_512(c: u128, x: &[u128], acc: &mut [u128]) {
        let whole = x.len() / 4 * 4;
        let c4 = _mm512_broadcast_i32x4(bytemuck::cast(c));
        let poly = _mm512_set_epi64(0, 0x87, 0, 0x87, 0, 0x87, 0, 0x87);
        for (a, x) in acc[..whole]
            .chunks_exact_mut(4)
            .zip(x[..whole].chunks_exact(4))
        {
            let (pa, px) = (
                a.as_mut_ptr().cast::<__m512i>(),
                x.as_ptr().cast::<__m512i>(),
            );
            // SAFETY: each chunk holds four blocks, 64 bytes.
            let xv = unsafe { _mm512_loadu_si512(px) };
            let lo = _mm512_clmulepi64_epi128::<0x00>(c4, xv);
            let hi = _mm512_clmulepi64_epi128::<0x11>(c4, xv);
            let mid = _mm512_xor_si512(
                _mm512_clmulepi64_epi128::<0x01>(c4, xv),
                _mm512_clmulepi64_epi128::<0x10>(c4, xv),
            );
            // `lo + mid·X^64 + hi·X^128`: mid's halves go to lo and hi.
            // In each lane, words (0, 1, 2, 3) → (0, 0, 0, 1) moves the
            // low 64 bits up, → (2, 3, 0, 0) the high 64 bits down.
            let lo = _mm512_xor_si512(lo, _mm512_maskz_shuffle_epi32::<0x40>(0xcccc, mid));
            let hi = _mm512_xor_si512(hi, _mm512_maskz_shuffle_epi32::<0x0e>(0x3333, mid));
            let t0 = _mm512_clmulepi64_epi128::<0x00>(hi, poly);
            let t1 = _mm512_clmulepi64_epi128::<0x01>(hi, poly);
            // `t1·X^64`: its bits past X^128 (below 2^7) fold once more.
            let t2 = _mm512_clmulepi64_epi128::<0x01>(t1, poly);
            let r = _mm512_xor_si512(
                _mm512_xor_si512(lo, t0),
                _mm512_xor_si512(_mm512_maskz_shuffle_epi32::<0x40>(0xcccc, t1), t2),
            );
            // SAFETY: as the load.
            unsafe { _mm512_storeu_si512(pa, _mm512_xor_si512(_mm512_loadu_si512(pa), r)) };
        }
        // SAFETY: the caller's CPU features include `mul_acc`'s.
        unsafe { mul_acc(c, &x[whole..], &mut acc[whole..]) };
    }

    /// The kernel of [`super::ColumnSums::add`]: three PCLMULQDQ per term
    /// (Karatsuba), one column's parts held in registers while its blocks
    /// stream by. Hand-written because this loop runs once per OT and the
    /// generic per-column [`inner_product`] call (four products, a feature
    /// check and a call per column) cost about twice as much.
    ///
    /// # Safety
    /// The CPU must support `pclmulqdq` and `sse2`. `cols.len()` must be
    /// `w.len() * parts.len()` (checked by the caller; the code only
    /// indexes through iterators, so a mismatch would just skip terms).
    #[target_feature(enable = "pclmulqdq,sse2")]
    pub(super) unsafe fn add_columns(parts: &mut [[u128; 3]], w: &[u128], cols: &[u128]) {
        if w.is_empty() {
            return;
        }
        for (part, col) in parts.iter_mut().zip(cols.chunks_exact(w.len())) {
            let mut lo: __m128i = bytemuck::cast(part[0]);
            let mut hi: __m128i = bytemuck::cast(part[1]);
            let mut mid: __m128i = bytemuck::cast(part[2]);
            for (x, y) in w.iter().zip(col) {
                let x: __m128i = bytemuck::cast(*x);
                let y: __m128i = bytemuck::cast(*y);
                // Low 64 bits of `xf` are x0 ⊕ x1 (halves swapped and added).
                let xf = _mm_xor_si128(x, _mm_shuffle_epi32::<0x4e>(x));
                let yf = _mm_xor_si128(y, _mm_shuffle_epi32::<0x4e>(y));
                lo = _mm_xor_si128(lo, _mm_clmulepi64_si128::<0x00>(x, y));
                hi = _mm_xor_si128(hi, _mm_clmulepi64_si128::<0x11>(x, y));
                mid = _mm_xor_si128(mid, _mm_clmulepi64_si128::<0x00>(xf, yf));
            }
            *part = [bytemuck::cast(lo), bytemuck::cast(hi), bytemuck::cast(mid)];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn clmul_fast_path_equals_portable() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        for len in [0usize, 1, 2, 3, 4, 7, 64, 129, 1030] {
            let a: Vec<u128> = (0..len).map(|_| rng.gen()).collect();
            let b: Vec<u128> = (0..len).map(|_| rng.gen()).collect();
            let want = inner_product_portable(&a, &b);
            assert_eq!(inner_product(&a, &b), want);
            #[cfg(target_arch = "x86_64")]
            {
                // Every fast path this CPU has, whichever the dispatch picks.
                if has_clmul() {
                    // SAFETY: PCLMULQDQ and SSE2 were just detected.
                    assert_eq!(unsafe { x86::inner_product(&a, &b) }, want);
                }
                if has_clmul_512() {
                    // SAFETY: AVX-512F and both CLMULs were just detected.
                    assert_eq!(unsafe { x86::inner_product_512(&a, &b) }, want);
                }
            }
        }
        for _ in 0..200 {
            let (a, b): (u128, u128) = (rng.gen(), rng.gen());
            assert_eq!(clmul(a, b), clmul_portable(a, b));
        }
        assert_eq!(clmul_portable(u128::MAX, u128::MAX).1 >> 126, 1);
    }

    #[test]
    fn mul_acc_fast_path_equals_portable() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(4);
        for len in [0usize, 1, 4, 5, 7, 300] {
            // All-ones operands make every fold of the reduction carry.
            let c: u128 = if len == 7 { u128::MAX } else { rng.gen() };
            let x: Vec<u128> = (0..len)
                .map(|i| if i == 2 { u128::MAX } else { rng.gen() })
                .collect();
            let start: Vec<u128> = (0..len).map(|_| rng.gen()).collect();
            let (mut fast, mut portable) = (start.clone(), start.clone());
            mul_acc(c, &x, &mut fast);
            mul_acc_portable(c, &x, &mut portable);
            assert_eq!(fast, portable, "length {len}");
            #[cfg(target_arch = "x86_64")]
            {
                // Every fast path this CPU has, whichever the dispatch picks.
                if has_clmul() {
                    let mut f = start.clone();
                    // SAFETY: PCLMULQDQ and SSE2 were just detected.
                    unsafe { x86::mul_acc(c, &x, &mut f) };
                    assert_eq!(f, portable, "128-bit, length {len}");
                }
                if has_clmul_512() {
                    let mut f = start.clone();
                    // SAFETY: AVX-512F and both CLMULs were just detected.
                    unsafe { x86::mul_acc_512(c, &x, &mut f) };
                    assert_eq!(f, portable, "512-bit, length {len}");
                }
            }
            for i in 0..len {
                assert_eq!(fast[i], start[i] ^ mul(c, x[i]));
            }
        }
    }

    #[test]
    fn column_sums_equal_inner_products() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for (columns, bpc) in [(128usize, 8usize), (3, 1), (256, 5), (4, 0)] {
            let w: Vec<u128> = (0..bpc).map(|_| rng.gen()).collect();
            let mut fast = ColumnSums::new(columns);
            let mut portable = ColumnSums::new(columns);
            let mut naive = vec![(0u128, 0u128); columns];
            for _ in 0..3 {
                let cols: Vec<u128> = (0..columns * bpc).map(|_| rng.gen()).collect();
                fast.add(&w, &cols);
                portable.add_portable(&w, &cols);
                for (j, acc) in naive.iter_mut().enumerate() {
                    let col = &cols[j * bpc..(j + 1) * bpc];
                    *acc = add_wide(*acc, inner_product_portable(&w, col));
                }
            }
            let naive: Vec<u128> = naive.into_iter().map(reduce).collect();
            assert_eq!(fast.finish(), naive);
            assert_eq!(portable.finish(), naive);
            let other = fast.clone();
            assert_eq!(fast.merge(&other).finish(), vec![0; columns]);
        }
    }

    #[test]
    fn field_laws() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
        // X^127 · X = X^128 ≡ X^7 + X^2 + X + 1.
        assert_eq!(mul(1 << 127, 2), 0x87);
        for _ in 0..100 {
            let (a, b, c): (u128, u128, u128) = (rng.gen(), rng.gen(), rng.gen());
            assert_eq!(mul(a, 1), a);
            assert_eq!(mul(a, b), mul(b, a));
            assert_eq!(mul(mul(a, b), c), mul(a, mul(b, c)));
            assert_eq!(mul(a, b ^ c), mul(a, b) ^ mul(a, c));
        }
        // A nonzero element has an inverse: a^(2^128 - 2).
        let a: u128 = rng.gen::<u128>() | 1;
        let mut inv = 1u128;
        let mut base = a;
        for _ in 1..128 {
            base = mul(base, base);
            inv = mul(inv, base);
        }
        assert_eq!(mul(a, inv), 1);
    }
}
