//! Word decomposition of tags into slot vectors (Fig. 6, steps 2(a)-(c) and
//! 3(a)-(c)), and the receiver's masks.
//!
//! Tags are private to each party, so the decomposition runs in time
//! independent of their values: a division by the public base `w` is a
//! long division over the tag's 32-bit limbs (as many as `ℓ` needs, the
//! same for every tag), each step a multiplication by a precomputed
//! reciprocal and one correction by an arithmetic mask (no comparison, no
//! branch), and every reduction mod `p` is a constant-time select.

use rand::rngs::OsRng;
use rand::RngCore;
use subtle::{ConditionallySelectable, ConstantTimeEq, ConstantTimeGreater};

use super::params::EpcParams;
use crate::error::Error;

/// Division by the word base in constant time.
#[derive(Clone, Copy)]
struct Divider {
    w: u64,
    /// `floor(2^64 / w)`: `x·recip >> 64` is `floor(x / w)` or one less.
    recip: u64,
}

impl Divider {
    fn new(w: u64) -> Self {
        // w ≥ 2, so the quotient fits in 64 bits.
        let recip = (u128::from(u64::MAX) + 1) / u128::from(w);
        Self {
            w,
            recip: recip as u64,
        }
    }

    /// `(x / w, x % w)`.
    fn div_rem(self, x: u64) -> (u64, u64) {
        let q = ((u128::from(x) * u128::from(self.recip)) >> 64) as u64;
        let r = x - q * self.w;
        // r < 2w < 2^63: r - w borrows (top bit set) exactly when r < w, so
        // `keep` is all ones when r < w and zero when one more w fits.
        let keep = (r.wrapping_sub(self.w) >> 63).wrapping_neg();
        let over = !keep;
        (q + (over & 1), r - (over & self.w))
    }

    /// `(x / w, x % w)` for `x` below `2^(32·limbs)`: long division, one
    /// limb at a time. Each step divides `r·2^32 + limb < w·2^32`, which
    /// fits 64 bits because `w < 2^32` ([`decompose`] checks it).
    fn div_rem_wide(self, x: u128, limbs: u32) -> (u128, u64) {
        let (mut q, mut r) = (0u128, 0u64);
        for i in (0..limbs).rev() {
            let limb = (x >> (32 * i)) as u64 & 0xffff_ffff;
            let (digit, rest) = self.div_rem(r << 32 | limb);
            q |= u128::from(digit) << (32 * i);
            r = rest;
        }
        (q, r)
    }
}

/// The `u` digit vectors of a batch of tags and the vector of their sums
/// of squares, padded to `n` slots with the digits of `pad`.
pub(super) struct DigitSlots {
    /// `digits[i][j]`: digit `i` of tag `j`.
    pub(super) digits: Vec<Vec<u64>>,
    /// `Σ_i digits[i][j]²`, below `p` by the choice of `w`.
    pub(super) squares: Vec<u64>,
}

/// Decomposes up to `n` tags (each below `2^ℓ`), padding with `pad`.
pub(super) fn decompose(params: &EpcParams, tags: &[u128], pad: u128) -> Result<DigitSlots, Error> {
    let n = params.batch_slots();
    if tags.is_empty() || tags.len() > n {
        return Err(Error::Misuse("an EPC batch holds 1 to n tags"));
    }
    let ell = params.ell();
    if tags.iter().chain([&pad]).any(|&v| v >> ell != 0) {
        return Err(Error::Misuse("an EPC tag is not below 2^ℓ"));
    }
    if params.word_base() >> 32 != 0 {
        return Err(Error::Internal("EPC word bases are below 2^32"));
    }
    let (u, limbs) = (params.digits(), ell.div_ceil(32));
    let divider = Divider::new(params.word_base());
    let mut digits = vec![vec![0u64; n]; u];
    let mut squares = vec![0u64; n];
    let padded = tags.iter().copied().chain(std::iter::repeat(pad));
    for (j, mut v) in padded.take(n).enumerate() {
        let mut sum = 0u64;
        for row in digits.iter_mut() {
            let (q, r) = divider.div_rem_wide(v, limbs);
            row[j] = r;
            sum += r * r;
            v = q;
        }
        squares[j] = sum;
    }
    Ok(DigitSlots { digits, squares })
}

/// `(p - 2·d) mod p` for a digit `d < w` (so `2d < p`), in constant time.
pub(super) fn minus_twice(d: u64, p: u64) -> u64 {
    let x = p - 2 * d;
    u64::conditional_select(&x, &0, x.ct_eq(&p))
}

/// `(a + b) mod p` for `a, b < p`, in constant time.
pub(super) fn add_mod(a: u64, b: u64, p: u64) -> u64 {
    let s = a + b;
    let reduce = !p.ct_gt(&s);
    s - u64::conditional_select(&0, &p, reduce)
}

/// `n` values uniform in `[0, p)` from the OS CSPRNG: rejection sampling
/// of `bits(p)`-bit values, so no value is favoured and only the number of
/// rejections (independent of the values kept) shows in the running time.
pub(super) fn uniform_mod(p: u64, n: usize) -> Result<Vec<u64>, Error> {
    let bits = 64 - (p - 1).leading_zeros();
    let mask = (1u64 << bits) - 1;
    let mut out = Vec::with_capacity(n);
    // p > 2^(bits-1), so more than half of the draws are kept.
    let mut buf = vec![0u8; 8 * n];
    while out.len() < n {
        OsRng
            .try_fill_bytes(&mut buf)
            .map_err(|e| Error::task("the OS random generator", e))?;
        for chunk in buf.chunks_exact(8) {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            let x = u64::from_le_bytes(word) & mask;
            if x < p && out.len() < n {
                out.push(x);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn divider_is_exact() {
        for w in [2u64, 3, 62, 65, 145, 772, 1672, 7327] {
            let d = Divider::new(w);
            for x in [
                0,
                1,
                w - 1,
                w,
                w + 1,
                u64::MAX,
                u64::MAX - 1,
                1 << 63,
                12345678901234,
            ] {
                assert_eq!(d.div_rem(x), (x / w, x % w), "{x} / {w}");
            }
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            for _ in 0..10_000 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                assert_eq!(d.div_rem(x), (x / w, x % w));
            }
        }
    }

    #[test]
    fn long_division_is_exact_for_every_tag_length() {
        for w in [2u64, 3, 62, 772, 7327, (1 << 16) + 1] {
            let d = Divider::new(w);
            let mut x = 0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c834u128;
            for ell in [1u32, 31, 32, 33, 61, 64, 65, 80, 96, 127] {
                let top = (1u128 << ell) - 1;
                for _ in 0..2_000 {
                    x = x.wrapping_mul(0x2360_ed05_1fc6_5da4_4385_df64_9fcc_f645) + 1;
                    for v in [x & top, top, 0] {
                        let (q, r) = d.div_rem_wide(v, ell.div_ceil(32));
                        assert_eq!((q, u128::from(r)), (v / u128::from(w), v % u128::from(w)));
                    }
                }
            }
        }
    }

    #[test]
    fn masks_reduce() {
        let p = 40961;
        assert_eq!(minus_twice(0, p), 0);
        assert_eq!(minus_twice(1, p), p - 2);
        assert_eq!(add_mod(p - 1, 1, p), 0);
        assert_eq!(add_mod(p - 1, p - 1, p), p - 2);
        assert_eq!(add_mod(3, 4, p), 7);
        let r = uniform_mod(p, 5000).unwrap();
        assert_eq!(r.len(), 5000);
        assert!(r.iter().all(|&x| x < p));
    }
}
