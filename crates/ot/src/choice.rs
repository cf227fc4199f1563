//! Packed choice bits (secret: wiped on drop and never printed).

use rand::{CryptoRng, Rng, RngCore};
use zeroize::{Zeroize, ZeroizeOnDrop};

/// A vector of OT choice bits, packed little-endian (bit `i` is bit `i % 8`
/// of byte `i / 8`), the layout the OT-extension matrix uses. Unused bits of
/// the last byte are always zero.
#[derive(Clone, Default, PartialEq, Eq, Zeroize, ZeroizeOnDrop)]
pub struct ChoiceBits {
    bytes: Vec<u8>,
    len: usize,
}

impl std::fmt::Debug for ChoiceBits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ChoiceBits({} bits, hidden)", self.len)
    }
}

impl ChoiceBits {
    /// `len` zero bits.
    pub fn zeros(len: usize) -> Self {
        Self {
            bytes: vec![0; len.div_ceil(8)],
            len,
        }
    }

    /// From one `bool` per bit.
    pub fn from_bools(bits: &[bool]) -> Self {
        let mut c = Self::zeros(bits.len());
        for (i, b) in bits.iter().enumerate() {
            c.set(i, *b);
        }
        c
    }

    /// From packed bytes (little-endian bit order); bits past `len` are
    /// cleared. Fails if `bytes` is too short.
    pub fn from_bytes(mut bytes: Vec<u8>, len: usize) -> Option<Self> {
        if bytes.len() < len.div_ceil(8) {
            return None;
        }
        bytes.truncate(len.div_ceil(8));
        let mut c = Self { bytes, len };
        c.clear_tail();
        Some(c)
    }

    /// Uniformly random bits.
    pub fn random<R: RngCore + CryptoRng>(len: usize, rng: &mut R) -> Self {
        let mut bytes = vec![0u8; len.div_ceil(8)];
        rng.fill_bytes(&mut bytes);
        let mut c = Self { bytes, len };
        c.clear_tail();
        c
    }

    /// Exactly `ones` one-bits at uniformly random positions (Rindal-Rosulek
    /// receivers use a fixed fraction alpha of ones). Sequential selection
    /// sampling: linear time, no extra memory. Panics if `ones > len`.
    pub fn random_with_ones<R: RngCore + CryptoRng>(len: usize, ones: usize, rng: &mut R) -> Self {
        assert!(ones <= len, "cannot place {ones} ones in {len} bits");
        let mut c = Self::zeros(len);
        let mut needed = ones as u64;
        for i in 0..len {
            let remaining = (len - i) as u64;
            if rng.gen_range(0..remaining) < needed {
                c.set(i, true);
                needed -= 1;
            }
        }
        c
    }

    /// Number of bits.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bit `i` (panics if out of range).
    pub fn get(&self, i: usize) -> bool {
        assert!(i < self.len, "choice bit {i} out of range");
        (self.bytes[i / 8] >> (i % 8)) & 1 == 1
    }

    /// Sets bit `i` (panics if out of range).
    pub fn set(&mut self, i: usize, value: bool) {
        assert!(i < self.len, "choice bit {i} out of range");
        let m = 1u8 << (i % 8);
        self.bytes[i / 8] = (self.bytes[i / 8] & !m) | (u8::from(value) << (i % 8));
    }

    /// How many bits are one.
    pub fn count_ones(&self) -> usize {
        self.bytes.iter().map(|b| b.count_ones() as usize).sum()
    }

    /// The packed bytes (`len.div_ceil(8)` of them).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Bit `i` as an all-zeros or all-ones 128-bit mask (branch-free).
    pub fn mask(&self, i: usize) -> u128 {
        u128::from(self.get(i)).wrapping_neg()
    }

    /// A copy extended to `len` bits (a multiple of 8) with random bits.
    pub(crate) fn padded<R: RngCore + CryptoRng>(&self, len: usize, rng: &mut R) -> Vec<u8> {
        debug_assert!(len >= self.len && len.is_multiple_of(8));
        let mut out = vec![0u8; len / 8];
        rng.fill_bytes(&mut out);
        let full = self.len / 8;
        out[..full].copy_from_slice(&self.bytes[..full]);
        if !self.len.is_multiple_of(8) {
            let keep = (1u8 << (self.len % 8)) - 1;
            out[full] = (out[full] & !keep) | self.bytes[full];
        }
        out
    }

    /// Takes the first `len` bits of packed bytes.
    pub(crate) fn from_padded(mut bytes: Vec<u8>, len: usize) -> Self {
        bytes.truncate(len.div_ceil(8));
        let mut c = Self { bytes, len };
        c.clear_tail();
        c
    }

    fn clear_tail(&mut self) {
        if !self.len.is_multiple_of(8) {
            let last = self.bytes.len() - 1;
            self.bytes[last] &= (1u8 << (self.len % 8)) - 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn bits_round_trip_and_count() {
        let bools: Vec<bool> = (0..77).map(|i| i % 3 == 0).collect();
        let c = ChoiceBits::from_bools(&bools);
        assert_eq!(c.len(), 77);
        for (i, b) in bools.iter().enumerate() {
            assert_eq!(c.get(i), *b);
            assert_eq!(c.mask(i), if *b { u128::MAX } else { 0 });
        }
        assert_eq!(c.count_ones(), bools.iter().filter(|b| **b).count());
        assert_eq!(
            ChoiceBits::from_bytes(c.as_bytes().to_vec(), 77),
            Some(c.clone())
        );
        assert!(ChoiceBits::from_bytes(vec![0; 9], 77).is_none());
        assert!(!format!("{c:?}").contains("true"));
    }

    #[test]
    fn biased_sampling_has_exact_weight_and_padding_keeps_bits() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let c = ChoiceBits::random_with_ones(10_000, 1_000, &mut rng);
        assert_eq!(c.count_ones(), 1_000);
        let p = c.padded(10_240, &mut rng);
        assert_eq!(ChoiceBits::from_padded(p, 10_000), c);
        let r = ChoiceBits::random(13, &mut rng);
        assert_eq!(r.as_bytes()[1] >> 5, 0);
    }
}
