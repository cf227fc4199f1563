//! The client's side: blinding its inputs and finalizing the server's
//! answers.

use core::fmt;

use super::hash::*;
use super::suite::*;
use super::wire::*;
use crate::ristretto::{Kernel, Scalars};
use curve25519_dalek::ristretto::RistrettoPoint;
use curve25519_dalek::scalar::Scalar;
use rand_core::CryptoRngCore;
use rayon::prelude::*;
use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

/// The client's secret blinding scalar for one query. Keep it until the
/// server answers, then pass it to [`finalize`]. Wiped on drop; `Debug`
/// never shows it; not `Clone`, so one blind serves one query.
pub struct Blind {
    /// Never zero (batch inversion relies on it).
    r: Scalar,
}

// Wiped only on drop: a public `zeroize()` would leave a zero blind.
impl Drop for Blind {
    fn drop(&mut self) {
        self.r.zeroize();
    }
}

impl ZeroizeOnDrop for Blind {}

impl fmt::Debug for Blind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Blind(<secret>)")
    }
}

/// Blinds a hashed input with the non-zero scalar `r`.
pub(super) fn blind_with(point: &RistrettoPoint, r: Scalar) -> (Blind, BlindedElement) {
    let blinded = BlindedElement::from_point(point * r);
    (Blind { r }, blinded)
}

/// RFC 9497 `Blind`: starts a query for `input` with a fresh random blind.
/// Send the [`BlindedElement`], keep the [`Blind`].
pub fn blind<R: CryptoRngCore + ?Sized>(
    input: &[u8],
    rng: &mut R,
) -> Result<(Blind, BlindedElement)> {
    let point = hash_input(input)?;
    Ok(blind_with(&point, random_nonzero_scalar(rng)))
}

/// [`blind`] for many inputs. All randomness is drawn from `rng` first (so
/// the rng need not be thread-safe), then hashing and blinding run in
/// parallel. Both outputs are parallel to `inputs`.
pub fn blind_batch<T, R>(inputs: &[T], rng: &mut R) -> Result<(Vec<Blind>, Vec<BlindedElement>)>
where
    T: AsRef<[u8]> + Sync,
    R: CryptoRngCore + ?Sized,
{
    check_input_lengths(inputs)?;
    // Draw h uniformly and use the blind r = 2h, which is just as uniform;
    // blinding with h then lets chunks compress their points together.
    let halves: Zeroizing<Vec<Scalar>> =
        Zeroizing::new(inputs.iter().map(|_| random_nonzero_scalar(rng)).collect());
    let chunk = chunk_len(inputs.len());
    let parts: Vec<Vec<BlindedElement>> = inputs
        .par_chunks(chunk)
        .zip(halves.par_chunks(chunk))
        .enumerate()
        .map(|(c, (xs, hs))| blind_chunk(xs, hs, c * chunk))
        .collect::<Result<_>>()?;
    let blinds = halves.iter().map(|h| Blind { r: h + h }).collect();
    Ok((blinds, parts.into_iter().flatten().collect()))
}

/// Blinds one chunk of [`blind_batch`] with blinds `2·halves[i]`.
pub(super) fn blind_chunk<T: AsRef<[u8]>>(
    inputs: &[T],
    halves: &[Scalar],
    first: usize,
) -> Result<Vec<BlindedElement>> {
    if let Some(kernel) = Kernel::detect() {
        let halves: Zeroizing<Vec<[u8; SCALAR_LEN]>> =
            Zeroizing::new(halves.iter().map(Scalar::to_bytes).collect());
        let encodings = hash_mul_encode(kernel, inputs, Scalars::Each(&halves), first)?;
        return Ok(encodings
            .into_iter()
            .map(|e| BlindedElement(WireElement::from_valid_bytes(e)))
            .collect());
    }
    let points = hash_and_mul_chunk(inputs, halves.iter(), first)?;
    Ok(doubled_elements(&points)
        .into_iter()
        .map(BlindedElement)
        .collect())
}

/// RFC 9497 `Finalize`: unblinds the server's answer and hashes it into the
/// PRF output for `input`. `input` and `blind` must be the ones that made
/// the query being answered, or the output is meaningless.
pub fn finalize(input: &[u8], blind: &Blind, evaluated: &EvaluatedElement) -> Result<Output> {
    check_input_len(input)?;
    let inverse = Zeroizing::new(blind.r.invert());
    let unblinded = Zeroizing::new(evaluated.point() * *inverse);
    Ok(output_hash(input, unblinded.compress().as_bytes()))
}

/// [`finalize`] for many queries, in parallel, in order. The three slices
/// must be parallel. Each chunk inverts its blinds together with one
/// `Scalar::batch_invert` instead of one inversion each.
pub fn finalize_batch<T: AsRef<[u8]> + Sync>(
    inputs: &[T],
    blinds: &[Blind],
    evaluated: &[EvaluatedElement],
) -> Result<Vec<Output>> {
    if inputs.len() != blinds.len() || inputs.len() != evaluated.len() {
        return Err(OprfError::BatchLengthMismatch {
            inputs: inputs.len(),
            blinds: blinds.len(),
            evaluated: evaluated.len(),
        });
    }
    check_input_lengths(inputs)?;
    let chunk = chunk_len(inputs.len());
    let parts: Vec<Vec<Output>> = inputs
        .par_chunks(chunk)
        .zip(blinds.par_chunks(chunk))
        .zip(evaluated.par_chunks(chunk))
        .map(|((x, b), z)| finalize_chunk(x, b, z))
        .collect();
    Ok(parts.into_iter().flatten().collect())
}

/// Finalizes one chunk whose inputs are already length-checked.
pub(super) fn finalize_chunk<T: AsRef<[u8]>>(
    inputs: &[T],
    blinds: &[Blind],
    evaluated: &[EvaluatedElement],
) -> Vec<Output> {
    // Inverting 2r (never zero, as batch_invert requires) gives half of
    // 1/r: both paths multiply by halves and encode the doubles.
    let mut inverses: Zeroizing<Vec<Scalar>> =
        Zeroizing::new(blinds.iter().map(|b| b.r + b.r).collect());
    let mut product_inverse = Scalar::batch_invert(&mut inverses);
    product_inverse.zeroize();
    if let Some(kernel) = Kernel::detect() {
        let halves: Zeroizing<Vec<[u8; SCALAR_LEN]>> =
            Zeroizing::new(inverses.iter().map(Scalar::to_bytes).collect());
        let elements: Vec<WireElement> = evaluated.iter().map(|z| z.0).collect();
        let encodings = Zeroizing::new(mul_encode(kernel, &elements, Scalars::Each(&halves)));
        return inputs
            .iter()
            .zip(encodings.iter())
            .map(|(x, e)| output_hash(x.as_ref(), e))
            .collect();
    }
    let halves: Zeroizing<Vec<RistrettoPoint>> = Zeroizing::new(
        evaluated
            .iter()
            .zip(inverses.iter())
            .map(|(z, inv)| z.point() * inv)
            .collect(),
    );
    let encodings = Zeroizing::new(double_and_encode(&halves));
    inputs
        .iter()
        .zip(encodings.iter())
        .map(|(x, e)| output_hash(x.as_ref(), e))
        .collect()
}
