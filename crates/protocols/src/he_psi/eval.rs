//! The sender's homomorphic work on one query (paper section 3.1 and
//! appendix A): every needed power of the client's encrypted slot vector
//! from the source powers it sent, then each bin bundle's polynomials as
//! dot products of those powers with plaintext coefficients, with
//! Paterson-Stockmeyer when `ps_low_degree > 0`.

use psikit_he::{Ciphertext, Evaluator, PlainPoly};
use rayon::prelude::*;

use super::powers::PowersPlan;
use crate::Error;

/// `y^e` for every exponent the plan needs, indexed by `e` (index 0 holds
/// nothing: the constant term uses the evaluator's trivial "one").
pub struct Powers {
    by_exponent: Vec<Option<Ciphertext>>,
}

impl Powers {
    /// Computes all powers of the plan from the sources (`sources[i]` is
    /// `y^plan.sources()[i]`). Products of equal depth are independent and
    /// run in parallel.
    pub fn compute(
        ev: &Evaluator,
        plan: &PowersPlan,
        sources: Vec<Ciphertext>,
    ) -> Result<Self, Error> {
        if sources.len() != plan.sources().len() {
            return Err(Error::Protocol(format!(
                "query has {} source powers per bundle index; the parameters need {}",
                sources.len(),
                plan.sources().len()
            )));
        }
        let top = plan.needed().last().copied().unwrap_or(0) as usize;
        let mut by_exponent: Vec<Option<Ciphertext>> = vec![None; top + 1];
        for (&e, ct) in plan.sources().iter().zip(sources) {
            by_exponent[e as usize] = Some(ct);
        }
        for depth in 1..=plan.max_depth() {
            let made = plan
                .steps()
                .par_iter()
                .filter(|s| s.depth == depth)
                .map(|s| {
                    let a = get(&by_exponent, s.left)?;
                    let b = get(&by_exponent, s.right)?;
                    Ok((s.target, ev.mul_relin(a, b)?))
                })
                .collect::<Result<Vec<_>, Error>>()?;
            for (target, ct) in made {
                by_exponent[target as usize] = Some(ct);
            }
        }
        Ok(Self { by_exponent })
    }

    /// `y^e`.
    pub fn get(&self, e: u32) -> Result<&Ciphertext, Error> {
        get(&self.by_exponent, e)
    }
}

fn get(by_exponent: &[Option<Ciphertext>], e: u32) -> Result<&Ciphertext, Error> {
    by_exponent
        .get(e as usize)
        .and_then(Option::as_ref)
        .ok_or_else(|| Error::Protocol(format!("power {e} was not computed")))
}

/// Evaluates `sum_j coeffs[j] * y^j` on the encrypted powers. Without
/// Paterson-Stockmeyer (`low == 0`) this is one fused dot product over all
/// powers. With `low = L`, the coefficients are cut into blocks of `L + 1`;
/// block `i` is a dot product over `y^0..y^L` and is multiplied by
/// `y^(i(L+1))`; the products are summed unrelinearized and relinearized
/// once (appendix A).
pub fn evaluate(
    ev: &Evaluator,
    powers: &Powers,
    coeffs: &[&PlainPoly],
    low: u32,
) -> Result<Ciphertext, Error> {
    if low == 0 {
        return block_dot(ev, powers, coeffs);
    }
    let block = low as usize + 1;
    let mut blocks = coeffs.chunks(block);
    let first = blocks
        .next()
        .map_or(Ok(None), |c| block_dot(ev, powers, c).map(Some))?;
    let mut high: Option<Ciphertext> = None;
    for (i, chunk) in blocks.enumerate() {
        let inner = block_dot(ev, powers, chunk)?;
        let shift = powers.get(((i + 1) * block) as u32)?;
        let product = ev.mul_lazy(&inner, shift)?;
        match high.as_mut() {
            Some(acc) => ev.add_assign(acc, &product)?,
            None => high = Some(product),
        }
    }
    let mut result = match high {
        Some(mut acc) => {
            ev.relin(&mut acc)?;
            acc
        }
        None => return first.ok_or_else(|| Error::Protocol("empty polynomial".into())),
    };
    if let Some(first) = first {
        ev.add_assign(&mut result, &first)?;
    }
    Ok(result)
}

/// `coeffs[0] * 1 + sum_{j>=1} coeffs[j] * y^j`.
fn block_dot(ev: &Evaluator, powers: &Powers, coeffs: &[&PlainPoly]) -> Result<Ciphertext, Error> {
    let mut cts = Vec::with_capacity(coeffs.len());
    cts.push(ev.one());
    for j in 1..coeffs.len() {
        cts.push(powers.get(j as u32)?);
    }
    Ok(ev.dot(&cts, coeffs)?)
}
