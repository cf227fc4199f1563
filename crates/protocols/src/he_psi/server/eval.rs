//! The sender's homomorphic work on one query (paper section 3.1 and
//! appendix A): the powers of the client's encrypted slot vector from the
//! source powers it sent, then each bin bundle's polynomials as dot products
//! of those powers with plaintext coefficients, with the terms of a
//! [`Grouping`] (Paterson-Stockmeyer's blocks, or leaf groups) evaluated as
//! one product per group.

use std::collections::{HashMap, HashSet};

use psikit_he::{Ciphertext, Evaluator, PlainPoly, Prepared};
use rayon::prelude::*;

use crate::error::{Error, Violation};
use crate::he_psi::common::grouping::Grouping;
use crate::he_psi::common::powers::PowersPlan;

/// `y^e` for every exponent the plan needs, indexed by `e` (index 0 holds
/// nothing: the constant term uses the evaluator's trivial "one").
pub struct Powers {
    by_exponent: Vec<Option<Ciphertext>>,
    /// The grouping's multipliers (with Paterson-Stockmeyer the high powers
    /// `y^(i(L+1))`), lifted once for the products of every polynomial,
    /// indexed like `by_exponent`.
    high: Vec<Option<Prepared>>,
}

impl Powers {
    /// Computes the powers of the plan that `grouping` uses from the
    /// sources (`sources[i]` is `y^plan.sources()[i]`). Products of equal
    /// depth are independent and run in parallel.
    ///
    /// Two savings over relinearizing every product: each power that is a
    /// factor of later products is prepared once (its basis extension is
    /// shared by all its products), and a power that is no factor, no group
    /// multiplier and no cofactor in a group stays an unrelinearized 3-part
    /// ciphertext: the dot products accept it and each result is
    /// relinearized once. Grouped leaves are not computed at all.
    pub fn compute(
        ev: &Evaluator,
        plan: &PowersPlan,
        grouping: &Grouping,
        sources: Vec<Ciphertext>,
    ) -> Result<Self, Error> {
        if sources.len() != plan.sources().len() {
            return Err(Violation::Count {
                what: "source powers per bundle index in the query",
                got: sources.len() as u64,
                expected: plan.sources().len() as u64,
            }
            .into());
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
        let is_high = |e: u32| grouping.is_multiplier(e);
        let mut prepared: HashMap<u32, Prepared> = HashMap::new();
        for depth in 1..=plan.max_depth() {
            let steps: Vec<_> = plan
                .steps()
                .iter()
                .filter(|s| s.depth == depth && !grouping.skips(s.target))
                .collect();
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
                    let lazy = !factors.contains(&s.target) && !grouping.needs_two_parts(s.target);
                    let ct = if lazy {
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
                    || plan.steps().iter().any(|s| {
                        s.depth > depth
                            && !grouping.skips(s.target)
                            && (s.left == *e || s.right == *e)
                    })
            });
        }
        let missing: Vec<u32> = grouping
            .groups()
            .iter()
            .map(|g| g.multiplier)
            .filter(|e| !prepared.contains_key(e))
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

    /// `y^e` for `e >= 1`, and the trivial one for `e = 0`.
    fn term<'a>(&'a self, ev: &'a Evaluator, e: u32) -> Result<&'a Ciphertext, Error> {
        match e {
            0 => Ok(ev.one()),
            _ => self.get(e),
        }
    }

    /// `y^e` lifted for products, for a group's multiplier.
    fn high(&self, e: u32) -> Result<&Prepared, Error> {
        self.high
            .get(e as usize)
            .and_then(Option::as_ref)
            .ok_or(Error::Internal("a multiplier power was not prepared"))
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
        .ok_or(Error::Internal("a power was not prepared"))
}

fn get(by_exponent: &[Option<Ciphertext>], e: u32) -> Result<&Ciphertext, Error> {
    by_exponent
        .get(e as usize)
        .and_then(Option::as_ref)
        .ok_or(Error::Internal("a power was not computed"))
}

/// Evaluates `sum_j coeffs[j] * y^j` on the encrypted powers: the
/// ungrouped terms (the constant one included) as one fused dot product,
/// each group `y^a · Σ c_j·y^b` as its inner dot product lifted and
/// multiplied by `y^a`, those products summed before the one scale-down
/// and relinearization of the polynomial (appendix A, with
/// [`Evaluator::sum_of_products`]). `coeffs` may be shorter than the plan's
/// degree plus one; missing coefficients are zero.
pub fn evaluate(
    ev: &Evaluator,
    powers: &Powers,
    coeffs: &[&PlainPoly],
    grouping: &Grouping,
) -> Result<Ciphertext, Error> {
    let direct: Vec<u32> = (0..coeffs.len() as u32)
        .filter(|&j| !grouping.is_grouped(j))
        .collect();
    let first = match direct.is_empty() {
        true => None,
        false => Some(dot(ev, powers, coeffs, direct.into_iter().map(|j| (j, j)))?),
    };
    let present = |&(j, _): &(u32, u32)| (j as usize) < coeffs.len();
    let inners = grouping
        .groups()
        .iter()
        .filter(|g| g.members.iter().any(present))
        .map(|g| {
            let members = g.members.iter().copied().filter(present);
            let inner = dot(ev, powers, coeffs, members)?;
            Ok((ev.prepare(&inner)?, g.multiplier))
        })
        .collect::<Result<Vec<(Prepared, u32)>, Error>>()?;
    let pairs = inners
        .iter()
        .map(|(inner, a)| Ok((inner, powers.high(*a)?)))
        .collect::<Result<Vec<_>, Error>>()?;
    let mut result = match pairs.is_empty() {
        true => return first.ok_or(Error::Internal("empty polynomial")),
        false => ev.sum_of_products(&pairs)?,
    };
    // The direct terms may include 3-part powers: add before the one
    // relinearization.
    if let Some(first) = first {
        ev.add_assign(&mut result, &first)?;
    }
    ev.relin(&mut result)?;
    Ok(result)
}

/// `Σ coeffs[j] · y^e` over the `(j, e)` pairs (`e = 0`: the constant one).
fn dot(
    ev: &Evaluator,
    powers: &Powers,
    coeffs: &[&PlainPoly],
    terms: impl Iterator<Item = (u32, u32)>,
) -> Result<Ciphertext, Error> {
    let (mut cts, mut pts) = (Vec::new(), Vec::new());
    for (j, e) in terms {
        cts.push(powers.term(ev, e)?);
        pts.push(coeffs[j as usize]);
    }
    Ok(ev.dot(&cts, &pts)?)
}
