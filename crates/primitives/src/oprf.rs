//! RFC 9497 oblivious pseudorandom function, mode OPRF (0x00), ciphersuite
//! `ristretto255-SHA512`.
//!
//! # What it gives
//!
//! The server holds a secret key `k`; the PRF is
//! `F(k, x) = SHA-512(len(x) || x || 0x0020 || k·H(x) || "Finalize")`, where
//! `H` hashes onto the ristretto255 group.
//!
//! * **Pseudorandomness.** Without `k`, outputs are indistinguishable from
//!   random (under the one-more gap Diffie–Hellman assumption). A client
//!   learns `F(k, x)` only for the inputs it queries, one per query.
//! * **Obliviousness.** The client sends `r·H(x)` for a uniformly random,
//!   non-zero blind `r`. That element is uniform in the group and independent
//!   of `x`, so the server learns nothing about the input or the output, even
//!   with unbounded computing power.
//! * **Forward secrecy for the client.** Because every query uses a fresh
//!   blind (never reused, never derived from the input), a recorded
//!   transcript stays useless to an attacker that later steals the server key
//!   or the server's state: this is the property the OPRF-based PSI of
//!   Baldi et al. relies on. [`blind`] and [`blind_batch`] always draw new
//!   blinds; there is deliberately no public way to choose one.
//!
//! # Example
//!
//! ```
//! use psikit_primitives::oprf::{self, BlindedElement, EvaluatedElement, ServerKey};
//! use rand_core::OsRng;
//!
//! let key = ServerKey::generate(&mut OsRng);
//!
//! // Client: blind the input and send the encoding.
//! let (blind, blinded) = oprf::blind(b"alice@example.com", &mut OsRng)?;
//! let request = blinded.to_bytes();
//!
//! // Server: decode (untrusted bytes), evaluate, reply.
//! let reply = key.blind_evaluate(&BlindedElement::from_bytes(&request)?).to_bytes();
//!
//! // Client: unblind. The server can compute the same value directly.
//! let evaluated = EvaluatedElement::from_bytes(&reply)?;
//! let output = oprf::finalize(b"alice@example.com", &blind, &evaluated)?;
//! assert_eq!(output, key.evaluate(b"alice@example.com")?);
//! # Ok::<(), oprf::OprfError>(())
//! ```
//!
//! # What it does not give
//!
//! Mode 0 is **not verifiable**. A malicious server can evaluate with a key
//! other than the one it uses for its own items (or a different key per
//! query), which makes the client's outputs wrong or lets the server tag
//! queries. It still cannot learn the client's inputs. Protocols that need
//! the server to be committed to one key must use VOPRF (mode 1), which this
//! module does not implement.
//!
//! # Why hand-written on curve25519-dalek
//!
//! Mode 0 needs only hashing to the group, one scalar multiplication per
//! party and SHA-512, so the whole construction fits in this file and can be
//! checked line by line against the RFC and its test vectors. Owning it lets
//! us shape the API for PSI: the server evaluates millions of its own items
//! with [`ServerKey::evaluate_batch`], and the client batches blinding and
//! unblinding, all spread over rayon. Batches work in chunks that share
//! inversions: unblinding inverts a chunk's blinds with one batched scalar
//! inversion, and every batch path multiplies by half the scalar so that
//! dalek's `double_and_compress_batch` can encode the whole chunk with one
//! field inversion instead of an inverse square root per point. Outputs are
//! byte-for-byte those of the single-item functions.
//!
//! # Side channels
//!
//! Operations on secrets (the server key, blinds, unblinded elements) use
//! dalek's constant-time scalar and point arithmetic. Code branches only on
//! public facts: input lengths, whether a wire element decodes, and the
//! negligible-probability events the RFC tells implementations to reject (a
//! zero scalar, an input hashing to the identity).
//!
//! # Threads
//!
//! The `*_batch` functions run on the current rayon pool: the global pool, or
//! the one entered with `ThreadPool::install`.

use core::fmt;

use curve25519_dalek::ristretto::{CompressedRistretto, RistrettoPoint};
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::IsIdentity;
use rand_core::CryptoRngCore;
use rayon::prelude::*;
use sha2::{Digest, Sha512};
use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

/// RFC 9497 `contextString` for mode OPRF and `ristretto255-SHA512`:
/// `"OPRFV1-" || I2OSP(0x00, 1) || "-" || "ristretto255-SHA512"`.
pub const CONTEXT_STRING: &[u8] = b"OPRFV1-\x00-ristretto255-SHA512";

/// Length of a serialized group element (`Ne`).
pub const ELEMENT_LEN: usize = 32;
/// Length of a serialized scalar, such as a server key (`Ns`).
pub const SCALAR_LEN: usize = 32;
/// Length of a PRF output (`Nh`, the SHA-512 digest size).
pub const OUTPUT_LEN: usize = 64;
/// Longest accepted PRF input: the RFC encodes the length in two bytes.
pub const MAX_INPUT_LEN: usize = u16::MAX as usize;

/// One PRF output, `F(k, x)`.
pub type Output = [u8; OUTPUT_LEN];

/// `"HashToGroup-" || contextString`.
const HASH_TO_GROUP_DST: &[u8] = b"HashToGroup-OPRFV1-\x00-ristretto255-SHA512";
/// `"DeriveKeyPair" || contextString`.
const DERIVE_KEY_PAIR_DST: &[u8] = b"DeriveKeyPairOPRFV1-\x00-ristretto255-SHA512";
/// Tag closing the hash that turns an unblinded element into the output.
const FINALIZE_LABEL: &[u8] = b"Finalize";

/// SHA-512 digest size (`b_in_bytes` in RFC 9380).
const XMD_DIGEST_LEN: usize = 64;
/// SHA-512 input block size (`s_in_bytes` in RFC 9380).
const XMD_BLOCK_LEN: usize = 128;
/// Longest output of `expand_message_xmd`: 255 digest blocks.
const XMD_MAX_OUT: usize = 255 * XMD_DIGEST_LEN;

/// Largest work unit of the batch functions. Each chunk shares one field
/// inversion for point compression (and, in [`finalize_batch`], one scalar
/// inversion), so bigger is cheaper until the chunk count starves threads.
const MAX_CHUNK: usize = 256;
/// Smallest work unit, so that even small batches share their inversions.
const MIN_CHUNK: usize = 16;

/// Everything that can go wrong in this module.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OprfError {
    /// The PRF input does not fit the RFC's 2-byte length prefix.
    #[error("OPRF input is {len} bytes; at most {MAX_INPUT_LEN} bytes are allowed")]
    InputTooLong {
        /// Length of the rejected input.
        len: usize,
    },
    /// The key-derivation `info` string does not fit its 2-byte length prefix.
    #[error("key info is {len} bytes; at most {MAX_INPUT_LEN} bytes are allowed")]
    InfoTooLong {
        /// Length of the rejected info string.
        len: usize,
    },
    /// The input hashed to the identity element (RFC `InvalidInputError`);
    /// this happens with negligible probability.
    #[error("OPRF input hashes to the identity element")]
    InvalidInput,
    /// A byte string has the wrong length for what it should encode.
    #[error("{what} must be {expected} bytes, got {actual}")]
    WrongLength {
        /// What was being decoded.
        what: &'static str,
        /// Required length.
        expected: usize,
        /// Length received.
        actual: usize,
    },
    /// A buffer of concatenated elements is not a whole number of elements.
    #[error("{len} bytes is not a whole number of {ELEMENT_LEN}-byte group elements")]
    RaggedElements {
        /// Length of the rejected buffer.
        len: usize,
    },
    /// 32 bytes that are not the canonical encoding of a ristretto255 element.
    #[error("bytes are not a canonical ristretto255 element encoding")]
    InvalidElement,
    /// The identity element, which RFC 9497 forbids in messages.
    #[error("group element is the identity, which is not allowed")]
    IdentityElement,
    /// A scalar encoding that is not reduced modulo the group order.
    #[error("scalar is not canonically encoded (it must be below the group order)")]
    NonCanonicalScalar,
    /// A zero scalar, which is not a valid key.
    #[error("scalar is zero, which is not a valid key")]
    ZeroScalar,
    /// `DeriveKeyPair` hashed to zero 256 times in a row (never in practice).
    #[error("DeriveKeyPair found no non-zero scalar in 256 attempts")]
    DeriveKeyPairFailed,
    /// Batch arguments that must be parallel slices have different lengths.
    #[error(
        "batch lengths differ: {inputs} inputs, {blinds} blinds, {evaluated} evaluated elements"
    )]
    BatchLengthMismatch {
        /// Number of inputs.
        inputs: usize,
        /// Number of blinds.
        blinds: usize,
        /// Number of evaluated elements.
        evaluated: usize,
    },
    /// Arguments outside what `expand_message_xmd` (RFC 9380) allows.
    #[error("expand_message_xmd: {0}")]
    ExpandMessage(&'static str),
    /// One item of a batch failed; `index` is its position in the batch.
    #[error("batch item {index}: {source}")]
    BatchItem {
        /// Position of the failing item.
        index: usize,
        /// Why it failed.
        source: Box<OprfError>,
    },
}

impl OprfError {
    /// Wraps an error with the batch position it happened at.
    fn at(index: usize) -> impl Fn(OprfError) -> OprfError {
        move |e| OprfError::BatchItem {
            index,
            source: Box::new(e),
        }
    }
}

/// Result type of this module.
pub type Result<T, E = OprfError> = core::result::Result<T, E>;

// ---------------------------------------------------------------------------
// Hashing (RFC 9380 expand_message_xmd, RFC 9497 HashToGroup / HashToScalar)
// ---------------------------------------------------------------------------

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
fn xmd(msg_parts: &[&[u8]], dst: &[u8], out: &mut [u8]) {
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
fn hash_to_group(input: &[u8]) -> RistrettoPoint {
    let mut uniform = [0u8; 64];
    xmd(&[input], HASH_TO_GROUP_DST, &mut uniform);
    RistrettoPoint::from_uniform_bytes(&uniform)
}

/// RFC 9497 `HashToScalar` for ristretto255 with an explicit DST: 64 bytes
/// of `expand_message_xmd`, read little-endian and reduced mod the order.
fn hash_to_scalar(msg_parts: &[&[u8]], dst: &[u8]) -> Scalar {
    let mut uniform = Zeroizing::new([0u8; 64]);
    xmd(msg_parts, dst, uniform.as_mut());
    Scalar::from_bytes_mod_order_wide(&uniform)
}

/// Rejects inputs whose length the RFC's 2-byte prefix cannot encode.
fn check_input_len(input: &[u8]) -> Result<()> {
    if input.len() > MAX_INPUT_LEN {
        return Err(OprfError::InputTooLong { len: input.len() });
    }
    Ok(())
}

/// Hashes a PRF input to the group, applying the RFC's input checks.
fn hash_input(input: &[u8]) -> Result<RistrettoPoint> {
    check_input_len(input)?;
    let point = hash_to_group(input);
    if point.is_identity() {
        return Err(OprfError::InvalidInput);
    }
    Ok(point)
}

/// Checks every input's length up front, so a batch fails before it draws
/// randomness or spends time on curve arithmetic.
fn check_input_lengths<T: AsRef<[u8]>>(inputs: &[T]) -> Result<()> {
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
fn output_hash(input: &[u8], element: &[u8; ELEMENT_LEN]) -> Output {
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
fn chunk_len(n: usize) -> usize {
    (n / (4 * rayon::current_num_threads())).clamp(MIN_CHUNK, MAX_CHUNK)
}

/// `scalars[i]·H(inputs[i])` for each input of a chunk (hashing and
/// multiplying item by item keeps each point hot in cache); errors carry
/// batch indices counted from `first`.
fn hash_and_mul_chunk<'a, T: AsRef<[u8]>>(
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

/// The encodings of `2·h` for each `h`. dalek compresses doubled points in a
/// batch with one shared field inversion, where compressing one point costs
/// an inverse square root; callers therefore compute `(k/2)·P` and get the
/// encoding of `k·P` at a fraction of the price, with identical bytes.
fn double_and_encode(halves: &[RistrettoPoint]) -> Vec<[u8; ELEMENT_LEN]> {
    RistrettoPoint::double_and_compress_batch(halves)
        .into_iter()
        .map(|c| c.to_bytes())
        .collect()
}

/// Wire elements for `2·h` for each `h` (see [`double_and_encode`]).
fn doubled_elements(halves: &[RistrettoPoint]) -> Vec<WireElement> {
    let encodings = double_and_encode(halves);
    halves
        .iter()
        .zip(encodings)
        .map(|(h, bytes)| WireElement {
            point: h + h,
            bytes,
        })
        .collect()
}

/// `1/2` mod the group order, for the halved scalars above.
fn half() -> Scalar {
    Scalar::from(2u8).invert()
}

/// RFC 9497 `RandomScalar`: a uniform non-zero scalar. Rejection only
/// reveals that a zero was drawn, which has probability about 2^-252.
fn random_nonzero_scalar<R: CryptoRngCore + ?Sized>(rng: &mut R) -> Scalar {
    loop {
        let s = Scalar::random(rng);
        if s != Scalar::ZERO {
            return s;
        }
    }
}

// ---------------------------------------------------------------------------
// Wire elements
// ---------------------------------------------------------------------------

/// A validated group element together with its canonical encoding, so
/// sending it never re-compresses and receiving it decompresses once.
#[derive(Clone, Copy)]
struct WireElement {
    point: RistrettoPoint,
    bytes: [u8; ELEMENT_LEN],
}

impl WireElement {
    fn from_point(point: RistrettoPoint) -> Self {
        let bytes = point.compress().to_bytes();
        Self { point, bytes }
    }

    /// RFC 9497 `DeserializeElement`: canonical encoding, not the identity.
    fn decode(bytes: &[u8], what: &'static str) -> Result<Self> {
        let bytes: [u8; ELEMENT_LEN] = bytes.try_into().map_err(|_| OprfError::WrongLength {
            what,
            expected: ELEMENT_LEN,
            actual: bytes.len(),
        })?;
        let point = CompressedRistretto(bytes)
            .decompress()
            .ok_or(OprfError::InvalidElement)?;
        if point.is_identity() {
            return Err(OprfError::IdentityElement);
        }
        Ok(Self { point, bytes })
    }

    /// Decodes `ELEMENT_LEN`-byte encodings laid end to end, in parallel.
    fn decode_concatenated(buf: &[u8], what: &'static str) -> Result<Vec<Self>> {
        if !buf.len().is_multiple_of(ELEMENT_LEN) {
            return Err(OprfError::RaggedElements { len: buf.len() });
        }
        buf.par_chunks_exact(ELEMENT_LEN)
            .enumerate()
            .map(|(i, chunk)| Self::decode(chunk, what).map_err(OprfError::at(i)))
            .collect()
    }

    fn fmt_hex(&self, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{name}(")?;
        self.bytes.iter().try_for_each(|b| write!(f, "{b:02x}"))?;
        write!(f, ")")
    }
}

/// Defines a public wire type wrapping [`WireElement`]. Both message types
/// decode identically; separate types stop a caller from sending one where
/// the other is expected.
macro_rules! wire_type {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy)]
        pub struct $name(WireElement);

        impl $name {
            /// Decodes a message from the peer. Rejects wrong lengths,
            /// non-canonical encodings and the identity; never panics.
            pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
                WireElement::decode(bytes, $what).map(Self)
            }

            /// Decodes many messages sent back to back (32 bytes each), in
            /// parallel. Errors carry the index of the first bad element.
            pub fn decode_concatenated(buf: &[u8]) -> Result<Vec<Self>> {
                let items = WireElement::decode_concatenated(buf, $what)?;
                Ok(items.into_iter().map(Self).collect())
            }

            /// The 32-byte canonical encoding, to send to the peer.
            pub fn to_bytes(&self) -> [u8; ELEMENT_LEN] {
                self.0.bytes
            }

            /// The 32-byte canonical encoding, borrowed.
            pub fn as_bytes(&self) -> &[u8; ELEMENT_LEN] {
                &self.0.bytes
            }

            /// Concatenates the encodings of `items`, the inverse of
            /// [`Self::decode_concatenated`].
            pub fn encode_concatenated(items: &[Self]) -> Vec<u8> {
                items.iter().flat_map(|e| e.0.bytes).collect()
            }

            fn from_point(point: RistrettoPoint) -> Self {
                Self(WireElement::from_point(point))
            }

            fn point(&self) -> &RistrettoPoint {
                &self.0.point
            }
        }

        /// Encodings are canonical, so byte equality is group equality.
        impl PartialEq for $name {
            fn eq(&self, other: &Self) -> bool {
                self.0.bytes == other.0.bytes
            }
        }

        impl Eq for $name {}

        /// Public wire data: shown as hex.
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt_hex(stringify!($name), f)
            }
        }
    };
}

wire_type!(
    /// Client → server message: the blinded input `r·H(x)`.
    BlindedElement,
    "blinded element"
);

wire_type!(
    /// Server → client message: `k·r·H(x)`.
    EvaluatedElement,
    "evaluated element"
);

// ---------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------

/// The server's secret PRF key: a non-zero scalar. Wiped from memory on
/// drop; `Debug` never shows it.
pub struct ServerKey {
    sk: Scalar,
    /// `sk / 2`, for batch evaluation (see [`double_and_encode`]).
    half_sk: Scalar,
}

// Wiped only on drop: a public `zeroize()` would leave a usable zero key.
impl Drop for ServerKey {
    fn drop(&mut self) {
        self.sk.zeroize();
        self.half_sk.zeroize();
    }
}

impl ZeroizeOnDrop for ServerKey {}

impl fmt::Debug for ServerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ServerKey(<secret>)")
    }
}

impl ServerKey {
    /// Wraps a scalar the caller has checked to be non-zero.
    fn from_nonzero(sk: Scalar) -> Self {
        Self {
            half_sk: sk * half(),
            sk,
        }
    }

    /// A fresh random key (RFC `GenerateKeyPair`, public half omitted since
    /// mode 0 never uses it).
    pub fn generate<R: CryptoRngCore + ?Sized>(rng: &mut R) -> Self {
        Self::from_nonzero(random_nonzero_scalar(rng))
    }

    /// RFC 9497 `DeriveKeyPair`: the key determined by a 32-byte secret seed
    /// and a public `info` string, so a server can recreate its key.
    pub fn derive(seed: &[u8; SCALAR_LEN], info: &[u8]) -> Result<Self> {
        let info_len = u16::try_from(info.len())
            .map_err(|_| OprfError::InfoTooLong { len: info.len() })?
            .to_be_bytes();
        for counter in 0..=u8::MAX {
            let parts: [&[u8]; 4] = [seed, &info_len, info, &[counter]];
            let sk = hash_to_scalar(&parts, DERIVE_KEY_PAIR_DST);
            if sk != Scalar::ZERO {
                return Ok(Self::from_nonzero(sk));
            }
        }
        Err(OprfError::DeriveKeyPairFailed)
    }

    /// Parses a key saved with [`Self::to_bytes`]: 32 little-endian bytes,
    /// canonical (below the group order) and non-zero.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let bytes: Zeroizing<[u8; SCALAR_LEN]> =
            Zeroizing::new(bytes.try_into().map_err(|_| OprfError::WrongLength {
                what: "server key",
                expected: SCALAR_LEN,
                actual: bytes.len(),
            })?);
        let sk: Option<Scalar> = Scalar::from_canonical_bytes(*bytes).into();
        let sk = sk.ok_or(OprfError::NonCanonicalScalar)?;
        if sk == Scalar::ZERO {
            return Err(OprfError::ZeroScalar);
        }
        Ok(Self::from_nonzero(sk))
    }

    /// The key's 32-byte little-endian encoding (RFC `SerializeScalar`).
    /// This is the secret itself: store it like one.
    pub fn to_bytes(&self) -> [u8; SCALAR_LEN] {
        self.sk.to_bytes()
    }

    /// RFC 9497 `BlindEvaluate`: answers one client query.
    pub fn blind_evaluate(&self, blinded: &BlindedElement) -> EvaluatedElement {
        EvaluatedElement::from_point(blinded.point() * self.sk)
    }

    /// [`Self::blind_evaluate`] for many queries, in parallel, in order.
    pub fn blind_evaluate_batch(&self, blinded: &[BlindedElement]) -> Vec<EvaluatedElement> {
        let chunk = chunk_len(blinded.len());
        let parts: Vec<Vec<EvaluatedElement>> = blinded
            .par_chunks(chunk)
            .map(|part| self.blind_evaluate_chunk(part))
            .collect();
        parts.into_iter().flatten().collect()
    }

    fn blind_evaluate_chunk(&self, blinded: &[BlindedElement]) -> Vec<EvaluatedElement> {
        let halves: Vec<RistrettoPoint> =
            blinded.iter().map(|b| b.point() * self.half_sk).collect();
        doubled_elements(&halves)
            .into_iter()
            .map(EvaluatedElement)
            .collect()
    }

    /// RFC 9497 `Evaluate`: the PRF output for the server's own input,
    /// equal to what a client gets from blind / blind-evaluate / finalize.
    pub fn evaluate(&self, input: &[u8]) -> Result<Output> {
        let point = hash_input(input)?;
        Ok(output_hash(input, (point * self.sk).compress().as_bytes()))
    }

    /// [`Self::evaluate`] for many inputs, in parallel, in order. If any
    /// input is too long it fails before any curve arithmetic; errors name
    /// the index of the bad input.
    pub fn evaluate_batch<T: AsRef<[u8]> + Sync>(&self, inputs: &[T]) -> Result<Vec<Output>> {
        check_input_lengths(inputs)?;
        let chunk = chunk_len(inputs.len());
        let parts: Vec<Vec<Output>> = inputs
            .par_chunks(chunk)
            .enumerate()
            .map(|(c, part)| self.evaluate_chunk(part, c * chunk))
            .collect::<Result<_>>()?;
        Ok(parts.into_iter().flatten().collect())
    }

    fn evaluate_chunk<T: AsRef<[u8]>>(&self, inputs: &[T], first: usize) -> Result<Vec<Output>> {
        let halves = hash_and_mul_chunk(inputs, core::iter::repeat(&self.half_sk), first)?;
        let encodings = double_and_encode(&halves);
        Ok(inputs
            .iter()
            .zip(&encodings)
            .map(|(x, e)| output_hash(x.as_ref(), e))
            .collect())
    }
}

// ---------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------

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
fn blind_with(point: &RistrettoPoint, r: Scalar) -> (Blind, BlindedElement) {
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
fn blind_chunk<T: AsRef<[u8]>>(
    inputs: &[T],
    halves: &[Scalar],
    first: usize,
) -> Result<Vec<BlindedElement>> {
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
fn finalize_chunk<T: AsRef<[u8]>>(
    inputs: &[T],
    blinds: &[Blind],
    evaluated: &[EvaluatedElement],
) -> Vec<Output> {
    // Inverting 2r (never zero, as batch_invert requires) gives half of
    // 1/r, so the unblinded points come out ready for double_and_encode.
    let mut inverses: Zeroizing<Vec<Scalar>> =
        Zeroizing::new(blinds.iter().map(|b| b.r + b.r).collect());
    let mut product_inverse = Scalar::batch_invert(&mut inverses);
    product_inverse.zeroize();
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

#[cfg(test)]
mod tests;
