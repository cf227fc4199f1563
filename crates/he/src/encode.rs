//! Server-side plaintexts: a compact stored form and a ready-to-multiply form.
//!
//! The sender database holds many slot vectors (polynomial coefficients per
//! bin). fhe's `Plaintext` keeps `(1 + k)·n` words each and re-encodes from
//! slots at ~1 ms per vector; here the expensive inverse batching transform
//! (an NTT mod t) runs once, when a [`CompactPoly`] is made, and the result is
//! stored bit-packed. Turning it into a [`PlainPoly`] for a query costs only
//! the `k` NTTs modulo the query-level primes.

use std::fmt;

use fhe_math::rq::{traits::TryConvertFrom, Poly, Representation};

use crate::error::{backend, HeError};
use crate::pack::{bit_width, pack_into, packed_len, unpack_checked};
use crate::params::HeParams;

/// One slot vector stored as its plaintext polynomial `m(x)`: `n`
/// coefficients mod t, `ceil(log2 t)` bits each.
///
/// Independent of the ciphertext moduli, so it stays valid for any
/// `HeParams` with the same `n` and `t`.
#[derive(Clone, PartialEq, Eq)]
pub struct CompactPoly {
    plain_modulus: u64,
    packed: Box<[u8]>,
}

impl CompactPoly {
    /// Encodes up to `n` slot values (each below `t`, missing slots 0).
    pub fn from_slots(params: &HeParams, slots: &[u64]) -> Result<Self, HeError> {
        let coeffs = params.slots_to_coeffs(slots)?;
        let width = bit_width(params.plain_modulus());
        let mut packed = Vec::with_capacity(packed_len(coeffs.len(), width));
        pack_into(&mut packed, coeffs, width);
        Ok(Self {
            plain_modulus: params.plain_modulus(),
            packed: packed.into(),
        })
    }

    /// Exact size of the compact form under `params`: `n·ceil(log2 t)/8`.
    pub fn encoded_size(params: &HeParams) -> usize {
        packed_len(params.degree(), bit_width(params.plain_modulus()))
    }

    /// Decodes [`CompactPoly::as_bytes`] output: exact length and every
    /// coefficient below `t`.
    pub fn from_bytes(params: &HeParams, bytes: &[u8]) -> Result<Self, HeError> {
        let expected = Self::encoded_size(params);
        if bytes.len() != expected {
            return Err(HeError::WireLength {
                what: "compact plaintext",
                expected,
                found: bytes.len(),
            });
        }
        let t = params.plain_modulus();
        unpack_checked(bytes, params.degree(), bit_width(t), t).map_err(|index| {
            HeError::WireCoefficient {
                what: "compact plaintext",
                index,
            }
        })?;
        Ok(Self {
            plain_modulus: t,
            packed: bytes.into(),
        })
    }

    /// The packed coefficients (this is also the serialized form).
    pub fn as_bytes(&self) -> &[u8] {
        &self.packed
    }

    /// Bytes held.
    pub fn byte_size(&self) -> usize {
        self.packed.len()
    }

    /// The slot values again (one NTT mod t).
    pub fn to_slots(&self, params: &HeParams) -> Result<Vec<u64>, HeError> {
        Ok(params.coeffs_to_slots(self.coefficients(params)?))
    }

    /// Lifts `m(x)` to the query level in NTT form, for [`crate::eval::Evaluator::dot`].
    ///
    /// Coefficients are lifted *centered*, into `(-t/2, t/2]`: a ciphertext
    /// times `m` gains noise proportional to the size of `m`'s coefficients,
    /// so centering saves about one bit over lifting from `[0, t)`.
    pub fn to_plain(&self, params: &HeParams) -> Result<PlainPoly, HeError> {
        lift_centered(params, &self.coefficients(params)?)
    }

    /// Unpacks the coefficients after checking this polynomial fits `params`.
    fn coefficients(&self, params: &HeParams) -> Result<Vec<u64>, HeError> {
        let t = params.plain_modulus();
        if t != self.plain_modulus || self.packed.len() != Self::encoded_size(params) {
            return Err(HeError::ParamsMismatch);
        }
        unpack_checked(&self.packed, params.degree(), bit_width(t), t).map_err(|index| {
            HeError::WireCoefficient {
                what: "compact plaintext",
                index,
            }
        })
    }
}

impl fmt::Debug for CompactPoly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompactPoly")
            .field("plain_modulus", &self.plain_modulus)
            .field("bytes", &self.packed.len())
            .finish()
    }
}

/// The plaintext of coefficients `coeffs` (each below `t`, exactly `n`),
/// lifted centered into `(-t/2, t/2]` and put in NTT form at the query level.
pub(crate) fn lift_centered(params: &HeParams, coeffs: &[u64]) -> Result<PlainPoly, HeError> {
    let ctx = params.context_at(params.query_level())?;
    let t = params.plain_modulus();
    let mut lifted = Vec::with_capacity(ctx.moduli().len() * coeffs.len());
    for &q in ctx.moduli() {
        lifted.extend(coeffs.iter().map(|&c| centered_residue(c, t, q)));
    }
    let mut poly =
        Poly::try_convert_from(lifted, ctx, false, Representation::PowerBasis).map_err(backend)?;
    poly.change_representation(Representation::Ntt);
    Ok(PlainPoly {
        params: params.clone(),
        poly,
    })
}

/// `c` (in `[0, t)`) read as the centered integer in `(-t/2, t/2]`, reduced
/// modulo `q`.
fn centered_residue(c: u64, t: u64, q: u64) -> u64 {
    if c <= t / 2 {
        c % q
    } else {
        let magnitude = (t - c) % q;
        if magnitude == 0 {
            0
        } else {
            q - magnitude
        }
    }
}

/// A plaintext polynomial ready for ciphertext-plaintext products: NTT form
/// at the query level, `k·n` words.
#[derive(Clone)]
pub struct PlainPoly {
    pub(crate) params: HeParams,
    pub(crate) poly: Poly,
}

impl PlainPoly {
    /// Bytes of coefficient storage: `8·k·n`.
    pub fn byte_size(&self) -> usize {
        self.poly.coefficients().len() * std::mem::size_of::<u64>()
    }

    /// The parameters this plaintext was made for.
    pub fn params(&self) -> &HeParams {
        &self.params
    }
}

impl fmt::Debug for PlainPoly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlainPoly")
            .field("bytes", &self.byte_size())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn centered_lift() {
        assert_eq!(centered_residue(0, 17, 97), 0);
        assert_eq!(centered_residue(8, 17, 97), 8);
        assert_eq!(centered_residue(9, 17, 97), 97 - 8);
        assert_eq!(centered_residue(16, 17, 97), 96);
        // q below t still reduces correctly.
        assert_eq!(centered_residue(8, 17, 5), 3);
        assert_eq!(centered_residue(12, 17, 5), 0);
    }
}
