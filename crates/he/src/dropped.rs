//! Result ciphertexts with their low bits rounded off (re-exported from
//! [`crate::wire`]).
//!
//! After the switch to the lowest level a result lives modulo the one prime
//! `q_1`, but its noise is far below the decryption bound `q_1/(2t)` for most
//! parameter sets. The low bits of `c0` and `c1` then carry nothing the
//! client needs: rounding every coefficient to a multiple of `2^d` changes the
//! phase `c0 + c1·s` by `e0 + e1·s` with `|e0|, |e1| ≤ 2^(d-1)`, which only
//! adds noise. So the coefficients (power basis, not NTT: rounding must
//! happen where the phase is linear in the coefficients) are sent as
//! `round(c / 2^d)` in `bits(q_1) - d` bits each.
//!
//! | message | layout | size |
//! |---|---|---|
//! | result ciphertext, `d` bits dropped | c0 ‖ c1 as `round(c/2^d) mod 2^w`, `w = bits(q_1) - d` | `2 · n/8 · w` |
//!
//! The rounded value `2^w` (only reachable when `q_1` is within `2^(d-1)` of
//! `2^bits(q_1)`) is sent as 0, which is also within `2^(d-1)` of the
//! original modulo `q_1`. So every `w`-bit string is a valid and distinct
//! encoding, and the decoder needs no range check beyond the exact length.

use fhe::bfv::Ciphertext as FheCiphertext;
use fhe_math::rq::{traits::TryConvertFrom, Poly, Representation};

use crate::ciphertext::Ciphertext;
use crate::error::{backend, HeError};
use crate::pack::{bit_width, pack_into, packed_len, unpack_checked};
use crate::params::HeParams;

/// Noise budget, in bits, the parameter selection (`he_psi::select`) keeps
/// in the worst case it accepts; [`safe_drop_bits`] assumes a result may
/// arrive with only this much left.
const ASSUMED_MARGIN_BITS: f64 = 4.0;

/// Tail factor on `2^(d-1)·sqrt(2n/3)` in the rounding noise bound. The
/// rounding errors are uniform on `[-2^(d-1), 2^(d-1))`, so a coefficient of
/// `e1·s` (about `2n/3` nonzero terms) has standard deviation
/// `2^(d-1)·sqrt(2n/9)`: the factor 4 is `4·sqrt(3) ≈ 6.9` of those, below
/// 10^-11 per coefficient.
const ROUNDING_TAIL: f64 = 4.0;

/// A conservative number of low bits to drop from result ciphertexts.
///
/// Let `D = q_1/(2t)` be the noise that breaks decryption. The parameter
/// selection accepts results with 4 bits of budget, so noise up to `D/16`
/// before rounding. The rounding adds `e0 + e1·s` with `|e0|, |e1| ≤
/// 2^(d-1)` and ternary `s`: at most `R(d) = 2^(d-1)·(1 + 4·sqrt(2n/3))`
/// except with probability below 10^-11 per coefficient (the errors are
/// uniform, so `sqrt(2n/3)·2^(d-1)` is `sqrt(3)` standard deviations of a
/// coefficient of `e1·s`, and 4 of it about 6.9). This returns
/// the largest `d` with `R(d) ≤ D/32`, so the total stays below
/// `3D/32`: at least 3.4 bits of budget in that worst case, the rounding
/// costing at most 0.6 of the 4 bits of margin. Results with more room (most
/// parameter sets) keep nearly all of it; the test
/// `dropped_results_keep_budget` calibrates this with measured budgets.
pub fn safe_drop_bits(params: &HeParams) -> u32 {
    let q1 = params.moduli()[0] as f64;
    let t = params.plain_modulus() as f64;
    let n = params.degree() as f64;
    let bound_log2 = (q1 / (2.0 * t)).log2() - ASSUMED_MARGIN_BITS - 1.0;
    let spread_log2 = (1.0 + ROUNDING_TAIL * (2.0 * n / 3.0).sqrt()).log2();
    // R(d) ≤ bound  ⇔  d - 1 + spread ≤ bound.
    let d = (bound_log2 - spread_log2 + 1.0).floor();
    d.clamp(0.0, f64::from(max_drop_bits(params))) as u32
}

/// Exact size of [`encode_result_ct_dropped`] output, or an error if
/// `drop_bits` is not below `bits(q_1)`.
pub fn result_ct_size_dropped(params: &HeParams, drop_bits: u32) -> Result<usize, HeError> {
    let width = kept_bits(params, drop_bits)?;
    Ok(2 * packed_len(params.degree(), width))
}

/// Encodes a 2-part result at the lowest level with the low `drop_bits` bits
/// of every coefficient rounded off. Decrypts correctly after
/// [`decode_result_ct_dropped`] as long as the added noise fits the budget
/// (use [`safe_drop_bits`]).
pub fn encode_result_ct_dropped(ct: &Ciphertext, drop_bits: u32) -> Result<Vec<u8>, HeError> {
    let params = &ct.params;
    ct.check_shape("result ciphertext", params.lowest_level(), 2)?;
    let width = kept_bits(params, drop_bits)?;
    let mut out = Vec::with_capacity(result_ct_size_dropped(params, drop_bits)?);
    for part in ct.inner().iter() {
        let mut poly = part.clone();
        poly.change_representation(Representation::PowerBasis);
        let coefficients = poly.coefficients();
        let row = coefficients.row(0);
        pack_into(
            &mut out,
            row.iter().map(|&c| round_off(c, drop_bits, width)),
            width,
        );
    }
    Ok(out)
}

/// Decodes [`encode_result_ct_dropped`] output: exact length for
/// `drop_bits`, then every coefficient multiplied back by `2^drop_bits`
/// modulo `q_1` and moved to NTT form. Never panics on any input.
pub fn decode_result_ct_dropped(
    params: &HeParams,
    bytes: &[u8],
    drop_bits: u32,
) -> Result<Ciphertext, HeError> {
    const WHAT: &str = "dropped result ciphertext";
    let width = kept_bits(params, drop_bits)?;
    let expected = result_ct_size_dropped(params, drop_bits)?;
    if bytes.len() != expected {
        return Err(HeError::WireLength {
            what: WHAT,
            expected,
            found: bytes.len(),
        });
    }
    let (first, second) = bytes.split_at(expected / 2);
    let polys = [(first, 0), (second, params.degree())]
        .into_iter()
        .map(|(half, index)| restore_poly(params, half, drop_bits, width, index))
        .collect::<Result<Vec<Poly>, HeError>>()?;
    let inner = FheCiphertext::new(polys, params.bfv()).map_err(backend)?;
    Ok(Ciphertext::new(params, inner))
}

/// Largest accepted `drop_bits`: one bit of every coefficient must stay.
fn max_drop_bits(params: &HeParams) -> u32 {
    bit_width(params.moduli()[0]) as u32 - 1
}

/// Bits sent per coefficient, `bits(q_1) - drop_bits`, checking the range.
fn kept_bits(params: &HeParams, drop_bits: u32) -> Result<usize, HeError> {
    let max = max_drop_bits(params);
    if drop_bits > max {
        return Err(HeError::DropBits {
            drop_bits,
            max_drop_bits: max,
        });
    }
    Ok(bit_width(params.moduli()[0]) - drop_bits as usize)
}

/// `round(c / 2^d) mod 2^width` for `c < q_1 < 2^(width + d)`.
fn round_off(c: u64, drop_bits: u32, width: usize) -> u64 {
    let rounded = match drop_bits {
        0 => c,
        d => (c >> d) + ((c >> (d - 1)) & 1),
    };
    rounded & ((1u64 << width) - 1)
}

/// One polynomial of a dropped result: `width`-bit values times `2^d`,
/// reduced modulo `q_1`, in NTT form. `first_index` offsets error indices.
fn restore_poly(
    params: &HeParams,
    bytes: &[u8],
    drop_bits: u32,
    width: usize,
    first_index: usize,
) -> Result<Poly, HeError> {
    let q1 = params.moduli()[0];
    let values = unpack_checked(bytes, params.degree(), width, 1u64 << width).map_err(|i| {
        HeError::WireCoefficient {
            what: "dropped result ciphertext",
            index: first_index + i,
        }
    })?;
    // v < 2^width, so v·2^d < 2^bits(q_1) ≤ 2·q_1: one subtraction reduces.
    let coefficients: Vec<u64> = values
        .into_iter()
        .map(|v| {
            let c = v << drop_bits;
            if c >= q1 {
                c - q1
            } else {
                c
            }
        })
        .collect();
    let ctx = params.context_at(params.lowest_level())?;
    let mut poly = Poly::try_convert_from(coefficients, ctx, false, Representation::PowerBasis)
        .map_err(backend)?;
    poly.change_representation(Representation::Ntt);
    Ok(poly)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_is_nearest_and_wraps_at_the_top() {
        // q1 = 97 < 2^7: width 7 - 3 = 4 when dropping 3 bits.
        assert_eq!(round_off(0, 3, 4), 0);
        assert_eq!(round_off(3, 3, 4), 0);
        assert_eq!(round_off(4, 3, 4), 1);
        assert_eq!(round_off(11, 3, 4), 1);
        assert_eq!(round_off(12, 3, 4), 2);
        // 96 rounds to 12·8 = 96; 124 would round to 16 = 2^4, sent as 0.
        assert_eq!(round_off(96, 3, 4), 12);
        assert_eq!(round_off(124, 3, 4), 0);
        assert_eq!(round_off(77, 0, 7), 77);
    }
}
