//! Hashing (RFC 9380 `expand_message_xmd`, RFC 9497 `HashToGroup` and
//! `HashToScalar`, the final output hash) and the batch helpers that
//! server and client share.

use super::suite::*;
use super::wire::WireElement;
use crate::ristretto::{self, Coordinates, Kernel, Outcome, Scalars, Source};
use curve25519_dalek::ristretto::RistrettoPoint;
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::IsIdentity;
use rand_core::CryptoRngCore;
use sha2::{Digest, Sha512};
use zeroize::Zeroizing;

/// RFC 9380 `expand_message_xmd` with SHA-512: fills `out` with
/// `out.len()` pseudorandom bytes derived from `msg` under domain tag `dst`.
///
/// Fails if `dst` is longer than 255 bytes (the RFC's oversize-DST hashing
/// is not implemented because no tag here needs it) or if `out` is longer
/// than 255 × 64 bytes.
pub fn expand_message_xmd(msg: &[u8], dst: &[u8], out: &mut [u8]) -> Result<()> {
    if dst.len() > 255 {
        return Err(OprfError::ExpandMessage("DST longer than 255 bytes"));
    }
    if out.len() > XMD_MAX_OUT {
        return Err(OprfError::ExpandMessage("output longer than 16320 bytes"));
    }
    xmd(&[msg], dst, out);
    Ok(())
}

/// `expand_message_xmd` over the concatenation of `msg_parts`, without
/// argument checks: callers guarantee `dst.len() <= 255` and
/// `out.len() <= XMD_MAX_OUT`. Taking parts avoids allocating to concatenate.
pub(super) fn xmd(msg_parts: &[&[u8]], dst: &[u8], out: &mut [u8]) {
    debug_assert!(dst.len() <= 255 && out.len() <= XMD_MAX_OUT);
    // Both casts are lossless under the preconditions above.
    let dst_len = [dst.len() as u8];
    let out_len = (out.len() as u16).to_be_bytes();

    let mut h = Sha512::new();
    h.update([0u8; XMD_BLOCK_LEN]);
    for part in msg_parts {
        h.update(part);
    }
    h.update(out_len);
    h.update([0u8]);
    h.update(dst);
    h.update(dst_len);
    let b0 = h.finalize();

    // b_1 = H(b_0 || 1 || DST'), b_i = H((b_0 xor b_{i-1}) || i || DST').
    // Starting from b_{0} := zeros makes the first round the xor-free one.
    let mut prev = [0u8; XMD_DIGEST_LEN];
    for (i, chunk) in out.chunks_mut(XMD_DIGEST_LEN).enumerate() {
        let mut block = prev;
        block.iter_mut().zip(b0.iter()).for_each(|(p, b)| *p ^= b);
        let bi = Sha512::new()
            .chain_update(block)
            .chain_update([(i + 1) as u8])
            .chain_update(dst)
            .chain_update(dst_len)
            .finalize();
        chunk.copy_from_slice(&bi[..chunk.len()]);
        prev.copy_from_slice(&bi);
    }
}

/// RFC 9497 `HashToGroup` for ristretto255: `hash_to_ristretto255` from
/// RFC 9380 with DST `"HashToGroup-" || contextString`.
pub(super) fn hash_to_group(input: &[u8]) -> RistrettoPoint {
    let mut uniform = [0u8; 64];
    xmd(&[input], HASH_TO_GROUP_DST, &mut uniform);
    map_to_group(&uniform)
}

/// RFC 9496 `element_derivation`: 64 uniform bytes to a group element
/// (two Elligator maps, added); the RFC's Appendix A.3 vectors test it.
pub(super) fn map_to_group(uniform: &[u8; 64]) -> RistrettoPoint {
    RistrettoPoint::from_uniform_bytes(uniform)
}

/// RFC 9497 `HashToScalar` for ristretto255 with an explicit DST: 64 bytes
/// of `expand_message_xmd`, read little-endian and reduced mod the order.
pub(super) fn hash_to_scalar(msg_parts: &[&[u8]], dst: &[u8]) -> Scalar {
    let mut uniform = Zeroizing::new([0u8; 64]);
    xmd(msg_parts, dst, uniform.as_mut());
    Scalar::from_bytes_mod_order_wide(&uniform)
}

/// Rejects inputs whose length the RFC's 2-byte prefix cannot encode.
pub(super) fn check_input_len(input: &[u8]) -> Result<()> {
    if input.len() > MAX_INPUT_LEN {
        return Err(OprfError::InputTooLong { len: input.len() });
    }
    Ok(())
}

/// Hashes a PRF input to the group, applying the RFC's input checks.
pub(super) fn hash_input(input: &[u8]) -> Result<RistrettoPoint> {
    check_input_len(input)?;
    let point = hash_to_group(input);
    if point.is_identity() {
        return Err(OprfError::InvalidInput);
    }
    Ok(point)
}

/// Checks every input's length up front, so a batch fails before it draws
/// randomness or spends time on curve arithmetic.
pub(super) fn check_input_lengths<T: AsRef<[u8]>>(inputs: &[T]) -> Result<()> {
    inputs
        .iter()
        .enumerate()
        .try_for_each(|(i, x)| check_input_len(x.as_ref()).map_err(OprfError::at(i)))
}

/// The final hash shared by client `Finalize` and server `Evaluate`:
/// `Hash(I2OSP(len(input), 2) || input || I2OSP(Ne, 2) || element || "Finalize")`,
/// where `element` is the encoding of `k·H(input)`.
///
/// `input` must already be known to fit in 2 length bytes.
pub(super) fn output_hash(input: &[u8], element: &[u8; ELEMENT_LEN]) -> Output {
    debug_assert!(input.len() <= MAX_INPUT_LEN);
    let digest = Sha512::new()
        .chain_update((input.len() as u16).to_be_bytes())
        .chain_update(input)
        .chain_update((ELEMENT_LEN as u16).to_be_bytes())
        .chain_update(element)
        .chain_update(FINALIZE_LABEL)
        .finalize();
    let mut out = [0u8; OUTPUT_LEN];
    out.copy_from_slice(&digest);
    out
}

/// Work-unit size for a batch of `n`: about four chunks per thread so the
/// threads stay balanced, between `MIN_CHUNK` and `MAX_CHUNK`.
pub(super) fn chunk_len(n: usize) -> usize {
    (n / (4 * rayon::current_num_threads())).clamp(MIN_CHUNK, MAX_CHUNK)
}

/// `scalars[i]·H(inputs[i])` for each input of a chunk (hashing and
/// multiplying item by item keeps each point hot in cache); errors carry
/// batch indices counted from `first`.
pub(super) fn hash_and_mul_chunk<'a, T: AsRef<[u8]>>(
    inputs: &[T],
    scalars: impl Iterator<Item = &'a Scalar>,
    first: usize,
) -> Result<Vec<RistrettoPoint>> {
    inputs
        .iter()
        .zip(scalars)
        .enumerate()
        .map(|(j, (x, s))| {
            let point = hash_input(x.as_ref()).map_err(OprfError::at(first + j))?;
            Ok(point * s)
        })
        .collect()
}

/// The multi-buffer kernel's `2·scalars·H(inputs[i])` encodings (callers
/// pass halves, as for [`double_and_encode`]) for one chunk whose input
/// lengths are checked; errors carry batch indices counted from `first`.
pub(super) fn hash_mul_encode<T: AsRef<[u8]>>(
    kernel: Kernel,
    inputs: &[T],
    scalars: Scalars,
    first: usize,
) -> Result<Vec<[u8; ELEMENT_LEN]>> {
    let uniform: Zeroizing<Vec<[u8; 64]>> = Zeroizing::new(
        inputs
            .iter()
            .map(|x| {
                let mut u = [0u8; 64];
                xmd(&[x.as_ref()], HASH_TO_GROUP_DST, &mut u);
                u
            })
            .collect(),
    );
    let mut outcomes = vec![Outcome::Invalid; inputs.len()];
    ristretto::mul_batch(kernel, Source::Uniform(&uniform), scalars, &mut outcomes);
    outcomes
        .into_iter()
        .enumerate()
        .map(|(j, o)| match o {
            Outcome::Product(encoding) => Ok(encoding),
            // Only the identity can come out of the map.
            Outcome::Identity | Outcome::Invalid => {
                Err(OprfError::at(first + j)(OprfError::InvalidInput))
            }
        })
        .collect()
}

/// The multi-buffer kernel's `2·scalars·P` encodings for validated wire
/// elements `P` (callers pass halves). Elements the kernel decoded when
/// they arrived are not decoded again.
pub(super) fn mul_encode(
    kernel: Kernel,
    elements: &[WireElement],
    scalars: Scalars,
) -> Vec<[u8; ELEMENT_LEN]> {
    let decoded: Option<Vec<Coordinates>> =
        elements.iter().map(|e| e.coordinates().copied()).collect();
    let encoded: Vec<[u8; ELEMENT_LEN]>;
    let source = match &decoded {
        Some(points) => Source::Decoded(points),
        None => {
            encoded = elements.iter().map(WireElement::bytes).collect();
            Source::Encoded(&encoded)
        }
    };
    let mut outcomes = vec![Outcome::Invalid; elements.len()];
    ristretto::mul_batch(kernel, source, scalars, &mut outcomes);
    outcomes
        .into_iter()
        .map(|o| match o {
            Outcome::Product(encoding) => encoding,
            // Wire elements are validated when made, and the kernel
            // agrees with dalek on validity (ristretto/tests.rs).
            Outcome::Invalid | Outcome::Identity => unreachable!("wire elements are valid"),
        })
        .collect()
}

/// The encodings of `2·h` for each `h`. dalek compresses doubled points in a
/// batch with one shared field inversion, where compressing one point costs
/// an inverse square root; callers therefore compute `(k/2)·P` and get the
/// encoding of `k·P` at a fraction of the price, with identical bytes.
pub(super) fn double_and_encode(halves: &[RistrettoPoint]) -> Vec<[u8; ELEMENT_LEN]> {
    RistrettoPoint::double_and_compress_batch(halves)
        .into_iter()
        .map(|c| c.to_bytes())
        .collect()
}

/// `1/2` mod the group order, for the halved scalars above.
pub(super) fn half() -> Scalar {
    Scalar::from(2u8).invert()
}

/// RFC 9497 `RandomScalar`: a uniform non-zero scalar. Rejection only
/// reveals that a zero was drawn, which has probability about 2^-252.
pub(super) fn random_nonzero_scalar<R: CryptoRngCore + ?Sized>(rng: &mut R) -> Scalar {
    loop {
        let s = Scalar::random(rng);
        if s != Scalar::ZERO {
            return s;
        }
    }
}
