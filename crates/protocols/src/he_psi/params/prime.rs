//! Primes: SEAL's batching prime search (`plain_modulus_bits`) and the
//! deterministic Miller-Rabin test it and the validation use.

use super::error::{invalid, Result};
use super::limits::MODULUS_BITS_MAX;

/// SEAL's `PlainModulus::Batching(n, bits)`: the largest prime `t` with
/// `2^(bits-1) < t < 2^bits` and `t = 1 mod 2n`.
///
/// SEAL walks down from `2^bits - 2n + 1` in steps of `2n`; so do we, so the
/// same file gives the same prime in both implementations.
pub fn batching_prime(poly_modulus_degree: u32, bits: u32) -> Result<u64> {
    if !(2..=MODULUS_BITS_MAX).contains(&bits) {
        return Err(invalid(format!(
            "seal_params.plain_modulus_bits must be in 2..={MODULUS_BITS_MAX}, got {bits}"
        )));
    }
    let step = 2 * u64::from(poly_modulus_degree);
    let top = 1u64 << bits;
    let lower = top >> 1;
    let mut candidate = top.checked_sub(step).map(|v| v + 1);
    while let Some(c) = candidate.filter(|&c| c > lower) {
        if is_prime(c) {
            return Ok(c);
        }
        candidate = c.checked_sub(step);
    }
    Err(invalid(format!(
        "seal_params.plain_modulus_bits: no {bits}-bit prime is 1 mod 2 * poly_modulus_degree \
         ({step})"
    )))
}

/// Deterministic Miller-Rabin for 64-bit integers.
///
/// The first twelve primes as witnesses are known to decide primality for
/// every `n < 3.3 * 10^24`, which covers all of `u64`.
pub fn is_prime(n: u64) -> bool {
    const WITNESSES: [u64; 12] = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37];
    if n < 2 {
        return false;
    }
    if let Some(&p) = WITNESSES.iter().find(|&&p| n.is_multiple_of(p)) {
        return n == p;
    }
    let s = (n - 1).trailing_zeros();
    let odd = (n - 1) >> s;
    WITNESSES.iter().all(|&a| passes_round(n, a, odd, s))
}

/// One Miller-Rabin round with `n - 1 = odd * 2^s`: `n` passes for witness
/// `a` if `a^odd = 1` or `a^(odd * 2^r) = n - 1` for some `r < s`.
fn passes_round(n: u64, a: u64, odd: u64, s: u32) -> bool {
    let mut x = pow_mod(a, odd, n);
    if x == 1 || x == n - 1 {
        return true;
    }
    for _ in 1..s {
        x = mul_mod(x, x, n);
        if x == n - 1 {
            return true;
        }
    }
    false
}

fn mul_mod(a: u64, b: u64, m: u64) -> u64 {
    ((u128::from(a) * u128::from(b)) % u128::from(m)) as u64
}

fn pow_mod(mut base: u64, mut exp: u64, m: u64) -> u64 {
    let mut acc = 1 % m;
    base %= m;
    while exp > 0 {
        if exp & 1 == 1 {
            acc = mul_mod(acc, base, m);
        }
        base = mul_mod(base, base, m);
        exp >>= 1;
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::PS_1M_4096_32;
    use super::super::types::PsiParams;
    use super::*;

    #[test]
    fn plain_modulus_bits_is_seals_batching_prime() {
        let p = PsiParams::from_apsi_json(PS_1M_4096_32).unwrap();
        let t = p.seal.plain_modulus;
        assert_eq!(t, 1_785_857);
        assert_eq!(p.bits_per_felt(), 20);
        assert!(is_prime(t) && t % 16_384 == 1 && t < 1 << 21);
        let mut above = t + 16_384;
        while above < 1 << 21 {
            assert!(!is_prime(above), "{above} is a larger candidate");
            above += 16_384;
        }
        // SEAL's examples: PlainModulus::Batching(8192, 20) = 1032193.
        assert_eq!(batching_prime(8192, 20).unwrap(), 1_032_193);
        assert_eq!(batching_prime(16_384, 20).unwrap(), 786_433);
        // 1M-1024-cmp.json's plain_modulus is the 16-bit batching prime.
        assert_eq!(batching_prime(4096, 16).unwrap(), 40_961);
        assert_eq!(batching_prime(4096, 17).unwrap(), 114_689);
        assert_eq!(batching_prime(8192, 22).unwrap(), 4_079_617);
    }

    #[test]
    fn batching_prime_rejects_impossible_requests() {
        assert!(batching_prime(8192, 1).is_err());
        assert!(batching_prime(8192, 61).is_err());
        // 2^14 < 2n: no candidate at all.
        let message = batching_prime(8192, 14).unwrap_err().to_string();
        assert!(message.contains("plain_modulus_bits"), "{message}");
    }

    #[test]
    fn miller_rabin_agrees_with_a_sieve_and_known_values() {
        let limit = 20_000usize;
        let mut composite = vec![false; limit];
        for i in 2..limit {
            if !composite[i] {
                (i * i..limit).step_by(i).for_each(|j| composite[j] = true);
            }
            assert_eq!(is_prime(i as u64), !composite[i], "{i}");
        }
        assert!(!is_prime(0) && !is_prime(1));
        assert!(is_prime((1 << 61) - 1));
        assert!(is_prime(18_446_744_073_709_551_557)); // largest u64 prime
        assert!(!is_prime(561)); // Carmichael
        assert!(!is_prime(3_215_031_751)); // strong pseudoprime to 2, 3, 5, 7
        assert!(!is_prime(3_825_123_056_546_413_051)); // ... to bases up to 23
        assert!(!is_prime(u64::MAX));
    }
}
