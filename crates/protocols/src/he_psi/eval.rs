//! The sender's homomorphic work on one query (paper section 3.1 and
//! appendix A): every needed power of the client's encrypted slot vector
//! from the source powers it sent, then each bin bundle's polynomials as
//! dot products of those powers with plaintext coefficients, with
//! Paterson-Stockmeyer when `ps_low_degree > 0`.

use std::collections::{HashMap, HashSet};

use psikit_he::{Ciphertext, Evaluator, PlainPoly, Prepared};
use rayon::prelude::*;

use super::powers::PowersPlan;
use crate::Error;

/// `y^e` for every exponent the plan needs, indexed by `e` (index 0 holds
/// nothing: the constant term uses the evaluator's trivial "one").
pub struct Powers {
    by_exponent: Vec<Option<Ciphertext>>,
    /// With Paterson-Stockmeyer, the high powers `y^(i(L+1))` lifted once
    /// for the products of every polynomial, indexed like `by_exponent`.
    high: Vec<Option<Prepared>>,
}

impl Powers {
    /// Computes all powers of the plan from the sources (`sources[i]` is
    /// `y^plan.sources()[i]`). Products of equal depth are independent and
    /// run in parallel.
    ///
    /// Two savings over relinearizing every product: each power that is a
    /// factor of later products is prepared once (its basis extension is
    /// shared by all its products), and, without Paterson-Stockmeyer, a
    /// power that is no factor stays an unrelinearized 3-part ciphertext:
    /// the dot products accept it and each result is relinearized once.
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
        let factors: HashSet<u32> = plan
            .steps()
            .iter()
            .flat_map(|s| [s.left, s.right])
            .collect();
        // Paterson-Stockmeyer multiplies inner sums by high powers, which
        // needs 2-part operands throughout.
        let lazy_ok = plan.ps_low_degree() == 0;
        let block = plan.ps_low_degree() + 1;
        let is_high = |e: u32| !lazy_ok && e >= block && e % block == 0;
        let mut prepared: HashMap<u32, Prepared> = HashMap::new();
        for depth in 1..=plan.max_depth() {
            let steps: Vec<_> = plan.steps().iter().filter(|s| s.depth == depth).collect();
            let missing: Vec<u32> = steps
                .iter()
                .flat_map(|s| [s.left, s.right])
                .filter(|e| !prepared.contains_key(e))
                .collect::<HashSet<_>>()
                .into_iter()
                .collect();
            prepared.extend(prepare_all(ev, &by_exponent, &missing)?);
            let made = steps
                .par_iter()
                .map(|s| {
                    let a = prepared_factor(&prepared, s.left)?;
                    let b = prepared_factor(&prepared, s.right)?;
                    let ct = if lazy_ok && !factors.contains(&s.target) {
                        ev.mul_prepared_lazy(a, b)?
                    } else {
                        ev.mul_prepared(a, b)?
                    };
                    Ok((s.target, ct))
                })
                .collect::<Result<Vec<_>, Error>>()?;
            for (target, ct) in made {
                by_exponent[target as usize] = Some(ct);
            }
            // Factors of deeper products and high powers only: drop the
            // prepared forms nothing later uses (they are large).
            prepared.retain(|e, _| {
                is_high(*e)
                    || plan
                        .steps()
                        .iter()
                        .any(|s| s.depth > depth && (s.left == *e || s.right == *e))
            });
        }
        let missing: Vec<u32> = plan
            .needed()
            .iter()
            .copied()
            .filter(|&e| is_high(e) && !prepared.contains_key(&e))
            .collect();
        prepared.extend(prepare_all(ev, &by_exponent, &missing)?);
        let mut high: Vec<Option<Prepared>> = vec![None; top + 1];
        for (e, p) in prepared {
            high[e as usize] = Some(p);
        }
        Ok(Self { by_exponent, high })
    }

    /// `y^e`.
    pub fn get(&self, e: u32) -> Result<&Ciphertext, Error> {
        get(&self.by_exponent, e)
    }

    /// `y^e` lifted for products, for a Paterson-Stockmeyer high power.
    fn high(&self, e: u32) -> Result<&Prepared, Error> {
        self.high
            .get(e as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| Error::Protocol(format!("high power {e} was not prepared")))
    }
}

/// The powers `exponents`, lifted for products in parallel.
fn prepare_all(
    ev: &Evaluator,
    by_exponent: &[Option<Ciphertext>],
    exponents: &[u32],
) -> Result<Vec<(u32, Prepared)>, Error> {
    exponents
        .par_iter()
        .map(|&e| Ok((e, ev.prepare(get(by_exponent, e)?)?)))
        .collect()
}

fn prepared_factor(prepared: &HashMap<u32, Prepared>, e: u32) -> Result<&Prepared, Error> {
    prepared
        .get(&e)
        .ok_or_else(|| Error::Protocol(format!("power {e} was not prepared")))
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
/// `y^(i(L+1))`; the products are summed before the one scale-down and
/// relinearization of the polynomial (appendix A, with
/// [`Evaluator::sum_of_products`]).
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
    let inners = blocks
        .map(|c| Ok(ev.prepare(&block_dot(ev, powers, c)?)?))
        .collect::<Result<Vec<Prepared>, Error>>()?;
    let pairs = inners
        .iter()
        .enumerate()
        .map(|(i, inner)| Ok((inner, powers.high(((i + 1) * block) as u32)?)))
        .collect::<Result<Vec<_>, Error>>()?;
    let mut result = match pairs.is_empty() {
        true => return first.ok_or_else(|| Error::Protocol("empty polynomial".into())),
        false => ev.sum_of_products(&pairs)?,
    };
    ev.relin(&mut result)?;
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
