//! Server-side homomorphic evaluation.
//!
//! Every method checks parameters, levels and part counts first: fhe's
//! operators `assert!` on mismatches and its dot product does not check
//! levels at all, and the inputs here come from a remote client.

use fhe::bfv::{Ciphertext as FheCiphertext, Multiplicator};
use fhe_math::rq::{dot_product, traits::TryConvertFrom, Poly, Representation};

use crate::error::backend;
use crate::{Ciphertext, HeError, HeParams, PlainPoly, RelinKey};

/// Multiplies, relinearizes, sums and mod-switches ciphertexts of one client.
pub struct Evaluator {
    params: HeParams,
    relin: RelinKey,
    mul: Multiplicator,
    one: Ciphertext,
}

impl Evaluator {
    /// Prepares evaluation with the client's relinearization key.
    pub fn new(params: &HeParams, relin: &RelinKey) -> Result<Self, HeError> {
        if !relin.params.same(params) {
            return Err(HeError::ParamsMismatch);
        }
        let mul = Multiplicator::default(&relin.inner).map_err(backend)?;
        Ok(Self {
            params: params.clone(),
            relin: relin.clone(),
            mul,
            one: trivial_ones(params)?,
        })
    }

    /// `a · b`, relinearized back to 2 parts. Both at the query level.
    pub fn mul_relin(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext, HeError> {
        self.check(a, "mul_relin", 2)?;
        self.check(b, "mul_relin", 2)?;
        let product = self.mul.multiply(a.inner(), b.inner()).map_err(backend)?;
        Ok(Ciphertext::new(&self.params, product))
    }

    /// `a · b` left at 3 parts. Sums of such products need only one
    /// [`Evaluator::relin`] (Paterson-Stockmeyer's outer sum).
    pub fn mul_lazy(&self, a: &Ciphertext, b: &Ciphertext) -> Result<Ciphertext, HeError> {
        self.check(a, "mul_lazy", 2)?;
        self.check(b, "mul_lazy", 2)?;
        Ok(Ciphertext::new(&self.params, a.inner() * b.inner()))
    }

    /// Relinearizes a 3-part ciphertext at the query level to 2 parts.
    pub fn relin(&self, ct: &mut Ciphertext) -> Result<(), HeError> {
        self.check(ct, "relin", 3)?;
        self.relin
            .inner
            .relinearizes(ct.inner_mut())
            .map_err(backend)
    }

    /// `acc += ct`, both at the query level with the same number of parts.
    pub fn add_assign(&self, acc: &mut Ciphertext, ct: &Ciphertext) -> Result<(), HeError> {
        self.check(acc, "add", acc.parts())?;
        self.check(ct, "add", acc.parts())?;
        *acc.inner_mut() += ct.inner();
        Ok(())
    }

    /// `Σ cts[i] · pts[i]` in one fused pass (128-bit lazy accumulation, one
    /// reduction per coefficient at the end).
    ///
    /// All ciphertexts must be at the query level with the same part count.
    /// For a constant term `c`, add [`Evaluator::one`] with `c` as a term.
    pub fn dot(&self, cts: &[&Ciphertext], pts: &[&PlainPoly]) -> Result<Ciphertext, HeError> {
        if cts.is_empty() || cts.len() != pts.len() {
            return Err(HeError::DotLengths {
                cts: cts.len(),
                pts: pts.len(),
            });
        }
        let parts = cts[0].parts();
        for ct in cts {
            self.check(ct, "dot", parts)?;
        }
        if pts.iter().any(|pt| !pt.params.same(&self.params)) {
            return Err(HeError::ParamsMismatch);
        }
        let polys = (0..parts)
            .map(|i| {
                dot_product(
                    cts.iter().map(|ct| &ct.inner()[i]),
                    pts.iter().map(|pt| &pt.poly),
                )
                .map_err(backend)
            })
            .collect::<Result<Vec<Poly>, HeError>>()?;
        let inner = FheCiphertext::new(polys, self.params.bfv()).map_err(backend)?;
        Ok(Ciphertext::new(&self.params, inner))
    }

    /// The trivial encryption `(Δ·1, 0)` of the all-ones slot vector at the
    /// query level.
    ///
    /// As a dot-product term with plaintext `c` it contributes exactly the
    /// encoding `Δ·c` and no noise, for the price of one more term in the
    /// fused sum; fhe's `ct + pt` instead rescales `c` by Δ on every call.
    /// It encrypts nothing secret, so results must also contain real terms.
    pub fn one(&self) -> &Ciphertext {
        &self.one
    }

    /// Switches `ct` down to the lowest level (only `q_1` left) before it is
    /// sent: smaller on the wire and, by dividing out the dropped moduli, less
    /// noise in absolute terms. No-op if already there.
    pub fn to_lowest(&self, ct: &mut Ciphertext) -> Result<(), HeError> {
        ct.check_params(&self.params)?;
        ct.inner_mut()
            .switch_to_level(self.params.lowest_level())
            .map_err(backend)
    }

    /// Same parameters, query level, `parts` polynomials.
    fn check(&self, ct: &Ciphertext, what: &'static str, parts: usize) -> Result<(), HeError> {
        ct.check_params(&self.params)?;
        ct.check_shape(what, self.params.query_level(), parts)
    }
}

/// `(Δ, 0)` at the query level, `Δ = floor(Q/t)`. In NTT form a constant
/// polynomial is the same value at every point, so each row is `Δ mod q_i`.
fn trivial_ones(params: &HeParams) -> Result<Ciphertext, HeError> {
    let ctx = params.context_at(params.query_level())?;
    let n = params.degree();
    let deltas = delta_residues(ctx.moduli(), params.plain_modulus())?;
    let mut c0 = Vec::with_capacity(deltas.len() * n);
    for delta in deltas {
        c0.resize(c0.len() + n, delta);
    }
    let c0 = Poly::try_convert_from(c0, ctx, false, Representation::Ntt).map_err(backend)?;
    let c1 = Poly::zero(ctx, Representation::Ntt);
    let inner = FheCiphertext::new(vec![c0, c1], params.bfv()).map_err(backend)?;
    Ok(Ciphertext::new(params, inner))
}

/// `Δ = floor(Q/t) mod q_i` for each `q_i` of `Q`, without big integers:
/// `Δ·t = Q - (Q mod t)`, so `Δ = -(Q mod t) · t⁻¹ (mod q_i)`.
fn delta_residues(moduli: &[u64], t: u64) -> Result<Vec<u64>, HeError> {
    let q_mod_t = moduli
        .iter()
        .fold(1u128, |acc, &q| acc * u128::from(q % t) % u128::from(t)) as u64;
    moduli
        .iter()
        .map(|&q| {
            let qi = fhe_math::zq::Modulus::new(q).map_err(backend)?;
            let t_inv = qi
                .inv(t % q)
                .ok_or_else(|| HeError::Backend(format!("t has no inverse mod {q}")))?;
            Ok(qi.mul(qi.neg(q_mod_t % q), t_inv))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_matches_big_division() {
        // Q = 97 * 193 = 18721, t = 17: Δ = 1101.
        let moduli = [97u64, 193];
        let deltas = delta_residues(&moduli, 17).unwrap();
        assert_eq!(deltas, vec![1101 % 97, 1101 % 193]);
    }
}
