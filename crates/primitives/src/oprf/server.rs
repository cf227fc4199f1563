//! The server's side: its secret key and the evaluation of blinded and
//! plain inputs.

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
        if let Some(kernel) = Kernel::detect() {
            let elements: Vec<WireElement> = blinded.iter().map(|b| b.0).collect();
            let half_sk = Zeroizing::new(self.half_sk.to_bytes());
            return mul_encode(kernel, &elements, Scalars::One(&half_sk))
                .into_iter()
                .map(|e| EvaluatedElement(WireElement::from_valid_bytes(e)))
                .collect();
        }
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
        if let Some(kernel) = Kernel::detect() {
            let half_sk = Zeroizing::new(self.half_sk.to_bytes());
            let encodings = hash_mul_encode(kernel, inputs, Scalars::One(&half_sk), first)?;
            return Ok(inputs
                .iter()
                .zip(&encodings)
                .map(|(x, e)| output_hash(x.as_ref(), e))
                .collect());
        }
        let halves = hash_and_mul_chunk(inputs, core::iter::repeat(&self.half_sk), first)?;
        let encodings = double_and_encode(&halves);
        Ok(inputs
            .iter()
            .zip(&encodings)
            .map(|(x, e)| output_hash(x.as_ref(), e))
            .collect())
    }
}
