//! The client's keys: a ternary secret key and the relinearization key.

use std::fmt;

use fhe::bfv::{
    Ciphertext as FheCiphertext, Encoding, RelinearizationKey, SecretKey as FheSecretKey,
};
use fhe::proto::bfv::SecretKey as SecretKeyProto;
use fhe_math::rq::{traits::TryConvertFrom, Poly, Representation};
use fhe_math::zq::Modulus;
use fhe_traits::{DeserializeParametrized, FheDecoder, FheDecrypter};
use prost::Message;
use rand09::RngCore;
use zeroize::{Zeroize, Zeroizing};

use crate::ciphertext::{Ciphertext, SEED_LEN};
use crate::error::{backend, HeError};
use crate::params::{HeParams, ERROR_VARIANCE};

/// The client's BFV secret key, with coefficients uniform in {-1, 0, 1}.
///
/// Why ternary: the 128-bit modulus table ([`crate::security`]) is computed
/// for ternary secrets, and a ternary `s` adds less noise to every product
/// than fhe's default centered-binomial secret (variance 10), which makes
/// APSI's parameter files decrypt reliably (design note, section 9). fhe has
/// no ternary sampler, so the coefficients are drawn here from the OS-seeded
/// CSPRNG and handed to fhe through its public protobuf key format. fhe
/// zeroizes the coefficients when the key is dropped; our temporary copies are
/// zeroized too (best effort: prost's decoder may leave freed copies).
pub struct SecretKey {
    params: HeParams,
    pub(crate) inner: FheSecretKey,
    /// `s` in NTT form at the query level, kept so that encryption does
    /// not transform it again each time (fhe does).
    s_ntt: Zeroizing<Poly>,
    /// `floor(Q·m/t)` is `[(Q mod t)·m]_t · (-t⁻¹ mod Q)` (fhe's encoding):
    /// `Q mod t` and `-t⁻¹ mod q_i` for the query-level moduli.
    q_mod_t: u64,
    neg_t_inv: Vec<u64>,
}

impl SecretKey {
    /// Samples a fresh ternary secret key.
    pub fn generate(params: &HeParams) -> Result<Self, HeError> {
        let mut proto = SecretKeyProto {
            coeffs: ternary_coefficients(params.degree()),
        };
        let ctx = params.context_at(params.query_level())?;
        let mut s_ntt = Zeroizing::new(
            Poly::try_convert_from(
                proto.coeffs.as_slice(),
                ctx,
                false,
                Representation::PowerBasis,
            )
            .map_err(backend)?,
        );
        s_ntt.change_representation(Representation::Ntt);
        let bytes = Zeroizing::new(proto.encode_to_vec());
        proto.coeffs.zeroize();
        let inner = FheSecretKey::from_bytes(&bytes, params.bfv()).map_err(backend)?;
        let t = params.plain_modulus();
        let q_mod_t =
            ctx.moduli()
                .iter()
                .fold(1u128, |acc, &q| acc * u128::from(q % t) % u128::from(t)) as u64;
        let neg_t_inv = ctx
            .moduli()
            .iter()
            .map(|&q| {
                let qi = Modulus::new(q).map_err(backend)?;
                let t_inv = qi
                    .inv(t % q)
                    .ok_or_else(|| HeError::Backend(format!("t has no inverse mod {q}")))?;
                Ok(qi.neg(t_inv))
            })
            .collect::<Result<Vec<u64>, HeError>>()?;
        Ok(Self {
            params: params.clone(),
            inner,
            s_ntt,
            q_mod_t,
            neg_t_inv,
        })
    }

    /// The parameters of this key.
    pub fn params(&self) -> &HeParams {
        &self.params
    }

    /// Encrypts up to `n` slot values (each below `t`; missing slots are 0)
    /// as a fresh ciphertext at the query level.
    ///
    /// Secret-key encryption: `(Δm + e - a·s, a)` with `a` expanded from a
    /// random 32-byte seed, so the query wire form sends the seed instead of
    /// `a` and is half the size ([`crate::wire::encode_query_ct`]).
    ///
    /// The same ciphertext distribution as fhe's `SecretKey::try_encrypt`
    /// (uniform `a` from a ChaCha8 seed, centered binomial `e`, the message
    /// as `floor(Q·m/t)`), computed with two NTTs instead of six: `s` is
    /// kept in NTT form and `e + floor(Q·m/t)` is transformed once.
    pub fn encrypt_slots(&self, slots: &[u64]) -> Result<Ciphertext, HeError> {
        let params = &self.params;
        let mut m = params.slots_to_coeffs(slots)?;
        let ctx = params.context_at(params.query_level())?;
        let plain = Modulus::new(params.plain_modulus()).map_err(backend)?;
        plain.scalar_mul_vec(&mut m, self.q_mod_t);
        let n = params.degree();
        let mut scaled = Zeroizing::new(Vec::with_capacity(n * ctx.moduli().len()));
        for (&q, &factor) in ctx.moduli().iter().zip(&self.neg_t_inv) {
            let start = scaled.len();
            scaled.extend_from_slice(&m);
            Modulus::new(q)
                .map_err(backend)?
                .scalar_mul_vec(&mut scaled[start..], factor);
        }
        m.zeroize();
        let mut rng = rand09::rng();
        let mut c0 = Poly::small(ctx, Representation::PowerBasis, ERROR_VARIANCE, &mut rng)
            .map_err(backend)?;
        let encoded = Zeroizing::new(
            Poly::try_convert_from(scaled.as_slice(), ctx, false, Representation::PowerBasis)
                .map_err(backend)?,
        );
        c0 += encoded.as_ref();
        c0.change_representation(Representation::Ntt);
        let mut seed = [0u8; SEED_LEN];
        rng.fill_bytes(&mut seed);
        let a = Poly::random_from_seed(ctx, Representation::Ntt, seed);
        let a_s = Zeroizing::new(&a * &*self.s_ntt);
        c0 -= &*a_s;
        let ct = FheCiphertext::new(vec![c0, a], params.bfv()).map_err(backend)?;
        Ok(Ciphertext::with_seed(params, ct, seed))
    }

    /// Decrypts a ciphertext of any level (2 or 3 parts) to its `n` slots.
    pub fn decrypt_slots(&self, ct: &Ciphertext) -> Result<Vec<u64>, HeError> {
        ct.check_params(&self.params)?;
        let pt = self.inner.try_decrypt(ct.inner()).map_err(backend)?;
        Vec::<u64>::try_decode(&pt, Encoding::simd()).map_err(backend)
    }

    /// Bits of the largest noise coefficient in `ct` (fhe's `measure_noise`).
    ///
    /// Diagnostic for tests and the parameter self-test only: it runs in time
    /// that depends on the noise, so never call it on a peer-visible path.
    #[allow(unsafe_code)]
    pub fn noise_bits(&self, ct: &Ciphertext) -> Result<usize, HeError> {
        ct.check_params(&self.params)?;
        // SAFETY: `measure_noise` is `unsafe` only because its running time
        // depends on the noise; there is no memory-safety precondition.
        unsafe { self.inner.measure_noise(ct.inner()) }.map_err(backend)
    }

    /// Remaining noise budget in bits: decryption is correct while the noise
    /// stays below `Δ/2 ≈ q/(2t)` at the ciphertext's level, so this is
    /// `floor(log2(q/t) - 1) - noise_bits`. Negative means wrong decryption
    /// is possible. Same timing caveat as [`SecretKey::noise_bits`].
    pub fn noise_budget_bits(&self, ct: &Ciphertext) -> Result<i64, HeError> {
        let noise = self.noise_bits(ct)? as f64;
        let q_bits: f64 = self
            .params
            .moduli_at(ct.level())
            .iter()
            .map(|&q| (q as f64).log2())
            .sum();
        let t_bits = (self.params.plain_modulus() as f64).log2();
        Ok((q_bits - t_bits - 1.0 - noise).floor() as i64)
    }

    #[cfg(test)]
    pub(crate) fn coefficients_for_test(&self) -> Vec<i64> {
        use fhe_traits::Serialize;
        let bytes = self.inner.to_bytes();
        SecretKeyProto::decode(bytes.as_slice())
            .map(|p| p.coeffs.clone())
            .unwrap_or_default()
    }
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey(..)")
    }
}

/// `n` coefficients uniform in {-1, 0, 1} from the thread-local CSPRNG
/// (ChaCha, seeded and reseeded from the OS). Rejection sampling: bytes
/// 0..=254 are uniform modulo 3, byte 255 is skipped.
fn ternary_coefficients(n: usize) -> Vec<i64> {
    let mut rng = rand09::rng();
    // Exact capacity: the vector never reallocates, so no stray copies.
    let mut out = Vec::with_capacity(n);
    let mut buf = Zeroizing::new([0u8; 64]);
    while out.len() < n {
        rng.fill_bytes(buf.as_mut());
        for &byte in buf.iter().filter(|&&b| b < 255) {
            if out.len() == n {
                break;
            }
            out.push(i64::from(byte % 3) - 1);
        }
    }
    out
}

/// The client's relinearization key, for ciphertexts at the query level.
///
/// It is generated one level up (over all moduli, special prime included):
/// fhe's leveled key then switches the key-switching result down by `P`,
/// which is SEAL's special-prime technique and keeps relinearization noise
/// far below the product's own noise.
#[derive(Clone)]
pub struct RelinKey {
    pub(crate) params: HeParams,
    pub(crate) inner: RelinearizationKey,
}

impl RelinKey {
    /// Generates the relinearization key of `sk`.
    pub fn generate(sk: &SecretKey) -> Result<Self, HeError> {
        let params = &sk.params;
        if !params.has_key_switching() {
            return Err(HeError::NoKeySwitching);
        }
        let inner =
            RelinearizationKey::new_leveled(&sk.inner, params.query_level(), 0, &mut rand09::rng())
                .map_err(backend)?;
        Ok(Self {
            params: params.clone(),
            inner,
        })
    }

    /// The parameters of this key.
    pub fn params(&self) -> &HeParams {
        &self.params
    }
}

impl fmt::Debug for RelinKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RelinKey(..)")
    }
}
