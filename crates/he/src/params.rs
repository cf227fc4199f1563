//! BFV parameters and the SIMD slot layout.

use std::fmt;
use std::sync::Arc;

use fhe::bfv::{BfvParameters, BfvParametersBuilder};
use fhe_math::ntt::NttOperator;
use fhe_math::rq::Context;
use fhe_math::zq::{primes::generate_prime, Modulus};

use crate::error::{backend, HeError};
use crate::pack::bit_width;
use crate::security::{check_128, max_bits_128};

/// Error variance of fhe's centered binomial noise. fhe's default, 10, is
/// σ ≈ 3.16, just under the σ = 3.2 the security table assumes; 11 (σ ≈ 3.32)
/// stays on the safe side for 0.07 bit more noise.
pub(crate) const ERROR_VARIANCE: usize = 11;

/// The level fresh query ciphertexts live at with a key-switching prime:
/// every modulus but the last.
const QUERY_LEVEL: usize = 1;

/// BFV parameters `(n, t, q_1..q_k, P)`, shared cheaply by every key,
/// ciphertext and plaintext made from them.
///
/// The last modulus `P` is the special key-switching prime, as in SEAL and
/// APSI: ciphertexts never carry it (they start at the *query level*, all
/// moduli but `P`), only the relinearization key does, which keeps
/// relinearization noise small. fhe numbers levels by how many moduli were
/// dropped from the end, so the query level is 1 and the lowest level, where
/// only `q_1` is left, is `k`.
#[derive(Clone)]
pub struct HeParams {
    inner: Arc<Inner>,
}

struct Inner {
    bfv: Arc<BfvParameters>,
    moduli_bits: Vec<usize>,
    /// [`QUERY_LEVEL`], or 0 for [`HeParams::without_key_switching`].
    query_level: usize,
    /// NTT modulo t, i.e. the batching transform.
    plain_ntt: NttOperator,
    /// Slot `i` is NTT position `slot_index[i]` (SEAL's batching order).
    slot_index: Box<[usize]>,
}

impl HeParams {
    /// Builds parameters of degree `degree`, plaintext modulus `plain_modulus`
    /// and one generated prime per entry of `moduli_bits` (APSI's
    /// `coeff_modulus_bits`, special prime last).
    ///
    /// Rejects sets above the 128-bit bound, fewer than two moduli, and `t`
    /// that is not a prime `= 1 mod 2n` below `q_1`.
    pub fn new(degree: usize, plain_modulus: u64, moduli_bits: &[usize]) -> Result<Self, HeError> {
        if moduli_bits.len() < 2 {
            return Err(HeError::TooFewModuli(moduli_bits.len()));
        }
        Self::build(degree, plain_modulus, moduli_bits, QUERY_LEVEL)
    }

    /// Parameters for additive use only (ciphertext-plaintext products and
    /// sums, public-key encryption; no ciphertext products): no special
    /// prime, so fresh ciphertexts use *all* moduli (the query level is 0)
    /// and the whole 128-bit budget goes to the ciphertext modulus.
    /// [`crate::keys::RelinKey::generate`] refuses them.
    ///
    /// Same checks as [`HeParams::new`], with at least one modulus.
    pub fn without_key_switching(
        degree: usize,
        plain_modulus: u64,
        moduli_bits: &[usize],
    ) -> Result<Self, HeError> {
        if moduli_bits.is_empty() {
            return Err(HeError::NoModuli);
        }
        Self::build(degree, plain_modulus, moduli_bits, 0)
    }

    fn build(
        degree: usize,
        plain_modulus: u64,
        moduli_bits: &[usize],
        query_level: usize,
    ) -> Result<Self, HeError> {
        max_bits_128(degree).ok_or(HeError::UnsupportedDegree(degree))?;
        let moduli = generate_moduli(degree, moduli_bits)?;
        let actual_bits: Vec<usize> = moduli.iter().map(|&q| bit_width(q)).collect();
        check_128(degree, &actual_bits)?;
        let plain_ntt = check_plain_modulus(degree, plain_modulus, &moduli)?;
        let bfv = BfvParametersBuilder::new()
            .set_degree(degree)
            .set_plaintext_modulus(plain_modulus)
            .set_moduli(&moduli)
            .set_variance(ERROR_VARIANCE)
            .build_arc()
            .map_err(backend)?;
        let inner = Inner {
            bfv,
            moduli_bits: actual_bits,
            query_level,
            plain_ntt,
            slot_index: slot_index_map(degree).into(),
        };
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// SEAL's `PlainModulus::Batching(degree, bits)`: the largest `bits`-bit
    /// prime that is 1 mod `2 * degree`, so that it supports batching.
    pub fn plain_modulus_for_bits(degree: usize, bits: usize) -> Result<u64, HeError> {
        max_bits_128(degree).ok_or(HeError::UnsupportedDegree(degree))?;
        let two_n = 2 * degree as u64;
        if !(10..=62).contains(&bits) {
            return Err(HeError::NoPrime {
                bits,
                modulus: two_n,
            });
        }
        generate_prime(bits, two_n, 1 << bits).ok_or(HeError::NoPrime {
            bits,
            modulus: two_n,
        })
    }

    /// Polynomial degree `n`.
    pub fn degree(&self) -> usize {
        self.inner.bfv.degree()
    }

    /// Plaintext modulus `t`.
    pub fn plain_modulus(&self) -> u64 {
        self.inner.bfv.plaintext()
    }

    /// Coefficient moduli, special prime last.
    pub fn moduli(&self) -> &[u64] {
        self.inner.bfv.moduli()
    }

    /// Bit lengths of the generated moduli (what the security check summed).
    pub fn moduli_bits(&self) -> &[usize] {
        &self.inner.moduli_bits
    }

    /// Number of SIMD slots: `n`, each an element of `F_t`.
    pub fn slot_count(&self) -> usize {
        self.degree()
    }

    /// Level of fresh query ciphertexts and of every evaluation: all moduli
    /// but the special prime (all moduli, level 0, for
    /// [`HeParams::without_key_switching`]).
    pub fn query_level(&self) -> usize {
        self.inner.query_level
    }

    /// False for [`HeParams::without_key_switching`] parameters, which have
    /// no special prime and so no relinearization.
    pub fn has_key_switching(&self) -> bool {
        self.inner.query_level == QUERY_LEVEL
    }

    /// Level with only `q_1` left, where results are sent back.
    pub fn lowest_level(&self) -> usize {
        self.moduli().len() - 1
    }

    /// Moduli a ciphertext at `level` is defined over.
    pub fn moduli_at(&self, level: usize) -> &[u64] {
        let moduli = self.moduli();
        &moduli[..moduli.len().saturating_sub(level)]
    }

    /// True when both handles come from the same `HeParams::new` call; fhe
    /// refuses to mix objects of different parameter instances.
    pub fn same(&self, other: &HeParams) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    pub(crate) fn bfv(&self) -> &Arc<BfvParameters> {
        &self.inner.bfv
    }

    pub(crate) fn context_at(&self, level: usize) -> Result<&Arc<Context>, HeError> {
        self.inner.bfv.context_at_level(level).map_err(backend)
    }

    /// Checks that `slots` fit (at most `n` values, each below `t`).
    pub(crate) fn check_slots(&self, slots: &[u64]) -> Result<(), HeError> {
        if slots.len() > self.slot_count() {
            return Err(HeError::TooManySlots {
                got: slots.len(),
                max: self.slot_count(),
            });
        }
        let t = self.plain_modulus();
        match slots.iter().position(|&v| v >= t) {
            Some(index) => Err(HeError::SlotOutOfRange {
                index,
                value: slots[index],
                modulus: t,
            }),
            None => Ok(()),
        }
    }

    /// Inverse batching transform: slot values to the coefficients mod t of
    /// the plaintext polynomial `m(x)`. Missing slots are zero.
    pub(crate) fn slots_to_coeffs(&self, slots: &[u64]) -> Result<Vec<u64>, HeError> {
        self.check_slots(slots)?;
        let mut coeffs = vec![0u64; self.degree()];
        for (&position, &value) in self.inner.slot_index.iter().zip(slots) {
            coeffs[position] = value;
        }
        self.inner.plain_ntt.backward(&mut coeffs);
        Ok(coeffs)
    }

    /// Batching transform: coefficients mod t (exactly `n`) to slot values.
    pub(crate) fn coeffs_to_slots(&self, mut coeffs: Vec<u64>) -> Vec<u64> {
        self.inner.plain_ntt.forward(&mut coeffs);
        self.inner.slot_index.iter().map(|&p| coeffs[p]).collect()
    }
}

impl fmt::Debug for HeParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeParams")
            .field("degree", &self.degree())
            .field("plain_modulus", &self.plain_modulus())
            .field("moduli", &self.moduli())
            .field("key_switching", &self.has_key_switching())
            .finish()
    }
}

/// One prime per requested size, each the largest unused prime of exactly
/// that size that is 1 mod 2n (so it supports the negacyclic NTT). This is
/// the rule fhe's builder applies to `set_moduli_sizes`; doing it here lets us
/// check the actual primes before fhe sees them.
fn generate_moduli(degree: usize, moduli_bits: &[usize]) -> Result<Vec<u64>, HeError> {
    let two_n = 2 * degree as u64;
    let mut moduli: Vec<u64> = Vec::with_capacity(moduli_bits.len());
    for (index, &bits) in moduli_bits.iter().enumerate() {
        if !(10..=62).contains(&bits) {
            return Err(HeError::ModulusSize { index, bits });
        }
        let mut bound = 1u64 << bits;
        let prime = loop {
            let p = generate_prime(bits, two_n, bound).ok_or(HeError::NoPrime {
                bits,
                modulus: two_n,
            })?;
            if !moduli.contains(&p) {
                break p;
            }
            bound = p;
        };
        moduli.push(prime);
    }
    Ok(moduli)
}

/// Validates `t` and builds its batching NTT. `t` must be a prime
/// `= 1 mod 2n` (batching), below `q_1` (decryption at the lowest level) and
/// distinct from every `q_i` (fhe inverts `t` modulo each `q_i`).
fn check_plain_modulus(degree: usize, t: u64, moduli: &[u64]) -> Result<NttOperator, HeError> {
    let two_n = 2 * degree as u64;
    if t % two_n != 1 {
        return Err(HeError::PlainNotBatching { t, two_n });
    }
    if t >= moduli[0] {
        return Err(HeError::PlainTooLarge { t, q1: moduli[0] });
    }
    if moduli.contains(&t) {
        return Err(HeError::PlainIsCoefficientModulus(t));
    }
    let plain = Modulus::new(t).map_err(|_| HeError::PlainNotPrime(t))?;
    // fhe-math builds an NTT only for primes = 1 mod 2n; the congruence was
    // checked above, so failure means t is composite.
    NttOperator::new(&plain, degree).ok_or(HeError::PlainNotPrime(t))
}

/// SEAL's slot order: slot `i < n/2` is the evaluation at `ζ^(3^i)`, slot
/// `n/2 + i` at `ζ^(-3^i)`, for ζ a primitive 2n-th root of unity mod t. The
/// NTT stores evaluation `ζ^(2j+1)` at bit-reversed position `j`.
fn slot_index_map(degree: usize) -> Vec<usize> {
    let log_n = degree.trailing_zeros();
    let bit_reverse = |j: usize| j.reverse_bits() >> (usize::BITS - log_n);
    let two_n = 2 * degree;
    let half = degree / 2;
    let mut map = vec![0usize; degree];
    let mut power = 1usize;
    for i in 0..half {
        map[i] = bit_reverse((power - 1) / 2);
        map[half + i] = bit_reverse((two_n - power - 1) / 2);
        power = power * 3 % two_n;
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apsi_sets_build() {
        let p = HeParams::new(4096, 40961, &[40, 32, 32]).unwrap();
        assert_eq!(p.moduli_bits(), &[40, 32, 32]);
        assert_eq!(p.query_level(), 1);
        assert_eq!(p.lowest_level(), 2);
        assert_eq!(p.moduli_at(1).len(), 2);
        assert_eq!(p.slot_count(), 4096);
        // Equal sizes give distinct primes, each 1 mod 2n.
        assert_ne!(p.moduli()[1], p.moduli()[2]);
        assert!(p.moduli().iter().all(|q| q % 8192 == 1));
        let p = HeParams::new(8192, 65537, &[56, 56, 56, 50]).unwrap();
        assert_eq!(p.moduli_bits().iter().sum::<usize>(), 218);
    }

    #[test]
    fn rejects_bad_sets() {
        assert!(matches!(
            HeParams::new(8192, 65537, &[56, 56, 56, 51]),
            Err(HeError::Insecure {
                total_bits: 219,
                ..
            })
        ));
        assert_eq!(
            HeParams::new(4096, 40961, &[60]).unwrap_err(),
            HeError::TooFewModuli(1)
        );
        assert_eq!(
            HeParams::new(4096, 40961, &[40, 9]).unwrap_err(),
            HeError::ModulusSize { index: 1, bits: 9 }
        );
        assert!(matches!(
            HeParams::new(4096, 40963, &[40, 32, 32]),
            Err(HeError::PlainNotBatching { .. })
        ));
        // 3 * 8192 + 1 = 24577 = 7 * 3511.
        assert_eq!(
            HeParams::new(4096, 24577, &[40, 32, 32]).unwrap_err(),
            HeError::PlainNotPrime(24577)
        );
        assert_eq!(
            HeParams::new(3000, 40961, &[40, 32]).unwrap_err(),
            HeError::UnsupportedDegree(3000)
        );
    }

    #[test]
    fn plain_modulus_for_bits_matches_seal() {
        // SEAL's examples print 1032193 for PlainModulus::Batching(8192, 20).
        assert_eq!(HeParams::plain_modulus_for_bits(8192, 20), Ok(1032193));
        let t = HeParams::plain_modulus_for_bits(4096, 17).unwrap();
        assert_eq!(t % 8192, 1);
        assert_eq!(bit_width(t), 17);
        assert!(HeParams::new(4096, t, &[40, 32, 32]).is_ok());
        assert!(HeParams::plain_modulus_for_bits(4096, 9).is_err());
    }

    #[test]
    fn batching_round_trip() {
        let p = HeParams::new(4096, 40961, &[40, 32, 32]).unwrap();
        let slots: Vec<u64> = (0..4096u64).map(|i| i * 7919 % 40961).collect();
        let coeffs = p.slots_to_coeffs(&slots).unwrap();
        assert_ne!(coeffs, slots);
        assert_eq!(p.coeffs_to_slots(coeffs), slots);
        // The all-ones slot vector is the constant polynomial 1.
        let ones = p.slots_to_coeffs(&vec![1; 4096]).unwrap();
        assert_eq!(ones[0], 1);
        assert!(ones[1..].iter().all(|&c| c == 0));
    }
}
