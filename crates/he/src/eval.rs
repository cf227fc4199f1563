//! Server-side homomorphic evaluation.
//!
//! Every method checks parameters, levels and part counts first: fhe's
//! operators `assert!` on mismatches and its dot product does not check
//! levels at all, and the inputs here come from a remote client.

use fhe::bfv::{Ciphertext as FheCiphertext, Multiplicator};
use fhe_math::rq::{dot_product, traits::TryConvertFrom, Poly, Representation};

use crate::ciphertext::Ciphertext;
use crate::encode::PlainPoly;
use crate::error::{backend, HeError};
use crate::keys::RelinKey;
use crate::params::HeParams;
use crate::prepared::{Prepared, ProductBasis};

/// Multiplies, relinearizes, sums and mod-switches ciphertexts of one client.
pub struct Evaluator {
    params: HeParams,
    relin: RelinKey,
    mul: Multiplicator,
    basis: ProductBasis,
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
            basis: ProductBasis::new(params)?,
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

    /// Lifts a 2-part query-level ciphertext into the extended product basis
    /// once, so that every product it is a factor of skips that work
    /// ([`Evaluator::mul_prepared`]).
    pub fn prepare(&self, ct: &Ciphertext) -> Result<Prepared, HeError> {
        self.check(ct, "prepare", 2)?;
        let parts = [
            self.basis.extend(&ct.inner()[0])?,
            self.basis.extend(&ct.inner()[1])?,
        ];
        Ok(Prepared {
            params: self.params.clone(),
            parts,
        })
    }

    /// `a · b` from prepared factors, relinearized to 2 parts: the same
    /// ciphertext [`Evaluator::mul_relin`] gives for the original operands.
    pub fn mul_prepared(&self, a: &Prepared, b: &Prepared) -> Result<Ciphertext, HeError> {
        let mut product = self.mul_prepared_lazy(a, b)?;
        self.relin(&mut product)?;
        Ok(product)
    }

    /// `a · b` from prepared factors, left at 3 parts for lazy
    /// relinearization (sums and dot products accept 3-part terms).
    pub fn mul_prepared_lazy(&self, a: &Prepared, b: &Prepared) -> Result<Ciphertext, HeError> {
        if !a.params.same(&self.params) || !b.params.same(&self.params) {
            return Err(HeError::ParamsMismatch);
        }
        let polys = self.basis.tensor(&a.parts, &b.parts)?;
        let inner = FheCiphertext::new(polys, self.params.bfv()).map_err(backend)?;
        Ok(Ciphertext::new(&self.params, inner))
    }

    /// `Σ a_i · b_i` from prepared factors, left at 3 parts: the tensor
    /// products are summed in the extended basis and scaled back once, so
    /// each product after the first costs a fraction of
    /// [`Evaluator::mul_prepared_lazy`] (Paterson-Stockmeyer's outer sum).
    /// Decrypts to the same slots as the sum of the separate products.
    pub fn sum_of_products(&self, pairs: &[(&Prepared, &Prepared)]) -> Result<Ciphertext, HeError> {
        if pairs
            .iter()
            .any(|(a, b)| !a.params.same(&self.params) || !b.params.same(&self.params))
        {
            return Err(HeError::ParamsMismatch);
        }
        let parts: Vec<_> = pairs.iter().map(|(a, b)| (&a.parts, &b.parts)).collect();
        let polys = self.basis.tensor_sum(&parts)?;
        let inner = FheCiphertext::new(polys, self.params.bfv()).map_err(backend)?;
        Ok(Ciphertext::new(&self.params, inner))
    }

    /// Relinearizes a 3-part ciphertext at the query level to 2 parts.
    pub fn relin(&self, ct: &mut Ciphertext) -> Result<(), HeError> {
        self.check(ct, "relin", 3)?;
        self.relin
            .inner
            .relinearizes(ct.inner_mut())
            .map_err(backend)
    }

    /// `acc += ct`, both at the query level, each with 2 or 3 parts.
    ///
    /// Mixed part counts are fine (lazy relinearization): a 2-part `ct`
    /// adds into the first two parts of a 3-part `acc`, and a 3-part `ct`
    /// turns a 2-part `acc` into a 3-part one. This is sound because
    /// decryption is linear in the parts, `c0 + c1·s + c2·s²`, and a missing
    /// `c2` is zero.
    pub fn add_assign(&self, acc: &mut Ciphertext, ct: &Ciphertext) -> Result<(), HeError> {
        self.check_lazy(acc, "add")?;
        self.check_lazy(ct, "add")?;
        let (sum, term) = (acc.inner_mut(), ct.inner());
        let shared = sum.len().min(term.len());
        for (s, t) in sum.iter_mut().zip(&term[..shared]) {
            *s += t;
        }
        if term.len() > shared {
            let mut polys: Vec<Poly> = sum.iter_mut().map(std::mem::take).collect();
            polys.extend_from_slice(&term[shared..]);
            *sum = FheCiphertext::new(polys, self.params.bfv()).map_err(backend)?;
        }
        Ok(())
    }

    /// `Σ cts[i] · pts[i]` in one fused pass per part (128-bit lazy
    /// accumulation, one reduction per coefficient at the end).
    ///
    /// All ciphertexts must be at the query level, each with 2 or 3 parts;
    /// the part counts may be mixed. The result has 3 parts if any term
    /// does: its `c2` is the dot product over the 3-part terms only, so
    /// powers left unrelinearized cost half a term more each here and one
    /// [`Evaluator::relin`] per result instead of one per power.
    /// For a constant term `c`, add [`Evaluator::one`] with `c` as a term.
    pub fn dot(&self, cts: &[&Ciphertext], pts: &[&PlainPoly]) -> Result<Ciphertext, HeError> {
        if cts.is_empty() || cts.len() != pts.len() {
            return Err(HeError::DotLengths {
                cts: cts.len(),
                pts: pts.len(),
            });
        }
        for ct in cts {
            self.check_lazy(ct, "dot")?;
        }
        if pts.iter().any(|pt| !pt.params.same(&self.params)) {
            return Err(HeError::ParamsMismatch);
        }
        let parts = cts.iter().map(|ct| ct.parts()).max().unwrap_or(2);
        let polys = (0..parts)
            .map(|i| part_dot(cts, pts, i))
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
    ///
    /// A 3-part ciphertext is relinearized first: the relinearization key
    /// only works at the query level, so after the switch a 3-part result
    /// could never be brought back to the 2 parts the wire format carries.
    pub fn to_lowest(&self, ct: &mut Ciphertext) -> Result<(), HeError> {
        ct.check_params(&self.params)?;
        if ct.parts() == 3 {
            self.relin(ct)?;
        }
        ct.check_shape("to_lowest", ct.level(), 2)?;
        ct.inner_mut()
            .switch_to_level(self.params.lowest_level())
            .map_err(backend)
    }

    /// Same parameters, query level, `parts` polynomials.
    fn check(&self, ct: &Ciphertext, what: &'static str, parts: usize) -> Result<(), HeError> {
        ct.check_params(&self.params)?;
        ct.check_shape(what, self.params.query_level(), parts)
    }

    /// Same parameters, query level, 2 or 3 polynomials.
    fn check_lazy(&self, ct: &Ciphertext, what: &'static str) -> Result<(), HeError> {
        let parts = ct.parts().clamp(2, 3);
        self.check(ct, what, parts)
    }
}

/// Part `i` of `Σ cts[j] · pts[j]`, over the terms that have that part.
pub(crate) fn part_dot(cts: &[&Ciphertext], pts: &[&PlainPoly], i: usize) -> Result<Poly, HeError> {
    let terms = cts.iter().zip(pts).filter(move |(ct, _)| ct.parts() > i);
    dot_product(
        terms.clone().map(move |(ct, _)| &ct.inner()[i]),
        terms.map(|(_, pt)| &pt.poly),
    )
    .map_err(backend)
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
