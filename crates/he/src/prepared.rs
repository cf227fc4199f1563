//! Ciphertext products with the operands' basis extension done once.
//!
//! BFV multiplies in a larger RNS basis `Q ∪ P` so the tensor product does
//! not wrap, then scales by `t/Q` back to `Q`. fhe's `Multiplicator` extends
//! both operands on every call: per operand and part an inverse NTT over
//! `Q`, a basis conversion and forward NTTs over `P`. In the PSI protocol
//! every power is a factor of several products, so [`Prepared`] keeps that
//! extended NTT form and a product only pays for the tensor and the
//! scale-down.
//!
//! [`ProductBasis`] rebuilds exactly what `Multiplicator::default` uses (same
//! extended primes, same scalers, all public fhe-math pieces), so a prepared
//! product followed by relinearization gives the very ciphertext
//! `mul_relin` gives.

use std::fmt;
use std::sync::Arc;

use fhe_math::rq::{dot_product, traits::TryConvertFrom, Context, Poly, Representation};
use fhe_math::zq::primes::generate_prime;

use crate::error::{backend, HeError};
use crate::params::HeParams;
use crate::scale::{rows, RnsScaler};
use num_bigint::BigUint;

/// The extended basis of ct×ct products at the query level and the scalers
/// into and out of it.
pub(crate) struct ProductBasis {
    base: Arc<Context>,
    /// The extra primes `P` alone (their NTT for the lifted rows).
    extra: Arc<Context>,
    /// `Q ∪ P`.
    wide: Arc<Context>,
    /// `Q` to `P`, factor 1.
    up: RnsScaler,
    /// `Q ∪ P` to `Q`, factor `t/Q`.
    down: RnsScaler,
    degree: usize,
}

impl ProductBasis {
    /// Same construction as fhe's `Multiplicator::default`: the query-level
    /// moduli followed by `ceil((bits(Q) + 60) / 62)` of the largest 62-bit
    /// NTT primes, which leaves room for the tensor product's
    /// `n·Q²/4`-sized coefficients.
    pub(crate) fn new(params: &HeParams) -> Result<Self, HeError> {
        let base = params.context_at(params.query_level())?;
        let basis = extended_moduli(params, base.moduli())?;
        let context = |moduli: &[u64]| {
            Context::new(moduli, params.degree())
                .map(Arc::new)
                .map_err(backend)
        };
        let extra_moduli = &basis[base.moduli().len()..];
        let one = BigUint::from(1u32);
        let t = BigUint::from(params.plain_modulus());
        Ok(Self {
            base: base.clone(),
            extra: context(extra_moduli)?,
            wide: context(&basis)?,
            up: RnsScaler::new(base.moduli(), extra_moduli, &one, &one)?,
            down: RnsScaler::new(&basis, base.moduli(), &t, base.modulus())?,
            degree: params.degree(),
        })
    }

    /// Lifts a query-level NTT polynomial to the extended basis (NTT form):
    /// its rows over `Q` stay as they are, the rows over `P` are converted
    /// from its power basis (what fhe-math's extending scaler does).
    pub(crate) fn extend(&self, part: &Poly) -> Result<Poly, HeError> {
        let mut power = part.clone();
        power.change_representation(Representation::PowerBasis);
        let lifted = self.convert(&self.up, &power, &self.extra)?;
        let mut all = Vec::with_capacity(self.wide.moduli().len() * self.degree);
        all.extend(part.coefficients().iter());
        all.extend(lifted.coefficients().iter());
        Poly::try_convert_from(all, &self.wide, false, Representation::Ntt).map_err(backend)
    }

    /// The tensor product of two extended ciphertexts, scaled by `t/Q` and
    /// rounded back to the query level: 3 parts in NTT form. The cross term
    /// is computed as `a0·b1 + a1·b0`, like fhe, so results match exactly.
    pub(crate) fn tensor(&self, a: &[Poly; 2], b: &[Poly; 2]) -> Result<Vec<Poly>, HeError> {
        let c0 = &a[0] * &b[0];
        let mut c1 = &a[0] * &b[1];
        c1 += &(&a[1] * &b[0]);
        let c2 = &a[1] * &b[1];
        [c0, c1, c2]
            .into_iter()
            .map(|c| self.scale_down(c))
            .collect()
    }

    /// `Σ a_i ⊗ b_i` scaled by `t/Q` once: 3 parts in NTT form. The
    /// tensors are summed in the extended basis with fhe's fused dot
    /// product, so each product costs only its pointwise multiplications and
    /// the sum pays the three scale-downs once. One rounding instead of one
    /// per product also leaves slightly less noise than summing scaled
    /// products.
    ///
    /// The extended basis `Q·P` exceeds `Q²·2^51` ([`extended_moduli`] adds
    /// primes above `2^61` until their bits reach `bits(Q) + 60`), and a
    /// tensor coefficient is below `n·Q²/2`, so sums of fewer than
    /// `2^50 / n` products (checked) cannot wrap.
    pub(crate) fn tensor_sum(
        &self,
        pairs: &[(&[Poly; 2], &[Poly; 2])],
    ) -> Result<Vec<Poly>, HeError> {
        if pairs.is_empty() || pairs.len() as u64 >= (1u64 << 50) / self.degree as u64 {
            return Err(HeError::Backend(format!(
                "a sum of {} products is outside the supported range",
                pairs.len()
            )));
        }
        let part = |i: usize| pairs.iter().map(move |(a, _)| &a[i]);
        let other = |j: usize| pairs.iter().map(move |(_, b)| &b[j]);
        let c0 = dot_product(part(0), other(0)).map_err(backend)?;
        let c1 = dot_product(part(0).chain(part(1)), other(1).chain(other(0))).map_err(backend)?;
        let c2 = dot_product(part(1), other(1)).map_err(backend)?;
        [c0, c1, c2]
            .into_iter()
            .map(|c| self.scale_down(c))
            .collect()
    }

    fn scale_down(&self, mut wide: Poly) -> Result<Poly, HeError> {
        wide.change_representation(Representation::PowerBasis);
        self.convert(&self.down, &wide, &self.base)
    }

    /// `scaler` applied to `power` (power basis), in NTT form over `to`.
    fn convert(
        &self,
        scaler: &RnsScaler,
        power: &Poly,
        to: &Arc<Context>,
    ) -> Result<Poly, HeError> {
        let mut out = vec![0u64; to.moduli().len() * self.degree];
        scaler.scale_into(&rows(power)?, &mut out)?;
        let mut out =
            Poly::try_convert_from(out, to, false, Representation::PowerBasis).map_err(backend)?;
        out.change_representation(Representation::Ntt);
        Ok(out)
    }
}

/// `base` followed by the largest 62-bit primes `= 1 mod 2n` not in it, as
/// many as fhe's default multiplication strategy takes.
pub(crate) fn extended_moduli(params: &HeParams, base: &[u64]) -> Result<Vec<u64>, HeError> {
    let bits: usize = params.bfv().moduli_sizes()[..base.len()].iter().sum();
    let extra = (bits + 60).div_ceil(62);
    let two_n = 2 * params.degree() as u64;
    let mut basis = base.to_vec();
    let mut bound = 1u64 << 62;
    while basis.len() < base.len() + extra {
        bound = generate_prime(62, two_n, bound).ok_or(HeError::NoPrime {
            bits: 62,
            modulus: two_n,
        })?;
        if !basis.contains(&bound) {
            basis.push(bound);
        }
    }
    Ok(basis)
}

/// A query-level ciphertext lifted once into the extended product basis, for
/// [`crate::eval::Evaluator::mul_prepared`].
///
/// Worth it for a factor of two or more products: preparing one ciphertext
/// is half the extension work of a plain product (which extends both
/// operands), and each prepared product skips all of it.
/// It takes `(k + e)/k` times the memory of the ciphertext (`e` extra 62-bit
/// primes, 2 or 3 for APSI's sets), so drop it once its products are done.
#[derive(Clone)]
pub struct Prepared {
    pub(crate) params: HeParams,
    pub(crate) parts: [Poly; 2],
}

impl Prepared {
    /// The parameters of the ciphertext this was prepared from.
    pub fn params(&self) -> &HeParams {
        &self.params
    }

    /// Bytes of coefficient storage.
    pub fn byte_size(&self) -> usize {
        let words: usize = self.parts.iter().map(|p| p.coefficients().len()).sum();
        words * std::mem::size_of::<u64>()
    }
}

impl fmt::Debug for Prepared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Prepared")
            .field("bytes", &self.byte_size())
            .finish_non_exhaustive()
    }
}
