//! RNS basis conversion with scaling, `round(a/b · x) mod q_j` for each
//! coefficient `x` given by its residues in a source basis: the scale-down
//! of a ciphertext product by `t/Q` and the lift of a ciphertext into the
//! extended product basis (`a/b = 1`). These were the hottest kernels of
//! the sender's work (a quarter to a third of a query's time went to
//! fhe-math's `RnsScaler::scale`).
//!
//! Written by hand because fhe-math's version does every multiply-add in
//! generic 256-bit arithmetic (`ethnum`'s full 256 x 256 products), reads the
//! residues of one coefficient with a stride of `n` words, and compares two
//! whole contexts (NTT tables included) before each call. Here the same
//! algorithm (Remark 3.2 of eprint 2021/204, as fhe-math implements it)
//! runs with the same constants, so results are bit-identical (tested
//! against fhe-math), but the products are 64 x 128-bit and the residues
//! are read row by row.

use fhe_math::rns::RnsContext;
use fhe_math::rq::Poly;
use fhe_math::zq::Modulus;
use num_bigint::BigUint;

use crate::error::{backend, HeError};

/// A 256-bit two's-complement accumulator as `(low, high)` 128-bit halves.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
struct U256(u128, u128);

impl U256 {
    /// `a · b` for a 64-bit `a` and a 128-bit `b` (at most 192 bits).
    #[inline(always)]
    fn mul_64_128(a: u64, b: u128) -> Self {
        let lo = u128::from(a) * (b as u64 as u128);
        let hi = u128::from(a) * (b >> 64);
        let (low, carry) = lo.overflowing_add(hi << 64);
        U256(low, (hi >> 64) + u128::from(carry))
    }

    /// `a · b` for 128-bit `a` and `b`.
    #[inline(always)]
    fn mul_128(a: u128, b: u128) -> Self {
        let (a0, a1) = (a as u64, (a >> 64) as u64);
        let lo = Self::mul_64_128(a0, b);
        let hi = Self::mul_64_128(a1, b);
        // lo + hi · 2^64
        lo.add(U256(hi.0 << 64, (hi.0 >> 64) | (hi.1 << 64)))
    }

    #[inline(always)]
    fn add(self, o: Self) -> Self {
        let (low, carry) = self.0.overflowing_add(o.0);
        U256(
            low,
            self.1.wrapping_add(o.1).wrapping_add(u128::from(carry)),
        )
    }

    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        let (low, borrow) = self.0.overflowing_sub(o.0);
        U256(
            low,
            self.1.wrapping_sub(o.1).wrapping_sub(u128::from(borrow)),
        )
    }

    /// The low 128 bits of `self >> s`, for `0 < s < 128`.
    #[inline(always)]
    fn shr_low(self, s: u32) -> u128 {
        (self.0 >> s) | (self.1 << (128 - s))
    }

    fn not(self) -> Self {
        U256(!self.0, !self.1)
    }
}

/// One rational constant `c = numerator·input/denominator`, split as in
/// fhe-math: `gamma = round(c)` (projected on each target modulus) and the
/// fractional rest scaled by `2^127` as a signed 128-bit value.
struct Projection {
    gamma: Vec<u64>,
    theta: u128,
    negative: bool,
}

impl Projection {
    fn new(
        to: &RnsContext,
        input: &BigUint,
        numerator: &BigUint,
        denominator: &BigUint,
        round_up: bool,
    ) -> Self {
        let one = BigUint::from(1u32);
        let gamma = (numerator * input + (denominator >> 1)) / denominator;
        let mut theta = (numerator * input) % denominator;
        let mut negative = false;
        if denominator > &one {
            let half = denominator >> 1;
            let odd = denominator % 2u32 == one;
            if (odd && theta > half) || (!odd && theta >= half) {
                negative = true;
                theta = denominator - theta;
            }
        }
        let shifted = theta << 127u32;
        theta = match (round_up, negative) {
            (true, true) | (false, false) => shifted / denominator,
            (true, false) | (false, true) => (shifted + denominator - &one) / denominator,
        };
        Self {
            gamma: to.project(&gamma),
            theta: low_u128(&theta),
            negative,
        }
    }
}

/// The rows (one per modulus) of a polynomial's coefficients.
pub(crate) fn rows(p: &Poly) -> Result<Vec<&[u64]>, HeError> {
    let view = p.coefficients();
    let n = view.ncols().max(1);
    let flat = view.to_slice().ok_or(HeError::ParamsMismatch)?;
    Ok(flat.chunks_exact(n).collect())
}

/// The value of a `BigUint` below `2^128`.
fn low_u128(x: &BigUint) -> u128 {
    let digits = x.to_u64_digits();
    let word = |i: usize| u128::from(digits.get(i).copied().unwrap_or(0));
    word(0) | (word(1) << 64)
}

/// Converts coefficients from a basis `from` to `to` scaled by
/// `numerator / denominator` (rounded), exactly as fhe-math's `RnsScaler`
/// with that factor does.
pub(crate) struct RnsScaler {
    to: Vec<Modulus>,
    /// The factor is 1: no fractional `omega` terms.
    is_one: bool,
    /// Rounded `garner_i · 2^shift / Q_from`, per source modulus.
    theta_garner: Vec<u128>,
    shift: u32,
    /// `round(t·Q_from/Q_to) mod q_j` and its Shoup form, per target modulus.
    gamma: Vec<(u64, u64)>,
    theta_gamma: u128,
    theta_gamma_negative: bool,
    /// `round(t·garner_i/Q_to) mod q_j` and its Shoup form, `[j][i]`.
    omega: Vec<Vec<(u64, u64)>>,
    /// Signed fractional parts of the `omega`s, per source modulus.
    theta_omega: Vec<(u128, bool)>,
}

impl RnsScaler {
    pub(crate) fn new(
        from: &[u64],
        to: &[u64],
        numerator: &BigUint,
        denominator: &BigUint,
    ) -> Result<Self, HeError> {
        let from_rns = RnsContext::new(from).map_err(backend)?;
        let to_rns = RnsContext::new(to).map_err(backend)?;
        let to: Vec<Modulus> = to
            .iter()
            .map(|&q| Modulus::new(q).map_err(backend))
            .collect::<Result<_, _>>()?;
        let product = from_rns.modulus();
        let garner: Vec<&BigUint> = (0..from.len())
            .map(|i| from_rns.get_garner(i).ok_or(HeError::ParamsMismatch))
            .collect::<Result<_, _>>()?;

        let g = Projection::new(&to_rns, product, numerator, denominator, false);
        let gamma = to
            .iter()
            .zip(&g.gamma)
            .map(|(q, &w)| (w, q.shoup(w)))
            .collect();
        let omegas: Vec<Projection> = garner
            .iter()
            .map(|gi| Projection::new(&to_rns, gi, numerator, denominator, true))
            .collect();
        let omega = to
            .iter()
            .enumerate()
            .map(|(j, q)| {
                omegas
                    .iter()
                    .map(|o| {
                        let w = q.reduce(o.gamma[j]);
                        (w, q.shoup(w))
                    })
                    .collect()
            })
            .collect();
        // The shift keeps the sum of the scaled thetas within 192 bits.
        let len = from.len() as u128;
        let shift = from
            .iter()
            .map(|&q| 191 - (u128::from(q) * len).next_power_of_two().ilog2())
            .min()
            .unwrap_or(127)
            .min(127);
        let theta_garner = garner
            .iter()
            .map(|gi| low_u128(&(((*gi << shift) + (product >> 1u32)) / product)))
            .collect();
        Ok(Self {
            to,
            is_one: numerator == denominator,
            theta_garner,
            shift,
            gamma,
            theta_gamma: g.theta,
            theta_gamma_negative: g.negative,
            omega,
            theta_omega: omegas.iter().map(|o| (o.theta, o.negative)).collect(),
        })
    }

    /// Writes the scaled coefficients to `out` (one row of `n` per target
    /// modulus) from `rests` (one row of `n` per source modulus, power
    /// basis).
    pub(crate) fn scale_into(&self, rests: &[&[u64]], out: &mut [u64]) -> Result<(), HeError> {
        let n = rests.first().map_or(0, |row| row.len());
        if rests.len() != self.theta_garner.len()
            || rests.iter().any(|row| row.len() != n)
            || out.len() != self.to.len() * n
        {
            return Err(HeError::ParamsMismatch);
        }
        let mut r = vec![0u64; rests.len()];
        for c in 0..n {
            for (ri, row) in r.iter_mut().zip(rests) {
                *ri = row[c];
            }
            let (v, w, w_negative) = self.rounding(&r);
            for (j, q) in self.to.iter().enumerate() {
                let (gamma, gamma_shoup) = self.gamma[j];
                let v_gamma = q.lazy_mul_shoup(q.reduce_u128(v), gamma, gamma_shoup);
                let mut y = u128::from(2 * **q - v_gamma);
                let wj = q.lazy_reduce_u128(w);
                y += u128::from(if w_negative { 2 * **q - wj } else { wj });
                for (&ri, &(o, o_shoup)) in r.iter().zip(&self.omega[j]) {
                    y += u128::from(q.lazy_mul_shoup(ri, o, o_shoup));
                }
                out[j * n + c] = q.reduce_u128(y);
            }
        }
        Ok(())
    }

    /// The integer corrections of one coefficient with residues `r`: `v`
    /// (how many times the source modulus wraps) and the signed rounding
    /// term `w`, as fhe-math computes them.
    #[inline(always)]
    fn rounding(&self, r: &[u64]) -> (u128, u128, bool) {
        let mut garner = U256::default();
        for (&ri, &theta) in r.iter().zip(&self.theta_garner) {
            garner = garner.add(U256::mul_64_128(ri, theta));
        }
        let v = garner.shr_low(self.shift - 1).div_ceil(2);
        if self.is_one {
            return (v, 0, false);
        }

        let mut omega = U256::default();
        for (&ri, &(theta, negative)) in r.iter().zip(&self.theta_omega) {
            let term = U256::mul_64_128(ri, theta);
            omega = if negative {
                omega.sub(term)
            } else {
                omega.add(term)
            };
        }
        let v_theta = U256::mul_128(v, self.theta_gamma);
        omega = match self.theta_gamma_negative {
            true => omega.add(v_theta),
            false => omega.sub(v_theta),
        };
        // Bits 191 and up set: negative (the sum stays far below 2^255).
        let negative = (omega.1 >> 63) != 0;
        let w = match negative {
            true => omega.not().shr_low(126).div_ceil(2),
            false => omega.shr_low(126).div_ceil(2),
        };
        (v, w, negative)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use fhe_math::rns::ScalingFactor;
    use fhe_math::rq::scaler::Scaler;
    use fhe_math::rq::{traits::TryConvertFrom, Context, Representation};
    use rand09::Rng;

    use super::*;
    use crate::params::HeParams;
    use crate::prepared::extended_moduli;

    /// Bit-identical to fhe-math's scaler on random coefficients and on the
    /// extremes, for the shapes psikit uses (2 to 5 query moduli, t from 16
    /// to 24 bits): down by `t/Q` from the extended basis, and the lift from
    /// `Q` to the extra primes (factor 1).
    #[test]
    fn matches_fhe_math_exactly() {
        let shapes: [(usize, u64, &[usize]); 4] = [
            (4096, 40961, &[40, 32, 32]),
            (8192, 65537, &[56, 48, 48]),
            (8192, 8273921, &[58, 57, 57, 42]),
            (16384, 16580609, &[60, 60, 60, 60, 60, 44]),
        ];
        let mut rng = rand09::rng();
        for (n, t, bits) in shapes {
            let params = HeParams::new(n, t, bits).unwrap();
            let base = params.context_at(params.query_level()).unwrap();
            let wide_moduli = extended_moduli(&params, base.moduli()).unwrap();
            let wide = Arc::new(Context::new(&wide_moduli, n).unwrap());
            let extra = Arc::new(Context::new(&wide_moduli[base.moduli().len()..], n).unwrap());
            let theirs_down = {
                let t = RnsContext::new(&[t]).unwrap();
                let factor = ScalingFactor::new(t.modulus(), base.modulus());
                Scaler::new(&wide, base, factor).unwrap()
            };
            let ours_down =
                RnsScaler::new(&wide_moduli, base.moduli(), &t.into(), base.modulus()).unwrap();
            let theirs_up = Scaler::new(base, &extra, ScalingFactor::one()).unwrap();
            let one = BigUint::from(1u32);
            let ours_up = RnsScaler::new(base.moduli(), extra.moduli(), &one, &one).unwrap();
            let cases = [
                (&wide, base, &theirs_down, &ours_down),
                (base, &extra, &theirs_up, &ours_up),
            ];
            for (round, (from, to, theirs, ours)) in (0..8).zip(cases.iter().cycle()) {
                let coefficients: Vec<u64> = from
                    .moduli()
                    .iter()
                    .flat_map(|&q| {
                        let mut row: Vec<u64> = (0..n).map(|_| rng.random_range(0..q)).collect();
                        if round < 2 {
                            // Extremes: 0, 1, q - 1 and q/2 in every residue.
                            row[..4].copy_from_slice(&[0, 1, q - 1, q / 2]);
                        }
                        row
                    })
                    .collect();
                let p =
                    Poly::try_convert_from(coefficients, from, false, Representation::PowerBasis)
                        .unwrap();
                let want = p.scale(theirs).unwrap();
                let mut got = vec![0u64; to.moduli().len() * n];
                ours.scale_into(&rows(&p).unwrap(), &mut got).unwrap();
                assert_eq!(
                    got,
                    want.coefficients().iter().copied().collect::<Vec<_>>(),
                    "n {n}, t {t}"
                );
            }
        }
    }

    #[test]
    fn wide_arithmetic() {
        let a = u128::MAX - 5;
        let b = (1u128 << 100) + 12345;
        let p = U256::mul_128(a, b);
        // (2^128 - 6)(2^100 + 12345) = 2^228 + 12345·2^128 - 6·2^100 - 74070
        let want = U256(0, (1u128 << 100) + 12345)
            .sub(U256(6u128 << 100, 0))
            .sub(U256(74070, 0));
        assert_eq!(p, want);
        assert_eq!(
            U256::mul_64_128(u64::MAX, u128::MAX).1,
            u128::from(u64::MAX) - 1
        );
        assert_eq!(U256(0, 1).shr_low(1), 1u128 << 127);
        assert_eq!(U256(0, 0).sub(U256(1, 0)), U256(u128::MAX, u128::MAX));
    }
}
