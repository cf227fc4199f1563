//! [`Lanes`] on AVX-512 IFMA: eight field elements per value, limb `i` of
//! all eight in one 512-bit register, products with `vpmadd52luq` /
//! `vpmadd52huq`.
//!
//! Hand-written because no maintained crate has it: curve25519-dalek's
//! IFMA backend packs the four coordinates of *one* point in a register
//! (and needs nightly), where a batch of independent points wants eight
//! points side by side. The limb bounds each step relies on are in the
//! comments; `field` explains why every result is tight.
//!
//! Every function here is `inline(always)` and may only run inside a
//! `#[target_feature(enable = "avx512f,avx512ifma")]` function, on a CPU
//! that [`crate::cpu::features`] says has both.

#![allow(unsafe_code)]
// Index loops instead of iterator adaptors and closures: a closure the
// compiler keeps out of line loses the target features and turns each
// intrinsic into a call (measured: a third of the time).
#![allow(clippy::needless_range_loop)]

use core::arch::x86_64::*;

use super::field::{Lanes, Limbs, PerLane, MASK51, TWO_P};

/// Eight elements; `self.0[i]` holds limb `i` of each lane.
#[derive(Clone, Copy)]
pub(crate) struct Ifma([__m512i; 5]);

#[inline(always)]
fn splat64(x: u64) -> __m512i {
    // SAFETY (all intrinsics in this file): the caller runs inside an
    // AVX-512F + IFMA target-feature function (module doc).
    unsafe { _mm512_set1_epi64(x as i64) }
}

#[inline(always)]
fn add64(a: __m512i, b: __m512i) -> __m512i {
    unsafe { _mm512_add_epi64(a, b) }
}

#[inline(always)]
fn sub64(a: __m512i, b: __m512i) -> __m512i {
    unsafe { _mm512_sub_epi64(a, b) }
}

#[inline(always)]
fn shl<const K: u32>(a: __m512i) -> __m512i {
    unsafe { _mm512_slli_epi64::<K>(a) }
}

/// `acc + lo52(a·b)`.
#[inline(always)]
fn madd_lo(acc: __m512i, a: __m512i, b: __m512i) -> __m512i {
    unsafe { _mm512_madd52lo_epu64(acc, a, b) }
}

/// `acc + hi52(a·b)` (bits 52 to 103 of the product).
#[inline(always)]
fn madd_hi(acc: __m512i, a: __m512i, b: __m512i) -> __m512i {
    unsafe { _mm512_madd52hi_epu64(acc, a, b) }
}

/// One parallel carry pass: limbs below 2^60 become tight (the carries
/// are below 2^9, so `19·c4` is one 52-bit multiply-add).
#[inline(always)]
fn weak_reduce(l: [__m512i; 5]) -> Ifma {
    let mask = splat64(MASK51);
    let mut carry = l;
    let mut low = l;
    for i in 0..5 {
        carry[i] = unsafe { _mm512_srli_epi64::<51>(l[i]) };
        low[i] = unsafe { _mm512_and_si512(l[i], mask) };
    }
    Ifma([
        madd_lo(low[0], carry[4], splat64(19)),
        add64(low[1], carry[0]),
        add64(low[2], carry[1]),
        add64(low[3], carry[2]),
        add64(low[4], carry[3]),
    ])
}

/// `19·x` for `x` below 2^59, as `16x + 2x + x`.
#[inline(always)]
fn times19(x: __m512i) -> __m512i {
    add64(add64(shl::<4>(x), shl::<1>(x)), x)
}

/// Folds the ten columns of a product (column `k` of weight 2^(51k),
/// each below 2^56) into five limbs with 2^255 = 19, then carries.
#[inline(always)]
fn fold(z: [__m512i; 10]) -> Ifma {
    let mut limbs = [z[0]; 5];
    for k in 0..5 {
        limbs[k] = add64(z[k], times19(z[k + 5]));
    }
    weak_reduce(limbs)
}

/// Combines the low and high halves of the partial products: `lo[k]`
/// sums low halves of weight 2^(51k), `hi[k]` high halves of weight
/// 2^(51k + 52) = 2·2^(51(k+1)).
#[inline(always)]
fn columns(lo: [__m512i; 9], hi: [__m512i; 9]) -> [__m512i; 10] {
    let mut z = [lo[0]; 10];
    for k in 1..9 {
        z[k] = add64(lo[k], shl::<1>(hi[k - 1]));
    }
    z[9] = shl::<1>(hi[8]);
    z
}

/// Limb by limb `f(a[i], b[i])`, without a closure the compiler might
/// keep out of line (and so outside the target-feature function).
#[inline(always)]
fn limbwise(
    a: &[__m512i; 5],
    b: &[__m512i; 5],
    f: fn(__m512i, __m512i) -> __m512i,
) -> [__m512i; 5] {
    [
        f(a[0], b[0]),
        f(a[1], b[1]),
        f(a[2], b[2]),
        f(a[3], b[3]),
        f(a[4], b[4]),
    ]
}

impl Lanes for Ifma {
    const N: usize = 8;
    type Mask = __mmask8;

    #[inline(always)]
    fn splat(value: &Limbs) -> Self {
        let mut limbs = [splat64(0); 5];
        for i in 0..5 {
            limbs[i] = splat64(value[i]);
        }
        Self(limbs)
    }

    #[inline(always)]
    fn from_lanes(values: &PerLane<Limbs>) -> Self {
        let mut limbs = [splat64(0); 5];
        for i in 0..5 {
            let mut limb = [0u64; 8];
            for lane in 0..8 {
                limb[lane] = values[lane][i];
            }
            limbs[i] = unsafe { _mm512_loadu_si512(limb.as_ptr().cast()) };
        }
        Self(limbs)
    }

    #[inline(always)]
    fn to_lanes(self) -> PerLane<Limbs> {
        let mut lanes = [[0u64; 5]; 8];
        for i in 0..5 {
            let mut limb = [0u64; 8];
            unsafe { _mm512_storeu_si512(limb.as_mut_ptr().cast(), self.0[i]) };
            for lane in 0..8 {
                lanes[lane][i] = limb[lane];
            }
        }
        lanes
    }

    #[inline(always)]
    fn mask(bits: &PerLane<u64>) -> __mmask8 {
        bits.iter()
            .enumerate()
            .fold(0, |m, (lane, b)| m | ((*b as u8 & 1) << lane))
    }

    #[inline(always)]
    fn add(self, other: Self) -> Self {
        // Below 2^52 + 2^14 per limb.
        weak_reduce(limbwise(&self.0, &other.0, add64))
    }

    #[inline(always)]
    fn sub(self, other: Self) -> Self {
        // 2p's limbs exceed any tight limb: no lane goes negative, and
        // the sum stays below 2^53.
        let two_p = Self::splat(&TWO_P).0;
        weak_reduce(limbwise(&limbwise(&self.0, &two_p, add64), &other.0, sub64))
    }

    #[inline(always)]
    fn neg(self) -> Self {
        weak_reduce(limbwise(&Self::splat(&TWO_P).0, &self.0, sub64))
    }

    /// Schoolbook 5×5 limbs. Tight inputs are below 2^52, as `vpmadd52*`
    /// needs; each low half is below 2^52 and each high half below 2^50,
    /// so every column stays below 2^55 and each folded limb below 2^60.
    #[inline(always)]
    fn mul(self, other: Self) -> Self {
        let (a, b) = (self.0, other.0);
        let zero = splat64(0);
        let mut lo = [zero; 9];
        let mut hi = [zero; 9];
        for i in 0..5 {
            for j in 0..5 {
                lo[i + j] = madd_lo(lo[i + j], a[i], b[j]);
                hi[i + j] = madd_hi(hi[i + j], a[i], b[j]);
            }
        }
        fold(columns(lo, hi))
    }

    /// As [`Self::mul`] with the ten cross products computed once and
    /// doubled: 15 products instead of 25.
    #[inline(always)]
    fn square(self) -> Self {
        let a = self.0;
        let zero = splat64(0);
        let mut lo = [zero; 9];
        let mut hi = [zero; 9];
        for i in 0..5 {
            for j in i + 1..5 {
                lo[i + j] = madd_lo(lo[i + j], a[i], a[j]);
                hi[i + j] = madd_hi(hi[i + j], a[i], a[j]);
            }
        }
        for k in 0..9 {
            lo[k] = shl::<1>(lo[k]);
            hi[k] = shl::<1>(hi[k]);
        }
        for i in 0..5 {
            lo[2 * i] = madd_lo(lo[2 * i], a[i], a[i]);
            hi[2 * i] = madd_hi(hi[2 * i], a[i], a[i]);
        }
        fold(columns(lo, hi))
    }

    #[inline(always)]
    fn select(mask: __mmask8, a: Self, b: Self) -> Self {
        let mut limbs = b.0;
        for i in 0..5 {
            limbs[i] = unsafe { _mm512_mask_blend_epi64(mask, b.0[i], a.0[i]) };
        }
        Self(limbs)
    }
}
