//! The 128-bit security bound on the coefficient modulus.
//!
//! BFV's hardness rests on RLWE with ring degree `n` and modulus `Q`: for a
//! fixed `n`, a larger `Q` is easier to attack. The HomomorphicEncryption.org
//! standard tabulates, per `n`, the largest `log2 Q` that still gives 128 bits
//! of classical security for a **ternary** secret and error width σ ≈ 3.2; SEAL
//! ships the same numbers (`SEAL_HE_STD_PARMS_128_TC`) and fhe's
//! `default_parameters_128` moduli add up to exactly these totals. The bound
//! applies to the product of *all* moduli, the special key-switching prime
//! included, because the relinearization key is an RLWE sample modulo that
//! full product.
//!
//! The table assumes a ternary secret, which is why [`crate::keys::SecretKey`]
//! samples one instead of fhe's default centered-binomial secret.

use crate::error::HeError;

/// `(n, max total bits of all coefficient moduli)` for 128-bit security.
pub const MAX_BITS_128: [(usize, usize); 6] = [
    (1024, 27),
    (2048, 54),
    (4096, 109),
    (8192, 218),
    (16384, 438),
    (32768, 881),
];

/// Largest total modulus size (bits) allowed at `degree`, if the degree is
/// in the table.
pub fn max_bits_128(degree: usize) -> Option<usize> {
    MAX_BITS_128
        .iter()
        .find(|(n, _)| *n == degree)
        .map(|(_, bits)| *bits)
}

/// Checks that moduli of these bit lengths give 128-bit security at `degree`.
///
/// Pass the bit lengths of the primes actually generated (a prime asked for
/// with `b` bits has exactly `b` bits in fhe, but callers with explicit
/// moduli must measure them). Degrees outside the table are rejected rather
/// than guessed.
pub fn check_128(degree: usize, moduli_bits: &[usize]) -> Result<(), HeError> {
    let max_bits = max_bits_128(degree).ok_or(HeError::UnsupportedDegree(degree))?;
    let total_bits: usize = moduli_bits.iter().sum();
    if total_bits > max_bits {
        return Err(HeError::Insecure {
            degree,
            total_bits,
            max_bits,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_apsi_8192_set() {
        assert_eq!(check_128(8192, &[56, 56, 56, 50]), Ok(()));
        assert_eq!(check_128(4096, &[40, 32, 32]), Ok(()));
        assert_eq!(check_128(4096, &[109]), Ok(()));
    }

    #[test]
    fn rejects_one_bit_too_many() {
        assert_eq!(
            check_128(8192, &[56, 56, 56, 51]),
            Err(HeError::Insecure {
                degree: 8192,
                total_bits: 219,
                max_bits: 218
            })
        );
        assert!(check_128(4096, &[40, 40, 30]).is_err());
    }

    #[test]
    fn rejects_unknown_degree() {
        assert_eq!(check_128(512, &[20]), Err(HeError::UnsupportedDegree(512)));
        assert_eq!(
            check_128(65536, &[20]),
            Err(HeError::UnsupportedDegree(65536))
        );
    }
}
