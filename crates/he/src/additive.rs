//! Additively homomorphic use of BFV: public-key encryption of zero with
//! flooding noise, plaintext-slot products and sums, the switch to the
//! lowest level, all without a relinearization key.
//!
//! Made for protocols that only ever compute `Σ ct_i ⊙ m_i + m` on a
//! peer's ciphertexts and must hide *how* they computed it from the key
//! owner (function privacy): circuit PSI's equality-preserving compression.
//! Use them with [`HeParams::without_key_switching`], which gives the whole
//! 128-bit modulus budget to the ciphertexts.
//!
//! Noise, as the callers' bounds need it (all worst case, so a caller can
//! prove decryption always succeeds):
//!
//! * a fresh [`crate::keys::SecretKey::encrypt_slots`] ciphertext has phase
//!   `(Q/t)·m + e` with `|e| < 2·VARIANCE + 1` per coefficient ([`FRESH_NOISE_BOUND`]):
//!   fhe's error is centered binomial on `4·VARIANCE` coins, so
//!   `|e_0| ≤ 2·VARIANCE`, and fhe encodes `m` as `floor(Q·m/t)` exactly
//!   (it multiplies `[(Q mod t)·m]_t` by `-t⁻¹ mod Q`), which adds `[0, 1)`;
//! * [`dot_plain`] with plaintexts of centered coefficients `|c| ≤ t/2`
//!   multiplies the noise by at most `n·t/2` per term, and because the
//!   encoding is `floor(Q·m/t)` (not `floor(Q/t)·m`) the product has no
//!   `(Q mod t)·m·c/t` term;
//! * [`Ciphertext::add_plain_slots`] adds less than 1;
//! * [`PublicKey::encrypt_zero_flooded`] adds at most
//!   [`public_key_noise_bound`] plus the flooding bound it is given;
//! * [`Ciphertext::switch_to_lowest`] divides the noise by the dropped
//!   moduli and adds at most `(1 + n)/2` (exact rounding, ternary secret).

use std::fmt;

use fhe::bfv::{Ciphertext as FheCiphertext, Encoding, Plaintext, PublicKey as FhePublicKey};
use fhe::proto::bfv::{Ciphertext as CiphertextProto, PublicKey as PublicKeyProto};
use fhe_math::rq::{traits::TryConvertFrom, Poly, Representation};
use fhe_traits::{
    DeserializeParametrized, DeserializeWithContext, FheEncoder, FheEncrypter, Serialize,
};
use prost::Message;
use rand09::RngCore;
use zeroize::Zeroizing;

use crate::ciphertext::Ciphertext;
use crate::encode::PlainPoly;
use crate::error::{backend, HeError};
use crate::eval::part_dot;
use crate::keys::SecretKey;
use crate::params::{HeParams, ERROR_VARIANCE};
use crate::wire::{pack_poly, unpack_poly, SEED_LEN};

/// Bound on every coefficient of a fresh encryption's noise: fhe's centered
/// binomial error is at most `2·VARIANCE` = 22 in absolute value, and the
/// `floor(Q·m/t)` encoding adds less than 1 more.
pub const FRESH_NOISE_BOUND: u64 = 2 * ERROR_VARIANCE as u64 + 1;

/// Bound on the noise of a public-key encryption of zero before flooding:
/// fhe computes `(u·b + e1, u·a + e2)` with `b = -a·s + e`, so the phase is
/// `u·e + e1 + e2·s`; `u`, `e`, `e1`, `e2` have coefficients at most
/// `E = 2·VARIANCE` and `s` is ternary, so this is `n·E² + E + n·E`.
/// Depends on the degree `n` only.
pub fn public_key_noise_bound(degree: usize) -> u64 {
    let n = degree as u64;
    let e = 2 * ERROR_VARIANCE as u64;
    n * e * e + e + n * e
}

/// A BFV public key: an encryption of zero under the secret key, `(b, a)`
/// with `b = -a·s + e` and `a` expanded from a 32-byte seed.
///
/// Wire form ([`PublicKey::to_bytes`], [`crate::wire::public_key_size`]
/// bytes): the seed, then `b` over all moduli, bit-packed like a query
/// ciphertext.
#[derive(Clone)]
pub struct PublicKey {
    params: HeParams,
    inner: FhePublicKey,
    bytes: Vec<u8>,
}

impl PublicKey {
    /// The public key of `sk`.
    pub fn generate(sk: &SecretKey) -> Result<Self, HeError> {
        let params = sk.params().clone();
        let inner = FhePublicKey::new(&sk.inner, &mut rand09::rng());
        // fhe keeps the seed and `b` private; its protobuf (our own bytes,
        // trusted) has both.
        let proto = PublicKeyProto::from(&inner)
            .c
            .ok_or_else(|| HeError::Backend("public key without ciphertext".into()))?;
        let (Some(b), true) = (proto.c.first(), proto.seed.len() == SEED_LEN) else {
            return Err(HeError::Backend("public key is not seeded".into()));
        };
        let b = Poly::from_bytes(b, params.context_at(0)?).map_err(backend)?;
        let mut bytes = Vec::with_capacity(crate::wire::public_key_size(&params));
        bytes.extend_from_slice(&proto.seed);
        pack_poly(&mut bytes, &b);
        Ok(Self {
            params,
            inner,
            bytes,
        })
    }

    /// The wire form: seed ‖ `b`.
    pub fn to_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Decodes [`PublicKey::to_bytes`] output: exact length, every residue
    /// below its modulus, `a` regenerated from the seed. After these checks
    /// the key is rebuilt through fhe's protobuf path with the level set
    /// here, never one from the peer.
    pub fn from_bytes(params: &HeParams, bytes: &[u8]) -> Result<Self, HeError> {
        const WHAT: &str = "public key";
        let expected = crate::wire::public_key_size(params);
        if bytes.len() != expected {
            return Err(HeError::WireLength {
                what: WHAT,
                expected,
                found: bytes.len(),
            });
        }
        let (seed, rest) = bytes.split_at(SEED_LEN);
        let b = unpack_poly(WHAT, rest, (params, 0), Representation::Ntt, 0)?;
        let proto = PublicKeyProto {
            c: Some(CiphertextProto {
                c: vec![b.to_bytes()],
                seed: seed.to_vec(),
                level: 0,
            }),
        };
        let inner =
            FhePublicKey::from_bytes(&proto.encode_to_vec(), params.bfv()).map_err(backend)?;
        Ok(Self {
            params: params.clone(),
            inner,
            bytes: bytes.to_vec(),
        })
    }

    /// The parameters of this key.
    pub fn params(&self) -> &HeParams {
        &self.params
    }

    /// A fresh public-key encryption of zero at the query level whose noise
    /// also holds a flooding term uniform in `[-flood_bound, flood_bound]`
    /// per coefficient (drawn from the thread's OS-seeded CSPRNG).
    ///
    /// Adding it to an evaluation result re-randomizes the ciphertext and,
    /// with `flood_bound ≥ 2^σ·B` for `B` the result's noise bound, hides
    /// that noise from the key owner up to statistical distance `2^-σ` per
    /// coefficient (noise flooding). The total noise is at most
    /// `flood_bound + public_key_noise_bound(n)`.
    pub fn encrypt_zero_flooded(&self, flood_bound: u128) -> Result<Ciphertext, HeError> {
        let params = &self.params;
        let level = params.query_level();
        let pt = Plaintext::zero(Encoding::simd_at_level(level), params.bfv()).map_err(backend)?;
        let mut rng = rand09::rng();
        let mut ct = self.inner.try_encrypt(&pt, &mut rng).map_err(backend)?;
        let flood = flood_poly(params, level, flood_bound, &mut rng)?;
        if let Some(c0) = ct.first_mut() {
            *c0 += &flood;
        }
        Ok(Ciphertext::new(params, ct))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PublicKey(..)")
    }
}

/// A polynomial with coefficients uniform in `[-bound, bound]`, NTT form at
/// `level`. Refuses bounds that are not below half the ciphertext modulus
/// (they would wrap and destroy the message) or above 2^126.
fn flood_poly(
    params: &HeParams,
    level: usize,
    bound: u128,
    rng: &mut impl RngCore,
) -> Result<Poly, HeError> {
    let too_large = || HeError::FloodTooLarge {
        bits: u128::BITS - bound.leading_zeros(),
    };
    let moduli = params.moduli_at(level);
    let half_q = moduli
        .iter()
        .try_fold(1u128, |acc, &q| acc.checked_mul(u128::from(q)))
        .map_or(u128::MAX, |q| q / 2);
    if bound >= half_q || bound > 1 << 126 {
        return Err(too_large());
    }
    let n = params.degree();
    // Uniform in [0, 2·bound] by rejection of masked 128-bit draws: more
    // than half are kept, and the number of rejections says nothing about
    // the values kept.
    let range = 2 * bound;
    let mask = u128::MAX >> range.leading_zeros();
    let mut draw = || loop {
        let x = ((u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64())) & mask;
        if x <= range {
            break x;
        }
    };
    let values: Zeroizing<Vec<u128>> = Zeroizing::new((0..n).map(|_| draw()).collect());
    let mut residues = Zeroizing::new(Vec::with_capacity(n * moduli.len()));
    for &q in moduli {
        let q = u128::from(q);
        // value - bound, reduced into [0, q) without signed arithmetic.
        let shift = q - bound % q;
        residues.extend(values.iter().map(|&v| ((v % q + shift) % q) as u64));
    }
    let ctx = params.context_at(level)?;
    let mut poly =
        Poly::try_convert_from(residues.as_slice(), ctx, false, Representation::PowerBasis)
            .map_err(backend)?;
    poly.change_representation(Representation::Ntt);
    Ok(poly)
}

/// `Σ cts[i] · pts[i]` for 2-part ciphertexts at the query level, in one
/// fused pass per part: the linear step of an additive evaluation, without
/// an [`crate::eval::Evaluator`] (so without a relinearization key).
pub fn dot_plain(cts: &[&Ciphertext], pts: &[&PlainPoly]) -> Result<Ciphertext, HeError> {
    let (Some(first), true) = (cts.first(), cts.len() == pts.len()) else {
        return Err(HeError::DotLengths {
            cts: cts.len(),
            pts: pts.len(),
        });
    };
    let params = &first.params;
    for ct in cts {
        ct.check_params(params)?;
        ct.check_shape("dot_plain", params.query_level(), 2)?;
    }
    if pts.iter().any(|pt| !pt.params.same(params)) {
        return Err(HeError::ParamsMismatch);
    }
    let polys = (0..2)
        .map(|i| part_dot(cts, pts, i))
        .collect::<Result<Vec<Poly>, HeError>>()?;
    let inner = FheCiphertext::new(polys, params.bfv()).map_err(backend)?;
    Ok(Ciphertext::new(params, inner))
}

impl Ciphertext {
    /// `self += other`, both 2-part ciphertexts of the same parameters and
    /// level.
    pub fn add_ciphertext(&mut self, other: &Ciphertext) -> Result<(), HeError> {
        other.check_params(&self.params)?;
        self.check_shape("add_ciphertext", self.level(), 2)?;
        other.check_shape("add_ciphertext", self.level(), 2)?;
        *self.inner_mut() += other.inner();
        Ok(())
    }

    /// Adds the encoding of up to `n` slot values (each below `t`, missing
    /// slots 0): the message gains the slots, the noise less than 1.
    pub fn add_plain_slots(&mut self, slots: &[u64]) -> Result<(), HeError> {
        self.params.check_slots(slots)?;
        self.check_shape("add_plain_slots", self.level(), 2)?;
        let encoding = Encoding::simd_at_level(self.level());
        let pt = Plaintext::try_encode(slots, encoding, self.params.bfv()).map_err(backend)?;
        *self.inner_mut() += &pt;
        Ok(())
    }

    /// Switches a 2-part ciphertext down to the lowest level (only `q_1`
    /// left), rounding exactly: the noise is divided by the dropped moduli
    /// and gains at most `(1 + n)/2`. No-op if already there.
    pub fn switch_to_lowest(&mut self) -> Result<(), HeError> {
        self.check_shape("switch_to_lowest", self.level(), 2)?;
        let lowest = self.params.lowest_level();
        self.inner_mut().switch_to_level(lowest).map_err(backend)
    }
}

impl PlainPoly {
    /// Up to `n` slot values (each below `t`, missing slots 0) as a
    /// plaintext ready for [`dot_plain`] and [`crate::eval::Evaluator::dot`]: one
    /// inverse batching transform mod t, the centered lift (coefficients in
    /// `(-t/2, t/2]`, the smallest noise growth) and one NTT per modulus.
    pub fn from_slots(params: &HeParams, slots: &[u64]) -> Result<Self, HeError> {
        let coeffs = params.slots_to_coeffs(slots)?;
        crate::encode::lift_centered(params, &coeffs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> HeParams {
        HeParams::without_key_switching(4096, 40961, &[46, 45]).unwrap()
    }

    #[test]
    fn no_relinearization_without_special_prime() {
        let p = params();
        assert_eq!(p.query_level(), 0);
        assert!(!p.has_key_switching());
        let sk = SecretKey::generate(&p).unwrap();
        assert_eq!(
            crate::keys::RelinKey::generate(&sk).unwrap_err(),
            HeError::NoKeySwitching
        );
        assert_eq!(
            HeParams::without_key_switching(4096, 40961, &[]).unwrap_err(),
            HeError::NoModuli
        );
        assert!(matches!(
            HeParams::without_key_switching(4096, 40961, &[55, 55]),
            Err(HeError::Insecure { .. })
        ));
    }

    #[test]
    fn linear_evaluation_with_flooding_decrypts() {
        let p = params();
        let t = p.plain_modulus();
        let sk = SecretKey::generate(&p).unwrap();
        let pk = PublicKey::generate(&sk).unwrap();
        let pk = PublicKey::from_bytes(&p, pk.to_bytes()).unwrap();
        let a: Vec<u64> = (0..4096).map(|i| i * 7 % t).collect();
        let b: Vec<u64> = (0..4096).map(|i| (i * i + 3) % t).collect();
        let k: Vec<u64> = (0..4096).map(|i| (t - 1 - i) % t).collect();
        let ca = sk.encrypt_slots(&a).unwrap();
        let cb = sk.encrypt_slots(&b).unwrap();
        let ka = PlainPoly::from_slots(&p, &k).unwrap();
        let ones = PlainPoly::from_slots(&p, &[1; 4096]).unwrap();
        let mut ct = dot_plain(&[&ca, &cb], &[&ka, &ones]).unwrap();
        ct.add_plain_slots(&[5; 4096]).unwrap();
        let fresh_noise = sk.noise_bits(&ct).unwrap();
        ct.add_ciphertext(&pk.encrypt_zero_flooded(1 << 70).unwrap())
            .unwrap();
        let flooded = sk.noise_bits(&ct).unwrap();
        assert!((68..=71).contains(&flooded), "{fresh_noise} -> {flooded}");
        ct.switch_to_lowest().unwrap();
        let got = sk.decrypt_slots(&ct).unwrap();
        for i in 0..4096 {
            assert_eq!(got[i], (a[i] * k[i] + b[i] + 5) % t, "slot {i}");
        }
        assert!(sk.noise_budget_bits(&ct).unwrap() > 0);
    }

    #[test]
    fn refuses_bad_inputs() {
        let p = params();
        let sk = SecretKey::generate(&p).unwrap();
        let pk = PublicKey::generate(&sk).unwrap();
        let bytes = pk.to_bytes();
        assert_eq!(bytes.len(), crate::wire::public_key_size(&p));
        assert!(matches!(
            PublicKey::from_bytes(&p, &bytes[1..]),
            Err(HeError::WireLength { .. })
        ));
        // The first residue of b all ones: 46 bits above q_1.
        let mut bad = bytes.to_vec();
        for byte in &mut bad[SEED_LEN..SEED_LEN + 6] {
            *byte = 0xff;
        }
        assert!(matches!(
            PublicKey::from_bytes(&p, &bad),
            Err(HeError::WireCoefficient { .. })
        ));
        assert!(matches!(
            pk.encrypt_zero_flooded(1 << 100),
            Err(HeError::FloodTooLarge { .. })
        ));
        assert!(matches!(
            dot_plain(&[], &[]),
            Err(HeError::DotLengths { .. })
        ));
        let mut ct = sk.encrypt_slots(&[1]).unwrap();
        ct.switch_to_lowest().unwrap();
        let fresh = sk.encrypt_slots(&[1]).unwrap();
        assert!(matches!(
            ct.add_ciphertext(&fresh),
            Err(HeError::WrongLevel { .. })
        ));
        assert!(matches!(
            ct.add_plain_slots(&[40961]),
            Err(HeError::SlotOutOfRange { .. })
        ));
    }
}
