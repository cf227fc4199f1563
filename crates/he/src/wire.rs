//! Compact wire formats with sizes fixed by the parameters.
//!
//! Every polynomial is sent as its NTT-form residues, row by row (`q_1` first),
//! each residue in exactly `bits(q_i)` bits, least significant bit first, rows
//! padded to a byte (never needed: `n` is a multiple of 8). There are no
//! headers: level and part count are implied by the message type, so a
//! decoder knows the exact length before reading and checks it, then checks
//! every residue against its modulus. Nothing attacker-supplied reaches fhe's
//! protobuf decoders, which trust embedded levels and do not range-check.
//!
//! | message | layout | size |
//! |---|---|---|
//! | query ciphertext (fresh, query level) | seed (32) ‖ c0 | `32 + n/8 · Σ_{i<k} bits(q_i)` |
//! | result ciphertext (lowest level) | c0 ‖ c1 | `2 · n/8 · bits(q_1)` |
//! | relinearization key | seed (32) ‖ k × key c0 over all `k+1` moduli | `32 + k · n/8 · Σ_{i≤k} bits(q_i)` |
//! | public key ([`crate::additive::PublicKey`]) | seed (32) ‖ b over all moduli | `32 + n/8 · Σ_i bits(q_i)` |
//! | result ciphertext, `d` low bits dropped ([`encode_result_ct_dropped`]) | c0 ‖ c1, power basis, `round(c/2^d)` | `2 · n/8 · (bits(q_1) - d)` |
//!
//! The seeds let the receiver regenerate the uniform polynomials (`c1` of a
//! fresh encryption, the key's `c1`s) with fhe's own expansion, halving the
//! upload. Examples: n 4096 `[40,32|32]`: query 36,896, result 40,960, key
//! 106,528 bytes; n 8192 `[56,56,56|50]`: query 172,064, result 114,688, key
//! 669,728 bytes. Dropping [`safe_drop_bits`] bits shrinks results to 29,696
//! (11 bits) at n 4096 `[40,32|32]` and 61,440 (26 bits) at n 8192 `[56,..]`.

use fhe::bfv::traits::TryConvertFrom as _;
use fhe::bfv::{Ciphertext as FheCiphertext, RelinearizationKey};
use fhe::proto::bfv::{
    KeySwitchingKey as KeySwitchingKeyProto, RelinearizationKey as RelinearizationKeyProto,
};
use fhe_math::rq::{traits::TryConvertFrom, Poly, Representation};
use fhe_traits::{DeserializeWithContext, Serialize};

pub use crate::dropped::{
    decode_result_ct_dropped, encode_result_ct_dropped, result_ct_size_dropped, safe_drop_bits,
};

use crate::ciphertext::Ciphertext;
use crate::error::{backend, HeError};
use crate::keys::RelinKey;
use crate::pack::{bit_width, pack_into, packed_len, unpack_checked};
use crate::params::HeParams;

pub use crate::ciphertext::SEED_LEN;

/// Bytes of one packed polynomial at `level`.
pub(crate) fn poly_size(params: &HeParams, level: usize) -> usize {
    params
        .moduli_at(level)
        .iter()
        .map(|&q| packed_len(params.degree(), bit_width(q)))
        .sum()
}

/// Exact size of [`encode_query_ct`] output.
pub fn query_ct_size(params: &HeParams) -> usize {
    SEED_LEN + poly_size(params, params.query_level())
}

/// Exact size of [`crate::additive::PublicKey::to_bytes`] output: the seed and one
/// polynomial over all moduli.
pub fn public_key_size(params: &HeParams) -> usize {
    SEED_LEN + poly_size(params, 0)
}

/// Checks that `bytes` could be decoded by [`decode_query_ct`] (exact
/// length, every residue below its modulus, zero padding) without building
/// the ciphertext: for message decoders that keep the bytes.
pub fn check_query_ct(params: &HeParams, bytes: &[u8]) -> Result<(), HeError> {
    const WHAT: &str = "query ciphertext";
    check_len(WHAT, query_ct_size(params), bytes)?;
    let n = params.degree();
    let mut offset = SEED_LEN;
    for (row, &q) in params.moduli_at(params.query_level()).iter().enumerate() {
        let width = bit_width(q);
        let len = packed_len(n, width);
        let first_index = row * n;
        let packed = bytes
            .get(offset..offset + len)
            .ok_or(HeError::WireCoefficient {
                what: WHAT,
                index: first_index,
            })?;
        unpack_checked(packed, n, width, q).map_err(|i| HeError::WireCoefficient {
            what: WHAT,
            index: first_index + i,
        })?;
        offset += len;
    }
    Ok(())
}

/// Exact size of [`encode_result_ct`] output.
pub fn result_ct_size(params: &HeParams) -> usize {
    2 * poly_size(params, params.lowest_level())
}

/// Exact size of [`RelinKey::to_bytes`] output.
pub fn relin_key_size(params: &HeParams) -> usize {
    let components = params.moduli_at(params.query_level()).len();
    SEED_LEN + components * poly_size(params, 0)
}

/// Encodes a fresh ciphertext from [`crate::keys::SecretKey::encrypt_slots`] as
/// seed and `c0`. Fails for anything that went through an operation, since
/// that loses the seed.
pub fn encode_query_ct(ct: &Ciphertext) -> Result<Vec<u8>, HeError> {
    ct.check_shape("query ciphertext", ct.params.query_level(), 2)?;
    let seed = ct.seed().ok_or(HeError::NotSeeded)?;
    let mut out = Vec::with_capacity(query_ct_size(&ct.params));
    out.extend_from_slice(seed);
    pack_poly(&mut out, &ct.inner()[0]);
    Ok(out)
}

/// Decodes a query ciphertext: exact length, residues in range, `c1`
/// regenerated from the seed.
pub fn decode_query_ct(params: &HeParams, bytes: &[u8]) -> Result<Ciphertext, HeError> {
    const WHAT: &str = "query ciphertext";
    check_len(WHAT, query_ct_size(params), bytes)?;
    let (seed, rest) = bytes.split_at(SEED_LEN);
    let seed: [u8; SEED_LEN] = seed.try_into().map_err(backend)?;
    let level = params.query_level();
    let c0 = unpack_poly(WHAT, rest, (params, level), Representation::Ntt, 0)?;
    let ctx = params.context_at(level)?;
    let c1 = Poly::random_from_seed(ctx, Representation::Ntt, seed);
    let inner = FheCiphertext::new(vec![c0, c1], params.bfv()).map_err(backend)?;
    Ok(Ciphertext::with_seed(params, inner, seed))
}

/// Encodes a 2-part ciphertext at the lowest level (an evaluation result
/// after [`crate::eval::Evaluator::to_lowest`]).
pub fn encode_result_ct(ct: &Ciphertext) -> Result<Vec<u8>, HeError> {
    ct.check_shape("result ciphertext", ct.params.lowest_level(), 2)?;
    let mut out = Vec::with_capacity(result_ct_size(&ct.params));
    pack_poly(&mut out, &ct.inner()[0]);
    pack_poly(&mut out, &ct.inner()[1]);
    Ok(out)
}

/// Decodes a result ciphertext: exact length, residues in range.
pub fn decode_result_ct(params: &HeParams, bytes: &[u8]) -> Result<Ciphertext, HeError> {
    const WHAT: &str = "result ciphertext";
    check_len(WHAT, result_ct_size(params), bytes)?;
    let at = (params, params.lowest_level());
    let (first, second) = bytes.split_at(bytes.len() / 2);
    let c0 = unpack_poly(WHAT, first, at, Representation::Ntt, 0)?;
    let c1 = unpack_poly(WHAT, second, at, Representation::Ntt, params.degree())?;
    let inner = FheCiphertext::new(vec![c0, c1], params.bfv()).map_err(backend)?;
    Ok(Ciphertext::new(params, inner))
}

/// The relinearization key's wire form, here beside its codec (so that
/// `keys.rs` does not depend on this file, which depends on it).
impl RelinKey {
    /// Compact encoding, [`relin_key_size`] bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, HeError> {
        encode_relin_key(self)
    }

    /// Decodes [`RelinKey::to_bytes`] output, checking length and ranges.
    pub fn from_bytes(params: &HeParams, bytes: &[u8]) -> Result<Self, HeError> {
        if !params.has_key_switching() {
            return Err(HeError::NoKeySwitching);
        }
        decode_relin_key(params, bytes)
    }
}

/// Relinearization key: its seed and the `c0` of each key component. fhe only
/// exposes these through its protobuf, so they are read back from there (our
/// own bytes, trusted).
fn encode_relin_key(key: &RelinKey) -> Result<Vec<u8>, HeError> {
    let params = &key.params;
    let ksk = RelinearizationKeyProto::from(&key.inner)
        .ksk
        .ok_or_else(|| HeError::Backend("relinearization key without components".into()))?;
    if ksk.seed.len() != SEED_LEN {
        return Err(HeError::Backend("relinearization key is not seeded".into()));
    }
    let ctx = params.context_at(0)?;
    let mut out = Vec::with_capacity(relin_key_size(params));
    out.extend_from_slice(&ksk.seed);
    for c0 in &ksk.c0 {
        let poly = Poly::from_bytes(c0, ctx).map_err(backend)?;
        pack_poly(&mut out, &poly);
    }
    if out.len() != relin_key_size(params) {
        return Err(HeError::Backend(
            "unexpected relinearization key shape".into(),
        ));
    }
    Ok(out)
}

/// Decodes a relinearization key. After our own checks the key is rebuilt
/// through fhe's protobuf path with levels we set, not ones from the peer.
fn decode_relin_key(params: &HeParams, bytes: &[u8]) -> Result<RelinKey, HeError> {
    const WHAT: &str = "relinearization key";
    check_len(WHAT, relin_key_size(params), bytes)?;
    let (seed, rest) = bytes.split_at(SEED_LEN);
    let component_len = poly_size(params, 0);
    let per_component = params.degree() * params.moduli().len();
    let c0 = rest
        .chunks_exact(component_len)
        .enumerate()
        .map(|(j, chunk)| {
            unpack_poly(
                WHAT,
                chunk,
                (params, 0),
                Representation::NttShoup,
                j * per_component,
            )
            .map(|poly| poly.to_bytes())
        })
        .collect::<Result<Vec<Vec<u8>>, HeError>>()?;
    let proto = RelinearizationKeyProto {
        ksk: Some(KeySwitchingKeyProto {
            c0,
            c1: Vec::new(),
            seed: seed.to_vec(),
            ciphertext_level: params.query_level() as u32,
            ksk_level: 0,
            log_base: 0,
        }),
    };
    let inner = RelinearizationKey::try_convert_from(&proto, params.bfv()).map_err(backend)?;
    Ok(RelinKey {
        params: params.clone(),
        inner,
    })
}

fn check_len(what: &'static str, expected: usize, bytes: &[u8]) -> Result<(), HeError> {
    if bytes.len() == expected {
        Ok(())
    } else {
        Err(HeError::WireLength {
            what,
            expected,
            found: bytes.len(),
        })
    }
}

/// Appends the NTT-form residues of `poly`, row by row.
pub(crate) fn pack_poly(out: &mut Vec<u8>, poly: &Poly) {
    let coefficients = poly.coefficients();
    for (row, &q) in coefficients.outer_iter().zip(poly.ctx().moduli()) {
        pack_into(out, row.iter().copied(), bit_width(q));
    }
}

/// Reads one polynomial at `level` from exactly its packed size. `first_index`
/// offsets the coefficient index reported on error.
pub(crate) fn unpack_poly(
    what: &'static str,
    bytes: &[u8],
    (params, level): (&HeParams, usize),
    representation: Representation,
    first_index: usize,
) -> Result<Poly, HeError> {
    let ctx = params.context_at(level)?;
    let n = params.degree();
    let mut residues = Vec::with_capacity(n * ctx.moduli().len());
    let mut offset = 0;
    for &q in ctx.moduli() {
        let width = bit_width(q);
        let len = packed_len(n, width);
        let row = bytes
            .get(offset..offset + len)
            .ok_or(HeError::WireCoefficient {
                what,
                index: first_index + residues.len(),
            })?;
        let values = unpack_checked(row, n, width, q).map_err(|i| HeError::WireCoefficient {
            what,
            index: first_index + residues.len() + i,
        })?;
        residues.extend(values);
        offset += len;
    }
    Poly::try_convert_from(residues, ctx, false, representation).map_err(backend)
}
